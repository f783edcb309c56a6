#!/usr/bin/env bash
# On a host whose /dev/kvm opens but cannot run Linux (PVM: the probe
# fails), mvm run directly on it stops with status 126 and says where the
# guest was: vCPU, RIP, CPU mode and the instruction bytes at RIP, plus on
# PVM one line naming the way out (the nested harness). Where KVM runs
# guests, or there is none, there is no failing KVM to diagnose: skip.
set -u
cd "$(dirname "$0")/../.."
fail() { echo "FAIL: $*"; exit 1; }
verdict=$(MVM_KVM=auto ./mvm --probe-kvm) || fail "mvm --probe-kvm failed"
echo "probe: $verdict"
case $verdict in
direct:*) echo "this host's /dev/kvm runs guests: nothing to diagnose"; exit 77 ;;
*"/dev/kvm not found"* | *"/dev/kvm: "*) echo "no usable /dev/kvm here"; exit 77 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ids=(); [ "$(id -u)" = 0 ] && ids=(--uid 0 --gid 0)   # root: explicitly (see lib.sh)
timeout -k 5 60 ./mvm "${ids[@]}" --cmdline '-- exit 0' </dev/null >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/err"
[ $rc -eq 126 ] || fail "mvm exited $rc on a KVM that cannot run the guest, expected 126"
grep -Eq '^mvm: vCPU [0-9]+: KVM_EXIT_[A-Z_]+.*; RIP 0x[0-9a-f]+ \([^)]*(mode|paging)[^)]*\), bytes at RIP: ([0-9a-f]{2}( |$)|unreadable)' "$tmp/err" ||
	fail "no line with the vCPU, the exit, RIP, the mode and the instruction bytes"
grep -Eq 'bytes at RIP: [0-9a-f]{2} [0-9a-f]{2}' "$tmp/err" ||
	fail "the instruction bytes at RIP were not read (the guest runs from RAM)"
if [ -d /sys/module/kvm_pvm ]; then
	grep -q "^mvm: this host's KVM is PVM (kvm_pvm), which cannot run unmodified guests; run mvm under the nested harness instead: MVM_KVM=nested tests/with-kvm" "$tmp/err" ||
		fail "no PVM hint on a PVM host"
fi
echo "direct run on a KVM that cannot run Linux: 126 with RIP, mode, bytes and the hint"
