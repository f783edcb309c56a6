#!/usr/bin/env bash
# mvm-test: long
# libmvm embedded in one host process (tests/embed/embed.c, built with
# ASan+UBSan against the installed library and nothing but <mvm.h>): 20
# test guests in a row and 2 rounds of 4 at once, each exit status right,
# one stopped mid-boot with mvm_stop, and fds, threads and RSS back to
# their baseline afterwards.
set -u
cd "$(dirname "$0")/../.."
if [ -z "${MVM_KVM_PATH:-}" ]; then
	# On the host, before lib.sh re-executes this where KVM works (the
	# checkout is read-only in the nested harness's L1).
	make -s --no-print-directory SANITIZE=address,undefined embed ||
		{ echo "FAIL: cannot build the embedding test"; exit 1; }
	# 29 guest boots: well over the other system tests' 300 s under TCG.
	# Each nested boot risks the emulated L1 hanging (about one in fifty):
	# MVM_EMBED_VMS=50 makes a longer soak of the same test.
	export MVM_NESTED_TIMEOUT=${MVM_NESTED_TIMEOUT:-840}
	# Every guest here has one vCPU, so L1 needs no more vCPUs than host
	# cores (TCG runs one thread per L1 vCPU), and a heartbeat allowance
	# for L1's RCU stalls under this load. Neither prevents L1's rare
	# hangs (seen with 2 and with 4 L1 vCPUs alike); fewer boots do.
	host_cpus=$(nproc)
	export MVM_NESTED_CPUS=${MVM_NESTED_CPUS:-$((host_cpus < 4 ? host_cpus : 4))}
	export MVM_NESTED_HEARTBEAT_TIMEOUT=${MVM_NESTED_HEARTBEAT_TIMEOUT:-90}
fi
. "$(dirname "$0")/lib.sh"
# ASan: report leaks at exit; keep its quarantine small so RSS means
# something.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:quarantine_size_mb=16:malloc_context_size=10}
build/san/tests/embed/mvm-embed build/guest/bzImage build/guest/initramfs.cpio.gz "$SYS_TMP" \
	"${MVM_EMBED_VMS:-20}" 2 >"$SYS_TMP/out" 2>&1
rc=$?
cat "$SYS_TMP/out"
[ $rc -eq 0 ] || fail "mvm-embed exited $rc"
grep -qx 'embed: ok' "$SYS_TMP/out" || fail "mvm-embed did not say ok"
