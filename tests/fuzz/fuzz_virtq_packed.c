/* virtio-blk on a packed ring (virtio 1.2 §2.8) under a fuzzed guest: the
 * descriptor ring with its wrap bits, the event suppression structures,
 * buffers and the order and results of host I/O all come from the input.
 * See fuzz_blkq.h. */
#include "tests/fuzz/fuzz_blkq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return blkq_fuzz(data, size, true);
}

static void fuzz_seeds(void)
{
	blkq_seeds(true);
}
