/* arch/arch.h's snapshots on s390x: not there yet, refused with a
 * message. A snapshot would need, besides what x86 saves in kind: each
 * vCPU's PSW, prefix, TOD programmable register, CPU timer and clock
 * comparator (kvm_run's sync registers), its pending local interrupts
 * (KVM_S390_GET_IRQ_STATE), the floating ones (the FLIC device), the TOD
 * clock and CPU model (VM attributes), the storage keys
 * (KVM_S390_GET_SKEYS), and the state of mvm's channel subsystem and
 * SCLP models; with its run state (operating or stopped, vcpu.c). */
#include "arch/arch.h"
#include "vmm/base/util.h"

#include <errno.h>

#define S390_SNAP_REFUSED \
	"snapshots are x86-only in this mvm: docs/snapshot.md says what s390x needs"

int arch_vm_save(struct vm *vm, struct snap_w *w, char *err, size_t errlen)
{
	(void)vm;
	(void)w;
	return err_set(err, errlen, -EOPNOTSUPP, S390_SNAP_REFUSED);
}

int arch_vm_load(struct vm *vm, const struct snap_file *f, char *err, size_t errlen)
{
	(void)vm;
	(void)f;
	return err_set(err, errlen, -EOPNOTSUPP, S390_SNAP_REFUSED);
}

int arch_vcpu_save(struct vcpu *v, struct snap_w *w, char *err, size_t errlen)
{
	(void)v;
	(void)w;
	return err_set(err, errlen, -EOPNOTSUPP, S390_SNAP_REFUSED);
}

int arch_vcpu_load(struct vcpu *v, const struct snap_file *f, char *err, size_t errlen)
{
	(void)v;
	(void)f;
	return err_set(err, errlen, -EOPNOTSUPP, S390_SNAP_REFUSED);
}
