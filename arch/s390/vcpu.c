/* s390x vCPUs: their setup after KVM_CREATE_VCPU, and their run state
 * (operating or stopped), which the stop intercept and SIGP change and
 * arch_vcpu_before_run waits on.
 *
 * vCPU states: KVM keeps the architected ones (no KVM_SET_MP_STATE), and
 * KVM_RUN starts a stopped vCPU; so mvm runs a vCPU only while it should
 * operate: the boot CPU from the start, a secondary after the guest's SIGP
 * START or RESTART (the orders KVM leaves to user space, with the resets),
 * and none after its stop intercept until it is started again. When the
 * last operating vCPU stops, the guest powered off. */
#include "arch/arch.h"
#include "arch/s390/layout.h"
#include "arch/s390/s390.h"
#include "vmm/base/util.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/vcpu.h"

#include <errno.h>
#include <linux/kvm.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>

/* A vCPU after KVM_CREATE_VCPU: channel I/O to user space, the
 * architected reset state, and the start PSW at entry (a restore then
 * sets every register: snap.c). */
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
	ret = s390_vcpu_setup(v, boot ? boot->entry : 0, err, errlen);
	if (ret)
		return ret;
	/* The boot CPU starts at the kernel's entry; the others wait in the
	 * stopped state for the guest's SIGP (KVM created them stopped). A
	 * restore (no boot) runs those the snapshot had operating
	 * (arch_vcpu_load). */
	if (boot && v->id == 0) {
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
		if (poll(p, 2, -1) < 0)
			return errno == EINTR ? -1 : 1;     /* a kick: a pause? */
		if (p[1].revents)
			return 1;       /* the VM is stopping */
		if (p[0].revents)
			eventfd_read(c->start_efd, &n);
	}
	return 0;
}

/* The vCPU stopped (its stop intercept): true when it was the last one
 * operating, which is the guest's poweroff. */
bool cpu_stopped(struct s390_vm *sv, unsigned id)
{
	struct s390_cpu *c = &sv->cpu[id];

	if (!__atomic_exchange_n(&c->operating, false, __ATOMIC_ACQ_REL))
		return false;
	return __atomic_sub_fetch(&sv->operating, 1, __ATOMIC_ACQ_REL) == 0;
}

void cpu_start(struct s390_vm *sv, unsigned id)
{
	struct s390_cpu *c = &sv->cpu[id];

	if (__atomic_exchange_n(&c->operating, true, __ATOMIC_ACQ_REL))
		return;
	__atomic_add_fetch(&sv->operating, 1, __ATOMIC_ACQ_REL);
	eventfd_write(c->start_efd, 1);
}
