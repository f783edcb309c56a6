#!/usr/bin/env bash
# A VM made through the API (vm.create, vm.add-disk, vm.boot) by a jailed
# mvm (--uid, --gid: the jail's limits, RLIMIT_FSIZE among them): the
# limit covers the VM's disks as it boots, the one vm.add-disk gave it
# before the boot included, so the guest writes that 2 GiB disk to the end
# (a write 1.5 GiB in lands in the image); and it covers a core dump of
# its 3 GiB of RAM beneath --snapshot-dir, a few KiB more than the RAM
# (mvm_coredump_size_max).
. "$(dirname "$0")/lib.sh"
sock=$SYS_TMP/api.sock
img=$SYS_TMP/big.img
truncate -s 2G "$img"
make_image "$SYS_TMP/small.img" 4
script='
dd if=/dev/urandom of=/tmp/mark bs=64k count=1 2>/dev/null
dd if=/tmp/mark of=/dev/vdb bs=64k seek=24576 oflag=direct 2>/dev/null && echo MVM-WROTE-OK || echo MVM-WROTE-FAILED
md5sum </tmp/mark | cut -d" " -f1 | sed "s/^/MVM-MARK=/"
sleep 600
'
"$MVM" --uid 0 --gid 0 --api-socket "$sock" --snapshot-dir "$SYS_TMP/dumps" </dev/null >"$SYS_TMP/out" 2>&1 &
pid=$!
for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.1; done
expect 204 PUT vm.create -H 'Content-Type: application/json' -d "{
	\"payload\": {\"kernel\": \"$SYS_ROOT/build/guest/bzImage\",
		\"initramfs\": \"$SYS_ROOT/build/guest/initramfs.cpio.gz\", \"cmdline\": \"$(guest_script "$script")\"},
	\"memory\": {\"size\": 3221225472}, \"disks\": [{\"path\": \"$SYS_TMP/small.img\"}]}"
expect 200 PUT vm.add-disk -d "{\"path\": \"$img\"}"
expect 204 PUT vm.boot
for _ in $(seq 1 600); do grep -q '^MVM-MARK=' "$SYS_TMP/out" && break; kill -0 $pid 2>/dev/null || break; sleep 0.2; done
child=$(cat "/proc/$pid/task/$pid/children" 2>/dev/null); child=${child%% *}
limit=$(awk '/^Max file size/ { print $4 }' "/proc/${child:-$pid}/limits" 2>/dev/null)
echo "the jailed mvm's file size limit: ${limit:-?} bytes"
grep -q '^MVM-WROTE-OK' "$SYS_TMP/out" || { tail -n 20 "$SYS_TMP/out"; fail "the guest could not write its disk 1.5 GiB in"; }
mark=$(sed -n 's/^MVM-MARK=\([0-9a-f]*\).*/\1/p' "$SYS_TMP/out")
got=$(dd if="$img" bs=64k skip=24576 count=1 2>/dev/null | md5sum | cut -d' ' -f1)
[ "$mark" = "$got" ] || fail "the image 1.5 GiB in holds $got, the guest wrote $mark"
expect 204 PUT vm.pause
expect 204 PUT vm.coredump -d "{\"destination_url\":\"file://$SYS_TMP/dumps/core\"}"
expect 204 PUT vmm.shutdown
wait $pid
echo "jailed, from the API: the guest wrote its 2 GiB disk 1.5 GiB in, and the core dump of its RAM was written ($(stat -c %s "$SYS_TMP/dumps/core") bytes)"
