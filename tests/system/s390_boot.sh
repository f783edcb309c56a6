#!/usr/bin/env bash
# s390x end to end, inside Hercules' s390 KVM (tests/s390/run): mvm's probe
# says the KVM runs guests; Debian's s390x kernel boots under mvm with the
# s390x test guest, its console (SCLP VT220) is mvm's stdout, the command's
# exit status (SCLP control-program identification) is mvm's, and a kernel
# panic (a disabled wait) ends mvm with 126 and says so.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "FAIL: $*"; exit 1; }
t=$(mktemp -d "${TMPDIR:-/tmp}/mvm-s390-sys.XXXXXX")
trap 'rm -rf "$t"' EXIT
cat >"$t/test" <<'EOF2'
/mvm --probe-kvm
echo "PROBE-RC=$?"
/mvm --kernel /guest/vmlinuz --initrd /guest/initrd.gz --mem 256M \
	--cmdline '-- echo MVM-S390-HELLO $((6 * 7)); exit 42'
echo "MVM-RC=$?"
/mvm --kernel /guest/vmlinuz --initrd /guest/initrd.gz --mem 256M \
	--cmdline 'panic=0 -- echo c >/proc/sysrq-trigger' >/tmp/panic 2>&1
echo "PANIC-RC=$?"
grep -o 'disabled wait.*crashed' /tmp/panic
EOF2
run() {
	tests/s390/run "$t/test" >"$t/out"
	rc=$?
	cat "$t/out"
}
run
if [ $rc -eq 125 ]; then
	echo "system: the s390 harness failed (status 125); retrying the test once"
	run
fi
[ $rc -eq 0 ] || fail "the script in L1 ended with $rc"
grep -q '^direct: ' "$t/out" || fail "mvm --probe-kvm in L1 did not say direct"
grep -q '^MVM-S390-HELLO 42' "$t/out" || fail "no output from the guest's command"
grep -q '^MVM-RC=42$' "$t/out" || fail "mvm did not exit with the guest's status 42"
grep -q '^PANIC-RC=126$' "$t/out" || fail "a panicking guest did not end mvm with 126"
grep -q 'disabled wait' "$t/out" || fail "mvm did not say the guest stopped in a disabled wait"
echo "s390x: guest booted under mvm in Hercules' KVM; exit status 42 and a panic (126) reached mvm"
