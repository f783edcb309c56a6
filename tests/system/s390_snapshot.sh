#!/usr/bin/env bash
# mvm-test: long
# Snapshot and restore on s390x, inside Hercules' s390 KVM (tests/s390/run),
# with the sandbox on: a guest ticking with its uptime and boot id, reading
# its virtio-ccw disk and a second disk hot-plugged into a subchannel slot
# (vm.add-disk), with a vsock agent on virtio-ccw, two vCPUs (the second
# started by the guest's SIGP), is paused and
# snapshotted through the API (vm.snapshot, beneath --snapshot-dir: the
# API thread writes it inside its filter), then resumed and shut down.
# mvm --restore brings it back in a new process, twice at once (one a
# clone with disks, CID and socket of its own): each goes on counting from
# the tick after the snapshot's, with the same boot id, no boot (no
# kernel banner), its clock going on from the snapshot's uptime, both
# disks answering with its own data (the hot-plugged one in its slot,
# which the channel subsystem's state says holds it), and its agent
# answering on its own socket. A state file cut short is refused with one
# line and status 2.
set -u
cd "$(dirname "$0")/../.."
. tests/s390/lib.sh
cat >"$S390_TMP/test" <<'EOF2'
dd if=/dev/zero bs=1M count=8 2>/dev/null | tr '\000' A >/tmp/disk.img
mkdir /tmp/images /tmp/snaps
dd if=/dev/zero of=/tmp/images/hp1.img bs=1M count=4 2>/dev/null
printf 'MVM-HOTPLUG-DISK1' | dd of=/tmp/images/hp1.img conv=notrunc 2>/dev/null
cat >/tmp/guest.sh <<'EOF3'
(while :; do mvm-vsock serve 1024 1 >/dev/null 2>&1; done) &
taskset 2 sh -c 'while :; do :; done' &
b=$(cat /proc/sys/kernel/random/boot_id)
i=0
while [ $i -lt 3000 ]; do
	a=$(dd if=/dev/vda bs=4k count=1 skip=$((i % 2048)) 2>/dev/null | head -c 8)
	d=-
	[ -b /dev/vdb ] && d=$(dd if=/dev/vdb bs=17 count=1 2>/dev/null)
	echo "MVM-TICK $i $(cut -d' ' -f1 /proc/uptime) $b ${a:--} $d $(cat /sys/devices/system/cpu/online) $(awk '$1 == "cpu1" { print $2 }' /proc/stat)"
	i=$((i + 1))
	sleep 0.2
done
EOF3
/mvm --uid 0 --gid 0 --cpus 2 --kernel /guest/vmlinuz --initrd /guest/initrd.gz --mem 256M \
	--disk /tmp/disk.img --hotplug-slots 1 --api-socket /tmp/api.sock --image-dir /tmp/images \
	--vsock cid=3,socket=/tmp/v.sock \
	--snapshot-dir /tmp/snaps --cmdline "-- echo $(base64 -w0 /tmp/guest.sh) | base64 -d | sh" \
	>/tmp/con 2>&1 &
pid=$!
ticks() { grep -c '^MVM-TICK' "$1"; }
# wait_tick FILE REGEX: up to 120 s for a tick line in FILE matching REGEX.
wait_tick() {
	for _ in $(seq 600); do
		grep '^MVM-TICK' "$1" | grep -qE "$2" && return 0
		sleep 0.2
	done
	return 1
}
wait_tick /tmp/con '^MVM-TICK 5 '
echo "MVM-ADD=$(/apicall /tmp/api.sock PUT vm.add-disk '{"path":"/tmp/images/hp1.img","id":"hp1"}' | cut -d' ' -f1)"
wait_tick /tmp/con ' MVM-HOTPLUG-DISK1' && echo "MVM-SEEN=1"
echo "MVM-VSOCK0=$(printf 'echo before' | /hvsock connect /tmp/v.sock 1024 | tr '\n' ' ')"
echo "MVM-PAUSE=$(/apicall /tmp/api.sock PUT vm.pause | cut -d' ' -f1)"
echo "MVM-SNAP-OUTSIDE=$(/apicall /tmp/api.sock PUT vm.snapshot '{"destination_url":"file:///tmp/elsewhere"}' | cut -d' ' -f1)"
t0=$(cut -d' ' -f1 /proc/uptime)
echo "MVM-SNAP=$(/apicall /tmp/api.sock PUT vm.snapshot '{"destination_url":"file:///tmp/snaps/s1"}')"
t1=$(cut -d' ' -f1 /proc/uptime)
echo "MVM-SNAP-MS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b - a) * 1000 }')"
ls -l /tmp/snaps/s1 | sed 's/^/MVM-FILES=/'
# The last whole tick before the pause (one cut short comes out later).
sleep 0.5
last=$(tr -d '\r' </tmp/con | grep -E '^MVM-TICK [0-9]+ [0-9.]+ [0-9a-f-]+ A+ ' | tail -n 1)
echo "MVM-LAST=$last"
echo "MVM-RESUME=$(/apicall /tmp/api.sock PUT vm.resume | cut -d' ' -f1)"
n=$(echo "$last" | cut -d' ' -f2)
wait_tick /tmp/con "^MVM-TICK $((n + 3)) " && echo "MVM-RESUMED=1"
echo "MVM-SHUTDOWN=$(/apicall /tmp/api.sock PUT vmm.shutdown | cut -d' ' -f1)"
wait $pid
echo "MVM-RC=$?"

# Two restores at once, each a new process, sandboxed: one with the
# snapshot's own disks, a clone with disks of its own (given in the
# snapshot's order: vda, then the hot-plugged disk, which goes back into
# its slot), its vda holding C where the snapshot's holds A.
dd if=/dev/zero bs=1M count=8 2>/dev/null | tr '\000' C >/tmp/c.img
cp /tmp/images/hp1.img /tmp/c-hp1.img
/mvm --uid 0 --gid 0 --restore /tmp/snaps/s1 >/tmp/r1 2>&1 &
rp1=$!
/mvm --uid 0 --gid 0 --restore /tmp/snaps/s1 --disk /tmp/c.img --disk /tmp/c-hp1.img \
	--vsock cid=4,socket=/tmp/v2.sock >/tmp/r2 2>&1 &
rp2=$!
for r in 1 2; do
	f=/tmp/r$r
	wait_tick $f "^MVM-TICK $((n + 10)) " && echo "MVM-RESTORED$r=1"
	grep '^MVM-TICK' $f | head -n 1 | sed "s/^/MVM-FIRST$r=/"
	grep '^MVM-TICK' $f | tail -n 1 | sed "s/^/MVM-LATEST$r=/"
	echo "MVM-R$r-BANNER=$(grep -c 'Linux version' $f)"
	echo "MVM-R$r-UPTIMES=$(grep '^MVM-TICK' $f | cut -d' ' -f3 | tr '\n' ' ')"
	# Past the first tick, which may have read before the snapshot.
	echo "MVM-R$r-READS=$(tr -d '\r' <$f | grep '^MVM-TICK' | tail -n +2 | cut -d' ' -f5,6 | sort | uniq -c | tr '\n' ';')"
done
echo "MVM-VSOCK1=$(printf 'echo after1' | /hvsock connect /tmp/v.sock 1024 | tr '\n' ' ')"
echo "MVM-VSOCK2=$(printf 'echo after2' | /hvsock connect /tmp/v2.sock 1024 | tr '\n' ' ')"
kill $rp1 $rp2
wait $rp1; echo "MVM-R1-RC=$?"
wait $rp2; echo "MVM-R2-RC=$?"
grep -v '^MVM-TICK' /tmp/r1 /tmp/r2 | grep -i 'mvm:\|error\|call trace' | grep -v COW | head -n 5 | sed 's/^/MVM-R-SAID=/'

# A state file cut short: one line, status 2, no VM.
mkdir /tmp/bad
ln -s /tmp/snaps/s1/memory /tmp/bad/memory
head -c 2000 /tmp/snaps/s1/state >/tmp/bad/state
/mvm --uid 0 --gid 0 --restore /tmp/bad >/tmp/bad.out 2>&1
echo "MVM-BAD-RC=$? lines $(wc -l </tmp/bad.out)"
head -n 2 /tmp/bad.out | sed 's/^/MVM-BAD-SAID=/'
grep -v '^MVM-TICK' /tmp/con | grep -i 'mvm:\|error\|call trace' | head -n 5
EOF2
s390_run "$S390_TMP/test"
out=$S390_TMP/out
val() { sed -n "s/^$1=//p" "$out" | tr -d '\r' | sed 's/ *$//' | head -n 1; }
[ "$(val MVM-ADD)" = 200 ] || fail "vm.add-disk: $(val MVM-ADD)"
[ "$(val MVM-SEEN)" = 1 ] || fail "the guest did not find the hot-plugged disk"
[ "$(val MVM-PAUSE)" = 204 ] || fail "vm.pause: $(val MVM-PAUSE)"
[ "$(val MVM-SNAP-OUTSIDE)" = 400 ] || fail "vm.snapshot outside --snapshot-dir: $(val MVM-SNAP-OUTSIDE)"
[ "$(val MVM-SNAP | cut -d' ' -f1)" = 204 ] || fail "vm.snapshot: $(val MVM-SNAP)"
[ "$(val MVM-VSOCK0)" = "before mvm-vsock-status: 0" ] || fail "vsock before the snapshot: '$(val MVM-VSOCK0)'"
[ "$(val MVM-RESUMED)" = 1 ] || fail "the guest did not go on after its snapshot"
[ "$(val MVM-RC)" = 0 ] || fail "mvm did not end with 0 after vmm.shutdown: $(val MVM-RC)"
last=$(val MVM-LAST)
n=$(echo "$last" | cut -d' ' -f2)
up=$(echo "$last" | cut -d' ' -f3)
boot=$(echo "$last" | cut -d' ' -f4)
[ -n "$n" ] && [ -n "$boot" ] || fail "no tick before the snapshot: '$last'"
for r in 1 2; do
	[ "$(val MVM-RESTORED$r)" = 1 ] ||
		fail "restore $r: the guest did not count to $((n + 10)): latest '$(val MVM-LATEST$r)'"
	first=$(val MVM-FIRST$r)
	# The tick after the snapshot's last whole one.
	[ "$(echo "$first" | cut -d' ' -f2)" = $((n + 1)) ] ||
		fail "restore $r: the first tick after the restore is '$first', expected $((n + 1))"
	[ "$(echo "$first" | cut -d' ' -f4)" = "$boot" ] ||
		fail "restore $r: another boot id: '$first' (was $boot)"
	[ "$(echo "$first" | cut -d' ' -f7)" = 0-1 ] ||
		fail "restore $r: the guest's CPUs online are not both of its two: '$first'"
	# Its second vCPU runs: a busy loop pinned there gains user time.
	[ "$(val MVM-LATEST$r | cut -d' ' -f8)" -gt "$(echo "$first" | cut -d' ' -f8)" ] ||
		fail "restore $r: the guest's second vCPU did not run: '$first', then '$(val MVM-LATEST$r)'"
	[ "$(val MVM-R$r-BANNER)" = 0 ] || fail "restore $r: the guest booted again"
	for u in $(val MVM-R$r-UPTIMES); do
		awk -v u="$u" -v up="$up" 'BEGIN { exit !(u >= up && u <= up + 60) }' ||
			fail "restore $r: the guest's uptime jumped: $u after $up"
	done
	reads=$(val MVM-R$r-READS)
	want=$([ $r = 1 ] && echo AAAAAAAA || echo CCCCCCCC)
	echo "$reads" | tr ';' '\n' | grep -vE "^ *\$|^ *[0-9]+ $want MVM-HOTPLUG-DISK1\$" | grep -q . &&
		fail "restore $r: the guest's disks did not answer with its own data ($want): $reads"
	val MVM-R$r-RC | grep -qE '^(0|143)$' || fail "restore $r: mvm ended with $(val MVM-R$r-RC) on SIGTERM"
done
for r in 1 2; do
	[ "$(val MVM-VSOCK$r)" = "after$r mvm-vsock-status: 0" ] ||
		fail "restore $r: the guest's vsock agent after the restore: '$(val MVM-VSOCK$r)'"
done
[ "$(val MVM-BAD-RC | cut -d' ' -f1)" = 2 ] || fail "a state file cut short: status $(val MVM-BAD-RC)"
[ "$(val MVM-BAD-RC | cut -d' ' -f3)" = 1 ] || fail "a state file cut short said more than one line: $(grep '^MVM-BAD-SAID' "$out")"
echo "s390x: snapshot after '$last' in $(val MVM-SNAP-MS) ms (sandboxed API thread); two" \
	"restores at once (one a clone with its own disks and vsock) each went on with" \
	"'$(val MVM-FIRST1)' (same boot, no banner, uptime from $up), both disks and the vsock" \
	"agent answering; a damaged state refused: $(val MVM-BAD-SAID)"
