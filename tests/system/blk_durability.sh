#!/usr/bin/env bash
# Nothing acknowledged is lost, and a full host disk hurts only the guest.
#
# 1. SIGKILL during writes, for cache=writeback and cache=none: the guest
#    writes numbered 4 KiB blocks with O_DIRECT, 8 at a time, each group
#    followed by a FLUSH (dd conv=fsync), and prints the last block number
#    after every completed flush. The host kills mvm with SIGKILL at a
#    random moment; every block up to the last flushed number it saw must
#    then be on the image. (On this harness the image sits on tmpfs, which
#    refuses O_DIRECT: cache=none then falls back to buffered I/O, with
#    mvm's warning. The kill tests that mvm acknowledges nothing before
#    the host has it, on both paths.)
# 2. ENOSPC: the image on a small tmpfs fills up; the guest's writes fail
#    with an I/O error, mvm keeps running, and once the host frees space
#    new writes work and the guest exits 0.
. "$(dirname "$0")/lib.sh"

# On failure: what mvm printed.
fail() {
	echo "FAIL: $*"
	for f in "$SYS_TMP"/out*; do
		[ -f "$f" ] && tr -d '\r' <"$f" | tail -n 15 | sed "s#^#    ${f##*/}| #"
	done
	exit 1
}

# wait_line FILE REGEX PID [SECONDS]: until FILE has a line matching REGEX.
# (A deadline, not a count of rounds: each round forks, which is slow
# under emulation. The console's lines end in CR LF.)
wait_line() {
	local end=$((SECONDS + ${4:-90}))
	while [ $SECONDS -lt $end ]; do
		tr -d '\r' <"$1" 2>/dev/null | grep -qE -- "$2" && return 0
		kill -0 "$3" 2>/dev/null || fail "mvm ended early"
		sleep 0.2
	done
	fail "no line matching '$2' within ${4:-90} s"
}

writer='
i=0; n=8
while [ $i -lt 16000 ]; do
	: >/tmp/chunk
	j=0
	while [ $j -lt $n ]; do printf "%-4095s\n" "MVM-BLOCK $((i + j))" >>/tmp/chunk; j=$((j + 1)); done
	dd if=/tmp/chunk of=/dev/vda bs=4096 seek=$i count=$n oflag=direct conv=fsync,notrunc 2>/dev/null || { echo MVM-DD-FAILED; exit 1; }
	i=$((i + n))
	echo MVM-FLUSHED=$((i - 1))
done
'

kill_during_writes() {
	local cache=$1 img=$SYS_TMP/kill-$1.img out=$SYS_TMP/out-kill-$1 groups delay pid last
	make_image "$img" 64
	"$MVM" "${SYS_IDS[@]}" --disk "$img,cache=$cache" --cmdline "$(guest_script "$writer")" </dev/null >"$out" 2>&1 &
	pid=$!
	# A random moment: after 3 to 12 flushed groups, plus up to 1 s.
	groups=$((3 + RANDOM % 10))
	delay=0.$((RANDOM % 10))
	wait_line "$out" "^MVM-FLUSHED=$((groups * 8 - 1))\$" "$pid"
	sleep "$delay"
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
	last=$(tr -d '\r' <"$out" | sed -n 's/^MVM-FLUSHED=\([0-9]*\)$/\1/p' | tail -n 1)
	[ -n "$last" ] || fail "cache=$cache: no flushed block seen"
	# Every block up to the last flushed one, and how many beyond it made it.
	python3 - "$img" "$last" "$cache" <<'EOF' || fail "cache=$cache: flushed blocks lost"
import sys
img, last, cache = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = open(img, 'rb').read()
def ok(b):
    want = ('%-4095s\n' % ('MVM-BLOCK %d' % b)).encode()
    return data[b * 4096:(b + 1) * 4096] == want
lost = [b for b in range(last + 1) if not ok(b)]
beyond = 0
while ok(last + 1 + beyond):
    beyond += 1
print('cache=%s: killed after block %d was flushed: %d of %d flushed blocks on the image, '
      '%d written after the last flush also there' % (cache, last, last + 1 - len(lost), last + 1, beyond))
if lost:
    print('lost blocks: %s' % lost[:20])
    sys.exit(1)
EOF
}

kill_during_writes writeback
kill_during_writes none

# ENOSPC: a 12 MiB tmpfs holds a sparse 64 MiB image and a 4 MiB filler.
# The guest writes until the host runs out of space, says so, then retries
# a write into a part of the image never written until it works (the host
# removes the filler when it sees the guest's message).
small=$SYS_TMP/small
mkdir -p "$small"
mount -t tmpfs -o size=12M tmpfs "$small" || fail "cannot mount a tmpfs for the ENOSPC case"
trap 'umount "$small" 2>/dev/null; rm -rf "$SYS_TMP"' EXIT
truncate -s 64M "$small/disk.img"
head -c 4M /dev/zero >"$small/filler"
filler='
dd if=/dev/urandom of=/dev/vda bs=1M count=32 oflag=direct 2>/tmp/dd.err; echo MVM-FILL-RC=$?
grep -qiE "input/output error|i/o error" /tmp/dd.err && echo MVM-SAW-IOERR
echo MVM-FULL
t=0
until dd if=/dev/urandom of=/dev/vda bs=4096 count=16 seek=15000 oflag=direct conv=fsync 2>/dev/null; do
	t=$((t + 1)); [ $t -lt 120 ] || { echo MVM-NEVER-WORKED; exit 1; }; sleep 0.5
done
echo MVM-WRITE-AFTER-FREE=ok
'
"$MVM" "${SYS_IDS[@]}" --disk "$small/disk.img" --cmdline "$(guest_script "$filler")" </dev/null \
	>"$SYS_TMP/out-enospc" 2>&1 &
pid=$!
wait_line "$SYS_TMP/out-enospc" '^MVM-FULL' "$pid"
kill -0 "$pid" 2>/dev/null || fail "mvm died when the host disk filled up"
rm -f "$small/filler"
wait_line "$SYS_TMP/out-enospc" '^MVM-WRITE-AFTER-FREE=ok' "$pid" 60
wait "$pid"; rc=$?
tr -d '\r' <"$SYS_TMP/out-enospc" | grep -E '^MVM-|mvm:' | sed 's/^/    guest| /'
[ $rc -eq 0 ] || fail "mvm exited $rc after the ENOSPC case, expected 0"
expect_line "$SYS_TMP/out-enospc" '^MVM-FILL-RC=[1-9]'
expect_line "$SYS_TMP/out-enospc" '^MVM-SAW-IOERR'
echo "ENOSPC: the guest saw an I/O error, mvm kept running, writes worked again once space was freed"
