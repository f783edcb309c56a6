/* virtio core: device status state machine and feature negotiation
 * (virtio 1.2 §2.1, §2.2, §3.1). Transport-independent. */
#include "devices/virtio.h"
#include "devices/virtq_worker.h"
#include "vmm/base/util.h"
#include "vmm/base/log.h"
#include "vmm/base/snap.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

int virtio_dev_init(struct virtio_dev *dev, const struct virtio_device_ops *ops,
		    void *priv, const struct guest_mem *mem,
		    unsigned num_queues, uint16_t queue_max)
{
	unsigned q;
	int ret;

	if (num_queues == 0 || num_queues > VIRTIO_MAX_QUEUES ||
	    !IS_POW2(queue_max) || queue_max > VIRTQ_MAX_SIZE)
		return -EINVAL;
	memset(dev, 0, sizeof(*dev));
	dev->ops = ops;
	dev->priv = priv;
	dev->mem = mem;
	dev->num_queues = num_queues;
	dev->vm_fd = -1;
	dev->queues = calloc(num_queues, sizeof(*dev->queues));
	if (!dev->queues) {
		ret = -ENOMEM;
		goto fail;
	}
	for (q = 0; q < num_queues; q++)
		dev->queues[q].kick_fd = -1;
	for (q = 0; q < num_queues; q++) {
		virtq_init(&dev->queues[q].vq, q, queue_max);
		dev->queues[q].kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (dev->queues[q].kick_fd < 0) {
			ret = -errno;
			goto close_fds;
		}
	}
	dev->host_features = (ops->features ? ops->features(dev) : 0) | VIRTIO_CORE_FEATURES;
	return 0;

close_fds:
	for (q = 0; q < num_queues; q++)
		if (dev->queues[q].kick_fd >= 0)
			close(dev->queues[q].kick_fd);
	free(dev->queues);
fail:
	memset(dev, 0, sizeof(*dev));
	return ret;
}

void virtio_dev_stop(struct virtio_dev *dev)
{
	bool any = false;
	unsigned q;

	for (q = 0; q < dev->num_queues; q++)
		any |= dev->queues[q].started;
	/* Every queue thread hears of it first, so that they wind down side
	 * by side; each queue_stop then waits for its own. */
	if (any && dev->ops->queues_stopping)
		dev->ops->queues_stopping(dev);
	for (q = 0; q < dev->num_queues; q++) {
		if (dev->queues[q].started) {
			dev->ops->queue_stop(dev, q);
			dev->queues[q].started = false;
		}
	}
}

void virtio_dev_quiesce(struct virtio_dev *dev, bool on)
{
	struct vqw *w;

	for (w = dev->vqws; w; w = w->dev_next)
		vqw_quiesce(w, on);
}

int virtio_dev_quiesce_wait(struct virtio_dev *dev, uint64_t deadline_ns)
{
	struct vqw *w;
	int r, ret = 0;

	for (w = dev->vqws; w; w = w->dev_next) {
		r = vqw_quiesce_wait(w, deadline_ns);
		if (r && !ret)
			ret = r;
	}
	return ret;
}

int virtio_dev_launch(struct virtio_dev *dev)
{
	int r;

	if (dev->launched || !dev->ops->launch)
		return 0;
	r = dev->ops->launch(dev);
	if (!r)
		dev->launched = true;
	return r;
}

void virtio_dev_halt(struct virtio_dev *dev)
{
	if (!dev->launched)
		return;
	if (dev->ops->halt)
		dev->ops->halt(dev);
	dev->launched = false;
}

void virtio_dev_destroy(struct virtio_dev *dev)
{
	unsigned q;

	if (!dev->queues)
		return;
	virtio_dev_stop(dev);
	virtio_dev_halt(dev);
	for (q = 0; q < dev->num_queues; q++)
		close(dev->queues[q].kick_fd);
	free(dev->queues);
	dev->queues = NULL;
	/* Last: the device may free the memory that holds dev. */
	if (dev->ops->destroy)
		dev->ops->destroy(dev);
}

uint8_t virtio_get_status(const struct virtio_dev *dev)
{
	uint8_t s = __atomic_load_n(&dev->status, __ATOMIC_ACQUIRE);

	if (__atomic_load_n(&dev->needs_reset, __ATOMIC_ACQUIRE))
		s |= VIRTIO_CONFIG_S_NEEDS_RESET;
	return s;
}

void virtio_reset(struct virtio_dev *dev)
{
	unsigned q;

	/* Queue threads first: after queue_stop returns no in-flight request can
	 * complete into guest memory, so ring state may be cleared (§2.1.2:
	 * after reset the device must not touch the rings). */
	virtio_dev_stop(dev);
	if (dev->ops->reset)
		dev->ops->reset(dev);
	for (q = 0; q < dev->num_queues; q++) {
		uint64_t junk;
		virtq_reset(&dev->queues[q].vq);
		/* Drop stale kicks so a restarted queue does not see them. */
		while (read(dev->queues[q].kick_fd, &junk, sizeof(junk)) > 0)
			;
	}
	dev->guest_features = 0;
	__atomic_store_n(&dev->needs_reset, false, __ATOMIC_RELEASE);
	__atomic_store_n(&dev->status, 0, __ATOMIC_RELEASE);
}

static bool features_acceptable(const struct virtio_dev *dev)
{
	if (dev->guest_features & ~virtio_offered_features(dev))
		return false;   /* §2.2.1: a bit never offered */
	if (!virtio_has_feature(dev, VIRTIO_F_VERSION_1))
		return false;   /* legacy interface not supported */
	return true;
}

static void driver_ok(struct virtio_dev *dev)
{
	unsigned q;

	if (dev->tops && dev->tops->dma_allowed && !dev->tops->dma_allowed(dev)) {
		/* A queue thread's first act is reading the avail ring: DMA. */
		virtio_guest_warn(dev, VIRTIO_GW_DMA, "%s: DRIVER_OK while the driver forbids "
				  "the device to access its memory (PCI: bus mastering off); "
				  "no queue started, device needs reset", dev->ops->name);
		virtio_dev_needs_reset(dev);
		return;
	}

	for (q = 0; q < dev->num_queues; q++) {
		int ret;

		if (!dev->queues[q].vq.ready)
			continue;
		ret = dev->ops->queue_start(dev, q);
		if (ret) {
			virtio_guest_warn(dev, VIRTIO_GW_QUEUE_START,
					  "%s: cannot start queue %u: %s; device needs reset",
					  dev->ops->name, q, strerror(-ret));
			virtio_dev_needs_reset(dev);
			continue;
		}
		dev->queues[q].started = true;
		/* One kick per queue: the driver may have made buffers available
		 * before DRIVER_OK without notifying (or its notification arrived
		 * before the thread existed). eventfd write cannot fail here
		 * short of counter overflow, which only means "already kicked". */
		uint64_t one = 1;
		if (write(dev->queues[q].kick_fd, &one, sizeof(one)) < 0) {
			/* EAGAIN: counter saturated, a kick is pending anyway */
		}
	}
}

void virtio_set_status(struct virtio_dev *dev, uint8_t val)
{
	uint8_t old = dev->status, set;

	if (val == 0) {
		virtio_reset(dev);
		return;
	}
	val &= ~VIRTIO_CONFIG_S_NEEDS_RESET;      /* device-owned bit */
	if ((old & val) != old)
		return;                         /* §2.1.1: driver must not clear bits */
	set = val & ~old;
	if (set == 0)
		return;
	if (set & VIRTIO_CONFIG_S_FAILED) {
		/* The driver gave up; nothing else in this write matters. */
		__atomic_store_n(&dev->status, old | VIRTIO_CONFIG_S_FAILED, __ATOMIC_RELEASE);
		return;
	}
	/* §3.1.1 order: ACKNOWLEDGE, DRIVER, FEATURES_OK, DRIVER_OK. */
	if ((val & VIRTIO_CONFIG_S_DRIVER) && !(val & VIRTIO_CONFIG_S_ACKNOWLEDGE))
		return;
	if ((val & VIRTIO_CONFIG_S_FEATURES_OK) && !(val & VIRTIO_CONFIG_S_DRIVER))
		return;
	if ((val & VIRTIO_CONFIG_S_DRIVER_OK) && !(val & VIRTIO_CONFIG_S_FEATURES_OK))
		return;
	if (set & VIRTIO_CONFIG_S_FEATURES_OK) {
		if (!features_acceptable(dev)) {
			/* Leave FEATURES_OK clear (§2.2.2, §3.1.1 step 6): the driver
			 * reads the status back and fails the device. */
			val &= ~(VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
			set = val & ~old;
		}
	}
	__atomic_store_n(&dev->status, val, __ATOMIC_RELEASE);
	if (set & VIRTIO_CONFIG_S_DRIVER_OK)
		driver_ok(dev);
}

/* ---- snapshots ---------------------------------------------------------- */

int virtio_save(struct virtio_dev *dev, struct snap_w *w, char *err, size_t errlen)
{
	unsigned q;

	snap_put_u8(w, __atomic_load_n(&dev->status, __ATOMIC_ACQUIRE));
	snap_put_u8(w, __atomic_load_n(&dev->needs_reset, __ATOMIC_ACQUIRE));
	snap_put_u64(w, dev->guest_features);
	snap_put_u32(w, __atomic_load_n(&dev->config_generation, __ATOMIC_ACQUIRE));
	snap_put_u32(w, dev->num_queues);
	for (q = 0; q < dev->num_queues; q++) {
		const struct virtq *vq = &dev->queues[q].vq;
		struct virtq_pos pos = { 0 };

		bool live = vq->ready && dev->queues[q].started;
		int held = live && dev->ops->queue_held ? dev->ops->queue_held(dev, q) : -1;

		if (live && virtq_get_pos(vq, held, &pos))
			return err_set(err, errlen, -EBUSY, "snapshot: %s queue %u holds %u "
				       "request(s) it has not completed; try again",
				       dev->ops->name, q, vq->inflight_count);
		if (vq->ready && !dev->queues[q].started) {
			pos.avail_wrap = pos.used_wrap = true;
		}
		snap_put_u16(w, vq->size);
		snap_put_u8(w, vq->ready);
		snap_put_u64(w, vq->desc_gpa);
		snap_put_u64(w, vq->driver_gpa);
		snap_put_u64(w, vq->device_gpa);
		snap_put_u16(w, pos.last_avail);
		snap_put_u16(w, pos.used_idx);
		snap_put_u8(w, pos.avail_wrap);
		snap_put_u8(w, pos.used_wrap);
	}
	return dev->ops->save ? dev->ops->save(dev, w, err, errlen) : 0;
}

/* One queue as it was saved. */
struct virtio_saved_queue {
	uint16_t size;
	bool ready;
	uint64_t desc, driver, device;
	struct virtq_pos pos;
};

static int virtio_load_queues(struct virtio_dev *dev, const struct virtio_saved_queue *sq,
			      char *err, size_t errlen)
{
	unsigned q;
	int ret;

	for (q = 0; q < dev->num_queues; q++) {
		struct virtq *vq = &dev->queues[q].vq;

		vq->size = sq[q].size;
		vq->desc_gpa = sq[q].desc;
		vq->driver_gpa = sq[q].driver;
		vq->device_gpa = sq[q].device;
		if (!sq[q].ready)
			continue;
		ret = virtio_queue_set_ready(dev, q, true);
		if (!ret)
			ret = virtq_set_pos(vq, &sq[q].pos);
		if (ret)
			return err_set(err, errlen, -EINVAL, "snapshot: %s queue %u: size %u, "
				       "rings at 0x%llx/0x%llx/0x%llx, position %u/%u: not a queue "
				       "this device takes; the snapshot is damaged", dev->ops->name, q,
				       sq[q].size, (unsigned long long)sq[q].desc,
				       (unsigned long long)sq[q].driver,
				       (unsigned long long)sq[q].device, sq[q].pos.last_avail,
				       sq[q].pos.used_idx);
	}
	return 0;
}

int virtio_load(struct virtio_dev *dev, struct snap_r *r, char *err, size_t errlen)
{
	const uint8_t init = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER;
	struct virtio_saved_queue *sq;
	uint8_t status, needs_reset;
	uint32_t gen, nq;
	uint64_t features;
	unsigned q;
	int ret = 0;

	status = snap_get_u8(r);
	needs_reset = snap_get_u8(r);
	features = snap_get_u64(r);
	gen = snap_get_u32(r);
	nq = snap_get_u32(r);
	if (nq != dev->num_queues)
		return err_set(err, errlen, -EINVAL, "snapshot: %s has %u queues there, %u here; "
			       "give the disk the snapshot's queues=", dev->ops->name, nq,
			       dev->num_queues);
	sq = calloc(nq, sizeof(*sq));
	if (!sq)
		return err_set(err, errlen, -ENOMEM, "snapshot: out of memory");
	for (q = 0; q < nq; q++) {
		sq[q].size = snap_get_u16(r);
		sq[q].ready = snap_get_u8(r);
		sq[q].desc = snap_get_u64(r);
		sq[q].driver = snap_get_u64(r);
		sq[q].device = snap_get_u64(r);
		sq[q].pos.last_avail = snap_get_u16(r);
		sq[q].pos.used_idx = snap_get_u16(r);
		sq[q].pos.avail_wrap = snap_get_u8(r);
		sq[q].pos.used_wrap = snap_get_u8(r);
	}
	if (r->err) {
		ret = snap_done(r, err, errlen);
		goto free_sq;
	}
	/* The device's own part first: a device that differs (another
	 * capacity) is refused before any queue starts. */
	if (dev->ops->load) {
		ret = dev->ops->load(dev, r, err, errlen);
		if (ret)
			goto free_sq;
	}
	__atomic_store_n(&dev->config_generation, gen, __ATOMIC_RELEASE);
	if (status & init)
		virtio_set_status(dev, status & init);
	/* The driver writes its features after DRIVER, and a snapshot may
	 * come before its FEATURES_OK: what the device took of the saved
	 * status says whether it had them (a status it refused, without
	 * ACKNOWLEDGE, has none). */
	if (dev->status & VIRTIO_CONFIG_S_DRIVER) {
		virtio_write_features(dev, 0, (uint32_t)features);
		virtio_write_features(dev, 1, (uint32_t)(features >> 32));
	}
	if (status & VIRTIO_CONFIG_S_FEATURES_OK) {
		virtio_set_status(dev, status & (init | VIRTIO_CONFIG_S_FEATURES_OK));
		if (!(dev->status & VIRTIO_CONFIG_S_FEATURES_OK)) {
			ret = err_set(err, errlen, -EINVAL, "snapshot: %s: the driver's features "
				      "0x%llx are not what this device offers (0x%llx); give the "
				      "device the snapshot's options", dev->ops->name,
				      (unsigned long long)features,
				      (unsigned long long)virtio_offered_features(dev));
			goto free_sq;
		}
		ret = virtio_load_queues(dev, sq, err, errlen);
		if (ret)
			goto free_sq;
	}
	if (!needs_reset && (status & VIRTIO_CONFIG_S_DRIVER_OK))
		virtio_set_status(dev, status & (init | VIRTIO_CONFIG_S_FEATURES_OK |
						 VIRTIO_CONFIG_S_DRIVER_OK));
	if (status & VIRTIO_CONFIG_S_FAILED)
		virtio_set_status(dev, dev->status | VIRTIO_CONFIG_S_FAILED);
	if (needs_reset) {
		/* The driver was told already; it resets the device, which
		 * needs no queue running meanwhile. DRIVER_OK is kept as a
		 * status bit only. */
		__atomic_store_n(&dev->status, dev->status | (status & VIRTIO_CONFIG_S_DRIVER_OK),
				 __ATOMIC_RELEASE);
		__atomic_store_n(&dev->needs_reset, true, __ATOMIC_RELEASE);
	}
free_sq:
	free(sq);
	return ret;
}

uint32_t virtio_read_features(const struct virtio_dev *dev, uint32_t sel)
{
	if (sel > 1)
		return 0;
	return (uint32_t)(virtio_offered_features(dev) >> (32 * sel));
}

void virtio_write_features(struct virtio_dev *dev, uint32_t sel, uint32_t val)
{
	uint64_t mask;

	/* Features are frozen once FEATURES_OK was accepted (§2.2.2). */
	if (sel > 1 || (dev->status & (VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK)))
		return;
	mask = 0xffffffffULL << (32 * sel);
	dev->guest_features = (dev->guest_features & ~mask) | ((uint64_t)val << (32 * sel));
}

int virtio_queue_set_ready(struct virtio_dev *dev, unsigned q, bool ready)
{
	struct virtq *vq;
	int ret;

	if (q >= dev->num_queues)
		return -EINVAL;
	vq = &dev->queues[q].vq;
	if (!(dev->status & VIRTIO_CONFIG_S_FEATURES_OK) ||
	    (dev->status & VIRTIO_CONFIG_S_DRIVER_OK))
		return -EBUSY;
	if (!ready) {
		vq->ready = false;
		return 0;
	}
	ret = virtq_enable(vq, dev->mem, dev->guest_features);
	if (ret) {
		virtio_guest_warn(dev, VIRTIO_GW_QUEUE_CONFIG,
			  "%s: queue %u: invalid configuration (size %u of max %u, "
			  "%s ring, desc 0x%llx, driver area 0x%llx, device area 0x%llx): %s; "
			  "device needs reset",
			  dev->ops->name, q, vq->size, vq->max_size,
			  virtio_has_feature(dev, VIRTIO_F_RING_PACKED) ? "packed" : "split",
			  (unsigned long long)vq->desc_gpa,
			  (unsigned long long)vq->driver_gpa,
			  (unsigned long long)vq->device_gpa,
			  ret == -EFAULT ? "ring outside guest RAM"
					 : "bad size or alignment");
		virtio_dev_needs_reset(dev);
	}
	return ret;
}

void virtio_dev_needs_reset(struct virtio_dev *dev)
{
	if (__atomic_exchange_n(&dev->needs_reset, true, __ATOMIC_ACQ_REL))
		return;                         /* already signalled */
	if (dev->tops && dev->tops->signal_config)
		dev->tops->signal_config(dev);
}

void virtio_config_changed(struct virtio_dev *dev)
{
	__atomic_fetch_add(&dev->config_generation, 1, __ATOMIC_ACQ_REL);
	if (dev->tops && dev->tops->signal_config)
		dev->tops->signal_config(dev);
}

void virtio_guest_warn(struct virtio_dev *dev, unsigned kind, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	__atomic_fetch_add(&dev->guest_errors, 1, __ATOMIC_RELAXED);
	if (__atomic_fetch_or(&dev->guest_warned, 1u << kind, __ATOMIC_RELAXED) & (1u << kind))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_warn(dev->log, "%s (the first of its kind on this device: the rest are only counted, "
		 "as guest_errors in --stats)", msg);
}
