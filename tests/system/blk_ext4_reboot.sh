#!/usr/bin/env bash
# mvm-test: long
# A file written through ext4 survives a restart of mvm on the same image:
# mkfs.ext4 + mount + write + sync in one boot, mount + checksum in the next.
. "$(dirname "$0")/lib.sh"
make_image "$SYS_TMP/disk.img" 64
sys_run "$SYS_TMP/out1" --disk "$SYS_TMP/disk.img" --cmdline \
	'-- mkdir -p /mnt && mkfs.ext4 -q /dev/vda && mount /dev/vda /mnt && dd if=/dev/urandom of=/mnt/file bs=1M count=4 2>/dev/null && sync && echo MVM-SUM1=$(sha256sum /mnt/file) && umount /mnt'
[ "$SYS_RC" -eq 0 ] || fail "first boot: mvm exited $SYS_RC"
sum1=$(sed -n 's/^MVM-SUM1=\([0-9a-f]\{64\}\).*/\1/p' "$SYS_TMP/out1")
[ -n "$sum1" ] || fail "first boot printed no checksum"
sys_run "$SYS_TMP/out2" --disk "$SYS_TMP/disk.img" --cmdline \
	'-- mkdir -p /mnt && mount /dev/vda /mnt && echo MVM-SUM2=$(sha256sum /mnt/file) && umount /mnt'
[ "$SYS_RC" -eq 0 ] || fail "second boot: mvm exited $SYS_RC"
sum2=$(sed -n 's/^MVM-SUM2=\([0-9a-f]\{64\}\).*/\1/p' "$SYS_TMP/out2")
[ "$sum1" = "$sum2" ] || fail "checksum after restart '$sum2' != '$sum1'"
echo "file checksum identical across restart: $sum1"
