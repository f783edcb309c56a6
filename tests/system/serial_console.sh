#!/usr/bin/env bash
# mvm-test: long
# The kernel's boot messages reach mvm's stdout through the 8250 console,
# and the guest's own output follows them.
. "$(dirname "$0")/lib.sh"
sys_run "$SYS_TMP/out" --cmdline '-- echo MVM-SERIAL-OK'
[ "$SYS_RC" -eq 0 ] || fail "mvm exited $SYS_RC, expected 0"
expect_line "$SYS_TMP/out" 'Linux version 6\.1'
expect_line "$SYS_TMP/out" 'ttyS0'
expect_line "$SYS_TMP/out" '^MVM-SERIAL-OK$'
