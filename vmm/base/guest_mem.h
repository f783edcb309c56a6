/* Guest physical memory. Every access to guest RAM from mvm (loader, device
 * models, tests) goes through gmem_ptr(): one bounds- and overflow-checked
 * translation from a guest physical range to a host pointer. A range is
 * valid only when it lies wholly inside one RAM region; ranges that cross a
 * region end, wrap around 2^64, have length 0, or touch the MMIO hole get
 * NULL. Regions are fixed before vCPUs start, so lookups need no lock. */
#ifndef MVM_GUEST_MEM_H
#define MVM_GUEST_MEM_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#define GMEM_MAX_REGIONS 4

struct gmem_region {
	uint64_t gpa;
	uint64_t size;
	uint8_t *hva;
};

struct guest_mem {
	struct gmem_region r[GMEM_MAX_REGIONS];
	unsigned nr;
	uint64_t total;     /* bytes of RAM over all regions */
	void *map_base;     /* single host mapping backing all regions (gmem_map) */
	size_t map_len;
};

/* Host pointer for [gpa, gpa+len), or NULL when that range is not wholly
 * inside one RAM region (len 0 also gives NULL). */
static inline void *gmem_ptr(const struct guest_mem *gm, uint64_t gpa, uint64_t len)
{
	unsigned i;

	if (len == 0 || gpa + len < gpa)
		return NULL;
	for (i = 0; i < gm->nr; i++) {
		const struct gmem_region *r = &gm->r[i];
		if (gpa >= r->gpa && gpa - r->gpa < r->size &&
		    len <= r->size - (gpa - r->gpa))
			return r->hva + (gpa - r->gpa);
	}
	return NULL;
}

/* Map `size` bytes of anonymous RAM laid out around the 32-bit MMIO hole
 * [hole_start, 4 GiB): RAM below the hole, the rest from 4 GiB up.
 * 0 or -errno. */
int gmem_map(struct guest_mem *gm, uint64_t size, uint64_t hole_start);
void gmem_unmap(struct guest_mem *gm);
/* Guest RAM (as gmem_map made it) backed by the file fd instead: byte k
 * of the host mapping is byte k of the file (RAM below the hole, then the
 * rest). Privately (shared false, a snapshot's memory): read as the guest
 * touches it, the guest's writes stay its own, and VMs mapping one file
 * share its unwritten pages in the page cache. Shared: the guest's RAM is
 * the file (mvm_config.mem_file), its writes go there. The file must hold
 * map_len bytes. Over a mapping KVM has: KVM drops what it mapped of the
 * old one (its MMU notifier) and maps the new as the guest touches it.
 * 0 or -errno. */
int gmem_map_file(struct guest_mem *gm, int fd, bool shared);

/* Add a region backed by caller-owned memory (used by unit tests to build a
 * fake guest). 0 or -ENOSPC / -EINVAL on overlap. */
int gmem_add_region(struct guest_mem *gm, uint64_t gpa, uint64_t size, void *hva);

#endif
