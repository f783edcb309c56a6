#!/usr/bin/env bash
# What `make ARCH=s390` needs on an x86 host besides Debian's cross
# compiler (gcc-s390x-linux-gnu, libc6-dev-s390x-cross,
# linux-libc-dev-s390x-cross): liburing for s390x, unpacked from Debian's
# own s390x packages (the version of the installed liburing-dev) into a
# sysroot, and the API server's libmicrohttpd and jansson, cross-built
# there from Debian's source packages (scripts/api-deps-build.sh: Debian's
# s390x libmicrohttpd.a wants GnuTLS, which has no static archive).
# qemu-user-static runs the big-endian unit tests.
#
#   scripts/s390x-deps.sh --fetch   download the .debs into the cache (the
#                                   install step; needs the s390x foreign
#                                   architecture, which it adds as root)
#   scripts/s390x-deps.sh           unpack what is missing (never downloads);
#                                   prints the sysroot
# Everything lives under ${XDG_CACHE_HOME:-~/.cache}/mvm/s390x/.
set -euo pipefail
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mvm/s390x
ver=$(dpkg-query -W -f='${Version}' liburing-dev 2>/dev/null) || {
	echo "s390x: liburing-dev is not installed (make deps)" >&2
	exit 1
}
debs=$CACHE/debs-$ver
sysroot=$CACHE/sysroot-$ver

fetch() {
	ls "$debs"/liburing-dev_*_s390x.deb "$debs"/liburing2_*_s390x.deb >/dev/null 2>&1 && return 0
	if ! dpkg --print-foreign-architectures | grep -qx s390x; then
		[ "$(id -u)" -eq 0 ] || { echo "s390x: the s390x architecture is not enabled in dpkg and" \
			"this is not root; run 'make deps' as root" >&2; return 1; }
		dpkg --add-architecture s390x
		apt-get update -qq
	fi
	mkdir -p "$CACHE"
	local tmp
	tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX")
	trap 'rm -rf "$tmp"' RETURN
	echo "s390x: fetching liburing $ver for s390x into $debs" >&2
	(cd "$tmp" && apt-get -qq -o APT::Sandbox::User=root download \
		"liburing-dev:s390x=$ver" "liburing2:s390x=$ver" >/dev/null) ||
		{ echo "s390x: apt-get download liburing-dev:s390x=$ver failed (network? apt-get update?)" >&2
		  return 1; }
	mv -T "$tmp" "$debs"
	trap - RETURN
}

if [ "${1:-}" = --fetch ]; then
	fetch
	exit 0
fi
if [ ! -f "$sysroot/usr/lib/s390x-linux-gnu/liburing.a" ]; then
	ls "$debs"/*.deb >/dev/null 2>&1 || {
		echo "s390x: no liburing packages in $debs; run 'make deps' (it fetches them once)" >&2
		exit 1
	}
	tmp=$(mktemp -d "$CACHE/.sysroot.XXXXXX")
	for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$tmp"; done
	rm -rf "$sysroot"
	mv -T "$tmp" "$sysroot"
fi
if [ ! -f "$sysroot/usr/lib/s390x-linux-gnu/libmicrohttpd.a" ]; then
	echo "s390x: cross-building libmicrohttpd and jansson into $sysroot (once)" >&2
	tmp=$(mktemp -d "$CACHE/.api.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	"$(dirname "$0")/api-deps-build.sh" s390x-linux-gnu-gcc s390x-linux-gnu "$tmp/out" "$tmp" "-O2 -g" ||
		{ echo "s390x: building libmicrohttpd and jansson failed" >&2; exit 1; }
	cp "$tmp/out/include/"* "$sysroot/usr/include/"
	cp "$tmp/out/lib/"* "$sysroot/usr/lib/s390x-linux-gnu/"
fi
echo "$sysroot"
