/* Split virtqueue, device side (virtio 1.2 §2.7).
 *
 * Memory ordering: the rings are shared with the driver running on other
 * CPUs. 16-bit ring indices/flags are accessed with single atomic loads and
 * stores (the areas are validated 2/4-aligned, so they never tear); ordering
 * uses C11 atomics and fences, each paired below with the Linux driver-side
 * barrier (drivers/virtio/virtio_ring.c) it matches. */
#include "devices/virtq.h"
#include "devices/virtio.h"
#include "vmm/byteorder.h"
#include "vmm/util.h"

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

/* §2.7.7.2: notify when new_idx has moved past event since old. */
static inline bool vring_need_event(uint16_t event, uint16_t new_idx, uint16_t old)
{
	return (uint16_t)(new_idx - event - 1) < (uint16_t)(new_idx - old);
}

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
	uint8_t *desc, *avail, *used;

	vq->ready = false;
	if (features & VIRTIO_BIT(VIRTIO_F_RING_PACKED))
		return -EINVAL;         /* never offered yet: the packed ring comes later */
	if (n == 0 || !IS_POW2(n) || n > vq->max_size || n > VIRTQ_MAX_SIZE)
		return -EINVAL;
	if (vq->desc_gpa % 16 || vq->driver_gpa % 2 || vq->device_gpa % 4)
		return -EINVAL;
	desc = gmem_ptr(mem, vq->desc_gpa, VIRTQ_DESC_BYTES(n));
	avail = gmem_ptr(mem, vq->driver_gpa, VIRTQ_AVAIL_BYTES(n));
	used = gmem_ptr(mem, vq->device_gpa, VIRTQ_USED_BYTES(n));
	if (!desc || !avail || !used)
		return -EFAULT;
	vq->mem = mem;
	vq->desc = desc;
	vq->avail = avail;
	vq->used = used;
	vq->packed = false;
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

	if (len == 0 || len >= (1u << 31))
		return -EINVAL;
	if (!writable && c->n > c->n_readable)
		return -EINVAL;         /* §2.7.4.2: readable after writable */
	if (c->n >= VIRTQ_MAX_CHAIN)
		return -E2BIG;
	host = gmem_ptr(vq->mem, addr, len);
	if (!host)
		return -EFAULT;
	c->total_len += len;
	if (c->total_len > (1ULL << 32))
		return -EINVAL;
	c->buf[c->n].host = host;
	c->buf[c->n].gpa = addr;
	c->buf[c->n].len = len;
	c->buf[c->n].writable = writable;
	c->n++;
	if (!writable)
		c->n_readable = c->n;
	return 0;
}

/* Walk an indirect table (§2.7.5.3): entries are read from guest memory one
 * at a time (the driver must not change them while the chain is available;
 * a driver that does so only hurts itself, every value is still checked). */
static int walk_indirect(struct virtq *vq, struct virtq_chain *c, uint64_t addr,
			 uint32_t len, unsigned *visited)
{
	const uint8_t *tbl;
	unsigned entries, i = 0, steps = 0;

	if (!vq->indirect)
		return -EINVAL;
	if (len == 0 || len % 16)
		return -EINVAL;
	entries = len / 16;
	if (entries > vq->size)
		return -EINVAL;
	tbl = gmem_ptr(vq->mem, addr, len);
	if (!tbl)
		return -EFAULT;
	for (;;) {
		const uint8_t *d = tbl + 16u * i;
		uint16_t flags = le16_load(d + 12);
		int ret;

		if (++steps > entries || ++*visited > vq->size)
			return -ELOOP;
		if (flags & VIRTQ_DESC_F_INDIRECT)
			return -EINVAL; /* nested indirect */
		ret = chain_add(vq, c, le64_load(d), le32_load(d + 8),
				flags & VIRTQ_DESC_F_WRITE);
		if (ret)
			return ret;
		if (!(flags & VIRTQ_DESC_F_NEXT))
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
	i = head;
	for (;;) {
		const uint8_t *d = vq->desc + 16u * i;
		uint64_t addr = le64_load(d);
		uint32_t len = le32_load(d + 8);
		uint16_t flags = le16_load(d + 12);
		int ret;

		if (++visited > vq->size)
			return -ELOOP;
		if (flags & VIRTQ_DESC_F_INDIRECT) {
			/* §2.7.5.3.1: INDIRECT and NEXT together are invalid; the
			 * WRITE flag of an indirect descriptor is ignored. */
			if (flags & VIRTQ_DESC_F_NEXT)
				return -EINVAL;
			ret = walk_indirect(vq, c, addr, len, &visited);
			if (ret)
				return ret;
			break;
		}
		ret = chain_add(vq, c, addr, len, flags & VIRTQ_DESC_F_WRITE);
		if (ret)
			return ret;
		if (!(flags & VIRTQ_DESC_F_NEXT))
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

int virtq_pop(struct virtq *vq, struct virtq_chain *chain)
{
	if (!vq->ready)
		return -EINVAL;
	/* packed ring: dispatch to packed_pop() here */
	return split_pop(vq, chain);
}

void virtq_push(struct virtq *vq, uint16_t head, uint32_t written_len)
{
	uint8_t *e = vq->used + USED_RING + 8u * (vq->used_idx & (vq->size - 1));

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
	return !(ring_load16(vq->avail + AVAIL_FLAGS) & VIRTQ_AVAIL_F_NO_INTERRUPT);
}

void virtq_notify_disable(struct virtq *vq)
{
	/* With EVENT_IDX the driver kicks only when avail.idx crosses
	 * avail_event; leaving it behind suppresses further kicks. */
	if (!vq->event_idx)
		ring_store16(vq->used + USED_FLAGS, VIRTQ_USED_F_NO_NOTIFY);
}

bool virtq_notify_enable(struct virtq *vq)
{
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

bool virtq_has_work(struct virtq *vq)
{
	return vq->ready && ring_load16(vq->avail + AVAIL_IDX) != vq->last_avail;
}
