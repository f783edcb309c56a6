/* The channel subsystem (arch/s390/css.c) as a guest's I/O instructions
 * reach it: subchannel ids and operand checks, MSCH/STSCH, channel programs
 * run by SSCH and their status through TSCH, and every way a program can
 * be wrong (addresses, CCW bits, TIC chains, IDAW lists, lengths), which
 * must end in the architected program check or unit check with the device
 * never called on bad data. A fake device answers the commands; operands
 * are reached through a fake of KVM's logical-address access. Big-endian
 * fields; runs under qemu-s390x-static on x86. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "arch/s390/css.h"
#include "tests/unit/check.h"
#include "vmm/base/byteorder.h"
#include "tests/unit/snap_sec.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"

#define RAM      (16ULL << 20)
#define OPND     0x10000ULL     /* SCHIB / ORB / IRB operands */
#define PROG     0x20000ULL     /* channel programs */
#define DATA     0x30000ULL     /* data areas */
#define IDAWS    0x40000ULL
#define SCH0     css_schid(0)

/* A device on the subchannel: what it was asked, what it answers. */
struct fdev {
	unsigned calls, enables, disables;
	uint8_t cmd;
	int ret;                        /* != 0: returned as is */
	uint8_t got[64];
	uint32_t ngot;
	/* Called inside every command (the subchannel lock held). */
	void (*during)(void *arg);
	void *during_arg;
};

struct t {
	struct guest_mem gm;
	struct css c;
	struct fdev dev;
	unsigned irqs, irq_sch, irq_isc, faults;
	uint32_t irq_parm;
	struct s390_vmem vm;
};

static int fdev_command(void *opaque, uint8_t cmd, bool sli, struct ccw_data *d)
{
	struct fdev *f = opaque;
	static const uint8_t answer[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	(void)sli;
	f->calls++;
	f->cmd = cmd;
	if (f->during)
		f->during(f->during_arg);
	if (f->ret)
		return f->ret;
	if (cmd == 0x01) {              /* a write: the guest's bytes */
		f->ngot = ccw_data_read(d, f->got, sizeof(f->got));
		return (int)f->ngot;
	}
	return (int)ccw_data_write(d, answer, sizeof(answer));
}

static void fdev_enable(void *opaque, bool on)
{
	struct fdev *f = opaque;

	if (on)
		f->enables++;
	else
		f->disables++;
}

static const struct ccw_dev_ops fdev_ops = { .command = fdev_command, .enable = fdev_enable };

static void on_io(void *opaque, unsigned schno, uint32_t intparm, unsigned isc)
{
	struct t *t = opaque;

	t->irqs++;
	t->irq_sch = schno;
	t->irq_parm = intparm;
	t->irq_isc = isc;
}

/* KVM's MEM_OP, faked: logical = absolute; outside RAM the access raises
 * an addressing exception (delivered: S390_ACCESS_INJECTED). */
static int vm_read(void *opaque, uint64_t addr, unsigned ar, void *buf, uint32_t len)
{
	struct t *t = opaque;
	const void *p = gmem_ptr(&t->gm, addr, len);

	(void)ar;
	if (!p) {
		t->faults++;
		return S390_ACCESS_INJECTED;
	}
	memcpy(buf, p, len);
	return 0;
}

static int vm_write(void *opaque, uint64_t addr, unsigned ar, const void *buf, uint32_t len)
{
	struct t *t = opaque;
	void *p = gmem_ptr(&t->gm, addr, len);

	(void)ar;
	if (!p) {
		t->faults++;
		return S390_ACCESS_INJECTED;
	}
	memcpy(p, buf, len);
	return 0;
}

static struct t *setup(void)
{
	struct t *t = calloc(1, sizeof(*t));

	CHECK(t);
	CHECK_EQ(gmem_map(&t->gm, RAM, 1ULL << 32), 0);
	CHECK_EQ(css_init(&t->c, &t->gm, on_io, t), 0);
	CHECK_EQ(css_attach(&t->c, &fdev_ops, &t->dev, 0x3832, 2), 0);
	t->vm = (struct s390_vmem){ vm_read, vm_write, t };
	return t;
}

static void teardown(struct t *t)
{
	css_fini(&t->c);
	gmem_unmap(&t->gm);
	free(t);
}

static uint8_t *ram(struct t *t, uint64_t at, unsigned len)
{
	uint8_t *p = gmem_ptr(&t->gm, at, len);

	CHECK(p);
	return p;
}

static int insn(struct t *t, unsigned op, uint32_t gpr1, uint64_t addr)
{
	return css_instruction(&t->c, &t->vm, op, gpr1, addr, 0);
}

/* MSCH with these PMCW flags (ENA 0x0080, ISC << 11) and characteristics. */
static int modify(struct t *t, uint32_t intparm, uint16_t flags, uint32_t chars)
{
	uint8_t *s = ram(t, OPND, CSS_SCHIB_LEN);

	memset(s, 0, CSS_SCHIB_LEN);
	be32_store(s, intparm);
	be16_store(s + 4, flags);
	s[8] = 0x80;
	be32_store(s + 24, chars);
	return insn(t, CSS_OP_MSCH, SCH0, OPND);
}

static struct t *enabled_setup(void)
{
	struct t *t = setup();

	CHECK_EQ(modify(t, 0, 0x0080 | 3 << 11, 0), 0);
	return t;
}

/* A format-1 CCW at addr. */
static void ccw1(struct t *t, uint64_t addr, uint8_t cmd, uint8_t flags, uint16_t count,
		 uint32_t cda)
{
	uint8_t *p = ram(t, addr, 8);

	p[0] = cmd;
	p[1] = flags;
	be16_store(p + 2, count);
	be32_store(p + 4, cda);
}

/* SSCH with an ORB: intparm 0x1234abcd, ctrl0 (0x0080: format-1 CCWs). */
static int start(struct t *t, uint16_t ctrl0, uint8_t ctrl1, uint32_t cpa)
{
	uint8_t *o = ram(t, OPND, 12);

	be32_store(o, 0x1234abcd);
	be16_store(o + 4, ctrl0);
	o[6] = 0xff;
	o[7] = ctrl1;
	be32_store(o + 8, cpa);
	return insn(t, CSS_OP_SSCH, SCH0, OPND);
}

/* The status the program ended with, through TSCH (cc 0 expected). */
struct status {
	uint16_t ctrl;
	uint32_t cpa;
	uint8_t dstat, cstat;
	uint16_t residual;
	const uint8_t *irb;
};

static struct status test_subchannel(struct t *t)
{
	struct status s;
	const uint8_t *irb = ram(t, OPND + 0x100, CSS_IRB_LEN);

	CHECK_EQ(insn(t, CSS_OP_TSCH, SCH0, OPND + 0x100), 0);
	s.ctrl = be16_load(irb + 2);
	s.cpa = be32_load(irb + 4);
	s.dstat = irb[8];
	s.cstat = irb[9];
	s.residual = be16_load(irb + 10);
	s.irb = irb;
	return s;
}

/* Run a one-CCW or chained program at PROG; the device must not have been
 * called and the status must be a channel-program check. */
static void expect_program_check(struct t *t, uint16_t ctrl0, uint32_t cpa)
{
	unsigned calls = t->dev.calls, irqs = t->irqs;
	struct status s;

	CHECK_EQ(start(t, ctrl0, 0, cpa), 0);
	CHECK_EQ(t->irqs, irqs + 1);            /* the check interrupts like an end */
	s = test_subchannel(t);
	CHECK_EQ(s.cstat, SCSW_CSTAT_PROG);
	CHECK_EQ(s.dstat, 0);
	CHECK(s.ctrl & SCSW_STCTL_ALERT);
	CHECK(s.ctrl & SCSW_STCTL_PENDING);
	CHECK_EQ(t->dev.calls, calls);
}

TEST(subchannel_ids_and_operand_alignment_are_checked)
{
	struct t *t = setup();

	CHECK_EQ(insn(t, CSS_OP_STSCH, 0x00020000, OPND), -S390_PGM_OPERAND);  /* no "one" bit */
	CHECK_EQ(insn(t, CSS_OP_STSCH, 0x00090000, OPND), -S390_PGM_OPERAND);  /* set 1, M bit */
	CHECK_EQ(insn(t, CSS_OP_STSCH, SCH0, OPND + 2), -S390_PGM_SPECIFICATION);
	CHECK_EQ(insn(t, CSS_OP_SSCH, SCH0, OPND + 1), -S390_PGM_SPECIFICATION);
	/* Past the last device: not operational, which ends Linux's scan. */
	CHECK_EQ(insn(t, CSS_OP_STSCH, css_schid(1), OPND), 3);
	CHECK_EQ(insn(t, CSS_OP_SSCH, css_schid(0xffff), OPND), 3);
	/* An operand outside the guest: the exception is the guest's. */
	CHECK_EQ(insn(t, CSS_OP_STSCH, SCH0, RAM - 4), CSS_INJECTED);
	CHECK_EQ(t->faults, 1);
	CHECK_EQ(insn(t, 0x3b, SCH0, OPND), -S390_PGM_OPERATION);                /* RCHP */
	teardown(t);
}

TEST(stsch_shows_device_number_valid_and_one_path)
{
	struct t *t = setup();
	const uint8_t *s = ram(t, OPND, CSS_SCHIB_LEN);
	struct fdev second = { 0 };

	CHECK_EQ(css_attach(&t->c, &fdev_ops, &second, 0x3832, 2), 1);
	CHECK_EQ(insn(t, CSS_OP_STSCH, css_schid(1), OPND), 0);
	CHECK_EQ(be16_load(s + 4) & 0x0001, 0x0001);    /* DNV */
	CHECK_EQ(be16_load(s + 4) & 0x0080, 0);         /* not enabled yet */
	CHECK_EQ(be16_load(s + 6), 1);                  /* devno = subchannel number */
	CHECK_EQ(s[8], 0x80);                           /* LPM: chpid 0 */
	CHECK_EQ(s[15], 0x80);                          /* path available */
	CHECK_EQ(be16_load(s + 30), 0);                 /* SCSW: idle */
	teardown(t);
}

TEST(msch_sets_what_the_guest_may_and_rejects_the_rest)
{
	struct t *t = setup();
	const uint8_t *s = ram(t, OPND, CSS_SCHIB_LEN);

	CHECK_EQ(modify(t, 0xcafe, 0x0080 | 5 << 11, 0), 0);
	CHECK_EQ(t->dev.enables, 1);
	CHECK_EQ(insn(t, CSS_OP_STSCH, SCH0, OPND), 0);
	CHECK_EQ(be32_load(s), 0xcafe);
	CHECK_EQ(be16_load(s + 4), 0x0080 | 5 << 11 | 0x0001);
	/* Reserved PMCW bits and characteristics: operand exception, and
	 * nothing changes. */
	CHECK_EQ(modify(t, 1, 0x4080, 0), -S390_PGM_OPERAND);
	CHECK_EQ(modify(t, 1, 0x0080, 0x00000008), -S390_PGM_OPERAND);
	CHECK_EQ(t->dev.disables, 0);
	CHECK_EQ(modify(t, 1, 0, 0), 0);
	CHECK_EQ(t->dev.disables, 1);
	teardown(t);
}

TEST(ssch_needs_a_valid_orb_and_an_enabled_idle_subchannel)
{
	struct t *t = setup();

	ccw1(t, PROG, CCW_CMD_NOOP, CCW_FLAG_SLI, 1, DATA);
	CHECK_EQ(start(t, 0x0080, 0, PROG), 3);                 /* disabled */
	CHECK_EQ(modify(t, 0, 0x0080, 0), 0);
	CHECK_EQ(start(t, 0x0084, 0, PROG), -S390_PGM_OPERAND);  /* reserved ctrl bit */
	CHECK_EQ(start(t, 0x0080, 0x40, PROG), -S390_PGM_OPERAND); /* MIDAW */
	CHECK_EQ(start(t, 0x0080, 0x02, PROG), -S390_PGM_OPERAND);
	CHECK_EQ(start(t, 0x0080, 0, 0x80000000u | PROG), -S390_PGM_OPERAND);
	CHECK_EQ(t->irqs, 0);
	CHECK_EQ(start(t, 0x0080, 0, PROG), 0);
	CHECK_EQ(start(t, 0x0080, 0, PROG), 1);                 /* status pending */
	CHECK_EQ(t->irqs, 1);
	teardown(t);
}

TEST(sense_id_program_ends_with_channel_and_device_end)
{
	struct t *t = enabled_setup();
	const uint8_t *d = ram(t, DATA, 8);
	struct status s;

	ccw1(t, PROG, CCW_CMD_SENSE_ID, 0, 8, DATA);
	CHECK_EQ(start(t, 0x0080, 0, PROG), 0);
	CHECK_EQ(t->irqs, 1);
	CHECK_EQ(t->irq_sch, 0);
	CHECK_EQ(t->irq_parm, 0x1234abcd);
	CHECK_EQ(t->irq_isc, 3);
	CHECK_EQ(d[0], 0xff);
	CHECK_EQ(be16_load(d + 1), 0x3832);
	CHECK_EQ(d[3], 2);
	s = test_subchannel(t);
	CHECK_EQ(s.dstat, SCSW_DSTAT_CE | SCSW_DSTAT_DE);
	CHECK_EQ(s.cstat, 0);
	CHECK_EQ(s.residual, 0);
	CHECK_EQ(s.cpa, PROG + 8);
	CHECK(s.ctrl & SCSW_FCTL_START);
	CHECK_EQ(t->dev.calls, 0);              /* the channel answers SENSE ID */
	/* The status was withdrawn: a second TSCH finds none. */
	CHECK_EQ(insn(t, CSS_OP_TSCH, SCH0, OPND + 0x100), 1);
	teardown(t);
}

TEST(chained_commands_reach_the_device_in_order)
{
	struct t *t = enabled_setup();
	struct status s;

	memcpy(ram(t, DATA, 4), "\x11\x22\x33\x44", 4);
	ccw1(t, PROG, 0x01, CCW_FLAG_CC, 4, DATA);
	ccw1(t, PROG + 8, 0x02, CCW_FLAG_SLI, 16, DATA + 0x100);
	CHECK_EQ(start(t, 0x0080, 0, PROG), 0);
	CHECK_EQ(t->dev.calls, 2);
	CHECK_EQ(t->dev.ngot, 4);
	CHECK_EQ(t->dev.got[3], 0x44);
	CHECK_EQ(ram(t, DATA + 0x100, 8)[7], 8);
	s = test_subchannel(t);
	CHECK_EQ(s.dstat, SCSW_DSTAT_CE | SCSW_DSTAT_DE);
	CHECK_EQ(s.residual, 16 - 8);           /* the last CCW's count minus what moved */
	CHECK_EQ(s.cpa, PROG + 16);
	teardown(t);
}

TEST(channel_program_addresses_outside_the_rules_are_program_checks)
{
	struct t *t = enabled_setup();

	ccw1(t, PROG, 0x02, 0, 8, DATA);
	expect_program_check(t, 0x0080, 0);             /* CCW at 0 */
	expect_program_check(t, 0x0080, PROG + 4);      /* not doubleword aligned */
	expect_program_check(t, 0x0080, RAM);           /* outside RAM */
	expect_program_check(t, 0x0000, 0x01000000);    /* format 0: 24-bit addresses */
	ccw1(t, PROG, 0x02, 0, 8, RAM - 4);             /* data runs past RAM */
	expect_program_check(t, 0x0080, PROG);
	ccw1(t, PROG, 0x02, 0, 8, 0x80000000u | DATA);  /* format-1 CDA bit 0 */
	expect_program_check(t, 0x0080, PROG);
	/* A chain running off the end of RAM. */
	ccw1(t, RAM - 8, CCW_CMD_NOOP, CCW_FLAG_CC | CCW_FLAG_SLI, 1, DATA);
	expect_program_check(t, 0x0080, (uint32_t)(RAM - 8));
	teardown(t);
}

TEST(bad_ccw_commands_and_flags_are_program_checks)
{
	struct t *t = enabled_setup();

	ccw1(t, PROG, 0x00, 0, 8, DATA);                /* invalid command code */
	expect_program_check(t, 0x0080, PROG);
	ccw1(t, PROG, 0x02, CCW_FLAG_CD, 8, DATA);      /* data chaining */
	expect_program_check(t, 0x0080, PROG);
	ccw1(t, PROG, 0x02, CCW_FLAG_MIDA, 8, DATA);
	expect_program_check(t, 0x0080, PROG);
	ccw1(t, PROG, 0x02, CCW_FLAG_S, 8, DATA);       /* suspend, not allowed by the ORB */
	expect_program_check(t, 0x0080, PROG);
	/* Format 0 with a count of 0. */
	memcpy(ram(t, PROG, 8), "\x02\x03\x00\x00\x00\x00\x00\x00", 8);
	expect_program_check(t, 0x0000, PROG);
	/* A device that claims more than the CCW's count moved. */
	ccw1(t, PROG, 0x02, 0, 8, DATA);
	t->dev.ret = 9;
	CHECK_EQ(start(t, 0x0080, 0, PROG), 0);
	CHECK_EQ(test_subchannel(t).cstat, SCSW_CSTAT_PROG);
	t->dev.ret = CCW_PROGRAM_CHECK;
	CHECK_EQ(start(t, 0x0080, 0, PROG), 0);
	CHECK_EQ(test_subchannel(t).cstat, SCSW_CSTAT_PROG);
	teardown(t);
}

TEST(tic_chains_cannot_loop_or_tic_to_tic)
{
	struct t *t = enabled_setup();

	ccw1(t, PROG, CCW_CMD_TIC, 0, 0, PROG + 0x100);
	ccw1(t, PROG + 0x100, CCW_CMD_TIC, 0, 0, PROG + 0x200);
	expect_program_check(t, 0x0080, PROG);
	/* Format-1 TIC with command bits beyond the code. */
	ccw1(t, PROG, 0x18, 0, 0, PROG + 0x200);
	expect_program_check(t, 0x0080, PROG);
	/* NOOP, chained, then TIC back to it: a loop the channel cuts off
	 * after CSS_MAX_CCWS commands, with a check, not a hang. */
	ccw1(t, PROG, CCW_CMD_NOOP, CCW_FLAG_CC | CCW_FLAG_SLI, 1, DATA);
	ccw1(t, PROG + 8, CCW_CMD_TIC, 0, 0, PROG);
	expect_program_check(t, 0x0080, PROG);
	/* A TIC forward to a real command works. */
	ccw1(t, PROG, CCW_CMD_TIC, 0, 0, PROG + 0x200);
	ccw1(t, PROG + 0x200, 0x02, CCW_FLAG_SLI, 8, DATA);
	CHECK_EQ(start(t, 0x0080, 0, PROG), 0);
	CHECK_EQ(test_subchannel(t).dstat, SCSW_DSTAT_CE | SCSW_DSTAT_DE);
	CHECK_EQ(t->dev.calls, 1);
	teardown(t);
}

TEST(wrong_length_is_a_check_unless_suppressed)
{
	struct t *t = enabled_setup();
	struct status s;

	ccw1(t, PROG, CCW_CMD_SENSE_ID, 0, 4, DATA);
	expect_program_check(t, 0x0080, PROG);
	ccw1(t, PROG, CCW_CMD_SENSE_ID, CCW_FLAG_SLI, 4, DATA);
	CHECK_EQ(start(t, 0x0080, 0, PROG), 0);
	s = test_subchannel(t);
	CHECK_EQ(s.dstat, SCSW_DSTAT_CE | SCSW_DSTAT_DE);
	CHECK_EQ(s.residual, 0);
	CHECK_EQ(ram(t, DATA, 4)[0], 0xff);
	teardown(t);
}

TEST(device_reject_is_a_unit_check_with_command_reject_sense)
{
	struct t *t = enabled_setup();
	struct status s;
	const uint8_t *sense = ram(t, DATA + 0x200, 32);

	ccw1(t, PROG, 0x02, 0, 8, DATA);
	t->dev.ret = CCW_REJECT;
	CHECK_EQ(start(t, 0x0080, 0, PROG), 0);
	s = test_subchannel(t);
	CHECK_EQ(s.dstat, SCSW_DSTAT_UC);
	CHECK_EQ(s.cstat, 0);
	CHECK(s.ctrl & SCSW_STCTL_ALERT);
	t->dev.ret = 0;
	/* BASIC SENSE hands out the sense bytes once. */
	ccw1(t, PROG, CCW_CMD_BASIC_SENSE, 0, 32, DATA + 0x200);
	CHECK_EQ(start(t, 0x0080, 0, PROG), 0);
	CHECK_EQ(test_subchannel(t).dstat, SCSW_DSTAT_CE | SCSW_DSTAT_DE);
	CHECK_EQ(sense[0], 0x80);
	CHECK_EQ(start(t, 0x0080, 0, PROG), 0);
	test_subchannel(t);
	CHECK_EQ(sense[0], 0);
	teardown(t);
}

TEST(concurrent_sense_comes_with_the_unit_check)
{
	struct t *t = setup();
	struct status s;

	CHECK_EQ(modify(t, 0, 0x0080, 0x00000001), 0);  /* CSENSE */
	ccw1(t, PROG, 0x02, 0, 8, DATA);
	t->dev.ret = CCW_REJECT;
	CHECK_EQ(start(t, 0x0080, 0, PROG), 0);
	s = test_subchannel(t);
	CHECK_EQ(s.dstat, SCSW_DSTAT_UC);
	CHECK(be16_load(s.irb) & 0x0400);               /* ESW format: extended */
	CHECK_EQ(s.irb[16] & 0x01, 0x01);               /* ERW: concurrent sense */
	CHECK_EQ(s.irb[32], 0x80);                      /* command reject */
	teardown(t);
}

TEST(idaw_lists_are_checked_word_by_word)
{
	struct t *t = enabled_setup();
	uint8_t *l = ram(t, IDAWS, 8 * (CCW_MAX_SEGS + 1));
	unsigned i;

	/* Format-2 IDAWs, 4 KiB blocks: 8 bytes from 4 bytes before a block
	 * boundary, then the next block. */
	be64_store(l, DATA + 0x1000 - 4);
	be64_store(l + 8, DATA + 0x3000);
	memcpy(ram(t, DATA + 0x1000 - 4, 4), "\xa1\xa2\xa3\xa4", 4);
	memcpy(ram(t, DATA + 0x3000, 4), "\xb1\xb2\xb3\xb4", 4);
	ccw1(t, PROG, 0x01, CCW_FLAG_IDA, 8, IDAWS);
	CHECK_EQ(start(t, 0x0082, 0, PROG), 0);
	CHECK_EQ(test_subchannel(t).dstat, SCSW_DSTAT_CE | SCSW_DSTAT_DE);
	CHECK_EQ(t->dev.ngot, 8);
	CHECK_EQ(t->dev.got[3], 0xa4);
	CHECK_EQ(t->dev.got[4], 0xb1);
	/* A second IDAW off a block boundary. */
	be64_store(l + 8, DATA + 0x3004);
	expect_program_check(t, 0x0082, PROG);
	/* An IDAW outside RAM, and an IDAW list outside RAM. */
	be64_store(l + 8, RAM);
	expect_program_check(t, 0x0082, PROG);
	be64_store(ram(t, RAM - 8, 8), DATA + 0x1000 - 4);     /* its second word is not */
	ccw1(t, PROG, 0x01, CCW_FLAG_IDA, 8, (uint32_t)(RAM - 8));
	expect_program_check(t, 0x0082, PROG);
	/* A misaligned list. */
	ccw1(t, PROG, 0x01, CCW_FLAG_IDA, 8, IDAWS + 4);
	expect_program_check(t, 0x0082, PROG);
	/* Format-1 (31-bit) IDAWs with bit 0 set. */
	be32_store(l, 0x80000000u | DATA);
	ccw1(t, PROG, 0x01, CCW_FLAG_IDA, 8, IDAWS);
	expect_program_check(t, 0x0080, PROG);
	/* More blocks than a command may have (2 KiB blocks: I2K). */
	for (i = 0; i <= CCW_MAX_SEGS; i++)
		be64_store(l + 8 * i, DATA + 0x800 * i);
	ccw1(t, PROG, 0x01, CCW_FLAG_IDA, 0x800 * CCW_MAX_SEGS, IDAWS);
	CHECK_EQ(start(t, 0x0083, 0, PROG), 0);
	CHECK_EQ(test_subchannel(t).dstat, SCSW_DSTAT_CE | SCSW_DSTAT_DE);
	ccw1(t, PROG, 0x01, CCW_FLAG_IDA, 0x800 * CCW_MAX_SEGS + 1, IDAWS);
	expect_program_check(t, 0x0083, PROG);
	teardown(t);
}

TEST(clear_halt_cancel_resume)
{
	struct t *t = setup();
	struct status s;

	CHECK_EQ(insn(t, CSS_OP_CSCH, SCH0, 0), 3);     /* disabled */
	CHECK_EQ(modify(t, 0, 0x0080, 0), 0);
	CHECK_EQ(insn(t, CSS_OP_XSCH, SCH0, 0), 2);     /* nothing to cancel */
	CHECK_EQ(insn(t, CSS_OP_RSCH, SCH0, 0), 2);     /* nothing suspended */
	CHECK_EQ(insn(t, CSS_OP_HSCH, SCH0, 0), 0);
	CHECK_EQ(t->irqs, 1);
	CHECK_EQ(insn(t, CSS_OP_HSCH, SCH0, 0), 1);     /* its status is pending */
	CHECK_EQ(insn(t, CSS_OP_XSCH, SCH0, 0), 1);
	CHECK_EQ(insn(t, CSS_OP_CSCH, SCH0, 0), 0);     /* clear replaces it */
	CHECK_EQ(t->irqs, 2);
	s = test_subchannel(t);
	CHECK_EQ(s.ctrl, SCSW_FCTL_CLEAR | SCSW_STCTL_PENDING);
	teardown(t);
}

TEST(stcrw_chsc_schm_and_sal)
{
	struct t *t = setup();
	uint8_t *p = ram(t, 0x50000, 4096);

	memset(p, 0xee, 4);
	CHECK_EQ(insn(t, CSS_OP_STCRW, 0, 0x50000), 1);         /* no report */
	CHECK_EQ(be32_load(p), 0);
	CHECK_EQ(insn(t, CSS_OP_STCRW, 0, 0x50002), -S390_PGM_SPECIFICATION);
	/* CHSC: page-aligned block, a sane length; every command "not
	 * supported" in the response after the request. */
	be16_store(p, 16);
	be16_store(p + 2, 0x0010);
	CHECK_EQ(insn(t, CSS_OP_CHSC, 0, 0x50000), 0);
	CHECK_EQ(be16_load(p + 16), 8);
	CHECK_EQ(be16_load(p + 18), CHSC_RC_NOT_SUPPORTED);
	CHECK_EQ(insn(t, CSS_OP_CHSC, 0, 0x50008), -S390_PGM_SPECIFICATION);
	be16_store(p, 12);
	CHECK_EQ(insn(t, CSS_OP_CHSC, 0, 0x50000), -S390_PGM_OPERAND);
	be16_store(p, 4096);
	CHECK_EQ(insn(t, CSS_OP_CHSC, 0, 0x50000), -S390_PGM_OPERAND);
	CHECK_EQ(insn(t, CSS_OP_SCHM, 0x00000002, 0), 0);
	CHECK_EQ(insn(t, CSS_OP_SCHM, 0x00010000, 0), -S390_PGM_OPERAND);
	CHECK_EQ(insn(t, CSS_OP_SAL, 0, 0), 0);
	teardown(t);
}

TEST(notify_raises_unsolicited_status_only_when_enabled_and_idle)
{
	struct t *t = setup();
	struct status s;

	css_notify(&t->c, 0);                   /* disabled: nothing */
	css_notify(&t->c, 7);                   /* no such subchannel */
	CHECK_EQ(t->irqs, 0);
	CHECK_EQ(modify(t, 0x77, 0x0080 | 2 << 11, 0), 0);
	css_notify(&t->c, 0);
	CHECK_EQ(t->irqs, 1);
	CHECK_EQ(t->irq_parm, 0x77);
	CHECK_EQ(t->irq_isc, 2);
	css_notify(&t->c, 0);                   /* already pending */
	CHECK_EQ(t->irqs, 1);
	s = test_subchannel(t);
	CHECK_EQ(s.ctrl, SCSW_STCTL_ALERT | SCSW_STCTL_PENDING);
	teardown(t);
}

/* MSCH on subchannel schno: enabled, ISC 2. */
static void enable_sch(struct t *t, unsigned schno)
{
	uint8_t *s = ram(t, OPND + 0x200, CSS_SCHIB_LEN);

	memset(s, 0, CSS_SCHIB_LEN);
	be16_store(s + 4, 0x0080 | 2 << 11);
	CHECK_EQ(insn(t, CSS_OP_MSCH, css_schid(schno), OPND + 0x200), 0);
}

/* TSCH on subchannel schno: its cc, the SCSW's status control in *ctrl. */
static int tsch_of(struct t *t, unsigned schno, uint16_t *ctrl)
{
	int r = insn(t, CSS_OP_TSCH, css_schid(schno), OPND + 0x300);

	*ctrl = be16_load(ram(t, OPND + 0x300, CSS_IRB_LEN) + 2);
	return r;
}

struct inside {
	struct t *t;
	unsigned irqs_at_notify, irqs_after_notify;
};

static void notify_sch1(void *arg)
{
	struct inside *in = arg;

	in->irqs_at_notify = in->t->irqs;
	css_notify(&in->t->c, 1);
	in->irqs_after_notify = in->t->irqs;
}

TEST(notify_from_inside_a_command_is_served_when_the_instruction_ends)
{
	struct t *t = enabled_setup();
	struct fdev second = { 0 };
	struct inside in = { t, 0, 0 };
	uint16_t ctrl;

	CHECK_EQ(css_attach(&t->c, &fdev_ops, &second, 0x3832, 2), 1);
	enable_sch(t, 1);
	/* A device's command raising another subchannel's attention (and,
	 * below, its own): the lock is not recursive, nothing waits. */
	t->dev.during = notify_sch1;
	t->dev.during_arg = &in;
	ccw1(t, PROG, 0x02, CCW_FLAG_SLI, 8, DATA);
	CHECK_EQ(start(t, 0x0080, 0, PROG), 0);
	CHECK_EQ(in.irqs_after_notify, in.irqs_at_notify);     /* not inside the program */
	CHECK_EQ(t->irqs, 2);                   /* the program's end, then subchannel 1 */
	CHECK_EQ(t->irq_sch, 1);
	CHECK_EQ(tsch_of(t, 1, &ctrl), 0);
	CHECK_EQ(ctrl, SCSW_STCTL_ALERT | SCSW_STCTL_PENDING);
	CHECK_EQ(test_subchannel(t).dstat, SCSW_DSTAT_CE | SCSW_DSTAT_DE);
	CHECK_EQ(t->c.attention, 0);
	/* Its own attention during its program: the program's status is
	 * pending by the time it is served, so it adds nothing. */
	t->dev.during = NULL;
	CHECK_EQ(start(t, 0x0080, 0, PROG), 0);
	css_notify(&t->c, 0);
	CHECK_EQ(t->irqs, 3);
	CHECK_EQ(test_subchannel(t).dstat, SCSW_DSTAT_CE | SCSW_DSTAT_DE);
	CHECK_EQ(t->c.attention, 0);
	teardown(t);
}

/* A command that waits (inside the channel program, lock held) until the
 * test lets it go. */
struct gate {
	int entered, release;           /* eventfds */
};

static void wait_at_gate(void *arg)
{
	struct gate *g = arg;
	eventfd_t v;

	CHECK_EQ(eventfd_write(g->entered, 1), 0);
	CHECK_EQ(eventfd_read(g->release, &v), 0);
}

static void *start_thread(void *arg)
{
	struct t *t = arg;

	CHECK_EQ(start(t, 0x0080, 0, PROG), 0);
	return NULL;
}

TEST(notify_while_another_thread_holds_the_lock_returns_and_is_served)
{
	struct t *t = enabled_setup();
	struct fdev second = { 0 };
	struct gate g = { eventfd(0, 0), eventfd(0, 0) };
	pthread_t th;
	eventfd_t v;
	uint16_t ctrl;

	CHECK(g.entered >= 0 && g.release >= 0);
	CHECK_EQ(css_attach(&t->c, &fdev_ops, &second, 0x3832, 2), 1);
	enable_sch(t, 1);
	t->dev.during = wait_at_gate;
	t->dev.during_arg = &g;
	ccw1(t, PROG, 0x02, CCW_FLAG_SLI, 8, DATA);
	CHECK_EQ(pthread_create(&th, NULL, start_thread, t), 0);
	CHECK_EQ(eventfd_read(g.entered, &v), 0);
	/* What a queue thread does while a vCPU's reset waits for it: it
	 * must come back at once, the interrupt left to the lock's holder. */
	css_notify(&t->c, 1);
	CHECK_EQ(__atomic_load_n(&t->c.attention, __ATOMIC_ACQUIRE), 1ULL << 1);
	CHECK_EQ(eventfd_write(g.release, 1), 0);
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(t->c.attention, 0);
	CHECK_EQ(t->irqs, 2);
	CHECK_EQ(tsch_of(t, 1, &ctrl), 0);
	CHECK_EQ(ctrl, SCSW_STCTL_ALERT | SCSW_STCTL_PENDING);
	close(g.entered);
	close(g.release);
	teardown(t);
}

struct spinner {
	struct t *t;
	bool stop;                      /* atomic */
	unsigned long n;
};

/* Instructions back to back on subchannel 1: the lock taken and let go. */
static void *spin_stsch(void *arg)
{
	struct spinner *s = arg;

	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		CHECK_EQ(css_instruction(&s->t->c, &s->t->vm, CSS_OP_STSCH, css_schid(1),
					 OPND + 0x400, 0), 0);
		s->n++;
	}
	return NULL;
}

TEST(notify_racing_with_instructions_is_never_lost)
{
	struct t *t = enabled_setup();
	struct fdev second = { 0 };
	uint16_t ctrl;

	CHECK_EQ(css_attach(&t->c, &fdev_ops, &second, 0x3832, 2), 1);
	/* Each round: one attention on subchannel 0 while another thread
	 * takes and releases the lock as fast as it can; afterwards the
	 * subchannel must have its unsolicited status, whoever served it. */
	for (unsigned i = 0; i < 2000; i++) {
		struct spinner s = { t, false, 0 };
		pthread_t th;

		CHECK_EQ(pthread_create(&th, NULL, spin_stsch, &s), 0);
		while (!__atomic_load_n(&s.n, __ATOMIC_RELAXED) && i % 2)
			;
		css_notify(&t->c, 0);
		__atomic_store_n(&s.stop, true, __ATOMIC_RELEASE);
		CHECK_EQ(pthread_join(th, NULL), 0);
		CHECK_EQ(t->c.attention, 0);
		CHECK_EQ(tsch_of(t, 0, &ctrl), 0);
		CHECK_EQ(ctrl, SCSW_STCTL_ALERT | SCSW_STCTL_PENDING);
	}
	CHECK_EQ(t->irqs, 2000);
	teardown(t);
}

TEST(attach_stops_at_the_subchannel_limit)
{
	struct t *t = setup();
	unsigned i;

	for (i = 1; i < CSS_MAX_SCH; i++)
		CHECK_EQ(css_attach(&t->c, &fdev_ops, &t->dev, 0x3832, 2), (int)i);
	CHECK_EQ(css_attach(&t->c, &fdev_ops, &t->dev, 0x3832, 2), -ENOSPC);
	teardown(t);
}


/* ---- hot-plug slots and channel reports ---------------------------------- */

/* STSCH of schno: its cc; the PMCW's flags (DNV 0x0001) in *flags. */
static int stsch_of(struct t *t, unsigned schno, uint16_t *flags)
{
	int r = insn(t, CSS_OP_STSCH, css_schid(schno), OPND + 0x400);

	*flags = be16_load(ram(t, OPND + 0x400 + 4, 2));
	return r;
}

/* STCRW: its cc, the word stored in *crw. */
static int stcrw(struct t *t, uint32_t *crw)
{
	int r = insn(t, CSS_OP_STCRW, 0, 0x50000);

	*crw = be32_load(ram(t, 0x50000, 4));
	return r;
}

/* A subchannel report: source "subchannel" (3), "installed parameters
 * initialized" (4), the subchannel's number. */
#define CRW_SCH(n) (0x03040000u | (n))

TEST(an_empty_slot_shows_a_subchannel_without_a_device)
{
	struct t *t = setup();
	struct fdev spare = { 0 };
	uint16_t flags, ctrl;
	uint32_t crw;

	CHECK_EQ(css_attach_slot(&t->c, &fdev_ops, &spare, 0x3832, 2), 1);
	/* Linux's scan goes on past it (cc 0, device number not valid);
	 * past the last slot nothing is there (cc 3). */
	CHECK_EQ(stsch_of(t, 1, &flags), 0);
	CHECK_EQ(flags & 0x0001, 0);
	CHECK_EQ(stsch_of(t, 2, &flags), 3);
	CHECK_EQ(insn(t, CSS_OP_MSCH, css_schid(1), OPND), 3);
	CHECK_EQ(insn(t, CSS_OP_SSCH, css_schid(1), OPND), 3);
	CHECK_EQ(insn(t, CSS_OP_CSCH, css_schid(1), 0), 3);
	CHECK_EQ(tsch_of(t, 1, &ctrl), 3);
	CHECK_EQ(spare.calls + spare.enables + spare.disables, 0);
	CHECK_EQ(stcrw(t, &crw), 1);                    /* nothing reported */
	CHECK_EQ(crw, 0);
	/* The cold-plugged device is no slot. */
	CHECK_EQ(css_slot_set(&t->c, 0, false), -EINVAL);
	CHECK_EQ(css_slot_set(&t->c, 7, true), -EINVAL);
	CHECK(css_slot_free(&t->c, 1));
	CHECK(!css_slot_free(&t->c, 0));
	teardown(t);
}

TEST(a_device_put_in_is_reported_once_and_then_answers)
{
	struct t *t = setup();
	struct fdev spare = { 0 };
	uint16_t flags;
	uint32_t crw;

	CHECK_EQ(css_attach_slot(&t->c, &fdev_ops, &spare, 0x3832, 2), 1);
	CHECK_EQ(css_slot_set(&t->c, 1, true), 1);      /* first report: a machine check */
	CHECK_EQ(css_slot_set(&t->c, 1, true), -EALREADY);
	CHECK(!css_slot_free(&t->c, 1));
	CHECK_EQ(stsch_of(t, 1, &flags), 0);
	CHECK_EQ(flags & 0x0001, 0x0001);
	CHECK_EQ(stcrw(t, &crw), 0);
	CHECK_EQ(crw, CRW_SCH(1));
	CHECK_EQ(stcrw(t, &crw), 1);
	CHECK_EQ(crw, 0);
	/* It is a device now: SENSE ID through the channel, MSCH enables. */
	enable_sch(t, 1);
	CHECK_EQ(spare.disables, 0);
	teardown(t);
}

TEST(a_device_taken_out_is_reset_reported_and_freed_once_the_guest_looked)
{
	struct t *t = setup();
	struct fdev spare = { 0 };
	uint16_t flags, ctrl;
	uint32_t crw;

	CHECK_EQ(css_attach_slot(&t->c, &fdev_ops, &spare, 0x3832, 2), 1);
	CHECK_EQ(css_slot_set(&t->c, 1, true), 1);
	CHECK_EQ(stcrw(t, &crw), 0);
	enable_sch(t, 1);
	css_notify(&t->c, 1);                           /* status pending */
	CHECK_EQ(css_slot_set(&t->c, 1, false), 1);
	CHECK_EQ(spare.disables, 1);                    /* the device reset */
	CHECK_EQ(css_slot_set(&t->c, 1, false), -EALREADY);
	/* Gone: no status left to take, no device number. */
	CHECK_EQ(tsch_of(t, 1, &ctrl), 3);
	CHECK(!css_slot_free(&t->c, 1));                /* the guest has not looked */
	CHECK_EQ(stcrw(t, &crw), 0);
	CHECK_EQ(crw, CRW_SCH(1));
	CHECK(!css_slot_free(&t->c, 1));
	CHECK_EQ(stsch_of(t, 1, &flags), 0);
	CHECK_EQ(flags & 0x0081, 0);                    /* neither valid nor enabled */
	CHECK(css_slot_free(&t->c, 1));
	/* In again: it starts disabled, with nothing pending. */
	CHECK_EQ(css_slot_set(&t->c, 1, true), 1);
	CHECK_EQ(stsch_of(t, 1, &flags), 0);
	CHECK_EQ(flags & 0x0081, 0x0001);
	CHECK_EQ(tsch_of(t, 1, &ctrl), 1);              /* its old status went */
	teardown(t);
}

TEST(reports_are_stored_in_order_and_a_lost_one_is_flagged)
{
	struct t *t = setup();
	struct fdev spare[2] = { { 0 } };
	uint32_t crw;
	unsigned i;

	CHECK_EQ(css_attach_slot(&t->c, &fdev_ops, &spare[0], 0x3832, 2), 1);
	CHECK_EQ(css_attach_slot(&t->c, &fdev_ops, &spare[1], 0x3832, 2), 2);
	CHECK_EQ(css_slot_set(&t->c, 2, true), 1);
	CHECK_EQ(css_slot_set(&t->c, 1, true), 0);      /* pending already: no new check */
	CHECK_EQ(stcrw(t, &crw), 0);
	CHECK_EQ(crw, CRW_SCH(2));
	CHECK_EQ(stcrw(t, &crw), 0);
	CHECK_EQ(crw, CRW_SCH(1));
	CHECK_EQ(stcrw(t, &crw), 1);
	/* More than fit: the last one stored says some were lost (the guest
	 * then looks at every subchannel), and the flag goes with it. */
	for (i = 0; i < CSS_MAX_CRW + 3; i++)
		CHECK_EQ(css_slot_set(&t->c, 1, i % 2 == 1), i == 0);
	for (i = 0; i < CSS_MAX_CRW; i++) {
		CHECK_EQ(stcrw(t, &crw), 0);
		CHECK_EQ(crw, CRW_SCH(1) | (i == CSS_MAX_CRW - 1 ? 0x20000000u : 0));
	}
	CHECK_EQ(stcrw(t, &crw), 1);
	CHECK_EQ(css_slot_set(&t->c, 1, true), 1);
	CHECK_EQ(stcrw(t, &crw), 0);
	CHECK_EQ(crw, CRW_SCH(1));                      /* no overflow left over */
	/* A report the guest cannot take (its operand outside RAM) stays. */
	CHECK_EQ(css_slot_set(&t->c, 1, false), 1);
	CHECK_EQ(insn(t, CSS_OP_STCRW, 0, RAM + 0x100), CSS_INJECTED);
	CHECK_EQ(stcrw(t, &crw), 0);
	CHECK_EQ(crw, CRW_SCH(1));
	teardown(t);
}

/* ---- snapshots -------------------------------------------------------- */

#define T_CSS SNAP_TAG('C', 'S', 'S', ' ')

/* from's state saved into a snapshot file, then loaded into to: what
 * css_load returned (0 only when it also read the section to its end). */
static int css_round_trip(struct css *from, struct css *to)
{
	static char msg[512];
	struct snap_sec sec;
	struct snap_w w;
	struct snap_r r;
	int ret;

	snap_w_init(&w);
	snap_begin(&w, T_CSS, 0);
	css_save(from, &w);
	snap_end(&w);
	sec = snap_sec_open(&w, T_CSS, 0, &r);
	ret = css_load(to, &r, msg, sizeof(msg));
	if (!ret)
		ret = snap_done(&r, msg, sizeof(msg));
	if (ret)
		CHECK(strstr(msg, "snapshot: ") == msg);
	snap_sec_free(&sec);
	return ret;
}

TEST(a_snapshot_carries_each_subchannel_its_pending_status_and_the_reports)
{
	struct t *a = setup(), *b = setup();
	struct fdev spare_a = { 0 }, spare_b = { 0 };
	uint16_t flags, ctrl;
	uint32_t crw;
	const uint8_t *s;

	CHECK_EQ(css_attach_slot(&a->c, &fdev_ops, &spare_a, 0x3832, 2), 1);
	CHECK_EQ(css_attach_slot(&b->c, &fdev_ops, &spare_b, 0x3832, 2), 1);
	CHECK_EQ(modify(a, 0xfeedf00d, 0x0080 | 5 << 11, 0), 0);
	css_notify(&a->c, 0);                           /* status pending */
	CHECK_EQ(css_slot_set(&a->c, 1, true), 1);      /* a report the guest has not stored */
	a->dev.enables = b->dev.enables = 0;
	CHECK_EQ(css_round_trip(&a->c, &b->c), 0);
	/* Nobody told the devices: their own state is restored apart. */
	CHECK_EQ(b->dev.enables + b->dev.disables + spare_b.enables + spare_b.disables, 0);
	CHECK_EQ(b->irqs, 0);
	CHECK_EQ(stsch_of(b, 0, &flags), 0);
	s = ram(b, OPND + 0x400, CSS_SCHIB_LEN);
	CHECK_EQ(be32_load(s), 0xfeedf00d);
	CHECK_EQ(flags, 0x0080 | 5 << 11 | 0x0001);
	CHECK_EQ(be16_load(s + 30) & 0x0001, 0x0001);  /* SCSW: status pending */
	CHECK_EQ(tsch_of(b, 0, &ctrl), 0);
	CHECK_EQ(ctrl, SCSW_STCTL_ALERT | SCSW_STCTL_PENDING);
	CHECK_EQ(tsch_of(b, 0, &ctrl), 1);              /* taken once */
	CHECK(css_slot_present(&b->c, 1));
	CHECK_EQ(stcrw(b, &crw), 0);
	CHECK_EQ(crw, CRW_SCH(1));
	CHECK_EQ(stcrw(b, &crw), 1);
	teardown(a);
	teardown(b);
}

/* An attention a device left and nobody served (its queue thread's
 * notify while the lock was held) is served by the save: the snapshot
 * holds the status, and the I/O interrupt went to KVM, whose floating
 * interrupts are saved after it. A slot whose disk went and the guest
 * has not looked at comes back so: not free for another disk. */
TEST(a_snapshot_serves_an_attention_left_over_and_keeps_a_slot_not_yet_looked_at)
{
	struct t *a = setup(), *b = setup();
	struct fdev spare_a = { 0 }, spare_b = { 0 };
	uint16_t ctrl;

	CHECK_EQ(css_attach_slot(&a->c, &fdev_ops, &spare_a, 0x3832, 2), 1);
	CHECK_EQ(css_attach_slot(&b->c, &fdev_ops, &spare_b, 0x3832, 2), 1);
	CHECK_EQ(modify(a, 0x77, 0x0080 | 2 << 11, 0), 0);
	CHECK_EQ(css_slot_set(&a->c, 1, true), 1);
	CHECK_EQ(css_slot_set(&a->c, 1, false), 0);     /* gone, not looked at */
	__atomic_fetch_or(&a->c.attention, 1ull, __ATOMIC_RELEASE);
	a->irqs = 0;
	CHECK_EQ(css_round_trip(&a->c, &b->c), 0);
	CHECK_EQ(a->irqs, 1);
	CHECK_EQ(a->irq_parm, 0x77);
	CHECK_EQ(a->irq_isc, 2);
	CHECK_EQ(a->c.attention, 0);
	CHECK_EQ(tsch_of(b, 0, &ctrl), 0);
	CHECK_EQ(ctrl, SCSW_STCTL_ALERT | SCSW_STCTL_PENDING);
	CHECK(!css_slot_present(&b->c, 1));
	CHECK(!css_slot_free(&b->c, 1));
	teardown(a);
	teardown(b);
}

TEST(a_snapshot_of_other_subchannels_or_impossible_ones_is_refused_and_changes_nothing)
{
	struct t *a = setup(), *b = setup(), *c = setup();
	struct fdev spare = { 0 };
	uint16_t flags;

	/* Another number of subchannels (b has a slot, a none). */
	CHECK_EQ(css_attach_slot(&b->c, &fdev_ops, &spare, 0x3832, 2), 1);
	CHECK_EQ(css_round_trip(&a->c, &b->c), -EINVAL);
	CHECK_EQ(css_round_trip(&b->c, &a->c), -EINVAL);
	/* Another device there (control unit model 1, not 2). */
	c->c.sch[0].cu_model = 1;
	CHECK_EQ(css_round_trip(&c->c, &a->c), -EINVAL);
	c->c.sch[0].cu_model = 2;
	/* PMCW flags no MSCH takes, and an absent device where no slot is:
	 * a's subchannel stays as it was. */
	CHECK_EQ(modify(a, 7, 0x0080, 0), 0);
	c->c.sch[0].pmcw_flags = 0xc300;
	CHECK_EQ(css_round_trip(&c->c, &a->c), -EINVAL);
	c->c.sch[0].pmcw_flags = 0;
	c->c.sch[0].absent = true;
	CHECK_EQ(css_round_trip(&c->c, &a->c), -EINVAL);
	CHECK_EQ(stsch_of(a, 0, &flags), 0);
	CHECK_EQ(flags, 0x0080 | 0x0001);
	CHECK_EQ(be32_load(ram(a, OPND + 0x400, 4)), 7);
	teardown(a);
	teardown(b);
	teardown(c);
}
