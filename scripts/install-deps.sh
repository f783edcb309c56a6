#!/usr/bin/env bash
# Install the Debian 12 packages that building mvm, the test guest and the
# tests need, when any is missing. Needs root (apt-get); does nothing when
# everything is present.
set -euo pipefail
pkgs=(
	gcc make libc6-dev linux-libc-dev pkg-config  # build
	liburing-dev libfdt-dev                       # mvm's libraries
	libmicrohttpd-dev libjansson-dev              # the API server (HTTP, JSON)
	libcurl4-openssl-dev                          # mvm-remote, the API socket's client (HTTP)
	linux-source-6.1 flex bison bc libelf-dev libssl-dev xz-utils cpio dwarves  # guest kernel
	busybox-static fio e2fsprogs kmod            # guest userland, images
	dpkg-dev libaio-dev zlib1g-dev                # guest: static fio from Debian's source package
	qemu-system-x86 zstd                          # nested harness (no KVM that runs Linux)
	musl-tools                                    # make static
	gcc-s390x-linux-gnu libc6-dev-s390x-cross linux-libc-dev-s390x-cross  # make ARCH=s390
	qemu-user-static                              # s390x unit tests (big-endian)
	clang libclang-rt-14-dev                      # fuzz targets: clang, libFuzzer + sanitizer runtimes (only Recommended by clang)
	hercules                                      # s390x system tests (s390 KVM in L1)
	python3 procps util-linux
	socat                                         # a stock hybrid-vsock client (system/vsock_many, make bench-vsock)
	curl                                          # the API's system tests, as Cloud Hypervisor's users drive it
)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# The test guest's static fio is built from Debian's fio source package,
# fetched here (once, into the cache) so that building never downloads.
# The nested harness's L1 kernel (a Debian package) is fetched here too,
# once, unless MVM_KVM=direct says it will not be needed: whether this
# host's /dev/kvm can run the guest is only known once mvm is built (its
# behavioural probe, mvm --probe-kvm), and a /dev/kvm that opens may still
# be one that cannot run Linux (PVM).
fetch_guest_sources() {
	"$(dirname "$0")/../guest/fetch-sources.sh"
	"$(dirname "$0")/musl-deps.sh" --fetch
	"$(dirname "$0")/s390x-deps.sh" --fetch
	"$(dirname "$0")/../tests/s390/run" --prepare
	if [ "${MVM_KVM:-auto}" != direct ]; then
		"$(dirname "$0")/../tests/nested/run" --prepare
	fi
}
[ ${#missing[@]} -eq 0 ] && { fetch_guest_sources; exit 0; }
if [ "$(id -u)" -ne 0 ]; then
	echo "mvm: missing packages: ${missing[*]}; run 'make deps' as root or install them with apt-get" >&2
	exit 1
fi
echo "mvm: installing missing packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fetch_guest_sources
