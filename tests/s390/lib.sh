# Sourced by the s390x system tests (tests/system/s390_*.sh), from the
# checkout's root: S390_TMP, a scratch folder removed on exit, and s390_run.
fail() { echo "FAIL: $*"; exit 1; }
S390_TMP=$(mktemp -d "${TMPDIR:-/tmp}/mvm-s390-sys.XXXXXX")
trap 'rm -rf "$S390_TMP"' EXIT

# s390_run SCRIPT: run SCRIPT in L1 (tests/s390/run); its output goes to
# $S390_TMP/out and to stdout. The harness's own failure (125: Hercules or
# L1 did not come through) is retried once, saying so; the test fails
# unless SCRIPT ended with 0.
s390_run() {
	local rc attempt
	for attempt in 1 2; do
		tests/s390/run "$1" >"$S390_TMP/out"
		rc=$?
		cat "$S390_TMP/out"
		[ $rc -eq 125 ] && [ $attempt = 1 ] || break
		echo "system: the s390 harness failed (status 125); retrying the test once"
	done
	[ $rc -eq 0 ] || fail "the script in L1 ended with $rc"
}
