/* An s390x vCPU in a guest core dump (arch/s390/coredump.c), from its
 * kvm_run's synchronized registers: NT_PRSTATUS with the PSW, GPRs and
 * access registers where Linux's s390 struct elf_prstatus puts them, the
 * FPRs (the vectors' left halves with the vector facility), and Linux's
 * NT_S390_* notes, all big-endian. No KVM. */
#include "tests/unit/check.h"
#include "arch/s390/s390.h"
#include "vmm/base/byteorder.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

/* The note of `type` in buf[0, len): its desc, its size in *dlen. */
static const uint8_t *find(const uint8_t *buf, size_t len, const char *name, uint32_t type,
			   uint32_t *dlen)
{
	size_t at = 0;

	while (at + 12 <= len) {
		uint32_t namesz = be32_load(buf + at), descsz = be32_load(buf + at + 4);
		const uint8_t *desc = buf + at + 12 + ((namesz + 3) & ~3u);

		if (be32_load(buf + at + 8) == type && !strcmp((const char *)buf + at + 12, name)) {
			*dlen = descsz;
			return desc;
		}
		at += 12 + ((namesz + 3) & ~3u) + ((descsz + 3) & ~3u);
	}
	return NULL;
}

static struct kvm_run *run_with_registers(bool vx)
{
	struct kvm_run *run = calloc(1, sizeof(*run));
	unsigned i;

	CHECK(run);
	run->psw_mask = 0x0704c00180000000ull;
	run->psw_addr = 0x1234560;
	for (i = 0; i < 16; i++) {
		run->s.regs.gprs[i] = 0x100 + i;
		run->s.regs.acrs[i] = 0x200 + i;
		run->s.regs.crs[i] = 0x300 + i;
	}
	run->s.regs.prefix = 0x7fe000;
	run->s.regs.cputm = 0xc0ffee;
	run->s.regs.ckc = 0xdecade;
	run->s.regs.todpr = 0x5;
	run->s.regs.fpc = 0x8;
	run->kvm_valid_regs = vx ? KVM_SYNC_VRS : KVM_SYNC_FPRS;
	if (vx)
		for (i = 0; i < 32; i++) {
			run->s.regs.vrs[i][0] = 0xa000 + i;
			run->s.regs.vrs[i][1] = 0xb000 + i;
		}
	else
		for (i = 0; i < 16; i++)
			run->s.regs.fprs[i] = 0xf00 + i;
	return run;
}

TEST(the_notes_hold_the_psw_and_registers_where_linux_s390_cores_do)
{
	struct kvm_run *run = run_with_registers(false);
	uint8_t buf[2048];
	const uint8_t *d;
	uint32_t dl;
	size_t n;

	n = s390_coredump_notes(buf, sizeof(buf), 1, run);
	CHECK(n > 0);
	d = find(buf, n, "CORE", NT_PRSTATUS, &dl);
	CHECK(d && dl == 336);
	CHECK_EQ(be32_load(d + 32), 2);                         /* pr_pid: vCPU 1, from 1 */
	CHECK_EQ(be64_load(d + 112), 0x0704c00180000000ull);    /* PSW mask */
	CHECK_EQ(be64_load(d + 120), 0x1234560);                /* PSW address */
	CHECK_EQ(be64_load(d + 128), 0x100);                    /* gpr 0 */
	CHECK_EQ(be64_load(d + 128 + 15 * 8), 0x10f);           /* gpr 15 */
	CHECK_EQ(be32_load(d + 256), 0x200);                    /* acr 0 */
	CHECK_EQ(be32_load(d + 256 + 15 * 4), 0x20f);
	CHECK_EQ(be64_load(d + 320), 0x102);                    /* orig_gpr2 */
	d = find(buf, n, "CORE", NT_FPREGSET, &dl);
	CHECK(d && dl == 136);
	CHECK_EQ(be32_load(d), 0x8);                            /* fpc */
	CHECK_EQ(be64_load(d + 8), 0xf00);
	CHECK_EQ(be64_load(d + 8 + 15 * 8), 0xf0f);
	d = find(buf, n, "LINUX", NT_S390_TIMER, &dl);
	CHECK(d && dl == 8 && be64_load(d) == 0xc0ffee);
	d = find(buf, n, "LINUX", NT_S390_TODCMP, &dl);
	CHECK(d && dl == 8 && be64_load(d) == 0xdecade);
	d = find(buf, n, "LINUX", NT_S390_TODPREG, &dl);
	CHECK(d && dl == 4 && be32_load(d) == 5);
	d = find(buf, n, "LINUX", NT_S390_CTRS, &dl);
	CHECK(d && dl == 128 && be64_load(d + 14 * 8) == 0x30e);
	d = find(buf, n, "LINUX", NT_S390_PREFIX, &dl);
	CHECK(d && dl == 4 && be32_load(d) == 0x7fe000);
	/* No vector facility: no vector notes. */
	CHECK(!find(buf, n, "LINUX", NT_S390_VXRS_LOW, &dl));
	CHECK_EQ(s390_coredump_notes(buf, 400, 1, run), 0);
	free(run);
}

TEST(with_the_vector_facility_the_fprs_are_the_vectors_left_halves)
{
	struct kvm_run *run = run_with_registers(true);
	uint8_t buf[2048];
	const uint8_t *d;
	uint32_t dl;
	size_t n;

	n = s390_coredump_notes(buf, sizeof(buf), 0, run);
	CHECK(n > 0 && n <= 2048);
	d = find(buf, n, "CORE", NT_FPREGSET, &dl);
	CHECK(d && be64_load(d + 8 + 3 * 8) == 0xa003);
	d = find(buf, n, "LINUX", NT_S390_VXRS_LOW, &dl);
	CHECK(d && dl == 128 && be64_load(d + 3 * 8) == 0xb003);   /* right half of v3 */
	d = find(buf, n, "LINUX", NT_S390_VXRS_HIGH, &dl);
	CHECK(d && dl == 256);
	CHECK_EQ(be64_load(d), 0xa010);                              /* v16 */
	CHECK_EQ(be64_load(d + 8), 0xb010);
	CHECK_EQ(be64_load(d + 15 * 16 + 8), 0xb01f);                /* v31 */
	free(run);
}
