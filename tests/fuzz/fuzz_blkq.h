/* The virtio-blk queue engine under a fuzzed guest: the real ring code
 * (devices/virtq.c), request validation (blk_req.c, iov.c) and per-queue
 * engine (blk_queue.c), driven without threads or a kernel io_uring.
 * fuzz_virtq_split.c and fuzz_virtq_packed.c are this with one ring layout
 * each.
 *
 * Fakes, and why:
 *  - Guest RAM: two malloc'd blocks, adjacent in guest-physical space but
 *    not in the host ([RAM_A, +64 KiB) and [RAM_B, +16 KiB)): a buffer that
 *    crosses from one to the other, or leaves RAM, must be refused by
 *    virtq_pop; if one got through, the first access is outside a heap
 *    block and ASan stops the run.
 *  - The worker (virtq_worker.c) is replaced, at link time, by the vqw_*
 *    functions below: the same drain / publish rules, but run when the
 *    input says "kick", on this thread. blk_queue.c is unchanged and hands
 *    its ops table to our vqw_init.
 *  - io_uring: blk_queue.c fills real SQEs (liburing's inline prep
 *    helpers) into a fake submission queue; the input decides when each
 *    completes, in which order and with what result (full, short, EAGAIN,
 *    EINVAL, EIO, EOPNOTSUPP), and the fake "executes" it by touching
 *    every byte of its buffers. A real ring on a null backend would cover
 *    less (completions in the kernel's order, no short transfers or
 *    errors) and cost a thread and a ring per input (milliseconds instead
 *    of microseconds), with timing the input does not replay.
 *
 * Invariants checked (besides ASan/UBSan):
 *  - every SQE is a host I/O of the disk: within capacity, on a registered
 *    file, at most one per request slot;
 *  - every chain the device popped is completed (pushed) once host I/O is
 *    over, broken ring or not, and published. */
#ifndef MVM_TESTS_FUZZ_BLKQ_H
#define MVM_TESTS_FUZZ_BLKQ_H

#include "tests/fuzz/fuzz.h"
#include "devices/blk_queue.h"
#include "devices/virtq_worker.h"
#include "vmm/base/util.h"

#define RAM_A      0x10000ULL
#define RAM_A_SIZE 0x10000ULL
#define RAM_B      (RAM_A + RAM_A_SIZE)
#define RAM_B_SIZE 0x4000ULL
#define RAM_END    (RAM_B + RAM_B_SIZE)
#define RING_DESC  RAM_A                 /* 16 * 256 */
#define RING_DRV   (RAM_A + 0x1000)      /* split avail: 6 + 2 * 256 */
#define RING_DEV   (RAM_A + 0x1400)      /* split used: 6 + 8 * 256 */
#define DATA_START (RAM_A + 0x2000)      /* well-formed requests' buffers */
#define QMAX       256
#define MAX_SQES   QMAX

/* ---- the fake io_uring and worker ---- */

struct fake_sqe {
	struct io_uring_sqe sqe;
	struct vqw_queue *q;
};

static struct {
	struct vqw *w;                      /* the one worker (one queue) */
	struct fake_sqe sq[MAX_SQES];       /* submitted, not completed */
	unsigned nsq, cap;
	uint64_t disk_bytes;
	bool buffered_fd;                   /* file index 1 registered */
	uint64_t sqe_ops;                   /* the opcodes the device declared */
	unsigned irqs, config_irqs;
	uint8_t sink;                       /* bytes read from the guest go here */
} fk;

int vqw_init(struct vqw *w, const struct vqw_ops *ops, struct virtio_dev *dev,
	     const unsigned *idx, void *const *opaque, unsigned nq, unsigned sqes_per_queue,
	     unsigned poll_us, unsigned gather_us, const char *thread_name)
{
	(void)thread_name;
	(void)poll_us;
	(void)gather_us;
	FZ_ASSERT(nq == 1 && idx[0] < dev->num_queues);
	memset(w, 0, sizeof(*w));
	w->ops = ops;
	w->dev = dev;
	w->nq = nq;
	w->q = calloc(1, sizeof(*w->q));
	FZ_ASSERT(w->q);
	w->stopping = true;             /* parked until vqw_start */
	w->q[0].w = w;
	w->q[0].dev = dev;
	w->q[0].idx = idx[0];
	w->q[0].vq = &dev->queues[idx[0]].vq;
	w->q[0].kick_fd = -1;
	w->q[0].opaque = opaque[0];
	fk.w = w;
	fk.nsq = 0;
	fk.cap = sqes_per_queue;
	FZ_ASSERT(fk.cap <= MAX_SQES);
	return 0;
}

/* blk_workers_init declares the image's fds and its opcodes. */
int vqw_set_io(struct vqw *w, const int *files, unsigned nfiles, uint64_t sqe_ops)
{
	FZ_ASSERT(w == fk.w);
	FZ_ASSERT(nfiles == 1 || nfiles == 2);
	FZ_ASSERT(files[0] >= 0);
	fk.buffered_fd = nfiles == 2;
	fk.sqe_ops = sqe_ops;
	return 0;
}

/* fixed-buffers=on: "registered" as the real worker would, so that the
 * real lookup (vqw_fixed_index, vqw_fixed_find) runs on it. */
int vqw_register_mem(struct vqw *w, const struct guest_mem *gm)
{
	FZ_ASSERT(w == fk.w && !w->fixed && !w->launched);
	w->fixed = gm;
	return 0;
}

struct io_uring_sqe *vqw_get_sqe(struct vqw *w)
{
	struct fake_sqe *f;

	FZ_ASSERT(w == fk.w);
	/* blk_queue: one SQE per request slot at most, slots = queue size. */
	FZ_ASSERT(fk.nsq < fk.cap);
	f = &fk.sq[fk.nsq++];
	memset(f, 0, sizeof(*f));
	f->q = &w->q[0];
	return &f->sqe;
}

void vqw_sqe_set_data(struct io_uring_sqe *sqe, const struct vqw_queue *q, uint32_t data)
{
	(void)q;
	/* The real ring would refuse an opcode the device did not declare. */
	FZ_ASSERT(fk.sqe_ops & (1ULL << sqe->opcode));
	sqe->flags |= IOSQE_FIXED_FILE;     /* as the real one: the ring requires it */
	io_uring_sqe_set_data64(sqe, data);
}

void vqw_push(struct vqw_queue *q, uint16_t head, uint32_t used_len)
{
	if (vqw_stopping(q))
		return;
	virtq_push(q->vq, head, used_len);
	q->pushed++;
}

void vqw_broken(struct vqw_queue *q, const char *why)
{
	(void)why;
	q->broken = true;
	virtio_dev_needs_reset(q->dev);
}

int vqw_launch(struct vqw *w)
{
	w->launched = true;
	return 0;
}

/* As the real thread's RUN: the queues in mask, everything about the
 * last run forgotten. */
void vqw_start(struct vqw *w, uint64_t mask)
{
	FZ_ASSERT(w->launched && !w->running);
	w->q[0].active = mask & 1;
	w->q[0].broken = w->q[0].more = w->q[0].held = false;
	w->q[0].pushed = 0;
	w->stopping = false;
	w->running = true;
}

static void fake_complete(unsigned k, unsigned mode);

/* A retry's wait: an SQE of its own, completed when the input says, as
 * the real ring's timeout would be (or cancelled by a stop). */
void vqw_retry_later(struct vqw_queue *q, uint32_t data, unsigned attempt)
{
	struct io_uring_sqe *sqe = vqw_get_sqe(q->w);

	FZ_ASSERT(attempt < 64);
	io_uring_prep_timeout(sqe, NULL, 0, 0);
	io_uring_sqe_set_data64(sqe, data);
}

/* A rate limit's wait: the same kind of SQE, its end as the input says.
 * (The fuzzed disks have no limits; a limit set by a target would get
 * here.) */
void vqw_wait_until(struct vqw_queue *q, uint32_t data, uint64_t when_ns)
{
	struct io_uring_sqe *sqe = vqw_get_sqe(q->w);

	(void)when_ns;
	io_uring_prep_timeout(sqe, NULL, 0, 0);
	io_uring_sqe_set_data64(sqe, data);
}

/* Limits changed from another thread: the fake has no other thread. */
void vqw_poke(struct vqw *w)
{
	(void)w;
}

/* The fuzzed paths never pause nor swap images: nothing is ever
 * quiesced, no file replaced. */
void vqw_allow_set_files(struct vqw *w)
{
	(void)w;
}

int vqw_set_files(struct vqw *w, const int *files, unsigned n, uint64_t deadline_ns)
{
	(void)w;
	(void)files;
	(void)n;
	(void)deadline_ns;
	FZ_ASSERT(0);
	return -EINVAL;
}

void vqw_get_stats(const struct vqw_queue *q, struct vqw_stats *out)
{
	*out = q->st;
}

void vqw_clear_stats(struct vqw *w)
{
	unsigned i;

	for (i = 0; i < w->nq; i++)
		memset(&w->q[i].st, 0, sizeof(w->q[i].st));
}

/* A pause: the fuzzed paths never pause, so nothing is ever quiesced. */
void vqw_quiesce(struct vqw *w, bool on)
{
	(void)w;
	(void)on;
}

int vqw_quiesce_wait(struct vqw *w, uint64_t deadline_ns)
{
	(void)w;
	(void)deadline_ns;
	return 0;
}

/* Told to stop: from here on it writes no guest memory, as the real
 * thread winding down (its host I/O ends in vqw_stop). */
void vqw_stop_begin(struct vqw *w)
{
	if (w->running)
		w->stopping = true;
}

void vqw_stop(struct vqw *w)
{
	unsigned rounds = 0;

	if (!w->running)
		return;
	/* Like the real stop: no guest memory is written any more, and the
	 * device's host I/O is waited for (here: completed, cancelled). */
	w->stopping = true;
	while (fk.nsq) {
		FZ_ASSERT(++rounds < 100000);
		fake_complete(0, 3 /* -ECANCELED */);
	}
	FZ_ASSERT(w->ops->inflight(&w->q[0]) == 0);
	w->q[0].active = false;
	w->running = false;
}

void vqw_end(struct vqw *w)
{
	vqw_stop(w);
	w->launched = false;
}

void vqw_fini(struct vqw *w)
{
	w->fixed = NULL;        /* as the real one: unregistered with the ring */
	free(w->q);
	w->q = NULL;
}

/* The worker's drain (virtq_worker.c): at most a queue's worth per round,
 * notifications off, left off (fake_round turns them on, as the worker's
 * rearm does before it sleeps). */
static void fake_drain(struct vqw_queue *q)
{
	unsigned budget = q->vq->size;
	int r;

	q->more = false;
	if (q->broken || q->held || !q->active)
		return;
	virtq_notify_disable(q->vq);
	while (budget) {
		r = virtq_pop(q->vq, &q->w->chain);
		if (r == 0)
			return;
		if (r < 0) {
			vqw_broken(q, strerror(-r));
			return;
		}
		FZ_ASSERT(r == 1);
		FZ_ASSERT(q->w->chain.head < q->vq->size);
		FZ_ASSERT(q->w->chain.n <= VIRTQ_MAX_CHAIN &&
			  q->w->chain.n_readable <= q->w->chain.n);
		budget--;
		q->w->ops->chain(q, &q->w->chain);
		if (q->broken)
			return;
	}
	q->more = true;
}

static void fake_publish(struct vqw_queue *q)
{
	if (!q->pushed)
		return;
	q->pushed = 0;
	if (virtq_publish(q->vq))
		virtio_signal_queue(q->dev, q->idx);
}

static void fake_round(void)
{
	struct vqw_queue *q = &fk.w->q[0];

	if (!fk.w->running)
		return;
	/* The worker's loop up to its sleep: drain and publish; a full
	 * round comes back later; else notifications on and the re-check,
	 * which may find more. */
	do {
		fake_drain(q);
		fake_publish(q);
	} while (!q->more && !q->broken && virtq_notify_enable(q->vq));
}

/* Touch every byte of a host buffer the device handed to "the kernel". */
static void touch(void *p, uint64_t len, bool write, uint8_t pat)
{
	uint8_t *b = p;

	FZ_ASSERT(p != NULL && len > 0);
	if (write) {
		memset(b, pat, len);
	} else {
		for (uint64_t i = 0; i < len; i++)
			fk.sink ^= b[i];
	}
}

/* The result the input picked for an SQE of `full` bytes. */
static int pick_result(unsigned mode, uint64_t full)
{
	switch (mode % 8) {
	case 1:
		return full > 1 ? (int)(full / 2) : (int)full;   /* short */
	case 2:
		return -EAGAIN;
	case 3:
		return -ECANCELED;
	case 4:
		return -EINVAL;       /* O_DIRECT alignment: retried buffered */
	case 5:
		return -EIO;
	case 6:
		return 0;             /* EOF */
	case 7:
		return -EOPNOTSUPP;
	default:
		return (int)full;
	}
}

/* Complete SQE k (of those submitted) with a result picked by mode. */
static void fake_complete(unsigned k, unsigned mode)
{
	struct fake_sqe f;
	const struct io_uring_sqe *s = &f.sqe;
	uint64_t len = 0;
	int res = 0;

	if (!fk.nsq)
		return;
	k %= fk.nsq;
	f = fk.sq[k];
	fk.sq[k] = fk.sq[--fk.nsq];
	if (s->opcode == IORING_OP_TIMEOUT) {
		/* A retry's wait is over. */
		FZ_ASSERT(f.q->w->ops->retry);
		f.q->w->ops->retry(f.q, (uint32_t)s->user_data);
		return;
	}
	if (s->opcode != IORING_OP_NOP) {
		FZ_ASSERT(s->flags & IOSQE_FIXED_FILE);
		FZ_ASSERT(s->fd == 0 || (s->fd == 1 && fk.buffered_fd));
	}
	switch (s->opcode) {
	case IORING_OP_READ:
	case IORING_OP_WRITE:
		len = s->len;
		touch((void *)(uintptr_t)s->addr, len, s->opcode == IORING_OP_READ, (uint8_t)mode);
		break;
	case IORING_OP_READ_FIXED:
	case IORING_OP_WRITE_FIXED: {
		struct iovec bufs[8];
		int nbufs;

		/* What the kernel checks: a registered buffer, as the layout
		 * that vqw_register_mem would have registered, and the range
		 * inside it (else -EFAULT, which the device never sees here). */
		FZ_ASSERT(fk.w->fixed);
		nbufs = vqw_fixed_layout(fk.w->fixed, bufs, 8);
		FZ_ASSERT(nbufs > 0 && s->buf_index < (unsigned)nbufs);
		len = s->len;
		FZ_ASSERT(s->addr >= (uintptr_t)bufs[s->buf_index].iov_base &&
			  len <= bufs[s->buf_index].iov_len &&
			  s->addr - (uintptr_t)bufs[s->buf_index].iov_base <=
			  bufs[s->buf_index].iov_len - len);
		touch((void *)(uintptr_t)s->addr, len, s->opcode == IORING_OP_READ_FIXED,
		      (uint8_t)mode);
		break;
	}
	case IORING_OP_READV:
	case IORING_OP_WRITEV: {
		const struct iovec *v = (const struct iovec *)(uintptr_t)s->addr;

		FZ_ASSERT(s->len >= 1 && s->len <= BLK_SEG_MAX);
		for (unsigned i = 0; i < s->len; i++) {
			touch(v[i].iov_base, v[i].iov_len, s->opcode == IORING_OP_READV,
			      (uint8_t)mode);
			len += v[i].iov_len;
		}
		break;
	}
	case IORING_OP_FALLOCATE:
		/* liburing: offset in off, length in addr. */
		len = s->addr;
		FZ_ASSERT(len > 0);
		break;
	case IORING_OP_FSYNC:
	case IORING_OP_NOP:
		break;
	default:
		FZ_ASSERT(!"unexpected opcode");
	}
	if (len) {
		FZ_ASSERT(s->off <= fk.disk_bytes && len <= fk.disk_bytes - s->off);
		FZ_ASSERT(len <= INT32_MAX);
	}
	res = pick_result(mode, len);
	if (s->opcode == IORING_OP_FSYNC || s->opcode == IORING_OP_FALLOCATE)
		res = res > 0 ? 0 : res;
	f.q->w->ops->complete(f.q, (uint32_t)s->user_data, res);
}

static void fake_signal_queue(struct virtio_dev *dev, unsigned q)
{
	(void)dev;
	(void)q;
	fk.irqs++;
}

static void fake_signal_config(struct virtio_dev *dev)
{
	(void)dev;
	fk.config_irqs++;
}

static const struct virtio_transport_ops fake_tops = {
	.signal_queue = fake_signal_queue,
	.signal_config = fake_signal_config,
};

static const struct virtio_device_ops fake_blk_ops = {
	.name = "virtio-blk",
	.device_id = VIRTIO_ID_BLOCK,
};

/* ---- the fuzzed guest ---- */

struct guest {
	bool packed;
	uint8_t *ram_a, *ram_b;
	struct guest_mem mem;
	struct blk_dev *blk;
	struct virtq *vq;
	uint64_t features;
	uint16_t size;
	/* the driver's side */
	uint16_t avail_idx;            /* split: shadow of avail.idx */
	uint16_t next_desc;            /* split: next descriptor to fill; packed: slot */
	bool avail_wrap;               /* packed: driver wrap counter */
	uint16_t next_id;              /* packed: next buffer id */
	uint64_t brk;                  /* data buffers: bump allocator, wraps */
	bool started;
};

static void *host(struct guest *g, uint64_t gpa)
{
	void *p = gmem_ptr(&g->mem, gpa, 1);

	FZ_ASSERT(p);
	return p;
}

static uint64_t data_alloc(struct guest *g, uint64_t len)
{
	uint64_t gpa = ALIGN_UP(g->brk, 16);

	if (len > RAM_B - DATA_START)
		len = RAM_B - DATA_START;
	if (gpa + len > RAM_B)
		gpa = DATA_START;
	g->brk = gpa + len;
	return gpa;
}

static void desc_store(struct guest *g, uint16_t i, uint64_t addr, uint32_t len,
		       uint16_t a, uint16_t b)
{
	uint8_t *p = host(g, RING_DESC + 16ULL * (i % g->size));

	le64_store(p, addr);
	le32_store(p + 8, len);
	/* split: flags, next; packed: id, flags */
	le16_store(p + 12, a);
	le16_store(p + 14, b);
}

static uint16_t packed_avail_bits(bool wrap)
{
	return wrap ? (1u << VRING_PACKED_DESC_F_AVAIL) : (1u << VRING_PACKED_DESC_F_USED);
}

/* Make `n` buffers (sg) available as one chain the way Linux does
 * (split: consecutive descriptors from next_desc, head in avail.ring;
 * packed: consecutive slots, head flags last), or as one indirect table. */
struct sg {
	uint64_t gpa;
	uint32_t len;
	bool writable;
};

static void add_chain(struct guest *g, const struct sg *sg, unsigned n, bool indirect)
{
	unsigned i;

	if (n == 0)
		return;
	if (indirect) {
		uint64_t t = data_alloc(g, 16ULL * n);
		uint8_t *p = host(g, t);

		for (i = 0; i < n; i++, p += 16) {
			le64_store(p, sg[i].gpa);
			le32_store(p + 8, sg[i].len);
			if (g->packed) {
				le16_store(p + 12, 0);
				le16_store(p + 14, sg[i].writable ? VRING_DESC_F_WRITE : 0);
			} else {
				le16_store(p + 12, (sg[i].writable ? VRING_DESC_F_WRITE : 0) |
					   (i + 1 < n ? VRING_DESC_F_NEXT : 0));
				le16_store(p + 14, (uint16_t)(i + 1));
			}
		}
		struct sg one = { t, 16 * n, false };
		if (g->packed) {
			/* the indirect flag goes on the ring descriptor */
			uint16_t pos = g->next_desc, id = g->next_id++ % g->size;

			desc_store(g, pos, one.gpa, one.len, id, 0);
			__atomic_store_n((uint16_t *)host(g, RING_DESC + 16ULL * pos + 14),
					 htole16(VRING_DESC_F_INDIRECT | packed_avail_bits(g->avail_wrap)),
					 __ATOMIC_RELEASE);
			if (++g->next_desc == g->size) {
				g->next_desc = 0;
				g->avail_wrap = !g->avail_wrap;
			}
			return;
		}
		uint16_t head = g->next_desc % g->size;
		desc_store(g, head, one.gpa, one.len, VRING_DESC_F_INDIRECT, 0);
		g->next_desc = (uint16_t)((head + 1) % g->size);
		le16_store(host(g, RING_DRV + 4 + 2ULL * (g->avail_idx % g->size)), head);
		g->avail_idx++;
		le16_store(host(g, RING_DRV + 2), g->avail_idx);
		return;
	}
	if (g->packed) {
		uint16_t head = g->next_desc, id = g->next_id++ % g->size, head_flags = 0;

		for (i = 0; i < n; i++) {
			uint16_t flags = packed_avail_bits(g->avail_wrap) |
					 (i + 1 < n ? VRING_DESC_F_NEXT : 0) |
					 (sg[i].writable ? VRING_DESC_F_WRITE : 0);

			desc_store(g, g->next_desc, sg[i].gpa, sg[i].len, id,
				   i == 0 ? 0 : flags);
			if (i == 0)
				head_flags = flags;
			if (++g->next_desc == g->size) {
				g->next_desc = 0;
				g->avail_wrap = !g->avail_wrap;
			}
		}
		__atomic_store_n((uint16_t *)host(g, RING_DESC + 16ULL * head + 14),
				 htole16(head_flags), __ATOMIC_RELEASE);
		return;
	}
	uint16_t head = g->next_desc % g->size;
	for (i = 0; i < n; i++) {
		uint16_t d = (uint16_t)((head + i) % g->size);

		desc_store(g, d, sg[i].gpa, sg[i].len,
			   (sg[i].writable ? VRING_DESC_F_WRITE : 0) |
			   (i + 1 < n ? VRING_DESC_F_NEXT : 0), (uint16_t)((d + 1) % g->size));
	}
	g->next_desc = (uint16_t)((head + n) % g->size);
	le16_store(host(g, RING_DRV + 4 + 2ULL * (g->avail_idx % g->size)), head);
	g->avail_idx++;
	le16_store(host(g, RING_DRV + 2), g->avail_idx);
}

/* A virtio-blk request as Linux builds it (header, data segments, status),
 * with the fields from the input. */
static void op_request(struct guest *g, struct fz *f)
{
	static const uint32_t types[] = { VIRTIO_BLK_T_IN, VIRTIO_BLK_T_OUT, VIRTIO_BLK_T_FLUSH,
					  VIRTIO_BLK_T_GET_ID, VIRTIO_BLK_T_DISCARD,
					  VIRTIO_BLK_T_WRITE_ZEROES, 99 };
	uint8_t sel = fz_u8(f), nseg = fz_u8(f) % 4, shape = fz_u8(f);
	uint32_t type = types[sel % ARRAY_SIZE(types)];
	uint64_t sector = fz_u16(f);
	uint32_t seglen = (fz_u8(f) % 9) * 512;
	struct sg sg[6];
	unsigned n = 0;
	uint64_t hdr = data_alloc(g, 16), st;
	uint8_t *h = host(g, hdr);

	le32_store(h, type);
	le32_store(h + 4, 0);
	le64_store(h + 8, sector);
	sg[n++] = (struct sg){ hdr, 16, false };
	if (type == VIRTIO_BLK_T_DISCARD || type == VIRTIO_BLK_T_WRITE_ZEROES) {
		uint64_t seg = data_alloc(g, 16);
		uint8_t *p = host(g, seg);

		le64_store(p, sector);
		le32_store(p + 8, fz_u8(f) % 16);        /* sectors */
		le32_store(p + 12, shape & 0x10 ? VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP : 0);
		sg[n++] = (struct sg){ seg, 16, false };
	} else if (type == VIRTIO_BLK_T_GET_ID) {
		sg[n++] = (struct sg){ data_alloc(g, 20), 20, true };
	} else if (type != VIRTIO_BLK_T_FLUSH) {
		for (unsigned i = 0; i < nseg && seglen; i++)
			sg[n++] = (struct sg){ data_alloc(g, seglen), seglen,
					       type == VIRTIO_BLK_T_IN };
	}
	st = data_alloc(g, 1);
	*(uint8_t *)host(g, st) = 0xff;
	sg[n++] = (struct sg){ st, 1, true };
	add_chain(g, sg, n, shape & 1);
}

/* A raw descriptor (any address, length, flags) in the ring. */
static void op_desc(struct guest *g, struct fz *f)
{
	uint16_t i = fz_u16(f) % g->size;
	uint8_t how = fz_u8(f);
	uint64_t addr = how & 1 ? fz_u64(f) : RAM_A + fz_u16(f) + (how & 2 ? RAM_A_SIZE / 2 : 0);
	uint32_t len = how & 4 ? fz_u32(f) : fz_u16(f) % 0x1000;
	uint16_t a = fz_u16(f), b = fz_u16(f);

	if (how & 0x20) {
		/* A buffer at the end of a RAM block, ending up to 4 bytes
		 * short of it or past it: where an off-by-one would hide. */
		uint64_t end = how & 0x40 ? RAM_END : RAM_B;
		uint8_t d = fz_u8(f);

		addr = end - 1 - (len % 64);
		len = (uint32_t)(end - addr) + (how >> 7 ? (d & 3) + 1 : -(uint32_t)(d & 3));
	}

	if (g->packed) {
		/* a = id, b = flags; optionally the bits that make it available */
		if (how & 8)
			b = (uint16_t)((b & ~((1u << VRING_PACKED_DESC_F_AVAIL) |
					      (1u << VRING_PACKED_DESC_F_USED))) |
				       packed_avail_bits(g->avail_wrap));
		desc_store(g, i, addr, len, a, b);
		if (how & 16) {
			/* move the driver's cursor past it */
			if (++g->next_desc == g->size) {
				g->next_desc = 0;
				g->avail_wrap = !g->avail_wrap;
			}
		}
	} else {
		desc_store(g, i, addr, len, a, b);
		if (how & 8) {
			/* and make it a head: next avail entry, published */
			le16_store(host(g, RING_DRV + 4 + 2ULL * (g->avail_idx % g->size)), i);
			g->avail_idx++;
			le16_store(host(g, RING_DRV + 2), g->avail_idx);
		}
	}
}

/* Split: put a head in the avail ring and publish (or set avail.idx to
 * anything). Packed: set the driver event suppression. */
static void op_avail(struct guest *g, struct fz *f)
{
	uint16_t v = fz_u16(f);
	uint8_t how = fz_u8(f);

	if (g->packed) {
		le32_store(host(g, RING_DRV), (uint32_t)v | (uint32_t)(how % 4) << 16);
		return;
	}
	if (how & 1) {
		g->avail_idx = v;
	} else {
		le16_store(host(g, RING_DRV + 4 + 2ULL * (g->avail_idx % g->size)), v);
		g->avail_idx++;
	}
	le16_store(host(g, RING_DRV + 2), g->avail_idx);
	if (how & 2)    /* avail.flags (NO_INTERRUPT) */
		le16_store(host(g, RING_DRV), how >> 7);
	if (how & 4)    /* used_event */
		le16_store(host(g, RING_DRV + 4 + 2ULL * g->size), fz_u16(f));
}

/* Raw bytes anywhere in RAM (rings included). */
static void op_poke(struct guest *g, struct fz *f)
{
	uint64_t off = fz_u16(f) % (RAM_END - RAM_A);
	uint8_t len = fz_u8(f) % 32;

	for (uint8_t i = 0; i < len; i++, off++)
		*(uint8_t *)host(g, RAM_A + off % (RAM_END - RAM_A)) = fz_u8(f);
}

static int queue_enable(struct guest *g)
{
	struct virtq *vq = g->vq;

	virtq_reset(vq);
	vq->size = g->size;
	vq->desc_gpa = RING_DESC;
	vq->driver_gpa = RING_DRV;
	vq->device_gpa = RING_DEV;
	return virtq_enable(vq, &g->mem, g->features);
}

static void driver_reset(struct guest *g)
{
	memset(g->ram_a, 0, 0x2000);    /* fresh rings */
	g->avail_idx = 0;
	g->next_desc = 0;
	g->avail_wrap = true;
	g->next_id = 0;
}

/* The device's reset (§2.1.2): stop the queue (host I/O waited for), fresh
 * rings, start again. */
static void op_reset(struct guest *g)
{
	if (g->started)
		blk_queue_stop(g->blk, 0);
	g->started = false;
	g->blk->vdev.needs_reset = false;
	driver_reset(g);
	FZ_ASSERT(queue_enable(g) == 0);
	FZ_ASSERT(blk_queue_start(g->blk, 0) == 0);
	g->started = true;
}

/* Everything popped so far is completed once its host I/O is over. */
static void check_all_completed(struct guest *g)
{
	struct blk_queue *q = &g->blk->queues[0];

	FZ_ASSERT(fk.nsq == 0);
	FZ_ASSERT(q->inflight == 0);
	FZ_ASSERT(g->vq->inflight_count == 0);
	if (g->packed)
		FZ_ASSERT(g->vq->inflight_slots == 0 && g->vq->pending_slots == 0);
	else    /* (not used.idx in RAM: the guest may overwrite its own ring) */
		FZ_ASSERT(g->vq->published_used == g->vq->used_idx);
}

static int blkq_fuzz(const uint8_t *data, size_t size, bool packed)
{
	struct fz in = { data, size };
	struct guest g;
	uint8_t cfg = fz_u8(&in), sz = fz_u8(&in);
	unsigned steps = 0;
	uint16_t cap;

	memset(&fk, 0, sizeof(fk));
	memset(&g, 0, sizeof(g));
	g.packed = packed;
	g.ram_a = calloc(1, RAM_A_SIZE);
	g.ram_b = calloc(1, RAM_B_SIZE);
	FZ_ASSERT(g.ram_a && g.ram_b);
	FZ_ASSERT(gmem_add_region(&g.mem, RAM_A, RAM_A_SIZE, g.ram_a) == 0);
	FZ_ASSERT(gmem_add_region(&g.mem, RAM_B, RAM_B_SIZE, g.ram_b) == 0);
	g.brk = DATA_START;
	g.size = packed ? (uint16_t)(1 + sz % QMAX) : (uint16_t)(1u << (sz % 9));
	g.features = VIRTIO_BIT(VIRTIO_F_VERSION_1) |
		     (packed ? VIRTIO_BIT(VIRTIO_F_RING_PACKED) : 0) |
		     (cfg & 1 ? VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX) : 0) |
		     (cfg & 2 ? VIRTIO_BIT(VIRTIO_RING_F_INDIRECT_DESC) : 0) |
		     (cfg & 4 ? VIRTIO_BIT(VIRTIO_BLK_F_DISCARD) : 0) |
		     (cfg & 8 ? VIRTIO_BIT(VIRTIO_BLK_F_WRITE_ZEROES) : 0);

	g.blk = calloc(1, sizeof(*g.blk));
	FZ_ASSERT(g.blk);
	FZ_ASSERT(virtio_dev_init(&g.blk->vdev, &fake_blk_ops, g.blk, &g.mem, 1, QMAX) == 0);
	g.blk->vdev.tops = &fake_tops;
	g.blk->vdev.guest_features = g.features;
	g.blk->vdev.status = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
			     VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK;
	g.blk->queues = calloc(1, sizeof(*g.blk->queues));
	g.blk->workers = calloc(1, sizeof(*g.blk->workers));
	g.blk->nworkers = 1;
	FZ_ASSERT(g.blk->queues && g.blk->workers);
	FZ_ASSERT(blk_slots_alloc(g.blk) == 0);
	cap = fz_u16(&in);
	g.blk->capacity = 1 + cap % 4096;                  /* up to 2 MiB */
	/* Its top bit: guest RAM registered (fixed-buffers=on). */
	g.blk->opts.fixed_buffers = cap & 0x8000;
	fk.disk_bytes = g.blk->capacity * 512;
	g.blk->img.fd = 0;                                 /* never used: fake ring */
	g.blk->img.fd_buffered = cfg & 0x10 ? 1 : -1;
	g.blk->img.direct = cfg & 0x10;
	g.blk->img.ro = cfg & 0x20;
	g.blk->img.discard = cfg & 0x40;
	g.blk->img.size = fk.disk_bytes;
	g.blk->backend = &blk_file_backend;
	g.blk->opts.serial = cfg & 0x80 ? strcpy(g.blk->serial, "fuzz-serial-20-bytes") : NULL;
	g.blk->opts.queues = 1;
	g.blk->opts.path = g.blk->path[0];       /* "": no image file */
	/* No limits (the device's own limiter is always there). */
	FZ_ASSERT(ratelim_init(&g.blk->rate, &g.blk->opts.rate, 0) == 0);
	g.blk->rate_up = true;
	FZ_ASSERT(blk_workers_init(g.blk) == 0);
	FZ_ASSERT(blk_workers_launch(g.blk) == 0);
	g.vq = &g.blk->vdev.queues[0].vq;
	driver_reset(&g);
	FZ_ASSERT(queue_enable(&g) == 0);
	FZ_ASSERT(blk_queue_start(g.blk, 0) == 0);
	g.started = true;

	while (fz_left(&in) && ++steps < 4096) {
		switch (fz_u8(&in) % 9) {
		case 0:
			op_request(&g, &in);
			break;
		case 1:
			op_desc(&g, &in);
			break;
		case 2:
			op_avail(&g, &in);
			break;
		case 3:
			op_poke(&g, &in);
			break;
		case 4:
		case 5:
			fake_round();
			break;
		case 6: {
			uint8_t k = fz_u8(&in), mode = fz_u8(&in);

			fake_complete(k, mode);
			break;
		}
		case 7: {
			uint8_t mode = fz_u8(&in);
			unsigned guard = 0;

			while (fk.nsq && ++guard < 1024)
				fake_complete(0, mode++);
			break;
		}
		case 8:
			op_reset(&g);
			break;
		}
	}

	/* The end: every host I/O completes in full, the worker keeps going
	 * until the queue has nothing left (bounded: a queue's worth of chains
	 * per round), and then nothing may be left in flight. */
	for (unsigned round = 0; round < 64 && g.started; round++) {
		unsigned guard = 0;

		while (fk.nsq) {
			FZ_ASSERT(++guard < 100000);   /* resubmitted forever? */
			fake_complete(0, 0);
		}
		fake_round();
		if (!fk.nsq && !fk.w->q[0].more)
			break;
	}
	while (fk.nsq)
		fake_complete(0, 0);
	fake_publish(&fk.w->q[0]);
	if (g.started)
		check_all_completed(&g);

	if (g.started)
		blk_queue_stop(g.blk, 0);
	g.blk->vdev.queues[0].started = false;
	blk_workers_fini(g.blk);
	ratelim_fini(&g.blk->rate);
	blk_slots_free(g.blk);
	virtio_dev_destroy(&g.blk->vdev);
	free(g.blk->workers);
	free(g.blk->queues);
	free(g.blk);
	free(g.ram_a);
	free(g.ram_b);
	return 0;
}

/* ---- seeds ---- */

enum { OP_REQ, OP_DESC, OP_AVAIL, OP_POKE, OP_KICK, OP_KICK2, OP_COMPLETE, OP_COMPLETE_ALL,
       OP_RESET };

static void seed_hdr(struct fz_buf *s, uint8_t cfg, uint8_t size_sel, uint16_t capacity)
{
	s->n = 0;
	fzb_u8(s, cfg);
	fzb_u8(s, size_sel);
	fzb_u16(s, capacity);
}

/* type index (see op_request), segments, shape (bit 0 indirect, 0x10 unmap),
 * sector, segment length / 512 [, dwz sectors] */
static void seed_req(struct fz_buf *s, uint8_t type, uint8_t nseg, uint8_t shape,
		     uint16_t sector, uint8_t seglen)
{
	fzb_u8(s, OP_REQ);
	fzb_u8(s, type);
	fzb_u8(s, nseg);
	fzb_u8(s, shape);
	fzb_u16(s, sector);
	fzb_u8(s, seglen);
	if (type == 4 || type == 5)
		fzb_u8(s, 8);
}

static void blkq_seeds(bool packed)
{
	struct fz_buf s;
	uint8_t sz = packed ? 99 : 6;   /* packed: 100 entries; split: 64 */

	/* read, then write, both completed in full */
	seed_hdr(&s, 0x03, sz, 2048);
	seed_req(&s, 0, 1, 0, 8, 8);
	seed_req(&s, 1, 2, 0, 16, 1);
	fzb_u8(&s, OP_KICK);
	fzb_u8(&s, OP_COMPLETE_ALL);
	fzb_u8(&s, 0);
	fzb_u8(&s, OP_KICK);
	fuzz_seed("read_write", s.b, s.n);

	/* indirect read with short transfers and EAGAIN, completed out of order */
	seed_hdr(&s, 0x13, sz, 2048);
	seed_req(&s, 0, 3, 1, 0, 2);
	seed_req(&s, 1, 1, 1, 4, 1);
	fzb_u8(&s, OP_KICK);
	fzb_u8(&s, OP_COMPLETE); fzb_u8(&s, 1); fzb_u8(&s, 1);
	fzb_u8(&s, OP_COMPLETE); fzb_u8(&s, 0); fzb_u8(&s, 2);
	fzb_u8(&s, OP_COMPLETE_ALL); fzb_u8(&s, 4);
	fzb_u8(&s, OP_KICK);
	fuzz_seed("indirect_short", s.b, s.n);

	/* fixed-buffers=on: one-segment reads and writes on registered RAM,
	 * one short (the rest resubmitted inside the same buffer), with the
	 * O_DIRECT fd's EINVAL retry on the buffered one; and a two-segment
	 * read that goes without */
	seed_hdr(&s, 0x13, sz, 0x8000 | 2048);
	seed_req(&s, 0, 1, 0, 8, 8);
	seed_req(&s, 1, 1, 1, 24, 2);
	seed_req(&s, 0, 2, 0, 40, 1);
	fzb_u8(&s, OP_KICK);
	fzb_u8(&s, OP_COMPLETE); fzb_u8(&s, 0); fzb_u8(&s, 1);
	fzb_u8(&s, OP_COMPLETE); fzb_u8(&s, 1); fzb_u8(&s, 4);
	fzb_u8(&s, OP_COMPLETE_ALL); fzb_u8(&s, 0);
	fzb_u8(&s, OP_KICK);
	fuzz_seed("fixed_buffers", s.b, s.n);

	/* flush, get id, discard, write zeroes (unmap), unknown type */
	seed_hdr(&s, 0xcf, sz, 64);
	seed_req(&s, 2, 0, 0, 0, 0);
	seed_req(&s, 3, 0, 0, 0, 0);
	seed_req(&s, 4, 0, 0, 1, 0);
	seed_req(&s, 5, 0, 0x10, 2, 0);
	seed_req(&s, 6, 0, 0, 0, 0);
	fzb_u8(&s, OP_KICK);
	fzb_u8(&s, OP_COMPLETE_ALL); fzb_u8(&s, 7);
	fzb_u8(&s, OP_KICK);
	fuzz_seed("other_types", s.b, s.n);

	/* a raw descriptor pointing across the two RAM blocks, then a reset */
	seed_hdr(&s, 0x02, sz, 128);
	fzb_u8(&s, OP_DESC);
	fzb_u16(&s, 0);
	fzb_u8(&s, packed ? 0x1a : 0x02);
	fzb_u16(&s, 0x7ff8);                 /* RAM_A + 0x8000 + 0x7ff8: 8 bytes before RAM_B */
	fzb_u16(&s, 0x10);
	fzb_u16(&s, 0);
	fzb_u16(&s, packed ? 0 : VRING_DESC_F_WRITE);
	if (!packed) {
		fzb_u8(&s, OP_AVAIL);
		fzb_u16(&s, 0);
		fzb_u8(&s, 0);
	}
	fzb_u8(&s, OP_KICK);
	fzb_u8(&s, OP_RESET);
	seed_req(&s, 0, 1, 0, 0, 1);
	fzb_u8(&s, OP_KICK);
	fuzz_seed("cross_region_then_reset", s.b, s.n);

	/* a writable buffer ending exactly at the end of RAM block A (valid),
	 * made available at once (raw descriptor, boundary mode) */
	seed_hdr(&s, 0x00, sz, 128);
	fzb_u8(&s, OP_DESC);
	fzb_u16(&s, 0);
	fzb_u8(&s, packed ? 0x38 : 0x28);    /* boundary; split: head; packed: avail */
	fzb_u16(&s, 0);                      /* addr (replaced) */
	fzb_u16(&s, 7);                      /* 8 bytes before the end */
	fzb_u16(&s, packed ? 0 : VRING_DESC_F_WRITE);
	fzb_u16(&s, packed ? VRING_DESC_F_WRITE : 0);
	fzb_u8(&s, 0);                       /* no overshoot */
	fzb_u8(&s, OP_KICK);
	fuzz_seed("buffer_at_ram_end", s.b, s.n);
}

#endif
