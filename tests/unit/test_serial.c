/* 16550A register model: LSR/IIR transitions, DLAB, FIFO control,
 * loopback, RX FIFO -> interrupt line. */
#include "tests/unit/check.h"
#include "devices/serial.h"

#include <fcntl.h>
#include <unistd.h>

static int irq_changes;
static bool irq_now;

static void set_irq(void *opaque, bool level)
{
	(void)opaque;
	irq_now = level;
	irq_changes++;
}

static int out_pipe[2];

static void uart(struct serial *s)
{
	CHECK(pipe(out_pipe) == 0);
	CHECK_EQ(serial_init(s, out_pipe[1], set_irq, NULL), 0);
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
	char buf[8];

	uart(&s);
	wr(&s, UART_THR, 'h');
	wr(&s, UART_THR, 'i');
	CHECK_EQ(read(out_pipe[0], buf, sizeof(buf)), 2);
	CHECK(buf[0] == 'h' && buf[1] == 'i');
	CHECK_EQ(s.tx_bytes, 2);
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
	CHECK_EQ(s.tx_bytes, 0);            /* DLL write was not a THR write */
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
	char c;
	CHECK_EQ(read(out_pipe[0], &c, 1), 1);
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
	CHECK_EQ(serial_rx_room(&s), SERIAL_FIFO_SIZE);
	CHECK_EQ(serial_rx_push(&s, in, 20), SERIAL_FIFO_SIZE);   /* no overrun: refused */
	CHECK_EQ(serial_rx_room(&s), 0);
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
	CHECK_EQ(serial_rx_push(&s, (const uint8_t *)"z", 1), 1);
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_RDI);
	CHECK_EQ(rd(&s, UART_RBR), 'z');
	CHECK_EQ(rd(&s, UART_IIR), UART_IIR_THRI);
}

TEST(without_fifo_holds_one_byte)
{
	struct serial s;

	uart(&s);
	CHECK_EQ(serial_rx_room(&s), 1);
	CHECK_EQ(serial_rx_push(&s, (const uint8_t *)"ab", 2), 1);
}

TEST(loopback_wires_mcr_to_msr_and_thr_to_rbr)
{
	struct serial s;
	char c;

	uart(&s);
	/* Linux's 8250 probe: MCR = LOOP|OUT2|RTS must read back MSR 0x90. */
	wr(&s, UART_MCR, UART_MCR_LOOP | UART_MCR_OUT2 | UART_MCR_RTS);
	CHECK_EQ(rd(&s, UART_MSR) & 0xf0, UART_MSR_DCD | UART_MSR_CTS);
	CHECK_EQ(rd(&s, UART_MSR) & 0x0f, 0);  /* deltas cleared by the read */
	wr(&s, UART_THR, 'L');
	CHECK(rd(&s, UART_LSR) & UART_LSR_DR);
	CHECK_EQ(rd(&s, UART_RBR), 'L');
	CHECK_EQ(serial_rx_room(&s), 0);       /* line disconnected */
	fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
	CHECK_EQ(read(out_pipe[0], &c, 1), -1);     /* nothing went out */
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
