/* The thread-less null virtio device of the unit tests (tests/unit/
 * vnulldev.h) behind a fuzzed transport: shared by fuzz_virtio_mmio.c and
 * fuzz_virtio_pci.c. The harness is the queue owner: once the transport
 * started a queue, "serve" ops pop and push on it (virtq.c) and publish,
 * which raises the transport's interrupt.
 *
 * Invariants (besides ASan/UBSan), checked after every step:
 *  - a queue the transport left ready has rings wholly inside guest RAM
 *    (the pointers virtq_enable mapped are the ones its gpas map to);
 *  - queue_start / queue_stop alternate per queue, and a queue is stopped
 *    before its ring state is cleared (vnull's ready_at_stop). */
#ifndef MVM_TESTS_FUZZ_VNULL_H
#define MVM_TESTS_FUZZ_VNULL_H

#include "tests/fuzz/fuzz.h"
#include "tests/unit/vnulldev.h"

#define FV_RAM_GPA  VNULL_RAM_GPA
#define FV_RAM_SIZE 0x8000ULL      /* 32 KiB: room for a few small rings */

/* A null device with nq queues (QueueNumMax 256) offering `features`,
 * its fake RAM a malloc'd block of its own. */
static struct vnull *fv_new(unsigned nq, uint64_t features)
{
	struct vnull *v = calloc(1, sizeof(*v));

	FZ_ASSERT(v);
	v->features = features;
	/* Not vdrv_ram_init: its 2 MiB-aligned block would cost more than
	 * the rest of an input's run. */
	v->d.ram = calloc(1, FV_RAM_SIZE);
	FZ_ASSERT(v->d.ram);
	v->d.ram_gpa = v->d.brk = FV_RAM_GPA;
	v->d.ram_size = FV_RAM_SIZE;
	FZ_ASSERT(gmem_add_region(&v->d.mem, FV_RAM_GPA, FV_RAM_SIZE, v->d.ram) == 0);
	FZ_ASSERT(virtio_dev_init(&v->dev, &vnull_ops, v, &v->d.mem, nq, VNULL_QMAX) == 0);
	return v;
}

static void fv_free(struct vnull *v)
{
	free(v->d.ram);
	free(v);
}

/* Raw bytes into fake RAM (ring contents). */
static void fv_poke(struct vnull *v, struct fz *f)
{
	uint64_t off = fz_u16(f) % FV_RAM_SIZE;
	uint8_t len = fz_u8(f) % 32;

	for (uint8_t i = 0; i < len; i++)
		v->d.ram[(off + i) % FV_RAM_SIZE] = fz_u8(f);
}

/* The queue owner's turn on queue q (if started): pop up to n chains,
 * push them back, publish (the transport's interrupt when due). */
static void fv_serve(struct vnull *v, struct fz *f)
{
	unsigned q = fz_u8(f) % v->dev.num_queues, n = fz_u8(f) % 8;
	struct virtio_queue *vq = &v->dev.queues[q];
	static struct virtq_chain c;
	bool any = false;

	if (!vq->started)
		return;
	for (unsigned i = 0; i < n; i++) {
		int r = virtq_pop(&vq->vq, &c);

		if (r <= 0) {
			if (r < 0)
				virtio_dev_needs_reset(&v->dev);
			break;
		}
		virtq_push(&vq->vq, c.head, (uint32_t)c.total_len);
		any = true;
	}
	if (any && virtq_publish(&vq->vq))
		v->dev.tops->signal_queue(&v->dev, q);
}

static void fv_check(struct vnull *v, unsigned *stops)
{
	for (unsigned q = 0; q < v->dev.num_queues; q++) {
		const struct virtq *vq = &v->dev.queues[q].vq;

		if (vq->ready) {
			uint64_t n = vq->size;
			bool p = vq->packed;

			FZ_ASSERT(vq->desc == gmem_ptr(&v->d.mem, vq->desc_gpa,
						       p ? VIRTQ_PACKED_DESC_BYTES(n) : VIRTQ_DESC_BYTES(n)));
			FZ_ASSERT(vq->avail == gmem_ptr(&v->d.mem, vq->driver_gpa,
							p ? VIRTQ_PACKED_EVENT_BYTES : VIRTQ_AVAIL_BYTES(n)));
			FZ_ASSERT(vq->used == gmem_ptr(&v->d.mem, vq->device_gpa,
						       p ? VIRTQ_PACKED_EVENT_BYTES : VIRTQ_USED_BYTES(n)));
		}
		FZ_ASSERT(v->started[q] - v->stopped[q] <= 1);
		FZ_ASSERT(v->dev.queues[q].started == (v->started[q] != v->stopped[q]));
		if (v->stopped[q] != stops[q]) {
			FZ_ASSERT(v->ready_at_stop);
			stops[q] = v->stopped[q];
		}
	}
}

#endif
