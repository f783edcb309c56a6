/* Races between a guest and virtio-blk's real I/O threads (the generic
 * worker, devices/virtq_worker.c, with real io_uring rings and their
 * restrictions): resets and bus mastering turned off while every queue
 * has host I/O in flight, a descriptor rewritten while a thread pops it,
 * DRIVER_OK and reset in a tight loop. Each case repeats its race for a
 * bounded time (RACE_ITERS or RACE_NS, whichever ends first) so that a
 * window that is rarely hit still is. No KVM; guest RAM between guard
 * pages and host I/O checked before it is issued (tests/unit/race_guest.h). */
#include "tests/unit/check.h"
#include "tests/unit/race_guest.h"
#include "devices/virtio_pci.h"
#include "vmm/kvm/vm.h"

#include <pthread.h>
#include <sched.h>

#define RACE_ITERS 200
#define RACE_NS 2000000000ull
#define QSIZE 64

static struct rg g;

static uint64_t features(bool packed)
{
	return VIRTIO_BIT(VIRTIO_F_VERSION_1) | VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
	       VIRTIO_BIT(VIRTIO_RING_F_INDIRECT_DESC) | 0x7fffffULL |
	       (packed ? VIRTIO_BIT(VIRTIO_F_RING_PACKED) : 0);
}

/* The disk "<image><opts>" on guarded RAM, its threads launched, not yet
 * on a transport. */
static void disk_new(const char *opts)
{
	check_need_io_uring();
	rg_init(&g);
	rg_io_mode(RG_IO_FILE, 0, 0);
	CHECK_EQ(rg_dev_new(&g, opts), 0);
}

static bool budget_left(unsigned it, uint64_t t0)
{
	return it < RACE_ITERS && rg_now_ns() - t0 < RACE_NS;
}

static struct rg_req read_req(uint64_t sector, unsigned page)
{
	return (struct rg_req){ .type = VIRTIO_BLK_T_IN, .sector = sector, .nseg = 1,
				.seglen = RG_PAGE, .pool = page };
}

/* One element from q's used ring within 5 s (else the case fails). */
static void wait_used(unsigned q, uint32_t *id, uint32_t *len)
{
	uint64_t until = rg_now_ns() + 5000000000ull;

	while (!vdrv_get_used(&g.d, q, id, len)) {
		if (rg_now_ns() > until) {
			fprintf(stderr, "queue %u: no used element within 5 s\n", q);
			CHECK(0);
		}
		usleep(50);
	}
}

/* A read of the page at `sector` into pool page q on each enabled queue,
 * kicked and waited for: every queue serves, with the right data. */
static void each_queue_reads(unsigned sector)
{
	for (unsigned q = 0; q < g.nq; q++) {
		struct rg_req r = read_req(sector + q * 8, q);
		struct rg_posted p;
		uint32_t id, len;
		const uint8_t *data;

		if (!g.on[q])
			continue;
		CHECK(rg_post(&g, q, &r, &p) >= 0);
		vdrv_kick(&g.d, q);
		wait_used(q, &id, &len);
		CHECK_EQ(id, p.head);
		CHECK_EQ(len, RG_PAGE + 1);
		CHECK_EQ(*(uint8_t *)rg_host(&g, p.status_gpa, 1), VIRTIO_BLK_S_OK);
		data = rg_host(&g, rg_pool(q), RG_PAGE);
		for (unsigned i = 0; i < RG_PAGE; i++)
			if (data[i] != rg_pattern((sector + q * 8) * 512 + i))
				CHECK(!"read data differs from the image");
	}
}

/* --- a driver that keeps posting from a thread of its own --- */

struct poster {
	pthread_t t;
	bool stop;                  /* atomic */
	unsigned long posted, used; /* atomic */
	struct rg_posted live[RG_MAX_Q][RG_QMAX];
	bool is_live[RG_MAX_Q][RG_QMAX];
};

/* Reads on every enabled queue as fast as the rings take them, each
 * queue kicked after each round, used elements taken and checked as they
 * come. It owns the driver's side of the rings until poster_stop. */
static void *poster_run(void *arg)
{
	struct poster *p = arg;
	unsigned round = 0;

	while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
		bool full = true;

		for (unsigned q = 0; q < g.nq; q++) {
			uint32_t id, len;

			if (!g.on[q])
				continue;
			for (unsigned k = 0; k < 4; k++) {
				struct rg_req r = read_req((round * 5 + k * 8) % (RG_DISK / 512 - 8),
							   round + k);
				struct rg_posted ps;

				if (rg_post(&g, q, &r, &ps) < 0)
					break;
				full = false;
				p->live[q][ps.head] = ps;
				p->is_live[q][ps.head] = true;
				__atomic_add_fetch(&p->posted, 1, __ATOMIC_RELAXED);
			}
			vdrv_kick(&g.d, q);
			while (vdrv_get_used(&g.d, q, &id, &len)) {
				RG_ASSERT(id < g.qsize && p->is_live[q][id]);
				RG_ASSERT(rg_used_ok(&g, &p->live[q][id], len));
				p->is_live[q][id] = false;
				__atomic_add_fetch(&p->used, 1, __ATOMIC_RELAXED);
			}
		}
		round++;
		if (full)
			usleep(20);
	}
	return NULL;
}

static void poster_start(struct poster *p)
{
	memset(p, 0, sizeof(*p));
	CHECK_EQ(pthread_create(&p->t, NULL, poster_run, p), 0);
}

static void poster_stop(struct poster *p)
{
	__atomic_store_n(&p->stop, true, __ATOMIC_RELEASE);
	CHECK_EQ(pthread_join(p->t, NULL), 0);
}

/* Every queue with host I/O in flight at once, within 2 s. */
static bool all_queues_in_flight(void)
{
	struct blk_dev *blk = g.dev->priv;
	uint64_t until = rg_now_ns() + 2000000000ull;

	while (rg_now_ns() < until) {
		unsigned busy = 0;

		for (unsigned q = 0; q < g.nq; q++)
			busy += __atomic_load_n(&blk->queues[q].inflight, __ATOMIC_ACQUIRE) > 0;
		if (busy == g.nq)
			return true;
		sched_yield();
	}
	return false;
}

/* The split used rings, which only the device writes: copied right after
 * the reset (or the bus master write) returned, while the poster may
 * still be posting, and compared at the end. */
static uint8_t used_copy[RG_MAX_Q][VIRTQ_USED_BYTES(QSIZE)];

static void used_rings_take(void)
{
	for (unsigned q = 0; q < g.nq; q++)
		if (!g.d.q[q].packed)
			memcpy(used_copy[q], rg_host(&g, g.d.q[q].used, VIRTQ_USED_BYTES(QSIZE)),
			       VIRTQ_USED_BYTES(QSIZE));
}

static bool used_rings_same(void)
{
	for (unsigned q = 0; q < g.nq; q++)
		if (!g.d.q[q].packed &&
		    memcmp(used_copy[q], rg_host(&g, g.d.q[q].used, VIRTQ_USED_BYTES(QSIZE)),
			   VIRTQ_USED_BYTES(QSIZE)))
			return false;
	return true;
}

/* Host I/O slow enough for the race: a 2 ms timeout in the kernel
 * (cancelled by the stop), or a 1 ms sleep in each completion on the
 * I/O thread (which the stop must wait out). */
static void slow_io(unsigned it)
{
	if (it & 2)
		rg_io_mode(RG_IO_TIMEOUT, 2, 0);
	else
		rg_io_mode(RG_IO_SLOW_COMPLETE, 0, 1000);
}

/* The longest host I/O above is 2 ms: a write that a stop let through
 * comes well within this. */
#define LATE_WRITE_US 5000

/* Once `stop` (a reset, bus mastering off) has returned, with every queue
 * busy and the driver still posting: nothing in guest memory changes
 * any more, neither the used rings (copied at once) nor anything else
 * (all of RAM copied once the driver is quiet), over LATE_WRITE_US. */
static void stop_while_busy_writes_nothing_after(void (*stop)(void))
{
	struct poster p;

	poster_start(&p);
	CHECK(all_queues_in_flight());
	stop();
	used_rings_take();
	poster_stop(&p);
	rg_snap_take(&g);
	usleep(LATE_WRITE_US);
	CHECK(used_rings_same());
	CHECK(rg_snap_same(&g));
	CHECK(__atomic_load_n(&p.posted, __ATOMIC_RELAXED) > 0);
}

static void mmio_reset(void)
{
	vdrv_wr(&g.d, VIRTIO_MMIO_STATUS, 0);
}

/* A reset while every queue of a four-queue disk on two I/O threads has
 * host I/O in flight and the driver keeps posting: once the status write
 * returns, the device writes nothing to guest memory, split or packed,
 * with host I/O in the kernel or completing on the thread. */
TEST(reset_while_every_queue_has_io_in_flight_writes_nothing_after)
{
	uint64_t t0 = rg_now_ns();
	unsigned it;

	disk_new(",queues=4,io-threads=2");
	CHECK_EQ(rg_attach(&g), 0);
	for (it = 0; budget_left(it, t0); it++) {
		slow_io(it);
		CHECK_EQ(rg_start(&g, features(it & 1), 0xf, QSIZE), 0);
		stop_while_busy_writes_nothing_after(mmio_reset);
		CHECK_EQ(vdrv_status(&g.d), 0);
	}
	fprintf(stderr, "%u resets with every queue busy\n", it);
	CHECK(it >= 10);
	rg_dev_destroy(&g);
	rg_fini(&g);
}

/* --- virtio-pci: the driver through the common configuration --- */

static struct vm pci_vm;
static struct virtio_pci vp;

static void pw(unsigned off, unsigned len, uint64_t val)
{
	uint8_t b[8];

	le_store_n(b, len, val);
	virtio_pci_bar_write(&vp, off, b, len);
}

static uint64_t pr(unsigned off, unsigned len)
{
	uint8_t b[8];

	virtio_pci_bar_read(&vp, off, b, len);
	return le_load_n(b, len);
}

static void bus_master(bool on)
{
	pci_cfg_write16(&vp.pci, PCI_COMMAND, on ? PCI_COMMAND_MASTER : 0);
}

/* Linux's order (virtio_pci_modern): status steps, features (64 bits as
 * two words), FEATURES_OK, each queue's size, addresses and enable, the
 * interrupt vectors, then DRIVER_OK; every queue of the disk. */
static void pci_msix(bool on);

static void pci_start(uint64_t want, uint16_t qsize, bool msix)
{
	uint64_t offered, f;
	unsigned q;

	pw(VIRTIO_PCI_COMMON_STATUS, 1, 0);
	pw(VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	pw(VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	pw(VIRTIO_PCI_COMMON_DFSELECT, 4, 1);
	offered = pr(VIRTIO_PCI_COMMON_DF, 4) << 32;
	pw(VIRTIO_PCI_COMMON_DFSELECT, 4, 0);
	offered |= pr(VIRTIO_PCI_COMMON_DF, 4);
	f = want & offered;
	for (unsigned sel = 0; sel < 2; sel++) {
		pw(VIRTIO_PCI_COMMON_GFSELECT, 4, sel);
		pw(VIRTIO_PCI_COMMON_GF, 4, (uint32_t)(f >> (32 * sel)));
	}
	pw(VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
	   VIRTIO_CONFIG_S_FEATURES_OK);
	CHECK(pr(VIRTIO_PCI_COMMON_STATUS, 1) & VIRTIO_CONFIG_S_FEATURES_OK);
	g.d.features = f;
	g.qsize = qsize;
	g.d.brk = RG_RINGS;
	pci_msix(msix);
	for (q = 0; q < g.nq; q++) {
		vdrv_queue_layout(&g.d, q, qsize);
		pw(VIRTIO_PCI_COMMON_Q_SELECT, 2, q);
		pw(VIRTIO_PCI_COMMON_Q_SIZE, 2, qsize);
		pw(VIRTIO_PCI_COMMON_Q_DESCLO, 8, g.d.q[q].desc);
		pw(VIRTIO_PCI_COMMON_Q_AVAILLO, 8, g.d.q[q].avail);
		pw(VIRTIO_PCI_COMMON_Q_USEDLO, 8, g.d.q[q].used);
		pw(VIRTIO_PCI_COMMON_Q_MSIX, 2, msix ? q + 1 : MSIX_NO_VECTOR);
		pw(VIRTIO_PCI_COMMON_Q_ENABLE, 2, 1);
		CHECK_EQ(pr(VIRTIO_PCI_COMMON_Q_ENABLE, 2), 1);
		g.on[q] = true;
	}
	pw(VIRTIO_PCI_COMMON_STATUS, 1, pr(VIRTIO_PCI_COMMON_STATUS, 1) | VIRTIO_CONFIG_S_DRIVER_OK);
	CHECK(pr(VIRTIO_PCI_COMMON_STATUS, 1) & VIRTIO_CONFIG_S_DRIVER_OK);
}

/* MSI-X on (vectors 0 for configuration changes and 1.. for the queues,
 * each routed and unmasked; pci_start gives each queue its own) or off:
 * the I/O threads then signal through the table, where messages pend
 * while bus mastering is off, or through INTx. */
static void pci_msix(bool on)
{
	static const unsigned field[4] = { PCI_MSIX_ENTRY_LOWER_ADDR, PCI_MSIX_ENTRY_UPPER_ADDR,
					   PCI_MSIX_ENTRY_DATA, PCI_MSIX_ENTRY_VECTOR_CTRL };

	pci_cfg_write16(&vp.pci, vp.msix.cap + PCI_MSIX_FLAGS, on ? PCI_MSIX_FLAGS_ENABLE : 0);
	for (unsigned v = 0; on && v <= g.nq; v++) {
		const uint32_t entry[4] = { 0xfee00000u, 0, 0x40 + v, 0 };

		for (unsigned k = 0; k < 4; k++) {
			uint8_t b[4];

			le32_store(b, entry[k]);
			msix_bar_write(&vp.msix, v * PCI_MSIX_ENTRY_SIZE + field[k], b, 4);
		}
	}
	pw(VIRTIO_PCI_COMMON_MSIX, 2, on ? 0 : MSIX_NO_VECTOR);
}

/* Queue and config signals that went through the MSI-X table (sent or pended). */
static uint64_t msix_fired(void)
{
	uint64_t n;

	pthread_mutex_lock(&vp.msix.lock);
	n = vp.msix.fired + vp.msix.pended;
	pthread_mutex_unlock(&vp.msix.lock);
	return n;
}

static void bus_master_off(void)
{
	bus_master(false);
}

/* Bus mastering turned off (the command register's Bus Master Enable
 * cleared) while every queue of a four-queue disk on two I/O threads has
 * host I/O in flight and the driver keeps posting, its interrupts by
 * MSI-X or INTx: once the config write returns, the device writes
 * nothing to guest memory, and it says it needs a reset; after the
 * reset, with bus mastering back on, every queue serves again. */
TEST(clearing_bus_master_while_queues_run_stops_their_dma_before_the_write_returns)
{
	uint64_t t0 = rg_now_ns();
	unsigned it, q;

	disk_new(",queues=4,io-threads=2");
	pci_vm.vm_fd = pci_vm.kvm_fd = -1;
	CHECK_EQ(virtio_pci_init(&vp, g.dev, &pci_vm), 0);
	g.d.dev = g.dev;                        /* vdrv_kick: the queues' eventfds */
	bus_master(true);
	CHECK_EQ(virtio_dev_launch(g.dev), 0);
	for (it = 0; budget_left(it, t0); it++) {
		rg_io_mode(RG_IO_FILE, 0, 0);
		uint64_t fired = msix_fired();

		pci_start(features(it & 1), QSIZE, it & 4);
		each_queue_reads(it % 64);
		CHECK((msix_fired() > fired) == !!(it & 4));    /* the vectors in use */
		slow_io(it);
		stop_while_busy_writes_nothing_after(bus_master_off);
		CHECK(pr(VIRTIO_PCI_COMMON_STATUS, 1) & VIRTIO_CONFIG_S_NEEDS_RESET);
		for (q = 0; q < g.nq; q++)
			CHECK(!g.dev->queues[q].started);
		pw(VIRTIO_PCI_COMMON_STATUS, 1, 0);
		bus_master(true);
	}
	fprintf(stderr, "%u times bus mastering off with every queue busy\n", it);
	CHECK(it >= 10);
	rg_dev_destroy(&g);
	virtio_pci_destroy(&vp);
	rg_fini(&g);
}

/* --- the guest rewriting a descriptor while a thread pops it --- */

struct scribbler {
	pthread_t t;
	uint8_t *target;            /* atomic: the 16 bytes to rewrite, or NULL */
	uint8_t orig[16];           /* as the driver made them (before target) */
	bool packed;
	unsigned seq, ack;          /* atomic: a new target / the last one let go */
	bool stop;                  /* atomic */
	unsigned long writes;
};

/* Bad values into the target and back, as fast as it can, until told to
 * let go of it (ack) or to stop. */
static void *scribbler_run(void *arg)
{
	struct scribbler *s = arg;
	uint32_t x = 0x9e3779b9u;

	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		unsigned seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
		uint8_t *d = __atomic_load_n(&s->target, __ATOMIC_ACQUIRE);

		if (!d) {
			__atomic_store_n(&s->ack, seq, __ATOMIC_RELEASE);
			sched_yield();
			continue;
		}
		rg_scribble(d, s->orig, s->packed, &x);
		if (x & 1)
			rg_unscribble(d, s->orig);
		s->writes++;
	}
	return NULL;
}

/* Take the target away and wait until the scribbler no longer writes it. */
static void scribbler_let_go(struct scribbler *s)
{
	unsigned seq;

	__atomic_store_n(&s->target, NULL, __ATOMIC_RELEASE);
	seq = __atomic_add_fetch(&s->seq, 1, __ATOMIC_ACQ_REL);
	while (__atomic_load_n(&s->ack, __ATOMIC_ACQUIRE) != seq)
		sched_yield();
}

/* The descriptor to rewrite for chain p (head h) of queue 0, by turn: a
 * ring descriptor of the chain, an entry of its indirect table, its
 * header. Packed: never the chain's first slot, where the device writes
 * the used descriptor (a rewrite there after completion would hide it). */
static uint8_t *race_target(const struct rg_posted *p, unsigned it, bool indirect, bool packed)
{
	uint64_t slot = rg_slot(0, (unsigned)p->head);

	if (it % 4 == 3)
		return rg_host(&g, slot, 16);
	if (indirect)
		return rg_host(&g, slot + 48 + 16 * (it % 3), 16);
	return vdrv_host(&g.d, g.d.q[0].desc + 16ULL * p->desc[packed ? 1 + it % (p->n - 1) :
							      it % p->n]);
}

/* A read made available on a one-queue disk while another thread keeps
 * rewriting one of its descriptors (its address to outside RAM or across
 * the regions, its length to 0 or 2^31 and more, its flags, next or id),
 * then kicked: the I/O thread takes the chain as it was at one moment and
 * completes it, or refuses it (NEEDS_RESET); it never touches memory
 * outside RAM (a guard page would fault, rg_backend would abort) and
 * never hangs. */
static void descriptor_rewritten_during_pop(bool packed)
{
	struct scribbler s = { .packed = packed };
	unsigned it, completed = 0, refused = 0;
	uint64_t t0 = rg_now_ns();
	bool start = true;

	disk_new("");
	CHECK_EQ(rg_attach(&g), 0);
	CHECK_EQ(pthread_create(&s.t, NULL, scribbler_run, &s), 0);
	/* Both outcomes must be seen: on a busy host a race may need longer
	 * than RACE_NS to land both ways, so up to ten times that. */
	for (it = 0; it < 100 * RACE_ITERS &&
		     (rg_now_ns() - t0 < RACE_NS ||
		      ((!completed || !refused) && rg_now_ns() - t0 < 10 * RACE_NS)); it++) {
		bool indirect = it % 3 == 1;
		struct rg_req r = read_req(it % 120, it);
		struct rg_posted p;
		uint8_t *d;
		uint32_t id, len;

		/* packed: the driver's view of the ring no longer matches a
		 * chain the device took as rewritten; start afresh. */
		if (start)
			CHECK_EQ(rg_start(&g, features(packed), 1, 16), 0);
		start = packed;
		r.shape = indirect ? RG_INDIRECT : it % 3 == 2 ? RG_SPLIT_HDR : 0;
		CHECK(rg_post(&g, 0, &r, &p) >= 0);
		d = race_target(&p, it, indirect, packed);
		memcpy(s.orig, d, 16);
		__atomic_store_n(&s.target, d, __ATOMIC_RELEASE);
		vdrv_kick(&g.d, 0);
		for (uint64_t until = rg_now_ns() + 5000000000ull;;) {
			if (vdrv_get_used(&g.d, 0, &id, &len)) {
				CHECK(id < 16 && len <= RG_USED_MAX);
				completed++;
				break;
			}
			if (vdrv_status(&g.d) & VIRTIO_CONFIG_S_NEEDS_RESET) {
				refused++;
				start = true;
				break;
			}
			CHECK(rg_now_ns() < until);
			sched_yield();
		}
		scribbler_let_go(&s);
		rg_unscribble(d, s.orig);
	}
	__atomic_store_n(&s.stop, true, __ATOMIC_RELEASE);
	CHECK_EQ(pthread_join(s.t, NULL), 0);
	fprintf(stderr, "%u chains rewritten while popped: %u completed, %u refused, %lu rewrites\n",
		it, completed, refused, s.writes);
	CHECK(completed > 0 && refused > 0);
	rg_dev_destroy(&g);
	rg_fini(&g);
}

TEST(descriptor_rewritten_during_pop_split)
{
	descriptor_rewritten_during_pop(false);
}

TEST(descriptor_rewritten_during_pop_packed)
{
	descriptor_rewritten_during_pop(true);
}

/* --- DRIVER_OK and reset in a tight loop --- */

/* 200 cycles of negotiate, DRIVER_OK, a read on each queue (it works,
 * with the right data), more reads left in flight, reset: the I/O
 * threads stay the same two, parked between cycles, no fd is gained or
 * lost, and at the end the threads are gone and every fd the disk had
 * is closed. */
TEST(driver_ok_reset_cycles_leak_nothing_and_each_first_request_works)
{
	unsigned before, running, cycle;

	check_need_io_uring();
	rg_init(&g);
	before = rg_count_fds();
	CHECK_EQ(rg_dev_new(&g, ",queues=2,io-threads=2"), 0);
	CHECK_EQ(rg_attach(&g), 0);
	CHECK_EQ(rg_count_threads(RG_THREADS), 2);
	running = rg_count_fds();
	for (cycle = 0; cycle < RACE_ITERS; cycle++) {
		rg_io_mode(RG_IO_FILE, 0, 0);
		CHECK_EQ(rg_start(&g, features(cycle & 1), 3, 16), 0);
		each_queue_reads(cycle % 64);
		rg_io_mode(RG_IO_TIMEOUT, 0, 0);
		for (unsigned q = 0; q < g.nq; q++) {
			for (unsigned k = 0; k < 4; k++) {
				struct rg_req r = read_req(k * 8, k);
				struct rg_posted p;

				CHECK(rg_post(&g, q, &r, &p) >= 0);
			}
			vdrv_kick(&g.d, q);
		}
		vdrv_wr(&g.d, VIRTIO_MMIO_STATUS, 0);
		CHECK_EQ(rg_count_threads(RG_THREADS), 2);
		CHECK_EQ(rg_count_fds(), running);
	}
	rg_dev_destroy(&g);
	CHECK_EQ(rg_threads_settled(RG_THREADS, 0), 0);
	CHECK_EQ(rg_count_fds(), before);
	rg_fini(&g);
}

/* --- host I/O that outlives a stop --- */

/* Host I/O that does not end within VQW_STOP_DEADLINE_NS of a reset (a
 * stuck host disk) keeps its queue's slots, and the stop goes on
 * without it. The next DRIVER_OK that leaves that queue disabled must
 * not have its I/O thread serve it: the other queues work, and nothing
 * needs a reset. The stand-in for the stuck I/O: queue 1's count of host
 * I/O in flight raised while it is idle (what a read stuck in the host's
 * kernel leaves; the I/O thread writes the count only for requests of
 * queue 1, and there are none), and lowered again (the I/O ends) before
 * teardown. Takes the 5 s of the stop's deadline. */
TEST(queue_whose_host_io_outlived_the_reset_is_not_served_after_it)
{
	struct blk_dev *blk;

	disk_new(",queues=2,io-threads=1");
	CHECK_EQ(rg_attach(&g), 0);
	blk = g.dev->priv;
	CHECK_EQ(rg_start(&g, features(false), 3, 16), 0);
	each_queue_reads(0);
	__atomic_add_fetch(&blk->queues[1].inflight, 1, __ATOMIC_SEQ_CST);
	vdrv_wr(&g.d, VIRTIO_MMIO_STATUS, 0);   /* waits out the deadline */
	CHECK_EQ(rg_start(&g, features(false), 1, 16), 0);
	each_queue_reads(8);
	CHECK(!(vdrv_status(&g.d) & VIRTIO_CONFIG_S_NEEDS_RESET));
	__atomic_sub_fetch(&blk->queues[1].inflight, 1, __ATOMIC_SEQ_CST);
	rg_dev_destroy(&g);
	rg_fini(&g);
}
