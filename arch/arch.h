/* What vmm/ and devices/ ask of the architecture. Exactly one arch/<name>/
 * implements this header (the Makefile's ARCH: x86 or s390); nothing
 * outside arch/ includes an architecture's own headers or has an #ifdef
 * for one.
 *
 * Order at VM start (vmm/kvm/vm.c, vmm/lib/mvm.c):
 *   KVM_CREATE_VM -> arch_vm_init -> guest RAM (below arch_layout.ram_hole
 *   and from 4 GiB) -> arch_board_create -> the disks -> arch_boot_load ->
 *   per vCPU: KVM_CREATE_VCPU, arch_vcpu_init -> vCPU threads. */
#ifndef MVM_ARCH_H
#define MVM_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/kvm/sandbox.h"

struct guest_mem;
struct kvm_irq_routing_entry;
struct kvm_run;
struct vm_console;
struct vcpu;
struct vm;

/* A guest-physical range the platform keeps for itself. */
struct arch_range {
	uint64_t base, size;
	const char *name;               /* "the IOAPIC": messages */
};

/* The guest's address map and interrupt assignments. */
struct arch_layout {
	const char *name;               /* "x86_64": messages */
	/* Guest RAM is [0, ram_hole); RAM beyond it continues at 4 GiB
	 * (4 GiB: no hole, one contiguous block from 0). */
	uint64_t ram_hole;
	/* virtio-mmio windows: base + i * size, i < virtio_mmio_max, each
	 * with the interrupt line virtio_irqs[i] (nvirtio_irqs of them). */
	uint64_t virtio_mmio_base, virtio_mmio_size;
	unsigned virtio_mmio_max;
	const unsigned *virtio_irqs;
	unsigned nvirtio_irqs;
	/* PCI: the 32-bit BAR window [pci_mmio_base, pci_mmio_end), and
	 * slot s's INTA# on interrupt line pci_intx_base + s % 4. */
	uint64_t pci_mmio_base, pci_mmio_end;
	unsigned pci_intx_base;
	/* Fixed MMIO ranges outside guest RAM that are not PCI's to take
	 * (x86: the IOAPIC, the LAPIC / MSI window, KVM's TSS and identity
	 * map, the virtio-mmio windows): a BAR the guest places over one
	 * stays unmapped, or it could shadow them (a notify ioeventfd over
	 * the IOAPIC's IOREGSEL). nfixed_mmio entries. */
	const struct arch_range *fixed_mmio;
	unsigned nfixed_mmio;
	/* A channel subsystem for virtio-ccw (s390). */
	bool has_ccw;
	/* Kernel parameters mvm always passes; device fragments follow, the
	 * user's part comes last so it can override. */
	const char *base_cmdline;
	/* Most vCPUs a guest may have. */
	unsigned max_vcpus;
};
extern const struct arch_layout arch_layout;

/* KVM capabilities mvm needs on this architecture (besides the generic
 * ones vmm/kvm/vm.c checks), ending with { 0, NULL }. */
struct arch_kvm_cap {
	int cap;
	const char *name;
};
extern const struct arch_kvm_cap arch_kvm_caps[];

/* VM-wide setup between KVM_CREATE_VM and guest RAM (x86: TSS and
 * identity map, irqchip, PIT, supported CPUID). Arch state for the VM goes
 * to *state (freed by arch_vm_fini). 0 or -errno + message. */
int arch_vm_init(struct vm *vm, void **state, char *err, size_t errlen);
void arch_vm_fini(void *state);

/* The interrupt controller's fixed routes (x86: PIC and IOAPIC pins),
 * into r (room for cap); returns how many there are. MSI routes follow. */
unsigned arch_irq_routes(struct kvm_irq_routing_entry *r, unsigned cap);
/* Lines arch_irq_routes covers: GSIs below it are pins, MSI GSIs start
 * at or above it. */
unsigned arch_irq_pins(void);

/* The board's own devices, before the disks: the console (*con says how
 * to drive it: its output is buffered for the control thread), the reset
 * line and mvm's exit port. Registered with vm_add_device. 0 or -errno. */
int arch_board_create(struct vm *vm, struct vm_console *con);

/* Put a virtio device on the channel subsystem (virtio-ccw), where the
 * architecture has one (arch_layout.has_ccw): from then on the VM owns dev,
 * as with virtio_pci_attach. 0 or -errno (-ENODEV without one). */
struct virtio_dev;
int arch_attach_ccw(struct vm *vm, struct virtio_dev *dev);

/* Hot-plug on the channel subsystem: dev on a subchannel of its own that
 * shows no device (*slot: its number) until arch_ccw_slot_set puts it in
 * (present) or takes it out again (its device reset), each time with a
 * channel report and machine check that have the guest look. 0 or -errno
 * (-ENODEV without a channel subsystem). arch_ccw_slot_free: may the slot
 * take a device (empty, and the guest has seen its last one go)? */
int arch_ccw_slot_attach(struct vm *vm, struct virtio_dev *dev, unsigned *slot);
int arch_ccw_slot_set(struct vm *vm, unsigned slot, bool present);
bool arch_ccw_slot_free(struct vm *vm, unsigned slot);
/* Does the slot hold a device now (a restore's check against its disks)? */
bool arch_ccw_slot_present(struct vm *vm, unsigned slot);

/* Booting a Linux kernel. */
struct arch_boot_cfg {
	const char *kernel_path;
	const char *initrd_path;        /* may be NULL */
	const char *cmdline;            /* complete command line, may be NULL */
	uint64_t mem_size;              /* guest RAM bytes */
	unsigned ncpus;
	/* The kernel image as arch_boot_check read it (NULL: read
	 * kernel_path): the file is opened once, and what was checked is
	 * what is loaded. */
	const struct boot_image *kernel_image;
};
struct arch_boot;                       /* how to start the vCPUs */

/* Check kernel, initrd and command line before anything starts: 0 or
 * -errno with a one-line message (what, which value, what to do). On
 * success, when keep is not NULL, the kernel image it read (free it with
 * boot_image_free) for arch_boot_cfg.kernel_image. */
struct boot_image;
int arch_boot_check(const struct arch_boot_cfg *cfg, struct boot_image *keep, char *err,
		    size_t errlen);
/* Load everything the guest reads at boot into guest RAM; *boot says how
 * to start the vCPUs (arch_boot_free). 0 or -errno + message. */
int arch_boot_load(struct vm *vm, const struct arch_boot_cfg *cfg, struct arch_boot **boot,
		   char *err, size_t errlen);
void arch_boot_free(struct arch_boot *boot);
/* One vCPU's architectural state, before any vCPU runs. boot NULL means
 * a restore sets the state next (arch_vcpu_load): x86 then sets CPUID,
 * the MSR defaults and the LAPIC's LINT pins as for a boot, but no
 * registers or MP state; s390x makes each vCPU as for a boot, stopped,
 * with no start PSW. 0 or -errno. */
int arch_vcpu_init(struct vcpu *v, unsigned ncpus, const struct arch_boot *boot, char *err,
		   size_t errlen);

/* A KVM exit vmm/kvm/vcpu.c does not handle itself (s390:
 * KVM_EXIT_S390_SIEIC and friends), on the vCPU's thread: -1 to keep
 * running, an exit status (MVM_EXIT_*, >= 0) to stop the VM with (a guest
 * error says why in v->fatal), or ARCH_EXIT_UNKNOWN for an exit the
 * architecture does not know either (vcpu.c then reports it as fatal). */
#define ARCH_EXIT_UNKNOWN (-2)
int arch_vcpu_exit(struct vcpu *v, struct kvm_run *run);

/* Before each KVM_RUN, on the vCPU's thread: wait while the architecture
 * keeps this vCPU stopped (s390: a secondary CPU until the guest starts it
 * with SIGP). 0: run it; positive: the VM is stopping, end the thread;
 * negative: a kick interrupted the wait (a pause): the caller looks at
 * the VM's requests and calls again. */
int arch_vcpu_before_run(struct vcpu *v);

/* Pausing (vmm/kvm/vcpu.h: vcpu_pause_all). arch_vcpu_paused runs on
 * each vCPU's thread as it parks (x86: KVM_KVMCLOCK_CTRL, so that the
 * guest does not take the pause for a soft lockup; advisory, its failure
 * ignored). arch_vm_clock_save, once every vCPU is parked, keeps the
 * guest's clock as it stands and arch_vm_clock_restore, before they run
 * again, sets it back (x86: KVM_GET_CLOCK / KVM_SET_CLOCK; s390: the TOD
 * clock's KVM_S390_VM_TOD attribute), so that the guest's time does not
 * jump by the pause, as QEMU and Cloud Hypervisor do. From the thread
 * that pauses (the main or control kind's filter allows the calls). 0
 * or -errno. */
void arch_vcpu_paused(struct vcpu *v);
/* The halt probe (vcpu_probe_stopped). arch_halt_probe: whether the
 * architecture needs it (x86: yes; s390x: no, a disabled wait ends the
 * VM). arch_vcpu_stopped: whether this vCPU has stopped for good, asked
 * on its own thread just out of KVM_RUN: true where it waits for nothing
 * it can get (x86: halted with interrupts off, as Linux's halt, and its
 * poweroff where it has no ACPI, leave every CPU; or never started). */
bool arch_halt_probe(void);
bool arch_vcpu_stopped(struct vcpu *v);
int arch_vm_clock_save(struct vm *vm);
/* One non-maskable interrupt to each of the VM's ncpus vCPUs (mvm_nmi),
 * from any thread, the vCPUs running or parked: 0, or -errno and a
 * message naming the vCPU that did not take it (those before it did);
 * -EOPNOTSUPP where the architecture has no such interrupt. */
int arch_vm_nmi(struct vm *vm, unsigned ncpus, char *err, size_t errlen);
/* The VM's power button (mvm_power_button), from any thread: 0 once the
 * guest has been told (s390x: the SCLP's Signal Quiesce), or -EOPNOTSUPP
 * and a message where the board has no such button. */
int arch_vm_power_button(struct vm *vm, char *err, size_t errlen);
int arch_vm_clock_restore(struct vm *vm);

/* Snapshots (docs/snapshot.md), from the thread that takes or restores
 * one. Save: the VM paused (every vCPU parked, its pending port or MMIO
 * access completed by vcpu_park; the clock kept by arch_vm_clock_save);
 * the calls append their sections to w. Load: on a VM made with the
 * snapshot's shape (same vCPUs, RAM and devices, arch_vcpu_init done),
 * before any vCPU runs; each reads its sections from f and sets them,
 * refusing with -EINVAL (a damaged or missing section) or -ENOTSUP (a
 * state this host cannot take: CPUID bits it cannot give, a TSC rate it
 * cannot run at) and a one-line message that names what differs,
 * having set nothing the caller must undo (the caller then destroys
 * the VM). An architecture without snapshots: -EOPNOTSUPP and a message.
 * 0 or -errno. */
struct snap_w;
struct snap_file;
/* Can guest RAM be a mapping the host write-protects (a file mapped
 * privately, copy-on-write; a shared file's pages the kernel tracks
 * for writing)? s390x: only where KVM has KVM_CAP_S390_COW (the CPU's
 * ESOP facility); without it the guest, not the host, takes the
 * protection exception of its first write to such a page. kvm_fd:
 * /dev/kvm's. */
bool arch_ram_cow_ok(int kvm_fd);
/* The descriptor of the architecture's own KVM device that arch_vm_save
 * reads (s390x: the FLIC's floating interrupts), for the filter of the
 * thread that takes snapshots; -1: none. */
int arch_vm_snap_fd(const struct vm *vm);
int arch_vm_save(struct vm *vm, struct snap_w *w, char *err, size_t errlen);
int arch_vm_load(struct vm *vm, const struct snap_file *f, char *err, size_t errlen);
int arch_vcpu_save(struct vcpu *v, struct snap_w *w, char *err, size_t errlen);
int arch_vcpu_load(struct vcpu *v, const struct snap_file *f, char *err, size_t errlen);

/* Where a vCPU stopped, in words ("RIP 0x... (64-bit long mode), bytes at
 * RIP: ..."), for the message of a fatal exit. */
void arch_describe_vcpu(const struct vcpu *v, const struct kvm_run *run, char *out,
			size_t outlen);

/* Guest core dumps (mvm_coredump, vmm/base/elfcore.h): the ELF machine
 * and byte order of this architecture's, and one vCPU's notes (x86:
 * NT_PRSTATUS and QEMU's CPU state, as QEMU's dump-guest-memory writes
 * them; s390x: the PSW and registers, the prefix, timers and control
 * registers, as Linux's own s390 core files hold them) into buf, at most cap bytes (ARCH_COREDUMP_NOTES_MAX is enough):
 * their size, or -errno and a message (-EOPNOTSUPP: no core dumps on
 * this architecture). From the thread that dumps, the VM paused. */
#define ARCH_COREDUMP_NOTES_MAX 2048u
struct arch_coredump {
	uint16_t machine;               /* EM_* */
	bool big_endian;
};
extern const struct arch_coredump arch_coredump;
int arch_vcpu_coredump_notes(struct vcpu *v, uint8_t *buf, size_t cap, char *err,
			     size_t errlen);

/* seccomp (vmm/kvm/sandbox.c): this architecture's system-call conventions,
 * and the ioctls and calls each kind of thread makes at run time besides
 * the generic ones. */
struct arch_sandbox {
	uint32_t audit_arch;            /* AUDIT_ARCH_* of this build's calls */
	uint32_t syscall_nr_limit;      /* numbers at or above it are refused (0: none) */
	/* mmap takes its arguments in memory (s390's old_mmap), out of the
	 * filter's reach: its protection cannot be checked, so no thread may
	 * map memory once filtered (ENOMEM: glibc's malloc falls back to brk
	 * and to the main arena). Else mmap's prot and flags are args 2, 3. */
	bool mmap_args_in_memory;
	const struct sandbox_ioctl *ioctls;
	unsigned nioctls;
	const struct sandbox_call *calls;
	unsigned ncalls;
};
extern const struct arch_sandbox arch_sandbox;

/* Inside a spin-wait: let the sibling hyperthread run (x86: PAUSE). */
void arch_cpu_relax(void);

/* A hash of the KVM probe's guest payload (vmm/kvm/kvm_probe.c caches
 * verdicts under it). The probe itself: kvm_probe_run in arch/. */
uint64_t arch_probe_hash(void);

#endif
