/* mvm-bench: virtio-blk device cost without KVM.
 *
 * A driver (this thread) plays the guest on fake RAM with the test driver's
 * split-ring layout: keeps QD random reads (4 KiB, or --bs) in flight through the ring
 * (one indirect descriptor per request), kicks the queue eventfd, waits on
 * the interrupt eventfd. Backends: "null" (the same device path with
 * IORING_OP_NOP instead of the read: the device's own cost per request) and
 * "file" (a page-cached file in /tmp). "direct" runs the same reads straight
 * through io_uring on the same file at the same depth.
 *
 * Split vs packed: the same workload at QD 1/32/128 on a packed ring
 * (VIRTIO_F_RING_PACKED, driven like Linux's packed driver: vdrv_add with an
 * indirect table per request, kick_prepare / enable_cb event suppression),
 * printed as packed/split IOPS ratios.
 *
 *   mvm-bench [--seconds S] [--rounds N] [--size MiB] [--qd N]... [--halt-poll USEC]
 *             [--bs KiB] [--cache none|writeback] [--opts ,KEY=VAL...] [--json]
 *
 * Each point runs for S seconds in all, split into N rounds (default 3) that
 * interleave the device and direct runs. The driver waits for interrupts
 * like a halted vCPU under KVM: it polls the irq eventfd for USEC (default
 * 200, KVM's halt_poll_ns) before it sleeps (see wait_irq).
 *
 * --qd limits the run to the given depths among 1/8/32/128 (repeatable),
 * for quick A/B comparisons; --opts appends disk options (",poll=64") to the
 * device's disk spec. --cache none reads the file with O_DIRECT on both
 * sides (the device with cache=none): host block I/O instead of page-cache
 * copies, where registered buffers (--opts ,fixed-buffers=on) matter. */
#include "tests/unit/disk_spec.h"
#include "tests/unit/vdrv.h"
#include "tests/unit/blk_null.h"
#include "devices/virtio_blk.h"
#include "devices/blk_req.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>

#define QMAX 256
#define BS_MAX (1u << 20)       /* --bs: one data descriptor, at most seg size_max */

static unsigned bs = 4096;      /* bytes per read */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct result {
	double done, secs, iops;
	double enters_per_req, irqs_per_req, batches_per_req, polled_per_req, kicks_per_req;
	double preempted_per_req, fixed_per_req;
};

/* A device run's figures from the queue counters before (a) and after (b). */
static void result_set(struct result *res, uint64_t done, double secs,
		       const struct blk_queue_stats *a, const struct blk_queue_stats *b)
{
	double reqs = (double)(b->requests - a->requests);

	res->done = (double)done;
	res->secs = secs;
	res->iops = (double)done / secs;
	res->enters_per_req = (double)(b->enters - a->enters) / reqs;
	res->irqs_per_req = (double)(b->irqs - a->irqs) / reqs;
	res->batches_per_req = (double)(b->batches - a->batches) / reqs;
	res->polled_per_req = (double)(b->polled - a->polled) / reqs;
	res->kicks_per_req = (double)(b->kicks - a->kicks) / reqs;
	res->preempted_per_req = (double)(b->poll_preempted - a->poll_preempted) / reqs;
	res->fixed_per_req = (double)(b->fixed - a->fixed) / reqs;
}

/* Fold one round into the running total: IOPS over the summed time, per
 * request figures weighted by requests. */
static void result_add(struct result *sum, const struct result *r)
{
	double n = sum->done + r->done;

	sum->enters_per_req = (sum->enters_per_req * sum->done + r->enters_per_req * r->done) / n;
	sum->irqs_per_req = (sum->irqs_per_req * sum->done + r->irqs_per_req * r->done) / n;
	sum->batches_per_req = (sum->batches_per_req * sum->done + r->batches_per_req * r->done) / n;
	sum->polled_per_req = (sum->polled_per_req * sum->done + r->polled_per_req * r->done) / n;
	sum->kicks_per_req = (sum->kicks_per_req * sum->done + r->kicks_per_req * r->done) / n;
	sum->preempted_per_req = (sum->preempted_per_req * sum->done +
				  r->preempted_per_req * r->done) / n;
	sum->fixed_per_req = (sum->fixed_per_req * sum->done + r->fixed_per_req * r->done) / n;
	sum->done = n;
	sum->secs += r->secs;
	sum->iops = sum->done / sum->secs;
}

/* --opts: appended to the disk spec (e.g. ",poll=64") for experiments. */
static const char *disk_opts = "";
/* --cache none: O_DIRECT for the device (cache=none) and the direct run. */
static bool odirect;

static void die_bench(const char *what)
{
	fprintf(stderr, "mvm-bench: %s\n", what);
	exit(1);
}

/* Per request: 16-byte header, bs buffer, status byte, 3-entry indirect table. */
struct breq {
	uint64_t hdr, data, status, table;
};

/* Lay out qd requests in fake RAM the way a guest's would be: the data
 * buffers in one block (as run_direct's are), and per request one 128-byte
 * block with the header and status byte in its first cache line (Linux's
 * struct virtblk_req keeps them together) and the indirect table in the
 * second. No line is shared between requests, so the driver writing one
 * request's header never contends with the device writing another's status. */
static struct breq *breqs_alloc(struct vdrv *d, unsigned qd)
{
	struct breq *rq = calloc(qd, sizeof(*rq));
	uint64_t data = vdrv_alloc(d, (uint64_t)qd * bs, 4096);

	if (!rq)
		die_bench("out of memory");
	for (unsigned i = 0; i < qd; i++) {
		uint64_t meta = vdrv_alloc(d, 128, 64);

		rq[i].data = data + (uint64_t)i * bs;
		rq[i].hdr = meta;
		rq[i].status = meta + 16;
		rq[i].table = meta + 64;
	}
	return rq;
}

static void set_sector(struct vdrv *d, struct breq *r, uint64_t sector)
{
	uint8_t *h = vdrv_host(d, r->hdr);
	le32_store(h, VIRTIO_BLK_T_IN);
	le32_store(h + 4, 0);
	le64_store(h + 8, sector);
}

/* blk_dev_new, retried while the image is still locked. A guard: the
 * previous run's queue thread dropped its ring's reference to the image
 * (and with it the OFD lock) as it stopped; left to the ring's teardown,
 * which is asynchronous, it could outlive the device. */
static void dev_new(const struct mvm_disk *o, struct vdrv *d, bool null, struct virtio_dev **dev)
{
	char err[256];

	for (int i = 0;; i++) {
		int r = blk_dev_new_backend(o, &d->mem, null ? &blk_null_backend : &blk_file_backend,
					    NULL, dev, err, sizeof(err));

		if (!r)
			return;
		if (r != -EBUSY || i == 200)
			die_bench(err);
		usleep(10000);
	}
}

/* How the driver waits for the interrupt. It stands in for a vCPU, and a
 * vCPU that halts to wait is not put to sleep at once: KVM polls it for
 * pending interrupts for up to halt_poll_ns first (200 us by default on
 * x86), so an interrupt that comes within that window costs no wake-up.
 * The driver does the same with the irq eventfd (a non-blocking read is
 * what "is the interrupt pending?" means here), then sleeps in poll().
 * --halt-poll 0 models a host with halt polling off. */
static unsigned halt_poll_us = 200;

static void wait_irq(int fd)
{
	uint64_t cnt;
	double until = now() + halt_poll_us / 1e6;

	for (;;) {
		if (read(fd, &cnt, sizeof(cnt)) == sizeof(cnt))
			return;
		if (errno != EAGAIN)
			die_bench("irq eventfd read");
		if (now() >= until)
			break;
		__builtin_ia32_pause();
	}
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	if (poll(&pfd, 1, 5000) <= 0)
		die_bench("no interrupt within 5 s");
	if (read(fd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
		die_bench("irq eventfd read");
}

/* A virtio-blk device on the file (or the null backend) behind the test
 * driver's virtio-mmio model, one queue of QMAX entries, DRIVER_OK: split
 * ring, or packed when asked (and then required). */
static struct virtio_dev *bench_open(struct vdrv *d, const char *path, bool null, bool packed)
{
	uint64_t want = VIRTIO_BIT(VIRTIO_F_VERSION_1) | VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
			VIRTIO_BIT(VIRTIO_RING_F_INDIRECT_DESC);
	struct virtio_dev *dev;
	struct mvm_disk o;
	char err[256], spec[512];

	if (packed)
		want |= VIRTIO_BIT(VIRTIO_F_RING_PACKED);
	snprintf(spec, sizeof(spec), "%s%s%s", path, odirect ? ",cache=none" : "", disk_opts);
	if (test_disk_parse(spec, 1, &o, err, sizeof(err)))
		die_bench(err);
	/* Room for 128 requests' buffers, and their metadata. */
	if (vdrv_ram_init(d, 0x100000, (8u << 20) + 128u * bs))
		die_bench("fake RAM");
	dev_new(&o, d, null, &dev);
	if (vdrv_attach(d, dev) || vdrv_negotiate(d, want) ||
	    (d->features & VIRTIO_BIT(VIRTIO_F_RING_PACKED)) != (want & VIRTIO_BIT(VIRTIO_F_RING_PACKED)) ||
	    vdrv_queue_setup(d, 0, QMAX) != 1)
		die_bench(packed ? "packed device setup failed" : "device setup failed");
	vdrv_driver_ok(d);
	return dev;
}

/* Reset the device (its queue threads stop), then free it and the RAM. */
static void bench_close(struct vdrv *d, struct virtio_dev *dev)
{
	vdrv_wr(d, VIRTIO_MMIO_STATUS, 0);
	virtio_dev_destroy(dev);
	vdrv_detach(d);
	free(d->ram);
}

static bool need_event(uint16_t event, uint16_t new_idx, uint16_t old)
{
	return (uint16_t)(new_idx - event - 1) < (uint16_t)(new_idx - old);
}

static int run_device(const char *path, uint64_t size, bool null, unsigned qd, double secs,
		      struct result *res)
{
	struct vdrv d;
	struct virtio_dev *dev;
	struct blk_queue_stats a, b;
	struct breq *rq;
	uint64_t blocks = size / bs, done = 0;
	uint16_t kicked_idx;
	double t0, t1;
	unsigned i;
	int irq_fd;

	dev = bench_open(&d, path, null, false);
	irq_fd = d.mmio.irq_fd;
	t0 = now();

	rq = breqs_alloc(&d, qd);
	for (i = 0; i < qd; i++) {
		vdrv_indirect_set(&d, rq[i].table, 0, rq[i].hdr, 16, VRING_DESC_F_NEXT, 1);
		vdrv_indirect_set(&d, rq[i].table, 1, rq[i].data, bs,
				  VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2);
		vdrv_indirect_set(&d, rq[i].table, 2, rq[i].status, 1, VRING_DESC_F_WRITE, 0);
		/* head i: one descriptor pointing at request i's table */
		vdrv_desc_set(&d, 0, (uint16_t)i, rq[i].table, 48, VRING_DESC_F_INDIRECT, 0);
	}

	/* Warm-up: one round trip so thread start-up is not measured. */
	set_sector(&d, &rq[0], 0);
	vdrv_avail_add_head(&d, 0, 0);
	vdrv_kick(&d, 0);
	for (;;) {
		uint32_t id, len;
		if (vdrv_get_used(&d, 0, &id, &len))
			break;
		if (now() > t0 + 5)
			die_bench("warm-up request not completed within 5 s");
	}
	blk_get_queue_stats(dev, 0, &a);
	t0 = now();
	for (i = 0; i < qd; i++) {
		set_sector(&d, &rq[i], (rnd() % blocks) * (bs / 512));
		vdrv_avail_add_head(&d, 0, (uint16_t)i);
	}
	kicked_idx = d.q[0].avail_idx;
	vdrv_kick(&d, 0);
	t1 = t0 + secs;
	for (;;) {
		uint32_t id, len;
		uint16_t old = kicked_idx;
		unsigned got = 0;

		/* Reap everything used; repost each slot with a new random offset. */
		while (vdrv_get_used(&d, 0, &id, &len)) {
			if (id >= qd || len != bs + 1 ||
			    *(uint8_t *)vdrv_host(&d, rq[id].status) != VIRTIO_BLK_S_OK)
				die_bench("request failed");
			done++;
			got++;
			set_sector(&d, &rq[id], (rnd() % blocks) * (bs / 512));
			vdrv_avail_add_head(&d, 0, (uint16_t)id);
		}
		if (got) {
			if (now() >= t1)
				break;
			/* Kick only when the device asked for it (EVENT_IDX). Full
			 * barrier: avail.idx store before the avail_event load,
			 * pairing with virtq_notify_enable's barrier. */
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			if (need_event(vdrv_avail_event(&d, 0), d.q[0].avail_idx, old))
				vdrv_kick(&d, 0);
			kicked_idx = d.q[0].avail_idx;
		}
		/* Ask for an interrupt at the next used entry, then re-check
		 * (full barrier, pairs with the device's publish) before sleeping. */
		vdrv_used_event_set(&d, 0, d.q[0].last_used);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (vdrv_used_idx(&d, 0) != d.q[0].last_used)
			continue;
		wait_irq(irq_fd);
	}
	t1 = now();
	blk_get_queue_stats(dev, 0, &b);
	result_set(res, done, t1 - t0, &a, &b);

	bench_close(&d, dev);
	free(rq);
	return 0;
}

/* run_device on a packed ring. */
static void packed_post(struct vdrv *d, struct breq *r, unsigned i, uint16_t *reqof,
			uint64_t blocks)
{
	struct vdrv_sg sg[3] = {
		{ r->hdr, 16, false }, { r->data, bs, true }, { r->status, 1, true },
	};
	int id;

	set_sector(d, r, (rnd() % blocks) * (bs / 512));
	id = vdrv_add(d, 0, sg, 3, true);
	if (id < 0)
		die_bench("packed: ring full");
	reqof[id] = (uint16_t)i;
}

static int run_device_packed(const char *path, uint64_t size, bool null, unsigned qd,
			     double secs, struct result *res)
{
	struct vdrv d;
	struct virtio_dev *dev;
	struct blk_queue_stats a, b;
	struct breq *rq;
	uint16_t reqof[QMAX];
	uint64_t blocks = size / bs, done = 0;
	double t0, t1;
	unsigned i;
	int irq_fd;

	dev = bench_open(&d, path, null, true);
	irq_fd = d.mmio.irq_fd;

	rq = breqs_alloc(&d, qd);
	/* Warm-up: one round trip so thread start-up is not measured. */
	t0 = now();
	packed_post(&d, &rq[0], 0, reqof, blocks);
	vdrv_kick(&d, 0);
	for (;;) {
		uint32_t id, len;
		if (vdrv_get_used(&d, 0, &id, &len))
			break;
		if (now() > t0 + 5)
			die_bench("packed: warm-up request not completed within 5 s");
	}
	blk_get_queue_stats(dev, 0, &a);
	t0 = now();
	for (i = 0; i < qd; i++)
		packed_post(&d, &rq[i], i, reqof, blocks);
	vdrv_packed_kick_prepare(&d, 0);
	vdrv_kick(&d, 0);
	t1 = t0 + secs;
	for (;;) {
		uint32_t id, len;
		unsigned got = 0;

		while (vdrv_get_used(&d, 0, &id, &len)) {
			struct breq *r;

			if (id >= QMAX || reqof[id] >= qd || len != bs + 1)
				die_bench("packed: request failed");
			r = &rq[reqof[id]];
			if (*(uint8_t *)vdrv_host(&d, r->status) != VIRTIO_BLK_S_OK)
				die_bench("packed: request failed");
			done++;
			got++;
			packed_post(&d, r, reqof[id], reqof, blocks);
		}
		if (got) {
			if (now() >= t1)
				break;
			/* Kick only when the device event suppression asks. */
			if (vdrv_packed_kick_prepare(&d, 0))
				vdrv_kick(&d, 0);
		}
		/* Interrupt at the next used descriptor; poll once more first. */
		if (vdrv_packed_enable_cb(&d, 0))
			continue;
		wait_irq(irq_fd);
	}
	t1 = now();
	blk_get_queue_stats(dev, 0, &b);
	result_set(res, done, t1 - t0, &a, &b);

	bench_close(&d, dev);
	free(rq);
	return 0;
}

/* The same reads straight through io_uring: QD in flight, one
 * submit-and-wait per round, resubmitting what completed. */
static int run_direct(const char *path, uint64_t size, unsigned qd, double secs,
		      struct result *res)
{
	struct io_uring ring;
	uint8_t *bufs;
	uint64_t blocks = size / bs, done = 0, enters = 0;
	double t0, t1;
	unsigned i;
	int fd;

	fd = open(path, O_RDONLY | (odirect ? O_DIRECT : 0));
	if (fd < 0 || io_uring_queue_init(QMAX, &ring, 0) || io_uring_register_files(&ring, &fd, 1))
		die_bench("direct: io_uring setup");
	/* Buffers in THP-eligible memory, like the device's (fake) guest RAM. */
	bufs = aligned_alloc(2u << 20, ((size_t)qd * bs + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1));
	if (!bufs)
		die_bench("direct: out of memory");
	madvise(bufs, (size_t)qd * bs, MADV_HUGEPAGE);
	t0 = now();
	t1 = t0 + secs;
	for (i = 0; i < qd; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		io_uring_prep_read(sqe, 0, bufs + (size_t)i * bs, bs, (rnd() % blocks) * bs);
		sqe->flags |= IOSQE_FIXED_FILE;
		io_uring_sqe_set_data64(sqe, i);
	}
	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;

		io_uring_submit_and_wait(&ring, 1);
		enters++;
		io_uring_for_each_cqe(&ring, head, cqe) {
			uint64_t slot = io_uring_cqe_get_data64(cqe);
			struct io_uring_sqe *sqe;
			if (cqe->res != (int)bs)
				die_bench("direct: read failed");
			n++;
			sqe = io_uring_get_sqe(&ring);
			io_uring_prep_read(sqe, 0, bufs + slot * bs, bs, (rnd() % blocks) * bs);
			sqe->flags |= IOSQE_FIXED_FILE;
			io_uring_sqe_set_data64(sqe, slot);
		}
		io_uring_cq_advance(&ring, n);
		done += n;
		if (now() >= t1)
			break;
	}
	t1 = now();
	memset(res, 0, sizeof(*res));
	res->done = (double)done;
	res->secs = t1 - t0;
	res->iops = (double)done / (t1 - t0);
	res->enters_per_req = (double)enters / (double)done;
	io_uring_queue_exit(&ring);
	close(fd);
	free(bufs);
	return 0;
}

int main(int argc, char **argv)
{
	static const unsigned qds[] = { 1, 8, 32, 128 };
	double secs = 1.5;
	unsigned rounds = 3;
	uint64_t size = 256ULL << 20;
	bool json = false, want[4] = { false, false, false, false }, any = false, first = true;
	char path[] = "/tmp/mvm-bench-XXXXXX";
	struct result nul[4], file[4], direct[4], pnul[4], pfile[4];
	bool pk[4] = { true, false, true, true };       /* packed at QD 1, 32, 128 */
	uint8_t *buf;
	unsigned i;
	int fd;

	for (i = 1; i < (unsigned)argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--seconds") && i + 1 < (unsigned)argc)
			secs = atof(argv[++i]);
		else if (!strcmp(argv[i], "--size") && i + 1 < (unsigned)argc)
			size = strtoull(argv[++i], NULL, 0) << 20;
		else if (!strcmp(argv[i], "--rounds") && i + 1 < (unsigned)argc)
			rounds = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--halt-poll") && i + 1 < (unsigned)argc)
			halt_poll_us = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--bs") && i + 1 < (unsigned)argc) {
			unsigned long kib = strtoul(argv[++i], NULL, 0);

			if (kib < 4 || kib % 4 || kib * 1024 > BS_MAX)
				die_bench("--bs must be a multiple of 4 (KiB) from 4 to 1024");
			bs = (unsigned)kib * 1024;
		} else if (!strcmp(argv[i], "--opts") && i + 1 < (unsigned)argc)
			disk_opts = argv[++i];
		else if (!strcmp(argv[i], "--cache") && i + 1 < (unsigned)argc) {
			i++;
			if (strcmp(argv[i], "none") && strcmp(argv[i], "writeback"))
				die_bench("--cache must be none or writeback");
			odirect = !strcmp(argv[i], "none");
		}
		else if (!strcmp(argv[i], "--qd") && i + 1 < (unsigned)argc) {
			unsigned qd = (unsigned)strtoul(argv[++i], NULL, 0), k;

			for (k = 0; k < 4 && qds[k] != qd; k++)
				;
			if (k == 4)
				die_bench("--qd must be 1, 8, 32 or 128");
			want[k] = any = true;
		} else {
			bool help = !strcmp(argv[i], "--help");

			fprintf(help ? stdout : stderr, "usage: mvm-bench [--seconds S] [--rounds N] "
				"[--size MiB] [--qd N]... [--halt-poll USEC] [--bs KiB] [--cache none|writeback] "
				"[--opts ,KEY=VAL...] [--json]\n");
			return help ? 0 : 2;
		}
	}
	if (secs <= 0 || size < (1 << 20) || rounds < 1)
		die_bench("--seconds must be > 0, --size >= 1 and --rounds >= 1");

	/* The file, written (and so in the page cache) up front. */
	fd = mkstemp(path);
	if (fd < 0)
		die_bench("cannot create the test file in /tmp");
	buf = malloc(1 << 20);
	memset(buf, 0xab, 1 << 20);
	for (uint64_t off = 0; off < size; off += 1 << 20)
		if (pwrite(fd, buf, 1 << 20, (off_t)off) != 1 << 20)
			die_bench("cannot write the test file");
	free(buf);
	close(fd);

	for (i = 0; i < 4; i++)
		if (!any)
			want[i] = true;
	/* Rounds interleave the device and direct runs, so that a drift in
	 * the machine's speed (noisy neighbours, frequency) hits both sides of
	 * a ratio alike instead of whichever ran during it. */
	memset(nul, 0, sizeof(nul));
	memset(file, 0, sizeof(file));
	memset(direct, 0, sizeof(direct));
	memset(pnul, 0, sizeof(pnul));
	memset(pfile, 0, sizeof(pfile));
	for (unsigned round = 0; round < rounds; round++) {
		for (i = 0; i < 4; i++) {
			struct result r;
			double t = secs / rounds;

			if (!want[i])
				continue;
			run_device(path, size, true, qds[i], t, &r);
			result_add(&nul[i], &r);
			run_device(path, size, false, qds[i], t, &r);
			result_add(&file[i], &r);
			run_direct(path, size, qds[i], t, &r);
			result_add(&direct[i], &r);
			if (pk[i]) {
				run_device_packed(path, size, true, qds[i], t, &r);
				result_add(&pnul[i], &r);
				run_device_packed(path, size, false, qds[i], t, &r);
				result_add(&pfile[i], &r);
			}
		}
	}
	unlink(path);

	if (json) {
		printf("[");
		for (i = 0; i < 4; i++) {
			if (!want[i])
				continue;
			printf("%s{\"bs\":%u,\"qd\":%u,\"null_iops\":%.0f,\"device_iops\":%.0f,"
			       "\"direct_iops\":%.0f,\"ratio\":%.3f,\"enters_per_req\":%.4f,"
			       "\"irqs_per_req\":%.4f,\"null_enters_per_req\":%.4f,"
			       "\"null_irqs_per_req\":%.4f,\"batches_per_req\":%.4f,"
			       "\"polled_per_req\":%.4f,\"kicks_per_req\":%.4f,"
			       "\"poll_preempted_per_req\":%.4f,\"fixed_per_req\":%.4f,\"cache\":\"%s\"",
			       first ? "" : ",",
			       bs, qds[i], nul[i].iops,
			       file[i].iops, direct[i].iops, file[i].iops / direct[i].iops,
			       file[i].enters_per_req, file[i].irqs_per_req,
			       nul[i].enters_per_req, nul[i].irqs_per_req, file[i].batches_per_req,
			       file[i].polled_per_req, file[i].kicks_per_req,
			       file[i].preempted_per_req, file[i].fixed_per_req,
			       odirect ? "none" : "writeback");
			if (pk[i])
				printf(",\"packed_null_iops\":%.0f,\"packed_device_iops\":%.0f,"
				       "\"packed_null_ratio\":%.3f,\"packed_device_ratio\":%.3f",
				       pnul[i].iops, pfile[i].iops, pnul[i].iops / nul[i].iops,
				       pfile[i].iops / file[i].iops);
			printf("}");
			first = false;
		}
		printf("]\n");
		return 0;
	}
	printf("virtio-blk %u KiB random reads, %llu MiB %s, %.1f s per point "
	       "in %u rounds, driver halt-polls %u us\n", bs / 1024,
	       (unsigned long long)(size >> 20),
	       odirect ? "file read with O_DIRECT" : "page-cached file", secs, rounds, halt_poll_us);
	printf("%5s %12s %12s %12s %7s %10s %9s %9s %13s %11s\n", "QD", "null IOPS",
	       "device IOPS", "direct IOPS", "ratio", "enter/req", "irq/req", "kick/req",
	       "null enter/r", "null irq/r");
	for (i = 0; i < 4; i++)
		if (want[i])
			printf("%5u %12.0f %12.0f %12.0f %7.2f %10.4f %9.4f %9.4f %13.4f %11.4f\n",
			       qds[i], nul[i].iops, file[i].iops, direct[i].iops,
			       file[i].iops / direct[i].iops, file[i].enters_per_req,
			       file[i].irqs_per_req, file[i].kicks_per_req, nul[i].enters_per_req,
			       nul[i].irqs_per_req);
	printf("targets: ratio >= 0.9 at QD >= 32; <= 0.1 enter/req and <= 0.1 irq/req at QD 32\n");
	/* The same figures as time per request: what one read costs straight
	 * through io_uring, and what the device path adds to it (ring work on
	 * both sides, the interrupt, the driver's turnaround). */
	printf("\ntime per request (ns): direct read, and what the device path adds\n");
	printf("%5s %12s %12s %12s\n", "QD", "direct", "device adds", "null device");
	for (i = 0; i < 4; i++)
		if (want[i])
			printf("%5u %12.0f %12.0f %12.0f\n", qds[i], 1e9 / direct[i].iops,
			       1e9 / file[i].iops - 1e9 / direct[i].iops, 1e9 / nul[i].iops);
	printf("\nsplit vs packed ring, same workload (packed/split IOPS)\n");
	printf("%5s %12s %12s %7s %12s %12s %7s %12s\n", "QD", "split null", "packed null",
	       "ratio", "split dev", "packed dev", "ratio", "packed irq/r");
	for (i = 0; i < 4; i++)
		if (pk[i] && want[i])
			printf("%5u %12.0f %12.0f %7.2f %12.0f %12.0f %7.2f %12.4f\n", qds[i],
			       nul[i].iops, pnul[i].iops, pnul[i].iops / nul[i].iops,
			       file[i].iops, pfile[i].iops, pfile[i].iops / file[i].iops,
			       pfile[i].irqs_per_req);
	return 0;
}
