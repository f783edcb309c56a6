/* Split virtqueue (devices/virtq.c): popping chains, every malformed ring
 * the guest can build, used ring publishing and notification suppression.
 * The test is the queue owner: it calls virtq_* directly on a queue that a
 * vdrv driver set up through the virtio-mmio register model. */
#include "tests/unit/check.h"
#include "tests/unit/vnulldev.h"

#include <errno.h>
#include <sys/mman.h>

#define R VNULL_RAM_GPA
#define RAM_END (VNULL_RAM_GPA + VNULL_RAM_SIZE)
#define INDIRECT VIRTIO_BIT(VIRTIO_RING_F_INDIRECT_DESC)
#define EVENT_IDX VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX)

static struct virtq_chain chain;

static struct vnull *setup(uint16_t qsize, uint64_t features)
{
	return vnull_running(1, qsize, features);
}

static struct virtq *vq0(struct vnull *v)
{
	return &v->dev.queues[0].vq;
}

/* A data buffer in fake RAM. */
static uint64_t buf(struct vnull *v, uint32_t len)
{
	return vdrv_alloc(&v->d, len, 16);
}

/* Put a one-descriptor chain (desc i) in the avail ring. */
static void one_desc(struct vnull *v, uint16_t i, uint64_t addr, uint32_t len, uint16_t flags)
{
	vdrv_desc_set(&v->d, 0, i, addr, len, flags, 0);
	vdrv_avail_add_head(&v->d, 0, i);
}

TEST(pop_empty_ring_returns_0)
{
	struct vnull *v = setup(8, 0);

	CHECK_EQ(virtq_pop(vq0(v), &chain), 0);
	CHECK(!virtq_has_work(vq0(v)));
	vnull_free(v);
}

TEST(pop_direct_chain_readable_then_writable)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 16), b = buf(v, 512), c = buf(v, 1);
	struct vdrv_sg sg[] = { { a, 16, false }, { b, 512, true }, { c, 1, true } };
	int head = vdrv_add(&v->d, 0, sg, 3, false);

	CHECK(head >= 0);
	CHECK(virtq_has_work(vq0(v)));
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(chain.head, head);
	CHECK_EQ(chain.n, 3);
	CHECK_EQ(chain.n_readable, 1);
	CHECK_EQ(chain.total_len, 529);
	CHECK(chain.iov[0].iov_base == vdrv_host(&v->d, a) && 0 < chain.n_readable);
	CHECK(chain.iov[1].iov_base == vdrv_host(&v->d, b) && 1 >= chain.n_readable);
	CHECK(chain.iov[2].iov_base == vdrv_host(&v->d, c));
	CHECK_EQ(chain.iov[2].iov_len, 1);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 0);
	vnull_free(v);
}

TEST(pop_indirect_chain)
{
	struct vnull *v = setup(8, INDIRECT);
	uint64_t a = buf(v, 16), b = buf(v, 4096);
	struct vdrv_sg sg[] = { { a, 16, false }, { b, 4096, true } };
	int head = vdrv_add(&v->d, 0, sg, 2, true);

	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(chain.head, head);
	CHECK_EQ(chain.n, 2);
	CHECK_EQ(chain.n_readable, 1);
	CHECK(chain.iov[1].iov_base == vdrv_host(&v->d, b) && 1 >= chain.n_readable);
	vnull_free(v);
}

TEST(direct_descriptors_then_indirect_table)
{
	struct vnull *v = setup(8, INDIRECT);
	uint64_t a = buf(v, 16), b = buf(v, 64), tbl = vdrv_alloc(&v->d, 16, 16);

	vdrv_desc_set(&v->d, 0, 0, a, 16, VRING_DESC_F_NEXT, 1);
	vdrv_desc_set(&v->d, 0, 1, tbl, 16, VRING_DESC_F_INDIRECT, 0);
	vdrv_indirect_set(&v->d, tbl, 0, b, 64, VRING_DESC_F_WRITE, 0);
	vdrv_avail_add_head(&v->d, 0, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(chain.n, 2);
	CHECK_EQ(chain.n_readable, 1);
	vnull_free(v);
}

TEST(push_and_publish_make_used_element_visible)
{
	struct vnull *v = setup(8, 0);
	struct vdrv_sg sg = { buf(v, 64), 64, true };
	uint32_t id, len;
	int head = vdrv_add(&v->d, 0, &sg, 1, false);

	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	virtq_push(vq0(v), chain.head, 40);
	CHECK_EQ(vdrv_get_used(&v->d, 0, &id, &len), 0);   /* not yet published */
	CHECK(virtq_publish(vq0(v)));
	CHECK_EQ(vdrv_get_used(&v->d, 0, &id, &len), 1);
	CHECK_EQ(id, head);
	CHECK_EQ(len, 40);
	CHECK_EQ(vq0(v)->inflight_count, 0);
	vnull_free(v);
}

TEST(ring_wraps_around_many_times)
{
	struct vnull *v = setup(4, INDIRECT);
	uint64_t a = buf(v, 32);
	uint32_t id, len;

	for (unsigned i = 0; i < 70000; i++) {
		struct vdrv_sg sg[2] = { { a, 16, false }, { a + 16, 16, true } };
		int head = vdrv_add(&v->d, 0, sg, 2, i % 3 == 0);

		CHECK(head >= 0);
		CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
		CHECK_EQ(chain.head, head);
		virtq_push(vq0(v), chain.head, i);
		virtq_publish(vq0(v));
		CHECK_EQ(vdrv_get_used(&v->d, 0, &id, &len), 1);
		CHECK_EQ(id, head);
		CHECK_EQ(len, i);
	}
	vnull_free(v);
}

/* ---- malformed rings ---- */

TEST(descriptor_loop_rejected)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 16);

	vdrv_desc_set(&v->d, 0, 0, a, 16, VRING_DESC_F_NEXT, 1);
	vdrv_desc_set(&v->d, 0, 1, a, 16, VRING_DESC_F_NEXT, 0);
	vdrv_avail_add_head(&v->d, 0, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -ELOOP);
	vnull_free(v);
}

TEST(indirect_table_loop_rejected)
{
	struct vnull *v = setup(8, INDIRECT);
	uint64_t a = buf(v, 16), tbl = vdrv_alloc(&v->d, 32, 16);

	vdrv_indirect_set(&v->d, tbl, 0, a, 16, VRING_DESC_F_NEXT, 1);
	vdrv_indirect_set(&v->d, tbl, 1, a, 16, VRING_DESC_F_NEXT, 0);
	one_desc(v, 0, tbl, 32, VRING_DESC_F_INDIRECT);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -ELOOP);
	vnull_free(v);
}

TEST(chain_longer_than_queue_size_rejected)
{
	/* 3 direct descriptors + a 2-entry indirect table = 5 > size 4. */
	struct vnull *v = setup(4, INDIRECT);
	uint64_t a = buf(v, 16), tbl = vdrv_alloc(&v->d, 32, 16);

	vdrv_desc_set(&v->d, 0, 0, a, 16, VRING_DESC_F_NEXT, 1);
	vdrv_desc_set(&v->d, 0, 1, a, 16, VRING_DESC_F_NEXT, 2);
	vdrv_desc_set(&v->d, 0, 2, a, 16, VRING_DESC_F_NEXT, 3);
	vdrv_desc_set(&v->d, 0, 3, tbl, 32, VRING_DESC_F_INDIRECT, 0);
	vdrv_indirect_set(&v->d, tbl, 0, a, 16, VRING_DESC_F_NEXT, 1);
	vdrv_indirect_set(&v->d, tbl, 1, a, 16, 0, 0);
	vdrv_avail_add_head(&v->d, 0, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -ELOOP);
	vnull_free(v);
}

TEST(next_index_out_of_range_rejected)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 16);

	vdrv_desc_set(&v->d, 0, 0, a, 16, VRING_DESC_F_NEXT, 8);
	vdrv_avail_add_head(&v->d, 0, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(avail_head_out_of_range_rejected)
{
	struct vnull *v = setup(8, 0);

	vdrv_avail_add_head(&v->d, 0, 8);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(avail_idx_jumping_by_more_than_size_rejected)
{
	struct vnull *v = setup(8, 0);

	one_desc(v, 0, buf(v, 16), 16, 0);
	vdrv_avail_idx_set(&v->d, 0, 9);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vdrv_avail_idx_set(&v->d, 0, 8);        /* exactly size is fine */
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	vnull_free(v);
}

TEST(head_resubmitted_while_in_flight_rejected)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 16);

	one_desc(v, 3, a, 16, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	vdrv_avail_add_head(&v->d, 0, 3);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EBUSY);
	virtq_push(vq0(v), 3, 0);               /* completed: may be reused */
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(chain.head, 3);
	vnull_free(v);
}

TEST(error_consumes_nothing)
{
	struct vnull *v = setup(8, 0);

	one_desc(v, 0, 0, 16, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EFAULT);
	CHECK_EQ(vq0(v)->last_avail, 0);
	CHECK_EQ(vq0(v)->inflight_count, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EFAULT);
	vnull_free(v);
}

TEST(buffer_address_zero_rejected_when_not_ram)
{
	struct vnull *v = setup(8, 0);

	one_desc(v, 0, 0, 16, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EFAULT);
	vnull_free(v);
}

TEST(buffer_beyond_ram_rejected)
{
	struct vnull *v = setup(8, 0);

	one_desc(v, 0, RAM_END + 4096, 16, VRING_DESC_F_WRITE);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EFAULT);
	vnull_free(v);
}

TEST(buffer_crossing_ram_region_end_rejected)
{
	struct vnull *v = setup(8, 0);

	one_desc(v, 0, RAM_END - 8, 16, VRING_DESC_F_WRITE);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EFAULT);
	vnull_free(v);
}

TEST(buffer_wrapping_2_64_rejected)
{
	struct vnull *v = setup(8, 0);

	one_desc(v, 0, UINT64_MAX - 7, 16, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EFAULT);
	vnull_free(v);
}

/* A zero-length buffer does not break the ring: the chain is consumed and
 * marked, so the device can hand it back with used length 0. */
TEST(buffer_length_0_pops_chain_marked_empty)
{
	struct vnull *v = setup(8, 0);

	one_desc(v, 0, buf(v, 16), 0, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK(chain.has_empty);
	CHECK_EQ(chain.n, 1);
	CHECK(chain.iov[0].iov_base == NULL && chain.iov[0].iov_len == 0);
	virtq_push(vq0(v), chain.head, 0);
	CHECK_EQ(vq0(v)->inflight_count, 0);
	vnull_free(v);
}

TEST(buffer_length_2g_or_more_rejected)
{
	struct vnull *v = setup(8, 0);

	one_desc(v, 0, buf(v, 16), 0x80000000u, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(chain_total_over_4g_rejected)
{
	/* A 2 GiB region of reserved address space at 4 GiB: valid guest RAM
	 * for gmem_ptr, never touched. */
	struct vnull *v = setup(8, 0);
	uint64_t big = 1ULL << 32, blen = 1ULL << 31;
	void *res = mmap(NULL, blen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	CHECK(res != MAP_FAILED);
	CHECK_EQ(gmem_add_region(&v->d.mem, big, blen, res), 0);
	/* two buffers of 2^31-1 bytes = 2^32-2 bytes: allowed */
	vdrv_desc_set(&v->d, 0, 0, big, 0x7fffffff, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
	vdrv_desc_set(&v->d, 0, 1, big, 0x7fffffff, VRING_DESC_F_WRITE, 0);
	vdrv_avail_add_head(&v->d, 0, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(chain.total_len, 0xfffffffeULL);
	/* three: > 2^32 */
	vdrv_desc_set(&v->d, 0, 2, big, 0x7fffffff, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 3);
	vdrv_desc_set(&v->d, 0, 3, big, 0x7fffffff, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 4);
	vdrv_desc_set(&v->d, 0, 4, big, 0x7fffffff, VRING_DESC_F_WRITE, 0);
	vdrv_avail_add_head(&v->d, 0, 2);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
	munmap(res, blen);
}

TEST(indirect_without_feature_rejected)
{
	struct vnull *v = setup(8, 0);
	uint64_t tbl = vdrv_alloc(&v->d, 16, 16);

	vdrv_indirect_set(&v->d, tbl, 0, buf(v, 16), 16, 0, 0);
	one_desc(v, 0, tbl, 16, VRING_DESC_F_INDIRECT);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(indirect_with_next_rejected)
{
	struct vnull *v = setup(8, INDIRECT);
	uint64_t tbl = vdrv_alloc(&v->d, 16, 16);

	vdrv_indirect_set(&v->d, tbl, 0, buf(v, 16), 16, 0, 0);
	vdrv_desc_set(&v->d, 0, 0, tbl, 16, VRING_DESC_F_INDIRECT | VRING_DESC_F_NEXT, 1);
	vdrv_desc_set(&v->d, 0, 1, buf(v, 16), 16, 0, 0);
	vdrv_avail_add_head(&v->d, 0, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(nested_indirect_rejected)
{
	struct vnull *v = setup(8, INDIRECT);
	uint64_t t1 = vdrv_alloc(&v->d, 16, 16), t2 = vdrv_alloc(&v->d, 16, 16);

	vdrv_indirect_set(&v->d, t2, 0, buf(v, 16), 16, 0, 0);
	vdrv_indirect_set(&v->d, t1, 0, t2, 16, VRING_DESC_F_INDIRECT, 0);
	one_desc(v, 0, t1, 16, VRING_DESC_F_INDIRECT);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(indirect_length_not_multiple_of_16_rejected)
{
	struct vnull *v = setup(8, INDIRECT);
	uint64_t tbl = vdrv_alloc(&v->d, 32, 16);

	vdrv_indirect_set(&v->d, tbl, 0, buf(v, 16), 16, 0, 0);
	one_desc(v, 0, tbl, 24, VRING_DESC_F_INDIRECT);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(indirect_table_with_more_entries_than_queue_size_rejected)
{
	struct vnull *v = setup(4, INDIRECT);
	uint64_t a = buf(v, 16), tbl = vdrv_alloc(&v->d, 16 * 5, 16);

	for (uint16_t i = 0; i < 5; i++)
		vdrv_indirect_set(&v->d, tbl, i, a, 16, i < 4 ? VRING_DESC_F_NEXT : 0, i + 1);
	one_desc(v, 0, tbl, 16 * 5, VRING_DESC_F_INDIRECT);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(indirect_table_outside_ram_rejected)
{
	struct vnull *v = setup(8, INDIRECT);

	one_desc(v, 0, RAM_END - 16, 32, VRING_DESC_F_INDIRECT);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EFAULT);
	vnull_free(v);
}

TEST(indirect_next_out_of_table_rejected)
{
	struct vnull *v = setup(8, INDIRECT);
	uint64_t tbl = vdrv_alloc(&v->d, 32, 16), a = buf(v, 16);

	vdrv_indirect_set(&v->d, tbl, 0, a, 16, VRING_DESC_F_NEXT, 2);
	vdrv_indirect_set(&v->d, tbl, 1, a, 16, 0, 0);
	one_desc(v, 0, tbl, 32, VRING_DESC_F_INDIRECT);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
	vnull_free(v);
}

TEST(writable_before_readable_rejected)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 16);

	vdrv_desc_set(&v->d, 0, 0, a, 16, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
	vdrv_desc_set(&v->d, 0, 1, a, 16, 0, 0);
	vdrv_avail_add_head(&v->d, 0, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), -EINVAL);
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

/* ---- interrupt and notification suppression ---- */

TEST(publish_with_nothing_pushed_does_not_notify)
{
	struct vnull *v = setup(8, 0);

	CHECK(!virtq_publish(vq0(v)));
	vnull_free(v);
}

TEST(publish_honours_no_interrupt_without_event_idx)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 16);

	one_desc(v, 0, a, 16, 0);
	one_desc(v, 1, a, 16, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	virtq_push(vq0(v), chain.head, 0);
	CHECK(virtq_publish(vq0(v)));
	vdrv_avail_flags_set(&v->d, 0, VRING_AVAIL_F_NO_INTERRUPT);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	virtq_push(vq0(v), chain.head, 0);
	CHECK(!virtq_publish(vq0(v)));
	CHECK_EQ(vdrv_used_idx(&v->d, 0), 2);   /* published all the same */
	vnull_free(v);
}

TEST(event_idx_publish_notifies_exactly_when_used_event_crossed)
{
	struct vnull *v = setup(8, EVENT_IDX);
	uint64_t a = buf(v, 16);
	bool notified[6];

	for (uint16_t i = 0; i < 6; i++)
		one_desc(v, i, a, 16, 0);
	/* The driver wants an interrupt once the used entry at index 2 is written. */
	vdrv_used_event_set(&v->d, 0, 2);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
		virtq_push(vq0(v), chain.head, 0);
		notified[i] = virtq_publish(vq0(v));
	}
	CHECK(!notified[0]);    /* used.idx 1 */
	CHECK(!notified[1]);    /* used.idx 2 */
	CHECK(notified[2]);     /* used.idx 3: entry 2 written */
	CHECK(!notified[3]);    /* used_event not moved: no more */
	/* A batch of two that jumps over used_event (5) notifies once. */
	vdrv_used_event_set(&v->d, 0, 4);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	virtq_push(vq0(v), chain.head, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	virtq_push(vq0(v), chain.head, 0);
	CHECK(virtq_publish(vq0(v)));
	vnull_free(v);
}

TEST(event_idx_ignores_no_interrupt_flag)
{
	struct vnull *v = setup(8, EVENT_IDX);

	vdrv_avail_flags_set(&v->d, 0, VRING_AVAIL_F_NO_INTERRUPT);
	vdrv_used_event_set(&v->d, 0, 0);
	one_desc(v, 0, buf(v, 16), 16, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	virtq_push(vq0(v), chain.head, 0);
	CHECK(virtq_publish(vq0(v)));
	vnull_free(v);
}

TEST(notify_disable_sets_no_notify_and_enable_clears_it)
{
	struct vnull *v = setup(8, 0);

	virtq_notify_disable(vq0(v));
	CHECK_EQ(vdrv_used_flags(&v->d, 0), VRING_USED_F_NO_NOTIFY);
	CHECK(!virtq_notify_enable(vq0(v)));
	CHECK_EQ(vdrv_used_flags(&v->d, 0), 0);
	vnull_free(v);
}

TEST(notify_enable_with_event_idx_sets_avail_event)
{
	struct vnull *v = setup(8, EVENT_IDX);
	uint64_t a = buf(v, 16);

	one_desc(v, 0, a, 16, 0);
	one_desc(v, 1, a, 16, 0);
	virtq_notify_disable(vq0(v));
	CHECK_EQ(vdrv_used_flags(&v->d, 0), 0);  /* EVENT_IDX: flags unused */
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK(!virtq_notify_enable(vq0(v)));
	CHECK_EQ(vdrv_avail_event(&v->d, 0), 2);
	vnull_free(v);
}

/* Whether a Linux driver that moved avail.idx from old to new kicks
 * (vring_need_event in virtqueue_kick_prepare_split). */
static bool driver_kicks(uint16_t avail_event, uint16_t new_idx, uint16_t old)
{
	return (uint16_t)(new_idx - avail_event - 1) < (uint16_t)(new_idx - old);
}

/* A device that turns notifications back off right after turning them on
 * (its poll after a drain) gets no kick for anything the driver adds
 * meanwhile, up to a full ring: only virtq_notify_enable asks for one.
 * (Leaving avail_event where the enable put it, the driver's very next
 * buffer would cross it.) */
TEST(notify_disable_with_event_idx_stops_kicks_right_after_an_enable)
{
	struct vnull *v = setup(8, EVENT_IDX);
	uint64_t a = buf(v, 16);
	uint16_t old;

	one_desc(v, 0, a, 16, 0);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK(!virtq_notify_enable(vq0(v)));
	CHECK_EQ(vdrv_avail_event(&v->d, 0), 1);
	virtq_notify_disable(vq0(v));
	old = v->d.q[0].avail_idx;
	for (uint16_t i = 1; i < 8; i++) {         /* the ring's other 7 slots */
		one_desc(v, i, a, 16, 0);
		CHECK(!driver_kicks(vdrv_avail_event(&v->d, 0), v->d.q[0].avail_idx, old));
	}
	/* Turned back on with buffers waiting: the re-check says so, and the
	 * driver's next buffer is kicked again. */
	CHECK(virtq_notify_enable(vq0(v)));
	for (uint16_t i = 1; i < 8; i++)
		CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK(!virtq_notify_enable(vq0(v)));
	old = v->d.q[0].avail_idx;
	one_desc(v, 0, a, 16, 0);
	CHECK(driver_kicks(vdrv_avail_event(&v->d, 0), v->d.q[0].avail_idx, old));
	vnull_free(v);
}

TEST(notify_enable_returns_true_when_buffers_raced_in)
{
	/* Device drained with kicks disabled; the driver adds a buffer (and,
	 * seeing NO_NOTIFY / an old avail_event, does not kick) before the
	 * device re-enables: enable must report it so the device re-drains. */
	for (int ev = 0; ev < 2; ev++) {
		struct vnull *v = setup(8, ev ? EVENT_IDX : 0);
		uint64_t a = buf(v, 16);

		one_desc(v, 0, a, 16, 0);
		virtq_notify_disable(vq0(v));
		CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
		CHECK_EQ(virtq_pop(vq0(v), &chain), 0);
		one_desc(v, 1, a, 16, 0);               /* the race */
		CHECK(virtq_notify_enable(vq0(v)));
		CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
		CHECK(!virtq_notify_enable(vq0(v)));
		vnull_free(v);
	}
}

/* virtq_avail_count: the entries the driver made available and the device
 * has not popped, never more than the ring holds (a driver whose avail.idx
 * ran ahead by more is caught by virtq_pop, not here). */
TEST(avail_count_counts_unpopped_entries_up_to_the_ring_size)
{
	struct vnull *v = setup(8, 0);
	uint64_t a = buf(v, 16);
	unsigned i;

	CHECK_EQ(virtq_avail_count(vq0(v)), 0);
	for (i = 0; i < 3; i++)
		one_desc(v, (uint16_t)i, a, 16, 0);
	CHECK_EQ(virtq_avail_count(vq0(v)), 3);
	CHECK_EQ(virtq_pop(vq0(v), &chain), 1);
	CHECK_EQ(virtq_avail_count(vq0(v)), 2);
	vdrv_avail_idx_set(&v->d, 0, (uint16_t)(vdrv_avail_idx(&v->d, 0) + 40));
	CHECK_EQ(virtq_avail_count(vq0(v)), 8);
	vnull_free(v);
}
