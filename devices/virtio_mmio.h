/* virtio-mmio transport, version 2 (virtio 1.2 §4.2).
 *
 * Two layers:
 *  - the register model (virtio_mmio_init, virtio_mmio_read/_write): plain C
 *    on a struct virtio_mmio, driven by unit tests directly and by vCPU
 *    threads through the MMIO bus;
 *  - the KVM binding (virtio_mmio_attach): MMIO window + IRQ allocation, bus
 *    registration, one KVM_IOEVENTFD per queue on QueueNotify (datamatch =
 *    queue index) and a KVM_IRQFD for the interrupt, so neither kicks nor
 *    interrupts go through userspace on the I/O path.
 *
 * The register page: every register the driver reads is a function of
 * what it wrote (each write exits to us) and of the device's atomics
 * (InterruptStatus, Status's NEEDS_RESET, ConfigGeneration), and no read
 * has a side effect (§4.2.2). So the transport keeps a 4 KiB page laid
 * out as the window, with what each register would read, and maps it into
 * the guest read-only (vm_map_readonly) where KVM can: then the guest's
 * reads cost no VM exit, and its writes still exit (or hit an ioeventfd)
 * as before. On the I/O path that spares the InterruptStatus read of every
 * interrupt, one of its two exits to the VMM (the other, InterruptACK, is a
 * write). Who writes the page: the register lock's holder (after each
 * write, for the registers writes change), the queue threads (atomic OR
 * into InterruptStatus), and signal_config (Status and ConfigGeneration,
 * any thread); page stores take regs_lock, InterruptStatus aside, whose
 * only copy is the page's word. A multi-byte config field that changed at
 * run time could be read torn, as the generation check cannot see a copy
 * half done; no mvm device changes its config after creation (virtio-blk's
 * is fixed), and one that does must keep its window unmapped.
 *
 * Register rules: 32-bit aligned accesses only below 0x100 (anything else
 * reads 0 / is ignored, logged once per device); queue registers are ignored
 * after DRIVER_OK or while the selected queue is ready; QueueSel >= num_queues
 * reads QueueNumMax 0 and ignores writes; QueueNotify >= num_queues is ignored.
 * A queue whose configuration is invalid when QueueReady=1 is written stays
 * not ready (QueueReady reads 0) and the device sets NEEDS_RESET (§2.1.2):
 * the driver sees its error either way. */
#ifndef MVM_VIRTIO_MMIO_H
#define MVM_VIRTIO_MMIO_H

#include <linux/virtio_mmio.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "devices/virtio.h"
#include "devices/virtio_transport.h"
#include "vmm/base/iobus.h"

struct vm;

/* Register offsets (§4.2.2) and interrupt bits: <linux/virtio_mmio.h>. */
#define VIRTIO_MMIO_MAGIC   0x74726976u   /* "virt" */
#define VIRTIO_MMIO_VENDOR  0x4d564d00u   /* "\0MVM" */
#define VIRTIO_MMIO_WINDOW  0x1000u       /* 4K, as on the kernel command line */

struct virtio_mmio {
	struct vtr t;                   /* lock, dev, notify binding, attach/stop/destroy */
	uint32_t device_features_sel;
	uint32_t driver_features_sel;
	uint32_t queue_sel;
	/* The register page (above): VIRTIO_MMIO_WINDOW bytes, page-aligned,
	 * little-endian. Its InterruptStatus word is the only copy of that
	 * register (atomic: set by queue threads, ACKed by vCPUs). */
	uint8_t *regs;
	pthread_mutex_t regs_lock;      /* page stores but InterruptStatus;
					 * taken after t.lock where both are */
	int irq_fd;                     /* eventfd: written to raise the interrupt */
	/* KVM binding (virtio_mmio_attach only) */
	uint64_t base;
	unsigned gsi;
	bool window_bound;              /* registered on vm->mmio */
	bool irqfd_bound;
	bool regs_mapped;               /* guest reads come from regs, no exit */
};

/* Register model: bind dev to the transport (sets dev->tops/transport) and
 * create the interrupt eventfd. 0 or -errno. */
int virtio_mmio_init(struct virtio_mmio *m, struct virtio_dev *dev);
void virtio_mmio_destroy(struct virtio_mmio *m);
/* Guest register access, off relative to the window, len 1/2/4/8, data in
 * guest (little-endian) order. Same signature as struct io_ops. */
void virtio_mmio_read(void *opaque, uint64_t off, uint8_t *data, unsigned len);
void virtio_mmio_write(void *opaque, uint64_t off, const uint8_t *data, unsigned len);
extern const struct io_ops virtio_mmio_io_ops;
extern const struct virtio_transport_ops virtio_mmio_transport_ops;

/* KVM binding: allocate a window and an IRQ, register on vm->mmio, bind each
 * queue's notify to dev->queues[q].kick_fd with KVM_IOEVENTFD (datamatch q, 4 bytes),
 * the interrupt eventfd with KVM_IRQFD, map the register page read-only
 * where KVM can (elsewhere reads exit, as writes do), add "virtio_mmio.device=4K@0x...:IRQ"
 * to the kernel command line, and register with vm_add_device: from then on
 * the VM owns dev (virtio_dev_destroy at teardown) and the transport. dev
 * must be initialised (virtio_dev_init) and heap-allocated, and must stay
 * valid until teardown. Before vCPUs start. 0 or -errno (nothing left bound). */
int virtio_mmio_attach(struct vm *vm, struct virtio_dev *dev);

#endif
