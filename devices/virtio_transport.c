/* The part of a virtio transport that does not depend on its register
 * layout: see virtio_transport.h. */
#include "devices/virtio_transport.h"
#include "vmm/mvm.h"
#include "vmm/base/json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>

#include "vmm/base/log.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"

const struct kv_value vtr_transport_values[] = {
	{ .name = "mmio", .value = MVM_TRANSPORT_MMIO },
	{ .name = "pci", .value = MVM_TRANSPORT_PCI },
	{ .name = "ccw", .value = MVM_TRANSPORT_CCW },
	{ .name = NULL },
};

int vtr_init(struct vtr *t, const struct vtr_ops *ops, struct virtio_dev *dev,
	     const struct virtio_transport_ops *tops, void *transport)
{
	int ret;

	memset(t, 0, sizeof(*t));
	t->ops = ops;
	t->dev = dev;
	snprintf(t->name, sizeof(t->name), "%s", ops->kind);
	ret = pthread_mutex_init(&t->lock, NULL);
	if (ret)
		return -ret;
	dev->transport = transport;
	dev->tops = tops;
	return 0;
}

void vtr_destroy(struct vtr *t)
{
	pthread_mutex_destroy(&t->lock);
}

void vtr_bad_access(struct vtr *t, const char *what, const char *where, uint64_t off,
		    unsigned len, const char *rule)
{
	virtio_guest_warn(t->dev, VIRTIO_GW_ACCESS, "%s (%s): driver made a %u-byte %s at %s "
			  "offset 0x%" PRIx64 "; ignored (%s)", t->dev->ops->name, t->name, len,
			  what, where, off, rule);
}

void vtr_set_status(struct vtr *t, uint8_t val)
{
	virtio_set_status(t->dev, val);
	/* The transport's registers are part of the device reset (§2.1.2,
	 * §4.1.4.3.1, §4.2.3.1): after the core stopped the queues. */
	if (val == 0 && t->ops->reset)
		t->ops->reset(t);
}

void vtr_config_read(struct vtr *t, uint64_t off, uint8_t *data, unsigned len)
{
	if (t->dev->ops->config_read)
		t->dev->ops->config_read(t->dev, off, data, len);
}

void vtr_config_write(struct vtr *t, uint64_t off, const uint8_t *data, unsigned len)
{
	if (t->dev->ops->config_write)
		t->dev->ops->config_write(t->dev, off, data, len);
}

void vtr_kick(struct vtr *t, uint64_t q)
{
	/* EAGAIN only when the counter is saturated: a kick is pending anyway. */
	if (q < t->dev->num_queues)
		eventfd_write(t->dev->queues[q].kick_fd, 1);
}

void vtr_attach(struct vtr *t, struct vm *vm)
{
	t->vm = vm;
	t->dev->log = &vm->log;
	t->dev->sandbox = vm->sandbox;
	t->dev->vm_fd = vm->vm_fd;
}

static int notify_one(struct vtr *t, const struct vtr_notify *n, unsigned q, bool deassign)
{
	uint64_t dm = q;

	return vm_ioeventfd(t->vm, n->space, n->addr + q * n->stride, n->len,
			    n->datamatch ? &dm : NULL, t->dev->queues[q].kick_fd, deassign);
}

int vtr_notify_bind(struct vtr *t, const struct vtr_notify *n)
{
	int ret;

	vtr_notify_unbind(t);
	t->notify = *n;
	while (t->notify_bound < t->dev->num_queues) {
		ret = notify_one(t, n, t->notify_bound, false);
		if (ret) {
			vtr_notify_unbind(t);
			return ret;
		}
		t->notify_bound++;
	}
	return 0;
}

void vtr_notify_unbind(struct vtr *t)
{
	while (t->notify_bound > 0)
		notify_one(t, &t->notify, --t->notify_bound, true);
}

/* ---- the VM's view: stop, stats, destroy (vm_device_ops) ---------------- */

static int vtr_vm_start(void *opaque)
{
	struct vtr *t = opaque;
	int r;

	r = t->ops->start ? t->ops->start(t) : 0;
	if (r)
		return r;
	r = virtio_dev_launch(t->dev);
	if (r && t->ops->stop)
		t->ops->stop(t);
	return r;
}

static void vtr_vm_stop(void *opaque)
{
	struct vtr *t = opaque;

	if (t->ops->stop)
		t->ops->stop(t);
	/* Every started queue stops (ops->queue_stop) before anything is freed;
	 * under the register lock, so no vCPU starts one meanwhile. */
	pthread_mutex_lock(&t->lock);
	virtio_dev_stop(t->dev);
	pthread_mutex_unlock(&t->lock);
	/* Joins the device's threads: not under the lock. */
	virtio_dev_halt(t->dev);
}

static void vtr_vm_quiesce(void *opaque, bool on)
{
	struct vtr *t = opaque;

	virtio_dev_quiesce(t->dev, on);
}

static int vtr_vm_quiesce_wait(void *opaque, uint64_t deadline_ns)
{
	struct vtr *t = opaque;

	return virtio_dev_quiesce_wait(t->dev, deadline_ns);
}

static void vtr_vm_stats(void *opaque, struct json *j)
{
	struct vtr *t = opaque;

	if (t->dev->ops->vacant && t->dev->ops->vacant(t->dev))
		return;
	json_obj_begin(j, NULL);
	json_str(j, "transport", t->ops->kind);
	json_u64(j, "guest_errors", __atomic_load_n(&t->dev->guest_errors, __ATOMIC_RELAXED));
	if (t->ops->stats_json)
		t->ops->stats_json(t, j);
	json_obj_begin(j, "device");
	if (t->dev->ops->stats_json)
		t->dev->ops->stats_json(t->dev, j);
	else
		json_str(j, "kind", t->dev->ops->name);
	json_obj_end(j);
	json_obj_end(j);
}

static void vtr_unbind(struct vtr *t)
{
	vtr_notify_unbind(t);
	if (t->ops->unbind)
		t->ops->unbind(t);
}

static void vtr_vm_destroy(void *opaque)
{
	struct vtr *t = opaque;

	vtr_unbind(t);                  /* uses dev: before it may be freed */
	virtio_dev_destroy(t->dev);     /* ops->destroy may free dev itself */
	t->ops->free(t);
}

/* The device's type, the transport's registers, the core's state and
 * the device's, in one section (the caller's). */
static int vtr_vm_save(void *opaque, struct snap_w *w, char *err, size_t errlen)
{
	struct vtr *t = opaque;
	int ret;

	if (!t->ops->save)
		return err_set(err, errlen, -EOPNOTSUPP, "snapshot: %s (%s): snapshots of "
			       "%s devices are not built yet; give the device transport=pci",
			       t->dev->ops->name, t->name, t->ops->kind);
	snap_put_str(w, t->dev->ops->name);
	snap_put_str(w, t->ops->kind);
	ret = t->ops->save(t, w, err, errlen);
	if (ret)
		return ret;
	pthread_mutex_lock(&t->lock);
	ret = virtio_save(t->dev, w, err, errlen);
	pthread_mutex_unlock(&t->lock);
	return ret;
}

static int vtr_vm_load(void *opaque, struct snap_r *r, char *err, size_t errlen)
{
	struct vtr *t = opaque;
	char name[32], kind[32];
	int ret;

	snap_get_str(r, name, sizeof(name));
	snap_get_str(r, kind, sizeof(kind));
	if (r->err)
		return snap_done(r, err, errlen);
	if (strcmp(name, t->dev->ops->name) || strcmp(kind, t->ops->kind))
		return err_set(err, errlen, -EINVAL, "snapshot: a %s on %s there, a %s on %s "
			       "here; give the devices the snapshot's VM had, in its order", name,
			       kind, t->dev->ops->name, t->ops->kind);
	if (!t->ops->load)
		return err_set(err, errlen, -EOPNOTSUPP, "snapshot: %s devices cannot be "
			       "restored yet", t->ops->kind);
	ret = t->ops->load(t, r, err, errlen);
	if (ret)
		return ret;
	pthread_mutex_lock(&t->lock);
	ret = virtio_load(t->dev, r, err, errlen);
	if (!ret && t->ops->loaded)
		t->ops->loaded(t);
	pthread_mutex_unlock(&t->lock);
	return ret;
}

static const struct vm_device_ops vtr_vm_ops = {
	.kind = "virtio",
	.start = vtr_vm_start,
	.stop = vtr_vm_stop,
	.stats_json = vtr_vm_stats,
	.quiesce = vtr_vm_quiesce,
	.quiesce_wait = vtr_vm_quiesce_wait,
	.destroy = vtr_vm_destroy,
	.save = vtr_vm_save,
	.load = vtr_vm_load,
};

int vtr_register(struct vtr *t)
{
	return vm_add_device(t->vm, &vtr_vm_ops, t);
}

void vtr_abort(struct vtr *t)
{
	struct virtio_dev *dev = t->dev;

	if (t->ops->stop)
		t->ops->stop(t);        /* no queue runs yet: only transport threads */
	vtr_unbind(t);
	dev->tops = NULL;
	dev->transport = NULL;
	t->ops->free(t);
}
