/* race_guest: the real virtio-blk device with its real I/O threads and
 * io_uring rings (restrictions registered, as mvm makes them), driven by
 * a guest that races them. What tests/unit/test_races.c and
 * tests/fuzz/fuzz_worker_blk.c share; header-only, and without check.c
 * (the fuzz target links without it): a broken invariant prints a line
 * and aborts.
 *
 *  - Guarded guest RAM: two regions, adjacent in guest-physical space
 *    ([RG_GPA_A, RG_GPA_B) then [RG_GPA_B, RG_END)), each between
 *    PROT_NONE pages in the host. A device access outside RAM, or across
 *    from A into B, faults at once (SIGSEGV) instead of landing in other
 *    memory.
 *  - A checking block backend (rg_backend): on the I/O thread, before any
 *    host I/O is issued, every buffer must lie wholly inside one region
 *    and every byte of the disk range inside the disk; it aborts
 *    otherwise. (The kernel answers a buffer in a guard page with -EFAULT
 *    instead of faulting, so this is where such a bug would show.) It
 *    can make host I/O slow: a timeout stands in for it (in flight in
 *    the kernel, cancellable by a stop), or its completion sleeps on the
 *    I/O thread (the thread busy when the stop comes).
 *  - The image: a memfd with a pattern, opened by the device through its
 *    /proc/self/fd path (nothing left behind on disk).
 *  - Guest RAM layout: every queue's rings at the start of A; a slot of
 *    RG_SLOT bytes per (queue, head) for a request's header, DISCARD /
 *    WRITE_ZEROES segment, status byte and indirect table, so that a
 *    request's private bytes are never shared; a pool of data pages whose
 *    contents nobody checks; the last page of A, where buffers that cross
 *    into B start; in B, a status byte per (queue, head) and, at its end,
 *    buffers that end where RAM ends.
 *  - A guest that rewrites a descriptor while the device may pop it
 *    (rg_scribble).
 *  - Snapshots of all guest RAM, to tell that nothing changed.
 *  - Counting the process's fds and its threads by name.
 * One device at a time per process (the backend's state is global). */
#ifndef MVM_TESTS_RACE_GUEST_H
#define MVM_TESTS_RACE_GUEST_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/disk_spec.h"
#include "tests/unit/vdrv.h"
#include "devices/blk_queue.h"
#include "devices/virtio_blk.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

#define RG_MAX_Q     4
#define RG_QMAX      BLK_QUEUE_SIZE_MAX
#define RG_PAGE      4096ULL
#define RG_GPA_A     0x10000ULL               /* gpa 0 is not RAM */
#define RG_RINGS     (RG_GPA_A)               /* 32 KiB: every queue's rings */
#define RG_SLOTS     (RG_GPA_A + 0x8000ULL)
#define RG_SLOT      160ULL                   /* header 0, segment 16, status 32, table 48.. */
#define RG_POOL      (RG_SLOTS + RG_MAX_Q * RG_QMAX * RG_SLOT)
#define RG_POOL_PAGES 8u
#define RG_CROSS     (RG_POOL + RG_POOL_PAGES * RG_PAGE)   /* A's last page */
#define RG_GPA_B     (RG_CROSS + RG_PAGE)
#define RG_SIZE_A    (RG_GPA_B - RG_GPA_A)
#define RG_SIZE_B    0x4000ULL
#define RG_END       (RG_GPA_B + RG_SIZE_B)
#define RG_DISK      (64u * 1024)             /* image bytes */
#define RG_MAX_SG    6                        /* header x2, 3 data, status */
#define RG_THREADS   "mvm-blk-q"              /* the I/O threads' names */

#define RG_ASSERT(cond)                                                            \
	do {                                                                       \
		if (!(cond)) {                                                     \
			fprintf(stderr, "%s:%d: race invariant failed: %s\n",      \
				__FILE__, __LINE__, #cond);                        \
			abort();                                                   \
		}                                                                  \
	} while (0)

static inline uint8_t rg_pattern(uint64_t off)
{
	return (uint8_t)(off * 13 + off / 512 + 3);
}

/* --- the checking backend --- */

enum rg_io_mode {
	RG_IO_FILE,             /* the file backend as it is */
	RG_IO_TIMEOUT,          /* a timeout of rg_io.delay instead of the I/O */
	RG_IO_SLOW_COMPLETE,    /* the I/O, then its completion sleeps rg_io.sleep_us */
};

/* Timeouts the kernel reads when their SQE is submitted: static. */
static const struct __kernel_timespec rg_delays[] = {
	{ 0, 100000 }, { 0, 500000 }, { 0, 2000000 },
};

static struct {
	const struct guest_mem *mem;
	unsigned mode;          /* enum rg_io_mode (atomic: the test changes it) */
	unsigned delay;         /* rg_delays[delay] for RG_IO_TIMEOUT (atomic) */
	unsigned sleep_us;      /* RG_IO_SLOW_COMPLETE (atomic) */
	unsigned long preps;    /* host I/Os issued (atomic) */
} rg_io;

/* [p, p+len) wholly inside one region of guest RAM, in host terms. */
static inline bool rg_host_in_ram(const void *p, uint64_t len)
{
	const struct guest_mem *m = rg_io.mem;
	uintptr_t x = (uintptr_t)p;

	for (unsigned i = 0; i < m->nr; i++) {
		uintptr_t b = (uintptr_t)m->r[i].hva;

		if (x >= b && x - b < m->r[i].size && len <= m->r[i].size - (x - b))
			return true;
	}
	return false;
}

/* What the kernel would be asked to do for slot s, checked before it is. */
static inline void rg_check_io(const struct blk_slot *s)
{
	uint64_t sum = 0;

	switch (s->req.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
		RG_ASSERT(s->req.niov <= BLK_SEG_MAX && s->iov_first < s->req.niov);
		for (unsigned i = s->iov_first; i < s->req.niov; i++) {
			RG_ASSERT(s->req.iov[i].iov_len > 0);
			RG_ASSERT(rg_host_in_ram(s->req.iov[i].iov_base, s->req.iov[i].iov_len));
			sum += s->req.iov[i].iov_len;
		}
		RG_ASSERT(sum == s->left);
		/* fall through */
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
		RG_ASSERT(s->left > 0 && s->off <= RG_DISK && s->left <= RG_DISK - s->off);
		break;
	case VIRTIO_BLK_T_FLUSH:
		break;
	default:
		RG_ASSERT(!"host I/O for a request type that has none");
	}
}

static inline void rg_prep(const struct blk_slot *s, int file, struct io_uring_sqe *sqe)
{
	rg_check_io(s);
	__atomic_add_fetch(&rg_io.preps, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&rg_io.mode, __ATOMIC_RELAXED) == RG_IO_TIMEOUT) {
		unsigned k = __atomic_load_n(&rg_io.delay, __ATOMIC_RELAXED);

		io_uring_prep_timeout(sqe, (struct __kernel_timespec *)&rg_delays[k % 3], 0, 0);
		return;
	}
	blk_file_backend.prep(s, file, sqe);
}

/* A timeout that ran out (-ETIME) stands for the whole transfer; a
 * cancelled one (a stop) stays -ECANCELED. */
static inline int rg_complete(void *arg, unsigned q, const struct blk_slot *s, int res)
{
	(void)arg;
	(void)q;
	if (res == -ETIME)
		res = s->req.type == VIRTIO_BLK_T_IN || s->req.type == VIRTIO_BLK_T_OUT ?
		      (int)s->left : 0;
	if (__atomic_load_n(&rg_io.mode, __ATOMIC_RELAXED) == RG_IO_SLOW_COMPLETE)
		usleep(__atomic_load_n(&rg_io.sleep_us, __ATOMIC_RELAXED));
	return res;
}

static const struct blk_backend_ops rg_backend = {
	.name = "race-checked",
	.prep = rg_prep,
	.complete = rg_complete,
	.sqe_ops = BLK_FILE_SQE_OPS | (1ULL << IORING_OP_TIMEOUT),
};

static inline void rg_io_mode(enum rg_io_mode mode, unsigned delay, unsigned sleep_us)
{
	__atomic_store_n(&rg_io.delay, delay, __ATOMIC_RELAXED);
	__atomic_store_n(&rg_io.sleep_us, sleep_us, __ATOMIC_RELAXED);
	__atomic_store_n(&rg_io.mode, (unsigned)mode, __ATOMIC_RELAXED);
}

/* --- the guest --- */

struct rg {
	struct vdrv d;
	uint8_t *map;               /* guard | A | guard | B | guard */
	size_t map_len;
	uint8_t *b;                 /* region B's host memory */
	uint8_t *snap;              /* RG_SIZE_A + RG_SIZE_B */
	int img_fd;
	char img_path[64];
	struct virtio_dev *dev;
	unsigned nq;                /* the disk's queues */
	unsigned nworkers;          /* its I/O threads */
	uint16_t qsize;
	bool on[RG_MAX_Q];          /* enabled at the last start */
	bool mmio;                  /* attached through vdrv (virtio-mmio) */
};

/* The RAM and the image, once (a fuzz target keeps them across inputs). */
static inline void rg_init(struct rg *g)
{
	size_t a = RG_SIZE_A, b = RG_SIZE_B, pg = RG_PAGE;
	uint8_t *buf;

	memset(g, 0, sizeof(*g));
	g->map_len = pg + a + pg + b + pg;
	g->map = mmap(NULL, g->map_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	RG_ASSERT(g->map != MAP_FAILED);
	RG_ASSERT(mprotect(g->map + pg, a, PROT_READ | PROT_WRITE) == 0);
	RG_ASSERT(mprotect(g->map + pg + a + pg, b, PROT_READ | PROT_WRITE) == 0);
	g->b = g->map + pg + a + pg;
	g->d.ram = g->map + pg;
	g->d.ram_gpa = RG_GPA_A;
	g->d.ram_size = RG_SIZE_A;
	g->d.brk = RG_GPA_A;
	RG_ASSERT(gmem_add_region(&g->d.mem, RG_GPA_A, RG_SIZE_A, g->d.ram) == 0);
	RG_ASSERT(gmem_add_region(&g->d.mem, RG_GPA_B, RG_SIZE_B, g->b) == 0);
	g->snap = malloc(RG_SIZE_A + RG_SIZE_B);
	RG_ASSERT(g->snap);
	g->img_fd = memfd_create("mvm-race-disk", MFD_CLOEXEC);
	RG_ASSERT(g->img_fd >= 0);
	buf = malloc(RG_DISK);
	RG_ASSERT(buf);
	for (uint64_t i = 0; i < RG_DISK; i++)
		buf[i] = rg_pattern(i);
	RG_ASSERT(pwrite(g->img_fd, buf, RG_DISK, 0) == RG_DISK);
	free(buf);
	snprintf(g->img_path, sizeof(g->img_path), "/proc/self/fd/%d", g->img_fd);
}

static inline void rg_fini(struct rg *g)
{
	munmap(g->map, g->map_len);
	free(g->snap);
	close(g->img_fd);
}

/* The disk "<image><opts>" on the guarded RAM with the checking backend
 * (RAM zeroed first), not yet on a transport; 0 or -errno (message
 * printed). */
static inline int rg_dev_new(struct rg *g, const char *opts)
{
	char spec[256], err[256];
	struct mvm_disk o;
	int r;

	memset(g->d.ram, 0, RG_SIZE_A);
	memset(g->b, 0, RG_SIZE_B);
	snprintf(spec, sizeof(spec), "%s%s", g->img_path, opts);
	r = test_disk_parse(spec, 1, &o, err, sizeof(err));
	if (!r) {
		rg_io.mem = &g->d.mem;
		r = blk_dev_new_backend(&o, &g->d.mem, &rg_backend, NULL, &g->dev, err, sizeof(err));
	}
	if (r) {
		fprintf(stderr, "%s\n", err);
		return r;
	}
	g->nq = o.queues;
	g->nworkers = blk_io_threads(&o);
	RG_ASSERT(g->nq <= RG_MAX_Q);
	return 0;
}

/* Attached through virtio-mmio, threads launched (vdrv_attach). */
static inline int rg_attach(struct rg *g)
{
	int r = vdrv_attach(&g->d, g->dev);

	g->mmio = !r;
	return r;
}

/* The device gone (it stops its queues and ends its threads first); the
 * RAM and the image stay for the next. */
static inline void rg_dev_destroy(struct rg *g)
{
	if (g->mmio)
		vdrv_wr(&g->d, VIRTIO_MMIO_STATUS, 0);
	virtio_dev_destroy(g->dev);
	if (g->mmio)
		vdrv_detach(&g->d);
	g->mmio = false;
	g->dev = NULL;
}

/* virtio-mmio: negotiate `features` (those of them offered), lay out
 * every queue in mask with qsize entries, DRIVER_OK. 0, or -EIO where
 * the device refused the features or a queue. */
static inline int rg_start(struct rg *g, uint64_t features, unsigned mask, uint16_t qsize)
{
	if (vdrv_negotiate(&g->d, features))
		return -EIO;
	g->qsize = qsize;
	g->d.brk = RG_RINGS;
	for (unsigned q = 0; q < g->nq; q++) {
		g->on[q] = (mask >> q) & 1;
		if (g->on[q] && vdrv_queue_setup(&g->d, q, qsize) != 1)
			return -EIO;
	}
	RG_ASSERT(g->d.brk <= RG_SLOTS);
	vdrv_driver_ok(&g->d);
	return 0;
}

static inline void *rg_host(struct rg *g, uint64_t gpa, uint64_t len)
{
	void *p = gmem_ptr(&g->d.mem, gpa, len);

	RG_ASSERT(p);
	return p;
}

static inline uint64_t rg_slot(unsigned q, unsigned head)
{
	return RG_SLOTS + ((uint64_t)q * RG_QMAX + head) * RG_SLOT;
}

static inline uint64_t rg_pool(unsigned page)
{
	return RG_POOL + (page % RG_POOL_PAGES) * RG_PAGE;
}

/* How a request's chain is shaped (rg_post). */
enum {
	RG_INDIRECT = 1 << 0,       /* one indirect table (needs INDIRECT_DESC) */
	RG_STATUS_IN_B = 1 << 1,    /* its status byte in region B */
	RG_DATA_AT_END = 1 << 2,    /* the last data segment ends where RAM ends */
	RG_SPLIT_HDR = 1 << 3,      /* the header in two descriptors */
	RG_NO_STATUS = 1 << 4,      /* no status descriptor */
	RG_EMPTY_STATUS = 1 << 5,   /* a status descriptor of length 0 */
	RG_WRONG_DIR = 1 << 6,      /* data in the wrong direction (IOERR) */
	/* Not well formed: the device must refuse the chain (NEEDS_RESET). */
	RG_DATA_CROSSES = 1 << 7,   /* the first data segment from A into B */
	RG_DATA_PAST_END = 1 << 8,  /* the last data segment one byte past RAM */
	RG_SHAPES = (1 << 9) - 1,
};

struct rg_req {
	uint32_t type;
	uint64_t sector;
	unsigned nseg;              /* data segments (IN/OUT), at most 3 */
	uint32_t seglen;            /* bytes each, 1..RG_PAGE */
	unsigned pool;              /* first pool page */
	unsigned shape;
	uint32_t dwz_sectors, dwz_flags;
};

/* What the driver knows of a chain it posted. */
struct rg_posted {
	int head;                   /* split: head descriptor; packed: buffer id */
	unsigned n;                 /* descriptors in the ring */
	uint16_t desc[RG_MAX_SG];   /* their ring positions */
	bool ring_ok;               /* well formed: the device takes it */
	uint32_t wtotal;            /* writable bytes */
	bool has_status;            /* a writable last byte and no empty buffer */
	bool status_private;        /* that byte is the request's own (slot or B) */
	uint64_t status_gpa;
};

/* Post r on queue q (enabled) as Linux would lay it out, without a kick.
 * The head, or -ENOSPC (nothing written) when the ring has no room. */
static inline int rg_post(struct rg *g, unsigned q, const struct rg_req *r, struct rg_posted *p)
{
	struct vdrv_queue *vq = &g->d.q[q];
	struct vdrv_sg sg[RG_MAX_SG];
	bool in = r->type == VIRTIO_BLK_T_IN, empty = false;
	uint32_t seglen = r->seglen < 1 ? 1 : r->seglen > RG_PAGE ? RG_PAGE : r->seglen;
	unsigned n = 0, nseg = r->nseg > 3 ? 3 : r->nseg, i, head = vq->free_head;
	bool outside = false;
	uint64_t slot, st;
	uint8_t *h;

	memset(p, 0, sizeof(*p));
	/* vdrv takes a head from its free list: its slot is ours to fill
	 * only when the list has room for the chain. */
	if (!vq->num_free)
		return -ENOSPC;
	slot = rg_slot(q, head);
	h = rg_host(g, slot, RG_SLOT);
	le32_store(h, r->type);
	le32_store(h + 4, 0);
	le64_store(h + 8, r->sector);
	if (r->shape & RG_SPLIT_HDR) {
		sg[n++] = (struct vdrv_sg){ slot, 8, false };
		sg[n++] = (struct vdrv_sg){ slot + 8, 8, false };
	} else {
		sg[n++] = (struct vdrv_sg){ slot, 16, false };
	}
	if (r->type == VIRTIO_BLK_T_DISCARD || r->type == VIRTIO_BLK_T_WRITE_ZEROES) {
		le64_store(h + 16, r->sector);
		le32_store(h + 24, r->dwz_sectors);
		le32_store(h + 28, r->dwz_flags);
		sg[n++] = (struct vdrv_sg){ slot + 16, 16, false };
	} else if (r->type == VIRTIO_BLK_T_GET_ID) {
		sg[n++] = (struct vdrv_sg){ rg_pool(r->pool), 20, !(r->shape & RG_WRONG_DIR) };
	} else if (r->type != VIRTIO_BLK_T_FLUSH) {
		for (i = 0; i < nseg; i++) {
			uint64_t gpa = rg_pool(r->pool + i);
			uint32_t len = seglen;

			if (i == 0 && (r->shape & RG_DATA_CROSSES)) {
				len = len < 2 ? 2 : len;
				gpa = RG_GPA_B - len / 2;
				outside = true;
			} else if (i + 1 == nseg && (r->shape & RG_DATA_PAST_END)) {
				gpa = RG_END - len + 1;
				outside = true;
			} else if (i + 1 == nseg && (r->shape & RG_DATA_AT_END)) {
				gpa = RG_END - len;
			}
			sg[n++] = (struct vdrv_sg){ gpa, len, in != !!(r->shape & RG_WRONG_DIR) };
		}
	}
	st = r->shape & RG_STATUS_IN_B ? RG_GPA_B + (uint64_t)q * RG_QMAX + head : slot + 32;
	*(uint8_t *)rg_host(g, st, 1) = 0xff;
	if (!(r->shape & RG_NO_STATUS))
		sg[n++] = (struct vdrv_sg){ st, r->shape & RG_EMPTY_STATUS ? 0 : 1, true };
	/* An indirect table goes after the slot's fixed fields (vdrv
	 * allocates it at brk). */
	g->d.brk = slot + 48;
	if (r->shape & RG_INDIRECT ? 1 > vq->num_free : n > vq->num_free)
		return -ENOSPC;
	/* The ring positions the chain will take (split: the free list;
	 * packed: consecutive slots), for tests that rewrite them. */
	p->n = r->shape & RG_INDIRECT ? 1 : n;
	for (i = 0; i < p->n; i++)
		p->desc[i] = vq->packed ? (uint16_t)((vq->next_avail + i) % vq->size) :
			     i ? vq->free_next[p->desc[i - 1]] : (uint16_t)head;
	p->head = vdrv_add(&g->d, q, sg, n, r->shape & RG_INDIRECT);
	RG_ASSERT(p->head == (int)head);
	/* An indirect table needs the feature and at most queue-size
	 * entries (§2.7.5.3.1); on a split ring mvm counts the ring's
	 * indirect descriptor into the chain too (split_pop's visited), so
	 * there the table may have one entry less. */
	p->ring_ok = !outside && (!(r->shape & RG_INDIRECT) ||
				  ((g->d.features & VIRTIO_BIT(VIRTIO_RING_F_INDIRECT_DESC)) &&
				   n + !vq->packed <= vq->size));
	for (i = 0; i < n; i++) {
		if (sg[i].writable)
			p->wtotal += sg[i].len;
		if (!sg[i].len)
			empty = true;
	}
	p->has_status = sg[n - 1].writable && !empty;
	p->status_gpa = sg[n - 1].gpa + sg[n - 1].len - 1;
	p->status_private = p->has_status && sg[n - 1].gpa == st;
	return p->head;
}

/* Whether a used element (len) for a well-formed chain p, with the status
 * byte as the device left it, is what virtio-blk returns: 0 without a
 * status byte; otherwise the status is OK, IOERR or UNSUPP, and the used
 * length every writable byte for OK, the status byte alone for an error. */
static inline bool rg_used_ok(struct rg *g, const struct rg_posted *p, uint32_t len)
{
	uint8_t st;

	if (!p->has_status)
		return len == 0;
	if (!p->status_private)
		return len == 1 || len == p->wtotal;
	st = *(volatile uint8_t *)rg_host(g, p->status_gpa, 1);
	if (st == VIRTIO_BLK_S_OK)
		return len == p->wtotal;
	return (st == VIRTIO_BLK_S_IOERR || st == VIRTIO_BLK_S_UNSUPP) && len == 1;
}

/* The most any virtio-blk completion can claim: a whole-disk read and its
 * status byte, or a GET_ID. */
#define RG_USED_MAX (RG_DISK + 1u)

/* --- the guest rewriting a descriptor while the device pops it --- */

/* One bad write into the 16 bytes at d, a descriptor as the ring (or an
 * indirect table) lays it out, or a request header: its address, length,
 * flags, or next (split) / id (packed) becomes one of the values where
 * bugs hide. orig: the bytes as the driver made them. x: the caller's
 * xorshift state (never 0). */
static inline void rg_scribble(uint8_t *d, const uint8_t *orig, bool packed, uint32_t *x)
{
	static const uint64_t addrs[] = { RG_END - 8, RG_GPA_B - 8, 0, RG_GPA_A - 16,
					  ~0ULL - 4095, RG_END, RG_POOL + RG_PAGE };
	static const uint32_t lens[] = { 0, 1, 0x80000000u, 0xffffffffu, 4096, 511,
					 2 * RG_PAGE, 16 * (RG_QMAX + 1) };
	static const uint16_t flips[] = { VRING_DESC_F_NEXT, VRING_DESC_F_WRITE,
					  VRING_DESC_F_INDIRECT,
					  (1u << VRING_PACKED_DESC_F_AVAIL) |
					  (1u << VRING_PACKED_DESC_F_USED), 0xffff };
	/* flags: split at 12, packed at 14; next (split) at 14, id (packed) at 12 */
	unsigned fo = packed ? 14 : 12, no = packed ? 12 : 14;
	uint32_t v;

	v = *x;
	v ^= v << 13;
	v ^= v >> 17;
	v ^= v << 5;
	*x = v;
	switch (v % 4) {
	case 0:
		__atomic_store_n((uint64_t *)(void *)d, htole64(addrs[(v >> 8) % ARRAY_SIZE(addrs)]),
				 __ATOMIC_RELAXED);
		break;
	case 1:
		__atomic_store_n((uint32_t *)(void *)(d + 8), htole32(lens[(v >> 8) % ARRAY_SIZE(lens)]),
				 __ATOMIC_RELAXED);
		break;
	case 2:
		__atomic_store_n((uint16_t *)(void *)(d + fo),
				 htole16(le16_load(orig + fo) ^ flips[(v >> 8) % ARRAY_SIZE(flips)]),
				 __ATOMIC_RELAXED);
		break;
	default:
		__atomic_store_n((uint16_t *)(void *)(d + no), htole16((uint16_t)(v >> 16)),
				 __ATOMIC_RELAXED);
		break;
	}
}

/* The 16 bytes at d as the driver made them again. */
static inline void rg_unscribble(uint8_t *d, const uint8_t *orig)
{
	for (unsigned b = 0; b < 16; b += 2) {
		uint16_t v;

		memcpy(&v, orig + b, sizeof(v));
		__atomic_store_n((uint16_t *)(void *)(d + b), v, __ATOMIC_RELAXED);
	}
}

/* --- what changes in guest memory --- */

static inline void rg_snap_take(struct rg *g)
{
	memcpy(g->snap, g->d.ram, RG_SIZE_A);
	memcpy(g->snap + RG_SIZE_A, g->b, RG_SIZE_B);
}

/* Guest RAM as in the last snapshot; else prints the first byte that
 * changed. */
static inline bool rg_snap_same(struct rg *g)
{
	if (!memcmp(g->snap, g->d.ram, RG_SIZE_A) && !memcmp(g->snap + RG_SIZE_A, g->b, RG_SIZE_B))
		return true;
	for (uint64_t i = 0; i < RG_SIZE_A + RG_SIZE_B; i++) {
		uint8_t now = i < RG_SIZE_A ? g->d.ram[i] : g->b[i - RG_SIZE_A];

		if (now != g->snap[i]) {
			fprintf(stderr, "guest RAM changed at gpa 0x%llx: 0x%02x -> 0x%02x\n",
				(unsigned long long)(i < RG_SIZE_A ? RG_GPA_A + i :
						     RG_GPA_B + i - RG_SIZE_A), g->snap[i], now);
			return false;
		}
	}
	return true;
}

/* --- what the process holds --- */

static inline unsigned rg_count_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	unsigned n = 0;

	RG_ASSERT(dir);
	while ((e = readdir(dir)))
		n += e->d_name[0] != '.';
	closedir(dir);
	return n - 1;           /* the directory's own */
}

static inline unsigned rg_count_threads(const char *prefix)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;

	RG_ASSERT(dir);
	while ((e = readdir(dir))) {
		char path[300], comm[32] = "";
		int fd;
		ssize_t k;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;       /* ended meanwhile */
		k = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		n += k > 0 && !strncmp(comm, prefix, strlen(prefix));
	}
	closedir(dir);
	return n;
}

/* rg_count_threads once it is n, or after 2 s: a joined thread stays
 * listed until the kernel has finished its exit, a moment later. */
static inline unsigned rg_threads_settled(const char *prefix, unsigned n)
{
	unsigned c, i;

	for (i = 0; (c = rg_count_threads(prefix)) != n && i < 20000; i++)
		usleep(100);
	return c;
}

static inline uint64_t rg_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
