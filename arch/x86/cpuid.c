/* Guest CPUID, derived from KVM_GET_SUPPORTED_CPUID per vCPU.
 *
 * KVM reports what it can virtualize but leaves the parts that describe
 * *this* VM to the VMM: the initial APIC id of each vCPU and the topology.
 * mvm presents ncpus cores with one thread each in a single package, so
 * that the guest's view of siblings and cache sharing is consistent with
 * the APIC ids 0..ncpus-1 that KVM assigns from the vCPU ids.
 * References: SDM vol. 2A CPUID (leaves 1, 4, 0xB, 0x1F), AMD APM vol. 3
 * (0x80000008, 0x8000001E), Documentation/virt/kvm/x86/cpuid.rst. */
#include "arch/x86/x86.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <string.h>

#define CPUID_1_ECX_HYPERVISOR (1u << 31)
#define CPUID_1_ECX_TSC_DEADLINE (1u << 24)
#define CPUID_1_EDX_HTT        (1u << 28)

/* Bits of x2APIC id that select the core: ceil(log2(ncpus)). */
static unsigned core_shift(unsigned ncpus)
{
	unsigned s = 0;

	while ((1u << s) < ncpus)
		s++;
	return s;
}

static int push(struct kvm_cpuid2 *out, unsigned cap, const struct kvm_cpuid_entry2 *e)
{
	if (out->nent >= cap)
		return -E2BIG;
	out->entries[out->nent++] = *e;
	return 0;
}

/* Leaf 0xB / 0x1F: subleaf 0 SMT (1 thread per core), subleaf 1 core
 * (ncpus cores), subleaf 2 invalid, which ends the enumeration. */
static int push_topology(struct kvm_cpuid2 *out, unsigned cap, uint32_t leaf,
			 unsigned id, unsigned ncpus)
{
	struct kvm_cpuid_entry2 e;
	unsigned sub;
	int ret;

	for (sub = 0; sub < 3; sub++) {
		memset(&e, 0, sizeof(e));
		e.function = leaf;
		e.index = sub;
		e.flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX;
		e.edx = id;                         /* x2APIC id */
		if (sub == 0) {
			e.eax = 0;                  /* no bits for the thread */
			e.ebx = 1;
			e.ecx = (1u << 8) | sub;    /* level type SMT */
		} else if (sub == 1) {
			e.eax = core_shift(ncpus);
			e.ebx = ncpus;
			e.ecx = (2u << 8) | sub;    /* level type core */
		} else {
			e.ecx = sub;                /* level type 0: invalid */
		}
		ret = push(out, cap, &e);
		if (ret)
			return ret;
	}
	return 0;
}

int x86_cpuid_build(const struct kvm_cpuid2 *supported, unsigned id, unsigned ncpus,
		    struct kvm_cpuid2 *out, unsigned out_cap)
{
	unsigned shift = core_shift(ncpus), i;
	uint32_t max_basic = 0;
	bool has_1f = false;
	int ret;

	out->nent = 0;
	out->padding = 0;
	for (i = 0; i < supported->nent; i++) {
		if (supported->entries[i].function == 0)
			max_basic = supported->entries[i].eax;
		if (supported->entries[i].function == 0x1f)
			has_1f = true;
	}

	for (i = 0; i < supported->nent; i++) {
		struct kvm_cpuid_entry2 e = supported->entries[i];
		uint32_t ids = 1u << shift;

		switch (e.function) {
		case 0x1:
			/* EBX[31:24] initial APIC id, [23:16] addressable ids. */
			e.ebx = (e.ebx & 0x0000ffffu) | ((id & 0xffu) << 24) |
				((ids > 0xff ? 0xffu : ids) << 16);
			e.ecx |= CPUID_1_ECX_HYPERVISOR;
			if (ncpus > 1)
				e.edx |= CPUID_1_EDX_HTT;
			else
				e.edx &= ~CPUID_1_EDX_HTT;
			break;
		case 0x4:
			/* EAX[31:26] cores per package - 1; [25:14] logical
			 * processors sharing this cache - 1: one per L1/L2 (one
			 * thread per core), all of them for L3. */
			if ((e.eax & 0x1f) == 0)
				break;
			e.eax &= ~((0x3fu << 26) | (0xfffu << 14));
			e.eax |= (MIN(ids, 64u) - 1) << 26;
			if (((e.eax >> 5) & 7) >= 3)
				e.eax |= (MIN(ids, 4096u) - 1) << 14;
			break;
		case 0xa:
			/* No virtual PMU: its counters are unreliable under
			 * nesting and a microVM has no use for them. */
			e.eax = e.ebx = e.ecx = e.edx = 0;
			break;
		case 0xb:
		case 0x1f:
			continue;           /* rebuilt below */
		case 0x40000000:
			/* "KVMKVMKVM\0\0\0": Linux's KVM guest support (kvm-clock,
			 * PV EOI, steal time) keys off this signature. */
			e.eax = MAX(e.eax, 0x40000001u);
			e.ebx = 0x4b4d564b;
			e.ecx = 0x564b4d56;
			e.edx = 0x0000004d;
			break;
		case 0x80000008:
			/* AMD: ECX[15:12] APIC id bits for the core, [7:0] cores - 1. */
			e.ecx = (e.ecx & ~0xf0ffu) | (shift << 12) | ((ncpus - 1) & 0xff);
			break;
		case 0x8000001e:
			/* AMD: extended APIC id, core id, 1 thread per core, node 0. */
			e.eax = id;
			e.ebx = (e.ebx & ~0xffffu) | (id & 0xff);
			e.ecx = 0;
			break;
		default:
			break;
		}
		ret = push(out, out_cap, &e);
		if (ret)
			return ret;
	}
	if (max_basic >= 0xb) {
		ret = push_topology(out, out_cap, 0xb, id, ncpus);
		if (ret)
			return ret;
	}
	if (max_basic >= 0x1f && has_1f) {
		ret = push_topology(out, out_cap, 0x1f, id, ncpus);
		if (ret)
			return ret;
	}
	return 0;
}

void x86_cpuid_add_emulated(struct kvm_cpuid2 *supported, bool tsc_deadline)
{
	unsigned i;

	for (i = 0; i < supported->nent; i++)
		if (supported->entries[i].function == 0x1 && tsc_deadline)
			supported->entries[i].ecx |= CPUID_1_ECX_TSC_DEADLINE;
}
