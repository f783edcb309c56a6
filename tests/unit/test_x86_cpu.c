/* Per-vCPU state: CPUID adjustments on a synthetic KVM_GET_SUPPORTED_CPUID
 * table, MSRs, LAPIC LINT pins, FPU and BSP entry registers. No KVM. */
#include "tests/unit/check.h"
#include "arch/x86/x86.h"
#include "arch/x86/layout.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

#include <errno.h>

#define SUP_MAX 32

struct cpuid_buf {
	struct kvm_cpuid2 c;
	struct kvm_cpuid_entry2 e[SUP_MAX + 16];
};

static void add(struct cpuid_buf *b, uint32_t fn, uint32_t idx, uint32_t flags,
		uint32_t eax, uint32_t ebx, uint32_t ecx, uint32_t edx)
{
	struct kvm_cpuid_entry2 *e = &b->c.entries[b->c.nent++];

	memset(e, 0, sizeof(*e));
	e->function = fn;
	e->index = idx;
	e->flags = flags;
	e->eax = eax; e->ebx = ebx; e->ecx = ecx; e->edx = edx;
}

#define SIG KVM_CPUID_FLAG_SIGNIFCANT_INDEX

/* Roughly what KVM reports on an Intel host with 8 threads per package. */
static void supported_table(struct cpuid_buf *b)
{
	memset(b, 0, sizeof(*b));
	add(b, 0, 0, 0, 0x1f, 0x756e6547, 0x6c65746e, 0x49656e69);
	add(b, 1, 0, 0, 0x000906ea, 0x07100800, 0x7ffafbff, 0xbfebfbff & ~(1u << 28));
	add(b, 4, 0, SIG, 0x1c004121, 0x01c0003f, 0x3f, 0);   /* L1d, 8 sharing */
	add(b, 4, 1, SIG, 0x1c004122, 0x01c0003f, 0x3f, 0);   /* L1i */
	add(b, 4, 2, SIG, 0x1c004143, 0x00c0003f, 0x3ff, 0);  /* L2 */
	add(b, 4, 3, SIG, 0x1c03c163, 0x02c0003f, 0x2fff, 6); /* L3, 16 sharing */
	add(b, 4, 4, SIG, 0, 0, 0, 0);
	add(b, 0xa, 0, 0, 0x07300404, 0, 0, 0x603);
	add(b, 0xb, 0, SIG, 1, 2, 0x100, 7);                  /* host SMT level */
	add(b, 0xb, 1, SIG, 4, 8, 0x201, 7);
	add(b, 0x1f, 0, SIG, 1, 2, 0x100, 7);
	add(b, 0x1f, 1, SIG, 4, 8, 0x201, 7);
	add(b, 0x40000000, 0, 0, 0x40000001, 0, 0, 0);
	add(b, 0x40000001, 0, 0, 0x01007afb, 0, 0, 0);        /* kvm-clock & co */
	add(b, 0x80000000, 0, 0, 0x80000008, 0, 0, 0);
	add(b, 0x80000008, 0, 0, 0x3027, 0, 0, 0);
}

static struct kvm_cpuid_entry2 *find(struct kvm_cpuid2 *c, uint32_t fn, uint32_t idx)
{
	unsigned i;

	for (i = 0; i < c->nent; i++)
		if (c->entries[i].function == fn && c->entries[i].index == idx)
			return &c->entries[i];
	return NULL;
}

static unsigned count(struct kvm_cpuid2 *c, uint32_t fn)
{
	unsigned i, n = 0;

	for (i = 0; i < c->nent; i++)
		n += c->entries[i].function == fn;
	return n;
}

static void build(struct cpuid_buf *out, unsigned id, unsigned ncpus)
{
	struct cpuid_buf sup;

	supported_table(&sup);
	memset(out, 0, sizeof(*out));
	CHECK_EQ(x86_cpuid_build(&sup.c, id, ncpus, &out->c, SUP_MAX + 16), 0);
}

TEST(cpuid_leaf1_apic_id_per_vcpu)
{
	struct cpuid_buf o;
	unsigned id;

	for (id = 0; id < 4; id++) {
		build(&o, id, 4);
		CHECK_EQ(find(&o.c, 1, 0)->ebx >> 24, id);
		CHECK_EQ((find(&o.c, 1, 0)->ebx >> 16) & 0xff, 4);   /* addressable ids */
		CHECK_EQ(find(&o.c, 1, 0)->ebx & 0xffff, 0x0800);     /* CLFLUSH size kept */
	}
	build(&o, 200, 254);
	CHECK_EQ(find(&o.c, 1, 0)->ebx >> 24, 200);
}

TEST(cpuid_hypervisor_bit_and_htt)
{
	struct cpuid_buf o;

	build(&o, 0, 4);
	CHECK(find(&o.c, 1, 0)->ecx & (1u << 31));
	CHECK(find(&o.c, 1, 0)->edx & (1u << 28));
	build(&o, 0, 1);
	CHECK(find(&o.c, 1, 0)->ecx & (1u << 31));
	CHECK(!(find(&o.c, 1, 0)->edx & (1u << 28)));
}

TEST(cpuid_leaf_b_topology_one_thread_per_core)
{
	struct cpuid_buf o;
	struct kvm_cpuid_entry2 *e;

	build(&o, 5, 6);
	CHECK_EQ(count(&o.c, 0xb), 3);                 /* host's leaves replaced */
	e = find(&o.c, 0xb, 0);
	CHECK_EQ(e->eax, 0); CHECK_EQ(e->ebx, 1); CHECK_EQ(e->ecx, 0x100); CHECK_EQ(e->edx, 5);
	CHECK(e->flags & SIG);
	e = find(&o.c, 0xb, 1);
	CHECK_EQ(e->eax, 3);                           /* 6 cores need 3 id bits */
	CHECK_EQ(e->ebx, 6); CHECK_EQ(e->ecx, 0x201); CHECK_EQ(e->edx, 5);
	e = find(&o.c, 0xb, 2);
	CHECK_EQ(e->ebx, 0); CHECK_EQ((e->ecx >> 8) & 0xff, 0);
	CHECK_EQ(count(&o.c, 0x1f), 3);
	CHECK_EQ(find(&o.c, 0x1f, 1)->ebx, 6);
	CHECK_EQ(find(&o.c, 0x1f, 0)->edx, 5);
}

TEST(cpuid_leaf_1f_only_when_supported)
{
	struct cpuid_buf sup, o;
	unsigned i, j = 0;

	supported_table(&sup);
	for (i = 0; i < sup.c.nent; i++)       /* drop 0x1f, max basic 0xd */
		if (sup.c.entries[i].function != 0x1f)
			sup.c.entries[j++] = sup.c.entries[i];
	sup.c.nent = j;
	sup.c.entries[0].eax = 0xd;
	memset(&o, 0, sizeof(o));
	CHECK_EQ(x86_cpuid_build(&sup.c, 0, 2, &o.c, SUP_MAX + 16), 0);
	CHECK_EQ(count(&o.c, 0x1f), 0);
	CHECK_EQ(count(&o.c, 0xb), 3);
}

/* KVM_CAP_TSC_DEADLINE_TIMER: the bit KVM leaves to userspace (leaf 1
 * ECX[24]) reaches every vCPU; without the capability it stays clear. */
TEST(cpuid_tsc_deadline_from_the_capability)
{
	struct cpuid_buf sup, o;

	supported_table(&sup);
	find(&sup.c, 1, 0)->ecx &= ~(1u << 24);      /* as KVM reports it */
	x86_cpuid_add_emulated(&sup.c, false);
	memset(&o, 0, sizeof(o));
	CHECK_EQ(x86_cpuid_build(&sup.c, 1, 2, &o.c, SUP_MAX + 16), 0);
	CHECK(!(find(&o.c, 1, 0)->ecx & (1u << 24)));
	x86_cpuid_add_emulated(&sup.c, true);
	CHECK_EQ(x86_cpuid_build(&sup.c, 1, 2, &o.c, SUP_MAX + 16), 0);
	CHECK(find(&o.c, 1, 0)->ecx & (1u << 24));
	CHECK_EQ(find(&o.c, 1, 0)->ecx & ~(1u << 24) & ~(1u << 31), 0x7ffafbffu & ~(1u << 24));
}

TEST(cpuid_leaf4_cores_and_cache_sharing)
{
	struct cpuid_buf o;

	build(&o, 1, 4);
	CHECK_EQ(find(&o.c, 4, 0)->eax >> 26, 3);                 /* 4 cores - 1 */
	CHECK_EQ((find(&o.c, 4, 0)->eax >> 14) & 0xfff, 0);       /* L1d per core */
	CHECK_EQ((find(&o.c, 4, 2)->eax >> 14) & 0xfff, 0);       /* L2 per core */
	CHECK_EQ((find(&o.c, 4, 3)->eax >> 14) & 0xfff, 3);       /* L3 shared */
	CHECK_EQ(find(&o.c, 4, 3)->eax & 0x3fff, 0x0163);          /* type/level kept */
	CHECK_EQ(find(&o.c, 4, 4)->eax, 0);                        /* terminator */
}

TEST(cpuid_kvm_signature_and_features_kept)
{
	struct cpuid_buf o;
	struct kvm_cpuid_entry2 *e;
	char sig[13];

	build(&o, 0, 2);
	e = find(&o.c, 0x40000000, 0);
	memcpy(sig, &e->ebx, 4); memcpy(sig + 4, &e->ecx, 4); memcpy(sig + 8, &e->edx, 4);
	sig[12] = 0;
	CHECK_STR(sig, "KVMKVMKVM");
	CHECK(e->eax >= 0x40000001);
	CHECK_EQ(find(&o.c, 0x40000001, 0)->eax, 0x01007afb);
}

TEST(cpuid_no_pmu)
{
	struct cpuid_buf o;

	build(&o, 0, 2);
	CHECK_EQ(find(&o.c, 0xa, 0)->eax, 0);
	CHECK_EQ(find(&o.c, 0xa, 0)->edx, 0);
}

TEST(cpuid_amd_core_count)
{
	struct cpuid_buf o;

	build(&o, 0, 8);
	CHECK_EQ(find(&o.c, 0x80000008, 0)->ecx & 0xff, 7);
	CHECK_EQ((find(&o.c, 0x80000008, 0)->ecx >> 12) & 0xf, 3);
	CHECK_EQ(find(&o.c, 0x80000008, 0)->eax, 0x3027);
}

TEST(cpuid_output_capacity_checked)
{
	struct cpuid_buf sup, o;

	supported_table(&sup);
	CHECK_EQ(x86_cpuid_build(&sup.c, 0, 2, &o.c, sup.c.nent), -E2BIG);
}

TEST(msrs_fast_strings_and_writeback_mtrr)
{
	struct kvm_msr_entry e[16];
	unsigned n = x86_msrs_init(e, 16), i;
	bool misc = false, mtrr = false, lstar = false;

	CHECK(n >= 11);
	for (i = 0; i < n; i++) {
		if (e[i].index == 0x1a0) { CHECK_EQ(e[i].data, 1); misc = true; }
		if (e[i].index == 0x2ff) { CHECK_EQ(e[i].data, 0x806); mtrr = true; }
		if (e[i].index == 0xc0000082) { CHECK_EQ(e[i].data, 0); lstar = true; }
	}
	CHECK(misc && mtrr && lstar);
	CHECK_EQ(x86_msrs_init(e, 3), 3);
}

TEST(lapic_lint0_extint_lint1_nmi)
{
	struct kvm_lapic_state l;

	memset(&l, 0, sizeof(l));
	le32_store(l.regs + 0x350, 0x10000);          /* masked, fixed */
	le32_store(l.regs + 0x360, 0x10000 | 0x200);  /* masked, SMI */
	x86_lapic_set_lints(&l);
	CHECK_EQ(le32_load(l.regs + 0x350), 0x10700);
	CHECK_EQ(le32_load(l.regs + 0x360), 0x10400);
}

TEST(fpu_default_control_words)
{
	struct kvm_fpu f;

	memset(&f, 0xff, sizeof(f));
	x86_fpu_init(&f);
	CHECK_EQ(f.fcw, 0x37f);
	CHECK_EQ(f.mxcsr, 0x1f80);
	CHECK_EQ(f.fsw, 0);
}

TEST(bsp_regs_64bit_entry)
{
	struct x86_boot_info info = { .pvh = false, .entry = 0x100200, .params = X86_BOOT_PARAMS };
	struct kvm_regs r;
	struct kvm_sregs s;

	memset(&s, 0, sizeof(s));
	s.apic_base = 0xfee00900;
	x86_bsp_regs(&info, &r, &s);
	CHECK_EQ(r.rip, 0x100200);
	CHECK_EQ(r.rsi, X86_BOOT_PARAMS);
	CHECK_EQ(r.rflags, 2);
	CHECK_EQ(s.cs.selector, 0x10); CHECK_EQ(s.cs.l, 1); CHECK_EQ(s.cs.db, 0);
	CHECK_EQ(s.ds.selector, 0x18); CHECK_EQ(s.ss.selector, 0x18);
	CHECK_EQ(s.tr.type, 0xb); CHECK_EQ(s.tr.s, 0);
	CHECK(s.cr0 & 1); CHECK(s.cr0 & (1ULL << 31));
	CHECK(!(s.cr0 & (1ULL << 30)));                  /* caches on */
	CHECK_EQ(s.cr3, X86_PML4_ADDR);
	CHECK(s.cr4 & (1 << 5));
	CHECK_EQ(s.efer, 0x500);
	CHECK_EQ(s.gdt.base, X86_GDT_ADDR);
	CHECK_EQ(s.gdt.limit, X86_GDT_ENTRIES * 8 - 1);
	CHECK_EQ(s.apic_base, 0xfee00900);               /* untouched */
}

TEST(bsp_regs_pvh_entry)
{
	struct x86_boot_info info = { .pvh = true, .entry = 0x1000040, .params = X86_BOOT_PARAMS };
	struct kvm_regs r;
	struct kvm_sregs s;

	memset(&s, 0, sizeof(s));
	x86_bsp_regs(&info, &r, &s);
	CHECK_EQ(r.rip, 0x1000040);
	CHECK_EQ(r.rbx, X86_BOOT_PARAMS);
	CHECK_EQ(s.cs.selector, 0x08); CHECK_EQ(s.cs.l, 0); CHECK_EQ(s.cs.db, 1);
	CHECK_EQ(s.cs.limit, 0xffffffff); CHECK_EQ(s.cs.base, 0);
	CHECK_EQ(s.ds.db, 1);
	CHECK(s.cr0 & 1); CHECK(!(s.cr0 & (1ULL << 31)));
	CHECK_EQ(s.efer, 0);
	CHECK_EQ(s.cr4, 0);
}
