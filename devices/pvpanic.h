/* pvpanic, as QEMU's pvpanic-pci (docs/specs/pvpanic.rst in QEMU's tree):
 * the guest kernel's panic notifier (Linux: CONFIG_PVPANIC_PCI) tells
 * mvm that it panicked, so the VM ends with status 123 (MVM_EXIT_PANICKED)
 * instead of rebooting (panic=-1) as if nothing had happened.
 *
 * PCI identity: vendor 0x1b36 (Red Hat), device 0x0011, revision 1, class
 * 08/80/00 (system peripheral, other), subsystem 0x1af4 / 0x1100 (QEMU's
 * defaults), no interrupt. BAR0: 16 bytes of 32-bit memory; its first byte
 * is the pvpanic register:
 *   read:  the events mvm supports, PVPANIC_PANICKED | PVPANIC_CRASH_LOADED
 *          (the driver sends only those);
 *   write: PVPANIC_PANICKED stops the VM (VM_STOP_GUEST_PANIC, status 123,
 *          one error line); PVPANIC_CRASH_LOADED (the kernel panicked and
 *          is handing over to its kdump kernel) is logged once and counted,
 *          and the VM goes on; any other value, or a write elsewhere in the
 *          BAR, is ignored, logged once per function and counted
 *          (pci_guest_errors in --stats). The other bytes read as zero.
 *
 * Accesses arrive on vCPU threads (vm->mmio's read lock); the counters are
 * atomic, and stopping the VM is vm_request_stop (any thread). */
#ifndef MVM_PVPANIC_H
#define MVM_PVPANIC_H

#include <stdint.h>

#include "devices/pci.h"
#include "vmm/base/log.h"

struct vm;

#define PVPANIC_VENDOR        0x1b36
#define PVPANIC_DEVICE        0x0011
#define PVPANIC_REVISION      1
#define PVPANIC_CLASS         0x088000  /* system peripheral, other */
#define PVPANIC_SUBSYS_VENDOR 0x1af4
#define PVPANIC_SUBSYS_ID     0x1100
#define PVPANIC_BAR_SIZE      16u

/* Event bits of the register (QEMU's include/hw/misc/pvpanic.h). */
#define PVPANIC_PANICKED      (1u << 0)
#define PVPANIC_CRASH_LOADED  (1u << 1)
#define PVPANIC_EVENTS        (PVPANIC_PANICKED | PVPANIC_CRASH_LOADED)

/* Guest mistakes (pci_guest_warn kinds). */
enum {
	PVPANIC_GW_VALUE = PCI_GW_FUNCTION,   /* a value with no event mvm knows */
	PVPANIC_GW_OFFSET,                    /* a write past the register */
};

struct pvpanic {
	struct pci_dev pci;
	struct vm *vm;
	struct pci_bus *bus;         /* set once on it (pvpanic_attach) */
	/* What the guest reported: kind 0 panicked, 1 crash kernel loaded;
	 * the first of each is logged, every one counted. */
	struct log_guest panicked, crash_loaded;
};

extern const struct io_ops pvpanic_bar_ops;   /* BAR0; opaque = struct pvpanic */

/* The function, not yet on a bus (unit tests drive it from here). */
void pvpanic_init(struct pvpanic *p, struct vm *vm);

/* A pvpanic function on bus, torn down with the VM's devices. 0 or -errno. */
int pvpanic_attach(struct vm *vm, struct pci_bus *bus);

#endif
