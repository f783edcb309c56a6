/* Fake guest RAM with guard pages, for fuzz targets whose code under test
 * computes host pointers into guest memory itself (the s390 channel
 * subsystem's data areas and IDAWs, the SCLP's SCCBs): one mmap'd block,
 * made once per process, with an inaccessible page on either side, so an
 * access a byte outside RAM faults at once (ASan does not watch mmap'd
 * memory, a guard page does). Each input starts from zeroed RAM. */
#ifndef MVM_TESTS_FUZZ_RAM_H
#define MVM_TESTS_FUZZ_RAM_H

#include <sys/mman.h>

#include "tests/fuzz/fuzz.h"
#include "vmm/base/guest_mem.h"

#define FZ_PAGE 4096ULL

struct fz_ram {
	struct guest_mem mem;           /* one region: [gpa, gpa + size) */
	uint8_t *host;
	uint64_t gpa, size;
};

/* size: a multiple of FZ_PAGE; the same for every call of a process. */
static void fz_ram_get(struct fz_ram *r, uint64_t gpa, uint64_t size)
{
	static uint8_t *block;
	static uint64_t block_size;

	if (!block) {
		uint8_t *m = mmap(NULL, size + 2 * FZ_PAGE, PROT_NONE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		FZ_ASSERT(m != MAP_FAILED);
		FZ_ASSERT(mprotect(m + FZ_PAGE, size, PROT_READ | PROT_WRITE) == 0);
		block = m + FZ_PAGE;
		block_size = size;
	}
	FZ_ASSERT(size == block_size);
	memset(block, 0, size);
	memset(r, 0, sizeof(*r));
	r->host = block;
	r->gpa = gpa;
	r->size = size;
	FZ_ASSERT(gmem_add_region(&r->mem, gpa, size, block) == 0);
}

/* Is [p, p + len) host memory inside the fake RAM? */
static bool fz_ram_holds(const struct fz_ram *r, const void *p, uint64_t len)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)r->host;

	return a >= b && len <= r->size && a - b <= r->size - len;
}

/* Raw bytes into RAM at a fuzzed place. */
static void fz_ram_poke(struct fz_ram *r, struct fz *f)
{
	uint64_t off = fz_u32(f) % r->size;
	uint8_t len = fz_u8(f) % 64;

	for (uint8_t i = 0; i < len; i++)
		r->host[(off + i) % r->size] = fz_u8(f);
}

#endif
