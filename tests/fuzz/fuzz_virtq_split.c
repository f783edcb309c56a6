/* virtio-blk on a split ring (virtio 1.2 §2.7) under a fuzzed guest: the
 * rings, descriptors, buffers and the order and results of host I/O all
 * come from the input. See fuzz_blkq.h. */
#include "tests/fuzz/fuzz_blkq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return blkq_fuzz(data, size, false);
}

static void fuzz_seeds(void)
{
	blkq_seeds(false);
}
