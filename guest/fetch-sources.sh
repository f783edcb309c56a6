#!/usr/bin/env bash
# Install step for the test guest (called by scripts/install-deps.sh): fetch
# Debian's fio source package, the same version as the installed fio, into
# ${XDG_CACHE_HOME:-~/.cache}/mvm/src/, so that guest/build.sh can build a
# lean static fio without any download. Adds a deb-src entry for bookworm in
# its own file when none is configured (needs root). Does nothing when the
# source is already there. Without it guest/build.sh falls back to Debian's
# dynamically linked /usr/bin/fio.
set -euo pipefail
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/mvm
SRCLIST=/etc/apt/sources.list.d/mvm-deb-src.sources

ver=$(dpkg-query -W -f='${Version}' fio 2>/dev/null) || {
	echo "guest: fio is not installed; install it first (scripts/install-deps.sh)" >&2
	exit 1
}
dest=$CACHE/src/fio_$ver
[ -f "$dest/configure" ] && exit 0

have_deb_src() {
	grep -rqsE '^[[:space:]]*(deb-src[[:space:]]|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/
}
if ! have_deb_src; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "guest: no deb-src entry for apt and not root: cannot fetch the fio source;" \
			"guest/build.sh will use Debian's /usr/bin/fio (run 'make deps' as root to fix)" >&2
		exit 0
	fi
	cat >"$SRCLIST" <<-'SRC'
	# Added by mvm (guest/fetch-sources.sh): source packages, for a static fio in the test guest.
	Types: deb-src
	URIs: http://deb.debian.org/debian
	Suites: bookworm bookworm-updates
	Components: main
	Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	SRC
	apt-get update -qq
fi

mkdir -p "$CACHE/src"
tmp=$(mktemp -d "$CACHE/src/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "guest: fetching the fio $ver source package into $CACHE/src"
# As root apt downloads unsandboxed into this directory; say so up front
# instead of warning about it.
(cd "$tmp" && apt-get -qq -o APT::Sandbox::User=root source --only-source "fio=$ver" >/dev/null)
tree=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'fio-*' | head -n 1)
[ -n "$tree" ] && [ -f "$tree/configure" ] || { echo "guest: apt-get source fio=$ver gave no source tree" >&2; exit 1; }
# rename(2) is atomic: the cache never holds a half-extracted tree.
mv -T "$tree" "$dest" 2>/dev/null || [ -f "$dest/configure" ]
