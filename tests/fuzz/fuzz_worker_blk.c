/* virtio-blk on the real queue worker (devices/virtq_worker.c), threaded:
 * blk_queue.c, blk_req.c and virtq.c on their I/O threads, each with its
 * own io_uring made disabled and restricted as mvm makes it (vqw_init,
 * vqw_set_io), under a guest that races them. Unlike fuzz_virtq_split
 * and fuzz_virtq_packed (fuzz_blkq.h: the worker replaced by a
 * single-threaded fake), nothing of the device is faked here.
 *
 * Each input builds a disk of 1..4 queues served by 1..3 I/O threads on a
 * 64 KiB image, attaches it through virtio-mmio (tests/unit/vdrv.h, which
 * launches the threads as the VM's start does), negotiates, and then
 * drives the guest from the fuzzer's thread while the threads run:
 * well-formed and malformed chains (split and packed rings, indirect
 * tables, buffers in the second RAM region, ending where RAM ends,
 * crossing from one region into the other or past the end), kicks, raw
 * descriptor, avail and byte writes, descriptors rewritten over and over
 * right after they were made available and kicked (the guest changing
 * memory while a worker pops it), and resets (status 0) at any point,
 * each followed by a new negotiation. tests/unit/race_guest.h has the
 * guarded RAM, the layout, and the backend that checks every host I/O
 * (and can make it slow, so that resets find it in flight).
 *
 * Invariants (RG_ASSERT / FZ_ASSERT, ASan, UBSan, a fault in a guard page):
 *  - no access outside guest RAM: the RAM sits between PROT_NONE pages,
 *    so a stray access by the device faults; every host I/O is checked on
 *    its I/O thread before the kernel sees it (rg_check_io);
 *  - every used element is sane where the guest left the device's areas
 *    alone: an id below the queue size, a length no completion can exceed
 *    (RG_USED_MAX); while the guest has posted only well-formed chains
 *    since the last start ("strict"), every used element is one of them,
 *    returned once, with the length and status byte virtio-blk gives
 *    (rg_used_ok), the device never asks for a reset, and at the end every
 *    chain comes back within 5 s of a kick;
 *  - after a reset returns (and at teardown), guest memory does not
 *    change: all of it is compared before and after a sleep longer than
 *    the slow backend's host I/O;
 *  - teardown leaves no I/O thread (mvm-blk-q*) and no fd behind.
 * The I/O threads run without their seccomp filter: a filtered thread
 * that trips an invariant could not let libFuzzer write the input out
 * (test_blk covers serving inside the filter).
 *
 * Not deterministic: the I/O threads run when the kernel lets them, so an
 * input does not replay the same way, and a saved crash may need many
 * runs to show again (`build/fuzz/fuzz_worker_blk -runs=1000 FILE`); the
 * coverage one input reaches varies between runs too. Each input is
 * bounded: FW_STEPS steps, FW_RESETS resets, sleeps of at most a few
 * milliseconds; 50 to 90 inputs a second on the project's 2-CPU host
 * (tests/fuzz/README.md). */
#include "tests/fuzz/fuzz.h"
#include "tests/unit/race_guest.h"

#define FW_STEPS 128
#define FW_RESETS 6
#define FW_RACE_MAX 64          /* rewrites per race */

struct fw_live {
	bool live;
	struct rg_posted p;
};

static struct {
	struct rg g;
	bool made;                  /* g's RAM and image exist (kept across inputs) */
	unsigned slow_us;           /* the longest a host I/O takes */
	bool strict;                /* only well-formed chains since the last start */
	bool used_trusted;          /* the device's areas untouched by the guest since */
	unsigned outstanding;       /* strict: chains posted and not yet used */
	unsigned resets;
	uint64_t want;              /* features asked for at the first start */
	struct fw_live live[RG_MAX_Q][RG_QMAX];
} fw;

static void fw_sleep_us(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000 };

	nanosleep(&ts, NULL);
}

/* Features, the queues to enable and their size, from 3 input bytes; the
 * guest negotiates and sets DRIVER_OK. */
static void fw_start(struct fz *f)
{
	uint8_t fb = fz_u8(f), mb = fz_u8(f), sb = fz_u8(f);
	uint64_t want = VIRTIO_BIT(VIRTIO_F_VERSION_1) | 0x7fffffULL |
			(fb & 1 ? VIRTIO_BIT(VIRTIO_F_RING_PACKED) : 0) |
			(fb & 2 ? VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX) : 0) |
			(fb & 4 ? VIRTIO_BIT(VIRTIO_RING_F_INDIRECT_DESC) : 0);
	unsigned all = (1u << fw.g.nq) - 1, mask = mb & 0x80 ? all : mb & all;
	uint16_t qsize = fb & 1 ? (uint16_t)(1 + sb % RG_QMAX) : (uint16_t)(1u << (sb % 9));

	memset(fw.live, 0, sizeof(fw.live));
	fw.strict = fw.used_trusted = true;
	fw.outstanding = 0;
	FZ_ASSERT(rg_start(&fw.g, want, mask, qsize) == 0);
}

/* The reset, then guest memory must stay as it is. */
static void fw_quiet_reset(void)
{
	vdrv_wr(&fw.g.d, VIRTIO_MMIO_STATUS, 0);
	FZ_ASSERT(vdrv_status(&fw.g.d) == 0);
	rg_snap_take(&fw.g);
	fw_sleep_us(2 * fw.slow_us + 100);
	FZ_ASSERT(rg_snap_same(&fw.g));
}

static void fw_check_used(unsigned q, uint32_t id, uint32_t len)
{
	struct fw_live *l;

	if (!fw.used_trusted)
		return;         /* the guest scribbled over what it reads back */
	FZ_ASSERT(id < fw.g.qsize);
	FZ_ASSERT(len <= RG_USED_MAX);
	if (!fw.strict)
		return;
	l = &fw.live[q][id];
	FZ_ASSERT(l->live);                   /* posted, and not returned before */
	FZ_ASSERT(rg_used_ok(&fw.g, &l->p, len));
	l->live = false;
	fw.outstanding--;
}

static void fw_reap(void)
{
	uint32_t id, len;

	for (unsigned q = 0; q < fw.g.nq; q++) {
		unsigned guard = 0;

		if (!fw.g.on[q])
			continue;
		while (++guard < 3u * RG_QMAX && vdrv_get_used(&fw.g.d, q, &id, &len))
			fw_check_used(q, id, len);
	}
	if (fw.strict)
		FZ_ASSERT(!(vdrv_status(&fw.g.d) & VIRTIO_CONFIG_S_NEEDS_RESET));
}

static void fw_post(unsigned q, const struct rg_req *r)
{
	struct rg_posted p;

	if (!fw.g.on[q] || rg_post(&fw.g, q, r, &p) < 0)
		return;
	if (!p.ring_ok)
		fw.strict = false;
	if (!fw.strict)
		return;
	FZ_ASSERT(!fw.live[q][p.head].live);
	fw.live[q][p.head] = (struct fw_live){ true, p };
	fw.outstanding++;
}

static uint32_t fw_seglen(uint8_t b)
{
	/* Mostly whole sectors; sometimes a length no request may have. */
	return b & 0x80 ? (uint32_t)(b & 0x7f) * 37 + 1 : 512u * (1 + b % 8);
}

/* One request from the input: any type, shape, sector and lengths. */
static void op_req(struct fz *f)
{
	static const uint32_t types[] = { VIRTIO_BLK_T_IN, VIRTIO_BLK_T_OUT, VIRTIO_BLK_T_FLUSH,
					  VIRTIO_BLK_T_GET_ID, VIRTIO_BLK_T_DISCARD,
					  VIRTIO_BLK_T_WRITE_ZEROES, 99 };
	unsigned q = fz_u8(f) % fw.g.nq;
	struct rg_req r;

	memset(&r, 0, sizeof(r));
	r.type = types[fz_u8(f) % ARRAY_SIZE(types)];
	r.sector = fz_u16(f) % (RG_DISK / 512 + 4);
	r.nseg = fz_u8(f) % 4;
	r.seglen = fw_seglen(fz_u8(f));
	r.pool = fz_u8(f);
	r.shape = fz_u16(f) & RG_SHAPES;
	r.dwz_sectors = fz_u8(f) % 16;
	r.dwz_flags = fz_u8(f) % 4;
	fw_post(q, &r);
}

/* Up to 16 well-formed reads and writes over the queues, then a kick of
 * each: load for the threads, from few input bytes. */
static void op_burst(struct fz *f)
{
	uint8_t n = 1 + fz_u8(f) % 16, seed = fz_u8(f);

	for (unsigned i = 0; i < n; i++) {
		struct rg_req r = { .type = (seed + i) & 1 ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN,
				    .sector = (seed * 7u + i * 8) % (RG_DISK / 512 - 8),
				    .nseg = 1 + i % 2, .seglen = 2048, .pool = seed + i };

		fw_post((seed + i) % fw.g.nq, &r);
	}
	for (unsigned q = 0; q < fw.g.nq; q++)
		if (fw.g.on[q])
			vdrv_kick(&fw.g.d, q);
}

/* Guest addresses where trouble hides: around the ends of both regions,
 * below RAM, and the top of the address space. */
static uint64_t fw_addr(struct fz *f)
{
	uint8_t how = fz_u8(f);
	uint16_t off = fz_u16(f);

	switch (how % 8) {
	case 0: return rg_pool(off);
	case 1: return RG_GPA_B - (off % 64);
	case 2: return RG_END - (off % 64);
	case 3: return RG_END + (off % 64);
	case 4: return RG_GPA_A - 1 - (off % 64);
	case 5: return ~0ULL - (off % 4096);
	case 6: return RG_GPA_A + off;          /* rings and slots */
	default: return fz_u64(f);
	}
}

/* A raw descriptor anywhere in a ring, perhaps made available. */
static void op_desc(struct fz *f)
{
	unsigned q = fz_u8(f) % fw.g.nq;
	uint16_t i = fz_u16(f), flags, next;
	uint64_t addr = fw_addr(f);
	uint32_t len = fz_u8(f) & 1 ? fz_u32(f) : fz_u16(f) % 0x2000;
	uint8_t how = fz_u8(f);
	struct vdrv_queue *vq = &fw.g.d.q[q];

	flags = fz_u16(f);
	next = fz_u16(f);
	if (!fw.g.on[q])
		return;
	i %= vq->size;
	fw.strict = false;
	if (vq->packed) {
		fw.used_trusted = false;        /* the ring is the used ring too */
		if (how & 1)
			flags = (uint16_t)((flags & ~((1u << VRING_PACKED_DESC_F_AVAIL) |
						      (1u << VRING_PACKED_DESC_F_USED))) |
					   vdrv_pavail_bits(vq->avail_wrap));
		vdrv_pdesc_set(&fw.g.d, q, i, addr, len, next, flags);
		return;
	}
	vdrv_desc_set(&fw.g.d, q, i, addr, len, flags, next);
	if (how & 1)
		vdrv_avail_add_head(&fw.g.d, q, i);
}

/* Split: a raw head or avail.idx, avail.flags, used_event. Packed: the
 * driver's event suppression (interrupts only). */
static void op_avail(struct fz *f)
{
	unsigned q = fz_u8(f) % fw.g.nq;
	uint16_t v = fz_u16(f);
	uint8_t how = fz_u8(f);

	if (!fw.g.on[q])
		return;
	if (fw.g.d.q[q].packed) {
		vdrv_packed_driver_event_set(&fw.g.d, q, v, how % 4);
		return;
	}
	if (how & 1) {
		fw.strict = false;
		if (how & 2)
			vdrv_avail_idx_set(&fw.g.d, q, v);
		else
			vdrv_avail_add_head(&fw.g.d, q, v);
	}
	if (how & 4)
		vdrv_avail_flags_set(&fw.g.d, q, how >> 7);
	if (how & 8)
		vdrv_used_event_set(&fw.g.d, q, v);
}

/* Raw bytes anywhere in guest RAM. */
static void op_poke(struct fz *f)
{
	uint64_t off = fz_u32(f) % (RG_SIZE_A + RG_SIZE_B);
	unsigned len = fz_u8(f) % 16;
	uint64_t gpa = off < RG_SIZE_A ? RG_GPA_A + off : RG_GPA_B + off - RG_SIZE_A;

	for (unsigned i = 0; i < len && gpa + i < RG_END; i++) {
		uint64_t at = gpa + i;

		/* Rings and request slots (and B's status bytes): chains
		 * are no longer what the guest posted; the rings hold what
		 * the device wrote, too. Data pages are anyone's. */
		if (at < RG_POOL || (at >= RG_GPA_B && at < RG_GPA_B + RG_MAX_Q * RG_QMAX))
			fw.strict = false;
		if (at < RG_SLOTS)
			fw.used_trusted = false;
		__atomic_store_n((uint8_t *)rg_host(&fw.g, at, 1), fz_u8(f), __ATOMIC_RELAXED);
	}
}

/* A well-formed read made available and kicked, then one of its
 * descriptors (or indirect entries, or its header) rewritten again and
 * again, each time to a bad value and back, while a worker may be popping
 * it: the device must take the chain whole as it was at one moment, or
 * refuse it, and never reach outside RAM. */
static void op_race(struct fz *f)
{
	unsigned q = fz_u8(f) % fw.g.nq, shape = fz_u8(f), k = fz_u8(f), rounds, i;
	uint32_t x = fz_u32(f) | 1;
	struct rg_req r = { .type = VIRTIO_BLK_T_IN, .nseg = 1 + shape % 3,
			    .seglen = 512u * (1 + k % 8), .pool = k,
			    .shape = shape & (RG_INDIRECT | RG_SPLIT_HDR | RG_STATUS_IN_B) };
	struct vdrv_queue *vq = &fw.g.d.q[q];
	struct rg_posted p;
	uint8_t *d, orig[16];

	rounds = 1 + fz_u8(f) % FW_RACE_MAX;
	if (!fw.g.on[q])
		return;
	r.sector = x % (RG_DISK / 512 - 8);
	if (rg_post(&fw.g, q, &r, &p) < 0)
		return;
	fw.strict = false;
	if (vq->packed)
		fw.used_trusted = false;
	/* The target: a ring descriptor of the chain, an entry of its
	 * indirect table, or its header. */
	if (k & 0x40)
		d = rg_host(&fw.g, rg_slot(q, (unsigned)p.head), 16);
	else if ((r.shape & RG_INDIRECT) && (k & 0x80))
		d = rg_host(&fw.g, rg_slot(q, (unsigned)p.head) + 48 + 16 * (k % 3), 16);
	else
		d = vdrv_host(&fw.g.d, vq->desc + 16ULL * p.desc[(k >> 3) % p.n]);
	memcpy(orig, d, 16);
	vdrv_kick(&fw.g.d, q);
	for (i = 0; i < rounds; i++) {
		rg_scribble(d, orig, vq->packed, &x);
		if (x & 0x100)
			sched_yield();
		/* The last bad value may stay. */
		if (!(x & 0x200) || i + 1 < rounds)
			rg_unscribble(d, orig);
	}
}

static void op_wait(struct fz *f)
{
	unsigned us = (1 + fz_u8(f) % 16) * 20, waited;

	for (waited = 0; waited < us; waited += 20) {
		fw_reap();
		if (fw.strict && !fw.outstanding)
			break;
		fw_sleep_us(20);
	}
	fw_reap();
}

/* The end: with only well-formed chains, every one comes back. */
static void fw_drain(void)
{
	uint64_t until = rg_now_ns() + 5000000000ull;

	if (!fw.strict)
		return;
	for (unsigned q = 0; q < fw.g.nq; q++)
		if (fw.g.on[q])
			vdrv_kick(&fw.g.d, q);
	while (fw.outstanding && rg_now_ns() < until) {
		fw_reap();
		if (fw.outstanding)
			fw_sleep_us(100);
	}
	if (fw.outstanding)
		fprintf(stderr, "%u well-formed requests not completed in 5 s\n", fw.outstanding);
	FZ_ASSERT(fw.outstanding == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned slow[4][3] = {      /* mode, delay, sleep_us */
		{ RG_IO_FILE, 0, 0 }, { RG_IO_TIMEOUT, 0, 0 }, { RG_IO_TIMEOUT, 1, 0 },
		{ RG_IO_SLOW_COMPLETE, 0, 50 } };
	static const unsigned slow_us[4] = { 0, 100, 500, 50 };
	struct fz in = { data, size };
	uint8_t c0 = fz_u8(&in), c1 = fz_u8(&in);
	unsigned nq = 1 + c1 % 4, nt = 1 + ((c1 >> 2) & 3) % 3, io = (c1 >> 5) % 4, fds, steps = 0;
	char opts[160];

	if (!fw.made) {
		rg_init(&fw.g);
		fw.made = true;
	}
	fds = rg_count_fds();
	fw.resets = 0;
	fw.slow_us = slow_us[io];
	rg_io_mode(slow[io][0], slow[io][1], slow[io][2]);
	snprintf(opts, sizeof(opts), ",queues=%u,io-threads=%u,poll=%u,gather=%u%s%s%s%s", nq, nt,
		 c0 & 0x80 ? 32 : 0, c1 & 0x80 ? 200 : 0, c0 & 0x08 ? ",discard=on" : "",
		 c0 & 0x10 ? ",ro" : "", c0 & 0x20 ? ",fixed-buffers=on" : "",
		 c0 & 0x40 ? ",cache=none" : "");
	FZ_ASSERT(rg_dev_new(&fw.g, opts) == 0);
	FZ_ASSERT(rg_attach(&fw.g) == 0);
	FZ_ASSERT(rg_count_threads(RG_THREADS) == fw.g.nworkers);
	fw_start(&in);

	while (fz_left(&in) && ++steps <= FW_STEPS) {
		switch (fz_u8(&in) % 10) {
		case 0: op_req(&in); break;
		case 1: op_burst(&in); break;
		case 2: op_desc(&in); break;
		case 3: op_avail(&in); break;
		case 4: op_poke(&in); break;
		case 5: {
			unsigned q = fz_u8(&in) % fw.g.nq;

			if (fw.g.on[q])
				vdrv_kick(&fw.g.d, q);
			break;
		}
		case 6: op_wait(&in); break;
		case 7: fw_reap(); break;
		case 8:
			if (fw.resets++ < FW_RESETS) {
				fw_quiet_reset();
				fw_start(&in);
			}
			break;
		case 9: op_race(&in); break;
		}
	}
	fw_drain();
	fw_quiet_reset();
	rg_dev_destroy(&fw.g);
	FZ_ASSERT(rg_threads_settled(RG_THREADS, 0) == 0);
	FZ_ASSERT(rg_count_fds() == fds);
	return 0;
}

/* ---- seeds ---- */

enum { OP_REQ, OP_BURST, OP_DESC, OP_AVAIL, OP_POKE, OP_KICK, OP_WAIT, OP_REAP, OP_RESET,
       OP_RACE };

/* c0: packed/event_idx/indirect are start bytes; c0 here: 0x08 discard,
 * 0x10 ro, 0x20 fixed-buffers, 0x40 cache=none, 0x80 poll. c1: queues - 1
 * (bits 0-1), threads - 1 (bits 2-3, mod 3), slow I/O (bits 5-6), 0x80
 * gather. Then the start: features (1 packed, 2 event_idx, 4 indirect),
 * queue mask (0x80: all), queue size. */
static void seed_head(struct fz_buf *s, uint8_t c0, uint8_t c1, uint8_t feat, uint8_t qsel)
{
	s->n = 0;
	fzb_u8(s, c0);
	fzb_u8(s, c1);
	fzb_u8(s, feat);
	fzb_u8(s, 0x80);
	fzb_u8(s, qsel);
}

static void seed_req(struct fz_buf *s, uint8_t q, uint8_t type, uint16_t sector, uint8_t nseg,
		     uint8_t seglen, uint16_t shape)
{
	fzb_u8(s, OP_REQ);
	fzb_u8(s, q);
	fzb_u8(s, type);
	fzb_u16(s, sector);
	fzb_u8(s, nseg);
	fzb_u8(s, seglen);
	fzb_u8(s, q);                       /* pool page */
	fzb_u16(s, shape);
	fzb_u8(s, 8);                       /* dwz sectors */
	fzb_u8(s, 0);                       /* dwz flags */
}

static void seed_kick_wait(struct fz_buf *s, unsigned nq)
{
	for (unsigned q = 0; q < nq; q++) {
		fzb_u8(s, OP_KICK);
		fzb_u8(s, (uint8_t)q);
	}
	fzb_u8(s, OP_WAIT);
	fzb_u8(s, 15);
}

static void seed_race(struct fz_buf *s, uint8_t q, uint8_t shape, uint8_t k, uint32_t x)
{
	fzb_u8(s, OP_RACE);
	fzb_u8(s, q);
	fzb_u8(s, shape);
	fzb_u8(s, k);
	fzb_u32(s, x);
	fzb_u8(s, 63);
}

static void fuzz_seeds(void)
{
	struct fz_buf s;

	/* Two queues on one thread: reads and writes of every type, each
	 * shape that is well formed, kicked and waited for. */
	seed_head(&s, 0x08, 0x01 | 0x00, 0x06, 6);
	for (uint8_t t = 0; t < 7; t++)
		seed_req(&s, t % 2, t, (uint16_t)(t * 8), 2, 1, (uint16_t)(1u << (t % 7)));
	seed_kick_wait(&s, 2);
	fuzz_seed("every_type_two_queues", s.b, s.n);

	/* Four queues on three threads, packed, slow host I/O (a 500 us
	 * timeout): bursts, then a reset with I/O in flight, then more. */
	seed_head(&s, 0x00, 0x03 | 0x08 | 0x40, 0x07, 31);
	fzb_u8(&s, OP_BURST); fzb_u8(&s, 15); fzb_u8(&s, 3);
	fzb_u8(&s, OP_RESET); fzb_u8(&s, 0x07); fzb_u8(&s, 0x80); fzb_u8(&s, 63);
	fzb_u8(&s, OP_BURST); fzb_u8(&s, 15); fzb_u8(&s, 9);
	fzb_u8(&s, OP_WAIT); fzb_u8(&s, 15);
	fzb_u8(&s, OP_RESET); fzb_u8(&s, 0x02); fzb_u8(&s, 0x85); fzb_u8(&s, 5);
	fzb_u8(&s, OP_BURST); fzb_u8(&s, 7); fzb_u8(&s, 1);
	fuzz_seed("reset_mid_io_packed_4q_3t", s.b, s.n);

	/* Three queues on two threads, split, completions that sleep on the
	 * I/O thread, gather and poll on, a reset while they sleep. */
	seed_head(&s, 0x80, 0x02 | 0x04 | 0x60 | 0x80, 0x06, 4);
	fzb_u8(&s, OP_BURST); fzb_u8(&s, 12); fzb_u8(&s, 0);
	fzb_u8(&s, OP_RESET); fzb_u8(&s, 0x06); fzb_u8(&s, 0x80); fzb_u8(&s, 4);
	fzb_u8(&s, OP_BURST); fzb_u8(&s, 12); fzb_u8(&s, 5);
	seed_kick_wait(&s, 3);
	fuzz_seed("reset_while_completing_split_3q_2t", s.b, s.n);

	/* A descriptor of a kicked read rewritten while it is popped: split
	 * and packed, a ring descriptor, an indirect entry, the header; a
	 * reset after each (the device may have asked for one). */
	for (unsigned packed = 0; packed < 2; packed++) {
		static const uint8_t shapes[3] = { 0, RG_INDIRECT, 0 }, ks[3] = { 0x08, 0x80, 0x40 };

		seed_head(&s, 0x00, 0x00, (uint8_t)(0x06 | packed), 15);
		for (unsigned i = 0; i < 3; i++) {
			seed_race(&s, 0, shapes[i], ks[i], 0x1234567u * (i + 1));
			fzb_u8(&s, OP_WAIT); fzb_u8(&s, 15);
			fzb_u8(&s, OP_RESET); fzb_u8(&s, (uint8_t)(0x06 | packed)); fzb_u8(&s, 0x80);
			fzb_u8(&s, 15);
		}
		fuzz_seed(packed ? "rewrite_during_pop_packed" : "rewrite_during_pop_split",
			  s.b, s.n);
	}

	/* Buffers at the ends of RAM: in region B, ending at its end (fine),
	 * crossing from A into B, one byte past the end (refused). */
	seed_head(&s, 0x00, 0x01, 0x06, 5);
	seed_req(&s, 0, 0, 0, 1, 7, RG_DATA_AT_END | RG_STATUS_IN_B);
	seed_req(&s, 1, 1, 8, 1, 7, RG_DATA_AT_END);
	seed_kick_wait(&s, 2);
	seed_req(&s, 0, 0, 16, 2, 3, RG_DATA_CROSSES);
	seed_req(&s, 1, 0, 16, 1, 3, RG_DATA_PAST_END);
	seed_kick_wait(&s, 2);
	fuzz_seed("buffers_at_ram_ends", s.b, s.n);

	/* Raw descriptors and avail entries, and bytes poked into a ring. */
	seed_head(&s, 0x00, 0x00, 0x00, 3);
	fzb_u8(&s, OP_DESC); fzb_u8(&s, 0); fzb_u16(&s, 1); fzb_u8(&s, 2); fzb_u16(&s, 4);
	fzb_u8(&s, 0); fzb_u16(&s, 16); fzb_u8(&s, 1); fzb_u16(&s, VRING_DESC_F_WRITE);
	fzb_u16(&s, 0);
	fzb_u8(&s, OP_AVAIL); fzb_u8(&s, 0); fzb_u16(&s, 300); fzb_u8(&s, 3);
	fzb_u8(&s, OP_POKE); fzb_u32(&s, 2); fzb_u8(&s, 4); fzb_u32(&s, 0x01000100);
	fzb_u8(&s, OP_KICK); fzb_u8(&s, 0);
	fzb_u8(&s, OP_WAIT); fzb_u8(&s, 8);
	fuzz_seed("raw_ring_writes", s.b, s.n);
}
