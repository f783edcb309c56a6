#!/usr/bin/env bash
# The API server's libraries, libmicrohttpd (without HTTPS) and jansson,
# built as static archives from Debian's source packages (fetched into the
# cache by scripts/musl-deps.sh --fetch), for a build whose C library or
# architecture Debian's own archives do not serve: make static (musl) and
# make ARCH=s390 (cross). Never downloads.
#
#   scripts/api-deps-build.sh CC HOST OUT WORK CFLAGS
#
# CC: the compiler; HOST: configure's --host ("" for the build machine's);
# OUT: gets include/ and lib/ (lib{microhttpd,jansson}.a); WORK: scratch.
set -euo pipefail
cc=$1 host=$2 out=$3 work=$4 cflags=$5
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mvm
mkdir -p "$out/include" "$out/lib" "$work"

src() {
	local v
	v=$(dpkg-query -W -f='${Version}' "$2")
	[ -f "$CACHE/src/${1}_$v/debian/control" ] ||
		{ echo "api-deps: no $1 $v source in $CACHE/src; run 'make deps'" >&2; exit 1; }
	echo "$CACHE/src/${1}_$v"
}

# build NAME CMD...: CMD in NAME's copied tree, its log shown on failure.
build() {
	local name=$1; shift
	(cd "$work/$name" && "$@") >>"$work/$name.log" 2>&1 ||
		{ tail -n 30 "$work/$name.log" >&2; echo "api-deps: building $name failed" >&2; exit 1; }
}

# jansson's source package has no configure: its few files, compiled with
# what its configure would find on Linux.
rm -rf "$work/jansson"
cp -a "$(src jansson libjansson-dev)" "$work/jansson"
build jansson sh -c "sed -e 's/@json_inline@/inline/; s/@json_have_long_long@/1/' \
	-e 's/@json_have_localeconv@/1/; s/@json_have_atomic_builtins@/1/' \
	-e 's/@json_have_sync_builtins@/1/' src/jansson_config.h.in >src/jansson_config.h"
build jansson sh -c 'for d in HAVE_STDINT_H HAVE_UNISTD_H HAVE_SYS_TYPES_H HAVE_SYS_STAT_H \
	HAVE_SYS_TIME_H HAVE_FCNTL_H HAVE_SCHED_H HAVE_SCHED_YIELD HAVE_GETPID HAVE_GETTIMEOFDAY \
	HAVE_OPEN HAVE_READ HAVE_CLOSE USE_URANDOM HAVE_LOCALECONV HAVE_ATOMIC_BUILTINS \
	HAVE_SYNC_BUILTINS; do echo "#define $d 1"; done >src/jansson_private_config.h'
build jansson sh -c "cd src && for f in *.c; do $cc $cflags -DHAVE_CONFIG_H=1 -I. -c \$f || exit 1; done &&
	${host:+$host-}ar rcs libjansson.a *.o"
cp "$work/jansson/src/libjansson.a" "$out/lib/"
cp "$work/jansson/src/jansson.h" "$work/jansson/src/jansson_config.h" "$out/include/"

# HTTP/1.1 over a Unix socket: no TLS, no authentication (digest wants a
# random source), no upgrade, no form parsing: the daemon alone.
rm -rf "$work/libmicrohttpd"
cp -a "$(src libmicrohttpd libmicrohttpd-dev)" "$work/libmicrohttpd"
build libmicrohttpd ./configure ${host:+--host=$host} CC="$cc" CFLAGS="$cflags" \
	--disable-shared --enable-static --disable-https --without-gnutls --disable-curl \
	--disable-doc --disable-examples --disable-dauth --disable-bauth --disable-httpupgrade \
	--disable-postprocessor --disable-epoll --disable-nls
build libmicrohttpd make -C src/microhttpd -j"$(nproc)"
cp "$work/libmicrohttpd/src/microhttpd/.libs/libmicrohttpd.a" "$out/lib/"
cp "$work/libmicrohttpd/src/include/microhttpd.h" "$out/include/"
