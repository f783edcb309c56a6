/* The generic per-queue worker: see virtq_worker.h.
 *
 * The thread owns the queues' rings, the io_uring and (through the device)
 * the request state; nothing here takes a lock. It sleeps in exactly one
 * place, io_uring_enter, for guest kicks, host I/O completions and the
 * stop request. Each round:
 *   1. reap every CQE (the device's completions, kick re-arms, stop);
 *   2. publish each queue's used entries at once, at most one interrupt
 *      each (virtq_publish decides, honouring EVENT_IDX);
 *   2a. after a kick, maybe sleep a little for more requests (gather());
 *   3. drain each queue's avail ring (bounded by its size), the device
 *      validating each chain and turning it into SQEs or a completion,
 *      and publish what completed at once;
 *   4. one io_uring_enter that submits everything and waits. */
#include "devices/virtq_worker.h"
#include "arch/arch.h"
#include "vmm/log.h"
#include "vmm/sandbox.h"
#include "vmm/util.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* user_data: tag (8 bits) | queue (8 bits) | 16 unused | device data (32). */
enum { TAG_DEV = 1, TAG_KICK, TAG_KICK_POLL, TAG_STOP, TAG_CANCEL };
#define UD(tag, q, data) (((uint64_t)(tag) << 56) | ((uint64_t)(q) << 48) | (uint32_t)(data))
#define UD_TAG(ud) ((unsigned)((ud) >> 56))
#define UD_Q(ud) ((unsigned)((ud) >> 48) & 0xff)

/* Single writer (the worker), read by statistics at any time. */
#define STAT_ADD(q, f, n) \
	__atomic_store_n(&(q)->st.f, (q)->st.f + (n), __ATOMIC_RELAXED)

struct io_uring_sqe *vqw_get_sqe(struct vqw *w)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);

	/* The SQ holds sqes_per_queue per queue plus the kick, stop and cancel
	 * ones, which is all that is ever pending: a safety net. */
	if (!sqe) {
		io_uring_submit(&w->ring);
		STAT_ADD(&w->q[0], enters, 1);
		sqe = io_uring_get_sqe(&w->ring);
	}
	return sqe;
}

void vqw_sqe_set_data(struct io_uring_sqe *sqe, const struct vqw_queue *q, uint32_t data)
{
	/* Every SQE names a registered file (the ring's restrictions). */
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, UD(TAG_DEV, q - q->w->q, data));
}

void vqw_push(struct vqw_queue *q, uint16_t head, uint32_t used_len)
{
	if (q->w->stopping)
		return;
	virtq_push(q->vq, head, used_len);
	q->pushed++;
}

void vqw_broken(struct vqw_queue *q, const char *why)
{
	virtio_guest_warn(q->dev, VIRTIO_GW_RING, "%s: queue %u: guest broke the ring (%s); "
			  "device needs reset", q->w->ops->name, q->idx, why);
	q->broken = true;
	virtio_dev_needs_reset(q->dev);
}

static void arm_kick(struct vqw_queue *q, bool poll)
{
	struct io_uring_sqe *sqe = vqw_get_sqe(q->w);
	unsigned qi = (unsigned)(q - q->w->q);

	if (!sqe)
		return;
	if (poll) {
		io_uring_prep_poll_add(sqe, q->w->file_base + VQW_FILE_KICK0 + qi, POLLIN);
		io_uring_sqe_set_data64(sqe, UD(TAG_KICK_POLL, qi, 0));
	} else {
		io_uring_prep_read(sqe, q->w->file_base + VQW_FILE_KICK0 + qi, &q->kick_buf,
				   sizeof(q->kick_buf), 0);
		io_uring_sqe_set_data64(sqe, UD(TAG_KICK, qi, 0));
	}
	sqe->flags |= IOSQE_FIXED_FILE;
	q->kick_pending = true;
}

/* Drain the avail ring: at most one queue's worth per call, so completions
 * and the other queues are not starved by a driver that keeps refilling. */
static void drain(struct vqw_queue *q)
{
	unsigned budget = q->vq->size;
	int r;

	q->more = false;
	if (q->broken)
		return;
	/* Notifications off, and they stay off: rearm() turns them on
	 * before the thread sleeps. Turned on here, a driver that refills
	 * the ring the moment it sees our interrupt would kick even where
	 * the poll that follows catches its buffers (with EVENT_IDX,
	 * make bench at QD 32: one kick per batch, every batch polled). */
	virtq_notify_disable(q->vq);
	while (budget) {
		r = virtq_pop(q->vq, &q->chain);
		if (r == 0)
			return;
		if (r < 0) {
			vqw_broken(q, strerror(-r));
			return;
		}
		budget--;
		q->w->worked = true;
		STAT_ADD(q, requests, 1);
		q->w->ops->chain(q, &q->chain);
		if (q->broken)
			return;
	}
	q->more = true;  /* a ring's worth: the others get their turn first */
}

/* Before the thread sleeps: notifications on for every queue, then the
 * re-check (virtq_notify_enable's barrier): buffers made available
 * before the driver saw notifications on got no kick. True when there
 * are such buffers: then the thread must not sleep. */
static bool rearm(struct vqw *w)
{
	bool more = false;
	unsigned i;

	for (i = 0; i < w->nq; i++)
		if (!w->q[i].broken && virtq_notify_enable(w->q[i].vq))
			more = true;
	return more;
}

static void publish(struct vqw_queue *q)
{
	if (!q->pushed)
		return;
	q->pushed = 0;
	STAT_ADD(q, batches, 1);
	if (virtq_publish(q->vq)) {
		virtio_signal_queue(q->dev, q->idx);
		STAT_ADD(q, irqs, 1);
	}
}

static void reap(struct vqw *w)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	io_uring_for_each_cqe(&w->ring, head, cqe) {
		uint64_t ud = io_uring_cqe_get_data64(cqe);
		struct vqw_queue *q = &w->q[UD_Q(ud) < w->nq ? UD_Q(ud) : 0];
		int res = cqe->res;

		n++;
		switch (UD_TAG(ud)) {
		case TAG_DEV:
			w->ops->complete(q, (uint32_t)ud, res);
			break;
		case TAG_KICK:
			q->kick_pending = false;
			/* The eventfd's count: every notification since the
			 * last read (KVM's ioeventfd adds 1 per write). */
			if (res == (int)sizeof(q->kick_buf)) {
				STAT_ADD(q, kicks, q->kick_buf);
				w->kicked = true;
			}
			if (!w->stopping)
				/* -EAGAIN: this kernel does not wait on an O_NONBLOCK
				 * eventfd; wait with a poll, then read. */
				arm_kick(q, res == -EAGAIN);
			break;
		case TAG_KICK_POLL:
			q->kick_pending = false;
			w->kicked = true;
			if (!w->stopping)
				arm_kick(q, false);
			break;
		case TAG_STOP:
			w->stopping = true;
			break;
		case TAG_CANCEL:
			break;
		}
	}
	io_uring_cq_advance(&w->ring, n);
}

static bool any_inflight(const struct vqw *w)
{
	unsigned i;

	for (i = 0; i < w->nq; i++)
		if (w->ops->inflight(&w->q[i]))
			return true;
	return false;
}

/* poll= and gather= in ns; the options allow at most 1000 us, this caps
 * any caller at 1 s. */
static uint32_t us_to_ns(unsigned us)
{
	return us > 1000000 ? 1000000000u : us * 1000u;
}

/* The window a poll starts over with: small, and never above the max. */
static uint32_t poll_start_ns(const struct vqw_poll *p)
{
	return p->max_ns < VQW_POLL_START_NS ? p->max_ns : VQW_POLL_START_NS;
}

void vqw_poll_init(struct vqw_poll *p, unsigned max_us)
{
	memset(p, 0, sizeof(*p));
	p->max_ns = us_to_ns(max_us);
	p->win_ns = poll_start_ns(p);
	p->nivcsw = -1;
}

uint32_t vqw_poll_window(const struct vqw_poll *p, uint64_t now_ns)
{
	return now_ns < p->off_until_ns ? 0 : p->win_ns;
}

void vqw_poll_slept(struct vqw_poll *p, uint64_t slept_ns, uint64_t now_ns)
{
	if (!p->max_ns || now_ns < p->off_until_ns)
		return;
	if (slept_ns <= p->max_ns) {
		/* The next request came within the longest window: a poll that
		 * long would have had it without a kick or a wake-up. */
		if (!p->win_ns)
			p->win_ns = poll_start_ns(p);
		else
			p->win_ns = p->win_ns > p->max_ns / 2 ? p->max_ns : p->win_ns * 2;
	} else if (p->win_ns) {
		/* Polling would not have caught it: it only burnt the CPU. */
		p->win_ns /= 2;
		if (p->win_ns < VQW_POLL_START_NS / 2)
			p->win_ns = 0;
	}
}

void vqw_poll_ran(struct vqw_poll *p)
{
	p->backoff_ns = 0;
}

void vqw_poll_preempted(struct vqw_poll *p, uint64_t now_ns)
{
	/* Someone else wanted this CPU (a vCPU of this VM, perhaps, that would
	 * post the very request we wait for): give it up, for longer while
	 * that keeps happening, and start over small. */
	if (!p->backoff_ns)
		p->backoff_ns = VQW_POLL_BACKOFF_MIN_NS;
	else
		p->backoff_ns = p->backoff_ns > VQW_POLL_BACKOFF_MAX_NS / 2 ?
				VQW_POLL_BACKOFF_MAX_NS : p->backoff_ns * 2;
	p->off_until_ns = now_ns + p->backoff_ns;
	p->win_ns = poll_start_ns(p);
}

bool vqw_poll_gap(struct vqw_poll *p, uint64_t gap_ns, long nivcsw, uint64_t now_ns)
{
	bool stolen = gap_ns >= VQW_POLL_STOLEN_NS;
	bool lost = stolen || now_ns < p->distrust_until_ns ||
		    nivcsw < 0 || p->nivcsw < 0 || nivcsw != p->nivcsw;

	if (stolen)
		p->distrust_until_ns = now_ns + VQW_POLL_DISTRUST_NS;
	p->nivcsw = nivcsw;
	if (lost)
		vqw_poll_preempted(p, now_ns);
	return lost;
}

/* Involuntary context switches of the calling thread, or -1. */
static long thread_nivcsw(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_THREAD, &ru) ? -1 : ru.ru_nivcsw;
}

/* Adaptive polling (like an iothread's poll-max-ns, with its grow and
 * shrink): right after a round that did work, with no host I/O
 * outstanding, watch the avail rings for the current window before
 * sleeping. A driver that reposts at once is picked up without a kick and
 * without a wake-up. Guest notifications stay off while we poll (drain
 * left them off), and rearm() turns them on before we sleep. A gap in
 * the loop where the thread lost its CPU to another task means polling
 * only delays whoever had to run (vqw_poll_gap). True when work showed
 * up. */
static bool poll_rings(struct vqw *w)
{
	uint64_t t, next, deadline;
	uint32_t win;
	bool found = false, preempted = false;
	unsigned i;

	/* With no I/O in flight the only SQEs that can be pending are kick
	 * reads re-armed by reap(): they need not reach the kernel before we
	 * sleep (kicks accumulate in the eventfds), so they do not stop us
	 * polling; the enter that goes to sleep submits them. */
	if (!w->poll.max_ns || !w->worked || any_inflight(w) || io_uring_cq_ready(&w->ring))
		return false;
	w->worked = false;
	/* Whether or not we poll now, how long the coming sleep lasts says
	 * whether a window would have paid off. */
	w->poll_armed = true;
	t = mono_ns();
	win = vqw_poll_window(&w->poll, t);
	if (!win)
		return false;
	deadline = t + win;
	do {
		for (i = 0; i < w->nq && !found; i++)
			found = !w->q[i].broken && virtq_has_work(w->q[i].vq);
		if (found)
			break;
		arch_cpu_relax();
		next = mono_ns();
		/* Only a gap costs a system call (getrusage): where the
		 * thread kept its CPU, polling goes on. */
		if (next - t > VQW_POLL_GAP_NS &&
		    vqw_poll_gap(&w->poll, next - t, thread_nivcsw(), next)) {
			preempted = true;
			break;
		}
		t = next;
	} while (t < deadline);
	if (preempted) {
		STAT_ADD(&w->q[0], preempted, 1);
		w->poll_armed = false;
	} else {
		vqw_poll_ran(&w->poll);
	}
	if (found) {
		STAT_ADD(&w->q[0], polled, 1);
		w->poll_armed = false;
	}
	return found;
}

static bool any_more(const struct vqw *w)
{
	unsigned i;

	for (i = 0; i < w->nq; i++)
		if (w->q[i].more)
			return true;
	return false;
}

void vqw_gather_init(struct vqw_gather *g, unsigned max_us)
{
	memset(g, 0, sizeof(*g));
	g->max_ns = us_to_ns(max_us);
	g->probe_every = VQW_GATHER_PROBE_MIN;
	g->probe_in = VQW_GATHER_PROBE_MIN;
}

uint32_t vqw_gather_begin(struct vqw_gather *g)
{
	if (!g->max_ns)
		return 0;
	if (g->slice_ns)
		return g->slice_ns;
	if (--g->probe_in)
		return 0;
	g->probe_in = g->probe_every;
	return g->max_ns;
}

void vqw_gather_end(struct vqw_gather *g, uint32_t slice_ns, unsigned first_new)
{
	uint64_t ns;

	if (!g->max_ns)
		return;
	if (!first_new) {
		if (slice_ns < g->max_ns) {
			/* Perhaps the guest is just slower than the slice. */
			g->slice_ns = slice_ns > g->max_ns / 2 ? g->max_ns : slice_ns * 2;
			return;
		}
		/* Not even the longest slice brought anything. Once may be
		 * chance (a slow guest's requests come at random); a failed
		 * probe, or VQW_GATHER_FAILS in a row, mean the guest waits
		 * for our completions. Off; probe less often while probes
		 * keep failing. */
		if (g->slice_ns && ++g->fails < VQW_GATHER_FAILS)
			return;
		if (!g->slice_ns)
			g->probe_every = g->probe_every > VQW_GATHER_PROBE_MAX / 2 ?
					 VQW_GATHER_PROBE_MAX : g->probe_every * 2;
		g->slice_ns = 0;
		g->fails = 0;
		g->probe_in = g->probe_every;
		return;
	}
	g->probe_every = VQW_GATHER_PROBE_MIN;
	g->fails = 0;
	ns = 2ull * slice_ns / first_new;
	g->slice_ns = ns < VQW_GATHER_MIN_NS ? VQW_GATHER_MIN_NS :
		      ns > g->max_ns ? g->max_ns : (uint32_t)ns;
}

static unsigned avail_total(struct vqw *w)
{
	unsigned i, n = 0;

	for (i = 0; i < w->nq; i++)
		if (!w->q[i].broken)
			n += virtq_avail_count(w->q[i].vq);
	return n;
}

/* A kick woke us with work and nothing else to do (no host I/O in flight,
 * nothing reaped but kicks): sleep in slices, notifications off, while the
 * guest keeps posting, then let the drain take it all as one batch (see
 * struct vqw_gather). The sleep is an io_uring_enter with a timeout: it
 * submits the re-armed kick reads, and a stop (or a kick that raced with
 * turning notifications off) ends it early. rearm() turns notifications
 * back on, with its re-check, before the thread sleeps. */
static void gather(struct vqw *w)
{
	struct io_uring_cqe *cqe;
	unsigned n0, n, prev, half = 0, first = 0, s, i;
	uint32_t slice;

	if (!w->gather.max_ns || any_more(w) || any_inflight(w) || io_uring_cq_ready(&w->ring))
		return;
	n0 = avail_total(w);
	if (!n0)
		return;
	slice = vqw_gather_begin(&w->gather);
	if (!slice)
		return;
	for (i = 0; i < w->nq; i++) {
		half += w->q[i].vq->size / 2;
		if (!w->q[i].broken)
			virtq_notify_disable(w->q[i].vq);
	}
	prev = n = n0;
	for (s = 0; s < VQW_GATHER_SLICES; s++) {
		struct __kernel_timespec ts = { .tv_sec = 0, .tv_nsec = slice };

		io_uring_submit_and_wait_timeout(&w->ring, &cqe, 1, &ts, NULL);
		STAT_ADD(&w->q[0], enters, 1);
		n = avail_total(w);
		if (!s)
			first = n - n0;
		/* Stop when the guest stopped posting, when a good batch is
		 * waiting, or when something else needs us. */
		if (n == prev || n >= half || io_uring_cq_ready(&w->ring))
			break;
		prev = n;
	}
	vqw_gather_end(&w->gather, slice, first);
	STAT_ADD(&w->q[0], gathers, 1);
	STAT_ADD(&w->q[0], gathered, n - n0);
}

/* The ring's state for the statistics, taken once, as the thread ends (a
 * worker starts only once). The release store of ring_valid publishes it;
 * pairs with the acquire load in vqw_get_stats. */
static void ring_snapshot(struct vqw_queue *q)
{
	virtq_ring_state(q->vq, &q->st.ring);
	__atomic_store_n(&q->st.ring_valid, true, __ATOMIC_RELEASE);
}

/* vqw_register_mem's registration, on the worker's thread before it serves
 * anything (vqw_fixed_index runs on this thread only: w->fixed needs no
 * ordering). The ring's restrictions allow IORING_REGISTER_BUFFERS for
 * this (vqw_set_io), the queue filter too. */
static void register_mem(struct vqw *w)
{
	/* On this thread's stack, for this call only: the kernel keeps its
	 * own copy (16 KiB; threads here have UTIL_THREAD_STACK). */
	struct iovec chunks[VQW_FIXED_MAX];
	int n, r;

	n = vqw_fixed_layout(w->fixed_want, chunks, VQW_FIXED_MAX);
	r = n > 0 ? io_uring_register_buffers(&w->ring, chunks, (unsigned)n) : n < 0 ? n : -EINVAL;
	if (!r)
		w->fixed = w->fixed_want;
	else if (w->ops->fixed_failed)
		w->ops->fixed_failed(&w->q[0], r);
}

/* Drop the ring's registered files and buffers as the thread ends, here:
 * the ring is IORING_SETUP_SINGLE_ISSUER, and once this thread enabled it
 * the kernel refuses any other task's register call (-EEXIST), vqw_fini's
 * included. Left to the ring's teardown, which runs asynchronously after
 * the last close, they would outlive the device: the files (a disk
 * image's, with its OFD lock, which a restart on the same image needs)
 * and the buffers (guest RAM pinned and counted against RLIMIT_MEMLOCK,
 * while a reset's new ring pins it again). The restrictions (vqw_set_io)
 * and the queue filter allow both calls. */
static void release_registered(struct vqw *w)
{
	io_uring_unregister_files(&w->ring);
	if (w->fixed)
		io_uring_unregister_buffers(&w->ring);
	w->fixed = NULL;
	w->released = true;
}

static void *vqw_thread(void *arg)
{
	struct vqw *w = arg;
	struct io_uring_sqe *sqe;
	uint64_t t0;
	unsigned i;
	int r;

	/* Named here: naming another thread opens a file in /proc. */
	pthread_setname_np(pthread_self(), w->thread_name);
	/* IORING_SETUP_R_DISABLED + SINGLE_ISSUER: this thread becomes the
	 * ring's only submitter; its restrictions (vqw_set_io) hold from now.
	 * liburing 2.3 declares io_uring_enable_rings but does not export it. */
	r = syscall(__NR_io_uring_register, w->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS,
		    NULL, 0) ? -errno : 0;
	/* The guest's data is touched only after the filter is on. */
	if (!r && w->sandbox)
		r = sandbox_enter(SANDBOX_QUEUE);
	if (r)
		release_registered(w);
	/* Pairs with vqw_start's wait: w->start_err is written before. */
	w->start_err = r;
	sem_post(&w->started_sem);
	if (r)
		return NULL;
	if (w->fixed_want)
		register_mem(w);

	sqe = vqw_get_sqe(w);
	io_uring_prep_read(sqe, w->file_base + VQW_FILE_STOP, &w->stop_buf, sizeof(w->stop_buf), 0);
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, UD(TAG_STOP, 0, 0));
	for (i = 0; i < w->nq; i++)
		arm_kick(&w->q[i], false);

	for (;;) {
		reap(w);
		if (w->stopping)
			break;
		/* What completed is published first: its interrupt reaches
		 * the driver before this thread spends time on new chains, so
		 * the driver refills the ring while we work (measured with
		 * make bench: QD 32 ratio 0.79-0.83 -> 0.86, 32 requests per
		 * interrupt instead of 22). Then buffers made available before
		 * DRIVER_OK, or since the last drain, are picked up whether or
		 * not a kick came, and what they completed at once (errors,
		 * GET_ID) is published too. */
		for (i = 0; i < w->nq; i++)
			publish(&w->q[i]);
		if (w->kicked) {
			w->kicked = false;
			gather(w);
		}
		for (i = 0; i < w->nq; i++) {
			drain(&w->q[i]);
			publish(&w->q[i]);
		}
		if (!any_more(w) && poll_rings(w))
			continue;
		if (any_more(w) || io_uring_cq_ready(&w->ring)) {
			if (io_uring_sq_ready(&w->ring)) {
				io_uring_submit(&w->ring);
				STAT_ADD(&w->q[0], enters, 1);
			}
			continue;
		}
		if (rearm(w))
			continue;
		/* A sleep after a round with work is timed: it tells the poll
		 * window whether polling would have caught the wake-up. */
		t0 = w->poll_armed ? mono_ns() : 0;
		io_uring_submit_and_wait(&w->ring, 1);
		STAT_ADD(&w->q[0], enters, 1);
		if (w->poll_armed) {
			uint64_t t1 = mono_ns();

			vqw_poll_slept(&w->poll, t1 - t0, t1);
			w->poll_armed = false;
		}
	}

	/* Stop: cancel what can be cancelled (kick reads, I/O not yet
	 * started) and wait for the rest; nothing reaches the guest any more
	 * (vqw_push checks stopping, the device its own writes). */
	sqe = vqw_get_sqe(w);
	/* CANCEL_ANY: Linux 5.19, below the 6.1 that vqw_init requires. The
	 * fixed-file flag means nothing to a cancel; the ring requires it. */
	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, UD(TAG_CANCEL, 0, 0));
	for (;;) {
		bool kicks = false;
		struct io_uring_cqe *cqe;

		for (i = 0; i < w->nq; i++)
			kicks |= w->q[i].kick_pending;
		if (!kicks && !any_inflight(w))
			break;
		if (io_uring_submit_and_wait(&w->ring, 1) < 0 &&
		    io_uring_peek_cqe(&w->ring, &cqe) != 0)
			break;   /* ring unusable: exit tears everything down */
		reap(w);
	}
	for (i = 0; i < w->nq; i++)
		ring_snapshot(&w->q[i]);
	release_registered(w);
	return NULL;
}

int vqw_init(struct vqw *w, const struct vqw_ops *ops, struct virtio_dev *dev,
	     const unsigned *idx, void *const *opaque, unsigned nq, unsigned sqes_per_queue,
	     unsigned poll_us, unsigned gather_us, const char *thread_name)
{
	struct io_uring_params p;
	unsigned entries, need = 4, i;
	int r;

	if (nq < 1 || nq > VQW_MAX_QUEUES)
		return -EINVAL;
	memset(w, 0, sizeof(*w));
	w->ops = ops;
	w->nq = nq;
	vqw_poll_init(&w->poll, poll_us);
	vqw_gather_init(&w->gather, gather_us);
	w->sandbox = dev->sandbox;
	snprintf(w->thread_name, sizeof(w->thread_name), "%s", thread_name);
	for (i = 0; i < nq; i++) {
		struct vqw_queue *q = &w->q[i];

		if (idx[i] >= dev->num_queues)
			return -EINVAL;
		q->w = w;
		q->dev = dev;
		q->idx = idx[i];
		q->vq = &dev->queues[idx[i]].vq;
		q->kick_fd = dev->queues[idx[i]].kick_fd;
		q->opaque = opaque[i];
		need += sqes_per_queue + 1;
	}
	w->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (w->stop_fd < 0)
		return -errno;
	for (entries = 8; entries < need; entries <<= 1)
		;
	memset(&p, 0, sizeof(p));
	p.flags = VQW_RING_FLAGS;
	p.cq_entries = entries * 2;
	r = io_uring_queue_init_params(entries, &w->ring, &p);
	if (r < 0) {
		close(w->stop_fd);
		return r;
	}
	w->ring_ok = true;
	return 0;
}

int vqw_register_mem(struct vqw *w, const struct guest_mem *gm)
{
	if (w->fixed_want || w->io_set || !w->ring_ok)
		return -EINVAL;
	w->fixed_want = gm;
	return 0;
}

int vqw_probe(void)
{
	struct io_uring_params p;
	struct io_uring ring;
	int r;

	memset(&p, 0, sizeof(p));
	p.flags = VQW_RING_FLAGS;
	p.cq_entries = 16;
	r = io_uring_queue_init_params(8, &ring, &p);
	if (r < 0)
		return r;
	io_uring_queue_exit(&ring);
	return 0;
}

int vqw_set_io(struct vqw *w, const int *files, unsigned nfiles, uint64_t sqe_ops)
{
	int table[VQW_MAX_FILES];
	struct io_uring_restriction res[64 + 4];
	unsigned i, n = 0, op;
	uint64_t ops;
	int r;

	if (w->io_set || nfiles + VQW_FILE_KICK0 + w->nq > VQW_MAX_FILES)
		return -EINVAL;
	/* The device's files first (its SQEs name 0..nfiles-1), then the
	 * worker's: the stop eventfd and each queue's kick eventfd. */
	for (i = 0; i < nfiles; i++)
		table[n++] = files[i];
	table[n++] = w->stop_fd;
	for (i = 0; i < w->nq; i++)
		table[n++] = w->q[i].kick_fd;
	w->file_base = nfiles;
	r = io_uring_register_files(&w->ring, table, n);
	if (r < 0)
		return r;
	/* Restrictions (Linux 5.10), in force from IORING_REGISTER_ENABLE_RINGS:
	 * only the opcodes the device declared plus the worker's own, every SQE
	 * on a registered file, and of the register calls only the ones that
	 * vqw_fini makes. A device bug, or code that took over the thread, can
	 * then do no I/O on other files and no other kind of I/O. */
	ops = sqe_ops | (1ULL << IORING_OP_READ) | (1ULL << IORING_OP_POLL_ADD) |
	      (1ULL << IORING_OP_ASYNC_CANCEL);
	i = 0;
	for (op = 0; op < 64; op++)
		if (ops & (1ULL << op))
			res[i++] = (struct io_uring_restriction){
				.opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = (uint8_t)op };
	res[i++] = (struct io_uring_restriction){
		.opcode = IORING_RESTRICTION_SQE_FLAGS_REQUIRED, .sqe_flags = IOSQE_FIXED_FILE };
	res[i++] = (struct io_uring_restriction){
		.opcode = IORING_RESTRICTION_REGISTER_OP, .register_op = IORING_UNREGISTER_FILES };
	res[i++] = (struct io_uring_restriction){
		.opcode = IORING_RESTRICTION_REGISTER_OP, .register_op = IORING_UNREGISTER_BUFFERS };
	if (w->fixed_want)
		res[i++] = (struct io_uring_restriction){
			.opcode = IORING_RESTRICTION_REGISTER_OP,
			.register_op = IORING_REGISTER_BUFFERS };
	/* liburing 2.3 does not export io_uring_register_restrictions. */
	r = syscall(__NR_io_uring_register, w->ring.ring_fd, IORING_REGISTER_RESTRICTIONS, res,
		    i) ? -errno : 0;
	if (r < 0) {
		io_uring_unregister_files(&w->ring);
		return r;
	}
	w->io_set = true;
	return 0;
}

int vqw_start(struct vqw *w)
{
	int r;

	if (!w->io_set) {
		r = vqw_set_io(w, NULL, 0, 0);
		if (r)
			return r;
	}
	r = sem_init(&w->started_sem, 0, 0) ? -errno : 0;
	if (r)
		return r;
	r = thread_start(&w->thread, vqw_thread, w);
	if (r)
		goto destroy_sem;
	/* Until the thread runs with its ring enabled and its filter on (and
	 * its name set): a failure is the queue start's. */
	while (sem_wait(&w->started_sem) && errno == EINTR)
		;
	r = w->start_err;
	if (r) {
		pthread_join(w->thread, NULL);
		goto destroy_sem;
	}
	w->started = true;
	sem_destroy(&w->started_sem);
	return 0;

destroy_sem:
	sem_destroy(&w->started_sem);
	return r;
}

void vqw_stop_begin(struct vqw *w)
{
	uint64_t one = 1;

	if (!w->started || w->stop_sent)
		return;
	/* Pairs with the thread's read of stop_fd in its ring. */
	if (write(w->stop_fd, &one, sizeof(one)) != sizeof(one))
		abort();        /* a fresh blocking eventfd cannot refuse 1 */
	w->stop_sent = true;
}

void vqw_stop(struct vqw *w)
{
	if (!w->started)
		return;
	vqw_stop_begin(w);
	pthread_join(w->thread, NULL);
	w->started = false;
	w->stop_sent = false;
}

void vqw_fini(struct vqw *w)
{
	if (!w->ring_ok)
		return;
	/* A thread that ran dropped them itself (release_registered: read
	 * after its join); a ring no thread enabled takes the call from any
	 * task. */
	if (!w->released)
		io_uring_unregister_files(&w->ring);
	w->fixed = w->fixed_want = NULL;
	w->released = false;
	io_uring_queue_exit(&w->ring);
	close(w->stop_fd);
	w->ring_ok = false;
}

void vqw_get_stats(const struct vqw_queue *q, struct vqw_stats *out)
{
	out->requests = __atomic_load_n(&q->st.requests, __ATOMIC_RELAXED);
	out->batches = __atomic_load_n(&q->st.batches, __ATOMIC_RELAXED);
	out->enters = __atomic_load_n(&q->st.enters, __ATOMIC_RELAXED);
	out->irqs = __atomic_load_n(&q->st.irqs, __ATOMIC_RELAXED);
	out->polled = __atomic_load_n(&q->st.polled, __ATOMIC_RELAXED);
	out->kicks = __atomic_load_n(&q->st.kicks, __ATOMIC_RELAXED);
	out->preempted = __atomic_load_n(&q->st.preempted, __ATOMIC_RELAXED);
	out->gathers = __atomic_load_n(&q->st.gathers, __ATOMIC_RELAXED);
	out->gathered = __atomic_load_n(&q->st.gathered, __ATOMIC_RELAXED);
	out->fixed = __atomic_load_n(&q->st.fixed, __ATOMIC_RELAXED);
	/* Pairs with ring_snapshot's release store: the fields are final. */
	out->ring_valid = __atomic_load_n(&q->st.ring_valid, __ATOMIC_ACQUIRE);
	if (out->ring_valid)
		out->ring = q->st.ring;
}
