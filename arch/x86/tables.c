/* Low-memory CPU tables the BSP starts with: a flat GDT and identity page
 * tables for the low 4 GiB (the 64-bit boot protocol requires paging on
 * with the kernel, zero page and command line identity-mapped). */
#include "arch/x86/x86.h"
#include "arch/x86/layout.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <string.h>

/* flags: access byte in bits 0-7 (P, DPL, S, type), and G, D/B, L, AVL in
 * bits 12-15: the two places they live in a descriptor (SDM vol. 3, 3.4.5). */
uint64_t x86_gdt_entry(uint32_t base, uint32_t limit, uint16_t flags)
{
	return ((uint64_t)(base & 0xff000000u) << 32) |
	       ((uint64_t)(flags & 0xf0ffu) << 40) |
	       ((uint64_t)(limit & 0x000f0000u) << 32) |
	       ((uint64_t)(base & 0x00ffffffu) << 16) |
	       (uint64_t)(limit & 0x0000ffffu);
}

int x86_gdt_write(struct guest_mem *gm)
{
	const uint64_t gdt[X86_GDT_ENTRIES] = {
		[0] = 0,
		[X86_SEL_CODE32 >> 3] = x86_gdt_entry(0, 0xfffff, 0xc09b), /* G, D, P, code r/x accessed */
		[X86_SEL_CODE64 >> 3] = x86_gdt_entry(0, 0xfffff, 0xa09b), /* G, L, P, code r/x accessed */
		[X86_SEL_DATA >> 3]   = x86_gdt_entry(0, 0xfffff, 0xc093), /* G, B, P, data r/w accessed */
		[X86_SEL_TSS >> 3]    = x86_gdt_entry(0, 0xfffff, 0x808b), /* G, P, busy 32-bit TSS */
	};
	uint8_t *p = gmem_ptr(gm, X86_GDT_ADDR, sizeof(gdt));
	unsigned i;

	if (!p)
		return -EFAULT;
	for (i = 0; i < X86_GDT_ENTRIES; i++)
		le64_store(p + 8 * i, gdt[i]);
	return 0;
}

#define PTE_P  (1ULL << 0)
#define PTE_RW (1ULL << 1)
#define PTE_PS (1ULL << 7)

int x86_pagetables_write(struct guest_mem *gm)
{
	uint8_t *pml4 = gmem_ptr(gm, X86_PML4_ADDR, 4096);
	uint8_t *pdpt = gmem_ptr(gm, X86_PDPT_ADDR, 4096);
	uint8_t *pd = gmem_ptr(gm, X86_PD_ADDR, 4 * 4096);
	unsigned i;

	if (!pml4 || !pdpt || !pd)
		return -EFAULT;
	memset(pml4, 0, 4096);
	memset(pdpt, 0, 4096);
	le64_store(pml4, X86_PDPT_ADDR | PTE_P | PTE_RW);
	for (i = 0; i < 4; i++)
		le64_store(pdpt + 8 * i, (X86_PD_ADDR + 4096ULL * i) | PTE_P | PTE_RW);
	/* 2048 2 MiB pages: [0, 4 GiB), the MMIO hole included so that early
	 * kernel code may touch the LAPIC/IOAPIC before it builds its own. */
	for (i = 0; i < 2048; i++)
		le64_store(pd + 8 * i, ((uint64_t)i << 21) | PTE_P | PTE_RW | PTE_PS);
	return 0;
}
