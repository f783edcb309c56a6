# Shared by the system tests (tests/system/*.sh). Sourcing this re-executes
# the calling test where KVM exists: directly when /dev/kvm is usable here,
# otherwise inside the nested harness (QEMU TCG L1 with KVM) via
# tests/with-kvm, which says which path it took. Everything after the
# source line therefore runs on a host with a working /dev/kvm.
set -u
SYS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$SYS_ROOT"
if [ ! -c /dev/kvm ] || [ ! -w /dev/kvm ]; then
	[ -n "${MVM_NESTED:-}" ] && { echo "system: inside the harness but /dev/kvm is unusable"; exit 1; }
	exec tests/with-kvm "$0" "$@"
fi
echo "system: running with /dev/kvm (${MVM_NESTED:+nested L1}${MVM_NESTED:-direct})"

MVM=${MVM:-$SYS_ROOT/mvm}
SYS_TMP=$(mktemp -d "${MVM_SCRATCH:-${TMPDIR:-/tmp}}/mvm-sys.XXXXXX")
trap 'rm -rf "$SYS_TMP"' EXIT

fail() { echo "FAIL: $*"; exit 1; }

# sys_run OUTFILE ARGS...: run mvm with ARGS (stdin /dev/null), output to
# OUTFILE (also echoed, CRs stripped); sets SYS_RC to mvm's exit status.
sys_run() {
	local out=$1; shift
	local start end
	start=$(date +%s.%N)
	timeout -k 5 "${SYS_BOOT_TIMEOUT:-300}" "$MVM" "$@" </dev/null 2>&1 | tr -d '\r' >"$out"
	SYS_RC=${PIPESTATUS[0]}
	end=$(date +%s.%N)
	sed 's/^/    guest| /' "$out" | tail -n "${SYS_SHOW_LINES:-40}"
	echo "mvm exited $SYS_RC after $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}') s: $MVM $*"
}

# expect_line OUTFILE REGEX: OUTFILE has a line matching REGEX.
expect_line() {
	grep -qE -- "$2" "$1" || fail "no line matching '$2' in the guest output"
}
