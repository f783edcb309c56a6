/* virtio-ccw devices on the channel subsystem (arch_attach_ccw): each on
 * its own subchannel, kicks bound to the queues' eventfds inside KVM, and
 * the KVM side of their interrupts: adapter (thin) interrupts through an
 * irqfd on an adapter route, or injected by hand, and subchannel status
 * through the channel subsystem. */
#include "arch/arch.h"
#include "arch/s390/css.h"
#include "arch/s390/s390.h"
#include "devices/virtio_ccw.h"
#include "vmm/kvm/vm.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

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

static int ccw_attach(struct vm *vm, struct virtio_dev *dev, bool slot, unsigned *schno_out)
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
	schno = (slot ? css_attach_slot : css_attach)(&sv->css, &virtio_ccw_dev_ops, &d->vc,
						       VIRTIO_CCW_CU_TYPE,
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
	if (schno_out)
		*schno_out = d->schno;
	return 0;
abort:
	/* The subchannel stays taken and points at the freed device: a
	 * failed attach fails mvm_start, so no vCPU ever reaches it, and the
	 * channel subsystem goes with the VM. */
	vtr_abort(&d->vc.t);
	return ret;
}

int arch_attach_ccw(struct vm *vm, struct virtio_dev *dev)
{
	return ccw_attach(vm, dev, false, NULL);
}

int arch_ccw_slot_attach(struct vm *vm, struct virtio_dev *dev, unsigned *slot)
{
	return ccw_attach(vm, dev, true, slot);
}

/* Machine-check interruption code bits (PoP, "Machine-Check Interruption
 * Code"), numbered from the left of the doubleword. */
#define MCIC_BIT(n) (1ULL << (63 - (n)))
#define MCIC_CP     MCIC_BIT(9)     /* channel report pending */
/* Validity of what the interruption saved: PSW (20-23), vector, floating-
 * point, general and control registers (25, 27-29), storage logical
 * validity (31), access registers (33), guarded storage (36), TOD
 * programmable register, FP control, CPU timer and clock comparator
 * (42, 43, 46, 47). A channel report damages nothing: all valid. KVM
 * clears vector and guarded storage for a guest without them. */
#define MCIC_VALID  (MCIC_BIT(20) | MCIC_BIT(21) | MCIC_BIT(22) | MCIC_BIT(23) |           \
		     MCIC_BIT(25) | MCIC_BIT(27) | MCIC_BIT(28) | MCIC_BIT(29) |           \
		     MCIC_BIT(31) | MCIC_BIT(33) | MCIC_BIT(36) | MCIC_BIT(42) |           \
		     MCIC_BIT(43) | MCIC_BIT(46) | MCIC_BIT(47))
/* CR14's channel-report subclass mask (bit 35): the guest takes the
 * machine check once it enables it. */
#define CR14_CHANNEL_REPORT (1ULL << (63 - 35))

int arch_ccw_slot_set(struct vm *vm, unsigned slot, bool present)
{
	struct kvm_s390_interrupt mchk = {
		.type = KVM_S390_MCHK,
		.parm = (uint32_t)CR14_CHANNEL_REPORT,
		.parm64 = MCIC_CP | MCIC_VALID,
	};
	int r = css_slot_set(&s390_vm(vm)->css, slot, present);

	/* A floating machine check: whichever vCPU enables the subclass
	 * first takes it; Linux's CRW thread then stores every report. */
	if (r == 1 && ioctl(vm->vm_fd, KVM_S390_INTERRUPT, &mchk) < 0)
		return -errno;
	return r < 0 ? r : 0;
}

bool arch_ccw_slot_free(struct vm *vm, unsigned slot)
{
	return css_slot_free(&s390_vm(vm)->css, slot);
}

bool arch_ccw_slot_present(struct vm *vm, unsigned slot)
{
	return css_slot_present(&s390_vm(vm)->css, slot);
}
