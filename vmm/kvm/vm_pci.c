#include "vmm/kvm/vm_pci.h"

#include <errno.h>
#include <linux/kvm.h>
#include <string.h>
#include <sys/ioctl.h>

#include "vmm/kvm/vm.h"

int vm_irqfd_resample(struct vm *vm, unsigned gsi, int fd, int resample_fd, bool deassign)
{
	struct kvm_irqfd irqfd;

	if (vm->vm_fd < 0)
		return -EBADF;
	memset(&irqfd, 0, sizeof(irqfd));
	irqfd.fd = (__u32)fd;
	irqfd.gsi = gsi;
	if (deassign) {
		irqfd.flags = KVM_IRQFD_FLAG_DEASSIGN;
	} else {
		irqfd.flags = KVM_IRQFD_FLAG_RESAMPLE;
		irqfd.resamplefd = (__u32)resample_fd;
	}
	if (ioctl(vm->vm_fd, KVM_IRQFD, &irqfd) < 0)
		return -errno;
	return 0;
}
