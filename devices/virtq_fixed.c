/* Guest RAM as io_uring fixed buffers: the layout vqw_register_mem
 * registers and the lookup for one I/O (see VQW_FIXED_CHUNK in
 * virtq_worker.h). Pure logic on guest memory's regions, in a file of its
 * own so that the fuzz targets, which replace the worker, use this code. */
#include "devices/virtq_worker.h"

#include <errno.h>

int vqw_fixed_layout(const struct guest_mem *gm, struct iovec *out, unsigned max)
{
	unsigned n = 0, i;

	for (i = 0; i < gm->nr; i++) {
		uint64_t off;

		for (off = 0; off < gm->r[i].size; off += VQW_FIXED_CHUNK) {
			uint64_t left = gm->r[i].size - off;

			if (n == max)
				return -E2BIG;
			out[n].iov_base = gm->r[i].hva + off;
			out[n].iov_len = (size_t)(left < VQW_FIXED_CHUNK ? left : VQW_FIXED_CHUNK);
			n++;
		}
	}
	return (int)n;
}

int vqw_fixed_find(const struct guest_mem *gm, const void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p;
	uint64_t first = 0;
	unsigned i;

	for (i = 0; i < gm->nr; i++) {
		const struct gmem_region *r = &gm->r[i];
		uint64_t off = a - (uintptr_t)r->hva, end;

		if (a >= (uintptr_t)r->hva && off < r->size) {
			end = (off / VQW_FIXED_CHUNK + 1) * VQW_FIXED_CHUNK;
			if (end > r->size)
				end = r->size;
			/* All of it inside this chunk (no overflow: off < end). */
			return len <= end - off ? (int)(first + off / VQW_FIXED_CHUNK) : -1;
		}
		first += (r->size + VQW_FIXED_CHUNK - 1) / VQW_FIXED_CHUNK;
	}
	return -1;
}
