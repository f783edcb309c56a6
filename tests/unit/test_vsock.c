/* The virtio-vsock device (devices/virtio_vsock.c), KVM-free: a small
 * guest driver (tests/unit/vdrv.h, over virtio-mmio) on one side, real
 * Unix sockets on the host side, and the device's worker between them.
 * What a Firecracker or Cloud Hypervisor user expects of hybrid vsock:
 * the guest's connects reach PATH_<port>, host clients' "CONNECT <port>"
 * lines reach the guest and get "OK <port>", data flows both ways under
 * the guest's credit, every host socket closes at a reset, and none of
 * them is ever in the process's file table. */
#include "devices/virtio_vsock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "tests/unit/vdrv.h"
#include "vmm/base/byteorder.h"

#define CID 3u
#define RXQ 0
#define TXQ 1
#define EVQ 2
#define QSZ 64
#define RXN 32                      /* RX buffers the guest keeps posted */
#define RXLEN (VSOCK_HDR_LEN + 4096)

struct g {
	struct vdrv d;
	struct virtio_dev *dev;
	char dir[80], path[96];
	uint64_t rxgpa[QSZ];
	uint32_t buf_alloc;             /* the guest's receive buffer, as it says */
	uint32_t fwd_cnt[64];           /* what each guest port consumed (at once),
					 * by port % 64 */
};

static char err[MVM_ERR_MAX];

static void g_post_rx(struct g *g, uint64_t gpa)
{
	struct vdrv_sg sg = { .gpa = gpa, .len = RXLEN, .writable = true };
	int head = vdrv_add(&g->d, RXQ, &sg, 1, false);

	CHECK(head >= 0);
	g->rxgpa[head] = gpa;
}

static void g_mkdir(struct g *g)
{
	const char *tmp = getenv("TMPDIR");

	/* TMPDIR where the caller gives one (the nested harness's scratch
	 * disk: its /tmp is read-only). */
	snprintf(g->dir, sizeof(g->dir), "%s/mvm-vsock-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	CHECK(mkdtemp(g->dir));
	snprintf(g->path, sizeof(g->path), "%s/v.sock", g->dir);
}

static void g_driver_up(struct g *g)
{
	CHECK_EQ(vdrv_negotiate(&g->d, VIRTIO_BIT(VIRTIO_F_VERSION_1)), 0);
	for (unsigned q = 0; q < 3; q++)
		CHECK_EQ(vdrv_queue_setup(&g->d, q, QSZ), 1);
	vdrv_driver_ok(&g->d);
	CHECK(!(vdrv_status(&g->d) & VIRTIO_CONFIG_S_NEEDS_RESET));
	for (unsigned i = 0; i < RXN; i++)
		g_post_rx(g, vdrv_alloc(&g->d, RXLEN, 8));
	vdrv_kick(&g->d, RXQ);
}

/* The device attached, its driver not yet up (as before the guest's
 * kernel probes it); its thread polls for up to poll_us (poll=). */
static struct g *g_up_polling(unsigned conns, bool sandbox, unsigned poll_us)
{
	struct g *g = calloc(1, sizeof(*g));
	struct mvm_vsock o = { .size = sizeof(o), .cid = CID, .conns = conns,
			       .transport = MVM_TRANSPORT_MMIO, .poll_us = poll_us };

	CHECK(g);
	check_need_io_uring();
	g_mkdir(g);
	o.socket = g->path;
	g->buf_alloc = 1u << 20;
	CHECK_EQ(vdrv_ram_init(&g->d, 0x1000, 32u << 20), 0);
	if (vsock_dev_new(&o, &g->d.mem, &g->dev, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		CHECK(!"vsock_dev_new");
	}
	g->dev->sandbox = sandbox;
	g->dev->vm_fd = -1;
	if (vdrv_attach(&g->d, g->dev) && sandbox)
		CHECK_SKIP("the worker could not enter its filter: no seccomp here (qemu-user?)");
	return g;
}

static struct g *g_up_bare(unsigned conns, bool sandbox)
{
	return g_up_polling(conns, sandbox, 0);
}

static struct g *g_up_full(unsigned conns, bool sandbox)
{
	struct g *g = g_up_bare(conns, sandbox);

	g_driver_up(g);
	return g;
}

static struct g *g_up(unsigned conns)
{
	return g_up_full(conns, false);
}

static void g_down(struct g *g)
{
	char sub[384];
	DIR *dir;
	struct dirent *e;

	virtio_dev_destroy(g->dev);
	vdrv_detach(&g->d);
	dir = opendir(g->dir);
	while (dir && (e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", g->dir, e->d_name);
		unlink(sub);
	}
	if (dir)
		closedir(dir);
	rmdir(g->dir);
	free(g->d.ram);
	free(g);
}

static bool wait_used1(struct g *g, unsigned q, uint32_t *id, uint32_t *len, unsigned ms)
{
	for (unsigned t = 0; t < ms; t++) {
		if (vdrv_get_used(&g->d, q, id, len) == 1)
			return true;
		usleep(1000);
	}
	return false;
}

/* A packet from the guest on the TX ring, as one readable buffer, not yet
 * kicked. */
static void g_queue(struct g *g, uint16_t op, uint32_t src_port, uint32_t dst_port,
		    uint32_t flags, const void *data, uint32_t len)
{
	struct vsock_hdr h = {
		.src_cid = CID, .dst_cid = VSOCK_HOST_CID, .src_port = src_port,
		.dst_port = dst_port, .len = len, .type = VIRTIO_VSOCK_TYPE_STREAM, .op = op,
		.flags = flags, .buf_alloc = g->buf_alloc, .fwd_cnt = g->fwd_cnt[src_port % 64],
	};
	uint64_t gpa = vdrv_alloc(&g->d, VSOCK_HDR_LEN + len, 8);
	struct vdrv_sg sg = { .gpa = gpa, .len = VSOCK_HDR_LEN + len };

	vsock_hdr_encode(&h, vdrv_host(&g->d, gpa));
	if (len)
		memcpy((uint8_t *)vdrv_host(&g->d, gpa) + VSOCK_HDR_LEN, data, len);
	CHECK(vdrv_add(&g->d, TXQ, &sg, 1, false) >= 0);
}

/* Kick the TX queue; wait until the device has taken n packets. */
static void g_kick_tx(struct g *g, unsigned n)
{
	uint32_t id, used;

	vdrv_kick(&g->d, TXQ);
	while (n--) {
		CHECK(wait_used1(g, TXQ, &id, &used, 5000));
		CHECK_EQ(used, 0);
	}
}

/* One packet from the guest; waits until the device has taken it. */
static void g_send(struct g *g, uint16_t op, uint32_t src_port, uint32_t dst_port,
		   uint32_t flags, const void *data, uint32_t len)
{
	g_queue(g, op, src_port, dst_port, flags, data, len);
	g_kick_tx(g, 1);
}

/* The next packet for the guest (within ms): its header and payload;
 * RW payload counts as consumed at once. false: none came. */
static bool g_recv_ms(struct g *g, struct vsock_hdr *h, void *data, size_t max, unsigned ms)
{
	uint32_t id, len;
	uint8_t *p;

	if (!wait_used1(g, RXQ, &id, &len, ms))
		return false;
	CHECK(id < QSZ && g->rxgpa[id]);
	CHECK(len >= VSOCK_HDR_LEN);
	p = vdrv_host(&g->d, g->rxgpa[id]);
	vsock_hdr_decode(p, h);
	CHECK_EQ(len, VSOCK_HDR_LEN + h->len);
	CHECK(h->len <= max || !data);
	if (data)
		memcpy(data, p + VSOCK_HDR_LEN, h->len);
	CHECK_EQ(h->src_cid, VSOCK_HOST_CID);
	CHECK_EQ(h->dst_cid, CID);
	if (getenv("VSOCK_TEST_TRACE"))
		fprintf(stderr, "rx op %u %u->%u len %u flags %u\n", h->op, h->src_port,
			h->dst_port, h->len, h->flags);
	if (h->op == VIRTIO_VSOCK_OP_RW)
		g->fwd_cnt[h->dst_port % 64] += h->len;
	g_post_rx(g, g->rxgpa[id]);
	vdrv_kick(&g->d, RXQ);
	return true;
}

static struct vsock_hdr g_expect(struct g *g, uint16_t op, void *data, size_t max)
{
	struct vsock_hdr h;

	CHECK(g_recv_ms(g, &h, data, max, 5000));
	if (h.op != op)
		fprintf(stderr, "expected op %u, got %u\n", op, h.op);
	CHECK_EQ(h.op, op);
	return h;
}

/* The next packet for the guest, whatever its op. */
static struct vsock_hdr g_expect_any(struct g *g, void *data, size_t max)
{
	struct vsock_hdr h;

	CHECK(g_recv_ms(g, &h, data, max, 5000));
	return h;
}

/* A host program listening on PATH_port. */
static int host_listen(struct g *g, uint32_t port)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CHECK(fd >= 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s_%u", g->path, port);
	CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ(listen(fd, 8), 0);
	return fd;
}

static int host_accept(int lfd)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };

	CHECK_EQ(poll(&p, 1, 5000), 1);
	return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

/* A host client of the device's socket. */
static int host_client(struct g *g)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CHECK(fd >= 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", g->path);
	CHECK_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Read exactly n bytes (within 5 s), or fewer at end of file. */
static size_t host_read(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		CHECK_EQ(poll(&p, 1, 5000), 1);
		r = read(fd, (char *)buf + got, n - got);
		/* A reset is an end too (a close with bytes unread). */
		CHECK(r >= 0 || errno == ECONNRESET);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

static bool host_sees_eof(int fd)
{
	char c;

	return host_read(fd, &c, 1) == 0;
}

static struct vsock_dev_stats stats(struct g *g)
{
	struct vsock_dev_stats s;

	CHECK_EQ(vsock_dev_get_stats(g->dev, &s), 0);
	return s;
}

/* Every connection's slot back in the free list. The RST or SHUTDOWN is
 * out before the device frees a connection (its host socket's close
 * completes after, on io_uring's own time), and until then it counts
 * against the cap: a moment, longer on a busy host. */
static void all_released(struct g *g)
{
	for (unsigned i = 0; i < 500 && stats(g).conn.conns_open; i++)
		usleep(10000);
	CHECK_EQ(stats(g).conn.conns_open, 0);
}

/* A guest connection from gport to the host's port, accepted there: the
 * host side's fd. */
static int guest_connects(struct g *g, int lfd, uint32_t gport, uint32_t port)
{
	struct vsock_hdr h;
	int fd;

	g_send(g, VIRTIO_VSOCK_OP_REQUEST, gport, port, 0, NULL, 0);
	h = g_expect(g, VIRTIO_VSOCK_OP_RESPONSE, NULL, 0);
	CHECK_EQ(h.src_port, port);
	CHECK_EQ(h.dst_port, gport);
	CHECK_EQ(h.buf_alloc, VSOCK_BUF_ALLOC);
	fd = host_accept(lfd);
	CHECK(fd >= 0);
	return fd;
}

/* A host client connected to the guest's port 9, the guest accepting,
 * its "OK <port>\n" read: the client's fd. */
static int host_connects(struct g *g)
{
	int fd = host_client(g);
	struct vsock_hdr h;
	char buf[32], want[32];
	size_t n;

	CHECK_EQ(write(fd, "CONNECT 9\n", 10), 10);
	h = g_expect(g, VIRTIO_VSOCK_OP_REQUEST, NULL, 0);
	CHECK_EQ(h.dst_port, 9);
	g_send(g, VIRTIO_VSOCK_OP_RESPONSE, 9, h.src_port, 0, NULL, 0);
	n = (size_t)snprintf(want, sizeof(want), "OK %u\n", h.src_port);
	CHECK_EQ(host_read(fd, buf, n), n);
	CHECK(!memcmp(buf, want, n));
	return fd;
}

static unsigned fds_open(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;

	CHECK(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

TEST(device_is_vsock_with_the_guest_cid_in_its_config)
{
	struct g *g = g_up(8);

	CHECK_EQ(vdrv_rd(&g->d, VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_VSOCK);
	CHECK_EQ(vdrv_rd(&g->d, VIRTIO_MMIO_CONFIG), CID);
	CHECK_EQ(vdrv_rd(&g->d, VIRTIO_MMIO_CONFIG + 4), 0);
	CHECK_EQ(vsock_dev_cid(g->dev), CID);
	g_down(g);
}

TEST(guest_connect_reaches_path_port_and_bytes_flow_both_ways)
{
	struct g *g = g_up(8);
	int lfd = host_listen(g, 1234), fd;
	char buf[64];
	struct vsock_hdr h;

	fd = guest_connects(g, lfd, 5000, 1234);
	g_send(g, VIRTIO_VSOCK_OP_RW, 5000, 1234, 0, "hello", 5);
	CHECK_EQ(host_read(fd, buf, 5), 5);
	CHECK(!memcmp(buf, "hello", 5));
	CHECK_EQ(write(fd, "world!", 6), 6);
	h = g_expect(g, VIRTIO_VSOCK_OP_RW, buf, sizeof(buf));
	CHECK_EQ(h.len, 6);
	CHECK(!memcmp(buf, "world!", 6));
	CHECK_EQ(h.src_port, 1234);
	CHECK_EQ(h.dst_port, 5000);
	/* The host closes: the guest hears it sends no more. */
	close(fd);
	h = g_expect(g, VIRTIO_VSOCK_OP_SHUTDOWN, NULL, 0);
	CHECK(h.flags & VIRTIO_VSOCK_SHUTDOWN_SEND);
	g_send(g, VIRTIO_VSOCK_OP_RST, 5000, 1234, 0, NULL, 0);
	CHECK_EQ(stats(g).conn.bytes_to_host, 5);
	CHECK_EQ(stats(g).conn.bytes_to_guest, 6);
	CHECK_EQ(stats(g).conn.conns_guest, 1);
	close(lfd);
	g_down(g);
}

TEST(guest_connect_nobody_listens_on_gets_rst)
{
	struct g *g = g_up(8);
	struct vsock_hdr h;

	g_send(g, VIRTIO_VSOCK_OP_REQUEST, 5000, 4321, 0, NULL, 0);
	h = g_expect(g, VIRTIO_VSOCK_OP_RST, NULL, 0);
	CHECK_EQ(h.src_port, 4321);
	CHECK_EQ(h.dst_port, 5000);
	CHECK_EQ(stats(g).conn.no_listener, 1);
	g_down(g);
}

TEST(host_client_connect_line_reaches_the_guest_and_gets_ok)
{
	struct g *g = g_up(8);
	int fd = host_client(g);
	struct vsock_hdr h;
	char buf[64], want[32];
	size_t n;

	/* The first bytes after the line are the connection's. */
	CHECK_EQ(write(fd, "CONNECT 1024\nping", 17), 17);
	h = g_expect(g, VIRTIO_VSOCK_OP_REQUEST, NULL, 0);
	CHECK_EQ(h.dst_port, 1024);
	CHECK(h.src_port >= VSOCK_HOST_PORT_FIRST);
	g_send(g, VIRTIO_VSOCK_OP_RESPONSE, 1024, h.src_port, 0, NULL, 0);
	n = (size_t)snprintf(want, sizeof(want), "OK %u\n", h.src_port);
	CHECK_EQ(host_read(fd, buf, n), n);
	CHECK(!memcmp(buf, want, n));
	h = g_expect(g, VIRTIO_VSOCK_OP_RW, buf, sizeof(buf));
	CHECK_EQ(h.len, 4);
	CHECK(!memcmp(buf, "ping", 4));
	g_send(g, VIRTIO_VSOCK_OP_RW, 1024, h.src_port, 0, "pong", 4);
	CHECK_EQ(host_read(fd, buf, 4), 4);
	CHECK(!memcmp(buf, "pong", 4));
	/* The guest closes its side both ways: the client sees the end. */
	g_send(g, VIRTIO_VSOCK_OP_SHUTDOWN, 1024, h.src_port,
	       VIRTIO_VSOCK_SHUTDOWN_SEND | VIRTIO_VSOCK_SHUTDOWN_RCV, NULL, 0);
	CHECK(host_sees_eof(fd));
	CHECK_EQ(stats(g).accepted, 1);
	CHECK_EQ(stats(g).conn.conns_host, 1);
	close(fd);
	g_down(g);
}

TEST(host_client_without_a_connect_line_is_closed)
{
	struct g *g = g_up(8);
	int fd = host_client(g);
	struct vsock_hdr h;

	CHECK_EQ(write(fd, "HELLO 1024\n", 11), 11);
	CHECK(host_sees_eof(fd));
	close(fd);
	CHECK_EQ(stats(g).handshake_failed, 1);
	CHECK(!g_recv_ms(g, &h, NULL, 0, 100));    /* the guest heard nothing */
	g_down(g);
}

TEST(host_client_the_guest_refuses_is_closed)
{
	struct g *g = g_up(8);
	int fd = host_client(g);
	struct vsock_hdr h;

	CHECK_EQ(write(fd, "CONNECT 77\n", 11), 11);
	h = g_expect(g, VIRTIO_VSOCK_OP_REQUEST, NULL, 0);
	g_send(g, VIRTIO_VSOCK_OP_RST, 77, h.src_port, 0, NULL, 0);
	CHECK(host_sees_eof(fd));
	close(fd);
	g_down(g);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* A guest that takes the REQUEST and never answers: within the 2 s a
 * connect is given (not the handshake's 5 s, whose timeout was armed
 * first), the guest gets an RST and the client sees the end. */
TEST(host_client_the_guest_never_answers_is_closed_after_2_s)
{
	struct g *g = g_up(8);
	int fd = host_client(g);
	struct vsock_hdr h;
	double t0, took;

	CHECK_EQ(write(fd, "CONNECT 77\n", 11), 11);
	h = g_expect(g, VIRTIO_VSOCK_OP_REQUEST, NULL, 0);
	t0 = now_s();
	CHECK(host_sees_eof(fd));
	took = now_s() - t0;
	CHECK(took > 1.5 && took < 3.5);
	CHECK_EQ(g_expect(g, VIRTIO_VSOCK_OP_RST, NULL, 0).src_port, h.src_port);
	CHECK_EQ(stats(g).conn.timeouts, 1);
	close(fd);
	g_down(g);
}

/* A command agent's exchange, again and again, as a CI runner drives one
 * (tests/system/vsock.sh): the client's first try comes before the guest's
 * driver is up, and then the guest refuses it (nobody listens yet); every later client is accepted, sends its
 * command and shuts its write side, gets the output and the end. */
TEST(host_clients_one_after_another_each_reach_the_guest)
{
	struct g *g = g_up_bare(8, true);
	struct vsock_hdr h;
	char buf[64];
	int fd = host_client(g);

	/* Before the guest's driver is up: the client waits. */
	CHECK_EQ(write(fd, "CONNECT 1024\n", 13), 13);
	usleep(20000);
	g_driver_up(g);
	h = g_expect(g, VIRTIO_VSOCK_OP_REQUEST, NULL, 0);
	g_send(g, VIRTIO_VSOCK_OP_RST, 1024, h.src_port, 0, NULL, 0);
	CHECK(host_sees_eof(fd));
	close(fd);
	for (unsigned i = 0; i < 6; i++) {
		char want[32];
		size_t n;

		g->fwd_cnt[1024 % 64] = 0;     /* a new guest socket's count */
		fd = host_client(g);
		CHECK_EQ(write(fd, "CONNECT 1024\n", 13), 13);
		h = g_expect(g, VIRTIO_VSOCK_OP_REQUEST, NULL, 0);
		CHECK_EQ(h.dst_port, 1024);
		g_send(g, VIRTIO_VSOCK_OP_RESPONSE, 1024, h.src_port, 0, NULL, 0);
		n = (size_t)snprintf(want, sizeof(want), "OK %u\n", h.src_port);
		CHECK_EQ(host_read(fd, buf, n), n);
		CHECK(!memcmp(buf, want, n));
		CHECK_EQ(write(fd, "cmd", 3), 3);
		CHECK_EQ(shutdown(fd, SHUT_WR), 0);
		h = g_expect(g, VIRTIO_VSOCK_OP_RW, buf, sizeof(buf));
		CHECK_EQ(h.len, 3);
		h = g_expect(g, VIRTIO_VSOCK_OP_SHUTDOWN, NULL, 0);
		CHECK(h.flags & VIRTIO_VSOCK_SHUTDOWN_SEND);
		/* The output and the guest's close in one kick, as Linux sends
		 * them: its SHUTDOWN comes while the device is still sending
		 * the output on. The client sees it all and then its end, with
		 * the next client's accept waiting on the listening socket. */
		g_queue(g, VIRTIO_VSOCK_OP_RW, 1024, h.src_port, 0, "out", 3);
		g_queue(g, VIRTIO_VSOCK_OP_SHUTDOWN, 1024, h.src_port,
			VIRTIO_VSOCK_SHUTDOWN_SEND | VIRTIO_VSOCK_SHUTDOWN_RCV, NULL, 0);
		g_kick_tx(g, 2);
		CHECK_EQ(host_read(fd, buf, 3), 3);
		CHECK(!memcmp(buf, "out", 3));
		CHECK(host_sees_eof(fd));
		close(fd);
		/* Both sides shut: the device ends it with an RST (§5.10.6.5). */
		h = g_expect(g, VIRTIO_VSOCK_OP_RST, NULL, 0);
	}
	CHECK_EQ(stats(g).accepted, 7);
	all_released(g);
	g_down(g);
}

/* The guest's sockets are io_uring direct descriptors: a connection in
 * each direction adds only the test's own ends to the process's table. */
TEST(host_sockets_of_the_device_are_never_in_the_fd_table)
{
	struct g *g = g_up(8);
	int lfd = host_listen(g, 1234), fd1, fd2;
	unsigned before = fds_open();

	fd1 = guest_connects(g, lfd, 5000, 1234);
	fd2 = host_connects(g);
	CHECK_EQ(fds_open(), before + 2);
	close(fd1);
	close(fd2);
	close(lfd);
	g_down(g);
}

/* §5.10.6.3: nothing is read from the host beyond the credit the guest
 * gave, and it is asked for more; another connection meanwhile goes on. */
TEST(guest_that_does_not_read_stalls_only_its_connection)
{
	struct g *g = g_up(8);
	int lfd = host_listen(g, 1234), fd1, fd2;
	static char big[64 << 10];
	uint32_t got = 0;
	struct vsock_hdr h;
	char buf[RXLEN];

	g->buf_alloc = 8192;
	fd1 = guest_connects(g, lfd, 5000, 1234);
	g->buf_alloc = 1u << 20;
	fd2 = guest_connects(g, lfd, 5001, 1234);
	memset(big, 'x', sizeof(big));
	CHECK_EQ(write(fd1, big, sizeof(big)), (ssize_t)sizeof(big));
	/* Packets until the credit is used up, then a CREDIT_REQUEST. */
	while (got < 8192) {
		h = g_expect(g, VIRTIO_VSOCK_OP_RW, buf, sizeof(buf));
		got += h.len;
	}
	CHECK_EQ(got, 8192);
	h = g_expect(g, VIRTIO_VSOCK_OP_CREDIT_REQUEST, NULL, 0);
	CHECK_EQ(h.dst_port, 5000);
	CHECK(!g_recv_ms(g, &h, buf, sizeof(buf), 100));
	CHECK(stats(g).conn.credit_stalls >= 1);
	/* The other connection is not held up. */
	CHECK_EQ(write(fd2, "free", 4), 4);
	h = g_expect(g, VIRTIO_VSOCK_OP_RW, buf, sizeof(buf));
	CHECK_EQ(h.dst_port, 5001);
	CHECK(!memcmp(buf, "free", 4));
	/* Credit given: the rest comes. */
	g->buf_alloc = 1u << 20;
	g_send(g, VIRTIO_VSOCK_OP_CREDIT_UPDATE, 5000, 1234, 0, NULL, 0);
	while (got < sizeof(big)) {
		h = g_expect(g, VIRTIO_VSOCK_OP_RW, buf, sizeof(buf));
		CHECK_EQ(h.dst_port, 5000);
		got += h.len;
	}
	CHECK_EQ(got, sizeof(big));
	close(fd1);
	close(fd2);
	close(lfd);
	g_down(g);
}

/* A driver reset ends every connection: each host peer sees its end, and
 * after the driver comes back connections work again. */
/* A host writer that sends n bytes of a pattern, then closes. */
struct host_writer {
	int fd;
	size_t n;
};

static char pattern_at(size_t off)
{
	return (char)((off * 2654435761u) >> 13);
}

static void *host_writer_run(void *arg)
{
	struct host_writer *w = arg;
	char b[8192];

	for (size_t off = 0; off < w->n;) {
		size_t k = w->n - off < sizeof(b) ? w->n - off : sizeof(b);

		for (size_t i = 0; i < k; i++)
			b[i] = pattern_at(off + i);
		CHECK_EQ(write(w->fd, b, k), (ssize_t)k);
		off += k;
	}
	close(w->fd);
	return NULL;
}

/* Host to guest, a stream longer than the device's stage many times over,
 * written in 8 KiB pieces and closed at once: the guest gets every byte in
 * order, across the stage's wrap and its credit running out again and
 * again (each CREDIT_REQUEST answered), and the host's end only after
 * the last byte (the end may come while bytes are still staged). */
TEST(host_stream_reaches_the_guest_whole_and_in_order_then_its_end)
{
	struct g *g = g_up(8);
	int lfd = host_listen(g, 1234);
	struct host_writer w = { .n = 3u << 20 };
	size_t got = 0, told = 0, stalls = 0;
	struct vsock_hdr h;
	char buf[RXLEN];
	pthread_t t;

	g->buf_alloc = 200000;      /* below the stream: the credit runs out */
	w.fd = guest_connects(g, lfd, 5000, 1234);
	CHECK_EQ(pthread_create(&t, NULL, host_writer_run, &w), 0);
	for (;;) {
		h = g_expect_any(g, buf, sizeof(buf));
		if (h.op == VIRTIO_VSOCK_OP_CREDIT_REQUEST) {
			stalls++;
			g_send(g, VIRTIO_VSOCK_OP_CREDIT_UPDATE, 5000, 1234, 0, NULL, 0);
			continue;
		}
		if (h.op != VIRTIO_VSOCK_OP_RW)
			break;
		for (uint32_t i = 0; i < h.len; i++)
			if (buf[i] != pattern_at(got + i)) {
				fprintf(stderr, "byte %zu differs\n", got + i);
				CHECK(!"the stream's bytes in order");
			}
		got += h.len;
		/* After the first stall (the 200,000 bytes of credit are used
		 * before the guest says anything), the guest also tells its
		 * consumption every 64 KiB or so, unasked, as Linux does. */
		if (stalls && got - told >= 65536) {
			told = got;
			g_send(g, VIRTIO_VSOCK_OP_CREDIT_UPDATE, 5000, 1234, 0, NULL, 0);
		}
	}
	CHECK_EQ(h.op, VIRTIO_VSOCK_OP_SHUTDOWN);
	CHECK(h.flags & VIRTIO_VSOCK_SHUTDOWN_SEND);
	CHECK_EQ(got, w.n);
	CHECK(stalls >= 1);
	CHECK_EQ(stats(g).conn.bytes_to_guest, w.n);
	CHECK_EQ(pthread_join(t, NULL), 0);
	g_send(g, VIRTIO_VSOCK_OP_RST, 5000, 1234, 0, NULL, 0);
	close(lfd);
	g_down(g);
}

TEST(driver_reset_closes_every_host_socket)
{
	struct g *g = g_up(8);
	int lfd = host_listen(g, 1234), fd1, fd2;

	fd1 = guest_connects(g, lfd, 5000, 1234);
	fd2 = host_connects(g);
	vdrv_wr(&g->d, VIRTIO_MMIO_STATUS, 0);
	CHECK(host_sees_eof(fd1));
	CHECK(host_sees_eof(fd2));
	close(fd1);
	close(fd2);
	g_driver_up(g);
	fd1 = guest_connects(g, lfd, 5002, 1234);
	CHECK_EQ(stats(g).conn.conns_open, 1);
	close(fd1);
	close(lfd);
	g_down(g);
}

/* Bad input gets what the spec says: a spoofed source CID nothing, a
 * chain that cannot be a packet is counted and given back, data for no
 * connection an RST. */
TEST(bad_packets_are_counted_and_answered_as_the_spec_says)
{
	struct g *g = g_up(8);
	struct vsock_hdr h = {
		.src_cid = 7, .dst_cid = VSOCK_HOST_CID, .src_port = 1, .dst_port = 2,
		.type = VIRTIO_VSOCK_TYPE_STREAM, .op = VIRTIO_VSOCK_OP_REQUEST,
	};
	uint64_t gpa = vdrv_alloc(&g->d, VSOCK_HDR_LEN, 8);
	struct vdrv_sg sg = { .gpa = gpa, .len = VSOCK_HDR_LEN };
	uint32_t id, len;

	vsock_hdr_encode(&h, vdrv_host(&g->d, gpa));
	CHECK(vdrv_add(&g->d, TXQ, &sg, 1, false) >= 0);
	sg.writable = true;                         /* a TX buffer the device would write */
	CHECK(vdrv_add(&g->d, TXQ, &sg, 1, false) >= 0);
	vdrv_kick(&g->d, TXQ);
	CHECK(wait_used1(g, TXQ, &id, &len, 5000));
	CHECK(wait_used1(g, TXQ, &id, &len, 5000));
	CHECK(!g_recv_ms(g, &h, NULL, 0, 100));
	CHECK_EQ(stats(g).conn.bad_kind[VSOCK_BAD_CID], 1);
	CHECK_EQ(stats(g).conn.bad_kind[VSOCK_BAD_CHAIN], 1);
	g_send(g, VIRTIO_VSOCK_OP_RW, 6000, 1234, 0, "x", 1);
	h = g_expect(g, VIRTIO_VSOCK_OP_RST, NULL, 0);
	CHECK_EQ(h.dst_port, 6000);
	CHECK(!(vdrv_status(&g->d) & VIRTIO_CONFIG_S_NEEDS_RESET));
	g_down(g);
}

/* conns= is the VM's cap: a REQUEST beyond it gets RST at once. */
TEST(connections_beyond_the_cap_get_rst)
{
	struct g *g = g_up(1);
	int lfd = host_listen(g, 1234), fd;
	struct vsock_hdr h;

	fd = guest_connects(g, lfd, 5000, 1234);
	g_send(g, VIRTIO_VSOCK_OP_REQUEST, 5001, 1234, 0, NULL, 0);
	h = g_expect(g, VIRTIO_VSOCK_OP_RST, NULL, 0);
	CHECK_EQ(h.dst_port, 5001);
	CHECK_EQ(stats(g).conn.conn_limit, 1);
	close(fd);
	close(lfd);
	g_down(g);
}

/* The socket file: a stale one (nobody listening) is replaced, a live one
 * or a file that is no socket refused; the device's end removes it. */
TEST(socket_path_stale_is_replaced_live_refused_and_removed_at_the_end)
{
	struct g g0 = { 0 };
	struct mvm_vsock o = { .size = sizeof(o), .cid = CID, .conns = 4 };
	struct virtio_dev *dev;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat st;
	int fd;

	check_need_io_uring();
	g_mkdir(&g0);
	CHECK_EQ(vdrv_ram_init(&g0.d, 0x1000, 1u << 20), 0);
	o.socket = g0.path;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", g0.path);
	/* A stale socket file, as a killed run leaves. */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	close(fd);
	CHECK_EQ(vsock_dev_new(&o, &g0.d.mem, &dev, err, sizeof(err)), 0);
	/* Live now: a second device on it is refused. */
	{
		struct virtio_dev *dev2;

		CHECK_EQ(vsock_dev_new(&o, &g0.d.mem, &dev2, err, sizeof(err)), -EADDRINUSE);
		CHECK(strstr(err, "another program listens there"));
	}
	virtio_dev_destroy(dev);
	CHECK(lstat(g0.path, &st) < 0 && errno == ENOENT);
	fd = open(g0.path, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	close(fd);
	CHECK_EQ(vsock_dev_new(&o, &g0.d.mem, &dev, err, sizeof(err)), -EEXIST);
	CHECK(strstr(err, "not a socket"));
	CHECK(!lstat(g0.path, &st) && S_ISREG(st.st_mode));
	unlink(g0.path);
	o.cid = 2;
	CHECK_EQ(vsock_dev_new(&o, &g0.d.mem, &dev, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "cid"));
	o.cid = CID;
	o.socket = NULL;
	CHECK_EQ(vsock_dev_new(&o, &g0.d.mem, &dev, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "socket= is missing"));
	rmdir(g0.dir);
	free(g0.d.ram);
}

/* The seccomp mode of this process's thread called name, or -1; its id
 * in *tid where tid is not NULL. */
static int thread_seccomp_tid(const char *name, pid_t *tid)
{
	char path[64], line[128], comm[32];
	struct dirent *e;
	int mode = -1;
	DIR *d = opendir("/proc/self/task");
	FILE *f;

	CHECK(d);
	while (mode < 0 && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%.16s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		comm[0] = '\0';
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = '\0';
		fclose(f);
		comm[strcspn(comm, "\n")] = '\0';
		if (strcmp(comm, name))
			continue;
		if (tid)
			*tid = (pid_t)atoi(e->d_name);
		snprintf(path, sizeof(path), "/proc/self/task/%.16s/status", e->d_name);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "Seccomp: %d", &mode) == 1)
				break;
		if (f)
			fclose(f);
	}
	closedir(d);
	return mode;
}

static int thread_seccomp(const char *name)
{
	return thread_seccomp_tid(name, NULL);
}

/* mmap as mvm's objects call it in this program (the Makefile links it
 * with -Wl,--wrap=mmap): refused to the thread no_map_tid names, and
 * counted, as s390x's filters refuse every mmap (its arguments are in
 * memory, out of a filter's reach). */
static pid_t no_map_tid;
static unsigned no_map_calls;
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	pid_t t = __atomic_load_n(&no_map_tid, __ATOMIC_RELAXED);

	if (t && gettid() == t) {
		__atomic_add_fetch(&no_map_calls, 1, __ATOMIC_RELAXED);
		errno = ENOMEM;
		return MAP_FAILED;
	}
	return __real_mmap(addr, len, prot, flags, fd, off);
}

/* poll=: after a round that did work, the device's thread polls for the
 * host socket's answer too (ops->poll_io), though its RECV is in flight
 * (a disk's thread polls only with no I/O in flight). An echo that
 * answers at once is taken by a poll, not after a sleep; the window
 * adapts up to poll= (1 ms here) over the first exchanges. */
TEST(a_polling_thread_polls_with_its_host_io_in_flight)
{
	struct g *g = g_up_polling(8, false, 1000);
	int lfd = host_listen(g, 1234), fd;
	struct vsock_hdr h;
	char buf[64];

	g_driver_up(g);
	fd = guest_connects(g, lfd, 5000, 1234);
	for (unsigned i = 0; i < 200 && !stats(g).polled; i++) {
		g_send(g, VIRTIO_VSOCK_OP_RW, 5000, 1234, 0, "ping", 4);
		CHECK_EQ(host_read(fd, buf, 4), 4);
		CHECK_EQ(write(fd, "pong", 4), 4);
		h = g_expect(g, VIRTIO_VSOCK_OP_RW, buf, sizeof(buf));
		CHECK_EQ(h.len, 4);
		CHECK(!memcmp(buf, "pong", 4));
	}
	CHECK(stats(g).polled > 0);
	close(fd);
	close(lfd);
	g_down(g);
}

/* Everything above happens on the worker's thread inside the queue
 * thread's seccomp filter, which allows no socket, connect or accept:
 * the ring makes and uses every socket. */
TEST(the_worker_does_it_all_inside_the_queue_filter)
{
	struct g *g = g_up_full(8, true);
	int lfd = host_listen(g, 1234), fd1, fd2;
	char buf[64];

	CHECK_EQ(thread_seccomp("mvm-vsock"), 2);
	fd1 = guest_connects(g, lfd, 5000, 1234);
	g_send(g, VIRTIO_VSOCK_OP_RW, 5000, 1234, 0, "in", 2);
	CHECK_EQ(host_read(fd1, buf, 2), 2);
	fd2 = host_connects(g);
	vdrv_wr(&g->d, VIRTIO_MMIO_STATUS, 0);
	CHECK(host_sees_eof(fd1));
	close(fd1);
	close(fd2);
	close(lfd);
	g_down(g);
}

/* Connections that come and go while the worker is in its filter, four
 * at a time, round after round: each one's buffers (its ring for the
 * host, its stage for the guest) are taken and given back on the worker,
 * which maps nothing for them. Were they malloc's, glibc would put the
 * later ones on the worker's arena and, trimming it, open
 * /proc/sys/vm/overcommit_memory: the filter kills the process (SIGSYS),
 * as system/vsock's mvm died in the L1. Were they mapped as they came,
 * s390x's filter would refuse it, and each connection would fail (as
 * system/s390_vsock's did). */
TEST(connections_come_and_go_inside_the_queue_filter_mapping_nothing)
{
	struct g *g = g_up_full(8, true);
	int lfd = host_listen(g, 1234), fd[4];
	struct vsock_hdr h;
	pid_t tid = 0;
	char buf[64];

	CHECK_EQ(thread_seccomp_tid("mvm-vsock", &tid), 2);
	__atomic_store_n(&no_map_tid, tid, __ATOMIC_RELAXED);

	for (unsigned r = 0; r < 4; r++) {
		for (unsigned i = 0; i < 4; i++) {
			uint32_t gport = 5000 + r * 4 + i;

			fd[i] = guest_connects(g, lfd, gport, 1234);
			g_send(g, VIRTIO_VSOCK_OP_RW, gport, 1234, 0, "in", 2);
			CHECK_EQ(host_read(fd[i], buf, 2), 2);
			CHECK_EQ(write(fd[i], "out", 3), 3);
			h = g_expect(g, VIRTIO_VSOCK_OP_RW, buf, sizeof(buf));
			CHECK_EQ(h.len, 3);
		}
		for (unsigned i = 0; i < 4; i++) {
			close(fd[i]);
			h = g_expect(g, VIRTIO_VSOCK_OP_SHUTDOWN, NULL, 0);
			g_send(g, VIRTIO_VSOCK_OP_RST, h.dst_port, 1234, 0, NULL, 0);
		}
		/* Two rounds fill the cap of 8 until the first is let go of. */
		all_released(g);
	}
	CHECK_EQ(stats(g).conn.conns_guest, 16);
	CHECK_EQ(stats(g).conn.bytes_to_host, 32);
	CHECK_EQ(stats(g).conn.bytes_to_guest, 48);
	CHECK_EQ(__atomic_load_n(&no_map_calls, __ATOMIC_RELAXED), 0);
	__atomic_store_n(&no_map_tid, 0, __ATOMIC_RELAXED);
	close(lfd);
	g_down(g);
}

/* A host peer that goes away mid-transfer: the guest hears it (SHUTDOWN,
 * then RST as its next data finds no one), and the connection ends. */
TEST(host_peer_vanishing_mid_transfer_resets_the_guest)
{
	struct g *g = g_up(8);
	int lfd = host_listen(g, 1234), fd;
	static char chunk[4096];
	struct vsock_hdr h;
	bool rst = false;
	char buf[RXLEN];

	fd = guest_connects(g, lfd, 5000, 1234);
	memset(chunk, 'a', sizeof(chunk));
	g_send(g, VIRTIO_VSOCK_OP_RW, 5000, 1234, 0, chunk, sizeof(chunk));
	close(fd);                                  /* 4 KiB unread: a reset */
	for (unsigned i = 0; i < 64 && !rst; i++) {
		g_send(g, VIRTIO_VSOCK_OP_RW, 5000, 1234, 0, chunk, sizeof(chunk));
		while (!rst && g_recv_ms(g, &h, buf, sizeof(buf), 20)) {
			CHECK(h.op == VIRTIO_VSOCK_OP_SHUTDOWN || h.op == VIRTIO_VSOCK_OP_RST);
			rst = h.op == VIRTIO_VSOCK_OP_RST;
		}
	}
	CHECK(rst);
	all_released(g);
	close(lfd);
	g_down(g);
}

/* The guest's credit as the device last told it (§5.10.6.3). */
static uint32_t credit_left(uint32_t sent, const struct vsock_hdr *last)
{
	return last->buf_alloc - (sent - last->fwd_cnt);
}

/* A host peer that does not read stalls only its own connection: the
 * device takes what the guest's credit allows and no more, the guest
 * waits for credit, and another connection goes on; once the peer reads,
 * every byte arrives in order. */
TEST(host_reader_that_stalls_holds_only_its_connection)
{
	struct g *g = g_up(8);
	int lfd = host_listen(g, 1234), fd1, fd2;
	static uint8_t chunk[VSOCK_MAX_PKT], got[VSOCK_MAX_PKT];
	uint32_t sent = 0, checked = 0;
	struct vsock_hdr last, h;
	char buf[RXLEN];

	fd1 = guest_connects(g, lfd, 5000, 1234);
	fd2 = guest_connects(g, lfd, 5001, 1234);
	last = (struct vsock_hdr){ .buf_alloc = VSOCK_BUF_ALLOC };
	/* Send while there is credit; then credit updates come only as the
	 * host socket takes bytes, which stops once its buffer is full. */
	for (;;) {
		while (credit_left(sent, &last) >= sizeof(chunk)) {
			for (uint32_t i = 0; i < sizeof(chunk); i++)
				chunk[i] = (uint8_t)((sent + i) * 13);
			g_send(g, VIRTIO_VSOCK_OP_RW, 5000, 1234, 0, chunk, sizeof(chunk));
			sent += sizeof(chunk);
		}
		if (!g_recv_ms(g, &h, buf, sizeof(buf), 300))
			break;
		CHECK(h.op == VIRTIO_VSOCK_OP_CREDIT_UPDATE);
		if (h.dst_port == 5000)
			last = h;
	}
	CHECK(sent < 8u << 20);                     /* it did stall */
	CHECK(stats(g).conn.bytes_to_host < sent);
	/* The other connection is not held up. */
	g_send(g, VIRTIO_VSOCK_OP_RW, 5001, 1234, 0, "other", 5);
	CHECK_EQ(host_read(fd2, buf, 5), 5);
	CHECK(!memcmp(buf, "other", 5));
	/* The stalled peer reads: all of it, in order. */
	while (checked < sent) {
		size_t want = sent - checked < sizeof(got) ? sent - checked : sizeof(got);
		size_t n = host_read(fd1, got, want);

		CHECK(n > 0);
		for (size_t i = 0; i < n; i++)
			CHECK_EQ(got[i], (uint8_t)((checked + i) * 13));
		checked += (uint32_t)n;
	}
	close(fd1);
	close(fd2);
	close(lfd);
	g_down(g);
}

/* The VM stops with connections open both ways: every host peer sees its
 * end, and the process has no descriptor more than before the device. */
TEST(vm_stop_with_connections_open_leaves_no_fd)
{
	unsigned before = fds_open();
	struct g *g = g_up(8);
	int lfd = host_listen(g, 1234), fd1, fd2;

	fd1 = guest_connects(g, lfd, 5000, 1234);
	fd2 = host_connects(g);
	g_down(g);                                  /* the VM's stop and teardown */
	CHECK(host_sees_eof(fd1));
	CHECK(host_sees_eof(fd2));
	close(fd1);
	close(fd2);
	close(lfd);
	CHECK_EQ(fds_open(), before);
}
