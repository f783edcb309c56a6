#!/usr/bin/env bash
# --vsock on s390x (virtio-ccw, a big-endian guest reading the device's
# little-endian headers), inside Hercules' s390 KVM (tests/s390/run), with
# the sandbox on, as system/vsock does it on x86: the guest runs the
# command agent (mvm-vsock serve 1024), and the host's end of the hybrid
# vsock (tests/s390/hvsock: "CONNECT 1024\n", "OK <port>\n") runs
# commands in the guest and gets their output and status back:
#  1. a job that makes a 300,000-byte file and prints its sha256;
#  2. one that sends the file to CID 2 port 5000: mvm connects that to
#     the host's collector on PATH_5000 (guest-initiated), which gets the
#     same bytes and answers "got 300000";
#  3. one that prints the file: the same bytes come back through the
#     agent's connection;
#  4. one that writes to stderr and fails with status 7.
# The agent then ends the guest (status 0); --stats counts the
# connections and bytes, none open, no bad packet.
set -u
cd "$(dirname "$0")/../.."
. tests/s390/lib.sh
cat >"$S390_TMP/test" <<'EOF2'
/hvsock collect /tmp/v.sock_5000 >/tmp/collected 2>/tmp/collect.err &
cpid=$!
/mvm --uid 0 --gid 0 --kernel /guest/vmlinuz --initrd /guest/initrd.gz --mem 256M --stats \
	--vsock cid=3,socket=/tmp/v.sock --cmdline '-- mvm-vsock serve 1024 4' >/tmp/con 2>/tmp/stats &
pid=$!
run() { printf '%s' "$1" | /hvsock connect /tmp/v.sock 1024; }
run 'head -c 300000 /dev/urandom >/tmp/r && sha256sum </tmp/r' >/tmp/o1
echo "MVM-JOB=$(tr '\n' ' ' </tmp/o1)"
run 'mvm-vsock connect 2 5000 </tmp/r' >/tmp/o2
echo "MVM-SENT=$(tr '\n' ' ' </tmp/o2)"
wait $cpid
echo "MVM-COLLECTED=$(sha256sum </tmp/collected | cut -d' ' -f1) $(wc -c </tmp/collected)"
run 'cat /tmp/r' >/tmp/o3
echo "MVM-BACK=$(head -c 300000 /tmp/o3 | sha256sum | cut -d' ' -f1) $(wc -c </tmp/o3) $(tail -c +300001 /tmp/o3)"
run 'echo to-stderr >&2; exit 7' >/tmp/o4
echo "MVM-FAIL=$(tr '\n' ' ' </tmp/o4)"
wait $pid
echo "MVM-RC=$?"
for f in connections_guest connections_host connections_open bytes_to_host bytes_to_guest bad_packets; do
	echo "MVM-STAT-$f=$(grep -o "\"$f\":[0-9]*" /tmp/stats | cut -d: -f2)"
done
cat /tmp/collect.err
grep -v '^{' /tmp/stats | head -n 5
grep -i 'mvm:\|error\|call trace' /tmp/con | head -n 5
EOF2
s390_run "$S390_TMP/test"
out=$S390_TMP/out
val() { sed -n "s/^MVM-$1=//p" "$out" | tr -d '\r' | sed 's/ *$//'; }
read -r sha _ <<<"$(val JOB) x"
[ ${#sha} -eq 64 ] && [ "$(val JOB)" = "$sha  - mvm-vsock-status: 0" ] ||
	fail "the first job's output: '$(val JOB)'"
[ "$(val SENT)" = "got 300000 mvm-vsock-status: 0" ] ||
	fail "the guest's connection to the host's collector: '$(val SENT)'"
[ "$(val COLLECTED)" = "$sha 300000" ] ||
	fail "the collector got other bytes: '$(val COLLECTED)', the guest's file has sha256 $sha"
[ "$(val BACK)" = "$sha 300020 mvm-vsock-status: 0" ] ||
	fail "the file back through the agent: '$(val BACK)'"
[ "$(val FAIL)" = "to-stderr mvm-vsock-status: 7" ] || fail "status and stderr: '$(val FAIL)'"
[ "$(val RC)" = 0 ] || fail "mvm exited $(val RC), expected 0 (the agent served 4 commands)"
[ "$(val STAT-connections_guest)" = 1 ] || fail "--stats: connections_guest $(val STAT-connections_guest), expected 1"
[ "$(val STAT-connections_host)" -ge 4 ] 2>/dev/null ||
	fail "--stats: connections_host $(val STAT-connections_host), expected at least 4"
[ "$(val STAT-connections_open)" = 0 ] || fail "--stats: connections_open $(val STAT-connections_open), expected 0"
[ "$(val STAT-bad_packets)" = 0 ] || fail "--stats: bad_packets $(val STAT-bad_packets), expected 0"
[ "$(val STAT-bytes_to_host)" -ge 600000 ] 2>/dev/null ||
	fail "--stats: bytes_to_host $(val STAT-bytes_to_host), expected at least 600000"
echo "s390x vsock: four commands ran in the guest over virtio-ccw vsock under the sandbox;" \
	"a 300,000-byte file went to a host listener and back intact;" \
	"$(val STAT-bytes_to_host) bytes to the host, $(val STAT-bytes_to_guest) to the guest"
