/* virtio-pci modern transport (virtio 1.2 §4.1) on mvm's PCI bus.
 *
 * PCI identity: vendor 0x1af4, device 0x1040 + virtio device id, revision 1
 * (modern only, §4.1.2.1), subsystem 0x1af4 / 0x1040 + id, class by type
 * (block: 01/80, net: 02/00, else ff/00).
 *
 * BARs: BAR1 = MSI-X table (offset 0) and PBA (0x800), 32-bit memory, 4 KiB;
 * BAR4 = 64-bit prefetchable memory, 16 KiB, holding the virtio structures:
 *   0x0000 common cfg (§4.1.4.3)   0x1000 ISR (§4.1.4.5, read-to-clear)
 *   0x2000 device cfg (§4.1.4.6, delegated to the device's config_read/write)
 *   0x3000 notify (§4.1.4.4): queue q at 0x3000 + 4 * q (queue_notify_off = q,
 *          notify_off_multiplier = 4), each bound to dev->queues[q].kick_fd with a
 *          KVM_IOEVENTFD (any length, no datamatch) while BAR4 is mapped, so
 *          kicks never reach userspace; a write that does reach the handler
 *          (unbound, tests) signals the same eventfd.
 * Capabilities: MSI-X, then vendor caps COMMON, NOTIFY, ISR, DEVICE, PCI_CFG
 * (§4.1.4.9: window into the BARs through config space).
 *
 * Common cfg rules: accesses must have the field's width (64-bit fields may
 * also be accessed as two aligned dwords); others read 0 / are ignored and
 * logged once. queue_select >= num_queues: queue fields read 0, writes are
 * ignored. queue_size / queue_desc / driver / device / queue_msix_vector
 * written after DRIVER_OK or while the queue is enabled: ignored. An MSI-X
 * vector >= the table size reads back NO_VECTOR (0xffff). device_status goes
 * through the virtio core's state machine (virtio_set_status); 0 resets the
 * device and the transport (vectors back to NO_VECTOR, selects to 0, ISR
 * and every MSI-X pending bit cleared).
 *
 * Bus mastering (the command register's Bus Master Enable, BME): the
 * device reads and writes guest memory (its virtqueues) only as a bus
 * master. DRIVER_OK with BME clear starts no queue and sets NEEDS_RESET;
 * clearing BME while queues run stops them (the config write completes
 * only after their last access to guest memory) and sets NEEDS_RESET: the
 * driver resets the device (device_status 0) to use it again. No MSI-X
 * message is sent while BME is clear: the vector pends and is delivered
 * when BME is set again (msix.h). INTx is not a memory write and does not
 * depend on BME (PCI 3.0 §6.2.2); with the queues stopped, only config
 * changes raise it.
 *
 * Interrupts: with MSI-X enabled, signal_queue fires the queue's vector and
 * signal_config the config vector (NO_VECTOR: no interrupt, §4.1.5.1.2);
 * with MSI-X disabled, legacy INTx: ISR bit 0 (queue) / bit 1 (config) is
 * set (atomic OR) and INTA# is asserted through a resampling irqfd on IOAPIC
 * pin 20 + slot % 4 (level). When the guest EOIs, KVM de-asserts the line
 * and signals the resample eventfd; the INTx thread re-asserts while ISR is
 * still non-zero (the guest's handler reads ISR, which clears it, before its
 * EOI, so a signal arriving after that read is re-delivered, never lost). */
#ifndef MVM_VIRTIO_PCI_H
#define MVM_VIRTIO_PCI_H

#include <linux/virtio_pci.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "devices/msix.h"
#include "devices/pci.h"
#include "devices/pcie_port.h"
#include "devices/virtio.h"
#include "devices/virtio_transport.h"
#include "vmm/base/util.h"

struct vm;

#define VIRTIO_PCI_VENDOR         0x1af4
#define VIRTIO_PCI_DEVICE_BASE    0x1040

/* cfg_type values (§4.1.4, VIRTIO_PCI_CAP_*_CFG) and the common
 * configuration layout (§4.1.4.3, VIRTIO_PCI_COMMON_*) are
 * <linux/virtio_pci.h>'s; mvm implements the layout up to queue_device. */
#define VIRTIO_PCI_COMMON_LEN           0x38

/* BAR layout */
#define VIRTIO_PCI_MSIX_BAR       1
#define VIRTIO_PCI_MSIX_BAR_SIZE  0x1000
#define VIRTIO_PCI_MSIX_TABLE     0x000
#define VIRTIO_PCI_MSIX_PBA       0x800
#define VIRTIO_PCI_BAR            4
#define VIRTIO_PCI_BAR_SIZE       0x4000
#define VIRTIO_PCI_COMMON_OFF     0x0000
#define VIRTIO_PCI_ISR_OFF        0x1000
#define VIRTIO_PCI_DEVICE_OFF     0x2000
#define VIRTIO_PCI_DEVICE_LEN     0x1000
#define VIRTIO_PCI_NOTIFY_OFF     0x3000
#define VIRTIO_PCI_NOTIFY_MULT    4

#define VIRTIO_PCI_ISR_QUEUE      1u

struct virtio_pci {
	struct vtr t;                 /* lock (common and device cfg), dev, notify binding */
	struct pci_dev pci;
	struct msix msix;             /* num_queues + 1 vectors */
	unsigned cap_pci_cfg;         /* config offset of the PCI_CFG capability */

	uint32_t dfselect, gfselect;
	uint16_t queue_select;
	uint16_t config_vector;       /* atomic: read by signalling threads */

	uint8_t isr;                  /* atomic: OR'ed by signals, exchanged by reads */
	int intx_fd;                  /* eventfd: asserts INTA# (resampling irqfd) */
	int resample_fd;              /* eventfd: KVM signals it on EOI */

	/* KVM binding (virtio_pci_attach only) */
	struct pci_bus *bus;
	unsigned intx_gsi;
	bool intx_bound;
	int stop_fd;                  /* stops the INTx resample thread */
	pthread_t intx_thread;
	struct thread_handshake intx_hs;     /* its filter is on */
	bool intx_thread_started;
	/* Config space as virtio_pci_init made it: what a hot-plug slot's
	 * function goes back to (virtio_pci_power_on). */
	uint8_t cfg0[PCI_CFG_SIZE];
};

/* Register model: builds the PCI function (ids, BARs, capabilities, MSI-X
 * with num_queues + 1 vectors) for dev and binds dev to this transport
 * (dev->tops / dev->transport). vm is used for MSI routing only (may have
 * no KVM). Nothing is put on a bus. 0 or -errno. */
int virtio_pci_init(struct virtio_pci *vp, struct virtio_dev *dev, struct vm *vm);
void virtio_pci_destroy(struct virtio_pci *vp);

/* BAR4 accesses (offset relative to the BAR): what vCPU threads reach
 * through vm->mmio and the PCI_CFG capability window. */
void virtio_pci_bar_read(void *opaque, uint64_t off, uint8_t *data, unsigned len);
void virtio_pci_bar_write(void *opaque, uint64_t off, const uint8_t *data, unsigned len);

/* Resample event (guest EOI'd INTA#): re-assert while ISR is non-zero and
 * INTx is in use. Returns whether it re-asserted. */
bool virtio_pci_intx_resample(struct virtio_pci *vp);

extern const struct virtio_transport_ops virtio_pci_transport_ops;

struct pcie_port;
/* A hot-plug slot's function, off the bus (its port detached it): back
 * to how it was made, as a new card is: its device reset (queues
 * stopped), its config space and MSI-X table. 0, or -EINVAL for a
 * device not on virtio-pci. */
int virtio_pci_power_on(struct virtio_dev *dev);
/* Put dev's function behind port (pcie_port_attach; not announced).
 * 0 or -errno. */
int virtio_pci_port_attach(struct virtio_dev *dev, struct pcie_port *port);

/* KVM binding: virtio_pci_init on a heap-allocated transport, put it on bus
 * (slot, BAR placement), bind the MSI-X vectors (GSI + irqfd each), INTA#
 * with a resampling irqfd and its thread, notify ioeventfds whenever BAR4 is
 * mapped, and register with vm_add_device: from then on the VM owns dev
 * (virtio_dev_destroy at teardown). dev must be initialised
 * (virtio_dev_init) and heap-allocated. Before vCPUs start. 0 or -errno
 * (nothing left bound; dev still the caller's). */
int virtio_pci_attach(struct vm *vm, struct pci_bus *bus, struct virtio_dev *dev);
/* Where dev (on virtio-pci, attached) is: its bus and device numbers.
 * 0 or -ENODEV. */
int virtio_pci_address(const struct virtio_dev *dev, unsigned *bus, unsigned *slot);
/* The same behind a hot-plug port (pcie_port_attach: the guest is not
 * told; the caller starts the device, then pcie_port_announce). */
int virtio_pci_attach_port(struct vm *vm, struct pci_bus *bus, struct pcie_port *port,
			   struct virtio_dev *dev);

#endif
