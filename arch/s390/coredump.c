/* An s390x vCPU in a guest core dump (vmm/base/elfcore.h, mvm_coredump):
 * the notes Linux's s390 core files and QEMU's dump-guest-memory hold per
 * CPU, big-endian: NT_PRSTATUS (the PSW, general and access registers),
 * NT_FPREGSET, and Linux's NT_S390_* notes for the CPU timer, clock
 * comparator, TOD programmable register, control registers, prefix and,
 * with the vector facility, the vector registers. All of it is in the
 * vCPU's kvm_run (its synchronized registers), which KVM filled at the
 * vCPU's last exit: the VM is paused, so no KVM_RUN changes it meanwhile. */
#include "arch/arch.h"
#include "arch/s390/s390.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/elfcore.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vcpu.h"

#include <elf.h>
#include <errno.h>
#include <string.h>

const struct arch_coredump arch_coredump = { .machine = EM_S390, .big_endian = true };

/* struct elf_prstatus of s390x Linux: pr_pid at 32, pr_reg (s390_regs:
 * PSW mask and address, 16 GPRs, 16 access registers, orig_gpr2) at 112;
 * 336 bytes. */
#define PRSTATUS_SIZE  336
#define PRSTATUS_PID   32
#define PRSTATUS_REG   112
#define FPREGS_SIZE    (8 + 16 * 8)    /* fpc, pad, 16 FPRs */

/* Appends one note to buf at *at; false where it does not fit. */
static bool note(uint8_t *buf, size_t cap, size_t *at, const char *name, uint32_t type,
		 const void *desc, size_t len)
{
	size_t n = elfcore_note(buf + *at, cap - *at, true, name, type, desc, len);

	*at += n;
	return n != 0;
}

size_t s390_coredump_notes(uint8_t *buf, size_t cap, unsigned id, const struct kvm_run *run)
{
	const struct kvm_sync_regs *s = &run->s.regs;
	bool vx = run->kvm_valid_regs & KVM_SYNC_VRS;
	uint8_t pr[PRSTATUS_SIZE] = { 0 }, fp[FPREGS_SIZE] = { 0 }, crs[16 * 8];
	uint8_t vlow[16 * 8], vhigh[16 * 16], u64[8], u32[4], *p;
	size_t at = 0;
	unsigned i;

	be32_store(pr + PRSTATUS_PID, id + 1);
	p = pr + PRSTATUS_REG;
	be64_store(p, run->psw_mask);
	be64_store(p + 8, run->psw_addr);
	for (i = 0; i < 16; i++)
		be64_store(p + 16 + 8 * i, s->gprs[i]);
	for (i = 0; i < 16; i++)
		be32_store(p + 144 + 4 * i, s->acrs[i]);
	be64_store(p + 208, s->gprs[2]);        /* orig_gpr2 */
	/* With the vector facility, FPR i is the left half of vector i. */
	be32_store(fp, s->fpc);
	for (i = 0; i < 16; i++)
		be64_store(fp + 8 + 8 * i, vx ? s->vrs[i][0] : s->fprs[i]);
	for (i = 0; i < 16; i++)
		be64_store(crs + 8 * i, s->crs[i]);
	if (!note(buf, cap, &at, "CORE", NT_PRSTATUS, pr, sizeof(pr)) ||
	    !note(buf, cap, &at, "CORE", NT_FPREGSET, fp, sizeof(fp)))
		return 0;
	be64_store(u64, s->cputm);
	if (!note(buf, cap, &at, "LINUX", NT_S390_TIMER, u64, 8))
		return 0;
	be64_store(u64, s->ckc);
	if (!note(buf, cap, &at, "LINUX", NT_S390_TODCMP, u64, 8))
		return 0;
	be32_store(u32, (uint32_t)s->todpr);
	if (!note(buf, cap, &at, "LINUX", NT_S390_TODPREG, u32, 4) ||
	    !note(buf, cap, &at, "LINUX", NT_S390_CTRS, crs, sizeof(crs)))
		return 0;
	be32_store(u32, (uint32_t)s->prefix);
	if (!note(buf, cap, &at, "LINUX", NT_S390_PREFIX, u32, 4))
		return 0;
	if (!vx)
		return at;
	for (i = 0; i < 16; i++) {
		be64_store(vlow + 8 * i, s->vrs[i][1]);
		be64_store(vhigh + 16 * i, s->vrs[16 + i][0]);
		be64_store(vhigh + 16 * i + 8, s->vrs[16 + i][1]);
	}
	if (!note(buf, cap, &at, "LINUX", NT_S390_VXRS_LOW, vlow, sizeof(vlow)) ||
	    !note(buf, cap, &at, "LINUX", NT_S390_VXRS_HIGH, vhigh, sizeof(vhigh)))
		return 0;
	return at;
}

int arch_vcpu_coredump_notes(struct vcpu *v, uint8_t *buf, size_t cap, char *err,
			     size_t errlen)
{
	size_t n = s390_coredump_notes(buf, cap, v->id, v->run);

	if (!n)
		return err_set(err, errlen, -ENOSPC, "vCPU %u: its notes take more than %zu bytes",
			       v->id, cap);
	return (int)n;
}
