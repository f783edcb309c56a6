#!/usr/bin/env bash
# make run: boot the test guest to its shell on this terminal (Ctrl-A x
# quits). Runs directly when /dev/kvm exists, else under the nested harness.
cd "$(dirname "$0")/.." || exit 1
exec tests/with-kvm ./mvm "$@"
