/* KVM plumbing only the PCI code needs, kept apart from vm.c (owned by the
 * VM runtime): level-triggered INTx through a resampling irqfd. */
#ifndef MVM_VM_PCI_H
#define MVM_VM_PCI_H

#include <stdbool.h>

struct vm;

/* KVM_IRQFD with KVM_IRQFD_FLAG_RESAMPLE: a write to fd asserts the
 * level-triggered IOAPIC pin gsi; when the guest EOIs it, KVM de-asserts
 * the pin and signals resample_fd, so the device can re-assert while its
 * interrupt condition still holds. deassign removes the binding (then
 * resample_fd is ignored). 0 or -errno (-EBADF without a VM). */
int vm_irqfd_resample(struct vm *vm, unsigned gsi, int fd, int resample_fd, bool deassign);

#endif
