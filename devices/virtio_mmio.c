/* virtio-mmio v2 transport (virtio 1.2 §4.2): register model + KVM binding. */
#include "devices/virtio_mmio.h"
#include "vmm/base/snap.h"
#include "vmm/base/json.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"
#include "vmm/base/log.h"
#include "vmm/kvm/vm.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

static void mmio_bad_access(struct virtio_mmio *m, const char *what, uint64_t off,
			    unsigned len)
{
	vtr_bad_access(&m->t, what, "register", off, len, "registers are 32-bit, aligned");
}

/* Queue registers may change only before DRIVER_OK and while the selected
 * queue is not ready (§4.2.3.2); QueueSel past the last queue selects nothing. */
static struct virtq *mmio_writable_queue(struct virtio_mmio *m)
{
	struct virtio_dev *dev = m->t.dev;

	if (m->queue_sel >= dev->num_queues || (dev->status & VIRTIO_CONFIG_S_DRIVER_OK))
		return NULL;
	if (dev->queues[m->queue_sel].vq.ready)
		return NULL;
	return &dev->queues[m->queue_sel].vq;
}

static void set_low(uint64_t *v, uint32_t lo)
{
	*v = (*v & 0xffffffff00000000ULL) | lo;
}

static void set_high(uint64_t *v, uint32_t hi)
{
	*v = (*v & 0xffffffffULL) | ((uint64_t)hi << 32);
}

/* The page's InterruptStatus word: the register's only copy. Atomic
 * operations on it take little-endian operands. */
static uint32_t *mmio_isr(struct virtio_mmio *m)
{
	return (uint32_t *)(void *)(m->regs + VIRTIO_MMIO_INTERRUPT_STATUS);
}

/* What the 32-bit register at off reads: true, or false for a register
 * that cannot be read (write-only or unknown). t.lock held, except for
 * InterruptStatus, Status and ConfigGeneration, which come from atomics. */
static bool mmio_reg(struct virtio_mmio *m, uint64_t off, uint32_t *out)
{
	struct virtio_dev *dev = m->t.dev;
	uint32_t v;

	switch (off) {
	case VIRTIO_MMIO_MAGIC_VALUE:
		v = VIRTIO_MMIO_MAGIC;
		break;
	case VIRTIO_MMIO_VERSION:
		v = 2;
		break;
	case VIRTIO_MMIO_DEVICE_ID:
		v = dev->ops->device_id;
		break;
	case VIRTIO_MMIO_VENDOR_ID:
		v = VIRTIO_MMIO_VENDOR;
		break;
	case VIRTIO_MMIO_DEVICE_FEATURES:
		v = virtio_read_features(dev, m->device_features_sel);
		break;
	case VIRTIO_MMIO_QUEUE_NUM_MAX:
		v = m->queue_sel < dev->num_queues ? dev->queues[m->queue_sel].vq.max_size : 0;
		break;
	case VIRTIO_MMIO_QUEUE_READY:
		v = m->queue_sel < dev->num_queues ? dev->queues[m->queue_sel].vq.ready : 0;
		break;
	case VIRTIO_MMIO_INTERRUPT_STATUS:
		v = le32toh(__atomic_load_n(mmio_isr(m), __ATOMIC_ACQUIRE));
		break;
	case VIRTIO_MMIO_STATUS:
		v = virtio_get_status(dev);
		break;
	case VIRTIO_MMIO_CONFIG_GENERATION:
		v = __atomic_load_n(&dev->config_generation, __ATOMIC_ACQUIRE);
		break;
	default:        /* write-only or unknown */
		return false;
	}
	*out = v;
	return true;
}

static void mmio_page_store(struct virtio_mmio *m, uint64_t off, uint32_t v)
{
	/* Relaxed: a vCPU may read the word meanwhile, and must see either
	 * value whole; what orders the page against the guest is the exit
	 * that follows (the write's) or the interrupt edge (signal_config). */
	__atomic_store_n((uint32_t *)(void *)(m->regs + off), htole32(v), __ATOMIC_RELAXED);
}

/* Bring the register page up to date (see the header). by_writes: also
 * the registers only the driver's writes change, t.lock held. Status,
 * the config space and ConfigGeneration, which other threads change,
 * always; the generation last, so a driver that sees it has the config
 * before it. InterruptStatus never: its word is the register itself. */
static void mmio_regs_publish(struct virtio_mmio *m, bool by_writes)
{
	uint32_t v;
	uint64_t off;

	pthread_mutex_lock(&m->regs_lock);
	if (by_writes) {
		for (off = 0; off < VIRTIO_MMIO_CONFIG; off += 4) {
			if (off == VIRTIO_MMIO_INTERRUPT_STATUS || off == VIRTIO_MMIO_STATUS ||
			    off == VIRTIO_MMIO_CONFIG_GENERATION)
				continue;
			if (!mmio_reg(m, off, &v))
				v = 0;
			mmio_page_store(m, off, v);
		}
	}
	mmio_page_store(m, VIRTIO_MMIO_STATUS, virtio_get_status(m->t.dev));
	/* Word by word, as a driver reads it: each word whole. */
	for (off = VIRTIO_MMIO_CONFIG; off < VIRTIO_MMIO_WINDOW; off += 4) {
		uint8_t w[4] = { 0 };

		vtr_config_read(&m->t, off - VIRTIO_MMIO_CONFIG, w, sizeof(w));
		mmio_page_store(m, off, le32_load(w));
	}
	mmio_reg(m, VIRTIO_MMIO_CONFIG_GENERATION, &v);
	__atomic_store_n((uint32_t *)(void *)(m->regs + VIRTIO_MMIO_CONFIG_GENERATION),
			 htole32(v), __ATOMIC_RELEASE);
	pthread_mutex_unlock(&m->regs_lock);
}

/* The exit path of a guest read (a window that is not mapped, or unit
 * tests): the same values as the page. */
void virtio_mmio_read(void *opaque, uint64_t off, uint8_t *data, unsigned len)
{
	struct virtio_mmio *m = opaque;
	uint32_t v = 0;

	memset(data, 0, len);
	pthread_mutex_lock(&m->t.lock);
	if (off >= VIRTIO_MMIO_CONFIG) {
		vtr_config_read(&m->t, off - VIRTIO_MMIO_CONFIG, data, len);
		goto out;
	}
	if (len != 4 || off % 4 || !mmio_reg(m, off, &v)) {
		mmio_bad_access(m, "read", off, len);
		goto out;
	}
	le32_store(data, v);
out:
	pthread_mutex_unlock(&m->t.lock);
}

void virtio_mmio_write(void *opaque, uint64_t off, const uint8_t *data, unsigned len)
{
	struct virtio_mmio *m = opaque;
	struct virtio_dev *dev = m->t.dev;
	struct virtq *vq;
	uint32_t v;

	pthread_mutex_lock(&m->t.lock);
	if (off >= VIRTIO_MMIO_CONFIG) {
		vtr_config_write(&m->t, off - VIRTIO_MMIO_CONFIG, data, len);
		mmio_regs_publish(m, false);
		goto out;
	}
	if (len != 4 || off % 4) {
		mmio_bad_access(m, "write", off, len);
		goto out;
	}
	v = le32_load(data);
	switch (off) {
	case VIRTIO_MMIO_DEVICE_FEATURES_SEL:
		m->device_features_sel = v;
		break;
	case VIRTIO_MMIO_DRIVER_FEATURES:
		virtio_write_features(dev, m->driver_features_sel, v);
		break;
	case VIRTIO_MMIO_DRIVER_FEATURES_SEL:
		m->driver_features_sel = v;
		break;
	case VIRTIO_MMIO_QUEUE_SEL:
		m->queue_sel = v;
		break;
	case VIRTIO_MMIO_QUEUE_NUM:
		vq = mmio_writable_queue(m);
		if (vq)         /* > 0xffff can never be valid: keep it invalid (0) */
			vq->size = v > 0xffff ? 0 : (uint16_t)v;
		break;
	case VIRTIO_MMIO_QUEUE_READY:
		if (m->queue_sel >= dev->num_queues || v > 1 ||
		    (dev->status & VIRTIO_CONFIG_S_DRIVER_OK) ||
		    dev->queues[m->queue_sel].vq.ready == (v == 1))
			break;
		/* Errors leave the queue not ready and set NEEDS_RESET. */
		virtio_queue_set_ready(dev, m->queue_sel, v == 1);
		break;
	case VIRTIO_MMIO_QUEUE_NOTIFY:
		/* Normally bound to an ioeventfd and never seen here; this path
		 * serves unit tests and value mismatches (bad index: ignored). */
		vtr_kick(&m->t, v);
		goto out;       /* changes no register */
	case VIRTIO_MMIO_INTERRUPT_ACK:
		/* Pairs with mmio_raise's OR: a bit set after the driver read
		 * the register and not in v stays set. */
		__atomic_fetch_and(mmio_isr(m), htole32(~v), __ATOMIC_ACQ_REL);
		goto out;       /* the page's word is the register */
	case VIRTIO_MMIO_STATUS:
		vtr_set_status(&m->t, (uint8_t)v);
		break;
	case VIRTIO_MMIO_QUEUE_DESC_LOW:
	case VIRTIO_MMIO_QUEUE_DESC_HIGH:
	case VIRTIO_MMIO_QUEUE_AVAIL_LOW:
	case VIRTIO_MMIO_QUEUE_AVAIL_HIGH:
	case VIRTIO_MMIO_QUEUE_USED_LOW:
	case VIRTIO_MMIO_QUEUE_USED_HIGH: {
		uint64_t *addr;

		vq = mmio_writable_queue(m);
		if (!vq)
			break;
		if (off < VIRTIO_MMIO_QUEUE_AVAIL_LOW)
			addr = &vq->desc_gpa;
		else if (off < VIRTIO_MMIO_QUEUE_USED_LOW)
			addr = &vq->driver_gpa;
		else
			addr = &vq->device_gpa;
		if (off & 4)
			set_high(addr, v);
		else
			set_low(addr, v);
		break;
	}
	default:        /* read-only or unknown */
		mmio_bad_access(m, "write", off, len);
		goto out;
	}
	mmio_regs_publish(m, true);
out:
	pthread_mutex_unlock(&m->t.lock);
}

const struct io_ops virtio_mmio_io_ops = {
	.read = virtio_mmio_read,
	.write = virtio_mmio_write,
};

static void mmio_raise(struct virtio_mmio *m, uint32_t bit)
{
	uint64_t one = 1;

	/* The status bit is visible before the interrupt edge: the guest's
	 * handler reads InterruptStatus (from the page, or through an exit)
	 * after the irqfd injection. */
	__atomic_fetch_or(mmio_isr(m), htole32(bit), __ATOMIC_ACQ_REL);
	if (write(m->irq_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: counter saturated, an interrupt is pending anyway */
	}
}

static void mmio_signal_queue(struct virtio_dev *dev, unsigned q)
{
	(void)q;
	mmio_raise(dev->transport, VIRTIO_MMIO_INT_VRING);
}

static void mmio_signal_config(struct virtio_dev *dev)
{
	struct virtio_mmio *m = dev->transport;

	/* NEEDS_RESET or a new generation: in the page before the edge.
	 * Any thread, t.lock held or not (regs_lock comes after it). */
	mmio_regs_publish(m, false);
	mmio_raise(m, VIRTIO_MMIO_INT_CONFIG);
}

/* One line for every queue (InterruptStatus says which kind). */
static int mmio_queue_irq(struct virtio_dev *dev, unsigned q)
{
	(void)dev;
	(void)q;
	return 0;
}

const struct virtio_transport_ops virtio_mmio_transport_ops = {
	.signal_queue = mmio_signal_queue,
	.queue_irq = mmio_queue_irq,
	.signal_config = mmio_signal_config,
};

/* Transport state is part of the device reset (§4.2.3.1). */
static void mmio_reset(struct vtr *t)
{
	struct virtio_mmio *m = container_of(t, struct virtio_mmio, t);

	m->device_features_sel = 0;
	m->driver_features_sel = 0;
	m->queue_sel = 0;
	__atomic_store_n(mmio_isr(m), 0, __ATOMIC_RELEASE);
}

static void mmio_unbind(struct vtr *t)
{
	struct virtio_mmio *m = container_of(t, struct virtio_mmio, t);

	if (m->regs_mapped)
		vm_unmap_readonly(t->vm, vm_virtio_mmio_slot(t->vm, m->base));
	m->regs_mapped = false;
	if (m->irqfd_bound)
		vm_irqfd(t->vm, m->gsi, m->irq_fd, true);
	m->irqfd_bound = false;
	if (m->window_bound)
		iobus_unregister(&t->vm->mmio, m->base, m);
	m->window_bound = false;
}

static void mmio_stats_json(struct vtr *t, struct json *j)
{
	struct virtio_mmio *m = container_of(t, struct virtio_mmio, t);

	json_strf(j, "base", "0x%" PRIx64, m->base);
	json_u64(j, "irq", m->gsi);
	json_str(j, "register_reads", m->regs_mapped ? "mapped" : "exit");
}

static void mmio_free(struct vtr *t)
{
	struct virtio_mmio *m = container_of(t, struct virtio_mmio, t);

	virtio_mmio_destroy(m);
	free(m);
}

/* Where the device is (the guest's kernel found it there, from the
 * command line it booted with: a restore must put it at the same window
 * and interrupt), the selects, InterruptStatus. */
static int mmio_save(struct vtr *t, struct snap_w *w, char *err, size_t errlen)
{
	struct virtio_mmio *m = container_of(t, struct virtio_mmio, t);

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&t->lock);
	snap_put_u64(w, m->base);
	snap_put_u32(w, m->gsi);
	snap_put_u32(w, m->device_features_sel);
	snap_put_u32(w, m->driver_features_sel);
	snap_put_u32(w, m->queue_sel);
	snap_put_u32(w, le32toh(__atomic_load_n(mmio_isr(m), __ATOMIC_ACQUIRE)));
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static int mmio_load(struct vtr *t, struct snap_r *r, char *err, size_t errlen)
{
	struct virtio_mmio *m = container_of(t, struct virtio_mmio, t);
	uint64_t base = snap_get_u64(r);
	uint32_t gsi = snap_get_u32(r), dsel = snap_get_u32(r), gsel = snap_get_u32(r);
	uint32_t qsel = snap_get_u32(r), isr = snap_get_u32(r);

	if (r->err)
		return snap_done(r, err, errlen);
	if (base != m->base || gsi != m->gsi)
		return err_set(err, errlen, -EINVAL, "snapshot: a virtio-mmio device at 0x%" PRIx64
			       " (interrupt %u) there, at 0x%" PRIx64 " (interrupt %u) here; give "
			       "the VM the snapshot's devices, in its order", base, gsi, m->base,
			       m->gsi);
	/* Any value: as the driver's writes, which the registers take. */
	pthread_mutex_lock(&t->lock);
	m->device_features_sel = dsel;
	m->driver_features_sel = gsel;
	m->queue_sel = qsel;
	__atomic_store_n(mmio_isr(m), htole32(isr & (VIRTIO_MMIO_INT_VRING |
						     VIRTIO_MMIO_INT_CONFIG)), __ATOMIC_RELEASE);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

/* The register page shows the restored state; an interrupt the guest had
 * not taken (InterruptStatus set) is raised again: a handler that finds
 * nothing new only reads the register. */
static void mmio_loaded(struct vtr *t)
{
	struct virtio_mmio *m = container_of(t, struct virtio_mmio, t);
	uint64_t one = 1;

	mmio_regs_publish(m, true);
	if (__atomic_load_n(mmio_isr(m), __ATOMIC_ACQUIRE) && write(m->irq_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: counter saturated, an interrupt is pending anyway */
	}
}

static const struct vtr_ops mmio_vtr_ops = {
	.kind = "virtio-mmio",
	.reset = mmio_reset,
	.unbind = mmio_unbind,
	.stats_json = mmio_stats_json,
	.free = mmio_free,
	.save = mmio_save,
	.load = mmio_load,
	.loaded = mmio_loaded,
};

int virtio_mmio_init(struct virtio_mmio *m, struct virtio_dev *dev)
{
	int ret;

	memset(m, 0, sizeof(*m));
	/* A page of its own: KVM maps host pages (vm_map_readonly). */
	m->regs = mmap(NULL, VIRTIO_MMIO_WINDOW, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m->regs == MAP_FAILED)
		return -errno;
	ret = pthread_mutex_init(&m->regs_lock, NULL);
	if (ret)
		goto unmap_regs;
	m->irq_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (m->irq_fd < 0) {
		ret = -errno;
		goto destroy_regs_lock;
	}
	ret = vtr_init(&m->t, &mmio_vtr_ops, dev, &virtio_mmio_transport_ops, m);
	if (ret)
		goto close_irq_fd;
	mmio_regs_publish(m, true);     /* no other thread knows m yet */
	return 0;
close_irq_fd:
	close(m->irq_fd);
destroy_regs_lock:
	pthread_mutex_destroy(&m->regs_lock);
unmap_regs:
	munmap(m->regs, VIRTIO_MMIO_WINDOW);
	return ret > 0 ? -ret : ret;
}

void virtio_mmio_destroy(struct virtio_mmio *m)
{
	vtr_destroy(&m->t);
	close(m->irq_fd);
	m->irq_fd = -1;
	pthread_mutex_destroy(&m->regs_lock);
	munmap(m->regs, VIRTIO_MMIO_WINDOW);
	m->regs = NULL;
}

/* Guest reads from the page, without an exit, where this KVM has
 * read-only memory and a host page is the window's size; elsewhere they
 * exit as before. Not an error either way: only slower. */
static void mmio_map_regs(struct virtio_mmio *m, struct vm *vm)
{
	int ret;

	if (sysconf(_SC_PAGESIZE) != VIRTIO_MMIO_WINDOW)
		return;
	ret = vm_map_readonly(vm, vm_virtio_mmio_slot(vm, m->base), m->base, m->regs,
			      VIRTIO_MMIO_WINDOW);
	if (ret == 0) {
		m->regs_mapped = true;
	} else if (ret != -EOPNOTSUPP) {
		log_warn(&vm->log, "%s: cannot map its registers read-only (%s): the guest's "
			 "register reads exit to mvm instead", m->t.name, strerror(-ret));
	}
}

int virtio_mmio_attach(struct vm *vm, struct virtio_dev *dev)
{
	struct virtio_mmio *m;
	uint64_t base;
	int ret;

	m = malloc(sizeof(*m));
	if (!m)
		return -ENOMEM;
	ret = virtio_mmio_init(m, dev);
	if (ret) {
		free(m);
		return ret;
	}
	vtr_attach(&m->t, vm);
	ret = vm_alloc_virtio_mmio(vm, &base);
	if (ret)
		goto abort;
	ret = vm_alloc_irq(vm, &m->gsi);
	if (ret)
		goto abort;
	ret = iobus_register(&vm->mmio, base, VIRTIO_MMIO_WINDOW, &virtio_mmio_io_ops, m);
	if (ret)
		goto abort;
	m->base = base;
	m->window_bound = true;
	snprintf(m->t.name, sizeof(m->t.name), "virtio-mmio at 0x%" PRIx64, base);
	/* One ioeventfd per queue on QueueNotify, matching the queue index. */
	ret = vtr_notify_bind(&m->t, &(struct vtr_notify){
		.space = VM_IO_MMIO, .addr = base + VIRTIO_MMIO_QUEUE_NOTIFY,
		.len = 4, .datamatch = true });
	if (ret)
		goto abort;
	ret = vm_irqfd(vm, m->gsi, m->irq_fd, false);
	if (ret)
		goto abort;
	m->irqfd_bound = true;
	mmio_map_regs(m, vm);
	ret = vm_cmdline_append(vm, "virtio_mmio.device=4K@0x%" PRIx64 ":%u", base, m->gsi);
	if (ret)
		goto abort;
	ret = vtr_register(&m->t);
	if (ret)
		goto abort;
	return 0;
abort:
	vtr_abort(&m->t);
	return ret;
}
