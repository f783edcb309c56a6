#!/usr/bin/env bash
# mvm --api-socket, driven with curl --unix-socket only, as Cloud
# Hypervisor's users drive its API, with the sandbox on (the API thread in
# its own filter): ping; the socket is 0600; vm.info says Running; a pause
# stops the guest's console and its disk (a second pause is refused with
# 405), vm.info says Paused, a resume lets it go on; counters; bad
# requests (invalid JSON 400, an unknown endpoint 404, an unserved one
# 501, a body over the limit 413) change nothing, and a client that
# connects and says nothing does not hold the others up; vmm.shutdown
# ends mvm with status 0.
. "$(dirname "$0")/lib.sh"
sock=$SYS_TMP/api.sock
img=$SYS_TMP/disk.img
make_image "$img" 8
api() {   # METHOD ENDPOINT [curl args...]: the status, the body in $SYS_TMP/body
	local m=$1 e=$2; shift 2
	curl -s -m 20 --unix-socket "$sock" -X "$m" -o "$SYS_TMP/body" -w '%{http_code}' \
		"$@" "http://localhost/api/v1/$e"
}
expect() {   # STATUS METHOD ENDPOINT [curl args...]
	local want=$1 got; shift
	got=$(api "$@")
	[ "$got" = "$want" ] || { grep -v '^tick' "$SYS_TMP/out" | tail -n 8
		fail "$1 $2: HTTP $got, expected $want: $(head -c 300 "$SYS_TMP/body" 2>/dev/null)"; }
	echo "$1 $2: $got $(head -c 160 "$SYS_TMP/body")"
}

"$MVM" "${SYS_IDS[@]}" --api-socket "$sock" --disk "$img" \
	--cmdline "$(guest_script 'i=0; while [ $i -lt 3000 ]; do echo tick $i $(cut -d" " -f1 /proc/uptime); i=$((i+1)); sleep 0.1; done')" \
	</dev/null >"$SYS_TMP/out" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q 'tick 5 ' "$SYS_TMP/out" && break; kill -0 $pid 2>/dev/null || break; sleep 0.2; done
grep -q 'tick 5 ' "$SYS_TMP/out" || { tail -n 20 "$SYS_TMP/out"; fail "the guest did not tick"; }

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
expect 204 PUT vm.resume
for _ in $(seq 1 100); do [ "$(wc -c <"$SYS_TMP/out")" -gt "$n1" ] && break; sleep 0.1; done
[ "$(wc -c <"$SYS_TMP/out")" -gt "$n1" ] || fail "no console output after the resume"
expect 200 GET vm.counters
grep -q '"_disk0":{' "$SYS_TMP/body" || fail "vm.counters: no _disk0"

# Bad requests change nothing; a silent client holds nobody up.
expect 400 PUT vm.create -H 'Content-Type: application/json' -d '{"cpus": {"boot_vcpus": 2'
expect 404 GET vm.teleport
expect 501 PUT vm.add-disk -H 'Content-Type: application/json' -d "{\"path\":\"$img\"}"
head -c 100000 /dev/zero | tr '\0' ' ' >"$SYS_TMP/big"
expect 413 PUT vm.create -H 'Content-Type: application/json' --data-binary "@$SYS_TMP/big"
socat -u UNIX-CONNECT:"$sock" - >/dev/null 2>&1 &
silent=$!
sleep 0.5
expect 200 GET vmm.ping
kill $silent 2>/dev/null
expect 200 GET vm.info
grep -q '"state":"Running"' "$SYS_TMP/body" || fail "vm.info after bad requests: not Running"

expect 204 PUT vmm.shutdown
for _ in $(seq 1 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
if kill -0 $pid 2>/dev/null; then kill -KILL $pid; fail "mvm still running 10 s after vmm.shutdown"; fi
wait $pid; rc=$?
tail -n 3 "$SYS_TMP/out" | tr -d '\r' | sed 's/^/    guest| /'
[ $rc -eq 0 ] || fail "mvm exited $rc after vmm.shutdown, expected 0"
echo "vmm.shutdown: mvm exited 0"
