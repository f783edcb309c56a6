/* s390x Linux boot: see boot.h. */
#include "arch/s390/boot.h"
#include "arch/s390/layout.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <string.h>

int s390_kernel_parse(const uint8_t *buf, size_t len, struct s390_kernel *k, char *err,
		      size_t errlen)
{
	uint64_t max;

	if (len < S390_COMMAND_LINE)
		return err_set(err, errlen, -ENOEXEC, "not an s390x kernel image: %zu bytes, "
			       "too short to hold the parameter area at 0x%llx; give a vmlinuz "
			       "(arch/s390/boot/bzImage)", len, S390_PARMAREA);
	if (memcmp(buf + S390_EP_MAGIC_OFF, S390_EP_MAGIC, strlen(S390_EP_MAGIC)))
		return err_set(err, errlen, -ENOEXEC, "not an s390x kernel image: no \"%s\" at "
			       "0x%llx; give a vmlinuz (arch/s390/boot/bzImage), not a vmlinux",
			       S390_EP_MAGIC, S390_EP_MAGIC_OFF);
	max = be64_load(buf + S390_MAX_CMDLINE_SIZE);
	k->image = buf;
	k->len = len;
	k->cmdline_max = max ? max : S390_LEGACY_CMDLINE_SIZE;
	return 0;
}

uint64_t s390_initrd_addr(const struct s390_kernel *k)
{
	return MAX(S390_INITRD_MIN, ALIGN_UP((uint64_t)k->len, S390_RAM_ALIGN));
}

int s390_kernel_check(const struct s390_kernel *k, uint64_t mem_size, size_t cmdline_len,
		      uint64_t initrd_size, char *err, size_t errlen)
{
	uint64_t at = s390_initrd_addr(k);

	if (cmdline_len + 1 > k->cmdline_max)
		return err_set(err, errlen, -E2BIG, "kernel command line is %zu bytes; this "
			       "kernel accepts at most %llu: shorten it", cmdline_len,
			       (unsigned long long)k->cmdline_max - 1);
	if (k->len > mem_size)
		return err_set(err, errlen, -EFBIG, "kernel image (%zu bytes) does not fit in "
			       "%llu MiB of guest RAM: use more --mem", k->len,
			       (unsigned long long)(mem_size / MiB));
	if (initrd_size && (at > mem_size || initrd_size > mem_size - at))
		return err_set(err, errlen, -EFBIG, "initrd (%llu bytes at 0x%llx) does not fit "
			       "in %llu MiB of guest RAM: use more --mem",
			       (unsigned long long)initrd_size, (unsigned long long)at,
			       (unsigned long long)(mem_size / MiB));
	return 0;
}

int s390_boot_load_mem(struct guest_mem *gm, uint64_t mem_size, const struct s390_kernel *k,
		       const char *cmdline, const uint8_t *initrd, size_t initrd_len,
		       uint64_t *entry, char *err, size_t errlen)
{
	size_t clen = cmdline ? strlen(cmdline) : 0;
	uint64_t at = s390_initrd_addr(k);
	uint8_t *p;
	int ret;

	ret = s390_kernel_check(k, mem_size, clen, initrd_len, err, errlen);
	if (ret)
		return ret;
	p = gmem_ptr(gm, 0, k->len);
	if (!p)
		return err_set(err, errlen, -EFAULT, "kernel image: outside guest RAM");
	memcpy(p, k->image, k->len);
	/* The image's own parameter area is the template: fill in ours. */
	p = gmem_ptr(gm, S390_PARMAREA, S390_COMMAND_LINE - S390_PARMAREA + k->cmdline_max);
	if (!p)
		return err_set(err, errlen, -EFAULT, "parameter area: outside guest RAM");
	be64_store(p + (S390_INITRD_START - S390_PARMAREA), initrd_len ? at : 0);
	be64_store(p + (S390_INITRD_SIZE - S390_PARMAREA), initrd_len);
	memset(p + (S390_COMMAND_LINE - S390_PARMAREA), 0, k->cmdline_max);
	memcpy(p + (S390_COMMAND_LINE - S390_PARMAREA), cmdline ? cmdline : "", clen);
	if (initrd_len && initrd) {
		uint8_t *d = gmem_ptr(gm, at, initrd_len);

		if (!d)
			return err_set(err, errlen, -EFAULT, "initrd: outside guest RAM");
		memcpy(d, initrd, initrd_len);
	}
	*entry = S390_KERNEL_ENTRY;
	return 0;
}
