/* Console output from the device's buffer to the host (vmm/lib/console_out.c),
 * with a real UART (devices/serial.c) as the device and pipes, files and
 * sockets as the host's output: a reader that stops reading never blocks
 * the drain, and the guest's bytes arrive in order or are counted as
 * dropped. */
#include "tests/unit/check.h"
#include "devices/serial.h"
#include "vmm/lib/console_out.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static void no_irq(void *opaque, bool level)
{
	(void)opaque;
	(void)level;
}

struct rig {
	struct serial s;
	struct vm_console con;
	struct conout out;
	size_t seq;             /* the guest's next byte: seq % 251 */
};

static struct rig *rig(void)
{
	struct rig *r = calloc(1, sizeof(*r));

	CHECK(r);
	CHECK_EQ(serial_init(&r->s, no_irq, NULL), 0);
	r->con = (struct vm_console){ .ops = &console_port_vm_ops, .dev = &r->s.con };
	return r;
}

static void rig_free(struct rig *r)
{
	conout_fini(&r->out);
	serial_fini(&r->s);
	free(r);
}

/* The guest writes n bytes through THR while THRE allows; returns how many. */
static size_t guest_send(struct rig *r, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		uint8_t v;

		if (i % SERIAL_FIFO_SIZE == 0) {
			serial_io_ops.read(&r->s, UART_LSR, &v, 1);
			if (!(v & UART_LSR_THRE))
				break;
		}
		v = (uint8_t)(r->seq++ % 251);
		serial_io_ops.write(&r->s, UART_THR, &v, 1);
	}
	return i;
}

/* Read what is in the pipe now, checking it continues the pattern. */
static size_t reader_take(int fd, size_t *got)
{
	uint8_t buf[65536];
	ssize_t n;
	size_t total = 0;

	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++)
			CHECK_EQ(buf[i], (*got + (size_t)i) % 251);
		*got += (size_t)n;
		total += (size_t)n;
	}
	return total;
}

TEST(a_reader_that_stops_reading_never_blocks_the_drain)
{
	struct rig *r = rig();
	int p[2];
	size_t sent = 0, got = 0;

	CHECK_EQ(pipe(p), 0);             /* a blocking pipe, like mvm | less */
	CHECK_EQ(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	CHECK_EQ(conout_init(&r->out, &r->con, p[1], NULL, NULL, NULL), 0);
	CHECK(!r->out.may_block);
	/* Far more than the pipe and the buffer hold, nobody reading. */
	for (int round = 0; round < 64; round++) {
		sent += guest_send(r, 8192);
		conout_drain(&r->out);    /* must return: the test would hang */
	}
	CHECK(conout_wait_fd(&r->out) >= 0);       /* waits for POLLOUT */
	CHECK(sent < 64 * 8192);                   /* the guest was held back */
	CHECK_EQ(r->s.con.tx_dropped, 0);
	/* The reader comes back: everything arrives, in order. */
	for (int i = 0; i < 100000 && got < sent; i++) {
		reader_take(p[0], &got);
		conout_drain(&r->out);
	}
	CHECK_EQ(got, sent);
	CHECK_EQ(r->s.con.tx_bytes, sent);
	CHECK_EQ(r->s.con.tx_dropped, 0);
	close(p[0]);
	close(p[1]);
	rig_free(r);
}

TEST(the_callers_pipe_description_stays_blocking)
{
	struct rig *r = rig();
	int p[2];

	CHECK_EQ(pipe(p), 0);
	CHECK_EQ(conout_init(&r->out, &r->con, p[1], NULL, NULL, NULL), 0);
	CHECK(r->out.own_fd);
	CHECK_EQ(fcntl(p[1], F_GETFL) & O_NONBLOCK, 0);
	close(p[0]);
	close(p[1]);
	rig_free(r);
}

TEST(a_closed_reader_drops_output_so_the_guest_never_waits)
{
	struct rig *r = rig();
	int p[2];

	CHECK_EQ(pipe(p), 0);
	CHECK_EQ(conout_init(&r->out, &r->con, p[1], NULL, NULL, NULL), 0);
	close(p[0]);
	signal(SIGPIPE, SIG_IGN);         /* as mvm(1) does */
	CHECK_EQ(guest_send(r, 100), 100);
	CHECK(conout_drain(&r->out));
	CHECK(r->out.dead);
	CHECK_EQ(r->s.con.tx_dropped, 100);
	/* From now on the guest's output goes nowhere: it never waits. */
	for (int i = 0; i < 8; i++) {
		CHECK_EQ(guest_send(r, CONSOLE_BUF_SIZE / 2), CONSOLE_BUF_SIZE / 2);
		CHECK(conout_drain(&r->out));
	}
	CHECK_EQ(r->s.tx_waits, 0);
	CHECK_EQ(r->s.con.tx_dropped, 100 + 4 * CONSOLE_BUF_SIZE);
	close(p[1]);
	rig_free(r);
}

static uint8_t fn_buf[4 * CONSOLE_BUF_SIZE];
static size_t fn_len;

static void fn(void *opaque, const uint8_t *buf, size_t len)
{
	CHECK(opaque == fn_buf);
	CHECK(fn_len + len <= sizeof(fn_buf));
	memcpy(fn_buf + fn_len, buf, len);
	fn_len += len;
}

TEST(console_fn_gets_the_output_in_order)
{
	struct rig *r = rig();

	fn_len = 0;
	CHECK_EQ(conout_init(&r->out, &r->con, 1, fn, fn_buf, NULL), 0);
	CHECK_EQ(guest_send(r, 3000), 3000);
	CHECK(conout_drain(&r->out));
	CHECK_EQ(fn_len, 3000);
	for (size_t i = 0; i < fn_len; i++)
		CHECK_EQ(fn_buf[i], i % 251);
	rig_free(r);
}

TEST(no_output_at_all_discards_without_counting_drops)
{
	struct rig *r = rig();

	CHECK_EQ(conout_init(&r->out, &r->con, -1, NULL, NULL, NULL), 0);
	/* Drained as it comes, the guest never waits. */
	for (int i = 0; i < 8; i++) {
		CHECK_EQ(guest_send(r, CONSOLE_BUF_SIZE / 2), CONSOLE_BUF_SIZE / 2);
		CHECK(conout_drain(&r->out));
	}
	CHECK_EQ(r->s.tx_waits, 0);
	CHECK_EQ(r->s.con.tx_dropped, 0);
	rig_free(r);
}

TEST(a_regular_file_gets_every_byte)
{
	struct rig *r = rig();
	char path[] = "/tmp/mvm-conout-XXXXXX";
	int fd = mkstemp(path);
	size_t got = 0;

	CHECK(fd >= 0);
	unlink(path);
	CHECK_EQ(conout_init(&r->out, &r->con, fd, NULL, NULL, NULL), 0);
	CHECK(!r->out.own_fd);            /* written as it is: files do not block */
	CHECK_EQ(guest_send(r, 5000), 5000);
	CHECK(conout_drain(&r->out));
	CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
	CHECK_EQ(reader_take(fd, &got), 5000);
	close(fd);
	rig_free(r);
}

TEST(a_socket_that_stops_reading_never_blocks_the_drain)
{
	struct rig *r = rig();
	int sv[2];
	size_t sent = 0, got = 0;

	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	CHECK_EQ(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
	CHECK_EQ(conout_init(&r->out, &r->con, sv[1], NULL, NULL, NULL), 0);
	CHECK(r->out.sock);
	for (int round = 0; round < 256; round++) {
		sent += guest_send(r, 8192);
		conout_drain(&r->out);
	}
	CHECK(conout_wait_fd(&r->out) >= 0);
	for (int i = 0; i < 100000 && got < sent; i++) {
		reader_take(sv[0], &got);
		conout_drain(&r->out);
	}
	CHECK_EQ(got, sent);
	CHECK_EQ(r->s.con.tx_dropped, 0);
	close(sv[0]);
	close(sv[1]);
	rig_free(r);
}

TEST(discard_drops_what_is_left_and_counts_it)
{
	struct rig *r = rig();

	CHECK_EQ(conout_init(&r->out, &r->con, -1, NULL, NULL, NULL), 0);
	CHECK_EQ(guest_send(r, 700), 700);
	conout_discard(&r->out);
	CHECK_EQ(r->s.con.tx_dropped, 700);
	CHECK_EQ(r->s.con.tx.len, 0);
	rig_free(r);
}
