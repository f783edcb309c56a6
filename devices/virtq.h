/* Virtqueue, device side: split ring (virtio 1.2 §2.7) and packed ring
 * (§2.8, VIRTIO_F_RING_PACKED) behind one API; `packed` (set by
 * virtq_enable from the negotiated features) selects the layout, so a device
 * model (virtio-blk) is the same code on both.
 *
 * Ownership: the transport fills the configuration fields (size, addresses)
 * and calls virtq_enable/virtq_reset while the queue is NOT started. Between
 * ops->queue_start and ops->queue_stop, the queue's owning thread is the only
 * user of everything below: no locks on the rings.
 *
 * Every guest-controlled value is validated: a broken ring makes virtq_pop
 * return a negative errno and the caller puts the device in NEEDS_RESET
 * (virtio_dev_needs_reset) and stops consuming the queue. */
#ifndef MVM_VIRTQ_H
#define MVM_VIRTQ_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

/* A feature bit as a mask (virtio 1.2 §2.2): the ring's features are
 * negotiated bits too, so the mask lives on this floor, below the device
 * core (devices/virtio.h), which uses it as well. */
#define VIRTIO_BIT(b) (1ULL << (b))

#include "vmm/base/guest_mem.h"

/* Largest QueueNumMax any device may offer (size of the in-flight bitmap). */
#define VIRTQ_MAX_SIZE 1024
/* Most buffers (descriptors, direct + indirect) one chain may have. Devices
 * must advertise limits that keep valid requests within it (virtio-blk:
 * seg_max <= VIRTQ_MAX_CHAIN - 2); a longer chain is a guest error (-E2BIG). */
#define VIRTQ_MAX_CHAIN 256

/* Descriptor flags (§2.7.5: VRING_DESC_F_*), ring flags (VRING_AVAIL_F_*,
 * VRING_USED_F_*) and the packed ring's bit numbers (§2.8:
 * VRING_PACKED_DESC_F_AVAIL/USED, VRING_PACKED_EVENT_*) are
 * <linux/virtio_ring.h>'s. */

/* Split ring sizes in bytes for a queue of n entries (including used_event /
 * avail_event, always present in the layout). */
#define VIRTQ_DESC_BYTES(n)  (16ULL * (n))
#define VIRTQ_AVAIL_BYTES(n) (6ULL + 2ULL * (n))
#define VIRTQ_USED_BYTES(n)  (6ULL + 8ULL * (n))
/* Packed ring: descriptor ring of 16-byte descriptors, and the driver / device
 * event suppression structures (le16 off_wrap, le16 flags). */
#define VIRTQ_PACKED_DESC_BYTES(n) (16ULL * (n))
#define VIRTQ_PACKED_EVENT_BYTES   4ULL

struct virtq_chain {
	uint16_t head;                  /* id to hand back to virtq_push (split: head
					 * descriptor index; packed: buffer id) */
	unsigned n;                     /* number of buffers */
	unsigned n_readable;            /* iov[0..n_readable) device-readable, the
					 * rest device-writable (§2.7.4.2 order) */
	uint64_t total_len;             /* sum of len, <= 2^32 */
	/* A buffer of length 0 (host NULL) is in the chain: the chain is
	 * well formed, so it is consumed and its head goes back to the guest,
	 * but no request can use it — the device completes it with used
	 * length 0 and touches none of its buffers (e.g. a zero-length
	 * virtio-blk status descriptor). */
	bool has_empty;
	/* The chain as host memory, made once while walking the descriptors:
	 * each entry is gmem_ptr-checked (wholly inside one RAM region), so a
	 * device hands slices of it straight to readv/writev/io_uring. */
	struct iovec iov[VIRTQ_MAX_CHAIN];
};

struct virtq {
	/* --- configuration: transport-owned, while the queue is not started --- */
	uint16_t max_size;              /* QueueNumMax */
	uint16_t size;                  /* QueueNum */
	bool ready;                     /* QueueReady: enabled by virtq_enable */
	bool packed;                    /* VIRTIO_F_RING_PACKED negotiated */
	uint64_t desc_gpa;              /* descriptor area */
	uint64_t driver_gpa;            /* driver area (split: avail ring;
					 * packed: driver event suppression) */
	uint64_t device_gpa;            /* device area (split: used ring;
					 * packed: device event suppression) */
	unsigned index;                 /* queue number, for logs */

	/* --- runtime: owned by the queue thread once started --- */
	const struct guest_mem *mem;
	uint8_t *desc;                  /* host pointers to the whole validated areas */
	uint8_t *avail;                 /* packed: driver event suppression */
	uint8_t *used;                  /* packed: device event suppression */
	bool event_idx;                 /* VIRTIO_RING_F_EVENT_IDX negotiated */
	bool indirect;                  /* VIRTIO_RING_F_INDIRECT_DESC negotiated */
	/* Split: free-running 16-bit ring indices. Packed: ring positions in
	 * [0, size) with the wrap counters below. */
	uint16_t last_avail;            /* next avail entry / descriptor to consume */
	uint16_t used_idx;              /* used.idx / next used slot, incl. unpublished */
	uint16_t published_used;        /* split: used.idx the guest last saw */
	unsigned inflight_count;
	uint64_t inflight[VIRTQ_MAX_SIZE / 64];  /* heads / ids popped and not yet pushed */

	/* --- packed ring (§2.8) runtime state, same owner --- */
	bool avail_wrap;                /* Driver Ring Wrap Counter expected at last_avail */
	bool used_wrap;                 /* Device Ring Wrap Counter at used_idx */
	uint16_t pending_pos;           /* slot of the first pushed, unpublished used desc */
	uint16_t pending_flags;         /* its flags, stored last by virtq_publish */
	unsigned pending_slots;         /* ring slots pushed since the last publish */
	unsigned inflight_slots;        /* ring slots held by popped, unpushed buffers */
	uint16_t dev_event_flags;       /* shadow of the device event suppression flags */
	uint16_t slots[VIRTQ_MAX_SIZE]; /* per in-flight id: ring slots its chain used */
};

/* Initialise an unconfigured queue (QueueNum = max_size, not ready). */
void virtq_init(struct virtq *vq, unsigned index, uint16_t max_size);
/* Back to the post-init state (device reset). Only when not started. */
void virtq_reset(struct virtq *vq);
/* Validate the configuration and map the rings. features: the negotiated
 * ones (EVENT_IDX, INDIRECT_DESC, RING_PACKED).
 *  split:  size != 0, power of 2, <= max_size; desc/avail/used aligned
 *          16/2/4;
 *  packed: size != 0, <= max_size (any value: §2.8 does not require a power
 *          of 2, nor does Linux's packed ring); descriptor ring aligned 16,
 *          both event suppression structures aligned 4;
 * and every area wholly inside guest RAM (each area in one region). 0,
 * -EINVAL (size, alignment) or -EFAULT (outside RAM); the queue is left
 * disabled on error. */
int virtq_enable(struct virtq *vq, const struct guest_mem *mem, uint64_t features);

/* 1 = a chain was popped, 0 = ring empty, negative errno = the guest broke
 * the ring (the caller then puts the device in NEEDS_RESET):
 *   -EINVAL: avail.idx jumped by more than size; head or next >= size;
 *            packed: buffer id >= size; indirect descriptor without the
 *            feature, with NEXT, nested, or length not a non-zero multiple
 *            of 16 / more entries than size; packed: indirect descriptor
 *            inside a NEXT chain, or NEXT inside an indirect table;
 *            buffer length >= 2^31 (length 0 is accepted, see
 *            has_empty); chain total > 2^32; writable
 *            buffer before a readable one;
 *   -EFAULT: buffer or indirect table not wholly inside one RAM region;
 *   -ELOOP:  descriptor loop / chain longer than the queue size (packed:
 *            longer than the ring slots not held by in-flight buffers);
 *   -E2BIG:  more than VIRTQ_MAX_CHAIN buffers;
 *   -EBUSY:  head / buffer id is still in flight (popped, not pushed).
 * Packed: a descriptor is available only when its AVAIL bit equals the
 * expected Driver Ring Wrap Counter and its USED bit differs (§2.8.1);
 * anything else reads as "ring empty".
 * On error nothing is consumed. */
int virtq_pop(struct virtq *vq, struct virtq_chain *chain);
/* Record a used element (not yet visible to the guest); clears head's
 * in-flight bit. head must come from virtq_pop. Completions may come in any
 * order; packed: the used descriptor goes to the next used slot, which then
 * advances by the number of slots head's chain took (§2.8.21). */
void virtq_push(struct virtq *vq, uint16_t head, uint32_t written_len);
/* Make pushed elements visible (split: release store of used.idx; packed:
 * release store of the first pending used descriptor's flags) and return
 * whether the guest must be notified. Split: EVENT_IDX -> used_event crossed
 * since the last publish; else avail.flags lacks NO_INTERRUPT. Packed: the
 * driver event suppression says ENABLE, or DESC (with EVENT_IDX only) and
 * its off_wrap lies in the slots just published. false when nothing new. */
bool virtq_publish(struct virtq *vq);
/* Kick suppression while draining. disable: NO_NOTIFY in used.flags (without
 * EVENT_IDX; with it, avail_event is simply not advanced); packed: device
 * event flags = DISABLE. enable: re-arm (clear NO_NOTIFY / avail_event =
 * last_avail; packed: ENABLE, or DESC at last_avail with EVENT_IDX), full
 * barrier, re-read avail.idx / the next descriptor: returns true when
 * buffers arrived meanwhile and the caller must drain again (it would
 * otherwise miss a kick the driver suppressed). */
void virtq_notify_disable(struct virtq *vq);
bool virtq_notify_enable(struct virtq *vq);
/* Buffers available and not yet popped (for polling / stats). */
bool virtq_has_work(struct virtq *vq);
/* How many: split, avail entries not yet popped (at most size); packed,
 * descriptors made available, not chains (at most the free slots). For
 * telling whether the driver added buffers, not for popping them. */
unsigned virtq_avail_count(struct virtq *vq);

/* Both sides of a ring at one moment, for diagnosing a stalled queue
 * (--stats at exit; like QEMU's x-query-virtio-queue-status). Indices are
 * split: free-running 16-bit ring indices; packed: positions with the wrap
 * counter in bit 15 (the off_wrap encoding of §2.8.10). The driver's
 * fields are read from guest memory as they are now. */
struct virtq_ring_state {
	bool packed;                    /* the layout: packed or split */
	uint16_t last_avail;            /* the next entry the device will take */
	uint16_t used;                  /* used.idx / used position the guest can see */
	uint16_t avail_pending;         /* made available, not taken (virtq_avail_count) */
	uint16_t in_flight;             /* taken, not handed back */
	/* Driver -> device, its interrupt suppression. split: used_event (EVENT_IDX)
	 * and avail.flags; packed: its event structure's off_wrap and flags. */
	uint16_t driver_event, driver_flags;
	/* Device -> driver, kick suppression as the device left it. split:
	 * avail_event (EVENT_IDX) and used.flags; packed: off_wrap and flags. */
	uint16_t device_event, device_flags;
};
/* Owning thread only (or while the queue is not started); a queue that is
 * not ready reads as all zero. */
void virtq_ring_state(struct virtq *vq, struct virtq_ring_state *st);

/* Where the device stands in a ring, all a snapshot needs of it: the rest
 * is in guest memory. Split: free-running indices (wraps unused); packed:
 * positions with their wrap counters. */
struct virtq_pos {
	uint16_t last_avail, used_idx;
	bool avail_wrap, used_wrap;
};
/* A quiet queue's position (its owner quiesced or stopped): 0, or -EBUSY
 * while buffers are in flight or used ones are unpublished, which a
 * snapshot cannot carry. held >= 0: the one buffer in flight, the last
 * popped, which the device never started (blk: waiting for rate-limit
 * tokens), is given back: the position is the one before its pop, so a
 * queue restored there takes it again (the guest's descriptors still
 * offer it); -EBUSY when it is not the only one in flight or not the
 * last popped. The queue itself is not changed. */
int virtq_get_pos(const struct virtq *vq, int held, struct virtq_pos *p);
/* After virtq_enable and before the queue starts: go on from p. 0, or
 * -EINVAL for a packed position outside the ring. */
int virtq_set_pos(struct virtq *vq, const struct virtq_pos *p);

#endif
