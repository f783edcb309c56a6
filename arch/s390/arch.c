/* arch/arch.h for s390x on KVM: RAM from 0, the SCLP console, the channel
 * subsystem's instructions, booting a Linux image, and the intercepts
 * (SERVC, I/O instructions, DIAG, stop, disabled wait, reset) through
 * which the guest talks to mvm.
 *
 * vCPU states: KVM keeps the architected ones (no KVM_SET_MP_STATE), and
 * KVM_RUN starts a stopped vCPU; so mvm runs a vCPU only while it should
 * operate: the boot CPU from the start, a secondary after the guest's SIGP
 * START or RESTART (the orders KVM leaves to user space, with the resets),
 * and none after its stop intercept until it is started again. When the
 * last operating vCPU stops, the guest powered off. */
#include "arch/arch.h"
#include "arch/s390/boot.h"
#include "arch/s390/css.h"
#include "arch/s390/intercept.h"
#include "arch/s390/layout.h"
#include "arch/s390/sclp.h"
#include "devices/virtio_ccw.h"
#include "vmm/kvm/kvm.h"
#include "vmm/base/json.h"
#include "vmm/base/log.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vcpu.h"

#include <errno.h>
#include <linux/audit.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <sys/stat.h>

/* The test guest's exit status: DIAG 0x500 with this in GPR1 (any value
 * but 3, KVM's virtio-ccw notify) and the status in GPR2. Documented in
 * README ("The test guest"). */
#define S390_DIAG_MVM_EXIT   0x4d564d00u   /* "MVM\0" */
#define S390_DIAG_HYPERCALL  0x500
#define S390_DIAG_IPL        0x308

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
	 * timeout is looked at (disabled_wait() below). */
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

/* One vCPU's run state (the CPU's own thread waits on start_efd while
 * stopped; SIGP from another vCPU's thread starts it). */
struct s390_cpu {
	struct vcpu *v;
	bool operating;                 /* atomic */
	int start_efd;
};

/* Per-VM s390 state. */
struct s390_vm {
	struct vm *vm;
	struct sclp *sclp;              /* the board's, once created */
	struct css css;                 /* the channel subsystem */
	struct s390_cpu cpu[S390_MAX_VCPUS];
	unsigned operating;             /* atomic: vCPUs operating */
	int flic_fd;                    /* KVM's floating-interrupt controller, -1: none */
};

/* virtio-ccw's I/O adapters: one per interruption subclass, id = ISC. */
#define S390_ADAPTERS 8

static struct s390_vm *s390_vm(const struct vm *vm)
{
	return vm_kvm(vm)->arch_state;
}

/* A floating I/O interrupt for subchannel 0.0.schno: the subchannel id
 * and number, the interruption parameter and the ISC's bit in the
 * interruption-identification word (KVM queues it by ISC). */
static void io_interrupt(void *opaque, unsigned schno, uint32_t intparm, unsigned isc)
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

/* ---- board: the SCLP console ------------------------------------------- */

struct s390_console {
	struct sclp sclp;
	struct vm *vm;
};

/* sclp.c counts a failure and logs the first. */
static int service_signal(void *opaque, uint32_t parm)
{
	struct s390_console *c = opaque;
	struct kvm_s390_interrupt irq = { .type = KVM_S390_INT_SERVICE, .parm = parm };

	return ioctl(c->vm->vm_fd, KVM_S390_INTERRUPT, &irq) < 0 ? -errno : 0;
}

static void guest_exit(void *opaque, int status)
{
	struct s390_console *c = opaque;

	vm_request_stop(c->vm, VM_STOP_GUEST_STATUS, status, NULL);
}

static void console_stop(void *dev)
{
	(void)dev;              /* no threads of its own */
}

static void console_stats(void *dev, struct json *j)
{
	struct s390_console *c = dev;
	uint64_t o, i;

	console_port_counters(&c->sclp.con, &o, &i);
	json_obj_begin(j, NULL);
	json_str(j, "kind", "sclp-console");
	json_u64(j, "tx_bytes", o);
	json_u64(j, "rx_bytes", i);
	json_u64(j, "tx_dropped", __atomic_load_n(&c->sclp.con.tx_dropped, __ATOMIC_RELAXED));
	json_u64(j, "signal_errors", __atomic_load_n(&c->sclp.signal_errors, __ATOMIC_RELAXED));
	json_obj_end(j);
}

static void console_destroy(void *dev)
{
	struct s390_console *c = dev;

	s390_vm(c->vm)->sclp = NULL;
	sclp_fini(&c->sclp);
	free(c);
}

static const struct vm_device_ops console_vm_ops = {
	.kind = "sclp-console",
	.stop = console_stop,
	.stats_json = console_stats,
	.destroy = console_destroy,
};

int arch_board_create(struct vm *vm, struct vm_console *con)
{
	struct s390_console *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return -ENOMEM;
	c->vm = vm;
	ret = sclp_init(&c->sclp, &vm->mem, vm->mem.total, vm->ncpus, service_signal, c);
	if (ret)
		goto free_c;
	c->sclp.guest_exit = guest_exit;
	c->sclp.log = &vm->log;
	ret = vm_add_device(vm, &console_vm_ops, c);
	if (ret)
		goto fini;
	s390_vm(vm)->sclp = &c->sclp;
	*con = (struct vm_console){ .ops = &console_port_vm_ops, .dev = &c->sclp.con };
	if (ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_S390_COW) <= 0)
		log_warn(&vm->log, "KVM on this host lacks KVM_CAP_S390_COW (no ESOP facility, as "
			 "under Hercules): the guest runs, but its kernel cannot protect "
			 "read-only pages by suppression");
	return 0;
fini:
	sclp_fini(&c->sclp);
free_c:
	free(c);
	return ret;
}

/* ---- virtio-ccw ---------------------------------------------------------- */

/* One virtio-ccw device and where it sits. */
struct s390_ccw {
	struct virtio_ccw vc;
	struct s390_vm *sv;
	unsigned schno;
	unsigned gsi[VIRTIO_MAX_QUEUES];        /* adapter routes, 0: none yet */
};

/* Adapter (thin) interrupt: the device set its indicator and the summary
 * byte, which was clear: one floating I/O interrupt for the ISC, with the
 * adapter bit in the interruption-identification word. */
static void ccw_adapter_irq(void *opaque, uint8_t isc)
{
	struct s390_ccw *d = opaque;
	struct kvm_s390_interrupt irq = {
		.type = KVM_S390_INT_IO(1, 0, 0, 0),
		.parm64 = 0x80000000ULL | ((uint64_t)(isc & 7) << 27),
	};

	/* One a completion, as often as the guest likes: logged once. */
	if (ioctl(d->sv->vm->vm_fd, KVM_S390_INTERRUPT, &irq) < 0)
		virtio_ccw_fault(&d->vc, VIRTIO_CCW_FAULT_ADAPTER_IRQ, -errno);
}

/* Classic indicators and config changes: status on the subchannel. From
 * queue threads too, while a vCPU may hold the channel subsystem's lock
 * and wait for them to stop: css_notify never waits for that lock. */
static void ccw_subchannel_irq(void *opaque)
{
	struct s390_ccw *d = opaque;

	css_notify(&d->sv->css, d->schno);
}

static void ccw_unbind_adapter(void *opaque, struct virtio_ccw *vc)
{
	struct s390_ccw *d = opaque;
	struct vm *vm = d->sv->vm;
	unsigned q;

	for (q = 0; q < vc->t.dev->num_queues; q++) {
		if (vc->irq_fd[q] < 0)
			continue;
		vm_irqfd(vm, d->gsi[q], vc->irq_fd[q], true);
		vm_adapter_route(vm, d->gsi[q], 0, 0, 0, 0, 0, true);
		close(vc->irq_fd[q]);
		vc->irq_fd[q] = -1;
	}
}

/* Route each queue's interrupt through an irqfd: KVM sets bit
 * ind_bit + q of the indicators and bit 7 (mask 0x01, with swap) of the
 * summary byte, and injects the adapter interrupt when the summary was
 * clear, exactly what the device's own path does. */
static int ccw_bind_adapter(void *opaque, struct virtio_ccw *vc)
{
	struct s390_ccw *d = opaque;
	struct vm *vm = d->sv->vm;
	unsigned q;
	int ret = 0;

	if (d->sv->flic_fd < 0)
		return -ENODEV;
	for (q = 0; q < vc->t.dev->num_queues; q++) {
		int fd;

		if (!d->gsi[q]) {
			ret = vm_alloc_msi_gsi(vm, &d->gsi[q]);
			if (ret)
				break;
		}
		ret = vm_adapter_route(vm, d->gsi[q], vc->ind_gpa, vc->summary_gpa, vc->ind_bit + q,
				       7, vc->isc, false);
		if (ret)
			break;
		fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (fd < 0) {
			ret = -errno;
			vm_adapter_route(vm, d->gsi[q], 0, 0, 0, 0, 0, true);
			break;
		}
		ret = vm_irqfd(vm, d->gsi[q], fd, false);
		if (ret) {
			close(fd);
			vm_adapter_route(vm, d->gsi[q], 0, 0, 0, 0, 0, true);
			break;
		}
		vc->irq_fd[q] = fd;
	}
	if (ret)
		ccw_unbind_adapter(opaque, vc);
	return ret;
}

static void ccw_free(void *opaque, struct virtio_ccw *vc)
{
	(void)vc;
	free(opaque);
}

static const struct virtio_ccw_irq_ops ccw_irq_ops = {
	.adapter = ccw_adapter_irq,
	.subchannel = ccw_subchannel_irq,
	.bind_adapter = ccw_bind_adapter,
	.unbind_adapter = ccw_unbind_adapter,
	.free = ccw_free,
};

int arch_attach_ccw(struct vm *vm, struct virtio_dev *dev)
{
	struct s390_vm *sv = s390_vm(vm);
	struct s390_ccw *d = calloc(1, sizeof(*d));
	struct vtr_notify notify;
	int ret, schno;

	if (!d)
		return -ENOMEM;
	d->sv = sv;
	ret = virtio_ccw_init(&d->vc, dev, &vm->mem, &ccw_irq_ops, d);
	if (ret) {
		free(d);
		return ret;
	}
	vtr_attach(&d->vc.t, vm);
	schno = css_attach(&sv->css, &virtio_ccw_dev_ops, &d->vc, VIRTIO_CCW_CU_TYPE,
			   virtio_ccw_cu_model(&d->vc));
	if (schno < 0) {
		ret = schno;
		goto abort;
	}
	d->schno = (unsigned)schno;
	virtio_ccw_set_schid(&d->vc, css_schid(d->schno));
	/* Kicks (DIAG 0x500 subcode 3 for this subchannel, the queue index in
	 * GPR3) signal each queue's eventfd inside KVM. */
	notify = virtio_ccw_notify(css_schid(d->schno));
	ret = vtr_notify_bind(&d->vc.t, &notify);
	if (ret)
		goto abort;
	ret = vtr_register(&d->vc.t);
	if (ret)
		goto abort;
	return 0;
abort:
	/* The subchannel stays taken and points at the freed device: a
	 * failed attach fails mvm_start, so no vCPU ever reaches it, and the
	 * channel subsystem goes with the VM. */
	vtr_abort(&d->vc.t);
	return ret;
}

/* ---- boot -------------------------------------------------------------- */

struct arch_boot {
	uint64_t entry;
};

/* The kernel image: the one arch_boot_check read (cfg->kernel_image,
 * *owned false), or read whole from kernel_path now (*owned:
 * boot_image_free). */
static int read_kernel(const struct arch_boot_cfg *cfg, struct boot_image *im, bool *owned,
		       struct s390_kernel *k, char *err, size_t errlen)
{
	char why[256];
	int ret;

	*owned = false;
	*im = BOOT_IMAGE_NONE;
	if (!cfg->kernel_path)
		return err_set(err, errlen, -EINVAL, "no kernel given: pass --kernel PATH");
	if (cfg->kernel_image) {
		*im = *cfg->kernel_image;
	} else {
		ret = boot_image_read(cfg->kernel_path, cfg->mem_size, SIZE_MAX, NULL, im);
		if (ret == -EFBIG)
			return err_set(err, errlen, ret, "kernel %s is larger than guest RAM (%llu "
				       "MiB): use more --mem", cfg->kernel_path,
				       (unsigned long long)(cfg->mem_size / MiB));
		if (ret)
			return err_set(err, errlen, ret, "cannot read kernel %s: %s",
				       cfg->kernel_path, strerror(-ret));
		*owned = true;
	}
	ret = s390_kernel_parse(im->buf, im->len, k, why, sizeof(why));
	if (ret) {
		err_set(err, errlen, ret, "%s: %s", cfg->kernel_path, why);
		if (*owned)
			boot_image_free(im);
		*im = BOOT_IMAGE_NONE;
		*owned = false;
	}
	return ret;
}

static int check_mem(const struct arch_boot_cfg *cfg, char *err, size_t errlen)
{
	if (cfg->mem_size % S390_RAM_ALIGN)
		return err_set(err, errlen, -EINVAL, "mem %llu bytes: s390x guest RAM comes in "
			       "1 MiB storage increments; give a multiple of 1 MiB",
			       (unsigned long long)cfg->mem_size);
	return 0;
}

int arch_boot_check(const struct arch_boot_cfg *cfg, struct boot_image *keep, char *err,
		    size_t errlen)
{
	struct s390_kernel k;
	struct boot_image im;
	uint64_t initrd_size = 0;
	bool owned;
	int ret;

	ret = check_mem(cfg, err, errlen);
	if (ret)
		return ret;
	ret = read_kernel(cfg, &im, &owned, &k, err, errlen);
	if (ret)
		return ret;
	if (cfg->initrd_path) {
		struct stat st;

		errno = 0;
		if (stat(cfg->initrd_path, &st) < 0 || !S_ISREG(st.st_mode)) {
			ret = err_set(err, errlen, errno ? -errno : -EINVAL, "cannot open initrd %s: "
				      "%s", cfg->initrd_path,
				      errno ? strerror(errno) : "not a regular file");
			goto free_image;
		}
		initrd_size = (uint64_t)st.st_size;
	}
	ret = s390_kernel_check(&k, cfg->mem_size, cfg->cmdline ? strlen(cfg->cmdline) : 0,
				initrd_size, err, errlen);
	if (!ret && keep && owned) {
		*keep = im;
		return 0;
	}
free_image:
	if (owned)
		boot_image_free(&im);
	return ret;
}

int arch_boot_load(struct vm *vm, const struct arch_boot_cfg *cfg, struct arch_boot **boot,
		   char *err, size_t errlen)
{
	struct s390_kernel k;
	struct boot_image im;
	size_t initrd_len = 0;
	struct arch_boot *b;
	bool owned;
	int ret, fd = -1;

	b = calloc(1, sizeof(*b));
	if (!b)
		return err_set(err, errlen, -ENOMEM, "out of memory");
	ret = read_kernel(cfg, &im, &owned, &k, err, errlen);
	if (ret)
		goto free_b;
	if (cfg->initrd_path) {
		ret = open_initrd(cfg->initrd_path, cfg->mem_size, &fd, &initrd_len, err, errlen);
		if (ret)
			goto free_image;
		/* Checked before its bytes go anywhere, then read straight
		 * into place (s390_boot_load_mem leaves them there). */
		ret = s390_kernel_check(&k, cfg->mem_size, cfg->cmdline ? strlen(cfg->cmdline) : 0,
					initrd_len, err, errlen);
		if (ret)
			goto close_initrd;
		ret = read_initrd_into(fd, cfg->initrd_path,
				       gmem_ptr(&vm->mem, s390_initrd_addr(&k), initrd_len),
				       initrd_len, err, errlen);
		if (ret)
			goto close_initrd;
	}
	ret = s390_boot_load_mem(&vm->mem, cfg->mem_size, &k, cfg->cmdline, NULL, initrd_len,
				 &b->entry, err, errlen);
close_initrd:
	if (fd >= 0)
		close(fd);
free_image:
	if (owned)
		boot_image_free(&im);
	if (!ret) {
		*boot = b;
		return 0;
	}
free_b:
	free(b);
	return ret;
}

void arch_boot_free(struct arch_boot *boot)
{
	free(boot);
}

/* A vCPU after KVM_CREATE_VCPU: channel I/O to user space, the
 * architected reset state, and for the boot CPU the start PSW. */
static int s390_vcpu_setup(struct vcpu *v, uint64_t entry, char *err, size_t errlen)
{
	struct kvm_enable_cap css = { .cap = KVM_CAP_S390_CSS_SUPPORT };

	/* On a vCPU fd (the VM fd refuses it), VM-wide in effect. */
	if (ioctl(v->fd, KVM_ENABLE_CAP, &css) < 0)
		return err_set(err, errlen, -errno, "vCPU %u: KVM_ENABLE_CAP(S390_CSS_SUPPORT): %s",
			       v->id, strerror(errno));
	/* CR0 and CR14 get their architected values only from a reset. */
	if (ioctl(v->fd, KVM_S390_INITIAL_RESET, 0) < 0)
		return err_set(err, errlen, -errno, "vCPU %u: KVM_S390_INITIAL_RESET: %s", v->id,
			       strerror(errno));
	v->run->psw_mask = S390_PSW_MASK_64;
	v->run->psw_addr = entry;
	v->run->s.regs.prefix = 0;
	v->run->kvm_dirty_regs |= KVM_SYNC_PREFIX;
	return 0;
}

int arch_vcpu_init(struct vcpu *v, unsigned ncpus, const struct arch_boot *boot, char *err,
		   size_t errlen)
{
	struct s390_vm *sv = s390_vm(v->vm);
	struct s390_cpu *c;
	int ret;

	if (v->id >= S390_MAX_VCPUS || ncpus > S390_MAX_VCPUS)
		return err_set(err, errlen, -EINVAL, "cpus %u: give at most %u", ncpus,
			       S390_MAX_VCPUS);
	c = &sv->cpu[v->id];
	c->v = v;
	c->start_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->start_efd < 0)
		return err_set(err, errlen, -errno, "vCPU %u: eventfd: %s", v->id, strerror(errno));
	ret = s390_vcpu_setup(v, boot->entry, err, errlen);
	if (ret)
		return ret;
	/* The boot CPU starts at the kernel's entry; the others wait in the
	 * stopped state for the guest's SIGP (KVM created them stopped). */
	if (v->id == 0) {
		__atomic_store_n(&c->operating, true, __ATOMIC_RELEASE);
		__atomic_add_fetch(&sv->operating, 1, __ATOMIC_ACQ_REL);
	}
	return 0;
}

int arch_vcpu_before_run(struct vcpu *v)
{
	struct s390_cpu *c = &s390_vm(v->vm)->cpu[v->id];
	struct pollfd p[2] = {
		{ .fd = c->start_efd, .events = POLLIN },
		{ .fd = vm_kvm(v->vm)->stop_efd, .events = POLLIN },
	};
	eventfd_t n;

	/* operating is set before start_efd is written (SIGP START's
	 * thread): a start between the check and the poll still wakes us. */
	while (!__atomic_load_n(&c->operating, __ATOMIC_ACQUIRE)) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return 1;
		if (p[1].revents)
			return 1;       /* the VM is stopping */
		if (p[0].revents)
			eventfd_read(c->start_efd, &n);
	}
	return 0;
}

/* The vCPU stopped (its stop intercept): true when it was the last one
 * operating, which is the guest's poweroff. */
static bool cpu_stopped(struct s390_vm *sv, unsigned id)
{
	struct s390_cpu *c = &sv->cpu[id];

	if (!__atomic_exchange_n(&c->operating, false, __ATOMIC_ACQ_REL))
		return false;
	return __atomic_sub_fetch(&sv->operating, 1, __ATOMIC_ACQ_REL) == 0;
}

static void cpu_start(struct s390_vm *sv, unsigned id)
{
	struct s390_cpu *c = &sv->cpu[id];

	if (__atomic_exchange_n(&c->operating, true, __ATOMIC_ACQ_REL))
		return;
	__atomic_add_fetch(&sv->operating, 1, __ATOMIC_ACQ_REL);
	eventfd_write(c->start_efd, 1);
}


/* ---- intercepts -------------------------------------------------------- */

uint64_t s390_ipb_addr(uint64_t base, uint32_t ipb, uint64_t psw_mask)
{
	uint64_t a = base + ((ipb >> 16) & 0xfff);

	if (!(psw_mask & S390_PSW_MASK_EA))
		a &= (psw_mask & S390_PSW_MASK_BA) ? 0x7fffffffULL : 0xffffffULL;
	return a;
}

static void set_cc(struct kvm_run *run, unsigned cc)
{
	run->psw_mask = s390_psw_set_cc(run->psw_mask, cc);
}

/* Deliver a program exception for the intercepted instruction. */
static int program_exception(struct vcpu *v, unsigned code)
{
	struct kvm_s390_interrupt irq = { .type = KVM_S390_PROGRAM_INT, .parm = code };

	if (ioctl(v->fd, KVM_S390_INTERRUPT, &irq) < 0) {
		snprintf(v->fatal, sizeof(v->fatal), "vCPU %u: cannot deliver program exception "
			 "0x%04x: %s", v->id, code, strerror(errno));
		log_err(&v->vm->log, "%s", v->fatal);
		return MVM_EXIT_INTERNAL;
	}
	return -1;
}

static int vmem_op(void *opaque, uint64_t addr, unsigned ar, void *buf, uint32_t len,
		   uint32_t op)
{
	struct vcpu *v = opaque;
	struct kvm_s390_mem_op mop = {
		.gaddr = addr, .size = len, .op = op, .buf = (uintptr_t)buf, .ar = (uint8_t)ar,
		.flags = KVM_S390_MEMOP_F_INJECT_EXCEPTION,
	};
	int r = ioctl(v->fd, KVM_S390_MEM_OP, &mop);

	if (r < 0)
		return -errno;
	return r > 0 ? S390_ACCESS_INJECTED : 0;
}

static int vmem_read(void *opaque, uint64_t addr, unsigned ar, void *buf, uint32_t len)
{
	return vmem_op(opaque, addr, ar, buf, len, KVM_S390_MEMOP_LOGICAL_READ);
}

static int vmem_write(void *opaque, uint64_t addr, unsigned ar, const void *buf, uint32_t len)
{
	return vmem_op(opaque, addr, ar, (void *)buf, len, KVM_S390_MEMOP_LOGICAL_WRITE);
}

/* An instruction's result: a condition code, a program exception, or a
 * host failure. */
static int finish(struct vcpu *v, int r, const char *what)
{
	if (r >= 0) {
		set_cc(v->run, (unsigned)r);
		return -1;
	}
	if (r == CSS_INJECTED)
		return -1;
	if (r == CSS_HOST_ERROR) {
		snprintf(v->fatal, sizeof(v->fatal), "vCPU %u: %s: KVM_S390_MEM_OP failed on the "
			 "instruction's operand", v->id, what);
		log_err(&v->vm->log, "%s", v->fatal);
		return MVM_EXIT_INTERNAL;
	}
	return program_exception(v, (unsigned)-r);
}

static int handle_servc(struct vcpu *v, struct kvm_run *run)
{
	struct sclp *s = s390_vm(v->vm)->sclp;
	uint32_t ipb = run->s390_sieic.ipb;
	__u64 *g = run->s.regs.gprs;

	if (!s)
		return finish(v, 3, "SERVC");   /* no SCLP: not operational */
	return finish(v, sclp_service_call(s, (uint32_t)g[s390_rre_r1(ipb)], g[s390_rre_r2(ipb)],
					   run->psw_mask & S390_PSW_MASK_PSTATE), "SERVC");
}

static int handle_io(struct vcpu *v, struct kvm_run *run, unsigned op)
{
	const struct s390_vmem vm = { vmem_read, vmem_write, v };
	uint32_t ipb = run->s390_sieic.ipb;
	__u64 *g = run->s.regs.gprs;
	uint64_t addr;
	unsigned ar;
	int r;

	if (op == CSS_OP_CHSC) {
		ar = s390_rre_r1(ipb);
		addr = g[ar];
	} else {
		ar = s390_ipb_b2(ipb);
		addr = s390_ipb_addr(ar ? g[ar] : 0, ipb, run->psw_mask);
	}
	r = css_instruction(&s390_vm(v->vm)->css, &vm, op, (uint32_t)g[1], addr, ar);
	/* SCHM and SAL set no condition code. */
	if (r == 0 && (op == CSS_OP_SCHM || op == CSS_OP_SAL))
		return -1;
	return finish(v, r, "I/O instruction");
}

/* DIAG 0x308 subcodes other than 3 and 4 (which KVM turns into
 * KVM_EXIT_S390_RESET): Linux asks for its IPL parameter block at boot. */
static int handle_diag308(struct vcpu *v, struct kvm_run *run)
{
	unsigned r1 = s390_rs_r1(run->s390_sieic.ipa), r3 = s390_rs_r3(run->s390_sieic.ipa);
	__u64 *g = run->s.regs.gprs;

	switch (g[r3] & 0xffff) {
	case 5:         /* SET an IPL block: mvm keeps none (a re-IPL ends it) */
	case 6:         /* STORE it */
		if ((r1 & 1) || (g[r1] & 0xfff))
			return program_exception(v, S390_PGM_SPECIFICATION);
		g[r1 + 1] = (g[r3] & 0xffff) == 6 ? 0x0102 /* no configuration */
						  : 0x0402 /* invalid */;
		run->kvm_dirty_regs |= KVM_SYNC_GPRS;
		return -1;
	case 0:         /* clear reset */
	case 1:         /* load normal with reset */
	case 7:         /* load normal */
		return MVM_EXIT_OK;     /* a reboot, as on x86: the VM ends */
	default:
		return program_exception(v, S390_PGM_SPECIFICATION);
	}
}

static int handle_diag(struct vcpu *v, struct kvm_run *run)
{
	__u64 *g = run->s.regs.gprs;
	uint32_t ipb = run->s390_sieic.ipb;
	unsigned b2 = s390_ipb_b2(ipb);
	unsigned code = (unsigned)(s390_ipb_addr(b2 ? g[b2] : 0, ipb, ~0ULL) & 0xffff);

	if (run->psw_mask & S390_PSW_MASK_PSTATE)
		return program_exception(v, S390_PGM_PRIVILEGED);
	if (code == S390_DIAG_IPL)
		return handle_diag308(v, run);
	if (code == S390_DIAG_HYPERCALL && (uint32_t)g[1] == S390_DIAG_MVM_EXIT) {
		vm_request_stop(v->vm, VM_STOP_GUEST_STATUS,
				(int)(g[s390_rs_r3(run->s390_sieic.ipa)] & 0xff), NULL);
		return -1;
	}
	return program_exception(v, S390_PGM_SPECIFICATION);
}

/* SIGP orders KVM leaves to user space (arch/s390/kvm/sigp.c): START,
 * RESTART, the two resets; anything else is an invalid order. R1 gets the
 * status on cc 1; R3 names the target CPU; the order is the second
 * operand's address. */
#define SIGP_START              0x04
#define SIGP_RESTART            0x06
#define SIGP_INITIAL_CPU_RESET  0x0b
#define SIGP_CPU_RESET          0x0c
#define SIGP_STATUS_INVALID_ORDER 0x00000002u
#define SIGP_STATUS_INCORRECT_STATE 0x00000200u

static int handle_sigp(struct vcpu *v, struct kvm_run *run)
{
	struct s390_vm *sv = s390_vm(v->vm);
	uint16_t ipa = run->s390_sieic.ipa;
	uint32_t ipb = run->s390_sieic.ipb;
	__u64 *g = run->s.regs.gprs;
	unsigned r1 = s390_rs_r1(ipa), b2 = s390_ipb_b2(ipb);
	unsigned order = (unsigned)(s390_ipb_addr(b2 ? g[b2] : 0, ipb, ~0ULL) & 0xff);
	unsigned target = (unsigned)(g[s390_rs_r3(ipa)] & 0xffff);
	struct s390_cpu *t;
	uint32_t status = 0;

	if (run->psw_mask & S390_PSW_MASK_PSTATE)
		return program_exception(v, S390_PGM_PRIVILEGED);
	if (target >= S390_MAX_VCPUS || !sv->cpu[target].v) {
		set_cc(run, 3);         /* no such CPU */
		return -1;
	}
	t = &sv->cpu[target];
	switch (order) {
	case SIGP_START:
		cpu_start(sv, target);
		break;
	case SIGP_RESTART: {
		struct kvm_s390_irq irq = { .type = KVM_S390_RESTART };

		/* KVM delivers it (old PSW to lowcore 0x120, new from 0x1a0
		 * of the target's prefix area) when the CPU next runs. */
		if (ioctl(t->v->fd, KVM_S390_IRQ, &irq) < 0) {
			set_cc(run, 2);         /* busy: the guest retries */
			return -1;
		}
		cpu_start(sv, target);
		break;
	}
	case SIGP_INITIAL_CPU_RESET:
	case SIGP_CPU_RESET:
		/* Only on a stopped CPU: its thread is not in KVM_RUN. */
		if (__atomic_load_n(&t->operating, __ATOMIC_ACQUIRE)) {
			status = SIGP_STATUS_INCORRECT_STATE;
			break;
		}
		if (ioctl(t->v->fd, KVM_S390_INITIAL_RESET, 0) < 0) {
			set_cc(run, 2);
			return -1;
		}
		break;
	default:
		status = SIGP_STATUS_INVALID_ORDER;
		break;
	}
	if (status) {
		g[r1] = (g[r1] & ~0xffffffffULL) | status;
		run->kvm_dirty_regs |= KVM_SYNC_GPRS;
		set_cc(run, 1);
	} else {
		set_cc(run, 0);
	}
	return -1;
}

static int handle_instruction(struct vcpu *v, struct kvm_run *run)
{
	uint16_t ipa = run->s390_sieic.ipa;

	switch (ipa >> 8) {
	case 0xb2:
		if ((ipa & 0xff) == 0x20)
			return handle_servc(v, run);
		if (((ipa & 0xff) >= CSS_OP_CSCH && (ipa & 0xff) <= CSS_OP_SCHM) ||
		    (ipa & 0xff) == CSS_OP_CHSC || (ipa & 0xff) == CSS_OP_XSCH)
			return handle_io(v, run, ipa & 0xff);
		break;
	case 0x83:
		return handle_diag(v, run);
	case 0xae:
		return handle_sigp(v, run);
	}
	return program_exception(v, S390_PGM_OPERATION);
}

/* KVM hands a wait to user space only when the PSW has I/O, external and
 * machine-check interrupts all off: the CPU can never run again. At
 * address 0xfff (...fff) it is Linux's quiesced shutdown (the SCLP's
 * signal-quiesce handler): a poweroff. Anywhere else the kernel gave up:
 * a panic ends in one (kernel/panic.c's panic notifiers run s390's
 * on_panic action, "stop" by default, and then stop_run() loads a
 * disabled-wait PSW at its own address, before panic=N could reboot), as
 * do the early boot failures. That is the guest's own report of a panic:
 * the VM ends with MVM_EXIT_PANICKED. The stop reason is requested here,
 * so that the exit record says panic whatever the caller maps the status
 * to (the first request wins). */
static int disabled_wait(struct vcpu *v, const struct kvm_run *run)
{
	if ((run->psw_addr & 0xfff) == 0xfff)
		return MVM_EXIT_OK;
	snprintf(v->fatal, sizeof(v->fatal), "vCPU %u: the guest stopped in a disabled wait "
		 "(PSW 0x%016llx 0x%016llx): its kernel panicked", v->id,
		 (unsigned long long)run->psw_mask, (unsigned long long)run->psw_addr);
	log_err(&v->vm->log, "%s", v->fatal);
	vm_request_stop(v->vm, VM_STOP_GUEST_PANIC, MVM_EXIT_PANICKED, v->fatal);
	return MVM_EXIT_PANICKED;
}

int arch_vcpu_exit(struct vcpu *v, struct kvm_run *run)
{
	switch (run->exit_reason) {
	case KVM_EXIT_S390_SIEIC:
		switch (run->s390_sieic.icptcode) {
		case S390_ICPT_INST:
			return handle_instruction(v, run);
		case S390_ICPT_STOP:
			/* Stopped (SIGP STOP, from itself or another CPU): not
			 * run again until started; the last one is poweroff. */
			return cpu_stopped(s390_vm(v->vm), v->id) ? MVM_EXIT_OK : -1;
		case S390_ICPT_WAIT:
			return disabled_wait(v, run);
		}
		return ARCH_EXIT_UNKNOWN;
	case KVM_EXIT_S390_RESET:
		return MVM_EXIT_OK;     /* re-IPL (reboot): the VM ends, as on x86 */
	case KVM_EXIT_S390_TSCH:
		{
			const struct s390_vmem vm = { vmem_read, vmem_write, v };
			uint32_t ipb = run->s390_tsch.ipb;
			unsigned b2 = s390_ipb_b2(ipb);
			uint64_t addr = s390_ipb_addr(b2 ? run->s.regs.gprs[b2] : 0, ipb,
						      run->psw_mask);

			struct s390_vm *sv = s390_vm(v->vm);
			int r = css_instruction(&sv->css, &vm, CSS_OP_TSCH,
						(uint32_t)run->s.regs.gprs[1], addr, b2);

			/* KVM took the interrupt off its queue for this TSCH;
			 * an instruction that did not complete leaves it due. */
			if (r < 0 && run->s390_tsch.dequeued)
				io_interrupt(sv, run->s390_tsch.subchannel_nr,
					     run->s390_tsch.io_int_parm,
					     (run->s390_tsch.io_int_word >> 27) & 7);
			return finish(v, r, "TSCH");
		}
	}
	return ARCH_EXIT_UNKNOWN;
}

void arch_describe_vcpu(const struct vcpu *v, const struct kvm_run *run, char *out,
			size_t outlen)
{
	(void)v;
	snprintf(out, outlen, "PSW 0x%016llx 0x%016llx (%s)", (unsigned long long)run->psw_mask,
		 (unsigned long long)run->psw_addr,
		 run->psw_mask & (1ULL << (63 - 5)) ? "DAT on" : "DAT off");
}

/* s390x: mmap takes its arguments in memory (old_mmap): refused once
 * filtered. Floating interrupts are injected on the VM's fd from the
 * thread that raises them: I/O and SIGP on vCPUs, adapter interrupts
 * without an irqfd route on queue threads, the SCLP's service signal for
 * console input on the control thread; a vCPU's SIGP acts on another
 * vCPU's fd. A secondary vCPU waits for its SIGP START in poll, and the
 * guest's SET_IND_ADAPTER makes the eventfds of its queues' routes. */
#define S390_K_VCPU SANDBOX_K(SANDBOX_VCPU)
static const struct sandbox_ioctl s390_ioctls[] = {
	{ S390_K_VCPU | SANDBOX_K(SANDBOX_QUEUE) | SANDBOX_K(SANDBOX_CONTROL), SANDBOX_FD_VM,
	  KVM_S390_INTERRUPT },
	{ S390_K_VCPU, SANDBOX_FD_VCPU, KVM_S390_INTERRUPT },
	{ S390_K_VCPU, SANDBOX_FD_VCPU, KVM_S390_MEM_OP },
	{ S390_K_VCPU, SANDBOX_FD_VCPUS, KVM_S390_IRQ },
	{ S390_K_VCPU, SANDBOX_FD_VCPUS, KVM_S390_INITIAL_RESET },
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

void arch_cpu_relax(void)
{
	/* No spin-wait hint on z/Architecture; keep the compiler honest. */
	__asm__ __volatile__("" ::: "memory");
}
