/* The 16550A UART (devices/serial.c) and its output buffer
 * (devices/console_buf.c) between a fuzzed guest driver and a fuzzed host:
 * register reads and writes of any width at any offset through the port
 * bus (the UART at 0x3f8..0x3ff, so wide accesses at its end miss it),
 * bursts of THR writes that fill the buffer, received bytes pushed as the
 * control thread does, and output taken (delivered or discarded) in any
 * amounts.
 *
 * A model beside it follows what the guest and the host did, and after
 * every step:
 *  - output: the buffer holds exactly the bytes written to THR that found
 *    room, oldest first, and what the host peeks is their front; tx_bytes
 *    counts every THR byte outside loopback, tx_dropped exactly those that
 *    found no room plus those the host discarded: nothing lost or
 *    duplicated beyond what the counters report;
 *  - flow control: THRE is withheld only while the buffer is short of room
 *    (< half), and given whenever it has a FIFO load of room;
 *  - input: the RX FIFO holds at most its capacity (16, or 1 without FIFO
 *    mode), RBR reads return the received (or looped-back) bytes in order,
 *    LSR.DR says whether any is left, and the host is never handed more
 *    room than the FIFO has;
 *  - the interrupt line is driven only on changes, and its level is what
 *    IIR reports;
 *  - the wake eventfd is written once per empty-to-non-empty edge. */
#include "tests/fuzz/fuzz.h"
#include "devices/serial.h"

#include <sys/eventfd.h>
#include <unistd.h>

#define PORT 0x3f8

struct model {
	uint8_t tx[CONSOLE_BUF_SIZE];   /* what the buffer must hold */
	size_t tx_head, tx_len;
	uint64_t tx_bytes, tx_dropped;
	uint64_t wakes;                 /* empty -> non-empty edges */
	uint8_t rx[SERIAL_FIFO_SIZE];   /* what RBR must return, in order */
	unsigned rx_head, rx_len;
	bool irq;                       /* the line as the callback last set it */
	unsigned irq_calls;
};

struct tp {
	struct iobus bus;
	struct serial s;
	struct model m;
	int wake_fd;
	uint8_t seq;                    /* the next burst byte */
};

static void set_irq(void *opaque, bool level)
{
	struct model *m = opaque;

	FZ_ASSERT(level != m->irq);     /* only on changes */
	m->irq = level;
	m->irq_calls++;
}

static unsigned rx_cap(const struct serial *s)
{
	return (s->fcr & UART_FCR_ENABLE) ? SERIAL_FIFO_SIZE : 1;
}

static void model_rx_put(struct tp *t, uint8_t b)
{
	if (t->m.rx_len >= rx_cap(&t->s))
		return;                 /* overrun: the UART drops it */
	t->m.rx[(t->m.rx_head + t->m.rx_len) % SERIAL_FIFO_SIZE] = b;
	t->m.rx_len++;
}

/* What a THR write of b will do, from the UART's state before it. */
static void model_thr(struct tp *t, uint8_t b)
{
	if (t->s.lcr & UART_LCR_DLAB)
		return;                 /* DLL */
	if (t->s.mcr & UART_MCR_LOOP) {
		model_rx_put(t, b);
		return;
	}
	t->m.tx_bytes++;
	if (t->m.tx_len == CONSOLE_BUF_SIZE) {
		t->m.tx_dropped++;
		return;
	}
	if (t->m.tx_len == 0)
		t->m.wakes++;
	t->m.tx[(t->m.tx_head + t->m.tx_len) % CONSOLE_BUF_SIZE] = b;
	t->m.tx_len++;
}

/* One guest access at PORT + off. The UART sees byte 0 of any access that
 * lies wholly in its 8 ports. */
static void guest_access(struct tp *t, unsigned off, unsigned len, bool write, uint32_t val)
{
	uint8_t d[4], lsr_before = 0;
	bool hit = off + len <= 8;
	unsigned reg = off & 7;
	bool dlab = t->s.lcr & UART_LCR_DLAB;
	uint8_t fcr_before = t->s.fcr;
	bool irq_before = t->m.irq;

	le32_store(d, val);
	if (hit && write) {
		if (reg == UART_THR)
			model_thr(t, d[0]);
		else if (reg == UART_FCR &&
			 (((d[0] ^ fcr_before) & UART_FCR_ENABLE) || (d[0] & UART_FCR_CLEAR_RX)))
			t->m.rx_len = 0;
	}
	if (hit && !write && reg == UART_LSR)
		lsr_before = (uint8_t)t->m.rx_len;
	FZ_ASSERT(iobus_access(&t->bus, PORT + off, d, len, write) == hit);
	if (!hit || write)
		return;
	for (unsigned i = 1; i < len; i++)
		FZ_ASSERT(d[i] == 0);
	if (reg == UART_RBR && !dlab) {
		if (t->m.rx_len) {
			FZ_ASSERT(d[0] == t->m.rx[t->m.rx_head]);
			t->m.rx_head = (t->m.rx_head + 1) % SERIAL_FIFO_SIZE;
			t->m.rx_len--;
		} else {
			FZ_ASSERT(d[0] == 0);
		}
	} else if (reg == UART_LSR) {
		FZ_ASSERT(!!(d[0] & UART_LSR_DR) == (lsr_before != 0));
		FZ_ASSERT(!!(d[0] & UART_LSR_THRE) == !!(d[0] & UART_LSR_TEMT));
	} else if (reg == UART_IIR) {
		/* The line was up exactly when an interrupt was pending. */
		FZ_ASSERT(!(d[0] & UART_IIR_NO_INT) == irq_before);
	}
}

/* The guest writes count bytes to THR, as a driver that ignores THRE. */
static void guest_burst(struct tp *t, unsigned count)
{
	for (unsigned i = 0; i < count; i++, t->seq++)
		guest_access(t, UART_THR, 1, true, t->seq);
}

/* The control thread: stdin bytes, at most the room the UART offers. */
static void host_rx(struct tp *t, struct fz *f)
{
	uint8_t buf[32];
	unsigned room = console_port_rx_room(&t->s.con), n = fz_u8(f) % sizeof(buf);
	bool greedy = n & 1;           /* a caller that pushes beyond the room */
	size_t took;

	fz_bytes(f, buf, n);
	if (t->s.mcr & UART_MCR_LOOP)
		FZ_ASSERT(room == 0);
	FZ_ASSERT(room <= rx_cap(&t->s) - t->m.rx_len);
	if (!greedy && n > room)
		n = room;
	took = console_port_rx_push(&t->s.con, buf, n);
	FZ_ASSERT(took <= n && took <= room);
	FZ_ASSERT(took == (n < room ? n : room));
	for (size_t i = 0; i < took; i++)
		model_rx_put(t, buf[i]);
}

/* The control thread takes output: peek some, consume part of it. */
static void host_tx(struct tp *t, struct fz *f)
{
	static uint8_t buf[CONSOLE_BUF_SIZE];
	size_t want = fz_u16(f) % (CONSOLE_BUF_SIZE + 1), got, first, n;
	uint8_t how = fz_u8(f);

	got = console_port_tx_peek(&t->s.con, buf, want);
	FZ_ASSERT(got == (want < t->m.tx_len ? want : t->m.tx_len));
	first = got < CONSOLE_BUF_SIZE - t->m.tx_head ? got : CONSOLE_BUF_SIZE - t->m.tx_head;
	FZ_ASSERT(!memcmp(buf, t->m.tx + t->m.tx_head, first));
	FZ_ASSERT(!memcmp(buf + first, t->m.tx, got - first));
	n = (how & 2) ? got : got / 2;
	console_port_tx_consume(&t->s.con, n, how & 1);
	if (!(how & 1))
		t->m.tx_dropped += n;
	t->m.tx_head = (t->m.tx_head + n) % CONSOLE_BUF_SIZE;
	t->m.tx_len -= n;
}

/* The wake eventfd's count against the model's edges (a syscall: after
 * the steps that expect a wake, and once at the end for any spurious one). */
static void check_wakes(struct tp *t)
{
	eventfd_t cnt = 0;

	if (eventfd_read(t->wake_fd, &cnt) == 0)
		t->m.wakes -= cnt;
	FZ_ASSERT(t->m.wakes == 0);
}

static void check(struct tp *t)
{
	struct serial *s = &t->s;
	size_t room = CONSOLE_BUF_SIZE - t->m.tx_len;

	FZ_ASSERT(s->con.tx.len == t->m.tx_len);
	FZ_ASSERT(s->con.tx_bytes == t->m.tx_bytes);
	FZ_ASSERT(s->con.tx_dropped == t->m.tx_dropped);
	FZ_ASSERT(s->rx_count == t->m.rx_len && s->rx_count <= rx_cap(s));
	FZ_ASSERT(s->rx_head < SERIAL_FIFO_SIZE);
	FZ_ASSERT(s->rx_count == 0 || s->rx_head == t->m.rx_head);
	/* Busy only while short of room, never while a FIFO load fits. */
	if (!s->tx_busy)
		FZ_ASSERT(room >= SERIAL_FIFO_SIZE);
	else
		FZ_ASSERT(room < CONSOLE_BUF_SIZE / 2);
	FZ_ASSERT(s->irq_level == t->m.irq);
	if (t->m.wakes)
		check_wakes(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned lens[] = { 1, 1, 2, 4 };
	struct fz in = { data, size };
	struct tp *t = calloc(1, sizeof(*t));
	/* THR writes in bursts, over the whole input: the buffer filled twice. */
	unsigned steps = 0, budget = 2 * CONSOLE_BUF_SIZE + 64;

	FZ_ASSERT(t);
	FZ_ASSERT(iobus_init(&t->bus) == 0);
	FZ_ASSERT(serial_init(&t->s, set_irq, &t->m) == 0);
	FZ_ASSERT(iobus_register(&t->bus, PORT, 8, &serial_io_ops, &t->s) == 0);
	t->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	FZ_ASSERT(t->wake_fd >= 0);
	console_port_set_tx_wake(&t->s.con, t->wake_fd);
	/* The model's RX FIFO starts where the UART's does. */
	t->m.rx_head = t->s.rx_head;

	while (fz_left(&in) && ++steps < 4096) {
		uint8_t op = fz_u8(&in);
		unsigned n;

		switch (op % 8) {
		case 0:
		case 1:
		case 2:
			n = fz_u8(&in);
			guest_access(t, n % 12, lens[(n >> 4) % 4], op % 8 != 2, fz_u8(&in));
			break;
		case 3:
			/* Mostly short bursts (each write is a whole register
			 * access); one in 8 long enough to fill the buffer. */
			n = fz_u16(&in);
			n = (n >> 13) == 7 ? (n & 0x1fff) * 4 : n % 512;
			n = n < budget ? n : budget;
			budget -= n;
			guest_burst(t, n);
			break;
		case 4:
		case 5:
			host_rx(t, &in);
			break;
		default:
			host_tx(t, &in);
			break;
		}
		/* RX head moves only with the FIFO: re-anchor the model once empty. */
		if (t->m.rx_len == 0)
			t->m.rx_head = t->s.rx_head;
		check(t);
	}
	check_wakes(t);
	iobus_destroy(&t->bus);
	serial_fini(&t->s);
	close(t->wake_fd);
	free(t);
	return 0;
}

/* --- seeds --- */

static void reg_w(struct fz_buf *s, unsigned reg, uint8_t v)
{
	fzb_u8(s, 0);
	fzb_u8(s, (uint8_t)reg);        /* 1-byte access */
	fzb_u8(s, v);
}

static void reg_r(struct fz_buf *s, unsigned reg)
{
	fzb_u8(s, 2);
	fzb_u8(s, (uint8_t)reg);
	fzb_u8(s, 0);
}

static void take(struct fz_buf *s, uint16_t n, bool delivered)
{
	fzb_u8(s, 6);
	fzb_u16(s, n);
	fzb_u8(s, (uint8_t)(2 | delivered));
}

static void fuzz_seeds(void)
{
	struct fz_buf s;

	/* Linux's 8250 set-up, a line of output, a keystroke echoed. */
	s.n = 0;
	reg_w(&s, UART_LCR, UART_LCR_DLAB | 3);
	reg_w(&s, UART_DLL, 1);
	reg_w(&s, UART_DLM, 0);
	reg_w(&s, UART_LCR, 3);
	reg_w(&s, UART_FCR, UART_FCR_ENABLE | UART_FCR_CLEAR_RX | UART_FCR_CLEAR_TX);
	reg_w(&s, UART_MCR, UART_MCR_DTR | UART_MCR_RTS | UART_MCR_OUT2);
	reg_w(&s, UART_IER, UART_IER_RDI | UART_IER_THRI);
	reg_r(&s, UART_IIR);
	for (const char *p = "login: "; *p; p++) {
		reg_r(&s, UART_LSR);
		reg_w(&s, UART_THR, (uint8_t)*p);
	}
	take(&s, 64, true);
	fzb_u8(&s, 4); fzb_u8(&s, 4); fzb_bytes(&s, "root", 4);
	reg_r(&s, UART_IIR);
	reg_r(&s, UART_LSR);
	for (int i = 0; i < 5; i++)
		reg_r(&s, UART_RBR);
	fuzz_seed("linux_console", s.b, s.n);

	/* The 8250 probe's loopback test: MCR loop, MSR follows, THR to RBR. */
	s.n = 0;
	reg_w(&s, UART_MCR, UART_MCR_LOOP | 0x0a);
	reg_r(&s, UART_MSR);
	reg_w(&s, UART_THR, 0x55);
	reg_r(&s, UART_LSR);
	reg_r(&s, UART_RBR);
	reg_w(&s, UART_FCR, UART_FCR_ENABLE);
	for (int i = 0; i < 18; i++)
		reg_w(&s, UART_THR, (uint8_t)i);
	reg_r(&s, UART_LSR);
	reg_w(&s, UART_MCR, UART_MCR_OUT2);
	fuzz_seed("loopback_probe", s.b, s.n);

	/* A guest that ignores THRE fills the buffer and loses bytes; the
	 * host then drains it, discarding part. */
	s.n = 0;
	reg_w(&s, UART_IER, UART_IER_THRI);
	fzb_u8(&s, 3); fzb_u16(&s, 0xe000 | 0x1000);       /* 16 KiB */
	fzb_u8(&s, 3); fzb_u16(&s, 100);
	reg_r(&s, UART_LSR);
	take(&s, 4096, false);
	take(&s, CONSOLE_BUF_SIZE / 2, true);
	reg_r(&s, UART_IIR);
	reg_r(&s, UART_LSR);
	fuzz_seed("full_buffer", s.b, s.n);
}
