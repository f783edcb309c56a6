/* arch_boot_check and arch_boot_load for s390x: the kernel and initrd
 * read from their files and checked before the VM exists, then loaded
 * into guest RAM with boot.c's image layout (the initrd read straight
 * into place). */
#include "arch/arch.h"
#include "arch/s390/boot.h"
#include "arch/s390/layout.h"
#include "arch/s390/s390.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The kernel image: the one arch_boot_check read (cfg->kernel_image,
 * *owned false), or read whole from kernel_path now (*owned:
 * boot_image_free). */
static int read_kernel(const struct arch_boot_cfg *cfg, struct boot_image *im, bool *owned,
		       struct s390_kernel *k, char *err, size_t errlen)
{
	char why[256];
	int ret;

	*owned = false;
	*im = BOOT_IMAGE_NONE;
	if (!cfg->kernel_path)
		return err_set(err, errlen, -EINVAL, "no kernel given: pass --kernel PATH");
	if (cfg->kernel_image) {
		*im = *cfg->kernel_image;
	} else {
		ret = boot_image_read(cfg->kernel_path, cfg->mem_size, SIZE_MAX, NULL, im);
		if (ret == -EFBIG)
			return err_set(err, errlen, ret, "kernel %s is larger than guest RAM (%llu "
				       "MiB): use more --mem", cfg->kernel_path,
				       (unsigned long long)(cfg->mem_size / MiB));
		if (ret)
			return err_set(err, errlen, ret, "cannot read kernel %s: %s",
				       cfg->kernel_path, strerror(-ret));
		*owned = true;
	}
	ret = s390_kernel_parse(im->buf, im->len, k, why, sizeof(why));
	if (ret) {
		err_set(err, errlen, ret, "%s: %s", cfg->kernel_path, why);
		if (*owned)
			boot_image_free(im);
		*im = BOOT_IMAGE_NONE;
		*owned = false;
	}
	return ret;
}

static int check_mem(const struct arch_boot_cfg *cfg, char *err, size_t errlen)
{
	if (cfg->mem_size % S390_RAM_ALIGN)
		return err_set(err, errlen, -EINVAL, "mem %llu bytes: s390x guest RAM comes in "
			       "1 MiB storage increments; give a multiple of 1 MiB",
			       (unsigned long long)cfg->mem_size);
	return 0;
}

int arch_boot_check(const struct arch_boot_cfg *cfg, struct boot_image *keep, char *err,
		    size_t errlen)
{
	struct s390_kernel k;
	struct boot_image im;
	uint64_t isize = 0;
	bool owned;
	int ret;

	ret = check_mem(cfg, err, errlen);
	if (ret)
		return ret;
	ret = read_kernel(cfg, &im, &owned, &k, err, errlen);
	if (ret)
		return ret;
	if (cfg->initrd_path) {
		ret = initrd_size(cfg->initrd_path, &isize, err, errlen);
		if (ret)
			goto free_image;
	}
	ret = s390_kernel_check(&k, cfg->mem_size, cfg->cmdline ? strlen(cfg->cmdline) : 0,
				isize, err, errlen);
	if (!ret && keep && owned) {
		*keep = im;
		return 0;
	}
free_image:
	if (owned)
		boot_image_free(&im);
	return ret;
}

int arch_boot_load(struct vm *vm, const struct arch_boot_cfg *cfg, struct arch_boot **boot,
		   char *err, size_t errlen)
{
	struct s390_kernel k;
	struct boot_image im;
	size_t initrd_len = 0;
	struct arch_boot *b;
	bool owned;
	int ret, fd = -1;

	b = calloc(1, sizeof(*b));
	if (!b)
		return err_set(err, errlen, -ENOMEM, "out of memory");
	ret = read_kernel(cfg, &im, &owned, &k, err, errlen);
	if (ret)
		goto free_b;
	if (cfg->initrd_path) {
		ret = open_initrd(cfg->initrd_path, cfg->mem_size, &fd, &initrd_len, err, errlen);
		if (ret)
			goto free_image;
		/* Checked before its bytes go anywhere, then read straight
		 * into place (s390_boot_load_mem leaves them there). */
		ret = s390_kernel_check(&k, cfg->mem_size, cfg->cmdline ? strlen(cfg->cmdline) : 0,
					initrd_len, err, errlen);
		if (ret)
			goto close_initrd;
		ret = read_initrd_into(fd, cfg->initrd_path,
				       gmem_ptr(&vm->mem, s390_initrd_addr(&k), initrd_len),
				       initrd_len, err, errlen);
		if (ret)
			goto close_initrd;
	}
	ret = s390_boot_load_mem(&vm->mem, cfg->mem_size, &k, cfg->cmdline, NULL, initrd_len,
				 &b->entry, err, errlen);
close_initrd:
	if (fd >= 0)
		close(fd);
free_image:
	if (owned)
		boot_image_free(&im);
	if (!ret) {
		*boot = b;
		return 0;
	}
free_b:
	free(b);
	return ret;
}

void arch_boot_free(struct arch_boot *boot)
{
	free(boot);
}
