#!/usr/bin/env bash
# Check the s390x test guest without mvm or KVM: boot what
# guest/build-s390.sh built in QEMU TCG (s390-ccw-virtio, 2 CPUs) with a
# virtio-blk-ccw disk of two queues. Checks: the command after " -- " runs
# on the SCLP console; both CPUs are online; the disk has two hardware
# queues; fio (io_uring, O_DIRECT, crc32c verify) on it; mkfs.ext4, mount
# and a file round trip. QEMU has no mvm exit path (the guest then reboots,
# which -no-reboot turns into QEMU's exit), so the results are console
# lines. Slow under TCG (a minute or two); not part of tests/run. Prints
# one line per check and "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v qemu-system-s390x >/dev/null ||
	{ echo "qemu-system-s390x not found (package qemu-system-misc)" >&2; exit 77; }
G=$("$ROOT/guest/build-s390.sh") || exit 1
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mvm-guest-check.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
pass=0 failed=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }
has() { grep -qE -- "$1" "$TMP/out"; }

truncate -s 64M "$TMP/disk.img"
cat >"$TMP/cmd" <<'EOF'
echo CHECK-CPUS=$(nproc) CHECK-MQ=$(ls /sys/block/vda/mq | wc -l)
fio --name=v --filename=/dev/vda --ioengine=io_uring --direct=1 --rw=randwrite --bs=4k \
	--iodepth=8 --size=8m --verify=crc32c --do_verify=1 --verify_fatal=1 --minimal >/tmp/f 2>&1
echo CHECK-FIO=$? CHECK-FIO-ERR=$(cut -d';' -f5 /tmp/f)
mkfs.ext4 -q /dev/vda && mount /dev/vda /mnt && echo hello >/mnt/f && umount /mnt &&
	mount /dev/vda /mnt && [ "$(cat /mnt/f)" = hello ]
echo CHECK-EXT4=$?
EOF
start=$(date +%s.%N)
timeout -k 5 "${CHECK_TIMEOUT:-600}" qemu-system-s390x -M s390-ccw-virtio -accel tcg -smp 2 -m 512 \
	-nographic -no-reboot -kernel "$G/vmlinuz" -initrd "$G/initrd.gz" \
	-append "panic=-1 -- echo $(base64 -w0 "$TMP/cmd") | base64 -d | sh" \
	-drive file="$TMP/disk.img",format=raw,if=none,id=d0,cache=none \
	-device virtio-blk-ccw,drive=d0,num-queues=2 </dev/null 2>&1 | tr -d '\r' >"$TMP/out"
rc=${PIPESTATUS[0]}
secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
if has '^CHECK-CPUS='; then
	ok "the guest ran its command on the SCLP console (QEMU status $rc after $secs s under TCG)"
else
	bad "no output from the guest's command (QEMU status $rc)"; tail -n 25 "$TMP/out" | sed 's/^/    | /'
fi
has '^CHECK-CPUS=2 ' && ok "2 CPUs online" || bad "want 2 CPUs: $(grep '^CHECK-CPUS' "$TMP/out")"
has 'CHECK-MQ=2$' && ok "vda has 2 hardware queues" || bad "want 2 hardware queues: $(grep '^CHECK-CPUS' "$TMP/out")"
has '^CHECK-FIO=0 CHECK-FIO-ERR=0$' && ok "fio io_uring randwrite with crc32c verify" ||
	{ bad "fio: $(grep '^CHECK-FIO' "$TMP/out")"; }
has '^CHECK-EXT4=0$' && ok "mkfs.ext4, mount, file round trip" || bad "ext4: $(grep '^CHECK-EXT4' "$TMP/out")"
echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
