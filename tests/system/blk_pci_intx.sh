#!/usr/bin/env bash
# mvm-test: long
# virtio-pci for a guest that does not enable MSI-X (pci=nomsi): the device
# falls back to legacy INTx (level-triggered IOAPIC pin 20 + slot % 4, via
# a resampling irqfd); fio randwrite+verify passes and the one line counts.
. "$(dirname "$0")/lib.sh"
BLK_KERNEL_ARGS=pci=nomsi blk_fio_check 1 1 "" --transport pci
grep -qE '^MVM-IRQS-AFTER=virtio0=[0-9]+ *$' "$SYS_TMP/out" ||
	fail "vda did not use a single legacy interrupt line"
echo "legacy INTx carried every completion"
