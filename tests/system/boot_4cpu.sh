#!/usr/bin/env bash
# mvm-test: long
# With --cpus 4 the guest brings up all four vCPUs (MP table, SIPI); its
# halt (every CPU in HLT with interrupts off) ends the VM through mvm's
# halt probe, which waits for all four: exit 0, one line saying so.
# Long (make test-long): blk_mmio_4q_split and snapshot boot 4 and 2 vCPUs.
. "$(dirname "$0")/lib.sh"
sys_run "$SYS_TMP/out" --cpus 4 --cmdline '-- echo MVM-NPROC=$(nproc); halt -f'
[ "$SYS_RC" -eq 0 ] || fail "mvm exited $SYS_RC, expected 0"
expect_line "$SYS_TMP/out" '^MVM-NPROC=4$'
expect_line "$SYS_TMP/out" 'mvm: the guest halted: every vCPU has stopped with interrupts off'
