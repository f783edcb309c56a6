/* The SCLP model: see sclp.h. Every SCCB is copied out of guest memory once,
 * processed on the copy and written back whole, so a guest rewriting it
 * meanwhile changes nothing we decided on. */
#include "arch/s390/sclp.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/log.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

/* SCCBs may span three pages for Read SCP Info on machines with the
 * extended-length-SCCB facility; otherwise one page, not crossing it. */
#define SCCB_EXT_MAX_LEN (3 * 4096)

/* What we accept from the guest: VT220 data and its identification; what
 * we send it: VT220 data. */
#define SCLP_OUR_RECEIVE (sclp_evtyp_bit(SCLP_EVTYP_VT220) | sclp_evtyp_bit(SCLP_EVTYP_CTLPROGIDENT))
#define SCLP_OUR_SEND    (sclp_evtyp_bit(SCLP_EVTYP_VT220) | sclp_evtyp_bit(SCLP_EVTYP_SIGQUIESCE))

/* "MVMEXIT " in EBCDIC (the letters are the same in code pages 037 and
 * 500, which Linux uses). */
static const uint8_t cpi_mvmexit[8] = { 0xd4, 0xe5, 0xd4, 0xc5, 0xe7, 0xc9, 0xe3, 0x40 };

static const struct console_port_ops sclp_port_ops;

int sclp_init(struct sclp *s, const struct guest_mem *mem, uint64_t mem_size, unsigned ncpus,
	      int (*service_signal)(void *, uint32_t), void *opaque)
{
	memset(s, 0, sizeof(*s));
	console_port_init(&s->con, &s->lock, &sclp_port_ops, s);
	s->mem = mem;
	s->mem_size = mem_size;
	s->ncpus = ncpus;
	s->service_signal = service_signal;
	s->signal_opaque = opaque;
	return -pthread_mutex_init(&s->lock, NULL);
}

void sclp_fini(struct sclp *s)
{
	pthread_mutex_destroy(&s->lock);
}

/* The service signal (lock held): a failure is the host's, but the guest
 * can make it happen with every SERVC, so only the first is logged. */
static void service_signal(struct sclp *s, uint32_t parm)
{
	int r = s->service_signal(s->signal_opaque, parm);

	if (!r)
		return;
	__atomic_fetch_add(&s->signal_errors, 1, __ATOMIC_RELAXED);
	if (s->signal_logged)
		return;
	s->signal_logged = true;
	log_warn(s->log, "SCLP: cannot inject the service signal: %s; the guest will wait for "
		 "it (the first: the rest are only counted, as signal_errors in --stats)",
		 strerror(-r));
}

static void set_rc(uint8_t *sccb, uint16_t rc)
{
	be16_store(sccb + 6, rc);
}

static void read_scp_info(struct sclp *s, uint8_t *sccb, unsigned len)
{
	unsigned need = SCLP_INFO_CPU_ENTRIES + s->ncpus * SCLP_CPU_ENTRY_LEN, i;
	uint64_t incr = s->mem_size >> 20;     /* 1 MiB storage increments */

	if (len < need) {
		set_rc(sccb, SCLP_RC_INSUFFICIENT_SCCB_LENGTH);
		return;
	}
	memset(sccb + SCCB_HDR_LEN, 0, len - SCCB_HDR_LEN);
	sccb[SCLP_INFO_RNSIZE] = 1;
	if (incr <= 0xffff)
		be16_store(sccb + SCLP_INFO_RNMAX, (uint16_t)incr);
	else
		be64_store(sccb + SCLP_INFO_RNMAX2, incr);
	be16_store(sccb + SCLP_INFO_NCPURL, (uint16_t)s->ncpus);
	be16_store(sccb + SCLP_INFO_CPUOFF, SCLP_INFO_CPU_ENTRIES);
	be16_store(sccb + SCLP_INFO_HCPUA, (uint16_t)(s->ncpus - 1));
	for (i = 0; i < s->ncpus; i++) {
		uint8_t *e = sccb + SCLP_INFO_CPU_ENTRIES + i * SCLP_CPU_ENTRY_LEN;

		e[0] = (uint8_t)i;      /* core id = CPU address */
		e[14] = 0;              /* type: CP */
	}
	set_rc(sccb, SCLP_RC_NORMAL_READ_COMPLETION);
}

/* Write Event Mask: u16 reserved, u16 mask length, then the guest's
 * receive and send masks and (ours) the SCLP's receive and send masks. */
static void write_event_mask(struct sclp *s, uint8_t *sccb, unsigned len)
{
	unsigned ml, i;
	uint8_t *m;

	if (len < 12) {
		set_rc(sccb, SCLP_RC_INSUFFICIENT_SCCB_LENGTH);
		return;
	}
	ml = be16_load(sccb + 10);
	if (ml == 0 || ml > SCLP_MASK_LEN_MAX) {
		set_rc(sccb, SCLP_RC_INVALID_MASK_LENGTH);
		return;
	}
	if (len < 12 + 4 * ml) {
		set_rc(sccb, SCLP_RC_INSUFFICIENT_SCCB_LENGTH);
		return;
	}
	m = sccb + 12;
	s->guest_receive = s->guest_send = 0;
	/* Only event types 1..32 exist for us: the first four bytes. */
	for (i = 0; i < 4 && i < ml; i++) {
		s->guest_receive |= (uint32_t)m[i] << (24 - 8 * i);
		s->guest_send |= (uint32_t)m[ml + i] << (24 - 8 * i);
	}
	memset(m + 2 * ml, 0, 2 * ml);
	for (i = 0; i < 4 && i < ml; i++) {
		m[2 * ml + i] = (uint8_t)(SCLP_OUR_RECEIVE >> (24 - 8 * i));
		m[3 * ml + i] = (uint8_t)(SCLP_OUR_SEND >> (24 - 8 * i));
	}
	set_rc(sccb, SCLP_RC_NORMAL_COMPLETION);
}

static void console_out(struct sclp *s, const uint8_t *buf, size_t len)
{
	console_port_put(&s->con, buf, len);    /* what does not fit: dropped, counted */
}

/* Write Event Data: event buffers from offset 8 to the SCCB's length. */
static void write_event_data(struct sclp *s, uint8_t *sccb, unsigned len)
{
	unsigned off = SCCB_HDR_LEN;

	if (sccb[2] != 0) {             /* function code: normal write */
		set_rc(sccb, SCLP_RC_INVALID_FUNCTION);
		return;
	}
	if (len == SCCB_HDR_LEN) {
		set_rc(sccb, SCLP_RC_EVENT_BUFFER_SYNTAX_ERROR);
		return;
	}
	/* Check every buffer before acting on any. */
	while (off < len) {
		unsigned el = off + 2 <= len ? be16_load(sccb + off) : 0;

		if (el < SCLP_EVBUF_HDR_LEN || el > len - off) {
			set_rc(sccb, SCLP_RC_EVENT_BUFFER_SYNTAX_ERROR);
			return;
		}
		/* Linux sends a Store Data event (0x0c) at boot whatever the
		 * masks say; "event not supported" (0x73f0) keeps it quiet. */
		if (sccb[off + 2] == SCLP_EVTYP_STORE_DATA) {
			set_rc(sccb, SCLP_RC_EVENT_BUFFER_SYNTAX_ERROR);
			return;
		}
		/* Identification is taken whatever the masks (Linux sends it
		 * from its own registration); VT220 once the guest enabled it. */
		if (sccb[off + 2] == SCLP_EVTYP_CTLPROGIDENT) {
			if (el < SCLP_CPI_LEN) {
				set_rc(sccb, SCLP_RC_EVENT_BUFFER_SYNTAX_ERROR);
				return;
			}
		} else if (sccb[off + 2] != SCLP_EVTYP_VT220 ||
			   !(s->guest_send & sclp_evtyp_bit(SCLP_EVTYP_VT220))) {
			set_rc(sccb, SCLP_RC_INVALID_FUNCTION);
			return;
		}
		off += el;
	}
	for (off = SCCB_HDR_LEN; off < len; off += be16_load(sccb + off)) {
		unsigned el = be16_load(sccb + off);
		uint8_t *e = sccb + off;

		if (e[2] == SCLP_EVTYP_CTLPROGIDENT) {
			if (!memcmp(e + SCLP_CPI_SYSTEM_NAME, cpi_mvmexit, 8) && s->guest_exit)
				s->guest_exit(s->signal_opaque,
					      (int)(be64_load(e + SCLP_CPI_SYSTEM_LEVEL) & 0xff));
		} else {
			console_out(s, e + SCLP_EVBUF_HDR_LEN, el - SCLP_EVBUF_HDR_LEN);
		}
		e[3] |= SCLP_EVBUF_ACCEPTED;
	}
	set_rc(sccb, SCLP_RC_NORMAL_COMPLETION);
}

static bool quiesce_pending(const struct sclp *s)
{
	return s->quiesce_pending && (s->guest_receive & sclp_evtyp_bit(SCLP_EVTYP_SIGQUIESCE));
}

/* Events the guest has enabled and not read: console input or a quiesce. */
static bool input_pending(const struct sclp *s)
{
	return (s->rx_count && (s->guest_receive & sclp_evtyp_bit(SCLP_EVTYP_VT220))) ||
	       quiesce_pending(s);
}

/* Read Event Data's Signal Quiesce buffer at e: no timeout (0), as
 * QEMU's. */
static void read_quiesce(struct sclp *s, uint8_t *sccb, uint8_t *e)
{
	memset(e, 0, SCLP_SIGQUIESCE_LEN);
	be16_store(e, SCLP_SIGQUIESCE_LEN);
	e[2] = SCLP_EVTYP_SIGQUIESCE;
	s->quiesce_pending = false;
	if (sccb[5] & 0x80) {
		sccb[5] &= 0x7f;
		be16_store(sccb, (uint16_t)(SCCB_HDR_LEN + SCLP_SIGQUIESCE_LEN));
	}
	set_rc(sccb, SCLP_RC_NORMAL_COMPLETION);
}

/* Read Event Data: pending console input as one VT220 event buffer. */
static void read_event_data(struct sclp *s, uint8_t *sccb, unsigned len)
{
	unsigned room, n, i;
	uint8_t *e = sccb + SCCB_HDR_LEN;

	/* 0x00 unconditional, 0x01 selective (taken as unconditional: the
	 * guest enabled both event types it can get). */
	if ((sccb[2] & 0x7f) > 1) {
		set_rc(sccb, SCLP_RC_INVALID_FUNCTION);
		return;
	}
	s->pending_signalled = false;
	if (!input_pending(s)) {
		set_rc(sccb, SCLP_RC_NO_EVENT_BUFFERS_STORED);
		return;
	}
	if (len != SCCB_MAX_LEN) {      /* a whole page, as Linux sends */
		set_rc(sccb, SCLP_RC_INSUFFICIENT_SCCB_LENGTH);
		return;
	}
	/* A quiesce before console input: one event buffer per read. */
	if (quiesce_pending(s)) {
		read_quiesce(s, sccb, e);
		return;
	}
	/* VT220 input: a session byte (0x00: session data), then the bytes. */
	room = len - SCCB_HDR_LEN - SCLP_EVBUF_HDR_LEN - 1;
	n = MIN(room, s->rx_count);
	e[SCLP_EVBUF_HDR_LEN] = 0x00;
	for (i = 0; i < n; i++)
		e[SCLP_EVBUF_HDR_LEN + 1 + i] = s->rx[(s->rx_head + i) % SCLP_RX_SIZE];
	s->rx_head = (s->rx_head + n) % SCLP_RX_SIZE;
	s->rx_count -= n;
	__atomic_add_fetch(&s->con.rx_bytes, n, __ATOMIC_RELAXED);
	be16_store(e, (uint16_t)(SCLP_EVBUF_HDR_LEN + 1 + n));
	e[2] = SCLP_EVTYP_VT220;
	e[3] = 0;
	be16_store(e + 4, 0);
	/* Variable-length response: the SCCB ends after the buffer. */
	if (sccb[5] & 0x80) {
		sccb[5] &= 0x7f;
		be16_store(sccb, (uint16_t)(SCCB_HDR_LEN + SCLP_EVBUF_HDR_LEN + 1 + n));
	}
	set_rc(sccb, SCLP_RC_NORMAL_COMPLETION);
}

int sclp_service_call(struct sclp *s, uint32_t cmd, uint64_t sccb, bool problem)
{
	uint8_t buf[SCCB_EXT_MAX_LEN];
	uint8_t *g;
	unsigned len;

	if (problem)
		return -SCLP_PGM_PRIVILEGED;
	/* Doubleword aligned, below 2 GiB, not in the first 8 KiB (the
	 * lowcore: mvm's vCPUs run with prefix 0 until Linux moves it, and an
	 * SCCB never lives there). */
	if ((sccb & ~0x7ffffff8ULL) || (sccb & ~0x1fffULL) == 0)
		return -SCLP_PGM_SPECIFICATION;
	cmd &= 0xffff00ffu;     /* bits 16-23 select a resource, not the command */
	g = gmem_ptr(s->mem, sccb, SCCB_HDR_LEN);
	if (!g)
		return -SCLP_PGM_ADDRESSING;
	len = be16_load(g);
	if (len < SCCB_HDR_LEN)
		return -SCLP_PGM_SPECIFICATION;
	pthread_mutex_lock(&s->lock);
	if (((sccb & 0xfff) + len > 4096 &&
	     !((sccb & 0xfff) == 0 && len <= SCCB_EXT_MAX_LEN && (cmd == SCLP_CMDW_READ_SCP_INFO ||
							       cmd == SCLP_CMDW_READ_SCP_INFO_FORCED)))) {
		/* Crosses a page: only the header is ours to answer in. */
		memcpy(buf, g, SCCB_HDR_LEN);
		set_rc(buf, SCLP_RC_SCCB_BOUNDARY_VIOLATION);
		memcpy(g, buf, SCCB_HDR_LEN);
		goto signal;
	}
	g = gmem_ptr(s->mem, sccb, len);
	if (!g) {
		pthread_mutex_unlock(&s->lock);
		return -SCLP_PGM_ADDRESSING;
	}
	memcpy(buf, g, len);
	switch (cmd) {
	case SCLP_CMDW_READ_SCP_INFO:
	case SCLP_CMDW_READ_SCP_INFO_FORCED:
		read_scp_info(s, buf, len);
		break;
	case SCLP_CMDW_WRITE_EVENT_MASK:
		write_event_mask(s, buf, len);
		break;
	case SCLP_CMDW_WRITE_EVENT_DATA:
		write_event_data(s, buf, len);
		break;
	case SCLP_CMDW_READ_EVENT_DATA:
		read_event_data(s, buf, len);
		break;
	default:
		set_rc(buf, SCLP_RC_INVALID_SCLP_COMMAND);
		break;
	}
	memcpy(g, buf, len);
signal:
	/* The SCCB is complete before the interrupt that says so (the
	 * injection is a syscall: a full barrier for the guest's view). */
	service_signal(s, (uint32_t)sccb | (input_pending(s) ? 1 : 0));
	if (input_pending(s))
		s->pending_signalled = true;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void sclp_signal_quiesce(struct sclp *s)
{
	pthread_mutex_lock(&s->lock);
	s->quiesce_pending = true;
	/* Told now where the guest listens for it; else the SERVC that
	 * enables the event type ends with "events pending". */
	if (quiesce_pending(s) && !s->pending_signalled) {
		s->pending_signalled = true;
		service_signal(s, 1);
	}
	pthread_mutex_unlock(&s->lock);
}

/* The console port's calls, with the lock held. */
static size_t sclp_port_rx_room(void *dev)
{
	struct sclp *s = dev;

	return SCLP_RX_SIZE - s->rx_count;
}

static size_t sclp_port_rx_take(void *dev, const uint8_t *buf, size_t len)
{
	struct sclp *s = dev;
	size_t i;

	for (i = 0; i < len; i++)
		s->rx[(s->rx_head + s->rx_count + i) % SCLP_RX_SIZE] = buf[i];
	s->rx_count += (unsigned)len;
	/* Tell the guest once; it reads until nothing is left. */
	if (len && input_pending(s) && !s->pending_signalled) {
		s->pending_signalled = true;
		service_signal(s, 1);
	}
	return len;
}

static const struct console_port_ops sclp_port_ops = {
	.rx_room = sclp_port_rx_room,
	.rx_take = sclp_port_rx_take,
	.tx_freed = NULL,       /* output that finds no room is dropped, not waited for */
};

/* ---- snapshots ---------------------------------------------------------- */

/* The event masks the guest set, the console input it has not read, and
 * what it has been told of: a service signal the guest has not taken is
 * the VM's floating interrupt, saved with those. Output belongs to the
 * VM that was snapshotted (its console delivers it), as the UART's. */
void sclp_save(struct sclp *s, struct snap_w *w)
{
	unsigned i;

	pthread_mutex_lock(&s->lock);
	snap_put_u32(w, s->guest_receive);
	snap_put_u32(w, s->guest_send);
	snap_put_u8(w, s->pending_signalled);
	snap_put_u8(w, s->quiesce_pending);
	snap_put_u32(w, s->rx_count);
	for (i = 0; i < s->rx_count; i++)
		snap_put_u8(w, s->rx[(s->rx_head + i) % SCLP_RX_SIZE]);
	pthread_mutex_unlock(&s->lock);
}

int sclp_load(struct sclp *s, struct snap_r *r, char *err, size_t errlen)
{
	uint32_t receive = snap_get_u32(r), send = snap_get_u32(r);
	uint8_t signalled = snap_get_u8(r), quiesce = snap_get_u8(r);
	uint32_t n = snap_get_u32(r);
	uint8_t rx[SCLP_RX_SIZE];

	if (n > SCLP_RX_SIZE || signalled > 1 || quiesce > 1)
		return err_set(err, errlen, -EINVAL, "snapshot: the SCLP console holds %u bytes of "
			       "input (at most %u)%s; the snapshot is damaged", n, SCLP_RX_SIZE,
			       n > SCLP_RX_SIZE ? "" : ", a flag neither 0 nor 1");
	snap_get_bytes(r, rx, n);
	if (r->err)
		return snap_done(r, err, errlen);
	(void)signalled;
	pthread_mutex_lock(&s->lock);
	s->guest_receive = receive;
	s->guest_send = send;
	s->quiesce_pending = quiesce;
	memcpy(s->rx, rx, n);
	s->rx_head = 0;
	s->rx_count = n;
	/* Events pending are signalled again rather than trusted to the
	 * saved flag: console input that arrived during the pause may have
	 * raised its signal after the floating interrupts were read, and a
	 * flag without its interrupt would keep the guest from ever being
	 * told again. A signal the snapshot holds too merges with this one
	 * (KVM keeps one service signal, its parameters or'ed). */
	s->pending_signalled = input_pending(s);
	if (s->pending_signalled)
		service_signal(s, 1);
	pthread_mutex_unlock(&s->lock);
	return 0;
}
