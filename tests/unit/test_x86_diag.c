/* The fatal-exit diagnosis (arch/x86/diag.c): linear-to-physical walks in
 * every paging mode over a fake guest memory, instruction bytes read
 * across pages, and addresses (or tables) outside guest RAM. No KVM. */
#include "tests/unit/check.h"
#include "arch/x86/diag.h"
#include "arch/x86/probe.h"
#include "arch/x86/x86.h"
#include "arch/x86/layout.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

#include <errno.h>

#define RAM_SIZE (8 * MiB)
#define P 1ULL       /* present */
#define W 2ULL       /* writable */
#define PS 0x80ULL   /* large page */

static uint8_t *ram;

static struct guest_mem guest(void)
{
	struct guest_mem gm;

	ram = calloc(1, RAM_SIZE);
	CHECK(ram);
	memset(&gm, 0, sizeof(gm));
	CHECK_EQ(gmem_add_region(&gm, 0, RAM_SIZE, ram), 0);
	return gm;
}

static void put64(uint64_t gpa, uint64_t v) { le64_store(ram + gpa, v); }
static void put32(uint64_t gpa, uint32_t v) { le32_store(ram + gpa, v); }

static const struct x86_mmu long4 = {
	.cr0 = X86_CR0_PE | X86_CR0_PG, .cr3 = 0x1000, .cr4 = X86_CR4_PAE,
	.efer = X86_EFER_LMA,
};

/* A 4-level map of 0xffffffff81000000 (kernel text) -> 0x200000 in 4 KiB
 * pages, tables at 0x1000 (PML4), 0x2000, 0x3000, 0x4000 (PT). */
static void map_kernel_4k(void)
{
	uint64_t va = 0xffffffff81000000ULL;

	put64(0x1000 + 8 * ((va >> 39) & 511), 0x2000 | P | W);
	put64(0x2000 + 8 * ((va >> 30) & 511), 0x3000 | P | W);
	put64(0x3000 + 8 * ((va >> 21) & 511), 0x4000 | P | W);
	put64(0x4000 + 8 * ((va >> 12) & 511), 0x200000 | P | W);
}

TEST(paging_off_is_identity)
{
	struct guest_mem gm = guest();
	struct x86_mmu m = { .cr0 = X86_CR0_PE };
	uint64_t gpa;

	CHECK_EQ(x86_gva_to_gpa(&gm, &m, 0x123456, &gpa), 0);
	CHECK_EQ(gpa, 0x123456);
	/* Outside long mode a linear address has 32 bits. */
	CHECK_EQ(x86_gva_to_gpa(&gm, &m, 0x100000010ULL, &gpa), 0);
	CHECK_EQ(gpa, 0x10);
}

TEST(four_level_4k_page)
{
	struct guest_mem gm = guest();
	uint64_t gpa;

	map_kernel_4k();
	CHECK_EQ(x86_gva_to_gpa(&gm, &long4, 0xffffffff81000abcULL, &gpa), 0);
	CHECK_EQ(gpa, 0x200abc);
	/* The next page is not mapped. */
	CHECK_EQ(x86_gva_to_gpa(&gm, &long4, 0xffffffff81001000ULL, &gpa), -EFAULT);
}

TEST(four_level_2m_and_1g_pages)
{
	struct guest_mem gm = guest();
	uint64_t gpa;

	put64(0x1000, 0x2000 | P);                    /* PML4[0] */
	put64(0x2000, 0x3000 | P);                    /* PDPT[0] -> PD */
	put64(0x3000 + 8 * 1, 0x400000 | P | PS);     /* 2 MiB page at va 2M -> 4M */
	put64(0x2000 + 8 * 1, 0x40000000 | P | PS);   /* 1 GiB page at va 1G -> 1G */
	CHECK_EQ(x86_gva_to_gpa(&gm, &long4, 0x212345, &gpa), 0);
	CHECK_EQ(gpa, 0x412345);
	CHECK_EQ(x86_gva_to_gpa(&gm, &long4, 0x40000000ULL + 0x123, &gpa), 0);
	CHECK_EQ(gpa, 0x40000123);
	/* The PAT bit (12) of a large-page entry is not an address bit. */
	put64(0x3000 + 8 * 2, 0x600000 | (1ULL << 12) | P | PS);
	CHECK_EQ(x86_gva_to_gpa(&gm, &long4, 0x400010, &gpa), 0);
	CHECK_EQ(gpa, 0x600010);
}

TEST(five_level_paging)
{
	struct guest_mem gm = guest();
	struct x86_mmu m = long4;
	uint64_t va = 0x0080000000001000ULL, gpa;   /* bit 55: canonical with 5 levels only */

	m.cr4 |= X86_CR4_LA57;
	put64(0x1000 + 8 * ((va >> 48) & 511), 0x2000 | P);
	put64(0x2000 + 8 * ((va >> 39) & 511), 0x3000 | P);
	put64(0x3000 + 8 * ((va >> 30) & 511), 0x4000 | P);
	put64(0x4000 + 8 * ((va >> 21) & 511), 0x5000 | P);
	put64(0x5000 + 8 * ((va >> 12) & 511), 0x7000 | P);
	CHECK_EQ(x86_gva_to_gpa(&gm, &m, va + 5, &gpa), 0);
	CHECK_EQ(gpa, 0x7005);
	/* The same address is not canonical with 4-level paging. */
	CHECK_EQ(x86_gva_to_gpa(&gm, &long4, va, &gpa), -EFAULT);
}

TEST(non_canonical_address)
{
	struct guest_mem gm = guest();
	uint64_t gpa;

	map_kernel_4k();
	CHECK_EQ(x86_gva_to_gpa(&gm, &long4, 0x0000800000000000ULL, &gpa), -EFAULT);
	CHECK_EQ(x86_gva_to_gpa(&gm, &long4, 0x7fff81000000abcULL, &gpa), -EFAULT);
}

TEST(pae_paging)
{
	struct guest_mem gm = guest();
	struct x86_mmu m = { .cr0 = X86_CR0_PE | X86_CR0_PG, .cr3 = 0x1020,
			     .cr4 = X86_CR4_PAE };
	uint64_t gpa;

	/* CR3 bits 31:5: four PDPTEs at 0x1020; va 0xc0201234 uses PDPTE 3. */
	put64(0x1020 + 8 * 3, 0x2000 | P);
	put64(0x2000 + 8 * 1, 0x3000 | P);           /* PD[1]: va bits 29:21 = 1 */
	put64(0x3000 + 8 * 1, 0x9000 | P);           /* PT[1] */
	CHECK_EQ(x86_gva_to_gpa(&gm, &m, 0xc0201234, &gpa), 0);
	CHECK_EQ(gpa, 0x9234);
	put64(0x2000 + 8 * 2, 0x600000 | P | PS);    /* 2 MiB page */
	CHECK_EQ(x86_gva_to_gpa(&gm, &m, 0xc0412345, &gpa), 0);
	CHECK_EQ(gpa, 0x612345);
}

TEST(two_level_paging_with_pse)
{
	struct guest_mem gm = guest();
	struct x86_mmu m = { .cr0 = X86_CR0_PE | X86_CR0_PG, .cr3 = 0x1000 };
	uint64_t gpa;

	put32(0x1000 + 4 * (0xc0001234 >> 22), 0x2000 | P);
	put32(0x2000 + 4 * 1, 0x5000 | P);
	CHECK_EQ(x86_gva_to_gpa(&gm, &m, 0xc0001234, &gpa), 0);
	CHECK_EQ(gpa, 0x5234);
	/* A 4 MiB page counts only with CR4.PSE; PSE-36 adds bits 39:32. */
	put32(0x1000 + 4 * 1, 0x400000 | (1u << 13) | P | PS);
	CHECK_EQ(x86_gva_to_gpa(&gm, &m, 0x400010, &gpa), -EFAULT);   /* no PT there */
	m.cr4 = X86_CR4_PSE;
	CHECK_EQ(x86_gva_to_gpa(&gm, &m, 0x400010, &gpa), 0);
	CHECK_EQ(gpa, 0x100400010ULL);
}

TEST(tables_outside_ram_are_not_followed)
{
	struct guest_mem gm = guest();
	struct x86_mmu m = long4;
	uint64_t gpa;

	/* CR3 beyond RAM, then a PML4 entry pointing beyond RAM. */
	m.cr3 = 0x7ffff000000ULL;
	CHECK_EQ(x86_gva_to_gpa(&gm, &m, 0x1000, &gpa), -EFAULT);
	put64(0x1000, 0xfff00000000ULL | P);
	CHECK_EQ(x86_gva_to_gpa(&gm, &long4, 0x1000, &gpa), -EFAULT);
	/* An all-ones entry: still only an address that is not RAM. */
	put64(0x1000, ~0ULL);
	CHECK_EQ(x86_gva_to_gpa(&gm, &long4, 0x1000, &gpa), -EFAULT);
}

TEST(read_stops_at_an_unmapped_page)
{
	struct guest_mem gm = guest();
	uint8_t buf[X86_INSN_MAX];
	unsigned i;

	map_kernel_4k();
	for (i = 0; i < 16; i++)
		ram[0x200ff8 + i] = 0xa0 + i;
	/* 8 bytes to the end of the mapped page, then nothing. */
	CHECK_EQ(x86_read_linear(&gm, &long4, 0xffffffff81000ff8ULL, buf, sizeof(buf)), 8);
	CHECK_EQ(buf[0], 0xa0);
	CHECK_EQ(buf[7], 0xa7);
	CHECK_EQ(x86_read_linear(&gm, &long4, 0xffffffff81001000ULL, buf, sizeof(buf)), 0);
}

TEST(read_crosses_into_the_next_page)
{
	struct guest_mem gm = guest();
	struct x86_mmu m = { .cr0 = X86_CR0_PE };
	uint8_t buf[X86_INSN_MAX];

	ram[0x1ffe] = 0x0f;
	ram[0x1fff] = 0x01;
	ram[0x2000] = 0xd9;
	CHECK_EQ(x86_read_linear(&gm, &m, 0x1ffe, buf, 3), 3);
	CHECK(!memcmp(buf, "\x0f\x01\xd9", 3));
	/* Paging off, physical address past the end of RAM. */
	CHECK_EQ(x86_read_linear(&gm, &m, RAM_SIZE - 4, buf, sizeof(buf)), 4);
	CHECK_EQ(x86_read_linear(&gm, &m, RAM_SIZE, buf, sizeof(buf)), 0);
}

TEST(describe_long_mode)
{
	struct guest_mem gm = guest();
	char out[256];

	map_kernel_4k();
	memcpy(ram + 0x200100, "\xc4\xe2\x79\xf7\xc0", 5);   /* shlx */
	x86_describe_stop(&gm, &long4, 0xffffffff81000100ULL, 0, true, false, out, sizeof(out));
	CHECK(strstr(out, "RIP 0xffffffff81000100 (64-bit long mode, 4-level paging)"));
	CHECK(strstr(out, "bytes at RIP: c4 e2 79 f7 c0 00 00 00 00 00 00 00 00 00 00"));
	CHECK(!strstr(out, "unmapped"));
}

TEST(describe_unreadable_rip)
{
	struct guest_mem gm = guest();
	char out[256];

	x86_describe_stop(&gm, &long4, 0xffffffff81000100ULL, 0, true, false, out, sizeof(out));
	CHECK(strstr(out, "bytes at RIP: unreadable (linear 0xffffffff81000100 is not mapped "
		      "to guest RAM)"));
}

TEST(describe_real_and_protected_mode)
{
	struct guest_mem gm = guest();
	struct x86_mmu real = { 0 }, prot = { .cr0 = X86_CR0_PE };
	char out[256];

	/* Real mode: linear = CS base + IP (16 bits). */
	ram[0xf0010] = 0x90;
	x86_describe_stop(&gm, &real, 0x10010, 0xf0000, false, false, out, sizeof(out));
	CHECK(strstr(out, "RIP 0x10010 (real mode), bytes at RIP: 90"));
	/* 32-bit code with paging off; the reset vector is outside RAM. */
	ram[0x100000] = 0xf4;
	x86_describe_stop(&gm, &prot, 0x100000, 0, false, true, out, sizeof(out));
	CHECK(strstr(out, "(32-bit protected mode, paging off), bytes at RIP: f4"));
	x86_describe_stop(&gm, &real, 0xfff0, 0xffff0000, false, false, out, sizeof(out));
	CHECK(strstr(out, "unreadable (linear 0xfffffff0"));
	/* The reset vector: where KVM on AMD leaves a CPU that triple-faulted. */
	CHECK(strstr(out, "the CPU was reset"));
	x86_describe_stop(&gm, &real, 0x10010, 0xf0000, false, false, out, sizeof(out));
	CHECK(!strstr(out, "reset"));
}

TEST(describe_with_bad_vcpu_fd)
{
	struct guest_mem gm = guest();
	char out[256];

	x86_describe_vcpu(-1, &gm, out, sizeof(out));
	CHECK(strstr(out, "registers unreadable"));
}

/* The probe payload lands where the entry points, with mvm's boot tables. */
TEST(probe_payload_loads)
{
	struct guest_mem gm = guest();
	struct x86_boot_info info;
	uint64_t gpa;

	CHECK_EQ(x86_probe_load(&gm, &info), 0);
	CHECK(!info.pvh);
	CHECK_EQ(info.entry, X86_PROBE_LOAD);
	/* First instruction: mov $1, %al (step 1). */
	CHECK_EQ(ram[X86_PROBE_LOAD], 0xb0);
	CHECK_EQ(ram[X86_PROBE_LOAD + 1], 1);
	/* The identity map covers the payload and its data. */
	CHECK_EQ(x86_gva_to_gpa(&gm, &long4, X86_PROBE_DATA + 8, &gpa), -EFAULT);
	{
		struct x86_mmu m = long4;
		m.cr3 = X86_PML4_ADDR;
		CHECK_EQ(x86_gva_to_gpa(&gm, &m, X86_PROBE_DATA + 8, &gpa), 0);
		CHECK_EQ(gpa, X86_PROBE_DATA + 8);
	}
	CHECK_STR(x86_probe_step_name(6), "BMI2 SHLX (VEX)");
	CHECK_STR(x86_probe_step_name(0), "?");
	CHECK_STR(x86_probe_step_name(99), "?");
	CHECK(x86_probe_hash() != 0);
}

TEST(probe_tested_features)
{
	struct guest_mem gm = guest();
	char out[96];

	x86_probe_tested(&gm, out, sizeof(out));
	CHECK_STR(out, "none of cx16 xsave bmi2 offered");
	put32(X86_PROBE_DATA + 4, (1u << 4) | (1u << 6));
	x86_probe_tested(&gm, out, sizeof(out));
	CHECK_STR(out, "cx16 bmi2");
}
