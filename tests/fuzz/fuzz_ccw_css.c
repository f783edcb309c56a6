/* The s390 channel subsystem (arch/s390/css.c, KVM-free) under a fuzzed
 * guest: every I/O instruction with fuzzed subchannel ids and operand
 * addresses and registers; ORBs, SCHIBs, CCWs (format 0 and 1, chains,
 * TICs, loops) and IDAW lists (31- and 64-bit, 2 and 4 KiB blocks) built
 * in fake RAM; two devices that answer each command however the input
 * says (any byte count, reject, program check, nonsense) and may raise an
 * attention from inside it; attentions from outside. RAM: 64 KiB at 0 with
 * a guard page on either side (fuzz_ram.h).
 *
 * Invariants, besides ASan/UBSan and the guard pages:
 *  - an instruction ends with cc 0..3, an operation, specification or
 *    operand exception, or an access exception delivered; never a host
 *    error (the fake operand access never fails);
 *  - a device is called only while enabled, never for the channel's own
 *    commands (NOOP, BASIC SENSE, SENSE ID, TIC), with at most
 *    CCW_MAX_SEGS segments, each inside RAM, adding up to the count;
 *  - an I/O interrupt is raised only for an enabled subchannel with status
 *    pending, with its interruption parameter and ISC;
 *  - the SCSW holds only architected bits, an idle one no device or
 *    channel status, a unit check comes with alert status; the PMCW holds
 *    only what MSCH may set, and its enable bit is what the device was
 *    last told;
 *  - TSCH (with valid operands) ends with cc 0 exactly when status was
 *    pending, and withdraws it;
 *  - no attention is left over once an instruction or css_notify
 *    returned (nothing else holds the lock);
 *  - the third subchannel is a hot-plug slot, put in and taken out at
 *    the input's word: absent, its device is disabled (so never called),
 *    its status never pending; a report is queued per change while
 *    there is room (the first asks for a machine check), STCRW stores
 *    them (cc 0) until none is left (cc 1), and never more than fit;
 *  - a snapshot's channel subsystem state (css_load, on bytes of the
 *    input as a section's payload) that is taken leaves every invariant
 *    above true (the devices told what the restored PMCWs say, as their
 *    own restored state would); one that is refused says why in one line
 *    and changes nothing; what is taken saves again (css_save) to the
 *    same bytes. */
#include "arch/s390/css.h"
#include "tests/fuzz/fuzz.h"
#include "vmm/base/snap.h"
#include "tests/fuzz/fuzz_ram.h"

#define RAM  0x10000ULL
#define NSCH 3                          /* two devices, then a hot-plug slot */
#define SLOT 2

/* What the css.c's static PMCW and SCSW bits are, as the architecture has them. */
#define PMCW_ENA       0x0080
#define PMCW_SETTABLE  0x389c           /* ISC, ENA, MME, MP */
#define SCSW_CTRL_BITS (SCSW_FCTL_START | SCSW_FCTL_HALT | SCSW_FCTL_CLEAR | SCSW_STCTL_ALERT | \
			SCSW_STCTL_PRIMARY | SCSW_STCTL_SECONDARY | SCSW_STCTL_PENDING)

struct fc;

struct fdev {
	struct fc *t;
	bool on;                        /* as the last enable() said */
};

struct fc {
	struct fz_ram r;
	struct css c;
	struct fdev dev[NSCH];
	struct fz *in;
	struct s390_vmem vm;
};

static int vm_read(void *opaque, uint64_t addr, unsigned ar, void *buf, uint32_t len)
{
	struct fc *t = opaque;
	const void *p = gmem_ptr(&t->r.mem, addr, len);

	(void)ar;
	if (!p)
		return S390_ACCESS_INJECTED;    /* an addressing exception, delivered */
	memcpy(buf, p, len);
	return 0;
}

static int vm_write(void *opaque, uint64_t addr, unsigned ar, const void *buf, uint32_t len)
{
	struct fc *t = opaque;
	void *p = gmem_ptr(&t->r.mem, addr, len);

	(void)ar;
	if (!p)
		return S390_ACCESS_INJECTED;
	memcpy(p, buf, len);
	return 0;
}

static void on_io(void *opaque, unsigned schno, uint32_t intparm, unsigned isc)
{
	struct fc *t = opaque;
	const struct css_subchannel *s;

	FZ_ASSERT(schno < t->c.nsch);
	s = &t->c.sch[schno];
	FZ_ASSERT(s->pmcw_flags & PMCW_ENA);
	FZ_ASSERT(s->scsw_ctrl & SCSW_STCTL_PENDING);
	FZ_ASSERT(intparm == s->intparm);
	FZ_ASSERT(isc == (unsigned)((s->pmcw_flags >> 11) & 7));
}

static int fdev_command(void *opaque, uint8_t cmd, bool sli, struct ccw_data *d)
{
	static const uint8_t answer[40] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	struct fdev *v = opaque;
	struct fc *t = v->t;
	uint64_t total = 0;
	uint8_t buf[40], how;

	(void)sli;
	FZ_ASSERT(v->on);
	FZ_ASSERT(cmd != CCW_CMD_NOOP && cmd != CCW_CMD_BASIC_SENSE && cmd != CCW_CMD_SENSE_ID &&
		  (cmd & 0x0f) != CCW_CMD_TIC && (cmd & 0x0f) != 0);
	FZ_ASSERT(d->n <= CCW_MAX_SEGS);
	for (unsigned i = 0; i < d->n; i++) {
		FZ_ASSERT(d->seg[i].iov_len > 0);
		FZ_ASSERT(fz_ram_holds(&t->r, d->seg[i].iov_base, d->seg[i].iov_len));
		total += d->seg[i].iov_len;
	}
	FZ_ASSERT(total == d->count);
	how = fz_u8(t->in);
	/* A device's own css_notify inside its command (NEEDS_RESET), maybe
	 * for a subchannel that does not exist. */
	if (how & 0x80)
		css_notify(&t->c, (how >> 4) & 7);
	switch (how & 7) {
	case 0:
		return (int)ccw_data_write(d, answer, sizeof(answer));
	case 1:
		return (int)ccw_data_read(d, buf, sizeof(buf));
	case 2:
		return (int)d->count;
	case 3:
		return CCW_REJECT;
	case 4:
		return CCW_PROGRAM_CHECK;
	case 5:
		return (int)d->count + 1;       /* more than the CCW allowed */
	case 6:
		return (int)(fz_u16(t->in) % (d->count + 1));
	default:
		return -(int)(how & 0x0f) - 3;  /* no result a device may give */
	}
}

static void fdev_enable(void *opaque, bool on)
{
	((struct fdev *)opaque)->on = on;
}

static const struct ccw_dev_ops fdev_ops = { .command = fdev_command, .enable = fdev_enable };

/* An address: mostly inside RAM (aligned or not), sometimes near its end
 * or anywhere. */
static uint64_t addr(struct fz *f)
{
	switch (fz_u8(f) % 6) {
	case 0:
	case 1:
		return (fz_u16(f) * 8ULL) % RAM;
	case 2:
		return fz_u16(f) % RAM;
	case 3:
		return RAM - 1 - fz_u8(f);
	case 4:
		return fz_u32(f);
	default:
		return fz_u64(f);
	}
}

static uint32_t schid(struct fz *f)
{
	uint8_t how = fz_u8(f);

	if (how & 0x80)
		return fz_u32(f);
	return css_schid(how % (NSCH + 1));     /* the devices, and the first id past them */
}

static void store(struct fc *t, uint64_t at, const void *p, unsigned len)
{
	for (unsigned i = 0; i < len; i++)
		t->r.host[(at + i) % RAM] = ((const uint8_t *)p)[i];
}

/* ORB: intparm, ctrl0 (mostly format-1 CCWs, with or without 64-bit
 * IDAWs and 2 KiB blocks), LPM, ctrl1, the program's address. */
static void op_orb(struct fc *t, struct fz *f)
{
	static const uint16_t ctrl0s[] = { 0x0080, 0x0082, 0x0083, 0x0000, 0x0880, 0x0084 };
	uint64_t at = addr(f);
	uint8_t o[12], how = fz_u8(f);

	be32_store(o, fz_u32(f));
	be16_store(o + 4, how & 0x80 ? fz_u16(f) : ctrl0s[how % ARRAY_SIZE(ctrl0s)]);
	o[6] = 0xff;
	o[7] = how & 0x40 ? fz_u8(f) : 0;
	be32_store(o + 8, (uint32_t)(how & 0x20 ? fz_u32(f) : addr(f) & ~7ULL));
	store(t, at, o, sizeof(o));
}

/* SCHIB for MSCH: intparm, PMCW flags (mostly enable with an ISC),
 * characteristics. */
static void op_schib(struct fc *t, struct fz *f)
{
	uint64_t at = addr(f);
	uint8_t s[CSS_SCHIB_LEN] = { 0 }, how = fz_u8(f);

	be32_store(s, fz_u32(f));
	be16_store(s + 4, how & 0x80 ? fz_u16(f) : (uint16_t)((how & 1 ? PMCW_ENA : 0) |
							       ((how >> 1) & 7) << 11));
	s[8] = 0x80;
	be32_store(s + 24, how & 0x40 ? fz_u32(f) : (how >> 4) & 1);   /* CSENSE */
	store(t, at, s, sizeof(s));
}

/* A CCW (format 0 or 1) at a doubleword: a device command, one of the
 * channel's, a TIC, or anything. */
static void op_ccw(struct fc *t, struct fz *f)
{
	static const uint8_t cmds[] = { 0x01, 0x02, 0x13, 0x33, 0x43, 0x83, CCW_CMD_NOOP,
					CCW_CMD_BASIC_SENSE, CCW_CMD_SENSE_ID, CCW_CMD_TIC, 0x18 };
	uint64_t at = addr(f) & ~7ULL;
	uint8_t w[8], how = fz_u8(f), cmd = how & 0x80 ? fz_u8(f) : cmds[how % ARRAY_SIZE(cmds)];
	uint8_t flags = fz_u8(f);
	uint16_t count = how & 0x40 ? fz_u16(f) : fz_u8(f) % 48;
	uint32_t cda = (uint32_t)(how & 0x20 ? fz_u32(f) : addr(f));

	if (how & 0x10) {                       /* format 0: 24-bit address */
		w[0] = cmd;
		w[1] = (uint8_t)(cda >> 16);
		w[2] = (uint8_t)(cda >> 8);
		w[3] = (uint8_t)cda;
		w[4] = flags;
		w[5] = 0;
		be16_store(w + 6, count);
	} else {
		w[0] = cmd;
		w[1] = flags;
		be16_store(w + 2, count);
		be32_store(w + 4, cda);
	}
	store(t, at, w, sizeof(w));
}

/* IDAWs: a few 4- or 8-byte words, mostly block-aligned addresses. */
static void op_idaws(struct fc *t, struct fz *f)
{
	uint8_t how = fz_u8(f), n = how % 5 + 1;
	bool wide = how & 0x80;
	uint64_t at = addr(f) & ~(wide ? 7ULL : 3ULL);

	for (uint8_t i = 0; i < n; i++) {
		uint64_t a = fz_u8(f) & 1 ? addr(f) : (fz_u8(f) * 2048ULL) % RAM;
		uint8_t b[8];

		if (wide) {
			be64_store(b, a);
			store(t, at + 8ULL * i, b, 8);
		} else {
			be32_store(b, (uint32_t)a);
			store(t, at + 4ULL * i, b, 4);
		}
	}
}

static bool status_pending(const struct css_subchannel *s)
{
	return s->scsw_ctrl & SCSW_STCTL_PENDING;
}

static void op_instruction(struct fc *t, struct fz *f)
{
	static const uint8_t ops[] = {
		CSS_OP_SSCH, CSS_OP_TSCH, CSS_OP_MSCH, CSS_OP_STSCH, CSS_OP_SSCH, CSS_OP_TSCH,
		CSS_OP_CSCH, CSS_OP_HSCH, CSS_OP_RSCH, CSS_OP_XSCH, CSS_OP_STCRW, CSS_OP_CHSC,
		CSS_OP_SCHM, CSS_OP_SAL, CSS_OP_TPI, CSS_OP_STCPS, CSS_OP_RCHP, 0x20, 0x00,
	};
	unsigned op = ops[fz_u8(f) % ARRAY_SIZE(ops)];
	uint32_t gpr1 = schid(f);
	uint64_t a = addr(f);
	unsigned ar = fz_u8(f) & 0xf, schno = gpr1 & 0xffff;
	bool tsch_ok = op == CSS_OP_TSCH && css_schid_valid(gpr1) && schno < t->c.nsch &&
		       !(a & 3) && gmem_ptr(&t->r.mem, a, CSS_IRB_LEN);
	bool pending = tsch_ok && status_pending(&t->c.sch[schno]);
	unsigned crw_before = t->c.ncrw;
	int r = css_instruction(&t->c, &t->vm, op, gpr1, a, ar);

	FZ_ASSERT(r == CSS_INJECTED || (r >= 0 && r <= 3) || r == -S390_PGM_OPERATION ||
		  r == -S390_PGM_SPECIFICATION || r == -S390_PGM_OPERAND);
	if (tsch_ok) {
		FZ_ASSERT((r == 0) == pending);
		FZ_ASSERT(!status_pending(&t->c.sch[schno]));
	}
	if (op == CSS_OP_STCRW && r == 1)
		FZ_ASSERT(t->c.ncrw == 0);
	if (op == CSS_OP_STCRW && r == 0)
		FZ_ASSERT(crw_before > 0 && t->c.ncrw == crw_before - 1);
}

/* The slot's device put in or taken out: a report when there is room,
 * the first one asking for a machine check. */
static void op_slot(struct fc *t, bool present)
{
	const struct css_subchannel *s = &t->c.sch[SLOT];
	unsigned before = t->c.ncrw;
	bool was = !s->absent;
	int r = css_slot_set(&t->c, SLOT, present);

	if (was == present) {
		FZ_ASSERT(r == -EALREADY && t->c.ncrw == before);
		return;
	}
	FZ_ASSERT(r == (before == 0));
	FZ_ASSERT(t->c.ncrw == (before < CSS_MAX_CRW ? before + 1 : before));
	FZ_ASSERT(s->absent == !present && !status_pending(s) && !s->pmcw_flags);
	FZ_ASSERT(!t->dev[SLOT].on);
	FZ_ASSERT(css_slot_set(&t->c, 0, present) == -EINVAL);
}

/* A snapshot's state: a u16 length, that many bytes of payload. */
static void op_load(struct fc *t, struct fz *f)
{
	static char msg[512];
	struct css_subchannel before[NSCH];
	uint32_t crw[CSS_MAX_CRW];
	unsigned ncrw = t->c.ncrw;
	bool oflw = t->c.crw_overflow;
	uint16_t n = fz_u16(f);
	uint8_t buf[1024], *img;
	struct snap_r r = { .p = buf, .len = n < sizeof(buf) ? n : sizeof(buf) }, again;
	struct snap_file file;
	struct snap_w w;
	size_t len;
	int ret;

	fz_bytes(f, buf, r.len);
	memcpy(before, t->c.sch, sizeof(before));
	memcpy(crw, t->c.crw, sizeof(crw));
	msg[0] = '\0';
	ret = css_load(&t->c, &r, msg, sizeof(msg));
	if (ret) {
		FZ_ASSERT(ret == -EINVAL || ret == -ENOMEM);
		FZ_ASSERT(msg[0] && !strchr(msg, '\n'));
		FZ_ASSERT(!memcmp(before, t->c.sch, sizeof(before)));
		FZ_ASSERT(!memcmp(crw, t->c.crw, sizeof(crw)) && t->c.ncrw == ncrw &&
			  t->c.crw_overflow == oflw);
		return;
	}
	/* Each device's own restored state agrees with its PMCW. */
	for (unsigned i = 0; i < NSCH; i++)
		t->dev[i].on = t->c.sch[i].pmcw_flags & PMCW_ENA;
	/* Saved again: the bytes it read. */
	snap_w_init(&w);
	snap_begin(&w, SNAP_TAG('C', 'S', 'S', ' '), 0);
	css_save(&t->c, &w);
	snap_end(&w);
	FZ_ASSERT(snap_w_image(&w, &img, &len) == 0);
	FZ_ASSERT(snap_open(&file, img, len, msg, sizeof(msg)) == 0);
	FZ_ASSERT(snap_find(&file, SNAP_TAG('C', 'S', 'S', ' '), 0, &again) == 0);
	FZ_ASSERT(again.len == r.off && !memcmp(again.p, buf, r.off));
	free(img);
	snap_w_free(&w);
}

static void check(struct fc *t)
{
	FZ_ASSERT(__atomic_load_n(&t->c.attention, __ATOMIC_ACQUIRE) == 0);
	FZ_ASSERT(t->c.ncrw <= CSS_MAX_CRW);
	if (t->c.sch[SLOT].absent)
		FZ_ASSERT(!status_pending(&t->c.sch[SLOT]) && !t->dev[SLOT].on);
	for (unsigned i = 0; i < t->c.nsch; i++) {
		const struct css_subchannel *s = &t->c.sch[i];

		FZ_ASSERT(!(s->scsw_ctrl & ~SCSW_CTRL_BITS));
		if (!s->scsw_ctrl)
			FZ_ASSERT(s->dstat == 0 && s->cstat == 0);
		if (s->dstat & SCSW_DSTAT_UC)
			FZ_ASSERT(s->scsw_ctrl & SCSW_STCTL_ALERT);
		FZ_ASSERT(!(s->pmcw_flags & ~PMCW_SETTABLE));
		FZ_ASSERT(!!(s->pmcw_flags & PMCW_ENA) == t->dev[i].on);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fc t;
	struct fz in = { data, size };
	unsigned steps = 0;

	memset(&t, 0, sizeof(t));
	fz_ram_get(&t.r, 0, RAM);
	t.in = &in;
	t.vm = (struct s390_vmem){ vm_read, vm_write, &t };
	FZ_ASSERT(css_init(&t.c, &t.r.mem, on_io, &t) == 0);
	for (unsigned i = 0; i < NSCH; i++) {
		t.dev[i].t = &t;
		FZ_ASSERT((i == SLOT ? css_attach_slot : css_attach)(&t.c, &fdev_ops, &t.dev[i],
								      0x3832, 2) == (int)i);
	}
	while (fz_left(&in) && ++steps < 4096) {
		uint8_t how = fz_u8(&in);

		/* One step in 16 (high nibble 0xf) plugs or unplugs the slot;
		 * one in 16 (0xe) loads a snapshot's state. */
		if ((how & 0xf0) == 0xf0) {
			op_slot(&t, how & 1);
			check(&t);
			continue;
		}
		if ((how & 0xf0) == 0xe0) {
			op_load(&t, &in);
			check(&t);
			continue;
		}
		switch (how % 8) {
		case 0:
		case 1:
			op_instruction(&t, &in);
			break;
		case 2:
			op_orb(&t, &in);
			break;
		case 3:
			op_schib(&t, &in);
			break;
		case 4:
			op_ccw(&t, &in);
			break;
		case 5:
			op_idaws(&t, &in);
			break;
		case 6:
			fz_ram_poke(&t.r, &in);
			break;
		case 7:
			/* a queue thread's attention, maybe for no subchannel */
			css_notify(&t.c, fz_u8(&in) % 70);
			break;
		}
		check(&t);
	}
	css_fini(&t.c);
	return 0;
}

/* --- seeds: what Linux's cio does, and programs that must be refused --- */

/* The ops' encodings, written out in the order the target reads them. */
static void s_schib(struct fz_buf *s, uint64_t at, bool enable)
{
	fzb_u8(s, 3);
	fzb_u8(s, 0); fzb_u16(s, (uint16_t)(at / 8));   /* addr(): aligned in RAM */
	fzb_u8(s, (uint8_t)((enable ? 1 : 0) | 3 << 1));
	fzb_u32(s, 0x77);                               /* intparm */
}

static void s_orb(struct fz_buf *s, uint64_t at, uint8_t ctrl0_index, uint64_t cpa)
{
	fzb_u8(s, 2);
	fzb_u8(s, 0); fzb_u16(s, (uint16_t)(at / 8));
	fzb_u8(s, ctrl0_index);                         /* how: a known ctrl0 */
	fzb_u32(s, 0x1234abcd);
	fzb_u8(s, 0); fzb_u16(s, (uint16_t)(cpa / 8));  /* cpa via addr() */
}

static void s_ccw1(struct fz_buf *s, uint64_t at, uint8_t cmd_index, uint8_t flags,
		   uint8_t count, uint64_t cda)
{
	fzb_u8(s, 4);
	fzb_u8(s, 0); fzb_u16(s, (uint16_t)(at / 8));
	fzb_u8(s, cmd_index);                           /* how: format 1, short count */
	fzb_u8(s, flags);
	fzb_u8(s, count);
	fzb_u8(s, 0); fzb_u16(s, (uint16_t)(cda / 8));
}

static void s_insn(struct fz_buf *s, unsigned op_index, unsigned sch, uint64_t at)
{
	fzb_u8(s, 0);
	fzb_u8(s, (uint8_t)op_index);
	fzb_u8(s, (uint8_t)sch);
	fzb_u8(s, 0); fzb_u16(s, (uint16_t)(at / 8));
	fzb_u8(s, 0);                                   /* ar */
}

/* Indexes into the target's tables. */
enum { I_SSCH = 0, I_TSCH = 1, I_MSCH = 2, I_STSCH = 3, I_CSCH = 6, I_HSCH = 7 };
enum { C_WRITE = 0, C_READ = 1, C_NOOP = 6, C_SENSE_ID = 8, C_TIC = 9 };

static void fuzz_seeds(void)
{
	struct fz_buf s = { .n = 0 };

	/* Enable, STSCH, SENSE ID then a device read, chained; TSCH. */
	s_schib(&s, 0x100, true);
	s_insn(&s, I_MSCH, 0, 0x100);
	s_insn(&s, I_STSCH, 0, 0x200);
	s_ccw1(&s, 0x1000, C_SENSE_ID, CCW_FLAG_CC, 8, 0x2000);
	s_ccw1(&s, 0x1008, C_READ, CCW_FLAG_SLI, 16, 0x2100);
	s_orb(&s, 0x300, 0, 0x1000);
	s_insn(&s, I_SSCH, 0, 0x300);
	fzb_u8(&s, 0);                                  /* the device: answer */
	s_insn(&s, I_TSCH, 0, 0x400);
	fuzz_seed("enable_sense_id_read", s.b, s.n);

	/* A device write through a format-2 IDAW list across a 4 KiB block. */
	s.n = 0;
	s_schib(&s, 0x100, true);
	s_insn(&s, I_MSCH, 1, 0x100);
	fzb_u8(&s, 5);                                  /* IDAWs */
	fzb_u8(&s, 0x83);                               /* 64-bit words, 2 of them */
	fzb_u8(&s, 0); fzb_u16(&s, 0x3000 / 8);
	fzb_u8(&s, 1); fzb_u8(&s, 0); fzb_u16(&s, 0x4ff0 / 8);
	fzb_u8(&s, 0); fzb_u8(&s, 10);                  /* 10 * 2048 */
	s_ccw1(&s, 0x1000, C_WRITE, CCW_FLAG_IDA, 32, 0x3000);
	s_orb(&s, 0x300, 1, 0x1000);                    /* ctrl0 0x0082: 64-bit IDAWs */
	s_insn(&s, I_SSCH, 1, 0x300);
	fzb_u8(&s, 1);                                  /* the device: reads the data */
	s_insn(&s, I_TSCH, 1, 0x400);
	fuzz_seed("idaw_write_across_blocks", s.b, s.n);

	/* NOOP chained to a TIC back to it: cut off with a program check. */
	s.n = 0;
	s_schib(&s, 0x100, true);
	s_insn(&s, I_MSCH, 0, 0x100);
	s_ccw1(&s, 0x1000, C_NOOP, CCW_FLAG_CC | CCW_FLAG_SLI, 1, 0x2000);
	s_ccw1(&s, 0x1008, C_TIC, 0, 0, 0x1000);
	s_orb(&s, 0x300, 0, 0x1000);
	s_insn(&s, I_SSCH, 0, 0x300);
	s_insn(&s, I_TSCH, 0, 0x400);
	fuzz_seed("tic_loop", s.b, s.n);

	/* An attention while enabled, a reject with concurrent sense, clear
	 * and halt. */
	s.n = 0;
	s_schib(&s, 0x100, true);
	s_insn(&s, I_MSCH, 0, 0x100);
	fzb_u8(&s, 7); fzb_u8(&s, 0);
	s_insn(&s, I_TSCH, 0, 0x400);
	s_ccw1(&s, 0x1000, C_READ, 0, 8, 0x2000);
	s_orb(&s, 0x300, 0, 0x1000);
	s_insn(&s, I_SSCH, 0, 0x300);
	fzb_u8(&s, 0x83);                               /* reject, and notify subchannel 0 */
	s_insn(&s, I_TSCH, 0, 0x400);
	s_insn(&s, I_HSCH, 0, 0);
	s_insn(&s, I_CSCH, 0, 0);
	s_insn(&s, I_TSCH, 0, 0x400);
	fuzz_seed("notify_reject_halt_clear", s.b, s.n);

	/* A snapshot's state, as css_save writes it: subchannel 0 enabled
	 * (ISC 3) with status pending, the slot's device put in and not yet
	 * reported; then TSCH on 0. */
	s.n = 0;
	{
		struct css c;
		struct fdev d[NSCH];
		struct snap_file f;
		struct snap_r r;
		struct snap_w w;
		uint8_t *img;
		size_t len;
		char msg[256];

		memset(d, 0, sizeof(d));
		FZ_ASSERT(css_init(&c, NULL, NULL, NULL) == 0);
		for (unsigned i = 0; i < NSCH; i++)
			FZ_ASSERT((i == SLOT ? css_attach_slot : css_attach)(&c, &fdev_ops, &d[i],
									      0x3832, 2) == (int)i);
		c.sch[0].pmcw_flags = PMCW_ENA | 3 << 11;
		c.sch[0].scsw_ctrl = SCSW_STCTL_ALERT | SCSW_STCTL_PENDING;
		FZ_ASSERT(css_slot_set(&c, SLOT, true) == 1);
		snap_w_init(&w);
		snap_begin(&w, SNAP_TAG('C', 'S', 'S', ' '), 0);
		css_save(&c, &w);
		snap_end(&w);
		FZ_ASSERT(snap_w_image(&w, &img, &len) == 0);
		FZ_ASSERT(snap_open(&f, img, len, msg, sizeof(msg)) == 0);
		FZ_ASSERT(snap_find(&f, SNAP_TAG('C', 'S', 'S', ' '), 0, &r) == 0);
		fzb_u8(&s, 0xe0);
		fzb_u16(&s, (uint16_t)r.len);
		fzb_bytes(&s, r.p, r.len);
		free(img);
		snap_w_free(&w);
		css_fini(&c);
	}
	s_insn(&s, I_TSCH, 0, 0x400);
	fuzz_seed("snapshot_state_loaded", s.b, s.n);
}
