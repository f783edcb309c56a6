/* The null block backend (mvm-bench, tests): the device's whole request
 * path, but reads, writes and flushes go to io_uring as IORING_OP_NOP, so
 * what is measured is the device's own cost. Discard and write-zeroes use
 * the file backend. */
#ifndef MVM_TESTS_BLK_NULL_H
#define MVM_TESTS_BLK_NULL_H

#include "devices/blk_queue.h"

static inline void blk_null_prep(const struct blk_slot *s, int file, struct io_uring_sqe *sqe)
{
	switch (s->req.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
	case VIRTIO_BLK_T_FLUSH:
		io_uring_prep_nop(sqe);
		break;
	default:
		blk_file_backend.prep(s, file, sqe);
		break;
	}
}

/* A NOP completes with 0: it stands for a complete transfer. */
static inline int blk_null_complete(void *arg, unsigned q, const struct blk_slot *s, int res)
{
	(void)arg;
	(void)q;
	if (res == 0 && (s->req.type == VIRTIO_BLK_T_IN || s->req.type == VIRTIO_BLK_T_OUT))
		return (int)s->left;
	return res;
}

static const struct blk_backend_ops blk_null_backend = {
	.name = "null",
	.prep = blk_null_prep,
	.complete = blk_null_complete,
	.sqe_ops = BLK_FILE_SQE_OPS | (1ULL << IORING_OP_NOP),
};

#endif
