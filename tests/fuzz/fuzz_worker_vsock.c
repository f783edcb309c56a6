/* virtio-vsock's packet path on the real device (devices/virtio_vsock.c)
 * and its queue worker, threaded, with real Unix sockets on the host side:
 * what vsock_conn's target cannot reach (the chain shapes, the RX buffers,
 * the slots and their io_uring direct descriptors, closes, resets).
 *
 * Each input makes a device (1..8 connections; polling or not) on a
 * socket in a directory of this process's, attaches it through
 * virtio-mmio (tests/unit/vdrv.h, which launches its thread), negotiates,
 * and then drives both sides from the fuzzer's thread while the worker
 * runs:
 *  - the guest: TX packets with any header (source and destination CIDs,
 *    ports from small sets so that they meet, any op, type, flags, len,
 *    credit), payloads of 0..600 bytes in 1..3 segments, and chains of the
 *    wrong shape (a device-writable buffer, shorter than a header); RX
 *    buffers of any size (also too small, or device-readable); kicks;
 *    resets at any point, each followed by a new negotiation;
 *  - the host: a listener on PATH_1000 (PATH_1001 has none) accepting and
 *    writing, reading or closing its connections; clients of PATH writing
 *    CONNECT lines for the guest's ports, or junk, and closing.
 *
 * Invariants (FZ_ASSERT, ASan, UBSan):
 *  - every RX buffer comes back with 0 (a buffer that cannot hold a
 *    packet) or a header and at most the buffer's length, to the guest's
 *    CID from CID 2 (an RST: from where the guest sent the packet it
 *    answers), a stream packet whose len matches; every TX chain comes
 *    back with 0;
 *  - the device never asks for a reset (the guest's rings stay
 *    well-formed: bad packets are the guest's to send);
 *  - teardown leaves no thread (mvm-vsock), no fd and no socket file.
 * Not deterministic (the worker runs when the kernel lets it); each input
 * is bounded: FV_STEPS steps, FV_RESETS resets, sleeps of at most 2 ms. */
#include "tests/fuzz/fuzz.h"
#include "tests/unit/vdrv.h"
#include "devices/virtio_vsock.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define FV_STEPS 96
#define FV_RESETS 4
#define FV_CID 3u
#define FV_QSZ 32
#define FV_HOSTS 8              /* host sockets at once (accepted and clients) */
#define FV_RX_MAX 4200u

enum { RXQ, TXQ, EVQ };

static struct {
	char dir[64], path[80];
	struct vdrv d;
	struct virtio_dev *dev;
	int lfd;                    /* the host's listener on PATH_1000 */
	int host[FV_HOSTS];         /* accepted connections and clients */
	uint32_t rx_len[FV_QSZ];    /* posted RX buffers' lengths, by head */
	uint64_t rx_gpa[FV_QSZ];
	uint32_t host_ports[4];     /* ports the device gave host clients */
	unsigned resets;
} fv;

static void fv_rmdir(void)
{
	rmdir(fv.dir);
}

static void fv_sleep_us(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000 };

	nanosleep(&ts, NULL);
}

static unsigned count_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	unsigned n = 0;

	FZ_ASSERT(dir);
	while ((e = readdir(dir)))
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

static unsigned count_threads(const char *name)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;

	FZ_ASSERT(dir);
	while ((e = readdir(dir))) {
		char path[300], comm[32] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f))
			n += !strncmp(comm, name, strlen(name));
		fclose(f);
	}
	closedir(dir);
	return n;
}

static void fv_post_rx(uint32_t len, bool readable)
{
	uint64_t gpa = vdrv_alloc(&fv.d, len, 8);
	struct vdrv_sg sg = { .gpa = gpa, .len = len, .writable = !readable };
	int head = vdrv_add(&fv.d, RXQ, &sg, 1, false);

	if (head < 0)
		return;
	fv.rx_len[head] = len;
	fv.rx_gpa[head] = gpa;
}

static void fv_start(void)
{
	FZ_ASSERT(vdrv_negotiate(&fv.d, VIRTIO_BIT(VIRTIO_F_VERSION_1) |
				 VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX)) == 0);
	memset(fv.rx_len, 0, sizeof(fv.rx_len));
	for (unsigned q = 0; q < 3; q++)
		FZ_ASSERT(vdrv_queue_setup(&fv.d, q, FV_QSZ) == 1);
	vdrv_driver_ok(&fv.d);
	for (unsigned i = 0; i < 8; i++)
		fv_post_rx(VSOCK_HDR_LEN + 4096, false);
	vdrv_kick(&fv.d, RXQ);
}

static void fv_reap(void)
{
	uint32_t id, len;

	while (vdrv_get_used(&fv.d, TXQ, &id, &len) == 1)
		FZ_ASSERT(len == 0);
	while (vdrv_get_used(&fv.d, RXQ, &id, &len) == 1) {
		struct vsock_hdr h;

		FZ_ASSERT(id < FV_QSZ && fv.rx_len[id]);
		FZ_ASSERT(len <= fv.rx_len[id]);
		if (len) {
			FZ_ASSERT(len >= VSOCK_HDR_LEN);
			vsock_hdr_decode(vdrv_host(&fv.d, fv.rx_gpa[id]), &h);
			/* An RST for a packet the guest sent elsewhere comes
			 * from the address it named (so its socket finds it). */
			FZ_ASSERT(h.src_cid == VSOCK_HOST_CID || h.op == VIRTIO_VSOCK_OP_RST);
			FZ_ASSERT(h.dst_cid == FV_CID);
			FZ_ASSERT(h.type == VIRTIO_VSOCK_TYPE_STREAM);
			FZ_ASSERT(len == VSOCK_HDR_LEN + h.len);
			FZ_ASSERT(h.op == VIRTIO_VSOCK_OP_RW || !h.len);
			if (h.op == VIRTIO_VSOCK_OP_REQUEST)
				fv.host_ports[h.src_port % 4] = h.src_port;
		}
		fv.rx_len[id] = 0;
	}
	FZ_ASSERT(!(vdrv_status(&fv.d) & VIRTIO_CONFIG_S_NEEDS_RESET));
}

static uint32_t pick_host_port(struct fz *f)
{
	uint8_t b = fz_u8(f);

	switch (b % 4) {
	case 0: return 1000;                    /* the listener */
	case 1: return 1001;                    /* nobody */
	case 2: return fv.host_ports[(b >> 2) % 4];   /* a host client's */
	default: return fz_u32(f);
	}
}

/* One TX packet from the input. */
static void op_packet(struct fz *f)
{
	static const uint16_t ops[] = {
		VIRTIO_VSOCK_OP_REQUEST, VIRTIO_VSOCK_OP_RESPONSE, VIRTIO_VSOCK_OP_RST,
		VIRTIO_VSOCK_OP_SHUTDOWN, VIRTIO_VSOCK_OP_RW, VIRTIO_VSOCK_OP_RW,
		VIRTIO_VSOCK_OP_CREDIT_UPDATE, VIRTIO_VSOCK_OP_CREDIT_REQUEST,
	};
	uint8_t shape = fz_u8(f), a = fz_u8(f);
	struct vsock_hdr h = {
		.src_cid = a & 0x80 ? fz_u32(f) : FV_CID,
		.dst_cid = a & 0x40 ? fz_u32(f) : VSOCK_HOST_CID,
		.src_port = 1 + a % 4,
		.type = a & 0x20 ? fz_u16(f) : VIRTIO_VSOCK_TYPE_STREAM,
		.op = a & 0x10 ? fz_u16(f) : ops[fz_u8(f) % 8],
		.flags = fz_u8(f) % 4,
		.buf_alloc = fz_u8(f) & 1 ? fz_u32(f) : 1u << 20,
		.fwd_cnt = fz_u8(f) & 1 ? fz_u32(f) : 0,
	};
	uint32_t plen = fz_u16(f) % 600, nseg = 1 + shape % 3, off = 0;
	struct vdrv_sg sg[3];
	uint64_t gpa;
	uint8_t *p;

	h.dst_port = pick_host_port(f);
	h.len = shape & 0x10 ? fz_u32(f) : plen;
	gpa = vdrv_alloc(&fv.d, VSOCK_HDR_LEN + plen, 8);
	p = vdrv_host(&fv.d, gpa);
	vsock_hdr_encode(&h, p);
	for (uint32_t i = 0; i < plen; i++)
		p[VSOCK_HDR_LEN + i] = (uint8_t)(i * 7 + a);
	/* The packet cut into nseg buffers (shape's bits: where, and whether
	 * one is device-writable or the chain shorter than a header). */
	for (uint32_t s = 0; s < nseg; s++) {
		uint32_t total = VSOCK_HDR_LEN + plen, left = total - off;
		uint32_t n = s + 1 == nseg ? left : (left * (1 + ((shape >> 2) & 3))) / 5;

		if (shape & 0x40 && s == 0)
			n = n < 20 ? n : 20;            /* a short first buffer */
		sg[s] = (struct vdrv_sg){ .gpa = gpa + off, .len = n,
					  .writable = (shape & 0x80) && s + 1 == nseg };
		off += n;
	}
	if (shape & 0x20 && plen == 0)
		sg[0].len = 10;                         /* no room for a header */
	for (uint32_t s = 0; s < nseg; s++)
		if (!sg[s].len)
			sg[s].len = 1;
	if (vdrv_add(&fv.d, TXQ, sg, nseg, false) < 0) {
		fv_reap();
		return;
	}
	vdrv_kick(&fv.d, TXQ);
}

static int host_slot(void)
{
	for (int i = 0; i < FV_HOSTS; i++)
		if (fv.host[i] < 0)
			return i;
	return -1;
}

/* The host's side: accept, write, read, close; or a client's line. */
static void op_host(struct fz *f)
{
	uint8_t b = fz_u8(f), k = fz_u8(f) % FV_HOSTS;
	char line[40], junk[512];
	int i, n;

	switch (b % 5) {
	case 0:
		i = host_slot();
		if (i >= 0)
			fv.host[i] = accept4(fv.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		break;
	case 1:
		if (fv.host[k] >= 0) {
			n = 1 + fz_u16(f) % sizeof(junk);
			memset(junk, 'h', (size_t)n);
			/* MSG_NOSIGNAL: a peer the device closed must not
			 * kill the fuzzer with SIGPIPE (exit 141, no input) */
			if (send(fv.host[k], junk, (size_t)n, MSG_NOSIGNAL) < 0) {
				/* full, or the peer went: both fine */
			}
		}
		break;
	case 2:
		if (fv.host[k] >= 0 && read(fv.host[k], junk, sizeof(junk)) < 0) {
			/* nothing yet */
		}
		break;
	case 3:
		if (fv.host[k] >= 0) {
			close(fv.host[k]);
			fv.host[k] = -1;
		}
		break;
	default: {
		struct sockaddr_un a = { .sun_family = AF_UNIX };

		i = host_slot();
		if (i < 0)
			break;
		fv.host[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		snprintf(a.sun_path, sizeof(a.sun_path), "%s", fv.path);
		if (fv.host[i] < 0 || connect(fv.host[i], (struct sockaddr *)&a, sizeof(a))) {
			if (fv.host[i] >= 0)
				close(fv.host[i]);
			fv.host[i] = -1;
			break;
		}
		n = b & 0x80 ? snprintf(line, sizeof(line), "CONNECT %u\n", 1 + (b >> 3) % 4) :
			       (int)(fz_u8(f) % sizeof(line));
		if (!(b & 0x80))
			fz_bytes(f, line, (size_t)n);
		if (send(fv.host[i], line, (size_t)n, MSG_NOSIGNAL) < 0) {
			/* the device closed it already */
		}
		break;
	}
	}
}

static void op_rx(struct fz *f)
{
	uint8_t b = fz_u8(f);
	uint32_t len = b & 0x80 ? 1 + fz_u16(f) % FV_RX_MAX : VSOCK_HDR_LEN + 64u * (b & 0x3f);

	fv_post_rx(len, (b & 0xc0) == 0xc0 && !(b & 1));
	vdrv_kick(&fv.d, RXQ);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = { data, size };
	struct mvm_vsock o = { .size = sizeof(o), .cid = FV_CID,
			       .transport = MVM_TRANSPORT_MMIO };
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char err[MVM_ERR_MAX], lpath[96];
	unsigned fds, steps = 0;
	struct stat st;

	if (!fv.dir[0]) {
		snprintf(fv.dir, sizeof(fv.dir), "/tmp/mvm-fuzz-vsock-XXXXXX");
		FZ_ASSERT(mkdtemp(fv.dir));
		snprintf(fv.path, sizeof(fv.path), "%s/v", fv.dir);
		atexit(fv_rmdir);
	}
	fds = count_fds();
	o.socket = fv.path;
	o.conns = 1 + fz_u8(&in) % 8;
	/* Half the inputs with the thread polling (poll=): its poll runs with
	 * host I/O in flight and ends at completions too. */
	o.poll_us = fz_u8(&in) % 2 ? 50 : 0;
	memset(fv.host, -1, sizeof(fv.host));
	memset(fv.host_ports, 0, sizeof(fv.host_ports));
	fv.resets = 0;
	FZ_ASSERT(vdrv_ram_init(&fv.d, 0x1000, 2u << 20) == 0);
	if (vsock_dev_new(&o, &fv.d.mem, &fv.dev, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		FZ_ASSERT(!"vsock_dev_new");
	}
	FZ_ASSERT(vdrv_attach(&fv.d, fv.dev) == 0);
	snprintf(lpath, sizeof(lpath), "%s_1000", fv.path);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", lpath);
	unlink(lpath);
	fv.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	FZ_ASSERT(fv.lfd >= 0 && !bind(fv.lfd, (struct sockaddr *)&a, sizeof(a)) &&
		  !listen(fv.lfd, 16));
	fv_start();

	while (fz_left(&in) && ++steps <= FV_STEPS) {
		/* The bump allocator never frees: stop before RAM runs out. */
		if (fv.d.brk + 8192 > fv.d.ram_gpa + fv.d.ram_size)
			break;
		switch (fz_u8(&in) % 8) {
		case 0:
		case 1: op_packet(&in); break;
		case 2: op_rx(&in); break;
		case 3:
		case 4: op_host(&in); break;
		case 5: fv_reap(); break;
		case 6: fv_sleep_us(fz_u8(&in) * 8u); break;
		case 7:
			if (fv.resets++ < FV_RESETS) {
				vdrv_wr(&fv.d, VIRTIO_MMIO_STATUS, 0);
				fv_start();
			}
			break;
		}
	}
	fv_sleep_us(500);
	fv_reap();
	virtio_dev_destroy(fv.dev);
	vdrv_detach(&fv.d);
	for (int i = 0; i < FV_HOSTS; i++)
		if (fv.host[i] >= 0)
			close(fv.host[i]);
	close(fv.lfd);
	unlink(lpath);
	free(fv.d.ram);
	FZ_ASSERT(lstat(fv.path, &st) < 0);        /* the device removed its socket */
	for (unsigned i = 0; count_threads("mvm-vsock") && i < 20000; i++)
		usleep(100);
	FZ_ASSERT(count_threads("mvm-vsock") == 0);
	FZ_ASSERT(count_fds() == fds);
	return 0;
}

static void fuzz_seeds(void)
{
	struct fz_buf s;

	/* A guest connect to the listener with data, a host client's
	 * connect, data from the host, a reset. */
	s.n = 0;
	fzb_u8(&s, 4);                              /* 5 connections */
	fzb_u8(&s, 0); fzb_u8(&s, 0); fzb_u8(&s, 0); fzb_u8(&s, 0);   /* REQUEST 1 -> 1000 */
	fzb_u8(&s, 0); fzb_u8(&s, 0); fzb_u8(&s, 0); fzb_u16(&s, 0); fzb_u8(&s, 0);
	fzb_u8(&s, 6); fzb_u8(&s, 200);             /* wait */
	fzb_u8(&s, 3); fzb_u8(&s, 0); fzb_u8(&s, 0); /* host accepts */
	fzb_u8(&s, 0); fzb_u8(&s, 0); fzb_u8(&s, 0); fzb_u8(&s, 4);   /* RW 1 -> 1000 */
	fzb_u8(&s, 0); fzb_u8(&s, 0); fzb_u8(&s, 0); fzb_u16(&s, 300); fzb_u8(&s, 0);
	fzb_u8(&s, 3); fzb_u8(&s, 1); fzb_u8(&s, 0); fzb_u16(&s, 100);  /* host writes */
	fzb_u8(&s, 3); fzb_u8(&s, 0x84); fzb_u8(&s, 0);  /* a client: CONNECT 1 */
	fzb_u8(&s, 6); fzb_u8(&s, 200);
	fzb_u8(&s, 5);                              /* reap */
	fzb_u8(&s, 2); fzb_u8(&s, 0x80); fzb_u16(&s, 30);   /* a small RX buffer */
	fzb_u8(&s, 7);                              /* reset */
	fzb_u8(&s, 6); fzb_u8(&s, 100);
	fuzz_seed("connect_data_reset", s.b, s.n);
}
