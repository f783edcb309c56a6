#include "devices/virtio_pci.h"
#include "vmm/base/json.h"
#include "vmm/base/log.h"
#include "vmm/base/snap.h"
#include "vmm/kvm/sandbox.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"
#include "vmm/kvm/vm_pci.h"

static const struct vtr_ops vp_vtr_ops;

/* The function's own kinds of guest-triggered trouble (pci_guest_warn). */
enum { VP_GW_NOTIFY = PCI_GW_FUNCTION };

/* ---- common cfg (§4.1.4.3) ---------------------------------------------- */

struct common_field {
	uint8_t off, size;
};

static const struct common_field common_fields[] = {
	{ VIRTIO_PCI_COMMON_DFSELECT, 4 }, { VIRTIO_PCI_COMMON_DF, 4 },
	{ VIRTIO_PCI_COMMON_GFSELECT, 4 }, { VIRTIO_PCI_COMMON_GF, 4 },
	{ VIRTIO_PCI_COMMON_MSIX, 2 }, { VIRTIO_PCI_COMMON_NUMQ, 2 },
	{ VIRTIO_PCI_COMMON_STATUS, 1 }, { VIRTIO_PCI_COMMON_CFGGENERATION, 1 },
	{ VIRTIO_PCI_COMMON_Q_SELECT, 2 }, { VIRTIO_PCI_COMMON_Q_SIZE, 2 },
	{ VIRTIO_PCI_COMMON_Q_MSIX, 2 }, { VIRTIO_PCI_COMMON_Q_ENABLE, 2 },
	{ VIRTIO_PCI_COMMON_Q_NOFF, 2 }, { VIRTIO_PCI_COMMON_Q_DESCLO, 8 },
	{ VIRTIO_PCI_COMMON_Q_AVAILLO, 8 }, { VIRTIO_PCI_COMMON_Q_USEDLO, 8 },
};

/* The field an access hits: its own width, or one aligned dword of a
 * 64-bit field (Linux writes queue addresses as two dwords). *shift is the
 * bit position of the access inside the field. */
static const struct common_field *common_field_at(uint64_t off, unsigned len, unsigned *shift)
{
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(common_fields); i++) {
		const struct common_field *f = &common_fields[i];
		if (off == f->off && len == f->size) {
			*shift = 0;
			return f;
		}
		if (f->size == 8 && len == 4 && (off == f->off || off == f->off + 4u)) {
			*shift = (unsigned)(off - f->off) * 8;
			return f;
		}
	}
	return NULL;
}

static void log_bad_access(struct virtio_pci *vp, const char *what, uint64_t off, unsigned len)
{
	vtr_bad_access(&vp->t, what, "common cfg", off, len, "each field has its own width");
}

static uint16_t vector_or_none(struct virtio_pci *vp, uint64_t v)
{
	return v < vp->msix.nvec ? (uint16_t)v : MSIX_NO_VECTOR;
}

static bool queue_selected(struct virtio_pci *vp)
{
	return vp->queue_select < vp->t.dev->num_queues;
}

/* §4.1.4.3.2: the driver configures a queue only before DRIVER_OK and
 * while it is disabled. */
static bool queue_configurable(struct virtio_pci *vp)
{
	return queue_selected(vp) &&
	       !(vp->t.dev->status & VIRTIO_CONFIG_S_DRIVER_OK) &&
	       !vp->t.dev->queues[vp->queue_select].vq.ready;
}

static uint64_t common_read(struct virtio_pci *vp, unsigned foff)
{
	struct virtio_dev *dev = vp->t.dev;
	struct virtq *vq = queue_selected(vp) ? &dev->queues[vp->queue_select].vq : NULL;

	switch (foff) {
	case VIRTIO_PCI_COMMON_DFSELECT: return vp->dfselect;
	case VIRTIO_PCI_COMMON_DF: return virtio_read_features(dev, vp->dfselect);
	case VIRTIO_PCI_COMMON_GFSELECT: return vp->gfselect;
	case VIRTIO_PCI_COMMON_GF:
		return vp->gfselect < 2 ? (uint32_t)(dev->guest_features >> (32 * vp->gfselect)) : 0;
	case VIRTIO_PCI_COMMON_MSIX: return __atomic_load_n(&vp->config_vector, __ATOMIC_RELAXED);
	case VIRTIO_PCI_COMMON_NUMQ: return dev->num_queues;
	case VIRTIO_PCI_COMMON_STATUS: return virtio_get_status(dev);
	case VIRTIO_PCI_COMMON_CFGGENERATION:
		return (uint8_t)__atomic_load_n(&dev->config_generation, __ATOMIC_ACQUIRE);
	case VIRTIO_PCI_COMMON_Q_SELECT: return vp->queue_select;
	}
	if (!vq)
		return 0;       /* queue_select >= num_queues: queue fields read 0 */
	switch (foff) {
	case VIRTIO_PCI_COMMON_Q_SIZE: return vq->size;
	case VIRTIO_PCI_COMMON_Q_MSIX:
		return __atomic_load_n(&vp->t.dev->queues[vp->queue_select].msix_vector, __ATOMIC_RELAXED);
	case VIRTIO_PCI_COMMON_Q_ENABLE: return vq->ready;
	case VIRTIO_PCI_COMMON_Q_NOFF: return vp->queue_select;
	case VIRTIO_PCI_COMMON_Q_DESCLO: return vq->desc_gpa;
	case VIRTIO_PCI_COMMON_Q_AVAILLO: return vq->driver_gpa;
	case VIRTIO_PCI_COMMON_Q_USEDLO: return vq->device_gpa;
	}
	return 0;
}

/* Transport state the device reset (§2.1.2, §4.1.4.3.1) returns to default. */
static void vp_reset(struct vtr *t)
{
	struct virtio_pci *vp = container_of(t, struct virtio_pci, t);
	unsigned q;

	vp->dfselect = vp->gfselect = 0;
	vp->queue_select = 0;
	__atomic_store_n(&vp->config_vector, MSIX_NO_VECTOR, __ATOMIC_RELAXED);
	for (q = 0; q < vp->t.dev->num_queues; q++)
		__atomic_store_n(&vp->t.dev->queues[q].msix_vector, MSIX_NO_VECTOR, __ATOMIC_RELAXED);
	__atomic_store_n(&vp->isr, 0, __ATOMIC_RELAXED);
	/* Interrupts pended for the old driver instance go too (the queues
	 * are stopped already: nothing pends a new one meanwhile but a
	 * config change, which is news to the new driver as well). */
	msix_clear_pending(&vp->msix);
}

static void set_u64_part(uint64_t *field, uint64_t val, unsigned shift, unsigned len)
{
	uint64_t mask = len == 8 ? ~0ULL : 0xffffffffULL << shift;

	*field = (*field & ~mask) | ((val << shift) & mask);
}

static void common_write(struct virtio_pci *vp, unsigned foff, unsigned shift,
			 unsigned len, uint64_t val)
{
	struct virtio_dev *dev = vp->t.dev;
	struct virtq *vq;

	switch (foff) {
	case VIRTIO_PCI_COMMON_DFSELECT: vp->dfselect = (uint32_t)val; return;
	case VIRTIO_PCI_COMMON_GFSELECT: vp->gfselect = (uint32_t)val; return;
	case VIRTIO_PCI_COMMON_GF: virtio_write_features(dev, vp->gfselect, (uint32_t)val); return;
	case VIRTIO_PCI_COMMON_MSIX:
		__atomic_store_n(&vp->config_vector, vector_or_none(vp, val), __ATOMIC_RELAXED);
		return;
	case VIRTIO_PCI_COMMON_STATUS:
		vtr_set_status(&vp->t, (uint8_t)val);
		return;
	case VIRTIO_PCI_COMMON_Q_SELECT: vp->queue_select = (uint16_t)val; return;
	case VIRTIO_PCI_COMMON_Q_ENABLE:
		/* §4.1.4.3.2: the driver MUST NOT write 0; enabling validates. */
		if (val == 1 && queue_configurable(vp))
			virtio_queue_set_ready(dev, vp->queue_select, true);
		return;
	}
	if (!queue_configurable(vp))
		return;         /* read-only field, bad select, DRIVER_OK or enabled */
	vq = &dev->queues[vp->queue_select].vq;
	switch (foff) {
	case VIRTIO_PCI_COMMON_Q_SIZE: vq->size = (uint16_t)val; break;
	case VIRTIO_PCI_COMMON_Q_MSIX:
		__atomic_store_n(&vp->t.dev->queues[vp->queue_select].msix_vector, vector_or_none(vp, val),
				 __ATOMIC_RELAXED);
		break;
	case VIRTIO_PCI_COMMON_Q_DESCLO: set_u64_part(&vq->desc_gpa, val, shift, len); break;
	case VIRTIO_PCI_COMMON_Q_AVAILLO: set_u64_part(&vq->driver_gpa, val, shift, len); break;
	case VIRTIO_PCI_COMMON_Q_USEDLO: set_u64_part(&vq->device_gpa, val, shift, len); break;
	}
}

/* ---- BAR4 --------------------------------------------------------------- */

void virtio_pci_bar_read(void *opaque, uint64_t off, uint8_t *data, unsigned len)
{
	struct virtio_pci *vp = opaque;
	const struct common_field *f;
	unsigned shift;

	memset(data, 0, len);
	if (off < VIRTIO_PCI_COMMON_OFF + VIRTIO_PCI_COMMON_LEN) {
		pthread_mutex_lock(&vp->t.lock);
		f = common_field_at(off, len, &shift);
		if (f)
			le_store_n(data, len, common_read(vp, f->off) >> shift);
		else
			log_bad_access(vp, "read", off, len);
		pthread_mutex_unlock(&vp->t.lock);
	} else if (off == VIRTIO_PCI_ISR_OFF && len == 1) {
		/* §4.1.4.5: reading ISR clears it (and so de-asserts INTx at the
		 * next EOI/resample). */
		data[0] = __atomic_exchange_n(&vp->isr, 0, __ATOMIC_ACQ_REL);
	} else if (off >= VIRTIO_PCI_DEVICE_OFF &&
		   off + len <= VIRTIO_PCI_DEVICE_OFF + VIRTIO_PCI_DEVICE_LEN) {
		pthread_mutex_lock(&vp->t.lock);
		vtr_config_read(&vp->t, off - VIRTIO_PCI_DEVICE_OFF, data, len);
		pthread_mutex_unlock(&vp->t.lock);
	}
}

void virtio_pci_bar_write(void *opaque, uint64_t off, const uint8_t *data, unsigned len)
{
	struct virtio_pci *vp = opaque;
	const struct common_field *f;
	unsigned shift;

	if (off < VIRTIO_PCI_COMMON_OFF + VIRTIO_PCI_COMMON_LEN) {
		pthread_mutex_lock(&vp->t.lock);
		f = common_field_at(off, len, &shift);
		if (f)
			common_write(vp, f->off, shift, len, le_load_n(data, len));
		else
			log_bad_access(vp, "write", off, len);
		pthread_mutex_unlock(&vp->t.lock);
	} else if (off >= VIRTIO_PCI_DEVICE_OFF &&
		   off + len <= VIRTIO_PCI_DEVICE_OFF + VIRTIO_PCI_DEVICE_LEN) {
		pthread_mutex_lock(&vp->t.lock);
		vtr_config_write(&vp->t, off - VIRTIO_PCI_DEVICE_OFF, data, len);
		pthread_mutex_unlock(&vp->t.lock);
	} else if (off >= VIRTIO_PCI_NOTIFY_OFF &&
		   off < VIRTIO_PCI_NOTIFY_OFF + (uint64_t)VIRTIO_PCI_NOTIFY_MULT * vp->t.dev->num_queues) {
		/* Only when no ioeventfd caught the write (unbound, or tests):
		 * the same eventfd the queue thread waits on. */
		vtr_kick(&vp->t, (off - VIRTIO_PCI_NOTIFY_OFF) / VIRTIO_PCI_NOTIFY_MULT);
	}
}

static const struct io_ops virtio_pci_bar_ops = { virtio_pci_bar_read, virtio_pci_bar_write };

/* ---- interrupts --------------------------------------------------------- */

static bool intx_allowed(struct virtio_pci *vp)
{
	return !(pci_command(&vp->pci) & PCI_COMMAND_INTX_DISABLE) && !msix_enabled(&vp->msix);
}

static void intx_raise(struct virtio_pci *vp, uint8_t bit)
{
	/* The ISR update happens before the eventfd write (a syscall, a full
	 * barrier), pairing with the guest's ISR read in its handler. */
	__atomic_fetch_or(&vp->isr, bit, __ATOMIC_ACQ_REL);
	if (intx_allowed(vp))
		eventfd_write(vp->intx_fd, 1);
}

bool virtio_pci_intx_resample(struct virtio_pci *vp)
{
	if (__atomic_load_n(&vp->isr, __ATOMIC_ACQUIRE) == 0 || !intx_allowed(vp))
		return false;
	eventfd_write(vp->intx_fd, 1);
	return true;
}

static void signal_vector(struct virtio_pci *vp, uint16_t vec, uint8_t isr_bit)
{
	if (vec != MSIX_NO_VECTOR) {
		if (msix_signal(&vp->msix, vec) != -ENOTSUP)
			return;             /* fired, pended, or dropped (bad route) */
	} else if (msix_enabled(&vp->msix)) {
		return;                     /* §4.1.5.1.2: NO_VECTOR: no interrupt */
	}
	intx_raise(vp, isr_bit);
}

static void vp_signal_queue(struct virtio_dev *dev, unsigned q)
{
	struct virtio_pci *vp = dev->transport;

	if (q >= dev->num_queues)
		return;
	signal_vector(vp, __atomic_load_n(&vp->t.dev->queues[q].msix_vector, __ATOMIC_RELAXED),
		      VIRTIO_PCI_ISR_QUEUE);
}

/* The queue's MSI-X vector; INTx (and no vector, where signal_vector
 * raises nothing) one number beyond every vector. Equal numbers are one
 * interrupt whatever MSI-X's state: two queues of one vector raise that
 * vector, or INTx where MSI-X is off. */
static int vp_queue_irq(struct virtio_dev *dev, unsigned q)
{
	struct virtio_pci *vp = dev->transport;
	uint16_t vec;

	if (q >= dev->num_queues)
		return -1;
	vec = __atomic_load_n(&vp->t.dev->queues[q].msix_vector, __ATOMIC_RELAXED);
	return vec == MSIX_NO_VECTOR ? 0x10000 : vec;
}

static void vp_signal_config(struct virtio_dev *dev)
{
	struct virtio_pci *vp = dev->transport;

	signal_vector(vp, __atomic_load_n(&vp->config_vector, __ATOMIC_RELAXED),
		      VIRTIO_PCI_ISR_CONFIG);
}

/* Bus Master Enable (PCI 3.0 §6.2.2): the device's queue threads read and
 * write guest memory, which a function may only do as a bus master. */
static bool vp_dma_allowed(struct virtio_dev *dev)
{
	struct virtio_pci *vp = dev->transport;

	return pci_command(&vp->pci) & PCI_COMMAND_MASTER;
}

const struct virtio_transport_ops virtio_pci_transport_ops = {
	.signal_queue = vp_signal_queue,
	.queue_irq = vp_queue_irq,
	.signal_config = vp_signal_config,
	.dma_allowed = vp_dma_allowed,
};

/* ---- PCI hooks ---------------------------------------------------------- */

static bool overlaps(unsigned off, unsigned len, unsigned s, unsigned l)
{
	return off < s + l && s < off + len;
}

/* §4.1.4.9: the PCI_CFG capability's window: cap.bar/offset/length select a
 * BAR access performed through pci_cfg_data. Returns the BAR's ops or NULL
 * when the selection is invalid (the access is then dropped / reads 0). */
static const struct io_ops *pci_cfg_window(struct virtio_pci *vp, void **opaque,
					   uint32_t *boff, uint32_t *blen)
{
	const uint8_t *cap = &vp->pci.cfg[vp->cap_pci_cfg];
	uint8_t bar = cap[4];
	uint64_t size;

	*boff = le32_load(cap + 8);
	*blen = le32_load(cap + 12);
	if (*blen != 1 && *blen != 2 && *blen != 4)
		return NULL;
	if (*boff % *blen)
		return NULL;
	if (bar == VIRTIO_PCI_BAR) {
		size = VIRTIO_PCI_BAR_SIZE;
		*opaque = vp;
	} else if (bar == VIRTIO_PCI_MSIX_BAR) {
		size = VIRTIO_PCI_MSIX_BAR_SIZE;
		*opaque = &vp->msix;
	} else {
		return NULL;
	}
	if (*boff + (uint64_t)*blen > size)
		return NULL;
	return bar == VIRTIO_PCI_BAR ? &virtio_pci_bar_ops : &msix_bar_ops;
}

static void vp_config_read(struct pci_dev *pd, unsigned off, unsigned len)
{
	struct virtio_pci *vp = pd->opaque;
	unsigned data_off = vp->cap_pci_cfg + 16;
	uint16_t status = le16_load(&pd->cfg[PCI_STATUS]);
	const struct io_ops *ops;
	uint32_t boff, blen;
	void *opaque;

	if (overlaps(off, len, PCI_STATUS, 2)) {
		status &= ~PCI_STATUS_INTERRUPT;
		if (__atomic_load_n(&vp->isr, __ATOMIC_RELAXED) && !msix_enabled(&vp->msix))
			status |= PCI_STATUS_INTERRUPT;
		le16_store(&pd->cfg[PCI_STATUS], status);
	}
	if (overlaps(off, len, data_off, 4)) {
		memset(&pd->cfg[data_off], 0, 4);
		ops = pci_cfg_window(vp, &opaque, &boff, &blen);
		if (ops)
			ops->read(opaque, boff, &pd->cfg[data_off], blen);
	}
}

/* Bus mastering turned off: the function must not touch guest memory any
 * more. The queue threads are the device's DMA, and a queue cannot be
 * paused and resumed (a stop cancels in-flight requests, whose chains are
 * then never returned to the driver), so stop them all and ask the driver
 * for a reset (NEEDS_RESET), as a device whose DMA fails would (QEMU marks
 * such a device broken). queue_stop returns only once nothing more is
 * written to guest memory, and the guest's config write does not complete
 * before: when it retires, the device's DMA is over. (Linux clears Bus
 * Master Enable only on a device it reset already, e.g. before kexec.)
 * Bus lock held; the register lock nests inside it. */
static void vp_bus_master_off(struct virtio_pci *vp)
{
	struct virtio_dev *dev = vp->t.dev;
	bool running = false;
	unsigned q;

	pthread_mutex_lock(&vp->t.lock);
	for (q = 0; q < dev->num_queues; q++)
		running |= dev->queues[q].started;
	if (running) {
		virtio_dev_stop(dev);
		virtio_guest_warn(dev, VIRTIO_GW_DMA, "%s (%s): bus mastering turned off while "
				  "its queues ran; queues stopped, device needs reset",
				  dev->ops->name, vp->t.name);
		virtio_dev_needs_reset(dev);
	}
	pthread_mutex_unlock(&vp->t.lock);
}

static void vp_config_write(struct pci_dev *pd, unsigned off, unsigned len)
{
	struct virtio_pci *vp = pd->opaque;
	unsigned data_off = vp->cap_pci_cfg + 16;
	const struct io_ops *ops;
	uint32_t boff, blen;
	void *opaque;

	/* MSI-X first: from here on a message pends instead of being sent
	 * (msix.h), including one the stopping queues raise. */
	msix_config_write(&vp->msix, off, len);
	if (overlaps(off, len, PCI_COMMAND, 2) && !(pci_command(pd) & PCI_COMMAND_MASTER))
		vp_bus_master_off(vp);
	if (overlaps(off, len, data_off, 4)) {
		ops = pci_cfg_window(vp, &opaque, &boff, &blen);
		if (ops)
			ops->write(opaque, boff, &pd->cfg[data_off], blen);
	}
}

/* Bind each queue's notify address to its kick eventfd. Length 0 (any write
 * width, KVM's fast MMIO path) when the kernel supports it, else the 2-byte
 * writes Linux's driver uses (§4.1.5.2 without NOTIFICATION_DATA). */
static int notify_bind(struct virtio_pci *vp, uint64_t base)
{
	struct vtr_notify n = { .space = VM_IO_MMIO, .addr = base,
				.stride = VIRTIO_PCI_NOTIFY_MULT, .len = 0 };
	int ret = vtr_notify_bind(&vp->t, &n);

	if (ret) {
		n.len = 2;
		ret = vtr_notify_bind(&vp->t, &n);
	}
	return ret;
}

static void vp_bar_map(struct pci_dev *pd, unsigned bar, uint64_t addr, bool mapped)
{
	struct virtio_pci *vp = pd->opaque;
	int ret;

	if (bar != VIRTIO_PCI_BAR || !vp->bus)
		return;             /* ioeventfds only in the KVM binding */
	vtr_notify_unbind(&vp->t);
	if (!mapped)
		return;
	/* Each BAR move the guest makes binds again: a failure (KVM's limit
	 * of ioeventfds, say) could be logged at the guest's will. */
	ret = notify_bind(vp, addr + VIRTIO_PCI_NOTIFY_OFF);
	if (ret)
		pci_guest_warn(pd, VP_GW_NOTIFY, "cannot bind queue notify ioeventfds at 0x%" PRIx64
			       ": %s; kicks take the slow path", addr + VIRTIO_PCI_NOTIFY_OFF,
			       strerror(-ret));
}

static const struct pci_dev_ops virtio_pci_dev_ops = {
	.config_read = vp_config_read,
	.config_write = vp_config_write,
	.bar_map = vp_bar_map,
};

/* ---- setup -------------------------------------------------------------- */

static uint32_t class_of(uint32_t device_id)
{
	switch (device_id) {
	case VIRTIO_ID_BLOCK: return 0x018000;   /* mass storage, other */
	case VIRTIO_ID_NET: return 0x020000;     /* ethernet */
	default: return 0xff0000;
	}
}

/* Append a virtio vendor capability (§4.1.4) describing [off, off+len) of bar. */
static int add_vcap(struct pci_dev *pd, uint8_t type, unsigned caplen, uint8_t bar,
		    uint32_t off, uint32_t len)
{
	int cap = pci_cap_add(pd, PCI_CAP_ID_VNDR, caplen);

	if (cap < 0)
		return cap;
	pd->cfg[cap + 2] = (uint8_t)caplen;
	pd->cfg[cap + 3] = type;
	pd->cfg[cap + 4] = bar;
	pd->cfg[cap + 5] = 0;
	le32_store(&pd->cfg[cap + 8], off);
	le32_store(&pd->cfg[cap + 12], len);
	return cap;
}

/* The INTx eventfds, then the shared transport state (init's last steps
 * undone in reverse). */
static void vp_release(struct virtio_pci *vp)
{
	if (vp->intx_fd >= 0)
		close(vp->intx_fd);
	if (vp->resample_fd >= 0)
		close(vp->resample_fd);
	vp->intx_fd = vp->resample_fd = -1;
	vtr_destroy(&vp->t);
}

int virtio_pci_init(struct virtio_pci *vp, struct virtio_dev *dev, struct vm *vm)
{
	struct pci_dev *pd = &vp->pci;
	uint16_t id = (uint16_t)(VIRTIO_PCI_DEVICE_BASE + dev->ops->device_id);
	unsigned q;
	int ret, cap;

	memset(vp, 0, sizeof(*vp));
	vp->intx_fd = vp->resample_fd = vp->stop_fd = -1;
	if (dev->num_queues == 0 || dev->num_queues > VIRTIO_MAX_QUEUES)
		return -EINVAL;
	ret = vtr_init(&vp->t, &vp_vtr_ops, dev, &virtio_pci_transport_ops, vp);
	if (ret)
		return ret;
	vp->intx_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	vp->resample_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (vp->intx_fd < 0 || vp->resample_fd < 0) {
		ret = -errno;
		goto close_fds;
	}
	pci_dev_init(pd, dev->ops->name, VIRTIO_PCI_VENDOR, id, class_of(dev->ops->device_id),
		     1, VIRTIO_PCI_VENDOR, id, &virtio_pci_dev_ops, vp);
	ret = pci_dev_set_bar(pd, VIRTIO_PCI_MSIX_BAR, VIRTIO_PCI_MSIX_BAR_SIZE, 0,
			      &msix_bar_ops, &vp->msix);
	if (ret)
		goto close_fds;
	ret = pci_dev_set_bar(pd, VIRTIO_PCI_BAR, VIRTIO_PCI_BAR_SIZE,
			      PCI_BASE_ADDRESS_MEM_TYPE_64 | PCI_BASE_ADDRESS_MEM_PREFETCH, &virtio_pci_bar_ops, vp);
	if (ret)
		goto close_fds;
	ret = msix_init(&vp->msix, pd, vm,
			dev->ops->msix_vectors ? dev->ops->msix_vectors : dev->num_queues + 1,
			VIRTIO_PCI_MSIX_BAR, VIRTIO_PCI_MSIX_TABLE, VIRTIO_PCI_MSIX_PBA);
	if (ret)
		goto close_fds;
	if ((ret = add_vcap(pd, VIRTIO_PCI_CAP_COMMON_CFG, 16, VIRTIO_PCI_BAR,
			    VIRTIO_PCI_COMMON_OFF, VIRTIO_PCI_COMMON_LEN)) < 0)
		goto destroy_msix;
	cap = add_vcap(pd, VIRTIO_PCI_CAP_NOTIFY_CFG, 20, VIRTIO_PCI_BAR, VIRTIO_PCI_NOTIFY_OFF,
		       VIRTIO_PCI_NOTIFY_MULT * dev->num_queues);
	if ((ret = cap) < 0)
		goto destroy_msix;
	le32_store(&pd->cfg[cap + 16], VIRTIO_PCI_NOTIFY_MULT);
	if ((ret = add_vcap(pd, VIRTIO_PCI_CAP_ISR_CFG, 16, VIRTIO_PCI_BAR,
			    VIRTIO_PCI_ISR_OFF, 1)) < 0)
		goto destroy_msix;
	if ((ret = add_vcap(pd, VIRTIO_PCI_CAP_DEVICE_CFG, 16, VIRTIO_PCI_BAR,
			    VIRTIO_PCI_DEVICE_OFF, VIRTIO_PCI_DEVICE_LEN)) < 0)
		goto destroy_msix;
	cap = add_vcap(pd, VIRTIO_PCI_CAP_PCI_CFG, 20, 0, 0, 0);
	if ((ret = cap) < 0)
		goto destroy_msix;
	vp->cap_pci_cfg = cap;
	pci_set_wmask(pd, cap + 4, 1, 0xff);             /* cap.bar */
	pci_set_wmask(pd, cap + 8, 4, 0xffffffff);       /* cap.offset */
	pci_set_wmask(pd, cap + 12, 4, 0xffffffff);      /* cap.length */
	pci_set_wmask(pd, cap + 16, 4, 0xffffffff);      /* pci_cfg_data */

	vp->config_vector = MSIX_NO_VECTOR;
	for (q = 0; q < dev->num_queues; q++)
		vp->t.dev->queues[q].msix_vector = MSIX_NO_VECTOR;
	memcpy(vp->cfg0, pd->cfg, sizeof(vp->cfg0));
	return 0;
destroy_msix:
	msix_destroy(&vp->msix);
close_fds:
	vp_release(vp);
	dev->tops = NULL;
	dev->transport = NULL;
	return ret;
}

void virtio_pci_destroy(struct virtio_pci *vp)
{
	msix_destroy(&vp->msix);
	vp_release(vp);
}

/* ---- KVM binding -------------------------------------------------------- */

/* INTx resample thread: waits for KVM's EOI notification (resample_fd) and
 * re-asserts while ISR is set; stops when stop_fd is written. */
static void *intx_thread(void *arg)
{
	struct virtio_pci *vp = arg;
	struct pollfd pfd[2] = {
		{ .fd = vp->resample_fd, .events = POLLIN },
		{ .fd = vp->stop_fd, .events = POLLIN },
	};
	eventfd_t v;
	int r;

	char name[16] = "mvm-pci-intx";

	if (vp->t.dev->thread_prefix[0])
		snprintf(name, sizeof(name), "%.12sirq", vp->t.dev->thread_prefix);
	thread_begin(&vp->intx_hs, name);
	if (vp->t.vm->sandbox) {
		struct sandbox_fds fds = SANDBOX_NO_FDS;

		fds.vm = vp->t.vm->vm_fd;
		r = sandbox_enter(SANDBOX_QUEUE, &fds);
		if (r) {
			thread_ready(&vp->intx_hs, r);
			return NULL;
		}
	}
	thread_ready(&vp->intx_hs, 0);
	for (;;) {
		if (poll(pfd, 2, -1) < 0)
			continue;       /* EINTR */
		if (pfd[1].revents)
			break;
		if (pfd[0].revents && eventfd_read(vp->resample_fd, &v) == 0)
			virtio_pci_intx_resample(vp);
	}
	return NULL;
}

static int vp_start(struct vtr *t)
{
	struct virtio_pci *vp = container_of(t, struct virtio_pci, t);
	int ret = thread_start_sync(&vp->intx_thread, intx_thread, vp, &vp->intx_hs);

	if (ret)
		return ret;
	vp->intx_thread_started = true;
	vp->t.dev->helper_tid = vp->intx_hs.tid;
	memcpy(vp->t.dev->helper_name, vp->intx_hs.name, sizeof(vp->t.dev->helper_name));
	return 0;
}

static void vp_stop(struct vtr *t)
{
	struct virtio_pci *vp = container_of(t, struct virtio_pci, t);

	if (vp->intx_thread_started) {
		eventfd_write(vp->stop_fd, 1);
		pthread_join(vp->intx_thread, NULL);
		vp->intx_thread_started = false;
		t->dev->helper_tid = 0;
	}
}

static void vp_unbind(struct vtr *t)
{
	struct virtio_pci *vp = container_of(t, struct virtio_pci, t);

	if (vp->bus)
		pci_bus_remove(vp->bus, &vp->pci);   /* unmaps BARs */
	vp->bus = NULL;
	if (vp->intx_bound)
		vm_irqfd_resample(t->vm, vp->intx_gsi, vp->intx_fd, vp->resample_fd, true);
	vp->intx_bound = false;
	if (vp->stop_fd >= 0)
		close(vp->stop_fd);
	vp->stop_fd = -1;
}

static void vp_stats_json(struct vtr *t, struct json *j)
{
	struct virtio_pci *vp = container_of(t, struct virtio_pci, t);

	pthread_mutex_lock(&vp->msix.lock);
	json_u64(j, "slot", vp->pci.slot);
	if (vp->pci.parent)
		json_u64(j, "bus", vp->pci.busno);
	json_u64(j, "pci_guest_errors", pci_guest_errors(&vp->pci));
	json_u64(j, "msix_fired", vp->msix.fired);
	json_u64(j, "msix_pended", vp->msix.pended);
	json_u64(j, "msix_reroutes", vp->msix.reroutes);
	pthread_mutex_unlock(&vp->msix.lock);
}

static void vp_free(struct vtr *t)
{
	struct virtio_pci *vp = container_of(t, struct virtio_pci, t);

	virtio_pci_destroy(vp);
	free(vp);
}

/* Config space, MSI-X, then the common configuration's registers of
 * the transport (selects, vectors) and ISR. */
static int vp_save(struct vtr *t, struct snap_w *w, char *err, size_t errlen)
{
	struct virtio_pci *vp = container_of(t, struct virtio_pci, t);
	unsigned q;
	int ret;

	ret = pci_dev_save(&vp->pci, w, err, errlen);
	if (ret)
		return ret;
	msix_save(&vp->msix, w);
	pthread_mutex_lock(&t->lock);
	snap_put_u32(w, vp->dfselect);
	snap_put_u32(w, vp->gfselect);
	snap_put_u16(w, vp->queue_select);
	snap_put_u16(w, __atomic_load_n(&vp->config_vector, __ATOMIC_RELAXED));
	for (q = 0; q < t->dev->num_queues; q++)
		snap_put_u16(w, __atomic_load_n(&t->dev->queues[q].msix_vector, __ATOMIC_RELAXED));
	snap_put_u8(w, __atomic_load_n(&vp->isr, __ATOMIC_ACQUIRE));
	pthread_mutex_unlock(&t->lock);
	return 0;
}

/* The guest's order: BARs, the MSI-X table and control, the command
 * register (the BARs mapped, the notify ioeventfds bound, bus mastering
 * on), then the registers. A vector number beyond the table reads back
 * as NO_VECTOR, as when the driver writes one. */
static int vp_load(struct vtr *t, struct snap_r *r, char *err, size_t errlen)
{
	struct virtio_pci *vp = container_of(t, struct virtio_pci, t);
	uint8_t saved[PCI_CONF1_SIZE], isr;
	unsigned q;
	int ret;

	ret = pci_dev_load_begin(&vp->pci, r, saved, err, errlen);
	if (ret)
		return ret;
	ret = msix_load(&vp->msix, r, saved, err, errlen);
	if (ret)
		return ret;
	pci_dev_load_finish(&vp->pci, saved);
	pthread_mutex_lock(&t->lock);
	vp->dfselect = snap_get_u32(r);
	vp->gfselect = snap_get_u32(r);
	vp->queue_select = snap_get_u16(r);
	__atomic_store_n(&vp->config_vector, vector_or_none(vp, snap_get_u16(r)), __ATOMIC_RELAXED);
	for (q = 0; q < t->dev->num_queues; q++)
		__atomic_store_n(&t->dev->queues[q].msix_vector, vector_or_none(vp, snap_get_u16(r)),
				 __ATOMIC_RELAXED);
	isr = snap_get_u8(r);
	pthread_mutex_unlock(&t->lock);
	if (r->err)
		return snap_done(r, err, errlen);
	/* An interrupt the guest had not taken yet: INTA# asserted again
	 * (a level the guest will read ISR for), or, with MSI-X, nothing. */
	if (isr & (VIRTIO_PCI_ISR_QUEUE | VIRTIO_PCI_ISR_CONFIG))
		intx_raise(vp, isr & (VIRTIO_PCI_ISR_QUEUE | VIRTIO_PCI_ISR_CONFIG));
	return 0;
}

static const struct vtr_ops vp_vtr_ops = {
	.kind = "virtio-pci",
	.reset = vp_reset,
	.start = vp_start,
	.stop = vp_stop,
	.unbind = vp_unbind,
	.stats_json = vp_stats_json,
	.free = vp_free,
	.save = vp_save,
	.load = vp_load,
};

int virtio_pci_address(const struct virtio_dev *dev, unsigned *bus, unsigned *slot)
{
	const struct virtio_pci *vp = dev->transport;

	if (dev->tops != &virtio_pci_transport_ops || !vp->bus)
		return -ENODEV;
	pthread_mutex_lock(&vp->bus->lock);
	/* Behind a port: the bus number the guest gave its secondary side. */
	*bus = vp->pci.parent ? vp->pci.parent->cfg[PCI_SECONDARY_BUS] : 0;
	*slot = vp->pci.slot;
	pthread_mutex_unlock(&vp->bus->lock);
	return 0;
}

int virtio_pci_attach(struct vm *vm, struct pci_bus *bus, struct virtio_dev *dev)
{
	return virtio_pci_attach_port(vm, bus, NULL, dev);
}

int virtio_pci_power_on(struct virtio_dev *dev)
{
	struct virtio_pci *vp = dev->transport;

	if (dev->tops != &virtio_pci_transport_ops)
		return -EINVAL;
	/* The device first: its queues stop, the transport's registers go
	 * back (vp_reset). No vCPU reaches the function meanwhile: it is off
	 * the bus. */
	pthread_mutex_lock(&vp->t.lock);
	vtr_set_status(&vp->t, 0);
	pthread_mutex_unlock(&vp->t.lock);
	memcpy(vp->pci.cfg, vp->cfg0, sizeof(vp->cfg0));
	msix_reset(&vp->msix);
	return 0;
}

int virtio_pci_port_attach(struct virtio_dev *dev, struct pcie_port *port)
{
	struct virtio_pci *vp = dev->transport;

	if (dev->tops != &virtio_pci_transport_ops)
		return -EINVAL;
	return pcie_port_attach(port, &vp->pci);
}

int virtio_pci_attach_port(struct vm *vm, struct pci_bus *bus, struct pcie_port *port,
			   struct virtio_dev *dev)
{
	struct virtio_pci *vp = calloc(1, sizeof(*vp));
	int ret;

	if (!vp)
		return -ENOMEM;
	ret = virtio_pci_init(vp, dev, vm);
	if (ret) {
		free(vp);
		return ret;
	}
	vtr_attach(&vp->t, vm);
	vp->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (vp->stop_fd < 0) {
		ret = -errno;
		goto abort;
	}
	ret = msix_bind(&vp->msix);
	if (ret)
		goto abort;
	/* Placing BAR4 binds the notify ioeventfds (vp_bar_map). */
	ret = port ? pcie_port_attach(port, &vp->pci) : pci_bus_add(bus, &vp->pci);
	if (ret)
		goto abort;
	vp->bus = bus;
	snprintf(vp->t.name, sizeof(vp->t.name), "virtio-pci %02x:%02x.0", vp->pci.busno,
		 vp->pci.slot);
	vp->intx_gsi = pci_dev_intx_line(&vp->pci);
	ret = vm_irqfd_resample(vm, vp->intx_gsi, vp->intx_fd, vp->resample_fd, false);
	if (ret)
		goto abort;
	vp->intx_bound = true;
	/* The INTx thread starts with the VM (vp_start). */
	ret = vtr_register(&vp->t);
	if (ret)
		goto abort;
	return 0;
abort:
	vtr_abort(&vp->t);
	return ret;
}
