#!/usr/bin/env bash
# Run-time control through libmvm (tests/embed/control.c): a guest paused
# in the middle of a rate-limited disk read prints nothing and takes no
# request while paused, goes on after the resume with its clock where it
# stood and its data right; its disk's image swapped while it runs gives
# it the new size and data, and resized, the new size; a disk hot-plugged into a PCIe slot appears in
# the guest, goes with its cooperation, and again by surprise mid-read;
# and a VM stopped while paused ends at once;
# every thread of the VM and the caller's in their seccomp filters.
set -u
cd "$(dirname "$0")/../.."
if [ -z "${MVM_KVM_PATH:-}" ]; then
	# Built here: the checkout is read-only in the nested harness's L1.
	make -s --no-print-directory build/plain/tests/embed/mvm-control ||
		{ echo "FAIL: cannot build tests/embed/control.c"; exit 1; }
fi
. "$(dirname "$0")/lib.sh"
head -c 8M /dev/urandom >"$SYS_TMP/disk.img"
sum=$(head -c 2M "$SYS_TMP/disk.img" | md5sum | cut -d' ' -f1)
head -c 12M /dev/urandom >"$SYS_TMP/disk2.img"
sum2=$(head -c 2M "$SYS_TMP/disk2.img" | md5sum | cut -d' ' -f1)
head -c 4M /dev/urandom >"$SYS_TMP/disk3.img"
sum3=$(head -c 1M "$SYS_TMP/disk3.img" | md5sum | cut -d' ' -f1)
timeout -k 5 240 build/plain/tests/embed/mvm-control build/guest/bzImage \
	build/guest/initramfs.cpio.gz "$SYS_TMP/disk.img" "$sum" "$SYS_TMP/disk2.img" "$sum2" \
	"$SYS_TMP/disk3.img" "$sum3" \
	>"$SYS_TMP/out" 2>&1
rc=$?
tr -d '\r' <"$SYS_TMP/out" | tail -n 60
[ $rc -eq 0 ] || fail "mvm-control exited $rc"
grep -qx 'control: ok' "$SYS_TMP/out" || fail "mvm-control did not say ok"
# mvm_disk_resize made the swapped-in image 16 MiB.
size2=$(stat -c %s "$SYS_TMP/disk2.img")
[ "$size2" = $((16 << 20)) ] || fail "disk2.img is $size2 bytes after the resize, not 16 MiB"
echo "disk2.img is 16 MiB after the resize"
