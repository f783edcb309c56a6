/* x86 boot protocol: e820 map, bzImage zero page, ELF/PVH parsing and
 * start_info, and the rejection of kernels, command lines and initrds that
 * cannot boot. All on a fake guest memory; no KVM. */
#include "tests/unit/check.h"
#include "arch/x86/x86.h"
#include "arch/x86/layout.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------- */

struct fake_guest {
	struct guest_mem gm;
	uint8_t *low;
	uint64_t mem_size;
};

/* Guest with mem_size bytes (all below the hole), pages filled with fill. */
static void guest_init(struct fake_guest *g, uint64_t mem_size, int fill)
{
	memset(g, 0, sizeof(*g));
	g->mem_size = mem_size;
	g->low = malloc(mem_size);
	CHECK(g->low);
	memset(g->low, fill, 4 * MiB);   /* the low tables and the kernel area */
	CHECK_EQ(gmem_add_region(&g->gm, 0, mem_size, g->low), 0);
}

#define BZ_SETUP_SECTS 4
#define BZ_PAYLOAD     4096
#define BZ_LEN         ((BZ_SETUP_SECTS + 1) * 512 + BZ_PAYLOAD)

/* A bzImage with a valid 2.15 setup header and a recognisable payload. */
static uint8_t *make_bzimage(void)
{
	uint8_t *b = calloc(1, BZ_LEN);
	unsigned i;

	CHECK(b);
	b[BP_SETUP_SECTS] = BZ_SETUP_SECTS;
	le16_store(b + BP_BOOT_FLAG, 0xaa55);
	b[BP_JUMP] = 0xeb;
	b[BP_JUMP + 1] = 0x66;                 /* header ends at 0x268 */
	memcpy(b + BP_HEADER, "HdrS", 4);
	le16_store(b + BP_VERSION, 0x020f);
	b[BP_LOADFLAGS] = X86_LF_LOADED_HIGH;
	le32_store(b + BP_CODE32_START, 0x100000);
	le32_store(b + BP_INITRD_ADDR_MAX, 0x7fffffff);
	le32_store(b + BP_KERNEL_ALIGNMENT, 0x200000);
	b[BP_RELOCATABLE] = 1;
	le16_store(b + BP_XLOADFLAGS, 0x3);
	le32_store(b + BP_CMDLINE_SIZE, 2047);
	le64_store(b + BP_PREF_ADDRESS, 0x1000000);
	le32_store(b + BP_INIT_SIZE, 0x800000);
	for (i = 0; i < BZ_PAYLOAD; i++)
		b[(BZ_SETUP_SECTS + 1) * 512 + i] = (uint8_t)(i * 7 + 1);
	return b;
}

#define ELF_LOAD_OFF   0x1000
#define ELF_LOAD_PADDR 0x200000
#define ELF_FILESZ     0x100
#define ELF_MEMSZ      0x2000
#define ELF_NOTE_OFF   0x200
#define ELF_LEN        (ELF_LOAD_OFF + ELF_FILESZ)
#define PVH_ENTRY      0x200040

/* ELF64 x86_64 vmlinux: PT_LOAD + PT_NOTE holding a GNU note and then the
 * Xen PHYS32_ENTRY note (8-byte value, as Linux emits it). */
static uint8_t *make_elf(size_t *note_size)
{
	uint8_t *b = calloc(1, ELF_LEN), *ph, *n;
	unsigned i;

	CHECK(b);
	memcpy(b, "\x7f" "ELF", 4);
	b[4] = 2; b[5] = 1; b[6] = 1;
	le16_store(b + 16, 2);                 /* ET_EXEC */
	le16_store(b + 18, 62);                /* EM_X86_64 */
	le32_store(b + 20, 1);
	le64_store(b + 32, 64);                /* e_phoff */
	le16_store(b + 52, 64);
	le16_store(b + 54, 56);
	le16_store(b + 56, 2);

	n = b + ELF_NOTE_OFF;                  /* GNU build-id style note */
	le32_store(n, 4); le32_store(n + 4, 4); le32_store(n + 8, 3);
	memcpy(n + 12, "GNU", 4); le32_store(n + 16, 0x12345678);
	n += 20;
	le32_store(n, 4); le32_store(n + 4, 8); le32_store(n + 8, 18);
	memcpy(n + 12, "Xen", 4); le64_store(n + 16, PVH_ENTRY);
	n += 24;
	*note_size = (size_t)(n - (b + ELF_NOTE_OFF));

	ph = b + 64;                           /* PT_LOAD */
	le32_store(ph, 1); le32_store(ph + 4, 5);
	le64_store(ph + 8, ELF_LOAD_OFF);
	le64_store(ph + 16, 0xffffffff81000000ULL + ELF_LOAD_PADDR);
	le64_store(ph + 24, ELF_LOAD_PADDR);
	le64_store(ph + 32, ELF_FILESZ);
	le64_store(ph + 40, ELF_MEMSZ);
	ph += 56;                              /* PT_NOTE */
	le32_store(ph, 4);
	le64_store(ph + 8, ELF_NOTE_OFF);
	le64_store(ph + 32, *note_size);
	le64_store(ph + 40, *note_size);
	for (i = 0; i < ELF_FILESZ; i++)
		b[ELF_LOAD_OFF + i] = (uint8_t)(0x80 + i);
	return b;
}

static uint8_t *elf_phdr(uint8_t *b, unsigned i)
{
	return b + 64 + 56 * i;
}

/* ---- e820 ---------------------------------------------------------------- */

TEST(e820_256m_low_ram_only)
{
	struct x86_e820_entry e[8];
	unsigned n = x86_e820_build(256 * MiB, e, 8);

	CHECK_EQ(n, 3);
	CHECK_EQ(e[0].addr, 0); CHECK_EQ(e[0].size, 0x9fc00); CHECK_EQ(e[0].type, X86_E820_RAM);
	CHECK_EQ(e[1].addr, 0x9fc00); CHECK_EQ(e[1].size, 0x100000 - 0x9fc00);
	CHECK_EQ(e[1].type, X86_E820_RESERVED);
	CHECK_EQ(e[2].addr, 1 * MiB); CHECK_EQ(e[2].size, 255 * MiB); CHECK_EQ(e[2].type, X86_E820_RAM);
}

TEST(e820_4g_moves_ram_above_hole)
{
	struct x86_e820_entry e[8];
	unsigned n = x86_e820_build(4 * GiB, e, 8);

	CHECK_EQ(n, 4);
	CHECK_EQ(e[2].addr, 1 * MiB); CHECK_EQ(e[2].addr + e[2].size, X86_MMIO_HOLE_START);
	CHECK_EQ(e[3].addr, 4 * GiB); CHECK_EQ(e[3].size, 1 * GiB); CHECK_EQ(e[3].type, X86_E820_RAM);
}

TEST(e820_8g_total_ram_and_hole_respected)
{
	struct x86_e820_entry e[8];
	unsigned n = x86_e820_build(8 * GiB, e, 8), i;
	uint64_t ram = 0;

	CHECK_EQ(n, 4);
	for (i = 0; i < n; i++) {
		/* nothing may overlap [3 GiB, 4 GiB) */
		CHECK(e[i].addr + e[i].size <= X86_MMIO_HOLE_START || e[i].addr >= 4 * GiB);
		if (e[i].type == X86_E820_RAM)
			ram += e[i].size;
	}
	CHECK_EQ(ram, 8 * GiB - (0x100000 - 0x9fc00));
	CHECK_EQ(e[3].addr + e[3].size, 9 * GiB);
}

/* ---- bzImage --------------------------------------------------------------- */

TEST(bzimage_zero_page_fields)
{
	struct fake_guest g;
	struct x86_kernel k;
	struct x86_boot_info info;
	uint8_t *bz = make_bzimage(), *zp, initrd[8192];
	char err[256] = "";
	const char *cmd = "console=ttyS0 -- true";
	unsigned i;

	guest_init(&g, 64 * MiB, 0x5a);
	for (i = 0; i < sizeof(initrd); i++)
		initrd[i] = (uint8_t)(i ^ 0x3c);
	CHECK_EQ(x86_kernel_parse(bz, BZ_LEN, &k, err, sizeof(err)), 0);
	CHECK_EQ(k.kind, X86_KERNEL_BZIMAGE);
	CHECK_EQ(x86_boot_load_mem(&g.gm, g.mem_size, 2, &k, cmd, initrd, sizeof(initrd),
				   &info, err, sizeof(err)), 0);

	CHECK(!info.pvh);
	CHECK_EQ(info.entry, 0x100200);
	CHECK_EQ(info.params, X86_BOOT_PARAMS);
	zp = g.low + X86_BOOT_PARAMS;
	/* setup header copied from the image */
	CHECK_EQ(zp[BP_SETUP_SECTS], BZ_SETUP_SECTS);
	CHECK(memcmp(zp + BP_HEADER, "HdrS", 4) == 0);
	CHECK_EQ(le16_load(zp + BP_VERSION), 0x020f);
	CHECK_EQ(le32_load(zp + BP_INIT_SIZE), 0x800000);
	/* boot loader fields */
	CHECK_EQ(zp[BP_TYPE_OF_LOADER], 0xff);
	CHECK_EQ(zp[BP_LOADFLAGS], X86_LF_LOADED_HIGH | X86_LF_CAN_USE_HEAP);
	CHECK_EQ(le16_load(zp + BP_HEAP_END_PTR), 0xde00);
	CHECK_EQ(le32_load(zp + BP_CMD_LINE_PTR), X86_CMDLINE_ADDR);
	CHECK_STR((char *)g.low + X86_CMDLINE_ADDR, cmd);
	CHECK_EQ(le32_load(zp + BP_RAMDISK_IMAGE), 64 * MiB - 8192);
	CHECK_EQ(le32_load(zp + BP_RAMDISK_SIZE), 8192);
	CHECK(memcmp(g.low + 64 * MiB - 8192, initrd, sizeof(initrd)) == 0);
	/* e820 */
	CHECK_EQ(zp[BP_E820_ENTRIES], 3);
	CHECK_EQ(le64_load(zp + BP_E820_TABLE + 40), 1 * MiB);
	CHECK_EQ(le64_load(zp + BP_E820_TABLE + 48), 63 * MiB);
	CHECK_EQ(le32_load(zp + BP_E820_TABLE + 56), X86_E820_RAM);
	/* not-set fields are zero, not the 0x5a fill */
	CHECK_EQ(zp[0], 0);
	CHECK_EQ(le32_load(zp + BP_EXT_RAMDISK_IMAGE), 0);
	/* protected-mode code at 1 MiB */
	CHECK(memcmp(g.low + X86_HIMEM_START, bz + (BZ_SETUP_SECTS + 1) * 512, BZ_PAYLOAD) == 0);
	free(bz);
	free(g.low);
}

TEST(bzimage_setup_sects_zero_means_four)
{
	uint8_t *bz = make_bzimage();
	struct x86_kernel k;
	char err[256];

	bz[BP_SETUP_SECTS] = 0;
	CHECK_EQ(x86_kernel_parse(bz, BZ_LEN, &k, err, sizeof(err)), 0);
	CHECK_EQ(k.setup_size, 5 * 512);
	free(bz);
}

TEST(bzimage_rejects_bad_magic)
{
	uint8_t *bz = make_bzimage();
	struct x86_kernel k;
	char err[256] = "";

	memcpy(bz + BP_HEADER, "HdrZ", 4);
	CHECK_EQ(x86_kernel_parse(bz, BZ_LEN, &k, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, "neither a bzImage nor an ELF vmlinux with a PVH note"));
	free(bz);
}

TEST(bzimage_rejects_old_protocol)
{
	uint8_t *bz = make_bzimage();
	struct x86_kernel k;
	char err[256] = "";

	le16_store(bz + BP_VERSION, 0x020a);
	CHECK_EQ(x86_kernel_parse(bz, BZ_LEN, &k, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, "2.10"));
	CHECK(strstr(err, "too old"));
	free(bz);
}

TEST(bzimage_rejects_32bit_only_kernel)
{
	uint8_t *bz = make_bzimage();
	struct x86_kernel k;
	char err[256] = "";

	le16_store(bz + BP_XLOADFLAGS, 0);
	CHECK_EQ(x86_kernel_parse(bz, BZ_LEN, &k, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, "XLF_KERNEL_64"));
	free(bz);
}

TEST(bzimage_rejects_truncated_setup)
{
	uint8_t *bz = make_bzimage();
	struct x86_kernel k;
	char err[256] = "";

	bz[BP_SETUP_SECTS] = 200;   /* 100 KiB of setup in a 6.5 KiB file */
	CHECK_EQ(x86_kernel_parse(bz, BZ_LEN, &k, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, "truncated"));
	free(bz);
}

TEST(bzimage_rejects_cmdline_longer_than_cmdline_size)
{
	uint8_t *bz = make_bzimage();
	struct x86_kernel k;
	char err[256] = "";

	le32_store(bz + BP_CMDLINE_SIZE, 255);
	CHECK_EQ(x86_kernel_parse(bz, BZ_LEN, &k, err, sizeof(err)), 0);
	CHECK_EQ(x86_kernel_check(&k, 64 * MiB, 255, false, 0, 1, err, sizeof(err)), 0);
	CHECK_EQ(x86_kernel_check(&k, 64 * MiB, 256, false, 0, 1, err, sizeof(err)), -E2BIG);
	CHECK(strstr(err, "256 bytes"));
	CHECK(strstr(err, "at most 255"));
	free(bz);
}

TEST(bzimage_initrd_placed_highest_below_initrd_addr_max)
{
	uint8_t *bz = make_bzimage();
	struct x86_kernel k;
	uint64_t addr;
	char err[256] = "";

	le32_store(bz + BP_INITRD_ADDR_MAX, 0x37ffffff);
	CHECK_EQ(x86_kernel_parse(bz, BZ_LEN, &k, err, sizeof(err)), 0);
	CHECK_EQ(x86_initrd_place(&k, 2 * GiB, 10000, &addr, err, sizeof(err)), 0);
	CHECK_EQ(addr, ALIGN_DOWN(0x38000000ULL - 10000, 4096));
	CHECK_EQ(addr % 4096, 0);
	/* RAM smaller than initrd_addr_max: end of RAM is the limit */
	CHECK_EQ(x86_initrd_place(&k, 256 * MiB, 10000, &addr, err, sizeof(err)), 0);
	CHECK_EQ(addr, ALIGN_DOWN(256 * MiB - 10000, 4096));
	free(bz);
}

TEST(bzimage_rejects_initrd_over_initrd_addr_max)
{
	uint8_t *bz = make_bzimage();
	struct x86_kernel k;
	char err[256] = "";

	/* kernel occupies up to 24 MiB; only 8 MiB left below 32 MiB */
	le32_store(bz + BP_INITRD_ADDR_MAX, 0x01ffffff);
	CHECK_EQ(x86_kernel_parse(bz, BZ_LEN, &k, err, sizeof(err)), 0);
	CHECK_EQ(x86_kernel_check(&k, 1 * GiB, 0, true, 8 * MiB, 1, err, sizeof(err)), 0);
	CHECK_EQ(x86_kernel_check(&k, 1 * GiB, 0, true, 8 * MiB + 1, 1, err, sizeof(err)), -E2BIG);
	CHECK(strstr(err, "initrd_addr_max"));
	free(bz);
}

TEST(bzimage_rejects_initrd_bigger_than_ram)
{
	uint8_t *bz = make_bzimage();
	struct x86_kernel k;
	char err[256] = "";

	CHECK_EQ(x86_kernel_parse(bz, BZ_LEN, &k, err, sizeof(err)), 0);
	CHECK_EQ(x86_kernel_check(&k, 64 * MiB, 0, true, 60 * MiB, 1, err, sizeof(err)), -E2BIG);
	CHECK(strstr(err, "--mem"));
	free(bz);
}

TEST(bzimage_rejects_kernel_bigger_than_ram)
{
	uint8_t *bz = make_bzimage();
	struct x86_kernel k;
	char err[256] = "";

	/* pref_address 16 MiB + init_size 8 MiB: needs 24 MiB */
	CHECK_EQ(x86_kernel_parse(bz, BZ_LEN, &k, err, sizeof(err)), 0);
	CHECK_EQ(k.load_end, 24 * MiB);
	CHECK_EQ(x86_kernel_check(&k, 24 * MiB, 0, false, 0, 1, err, sizeof(err)), 0);
	CHECK_EQ(x86_kernel_check(&k, 20 * MiB, 0, false, 0, 1, err, sizeof(err)), -E2BIG);
	CHECK(strstr(err, "kernel needs RAM up to 0x1800000"));
	free(bz);
}

TEST(check_rejects_bad_vcpu_count)
{
	uint8_t *bz = make_bzimage();
	struct x86_kernel k;
	char err[256] = "";

	CHECK_EQ(x86_kernel_parse(bz, BZ_LEN, &k, err, sizeof(err)), 0);
	CHECK_EQ(x86_kernel_check(&k, 64 * MiB, 0, false, 0, 0, err, sizeof(err)), -EINVAL);
	CHECK_EQ(x86_kernel_check(&k, 64 * MiB, 0, false, 0, 255, err, sizeof(err)), -EINVAL);
	CHECK_EQ(x86_kernel_check(&k, 64 * MiB, 0, false, 0, 254, err, sizeof(err)), 0);
	free(bz);
}

TEST(boot_check_names_file_that_is_no_kernel)
{
	char path[] = "/tmp/mvm-test-kernel-XXXXXX", err[512] = "";
	struct x86_boot_cfg cfg = { .mem_size = 64 * MiB, .ncpus = 1 };
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "#!/bin/sh\necho not a kernel\n", 28), 28);
	close(fd);
	cfg.kernel_path = path;
	CHECK_EQ(x86_boot_check(&cfg, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, path));
	CHECK(strstr(err, "neither a bzImage nor an ELF vmlinux with a PVH note"));
	cfg.kernel_path = "/nonexistent/bzImage";
	CHECK_EQ(x86_boot_check(&cfg, err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "/nonexistent/bzImage"));
	unlink(path);
}

TEST(boot_check_accepts_bzimage_file_with_initrd)
{
	char kpath[] = "/tmp/mvm-test-kernel-XXXXXX", ipath[] = "/tmp/mvm-test-initrd-XXXXXX";
	char err[512] = "";
	uint8_t *bz = make_bzimage();
	struct x86_boot_cfg cfg = { .mem_size = 64 * MiB, .ncpus = 4, .cmdline = "quiet" };
	int kfd = mkstemp(kpath), ifd = mkstemp(ipath);

	CHECK(kfd >= 0 && ifd >= 0);
	CHECK_EQ(write(kfd, bz, BZ_LEN), BZ_LEN);
	CHECK_EQ(write(ifd, "070701", 6), 6);
	close(kfd);
	close(ifd);
	cfg.kernel_path = kpath;
	cfg.initrd_path = ipath;
	CHECK_EQ(x86_boot_check(&cfg, err, sizeof(err)), 0);
	cfg.mem_size = 16 * MiB;
	CHECK_EQ(x86_boot_check(&cfg, err, sizeof(err)), -E2BIG);
	unlink(kpath);
	unlink(ipath);
	free(bz);
}

/* Writes len bytes to a new temporary file named from tmpl. */
static void write_tmp(char *tmpl, const void *buf, size_t len)
{
	int fd = mkstemp(tmpl);

	CHECK(fd >= 0);
	CHECK_EQ(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

TEST(boot_load_reads_initrd_file_into_its_place)
{
	char kpath[] = "/tmp/mvm-test-kernel-XXXXXX", ipath[] = "/tmp/mvm-test-initrd-XXXXXX";
	char err[512] = "";
	uint8_t *bz = make_bzimage(), initrd[12288], *zp;
	struct x86_boot_cfg cfg = { .mem_size = 64 * MiB, .ncpus = 1, .cmdline = "quiet" };
	struct x86_boot_info info;
	struct fake_guest g;
	unsigned i;

	for (i = 0; i < sizeof(initrd); i++)
		initrd[i] = (uint8_t)(i * 13 + 5);
	write_tmp(kpath, bz, BZ_LEN);
	write_tmp(ipath, initrd, sizeof(initrd));
	cfg.kernel_path = kpath;
	cfg.initrd_path = ipath;
	guest_init(&g, 64 * MiB, 0);
	CHECK_EQ(x86_boot_load(&g.gm, &cfg, &info, err, sizeof(err)), 0);
	zp = g.low + X86_BOOT_PARAMS;
	CHECK_EQ(le32_load(zp + BP_RAMDISK_IMAGE), 64 * MiB - sizeof(initrd));
	CHECK_EQ(le32_load(zp + BP_RAMDISK_SIZE), sizeof(initrd));
	CHECK(memcmp(g.low + 64 * MiB - sizeof(initrd), initrd, sizeof(initrd)) == 0);
	CHECK(memcmp(g.low + X86_HIMEM_START, bz + (BZ_SETUP_SECTS + 1) * 512, BZ_PAYLOAD) == 0);
	free(g.low);
	unlink(kpath);
	unlink(ipath);
	free(bz);
}

TEST(boot_load_refuses_empty_initrd_file_by_name)
{
	char kpath[] = "/tmp/mvm-test-kernel-XXXXXX", ipath[] = "/tmp/mvm-test-initrd-XXXXXX";
	char err[512] = "";
	uint8_t *bz = make_bzimage();
	struct x86_boot_cfg cfg = { .mem_size = 64 * MiB, .ncpus = 1 };
	struct x86_boot_info info;
	struct fake_guest g;

	write_tmp(kpath, bz, BZ_LEN);
	write_tmp(ipath, "", 0);
	cfg.kernel_path = kpath;
	cfg.initrd_path = ipath;
	guest_init(&g, 64 * MiB, 0);
	CHECK_EQ(x86_boot_load(&g.gm, &cfg, &info, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, ipath));
	CHECK(strstr(err, "empty"));
	free(g.low);
	unlink(kpath);
	unlink(ipath);
	free(bz);
}

/* Writes a kernel file from tmpl and checks it by that name, keeping the
 * image the check opened in *kept, as mvm_create does. */
static void check_keep_file(char *tmpl, const void *k, size_t len, struct x86_boot_cfg *cfg,
			    struct boot_image *kept)
{
	char err[512] = "";

	write_tmp(tmpl, k, len);
	cfg->kernel_path = tmpl;
	CHECK_EQ(x86_boot_check_keep(cfg, kept, err, sizeof(err)), 0);
}

/* The kernel is opened once: the check keeps a bzImage's header and its
 * open file, and the load reads the payload from that file straight into
 * guest RAM. A file renamed over the path meanwhile changes nothing; one
 * cut short is an error that says so. */
TEST(boot_load_loads_the_kernel_the_check_opened)
{
	char kpath[] = "/tmp/mvm-test-kernel-XXXXXX", other[] = "/tmp/mvm-test-other-XXXXXX";
	char err[512] = "", orig[64];
	uint8_t *bz = make_bzimage();
	struct x86_boot_cfg cfg = { .mem_size = 64 * MiB, .ncpus = 1 };
	struct boot_image kept = BOOT_IMAGE_NONE;
	struct x86_boot_info info;
	struct fake_guest g;

	check_keep_file(kpath, bz, BZ_LEN, &cfg, &kept);
	CHECK(kept.buf);
	CHECK_EQ(kept.len, BZ_LEN);
	/* Only the header was read: the payload is still in the file. */
	CHECK(kept.fd >= 0);
	CHECK(kept.head < BZ_LEN);
	/* A second name for the checked file, then another file in its place. */
	snprintf(orig, sizeof(orig), "%s.orig", kpath);
	CHECK_EQ(link(kpath, orig), 0);
	write_tmp(other, "#!/bin/sh\n", 10);
	CHECK_EQ(rename(other, kpath), 0);
	/* Without the kept image the load opens the new file and refuses it... */
	guest_init(&g, 64 * MiB, 0);
	CHECK_EQ(x86_boot_load(&g.gm, &cfg, &info, err, sizeof(err)), -ENOEXEC);
	/* ...with it, it loads the kernel that was checked. */
	cfg.kernel_image = &kept;
	CHECK_EQ(x86_boot_load(&g.gm, &cfg, &info, err, sizeof(err)), 0);
	CHECK(memcmp(g.low + X86_HIMEM_START, bz + (BZ_SETUP_SECTS + 1) * 512, BZ_PAYLOAD) == 0);
	/* The checked file cut short: the payload cannot be read whole. */
	CHECK_EQ(truncate(orig, BZ_LEN - 100), 0);
	CHECK_EQ(x86_boot_load(&g.gm, &cfg, &info, err, sizeof(err)), -EIO);
	CHECK(strstr(err, "shorter"));
	boot_image_free(&kept);
	CHECK_EQ(kept.fd, -1);
	free(g.low);
	unlink(orig);
	unlink(kpath);
	free(bz);
}

/* A vmlinux laid out the way a linker writes one: headers in the first
 * page, a segment that begins in that page and ends past it, and the
 * notes further in, past the segment. */
#define VML_SEG_OFF   0xf00
#define VML_FILESZ    0x2000
#define VML_MEMSZ     0x3000
#define VML_NOTE_OFF  0x3000
#define VML_LEN       0x3100

static uint8_t *make_vmlinux(void)
{
	size_t ns;
	uint8_t *e = make_elf(&ns), *b = calloc(1, VML_LEN);
	unsigned i;

	CHECK(b);
	memcpy(b, e, ELF_NOTE_OFF);                          /* headers */
	memcpy(b + VML_NOTE_OFF, e + ELF_NOTE_OFF, ns);      /* the notes */
	le64_store(elf_phdr(b, 0) + 8, VML_SEG_OFF);
	le64_store(elf_phdr(b, 0) + 32, VML_FILESZ);
	le64_store(elf_phdr(b, 0) + 40, VML_MEMSZ);
	le64_store(elf_phdr(b, 1) + 8, VML_NOTE_OFF);
	for (i = 0; i < VML_FILESZ; i++)
		b[VML_SEG_OFF + i] = (uint8_t)(i * 13 + 5);
	free(e);
	return b;
}

/* A vmlinux is checked from its first page and its notes; the load reads
 * its segments from the file straight into guest RAM (no copy of the
 * whole file, symbols and all, in mvm's memory). What lands in guest RAM
 * is the segment's bytes, then zeroes up to its memory size; a file cut
 * short meanwhile is an error that says so. */
TEST(boot_load_reads_a_vmlinux_segment_from_its_file)
{
	char kpath[] = "/tmp/mvm-test-kernel-XXXXXX";
	char err[512] = "";
	uint8_t *b = make_vmlinux(), zero[VML_MEMSZ - VML_FILESZ] = { 0 };
	struct x86_boot_cfg cfg = { .mem_size = 64 * MiB, .ncpus = 1 };
	struct boot_image kept = BOOT_IMAGE_NONE;
	struct x86_boot_info info;
	struct fake_guest g;

	check_keep_file(kpath, b, VML_LEN, &cfg, &kept);
	CHECK(kept.fd >= 0);
	CHECK_EQ(kept.head, 4096);
	CHECK_EQ(kept.len, VML_LEN);
	cfg.kernel_image = &kept;
	guest_init(&g, 64 * MiB, 0xaa);
	CHECK_EQ(x86_boot_load(&g.gm, &cfg, &info, err, sizeof(err)), 0);
	CHECK(info.pvh);
	CHECK_EQ(info.entry, PVH_ENTRY);
	CHECK(memcmp(g.low + ELF_LOAD_PADDR, b + VML_SEG_OFF, VML_FILESZ) == 0);
	CHECK(memcmp(g.low + ELF_LOAD_PADDR + VML_FILESZ, zero, sizeof(zero)) == 0);
	/* The same, opened by name at load time. */
	cfg.kernel_image = NULL;
	free(g.low);
	guest_init(&g, 64 * MiB, 0xaa);
	CHECK_EQ(x86_boot_load(&g.gm, &cfg, &info, err, sizeof(err)), 0);
	CHECK(memcmp(g.low + ELF_LOAD_PADDR, b + VML_SEG_OFF, VML_FILESZ) == 0);
	/* Cut short inside the segment, after the check. */
	CHECK_EQ(truncate(kpath, VML_SEG_OFF + VML_FILESZ - 1), 0);
	cfg.kernel_image = &kept;
	CHECK_EQ(x86_boot_load(&g.gm, &cfg, &info, err, sizeof(err)), -EIO);
	CHECK(strstr(err, "shorter"));
	boot_image_free(&kept);
	free(g.low);
	unlink(kpath);
	free(b);
}

/* The PVH note is found where a vmlinux has it, past the first page; a
 * note segment that runs past the end of the file is named. */
TEST(boot_check_finds_a_vmlinux_note_past_the_first_page)
{
	char kpath[] = "/tmp/mvm-test-kernel-XXXXXX";
	char err[512] = "";
	uint8_t *b = make_vmlinux();
	struct x86_boot_cfg cfg = { .mem_size = 64 * MiB, .ncpus = 1, .kernel_path = kpath };
	int fd;

	write_tmp(kpath, b, VML_LEN);
	CHECK_EQ(x86_boot_check(&cfg, err, sizeof(err)), 0);
	le64_store(elf_phdr(b, 1) + 32, VML_LEN - VML_NOTE_OFF + 1);
	le64_store(elf_phdr(b, 1) + 40, VML_LEN - VML_NOTE_OFF + 1);
	fd = open(kpath, O_WRONLY);
	CHECK(fd >= 0);
	CHECK_EQ(pwrite(fd, elf_phdr(b, 1), 56, elf_phdr(b, 1) - b), 56);
	close(fd);
	CHECK_EQ(x86_boot_check(&cfg, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, kpath));
	CHECK(strstr(err, "note segment"));
	unlink(kpath);
	free(b);
}

/* ---- ELF / PVH -------------------------------------------------------------- */

TEST(elf_pvh_note_found)
{
	size_t ns;
	uint8_t *b = make_elf(&ns);
	struct x86_kernel k;
	char err[256] = "";

	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), 0);
	CHECK_EQ(k.kind, X86_KERNEL_PVH);
	CHECK_EQ(k.pvh_entry, PVH_ENTRY);
	CHECK_EQ(k.load_start, ELF_LOAD_PADDR);
	CHECK_EQ(k.load_end, ELF_LOAD_PADDR + ELF_MEMSZ);
	free(b);
}

TEST(elf_pvh_note_with_4_byte_value)
{
	size_t ns;
	uint8_t *b = make_elf(&ns), *n = b + ELF_NOTE_OFF + 20;
	struct x86_kernel k;
	char err[256] = "";

	le32_store(n + 4, 4);                        /* descsz 4 */
	le64_store(elf_phdr(b, 1) + 32, ns - 4);
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), 0);
	CHECK_EQ(k.pvh_entry, PVH_ENTRY);
	free(b);
}

TEST(elf_without_pvh_note_rejected)
{
	size_t ns;
	uint8_t *b = make_elf(&ns);
	struct x86_kernel k;
	char err[256] = "";

	le32_store(b + ELF_NOTE_OFF + 20 + 8, 17);   /* some other Xen note */
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, "no PVH entry note"));
	free(b);
}

TEST(elf_rejects_phoff_beyond_file)
{
	size_t ns;
	uint8_t *b = make_elf(&ns);
	struct x86_kernel k;
	char err[256] = "";

	le64_store(b + 32, ELF_LEN - 56);            /* 2 headers don't fit */
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, "program headers"));
	le64_store(b + 32, UINT64_MAX - 8);          /* offset + size wraps */
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), -ENOEXEC);
	free(b);
}

TEST(elf_rejects_huge_phnum)
{
	size_t ns;
	uint8_t *b = make_elf(&ns);
	struct x86_kernel k;
	char err[256] = "";

	le16_store(b + 56, 0xffff);
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, "65535 program headers"));
	le16_store(b + 56, 0);
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), -ENOEXEC);
	free(b);
}

TEST(elf_rejects_filesz_above_memsz)
{
	size_t ns;
	uint8_t *b = make_elf(&ns);
	struct x86_kernel k;
	char err[256] = "";

	le64_store(elf_phdr(b, 0) + 40, ELF_FILESZ - 1);
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, "p_filesz"));
	free(b);
}

TEST(elf_rejects_segment_data_beyond_file)
{
	size_t ns;
	uint8_t *b = make_elf(&ns);
	struct x86_kernel k;
	char err[256] = "";

	le64_store(elf_phdr(b, 0) + 8, ELF_LEN - 0x10);
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, "beyond"));
	free(b);
}

TEST(elf_rejects_segment_beyond_ram)
{
	size_t ns;
	uint8_t *b = make_elf(&ns);
	struct x86_kernel k;
	struct x86_boot_info info;
	struct fake_guest g;
	char err[256] = "";

	le64_store(elf_phdr(b, 0) + 24, 63 * MiB);   /* ends at 63 MiB + 8 KiB */
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), 0);
	CHECK_EQ(x86_kernel_check(&k, 64 * MiB, 0, false, 0, 1, err, sizeof(err)), 0);
	CHECK_EQ(x86_kernel_check(&k, 63 * MiB, 0, false, 0, 1, err, sizeof(err)), -E2BIG);
	guest_init(&g, 63 * MiB, 0);
	CHECK_EQ(x86_boot_load_mem(&g.gm, g.mem_size, 1, &k, "", NULL, 0, &info,
				   err, sizeof(err)), -E2BIG);
	free(g.low);
	free(b);
}

TEST(elf_rejects_segment_below_1m)
{
	size_t ns;
	uint8_t *b = make_elf(&ns);
	struct x86_kernel k;
	char err[256] = "";

	le64_store(elf_phdr(b, 0) + 24, 0x7000);     /* would hit the zero page */
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, "below 1 MiB"));
	free(b);
}

TEST(elf_rejects_note_overrun)
{
	size_t ns;
	uint8_t *b = make_elf(&ns);
	struct x86_kernel k;
	char err[256] = "";

	le32_store(b + ELF_NOTE_OFF + 4, 0x1000);    /* first note's desc too big */
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, "overruns"));
	le32_store(b + ELF_NOTE_OFF + 4, 0xfffffffe); /* alignment must not wrap */
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), -ENOEXEC);
	free(b);
	b = make_elf(&ns);
	le64_store(elf_phdr(b, 1) + 32, ELF_LEN);    /* note segment past the file */
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), -ENOEXEC);
	free(b);
}

TEST(elf_rejects_wrong_class_or_machine)
{
	size_t ns;
	uint8_t *b = make_elf(&ns);
	struct x86_kernel k;
	char err[256] = "";

	b[4] = 1;                                    /* ELFCLASS32 */
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), -ENOEXEC);
	b[4] = 2;
	le16_store(b + 18, 183);                     /* aarch64 */
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), -ENOEXEC);
	CHECK(strstr(err, "183"));
	CHECK_EQ(x86_kernel_parse(b, 10, &k, err, sizeof(err)), -ENOEXEC);
	free(b);
}

TEST(pvh_cmdline_limit)
{
	size_t ns;
	uint8_t *b = make_elf(&ns);
	struct x86_kernel k;
	char err[256] = "";

	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), 0);
	CHECK_EQ(x86_kernel_check(&k, 64 * MiB, 2047, false, 0, 1, err, sizeof(err)), 0);
	CHECK_EQ(x86_kernel_check(&k, 64 * MiB, 2048, false, 0, 1, err, sizeof(err)), -E2BIG);
	free(b);
}

TEST(pvh_start_info_fields)
{
	size_t ns;
	uint8_t *b = make_elf(&ns), *si, *mm, *ml, initrd[5000];
	struct x86_kernel k;
	struct x86_boot_info info;
	struct fake_guest g;
	char err[256] = "";
	unsigned i;

	guest_init(&g, 128 * MiB, 0xaa);
	memset(initrd, 0x42, sizeof(initrd));
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), 0);
	CHECK_EQ(x86_boot_load_mem(&g.gm, g.mem_size, 4, &k, "console=ttyS0", initrd,
				   sizeof(initrd), &info, err, sizeof(err)), 0);
	CHECK(info.pvh);
	CHECK_EQ(info.entry, PVH_ENTRY);
	CHECK_EQ(info.params, X86_BOOT_PARAMS);

	si = g.low + X86_BOOT_PARAMS;
	CHECK_EQ(le32_load(si + PVH_MAGIC), 0x336ec578);
	CHECK_EQ(le32_load(si + PVH_VERSION), 1);
	CHECK_EQ(le32_load(si + PVH_FLAGS), 0);
	CHECK_EQ(le32_load(si + PVH_NR_MODULES), 1);
	CHECK_EQ(le64_load(si + PVH_CMDLINE_PADDR), X86_CMDLINE_ADDR);
	CHECK_STR((char *)g.low + X86_CMDLINE_ADDR, "console=ttyS0");
	CHECK_EQ(le64_load(si + PVH_RSDP_PADDR), 0);

	ml = g.low + le64_load(si + PVH_MODLIST_PADDR);
	CHECK_EQ(le64_load(ml), 128 * MiB - 8192);    /* 5000 bytes, page aligned down */
	CHECK_EQ(le64_load(ml + 8), sizeof(initrd));
	CHECK_EQ(le64_load(ml + 16), 0);
	CHECK(memcmp(g.low + 128 * MiB - 8192, initrd, sizeof(initrd)) == 0);

	CHECK_EQ(le32_load(si + PVH_MEMMAP_ENTRIES), 3);
	mm = g.low + le64_load(si + PVH_MEMMAP_PADDR);
	CHECK_EQ(le64_load(mm), 0);
	CHECK_EQ(le64_load(mm + 8), 0x9fc00);
	CHECK_EQ(le32_load(mm + 16), X86_E820_RAM);
	CHECK_EQ(le32_load(mm + 24 + 16), X86_E820_RESERVED);
	CHECK_EQ(le64_load(mm + 48), 1 * MiB);
	CHECK_EQ(le64_load(mm + 48 + 8), 127 * MiB);

	/* segment copied, bss zeroed over the 0xaa fill */
	for (i = 0; i < ELF_FILESZ; i++)
		CHECK_EQ(g.low[ELF_LOAD_PADDR + i], (uint8_t)(0x80 + i));
	for (i = ELF_FILESZ; i < ELF_MEMSZ; i++)
		CHECK_EQ(g.low[ELF_LOAD_PADDR + i], 0);
	CHECK_EQ(g.low[ELF_LOAD_PADDR + ELF_MEMSZ], 0xaa);
	free(g.low);
	free(b);
}

TEST(pvh_without_initrd_has_no_modules)
{
	size_t ns;
	uint8_t *b = make_elf(&ns), *si;
	struct x86_kernel k;
	struct x86_boot_info info;
	struct fake_guest g;
	char err[256] = "";

	guest_init(&g, 32 * MiB, 0);
	CHECK_EQ(x86_kernel_parse(b, ELF_LEN, &k, err, sizeof(err)), 0);
	CHECK_EQ(x86_boot_load_mem(&g.gm, g.mem_size, 1, &k, NULL, NULL, 0, &info,
				   err, sizeof(err)), 0);
	si = g.low + X86_BOOT_PARAMS;
	CHECK_EQ(le32_load(si + PVH_NR_MODULES), 0);
	CHECK_EQ(le64_load(si + PVH_MODLIST_PADDR), 0);
	CHECK_STR((char *)g.low + X86_CMDLINE_ADDR, "");
	free(g.low);
	free(b);
}
