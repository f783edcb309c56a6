/* virtio-blk per-queue engine: one thread per virtqueue.
 *
 * The thread owns the queue's ring, its io_uring and its request slots; no
 * other thread touches them between blk_queue_start and blk_queue_stop, so
 * nothing here takes a lock. It sleeps in exactly one place, io_uring_enter,
 * for guest kicks (a read of the kick eventfd queued in the same ring),
 * I/O completions and the stop request (a read of stop_fd). Each wakeup:
 *   1. reap every CQE (complete requests, resubmit short/EAGAIN I/O,
 *      re-arm the kick read);
 *   2. drain the avail ring (bounded by the queue size), validating each
 *      request fully and turning it into SQEs;
 *   3. publish the used entries of this round at once and signal at most
 *      one interrupt (virtq_publish decides, honouring EVENT_IDX);
 *   4. one io_uring_enter that submits everything and waits for the next
 *      event. */
#include "devices/blk_queue.h"
#include "vmm/util.h"
#include "vmm/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/falloc.h>

/* user_data: tag in the high 32 bits, slot index (head) in the low. */
enum { TAG_IO = 1, TAG_KICK, TAG_KICK_POLL, TAG_STOP, TAG_CANCEL };
#define UD(tag, idx) (((uint64_t)(tag) << 32) | (uint32_t)(idx))

/* Counters: single writer (the queue thread), read by --stats at any time. */
#define STAT_ADD(q, f, n) \
	__atomic_store_n(&(q)->st.f, (q)->st.f + (n), __ATOMIC_RELAXED)

static struct io_uring_sqe *get_sqe(struct blk_queue *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	/* The SQ holds nslots + 4 entries and at most one SQE per slot plus
	 * the kick/stop/cancel ones is ever pending, so this is a safety net. */
	if (!sqe) {
		io_uring_submit(&q->ring);
		STAT_ADD(q, enters, 1);
		sqe = io_uring_get_sqe(&q->ring);
	}
	return sqe;
}

static void arm_kick(struct blk_queue *q, bool poll)
{
	struct io_uring_sqe *sqe = get_sqe(q);

	if (!sqe)
		return;
	if (poll) {
		io_uring_prep_poll_add(sqe, q->kick_fd, POLLIN);
		io_uring_sqe_set_data64(sqe, UD(TAG_KICK_POLL, 0));
	} else {
		io_uring_prep_read(sqe, q->kick_fd, &q->kick_buf, sizeof(q->kick_buf), 0);
		io_uring_sqe_set_data64(sqe, UD(TAG_KICK, 0));
	}
	q->kick_pending = true;
}

static void file_prep(const struct blk_slot *s, int file, struct io_uring_sqe *sqe)
{
	switch (s->req.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
		if (s->req.niov - s->iov_first == 1) {
			/* One segment (the common 4 KiB case): plain READ/WRITE,
			 * which spares the kernel importing an iovec per request. */
			const struct iovec *v = &s->req.iov[s->iov_first];

			if (s->req.type == VIRTIO_BLK_T_IN)
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
};

/* Queue the (remaining) host I/O of slot `head`. */
static void slot_submit(struct blk_queue *q, unsigned head)
{
	struct io_uring_sqe *sqe = get_sqe(q);
	const struct blk_slot *s = &q->slots[head];

	if (!sqe)
		abort();        /* cannot happen: see get_sqe */
	q->blk->backend->prep(s, s->buffered ? 1 : 0, sqe);
	if (sqe->opcode != IORING_OP_NOP)
		sqe->flags |= IOSQE_FIXED_FILE;   /* file index 0/1 in the registered table */
	io_uring_sqe_set_data64(sqe, UD(TAG_IO, head));
}

/* Hand a finished request back to the guest (not yet published). While
 * stopping, nothing is written to guest memory: the ring is being reset. */
static void finish(struct blk_queue *q, unsigned head, uint8_t status, uint32_t used_len)
{
	if (q->stopping)
		return;
	if (status != VIRTIO_BLK_S_OK)
		STAT_ADD(q, errors, 1);
	virtq_push(q->vq, (uint16_t)head, used_len);
	q->pushed++;
}

static void slot_done(struct blk_queue *q, unsigned head, uint8_t status)
{
	struct blk_slot *s = &q->slots[head];

	s->busy = false;
	q->inflight--;
	if (!q->stopping) {
		*s->req.status = status;
		if (status == VIRTIO_BLK_S_OK) {
			if (s->req.type == VIRTIO_BLK_T_IN)
				STAT_ADD(q, bytes_read, s->req.len);
			else if (s->req.type == VIRTIO_BLK_T_OUT)
				STAT_ADD(q, bytes_written, s->req.len);
		}
	}
	finish(q, head, status, status == VIRTIO_BLK_S_OK ? s->used_len : 1);
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

static void slot_complete(struct blk_queue *q, unsigned head, int res)
{
	struct blk_slot *s;
	struct blk_dev *blk = q->blk;

	if (head >= q->nslots || !q->slots[head].busy)
		return;         /* not ours (cannot happen) */
	s = &q->slots[head];
	if (blk->backend->complete)
		res = blk->backend->complete(blk->backend_arg, q->idx, s, res);
	if (q->stopping) {
		slot_done(q, head, VIRTIO_BLK_S_IOERR);
		return;
	}

	switch (s->req.type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT:
		if (res == -EAGAIN) {
			slot_submit(q, head);
			return;
		}
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
			slot_advance(s, (uint64_t)res);
			slot_submit(q, head);
			return;
		}
		slot_done(q, head, VIRTIO_BLK_S_OK);
		return;
	case VIRTIO_BLK_T_FLUSH:
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
		if (res == -EAGAIN) {
			slot_submit(q, head);
			return;
		}
		slot_done(q, head, res < 0 ? VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_OK);
		return;
	}
	slot_done(q, head, VIRTIO_BLK_S_IOERR);
}

/* One popped chain: validate, then complete inline or start host I/O. */
static void handle_chain(struct blk_queue *q)
{
	struct virtq_chain *c = &q->chain;
	struct blk_slot *s;
	uint8_t status;
	uint32_t used_len;

	STAT_ADD(q, requests, 1);
	if (c->head >= q->nslots || q->slots[c->head].busy) {
		/* virtq_pop guarantees neither; treat as a broken ring. */
		q->broken = true;
		virtio_dev_needs_reset(&q->blk->vdev);
		return;
	}
	s = &q->slots[c->head];
	switch (blk_req_parse(c, &q->ctx, &s->req, &status, &used_len)) {
	case BLK_REQ_NO_STATUS:
		finish(q, c->head, VIRTIO_BLK_S_IOERR, 0);
		return;
	case BLK_REQ_DONE:
		finish(q, c->head, status, used_len);
		return;
	case BLK_REQ_SUBMIT:
		break;
	}
	if (s->req.type == VIRTIO_BLK_T_FLUSH &&
	    __atomic_load_n(&q->blk->flush_failed, __ATOMIC_ACQUIRE)) {
		*s->req.status = VIRTIO_BLK_S_IOERR;
		finish(q, c->head, VIRTIO_BLK_S_IOERR, 1);
		return;
	}
	s->busy = true;
	s->iov_first = 0;
	s->off = s->req.sector * BLK_SECTOR;
	s->left = s->req.len;
	s->buffered = false;
	s->punch = s->req.type == VIRTIO_BLK_T_WRITE_ZEROES &&
		   (s->req.dwz_flags & VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP) && q->blk->img.discard;
	s->used_len = s->req.type == VIRTIO_BLK_T_IN ? (uint32_t)s->req.len + 1 : 1;
	q->inflight++;
	slot_submit(q, c->head);
}

/* Drain the avail ring: at most one queue's worth per call, so completions
 * and other work are not starved by a driver that keeps refilling. */
static void drain(struct blk_queue *q)
{
	unsigned budget = q->vq->size;
	int r;

	q->more = false;
	if (q->broken)
		return;
	for (;;) {
		virtq_notify_disable(q->vq);
		while (budget) {
			r = virtq_pop(q->vq, &q->chain);
			if (r == 0)
				break;
			if (r < 0) {
				log_warn(q->blk->vdev.log, "virtio-blk %s: queue %u: guest broke the ring (%s); "
					  "device needs reset", q->blk->opts.path, q->idx,
					  strerror(-r));
				q->broken = true;
				virtio_dev_needs_reset(&q->blk->vdev);
				return;
			}
			budget--;
			q->worked = true;
			handle_chain(q);
		}
		if (!budget) {
			q->more = true;  /* notifications stay off; we come back */
			return;
		}
		/* Re-enable, then re-check: buffers made available before the
		 * driver saw notifications enabled got no kick (see
		 * virtq_notify_enable's barrier). */
		if (!virtq_notify_enable(q->vq))
			return;
	}
}

static void publish(struct blk_queue *q)
{
	if (!q->pushed)
		return;
	q->pushed = 0;
	STAT_ADD(q, batches, 1);
	if (virtq_publish(q->vq)) {
		virtio_signal_queue(&q->blk->vdev, q->idx);
		STAT_ADD(q, irqs, 1);
	}
}

static void reap(struct blk_queue *q)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	io_uring_for_each_cqe(&q->ring, head, cqe) {
		uint64_t ud = io_uring_cqe_get_data64(cqe);
		unsigned idx = (uint32_t)ud;
		int res = cqe->res;

		n++;
		switch (ud >> 32) {
		case TAG_IO:
			slot_complete(q, idx, res);
			break;
		case TAG_KICK:
			q->kick_pending = false;
			if (!q->stopping)
				/* -EAGAIN: this kernel does not wait on an O_NONBLOCK
				 * eventfd; wait with a poll, then read. */
				arm_kick(q, res == -EAGAIN);
			break;
		case TAG_KICK_POLL:
			q->kick_pending = false;
			if (!q->stopping)
				arm_kick(q, false);
			break;
		case TAG_STOP:
			q->stopping = true;
			break;
		case TAG_CANCEL:
			break;
		}
	}
	io_uring_cq_advance(&q->ring, n);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Adaptive polling (like an iothread's poll-max-ns): right after a round
 * that did work, with no host I/O outstanding, watch the avail ring for
 * opts.poll_us before sleeping. A driver that reposts at once is picked up
 * without a kick and without a wake-up. Guest notifications stay off while
 * we poll, and are re-enabled (with the re-check) before we sleep.
 * True when work showed up. */
static bool poll_ring(struct blk_queue *q)
{
	uint64_t deadline;
	bool found = false;

	/* With no I/O in flight the only SQE that can be pending is the kick
	 * read re-armed by reap(): it need not reach the kernel before we
	 * sleep (kicks accumulate in the eventfd), so it does not stop us
	 * polling; the enter that goes to sleep submits it. Bailing out on it
	 * made every other batch sleep and wait for a kick. */
	if (!q->blk->opts.poll_us || !q->worked || q->inflight || q->broken ||
	    io_uring_cq_ready(&q->ring))
		return false;
	q->worked = false;
	virtq_notify_disable(q->vq);
	deadline = now_ns() + q->blk->opts.poll_us * 1000ULL;
	do {
		if (virtq_has_work(q->vq)) {
			found = true;
			break;
		}
		__builtin_ia32_pause();
	} while (now_ns() < deadline);
	if (!found)
		found = virtq_notify_enable(q->vq);
	if (found)
		STAT_ADD(q, polled, 1);
	return found;
}

static void *blk_queue_thread(void *arg)
{
	struct blk_queue *q = arg;
	struct io_uring_sqe *sqe;

	/* IORING_SETUP_R_DISABLED + SINGLE_ISSUER: this thread becomes the
	 * ring's only submitter. Without those flags this is a no-op error. */
	if (q->ring.flags & IORING_SETUP_R_DISABLED)
		/* liburing 2.3 declares io_uring_enable_rings but does not export it. */
		syscall(__NR_io_uring_register, q->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS,
			NULL, 0);

	sqe = get_sqe(q);
	io_uring_prep_read(sqe, q->stop_fd, &q->stop_buf, sizeof(q->stop_buf), 0);
	io_uring_sqe_set_data64(sqe, UD(TAG_STOP, 0));
	arm_kick(q, false);

	for (;;) {
		reap(q);
		if (q->stopping)
			break;
		/* Buffers made available before DRIVER_OK, or since the last
		 * drain, are picked up here whether or not a kick came. */
		drain(q);
		publish(q);
		if (!q->more && poll_ring(q))
			continue;
		if (q->more || io_uring_cq_ready(&q->ring)) {
			if (io_uring_sq_ready(&q->ring)) {
				io_uring_submit(&q->ring);
				STAT_ADD(q, enters, 1);
			}
			continue;
		}
		io_uring_submit_and_wait(&q->ring, 1);
		STAT_ADD(q, enters, 1);
	}

	/* Stop: cancel what can be cancelled (the kick read, I/O not yet
	 * started) and wait for the rest; nothing reaches the guest any more
	 * (finish/slot_done check stopping). */
	sqe = get_sqe(q);
	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
	io_uring_sqe_set_data64(sqe, UD(TAG_CANCEL, 0));
	while (q->inflight || q->kick_pending) {
		struct io_uring_cqe *cqe;
		if (io_uring_submit_and_wait(&q->ring, 1) < 0 &&
		    io_uring_peek_cqe(&q->ring, &cqe) != 0)
			break;   /* ring unusable: exit tears everything down */
		reap(q);
	}
	return NULL;
}

int blk_queue_start(struct blk_dev *blk, unsigned qi)
{
	struct blk_queue *q = &blk->queues[qi];
	struct virtio_dev *dev = &blk->vdev;
	struct io_uring_params p;
	unsigned entries;
	int fds[2], nfds, r;

	q->blk = blk;
	q->idx = qi;
	q->vq = &dev->queues[qi].vq;
	q->kick_fd = dev->queues[qi].kick_fd;
	q->nslots = q->vq->size;
	q->inflight = q->pushed = 0;
	q->kick_pending = q->broken = q->more = q->stopping = false;
	q->ctx.capacity = blk->capacity;
	q->ctx.ro = blk->img.ro;
	q->ctx.discard = virtio_has_feature(dev, VIRTIO_BLK_F_DISCARD);
	q->ctx.write_zeroes = virtio_has_feature(dev, VIRTIO_BLK_F_WRITE_ZEROES);
	q->ctx.serial = blk->opts.serial;

	q->slots = calloc(q->nslots, sizeof(*q->slots));
	if (!q->slots)
		return -ENOMEM;
	q->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (q->stop_fd < 0) {
		r = -errno;
		goto free_slots;
	}

	/* Room for one SQE per slot plus stop, kick and cancel. */
	for (entries = 8; entries < q->nslots + 4; entries <<= 1)
		;
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_R_DISABLED | IORING_SETUP_SUBMIT_ALL |
		  IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	p.cq_entries = entries * 2;
	r = io_uring_queue_init_params(entries, &q->ring, &p);
	if (r == -EINVAL) {
		/* Older kernel (< 6.1): plain ring, the thread submits anyway. */
		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_CQSIZE;
		p.cq_entries = entries * 2;
		r = io_uring_queue_init_params(entries, &q->ring, &p);
	}
	if (r < 0)
		goto close_stop;
	fds[0] = blk->img.fd;
	fds[1] = blk->img.fd_buffered;
	nfds = fds[1] >= 0 ? 2 : 1;
	r = io_uring_register_files(&q->ring, fds, nfds);
	if (r < 0)
		goto exit_ring;

	r = -pthread_create(&q->thread, NULL, blk_queue_thread, q);
	if (r)
		goto exit_ring;
	q->thread_started = true;
	/* Named here, not in the thread, so it is visible once we return. */
	{
		char name[16];
		snprintf(name, sizeof(name), "mvm-blk-q%u", qi);
		pthread_setname_np(q->thread, name);
	}
	return 0;

exit_ring:
	io_uring_queue_exit(&q->ring);
close_stop:
	close(q->stop_fd);
free_slots:
	free(q->slots);
	q->slots = NULL;
	return r;
}

void blk_queue_stop(struct blk_dev *blk, unsigned qi)
{
	struct blk_queue *q = &blk->queues[qi];
	uint64_t one = 1;

	if (!q->thread_started)
		return;
	/* Pairs with the thread's read of stop_fd in its ring. */
	if (write(q->stop_fd, &one, sizeof(one)) != sizeof(one))
		abort();        /* a fresh blocking eventfd cannot refuse 1 */
	pthread_join(q->thread, NULL);
	q->thread_started = false;
	/* Drop the ring's references to the image now: a ring's teardown
	 * releases registered files asynchronously (after close, even after
	 * process exit), which would hold the image's OFD lock past our
	 * exit and make an immediate restart on the same image fail. */
	io_uring_unregister_files(&q->ring);
	io_uring_queue_exit(&q->ring);
	close(q->stop_fd);
	free(q->slots);
	q->slots = NULL;
}
