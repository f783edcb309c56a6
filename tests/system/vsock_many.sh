#!/usr/bin/env bash
# Many vsock connections at once, checked byte for byte, over virtio-mmio
# (system/vsock runs the device over PCI): the guest opens
# CONNS (100) connections together to CID 2 port 7000, which mvm connects
# to the host's echo on PATH_7000 (socat's PIPE, a stock program: blocks
# of 4 KiB, for socat writes a block whole into its one pipe and, with a
# larger one, can block on its own full pipe; and it waits up to 600 s, not
# its default half a second, for the echo's last bytes to go out after the
# guest's end of writing); each sends its
# own pattern while it reads the echo back and compares it (mvm-vsock
# check). MIB each way per connection: 1 in the nested harness (its
# emulated L1 moves some tens of MiB/s), 64 where /dev/kvm runs the guest
# directly (issue 32's figure: 6.4 GiB each way); MVM_VSOCK_MANY_MIB overrides.
# The device's thread polls (poll=50: system/vsock runs it without), so
# its poll's ends at host completions carry this load too.
# --stats: every connection counted, every byte both ways, none left open,
# no bad packet, no connection refused for the cap, polls that found work.
. "$(dirname "$0")/lib.sh"
conns=${MVM_VSOCK_MANY_CONNS:-100}
mib=${MVM_VSOCK_MANY_MIB:-$([ "$MVM_KVM_PATH" = direct ] && echo 64 || echo 1)}
sock=$SYS_TMP/v.sock
command -v socat >/dev/null || fail "socat is not installed (scripts/install-deps.sh)"
socat -b 4096 -t 600 "UNIX-LISTEN:${sock}_7000,fork,backlog=128" PIPE &
echo_pid=$!
trap 'kill $echo_pid 2>/dev/null; rm -rf "$SYS_TMP"' EXIT
for _ in $(seq 100); do [ -S "${sock}_7000" ] && break; sleep 0.1; done
[ -S "${sock}_7000" ] || fail "socat did not listen on ${sock}_7000"

MVM_SYS_BOOT_TIMEOUT=${MVM_SYS_BOOT_TIMEOUT:-240} \
	sys_run "$SYS_TMP/out" --cpus 2 --mem 512M --stats --vsock "cid=3,socket=$sock,transport=mmio,poll=50" \
	--cmdline "-- mvm-vsock check 2 7000 $conns $mib"
[ "$SYS_RC" -eq 0 ] || fail "mvm exited $SYS_RC, expected 0 (every connection's echo intact)"
expect_line "$SYS_TMP/out" "^check $conns $mib ok\$"
stats=$(grep -o '{"vcpus".*' "$SYS_TMP/out" | tail -n 1)
python3 - "$stats" "$conns" "$mib" <<'PY' || fail "--stats: $stats"
import json, sys
conns, each = int(sys.argv[2]), int(sys.argv[3]) << 20
d = [x["device"] for x in json.loads(sys.argv[1])["devices"]
     if x.get("device", {}).get("kind") == "virtio-vsock"]
assert len(d) == 1, "no virtio-vsock device in --stats"
v = d[0]
print("vsock stats:", {k: v[k] for k in ("connections_guest", "bytes_to_host", "bytes_to_guest",
      "credit_stalls", "credit_updates", "connection_limit", "resets_sent", "bad_packets",
      "polled", "poll_preempted")})
assert v["connections_guest"] == conns, v
assert v["bytes_to_host"] == conns * each and v["bytes_to_guest"] == conns * each, v
assert v["connections_open"] == 0 and v["bad_packets"] == 0 and v["connection_limit"] == 0, v
assert v["polled"] > 0, v
PY
echo "vsock_many: $conns connections, $mib MiB each way each, every byte back intact"
