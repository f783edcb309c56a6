/* virtio-blk internals shared by the device (virtio_blk.c) and the
 * per-queue engine (blk_queue.c). Not for other modules. */
#ifndef MVM_BLK_QUEUE_H
#define MVM_BLK_QUEUE_H

#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "devices/blk_image.h"
#include "devices/blk_req.h"
#include "devices/virtio.h"
#include "devices/virtio_blk.h"

/* One request slot, indexed by the chain's head descriptor. */
struct blk_slot {
	struct blk_req req;        /* validated copy; iov advanced on short I/O */
	bool busy;
	unsigned iov_first;        /* first iov entry not yet fully transferred */
	uint64_t off;              /* file offset of what is left */
	uint64_t left;             /* bytes left */
	uint32_t used_len;         /* reported to the driver on success */
	bool buffered;             /* retried on the non-O_DIRECT fd */
	bool punch;                /* write zeroes through PUNCH_HOLE */
};

struct blk_dev;

/* A block backend: how a request's host I/O is issued on the queue's
 * io_uring and how its completion is read. One const table per backend;
 * the device has the file backend unless blk_set_backend() chose another
 * (tests and the benchmark: a null backend, fault injection). */
struct blk_backend_ops {
	const char *name;
	/* Fill sqe with slot s's remaining I/O. file is the index of the
	 * image in the ring's registered files (0: the main fd, 1: the
	 * buffered fallback); the device adds IOSQE_FIXED_FILE unless the
	 * sqe is a NOP. */
	void (*prep)(const struct blk_slot *s, int file, struct io_uring_sqe *sqe);
	/* The completion's result (bytes or -errno) for slot s on queue q,
	 * before the device acts on it; returns what the device should see.
	 * NULL: the result as it is. On the queue's thread. */
	int (*complete)(void *arg, unsigned q, const struct blk_slot *s, int res);
};

/* Reads and writes (READ/WRITE for one segment, READV/WRITEV otherwise),
 * fsync, and fallocate for discard and write-zeroes, on the image. */
extern const struct blk_backend_ops blk_file_backend;

struct blk_queue {
	struct blk_dev *blk;
	unsigned idx;
	struct virtq *vq;          /* owned by the thread while running */
	int kick_fd;               /* dev->queues[idx].kick_fd */
	int stop_fd;               /* eventfd: queue_stop -> thread */
	struct io_uring ring;
	bool ring_ok;
	struct blk_slot *slots;    /* vq->size entries */
	unsigned nslots;
	unsigned inflight;         /* slots with host I/O outstanding */
	unsigned pushed;           /* used entries not yet published */
	bool kick_pending;         /* a kick read/poll is outstanding */
	bool broken;               /* guest broke the ring: stop consuming */
	bool more;                 /* drain stopped at its budget: come back */
	bool stopping;
	bool worked;               /* the last drain popped something (for polling) */
	uint64_t kick_buf, stop_buf;
	struct blk_req_ctx ctx;
	pthread_t thread;
	bool thread_started;
	struct virtq_chain chain;  /* scratch for virtq_pop */
	struct blk_queue_stats st; /* written by the thread only (relaxed atomics) */
};

struct blk_dev {
	struct virtio_dev vdev;
	struct blk_opts opts;
	struct blk_image img;
	uint64_t capacity;         /* sectors */
	bool flush_failed;         /* atomic, sticky: a failed fsync fails later flushes */
	uint8_t config[sizeof(struct virtio_blk_config)];   /* little-endian */
	struct blk_queue *queues;  /* vdev.num_queues */
	const struct blk_backend_ops *backend;   /* blk_file_backend by default */
	void *backend_arg;
};

int blk_queue_start(struct blk_dev *blk, unsigned q);
void blk_queue_stop(struct blk_dev *blk, unsigned q);

#endif
