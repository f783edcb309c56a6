#!/usr/bin/env bash
# Build the mvm test guest: a lean Linux 6.1 kernel (bzImage, and vmlinux
# with the PVH entry note) and an initramfs (busybox, fio, mkfs.ext4,
# mvm-exit, mvm-session, mvm-vsock, mvm-power-key, /init).
#
# Every result is cached under ${XDG_CACHE_HOME:-~/.cache}/mvm/ in a folder
# named after a hash of everything that goes into it (sources, package
# versions, compiler, the functions of this script that build it), so an
# unchanged input is never rebuilt and a fresh clone on the same machine
# reuses it. Each is built in a temporary folder inside the cache and renamed
# into place, so an interrupted build never leaves a half-filled entry.
# The checkout then sees the results as build/guest/{bzImage,vmlinux,
# initramfs.cpio.gz} (hard links, or copies across file systems).
#
# Environment: MVM_GUEST_JOBS (parallel kernel build jobs, default nproc),
# XDG_CACHE_HOME.
set -euo pipefail

GUEST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$GUEST_DIR")
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mvm
OUT=$ROOT/build/guest
KSRC_PKG=linux-source-6.1
KSRC_TAR=/usr/src/linux-source-6.1.tar.xz
JOBS=${MVM_GUEST_JOBS:-$(nproc)}
. "$GUEST_DIR/lib.sh"

# ---------------------------------------------------------------- kernel --

# build_kernel TMP: build into TMP/out: bzImage, vmlinux, config and the
# kernel's gen_init_cpio (used to write the initramfs without root).
build_kernel() {
	local tmp=$1 src=$1/linux-source-6.1
	log "building the kernel from $KSRC_TAR with $JOBS jobs (several minutes; cached afterwards)"
	kernel_configure "$tmp" "$GUEST_DIR/kernel.config"
	run_logged "$tmp/build.log" make -C "$src" -j"$JOBS" \
		KBUILD_BUILD_USER=mvm KBUILD_BUILD_HOST=mvm bzImage vmlinux
	# PVH boot needs XEN_ELFNOTE_PHYS32_ENTRY (type 18) in vmlinux.
	readelf -n "$src/vmlinux" | grep -A1 -E '^ +Xen ' | grep -qE '0x00000012|PHYS32_ENTRY' ||
		fail "vmlinux has no PVH entry note (CONFIG_PVH)"
	mkdir "$tmp/out"
	cp "$src/arch/x86/boot/bzImage" "$src/vmlinux" "$tmp/out/"
	cp "$src/.config" "$tmp/out/config"
	cp "$src/usr/gen_init_cpio" "$tmp/out/"
	rm -rf "$src"
}

kernel_key() {
	{
		echo "$KSRC_PKG $(pkg_version "$KSRC_PKG")"
		gcc --version | head -n 1
		cat "$GUEST_DIR/kernel.config"
		declare -f verify_config kernel_configure build_kernel run_logged
	} | key
}

# ------------------------------------------------------------------- fio --

fio_key() {
	{
		echo "$1"
		gcc --version | head -n 1
		for p in libc6-dev libaio-dev zlib1g-dev; do echo "$p $(pkg_version "$p")"; done
		echo "${FIO_CONFIGURE[@]}"
		declare -f build_fio run_logged
	} | key
}

# fio_binary: set FIO to the path of a static fio (cached), or to "" when
# its source is missing (guest/fetch-sources.sh, run by 'make deps', fetches it).
fio_binary() {
	FIO=
	local ver src k dir
	ver=$(pkg_version fio)
	src=$CACHE/src/fio_$ver
	if [ ! -f "$src/configure" ]; then
		log "warning: no fio source in $src (run 'make deps' as root); using Debian's dynamically linked fio, a much larger initramfs"
		return 0
	fi
	k=$(fio_key "$src")
	dir=$CACHE/fio-$k
	if [ ! -d "$dir" ]; then
		new_tmp fio
		build_fio "$src" "$TMP"
		publish "$TMP/out" "$dir"
	fi
	FIO=$dir/fio
}

# ------------------------------------------------------------- initramfs --

# copy_with_libs BINARY ROOT DEST: BINARY to ROOT/DEST plus every shared
# library ldd names and the dynamic loader, at their own paths.
copy_with_libs() {
	local bin=$1 root=$2 lib
	mkdir -p "$root/$(dirname "$3")"
	cp -L "$bin" "$root/$3"
	for lib in $(ldd "$bin" | grep -oE '/[^ ]+'); do
		[ -e "$root$lib" ] && continue
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
}

# cpio_list ROOT: a gen_init_cpio list of ROOT (root-owned), plus the
# device nodes the kernel needs before /init mounts devtmpfs.
cpio_list() {
	local p mode
	(cd "$1" && find . -mindepth 1 | LC_ALL=C sort) | while IFS= read -r p; do
		p=${p#.}
		mode=$(stat -c %a "$1$p")
		if [ -L "$1$p" ]; then
			echo "slink $p $(readlink "$1$p") 0777 0 0"
		elif [ -d "$1$p" ]; then
			echo "dir $p $mode 0 0"
		else
			echo "file $p $1$p $mode 0 0"
		fi
	done
	echo "nod /dev/console 0600 0 0 c 5 1"
	echo "nod /dev/null 0666 0 0 c 1 3"
}

# build_initramfs TMP FIO GEN_INIT_CPIO: TMP/out/initramfs.cpio.gz.
build_initramfs() {
	local tmp=$1 fio=$2 r=$1/root a
	log "building the initramfs"
	mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,tmp,run,root,etc,mnt}
	cp /bin/busybox "$r/bin/busybox"
	for a in $(/bin/busybox --list-full); do
		[ "$a" = bin/busybox ] && continue
		mkdir -p "$r/$(dirname "$a")"
		ln -sf /bin/busybox "$r/$a"
	done
	# Real tools replace busybox applets of the same name.
	rm -f "$r"/sbin/mke2fs "$r"/sbin/mkfs.ext[234] "$r"/usr/bin/fio
	if [ -n "$fio" ]; then
		cp "$fio" "$r/usr/bin/fio"
	else
		copy_with_libs /usr/bin/fio "$r" usr/bin/fio
	fi
	copy_with_libs "$(command -v mke2fs || echo /sbin/mke2fs)" "$r" sbin/mke2fs
	ln -s mke2fs "$r/sbin/mkfs.ext4"
	cp /etc/mke2fs.conf "$r/etc/"
	gcc -static -Os -Wall -Wextra -Werror -I"$ROOT" -o "$r/sbin/mvm-exit" "$GUEST_DIR/mvm-exit.c"
	gcc -static -Os -Wall -Wextra -Werror -o "$r/sbin/mvm-session" "$GUEST_DIR/mvm-session.c"
	gcc -static -Os -Wall -Wextra -Werror -o "$r/usr/bin/mvm-vsock" "$GUEST_DIR/mvm-vsock.c"
	gcc -static -Os -Wall -Wextra -Werror -o "$r/sbin/mvm-power-key" "$GUEST_DIR/mvm-power-key.c"
	strip "$r/sbin/mvm-exit" "$r/sbin/mvm-session" "$r/usr/bin/mvm-vsock" "$r/sbin/mvm-power-key"
	install -m 0755 "$GUEST_DIR/init" "$r/init"
	[ -f "$r/bin/busybox" ] && [ ! -L "$r/bin/busybox" ] && [ -L "$r/bin/sh" ] ||
		fail "initramfs: /bin/busybox must be the binary and /bin/sh a link to it"
	cpio_list "$r" >"$tmp/cpio.list"
	mkdir "$tmp/out"
	"$3" -t 0 "$tmp/cpio.list" | gzip -9n >"$tmp/out/initramfs.cpio.gz"
	rm -rf "$r"
}

initramfs_key() {
	{
		if [ -n "$1" ]; then sha256sum <"$1"; else echo "fio $(pkg_version fio)"; fi
		for p in busybox-static e2fsprogs libc6 libc6-dev; do echo "$p $(pkg_version "$p")"; done
		gcc --version | head -n 1
		cat "$GUEST_DIR/init" "$GUEST_DIR/mvm-exit.c" "$GUEST_DIR/mvm-session.c" \
			"$GUEST_DIR/mvm-vsock.c" "$GUEST_DIR/mvm-power-key.c" \
			"$ROOT/arch/x86/layout.h" /etc/mke2fs.conf
		declare -f copy_with_libs cpio_list build_initramfs
	} | key
}

# ------------------------------------------------------------------ main --

# expose ENTRY/NAME as build/guest/NAME: a hard link, else a copy.
expose() {
	cmp -s "$1" "$OUT/$2" && return 0
	rm -f "$OUT/$2"
	ln "$1" "$OUT/$2" 2>/dev/null || cp "$1" "$OUT/$2"
}

main() {
	local kdir idir k lock
	mkdir -p "$CACHE" "$OUT"
	exec {lock}>"$CACHE/.guest-build.lock"
	flock "$lock"
	rm -rf "$CACHE"/.tmp-kernel.* "$CACHE"/.tmp-fio.* "$CACHE"/.tmp-initramfs.*
	[ -r "$KSRC_TAR" ] || fail "$KSRC_TAR is missing; run 'make deps' as root (package $KSRC_PKG)"

	kdir=$CACHE/guest-kernel-$(kernel_key)
	if [ ! -d "$kdir" ]; then
		new_tmp kernel
		build_kernel "$TMP"
		publish "$TMP/out" "$kdir"
	fi

	fio_binary
	k=$(initramfs_key "$FIO")
	idir=$CACHE/guest-initramfs-$k
	if [ ! -d "$idir" ]; then
		new_tmp initramfs
		build_initramfs "$TMP" "$FIO" "$kdir/gen_init_cpio"
		publish "$TMP/out" "$idir"
	fi

	expose "$kdir/bzImage" bzImage
	expose "$kdir/vmlinux" vmlinux
	expose "$kdir/config" kernel.config
	expose "$idir/initramfs.cpio.gz" initramfs.cpio.gz
	log "ready: build/guest/bzImage ($(du -k "$OUT/bzImage" | cut -f1) KiB)," \
		"vmlinux ($(du -k "$OUT/vmlinux" | cut -f1) KiB)," \
		"initramfs.cpio.gz ($(du -k "$OUT/initramfs.cpio.gz" | cut -f1) KiB)"
}

main "$@"
