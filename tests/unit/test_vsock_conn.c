/* virtio-vsock's protocol core (devices/vsock_conn.c), KVM-free: the
 * header, the connection state machine, credit accounting, resets owed
 * to the guest, and the hybrid vsock handshake line. */
#include "devices/vsock_conn.h"

#include <errno.h>

#include "tests/unit/check.h"

#define CID 3u
#define GPORT 5000u            /* the guest's port */
#define HPORT 1234u            /* a host listener's port (PATH_1234) */

static struct vsock v;

static void setup(unsigned conns, uint64_t buffered)
{
	CHECK_EQ(vsock_init(&v, CID, conns, buffered), 0);
}

static struct vsock_hdr pkt(uint16_t op, uint32_t gport, uint32_t hport)
{
	struct vsock_hdr h = {
		.src_cid = CID, .dst_cid = VSOCK_HOST_CID, .src_port = gport, .dst_port = hport,
		.type = VIRTIO_VSOCK_TYPE_STREAM, .op = op, .buf_alloc = 1u << 20,
	};
	return h;
}

static enum vsock_act send_h(const struct vsock_hdr *h, const void *data, uint64_t chain,
			     struct vsock_conn **c, enum vsock_bad *bad)
{
	struct iovec iov = { .iov_base = (void *)data, .iov_len = chain };
	struct vsock_conn *dummy_c;
	enum vsock_bad dummy_b;

	return vsock_from_guest(&v, h, &iov, 1, chain, c ? c : &dummy_c, bad ? bad : &dummy_b);
}

static enum vsock_act send_op(uint16_t op, uint32_t gport, uint32_t hport, struct vsock_conn **c)
{
	struct vsock_hdr h = pkt(op, gport, hport);

	return send_h(&h, NULL, 0, c, NULL);
}

/* The next control packet owed to the guest must be op (0: none). */
static struct vsock_hdr expect_ctl(uint16_t op)
{
	struct vsock_hdr h;
	bool got = vsock_next_ctl(&v, &h);

	if (!op) {
		CHECK(!got);
		return h;
	}
	CHECK(got);
	CHECK_EQ(h.op, op);
	CHECK_EQ(h.src_cid, VSOCK_HOST_CID);
	CHECK_EQ(h.dst_cid, CID);
	CHECK_EQ(h.type, VIRTIO_VSOCK_TYPE_STREAM);
	return h;
}

/* A guest connection to HPORT that the host accepted. */
static struct vsock_conn *established(uint32_t gport)
{
	struct vsock_conn *c;

	CHECK_EQ(send_op(VIRTIO_VSOCK_OP_REQUEST, gport, HPORT, &c), VSOCK_ACT_CONNECT);
	CHECK(c);
	CHECK_EQ(vsock_connect_done(&v, c, true), VSOCK_ACT_NONE);
	CHECK_EQ(c->state, VSOCK_ESTABLISHED);
	return c;
}

static enum vsock_act rw(uint32_t gport, const void *data, uint32_t len)
{
	struct vsock_hdr h = pkt(VIRTIO_VSOCK_OP_RW, gport, HPORT);

	h.len = len;
	return send_h(&h, data, len, NULL, NULL);
}

static enum vsock_act shut(uint32_t gport, uint32_t flags)
{
	struct vsock_hdr h = pkt(VIRTIO_VSOCK_OP_SHUTDOWN, gport, HPORT);

	h.flags = flags;
	return send_h(&h, NULL, 0, NULL, NULL);
}

TEST(header_is_little_endian_44_bytes)
{
	struct vsock_hdr h = {
		.src_cid = 0x0102030405060708ull, .dst_cid = 2, .src_port = 0x11223344,
		.dst_port = 0x55667788, .len = 0x99, .type = 1, .op = 5, .flags = 3,
		.buf_alloc = 0xabcdef01, .fwd_cnt = 0x10203040,
	}, back;
	uint8_t b[VSOCK_HDR_LEN];

	CHECK_EQ(sizeof(struct virtio_vsock_hdr), VSOCK_HDR_LEN);
	vsock_hdr_encode(&h, b);
	CHECK_EQ(b[0], 0x08);
	CHECK_EQ(b[7], 0x01);
	CHECK_EQ(b[16], 0x44);
	CHECK_EQ(b[28], 1);
	CHECK_EQ(b[30], 5);
	CHECK_EQ(b[43], 0x10);
	vsock_hdr_decode(b, &back);
	CHECK(back.src_cid == h.src_cid && back.dst_cid == h.dst_cid);
	CHECK(back.src_port == h.src_port && back.dst_port == h.dst_port);
	CHECK(back.len == h.len && back.type == h.type && back.op == h.op);
	CHECK(back.flags == h.flags && back.buf_alloc == h.buf_alloc);
	CHECK(back.fwd_cnt == h.fwd_cnt);
}

TEST(guest_connect_gets_response_when_the_host_listens)
{
	struct vsock_conn *c;
	struct vsock_hdr r;

	setup(8, 2u << 20);
	c = established(GPORT);
	r = expect_ctl(VIRTIO_VSOCK_OP_RESPONSE);
	CHECK_EQ(r.src_port, HPORT);
	CHECK_EQ(r.dst_port, GPORT);
	CHECK_EQ(r.buf_alloc, VSOCK_BUF_ALLOC);
	expect_ctl(0);
	CHECK_EQ(v.st.conns_guest, 1);
	CHECK_EQ(v.st.conns_open, 1);
	CHECK(vsock_conn_get(&v, c->id, c->gen) == c);
	CHECK(!vsock_conn_get(&v, c->id, c->gen + 1));
	vsock_fini(&v);
}

TEST(guest_connect_without_listener_gets_rst_and_frees)
{
	struct vsock_conn *c;

	setup(8, 2u << 20);
	CHECK_EQ(send_op(VIRTIO_VSOCK_OP_REQUEST, GPORT, HPORT, &c), VSOCK_ACT_CONNECT);
	CHECK_EQ(vsock_connect_done(&v, c, false), VSOCK_ACT_CLOSE);
	vsock_release(&v, c);
	expect_ctl(VIRTIO_VSOCK_OP_RST);
	expect_ctl(0);
	CHECK_EQ(v.st.no_listener, 1);
	CHECK_EQ(v.st.conns_open, 0);
	CHECK_EQ(v.st.bad, 0);
	vsock_fini(&v);
}

TEST(host_connect_sends_request_and_response_connects)
{
	struct vsock_conn *c, *g;
	struct vsock_hdr r;

	setup(8, 2u << 20);
	c = vsock_host_connect(&v, 1024, 0);
	CHECK(c);
	CHECK(c->host_port >= VSOCK_HOST_PORT_FIRST);
	r = expect_ctl(VIRTIO_VSOCK_OP_REQUEST);
	CHECK_EQ(r.dst_port, 1024);
	CHECK_EQ(r.src_port, c->host_port);
	CHECK_EQ(send_op(VIRTIO_VSOCK_OP_RESPONSE, 1024, c->host_port, &g), VSOCK_ACT_CONNECTED);
	CHECK(g == c);
	CHECK_EQ(c->state, VSOCK_ESTABLISHED);
	CHECK_EQ(vsock_next_deadline(&v), UINT64_MAX);
	vsock_fini(&v);
}

TEST(host_connect_unanswered_times_out_with_rst)
{
	struct vsock_conn *c, *t;

	setup(8, 2u << 20);
	c = vsock_host_connect(&v, 1024, 1000);
	expect_ctl(VIRTIO_VSOCK_OP_REQUEST);
	CHECK_EQ(vsock_next_deadline(&v), 1000 + VSOCK_CONNECT_TIMEOUT_NS);
	CHECK_EQ(vsock_tick(&v, 1000 + VSOCK_CONNECT_TIMEOUT_NS - 1, &t), VSOCK_ACT_NONE);
	CHECK_EQ(vsock_tick(&v, 1000 + VSOCK_CONNECT_TIMEOUT_NS, &t), VSOCK_ACT_CLOSE);
	CHECK(t == c);
	vsock_release(&v, c);
	expect_ctl(VIRTIO_VSOCK_OP_RST);
	CHECK_EQ(v.st.timeouts, 1);
	CHECK_EQ(v.st.conns_open, 0);
	vsock_fini(&v);
}

TEST(guest_refusing_host_connect_closes_it)
{
	struct vsock_conn *c, *g;

	setup(8, 2u << 20);
	c = vsock_host_connect(&v, 1024, 0);
	expect_ctl(VIRTIO_VSOCK_OP_REQUEST);
	CHECK_EQ(send_op(VIRTIO_VSOCK_OP_RST, 1024, c->host_port, &g), VSOCK_ACT_CLOSE);
	vsock_release(&v, c);
	expect_ctl(0);               /* an RST is never answered */
	CHECK_EQ(v.st.conns_open, 0);
	CHECK_EQ(v.st.rst_rcvd, 1);
	vsock_fini(&v);
}

TEST(spoofed_src_cid_is_dropped_unanswered)
{
	struct vsock_hdr h = pkt(VIRTIO_VSOCK_OP_REQUEST, GPORT, HPORT);
	enum vsock_bad bad;

	setup(8, 2u << 20);
	h.src_cid = 4;               /* another VM's */
	CHECK_EQ(send_h(&h, NULL, 0, NULL, &bad), VSOCK_ACT_NONE);
	CHECK_EQ(bad, VSOCK_BAD_CID);
	expect_ctl(0);
	CHECK_EQ(v.st.conns_open, 0);
	CHECK_EQ(v.st.bad_kind[VSOCK_BAD_CID], 1);
	vsock_fini(&v);
}

TEST(wrong_dst_cid_type_or_op_gets_rst)
{
	struct vsock_hdr h;
	enum vsock_bad bad;
	struct vsock_conn *c;

	setup(8, 2u << 20);
	h = pkt(VIRTIO_VSOCK_OP_REQUEST, GPORT, HPORT);
	h.dst_cid = 7;
	send_h(&h, NULL, 0, NULL, &bad);
	CHECK_EQ(bad, VSOCK_BAD_DST);
	/* From the address the guest named: its socket is found by it. */
	CHECK(vsock_next_ctl(&v, &h));
	CHECK_EQ(h.op, VIRTIO_VSOCK_OP_RST);
	CHECK_EQ(h.src_cid, 7);
	CHECK_EQ(h.dst_port, GPORT);
	h = pkt(VIRTIO_VSOCK_OP_REQUEST, GPORT, HPORT);
	h.type = VIRTIO_VSOCK_TYPE_SEQPACKET;
	send_h(&h, NULL, 0, NULL, &bad);
	CHECK_EQ(bad, VSOCK_BAD_TYPE);
	expect_ctl(VIRTIO_VSOCK_OP_RST);
	/* An unknown op on a live connection resets it. */
	c = established(GPORT);
	expect_ctl(VIRTIO_VSOCK_OP_RESPONSE);
	h = pkt(99, GPORT, HPORT);
	CHECK_EQ(send_h(&h, NULL, 0, NULL, &bad), VSOCK_ACT_CLOSE);
	CHECK_EQ(bad, VSOCK_BAD_OP);
	vsock_release(&v, c);
	expect_ctl(VIRTIO_VSOCK_OP_RST);
	expect_ctl(0);
	CHECK_EQ(v.st.conns_open, 0);
	CHECK_EQ(v.st.bad, 3);
	vsock_fini(&v);
}

/* A connection being reset is reset once: a malformed packet that
 * crosses its RST neither cancels that RST nor asks for a second close. */
TEST(malformed_packet_on_a_dying_connection_changes_nothing)
{
	struct vsock_hdr h;
	struct vsock_conn *c;

	setup(8, 2u << 20);
	c = established(GPORT);
	expect_ctl(VIRTIO_VSOCK_OP_RESPONSE);
	CHECK_EQ(send_op(99, GPORT, HPORT, NULL), VSOCK_ACT_CLOSE);
	h = pkt(VIRTIO_VSOCK_OP_RST, GPORT, HPORT);
	h.type = 77;
	CHECK_EQ(send_h(&h, NULL, 0, NULL, NULL), VSOCK_ACT_NONE);
	vsock_release(&v, c);
	expect_ctl(VIRTIO_VSOCK_OP_RST);
	expect_ctl(0);
	CHECK_EQ(v.st.conns_open, 0);
	vsock_fini(&v);
}

TEST(len_beyond_the_chain_resets_the_connection)
{
	static uint8_t buf[100];
	struct vsock_hdr h;
	enum vsock_bad bad;

	setup(8, 2u << 20);
	established(GPORT);
	expect_ctl(VIRTIO_VSOCK_OP_RESPONSE);
	h = pkt(VIRTIO_VSOCK_OP_RW, GPORT, HPORT);
	h.len = 101;
	CHECK_EQ(send_h(&h, buf, sizeof(buf), NULL, &bad), VSOCK_ACT_CLOSE);
	CHECK_EQ(bad, VSOCK_BAD_LEN);
	expect_ctl(VIRTIO_VSOCK_OP_RST);
	CHECK_EQ(v.buffered, 0);
	vsock_fini(&v);
}

TEST(data_beyond_the_credit_given_resets)
{
	static uint8_t buf[VSOCK_MAX_PKT];
	enum vsock_bad bad;
	struct vsock_hdr h;
	unsigned i;

	setup(8, 4u << 20);
	established(GPORT);
	for (i = 0; i < VSOCK_BUF_ALLOC / VSOCK_MAX_PKT; i++)
		CHECK_EQ(rw(GPORT, buf, VSOCK_MAX_PKT), VSOCK_ACT_DATA);
	CHECK_EQ(v.buffered, VSOCK_BUF_ALLOC);
	h = pkt(VIRTIO_VSOCK_OP_RW, GPORT, HPORT);
	h.len = 1;
	CHECK_EQ(send_h(&h, buf, 1, NULL, &bad), VSOCK_ACT_CLOSE);
	CHECK_EQ(bad, VSOCK_BAD_CREDIT);
	CHECK_EQ(v.buffered, 0);
	vsock_fini(&v);
}

TEST(bytes_reach_the_host_in_order_and_credit_is_returned)
{
	static uint8_t buf[4 * VSOCK_MAX_PKT], out[4 * VSOCK_MAX_PKT];
	struct vsock_conn *c;
	struct iovec iov[2];
	size_t got = 0;
	unsigned i, n;

	setup(8, 4u << 20);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + i / 251);
	c = established(GPORT);
	expect_ctl(VIRTIO_VSOCK_OP_RESPONSE);
	/* Four full packets, the host taking odd amounts, with the ring
	 * wrapping: the same bytes come out. */
	for (i = 0; i < 4; i++) {
		CHECK_EQ(rw(GPORT, buf + i * VSOCK_MAX_PKT, VSOCK_MAX_PKT), VSOCK_ACT_DATA);
		while (c->ring.len > 1000) {
			n = vsock_ring_peek(c, iov);
			CHECK(n >= 1);
			memcpy(out + got, iov[0].iov_base, 777);
			got += 777;
			vsock_wrote_host(&v, c, 777);
		}
	}
	while (c->ring.len) {
		uint32_t k;

		n = vsock_ring_peek(c, iov);
		k = (uint32_t)iov[0].iov_len;
		memcpy(out + got, iov[0].iov_base, k);
		got += k;
		vsock_wrote_host(&v, c, k);
	}
	CHECK_EQ(got, sizeof(buf));
	CHECK(!memcmp(buf, out, sizeof(buf)));
	CHECK_EQ(c->fwd_cnt, sizeof(buf));
	CHECK_EQ(v.st.bytes_to_host, sizeof(buf));
	/* The guest heard of the space it can use again: it had sent all of
	 * the 256 KiB it was told of. */
	CHECK_EQ(expect_ctl(VIRTIO_VSOCK_OP_CREDIT_UPDATE).fwd_cnt, sizeof(buf));
	expect_ctl(0);
	vsock_fini(&v);
}

TEST(host_data_waits_for_the_guests_credit)
{
	struct vsock_conn *c;
	struct vsock_hdr h, r;

	setup(8, 2u << 20);
	CHECK_EQ(send_op(VIRTIO_VSOCK_OP_REQUEST, GPORT, HPORT, &c), VSOCK_ACT_CONNECT);
	vsock_connect_done(&v, c, true);
	c->peer_buf_alloc = 100000;
	CHECK_EQ(vsock_data_room(&v, c), VSOCK_MAX_PKT);
	vsock_data_sent(&v, c, VSOCK_MAX_PKT, &r);
	CHECK_EQ(r.op, VIRTIO_VSOCK_OP_RW);
	CHECK_EQ(r.len, VSOCK_MAX_PKT);
	CHECK_EQ(vsock_data_room(&v, c), 100000 - VSOCK_MAX_PKT);
	vsock_data_sent(&v, c, 100000 - VSOCK_MAX_PKT, &r);
	CHECK_EQ(vsock_data_room(&v, c), 0);
	CHECK_EQ(vsock_data_room(&v, c), 0);
	CHECK_EQ(v.st.credit_stalls, 1);
	expect_ctl(VIRTIO_VSOCK_OP_RESPONSE);
	expect_ctl(VIRTIO_VSOCK_OP_CREDIT_REQUEST);
	expect_ctl(0);
	/* The guest read some: its update lets the host side go on. */
	h = pkt(VIRTIO_VSOCK_OP_CREDIT_UPDATE, GPORT, HPORT);
	h.buf_alloc = 100000;
	h.fwd_cnt = 5000;
	CHECK_EQ(send_h(&h, NULL, 0, NULL, NULL), VSOCK_ACT_RESUME);
	CHECK_EQ(vsock_data_room(&v, c), 5000);
	/* A guest claiming to have read more than it got gives no credit. */
	h.fwd_cnt = 200000;
	send_h(&h, NULL, 0, NULL, NULL);
	CHECK_EQ(vsock_data_room(&v, c), 0);
	vsock_fini(&v);
}

/* The credit comes in every header: an RW packet that brings it back
 * (the guest reads and writes at once, as an echo's client does) asks
 * for both, its data to the host and the host socket read again. Were
 * the resume lost, host-to-guest data would stop for good. */
TEST(credit_back_on_a_data_packet_resumes_the_host_side_too)
{
	struct vsock_conn *c;
	struct vsock_hdr h, r;

	setup(8, 2u << 20);
	CHECK_EQ(send_op(VIRTIO_VSOCK_OP_REQUEST, GPORT, HPORT, &c), VSOCK_ACT_CONNECT);
	vsock_connect_done(&v, c, true);
	c->peer_buf_alloc = VSOCK_MAX_PKT;
	vsock_data_sent(&v, c, VSOCK_MAX_PKT, &r);
	CHECK_EQ(vsock_data_room(&v, c), 0);
	h = pkt(VIRTIO_VSOCK_OP_RW, GPORT, HPORT);
	h.buf_alloc = VSOCK_MAX_PKT;
	h.fwd_cnt = 4096;
	h.len = 3;
	CHECK_EQ(send_h(&h, "abc", 3, NULL, NULL), VSOCK_ACT_DATA | VSOCK_ACT_RESUME);
	CHECK_EQ(vsock_data_room(&v, c), 4096);
	/* Not stalled any more: the next header's credit resumes nothing. */
	h.fwd_cnt = 8192;
	CHECK_EQ(send_h(&h, "abc", 3, NULL, NULL), VSOCK_ACT_DATA);
	vsock_fini(&v);
}

TEST(credit_request_is_answered_with_credit_update)
{
	setup(8, 2u << 20);
	established(GPORT);
	expect_ctl(VIRTIO_VSOCK_OP_RESPONSE);
	CHECK_EQ(send_op(VIRTIO_VSOCK_OP_CREDIT_REQUEST, GPORT, HPORT, NULL), VSOCK_ACT_NONE);
	CHECK_EQ(expect_ctl(VIRTIO_VSOCK_OP_CREDIT_UPDATE).buf_alloc, VSOCK_BUF_ALLOC);
	vsock_fini(&v);
}

TEST(zero_length_rw_does_nothing)
{
	setup(8, 2u << 20);
	established(GPORT);
	expect_ctl(VIRTIO_VSOCK_OP_RESPONSE);
	CHECK_EQ(rw(GPORT, NULL, 0), VSOCK_ACT_NONE);
	expect_ctl(0);
	CHECK_EQ(v.st.bad, 0);
	vsock_fini(&v);
}

TEST(rw_without_connection_gets_rst)
{
	enum vsock_bad bad;
	struct vsock_hdr h = pkt(VIRTIO_VSOCK_OP_RW, GPORT, HPORT);
	struct vsock_hdr r;

	setup(8, 2u << 20);
	h.len = 4;
	CHECK_EQ(send_h(&h, "abcd", 4, NULL, &bad), VSOCK_ACT_NONE);
	CHECK_EQ(bad, VSOCK_BAD_NOCONN);
	r = expect_ctl(VIRTIO_VSOCK_OP_RST);
	CHECK_EQ(r.src_port, HPORT);
	CHECK_EQ(r.dst_port, GPORT);
	/* An RST for nothing is not answered. */
	send_op(VIRTIO_VSOCK_OP_RST, GPORT, HPORT, NULL);
	expect_ctl(0);
	vsock_fini(&v);
}

TEST(request_flood_gets_one_rst_each_and_holds_the_guest)
{
	unsigned i, rsts = 0;
	struct vsock_hdr r;

	setup(4, 1u << 20);
	for (i = 0; i < 4; i++)
		CHECK_EQ(send_op(VIRTIO_VSOCK_OP_REQUEST, 100 + i, HPORT, NULL), VSOCK_ACT_CONNECT);
	/* Beyond the VM's connections: refused, each with its RST, until
	 * the backlog of resets is full and the guest is held back. */
	for (i = 4; vsock_can_take(&v); i++)
		CHECK_EQ(send_op(VIRTIO_VSOCK_OP_REQUEST, 100 + i, HPORT, NULL), VSOCK_ACT_NONE);
	CHECK_EQ(i - 4, VSOCK_RST_BACKLOG);
	CHECK_EQ(v.st.conn_limit, VSOCK_RST_BACKLOG);
	while (vsock_next_ctl(&v, &r)) {
		CHECK_EQ(r.op, VIRTIO_VSOCK_OP_RST);
		CHECK_EQ(r.dst_port, 104 + rsts);
		rsts++;
	}
	CHECK_EQ(rsts, VSOCK_RST_BACKLOG);
	CHECK(vsock_can_take(&v));
	vsock_fini(&v);
}

TEST(guest_shutdown_send_half_closes_the_host_socket)
{
	struct vsock_conn *c;

	setup(8, 2u << 20);
	c = established(GPORT);
	expect_ctl(VIRTIO_VSOCK_OP_RESPONSE);
	CHECK_EQ(rw(GPORT, "xyz", 3), VSOCK_ACT_DATA);
	/* Data first: the half-close waits until the host took it. */
	CHECK_EQ(shut(GPORT, VIRTIO_VSOCK_SHUTDOWN_SEND), VSOCK_ACT_NONE);
	CHECK_EQ(vsock_wrote_host(&v, c, 3), VSOCK_ACT_SHUT_WR);
	/* It can still receive. */
	CHECK(vsock_data_room(&v, c) > 0);
	/* Data after its own SHUTDOWN(SEND) is a protocol error. */
	CHECK_EQ(rw(GPORT, "x", 1), VSOCK_ACT_CLOSE);
	vsock_fini(&v);
}

TEST(guest_shutdown_both_ways_is_answered_with_rst)
{
	struct vsock_conn *c;

	setup(8, 2u << 20);
	c = established(GPORT);
	expect_ctl(VIRTIO_VSOCK_OP_RESPONSE);
	CHECK_EQ(shut(GPORT, VIRTIO_VSOCK_SHUTDOWN_SEND | VIRTIO_VSOCK_SHUTDOWN_RCV),
		 VSOCK_ACT_CLOSE);
	CHECK_EQ(c->state, VSOCK_DEAD);
	expect_ctl(VIRTIO_VSOCK_OP_RST);
	CHECK_EQ(v.st.conns_open, 1);        /* until the host socket is closed */
	vsock_release(&v, c);
	CHECK_EQ(v.st.conns_open, 0);
	vsock_fini(&v);
}

TEST(host_eof_sends_shutdown_and_stops_data)
{
	struct vsock_conn *c;
	struct vsock_hdr r;

	setup(8, 2u << 20);
	c = established(GPORT);
	expect_ctl(VIRTIO_VSOCK_OP_RESPONSE);
	CHECK_EQ(vsock_host_eof(&v, c, false), VSOCK_ACT_NONE);
	r = expect_ctl(VIRTIO_VSOCK_OP_SHUTDOWN);
	CHECK_EQ(r.flags, VIRTIO_VSOCK_SHUTDOWN_SEND);
	CHECK_EQ(vsock_data_room(&v, c), 0);
	/* The guest may still send; a failed host write resets. */
	CHECK_EQ(rw(GPORT, "ab", 2), VSOCK_ACT_DATA);
	CHECK_EQ(vsock_host_eof(&v, c, true), VSOCK_ACT_CLOSE);
	expect_ctl(VIRTIO_VSOCK_OP_RST);
	vsock_fini(&v);
}

TEST(reset_drops_every_connection)
{
	struct vsock_conn *c;
	unsigned n = 0;

	setup(16, 4u << 20);
	for (unsigned i = 0; i < 10; i++) {
		established(GPORT + i);
		rw(GPORT + i, "data", 4);
	}
	vsock_host_connect(&v, 99, 0);
	CHECK_EQ(v.st.conns_open, 11);
	while (vsock_reset_next(&v, &c)) {
		CHECK_EQ(c->state, VSOCK_DEAD);
		vsock_release(&v, c);
		n++;
	}
	CHECK_EQ(n, 11);
	CHECK_EQ(v.st.conns_open, 0);
	CHECK_EQ(v.buffered, 0);
	CHECK_EQ(vsock_next_deadline(&v), UINT64_MAX);
	expect_ctl(0);
	/* And the table works again. */
	established(GPORT);
	expect_ctl(VIRTIO_VSOCK_OP_RESPONSE);
	vsock_fini(&v);
}

/* The device closes sockets asynchronously: a reset hands each live
 * connection out once, whether or not the device has let go of it yet,
 * and one that died before (its close asked for then) not again. */
TEST(reset_hands_each_connection_out_once_while_the_device_holds_it)
{
	struct vsock_conn *c, *dead, *got[4];
	unsigned n = 0;

	setup(16, 4u << 20);
	for (unsigned i = 0; i < 3; i++)
		established(GPORT + i);
	dead = established(GPORT + 3);
	CHECK_EQ(send_op(VIRTIO_VSOCK_OP_RST, GPORT + 3, HPORT, NULL), VSOCK_ACT_CLOSE);
	while (vsock_reset_next(&v, &c)) {
		CHECK(n < 4);
		CHECK(c != dead);
		got[n++] = c;
	}
	CHECK_EQ(n, 3);
	CHECK_EQ(v.st.conns_open, 4);          /* the device holds all of them */
	for (unsigned i = 0; i < n; i++)
		vsock_release(&v, got[i]);
	vsock_release(&v, dead);
	CHECK_EQ(v.st.conns_open, 0);
	expect_ctl(0);
	vsock_fini(&v);
}

/* A send of the ring's bytes may be in flight when the guest resets the
 * connection: the bytes are forgotten but their memory stays until the
 * device lets go (the sanitizer build reads it after the reset). */
TEST(ring_memory_outlives_a_reset_until_the_device_lets_go)
{
	struct vsock_conn *c;
	struct iovec iov[2];
	char copy[8];

	setup(16, 4u << 20);
	c = established(GPORT);
	CHECK_EQ(rw(GPORT, "in-fly", 6), VSOCK_ACT_DATA);
	CHECK_EQ(vsock_ring_peek(c, iov), 1);
	CHECK_EQ(send_op(VIRTIO_VSOCK_OP_RST, GPORT, HPORT, NULL), VSOCK_ACT_CLOSE);
	CHECK_EQ(v.buffered, 0);
	CHECK_EQ(vsock_ring_peek(c, (struct iovec[2]){ { 0 } }), 0);
	memcpy(copy, iov[0].iov_base, 6);      /* what the kernel's send reads */
	CHECK(!memcmp(copy, "in-fly", 6));
	vsock_release(&v, c);
	expect_ctl(0);                         /* its RESPONSE went with it */
	CHECK_EQ(v.st.conns_open, 0);
	vsock_fini(&v);
}

/* The VM's cap on buffered bytes is shared out as each connection's
 * credit, so that connections whose host peers never read can fill only
 * their own share: the guest's packets on the others are still taken. */
TEST(each_connections_credit_is_its_share_of_the_cap)
{
	static uint8_t buf[VSOCK_MAX_PKT];
	struct vsock_conn *c[8];
	enum vsock_bad bad;
	struct vsock_hdr h;
	unsigned i;

	setup(8, 8 * 64u << 10);
	CHECK_EQ(v.buf_alloc, 64u << 10);
	for (i = 0; i < 8; i++) {
		c[i] = established(GPORT + i);
		CHECK_EQ(rw(GPORT + i, buf, VSOCK_MAX_PKT), VSOCK_ACT_DATA);
	}
	CHECK_EQ(v.buffered, 8 * 64u << 10);
	CHECK(vsock_can_take(&v));            /* the TX queue is never held for it */
	/* What the guest was told, and the first byte beyond it. */
	CHECK_EQ(c[0]->ring.size, 64u << 10);
	h = pkt(VIRTIO_VSOCK_OP_RW, GPORT, HPORT);
	h.len = 1;
	CHECK_EQ(send_h(&h, buf, 1, NULL, &bad), VSOCK_ACT_CLOSE);
	CHECK_EQ(bad, VSOCK_BAD_CREDIT);
	/* A share is page-aligned; too small a share is refused. */
	vsock_fini(&v);
	CHECK_EQ(vsock_init(&v, CID, 3, 100000), 0);
	CHECK_EQ(v.buf_alloc, 32768u);
	vsock_fini(&v);
	CHECK_EQ(vsock_init(&v, CID, 8, 8 * VSOCK_BUF_MIN - 1), -EINVAL);
	CHECK_EQ(vsock_init(&v, CID, 4096, 64ull << 20), 0);
	CHECK_EQ(v.buf_alloc, 16384u);
	vsock_fini(&v);
}

/* A host listener that never accepts (its backlog full) leaves the
 * guest's connect hanging: after 2 s the guest gets its RST (Linux's own
 * connect gave up by then and waits for it) and the device closes. */
TEST(guest_connect_that_no_listener_takes_in_time_is_reset)
{
	struct vsock_conn *c, *t;

	setup(8, 2u << 20);
	CHECK_EQ(send_op(VIRTIO_VSOCK_OP_REQUEST, GPORT, HPORT, &c), VSOCK_ACT_CONNECT);
	CHECK_EQ(vsock_next_deadline(&v), UINT64_MAX);      /* not begun: no deadline */
	vsock_connect_begun(&v, c, 1000);
	CHECK_EQ(vsock_next_deadline(&v), 1000 + VSOCK_CONNECT_TIMEOUT_NS);
	CHECK_EQ(vsock_tick(&v, 1000 + VSOCK_CONNECT_TIMEOUT_NS - 1, &t), VSOCK_ACT_NONE);
	CHECK_EQ(vsock_tick(&v, 1000 + VSOCK_CONNECT_TIMEOUT_NS, &t), VSOCK_ACT_CLOSE);
	CHECK(t == c);
	CHECK_EQ(v.st.timeouts, 1);
	expect_ctl(VIRTIO_VSOCK_OP_RST);
	CHECK_EQ(vsock_next_deadline(&v), UINT64_MAX);
	/* The connect's late answer changes nothing. */
	CHECK_EQ(vsock_connect_done(&v, c, true), VSOCK_ACT_NONE);
	expect_ctl(0);
	vsock_release(&v, c);
	CHECK_EQ(v.st.conns_open, 0);
	/* One answered in time is not watched any more. */
	c = established(GPORT + 1);
	CHECK_EQ(vsock_next_deadline(&v), UINT64_MAX);
	vsock_fini(&v);
}

/* The guest, told of the RST, connects again from the same port while
 * the device still holds the old connection's host side: the REQUEST
 * is a new connection, not a packet for the old one. */
TEST(request_on_the_ports_of_a_connection_being_closed_is_a_new_one)
{
	struct vsock_conn *old, *c;

	setup(8, 2u << 20);
	old = established(GPORT);
	expect_ctl(VIRTIO_VSOCK_OP_RESPONSE);
	CHECK_EQ(send_op(VIRTIO_VSOCK_OP_RST, GPORT, HPORT, NULL), VSOCK_ACT_CLOSE);
	expect_ctl(0);
	CHECK_EQ(old->state, VSOCK_DEAD);              /* the device has not released it */
	CHECK_EQ(send_op(VIRTIO_VSOCK_OP_REQUEST, GPORT, HPORT, &c), VSOCK_ACT_CONNECT);
	CHECK(c && c != old);
	CHECK_EQ(vsock_connect_done(&v, c, true), VSOCK_ACT_NONE);
	expect_ctl(VIRTIO_VSOCK_OP_RESPONSE);
	vsock_release(&v, old);
	CHECK_EQ(v.st.conns_open, 1);
	/* The new one is what its ports find. */
	CHECK_EQ(rw(GPORT, "x", 1), VSOCK_ACT_DATA);
	CHECK_EQ(c->ring.len, 1);
	vsock_fini(&v);
}

TEST(connect_line_parses_as_firecracker_frames_it)
{
	uint32_t port = 0;
	size_t n = 0;

	CHECK_EQ(vsock_parse_connect("CONNECT 1024\n", 13, &port, &n), 1);
	CHECK_EQ(port, 1024);
	CHECK_EQ(n, 13);
	CHECK_EQ(vsock_parse_connect("CONNECT 52\nhello", 16, &port, &n), 1);
	CHECK_EQ(n, 11);
	CHECK_EQ(vsock_parse_connect("CONNECT 52\r\n", 12, &port, &n), 1);
	CHECK_EQ(vsock_parse_connect("CONNECT 4294967295\n", 19, &port, &n), 1);
	CHECK_EQ(port, 4294967295u);
	CHECK_EQ(vsock_parse_connect("CONN", 4, &port, &n), 0);
	CHECK_EQ(vsock_parse_connect("CONNECT 12", 10, &port, &n), 0);
	CHECK_EQ(vsock_parse_connect("CONNECT 4294967296\n", 19, &port, &n), -EINVAL);
	CHECK_EQ(vsock_parse_connect("CONNECT \n", 9, &port, &n), -EINVAL);
	CHECK_EQ(vsock_parse_connect("CONNECT 1x\n", 11, &port, &n), -EINVAL);
	CHECK_EQ(vsock_parse_connect("CONNECTS 1\n", 11, &port, &n), -EINVAL);
	CHECK_EQ(vsock_parse_connect("CONNECT -1\n", 11, &port, &n), -EINVAL);
	CHECK_EQ(vsock_parse_connect("OK 1\n", 5, &port, &n), -EINVAL);
	CHECK_EQ(vsock_parse_connect("\n", 1, &port, &n), -EINVAL);
	/* No newline within the line's bound: not a line. */
	CHECK_EQ(vsock_parse_connect("CONNECT 1                       ", 32, &port, &n), -EINVAL);
}

/* What Firecracker's muxer also takes (it splits the line at white
 * space, compares "connect" in any case and parses a u32): a client
 * written for it works here. */
TEST(connect_line_is_read_as_leniently_as_firecrackers)
{
	static const struct { const char *line; uint32_t port; } ok[] = {
		{ "connect 5\n", 5 }, { "Connect 6\n", 6 }, { "CONNECT  7\n", 7 },
		{ "CONNECT 8 \n", 8 }, { "\tCONNECT 9\n", 9 }, { "CONNECT +10\n", 10 },
		{ "CONNECT 11 extra\n", 11 }, { "CONNECT 000000000012\n", 12 },
		{ "CONNECT\t13\r\n", 13 },
	};
	uint32_t port;
	size_t n;

	for (unsigned i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		port = 0;
		CHECK_EQ(vsock_parse_connect(ok[i].line, strlen(ok[i].line), &port, &n), 1);
		CHECK_EQ(port, ok[i].port);
		CHECK_EQ(n, strlen(ok[i].line));
	}
}

TEST(ok_line)
{
	char out[VSOCK_LINE_MAX];

	CHECK_EQ(vsock_format_ok(out, 1073741824u), 14);
	CHECK_STR(out, "OK 1073741824\n");
}
