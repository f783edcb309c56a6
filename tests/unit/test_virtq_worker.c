/* The generic per-queue worker (devices/virtq_worker.c) with a device of
 * the shape virtio-net has: an RX/TX pair served by ONE worker thread.
 * "RX" chains are filled and returned at once; "TX" chains go through host
 * I/O on the worker's io_uring (a NOP, or a timeout standing in for slow
 * I/O) and return when it completes. Driven by the test driver over
 * virtio-mmio; no KVM. */
#include "tests/unit/check.h"
#include "tests/unit/vdrv.h"
#include "devices/virtq_worker.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define QSIZE 16
#define RX 0
#define TX 1

struct pair {
	struct virtio_dev dev;
	struct vdrv d;
	struct vqw w;
	bool launched;                   /* its thread started (vdrv_attach) */
	bool running;
	bool slow_tx;                    /* TX "host I/O" never ends by itself */
	bool tx_fsync;                   /* TX "host I/O" is an fsync (never declared) */
	unsigned inflight;               /* TX I/O outstanding (worker thread) */
	unsigned stuck;                  /* host I/O that no cancel ends (reported) */
	pthread_t seen[2];               /* the thread that handled each queue */
	uint64_t sqe_ops;                /* what the device declares (vqw_set_io) */
	int res[QSIZE];                  /* TX completions' results, by chain head */
	struct __kernel_timespec forever;
	struct __kernel_timespec brief;  /* TX I/O of this long instead (if set) */
	unsigned max_unpublished;        /* TX used entries pending at a TX chain */
	unsigned gather_us;              /* the worker's gather= */
	unsigned poll_us;                /* the worker's poll= */
	bool fixed;                      /* register guest RAM (vqw_register_mem) */
	bool sandbox;                    /* the worker enters the queue filter */
	const int *files;                /* the device's files (vqw_set_io), or none */
	unsigned nfiles;
	struct sockaddr_un sock_addr;    /* set: each TX chain connects a new socket
					  * made in slot 1 to it */
	int sock_res;                    /* the last such socket's result */
	bool pull_rx;                    /* RX is a pull queue: filled per TX chain */
	bool owe_after_io;               /* pull: the TX chain is answered at once, its
					  * RX buffer is owed once its host I/O (a NOP)
					  * completes, as vsock's credit update */
	unsigned rx_owed;                /* pull: RX buffers the device would fill */
	unsigned begun, ended;           /* serve_begin / serve_end calls */
	bool hook_off_thread;            /* a hook ran elsewhere than the worker */
	bool end_io_done;                /* serve_end's own I/O completed */
	const struct vqw_ops *vops;      /* the device's ops (default pair_vqw_ops) */
};

static pid_t task_tid(const char *name);

#define PAIR_NO_PUSH 0x10000u            /* a completion that returns no chain */

/* A pull RX queue: fill as many buffers as the device owes, then wait
 * for more. */
static void pair_avail(struct vqw_queue *q)
{
	struct pair *p = q->opaque;
	struct virtq_chain *c;

	while (p->rx_owed && vqw_pull(q, &c) == 1) {
		memset(c->iov[0].iov_base, 0x6b, c->iov[0].iov_len);
		vqw_push(q, c->head, (uint32_t)c->iov[0].iov_len);
		p->rx_owed--;
	}
	if (p->rx_owed)
		vqw_want(q);
}

static void pair_chain(struct vqw_queue *q, struct virtq_chain *c)
{
	struct pair *p = q->opaque;
	unsigned qi = q->idx;

	p->seen[qi] = pthread_self();
	if (p->pull_rx && p->owe_after_io) {
		struct io_uring_sqe *sqe = vqw_get_sqe(q->w);

		CHECK_EQ(qi, TX);
		io_uring_prep_nop(sqe);
		vqw_sqe_set_data(sqe, q, c->head | PAIR_NO_PUSH);
		p->inflight++;
		vqw_push(q, c->head, (uint32_t)c->total_len);
		return;
	}
	if (p->pull_rx) {
		/* Each TX chain owes the guest one RX buffer (a reply),
		 * pulled while this chain is still being handled. */
		CHECK_EQ(qi, TX);
		p->rx_owed++;
		pair_avail(&q->w->q[RX]);
		vqw_push(q, c->head, (uint32_t)c->total_len);
		return;
	}
	if (qi == RX) {
		/* Fill the writable buffer: what a NIC's receive would do. */
		memset(c->iov[0].iov_base, 0x5a, c->iov[0].iov_len);
		vqw_push(q, c->head, (uint32_t)c->iov[0].iov_len);
		return;
	}
	{
		struct io_uring_sqe *sqe = vqw_get_sqe(q->w);

		if (q->pushed > p->max_unpublished)
			p->max_unpublished = q->pushed;
		if (p->sock_addr.sun_family) {
			/* A socket into slot 1; its connect follows (the ring
			 * allows no IOSQE_IO_LINK: its restrictions). */
			io_uring_prep_socket_direct(sqe, AF_UNIX, SOCK_STREAM, 0, 1, 0);
			vqw_sqe_set_data(sqe, q, c->head | PAIR_NO_PUSH);
			p->inflight++;
			return;
		} else if (p->tx_fsync)
			io_uring_prep_fsync(sqe, 0, 0);
		else if (p->slow_tx)
			io_uring_prep_timeout(sqe, &p->forever, 0, 0);
		else if (p->brief.tv_nsec)
			io_uring_prep_timeout(sqe, &p->brief, 0, 0);
		else
			io_uring_prep_nop(sqe);
		vqw_sqe_set_data(sqe, q, c->head);
		p->inflight++;
	}
}

static void pair_complete(struct vqw_queue *q, uint32_t head, int res)
{
	struct pair *p = q->opaque;

	p->inflight--;
	if ((head & PAIR_NO_PUSH) && p->owe_after_io) {
		p->rx_owed++;
		pair_avail(&q->w->q[RX]);
		return;
	}
	if (head & PAIR_NO_PUSH) {
		struct io_uring_sqe *sqe = vqw_get_sqe(q->w);

		p->sock_res = res;
		io_uring_prep_connect(sqe, 1, (struct sockaddr *)&p->sock_addr,
				      sizeof(p->sock_addr));
		vqw_sqe_set_data(sqe, q, head & ~PAIR_NO_PUSH);
		p->inflight++;
		return;
	}
	p->res[head % QSIZE] = res;
	vqw_push(q, (uint16_t)head, 0);
}

static unsigned pair_inflight(const struct vqw_queue *q)
{
	const struct pair *p = q->opaque;

	return q->idx == TX ? p->inflight + __atomic_load_n(&p->stuck, __ATOMIC_RELAXED) : 0;
}

#define PAIR_END_IO 0x20000u             /* serve_end's own SQE */

static void pair_serve_begin(struct vqw_queue *q)
{
	struct pair *p = q->opaque;

	if (!pthread_equal(pthread_self(), q->w->thread) || vqw_stopping(q))
		p->hook_off_thread = true;
	p->begun++;
}

/* Host I/O of the device's own as the worker stops: a short wait the
 * stop must see end before it returns. */
static void pair_serve_end(struct vqw_queue *q)
{
	struct pair *p = q->opaque;
	struct io_uring_sqe *sqe = vqw_get_sqe(q->w);

	if (!pthread_equal(pthread_self(), q->w->thread))
		p->hook_off_thread = true;
	p->ended++;
	p->brief.tv_nsec = 20 * 1000 * 1000;
	io_uring_prep_timeout(sqe, &p->brief, 0, 0);
	vqw_sqe_set_data(sqe, &q->w->q[TX], PAIR_END_IO);
	p->inflight++;
}

static void pair_complete_hooked(struct vqw_queue *q, uint32_t data, int res)
{
	struct pair *p = q->opaque;

	if (data != PAIR_END_IO) {
		pair_complete(q, data, res);
		return;
	}
	/* Ended (-ETIME) or cancelled by the stop's cancel: either way
	 * before the stop returned. */
	(void)res;
	p->inflight--;
	p->end_io_done = true;
}

static const struct vqw_ops pair_vqw_ops = {
	.name = "pair",
	.chain = pair_chain,
	.complete = pair_complete,
	.inflight = pair_inflight,
	.avail = pair_avail,
};

static const struct vqw_ops pair_hooked_ops = {
	.name = "pair",
	.chain = pair_chain,
	.complete = pair_complete_hooked,
	.inflight = pair_inflight,
	.serve_begin = pair_serve_begin,
	.serve_end = pair_serve_end,
};

/* The worker serves both queues: made with the device (pair_up), its
 * thread launched with the VM, told to serve at the last queue's start
 * and to stop at the first queue's stop. */
static int pair_launch(struct virtio_dev *dev)
{
	struct pair *p = dev->priv;

	return vqw_launch(&p->w);
}

static void pair_halt(struct virtio_dev *dev)
{
	struct pair *p = dev->priv;

	vqw_end(&p->w);
}

static int pair_queue_start(struct virtio_dev *dev, unsigned q)
{
	struct pair *p = dev->priv;

	if (q != TX)
		return 0;
	vqw_start(&p->w, 3);
	p->running = true;
	return 0;
}

static void pair_queue_stop(struct virtio_dev *dev, unsigned q)
{
	struct pair *p = dev->priv;

	if (q != RX || !p->running)
		return;
	vqw_stop(&p->w);
	p->running = false;
}

static const struct virtio_device_ops pair_ops = {
	.name = "pair",
	.device_id = VIRTIO_ID_NET,
	.launch = pair_launch,
	.halt = pair_halt,
	.queue_start = pair_queue_start,
	.queue_stop = pair_queue_stop,
};

/* A pair as yet unconfigured: set its fields, then pair_up. */
static struct pair *pair_alloc(uint64_t sqe_ops)
{
	struct pair *p = calloc(1, sizeof(*p));

	CHECK(p);
	check_need_io_uring();
	p->sqe_ops = sqe_ops;
	p->forever.tv_sec = 60;
	return p;
}

/* The device on 4 MiB of fake RAM with its worker (its ring, its thread:
 * p->launched unless that failed), both queues set up, DRIVER_OK: the
 * worker serves them (p->running). */
static struct pair *pair_up(struct pair *p)
{
	static const unsigned idx[2] = { RX, TX };
	void *opaque[2] = { p, p };
	unsigned q;

	CHECK_EQ(vdrv_ram_init(&p->d, 0x1000, 4 << 20), 0);
	CHECK_EQ(virtio_dev_init(&p->dev, &pair_ops, p, &p->d.mem, 2, QSIZE), 0);
	p->dev.sandbox = p->sandbox;
	CHECK_EQ(vqw_init(&p->w, p->vops ? p->vops : &pair_vqw_ops, &p->dev, idx, opaque, 2,
			  QSIZE, p->poll_us, p->gather_us, "test-pair"), 0);
	if (p->fixed)
		CHECK_EQ(vqw_register_mem(&p->w, &p->d.mem), 0);
	if (p->pull_rx)
		CHECK_EQ(vqw_set_pull(&p->w, RX), 0);
	CHECK_EQ(vqw_set_io(&p->w, p->files, p->nfiles, p->sqe_ops), 0);
	p->launched = vdrv_attach(&p->d, &p->dev) == 0;
	if (!p->launched)
		return p;
	CHECK_EQ(vdrv_negotiate(&p->d, VIRTIO_BIT(VIRTIO_F_VERSION_1)), 0);
	for (q = 0; q < 2; q++)
		CHECK_EQ(vdrv_queue_setup(&p->d, q, QSIZE), 1);
	vdrv_driver_ok(&p->d);
	return p;
}

static struct pair *pair_new_full(bool slow_tx, uint64_t sqe_ops, unsigned gather_us)
{
	struct pair *p = pair_alloc(sqe_ops);

	p->slow_tx = slow_tx;
	p->gather_us = gather_us;
	pair_up(p);
	CHECK(p->running);
	return p;
}

static struct pair *pair_new_ops(bool slow_tx, uint64_t sqe_ops)
{
	return pair_new_full(slow_tx, sqe_ops, 0);
}

static struct pair *pair_new(bool slow_tx)
{
	return pair_new_ops(slow_tx, (1ULL << IORING_OP_NOP) | (1ULL << IORING_OP_TIMEOUT));
}

static void pair_free(struct pair *p)
{
	virtio_dev_destroy(&p->dev);
	vqw_fini(&p->w);        /* a worker never launched */
	if (p->launched)
		vdrv_detach(&p->d);
	free(p->d.ram);
	free(p);
}

/* Wait up to 5 s for n used entries on q; returns how many came. */
static unsigned wait_used(struct pair *p, unsigned q, unsigned n, uint32_t *lens)
{
	struct timespec start, now;
	unsigned got = 0;
	uint32_t id, len;

	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		while (got < n && vdrv_get_used(&p->d, q, &id, &len) == 1)
			lens[got++] = len;
		if (got == n)
			break;
		usleep(1000);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - start.tv_sec < 5);
	return got;
}

TEST(one_worker_serves_an_rx_tx_pair)
{
	struct pair *p = pair_new(false);
	uint64_t rx[8], tx[8];
	uint32_t lens[8];
	struct vqw_stats st;
	unsigned i;

	for (i = 0; i < 8; i++) {
		struct vdrv_sg r = { .gpa = rx[i] = vdrv_alloc(&p->d, 64, 8), .len = 64,
				     .writable = true };
		struct vdrv_sg t = { .gpa = tx[i] = vdrv_alloc(&p->d, 32, 8), .len = 32 };

		CHECK(vdrv_add(&p->d, RX, &r, 1, false) >= 0);
		CHECK(vdrv_add(&p->d, TX, &t, 1, false) >= 0);
	}
	vdrv_kick(&p->d, RX);
	vdrv_kick(&p->d, TX);
	CHECK_EQ(wait_used(p, RX, 8, lens), 8);
	for (i = 0; i < 8; i++) {
		CHECK_EQ(lens[i], 64);
		CHECK_EQ(((uint8_t *)vdrv_host(&p->d, rx[i]))[63], 0x5a);
	}
	CHECK_EQ(wait_used(p, TX, 8, lens), 8);
	for (i = 0; i < 8; i++)
		CHECK_EQ(lens[i], 0);
	/* Both queues on the same thread, and it is not ours. */
	CHECK(pthread_equal(p->seen[RX], p->seen[TX]));
	CHECK(!pthread_equal(p->seen[RX], pthread_self()));
	vqw_get_stats(&p->w.q[0], &st);
	CHECK_EQ(st.requests, 8);
	vqw_get_stats(&p->w.q[1], &st);
	CHECK_EQ(st.requests, 8);
	CHECK(st.irqs >= 1);
	pair_free(p);
}

static struct pair *pair_new_pull(void)
{
	struct pair *p = pair_alloc((1ULL << IORING_OP_NOP) | (1ULL << IORING_OP_TIMEOUT));

	p->pull_rx = true;
	pair_up(p);
	CHECK(p->running);
	return p;
}

static void post(struct pair *p, unsigned q, unsigned n, uint64_t *gpa)
{
	for (unsigned i = 0; i < n; i++) {
		struct vdrv_sg sg = { .gpa = vdrv_alloc(&p->d, 64, 8), .len = 64,
				      .writable = q == RX };

		if (gpa)
			gpa[i] = sg.gpa;
		CHECK(vdrv_add(&p->d, q, &sg, 1, false) >= 0);
	}
	vdrv_kick(&p->d, q);
}

/* A receive queue in pull mode: the guest's empty buffers wait in the
 * ring until the device has something to put in them (virtio-vsock,
 * virtio-net), and the device may pull while it handles another queue's
 * chain. */
TEST(pull_queue_gives_up_buffers_only_when_the_device_has_data)
{
	struct pair *p = pair_new_pull();
	uint64_t rx[4];
	uint32_t id, len, lens[4];
	struct vqw_stats st;

	post(p, RX, 4, rx);
	usleep(50000);
	CHECK_EQ(vdrv_get_used(&p->d, RX, &id, &len), 0);
	vqw_get_stats(&p->w.q[RX], &st);
	CHECK_EQ(st.requests, 0);
	post(p, TX, 2, NULL);
	CHECK_EQ(wait_used(p, TX, 2, lens), 2);
	CHECK_EQ(wait_used(p, RX, 2, lens), 2);
	CHECK_EQ(lens[0], 64);
	CHECK_EQ(lens[1], 64);
	CHECK_EQ(((uint8_t *)vdrv_host(&p->d, rx[0]))[0], 0x6b);
	CHECK_EQ(((uint8_t *)vdrv_host(&p->d, rx[1]))[63], 0x6b);
	/* The other two stay the guest's. */
	usleep(50000);
	CHECK_EQ(vdrv_get_used(&p->d, RX, &id, &len), 0);
	CHECK_EQ(((uint8_t *)vdrv_host(&p->d, rx[2]))[0], 0);
	pair_free(p);
}

/* Queues that share an interrupt (virtio-mmio's one line here, a
 * virtio-pci vector the vsock device's queues share) get one signal for
 * a round that completed on both, sent once both were published: a TX
 * chain whose reply fills an RX buffer in the same round raises one
 * interrupt, not one per queue. */
/* Two RX buffers waiting, then one TX chain: its answer and the RX
 * buffer it fills reach the driver; the two queues' counters. */
static void tx_answered_with_rx(struct pair *p, struct vqw_stats *rx, struct vqw_stats *tx)
{
	uint32_t lens[1];

	post(p, RX, 2, NULL);
	usleep(50000);
	post(p, TX, 1, NULL);
	CHECK_EQ(wait_used(p, TX, 1, lens), 1);
	CHECK_EQ(wait_used(p, RX, 1, lens), 1);
	usleep(20000);
	vqw_get_stats(&p->w.q[RX], rx);
	vqw_get_stats(&p->w.q[TX], tx);
}

TEST(queues_sharing_an_interrupt_get_one_signal_per_round)
{
	struct pair *p = pair_new_pull();
	struct vqw_stats rx, tx;

	tx_answered_with_rx(p, &rx, &tx);
	CHECK_EQ(rx.batches, 1);
	CHECK_EQ(tx.batches, 1);
	CHECK_EQ(rx.irqs + tx.irqs, 1);
	pair_free(p);
}

static const struct vqw_ops pair_settle_ops = {
	.name = "pair",
	.chain = pair_chain,
	.complete = pair_complete,
	.inflight = pair_inflight,
	.avail = pair_avail,
	.settle_io = true,
};

/* A TX chain answered at once whose host I/O, completing as it is
 * submitted, owes the guest an RX buffer (virtio-vsock: a packet out to
 * its socket, then the credit update): with ops->settle_io the round
 * submits before it publishes, and both reach the driver with one
 * interrupt; without, the RX buffer comes a round later, with its own. */
static void owed_after_io(bool settle, unsigned want_irqs)
{
	struct pair *p = pair_alloc((1ULL << IORING_OP_NOP) | (1ULL << IORING_OP_TIMEOUT));
	struct vqw_stats rx, tx;

	p->pull_rx = true;
	p->owe_after_io = true;
	p->vops = settle ? &pair_settle_ops : &pair_vqw_ops;
	pair_up(p);
	CHECK(p->running);
	tx_answered_with_rx(p, &rx, &tx);
	CHECK_EQ(rx.requests, 1);
	CHECK_EQ(rx.irqs + tx.irqs, want_irqs);
	pair_free(p);
}

TEST(settled_host_io_shares_the_rounds_interrupt)
{
	owed_after_io(true, 1);
}

TEST(unsettled_host_io_owes_its_buffer_a_round_later)
{
	owed_after_io(false, 2);
}

TEST(pull_queue_that_wants_buffers_is_woken_by_the_guests_kick)
{
	struct pair *p = pair_new_pull();
	uint32_t id, len, lens[3];

	post(p, TX, 3, NULL);
	CHECK_EQ(wait_used(p, TX, 3, lens), 3);
	usleep(20000);
	CHECK_EQ(vdrv_get_used(&p->d, RX, &id, &len), 0);
	post(p, RX, 3, NULL);
	CHECK_EQ(wait_used(p, RX, 3, lens), 3);
	CHECK_EQ(lens[2], 64);
	pair_free(p);
}

TEST(set_pull_needs_the_avail_op_and_comes_before_launch)
{
	struct pair *p = pair_new_pull();

	CHECK_EQ(vqw_set_pull(&p->w, TX), -EINVAL);      /* launched */
	CHECK_EQ(vqw_set_pull(&p->w, 5), -EINVAL);
	pair_free(p);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	CHECK(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* A device's empty file slots: the ring makes sockets there itself
 * (IORING_OP_SOCKET, CONNECT), under its restrictions, and none of them
 * enters the process's file table; a new socket in a slot releases the
 * old one, whose peer sees the end. What virtio-vsock's host side needs
 * once the thread is inside its filter. */
TEST(ring_makes_sockets_in_empty_slots_outside_the_fd_table)
{
	static const int files[2] = { -1, -1 };
	struct pair *p = pair_alloc((1ULL << IORING_OP_SOCKET) | (1ULL << IORING_OP_CONNECT));
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	uint32_t lens[1];
	int lfd, c1, c2, n0;
	char b;

	snprintf(a.sun_path, sizeof(a.sun_path), "/tmp/mvm-test-vqw-%d.sock", (int)getpid());
	unlink(a.sun_path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(lfd >= 0);
	CHECK_EQ(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ(listen(lfd, 4), 0);
	p->files = files;
	p->nfiles = 2;
	p->sock_addr = a;
	p->sock_res = 1;
	pair_up(p);
	CHECK(p->running);
	n0 = count_fds();
	post(p, TX, 1, NULL);
	CHECK_EQ(wait_used(p, TX, 1, lens), 1);
	CHECK_EQ(p->sock_res, 0);
	CHECK_EQ(p->res[0], 0);               /* connected */
	CHECK_EQ(count_fds(), n0);
	c1 = accept(lfd, NULL, NULL);
	CHECK(c1 >= 0);
	post(p, TX, 1, NULL);
	CHECK_EQ(wait_used(p, TX, 1, lens), 1);
	CHECK_EQ(p->res[1], 0);
	CHECK_EQ(recv(c1, &b, 1, 0), 0);      /* the first socket is gone */
	c2 = accept(lfd, NULL, NULL);
	CHECK(c2 >= 0);
	pair_free(p);
	/* The ring's end closed the second. */
	CHECK_EQ(recv(c2, &b, 1, 0), 0);
	close(c1);
	close(c2);
	close(lfd);
	unlink(a.sun_path);
}

/* Every notification the guest sends is counted (a kick is a VM exit:
 * kicks per request say how well notification suppression works), however
 * the kicks fall between the worker's reads of its eventfd. */
/* A device may start host I/O of its own when the worker begins serving
 * (vsock: accept on its listening socket) and let go of host state as it
 * stops (vsock: close its connections' sockets); both on the worker's
 * thread, and the stop waits for what the second one started. */
TEST(device_hooks_run_on_the_worker_as_it_begins_and_ends_serving)
{
	struct pair *p = pair_alloc((1ULL << IORING_OP_NOP) | (1ULL << IORING_OP_TIMEOUT));
	unsigned q, spins;

	p->vops = &pair_hooked_ops;
	pair_up(p);
	CHECK(p->running);
	for (spins = 0; !__atomic_load_n(&p->begun, __ATOMIC_ACQUIRE) && spins < 5000; spins++)
		usleep(1000);
	CHECK_EQ(__atomic_load_n(&p->begun, __ATOMIC_ACQUIRE), 1);
	CHECK_EQ(p->ended, 0);
	vdrv_wr(&p->d, VIRTIO_MMIO_STATUS, 0);      /* reset: vqw_stop */
	CHECK_EQ(p->ended, 1);
	CHECK(p->end_io_done);
	CHECK_EQ(p->inflight, 0);
	CHECK_EQ(vdrv_negotiate(&p->d, VIRTIO_BIT(VIRTIO_F_VERSION_1)), 0);
	for (q = 0; q < 2; q++)
		CHECK_EQ(vdrv_queue_setup(&p->d, q, QSIZE), 1);
	vdrv_driver_ok(&p->d);
	for (spins = 0; __atomic_load_n(&p->begun, __ATOMIC_ACQUIRE) < 2 && spins < 5000; spins++)
		usleep(1000);
	CHECK_EQ(__atomic_load_n(&p->begun, __ATOMIC_ACQUIRE), 2);
	CHECK(!p->hook_off_thread);
	pair_free(p);
}

TEST(worker_counts_every_guest_notification)
{
	struct pair *p = pair_new(false);
	uint32_t lens[6];
	struct vqw_stats st;
	unsigned i;

	for (i = 0; i < 6; i++) {
		struct vdrv_sg t = { .gpa = vdrv_alloc(&p->d, 32, 8), .len = 32 };

		CHECK(vdrv_add(&p->d, TX, &t, 1, false) >= 0);
		vdrv_kick(&p->d, TX);
		if (i == 2)
			vdrv_kick(&p->d, TX);  /* a spurious one counts too */
		CHECK_EQ(wait_used(p, TX, 1, lens), 1);
	}
	/* The last kick's read may complete after its chain was used. Each
	 * queue also got the one kick the device gives itself at start (for
	 * buffers made available before DRIVER_OK). */
	for (i = 0; i < 500; i++) {
		vqw_get_stats(&p->w.q[1], &st);
		if (st.kicks >= 1 + 7)
			break;
		usleep(1000);
	}
	CHECK_EQ(st.kicks, 1 + 7);
	CHECK_EQ(st.requests, 6);
	vqw_get_stats(&p->w.q[0], &st);
	CHECK_EQ(st.kicks, 1);
	pair_free(p);
}

/* A driver that posts three requests 100 us apart, without waiting for
 * the first (a guest slower than the host, at queue depth 3): once a probe
 * has found that waiting pays, the worker waits after each kick and takes
 * all three as one batch. The driver honours NO_NOTIFY, as Linux does:
 * the worker's wait is not cut short by kicks it suppressed. */
TEST(worker_gathers_requests_a_slow_driver_posts_after_its_kick)
{
	struct pair *p = pair_new_full(false, (1ULL << IORING_OP_NOP), 1000);
	uint32_t lens[3];
	struct vqw_stats st;
	unsigned i, k;

	/* Once on, 2 of every 3 requests are gathered (80 in 40 rounds when
	 * idle, 46 with three busy loops on two CPUs, under 30 once in a
	 * sanitizer build on a loaded CI machine). So the rounds go on until
	 * 30 were gathered, up to 400: a worker whose waits gather nothing
	 * still fails, a slow machine only takes more rounds. */
	for (i = 0; i < 400; i++) {
		for (k = 0; k < 3; k++) {
			struct vdrv_sg a = { .gpa = vdrv_alloc(&p->d, 32, 8), .len = 32,
					     .writable = true };

			if (k)
				usleep(100);
			CHECK(vdrv_add(&p->d, RX, &a, 1, false) >= 0);
			/* Pairs with virtq_notify_enable's full barrier. */
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
			if (!(vdrv_used_flags(&p->d, RX) & VRING_USED_F_NO_NOTIFY))
				vdrv_kick(&p->d, RX);
		}
		CHECK_EQ(wait_used(p, RX, 3, lens), 3);
		vqw_get_stats(&p->w.q[RX], &st);
		if (i >= 39 && st.gathered >= 30)
			break;
	}
	CHECK_EQ(st.requests, 3 * (uint64_t)(i < 400 ? i + 1 : 400));
	CHECK(st.gathered >= 30);
	CHECK(st.batches <= st.requests - 30);
	pair_free(p);
}

/* Notify TX unless the device asked for none (NO_NOTIFY), after a full
 * barrier that pairs with virtq_notify_enable's. */
static void tx_notify(struct pair *p)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!(vdrv_used_flags(&p->d, TX) & VRING_USED_F_NO_NOTIFY))
		vdrv_kick(&p->d, TX);
}

/* Pause `usec`, then take every TX used entry there is; 30 s after
 * `start` the test has failed. */
static void tx_pause_reap(struct pair *p, unsigned usec, const struct timespec *start,
			  unsigned *done, unsigned *inflight)
{
	struct timespec now;
	uint32_t id, len;

	usleep(usec);
	while (vdrv_get_used(&p->d, TX, &id, &len) == 1) {
		(*done)++;
		(*inflight)--;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	CHECK(now.tv_sec - start->tv_sec < 30);
}

/* A driver that waits for each completion before it posts again (queue
 * depth 1) gains nothing from a wait: after the first probe finds nothing,
 * the worker stops waiting and probes again at doubling intervals (after
 * 16, 32, 64, 128 wake-ups), so 200 requests see at most 4 waits. */
TEST(worker_stops_gathering_for_a_driver_that_waits_for_each_request)
{
	struct pair *p = pair_new_full(false, (1ULL << IORING_OP_NOP), 1000);
	uint32_t lens[1];
	struct vqw_stats st;
	unsigned i;

	for (i = 0; i < 200; i++) {
		struct vdrv_sg a = { .gpa = vdrv_alloc(&p->d, 32, 8), .len = 32, .writable = true };

		CHECK(vdrv_add(&p->d, RX, &a, 1, false) >= 0);
		vdrv_kick(&p->d, RX);
		CHECK_EQ(wait_used(p, RX, 1, lens), 1);
	}
	vqw_get_stats(&p->w.q[RX], &st);
	CHECK(st.gathers >= 1);
	CHECK(st.gathers <= 4);
	CHECK_EQ(st.gathered, 0);
	pair_free(p);
}

/* Gathering never strands a request: a driver that keeps up to 8 TX
 * requests in flight, posts them in bursts with pauses of 0-300 us and
 * kicks only where the device asks for it (NO_NOTIFY), gets every one
 * back, with the worker's waits switching on and off under it. */
TEST(gathering_strands_no_request)
{
	struct pair *p = pair_new_full(false, (1ULL << IORING_OP_NOP), 100);
	struct timespec start;
	unsigned posted = 0, done = 0, inflight = 0, seed = 1;
	struct vdrv_sg t = { .gpa = vdrv_alloc(&p->d, 32, 8), .len = 32 };
	struct vqw_stats st;

	clock_gettime(CLOCK_MONOTONIC, &start);
	while (done < 4000) {
		unsigned burst = 1 + (seed = seed * 1103515245 + 12345) % 4, i;

		for (i = 0; i < burst && inflight < 8 && posted < 4000; i++) {
			CHECK(vdrv_add(&p->d, TX, &t, 1, false) >= 0);
			posted++;
			inflight++;
		}
		tx_notify(p);
		tx_pause_reap(p, (seed >> 8) % 300, &start, &done, &inflight);
	}
	vqw_get_stats(&p->w.q[TX], &st);
	CHECK_EQ(st.requests, 4000);
	vqw_get_stats(&p->w.q[RX], &st);   /* the worker's own counts: its first queue's */
	CHECK(st.gathers > 0);
	pair_free(p);
}

/* What completed is published (and interrupts the driver) before the
 * worker parses new chains, so the driver can refill the ring while the
 * worker works. With TX I/O that takes a while (30 us each, so chains
 * complete at staggered times) and the driver reposting every chain as
 * soon as it comes back, no TX chain is ever parsed while TX completions
 * wait unpublished. */
TEST(completions_are_published_before_new_chains_are_parsed)
{
	struct pair *p = pair_new(false);
	struct timespec start, now;
	unsigned done = 0, i;
	uint32_t id, len;

	p->brief.tv_nsec = 30000;
	for (i = 0; i < 8; i++) {
		vdrv_desc_set(&p->d, TX, (uint16_t)i, vdrv_alloc(&p->d, 32, 8), 32, 0, 0);
		vdrv_avail_add_head(&p->d, TX, (uint16_t)i);
	}
	vdrv_kick(&p->d, TX);
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (done < 3000) {
		unsigned got = 0;

		while (vdrv_get_used(&p->d, TX, &id, &len) == 1) {
			CHECK(id < 8);
			vdrv_avail_add_head(&p->d, TX, (uint16_t)id);
			got++;
		}
		if (got)
			vdrv_kick(&p->d, TX);
		done += got;
		clock_gettime(CLOCK_MONOTONIC, &now);
		CHECK(now.tv_sec - start.tv_sec < 20);
	}
	CHECK_EQ(p->max_unpublished, 0);
	pair_free(p);
}

TEST(stop_cancels_host_io_and_returns_nothing_after)
{
	struct pair *p = pair_new(true);
	struct vdrv_sg t;
	struct timespec a, b;
	uint32_t lens[4];
	unsigned i;

	for (i = 0; i < 4; i++) {
		t = (struct vdrv_sg){ .gpa = vdrv_alloc(&p->d, 32, 8), .len = 32 };
		CHECK(vdrv_add(&p->d, TX, &t, 1, false) >= 0);
	}
	vdrv_kick(&p->d, TX);
	/* Let the worker take the chains and start their (endless) I/O. */
	for (i = 0; i < 500 && __atomic_load_n(&p->w.q[1].st.requests, __ATOMIC_RELAXED) < 4; i++)
		usleep(1000);
	CHECK_EQ(p->w.q[1].st.requests, 4);
	clock_gettime(CLOCK_MONOTONIC, &a);
	vdrv_wr(&p->d, VIRTIO_MMIO_STATUS, 0);     /* reset: queue_stop -> vqw_stop */
	clock_gettime(CLOCK_MONOTONIC, &b);
	CHECK(!p->running);
	CHECK_EQ(p->inflight, 0);                  /* cancelled and reaped */
	CHECK(b.tv_sec - a.tv_sec < 5);            /* not the 60 s timeout */
	CHECK_EQ(wait_used(p, TX, 1, lens), 0);    /* nothing pushed while stopping */
	pair_free(p);
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Post n one-buffer TX chains and kick. */
static void post_tx(struct pair *p, unsigned n)
{
	struct vdrv_sg t;
	unsigned i;

	for (i = 0; i < n; i++) {
		t = (struct vdrv_sg){ .gpa = vdrv_alloc(&p->d, 32, 8), .len = 32 };
		CHECK(vdrv_add(&p->d, TX, &t, 1, false) >= 0);
	}
	vdrv_kick(&p->d, TX);
}

/* A pause's quiesce: the wait returns once the host I/O in flight has
 * completed and its chains are back in the guest's ring; what the guest
 * posts while quiesced stays in its ring (its kick is counted, nothing
 * is taken), and all of it is served once the quiesce ends. */
TEST(quiesce_completes_io_in_flight_and_takes_nothing_new)
{
	struct pair *p = pair_alloc((1ULL << IORING_OP_NOP) | (1ULL << IORING_OP_TIMEOUT));
	uint32_t lens[8], id, len;
	uint64_t t0, kicks;
	unsigned i;

	p->brief.tv_nsec = 200 * 1000 * 1000;     /* each TX I/O lasts 200 ms */
	pair_up(p);
	CHECK(p->running);
	post_tx(p, 2);
	for (i = 0; i < 500 && __atomic_load_n(&p->w.q[TX].st.requests, __ATOMIC_RELAXED) < 2; i++)
		usleep(1000);
	CHECK_EQ(p->w.q[TX].st.requests, 2);
	t0 = now_ns();
	vqw_quiesce(&p->w, true);
	CHECK_EQ(vqw_quiesce_wait(&p->w, t0 + 5000000000ull), 0);
	CHECK(now_ns() - t0 >= 100000000ull);      /* it waited for the I/O */
	CHECK_EQ(__atomic_load_n(&p->inflight, __ATOMIC_RELAXED), 0);
	CHECK_EQ(wait_used(p, TX, 2, lens), 2);    /* published before the wait returned */
	kicks = __atomic_load_n(&p->w.q[TX].st.kicks, __ATOMIC_RELAXED);
	post_tx(p, 3);
	usleep(300 * 1000);
	CHECK_EQ(p->w.q[TX].st.requests, 2);       /* nothing taken while quiesced */
	CHECK(__atomic_load_n(&p->w.q[TX].st.kicks, __ATOMIC_RELAXED) > kicks);
	CHECK_EQ(vdrv_get_used(&p->d, TX, &id, &len), 0);
	vqw_quiesce(&p->w, false);
	CHECK_EQ(vqw_quiesce_wait(&p->w, now_ns() + 5000000000ull), 0);
	CHECK_EQ(wait_used(p, TX, 3, lens), 3);    /* served once it ended */
	CHECK_EQ(p->w.q[TX].st.requests, 5);
	pair_free(p);
}

/* Host I/O that does not end keeps the worker from being quiet: the wait
 * says so at its deadline, and the worker can still be let go and reset. */
TEST(quiesce_wait_times_out_while_host_io_goes_on)
{
	struct pair *p = pair_new(true);
	uint32_t id, len;
	uint64_t t0;
	unsigned i;

	post_tx(p, 1);
	for (i = 0; i < 500 && __atomic_load_n(&p->w.q[TX].st.requests, __ATOMIC_RELAXED) < 1; i++)
		usleep(1000);
	vqw_quiesce(&p->w, true);
	t0 = now_ns();
	CHECK_EQ(vqw_quiesce_wait(&p->w, t0 + 200000000ull), -ETIMEDOUT);
	CHECK(now_ns() - t0 >= 200000000ull);
	vqw_quiesce(&p->w, false);
	CHECK_EQ(vqw_quiesce_wait(&p->w, now_ns() + 5000000000ull), 0);
	vdrv_wr(&p->d, VIRTIO_MMIO_STATUS, 0);     /* the stop cancels it */
	CHECK(!p->running);
	CHECK_EQ(vdrv_get_used(&p->d, TX, &id, &len), 0);
	pair_free(p);
}

/* A pull queue is not filled while quiesced, though the device owes the
 * guest a buffer; it is once the quiesce ends. */
TEST(quiesced_worker_pulls_no_buffer)
{
	struct pair *p = pair_new_pull();
	uint32_t lens[2], id, len;

	post(p, TX, 1, NULL);                      /* owes one RX buffer, none there */
	CHECK_EQ(wait_used(p, TX, 1, lens), 1);
	vqw_quiesce(&p->w, true);
	CHECK_EQ(vqw_quiesce_wait(&p->w, now_ns() + 5000000000ull), 0);
	post(p, RX, 1, NULL);
	usleep(200 * 1000);
	CHECK_EQ(vdrv_get_used(&p->d, RX, &id, &len), 0);
	CHECK_EQ(p->w.q[RX].st.requests, 0);
	vqw_quiesce(&p->w, false);
	CHECK_EQ(wait_used(p, RX, 1, lens), 1);
	CHECK_EQ(lens[0], 64);
	pair_free(p);
}

/* The count after "UserFiles:" or "UserBufs:" in a ring's fdinfo. */
/* fdinfo lists a ring's registered files and buffers only when it gets
 * the ring's lock without waiting (io_uring_show_fdinfo's trylock): a
 * key that is missing because the ring's thread held it is read again. */
static int fdinfo_count(int fd, const char *key)
{
	char path[64], line[256];
	size_t n = strlen(key);
	int v = -1, tries;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	for (tries = 0; v < 0 && tries < 1000; tries++) {
		if (tries)
			usleep(1000);
		f = fopen(path, "r");
		CHECK(f);
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, key, n) && line[n] == ':')
				v = atoi(line + n + 1);
		fclose(f);
	}
	return v;
}

static int ring_fdinfo(const struct pair *p, const char *key)
{
	return fdinfo_count(p->w.ring.ring_fd, key);
}

static void record_line(void *opaque, int level, const char *msg)
{
	(void)level;
	snprintf(opaque, 512, "%s", msg);
}

/* Host I/O that no cancel ends does not hang a reset (or SIGTERM's
 * teardown): the stop gives it VQW_STOP_DEADLINE_NS, says so, and returns;
 * nothing reaches the guest after. */
TEST(stop_gives_up_on_host_io_that_will_not_end_after_its_deadline)
{
	struct pair *p = pair_new(false);
	char line[512] = "";
	struct log_sink sink = { record_line, line };
	struct vdrv_sg t = { .gpa = vdrv_alloc(&p->d, 32, 8), .len = 32 };
	struct timespec a, b;
	uint32_t lens[1];
	long long ns;

	/* Serving (a RUN and a PARK the worker has not seen yet cancel out). */
	CHECK(vdrv_add(&p->d, TX, &t, 1, false) >= 0);
	vdrv_kick(&p->d, TX);
	CHECK_EQ(wait_used(p, TX, 1, lens), 1);
	p->dev.log = &sink;
	__atomic_store_n(&p->stuck, 1, __ATOMIC_RELAXED);
	clock_gettime(CLOCK_MONOTONIC, &a);
	vdrv_wr(&p->d, VIRTIO_MMIO_STATUS, 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ns = (b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
	CHECK(!p->running);
	CHECK(ns >= (long long)VQW_STOP_DEADLINE_NS);
	CHECK(ns < (long long)VQW_STOP_DEADLINE_NS + 3000000000LL);
	CHECK(strstr(line, "did not end within") != NULL);
	__atomic_store_n(&p->stuck, 0, __ATOMIC_RELAXED);
	p->dev.log = NULL;
	pair_free(p);
}

/* A worker keeps its ring across the driver's resets: what it registered
 * as it started (the ctl eventfd and both kick eventfds; guest RAM in one
 * chunk, before its filter) is still there after a stop and a new start,
 * and the thread is the same. No ring is made or registered at DRIVER_OK. */
TEST(worker_keeps_its_ring_and_thread_across_resets)
{
	struct pair *p = pair_alloc(1ULL << IORING_OP_NOP);
	int fd;
	pid_t tid;
	unsigned round;

	p->fixed = true;
	pair_up(p);
	CHECK(p->running);
	fd = p->w.ring.ring_fd;
	tid = task_tid("test-pair");
	CHECK(tid > 0);
	CHECK_EQ(ring_fdinfo(p, "UserFiles"), 3);
	CHECK_EQ(ring_fdinfo(p, "UserBufs"), 1);
	for (round = 0; round < 3; round++) {
		struct vdrv_sg t = { .gpa = vdrv_alloc(&p->d, 32, 8), .len = 32 };
		uint32_t lens[1];
		unsigned q;

		vdrv_wr(&p->d, VIRTIO_MMIO_STATUS, 0);      /* reset: vqw_stop */
		CHECK(!p->running);
		CHECK_EQ(ring_fdinfo(p, "UserFiles"), 3);
		CHECK_EQ(ring_fdinfo(p, "UserBufs"), 1);
		CHECK_EQ(vdrv_negotiate(&p->d, VIRTIO_BIT(VIRTIO_F_VERSION_1)), 0);
		for (q = 0; q < 2; q++)
			CHECK_EQ(vdrv_queue_setup(&p->d, q, QSIZE), 1);
		vdrv_driver_ok(&p->d);
		CHECK(p->running);
		CHECK(vdrv_add(&p->d, TX, &t, 1, false) >= 0);
		vdrv_kick(&p->d, TX);
		CHECK_EQ(wait_used(p, TX, 1, lens), 1);
		CHECK_EQ(p->w.ring.ring_fd, fd);
		CHECK_EQ(task_tid("test-pair"), tid);
	}
	pair_free(p);
}

/* The ring is SINGLE_ISSUER: once its thread enabled it, only that thread
 * may unregister. So the thread drops its registered files (which would
 * hold an image's OFD lock) and buffers (pinned guest RAM) itself as it
 * ends, before the ring's asynchronous teardown after vqw_fini: seen from
 * a copy of the ring's fd, which outlives vqw_fini. */
TEST(ended_worker_has_dropped_its_files_and_buffers)
{
	struct pair *p = pair_alloc(1ULL << IORING_OP_NOP);
	int copy;

	p->fixed = true;
	pair_up(p);
	CHECK(p->running);
	copy = dup(p->w.ring.ring_fd);
	CHECK(copy >= 0);
	CHECK_EQ(fdinfo_count(copy, "UserFiles"), 3);
	CHECK_EQ(fdinfo_count(copy, "UserBufs"), 1);
	virtio_dev_destroy(&p->dev);    /* stops, then ends the thread */
	CHECK_EQ(fdinfo_count(copy, "UserFiles"), 0);
	CHECK_EQ(fdinfo_count(copy, "UserBufs"), 0);
	close(copy);
	vqw_fini(&p->w);
	vdrv_detach(&p->d);
	free(p->d.ram);
	free(p);
}

TEST(init_rejects_bad_queue_sets)
{
	struct pair *p = pair_new(false);
	struct vqw w;
	unsigned idx[VQW_MAX_QUEUES + 1] = { 0 }, bad = 7;
	void *opaque[VQW_MAX_QUEUES + 1] = { 0 };

	CHECK_EQ(vqw_init(&w, &pair_vqw_ops, &p->dev, idx, opaque, 0, 4, 0, 0, "x"), -EINVAL);
	CHECK_EQ(vqw_init(&w, &pair_vqw_ops, &p->dev, idx, opaque, VQW_MAX_QUEUES + 1, 4, 0, 0, "x"),
		 -EINVAL);
	CHECK_EQ(vqw_init(&w, &pair_vqw_ops, &p->dev, &bad, opaque, 1, 4, 0, 0, "x"), -EINVAL);
	pair_free(p);
}

/* The ring's restrictions: a device's SQE with an opcode it did not
 * declare never runs; it completes with -EACCES. Declared ones run. */
TEST(undeclared_opcode_completes_with_eacces)
{
	struct pair *p = pair_alloc(1ULL << IORING_OP_NOP);
	struct vdrv_sg t;
	uint32_t lens[1];
	int head;

	p->tx_fsync = true;     /* an fsync of the ctl eventfd: not declared */
	pair_up(p);
	t = (struct vdrv_sg){ .gpa = vdrv_alloc(&p->d, 32, 8), .len = 32 };
	head = vdrv_add(&p->d, TX, &t, 1, false);

	CHECK(head >= 0);
	vdrv_kick(&p->d, TX);
	CHECK_EQ(wait_used(p, TX, 1, lens), 1);     /* not the 60 s timeout */
	CHECK_EQ(p->res[head], -EACCES);
	pair_free(p);
}

TEST(declared_opcode_runs)
{
	struct pair *p = pair_new(false);            /* NOP, declared */
	struct vdrv_sg t = { .gpa = vdrv_alloc(&p->d, 32, 8), .len = 32 };
	uint32_t lens[1];
	int head = vdrv_add(&p->d, TX, &t, 1, false);

	CHECK(head >= 0);
	p->res[head] = -1;
	vdrv_kick(&p->d, TX);
	CHECK_EQ(wait_used(p, TX, 1, lens), 1);
	CHECK_EQ(p->res[head], 0);
	pair_free(p);
}

/* The tid of the task named name in this process, or -1. */
static pid_t task_tid(const char *name)
{
	char path[300], buf[64];
	struct dirent *e;
	pid_t tid = -1;
	DIR *d = opendir("/proc/self/task");

	CHECK(d);
	while (tid < 0 && (e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) && !strncmp(buf, name, strlen(name)))
			tid = atoi(e->d_name);
		fclose(f);
	}
	closedir(d);
	return tid;
}

/* A number field ("Seccomp:", "nonvoluntary_ctxt_switches:") of task tid's
 * status, or -1. */
static long task_status(pid_t tid, const char *field)
{
	char path[64], buf[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "re");
	CHECK(f);
	while (fgets(buf, sizeof(buf), f))
		if (!strncmp(buf, field, strlen(field)))
			v = atol(buf + strlen(field));
	fclose(f);
	return v;
}

/* "Seccomp:" of the task named name in this process: 0 none, 2 filter;
 * -1 no such task. */
static int task_seccomp_mode(const char *name)
{
	pid_t tid = task_tid(name);

	return tid < 0 ? -1 : (int)task_status(tid, "Seccomp:");
}

/* A pair whose worker runs in the queue thread's seccomp filter, polling
 * for up to poll_us; skips where there is no seccomp. */
static struct pair *pair_new_sandboxed(unsigned poll_us)
{
	struct pair *p = pair_alloc(1ULL << IORING_OP_NOP);

	p->poll_us = poll_us;
	p->sandbox = true;
	pair_up(p);
	if (!p->launched)
		CHECK_SKIP("the worker could not enter its filter: no seccomp here (qemu-user?)");
	return p;
}

/* With the device's sandbox on, the worker thread (and only it) runs in
 * the queue thread's seccomp filter, named before vqw_start returns, and
 * still serves its queues. */
TEST(worker_serves_its_queues_inside_the_queue_filter)
{
	struct pair *p = pair_new_sandboxed(0);
	struct vdrv_sg t;
	uint32_t lens[1];

	CHECK_EQ(task_seccomp_mode("test-pair"), 2);
	CHECK_EQ(task_seccomp_mode("test_virtq_work"), 0);    /* this thread: untouched */
	t = (struct vdrv_sg){ .gpa = vdrv_alloc(&p->d, 32, 8), .len = 32 };
	CHECK(vdrv_add(&p->d, TX, &t, 1, false) >= 0);
	vdrv_kick(&p->d, TX);
	CHECK_EQ(wait_used(p, TX, 1, lens), 1);
	pair_free(p);
}

/* --- adaptive polling (struct vqw_poll) ----------------------------------- */

/* poll=0 never polls, whatever happens. */
TEST(poll_window_zero_max_never_polls)
{
	struct vqw_poll p;

	vqw_poll_init(&p, 0);
	CHECK_EQ(vqw_poll_window(&p, 0), 0);
	vqw_poll_slept(&p, 100, 1000);
	vqw_poll_slept(&p, 100, 2000);
	CHECK_EQ(vqw_poll_window(&p, 3000), 0);
}

/* Quick wake-ups (the guest's next request came within the longest
 * window) double the window up to the disk's poll=; long sleeps halve it
 * down to nothing; then one quick wake-up starts it again small. */
TEST(poll_window_grows_on_quick_wakeups_and_shrinks_on_long_sleeps)
{
	struct vqw_poll p;
	uint64_t now = 1000000;
	unsigned i;

	vqw_poll_init(&p, 32);
	CHECK_EQ(vqw_poll_window(&p, now), VQW_POLL_START_NS);
	vqw_poll_slept(&p, 10000, now);
	CHECK_EQ(vqw_poll_window(&p, now), 2 * VQW_POLL_START_NS);
	for (i = 0; i < 10; i++)
		vqw_poll_slept(&p, 10000, now);
	CHECK_EQ(vqw_poll_window(&p, now), 32000);   /* capped at poll=32 */
	vqw_poll_slept(&p, 5000000, now);
	CHECK_EQ(vqw_poll_window(&p, now), 16000);
	for (i = 0; i < 10; i++)
		vqw_poll_slept(&p, 5000000, now);
	CHECK_EQ(vqw_poll_window(&p, now), 0);      /* an idle disk does not poll */
	vqw_poll_slept(&p, 3000, now);
	CHECK_EQ(vqw_poll_window(&p, now), VQW_POLL_START_NS);
	/* A window above poll= is never used. */
	vqw_poll_init(&p, 2);
	CHECK_EQ(vqw_poll_window(&p, now), 2000);
	vqw_poll_slept(&p, 1000, now);
	CHECK_EQ(vqw_poll_window(&p, now), 2000);
}

/* Losing the CPU while polling (an overcommitted host) stops polling for
 * 1 ms, doubling while it recurs up to 1 s; sleeps during the pause do
 * not grow the window; a poll that keeps its CPU resets the pause. */
/* Quick wake-ups grow a poll=64 window to its top. */
static void poll_grow_to_64us(struct vqw_poll *p, uint64_t now)
{
	unsigned i;

	for (i = 0; i < 10; i++)
		vqw_poll_slept(p, 1000, now);
	CHECK_EQ(vqw_poll_window(p, now), 64000);
}

TEST(poll_stops_after_preemption_with_growing_backoff)
{
	struct vqw_poll p;
	uint64_t now = 5000000000ULL;
	unsigned i;

	vqw_poll_init(&p, 64);
	poll_grow_to_64us(&p, now);
	vqw_poll_preempted(&p, now);
	CHECK_EQ(vqw_poll_window(&p, now), 0);
	CHECK_EQ(vqw_poll_window(&p, now + VQW_POLL_BACKOFF_MIN_NS - 1), 0);
	vqw_poll_slept(&p, 1000, now + 10);         /* paused: no growth */
	CHECK_EQ(vqw_poll_window(&p, now + VQW_POLL_BACKOFF_MIN_NS), VQW_POLL_START_NS);
	now += VQW_POLL_BACKOFF_MIN_NS;
	vqw_poll_preempted(&p, now);                /* again: 2 ms */
	CHECK_EQ(vqw_poll_window(&p, now + 2 * VQW_POLL_BACKOFF_MIN_NS - 1), 0);
	CHECK(vqw_poll_window(&p, now + 2 * VQW_POLL_BACKOFF_MIN_NS) > 0);
	for (i = 0; i < 40; i++)
		vqw_poll_preempted(&p, now);
	CHECK_EQ(p.backoff_ns, VQW_POLL_BACKOFF_MAX_NS);
	CHECK_EQ(vqw_poll_window(&p, now + VQW_POLL_BACKOFF_MAX_NS - 1), 0);
	vqw_poll_ran(&p);
	vqw_poll_preempted(&p, now);
	CHECK_EQ(p.backoff_ns, VQW_POLL_BACKOFF_MIN_NS);
}

/* A gap in the poll loop is a preemption only where another task took the
 * CPU (the thread's involuntary context switches moved since the last gap,
 * or cannot be read), or where it lasted a hypervisor's scheduler slice,
 * or came soon after one. Short gaps without a switch (interrupts, brief
 * exits to a hypervisor) otherwise leave polling on. */
TEST(poll_gap_backs_off_only_when_another_task_took_the_cpu)
{
	struct vqw_poll p;
	uint64_t now = 5000000000ULL;
	unsigned i;

	vqw_poll_init(&p, 64);
	poll_grow_to_64us(&p, now);
	CHECK(vqw_poll_gap(&p, 30000, 7, now));  /* first gap: no count to compare with yet */
	now += VQW_POLL_BACKOFF_MAX_NS;
	vqw_poll_ran(&p);
	poll_grow_to_64us(&p, now);
	for (i = 0; i < 100; i++)                   /* same count: interrupts */
		CHECK(!vqw_poll_gap(&p, VQW_POLL_STOLEN_NS - 1, 7, now));
	CHECK_EQ(vqw_poll_window(&p, now), 64000);   /* polling goes on, window kept */
	CHECK(vqw_poll_gap(&p, 30000, 8, now));      /* switched out: back off */
	CHECK_EQ(vqw_poll_window(&p, now), 0);
	CHECK_EQ(vqw_poll_window(&p, now + VQW_POLL_BACKOFF_MIN_NS), VQW_POLL_START_NS);
	now += VQW_POLL_BACKOFF_MIN_NS;
	CHECK(!vqw_poll_gap(&p, 30000, 8, now));
	CHECK(vqw_poll_gap(&p, 30000, -1, now));     /* cannot tell */
	CHECK_EQ(p.backoff_ns, 2 * VQW_POLL_BACKOFF_MIN_NS);
	CHECK_EQ(vqw_poll_window(&p, now), 0);
	now += 2 * VQW_POLL_BACKOFF_MIN_NS;
	CHECK(vqw_poll_gap(&p, 30000, 8, now));      /* a known count again */
	now += VQW_POLL_BACKOFF_MAX_NS;
	vqw_poll_ran(&p);
	CHECK(!vqw_poll_gap(&p, 30000, 8, now));
	CHECK(vqw_poll_gap(&p, VQW_POLL_STOLEN_NS, 8, now));   /* a stolen slice */
	CHECK_EQ(vqw_poll_window(&p, now), 0);
	/* After a stolen slice the hypervisor is overcommitted: for a while
	 * every gap counts, as if each were one. */
	now += VQW_POLL_DISTRUST_NS - 1;
	CHECK(vqw_poll_gap(&p, 30000, 8, now));
	now += 1;
	CHECK(!vqw_poll_gap(&p, 30000, 8, now));
}

/* Judged in the optimized build only: under AddressSanitizer every poll
 * iteration is several times slower, so the ratio of requests found by
 * polling measures the sanitizer, not the poll rule (CI saw 388 of 1000
 * with the host quiet). The rule itself is checked without timing by
 * poll_gap_backs_off_only_when_another_task_took_the_cpu. */
#ifndef __SANITIZE_ADDRESS__
/* A signal handler that keeps the CPU for 100 us: to the poll loop it is a
 * gap with no context switch, like an interrupt or a hypervisor exit. */
static void busy_100us(int sig)
{
	struct timespec a, b;

	(void)sig;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 100000);
}

/* The worker, in its seccomp filter, polls for a driver that posts every
 * 200 us while a signal stalls it for 100 us every tenth request: it
 * keeps its CPU through each stall, so it keeps polling; it gives up a
 * poll only where it really was switched out (the old rule, any 20 us gap
 * is a preemption, gave up at almost every stall). Asking the kernel
 * whether it was switched out is allowed by its filter (else SIGSYS would
 * end this test). */
/* One run of stalls_without_a_context_switch_do_not_stop_polling: n
 * requests, a stall every tenth. True when the host was quiet (the worker
 * switched out fewer than 5 times) and polling went on through the stalls:
 * polls given up at most the switches plus a few (the first gap, a slice
 * a hypervisor may steal and the 100 ms of distrust after it), and most
 * requests found by polling. */
static bool stalls_run(struct pair *p, pid_t tid, uint64_t buf, bool *quiet)
{
	struct vqw_stats a, b;
	unsigned i, n = 1000, signals = 0;
	long switched = task_status(tid, "nonvoluntary_ctxt_switches:");

	/* RX is the worker's first queue: it keeps the worker's counters. */
	vqw_get_stats(&p->w.q[0], &a);
	for (i = 0; i < n; i++) {
		struct vdrv_sg sg = { .gpa = buf, .len = 64, .writable = true };
		struct timespec t0, t;
		uint32_t id, len;

		CHECK(vdrv_add(&p->d, RX, &sg, 1, false) >= 0);
		/* Kick only where the device asks (not while it polls). */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (!(vdrv_used_flags(&p->d, RX) & VRING_USED_F_NO_NOTIFY))
			vdrv_kick(&p->d, RX);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (!vdrv_get_used(&p->d, RX, &id, &len)) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			CHECK(t.tv_sec - t0.tv_sec < 5);
		}
		if (i % 10 == 5) {
			CHECK_EQ(syscall(SYS_tgkill, getpid(), tid, SIGUSR2), 0);
			signals++;
		}
		usleep(200);
	}
	vqw_get_stats(&p->w.q[0], &b);
	switched = task_status(tid, "nonvoluntary_ctxt_switches:") - switched;
	fprintf(stderr, "%u requests, %u stalls: %llu found by polling, %llu polls given up, "
		"%llu kicks; the worker was switched out %ld times\n", n, signals,
		(unsigned long long)(b.polled - a.polled),
		(unsigned long long)(b.preempted - a.preempted),
		(unsigned long long)(b.kicks - a.kicks), switched);
	*quiet = switched < 5;
	return *quiet && b.preempted - a.preempted <= (unsigned long long)switched + 10 &&
	       b.polled - a.polled > n / 2;
}

TEST(stalls_without_a_context_switch_do_not_stop_polling)
{
	struct pair *p = pair_new_sandboxed(1000);
	struct sigaction sa = { .sa_handler = busy_100us }, old;
	bool ok = false, quiet = false, any_quiet = false;
	pid_t tid = task_tid("test-pair");
	uint64_t buf;
	int i;

	CHECK(tid > 0);
	sigemptyset(&sa.sa_mask);
	CHECK_EQ(sigaction(SIGUSR2, &sa, &old), 0);
	buf = vdrv_alloc(&p->d, 64, 8);
	/* Up to three runs: one stolen slice can spoil a run; a host busy
	 * through all three is not one to judge this on. */
	for (i = 0; i < 3 && !ok; i++) {
		ok = stalls_run(p, tid, buf, &quiet);
		any_quiet |= quiet;
	}
	if (!any_quiet)
		fprintf(stderr, "the host was busy in every run: not judged\n");
	else
		CHECK(ok);
	pair_free(p);
	CHECK_EQ(sigaction(SIGUSR2, &old, NULL), 0);
}
#endif

/* --- gathering after a kick (struct vqw_gather) --------------------------- */

/* gather=0 never waits, whatever happens. */
TEST(gather_zero_max_never_waits)
{
	struct vqw_gather g;
	unsigned i;

	vqw_gather_init(&g, 0);
	for (i = 0; i < 10000; i++) {
		CHECK_EQ(vqw_gather_begin(&g), 0);
		vqw_gather_end(&g, 0, 5);
	}
}

/* Off at first: every VQW_GATHER_PROBE_MIN-th wake-up probes with the
 * longest slice. A probe that brings nothing doubles the interval, up to
 * VQW_GATHER_PROBE_MAX. */
TEST(gather_probes_at_doubling_intervals_while_probes_fail)
{
	struct vqw_gather g;
	unsigned every = VQW_GATHER_PROBE_MIN, round, i;

	vqw_gather_init(&g, 200);
	for (round = 0; round < 12; round++) {
		for (i = 1; i < every; i++)
			CHECK_EQ(vqw_gather_begin(&g), 0);
		CHECK_EQ(vqw_gather_begin(&g), 200000);
		vqw_gather_end(&g, 200000, 0);
		every = every * 2 > VQW_GATHER_PROBE_MAX ? VQW_GATHER_PROBE_MAX : every * 2;
	}
	CHECK_EQ(g.probe_every, VQW_GATHER_PROBE_MAX);
}

/* A slice that brings requests sets the next to twice the mean time
 * between them (within VQW_GATHER_MIN_NS..gather=) and resets the probe
 * interval; one that brings none doubles the slice, and at gather=, the
 * third time in a row, turns gathering off. */
TEST(gather_slice_follows_the_arrival_rate)
{
	struct vqw_gather g;
	unsigned i;

	vqw_gather_init(&g, 200);
	g.probe_every = 1024;
	for (i = 1; i < VQW_GATHER_PROBE_MIN; i++)
		vqw_gather_begin(&g);
	CHECK_EQ(vqw_gather_begin(&g), 200000);
	vqw_gather_end(&g, 200000, 1);             /* one in 200 us */
	CHECK_EQ(g.probe_every, VQW_GATHER_PROBE_MIN);
	CHECK_EQ(vqw_gather_begin(&g), 200000);    /* capped at gather= */
	vqw_gather_end(&g, 200000, 10);            /* ten: 20 us apart */
	CHECK_EQ(vqw_gather_begin(&g), 40000);
	vqw_gather_end(&g, 40000, 1000);
	CHECK_EQ(vqw_gather_begin(&g), VQW_GATHER_MIN_NS);
	vqw_gather_end(&g, VQW_GATHER_MIN_NS, 0);  /* none: try longer */
	CHECK_EQ(vqw_gather_begin(&g), 2 * VQW_GATHER_MIN_NS);
	g.slice_ns = 150000;
	vqw_gather_end(&g, 150000, 0);
	CHECK_EQ(vqw_gather_begin(&g), 200000);
	/* None at gather=: chance, twice; the third time in a row, off. */
	vqw_gather_end(&g, 200000, 0);
	vqw_gather_end(&g, 200000, 0);
	CHECK_EQ(vqw_gather_begin(&g), 200000);
	vqw_gather_end(&g, 200000, 1);             /* a success resets the count */
	CHECK_EQ(vqw_gather_begin(&g), 200000);
	for (i = 0; i < VQW_GATHER_FAILS - 1; i++) {
		vqw_gather_end(&g, 200000, 0);
		CHECK_EQ(vqw_gather_begin(&g), 200000);
	}
	vqw_gather_end(&g, 200000, 0);
	for (i = 1; i < VQW_GATHER_PROBE_MIN; i++)
		CHECK_EQ(vqw_gather_begin(&g), 0);
	CHECK_EQ(vqw_gather_begin(&g), 200000);
}

/* Guest RAM is registered in chunks the kernel accepts (1 GiB at most),
 * region by region; a buffer is found only wholly inside one chunk. Pure
 * address arithmetic: the regions are never touched. */
TEST(fixed_layout_cuts_guest_ram_into_registrable_chunks)
{
	struct guest_mem gm = { 0 };
	uint8_t *high = (uint8_t *)(uintptr_t)0x7f0000000000ULL;
	uint8_t *low = (uint8_t *)(uintptr_t)0x100000000ULL;
	struct iovec v[8], few[3];

	/* 2.5 GiB below 4 GiB in guest terms, mapped high; 1 GiB above,
	 * mapped lower: buffers 0-2, then 3. */
	CHECK_EQ(gmem_add_region(&gm, 0, 5ULL << 29, high), 0);
	CHECK_EQ(gmem_add_region(&gm, 1ULL << 32, 1ULL << 30, low), 0);
	CHECK_EQ(vqw_fixed_layout(&gm, v, 8), 4);
	CHECK(v[0].iov_base == high && v[0].iov_len == 1ULL << 30);
	CHECK(v[1].iov_base == high + (1ULL << 30) && v[1].iov_len == 1ULL << 30);
	CHECK(v[2].iov_base == high + (2ULL << 30) && v[2].iov_len == 1ULL << 29);
	CHECK(v[3].iov_base == low && v[3].iov_len == 1ULL << 30);
	CHECK_EQ(vqw_fixed_layout(&gm, few, 3), -E2BIG);

	CHECK_EQ(vqw_fixed_find(&gm, high, 4096), 0);
	CHECK_EQ(vqw_fixed_find(&gm, high + (1ULL << 30) - 4096, 4096), 0);
	CHECK_EQ(vqw_fixed_find(&gm, high + (1ULL << 30), 4096), 1);
	CHECK_EQ(vqw_fixed_find(&gm, high + (5ULL << 29) - 1, 1), 2);
	CHECK_EQ(vqw_fixed_find(&gm, low, 4096), 3);
	CHECK_EQ(vqw_fixed_find(&gm, low + (1ULL << 30) - 4096, 4096), 3);
	/* Across a chunk's end (the same region: still refused), past a
	 * region's end, below a region, and a length that would wrap. */
	CHECK_EQ(vqw_fixed_find(&gm, high + (1ULL << 30) - 2048, 4096), -1);
	CHECK_EQ(vqw_fixed_find(&gm, high + (5ULL << 29) - 1, 2), -1);
	CHECK_EQ(vqw_fixed_find(&gm, high + (5ULL << 29), 1), -1);
	CHECK_EQ(vqw_fixed_find(&gm, low - 1, 1), -1);
	CHECK_EQ(vqw_fixed_find(&gm, low + (1ULL << 30), 1), -1);
	CHECK_EQ(vqw_fixed_find(&gm, low + 4096, SIZE_MAX), -1);
	gm.nr = 0;
	CHECK_EQ(vqw_fixed_find(&gm, low, 1), -1);
}
