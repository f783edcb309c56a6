#!/usr/bin/env bash
# mvm-test: long
# Disk hot-plug on s390x, inside Hercules' s390 KVM (tests/s390/run),
# through --api-socket with the sandbox on: mvm starts with two empty
# hot-plug slots (--hotplug-slots 2, subchannels that show no device);
# vm.add-disk puts an image from --image-dir into one, and the guest,
# told by a channel report (a machine check, then STCRW), finds it
# without a rescan: vdb appears with the image's bytes. vm.remove-device
# takes it out (the VM paused around it, so nothing in flight is lost);
# the guest's next channel report makes vdb go. The slot is offered
# again and a second disk goes in and is read.
set -u
cd "$(dirname "$0")/../.."
. tests/s390/lib.sh
cat >"$S390_TMP/test" <<'EOF2'
dd if=/dev/zero of=/tmp/disk.img bs=1M count=8 2>/dev/null
mkdir /tmp/images
for n in 1 2; do
	dd if=/dev/zero of=/tmp/images/hp$n.img bs=1M count=4 2>/dev/null
	printf 'MVM-HOTPLUG-DISK%s' $n | dd of=/tmp/images/hp$n.img conv=notrunc 2>/dev/null
done
cat >/tmp/guest.sh <<'EOF3'
i=0
while [ $i -lt 1500 ]; do
	d=-
	[ -b /dev/vdb ] && d=$(dd if=/dev/vdb bs=17 count=1 2>/dev/null)
	echo "MVM-TICK $i $(ls /sys/block | tr '\n' ,) $d"
	i=$((i + 1))
	sleep 0.2
done
EOF3
/mvm --uid 0 --gid 0 --kernel /guest/vmlinuz --initrd /guest/initrd.gz --mem 256M \
	--disk /tmp/disk.img --hotplug-slots 2 --api-socket /tmp/api.sock --image-dir /tmp/images \
	--cmdline "-- echo $(base64 -w0 /tmp/guest.sh) | base64 -d | sh" >/tmp/con 2>&1 &
pid=$!
ticks() { grep -c '^MVM-TICK' /tmp/con; }
# wait_for REGEX: up to 90 s for a tick line after the last $from matching it.
wait_for() {
	for _ in $(seq 450); do
		grep '^MVM-TICK' /tmp/con | tail -n +$((from + 1)) | grep -qE "$1" && return 0
		sleep 0.2
	done
	return 1
}
for _ in $(seq 600); do grep -q '^MVM-TICK 5 ' /tmp/con && break; sleep 0.2; done
echo "MVM-STARTED=$(ticks)"
grep '^MVM-TICK' /tmp/con | tail -n 1 | sed 's/^/MVM-BEFORE=/'
from=$(ticks)
echo "MVM-ADD=$(/apicall /tmp/api.sock PUT vm.add-disk '{"path":"/tmp/images/hp1.img","id":"hp1"}')"
wait_for 'vdb.* MVM-HOTPLUG-DISK1' && echo "MVM-SEEN1=$(($(ticks) - from))"
from=$(ticks)
echo "MVM-REMOVE=$(/apicall /tmp/api.sock PUT vm.remove-device '{"id":"hp1"}')"
wait_for '^MVM-TICK [0-9]+ vda,? -' && echo "MVM-GONE1=$(($(ticks) - from))"
echo "MVM-REMOVE-AGAIN=$(/apicall /tmp/api.sock PUT vm.remove-device '{"id":"hp1"}' | cut -d' ' -f1)"
from=$(ticks)
echo "MVM-ADD2=$(/apicall /tmp/api.sock PUT vm.add-disk '{"path":"/tmp/images/hp2.img","id":"hp2"}')"
wait_for 'vdb.* MVM-HOTPLUG-DISK2' && echo "MVM-SEEN2=$(($(ticks) - from))"
echo "MVM-COUNTERS=$(/apicall /tmp/api.sock GET vm.counters | grep -o '"hp2": *{[^}]*}' | grep -o '"read_ops": *[0-9]*')"
echo "MVM-SHUTDOWN=$(/apicall /tmp/api.sock PUT vmm.shutdown | cut -d' ' -f1)"
wait $pid
echo "MVM-RC=$?"
grep -v '^MVM-TICK' /tmp/con | grep -i 'mvm:\|error\|call trace' | head -n 5
EOF2
s390_run "$S390_TMP/test"
out=$S390_TMP/out
grep -q '^MVM-BEFORE=MVM-TICK [0-9]* vda,\? -' "$out" || fail "before the hot-plug: $(grep '^MVM-BEFORE=' "$out")"
grep -q '^MVM-ADD=200 .*"bdf": *"0\.0\.0001"' "$out" || fail "vm.add-disk: $(grep '^MVM-ADD=' "$out")"
grep -q '^MVM-SEEN1=' "$out" || fail "the guest did not find the plugged disk (vdb with its image's bytes) within 90 s"
grep -q '^MVM-REMOVE=204' "$out" || fail "vm.remove-device: $(grep '^MVM-REMOVE=' "$out")"
grep -q '^MVM-GONE1=' "$out" || fail "vdb did not go from the guest within 90 s of vm.remove-device"
grep -q '^MVM-REMOVE-AGAIN=404$' "$out" || fail "a second vm.remove-device: $(grep '^MVM-REMOVE-AGAIN=' "$out")"
grep -q '^MVM-ADD2=200 ' "$out" || fail "the second vm.add-disk: $(grep '^MVM-ADD2=' "$out")"
grep -q '^MVM-SEEN2=' "$out" || fail "the guest did not find the second disk within 90 s"
grep -qE '^MVM-COUNTERS="read_ops": *[1-9]' "$out" || fail "vm.counters of the second disk: $(grep '^MVM-COUNTERS=' "$out")"
grep -q '^MVM-RC=0$' "$out" || fail "mvm did not end with 0 after vmm.shutdown: $(grep '^MVM-RC=' "$out")"
echo "s390x: a disk put into an empty subchannel slot through vm.add-disk reached the guest" \
	"($(sed -n 's/^MVM-SEEN1=//p' "$out" | tr -d '\r') ticks), went on vm.remove-device" \
	"($(sed -n 's/^MVM-GONE1=//p' "$out" | tr -d '\r') ticks), and a second one went in" \
	"($(sed -n 's/^MVM-SEEN2=//p' "$out" | tr -d '\r') ticks); sandbox on"
