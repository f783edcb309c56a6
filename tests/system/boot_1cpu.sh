#!/usr/bin/env bash
# The shipped test guest boots to /init with 1 vCPU, runs the command given
# after "--" on the kernel command line, and powers off: mvm exits 0.
. "$(dirname "$0")/lib.sh"
sys_run "$SYS_TMP/out" --cpus 1 --cmdline '-- echo MVM-NPROC=$(nproc)'
[ "$SYS_RC" -eq 0 ] || fail "mvm exited $SYS_RC, expected 0"
expect_line "$SYS_TMP/out" '^MVM-NPROC=1$'
