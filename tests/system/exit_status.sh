#!/usr/bin/env bash
# A command failing inside the guest makes mvm exit with its status: the
# guest's /init reports it through the exit port.
. "$(dirname "$0")/lib.sh"
sys_run "$SYS_TMP/out" --cmdline '-- exit 3'
[ "$SYS_RC" -eq 3 ] || fail "mvm exited $SYS_RC, expected 3"
