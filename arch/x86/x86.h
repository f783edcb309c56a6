/* arch/x86 internals: the table-building steps behind boot.h, split from
 * the KVM ioctls so that unit tests can run them on a fake guest memory. */
#ifndef MVM_X86_X86_H
#define MVM_X86_X86_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/kvm.h>

#include "vmm/base/guest_mem.h"
#include "arch/x86/boot.h"

/* ---- e820 ---------------------------------------------------------------- */
#define X86_E820_RAM      1
#define X86_E820_RESERVED 2
#define X86_E820_MAX      128   /* entries in the zero page */

struct x86_e820_entry {
	uint64_t addr;
	uint64_t size;
	uint32_t type;
};

/* The guest's memory map for mem_size bytes of RAM laid out like
 * gmem_map(mem_size, X86_MMIO_HOLE_START): [0, 0x9fc00) RAM, [0x9fc00,
 * 1 MiB) reserved (MP table, legacy ROM area), [1 MiB, low end) RAM, and
 * the rest from 4 GiB. Never covers the MMIO hole. Returns the count. */
unsigned x86_e820_build(uint64_t mem_size, struct x86_e820_entry *e, unsigned max);

/* End of RAM below the MMIO hole. */
uint64_t x86_lowmem_end(uint64_t mem_size);

/* ---- kernel images -------------------------------------------------------- */
/* Boot protocol constants (Documentation/arch/x86/boot.rst). */
#define X86_BP_MIN_VERSION   0x020c   /* 2.12: xloadflags, 64-bit entry */
#define X86_XLF_KERNEL_64    (1u << 0)
#define X86_LF_LOADED_HIGH   (1u << 0)
#define X86_LF_CAN_USE_HEAP  (1u << 7)
#define X86_PVH_CMDLINE_MAX  2048u    /* COMMAND_LINE_SIZE of x86 Linux */

/* Zero page (struct boot_params) offsets used by mvm. */
#define BP_EXT_RAMDISK_IMAGE 0x0c0
#define BP_EXT_RAMDISK_SIZE  0x0c4
#define BP_EXT_CMD_LINE_PTR  0x0c8
#define BP_E820_ENTRIES      0x1e8
#define BP_SETUP_SECTS       0x1f1
#define BP_BOOT_FLAG         0x1fe
#define BP_JUMP              0x200
#define BP_HEADER            0x202
#define BP_VERSION           0x206
#define BP_TYPE_OF_LOADER    0x210
#define BP_LOADFLAGS         0x211
#define BP_CODE32_START      0x214
#define BP_RAMDISK_IMAGE     0x218
#define BP_RAMDISK_SIZE      0x21c
#define BP_HEAP_END_PTR      0x224
#define BP_CMD_LINE_PTR      0x228
#define BP_INITRD_ADDR_MAX   0x22c
#define BP_KERNEL_ALIGNMENT  0x230
#define BP_RELOCATABLE       0x234
#define BP_XLOADFLAGS        0x236
#define BP_CMDLINE_SIZE      0x238
#define BP_PREF_ADDRESS      0x258
#define BP_INIT_SIZE         0x260
#define BP_E820_TABLE        0x2d0
#define BP_SIZE              0x1000

/* hvm_start_info (xen/include/public/arch-x86/hvm/start_info.h), version 1. */
#define X86_PVH_MAGIC        0x336ec578u
#define PVH_MAGIC            0
#define PVH_VERSION          4
#define PVH_FLAGS            8
#define PVH_NR_MODULES       12
#define PVH_MODLIST_PADDR    16
#define PVH_CMDLINE_PADDR    24
#define PVH_RSDP_PADDR       32
#define PVH_MEMMAP_PADDR     40
#define PVH_MEMMAP_ENTRIES   48
#define PVH_START_INFO_SIZE  56
#define PVH_MODLIST_ENTRY_SIZE 32   /* paddr, size, cmdline_paddr, reserved */
#define PVH_MEMMAP_ENTRY_SIZE  24   /* addr, size, type, reserved */
#define X86_XEN_ELFNOTE_PHYS32_ENTRY 18

#define X86_MAX_ELF_PHDRS    256   /* a vmlinux has a handful */

enum x86_kernel_kind { X86_KERNEL_BZIMAGE, X86_KERNEL_PVH };

/* A parsed kernel file: what the checks and the loader need. Points into
 * the caller's buffer, which must outlive it. */
struct x86_kernel {
	enum x86_kernel_kind kind;
	const uint8_t *buf;
	size_t len;
	/* bzImage */
	size_t setup_size;          /* (setup_sects + 1) * 512 */
	uint16_t version;
	uint32_t cmdline_size;      /* max cmdline bytes, without the NUL */
	uint32_t initrd_addr_max;   /* highest byte address the initrd may use */
	/* both: guest-physical RAM the kernel needs, [load_start, load_end) */
	uint64_t load_start;
	uint64_t load_end;
	/* PVH */
	uint64_t pvh_entry;
	unsigned nphdrs;
	uint64_t phoff;
};

/* Classify and validate a kernel image held in memory (hostile input:
 * every offset is bounds-checked). 0 or -errno with a message. */
int x86_kernel_parse(const uint8_t *buf, size_t len, struct x86_kernel *k,
		     char *err, size_t errlen);

/* Where the initrd goes: highest page-aligned address with the whole initrd
 * below min(initrd_addr_max + 1, low RAM end) and above the kernel.
 * 0 or -ENOSPC/-E2BIG (with a message). */
int x86_initrd_place(const struct x86_kernel *k, uint64_t mem_size,
		     uint64_t initrd_size, uint64_t *addr, char *err, size_t errlen);

/* All the pre-boot checks on an already-parsed kernel. */
int x86_kernel_check(const struct x86_kernel *k, uint64_t mem_size,
		     size_t cmdline_len, bool have_initrd, uint64_t initrd_size,
		     unsigned ncpus, char *err, size_t errlen);

/* Load from memory buffers: x86_boot_load without the files. */
int x86_boot_load_mem(struct guest_mem *gm, uint64_t mem_size, unsigned ncpus,
		      const struct x86_kernel *k, const char *cmdline,
		      const uint8_t *initrd, size_t initrd_len,
		      struct x86_boot_info *info, char *err, size_t errlen);

/* ---- low-memory tables --------------------------------------------------- */
/* GDT selectors: 0x08 flat 32-bit code (PVH), 0x10 64-bit code and 0x18
 * flat data (__BOOT_CS/__BOOT_DS of the 64-bit boot protocol), 0x20 TSS. */
#define X86_SEL_CODE32  0x08
#define X86_SEL_CODE64  0x10
#define X86_SEL_DATA    0x18
#define X86_SEL_TSS     0x20
#define X86_GDT_ENTRIES 5

uint64_t x86_gdt_entry(uint32_t base, uint32_t limit, uint16_t flags);
int x86_gdt_write(struct guest_mem *gm);
/* PML4 -> PDPT -> 4 PDs of 2 MiB pages: identity map of [0, 4 GiB). */
int x86_pagetables_write(struct guest_mem *gm);

/* ---- MP table (Intel MP spec 1.4) ---------------------------------------- */
#define X86_MP_BUS_PCI 0   /* MP bus id == PCI bus number: Linux matches them */
#define X86_MP_BUS_ISA 1
int x86_mptable_write(struct guest_mem *gm, unsigned ncpus);
/* Bytes the MP table (floating pointer + config table) takes. */
size_t x86_mptable_size(unsigned ncpus);

/* ---- vCPU state ---------------------------------------------------------- */
/* CPUID for vCPU id out of supported (KVM_GET_SUPPORTED_CPUID). out must
 * have room for supported->nent + 8 entries (nent is set). 0 or -E2BIG. */
int x86_cpuid_build(const struct kvm_cpuid2 *supported, unsigned id, unsigned ncpus,
		    struct kvm_cpuid2 *out, unsigned out_cap);

/* What KVM emulates but KVM_GET_SUPPORTED_CPUID leaves to userspace to
 * announce (Documentation/virt/kvm/api.rst, KVM_CAP_TSC_DEADLINE_TIMER):
 * the LAPIC's TSC-deadline mode, when tsc_deadline (the capability). A
 * guest with it skips calibrating the LAPIC timer at boot (Linux waits
 * about 100 ms of jiffies for that). */
void x86_cpuid_add_emulated(struct kvm_cpuid2 *supported, bool tsc_deadline);

/* LINT0 ExtINT, LINT1 NMI in a KVM_GET_LAPIC image. */
void x86_lapic_set_lints(struct kvm_lapic_state *lapic);

/* Registers of the BSP for the entry in info. */
void x86_bsp_regs(const struct x86_boot_info *info, struct kvm_regs *regs,
		  struct kvm_sregs *sregs);

void x86_fpu_init(struct kvm_fpu *fpu);

/* The MSR list x86_vcpu_init writes; returns the count (<= max). */
unsigned x86_msrs_init(struct kvm_msr_entry *e, unsigned max);

#endif
