#!/usr/bin/env bash
# mvm-test: long
# s390x end to end, inside Hercules' s390 KVM (tests/s390/run): mvm's probe
# says the KVM runs guests; the s390x test guest (guest/build-s390.sh)
# boots under mvm with two vCPUs (SIGP bring-up) and two virtio-ccw disks, the
# first with two queues that the guest uses as two hardware queues; its
# console (SCLP VT220) is mvm's stdout; the guest reads what the host put on the rw disk and writes
# a marker the host then finds in the image; the ro disk refuses a write and
# is unchanged; the command's exit status (SCLP control-program
# identification) is mvm's; a poweroff with two vCPUs ends mvm with 0; a
# kernel panic (a disabled wait), with mvm's own command line (panic=-1),
# ends mvm with 123 and says so.
# Long (make test-long) since make test passed 20 minutes: the s390x
# paths are unit-tested big-endian under qemu-user in make test.
set -u
cd "$(dirname "$0")/../.."
. tests/s390/lib.sh
cat >"$S390_TMP/test" <<'EOF2'
/mvm --probe-kvm
echo "PROBE-RC=$?"
dd if=/dev/zero of=/tmp/rw.img bs=1M count=8 2>/dev/null
echo HOSTDATA | dd of=/tmp/rw.img conv=notrunc 2>/dev/null
dd if=/dev/zero of=/tmp/ro.img bs=1M count=1 2>/dev/null
echo RODATA | dd of=/tmp/ro.img conv=notrunc 2>/dev/null
# The guest's script travels base64-encoded: Linux passes init at most 32
# words of command line.
cat >/tmp/guest.sh <<'EOF3'
# virtio-ccw devices probe concurrently, so vda is not always the first
# --disk: name each by its subchannel's device number (mvm gives the
# disks 0.0.0000, 0.0.0001... in command-line order), as udev's by-path does.
rw=$(basename /sys/bus/ccw/devices/0.0.0000/virtio*/block/*)
ro=$(basename /sys/bus/ccw/devices/0.0.0001/virtio*/block/*)
echo MVM-S390-HELLO $((6 * 7))
echo MVM-NPROC=$(nproc) MVM-MQ=$(ls /sys/block/$rw/mq | wc -l)
echo MVM-RW-SECTORS=$(cat /sys/block/$rw/size)
echo MVM-RW-HEAD=$(head -c 8 /dev/$rw)
echo GUESTDATA | dd of=/dev/$rw bs=512 seek=1 conv=fsync 2>/dev/null
echo MVM-RW-WRITE-RC=$?
echo MVM-RO=$(cat /sys/block/$ro/ro)
blockdev --setrw /dev/$ro
dd if=/dev/zero of=/dev/$ro bs=512 count=1 oflag=direct conv=fsync 2>/dev/null
echo MVM-RO-WRITE-RC=$?
exit 42
EOF3
/mvm --uid 0 --gid 0 --kernel /guest/vmlinuz --initrd /guest/initrd.gz --mem 256M \
	--disk /tmp/rw.img,queues=2 --disk /tmp/ro.img,ro \
	--cmdline "-- echo $(base64 -w0 /tmp/guest.sh) | base64 -d | sh"
echo "MVM-RC=$?"
echo "HOST-RW-SECTOR1=$(dd if=/tmp/rw.img bs=512 skip=1 count=1 2>/dev/null | head -c 9)"
echo "HOST-RO-HEAD=$(head -c 6 /tmp/ro.img)"
/mvm --uid 0 --gid 0 --kernel /guest/vmlinuz --initrd /guest/initrd.gz --mem 256M --cpus 2 \
	--cmdline '-- poweroff -f'
echo "POWEROFF-RC=$?"
/mvm --uid 0 --gid 0 --kernel /guest/vmlinuz --initrd /guest/initrd.gz --mem 256M \
	--cmdline '-- echo c >/proc/sysrq-trigger' >/tmp/panic 2>&1
echo "PANIC-RC=$?"
grep -o 'disabled wait.*panicked' /tmp/panic
EOF2
s390_run "$S390_TMP/test"
out=$S390_TMP/out
grep -q '^direct: ' "$out" || fail "mvm --probe-kvm in L1 did not say direct"
grep -q '^MVM-S390-HELLO 42' "$out" || fail "no output from the guest's command"
grep -q '^MVM-RC=42$' "$out" || fail "mvm did not exit with the guest's status 42"
grep -q '^MVM-NPROC=2 MVM-MQ=2$' "$out" || fail "the guest did not get 2 vCPUs and 2 hardware queues on the rw disk"
grep -q '^POWEROFF-RC=0$' "$out" || fail "a guest powering off with 2 vCPUs did not end mvm with 0"
grep -q '^MVM-RW-SECTORS=16384$' "$out" || fail "the guest did not see an 8 MiB rw disk"
grep -q '^MVM-RW-HEAD=HOSTDATA$' "$out" || fail "the guest did not read what the host wrote"
grep -q '^MVM-RW-WRITE-RC=0$' "$out" || fail "the guest's write to the rw disk failed"
grep -q '^HOST-RW-SECTOR1=GUESTDATA$' "$out" || fail "the guest's write did not reach the image"
grep -q '^MVM-RO=1$' "$out" || fail "the ro disk is not read-only in the guest"
grep -qE '^MVM-RO-WRITE-RC=[1-9]' "$out" || fail "a write to the ro disk did not fail"
grep -q '^HOST-RO-HEAD=RODATA$' "$out" || fail "the ro image changed"
grep -q '^PANIC-RC=123$' "$out" || fail "a panicking guest did not end mvm with 123"
grep -q 'disabled wait.*panicked' "$out" || fail "mvm did not say the guest panicked (a disabled wait)"
echo "s390x: guest booted under mvm in Hercules' KVM with 2 vCPUs and two virtio-ccw disks (2 hardware queues, rw round trip, ro refused); exit status 42, poweroff (0) and a panic (123) reached mvm"
