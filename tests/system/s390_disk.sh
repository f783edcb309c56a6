#!/usr/bin/env bash
# mvm-test: long
# s390x disks under load, inside Hercules' s390 KVM (tests/s390/run), with
# mvm's own s390x test guest (guest/build-s390.sh): fio writes a virtio-ccw
# disk with two queues from two vCPUs (io_uring, O_DIRECT, random 4 KiB
# writes) and reads every block back against its checksum; each queue
# carries one job's requests (the test reports io_uring_enter calls and
# interrupts per request; batching itself is measured by make bench, since
# an image on L1's tmpfs completes each request before the next arrives).
# Then the guest resets that disk six times under I/O: a reader and a
# writer keep requests in flight on both queues while the guest takes the
# driver off the device (the subchannel set offline, or the driver unbound:
# Linux's VDEV_RESET, then MSCH disabling the subchannel) and gives it back;
# each time the disk comes back with two queues, and a block written after
# the last reads back. A second disk gets an ext4 file system (mkfs.ext4 in
# the guest) and a file; after mvm ends and starts again, e2fsck finds the
# file system clean and the file reads back the same, and that guest
# reboots (re-IPL), which ends mvm with 0.
set -u
cd "$(dirname "$0")/../.."
. tests/s390/lib.sh
cat >"$S390_TMP/test" <<'EOF2'
dd if=/dev/zero of=/tmp/fio.img bs=1M count=16 2>/dev/null
dd if=/dev/zero of=/tmp/fs.img bs=1M count=32 2>/dev/null
# Guest scripts travel base64-encoded: Linux passes init at most 32 words of
# command line. virtio-ccw devices probe concurrently, so each disk is
# named by its subchannel (mvm numbers them 0.0.0000... in --disk order).
cat >/tmp/names.sh <<'EOF3'
d0=$(basename /sys/bus/ccw/devices/0.0.0000/virtio*/block/*)
d1=$(basename /sys/bus/ccw/devices/0.0.0001/virtio*/block/*)
EOF3
cat /tmp/names.sh - >/tmp/first.sh <<'EOF3'
echo MVM-NPROC=$(nproc) MVM-MQ=$(ls /sys/block/$d0/mq | wc -l)
fio --name=verify --filename=/dev/$d0 --ioengine=io_uring --direct=1 --rw=randwrite \
	--bs=4k --iodepth=16 --numjobs=2 --size=4m --offset_increment=4m \
	--cpus_allowed=0,1 --cpus_allowed_policy=split \
	--verify=crc32c --do_verify=1 --verify_fatal=1 --minimal >/tmp/fio.out 2>&1
rc=$?
# The terse lines (one a job) start with their version, 3; field 5 is the
# job's error.
echo MVM-FIO-RC=$rc MVM-FIO-ERRORS=$(grep '^3;' /tmp/fio.out | cut -d';' -f5 | tr '\n' ' ')
[ $rc -eq 0 ] || tail -n 20 /tmp/fio.out
mkfs.ext4 -q /dev/$d1 && mount /dev/$d1 /mnt && cp /usr/bin/fio /mnt/data &&
	md5sum /mnt/data >/mnt/sum && umount /mnt
echo MVM-MKFS-RC=$?
# Resets under I/O on the fio disk (its block device's name may change).
disk() { basename /sys/bus/ccw/devices/0.0.0000/virtio*/block/* 2>/dev/null; }
back() {
	for w in $(seq 150); do
		d=$(disk)
		[ -n "$d" ] && [ -b "/dev/$d" ] && return 0
		sleep 0.2
	done
	return 1
}
rounds=0
for i in 1 2 3 4 5 6; do
	back || break
	(while dd if=/dev/$d of=/dev/null bs=64k count=128 iflag=direct 2>/dev/null; do :; done) &
	r=$!
	(while dd if=/dev/zero of=/dev/$d bs=64k seek=128 count=64 oflag=direct 2>/dev/null; do :; done) &
	w=$!
	sleep 2
	if [ $((i % 2)) -eq 1 ]; then
		echo 0 >/sys/bus/ccw/devices/0.0.0000/online
		wait $r $w
		echo 1 >/sys/bus/ccw/devices/0.0.0000/online
	else
		echo 0.0.0000 >/sys/bus/ccw/drivers/virtio_ccw/unbind
		wait $r $w
		echo 0.0.0000 >/sys/bus/ccw/drivers/virtio_ccw/bind
	fi
	rounds=$i
done
back && echo MVMRESETOK | dd of=/dev/$d bs=512 seek=4096 oflag=direct conv=sync,fsync 2>/dev/null
echo MVM-RESET-ROUNDS=$rounds MVM-RESET-DATA=$(dd if=/dev/$d bs=512 skip=4096 count=1 \
	iflag=direct 2>/dev/null | head -c 10) MVM-RESET-MQ=$(ls /sys/block/$d/mq | wc -l)
EOF3
cat /tmp/names.sh - >/tmp/second.sh <<'EOF3'
e2fsck -fn /dev/$d1 >/tmp/fsck.out 2>&1
echo MVM-FSCK-RC=$?
mount /dev/$d1 /mnt && md5sum -c /mnt/sum >/dev/null && cmp /mnt/data /usr/bin/fio
echo MVM-REMOUNT-RC=$?
umount /mnt
reboot -f
EOF3
/mvm --uid 0 --gid 0 --kernel /guest/vmlinuz --initrd /guest/initrd.gz --mem 256M --stats \
	--disk /tmp/fio.img,queues=2 --disk /tmp/fs.img \
	--cmdline "-- echo $(base64 -w0 /tmp/first.sh) | base64 -d | sh" 2>/tmp/stats
echo "MVM-FIRST-RC=$?"
# The first disk's two queues, then the second disk's: requests,
# io_uring_enter calls and interrupts of each.
for f in requests io_uring_enter irqs; do
	echo "MVM-Q-$f=$(grep -o "\"$f\":[0-9]*" /tmp/stats | cut -d: -f2 | tr '\n' ' ')"
done
grep -v '^{' /tmp/stats
/mvm --uid 0 --gid 0 --kernel /guest/vmlinuz --initrd /guest/initrd.gz --mem 256M \
	--disk /tmp/fio.img,queues=2 --disk /tmp/fs.img \
	--cmdline "-- echo $(base64 -w0 /tmp/second.sh) | base64 -d | sh"
echo "MVM-SECOND-RC=$?"
EOF2
s390_run "$S390_TMP/test"
out=$S390_TMP/out
grep -q '^MVM-NPROC=2 MVM-MQ=2$' "$out" || fail "the guest did not get 2 vCPUs and 2 hardware queues on the fio disk"
grep -qE '^MVM-FIO-RC=0 MVM-FIO-ERRORS=0 0 ?$' "$out" || fail "fio's random writes with verify failed"
grep -q '^MVM-MKFS-RC=0$' "$out" || fail "mkfs.ext4, mount or the file copy failed in the guest"
grep -q '^MVM-RESET-ROUNDS=6 MVM-RESET-DATA=MVMRESETOK MVM-RESET-MQ=2$' "$out" ||
	fail "the fio disk did not come back working after each of six resets under I/O"
grep -q '^MVM-FIRST-RC=0$' "$out" || fail "the first guest did not end mvm with 0"
read -r q0 q1 q2 _ <<<"$(sed -n 's/^MVM-Q-requests=//p' "$out")"
read -r e0 e1 _ <<<"$(sed -n 's/^MVM-Q-io_uring_enter=//p' "$out")"
read -r i0 i1 _ <<<"$(sed -n 's/^MVM-Q-irqs=//p' "$out")"
[ -n "${q2:-}" ] && [ -n "${e1:-}" ] && [ -n "${i1:-}" ] || fail "mvm --stats did not list three queues"
# fio alone writes and reads 2 x 1024 blocks, one job per vCPU and queue.
[ "$q0" -ge 1024 ] && [ "$q1" -ge 1024 ] ||
	fail "the fio disk's queues carried $q0 and $q1 requests: not both used"
[ "$q2" -gt 0 ] || fail "the ext4 disk's queue carried no requests"
grep -q '^MVM-FSCK-RC=0$' "$out" || fail "e2fsck found the ext4 file system unclean after mvm restarted"
grep -q '^MVM-REMOUNT-RC=0$' "$out" || fail "the file written before the restart did not read back the same"
grep -q '^MVM-SECOND-RC=0$' "$out" || fail "the second guest's reboot did not end mvm with 0"
per() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo "s390x: fio randwrite+verify over 2 virtio-ccw queues ($q0 + $q1 requests;" \
	"io_uring_enter $(per $((e0 + e1)) $((q0 + q1))) and interrupts $(per $((i0 + i1)) $((q0 + q1)))" \
	"a request); six resets under I/O; ext4 made in the guest stayed clean and intact across an" \
	"mvm restart; a guest reboot ended mvm with 0"
