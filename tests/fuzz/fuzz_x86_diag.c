/* The x86 guest page-table walker mvm uses to describe a failing vCPU
 * (arch/x86/diag.c: x86_gva_to_gpa, x86_read_linear, x86_describe_stop)
 * under fuzzed control registers (CR0, CR3, CR4, EFER), code segment and
 * RIP, over fake guest RAM whose contents (the page tables) the input
 * gives as a list of 8-byte writes. x86 only.
 *
 * Guest RAM is one to three regions, each a heap block of exactly its
 * size (4 KiB to 64 KiB) at a fuzzed guest-physical address (low memory,
 * below 4 GiB, above it, near the 40-bit and 52-bit limits), so a read
 * past a region is an ASan report: the walker must reach guest RAM only
 * through gmem_ptr. Invariants: every walk ends (libFuzzer's timeout);
 * a translation agrees with a reference walk written here from the SDM
 * (vol. 3, 4.3 to 4.5) in another shape (a loop over levels); bytes read
 * at a linear address are the RAM bytes at its translation, page by page,
 * and stop at the first page that does not translate; the description is
 * one NUL-terminated line that fits its buffer. */
#include "tests/fuzz/fuzz.h"
#include "arch/x86/diag.h"

#define MAXREG 3
#define PTE_P   1ULL
#define PTE_PS  0x80ULL
#define ADDR_52 0x000ffffffffff000ULL

/* One table entry through the one bounds-checked helper; false when it is
 * outside RAM or not present. */
static bool ref_entry(const struct guest_mem *gm, uint64_t gpa, unsigned size, uint64_t *e)
{
	const uint8_t *p = gmem_ptr(gm, gpa, size);

	if (!p)
		return false;
	*e = size == 8 ? le64_load(p) : le32_load(p);
	return *e & PTE_P;
}

/* SDM 4.1.1: which paging mode, then a walk level by level. level_bits[i]
 * is the index width of level i (the last maps 4 KiB), large[i] whether
 * a PS entry there maps a page. */
static int ref_translate(const struct guest_mem *gm, const struct x86_mmu *m, uint64_t va,
			 uint64_t *gpa)
{
	bool lma = m->efer & X86_EFER_LMA;
	uint64_t table, e, mask;
	unsigned levels, shift, i, esize;
	bool large_ok[5] = { false };

	if (!(m->cr0 & X86_CR0_PG) || !(m->cr0 & X86_CR0_PE)) {
		*gpa = lma ? va : (uint32_t)va;
		return 0;
	}
	if (lma) {
		unsigned bits = (m->cr4 & X86_CR4_LA57) ? 57 : 48;
		uint64_t top = va >> (bits - 1);

		if (top != 0 && top != (UINT64_MAX >> (bits - 1)))
			return -EFAULT;     /* not canonical */
		levels = bits == 57 ? 5 : 4;
		table = m->cr3 & ADDR_52;
		esize = 8;
		mask = ADDR_52;
		large_ok[2] = large_ok[1] = true;   /* PDPTE (1 GiB), PDE (2 MiB) */
	} else if (m->cr4 & X86_CR4_PAE) {
		va = (uint32_t)va;
		if (!ref_entry(gm, (m->cr3 & 0xffffffe0) + 8 * (va >> 30), 8, &e))
			return -EFAULT;
		levels = 2;
		table = e & ADDR_52;
		esize = 8;
		mask = ADDR_52;
		large_ok[1] = true;
	} else {
		va = (uint32_t)va;
		levels = 2;
		table = m->cr3 & 0xfffff000;
		esize = 4;
		mask = 0xfffff000;
		large_ok[1] = m->cr4 & X86_CR4_PSE;
	}
	/* Level i (levels-1 down to 0) indexes bits [12 + w*i, 12 + w*(i+1)). */
	for (i = levels; i-- > 0;) {
		unsigned w = esize == 8 ? 9 : 10;

		shift = 12 + w * i;
		if (!ref_entry(gm, table + esize * ((va >> shift) & ((1u << w) - 1)), esize, &e))
			return -EFAULT;
		if (i == 0) {
			*gpa = (e & mask) | (va & 0xfff);
			return 0;
		}
		if (large_ok[i] && (e & PTE_PS)) {
			uint64_t size = 1ULL << shift, base;

			if (esize == 4)         /* PSE-36: bits 20:13 are 39:32 */
				base = (e & 0xffc00000) | (((e >> 13) & 0xff) << 32);
			else
				base = e & ADDR_52 & ~(size - 1);
			*gpa = base | (va & (size - 1));
			return 0;
		}
		table = e & mask;
	}
	return -EFAULT;
}

static void check_read(const struct guest_mem *gm, const struct x86_mmu *m, uint64_t gva,
		       size_t len)
{
	uint8_t buf[3 * 4096];
	size_t n = x86_read_linear(gm, m, gva, buf, len), done = 0;

	FZ_ASSERT(n <= len);
	/* Page by page, as the CPU would fetch: what translates and lies in
	 * RAM is read, the first page that does not ends it. */
	while (done < len) {
		uint64_t va = gva + done, gpa;
		size_t chunk = len - done < 4096 - (va & 0xfff) ? len - done : 4096 - (va & 0xfff);
		const uint8_t *p;

		if (ref_translate(gm, m, va, &gpa) || !(p = gmem_ptr(gm, gpa, chunk)))
			break;
		FZ_ASSERT(n >= done + chunk);
		FZ_ASSERT(!memcmp(buf + done, p, chunk));
		done += chunk;
	}
	FZ_ASSERT(n == done);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t bases[] = {
		0, 0x1000, 0x100000, 0x7fff0000, 0xfffff000, 0x100000000ULL,
		0xfffffff000ULL, 0xffffffffff000ULL,
	};
	struct fz in = { data, size };
	struct guest_mem gm;
	uint8_t *reg[MAXREG] = { NULL };
	struct x86_mmu m;
	uint64_t rip, cs_base, gva, gpa, gpa_ref;
	unsigned nreg = 1 + fz_u8(&in) % MAXREG, i;
	uint8_t flags;
	char out[512];
	size_t outlen;
	int ret, ret_ref;

	memset(&gm, 0, sizeof(gm));
	for (i = 0; i < nreg; i++) {
		uint8_t how = fz_u8(&in);
		uint64_t rsize = 4096ULL * (1 + fz_u8(&in) % 16);
		uint64_t gpa0 = bases[how % ARRAY_SIZE(bases)] + 4096ULL * (fz_u8(&in) % 64);

		reg[i] = malloc(rsize);
		FZ_ASSERT(reg[i]);
		memset(reg[i], 0, rsize);
		if (gmem_add_region(&gm, gpa0, rsize, reg[i]))
			continue;               /* overlaps another: left out */
	}
	m.cr0 = fz_u32(&in);
	m.cr3 = fz_u64(&in);
	m.cr4 = fz_u32(&in);
	m.efer = fz_u32(&in);
	/* Bias towards the bits that choose the mode. */
	flags = fz_u8(&in);
	if (flags & 1)
		m.cr0 |= X86_CR0_PE | X86_CR0_PG;
	if (flags & 2)
		m.efer |= X86_EFER_LMA;
	if (flags & 4)
		m.cr4 |= X86_CR4_PAE;
	if (flags & 8)
		m.cr3 = gm.r[0].gpa + (m.cr3 & 0xfff);   /* tables in RAM */
	rip = fz_u64(&in);
	cs_base = fz_u64(&in);
	outlen = 1 + fz_u16(&in) % sizeof(out);
	/* The rest: RAM contents as 8-byte writes (region, offset / 4,
	 * value), the table entries and code bytes of a few pages. */
	while (fz_left(&in)) {
		const struct gmem_region *r = &gm.r[fz_u8(&in) % gm.nr];
		uint64_t off = (fz_u16(&in) * 4ULL) % r->size;
		uint8_t v[8];

		fz_bytes(&in, v, sizeof(v));
		memcpy(r->hva + off, v, r->size - off < 8 ? r->size - off : 8);
	}

	/* Translations at RIP, at addresses inside RAM and around the top. */
	for (i = 0; i < 8; i++) {
		switch (i) {
		case 0: gva = rip; break;
		case 1: gva = cs_base + rip; break;
		case 2: gva = gm.r[0].gpa + (rip & 0xffff); break;
		case 3: gva = ~0ULL - (rip & 0xffff); break;
		case 4: gva = rip ^ cs_base; break;
		case 5: gva = (uint32_t)rip; break;
		case 6: gva = 0xffffffff80000000ULL | (rip & 0x7fffffff); break;
		default: gva = 0xff00000000000000ULL | (rip & 0xffffffffffffULL); break;
		}
		gpa = gpa_ref = 0;
		ret = x86_gva_to_gpa(&gm, &m, gva, &gpa);
		ret_ref = ref_translate(&gm, &m, gva, &gpa_ref);
		FZ_ASSERT(ret == 0 || ret == -EFAULT);
		FZ_ASSERT(ret == ret_ref);
		if (!ret)
			FZ_ASSERT(gpa == gpa_ref);
		check_read(&gm, &m, gva, 1 + (size_t)(rip % sizeof(uint8_t[3 * 4096])));
	}

	memset(out, 'x', sizeof(out));
	x86_describe_stop(&gm, &m, rip, cs_base, flags & 0x10, flags & 0x20, out, outlen);
	FZ_ASSERT(memchr(out, 0, outlen));
	FZ_ASSERT(!strchr(out, '\n'));
	for (i = (unsigned)outlen; i < sizeof(out); i++)
		FZ_ASSERT(out[i] == 'x');
	for (i = 0; i < MAXREG; i++)
		free(reg[i]);
	return 0;
}

/* --- seeds: each paging mode with a mapped RIP --- */

/* One region of 16 pages at 0x100000 (bases[2]), then the registers. */
static void head(struct fz_buf *s, uint64_t cr0, uint64_t cr3, uint64_t cr4, uint64_t efer,
		 uint8_t flags, uint64_t rip)
{
	s->n = 0;
	fzb_u8(s, 0);                   /* one region */
	fzb_u8(s, 2); fzb_u8(s, 15); fzb_u8(s, 0);
	fzb_u32(s, (uint32_t)cr0);
	fzb_u64(s, cr3);
	fzb_u32(s, (uint32_t)cr4);
	fzb_u32(s, (uint32_t)efer);
	fzb_u8(s, flags);
	fzb_u64(s, rip);
	fzb_u64(s, 0);                  /* cs_base */
	fzb_u16(s, 300);
}

/* 8 bytes at region offset off (4-byte aligned). */
static void put(struct fz_buf *s, uint64_t off, uint64_t v)
{
	fzb_u8(s, 0);
	fzb_u16(s, (uint16_t)(off / 4));
	fzb_u64(s, v);
}

static void fuzz_seeds(void)
{
	struct fz_buf s;
	const uint64_t R = 0x100000, P = 1, W = 2, PS = 0x80;
	uint64_t va = 0xffffffff81000000ULL;

	/* 4-level: PML4 at +0, PDPT +0x1000, PD +0x2000, PT +0x3000, code +0x4000 */
	head(&s, X86_CR0_PE | X86_CR0_PG, R, X86_CR4_PAE, X86_EFER_LMA, 0x10, va + 0x10);
	put(&s, 8 * ((va >> 39) & 511), (R + 0x1000) | P | W);
	put(&s, 0x1000 + 8 * ((va >> 30) & 511), (R + 0x2000) | P | W);
	put(&s, 0x2000 + 8 * ((va >> 21) & 511), (R + 0x3000) | P | W);
	put(&s, 0x3000 + 8 * ((va >> 12) & 511), (R + 0x4000) | P | W);
	put(&s, 0x4010, 0xfeebf4d1010fULL);    /* 0f 01 d1, hlt, jmp . */
	fuzz_seed("long_4level", s.b, s.n);

	/* 4-level, RIP 6 bytes before the end of a mapped page whose next
	 * page is not mapped; a 2 MiB page for the next 2 MiB. */
	head(&s, X86_CR0_PE | X86_CR0_PG, R, X86_CR4_PAE, X86_EFER_LMA, 0x10, 0xffa);
	put(&s, 0, (R + 0x1000) | P | W);
	put(&s, 0x1000, (R + 0x2000) | P | W);
	put(&s, 0x2000, (R + 0x3000) | P | W);
	put(&s, 0x2008, 0 | P | W | PS);
	put(&s, 0x3000, (R + 0x4000) | P | W);
	put(&s, 0x4ff8, 0x9090909090909090ULL);
	fuzz_seed("long_page_end", s.b, s.n);

	/* 5-level: one more table at the top. */
	head(&s, X86_CR0_PE | X86_CR0_PG, R, X86_CR4_PAE | X86_CR4_LA57, X86_EFER_LMA, 0x10,
	     0x1000);
	put(&s, 0, (R + 0x1000) | P);
	put(&s, 0x1000, (R + 0x2000) | P);
	put(&s, 0x2000, (R + 0x3000) | P);
	put(&s, 0x3000, (R + 0x4000) | P);
	put(&s, 0x4000 + 8, (R + 0x5000) | P);
	fuzz_seed("long_5level", s.b, s.n);

	/* PAE: PDPTEs at +0x20 (CR3 bits 31:5), a PD, a PT. */
	head(&s, X86_CR0_PE | X86_CR0_PG, R + 0x20, X86_CR4_PAE, 0, 0x20, 0xc0201234);
	put(&s, 0x20 + 8 * 3, (R + 0x1000) | P);
	put(&s, 0x1000 + 8 * 1, (R + 0x2000) | P);
	put(&s, 0x2000 + 8 * 1, (R + 0x3000) | P);
	fuzz_seed("pae", s.b, s.n);

	/* 32-bit paging with a 4 MiB PSE page and a 4 KiB one. */
	head(&s, X86_CR0_PE | X86_CR0_PG, R, X86_CR4_PSE, 0, 0x20, 0x00401000);
	put(&s, 0, (uint32_t)(0 | P | PS) | (uint64_t)((R + 0x1000) | P) << 32);
	put(&s, 0x1000 + 4, (R + 0x2000) | P);
	fuzz_seed("two_level_pse", s.b, s.n);

	/* Real mode: CS base + IP, below RAM. */
	head(&s, 0, 0, 0, 0, 0, 0xfff0);
	fuzz_seed("real_mode_unmapped", s.b, s.n);
}
