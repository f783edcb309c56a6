#!/usr/bin/env bash
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
	# Every guest here has one vCPU. L1's default 4 vCPUs overcommit a
	# 2-core host under TCG: with 4 guests at once its vCPU threads starved
	# each other (RCU stalls in L1, no heartbeat for 46 s) in 3 of the last 5
	# attempts. One L1 vCPU per host core, and a heartbeat allowance for
	# the stalls that remain, fit the load.
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
