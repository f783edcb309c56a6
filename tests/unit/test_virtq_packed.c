/* Packed virtqueue (devices/virtq.c, virtio 1.2 §2.8): negotiation and
 * queue setup, popping chains, every malformed ring the guest can build
 * (wrap-counter abuse included), used descriptors with out-of-order
 * completion, and event suppression in both directions. The test is the
 * queue owner (calls virtq_* directly); the driver side is vdrv's Linux-style
 * packed driver, over the virtio-mmio register model. */
#include "tests/unit/check.h"
#include "tests/unit/vnulldev.h"

#include <errno.h>

#define R VNULL_RAM_GPA
#define RAM_END (VNULL_RAM_GPA + VNULL_RAM_SIZE)
#define PACKED VIRTIO_BIT(VIRTIO_F_RING_PACKED)
#define INDIRECT VIRTIO_BIT(VIRTIO_RING_F_INDIRECT_DESC)
#define EVENT_IDX VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX)
#define V1 VIRTIO_BIT(VIRTIO_F_VERSION_1)
#define AV (1u << VRING_PACKED_DESC_F_AVAIL)           /* available in lap 1 (wrap counter 1) */
#define USED_BITS ((1u << VRING_PACKED_DESC_F_AVAIL) | (1u << VRING_PACKED_DESC_F_USED))
#define F_NEXT VRING_DESC_F_NEXT
#define F_WRITE VRING_DESC_F_WRITE
#define F_IND VRING_DESC_F_INDIRECT

static struct virtq_chain chain;

static struct vnull *setup(uint16_t qsize, uint64_t features)
{
	struct vnull *v = vnull_running(1, qsize, features | PACKED);

	CHECK(v->dev.queues[0].vq.packed);
	return v;
}

static struct virtq *vq0(struct vnull *v)
{
	return &v->dev.queues[0].vq;
}

static uint64_t buf(struct vnull *v, uint32_t len)
{
	return vdrv_alloc(&v->d, len, 16);
}

/* Raw descriptor in lap 1 (the first pass over the ring). Chains: write the
 * later slots first, the head last (like a driver). */
static void raw(struct vnull *v, uint16_t slot, uint64_t addr, uint32_t len, uint16_t id,
		uint16_t flags)
{
	vdrv_pdesc_set(&v->d, 0, slot, addr, len, id, (uint16_t)(flags | AV));
}

/* Driver-side round trip of one 1-buffer request: add, device pops and
 * completes it, driver reaps it. */
static void round_trip(struct vnull *v, uint64_t a)
{
	struct vdrv_sg sg = { a, 16, true };
	uint32_t id, len;
	int h = vdrv_add(&v->d, 0, &sg, 1, false);

	CHECK(h >= 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(chain.head, h);
	virtq_push(vq0(v), chain.head, 7);
	virtq_publish(vq0(v));
	CHECK_EQ(vdrv_get_used(&v->d, 0, &id, &len), 1);
	CHECK_EQ(id, h);
}

/* ---- negotiation and setup ---- */

TEST(ring_packed_offered_and_used_when_driver_accepts)
{
	struct vnull *v = vnull_new(1, 0);

	CHECK(virtio_offered_features(&v->dev) & PACKED);
	CHECK_EQ(vdrv_negotiate(&v->d, V1 | PACKED), 0);
	CHECK(v->dev.guest_features & PACKED);
	CHECK_EQ(vdrv_queue_setup(&v->d, 0, 16), 1);
	CHECK(vq0(v)->packed);
	vnull_free(v);
}

TEST(split_ring_when_driver_declines_packed)
{
	struct vnull *v = vnull_running(1, 8, 0);

	CHECK(!vq0(v)->packed);
	round_trip(v, buf(v, 16));
	vnull_free(v);
}

TEST(no_packed_device_falls_back_to_split)
{
	struct vnull *v = vnull_new(1, 0);

	v->dev.no_packed = true;
	CHECK(!(virtio_offered_features(&v->dev) & PACKED));
	CHECK_EQ(vdrv_negotiate(&v->d, V1 | PACKED), 0);   /* want & offered */
	CHECK(!(v->dev.guest_features & PACKED));
	CHECK_EQ(vdrv_queue_setup(&v->d, 0, 8), 1);
	vdrv_driver_ok(&v->d);
	CHECK(!vq0(v)->packed);
	round_trip(v, buf(v, 16));
	vnull_free(v);
}

TEST(queue_size_need_not_be_power_of_2)
{
	struct vnull *v = setup(7, 0);

	CHECK_EQ(vq0(v)->size, 7);
	for (int i = 0; i < 21; i++)           /* wraps the 7-slot ring 3 times */
		round_trip(v, buf(v, 16));
	CHECK_EQ(vq0(v)->used_idx, 0);
	CHECK(!vq0(v)->used_wrap);              /* lap 4: wrap 1, 0, 1, now 0 */
	CHECK(!vq0(v)->avail_wrap);
	vnull_free(v);
}

static struct vnull *negotiated(void)
{
	struct vnull *v = vnull_new(1, 0);

	CHECK_EQ(vdrv_negotiate(&v->d, V1 | PACKED), 0);
	return v;
}

TEST(queue_size_0_or_above_max_rejected)
{
	struct vnull *v = negotiated();
	uint64_t dsc = vdrv_alloc(&v->d, 16 * 512, 16), ev = vdrv_alloc(&v->d, 8, 4);

	CHECK_EQ(vdrv_queue_program(&v->d, 0, 0, dsc, ev, ev + 4), 0);
	CHECK(vdrv_status(&v->d) & VIRTIO_CONFIG_S_NEEDS_RESET);
	vnull_free(v);
	v = negotiated();
	dsc = vdrv_alloc(&v->d, 16 * 512, 16);
	ev = vdrv_alloc(&v->d, 8, 4);
	CHECK_EQ(vdrv_queue_program(&v->d, 0, VNULL_QMAX + 1, dsc, ev, ev + 4), 0);
	vnull_free(v);
}

TEST(misaligned_areas_rejected)
{
	uint64_t d_off[] = { 8, 0, 0 }, drv_off[] = { 0, 2, 0 }, dev_off[] = { 0, 0, 2 };

	for (int i = 0; i < 3; i++) {
		struct vnull *v = negotiated();
		uint64_t dsc = vdrv_alloc(&v->d, 16 * 9, 16), ev = vdrv_alloc(&v->d, 16, 16);

		CHECK_EQ(vdrv_queue_program(&v->d, 0, 8, dsc + d_off[i], ev + drv_off[i],
					    ev + 8 + dev_off[i]), 0);
		vnull_free(v);
	}
	/* 4-aligned event structures and a 16-aligned ring are enough. */
	struct vnull *v = negotiated();
	uint64_t dsc = vdrv_alloc(&v->d, 16 * 8, 16), ev = vdrv_alloc(&v->d, 16, 16);

	CHECK_EQ(vdrv_queue_program(&v->d, 0, 8, dsc, ev + 4, ev + 12), 1);
	vnull_free(v);
}

TEST(areas_outside_ram_rejected)
{
	struct {
		uint64_t dsc, drv, dev;
	} c[] = {
		{ RAM_END - 16 * 4, R, R + 4 },         /* 8-slot ring crosses RAM end */
		{ R + 64, RAM_END, R + 4 },             /* driver event beyond RAM */
		{ R + 64, R, RAM_END },                 /* device event beyond RAM */
		{ 0, R, R + 4 },                        /* ring at 0: not RAM */
	};

	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct vnull *v = negotiated();

		CHECK_EQ(vdrv_queue_program(&v->d, 0, 8, c[i].dsc, c[i].drv, c[i].dev), 0);
		CHECK(vdrv_status(&v->d) & VIRTIO_CONFIG_S_NEEDS_RESET);
		vnull_free(v);
	}
}

/* ---- popping ---- */

TEST(pop_direct_chain_readable_then_writable)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 16), b = buf(v, 512), c = buf(v, 1);
	struct vdrv_sg sg[] = { { a, 16, false }, { b, 512, true }, { c, 1, true } };
	int id = vdrv_add(&v->d, 0, sg, 3, false);

	CHECK(id >= 0);
	CHECK(virtq_has_work(vq0(v)));
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(chain.head, id);
	CHECK_EQ(chain.n, 3);
	CHECK_EQ(chain.n_readable, 1);
	CHECK_EQ(chain.total_len, 529);
	CHECK(chain.iov[0].iov_base == vdrv_host(&v->d, a) && 0 < chain.n_readable);
	CHECK(chain.iov[1].iov_base == vdrv_host(&v->d, b) && 1 >= chain.n_readable);
	CHECK(chain.iov[2].iov_base == vdrv_host(&v->d, c));
	CHECK_EQ(vq0(v)->last_avail, 3);
	CHECK_EQ(vq0(v)->inflight_slots, 3);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 0);
	CHECK(!virtq_has_work(vq0(v)));
	vnull_free(v);
}

TEST(buffer_id_taken_from_last_descriptor)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 32);

	raw(v, 1, a + 16, 16, 5, F_WRITE);
	raw(v, 0, a, 16, 0, F_NEXT);            /* head's id is not the buffer id */
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(chain.head, 5);
	vnull_free(v);
}

TEST(pop_indirect_chain)
{
	struct vnull *v = setup(8, INDIRECT);
	uint64_t a = buf(v, 16), b = buf(v, 4096);
	struct vdrv_sg sg[] = { { a, 16, false }, { b, 4096, true } };
	int id = vdrv_add(&v->d, 0, sg, 2, true);

	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(chain.head, id);
	CHECK_EQ(chain.n, 2);
	CHECK_EQ(chain.n_readable, 1);
	CHECK(chain.iov[1].iov_base == vdrv_host(&v->d, b) && 1 >= chain.n_readable);
	CHECK_EQ(vq0(v)->last_avail, 1);        /* one ring slot */
	vnull_free(v);
}

TEST(chain_wraps_across_ring_end)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 64);
	struct vdrv_sg sg[3] = { { a, 16, false }, { a + 16, 16, true }, { a + 32, 16, true } };
	uint32_t id, len;

	for (int i = 0; i < 6; i++)
		round_trip(v, a);
	int h = vdrv_add(&v->d, 0, sg, 3, false);  /* slots 6, 7, 0 (lap 2) */
	CHECK(h >= 0);
	CHECK(v->d.q[0].avail_wrap == false);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(chain.head, h);
	CHECK_EQ(chain.n, 3);
	CHECK(chain.iov[2].iov_base == vdrv_host(&v->d, a + 32));
	CHECK_EQ(vq0(v)->last_avail, 1);
	CHECK(!vq0(v)->avail_wrap);
	virtq_push(vq0(v), chain.head, 33);
	CHECK(virtq_publish(vq0(v)));
	CHECK_EQ(vdrv_get_used(&v->d, 0, &id, &len), 1);
	CHECK_EQ(id, h);
	CHECK_EQ(len, 33);
	CHECK_EQ(vdrv_pdesc_flags(&v->d, 0, 6) & USED_BITS, USED_BITS);   /* lap 1 */
	CHECK_EQ(vq0(v)->used_idx, 1);
	CHECK(!vq0(v)->used_wrap);
	vnull_free(v);
}

/* ---- used descriptors ---- */

TEST(push_and_publish_write_used_descriptor_flags_last)
{
	struct vnull *v = setup(8, 0);
	struct vdrv_sg sg = { buf(v, 64), 64, true };
	uint32_t id, len;
	int h = vdrv_add(&v->d, 0, &sg, 1, false);

	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	virtq_push(vq0(v), chain.head, 40);
	CHECK_EQ(vdrv_pdesc_flags(&v->d, 0, 0), AV | F_WRITE);  /* still "available" */
	CHECK_EQ(vdrv_get_used(&v->d, 0, &id, &len), 0);
	CHECK(virtq_publish(vq0(v)));
	CHECK_EQ(vdrv_pdesc_flags(&v->d, 0, 0), USED_BITS);
	CHECK_EQ(vdrv_pdesc_id(&v->d, 0, 0), h);
	CHECK_EQ(vdrv_get_used(&v->d, 0, &id, &len), 1);
	CHECK_EQ(id, h);
	CHECK_EQ(len, 40);
	CHECK_EQ(vq0(v)->inflight_count, 0);
	CHECK_EQ(vq0(v)->inflight_slots, 0);
	CHECK(!virtq_publish(vq0(v)));          /* nothing new */
	vnull_free(v);
}

TEST(batch_becomes_visible_only_with_first_descriptor)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 16);
	uint32_t id, len;
	int h[3];

	for (int i = 0; i < 3; i++) {
		struct vdrv_sg sg = { a, 16, true };
		h[i] = vdrv_add(&v->d, 0, &sg, 1, false);
		CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	}
	for (int i = 0; i < 3; i++)
		virtq_push(vq0(v), (uint16_t)h[i], (uint32_t)i);
	/* Later used descriptors are written, the first is not: the driver,
	 * which reads in ring order, sees nothing yet. */
	CHECK_EQ(vdrv_pdesc_flags(&v->d, 0, 1), USED_BITS);
	CHECK_EQ(vdrv_get_used(&v->d, 0, &id, &len), 0);
	CHECK(virtq_publish(vq0(v)));
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(vdrv_get_used(&v->d, 0, &id, &len), 1);
		CHECK_EQ(id, h[i]);
		CHECK_EQ(len, i);
	}
	vnull_free(v);
}

TEST(out_of_order_completion_skips_chain_lengths)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 64);
	struct vdrv_sg s3[3] = { { a, 16, false }, { a + 16, 16, true }, { a + 32, 16, true } };
	struct vdrv_sg s1[1] = { { a + 48, 16, true } };
	uint32_t id, len;
	int x = vdrv_add(&v->d, 0, s3, 3, false);        /* slots 0-2 */
	int y = vdrv_add(&v->d, 0, s1, 1, false);        /* slot 3 */

	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	/* y completes first: its used descriptor goes to slot 0; the next
	 * used slot is 1 (y took one slot), where x's goes. */
	virtq_push(vq0(v), (uint16_t)y, 1);
	CHECK(virtq_publish(vq0(v)));
	CHECK_EQ(vq0(v)->used_idx, 1);
	CHECK_EQ(vdrv_get_used(&v->d, 0, &id, &len), 1);
	CHECK_EQ(id, y);
	virtq_push(vq0(v), (uint16_t)x, 3);
	CHECK(virtq_publish(vq0(v)));
	CHECK_EQ(vq0(v)->used_idx, 4);
	CHECK_EQ(vdrv_pdesc_id(&v->d, 0, 1), x);
	CHECK_EQ(vdrv_get_used(&v->d, 0, &id, &len), 1);
	CHECK_EQ(id, x);
	CHECK_EQ(len, 3);
	CHECK_EQ(v->d.q[0].last_used, 4);       /* the driver agrees */
	CHECK_EQ(v->d.q[0].num_free, 8);
	vnull_free(v);
}

static uint32_t rnd_state = 12345;
static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 16;
}

TEST(ring_wraps_many_times_mixed_chains_out_of_order)
{
	/* Size 7 (not a power of 2): chains of 1-3 descriptors, some
	 * indirect, several in flight, completed in random order. */
	struct vnull *v = setup(7, INDIRECT | EVENT_IDX);
	uint64_t a = buf(v, 64 * 7);
	uint16_t dev_inflight[8], fifo[8];
	unsigned ndev = 0, nfifo = 0, completed = 0;
	uint32_t want_len[8] = { 0 }, id, len;
	bool pushed[8] = { false };
	unsigned laps_seen = 0;
	bool last_wrap = true;

	for (unsigned it = 0; it < 30000; it++) {
		/* driver adds a few */
		while (rnd() % 3) {
			unsigned n = 1 + rnd() % 3, i;
			bool ind = n > 1 && rnd() % 3 == 0;
			struct vdrv_sg sg[3];
			int h;

			for (i = 0; i < n; i++) {
				sg[i].gpa = a + 64 * (it % 7) + 16 * i;
				sg[i].len = 1 + i + it % 5;
				sg[i].writable = i > 0;
			}
			h = vdrv_add(&v->d, 0, sg, n, ind);
			if (h < 0)
				break;
			fifo[nfifo++] = (uint16_t)h;
			want_len[h] = n;   /* record chain length as a check below */
		}
		/* device pops everything, in the driver's order */
		for (;;) {
			int r = virtq_pop(vq0(v), &chain);

			CHECK(r >= 0);
			if (r == 0)
				break;
			CHECK(nfifo > 0);
			CHECK_EQ(chain.head, fifo[0]);
			CHECK_EQ(chain.n, want_len[chain.head]);
			CHECK_EQ(chain.n_readable, 1);
			memmove(fifo, fifo + 1, --nfifo * sizeof(fifo[0]));
			dev_inflight[ndev++] = chain.head;
		}
		CHECK_EQ(nfifo, 0);
		/* device completes a random subset in random order */
		for (unsigned k = rnd() % (ndev + 1); k; k--) {
			unsigned j = rnd() % ndev;
			uint16_t h = dev_inflight[j];

			dev_inflight[j] = dev_inflight[--ndev];
			virtq_push(vq0(v), h, h * 1000u + it);
			want_len[h] = h * 1000u + it;
			pushed[h] = true;
		}
		virtq_publish(vq0(v));
		while (vdrv_get_used(&v->d, 0, &id, &len)) {
			CHECK(id < 7 && pushed[id]);
			CHECK_EQ(len, want_len[id]);
			pushed[id] = false;
			completed++;
		}
		if (vq0(v)->used_wrap != last_wrap) {
			last_wrap = vq0(v)->used_wrap;
			laps_seen++;
		}
	}
	CHECK(completed > 20000);
	CHECK(laps_seen > 1000);
	/* finish everything: all ids come back, the rings agree */
	while (ndev) {
		virtq_push(vq0(v), dev_inflight[--ndev], 0);
	}
	virtq_publish(vq0(v));
	while (vdrv_get_used(&v->d, 0, &id, &len))
		;
	CHECK_EQ(v->d.q[0].num_free, 7);
	CHECK_EQ(vq0(v)->inflight_slots, 0);
	CHECK_EQ(v->d.q[0].last_used, vq0(v)->used_idx);
	CHECK_EQ(v->d.q[0].next_avail, vq0(v)->last_avail);
	CHECK_EQ(v->d.q[0].used_wrap, vq0(v)->used_wrap);
	vnull_free(v);
}

/* ---- wrap counter abuse ---- */

TEST(descriptor_with_wrong_wrap_bits_not_available)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 16);
	uint16_t bad[] = { 0, (1u << VRING_PACKED_DESC_F_USED) /* lap 0 avail */, USED_BITS /* looks used */ };

	for (unsigned i = 0; i < 3; i++) {
		vdrv_pdesc_set(&v->d, 0, 0, a, 16, 0, bad[i]);
		CHECK_EQ(virtq_pop(vq0(v), &chain), 0);
		CHECK(!virtq_has_work(vq0(v)));
		CHECK(virtq_notify_enable(vq0(v)) == false);
	}
	CHECK_EQ(vq0(v)->last_avail, 0);
	raw(v, 0, a, 16, 0, 0);                 /* now right */
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	vnull_free(v);
}

TEST(stale_and_flipped_descriptors_not_reconsumed)
{
	struct vnull *v = setup(4, 0);
	uint64_t a = buf(v, 16);

	/* Lap 1: four buffers consumed. */
	for (uint16_t i = 0; i < 4; i++)
		raw(v, i, a, 16, i, 0);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK(!vq0(v)->avail_wrap);
	for (uint16_t i = 0; i < 4; i++)
		virtq_push(vq0(v), i, 0);
	virtq_publish(vq0(v));
	/* A driver that re-marks slots with lap-1 bits (stale), or flips bits
	 * back and forth, never makes them available again: lap 2 expects
	 * AVAIL=0, USED=1. */
	for (int round = 0; round < 100; round++) {
		raw(v, (uint16_t)(round % 4), a, 16, 0, 0);              /* lap 1 */
		CHECK_EQ(virtq_pop(vq0(v), &chain), 0);
		vdrv_pdesc_set(&v->d, 0, (uint16_t)(round % 4), a, 16, 0, USED_BITS);
		CHECK_EQ(virtq_pop(vq0(v), &chain), 0);
		vdrv_pdesc_set(&v->d, 0, (uint16_t)(round % 4), a, 16, 0, 0);
		CHECK_EQ(virtq_pop(vq0(v), &chain), 0);
	}
	CHECK_EQ(vq0(v)->last_avail, 0);
	CHECK_EQ(vq0(v)->inflight_count, 0);
	/* The right lap-2 marking is taken exactly once. */
	vdrv_pdesc_set(&v->d, 0, 0, a, 16, 2, (1u << VRING_PACKED_DESC_F_USED));
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(chain.head, 2);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 0);
	vnull_free(v);
}

TEST(chain_of_next_flags_around_whole_ring_rejected)
{
	/* Every slot says NEXT (non-head wrap bits are not consulted): the
	 * walk stops at the ring size instead of looping. */
	struct vnull *v = setup(4, 0);
	uint64_t a = buf(v, 16);

	for (uint16_t i = 4; i-- > 0;)
		raw(v, i, a, 16, 0, F_NEXT);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -ELOOP);
	CHECK_EQ(vq0(v)->last_avail, 0);
	vnull_free(v);
}

TEST(chain_into_slots_still_in_flight_rejected)
{
	/* One 1-slot buffer in flight at slot 0; a 4-slot chain from slot 1
	 * would wrap onto it. */
	struct vnull *v = setup(4, 0);
	uint64_t a = buf(v, 16);

	raw(v, 0, a, 16, 0, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	vdrv_pdesc_set(&v->d, 0, 0, a, 16, 1, (1u << VRING_PACKED_DESC_F_USED));   /* lap 2 */
	raw(v, 3, a, 16, 1, F_NEXT);
	raw(v, 2, a, 16, 1, F_NEXT);
	raw(v, 1, a, 16, 1, F_NEXT);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -ELOOP);
	/* three slots (1-3) are fine */
	raw(v, 3, a, 16, 1, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(chain.n, 3);
	vnull_free(v);
}

/* ---- ids ---- */

TEST(buffer_id_out_of_range_rejected)
{
	struct vnull *v = setup(8, 0);

	raw(v, 0, buf(v, 16), 16, 8, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	raw(v, 0, buf(v, 16), 16, 0xffff, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(buffer_id_reused_while_in_flight_rejected)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 16);

	raw(v, 0, a, 16, 3, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	raw(v, 1, a, 16, 3, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EBUSY);
	CHECK_EQ(vq0(v)->last_avail, 1);        /* nothing consumed */
	virtq_push(vq0(v), 3, 0);               /* completed: may be reused */
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(chain.head, 3);
	vnull_free(v);
}

TEST(error_consumes_nothing)
{
	struct vnull *v = setup(8, 0);

	raw(v, 0, 0, 16, 0, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EFAULT);
	CHECK_EQ(vq0(v)->last_avail, 0);
	CHECK(vq0(v)->avail_wrap);
	CHECK_EQ(vq0(v)->inflight_count, 0);
	CHECK_EQ(vq0(v)->inflight_slots, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EFAULT);
	vnull_free(v);
}

/* ---- buffers ---- */

/* As on the split ring: a zero-length buffer is a well-formed chain that
 * no request can use; it is popped, marked, and can be returned. */
TEST(buffer_length_0_pops_chain_marked_empty)
{
	struct vnull *v = setup(8, 0);

	raw(v, 0, buf(v, 16), 0, 0, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK(chain.has_empty);
	CHECK(chain.iov[0].iov_base == NULL && chain.iov[0].iov_len == 0);
	vnull_free(v);
}

TEST(buffer_length_2g_or_more_rejected)
{
	struct vnull *v = setup(8, 0);

	raw(v, 0, buf(v, 16), 0x80000000u, 0, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(buffer_outside_ram_rejected)
{
	uint64_t addr[] = { 0, RAM_END + 4096, RAM_END - 8, UINT64_MAX - 7 };

	for (unsigned i = 0; i < 4; i++) {
		struct vnull *v = setup(8, 0);

		raw(v, 0, addr[i], 16, 0, F_WRITE);
		CHECK_EQ(virtq_pop(vq0(v), &chain), -EFAULT);
		vnull_free(v);
	}
}

TEST(buffer_in_later_chain_descriptor_outside_ram_rejected)
{
	struct vnull *v = setup(8, 0);

	raw(v, 1, RAM_END - 8, 16, 0, F_WRITE);
	raw(v, 0, buf(v, 16), 16, 0, F_NEXT);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EFAULT);
	vnull_free(v);
}

TEST(writable_before_readable_rejected)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 16);

	raw(v, 1, a, 16, 0, 0);
	raw(v, 0, a, 16, 0, F_WRITE | F_NEXT);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

/* ---- indirect ---- */

static uint64_t table(struct vnull *v, unsigned n, const uint16_t *flags, uint64_t a)
{
	uint64_t t = vdrv_alloc(&v->d, 16ULL * n, 16);

	for (unsigned i = 0; i < n; i++) {
		uint8_t *p = vdrv_host(&v->d, t + 16ULL * i);

		le64_store(p, a);
		le32_store(p + 8, 16);
		le16_store(p + 14, flags[i]);
	}
	return t;
}

TEST(indirect_without_feature_rejected)
{
	struct vnull *v = setup(8, 0);
	uint16_t f[] = { 0 };

	raw(v, 0, table(v, 1, f, buf(v, 16)), 16, 0, F_IND);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(indirect_with_next_rejected)
{
	struct vnull *v = setup(8, INDIRECT);
	uint16_t f[] = { 0 };
	uint64_t a = buf(v, 16);

	raw(v, 1, a, 16, 0, 0);
	raw(v, 0, table(v, 1, f, a), 16, 0, F_IND | F_NEXT);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(indirect_after_direct_descriptor_rejected)
{
	struct vnull *v = setup(8, INDIRECT);
	uint16_t f[] = { F_WRITE };
	uint64_t a = buf(v, 16);

	raw(v, 1, table(v, 1, f, a), 16, 0, F_IND);
	raw(v, 0, a, 16, 0, F_NEXT);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(next_inside_indirect_table_rejected)
{
	struct vnull *v = setup(8, INDIRECT);
	uint16_t f[] = { F_NEXT, F_WRITE };

	raw(v, 0, table(v, 2, f, buf(v, 16)), 32, 0, F_IND);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(nested_indirect_rejected)
{
	struct vnull *v = setup(8, INDIRECT);
	uint16_t f[] = { 0 }, fi[] = { F_IND };
	uint64_t inner = table(v, 1, f, buf(v, 16));

	raw(v, 0, table(v, 1, fi, inner), 16, 0, F_IND);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(indirect_length_not_nonzero_multiple_of_16_rejected)
{
	uint32_t lens[] = { 0, 8, 24 };

	for (unsigned i = 0; i < 3; i++) {
		struct vnull *v = setup(8, INDIRECT);
		uint16_t f[] = { 0, 0 };

		raw(v, 0, table(v, 2, f, buf(v, 16)), lens[i], 0, F_IND);
		CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
		vnull_free(v);
	}
}

TEST(indirect_table_with_more_entries_than_queue_size_rejected)
{
	struct vnull *v = setup(4, INDIRECT);
	uint16_t f[5] = { 0 };

	raw(v, 0, table(v, 5, f, buf(v, 16)), 16 * 5, 0, F_IND);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(indirect_table_outside_ram_rejected)
{
	struct vnull *v = setup(8, INDIRECT);

	raw(v, 0, RAM_END - 16, 32, 0, F_IND);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EFAULT);
	vnull_free(v);
}

TEST(writable_before_readable_in_indirect_table_rejected)
{
	struct vnull *v = setup(8, INDIRECT);
	uint64_t a = buf(v, 16);
	struct vdrv_sg sg[] = { { a, 16, true }, { a, 16, false } };

	vdrv_add(&v->d, 0, sg, 2, true);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

/* ---- used buffer notifications (driver event suppression) ---- */

static bool complete_one(struct vnull *v)
{
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	virtq_push(vq0(v), chain.head, 0);
	return virtq_publish(vq0(v));
}

static void add_n(struct vnull *v, unsigned n, uint64_t a)
{
	struct vdrv_sg sg = { a, 16, true };

	for (unsigned i = 0; i < n; i++)
		CHECK(vdrv_add(&v->d, 0, &sg, 1, false) >= 0);
}

TEST(publish_honours_enable_and_disable)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 16);

	add_n(v, 3, a);
	vdrv_packed_driver_event_set(&v->d, 0, 0, VRING_PACKED_EVENT_FLAG_ENABLE);
	CHECK(complete_one(v));
	vdrv_packed_driver_event_set(&v->d, 0, 0, VRING_PACKED_EVENT_FLAG_DISABLE);
	CHECK(!complete_one(v));
	CHECK_EQ(vdrv_pdesc_flags(&v->d, 0, 1), USED_BITS);     /* published all the same */
	uint32_t id, len;
	while (vdrv_get_used(&v->d, 0, &id, &len))
		;
	CHECK(!vdrv_packed_enable_cb(&v->d, 0));                /* ENABLE, Linux-style */
	CHECK(complete_one(v));
	vnull_free(v);
}

TEST(desc_event_ignored_without_event_idx)
{
	struct vnull *v = setup(8, 0);

	add_n(v, 1, buf(v, 16));
	vdrv_packed_driver_event_set(&v->d, 0, 5 | (1u << VRING_PACKED_EVENT_F_WRAP_CTR), VRING_PACKED_EVENT_FLAG_DESC);
	CHECK(complete_one(v));                 /* treated as ENABLE */
	vnull_free(v);
}

TEST(desc_event_notifies_exactly_when_offset_written)
{
	struct vnull *v = setup(8, EVENT_IDX);
	uint64_t a = buf(v, 16);
	bool n[4];

	add_n(v, 6, a);
	vdrv_packed_driver_event_set(&v->d, 0, 2 | (1u << VRING_PACKED_EVENT_F_WRAP_CTR), VRING_PACKED_EVENT_FLAG_DESC);
	for (int i = 0; i < 4; i++)
		n[i] = complete_one(v);
	CHECK(!n[0]);   /* slot 0 */
	CHECK(!n[1]);   /* slot 1 */
	CHECK(n[2]);    /* slot 2: the event */
	CHECK(!n[3]);
	/* A batch over the event notifies once. */
	vdrv_packed_driver_event_set(&v->d, 0, 5 | (1u << VRING_PACKED_EVENT_F_WRAP_CTR), VRING_PACKED_EVENT_FLAG_DESC);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	virtq_push(vq0(v), chain.head, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	virtq_push(vq0(v), chain.head, 0);
	CHECK(virtq_publish(vq0(v)));
	vnull_free(v);
}

TEST(desc_event_respects_wrap_counter)
{
	struct vnull *v = setup(4, EVENT_IDX);
	uint64_t a = buf(v, 16);
	uint32_t id, len;

	vdrv_packed_driver_event_set(&v->d, 0, 0, VRING_PACKED_EVENT_FLAG_DISABLE);
	for (int i = 0; i < 4; i++)             /* lap 1 done */
		round_trip(v, a);
	CHECK(!vq0(v)->used_wrap);
	/* Event at slot 1 of lap 2 (wrap 0): not slot 0, yes slot 1. */
	vdrv_packed_driver_event_set(&v->d, 0, 1, VRING_PACKED_EVENT_FLAG_DESC);
	add_n(v, 3, a);
	CHECK(!complete_one(v));
	CHECK(complete_one(v));
	/* Event at slot 3 of lap 1 (wrap 1): long past, no notification. */
	vdrv_packed_driver_event_set(&v->d, 0, 3 | (1u << VRING_PACKED_EVENT_F_WRAP_CTR), VRING_PACKED_EVENT_FLAG_DESC);
	CHECK(!complete_one(v));
	while (vdrv_get_used(&v->d, 0, &id, &len))
		;
	vnull_free(v);
}

TEST(linux_style_enable_cb_gets_next_completion_notified)
{
	struct vnull *v = setup(8, EVENT_IDX);
	uint64_t a = buf(v, 16);
	uint32_t id, len;

	add_n(v, 4, a);
	vdrv_packed_disable_cb(&v->d, 0);
	CHECK(!complete_one(v));
	/* Driver re-enables with a used buffer already there: poll says so. */
	CHECK(vdrv_packed_enable_cb(&v->d, 0));
	CHECK_EQ(vdrv_get_used(&v->d, 0, &id, &len), 1);        /* moves the event on */
	CHECK(complete_one(v));
	CHECK(vdrv_packed_enable_cb(&v->d, 0));                 /* used one pending */
	vnull_free(v);
}

/* ---- available buffer notifications (device event suppression) ---- */

TEST(notify_disable_and_enable_control_driver_kicks)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 16);

	virtq_notify_disable(vq0(v));
	CHECK_EQ(vdrv_packed_device_event(&v->d, 0, NULL), VRING_PACKED_EVENT_FLAG_DISABLE);
	add_n(v, 1, a);
	CHECK(!vdrv_packed_kick_prepare(&v->d, 0));
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK(!virtq_notify_enable(vq0(v)));
	CHECK_EQ(vdrv_packed_device_event(&v->d, 0, NULL), VRING_PACKED_EVENT_FLAG_ENABLE);
	add_n(v, 1, a);
	CHECK(vdrv_packed_kick_prepare(&v->d, 0));
	vnull_free(v);
}

TEST(event_idx_notify_enable_sets_desc_event_at_next_slot)
{
	struct vnull *v = setup(4, EVENT_IDX);
	uint64_t a = buf(v, 16);
	uint16_t off;

	for (int i = 0; i < 3; i++)
		round_trip(v, a);
	CHECK(!virtq_notify_enable(vq0(v)));
	CHECK_EQ(vdrv_packed_device_event(&v->d, 0, &off), VRING_PACKED_EVENT_FLAG_DESC);
	CHECK_EQ(off, 3 | (1u << VRING_PACKED_EVENT_F_WRAP_CTR));
	vdrv_packed_kick_prepare(&v->d, 0);      /* driver's kick bookkeeping so far */
	add_n(v, 2, a);                          /* slots 3 and 0 (lap 2) */
	CHECK(vdrv_packed_kick_prepare(&v->d, 0));
	add_n(v, 1, a);                          /* slot 1: event not moved */
	CHECK(!vdrv_packed_kick_prepare(&v->d, 0));
	uint16_t heads[3];
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
		heads[i] = chain.head;
	}
	CHECK(!virtq_notify_enable(vq0(v)));
	CHECK_EQ(vdrv_packed_device_event(&v->d, 0, &off), VRING_PACKED_EVENT_FLAG_DESC);
	CHECK_EQ(off, 2);                        /* slot 2, wrap 0 */
	for (int i = 0; i < 3; i++)
		virtq_push(vq0(v), heads[i], 0);
	virtq_publish(vq0(v));
	uint32_t id, len;
	while (vdrv_get_used(&v->d, 0, &id, &len))
		;
	add_n(v, 1, a);
	CHECK(vdrv_packed_kick_prepare(&v->d, 0));
	vnull_free(v);
}

TEST(notify_enable_returns_true_when_buffers_raced_in)
{
	/* Device drained with kicks disabled; the driver adds a buffer and,
	 * seeing DISABLE, does not kick, before the device re-enables: enable
	 * must report it so the device drains again. */
	for (int ev = 0; ev < 2; ev++) {
		struct vnull *v = setup(8, ev ? EVENT_IDX : 0);
		uint64_t a = buf(v, 16);

		add_n(v, 1, a);
		virtq_notify_disable(vq0(v));
		CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
		CHECK_EQ(virtq_pop(vq0(v), &chain), 0);
		add_n(v, 1, a);                             /* the race */
		CHECK(!vdrv_packed_kick_prepare(&v->d, 0)); /* no kick sent */
		CHECK(virtq_notify_enable(vq0(v)));
		CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
		CHECK(!virtq_notify_enable(vq0(v)));
		vnull_free(v);
	}
}

TEST(reset_returns_queue_to_split_defaults)
{
	struct vnull *v = setup(8, 0);

	round_trip(v, buf(v, 16));
	vdrv_wr(&v->d, VIRTIO_MMIO_STATUS, 0);
	CHECK(!vq0(v)->ready);
	CHECK(!vq0(v)->packed);
	CHECK_EQ(vq0(v)->last_avail, 0);
	CHECK_EQ(vq0(v)->inflight_slots, 0);
	vnull_free(v);
}

/* virtq_avail_count on a packed ring: the descriptors made available past
 * the device's position (a chain of two counts two), followed across the
 * wrap, up to the first one not (yet) available. */
TEST(avail_count_walks_available_descriptors_across_the_wrap)
{
	struct vnull *v = setup(4, 0);
	uint64_t a = buf(v, 16), b = buf(v, 16);
	struct vdrv_sg two[] = { { a, 16, false }, { b, 16, true } };
	uint32_t id, len;

	CHECK_EQ(virtq_avail_count(vq0(v)), 0);
	CHECK(vdrv_add(&v->d, 0, two, 2, false) >= 0);
	add_n(v, 1, a);
	CHECK_EQ(virtq_avail_count(vq0(v)), 3);
	(void)complete_one(v);                       /* the 2-descriptor chain */
	CHECK_EQ(virtq_avail_count(vq0(v)), 1);
	(void)complete_one(v);
	CHECK_EQ(virtq_avail_count(vq0(v)), 0);
	CHECK_EQ(vdrv_get_used(&v->d, 0, &id, &len), 1);   /* the driver takes both back */
	CHECK_EQ(vdrv_get_used(&v->d, 0, &id, &len), 1);
	add_n(v, 3, a);                              /* slot 3, then 0 and 1 wrapped */
	CHECK_EQ(virtq_avail_count(vq0(v)), 3);
	vnull_free(v);
}

/* ---- the ring's state for the statistics ---- */

/* Positions carry their wrap counter in bit 15 (off_wrap encoding); the
 * used position is what the guest can see, so a pushed batch that is not
 * yet published does not move it, even where the batch crosses the end of
 * the ring. */
TEST(ring_state_reports_positions_with_wrap_counters)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 64);
	struct virtq_ring_state rs;
	int h[3];

	for (int i = 0; i < 6; i++)
		round_trip(v, a);
	virtq_ring_state(vq0(v), &rs);
	CHECK(rs.packed);
	CHECK_EQ(rs.last_avail, 6 | 0x8000);     /* lap 1: wrap counter 1 */
	CHECK_EQ(rs.used, 6 | 0x8000);
	CHECK_EQ(rs.avail_pending, 0);
	CHECK_EQ(rs.in_flight, 0);
	for (int i = 0; i < 3; i++) {             /* slots 6, 7, then 0 of lap 2 */
		struct vdrv_sg sg = { a, 16, true };

		h[i] = vdrv_add(&v->d, 0, &sg, 1, false);
		CHECK(h[i] >= 0);
	}
	virtq_ring_state(vq0(v), &rs);
	CHECK_EQ(rs.avail_pending, 3);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	virtq_ring_state(vq0(v), &rs);
	CHECK_EQ(rs.last_avail, 1);               /* lap 2: wrap counter 0 */
	CHECK_EQ(rs.avail_pending, 0);
	CHECK_EQ(rs.in_flight, 3);
	for (int i = 0; i < 3; i++)
		virtq_push(vq0(v), (uint16_t)h[i], 0);
	virtq_ring_state(vq0(v), &rs);
	CHECK_EQ(rs.used, 6 | 0x8000);            /* pushed, not published */
	CHECK_EQ(rs.in_flight, 0);
	CHECK(virtq_publish(vq0(v)));
	virtq_ring_state(vq0(v), &rs);
	CHECK_EQ(rs.used, 1);
	vnull_free(v);
}
