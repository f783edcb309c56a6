#!/usr/bin/env bash
# The shipped test guest boots to /init with 1 vCPU, runs the command given
# after "--" on the kernel command line, and powers off: mvm exits 0.
# --stats reports startup_us, from mvm's main() to the guest's first
# instruction: present and plausible (under 10 s even nested).
. "$(dirname "$0")/lib.sh"
sys_run "$SYS_TMP/out" --cpus 1 --stats --cmdline '-- echo MVM-NPROC=$(nproc)'
[ "$SYS_RC" -eq 0 ] || fail "mvm exited $SYS_RC, expected 0"
expect_line "$SYS_TMP/out" '^MVM-NPROC=1$'
us=$(sed -n 's/.*"startup_us":\([0-9]*\).*/\1/p' "$SYS_TMP/out" | tail -n 1)
[ -n "$us" ] || fail "--stats has no startup_us"
[ "$us" -gt 0 ] && [ "$us" -lt 10000000 ] || fail "startup_us $us is not between 0 and 10 s"
echo "startup: $us us from main() to the first KVM_RUN ($MVM_KVM_PATH KVM)"
