#!/usr/bin/env bash
# Build the mvm s390x test guest: a lean Linux 6.1 kernel of its own
# (guest/s390/kernel.config: virtio-ccw, virtio-blk, virtio-vsock, the SCLP
# consoles, ext4; cross-built with gcc-s390x-linux-gnu from Debian's
# linux-source-6.1) and an initramfs: busybox (Debian's busybox-static for s390x), a static
# fio (cross-built from Debian's fio source, as guest/build.sh builds the
# x86 one), Debian's s390x mke2fs and e2fsck with their libraries, the
# shared /init (guest/init), the s390x mvm-exit (guest/s390/mvm-exit) and
# mvm-vsock (guest/mvm-vsock.c, cross-built static).
# tests/s390/run --prepare fetches the s390x packages once (make deps).
#
# Each part is cached under ${XDG_CACHE_HOME:-~/.cache}/mvm/s390x/ in a
# folder named after a hash of its inputs, built in a temporary folder and
# renamed into place. Prints the folder that holds vmlinuz and initrd.gz.
# Environment: MVM_GUEST_JOBS (parallel build jobs, default nproc).
set -euo pipefail

GUEST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(dirname "$GUEST_DIR")
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mvm/s390x
SRC_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mvm/src
KSRC_PKG=linux-source-6.1
KSRC_TAR=/usr/src/linux-source-6.1.tar.xz
JOBS=${MVM_GUEST_JOBS:-$(nproc)}
CROSS=s390x-linux-gnu-
. "$GUEST_DIR/lib.sh"

# ---------------------------------------------------------------- kernel --

# build_kernel TMP: TMP/out/vmlinuz (the s390 boot image: mvm loads it at
# 0 and starts it at 0x10000) and TMP/out/config.
build_kernel() {
	local tmp=$1 src=$1/linux-source-6.1 mk=(ARCH=s390 CROSS_COMPILE="$CROSS")
	log "building the s390x kernel from $KSRC_TAR with $JOBS jobs (several minutes; cached afterwards)"
	kernel_configure "$tmp" "$GUEST_DIR/s390/kernel.config" "${mk[@]}"
	run_logged "$tmp/build.log" make -C "$src" "${mk[@]}" -j"$JOBS" \
		KBUILD_BUILD_USER=mvm KBUILD_BUILD_HOST=mvm bzImage
	mkdir "$tmp/out"
	cp "$src/arch/s390/boot/bzImage" "$tmp/out/vmlinuz"
	cp "$src/.config" "$tmp/out/config"
	rm -rf "$src"
}

kernel_key() {
	{
		echo "$KSRC_PKG $(pkg_version "$KSRC_PKG")"
		"${CROSS}gcc" --version | head -n 1
		cat "$GUEST_DIR/s390/kernel.config"
		declare -f verify_config kernel_configure build_kernel run_logged
	} | key
}

# ------------------------------------------------------------------- fio --

fio_key() {
	{
		echo "$1 s390x"
		"${CROSS}gcc" --version | head -n 1
		echo "libc6-dev-s390x-cross $(pkg_version libc6-dev-s390x-cross)"
		echo "${FIO_CONFIGURE[@]}"
		declare -f build_fio run_logged
	} | key
}

# fio_binary: set FIO to the path of a static s390x fio (cached).
fio_binary() {
	local ver src k dir
	ver=$(pkg_version fio)
	src=$SRC_CACHE/fio_$ver
	[ -f "$src/configure" ] || fail "no fio source in $src; run 'make deps' as root (guest/fetch-sources.sh)"
	k=$(fio_key "$src")
	dir=$CACHE/fio-$k
	if [ ! -d "$dir" ]; then
		new_tmp fio
		build_fio "$src" "$TMP" "$CROSS" qemu-s390x-static
		publish "$TMP/out" "$dir"
	fi
	FIO=$dir/fio
}

# ------------------------------------------------------------- initramfs --

# build_initramfs TMP: TMP/out/initrd.gz. The userland comes from
# tests/s390/run --prepare: $CACHE/l1/busybox and $CACHE/e2fs (mke2fs,
# e2fsck and the shared libraries they need, dynamic loader included).
build_initramfs() {
	local tmp=$1 r=$1/root a
	log "building the s390x initramfs"
	mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,run,root,etc,mnt}
	cp "$CACHE/l1/busybox" "$r/bin/busybox"
	# The applet list from the s390x binary itself (through qemu-user).
	for a in $(qemu-s390x-static "$CACHE/l1/busybox" --list-full); do
		[ "$a" = bin/busybox ] && continue
		mkdir -p "$r/$(dirname "$a")"
		ln -sf /bin/busybox "$r/$a"
	done
	# Real tools replace busybox applets of the same name.
	rm -f "$r"/sbin/mke2fs "$r"/sbin/mkfs.ext[234] "$r"/sbin/e2fsck "$r"/sbin/fsck.ext[234] \
		"$r"/usr/bin/fio
	cp "$FIO" "$r/usr/bin/fio"
	cp -a "$CACHE/e2fs/." "$r/"
	ln -s mke2fs "$r/sbin/mkfs.ext4"
	ln -s e2fsck "$r/sbin/fsck.ext4"
	qemu-s390x-static -L "$r" "$r/sbin/mke2fs" -V >/dev/null 2>&1 ||
		fail "the s390x mke2fs does not run with the libraries in the initramfs"
	cp "$GUEST_DIR/init" "$r/init"
	cp "$GUEST_DIR/s390/mvm-exit" "$r/bin/mvm-exit"
	chmod 755 "$r/init" "$r/bin/mvm-exit"
	"${CROSS}gcc" -static -Os -Wall -Wextra -Werror -o "$r/usr/bin/mvm-vsock" "$GUEST_DIR/mvm-vsock.c"
	"${CROSS}strip" "$r/usr/bin/mvm-vsock"
	mkdir "$tmp/out"
	(cd "$r" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 2>/dev/null | gzip -9n) \
		>"$tmp/out/initrd.gz"
	rm -rf "$r"
}

initramfs_key() {
	{
		sha256sum <"$FIO"
		(cd "$CACHE" && find l1/busybox e2fs -type f | LC_ALL=C sort | xargs sha256sum)
		cat "$GUEST_DIR/init" "$GUEST_DIR/s390/mvm-exit" "$GUEST_DIR/mvm-vsock.c"
		"${CROSS}gcc" --version | head -n 1
		declare -f build_initramfs
	} | key
}

# ------------------------------------------------------------------ main --

main() {
	local kdir idir lock
	mkdir -p "$CACHE"
	exec {lock}>"$CACHE/.guest-build.lock"
	flock "$lock"
	rm -rf "$CACHE"/.tmp-kernel.* "$CACHE"/.tmp-fio.* "$CACHE"/.tmp-initramfs.* "$CACHE"/.tmp-guest.*
	[ -r "$KSRC_TAR" ] || fail "$KSRC_TAR is missing; run 'make deps' as root (package $KSRC_PKG)"
	command -v "${CROSS}gcc" >/dev/null || fail "${CROSS}gcc not found; run 'make deps' as root"
	command -v qemu-s390x-static >/dev/null || fail "qemu-s390x-static not found; run 'make deps' as root"
	[ -f "$CACHE/l1/busybox" ] && [ -x "$CACHE/e2fs/sbin/mke2fs" ] ||
		fail "no s390x busybox or mke2fs in $CACHE; run tests/s390/run --prepare (make deps)"

	kdir=$CACHE/kernel-$(kernel_key)
	if [ ! -d "$kdir" ]; then
		new_tmp kernel
		build_kernel "$TMP"
		publish "$TMP/out" "$kdir"
	fi
	fio_binary
	idir=$CACHE/initramfs-$(initramfs_key)
	if [ ! -d "$idir" ]; then
		new_tmp initramfs
		build_initramfs "$TMP"
		publish "$TMP/out" "$idir"
	fi
	# One folder with both, as tests/s390/run wants them.
	local gdir=$CACHE/guest-$(cat "$kdir/vmlinuz" "$idir/initrd.gz" | key)
	if [ ! -d "$gdir" ]; then
		new_tmp guest
		chmod 755 "$TMP"
		ln "$kdir/vmlinuz" "$TMP/vmlinuz" 2>/dev/null || cp "$kdir/vmlinuz" "$TMP/vmlinuz"
		ln "$idir/initrd.gz" "$TMP/initrd.gz" 2>/dev/null || cp "$idir/initrd.gz" "$TMP/initrd.gz"
		publish "$TMP" "$gdir"
	fi
	echo "$gdir"
}

main "$@"
