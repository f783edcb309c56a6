/* virtio-vsock's protocol, without a device (virtio 1.2 §5.10.6): the
 * packet header, the connections of one VM and their state machine,
 * credit-based flow control (§5.10.6.3), the control packets owed to the
 * guest, and hybrid vsock's handshake line ("CONNECT <port>\n",
 * "OK <port>\n", as Firecracker and Cloud Hypervisor frame it).
 *
 * Pure logic, for unit tests and the fuzzer: it does no I/O. The device
 * hands it each packet the guest sent (vsock_from_guest), tells it what
 * the host side did (a connect that succeeded or failed, bytes written
 * to or read from a host socket, a host peer gone), and asks it what to
 * send the guest next (vsock_next_ctl, vsock_data_room). Each action it
 * returns names the host I/O the device must do.
 *
 * Threads: one VM's struct vsock belongs to its vsock queue thread alone;
 * the counters are read by any thread (single writer, relaxed atomics). */
#ifndef MVM_VSOCK_CONN_H
#define MVM_VSOCK_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <linux/virtio_vsock.h>

/* The header on the wire: struct virtio_vsock_hdr, 44 bytes, little-endian. */
#define VSOCK_HDR_LEN 44u
/* The host's CID (§5.10.4: 2 is the host, 0 and 1 are reserved, 0xffffffff
 * is VMADDR_CID_ANY; a guest's CID is 3 or more and fits in 32 bits). */
#define VSOCK_HOST_CID 2u
#define VSOCK_CID_MIN 3u
#define VSOCK_CID_MAX 0xfffffffeu
/* The most payload one RW packet carries either way: Linux's
 * VIRTIO_VSOCK_MAX_PKT_BUF_SIZE. The guest's larger packets are refused
 * (RST): no driver sends them. */
#define VSOCK_MAX_PKT (64u << 10)
/* The receive buffer each connection offers the guest (buf_alloc): what
 * the guest may send before the host side has taken it. Linux's default
 * socket buffer for vsock, where the VM's cap on buffered bytes divided
 * by its connections allows it; else that share, down to a page. */
#define VSOCK_BUF_ALLOC (256u << 10)
#define VSOCK_BUF_MIN 4096u
/* Connections of one VM at once, at most (a REQUEST beyond it gets RST,
 * counted as conn_limit), and the default. */
#define VSOCK_CONNS_MAX 4096u
#define VSOCK_CONNS_DEFAULT 256u
/* Resets owed to the guest for packets that have no connection (a flood of
 * REQUESTs to ports nobody listens on): the device stops taking the
 * guest's packets while this many wait for a receive buffer, so each gets
 * its RST and none is dropped. */
#define VSOCK_RST_BACKLOG 256u
/* A host-initiated connection waits this long for the guest's RESPONSE,
 * then the guest gets an RST and the host client is closed (Linux's
 * connect timeout is 2 s too). */
#define VSOCK_CONNECT_TIMEOUT_NS 2000000000ull
/* Host ports of host-initiated connections: from here up, wrapping (like
 * Firecracker's, above the ports a guest listens on). */
#define VSOCK_HOST_PORT_FIRST (1u << 30)
/* The hybrid vsock handshake: the longest line a host client may send
 * ("CONNECT 4294967295\n" is 19 bytes). */
#define VSOCK_LINE_MAX 32u

/* A header, in host order: decoded once from the guest's bytes. */
struct vsock_hdr {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port;
	uint32_t len;
	uint16_t type, op;
	uint32_t flags;
	uint32_t buf_alloc, fwd_cnt;
};
void vsock_hdr_decode(const uint8_t b[VSOCK_HDR_LEN], struct vsock_hdr *h);
void vsock_hdr_encode(const struct vsock_hdr *h, uint8_t b[VSOCK_HDR_LEN]);

/* A byte ring: what the guest sent on a connection and the host socket has
 * not taken yet. At most size bytes (the credit the guest was given, the
 * VM's buf_alloc), the connection's own part of the VM's reserved rings; its pages
 * come with the first byte and are given back when the connection's slot
 * is freed (not before the device let go of it: a send may be reading
 * it). */
struct vsock_ring {
	uint8_t *buf;
	uint32_t size;
	uint32_t head;             /* first byte not yet written to the host */
	uint32_t len;              /* bytes held */
	bool touched;              /* bytes were put there: pages to give back */
};

enum vsock_state {
	VSOCK_FREE,
	VSOCK_GUEST_CONNECTING,    /* the guest's REQUEST: the host connect is under way */
	VSOCK_HOST_CONNECTING,     /* a host client's CONNECT: the REQUEST went to the guest */
	VSOCK_ESTABLISHED,
	VSOCK_DEAD,                /* over: what it owes the guest (an RST) is the last */
};

/* Control packets owed to the guest, a bit each (vsock_conn.pending). */
enum {
	VSOCK_OWE_REQUEST = 1u << 0,
	VSOCK_OWE_RESPONSE = 1u << 1,
	VSOCK_OWE_CREDIT_UPDATE = 1u << 2,
	VSOCK_OWE_CREDIT_REQUEST = 1u << 3,
	VSOCK_OWE_SHUTDOWN = 1u << 4,     /* with shut_sent's flags */
	VSOCK_OWE_RST = 1u << 5,
};

struct vsock_conn {
	enum vsock_state state;
	uint32_t id;               /* its index in the table */
	uint32_t gen;              /* bumped each time the slot is reused */
	uint32_t host_port;        /* the host end's port (the guest's dst_port) */
	uint32_t guest_port;
	/* The guest's receive buffer and how much of it it has consumed, from
	 * the last header it sent (§5.10.6.3); what we sent it. */
	uint32_t peer_buf_alloc, peer_fwd_cnt;
	uint32_t tx_cnt;
	/* Ours: bytes taken from the guest, and written to the host socket;
	 * the fwd_cnt the guest last heard from us. */
	uint32_t rx_cnt, fwd_cnt;
	uint32_t fwd_cnt_told;
	struct vsock_ring ring;
	uint8_t shut_rcvd;         /* SHUTDOWN flags the guest sent (cumulative) */
	uint8_t shut_sent;         /* SHUTDOWN flags sent, or owed, to the guest */
	bool host_eof;             /* the host socket said end of file */
	bool host_wr_shut;         /* shutdown(SHUT_WR) done on the host socket */
	bool credit_stalled;       /* host data waits for the guest's credit */
	bool host_busy;            /* the device has host state (a socket) for it */
	unsigned pending;          /* VSOCK_OWE_* */
	uint64_t deadline_ns;      /* while timed: then RST */
	bool timed;                /* connecting, with a deadline (counted in connecting) */
	bool unhashed;             /* DEAD, out of the hash: a new connection has its ports */
	uint32_t next_pending;     /* list of connections owing control packets */
	bool on_pending;
	uint32_t hnext;            /* hash chain */
	void *opaque;              /* the device's per-connection state */
};

/* Counters: single writer (the queue thread), read at any time. */
struct vsock_stats {
	uint64_t conns_guest;      /* connections the guest opened */
	uint64_t conns_host;       /* connections host clients opened */
	uint64_t conns_open;       /* now */
	uint64_t bytes_to_host;    /* payload the guest sent, taken by the host */
	uint64_t bytes_to_guest;
	uint64_t pkts_from_guest, pkts_to_guest;
	uint64_t rst_sent, rst_rcvd;
	uint64_t credit_stalls;    /* host data waited for the guest's credit */
	uint64_t credit_updates;   /* CREDIT_UPDATEs sent */
	uint64_t conn_limit;       /* REQUESTs refused: the VM's connection cap */
	uint64_t no_listener;      /* guest connects nobody answered */
	uint64_t timeouts;         /* connects not answered within 2 s, either way */
	uint64_t bad;              /* packets the guest got wrong (vsock_bad below) */
	uint64_t bad_kind[8];
};

/* What the guest got wrong, a kind each (logged once per kind, counted). */
enum vsock_bad {
	VSOCK_BAD_CID,             /* src_cid not the guest's own (spoofing) */
	VSOCK_BAD_DST,             /* dst_cid not the host */
	VSOCK_BAD_TYPE,            /* not a stream */
	VSOCK_BAD_OP,              /* unknown op, or an op that makes no sense here */
	VSOCK_BAD_LEN,             /* len beyond the chain, or beyond VSOCK_MAX_PKT */
	VSOCK_BAD_CREDIT,          /* more data than the credit it was given */
	VSOCK_BAD_NOCONN,          /* a packet for a connection that does not exist */
	VSOCK_BAD_CHAIN,           /* a chain that cannot be a packet */
	VSOCK_BAD_KINDS
};
const char *vsock_bad_name(enum vsock_bad kind);

/* One VM's connections. */
struct vsock {
	uint64_t guest_cid;
	unsigned max_conns;
	uint32_t buf_alloc;        /* each connection's credit: its share of the cap */
	uint64_t buffered;         /* bytes held in rings, all connections */
	struct vsock_conn *conns;  /* max_conns */
	uint8_t *rings;            /* max_conns rings, reserved (pages_reserve) */
	uint32_t *hash;            /* 2 * max_conns heads, UINT32_MAX: empty */
	unsigned hash_mask;
	uint32_t free_head;        /* free slots, through hnext */
	uint32_t pending_head, pending_tail;   /* connections owing control */
	/* Resets for packets without a connection: (src, dst) as the guest
	 * addressed them, a ring of VSOCK_RST_BACKLOG. */
	struct { uint64_t cid; uint32_t guest_port, host_port; } rst[VSOCK_RST_BACKLOG];
	unsigned rst_head, rst_len;
	uint32_t next_host_port;
	unsigned connecting;       /* connections timed: deadlines to watch */
	struct vsock_stats st;
};

/* 0, -EINVAL or -ENOMEM; max_conns 1..VSOCK_CONNS_MAX, max_buffered (what all
 * connections together may hold) at least VSOCK_BUF_MIN per connection. */
int vsock_init(struct vsock *v, uint64_t guest_cid, unsigned max_conns, uint64_t max_buffered);
void vsock_fini(struct vsock *v);

/* What the device must do after vsock_from_guest / vsock_tick. */
enum vsock_act {
	VSOCK_ACT_NONE,            /* nothing on the host side (maybe a control packet owed) */
	VSOCK_ACT_CONNECT,         /* the guest's REQUEST: connect conn's host socket (PATH_port) */
	VSOCK_ACT_CONNECTED,       /* the guest accepted a host client's connection: answer OK */
	VSOCK_ACT_DATA,            /* conn's ring has new bytes for the host socket */
	VSOCK_ACT_SHUT_WR,         /* the guest sends no more: ring empty, shutdown(SHUT_WR) */
	VSOCK_ACT_CLOSE,           /* conn ended: close its host socket, then vsock_release */
	/* The guest's credit grew: read the host socket again. A flag, alone
	 * or OR'ed into the action of the packet that brought the credit
	 * (an RW packet's DATA, a SHUTDOWN's SHUT_WR): the credit comes in
	 * every header, not only in CREDIT_UPDATEs. */
	VSOCK_ACT_RESUME = 0x100,
};

/* One packet from the guest's TX queue: h decoded from the chain's first
 * 44 bytes, payload the bytes of the chain after them (payload_len of
 * them, in nseg segments). Validates it whole, then acts: *connp is the
 * connection it concerns, or NULL. */
enum vsock_act vsock_from_guest(struct vsock *v, const struct vsock_hdr *h,
				const struct iovec *payload, unsigned nseg,
				uint64_t payload_len, struct vsock_conn **connp,
				enum vsock_bad *bad);
/* A chain on the TX queue that cannot hold a packet (device-writable
 * buffers, shorter than a header): counted as VSOCK_BAD_CHAIN. */
void vsock_bad_chain(struct vsock *v);
/* Whether the device may take the guest's next packet: no backlog of
 * resets waiting. (Buffered bytes need no check: each connection's
 * credit is its share of the cap.) */
bool vsock_can_take(const struct vsock *v);

/* A host client asked for guest port guest_port (its CONNECT line): a new
 * connection, HOST_CONNECTING, a REQUEST owed to the guest. NULL when the
 * VM has max_conns connections (the device closes the client). */
struct vsock_conn *vsock_host_connect(struct vsock *v, uint32_t guest_port, uint64_t now_ns);
/* The host connect of a GUEST_CONNECTING conn ended: ok -> RESPONSE owed,
 * ESTABLISHED; not ok -> RST owed (no listener), and the device closes. */
enum vsock_act vsock_connect_done(struct vsock *v, struct vsock_conn *c, bool ok);
/* The device began the host connect of a guest's REQUEST (VSOCK_ACT_CONNECT):
 * unless vsock_connect_done comes within VSOCK_CONNECT_TIMEOUT_NS, a
 * vsock_tick resets it (a listener that never accepts; the guest's own
 * connect gives up after 2 s as well and waits for our RST). */
void vsock_connect_begun(struct vsock *v, struct vsock_conn *c, uint64_t now_ns);
/* The host socket took n bytes from the front of conn's ring. */
enum vsock_act vsock_wrote_host(struct vsock *v, struct vsock_conn *c, uint32_t n);
/* Bytes the device may read from conn's host socket now, to send the guest
 * as RW packets: the guest's credit, at most VSOCK_MAX_PKT; 0 when the
 * connection sends no more (or the guest's receive side is shut). A 0
 * for want of credit marks the conn stalled: a CREDIT_REQUEST is owed. */
uint32_t vsock_data_room(struct vsock *v, struct vsock_conn *c);
/* The guest's whole credit for conn's host data (not capped at a packet,
 * no stall marked): how much the device may hold read ahead of sending. */
uint32_t vsock_credit(const struct vsock_conn *c);
/* The device put an RW packet of n payload bytes (n <= vsock_data_room)
 * in the guest's RX queue: fill its header. */
void vsock_data_sent(struct vsock *v, struct vsock_conn *c, uint32_t n, struct vsock_hdr *h);
/* The host socket said end of file (or failed: err): SHUTDOWN(SEND) owed
 * (err: RST owed, and the device closes). */
enum vsock_act vsock_host_eof(struct vsock *v, struct vsock_conn *c, bool err);
/* Deadlines: host connects past theirs get RST; for each such conn
 * *connp is set and VSOCK_ACT_CLOSE returned, call again until NONE. */
enum vsock_act vsock_tick(struct vsock *v, uint64_t now_ns, struct vsock_conn **connp);
/* The earliest deadline, or UINT64_MAX. */
uint64_t vsock_next_deadline(const struct vsock *v);
/* The device's host socket of a conn it was told to close is closed: the
 * slot is free once the conn owes the guest nothing more. */
void vsock_release(struct vsock *v, struct vsock_conn *c);

/* The next control packet owed to the guest, header filled: true, or
 * false when none. The device sends it in one RX buffer. */
bool vsock_next_ctl(struct vsock *v, struct vsock_hdr *h);
/* Drop every connection (driver reset, VM stop): *connp set for each that
 * still has host state and was not dead already (the device closes it
 * and calls vsock_release once it has; a dead one's close was asked for
 * when it died), false when none is left. Owed packets are forgotten. */
bool vsock_reset_next(struct vsock *v, struct vsock_conn **connp);

/* Conn by table index and generation (the device's io_uring user data), or NULL. */
struct vsock_conn *vsock_conn_get(struct vsock *v, uint32_t id, uint32_t gen);

/* The ring's bytes for the host socket, up to two segments: the count. */
unsigned vsock_ring_peek(const struct vsock_conn *c, struct iovec iov[2]);

/* Hybrid vsock: a host client's first bytes. 1: a whole CONNECT line of
 * *line_len bytes naming *port; 0: no newline yet (and fewer than
 * VSOCK_LINE_MAX bytes); -EINVAL: not a CONNECT line, or a longer one. */
int vsock_parse_connect(const char *buf, size_t len, uint32_t *port, size_t *line_len);
/* "OK <port>\n" into out (at least VSOCK_LINE_MAX bytes): its length. */
size_t vsock_format_ok(char *out, uint32_t port);

#endif
