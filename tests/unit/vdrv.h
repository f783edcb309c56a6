/* vdrv: a small virtio driver for unit tests and benchmarks, header-only.
 * Fake guest RAM is a malloc'd buffer registered with gmem_add_region; the
 * driver talks to a device through the virtio-mmio register model
 * (virtio_mmio_read/_write, as Linux's virtio_mmio.c would), lays out split
 * rings in fake RAM, adds direct and indirect chains, kicks through the
 * queue's eventfd and reads the used ring. Device-independent: works for any
 * struct virtio_dev bound with virtio_mmio_init.
 *
 * Typical use:
 *   vdrv_ram_init(&d, 0x1000, 1 << 20);  ...virtio_dev_init(dev, ops, priv, &d.mem, nq, 256)...
 *   vdrv_attach(&d, dev);                 // virtio_mmio_init on d.mmio
 *   vdrv_negotiate(&d, VIRTIO_BIT(VIRTIO_F_VERSION_1) | ...);
 *   vdrv_queue_setup(&d, 0, 128); vdrv_driver_ok(&d);
 *   head = vdrv_add(&d, 0, sg, n, false); vdrv_kick(&d, 0);
 *   while (!vdrv_get_used(&d, 0, &id, &len)) ...
 * Tests that build broken rings use vdrv_desc_set / vdrv_avail_add_head
 * directly.
 *
 * Packed rings (§2.8): when VIRTIO_F_RING_PACKED was negotiated,
 * vdrv_queue_setup lays out a packed ring and vdrv_add / vdrv_get_used work
 * on it the way Linux's virtio_ring.c does (virtqueue_add_packed,
 * virtqueue_get_buf_ctx_packed: buffer ids from a free list, consecutive
 * ring slots, head flags written last after a write barrier, wrap
 * counters). vdrv_packed_* add the event suppression side (enable/disable
 * callbacks, kick_prepare) and vdrv_pdesc_* raw slot access for broken
 * rings. */
#ifndef MVM_TESTS_VDRV_H
#define MVM_TESTS_VDRV_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "devices/virtio.h"
#include "devices/virtio_mmio.h"
#include "devices/virtq.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/guest_mem.h"

#define VDRV_MAX_QUEUES 16

struct vdrv_sg {
	uint64_t gpa;
	uint32_t len;
	bool writable;
};

struct vdrv_queue {
	uint16_t size;
	uint64_t desc, avail, used;     /* ring gpas */
	uint16_t avail_idx;             /* driver's shadow of avail.idx */
	uint16_t last_used;             /* next used index to read */
	uint16_t free_head;             /* free descriptor list, linked through free_next */
	uint16_t num_free;
	uint16_t free_next[VIRTQ_MAX_SIZE]; /* also the chain links of allocated chains */
	uint16_t chain_len[VIRTQ_MAX_SIZE]; /* descriptors used by the chain at head */
	/* packed ring (desc = descriptor ring, avail = driver event
	 * suppression, used = device event suppression); free_next / chain_len
	 * are the buffer-id free list and per-id slot counts, as in Linux */
	bool packed;
	uint16_t next_avail;            /* next ring slot to fill */
	bool avail_wrap;                /* driver's avail wrap counter */
	uint16_t avail_used_flags;      /* AVAIL/USED bits for the current lap */
	bool used_wrap;                 /* driver's used wrap counter (last_used: slot) */
	uint16_t num_added;             /* slots added since the last kick_prepare */
	uint16_t event_flags_shadow;    /* driver event suppression flags written */
	uint64_t ind_table[VIRTQ_MAX_SIZE]; /* per-id indirect table, reused */
	uint16_t ind_cap[VIRTQ_MAX_SIZE];
};

struct vdrv {
	struct guest_mem mem;
	uint8_t *ram;
	uint64_t ram_gpa, ram_size;
	uint64_t brk;                   /* bump allocator in fake RAM */
	struct virtio_dev *dev;
	struct virtio_mmio mmio;
	uint64_t features;              /* negotiated */
	struct vdrv_queue q[VDRV_MAX_QUEUES];
};

/* --- fake RAM --- */
static inline int vdrv_ram_init(struct vdrv *d, uint64_t gpa, uint64_t size)
{
	memset(d, 0, sizeof(*d));
	/* 2 MiB-aligned and THP-eligible like mvm's own guest RAM (gmem_map). */
	d->ram = aligned_alloc(2u << 20, (size + (2u << 20) - 1) & ~(uint64_t)((2u << 20) - 1));
	if (!d->ram)
		return -ENOMEM;
	madvise(d->ram, size, MADV_HUGEPAGE);
	memset(d->ram, 0, size);
	d->ram_gpa = gpa;
	d->ram_size = size;
	d->brk = gpa;
	return gmem_add_region(&d->mem, gpa, size, d->ram);
}

static inline void *vdrv_host(struct vdrv *d, uint64_t gpa)
{
	return d->ram + (gpa - d->ram_gpa);
}

/* Allocate zeroed fake-RAM bytes (never freed; tests are short). */
static inline uint64_t vdrv_alloc(struct vdrv *d, uint64_t size, uint64_t align)
{
	uint64_t gpa = (d->brk + align - 1) & ~(align - 1);

	if (gpa + size > d->ram_gpa + d->ram_size)
		abort();
	d->brk = gpa + size;
	memset(vdrv_host(d, gpa), 0, size);
	return gpa;
}

/* --- registers --- */
static inline uint32_t vdrv_rd(struct vdrv *d, uint64_t off)
{
	uint8_t b[4];

	virtio_mmio_read(&d->mmio, off, b, 4);
	return le32_load(b);
}

static inline void vdrv_wr(struct vdrv *d, uint64_t off, uint32_t v)
{
	uint8_t b[4];

	le32_store(b, v);
	virtio_mmio_write(&d->mmio, off, b, 4);
}

/* As the VM's start does: the transport, then the device's threads
 * (virtio_dev_launch), waiting for DRIVER_OK. */
static inline int vdrv_attach(struct vdrv *d, struct virtio_dev *dev)
{
	int r;

	d->dev = dev;
	r = virtio_mmio_init(&d->mmio, dev);
	if (r)
		return r;
	r = virtio_dev_launch(dev);
	if (r)
		virtio_mmio_destroy(&d->mmio);
	return r;
}

/* After virtio_dev_destroy, as the VM's teardown does: until their
 * threads are stopped, queues signal through the transport. */
static inline void vdrv_detach(struct vdrv *d)
{
	virtio_mmio_destroy(&d->mmio);
}

static inline uint8_t vdrv_status(struct vdrv *d)
{
	return (uint8_t)vdrv_rd(d, VIRTIO_MMIO_STATUS);
}

/* Linux-style negotiation (§3.1.1): reset, ACKNOWLEDGE, DRIVER, read the
 * offered features, write want & offered (or exactly want when `force`),
 * FEATURES_OK, read back. Returns 0, or -EIO when the device refused. */
static inline int vdrv_negotiate_raw(struct vdrv *d, uint64_t want, bool force)
{
	uint64_t offered, f;

	vdrv_wr(d, VIRTIO_MMIO_STATUS, 0);
	vdrv_wr(d, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	vdrv_wr(d, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	vdrv_wr(d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	offered = (uint64_t)vdrv_rd(d, VIRTIO_MMIO_DEVICE_FEATURES) << 32;
	vdrv_wr(d, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	offered |= vdrv_rd(d, VIRTIO_MMIO_DEVICE_FEATURES);
	f = force ? want : (want & offered);
	vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(f >> 32));
	vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	vdrv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)f);
	vdrv_wr(d, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
		VIRTIO_CONFIG_S_FEATURES_OK);
	if (!(vdrv_status(d) & VIRTIO_CONFIG_S_FEATURES_OK))
		return -EIO;
	d->features = f;
	return 0;
}

static inline int vdrv_negotiate(struct vdrv *d, uint64_t want)
{
	return vdrv_negotiate_raw(d, want, false);
}

/* Program queue q's registers with explicit values; returns QueueReady read back. */
static inline uint32_t vdrv_queue_program(struct vdrv *d, unsigned q, uint32_t size,
					  uint64_t desc, uint64_t avail, uint64_t used)
{
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_SEL, q);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_NUM, size);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)desc);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_DESC_HIGH, (uint32_t)(desc >> 32));
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)avail);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_AVAIL_HIGH, (uint32_t)(avail >> 32));
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)used);
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_USED_HIGH, (uint32_t)(used >> 32));
	vdrv_wr(d, VIRTIO_MMIO_QUEUE_READY, 1);
	return vdrv_rd(d, VIRTIO_MMIO_QUEUE_READY);
}

/* Lay out queue q (size entries) in fake RAM and start the driver's view
 * of it afresh, without telling the device: vdrv_queue_setup programs
 * virtio-mmio's registers next; a test on another transport programs its
 * own from d->q[q]'s desc/avail/used. */
static inline void vdrv_queue_layout(struct vdrv *d, unsigned q, uint16_t size)
{
	struct vdrv_queue *vq = &d->q[q];

	memset(vq, 0, sizeof(*vq));
	vq->size = size;
	vq->num_free = size;
	for (unsigned i = 0; i < size; i++)
		vq->free_next[i] = (uint16_t)(i + 1);
	if (d->features & VIRTIO_BIT(VIRTIO_F_RING_PACKED)) {
		vq->packed = true;
		vq->avail_wrap = true;  /* §2.8.1: wrap counters start at 1 */
		vq->used_wrap = true;
		vq->avail_used_flags = (1u << VRING_PACKED_DESC_F_AVAIL);
		vq->desc = vdrv_alloc(d, VIRTQ_PACKED_DESC_BYTES(size), 16);
		vq->avail = vdrv_alloc(d, VIRTQ_PACKED_EVENT_BYTES, 4);
		vq->used = vdrv_alloc(d, VIRTQ_PACKED_EVENT_BYTES, 4);
	} else {
		vq->desc = vdrv_alloc(d, VIRTQ_DESC_BYTES(size), 16);
		vq->avail = vdrv_alloc(d, VIRTQ_AVAIL_BYTES(size), 2);
		vq->used = vdrv_alloc(d, VIRTQ_USED_BYTES(size), 4);
	}
}

/* Lay out queue q (size entries) in fake RAM and enable it. Returns
 * QueueReady as read back (1 on success). */
static inline uint32_t vdrv_queue_setup(struct vdrv *d, unsigned q, uint16_t size)
{
	struct vdrv_queue *vq = &d->q[q];

	vdrv_queue_layout(d, q, size);
	return vdrv_queue_program(d, q, size, vq->desc, vq->avail, vq->used);
}

static inline void vdrv_driver_ok(struct vdrv *d)
{
	vdrv_wr(d, VIRTIO_MMIO_STATUS, vdrv_status(d) | VIRTIO_CONFIG_S_DRIVER_OK);
}

/* --- raw ring access (for building broken rings) --- */
static inline void vdrv_desc_set(struct vdrv *d, unsigned q, uint16_t i, uint64_t addr,
				 uint32_t len, uint16_t flags, uint16_t next)
{
	uint8_t *p = vdrv_host(d, d->q[q].desc + 16ULL * i);

	le64_store(p, addr);
	le32_store(p + 8, len);
	le16_store(p + 12, flags);
	le16_store(p + 14, next);
}

/* Fill one entry of an indirect table at gpa. */
static inline void vdrv_indirect_set(struct vdrv *d, uint64_t table, uint16_t i, uint64_t addr,
				     uint32_t len, uint16_t flags, uint16_t next)
{
	uint8_t *p = vdrv_host(d, table + 16ULL * i);

	le64_store(p, addr);
	le32_store(p + 8, len);
	le16_store(p + 12, flags);
	le16_store(p + 14, next);
}

static inline uint16_t vdrv_avail_idx(struct vdrv *d, unsigned q)
{
	return le16_load(vdrv_host(d, d->q[q].avail + 2));
}

/* Put head in the next avail slot and publish avail.idx (release: the
 * descriptors are written before the index, like virtio_wmb in Linux). */
static inline void vdrv_avail_add_head(struct vdrv *d, unsigned q, uint16_t head)
{
	struct vdrv_queue *vq = &d->q[q];
	uint8_t *ring = vdrv_host(d, vq->avail + 4);

	le16_store(ring + 2u * (vq->avail_idx & (vq->size - 1)), head);
	vq->avail_idx++;
	__atomic_store_n((uint16_t *)vdrv_host(d, vq->avail + 2), htole16(vq->avail_idx),
			 __ATOMIC_RELEASE);
}

/* Set avail.idx to an arbitrary value (bad-input tests). */
static inline void vdrv_avail_idx_set(struct vdrv *d, unsigned q, uint16_t idx)
{
	d->q[q].avail_idx = idx;
	le16_store(vdrv_host(d, d->q[q].avail + 2), idx);
}

static inline void vdrv_avail_flags_set(struct vdrv *d, unsigned q, uint16_t flags)
{
	le16_store(vdrv_host(d, d->q[q].avail), flags);
}

/* used_event lives at avail.ring[size]; avail_event at used.ring[size]. */
static inline void vdrv_used_event_set(struct vdrv *d, unsigned q, uint16_t v)
{
	le16_store(vdrv_host(d, d->q[q].avail + 4 + 2ULL * d->q[q].size), v);
}

static inline uint16_t vdrv_avail_event(struct vdrv *d, unsigned q)
{
	return le16_load(vdrv_host(d, d->q[q].used + 4 + 8ULL * d->q[q].size));
}

static inline uint16_t vdrv_used_flags(struct vdrv *d, unsigned q)
{
	return le16_load(vdrv_host(d, d->q[q].used));
}

static inline uint16_t vdrv_used_idx(struct vdrv *d, unsigned q)
{
	return le16toh(__atomic_load_n((uint16_t *)vdrv_host(d, d->q[q].used + 2),
				       __ATOMIC_ACQUIRE));
}


/* --- packed ring (§2.8), Linux virtio_ring.c style --- */

/* Raw slot access (bad-input tests): descriptor fields at ring slot i. */
static inline void vdrv_pdesc_set(struct vdrv *d, unsigned q, uint16_t i, uint64_t addr,
				  uint32_t len, uint16_t id, uint16_t flags)
{
	uint8_t *p = vdrv_host(d, d->q[q].desc + 16ULL * i);

	le64_store(p, addr);
	le32_store(p + 8, len);
	le16_store(p + 12, id);
	/* flags last, with release: the device's acquire load pairs with it */
	__atomic_store_n((uint16_t *)(void *)(p + 14), htole16(flags), __ATOMIC_RELEASE);
}

static inline uint16_t vdrv_pdesc_flags(struct vdrv *d, unsigned q, uint16_t i)
{
	return le16toh(__atomic_load_n((uint16_t *)vdrv_host(d, d->q[q].desc + 16ULL * i + 14),
				       __ATOMIC_ACQUIRE));
}

static inline uint16_t vdrv_pdesc_id(struct vdrv *d, unsigned q, uint16_t i)
{
	return le16_load(vdrv_host(d, d->q[q].desc + 16ULL * i + 12));
}

static inline uint32_t vdrv_pdesc_len(struct vdrv *d, unsigned q, uint16_t i)
{
	return le32_load(vdrv_host(d, d->q[q].desc + 16ULL * i + 8));
}

/* AVAIL/USED bits that mark a descriptor available in lap `wrap`. */
static inline uint16_t vdrv_pavail_bits(bool wrap)
{
	return wrap ? (1u << VRING_PACKED_DESC_F_AVAIL) : (1u << VRING_PACKED_DESC_F_USED);
}

/* Driver event suppression (driver area): what the device reads to decide
 * on interrupts. Written off_wrap first, then flags, like Linux. */
static inline void vdrv_packed_driver_event_set(struct vdrv *d, unsigned q, uint16_t off_wrap,
						uint16_t flags)
{
	uint8_t *p = vdrv_host(d, d->q[q].avail);

	le16_store(p, off_wrap);
	__atomic_store_n((uint16_t *)(void *)(p + 2), htole16(flags), __ATOMIC_RELEASE);
	d->q[q].event_flags_shadow = flags;
}

/* Device event suppression (device area): flags returned, off_wrap stored. */
static inline uint16_t vdrv_packed_device_event(struct vdrv *d, unsigned q, uint16_t *off_wrap)
{
	uint32_t v = le32toh(__atomic_load_n((uint32_t *)vdrv_host(d, d->q[q].used),
					     __ATOMIC_ACQUIRE));

	if (off_wrap)
		*off_wrap = (uint16_t)v;
	return (uint16_t)(v >> 16);
}

/* virtqueue_add_packed / virtqueue_add_indirect_packed: returns the buffer
 * id, or -ENOSPC. */
static inline int vdrv_add_packed(struct vdrv *d, unsigned q, const struct vdrv_sg *sg,
				  unsigned n, bool indirect)
{
	struct vdrv_queue *vq = &d->q[q];
	unsigned need = indirect ? 1 : n, i;
	uint16_t id = vq->free_head, curr = id, pos = vq->next_avail, head = pos;
	uint16_t head_flags = 0, flags;

	if (n == 0 || need > vq->num_free)
		return -ENOSPC;
	if (indirect) {
		if (vq->ind_cap[id] < n) {
			vq->ind_table[id] = vdrv_alloc(d, 16ULL * n, 16);
			vq->ind_cap[id] = (uint16_t)n;
		}
		for (i = 0; i < n; i++) {
			uint8_t *p = vdrv_host(d, vq->ind_table[id] + 16ULL * i);

			le64_store(p, sg[i].gpa);
			le32_store(p + 8, sg[i].len);
			le16_store(p + 12, 0);
			le16_store(p + 14, sg[i].writable ? VRING_DESC_F_WRITE : 0);
		}
		uint8_t *p = vdrv_host(d, vq->desc + 16ULL * pos);
		le64_store(p, vq->ind_table[id]);
		le32_store(p + 8, 16 * n);
		le16_store(p + 12, id);
		head_flags = VRING_DESC_F_INDIRECT | vq->avail_used_flags;
		if (++pos >= vq->size) {
			pos = 0;
			vq->avail_wrap = !vq->avail_wrap;
			vq->avail_used_flags ^= (1u << VRING_PACKED_DESC_F_AVAIL) | (1u << VRING_PACKED_DESC_F_USED);
		}
		curr = vq->free_next[curr];
	} else {
		for (i = 0; i < n; i++) {
			uint8_t *p = vdrv_host(d, vq->desc + 16ULL * pos);

			flags = vq->avail_used_flags |
				(i + 1 < n ? VRING_DESC_F_NEXT : 0) |
				(sg[i].writable ? VRING_DESC_F_WRITE : 0);
			le64_store(p, sg[i].gpa);
			le32_store(p + 8, sg[i].len);
			le16_store(p + 12, id);
			if (i == 0)
				head_flags = flags;
			else
				le16_store(p + 14, flags);
			if (++pos >= vq->size) {
				pos = 0;
				vq->avail_wrap = !vq->avail_wrap;
				vq->avail_used_flags ^= (1u << VRING_PACKED_DESC_F_AVAIL) | (1u << VRING_PACKED_DESC_F_USED);
			}
			curr = vq->free_next[curr];
		}
	}
	vq->num_free -= need;
	vq->next_avail = pos;
	vq->free_head = curr;
	vq->chain_len[id] = need;
	vq->num_added += need;
	/* virtio_wmb() then the head's flags: the device's acquire on them
	 * sees the whole chain. */
	__atomic_store_n((uint16_t *)vdrv_host(d, vq->desc + 16ULL * head + 14),
			 htole16(head_flags), __ATOMIC_RELEASE);
	return id;
}

static inline bool vdrv_packed_is_used(struct vdrv *d, unsigned q, uint16_t pos, bool wrap)
{
	uint16_t f = vdrv_pdesc_flags(d, q, pos);
	bool avail = f & (1u << VRING_PACKED_DESC_F_AVAIL), used = f & (1u << VRING_PACKED_DESC_F_USED);

	return avail == used && used == wrap;
}

/* virtqueue_get_buf_ctx_packed + detach_buf_packed. 1 (id, len filled), 0
 * when none. A bad id from the device is returned as is (advancing one
 * slot; the caller checks it). With DESC event suppression in force, moves
 * the used event along like Linux (virtio_store_mb). */
static inline int vdrv_get_used_packed(struct vdrv *d, unsigned q, uint32_t *id, uint32_t *len)
{
	struct vdrv_queue *vq = &d->q[q];
	uint16_t pos = vq->last_used, num = 1;

	if (!vdrv_packed_is_used(d, q, pos, vq->used_wrap))   /* acquire */
		return 0;
	*id = vdrv_pdesc_id(d, q, pos);
	*len = vdrv_pdesc_len(d, q, pos);
	if (*id < vq->size && vq->chain_len[*id]) {
		uint16_t tail = (uint16_t)*id;

		num = vq->chain_len[*id];
		for (unsigned i = 1; i < num; i++)
			tail = vq->free_next[tail];
		vq->free_next[tail] = vq->free_head;
		vq->free_head = (uint16_t)*id;
		vq->num_free += num;
		vq->chain_len[*id] = 0;
	}
	pos += num;
	if (pos >= vq->size) {
		pos -= vq->size;
		vq->used_wrap = !vq->used_wrap;
	}
	vq->last_used = pos;
	if (vq->event_flags_shadow == VRING_PACKED_EVENT_FLAG_DESC) {
		le16_store(vdrv_host(d, vq->avail), (uint16_t)(pos | (vq->used_wrap ? (1u << VRING_PACKED_EVENT_F_WRAP_CTR) : 0)));
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	}
	return 1;
}

/* virtqueue_disable_cb_packed. */
static inline void vdrv_packed_disable_cb(struct vdrv *d, unsigned q)
{
	if (d->q[q].event_flags_shadow != VRING_PACKED_EVENT_FLAG_DISABLE)
		vdrv_packed_driver_event_set(d, q, le16_load(vdrv_host(d, d->q[q].avail)),
					     VRING_PACKED_EVENT_FLAG_DISABLE);
}

/* virtqueue_enable_cb_prepare_packed + virtqueue_poll_packed: re-arm
 * interrupts for the next used descriptor (DESC at last_used with
 * EVENT_IDX, else ENABLE), full barrier, and return true when a used
 * descriptor is already there (the caller must poll instead of waiting). */
static inline bool vdrv_packed_enable_cb(struct vdrv *d, unsigned q)
{
	struct vdrv_queue *vq = &d->q[q];
	bool ev = d->features & VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX);

	vdrv_packed_driver_event_set(d, q, (uint16_t)(vq->last_used |
				     (vq->used_wrap ? (1u << VRING_PACKED_EVENT_F_WRAP_CTR) : 0)),
				     ev ? VRING_PACKED_EVENT_FLAG_DESC : VRING_PACKED_EVENT_FLAG_ENABLE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);        /* virtio_mb in virtqueue_poll */
	return vdrv_packed_is_used(d, q, vq->last_used, vq->used_wrap);
}

/* virtqueue_kick_prepare_packed: full barrier, read the device event
 * suppression, decide whether the slots added since the last call need a
 * notification. */
static inline bool vdrv_packed_kick_prepare(struct vdrv *d, unsigned q)
{
	struct vdrv_queue *vq = &d->q[q];
	uint16_t off_wrap, flags, new_pos = vq->next_avail;
	uint16_t old = (uint16_t)(new_pos - vq->num_added), event;

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	flags = vdrv_packed_device_event(d, q, &off_wrap);
	vq->num_added = 0;
	if (flags != VRING_PACKED_EVENT_FLAG_DESC)
		return flags != VRING_PACKED_EVENT_FLAG_DISABLE;
	event = off_wrap & (uint16_t)~(1u << VRING_PACKED_EVENT_F_WRAP_CTR);
	if (!!(off_wrap & (1u << VRING_PACKED_EVENT_F_WRAP_CTR)) != vq->avail_wrap)
		event = (uint16_t)(event - vq->size);
	return (uint16_t)(new_pos - event - 1) < (uint16_t)(new_pos - old);
}

/* --- chains --- */

/* Add a chain of n buffers (readable first, then writable) as direct
 * descriptors, or as one indirect table when `indirect`. Publishes it.
 * Returns the head, or -ENOSPC when the ring has no room. */
static inline int vdrv_add(struct vdrv *d, unsigned q, const struct vdrv_sg *sg,
			   unsigned n, bool indirect)
{
	struct vdrv_queue *vq = &d->q[q];
	unsigned need = indirect ? 1 : n, i;
	uint16_t head = vq->free_head, idx;

	if (vq->packed)
		return vdrv_add_packed(d, q, sg, n, indirect);
	if (n == 0 || need > vq->num_free)
		return -ENOSPC;
	if (indirect) {
		uint64_t table = vdrv_alloc(d, 16ULL * n, 16);

		for (i = 0; i < n; i++)
			vdrv_indirect_set(d, table, i, sg[i].gpa, sg[i].len,
					  (sg[i].writable ? VRING_DESC_F_WRITE : 0) |
					  (i + 1 < n ? VRING_DESC_F_NEXT : 0), i + 1 < n ? i + 1 : 0);
		vdrv_desc_set(d, q, head, table, 16 * n, VRING_DESC_F_INDIRECT, 0);
	} else {
		for (i = 0, idx = head; i < n; i++, idx = vq->free_next[idx])
			vdrv_desc_set(d, q, idx, sg[i].gpa, sg[i].len,
				      (sg[i].writable ? VRING_DESC_F_WRITE : 0) |
				      (i + 1 < n ? VRING_DESC_F_NEXT : 0),
				      i + 1 < n ? vq->free_next[idx] : 0);
	}
	/* Pop `need` descriptors off the free list (their free_next links stay
	 * as the chain's links until the chain is freed). */
	for (i = 0, idx = head; i < need; i++)
		idx = i + 1 < need ? vq->free_next[idx] : idx;
	vq->free_head = vq->free_next[idx];
	vq->num_free -= need;
	vq->chain_len[head] = need;
	vdrv_avail_add_head(d, q, head);
	return head;
}

/* Notify the device like a QueueNotify write caught by KVM_IOEVENTFD. */
static inline void vdrv_kick(struct vdrv *d, unsigned q)
{
	uint64_t one = 1;

	if (write(d->dev->queues[q].kick_fd, &one, sizeof(one)) != sizeof(one))
		abort();
}

/* Take one used element: 1 (id, len filled) or 0 when none; frees the
 * chain's descriptors (completions may come in any order). */
static inline int vdrv_get_used(struct vdrv *d, unsigned q, uint32_t *id, uint32_t *len)
{
	struct vdrv_queue *vq = &d->q[q];
	const uint8_t *e;

	if (vq->packed)
		return vdrv_get_used_packed(d, q, id, len);
	if (vdrv_used_idx(d, q) == vq->last_used)   /* acquire: pairs with the device's release */
		return 0;
	e = vdrv_host(d, vq->used + 4 + 8ULL * (vq->last_used & (vq->size - 1)));
	*id = le32_load(e);
	*len = le32_load(e + 4);
	vq->last_used++;
	if (*id < vq->size && vq->chain_len[*id]) {
		uint16_t tail = (uint16_t)*id;

		for (unsigned i = 1; i < vq->chain_len[*id]; i++)
			tail = vq->free_next[tail];
		vq->free_next[tail] = vq->free_head;
		vq->free_head = (uint16_t)*id;
		vq->num_free += vq->chain_len[*id];
		vq->chain_len[*id] = 0;
	}
	return 1;
}

/* Consume a pending interrupt: returns the InterruptStatus bits that were
 * set and ACKs them (0 when the irq eventfd had not fired). */
static inline uint32_t vdrv_irq(struct vdrv *d)
{
	uint64_t cnt;
	uint32_t isr;

	if (read(d->mmio.irq_fd, &cnt, sizeof(cnt)) != sizeof(cnt))
		return 0;
	isr = vdrv_rd(d, VIRTIO_MMIO_INTERRUPT_STATUS);
	vdrv_wr(d, VIRTIO_MMIO_INTERRUPT_ACK, isr);
	return isr;
}

#endif
