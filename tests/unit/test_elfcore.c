/* ELF core files of guests (vmm/base/elfcore.c), read back as a reader
 * (crash, gdb, readelf) reads them: the ELF header of a 64-bit core of
 * the given machine and byte order, one PT_NOTE after the headers, one
 * PT_LOAD per RAM region at its guest-physical address and a page-aligned
 * offset, notes padded to 4 bytes. No KVM. */
#include "tests/unit/check.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/elfcore.h"
#include "vmm/base/guest_mem.h"
#include "vmm/mvm.h"
#include "arch/arch.h"

#include <elf.h>
#include <string.h>

static uint64_t get(const uint8_t *p, unsigned n, bool be)
{
	uint64_t v = 0;
	unsigned i;

	for (i = 0; i < n; i++)
		v |= (uint64_t)p[be ? n - 1 - i : i] << (8 * i);
	return v;
}

static void check_core(bool be)
{
	struct elfcore_seg segs[2] = {
		{ .paddr = 0, .size = 3u << 30 },               /* below the PCI hole */
		{ .paddr = 4ull << 30, .size = 1u << 30 },
	};
	uint8_t buf[ELFCORE_EHDR_SIZE + 3 * ELFCORE_PHDR_SIZE], *ph;
	uint64_t notes_off, total;
	unsigned i;

	total = elfcore_layout(segs, 2, 1000, &notes_off);
	CHECK_EQ(notes_off, ELFCORE_EHDR_SIZE + 3 * ELFCORE_PHDR_SIZE);
	CHECK_EQ(segs[0].offset, 4096);                 /* 232 + 1000, rounded up */
	CHECK_EQ(segs[1].offset, 4096 + (3ull << 30));
	CHECK_EQ(total, segs[1].offset + (1ull << 30));
	elfcore_headers(buf, be ? EM_S390 : EM_X86_64, be, segs, 2, notes_off, 1000);
	CHECK(!memcmp(buf, ELFMAG, SELFMAG));
	CHECK_EQ(buf[EI_CLASS], ELFCLASS64);
	CHECK_EQ(buf[EI_DATA], be ? ELFDATA2MSB : ELFDATA2LSB);
	CHECK_EQ(buf[EI_VERSION], EV_CURRENT);
	CHECK_EQ(get(buf + 16, 2, be), ET_CORE);
	CHECK_EQ(get(buf + 18, 2, be), be ? EM_S390 : EM_X86_64);
	CHECK_EQ(get(buf + 20, 4, be), EV_CURRENT);
	CHECK_EQ(get(buf + 32, 8, be), ELFCORE_EHDR_SIZE);      /* e_phoff */
	CHECK_EQ(get(buf + 40, 8, be), 0);                      /* no sections */
	CHECK_EQ(get(buf + 52, 2, be), ELFCORE_EHDR_SIZE);
	CHECK_EQ(get(buf + 54, 2, be), ELFCORE_PHDR_SIZE);
	CHECK_EQ(get(buf + 56, 2, be), 3);
	ph = buf + ELFCORE_EHDR_SIZE;
	CHECK_EQ(get(ph, 4, be), PT_NOTE);
	CHECK_EQ(get(ph + 8, 8, be), notes_off);
	CHECK_EQ(get(ph + 32, 8, be), 1000);
	for (i = 0; i < 2; i++) {
		const uint8_t *p = ph + (i + 1) * ELFCORE_PHDR_SIZE;

		CHECK_EQ(get(p, 4, be), PT_LOAD);
		CHECK_EQ(get(p + 4, 4, be), PF_R | PF_W | PF_X);
		CHECK_EQ(get(p + 8, 8, be), segs[i].offset);
		CHECK_EQ(get(p + 16, 8, be), 0);                /* p_vaddr */
		CHECK_EQ(get(p + 24, 8, be), segs[i].paddr);
		CHECK_EQ(get(p + 32, 8, be), segs[i].size);     /* p_filesz */
		CHECK_EQ(get(p + 40, 8, be), segs[i].size);     /* p_memsz */
	}
}

TEST(a_little_endian_core_has_its_notes_and_one_load_per_ram_region)
{
	check_core(false);
}

TEST(a_big_endian_core_is_big_endian_throughout)
{
	check_core(true);
}

TEST(a_note_is_its_sizes_type_and_padded_name_and_desc)
{
	uint8_t buf[64], desc[5] = { 1, 2, 3, 4, 5 };
	size_t n;

	memset(buf, 0xee, sizeof(buf));
	n = elfcore_note(buf, sizeof(buf), false, "CORE", NT_PRSTATUS, desc, sizeof(desc));
	CHECK_EQ(n, 12 + 8 + 8);
	CHECK_EQ(le32_load(buf), 5);            /* namesz counts the NUL */
	CHECK_EQ(le32_load(buf + 4), 5);        /* descsz: unpadded */
	CHECK_EQ(le32_load(buf + 8), NT_PRSTATUS);
	CHECK(!memcmp(buf + 12, "CORE\0\0\0\0", 8));
	CHECK(!memcmp(buf + 20, desc, 5));
	CHECK(!memcmp(buf + 25, "\0\0\0", 3));
	CHECK_EQ(buf[28], 0xee);                /* nothing past it */
	n = elfcore_note(buf, sizeof(buf), true, "QEMU", 0, desc, 4);
	CHECK_EQ(be32_load(buf), 5);
	CHECK_EQ(be32_load(buf + 4), 4);
	/* One that does not fit writes nothing. */
	CHECK_EQ(elfcore_note(buf, 27, false, "CORE", NT_PRSTATUS, desc, sizeof(desc)), 0);
}

/* mvm_coredump_size_max bounds the file whatever the regions' layout
 * (the jail's RLIMIT_FSIZE is set from it): up to GMEM_MAX_REGIONS
 * regions of RAM, every vCPU's notes at their largest. */
TEST(the_largest_core_bounds_every_layout_of_its_ram)
{
	struct elfcore_seg segs[GMEM_MAX_REGIONS];
	uint64_t mem = (3ull << 30) + (1ull << 30), off;
	unsigned n, i, cpus = 8;

	for (n = 1; n <= GMEM_MAX_REGIONS; n++) {
		for (i = 0; i < n; i++)
			segs[i] = (struct elfcore_seg){ .paddr = (uint64_t)i << 32, .size = mem / n };
		CHECK(elfcore_layout(segs, n, cpus * ARCH_COREDUMP_NOTES_MAX, &off) <=
		      mvm_coredump_size_max(cpus, mem));
	}
	CHECK(mvm_coredump_size_max(cpus, mem) > mem);
	CHECK(mvm_coredump_size_max(cpus + 1, mem) > mvm_coredump_size_max(cpus, mem));
}
