/* x86 kernel loading (arch/x86/boot.c): a fuzzed kernel file classified
 * and validated by x86_kernel_parse (bzImage setup header, or ELF vmlinux
 * with its PVH note), then, when accepted, loaded by x86_boot_load_mem with
 * a fuzzed initrd and command line into fake guest RAM, as the unit tests
 * in tests/unit/test_x86_boot.c do. x86 only (the Makefile builds
 * fuzz_<arch>_* for that architecture).
 *
 * Input: mem size selector (16..64 MiB), vCPU count (0..255), initrd and
 * command-line lengths, the command line, the initrd, then the kernel.
 * Guest RAM is a malloc'd block of exactly the guest's size, so a write
 * past it is an ASan report. Invariants: results are 0 or negative with a
 * message; a loaded kernel's boot parameters are inside RAM. */
#include "tests/fuzz/fuzz.h"
#include "arch/x86/x86.h"
#include "arch/x86/layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = { data, size };
	uint64_t mem_size = (16ULL + (fz_u8(&in) % 4) * 16) << 20;
	unsigned ncpus = fz_u8(&in);
	size_t initrd_len = fz_u16(&in), cmd_len = fz_u8(&in) * 16u;
	char err[256] = "", *cmdline;
	uint8_t *initrd, *kernel, *ram;
	struct x86_kernel k;
	struct x86_boot_info info;
	struct guest_mem gm = { .nr = 0 };
	size_t klen;
	int ret;

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
	/* The kernel file: a heap block of its exact size. */
	klen = fz_left(&in);
	kernel = malloc(klen + 1);
	FZ_ASSERT(kernel);
	fz_bytes(&in, kernel, klen);

	ret = x86_kernel_parse(kernel, klen, &k, err, sizeof(err));
	FZ_ASSERT(ret <= 0);
	FZ_ASSERT(ret == 0 || err[0]);
	if (ret == 0) {
		ram = malloc(mem_size);
		FZ_ASSERT(ram);
		FZ_ASSERT(gmem_add_region(&gm, 0, mem_size, ram) == 0);
		err[0] = 0;
		ret = x86_boot_load_mem(&gm, mem_size, ncpus, &k, cmdline,
					initrd_len ? initrd : NULL, initrd_len, &info,
					err, sizeof(err));
		FZ_ASSERT(ret <= 0);
		FZ_ASSERT(ret == 0 || err[0]);
		if (ret == 0) {
			FZ_ASSERT(ncpus >= 1 && ncpus <= X86_MAX_VCPUS);
			FZ_ASSERT(info.params == X86_BOOT_PARAMS);
			FZ_ASSERT(info.pvh == (k.kind == X86_KERNEL_PVH));
		}
		free(ram);
	}
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
	static uint8_t b[4096];
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
}
