#!/usr/bin/env bash
# A rate-limit group's buckets go into a snapshot, as a disk's own do: a
# guest reading its disk without pause, the disk in a group of 20
# operations refilled over 10 s (2 a second), has emptied the group's
# bucket when it is snapshotted; restored in a new mvm (the group not
# given again: the snapshot brings it, with its limits, as vm.info shows),
# it goes on at 2 reads a second, not with a full bucket of 20 at once, as
# a restore that started the group afresh would give every clone.
. "$(dirname "$0")/lib.sh"
sock=$SYS_TMP/api.sock
snap=$SYS_TMP/snap
img=$SYS_TMP/disk.img
make_image "$img" 8
group="id=g,ops_size=20,ops_refill_time=10000"
script='i=0; while :; do dd if=/dev/vda of=/dev/null bs=4k count=1 skip=$((i % 2048)) iflag=direct 2>/dev/null || echo disk-error; i=$((i+1)); done'
# read_ops and rate_delayed of the VM's first disk, from vm.counters (its
# other entries: the vsock device, the API's own).
counters() {
	api GET vm.counters >/dev/null
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
k = sorted(x for x in d if not x.startswith(("_vsock", "_api")))[0]
print(d[k]["read_ops"], d[k]["rate_delayed"])' "$SYS_TMP/body"
}
"$MVM" --sandbox off --api-socket "$sock" --rate-limit-group "$group" --disk "$img,rate_limit_group=g" \
	--cmdline "$(guest_script "$script")" </dev/null >"$SYS_TMP/out" 2>&1 &
pid=$!
for _ in $(seq 1 240); do
	[ -S "$sock" ] && c=$(counters 2>/dev/null) && [ "${c#* }" -ge 3 ] 2>/dev/null && break
	kill -0 $pid 2>/dev/null || break
	sleep 0.5
done
c=$(counters) || { tail -n 20 "$SYS_TMP/out"; fail "vm.counters: $(head -c 300 "$SYS_TMP/body" 2>/dev/null)"; }
[ "${c#* }" -ge 3 ] || { tail -n 20 "$SYS_TMP/out"; fail "the guest was not held by its group (read_ops, rate_delayed: $c)"; }
echo "before the snapshot: read_ops, rate_delayed $c"
expect 204 PUT vm.pause
expect 204 PUT vm.snapshot -d "{\"destination_url\":\"file://$snap\"}"
expect 204 PUT vmm.shutdown
wait $pid

sock=$SYS_TMP/api2.sock
"$MVM" --sandbox off --api-socket "$sock" --restore "$snap" </dev/null >"$SYS_TMP/out2" 2>&1 &
pid=$!
for _ in $(seq 1 100); do [ -S "$sock" ] && api GET vm.info >/dev/null && break; sleep 0.1; done
grep -q '"rate_limit_groups":\[{"id":"g","rate_limiter_config":{"ops":{"size":20,"one_time_burst":0,"refill_time":10000}}}\]' "$SYS_TMP/body" ||
	{ tail -n 20 "$SYS_TMP/out2"; fail "vm.info of the restored VM: not the snapshot's group: $(head -c 600 "$SYS_TMP/body")"; }
# Four seconds of the restored guest: 2 reads a second and what the
# bucket held at the snapshot (a read or two), not 20 at once.
sleep 4
c=$(counters) || fail "vm.counters after the restore: $(head -c 300 "$SYS_TMP/body")"
reads=${c% *}
expect 204 PUT vmm.shutdown
wait $pid
! grep -q disk-error "$SYS_TMP/out2" || fail "the restored guest's reads failed"
[ "$reads" -ge 2 ] || { tail -n 20 "$SYS_TMP/out2"; fail "the restored guest did not read its disk (read_ops $reads)"; }
[ "$reads" -lt 16 ] || fail "the restored guest read $reads blocks in 4 s: its group's bucket started full"
echo "restored: $reads reads in its first 4 s at 2 a second (a full bucket would have given 20 at once)"
