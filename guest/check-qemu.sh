#!/usr/bin/env bash
# Check the test guest without mvm or KVM: boot build/guest (run
# guest/build.sh first) in QEMU TCG, once as bzImage and once as vmlinux
# through PVH, with QEMU's isa-debug-exit on the mvm exit port (0x501; QEMU
# then exits with (status << 1) | 1). Checks: the command after " -- " runs
# and its status arrives; all CPUs of the MP table are online; a shell without a command
# reads the console and reports its exit status; fio (io_uring, libaio,
# psync, crc32c verify) on a virtio-blk disk; blk-mq; mkfs.ext4 + mount;
# command lines longer than 32 words. Slow under TCG (minutes); not part of
# tests/run. Prints one line per check and "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
G=$ROOT/build/guest
for f in bzImage vmlinux initramfs.cpio.gz; do
	[ -r "$G/$f" ] || { echo "missing $G/$f: run guest/build.sh first" >&2; exit 1; }
done
command -v qemu-system-x86_64 >/dev/null || { echo "qemu-system-x86_64 not found (package qemu-system-x86)" >&2; exit 77; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mvm-guest-check.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0 failed=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }

# boot KERNEL CMDLINE_TAIL [QEMU ARGS...]: output in $TMP/out, status in RC.
boot() {
	local kernel=$1 tail=$2
	shift 2
	timeout -k 5 "${CHECK_TIMEOUT:-300}" qemu-system-x86_64 -accel tcg -cpu max -smp 4 -m 512 \
		-nographic -no-reboot -kernel "$kernel" -initrd "$G/initramfs.cpio.gz" \
		-append "console=ttyS0 reboot=k panic=-1 $tail" \
		-device isa-debug-exit,iobase=0x501,iosize=1 "$@" </dev/null 2>&1 | tr -d '\r' >"$TMP/out"
	RC=${PIPESTATUS[0]}
}
has() { grep -qE -- "$1" "$TMP/out"; }
show() { tail -n 25 "$TMP/out" | sed 's/^/    | /'; }
boot_time() { sed -nE 's/^\[ *([0-9.]+)\] Run \/init as init process.*/\1/p' "$TMP/out"; }

for k in bzImage vmlinux; do
	start=$(date +%s.%N)
	boot "$G/$k" '-- echo CPUS=$(nproc); exit 3'
	secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	# No ACPI: the CPUs are those in the firmware's MP table (SeaBIOS lists
	# only the boot CPU there; mvm lists all), and all must come up.
	ncpu=$(grep -c 'Processor #' "$TMP/out")
	if [ "$RC" -eq 7 ] && [ "$ncpu" -ge 1 ] && has "^CPUS=$ncpu\$"; then
		ok "$k: command ran, all $ncpu MP-table CPU(s) online, exit 3 reported (/init at $(boot_time) s guest time, $secs s wall under TCG)"
	else
		bad "$k: want CPUS=$ncpu (MP table) and QEMU status 7, got status $RC"; show
	fi
done

# Interactive shell: wait for the prompt line, then type on the console.
mkfifo "$TMP/in"
(timeout -k 5 "${CHECK_TIMEOUT:-300}" qemu-system-x86_64 -accel tcg -cpu max -smp 2 -m 256 \
	-nographic -no-reboot -kernel "$G/bzImage" -initrd "$G/initramfs.cpio.gz" \
	-append "console=ttyS0 reboot=k panic=-1" \
	-device isa-debug-exit,iobase=0x501,iosize=1 <"$TMP/in" >"$TMP/out" 2>&1
	echo "$?" >"$TMP/rc") &
exec 3>"$TMP/in"
for _ in $(seq 600); do
	has 'starting a shell' && break
	[ -e "$TMP/rc" ] && break
	sleep 0.5
done
sleep 2
echo 'echo JOBS-$(jobs; echo ok); exit 5' >&3
wait
exec 3>&-
RC=$(cat "$TMP/rc")
if [ "$RC" -eq 11 ] && has '^JOBS-ok' && ! has 'job control turned off'; then
	ok "shell on the console: job control on, 'exit 5' reported"
else
	bad "shell: want QEMU status 11 and job control, got status $RC"; show
fi

# virtio-blk disk: blk-mq, fio engines with verify, ext4, a long command.
truncate -s 128M "$TMP/disk.raw"
cmd='ls -d /sys/block/vda/mq >/dev/null && echo MQ-OK;'
for e in io_uring libaio psync; do
	cmd+=" fio --name=$e --filename=/dev/vda --size=8M --rw=randwrite --bs=4k --direct=1"
	cmd+=" --ioengine=$e --iodepth=8 --verify=crc32c --verify_fatal=1 --output=/tmp/$e.log"
	cmd+=" && echo FIO-$e-OK || cat /tmp/$e.log;"
done
cmd+=' mkfs.ext4 -q -F /dev/vda && mount -t ext4 /dev/vda /mnt && echo hello >/mnt/x && umount /mnt'
cmd+=' && mount -t ext4 /dev/vda /mnt && grep -qx hello /mnt/x && echo EXT4-OK;'
cmd+=' fio --name=f --filename=/mnt/f --size=8M --rw=randwrite --bs=4k --ioengine=io_uring'
cmd+=' --iodepth=8 --verify=crc32c --output=/tmp/f.log && echo FIO-EXT4-OK; exit 0'
words=$(echo "$cmd" | wc -w)
boot "$G/bzImage" "-- $cmd" -drive "file=$TMP/disk.raw,if=virtio,format=raw"
if [ "$RC" -eq 1 ] && has '^MQ-OK$' && has '^FIO-io_uring-OK$' && has '^FIO-libaio-OK$' &&
	has '^FIO-psync-OK$' && has '^EXT4-OK$' && has '^FIO-EXT4-OK$'; then
	ok "virtio-blk: blk-mq, fio io_uring/libaio/psync with crc32c verify, mkfs.ext4 + mount, fio on ext4 ($words-word command)"
else
	bad "virtio-blk checks (QEMU status $RC, want 1 = exit 0)"; show
fi

echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
