#!/usr/bin/env bash
# mvm-test: long
# virtio-blk over virtio-pci (the default) with the packed ring (offered by
# default), 2 queues on 2 vCPUs: the
# guest has one MSI-X vector per queue and each counts under fio; fio
# randwrite+verify passes; the ro disk stays ro.
. "$(dirname "$0")/lib.sh"
blk_fio_check 2 1 ""
