/* The SCLP model (arch/s390/sclp.c) as Linux drives it: Read SCP Info,
 * the event masks, VT220 output and input, the service signal after every
 * command, and the checks on a SERVC's operands. Big-endian fields; runs
 * under qemu-s390x-static on x86. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch/s390/sclp.h"
#include "tests/unit/check.h"
#include "vmm/base/log.h"
#include "vmm/base/byteorder.h"
#include "tests/unit/snap_sec.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"

#define RAM (64ULL << 20)
#define SCCB 0x20000ULL

struct t {
	struct guest_mem gm;
	struct sclp s;
	uint32_t signals[16];
	unsigned nsignals;
	int signal_ret;                 /* what the "injection" returns */
	int exit_status;                /* -1: none */
	uint8_t out[4096];
	size_t nout;
};

static int on_signal(void *opaque, uint32_t parm)
{
	struct t *t = opaque;

	if (t->signal_ret)
		return t->signal_ret;
	CHECK(t->nsignals < ARRAY_SIZE(t->signals));
	t->signals[t->nsignals++] = parm;
	return 0;
}

static void on_exit_status(void *opaque, int status)
{
	((struct t *)opaque)->exit_status = status;
}

/* The console output waiting for the host, as t->out/t->nout. */
static size_t out_now(struct t *t)
{
	t->nout = console_port_tx_peek(&t->s.con, t->out, sizeof(t->out));
	return t->nout;
}

static struct t *setup(unsigned ncpus)
{
	struct t *t = calloc(1, sizeof(*t));

	CHECK(t);
	CHECK_EQ(gmem_map(&t->gm, RAM, 1ULL << 32), 0);
	CHECK_EQ(sclp_init(&t->s, &t->gm, RAM, ncpus, on_signal, t), 0);
	t->s.guest_exit = on_exit_status;
	t->exit_status = -1;
	return t;
}

static void teardown(struct t *t)
{
	sclp_fini(&t->s);
	gmem_unmap(&t->gm);
	free(t);
}

static uint8_t *sccb(struct t *t, uint64_t at, unsigned len)
{
	uint8_t *p = gmem_ptr(&t->gm, at, len);

	CHECK(p);
	memset(p, 0, len);
	be16_store(p, (uint16_t)len);
	return p;
}

static uint16_t rc(const uint8_t *p)
{
	return be16_load(p + 6);
}

/* Enable VT220 both ways, as Linux's console driver does (8-byte masks). */
static void enable_vt220(struct t *t)
{
	uint8_t *p = sccb(t, SCCB, 12 + 4 * 8);

	be16_store(p + 10, 8);
	p[12 + 3] = 0x40;               /* guest receive mask: type 0x1a */
	p[12 + 8 + 3] = 0x40;           /* guest send mask */
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_WRITE_EVENT_MASK, SCCB, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_NORMAL_COMPLETION);
	/* The SCLP's own masks: it receives VT220 and the control-program
	 * identification (0x0b), and sends VT220 and Signal Quiesce (0x1d),
	 * nothing else. */
	CHECK_EQ(p[12 + 16 + 3], 0x40);
	CHECK_EQ(p[12 + 16 + 1], 0x20);
	CHECK_EQ(p[12 + 24 + 3], 0x48);
	CHECK_EQ(p[12 + 24 + 1], 0);
	CHECK_EQ(p[12 + 16], 0);
	CHECK_EQ(p[12 + 16 + 7], 0);
}

TEST(read_scp_info_reports_memory_and_cpus)
{
	struct t *t = setup(2);
	uint8_t *p = sccb(t, SCCB, 4096);

	p[2] = 0x80;
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_READ_SCP_INFO_FORCED, SCCB, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_NORMAL_READ_COMPLETION);
	CHECK_EQ(p[SCLP_INFO_RNSIZE], 1);                       /* 1 MiB increments */
	CHECK_EQ(be16_load(p + SCLP_INFO_RNMAX), RAM >> 20);
	CHECK_EQ(be16_load(p + SCLP_INFO_NCPURL), 2);
	CHECK_EQ(be16_load(p + SCLP_INFO_CPUOFF), SCLP_INFO_CPU_ENTRIES);
	CHECK_EQ(p[SCLP_INFO_CPU_ENTRIES], 0);                   /* core ids 0, 1 */
	CHECK_EQ(p[SCLP_INFO_CPU_ENTRIES + SCLP_CPU_ENTRY_LEN], 1);
	/* The service signal follows, naming the SCCB. */
	CHECK_EQ(t->nsignals, 1);
	CHECK_EQ(t->signals[0], SCCB);
	teardown(t);
}

TEST(read_scp_info_too_short_and_unknown_command)
{
	struct t *t = setup(1);
	uint8_t *p = sccb(t, SCCB, 64);

	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_READ_SCP_INFO, SCCB, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_INSUFFICIENT_SCCB_LENGTH);
	p = sccb(t, SCCB, 64);
	CHECK_EQ(sclp_service_call(&t->s, 0x00990001, SCCB, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_INVALID_SCLP_COMMAND);
	CHECK_EQ(t->nsignals, 2);
	teardown(t);
}

TEST(servc_operand_checks_are_program_exceptions)
{
	struct t *t = setup(1);

	sccb(t, SCCB, 4096);
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_READ_SCP_INFO, SCCB, true),
		 -SCLP_PGM_PRIVILEGED);
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_READ_SCP_INFO, SCCB + 4, false),
		 -SCLP_PGM_SPECIFICATION);                      /* not 8-aligned */
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_READ_SCP_INFO, 0x1000, false),
		 -SCLP_PGM_SPECIFICATION);                      /* the lowcore */
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_READ_SCP_INFO, 1ULL << 31, false),
		 -SCLP_PGM_SPECIFICATION);                      /* not below 2 GiB */
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_READ_SCP_INFO, RAM + 0x1000 - RAM % 8, false),
		 RAM < (1ULL << 31) ? -SCLP_PGM_ADDRESSING : -SCLP_PGM_SPECIFICATION);
	be16_store(gmem_ptr(&t->gm, SCCB, 8), 4);               /* length < header */
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_READ_SCP_INFO, SCCB, false),
		 -SCLP_PGM_SPECIFICATION);
	CHECK_EQ(t->nsignals, 0);       /* suppressed: no interrupt */
	teardown(t);
}

TEST(sccb_crossing_a_page_is_a_boundary_violation)
{
	struct t *t = setup(1);
	uint8_t *p = sccb(t, SCCB + 0xf00, 512);

	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_WRITE_EVENT_MASK, SCCB + 0xf00, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_SCCB_BOUNDARY_VIOLATION);
	CHECK_EQ(t->nsignals, 1);
	teardown(t);
}

TEST(event_mask_length_is_checked)
{
	struct t *t = setup(1);
	uint8_t *p = sccb(t, SCCB, 64);

	be16_store(p + 10, 0);
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_WRITE_EVENT_MASK, SCCB, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_INVALID_MASK_LENGTH);
	p = sccb(t, SCCB, 16);
	be16_store(p + 10, 8);                                  /* 4 masks of 8 > 16 */
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_WRITE_EVENT_MASK, SCCB, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_INSUFFICIENT_SCCB_LENGTH);
	teardown(t);
}

static uint8_t *vt220_write(struct t *t, const char *text)
{
	size_t n = strlen(text);
	uint8_t *p = sccb(t, SCCB, (unsigned)(8 + 6 + n));

	be16_store(p + 8, (uint16_t)(6 + n));
	p[10] = SCLP_EVTYP_VT220;
	memcpy(p + 14, text, n);
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_WRITE_EVENT_DATA, SCCB, false), 0);
	return p;
}

TEST(vt220_output_reaches_the_console_once_enabled)
{
	struct t *t = setup(1);
	uint8_t *p;

	p = vt220_write(t, "early");
	CHECK_EQ(rc(p), SCLP_RC_INVALID_FUNCTION);              /* not enabled yet */
	CHECK_EQ(out_now(t), 0);
	enable_vt220(t);
	p = vt220_write(t, "hello\r\n");
	CHECK_EQ(rc(p), SCLP_RC_NORMAL_COMPLETION);
	CHECK(p[11] & SCLP_EVBUF_ACCEPTED);
	CHECK_EQ(out_now(t), 7);
	CHECK(memcmp(t->out, "hello\r\n", 7) == 0);
	CHECK_EQ(__atomic_load_n(&t->s.con.tx_bytes, __ATOMIC_RELAXED), 7);
	teardown(t);
}

TEST(store_data_event_is_refused_quietly)
{
	struct t *t = setup(1);
	uint8_t *p = sccb(t, SCCB, 8 + 6 + 4);

	enable_vt220(t);
	p = sccb(t, SCCB, 8 + 6 + 4);
	be16_store(p + 8, 6 + 4);
	p[10] = SCLP_EVTYP_STORE_DATA;
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_WRITE_EVENT_DATA, SCCB, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_EVENT_BUFFER_SYNTAX_ERROR);
	CHECK_EQ(out_now(t), 0);
	teardown(t);
}

TEST(malformed_event_buffers_write_nothing)
{
	struct t *t = setup(1);
	uint8_t *p;

	enable_vt220(t);
	/* A good buffer, then one whose length runs past the SCCB. */
	p = sccb(t, SCCB, 8 + 8 + 8);
	be16_store(p + 8, 8);
	p[10] = SCLP_EVTYP_VT220;
	memcpy(p + 14, "ok", 2);
	be16_store(p + 16, 200);
	p[18] = SCLP_EVTYP_VT220;
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_WRITE_EVENT_DATA, SCCB, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_EVENT_BUFFER_SYNTAX_ERROR);
	CHECK_EQ(out_now(t), 0);                                   /* checked before any output */
	/* A buffer shorter than its own header. */
	p = sccb(t, SCCB, 8 + 8);
	be16_store(p + 8, 3);
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_WRITE_EVENT_DATA, SCCB, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_EVENT_BUFFER_SYNTAX_ERROR);
	teardown(t);
}

TEST(vt220_input_signals_then_reads_with_session_byte)
{
	struct t *t = setup(1);
	uint8_t *p;

	CHECK_EQ(console_port_rx_push(&t->s.con, (const uint8_t *)"ls\n", 3), 3);
	CHECK_EQ(t->nsignals, 0);                /* the guest has not enabled input */
	enable_vt220(t);
	/* Input was pending when the mask command completed: its signal
	 * says so (bit 0 of the parameter). */
	CHECK_EQ(t->signals[t->nsignals - 1], SCCB | 1);
	p = sccb(t, SCCB, 4096);
	p[5] = 0x80;                                            /* variable length */
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_READ_EVENT_DATA, SCCB, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_NORMAL_COMPLETION);
	CHECK_EQ(be16_load(p), 8 + 6 + 1 + 3);
	CHECK_EQ(be16_load(p + 8), 6 + 1 + 3);
	CHECK_EQ(p[10], SCLP_EVTYP_VT220);
	CHECK_EQ(p[14], 0x00);                                  /* session data */
	CHECK(memcmp(p + 15, "ls\n", 3) == 0);
	CHECK_EQ(t->signals[t->nsignals - 1], SCCB);            /* nothing left */
	/* Nothing pending now. */
	p = sccb(t, SCCB, 4096);
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_READ_EVENT_DATA, SCCB, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_NO_EVENT_BUFFERS_STORED);
	/* New input while idle: one signal with parameter 1, not one per byte. */
	t->nsignals = 0;
	CHECK_EQ(console_port_rx_push(&t->s.con, (const uint8_t *)"a", 1), 1);
	CHECK_EQ(console_port_rx_push(&t->s.con, (const uint8_t *)"b", 1), 1);
	CHECK_EQ(t->nsignals, 1);
	CHECK_EQ(t->signals[0], 1);
	teardown(t);
}

/* The power button (vm.power-button): a Signal Quiesce event, held until
 * the guest enables the event type (Linux's sclp_quiesce registers for
 * it), signalled as pending, read once (before console input), then
 * gone; a second press before the read is the same event. */
TEST(signal_quiesce_waits_for_the_guest_to_listen_and_is_read_once)
{
	struct t *t = setup(1);
	uint8_t *p;

	sclp_signal_quiesce(&t->s);
	sclp_signal_quiesce(&t->s);
	CHECK_EQ(t->nsignals, 0);               /* nobody listens yet */
	CHECK_EQ(console_port_rx_push(&t->s.con, (const uint8_t *)"x", 1), 1);
	p = sccb(t, SCCB, 12 + 4 * 8);
	be16_store(p + 10, 8);
	p[12 + 3] = 0x48;                       /* guest receive: VT220 and 0x1d */
	p[12 + 8 + 3] = 0x40;
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_WRITE_EVENT_MASK, SCCB, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_NORMAL_COMPLETION);
	CHECK_EQ(t->signals[t->nsignals - 1], SCCB | 1);        /* events pending */
	p = sccb(t, SCCB, 4096);
	p[5] = 0x80;
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_READ_EVENT_DATA, SCCB, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_NORMAL_COMPLETION);
	CHECK_EQ(be16_load(p), 8 + SCLP_SIGQUIESCE_LEN);
	CHECK_EQ(be16_load(p + 8), SCLP_SIGQUIESCE_LEN);
	CHECK_EQ(p[10], SCLP_EVTYP_SIGQUIESCE);
	CHECK_EQ(be16_load(p + 14), 0);                         /* no timeout */
	CHECK_EQ(t->signals[t->nsignals - 1], SCCB | 1);        /* the input is still there */
	p = sccb(t, SCCB, 4096);
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_READ_EVENT_DATA, SCCB, false), 0);
	CHECK_EQ(p[10], SCLP_EVTYP_VT220);
	p = sccb(t, SCCB, 4096);
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_READ_EVENT_DATA, SCCB, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_NO_EVENT_BUFFERS_STORED);
	/* Pressed while the guest listens and is idle: one signal, at once. */
	t->nsignals = 0;
	sclp_signal_quiesce(&t->s);
	CHECK_EQ(t->nsignals, 1);
	CHECK_EQ(t->signals[0], 1);
	teardown(t);
}

TEST(input_buffer_is_bounded)
{
	struct t *t = setup(1);
	uint8_t big[SCLP_RX_SIZE + 10];

	memset(big, 'x', sizeof(big));
	CHECK_EQ(console_port_rx_push(&t->s.con, big, sizeof(big)), SCLP_RX_SIZE);
	CHECK_EQ(console_port_rx_room(&t->s.con), 0);
	CHECK_EQ(console_port_rx_push(&t->s.con, big, 1), 0);
	teardown(t);
}

/* Linux's /sys/firmware/cpi: system name in EBCDIC, blank padded. */
static uint8_t *cpi_write(struct t *t, const uint8_t name[8], uint64_t level, unsigned evlen)
{
	uint8_t *p = sccb(t, SCCB, 8 + evlen);

	be16_store(p + 8, (uint16_t)evlen);
	p[10] = SCLP_EVTYP_CTLPROGIDENT;
	if (evlen >= SCLP_CPI_LEN) {
		memcpy(p + 8 + SCLP_CPI_SYSTEM_NAME, name, 8);
		be64_store(p + 8 + SCLP_CPI_SYSTEM_LEVEL, level);
	}
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_WRITE_EVENT_DATA, SCCB, false), 0);
	return p;
}

TEST(identification_as_mvmexit_is_the_exit_status)
{
	static const uint8_t mvmexit[8] = { 0xd4, 0xe5, 0xd4, 0xc5, 0xe7, 0xc9, 0xe3, 0x40 };
	static const uint8_t linux_[8] = { 0xd3, 0xc9, 0xd5, 0xe4, 0xe7, 0x40, 0x40, 0x40 };
	struct t *t = setup(1);
	uint8_t *p;

	p = cpi_write(t, linux_, 0x0601, SCLP_CPI_LEN);  /* an ordinary identification */
	CHECK_EQ(rc(p), SCLP_RC_NORMAL_COMPLETION);
	CHECK(p[11] & SCLP_EVBUF_ACCEPTED);
	CHECK_EQ(t->exit_status, -1);
	p = cpi_write(t, mvmexit, 0x12a, SCLP_CPI_LEN);  /* status: the low byte */
	CHECK_EQ(rc(p), SCLP_RC_NORMAL_COMPLETION);
	CHECK_EQ(t->exit_status, 0x2a);
	t->exit_status = -1;
	p = cpi_write(t, mvmexit, 7, SCLP_CPI_LEN - 1);  /* truncated buffer */
	CHECK_EQ(rc(p), SCLP_RC_EVENT_BUFFER_SYNTAX_ERROR);
	CHECK_EQ(t->exit_status, -1);
	teardown(t);
}

struct lines {
	unsigned n;
	char last[512];
};

static void record_line(void *opaque, int level, const char *msg)
{
	struct lines *l = opaque;

	(void)level;
	l->n++;
	snprintf(l->last, sizeof(l->last), "%s", msg);
}

TEST(a_service_signal_that_cannot_be_injected_is_logged_once_and_counted)
{
	struct t *t = setup(1);
	struct lines l = { 0 };
	struct log_sink sink = { record_line, &l };
	uint8_t *p;

	t->s.log = &sink;
	t->signal_ret = -EBUSY;
	/* Every SERVC ends with the signal: the guest repeats it at will. */
	for (unsigned i = 0; i < 5; i++) {
		p = sccb(t, SCCB, 4096);
		CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_READ_SCP_INFO, SCCB, false), 0);
		CHECK_EQ(rc(p), SCLP_RC_NORMAL_READ_COMPLETION);
	}
	enable_vt220(t);
	CHECK_EQ(console_port_rx_push(&t->s.con, (const uint8_t *)"x", 1), 1);
	CHECK_EQ(t->s.signal_errors, 7);
	CHECK_EQ(l.n, 1);
	CHECK(strstr(l.last, "cannot inject the service signal"));
	CHECK(strstr(l.last, strerror(EBUSY)));
	CHECK(strstr(l.last, "signal_errors in --stats"));
	/* Once it works again: nothing more logged, nothing more counted. */
	t->signal_ret = 0;
	p = sccb(t, SCCB, 4096);
	CHECK_EQ(sclp_service_call(&t->s, SCLP_CMDW_READ_SCP_INFO, SCCB, false), 0);
	CHECK_EQ(t->nsignals, 1);
	CHECK_EQ(t->s.signal_errors, 7);
	CHECK_EQ(l.n, 1);
	teardown(t);
}

/* ---- snapshots ---------------------------------------------------------- */

#define T_SEC SNAP_TAG('T', 'S', 'T', ' ')

static char msg[512];

/* a's state through a snapshot file into b: what sclp_load returned. */
/* The section in w (ended) loaded into b: what sclp_load returned, or
 * snap_done's error where it read the section short of its end. */
static int sclp_load_from(struct snap_w *w, struct t *b)
{
	struct snap_sec sec;
	struct snap_r r;
	int ret;

	sec = snap_sec_open(w, T_SEC, 0, &r);
	ret = sclp_load(&b->s, &r, msg, sizeof(msg));
	if (!ret)
		ret = snap_done(&r, msg, sizeof(msg));
	snap_sec_free(&sec);
	return ret;
}

static int sclp_round_trip(struct t *a, struct t *b)
{
	struct snap_w w;

	snap_w_init(&w);
	snap_begin(&w, T_SEC, 0);
	sclp_save(&a->s, &w);
	snap_end(&w);
	return sclp_load_from(&w, b);
}

/* The masks the guest set, input it has not read and a power button it
 * has not heard come back; the restored SCLP signals nothing itself (the
 * signal the guest had not taken is a floating interrupt, KVM's). */
TEST(a_snapshot_carries_the_masks_unread_input_and_a_pending_quiesce)
{
	struct t *a = setup(1), *b = setup(1);
	uint8_t *p;

	enable_vt220(a);
	CHECK_EQ(console_port_rx_push(&a->s.con, (const uint8_t *)"uptime\n", 7), 7);
	sclp_signal_quiesce(&a->s);             /* VT220 only: not heard yet */
	CHECK(a->s.pending_signalled);
	CHECK_EQ(sclp_round_trip(a, b), 0);
	/* Input pending: signalled again (the snapshot's own signal, if it
	 * holds one, merges with it in KVM), not trusted to the flag. */
	CHECK_EQ(b->nsignals, 1);
	CHECK_EQ(b->signals[0], 1);
	CHECK(b->s.pending_signalled);
	CHECK_EQ(b->s.guest_receive, a->s.guest_receive);
	CHECK_EQ(b->s.guest_send, a->s.guest_send);
	p = sccb(b, SCCB, 4096);
	p[5] = 0x80;
	CHECK_EQ(sclp_service_call(&b->s, SCLP_CMDW_READ_EVENT_DATA, SCCB, false), 0);
	CHECK_EQ(rc(p), SCLP_RC_NORMAL_COMPLETION);
	CHECK_EQ(p[10], SCLP_EVTYP_VT220);
	CHECK(memcmp(p + 15, "uptime\n", 7) == 0);
	/* The quiesce waits for the guest to listen, as it did. */
	CHECK(b->s.quiesce_pending);
	teardown(a);
	teardown(b);
}

/* A section written by hand: the masks, the flags, n bytes of input. */
static int sclp_load_raw(struct t *b, uint8_t signalled, uint32_t n)
{
	struct snap_w w;
	uint32_t i;

	snap_w_init(&w);
	snap_begin(&w, T_SEC, 0);
	snap_put_u32(&w, 0xffffffff);
	snap_put_u32(&w, 0xffffffff);
	snap_put_u8(&w, signalled);
	snap_put_u8(&w, 0);
	snap_put_u32(&w, n);
	for (i = 0; i < n; i++)
		snap_put_u8(&w, 'x');
	snap_end(&w);
	return sclp_load_from(&w, b);
}

TEST(a_snapshot_with_more_input_than_the_buffer_holds_is_refused_and_changes_nothing)
{
	struct t *b = setup(1);
	uint32_t receive;

	enable_vt220(b);
	receive = b->s.guest_receive;
	CHECK_EQ(sclp_load_raw(b, 0, SCLP_RX_SIZE + 1), -EINVAL);
	CHECK(strstr(msg, "257 bytes of input"));
	CHECK_EQ(sclp_load_raw(b, 2, 0), -EINVAL);
	CHECK(strstr(msg, "damaged"));
	CHECK_EQ(b->s.guest_receive, receive);
	CHECK_EQ(b->s.rx_count, 0);
	/* A saved "signalled" with nothing pending: no signal, no flag left
	 * to hold back the next one. */
	b->nsignals = 0;
	CHECK_EQ(sclp_load_raw(b, 1, 0), 0);
	CHECK_EQ(b->nsignals, 0);
	CHECK(!b->s.pending_signalled);
	/* A full buffer is the most it holds, and is taken. */
	CHECK_EQ(sclp_load_raw(b, 1, SCLP_RX_SIZE), 0);
	CHECK_EQ(b->s.rx_count, SCLP_RX_SIZE);
	CHECK_EQ(b->s.guest_receive, 0xffffffff);
	teardown(b);
}
