/* Snapshots of an x86 VM (arch/arch.h, docs/snapshot.md): each vCPU's
 * state as KVM gives and takes it, the in-kernel PICs, IOAPIC and PIT,
 * and the kvmclock, like Firecracker's and Cloud Hypervisor's vCPU and VM
 * state. The ioctls are those of Documentation/virt/kvm/api.rst, named at
 * each call.
 *
 * The encoding into snapshot sections and the checks a restore makes
 * before it sets anything are pure functions (x86.h, unit-tested without
 * KVM); the ioctls that fill and apply them follow. Every field goes
 * field by field, little-endian, so the format depends on no compiler's
 * layout; only KVM's fixed byte images (the LAPIC's 1 KiB register page,
 * the XSAVE area) go as bytes. */
#include "arch/arch.h"
#include "arch/x86/x86.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/vcpu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#define MSR_IA32_TSC            0x00000010
#define MSR_IA32_TSC_DEADLINE   0x000006e0

/* ---- encoding ------------------------------------------------------------ */

static void put_segment(struct snap_w *w, const struct kvm_segment *s)
{
	snap_put_u64(w, s->base);
	snap_put_u32(w, s->limit);
	snap_put_u16(w, s->selector);
	snap_put_u8(w, s->type);
	snap_put_u8(w, s->present);
	snap_put_u8(w, s->dpl);
	snap_put_u8(w, s->db);
	snap_put_u8(w, s->s);
	snap_put_u8(w, s->l);
	snap_put_u8(w, s->g);
	snap_put_u8(w, s->avl);
	snap_put_u8(w, s->unusable);
}

static void get_segment(struct snap_r *r, struct kvm_segment *s)
{
	s->base = snap_get_u64(r);
	s->limit = snap_get_u32(r);
	s->selector = snap_get_u16(r);
	s->type = snap_get_u8(r);
	s->present = snap_get_u8(r);
	s->dpl = snap_get_u8(r);
	s->db = snap_get_u8(r);
	s->s = snap_get_u8(r);
	s->l = snap_get_u8(r);
	s->g = snap_get_u8(r);
	s->avl = snap_get_u8(r);
	s->unusable = snap_get_u8(r);
}

static void put_dtable(struct snap_w *w, const struct kvm_dtable *d)
{
	snap_put_u64(w, d->base);
	snap_put_u16(w, d->limit);
}

static void get_dtable(struct snap_r *r, struct kvm_dtable *d)
{
	d->base = snap_get_u64(r);
	d->limit = snap_get_u16(r);
}

static void put_cpu(struct snap_w *w, unsigned id, const struct x86_vcpu_state *s)
{
	unsigned i;

	snap_begin(w, X86_SNAP_CPU, id);
	snap_put_u32(w, s->tsc_khz);
	snap_put_u32(w, s->cpuid->nent);
	for (i = 0; i < s->cpuid->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &s->cpuid->entries[i];

		snap_put_u32(w, e->function);
		snap_put_u32(w, e->index);
		snap_put_u32(w, e->flags);
		snap_put_u32(w, e->eax);
		snap_put_u32(w, e->ebx);
		snap_put_u32(w, e->ecx);
		snap_put_u32(w, e->edx);
	}
	snap_end(w);
}

static void put_regs(struct snap_w *w, const struct kvm_regs *g)
{
	const uint64_t v[] = {
		g->rax, g->rbx, g->rcx, g->rdx, g->rsi, g->rdi, g->rsp, g->rbp,
		g->r8, g->r9, g->r10, g->r11, g->r12, g->r13, g->r14, g->r15,
		g->rip, g->rflags,
	};
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(v); i++)
		snap_put_u64(w, v[i]);
}

static void get_regs(struct snap_r *r, struct kvm_regs *g)
{
	__u64 *v[] = {
		&g->rax, &g->rbx, &g->rcx, &g->rdx, &g->rsi, &g->rdi, &g->rsp, &g->rbp,
		&g->r8, &g->r9, &g->r10, &g->r11, &g->r12, &g->r13, &g->r14, &g->r15,
		&g->rip, &g->rflags,
	};
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(v); i++)
		*v[i] = snap_get_u64(r);
}

static void put_sregs(struct snap_w *w, const struct kvm_sregs *s)
{
	const struct kvm_segment *seg[] = {
		&s->cs, &s->ds, &s->es, &s->fs, &s->gs, &s->ss, &s->tr, &s->ldt,
	};
	const uint64_t v[] = { s->cr0, s->cr2, s->cr3, s->cr4, s->cr8, s->efer, s->apic_base };
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(seg); i++)
		put_segment(w, seg[i]);
	put_dtable(w, &s->gdt);
	put_dtable(w, &s->idt);
	for (i = 0; i < ARRAY_SIZE(v); i++)
		snap_put_u64(w, v[i]);
	for (i = 0; i < ARRAY_SIZE(s->interrupt_bitmap); i++)
		snap_put_u64(w, s->interrupt_bitmap[i]);
}

static void get_sregs(struct snap_r *r, struct kvm_sregs *s)
{
	struct kvm_segment *seg[] = {
		&s->cs, &s->ds, &s->es, &s->fs, &s->gs, &s->ss, &s->tr, &s->ldt,
	};
	__u64 *v[] = { &s->cr0, &s->cr2, &s->cr3, &s->cr4, &s->cr8, &s->efer, &s->apic_base };
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(seg); i++)
		get_segment(r, seg[i]);
	get_dtable(r, &s->gdt);
	get_dtable(r, &s->idt);
	for (i = 0; i < ARRAY_SIZE(v); i++)
		*v[i] = snap_get_u64(r);
	for (i = 0; i < ARRAY_SIZE(s->interrupt_bitmap); i++)
		s->interrupt_bitmap[i] = snap_get_u64(r);
}

static void put_events(struct snap_w *w, const struct kvm_vcpu_events *e)
{
	snap_put_u8(w, e->exception.injected);
	snap_put_u8(w, e->exception.nr);
	snap_put_u8(w, e->exception.has_error_code);
	snap_put_u8(w, e->exception.pending);
	snap_put_u32(w, e->exception.error_code);
	snap_put_u8(w, e->interrupt.injected);
	snap_put_u8(w, e->interrupt.nr);
	snap_put_u8(w, e->interrupt.soft);
	snap_put_u8(w, e->interrupt.shadow);
	snap_put_u8(w, e->nmi.injected);
	snap_put_u8(w, e->nmi.pending);
	snap_put_u8(w, e->nmi.masked);
	snap_put_u32(w, e->sipi_vector);
	snap_put_u32(w, e->flags);
	snap_put_u8(w, e->smi.smm);
	snap_put_u8(w, e->smi.pending);
	snap_put_u8(w, e->smi.smm_inside_nmi);
	snap_put_u8(w, e->smi.latched_init);
	snap_put_u8(w, e->triple_fault.pending);
	snap_put_u8(w, e->exception_has_payload);
	snap_put_u64(w, e->exception_payload);
}

static void get_events(struct snap_r *r, struct kvm_vcpu_events *e)
{
	e->exception.injected = snap_get_u8(r);
	e->exception.nr = snap_get_u8(r);
	e->exception.has_error_code = snap_get_u8(r);
	e->exception.pending = snap_get_u8(r);
	e->exception.error_code = snap_get_u32(r);
	e->interrupt.injected = snap_get_u8(r);
	e->interrupt.nr = snap_get_u8(r);
	e->interrupt.soft = snap_get_u8(r);
	e->interrupt.shadow = snap_get_u8(r);
	e->nmi.injected = snap_get_u8(r);
	e->nmi.pending = snap_get_u8(r);
	e->nmi.masked = snap_get_u8(r);
	e->sipi_vector = snap_get_u32(r);
	e->flags = snap_get_u32(r);
	e->smi.smm = snap_get_u8(r);
	e->smi.pending = snap_get_u8(r);
	e->smi.smm_inside_nmi = snap_get_u8(r);
	e->smi.latched_init = snap_get_u8(r);
	e->triple_fault.pending = snap_get_u8(r);
	e->exception_has_payload = snap_get_u8(r);
	e->exception_payload = snap_get_u64(r);
}

/* Whether a reader takes n as a kvm_nested_state: a header, a format it
 * knows, data within bounds. */
static bool nested_ok(const struct kvm_nested_state *n)
{
	return n->size >= X86_SNAP_NESTED_HDR && n->size <= X86_SNAP_NESTED_MAX &&
	       (n->format == KVM_STATE_NESTED_FORMAT_VMX ||
		n->format == KVM_STATE_NESTED_FORMAT_SVM);
}

/* The header's union field by field, as the format says; then the data
 * (VMX's vmcs12s, SVM's vmcb12: the processor's layouts as KVM keeps
 * them, little-endian) as bytes. */
static void put_nested(struct snap_w *w, unsigned id, const struct kvm_nested_state *n)
{
	snap_begin(w, X86_SNAP_NESTED, id);
	snap_put_u16(w, n->flags);
	snap_put_u16(w, n->format);
	snap_put_u32(w, n->size);
	if (n->format == KVM_STATE_NESTED_FORMAT_VMX) {
		snap_put_u64(w, n->hdr.vmx.vmxon_pa);
		snap_put_u64(w, n->hdr.vmx.vmcs12_pa);
		snap_put_u16(w, n->hdr.vmx.smm.flags);
		snap_put_u32(w, n->hdr.vmx.flags);
		snap_put_u64(w, n->hdr.vmx.preemption_timer_deadline);
	} else {
		snap_put_u64(w, n->hdr.svm.vmcb_pa);
	}
	snap_put_bytes(w, (const uint8_t *)n + X86_SNAP_NESTED_HDR,
		       n->size - X86_SNAP_NESTED_HDR);
	snap_end(w);
}

int x86_vcpu_state_put(struct snap_w *w, unsigned id, const struct x86_vcpu_state *s)
{
	unsigned i;

	/* Nothing a reader would refuse: it is better not to take a
	 * snapshot than to take one that cannot be restored. */
	if (!s->cpuid || s->cpuid->nent > X86_SNAP_CPUID_MAX || !s->msrs ||
	    s->msrs->nmsrs > X86_SNAP_MSRS_MAX || !s->xsave ||
	    s->xsave_size < X86_SNAP_XSAVE_MIN || s->xsave_size > X86_SNAP_XSAVE_MAX ||
	    s->xcrs.nr_xcrs > KVM_MAX_XCRS || (s->nested && !nested_ok(s->nested)))
		return -EINVAL;

	put_cpu(w, id, s);

	snap_begin(w, X86_SNAP_MPSTATE, id);
	snap_put_u32(w, s->mp.mp_state);
	snap_end(w);

	snap_begin(w, X86_SNAP_REGS, id);
	put_regs(w, &s->regs);
	snap_end(w);

	snap_begin(w, X86_SNAP_SREGS, id);
	put_sregs(w, &s->sregs);
	snap_end(w);

	/* The XSAVE area is the processor's own little-endian image
	 * (SDM vol. 1, 13.4), laid out as CPUID leaf 0xd says. */
	snap_begin(w, X86_SNAP_XSAVE, id);
	snap_put_u32(w, s->xsave_size);
	snap_put_bytes(w, s->xsave, s->xsave_size);
	snap_end(w);

	snap_begin(w, X86_SNAP_XCRS, id);
	snap_put_u32(w, s->xcrs.nr_xcrs);
	snap_put_u32(w, s->xcrs.flags);
	for (i = 0; i < s->xcrs.nr_xcrs; i++) {
		snap_put_u32(w, s->xcrs.xcrs[i].xcr);
		snap_put_u64(w, s->xcrs.xcrs[i].value);
	}
	snap_end(w);

	snap_begin(w, X86_SNAP_DEBUG, id);
	for (i = 0; i < ARRAY_SIZE(s->debugregs.db); i++)
		snap_put_u64(w, s->debugregs.db[i]);
	snap_put_u64(w, s->debugregs.dr6);
	snap_put_u64(w, s->debugregs.dr7);
	snap_put_u64(w, s->debugregs.flags);
	snap_end(w);

	/* The LAPIC's register page as the xAPIC's MMIO layout has it
	 * (little-endian 32-bit registers every 16 bytes). */
	snap_begin(w, X86_SNAP_LAPIC, id);
	snap_put_bytes(w, s->lapic.regs, sizeof(s->lapic.regs));
	snap_end(w);

	snap_begin(w, X86_SNAP_MSRS, id);
	snap_put_u32(w, s->msrs->nmsrs);
	for (i = 0; i < s->msrs->nmsrs; i++) {
		snap_put_u32(w, s->msrs->entries[i].index);
		snap_put_u64(w, s->msrs->entries[i].data);
	}
	snap_end(w);

	snap_begin(w, X86_SNAP_EVENTS, id);
	put_events(w, &s->events);
	snap_end(w);

	if (s->nested)
		put_nested(w, id, s->nested);
	return w->err;
}

/* Section (tag, instance) of f into *r, or -EINVAL naming it and whose
 * it is ("vCPU 3", "the VM"). */
static int sec_find(const struct snap_file *f, uint32_t tag, uint32_t instance, const char *who,
		    struct snap_r *r, char *err, size_t errlen)
{
	char name[5];

	if (snap_find(f, tag, instance, r) == 0)
		return 0;
	snap_tag_name(tag, name);
	return err_set(err, errlen, -EINVAL,
		       "snapshot has no %s section for %s: the file is damaged or from another mvm",
		       name, who);
}

/* The section was read to its end, no further and no less. */
static int sec_done(const struct snap_r *r, const char *who, char *err, size_t errlen)
{
	char why[256];
	int ret = snap_done(r, why, sizeof(why));

	return ret ? err_set(err, errlen, ret, "snapshot: %s: %s", who, why) : 0;
}

static int no_memory(const char *who, char *err, size_t errlen)
{
	return err_set(err, errlen, -ENOMEM, "snapshot: %s: out of memory", who);
}

static int get_nested(const struct snap_file *f, unsigned id, const char *who,
		      struct x86_vcpu_state *s, char *err, size_t errlen)
{
	struct kvm_nested_state *n;
	uint16_t flags, format;
	struct snap_r r;
	uint32_t size;

	if (snap_find(f, X86_SNAP_NESTED, id, &r))
		return 0;       /* taken where KVM kept none */
	flags = snap_get_u16(&r);
	format = snap_get_u16(&r);
	size = snap_get_u32(&r);
	if (r.err || size < X86_SNAP_NESTED_HDR || size > X86_SNAP_NESTED_MAX ||
	    (format != KVM_STATE_NESTED_FORMAT_VMX && format != KVM_STATE_NESTED_FORMAT_SVM))
		return err_set(err, errlen, -EINVAL, "snapshot: %s: nested state of format %u "
			       "and %u bytes: the file is damaged", who, format, size);
	n = calloc(1, X86_SNAP_NESTED_MAX);
	if (!n)
		return no_memory(who, err, errlen);
	s->nested = n;
	n->flags = flags;
	n->format = format;
	n->size = size;
	if (format == KVM_STATE_NESTED_FORMAT_VMX) {
		n->hdr.vmx.vmxon_pa = snap_get_u64(&r);
		n->hdr.vmx.vmcs12_pa = snap_get_u64(&r);
		n->hdr.vmx.smm.flags = snap_get_u16(&r);
		n->hdr.vmx.flags = snap_get_u32(&r);
		n->hdr.vmx.preemption_timer_deadline = snap_get_u64(&r);
	} else {
		n->hdr.svm.vmcb_pa = snap_get_u64(&r);
	}
	snap_get_bytes(&r, (uint8_t *)n + X86_SNAP_NESTED_HDR, size - X86_SNAP_NESTED_HDR);
	return sec_done(&r, who, err, errlen);
}

static int get_cpu(const struct snap_file *f, unsigned id, const char *who,
		   struct x86_vcpu_state *s, char *err, size_t errlen)
{
	struct snap_r r;
	uint32_t n, i;
	int ret;

	ret = sec_find(f, X86_SNAP_CPU, id, who, &r, err, errlen);
	if (ret)
		return ret;
	s->tsc_khz = snap_get_u32(&r);
	n = snap_get_u32(&r);
	if (!r.err && s->tsc_khz == 0)
		return err_set(err, errlen, -EINVAL,
			       "snapshot: %s: a TSC rate of 0 kHz: the file is damaged", who);
	if (n > X86_SNAP_CPUID_MAX)
		return err_set(err, errlen, -EINVAL,
			       "snapshot: %s: %u CPUID entries, KVM keeps at most %u: the file is damaged",
			       who, n, X86_SNAP_CPUID_MAX);
	s->cpuid = calloc(1, sizeof(*s->cpuid) + n * sizeof(s->cpuid->entries[0]));
	if (!s->cpuid)
		return no_memory(who, err, errlen);
	s->cpuid->nent = n;
	for (i = 0; i < n; i++) {
		struct kvm_cpuid_entry2 *e = &s->cpuid->entries[i];

		e->function = snap_get_u32(&r);
		e->index = snap_get_u32(&r);
		e->flags = snap_get_u32(&r);
		e->eax = snap_get_u32(&r);
		e->ebx = snap_get_u32(&r);
		e->ecx = snap_get_u32(&r);
		e->edx = snap_get_u32(&r);
	}
	return sec_done(&r, who, err, errlen);
}

static int get_xsave(const struct snap_file *f, unsigned id, const char *who,
		     struct x86_vcpu_state *s, char *err, size_t errlen)
{
	struct snap_r r;
	uint32_t size;
	int ret;

	ret = sec_find(f, X86_SNAP_XSAVE, id, who, &r, err, errlen);
	if (ret)
		return ret;
	size = snap_get_u32(&r);
	if (size < X86_SNAP_XSAVE_MIN || size > X86_SNAP_XSAVE_MAX)
		return err_set(err, errlen, -EINVAL,
			       "snapshot: %s: an XSAVE area of %u bytes, not %u to %u: the file is damaged",
			       who, size, X86_SNAP_XSAVE_MIN, X86_SNAP_XSAVE_MAX);
	s->xsave = calloc(1, size);
	if (!s->xsave)
		return no_memory(who, err, errlen);
	s->xsave_size = size;
	snap_get_bytes(&r, s->xsave, size);
	return sec_done(&r, who, err, errlen);
}

static int get_xcrs(const struct snap_file *f, unsigned id, const char *who,
		    struct x86_vcpu_state *s, char *err, size_t errlen)
{
	struct snap_r r;
	uint32_t n, i;
	int ret;

	ret = sec_find(f, X86_SNAP_XCRS, id, who, &r, err, errlen);
	if (ret)
		return ret;
	n = snap_get_u32(&r);
	if (n > KVM_MAX_XCRS)
		return err_set(err, errlen, -EINVAL,
			       "snapshot: %s: %u XCRs, KVM has at most %u: the file is damaged",
			       who, n, KVM_MAX_XCRS);
	s->xcrs.nr_xcrs = n;
	s->xcrs.flags = snap_get_u32(&r);
	for (i = 0; i < n; i++) {
		s->xcrs.xcrs[i].xcr = snap_get_u32(&r);
		s->xcrs.xcrs[i].value = snap_get_u64(&r);
	}
	return sec_done(&r, who, err, errlen);
}

static int get_msrs(const struct snap_file *f, unsigned id, const char *who,
		    struct x86_vcpu_state *s, char *err, size_t errlen)
{
	struct snap_r r;
	uint32_t n, i;
	int ret;

	ret = sec_find(f, X86_SNAP_MSRS, id, who, &r, err, errlen);
	if (ret)
		return ret;
	n = snap_get_u32(&r);
	if (n > X86_SNAP_MSRS_MAX)
		return err_set(err, errlen, -EINVAL,
			       "snapshot: %s: %u MSRs, this mvm takes at most %u: the file is damaged",
			       who, n, X86_SNAP_MSRS_MAX);
	s->msrs = calloc(1, sizeof(*s->msrs) + n * sizeof(s->msrs->entries[0]));
	if (!s->msrs)
		return no_memory(who, err, errlen);
	s->msrs->nmsrs = n;
	for (i = 0; i < n; i++) {
		s->msrs->entries[i].index = snap_get_u32(&r);
		s->msrs->entries[i].data = snap_get_u64(&r);
	}
	return sec_done(&r, who, err, errlen);
}

int x86_vcpu_state_get(const struct snap_file *f, unsigned id, struct x86_vcpu_state *s,
		       char *err, size_t errlen)
{
	struct snap_r r;
	char who[32];
	unsigned i;
	int ret;

	memset(s, 0, sizeof(*s));
	snprintf(who, sizeof(who), "vCPU %u", id);
	/* In file order. */
	ret = get_cpu(f, id, who, s, err, errlen);
	if (ret)
		return ret;

	ret = sec_find(f, X86_SNAP_MPSTATE, id, who, &r, err, errlen);
	if (ret)
		return ret;
	s->mp.mp_state = snap_get_u32(&r);
	ret = sec_done(&r, who, err, errlen);
	if (ret)
		return ret;

	ret = sec_find(f, X86_SNAP_REGS, id, who, &r, err, errlen);
	if (ret)
		return ret;
	get_regs(&r, &s->regs);
	ret = sec_done(&r, who, err, errlen);
	if (ret)
		return ret;

	ret = sec_find(f, X86_SNAP_SREGS, id, who, &r, err, errlen);
	if (ret)
		return ret;
	get_sregs(&r, &s->sregs);
	ret = sec_done(&r, who, err, errlen);
	if (ret)
		return ret;

	ret = get_xsave(f, id, who, s, err, errlen);
	if (ret)
		return ret;
	ret = get_xcrs(f, id, who, s, err, errlen);
	if (ret)
		return ret;

	ret = sec_find(f, X86_SNAP_DEBUG, id, who, &r, err, errlen);
	if (ret)
		return ret;
	for (i = 0; i < ARRAY_SIZE(s->debugregs.db); i++)
		s->debugregs.db[i] = snap_get_u64(&r);
	s->debugregs.dr6 = snap_get_u64(&r);
	s->debugregs.dr7 = snap_get_u64(&r);
	s->debugregs.flags = snap_get_u64(&r);
	ret = sec_done(&r, who, err, errlen);
	if (ret)
		return ret;

	ret = sec_find(f, X86_SNAP_LAPIC, id, who, &r, err, errlen);
	if (ret)
		return ret;
	snap_get_bytes(&r, s->lapic.regs, sizeof(s->lapic.regs));
	ret = sec_done(&r, who, err, errlen);
	if (ret)
		return ret;

	ret = get_msrs(f, id, who, s, err, errlen);
	if (ret)
		return ret;

	ret = sec_find(f, X86_SNAP_EVENTS, id, who, &r, err, errlen);
	if (ret)
		return ret;
	get_events(&r, &s->events);
	ret = sec_done(&r, who, err, errlen);
	if (ret)
		return ret;
	return get_nested(f, id, who, s, err, errlen);
}

void x86_vcpu_state_free(struct x86_vcpu_state *s)
{
	free(s->cpuid);
	free(s->xsave);
	free(s->msrs);
	free(s->nested);
	s->nested = NULL;
	s->cpuid = NULL;
	s->xsave = NULL;
	s->msrs = NULL;
}

static void put_pic(struct snap_w *w, unsigned chip, const struct kvm_pic_state *p)
{
	snap_begin(w, X86_SNAP_PIC, chip);
	snap_put_u8(w, p->last_irr);
	snap_put_u8(w, p->irr);
	snap_put_u8(w, p->imr);
	snap_put_u8(w, p->isr);
	snap_put_u8(w, p->priority_add);
	snap_put_u8(w, p->irq_base);
	snap_put_u8(w, p->read_reg_select);
	snap_put_u8(w, p->poll);
	snap_put_u8(w, p->special_mask);
	snap_put_u8(w, p->init_state);
	snap_put_u8(w, p->auto_eoi);
	snap_put_u8(w, p->rotate_on_auto_eoi);
	snap_put_u8(w, p->special_fully_nested_mode);
	snap_put_u8(w, p->init4);
	snap_put_u8(w, p->elcr);
	snap_put_u8(w, p->elcr_mask);
	snap_end(w);
}

static void get_pic(struct snap_r *r, struct kvm_pic_state *p)
{
	p->last_irr = snap_get_u8(r);
	p->irr = snap_get_u8(r);
	p->imr = snap_get_u8(r);
	p->isr = snap_get_u8(r);
	p->priority_add = snap_get_u8(r);
	p->irq_base = snap_get_u8(r);
	p->read_reg_select = snap_get_u8(r);
	p->poll = snap_get_u8(r);
	p->special_mask = snap_get_u8(r);
	p->init_state = snap_get_u8(r);
	p->auto_eoi = snap_get_u8(r);
	p->rotate_on_auto_eoi = snap_get_u8(r);
	p->special_fully_nested_mode = snap_get_u8(r);
	p->init4 = snap_get_u8(r);
	p->elcr = snap_get_u8(r);
	p->elcr_mask = snap_get_u8(r);
}

static void put_pit_channel(struct snap_w *w, const struct kvm_pit_channel_state *c)
{
	snap_put_u32(w, c->count);
	snap_put_u16(w, c->latched_count);
	snap_put_u8(w, c->count_latched);
	snap_put_u8(w, c->status_latched);
	snap_put_u8(w, c->status);
	snap_put_u8(w, c->read_state);
	snap_put_u8(w, c->write_state);
	snap_put_u8(w, c->write_latch);
	snap_put_u8(w, c->rw_mode);
	snap_put_u8(w, c->mode);
	snap_put_u8(w, c->bcd);
	snap_put_u8(w, c->gate);
	snap_put_u64(w, (uint64_t)c->count_load_time);
}

static void get_pit_channel(struct snap_r *r, struct kvm_pit_channel_state *c)
{
	c->count = snap_get_u32(r);
	c->latched_count = snap_get_u16(r);
	c->count_latched = snap_get_u8(r);
	c->status_latched = snap_get_u8(r);
	c->status = snap_get_u8(r);
	c->read_state = snap_get_u8(r);
	c->write_state = snap_get_u8(r);
	c->write_latch = snap_get_u8(r);
	c->rw_mode = snap_get_u8(r);
	c->mode = snap_get_u8(r);
	c->bcd = snap_get_u8(r);
	c->gate = snap_get_u8(r);
	c->count_load_time = (int64_t)snap_get_u64(r);
}

int x86_vm_state_put(struct snap_w *w, const struct x86_vm_state *s)
{
	unsigned i;

	put_pic(w, KVM_IRQCHIP_PIC_MASTER, &s->pic[0]);
	put_pic(w, KVM_IRQCHIP_PIC_SLAVE, &s->pic[1]);

	snap_begin(w, X86_SNAP_IOAPIC, 0);
	snap_put_u64(w, s->ioapic.base_address);
	snap_put_u32(w, s->ioapic.ioregsel);
	snap_put_u32(w, s->ioapic.id);
	snap_put_u32(w, s->ioapic.irr);
	/* A redirection entry is the IOAPIC's 64-bit register (82093AA
	 * datasheet 3.2.4); the bit-fields KVM overlays on it follow it. */
	for (i = 0; i < KVM_IOAPIC_NUM_PINS; i++)
		snap_put_u64(w, s->ioapic.redirtbl[i].bits);
	snap_end(w);

	snap_begin(w, X86_SNAP_PIT, 0);
	for (i = 0; i < ARRAY_SIZE(s->pit.channels); i++)
		put_pit_channel(w, &s->pit.channels[i]);
	snap_put_u32(w, s->pit.flags);
	snap_end(w);

	snap_begin(w, X86_SNAP_CLOCK, 0);
	snap_put_u64(w, s->clock.clock);
	snap_put_u32(w, s->clock.flags);
	snap_put_u64(w, s->clock.realtime);
	snap_put_u64(w, s->clock.host_tsc);
	snap_end(w);
	return w->err;
}

int x86_vm_state_get(const struct snap_file *f, struct x86_vm_state *s, char *err,
		     size_t errlen)
{
	static const char *const pic_who[] = { "the master PIC", "the slave PIC" };
	const char *who = "the VM";
	struct snap_r r;
	unsigned i;
	int ret;

	memset(s, 0, sizeof(*s));
	for (i = 0; i < 2; i++) {
		ret = sec_find(f, X86_SNAP_PIC, i, pic_who[i], &r, err, errlen);
		if (ret)
			return ret;
		get_pic(&r, &s->pic[i]);
		ret = sec_done(&r, pic_who[i], err, errlen);
		if (ret)
			return ret;
	}

	ret = sec_find(f, X86_SNAP_IOAPIC, 0, who, &r, err, errlen);
	if (ret)
		return ret;
	s->ioapic.base_address = snap_get_u64(&r);
	s->ioapic.ioregsel = snap_get_u32(&r);
	s->ioapic.id = snap_get_u32(&r);
	s->ioapic.irr = snap_get_u32(&r);
	for (i = 0; i < KVM_IOAPIC_NUM_PINS; i++)
		s->ioapic.redirtbl[i].bits = snap_get_u64(&r);
	ret = sec_done(&r, who, err, errlen);
	if (ret)
		return ret;

	ret = sec_find(f, X86_SNAP_PIT, 0, who, &r, err, errlen);
	if (ret)
		return ret;
	for (i = 0; i < ARRAY_SIZE(s->pit.channels); i++)
		get_pit_channel(&r, &s->pit.channels[i]);
	s->pit.flags = snap_get_u32(&r);
	ret = sec_done(&r, who, err, errlen);
	if (ret)
		return ret;

	ret = sec_find(f, X86_SNAP_CLOCK, 0, who, &r, err, errlen);
	if (ret)
		return ret;
	s->clock.clock = snap_get_u64(&r);
	s->clock.flags = snap_get_u32(&r);
	s->clock.realtime = snap_get_u64(&r);
	s->clock.host_tsc = snap_get_u64(&r);
	return sec_done(&r, who, err, errlen);
}

/* ---- checks -------------------------------------------------------------- */

#define CPUID_1_ECX_OSXSAVE    (1u << 27)
#define CPUID_1_ECX_HYPERVISOR (1u << 31)
#define CPUID_1_EDX_HTT        (1u << 28)
#define CPUID_7_ECX_OSPKE      (1u << 4)

enum cpuid_reg { CPUID_EAX, CPUID_EBX, CPUID_ECX, CPUID_EDX };
static const char *const cpuid_reg_name[] = { "eax", "ebx", "ecx", "edx" };

/* The registers that announce CPU features (SDM vol. 2A, CPUID; AMD APM
 * vol. 3, appendix E; Documentation/virt/kvm/x86/cpuid.rst). A bit
 * outside what this host's KVM supports would have the guest use an
 * instruction or a state component that faults here, or KVM refuse the
 * XCR0 or MSR values the snapshot holds. Bits that are no host feature
 * do not count: the hypervisor bit and HTT, which mvm sets itself
 * (cpuid.c), and OSXSAVE and OSPKE, which KVM mirrors from the guest's
 * CR4 into the CPUID it reports. */
static const struct cpuid_feature {
	uint32_t leaf, subleaf;
	bool has_subleaf;
	enum cpuid_reg reg;
	uint32_t not_features;
} cpuid_features[] = {
	{ 0x1, 0, false, CPUID_ECX, CPUID_1_ECX_OSXSAVE | CPUID_1_ECX_HYPERVISOR },
	{ 0x1, 0, false, CPUID_EDX, CPUID_1_EDX_HTT },
	{ 0x7, 0, true, CPUID_EBX, 0 },
	{ 0x7, 0, true, CPUID_ECX, CPUID_7_ECX_OSPKE },
	{ 0x7, 0, true, CPUID_EDX, 0 },
	{ 0x7, 1, true, CPUID_EAX, 0 },
	{ 0xd, 0, true, CPUID_EAX, 0 },         /* XCR0 components */
	{ 0xd, 0, true, CPUID_EDX, 0 },
	{ 0xd, 1, true, CPUID_EAX, 0 },         /* XSAVEOPT, XSAVEC, XSAVES... */
	{ 0x80000001, 0, false, CPUID_ECX, 0 },
	{ 0x80000001, 0, false, CPUID_EDX, 0 },
	{ 0x40000001, 0, false, CPUID_EAX, 0 }, /* KVM's paravirtual features */
};

static const struct kvm_cpuid_entry2 *cpuid_find(const struct kvm_cpuid2 *c, uint32_t leaf,
						 uint32_t subleaf)
{
	unsigned i;

	for (i = 0; i < c->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &c->entries[i];

		if (e->function != leaf)
			continue;
		if ((e->flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX) && e->index != subleaf)
			continue;
		return e;
	}
	return NULL;
}

static uint32_t cpuid_reg(const struct kvm_cpuid_entry2 *e, enum cpuid_reg reg)
{
	if (!e)
		return 0;       /* a leaf the CPU lacks has no features */
	switch (reg) {
	case CPUID_EAX:
		return e->eax;
	case CPUID_EBX:
		return e->ebx;
	case CPUID_ECX:
		return e->ecx;
	default:
		return e->edx;
	}
}

int x86_cpuid_check(const struct kvm_cpuid2 *snap, const struct kvm_cpuid2 *supported,
		    unsigned id, char *err, size_t errlen)
{
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(cpuid_features); i++) {
		const struct cpuid_feature *c = &cpuid_features[i];
		uint32_t want = cpuid_reg(cpuid_find(snap, c->leaf, c->subleaf), c->reg);
		uint32_t have = cpuid_reg(cpuid_find(supported, c->leaf, c->subleaf), c->reg);
		uint32_t missing = want & ~have & ~c->not_features;
		char sub[24] = "";

		if (!missing)
			continue;
		if (c->has_subleaf)
			snprintf(sub, sizeof(sub), " subleaf %u", c->subleaf);
		return err_set(err, errlen, -ENOTSUP,
			       "snapshot: vCPU %u's CPUID leaf 0x%x%s %s has bits 0x%08x this host's "
			       "KVM cannot give; restore on a host with the same CPU features",
			       id, c->leaf, sub, cpuid_reg_name[c->reg], missing);
	}
	return 0;
}

static struct kvm_msr_entry *msr_find(struct kvm_msr_entry *e, unsigned n, uint32_t index)
{
	unsigned i;

	for (i = 0; i < n; i++)
		if (e[i].index == index)
			return &e[i];
	return NULL;
}

void x86_msrs_save_fixup(struct kvm_msr_entry *e, unsigned n)
{
	struct kvm_msr_entry *tsc = msr_find(e, n, MSR_IA32_TSC);
	struct kvm_msr_entry *deadline = msr_find(e, n, MSR_IA32_TSC_DEADLINE);

	/* KVM ignores the deadline unless the LAPIC timer is in TSC-deadline
	 * mode, and an early timer interrupt is one the guest handles. */
	if (tsc && deadline && deadline->data == 0)
		deadline->data = tsc->data;
}

void x86_msrs_load_order(struct kvm_msr_entry *e, unsigned n)
{
	struct kvm_msr_entry *deadline = msr_find(e, n, MSR_IA32_TSC_DEADLINE), keep;

	if (!deadline)
		return;
	keep = *deadline;
	memmove(deadline, deadline + 1, (size_t)(&e[n - 1] - deadline) * sizeof(*e));
	e[n - 1] = keep;
}

/* ---- KVM ----------------------------------------------------------------- */

/* KVM_GET_MSRS and KVM_SET_MSRS take fewer than MAX_IO_MSRS (256) entries
 * a call (msr_io() in arch/x86/kvm/x86.c answers E2BIG). */
#define MSRS_PER_CALL 128

struct msr_batch {
	struct kvm_msrs hdr;
	struct kvm_msr_entry e[MSRS_PER_CALL];
};

static int vcpu_call(struct vcpu *v, unsigned long req, void *arg, const char *what, char *err,
		     size_t errlen)
{
	int e;

	if (ioctl(v->fd, req, arg) >= 0)
		return 0;
	e = errno;
	return err_set(err, errlen, -e, "snapshot: vCPU %u: %s: %s", v->id, what, strerror(e));
}

static int vm_call(struct vm *vm, unsigned long req, void *arg, const char *what, char *err,
		   size_t errlen)
{
	int e;

	if (ioctl(vm->vm_fd, req, arg) >= 0)
		return 0;
	e = errno;
	return err_set(err, errlen, -e, "snapshot: %s: %s", what, strerror(e));
}

/* Bytes of XSAVE state KVM_GET_XSAVE2 writes and KVM_SET_XSAVE reads on
 * this VM (api.rst, KVM_GET_XSAVE2): KVM_CHECK_EXTENSION(KVM_CAP_XSAVE2)
 * on the VM fd, at least 4096; 4096 (KVM_GET_XSAVE's struct) from a KVM
 * without it. Every MSR KVM saves and restores: KVM_GET_MSR_INDEX_LIST,
 * on /dev/kvm. Both asked once, at arch_vm_init: a snapshot may be taken
 * by a filtered thread (mvm --api-socket's, under --sandbox on) whose
 * filter allows neither query. */
void x86_snap_probe(struct vm *vm, struct x86_vm *xv)
{
	struct kvm_msr_list probe = { .nmsrs = 0 };
	int n = ioctl(vm->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE2);

	xv->xsave_size = n > (int)X86_SNAP_XSAVE_MIN ? (uint32_t)n : X86_SNAP_XSAVE_MIN;
	n = ioctl(vm->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_NESTED_STATE);
	xv->nested_size = n > 0 ? (uint32_t)n : 0;
	/* With room for none, KVM answers E2BIG and the count. */
	if (ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG) {
		xv->msr_list_err = errno;
		return;
	}
	if (probe.nmsrs > X86_SNAP_MSRS_MAX) {
		xv->msr_list_err = E2BIG;
		return;
	}
	xv->msr_list = calloc(1, sizeof(*xv->msr_list) +
			      probe.nmsrs * sizeof(xv->msr_list->indices[0]));
	if (!xv->msr_list) {
		xv->msr_list_err = ENOMEM;
		return;
	}
	xv->msr_list->nmsrs = probe.nmsrs;
	if (probe.nmsrs && ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, xv->msr_list) < 0) {
		xv->msr_list_err = errno;
		free(xv->msr_list);
		xv->msr_list = NULL;
	}
}

static uint32_t xsave_size(struct vm *vm)
{
	const struct x86_vm *xv = vm_kvm(vm)->arch_state;

	return xv->xsave_size;
}

/* Every MSR of the VM's list (x86_snap_probe) that this vCPU can read
 * into s->msrs, in KVM's order. */
static int msrs_read(struct vcpu *v, struct x86_vcpu_state *s, char *err, size_t errlen)
{
	const struct x86_vm *xv = vm_kvm(v->vm)->arch_state;
	const struct kvm_msr_list *list = xv->msr_list;
	struct msr_batch batch;
	unsigned pos, out;
	int e;

	if (!list) {
		if (xv->msr_list_err == E2BIG)
			return err_set(err, errlen, -E2BIG, "snapshot: KVM lists more MSRs to "
				       "save than this mvm saves (%u)", X86_SNAP_MSRS_MAX);
		return err_set(err, errlen, -xv->msr_list_err, "snapshot: KVM_GET_MSR_INDEX_LIST: "
			       "%s", strerror(xv->msr_list_err));
	}
	s->msrs = calloc(1, sizeof(*s->msrs) + list->nmsrs * sizeof(s->msrs->entries[0]));
	if (!s->msrs)
		return no_memory("the MSRs", err, errlen);

	for (pos = out = 0; pos < list->nmsrs;) {
		unsigned k = MIN(list->nmsrs - pos, (unsigned)MSRS_PER_CALL), i;
		int got;

		memset(&batch, 0, sizeof(batch));
		batch.hdr.nmsrs = k;
		for (i = 0; i < k; i++)
			batch.e[i].index = list->indices[pos + i];
		got = ioctl(v->fd, KVM_GET_MSRS, &batch);
		if (got < 0) {
			e = errno;
			return err_set(err, errlen, -e, "snapshot: vCPU %u: KVM_GET_MSRS: %s",
				       v->id, strerror(e));
		}
		got = MIN(got, (int)k);
		memcpy(&s->msrs->entries[out], batch.e, (size_t)got * sizeof(batch.e[0]));
		out += got;
		pos += got;
		/* KVM_GET_MSRS stops at the first MSR it cannot read: one
		 * the list names but this vCPU's CPUID does not have (the
		 * list is the host's). It is left out. */
		if ((unsigned)got < k)
			pos++;
	}
	s->msrs->nmsrs = out;
	return 0;
}

/* The state of the guest's own hypervisor (api.rst, KVM_GET_NESTED_STATE):
 * VMX's VMXON and current vmcs12, SVM's GIF and, while the vCPU runs a
 * nested guest, its vmcb12 and the guest hypervisor's registers (the
 * vCPU's registers read above are the nested guest's then). Without it a
 * restored guest that ran VMs of its own would go on in the wrong one. */
static int nested_read(struct vcpu *v, struct x86_vcpu_state *s, char *err, size_t errlen)
{
	const struct x86_vm *xv = vm_kvm(v->vm)->arch_state;
	int ret;

	if (!xv->nested_size)
		return 0;
	/* Room for the most KVM says it may give; what it gives for this
	 * vCPU (its size field, less where no nested guest runs) is checked
	 * against what a reader takes. */
	s->nested = calloc(1, MAX(xv->nested_size, X86_SNAP_NESTED_MAX));
	if (!s->nested)
		return no_memory("the nested state", err, errlen);
	s->nested->size = MAX(xv->nested_size, X86_SNAP_NESTED_HDR);
	ret = vcpu_call(v, KVM_GET_NESTED_STATE, s->nested, "KVM_GET_NESTED_STATE", err, errlen);
	if (!ret && !nested_ok(s->nested))
		ret = err_set(err, errlen, -ENOTSUP, "snapshot: vCPU %u: KVM_GET_NESTED_STATE "
			      "gave format %u, %u bytes, which this mvm does not know", v->id,
			      s->nested->format, s->nested->size);
	return ret;
}

/* Whether n says the guest ran a hypervisor of its own: VMXON done, SVM
 * in a nested guest (or about to enter one), or SVM's GIF cleared.
 * Otherwise there is nothing a host without nested state would lose. */
static bool nested_in_use(const struct kvm_nested_state *n)
{
	if (n->flags & (KVM_STATE_NESTED_GUEST_MODE | KVM_STATE_NESTED_RUN_PENDING))
		return true;
	if (n->format == KVM_STATE_NESTED_FORMAT_SVM)
		return !(n->flags & KVM_STATE_NESTED_GIF_SET);
	return n->hdr.vmx.vmxon_pa != ~0ull;
}

/* The snapshot's nested state onto vCPU v, last, as the kernel's own
 * selftests restore a vCPU (vcpu_load_state): after the special registers
 * (SVM checks EFER.SVME) and the MSRs (VMXON needs IA32_FEATURE_CONTROL;
 * KVM refuses the VMX capability MSRs, which KVM_GET_MSR_INDEX_LIST
 * lists, once the vCPU is in VMX operation), and after the events (SMM,
 * which VMX's SMM flags must find). The state set before becomes the
 * nested guest's where the vCPU ran one; its hypervisor's comes from
 * the nested state. */
static int nested_write(struct vcpu *v, const struct x86_vcpu_state *s, char *err,
			size_t errlen)
{
	const struct x86_vm *xv = vm_kvm(v->vm)->arch_state;

	if (!s->nested)
		return 0;
	if (!xv->nested_size) {
		if (!nested_in_use(s->nested))
			return 0;
		return err_set(err, errlen, -ENOTSUP, "snapshot: vCPU %u ran a hypervisor of "
			       "its own (nested state, format %u, flags 0x%x), and this host's KVM "
			       "keeps no nested state (KVM_CAP_NESTED_STATE); restore where it "
			       "does", v->id, s->nested->format, s->nested->flags);
	}
	return vcpu_call(v, KVM_SET_NESTED_STATE, s->nested, "KVM_SET_NESTED_STATE", err, errlen);
}

/* All of vCPU v's state into *s (zeroed first; x86_vcpu_state_free). */
static int vcpu_read(struct vcpu *v, struct x86_vcpu_state *s, char *err, size_t errlen)
{
	unsigned long get_xsave;
	int ret, khz;

	memset(s, 0, sizeof(*s));
	s->xsave_size = xsave_size(v->vm);
	if (s->xsave_size > X86_SNAP_XSAVE_MAX)
		return err_set(err, errlen, -E2BIG,
			       "snapshot: KVM keeps %u bytes of XSAVE state, this mvm saves at most %u",
			       s->xsave_size, X86_SNAP_XSAVE_MAX);
	s->xsave = calloc(1, s->xsave_size);
	s->cpuid = calloc(1, sizeof(*s->cpuid) + X86_SNAP_CPUID_MAX * sizeof(s->cpuid->entries[0]));
	if (!s->xsave || !s->cpuid)
		return no_memory("the vCPU state", err, errlen);
	get_xsave = s->xsave_size > X86_SNAP_XSAVE_MIN ? KVM_GET_XSAVE2 : KVM_GET_XSAVE;

	/* Firecracker's order, for its reasons. KVM_GET_MP_STATE first: it
	 * has KVM act on a pending INIT or SIPI (kvm_apic_accept_events),
	 * which changes the registers and the LAPIC the later reads take.
	 * KVM_GET_LAPIC folds posted interrupts into the IRR. The events
	 * last: KVM_GET_VCPU_EVENTS reports the exception, interrupt and NMI
	 * KVM has yet to inject, which the reads before it may have moved
	 * (KVM_GET_SREGS reports a pending interrupt too, in
	 * interrupt_bitmap). */
	ret = vcpu_call(v, KVM_GET_MP_STATE, &s->mp, "KVM_GET_MP_STATE", err, errlen);
	if (!ret)
		ret = vcpu_call(v, KVM_GET_REGS, &s->regs, "KVM_GET_REGS", err, errlen);
	if (!ret)
		ret = vcpu_call(v, KVM_GET_SREGS, &s->sregs, "KVM_GET_SREGS", err, errlen);
	if (!ret)
		ret = vcpu_call(v, get_xsave, s->xsave,
				get_xsave == KVM_GET_XSAVE2 ? "KVM_GET_XSAVE2" : "KVM_GET_XSAVE",
				err, errlen);
	if (!ret)
		ret = vcpu_call(v, KVM_GET_XCRS, &s->xcrs, "KVM_GET_XCRS", err, errlen);
	if (!ret)
		ret = vcpu_call(v, KVM_GET_DEBUGREGS, &s->debugregs, "KVM_GET_DEBUGREGS", err,
				errlen);
	if (!ret)
		ret = vcpu_call(v, KVM_GET_LAPIC, &s->lapic, "KVM_GET_LAPIC", err, errlen);
	if (!ret)
		ret = msrs_read(v, s, err, errlen);
	if (!ret)
		ret = vcpu_call(v, KVM_GET_VCPU_EVENTS, &s->events, "KVM_GET_VCPU_EVENTS", err,
				errlen);
	if (!ret)
		ret = nested_read(v, s, err, errlen);
	if (ret)
		return ret;

	/* The CPU model: reads without side effects. */
	s->cpuid->nent = X86_SNAP_CPUID_MAX;
	ret = vcpu_call(v, KVM_GET_CPUID2, s->cpuid, "KVM_GET_CPUID2", err, errlen);
	if (ret)
		return ret;
	khz = ioctl(v->fd, KVM_GET_TSC_KHZ, 0);
	if (khz <= 0)
		return err_set(err, errlen, khz < 0 ? -errno : -EIO,
			       "snapshot: vCPU %u: KVM_GET_TSC_KHZ: %s", v->id,
			       khz < 0 ? strerror(errno) : "no rate");
	s->tsc_khz = (uint32_t)khz;
	if (s->xcrs.nr_xcrs > KVM_MAX_XCRS)
		return err_set(err, errlen, -EIO, "snapshot: vCPU %u: KVM_GET_XCRS: %u XCRs",
			       v->id, s->xcrs.nr_xcrs);
	x86_msrs_save_fixup(s->msrs->entries, s->msrs->nmsrs);
	return 0;
}

int arch_vcpu_save(struct vcpu *v, struct snap_w *w, char *err, size_t errlen)
{
	struct x86_vcpu_state s;
	int ret;

	ret = vcpu_read(v, &s, err, errlen);
	if (!ret) {
		ret = x86_vcpu_state_put(w, v->id, &s);
		if (ret)
			err_set(err, errlen, ret, "snapshot: vCPU %u: %s", v->id,
				ret == -ENOMEM ? "out of memory" : strerror(-ret));
	}
	x86_vcpu_state_free(&s);
	return ret;
}

/* Run vCPU v at the snapshot's TSC rate (api.rst, KVM_SET_TSC_KHZ): KVM
 * takes one within its tolerance of this host's as it is, another only
 * where the CPU scales the TSC. */
static int tsc_rate_set(struct vcpu *v, uint32_t khz, char *err, size_t errlen)
{
	int here = ioctl(v->fd, KVM_GET_TSC_KHZ, 0), e;

	if (here <= 0)
		return err_set(err, errlen, here < 0 ? -errno : -EIO,
			       "snapshot: vCPU %u: KVM_GET_TSC_KHZ: %s", v->id,
			       here < 0 ? strerror(errno) : "no rate");
	if ((uint32_t)here == khz || ioctl(v->fd, KVM_SET_TSC_KHZ, (unsigned long)khz) == 0)
		return 0;
	e = errno;
	return err_set(err, errlen, -ENOTSUP,
		       "snapshot: vCPU %u's TSC ran at %u kHz, this host's runs at %d kHz and KVM "
		       "cannot scale it (KVM_SET_TSC_KHZ: %s); restore on a host with the same "
		       "TSC rate", v->id, khz, here, strerror(e));
}

static int msrs_write(struct vcpu *v, const struct kvm_msrs *msrs, char *err, size_t errlen)
{
	struct msr_batch batch;
	unsigned pos, k;

	for (pos = 0; pos < msrs->nmsrs; pos += k) {
		int got, e;

		k = MIN(msrs->nmsrs - pos, (unsigned)MSRS_PER_CALL);
		memset(&batch, 0, sizeof(batch));
		batch.hdr.nmsrs = k;
		memcpy(batch.e, &msrs->entries[pos], k * sizeof(batch.e[0]));
		got = ioctl(v->fd, KVM_SET_MSRS, &batch);
		if (got < 0) {
			e = errno;
			return err_set(err, errlen, -e, "snapshot: vCPU %u: KVM_SET_MSRS: %s",
				       v->id, strerror(e));
		}
		/* It stops at the first it refuses. */
		if ((unsigned)got < k)
			return err_set(err, errlen, -ENOTSUP,
				       "snapshot: vCPU %u: KVM_SET_MSRS: this host's KVM refuses MSR "
				       "0x%x = 0x%llx; restore on a host with the same CPU and kernel",
				       v->id, batch.e[got].index,
				       (unsigned long long)batch.e[got].data);
	}
	return 0;
}

int arch_vcpu_load(struct vcpu *v, const struct snap_file *f, char *err, size_t errlen)
{
	const struct x86_vm *xv = vm_kvm(v->vm)->arch_state;
	struct x86_vcpu_state s;
	uint32_t here;
	int ret;

	/* Check first, set after: all sections read and checked, and what
	 * this host cannot give refused, before the first KVM_SET. */
	ret = x86_vcpu_state_get(f, v->id, &s, err, errlen);
	if (ret)
		goto free_state;
	ret = x86_cpuid_check(s.cpuid, xv->cpuid, v->id, err, errlen);
	if (ret)
		goto free_state;
	here = xsave_size(v->vm);
	if (s.xsave_size != here) {
		ret = err_set(err, errlen, -ENOTSUP,
			      "snapshot: vCPU %u's XSAVE state is %u bytes, this host's KVM keeps "
			      "%u; restore on a host with the same CPU features", v->id,
			      s.xsave_size, here);
		goto free_state;
	}
	/* The rate before the TSC itself (an MSR), which KVM scales by it. */
	ret = tsc_rate_set(v, s.tsc_khz, err, errlen);
	if (ret)
		goto free_state;
	x86_msrs_load_order(s.msrs->entries, s.msrs->nmsrs);

	/* Firecracker's order. CPUID first: which MSRs and XCR0 bits KVM
	 * takes depends on it. The special registers before the LAPIC: they
	 * carry the APIC base MSR, whose x2APIC bit decides how KVM reads
	 * the LAPIC page. The LAPIC before the MSRs: KVM drops a TSC
	 * deadline unless the LAPIC timer is in TSC-deadline mode. The
	 * events last, onto the state they belong to. */
	ret = vcpu_call(v, KVM_SET_CPUID2, s.cpuid, "KVM_SET_CPUID2", err, errlen);
	if (!ret)
		ret = vcpu_call(v, KVM_SET_MP_STATE, &s.mp, "KVM_SET_MP_STATE", err, errlen);
	if (!ret)
		ret = vcpu_call(v, KVM_SET_REGS, &s.regs, "KVM_SET_REGS", err, errlen);
	if (!ret)
		ret = vcpu_call(v, KVM_SET_SREGS, &s.sregs, "KVM_SET_SREGS", err, errlen);
	/* KVM_SET_XSAVE reads KVM_CAP_XSAVE2's size (checked above). */
	if (!ret)
		ret = vcpu_call(v, KVM_SET_XSAVE, s.xsave, "KVM_SET_XSAVE", err, errlen);
	if (!ret)
		ret = vcpu_call(v, KVM_SET_XCRS, &s.xcrs, "KVM_SET_XCRS", err, errlen);
	if (!ret)
		ret = vcpu_call(v, KVM_SET_DEBUGREGS, &s.debugregs, "KVM_SET_DEBUGREGS", err,
				errlen);
	if (!ret)
		ret = vcpu_call(v, KVM_SET_LAPIC, &s.lapic, "KVM_SET_LAPIC", err, errlen);
	if (!ret)
		ret = msrs_write(v, s.msrs, err, errlen);
	if (!ret)
		ret = vcpu_call(v, KVM_SET_VCPU_EVENTS, &s.events, "KVM_SET_VCPU_EVENTS", err,
				errlen);
	if (!ret)
		ret = nested_write(v, &s, err, errlen);
free_state:
	x86_vcpu_state_free(&s);
	return ret;
}

int arch_vm_save(struct vm *vm, struct snap_w *w, char *err, size_t errlen)
{
	const struct x86_vm *xv = vm_kvm(vm)->arch_state;
	struct x86_vm_state s;
	struct kvm_irqchip chip;
	unsigned i;
	int ret;

	memset(&s, 0, sizeof(s));
	/* KVM_GET_IRQCHIP, one chip a call. */
	for (i = 0; i < 3; i++) {
		memset(&chip, 0, sizeof(chip));
		chip.chip_id = i;       /* KVM_IRQCHIP_PIC_MASTER, _SLAVE, _IOAPIC */
		ret = vm_call(vm, KVM_GET_IRQCHIP, &chip, "KVM_GET_IRQCHIP", err, errlen);
		if (ret)
			return ret;
		if (i == KVM_IRQCHIP_IOAPIC)
			s.ioapic = chip.chip.ioapic;
		else
			s.pic[i] = chip.chip.pic;
	}
	ret = vm_call(vm, KVM_GET_PIT2, &s.pit, "KVM_GET_PIT2", err, errlen);
	if (ret)
		return ret;
	/* The clock as the pause stopped it (arch_vm_clock_save), not as it
	 * reads now: the guest's time stands still from the pause on. */
	s.clock = xv->clock;
	ret = x86_vm_state_put(w, &s);
	if (ret)
		return err_set(err, errlen, ret, "snapshot: the VM: %s",
			       ret == -ENOMEM ? "out of memory" : strerror(-ret));
	return 0;
}

int arch_vm_load(struct vm *vm, const struct snap_file *f, char *err, size_t errlen)
{
	struct x86_vm *xv = vm_kvm(vm)->arch_state;
	struct x86_vm_state s;
	struct kvm_clock_data clock;
	struct kvm_irqchip chip;
	unsigned i;
	int ret;

	ret = x86_vm_state_get(f, &s, err, errlen);
	if (ret)
		return ret;
	/* KVM_SET_PIT2 reloads each channel's count from now on: the
	 * saved count_load_time (host time of another boot) is not used. */
	ret = vm_call(vm, KVM_SET_PIT2, &s.pit, "KVM_SET_PIT2", err, errlen);
	for (i = 0; i < 3 && !ret; i++) {
		memset(&chip, 0, sizeof(chip));
		chip.chip_id = i;
		if (i == KVM_IRQCHIP_IOAPIC)
			chip.chip.ioapic = s.ioapic;
		else
			chip.chip.pic = s.pic[i];
		ret = vm_call(vm, KVM_SET_IRQCHIP, &chip, "KVM_SET_IRQCHIP", err, errlen);
	}
	if (ret)
		return ret;
	/* The clock value alone, flags 0, as arch_vm_clock_restore: the
	 * guest's clock goes on from where the snapshot stopped it. Kept as
	 * arch_vm_clock_save would have, for arch_vm_clock_restore. */
	memset(&clock, 0, sizeof(clock));
	clock.clock = s.clock.clock;
	ret = vm_call(vm, KVM_SET_CLOCK, &clock, "KVM_SET_CLOCK", err, errlen);
	if (ret)
		return ret;
	xv->clock = s.clock;
	return 0;
}
