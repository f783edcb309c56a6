#!/usr/bin/env bash
# What `make static` needs besides musl-gcc (Debian's musl-tools): the
# libraries mvm links, built with musl-gcc from Debian's source packages
# (the versions of the installed -dev packages): liburing, and for the API
# server libmicrohttpd (without HTTPS) and jansson; and the Linux UAPI
# headers (linux/, asm/, asm-generic/), which musl-gcc does not search.
#
#   scripts/musl-deps.sh --fetch   fetch the source packages into the cache
#                                  (the install step, scripts/install-deps.sh)
#   scripts/musl-deps.sh           build what is missing (never downloads);
#                                  prints the prefix: PREFIX/include,
#                                  PREFIX/lib/lib*.a, PREFIX/kernel-headers
# Everything lives under ${XDG_CACHE_HOME:-~/.cache}/mvm/, built once.
set -euo pipefail
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mvm

# source package, -dev package: one per library.
libs=(liburing:liburing-dev libmicrohttpd:libmicrohttpd-dev jansson:libjansson-dev)
declare -A ver
id=
for l in "${libs[@]}"; do
	srcpkg=${l%%:*} dev=${l#*:}
	ver[$srcpkg]=$(dpkg-query -W -f='${Version}' "$dev" 2>/dev/null) || {
		echo "static: $dev is not installed (make deps)" >&2
		exit 1
	}
	id+="${id:++}$srcpkg-${ver[$srcpkg]}"
done
prefix=$CACHE/musl/$id

# fetch SRCPKG: its source tree into $CACHE/src/SRCPKG_VERSION, once.
fetch() {
	local pkg=$1 v=${ver[$1]} src=$CACHE/src/${1}_${ver[$1]} tmp tree
	[ -f "$src/debian/control" ] && return 0
	# guest/fetch-sources.sh configured apt's deb-src entry for the fio source.
	mkdir -p "$CACHE/src"
	tmp=$(mktemp -d "$CACHE/src/.fetch.XXXXXX")
	trap 'rm -rf "$tmp"' RETURN
	echo "static: fetching the $pkg $v source package into $CACHE/src" >&2
	(cd "$tmp" && apt-get -qq -o APT::Sandbox::User=root source --only-source "$pkg=$v" >/dev/null) ||
		{ echo "static: apt-get source $pkg=$v failed (deb-src entry? network?)" >&2; return 1; }
	tree=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name "$pkg-*" | head -n 1)
	[ -n "$tree" ] && [ -f "$tree/debian/control" ] ||
		{ echo "static: apt-get source $pkg=$v gave no source tree" >&2; return 1; }
	mv -T "$tree" "$src" 2>/dev/null || [ -f "$src/debian/control" ]
}

if [ "${1:-}" = --fetch ]; then
	for l in "${libs[@]}"; do fetch "${l%%:*}"; done
	exit 0
fi
command -v musl-gcc >/dev/null || { echo "static: musl-gcc not found (install musl-tools: make deps)" >&2; exit 1; }
for l in "${libs[@]}"; do
	p=${l%%:*}
	[ -f "$CACHE/src/${p}_${ver[$p]}/debian/control" ] || {
		echo "static: no $p source in $CACHE/src; run 'make deps' (it fetches it once)" >&2
		exit 1
	}
done
[ -f "$prefix/lib/liburing.a" ] && [ -f "$prefix/lib/libmicrohttpd.a" ] &&
	[ -f "$prefix/lib/libjansson.a" ] && [ -e "$prefix/kernel-headers/linux" ] &&
	{ echo "$prefix"; exit 0; }

echo "static: building liburing, libmicrohttpd and jansson with musl-gcc into $prefix (once)" >&2
mkdir -p "$CACHE/musl"
tmp=$(mktemp -d "$CACHE/musl/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out
mkdir -p "$out/kernel-headers" "$out/include" "$out/lib"
ln -s /usr/include/linux "$out/kernel-headers/linux"
ln -s /usr/include/asm-generic "$out/kernel-headers/asm-generic"
ln -s "/usr/include/$(gcc -print-multiarch)/asm" "$out/kernel-headers/asm"
cflags="-O2 -g -isystem $out/kernel-headers -D_GNU_SOURCE"

# build NAME CMD...: run CMD in NAME's copied tree, its log kept for a failure.
build() {
	local name=$1; shift
	[ -d "$tmp/$name" ] || cp -a "$CACHE/src/${name}_${ver[$name]}" "$tmp/$name"
	(cd "$tmp/$name" && "$@") >>"$tmp/$name.log" 2>&1 ||
		{ tail -n 30 "$tmp/$name.log" >&2; echo "static: building $name failed" >&2; exit 1; }
}

build liburing ./configure --cc=musl-gcc
build liburing make -C src -j"$(nproc)" CC=musl-gcc CFLAGS="$cflags" liburing.a
cp "$tmp/liburing/src/liburing.a" "$out/lib/"
cp -a "$tmp/liburing/src/include/." "$out/include/"

"$(dirname "$0")/api-deps-build.sh" musl-gcc "" "$out" "$tmp" "$cflags" ||
	{ echo "static: building libmicrohttpd and jansson failed" >&2; exit 1; }

rm -rf "$prefix"
mv -T "$out" "$prefix"
echo "$prefix"
