#!/usr/bin/env bash
# The shipped test guest boots to /init with 1 vCPU, runs the command given
# after "--" on the kernel command line, and powers off as a distribution
# does (poweroff, which Linux without ACPI turns into a halt: the vCPU in
# HLT with interrupts off): mvm's halt probe ends the VM, exit 0, with one
# line saying so.
# --stats reports startup_us, from mvm's main() to the guest's first
# instruction: present and plausible (under 10 s even nested), and its
# steps (startup_phases_us) add up to it: each is truncated to whole
# microseconds, so the sum may fall short by at most one per step.
. "$(dirname "$0")/lib.sh"
sys_run "$SYS_TMP/out" --cpus 1 --stats --cmdline '-- echo MVM-NPROC=$(nproc); poweroff -f'
[ "$SYS_RC" -eq 0 ] || fail "mvm exited $SYS_RC, expected 0"
expect_line "$SYS_TMP/out" '^MVM-NPROC=1$'
expect_line "$SYS_TMP/out" 'mvm: the guest halted: every vCPU has stopped with interrupts off'
us=$(sed -n 's/.*"startup_us":\([0-9]*\).*/\1/p' "$SYS_TMP/out" | tail -n 1)
[ -n "$us" ] || fail "--stats has no startup_us"
[ "$us" -gt 0 ] && [ "$us" -lt 10000000 ] || fail "startup_us $us is not between 0 and 10 s"
phases=$(sed -n 's/.*"startup_phases_us":{\([^}]*\)}.*/\1/p' "$SYS_TMP/out" | tail -n 1)
[ -n "$phases" ] || fail "--stats has no startup_phases_us"
for step in create kvm devices load vcpus start run; do
	case ",$phases," in *",\"$step\":"[0-9]*) ;; *) fail "startup_phases_us has no $step: {$phases}" ;; esac
done
sum=$(echo "$phases" | tr ',' '\n' | sed 's/.*://' | awk '{ s += $1 } END { print s }')
nsteps=$(echo "$phases" | tr ',' '\n' | wc -l)
[ "$sum" -le "$us" ] && [ "$sum" -ge $((us - nsteps)) ] ||
	fail "startup_phases_us add up to $sum us, startup_us is $us: {$phases}"
echo "startup: $us us from main() to the first KVM_RUN ($MVM_KVM_PATH KVM): {$phases}"
