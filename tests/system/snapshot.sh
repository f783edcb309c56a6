#!/usr/bin/env bash
# Snapshot and restore: a guest counting on its console, reading its
# disk, is paused and snapshotted through the API (vm.snapshot), and mvm
# ends. mvm --restore DIR brings it back in a new process: it goes on
# counting from where it stood, with the same boot id and no boot (no
# kernel banner), its disk answering, its clock going on from the
# snapshot's uptime; once with the sandbox off and once confined, with
# the disk given again as a copy. Damaged snapshots are refused with one
# line and status 2: a truncated state, a flipped byte, memory cut short,
# a disk of another size.
. "$(dirname "$0")/lib.sh"
sock=$SYS_TMP/api.sock
img=$SYS_TMP/disk.img
snap=$SYS_TMP/snap
head -c 8M /dev/urandom >"$img"
sum=$(head -c 1M "$img" | md5sum | cut -d' ' -f1)
api() {   # METHOD ENDPOINT [curl args...]: the status, the body in $SYS_TMP/body
	local m=$1 e=$2; shift 2
	curl -s -m 60 --unix-socket "$sock" -X "$m" -o "$SYS_TMP/body" -w '%{http_code}' \
		"$@" "http://localhost/api/v1/$e"
}
expect() {   # STATUS METHOD ENDPOINT [curl args...]
	local want=$1 got; shift
	got=$(api "$@")
	[ "$got" = "$want" ] || { tail -n 8 "$SYS_TMP/out"
		fail "$1 $2: HTTP $got, expected $want: $(head -c 300 "$SYS_TMP/body" 2>/dev/null)"; }
	echo "$1 $2: $got $(head -c 160 "$SYS_TMP/body")"
}
# The guest's loop: a tick with its number, uptime and boot id; each
# tick reads one 4 KiB block of the disk past the page cache, and every
# tenth says the md5sum of its first MiB.
script='b=$(cat /proc/sys/kernel/random/boot_id); i=0; while [ $i -lt 100000 ]; do
dd if=/dev/vda of=/dev/null bs=4k count=1 skip=$((i % 2048)) iflag=direct 2>/dev/null || echo disk-error
[ $((i % 10)) -eq 0 ] && echo "sum $i $(dd if=/dev/vda bs=1M count=1 iflag=direct 2>/dev/null | md5sum | cut -d" " -f1)"
echo "tick $i $(cut -d" " -f1 /proc/uptime) $b"; i=$((i+1)); sleep 0.1; done'
"$MVM" --sandbox off --api-socket "$sock" --disk "$img" --cmdline "$(guest_script "$script")" \
	</dev/null >"$SYS_TMP/out" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q '^tick 20 ' "$SYS_TMP/out" && break; kill -0 $pid 2>/dev/null || break; sleep 0.2; done
grep -q '^tick 20 ' "$SYS_TMP/out" || { tail -n 20 "$SYS_TMP/out"; fail "the guest did not tick"; }
expect 405 PUT vm.snapshot -d "{\"destination_url\":\"file://$snap\"}"
expect 204 PUT vm.pause
expect 400 PUT vm.snapshot -d '{"destination_url":"http://x/y"}'
t0=$(date +%s%N)
expect 204 PUT vm.snapshot -d "{\"destination_url\":\"file://$snap\"}"
t1=$(date +%s%N)
last=$(tr -d '\r' <"$SYS_TMP/out" | grep '^tick ' | tail -n 1)
boot=$(echo "$last" | cut -d' ' -f4)
n=$(echo "$last" | cut -d' ' -f2)
up=$(echo "$last" | cut -d' ' -f3)
echo "snapshot after '$last' in $(( (t1 - t0) / 1000000 )) ms: state $(stat -c %s "$snap/state") bytes," \
	"memory $(stat -c %s "$snap/memory") bytes, $(du -k "$snap/memory" | cut -f1) KiB on disk"
[ -f "$snap/state" ] && [ -f "$snap/memory" ] || fail "the snapshot's files are missing"
expect 204 PUT vmm.shutdown
wait $pid

# restored RUN TAG [mvm args]: mvm --restore, until the guest has counted
# 15 ticks past the snapshot's; then its output is checked and mvm ended.
restored() {
	local tag=$1 first next; shift
	"$MVM" "$@" --restore "$snap" </dev/null >"$SYS_TMP/$tag" 2>&1 &
	local rp=$!
	for _ in $(seq 1 300); do
		grep -q "^tick $((n + 15)) " "$SYS_TMP/$tag" && break
		kill -0 $rp 2>/dev/null || break
		sleep 0.2
	done
	kill $rp 2>/dev/null; wait $rp 2>/dev/null
	tr -d '\r' <"$SYS_TMP/$tag" >"$SYS_TMP/$tag.txt"
	grep -q "^tick $((n + 15)) " "$SYS_TMP/$tag.txt" || { tail -n 20 "$SYS_TMP/$tag.txt"
		fail "$tag: the restored guest did not count on to $((n + 15))"; }
	first=$(grep '^tick ' "$SYS_TMP/$tag.txt" | head -n 1)
	next=$(echo "$first" | cut -d' ' -f2)
	[ "$next" = $((n + 1)) ] || fail "$tag: the first tick after the restore is $next, expected $((n + 1))"
	[ "$(echo "$first" | cut -d' ' -f4)" = "$boot" ] || fail "$tag: another boot id: $first"
	! grep -q 'Linux version' "$SYS_TMP/$tag.txt" || fail "$tag: the guest booted again"
	! grep -q 'disk-error' "$SYS_TMP/$tag.txt" || fail "$tag: the guest's disk failed after the restore"
	grep -q "^sum [0-9]* $sum" "$SYS_TMP/$tag.txt" || fail "$tag: the guest read other data from its disk"
	grep '^tick ' "$SYS_TMP/$tag.txt" |
		awk -v up="$up" '{ if ($3 < up || $3 > up + 30) bad = 1 } END { exit bad }' ||
		fail "$tag: the uptime jumped: $first after $up"
	echo "$tag: went on with '$first', counted to $((n + 15)), same boot, disk data right"
}
restored plain --sandbox off
cp "$img" "$SYS_TMP/copy.img"
restored sandboxed "${SYS_IDS[@]}" --disk "$SYS_TMP/copy.img"

# refused NAME: mvm --restore on a damaged snapshot exits 2 with one line.
refused() {
	local name=$1 rc; shift
	"$MVM" --sandbox off --restore "$snap" "$@" </dev/null >"$SYS_TMP/bad" 2>&1
	rc=$?
	[ $rc -eq 2 ] || { cat "$SYS_TMP/bad"; fail "$name: mvm exited $rc, expected 2"; }
	[ "$(wc -l <"$SYS_TMP/bad")" -eq 1 ] || { cat "$SYS_TMP/bad"; fail "$name: not one line"; }
	echo "$name: $(cat "$SYS_TMP/bad")"
}
cp "$snap/state" "$SYS_TMP/state.good"
head -c 1000 "$SYS_TMP/state.good" >"$snap/state"
refused "a truncated state"
cp "$SYS_TMP/state.good" "$snap/state"
printf '\x5a' | dd of="$snap/state" bs=1 seek=3000 conv=notrunc 2>/dev/null
refused "a flipped byte"
cp "$SYS_TMP/state.good" "$snap/state"
head -c 4M /dev/zero >"$SYS_TMP/small.img"
refused "a disk of another size" --disk "$SYS_TMP/small.img"
truncate -s -4096 "$snap/memory"
refused "memory cut short"
