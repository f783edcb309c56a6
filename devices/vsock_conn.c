/* virtio-vsock's protocol without a device: see vsock_conn.h. */
#include "devices/vsock_conn.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define NONE UINT32_MAX

/* Single writer (the queue thread); --stats reads at any time. */
#define ST_ADD(v, field, n) \
	__atomic_store_n(&(v)->st.field, (v)->st.field + (n), __ATOMIC_RELAXED)

void vsock_hdr_decode(const uint8_t b[VSOCK_HDR_LEN], struct vsock_hdr *h)
{
	h->src_cid = le64_load(b + 0);
	h->dst_cid = le64_load(b + 8);
	h->src_port = le32_load(b + 16);
	h->dst_port = le32_load(b + 20);
	h->len = le32_load(b + 24);
	h->type = le16_load(b + 28);
	h->op = le16_load(b + 30);
	h->flags = le32_load(b + 32);
	h->buf_alloc = le32_load(b + 36);
	h->fwd_cnt = le32_load(b + 40);
}

void vsock_hdr_encode(const struct vsock_hdr *h, uint8_t b[VSOCK_HDR_LEN])
{
	le64_store(b + 0, h->src_cid);
	le64_store(b + 8, h->dst_cid);
	le32_store(b + 16, h->src_port);
	le32_store(b + 20, h->dst_port);
	le32_store(b + 24, h->len);
	le16_store(b + 28, h->type);
	le16_store(b + 30, h->op);
	le32_store(b + 32, h->flags);
	le32_store(b + 36, h->buf_alloc);
	le32_store(b + 40, h->fwd_cnt);
}

const char *vsock_bad_name(enum vsock_bad kind)
{
	static const char *const names[VSOCK_BAD_KINDS] = {
		[VSOCK_BAD_CID] = "a packet whose src_cid is not the guest's CID",
		[VSOCK_BAD_DST] = "a packet whose dst_cid is not the host (2)",
		[VSOCK_BAD_TYPE] = "a packet of a type other than stream",
		[VSOCK_BAD_OP] = "an operation unknown or out of place on its connection",
		[VSOCK_BAD_LEN] = "a len beyond its descriptor chain or 64 KiB",
		[VSOCK_BAD_CREDIT] = "more data than the credit it was given",
		[VSOCK_BAD_NOCONN] = "a packet for a connection that does not exist",
		[VSOCK_BAD_CHAIN] = "a descriptor chain that cannot hold a packet",
	};
	return kind < VSOCK_BAD_KINDS ? names[kind] : "?";
}

int vsock_init(struct vsock *v, uint64_t guest_cid, unsigned max_conns, uint64_t max_buffered)
{
	uint64_t share = max_conns ? max_buffered / max_conns : 0;
	unsigned nb = 1;

	if (max_conns < 1 || max_conns > VSOCK_CONNS_MAX || share < VSOCK_BUF_MIN)
		return -EINVAL;
	memset(v, 0, sizeof(*v));
	/* Each connection's credit is its share of the cap, so that all
	 * of them together never hold more than the cap: a host peer that
	 * does not read can take only its own connection's share, never
	 * the others'. Page-aligned, as each ring's pages are given back
	 * on their own. */
	v->buf_alloc = share < VSOCK_BUF_ALLOC ? (uint32_t)share & ~(VSOCK_BUF_MIN - 1) :
		       VSOCK_BUF_ALLOC;
	while (nb < 2 * max_conns)
		nb <<= 1;
	/* Mappings (pages_alloc): the tables are freed at teardown, on a
	 * filtered thread, maybe off the arena they came from. The rings'
	 * address space is taken now, for every connection there may be:
	 * the device's thread, filtered, maps nothing. */
	v->conns = pages_alloc(max_conns * sizeof(*v->conns));
	v->hash = pages_alloc(nb * sizeof(*v->hash));
	v->rings = pages_reserve((size_t)max_conns * v->buf_alloc);
	if (!v->conns || !v->hash || !v->rings) {
		pages_free(v->conns, max_conns * sizeof(*v->conns));
		pages_free(v->hash, nb * sizeof(*v->hash));
		pages_free(v->rings, (size_t)max_conns * v->buf_alloc);
		return -ENOMEM;
	}
	memset(v->hash, 0xff, nb * sizeof(*v->hash));
	v->hash_mask = nb - 1;
	v->guest_cid = guest_cid;
	v->max_conns = max_conns;
	for (unsigned i = 0; i < max_conns; i++) {
		v->conns[i].id = i;
		v->conns[i].ring.buf = v->rings + (size_t)i * v->buf_alloc;
		v->conns[i].hnext = i + 1 < max_conns ? i + 1 : NONE;
	}
	v->free_head = 0;
	v->pending_head = v->pending_tail = NONE;
	v->next_host_port = VSOCK_HOST_PORT_FIRST;
	return 0;
}

void vsock_fini(struct vsock *v)
{
	if (!v->conns)
		return;
	pages_free(v->rings, (size_t)v->max_conns * v->buf_alloc);
	pages_free(v->conns, v->max_conns * sizeof(*v->conns));
	pages_free(v->hash, (v->hash_mask + 1) * sizeof(*v->hash));
	v->conns = NULL;
	v->rings = NULL;
	v->hash = NULL;
}

static unsigned bucket(const struct vsock *v, uint32_t guest_port, uint32_t host_port)
{
	uint32_t x = guest_port * 0x9e3779b1u ^ host_port;

	x ^= x >> 16;
	x *= 0x85ebca6bu;
	x ^= x >> 13;
	return x & v->hash_mask;
}

static struct vsock_conn *lookup(struct vsock *v, uint32_t guest_port, uint32_t host_port)
{
	uint32_t i = v->hash[bucket(v, guest_port, host_port)];

	while (i != NONE) {
		struct vsock_conn *c = &v->conns[i];

		if (c->guest_port == guest_port && c->host_port == host_port)
			return c;
		i = c->hnext;
	}
	return NULL;
}

static struct vsock_conn *conn_new(struct vsock *v, uint32_t guest_port, uint32_t host_port,
				   enum vsock_state state)
{
	struct vsock_conn *c;
	unsigned b;
	uint32_t gen;

	if (v->free_head == NONE)
		return NULL;
	c = &v->conns[v->free_head];
	v->free_head = c->hnext;
	gen = c->gen;
	memset(c, 0, sizeof(*c));
	c->id = (uint32_t)(c - v->conns);
	c->ring.buf = v->rings + (size_t)c->id * v->buf_alloc;
	c->ring.size = v->buf_alloc;
	c->gen = gen;
	c->state = state;
	c->guest_port = guest_port;
	c->host_port = host_port;
	c->host_busy = true;
	c->next_pending = NONE;
	b = bucket(v, guest_port, host_port);
	c->hnext = v->hash[b];
	v->hash[b] = c->id;
	ST_ADD(v, conns_open, 1);
	return c;
}

/* The ring's bytes are forgotten; its pages stay while the device has
 * host state for the connection (a send in flight may still read them)
 * and go back when the slot is freed. */
static void ring_drop(struct vsock *v, struct vsock_conn *c)
{
	v->buffered -= c->ring.len;
	c->ring.head = c->ring.len = 0;
	if (c->host_busy || !c->ring.touched)
		return;
	pages_discard(c->ring.buf, c->ring.size);
	c->ring.touched = false;
}

/* It stops being watched for a deadline: connected, reset or freed. */
static void untime(struct vsock *v, struct vsock_conn *c)
{
	if (!c->timed)
		return;
	c->timed = false;
	v->connecting--;
}

/* Out of the hash: its ports find it no more. */
static void unhash(struct vsock *v, struct vsock_conn *c)
{
	uint32_t *pp = &v->hash[bucket(v, c->guest_port, c->host_port)];

	while (*pp != c->id)
		pp = &v->conns[*pp].hnext;
	*pp = c->hnext;
	c->unhashed = true;
}

/* Back to the free list: only once it owes nothing and the device holds
 * nothing for it, and off the pending list (vsock_next_ctl frees those). */
static void conn_free(struct vsock *v, struct vsock_conn *c)
{
	if (!c->unhashed)
		unhash(v, c);
	ring_drop(v, c);
	untime(v, c);
	c->state = VSOCK_FREE;
	c->gen++;
	c->hnext = v->free_head;
	v->free_head = c->id;
	ST_ADD(v, conns_open, -1);
}

static void maybe_free(struct vsock *v, struct vsock_conn *c)
{
	if (c->state == VSOCK_DEAD && !c->host_busy && !c->pending && !c->on_pending)
		conn_free(v, c);
}

static void owe(struct vsock *v, struct vsock_conn *c, unsigned what)
{
	c->pending |= what;
	if (c->on_pending)
		return;
	c->on_pending = true;
	c->next_pending = NONE;
	if (v->pending_tail == NONE)
		v->pending_head = c->id;
	else
		v->conns[v->pending_tail].next_pending = c->id;
	v->pending_tail = c->id;
}

static void owe_rst_tuple(struct vsock *v, uint64_t cid, uint32_t guest_port, uint32_t host_port)
{
	unsigned i;

	/* vsock_can_take keeps the guest from sending more while full; a
	 * packet already taken still gets its reset: the oldest is dropped. */
	if (v->rst_len == VSOCK_RST_BACKLOG) {
		v->rst_head = (v->rst_head + 1) % VSOCK_RST_BACKLOG;
		v->rst_len--;
	}
	i = (v->rst_head + v->rst_len) % VSOCK_RST_BACKLOG;
	v->rst[i].cid = cid;
	v->rst[i].guest_port = guest_port;
	v->rst[i].host_port = host_port;
	v->rst_len++;
}

/* The connection is over: the guest gets an RST (unless it sent one) and
 * nothing else; the device closes its host side. */
static enum vsock_act conn_reset(struct vsock *v, struct vsock_conn *c, bool send_rst)
{
	/* Once: its RST is owed and its CLOSE was asked for already. */
	if (c->state == VSOCK_DEAD)
		return VSOCK_ACT_NONE;
	untime(v, c);
	c->state = VSOCK_DEAD;
	ring_drop(v, c);
	c->pending = 0;
	if (send_rst)
		owe(v, c, VSOCK_OWE_RST);
	if (c->host_busy)
		return VSOCK_ACT_CLOSE;
	maybe_free(v, c);
	return VSOCK_ACT_NONE;
}

static uint32_t peer_credit(const struct vsock_conn *c)
{
	uint32_t in_flight = c->tx_cnt - c->peer_fwd_cnt;

	/* A guest that claims to have consumed more than we sent, or that
	 * shrank its buffer below what is in flight, gives no credit. */
	if (in_flight > c->peer_buf_alloc)
		return 0;
	return c->peer_buf_alloc - in_flight;
}

static void ring_put(struct vsock_conn *c, const struct iovec *iov, unsigned nseg, uint32_t len)
{
	uint32_t tail = (c->ring.head + c->ring.len) % c->ring.size;
	uint32_t left = len;

	for (unsigned s = 0; s < nseg && left; s++) {
		const uint8_t *p = iov[s].iov_base;
		size_t n = iov[s].iov_len < left ? iov[s].iov_len : left;

		left -= (uint32_t)n;
		while (n) {
			size_t k = c->ring.size - tail;

			if (k > n)
				k = n;
			memcpy(c->ring.buf + tail, p, k);
			p += k;
			n -= k;
			tail = (tail + (uint32_t)k) % c->ring.size;
		}
	}
	c->ring.len += len;
	c->ring.touched = true;
}

unsigned vsock_ring_peek(const struct vsock_conn *c, struct iovec iov[2])
{
	uint32_t first = c->ring.size - c->ring.head;

	if (!c->ring.len)
		return 0;
	iov[0].iov_base = c->ring.buf + c->ring.head;
	if (c->ring.len <= first) {
		iov[0].iov_len = c->ring.len;
		return 1;
	}
	iov[0].iov_len = first;
	iov[1].iov_base = c->ring.buf;
	iov[1].iov_len = c->ring.len - first;
	return 2;
}

static enum vsock_act rw_from_guest(struct vsock *v, struct vsock_conn *c,
				    const struct vsock_hdr *h, const struct iovec *payload,
				    unsigned nseg, enum vsock_bad *bad)
{
	if (c->state != VSOCK_ESTABLISHED || (c->shut_rcvd & VIRTIO_VSOCK_SHUTDOWN_SEND)) {
		*bad = VSOCK_BAD_OP;
		return conn_reset(v, c, true);
	}
	if (!h->len)
		return VSOCK_ACT_NONE;      /* nothing to deliver, nothing wrong */
	/* §5.10.6.3: the sender never sends more than the credit it was
	 * given; what the guest was given is our ring's free space. */
	if (c->ring.len + (uint64_t)h->len > c->ring.size) {
		*bad = VSOCK_BAD_CREDIT;
		return conn_reset(v, c, true);
	}
	ring_put(c, payload, nseg, h->len);
	c->rx_cnt += h->len;
	v->buffered += h->len;
	return VSOCK_ACT_DATA;
}

/* Everything the guest sent has reached the host: carry out the
 * SHUTDOWN it sent. Both ways shut: the peer that got the SHUTDOWN resets
 * (what Linux does), and the connection is over; SEND: the host socket's
 * write side is shut. */
static enum vsock_act drained(struct vsock *v, struct vsock_conn *c)
{
	if (c->shut_rcvd == (VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND))
		return conn_reset(v, c, true);
	if ((c->shut_rcvd & VIRTIO_VSOCK_SHUTDOWN_SEND) && !c->host_wr_shut) {
		c->host_wr_shut = true;
		return VSOCK_ACT_SHUT_WR;
	}
	return VSOCK_ACT_NONE;
}

static enum vsock_act shutdown_from_guest(struct vsock *v, struct vsock_conn *c,
					  const struct vsock_hdr *h, enum vsock_bad *bad)
{
	if (c->state != VSOCK_ESTABLISHED) {
		*bad = VSOCK_BAD_OP;
		return conn_reset(v, c, true);
	}
	c->shut_rcvd |= h->flags & (VIRTIO_VSOCK_SHUTDOWN_RCV | VIRTIO_VSOCK_SHUTDOWN_SEND);
	if (c->ring.len)
		return VSOCK_ACT_NONE;      /* vsock_wrote_host goes on when it drains */
	return drained(v, c);
}

static enum vsock_act conn_packet(struct vsock *v, struct vsock_conn *c, const struct vsock_hdr *h,
				  const struct iovec *payload, unsigned nseg, enum vsock_bad *bad)
{
	enum vsock_act act = VSOCK_ACT_NONE;

	if (c->state == VSOCK_DEAD)
		return VSOCK_ACT_NONE;      /* its RST is on the way */
	/* Every header carries the sender's credit (§5.10.6.3). */
	c->peer_buf_alloc = h->buf_alloc;
	c->peer_fwd_cnt = h->fwd_cnt;
	switch (h->op) {
	case VIRTIO_VSOCK_OP_REQUEST:       /* a second REQUEST on a live connection */
		*bad = VSOCK_BAD_OP;
		return conn_reset(v, c, true);
	case VIRTIO_VSOCK_OP_RESPONSE:
		if (c->state != VSOCK_HOST_CONNECTING) {
			*bad = VSOCK_BAD_OP;
			return conn_reset(v, c, true);
		}
		untime(v, c);
		c->state = VSOCK_ESTABLISHED;
		return VSOCK_ACT_CONNECTED;
	case VIRTIO_VSOCK_OP_RST:
		ST_ADD(v, rst_rcvd, 1);
		return conn_reset(v, c, false);
	case VIRTIO_VSOCK_OP_SHUTDOWN:
		act = shutdown_from_guest(v, c, h, bad);
		break;
	case VIRTIO_VSOCK_OP_RW:
		act = rw_from_guest(v, c, h, payload, nseg, bad);
		break;
	case VIRTIO_VSOCK_OP_CREDIT_UPDATE:
		break;
	case VIRTIO_VSOCK_OP_CREDIT_REQUEST:
		owe(v, c, VSOCK_OWE_CREDIT_UPDATE);
		break;
	default:
		*bad = VSOCK_BAD_OP;
		return conn_reset(v, c, true);
	}
	if (c->state == VSOCK_ESTABLISHED && c->credit_stalled && peer_credit(c)) {
		c->credit_stalled = false;
		c->pending &= ~VSOCK_OWE_CREDIT_REQUEST;
		act |= VSOCK_ACT_RESUME;
	}
	return act;
}

static void count_bad(struct vsock *v, enum vsock_bad kind, enum vsock_bad *bad)
{
	*bad = kind;
	ST_ADD(v, bad, 1);
	ST_ADD(v, bad_kind[kind], 1);
}

void vsock_bad_chain(struct vsock *v)
{
	enum vsock_bad kind;

	ST_ADD(v, pkts_from_guest, 1);
	count_bad(v, VSOCK_BAD_CHAIN, &kind);
}

enum vsock_act vsock_from_guest(struct vsock *v, const struct vsock_hdr *h,
				const struct iovec *payload, unsigned nseg,
				uint64_t payload_len, struct vsock_conn **connp,
				enum vsock_bad *bad)
{
	enum vsock_bad kind = VSOCK_BAD_KINDS;
	struct vsock_conn *c;
	enum vsock_act act;

	*connp = NULL;
	*bad = VSOCK_BAD_KINDS;
	ST_ADD(v, pkts_from_guest, 1);
	/* Another VM's CID, or none: not the guest's to use, and no reply can
	 * go to it. */
	if (h->src_cid != v->guest_cid) {
		count_bad(v, VSOCK_BAD_CID, bad);
		return VSOCK_ACT_NONE;
	}
	c = lookup(v, h->src_port, h->dst_port);
	*connp = c;
	if (h->dst_cid != VSOCK_HOST_CID)
		kind = VSOCK_BAD_DST;
	else if (h->type != VIRTIO_VSOCK_TYPE_STREAM)
		kind = VSOCK_BAD_TYPE;
	else if (h->op == VIRTIO_VSOCK_OP_RW && (h->len > payload_len || h->len > VSOCK_MAX_PKT))
		kind = VSOCK_BAD_LEN;
	if (kind != VSOCK_BAD_KINDS) {
		/* Malformed: its connection (if any) is reset, or the address
		 * it named gets an RST; an RST itself is never answered. */
		count_bad(v, kind, bad);
		if (c)
			return conn_reset(v, c, h->op != VIRTIO_VSOCK_OP_RST);
		if (h->op != VIRTIO_VSOCK_OP_RST)
			owe_rst_tuple(v, h->dst_cid, h->src_port, h->dst_port);
		return VSOCK_ACT_NONE;
	}
	/* A connection that is over and has told the guest so, whose host
	 * side the device has not let go of yet: a REQUEST on its ports is
	 * the guest's next connection (Linux reconnects from a bound port),
	 * and the old one leaves the hash for it. */
	if (c && c->state == VSOCK_DEAD && h->op == VIRTIO_VSOCK_OP_REQUEST && !c->pending &&
	    !c->on_pending) {
		unhash(v, c);
		c = *connp = NULL;
	}
	if (c) {
		act = conn_packet(v, c, h, payload, nseg, &kind);
		if (kind != VSOCK_BAD_KINDS)
			count_bad(v, kind, bad);
		return act;
	}
	if (h->op == VIRTIO_VSOCK_OP_REQUEST) {
		c = conn_new(v, h->src_port, h->dst_port, VSOCK_GUEST_CONNECTING);
		if (!c) {
			ST_ADD(v, conn_limit, 1);
			owe_rst_tuple(v, h->dst_cid, h->src_port, h->dst_port);
			return VSOCK_ACT_NONE;
		}
		c->peer_buf_alloc = h->buf_alloc;
		c->peer_fwd_cnt = h->fwd_cnt;
		ST_ADD(v, conns_guest, 1);
		*connp = c;
		return VSOCK_ACT_CONNECT;
	}
	if (h->op == VIRTIO_VSOCK_OP_RST)
		return VSOCK_ACT_NONE;
	/* §5.10.6.4: a packet for no socket is answered with RST. Data for
	 * none is the guest's mistake; a control packet may just have
	 * crossed our RST. */
	owe_rst_tuple(v, h->dst_cid, h->src_port, h->dst_port);
	if (h->op == VIRTIO_VSOCK_OP_RW)
		count_bad(v, VSOCK_BAD_NOCONN, bad);
	return VSOCK_ACT_NONE;
}

bool vsock_can_take(const struct vsock *v)
{
	return v->rst_len < VSOCK_RST_BACKLOG;
}

struct vsock_conn *vsock_host_connect(struct vsock *v, uint32_t guest_port, uint64_t now_ns)
{
	struct vsock_conn *c;
	uint32_t port;

	if (v->free_head == NONE) {
		ST_ADD(v, conn_limit, 1);
		return NULL;
	}
	/* At most max_conns ports are taken: a free one is near. */
	do {
		port = v->next_host_port;
		v->next_host_port = port == UINT32_MAX - 1 ? VSOCK_HOST_PORT_FIRST : port + 1;
	} while (lookup(v, guest_port, port));
	c = conn_new(v, guest_port, port, VSOCK_HOST_CONNECTING);
	c->deadline_ns = now_ns + VSOCK_CONNECT_TIMEOUT_NS;
	c->timed = true;
	v->connecting++;
	ST_ADD(v, conns_host, 1);
	owe(v, c, VSOCK_OWE_REQUEST);
	return c;
}

enum vsock_act vsock_connect_done(struct vsock *v, struct vsock_conn *c, bool ok)
{
	if (c->state != VSOCK_GUEST_CONNECTING)
		return VSOCK_ACT_NONE;      /* reset meanwhile: its CLOSE is under way */
	if (!ok) {
		ST_ADD(v, no_listener, 1);
		return conn_reset(v, c, true);
	}
	untime(v, c);
	c->state = VSOCK_ESTABLISHED;
	owe(v, c, VSOCK_OWE_RESPONSE);
	return VSOCK_ACT_NONE;
}

void vsock_connect_begun(struct vsock *v, struct vsock_conn *c, uint64_t now_ns)
{
	if (c->state != VSOCK_GUEST_CONNECTING || c->timed)
		return;
	c->deadline_ns = now_ns + VSOCK_CONNECT_TIMEOUT_NS;
	c->timed = true;
	v->connecting++;
}

enum vsock_act vsock_wrote_host(struct vsock *v, struct vsock_conn *c, uint32_t n)
{
	if (c->state != VSOCK_ESTABLISHED || n > c->ring.len)
		return VSOCK_ACT_NONE;
	c->ring.head = (c->ring.head + n) % c->ring.size;
	c->ring.len -= n;
	c->fwd_cnt += n;
	v->buffered -= n;
	ST_ADD(v, bytes_to_host, n);
	/* Linux's rule: tell the guest once the space it knows of is below
	 * one full packet (every header we send tells it too). */
	if (v->buf_alloc - (c->rx_cnt - c->fwd_cnt_told) < VSOCK_MAX_PKT &&
	    c->fwd_cnt != c->fwd_cnt_told)
		owe(v, c, VSOCK_OWE_CREDIT_UPDATE);
	if (c->ring.len)
		return VSOCK_ACT_DATA;
	return drained(v, c);
}

uint32_t vsock_data_room(struct vsock *v, struct vsock_conn *c)
{
	uint32_t room;

	if (c->state != VSOCK_ESTABLISHED || c->host_eof ||
	    (c->shut_rcvd & VIRTIO_VSOCK_SHUTDOWN_RCV))
		return 0;
	room = peer_credit(c);
	if (!room) {
		if (!c->credit_stalled) {
			c->credit_stalled = true;
			ST_ADD(v, credit_stalls, 1);
			owe(v, c, VSOCK_OWE_CREDIT_REQUEST);
		}
		return 0;
	}
	return room < VSOCK_MAX_PKT ? room : VSOCK_MAX_PKT;
}

uint32_t vsock_credit(const struct vsock_conn *c)
{
	return peer_credit(c);
}

static void hdr_for(const struct vsock *v, const struct vsock_conn *c, uint16_t op,
		    struct vsock_hdr *h)
{
	memset(h, 0, sizeof(*h));
	h->src_cid = VSOCK_HOST_CID;
	h->dst_cid = v->guest_cid;
	h->src_port = c->host_port;
	h->dst_port = c->guest_port;
	h->type = VIRTIO_VSOCK_TYPE_STREAM;
	h->op = op;
	h->buf_alloc = v->buf_alloc;
	h->fwd_cnt = c->fwd_cnt;
}

void vsock_data_sent(struct vsock *v, struct vsock_conn *c, uint32_t n, struct vsock_hdr *h)
{
	hdr_for(v, c, VIRTIO_VSOCK_OP_RW, h);
	h->len = n;
	c->tx_cnt += n;
	c->fwd_cnt_told = c->fwd_cnt;
	c->pending &= ~VSOCK_OWE_CREDIT_UPDATE;    /* this header says it */
	ST_ADD(v, pkts_to_guest, 1);
	ST_ADD(v, bytes_to_guest, n);
}

enum vsock_act vsock_host_eof(struct vsock *v, struct vsock_conn *c, bool err)
{
	if (c->state == VSOCK_DEAD || c->state == VSOCK_FREE)
		return VSOCK_ACT_NONE;
	if (err || c->state != VSOCK_ESTABLISHED)
		return conn_reset(v, c, true);
	if (c->host_eof)
		return VSOCK_ACT_NONE;
	c->host_eof = true;
	c->shut_sent |= VIRTIO_VSOCK_SHUTDOWN_SEND;
	owe(v, c, VSOCK_OWE_SHUTDOWN);
	return VSOCK_ACT_NONE;
}

enum vsock_act vsock_tick(struct vsock *v, uint64_t now_ns, struct vsock_conn **connp)
{
	*connp = NULL;
	if (!v->connecting)
		return VSOCK_ACT_NONE;
	for (unsigned i = 0; i < v->max_conns; i++) {
		struct vsock_conn *c = &v->conns[i];

		if (c->timed && now_ns >= c->deadline_ns) {
			ST_ADD(v, timeouts, 1);
			*connp = c;
			return conn_reset(v, c, true);
		}
	}
	return VSOCK_ACT_NONE;
}

uint64_t vsock_next_deadline(const struct vsock *v)
{
	uint64_t d = UINT64_MAX;

	if (!v->connecting)
		return d;
	for (unsigned i = 0; i < v->max_conns; i++)
		if (v->conns[i].timed && v->conns[i].deadline_ns < d)
			d = v->conns[i].deadline_ns;
	return d;
}

void vsock_release(struct vsock *v, struct vsock_conn *c)
{
	c->host_busy = false;
	if (c->state != VSOCK_DEAD)
		conn_reset(v, c, true);
	maybe_free(v, c);
}

/* The order a connection's packets must go in, first to last. */
static const struct { unsigned bit; uint16_t op; } owed_order[] = {
	{ VSOCK_OWE_RST, VIRTIO_VSOCK_OP_RST },
	{ VSOCK_OWE_REQUEST, VIRTIO_VSOCK_OP_REQUEST },
	{ VSOCK_OWE_RESPONSE, VIRTIO_VSOCK_OP_RESPONSE },
	{ VSOCK_OWE_SHUTDOWN, VIRTIO_VSOCK_OP_SHUTDOWN },
	{ VSOCK_OWE_CREDIT_UPDATE, VIRTIO_VSOCK_OP_CREDIT_UPDATE },
	{ VSOCK_OWE_CREDIT_REQUEST, VIRTIO_VSOCK_OP_CREDIT_REQUEST },
};

/* The list's head owes nothing more: off the list. */
static void pending_pop(struct vsock *v, struct vsock_conn *c)
{
	v->pending_head = c->next_pending;
	if (v->pending_head == NONE)
		v->pending_tail = NONE;
	c->on_pending = false;
}

static bool next_conn_ctl(struct vsock *v, struct vsock_hdr *h)
{
	while (v->pending_head != NONE) {
		struct vsock_conn *c = &v->conns[v->pending_head];
		unsigned k = 0;
		uint16_t op;

		if (!c->pending) {
			pending_pop(v, c);
			maybe_free(v, c);
			continue;
		}
		while (!(c->pending & owed_order[k].bit))
			k++;
		op = owed_order[k].op;
		c->pending &= ~owed_order[k].bit;
		hdr_for(v, c, op, h);
		if (!c->pending)
			pending_pop(v, c);
		c->fwd_cnt_told = c->fwd_cnt;
		if (op == VIRTIO_VSOCK_OP_SHUTDOWN)
			h->flags = c->shut_sent;
		if (op == VIRTIO_VSOCK_OP_RST)
			ST_ADD(v, rst_sent, 1);
		if (op == VIRTIO_VSOCK_OP_CREDIT_UPDATE)
			ST_ADD(v, credit_updates, 1);
		ST_ADD(v, pkts_to_guest, 1);
		maybe_free(v, c);           /* its last packet: h holds what it needs */
		return true;
	}
	return false;
}

bool vsock_next_ctl(struct vsock *v, struct vsock_hdr *h)
{
	if (v->rst_len) {
		memset(h, 0, sizeof(*h));
		h->src_cid = v->rst[v->rst_head].cid;
		h->dst_cid = v->guest_cid;
		h->src_port = v->rst[v->rst_head].host_port;
		h->dst_port = v->rst[v->rst_head].guest_port;
		h->type = VIRTIO_VSOCK_TYPE_STREAM;
		h->op = VIRTIO_VSOCK_OP_RST;
		v->rst_head = (v->rst_head + 1) % VSOCK_RST_BACKLOG;
		v->rst_len--;
		ST_ADD(v, rst_sent, 1);
		ST_ADD(v, pkts_to_guest, 1);
		return true;
	}
	return next_conn_ctl(v, h);
}

bool vsock_reset_next(struct vsock *v, struct vsock_conn **connp)
{
	v->rst_len = 0;
	v->pending_head = v->pending_tail = NONE;
	for (unsigned i = 0; i < v->max_conns; i++) {
		struct vsock_conn *c = &v->conns[i];

		if (c->state == VSOCK_FREE)
			continue;
		c->on_pending = false;
		c->pending = 0;
		if (c->state != VSOCK_DEAD) {
			untime(v, c);
			c->state = VSOCK_DEAD;
			ring_drop(v, c);
			if (c->host_busy) {
				*connp = c;
				return true;
			}
		} else if (c->host_busy) {
			/* Dead already: the device was told to close it then. */
			continue;
		}
		conn_free(v, c);
	}
	*connp = NULL;
	return false;
}

struct vsock_conn *vsock_conn_get(struct vsock *v, uint32_t id, uint32_t gen)
{
	if (id >= v->max_conns || v->conns[id].gen != gen || v->conns[id].state == VSOCK_FREE)
		return NULL;
	return &v->conns[id];
}

static bool line_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Read as Firecracker's muxer reads it (and Cloud Hypervisor's, its copy):
 * the line split at white space, its first word "connect" in any case, its
 * second a port as Rust's u32 parse takes it (an optional '+', digits),
 * words after it ignored. So whatever client works with them works here. */
int vsock_parse_connect(const char *buf, size_t len, uint32_t *port, size_t *line_len)
{
	static const char verb[] = "connect";
	const char *nl = memchr(buf, '\n', len);
	size_t i = 0, end, w;
	uint64_t p = 0;

	if (!nl)
		return len >= VSOCK_LINE_MAX ? -EINVAL : 0;
	end = (size_t)(nl - buf);
	if (end >= VSOCK_LINE_MAX)
		return -EINVAL;
	while (i < end && line_space(buf[i]))
		i++;
	for (w = 0; w < sizeof(verb) - 1; w++, i++)
		if (i >= end || (buf[i] | 0x20) != verb[w])
			return -EINVAL;
	if (i >= end || !line_space(buf[i]))
		return -EINVAL;
	while (i < end && line_space(buf[i]))
		i++;
	if (i < end && buf[i] == '+')
		i++;
	if (i >= end || buf[i] < '0' || buf[i] > '9')
		return -EINVAL;
	for (; i < end && buf[i] >= '0' && buf[i] <= '9'; i++) {
		p = p * 10 + (uint64_t)(buf[i] - '0');
		if (p > UINT32_MAX)
			return -EINVAL;
	}
	if (i < end && !line_space(buf[i]))
		return -EINVAL;
	*port = (uint32_t)p;
	*line_len = end + 1;
	return 1;
}

size_t vsock_format_ok(char *out, uint32_t port)
{
	return (size_t)snprintf(out, VSOCK_LINE_MAX, "OK %u\n", port);
}
