#!/usr/bin/env bash
# make run: boot the test guest to its shell on this terminal (Ctrl-A x
# quits), with what mvm is for: a virtio-blk disk (a scratch raw image of
# 1 GiB, sparse) with 4 queues, on as many vCPUs as this host gives the
# guest (up to 4), and a quiet kernel. Arguments go to mvm after these
# (MVM_RUN_CMDLINE replaces 'quiet'). Runs directly when this host's
# /dev/kvm can run the guest (mvm --probe-kvm decides; MVM_KVM overrides),
# else under the nested harness, whose L1 has 4 vCPUs and sees this tree
# read-only: the image is then made on its scratch disk.
cd "$(dirname "$0")/.." || exit 1
cpus=4
case $(./mvm --probe-kvm 2>/dev/null) in
direct:*) n=$(nproc); [ "$n" -lt "$cpus" ] && cpus=$n ;;
esac
export MVM_RUN_CPUS=$cpus MVM_RUN_CMDLINE=${MVM_RUN_CMDLINE-quiet}
exec tests/with-kvm bash -c '
	img=${MVM_SCRATCH:-build}/run-disk.img
	[ -f "$img" ] || { mkdir -p "${img%/*}" && truncate -s 1G "$img"; } || exit 1
	ids=; [ "$(id -u)" = 0 ] && ids="--uid 0 --gid 0"   # root: explicitly (mvm --help)
	exec ./mvm $ids --cpus "$MVM_RUN_CPUS" --disk "$img,queues=4" --cmdline "$MVM_RUN_CMDLINE" "$@"
' run-guest "$@"
