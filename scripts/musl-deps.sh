#!/usr/bin/env bash
# What `make static` needs besides musl-gcc (Debian's musl-tools): liburing
# built with musl-gcc from Debian's liburing source package (the version of
# the installed liburing-dev), and the Linux UAPI headers (linux/, asm/,
# asm-generic/), which musl-gcc does not search.
#
#   scripts/musl-deps.sh --fetch   fetch the source package into the cache
#                                  (the install step, scripts/install-deps.sh)
#   scripts/musl-deps.sh           build what is missing (never downloads);
#                                  prints the prefix: PREFIX/include,
#                                  PREFIX/lib/liburing.a, PREFIX/kernel-headers
# Everything lives under ${XDG_CACHE_HOME:-~/.cache}/mvm/, built once.
set -euo pipefail
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mvm
ver=$(dpkg-query -W -f='${Version}' liburing-dev 2>/dev/null) || {
	echo "static: liburing-dev is not installed (make deps)" >&2
	exit 1
}
src=$CACHE/src/liburing_$ver
prefix=$CACHE/musl/liburing-$ver

fetch() {
	[ -f "$src/configure" ] && return 0
	# guest/fetch-sources.sh configured apt's deb-src entry for the fio source.
	mkdir -p "$CACHE/src"
	local tmp tree
	tmp=$(mktemp -d "$CACHE/src/.fetch.XXXXXX")
	trap 'rm -rf "$tmp"' RETURN
	echo "static: fetching the liburing $ver source package into $CACHE/src" >&2
	(cd "$tmp" && apt-get -qq -o APT::Sandbox::User=root source --only-source "liburing=$ver" >/dev/null) ||
		{ echo "static: apt-get source liburing=$ver failed (deb-src entry? network?)" >&2; return 1; }
	tree=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'liburing-*' | head -n 1)
	[ -n "$tree" ] && [ -f "$tree/configure" ] ||
		{ echo "static: apt-get source liburing=$ver gave no source tree" >&2; return 1; }
	mv -T "$tree" "$src" 2>/dev/null || [ -f "$src/configure" ]
}

if [ "${1:-}" = --fetch ]; then
	fetch
	exit 0
fi
command -v musl-gcc >/dev/null || { echo "static: musl-gcc not found (install musl-tools: make deps)" >&2; exit 1; }
[ -f "$src/configure" ] || {
	echo "static: no liburing source in $src; run 'make deps' (it fetches it once)" >&2
	exit 1
}
if [ ! -f "$prefix/lib/liburing.a" ] || [ ! -e "$prefix/kernel-headers/linux" ]; then
	echo "static: building liburing $ver with musl-gcc into $prefix (once)" >&2
	mkdir -p "$CACHE/musl"
	tmp=$(mktemp -d "$CACHE/musl/.build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp/out/kernel-headers" "$tmp/out/include" "$tmp/out/lib"
	ln -s /usr/include/linux "$tmp/out/kernel-headers/linux"
	ln -s /usr/include/asm-generic "$tmp/out/kernel-headers/asm-generic"
	ln -s "/usr/include/$(gcc -print-multiarch)/asm" "$tmp/out/kernel-headers/asm"
	cp -a "$src" "$tmp/src"
	(cd "$tmp/src" && ./configure --cc=musl-gcc >"$tmp/configure.log" 2>&1 &&
		make -C src -j"$(nproc)" CC=musl-gcc \
			CFLAGS="-O2 -g -isystem $tmp/out/kernel-headers -D_GNU_SOURCE" liburing.a \
			>"$tmp/make.log" 2>&1) ||
		{ tail -n 20 "$tmp/configure.log" "$tmp/make.log" >&2; echo "static: building liburing failed" >&2; exit 1; }
	cp "$tmp/src/src/liburing.a" "$tmp/out/lib/"
	cp -a "$tmp/src/src/include/." "$tmp/out/include/"
	rm -rf "$prefix"
	mv -T "$tmp/out" "$prefix"
fi
echo "$prefix"
