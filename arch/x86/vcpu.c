/* Architectural state of each vCPU before it first runs: CPUID, MSRs,
 * LAPIC LINT pins, FPU, and for the BSP the registers for the kernel entry.
 * The state is computed by pure functions (unit-tested) and applied here
 * with the vCPU ioctls (Documentation/virt/kvm/api.rst). */
#include "arch/x86/x86.h"
#include "arch/x86/layout.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#define MSR_IA32_TSC            0x00000010
#define MSR_IA32_SYSENTER_CS    0x00000174
#define MSR_IA32_SYSENTER_ESP   0x00000175
#define MSR_IA32_SYSENTER_EIP   0x00000176
#define MSR_IA32_MISC_ENABLE    0x000001a0
#define MSR_MTRR_DEF_TYPE       0x000002ff
#define MSR_STAR                0xc0000081
#define MSR_LSTAR               0xc0000082
#define MSR_CSTAR               0xc0000083
#define MSR_SYSCALL_MASK        0xc0000084
#define MSR_KERNEL_GS_BASE      0xc0000102

#define MISC_ENABLE_FAST_STRING 1ULL
#define MTRR_DEF_ENABLE         (1ULL << 11)
#define MTRR_TYPE_WB            6ULL

#define CR0_PE  (1ULL << 0)
#define CR0_ET  (1ULL << 4)
#define CR0_PG  (1ULL << 31)
#define CR4_PAE (1ULL << 5)
#define EFER_LME (1ULL << 8)
#define EFER_LMA (1ULL << 10)

#define APIC_LVT_LINT0 0x350
#define APIC_LVT_LINT1 0x360
#define APIC_DM_MASK   (7u << 8)
#define APIC_DM_NMI    (4u << 8)
#define APIC_DM_EXTINT (7u << 8)

unsigned x86_msrs_init(struct kvm_msr_entry *e, unsigned max)
{
	static const struct { uint32_t index; uint64_t data; } msrs[] = {
		{ MSR_IA32_MISC_ENABLE, MISC_ENABLE_FAST_STRING },
		/* Default memory type write-back: with no variable MTRRs,
		 * everything else would be uncached (SDM 11.11.2.1). */
		{ MSR_MTRR_DEF_TYPE, MTRR_DEF_ENABLE | MTRR_TYPE_WB },
		{ MSR_IA32_TSC, 0 },
		{ MSR_IA32_SYSENTER_CS, 0 },
		{ MSR_IA32_SYSENTER_ESP, 0 },
		{ MSR_IA32_SYSENTER_EIP, 0 },
		{ MSR_STAR, 0 },
		{ MSR_LSTAR, 0 },
		{ MSR_CSTAR, 0 },
		{ MSR_SYSCALL_MASK, 0 },
		{ MSR_KERNEL_GS_BASE, 0 },
	};
	unsigned i, n = MIN((unsigned)ARRAY_SIZE(msrs), max);

	for (i = 0; i < n; i++) {
		memset(&e[i], 0, sizeof(e[i]));
		e[i].index = msrs[i].index;
		e[i].data = msrs[i].data;
	}
	return n;
}

static void lint_set(struct kvm_lapic_state *lapic, unsigned off, uint32_t mode)
{
	uint32_t v = le32_load(lapic->regs + off);

	le32_store(lapic->regs + off, (v & ~APIC_DM_MASK) | mode);
}

void x86_lapic_set_lints(struct kvm_lapic_state *lapic)
{
	/* Virtual wire: the 8259 PIC reaches the BSP through LINT0, NMIs
	 * through LINT1 (MP spec 3.6.2.2); the MP table says the same. */
	lint_set(lapic, APIC_LVT_LINT0, APIC_DM_EXTINT);
	lint_set(lapic, APIC_LVT_LINT1, APIC_DM_NMI);
}

void x86_fpu_init(struct kvm_fpu *fpu)
{
	memset(fpu, 0, sizeof(*fpu));
	fpu->fcw = 0x37f;       /* FNINIT state: all exceptions masked */
	fpu->mxcsr = 0x1f80;    /* SSE exceptions masked, round to nearest */
}

static void seg(struct kvm_segment *s, uint16_t sel, uint8_t type, bool code64, bool db)
{
	memset(s, 0, sizeof(*s));
	s->base = 0;
	s->limit = 0xffffffff;
	s->selector = sel;
	s->type = type;
	s->present = 1;
	s->dpl = 0;
	s->db = db;
	s->s = sel != X86_SEL_TSS;
	s->l = code64;
	s->g = 1;
}

void x86_bsp_regs(const struct x86_boot_info *info, struct kvm_regs *regs,
		  struct kvm_sregs *sregs)
{
	struct kvm_segment data;

	memset(regs, 0, sizeof(*regs));
	regs->rflags = 0x2;     /* reserved bit 1; interrupts off */
	regs->rip = info->entry;
	regs->rsp = X86_BOOT_STACK;
	regs->rbp = X86_BOOT_STACK;

	seg(&data, X86_SEL_DATA, 0x3, false, true);
	sregs->ds = sregs->es = sregs->fs = sregs->gs = sregs->ss = data;
	seg(&sregs->tr, X86_SEL_TSS, 0xb, false, false);
	sregs->gdt.base = X86_GDT_ADDR;
	sregs->gdt.limit = X86_GDT_ENTRIES * 8 - 1;
	sregs->idt.base = 0;
	sregs->idt.limit = 0;   /* no IDT: the kernel sets its own before sti */

	if (info->pvh) {
		/* PVH entry: 32-bit protected mode, paging off, flat
		 * segments, EBX = hvm_start_info (start_info.h). */
		seg(&sregs->cs, X86_SEL_CODE32, 0xb, false, true);
		sregs->cr0 = CR0_PE | CR0_ET;
		sregs->cr3 = 0;
		sregs->cr4 = 0;
		sregs->efer = 0;
		regs->rbx = info->params;
	} else {
		/* 64-bit boot protocol: long mode, identity-mapped paging,
		 * __BOOT_CS/__BOOT_DS, RSI = zero page (boot.rst). */
		seg(&sregs->cs, X86_SEL_CODE64, 0xb, true, false);
		sregs->cr0 = CR0_PE | CR0_ET | CR0_PG;
		sregs->cr3 = X86_PML4_ADDR;
		sregs->cr4 = CR4_PAE;
		sregs->efer = EFER_LME | EFER_LMA;
		regs->rsi = info->params;
	}
}

static int vcpu_ioctl(int fd, unsigned long req, void *arg, const char *what, unsigned id,
		      char *err, size_t errlen)
{
	if (ioctl(fd, req, arg) < 0) {
		int ret = -errno;
		snprintf(err, errlen, "vCPU %u: %s: %s", id, what, strerror(errno));
		return ret;
	}
	return 0;
}

static int set_cpuid(int fd, unsigned id, unsigned ncpus, const struct kvm_cpuid2 *supported,
		     char *err, size_t errlen)
{
	unsigned cap = supported->nent + 8;
	struct kvm_cpuid2 *c;
	int ret;

	c = calloc(1, sizeof(*c) + cap * sizeof(c->entries[0]));
	if (!c) {
		snprintf(err, errlen, "vCPU %u: out of memory for the CPUID table", id);
		return -ENOMEM;
	}
	ret = x86_cpuid_build(supported, id, ncpus, c, cap);
	if (ret)
		snprintf(err, errlen, "vCPU %u: CPUID table too large", id);
	else
		ret = vcpu_ioctl(fd, KVM_SET_CPUID2, c, "KVM_SET_CPUID2", id, err, errlen);
	free(c);
	return ret;
}

static int set_msrs(int fd, unsigned id, char *err, size_t errlen)
{
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[16];
	} m;
	int n;

	memset(&m, 0, sizeof(m));
	m.hdr.nmsrs = x86_msrs_init(m.e, ARRAY_SIZE(m.e));
	/* KVM_SET_MSRS returns how many it set; it stops at the first it rejects. */
	n = ioctl(fd, KVM_SET_MSRS, &m);
	if (n < 0 || (unsigned)n != m.hdr.nmsrs) {
		int ret = n < 0 ? -errno : -EINVAL;
		snprintf(err, errlen, "vCPU %u: KVM_SET_MSRS: MSR 0x%x rejected", id,
			 n < 0 ? m.e[0].index : m.e[n].index);
		return ret;
	}
	return 0;
}

int x86_vcpu_init_cpu(int vcpu_fd, unsigned id, unsigned ncpus,
		      const struct kvm_cpuid2 *supported, char *err, size_t errlen)
{
	struct kvm_lapic_state lapic;
	int ret;

	ret = set_cpuid(vcpu_fd, id, ncpus, supported, err, errlen);
	if (ret)
		return ret;
	ret = set_msrs(vcpu_fd, id, err, errlen);
	if (ret)
		return ret;
	ret = vcpu_ioctl(vcpu_fd, KVM_GET_LAPIC, &lapic, "KVM_GET_LAPIC", id, err, errlen);
	if (ret)
		return ret;
	x86_lapic_set_lints(&lapic);
	return vcpu_ioctl(vcpu_fd, KVM_SET_LAPIC, &lapic, "KVM_SET_LAPIC", id, err, errlen);
}

int x86_vcpu_init(int vcpu_fd, unsigned id, unsigned ncpus,
		  const struct kvm_cpuid2 *supported,
		  const struct x86_boot_info *info, char *err, size_t errlen)
{
	struct kvm_fpu fpu;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_mp_state mp;
	int ret;

	ret = x86_vcpu_init_cpu(vcpu_fd, id, ncpus, supported, err, errlen);
	if (ret)
		return ret;
	x86_fpu_init(&fpu);
	ret = vcpu_ioctl(vcpu_fd, KVM_SET_FPU, &fpu, "KVM_SET_FPU", id, err, errlen);
	if (ret)
		return ret;

	if (id != 0) {
		/* APs wait for INIT/SIPI from the BSP; the in-kernel LAPIC
		 * delivers them and starts the vCPU in real mode. */
		memset(&mp, 0, sizeof(mp));
		mp.mp_state = KVM_MP_STATE_UNINITIALIZED;
		return vcpu_ioctl(vcpu_fd, KVM_SET_MP_STATE, &mp, "KVM_SET_MP_STATE", id, err, errlen);
	}
	/* Start from KVM's reset sregs so fields we do not set (apic_base,
	 * interrupt bitmap) keep their values. */
	ret = vcpu_ioctl(vcpu_fd, KVM_GET_SREGS, &sregs, "KVM_GET_SREGS", id, err, errlen);
	if (ret)
		return ret;
	x86_bsp_regs(info, &regs, &sregs);
	ret = vcpu_ioctl(vcpu_fd, KVM_SET_SREGS, &sregs, "KVM_SET_SREGS", id, err, errlen);
	if (ret)
		return ret;
	return vcpu_ioctl(vcpu_fd, KVM_SET_REGS, &regs, "KVM_SET_REGS", id, err, errlen);
}
