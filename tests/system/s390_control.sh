#!/usr/bin/env bash
# mvm-test: long
# Run-time control on s390x, inside Hercules' s390 KVM (tests/s390/run),
# through --api-socket (tests/s390/apicall sends the requests), with the
# sandbox on: a guest ticking with its uptime and its disk's size is
# paused (vm.pause: no tick for 3 s, its clock held: the TOD clock the
# pause keeps), resumed (the ticks go on, the uptime does not jump by the
# pause), and its virtio-ccw disk's image is swapped for a larger one from
# --image-dir inside the API thread's filter (vm.update-disk: the guest
# sees the new size through the ccw configuration-change interrupt); a
# path outside --image-dir is refused (400); vm.nmi and vm.coredump say
# s390x has neither yet (501, no file); vmm.shutdown ends mvm with 0.
set -u
cd "$(dirname "$0")/../.."
. tests/s390/lib.sh
cat >"$S390_TMP/test" <<'EOF2'
dd if=/dev/zero of=/tmp/disk.img bs=1M count=8 2>/dev/null
mkdir /tmp/images
dd if=/dev/zero of=/tmp/images/big.img bs=1M count=12 2>/dev/null
cat >/tmp/guest.sh <<'EOF3'
i=0
while [ $i -lt 900 ]; do
	echo "MVM-TICK $i $(cut -d' ' -f1 /proc/uptime) $(cat /sys/block/vda/size)"
	i=$((i + 1))
	sleep 0.2
done
EOF3
/mvm --uid 0 --gid 0 --kernel /guest/vmlinuz --initrd /guest/initrd.gz --mem 256M \
	--disk /tmp/disk.img --api-socket /tmp/api.sock --image-dir /tmp/images \
	--cmdline "-- echo $(base64 -w0 /tmp/guest.sh) | base64 -d | sh" >/tmp/con 2>&1 &
pid=$!
ticks() { grep -c '^MVM-TICK' /tmp/con; }
last() { grep '^MVM-TICK' /tmp/con | tail -n 1; }
for _ in $(seq 600); do grep -q '^MVM-TICK 5 ' /tmp/con && break; sleep 0.2; done
echo "MVM-STARTED=$(ticks)"
echo "MVM-PAUSE=$(/apicall /tmp/api.sock PUT vm.pause)"
echo "MVM-PAUSE-AGAIN=$(/apicall /tmp/api.sock PUT vm.pause | cut -d' ' -f1)"
# What the guest wrote before the pause may still be on its way out.
sleep 0.5
n1=$(ticks)
before=$(last)
sleep 3
n2=$(ticks)
echo "MVM-PAUSED-TICKS=$((n2 - n1))"
# x86's debugging aids: none on s390x yet, said, and no file left.
echo "MVM-NMI=$(/apicall /tmp/api.sock PUT vm.nmi)"
echo "MVM-COREDUMP=$(/apicall /tmp/api.sock PUT vm.coredump '{"destination_url":"file:///tmp/core"}')"
ls /tmp/core* 2>/dev/null | sed 's/^/MVM-CORE-FILE=/'
echo "MVM-RESUME=$(/apicall /tmp/api.sock PUT vm.resume)"
for _ in $(seq 100); do [ "$(ticks)" -gt $((n2 + 2)) ] && break; sleep 0.2; done
after=$(grep '^MVM-TICK' /tmp/con | sed -n "$((n2 + 1))p")
echo "MVM-AROUND=$before / $after"
echo "MVM-SWAP=$(/apicall /tmp/api.sock PUT vm.update-disk '{"id":"_disk0","path":"/tmp/images/big.img"}')"
# The console's lines end in CR LF.
for _ in $(seq 150); do grep -qE '^MVM-TICK [0-9]+ [0-9.]+ 24576([^0-9]|$)' /tmp/con && break; sleep 0.2; done
grep -qE '^MVM-TICK [0-9]+ [0-9.]+ 24576([^0-9]|$)' /tmp/con && echo "MVM-SWAP-SEEN=24576"
echo "MVM-OUTSIDE=$(/apicall /tmp/api.sock PUT vm.update-disk '{"id":"_disk0","path":"/tmp/disk.img"}' | cut -d' ' -f1)"
echo "MVM-SHUTDOWN=$(/apicall /tmp/api.sock PUT vmm.shutdown | cut -d' ' -f1)"
wait $pid
echo "MVM-RC=$?"
grep -v '^MVM-TICK' /tmp/con | grep -i 'mvm:\|error' | head -n 5
EOF2
s390_run "$S390_TMP/test"
out=$S390_TMP/out
grep -q '^MVM-PAUSE=204' "$out" || fail "vm.pause did not answer 204"
grep -q '^MVM-PAUSE-AGAIN=405' "$out" || fail "a second vm.pause was not refused with 405"
grep -q '^MVM-PAUSED-TICKS=0$' "$out" || fail "the guest ticked while paused"
grep -q '^MVM-NMI=501 .*s390x has no non-maskable interrupt' "$out" || fail "vm.nmi: $(grep '^MVM-NMI=' "$out")"
grep -q '^MVM-COREDUMP=501 .*no guest core dumps on s390x' "$out" ||
	fail "vm.coredump: $(grep '^MVM-COREDUMP=' "$out")"
! grep -q '^MVM-CORE-FILE=' "$out" || fail "vm.coredump left $(grep '^MVM-CORE-FILE=' "$out")"
grep -q '^MVM-RESUME=204' "$out" || fail "vm.resume did not answer 204"
around=$(sed -n 's/^MVM-AROUND=//p' "$out")
read -r _ _ t0 _ _ _ _ t1 _ <<<"$around"
[ -n "${t1:-}" ] || fail "no tick after the resume: $around"
gap=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
awk -v g="$gap" 'BEGIN { exit !(g < 2.5) }' ||
	fail "the guest's uptime jumped by $gap s across a 3 s pause: its clock ran on"
grep -q '^MVM-SWAP=204' "$out" || fail "vm.update-disk under the sandbox did not answer 204"
grep -q '^MVM-SWAP-SEEN=24576$' "$out" || fail "the guest did not see the swapped image's 12 MiB"
grep -q '^MVM-OUTSIDE=400$' "$out" || fail "a path outside --image-dir was not refused with 400"
grep -q '^MVM-SHUTDOWN=204$' "$out" || fail "vmm.shutdown did not answer 204"
grep -q '^MVM-RC=0$' "$out" || fail "mvm did not end with 0 after vmm.shutdown"
echo "s390x: paused 3 s (no tick; the guest's uptime moved $gap s across it), resumed," \
	"swapped the virtio-ccw disk's image from --image-dir inside the API thread's filter" \
	"(the guest saw 24576 sectors), a path elsewhere refused; vmm.shutdown ended mvm with 0"
