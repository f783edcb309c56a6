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
# path outside --image-dir is refused (400); vm.nmi says s390x has none
# (501); vm.coredump writes the paused guest beneath --snapshot-dir only,
# an s390x ELF core with the CPU's PSW, prefix and control registers and
# the guest's RAM; vm.power-button (the SCLP's Signal Quiesce) has the
# guest shut down, which ends mvm with 0.
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
	--disk /tmp/disk.img --api-socket /tmp/api.sock --image-dir /tmp/images --snapshot-dir /tmp/dumps \
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
# No NMI on s390x. A core dump beneath --snapshot-dir only: its headers
# and notes go to the host side as hex, and the kernel's log in its RAM
# (the banner) is counted here.
echo "MVM-NMI=$(/apicall /tmp/api.sock PUT vm.nmi)"
echo "MVM-COREDUMP-OUTSIDE=$(/apicall /tmp/api.sock PUT vm.coredump '{"destination_url":"file:///tmp/core"}' | cut -d' ' -f1)"
ls /tmp/core* 2>/dev/null | sed 's/^/MVM-CORE-FILE=/'
echo "MVM-COREDUMP=$(/apicall /tmp/api.sock PUT vm.coredump '{"destination_url":"file:///tmp/dumps/core"}')"
od -A n -t x1 -v -N 2048 /tmp/dumps/core | tr -d ' ' | sed 's/^/MVM-CORE-HEX=/'
echo "MVM-CORE-BANNER=$(dd if=/tmp/dumps/core bs=1M count=64 2>/dev/null | grep -c -a 'Linux version')"
echo "MVM-CORE-SIZE=$(stat -c '%s %b %B' /tmp/dumps/core)"
echo "MVM-RESUME=$(/apicall /tmp/api.sock PUT vm.resume)"
for _ in $(seq 100); do [ "$(ticks)" -gt $((n2 + 2)) ] && break; sleep 0.2; done
after=$(grep '^MVM-TICK' /tmp/con | sed -n "$((n2 + 1))p")
echo "MVM-AROUND=$before / $after"
echo "MVM-SWAP=$(/apicall /tmp/api.sock PUT vm.update-disk '{"id":"_disk0","path":"/tmp/images/big.img"}')"
# The console's lines end in CR LF.
for _ in $(seq 150); do grep -qE '^MVM-TICK [0-9]+ [0-9.]+ 24576([^0-9]|$)' /tmp/con && break; sleep 0.2; done
grep -qE '^MVM-TICK [0-9]+ [0-9.]+ 24576([^0-9]|$)' /tmp/con && echo "MVM-SWAP-SEEN=24576"
echo "MVM-OUTSIDE=$(/apicall /tmp/api.sock PUT vm.update-disk '{"id":"_disk0","path":"/tmp/disk.img"}' | cut -d' ' -f1)"
# The power button: the SCLP's Signal Quiesce; the guest quiesces, which
# ends the VM as a poweroff (status 0), with no vmm.shutdown.
echo "MVM-BUTTON=$(/apicall /tmp/api.sock PUT vm.power-button | cut -d' ' -f1)"
for _ in $(seq 300); do kill -0 $pid 2>/dev/null || break; sleep 0.2; done
kill -0 $pid 2>/dev/null && echo "MVM-STILL-RUNNING" && /apicall /tmp/api.sock PUT vmm.shutdown
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
grep -q '^MVM-COREDUMP-OUTSIDE=400$' "$out" && ! grep -q '^MVM-CORE-FILE=' "$out" ||
	fail "vm.coredump outside --snapshot-dir: $(grep '^MVM-CORE' "$out")"
grep -q '^MVM-COREDUMP=204' "$out" || fail "vm.coredump: $(grep '^MVM-COREDUMP=' "$out")"
# The core as crash and gdb read an s390x one: big-endian ELF, EM_S390,
# one PT_NOTE and one PT_LOAD of the 256 MiB at physical 0; the CPU's
# NT_PRSTATUS with its PSW in the kernel, its prefix and control
# registers; and the kernel's log in RAM.
core=$(python3 - "$(sed -n 's/^MVM-CORE-HEX=//p' "$out" | tr -d '\r\n')" <<'EOF2'
import struct, sys
d = bytes.fromhex(sys.argv[1])
if d[:6] != b"\x7fELF\x02\x02" or struct.unpack_from(">HH", d, 16) != (4, 22):
    sys.exit("not a big-endian s390x ELF core: %s" % d[:20].hex())
phnum, = struct.unpack_from(">H", d, 56)
ph = [struct.unpack_from(">IIQQQQQQ", d, 64 + 56 * i) for i in range(phnum)]
if [p[0] for p in ph] != [4, 1] or ph[1][4] != 0 or ph[1][6] != 256 << 20:
    sys.exit("program headers: %s" % ph)
at, end, notes = ph[0][2], ph[0][2] + ph[0][5], {}
while at < end:
    nsz, dsz, t = struct.unpack_from(">III", d, at)
    name = d[at + 12:at + 11 + nsz].decode()
    desc = at + 12 + ((nsz + 3) & ~3)
    notes[(name, t)] = d[desc:desc + dsz]
    at = desc + ((dsz + 3) & ~3)
pr = notes.get(("CORE", 1))
if not pr or len(pr) != 336:
    sys.exit("no NT_PRSTATUS: %s" % sorted(notes))
mask, addr = struct.unpack_from(">QQ", pr, 112)
prefix, = struct.unpack(">I", notes[("LINUX", 0x305)])
cr0, = struct.unpack_from(">Q", notes[("LINUX", 0x304)])
if not mask & (1 << 58) or not addr or not prefix:   # DAT on, an address, a prefix
    sys.exit("PSW %016x %016x, prefix %x" % (mask, addr, prefix))
print("PSW %016x %016x, prefix %#x, CR0 %#x, %d notes" % (mask, addr, prefix, cr0, len(notes)))
EOF2
) || fail "vm.coredump's file: $core"
banner=$(sed -n 's/^MVM-CORE-BANNER=//p' "$out" | tr -d '\r')
[ "${banner:-0}" -ge 1 ] || fail "no 'Linux version' in the core's first 64 MiB"
read -r size blocks bsize <<<"$(sed -n 's/^MVM-CORE-SIZE=//p' "$out" | tr -d '\r')"
[ $((blocks * bsize)) -lt "$size" ] || fail "the core's zero pages were written: $blocks blocks for $size bytes"
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
grep -q '^MVM-BUTTON=204$' "$out" || fail "vm.power-button did not answer 204"
! grep -q '^MVM-STILL-RUNNING' "$out" || fail "the guest did not shut down within 60 s of vm.power-button"
grep -q '^MVM-RC=0$' "$out" || fail "mvm did not end with 0 after vm.power-button"
echo "s390x: paused 3 s (no tick; the guest's uptime moved $gap s across it), resumed," \
	"swapped the virtio-ccw disk's image from --image-dir inside the API thread's filter" \
	"(core dump: $core)" \
	"(the guest saw 24576 sectors), a path elsewhere refused; vm.power-button had the guest shut down: mvm ended with 0"
