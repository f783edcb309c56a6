/* virtio-blk per-queue engine: requests on top of the generic worker
 * (devices/virtq_worker.c), which owns the thread, the io_uring, the kicks,
 * draining and publishing.
 *
 * Each queue is served by exactly one worker (one thread, which may serve
 * other queues of the device too: --io-threads), so its slots are touched
 * by that thread alone between blk_queue_start and blk_queue_stop: nothing
 * here takes a lock. A chain is validated whole (blk_req_parse) before any host I/O;
 * its host I/O goes through the device's block backend (the file backend
 * below, or a test's); short transfers and EAGAIN are resubmitted; the
 * status byte and the used length are written in one place (slot_done /
 * finish). */
#include "devices/blk_queue.h"
#include "vmm/base/util.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <unistd.h>

/* Counters: single writer (the queue's worker), read by stats at any time. */
#define STAT_ADD(q, f, n) \
	__atomic_store_n(&(q)->f, (q)->f + (n), __ATOMIC_RELAXED)

/* The wait of a slot held by the rate limits: vqw_wait_until's data. A
 * new wait of the queue (after a vqw_poke) makes the older ones stale. */
#define BLK_RATE_WAKE 0x80000000u
#define BLK_RATE_DATA(seq, head) (BLK_RATE_WAKE | (uint32_t)((seq) & 0x7fff) << 16 | (head))
_Static_assert(BLK_QUEUE_SIZE_MAX <= 0x10000, "a head fits in 16 bits of the wait's data");

static void file_prep(const struct blk_slot *s, int file, struct io_uring_sqe *sqe)
{
	switch (s->req.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
		if (s->req.niov - s->iov_first == 1) {
			/* One segment (the common 4 KiB case): plain READ/WRITE,
			 * which spares the kernel importing an iovec per request. */
			const struct iovec *v = &s->req.iov[s->iov_first];

			if (s->fixed >= 0 && s->req.type == VIRTIO_BLK_T_IN)
				io_uring_prep_read_fixed(sqe, file, v->iov_base, (unsigned)v->iov_len,
							 s->off, s->fixed);
			else if (s->fixed >= 0)
				io_uring_prep_write_fixed(sqe, file, v->iov_base, (unsigned)v->iov_len,
							  s->off, s->fixed);
			else if (s->req.type == VIRTIO_BLK_T_IN)
				io_uring_prep_read(sqe, file, v->iov_base, (unsigned)v->iov_len, s->off);
			else
				io_uring_prep_write(sqe, file, v->iov_base, (unsigned)v->iov_len, s->off);
		} else if (s->req.type == VIRTIO_BLK_T_IN) {
			io_uring_prep_readv(sqe, file, &s->req.iov[s->iov_first],
					    s->req.niov - s->iov_first, s->off);
		} else {
			io_uring_prep_writev(sqe, file, &s->req.iov[s->iov_first],
					     s->req.niov - s->iov_first, s->off);
		}
		break;
	case VIRTIO_BLK_T_FLUSH:
		io_uring_prep_fsync(sqe, file, 0);
		break;
	case VIRTIO_BLK_T_DISCARD:
		io_uring_prep_fallocate(sqe, file, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					(off_t)s->off, (off_t)s->left);
		break;
	case VIRTIO_BLK_T_WRITE_ZEROES:
		io_uring_prep_fallocate(sqe, file,
					(s->punch ? FALLOC_FL_PUNCH_HOLE : FALLOC_FL_ZERO_RANGE) |
					FALLOC_FL_KEEP_SIZE, (off_t)s->off, (off_t)s->left);
		break;
	}
}

const struct blk_backend_ops blk_file_backend = {
	.name = "file",
	.prep = file_prep,
	.sqe_ops = BLK_FILE_SQE_OPS,
};

/* Queue the (remaining) host I/O of slot `head`. */
static void slot_done(struct blk_queue *q, unsigned head, uint8_t status);

static void slot_submit(struct blk_queue *q, unsigned head)
{
	struct io_uring_sqe *sqe = vqw_get_sqe(q->wq->w);
	const struct blk_slot *s = &q->slots[head];

	if (!sqe) {
		/* The ring has room for every slot (vqw_get_sqe): only a
		 * broken ring gets here. */
		slot_done(q, head, VIRTIO_BLK_S_IOERR);
		return;
	}
	/* File index 0/1 in the registered table (vqw_sqe_set_data marks
	 * the SQE fixed-file). */
	q->blk->backend->prep(s, s->buffered ? 1 : 0, sqe);
	vqw_sqe_set_data(sqe, q->wq, head);
}

/* The one place a request ends: write its status byte (when it has one)
 * and hand its head back with the used length (published at the end of the
 * worker's round). While stopping, nothing is written to guest memory: the
 * ring is being reset. */
static void finish(struct blk_queue *q, unsigned head, uint8_t *status_byte, uint8_t status,
		   uint32_t used_len)
{
	if (vqw_stopping(q->wq))
		return;
	if (status_byte)
		*status_byte = status;
	if (status != VIRTIO_BLK_S_OK)
		STAT_ADD(q, errors, 1);
	vqw_push(q->wq, (uint16_t)head, used_len);
}

static void slot_start(struct blk_queue *q, unsigned head);
static void slot_rate_wake(struct blk_queue *q, uint32_t data);

/* A slot's host I/O is over: free the slot and its bytes of the queue's
 * budget, complete its request, and let a request that waited for the
 * budget go. */
static void slot_done(struct blk_queue *q, unsigned head, uint8_t status)
{
	struct blk_slot *s = &q->slots[head];

	s->busy = false;
	q->budget_used -= s->cost;
	if (q->waiting >= 0) {
		unsigned w = (unsigned)q->waiting;

		if (vqw_stopping(q->wq) || q->budget_used + q->slots[w].cost <= BLK_QUEUE_BUDGET) {
			q->waiting = -1;
			vqw_hold(q->wq, false);
			if (vqw_stopping(q->wq)) {
				q->slots[w].cost = 0;
				slot_done(q, w, VIRTIO_BLK_S_IOERR);
			} else {
				slot_start(q, w);
			}
		}
	}
	__atomic_store_n(&q->inflight, q->inflight - 1, __ATOMIC_RELEASE);
	if (status == VIRTIO_BLK_S_OK) {
		if (s->req.type == VIRTIO_BLK_T_IN) {
			STAT_ADD(q, bytes_read, s->req.len);
			STAT_ADD(q, read_ops, 1);
		} else if (s->req.type == VIRTIO_BLK_T_OUT) {
			STAT_ADD(q, bytes_written, s->req.len);
			STAT_ADD(q, write_ops, 1);
		}
	}
	finish(q, head, s->req.status, status, status == VIRTIO_BLK_S_OK ? s->used_len : 1);
}

/* Advance the slot's iov past n transferred bytes (short read/write). */
static void slot_advance(struct blk_slot *s, uint64_t n)
{
	s->off += n;
	s->left -= n;
	while (n && s->iov_first < s->req.niov) {
		struct iovec *v = &s->req.iov[s->iov_first];
		if (n >= v->iov_len) {
			n -= v->iov_len;
			s->iov_first++;
		} else {
			v->iov_base = (uint8_t *)v->iov_base + n;
			v->iov_len -= n;
			n = 0;
		}
	}
}

/* Results worth trying again, a few times, after a growing wait: the
 * host had no resources for now (-EAGAIN: io_uring, a non-blocking file;
 * -ENOMEM, -EBUSY) or a signal cut the call short (-EINTR). Anything
 * else is the request's result. */
static bool transient(int res)
{
	return res == -EAGAIN || res == -EINTR || res == -ENOMEM || res == -EBUSY;
}

/* Try slot `head`'s host I/O again after vqw_retry_later's wait, or give
 * up: BLK_RETRY_MAX tries, VQW_RETRY_FIRST_NS doubling (about 51 ms in
 * all), so a host that keeps refusing costs a few wake-ups, not a thread
 * spinning at 100%. False: no tries left. */
static bool slot_retry_later(struct blk_queue *q, unsigned head)
{
	struct blk_slot *s = &q->slots[head];

	if (s->retries >= BLK_RETRY_MAX)
		return false;
	vqw_retry_later(q->wq, head, s->retries++);
	return true;
}

/* The wait of slot_retry_later is over: submit again (or, when a stop
 * cancelled the wait, end the request). */
static void blk_retry(struct vqw_queue *wq, uint32_t head)
{
	struct blk_queue *q = wq->opaque;

	if (head & BLK_RATE_WAKE) {
		slot_rate_wake(q, head);
		return;
	}
	if (head >= q->nslots || !q->slots[head].busy)
		return;         /* not ours (cannot happen) */
	if (vqw_stopping(wq))
		slot_done(q, head, VIRTIO_BLK_S_IOERR);
	else
		slot_submit(q, head);
}

static void slot_complete(struct blk_queue *q, unsigned head, int res)
{
	struct blk_slot *s;
	struct blk_dev *blk = q->blk;

	if (head >= q->nslots || !q->slots[head].busy)
		return;         /* not ours (cannot happen) */
	s = &q->slots[head];
	if (blk->backend->complete)
		res = blk->backend->complete(blk->backend_arg, q->idx, s, res);
	if (vqw_stopping(q->wq)) {
		/* Cancelled by a reset: not the disk's failure (a FLUSH cut
		 * short makes no later one fail). */
		slot_done(q, head, VIRTIO_BLK_S_IOERR);
		return;
	}
	if (transient(res) && slot_retry_later(q, head))
		return;

	switch (s->req.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
		/* O_DIRECT refuses buffers or offsets not aligned to the host's
		 * logical block size: redo this request through the page cache. */
		if (res == -EINVAL && blk->img.direct && !s->buffered) {
			s->buffered = true;
			slot_submit(q, head);
			return;
		}
		if (res <= 0 || (uint64_t)res > s->left) {
			/* Error, or no progress (EOF: the image shrank under us). */
			slot_done(q, head, VIRTIO_BLK_S_IOERR);
			return;
		}
		if ((uint64_t)res < s->left) {
			/* Progress, bounded by the request's size. */
			slot_advance(s, (uint64_t)res);
			slot_submit(q, head);
			return;
		}
		slot_done(q, head, VIRTIO_BLK_S_OK);
		return;
	case VIRTIO_BLK_T_FLUSH:
		/* A failed fsync may have lost data that an earlier write
		 * reported done (and Linux reports each writeback error only
		 * once): every later FLUSH fails too. Only transient refusals
		 * that kept failing get here with those codes, and they too
		 * stick: the data's fate is unknown. */
		if (res < 0)
			__atomic_store_n(&blk->flush_failed, true, __ATOMIC_RELEASE);
		slot_done(q, head, res < 0 || __atomic_load_n(&blk->flush_failed, __ATOMIC_ACQUIRE)
			  ? VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_OK);
		return;
	case VIRTIO_BLK_T_WRITE_ZEROES:
		if (res == -EOPNOTSUPP && !s->punch && blk->img.discard) {
			/* No ZERO_RANGE here: a punched hole reads back as zeroes. */
			s->punch = true;
			slot_submit(q, head);
			return;
		}
		/* fall through */
	case VIRTIO_BLK_T_DISCARD:
		slot_done(q, head, res < 0 ? VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_OK);
		return;
	}
	slot_done(q, head, VIRTIO_BLK_S_IOERR);
}

/* The worker's "handle this chain": validate the whole request, then
 * complete it inline or start its host I/O. */
static void blk_chain(struct vqw_queue *wq, struct virtq_chain *c)
{
	struct blk_queue *q = wq->opaque;
	struct blk_slot *s;
	uint8_t status;
	uint32_t used_len;

	if (c->head >= q->nslots || q->slots[c->head].busy) {
		/* virtq_pop guarantees neither; treat as a broken ring. */
		vqw_broken(wq, "a chain head that is still in flight");
		return;
	}
	s = &q->slots[c->head];
	s->req.iov = q->parse_iov;
	switch (blk_req_parse(c, &q->ctx, &s->req, &status, &used_len)) {
	case BLK_REQ_NO_STATUS:
		finish(q, c->head, NULL, VIRTIO_BLK_S_IOERR, 0);
		return;
	case BLK_REQ_DONE:
		finish(q, c->head, s->req.status, status, used_len);
		return;
	case BLK_REQ_SUBMIT:
		break;
	}
	/* Most requests have a segment or two: they stay in the slot. */
	s->req.iov = s->req.niov <= BLK_SLOT_IOV ? s->iov :
		     q->big_iov + (size_t)c->head * BLK_SEG_MAX;
	memcpy(s->req.iov, q->parse_iov, s->req.niov * sizeof(*s->req.iov));
	if (s->req.type == VIRTIO_BLK_T_FLUSH &&
	    __atomic_load_n(&q->blk->flush_failed, __ATOMIC_ACQUIRE)) {
		finish(q, c->head, s->req.status, VIRTIO_BLK_S_IOERR, 1);
		return;
	}
	s->busy = true;
	s->iov_first = 0;
	s->off = s->req.sector * BLK_SECTOR;
	s->left = s->req.len;
	s->buffered = false;
	/* One segment in registered guest RAM: the kernel need not pin and
	 * map its pages for this request (short I/O stays inside it). */
	s->fixed = (s->req.type == VIRTIO_BLK_T_IN || s->req.type == VIRTIO_BLK_T_OUT) &&
		   s->req.niov == 1 ? vqw_fixed_index(wq, s->req.iov[0].iov_base,
						       s->req.iov[0].iov_len) : -1;
	s->punch = s->req.type == VIRTIO_BLK_T_WRITE_ZEROES &&
		   (s->req.dwz_flags & VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP) && q->blk->img.discard;
	s->used_len = s->req.type == VIRTIO_BLK_T_IN ? (uint32_t)s->req.len + 1 : 1;
	s->retries = 0;
	s->rate_since = 0;
	s->rate_paid = false;
	s->cost = s->req.type == VIRTIO_BLK_T_FLUSH ? 0 : s->req.len;
	__atomic_store_n(&q->inflight, q->inflight + 1, __ATOMIC_RELAXED);
	/* The queue's budget of host work in flight: a request that does not
	 * fit waits (its slot taken, the queue held: the guest's next
	 * requests wait in the ring) until enough has completed; one that is
	 * alone always goes. */
	if (q->budget_used && q->budget_used + s->cost > BLK_QUEUE_BUDGET) {
		q->waiting = (int)c->head;
		vqw_hold(wq, true);
		STAT_ADD(q, budget_waits, 1);
		return;
	}
	slot_start(q, c->head);
}

static bool rate_limited(const struct blk_dev *blk)
{
	return __atomic_load_n(&blk->rate.on, __ATOMIC_RELAXED) ||
	       (blk->group && __atomic_load_n(&blk->group->on, __ATOMIC_RELAXED));
}

/* What a request costs of a bytes bucket: its data, for reads and writes. */
static uint64_t rate_bytes(const struct blk_slot *s)
{
	return s->req.type == VIRTIO_BLK_T_IN || s->req.type == VIRTIO_BLK_T_OUT ? s->req.len : 0;
}

/* Issue the slot's host I/O once the disk's rate limits (its own, then
 * its group's) have its tokens: where they do not, the queue is held
 * (what the guest posts meanwhile waits in the ring) and the thread
 * waits exactly until they will, in its io_uring (vqw_wait_until). Then
 * count its bytes against the budget. */
static void slot_start(struct blk_queue *q, unsigned head)
{
	struct blk_slot *s = &q->slots[head];
	struct ratelim *rl[2] = { &q->blk->rate, q->blk->group };
	uint64_t now = 0, wait;

	if (!s->rate_paid && rate_limited(q->blk)) {
		now = mono_ns();
		/* Reserved: the tokens are the request's from now, and it goes
		 * when the wait is over, however late the thread wakes. */
		wait = ratelim_take(rl, 2, rate_bytes(s), now, true);
		s->rate_paid = true;
		if (wait) {
			if (!s->rate_since) {
				s->rate_since = now;
				STAT_ADD(q, rate_delayed, 1);
			}
			q->rate_waiting = (int)head;
			vqw_hold(q->wq, true);
			q->rate_seq++;
			vqw_wait_until(q->wq, BLK_RATE_DATA(q->rate_seq, head), now + wait);
			return;
		}
	}
	if (q->rate_waiting == (int)head) {
		q->rate_waiting = -1;
		vqw_hold(q->wq, false);
	}
	if (s->rate_since) {
		STAT_ADD(q, rate_wait_ns, (now ? now : mono_ns()) - s->rate_since);
		s->rate_since = 0;
	}
	q->budget_used += s->cost;
	slot_submit(q, head);
}

void blk_queues_held_cost(const struct blk_dev *blk, uint64_t *bytes, uint64_t *ops)
{
	unsigned q;

	*bytes = *ops = 0;
	for (q = 0; q < blk->vdev.num_queues; q++) {
		/* The pause's handshake ordered the worker's last writes of
		 * rate_waiting and the slot before this read. */
		int head = __atomic_load_n(&blk->queues[q].rate_waiting, __ATOMIC_RELAXED);
		const struct blk_slot *s;

		if (head < 0)
			continue;
		s = &blk->queues[q].slots[head];
		if (!s->rate_paid)
			continue;
		*bytes += rate_bytes(s);
		*ops += 1;
	}
}

/* The rate limits' wait of a slot is over (or a stop cancelled it). */
static void slot_rate_wake(struct blk_queue *q, uint32_t data)
{
	unsigned head = data & 0xffff;

	if (q->rate_waiting != (int)head || (data >> 16 & 0x7fff) != (q->rate_seq & 0x7fffu))
		return;         /* stale: a poke gave it a newer wait */
	/* Paused: it goes on when the quiesce ends (blk_poked asks again). */
	if (vqw_quiesced(q->wq) && !vqw_stopping(q->wq))
		return;
	if (vqw_stopping(q->wq)) {
		q->rate_waiting = -1;
		vqw_hold(q->wq, false);
		q->slots[head].cost = 0;        /* none of the budget taken yet */
		slot_done(q, head, VIRTIO_BLK_S_IOERR);
		return;
	}
	slot_start(q, head);
}

/* The limits changed (vqw_poke): a slot waiting for tokens is looked at
 * again now, under the new ones. */
static void blk_poked(struct vqw_queue *wq)
{
	struct blk_queue *q = wq->opaque;
	struct ratelim *rl[2] = { &q->blk->rate, q->blk->group };
	struct blk_slot *s;

	if (q->rate_waiting < 0)
		return;
	/* It paid under the old limits: it asks again under the new. */
	s = &q->slots[q->rate_waiting];
	ratelim_refund(rl, 2, rate_bytes(s));
	s->rate_paid = false;
	slot_start(q, (unsigned)q->rate_waiting);
}

static void blk_complete(struct vqw_queue *wq, uint32_t head, int res)
{
	slot_complete(wq->opaque, head, res);
}

static unsigned blk_inflight(const struct vqw_queue *wq)
{
	const struct blk_queue *q = wq->opaque;

	return __atomic_load_n(&q->inflight, __ATOMIC_RELAXED);
}

/* Quiet for a pause: nothing in flight but a request waiting for rate
 * tokens, which slot_rate_wake holds back while quiesced. */
static bool blk_quiet(const struct vqw_queue *wq)
{
	const struct blk_queue *q = wq->opaque;

	return __atomic_load_n(&q->inflight, __ATOMIC_RELAXED) == (q->rate_waiting >= 0 ? 1u : 0u);
}

/* fixed-buffers: not fatal, the disk works without (at the cost
 * docs/command-line.md states). Said once per device, by whichever of its workers
 * fails first. */
static void blk_fixed_failed(struct vqw_queue *wq, int err)
{
	struct blk_dev *blk = ((struct blk_queue *)wq->opaque)->blk;
	unsigned long long mib = (unsigned long long)(blk->vdev.mem->total >> 20);
	char hint[160] = "";

	if (__atomic_exchange_n(&blk->fixed_warned, true, __ATOMIC_RELAXED))
		return;
	/* -ENOMEM: the pages exceed RLIMIT_MEMLOCK (no CAP_IPC_LOCK). */
	if (err == -ENOMEM)
		snprintf(hint, sizeof(hint), ": raise RLIMIT_MEMLOCK (ulimit -l) above %llu MiB "
			 "(the RAM once per I/O thread) or run with CAP_IPC_LOCK",
			 mib * blk->nworkers);
	log_warn(blk->vdev.log, "disk %s: fixed-buffers: io_uring cannot %s the guest's %llu MiB "
		 "of RAM (%s); its I/O goes without%s", blk->opts.path,
		 err == -ENOMEM ? "pin" : "register", mib, strerror(-err), hint);
}

static const struct vqw_ops blk_vqw_ops = {
	.name = "virtio-blk",
	.chain = blk_chain,
	.complete = blk_complete,
	.inflight = blk_inflight,
	.fixed_failed = blk_fixed_failed,
	.retry = blk_retry,
	.poked = blk_poked,
	.quiet = blk_quiet,
};

int blk_slots_alloc(struct blk_dev *blk)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *m;

	/* A queue's slots, whole pages, then its overflow arrays. */
	blk->slot_big_off = ALIGN_UP(BLK_QUEUE_SIZE_MAX * sizeof(struct blk_slot), page);
	blk->slot_stride = blk->slot_big_off +
			   ALIGN_UP(BLK_QUEUE_SIZE_MAX * BLK_SEG_MAX * sizeof(struct iovec), page);
	m = mmap(NULL, blk->slot_stride * blk->vdev.num_queues, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -ENOMEM;
	/* Over half a megabyte a queue, of which a few slots are used: no
	 * huge page (a hint: it may fail where THP is off). */
	madvise(m, blk->slot_stride * blk->vdev.num_queues, MADV_NOHUGEPAGE);
	blk->slot_mem = m;
	blk->slot_len = blk->slot_stride * blk->vdev.num_queues;
	return 0;
}

void blk_slots_free(struct blk_dev *blk)
{
	if (blk->slot_mem)
		munmap(blk->slot_mem, blk->slot_len);
	blk->slot_mem = NULL;
}

/* The queue's slots read as zero again at its next start: the pages go
 * back to the kernel (a private anonymous mapping refills with zeroes). */
static void q_free_slots(struct blk_queue *q)
{
	if (q->slots)
		madvise(q->slots, q->blk->slot_stride, MADV_DONTNEED);
	q->slots = NULL;
	q->prepared = false;
}

unsigned blk_io_threads(const struct mvm_disk *o)
{
	unsigned n = o->io_threads;
	cpu_set_t cpus;

	if (!n) {
		/* One thread per queue, but no more threads than CPUs to run
		 * them: on a shared or small host, threads that take turns on
		 * one CPU cost a wake-up and a context switch per batch each,
		 * where one thread would batch their queues together. */
		n = sched_getaffinity(0, sizeof(cpus), &cpus) ? 1 : (unsigned)CPU_COUNT(&cpus);
		if (!n)
			n = 1;
	}
	return n < o->queues ? n : o->queues;
}

/* Queue qi's slots and request context, for its worker's next run.
 * -EBUSY: host I/O of the queue's last run outlived its stop's deadline
 * and has not ended yet (its slots are still in use). */
static int queue_prepare(struct blk_dev *blk, unsigned qi)
{
	struct blk_queue *q = &blk->queues[qi];
	struct virtio_dev *dev = &blk->vdev;

	if (__atomic_load_n(&q->inflight, __ATOMIC_ACQUIRE))
		return -EBUSY;
	/* Slots kept by host I/O that outlived the last stop, ended since. */
	if (q->prepared)
		q_free_slots(q);
	q->nslots = dev->queues[qi].vq.size;
	q->ctx.capacity = blk->capacity;
	q->ctx.ro = blk->img.ro;
	q->ctx.discard = virtio_has_feature(dev, VIRTIO_BLK_F_DISCARD);
	q->ctx.write_zeroes = virtio_has_feature(dev, VIRTIO_BLK_F_WRITE_ZEROES);
	q->ctx.serial = blk->opts.serial;
	q->waiting = -1;
	q->rate_waiting = -1;
	q->budget_used = 0;
	if (!blk->slot_mem || q->nslots > BLK_QUEUE_SIZE_MAX)
		return -EINVAL;     /* cannot happen: the device made both */
	q->slots = (struct blk_slot *)((uint8_t *)blk->slot_mem + qi * blk->slot_stride);
	q->big_iov = (struct iovec *)((uint8_t *)q->slots + blk->slot_big_off);
	q->prepared = true;
	q->started = true;
	return 0;
}

/* The IORING_OP_* a disk's ring may carry: what its backend issues, less
 * what the disk must never do. A read-only disk's ring refuses writes of
 * any kind, fallocate and fsync (its FLUSH completes without host I/O:
 * blk_req_parse), a disk without discard or write-zeroes never punches
 * or zeroes. */
static uint64_t disk_sqe_ops(const struct blk_dev *blk)
{
	uint64_t ops = blk->backend->sqe_ops;

	if (blk->img.ro)
		ops &= ~((1ULL << IORING_OP_WRITE) | (1ULL << IORING_OP_WRITEV) |
			 (1ULL << IORING_OP_WRITE_FIXED) | (1ULL << IORING_OP_FALLOCATE) |
			 (1ULL << IORING_OP_FSYNC));
	return ops;
}

static void workers_free(struct blk_dev *blk, struct blk_worker *workers);

/* Workers for the device's queues on img's files into workers (nworkers
 * of them, zeroed): their rings, restrictions and rate-limit
 * memberships; not yet the queues' pointers to them (workers_adopt).
 * On failure what was made is undone. 0 or -errno. */
static int workers_make(struct blk_dev *blk, struct blk_worker *workers,
			const struct blk_image *img)
{
	unsigned idx[VQW_MAX_QUEUES], wi, qi, n;
	void *opaque[VQW_MAX_QUEUES];
	int fds[BLK_FILES], r;
	char name[24];

	fds[0] = img->fd;
	fds[1] = img->fd_buffered;      /* -1: an empty slot, for a swap */
	for (wi = 0; wi < blk->nworkers; wi++) {
		struct blk_worker *bw = &workers[wi];

		n = 0;
		for (qi = wi; qi < blk->vdev.num_queues; qi += blk->nworkers) {
			idx[n] = qi;
			opaque[n++] = &blk->queues[qi];
		}
		snprintf(name, sizeof(name), "mvm-blk-q%u", wi);
		/* One SQE per slot at most is pending (its I/O or its retry). */
		r = vqw_init(&bw->w, &blk_vqw_ops, &blk->vdev, idx, opaque, n, BLK_QUEUE_SIZE_MAX,
			     blk->opts.poll_us, blk->opts.gather_us, name);
		if (r)
			goto undo;
		bw->up = true;
		if (blk->opts.fixed_buffers) {
			r = vqw_register_mem(&bw->w, blk->vdev.mem);
			if (r)
				goto undo;
		}
		/* An image swap replaces the files (blk_swap_image). */
		vqw_allow_set_files(&bw->w);
		r = vqw_set_io(&bw->w, fds, BLK_FILES, disk_sqe_ops(blk));
		if (r)
			goto undo;
		/* Woken when the disk's limits change at run time. */
		r = ratelim_join(&blk->rate, &bw->w);
		if (r)
			goto undo;
		if (blk->group) {
			r = ratelim_join(blk->group, &bw->w);
			if (r) {
				ratelim_leave(&blk->rate, &bw->w);
				goto undo;
			}
		}
	}
	return 0;
undo:
	workers_free(blk, workers);
	return r;
}

/* End and free workers (those that were made), leaving their rate-limit
 * memberships first: ratelim_set pokes members. */
static void workers_free(struct blk_dev *blk, struct blk_worker *workers)
{
	unsigned wi;

	for (wi = 0; wi < blk->nworkers; wi++) {
		if (!workers[wi].up)
			continue;
		ratelim_leave(&blk->rate, &workers[wi].w);
		if (blk->group)
			ratelim_leave(blk->group, &workers[wi].w);
		vqw_fini(&workers[wi].w);
		workers[wi].up = workers[wi].w.lost;
	}
}

/* The queues' pointers to their workers. */
static void workers_adopt(struct blk_dev *blk, struct blk_worker *workers)
{
	unsigned wi, i;

	for (wi = 0; wi < blk->nworkers; wi++)
		for (i = 0; i < workers[wi].w.nq; i++)
			blk->queues[workers[wi].w.q[i].idx].wq = &workers[wi].w.q[i];
}

int blk_workers_init(struct blk_dev *blk)
{
	unsigned qi;
	int r;

	for (qi = 0; qi < blk->vdev.num_queues; qi++) {
		blk->queues[qi].blk = blk;
		blk->queues[qi].idx = qi;
		blk->queues[qi].waiting = blk->queues[qi].rate_waiting = -1;
	}
	r = workers_make(blk, blk->workers, &blk->img);
	if (!r)
		workers_adopt(blk, blk->workers);
	return r;
}

int blk_workers_launch(struct blk_dev *blk)
{
	unsigned wi;
	int r;

	for (wi = 0; wi < blk->nworkers; wi++) {
		r = vqw_launch(&blk->workers[wi].w);
		if (r) {
			blk_workers_end(blk);
			return r;
		}
	}
	return 0;
}

void blk_workers_end(struct blk_dev *blk)
{
	unsigned wi;

	for (wi = 0; wi < blk->nworkers; wi++)
		if (blk->workers[wi].up)
			vqw_end(&blk->workers[wi].w);
}

void blk_workers_fini(struct blk_dev *blk)
{
	workers_free(blk, blk->workers);
}

int blk_workers_set_files(struct blk_dev *blk, const int *files, const int *old)
{
	uint64_t deadline = mono_ns() + VQW_STOP_DEADLINE_NS;
	unsigned wi, i;
	int r = 0;

	for (wi = 0; wi < blk->nworkers && !r; wi++)
		r = vqw_set_files(&blk->workers[wi].w, files, BLK_FILES, deadline);
	if (r && r != -ETIMEDOUT)
		/* The threads that took the new files go back to the old. */
		for (i = 0; i + 1 < wi; i++)
			if (vqw_set_files(&blk->workers[i].w, old, BLK_FILES, deadline))
				virtio_dev_needs_reset(&blk->vdev);
	return r;
}

void blk_clear_stats(struct blk_dev *blk)
{
	unsigned wi, q;

	for (wi = 0; wi < blk->nworkers; wi++)
		vqw_clear_stats(&blk->workers[wi].w);
	for (q = 0; q < blk->vdev.num_queues; q++) {
		struct blk_queue *bq = &blk->queues[q];

		bq->errors = bq->bytes_read = bq->bytes_written = bq->budget_waits = 0;
		bq->rate_delayed = bq->rate_wait_ns = bq->read_ops = bq->write_ops = 0;
	}
}

int blk_swap_image(struct blk_dev *blk, struct blk_image *img, const char *path, char *err,
		   size_t errlen)
{
	/* Both of the disk's file slots (workers_make): an image without a
	 * buffered twin empties the second. */
	int files[BLK_FILES] = { img->fd, img->fd_buffered };
	int old[BLK_FILES] = { blk->img.fd, blk->img.fd_buffered };
	const char *cur = __atomic_load_n(&blk->opts.path, __ATOMIC_RELAXED);
	char *slot = cur == blk->path[0] ? blk->path[1] : blk->path[0];
	struct blk_image prev;
	int r;

	if (img->ro != blk->img.ro)
		return err_set(err, errlen, -EINVAL, "disk %s: %s is %s but the disk is %s; give "
			       "an image the disk can use", cur, path,
			       img->ro ? "read-only" : "read-write",
			       blk->img.ro ? "read-only" : "read-write");
	if (virtio_has_feature(&blk->vdev, VIRTIO_BLK_F_DISCARD) && !img->discard)
		return err_set(err, errlen, -EINVAL, "disk %s: the guest was offered discard, and "
			       "%s's file system cannot punch holes; give an image on one that can",
			       cur, path);
	if (strlen(path) >= BLK_PATH_MAX)
		return err_set(err, errlen, -ENAMETOOLONG, "disk %s: new path longer than %d bytes",
			       cur, BLK_PATH_MAX - 1);
	/* Each I/O thread puts the new files in its ring's slots: the
	 * queues, their waits and counters go on (the caller quiesced them,
	 * so nothing is in flight on the old image). */
	r = blk_workers_set_files(blk, files, old);
	if (r == -ETIMEDOUT) {
		/* A thread that may still take the descriptors later keeps
		 * them: the new image stays open (and locked) for good. */
		img->fd = img->fd_buffered = -1;
		virtio_dev_needs_reset(&blk->vdev);
		return err_set(err, errlen, r, "disk %s: an I/O thread did not take %s within "
			       "%llu s; the device needs a reset", cur, path,
			       (unsigned long long)(VQW_STOP_DEADLINE_NS / 1000000000ull));
	}
	if (r)
		return err_set(err, errlen, r, "disk %s: cannot give %s to its I/O threads: %s",
			       cur, path, strerror(-r));
	prev = blk->img;
	blk_image_move(&blk->img, img);
	blk_image_close(&prev);
	strcpy(slot, path);
	__atomic_store_n(&blk->opts.path, slot, __ATOMIC_RELEASE);
	blk_queue_set_capacity(blk);
	return 0;
}

void blk_queue_set_capacity(struct blk_dev *blk)
{
	unsigned i;

	/* The device rebuilds its configuration and tells the driver
	 * (blk_swap, blk_resize). The workers read the image's state and the
	 * capacity as they go on, after the resume's quiesce command (its
	 * release store orders these). */
	blk->capacity = blk->img.size / BLK_SECTOR;
	for (i = 0; i < blk->vdev.num_queues; i++)
		blk->queues[i].ctx.capacity = blk->capacity;
}

int blk_queue_start(struct blk_dev *blk, unsigned qi)
{
	struct virtio_dev *dev = &blk->vdev;
	unsigned wi = qi % blk->nworkers, later, i;
	struct blk_worker *bw = &blk->workers[wi];
	uint64_t mask = 0;
	int r;

	r = queue_prepare(blk, qi);
	if (r)
		return r;
	/* The core starts the enabled queues in increasing order: the
	 * worker starts with its last enabled one, serving all of them. */
	for (later = qi + blk->nworkers; later < dev->num_queues; later += blk->nworkers)
		if (dev->queues[later].vq.ready)
			return 0;
	/* Only queues started in this run: one whose slots host I/O from
	 * before the last reset still holds (prepared, not started) must not
	 * be served, its ring is not set up. */
	for (i = 0; i < bw->w.nq; i++)
		if (blk->queues[bw->w.q[i].idx].started)
			mask |= 1ULL << i;
	vqw_start(&bw->w, mask);
	return 0;
}

void blk_queues_stopping(struct blk_dev *blk)
{
	unsigned wi;

	for (wi = 0; wi < blk->nworkers; wi++)
		vqw_stop_begin(&blk->workers[wi].w);
}

void blk_queue_stop(struct blk_dev *blk, unsigned qi)
{
	struct blk_queue *q = &blk->queues[qi];

	vqw_stop(&blk->workers[qi % blk->nworkers].w);
	q->started = false;
	/* Slots whose host I/O outlived the stop stay until it ends
	 * (queue_prepare refuses the queue meanwhile). */
	if (!__atomic_load_n(&q->inflight, __ATOMIC_ACQUIRE))
		q_free_slots(q);
}
