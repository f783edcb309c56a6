#!/usr/bin/env bash
# --vsock as a CI runner or a serverless host uses it, in one sandboxed
# boot, with no console scraping: the guest runs the test guest's command
# agent (mvm-vsock serve), and a host program in hybrid vsock's framing
# (as Kata's runtime or firecracker-containerd speak it: connect to PATH,
# "CONNECT 1024\n", "OK <port>\n", retrying until the guest listens) runs
# commands in the guest and gets their output and status back:
#  1. a job that makes a 300,000-byte result file and prints its sha256;
#  2. one that sends the file to CID 2 port 5000: mvm connects that to the
#     host's collector on PATH_5000 (guest-initiated), which gets the same
#     sha256 and answers;
#  3. one that prints the file (guest to host through the agent's
#     connection): the same bytes again;
#  4. one that writes to stderr and fails with status 7.
# --stats counts the connections and bytes; the socket file stays after
# the sandboxed VM (its threads may make no path call), stale: nobody
# answers on it, and the next start replaces it.
. "$(dirname "$0")/lib.sh"
sock=$SYS_TMP/v.sock
py=/usr/bin/python3

"$py" - "$sock" "$SYS_TMP" <<'EOF' &
import hashlib, json, socket, sys, threading, time
sock, tmp = sys.argv[1], sys.argv[2]
collected = {}

def collector(l):
    c, _ = l.accept()
    c.settimeout(60)
    data = b""
    while True:
        b = c.recv(65536)
        if not b:
            break
        data += b
    collected["sha"] = hashlib.sha256(data).hexdigest()
    c.sendall(b"got %d\n" % len(data))
    c.close()

l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
l.bind(sock + "_5000")
l.listen(1)
l.settimeout(200)
threading.Thread(target=collector, args=(l,), daemon=True).start()
open(tmp + "/ready", "w").close()

def agent(cmd):
    """cmd run by the guest's agent on port 1024: (output, status)."""
    deadline = time.time() + 120
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(60)
        try:
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
            if time.time() > deadline:
                sys.exit("the guest's agent never answered on port 1024")
            time.sleep(0.3)
    assert line.startswith(b"OK ") and line[3:-1].isdigit(), line
    s.sendall(cmd.encode())
    s.shutdown(socket.SHUT_WR)
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
    s.close()
    body, sep, last = out.rpartition(b"mvm-vsock-status: ")
    assert sep, out[-200:]
    return body, int(last)

r = {}
out, r["st1"] = agent("head -c 300000 /dev/urandom >/tmp/r && sha256sum </tmp/r")
r["sha"] = out.split()[0].decode() if out else ""
out, r["st2"] = agent("mvm-vsock connect 2 5000 </tmp/r")
r["got"] = out.decode(errors="replace")
out, r["st3"] = agent("cat /tmp/r")
r["len3"], r["sha3"] = len(out), hashlib.sha256(out).hexdigest()
out, r["st4"] = agent("echo to-stderr >&2; exit 7")
r["out4"] = out.decode(errors="replace")
r["collected"] = collected.get("sha", "")
json.dump(r, open(tmp + "/result.json", "w"))
EOF
helper=$!
# Python starts slowly in an emulated L1: the guest's connect must find it.
for _ in $(seq 600); do [ -e "$SYS_TMP/ready" ] && break; sleep 0.1; done
[ -e "$SYS_TMP/ready" ] || fail "the host program did not start"

sys_run "$SYS_TMP/out" --cpus 2 --stats --vsock "cid=3,socket=$sock" --cmdline '-- mvm-vsock serve 1024 4'
wait "$helper"
hrc=$?
[ "$SYS_RC" -eq 0 ] || fail "mvm exited $SYS_RC, expected 0 (the agent served 4 commands)"
[ "$hrc" -eq 0 ] || fail "the host program failed (status $hrc)"
"$py" - "$SYS_TMP/result.json" <<'EOF' || fail "the commands' results: $(cat "$SYS_TMP/result.json")"
import json, sys
r = json.load(open(sys.argv[1]))
print("vsock agent:", r)
assert r["st1"] == 0 and len(r["sha"]) == 64, "the job"
assert r["st2"] == 0 and r["got"] == "got 300000\n", "the file to the collector"
assert r["collected"] == r["sha"], "the collector got other bytes"
assert r["st3"] == 0 and r["len3"] == 300000 and r["sha3"] == r["sha"], "the file back"
assert r["st4"] == 7 and r["out4"] == "to-stderr\n", "status and stderr"
EOF
stats=$(grep -o '{"vcpus".*' "$SYS_TMP/out" | tail -n 1)
"$py" - "$stats" <<'EOF' || fail "--stats: $stats"
import json, sys
d = [x for x in json.loads(sys.argv[1])["devices"] if x.get("device", {}).get("kind") == "virtio-vsock"]
assert len(d) == 1, "no virtio-vsock device in --stats"
v = d[0]["device"]
print("vsock stats:", {k: v[k] for k in ("connections_guest", "connections_host",
      "bytes_to_host", "bytes_to_guest", "resets_sent", "credit_stalls", "bad_packets")})
assert v["connections_guest"] == 1, v
assert v["connections_host"] >= 4, v
assert v["bytes_to_host"] >= 600000, v
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
echo "vsock: four commands ran in the guest over vsock; the file went both ways intact"
