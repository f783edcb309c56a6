/* A vCPU in a guest core dump (vmm/base/elfcore.h, mvm_coredump): the two
 * notes QEMU's dump-guest-memory writes per x86-64 CPU, which crash(8)
 * and gdb read: NT_PRSTATUS ("CORE"), the general registers in Linux's
 * struct elf_prstatus, and "QEMU" (type 0), QEMUCPUState version 1, which
 * adds the segment descriptors, the descriptor tables and the control
 * registers (crash takes CR3 from it to walk the guest's page tables). */
#include "arch/arch.h"
#include "arch/x86/x86.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/elfcore.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vcpu.h"

#include <elf.h>
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

const struct arch_coredump arch_coredump = { .machine = EM_X86_64, .big_endian = false };

/* struct elf_prstatus of x86-64 Linux (include/uapi/linux/elfcore.h with
 * its 64-bit types): pr_pid at 32, pr_reg (struct user_regs_struct, 27
 * registers) at 112, pr_fpvalid at 328; 336 bytes. */
#define PRSTATUS_SIZE   336
#define PRSTATUS_PID    32
#define PRSTATUS_REG    112

/* QEMUCPUState (QEMU's target/i386/arch_dump.c, version 1): two 32-bit
 * words, 18 registers, 10 segments of 24 bytes, CR0-CR4, KernelGSBase. */
#define QEMU_STATE_SIZE (8 + 18 * 8 + 10 * 24 + 5 * 8 + 8)

#define MSR_KERNEL_GS_BASE 0xc0000102u

/* A segment's attributes as QEMU keeps them: the descriptor's second
 * dword, bits 8-23 (type, S, DPL, P, AVL, L, D/B, G; SDM vol. 3, 3.4.5). */
static uint32_t seg_flags(const struct kvm_segment *s)
{
	return (uint32_t)s->type << 8 | (uint32_t)s->s << 12 | (uint32_t)s->dpl << 13 |
	       (uint32_t)s->present << 15 | (uint32_t)s->avl << 20 | (uint32_t)s->l << 21 |
	       (uint32_t)s->db << 22 | (uint32_t)s->g << 23;
}

static uint8_t *put_seg(uint8_t *p, uint32_t selector, uint32_t limit, uint32_t flags,
			uint64_t base)
{
	le32_store(p, selector);
	le32_store(p + 4, limit);
	le32_store(p + 8, flags);
	le32_store(p + 12, 0);
	le64_store(p + 16, base);
	return p + 24;
}

size_t x86_coredump_notes(uint8_t *buf, size_t cap, unsigned id, const struct kvm_regs *r,
			  const struct kvm_sregs *s, uint64_t kernel_gs_base)
{
	const struct kvm_segment *segs[] = { &s->cs, &s->ds, &s->es, &s->fs, &s->gs, &s->ss,
					     &s->ldt, &s->tr };
	/* user_regs_struct's order (arch/x86/include/asm/user_64.h). */
	const uint64_t gp[27] = {
		r->r15, r->r14, r->r13, r->r12, r->rbp, r->rbx, r->r11, r->r10, r->r9, r->r8,
		r->rax, r->rcx, r->rdx, r->rsi, r->rdi,
		~0ull,                  /* orig_rax: not in a system call */
		r->rip, s->cs.selector, r->rflags, r->rsp, s->ss.selector,
		s->fs.base, s->gs.base,
		s->ds.selector, s->es.selector, s->fs.selector, s->gs.selector,
	};
	const uint64_t q[18] = {
		r->rax, r->rbx, r->rcx, r->rdx, r->rsi, r->rdi, r->rsp, r->rbp,
		r->r8, r->r9, r->r10, r->r11, r->r12, r->r13, r->r14, r->r15,
		r->rip, r->rflags,
	};
	const uint64_t cr[5] = { s->cr0, 0, s->cr2, s->cr3, s->cr4 };
	uint8_t pr[PRSTATUS_SIZE] = { 0 }, qs[QEMU_STATE_SIZE] = { 0 }, *p;
	size_t a, b;
	unsigned i;

	/* pid: the vCPU's number from 1, as QEMU's (gdb shows it as the
	 * thread: 0 would read as "none"). */
	le32_store(pr + PRSTATUS_PID, id + 1);
	for (i = 0; i < 27; i++)
		le64_store(pr + PRSTATUS_REG + 8 * i, gp[i]);
	le32_store(qs, 1);                      /* version */
	le32_store(qs + 4, QEMU_STATE_SIZE);
	for (i = 0, p = qs + 8; i < 18; i++, p += 8)
		le64_store(p, q[i]);
	for (i = 0; i < 8; i++)
		p = put_seg(p, segs[i]->selector, segs[i]->limit, seg_flags(segs[i]), segs[i]->base);
	p = put_seg(p, 0, s->gdt.limit, 0, s->gdt.base);
	p = put_seg(p, 0, s->idt.limit, 0, s->idt.base);
	for (i = 0; i < 5; i++, p += 8)
		le64_store(p, cr[i]);
	le64_store(p, kernel_gs_base);
	a = elfcore_note(buf, cap, false, "CORE", NT_PRSTATUS, pr, sizeof(pr));
	if (!a)
		return 0;
	b = elfcore_note(buf + a, cap - a, false, "QEMU", 0, qs, sizeof(qs));
	return b ? a + b : 0;
}

int arch_vcpu_coredump_notes(struct vcpu *v, uint8_t *buf, size_t cap, char *err,
			     size_t errlen)
{
	struct kvm_regs r;
	struct kvm_sregs s;
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[1];
	} msr = { .hdr.nmsrs = 1, .e[0].index = MSR_KERNEL_GS_BASE };
	size_t n;

	/* The VM is paused: vcpu_park completed the vCPU's last exit, so
	 * these are the registers the guest goes on with. */
	if (ioctl(v->fd, KVM_GET_REGS, &r) < 0 || ioctl(v->fd, KVM_GET_SREGS, &s) < 0)
		return err_set(err, errlen, -errno, "vCPU %u: reading its registers: %s", v->id,
			       strerror(errno));
	/* 0 where KVM does not keep it (a 32-bit guest's). */
	if (ioctl(v->fd, KVM_GET_MSRS, &msr) != 1)
		msr.e[0].data = 0;
	n = x86_coredump_notes(buf, cap, v->id, &r, &s, msr.e[0].data);
	if (!n)
		return err_set(err, errlen, -ENOSPC, "vCPU %u: its notes take more than %zu bytes",
			       v->id, cap);
	return (int)n;
}
