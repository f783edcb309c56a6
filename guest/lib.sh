# Shared by guest/build.sh (x86 test guest) and guest/build-s390.sh (s390x):
# logging, the content-keyed cache, the kernel configuration from a
# fragment, and fio's static build. Sourced; the caller sets CACHE (the
# cache folder) and JOBS, and GUEST_DIR (this folder).

# fio: only the engines the tests use need to work (psync, libaio,
# io_uring); everything that would pull in extra libraries is off.
FIO_CONFIGURE=(--build-static --disable-native --disable-numa --disable-rdma
	--disable-rados --disable-rbd --disable-http --disable-gfapi --disable-pmem
	--disable-xnvme --disable-libzbc --disable-tcmalloc --disable-dfs
	--disable-libnfs --disable-lex)

log() { echo "guest: $*" >&2; }
fail() { echo "guest: error: $*" >&2; exit 1; }

pkg_version() {
	dpkg-query -W -f='${Version}' "$1" 2>/dev/null ||
		fail "Debian package $1 is not installed; run 'make deps' as root"
}

key() { sha256sum | cut -c1-16; }

# Temporary folders live inside the cache (same file system, so the final
# rename is atomic) and go away on any exit; those of a killed build go at
# the start of the next one (builds hold a lock on the cache).
TMPS=()
cleanup() { [ ${#TMPS[@]} -eq 0 ] || rm -rf "${TMPS[@]}"; }
trap cleanup EXIT
# new_tmp NAME: set TMP to a new temporary folder.
new_tmp() {
	TMP=$(mktemp -d "$CACHE/.tmp-$1.XXXXXX")
	TMPS+=("$TMP")
}

# publish DIR ENTRY: make a finished DIR the cache ENTRY. rename(2) onto an
# existing non-empty folder fails: then a concurrent build won; keep its.
publish() {
	find "$1" -type f -exec chmod a-w {} +
	mv -T "$1" "$2" 2>/dev/null || [ -d "$2" ] || fail "cannot move $1 to $2"
}

# run_logged LOG CMD...: run quietly; on failure show the end of the log.
run_logged() {
	local logf=$1; shift
	if ! "$@" >"$logf" 2>&1; then
		tail -n 40 "$logf" >&2
		fail "'$*' failed (full log above; the temporary folder is removed)"
	fi
}

# ---------------------------------------------------------------- kernel --

# verify_config CONFIG FRAGMENT: every option of FRAGMENT must be in the
# final configuration exactly as written (olddefconfig silently drops
# options whose dependencies are missing).
verify_config() {
	local line k v bad=0
	while IFS= read -r line; do
		case $line in '' | '#'*) continue ;; esac
		k=${line%%=*} v=${line#*=}
		if [ "$v" = n ]; then
			grep -q "^$k=" "$1" || continue
		else
			grep -qxF -- "$line" "$1" && continue
		fi
		echo "guest: kernel option did not stick: want $line, got: $(grep -E "^(# )?$k[= ]" "$1" || echo unset)" >&2
		bad=1
	done <"$2"
	[ $bad -eq 0 ] || fail "$2 does not apply (missing dependencies?); fix the options above"
}

# kernel_configure TMP FRAGMENT MAKE_ARGS...: Debian's Linux 6.1 source
# unpacked into TMP/linux-source-6.1 and configured: tinyconfig, then
# FRAGMENT, then olddefconfig, then checked. MAKE_ARGS (ARCH=,
# CROSS_COMPILE=) go to every make.
kernel_configure() {
	local tmp=$1 frag=$2 src=$1/linux-source-6.1
	shift 2
	tar -xJf "$KSRC_TAR" -C "$tmp"
	# More than 32 words after " -- " would panic the kernel ("Too many boot
	# init vars"); the limit has no prompt, so raise its default. /init gets
	# long shell command lines that way.
	sed -i 's/^\tdefault 32 if !UML$/\tdefault 256 if !UML/' "$src/init/Kconfig"
	run_logged "$tmp/config.log" make -C "$src" "$@" tinyconfig
	grep -v -E '^[[:space:]]*(#|$)' "$frag" >>"$src/.config"
	run_logged "$tmp/config.log" make -C "$src" "$@" olddefconfig
	verify_config "$src/.config" "$frag"
}

# ------------------------------------------------------------------- fio --

# fio: only the engines the tests use need to work (psync, libaio,
# io_uring); everything that would pull in extra libraries is off.
FIO_CONFIGURE=(--build-static --disable-native --disable-numa --disable-rdma
	--disable-rados --disable-rbd --disable-http --disable-gfapi --disable-pmem
	--disable-xnvme --disable-libzbc --disable-tcmalloc --disable-dfs
	--disable-libnfs --disable-lex)

# build_fio SRC TMP [CROSS RUNNER]: a static fio from Debian's source
# package into TMP/out. CROSS (s390x-linux-gnu-) cross-compiles it and
# RUNNER (qemu-s390x-static) runs it for the check; a cross build has no
# libaio engine (there is no foreign libaio to link), psync and io_uring
# need no library.
build_fio() {
	local tmp=$2 cross=${3:-} runner=${4:-} cc=()
	log "building a static ${cross}fio from $1"
	[ -z "$cross" ] || cc=(--cc="${cross}gcc")
	cp -a "$1" "$tmp/fio"
	run_logged "$tmp/fio.log" sh -c 'cd "$1" && shift && ./configure "$@"' sh "$tmp/fio" \
		"${FIO_CONFIGURE[@]}" "${cc[@]}"
	run_logged "$tmp/fio.log" make -C "$tmp/fio" -j"$JOBS" fio
	mkdir "$tmp/out"
	"${cross}strip" -o "$tmp/out/fio" "$tmp/fio/fio"
	$runner "$tmp/out/fio" --enghelp | grep -qw io_uring || fail "the fio built has no io_uring engine"
	[ -n "$cross" ] || "$tmp/out/fio" --enghelp | grep -qw libaio ||
		fail "the fio built has no libaio engine"
	rm -rf "$tmp/fio"
}
