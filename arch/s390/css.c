/* The channel subsystem: see css.h. */
#include "arch/s390/css.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* PMCW flag bits (SCHIB bytes 4-5). */
#define PMCW_ISC_SHIFT 11
#define PMCW_ISC       0x3800
#define PMCW_ENA       0x0080
#define PMCW_MME       0x0018
#define PMCW_MP        0x0004
#define PMCW_DNV       0x0001
#define PMCW_INVALID   0xc300   /* bits a guest may not set */
#define PMCW_SETTABLE  (PMCW_ISC | PMCW_ENA | PMCW_MME | PMCW_MP)
#define PMCW_CHARS_INVALID 0xff1ffff8u
#define PMCW_CSENSE    0x00000001u

/* ORB bits (bytes 4-5 and 7). */
#define ORB_FMT        0x0080   /* format-1 CCWs */
#define ORB_C64        0x0002   /* format-2 (64-bit) IDAWs */
#define ORB_I2K        0x0001   /* 2 KiB IDAW blocks */
#define ORB_SPND       0x0800
#define ORB_CTRL0_RESERVED 0x0004
#define ORB_CTRL1_INVALID  0x3e
#define ORB_MIDAW      0x40

#define SNS0_CMD_REJECT 0x80
#define SCSW_FLAGS_ESWF 0x0400
#define SCSW_FLAGS_ECTL 0x0002
#define ERW_CONS        0x01000000u

_Static_assert(CSS_MAX_SCH <= 64, "css.attention has one bit per subchannel");

int css_init(struct css *c, const struct guest_mem *mem,
	     void (*io_interrupt)(void *, unsigned, uint32_t, unsigned), void *opaque)
{
	memset(c, 0, sizeof(*c));
	c->mem = mem;
	c->io_interrupt = io_interrupt;
	c->opaque = opaque;
	/* A plain mutex: nothing takes it twice (a device's css_notify from
	 * inside its command leaves an attention bit), and trylock must fail
	 * for its holder too. */
	return -pthread_mutex_init(&c->lock, NULL);
}

void css_fini(struct css *c)
{
	pthread_mutex_destroy(&c->lock);
}

static void css_unlock(struct css *c);

static int attach(struct css *c, const struct ccw_dev_ops *ops, void *dev, uint16_t cu_type,
		  uint8_t cu_model, bool slot)
{
	struct css_subchannel *s;
	int r = -ENOSPC;

	pthread_mutex_lock(&c->lock);
	if (c->nsch < CSS_MAX_SCH) {
		s = &c->sch[c->nsch];
		memset(s, 0, sizeof(*s));
		s->ops = ops;
		s->dev = dev;
		s->cu_type = cu_type;
		s->cu_model = cu_model;
		s->lpm = 0x80;          /* one path, chpid 0 */
		s->slot = s->absent = slot;
		r = (int)c->nsch++;
	}
	css_unlock(c);
	return r;
}

int css_attach(struct css *c, const struct ccw_dev_ops *ops, void *dev, uint16_t cu_type,
	       uint8_t cu_model)
{
	return attach(c, ops, dev, cu_type, cu_model, false);
}

int css_attach_slot(struct css *c, const struct ccw_dev_ops *ops, void *dev, uint16_t cu_type,
		    uint8_t cu_model)
{
	return attach(c, ops, dev, cu_type, cu_model, true);
}

int css_schid_valid(uint32_t gpr1)
{
	/* 0x0001ssss: bit 15 ("one") set, bits 0-14 zero (no M bit, set 0). */
	return (gpr1 >> 16) == 0x0001;
}

static int access_result(int r)
{
	return r == S390_ACCESS_INJECTED ? CSS_INJECTED : CSS_HOST_ERROR;
}

static bool status_pending(const struct css_subchannel *s)
{
	return s->scsw_ctrl & SCSW_STCTL_PENDING;
}

static bool enabled(const struct css_subchannel *s)
{
	return s->pmcw_flags & PMCW_ENA;
}

static unsigned isc_of(const struct css_subchannel *s)
{
	return (s->pmcw_flags & PMCW_ISC) >> PMCW_ISC_SHIFT;
}

static void interrupt(struct css *c, unsigned schno)
{
	struct css_subchannel *s = &c->sch[schno];

	if (c->io_interrupt)
		c->io_interrupt(c->opaque, schno, s->intparm, isc_of(s));
}

/* ---- SCHIB ------------------------------------------------------------- */

static void build_scsw(const struct css_subchannel *s, uint8_t *p)
{
	be16_store(p, s->scsw_flags);
	be16_store(p + 2, s->scsw_ctrl);
	be32_store(p + 4, s->scsw_cpa);
	p[8] = s->dstat;
	p[9] = s->cstat;
	be16_store(p + 10, s->count);
}

static void build_schib(const struct css_subchannel *s, unsigned schno, uint8_t *p)
{
	memset(p, 0, CSS_SCHIB_LEN);
	be32_store(p, s->intparm);
	/* An empty slot: the subchannel is there, no device on it (Linux's
	 * css_sch_is_valid: DNV off), and its scan goes on past it. */
	be16_store(p + 4, (uint16_t)(s->pmcw_flags | (s->absent ? 0 : PMCW_DNV)));
	be16_store(p + 6, (uint16_t)schno);     /* device number */
	p[8] = s->lpm;
	p[11] = 0x80;                           /* path installed: chpid 0 */
	be16_store(p + 12, s->mbi);
	p[14] = 0xff;                           /* path operational */
	p[15] = 0x80;                           /* path available */
	be32_store(p + 24, s->chars);           /* subchannel type 0: I/O */
	build_scsw(s, p + 28);
}

static int stsch(struct css *c, const struct s390_vmem *vm, unsigned schno, uint64_t addr,
		 unsigned ar)
{
	uint8_t schib[CSS_SCHIB_LEN];
	int r;

	build_schib(&c->sch[schno], schno, schib);
	r = vm->write(vm->opaque, addr, ar, schib, sizeof(schib));
	if (r)
		return access_result(r);
	/* The guest has seen the device gone (css_slot_free). */
	if (c->sch[schno].absent)
		c->sch[schno].gone_unseen = false;
	return 0;
}

static int msch(struct css *c, const struct s390_vmem *vm, unsigned schno, uint64_t addr,
		unsigned ar)
{
	struct css_subchannel *s = &c->sch[schno];
	uint8_t schib[CSS_SCHIB_LEN];
	uint16_t flags;
	uint32_t chars;
	bool was = enabled(s);
	int r;

	r = vm->read(vm->opaque, addr, ar, schib, sizeof(schib));
	if (r)
		return access_result(r);
	flags = be16_load(schib + 4);
	chars = be32_load(schib + 24);
	if ((flags & PMCW_INVALID) || (chars & PMCW_CHARS_INVALID))
		return -S390_PGM_OPERAND;
	if (status_pending(s))
		return 1;
	s->intparm = be32_load(schib);
	s->pmcw_flags = flags & PMCW_SETTABLE;
	s->lpm = schib[8];
	s->mbi = be16_load(schib + 12);
	s->chars = chars;
	if (was != enabled(s) && s->ops->enable)
		s->ops->enable(s->dev, enabled(s));
	return 0;
}

/* ---- channel programs -------------------------------------------------- */

struct ccw {
	uint8_t cmd, flags;
	uint16_t count;
	uint32_t cda;
};

/* Resolve a CCW's data area into d: one range, or an IDAW list (format-1:
 * 31-bit words; format-2: 64-bit). The first IDAW may start anywhere in a
 * block, the others must start on a block boundary. false: channel program
 * check. */
static bool resolve_data(struct css *c, const struct ccw *w, uint16_t orb_ctrl,
			 struct ccw_data *d)
{
	uint64_t left = w->count, addr, block;
	unsigned idaw_len = (orb_ctrl & ORB_C64) ? 8 : 4, i;
	const uint8_t *list;
	void *p;

	d->count = w->count;
	d->n = 0;
	if (w->count == 0)
		return true;
	if (!(w->flags & CCW_FLAG_IDA)) {
		p = gmem_ptr(c->mem, w->cda, w->count);
		if (!p)
			return false;
		d->seg[0] = (struct iovec){ p, w->count };
		d->n = 1;
		return true;
	}
	block = ((orb_ctrl & ORB_C64) && !(orb_ctrl & ORB_I2K)) ? 4096 : 2048;
	if (w->cda % idaw_len)
		return false;
	for (i = 0; left; i++) {
		uint64_t n;

		if (i == CCW_MAX_SEGS)
			return false;
		list = gmem_ptr(c->mem, (uint64_t)w->cda + (uint64_t)i * idaw_len, idaw_len);
		if (!list)
			return false;
		addr = idaw_len == 8 ? be64_load(list) : be32_load(list);
		if (idaw_len == 4 && (addr & 0x80000000u))
			return false;
		if (i > 0 && addr % block)
			return false;
		n = block - addr % block;
		if (n > left)
			n = left;
		p = gmem_ptr(c->mem, addr, n);
		if (!p)
			return false;
		d->seg[i] = (struct iovec){ p, n };
		d->n = i + 1;
		left -= n;
	}
	return true;
}

static bool read_ccw(struct css *c, uint64_t addr, bool fmt1, struct ccw *w)
{
	const uint8_t *b;

	if (addr == 0 || (addr & 7) || addr > (fmt1 ? 0x7fffffffULL : 0xffffffULL))
		return false;
	b = gmem_ptr(c->mem, addr, 8);
	if (!b)
		return false;
	if (fmt1) {
		w->cmd = b[0];
		w->flags = b[1];
		w->count = be16_load(b + 2);
		w->cda = be32_load(b + 4);
		if (w->cda & 0x80000000u)
			return false;
	} else {
		w->cmd = b[0];
		w->cda = (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
		w->flags = b[4];
		w->count = be16_load(b + 6);
	}
	return true;
}

/* The channel's own commands: true with *r the command's result (as a
 * device's, devices/ccw.h), false for a device command. (Not an errno:
 * CCW_PROGRAM_CHECK is -2, which is -ENOENT.) */
static bool channel_command(struct css_subchannel *s, const struct ccw *w, struct ccw_data *d,
			    int *r)
{
	uint8_t id[8] = { 0xff, (uint8_t)(s->cu_type >> 8), (uint8_t)s->cu_type, s->cu_model };

	switch (w->cmd) {
	case CCW_CMD_NOOP:
		*r = 0;
		return true;
	case CCW_CMD_SENSE_ID:
		if (!(w->flags & CCW_FLAG_SLI) && w->count != sizeof(id))
			*r = CCW_PROGRAM_CHECK;
		else
			*r = (int)ccw_data_write(d, id, sizeof(id));
		return true;
	case CCW_CMD_BASIC_SENSE:
		if (!(w->flags & CCW_FLAG_SLI) && w->count != sizeof(s->sense)) {
			*r = CCW_PROGRAM_CHECK;
		} else {
			*r = (int)ccw_data_write(d, s->sense, sizeof(s->sense));
			memset(s->sense, 0, sizeof(s->sense));
		}
		return true;
	}
	return false;
}

/* Run the channel program at cpa to its end; fill the SCSW. */
static void run_program(struct css *c, struct css_subchannel *s, uint32_t cpa, uint16_t orb_ctrl)
{
	bool fmt1 = orb_ctrl & ORB_FMT, tic_last = false;
	uint64_t addr = cpa, last = cpa;
	struct ccw_data d;
	struct ccw w = { 0 };
	int n = 0, r;
	unsigned i;

	s->dstat = s->cstat = 0;
	for (i = 0; i < CSS_MAX_CCWS; i++) {
		if (!read_ccw(c, addr, fmt1, &w))
			goto program_check;
		last = addr;
		if ((w.cmd & 0x0f) == CCW_CMD_TIC) {
			/* No TIC to a TIC, no bits but the address. */
			if (tic_last || (fmt1 && (w.cmd & 0xf0)))
				goto program_check;
			tic_last = true;
			addr = w.cda;
			continue;
		}
		tic_last = false;
		if ((w.cmd & 0x0f) == 0 || (w.flags & (CCW_FLAG_MIDA | CCW_FLAG_CD)) ||
		    ((w.flags & CCW_FLAG_S) && !(orb_ctrl & ORB_SPND)) || (!fmt1 && w.count == 0))
			goto program_check;
		if (!resolve_data(c, &w, orb_ctrl, &d))
			goto program_check;
		if (!channel_command(s, &w, &d, &r))
			r = s->ops->command(s->dev, w.cmd, w.flags & CCW_FLAG_SLI, &d);
		if (r == CCW_REJECT) {
			memset(s->sense, 0, sizeof(s->sense));
			s->sense[0] = SNS0_CMD_REJECT;
			s->dstat = SCSW_DSTAT_UC;
			n = 0;
			goto end;
		}
		if (r < 0 || (uint32_t)r > w.count)
			goto program_check;
		n = r;
		if (!(w.flags & CCW_FLAG_CC))
			break;
		addr += 8;
	}
	if (i == CSS_MAX_CCWS)
		goto program_check;
	s->dstat = SCSW_DSTAT_CE | SCSW_DSTAT_DE;
end:
	s->scsw_ctrl = SCSW_FCTL_START | SCSW_STCTL_PRIMARY | SCSW_STCTL_SECONDARY |
		       SCSW_STCTL_PENDING | (s->dstat & SCSW_DSTAT_UC ? SCSW_STCTL_ALERT : 0);
	s->scsw_cpa = (uint32_t)(last + 8);
	s->count = (uint16_t)(w.count - n);
	return;
program_check:
	s->cstat = SCSW_CSTAT_PROG;
	s->dstat = 0;
	n = 0;
	w.count = 0;
	s->scsw_ctrl = SCSW_FCTL_START | SCSW_STCTL_PRIMARY | SCSW_STCTL_SECONDARY |
		       SCSW_STCTL_PENDING | SCSW_STCTL_ALERT;
	s->scsw_cpa = (uint32_t)(last + 8);
	s->count = 0;
}

static int ssch(struct css *c, const struct s390_vmem *vm, unsigned schno, uint64_t addr,
		unsigned ar)
{
	struct css_subchannel *s = &c->sch[schno];
	uint8_t orb[12];
	uint16_t ctrl0;
	uint32_t cpa;
	int r;

	r = vm->read(vm->opaque, addr, ar, orb, sizeof(orb));
	if (r)
		return access_result(r);
	ctrl0 = be16_load(orb + 4);
	cpa = be32_load(orb + 8);
	if ((ctrl0 & ORB_CTRL0_RESERVED) || (orb[7] & (ORB_CTRL1_INVALID | ORB_MIDAW)) ||
	    (cpa & 0x80000000u))
		return -S390_PGM_OPERAND;
	if (!enabled(s))
		return 3;
	if (status_pending(s))
		return 1;
	s->intparm = be32_load(orb);
	s->scsw_flags = (uint16_t)(ctrl0 & 0xf0f0);     /* key, fmt, pfch, isic, alcc */
	run_program(c, s, cpa, ctrl0);
	interrupt(c, schno);
	return 0;
}

static int tsch(struct css *c, const struct s390_vmem *vm, unsigned schno, uint64_t addr,
		unsigned ar)
{
	struct css_subchannel *s = &c->sch[schno];
	uint8_t irb[CSS_IRB_LEN];
	bool pending = status_pending(s);
	uint16_t flags = s->scsw_flags;
	int r;

	memset(irb, 0, sizeof(irb));
	be32_store(irb + 12, 0x00800000u);              /* ESW: last path used 0x80 */
	if (pending && (s->dstat & SCSW_DSTAT_UC) && (s->chars & PMCW_CSENSE)) {
		/* Concurrent sense: the sense bytes come with the status. */
		s->scsw_flags |= SCSW_FLAGS_ESWF | SCSW_FLAGS_ECTL;
		be32_store(irb + 16, ERW_CONS | (32u << 16));
		memcpy(irb + 32, s->sense, sizeof(s->sense));
	}
	build_scsw(s, irb);
	s->scsw_flags = flags;
	r = vm->write(vm->opaque, addr, ar, irb, sizeof(irb));
	if (r)
		return access_result(r);
	if (!pending)
		return 1;
	if (irb[16] & 0x01)
		memset(s->sense, 0, sizeof(s->sense));
	/* Status withdrawn: the functions are over. */
	s->scsw_ctrl = 0;
	s->dstat = s->cstat = 0;
	return 0;
}

/* ---- attention: css_notify without waiting for the lock ------------------
 *
 * A vCPU may hold the lock while a device command waits for the device's
 * queue threads to stop, and those threads raise interrupts through
 * css_notify: if css_notify waited for the lock, the two would wait for
 * each other forever. So css_notify only sets the subchannel's attention
 * bit and then tries the lock; whoever holds the lock serves the bits
 * after its own work (css_unlock). No attention is lost, by a Dekker
 * argument on two seq_cst fences:
 *
 *   css_notify:  set bit;  fence N;  trylock   (reads the lock word)
 *   css_unlock:  unlock;   fence U;  load bits (reads attention)
 *
 * Fence N pairs with fence U. If N comes first in the fences' single total
 * order, the holder's load after U sees the bit (or a later value: someone
 * served it) and serves it; if U comes first, the notifier's trylock after
 * N sees the unlock, so it either gets the lock and serves the bit itself,
 * or finds the lock taken again by a newer holder, which runs the same
 * check when it lets go. Serving clears the bits with an exchange under
 * the lock, so each attention is served once. */

/* An unsolicited status on schno (lock held). */
static void attend(struct css *c, unsigned schno)
{
	struct css_subchannel *s = &c->sch[schno];

	if (schno < c->nsch && enabled(s) && !status_pending(s)) {
		s->scsw_ctrl = SCSW_STCTL_ALERT | SCSW_STCTL_PENDING;
		s->dstat = s->cstat = 0;
		interrupt(c, schno);
	}
}

/* Let go of the lock, serving every attention set while it was held,
 * including those set after the last look. */
static void css_unlock(struct css *c)
{
	uint64_t bits;

	for (;;) {
		/* Acquire: pairs with css_notify's release, so what the
		 * device wrote before it (its indicator bits) is visible
		 * before the interrupt that tells the guest to look. */
		bits = __atomic_exchange_n(&c->attention, 0, __ATOMIC_ACQUIRE);
		while (bits) {
			attend(c, (unsigned)__builtin_ctzll(bits));
			bits &= bits - 1;
		}
		pthread_mutex_unlock(&c->lock);
		/* Fence U: pairs with css_notify's fence N. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&c->attention, __ATOMIC_RELAXED))
			return;
		/* Busy: the thread that has it now runs this same check. */
		if (pthread_mutex_trylock(&c->lock))
			return;
	}
}

void css_notify(struct css *c, unsigned schno)
{
	if (schno >= CSS_MAX_SCH)
		return;
	/* Release: pairs with css_unlock's acquire exchange. */
	__atomic_fetch_or(&c->attention, 1ULL << schno, __ATOMIC_RELEASE);
	/* Fence N: pairs with css_unlock's fence U. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* Held (by another thread, or by this one inside a command): the
	 * holder serves the bit in css_unlock. */
	if (pthread_mutex_trylock(&c->lock))
		return;
	css_unlock(c);
}

/* CHSC: the request block (page aligned) starts with its length and
 * command code; the response follows it. No command is implemented: each
 * gets "not supported", which Linux handles (it then scans with STSCH). */
static int chsc(const struct s390_vmem *vm, uint64_t addr, unsigned ar)
{
	uint8_t hdr[4], resp[8];
	unsigned len;
	int r;

	if (addr & 0xfff)
		return -S390_PGM_SPECIFICATION;
	r = vm->read(vm->opaque, addr, ar, hdr, sizeof(hdr));
	if (r)
		return access_result(r);
	len = be16_load(hdr);
	if (len < 16 || len > 4096 - 8 || len % 8)
		return -S390_PGM_OPERAND;
	be16_store(resp, 8);                        /* response length */
	be16_store(resp + 2, CHSC_RC_NOT_SUPPORTED);
	memset(resp + 4, 0, 4);
	r = vm->write(vm->opaque, addr + len, ar, resp, sizeof(resp));
	return r ? access_result(r) : 0;
}

static int subchannel_op(struct css *c, const struct s390_vmem *vm, unsigned op, unsigned schno,
			 uint64_t addr, unsigned ar)
{
	struct css_subchannel *s = &c->sch[schno];

	/* No device: only its SCHIB can be stored. */
	if (s->absent && op != CSS_OP_STSCH)
		return 3;
	switch (op) {
	case CSS_OP_STSCH:
		return stsch(c, vm, schno, addr, ar);
	case CSS_OP_MSCH:
		return msch(c, vm, schno, addr, ar);
	case CSS_OP_SSCH:
		return ssch(c, vm, schno, addr, ar);
	case CSS_OP_TSCH:
		return tsch(c, vm, schno, addr, ar);
	}
	if (!enabled(s))
		return 3;
	switch (op) {
	case CSS_OP_CSCH:
		/* Clear: whatever was pending goes; the clear's own status
		 * is pending and interrupts. */
		s->scsw_ctrl = SCSW_FCTL_CLEAR | SCSW_STCTL_PENDING;
		s->dstat = s->cstat = 0;
		memset(s->sense, 0, sizeof(s->sense));
		interrupt(c, schno);
		return 0;
	case CSS_OP_HSCH:
		if (status_pending(s))
			return 1;
		s->scsw_ctrl = SCSW_FCTL_HALT | SCSW_STCTL_PENDING;
		s->dstat = s->cstat = 0;
		interrupt(c, schno);
		return 0;
	case CSS_OP_XSCH:
	case CSS_OP_RSCH:
		/* Programs run to their end at once: nothing is ever start-
		 * pending or suspended. */
		return status_pending(s) ? 1 : 2;
	}
	return -S390_PGM_OPERATION;
}

/* ---- channel reports ----------------------------------------------------- */

/* CRW bits (PoP "Channel-Report Word"): bit 2 overflow, bits 4-7 the
 * reporting-source code, 10-15 the error-recovery code, 16-31 the
 * reporting-source id (the subchannel number). */
#define CRW_OFLW          0x20000000u
#define CRW_RSC_SCH       0x3u
#define CRW_ERC_IPI       0x04u     /* installed parameters initialized */

/* STCRW (lock held): the oldest report and cc 0, or zeros and cc 1 when
 * none is pending. A report is taken only once it is stored. */
static int stcrw(struct css *c, const struct s390_vmem *vm, uint64_t addr, unsigned ar)
{
	uint8_t w[4] = { 0 };
	uint32_t crw;
	int r;

	if (c->ncrw) {
		crw = c->crw[0];
		if (c->crw_overflow && c->ncrw == 1)
			crw |= CRW_OFLW;
		be32_store(w, crw);
	}
	r = vm->write(vm->opaque, addr, ar, w, sizeof(w));
	if (r)
		return access_result(r);
	if (!c->ncrw)
		return 1;
	if (c->ncrw == 1)
		c->crw_overflow = false;
	memmove(c->crw, c->crw + 1, (c->ncrw - 1) * sizeof(c->crw[0]));
	c->ncrw--;
	return 0;
}

int css_slot_set(struct css *c, unsigned schno, bool present)
{
	struct css_subchannel *s;
	int r;

	pthread_mutex_lock(&c->lock);
	s = &c->sch[schno < CSS_MAX_SCH ? schno : 0];
	if (schno >= c->nsch || !s->slot) {
		r = -EINVAL;
		goto unlock;
	}
	if (s->absent == !present) {
		r = -EALREADY;
		goto unlock;
	}
	/* A new subchannel, as a device installed or taken out finds it. */
	s->intparm = 0;
	s->pmcw_flags = 0;
	s->lpm = 0x80;
	s->mbi = 0;
	s->chars = 0;
	s->scsw_flags = s->scsw_ctrl = 0;
	s->scsw_cpa = 0;
	s->dstat = s->cstat = 0;
	s->count = 0;
	memset(s->sense, 0, sizeof(s->sense));
	s->absent = !present;
	s->gone_unseen = !present;
	/* Taken out: the device forgets its session and stops (virtio-ccw
	 * resets: its queues stop, host I/O in flight is cancelled). An
	 * attention bit it leaves is skipped: attend() serves only an
	 * enabled subchannel. A device put in was reset when it last went
	 * (or is as made). */
	if (!present && s->ops->enable)
		s->ops->enable(s->dev, false);
	if (c->ncrw == CSS_MAX_CRW) {
		c->crw_overflow = true;
		r = 0;
		goto unlock;
	}
	c->crw[c->ncrw++] = CRW_RSC_SCH << 24 | CRW_ERC_IPI << 16 | schno;
	r = c->ncrw == 1;
unlock:
	css_unlock(c);
	return r;
}

bool css_slot_free(struct css *c, unsigned schno)
{
	bool r;

	pthread_mutex_lock(&c->lock);
	r = schno < c->nsch && c->sch[schno].slot && c->sch[schno].absent &&
	    !c->sch[schno].gone_unseen;
	css_unlock(c);
	return r;
}

int css_instruction(struct css *c, const struct s390_vmem *vm, unsigned op, uint32_t gpr1,
		    uint64_t addr, unsigned ar)
{
	unsigned schno = gpr1 & 0xffff;
	int r;

	switch (op) {
	case CSS_OP_STSCH:      /* SCHIB */
	case CSS_OP_MSCH:
	case CSS_OP_SSCH:       /* ORB */
	case CSS_OP_TSCH:       /* IRB */
		if (addr & 3)
			return -S390_PGM_SPECIFICATION;
		/* fall through */
	case CSS_OP_CSCH:
	case CSS_OP_HSCH:
	case CSS_OP_RSCH:
	case CSS_OP_XSCH:
		if (!css_schid_valid(gpr1))
			return -S390_PGM_OPERAND;
		pthread_mutex_lock(&c->lock);
		r = schno < c->nsch ? subchannel_op(c, vm, op, schno, addr, ar)
				    : 3;        /* no device there: not operational */
		css_unlock(c);
		return r;
	case CSS_OP_STCRW:
		if (addr & 3)
			return -S390_PGM_SPECIFICATION;
		pthread_mutex_lock(&c->lock);
		r = stcrw(c, vm, addr, ar);
		css_unlock(c);
		return r;
	case CSS_OP_CHSC:
		return chsc(vm, addr, ar);
	case CSS_OP_SCHM:
		/* Channel measurement: nothing is measured; bits 0-29 of GPR1
		 * must be zero apart from the mode bits. */
		if (gpr1 & 0xfffffffc)
			return -S390_PGM_OPERAND;
		return 0;
	case CSS_OP_SAL:
		return 0;               /* one address limit for all: none */
	default:                        /* TPI is KVM's; STCPS, RCHP: absent */
		return -S390_PGM_OPERATION;
	}
}

bool css_slot_present(struct css *c, unsigned schno)
{
	bool r;

	pthread_mutex_lock(&c->lock);
	r = schno < c->nsch && c->sch[schno].slot && !c->sch[schno].absent;
	css_unlock(c);
	return r;
}

/* ---- snapshots ---------------------------------------------------------- */

void css_save(struct css *c, struct snap_w *w)
{
	uint64_t bits;
	unsigned i;

	pthread_mutex_lock(&c->lock);
	/* An attention not served yet becomes the status (and the I/O
	 * interrupt, which the VM's floating interrupts then carry) it
	 * would have become at the unlock. */
	bits = __atomic_exchange_n(&c->attention, 0, __ATOMIC_ACQUIRE);
	for (; bits; bits &= bits - 1)
		attend(c, (unsigned)__builtin_ctzll(bits));
	snap_put_u32(w, c->nsch);
	for (i = 0; i < c->nsch; i++) {
		const struct css_subchannel *s = &c->sch[i];

		snap_put_u16(w, s->cu_type);
		snap_put_u8(w, s->cu_model);
		snap_put_u8(w, s->slot);
		snap_put_u8(w, s->absent);
		snap_put_u8(w, s->gone_unseen);
		snap_put_u32(w, s->intparm);
		snap_put_u16(w, s->pmcw_flags);
		snap_put_u8(w, s->lpm);
		snap_put_u16(w, s->mbi);
		snap_put_u32(w, s->chars);
		snap_put_u16(w, s->scsw_flags);
		snap_put_u16(w, s->scsw_ctrl);
		snap_put_u32(w, s->scsw_cpa);
		snap_put_u8(w, s->dstat);
		snap_put_u8(w, s->cstat);
		snap_put_u16(w, s->count);
		snap_put_bytes(w, s->sense, sizeof(s->sense));
	}
	snap_put_u32(w, c->ncrw);
	for (i = 0; i < c->ncrw; i++)
		snap_put_u32(w, c->crw[i]);
	snap_put_u8(w, c->crw_overflow);
	css_unlock(c);
}

/* One subchannel as saved. */
struct css_saved {
	uint16_t cu_type;
	uint8_t cu_model, slot, absent, gone_unseen;
	struct css_subchannel s;
};

static void css_get_sch(struct snap_r *r, struct css_saved *v)
{
	struct css_subchannel *s = &v->s;

	v->cu_type = snap_get_u16(r);
	v->cu_model = snap_get_u8(r);
	v->slot = snap_get_u8(r);
	v->absent = snap_get_u8(r);
	v->gone_unseen = snap_get_u8(r);
	s->intparm = snap_get_u32(r);
	s->pmcw_flags = snap_get_u16(r);
	s->lpm = snap_get_u8(r);
	s->mbi = snap_get_u16(r);
	s->chars = snap_get_u32(r);
	s->scsw_flags = snap_get_u16(r);
	s->scsw_ctrl = snap_get_u16(r);
	s->scsw_cpa = snap_get_u32(r);
	s->dstat = snap_get_u8(r);
	s->cstat = snap_get_u8(r);
	s->count = snap_get_u16(r);
	snap_get_bytes(r, s->sense, sizeof(s->sense));
}

/* What MSCH and the channel would never leave in a subchannel: NULL, or
 * what is wrong. */
static const char *css_saved_bad(const struct css_saved *v)
{
	if (v->slot > 1 || v->absent > 1 || v->gone_unseen > 1)
		return "a flag that is neither 0 nor 1";
	if (v->absent && !v->slot)
		return "a device absent from a subchannel that is not a hot-plug slot";
	if (v->gone_unseen && !v->absent)
		return "a device both there and gone";
	if (v->s.pmcw_flags & ~PMCW_SETTABLE)
		return "PMCW flags MSCH does not take";
	if (v->s.chars & PMCW_CHARS_INVALID)
		return "PMCW characteristics MSCH does not take";
	if (v->absent && (v->s.pmcw_flags & PMCW_ENA))
		return "an empty slot enabled";
	if (v->s.scsw_ctrl & ~(SCSW_FCTL_START | SCSW_FCTL_HALT | SCSW_FCTL_CLEAR |
			       SCSW_STCTL_ALERT | SCSW_STCTL_PRIMARY | SCSW_STCTL_SECONDARY |
			       SCSW_STCTL_PENDING))
		return "SCSW control bits the channel never sets";
	if (v->absent && v->s.scsw_ctrl)
		return "status on an empty slot";
	if (!v->s.scsw_ctrl && (v->s.dstat || v->s.cstat))
		return "device or channel status on an idle subchannel";
	if ((v->s.dstat & SCSW_DSTAT_UC) && !(v->s.scsw_ctrl & SCSW_STCTL_ALERT))
		return "a unit check without alert status";
	return NULL;
}

int css_load(struct css *c, struct snap_r *r, char *err, size_t errlen)
{
	struct css_saved *v;
	uint32_t nsch, ncrw, crw[CSS_MAX_CRW] = { 0 };
	uint8_t overflow;
	const char *bad;
	unsigned i;
	int ret = 0;

	nsch = snap_get_u32(r);
	if (r->err)
		return snap_done(r, err, errlen);
	if (nsch != c->nsch)
		return err_set(err, errlen, -EINVAL, "snapshot: %u subchannels there, %u here; give "
			       "the VM the snapshot's devices and hot-plug slots", nsch, c->nsch);
	v = calloc(nsch ? nsch : 1, sizeof(*v));
	if (!v)
		return err_set(err, errlen, -ENOMEM, "snapshot: out of memory");
	for (i = 0; i < nsch; i++)
		css_get_sch(r, &v[i]);
	ncrw = snap_get_u32(r);
	for (i = 0; i < ncrw && i < CSS_MAX_CRW; i++)
		crw[i] = snap_get_u32(r);
	overflow = snap_get_u8(r);
	if (r->err) {
		ret = snap_done(r, err, errlen);
		goto free_v;
	}
	if (ncrw > CSS_MAX_CRW || overflow > 1 || (overflow && !ncrw)) {
		ret = err_set(err, errlen, -EINVAL, "snapshot: %u channel reports pending (at most "
			      "%u)%s; the snapshot is damaged", ncrw, CSS_MAX_CRW,
			      overflow > 1 ? ", an overflow flag neither 0 nor 1" :
			      overflow ? ", one lost with none left to say so" : "");
		goto free_v;
	}
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < nsch && !ret; i++) {
		const struct css_subchannel *s = &c->sch[i];

		if (v[i].cu_type != s->cu_type || v[i].cu_model != s->cu_model ||
		    v[i].slot != s->slot)
			ret = err_set(err, errlen, -EINVAL, "snapshot: subchannel 0.0.%04x holds control "
				      "unit %04x model %02x%s there, %04x model %02x%s here; give the "
				      "VM the snapshot's devices, in its order", i, v[i].cu_type,
				      v[i].cu_model, v[i].slot ? " (a hot-plug slot)" : "",
				      s->cu_type, s->cu_model, s->slot ? " (a hot-plug slot)" : "");
		else if ((bad = css_saved_bad(&v[i])))
			ret = err_set(err, errlen, -EINVAL, "snapshot: subchannel 0.0.%04x: %s; the "
				      "snapshot is damaged", i, bad);
	}
	for (i = 0; i < nsch && !ret; i++) {
		struct css_subchannel *s = &c->sch[i];
		const struct css_subchannel *o = &v[i].s;

		s->intparm = o->intparm;
		s->pmcw_flags = o->pmcw_flags;
		s->lpm = o->lpm;
		s->mbi = o->mbi;
		s->chars = o->chars;
		s->scsw_flags = o->scsw_flags;
		s->scsw_ctrl = o->scsw_ctrl;
		s->scsw_cpa = o->scsw_cpa;
		s->dstat = o->dstat;
		s->cstat = o->cstat;
		s->count = o->count;
		memcpy(s->sense, o->sense, sizeof(s->sense));
		s->absent = v[i].absent;
		s->gone_unseen = v[i].gone_unseen;
	}
	if (!ret) {
		memcpy(c->crw, crw, sizeof(c->crw));
		c->ncrw = ncrw;
		c->crw_overflow = overflow;
	}
	css_unlock(c);
free_v:
	free(v);
	return ret;
}
