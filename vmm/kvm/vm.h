/* The VM as device models see it: guest memory, the two I/O buses, and the
 * KVM plumbing that lets a device run off the vCPU threads (ioeventfd for
 * guest notifications, irqfd for interrupts, MSI routes for MSI-X).
 *
 * Device code in devices/ stays KVM-free except through this interface, so
 * it runs unchanged in unit tests and benchmarks with plain eventfds.
 * Everything here is set up before vCPUs start, except vm_irqfd,
 * vm_msi_route and iobus (un)registration, which a PCI device may also call
 * while running (they take their own locks). */
#ifndef MVM_VM_H
#define MVM_VM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "vmm/base/guest_mem.h"
#include "vmm/base/iobus.h"
#include "vmm/base/log.h"

struct json;
struct snap_r;
struct snap_w;

#define VM_MAX_DEVICES 64

/* A device model registered with the VM, for orderly teardown and --stats. */
struct vm_device_ops {
	const char *kind;                              /* "virtio-blk", ... */
	int (*start)(void *dev);                       /* start its threads, before the vCPUs
							* run; may be NULL; 0 or -errno */
	void (*stop)(void *dev);                       /* stop threads; called once, vCPUs stopped */
	void (*stats_json)(void *dev, struct json *j);  /* one JSON object, may be NULL */
	/* A pause (may be NULL: nothing runs off the vCPUs): the device's
	 * threads take nothing more from the guest (on) or go on (off), and
	 * return at once; quiesce_wait then waits until that is done and,
	 * for on, host I/O in flight completed: 0 or -ETIMEDOUT at
	 * deadline_ns (CLOCK_MONOTONIC). vCPUs parked meanwhile. */
	void (*quiesce)(void *dev, bool on);
	int (*quiesce_wait)(void *dev, uint64_t deadline_ns);
	void (*destroy)(void *dev);                    /* free everything; after stop */
	/* Snapshots (docs/snapshot.md); both may be NULL: the device keeps
	 * nothing the guest could see (it is rebuilt as made). save: the VM
	 * paused, its queues quiet; write the device's state into the open
	 * section (-EBUSY with a message: the state cannot be taken now).
	 * load: on a device made with the same shape, before any vCPU runs
	 * and after start (a virtio device's threads wait for its queues);
	 * read the state from r, putting it in place through the paths the
	 * guest's own writes take, so that what a damaged snapshot holds is
	 * checked as the guest's writes are. 0 or -errno with a message. */
	int (*save)(void *dev, struct snap_w *w, char *err, size_t errlen);
	int (*load)(void *dev, struct snap_r *r, char *err, size_t errlen);
};

struct vm {
	int kvm_fd;
	int vm_fd;
	struct guest_mem mem;
	struct iobus pio;
	struct iobus mmio;
	unsigned ncpus;
	/* CLOCK_MONOTONIC ns of vCPU 0's first KVM_RUN (0: not yet); written
	 * once by that thread, read by --stats (relaxed). */
	uint64_t first_run_ns;

	/* Kernel command-line fragments added by devices (virtio_mmio.device=...). */
	char cmdline_extra[4096];
	size_t cmdline_extra_len;

	unsigned next_virtio_irq;     /* index into arch_layout.virtio_irqs */
	unsigned next_virtio_mmio;    /* index of the next free virtio-mmio slot */
	unsigned next_gsi;            /* next free GSI for MSI routes */

	struct {
		const struct vm_device_ops *ops;
		void *dev;
	} devices[VM_MAX_DEVICES];
	unsigned ndevices;

	void *arch;                   /* arch-private state (routing table...) */

	struct log_sink log;          /* where this VM's messages go */
	int kick_signal;              /* interrupts KVM_RUN (vcpu_kick) */
	bool host_pvm;                /* this host's KVM is PVM (kvm_pvm), known from
				       * the start: a fatal exit says so from inside
				       * the vCPU's filter, which allows no file access */
	bool sandbox;                 /* every thread of the VM enters its seccomp
				       * filter (vmm/kvm/sandbox.h) */
};

/* The guest's console device (x86: the COM1 UART; s390: the SCLP
 * console) as the VM's control thread drives it: input from the console
 * fd goes in through rx_push; output waits in the device's bounded buffer
 * (devices/console_buf.h) until the control thread takes it
 * (vmm/lib/console_out.c), so no vCPU ever writes to a host fd. One const
 * table per device type. */
struct vm_console_ops {
	/* Bytes of input the device takes now (0: its buffer is full). */
	size_t (*rx_room)(void *dev);
	/* Queue input for the guest; returns how many bytes were taken. */
	size_t (*rx_push)(void *dev, const uint8_t *buf, size_t len);
	/* The eventfd the device writes when output arrives in its empty
	 * buffer; before the guest runs. */
	void (*set_tx_wake)(void *dev, int efd);
	/* Copy up to len of the oldest output bytes, leaving them queued. */
	size_t (*tx_peek)(void *dev, uint8_t *buf, size_t len);
	/* The n oldest output bytes are done with: delivered to the host, or
	 * not (dropped: counted by the device). Frees room for the guest. */
	void (*tx_consume)(void *dev, size_t n, bool delivered);
	/* Bytes the guest wrote and read so far. */
	void (*counters)(void *dev, uint64_t *out, uint64_t *in);
};

struct vm_console {
	const struct vm_console_ops *ops;
	void *dev;
};

/* Why the VM stops (same values as enum mvm_exit_reason in vmm/mvm.h). */
enum vm_stop_reason {
	VM_STOP_POWEROFF,       /* guest poweroff or reboot */
	VM_STOP_GUEST_STATUS,   /* the guest wrote the exit port */
	VM_STOP_REQUESTED,      /* mvm_stop, Ctrl-A x */
	VM_STOP_GUEST_ERROR,    /* an exit mvm cannot handle (status 126) */
	VM_STOP_HOST_ERROR,     /* KVM or host failure (status 125) */
	VM_STOP_GUEST_CRASH,    /* the guest crashed: x86 triple fault (status 122) */
	VM_STOP_GUEST_PANIC,    /* the guest said its kernel panicked: pvpanic, an
				 * s390 disabled wait (status 123) */
};

/* The address space a guest notify is written in. */
enum vm_io_space {
	VM_IO_MMIO,             /* memory-mapped (virtio-mmio, virtio-pci BARs) */
	VM_IO_PIO,              /* x86 port I/O */
	VM_IO_CCW,              /* s390 virtio-ccw notify hypercall: addr is the
				 * subchannel id, the value the queue index */
};

/* KVM_IOEVENTFD: writes of `len` bytes at addr in space matching *datamatch
 * (any value when datamatch is NULL) signal fd without a VM exit reaching
 * userspace. 0 or -errno. */
int vm_ioeventfd(struct vm *vm, enum vm_io_space space, uint64_t addr, unsigned len,
		 const uint64_t *datamatch, int fd, bool deassign);

/* KVM_IRQFD: a write to fd injects an edge on gsi. 0 or -errno. */
int vm_irqfd(struct vm *vm, unsigned gsi, int fd, bool deassign);

/* Next free IOAPIC pin for a virtio-mmio device: 0 or -ENOSPC. */
int vm_alloc_irq(struct vm *vm, unsigned *gsi);

/* Next free virtio-mmio window (base address): 0 or -ENOSPC. */
int vm_alloc_virtio_mmio(struct vm *vm, uint64_t *base);

/* Show the guest host memory [hva, hva + size) at gpa, read-only
 * (KVM_MEM_READONLY): guest reads come from that memory without a VM
 * exit; guest writes still exit, as MMIO (KVM_EXIT_MMIO, or an ioeventfd
 * that matches). For a device's register window whose reads have no side
 * effects. slot: the memory slot to use (vm_virtio_mmio_slot), which must be
 * free. gpa, hva and size must be host-page aligned. 0, -EOPNOTSUPP where
 * this KVM has no read-only memory, or -errno. */
int vm_map_readonly(struct vm *vm, unsigned slot, uint64_t gpa, void *hva, uint64_t size);
/* Remove what vm_map_readonly(slot) mapped; before hva is unmapped. */
void vm_unmap_readonly(struct vm *vm, unsigned slot);
/* The memory slot for the virtio-mmio window at base (from
 * vm_alloc_virtio_mmio): one per window, after guest RAM's slots. */
unsigned vm_virtio_mmio_slot(const struct vm *vm, uint64_t base);

/* Allocate a GSI for an MSI route (not an IOAPIC pin): 0 or -ENOSPC. */
int vm_alloc_msi_gsi(struct vm *vm, unsigned *gsi);

/* Point gsi at an MSI message (address/data from an MSI-X table entry):
 * its entry in the routing table mvm keeps changes, and the table goes to
 * KVM_SET_GSI_ROUTING only when the route did change; masked == true
 * removes the route so irqfd writes are dropped. 0 or -errno. */
int vm_msi_route(struct vm *vm, unsigned gsi, uint64_t addr, uint32_t data, bool masked);

/* Point gsi (from vm_alloc_msi_gsi) at an s390 I/O adapter's indicators:
 * an irqfd write on it makes KVM set bit ind_offset of the indicators at
 * guest address ind_addr and bit summary_offset of the summary at
 * summary_addr and, when the summary bit was clear, inject the adapter's
 * interrupt (KVM_IRQ_ROUTING_S390_ADAPTER). remove drops the route.
 * 0 or -errno. */
int vm_adapter_route(struct vm *vm, unsigned gsi, uint64_t ind_addr, uint64_t summary_addr,
		     uint64_t ind_offset, uint32_t summary_offset, uint32_t adapter_id, bool remove);

/* Append " <text>" to the guest kernel command line. Before boot only.
 * 0 or -ENOSPC. */
__attribute__((format(printf, 2, 3)))
int vm_cmdline_append(struct vm *vm, const char *fmt, ...);

/* arch_layout.base_cmdline + " " + extra (device fragments, may be empty/NULL) +
 * " " + user (may be NULL). 0, or -ENOSPC when it does not fit in len. */
int vm_compose_cmdline(const char *extra, const char *user, char *out, size_t len);

/* Register a device for teardown and stats: 0 or -ENOSPC. */
int vm_add_device(struct vm *vm, const struct vm_device_ops *ops, void *dev);

/* KVM_IRQ_LINE: drive a legacy (PIC/IOAPIC) interrupt line; for emulated
 * register-level devices such as the UART. 0 or -errno. */
int vm_irq_line(struct vm *vm, unsigned gsi, bool level);

/* Ask the VMM to stop the VM with a reason and the status mvm(1) exits
 * with (guest poweroff, exit port, fatal vCPU exit); msg (may be NULL)
 * says what went wrong. The first request wins; callable from any thread
 * and from a signal handler (lock-free atomics and one eventfd write);
 * returns at once (the VM's control thread stops the vCPUs). */
void vm_request_stop(struct vm *vm, enum vm_stop_reason why, int status, const char *msg);
/* The guest asked to be reset (x86: the i8042's reset line; s390: a
 * re-IPL): a poweroff with status 0, as vm_request_stop(VM_STOP_POWEROFF)
 * makes, that vm_stop_reboot then says was a reboot, where it wins. */
void vm_request_reboot(struct vm *vm);
bool vm_stop_reboot(const struct vm *vm);

#endif
