#!/usr/bin/env bash
# --vsock with the guest's own AF_VSOCK sockets (guest/mvm-vsock.c), in one
# boot, sandboxed: what a CI job in a throwaway VM does with it.
#  - guest-initiated: the job sends its result file to CID 2 port 5000,
#    which mvm connects to the host's Unix socket PATH_5000; the host's
#    collector gets the bytes exactly (sha256 on both sides) and answers;
#  - host-initiated: a host program (hybrid vsock, as Kata's runtime or
#    firecracker-containerd speak it) connects to PATH, writes
#    "CONNECT 1024\n", reads "OK <port>\n" and talks to the guest's echo
#    server; until the guest listens it gets a close, and tries again;
#  - --stats counts both connections and the bytes each way; the socket
#    file stays after the sandboxed VM (its threads may make no path call),
#    stale: nobody answers on it, and the next start replaces it.
. "$(dirname "$0")/lib.sh"
sock=$SYS_TMP/v.sock

# The host's collector on PATH_5000, and the host client of the guest's
# echo on port 1024; each writes what it saw for the checks below.
py=/usr/bin/python3
"$py" - "$sock" "$SYS_TMP" <<'EOF' &
import hashlib, os, socket, sys, time
sock, tmp = sys.argv[1], sys.argv[2]
l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
l.bind(sock + "_5000")
l.listen(1)
open(tmp + "/ready", "w").close()
l.settimeout(100)
c, _ = l.accept()
c.settimeout(30)
data = b""
while True:
    b = c.recv(65536)
    if not b:
        break
    data += b
c.sendall(b"got %d\n" % len(data))
c.close()
open(tmp + "/collected.sha", "w").write(hashlib.sha256(data).hexdigest() + "\n")
# The guest's echo: CONNECT until it listens (a close means not yet).
payload = os.urandom(100000)
deadline = time.time() + 60
while time.time() < deadline:
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(20)
        s.connect(sock)
        s.sendall(b"CONNECT 1024\n")
        line = b""
        while not line.endswith(b"\n"):
            b = s.recv(1)
            if not b:
                raise ConnectionError("closed before OK")
            line += b
        break
    except (OSError, ConnectionError):
        s.close()
        time.sleep(0.3)
else:
    sys.exit("no OK from the guest's port 1024")
open(tmp + "/ok.line", "w").write(line.decode())
s.sendall(payload)
s.shutdown(socket.SHUT_WR)
back = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    back += b
open(tmp + "/echo.ok", "w").write("%d %s\n" % (len(back), back == payload))
EOF
helper=$!
# Python starts slowly in an emulated L1: the guest's connect must find it.
for _ in $(seq 600); do [ -e "$SYS_TMP/ready" ] && break; sleep 0.1; done
[ -e "$SYS_TMP/ready" ] || fail "the host's collector did not start"

job='head -c 300000 /dev/urandom >/tmp/result && sha256sum /tmp/result && mvm-vsock connect 2 5000 </tmp/result && mvm-vsock listen 1024 echo 1'
sys_run "$SYS_TMP/out" --cpus 2 --stats --vsock "cid=3,socket=$sock" --cmdline "-- $job"
wait "$helper"
hrc=$?
[ "$SYS_RC" -eq 0 ] || fail "mvm exited $SYS_RC, expected 0 (the guest's job ran through)"
[ "$hrc" -eq 0 ] || fail "the host side failed (status $hrc)"
guest_sha=$(grep -oE '^[0-9a-f]{64}  /tmp/result' "$SYS_TMP/out" | cut -d' ' -f1)
[ -n "$guest_sha" ] || fail "the guest printed no sha256 of its result"
[ "$guest_sha" = "$(cat "$SYS_TMP/collected.sha")" ] ||
	fail "the host collected other bytes than the guest sent ($(cat "$SYS_TMP/collected.sha") != $guest_sha)"
expect_line "$SYS_TMP/out" '^got 300000$'
grep -qE '^OK [0-9]+$' "$SYS_TMP/ok.line" || fail "the host client's answer was '$(cat "$SYS_TMP/ok.line")', not OK <port>"
[ "$(cat "$SYS_TMP/echo.ok")" = "100000 True" ] || fail "the guest's echo gave back '$(cat "$SYS_TMP/echo.ok")'"
stats=$(grep -o '{"vcpus".*' "$SYS_TMP/out" | tail -n 1)
"$py" - "$stats" <<'EOF' || fail "--stats: $stats"
import json, sys
d = [x for x in json.loads(sys.argv[1])["devices"] if x.get("device", {}).get("kind") == "virtio-vsock"]
assert len(d) == 1, "no virtio-vsock device in --stats"
v = d[0]["device"]
print("vsock stats:", {k: v[k] for k in ("connections_guest", "connections_host",
      "bytes_to_host", "bytes_to_guest", "resets_sent", "credit_stalls", "bad_packets")})
assert v["connections_guest"] == 1, v
assert v["connections_host"] >= 1, v
assert v["bytes_to_host"] == 300000 + 100000, v
assert v["bytes_to_guest"] == len("got 300000\n") + 100000, v
assert v["connections_open"] == 0, v
assert v["bad_packets"] == 0, v
EOF
"$py" - "$sock" <<'EOF' || fail "$sock: not a stale socket after the VM"
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except ConnectionRefusedError:
    sys.exit(0)
sys.exit(1)
EOF
echo "vsock: the result file and the echo went through; the socket left is stale"
