/* arch/arch.h for s390x on KVM, the VM as a whole: RAM from 0, the KVM
 * capabilities mvm needs, the per-VM state (s390.h) with KVM's
 * floating-interrupt controller and the channel subsystem's I/O
 * interrupts, and what the sandbox lets the threads do. The rest lives by
 * concern: console.c (the SCLP console), ccw.c (virtio-ccw devices),
 * load.c (kernel and initrd), vcpu.c (vCPU setup, start and stop),
 * intercept.c (the intercepts through which the guest talks to mvm). */
#include "arch/arch.h"
#include "arch/s390/css.h"
#include "arch/s390/layout.h"
#include "arch/s390/s390.h"
#include "arch/s390/sclp.h"
#include "devices/virtio_ccw.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <unistd.h>

const struct arch_layout arch_layout = {
	.name = "s390x",
	.ram_hole = 1ULL << 32,         /* no hole: RAM is one block from 0 */
	.virtio_mmio_max = 0,
	.nvirtio_irqs = 0,
	.pci_mmio_base = 0,
	.pci_mmio_end = 0,
	.nfixed_mmio = 0,               /* no PCI bus */
	/* The SCLP VT220 console. panic=-1 (on x86 it makes a panic a
	 * reset that ends mvm) matters here only for a panic before Linux's
	 * setup_ipl() registered its on_panic notifier: that one re-IPLs,
	 * status 0; every later panic stops in a disabled wait before the
	 * timeout is looked at (disabled_wait() in intercept.c). */
	.base_cmdline = "console=ttysclp0 panic=-1",
	.has_ccw = true,
	.max_vcpus = S390_MAX_VCPUS,
};

const struct arch_kvm_cap arch_kvm_caps[] = {
	{ KVM_CAP_SYNC_REGS, "SYNC_REGS" },
	{ KVM_CAP_S390_CSS_SUPPORT, "S390_CSS_SUPPORT" },
	{ KVM_CAP_S390_IRQCHIP, "S390_IRQCHIP" },
	{ 0, NULL },
};

/* virtio-ccw's I/O adapters: one per interruption subclass, id = ISC. */
#define S390_ADAPTERS 8

/* A floating I/O interrupt for subchannel 0.0.schno: the subchannel id
 * and number, the interruption parameter and the ISC's bit in the
 * interruption-identification word (KVM queues it by ISC). */
void io_interrupt(void *opaque, unsigned schno, uint32_t intparm, unsigned isc)
{
	struct s390_vm *sv = opaque;
	struct kvm_s390_interrupt irq = {
		.type = KVM_S390_INT_IO(0, 0, 0, schno),
		.parm = (0x0001u << 16) | schno,
		.parm64 = ((uint64_t)intparm << 32) | ((uint64_t)(isc & 7) << 27),
	};

	/* Every subchannel holds a virtio-ccw device (arch_attach_ccw), set
	 * before any vCPU ran. The guest can make this fail once per
	 * interrupt (KVM's queue full while it keeps I/O interrupts off):
	 * logged once per device, then counted. */
	if (ioctl(sv->vm->vm_fd, KVM_S390_INTERRUPT, &irq) < 0 && schno < sv->css.nsch)
		virtio_ccw_fault(sv->css.sch[schno].dev, VIRTIO_CCW_FAULT_IO_IRQ, -errno);
}

/* The FLIC with one I/O adapter per ISC, which KVM's adapter routes name:
 * an irqfd on such a route sets a virtio-ccw queue's indicator bits and
 * injects the adapter interrupt in the kernel, with no user-space thread
 * involved. swap: Linux numbers indicator bits from the most significant
 * end (bit_inv). Without it (-1), virtio-ccw sets the bits itself. */
static int flic_create(struct vm *vm)
{
	struct kvm_create_device cd = { .type = KVM_DEV_TYPE_FLIC };
	unsigned isc;

	if (ioctl(vm->vm_fd, KVM_CREATE_DEVICE, &cd) < 0)
		return -1;
	for (isc = 0; isc < S390_ADAPTERS; isc++) {
		struct kvm_s390_io_adapter a = { .id = isc, .isc = (uint8_t)isc, .swap = 1 };
		struct kvm_device_attr attr = {
			.group = KVM_DEV_FLIC_ADAPTER_REGISTER, .addr = (uintptr_t)&a,
		};

		if (ioctl((int)cd.fd, KVM_SET_DEVICE_ATTR, &attr) < 0) {
			close((int)cd.fd);
			return -1;
		}
	}
	return (int)cd.fd;
}

int arch_vm_init(struct vm *vm, void **state, char *err, size_t errlen)
{
	struct kvm_enable_cap cap = { .cap = KVM_CAP_S390_IRQCHIP };
	struct s390_vm *sv;

	/* Interrupt routing (irqfd, adapter routes) needs the in-kernel
	 * FLIC's irqchip mode, enabled before any vCPU exists. */
	if (ioctl(vm->vm_fd, KVM_ENABLE_CAP, &cap) < 0)
		return err_set(err, errlen, -errno, "KVM_ENABLE_CAP(S390_IRQCHIP): %s",
			       strerror(errno));
	sv = calloc(1, sizeof(*sv));
	if (!sv)
		return err_set(err, errlen, -ENOMEM, "out of memory");
	sv->vm = vm;
	for (unsigned i = 0; i < S390_MAX_VCPUS; i++)
		sv->cpu[i].start_efd = -1;
	sv->flic_fd = flic_create(vm);
	/* Asked now: a snapshot may be taken by a filtered thread. */
	sv->irq_state = ioctl(vm->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_S390_IRQ_STATE) > 0;
	if (css_init(&sv->css, &vm->mem, io_interrupt, sv)) {
		free(sv);
		return err_set(err, errlen, -ENOMEM, "channel subsystem: out of resources");
	}
	*state = sv;
	return 0;
}

void arch_vm_fini(void *state)
{
	struct s390_vm *sv = state;

	if (!sv)
		return;
	for (unsigned i = 0; i < S390_MAX_VCPUS; i++)
		if (sv->cpu[i].start_efd >= 0)
			close(sv->cpu[i].start_efd);
	if (sv->flic_fd >= 0)
		close(sv->flic_fd);
	css_fini(&sv->css);
	free(sv);
}

unsigned arch_irq_routes(struct kvm_irq_routing_entry *r, unsigned cap)
{
	/* No interrupt controller pins: I/O interrupts are floating
	 * interrupts and adapter routes. */
	(void)r;
	(void)cap;
	return 0;
}

unsigned arch_irq_pins(void)
{
	return 0;
}

/* s390x: mmap takes its arguments in memory (old_mmap): refused once
 * filtered. Floating interrupts are injected on the VM's fd from the
 * thread that raises them: I/O and SIGP on vCPUs, adapter interrupts
 * without an irqfd route on queue threads, the SCLP's service signal for
 * console input on the control thread; a vCPU's SIGP acts on another
 * vCPU's fd. A secondary vCPU waits for its SIGP START in poll, and the
 * guest's SET_IND_ADAPTER makes the eventfds of its queues' routes. */
#define S390_K_VCPU SANDBOX_K(SANDBOX_VCPU)
void arch_vcpu_paused(struct vcpu *v)
{
	(void)v;        /* s390 KVM has no pause notice for the guest */
}

bool arch_halt_probe(void)
{
	return false;   /* a disabled wait is an exit of its own (intercept.c) */
}

bool arch_vcpu_stopped(struct vcpu *v)
{
	(void)v;
	return false;
}

/* The guest's TOD clock: its epoch index too where KVM has the
 * multiple-epoch facility (TOD_EXT), else the 64 bits (TOD_LOW). */
static int s390_tod(struct vm *vm, bool set)
{
	struct s390_vm *sv = s390_vm(vm);
	struct kvm_device_attr a = {
		.group = KVM_S390_VM_TOD, .attr = KVM_S390_VM_TOD_EXT,
		.addr = (uint64_t)(uintptr_t)&sv->tod,
	};
	unsigned long req = set ? KVM_SET_DEVICE_ATTR : KVM_GET_DEVICE_ATTR;

	if (!set)
		sv->tod_ext = ioctl(vm->vm_fd, req, &a) == 0;
	if (sv->tod_ext)
		return set && ioctl(vm->vm_fd, req, &a) < 0 ? -errno : 0;
	a.attr = KVM_S390_VM_TOD_LOW;
	a.addr = (uint64_t)(uintptr_t)&sv->tod.tod;
	return ioctl(vm->vm_fd, req, &a) < 0 ? -errno : 0;
}

int arch_vm_clock_save(struct vm *vm)
{
	return s390_tod(vm, false);
}

int arch_vm_clock_restore(struct vm *vm)
{
	return s390_tod(vm, true);
}

int arch_vm_nmi(struct vm *vm, unsigned ncpus, char *err, size_t errlen)
{
	(void)vm;
	(void)ncpus;
	/* QEMU's "nmi" on s390x makes a restart interruption instead, which
	 * a Linux guest answers, by default, by stopping every CPU. */
	return err_set(err, errlen, -EOPNOTSUPP, "s390x has no non-maskable interrupt (the "
		       "nearest, a restart interruption, stops a Linux guest by default); the VM "
		       "runs on as it was");
}

int arch_vm_power_button(struct vm *vm, char *err, size_t errlen)
{
	struct sclp *sclp = s390_vm(vm)->sclp;

	if (!sclp)
		return err_set(err, errlen, -ENODEV, "the VM has no SCLP to signal a quiesce through");
	sclp_signal_quiesce(sclp);
	return 0;
}

#define S390_K_PAUSER (SANDBOX_K(SANDBOX_MAIN) | SANDBOX_K(SANDBOX_CONTROL) | SANDBOX_K(SANDBOX_API))
static const struct sandbox_ioctl s390_ioctls[] = {
	/* A subchannel's I/O interrupt, floating: queue threads, the
	 * console, and the API thread's image swap (its configuration
	 * change, virtio-ccw's config indicator). */
	{ S390_K_VCPU | SANDBOX_K(SANDBOX_QUEUE) | SANDBOX_K(SANDBOX_CONTROL) |
	  SANDBOX_K(SANDBOX_API), SANDBOX_FD_VM, KVM_S390_INTERRUPT },
	{ S390_K_VCPU, SANDBOX_FD_VCPU, KVM_S390_INTERRUPT },
	{ S390_K_VCPU, SANDBOX_FD_VCPU, KVM_S390_MEM_OP },
	{ S390_K_VCPU, SANDBOX_FD_VCPUS, KVM_S390_IRQ },
	{ S390_K_VCPU, SANDBOX_FD_VCPUS, KVM_S390_INITIAL_RESET },
	/* A hot-plugged disk's removal (vm.remove-device) resets its
	 * virtio-ccw device on the API thread, which unbinds the queues'
	 * adapter routes and irqfds (the vCPU, control and main threads have
	 * both from the common table). */
	{ SANDBOX_K(SANDBOX_API), SANDBOX_FD_VM, KVM_IRQFD },
	{ SANDBOX_K(SANDBOX_API), SANDBOX_FD_VM, KVM_SET_GSI_ROUTING },
	/* The thread that pauses keeps the TOD clock (arch_vm_clock_save). */
	{ S390_K_PAUSER, SANDBOX_FD_VM, KVM_GET_DEVICE_ATTR },
	{ S390_K_PAUSER, SANDBOX_FD_VM, KVM_SET_DEVICE_ATTR },
	/* A snapshot taken by a control server (mvm_snapshot, snap.c): each
	 * vCPU's pending interrupts, the storage keys, the FLIC's floating
	 * interrupts (and the CPU model, a VM attribute), all read; and the
	 * FLIC's adapter interrupts put back, which reading it takes out of
	 * the GISA. */
	{ SANDBOX_K(SANDBOX_API), SANDBOX_FD_VCPUS, KVM_S390_GET_IRQ_STATE },
	{ SANDBOX_K(SANDBOX_API), SANDBOX_FD_VM, KVM_S390_GET_SKEYS },
	{ SANDBOX_K(SANDBOX_API), SANDBOX_FD_ARCH_DEV, KVM_GET_DEVICE_ATTR },
	{ SANDBOX_K(SANDBOX_API), SANDBOX_FD_ARCH_DEV, KVM_SET_DEVICE_ATTR },
};
static const struct sandbox_call s390_calls[] = {
	{ S390_K_VCPU, __NR_poll },
	{ S390_K_VCPU, __NR_ppoll },
	{ S390_K_VCPU, __NR_eventfd2 },
};

const struct arch_sandbox arch_sandbox = {
	.audit_arch = AUDIT_ARCH_S390X,
	.mmap_args_in_memory = true,
	.ioctls = s390_ioctls,
	.nioctls = ARRAY_SIZE(s390_ioctls),
	.calls = s390_calls,
	.ncalls = ARRAY_SIZE(s390_calls),
};

bool arch_ram_cow_ok(int kvm_fd)
{
	return ioctl(kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_S390_COW) > 0;
}

int arch_vm_snap_fd(const struct vm *vm)
{
	return s390_vm(vm)->flic_fd;
}

void arch_cpu_relax(void)
{
	/* No spin-wait hint on z/Architecture; keep the compiler honest. */
	__asm__ __volatile__("" ::: "memory");
}
