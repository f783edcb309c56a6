#include "vmm/base/guest_mem.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define GMEM_4G (1ULL << 32)
/* Guest RAM starts on a 2 MiB boundary of the host mapping: a huge page
 * can back it from its first byte (x86), and s390 KVM requires memory
 * slots aligned to its 1 MiB segments. */
#define GMEM_HOST_ALIGN (2ULL << 20)

int gmem_add_region(struct guest_mem *gm, uint64_t gpa, uint64_t size, void *hva)
{
	unsigned i;

	if (size == 0 || gpa + size < gpa || !hva)
		return -EINVAL;
	if (gm->nr >= GMEM_MAX_REGIONS)
		return -ENOSPC;
	for (i = 0; i < gm->nr; i++) {
		const struct gmem_region *r = &gm->r[i];
		if (gpa < r->gpa + r->size && r->gpa < gpa + size)
			return -EINVAL;
	}
	gm->r[gm->nr].gpa = gpa;
	gm->r[gm->nr].size = size;
	gm->r[gm->nr].hva = hva;
	gm->nr++;
	gm->total += size;
	return 0;
}

int gmem_map(struct guest_mem *gm, uint64_t size, uint64_t hole_start)
{
	uint64_t low = size < hole_start ? size : hole_start;
	uint64_t high = size - low;
	void *base;
	int ret;

	if (size == 0 || hole_start == 0 || hole_start > GMEM_4G)
		return -EINVAL;
	memset(gm, 0, sizeof(*gm));
	if (size > UINT64_MAX - GMEM_HOST_ALIGN)
		return -EINVAL;
	base = mmap(NULL, size + GMEM_HOST_ALIGN, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		return -errno;
	/* Keep the aligned part only. */
	{
		uintptr_t b = (uintptr_t)base, a = (b + GMEM_HOST_ALIGN - 1) & ~(GMEM_HOST_ALIGN - 1);

		if (a > b)
			munmap(base, a - b);
		if (GMEM_HOST_ALIGN - (a - b))
			munmap((void *)(a + size), GMEM_HOST_ALIGN - (a - b));
		base = (void *)a;
	}
	/* THP for guest RAM: fewer EPT/NPT misses; failure is harmless. */
	madvise(base, size, MADV_HUGEPAGE);
	/* Guest RAM must not end up in host core dumps. */
	madvise(base, size, MADV_DONTDUMP);
	gm->map_base = base;
	gm->map_len = size;
	ret = gmem_add_region(gm, 0, low, base);
	if (ret)
		goto unmap;
	if (high) {
		ret = gmem_add_region(gm, GMEM_4G, high, (uint8_t *)base + low);
		if (ret)
			goto unmap;
	}
	return 0;
unmap:
	munmap(base, size);
	memset(gm, 0, sizeof(*gm));
	return ret;
}

int gmem_map_file(struct guest_mem *gm, int fd, bool shared)
{
	void *p;

	if (!gm->map_base)
		return -EINVAL;
	/* MAP_FIXED over our own mapping: the address stays, so the
	 * regions' host pointers do too. */
	p = mmap(gm->map_base, gm->map_len, PROT_READ | PROT_WRITE,
		 (shared ? MAP_SHARED : MAP_PRIVATE | MAP_NORESERVE) | MAP_FIXED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	madvise(p, gm->map_len, MADV_DONTDUMP);
	return 0;
}

void gmem_unmap(struct guest_mem *gm)
{
	if (gm->map_base)
		munmap(gm->map_base, gm->map_len);
	memset(gm, 0, sizeof(*gm));
}
