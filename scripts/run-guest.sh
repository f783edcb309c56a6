#!/usr/bin/env bash
# make run: boot the test guest to its shell on this terminal (Ctrl-A x
# quits). Runs directly when this host's /dev/kvm can run the guest (mvm
# --probe-kvm decides; MVM_KVM overrides), else under the nested harness.
cd "$(dirname "$0")/.." || exit 1
exec tests/with-kvm ./mvm "$@"
