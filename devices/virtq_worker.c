/* The generic per-queue worker: see virtq_worker.h.
 *
 * The thread owns the queues' rings while it serves them, the io_uring
 * and (through the device) the request state; nothing here takes a lock.
 * It sleeps in exactly one place, io_uring_enter, for guest kicks, host
 * I/O completions and its owner's commands (serve these queues, park,
 * exit). Each round while it serves:
 *   1. reap every CQE (the device's completions, kick re-arms, stop);
 *   2. publish each queue's used entries at once, at most one interrupt
 *      each (virtq_publish decides, honouring EVENT_IDX);
 *   2a. after a kick, maybe sleep a little for more requests (gather());
 *   3. drain each queue's avail ring (bounded by its size), the device
 *      validating each chain and turning it into SQEs or a completion,
 *      (ops->settle_io: submit, and take what completed at once, with
 *      what it produced) and publish what completed at once;
 *   4. one io_uring_enter that submits everything and waits. */
#include "devices/virtq_worker.h"
#include "arch/arch.h"
#include "vmm/base/log.h"
#include "vmm/kvm/sandbox.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <limits.h>
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
enum { TAG_DEV = 1, TAG_KICK, TAG_KICK_POLL, TAG_CTL, TAG_CANCEL, TAG_RETRY };
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
	if (vqw_stopping(q))
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
	struct io_uring_sqe *sqe;
	unsigned qi = (unsigned)(q - q->w->q);

	if (q->kick_pending)
		return;
	sqe = vqw_get_sqe(q->w);
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

/* The owner's next command: a read of ctl_fd, always in the ring but
 * while a stop's cancel is under way. */
static void arm_ctl(struct vqw *w)
{
	struct io_uring_sqe *sqe;

	if (w->ctl_pending)
		return;
	sqe = vqw_get_sqe(w);
	io_uring_prep_read(sqe, w->file_base + VQW_FILE_CTL, &w->ctl_buf, sizeof(w->ctl_buf), 0);
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, UD(TAG_CTL, 0, 0));
	w->ctl_pending = true;
}

/* The waits of vqw_retry_later: static, so each lives as long as an SQE
 * that names it (the kernel reads it when the SQE is submitted). */
static const struct __kernel_timespec retry_wait[VQW_RETRY_LEVELS] = {
	{ 0, VQW_RETRY_FIRST_NS }, { 0, VQW_RETRY_FIRST_NS << 1 }, { 0, VQW_RETRY_FIRST_NS << 2 },
	{ 0, VQW_RETRY_FIRST_NS << 3 }, { 0, VQW_RETRY_FIRST_NS << 4 },
	{ 0, VQW_RETRY_FIRST_NS << 5 }, { 0, VQW_RETRY_FIRST_NS << 6 },
	{ 0, VQW_RETRY_FIRST_NS << 7 }, { 0, VQW_RETRY_FIRST_NS << 8 },
	{ 0, VQW_RETRY_FIRST_NS << 9 },
};

void vqw_retry_later(struct vqw_queue *q, uint32_t data, unsigned attempt)
{
	struct io_uring_sqe *sqe = vqw_get_sqe(q->w);
	unsigned level = attempt < VQW_RETRY_LEVELS ? attempt : VQW_RETRY_LEVELS - 1;

	io_uring_prep_timeout(sqe, (struct __kernel_timespec *)&retry_wait[level], 0, 0);
	/* A timeout names no file; the ring's restrictions want the flag. */
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, UD(TAG_RETRY, q - q->w->q, data));
	STAT_ADD(q, retries, 1);
}

void vqw_wait_until(struct vqw_queue *q, uint32_t data, uint64_t when_ns)
{
	struct io_uring_sqe *sqe = vqw_get_sqe(q->w);

	/* The kernel copies the time when it takes the SQE (the next
	 * io_uring_enter); a second wait of q before that names the same
	 * place, and both end at the newest time the device gave. */
	q->wake_at.tv_sec = (long long)(when_ns / 1000000000ull);
	q->wake_at.tv_nsec = (long long)(when_ns % 1000000000ull);
	io_uring_prep_timeout(sqe, &q->wake_at, 0, IORING_TIMEOUT_ABS);
	/* A timeout names no file; the ring's restrictions want the flag. */
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, UD(TAG_RETRY, q - q->w->q, data));
}

/* Wake the worker: its ctl read completes. A blocking eventfd refuses a
 * write only at a saturated count, which already wakes it. */
static void ctl_ring(struct vqw *w)
{
	uint64_t one = 1;

	if (write(w->ctl_fd, &one, sizeof(one)) < 0) {
		/* see above */
	}
}

void vqw_poke(struct vqw *w)
{
	/* Release: what the poker changed before is seen by the worker's
	 * exchange (acquire) in command(). */
	__atomic_store_n(&w->poked, true, __ATOMIC_RELEASE);
	ctl_ring(w);
}

/* Whether the worker takes q's buffers now: served, not broken, not held,
 * and for a pull queue, wanted. */
static bool takes(const struct vqw_queue *q)
{
	return q->active && !q->broken && !q->held && !q->w->quiesced &&
	       (!q->pull || q->want);
}

int vqw_pull(struct vqw_queue *q, struct virtq_chain **out)
{
	int r;

	if (!q->active || q->broken || q->w->stopping || q->w->quiesced)
		return 0;
	r = virtq_pop(q->vq, &q->w->pulled);
	if (r < 0) {
		vqw_broken(q, strerror(-r));
		return r;
	}
	if (!r)
		return 0;
	q->w->worked = true;
	STAT_ADD(q, requests, 1);
	*out = &q->w->pulled;
	return 1;
}

/* Drain the avail ring: at most one queue's worth per call, so completions
 * and the other queues are not starved by a driver that keeps refilling.
 * A pull queue is the device's to take from: it is told buffers wait. */
static void drain(struct vqw_queue *q)
{
	unsigned budget = q->vq->size;
	int r;

	q->more = false;
	if (!takes(q))
		return;
	if (q->pull) {
		virtq_notify_disable(q->vq);
		if (virtq_has_work(q->vq)) {
			q->want = false;
			q->w->worked = true;
			q->w->ops->avail(q);
		}
		return;
	}
	/* Notifications off, and they stay off: rearm() turns them on
	 * before the thread sleeps. Turned on here, a driver that refills
	 * the ring the moment it sees our interrupt would kick even where
	 * the poll that follows catches its buffers (with EVENT_IDX: one
	 * kick per batch though every batch is polled). */
	virtq_notify_disable(q->vq);
	while (budget) {
		r = virtq_pop(q->vq, &q->w->chain);
		if (r == 0)
			return;
		if (r < 0) {
			vqw_broken(q, strerror(-r));
			return;
		}
		budget--;
		q->w->worked = true;
		STAT_ADD(q, requests, 1);
		q->w->ops->chain(q, &q->w->chain);
		/* Held: the device took this chain but no more (its host
		 * resources are used up); the rest wait in the ring. */
		if (q->broken || q->held)
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

	for (i = 0; i < w->nq; i++) {
		struct vqw_queue *q = &w->q[i];

		if (takes(q) && virtq_notify_enable(q->vq))
			more = true;
		/* A pull queue the device wants nothing from: the guest's
		 * refills need not wake us. */
		else if (q->pull && q->active && !q->broken && !q->want)
			virtq_notify_disable(q->vq);
	}
	return more;
}

/* q's used entries to the driver: whether it asked for an interrupt. */
static bool publish(struct vqw_queue *q)
{
	if (!q->pushed)
		return false;
	q->pushed = 0;
	STAT_ADD(q, batches, 1);
	return virtq_publish(q->vq);
}

/* Every queue's used entries to the driver, then each interrupt it asked
 * for, once: queues that share one (virtio_queue_irq: the vsock
 * device's vector for all three queues, virtio-mmio's line) get a
 * single signal. Only after all of them were published: a signal sent
 * before the next queue's entries were there could be taken by a driver
 * that would then not see them. */
static void publish_all(struct vqw *w)
{
	struct { struct virtio_dev *dev; int irq; } sent[VQW_MAX_QUEUES];
	bool due[VQW_MAX_QUEUES];
	unsigned i, k, n = 0;

	for (i = 0; i < w->nq; i++)
		due[i] = publish(&w->q[i]);
	for (i = 0; i < w->nq; i++) {
		struct vqw_queue *q = &w->q[i];
		int irq;

		if (!due[i])
			continue;
		irq = virtio_queue_irq(q->dev, q->idx);
		for (k = 0; irq >= 0 && k < n; k++)
			if (sent[k].dev == q->dev && sent[k].irq == irq)
				break;
		if (irq >= 0 && k < n)
			continue;       /* its interrupt is on its way */
		if (irq >= 0) {
			sent[n].dev = q->dev;
			sent[n++].irq = irq;
		}
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
		case TAG_RETRY:
			if (w->ops->retry)
				w->ops->retry(q, (uint32_t)ud);
			break;
		case TAG_KICK:
			q->kick_pending = false;
			/* The eventfd's count: every notification since the
			 * last read (KVM's ioeventfd adds 1 per write). */
			if (res == (int)sizeof(q->kick_buf)) {
				STAT_ADD(q, kicks, q->kick_buf);
				w->kicked = true;
			}
			if (!vqw_stopping(q))
				/* -EAGAIN: this kernel does not wait on an O_NONBLOCK
				 * eventfd; wait with a poll, then read. */
				arm_kick(q, res == -EAGAIN);
			break;
		case TAG_KICK_POLL:
			q->kick_pending = false;
			w->kicked = true;
			if (!vqw_stopping(q))
				arm_kick(q, false);
			break;
		case TAG_CTL:
			w->ctl_pending = false;
			if (res == (int)sizeof(w->ctl_buf))
				w->ctl_event = true;
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

/* A completion is there, or waits for this thread to run it (the ring's
 * IORING_SQ_TASKRUN, set by the kernel: VQW_RING_FLAGS); then run it, so
 * that reap() sees it. */
static bool io_ready(struct vqw *w)
{
	if (io_uring_cq_ready(&w->ring))
		return true;
	if (!(IO_URING_READ_ONCE(*w->ring.sq.kflags) & IORING_SQ_TASKRUN))
		return false;
	io_uring_get_events(&w->ring);
	STAT_ADD(&w->q[0], enters, 1);
	return true;
}

/* Adaptive polling (like an iothread's poll-max-ns, with its grow and
 * shrink): right after a round that did work, with no host I/O
 * outstanding (or, for a device whose ops say poll_io, with it, its
 * completions ending the poll too), watch the avail rings for the current
 * window before sleeping. A driver that reposts at once is picked up without a kick and
 * without a wake-up. Guest notifications stay off while we poll (drain
 * left them off), and rearm() turns them on before we sleep. A gap in
 * the loop where the thread lost its CPU to another task means polling
 * only delays whoever had to run (vqw_poll_gap). True when work showed
 * up. */
static bool poll_rings(struct vqw *w)
{
	uint64_t t, next, deadline;
	uint32_t win;
	bool found = false, preempted = false, io = w->ops->poll_io;
	unsigned i;

	/* With no I/O in flight the only SQEs that can be pending are kick
	 * reads re-armed by reap(): they need not reach the kernel before we
	 * sleep (kicks accumulate in the eventfds), so they do not stop us
	 * polling; the enter that goes to sleep submits them. A device whose
	 * host I/O the poll waits for (ops->poll_io) has it submitted first. */
	if (!w->poll.max_ns || !w->worked || (!io && any_inflight(w)) ||
	    io_uring_cq_ready(&w->ring))
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
	if (io && io_uring_sq_ready(&w->ring)) {
		io_uring_submit(&w->ring);
		STAT_ADD(&w->q[0], enters, 1);
	}
	do {
		for (i = 0; i < w->nq && !found; i++)
			found = takes(&w->q[i]) && virtq_has_work(w->q[i].vq);
		if (!found && io)
			found = io_ready(w);
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
		if (takes(&w->q[i]))
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
		if (!w->q[i].active)
			continue;
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

/* The ring's state for the statistics, as the thread stops serving q.
 * A seqcount: odd while it writes (the release fence orders the odd
 * count before the fields, the release store the fields before the even
 * count); pairs with vqw_get_stats' acquire load and fence. */
static void ring_snapshot(struct vqw_queue *q)
{
	unsigned seq = q->ring_seq;

	__atomic_store_n(&q->ring_seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	virtq_ring_state(q->vq, &q->st.ring);
	q->st.ring_valid = true;
	__atomic_store_n(&q->ring_seq, seq + 2, __ATOMIC_RELEASE);
}

/* vqw_register_mem's registration, as the thread starts and before its
 * filter (which allows no register call but the two of
 * release_registered). vqw_fixed_index runs on this thread only: w->fixed
 * needs no ordering. */
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
 * the kernel refuses any other task's register call (-EEXIST). Left to
 * the ring's teardown, which runs asynchronously after the last close,
 * they would outlive the VM: the files (a disk image's, with its OFD
 * lock, which another VM on the same image needs) and the buffers (guest
 * RAM pinned and counted against RLIMIT_MEMLOCK). The restrictions
 * (vqw_set_io) and the queue filter allow both calls, on this ring. */
static void release_registered(struct vqw *w)
{
	io_uring_unregister_files(&w->ring);
	if (w->fixed)
		io_uring_unregister_buffers(&w->ring);
	w->fixed = NULL;
}

/* RUN: serve the queues in mask. The driver has just set their rings
 * up, so everything about the last run is forgotten but the counters;
 * the core kicked each started queue once, which the first kick read
 * picks up. */
static void serve(struct vqw *w, uint64_t mask)
{
	unsigned i;

	for (i = 0; i < w->nq; i++) {
		struct vqw_queue *q = &w->q[i];

		q->active = (mask >> i) & 1;
		q->broken = q->more = q->held = false;
		/* A pull queue hears of its first buffers: the device may
		 * have owed the guest something since before the reset. */
		q->want = q->pull;
		q->pushed = 0;
	}
	vqw_poll_init(&w->poll, w->poll_us);
	vqw_gather_init(&w->gather, w->gather_us);
	w->poll_armed = w->kicked = w->worked = false;
	w->stopping = false;
	w->serving = true;
	for (i = 0; i < w->nq; i++)
		if (w->q[i].active)
			arm_kick(&w->q[i], false);
	if (w->ops->serve_begin)
		w->ops->serve_begin(&w->q[0]);
}

static bool any_kick_pending(const struct vqw *w)
{
	unsigned i;

	for (i = 0; i < w->nq; i++)
		if (w->q[i].kick_pending)
			return true;
	return false;
}

/* Stop serving: cancel what can be cancelled (kick reads, I/O not yet
 * started, retry waits, and the ctl read, armed again after) and wait
 * for the rest, at most VQW_STOP_DEADLINE_NS; nothing reaches the guest
 * from here on (vqw_push and the device check vqw_stopping). Host I/O
 * that is still running past the deadline is reported and left to end
 * while the thread is parked; the device refuses to start its queue
 * until it has (it sees it in its own in-flight count). */
static void unserve(struct vqw *w)
{
	uint64_t deadline = mono_ns() + VQW_STOP_DEADLINE_NS;
	struct io_uring_sqe *sqe;
	unsigned i;

	w->stopping = true;
	/* The device's own SQEs go first, so the cancel that follows does
	 * not find them queued behind it. */
	if (w->ops->serve_end)
		w->ops->serve_end(&w->q[0]);
	sqe = vqw_get_sqe(w);
	/* CANCEL_ANY: Linux 5.19, below the 6.1 that vqw_init requires. The
	 * fixed-file flag means nothing to a cancel; the ring requires it. */
	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, UD(TAG_CANCEL, 0, 0));
	for (;;) {
		struct io_uring_cqe *cqe;
		struct __kernel_timespec ts;
		uint64_t now;

		if (!any_kick_pending(w) && !any_inflight(w) && !w->ctl_pending)
			break;
		now = mono_ns();
		if (now >= deadline) {
			unsigned n = 0;

			for (i = 0; i < w->nq; i++)
				n += w->ops->inflight(&w->q[i]);
			log_warn(w->dev->log, "%s: I/O thread %s: host I/O of %u requests did not "
				 "end within %llu s of the guest's reset or the VM's stop; going on "
				 "without it (the device refuses to restart until it ends)",
				 w->ops->name, w->thread_name, n,
				 (unsigned long long)(VQW_STOP_DEADLINE_NS / 1000000000ull));
			break;
		}
		ts.tv_sec = (long long)((deadline - now) / 1000000000ull);
		ts.tv_nsec = (long long)((deadline - now) % 1000000000ull);
		if (io_uring_submit_and_wait_timeout(&w->ring, &cqe, 1, &ts, NULL) < 0 &&
		    io_uring_peek_cqe(&w->ring, &cqe) != 0 && mono_ns() < deadline)
			continue;
		reap(w);
	}
	for (i = 0; i < w->nq; i++) {
		if (!w->q[i].active)
			continue;
		ring_snapshot(&w->q[i]);
		w->q[i].active = false;
	}
	w->serving = false;
	arm_ctl(w);
}

static void quiet_report(struct vqw *w);

static bool all_quiet(const struct vqw *w)
{
	unsigned i;

	for (i = 0; i < w->nq; i++) {
		const struct vqw_queue *q = &w->q[i];

		if (w->ops->quiet ? !w->ops->quiet(q) : w->ops->inflight(q) != 0)
			return false;
	}
	return true;
}

/* The owner's latest vqw_quiesce, once. Off: the device looks again at
 * what it held back (ops->poked), and the next round drains the rings. */
static void quiesce_command(struct vqw *w)
{
	/* Pairs with vqw_quiesce's release store. */
	unsigned word = __atomic_load_n(&w->quiesce_word, __ATOMIC_ACQUIRE);
	unsigned i;

	if (word >> 1 == w->quiesce_seen)
		return;
	w->quiesce_seen = word >> 1;
	w->quiesced = word & 1;
	if (w->quiesced) {
		w->quiet_owed = true;
		return;
	}
	w->quiet_owed = false;
	if (w->serving && !w->stopping && w->ops->poked)
		for (i = 0; i < w->nq; i++)
			if (w->q[i].active)
				w->ops->poked(&w->q[i]);
	quiet_report(w);
}

/* Tell the owner its last vqw_quiesce is carried out: what the worker
 * did to guest memory before happened before its wait returns (release,
 * paired with vqw_quiesce_wait's acquire). */
static void quiet_report(struct vqw *w)
{
	__atomic_store_n(&w->quiet_seq, w->quiesce_seen, __ATOMIC_RELEASE);
	sem_post(&w->quiet_sem);
}

/* The owner's latest vqw_set_files, once. The register call is made
 * here: the ring is single-issuer, so once this thread enabled it no
 * other may (-EEXIST). */
static void files_command(struct vqw *w)
{
	/* Pairs with vqw_set_files's release store. */
	unsigned word = __atomic_load_n(&w->files_word, __ATOMIC_ACQUIRE);
	int r;

	if (word == w->files_seen)
		return;
	w->files_seen = word;
	r = io_uring_register_files_update(&w->ring, 0, w->files_new, w->files_n);
	w->files_res = r < 0 ? r : r == (int)w->files_n ? 0 : -EIO;
	/* Pairs with wait_seq's acquire: files_res is read after. */
	__atomic_store_n(&w->files_done, word, __ATOMIC_RELEASE);
	sem_post(&w->files_sem);
}

/* The owner's latest command, once: RUN serves, PARK stops serving (and
 * says so on `parked`), EXIT ends the thread (false); then its latest
 * quiesce, file update and poke. */
static bool command(struct vqw *w)
{
	unsigned word = __atomic_load_n(&w->ctl_word, __ATOMIC_ACQUIRE);

	w->ctl_event = false;
	arm_ctl(w);
	/* The start or stop first: a quiesce's end or a poke that came with
	 * a RUN finds the queues served. */
	if (word >> 8 != w->ctl_seen) {
		w->ctl_seen = word >> 8;
		switch (word & 0xff) {
		case VQW_CMD_RUN:
			if (!w->serving)
				serve(w, w->run_mask);
			break;
		case VQW_CMD_PARK:
			if (w->serving)
				unserve(w);
			sem_post(&w->parked);
			break;
		case VQW_CMD_EXIT:
			if (w->serving)
				unserve(w);
			return false;
		}
	}
	files_command(w);
	quiesce_command(w);
	/* Pairs with vqw_poke's release. */
	if (__atomic_exchange_n(&w->poked, false, __ATOMIC_ACQUIRE) && w->serving &&
	    !w->stopping && w->ops->poked) {
		unsigned i;

		for (i = 0; i < w->nq; i++)
			if (w->q[i].active)
				w->ops->poked(&w->q[i]);
	}
	return true;
}

/* What the thread loop must see to before the round sleeps: a command,
 * or a quiesce whose last host I/O a settle() took. */
static bool loop_owed(const struct vqw *w)
{
	return w->ctl_event || (w->quiet_owed && all_quiet(w));
}

/* For a device whose host I/O often completes as it is submitted
 * (ops->settle_io): submit what the drain made, take what completed
 * already, and drain again for what those completions owe the guest,
 * all before the round publishes. */
static void settle(struct vqw *w)
{
	unsigned i;

	if (!w->ops->settle_io || !io_uring_sq_ready(&w->ring))
		return;
	io_uring_submit(&w->ring);
	STAT_ADD(&w->q[0], enters, 1);
	if (!io_uring_cq_ready(&w->ring))
		return;
	reap(w);
	for (i = 0; i < w->nq; i++)
		if (!w->q[i].more)
			drain(&w->q[i]);
}

/* One round while serving (see the file's head). */
static void round_served(struct vqw *w)
{
	uint64_t t0;
	unsigned i;

	/* What completed is published first: its interrupt reaches the
	 * driver before this thread spends time on new chains, so the driver
	 * refills the ring while we work. Then buffers made available since
	 * the last drain are picked up whether or not a kick came, and what
	 * they completed at once (errors, GET_ID) is published too. */
	publish_all(w);
	if (w->kicked) {
		w->kicked = false;
		gather(w);
	}
	/* Every queue drained, then published: a queue's chains may fill
	 * another's buffers (a pull queue's, taken while a chain of a later
	 * queue was handled), and queues that share an interrupt get one. */
	for (i = 0; i < w->nq; i++)
		drain(&w->q[i]);
	settle(w);
	publish_all(w);
	if (!any_more(w) && !loop_owed(w) && poll_rings(w))
		return;
	if (any_more(w) || io_uring_cq_ready(&w->ring) || loop_owed(w)) {
		if (io_uring_sq_ready(&w->ring)) {
			io_uring_submit(&w->ring);
			STAT_ADD(&w->q[0], enters, 1);
		}
		return;
	}
	if (rearm(w))
		return;
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

static void *vqw_thread(void *arg)
{
	struct vqw *w = arg;
	struct sandbox_fds fds = SANDBOX_NO_FDS;
	int r;

	thread_begin(&w->hs, w->thread_name);
	/* IORING_SETUP_R_DISABLED + SINGLE_ISSUER: this thread becomes the
	 * ring's only submitter; its restrictions (vqw_set_io) hold from now.
	 * liburing 2.3 declares io_uring_enable_rings but does not export it. */
	r = syscall(__NR_io_uring_register, w->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS,
		    NULL, 0) ? -errno : 0;
	if (!r && w->fixed_want)
		register_mem(w);
	/* The guest's data is touched only after the filter is on. */
	/* dev->sandbox is the VM's, set when the transport attached the
	 * device: after vqw_init, before vqw_launch. */
	if (!r && w->dev->sandbox) {
		fds.ring = w->ring.ring_fd;
		fds.vm = w->dev->vm_fd;
		r = sandbox_enter(SANDBOX_QUEUE, &fds);
	}
	if (r)
		release_registered(w);
	thread_ready(&w->hs, r);
	if (r)
		return NULL;

	w->stopping = true;     /* parked: nothing reaches the guest */
	arm_ctl(w);
	for (;;) {
		if (w->serving)
			round_served(w);
		else
			io_uring_submit_and_wait(&w->ring, 1);
		reap(w);
		if (w->ctl_event && !command(w))
			break;
		if (w->quiet_owed && all_quiet(w)) {
			w->quiet_owed = false;
			quiet_report(w);
		}
	}
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

	memset(w, 0, sizeof(*w));
	if (nq < 1 || nq > VQW_MAX_QUEUES)
		return -EINVAL;
	for (i = 0; i < nq; i++)
		if (idx[i] >= dev->num_queues)
			return -EINVAL;
	w->ops = ops;
	w->dev = dev;
	w->nq = nq;
	w->poll_us = poll_us;
	w->gather_us = gather_us;
	snprintf(w->thread_name, sizeof(w->thread_name), "%s", thread_name);
	w->q = calloc(nq, sizeof(*w->q));
	if (!w->q)
		return -ENOMEM;
	for (i = 0; i < nq; i++) {
		struct vqw_queue *q = &w->q[i];

		q->w = w;
		q->dev = dev;
		q->idx = idx[i];
		q->vq = &dev->queues[idx[i]].vq;
		q->kick_fd = dev->queues[idx[i]].kick_fd;
		q->opaque = opaque[i];
		need += sqes_per_queue + 1;
	}
	r = sem_init(&w->parked, 0, 0) ? -errno : 0;
	if (r)
		goto free_queues;
	r = sem_init(&w->quiet_sem, 0, 0) ? -errno : 0;
	if (r)
		goto destroy_sem;
	r = sem_init(&w->files_sem, 0, 0) ? -errno : 0;
	if (r)
		goto destroy_quiet;
	w->ctl_fd = eventfd(0, EFD_CLOEXEC);
	if (w->ctl_fd < 0) {
		r = -errno;
		goto destroy_files;
	}
	for (entries = 8; entries < need; entries <<= 1)
		;
	memset(&p, 0, sizeof(p));
	p.flags = VQW_RING_FLAGS;
	p.cq_entries = entries * 2;
	r = io_uring_queue_init_params(entries, &w->ring, &p);
	if (r < 0)
		goto close_ctl;
	w->ring_ok = true;
	/* Listed with its device (mvm_get_threads); vqw_fini unlinks it. */
	w->dev_next = dev->vqws;
	dev->vqws = w;
	return 0;

close_ctl:
	close(w->ctl_fd);
destroy_files:
	sem_destroy(&w->files_sem);
destroy_quiet:
	sem_destroy(&w->quiet_sem);
destroy_sem:
	sem_destroy(&w->parked);
free_queues:
	free(w->q);
	w->q = NULL;
	return r;
}

int vqw_set_pull(struct vqw *w, unsigned qi)
{
	if (!w->ops->avail || qi >= w->nq || w->launched)
		return -EINVAL;
	w->q[qi].pull = true;
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
	struct io_uring_restriction res[64 + 4];
	unsigned i, n = 0, op;
	uint64_t ops;
	int *table;
	int r;

	if (w->io_set || !w->ring_ok || nfiles > VQW_MAX_DEVICE_FILES)
		return -EINVAL;
	table = malloc((nfiles + 1 + w->nq) * sizeof(*table));
	if (!table)
		return -ENOMEM;
	/* The device's files first (its SQEs name 0..nfiles-1), then the
	 * worker's: the ctl eventfd and each queue's kick eventfd. */
	for (i = 0; i < nfiles; i++)
		table[n++] = files[i];
	table[n++] = w->ctl_fd;
	for (i = 0; i < w->nq; i++)
		table[n++] = w->q[i].kick_fd;
	w->file_base = nfiles;
	r = io_uring_register_files(&w->ring, table, n);
	free(table);
	if (r < 0)
		return r;
	/* Restrictions (Linux 5.10), in force from IORING_REGISTER_ENABLE_RINGS:
	 * only the opcodes the device declared plus the worker's own (kick and
	 * ctl reads, polls, the stop's cancel, retry waits), every SQE on a
	 * registered file, and of the register calls only the two the thread
	 * makes as it ends (and, with fixed buffers, the one it makes as it
	 * starts). A device bug, or code that took over the thread, can then
	 * do no I/O on other files and no other kind of I/O. */
	ops = sqe_ops | (1ULL << IORING_OP_READ) | (1ULL << IORING_OP_POLL_ADD) |
	      (1ULL << IORING_OP_ASYNC_CANCEL) | (1ULL << IORING_OP_TIMEOUT);
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
	if (w->files_settable)
		res[i++] = (struct io_uring_restriction){
			.opcode = IORING_RESTRICTION_REGISTER_OP,
			.register_op = IORING_REGISTER_FILES_UPDATE };
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

int vqw_launch(struct vqw *w)
{
	int r;

	if (!w->ring_ok || w->launched)
		return -EINVAL;
	if (!w->io_set) {
		r = vqw_set_io(w, NULL, 0, 0);
		if (r)
			return r;
	}
	/* The VM's names for its device's threads, where it gave them. */
	if (w->dev->thread_prefix[0])
		snprintf(w->thread_name, sizeof(w->thread_name), "%.*sq%u",
			 (int)sizeof(w->thread_name) - 4, w->dev->thread_prefix, w->q[0].idx);
	r = thread_start_sync(&w->thread, vqw_thread, w, &w->hs);
	if (r)
		return r;
	w->launched = true;
	return 0;
}

/* Send a command: its word before the doorbell (see struct vqw). */
static void send_cmd(struct vqw *w, enum vqw_cmd cmd)
{
	__atomic_store_n(&w->ctl_word, (++w->ctl_next << 8) | cmd, __ATOMIC_RELEASE);
	ctl_ring(w);
}

void vqw_start(struct vqw *w, uint64_t mask)
{
	if (!w->launched || w->running)
		return;
	w->run_mask = mask;
	send_cmd(w, VQW_CMD_RUN);
	w->running = true;
}

void vqw_stop_begin(struct vqw *w)
{
	if (!w->running || w->stop_sent)
		return;
	send_cmd(w, VQW_CMD_PARK);
	w->stop_sent = true;
}

void vqw_stop(struct vqw *w)
{
	if (!w->running)
		return;
	vqw_stop_begin(w);
	/* Pairs with the worker's sem_post after unserve(): everything it
	 * did to guest memory happened before. */
	while (sem_wait(&w->parked) && errno == EINTR)
		;
	w->running = false;
	w->stop_sent = false;
}

void vqw_quiesce(struct vqw *w, bool on)
{
	if (!w->launched)
		return;
	w->quiesce_next = (w->quiesce_next + 1) & (UINT_MAX >> 1);
	__atomic_store_n(&w->quiesce_word, w->quiesce_next << 1 | on, __ATOMIC_RELEASE);
	ctl_ring(w);
}

/* Wait until the worker stored `want` in *seq (with release; each
 * store posts sem): 0, -ETIMEDOUT at deadline_ns, or -errno. */
static int wait_seq(sem_t *sem, const unsigned *seq, unsigned want, uint64_t deadline_ns)
{
	struct timespec until;
	uint64_t rt;

	/* A post that a wait which timed out left behind only makes this
	 * loop look once more. */
	while (__atomic_load_n(seq, __ATOMIC_ACQUIRE) != want) {
		uint64_t now = mono_ns();

		if (now >= deadline_ns)
			return -ETIMEDOUT;
		clock_gettime(CLOCK_REALTIME, &until);
		rt = (uint64_t)until.tv_sec * 1000000000ull + (uint64_t)until.tv_nsec +
		     (deadline_ns - now);
		until.tv_sec = (time_t)(rt / 1000000000ull);
		until.tv_nsec = (long)(rt % 1000000000ull);
		if (sem_timedwait(sem, &until) && errno != EINTR && errno != ETIMEDOUT)
			return -errno;
	}
	return 0;
}

int vqw_quiesce_wait(struct vqw *w, uint64_t deadline_ns)
{
	if (!w->launched)
		return 0;
	return wait_seq(&w->quiet_sem, &w->quiet_seq, w->quiesce_next, deadline_ns);
}

void vqw_allow_set_files(struct vqw *w)
{
	w->files_settable = true;
}

int vqw_set_files(struct vqw *w, const int *files, unsigned n, uint64_t deadline_ns)
{
	int r;

	if (!w->files_settable || !w->io_set || !n || n > VQW_SET_FILES_MAX ||
	    n > w->file_base)
		return -EINVAL;
	memcpy(w->files_new, files, n * sizeof(*files));
	w->files_n = n;
	if (!w->launched) {
		/* No thread has enabled the ring: its owner registers. */
		r = io_uring_register_files_update(&w->ring, 0, w->files_new, n);
		return r < 0 ? r : r == (int)n ? 0 : -EIO;
	}
	w->files_next = (w->files_next + 1) ? w->files_next + 1 : 1;
	__atomic_store_n(&w->files_word, w->files_next, __ATOMIC_RELEASE);
	ctl_ring(w);
	r = wait_seq(&w->files_sem, &w->files_done, w->files_next, deadline_ns);
	return r ? r : w->files_res;
}

/* The thread's end, timed: one that does not end is reported and its
 * worker not freed (the process's exit takes it). */
static void join_thread(struct vqw *w)
{
	struct timespec until;
	int r;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(VQW_STOP_DEADLINE_NS / 1000000000ull) + 1;
	r = pthread_timedjoin_np(w->thread, NULL, &until);
	if (r) {
		log_warn(w->dev->log, "%s: I/O thread %s did not end within %llu s; leaving it "
			 "behind", w->ops->name, w->thread_name,
			 (unsigned long long)(VQW_STOP_DEADLINE_NS / 1000000000ull));
		w->lost = true;
		return;
	}
	w->launched = false;
}

void vqw_end(struct vqw *w)
{
	if (!w->launched)
		return;
	vqw_stop(w);
	send_cmd(w, VQW_CMD_EXIT);
	/* The thread ends within its stop's deadline; what the kernel does
	 * with host I/O that outlived it as the thread exits is bounded by
	 * nothing mvm controls, so the join is timed. */
	join_thread(w);
}

void vqw_fini(struct vqw *w)
{
	struct vqw **pp;

	if (!w->ring_ok)
		return;
	for (pp = &w->dev->vqws; *pp; pp = &(*pp)->dev_next)
		if (*pp == w) {
			*pp = w->dev_next;
			break;
		}
	vqw_end(w);
	if (w->lost)
		return;
	/* A ring no thread enabled still holds its files: closed with it. */
	w->fixed = w->fixed_want = NULL;
	io_uring_queue_exit(&w->ring);
	close(w->ctl_fd);
	sem_destroy(&w->parked);
	sem_destroy(&w->quiet_sem);
	sem_destroy(&w->files_sem);
	free(w->q);
	w->q = NULL;
	w->nq = 0;
	w->ring_ok = false;
}

void vqw_get_stats(const struct vqw_queue *q, struct vqw_stats *out)
{
	unsigned s1, s2;

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
	out->retries = __atomic_load_n(&q->st.retries, __ATOMIC_RELAXED);
	/* Pairs with ring_snapshot's seqcount: a copy between two equal,
	 * even counts is whole. */
	do {
		s1 = __atomic_load_n(&q->ring_seq, __ATOMIC_ACQUIRE);
		out->ring_valid = q->st.ring_valid;
		out->ring = q->st.ring;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&q->ring_seq, __ATOMIC_RELAXED);
	} while (s1 != s2 || (s1 & 1));
}

void vqw_clear_stats(struct vqw *w)
{
	unsigned i;

	for (i = 0; i < w->nq; i++) {
		struct vqw_queue *q = &w->q[i];
		unsigned seq = __atomic_load_n(&q->ring_seq, __ATOMIC_RELAXED);

		/* As ring_snapshot writes (odd while writing): vqw_get_stats'
		 * readers never see half of it. */
		__atomic_store_n(&q->ring_seq, seq + 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		memset(&q->st, 0, sizeof(q->st));
		__atomic_store_n(&q->ring_seq, seq + 2, __ATOMIC_RELEASE);
	}
}
