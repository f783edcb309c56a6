/* virtio-vsock's protocol core (devices/vsock_conn.c): the input is a
 * sequence of events, each a packet from the guest (any header, any
 * chain length) or something the host side did (a connect that worked
 * or failed, bytes a host socket took, data read for the guest, a host
 * peer gone, a host client's CONNECT, time passing, a closed socket, a
 * driver reset), with the control packets owed to the guest taken in
 * between.
 *
 * Invariants (besides ASan/UBSan): the table stays consistent (every live
 * connection found by its ports, the free list and the live ones add up
 * to the table, conns_open counts them, `buffered` is the sum of the
 * rings, no ring beyond the connection's credit (buf_alloc, its share of
 * the cap), the total within the cap
 * plus one packet); the bytes the host side takes from a connection are
 * exactly those the guest sent on it, in order; no data goes to the guest
 * beyond the credit it gave; every packet to the guest is addressed to the
 * guest's CID, a stream packet with a known op; a connection ends free
 * once the device let go of it and it owes nothing. */
#include "tests/fuzz/fuzz.h"
#include "devices/vsock_conn.h"

#define GCID 3u
#define MAXC 8u

static struct vsock v;
static uint8_t payload[2 * VSOCK_MAX_PKT];
static uint64_t now;
static uint64_t cap;             /* the VM's buffered-bytes cap */

static uint8_t pat(const struct vsock_conn *c, uint32_t off)
{
	return (uint8_t)(c->id * 131u + c->gen * 17u + off * 7u + (off >> 9));
}

static void check_table(void)
{
	unsigned live = 0, free_n = 0;
	uint64_t buffered = 0;

	for (unsigned i = 0; i < v.max_conns; i++) {
		struct vsock_conn *c = &v.conns[i];

		if (c->state == VSOCK_FREE)
			continue;
		live++;
		FZ_ASSERT(c->ring.len <= v.buf_alloc && c->ring.size == v.buf_alloc);
		FZ_ASSERT(c->ring.len == 0 || c->ring.buf);
		FZ_ASSERT(c->state != VSOCK_DEAD || c->ring.len == 0);
		buffered += c->ring.len;
		FZ_ASSERT(vsock_conn_get(&v, c->id, c->gen) == c);
		/* Found by its ports: the chain holds it; but for a DEAD one
		 * whose ports a new connection took (unhashed), which no
		 * chain holds. */
		{
			uint32_t j = v.hash[0];
			bool found = false;

			for (unsigned b = 0; b <= v.hash_mask && !found; b++)
				for (j = v.hash[b]; j != UINT32_MAX; j = v.conns[j].hnext)
					if (j == i)
						found = true;
			FZ_ASSERT(found == !c->unhashed);
			FZ_ASSERT(!c->unhashed || c->state == VSOCK_DEAD);
		}
	}
	for (uint32_t j = v.free_head; j != UINT32_MAX; j = v.conns[j].hnext) {
		FZ_ASSERT(v.conns[j].state == VSOCK_FREE);
		FZ_ASSERT(++free_n <= v.max_conns);
	}
	FZ_ASSERT(live + free_n == v.max_conns);
	FZ_ASSERT(v.st.conns_open == live);
	FZ_ASSERT(v.buffered == buffered);
	FZ_ASSERT(v.buffered <= (uint64_t)v.max_conns * v.buf_alloc && v.buffered <= cap);
}

static struct vsock_conn *find(uint32_t gport, uint32_t hport)
{
	for (unsigned i = 0; i < v.max_conns; i++)
		if (v.conns[i].state != VSOCK_FREE && !v.conns[i].unhashed &&
		    v.conns[i].guest_port == gport && v.conns[i].host_port == hport)
			return &v.conns[i];
	return NULL;
}

/* The device's side of an action: a CLOSE is carried out now or later
 * (the conn keeps host_busy until then). */
static void act_on(enum vsock_act a, struct vsock_conn *c, bool close_now)
{
	FZ_ASSERT(((unsigned)a & ~(unsigned)VSOCK_ACT_RESUME) <= VSOCK_ACT_CLOSE);
	/* Credit comes back only to a connection that goes on. */
	FZ_ASSERT(!(a & VSOCK_ACT_RESUME) || (c && c->state == VSOCK_ESTABLISHED));
	if (a == VSOCK_ACT_CLOSE) {
		FZ_ASSERT(c && c->state == VSOCK_DEAD && c->host_busy);
		if (close_now)
			vsock_release(&v, c);
	}
}

static struct vsock_conn *pick(struct fz *f)
{
	unsigned start = fz_u8(f) % v.max_conns;

	for (unsigned k = 0; k < v.max_conns; k++) {
		struct vsock_conn *c = &v.conns[(start + k) % v.max_conns];

		if (c->state != VSOCK_FREE)
			return c;
	}
	return NULL;
}

static void guest_packet(struct fz *f)
{
	struct vsock_hdr h;
	uint8_t sel = fz_u8(f);
	struct vsock_conn *c, *want;
	enum vsock_bad bad;
	uint64_t chain;
	struct iovec iov[3];
	enum vsock_act a;

	h.src_cid = sel & 1 ? fz_u64(f) : GCID;
	h.dst_cid = sel & 2 ? fz_u64(f) : VSOCK_HOST_CID;
	h.src_port = fz_u8(f) % 4;
	h.dst_port = sel & 4 ? VSOCK_HOST_PORT_FIRST + fz_u8(f) % 4 : fz_u8(f) % 4;
	h.type = sel & 8 ? fz_u16(f) : VIRTIO_VSOCK_TYPE_STREAM;
	h.op = fz_u8(f) % 9;
	h.len = sel & 16 ? fz_u32(f) : fz_u32(f) % (VSOCK_MAX_PKT + 2);
	h.flags = fz_u8(f);
	h.buf_alloc = sel & 32 ? fz_u32(f) : VSOCK_BUF_ALLOC;
	h.fwd_cnt = fz_u32(f);
	chain = sel & 64 ? fz_u32(f) % sizeof(payload) : h.len;
	if (chain > sizeof(payload))
		chain = sizeof(payload);
	/* The data a live connection's guest sends: its pattern, from the
	 * offset it has reached. */
	want = find(h.src_port, h.dst_port);
	for (uint64_t i = 0; i < chain; i++)
		payload[i] = want ? pat(want, want->rx_cnt + (uint32_t)i) : 0xee;
	/* In up to three segments. */
	{
		uint64_t a1 = chain ? fz_u32(f) % (chain + 1) : 0, a2;

		a2 = chain - a1 ? fz_u32(f) % (chain - a1 + 1) : 0;
		iov[0] = (struct iovec){ payload, a1 };
		iov[1] = (struct iovec){ payload + a1, a2 };
		iov[2] = (struct iovec){ payload + a1 + a2, chain - a1 - a2 };
	}
	a = vsock_from_guest(&v, &h, iov, 3, chain, &c, &bad);
	FZ_ASSERT(bad <= VSOCK_BAD_KINDS);
	if (a == VSOCK_ACT_CONNECT)
		FZ_ASSERT(c && c->state == VSOCK_GUEST_CONNECTING);
	if (a == VSOCK_ACT_DATA)
		FZ_ASSERT(c && c->ring.len);
	act_on(a, c, sel & 128);
}

static void host_wrote(struct fz *f)
{
	struct vsock_conn *c = pick(f);
	struct iovec iov[2];
	unsigned n;
	uint32_t k, off;

	if (!c || !c->ring.len)
		return;
	n = vsock_ring_peek(c, iov);
	FZ_ASSERT(n >= 1 && n <= 2);
	FZ_ASSERT(iov[0].iov_len + (n == 2 ? iov[1].iov_len : 0) == c->ring.len);
	k = fz_u32(f) % (c->ring.len + 1);
	off = c->fwd_cnt;
	for (uint32_t i = 0; i < k; i++) {
		const uint8_t *p = i < iov[0].iov_len ? (uint8_t *)iov[0].iov_base + i :
				   (uint8_t *)iov[1].iov_base + (i - iov[0].iov_len);

		FZ_ASSERT(*p == pat(c, off + i));
	}
	act_on(vsock_wrote_host(&v, c, k), c, fz_u8(f) & 1);
}

static void host_read(struct fz *f)
{
	struct vsock_conn *c = pick(f);
	struct vsock_hdr h;
	uint32_t room, n;

	if (!c)
		return;
	room = vsock_data_room(&v, c);
	FZ_ASSERT(room <= VSOCK_MAX_PKT);
	if (!room)
		return;
	n = 1 + fz_u32(f) % room;
	vsock_data_sent(&v, c, n, &h);
	FZ_ASSERT(h.op == VIRTIO_VSOCK_OP_RW && h.len == n && h.dst_cid == GCID);
	/* Never past the guest's credit. */
	FZ_ASSERT(c->tx_cnt - c->peer_fwd_cnt <= c->peer_buf_alloc);
}

static void take_ctl(struct fz *f)
{
	unsigned n = fz_u8(f) % 16;
	struct vsock_hdr h;

	while (n-- && vsock_next_ctl(&v, &h)) {
		FZ_ASSERT(h.dst_cid == GCID);
		FZ_ASSERT(h.type == VIRTIO_VSOCK_TYPE_STREAM);
		FZ_ASSERT(h.op >= VIRTIO_VSOCK_OP_REQUEST && h.op <= VIRTIO_VSOCK_OP_CREDIT_REQUEST);
		FZ_ASSERT(h.op != VIRTIO_VSOCK_OP_RW && h.len == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = { data, size };
	struct vsock_conn *c;
	unsigned steps = 0;

	cap = (uint64_t)VSOCK_BUF_MIN << (fz_u8(&f) % 11);
	if (vsock_init(&v, GCID, 1 + fz_u8(&f) % MAXC, cap))
		return 0;
	now = 0;
	while (fz_left(&f) && steps++ < 2000) {
		switch (fz_u8(&f) % 10) {
		case 0:
		case 1:
			guest_packet(&f);
			break;
		case 2:
			c = pick(&f);
			if (c && c->state == VSOCK_GUEST_CONNECTING)
				act_on(vsock_connect_done(&v, c, fz_u8(&f) & 1), c, true);
			break;
		case 3:
			host_wrote(&f);
			break;
		case 4:
			host_read(&f);
			break;
		case 5:
			c = pick(&f);
			if (c && c->host_busy)
				act_on(vsock_host_eof(&v, c, fz_u8(&f) & 1), c, true);
			break;
		case 6:
			now += (uint64_t)fz_u32(&f) << 8;
			while ((vsock_tick(&v, now, &c)) == VSOCK_ACT_CLOSE)
				act_on(VSOCK_ACT_CLOSE, c, true);
			FZ_ASSERT(vsock_next_deadline(&v) > now);
			break;
		case 7:
			c = vsock_host_connect(&v, fz_u8(&f) % 4, now);
			FZ_ASSERT(!c || c->state == VSOCK_HOST_CONNECTING);
			break;
		case 8:
			/* The device let go of a socket: one it was told to
			 * close, or a host peer that went away. */
			c = pick(&f);
			if (c && c->host_busy)
				vsock_release(&v, c);
			take_ctl(&f);
			break;
		case 9:
			if (fz_u8(&f) % 8 == 0) {
				while (vsock_reset_next(&v, &c))
					vsock_release(&v, c);
				/* Those whose close was asked for before: the
				 * device lets go of them as their closes end. */
				for (unsigned i = 0; i < v.max_conns; i++)
					if (v.conns[i].state != VSOCK_FREE) {
						FZ_ASSERT(v.conns[i].state == VSOCK_DEAD &&
							  v.conns[i].host_busy);
						vsock_release(&v, &v.conns[i]);
					}
				FZ_ASSERT(v.st.conns_open == 0);
			} else {
				vsock_can_take(&v);
			}
			break;
		}
		check_table();
	}
	/* The end: everything let go of, every owed packet taken. */
	for (unsigned i = 0; i < v.max_conns; i++)
		if (v.conns[i].state != VSOCK_FREE && v.conns[i].host_busy)
			vsock_release(&v, &v.conns[i]);
	{
		struct vsock_hdr h;

		while (vsock_next_ctl(&v, &h))
			;
	}
	check_table();
	FZ_ASSERT(v.st.conns_open == 0);
	vsock_fini(&v);
	return 0;
}

static void fuzz_seeds(void)
{
	struct fz_buf s;

	/* Four connections, a guest REQUEST accepted, data both ways, a
	 * shutdown, a host client's connect and its RESPONSE. */
	s.n = 0;
	fzb_u8(&s, 3);
	fzb_u8(&s, 1);
	fzb_u8(&s, 0);                      /* guest packet: REQUEST 1 -> 2 */
	fzb_u8(&s, 0);
	fzb_u8(&s, 1); fzb_u8(&s, 2);
	fzb_u8(&s, VIRTIO_VSOCK_OP_REQUEST);
	fzb_u32(&s, 0); fzb_u8(&s, 0); fzb_u32(&s, 0);
	fzb_u8(&s, 2); fzb_u8(&s, 0); fzb_u8(&s, 1);   /* connect ok */
	fzb_u8(&s, 8); fzb_u8(&s, 9); fzb_u8(&s, 4);   /* take the RESPONSE */
	fzb_u8(&s, 0);                      /* RW of 1000 bytes */
	fzb_u8(&s, 0);
	fzb_u8(&s, 1); fzb_u8(&s, 2);
	fzb_u8(&s, VIRTIO_VSOCK_OP_RW);
	fzb_u32(&s, 1000); fzb_u8(&s, 0); fzb_u32(&s, 0);
	fzb_u32(&s, 300); fzb_u32(&s, 300);
	fzb_u8(&s, 3); fzb_u8(&s, 0); fzb_u32(&s, 999); fzb_u8(&s, 0);
	fzb_u8(&s, 4); fzb_u8(&s, 0); fzb_u32(&s, 77);
	fzb_u8(&s, 7); fzb_u8(&s, 3);       /* host connect to port 3 */
	fzb_u8(&s, 6); fzb_u32(&s, 100000000);
	fuzz_seed("connect_data", s.b, s.n);
}
