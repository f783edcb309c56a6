#!/usr/bin/env bash
# mvm --api-socket, driven with curl --unix-socket only, as Cloud
# Hypervisor's users drive its API, with the sandbox on (the API thread in
# its own filter): the VM made by vm.create (a VmConfig with a field mvm
# does not have refused), given a vsock device by vm.add-vsock (405 once
# it runs) and started by vm.boot; ping; the socket is 0600; vm.info says Running; a pause
# stops the guest's console and its disk (a second pause is refused with
# 405), vm.info says Paused, vm.coredump writes it as an ELF core beneath
# --snapshot-dir (only there), a resume lets it go on; counters; vm.nmi
# (curl, then mvm-remote) is one NMI on the guest's vCPU each time; bad
# requests (invalid JSON 400, an unknown endpoint 404, an unserved one
# 501, a body over the limit 413) change nothing, and a client that
# connects and says nothing does not hold the others up; vm.update-disk
# swaps the disk's image for a larger one from --image-dir inside the
# API thread's filter (the guest sees the new size) and refuses one from
# elsewhere, and vm.resize-disk grows it there too; vm.add-disk plugs a disk from --image-dir into the hot-plug
# slot's device made at the start, inside the same filter (the guest finds
# vdb), refuses one from elsewhere, and vm.remove-device takes it out;
# vm.power-button (the keyboard's Power key) has the guest shut down,
# which ends mvm with status 0. Then, with the sandbox off and a hot-plug slot,
# a second VM from vm.create (its VmConfig with a rate-limit group) and
# vm.boot; vm.add-disk plugs a disk that names the group, limited to 100
# requests/s by it, in (PciDeviceInfo with its BDF; the guest finds it and
# its data, writes it and reads it back, and fio measures the limit),
# vm.info and vm.counters show it under its id, a second finds no slot,
# vm.remove-device takes it out with the guest's cooperation, and the
# slot takes it again; a snapshot holds it in its slot; vm.update-disk
# changes a running disk's limits (inside the sandboxed API thread's
# filter) and image. The snapshot restored gives the guest
# its disk in the slot as before, which vm.remove-device takes out, and
# the slot takes a disk again.
. "$(dirname "$0")/lib.sh"
sock=$SYS_TMP/api.sock
img=$SYS_TMP/disk.img
make_image "$img" 8
mkdir "$SYS_TMP/images"
make_image "$SYS_TMP/images/big.img" 16
make_image "$SYS_TMP/images/hot.img" 4

# The VM from vm.create and vm.boot, as Cloud Hypervisor's clients make
# one: mvm given the socket alone (and the sandbox's ids) serves until
# the boot, then confines itself as with a VM from the command line.
"$MVM" "${SYS_IDS[@]}" --api-socket "$sock" --image-dir "$SYS_TMP/images" --hotplug-slots 1 \
	--snapshot-dir "$SYS_TMP/dumps" </dev/null >"$SYS_TMP/out" 2>&1 &
pid=$!
for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.1; done
expect 404 GET vm.info
expect 204 PUT vm.delete
cmdline=$(guest_script 'i=0; while [ $i -lt 3000 ]; do echo tick $i $(cut -d" " -f1 /proc/uptime) sectors $(cat /sys/block/vda/size) vdb $(cat /sys/block/vdb/size 2>/dev/null || echo -) nmi $(awk "/NMI:/ { print \$2 }" /proc/interrupts); i=$((i+1)); sleep 0.1; done')
expect 400 PUT vm.create -H 'Content-Type: application/json' \
	-d "{\"payload\":{\"kernel\":\"$SYS_ROOT/build/guest/bzImage\"},\"net\":[{\"tap\":\"t0\"}]}"
expect 204 PUT vm.create -H 'Content-Type: application/json' -d "{
	\"payload\": {\"kernel\": \"$SYS_ROOT/build/guest/bzImage\",
		\"initramfs\": \"$SYS_ROOT/build/guest/initramfs.cpio.gz\", \"cmdline\": \"$cmdline\"},
	\"cpus\": {\"boot_vcpus\": 1, \"max_vcpus\": 1}, \"memory\": {\"size\": 268435456},
	\"disks\": [{\"path\": \"$img\"}], \"serial\": {\"mode\": \"Tty\"},
	\"console\": {\"mode\": \"Off\"}}"
expect 200 GET vm.info
grep -q '"state":"Created"' "$SYS_TMP/body" || fail "vm.info after vm.create: not Created"
# A vsock device before the boot (no vsock hot-plug): into the VmConfig,
# made with the VM inside the sandbox's limits.
expect 200 PUT vm.add-vsock -d "{\"cid\":3,\"socket\":\"$SYS_TMP/vsock.sock\"}"
grep -q '"id":"_vsock0"' "$SYS_TMP/body" || fail "vm.add-vsock: $(cat "$SYS_TMP/body")"
expect 204 PUT vm.boot
# At once, as Kata Containers' driver asks after its boot: the answer went
# out before the main thread confined the process and started the VM, and
# this request waits for that start.
expect 200 GET vm.info
grep -q '"state":"Running"' "$SYS_TMP/body" || fail "vm.info right after vm.boot: $(cat "$SYS_TMP/body")"
for _ in $(seq 1 600); do grep -q 'tick 5 ' "$SYS_TMP/out" && break; kill -0 $pid 2>/dev/null || break; sleep 0.2; done
grep -q 'tick 5 ' "$SYS_TMP/out" || { tail -n 20 "$SYS_TMP/out"; fail "the guest did not tick"; }
expect 405 PUT vm.boot
# A reboot makes the VM again, which a confined process cannot.
expect 500 PUT vm.reboot
grep -q 'not in a confined mvm' "$SYS_TMP/body" || fail "vm.reboot under the sandbox: $(cat "$SYS_TMP/body")"

expect 200 GET vmm.ping
grep -q '"version":"' "$SYS_TMP/body" || fail "vmm.ping: no version"
mode=$(stat -c %a "$sock")
[ "$mode" = 600 ] || fail "the API socket's mode is $mode, expected 600"
expect 200 GET vm.info
grep -q '"state":"Running"' "$SYS_TMP/body" || fail "vm.info: not Running"
grep -q "\"path\":\"$img\"" "$SYS_TMP/body" || fail "vm.info: no disk $img"

expect 204 PUT vm.pause
expect 405 PUT vm.pause
expect 200 GET vm.info
grep -q '"state":"Paused"' "$SYS_TMP/body" || fail "vm.info: not Paused"
n0=$(wc -c <"$SYS_TMP/out")
sleep 2
n1=$(wc -c <"$SYS_TMP/out")
[ "$n0" = "$n1" ] || fail "the guest printed $((n1 - n0)) bytes while paused"
echo "paused: no console output for 2 s"
# vm.coredump of the paused guest inside the API thread's filter: only
# beneath --snapshot-dir; an ELF core as crash reads it.
expect 400 PUT vm.coredump -d "{\"destination_url\":\"file://$SYS_TMP/guest.core\"}"
grep -q "coredump $SYS_TMP/guest.core: its directory .*not beneath the snapshot directory" "$SYS_TMP/body" ||
	fail "vm.coredump outside --snapshot-dir: $(cat "$SYS_TMP/body")"
expect 204 PUT vm.coredump -d "{\"destination_url\":\"file://$SYS_TMP/dumps/guest.core\"}"
python3 "$SYS_ROOT/tests/system/coredump_check.py" "$SYS_TMP/dumps/guest.core" \
	"$SYS_ROOT/build/guest/vmlinux" 1 268435456 || fail "vm.coredump's file is not the guest's core"
[ ! -e "$SYS_TMP/dumps/guest.core.part" ] || fail "vm.coredump left its temporary file"
expect 204 PUT vm.resume
for _ in $(seq 1 100); do [ "$(wc -c <"$SYS_TMP/out")" -gt "$n1" ] && break; sleep 0.1; done
[ "$(wc -c <"$SYS_TMP/out")" -gt "$n1" ] || fail "no console output after the resume"
expect 200 GET vm.counters
grep -q '"_disk0":{' "$SYS_TMP/body" || fail "vm.counters: no _disk0"
grep -q '"_vsock0":{' "$SYS_TMP/body" || fail "vm.counters: no _vsock0 (vm.add-vsock before the boot)"
[ -S "$SYS_TMP/vsock.sock" ] || fail "the vsock device's socket is not there"
expect 405 PUT vm.add-vsock -d "{\"cid\":4,\"socket\":\"$SYS_TMP/vsock2.sock\"}"
# vm.nmi inside the API thread's filter: each call is one NMI on the
# guest's vCPU, every time (the guest's count in /proc/interrupts, on its
# tick lines); the second through mvm-remote.
last_nmi() { grep -o 'nmi [0-9]*' "$SYS_TMP/out" | tail -n 1 | cut -d' ' -f2; }
wait_nmi() {
	for _ in $(seq 1 100); do [ "$(last_nmi)" = "$1" ] && return; sleep 0.1; done
	fail "the guest counts $(last_nmi) NMIs, expected $1"
}
nmi0=$(last_nmi)
[ -n "$nmi0" ] || fail "no NMI count on the guest's tick lines"
expect 204 PUT vm.nmi
wait_nmi $((nmi0 + 1))
remote nmi
wait_nmi $((nmi0 + 2))
sleep 1
[ "$(last_nmi)" = $((nmi0 + 2)) ] || fail "the guest counts $(last_nmi) NMIs after two calls, from $nmi0"
echo "vm.nmi twice under the sandbox: the guest took one NMI each time ($nmi0 -> $((nmi0 + 2)))"
# Limits change at run time inside the API thread's filter (vm.update-disk,
# mvm's own endpoint), and so does the image, from --image-dir only.
expect 204 PUT vm.update-disk -d '{"id":"_disk0","rate_limiter_config":{"ops":{"size":10,"refill_time":100}}}'
expect 200 GET vm.info
grep -q '"ops":{"size":10,"one_time_burst":0,"refill_time":100}' "$SYS_TMP/body" ||
	fail "vm.info after vm.update-disk: $(cat "$SYS_TMP/body")"
expect 400 PUT vm.update-disk -d "{\"id\":\"_disk0\",\"path\":\"$img\"}"
grep -q 'not beneath the image directory' "$SYS_TMP/body" || fail "vm.update-disk from outside --image-dir: $(cat "$SYS_TMP/body")"
expect 204 PUT vm.update-disk -d "{\"id\":\"_disk0\",\"path\":\"$SYS_TMP/images/big.img\"}"
for _ in $(seq 1 100); do grep -qE 'sectors 32768([^0-9]|$)' "$SYS_TMP/out" && break; sleep 0.1; done
grep -qE 'sectors 32768([^0-9]|$)' "$SYS_TMP/out" || { tail -n 5 "$SYS_TMP/out"; fail "the guest did not see the swapped image's 16 MiB"; }
echo "vm.update-disk swapped the image from --image-dir under the sandbox: the guest sees 16 MiB"
expect 200 GET vm.info
grep -q "\"path\":\"$SYS_TMP/images/big.img\"" "$SYS_TMP/body" || fail "vm.info after the swap: $(cat "$SYS_TMP/body")"
# vm.resize-disk grows that image inside the same filter (ftruncate on
# the open image; it opens nothing).
expect 400 PUT vm.resize-disk -d '{"id":"_disk0","desired_size":20000001}'
expect 204 PUT vm.resize-disk -d '{"id":"_disk0","desired_size":20971520}'
for _ in $(seq 1 100); do grep -qE 'sectors 40960([^0-9]|$)' "$SYS_TMP/out" && break; sleep 0.1; done
grep -qE 'sectors 40960([^0-9]|$)' "$SYS_TMP/out" || { tail -n 5 "$SYS_TMP/out"; fail "the guest did not see the resized image's 20 MiB"; }
[ "$(stat -c %s "$SYS_TMP/images/big.img")" = 20971520 ] || fail "big.img is $(stat -c %s "$SYS_TMP/images/big.img") bytes after vm.resize-disk"
echo "vm.resize-disk grew the image to 20 MiB under the sandbox: the guest sees 40960 sectors"
expect 200 GET vmm.ping

# Bad requests change nothing; a silent client holds nobody up.
expect 400 PUT vm.create -H 'Content-Type: application/json' -d '{"cpus": {"boot_vcpus": 2'
expect 404 GET vm.teleport
expect 501 PUT vm.add-net -H 'Content-Type: application/json' -d '{"tap":"tap0"}'
# Hot-plug inside the API thread's filter: nothing is made, the slot's
# device made at the start takes the image, from --image-dir only.
expect 400 PUT vm.add-disk -H 'Content-Type: application/json' -d "{\"path\":\"$img\"}"
grep -q 'not beneath the image directory' "$SYS_TMP/body" || fail "vm.add-disk from outside --image-dir: $(cat "$SYS_TMP/body")"
expect 200 PUT vm.add-disk -H 'Content-Type: application/json' -d "{\"path\":\"$SYS_TMP/images/hot.img\",\"id\":\"hot0\"}"
grep -q '"id":"hot0"' "$SYS_TMP/body" || fail "vm.add-disk under the sandbox: $(cat "$SYS_TMP/body")"
for _ in $(seq 1 150); do grep -qE 'vdb 8192([^0-9]|$)' "$SYS_TMP/out" && break; sleep 0.2; done
grep -qE 'vdb 8192([^0-9]|$)' "$SYS_TMP/out" || { tail -n 5 "$SYS_TMP/out"; fail "the guest did not find the disk plugged in under the sandbox"; }
expect 204 PUT vm.remove-device -d '{"id":"hot0"}'
n1=$(wc -l <"$SYS_TMP/out")
for _ in $(seq 1 50); do tail -n +"$n1" "$SYS_TMP/out" | grep -q 'vdb -' && break; sleep 0.2; done
tail -n +"$n1" "$SYS_TMP/out" | grep -q 'vdb -' || fail "the guest still has vdb after vm.remove-device under the sandbox"
echo "under the sandbox: vm.add-disk plugged an image from --image-dir in (the guest found vdb), vm.remove-device took it out"
head -c 100000 /dev/zero | tr '\0' ' ' >"$SYS_TMP/big"
expect 413 PUT vm.create -H 'Content-Type: application/json' --data-binary "@$SYS_TMP/big"
socat -u UNIX-CONNECT:"$sock" - >/dev/null 2>&1 &
silent=$!
sleep 0.5
expect 200 GET vmm.ping
kill $silent 2>/dev/null
expect 200 GET vm.info
grep -q '"state":"Running"' "$SYS_TMP/body" || fail "vm.info after bad requests: not Running"
# Counted by kind, the first of each logged once: two 400s (the bad
# JSON, then the image from outside --image-dir), one line.
expect 200 GET vm.counters
grep -q '"_api":{[^}]*"http_413":1' "$SYS_TMP/body" || fail "vm.counters' _api after a 413: $(cat "$SYS_TMP/body")"
n400=$(grep -c 'mvm: API: .*HTTP 400' "$SYS_TMP/out")
[ "$n400" = 1 ] || fail "the API logged $n400 lines for its 400s, expected 1"
grep -q 'mvm: API: PUT /api/v1/vm.create: HTTP 413: request body larger' "$SYS_TMP/out" ||
	fail "the API did not log its first 413"
echo "the API counted its errors by kind and logged the first of each (one line for several 400s)"

# The power button (x86: the i8042 keyboard's Power key, inside the API
# thread's filter): the guest's /init takes KEY_POWER as systemd-logind
# would, its session gets SIGTERM, and the guest ends as a poweroff does:
# mvm exits 0 with no vmm.shutdown.
t0=$(date +%s%N)
expect 204 PUT vm.power-button
for _ in $(seq 1 200); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
took=$((($(date +%s%N) - t0) / 1000000))
if kill -0 $pid 2>/dev/null; then
	tail -n 5 "$SYS_TMP/out"
	kill -KILL $pid
	fail "mvm still running 20 s after vm.power-button"
fi
wait $pid; rc=$?
tail -n 3 "$SYS_TMP/out" | tr -d '\r' | sed 's/^/    guest| /'
grep -q 'mvm guest: power button: shutting down' "$SYS_TMP/out" || fail "the guest did not see the power key"
[ $rc -eq 0 ] || fail "mvm exited $rc after vm.power-button, expected 0"
echo "vm.power-button under the sandbox: the guest took the power key and shut down; mvm exited 0 after $took ms"

# Hot-plug through the API: the sandbox off (vm.add-disk opens the image
# and makes threads), one hot-plug slot, the VM again from vm.create. The
# guest reports each vd* disk that comes or goes, with its size and the
# md5sum of its first MiB, then writes a pattern to it and reads it back,
# and measures its IOPS with fio.
hot=$SYS_TMP/hot.img
head -c 4M /dev/urandom >"$hot"
sum=$(head -c 1M "$hot" | md5sum | cut -d' ' -f1)
"$MVM" --sandbox off --hotplug-slots 1 --api-socket "$sock" </dev/null >"$SYS_TMP/out" 2>&1 &
pid=$!
for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.1; done
script='if [ "$(dd if=/dev/vda bs=512 count=1 iflag=direct 2>/dev/null | head -c 6)" = reboot ]; then
	printf booted | dd of=/dev/vda conv=notrunc,fsync 2>/dev/null; echo guest-reboot; reboot -f; fi
p=; while :; do c=; for b in /sys/block/vd[b-z]; do [ -e $b ] && c="$c ${b##*/}"; done
for d in $c; do case " $p " in *" $d "*) ;; *)
	echo "hp-new $d $(cat /sys/block/$d/size) $(dd if=/dev/$d bs=4096 count=256 2>/dev/null | md5sum)"
	dd if=/dev/urandom of=/tmp/pat bs=4k count=32 2>/dev/null
	dd if=/tmp/pat of=/dev/$d bs=4k seek=512 oflag=direct 2>/dev/null
	dd if=/dev/$d bs=4k skip=512 count=32 iflag=direct 2>/dev/null | cmp -s - /tmp/pat && echo "hp-rw-ok $d"
	echo "hp-iops $d $(fio --name=r --filename=/dev/$d --rw=randread --bs=4k --ioengine=io_uring --direct=1 --iodepth=8 --runtime=4 --time_based --output-format=terse --terse-version=3 | cut -d";" -f8)";;
esac; done
for d in $p; do case " $c " in *" $d "*) ;; *) echo "hp-gone $d";; esac; done; p=$c; echo tick; sleep 0.1; done'
expect 204 PUT vm.create -H 'Content-Type: application/json' -d "{
	\"payload\": {\"kernel\": \"$SYS_ROOT/build/guest/bzImage\",
		\"initramfs\": \"$SYS_ROOT/build/guest/initramfs.cpio.gz\",
		\"cmdline\": \"$(guest_script "$script")\"},
	\"rate_limit_groups\": [{\"id\": \"tenant1\",
		\"rate_limiter_config\": {\"ops\": {\"size\": 10, \"refill_time\": 100}}}],
	\"disks\": [{\"path\": \"$img\"}]}"
expect 204 PUT vm.boot
for _ in $(seq 1 600); do grep -q '^tick' "$SYS_TMP/out" && break; kill -0 $pid 2>/dev/null || break; sleep 0.2; done
grep -q '^tick' "$SYS_TMP/out" || { tail -n 20 "$SYS_TMP/out"; fail "the second guest did not start its loop"; }
wait_guest() {   # PATTERN COUNT: the guest printed PATTERN COUNT times, within 30 s
	for _ in $(seq 1 300); do [ "$(grep -c "$1" "$SYS_TMP/out")" -ge "$2" ] && return 0; sleep 0.1; done
	grep -v '^tick' "$SYS_TMP/out" | tail -n 10
	fail "the guest did not print '$1' $2 time(s)"
}
# 100 requests/s, the VmConfig's group tenant1 (a bucket of 10, refilled
# in 100 ms), under the disk's own 1,000/s.
limited="{\"path\":\"$hot\",\"id\":\"hot0\",\"rate_limit_group\":\"tenant1\",\"rate_limiter_config\":{\"ops\":{\"size\":100,\"refill_time\":100}}}"
expect 200 PUT vm.add-disk -H 'Content-Type: application/json' -d "$limited"
grep -q '"id":"hot0"' "$SYS_TMP/body" && grep -q '"bdf":"0000:01:00.0"' "$SYS_TMP/body" ||
	fail "vm.add-disk's PciDeviceInfo: $(cat "$SYS_TMP/body")"
wait_guest "hp-new vdb 8192 $sum" 1
echo "the guest found the disk plugged in, with its data"
wait_guest "hp-rw-ok vdb" 1
echo "the guest wrote the disk and read it back"
wait_guest "hp-iops vdb [0-9]" 1
iops=$(sed -n 's/^hp-iops vdb \([0-9]*\).*/\1/p' "$SYS_TMP/out" | head -n 1)
# At most 10 + 4 s x 100 requests in 4 s (102.5/s): well above, it did not hold.
[ "$iops" -ge 1 ] && [ "$iops" -le 130 ] || fail "fio on a disk limited to 100 requests/s did $iops IOPS"
echo "fio in the guest: $iops IOPS on the disk its VmConfig's rate-limit group holds to 100 requests/s"
expect 200 GET vm.info
grep -q '"id":"hot0"' "$SYS_TMP/body" || fail "vm.info does not list hot0"
grep -q '"rate_limit_group":"tenant1","rate_limiter_config":{"ops":{"size":100,' "$SYS_TMP/body" ||
	fail "vm.info does not show hot0's limit and group: $(cat "$SYS_TMP/body")"
grep -q '"rate_limit_groups":\[{"id":"tenant1","rate_limiter_config":{"ops":{"size":10,' "$SYS_TMP/body" ||
	fail "vm.info does not show the group: $(cat "$SYS_TMP/body")"
expect 200 GET vm.counters
grep -q '"hot0":{"read_bytes":[1-9][0-9]*,"write_bytes":131072,"read_ops":[1-9][0-9]*,"write_ops":32,' "$SYS_TMP/body" ||
	fail "vm.counters: hot0's reads and writes: $(cat "$SYS_TMP/body")"
expect 500 PUT vm.add-disk -H 'Content-Type: application/json' -d "{\"path\":\"$SYS_TMP/none.img\"}"
grep -q 'hot-plug slots are taken' "$SYS_TMP/body" || fail "a second vm.add-disk: $(cat "$SYS_TMP/body")"
t0=$(date +%s%N)
expect 204 PUT vm.remove-device -H 'Content-Type: application/json' -d '{"id":"hot0"}'
echo "vm.remove-device took $(( ($(date +%s%N) - t0) / 1000000 )) ms"
wait_guest "hp-gone vdb" 1
expect 200 GET vm.info
grep -q '"id":"hot0"' "$SYS_TMP/body" && fail "vm.info still lists hot0"
expect 404 PUT vm.remove-device -H 'Content-Type: application/json' -d '{"id":"hot0"}'
expect 200 PUT vm.add-disk -H 'Content-Type: application/json' -d "{\"path\":\"$hot\",\"id\":\"hot0\"}"
wait_guest "hp-new vdb 8192 $sum" 2
echo "the slot took the disk again"
# A disk plugged in at run time goes into a snapshot in its slot (restored
# below), and the VM goes on.
expect 204 PUT vm.pause
expect 204 PUT vm.snapshot -d "{\"destination_url\":\"file://$SYS_TMP/snap\"}"
expect 204 PUT vm.resume
# Its image swapped for a larger one (vm.update-disk, sandbox off).
head -c 8M /dev/zero >"$SYS_TMP/hot2.img"
expect 204 PUT vm.update-disk -d "{\"id\":\"hot0\",\"path\":\"$SYS_TMP/hot2.img\"}"
expect 200 GET vm.info
grep -q "\"path\":\"$SYS_TMP/hot2.img\"" "$SYS_TMP/body" || fail "vm.info after the swap: $(cat "$SYS_TMP/body")"
expect 400 PUT vm.update-disk -d "{\"id\":\"hot0\",\"path\":\"$SYS_TMP/none.img\"}"
# Cloud Hypervisor's life of a VM (the sandbox off): vm.reboot makes it
# again from its VmConfig and boots it (a second kernel banner); the
# VmConfig took the disks the VM had when it ended, as Cloud Hypervisor's
# does: hot0, plugged in at run time, with its swapped image. That guest
# finds the mark written to its disk and reboots itself, which makes it
# again too (a third banner, where the loop finds hot0 at boot);
# vm.shutdown keeps the VmConfig (vm.info says Shutdown), vm.delete
# forgets it, and mvm serves on until vmm.shutdown.
booted_thrice() {  # a third kernel banner, and 2 ticks after it
	awk '/Linux version/ { n++; t = 0 } /^tick/ { t++ } END { exit !(n >= 3 && t >= 2) }' "$SYS_TMP/out"
}
printf reboot | dd of="$img" conv=notrunc 2>/dev/null
expect 204 PUT vm.reboot
for _ in $(seq 1 900); do booted_thrice && break; kill -0 $pid 2>/dev/null || break; sleep 0.2; done
booted_thrice && [ "$(grep -c '^guest-reboot' "$SYS_TMP/out")" = 1 ] ||
	{ tail -n 20 "$SYS_TMP/out"; fail "the guest did not boot again after vm.reboot and its own reboot"; }
expect 200 GET vm.info
grep -q '"state":"Running"' "$SYS_TMP/body" && grep -q '"id":"hot0"' "$SYS_TMP/body" &&
	grep -q "\"path\":\"$SYS_TMP/hot2.img\"" "$SYS_TMP/body" || fail "vm.info after vm.reboot: $(cat "$SYS_TMP/body")"
# 16384 sectors, the first MiB zeros: the swapped image, plugged in at boot.
wait_guest "hp-new vdb 16384 $(head -c 1M /dev/zero | md5sum | cut -d' ' -f1)" 1
echo "vm.reboot, then the guest's own reboot: it booted again from the VmConfig each time, with hot0"
expect 204 PUT vm.shutdown
expect 200 GET vm.info
grep -q '"state":"Shutdown"' "$SYS_TMP/body" || fail "vm.info after vm.shutdown: $(cat "$SYS_TMP/body")"
kill -0 $pid 2>/dev/null || fail "mvm ended with vm.shutdown (--sandbox off keeps it serving)"
expect 405 PUT vm.pause
expect 204 PUT vm.delete
expect 404 GET vm.info
echo "vm.shutdown kept the VmConfig, vm.delete forgot it, mvm served on"
expect 204 PUT vmm.shutdown
for _ in $(seq 1 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
if kill -0 $pid 2>/dev/null; then kill -KILL $pid; fail "mvm still running 10 s after vmm.shutdown"; fi
wait $pid; rc=$?
[ $rc -eq 0 ] || fail "the second mvm exited $rc after vmm.shutdown, expected 0"
# Not confined, it took its socket with it (the sandboxed first mvm left
# its own, which this one replaced).
[ ! -e "$sock" ] || fail "the second mvm (--sandbox off) left its socket $sock"

# The snapshot restored (its own disks, the sandbox off): the guest goes on
# with the disk in its slot, which it neither loses nor finds again; the
# disk keeps its id (hot0: snapshots keep ids), vm.remove-device takes it
# out with the guest's cooperation, and the slot takes a disk again;
# vm.info gives the snapshot's payload.
"$MVM" --sandbox off --restore "$SYS_TMP/snap" --api-socket "$sock" </dev/null >"$SYS_TMP/out" 2>&1 &
pid=$!
wait_guest '^tick' 5
! grep -q 'hp-gone\|hp-new' "$SYS_TMP/out" || fail "the restored guest lost or found its disk: $(grep hp- "$SYS_TMP/out")"
echo "restored: the guest went on with the disk in its slot"
expect 200 GET vm.info
grep -q "\"path\":\"$hot\"[^}]*\"id\":\"hot0\"" "$SYS_TMP/body" || fail "vm.info after the restore: $(cat "$SYS_TMP/body")"
# Its payload is the snapshot's guest's (the VM loads none of it).
grep -q "\"payload\":{[^}]*\"kernel\":\"$SYS_ROOT/build/guest/bzImage\"" "$SYS_TMP/body" ||
	fail "vm.info after the restore: not the snapshot's kernel: $(cat "$SYS_TMP/body")"
expect 500 PUT vm.remove-device -d '{"id":"_disk0"}'
grep -q 'not on a hot-plug slot' "$SYS_TMP/body" || fail "vm.remove-device _disk0: $(cat "$SYS_TMP/body")"
expect 204 PUT vm.remove-device -d '{"id":"hot0"}'
wait_guest "hp-gone vdb" 1
expect 200 GET vm.info
grep -q '"id":"hot0"' "$SYS_TMP/body" && fail "vm.info still lists hot0"
expect 200 PUT vm.add-disk -d "{\"path\":\"$hot\",\"id\":\"hot0\"}"
wait_guest "hp-new vdb 8192 $sum" 1
echo "the restored slot's disk was removed, and the slot took one again"
expect 204 PUT vmm.shutdown
wait $pid || fail "the restored mvm exited $? after vmm.shutdown"
