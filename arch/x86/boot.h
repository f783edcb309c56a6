/* x86 boot: the interface between the VM runtime (vmm/) and the x86 boot
 * code (arch/x86/). The runtime creates the VM, maps guest RAM with
 * gmem_map(..., X86_MMIO_HOLE_START), sets up the in-kernel irqchip/PIT and
 * creates the vCPUs; arch/x86 loads the kernel and builds every table the
 * guest reads at boot (zero page or hvm_start_info, e820, MP table, GDT,
 * identity page tables) and programs each vCPU's architectural state.
 *
 * Supported kernels:
 *   - bzImage, boot protocol >= 2.12 with XLF_KERNEL_64: 64-bit entry at
 *     load address + 0x200, RSI = zero page, long mode, identity paging.
 *   - ELF vmlinux with a PVH note (XEN_ELFNOTE_PHYS32_ENTRY): 32-bit
 *     protected-mode entry, paging off, EBX = hvm_start_info.
 */
#ifndef MVM_X86_BOOT_H
#define MVM_X86_BOOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/base/util.h"

#include "vmm/base/guest_mem.h"

struct kvm_cpuid2;

/* Most vCPUs the MP table and the APIC id space (8-bit xAPIC ids, the
 * IOAPIC takes id ncpus) allow. */
#define X86_MAX_VCPUS 254

struct x86_boot_cfg {
	const char *kernel_path;   /* bzImage or ELF vmlinux with PVH note */
	const char *initrd_path;   /* may be NULL */
	const char *cmdline;       /* the complete kernel command line (may be NULL = "") */
	uint64_t mem_size;         /* guest RAM bytes (as given to gmem_map) */
	unsigned ncpus;            /* 1..X86_MAX_VCPUS */
	/* The kernel image when the caller has it already (from
	 * x86_boot_check_keep): loaded as it was checked, kernel_path not
	 * opened again. NULL: read kernel_path. */
	const struct boot_image *kernel_image;
};

struct x86_boot_info {         /* how to start the BSP */
	bool pvh;                  /* 32-bit PVH entry (EBX=start_info) vs 64-bit bzImage entry (RSI=zero page) */
	uint64_t entry;            /* guest physical entry point */
	uint64_t params;           /* zero page / hvm_start_info guest address */
};

/* Check the kernel/initrd/cmdline before anything starts (file kind,
 * protocol version, cmdline vs the kernel's cmdline_size, initrd vs
 * initrd_addr_max and RAM, kernel vs RAM): 0 or -errno with a one-line
 * message in err ("what, which value, what to do"). Needs no guest memory. */
int x86_boot_check(const struct x86_boot_cfg *cfg, char *err, size_t errlen);
/* The same, and on success the kernel image it read into *keep
 * (boot_image_free; left alone when cfg->kernel_image gave it): the load
 * then opens the file once, and loads what was checked. Of a bzImage only
 * the header is read; the payload goes from the file straight into guest
 * RAM at the load. */
int x86_boot_check_keep(const struct x86_boot_cfg *cfg, struct boot_image *keep, char *err,
			size_t errlen);

/* Load kernel + initrd + cmdline + zero page/start_info + e820 + MP table
 * + GDT/page tables into guest RAM (gm must already be laid out for
 * cfg->mem_size) and fill *info. 0 or -errno with a one-line message. */
int x86_boot_load(struct guest_mem *gm, const struct x86_boot_cfg *cfg,
		  struct x86_boot_info *info, char *err, size_t errlen);

/* Per-vCPU setup, called once per vCPU before any vCPU runs: CPUID (from
 * KVM_GET_SUPPORTED_CPUID, passed in by the caller; per-vCPU APIC ids, a
 * sane topology of ncpus cores x 1 thread in one package, hypervisor bit,
 * KVM leaves incl. kvm-clock), MSRs, LAPIC LINT0 ExtINT / LINT1 NMI, FPU,
 * and for the BSP (id 0) the registers/segments/paging for the entry in
 * *info. Other vCPUs are left KVM_MP_STATE_UNINITIALIZED and wait for
 * INIT/SIPI, which the in-kernel LAPIC handles. 0 or -errno (the failing
 * ioctl is reported on stderr). */
int x86_vcpu_init(int vcpu_fd, unsigned id, unsigned ncpus,
		  const struct kvm_cpuid2 *supported,
		  const struct x86_boot_info *info, char *err, size_t errlen);

#endif
