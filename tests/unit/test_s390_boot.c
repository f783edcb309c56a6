/* s390x boot and instruction decoding without KVM: the kernel image and
 * parameter area (arch/s390/boot.c), the channel subsystem's answers to
 * I/O instructions (css.c), and the intercept helpers (intercept.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arch/s390/boot.h"
#include "arch/s390/css.h"
#include "arch/s390/intercept.h"
#include "arch/s390/layout.h"
#include "tests/unit/check.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

static uint8_t *image(size_t len, uint64_t max_cmdline)
{
	uint8_t *k = calloc(1, len);

	CHECK(k);
	memcpy(k + S390_EP_MAGIC_OFF, S390_EP_MAGIC, 6);
	be64_store(k + S390_MAX_CMDLINE_SIZE, max_cmdline);
	k[0] = 0x00; k[1] = 0x08;       /* an IPL PSW, left as it is */
	return k;
}

TEST(image_needs_the_entry_magic)
{
	struct s390_kernel k;
	char err[256];
	uint8_t *img = image(0x20000, 4096);

	CHECK_EQ(s390_kernel_parse(img, 0x20000, &k, err, sizeof(err)), 0);
	CHECK_EQ(k.cmdline_max, 4096);
	CHECK_EQ(s390_kernel_parse(img, 0x10000, &k, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, "too short"));
	img[S390_EP_MAGIC_OFF] = 'X';
	CHECK_EQ(s390_kernel_parse(img, 0x20000, &k, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, "S390EP"));
	free(img);
}

TEST(old_kernels_take_896_bytes_of_command_line)
{
	struct s390_kernel k;
	char err[256];
	uint8_t *img = image(0x20000, 0);

	CHECK_EQ(s390_kernel_parse(img, 0x20000, &k, err, sizeof(err)), 0);
	CHECK_EQ(k.cmdline_max, 896);
	CHECK_EQ(s390_kernel_check(&k, 64 << 20, 895, 0, err, sizeof(err)), 0);
	CHECK_EQ(s390_kernel_check(&k, 64 << 20, 896, 0, err, sizeof(err)), -E2BIG);
	CHECK(strstr(err, "at most 895"));
	free(img);
}

TEST(load_writes_image_parameter_area_and_initrd)
{
	struct guest_mem gm;
	struct s390_kernel k;
	char err[256];
	uint8_t *img = image(3 << 20, 4096), initrd[1000];
	uint64_t entry, at;
	uint8_t *p;

	memset(initrd, 0xab, sizeof(initrd));
	CHECK_EQ(gmem_map(&gm, 64 << 20, 1ULL << 32), 0);
	CHECK_EQ(s390_kernel_parse(img, 3 << 20, &k, err, sizeof(err)), 0);
	CHECK_EQ(s390_boot_load_mem(&gm, 64 << 20, &k, "console=ttysclp0 -- exit 3", initrd,
				    sizeof(initrd), &entry, err, sizeof(err)), 0);
	CHECK_EQ(entry, S390_KERNEL_ENTRY);
	p = gmem_ptr(&gm, 0, 0x20000);
	CHECK(memcmp(p + S390_EP_MAGIC_OFF, "S390EP", 6) == 0);
	CHECK_EQ(p[1], 0x08);
	at = s390_initrd_addr(&k);
	CHECK_EQ(at, 8 << 20);                  /* 3 MiB image: the 8 MiB minimum */
	CHECK_EQ(be64_load(p + S390_INITRD_START), at);
	CHECK_EQ(be64_load(p + S390_INITRD_SIZE), sizeof(initrd));
	CHECK_STR((char *)p + S390_COMMAND_LINE, "console=ttysclp0 -- exit 3");
	CHECK_EQ(*(uint8_t *)gmem_ptr(&gm, at + sizeof(initrd) - 1, 1), 0xab);
	free(img);
	gmem_unmap(&gm);
}

TEST(initrd_after_a_large_image_and_ram_limits)
{
	struct s390_kernel k;
	char err[256];
	uint8_t *img = image((9 << 20) + 5, 4096);

	CHECK_EQ(s390_kernel_parse(img, (9 << 20) + 5, &k, err, sizeof(err)), 0);
	CHECK_EQ(s390_initrd_addr(&k), 10 << 20);
	CHECK_EQ(s390_kernel_check(&k, 16 << 20, 10, 6 << 20, err, sizeof(err)), 0);
	CHECK_EQ(s390_kernel_check(&k, 16 << 20, 10, (6 << 20) + 1, err, sizeof(err)), -EFBIG);
	CHECK(strstr(err, "initrd"));
	CHECK_EQ(s390_kernel_check(&k, 8 << 20, 10, 0, err, sizeof(err)), -EFBIG);
	CHECK(strstr(err, "kernel image"));
	free(img);
}

/* ---- channel subsystem ---- */

/* Identity-mapped logical memory over the test's guest RAM (as with DAT
 * off), or an access that raises an exception past its end. */
#define CRAM (1 << 20)
static struct guest_mem cgm;
static int faults;

static int lread(void *o, uint64_t a, unsigned ar, void *b, uint32_t l)
{
	void *p = gmem_ptr(&cgm, a, l);

	(void)o; (void)ar;
	if (!p) {
		faults++;
		return S390_ACCESS_INJECTED;
	}
	memcpy(b, p, l);
	return 0;
}

static int lwrite(void *o, uint64_t a, unsigned ar, const void *b, uint32_t l)
{
	void *p = gmem_ptr(&cgm, a, l);

	(void)o; (void)ar;
	if (!p) {
		faults++;
		return S390_ACCESS_INJECTED;
	}
	memcpy(p, b, l);
	return 0;
}

static const struct s390_vmem vm = { lread, lwrite, NULL };

static uint8_t *at(uint64_t a)
{
	uint8_t *p = gmem_ptr(&cgm, a, 1);

	CHECK(p);
	return p;
}

/* A test device: command 0x02 (read) answers "hello", 0x01 (write) keeps
 * what it got, 0x11 rejects, 0x21 is a program check. */
struct tdev {
	uint8_t got[64];
	uint32_t ngot;
	unsigned enables, disables;
};

static int tdev_command(void *dev, uint8_t cmd, bool sli, struct ccw_data *d)
{
	struct tdev *t = dev;

	switch (cmd) {
	case 0x02:
		if (!sli && d->count != 5)
			return CCW_PROGRAM_CHECK;
		return (int)ccw_data_write(d, "hello", 5);
	case 0x01:
		t->ngot = ccw_data_read(d, t->got, sizeof(t->got));
		return (int)t->ngot;
	case 0x21:
		return CCW_PROGRAM_CHECK;
	}
	return CCW_REJECT;
}

static void tdev_enable(void *dev, bool on)
{
	struct tdev *t = dev;

	if (on)
		t->enables++;
	else
		t->disables++;
}

static const struct ccw_dev_ops tdev_ops = { tdev_command, tdev_enable };

static unsigned nirq, irq_sch, irq_isc;
static uint32_t irq_parm;

static void on_io(void *o, unsigned schno, uint32_t intparm, unsigned isc)
{
	(void)o;
	nirq++;
	irq_sch = schno;
	irq_parm = intparm;
	irq_isc = isc;
}

static struct css *css_new(struct tdev *t)
{
	static struct css c;

	if (!cgm.nr)
		CHECK_EQ(gmem_map(&cgm, CRAM, 1ULL << 32), 0);
	memset(gmem_ptr(&cgm, 0, CRAM), 0, CRAM);
	CHECK_EQ(css_init(&c, &cgm, on_io, NULL), 0);
	if (t)
		CHECK_EQ(css_attach(&c, &tdev_ops, t, 0x3832, 2), 0);
	nirq = 0;
	faults = 0;
	return &c;
}

/* MSCH with ENA, ISC 3, csense, intparm 0x11223344 (what Linux sets). */
static void enable(struct css *c)
{
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_STSCH, 0x00010000, 0x1000, 0), 0);
	be32_store(at(0x1000), 0x11223344);
	be16_store(at(0x1004), (uint16_t)(be16_load(at(0x1004)) | 0x0080 | (3 << 11)));
	be32_store(at(0x1000 + 24), 1);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_MSCH, 0x00010000, 0x1000, 0), 0);
}

/* Format-1 CCW at a: cmd, flags, count, data address. */
static void ccw1(uint64_t a, uint8_t cmd, uint8_t flags, uint16_t count, uint32_t cda)
{
	at(a)[0] = cmd;
	at(a)[1] = flags;
	be16_store(at(a + 2), count);
	be32_store(at(a + 4), cda);
}

/* SSCH with a format-1, 64-bit-IDAW ORB (as Linux builds it) at 0x2000. */
static int start(struct css *c, uint32_t cpa)
{
	memset(at(0x2000), 0, 12);
	be32_store(at(0x2000), 0xcafe0000);
	be16_store(at(0x2004), 0x0080 | 0x0040 | 0x0002);      /* fmt, pfch, c64 */
	at(0x2006)[0] = 0xff;
	be32_store(at(0x2008), cpa);
	return css_instruction(c, &vm, CSS_OP_SSCH, 0x00010000, 0x2000, 0);
}

/* TSCH into 0x3000: the cc; the IRB stays there. */
static int test_sch(struct css *c)
{
	return css_instruction(c, &vm, CSS_OP_TSCH, 0x00010000, 0x3000, 0);
}

TEST(subchannel_id_word_is_checked)
{
	CHECK(css_schid_valid(0x00010000));
	CHECK(css_schid_valid(0x0001ffff));
	CHECK(!css_schid_valid(0x00000000));            /* "one" bit missing */
	CHECK(!css_schid_valid(0x00030000));            /* subchannel set 1 */
	CHECK(!css_schid_valid(0x80010000));
}

TEST(past_the_devices_is_not_operational_after_operand_checks)
{
	static const unsigned ops[] = { CSS_OP_STSCH, CSS_OP_MSCH, CSS_OP_SSCH, CSS_OP_TSCH,
					CSS_OP_CSCH, CSS_OP_HSCH, CSS_OP_RSCH, CSS_OP_XSCH };
	struct tdev t = { 0 };
	struct css *c = css_new(&t);
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(ops); i++) {
		CHECK_EQ(css_instruction(c, &vm, ops[i], 0x00010001, 0x100, 0), 3);
		CHECK_EQ(css_instruction(c, &vm, ops[i], 0x00000005, 0x100, 0), -S390_PGM_OPERAND);
	}
	/* Operand-address alignment comes first for the block operands. */
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_STSCH, 0x00010000, 0x102, 0), -S390_PGM_SPECIFICATION);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_TSCH, 0x00000005, 0x101, 0), -S390_PGM_SPECIFICATION);
	/* CSCH has no address operand: alignment does not matter (and the
	 * disabled device's subchannel is not operational for it). */
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_CSCH, 0x00010001, 0x101, 0), 3);
	css_fini(c);
}

TEST(stsch_describes_the_device_and_msch_reads_back_equal)
{
	struct tdev t = { 0 };
	struct css *c = css_new(&t);

	CHECK_EQ(css_instruction(c, &vm, CSS_OP_STSCH, 0x00010000, 0x1000, 0), 0);
	CHECK_EQ(be16_load(at(0x1004)) & 0x0001, 1);              /* device number valid */
	CHECK_EQ(be16_load(at(0x1006)), 0);                       /* devno 0.0.0000 */
	CHECK_EQ(at(0x1000)[11], 0x80);                           /* one path */
	CHECK_EQ(be32_load(at(0x1000 + 24)) & 0x00e00000, 0);     /* I/O subchannel */
	enable(c);
	CHECK_EQ(t.enables, 1);
	memset(at(0x1100), 0, 52);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_STSCH, 0x00010000, 0x1100, 0), 0);
	CHECK_EQ(be32_load(at(0x1100)), 0x11223344);
	CHECK_EQ(be16_load(at(0x1104)), 0x0080 | (3 << 11) | 0x0001);
	CHECK_EQ(be32_load(at(0x1100 + 24)), 1);                  /* concurrent sense */
	/* Reserved PMCW bits are an operand exception and change nothing. */
	be16_store(at(0x1104), 0x8080);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_MSCH, 0x00010000, 0x1100, 0), -S390_PGM_OPERAND);
	CHECK_EQ(t.disables, 0);
	css_fini(c);
}

TEST(start_runs_the_program_sense_id_then_device_read)
{
	struct tdev t = { 0 };
	struct css *c = css_new(&t);

	enable(c);
	/* SENSE ID (40 bytes, SLI, chained) then the device's read. */
	ccw1(0x4000, CCW_CMD_SENSE_ID, CCW_FLAG_SLI | CCW_FLAG_CC, 40, 0x5000);
	ccw1(0x4008, 0x02, 0, 5, 0x5100);
	CHECK_EQ(start(c, 0x4000), 0);
	CHECK_EQ(nirq, 1);
	CHECK_EQ(irq_sch, 0);
	CHECK_EQ(irq_parm, 0xcafe0000);                 /* the ORB's intparm */
	CHECK_EQ(irq_isc, 3);
	CHECK_EQ(at(0x5000)[0], 0xff);
	CHECK_EQ(be16_load(at(0x5001)), 0x3832);
	CHECK_EQ(at(0x5003)[0], 2);
	CHECK(memcmp(at(0x5100), "hello", 5) == 0);
	/* A second start while status is pending: cc 1. */
	CHECK_EQ(start(c, 0x4000), 1);
	CHECK_EQ(test_sch(c), 0);
	CHECK_EQ(be16_load(at(0x3002)), SCSW_FCTL_START | SCSW_STCTL_PRIMARY |
		 SCSW_STCTL_SECONDARY | SCSW_STCTL_PENDING);
	CHECK_EQ(be32_load(at(0x3004)), 0x4010);        /* last CCW + 8 */
	CHECK_EQ(at(0x3008)[0], SCSW_DSTAT_CE | SCSW_DSTAT_DE);
	CHECK_EQ(at(0x3009)[0], 0);
	CHECK_EQ(be16_load(at(0x300a)), 0);             /* residual */
	CHECK_EQ(test_sch(c), 1);                       /* nothing pending now */
	css_fini(c);
}

TEST(idaws_gather_a_write_across_blocks)
{
	struct tdev t = { 0 };
	struct css *c = css_new(&t);

	enable(c);
	memcpy(at(0x6ffc), "abcd", 4);                  /* end of one block */
	memcpy(at(0x9000), "efgh", 4);                  /* start of another */
	be64_store(at(0x4100), 0x6ffc);
	be64_store(at(0x4108), 0x9000);
	ccw1(0x4000, 0x01, CCW_FLAG_IDA, 8, 0x4100);
	CHECK_EQ(start(c, 0x4000), 0);
	CHECK_EQ(t.ngot, 8);
	CHECK(memcmp(t.got, "abcdefgh", 8) == 0);
	CHECK_EQ(test_sch(c), 0);
	CHECK_EQ(at(0x3008)[0], SCSW_DSTAT_CE | SCSW_DSTAT_DE);
	/* A second IDAW not on a block boundary is a channel program check. */
	be64_store(at(0x4108), 0x9004);
	CHECK_EQ(start(c, 0x4000), 0);
	CHECK_EQ(test_sch(c), 0);
	CHECK_EQ(at(0x3009)[0], SCSW_CSTAT_PROG);
	css_fini(c);
}

TEST(reject_gives_unit_check_with_concurrent_sense)
{
	struct tdev t = { 0 };
	struct css *c = css_new(&t);

	enable(c);
	ccw1(0x4000, 0x11, 0, 0, 0);
	CHECK_EQ(start(c, 0x4000), 0);
	CHECK_EQ(test_sch(c), 0);
	CHECK_EQ(at(0x3008)[0], SCSW_DSTAT_UC);
	CHECK(be16_load(at(0x3002)) & SCSW_STCTL_ALERT);
	CHECK_EQ(be32_load(at(0x3010)) >> 24, 0x01);     /* ERW: concurrent sense */
	CHECK_EQ(at(0x3020)[0], 0x80);                  /* command reject */
	css_fini(c);
}

TEST(bad_programs_are_channel_program_checks_never_device_calls)
{
	struct tdev t = { 0 };
	struct css *c = css_new(&t);

	enable(c);
	/* Data outside RAM. */
	ccw1(0x4000, 0x01, 0, 16, CRAM - 8);
	CHECK_EQ(start(c, 0x4000), 0);
	CHECK_EQ(test_sch(c), 0);
	CHECK_EQ(at(0x3009)[0], SCSW_CSTAT_PROG);
	CHECK_EQ(t.ngot, 0);
	/* A TIC loop. */
	ccw1(0x4000, CCW_CMD_TIC, 0, 0, 0x4008);
	ccw1(0x4008, CCW_CMD_TIC, 0, 0, 0x4000);
	CHECK_EQ(start(c, 0x4000), 0);
	CHECK_EQ(test_sch(c), 0);
	CHECK_EQ(at(0x3009)[0], SCSW_CSTAT_PROG);
	/* A chain that never ends: NOOPs chained back by TIC. */
	ccw1(0x4000, CCW_CMD_NOOP, CCW_FLAG_CC | CCW_FLAG_SLI, 0, 0);
	ccw1(0x4008, CCW_CMD_TIC, 0, 0, 0x4000);
	CHECK_EQ(start(c, 0x4000), 0);
	CHECK_EQ(test_sch(c), 0);
	CHECK_EQ(at(0x3009)[0], SCSW_CSTAT_PROG);
	/* Misaligned channel program, invalid command code, data chaining. */
	CHECK_EQ(start(c, 0x4004), 0);
	CHECK_EQ(test_sch(c), 0);
	CHECK_EQ(at(0x3009)[0], SCSW_CSTAT_PROG);
	ccw1(0x4000, 0x10, 0, 0, 0);
	CHECK_EQ(start(c, 0x4000), 0);
	CHECK_EQ(test_sch(c), 0);
	CHECK_EQ(at(0x3009)[0], SCSW_CSTAT_PROG);
	ccw1(0x4000, 0x01, CCW_FLAG_CD, 4, 0x5000);
	CHECK_EQ(start(c, 0x4000), 0);
	CHECK_EQ(test_sch(c), 0);
	CHECK_EQ(at(0x3009)[0], SCSW_CSTAT_PROG);
	CHECK_EQ(t.ngot, 0);
	/* The device's own program check. */
	ccw1(0x4000, 0x21, 0, 0, 0);
	CHECK_EQ(start(c, 0x4000), 0);
	CHECK_EQ(test_sch(c), 0);
	CHECK_EQ(at(0x3009)[0], SCSW_CSTAT_PROG);
	/* A bad ORB: reserved bit. */
	be16_store(at(0x2004), 0x0084);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_SSCH, 0x00010000, 0x2000, 0), -S390_PGM_OPERAND);
	css_fini(c);
}

TEST(disabled_subchannel_does_not_start_and_notify_needs_enable)
{
	struct tdev t = { 0 };
	struct css *c = css_new(&t);

	ccw1(0x4000, CCW_CMD_NOOP, CCW_FLAG_SLI, 0, 0);
	CHECK_EQ(start(c, 0x4000), 3);
	css_notify(c, 0);
	CHECK_EQ(nirq, 0);
	enable(c);
	css_notify(c, 0);
	CHECK_EQ(nirq, 1);
	css_notify(c, 0);                       /* already pending: once */
	CHECK_EQ(nirq, 1);
	CHECK_EQ(test_sch(c), 0);
	CHECK_EQ(be16_load(at(0x3002)), SCSW_STCTL_ALERT | SCSW_STCTL_PENDING);
	CHECK_EQ(irq_parm, 0x11223344);         /* the PMCW's intparm */
	css_fini(c);
}

TEST(clear_and_halt_make_status_pending)
{
	struct tdev t = { 0 };
	struct css *c = css_new(&t);

	enable(c);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_HSCH, 0x00010000, 0, 0), 0);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_HSCH, 0x00010000, 0, 0), 1);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_CSCH, 0x00010000, 0, 0), 0);
	CHECK_EQ(nirq, 2);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_XSCH, 0x00010000, 0, 0), 1);
	CHECK_EQ(test_sch(c), 0);
	CHECK_EQ(be16_load(at(0x3002)), SCSW_FCTL_CLEAR | SCSW_STCTL_PENDING);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_RSCH, 0x00010000, 0, 0), 2);
	css_fini(c);
}

TEST(stcrw_stores_zeros_with_cc1)
{
	struct css *c = css_new(NULL);

	memset(at(0x200), 0xff, 4);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_STCRW, 0, 0x200, 0), 1);
	CHECK_EQ(be32_load(at(0x200)), 0);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_STCRW, 0, 0x202, 0), -S390_PGM_SPECIFICATION);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_STCRW, 0, CRAM + 0x100, 0), CSS_INJECTED);
	CHECK_EQ(faults, 1);
	css_fini(c);
}

TEST(chsc_answers_not_supported_after_its_checks)
{
	struct css *c = css_new(NULL);

	be16_store(at(0x1000), 16);             /* request length */
	be16_store(at(0x1002), 0x0010);         /* store CSS characteristics */
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_CHSC, 0, 0x1000, 0), 0);
	CHECK_EQ(be16_load(at(0x1010)), 8);
	CHECK_EQ(be16_load(at(0x1012)), CHSC_RC_NOT_SUPPORTED);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_CHSC, 0, 0x1008, 0), -S390_PGM_SPECIFICATION);
	be16_store(at(0x1000), 12);             /* too short */
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_CHSC, 0, 0x1000, 0), -S390_PGM_OPERAND);
	be16_store(at(0x1000), 4092);           /* no room for the response */
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_CHSC, 0, 0x1000, 0), -S390_PGM_OPERAND);
	css_fini(c);
}

TEST(schm_sal_and_unknown_ops)
{
	struct css *c = css_new(NULL);

	CHECK_EQ(css_instruction(c, &vm, CSS_OP_SCHM, 0x2, 0, 0), 0);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_SCHM, 0x100, 0, 0), -S390_PGM_OPERAND);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_SAL, 0, 0, 0), 0);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_RCHP, 0, 0, 0), -S390_PGM_OPERATION);
	CHECK_EQ(css_instruction(c, &vm, CSS_OP_TPI, 0, 0, 0), -S390_PGM_OPERATION);
	css_fini(c);
}

/* ---- intercept helpers ---- */

TEST(operand_address_and_addressing_modes)
{
	/* ipb 0x5123xxxx: B2 = 5, D2 = 0x123 */
	CHECK_EQ(s390_ipb_b2(0x51230000), 5);
	CHECK_EQ(s390_ipb_addr(0x1000, 0x51230000, S390_PSW_MASK_EA | S390_PSW_MASK_BA), 0x1123);
	CHECK_EQ(s390_ipb_addr(0xffffffffffffff00ULL, 0x51230000,
			       S390_PSW_MASK_EA | S390_PSW_MASK_BA), 0x23);    /* 64-bit wrap */
	CHECK_EQ(s390_ipb_addr(0x80000000ULL, 0x51230000, S390_PSW_MASK_BA), 0x123); /* 31-bit */
	CHECK_EQ(s390_ipb_addr(0x01000000ULL, 0x51230000, 0), 0x123);               /* 24-bit */
	CHECK_EQ(s390_rre_r1(0x00450000), 4);
	CHECK_EQ(s390_rre_r2(0x00450000), 5);
	CHECK_EQ(s390_rs_r1(0x8324), 2);
	CHECK_EQ(s390_rs_r3(0x8324), 4);
}

TEST(condition_code_and_disabled_wait)
{
	uint64_t m = 0x0705000180000000ULL;

	CHECK_EQ((s390_psw_set_cc(m, 3) >> 44) & 3, 3);
	CHECK_EQ(s390_psw_set_cc(s390_psw_set_cc(m, 3), 1) & ~(3ULL << 44), m & ~(3ULL << 44));
	CHECK_EQ((s390_psw_set_cc(m, 1) >> 44) & 3, 1);
	CHECK(s390_psw_disabled_wait(0x0002000180000000ULL));       /* Linux's disabled_wait() */
	CHECK(!s390_psw_disabled_wait(0x0302000180000000ULL));      /* I/O and ext enabled */
	CHECK(!s390_psw_disabled_wait(0x0000000180000000ULL));      /* not waiting */
}
