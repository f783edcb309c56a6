#!/usr/bin/env bash
# virtio-blk over virtio-mmio, 4 queues on 4 vCPUs, split ring (packed=off):
# blk-mq sees 4 hardware queues, fio randwrite+verify passes with a job on
# every vCPU; the ro disk stays ro.
. "$(dirname "$0")/lib.sh"
blk_fio_check 4 0 ",packed=off" --transport mmio
