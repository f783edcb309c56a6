#!/usr/bin/env bash
# A guest that runs a guest of its own is snapshotted while its nested
# guest runs, and restored: tests/nested_guest/svm_nest.S, a hypervisor
# that runs a nested guest with AMD SVM, the nested guest counting until
# the TSC has moved on by about 10 s and then halting, which its
# hypervisor intercepts and reports. Sandboxed, through the API: paused
# while the nested guest counts, snapshotted (the vCPU's nested state,
# KVM_GET_NESTED_STATE, goes into its XNST section), the first mvm ended;
# a new mvm restores it and the nested guest goes on counting from where
# it stood, then halts into its hypervisor, which reports exit 0x78
# (VMEXIT_HLT) and ends the VM with status 0. A restore that lost the
# nested state would go on in the nested guest's code as if it were the
# hypervisor, whose HLT nobody intercepts: the VM would never end. Skipped
# where the CPU mvm gives its guest has no SVM (an Intel host's KVM).
set -u
cd "$(dirname "$0")/../.."
if [ -z "${MVM_KVM_PATH:-}" ]; then
	# Built here: the checkout is read-only in the nested harness's L1.
	make -s --no-print-directory build/plain/tests/nested_guest/svm-nest.elf ||
		{ echo "FAIL: cannot build tests/nested_guest/svm_nest.S"; exit 1; }
fi
. "$(dirname "$0")/lib.sh"
elf=$SYS_ROOT/build/plain/tests/nested_guest/svm-nest.elf
sock=$SYS_TMP/api.sock
snap=$SYS_TMP/snaps/nested

"$MVM" "${SYS_IDS[@]}" --kernel "$elf" --mem 64M --api-socket "$sock" \
	--snapshot-dir "$SYS_TMP/snaps" </dev/null >"$SYS_TMP/out" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
	grep -q 'svm-nest: running the nested guest\|svm-nest: no svm' "$SYS_TMP/out" && break
	kill -0 $pid 2>/dev/null || break
	sleep 0.1
done
if grep -q 'svm-nest: no svm' "$SYS_TMP/out"; then
	wait $pid
	echo "SKIP: the CPU mvm gives its guest has no SVM here"
	exit 77
fi
grep -q 'svm-nest: running the nested guest' "$SYS_TMP/out" ||
	{ cat "$SYS_TMP/out"; fail "the guest did not start its nested guest"; }
# Let the nested guest count a while, then take the VM in the middle.
sleep 2
expect 204 PUT vm.pause
expect 204 PUT vm.snapshot -d "{\"destination_url\":\"file://$snap\"}"
expect 204 PUT vmm.shutdown
wait $pid
! grep -q 'svm-nest: exit' "$SYS_TMP/out" || fail "the nested guest ended before the snapshot: $(cat "$SYS_TMP/out")"
grep -q XNST "$snap/state" || fail "the snapshot has no nested state (XNST)"
echo "snapshot taken while the nested guest counted: $(stat -c %s "$snap/state") bytes of state"

sock=$SYS_TMP/api2.sock
t0=$(date +%s)
timeout -k 5 120 "$MVM" "${SYS_IDS[@]}" --restore "$snap" --api-socket "$sock" \
	--snapshot-dir "$SYS_TMP/snaps" </dev/null >"$SYS_TMP/out2" 2>&1
rc=$?
tr -d '\r' <"$SYS_TMP/out2" | sed 's/^/    guest| /'
[ $rc -ne 124 ] || fail "the restored VM never ended: its nested guest's HLT went to no hypervisor"
[ $rc -eq 0 ] || fail "the restored VM ended with status $rc"
! grep -q 'svm-nest: start' "$SYS_TMP/out2" || fail "the restored guest started again from its entry"
line=$(grep -o 'svm-nest: exit 0x[0-9a-f]* count 0x[0-9a-f]*' "$SYS_TMP/out2")
[ -n "$line" ] || fail "the restored guest did not report its nested guest's exit"
case $line in *"exit 0x00000078 "*) ;; *) fail "the nested guest's exit was not its HLT: $line" ;; esac
count=$((16#${line##*0x}))
[ "$count" -gt 0 ] || fail "the nested guest counted nothing: $line"
echo "restored: the nested guest went on and halted into its hypervisor ($line, $count) $(( $(date +%s) - t0 )) s after the restore began"
