#!/usr/bin/env bash
# mvm-test: long
# The nested-KVM harness (tests/nested/run) gives a working KVM: inside L1,
# tests/nested/kvm-smoke runs real-mode guest code to an OUT and a HLT; the
# command's stdout, stderr, exit status, argv quoting, working directory and
# environment come through; the scratch disk is a real ext4 block device
# that takes O_DIRECT writes.
set -u
cd "$(dirname "$0")/../.."
if ! command -v qemu-system-x86_64 >/dev/null; then
	echo "qemu-system-x86_64 not installed (make deps)"
	exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p build/nested
${CC:-cc} -std=gnu11 -O2 -Wall -Wextra -Werror -o build/nested/kvm-smoke tests/nested/kvm-smoke.c ||
	fail "cannot build tests/nested/kvm-smoke.c"

# Exit status passes through.
tests/nested/run --timeout 300 -- sh -c 'exit 3'
rc=$?
[ $rc -eq 3 ] || fail "sh -c 'exit 3' under the harness returned $rc"

# One L1 boot for the rest: the script prints facts, we check them here.
# A debug run: on failure the log shows L1's kernel console too.
out=$(MVM_NESTED_DEBUG=1 MVM_SMOKE_MARK=marked tests/nested/run --timeout 300 -- bash -c '
	echo hello
	echo "args=$#|$1|$2|$3"
	echo "cwd=$(pwd -P)"
	echo "nested=$MVM_NESTED mark=$MVM_SMOKE_MARK"
	echo "scratch_fs=$(stat -f -c %T "$MVM_SCRATCH")"
	case $TMPDIR in "$MVM_SCRATCH"/*) echo tmpdir=inside ;; *) echo "tmpdir=$TMPDIR" ;; esac
	[ -t 0 ] && echo stdin=tty || echo "stdin=$(readlink /proc/self/fd/0)"
	dd if=/dev/zero of="$MVM_SCRATCH/direct" bs=4096 count=16 oflag=direct status=none &&
		echo direct=ok
	echo to-stderr >&2
	build/nested/kvm-smoke
' smoke 'a b' '' "it's \"quoted\"" 2>"build/nested/smoke.err")
rc=$?
echo "$out"
if [ $rc -ne 0 ]; then
	cat build/nested/smoke.err
	fail "smoke run returned $rc"
fi
expect() { grep -qxF -- "$1" <<<"$out" || fail "expected the line '$1' in the output"; }
expect hello
expect "args=3|a b||it's \"quoted\""
expect "cwd=$(pwd -P)"
expect "nested=1 mark=marked"
expect "scratch_fs=ext2/ext3"
expect "tmpdir=inside"
expect "stdin=/dev/null"
expect "direct=ok"
grep -q '^kvm-smoke: ok' <<<"$out" || fail "kvm-smoke did not report ok"
grep -qxF to-stderr build/nested/smoke.err || fail "stderr did not come through"
grep -q $'\r' <<<"$out" && fail "output has \\r line endings"
echo "nested harness: KVM works in L1"

# A wedged L1 ends the run within a minute with 125, not at the timeout.
# expect_wedge WHAT MESSAGE-REGEX CMD: runs CMD in L1 and checks that.
expect_wedge() {
	local what=$1 re=$2 start rc took
	shift 2
	start=$EPOCHSECONDS
	tests/nested/run --timeout 300 -- sh -c "$1" 2>"build/nested/wedge.err"
	rc=$? took=$((EPOCHSECONDS - start))
	cat build/nested/wedge.err
	[ $rc -eq 125 ] || fail "$what gave status $rc, expected 125"
	[ $took -lt 90 ] || fail "$what was noticed only after ${took}s"
	grep -qE "^nested: L1 wedged after .*$re" build/nested/wedge.err || fail "no 'L1 wedged' message for $what"
}
# A brief soft lockup (written to L1's console through /dev/kmsg, as the
# kernel's watchdog would) is no wedge: the emulated L1 reports those under
# load and carries on ...
tests/nested/run --timeout 300 -- sh -c \
	'echo "<2>watchdog: BUG: soft lockup - CPU#0 stuck for 23s! [smoke:1]" >/dev/kmsg; sleep 3; exit 4'
rc=$?
[ $rc -eq 4 ] || fail "a 23 s soft lockup ended the run with $rc; the command's 4 expected"
# ... one that has lasted 67 s is ...
expect_wedge "a lasting soft lockup in L1" "stuck for 67s" \
	'echo "<2>watchdog: BUG: soft lockup - CPU#0 stuck for 67s! [smoke:1]" >/dev/kmsg; sleep 250'
# ... and an L1 whose heartbeat stops (its loop frozen with SIGSTOP).
MVM_NESTED_HEARTBEAT_TIMEOUT=8 expect_wedge "a stopped heartbeat" "no heartbeat from L1" \
	'sleep 1; for s in $(pgrep -x sleep); do kill -STOP "$(ps -o ppid= -p "$s")" "$s"; done; sleep 250'
echo "nested harness: a wedged L1 ends the run with 125 within a minute"
