#!/usr/bin/env bash
# virtio-blk over virtio-pci, split ring (packed=off), 2 queues on 2 vCPUs:
# fio randwrite+verify passes and both queues' MSI-X vectors count. With
# guest RAM registered as io_uring fixed buffers (fixed-buffers=on), which
# the guest's one-segment requests use.
. "$(dirname "$0")/lib.sh"
blk_fio_check 2 0 ",packed=off,fixed-buffers=on" --transport pci
