/* virtio-vsock device model (virtio 1.2 §5.10) on the generic queue
 * worker. See devices/virtio_vsock.h and docs/vsock.md.
 *
 * Ownership: everything below `worker-owned` in struct vsock_dev (the
 * protocol core, the slots, the staging buffers) belongs to the worker's
 * thread from vqw_launch to vqw_end; the owner touches it only before
 * launch and after the end. Counters are single-writer, read at any time
 * with relaxed atomics. */
#include "devices/virtio_vsock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "devices/iov.h"
#include "devices/virtio_transport.h"
#include "devices/virtq_worker.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/json.h"
#include "vmm/base/log.h"
#include "vmm/base/util.h"

enum { VSD_RX, VSD_TX, VSD_EVENT, VSD_NQ };

#define NONE UINT32_MAX
#define SLOT_LISTEN 0u             /* the listening socket's file index */

/* What an SQE was for: 4 bits of its 32 bits of user data, then the slot
 * (13 bits: VSOCK_CONNS_MAX + VSOCK_HANDSHAKES + 1 fit) and the slot's
 * generation (15 bits), so that a completion finds its slot. */
enum vsd_op {
	OP_ACCEPT = 1,             /* a host client, into a handshake slot */
	OP_LINE,                   /* one byte of its CONNECT line */
	OP_SOCKET,                 /* a guest connect's socket */
	OP_CONNECT,                /* ... connected to PATH_port */
	OP_RECV,                   /* host data for the guest, into the stage */
	OP_SEND_OK,                /* "OK <port>\n" to a host client */
	OP_SEND,                   /* the guest's bytes to the host socket */
	OP_SHUT,                   /* shutdown(SHUT_WR): the guest sends no more */
	OP_CANCEL,                 /* a closing slot's I/O cancelled */
	OP_CLOSE,                  /* a fresh socket in its place: the old one closes */
	OP_TIMER,                  /* the next deadline (slot 0) */
	OP_END,                    /* shutdown(SHUT_RDWR) of a closing slot's socket */
};
#define TAG(op, slot, gen) (((uint32_t)(op) << 28) | ((uint32_t)(slot) << 15) | ((gen) & 0x7fffu))
#define TAG_OP(t) ((t) >> 28)
#define TAG_SLOT(t) (((t) >> 15) & 0x1fffu)
#define TAG_GEN(t) ((t) & 0x7fffu)

/* Retry data (vqw_retry_later): the accept, after a failure other than
 * a cancel. */
#define RETRY_ACCEPT 1u

enum vsd_kind { SLOT_FREE, SLOT_HANDSHAKE, SLOT_CONN };

/* A connection's stage: two packets' worth. A RECV is issued while at
 * least VSD_RECV_MIN bytes of it are free in one piece (or all of it). */
#define VSD_STAGE (2 * VSOCK_MAX_PKT)
#define VSD_RECV_MIN 4096u

/* One file slot of the worker's ring and what the device keeps for the
 * socket in it. */
struct vsd_slot {
	enum vsd_kind kind;
	uint16_t gen;              /* bumped each time it is freed */
	bool closing;              /* cancel + fresh socket issued: free once io is 0 */
	bool recv_on, send_on;     /* a RECV / a SEND or SHUTDOWN in flight */
	bool shut_owed;            /* shutdown(SHUT_WR) once the sends are done */
	bool on_rx;                /* on the list of slots with data for the guest */
	unsigned io;               /* SQEs in flight naming it */
	struct vsock_conn *conn;   /* SLOT_CONN: the core's connection */
	uint32_t next;             /* free list, or the RX list */
	uint64_t deadline_ns;      /* SLOT_HANDSHAKE: its line by then */
	/* A handshake's line as it comes, then the "OK <port>\n" to send. */
	char line[VSOCK_LINE_MAX];
	unsigned line_len, ok_off, ok_len;
	/* Host data read for the guest, not all of it sent yet: a circular
	 * buffer of VSD_STAGE bytes, stage_len of them from stage_off on. A
	 * RECV fills the space after them while the guest is sent what is
	 * there, so reading the socket and filling RX buffers overlap. The
	 * slot's own part of the device's reserved stages; stage_touched:
	 * a RECV wrote there, pages to give back when the slot is freed. */
	uint8_t *stage;
	uint32_t stage_len, stage_off;
	bool stage_touched;
	bool eof_owed;             /* the host's end came after staged bytes */
	struct sockaddr_un addr;   /* a guest connect's target (CONNECT reads it) */
};

struct vsock_dev {
	struct virtio_dev vdev;
	struct mvm_vsock opts;
	char path[VSOCK_PATH_MAX + 1];
	uint8_t config[8];         /* struct virtio_vsock_config: le64 guest_cid */
	int listen_fd;
	dev_t sock_dev;            /* the socket file we bound (removed at the end) */
	ino_t sock_ino;
	struct vqw w;
	bool w_up;
	struct vqw_queue *rxq, *txq, *evq;
	/* worker-owned */
	struct vsock v;
	struct vsd_slot *slots;
	uint8_t *stages;           /* nslots stages, reserved (pages_reserve) */
	unsigned nslots;
	uint32_t free_head;
	uint32_t rx_head, rx_tail; /* slots with staged data, served in turn */
	unsigned io;               /* SQEs in flight */
	unsigned handshakes;       /* slots in SLOT_HANDSHAKE */
	bool accept_on, timer_on;
	/* A restore made the device: the guest's connections are gone with
	 * the old process, so the event queue owes the guest a
	 * TRANSPORT_RESET (§5.10.6.7), sent once it has a buffer. Set by
	 * vsd_load before the queues start (their start's command orders
	 * it before the worker's reads). */
	bool reset_owed;
	bool connect_warned;       /* a guest connect failed other than for want of a listener */
	unsigned accept_fails;     /* in a row: the retry's wait grows */
	struct __kernel_timespec timer_ts;
	struct vsock_hdr ctl;      /* a control packet taken from the core, not yet sent */
	bool have_ctl;
	/* counters (worker writes, any thread reads) */
	uint64_t accepted, handshake_failed, host_errors, bad_rx;
};

#define STAT_ADD(d, f) __atomic_store_n(&(d)->f, (d)->f + 1, __ATOMIC_RELAXED)

/* Kinds of virtio_guest_warn beyond the core's (VIRTIO_GW_*, below 8):
 * each vsock_bad, then a bad RX buffer. */
#define VSD_GW_BAD(kind) (8u + (unsigned)(kind))
#define VSD_GW_RX (8u + VSOCK_BAD_KINDS)

static struct vsock_dev *to_vsd(const struct virtio_dev *dev)
{
	return dev->priv;
}

static unsigned slot_no(const struct vsock_dev *d, const struct vsd_slot *s)
{
	return (unsigned)(s - d->slots);
}

/* ---- slots ------------------------------------------------------------ */

static struct vsd_slot *slot_get(struct vsock_dev *d, enum vsd_kind kind)
{
	struct vsd_slot *s;

	if (d->free_head == NONE)
		return NULL;
	s = &d->slots[d->free_head];
	d->free_head = s->next;
	s->kind = kind;
	s->closing = s->recv_on = s->send_on = s->shut_owed = s->on_rx = false;
	s->io = 0;
	s->conn = NULL;
	s->next = NONE;
	s->line_len = s->ok_off = s->ok_len = 0;
	s->stage_len = s->stage_off = 0;
	s->eof_owed = false;
	s->deadline_ns = 0;
	if (kind == SLOT_HANDSHAKE)
		d->handshakes++;
	return s;
}

/* An SQE for slot s, counted in flight; sqe_tag after the prep (which
 * clears the SQE) names what it is for. */
static struct io_uring_sqe *sqe_for(struct vsock_dev *d, struct vsd_slot *s)
{
	d->io++;
	s->io++;
	return vqw_get_sqe(&d->w);
}

static void sqe_tag(struct vsock_dev *d, struct io_uring_sqe *sqe, struct vsd_slot *s,
		    enum vsd_op op)
{
	vqw_sqe_set_data(sqe, d->txq, TAG(op, slot_no(d, s), s->gen));
}

static void rx_remove(struct vsock_dev *d, struct vsd_slot *s)
{
	uint32_t *pp = &d->rx_head, prev = NONE, n = slot_no(d, s);

	if (!s->on_rx)
		return;
	while (*pp != n) {
		prev = *pp;
		pp = &d->slots[*pp].next;
	}
	*pp = s->next;
	if (d->rx_tail == n)
		d->rx_tail = prev;
	s->on_rx = false;
	s->next = NONE;
}

static void rx_add(struct vsock_dev *d, struct vsd_slot *s)
{
	uint32_t n = slot_no(d, s);

	if (s->on_rx || s->closing)
		return;
	s->on_rx = true;
	s->next = NONE;
	if (d->rx_tail == NONE)
		d->rx_head = n;
	else
		d->slots[d->rx_tail].next = n;
	d->rx_tail = n;
}

/* Let go of the slot's socket in two steps. First shutdown(SHUT_RDWR):
 * the peer sees its end now, and the slot's own I/O ends. Then (OP_END's
 * completion, slot_release) whatever is left cancelled and a fresh
 * unconnected socket installed in the slot, which drops the old one;
 * IORING_OP_CLOSE cannot close a slot under the ring's fixed-file rule
 * (docs/vsock.md). The drop alone is not the peer's end: on Linux 6.1
 * the ring keeps a replaced file until every request issued before the
 * replacement has completed (its resource node), and the accept waiting
 * on the listening socket may wait for as long as no client comes. The
 * fresh socket waits for the slot's next use. The slot is free once all
 * of it completed (slot_io_done). */
static void slot_end(struct vsock_dev *d, struct vsd_slot *s)
{
	struct io_uring_sqe *sqe = sqe_for(d, s);

	io_uring_prep_shutdown(sqe, (int)slot_no(d, s), SHUT_RDWR);
	sqe_tag(d, sqe, s, OP_END);
}

static void slot_release(struct vsock_dev *d, struct vsd_slot *s)
{
	struct io_uring_sqe *sqe = sqe_for(d, s);

	io_uring_prep_cancel_fd(sqe, (int)slot_no(d, s),
				IORING_ASYNC_CANCEL_ALL | IORING_ASYNC_CANCEL_FD_FIXED);
	sqe_tag(d, sqe, s, OP_CANCEL);
	sqe = sqe_for(d, s);
	io_uring_prep_socket_direct(sqe, AF_UNIX, SOCK_STREAM, 0, slot_no(d, s), 0);
	sqe_tag(d, sqe, s, OP_CLOSE);
}

static void slot_close(struct vsock_dev *d, struct vsd_slot *s)
{
	if (s->closing)
		return;
	rx_remove(d, s);
	s->closing = true;
	slot_end(d, s);
}

/* The guest's TX queue waits while the core can take no more packets
 * (buffered bytes, resets owed): let it go on once it can. */
static void tx_release(struct vsock_dev *d)
{
	if (d->txq->held && vsock_can_take(&d->v))
		vqw_hold(d->txq, false);
}

static void maybe_accept(struct vsock_dev *d);
static void rx_pump(struct vsock_dev *d);

/* The slot's last I/O ended: a closing slot is free, and its connection
 * (whose ring a send may have been reading) goes back to the core. */
static void slot_io_done(struct vsock_dev *d, struct vsd_slot *s)
{
	d->io--;
	s->io--;
	if (!s->closing || s->io)
		return;
	if (s->conn) {
		s->conn->opaque = NULL;
		vsock_release(&d->v, s->conn);
		s->conn = NULL;
	}
	if (s->kind == SLOT_HANDSHAKE)
		d->handshakes--;
	if (s->stage_touched)
		pages_discard(s->stage, VSD_STAGE);
	s->stage_touched = false;
	s->kind = SLOT_FREE;
	s->gen++;
	s->next = d->free_head;
	d->free_head = slot_no(d, s);
	maybe_accept(d);
}

/* ---- the core's answers ------------------------------------------------ */

static void conn_close(struct vsock_dev *d, struct vsock_conn *c)
{
	struct vsd_slot *s = c->opaque;

	if (s)
		slot_close(d, s);
	else
		vsock_release(&d->v, c);
}

static void slot_send(struct vsock_dev *d, struct vsd_slot *s);
static void slot_recv(struct vsock_dev *d, struct vsd_slot *s);
static void guest_connect(struct vsock_dev *d, struct vsock_conn *c);
static void arm_timer(struct vsock_dev *d);

static void act(struct vsock_dev *d, struct vsock_conn *c, enum vsock_act a)
{
	struct vsd_slot *s = c ? c->opaque : NULL;

	switch ((unsigned)a & ~(unsigned)VSOCK_ACT_RESUME) {
	case VSOCK_ACT_NONE:
		break;
	case VSOCK_ACT_CONNECT:
		guest_connect(d, c);
		break;
	case VSOCK_ACT_CONNECTED:
		/* The guest took a host client's connection: tell the client
		 * (before any of the guest's data), then read what it sends. */
		if (s) {
			s->ok_len = (unsigned)vsock_format_ok(s->line, c->host_port);
			s->ok_off = 0;
			slot_send(d, s);
		}
		break;
	case VSOCK_ACT_DATA:
		if (s)
			slot_send(d, s);
		break;
	case VSOCK_ACT_SHUT_WR:
		if (s) {
			s->shut_owed = true;
			slot_send(d, s);
		}
		break;
	case VSOCK_ACT_CLOSE:
		conn_close(d, c);
		break;
	}
	if ((a & VSOCK_ACT_RESUME) && s) {
		if (s->stage_len)
			rx_add(d, s);
		slot_recv(d, s);
	}
}

/* ---- host I/O ---------------------------------------------------------- */

static void guest_connect(struct vsock_dev *d, struct vsock_conn *c)
{
	struct vsd_slot *s = slot_get(d, SLOT_CONN);
	struct io_uring_sqe *sqe;

	if (!s) {
		/* Every slot busy: cannot be with conns <= slots, but the
		 * guest gets its RST rather than a hang. */
		act(d, c, vsock_connect_done(&d->v, c, false));
		return;
	}
	s->conn = c;
	c->opaque = s;
	memset(&s->addr, 0, sizeof(s->addr));
	s->addr.sun_family = AF_UNIX;
	snprintf(s->addr.sun_path, sizeof(s->addr.sun_path), "%s_%u", d->path, c->host_port);
	sqe = sqe_for(d, s);
	io_uring_prep_socket_direct(sqe, AF_UNIX, SOCK_STREAM, 0, slot_no(d, s), 0);
	sqe_tag(d, sqe, s, OP_SOCKET);
	/* A listener that never accepts (its backlog full) would hold the
	 * connect, its slot and an io-wq worker for good: the deadline's
	 * reset closes the slot, which cancels it. */
	vsock_connect_begun(&d->v, c, mono_ns());
	arm_timer(d);
}

static void slot_send(struct vsock_dev *d, struct vsd_slot *s)
{
	struct vsock_conn *c = s->conn;
	struct io_uring_sqe *sqe;
	struct iovec iov[2];

	if (s->send_on || s->closing || !c)
		return;
	if (s->ok_off < s->ok_len) {
		sqe = sqe_for(d, s);
		io_uring_prep_send(sqe, (int)slot_no(d, s), s->line + s->ok_off,
				   s->ok_len - s->ok_off, MSG_NOSIGNAL);
		sqe_tag(d, sqe, s, OP_SEND_OK);
	} else if (vsock_ring_peek(c, iov)) {
		/* The ring's bytes in place: they stay until the core hears
		 * how many the socket took (vsock_wrote_host). */
		sqe = sqe_for(d, s);
		io_uring_prep_send(sqe, (int)slot_no(d, s), iov[0].iov_base, iov[0].iov_len,
				   MSG_NOSIGNAL);
		sqe_tag(d, sqe, s, OP_SEND);
	} else if (s->shut_owed) {
		s->shut_owed = false;
		sqe = sqe_for(d, s);
		io_uring_prep_shutdown(sqe, (int)slot_no(d, s), SHUT_WR);
		sqe_tag(d, sqe, s, OP_SHUT);
	} else {
		return;
	}
	s->send_on = true;
}

/* One read of the host socket into the stage's free space, while the
 * guest has credit beyond what is staged: at most that much, so nothing
 * is ever buffered beyond its credit. */
static void slot_recv(struct vsock_dev *d, struct vsd_slot *s)
{
	struct vsock_conn *c = s->conn;
	struct io_uring_sqe *sqe;
	uint32_t credit, tail, len;

	if (s->recv_on || s->closing || !c || s->eof_owed || c->state != VSOCK_ESTABLISHED ||
	    c->host_eof || s->ok_off < s->ok_len)
		return;
	if (!vsock_data_room(&d->v, c))
		return;        /* a CREDIT_REQUEST is owed: rx_pump sends it */
	credit = vsock_credit(c);
	if (credit <= s->stage_len)
		return;        /* what is staged takes all of it */
	/* The free space after the staged bytes, in one piece. */
	tail = s->stage_off + s->stage_len;
	if (tail >= VSD_STAGE) {
		tail -= VSD_STAGE;
		len = s->stage_off - tail;
	} else {
		len = VSD_STAGE - tail;
	}
	len = MIN(len, credit - s->stage_len);
	if (s->stage_len && len < VSD_RECV_MIN)
		return;        /* rx_pump calls again as the guest takes more */
	sqe = sqe_for(d, s);
	io_uring_prep_recv(sqe, (int)slot_no(d, s), s->stage + tail, len, 0);
	sqe_tag(d, sqe, s, OP_RECV);
	s->recv_on = true;
	s->stage_touched = true;
}

static void line_recv(struct vsock_dev *d, struct vsd_slot *s)
{
	struct io_uring_sqe *sqe = sqe_for(d, s);

	/* A byte at a time: what the client sends after its line is the
	 * connection's, and stays in the socket. */
	io_uring_prep_recv(sqe, (int)slot_no(d, s), s->line + s->line_len, 1, 0);
	sqe_tag(d, sqe, s, OP_LINE);
}

static uint64_t next_deadline(const struct vsock_dev *d)
{
	uint64_t t = vsock_next_deadline(&d->v);

	if (d->handshakes)
		for (unsigned i = 1; i < d->nslots; i++)
			if (d->slots[i].kind == SLOT_HANDSHAKE && !d->slots[i].closing &&
			    d->slots[i].deadline_ns && d->slots[i].deadline_ns < t)
				t = d->slots[i].deadline_ns;
	return t;
}

/* One timeout in flight, for the earliest deadline, but never more than
 * VSOCK_CONNECT_TIMEOUT_NS ahead: every new deadline is at least that far
 * from now (connects 2 s, handshakes 5 s), so none is earlier than the
 * one armed, and a timeout that finds nothing due arms the next. */
static void arm_timer(struct vsock_dev *d)
{
	uint64_t t = next_deadline(d), now = mono_ns(), wait;
	struct io_uring_sqe *sqe;

	if (d->timer_on || t == UINT64_MAX || vqw_stopping(d->txq))
		return;
	wait = t > now ? t - now : 0;
	if (wait > VSOCK_CONNECT_TIMEOUT_NS)
		wait = VSOCK_CONNECT_TIMEOUT_NS;
	d->timer_ts.tv_sec = (long long)(wait / 1000000000ull);
	d->timer_ts.tv_nsec = (long long)(wait % 1000000000ull);
	sqe = sqe_for(d, &d->slots[SLOT_LISTEN]);
	io_uring_prep_timeout(sqe, &d->timer_ts, 0, 0);
	sqe_tag(d, sqe, &d->slots[SLOT_LISTEN], OP_TIMER);
	d->timer_on = true;
}

static void maybe_accept(struct vsock_dev *d)
{
	struct io_uring_sqe *sqe;
	struct vsd_slot *s;

	if (d->accept_on || d->handshakes >= VSOCK_HANDSHAKES || vqw_stopping(d->txq))
		return;
	s = slot_get(d, SLOT_HANDSHAKE);
	if (!s)
		return;        /* slot_io_done calls again as one frees */
	sqe = sqe_for(d, s);
	io_uring_prep_accept_direct(sqe, SLOT_LISTEN, NULL, NULL, 0, slot_no(d, s));
	sqe_tag(d, sqe, s, OP_ACCEPT);
	d->accept_on = true;
}

/* ---- completions ------------------------------------------------------- */

static void accepted(struct vsock_dev *d, struct vsd_slot *s, int res)
{
	d->accept_on = false;
	if (res < 0) {
		/* Nothing was put in the slot: it is free now. */
		s->closing = true;
		if (res != -ECANCELED && !vqw_stopping(d->txq)) {
			STAT_ADD(d, host_errors);
			if (!d->accept_fails++)
				log_warn(d->vdev.log, "vsock %s: accepting a host client failed: %s; "
					 "trying again", d->path, strerror(-res));
			vqw_retry_later(d->txq, RETRY_ACCEPT, d->accept_fails - 1);
			d->accept_on = true;     /* until the retry */
		}
		return;
	}
	if (s->closing) {
		/* Accepted after the stop closed the slot: this socket goes too. */
		slot_end(d, s);
		return;
	}
	d->accept_fails = 0;
	STAT_ADD(d, accepted);
	s->deadline_ns = mono_ns() + VSOCK_HANDSHAKE_TIMEOUT_NS;
	line_recv(d, s);
	arm_timer(d);
}

static void handshake_failed(struct vsock_dev *d, struct vsd_slot *s)
{
	STAT_ADD(d, handshake_failed);
	slot_close(d, s);
}

static void line_byte(struct vsock_dev *d, struct vsd_slot *s, int res)
{
	struct vsock_conn *c;
	size_t line_len;
	uint32_t port;
	int r;

	if (res != 1) {
		handshake_failed(d, s);        /* the client left, or failed */
		return;
	}
	s->line_len++;
	r = vsock_parse_connect(s->line, s->line_len, &port, &line_len);
	if (r == 0 && s->line_len < sizeof(s->line)) {
		line_recv(d, s);
		return;
	}
	if (r != 1) {
		handshake_failed(d, s);        /* not "CONNECT <port>\n": closed */
		return;
	}
	c = vsock_host_connect(&d->v, port, mono_ns());
	if (!c) {
		slot_close(d, s);              /* the VM's cap (counted by the core) */
		return;
	}
	d->handshakes--;
	s->kind = SLOT_CONN;
	s->conn = c;
	c->opaque = s;
	arm_timer(d);
	maybe_accept(d);
}

static void timer_fired(struct vsock_dev *d)
{
	uint64_t now = mono_ns();
	struct vsock_conn *c;

	d->timer_on = false;
	if (vqw_stopping(d->txq))
		return;
	while (vsock_tick(&d->v, now, &c) == VSOCK_ACT_CLOSE)
		conn_close(d, c);
	if (d->handshakes)
		for (unsigned i = 1; i < d->nslots; i++) {
			struct vsd_slot *s = &d->slots[i];

			/* An accept's slot waits for no line yet: io 1, OP_ACCEPT. */
			if (s->kind == SLOT_HANDSHAKE && !s->closing && s->deadline_ns &&
			    s->deadline_ns <= now)
				handshake_failed(d, s);
		}
	arm_timer(d);
}

static void conn_io(struct vsock_dev *d, struct vsd_slot *s, enum vsd_op op, int res)
{
	struct vsock_conn *c = s->conn;

	switch (op) {
	case OP_SOCKET:
		if (res < 0) {
			STAT_ADD(d, host_errors);
			act(d, c, vsock_connect_done(&d->v, c, false));
			break;
		}
		{
			struct io_uring_sqe *sqe = sqe_for(d, s);

			io_uring_prep_connect(sqe, (int)slot_no(d, s), (struct sockaddr *)&s->addr,
					      (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
							  strlen(s->addr.sun_path) + 1));
			sqe_tag(d, sqe, s, OP_CONNECT);
		}
		break;
	case OP_CONNECT:
		/* Nobody listening (-ENOENT, -ECONNREFUSED): the guest gets its
		 * RST, counted by the core as no_listener. Anything else is the
		 * host's to hear of, once (the guest may connect at will). */
		if (res < 0 && res != -ENOENT && res != -ECONNREFUSED) {
			STAT_ADD(d, host_errors);
			if (!d->connect_warned) {
				d->connect_warned = true;
				log_warn(d->vdev.log, "vsock %s: connecting the guest to %s: %s (the "
					 "first such failure; the rest are counted as host_errors)",
					 d->path, s->addr.sun_path, strerror(-res));
			}
		}
		act(d, c, vsock_connect_done(&d->v, c, res == 0));
		slot_recv(d, s);
		break;
	case OP_RECV:
		s->recv_on = false;
		if (res > 0) {
			s->stage_len += (uint32_t)res;
			rx_add(d, s);
			slot_recv(d, s);
		} else if (!res && s->stage_len) {
			s->eof_owed = true;     /* rx_pump says it after the bytes */
		} else {
			if (res < 0)
				STAT_ADD(d, host_errors);
			act(d, c, vsock_host_eof(&d->v, c, res < 0));
		}
		break;
	case OP_SEND_OK:
		s->send_on = false;
		if (res <= 0) {
			act(d, c, vsock_host_eof(&d->v, c, true));
			break;
		}
		s->ok_off += (unsigned)res;
		slot_send(d, s);
		slot_recv(d, s);
		break;
	case OP_SEND:
		s->send_on = false;
		if (res <= 0) {
			/* The host peer is gone (-EPIPE) or failed: RST. */
			act(d, c, vsock_host_eof(&d->v, c, true));
			break;
		}
		act(d, c, vsock_wrote_host(&d->v, c, (uint32_t)res));
		slot_send(d, s);
		break;
	case OP_SHUT:
		s->send_on = false;
		break;
	default:
		break;
	}
}

static void vsd_complete(struct vqw_queue *q, uint32_t tag, int res)
{
	struct vsock_dev *d = q->opaque;
	enum vsd_op op = TAG_OP(tag);
	struct vsd_slot *s;

	if (TAG_SLOT(tag) >= d->nslots)
		return;
	s = &d->slots[TAG_SLOT(tag)];
	/* A slot is reused only once all its I/O has ended: a mismatch is a
	 * bug, never a stale completion. */
	if (TAG_GEN(tag) != (s->gen & 0x7fffu))
		return;
	switch (op) {
	case OP_TIMER:
		timer_fired(d);
		break;
	case OP_ACCEPT:
		accepted(d, s, res);
		break;
	case OP_LINE:
		if (!s->closing)
			line_byte(d, s, res);
		break;
	case OP_END:
		/* Failed or not (a socket never connected), the slot's socket
		 * is shut: now replace it. */
		slot_release(d, s);
		break;
	case OP_CANCEL:
	case OP_CLOSE:
		break;
	default:
		if (s->closing || !s->conn) {
			if (op == OP_RECV)
				s->recv_on = false;
			else if (op == OP_SEND || op == OP_SEND_OK || op == OP_SHUT)
				s->send_on = false;
			break;
		}
		conn_io(d, s, op, res);
		break;
	}
	slot_io_done(d, s);
	rx_pump(d);
	tx_release(d);
}

static void vsd_retry(struct vqw_queue *q, uint32_t data)
{
	struct vsock_dev *d = q->opaque;

	if (data != RETRY_ACCEPT)
		return;
	d->accept_on = false;
	maybe_accept(d);
}

/* ---- the guest's queues ------------------------------------------------ */

/* Whether something waits for an RX buffer: a control packet (d->ctl),
 * or the data staged in *sp. Control packets go first: a connection's
 * RESPONSE before its data, its SHUTDOWN after (the core owes that only
 * once all the data is out). */
static bool rx_next(struct vsock_dev *d, struct vsd_slot **sp)
{
	*sp = NULL;
	for (;;) {
		struct vsd_slot *s;

		if (d->have_ctl || (d->have_ctl = vsock_next_ctl(&d->v, &d->ctl)))
			return true;
		if (d->rx_head == NONE)
			return false;
		s = &d->slots[d->rx_head];
		if (vsock_data_room(&d->v, s->conn)) {
			*sp = s;
			return true;
		}
		/* No credit: its CREDIT_REQUEST is owed, and the guest's
		 * update (VSOCK_ACT_RESUME) puts it back. */
		rx_remove(d, s);
	}
}

static bool rx_chain_ok(struct vsock_dev *d, const struct virtq_chain *ch)
{
	if (!ch->n_readable && !ch->has_empty && ch->total_len >= VSOCK_HDR_LEN)
		return true;
	STAT_ADD(d, bad_rx);
	virtio_guest_warn(&d->vdev, VSD_GW_RX, "vsock %s: an RX buffer of %llu bytes with %u "
			  "device-readable descriptors cannot hold a packet; returned unused",
			  d->path, (unsigned long long)ch->total_len, ch->n_readable);
	return false;
}

/* Fill RX buffers while there is something to send; when the guest has
 * none left, ask the worker to say when it has (vqw_want). */
static void rx_pump(struct vsock_dev *d)
{
	struct vsd_slot *s;

	if (vqw_stopping(d->rxq))
		return;
	while (rx_next(d, &s)) {
		uint8_t hb[VSOCK_HDR_LEN];
		struct virtq_chain *ch;
		struct vsock_hdr h;
		uint64_t n;
		int r;

		r = vqw_pull(d->rxq, &ch);
		if (r == 0)
			vqw_want(d->rxq);
		if (r <= 0)
			return;
		if (!rx_chain_ok(d, ch)) {
			vqw_push(d->rxq, ch->head, 0);
			continue;
		}
		if (!s) {
			vsock_hdr_encode(&d->ctl, hb);
			iov_write(ch->iov, ch->n, 0, hb, sizeof(hb));
			vqw_push(d->rxq, ch->head, VSOCK_HDR_LEN);
			d->have_ctl = false;
			tx_release(d);          /* a reset of the backlog went out */
			continue;
		}
		/* The staged bytes in one piece: up to the stage's end. */
		n = MIN(s->stage_len, VSD_STAGE - s->stage_off);
		if (n > ch->total_len - VSOCK_HDR_LEN)
			n = ch->total_len - VSOCK_HDR_LEN;
		if (n > vsock_data_room(&d->v, s->conn))
			n = vsock_data_room(&d->v, s->conn);
		if (!n) {
			/* A buffer with room for a header only. */
			vqw_push(d->rxq, ch->head, 0);
			continue;
		}
		vsock_data_sent(&d->v, s->conn, (uint32_t)n, &h);
		vsock_hdr_encode(&h, hb);
		iov_write(ch->iov, ch->n, 0, hb, sizeof(hb));
		iov_write(ch->iov, ch->n, VSOCK_HDR_LEN, s->stage + s->stage_off, n);
		vqw_push(d->rxq, ch->head, (uint32_t)(VSOCK_HDR_LEN + n));
		s->stage_off = (s->stage_off + (uint32_t)n) % VSD_STAGE;
		s->stage_len -= (uint32_t)n;
		rx_remove(d, s);
		if (s->stage_len) {
			rx_add(d, s);          /* its turn again after the others' */
		} else {
			/* Empty: the next RECV starts at the front, unless one
			 * in flight already writes after the old end. */
			if (!s->recv_on)
				s->stage_off = 0;
			if (s->eof_owed) {
				s->eof_owed = false;
				act(d, s->conn, vsock_host_eof(&d->v, s->conn, false));
				continue;
			}
		}
		slot_recv(d, s);
	}
}

/* A restored device's TRANSPORT_RESET (§5.10.6.7: struct
 * virtio_vsock_event, le32 id) into the guest's next event buffer: the
 * guest's driver then resets every connected socket, which a restore
 * cannot carry, and reads its CID again (a clone's may differ). Its
 * listening sockets stay. No buffer yet: asked for (vqw_want). */
static void event_pump(struct vsock_dev *d)
{
	struct virtq_chain *ch;
	uint8_t ev[4];
	int r;

	while (d->reset_owed && !vqw_stopping(d->evq)) {
		r = vqw_pull(d->evq, &ch);
		if (r == 0)
			vqw_want(d->evq);
		if (r <= 0)
			return;
		if (ch->n_readable || ch->has_empty || ch->total_len < sizeof(ev)) {
			virtio_guest_warn(&d->vdev, VSD_GW_RX, "vsock %s: an event buffer of %llu "
					  "bytes with %u device-readable descriptors cannot hold an "
					  "event; returned unused", d->path,
					  (unsigned long long)ch->total_len, ch->n_readable);
			vqw_push(d->evq, ch->head, 0);
			continue;
		}
		le32_store(ev, VIRTIO_VSOCK_EVENT_TRANSPORT_RESET);
		iov_write(ch->iov, ch->n, 0, ev, sizeof(ev));
		vqw_push(d->evq, ch->head, sizeof(ev));
		d->reset_owed = false;
	}
}

static void vsd_avail(struct vqw_queue *q)
{
	struct vsock_dev *d = q->opaque;

	if (q == d->rxq)
		rx_pump(d);
	else if (q == d->evq)
		event_pump(d);
}

/* A TX chain is one packet: header and payload, all device-readable. */
static void vsd_chain(struct vqw_queue *q, struct virtq_chain *ch)
{
	struct vsock_dev *d = q->opaque;
	struct iovec payload[VIRTQ_MAX_CHAIN];
	uint8_t hb[VSOCK_HDR_LEN];
	struct vsock_conn *c;
	struct vsock_hdr h;
	enum vsock_bad bad;
	enum vsock_act a;
	int n;

	if (ch->n_readable != ch->n || ch->has_empty || ch->total_len < VSOCK_HDR_LEN) {
		vsock_bad_chain(&d->v);
		virtio_guest_warn(&d->vdev, VSD_GW_BAD(VSOCK_BAD_CHAIN), "vsock %s: a TX chain "
				  "of %llu bytes with %u device-writable descriptors is no packet; "
				  "dropped", d->path, (unsigned long long)ch->total_len,
				  ch->n - ch->n_readable);
		vqw_push(q, ch->head, 0);
		return;
	}
	/* The header copied once; the payload stays in the guest's buffers
	 * until the core copies it into the connection's ring. */
	iov_read(ch->iov, ch->n, 0, hb, sizeof(hb));
	vsock_hdr_decode(hb, &h);
	n = iov_slice(ch->iov, ch->n, VSOCK_HDR_LEN, ch->total_len - VSOCK_HDR_LEN, payload,
		      VIRTQ_MAX_CHAIN);
	if (n < 0)
		n = 0;         /* cannot be: as many entries as the chain */
	a = vsock_from_guest(&d->v, &h, payload, (unsigned)n, ch->total_len - VSOCK_HDR_LEN, &c,
			     &bad);
	if (bad != VSOCK_BAD_KINDS)
		virtio_guest_warn(&d->vdev, VSD_GW_BAD(bad), "vsock %s: a packet from the guest "
				  "(op %u, %u:%u -> %llu:%u, len %u): %s", d->path, h.op,
				  (unsigned)h.src_cid, h.src_port, (unsigned long long)h.dst_cid,
				  h.dst_port, h.len, vsock_bad_name(bad));
	vqw_push(q, ch->head, 0);
	act(d, c, a);
	rx_pump(d);
	if (!vsock_can_take(&d->v))
		vqw_hold(q, true);
}

static unsigned vsd_inflight(const struct vqw_queue *q)
{
	const struct vsock_dev *d = q->opaque;

	return q == d->txq ? d->io : 0;
}

/* Quiet for a pause at once: its host I/O reads into and writes from
 * buffers of its own (a connection's rings, a client's line); guest
 * buffers are only touched as chains are taken, which a quiesce stops. */
static bool vsd_quiet(const struct vqw_queue *q)
{
	(void)q;
	return true;
}

static void vsd_serve_begin(struct vqw_queue *q)
{
	struct vsock_dev *d = q->opaque;

	d->have_ctl = false;
	d->accept_on = false;
	d->accept_fails = 0;
	maybe_accept(d);
	event_pump(d);
}

/* A driver reset or the VM's stop: every connection ends (the host side
 * closes, the guest's side is forgotten with the driver's state), and
 * clients between accept and their line are closed too. */
static void vsd_serve_end(struct vqw_queue *q)
{
	struct vsock_dev *d = q->opaque;
	struct vsock_conn *c;

	while (vsock_reset_next(&d->v, &c))
		conn_close(d, c);
	for (unsigned i = 1; i < d->nslots; i++)
		if (d->slots[i].kind != SLOT_FREE)
			slot_close(d, &d->slots[i]);
	d->rx_head = d->rx_tail = NONE;
	d->have_ctl = false;
}

static const struct vqw_ops vsd_vqw_ops = {
	.name = "virtio-vsock",
	.chain = vsd_chain,
	.complete = vsd_complete,
	.inflight = vsd_inflight,
	.quiet = vsd_quiet,
	.retry = vsd_retry,
	.avail = vsd_avail,
	.serve_begin = vsd_serve_begin,
	.serve_end = vsd_serve_end,
	.poll_io = true,
	.settle_io = true,
};

/* ---- the device -------------------------------------------------------- */

static uint64_t vsd_features(const struct virtio_dev *dev)
{
	(void)dev;
	return 0;      /* stream sockets only: no VIRTIO_VSOCK_F_SEQPACKET */
}

static void vsd_config_read(struct virtio_dev *dev, uint64_t off, uint8_t *data, unsigned len)
{
	const struct vsock_dev *d = to_vsd(dev);

	for (unsigned i = 0; i < len; i++) {
		uint64_t o = off + i;

		data[i] = (o >= off && o < sizeof(d->config)) ? d->config[o] : 0;
	}
}

static void vsd_config_write(struct virtio_dev *dev, uint64_t off, const uint8_t *data,
			     unsigned len)
{
	(void)dev; (void)off; (void)data; (void)len;   /* guest_cid is read-only */
}

static int vsd_launch(struct virtio_dev *dev)
{
	return vqw_launch(&to_vsd(dev)->w);
}

static void vsd_halt(struct virtio_dev *dev)
{
	struct vsock_dev *d = to_vsd(dev);

	if (d->w_up)
		vqw_end(&d->w);
}

static int vsd_queue_start(struct virtio_dev *dev, unsigned q)
{
	struct vsock_dev *d = to_vsd(dev);
	uint64_t mask = 0;

	/* One worker for the three queues: it starts with the last enabled
	 * one (the core starts them in order), serving all that are. */
	for (unsigned later = q + 1; later < VSD_NQ; later++)
		if (dev->queues[later].vq.ready)
			return 0;
	for (unsigned i = 0; i < VSD_NQ; i++)
		if (dev->queues[i].vq.ready)
			mask |= 1ull << i;
	vqw_start(&d->w, mask);
	return 0;
}

static void vsd_queues_stopping(struct virtio_dev *dev)
{
	vqw_stop_begin(&to_vsd(dev)->w);
}

static void vsd_queue_stop(struct virtio_dev *dev, unsigned q)
{
	(void)q;
	vqw_stop(&to_vsd(dev)->w);
}

static void stats_load(const struct vsock_dev *d, struct vsock_dev_stats *out)
{
	const uint64_t *src = (const uint64_t *)&d->v.st;
	uint64_t *dst = (uint64_t *)&out->conn;

	_Static_assert(sizeof(struct vsock_stats) % sizeof(uint64_t) == 0,
		       "struct vsock_stats is made of uint64_t counters");
	for (size_t i = 0; i < sizeof(struct vsock_stats) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	out->accepted = __atomic_load_n(&d->accepted, __ATOMIC_RELAXED);
	out->handshake_failed = __atomic_load_n(&d->handshake_failed, __ATOMIC_RELAXED);
	out->host_errors = __atomic_load_n(&d->host_errors, __ATOMIC_RELAXED);
	out->bad_rx = __atomic_load_n(&d->bad_rx, __ATOMIC_RELAXED);
	out->polled = out->poll_preempted = 0;
	if (d->w_up) {
		struct vqw_stats w;

		/* The worker's poll counters are its first queue's. */
		vqw_get_stats(&d->w.q[0], &w);
		out->polled = w.polled;
		out->poll_preempted = w.preempted;
	}
}

static void vsd_stats_json(struct virtio_dev *dev, struct json *j)
{
	struct vsock_dev *d = to_vsd(dev);
	struct vsock_dev_stats s;

	stats_load(d, &s);
	json_str(j, "kind", "virtio-vsock");
	json_u64(j, "cid", d->opts.cid);
	json_str(j, "socket", d->path);
	json_u64(j, "connections_guest", s.conn.conns_guest);
	json_u64(j, "connections_host", s.conn.conns_host);
	json_u64(j, "connections_open", s.conn.conns_open);
	json_u64(j, "bytes_to_host", s.conn.bytes_to_host);
	json_u64(j, "bytes_to_guest", s.conn.bytes_to_guest);
	json_u64(j, "packets_from_guest", s.conn.pkts_from_guest);
	json_u64(j, "packets_to_guest", s.conn.pkts_to_guest);
	json_u64(j, "resets_sent", s.conn.rst_sent);
	json_u64(j, "resets_received", s.conn.rst_rcvd);
	json_u64(j, "credit_stalls", s.conn.credit_stalls);
	json_u64(j, "credit_updates", s.conn.credit_updates);
	json_u64(j, "connection_limit", s.conn.conn_limit);
	json_u64(j, "no_listener", s.conn.no_listener);
	json_u64(j, "connect_timeouts", s.conn.timeouts);
	json_u64(j, "host_clients", s.accepted);
	json_u64(j, "handshakes_failed", s.handshake_failed);
	json_u64(j, "host_errors", s.host_errors);
	json_u64(j, "bad_packets", s.conn.bad);
	json_u64(j, "bad_rx_buffers", s.bad_rx);
	if (d->opts.poll_us) {
		json_u64(j, "polled", s.polled);
		json_u64(j, "poll_preempted", s.poll_preempted);
	}
}

/* The socket file, if it is still the one we bound. Not in a sandboxed
 * VM: its threads may make no path call once their filters are in (the
 * next start on PATH replaces the stale file). */
static void sock_unlink(struct vsock_dev *d)
{
	struct stat st;

	if (d->vdev.sandbox)
		return;
	if (d->sock_ino && !lstat(d->path, &st) && S_ISSOCK(st.st_mode) &&
	    st.st_dev == d->sock_dev && st.st_ino == d->sock_ino)
		unlink(d->path);
	d->sock_ino = 0;
}

static void vsd_destroy(struct virtio_dev *dev)
{
	struct vsock_dev *d = to_vsd(dev);

	if (d->w_up) {
		/* The ring holds every socket of the device's: its end
		 * closes them. A worker whose end was not seen keeps it all. */
		vqw_fini(&d->w);
		if (d->w.lost)
			return;
	}
	sock_unlink(d);
	if (d->listen_fd >= 0)
		close(d->listen_fd);
	pages_free(d->stages, (size_t)d->nslots * VSD_STAGE);
	free(d->slots);
	vsock_fini(&d->v);
	free(d);       /* holds dev: last */
}

/* Nothing of the device's own goes in a snapshot: its connections'
 * host sockets end with the process, and the guest's CID is the
 * restoring VM's (a clone's own). A restored device owes the guest a
 * TRANSPORT_RESET. */
static int vsd_load(struct virtio_dev *dev, struct snap_r *r, char *err, size_t errlen)
{
	(void)r;
	(void)err;
	(void)errlen;
	to_vsd(dev)->reset_owed = true;
	return 0;
}

static const struct virtio_device_ops vsd_ops = {
	.load = vsd_load,
	.name = "virtio-vsock",
	.device_id = VIRTIO_ID_VSOCK,
	/* RX, TX and the event queue are served by one thread, and a round
	 * trip completes on both RX and TX: one vector for the three, as
	 * QEMU's vhost-vsock-pci has, takes one interrupt where two vectors
	 * took one each. */
	.msix_vectors = 2,
	.features = vsd_features,
	.config_read = vsd_config_read,
	.config_write = vsd_config_write,
	.launch = vsd_launch,
	.halt = vsd_halt,
	.queue_start = vsd_queue_start,
	.queue_stop = vsd_queue_stop,
	.queues_stopping = vsd_queues_stopping,
	.stats_json = vsd_stats_json,
	.destroy = vsd_destroy,
};

#define VSOCK_KEY(member, ctype) KV_OFF(struct mvm_vsock, member, ctype)

static const struct kv_key vsock_key_list[] = {
	{ "cid", KV_UINT, VSOCK_KEY(cid, unsigned), .min = VSOCK_CID_MIN, .max = VSOCK_CID_MAX,
	  .required = true, .meta = "N",
	  .help = "the guest's context ID, 3 or more (what its programs see as their own CID)" },
	{ "socket", KV_STRING, VSOCK_KEY(socket, const char *), .max = VSOCK_PATH_MAX,
	  .required = true, .meta = "PATH",
	  .help = "a Unix socket mvm listens on: a host program connects and writes "
		  "\"CONNECT <port>\\n\" to reach the guest's port (answered \"OK <port>\\n\"); "
		  "the guest's connects to CID 2 port P go to PATH_P" },
	{ "conns", KV_UINT, VSOCK_KEY(conns, unsigned), .min = 1, .max = VSOCK_CONNS_MAX,
	  .def = VSOCK_CONNS_DEFAULT, .meta = "N",
	  .help = "connections at once, both ways (default 256; each takes a registered "
		  "file, so RLIMIT_NOFILE's hard limit must allow them, and a share of the 64 MiB "
		  "the guest may send before host peers read: 256 KiB each at most)" },
	{ "transport", KV_ENUM, VSOCK_KEY(transport, enum mvm_transport),
	  .values = vtr_transport_values, .no_default = true,
	  .help = "the virtio transport (default: --transport, or pci on x86, ccw on s390x)" },
	{ "poll", KV_UINT, VSOCK_KEY(poll_us, unsigned), .max = VQW_POLL_US_MAX, .def = 0,
	  .meta = "USEC", .unit = "us",
	  .help = "the longest time its idle thread polls for the guest's next packet or a "
		  "host socket's answer, as a disk's poll= (default 0: never; it adapts below "
		  "that; a CPU spent for latency)" },
};

const struct kv_table vsock_keys = {
	.what = "vsock",
	.keys = vsock_key_list,
	.nkeys = sizeof(vsock_key_list) / sizeof(vsock_key_list[0]),
};

/* The listening socket at PATH. A socket file that nobody answers on is
 * a previous run's: replaced. A live one, or any other file: refused. */
static int sock_listen(struct vsock_dev *d, char *err, size_t errlen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, probe, r;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", d->path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_set(err, errlen, -errno, "vsock %s: cannot make a socket: %s", d->path,
			       strerror(errno));
	if (!bind(fd, (struct sockaddr *)&a, sizeof(a)))
		goto bound;
	r = -errno;
	if (r != -EADDRINUSE)
		goto fail;
	if (lstat(d->path, &st) || !S_ISSOCK(st.st_mode)) {
		close(fd);
		return err_set(err, errlen, -EEXIST, "vsock %s: a file that is not a socket is "
			       "there; remove it or give another socket=", d->path);
	}
	/* Non-blocking: a live listener with a full backlog says EAGAIN
	 * instead of holding mvm's start. */
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	r = probe < 0 ? -errno : connect(probe, (struct sockaddr *)&a, sizeof(a)) ? -errno : 0;
	if (probe >= 0)
		close(probe);
	if (r != -ECONNREFUSED) {
		close(fd);
		return err_set(err, errlen, -EADDRINUSE, "vsock %s: another program listens there; "
			       "give another socket= or stop it", d->path);
	}
	unlink(d->path);       /* a previous run's, nobody behind it */
	if (!bind(fd, (struct sockaddr *)&a, sizeof(a)))
		goto bound;
	r = -errno;
	goto fail;
bound:
	if (listen(fd, 128) || lstat(d->path, &st)) {
		r = -errno;
		unlink(d->path);
		goto fail;
	}
	d->sock_dev = st.st_dev;
	d->sock_ino = st.st_ino;
	d->listen_fd = fd;
	return 0;
fail:
	close(fd);
	return err_set(err, errlen, r, "vsock %s: cannot listen there: %s", d->path,
		       strerror(-r));
}

/* The ring's file table holds a slot per connection and handshake, plus
 * the worker's own: it may not be larger than RLIMIT_NOFILE, whose soft
 * limit is raised to fit where the hard one allows. */
static int files_fit(unsigned files, char *err, size_t errlen)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return err_set(err, errlen, -errno, "vsock: getrlimit: %s", strerror(errno));
	if (rl.rlim_cur >= files)
		return 0;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < files)
		return err_set(err, errlen, -EMFILE, "vsock: %u connections need %u registered "
			       "files, and RLIMIT_NOFILE's hard limit is %llu; give fewer conns= "
			       "or raise the limit", files - VSOCK_HANDSHAKES - 1 - 1 - VSD_NQ,
			       files, (unsigned long long)rl.rlim_max);
	rl.rlim_cur = files;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		return err_set(err, errlen, -errno, "vsock: cannot raise RLIMIT_NOFILE to %u: %s",
			       files, strerror(errno));
	return 0;
}

static int worker_init(struct vsock_dev *d, char *err, size_t errlen)
{
	static const unsigned idx[VSD_NQ] = { VSD_RX, VSD_TX, VSD_EVENT };
	void *opaque[VSD_NQ] = { d, d, d };
	uint64_t ops = (1ull << IORING_OP_ACCEPT) | (1ull << IORING_OP_SOCKET) |
		       (1ull << IORING_OP_CONNECT) | (1ull << IORING_OP_RECV) |
		       (1ull << IORING_OP_SEND) | (1ull << IORING_OP_SHUTDOWN) |
		       (1ull << IORING_OP_ASYNC_CANCEL) | (1ull << IORING_OP_TIMEOUT);
	int *files, r;

	r = files_fit(d->nslots + 1 + VSD_NQ, err, errlen);
	if (r)
		return r;
	r = vqw_init(&d->w, &vsd_vqw_ops, &d->vdev, idx, opaque, VSD_NQ, VSOCK_QUEUE_SIZE,
		     d->opts.poll_us, 0, "mvm-vsock");
	if (r)
		return err_set(err, errlen, r, "vsock %s: cannot set up its I/O ring: %s", d->path,
			       strerror(-r));
	d->w_up = true;
	d->rxq = &d->w.q[VSD_RX];
	d->txq = &d->w.q[VSD_TX];
	d->evq = &d->w.q[VSD_EVENT];
	r = vqw_set_pull(&d->w, VSD_RX);
	if (!r)
		r = vqw_set_pull(&d->w, VSD_EVENT);
	if (r)
		return err_set(err, errlen, r, "vsock %s: cannot set up its queues: %s", d->path,
			       strerror(-r));
	files = malloc(d->nslots * sizeof(*files));
	if (!files)
		return err_set(err, errlen, -ENOMEM, "vsock %s: out of memory", d->path);
	files[SLOT_LISTEN] = d->listen_fd;
	for (unsigned i = 1; i < d->nslots; i++)
		files[i] = -1;         /* empty: sockets the ring makes */
	r = vqw_set_io(&d->w, files, d->nslots, ops);
	free(files);
	if (r)
		return err_set(err, errlen, r, "vsock %s: cannot register its %u socket slots "
			       "with io_uring: %s", d->path, d->nslots, strerror(-r));
	return 0;
}

int vsock_dev_new(const struct mvm_vsock *o, const struct guest_mem *mem,
		  struct virtio_dev **out, char *err, size_t errlen)
{
	struct vsock_dev *d;
	int r;

	r = kv_check(&vsock_keys, o, o->socket ? o->socket : "(no socket)", err, errlen);
	if (r)
		return r;
	d = calloc(1, sizeof(*d));
	if (!d)
		return err_set(err, errlen, -ENOMEM, "vsock %s: out of memory", o->socket);
	d->listen_fd = -1;
	d->opts = *o;
	d->opts.socket = strcpy(d->path, o->socket);
	le64_store(d->config, o->cid);
	d->nslots = 1 + VSOCK_HANDSHAKES + o->conns;
	d->slots = calloc(d->nslots, sizeof(*d->slots));
	/* Every slot's stage now: its thread, filtered, maps nothing. */
	d->stages = pages_reserve((size_t)d->nslots * VSD_STAGE);
	r = vsock_init(&d->v, o->cid, o->conns, VSOCK_BUFFERED_MAX);
	if (!d->slots || !d->stages || r) {
		pages_free(d->stages, (size_t)d->nslots * VSD_STAGE);
		free(d->slots);
		if (!r)
			vsock_fini(&d->v);
		free(d);
		return err_set(err, errlen, -ENOMEM, "vsock %s: out of memory", o->socket);
	}
	d->free_head = NONE;
	for (unsigned i = 0; i < d->nslots; i++)
		d->slots[i].stage = d->stages + (size_t)i * VSD_STAGE;
	for (unsigned i = d->nslots; i-- > 1;) {
		d->slots[i].next = d->free_head;
		d->free_head = i;
	}
	d->slots[SLOT_LISTEN].kind = SLOT_CONN;     /* never on the free list */
	d->rx_head = d->rx_tail = NONE;
	r = virtio_dev_init(&d->vdev, &vsd_ops, d, mem, VSD_NQ, VSOCK_QUEUE_SIZE);
	if (r) {
		pages_free(d->stages, (size_t)d->nslots * VSD_STAGE);
		free(d->slots);
		vsock_fini(&d->v);
		free(d);
		return err_set(err, errlen, r, "vsock %s: cannot create the virtio device: %s",
			       o->socket, strerror(-r));
	}
	r = sock_listen(d, err, errlen);
	if (!r)
		r = worker_init(d, err, errlen);
	if (r) {
		virtio_dev_destroy(&d->vdev);   /* vsd_destroy: everything */
		return r;
	}
	*out = &d->vdev;
	return 0;
}

int vsock_dev_get_stats(struct virtio_dev *dev, struct vsock_dev_stats *out)
{
	if (!dev || dev->ops != &vsd_ops)
		return -EINVAL;
	stats_load(to_vsd(dev), out);
	return 0;
}

unsigned vsock_dev_cid(const struct virtio_dev *dev)
{
	return dev && dev->ops == &vsd_ops ? to_vsd(dev)->opts.cid : 0;
}
