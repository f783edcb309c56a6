/* x86 kernel loading (arch/x86/boot.c) from fuzzed files: the kernel and
 * the initrd are written to memfds and named by /proc/self/fd paths, then
 * go through the two file front ends mvm uses, x86_boot_check (before
 * anything starts) and x86_boot_load (into fake guest RAM), and so through
 * boot_image_read, x86_kernel_parse (bzImage setup header, or ELF vmlinux with
 * its PVH note) and the loader x86_boot_load_mem shares, which
 * tests/unit/test_x86_boot.c calls directly. x86 only (the Makefile builds fuzz_<arch>_* for that
 * architecture).
 *
 * Input: mem size selector (16..64 MiB), vCPU count (0..255), initrd and
 * command-line lengths, the command line, the initrd, then the kernel.
 * Guest RAM is a malloc'd block of exactly the guest's size (one per size,
 * reused), so a write past it is an ASan report. Invariants: results are 0 or negative with a
 * one-line message; the check and the load agree (a kernel the check
 * passes loads, one it refuses does not); a loaded kernel's boot
 * parameters are where the boot protocol puts them. */
#include "tests/fuzz/fuzz.h"
#include "arch/x86/boot.h"
#include "arch/x86/x86.h"
#include "arch/x86/layout.h"

#include <sys/mman.h>
#include <unistd.h>

/* A memfd holding len bytes, and its path. */
static const char *file_with(int *fd, char *path, size_t pathlen, const void *p, size_t len)
{
	if (*fd < 0) {
		*fd = memfd_create("fuzz", MFD_CLOEXEC);
		FZ_ASSERT(*fd >= 0);
	}
	FZ_ASSERT(ftruncate(*fd, 0) == 0);
	FZ_ASSERT(pwrite(*fd, p, len, 0) == (ssize_t)len);
	snprintf(path, pathlen, "/proc/self/fd/%d", *fd);
	return path;
}

static void check_result(int ret, const char *err)
{
	FZ_ASSERT(ret <= 0);
	if (ret) {
		FZ_ASSERT(err[0]);
		FZ_ASSERT(!strchr(err, '\n'));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int kfd = -1, ifd = -1;
	static char kpath[64], ipath[64];
	static uint8_t *rams[4];
	struct fz in = { data, size };
	uint64_t mem_size = (16ULL + (fz_u8(&in) % 4) * 16) << 20;
	unsigned ncpus = fz_u8(&in);
	size_t initrd_len = fz_u16(&in), cmd_len = fz_u8(&in) * 16u, klen;
	char err[256] = "", err_load[256] = "", *cmdline;
	uint8_t *initrd, *kernel, *ram;
	struct x86_boot_cfg cfg = { .mem_size = mem_size, .ncpus = ncpus };
	struct x86_boot_info info;
	struct guest_mem gm = { .nr = 0 };
	int ret, ret_load;

	if (cmd_len > fz_left(&in))
		cmd_len = fz_left(&in);
	cmdline = malloc(cmd_len + 1);
	FZ_ASSERT(cmdline);
	fz_bytes(&in, cmdline, cmd_len);
	cmdline[cmd_len] = 0;
	if (initrd_len > fz_left(&in))
		initrd_len = fz_left(&in);
	initrd = malloc(initrd_len + 1);
	FZ_ASSERT(initrd);
	fz_bytes(&in, initrd, initrd_len);
	klen = fz_left(&in);
	kernel = malloc(klen + 1);
	FZ_ASSERT(kernel);
	fz_bytes(&in, kernel, klen);

	cfg.cmdline = cmdline;
	cfg.kernel_path = file_with(&kfd, kpath, sizeof(kpath), kernel, klen);
	if (initrd_len)
		cfg.initrd_path = file_with(&ifd, ipath, sizeof(ipath), initrd, initrd_len);

	ret = x86_boot_check(&cfg, err, sizeof(err));
	check_result(ret, err);

	/* One block per RAM size, kept (a fresh one per input would cost
	 * more than the rest: ASan poisons the whole block's shadow). */
	ram = rams[(mem_size >> 24) - 1];
	if (!ram) {
		ram = rams[(mem_size >> 24) - 1] = malloc(mem_size);
		FZ_ASSERT(ram);
	}
	FZ_ASSERT(gmem_add_region(&gm, 0, mem_size, ram) == 0);
	ret_load = x86_boot_load(&gm, &cfg, &info, err_load, sizeof(err_load));
	check_result(ret_load, err_load);
	if (!!ret != !!ret_load) {
		fprintf(stderr, "x86_boot_check: %d %s\nx86_boot_load: %d %s\n", ret, err,
			ret_load, err_load);
		FZ_ASSERT(!"x86_boot_check and x86_boot_load disagree");
	}
	if (ret_load == 0)
		FZ_ASSERT(info.params == X86_BOOT_PARAMS);
	free(kernel);
	free(initrd);
	free(cmdline);
	return 0;
}

/* --- seeds: the unit tests' minimal bzImage and ELF/PVH vmlinux --- */

static void header(struct fz_buf *s, uint8_t ncpus, uint16_t initrd_len, const char *cmd)
{
	size_t n = strlen(cmd);

	s->n = 0;
	fzb_u8(s, 0);                   /* 16 MiB */
	fzb_u8(s, ncpus);
	fzb_u16(s, initrd_len);
	fzb_u8(s, (uint8_t)((n + 15) / 16));
	fzb_bytes(s, cmd, n);
	for (size_t i = n; i < (n + 15) / 16 * 16; i++)
		fzb_u8(s, ' ');
	for (unsigned i = 0; i < initrd_len; i++)
		fzb_u8(s, (uint8_t)i);
}

static void fuzz_seeds(void)
{
	static uint8_t b[8192];
	struct fz_buf s;

	/* bzImage 2.15, setup_sects 1, 64-bit entry, 512 bytes of payload */
	memset(b, 0, sizeof(b));
	b[BP_SETUP_SECTS] = 1;
	le16_store(b + BP_BOOT_FLAG, 0xaa55);
	b[BP_JUMP] = 0xeb;
	b[BP_JUMP + 1] = 0x66;
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
	le32_store(b + BP_INIT_SIZE, 0x100000);
	header(&s, 2, 64, "console=ttyS0 -- true");
	s.b[0] = 1;                     /* 32 MiB: loaded at 16 MiB, init_size 1 MiB */
	fzb_bytes(&s, b, 3 * 512);
	fuzz_seed("bzimage", s.b, s.n);

	/* ELF64 vmlinux: PT_LOAD at 2 MiB, PT_NOTE with the Xen PVH entry */
	memset(b, 0, sizeof(b));
	memcpy(b, "\x7f" "ELF", 4);
	b[4] = 2; b[5] = 1; b[6] = 1;
	le16_store(b + 16, 2);
	le16_store(b + 18, 62);
	le32_store(b + 20, 1);
	le64_store(b + 32, 64);
	le16_store(b + 52, 64);
	le16_store(b + 54, 56);
	le16_store(b + 56, 2);
	uint8_t *n = b + 0x200, *ph = b + 64;
	le32_store(n, 4); le32_store(n + 4, 8); le32_store(n + 8, 18);
	memcpy(n + 12, "Xen", 4); le64_store(n + 16, 0x200040);
	le32_store(ph, 1); le32_store(ph + 4, 5);
	le64_store(ph + 8, 0x400);
	le64_store(ph + 16, 0xffffffff81200000ULL);
	le64_store(ph + 24, 0x200000);
	le64_store(ph + 32, 0x100);
	le64_store(ph + 40, 0x2000);
	ph += 56;
	le32_store(ph, 4);
	le64_store(ph + 8, 0x200);
	le64_store(ph + 32, 24);
	le64_store(ph + 40, 24);
	header(&s, 1, 0, "");
	fzb_bytes(&s, b, 0x500);
	fuzz_seed("elf_pvh", s.b, s.n);
	header(&s, 4, 32, "quiet");
	fzb_bytes(&s, b, 0x500);
	fuzz_seed("elf_pvh_initrd", s.b, s.n);

	/* The same laid out like a real vmlinux, larger than the head mvm
	 * reads first: the segment runs past it, the notes lie beyond it. */
	memmove(b + 0x1200, b + 0x200, 24);
	memset(b + 0x200, 0, 24);
	memset(b + 0xf00, 0x90, 0x300);
	ph = b + 64;
	le64_store(ph + 8, 0xf00);
	le64_store(ph + 32, 0x300);
	le64_store(ph + 56 + 8, 0x1200);
	header(&s, 2, 16, "");
	fzb_bytes(&s, b, 0x1400);
	fuzz_seed("elf_pvh_notes_past_head", s.b, s.n);
}
