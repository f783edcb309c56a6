/* x86 Linux boot: kernel image parsing (bzImage, ELF vmlinux with a PVH
 * note), the pre-boot checks, and loading the kernel, initrd, command line,
 * zero page / hvm_start_info and e820 map into guest RAM.
 *
 * References: Documentation/arch/x86/boot.rst (boot protocol 2.12+, 64-bit
 * entry), xen/include/public/arch-x86/hvm/start_info.h and
 * xen/include/public/elfnote.h (PVH). Kernel files are hostile input: every
 * offset and size read from them is bounds-checked before use, and guest
 * RAM is only reached through gmem_ptr(). */
#include "arch/x86/x86.h"
#include "arch/x86/layout.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- e820 ---------------------------------------------------------------- */

uint64_t x86_lowmem_end(uint64_t mem_size)
{
	return MIN(mem_size, X86_MMIO_HOLE_START);
}

static unsigned e820_add(struct x86_e820_entry *e, unsigned n, unsigned max,
			 uint64_t addr, uint64_t size, uint32_t type)
{
	if (size == 0 || n >= max)
		return n;
	e[n].addr = addr;
	e[n].size = size;
	e[n].type = type;
	return n + 1;
}

unsigned x86_e820_build(uint64_t mem_size, struct x86_e820_entry *e, unsigned max)
{
	uint64_t low = x86_lowmem_end(mem_size);
	unsigned n = 0;

	/* The last KiB of base memory holds the MP table; [0xa0000, 1 MiB) is
	 * the legacy VGA/ROM area. Both are RAM in the memslot but reserved. */
	n = e820_add(e, n, max, 0, MIN(low, X86_EBDA_START), X86_E820_RAM);
	if (low > X86_EBDA_START)
		n = e820_add(e, n, max, X86_EBDA_START,
			     MIN(low, X86_HIMEM_START) - X86_EBDA_START, X86_E820_RESERVED);
	if (low > X86_HIMEM_START)
		n = e820_add(e, n, max, X86_HIMEM_START, low - X86_HIMEM_START, X86_E820_RAM);
	if (mem_size > low)
		n = e820_add(e, n, max, 4 * GiB, mem_size - low, X86_E820_RAM);
	return n;
}

/* ---- kernel parsing ------------------------------------------------------ */

static const char not_a_kernel[] =
	"neither a bzImage nor an ELF vmlinux with a PVH note";

static int parse_bzimage(const uint8_t *buf, size_t len, struct x86_kernel *k,
			 char *err, size_t errlen)
{
	unsigned sects = buf[BP_SETUP_SECTS] ? buf[BP_SETUP_SECTS] : 4;
	uint8_t xlf, lf;
	uint64_t pref, init_size, start;

	k->kind = X86_KERNEL_BZIMAGE;
	k->version = le16_load(buf + BP_VERSION);
	if (k->version < X86_BP_MIN_VERSION)
		return err_set(err, errlen, -ENOEXEC,
			    "kernel boot protocol %u.%02u is too old (need 2.12 or later with a 64-bit entry): use a newer kernel",
			    k->version >> 8, k->version & 0xff);
	xlf = buf[BP_XLOADFLAGS];
	lf = buf[BP_LOADFLAGS];
	if (!(xlf & X86_XLF_KERNEL_64))
		return err_set(err, errlen, -ENOEXEC,
			    "kernel has no 64-bit entry point (xloadflags 0x%x lacks XLF_KERNEL_64): build an x86_64 kernel",
			    xlf);
	if (!(lf & X86_LF_LOADED_HIGH))
		return err_set(err, errlen, -ENOEXEC,
			    "kernel is a zImage, not a bzImage (loadflags 0x%x): build a bzImage", lf);
	k->setup_size = (size_t)(sects + 1) * 512;
	if (k->setup_size >= len)
		return err_set(err, errlen, -ENOEXEC,
			    "bzImage truncated: %u setup sectors but only %zu bytes in the file",
			    sects, len);
	k->cmdline_size = le32_load(buf + BP_CMDLINE_SIZE);
	k->initrd_addr_max = le32_load(buf + BP_INITRD_ADDR_MAX);
	pref = le64_load(buf + BP_PREF_ADDRESS);
	init_size = le32_load(buf + BP_INIT_SIZE);

	/* The protected-mode part goes to 1 MiB. A relocatable kernel then
	 * runs at max(its load address aligned up, LOAD_PHYSICAL_ADDR =
	 * pref_address) and needs init_size bytes there; a fixed one runs at
	 * pref_address. Either way it needs RAM up to pref_address + init_size. */
	k->load_start = X86_HIMEM_START;
	start = MAX(pref, (uint64_t)X86_HIMEM_START);
	k->load_end = MAX(X86_HIMEM_START + (len - k->setup_size), start + init_size);
	if (k->load_end < start)
		return err_set(err, errlen, -ENOEXEC, "bzImage has a bogus pref_address 0x%llx",
			    (unsigned long long)pref);
	return 0;
}

static int parse_pvh_note(const uint8_t *buf, size_t len, uint64_t off, uint64_t sz,
			  struct x86_kernel *k, bool *found, char *err, size_t errlen)
{
	if (off > len || sz > len - off)
		return err_set(err, errlen, -ENOEXEC,
			    "ELF note segment at offset %llu size %llu lies beyond the %zu-byte file",
			    (unsigned long long)off, (unsigned long long)sz, len);
	while (sz >= 12) {
		const uint8_t *n = buf + off;
		uint64_t namesz = le32_load(n), descsz = le32_load(n + 4);
		uint32_t type = le32_load(n + 8);
		uint64_t total = 12 + ALIGN_UP(namesz, 4) + ALIGN_UP(descsz, 4);

		if (total > sz)
			return err_set(err, errlen, -ENOEXEC,
				    "ELF note at offset %llu overruns its segment (name %llu, desc %llu bytes)",
				    (unsigned long long)off, (unsigned long long)namesz,
				    (unsigned long long)descsz);
		if (type == X86_XEN_ELFNOTE_PHYS32_ENTRY && namesz == 4 &&
		    memcmp(n + 12, "Xen", 4) == 0) {
			const uint8_t *d = n + 12 + 4;
			uint64_t entry;

			if (descsz == 4)
				entry = le32_load(d);
			else if (descsz == 8)
				entry = le64_load(d);
			else
				return err_set(err, errlen, -ENOEXEC,
					    "PVH entry note has a %llu-byte value (expected 4 or 8)",
					    (unsigned long long)descsz);
			if (entry >= 4 * GiB)
				return err_set(err, errlen, -ENOEXEC,
					    "PVH entry point 0x%llx is not a 32-bit address",
					    (unsigned long long)entry);
			k->pvh_entry = entry;
			*found = true;
		}
		off += total;
		sz -= total;
	}
	return 0;
}

static int parse_elf(const uint8_t *buf, size_t len, struct x86_kernel *k,
		     char *err, size_t errlen)
{
	uint64_t phoff;
	unsigned phnum, phentsize, i;
	bool found = false, any_load = false;
	int ret;

	k->kind = X86_KERNEL_PVH;
	if (len < 64 || buf[4] != 2 /* ELFCLASS64 */ || buf[5] != 1 /* ELFDATA2LSB */)
		return err_set(err, errlen, -ENOEXEC,
			    "ELF kernel is not a little-endian 64-bit ELF file");
	if (le16_load(buf + 18) != 62 /* EM_X86_64 */)
		return err_set(err, errlen, -ENOEXEC,
			    "ELF kernel is for machine %u, not x86_64 (62)", le16_load(buf + 18));
	phoff = le64_load(buf + 32);
	phentsize = le16_load(buf + 54);
	phnum = le16_load(buf + 56);
	if (phentsize != 56)
		return err_set(err, errlen, -ENOEXEC,
			    "ELF program header size %u is not 56", phentsize);
	if (phnum == 0 || phnum > X86_MAX_ELF_PHDRS)
		return err_set(err, errlen, -ENOEXEC,
			    "ELF kernel has %u program headers (expected 1..%u)",
			    phnum, X86_MAX_ELF_PHDRS);
	if (phoff > len || (uint64_t)phnum * 56 > len - phoff)
		return err_set(err, errlen, -ENOEXEC,
			    "ELF program headers (offset %llu, %u entries) lie beyond the %zu-byte file",
			    (unsigned long long)phoff, phnum, len);
	k->phoff = phoff;
	k->nphdrs = phnum;
	k->load_start = UINT64_MAX;
	k->load_end = 0;
	for (i = 0; i < phnum; i++) {
		const uint8_t *ph = buf + phoff + (uint64_t)i * 56;
		uint32_t type = le32_load(ph);
		uint64_t off = le64_load(ph + 8), paddr = le64_load(ph + 24);
		uint64_t filesz = le64_load(ph + 32), memsz = le64_load(ph + 40);

		if (type == 4 /* PT_NOTE */) {
			ret = parse_pvh_note(buf, len, off, filesz, k, &found, err, errlen);
			if (ret)
				return ret;
		}
		if (type != 1 /* PT_LOAD */ || memsz == 0)
			continue;
		if (filesz > memsz)
			return err_set(err, errlen, -ENOEXEC,
				    "ELF segment %u has p_filesz %llu > p_memsz %llu", i,
				    (unsigned long long)filesz, (unsigned long long)memsz);
		if (off > len || filesz > len - off)
			return err_set(err, errlen, -ENOEXEC,
				    "ELF segment %u (offset %llu, %llu bytes) lies beyond the %zu-byte file",
				    i, (unsigned long long)off, (unsigned long long)filesz, len);
		if (paddr + memsz < paddr)
			return err_set(err, errlen, -ENOEXEC,
				    "ELF segment %u wraps around the address space", i);
		if (paddr < X86_HIMEM_START)
			return err_set(err, errlen, -ENOEXEC,
				    "ELF segment %u at 0x%llx is below 1 MiB, where mvm keeps its boot tables",
				    i, (unsigned long long)paddr);
		k->load_start = MIN(k->load_start, paddr);
		k->load_end = MAX(k->load_end, paddr + memsz);
		any_load = true;
	}
	if (!found)
		return err_set(err, errlen, -ENOEXEC,
			    "ELF kernel has no PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY): build it with CONFIG_PVH=y or use the bzImage");
	if (!any_load)
		return err_set(err, errlen, -ENOEXEC, "ELF kernel has no loadable segment");
	return 0;
}

int x86_kernel_parse(const uint8_t *buf, size_t len, struct x86_kernel *k,
		     char *err, size_t errlen)
{
	memset(k, 0, sizeof(*k));
	k->buf = buf;
	k->len = len;
	if (len >= 0x400 && memcmp(buf + BP_HEADER, "HdrS", 4) == 0)
		return parse_bzimage(buf, len, k, err, errlen);
	if (len >= 4 && memcmp(buf, "\x7f" "ELF", 4) == 0)
		return parse_elf(buf, len, k, err, errlen);
	return err_set(err, errlen, -ENOEXEC, "kernel: %s", not_a_kernel);
}

/* ---- checks -------------------------------------------------------------- */

int x86_initrd_place(const struct x86_kernel *k, uint64_t mem_size,
		     uint64_t initrd_size, uint64_t *addr, char *err, size_t errlen)
{
	uint64_t top = x86_lowmem_end(mem_size);
	uint64_t a;

	if (k->kind == X86_KERNEL_BZIMAGE)
		top = MIN(top, (uint64_t)k->initrd_addr_max + 1);
	if (initrd_size == 0) {
		*addr = 0;
		return 0;
	}
	if (initrd_size > top || ALIGN_DOWN(top - initrd_size, 4096) < k->load_end)
		return err_set(err, errlen, -E2BIG,
			    "initrd of %llu bytes does not fit between the kernel end 0x%llx and 0x%llx (%s): use a smaller initrd%s",
			    (unsigned long long)initrd_size, (unsigned long long)k->load_end,
			    (unsigned long long)top,
			    top < x86_lowmem_end(mem_size) ? "the kernel's initrd_addr_max" : "end of low RAM",
			    top < x86_lowmem_end(mem_size) ? "" : " or more --mem");
	a = ALIGN_DOWN(top - initrd_size, 4096);
	*addr = a;
	return 0;
}

int x86_kernel_check(const struct x86_kernel *k, uint64_t mem_size,
		     size_t cmdline_len, bool have_initrd, uint64_t initrd_size,
		     unsigned ncpus, char *err, size_t errlen)
{
	uint64_t low = x86_lowmem_end(mem_size), addr;
	size_t max_cmdline;

	if (ncpus == 0 || ncpus > X86_MAX_VCPUS)
		return err_set(err, errlen, -EINVAL,
			    "%u vCPUs requested: x86 guests support 1..%u", ncpus, X86_MAX_VCPUS);
	if (k->load_end > low)
		return err_set(err, errlen, -E2BIG,
			    "kernel needs RAM up to 0x%llx but the guest has only %llu MiB below 0x%llx: use more --mem",
			    (unsigned long long)k->load_end, (unsigned long long)(mem_size / MiB),
			    (unsigned long long)low);
	if (k->kind == X86_KERNEL_BZIMAGE) {
		max_cmdline = MIN((size_t)k->cmdline_size, (size_t)X86_CMDLINE_MAX - 1);
		if (cmdline_len > max_cmdline)
			return err_set(err, errlen, -E2BIG,
				    "kernel command line is %zu bytes but this kernel accepts at most %zu: shorten it",
				    cmdline_len, max_cmdline);
	} else if (cmdline_len > X86_PVH_CMDLINE_MAX - 1) {
		return err_set(err, errlen, -E2BIG,
			    "kernel command line is %zu bytes but a PVH kernel accepts at most %u: shorten it",
			    cmdline_len, X86_PVH_CMDLINE_MAX - 1);
	}
	if (have_initrd) {
		if (initrd_size == 0)
			return err_set(err, errlen, -EINVAL, "initrd is empty: pass a real initramfs or none");
		return x86_initrd_place(k, mem_size, initrd_size, &addr, err, errlen);
	}
	return 0;
}

/* ---- loading ------------------------------------------------------------- */

static int write_e820_bzimage(uint8_t *zp, uint64_t mem_size)
{
	struct x86_e820_entry e[8];
	unsigned n = x86_e820_build(mem_size, e, ARRAY_SIZE(e)), i;

	zp[BP_E820_ENTRIES] = (uint8_t)n;
	for (i = 0; i < n; i++) {
		uint8_t *p = zp + BP_E820_TABLE + 20 * i;
		le64_store(p, e[i].addr);
		le64_store(p + 8, e[i].size);
		le32_store(p + 16, e[i].type);
	}
	return 0;
}

/* len bytes at off of the kernel file into guest RAM at dst: from the
 * file straight into guest RAM where only the head was read (the image's
 * bytes past it are no copy of ours), else from k->buf. */
static int load_bytes(const struct x86_kernel *k, const struct boot_image *im, uint8_t *dst,
		      size_t off, size_t len, char *err, size_t errlen)
{
	int ret;

	if (!im) {
		memcpy(dst, k->buf + off, len);
		return 0;
	}
	ret = boot_image_copy(im, dst, off, len);
	if (ret)
		return err_set(err, errlen, ret, "cannot read the kernel: %s", ret == -EIO ?
			       "the file became shorter since mvm checked it" : strerror(-ret));
	return 0;
}

static int load_bzimage(struct guest_mem *gm, uint64_t mem_size, const struct x86_kernel *k,
			const struct boot_image *im, uint64_t initrd_addr, uint64_t initrd_len,
			struct x86_boot_info *info, char *err, size_t errlen)
{
	int ret;

	size_t pm_len = k->len - k->setup_size;
	size_t hdr_end = MIN((size_t)0x202 + k->buf[0x201], (size_t)BP_E820_TABLE);
	uint8_t *dst, *zp;

	dst = gmem_ptr(gm, X86_HIMEM_START, pm_len);
	zp = gmem_ptr(gm, X86_BOOT_PARAMS, BP_SIZE);
	if (!dst || !zp)
		return err_set(err, errlen, -E2BIG,
			    "kernel (%zu bytes) does not fit in guest RAM at 1 MiB: use more --mem", pm_len);
	ret = load_bytes(k, im, dst, k->setup_size, pm_len, err, errlen);
	if (ret)
		return ret;

	/* Zero page: the setup header as the image has it (so the kernel
	 * sees its own fields), then what the boot loader must fill in. */
	memset(zp, 0, BP_SIZE);
	memcpy(zp + BP_SETUP_SECTS, k->buf + BP_SETUP_SECTS, hdr_end - BP_SETUP_SECTS);
	zp[BP_TYPE_OF_LOADER] = 0xff;   /* undefined boot loader */
	zp[BP_LOADFLAGS] |= X86_LF_CAN_USE_HEAP;
	/* Only the 16-bit setup code uses its heap; we enter at the 64-bit
	 * entry, but a consistent value costs nothing. */
	le16_store(zp + BP_HEAP_END_PTR, 0xe000 - 0x200);
	le32_store(zp + BP_CODE32_START, X86_HIMEM_START);
	le32_store(zp + BP_CMD_LINE_PTR, X86_CMDLINE_ADDR);
	le32_store(zp + BP_EXT_CMD_LINE_PTR, 0);
	le32_store(zp + BP_RAMDISK_IMAGE, (uint32_t)initrd_addr);
	le32_store(zp + BP_RAMDISK_SIZE, (uint32_t)initrd_len);
	le32_store(zp + BP_EXT_RAMDISK_IMAGE, 0);
	le32_store(zp + BP_EXT_RAMDISK_SIZE, 0);
	write_e820_bzimage(zp, mem_size);

	info->pvh = false;
	info->entry = X86_HIMEM_START + 0x200;   /* 64-bit entry: startup_64 */
	info->params = X86_BOOT_PARAMS;
	return 0;
}

static int load_pvh(struct guest_mem *gm, uint64_t mem_size, const struct x86_kernel *k,
		    const struct boot_image *im, uint64_t initrd_addr, uint64_t initrd_len,
		    struct x86_boot_info *info, char *err, size_t errlen)
{
	struct x86_e820_entry e[8];
	unsigned n, i;
	uint8_t *si, *mm, *ml;
	int ret;

	for (i = 0; i < k->nphdrs; i++) {
		const uint8_t *ph = k->buf + k->phoff + (uint64_t)i * 56;
		uint64_t off = le64_load(ph + 8), paddr = le64_load(ph + 24);
		uint64_t filesz = le64_load(ph + 32), memsz = le64_load(ph + 40);
		uint8_t *dst;

		if (le32_load(ph) != 1 || memsz == 0)
			continue;
		/* parse_elf checked offsets and sizes against the file. */
		dst = gmem_ptr(gm, paddr, memsz);
		if (!dst)
			return err_set(err, errlen, -E2BIG,
				    "ELF segment %u [0x%llx, +0x%llx) is outside guest RAM: use more --mem",
				    i, (unsigned long long)paddr, (unsigned long long)memsz);
		ret = load_bytes(k, im, dst, off, filesz, err, errlen);
		if (ret)
			return ret;
		memset(dst + filesz, 0, memsz - filesz);
	}

	n = x86_e820_build(mem_size, e, ARRAY_SIZE(e));
	si = gmem_ptr(gm, X86_BOOT_PARAMS, PVH_START_INFO_SIZE);
	mm = gmem_ptr(gm, X86_PVH_MEMMAP, (uint64_t)n * PVH_MEMMAP_ENTRY_SIZE);
	ml = gmem_ptr(gm, X86_PVH_MODLIST, PVH_MODLIST_ENTRY_SIZE);
	if (!si || !mm || !ml)
		return err_set(err, errlen, -EFAULT, "guest RAM too small for the PVH start info");
	for (i = 0; i < n; i++) {
		uint8_t *p = mm + i * PVH_MEMMAP_ENTRY_SIZE;
		le64_store(p, e[i].addr);
		le64_store(p + 8, e[i].size);
		le32_store(p + 16, e[i].type);   /* same numbering as e820 */
		le32_store(p + 20, 0);
	}
	memset(ml, 0, PVH_MODLIST_ENTRY_SIZE);
	le64_store(ml, initrd_addr);
	le64_store(ml + 8, initrd_len);

	memset(si, 0, PVH_START_INFO_SIZE);
	le32_store(si + PVH_MAGIC, X86_PVH_MAGIC);
	le32_store(si + PVH_VERSION, 1);     /* version 1: has the memmap */
	le32_store(si + PVH_FLAGS, 0);
	le32_store(si + PVH_NR_MODULES, initrd_len ? 1 : 0);
	le64_store(si + PVH_MODLIST_PADDR, initrd_len ? X86_PVH_MODLIST : 0);
	le64_store(si + PVH_CMDLINE_PADDR, X86_CMDLINE_ADDR);
	le64_store(si + PVH_RSDP_PADDR, 0);  /* no ACPI: Linux uses the MP table */
	le64_store(si + PVH_MEMMAP_PADDR, X86_PVH_MEMMAP);
	le32_store(si + PVH_MEMMAP_ENTRIES, n);

	info->pvh = true;
	info->entry = k->pvh_entry;
	info->params = X86_BOOT_PARAMS;
	return 0;
}

/* Check everything against guest RAM and say where the initrd goes (0
 * without one). */
static int check_place(uint64_t mem_size, unsigned ncpus, const struct x86_kernel *k,
		       const char *cmdline, bool have_initrd, size_t initrd_len,
		       uint64_t *initrd_addr, char *err, size_t errlen)
{
	int ret;

	ret = x86_kernel_check(k, mem_size, cmdline ? strlen(cmdline) : 0, have_initrd,
			       initrd_len, ncpus, err, errlen);
	*initrd_addr = 0;
	if (!ret && have_initrd)
		ret = x86_initrd_place(k, mem_size, initrd_len, initrd_addr, err, errlen);
	return ret;
}

static uint8_t *initrd_dst(struct guest_mem *gm, uint64_t addr, size_t len, char *err,
			   size_t errlen)
{
	uint8_t *p = gmem_ptr(gm, addr, len);

	if (!p)
		err_set(err, errlen, -EFAULT, "initrd [0x%llx, +%zu) is outside guest RAM",
			(unsigned long long)addr, len);
	return p;
}

/* Everything but the initrd's bytes, which are at initrd_addr already.
 * im: where the kernel's bytes past its head come from (NULL: k->buf
 * holds them all). */
static int load_placed(struct guest_mem *gm, uint64_t mem_size, unsigned ncpus,
		       const struct x86_kernel *k, const struct boot_image *im, const char *cmdline,
		       uint64_t initrd_addr, size_t initrd_len, struct x86_boot_info *info,
		       char *err, size_t errlen)
{
	size_t cmdlen = cmdline ? strlen(cmdline) : 0;
	uint8_t *p;
	int ret;

	p = gmem_ptr(gm, X86_CMDLINE_ADDR, cmdlen + 1);
	if (!p)
		return err_set(err, errlen, -EFAULT, "guest RAM too small for the command line");
	memcpy(p, cmdline ? cmdline : "", cmdlen + 1);

	if (k->kind == X86_KERNEL_BZIMAGE)
		ret = load_bzimage(gm, mem_size, k, im, initrd_addr, initrd_len, info, err, errlen);
	else
		ret = load_pvh(gm, mem_size, k, im, initrd_addr, initrd_len, info, err, errlen);
	if (ret)
		return ret;
	ret = x86_gdt_write(gm);
	if (!ret)
		ret = x86_pagetables_write(gm);
	if (ret)
		return err_set(err, errlen, ret, "guest RAM too small for the GDT and page tables");
	ret = x86_mptable_write(gm, ncpus);
	if (ret)
		return err_set(err, errlen, ret, "cannot write the MP table for %u vCPUs", ncpus);
	return 0;
}

int x86_boot_load_mem(struct guest_mem *gm, uint64_t mem_size, unsigned ncpus,
		      const struct x86_kernel *k, const char *cmdline,
		      const uint8_t *initrd, size_t initrd_len,
		      struct x86_boot_info *info, char *err, size_t errlen)
{
	uint64_t initrd_addr;
	uint8_t *p;
	int ret;

	ret = check_place(mem_size, ncpus, k, cmdline, initrd != NULL, initrd_len, &initrd_addr,
			  err, errlen);
	if (ret)
		return ret;
	if (initrd) {
		p = initrd_dst(gm, initrd_addr, initrd_len, err, errlen);
		if (!p)
			return -EFAULT;
		memcpy(p, initrd, initrd_len);
	}
	return load_placed(gm, mem_size, ncpus, k, NULL, cmdline, initrd_addr, initrd_len, info,
			   err, errlen);
}

/* ---- file front ends ----------------------------------------------------- */

/* A kernel is parsed from its first page and, for an ELF vmlinux, its
 * notes: a bzImage's setup header is in that page, and so are the ELF
 * and program headers of any vmlinux a linker writes. The rest (the
 * payload, the segments: megabytes, and a vmlinux's symbols besides)
 * stays in the file until the load reads it straight into guest RAM. A
 * file whose program headers lie further in is read whole. */
#define KERNEL_HEAD 4096
static bool elf_phdrs_in_head(const uint8_t *buf, size_t n)
{
	uint64_t phoff;
	unsigned phnum;

	if (n < 64 || memcmp(buf, "\x7f" "ELF", 4) != 0 || le16_load(buf + 54) != 56)
		return false;
	phoff = le64_load(buf + 32);
	phnum = le16_load(buf + 56);
	return phnum <= X86_MAX_ELF_PHDRS && phoff <= n && (uint64_t)phnum * 56 <= n - phoff;
}

static bool kernel_head_only(const uint8_t *buf, size_t n, size_t len)
{
	(void)len;
	return (n >= 0x400 && memcmp(buf + BP_HEADER, "HdrS", 4) == 0) ||
	       elf_phdrs_in_head(buf, n);
}

/* The notes of a head-only ELF image into its buffer, for parse_elf. A
 * note segment that lies beyond the file is left out: parse_elf names
 * it. 0 or -errno. */
static int elf_fill_notes(const struct boot_image *im)
{
	uint64_t phoff = le64_load(im->buf + 32);
	unsigned phnum = le16_load(im->buf + 56), i;
	int ret;

	for (i = 0; i < phnum; i++) {
		const uint8_t *ph = im->buf + phoff + (uint64_t)i * 56;
		uint64_t off = le64_load(ph + 8), filesz = le64_load(ph + 32);

		if (le32_load(ph) != 4 /* PT_NOTE */ || off > im->len || filesz > im->len - off)
			continue;
		ret = boot_image_fill(im, (size_t)off, (size_t)filesz);
		if (ret)
			return ret;
	}
	return 0;
}

/* The kernel image: the one the caller has already (cfg->kernel_image,
 * *owned false), or read from kernel_path now (*owned: boot_image_free). */
static int read_kernel(const struct x86_boot_cfg *cfg, struct boot_image *im, bool *owned,
		       struct x86_kernel *k, char *err, size_t errlen)
{
	int ret;

	*owned = false;
	*im = BOOT_IMAGE_NONE;
	if (!cfg->kernel_path)
		return err_set(err, errlen, -EINVAL, "no kernel given: pass --kernel PATH");
	if (cfg->kernel_image) {
		*im = *cfg->kernel_image;
	} else {
		/* A kernel file larger than guest RAM can never be loaded. */
		ret = boot_image_read(cfg->kernel_path, cfg->mem_size, KERNEL_HEAD,
				      kernel_head_only, im);
		if (!ret && im->fd >= 0 && elf_phdrs_in_head(im->buf, im->head)) {
			ret = elf_fill_notes(im);
			if (ret)
				boot_image_free(im);
		}
		if (ret == -EFBIG)
			return err_set(err, errlen, ret,
				    "kernel %s is larger than guest RAM (%llu MiB): use more --mem",
				    cfg->kernel_path, (unsigned long long)(cfg->mem_size / MiB));
		if (ret)
			return err_set(err, errlen, ret, "cannot read kernel %s: %s",
				       cfg->kernel_path, strerror(-ret));
		*owned = true;
	}
	ret = x86_kernel_parse(im->buf, im->len, k, err, errlen);
	if (ret) {
		/* Prefix the file name without losing the parser's reason. */
		char why[256];
		snprintf(why, sizeof(why), "%s", err ? err : "");
		err_set(err, errlen, ret, "%s: %s", cfg->kernel_path, why);
		if (*owned)
			boot_image_free(im);
		*im = BOOT_IMAGE_NONE;
		*owned = false;
	}
	return ret;
}

int x86_boot_check_keep(const struct x86_boot_cfg *cfg, struct boot_image *keep, char *err,
			size_t errlen)
{
	struct x86_kernel k;
	struct boot_image im;
	uint64_t isize = 0;
	bool owned;
	int ret;

	ret = read_kernel(cfg, &im, &owned, &k, err, errlen);
	if (ret)
		return ret;
	if (cfg->initrd_path) {
		ret = initrd_size(cfg->initrd_path, &isize, err, errlen);
		if (ret)
			goto free_image;
	}
	ret = x86_kernel_check(&k, cfg->mem_size, cfg->cmdline ? strlen(cfg->cmdline) : 0,
			       cfg->initrd_path != NULL, isize, cfg->ncpus, err, errlen);
	if (!ret && keep && owned) {
		*keep = im;
		return 0;
	}
free_image:
	if (owned)
		boot_image_free(&im);
	return ret;
}

int x86_boot_check(const struct x86_boot_cfg *cfg, char *err, size_t errlen)
{
	return x86_boot_check_keep(cfg, NULL, err, errlen);
}

int x86_boot_load(struct guest_mem *gm, const struct x86_boot_cfg *cfg,
		  struct x86_boot_info *info, char *err, size_t errlen)
{
	struct x86_kernel k;
	struct boot_image im;
	uint64_t initrd_addr;
	size_t initrd_len = 0;
	bool owned;
	int ret, fd = -1;

	ret = read_kernel(cfg, &im, &owned, &k, err, errlen);
	if (ret)
		return ret;
	if (cfg->initrd_path) {
		ret = open_initrd(cfg->initrd_path, cfg->mem_size, &fd, &initrd_len, err, errlen);
		if (ret)
			goto free_image;
	}
	ret = check_place(cfg->mem_size, cfg->ncpus, &k, cfg->cmdline, fd >= 0, initrd_len,
			  &initrd_addr, err, errlen);
	if (ret)
		goto close_initrd;
	if (fd >= 0) {
		ret = read_initrd_into(fd, cfg->initrd_path, gmem_ptr(gm, initrd_addr, initrd_len),
				       initrd_len, err, errlen);
		if (ret)
			goto close_initrd;
	}
	ret = load_placed(gm, cfg->mem_size, cfg->ncpus, &k, &im, cfg->cmdline, initrd_addr,
			  initrd_len, info, err, errlen);
close_initrd:
	if (fd >= 0)
		close(fd);
free_image:
	if (owned)
		boot_image_free(&im);
	return ret;
}
