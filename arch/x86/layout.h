/* x86 guest physical address map and interrupt assignments. One place so
 * that the e820 map, the MP table, the kernel command line and the device
 * models agree. */
#ifndef MVM_X86_LAYOUT_H
#define MVM_X86_LAYOUT_H

/* Low memory used by mvm's boot setup (all below 1 MiB, reserved in e820
 * only where the kernel must not reuse it before it has read it). */
#define X86_GDT_ADDR        0x500ULL
#define X86_BOOT_PARAMS     0x7000ULL     /* zero page (bzImage) / hvm_start_info (PVH) */
#define X86_PVH_MEMMAP      0x6000ULL     /* hvm_memmap_table_entry array for PVH */
#define X86_PVH_MODLIST     0x6e00ULL     /* hvm_modlist_entry (initrd) for PVH */
#define X86_PML4_ADDR       0x9000ULL     /* identity page tables: PML4, PDPT, PD */
#define X86_PDPT_ADDR       0xa000ULL
#define X86_PD_ADDR         0xb000ULL     /* 4 pages: 4 GiB identity-mapped with 2 MiB pages */
#define X86_CMDLINE_ADDR    0x20000ULL
#define X86_CMDLINE_MAX     0x10000ULL
#define X86_MPTABLE_ADDR    0x9fc00ULL    /* last KiB of base memory, where Linux scans */
#define X86_EBDA_START      0x9fc00ULL
#define X86_HIMEM_START     0x100000ULL   /* kernel loaded at 1 MiB */
#define X86_BOOT_STACK      0x8ff0ULL

/* 32-bit MMIO hole: [X86_MMIO_HOLE_START, 4 GiB). RAM above it is moved to
 * 4 GiB and up. */
#define X86_MMIO_HOLE_START 0xc0000000ULL
#define X86_VIRTIO_MMIO_BASE 0xd0000000ULL  /* virtio-mmio devices, 4 KiB apart */
#define X86_VIRTIO_MMIO_SIZE 0x1000ULL
#define X86_VIRTIO_MMIO_MAX  32
#define X86_PCI_MMIO32_BASE  0xe0000000ULL  /* PCI 32-bit BAR window */
#define X86_PCI_MMIO32_END   0xfe000000ULL  /* exclusive; IOAPIC/LAPIC above */
#define X86_IOAPIC_ADDR      0xfec00000ULL
#define X86_IOAPIC_SIZE      0x1000ULL
#define X86_LAPIC_ADDR       0xfee00000ULL
/* The LAPIC page and, around it, the MSI address window (0xFEExxxxx):
 * where MSI-X messages and the vCPUs' LAPIC accesses go. */
#define X86_MSI_WINDOW_ADDR  0xfee00000ULL
#define X86_MSI_WINDOW_SIZE  0x100000ULL

/* KVM TSS and identity map (needed by KVM on Intel): just below the hole's
 * BIOS area, inside the MMIO hole so they never shadow RAM. */
#define X86_KVM_TSS_ADDR     0xfffbd000ULL
#define X86_KVM_TSS_SIZE     0x3000ULL      /* KVM_SET_TSS_ADDR takes 3 pages */
#define X86_KVM_IDMAP_ADDR   0xfffbc000ULL
#define X86_KVM_IDMAP_SIZE   0x1000ULL

/* Legacy I/O ports. */
#define X86_COM1_PORT        0x3f8
#define X86_COM1_IRQ         4
#define X86_I8042_DATA_PORT  0x60
#define X86_I8042_CMD_PORT   0x64
/* mvm exit port: the guest writes one byte, its exit status, with
 * `outb status, $0x501`; mvm then exits with that status. */
#define X86_MVM_EXIT_PORT    0x501
#define X86_POST_PORT        0x80         /* Linux's I/O delay writes */

/* IOAPIC pins for virtio-mmio devices (edge), in order of creation; the legacy
 * ISA pins in use (0 timer, 1 kbd, 2 cascade, 3/4 serial, 8 rtc) are skipped. */
#define X86_VIRTIO_IRQS { 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19 }
/* PCI INTx: bus 0 device d INTA# -> IOAPIC pin X86_PCI_INTX_BASE + (d % 4), level, active low. */
#define X86_PCI_INTX_BASE    20
#define X86_IOAPIC_PINS      24

#endif
