#!/usr/bin/env bash
# How the guest ends is how mvm exits, in one L1 boot: a command failing
# inside the guest gives its status (the guest's /init reports it through
# the exit port); a reboot (the i8042 reset line) gives 0; a triple fault
# (Linux's reboot=t) is a crash, 122, and a kernel panic that the guest
# reports through pvpanic is 123 (it would reboot at once with panic=-1),
# each with one line saying so. The 1-vCPU guests run two at a time (the
# harness gives commands 4 L1 vCPUs; four at once starved its timers once): their ends do
# not depend on one another. mvm's line
# may land in the middle of one of the guest's (stderr and the console
# share the output), so it is looked for anywhere in a line.
. "$(dirname "$0")/lib.sh"
# at_once OUT ARGS...: sys_run in the background, its status in OUT.rc
# and what it printed in OUT.log.
at_once() {
	local out=$1; shift
	( sys_run "$out" "$@"; echo "$SYS_RC" >"$out.rc" ) >"$out.log" 2>&1 &
}
at_once "$SYS_TMP/out" --cmdline '-- exit 3'
at_once "$SYS_TMP/out1" --cmdline '-- reboot -f'
wait
at_once "$SYS_TMP/out2" --cmdline 'reboot=t -- reboot -f'
at_once "$SYS_TMP/out3" --cmdline '-- echo c >/proc/sysrq-trigger'
wait
for o in out out1 out2 out3; do cat "$SYS_TMP/$o.log"; done
rc() { cat "$SYS_TMP/$1.rc" 2>/dev/null || echo none; }
[ "$(rc out)" = 3 ] || fail "mvm exited $(rc out), expected 3"
[ "$(rc out1)" = 0 ] || fail "mvm exited $(rc out1) after a reboot, expected 0"
[ "$(rc out2)" = 122 ] || fail "mvm exited $(rc out2) after a triple fault, expected 122"
expect_line "$SYS_TMP/out2" 'mvm: vCPU [0-9]+: the guest triple-faulted'
[ "$(rc out3)" = 123 ] || fail "mvm exited $(rc out3) after a guest kernel panic, expected 123"
expect_line "$SYS_TMP/out3" "mvm: the guest's kernel panicked \(pvpanic\)"
