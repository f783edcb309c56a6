#!/usr/bin/env bash
# How the guest ends is how mvm exits, in one L1 boot: a command failing
# inside the guest gives its status (the guest's /init reports it through
# the exit port); a reboot (the i8042 reset line) gives 0; a triple fault
# (Linux's reboot=t) is a crash, 122, and a kernel panic that the guest
# reports through pvpanic is 123 (it would reboot at once with panic=-1),
# each with one line saying so.
. "$(dirname "$0")/lib.sh"
sys_run "$SYS_TMP/out" --cmdline '-- exit 3'
[ "$SYS_RC" -eq 3 ] || fail "mvm exited $SYS_RC, expected 3"

sys_run "$SYS_TMP/out1" --cmdline '-- reboot -f'
[ "$SYS_RC" -eq 0 ] || fail "mvm exited $SYS_RC after a reboot, expected 0"

sys_run "$SYS_TMP/out2" --cmdline 'reboot=t -- reboot -f'
[ "$SYS_RC" -eq 122 ] || fail "mvm exited $SYS_RC after a triple fault, expected 122"
expect_line "$SYS_TMP/out2" '^mvm: vCPU [0-9]+: the guest triple-faulted'

sys_run "$SYS_TMP/out3" --cmdline '-- echo c >/proc/sysrq-trigger'
[ "$SYS_RC" -eq 123 ] || fail "mvm exited $SYS_RC after a guest kernel panic, expected 123"
expect_line "$SYS_TMP/out3" "^mvm: the guest's kernel panicked \(pvpanic\)"
