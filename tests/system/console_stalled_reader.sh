#!/usr/bin/env bash
# mvm-test: long
# A reader of mvm's stdout that stops reading stalls the guest's console
# output, never mvm: SIGTERM still ends mvm within seconds, with a reader
# that was SIGSTOPped and with one that has not started reading yet
# (`mvm | (sleep N; cat)`), and what the reader then gets is the guest's
# output in order (only mvm's buffer, which nobody was reading, is dropped
# by the stop, and counted). Without a stop, the guest waits for a late
# reader instead of losing output (--stats tx_waits > 0, tx_dropped 0), and
# the reader gets every byte the guest wrote.
. "$(dirname "$0")/lib.sh"

# The guest's output: numbered 64-byte lines, FLOOD_LINES of them (0:
# forever), written as fast as the console takes them. loglevel=1 keeps
# kernel messages out of them.
flood_cmdline() {
	guest_script "i=0; while [ $1 = 0 ] || [ \$i -lt $1 ]; do printf 'MVM-FLOOD-%08d-%s\n' \$i 0123456789abcdefghijklmnopqrstuvwxyz0123456789; i=\$((i + 1)); done"
}
expected_lines() {
	awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) printf "MVM-FLOOD-%08d-0123456789abcdefghijklmnopqrstuvwxyz0123456789\n", i }'
}

# A failed check must not leave a reader or mvm behind (they would hold the
# harness's output open).
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$SYS_TMP"' EXIT

# The pipe from mvm to the reader is a FIFO, so the test can see how full
# it is (FIONREAD on a non-blocking open of it; the reader holds it open).
FIFO=$SYS_TMP/fifo
mkfifo "$FIFO"
pipe_fill() {
	python3 -c 'import fcntl, os, struct, sys, termios
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
print(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0])' "$FIFO" 2>/dev/null ||
		echo 0
}

# Time for the guest to fill mvm's 16 KiB buffer once the pipe is full.
FILL_S=${FILL_S:-8}

# wait_full: until the FIFO is (nearly) full, i.e. mvm can write no more;
# at most 150 s (the guest boots meanwhile). 1: it never filled.
wait_full() {
	local i
	for i in $(seq 1 750); do
		[ "$(pipe_fill)" -ge 60000 ] && return 0
		sleep 0.2
	done
	return 1
}

# sigterm_within PID SECS: SIGTERM to mvm, which must be gone within SECS;
# sets TERM_RC and TERM_S.
sigterm_within() {
	local start=$EPOCHREALTIME i
	kill -TERM "$1"
	for i in $(seq 1 $(($2 * 10))); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$1" 2>/dev/null; then
		kill -KILL "$1"
		fail "mvm still running $2 s after SIGTERM, with a reader that does not read"
	fi
	wait "$1"
	TERM_RC=$?
	TERM_S=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
}

stats_field() {
	grep -o "\"kind\":\"serial\"[^}]*" "$1" | grep -o "\"$2\":[0-9]*" | cut -d: -f2
}

# check_stopped OUT ERR: after a SIGTERM with a reader that did not read,
# the reader's output (OUT, raw) is the guest's, in order: complete flood
# lines 0, 1, 2, ... (the stop may cut the last one short), and every byte
# the guest wrote is accounted for: what the reader got plus what mvm
# dropped at the stop (its buffer, which a reader that does not read could
# not take: --stats tx_dropped) is what the guest wrote (tx_bytes).
check_stopped() {
	local n got tx dropped
	tr -d '\r' <"$1" | sed -n '/^MVM-FLOOD-/,$p' >"$1.lines"
	n=$(grep -c '' "$1.lines")
	[ "$n" -gt 500 ] || fail "the reader got only $n lines"
	# Files, not <(...): the nested harness's chroot has no /dev/fd.
	head -n $((n - 1)) "$1.lines" >"$1.complete"
	expected_lines $((n - 1)) >"$1.expected"
	if ! cmp -s "$1.complete" "$1.expected"; then
		diff "$1.complete" "$1.expected" | head -n 10
		fail "the output the reader got has lines missing or changed"
	fi
	got=$(wc -c <"$1") tx=$(stats_field "$2" tx_bytes) dropped=$(stats_field "$2" tx_dropped)
	[ "$got" -eq $((tx - dropped)) ] ||
		fail "the guest wrote $tx bytes, mvm dropped $dropped at the stop, the reader got $got"
	echo "the reader got lines 0..$((n - 2)) complete and in order: $got bytes of the guest's $tx;" \
		"the $dropped left in mvm's buffer were dropped by the stop"
}

echo "--- 1: the reader is SIGSTOPped; SIGTERM"
cat <"$FIFO" >"$SYS_TMP/out1" &
reader=$!
"$MVM" "${SYS_IDS[@]}" --stats --cmdline "loglevel=1 $(flood_cmdline 0)" </dev/null >"$FIFO" 2>"$SYS_TMP/err1" &
pid=$!
# Stopped once it has read something (it holds the FIFO open by then).
for _ in $(seq 1 600); do [ -s "$SYS_TMP/out1" ] && break; sleep 0.2; done
kill -STOP "$reader"
wait_full || fail "the pipe to the reader never filled: the guest printed too little"
# The guest fills mvm's buffer too, then waits. Every byte is an I/O exit:
# nested, the guest's console runs at about 5 KB/s, so 16 KiB take ~3 s.
sleep "$FILL_S"
sigterm_within "$pid" 15
echo "mvm exited $TERM_RC $TERM_S s after SIGTERM"
kill -CONT "$reader"
wait "$reader"
tail -n 3 "$SYS_TMP/err1" | cut -c1-300
[ "$TERM_RC" -eq 143 ] || fail "mvm exited $TERM_RC after SIGTERM, expected 143"
[ "$(stats_field "$SYS_TMP/err1" tx_waits)" -gt 0 ] || fail "the guest never waited: tx_waits is 0"
check_stopped "$SYS_TMP/out1" "$SYS_TMP/err1"

echo "--- 2: a reader that starts late, the guest ends by itself: every byte arrives"
lines=1500              # 96000 bytes: more than the pipe and mvm's buffer (80 KiB)
# (sleep; cat), where the sleep lasts until mvm can write no more.
(wait_full; sleep "$FILL_S"; tr -d '\r' | sed -n '/^MVM-FLOOD-/,$p' >"$SYS_TMP/out2") <"$FIFO" &
reader=$!
"$MVM" "${SYS_IDS[@]}" --stats --cmdline "loglevel=1 $(flood_cmdline $lines); exit 3" </dev/null >"$FIFO" 2>"$SYS_TMP/err2"
rc=$?
wait "$reader"
tail -n 3 "$SYS_TMP/err2" | cut -c1-300
[ "$rc" -eq 3 ] || fail "mvm exited $rc, expected the guest's 3"
[ "$(stats_field "$SYS_TMP/err2" tx_waits)" -gt 0 ] ||
	fail "the guest never waited (tx_waits 0): the reader's pause was too short to test anything"
[ "$(stats_field "$SYS_TMP/err2" tx_dropped)" -eq 0 ] || fail "tx_dropped is not 0"
expected_lines $lines >"$SYS_TMP/expected2"
if ! cmp "$SYS_TMP/out2" "$SYS_TMP/expected2"; then
	diff "$SYS_TMP/out2" "$SYS_TMP/expected2" | head -n 10
	fail "the output differs from what the guest wrote"
fi
echo "all $lines lines ($(wc -c <"$SYS_TMP/out2") bytes) arrived, in order"

echo "--- 3: mvm | (sleep; cat) with SIGTERM before the reader reads"
# (sleep; cat), the sleep lasting until the test says so.
(while [ ! -e "$SYS_TMP/go" ]; do sleep 0.2; done; cat) <"$FIFO" >"$SYS_TMP/out3" &
reader=$!
"$MVM" "${SYS_IDS[@]}" --stats --cmdline "loglevel=1 $(flood_cmdline 0)" </dev/null >"$FIFO" 2>"$SYS_TMP/err3" &
pid=$!
wait_full || fail "the pipe to the reader never filled: the guest printed too little"
sleep "$FILL_S"
sigterm_within "$pid" 15
echo "mvm exited $TERM_RC $TERM_S s after SIGTERM"
touch "$SYS_TMP/go"
wait "$reader"
tail -n 3 "$SYS_TMP/err3" | cut -c1-300
[ "$TERM_RC" -eq 143 ] || fail "mvm exited $TERM_RC after SIGTERM, expected 143"
check_stopped "$SYS_TMP/out3" "$SYS_TMP/err3"
echo "SIGTERM ended mvm promptly with a reader that did not read; the output it then got is intact"
