#!/usr/bin/env bash
# mvm-test: long
# With --cpus 4 the guest brings up all four vCPUs (MP table, SIPI).
# Long (make test-long): blk_mmio_4q_split and snapshot boot 4 and 2 vCPUs.
. "$(dirname "$0")/lib.sh"
sys_run "$SYS_TMP/out" --cpus 4 --cmdline '-- echo MVM-NPROC=$(nproc)'
[ "$SYS_RC" -eq 0 ] || fail "mvm exited $SYS_RC, expected 0"
expect_line "$SYS_TMP/out" '^MVM-NPROC=4$'
