/* vm.nmi on x86 (arch_vm_nmi): one MSI per vCPU, in NMI delivery mode,
 * to the local APIC whose ID is the vCPU's, on the VM's descriptor; a
 * vCPU whose APIC takes none, or a KVM that refuses, is named and the
 * vCPUs after it get none. KVM_SIGNAL_MSI is faked (linked with
 * -Wl,--wrap=ioctl): no KVM. */
#include "tests/unit/check.h"
#include "arch/arch.h"
#include "arch/x86/x86.h"
#include "vmm/kvm/vm.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>

#define VM_FD 77

static struct kvm_msi sent[8];
static unsigned nsent;
static int answers[8];          /* KVM_SIGNAL_MSI's return for each call */
static int answer_errno;

int __real_ioctl(int fd, unsigned long req, ...);
int __wrap_ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (req != KVM_SIGNAL_MSI)
		return __real_ioctl(fd, req, arg);
	CHECK_EQ(fd, VM_FD);
	CHECK(nsent < 8);
	memcpy(&sent[nsent], arg, sizeof(sent[0]));
	if (answers[nsent] < 0)
		errno = answer_errno;
	return answers[nsent++];
}

static void reset(void)
{
	unsigned i;

	nsent = 0;
	for (i = 0; i < 8; i++)
		answers[i] = 1;
}

TEST(each_vcpu_gets_one_msi_in_nmi_delivery_mode_at_its_apic)
{
	struct vm vm = { .vm_fd = VM_FD };
	char err[256] = "";
	unsigned i;

	reset();
	CHECK_EQ(arch_vm_nmi(&vm, 3, err, sizeof(err)), 0);
	CHECK_EQ(nsent, 3);
	for (i = 0; i < 3; i++) {
		/* Physical destination mode, the APIC ID in bits 19:12;
		 * delivery mode 100b (NMI), edge, vector 0. */
		CHECK_EQ(sent[i].address_lo, 0xfee00000u | (i << 12));
		CHECK_EQ(sent[i].address_hi, 0);
		CHECK_EQ(sent[i].data, 0x400);
		CHECK_EQ(sent[i].flags, 0);
	}
}

TEST(a_vcpu_whose_apic_takes_none_is_named_and_the_rest_get_none)
{
	struct vm vm = { .vm_fd = VM_FD };
	char err[256] = "";

	reset();
	answers[1] = 0;         /* the guest turned vCPU 1's APIC off */
	CHECK_EQ(arch_vm_nmi(&vm, 3, err, sizeof(err)), -EIO);
	CHECK_EQ(nsent, 2);
	CHECK(strstr(err, "vCPU 1: its local APIC took no NMI"));
	CHECK(strstr(err, "the vCPUs before it took theirs"));
	/* KVM says "no destination" as -1 with EPERM: the same. */
	reset();
	answers[0] = -1;
	answer_errno = EPERM;
	CHECK_EQ(arch_vm_nmi(&vm, 2, err, sizeof(err)), -EIO);
	CHECK_EQ(nsent, 1);
	CHECK(strstr(err, "vCPU 0: its local APIC took no NMI"));
	CHECK(!strstr(err, "before it"));
}

TEST(a_kvm_that_refuses_the_msi_is_reported_with_its_error)
{
	struct vm vm = { .vm_fd = VM_FD };
	char err[256] = "";

	reset();
	answers[2] = -1;
	answer_errno = ENOTTY;
	CHECK_EQ(arch_vm_nmi(&vm, 4, err, sizeof(err)), -ENOTTY);
	CHECK_EQ(nsent, 3);
	CHECK(strstr(err, "vCPU 2: KVM_SIGNAL_MSI with an NMI: "));
	CHECK(strstr(err, strerror(ENOTTY)));
}
