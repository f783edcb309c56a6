/* arch/x86 internals: the table-building steps behind boot.h, split from
 * the KVM ioctls so that unit tests can run them on a fake guest memory. */
#ifndef MVM_X86_X86_H
#define MVM_X86_X86_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/kvm.h>

#include "vmm/base/guest_mem.h"
#include "vmm/base/snap.h"
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
/* An MSI to a local APIC (SDM vol. 3, 11.11): the address with the
 * destination APIC ID in bits 19:12, the data's delivery mode NMI. */
#define X86_MSI_ADDR_BASE 0xfee00000u
#define X86_MSI_DM_NMI    (4u << 8)

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

/* What every vCPU gets whether it boots or is restored: CPUID for vCPU id
 * out of supported, the default MSRs and the LAPIC's LINT pins. A boot
 * (x86_vcpu_init) adds the FPU, the registers and the MP state; a restore
 * sets those from the snapshot. 0 or -errno with a message. */
int x86_vcpu_init_cpu(int vcpu_fd, unsigned id, unsigned ncpus,
		      const struct kvm_cpuid2 *supported, char *err, size_t errlen);

/* ---- the VM ------------------------------------------------------------- */
/* Per-VM x86 state, vm_kvm(vm)->arch_state (arch_vm_init's). */
struct i8042;
struct x86_vm {
	/* KVM_GET_SUPPORTED_CPUID plus what KVM emulates
	 * (x86_cpuid_add_emulated): every vCPU's CPUID comes from it, and a
	 * restore checks the snapshot's against it. */
	struct kvm_cpuid2 *cpuid;
	struct kvm_clock_data clock;    /* arch_vm_clock_save's */
	/* What a snapshot asks /dev/kvm and the VM, asked at arch_vm_init:
	 * the thread that takes a snapshot may be filtered (its filter
	 * allows neither descriptor's queries). msr_list NULL: the query
	 * failed with -msr_list_err, which a snapshot reports. */
	struct kvm_msr_list *msr_list;
	int msr_list_err;
	uint32_t xsave_size;            /* KVM_CAP_XSAVE2's size, at least 4096 */
	/* KVM_CAP_NESTED_STATE's: the largest kvm_nested_state this KVM
	 * gives (header and data); 0: it keeps none (no nested guests). */
	uint32_t nested_size;
	/* The board's keyboard controller (arch_board_create): the power
	 * button is its Power key. The VM owns it. */
	struct i8042 *i8042;
};
/* Fill xv's msr_list and xsave_size (snap.c). */
struct vm;
void x86_snap_probe(struct vm *vm, struct x86_vm *xv);

/* ---- snapshots (snap.c, docs/snapshot.md) -------------------------------- */
/* Section tags. Per vCPU (instance: the vCPU id), in file order; every
 * field little-endian, in the order struct x86_vcpu_state lists it. */
#define X86_SNAP_CPU      SNAP_TAG('X', 'C', 'P', 'U')  /* TSC kHz, KVM_GET_CPUID2 */
#define X86_SNAP_MPSTATE  SNAP_TAG('X', 'M', 'P', 'S')  /* KVM_GET_MP_STATE */
#define X86_SNAP_REGS     SNAP_TAG('X', 'R', 'E', 'G')  /* KVM_GET_REGS */
#define X86_SNAP_SREGS    SNAP_TAG('X', 'S', 'R', 'G')  /* KVM_GET_SREGS */
#define X86_SNAP_XSAVE    SNAP_TAG('X', 'S', 'A', 'V')  /* KVM_GET_XSAVE(2) */
#define X86_SNAP_XCRS     SNAP_TAG('X', 'X', 'C', 'R')  /* KVM_GET_XCRS */
#define X86_SNAP_DEBUG    SNAP_TAG('X', 'D', 'B', 'G')  /* KVM_GET_DEBUGREGS */
#define X86_SNAP_LAPIC    SNAP_TAG('X', 'L', 'A', 'P')  /* KVM_GET_LAPIC */
#define X86_SNAP_MSRS     SNAP_TAG('X', 'M', 'S', 'R')  /* KVM_GET_MSRS */
#define X86_SNAP_EVENTS   SNAP_TAG('X', 'E', 'V', 'T')  /* KVM_GET_VCPU_EVENTS */
/* KVM_GET_NESTED_STATE: the guest's own hypervisor's state (SVM or VMX),
 * where KVM has KVM_CAP_NESTED_STATE; absent otherwise. */
#define X86_SNAP_NESTED   SNAP_TAG('X', 'N', 'S', 'T')
/* Per VM: the PICs (instance: KVM_IRQCHIP_PIC_MASTER, _SLAVE), the
 * IOAPIC, the PIT and the kvmclock (instance 0). */
#define X86_SNAP_PIC      SNAP_TAG('X', 'P', 'I', 'C')
#define X86_SNAP_IOAPIC   SNAP_TAG('X', 'I', 'O', 'A')
#define X86_SNAP_PIT      SNAP_TAG('X', 'P', 'I', 'T')
#define X86_SNAP_CLOCK    SNAP_TAG('X', 'C', 'L', 'K')

/* What a reader takes, beyond which a section is refused as damaged.
 * KVM lists a few hundred MSRs at most; it keeps at most
 * KVM_MAX_CPUID_ENTRIES (256) CPUID entries per vCPU; the XSAVE image is
 * 4 KiB, or KVM_CAP_XSAVE2's size with dynamic features (about 11 KiB
 * with AMX). */
#define X86_SNAP_MSRS_MAX   1024u
#define X86_SNAP_CPUID_MAX  256u
#define X86_SNAP_XSAVE_MIN  4096u
#define X86_SNAP_XSAVE_MAX  (1u << 20)
/* A kvm_nested_state: its 128-byte header, then VMX's vmcs12 and shadow
 * vmcs12 (4 KiB each) or SVM's vmcb12 (4 KiB). */
#define X86_SNAP_NESTED_HDR 128u
#define X86_SNAP_NESTED_MAX (X86_SNAP_NESTED_HDR + 4u * 4096u)

/* One vCPU's state as KVM gives and takes it. The pointers are malloc'd
 * (x86_vcpu_state_free): xsave holds xsave_size bytes, msrs
 * msrs->nmsrs entries, cpuid cpuid->nent. */
struct x86_vcpu_state {
	uint32_t tsc_khz;               /* KVM_GET_TSC_KHZ */
	struct kvm_cpuid2 *cpuid;       /* KVM_GET_CPUID2: what the guest saw */
	struct kvm_mp_state mp;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	uint32_t xsave_size;            /* 4096, or KVM_CAP_XSAVE2's */
	struct kvm_xsave *xsave;
	struct kvm_xcrs xcrs;
	struct kvm_debugregs debugregs;
	struct kvm_lapic_state lapic;
	struct kvm_msrs *msrs;
	struct kvm_vcpu_events events;
	/* KVM_GET_NESTED_STATE's (its size field says how much of it is
	 * there), or NULL: KVM keeps none. */
	struct kvm_nested_state *nested;
};
void x86_vcpu_state_free(struct x86_vcpu_state *s);

/* The VM-wide state. */
struct x86_vm_state {
	struct kvm_pic_state pic[2];    /* KVM_IRQCHIP_PIC_MASTER, _SLAVE */
	struct kvm_ioapic_state ioapic;
	struct kvm_pit_state2 pit;
	struct kvm_clock_data clock;    /* clock, flags, realtime, host_tsc */
};

/* Append vCPU id's sections (X86_SNAP_CPU .. X86_SNAP_EVENTS, then
 * X86_SNAP_NESTED where s->nested) to w, field by field: 0 or w->err. */
int x86_vcpu_state_put(struct snap_w *w, unsigned id, const struct x86_vcpu_state *s);
/* Read them back into *s (zeroed first; free it with
 * x86_vcpu_state_free, also after a failure): each section must be there
 * (X86_SNAP_NESTED may not: s->nested NULL) and exactly as long as its
 * fields, and the counts and sizes within the bounds above. 0 or -EINVAL
 * with a one-line message. */
int x86_vcpu_state_get(const struct snap_file *f, unsigned id, struct x86_vcpu_state *s,
		       char *err, size_t errlen);
int x86_vm_state_put(struct snap_w *w, const struct x86_vm_state *s);
int x86_vm_state_get(const struct snap_file *f, struct x86_vm_state *s, char *err,
		     size_t errlen);

/* Whether this host's KVM can give vCPU id the CPU features its snapshot
 * CPUID (snap) announces: every feature bit of leaves 0x1 (ecx, edx), 0x7
 * subleaf 0 (ebx, ecx, edx) and 1 (eax), 0xd subleaf 0 (eax, edx: the
 * XSAVE components) and 1 (eax), 0x80000001 (ecx, edx) and 0x40000001
 * (eax, KVM's paravirtual features) must be in supported (struct x86_vm's
 * cpuid). Bits mvm sets itself or KVM mirrors from the guest's control
 * registers do not count. 0, or -ENOTSUP naming the leaf and the bits. */
int x86_cpuid_check(const struct kvm_cpuid2 *snap, const struct kvm_cpuid2 *supported,
		    unsigned id, char *err, size_t errlen);

/* MSR fix-ups around KVM's gaps, on the list as KVM_GET_MSRS gave it.
 * Save: a zero TSC deadline with a TSC becomes the TSC's value (the
 * timer fires at once on restore), as Firecracker does: KVM clears the
 * deadline when the timer fires, and an interrupt it had not yet put in
 * the LAPIC's IRR when the state was read is lost, leaving the guest's
 * timer never to fire again. Load: the TSC deadline moves behind the
 * TSC, since KVM arms the restored deadline against the guest's TSC. */
void x86_msrs_save_fixup(struct kvm_msr_entry *e, unsigned n);
void x86_msrs_load_order(struct kvm_msr_entry *e, unsigned n);

/* One vCPU's notes in a guest core dump (arch/x86/coredump.c):
 * NT_PRSTATUS and QEMU's CPU state, from its registers, into buf (cap
 * bytes): their size, or 0 where they do not fit. Needs no KVM. */
size_t x86_coredump_notes(uint8_t *buf, size_t cap, unsigned id, const struct kvm_regs *r,
			  const struct kvm_sregs *s, uint64_t kernel_gs_base);

#endif
