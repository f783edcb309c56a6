/* 16550A register model: LSR/IIR transitions, DLAB, FIFO control,
 * loopback, RX FIFO -> interrupt line; the TX buffer the host drains and
 * the THRE back-pressure of a full one. */
#include "tests/unit/check.h"
#include "devices/serial.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

static int irq_changes;
static bool irq_now;

static void set_irq(void *opaque, bool level)
{
	(void)opaque;
	irq_now = level;
	irq_changes++;
}

/* The guest's next byte is 'a' + tx_seq % 26 (send_while_thre). */
static size_t tx_seq;

static void uart(struct serial *s)
{
	tx_seq = 0;
	CHECK_EQ(serial_init(s, set_irq, NULL), 0);
	irq_changes = 0;
	irq_now = false;
}

static uint8_t rd(struct serial *s, unsigned reg)
{
	uint8_t v;
	serial_io_ops.read(s, reg, &v, 1);
	return v;
}

static void wr(struct serial *s, unsigned reg, uint8_t v)
{
	serial_io_ops.write(s, reg, &v, 1);
}

TEST(reset_state_idle)
{
	struct serial s;

	uart(&s);
	CHECK_EQ(rd(&s, UART_LSR), UART_LSR_THRE | UART_LSR_TEMT);
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_NO_INT);
	CHECK_EQ(rd(&s, UART_IER), 0);
	CHECK(!irq_now);
}

TEST(thr_writes_reach_output)
{
	struct serial s;
	uint8_t buf[8];

	uart(&s);
	wr(&s, UART_THR, 'h');
	wr(&s, UART_THR, 'i');
	CHECK_EQ(console_port_tx_peek(&s.con, buf, sizeof(buf)), 2);
	CHECK(buf[0] == 'h' && buf[1] == 'i');
	CHECK_EQ(s.con.tx_bytes, 2);
}

TEST(dlab_switches_divisor_latch)
{
	struct serial s;

	uart(&s);
	wr(&s, UART_LCR, UART_LCR_DLAB | 0x03);
	wr(&s, UART_DLL, 0x01);
	wr(&s, UART_DLM, 0x00);
	CHECK_EQ(rd(&s, UART_DLL), 0x01);
	CHECK_EQ(rd(&s, UART_DLM), 0x00);
	wr(&s, UART_LCR, 0x03);
	CHECK_EQ(rd(&s, UART_IER), 0);       /* IER untouched by DLM write */
	CHECK_EQ(rd(&s, UART_LCR), 0x03);
	CHECK_EQ(s.con.tx_bytes, 0);            /* DLL write was not a THR write */
}

TEST(thre_interrupt_on_enable_cleared_by_iir_read)
{
	struct serial s;

	uart(&s);
	wr(&s, UART_IER, UART_IER_THRI);
	CHECK(irq_now);
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_THRI);
	CHECK(!irq_now);
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_NO_INT);
	wr(&s, UART_THR, 'x');               /* THR empties again: THRE again */
	CHECK(irq_now);
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_THRI);
}

TEST(fifo_enable_shows_in_iir)
{
	struct serial s;

	uart(&s);
	wr(&s, UART_FCR, UART_FCR_ENABLE | UART_FCR_CLEAR_RX | UART_FCR_CLEAR_TX);
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_FIFO | UART_IIR_NO_INT);
	wr(&s, UART_FCR, 0);
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_NO_INT);
}

TEST(rx_fifo_raises_rda_and_drains)
{
	struct serial s;
	const uint8_t in[20] = "abcdefghijklmnopqrst";

	uart(&s);
	wr(&s, UART_FCR, UART_FCR_ENABLE);
	CHECK_EQ(console_port_rx_room(&s.con), SERIAL_FIFO_SIZE);
	CHECK_EQ(console_port_rx_push(&s.con, in, 20), SERIAL_FIFO_SIZE);   /* no overrun: refused */
	CHECK_EQ(console_port_rx_room(&s.con), 0);
	CHECK(!irq_now);                       /* RDA not enabled yet */
	CHECK(rd(&s, UART_LSR) & UART_LSR_DR);
	wr(&s, UART_IER, UART_IER_RDI);
	CHECK(irq_now);
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_FIFO | UART_IIR_RDI);
	for (int i = 0; i < SERIAL_FIFO_SIZE; i++)
		CHECK_EQ(rd(&s, UART_RBR), in[i]);
	CHECK(!(rd(&s, UART_LSR) & UART_LSR_DR));
	CHECK(!irq_now);
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_FIFO | UART_IIR_NO_INT);
}

TEST(rda_has_priority_over_thre)
{
	struct serial s;

	uart(&s);
	wr(&s, UART_IER, UART_IER_RDI | UART_IER_THRI);
	CHECK_EQ(console_port_rx_push(&s.con, (const uint8_t *)"z", 1), 1);
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_RDI);
	CHECK_EQ(rd(&s, UART_RBR), 'z');
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_THRI);
}

TEST(without_fifo_holds_one_byte)
{
	struct serial s;

	uart(&s);
	CHECK_EQ(console_port_rx_room(&s.con), 1);
	CHECK_EQ(console_port_rx_push(&s.con, (const uint8_t *)"ab", 2), 1);
}

TEST(loopback_wires_mcr_to_msr_and_thr_to_rbr)
{
	struct serial s;
	uint8_t c;

	uart(&s);
	/* Linux's 8250 probe: MCR = LOOP|OUT2|RTS must read back MSR 0x90. */
	wr(&s, UART_MCR, UART_MCR_LOOP | UART_MCR_OUT2 | UART_MCR_RTS);
	CHECK_EQ(rd(&s, UART_MSR) & 0xf0, UART_MSR_DCD | UART_MSR_CTS);
	CHECK_EQ(rd(&s, UART_MSR) & 0x0f, 0);  /* deltas cleared by the read */
	wr(&s, UART_THR, 'L');
	CHECK(rd(&s, UART_LSR) & UART_LSR_DR);
	CHECK_EQ(rd(&s, UART_RBR), 'L');
	CHECK_EQ(console_port_rx_room(&s.con), 0);       /* line disconnected */
	CHECK_EQ(console_port_tx_peek(&s.con, &c, 1), 0);     /* nothing went out */
	CHECK_EQ(s.con.tx_bytes, 0);
	wr(&s, UART_MCR, UART_MCR_OUT2);
	CHECK_EQ(rd(&s, UART_MSR), UART_MSR_DCD | UART_MSR_DSR | UART_MSR_CTS |
		 UART_MSR_DDSR);                 /* DSR came back: delta set */
}

TEST(loopback_overrun_sets_oe_cleared_by_lsr_read)
{
	struct serial s;

	uart(&s);
	wr(&s, UART_MCR, UART_MCR_LOOP);
	wr(&s, UART_THR, '1');
	wr(&s, UART_THR, '2');                 /* 1-byte holding register full */
	CHECK_EQ(rd(&s, UART_LSR) & UART_LSR_OE, UART_LSR_OE);
	CHECK_EQ(rd(&s, UART_LSR) & UART_LSR_OE, 0);
	wr(&s, UART_IER, UART_IER_RLSI);
	wr(&s, UART_THR, '3');
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_RLSI);
}

TEST(scratch_register)
{
	struct serial s;

	uart(&s);
	wr(&s, UART_SCR, 0xa5);
	CHECK_EQ(rd(&s, UART_SCR), 0xa5);
}

/* --- TX buffer and THRE back-pressure ----------------------------------- */

/* Write n bytes through THR as Linux's 8250 driver does: a FIFO load per
 * THRE; stops early (returning how many went) once THRE is clear. */
static size_t send_while_thre(struct serial *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (i % SERIAL_FIFO_SIZE == 0 && !(rd(s, UART_LSR) & UART_LSR_THRE))
			break;
		wr(s, UART_THR, (uint8_t)('a' + tx_seq++ % 26));
	}
	return i;
}

/* Take n bytes as the host would, checking they are the guest's in order. */
static void take(struct serial *s, size_t n, size_t *taken)
{
	uint8_t buf[4096];

	while (n) {
		size_t k = console_port_tx_peek(&s->con, buf, n < sizeof(buf) ? n : sizeof(buf));

		CHECK(k > 0);
		for (size_t i = 0; i < k; i++)
			CHECK_EQ(buf[i], 'a' + (*taken + i) % 26);
		console_port_tx_consume(&s->con, k, true);
		*taken += k;
		n -= k;
	}
}

TEST(output_waits_in_the_buffer_until_the_host_takes_it)
{
	struct serial s;
	uint8_t buf[4];
	size_t taken = 0;

	uart(&s);
	CHECK_EQ(send_while_thre(&s, 3), 3);
	CHECK_EQ(console_port_tx_peek(&s.con, buf, sizeof(buf)), 3);      /* peek leaves them */
	CHECK_EQ(console_port_tx_peek(&s.con, buf, sizeof(buf)), 3);
	take(&s, 3, &taken);
	CHECK_EQ(console_port_tx_peek(&s.con, buf, sizeof(buf)), 0);
	CHECK_EQ(s.con.tx_dropped, 0);
}

TEST(a_full_buffer_clears_thre_and_temt_so_the_guest_waits)
{
	struct serial s;
	size_t sent;

	uart(&s);
	sent = send_while_thre(&s, 2 * CONSOLE_BUF_SIZE);
	/* THRE went away with less than a FIFO load of room left; the
	 * last load it allowed still fitted: nothing was dropped. */
	CHECK(sent <= CONSOLE_BUF_SIZE);
	CHECK(sent > CONSOLE_BUF_SIZE - 2 * SERIAL_FIFO_SIZE);
	CHECK_EQ(rd(&s, UART_LSR) & (UART_LSR_THRE | UART_LSR_TEMT), 0);
	CHECK_EQ(s.con.tx_dropped, 0);
	CHECK_EQ(s.con.tx_bytes, sent);
	CHECK_EQ(s.tx_waits, 1);
}

TEST(thre_comes_back_with_its_interrupt_once_the_host_took_half)
{
	struct serial s;
	size_t sent, taken = 0;

	uart(&s);
	wr(&s, UART_IER, UART_IER_THRI);
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_THRI);
	sent = send_while_thre(&s, 2 * CONSOLE_BUF_SIZE);
	CHECK(!irq_now);                          /* busy: no THRE interrupt */
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_NO_INT);
	/* A little room is not enough (no THRE per byte the host takes). */
	take(&s, SERIAL_FIFO_SIZE, &taken);
	CHECK(!irq_now);
	CHECK_EQ(rd(&s, UART_LSR) & UART_LSR_THRE, 0);
	take(&s, sent - CONSOLE_BUF_SIZE / 2, &taken);   /* half the buffer free */
	CHECK(irq_now);
	CHECK_EQ(rd(&s, UART_LSR) & (UART_LSR_THRE | UART_LSR_TEMT),
		 UART_LSR_THRE | UART_LSR_TEMT);
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_THRI);
	CHECK(!irq_now);
}

TEST(a_slow_reader_loses_no_byte_of_a_driver_that_honours_thre)
{
	struct serial s;
	size_t sent = 0, taken = 0, total = 5 * CONSOLE_BUF_SIZE + 7;

	uart(&s);
	/* The guest sends whenever THRE says so; the host takes 1000
	 * bytes at a time, in between. */
	while (sent < total) {
		size_t k = 1000;

		sent += send_while_thre(&s, total - sent);
		if (k > sent - taken)
			k = sent - taken;
		take(&s, k, &taken);
	}
	take(&s, sent - taken, &taken);
	CHECK_EQ(taken, total);
	CHECK_EQ(s.con.tx_dropped, 0);
	CHECK(s.tx_waits > 0);
}

TEST(a_guest_that_ignores_thre_loses_only_what_finds_no_room)
{
	struct serial s;

	uart(&s);
	for (size_t i = 0; i < CONSOLE_BUF_SIZE + 100; i++)
		wr(&s, UART_THR, 'x');           /* never reads LSR */
	CHECK_EQ(s.con.tx_bytes, CONSOLE_BUF_SIZE + 100);
	CHECK_EQ(s.con.tx_dropped, 100);
	CHECK_EQ(s.con.tx.len, CONSOLE_BUF_SIZE);
}

TEST(output_discarded_by_the_host_counts_as_dropped)
{
	struct serial s;

	uart(&s);
	send_while_thre(&s, 10);
	console_port_tx_consume(&s.con, 10, false);
	CHECK_EQ(s.con.tx_dropped, 10);
	CHECK_EQ(s.con.tx.len, 0);
}

TEST(output_into_an_empty_buffer_wakes_the_host_once)
{
	struct serial s;
	uint64_t v = 0;
	int efd = eventfd(0, EFD_NONBLOCK);
	size_t taken = 0;

	CHECK(efd >= 0);
	uart(&s);
	console_port_set_tx_wake(&s.con, efd);
	CHECK_EQ(read(efd, &v, sizeof(v)), -1);      /* nothing yet */
	send_while_thre(&s, 3);
	CHECK_EQ(read(efd, &v, sizeof(v)), sizeof(v));
	CHECK_EQ(v, 1);                              /* one wake for three bytes */
	take(&s, 3, &taken);
	send_while_thre(&s, 1);
	CHECK_EQ(read(efd, &v, sizeof(v)), sizeof(v));
	close(efd);
}

TEST(enabling_the_thre_interrupt_while_busy_raises_nothing)
{
	struct serial s;

	uart(&s);
	send_while_thre(&s, 2 * CONSOLE_BUF_SIZE);
	wr(&s, UART_IER, UART_IER_THRI);
	CHECK(!irq_now);
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_NO_INT);
}

TEST(loopback_bytes_never_reach_the_host_buffer)
{
	struct serial s;

	uart(&s);
	wr(&s, UART_MCR, UART_MCR_LOOP);
	wr(&s, UART_THR, 'q');
	CHECK_EQ(s.con.tx.len, 0);
	CHECK(rd(&s, UART_LSR) & UART_LSR_THRE);
}

TEST(the_buffer_wraps_around_in_order)
{
	struct console_buf b;
	uint8_t in[CONSOLE_BUF_SIZE], out[CONSOLE_BUF_SIZE];

	console_buf_init(&b);
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i * 7);
	CHECK_EQ(console_buf_put(&b, in, 1000), 1000);
	console_buf_consume(&b, 1000);
	CHECK_EQ(console_buf_put(&b, in, sizeof(in) + 1), sizeof(in));   /* wraps; one too many */
	CHECK_EQ(console_buf_room(&b), 0);
	CHECK_EQ(console_buf_peek(&b, out, sizeof(out)), sizeof(out));
	CHECK(memcmp(in, out, sizeof(in)) == 0);
}
