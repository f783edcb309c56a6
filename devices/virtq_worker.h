/* The generic per-queue worker: one thread, one io_uring, one or more
 * virtqueues, for any virtio device whose data path is "take a chain, maybe
 * do host I/O, give the chain back".
 *
 * Its life follows the VM's, not the driver's:
 *  - vqw_init and vqw_set_io, when the device is made (mvm_prepare, while
 *    the process has one thread): the ring, created disabled, its files
 *    and its restrictions registered. Nothing later creates a ring; the
 *    only later register call is the thread's own replacement of the
 *    device's files (vqw_set_files: a disk's image swapped or plugged).
 *  - vqw_launch, before any vCPU runs (mvm_start): the thread, which
 *    enables the ring (its only submitter from then on), registers guest
 *    RAM as fixed buffers where asked, enters its seccomp filter and
 *    waits, parked.
 *  - vqw_start / vqw_stop, at each DRIVER_OK and reset: the parked thread
 *    is told to serve the queues the driver enabled, and later to stop
 *    serving them (cancel, drain with a deadline, never touch guest
 *    memory again) and park. The ring, the thread and the counters stay.
 *  - vqw_end, at the VM's stop: the thread ends; its counters stay for
 *    the statistics until vqw_fini frees everything with the device.
 *
 * The worker owns the thread and everything about waiting and batching:
 *  - the guest's kicks: a read of each queue's kick eventfd queued in the
 *    ring (with the EAGAIN -> poll fallback of kernels that do not wait on
 *    an O_NONBLOCK eventfd);
 *  - its owner's commands: a read of an eventfd of its own, queued in the
 *    ring too, so the thread sleeps in exactly one place, io_uring_enter;
 *  - per round: reap every CQE, drain each queue (bounded by its size,
 *    notifications off while draining, re-enabled and re-checked after),
 *    publish each queue's used entries at once with at most one interrupt;
 *  - adaptive polling of the avail rings after a round that found work
 *    (struct vqw_poll: the window grows while the guest's next request
 *    comes soon after, shrinks while it does not, and stops while the
 *    thread is being preempted: polling on an overcommitted CPU only takes
 *    it from whoever would post that request);
 *  - gathering after a kick (struct vqw_gather): a short sleep before the
 *    drain, while the guest goes on posting, where that has been seen to
 *    bring more requests per kick and per interrupt.
 * The device supplies a const ops table: "handle this chain" and "this
 * completion arrived" (with the 32 bits of user data it chose), and how
 * much host I/O it has in flight. A virtio-net-like device can serve its
 * RX and TX queues of a pair from one worker.
 *
 * Threads: everything here runs on the worker's thread, except
 * vqw_init/vqw_set_io/vqw_register_mem/vqw_launch/vqw_start/vqw_stop/
 * vqw_fini (the device's owner, one thread at a time) and the statistics
 * (any thread). */
#ifndef MVM_VIRTQ_WORKER_H
#define MVM_VIRTQ_WORKER_H

#include <liburing.h>
#include <pthread.h>
#include <sys/uio.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>

#include "devices/virtio.h"
#include "devices/virtq.h"
#include "vmm/base/util.h"

/* A worker may serve every queue of a device (--io-threads 1). */
#define VQW_MAX_QUEUES VIRTIO_MAX_QUEUES
/* The ring's registered files: the device's (a slot each, some of them
 * empty, for sockets the ring itself makes), then the worker's. */
#define VQW_MAX_DEVICE_FILES 8192
#define VQW_MAX_FILES (VQW_MAX_DEVICE_FILES + 1 + VQW_MAX_QUEUES)
enum { VQW_FILE_CTL, VQW_FILE_KICK0 };    /* after the device's files */
/* The longest a stop waits for host I/O that did not end when it was
 * cancelled; past it the stop goes on without (and says so), and the
 * device refuses to start the queues again until that I/O has ended. */
#define VQW_STOP_DEADLINE_NS 5000000000ull
/* vqw_retry_later's waits: VQW_RETRY_FIRST_NS, doubling per attempt up
 * to VQW_RETRY_MAX_NS. */
#define VQW_RETRY_FIRST_NS 50000u
#define VQW_RETRY_LEVELS 10              /* 50 us .. 25.6 ms */
/* What every ring is created with: disabled until its thread enables it
 * (restrictions first), that thread its only submitter, completions run
 * when it waits, and flagged in the ring (IORING_SQ_TASKRUN) while they
 * wait for it, so that a poll sees them without a system call. Linux 6.1. */
#define VQW_RING_FLAGS (IORING_SETUP_CQSIZE | IORING_SETUP_R_DISABLED | \
			IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | \
			IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG)

struct vqw;
struct vqw_queue;

/* Counters of one queue: single writer (the worker), read at any time. */
struct vqw_stats {
	uint64_t requests;         /* chains popped */
	uint64_t batches;          /* publishes of >= 1 used entry */
	uint64_t enters;           /* io_uring_enter calls (the worker's, on its first queue) */
	uint64_t irqs;             /* interrupts signalled */
	uint64_t polled;           /* rounds where polling found work */
	uint64_t kicks;            /* notifications: the guest's, plus one at start */
	uint64_t preempted;        /* polls cut short: the thread lost its CPU */
	uint64_t gathers;          /* kicks after which the worker waited for more */
	uint64_t gathered;         /* buffers that came during those waits */
	uint64_t fixed;            /* device I/O on registered buffers (vqw_fixed_index) */
	uint64_t retries;          /* host I/O retried later (vqw_retry_later) */
	/* The ring as the thread left it when it last stopped serving the
	 * queue (a stalled queue's state at exit). */
	bool ring_valid;
	struct virtq_ring_state ring;
};

/* The adaptive polling window of one worker (like QEMU's poll-grow /
 * poll-shrink, plus a stop on preemption). Pure logic, for unit tests.
 * A device's poll= allows at most VQW_POLL_US_MAX. */
#define VQW_POLL_US_MAX 1000u
#define VQW_POLL_START_NS 4000u          /* first window after a quick wake-up */
#define VQW_POLL_GAP_NS 20000u           /* a gap this long in the poll loop: preempted? */
#define VQW_POLL_STOLEN_NS 500000u       /* a gap this long: preempted, switch or not, */
#define VQW_POLL_DISTRUST_NS 100000000u  /* and for 100 ms after it, every gap is */
#define VQW_POLL_BACKOFF_MIN_NS 1000000u /* no polling for 1 ms after a preemption, */
#define VQW_POLL_BACKOFF_MAX_NS 1000000000u   /* doubling while it recurs, up to 1 s */
struct vqw_poll {
	uint32_t max_ns;           /* the disk's poll=USEC; 0: never poll */
	uint32_t win_ns;           /* current window, 0..max_ns */
	uint32_t backoff_ns;
	uint64_t off_until_ns;     /* no polling before this (CLOCK_MONOTONIC) */
	long nivcsw;               /* the thread's involuntary switches at the last gap; -1: none yet */
	uint64_t distrust_until_ns;/* a slice was stolen: until then every gap counts */
};
void vqw_poll_init(struct vqw_poll *p, unsigned max_us);
/* How long to poll now (0: do not). */
uint32_t vqw_poll_window(const struct vqw_poll *p, uint64_t now_ns);
/* After a round with work the thread slept (it did not poll, or its poll
 * found nothing) and was woken after slept_ns: a wake-up within max_ns
 * grows the window (polling would have caught it), a longer sleep shrinks
 * it. */
void vqw_poll_slept(struct vqw_poll *p, uint64_t slept_ns, uint64_t now_ns);
/* A poll ran its window (or found work) without losing the CPU. */
void vqw_poll_ran(struct vqw_poll *p);
/* A poll lost the CPU: the host is overcommitted; stop polling for a while. */
void vqw_poll_preempted(struct vqw_poll *p, uint64_t now_ns);
/* The poll loop saw a gap of gap_ns (VQW_POLL_GAP_NS or more between two
 * looks at the clock). nivcsw: the thread's involuntary context switches
 * now (getrusage(RUSAGE_THREAD)), -1 when unknown. It lost its CPU, and
 * the result is true (vqw_poll_preempted), where
 *  - the count moved since the last gap, or cannot be told: another task
 *    of this host took the CPU;
 *  - or the gap lasted VQW_POLL_STOLEN_NS or more, switch or not: on a
 *    host that is itself a VM, the hypervisor gave this vCPU's time to
 *    someone else for a scheduler slice (an overcommitted hypervisor, where
 *    polling costs another vCPU, perhaps the guest's, its time);
 *  - or such a slice was stolen less than VQW_POLL_DISTRUST_NS ago: under
 *    an overcommitted hypervisor short gaps are its doing too.
 * Otherwise a short gap without a switch was an interrupt or a brief exit
 * to the hypervisor: polling takes the CPU from no one, so it goes on
 * (false): on a host that is a VM such short gaps come often even when
 * idle, and taking each for a preemption would switch polling off most
 * of the time (docs/benchmarks.md has the measurements). */
bool vqw_poll_gap(struct vqw_poll *p, uint64_t gap_ns, long nivcsw, uint64_t now_ns);

/* Gathering after a kick: the guest's notification wakes the worker, which
 * then sleeps a short slice, notifications off, while the guest goes on
 * posting, and drains what came as one batch: one interrupt (and for the
 * guest one kick) for many requests where each would otherwise take its
 * own. It pays where the guest posts more slowly than the host completes
 * (a slow or overcommitted guest at a high queue depth), and only costs
 * latency where the guest waits for each completion (queue depth 1), so
 * it adapts: the slice follows the time between arrivals, and a gather
 * that brings nothing shrinks it to off; then an occasional probe (one
 * slice of the disk's gather=, at growing intervals) looks again. Pure
 * logic, for unit tests. */
#define VQW_GATHER_MIN_NS 2000u          /* the shortest slice */
#define VQW_GATHER_PROBE_MIN 16u         /* kick wake-ups between probes, at first, */
#define VQW_GATHER_PROBE_MAX 4096u       /* doubling while probes fail */
#define VQW_GATHER_SLICES 8u             /* slices per gather, at most */
#define VQW_GATHER_FAILS 3u              /* empty longest slices in a row: off */
struct vqw_gather {
	uint32_t max_ns;           /* the disk's gather=USEC; 0: never gather */
	uint32_t slice_ns;         /* the current slice; 0: off, probing */
	uint32_t probe_every;      /* wake-ups between probes while off */
	uint32_t probe_in;         /* wake-ups left until the next probe */
	uint32_t fails;            /* empty longest slices in a row while on */
};
void vqw_gather_init(struct vqw_gather *g, unsigned max_us);
/* A kick woke the worker and found work: the first slice to sleep before
 * draining (0: drain now). Counts a wake-up towards the next probe. */
uint32_t vqw_gather_begin(struct vqw_gather *g);
/* The gather that began with slice_ns ended; its first slice brought
 * first_new buffers. None: the guest was waiting for us, so a longer
 * slice is tried up to gather=, where VQW_GATHER_FAILS in a row (or one
 * failed probe) turn gathering off until the next probe. Some: the next
 * slice is sized to bring about two (twice the mean time between them). */
void vqw_gather_end(struct vqw_gather *g, uint32_t slice_ns, unsigned first_new);

/* Guest RAM registered with a worker's ring (IORING_REGISTER_BUFFERS), so
 * that a read or write into it (READ_FIXED / WRITE_FIXED) skips pinning
 * and mapping its pages for every request: with O_DIRECT that is most of
 * what the kernel does per request; through the page cache it changes
 * nothing. The kernel takes at most 1 GiB per buffer, so RAM is split into
 * chunks. Registering pins the whole of guest RAM (faulted in, neither
 * swapped nor merged) for as long as the ring lives: an opt-in. */
#define VQW_FIXED_CHUNK (1ULL << 30)
#define VQW_FIXED_MAX 1024         /* chunks: mvm's most guest RAM, below 1 TiB */
/* Guest RAM's regions cut into chunks of at most VQW_FIXED_CHUNK, region
 * by region, in out (at most max): chunk k of a region is buffer k after
 * the chunks of the regions before it. The count, or -E2BIG (out then
 * holds a part). Pure logic. */
int vqw_fixed_layout(const struct guest_mem *gm, struct iovec *out, unsigned max);
/* The buffer of that layout holding all of [p, p+len), or -1 (outside
 * guest RAM, or across a chunk's end: such I/O goes without). Pure. */
int vqw_fixed_find(const struct guest_mem *gm, const void *p, size_t len);

struct vqw_ops {
	const char *name;          /* for messages: "virtio-blk" */
	/* A chain popped from q: complete it now (vqw_push) or start host I/O
	 * (vqw_get_sqe, vqw_sqe_set_data) and vqw_push when it completes. */
	void (*chain)(struct vqw_queue *q, struct virtq_chain *c);
	/* The completion of an SQE the device tagged with data. */
	void (*complete)(struct vqw_queue *q, uint32_t data, int res);
	/* Host I/O of q still in flight: at stop, the worker waits for 0. */
	unsigned (*inflight)(const struct vqw_queue *q);
	/* Optional: vqw_register_mem's registration failed (-errno) on the
	 * worker's thread; the worker goes on without (q: its first queue). */
	void (*fixed_failed)(struct vqw_queue *q, int err);
	/* Optional: the wait of vqw_retry_later(q, data) or of
	 * vqw_wait_until(q, data, ...) is over (or was cancelled by a stop:
	 * vqw_stopping then says so). */
	void (*retry)(struct vqw_queue *q, uint32_t data);
	/* Optional: vqw_poke woke the worker (settings the device shares
	 * with other threads changed: its rate limits), or a quiesce ended
	 * (vqw_quiesce): called for each queue it serves, on the worker's
	 * thread, never while stopping. */
	void (*poked)(struct vqw_queue *q);
	/* Optional: whether q is quiet, for vqw_quiesce: none of its host
	 * I/O is still to touch guest memory or the ring. NULL: when
	 * ops->inflight is 0. A device whose host I/O only fills buffers of
	 * its own (virtio-vsock's sockets) or that holds a request back
	 * while quiesced (virtio-blk's rate-limit wait) says so here. */
	bool (*quiet)(const struct vqw_queue *q);
	/* For a queue the device pulls from (vqw_set_pull): it asked for
	 * buffers (vqw_want) and the guest has made some available: take
	 * them with vqw_pull. */
	void (*avail)(struct vqw_queue *q);
	/* Optional, on the worker's thread, q its first queue: it has begun
	 * serving (a driver's DRIVER_OK), and the device may start host I/O
	 * of its own that no chain asked for (a listening socket's accept);
	 * and it is about to stop serving (a reset, the VM's stop), before
	 * the stop's cancel, so that the device can let go of what must not
	 * outlive the driver (its connections' sockets) with SQEs of its
	 * own; the stop waits for those like any other (ops->inflight). */
	void (*serve_begin)(struct vqw_queue *q);
	void (*serve_end)(struct vqw_queue *q);
	/* Whether the adaptive poll (poll_us) also waits for the device's
	 * host I/O: it then polls while host I/O is in flight, and a
	 * completion ends it as a guest buffer does (virtio-vsock, whose
	 * next work is as often a host socket's answer as the guest's next
	 * packet). Without, it polls only with no host I/O in flight
	 * (virtio-blk: a request's completion follows its own wake-up). */
	bool poll_io;
	/* Whether the device's host I/O often completes as it is submitted
	 * (a send into a socket with room): each round then submits before
	 * it publishes and takes those completions, so that what they owe
	 * the guest (virtio-vsock's credit update once its send is out)
	 * shares the round's interrupt with the chains it answered, and the
	 * host sees the data before the guest's interrupt is sent. Without,
	 * a round publishes first and submits as it goes to sleep (a disk's
	 * I/O never completes at submission: the extra system call would
	 * buy nothing). */
	bool settle_io;
};

/* One virtqueue served by a worker. */
struct vqw_queue {
	struct vqw *w;
	struct virtio_dev *dev;
	unsigned idx;              /* the queue's index in dev */
	struct virtq *vq;
	int kick_fd;
	void *opaque;              /* the device's per-queue state */
	/* worker-private */
	bool active;               /* served in this run (vqw_start's mask) */
	uint64_t kick_buf;
	bool kick_pending;         /* a kick read/poll is outstanding */
	bool broken;               /* the guest broke the ring: stop consuming */
	bool more;                 /* drain stopped at its budget: come back */
	bool held;                 /* the device asked for a pause (vqw_hold) */
	bool pull;                 /* the device pulls its chains (vqw_set_pull) */
	bool want;                 /* pull: the device waits for buffers (vqw_want) */
	unsigned pushed;           /* used entries not yet published */
	/* Counters; ring and ring_valid under ring_seq (a seqcount: odd
	 * while the worker writes them). */
	struct vqw_stats st;
	unsigned ring_seq;
	struct __kernel_timespec wake_at;   /* vqw_wait_until's, until submitted */
};

enum vqw_cmd { VQW_CMD_NONE, VQW_CMD_RUN, VQW_CMD_PARK, VQW_CMD_EXIT };
/* The most device files vqw_set_files replaces at once. */
#define VQW_SET_FILES_MAX 4

struct vqw {
	const struct vqw_ops *ops;
	struct virtio_dev *dev;
	struct vqw_queue *q;       /* nq entries */
	unsigned nq;
	struct virtq_chain chain;  /* scratch for virtq_pop (worker thread) */
	struct virtq_chain pulled; /* vqw_pull's: apart, so that a device may pull
				    * while it handles a chain of another queue */
	struct vqw_poll poll;      /* adaptive polling window */
	unsigned poll_us, gather_us;
	bool poll_armed;           /* this sleep follows a round with work: time it */
	struct vqw_gather gather;  /* adaptive wait for more after a kick */
	bool kicked;               /* this round reaped a guest notification */
	struct io_uring ring;
	bool ring_ok;
	/* Commands from the owner: ctl_word holds the latest command and a
	 * sequence number (seq << 8 | enum vqw_cmd), stored with release,
	 * then ctl_fd is written; the worker loads it with acquire after the
	 * read of ctl_fd completes, and carries out each number once (two
	 * commands sent before it looked: only the later). run_mask, the
	 * queues a RUN serves, is written before the store. `parked` is
	 * posted once per PARK the worker carried out. */
	int ctl_fd;
	uint64_t ctl_buf;
	bool ctl_pending;          /* the ctl read is in the ring (worker) */
	bool ctl_event;            /* it completed: a command may wait (worker) */
	unsigned ctl_seen;         /* the last command carried out (worker) */
	unsigned ctl_word;
	unsigned ctl_next;         /* owner: the next sequence number */
	bool poked;                /* vqw_poke: any thread sets it, the worker clears it */
	/* vqw_quiesce: the owner stores quiesce_word (seq << 1 | on) with
	 * release and rings ctl_fd; the worker, once it carried out that
	 * number and (for on) its queues are quiet, stores the number in
	 * quiet_seq with release and posts quiet_sem. */
	unsigned quiesce_word;
	unsigned quiet_seq;
	sem_t quiet_sem;
	unsigned quiesce_next;     /* owner: the next number */
	bool quiesced;             /* worker: takes no buffers (takes(), vqw_pull) */
	bool quiet_owed;           /* worker: quiesced, quiet_seq not yet stored */
	unsigned quiesce_seen;     /* worker: the last number carried out */
	/* vqw_set_files: the owner fills files_new and files_n, stores
	 * files_word (a sequence number) with release and rings ctl_fd; the
	 * worker, the ring's only registrant once it enabled it (single
	 * issuer), replaces the files, stores files_res, then the number in
	 * files_done with release, and posts files_sem. */
	int files_new[VQW_SET_FILES_MAX];
	unsigned files_n;
	unsigned files_word;
	unsigned files_done;
	int files_res;
	sem_t files_sem;
	unsigned files_next;       /* owner: the next number */
	unsigned files_seen;       /* worker: the last number carried out */
	bool files_settable;       /* vqw_allow_set_files, before vqw_set_io */
	uint64_t run_mask;
	struct thread_handshake hs;
	sem_t parked;
	/* worker-private */
	bool serving;              /* between a RUN and the end of its stop */
	bool stopping;             /* nothing reaches the guest: stop or parked */
	bool worked;               /* the last round popped something */
	unsigned file_base;        /* the worker's first registered file */
	const struct guest_mem *fixed_want;  /* to register (vqw_register_mem), or NULL */
	const struct guest_mem *fixed;   /* registered as buffers, or NULL (thread-owned) */
	bool io_set;               /* vqw_set_io ran: files and restrictions */
	/* owner-private */
	pthread_t thread;
	bool launched;
	bool running;              /* a RUN was sent and not yet stopped */
	bool stop_sent;            /* vqw_stop_begin sent PARK */
	bool lost;                 /* its end was not seen in time: not freed */
	char thread_name[16];
	struct vqw *dev_next;      /* the device's next worker (dev->vqws) */
};

/* Set up the worker for the queues of dev listed in idx (1..VQW_MAX_QUEUES),
 * each with its opaque state, and a disabled ring with room for
 * sqes_per_queue device SQEs per queue (VQW_RING_FLAGS: -EINVAL before
 * Linux 6.1). While the process has one thread (the device's creation).
 * The thread enters the queue thread's seccomp filter when dev->sandbox
 * is set at vqw_launch. 0 or -errno. */
int vqw_init(struct vqw *w, const struct vqw_ops *ops, struct virtio_dev *dev,
	     const unsigned *idx, void *const *opaque, unsigned nq, unsigned sqes_per_queue,
	     unsigned poll_us, unsigned gather_us, const char *thread_name);
/* The device's host I/O, once, after vqw_init: the files its SQEs name
 * (as registered-file indexes 0..nfiles-1, nfiles <= VQW_MAX_DEVICE_FILES)
 * and the IORING_OP_* it uses (a bit each). An entry of -1 is an empty
 * slot: for a socket the ring makes at run time (IORING_OP_SOCKET or
 * IORING_OP_ACCEPT into that slot), which never enters the process's file
 * table, so the thread's filter need not allow socket(2) or accept4(2);
 * a new socket in a slot releases the one that was there (IORING_OP_CLOSE
 * cannot close a slot: it refuses IOSQE_FIXED_FILE, which the ring
 * requires). The ring refuses every other opcode, any SQE on an
 * unregistered file and every register call but the two its thread makes
 * as it ends; vqw_launch calls it (no files, no opcodes) where the device
 * did not. 0 or -errno. */
int vqw_set_io(struct vqw *w, const int *files, unsigned nfiles, uint64_t sqe_ops);
/* Let vqw_set_files replace the device's files while the worker runs:
 * the ring's restrictions then allow IORING_REGISTER_FILES_UPDATE too,
 * which installs a descriptor the process holds already (it opens
 * nothing). Before vqw_set_io. */
void vqw_allow_set_files(struct vqw *w);
/* Make queue qi (an index in w->q) one the device pulls from: the worker
 * pops none of its chains itself. A device that fills buffers only when it
 * has something to put there (virtio-vsock's and virtio-net's receive
 * queues) says so with vqw_want; once the guest has made buffers
 * available the worker calls ops->avail, which takes them (vqw_pull).
 * Until the device wants buffers the guest's kicks on the queue are
 * suppressed. Before vqw_launch; 0 or -EINVAL (no ops->avail, no such
 * queue, too late). */
int vqw_set_pull(struct vqw *w, unsigned qi);
/* Have the thread register gm's RAM with the ring as fixed buffers (see
 * VQW_FIXED_CHUNK) as it starts (vqw_launch), before its filter: the
 * device then issues READ_FIXED / WRITE_FIXED where vqw_fixed_index finds
 * a buffer (it declares both in vqw_set_io). Once, before vqw_set_io.
 * Registering populates and pins all of guest RAM, on the worker's
 * thread, while the guest boots. Where it fails (-ENOMEM: the pages
 * exceed RLIMIT_MEMLOCK without CAP_IPC_LOCK; -E2BIG: beyond
 * VQW_FIXED_MAX chunks) ops->fixed_failed says so and the worker goes on
 * without. 0 or -EINVAL (called twice, or too late). */
int vqw_register_mem(struct vqw *w, const struct guest_mem *gm);
/* Whether this host's io_uring can give workers their rings: 0, or the
 * -errno of creating one (-EINVAL: Linux older than 6.1; -EPERM: io_uring
 * disabled by sysctl). */
int vqw_probe(void);
/* Start the thread, parked, and wait until it has enabled its ring,
 * registered what vqw_register_mem asked for and entered its filter.
 * Before any vCPU runs. 0 or -errno (the thread has ended then). */
int vqw_launch(struct vqw *w);
/* DRIVER_OK: serve the queues whose bit (index in w->q) is set in mask,
 * whose rings the driver enabled (the transport owns them no more). Returns
 * at once; the thread picks every queue up with one kick of its own. */
void vqw_start(struct vqw *w, uint64_t mask);
/* Ask the thread to stop serving and return at once: it cancels what it
 * can and waits for the rest of its host I/O on its own, at most
 * VQW_STOP_DEADLINE_NS. For a device with several workers: tell them
 * all, then vqw_stop each, and they wind down side by side. Once per
 * start; vqw_stop does it where nobody did. */
void vqw_stop_begin(struct vqw *w);
/* Stop serving: after it returns nothing of the worker's touches guest
 * memory (but host I/O that outlived the deadline, which the worker
 * reported). The thread stays, parked. */
void vqw_stop(struct vqw *w);
/* Pause the worker's side of the guest (on) or let it go on (off), from
 * the owner's thread, and return at once: while quiesced the worker
 * takes no buffer from any of its queues (what the guest posts waits in
 * the rings, its kicks are counted) and the device pulls none; host I/O
 * in flight completes and its chains are published. A quiesce ends with
 * ops->poked on each served queue, then the worker drains the rings as
 * usual. Independent of start and stop: a worker may be quiesced while
 * parked, and a stop while quiesced stops as ever. */
void vqw_quiesce(struct vqw *w, bool on);
/* Wait until the worker has carried out the last vqw_quiesce and, for
 * on, every queue is quiet (ops->quiet): 0, or -ETIMEDOUT at deadline_ns
 * (CLOCK_MONOTONIC). 0 at once for a worker with no thread. */
int vqw_quiesce_wait(struct vqw *w, uint64_t deadline_ns);
/* Whether the worker is quiesced now: for the device, on its thread (a
 * wait that ends while quiesced must not start I/O). */
static inline bool vqw_quiesced(const struct vqw_queue *q)
{
	return q->w->quiesced;
}
/* Replace the device's files 0..n-1 (n <= VQW_SET_FILES_MAX; -1 empties
 * a slot) on the worker's ring, for a device that asked for it
 * (vqw_allow_set_files): a disk's image swapped under the guest. The
 * worker's thread makes the register call (it alone may, once it enabled
 * the ring); the owner has quiesced it (vqw_quiesce_wait returned 0), so
 * no host I/O is in flight on the old files, and keeps the vCPUs from the
 * transport meanwhile (the VM is paused). Nothing is stopped or reset:
 * the queues, the device's waits and the counters go on. The ring takes
 * its own references; the caller keeps its descriptors open until this
 * returns (after -ETIMEDOUT, for good: the thread may still make the call
 * later). 0 or -errno; -ETIMEDOUT at deadline_ns. */
int vqw_set_files(struct vqw *w, const int *files, unsigned n, uint64_t deadline_ns);
/* End the thread (stopping first): the ring's files and buffers are
 * dropped by the thread as it ends; the counters stay readable. */
void vqw_end(struct vqw *w);
/* vqw_end where needed, then free the ring and the counters. */
void vqw_fini(struct vqw *w);

/* For the device, on the worker's thread: */
struct io_uring_sqe *vqw_get_sqe(struct vqw *w);
/* Tag sqe with the device's 32 bits for q: ops->complete gets them back.
 * Marks it IOSQE_FIXED_FILE: its fd is an index into vqw_set_io's files. */
void vqw_sqe_set_data(struct io_uring_sqe *sqe, const struct vqw_queue *q, uint32_t data);
/* The registered buffer holding all of [p, p+len) for READ_FIXED /
 * WRITE_FIXED (and counts it in the queue's `fixed`), or -1: none
 * registered, or the range is not inside one. Inline: with fixed-buffers
 * off (the default) a request pays one test, not a call. */
static inline int vqw_fixed_index(struct vqw_queue *q, const void *p, size_t len)
{
	int i;

	if (!q->w->fixed)
		return -1;
	i = vqw_fixed_find(q->w->fixed, p, len);
	/* Single writer (this thread); statistics read it at any time. */
	if (i >= 0)
		__atomic_store_n(&q->st.fixed, q->st.fixed + 1, __ATOMIC_RELAXED);
	return i;
}
/* Hand chain head back to the guest with used_len (published at the end
 * of the round). Ignored while stopping: the ring is being reset. */
void vqw_push(struct vqw_queue *q, uint16_t head, uint32_t used_len);
/* Whether results for q must no longer reach the guest: a stop is under
 * way, or q is not served now (its driver reset it). The device then
 * writes nothing to guest memory, status bytes included. */
static inline bool vqw_stopping(const struct vqw_queue *q)
{
	return q->w->stopping || !q->active;
}
/* Call ops->retry(q, data) after a wait that grows with attempt (0, 1,
 * ...: VQW_RETRY_FIRST_NS doubling, at most VQW_RETRY_LEVELS steps): for
 * host I/O that failed for now (-EAGAIN) and is worth trying again
 * without spinning. A stop cancels the wait (ops->retry still comes). */
void vqw_retry_later(struct vqw_queue *q, uint32_t data, unsigned attempt);
/* Call ops->retry(q, data) at when_ns (CLOCK_MONOTONIC, mono_ns), or at
 * once where that has passed: a wait of exactly the length the device
 * computed (a rate limit's), in the same io_uring_enter as everything
 * else. A stop cancels it (ops->retry still comes). */
void vqw_wait_until(struct vqw_queue *q, uint32_t data, uint64_t when_ns);
/* From any thread, while the worker exists (vqw_init to vqw_fini): wake
 * it and have it call ops->poked for each queue it serves. Pokes that
 * come before it looks are one. */
void vqw_poke(struct vqw *w);
/* A pull queue's next chain, for the device on the worker's thread: 1
 * (*out points at it until the next vqw_pull), 0 (none now: vqw_want to
 * hear of more; or the queue is not served), or the guest broke the ring
 * (-errno; the device is in NEEDS_RESET). */
int vqw_pull(struct vqw_queue *q, struct virtq_chain **out);
/* The device has something for a pull queue and found no buffer: call
 * ops->avail once the guest makes some available. Worker thread. */
static inline void vqw_want(struct vqw_queue *q)
{
	q->want = true;
}
/* Stop draining q (hold) or let it drain again (release): for a device
 * whose host resources for the queue are used up (bytes in flight), so
 * that what the guest posts waits in the ring. A hold from ops->chain
 * takes effect at once: that chain is the last one popped. */
static inline void vqw_hold(struct vqw_queue *q, bool hold)
{
	q->held = hold;
}
/* The guest broke the ring (or the device found a chain it cannot track):
 * stop consuming q and put the device in NEEDS_RESET. */
void vqw_broken(struct vqw_queue *q, const char *why);

/* Counters, any thread. */
void vqw_get_stats(const struct vqw_queue *q, struct vqw_stats *out);
/* Every queue's counters back to zero, from the owner, the worker parked
 * (nothing of the guest's reaches it: a hot-plug slot's spare disk given
 * a new image). */
void vqw_clear_stats(struct vqw *w);

#endif
