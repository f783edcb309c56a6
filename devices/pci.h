/* PCI bus 0 for x86 guests: a host bridge at 00:00.0, devices at 00:01.0 and
 * up, reachable through configuration mechanism #1 (address latch at port
 * 0xCF8, data window 0xCFC-0xCFF on vm->pio), which Linux probes without
 * ACPI or MMCONFIG.
 *
 * Each function has 4 KiB of config space storage (conf1 reaches the first
 * 256 bytes; the rest is there for a later ECAM window). Every access is
 * bounds-checked: accesses beyond 4 KiB, of a width other than 1/2/4, or
 * that straddle a capability's boundary are ignored (reads give 0).
 * Guest writes go through per-byte masks: wmask (writable bits) and w1c
 * (write-1-to-clear bits); everything else is read-only.
 *
 * BARs: memory BARs only (32-bit or 64-bit, optionally prefetchable), power
 * of two sized, sized by the guest with the usual all-ones write (the write
 * mask makes the size bits read back as zero). mvm acts as the firmware and
 * places every BAR in the bus's window (pci_bus_init) when the
 * device is added; the guest may move them. A BAR's range is registered on
 * vm->mmio only while memory decode is enabled in the command register, and
 * is re-registered when the guest moves it. A BAR placed over guest RAM, over
 * one of the board's fixed ranges (arch_layout.fixed_mmio: the IOAPIC, the
 * LAPIC, ...), over another mapped BAR or any other MMIO range stays
 * unmapped, as if memory decode were off for it (pci_guest_warn: logged
 * once per function, counted), until the guest moves it somewhere valid. mvm's functions have memory
 * BARs only; an I/O BAR would need the same check against the board's
 * ports.
 *
 * Locking: bus->lock serialises all config accesses and BAR (un)mapping.
 * Config accesses arrive on vCPU threads under vm->pio's read lock; mapping
 * a BAR takes vm->mmio's write lock (a different bus, so no self-deadlock).
 * Device callbacks (pci_dev_ops) run with bus->lock held: they must not
 * issue config accesses themselves. The one register read without the
 * lock is the command register (pci_command: device threads ask whether
 * INTx is disabled or bus mastering enabled): every config byte is
 * therefore stored with an atomic store, and pci_command loads atomically;
 * everything else in cfg[] is only accessed under the lock. */
#ifndef MVM_PCI_H
#define MVM_PCI_H

#include <pthread.h>
#include <stdbool.h>
#include <linux/pci_regs.h>
#include <stdint.h>

#include "arch/arch.h"
#include "vmm/base/iobus.h"
#include "vmm/base/log.h"

struct vm;

#define PCI_CFG_SIZE          4096u
#define PCI_CONF1_SIZE        256u     /* reachable through conf1 */
#define PCI_MAX_SLOTS         32u
#define PCI_NUM_BARS          6u
#define PCI_MAX_CAPS          16u
#define PCI_CAP_START         0x40u

#define PCI_CONF1_ADDR_PORT   0xcf8
#define PCI_CONF1_DATA_PORT   0xcfc
#define PCI_CONF1_ENABLE      0x80000000u

/* Type 0 header registers, command and status bits, BAR flags and
 * capability ids are <linux/pci_regs.h>'s; it has no name for the class
 * code's base byte. */
#define PCI_REG_CLASS         0x0b     /* PCI_CLASS_DEVICE + 1 */

/* Host bridge identity (class 06/00 is what Linux's conf1 sanity check looks for). */
#define PCI_HB_VENDOR         0x8086
#define PCI_HB_DEVICE         0x0d57

struct pci_dev;

/* Device hooks, const per device type; any may be NULL. Called with the bus
 * lock held. */
struct pci_dev_ops {
	/* Before a guest config read of [off, off+len): refresh dynamic bytes. */
	void (*config_read)(struct pci_dev *pd, unsigned off, unsigned len);
	/* After a guest config write to [off, off+len) went through the masks. */
	void (*config_write)(struct pci_dev *pd, unsigned off, unsigned len);
	/* BAR bar was mapped at addr (mapped) or unmapped from addr. */
	void (*bar_map)(struct pci_dev *pd, unsigned bar, uint64_t addr, bool mapped);
};

struct pci_bar {
	uint64_t size;             /* 0: unused */
	uint32_t flags;            /* PCI_BASE_ADDRESS_MEM_TYPE_64 | PCI_BASE_ADDRESS_MEM_PREFETCH */
	const struct io_ops *ops;
	void *opaque;
	bool mapped;               /* registered on vm->mmio at mapped_addr */
	uint64_t mapped_addr;
};

struct pci_cap_range {
	uint16_t off, len;
};

struct pci_dev {
	struct pci_bus *bus;       /* NULL until pci_bus_add / pci_bus_add_child */
	unsigned slot;             /* device number on its bus (0 behind a port) */
	/* Behind a bridge (a PCIe root port, pcie_port.h): the bus number it
	 * had when plugged (messages), and the bridge. A bridge's device 0 on
	 * its secondary bus is its child (NULL: the slot is empty). Both
	 * under the bus lock. */
	unsigned busno;
	struct pci_dev *parent, *child;
	const char *name;          /* for messages */
	uint8_t cfg[PCI_CFG_SIZE];
	uint8_t wmask[PCI_CFG_SIZE];
	uint8_t w1c[PCI_CFG_SIZE];
	struct pci_bar bars[PCI_NUM_BARS];
	struct pci_cap_range caps[PCI_MAX_CAPS];
	unsigned ncaps;
	unsigned cap_next;         /* next free config offset for a capability */
	const struct pci_dev_ops *ops;
	void *opaque;
	/* Where its messages go: the VM's, from pci_bus_add (tests may set
	 * their own); NULL drops them. */
	const struct log_sink *log;
	/* What the guest did wrong with this function (pci_guest_warn). */
	struct log_guest guest;
};

/* Kinds of guest mistakes, each logged once per function; the function's
 * own kinds (its device's registers) follow from PCI_GW_FUNCTION on. */
enum {
	PCI_GW_BAR,                /* a BAR placed where it cannot be mapped */
	PCI_GW_MSIX_ADDR,          /* an MSI-X message outside the LAPIC window */
	PCI_GW_MSIX_ROUTE,         /* an MSI-X message KVM would not route */
	PCI_GW_FUNCTION,
};

/* A guest mistake on pd, which the guest may repeat at will: the first of
 * each kind is logged (prefixed "pci 00:SS.0 (name): "), every one counted
 * (pci_guest_errors). Any thread. */
__attribute__((format(printf, 3, 4)))
void pci_guest_warn(struct pci_dev *pd, unsigned kind, const char *fmt, ...);
/* How many: what --stats reports as pci_guest_errors. */
static inline unsigned long long pci_guest_errors(const struct pci_dev *pd)
{
	return log_guest_count(&pd->guest);
}

struct pci_bus {
	struct vm *vm;
	const struct arch_range *fixed;  /* no BAR over these (the board's) */
	unsigned nfixed;
	pthread_mutex_t lock;
	uint32_t conf1_addr;       /* latched address register */
	struct pci_dev host_bridge;
	struct pci_dev *slots[PCI_MAX_SLOTS];
	uint64_t mmio_next;        /* firmware BAR placement cursor */
	uint64_t mmio_end;         /* end of the 32-bit BAR window (exclusive) */
	unsigned intx_base;        /* slot s's INTA# is line intx_base + s % 4 */
};

/* Set up a function's header: ids, class (0xCCSSPP: class, subclass,
 * prog-if), revision, subsystem ids, type 0 header with the standard write
 * masks (command: I/O, memory, bus master, INTx disable; interrupt line). */
void pci_dev_init(struct pci_dev *pd, const char *name, uint16_t vendor, uint16_t device,
		  uint32_t class_code, uint8_t revision, uint16_t subsys_vendor,
		  uint16_t subsys_id, const struct pci_dev_ops *ops, void *opaque);

/* Declare memory BAR bar (0..5; a 64-bit BAR also uses bar+1) of size bytes
 * (power of two, >= 16; <= 2 GiB for 32-bit BARs), flags PCI_BASE_ADDRESS_MEM_TYPE_64 /
 * PCI_BASE_ADDRESS_MEM_PREFETCH, accesses dispatched to ops/opaque with offsets relative
 * to the BAR. Before pci_bus_add. 0 or -EINVAL / -EBUSY. */
int pci_dev_set_bar(struct pci_dev *pd, unsigned bar, uint64_t size, uint32_t flags,
		    const struct io_ops *ops, void *opaque);

/* Append a capability of len bytes (>= 2, header included) with id to the
 * list (dword aligned, linked through PCI_CAPABILITY_LIST and the next bytes,
 * sets the status capability bit). Returns its config offset, or -ENOSPC.
 * The body (from off + 2) is the caller's: fill pd->cfg and pd->wmask. */
int pci_cap_add(struct pci_dev *pd, uint8_t id, unsigned len);

/* Write mask for a little-endian field of len (1, 2, 4) bytes at off. */
void pci_set_wmask(struct pci_dev *pd, unsigned off, unsigned len, uint32_t mask);

/* Bus lifetime: registers conf1 ports on vm->pio, adds the host bridge.
 * The board says where BARs go ([mmio_base, mmio_end)), where slot 0's
 * INTA# is wired (intx_base), and which fixed ranges no BAR may cover
 * (nfixed entries of fixed, kept by reference: arch_layout's). */
int pci_bus_init(struct pci_bus *bus, struct vm *vm, uint64_t mmio_base, uint64_t mmio_end,
		 unsigned intx_base, const struct arch_range *fixed, unsigned nfixed);
void pci_bus_destroy(struct pci_bus *bus);

/* Put pd on the next free slot (1..31), place its BARs in the 32-bit PCI
 * window (decode stays off until the guest enables it). 0 or -ENOSPC. */
int pci_bus_add(struct pci_bus *bus, struct pci_dev *pd);
/* Unmap pd's BARs and free its slot (or its place behind its bridge). */
void pci_bus_remove(struct pci_bus *bus, struct pci_dev *pd);

/* Put pd behind bridge (on bus 0, a header type 1 function) as device 0
 * of its secondary bus, its BARs placed in the bridge's memory window as
 * firmware would (the guest may move them). 0, -EBUSY (a child there
 * already) or -ENOSPC (the BARs do not fit the window). Bus lock held by
 * the caller (the bridge's code), which tells the guest. */
int pci_bus_add_child_locked(struct pci_bus *bus, struct pci_dev *bridge, struct pci_dev *pd);
/* Take pd from behind its bridge: BARs unmapped, config accesses to it
 * master-abort from now on. Bus lock held. */
void pci_bus_detach_child_locked(struct pci_dev *pd);

/* The IOAPIC line pd's INTA# reaches: bus 0's wiring for its slot, or,
 * behind a bridge, its bridge's (the PCI-to-PCI swizzle of device 0's
 * INTA# is the bridge's INTA#). */
unsigned pci_dev_intx_line(const struct pci_dev *pd);

/* Config space access of one function (what conf1, and unit tests, use).
 * Out-of-bounds / wrong width / capability-straddling accesses are ignored
 * and read as 0. Takes the bus lock when pd is on a bus. */
void pci_cfg_read(struct pci_dev *pd, unsigned off, uint8_t *data, unsigned len);
void pci_cfg_write(struct pci_dev *pd, unsigned off, const uint8_t *data, unsigned len);
uint32_t pci_cfg_read32(struct pci_dev *pd, unsigned off);   /* helpers on top */
void pci_cfg_write32(struct pci_dev *pd, unsigned off, uint32_t v);
void pci_cfg_write16(struct pci_dev *pd, unsigned off, uint16_t v);

/* The command register (PCI_COMMAND_*) from any thread, without the bus
 * lock: atomic loads pairing with the config write's atomic stores. */
uint16_t pci_command(const struct pci_dev *pd);

/* Current guest-programmed address of a BAR (64-bit BARs combine both halves). */
uint64_t pci_bar_addr(const struct pci_dev *pd, unsigned bar);

/* The conf1 port handlers, exposed for tests (opaque = bus). */
extern const struct io_ops pci_conf1_addr_ops, pci_conf1_data_ops;

/* Snapshots: a function's conf1-reachable config space (256 bytes).
 * pci_dev_load_begin checks that the saved function is this one (vendor,
 * device, class, header type, subsystem: else -EINVAL naming both) and
 * replays its BARs and interrupt line through the guest's write path
 * (masks, placement checks); saved gets the 256 bytes, for the function's
 * own capability registers (MSI-X control, ...), which its device
 * replays next; pci_dev_load_finish then writes the command register,
 * which maps the BARs. pci_dev_load does both, for a function with
 * nothing of its own. The bus's conf1 address latch goes with the VM
 * (pci_bus_conf1_get/set): a guest paused between writing it and
 * reading 0xCFC reads the right register after a restore. */
struct snap_r;
struct snap_w;
int pci_dev_save(struct pci_dev *pd, struct snap_w *w, char *err, size_t errlen);
int pci_dev_load_begin(struct pci_dev *pd, struct snap_r *r, uint8_t saved[PCI_CONF1_SIZE],
		       char *err, size_t errlen);
void pci_dev_load_finish(struct pci_dev *pd, const uint8_t saved[PCI_CONF1_SIZE]);
int pci_dev_load(struct pci_dev *pd, struct snap_r *r, char *err, size_t errlen);
uint32_t pci_bus_conf1_get(struct pci_bus *bus);
void pci_bus_conf1_set(struct pci_bus *bus, uint32_t addr);
/* Interrupt line of a bus-0 device's INTA#: intx_base + slot % 4. */
unsigned pci_intx_pin(const struct pci_bus *bus, unsigned slot);

#endif
