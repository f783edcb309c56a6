/* s390x Linux boot: load a kernel image, initrd and command line into
 * guest RAM the way arch/s390/boot expects (image at 0, parameter area at
 * 0x10400), KVM-free so unit tests run it on fake guest memory. */
#ifndef MVM_S390_BOOT_H
#define MVM_S390_BOOT_H

#include <stddef.h>
#include <stdint.h>

#include "vmm/base/guest_mem.h"

struct s390_kernel {
	const uint8_t *image;
	size_t len;
	uint64_t cmdline_max;      /* bytes the kernel accepts, incl. the NUL */
};

/* Check an image: long enough to hold the parameter area, "S390EP" at
 * 0x10008. 0 or -ENOEXEC with a message. */
int s390_kernel_parse(const uint8_t *buf, size_t len, struct s390_kernel *k, char *err,
		      size_t errlen);

/* Where the initrd goes for this kernel: the first MiB boundary after the
 * image, at least S390_INITRD_MIN. */
uint64_t s390_initrd_addr(const struct s390_kernel *k);

/* Check that kernel, command line and initrd fit in mem_size bytes of RAM
 * and the kernel's command-line limit. 0 or -errno with a message. */
int s390_kernel_check(const struct s390_kernel *k, uint64_t mem_size, size_t cmdline_len,
		      uint64_t initrd_size, char *err, size_t errlen);

/* Write image, initrd and parameter area into gm. initrd NULL with
 * initrd_len > 0: its bytes are at s390_initrd_addr(k) already (read
 * there straight from the file). *entry: the start address
 * (S390_KERNEL_ENTRY). 0 or -errno with a message. */
int s390_boot_load_mem(struct guest_mem *gm, uint64_t mem_size, const struct s390_kernel *k,
		       const char *cmdline, const uint8_t *initrd, size_t initrd_len,
		       uint64_t *entry, char *err, size_t errlen);

#endif
