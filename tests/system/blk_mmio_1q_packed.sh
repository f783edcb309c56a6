#!/usr/bin/env bash
# virtio-blk over virtio-mmio (the default transport), 1 queue, packed ring
# (offered by default): fio randwrite+verify passes; the ro disk stays ro.
# A second variant: mmio has blk_mmio_4q_split, the packed ring the
# snapshot test's disk (virtio-pci), in make test.
# mvm-test: long
. "$(dirname "$0")/lib.sh"
blk_fio_check 1 1 ",transport=mmio"
