#!/usr/bin/env bash
# Snapshot and restore: a guest counting on its console, reading its disk
# (held to 500 requests a second) and running fio with verification, its
# RAM in the snapshot's memory file (--mem-file), is paused and
# snapshotted through the API (vm.snapshot) in the middle of fio's I/O (a
# flush, not a copy), goes on without changing the snapshot, and mvm ends.
# mvm --restore DIR brings it back, as two clones at once, confined, each
# with its own copy of the disk, CID and socket: each goes on counting from
# where it stood, with the same boot id and no boot (no kernel banner),
# its disk answering, fio's round in progress verifying, its clock going
# on from the snapshot's uptime, its vsock connection (virtio-mmio) held
# open across the snapshot reset (TRANSPORT_RESET) so its echo takes a new
# one. Then through the API's vm.restore, with the snapshot's own disk and
# socket, left paused until vm.resume, in a chroot, snapshotted again there
# beneath --snapshot-dir (and dumped there as a core, within the jail's
# file-size limit) and restored from that. Damaged snapshots are
# refused with one line and status 2: a truncated state, a flipped byte,
# memory cut short, a disk of another size.
. "$(dirname "$0")/lib.sh"
sock=$SYS_TMP/api.sock
img=$SYS_TMP/disk.img
snap=$SYS_TMP/snap
head -c 8M /dev/urandom >"$img"
mkdir "$snap"
sum=$(head -c 1M "$img" | md5sum | cut -d' ' -f1)
# The guest, 2 vCPUs and a disk with 2 queues: in the background fio
# writes random 4 KiB blocks to the disk's second 4 MiB with crc32c
# headers and reads them back to verify, round after round (a snapshot
# lands in the middle of one, with I/O in flight at the pause); in the
# foreground a tick with its number, uptime and boot id, each reading one
# 4 KiB block past the page cache, and every tenth the md5sum of the
# disk's first MiB, which fio does not touch, and its empty hot-plug
# slot's power as pciehp reads it (the slot goes into the snapshot).
script='b=$(cat /proc/sys/kernel/random/boot_id)
(j=0; while :; do fio --name=v --filename=/dev/vda --rw=randwrite --bs=4k --offset=4M --size=2M --ioengine=io_uring --iodepth=16 --direct=1 --verify=crc32c --verify_fatal=1 --eta=never --output=/tmp/fio.log; echo "fio $j rc $?"; j=$((j+1)); done) &
(while :; do mvm-vsock listen 1024 echo 1000; echo "vsock-listen rc $?"; done) &
i=0; while [ $i -lt 100000 ]; do
dd if=/dev/vda of=/dev/null bs=4k count=1 skip=$((i % 2048)) iflag=direct 2>/dev/null || echo disk-error
[ $((i % 10)) -eq 0 ] && echo "sum $i $(dd if=/dev/vda bs=1M count=1 iflag=direct 2>/dev/null | md5sum | cut -d" " -f1) slot $(cat /sys/bus/pci/slots/1/power 2>/dev/null || echo none)"
echo "tick $i $(cut -d" " -f1 /proc/uptime) $b"; i=$((i+1)); sleep 0.1; done'
"$MVM" --sandbox off --api-socket "$sock" --cpus 2 --hotplug-slots 1 \
	--disk "$img,queues=2,ops_size=50,ops_refill_time=100" \
	--vsock "cid=3,socket=$SYS_TMP/v.sock,transport=mmio" --mem-file "$snap/memory" \
	--cmdline "$(guest_script "$script")" </dev/null >"$SYS_TMP/out" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q '^fio 1 rc' "$SYS_TMP/out" && grep -q '^tick 20 ' "$SYS_TMP/out" && break
	kill -0 $pid 2>/dev/null || break; sleep 0.2; done
grep -q '^tick 20 ' "$SYS_TMP/out" && grep -q '^fio 1 rc 0' "$SYS_TMP/out" ||
	{ tail -n 20 "$SYS_TMP/out"; fail "the guest did not tick and run fio"; }
grep -q "^sum [0-9]* $sum slot 0" "$SYS_TMP/out" ||
	fail "the guest has no hot-plug slot powered off: $(grep '^sum' "$SYS_TMP/out" | tail -n 1)"
# echo_over VSOCK-SOCKET WORD: a host program's connection through mvm's
# hybrid vsock to the guest's echo on port 1024 gives WORD back (the
# guest's listener may not be up yet: tried again for 60 s).
echo_over() {
	local got end=$((SECONDS + 60))
	while [ $SECONDS -lt $end ]; do
		got=$(printf 'CONNECT 1024\n%s\n' "$2" | timeout 5 socat -t 2 - UNIX-CONNECT:"$1" 2>/dev/null)
		case $got in OK*"$2"*) return 0 ;; esac
		sleep 0.5
	done
	echo "vsock through $1: last answer '$got'"
	return 1
}
echo_over "$SYS_TMP/v.sock" before || fail "the guest's vsock echo did not answer"
# A connection held open across the snapshot: the guest's echo serves one
# connection at a time, so only a TRANSPORT_RESET after the restore frees
# it for the next.
mkfifo "$SYS_TMP/held.in"
socat - UNIX-CONNECT:"$SYS_TMP/v.sock" <"$SYS_TMP/held.in" >"$SYS_TMP/held" 2>&1 &
held=$!
exec 9>"$SYS_TMP/held.in"       # the connection's input stays open
printf 'CONNECT 1024\nheld\n' >&9
for _ in $(seq 1 100); do grep -q held "$SYS_TMP/held" && break; sleep 0.1; done
grep -q held "$SYS_TMP/held" || fail "the held vsock connection did not echo"
expect 405 PUT vm.snapshot -d "{\"destination_url\":\"file://$snap\"}"
expect 204 PUT vm.pause
# The disk is held to 500 requests a second: fio keeps a request waiting
# for tokens most of the time, and the snapshot gives it back to its ring.
expect 200 GET vm.counters
grep -o '"rate_delayed":[0-9]*' "$SYS_TMP/body" | grep -qv ':0$' ||
	fail "fio was not held by the disk's rate limit: $(head -c 300 "$SYS_TMP/body")"
# The vsock device's counters there too: two host clients or more (the
# echo, the held one), the held one open, what the echoes sent back.
python3 - "$SYS_TMP/body" <<'EOF2' || fail "vm.counters' _vsock0: $(cat "$SYS_TMP/body")"
import json, sys
v = json.load(open(sys.argv[1]))["_vsock0"]
assert v["connections_host"] >= 2 and v["connections_open"] == 1, v
assert v["bytes_to_guest"] >= len("before\nheld\n") and v["bytes_to_host"] >= v["bytes_to_guest"], v
assert v["bad_packets"] == 0 and v["resets_sent"] <= v["connections_host"], v
print("vm.counters: _vsock0 %s" % {k: v[k] for k in ("connections_host", "connections_open", "bytes_to_guest", "bytes_to_host")})
EOF2
expect 400 PUT vm.snapshot -d '{"destination_url":"http://x/y"}'
t0=$(date +%s%N)
expect 204 PUT vm.snapshot -d "{\"destination_url\":\"file://$snap\"}"
t1=$(date +%s%N)
# The last whole tick line: the pause may have cut the guest's next one
# short (its rest comes out after the resume, and in each clone), and
# then that one is the last tick the snapshot holds.
last=$(tr -d '\r' <"$SYS_TMP/out" | grep -E '^tick [0-9]+ [0-9.]+ [0-9a-f-]{36}$' | tail -n 1)
boot=$(echo "$last" | cut -d' ' -f4)
n=$(echo "$last" | cut -d' ' -f2)
up=$(echo "$last" | cut -d' ' -f3)
cut_short=$(tr -d '\r' <"$SYS_TMP/out" | tail -n 1)
if [ -n "$(tail -c 1 "$SYS_TMP/out")" ] && [ -n "$cut_short" ] && [ "$cut_short" != "$last" ] &&
	[[ $cut_short == tick\ * || "tick " == "$cut_short"* ]]; then
	n=$((n + 1))
	last="$last (then '$cut_short', cut short by the pause)"
fi
echo "snapshot after '$last' in $(( (t1 - t0) / 1000000 )) ms: state $(stat -c %s "$snap/state") bytes," \
	"memory $(stat -c %s "$snap/memory") bytes, $(du -k "$snap/memory" | cut -f1) KiB on disk"
[ -f "$snap/state" ] && [ -f "$snap/memory" ] || fail "the snapshot's files are missing"
# Guest RAM was the snapshot's memory file: the snapshot flushed it, and
# from then on the VM's RAM is private: its guest goes on counting and
# the file stays as the snapshot has it.
msum=$(md5sum <"$snap/memory")
# The disk as the snapshot has it, for the restores: the resumed guest
# goes on writing.
cp "$img" "$SYS_TMP/copy.img"
expect 204 PUT vm.resume
for _ in $(seq 1 100); do grep -q "^tick $((n + 10)) " "$SYS_TMP/out" && break; sleep 0.1; done
grep -q "^tick $((n + 10)) " "$SYS_TMP/out" || fail "the guest did not count on after its snapshot"
[ "$(md5sum <"$snap/memory")" = "$msum" ] || fail "the resumed guest changed the snapshot's memory"
echo "resumed after the snapshot: counted to $((n + 10)), the snapshot's memory unchanged"
expect 204 PUT vmm.shutdown
wait $pid
echo "the snapshotted mvm ended ($?)"
exec 9>&-
kill $held 2>/dev/null; wait $held 2>/dev/null
cp "$SYS_TMP/copy.img" "$img"

# restore_start TAG [mvm args]: mvm --restore in the background, its
# output in $SYS_TMP/TAG. restore_check TAG VSOCK: once the guest has
# counted 10 ticks past the snapshot's and fio finished the round the
# snapshot cut in two, its
# vsock echo answers over the socket VSOCK; then mvm ends and the output is
# checked.
declare -A rpid
restore_start() {
	local tag=$1; shift
	"$MVM" "$@" --restore "$snap" </dev/null >"$SYS_TMP/$tag" 2>&1 &
	rpid[$tag]=$!
	echo "$tag: mvm --restore started"
}
restore_check() {
	local tag=$1 vsock=$2 rp=${rpid[$1]} first next vs
	for _ in $(seq 1 450); do
		grep -q "^tick $((n + 10)) " "$SYS_TMP/$tag" &&
			[ "$(grep -c '^fio [0-9]* rc' "$SYS_TMP/$tag")" -ge 1 ] && break
		kill -0 $rp 2>/dev/null || break
		sleep 0.2
	done
	echo "$tag: $(grep -c '^tick ' "$SYS_TMP/$tag") ticks, $(grep -c '^fio [0-9]* rc' "$SYS_TMP/$tag") fio rounds"
	echo_over "$vsock" "after-$tag"; vs=$?
	kill $rp 2>/dev/null; wait $rp 2>/dev/null
	tr -d '\r' <"$SYS_TMP/$tag" >"$SYS_TMP/$tag.txt"
	[ $vs = 0 ] || { tail -n 20 "$SYS_TMP/$tag.txt"
		fail "$tag: the guest's vsock echo did not answer after the restore"; }
	grep -q "^tick $((n + 10)) " "$SYS_TMP/$tag.txt" || { tail -n 20 "$SYS_TMP/$tag.txt"
		fail "$tag: the restored guest did not count on to $((n + 10))"; }
	first=$(grep '^tick ' "$SYS_TMP/$tag.txt" | head -n 1)
	next=$(echo "$first" | cut -d' ' -f2)
	[ "$next" = $((n + 1)) ] || fail "$tag: the first tick after the restore is $next, expected $((n + 1))"
	[ "$(echo "$first" | cut -d' ' -f4)" = "$boot" ] || fail "$tag: another boot id: $first"
	! grep -q 'Linux version' "$SYS_TMP/$tag.txt" || fail "$tag: the guest booted again"
	! grep -q 'disk-error' "$SYS_TMP/$tag.txt" || fail "$tag: the guest's disk failed after the restore"
	grep -q "^sum [0-9]* $sum" "$SYS_TMP/$tag.txt" || fail "$tag: the guest read other data from its disk"
	grep -q "^sum [0-9]* $sum slot 0" "$SYS_TMP/$tag.txt" ||
		fail "$tag: the guest's hot-plug slot is not there, powered off: $(grep '^sum' "$SYS_TMP/$tag.txt" | tail -n 1)"
	! grep -q '^fio [0-9]* rc [1-9]' "$SYS_TMP/$tag.txt" || fail "$tag: fio's verification failed"
	[ "$(grep -c '^fio [0-9]* rc 0' "$SYS_TMP/$tag.txt")" -ge 1 ] ||
		fail "$tag: fio did not finish its round after the restore"
	grep '^tick ' "$SYS_TMP/$tag.txt" |
		awk -v up="$up" '{ if ($3 < up || $3 > up + 60) bad = 1 } END { exit bad }' ||
		fail "$tag: the uptime jumped: $first after $up"
	echo "$tag: went on with '$first', counted to $((n + 10)), same boot, disk data right," \
		"fio verified, vsock answered after its connections' reset"
}
# Two clones at once, confined, each with its own copy of the disk as
# the snapshot had it, its own CID and socket (the disk's queues and the
# vsock device's transport are the snapshot's: not given); their memory
# is the one file, mapped privately. Two, not more: four guest vCPUs fill
# the nested L1's CPUs for commands; make bench-snapshot runs ten 1-vCPU
# clones.
for c in 1 2; do
	cp "$SYS_TMP/copy.img" "$SYS_TMP/clone$c.img"
	restore_start clone$c "${SYS_IDS[@]}" --id clone$c --disk "$SYS_TMP/clone$c.img" \
		--vsock "cid=$((3 + c)),socket=$SYS_TMP/clone$c.sock"
done
for c in 1 2; do restore_check clone$c "$SYS_TMP/clone$c.sock"; done

# Cloud Hypervisor's way: mvm --api-socket alone, vm.restore (the
# snapshot's own disk, put back as the snapshot had it, and vsock socket),
# the VM left paused until vm.resume; confined, in a chroot. Then, still
# confined, vm.snapshot again: only beneath --snapshot-dir (the API
# thread's Landlock and seccomp filter allow nothing else), through the
# directory's descriptor (the chroot hides its path); that snapshot
# restores too.
cp "$SYS_TMP/copy.img" "$img"
sock=$SYS_TMP/api2.sock
mkdir "$SYS_TMP/jail"
"$MVM" "${SYS_IDS[@]}" --chroot "$SYS_TMP/jail" --snapshot-dir "$SYS_TMP/snaps" \
	--api-socket "$sock" </dev/null >"$SYS_TMP/out" 2>&1 &
pid=$!
for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.1; done
# A script's way: mvm-remote, Cloud Hypervisor's ch-remote commands.
remote restore "source_url=file://$snap,prefault=off"
remote_fails 'vm.restore: a VM exists already (HTTP 405)' restore "$snap"
remote info
grep -q '"state":"Paused"' "$SYS_TMP/body" || fail "vm.info after vm.restore: not Paused: $(cat "$SYS_TMP/body")"
sleep 2
! grep -q '^tick ' "$SYS_TMP/out" || fail "the guest ran before vm.resume"
remote resume
for _ in $(seq 1 300); do grep -q "^tick $((n + 5)) " "$SYS_TMP/out" && break; sleep 0.2; done
grep -q "^tick $((n + 1)) .* $boot" "$SYS_TMP/out" && grep -q "^tick $((n + 5)) " "$SYS_TMP/out" ||
	{ tail -n 20 "$SYS_TMP/out"; fail "the guest restored by vm.restore did not count on after vm.resume"; }
echo "vm.restore: paused until vm.resume, then counted on from $((n + 1))"
remote pause
remote_fails "not beneath the snapshot directory $SYS_TMP/snaps" snapshot "$SYS_TMP/elsewhere"
remote_fails '(HTTP 400)' snapshot "$SYS_TMP/snaps/../elsewhere"
remote snapshot "$SYS_TMP/snaps/second"
[ ! -e "$SYS_TMP/elsewhere" ] || fail "a refused snapshot left $SYS_TMP/elsewhere"
# A core dump there too, within the jail's file-size limit (RAM and the
# ELF core's own few KiB: mvm_coredump_size_max).
remote coredump "$SYS_TMP/snaps/guest.core"
core_size=$(stat -c %s "$SYS_TMP/snaps/guest.core" 2>/dev/null)
[ "${core_size:-0}" -gt $((256 << 20)) ] || fail "the confined core dump: ${core_size:-no file}"
n2=$(tr -d '\r' <"$SYS_TMP/out" | grep '^tick ' | tail -n 1 | cut -d' ' -f2)
remote shutdown-vmm
wait $pid
[ -f "$SYS_TMP/snaps/second/state" ] || fail "the confined snapshot has no state"
echo "confined vm.snapshot after tick $n2: $(stat -c %s "$SYS_TMP/snaps/second/state") bytes of state; core dump $core_size bytes"
"$MVM" --sandbox off --restore "$SYS_TMP/snaps/second" </dev/null >"$SYS_TMP/second" 2>&1 &
pid=$!
for _ in $(seq 1 300); do grep -q "^tick $((n2 + 3)) " "$SYS_TMP/second" && break; sleep 0.2; done
kill $pid 2>/dev/null; wait $pid 2>/dev/null
grep -q "^tick $((n2 + 1)) .* $boot" "$SYS_TMP/second" && grep -q "^tick $((n2 + 3)) " "$SYS_TMP/second" ||
	{ tail -n 20 "$SYS_TMP/second"; fail "the confined snapshot's guest did not count on"; }
echo "the confined snapshot restored: counted on from $((n2 + 1))"

# refused NAME: mvm --restore on a damaged snapshot exits 2 with one line.
refused() {
	local name=$1 rc; shift
	"$MVM" --sandbox off --restore "$snap" "$@" </dev/null >"$SYS_TMP/bad" 2>&1
	rc=$?
	[ $rc -eq 2 ] || { cat "$SYS_TMP/bad"; fail "$name: mvm exited $rc, expected 2"; }
	[ "$(wc -l <"$SYS_TMP/bad")" -eq 1 ] || { cat "$SYS_TMP/bad"; fail "$name: not one line"; }
	echo "$name: $(cat "$SYS_TMP/bad")"
}
cp "$snap/state" "$SYS_TMP/state.good"
head -c 1000 "$SYS_TMP/state.good" >"$snap/state"
refused "a truncated state"
cp "$SYS_TMP/state.good" "$snap/state"
printf '\x5a' | dd of="$snap/state" bs=1 seek=3000 conv=notrunc 2>/dev/null
refused "a flipped byte"
cp "$SYS_TMP/state.good" "$snap/state"
head -c 4M /dev/zero >"$SYS_TMP/small.img"
refused "a disk of another size" --disk "$SYS_TMP/small.img"
truncate -s -4096 "$snap/memory"
refused "memory cut short"
