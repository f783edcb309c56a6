#!/usr/bin/env bash
# virtio-blk over virtio-pci, split ring (packed=off), 2 queues on 2 vCPUs:
# fio randwrite+verify passes and both queues' MSI-X vectors count.
. "$(dirname "$0")/lib.sh"
blk_fio_check 2 0 ",packed=off" --transport pci
