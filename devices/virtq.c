/* Virtqueue, device side: split ring (virtio 1.2 §2.7) and packed ring
 * (§2.8) behind the same API.
 *
 * Memory ordering: the rings are shared with the driver running on other
 * CPUs. 16-bit ring indices/flags are accessed with single atomic loads and
 * stores (the areas are validated 2/4-aligned, so they never tear); ordering
 * uses C11 atomics and fences, each paired below with the Linux driver-side
 * barrier (drivers/virtio/virtio_ring.c) it matches. */
#include "devices/virtq.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <string.h>

/* Split ring field offsets (§2.7.5, §2.7.6, §2.7.8). */
#define AVAIL_FLAGS  0
#define AVAIL_IDX    2
#define AVAIL_RING   4
#define USED_FLAGS   0
#define USED_IDX     2
#define USED_RING    4

static inline uint16_t ring_load16(const uint8_t *p)
{
	return le16toh(__atomic_load_n((const uint16_t *)(const void *)p, __ATOMIC_RELAXED));
}

static inline uint16_t ring_load16_acquire(const uint8_t *p)
{
	return le16toh(__atomic_load_n((const uint16_t *)(const void *)p, __ATOMIC_ACQUIRE));
}

static inline void ring_store16(uint8_t *p, uint16_t v)
{
	__atomic_store_n((uint16_t *)(void *)p, htole16(v), __ATOMIC_RELAXED);
}

static inline void ring_store16_release(uint8_t *p, uint16_t v)
{
	__atomic_store_n((uint16_t *)(void *)p, htole16(v), __ATOMIC_RELEASE);
}

static inline uint8_t *used_event_ptr(struct virtq *vq)   /* avail.ring[size] */
{
	return vq->avail + AVAIL_RING + 2u * vq->size;
}

static inline uint8_t *avail_event_ptr(struct virtq *vq)  /* used.ring[size] */
{
	return vq->used + USED_RING + 8u * vq->size;
}

/* vring_need_event (§2.7.7.2: notify when new_idx has moved past event
 * since old) is <linux/virtio_ring.h>'s. */

void virtq_init(struct virtq *vq, unsigned index, uint16_t max_size)
{
	memset(vq, 0, sizeof(*vq));
	vq->index = index;
	vq->max_size = max_size;
	vq->size = max_size;
}

void virtq_reset(struct virtq *vq)
{
	virtq_init(vq, vq->index, vq->max_size);
}

int virtq_enable(struct virtq *vq, const struct guest_mem *mem, uint64_t features)
{
	uint16_t n = vq->size;
	bool packed = features & VIRTIO_BIT(VIRTIO_F_RING_PACKED);
	uint8_t *desc, *avail, *used;

	vq->ready = false;
	if (n == 0 || n > vq->max_size || n > VIRTQ_MAX_SIZE)
		return -EINVAL;
	if (packed) {
		/* §2.8.10.1 / §2.8.11: descriptor ring 16-aligned, event
		 * suppression structures 4-aligned (read as one 32-bit word). */
		if (vq->desc_gpa % 16 || vq->driver_gpa % 4 || vq->device_gpa % 4)
			return -EINVAL;
		desc = gmem_ptr(mem, vq->desc_gpa, VIRTQ_PACKED_DESC_BYTES(n));
		avail = gmem_ptr(mem, vq->driver_gpa, VIRTQ_PACKED_EVENT_BYTES);
		used = gmem_ptr(mem, vq->device_gpa, VIRTQ_PACKED_EVENT_BYTES);
	} else {
		if (!IS_POW2(n))
			return -EINVAL; /* §2.7: split Queue Size is a power of 2 */
		if (vq->desc_gpa % 16 || vq->driver_gpa % 2 || vq->device_gpa % 4)
			return -EINVAL;
		desc = gmem_ptr(mem, vq->desc_gpa, VIRTQ_DESC_BYTES(n));
		avail = gmem_ptr(mem, vq->driver_gpa, VIRTQ_AVAIL_BYTES(n));
		used = gmem_ptr(mem, vq->device_gpa, VIRTQ_USED_BYTES(n));
	}
	if (!desc || !avail || !used)
		return -EFAULT;
	vq->mem = mem;
	vq->desc = desc;
	vq->avail = avail;
	vq->used = used;
	vq->packed = packed;
	/* §2.8.1: both wrap counters start at 1. */
	vq->avail_wrap = true;
	vq->used_wrap = true;
	vq->pending_pos = 0;
	vq->pending_flags = 0;
	vq->pending_slots = 0;
	vq->inflight_slots = 0;
	/* Not a valid flags value: the first notify_disable/enable writes. */
	vq->dev_event_flags = 0xffff;
	vq->event_idx = features & VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX);
	vq->indirect = features & VIRTIO_BIT(VIRTIO_RING_F_INDIRECT_DESC);
	vq->last_avail = 0;
	vq->used_idx = 0;
	vq->published_used = 0;
	vq->inflight_count = 0;
	memset(vq->inflight, 0, sizeof(vq->inflight));
	vq->ready = true;
	return 0;
}

static inline bool inflight_test(const struct virtq *vq, uint16_t head)
{
	return (vq->inflight[head / 64] >> (head % 64)) & 1;
}

/* Append one descriptor's buffer to the chain after checking it. */
static int chain_add(struct virtq *vq, struct virtq_chain *c, uint64_t addr,
		     uint32_t len, bool writable)
{
	void *host;

	if (len >= (1u << 31))
		return -EINVAL;
	if (!writable && c->n > c->n_readable)
		return -EINVAL;         /* §2.7.4.2: readable after writable */
	if (c->n >= VIRTQ_MAX_CHAIN)
		return -E2BIG;
	if (len == 0) {
		/* Nothing to map; the device returns the chain with used
		 * length 0 (see virtq_chain.has_empty). */
		c->has_empty = true;
		host = NULL;
	} else {
		host = gmem_ptr(vq->mem, addr, len);
		if (!host)
			return -EFAULT;
	}
	c->total_len += len;
	if (c->total_len > (1ULL << 32))
		return -EINVAL;
	c->iov[c->n].iov_base = host;
	c->iov[c->n].iov_len = len;
	c->n++;
	if (!writable)
		c->n_readable = c->n;
	return 0;
}

/* Map an indirect descriptor table (split §2.7.5.3, packed §2.8.7): the
 * feature must be negotiated, the length a non-zero multiple of 16 with at
 * most queue-size entries, and the whole table inside one RAM region.
 * Returns the table and its entry count, or NULL with *err set. */
static const uint8_t *indirect_table(const struct virtq *vq, uint64_t addr, uint32_t len,
				     unsigned *entries, int *err)
{
	const uint8_t *tbl;

	*err = -EINVAL;
	if (!vq->indirect || len == 0 || len % 16 || len / 16 > vq->size)
		return NULL;
	tbl = gmem_ptr(vq->mem, addr, len);
	if (!tbl)
		*err = -EFAULT;
	*entries = len / 16;
	return tbl;
}

/* Walk an indirect table (§2.7.5.3): entries are read from guest memory one
 * at a time (the driver must not change them while the chain is available;
 * a driver that does so only hurts itself, every value is still checked). */
static int walk_indirect(struct virtq *vq, struct virtq_chain *c, uint64_t addr,
			 uint32_t len, unsigned *visited)
{
	const uint8_t *tbl;
	unsigned entries, i = 0, steps = 0;
	int err;

	tbl = indirect_table(vq, addr, len, &entries, &err);
	if (!tbl)
		return err;
	for (;;) {
		const uint8_t *d = tbl + 16u * i;
		uint16_t flags = le16_load(d + 12);
		int ret;

		if (++steps > entries || ++*visited > vq->size)
			return -ELOOP;
		if (flags & VRING_DESC_F_INDIRECT)
			return -EINVAL; /* nested indirect */
		ret = chain_add(vq, c, le64_load(d), le32_load(d + 8),
				flags & VRING_DESC_F_WRITE);
		if (ret)
			return ret;
		if (!(flags & VRING_DESC_F_NEXT))
			return 0;
		i = le16_load(d + 14);
		if (i >= entries)
			return -EINVAL;
	}
}

static int split_pop(struct virtq *vq, struct virtq_chain *c)
{
	uint16_t avail_idx, head, i;
	unsigned visited = 0;

	/* Acquire pairs with the driver's virtio_wmb() in virtqueue_add_split()
	 * between filling descriptors/avail.ring and storing avail.idx: once we
	 * see the new index, the entries it covers are visible. */
	avail_idx = ring_load16_acquire(vq->avail + AVAIL_IDX);
	if (avail_idx == vq->last_avail)
		return 0;
	if ((uint16_t)(avail_idx - vq->last_avail) > vq->size)
		return -EINVAL;
	head = ring_load16(vq->avail + AVAIL_RING + 2u * (vq->last_avail & (vq->size - 1)));
	if (head >= vq->size)
		return -EINVAL;
	if (inflight_test(vq, head))
		return -EBUSY;

	c->head = head;
	c->n = 0;
	c->n_readable = 0;
	c->total_len = 0;
	c->has_empty = false;
	i = head;
	for (;;) {
		const uint8_t *d = vq->desc + 16u * i;
		uint64_t addr = le64_load(d);
		uint32_t len = le32_load(d + 8);
		uint16_t flags = le16_load(d + 12);
		int ret;

		if (++visited > vq->size)
			return -ELOOP;
		if (flags & VRING_DESC_F_INDIRECT) {
			/* §2.7.5.3.1: INDIRECT and NEXT together are invalid; the
			 * WRITE flag of an indirect descriptor is ignored. */
			if (flags & VRING_DESC_F_NEXT)
				return -EINVAL;
			ret = walk_indirect(vq, c, addr, len, &visited);
			if (ret)
				return ret;
			break;
		}
		ret = chain_add(vq, c, addr, len, flags & VRING_DESC_F_WRITE);
		if (ret)
			return ret;
		if (!(flags & VRING_DESC_F_NEXT))
			break;
		i = le16_load(d + 14);
		if (i >= vq->size)
			return -EINVAL;
	}
	vq->inflight[head / 64] |= 1ULL << (head % 64);
	vq->inflight_count++;
	vq->last_avail++;
	return 1;
}

/* ---- packed ring (§2.8) ----
 *
 * Descriptor: le64 addr @0, le32 len @8, le16 id @12, le16 flags @14.
 * The driver makes a buffer available by writing its descriptors, then the
 * first descriptor's flags (AVAIL = its wrap counter, USED = the inverse)
 * after a write barrier. The device marks a buffer used by writing one
 * descriptor (id, len, flags with AVAIL = USED = its wrap counter) at its
 * own used position; the driver reads flags, then (after a read barrier)
 * id and len. */
#define PDESC_LEN   8
#define PDESC_ID    12
#define PDESC_FLAGS 14

static inline bool packed_desc_avail(uint16_t flags, bool wrap)
{
	bool avail = flags & (1u << VRING_PACKED_DESC_F_AVAIL), used = flags & (1u << VRING_PACKED_DESC_F_USED);

	return avail != used && avail == wrap;
}

/* Next ring position, flipping the wrap counter at the end of the ring. */
static inline uint16_t packed_next(const struct virtq *vq, uint16_t pos, bool *wrap)
{
	if (++pos == vq->size) {
		*wrap = !*wrap;
		return 0;
	}
	return pos;
}

/* Indirect table (§2.8.19): len / 16 consecutive packed descriptors; WRITE
 * is their only meaningful flag. Linux never chains inside the table, and
 * the spec reserves NEXT there, so NEXT is treated like a split-ring guest
 * error; INDIRECT there is nesting (§2.8.7). id and the wrap bits are
 * ignored. */
static int packed_walk_indirect(struct virtq *vq, struct virtq_chain *c,
				uint64_t addr, uint32_t len)
{
	const uint8_t *tbl;
	unsigned entries, i;
	int err;

	tbl = indirect_table(vq, addr, len, &entries, &err);
	if (!tbl)
		return err;
	for (i = 0; i < entries; i++) {
		const uint8_t *d = tbl + 16u * i;
		uint16_t flags = le16_load(d + PDESC_FLAGS);
		int ret;

		if (flags & (VRING_DESC_F_INDIRECT | VRING_DESC_F_NEXT))
			return -EINVAL;
		ret = chain_add(vq, c, le64_load(d), le32_load(d + PDESC_LEN),
				flags & VRING_DESC_F_WRITE);
		if (ret)
			return ret;
	}
	return 0;
}

static int packed_pop(struct virtq *vq, struct virtq_chain *c)
{
	uint16_t pos = vq->last_avail, flags, id;
	bool wrap = vq->avail_wrap;
	unsigned nslots = 0, room = vq->size - vq->inflight_slots;
	const uint8_t *d = vq->desc + 16u * pos;

	/* Acquire pairs with the driver's virtio_wmb() in virtqueue_add_packed()
	 * before it stores the first descriptor's flags: once the head reads as
	 * available, the whole chain (and its indirect table) is visible. Only
	 * the head's wrap bits matter (§2.8.6: the driver writes the head's
	 * flags last); the rest of the chain follows from NEXT. */
	flags = ring_load16_acquire(d + PDESC_FLAGS);
	if (!packed_desc_avail(flags, vq->avail_wrap))
		return 0;

	c->n = 0;
	c->n_readable = 0;
	c->total_len = 0;
	c->has_empty = false;
	for (;;) {
		int ret;

		/* A chain may only use slots the device does not hold: more
		 * than that is a chain longer than the ring, or one that
		 * overwrote buffers still in flight. Bounds the walk too. */
		if (++nslots > room)
			return -ELOOP;
		if (flags & VRING_DESC_F_INDIRECT) {
			/* §2.8.7: an indirect descriptor is a buffer's only
			 * descriptor: not after NEXT, not with NEXT. */
			if (nslots > 1 || (flags & VRING_DESC_F_NEXT))
				return -EINVAL;
			ret = packed_walk_indirect(vq, c, le64_load(d), le32_load(d + PDESC_LEN));
			if (ret)
				return ret;
			break;
		}
		ret = chain_add(vq, c, le64_load(d), le32_load(d + PDESC_LEN),
				flags & VRING_DESC_F_WRITE);
		if (ret)
			return ret;
		if (!(flags & VRING_DESC_F_NEXT))
			break;
		pos = packed_next(vq, pos, &wrap);
		d = vq->desc + 16u * pos;
		flags = le16_load(d + PDESC_FLAGS);
	}
	/* §2.8.6: the buffer id is in the chain's last descriptor (Linux
	 * writes it in every one). */
	id = le16_load(d + PDESC_ID);
	if (id >= vq->size)
		return -EINVAL;
	if (inflight_test(vq, id))
		return -EBUSY;

	c->head = id;
	vq->inflight[id / 64] |= 1ULL << (id % 64);
	vq->inflight_count++;
	vq->slots[id] = (uint16_t)nslots;
	vq->inflight_slots += nslots;
	vq->last_avail = packed_next(vq, pos, &wrap);
	vq->avail_wrap = wrap;
	return 1;
}

static void packed_push(struct virtq *vq, uint16_t head, uint32_t written_len)
{
	uint8_t *d = vq->desc + 16u * vq->used_idx;
	uint16_t flags = vq->used_wrap ? ((1u << VRING_PACKED_DESC_F_AVAIL) | (1u << VRING_PACKED_DESC_F_USED)) : 0;
	unsigned n = 1;

	if (head < vq->size && inflight_test(vq, head)) {
		vq->inflight[head / 64] &= ~(1ULL << (head % 64));
		vq->inflight_count--;
		n = vq->slots[head];
		vq->inflight_slots -= n;
	}
	/* The slot was consumed by virtq_pop (used_idx never passes
	 * last_avail), so the driver does not look at it until its flags say
	 * used. addr is left alone (§2.8.5: not written by the device). */
	le16_store(d + PDESC_ID, head);
	le32_store(d + PDESC_LEN, written_len);
	if (vq->pending_slots == 0) {
		/* First of a batch: its flags are stored last, by publish. */
		vq->pending_pos = vq->used_idx;
		vq->pending_flags = flags;
	} else {
		/* Later ones: the driver reads used descriptors in ring order
		 * and stops at the first one not yet used, so these become
		 * visible with the first one's release store. */
		ring_store16(d + PDESC_FLAGS, flags);
	}
	vq->pending_slots += n;
	/* Skip the slots the chain took: the driver advances its last_used by
	 * the same count for this id (detach_buf_packed). */
	vq->used_idx += n;
	if (vq->used_idx >= vq->size) {
		vq->used_idx -= vq->size;
		vq->used_wrap = !vq->used_wrap;
	}
}

static bool packed_publish(struct virtq *vq)
{
	uint16_t new_pos = vq->used_idx, old, off;
	uint32_t ev;
	unsigned evflags;

	if (vq->pending_slots == 0)
		return false;
	/* Release pairs with the driver's virtio_rmb() in
	 * virtqueue_get_buf_ctx_packed() after it sees the flags say used:
	 * the id and len of this descriptor, and all of every later pending
	 * one, are visible before it. */
	ring_store16_release(vq->desc + 16u * vq->pending_pos + PDESC_FLAGS, vq->pending_flags);
	/* Linearise like Linux's vring_need_event use on packed rings: old is
	 * the position before this batch, possibly "negative" in 16 bits. */
	old = (uint16_t)(new_pos - vq->pending_slots);
	vq->pending_slots = 0;
	/* Full barrier between the flags store and reading the driver event
	 * suppression. Pairs with the driver's virtio_mb() in
	 * virtqueue_poll_packed() (after virtqueue_enable_cb_prepare_packed()
	 * re-armed): either we see its new event, or it sees our used
	 * descriptor and polls it. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* One 32-bit load: off_wrap and flags from the same driver update (the
	 * driver writes off_wrap, virtio_wmb(), then flags). */
	ev = le32toh(__atomic_load_n((const uint32_t *)(const void *)vq->avail, __ATOMIC_RELAXED));
	evflags = (ev >> 16) & 3;
	if (evflags == VRING_PACKED_EVENT_FLAG_DISABLE)
		return false;
	if (evflags != VRING_PACKED_EVENT_FLAG_DESC || !vq->event_idx)
		return true;    /* ENABLE, reserved 3, or DESC without EVENT_IDX */
	off = ev & 0x7fff;
	/* An event in the other lap is in the previous one (the driver never
	 * asks for more than a ring ahead of what it has seen). */
	if (!!(ev & (1u << VRING_PACKED_EVENT_F_WRAP_CTR)) != vq->used_wrap)
		off = (uint16_t)(off - vq->size);
	return vring_need_event(off, new_pos, old);
}

static void packed_event_flags_set(struct virtq *vq, uint16_t flags)
{
	/* Store only on change: the driver reads this line on every kick. */
	if (vq->dev_event_flags == flags)
		return;
	ring_store16(vq->used + 2, flags);
	vq->dev_event_flags = flags;
}

static bool packed_notify_enable(struct virtq *vq)
{
	if (vq->event_idx) {
		/* Kick when the descriptor at last_avail becomes available. The
		 * off_wrap store precedes flags, like the driver's own order. */
		ring_store16(vq->used, (uint16_t)(vq->last_avail |
						  (vq->avail_wrap ? (1u << VRING_PACKED_EVENT_F_WRAP_CTR) : 0)));
		packed_event_flags_set(vq, VRING_PACKED_EVENT_FLAG_DESC);
	} else {
		packed_event_flags_set(vq, VRING_PACKED_EVENT_FLAG_ENABLE);
	}
	/* Full barrier between re-arming and re-reading the next descriptor's
	 * flags. Pairs with the driver's virtio_mb() in
	 * virtqueue_kick_prepare_packed() between its head flags store and its
	 * device event suppression read: either it sees the re-armed event and
	 * kicks, or we see its descriptor. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return packed_desc_avail(ring_load16(vq->desc + 16u * vq->last_avail + PDESC_FLAGS),
				 vq->avail_wrap);
}

/* ---- API: dispatch on the ring layout ---- */

int virtq_pop(struct virtq *vq, struct virtq_chain *chain)
{
	if (!vq->ready)
		return -EINVAL;
	if (vq->packed)
		return packed_pop(vq, chain);
	return split_pop(vq, chain);
}

void virtq_push(struct virtq *vq, uint16_t head, uint32_t written_len)
{
	uint8_t *e;

	if (vq->packed) {
		packed_push(vq, head, written_len);
		return;
	}
	e = vq->used + USED_RING + 8u * (vq->used_idx & (vq->size - 1));

	if (head < vq->size && inflight_test(vq, head)) {
		vq->inflight[head / 64] &= ~(1ULL << (head % 64));
		vq->inflight_count--;
	}
	/* Plain stores: made visible by the release store of used.idx in
	 * virtq_publish(). */
	le32_store(e, head);
	le32_store(e + 4, written_len);
	vq->used_idx++;
}

bool virtq_publish(struct virtq *vq)
{
	uint16_t old = vq->published_used, new_idx = vq->used_idx;

	if (vq->packed)
		return packed_publish(vq);
	if (old == new_idx)
		return false;
	/* Release pairs with the driver's virtio_rmb() in virtqueue_get_buf_ctx_split()
	 * after it reads used.idx: the used elements are visible before the index. */
	ring_store16_release(vq->used + USED_IDX, new_idx);
	vq->published_used = new_idx;
	/* Full barrier between the used.idx store and reading used_event/flags.
	 * Pairs with the driver's virtio_mb() in virtqueue_poll() (after it
	 * writes used_event in virtqueue_enable_cb_prepare_split()): either we
	 * see its new used_event, or it sees our used.idx and polls the buffers. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (vq->event_idx)
		return vring_need_event(ring_load16(used_event_ptr(vq)), new_idx, old);
	return !(ring_load16(vq->avail + AVAIL_FLAGS) & VRING_AVAIL_F_NO_INTERRUPT);
}

void virtq_notify_disable(struct virtq *vq)
{
	if (vq->packed) {
		/* EVENT_IDX or not: DISABLE is honoured by every driver. */
		packed_event_flags_set(vq, VRING_PACKED_EVENT_FLAG_DISABLE);
		return;
	}
	/* With EVENT_IDX the driver kicks only when its avail.idx moves past
	 * avail_event (virtio 1.2 2.7.10). One behind the buffers we took
	 * is past every idx it can reach before we store again (at most a
	 * ring ahead of last_avail): no kick. Merely leaving avail_event
	 * where virtq_notify_enable put it would not do: right after an
	 * enable it equals last_avail, and the driver's next buffer crosses
	 * it (a poll that catches that buffer would still cost a kick, and
	 * a guest a VM exit). */
	if (vq->event_idx)
		ring_store16(avail_event_ptr(vq), (uint16_t)(vq->last_avail - 1));
	else
		ring_store16(vq->used + USED_FLAGS, VRING_USED_F_NO_NOTIFY);
}

bool virtq_notify_enable(struct virtq *vq)
{
	if (vq->packed)
		return packed_notify_enable(vq);
	if (vq->event_idx)
		ring_store16(avail_event_ptr(vq), vq->last_avail);
	else
		ring_store16(vq->used + USED_FLAGS, 0);
	/* Full barrier between re-arming and re-reading avail.idx. Pairs with
	 * the driver's virtio_mb() in virtqueue_kick_prepare_split() between its
	 * avail.idx store and its avail_event/used.flags load: either it sees
	 * the re-armed notification and kicks, or we see its new avail.idx. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return ring_load16(vq->avail + AVAIL_IDX) != vq->last_avail;
}

unsigned virtq_avail_count(struct virtq *vq)
{
	unsigned n = 0, pos;
	bool wrap;

	if (!vq->ready)
		return 0;
	if (!vq->packed) {
		n = (uint16_t)(ring_load16(vq->avail + AVAIL_IDX) - vq->last_avail);
		/* More than a ring's worth is a broken driver: virtq_pop says so. */
		return n > vq->size ? vq->size : n;
	}
	/* Packed: walk the descriptors the driver made available, up to the
	 * slots that popped buffers do not hold. */
	pos = vq->last_avail;
	wrap = vq->avail_wrap;
	while (n + vq->inflight_slots < vq->size &&
	       packed_desc_avail(ring_load16(vq->desc + 16u * pos + PDESC_FLAGS), wrap)) {
		n++;
		if (++pos == vq->size) {
			pos = 0;
			wrap = !wrap;
		}
	}
	return n;
}

bool virtq_has_work(struct virtq *vq)
{
	if (!vq->ready)
		return false;
	if (vq->packed)
		return packed_desc_avail(ring_load16(vq->desc + 16u * vq->last_avail + PDESC_FLAGS),
					 vq->avail_wrap);
	return ring_load16(vq->avail + AVAIL_IDX) != vq->last_avail;
}

int virtq_get_pos(const struct virtq *vq, int held, struct virtq_pos *p)
{
	unsigned id = (unsigned)held, n, last;

	if (vq->pending_slots || (!vq->packed && vq->published_used != vq->used_idx))
		return -EBUSY;
	if (held < 0 ? vq->inflight_count != 0 :
	    id >= vq->size || vq->inflight_count != 1 || !inflight_test(vq, id))
		return -EBUSY;
	*p = (struct virtq_pos){ .last_avail = vq->last_avail, .used_idx = vq->used_idx,
				 .avail_wrap = vq->avail_wrap, .used_wrap = vq->used_wrap };
	if (held < 0)
		return 0;
	/* Given back: the position before it was popped. Only the last
	 * buffer popped can be (a later one, done already, would be served
	 * twice): split, the avail entry before last_avail names it; packed,
	 * the descriptor before last_avail (its chain's last) has its id. */
	if (!vq->packed) {
		p->last_avail = (uint16_t)(vq->last_avail - 1);
		return ring_load16(vq->avail + AVAIL_RING + 2u * (p->last_avail & (vq->size - 1))) ==
		       id ? 0 : -EBUSY;
	}
	n = vq->slots[id];
	if (!n || n > vq->size || vq->inflight_slots != n)
		return -EBUSY;
	last = vq->last_avail ? vq->last_avail - 1u : vq->size - 1u;
	if (le16_load(vq->desc + 16u * last + PDESC_ID) != id)
		return -EBUSY;
	if (n > vq->last_avail) {
		p->last_avail = (uint16_t)(vq->last_avail + vq->size - n);
		p->avail_wrap = !vq->avail_wrap;
	} else {
		p->last_avail = (uint16_t)(vq->last_avail - n);
	}
	return 0;
}

int virtq_set_pos(struct virtq *vq, const struct virtq_pos *p)
{
	if (vq->packed && (p->last_avail >= vq->size || p->used_idx >= vq->size))
		return -EINVAL;
	vq->last_avail = p->last_avail;
	vq->used_idx = vq->published_used = p->used_idx;
	vq->avail_wrap = vq->packed ? p->avail_wrap : true;
	vq->used_wrap = vq->packed ? p->used_wrap : true;
	vq->pending_pos = vq->used_idx;
	return 0;
}

void virtq_ring_state(struct virtq *vq, struct virtq_ring_state *st)
{
	memset(st, 0, sizeof(*st));
	if (!vq->ready)
		return;
	st->avail_pending = (uint16_t)virtq_avail_count(vq);
	st->in_flight = (uint16_t)vq->inflight_count;
	st->packed = vq->packed;
	if (vq->packed) {
		uint16_t wrap = 1u << VRING_PACKED_EVENT_F_WRAP_CTR;
		bool used_wrap = vq->used_wrap;

		st->last_avail = (uint16_t)(vq->last_avail | (vq->avail_wrap ? wrap : 0));
		/* What the guest can see ends at the first pushed, unpublished
		 * slot; the wrap counter flipped after it if the pending slots
		 * run past the end of the ring. */
		st->used = vq->used_idx;
		if (vq->pending_slots) {
			st->used = vq->pending_pos;
			if (vq->pending_pos + vq->pending_slots >= vq->size)
				used_wrap = !used_wrap;
		}
		if (used_wrap)
			st->used |= wrap;
		st->driver_event = ring_load16(vq->avail);
		st->driver_flags = ring_load16(vq->avail + 2);
		st->device_event = ring_load16(vq->used);
		st->device_flags = ring_load16(vq->used + 2);
		return;
	}
	st->last_avail = vq->last_avail;
	st->used = vq->published_used;
	st->driver_event = ring_load16(used_event_ptr(vq));
	st->driver_flags = ring_load16(vq->avail + AVAIL_FLAGS);
	st->device_event = ring_load16(avail_event_ptr(vq));
	st->device_flags = ring_load16(vq->used + USED_FLAGS);
}
