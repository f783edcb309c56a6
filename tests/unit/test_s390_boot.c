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
#include "vmm/byteorder.h"
#include "vmm/util.h"

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

/* Identity-mapped logical memory over a small buffer, or an access that
 * raises an exception. */
static uint8_t lmem[8192];
static int faults;

static int lread(void *o, uint64_t a, unsigned ar, void *b, uint32_t l)
{
	(void)o; (void)ar;
	if (a + l > sizeof(lmem)) {
		faults++;
		return S390_ACCESS_INJECTED;
	}
	memcpy(b, lmem + a, l);
	return 0;
}

static int lwrite(void *o, uint64_t a, unsigned ar, const void *b, uint32_t l)
{
	(void)o; (void)ar;
	if (a + l > sizeof(lmem)) {
		faults++;
		return S390_ACCESS_INJECTED;
	}
	memcpy(lmem + a, b, l);
	return 0;
}

static const struct s390_vmem vm = { lread, lwrite, NULL };

TEST(subchannel_id_word_is_checked)
{
	CHECK(css_schid_valid(0x00010000));
	CHECK(css_schid_valid(0x0001ffff));
	CHECK(!css_schid_valid(0x00000000));            /* "one" bit missing */
	CHECK(!css_schid_valid(0x00030000));            /* subchannel set 1 */
	CHECK(!css_schid_valid(0x80010000));
}

TEST(no_device_means_not_operational_after_operand_checks)
{
	static const unsigned ops[] = { CSS_OP_STSCH, CSS_OP_MSCH, CSS_OP_SSCH, CSS_OP_TSCH,
					CSS_OP_CSCH, CSS_OP_HSCH, CSS_OP_RSCH, CSS_OP_XSCH };
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(ops); i++) {
		CHECK_EQ(css_instruction(&vm, ops[i], 0x00010000, 0x100, 0), 3);
		CHECK_EQ(css_instruction(&vm, ops[i], 0x00000005, 0x100, 0), -S390_PGM_OPERAND);
	}
	/* Operand-address alignment comes first for the block operands. */
	CHECK_EQ(css_instruction(&vm, CSS_OP_STSCH, 0x00010000, 0x102, 0), -S390_PGM_SPECIFICATION);
	CHECK_EQ(css_instruction(&vm, CSS_OP_TSCH, 0x00000005, 0x101, 0), -S390_PGM_SPECIFICATION);
	/* CSCH has no address operand: alignment does not matter. */
	CHECK_EQ(css_instruction(&vm, CSS_OP_CSCH, 0x00010000, 0x101, 0), 3);
}

TEST(stcrw_stores_zeros_with_cc1)
{
	memset(lmem, 0xff, sizeof(lmem));
	CHECK_EQ(css_instruction(&vm, CSS_OP_STCRW, 0, 0x200, 0), 1);
	CHECK_EQ(be32_load(lmem + 0x200), 0);
	CHECK_EQ(css_instruction(&vm, CSS_OP_STCRW, 0, 0x202, 0), -S390_PGM_SPECIFICATION);
	faults = 0;
	CHECK_EQ(css_instruction(&vm, CSS_OP_STCRW, 0, 0x10000, 0), CSS_INJECTED);
	CHECK_EQ(faults, 1);
}

TEST(chsc_answers_not_supported_after_its_checks)
{
	memset(lmem, 0, sizeof(lmem));
	be16_store(lmem + 0x1000, 16);          /* request length */
	be16_store(lmem + 0x1002, 0x0010);      /* store CSS characteristics */
	CHECK_EQ(css_instruction(&vm, CSS_OP_CHSC, 0, 0x1000, 0), 0);
	CHECK_EQ(be16_load(lmem + 0x1010), 8);
	CHECK_EQ(be16_load(lmem + 0x1012), CHSC_RC_NOT_SUPPORTED);
	CHECK_EQ(css_instruction(&vm, CSS_OP_CHSC, 0, 0x1008, 0), -S390_PGM_SPECIFICATION);
	be16_store(lmem + 0x1000, 12);          /* too short */
	CHECK_EQ(css_instruction(&vm, CSS_OP_CHSC, 0, 0x1000, 0), -S390_PGM_OPERAND);
	be16_store(lmem + 0x1000, 4092);        /* no room for the response */
	CHECK_EQ(css_instruction(&vm, CSS_OP_CHSC, 0, 0x1000, 0), -S390_PGM_OPERAND);
}

TEST(schm_sal_and_unknown_ops)
{
	CHECK_EQ(css_instruction(&vm, CSS_OP_SCHM, 0x2, 0, 0), 0);
	CHECK_EQ(css_instruction(&vm, CSS_OP_SCHM, 0x100, 0, 0), -S390_PGM_OPERAND);
	CHECK_EQ(css_instruction(&vm, CSS_OP_SAL, 0, 0, 0), 0);
	CHECK_EQ(css_instruction(&vm, CSS_OP_RCHP, 0, 0, 0), -S390_PGM_OPERATION);
	CHECK_EQ(css_instruction(&vm, CSS_OP_TPI, 0, 0, 0), -S390_PGM_OPERATION);
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
