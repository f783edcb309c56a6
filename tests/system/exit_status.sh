#!/usr/bin/env bash
# A command failing inside the guest makes mvm exit with its status: the
# guest's /init reports it through the exit port. A guest that resets the
# machine with a triple fault (Linux's reboot=t) ends it like a reboot,
# status 0, and mvm says which kind of reboot it was.
. "$(dirname "$0")/lib.sh"
sys_run "$SYS_TMP/out" --cmdline '-- exit 3'
[ "$SYS_RC" -eq 3 ] || fail "mvm exited $SYS_RC, expected 3"

sys_run "$SYS_TMP/out2" --cmdline 'reboot=t -- reboot -f'
[ "$SYS_RC" -eq 0 ] || fail "mvm exited $SYS_RC after a triple fault, expected 0"
expect_line "$SYS_TMP/out2" '^mvm: vCPU [0-9]+ reset the machine with a triple fault'
