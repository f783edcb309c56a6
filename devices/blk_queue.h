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
#include "devices/ratelim.h"
#include "devices/virtio.h"
#include "devices/virtio_blk.h"
#include "devices/virtq_worker.h"

/* Host work a queue may have in flight, in bytes of data (reads,
 * writes) and of range (discard, write-zeroes): past it, requests wait in
 * the ring. At least two of the largest requests (BLK_SEG_MAX segments
 * of BLK_SIZE_MAX), so that one alone never waits. */
#define BLK_QUEUE_BUDGET (256ULL << 20)
/* Tries of a request's host I/O that the host refused for now (-EAGAIN,
 * -EINTR, -ENOMEM, -EBUSY), with vqw_retry_later's growing waits. */
#define BLK_RETRY_MAX 8

/* Data segments a slot holds itself: a request with more has them in
 * its queue's overflow array for its head. Slots stay small, so the pages
 * a queue touches follow its queue depth, not the guest's seg_max. */
#define BLK_SLOT_IOV 4

/* One request slot, indexed by the chain's head descriptor. */
struct blk_slot {
	struct blk_req req;        /* validated copy; req.iov: iov below or the
				    * overflow, advanced on short I/O */
	bool busy;
	unsigned iov_first;        /* first iov entry not yet fully transferred */
	uint64_t off;              /* file offset of what is left */
	uint64_t left;             /* bytes left */
	uint32_t used_len;         /* reported to the driver on success */
	bool buffered;             /* retried on the non-O_DIRECT fd */
	bool punch;                /* write zeroes through PUNCH_HOLE */
	uint8_t retries;           /* transient failures retried (BLK_RETRY_MAX) */
	uint64_t cost;             /* its bytes of the queue's budget (0: none) */
	uint64_t rate_since;       /* when the rate limits first held it (ns), or 0 */
	bool rate_paid;            /* its tokens are taken (ratelim_take's reserve) */
	int fixed;                 /* one segment: its registered buffer, or -1 */
	struct iovec iov[BLK_SLOT_IOV];
};

struct blk_dev;

/* A block backend: how a request's host I/O is issued on the queue's
 * io_uring and how its completion is read. One const table per backend;
 * the device has the file backend unless blk_dev_new_backend() chose another
 * (tests and the benchmark: a null backend, fault injection). */
struct blk_backend_ops {
	const char *name;
	/* Fill sqe with slot s's remaining I/O. file is the index of the
	 * image in the ring's registered files (0: the main fd, 1: the
	 * buffered fallback); the device adds IOSQE_FIXED_FILE unless the
	 * sqe is a NOP. s->fixed >= 0: its one segment lies in that
	 * registered buffer (READ_FIXED / WRITE_FIXED may use it). */
	void (*prep)(const struct blk_slot *s, int file, struct io_uring_sqe *sqe);
	/* The completion's result (bytes or -errno) for slot s on queue q,
	 * before the device acts on it; returns what the device should see.
	 * NULL: the result as it is. On the queue's thread. */
	int (*complete)(void *arg, unsigned q, const struct blk_slot *s, int res);
	/* Every IORING_OP_* prep may use, a bit each: the queue's ring
	 * refuses the others (vqw_set_io). */
	uint64_t sqe_ops;
};

/* The registered files of a disk's rings: the image, and its buffered
 * twin with cache=none (-1 when there is none). */
#define BLK_FILES 2

#define BLK_FILE_SQE_OPS ((1ULL << IORING_OP_READ) | (1ULL << IORING_OP_WRITE) | \
			  (1ULL << IORING_OP_READV) | (1ULL << IORING_OP_WRITEV) | \
			  (1ULL << IORING_OP_READ_FIXED) | (1ULL << IORING_OP_WRITE_FIXED) | \
			  (1ULL << IORING_OP_FSYNC) | (1ULL << IORING_OP_FALLOCATE))

/* Reads and writes (READ/WRITE for one segment, READ_FIXED/WRITE_FIXED
 * where it lies in registered guest RAM, READV/WRITEV otherwise),
 * fsync, and fallocate for discard and write-zeroes, on the image. */
extern const struct blk_backend_ops blk_file_backend;

/* One I/O thread of the device: a worker (thread, io_uring, kicks,
 * draining, publishing: devices/virtq_worker.c) serving the queues q with
 * q % nworkers == its index. */
struct blk_worker {
	struct vqw w;
	bool up;                   /* vqw_init ran (and vqw_fini has not) */
};

/* One virtqueue of the device and its request slots. */
struct blk_queue {
	struct blk_dev *blk;
	unsigned idx;
	struct vqw_queue *wq;      /* its place in its worker */
	bool prepared;             /* slots in use (queue_start ran) */
	bool started;              /* queue_prepare succeeded since the last stop */
	struct blk_slot *slots;    /* vq->size entries, indexed by chain head */
	struct iovec *big_iov;     /* BLK_SEG_MAX per head: longer requests' segments */
	unsigned nslots;
	/* Slots with host I/O outstanding: written by the worker (release),
	 * read by the owner at start and stop (acquire: seeing 0, it sees the
	 * slots' last writes too). */
	unsigned inflight;
	struct blk_req_ctx ctx;
	uint64_t budget_used;      /* bytes of host work in flight (worker) */
	int waiting;               /* a slot waiting for the budget, or -1 (worker) */
	int rate_waiting;          /* a slot waiting for rate-limit tokens, or -1 (worker) */
	uint16_t rate_seq;         /* its current wait (older ones are stale) */
	/* Written by the worker's thread only (relaxed atomics). */
	uint64_t errors, bytes_read, bytes_written, budget_waits, rate_delayed, rate_wait_ns;
	uint64_t read_ops, write_ops;
	/* What blk_req_parse fills, before the segments go to their slot. */
	struct iovec parse_iov[BLK_SEG_MAX];
};

struct blk_dev {
	struct virtio_dev vdev;
	struct mvm_disk opts;      /* as given, checked (mvm_add_disk: kv_check) */
	/* opts.path points into one of these (blk_swap_image writes the other
	 * and moves opts.path, atomic: --stats reads it from any thread),
	 * opts.serial into serial: ours. */
	char path[2][BLK_PATH_MAX];
	char serial[BLK_SERIAL_MAX + 1];
	char id[MVM_DISK_ID_MAX + 1];      /* what the VM names it (--stats) */
	struct blk_image img;
	uint64_t capacity;         /* sectors */
	bool flush_failed;         /* atomic, sticky: a failed fsync fails later flushes */
	bool fixed_warned;         /* fixed-buffers could not register: said once (atomic) */
	uint8_t config[sizeof(struct virtio_blk_config)];   /* little-endian */
	struct blk_queue *queues;  /* vdev.num_queues */
	struct blk_worker *workers;   /* nworkers: the device's I/O threads */
	unsigned nworkers;
	void *slot_mem;            /* every queue's slots: blk_slots_alloc */
	size_t slot_stride;        /* bytes per queue in slot_mem */
	size_t slot_big_off;       /* where a queue's overflow arrays start in it */
	size_t slot_len;           /* the whole mapping */
	/* Its own rate limits (always there, so that they can be set at run
	 * time) and its group's, or NULL (the VM holds the group). */
	struct ratelim rate;
	bool rate_up;
	struct ratelim *group;
	const struct blk_backend_ops *backend;   /* blk_file_backend by default */
	void *backend_arg;
};

/* Every queue's request slots (BLK_QUEUE_SIZE_MAX each, then their
 * overflow segment arrays), in one mapping
 * made with the device (on the thread that creates it): queue start and
 * stop run on a vCPU thread and then allocate nothing. A malloc there
 * would give that thread a glibc arena of its own, whose first touch
 * takes a 2 MiB huge page where THP is "always". Pages are touched only
 * as slots are used and given back when their queue stops. 0 or -ENOMEM. */
int blk_slots_alloc(struct blk_dev *blk);
void blk_slots_free(struct blk_dev *blk);

/* The device's I/O threads for its options: io_threads, or (0) one per
 * queue up to the CPUs this process may run on; never more than queues. */
unsigned blk_io_threads(const struct mvm_disk *o);

/* The device's workers (its I/O threads) and their rings, with the
 * device: queue q is served by worker q % nworkers. 0 or -errno. */
int blk_workers_init(struct blk_dev *blk);
/* Their threads, before any vCPU runs; on failure none is left. */
int blk_workers_launch(struct blk_dev *blk);
/* End the threads; their counters stay (the VM's stop, before --stats). */
void blk_workers_end(struct blk_dev *blk);
/* End them where needed and free the rings and counters (idempotent). */
void blk_workers_fini(struct blk_dev *blk);

/* Swap the disk's backing image for img (opened with the disk's
 * options; taken over on success, untouched on failure), while the VM is
 * paused (its vCPUs out of the transport, its workers quiesced): each I/O
 * thread puts the new files in its ring's slots (vqw_set_files: a
 * register call of the thread's own, which installs descriptors the
 * process holds and opens nothing, so it is allowed under the queue
 * filter), and the queues go on where they were, a request waiting for
 * rate tokens included; then the new capacity, and the guest gets a
 * configuration-change interrupt (virtio 1.2 section 5.2.2: capacity may
 * change). Refused, with nothing changed, for an image that cannot give
 * what the driver was offered (read-only against read-write, no discard
 * where discard was offered). path: the new image's, for messages and
 * statistics. 0 or -errno with a message. */
int blk_swap_image(struct blk_dev *blk, struct blk_image *img, const char *path, char *err,
		   size_t errlen);
/* The capacity from the image's size, for the device and each queue;
 * the queues quiesced. */
void blk_queue_set_capacity(struct blk_dev *blk);

/* Every I/O thread's ring gets files (BLK_FILES of them; -1 empties a
 * slot), the threads quiesced or parked; where one fails, those that took
 * them go back to old. 0 or -errno; -ETIMEDOUT: a thread did not answer
 * and may still take them later (keep them open). */
int blk_workers_set_files(struct blk_dev *blk, const int *files, const int *old);
/* The disk's counters back to zero (a spare given a new image), its
 * threads parked and the device out of the guest's reach. */
void blk_clear_stats(struct blk_dev *blk);

/* DRIVER_OK, for each enabled queue in increasing order: prepares q, and
 * once q is the last enabled queue of its worker, has that worker serve
 * every prepared queue of it. */
int blk_queue_start(struct blk_dev *blk, unsigned q);
/* Stops q's worker serving (with it the worker's other queues: the core
 * stops a device's queues only all together) and frees q's slots. */
void blk_queue_stop(struct blk_dev *blk, unsigned q);
/* Before the core stops every queue: tells each serving worker to stop,
 * so that blk_queue_stop then only waits for it. */
void blk_queues_stopping(struct blk_dev *blk);
/* The bytes (*bytes) and requests (*ops) that requests waiting for
 * rate-limit tokens paid: a snapshot gives them back to the ring, and
 * they pay again after a restore. Quiesced queues only (a pause). */
void blk_queues_held_cost(const struct blk_dev *blk, uint64_t *bytes, uint64_t *ops);

#endif
