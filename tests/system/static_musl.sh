#!/usr/bin/env bash
# make static: a fully static mvm built with musl (no dynamic loader, no
# liburing.so) boots the test guest with a virtio-blk disk and returns the
# guest's exit status, like the glibc build, with 2 vCPUs: when the guest
# exits, the other vCPU is still in KVM_RUN and must be kicked out by a
# sandboxed thread (musl's pthread_kill is tkill, which the filter refuses:
# this is where the static build once died with SIGSYS). Prints both
# binaries' sizes and peak RSS (VmHWM: mvm plus the guest RAM it touched)
# side by side.
set -u
cd "$(dirname "$0")/../.."
if [ -z "${MVM_KVM_PATH:-}" ]; then
	# On the host: the checkout is read-only inside the nested harness.
	make -s --no-print-directory static-bin || { echo "FAIL: make static failed"; exit 1; }
fi
. "$(dirname "$0")/lib.sh"
static=build/static/mvm
# A static PIE has a dynamic section (its own relocations), so ldd says
# "statically linked" with status 0: judge by the ELF headers instead.
command -v readelf >/dev/null || fail "readelf (binutils) is needed to check $static"
if readelf -lW "$static" | grep -q 'INTERP' || readelf -dW "$static" | grep -q '(NEEDED)'; then
	fail "$static has dynamic dependencies: $(readelf -dW "$static" | grep '(NEEDED)' | tr '\n' ' ')"
fi
echo "readelf: $static has no program interpreter and needs no shared library"

# run_peak BIN NAME: boots the guest (exit 5) with a disk; sets RC and HWM
# (kB). One more boot when the guest kernel stalled before /init.
run_peak() {
	local bin=$1 name=$2 pid v attempt
	for attempt in 1 2; do
		# The test guest by path: mvm finds it next to itself by default,
		# and build/static/ has none.
		timeout -k 5 120 "$bin" "${SYS_IDS[@]}" --cpus 2 --kernel build/guest/bzImage \
			--initrd build/guest/initramfs.cpio.gz --disk "$SYS_TMP/d.img" --cmdline '-- exit 5' \
			</dev/null >"$SYS_TMP/out.$name" 2>&1 &
		pid=$! HWM=0
		while kill -0 "$pid" 2>/dev/null; do
			v=$(pgrep -P "$pid" -x mvm | head -n1)
			v=$(awk '/^VmHWM:/ { print $2 }' "/proc/${v:-none}/status" 2>/dev/null)
			[ -n "$v" ] && HWM=$v
			sleep 0.2
		done
		wait "$pid"
		RC=$?
		grep -q 'Run /init as init process' "$SYS_TMP/out.$name" && break
		[ "$RC" -eq 124 ] || [ "$RC" -eq 137 ] || break
		echo "system: the guest kernel stalled before /init under $name; booting once more"
	done
	tail -n 3 "$SYS_TMP/out.$name" | tr -d '\r' | sed 's/^/    guest| /'
}
make_image "$SYS_TMP/d.img" 16
run_peak "$static" static
[ "$RC" -eq 5 ] || fail "the static mvm exited $RC, expected the guest's 5"
s_hwm=$HWM
run_peak "$MVM" glibc
[ "$RC" -eq 5 ] || fail "the glibc mvm exited $RC, expected the guest's 5"
strip -o "$SYS_TMP/static.stripped" "$static" && strip -o "$SYS_TMP/glibc.stripped" "$MVM" ||
	fail "strip failed"
printf 'size: static %s bytes, glibc %s bytes (+ libc, liburing); stripped: static %s, glibc %s\n' \
	"$(stat -c %s "$static")" "$(stat -c %s "$MVM")" \
	"$(stat -c %s "$SYS_TMP/static.stripped")" "$(stat -c %s "$SYS_TMP/glibc.stripped")"
echo "peak RSS (VmHWM, 256 MiB guest booted to exit): static ${s_hwm} kB, glibc ${HWM} kB"
echo "the static musl build boots the guest and returns its status"
