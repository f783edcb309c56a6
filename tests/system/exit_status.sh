#!/usr/bin/env bash
# A command failing inside the guest makes mvm exit with its status: the
# guest's /init reports it through the exit port. A guest that resets the
# machine with a triple fault (Linux's reboot=t) has crashed as far as mvm
# can tell: status 122, and one line saying so.
. "$(dirname "$0")/lib.sh"
sys_run "$SYS_TMP/out" --cmdline '-- exit 3'
[ "$SYS_RC" -eq 3 ] || fail "mvm exited $SYS_RC, expected 3"

sys_run "$SYS_TMP/out2" --cmdline 'reboot=t -- reboot -f'
[ "$SYS_RC" -eq 122 ] || fail "mvm exited $SYS_RC after a triple fault, expected 122"
expect_line "$SYS_TMP/out2" '^mvm: vCPU [0-9]+: the guest triple-faulted'
