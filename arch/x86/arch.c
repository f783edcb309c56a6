/* arch/arch.h for x86-64: the address map, the in-kernel irqchip and PIT,
 * the board's legacy devices (COM1, i8042, exit port), booting through
 * arch/x86/boot.c, and the PAUSE hint. */
#include "arch/arch.h"
#include "arch/x86/boot.h"
#include "arch/x86/diag.h"
#include "arch/x86/layout.h"
#include "arch/x86/probe.h"
#include "arch/x86/x86.h"
#include "devices/exitport.h"
#include "devices/i8042.h"
#include "devices/serial.h"
#include "vmm/kvm/kvm.h"
#include "vmm/base/util.h"

#include <linux/audit.h>
#include "vmm/kvm/vcpu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

static const unsigned x86_virtio_irqs[] = X86_VIRTIO_IRQS;

/* What the guest must not put a PCI BAR over (arch.h). The PCI window
 * itself ends below the IOAPIC; a guest may move BARs anywhere. */
static const struct arch_range x86_fixed_mmio[] = {
	{ X86_VIRTIO_MMIO_BASE, X86_VIRTIO_MMIO_MAX * X86_VIRTIO_MMIO_SIZE, "the virtio-mmio windows" },
	{ X86_IOAPIC_ADDR, X86_IOAPIC_SIZE, "the IOAPIC" },
	{ X86_MSI_WINDOW_ADDR, X86_MSI_WINDOW_SIZE, "the LAPIC / MSI window" },
	{ X86_KVM_IDMAP_ADDR, X86_KVM_IDMAP_SIZE, "KVM's identity map page" },
	{ X86_KVM_TSS_ADDR, X86_KVM_TSS_SIZE, "KVM's TSS" },
};

const struct arch_layout arch_layout = {
	.name = "x86_64",
	.ram_hole = X86_MMIO_HOLE_START,
	.virtio_mmio_base = X86_VIRTIO_MMIO_BASE,
	.virtio_mmio_size = X86_VIRTIO_MMIO_SIZE,
	.virtio_mmio_max = X86_VIRTIO_MMIO_MAX,
	.virtio_irqs = x86_virtio_irqs,
	.nvirtio_irqs = ARRAY_SIZE(x86_virtio_irqs),
	.pci_mmio_base = X86_PCI_MMIO32_BASE,
	.pci_mmio_end = X86_PCI_MMIO32_END,
	.pci_intx_base = X86_PCI_INTX_BASE,
	.fixed_mmio = x86_fixed_mmio,
	.nfixed_mmio = ARRAY_SIZE(x86_fixed_mmio),
	/* Serial console, reboot through the i8042 (the VM ends with status
	 * 0), no PS/2 mouse/mux/PnP probing, no timer check (slow under
	 * nested virtualization): a lean guest without ACPI. */
	.base_cmdline = "console=ttyS0 reboot=k panic=-1 i8042.noaux i8042.nomux "
			"i8042.nopnp i8042.dumbkbd no_timer_check",
	.max_vcpus = X86_MAX_VCPUS,
};

const struct arch_kvm_cap arch_kvm_caps[] = {
	{ KVM_CAP_IRQCHIP, "IRQCHIP" },
	{ KVM_CAP_SET_TSS_ADDR, "SET_TSS_ADDR" },
	{ KVM_CAP_SET_IDENTITY_MAP_ADDR, "SET_IDENTITY_MAP_ADDR" },
	{ KVM_CAP_PIT2, "PIT2" },
	{ KVM_CAP_EXT_CPUID, "EXT_CPUID" },
	{ 0, NULL },
};

static int x86_get_cpuid(int kvm_fd, struct kvm_cpuid2 **out)
{
	unsigned nent = 128;

	for (;;) {
		struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + nent * sizeof(c->entries[0]));

		if (!c)
			return -ENOMEM;
		c->nent = nent;
		if (ioctl(kvm_fd, KVM_GET_SUPPORTED_CPUID, c) == 0) {
			*out = c;
			return 0;
		}
		free(c);
		if (errno != E2BIG || nent >= 4096)
			return -errno;
		nent *= 2;
	}
}

int arch_vm_init(struct vm *vm, void **state, char *err, size_t errlen)
{
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };
	uint64_t idmap = X86_KVM_IDMAP_ADDR;
	struct x86_vm *xv;
	const char *what;
	int ret;

	/* Both must precede vCPU creation (Intel needs them for real mode). */
	what = "KVM_SET_TSS_ADDR";
	if (ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, (unsigned long)X86_KVM_TSS_ADDR) < 0)
		goto fail;
	what = "KVM_SET_IDENTITY_MAP_ADDR";
	if (ioctl(vm->vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &idmap) < 0)
		goto fail;
	what = "KVM_CREATE_IRQCHIP";
	if (ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0)
		goto fail;
	what = "KVM_CREATE_PIT2";
	if (ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit) < 0)
		goto fail;
	/* Exceptions with their payloads apart (api.rst,
	 * KVM_CAP_EXCEPTION_PAYLOAD), as QEMU asks: a #PF (or #DB) pending
	 * for a nested guest at a snapshot keeps its CR2 (DR6) in the
	 * events, for the guest's hypervisor to intercept after the restore,
	 * rather than written into the registers first; and a pending
	 * exception is told from an injected one. Where KVM has it (4.20). */
	if (ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_EXCEPTION_PAYLOAD) > 0) {
		struct kvm_enable_cap cap = { .cap = KVM_CAP_EXCEPTION_PAYLOAD, .args = { 1 } };

		what = "KVM_ENABLE_CAP(KVM_CAP_EXCEPTION_PAYLOAD)";
		if (ioctl(vm->vm_fd, KVM_ENABLE_CAP, &cap) < 0)
			goto fail;
	}
	xv = calloc(1, sizeof(*xv));
	if (!xv)
		return err_set(err, errlen, -ENOMEM, "out of memory");
	ret = x86_get_cpuid(vm->kvm_fd, &xv->cpuid);
	if (ret) {
		free(xv);
		return err_set(err, errlen, ret, "KVM_GET_SUPPORTED_CPUID: %s", strerror(-ret));
	}
	x86_cpuid_add_emulated(xv->cpuid,
			       ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_TSC_DEADLINE_TIMER) > 0);
	x86_snap_probe(vm, xv);
	*state = xv;
	return 0;
fail:
	ret = -errno;
	return err_set(err, errlen, ret, "%s: %s", what, strerror(-ret));
}

void arch_vm_fini(void *state)
{
	struct x86_vm *xv = state;

	if (xv) {
		free(xv->cpuid);
		free(xv->msr_list);
	}
	free(xv);
}

static void route(struct kvm_irq_routing_entry *r, unsigned n, unsigned cap, unsigned gsi,
		  unsigned chip, unsigned pin)
{
	if (n >= cap)
		return;
	memset(&r[n], 0, sizeof(r[n]));
	r[n].gsi = gsi;
	r[n].type = KVM_IRQ_ROUTING_IRQCHIP;
	r[n].u.irqchip.irqchip = chip;
	r[n].u.irqchip.pin = pin;
}

unsigned arch_irq_routes(struct kvm_irq_routing_entry *r, unsigned cap)
{
	unsigned n = 0, i;

	/* KVM's default wiring, which the MP table describes (ISA IRQ n ->
	 * IOAPIC pin n, the PIT on GSI 0 -> pin 0): GSI 0-15 reach the PICs,
	 * GSI 0-23 the IOAPIC pin of the same number. */
	for (i = 0; i < 16; i++, n++)
		route(r, n, cap, i, i < 8 ? KVM_IRQCHIP_PIC_MASTER : KVM_IRQCHIP_PIC_SLAVE, i % 8);
	for (i = 0; i < X86_IOAPIC_PINS; i++, n++)
		route(r, n, cap, i, KVM_IRQCHIP_IOAPIC, i);
	return n;
}

unsigned arch_irq_pins(void)
{
	return X86_IOAPIC_PINS;
}

int arch_board_create(struct vm *vm, struct vm_console *con)
{
	struct x86_vm *xv = vm_kvm(vm)->arch_state;
	struct serial *uart;
	int ret;

	ret = serial_create(vm, X86_COM1_PORT, X86_COM1_IRQ, &uart);
	if (!ret)
		*con = (struct vm_console){ .ops = &console_port_vm_ops, .dev = &uart->con };
	if (!ret)
		ret = i8042_create(vm, X86_I8042_DATA_PORT, &xv->i8042);
	if (!ret)
		ret = exitport_create(vm, X86_MVM_EXIT_PORT, X86_POST_PORT);
	return ret;
}

int arch_attach_ccw(struct vm *vm, struct virtio_dev *dev)
{
	(void)vm;
	(void)dev;
	return -ENODEV;         /* no channel subsystem on a PC */
}

int arch_ccw_slot_attach(struct vm *vm, struct virtio_dev *dev, unsigned *slot)
{
	(void)slot;
	return arch_attach_ccw(vm, dev);
}

int arch_ccw_slot_set(struct vm *vm, unsigned slot, bool present)
{
	(void)vm;
	(void)slot;
	(void)present;
	return -ENODEV;
}

bool arch_ccw_slot_free(struct vm *vm, unsigned slot)
{
	(void)vm;
	(void)slot;
	return false;
}

bool arch_ccw_slot_present(struct vm *vm, unsigned slot)
{
	(void)vm;
	(void)slot;
	return false;
}

struct arch_boot {
	struct x86_boot_info info;
};

static struct x86_boot_cfg x86_cfg(const struct arch_boot_cfg *cfg)
{
	return (struct x86_boot_cfg){
		.kernel_path = cfg->kernel_path, .initrd_path = cfg->initrd_path,
		.cmdline = cfg->cmdline, .mem_size = cfg->mem_size, .ncpus = cfg->ncpus,
		.kernel_image = cfg->kernel_image,
	};
}

int arch_boot_check(const struct arch_boot_cfg *cfg, struct boot_image *keep, char *err,
		    size_t errlen)
{
	struct x86_boot_cfg c = x86_cfg(cfg);

	return x86_boot_check_keep(&c, keep, err, errlen);
}

int arch_boot_load(struct vm *vm, const struct arch_boot_cfg *cfg, struct arch_boot **boot,
		   char *err, size_t errlen)
{
	struct x86_boot_cfg c = x86_cfg(cfg);
	struct arch_boot *b = calloc(1, sizeof(*b));
	int ret;

	if (!b)
		return err_set(err, errlen, -ENOMEM, "out of memory");
	ret = x86_boot_load(&vm->mem, &c, &b->info, err, errlen);
	if (ret) {
		free(b);
		return ret;
	}
	*boot = b;
	return 0;
}

void arch_boot_free(struct arch_boot *boot)
{
	free(boot);
}

int x86_arch_vcpu_init(struct vcpu *v, unsigned ncpus, const struct x86_boot_info *info,
		       char *err, size_t errlen)
{
	const struct x86_vm *xv = vm_kvm(v->vm)->arch_state;

	return x86_vcpu_init(v->fd, v->id, ncpus, xv->cpuid, info, err, errlen);
}

int arch_vcpu_init(struct vcpu *v, unsigned ncpus, const struct arch_boot *boot, char *err,
		   size_t errlen)
{
	const struct x86_vm *xv = vm_kvm(v->vm)->arch_state;

	/* A restore: arch_vcpu_load sets the registers, the MP state and
	 * the rest from the snapshot next (snap.c). */
	if (!boot)
		return x86_vcpu_init_cpu(v->fd, v->id, ncpus, xv->cpuid, err, errlen);
	return x86_arch_vcpu_init(v, ncpus, &boot->info, err, errlen);
}

int arch_vcpu_before_run(struct vcpu *v)
{
	(void)v;        /* the in-kernel LAPIC holds APs in wait-for-SIPI */
	return 0;
}

int arch_vcpu_exit(struct vcpu *v, struct kvm_run *run)
{
	/* Port I/O, MMIO, HLT, shutdown and system events are vcpu.c's; x86
	 * has no exit of its own. */
	(void)v;
	(void)run;
	return ARCH_EXIT_UNKNOWN;
}

void arch_describe_vcpu(const struct vcpu *v, const struct kvm_run *run, char *out,
			size_t outlen)
{
	(void)run;      /* the registers come from KVM_GET_REGS/SREGS */
	x86_describe_vcpu(v->fd, &v->vm->mem, out, outlen);
}

void arch_vcpu_paused(struct vcpu *v)
{
	/* -EINVAL where the guest never enabled its kvmclock: nothing to
	 * tell it. */
	if (ioctl(v->fd, KVM_KVMCLOCK_CTRL, 0) < 0) {
		/* advisory */
	}
}

bool arch_halt_probe(void)
{
	return true;
}

bool arch_vcpu_stopped(struct vcpu *v)
{
	struct kvm_mp_state mp;
	struct kvm_regs regs;

	if (ioctl(v->fd, KVM_GET_MP_STATE, &mp) < 0)
		return false;
	/* An AP the guest never started (or put back in wait-for-SIPI). */
	if (mp.mp_state == KVM_MP_STATE_UNINITIALIZED || mp.mp_state == KVM_MP_STATE_INIT_RECEIVED)
		return true;
	if (mp.mp_state != KVM_MP_STATE_HALTED || ioctl(v->fd, KVM_GET_REGS, &regs) < 0)
		return false;
	/* HLT with IF clear: only an NMI, SMI or INIT wakes it (SDM vol. 3,
	 * HLT), none of which a guest that stopped itself waits for. */
	return !(regs.rflags & (1ull << 9));     /* RFLAGS.IF */
}

int arch_vm_clock_save(struct vm *vm)
{
	struct x86_vm *xv = vm_kvm(vm)->arch_state;

	memset(&xv->clock, 0, sizeof(xv->clock));
	return ioctl(vm->vm_fd, KVM_GET_CLOCK, &xv->clock) < 0 ? -errno : 0;
}

int arch_vm_clock_restore(struct vm *vm)
{
	struct x86_vm *xv = vm_kvm(vm)->arch_state;
	struct kvm_clock_data c = { .clock = xv->clock.clock };

	/* Only the clock: KVM_CLOCK_REALTIME would have KVM add the time
	 * the pause took, which is what the save is there to hide. */
	return ioctl(vm->vm_fd, KVM_SET_CLOCK, &c) < 0 ? -errno : 0;
}

int arch_vm_nmi(struct vm *vm, unsigned ncpus, char *err, size_t errlen)
{
	unsigned i;
	int r;

	/* An MSI whose data says delivery mode NMI (SDM vol. 3, 11.11.2),
	 * to the local APIC whose ID is the vCPU's (KVM's default, which the
	 * MP table lists), in physical destination mode: KVM's LAPIC takes
	 * it as hardware would, one pending NMI on that vCPU, from this
	 * thread. KVM_NMI would have to be made on the vCPU's own thread, out
	 * of KVM_RUN. */
	for (i = 0; i < ncpus; i++) {
		struct kvm_msi msi = {
			.address_lo = X86_MSI_ADDR_BASE | (i << 12),
			.data = X86_MSI_DM_NMI,
		};

		/* The number of local APICs that took it; 0 or -1 (EPERM):
		 * none, the guest having turned its APIC off. */
		r = ioctl(vm->vm_fd, KVM_SIGNAL_MSI, &msi);
		if (r < 0 && errno != EPERM)
			return err_set(err, errlen, -errno, "vCPU %u: KVM_SIGNAL_MSI with an NMI: %s%s",
				       i, strerror(errno), i ? " (the vCPUs before it took theirs)" : "");
		if (r <= 0)
			return err_set(err, errlen, -EIO, "vCPU %u: its local APIC took no NMI (the "
				       "guest turned it off?)%s", i,
				       i ? "; the vCPUs before it took theirs" : "");
	}
	return 0;
}

/* The board has no ACPI (Cloud Hypervisor's button is ACPI's): its
 * button is the keyboard's Power key, as Firecracker's SendCtrlAltDel is
 * the keyboard's Ctrl+Alt+Del. Either way the guest sees KEY_POWER and its
 * userspace decides (systemd-logind powers off). */
int arch_vm_power_button(struct vm *vm, char *err, size_t errlen)
{
	struct x86_vm *xv = vm_kvm(vm)->arch_state;
	int r = xv->i8042 ? i8042_power_key(xv->i8042) : -ENODEV;

	if (r == -EAGAIN)
		return err_set(err, errlen, r, "the guest has not yet read the last press of the "
			       "power key (the keyboard's buffer is full); try again");
	if (r)
		return err_set(err, errlen, r, "the guest has its keyboard disabled, so its power "
			       "key cannot be pressed; stop the VM (vm.shutdown), or have the guest "
			       "power off itself");
	return 0;
}

/* x86-64's calls; x32's share AUDIT_ARCH_X86_64 with bit 30 set. A vCPU
 * reads its own registers to describe a fatal exit (diag.c) and to say
 * whether it stopped for good, and tells its guest of a pause; the
 * thread that pauses keeps the VM's clock. */
#define X86_K_PAUSER (SANDBOX_K(SANDBOX_MAIN) | SANDBOX_K(SANDBOX_CONTROL) | SANDBOX_K(SANDBOX_API))
static const struct sandbox_ioctl x86_ioctls[] = {
	{ SANDBOX_K(SANDBOX_VCPU), SANDBOX_FD_VCPU, KVM_GET_REGS },
	{ SANDBOX_K(SANDBOX_VCPU), SANDBOX_FD_VCPU, KVM_GET_SREGS },
	/* Whether it has stopped for good (arch_vcpu_stopped). */
	{ SANDBOX_K(SANDBOX_VCPU), SANDBOX_FD_VCPU, KVM_GET_MP_STATE },
	{ SANDBOX_K(SANDBOX_VCPU), SANDBOX_FD_VCPU, KVM_KVMCLOCK_CTRL },
	{ X86_K_PAUSER, SANDBOX_FD_VM, KVM_GET_CLOCK },
	{ X86_K_PAUSER, SANDBOX_FD_VM, KVM_SET_CLOCK },
	/* vm.nmi (arch_vm_nmi). */
	{ SANDBOX_K(SANDBOX_API), SANDBOX_FD_VM, KVM_SIGNAL_MSI },
	/* A snapshot taken by a control server (mvm_snapshot, snap.c):
	 * every vCPU's state and the VM's interrupt controllers, read only. */
#define X86_K_SNAP SANDBOX_K(SANDBOX_API)
	{ X86_K_SNAP, SANDBOX_FD_VCPUS, KVM_GET_MP_STATE },
	{ X86_K_SNAP, SANDBOX_FD_VCPUS, KVM_GET_REGS },
	{ X86_K_SNAP, SANDBOX_FD_VCPUS, KVM_GET_SREGS },
	{ X86_K_SNAP, SANDBOX_FD_VCPUS, KVM_GET_XSAVE },
	{ X86_K_SNAP, SANDBOX_FD_VCPUS, KVM_GET_XSAVE2 },
	{ X86_K_SNAP, SANDBOX_FD_VCPUS, KVM_GET_XCRS },
	{ X86_K_SNAP, SANDBOX_FD_VCPUS, KVM_GET_DEBUGREGS },
	{ X86_K_SNAP, SANDBOX_FD_VCPUS, KVM_GET_LAPIC },
	{ X86_K_SNAP, SANDBOX_FD_VCPUS, KVM_GET_VCPU_EVENTS },
	{ X86_K_SNAP, SANDBOX_FD_VCPUS, KVM_GET_CPUID2 },
	{ X86_K_SNAP, SANDBOX_FD_VCPUS, KVM_GET_TSC_KHZ },
	{ X86_K_SNAP, SANDBOX_FD_VCPUS, KVM_GET_MSRS },
	{ X86_K_SNAP, SANDBOX_FD_VCPUS, KVM_GET_NESTED_STATE },
	{ X86_K_SNAP, SANDBOX_FD_VM, KVM_GET_IRQCHIP },
	{ X86_K_SNAP, SANDBOX_FD_VM, KVM_GET_PIT2 },
};

const struct arch_sandbox arch_sandbox = {
	.audit_arch = AUDIT_ARCH_X86_64,
	.syscall_nr_limit = 0x40000000,         /* __X32_SYSCALL_BIT */
	.ioctls = x86_ioctls,
	.nioctls = ARRAY_SIZE(x86_ioctls),
};

bool arch_ram_cow_ok(int kvm_fd)
{
	(void)kvm_fd;
	return true;
}

int arch_vm_snap_fd(const struct vm *vm)
{
	(void)vm;
	return -1;      /* the irqchip's state comes through the VM's fd */
}

void arch_cpu_relax(void)
{
	__builtin_ia32_pause();
}

uint64_t arch_probe_hash(void)
{
	return x86_probe_hash();
}
