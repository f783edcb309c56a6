#!/usr/bin/env bash
# The s390x test guest's initramfs: busybox (Debian's busybox-static for
# s390x, fetched by tests/s390/run --prepare), the same /init as the x86
# guest (guest/init: runs the command after " -- ", reports its status with
# mvm-exit) and the s390x mvm-exit (guest/s390/mvm-exit). The kernel is, for
# now, Debian's s390x kernel (console on SCLP VT220: ttysclp0), whose
# virtio_blk.ko the initramfs carries and /init loads.
# Prints the initramfs' path; rebuilt only when an input changed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd -P)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mvm/s390x
bb=$cache/l1/busybox
[ -f "$bb" ] || { echo "guest: no s390x busybox in $cache/l1; run tests/s390/run --prepare (make deps)" >&2; exit 1; }
command -v qemu-s390x-static >/dev/null || { echo "guest: qemu-s390x-static not found (make deps)" >&2; exit 1; }
key=$(cat "$bb" "$cache/l1/virtio_blk.ko" "$here/init" "$here/s390/mvm-exit" "$0" |
	sha256sum | cut -c1-16)
out=$cache/guest-$key/initrd.gz
if [ ! -f "$out" ]; then
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/mvm-s390-guest.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp"/root/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,run,root}
	cp "$bb" "$tmp/root/bin/busybox"
	# The applet list from the s390x binary itself (through qemu-user).
	for a in $(qemu-s390x-static "$bb" --list-full); do
		[ "$a" = bin/busybox ] && continue
		mkdir -p "$tmp/root/$(dirname "$a")"
		ln -sf /bin/busybox "$tmp/root/$a"
	done
	mkdir -p "$tmp/root/lib/mvm-modules"
	cp "$cache/l1/virtio_blk.ko" "$tmp/root/lib/mvm-modules/"
	echo virtio_blk.ko >"$tmp/root/lib/mvm-modules/order"
	cp "$here/init" "$tmp/root/init"
	cp "$here/s390/mvm-exit" "$tmp/root/bin/mvm-exit"
	chmod 755 "$tmp/root/init" "$tmp/root/bin/mvm-exit"
	(cd "$tmp/root" && find . | cpio -o -H newc 2>/dev/null | gzip -9) >"$tmp/initrd.gz"
	mkdir -p "$(dirname "$out")"
	mv "$tmp/initrd.gz" "$out"
fi
echo "$out"
