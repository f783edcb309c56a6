/* virtio-blk device (virtio 1.2 §5.2), transport-agnostic.
 *
 * Each virtqueue is served by its own thread that owns the ring, an
 * io_uring (the image registered as a fixed file) and the request slots:
 * one io_uring_enter per drain of the ring, one interrupt per batch. */
#ifndef MVM_VIRTIO_BLK_H
#define MVM_VIRTIO_BLK_H

#include <stddef.h>
#include <stdint.h>

#include "devices/blk_image.h"
#include "devices/virtio.h"
#include "vmm/base/keyval.h"

#define BLK_QUEUE_SIZE_MAX 256     /* QueueNumMax of every request queue */

/* A disk's keys after its path ("PATH[,ro][,serial=ID]..."), over struct
 * mvm_disk: their limits, defaults and help, for mvm_disk_parse,
 * mvm_disk_init, mvm_add_disk's check and mvm --help alike. */
extern const struct kv_table blk_disk_keys;

/* Create the device around an image opened with blk_image_open (taken
 * over, also on failure: closed then), not yet bound to a transport. *out
 * is freed by virtio_dev_destroy(). 0 or -errno with a one-line message. */
int blk_dev_from_image(const struct mvm_disk *o, struct blk_image *img,
		       const struct guest_mem *mem, struct virtio_dev **out, char *err,
		       size_t errlen);

/* A disk device with shape's queues and threads (its I/O threads, how
 * they poll and gather, fixed buffers, the transport) and no image: a
 * hot-plug slot's spare. Its rings' two file slots are empty and it
 * offers a read-write disk of no sectors; blk_fill gives it an image.
 * Made, like any device, while the process has one thread. */
int blk_dev_spare(const struct mvm_disk *shape, const struct guest_mem *mem,
		  struct virtio_dev **out, char *err, size_t errlen);
struct ratelim;
/* Give an empty spare (reset, out of the guest's reach) the image img
 * (taken on success, untouched on failure) and o's options: the path,
 * read-only, serial, id, discard, packed, limits, and its rate-limit
 * group (or NULL); o->queues (what the driver is told) at most the
 * spare's. Its I/O threads put img's descriptors in their rings' slots
 * (no thread or ring is made, so a filtered thread may call), and its
 * counters start from zero. 0 or -errno with a message. */
int blk_fill(struct virtio_dev *dev, struct blk_image *img, const struct mvm_disk *o,
	     struct ratelim *group, char *err, size_t errlen);
/* Take the image away again (the device reset, its queues stopped): the
 * rings' slots emptied, the image closed and unlocked, the group left,
 * the limits lifted. */
void blk_empty(struct virtio_dev *dev);

/* blk_image_open (warnings dropped) + blk_dev_from_image: for tests and
 * the benchmark. */
int blk_dev_new(const struct mvm_disk *o, const struct guest_mem *mem,
		struct virtio_dev **out, char *err, size_t errlen);
/* The same with another block backend (devices/blk_queue.h: the null
 * backend of the benchmark, fault injection in tests); arg goes to its
 * complete(). The backend is part of the device from its creation: the
 * rings' restrictions name its opcodes. */
struct blk_backend_ops;
int blk_dev_new_backend(const struct mvm_disk *o, const struct guest_mem *mem,
			const struct blk_backend_ops *backend, void *arg,
			struct virtio_dev **out, char *err, size_t errlen);

/* Per-queue counters (since the device was created). */
struct blk_queue_stats {
	uint64_t requests;         /* chains popped */
	uint64_t batches;          /* publishes of >= 1 used entry */
	uint64_t enters;           /* io_uring_enter calls */
	uint64_t irqs;             /* queue interrupts signalled */
	uint64_t errors;           /* requests completed with a status other than OK */
	uint64_t bytes_read;
	uint64_t bytes_written;
	uint64_t read_ops;         /* reads and writes that completed OK */
	uint64_t write_ops;
	uint64_t polled;           /* rounds where polling found work (no kick, no sleep) */
	uint64_t poll_preempted;   /* polls given up: the I/O thread lost its CPU */
	uint64_t kicks;            /* guest notifications, plus one at each queue start */
	uint64_t gathers;          /* kicks after which the I/O thread waited for more */
	uint64_t gathered;         /* requests that came during those waits */
	uint64_t fixed;            /* reads and writes on registered guest RAM (fixed-buffers) */
	uint64_t retries;          /* host I/O retried after a wait (-EAGAIN) */
	uint64_t budget_waits;     /* requests that waited for the queue's budget of bytes */
	uint64_t rate_delayed;     /* requests the rate limits held */
	uint64_t rate_wait_us;     /* the time they were held, in all */
	bool ring_valid;           /* the queue's thread has stopped: */
	struct virtq_ring_state ring;   /* the ring as it left it */
};
/* 0 or -EINVAL (not a blk device / bad queue). Any thread. */
int blk_get_queue_stats(struct virtio_dev *dev, unsigned q, struct blk_queue_stats *out);

/* The disk's own rate limits from now on (checked: -EINVAL with a
 * message); a request waiting for tokens is looked at again. Any thread. */
int blk_set_rate(struct virtio_dev *dev, const struct mvm_rate_limit *rate, char *err,
		 size_t errlen);
/* blk_swap_image (devices/blk_queue.h) for the device dev: -EINVAL for
 * one that is not a disk. */
struct blk_image;
int blk_swap(struct virtio_dev *dev, struct blk_image *img, const char *path, char *err,
	     size_t errlen);
/* The disk's image file made size bytes long (ftruncate: grown sparse,
 * or cut), as Cloud Hypervisor's vm.resize-disk does; then the new
 * capacity and a configuration-change interrupt, as blk_swap. The caller
 * quiesced the queues (what was in flight completed on the old size).
 * Refused, with nothing changed: a size that is not a non-zero multiple
 * of 512 (-EINVAL), a read-only disk (-EROFS), a host block device
 * (-EOPNOTSUPP: its size is the host's to change), an empty slot
 * (-ENODEV). Calls ftruncate only. 0 or -errno with a message. */
int blk_resize(struct virtio_dev *dev, uint64_t size, char *err, size_t errlen);
/* Share group's limits too (once, before the device's threads are
 * launched); group must outlive the device. 0 or -errno. */
int blk_set_group(struct virtio_dev *dev, struct ratelim *group);
/* What the requests the disk holds for rate-limit tokens paid (a
 * snapshot gives them back, its group's buckets too). The VM paused. */
void blk_held_cost(struct virtio_dev *dev, uint64_t *bytes, uint64_t *ops);

#endif
