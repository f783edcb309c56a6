/* A PCI Express root port with a native hot-plug slot (PCIe Base 4.0
 * §7.5.3 the PCI Express capability's slot registers, §6.7 hot-plug), on
 * bus 0: how a running x86 guest learns that a disk arrived or is to go,
 * without ACPI and without a rescan. Linux's pciehp drives it.
 *
 * Why native PCIe hot-plug and not SHPC: pciehp ships in every distribution
 * kernel and needs only the capability's registers in the first 256 bytes
 * of config space, which conf1 reaches; SHPC needs its own capability and
 * controller model for the same single-slot case, and ACPI hot-plug (Cloud
 * Hypervisor's) needs ACPI, which mvm's guests do not get.
 *
 * The slot: attention button, power controller, hot-plug capable, no
 * command-completed events (NCCS: a write takes effect at once), data link
 * layer active reporting; no indicators, no MRL, no interlock. Events
 * reach the guest as INTx (level, the port's INTA# on bus 0, asserted
 * while an enabled event bit is set and HPIE is on), so the port needs no
 * MSI of its own.
 *
 * Life of a hot-added device: pcie_port_plug puts it behind the port
 * (presence detect and link active set, with their change events); the
 * guest powers the slot on and scans its secondary bus. Removal with the
 * guest's cooperation: pcie_port_press_button; the guest (after pciehp's
 * 5 s grace) unbinds its driver and powers the slot off; that write
 * detaches the device (pcie_port_wait_eject wakes). Surprise removal:
 * pcie_port_surprise_remove detaches it at once, as a pulled card does.
 * Either way the caller then resets the device for the next one (never
 * on the vCPU whose config write detached it: it holds the bus lock).
 *
 * Window: each port gets a 1 MiB memory window (placed when it is made,
 * in the bus's 32-bit window) that its child's BARs go in; no I/O or
 * prefetchable window is open at first (the guest may program them, mvm
 * decodes neither). The window is not enforced on the child's BARs: they
 * are mapped where the guest puts them, subject to pci.c's checks.
 *
 * Locking: everything under the bus lock (pci.h); the vCPU's config
 * writes arrive with it held. */
#ifndef MVM_PCIE_PORT_H
#define MVM_PCIE_PORT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "devices/pci.h"

#define PCIE_PORT_VENDOR      0x1b36   /* Red Hat's, as virtual root ports have */
#define PCIE_PORT_DEVICE      0x000c
#define PCIE_PORT_CLASS       0x060400 /* bridge, PCI-to-PCI, normal decode */
#define PCIE_PORT_WINDOW      (1u << 20)
#define PCIE_PORT_CAP_LEN     0x3c     /* PCI Express capability v2, with slot */

struct pcie_port {
	struct pci_dev pci;
	struct pci_bus *bus;
	unsigned number;           /* physical slot number (1..) */
	unsigned cap;              /* config offset of the PCIe capability */
	bool line;                 /* INTx level as last driven */
	bool powered_off;          /* Power Controller Control as last written */
	uint64_t off_at;           /* mono_ns of the guest's last power-off */
	bool eject_seen;           /* the guest powered an occupied slot off */
	pthread_cond_t eject;      /* signalled when it does (bus lock) */
	unsigned long long plugs, ejects, surprise;   /* counters */
};

/* Make the port, put it on bus on the next free slot with secondary bus
 * number `number` and physical slot `number`, its window placed. 0 or
 * -ENOSPC / -errno. */
int pcie_port_init(struct pcie_port *p, struct pci_bus *bus, unsigned number);
void pcie_port_destroy(struct pcie_port *p);

/* Put child (its BARs declared, not on any bus) behind the port and tell
 * the guest. 0, -EBUSY (occupied) or -ENOSPC (does not fit the window). */
int pcie_port_plug(struct pcie_port *p, struct pci_dev *child);
/* The two halves of pcie_port_plug, for a device whose threads start in
 * between: attach puts it behind the port (conf1 reaches it, the guest is
 * not told), announce sets presence and link and raises the events. */
int pcie_port_attach(struct pcie_port *p, struct pci_dev *child);
void pcie_port_announce(struct pcie_port *p);
/* Take the device from behind the port without telling the guest (its
 * BARs unmapped): a spare made behind its port, kept off the bus until a
 * disk is plugged. */
void pcie_port_detach(struct pcie_port *p);
/* Press the attention button: ask the guest to release the device.
 * -ENODEV when the slot is empty. */
int pcie_port_press_button(struct pcie_port *p);
/* Wait until the guest powered the slot off and the device was detached
 * (0), or deadline_ns (CLOCK_MONOTONIC) passed (-ETIMEDOUT). */
int pcie_port_wait_eject(struct pcie_port *p, uint64_t deadline_ns);
/* Pull the device out now; the guest is told its presence changed. */
void pcie_port_surprise_remove(struct pcie_port *p);
/* Whether a device is behind the port (bus lock taken). */
bool pcie_port_occupied(struct pcie_port *p);
/* Whether a device plugged now would be seen: the slot is empty, the
 * guest powered it off (after a surprise removal it does so once it has
 * dealt with it; before that its power-off would eject the new device)
 * and PCIE_PORT_SETTLE_NS have passed since: Linux's pciehp ignores
 * presence changes for 1 s after it powers a slot off (remove_board). */
bool pcie_port_ready(struct pcie_port *p, uint64_t now_ns);
#define PCIE_PORT_SETTLE_NS 1500000000ull

/* Snapshots of a slot: its configuration space (the bridge's bus numbers
 * and windows, the slot's control, presence and pending events) and how
 * long ago the guest powered it off, so that the settle time runs on.
 * The device a slot holds is saved as a device of the VM (its
 * vm_device_ops); a restore attaches it again (pcie_port_attach, not
 * announced) before the load, which refuses a slot whose presence is not
 * the snapshot's. The load replays the guest's writes through the masks,
 * stores presence, link and the pending events (write 1 to clear: not
 * writable), and drives the interrupt line as they say. Before the guest
 * runs. 0 or -errno with a message. */
struct snap_w;
struct snap_r;
int pcie_port_save(struct pcie_port *p, struct snap_w *w, char *err, size_t errlen);
int pcie_port_load(struct pcie_port *p, struct snap_r *r, char *err, size_t errlen);

#endif
