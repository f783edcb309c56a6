#!/usr/bin/env bash
# The sandbox on a running VM: with --chroot, --uid/--gid, --new-pid-ns and
# --cgroup, while the guest runs fio on a 2-queue disk, every thread of mvm
# runs in a seccomp filter (one each: every thread is started unfiltered,
# before any vCPU runs, and enters its own), as user and group 65534 with
# no supplementary group and no capability in any set, not dumpable, with
# no new privileges, no core dumps, a bounded file size, PID 1 of its own
# PID namespace, in its cgroup; its mount namespace holds one read-only
# mount, the jail directory; the descriptor and the environment variable
# it was started with are gone. fio passes and mvm exits with the guest's
# status. With --sandbox=off no thread is filtered.
. "$(dirname "$0")/lib.sh"

# On failure: what mvm printed, and any seccomp kill the kernel logged
# (audit type 1326 names the thread and the system call number).
fail() {
	echo "FAIL: $*"
	for f in "$SYS_TMP"/out*; do tr -d '\r' <"$f" | grep -v '^{"vcpus"' | tail -n 15 | sed "s#^#    ${f##*/}| #"; done
	dmesg 2>/dev/null | grep 'type=1326' | tail -n 5
	exit 1
}

jail=$SYS_TMP/jail
mkdir -p "$jail"
make_image "$SYS_TMP/disk.img" 64

# A watchdog in the guest: if fio has not ended 60 s on, the guest says
# what its disk has in flight and how many interrupts each queue brought,
# to set beside mvm's --stats (see wait_exit).
script='
echo MVM-READY
(sleep 60; echo MVM-WATCHDOG inflight $(cat /sys/block/vda/inflight); grep -E "virtio|vda" /proc/interrupts) &
w=$!
fio --name=s --filename=/dev/vda --rw=randrw --bs=4k --size=16M --numjobs=2 --ioengine=io_uring --iodepth=8 --direct=1 --time_based --runtime=20 --eta=never --output=/tmp/f.log
echo MVM-FIO-RC=$?
kill $w
'

# wait_line FILE REGEX PID: until FILE has a line matching REGEX (60 s).
# (A deadline, not a count of rounds: each round forks, which is slow
# under emulation.)
wait_line() {
	local end=$((SECONDS + 60))
	while [ $SECONDS -lt $end ]; do
		grep -qE -- "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || fail "mvm ended early"
		sleep 0.2
	done
	fail "no line matching '$2' within 60 s"
}

# wait_exit PID SECONDS: mvm's exit status, or a failure that shows where
# each thread of mvm (and of its child, with --new-pid-ns) sleeps when it
# does not end in time, then what --stats says of each queue's ring after
# a SIGTERM (a lost notification, hung host I/O or a lost interrupt).
wait_exit() {
	local end=$((SECONDS + $2)) p task child
	while [ $SECONDS -lt $end ]; do
		kill -0 "$1" 2>/dev/null || { wait "$1"; return; }
		sleep 0.2
	done
	child=$(cat "/proc/$1/task/$1/children" 2>/dev/null)
	for p in "$1" $child; do
		for task in /proc/$p/task/*; do
			echo "    $p $(cat "$task/comm") $(cut -d' ' -f3 "$task/stat") wchan $(cat "$task/wchan")"
			sed 's/^/        /' "$task/stack" 2>/dev/null | head -n 8
		done
	done
	kill -TERM "$1"
	end=$((SECONDS + 20))
	while [ $SECONDS -lt $end ] && kill -0 "$1" 2>/dev/null; do sleep 0.2; done
	kill -KILL "$1" 2>/dev/null
	for p in "$SYS_TMP"/out*; do ring_report "$p"; done
	# What the guest's kernel said after the guest was ready (a stall
	# report's first lines say which), which the tail of its output cuts.
	for p in "$SYS_TMP"/out*; do
		tr -d '\r' <"$p" | sed -n '/MVM-READY/,$p' | grep -m 30 '^\[' | sed "s/^/    kernel| /"
	done
	fail "mvm did not end within $2 s"
}

# status TASKDIR: "Seccomp Seccomp_filters Uid Gid NoNewPrivs" of a task
# (one read: the task may end any time after the guest is done).
status() {
	awk '$1 == "Seccomp:" { s = $2 } $1 == "Seccomp_filters:" { f = $2 }
	     $1 == "Uid:" { u = $2 } $1 == "Gid:" { g = $2 } $1 == "NoNewPrivs:" { n = $2 }
	     END { print s, f, u, g, n }' "$1/status"
}

# A cgroup v2 hierarchy with the pids controller for --cgroup: the L1
# mounts none of its own.
cgroot=/sys/fs/cgroup
if [ "$(stat -fc %T "$cgroot" 2>/dev/null)" != cgroup2fs ]; then
	mount -t cgroup2 none "$cgroot" || fail "cannot mount cgroup2 on $cgroot"
fi
grep -qw pids "$cgroot/cgroup.subtree_control" || echo +pids >"$cgroot/cgroup.subtree_control" ||
	fail "cannot enable the pids controller in $cgroot"
cg=$cgroot/mvm-sandbox-$$
touch "$jail/marker"

# fd 9 and MVM_TEST_SECRET: what a careless caller hands down.
MVM_TEST_SECRET=hunter2 "$MVM" --stats --cpus 2 --disk "$SYS_TMP/disk.img,queues=2,io-threads=2" \
	--chroot "$jail" --uid 65534 --gid 65534 --new-pid-ns --cgroup "$cg" \
	--cgroup-set pids.max=200 --cmdline "$(guest_script "$script")" \
	</dev/null >"$SYS_TMP/out" 2>&1 9<"$jail/marker" &
parent=$!
wait_line "$SYS_TMP/out" '^MVM-READY' "$parent"
# The VM runs in the child, PID 1 of its namespace; the parent only waits.
pid=$(cat "/proc/$parent/task/$parent/children" 2>/dev/null)
pid=${pid%% *}
[ -n "$pid" ] || fail "mvm --new-pid-ns has no child"

# Everything is read at once, right away: the guest ends when fio does
# (20 s), and under emulation every fork here is slow. One status file
# per task, concatenated ("Name:" starts each); io_uring's workers
# (iou-wrk-*) come and go, and one that ends meanwhile is just not listed.
tasks=$(cat /proc/$pid/task/*/status 2>/dev/null | awk '
	function out() { if (n != "") print n, s, f, u, g, p, c }
	$1 == "Name:" { out(); n = $2; s = f = u = g = p = ""; c = "" }
	$1 == "Seccomp:" { s = $2 } $1 == "Seccomp_filters:" { f = $2 }
	$1 == "Uid:" { u = $2 } $1 == "Gid:" { g = $2 } $1 == "NoNewPrivs:" { p = $2 }
	$1 ~ /^Cap(Inh|Prm|Eff|Bnd|Amb):$/ { c = c $2 }
	END { out() }')
main_status=$(cat "/proc/$pid/status")
limits=$(cat "/proc/$pid/limits")
mounts=$(cat "/proc/$pid/mountinfo")
fds=$(ls -l "/proc/$pid/fd/" 2>&1)
environ=$(tr '\0' '\n' <"/proc/$pid/environ")
cgroup=$(cat "/proc/$pid/cgroup")
pids_current=$(cat "$cg/pids.current")
marker_seen=no etc_seen=no
[ -e "/proc/$pid/root/marker" ] && marker_seen=yes
[ -e "/proc/$pid/root/etc" ] && etc_seen=yes

echo "threads of mvm (pid $pid, under $parent) while the guest runs fio:"
unfiltered=() vcpus=0 queues=0 control=0 main=0
while read -r comm mode filters uid gid nnp caps; do
	printf '    %-14s Seccomp %s, filters %s, Uid %s, Gid %s, NoNewPrivs %s\n' "$comm" "$mode" \
		"$filters" "$uid" "$gid" "$nnp"
	[ "$mode" = 2 ] || unfiltered+=("$comm")
	case $comm in
	vcpu[0-9]*) vcpus=$((vcpus + 1)); [ "$filters" = 1 ] || fail "$comm has $filters filters" ;;
	mvm-d0q[0-9]*) queues=$((queues + 1)); [ "$filters" = 1 ] || fail "$comm has $filters filters" ;;
	mvm-ctl) control=1 ;;
	mvm) main=1 ;;
	esac
	[ "$uid" = 65534 ] || fail "$comm does not run as uid 65534"
	[ "$gid" = 65534 ] || fail "$comm does not run as gid 65534"
	[ "$nnp" = 1 ] || fail "$comm may gain privileges"
	[ -z "${caps//0/}" ] || fail "$comm holds capabilities (CapInh..CapAmb: $caps)"
done <<<"$tasks"
[ ${#unfiltered[@]} -eq 0 ] || fail "threads without a seccomp filter: ${unfiltered[*]}"
[ $vcpus = 2 ] && [ $queues = 2 ] && [ $control = 1 ] && [ $main = 1 ] ||
	fail "expected 2 vCPU, 2 queue, 1 control and the main thread; saw $vcpus, $queues, $control, $main"
grep -qE '^Groups:\s*$' <<<"$main_status" || fail "supplementary groups kept: $(grep ^Groups <<<"$main_status")"
grep -qE '^NSpid:\s+[0-9]+\s+1$' <<<"$main_status" ||
	fail "not PID 1 of a new PID namespace: $(grep ^NSpid <<<"$main_status")"
echo "    $(grep ^NSpid <<<"$main_status"), $(grep ^CapEff <<<"$main_status"), $(grep ^CapBnd <<<"$main_status")"
# The mount namespace: one mount, the jail, read-only, nosuid, nodev, noexec.
echo "mounts of mvm:"; sed 's/^/    /' <<<"$mounts"
[ "$(wc -l <<<"$mounts")" = 1 ] || fail "mvm sees more than the jail's one mount"
awk '{ exit !($5 == "/" && $6 ~ /(^|,)ro(,|$)/ && $6 ~ /nosuid/ && $6 ~ /nodev/ && $6 ~ /noexec/) }' \
	<<<"$mounts" || fail "the jail is not mounted on / read-only, nosuid, nodev, noexec"
[ $marker_seen = yes ] && [ $etc_seen = no ] || fail "mvm's root is not the jail $jail"
# What it was handed: fd 9 closed, the environment wiped.
echo "descriptors of mvm:"; sed -n '2,$s/^.* \([0-9]* -> .*\)$/    \1/p' <<<"$fds"
! grep -q ' 9 -> ' <<<"$fds" || fail "the inherited fd 9 is still open"
! grep -q marker <<<"$fds" || fail "a descriptor of the caller's file is still open"
! grep -q SECRET <<<"$environ" || fail "the environment was not wiped: $(grep SECRET <<<"$environ")"
grep -qE "^0::/mvm-sandbox-$$\$" <<<"$cgroup" || fail "mvm is not in its cgroup: $cgroup"
[ "$(cat "$cg/pids.max")" = 200 ] && [ "$pids_current" -ge 5 ] ||
	fail "the cgroup's pids.max/pids.current: $(cat "$cg/pids.max")/$pids_current"
echo "    cgroup $(cat <<<"$cgroup"), pids.current $pids_current, pids.max 200"
grep -qE '^Max core file size +0 +0 ' <<<"$limits" || fail "core dumps are not off"
grep -qE '^Max file size +[0-9]+ +[0-9]+ ' <<<"$limits" || fail "the file size is not bounded"
grep -E '^Max (open files|processes|core file size|file size)' <<<"$limits" | sed 's/^/    /'

wait_exit "$parent" 120; rc=$?
tr -d '\r' <"$SYS_TMP/out" | grep -v '^{"vcpus"' | tail -n 5 | sed 's/^/    guest| /'
[ $rc -eq 0 ] || fail "mvm exited $rc (expected 0: the guest powered off)"
expect_line "$SYS_TMP/out" '^MVM-FIO-RC=0'

# --sandbox=off: nothing filtered (for debugging with strace and friends).
"$MVM" "${SYS_IDS[@]}" --sandbox=off --cmdline "-- echo MVM-READY; sleep 30" </dev/null >"$SYS_TMP/out2" 2>&1 &
pid=$!
wait_line "$SYS_TMP/out2" '^MVM-READY' "$pid"
for task in /proc/$pid/task/*; do
	st=$(status "$task" 2>/dev/null)
	[ -n "${st// /}" ] || continue         # ended meanwhile (see above)
	read -r mode _ <<<"$st"
	[ "$mode" = 0 ] || fail "$(cat "$task/comm") is filtered with --sandbox=off"
done
kill -TERM "$pid"; wait_exit "$pid" 30; rc=$?
[ $rc -eq 143 ] || fail "mvm --sandbox=off exited $rc after SIGTERM, expected 143"
rmdir "$cg" 2>/dev/null
echo "sandbox on: every thread filtered, uid/gid 65534, no capability or group, pivoted into the jail, PID 1, in its cgroup; off: none filtered"
