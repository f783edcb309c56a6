# Shared by the system tests (tests/system/*.sh). Sourcing this re-executes
# the calling test where KVM can run the test guest, through tests/with-kvm:
# directly when this host's /dev/kvm passes mvm's behavioural probe
# (./mvm --probe-kvm; MVM_KVM=direct|nested overrides it), otherwise inside
# the nested harness (QEMU TCG L1 with KVM). with-kvm says which path it
# took and why. Everything after the source line therefore runs on a host
# whose KVM runs Linux, with MVM_KVM_PATH=direct|nested saying which.
#
# MVM_SYS_PREPARE=1: only the host's part of the test runs (what comes
# before the source line, e.g. a build the read-only L1 cannot do), then
# this exits 0: tests/run does that before it runs several tests in one L1
# (tests/nested/batch).
set -u
SYS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$SYS_ROOT"
if [ -z "${MVM_KVM_PATH:-}" ] && [ -n "${MVM_SYS_PREPARE:-}" ]; then
	exit 0
fi
if [ -z "${MVM_KVM_PATH:-}" ]; then
	# Each system test takes well under a minute; bound the harness so a
	# stuck L1 (software-emulated, under load) costs minutes, not the
	# runner's limit. The harness's own failures (124: timed out, 125: L1
	# did not run the command, or wedged) are infrastructure, not mvm:
	# under the harness the test is retried once, saying so; a test that
	# fails twice fails. Run directly, 124/125 are mvm's or the test's own.
	export MVM_NESTED_TIMEOUT=${MVM_NESTED_TIMEOUT:-300}
	tests/with-kvm "$0" "$@"
	rc=$?
	# The same (cached) verdict with-kvm acted on.
	path=nested
	case $("${MVM_BIN:-$SYS_ROOT/mvm}" --probe-kvm 2>/dev/null) in direct:*) path=direct ;; esac
	if [ $path = nested ] && { [ $rc -eq 124 ] || [ $rc -eq 125 ]; }; then
		echo "system: the nested harness failed (status $rc); retrying the test once"
		tests/with-kvm "$0" "$@"
		rc=$?
	fi
	exit $rc
fi
if [ "$MVM_KVM_PATH" = nested ]; then
	echo "system: running with /dev/kvm inside the nested harness"
else
	echo "system: running with /dev/kvm directly"
fi

MVM=${MVM_BIN:-$SYS_ROOT/mvm}
# As root, --sandbox on refuses to run without --uid/--gid: the tests say
# "stay root (without capabilities)" explicitly; tests/system/sandbox.sh
# runs as an unprivileged user.
SYS_IDS=()
[ "$(id -u)" = 0 ] && SYS_IDS=(--uid 0 --gid 0)
SYS_TMP=$(mktemp -d "${MVM_SCRATCH:-${TMPDIR:-/tmp}}/mvm-sys.XXXXXX")
trap 'rm -rf "$SYS_TMP"' EXIT

# On failure, also any seccomp kill the kernel logged (mvm then exits 159,
# SIGSYS): audit type 1326 names the thread (comm=) and the call (syscall=).
fail() {
	echo "FAIL: $*"
	dmesg 2>/dev/null | grep 'type=1326' | tail -n 5
	exit 1
}

# sys_run OUTFILE ARGS...: run mvm with ARGS (stdin /dev/null), output to
# OUTFILE (also echoed, CRs stripped); sets SYS_RC to mvm's exit status.
# A guest kernel that stalls before reaching /init (seen about once in fifty
# nested boots, in early kernel init, with no device activity yet) is a
# hazard of the software-emulated L1, not of mvm: that one case is retried
# once, saying so. Any other timeout or failure counts.
sys_run() {
	local out=$1 start end attempt; shift
	for attempt in 1 2; do
		start=$(date +%s.%N)
		timeout -k 5 "${MVM_SYS_BOOT_TIMEOUT:-120}" "$MVM" "${SYS_IDS[@]}" "$@" </dev/null 2>&1 | tr -d '\r' >"$out"
		SYS_RC=${PIPESTATUS[0]}
		end=$(date +%s.%N)
		# awk ends the last line even when a killed guest left it open.
		awk '{ print "    guest| " $0 }' "$out" | tail -n "${SYS_SHOW_LINES:-40}"
		echo "mvm exited $SYS_RC after $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}') s: $MVM $*"
		ring_report "$out"
		if [ "$SYS_RC" -eq 124 ] && [ $attempt = 1 ] && ! grep -q 'Run /init as init process' "$out"; then
			echo "system: the guest kernel stalled before /init (nested emulation); retrying this boot once"
			continue
		fi
		break
	done
}

# ring_report OUTFILE: from mvm's --stats in OUTFILE, one line per
# virtqueue that stopped in a state that strands a guest's request: buffers
# the device never took (a lost notification), host I/O never completed,
# or (split ring) completions past the guest's used_event that it never
# consumed (a lost interrupt). Silent when every queue ended clean.
ring_report() {
	command -v python3 >/dev/null || return 0
	grep -o '{"vcpus".*' "$1" 2>/dev/null | tail -n 1 | python3 -c '
import json, os, sys
try:
    stats = json.loads(sys.stdin.read())
except ValueError:
    sys.exit(0)
for dev in stats.get("devices", []):
    for q, st in enumerate(dev.get("device", {}).get("queues", [])):
        r = st.get("ring")
        if not r:
            continue
        where = "ring: %s disk %s queue %d:" % (dev.get("transport"), os.path.basename(dev["device"].get("path", "?")), q)
        if r["avail_pending"]:
            print(where, r["avail_pending"], "buffer(s) made available and never taken (lost notification?)", r)
        if r["in_flight"]:
            print(where, r["in_flight"], "request(s) taken and never completed", r)
        behind = (r["used"] - r["driver_event"]) & 0xffff
        if r.get("layout") == "split" and 0 < behind <= 0x8000:
            print(where, behind, "completion(s) past the guest used_event, not consumed (lost interrupt?)", r)
'
}

# expect_line OUTFILE REGEX: OUTFILE has a line matching REGEX.
expect_line() {
	grep -qE -- "$2" "$1" || fail "no line matching '$2' in the guest output"
}

# make_image PATH SIZE_MIB [random]: a raw image, zero-filled or random.
make_image() {
	if [ "${3:-}" = random ]; then
		head -c "$(($2 * 1024 * 1024))" /dev/urandom >"$1"
	else
		truncate -s "$2M" "$1"
	fi
}

# guest_script SCRIPT: a --cmdline value that makes the test guest run the
# shell script SCRIPT. The script travels base64-encoded (the kernel
# command line has no quoting for arbitrary text); 2048 bytes in all.
guest_script() {
	printf -- '-- echo %s | base64 -d | sh' "$(printf '%s\n' "$1" | base64 -w0)"
}

# The guest-side checks of a virtio-blk run, as a script: blk-mq queues,
# negotiated packed ring (feature bit 34), fio randwrite+verify (crc32c,
# iodepth 32) on vda with one job pinned to each vCPU (so every hardware
# queue carries I/O) and the per-queue interrupt counts before and after,
# then a write to the read-only vdb that must fail even when the guest
# forces the disk rw.
BLK_GUEST_SCRIPT='
irqs() { awk -v d=$(basename $(readlink /sys/block/vda/device)) '\''$NF ~ "^" d "(-req.*)?$" { s = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i; printf "%s=%d ", $NF, s }'\'' /proc/interrupts; }
n=$(nproc)
echo MVM-MQ=$(ls /sys/block/vda/mq | wc -l)
echo MVM-PACKED=$(cut -c35 /sys/block/vda/device/features)
echo MVM-IRQS-BEFORE=$(irqs)
fio --name=verify --filename=/dev/vda --rw=randwrite --bs=4k --size=8M --offset_increment=8M --numjobs=$n --cpus_allowed=0-$((n - 1)) --cpus_allowed_policy=split --ioengine=io_uring --iodepth=32 --direct=1 --verify=crc32c --verify_fatal=1 --eta=never --output=/tmp/fio.log
rc=$?; echo MVM-FIO-RC=$rc; [ $rc = 0 ] || cat /tmp/fio.log
echo MVM-IRQS-AFTER=$(irqs)
echo MVM-VDB-RO=$(cat /sys/block/vdb/ro)
blockdev --setrw /dev/vdb
dd if=/dev/zero of=/dev/vdb bs=4096 count=1 oflag=direct conv=fsync 2>/dev/null
echo MVM-RO-WRITE-RC=$?
'

# blk_fio_check QUEUES PACKED(0|1) DISKOPTS [MVM-ARGS...]: two disks (rw and
# ro, each with ",DISKOPTS" appended), QUEUES queues each on as many vCPUs;
# $BLK_KERNEL_ARGS, when set, goes on the guest kernel command line;
# runs BLK_GUEST_SCRIPT and checks: QUEUES hardware queues, the ring layout
# negotiated, fio verify passed, every interrupt of vda (one per queue on
# pci with MSI-X, one line on mmio) counted under fio, the ro disk refused
# the write and its image is unchanged.
blk_fio_check() {
	local q=$1 packed=$2 opts=$3 before after; shift 3
	make_image "$SYS_TMP/rw.img" 64
	make_image "$SYS_TMP/ro.img" 8 random
	before=$(sha256sum <"$SYS_TMP/ro.img")
	sys_run "$SYS_TMP/out" --cpus "$q" --queues "$q" --disk "$SYS_TMP/rw.img$opts" \
		--disk "$SYS_TMP/ro.img,ro$opts" --stats "$@" \
		--cmdline "${BLK_KERNEL_ARGS:+$BLK_KERNEL_ARGS }$(guest_script "$BLK_GUEST_SCRIPT")"
	[ "$SYS_RC" -eq 0 ] || fail "mvm exited $SYS_RC, expected 0"
	expect_line "$SYS_TMP/out" "^MVM-MQ=$q\$"
	expect_line "$SYS_TMP/out" "^MVM-PACKED=$packed\$"
	expect_line "$SYS_TMP/out" '^MVM-FIO-RC=0$'
	local b a name
	b=$(sed -n 's/^MVM-IRQS-BEFORE=//p' "$SYS_TMP/out")
	a=$(sed -n 's/^MVM-IRQS-AFTER=//p' "$SYS_TMP/out")
	[ -n "$a" ] || fail "no interrupt counts from the guest"
	for name in $a; do
		local n=${name%%=*} cnt=${name#*=} was
		was=$(tr ' ' '\n' <<<"$b" | sed -n "s/^$n=//p")
		[ "${cnt:-0}" -gt "${was:-0}" ] || fail "interrupt $n did not count under fio ($was -> $cnt)"
	done
	echo "interrupts of vda: before [$b] after [$a]"
	# virtio-mmio: the guest read its registers from the page mapped
	# read-only, and still found and drove its disks (fio above).
	local mmio mapped
	mmio=$(grep -o '"transport":"virtio-mmio"' "$SYS_TMP/out" | wc -l)
	mapped=$(grep -o '"register_reads":"mapped"' "$SYS_TMP/out" | wc -l)
	[ "$mapped" -eq "$mmio" ] || fail "$mapped of $mmio virtio-mmio windows had their registers mapped"
	# fixed-buffers=on: the I/O threads registered guest RAM (on the vCPU
	# thread that set DRIVER_OK, inside its seccomp filter) and the
	# guest's one-segment reads and writes went through it.
	if [[ $opts == *fixed-buffers=on* ]]; then
		local fixed
		fixed=$(grep -o '"fixed":[0-9]*' "$SYS_TMP/out" | awk -F: '{ n += $2 } END { print n + 0 }')
		[ "$fixed" -gt 0 ] || fail "fixed-buffers=on, but no request used the registered guest RAM"
		grep -q 'fixed-buffers: io_uring cannot' "$SYS_TMP/out" &&
			fail "fixed-buffers=on could not register guest RAM"
		echo "$fixed requests on registered guest RAM"
	fi
	expect_line "$SYS_TMP/out" '^MVM-VDB-RO=1$'
	grep -qE '^MVM-RO-WRITE-RC=0$' "$SYS_TMP/out" && fail "a write to the ro disk succeeded in the guest"
	expect_line "$SYS_TMP/out" '^MVM-RO-WRITE-RC=[1-9]'
	after=$(sha256sum <"$SYS_TMP/ro.img")
	[ "$before" = "$after" ] || fail "the ro image changed"
	echo "fio verify passed with $q queue(s) (packed=$packed); ro disk refused writes and is unchanged"
}

# The API socket (mvm --api-socket "$sock"; the test sets sock), as curl
# drives it. api METHOD ENDPOINT [curl args...]: the HTTP status, the body
# in $SYS_TMP/body. expect STATUS METHOD ENDPOINT [curl args...]: that
# status, or the test fails with the guest's last lines ($SYS_TMP/out).
api() {
	local m=$1 e=$2; shift 2
	curl -s -m 60 --unix-socket "$sock" -X "$m" -o "$SYS_TMP/body" -w '%{http_code}' \
		"$@" "http://localhost/api/v1/$e"
}
expect() {
	local want=$1 got; shift
	got=$(api "$@")
	[ "$got" = "$want" ] || { grep -v '^tick' "$SYS_TMP/out" | tail -n 40
		fail "$1 $2: HTTP $got, expected $want: $(head -c 300 "$SYS_TMP/body" 2>/dev/null)"; }
	echo "[$SECONDS] $1 $2: $got $(head -c 160 "$SYS_TMP/body")"
}
# The same socket as a script drives it with mvm-remote. remote CMD [ARG]:
# its answer in $SYS_TMP/body, or the test fails with its error line.
# remote_fails TEXT CMD [ARG]: it exits 1 with one error line holding TEXT.
remote() {
	"$SYS_ROOT/mvm-remote" --api-socket "$sock" --timeout 60 "$@" >"$SYS_TMP/body" \
		2>"$SYS_TMP/remote.err" ||
		{ grep -v '^tick' "$SYS_TMP/out" | tail -n 40
		  fail "mvm-remote $*: exit $?: $(cat "$SYS_TMP/remote.err")"; }
	echo "mvm-remote $1: $(head -c 160 "$SYS_TMP/body")"
}
remote_fails() {
	local text=$1 rc; shift
	"$SYS_ROOT/mvm-remote" --api-socket "$sock" --timeout 60 "$@" >"$SYS_TMP/body" \
		2>"$SYS_TMP/remote.err"
	rc=$?
	[ $rc = 1 ] && [ "$(wc -l <"$SYS_TMP/remote.err")" = 1 ] &&
		grep -qF -- "$text" "$SYS_TMP/remote.err" ||
		fail "mvm-remote $*: exit $rc, expected 1 and one line with '$text': $(cat "$SYS_TMP/remote.err")"
	echo "mvm-remote $1 refused: $(cat "$SYS_TMP/remote.err")"
}
