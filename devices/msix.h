/* MSI-X (PCI Local Bus 3.0 §6.8.2) for an mvm PCI function: the capability
 * in config space, the vector table and the pending bit array (PBA) in a
 * memory BAR, and the delivery of each vector through its own irqfd.
 *
 * Split for testability: the vector state machine (table contents, masks,
 * pending bits, which (address, data) each vector is routed to) is plain
 * data updated under m->lock; the KVM side (one GSI per vector, an irqfd on
 * the vector's eventfd, KVM_SET_GSI_ROUTING through vm_msi_route) is only
 * touched once msix_bind() has run. Unit tests never bind: they check the
 * state and read the vector eventfds to see what fired.
 *
 * Routing: a vector's route is (re)programmed whenever it is usable (MSI-X
 * enabled, function and vector unmasked, bus master) and its address/data
 * differ from the installed route: i.e. when the guest writes the entry's
 * address/data of a live vector, unmasks it, clears the function mask,
 * sets enable or Bus Master Enable.
 * Masking leaves the route in place (nothing is fired while masked), which
 * spares a KVM_SET_GSI_ROUTING per mask/unmask pair; a write that leaves a
 * live vector's message as it was, and any write to a masked vector's
 * message, changes no route either (reroutes counts the changes; vm.c
 * then pushes the table only when a route's content changed). An address outside the
 * LAPIC window (not 0xFEExxxxx, or a non-zero high dword) leaves the vector
 * unrouted (its route removed), and so does a route KVM refuses; signals
 * on it are dropped. Either is the guest's doing, repeatable at will:
 * logged once per function and counted (pci_guest_warn).
 *
 * Bus mastering: a message is a memory write, so none is sent while the
 * command register's Bus Master Enable is clear (PCIe 7.5.1.1.3). A signal
 * then sets the vector's PBA bit as a mask would; setting Bus Master Enable
 * again delivers, once, every pending vector that is unmasked (the
 * function's and its own mask clear, MSI-X enabled), exactly as clearing
 * the function mask does. (QEMU drops such a message instead; pending it
 * loses no interrupt and costs nothing.) Routes are left alone meanwhile.
 *
 * Mask/pending race: msix_signal (queue threads) and every table/control
 * write (vCPU threads) take m->lock. A signal either sees the vector masked
 * and sets its PBA bit, or unmasked and writes the eventfd while still
 * holding the lock; an unmask installs the route first, then, still under
 * the lock, clears the PBA bit and fires once. So a signal is never lost
 * between "masked" and "unmasked", and never fires through a stale route.
 * The eventfd write is a system call, a full barrier: the used-ring update
 * the queue thread published before signalling (virtq_publish's release
 * store) is visible before the guest can take the interrupt. */
#ifndef MVM_MSIX_H
#define MVM_MSIX_H

#include <pthread.h>
#include <stdbool.h>
#include <linux/pci_regs.h>
#include <stdint.h>

#include "vmm/base/iobus.h"

struct vm;
struct pci_dev;

#define MSIX_MAX_VECTORS     2048u
#define MSIX_CAP_LEN         12u
#define MSIX_NO_VECTOR       0xffffu

/* The capability's layout (PCI_MSIX_FLAGS, _TABLE, _PBA) and the table
 * entry's (PCI_MSIX_ENTRY_*) are <linux/pci_regs.h>'s. */
#define MSIX_ADDR_BASE       0xfee00000u   /* x86 LAPIC message window */
#define MSIX_ADDR_MASK       0xfff00000u

struct msix_vector {
	uint32_t addr_lo, addr_hi, data, ctrl;   /* the guest-visible table entry */
	int fd;                  /* eventfd; the irqfd on gsi once bound */
	unsigned gsi;
	bool routed;             /* route (route_addr, route_data) installed */
	uint64_t route_addr;
	uint32_t route_data;
};

struct msix {
	struct vm *vm;
	struct pci_dev *pd;
	unsigned cap;            /* config offset of the capability */
	unsigned nvec;
	uint32_t table_off, pba_off;   /* within the BAR */
	bool bound;              /* GSIs allocated and irqfds assigned */

	pthread_mutex_t lock;    /* everything below */
	bool enabled, fmask;     /* message control, mirrored on config writes */
	bool master;             /* command register's Bus Master Enable, mirrored */
	struct msix_vector *v;
	uint64_t *pba;
	uint64_t fired, pended;  /* stats */
	uint64_t reroutes;       /* route changes (bound: vm_msi_route calls) */
};

/* Add the capability to pd (before pci_bus_add) for nvec (1..2048) vectors
 * whose table (at table_off) and PBA (at pba_off) live in BAR bar, which
 * the caller declares with msix_bar_ops / m as opaque (or forwards to
 * msix_table_read/write). All vectors start masked. 0 or -errno. */
int msix_init(struct msix *m, struct pci_dev *pd, struct vm *vm, unsigned nvec,
	      unsigned bar, uint32_t table_off, uint32_t pba_off);
/* KVM binding: a GSI per vector (vm_alloc_msi_gsi) and an irqfd on its
 * eventfd (vm_irqfd). Before vCPUs start. 0 or -errno. */
int msix_bind(struct msix *m);
/* Unbind (when bound) and free. */
void msix_destroy(struct msix *m);
/* The table and PBA back to their reset values (every vector masked, no
 * message, nothing pending) and the capability's state mirrored from the
 * config space (the function's own, restored first): a hot-plug slot's
 * function made ready for the next device. */
void msix_reset(struct msix *m);

/* The pci_dev config_write hook calls this after every config write: one
 * overlapping the capability or the command register picks up enable /
 * function mask / bus master changes. Bus lock held. */
void msix_config_write(struct msix *m, unsigned off, unsigned len);

/* BAR accesses (offset relative to the BAR): the table and the PBA; dword
 * or aligned qword accesses, others ignored / read 0. */
void msix_bar_read(struct msix *m, uint64_t off, uint8_t *data, unsigned len);
void msix_bar_write(struct msix *m, uint64_t off, const uint8_t *data, unsigned len);
extern const struct io_ops msix_bar_ops;

bool msix_enabled(struct msix *m);
/* Raise vector vec. 0 = fired, 1 = masked or bus mastering off: PBA bit
 * set (fired on unmask / bus master enable),
 * -ENOTSUP = MSI-X disabled (caller falls back to INTx), -EINVAL = vec out
 * of range or not routable (dropped). Any thread. */
int msix_signal(struct msix *m, unsigned vec);
bool msix_pending(struct msix *m, unsigned vec);
/* The device was reset (virtio-pci: device_status 0): every pending bit is
 * cleared, so nothing the device raised for the old driver instance fires
 * when the new one unmasks a vector (as QEMU's msix_unuse_all_vectors
 * does). The table, enable and function mask are the PCI function's and
 * stay: the driver keeps them across a device reset (mvm has no PCI
 * function reset, FLR or bus reset, that would clear them). Any thread. */
void msix_clear_pending(struct msix *m);

/* Snapshots: the vector table and the pending bits. msix_load puts the
 * table back through the guest's table writes, the pending bits as they
 * were, then the capability's control word from saved (the function's
 * config space as pci_dev_load_begin returned it); routes follow once
 * the command register's Bus Master Enable is written back
 * (pci_dev_load_finish), and a vector pending and usable then fires
 * once, as after an unmask. 0 or -EINVAL with a message. */
struct snap_r;
struct snap_w;
void msix_save(struct msix *m, struct snap_w *w);
int msix_load(struct msix *m, struct snap_r *r, const uint8_t *saved_cfg, char *err,
	      size_t errlen);

#endif
