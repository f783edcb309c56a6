/* virtio-mmio transport: binding of the register model to KVM (window and
 * IRQ allocation, ioeventfd per queue, irqfd, command line, teardown). */
#include "devices/virtio_mmio.h"
#include "vmm/vm.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

static void mmio_unbind(struct virtio_mmio *m)
{
	struct virtio_dev *dev = m->dev;

	if (m->irqfd_bound)
		vm_irqfd(m->vm, m->gsi, m->irq_fd, true);
	m->irqfd_bound = false;
	while (m->notify_bound > 0) {
		uint64_t dm = --m->notify_bound;
		vm_ioeventfd(m->vm, m->base + VIRTIO_MMIO_QUEUE_NOTIFY, 4, false, &dm,
			     dev->queues[dm].kick_fd, true);
	}
}

static void mmio_vm_stop(void *opaque)
{
	struct virtio_mmio *m = opaque;

	pthread_mutex_lock(&m->lock);
	virtio_dev_stop(m->dev);
	pthread_mutex_unlock(&m->lock);
}

static void mmio_vm_stats(void *opaque, FILE *out)
{
	struct virtio_mmio *m = opaque;

	if (m->dev->ops->stats_json)
		m->dev->ops->stats_json(m->dev, out);
	else
		fprintf(out, "{\"device\":\"%s\",\"transport\":\"virtio-mmio\","
			"\"base\":\"0x%" PRIx64 "\",\"irq\":%u}",
			m->dev->ops->name, m->base, m->gsi);
}

static void mmio_vm_destroy(void *opaque)
{
	struct virtio_mmio *m = opaque;

	mmio_unbind(m);
	iobus_unregister(&m->vm->mmio, m->base, m);
	virtio_dev_destroy(m->dev);
	virtio_mmio_destroy(m);
	free(m);
}

static const struct vm_device_ops virtio_mmio_vm_ops = {
	.kind = "virtio-mmio",
	.stop = mmio_vm_stop,
	.stats_json = mmio_vm_stats,
	.destroy = mmio_vm_destroy,
};

int virtio_mmio_attach(struct vm *vm, struct virtio_dev *dev)
{
	struct virtio_mmio *m;
	int ret;

	m = malloc(sizeof(*m));
	if (!m)
		return -ENOMEM;
	ret = virtio_mmio_init(m, dev);
	if (ret)
		goto free_m;
	dev->log = &vm->log;
	m->vm = vm;
	ret = vm_alloc_virtio_mmio(vm, &m->base);
	if (ret)
		goto destroy_m;
	ret = vm_alloc_irq(vm, &m->gsi);
	if (ret)
		goto destroy_m;
	ret = iobus_register(&vm->mmio, m->base, VIRTIO_MMIO_WINDOW, &virtio_mmio_io_ops, m);
	if (ret)
		goto destroy_m;
	/* One ioeventfd per queue: a write of q to QueueNotify signals
	 * queues[q].kick_fd inside KVM, waking queue q's thread with no exit to
	 * userspace and no vCPU thread running device code. */
	while (m->notify_bound < dev->num_queues) {
		uint64_t dm = m->notify_bound;

		ret = vm_ioeventfd(vm, m->base + VIRTIO_MMIO_QUEUE_NOTIFY, 4, false, &dm,
				   dev->queues[dm].kick_fd, false);
		if (ret)
			goto unbind;
		m->notify_bound++;
	}
	ret = vm_irqfd(vm, m->gsi, m->irq_fd, false);
	if (ret)
		goto unbind;
	m->irqfd_bound = true;
	ret = vm_cmdline_append(vm, "virtio_mmio.device=4K@0x%" PRIx64 ":%u", m->base, m->gsi);
	if (ret)
		goto unbind;
	ret = vm_add_device(vm, &virtio_mmio_vm_ops, m);
	if (ret)
		goto unbind;
	return 0;

unbind:
	mmio_unbind(m);
	iobus_unregister(&vm->mmio, m->base, m);
destroy_m:
	virtio_mmio_destroy(m);
	dev->tops = NULL;
	dev->transport = NULL;
free_m:
	free(m);
	return ret;
}
