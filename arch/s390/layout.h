/* s390x guest physical address map and boot conventions. One place so that
 * the kernel loader, the SCLP model and the tests agree. */
#ifndef MVM_S390_LAYOUT_H
#define MVM_S390_LAYOUT_H

/* A Linux s390 kernel image ("vmlinuz", arch/s390/boot/bzImage) is loaded
 * at 0 and entered at 0x10000, where "S390EP" at 0x10008 says it supports
 * this direct start (arch/s390/boot/head.S). */
#define S390_KERNEL_ENTRY      0x10000ULL
#define S390_EP_MAGIC_OFF      0x10008ULL
#define S390_EP_MAGIC          "S390EP"
/* The parameter area (arch/s390/include/asm/setup.h, struct parmarea):
 * 64-bit big-endian fields. */
#define S390_PARMAREA          0x10400ULL
#define S390_INITRD_START      0x10408ULL
#define S390_INITRD_SIZE       0x10410ULL
#define S390_MAX_CMDLINE_SIZE  0x10430ULL  /* 0 in old kernels: 896 bytes */
#define S390_COMMAND_LINE      0x10480ULL
#define S390_LEGACY_CMDLINE_SIZE 896
/* The initrd goes at the first MiB boundary after the image, at least here
 * (the decompressor moves it if its own work area reaches it). */
#define S390_INITRD_MIN        0x800000ULL
/* Start in 64-bit addressing mode (EA and BA), all interrupts off. */
#define S390_PSW_MASK_64       0x0000000180000000ULL
/* RAM: one block from 0, a multiple of 1 MiB (the segment size). */
#define S390_RAM_ALIGN         0x100000ULL
/* Most vCPUs: KVM's s390 limit without extended SCA is 64; Linux reads
 * the count from SCLP. */
#define S390_MAX_VCPUS         64

#endif
