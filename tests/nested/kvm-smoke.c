// kvm-smoke: proves /dev/kvm runs guest code. Creates a VM with one vCPU
// and one page of guest memory holding real-mode code that computes a value,
// writes it to an I/O port and halts; checks KVM reports exactly that
// KVM_EXIT_IO (port, direction, size, count, value) and then KVM_EXIT_HLT.
// Exit 0 and "kvm-smoke: ok" on success, 1 with a one-line reason otherwise.
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define SMOKE_GPA 0x1000u
#define SMOKE_PORT 0x10u
#define SMOKE_VALUE 0x42u

static int smoke_fail(const char *what)
{
	fprintf(stderr, "kvm-smoke: %s: %s\n", what, strerror(errno));
	return 1;
}

static int smoke_bad(const char *what)
{
	fprintf(stderr, "kvm-smoke: %s\n", what);
	return 1;
}

int main(void)
{
	// Real mode, CS base 0, IP = SMOKE_GPA:
	//   mov dx, SMOKE_PORT; mov al, 0x40; add al, 2; out dx, al; hlt
	static const uint8_t code[] = {
		0xba, SMOKE_PORT & 0xff, SMOKE_PORT >> 8,
		0xb0, SMOKE_VALUE - 2,
		0x04, 0x02,
		0xee,
		0xf4,
	};
	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		return smoke_fail("open /dev/kvm");
	int api = ioctl(kvm, KVM_GET_API_VERSION, 0);
	if (api != KVM_API_VERSION) {
		fprintf(stderr, "kvm-smoke: KVM_GET_API_VERSION = %d, expected %d\n", api,
			KVM_API_VERSION);
		return 1;
	}
	if (ioctl(kvm, KVM_CHECK_EXTENSION, KVM_CAP_USER_MEMORY) <= 0)
		return smoke_bad("KVM_CAP_USER_MEMORY missing");
	int vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		return smoke_fail("KVM_CREATE_VM");

	long page = sysconf(_SC_PAGESIZE);
	uint8_t *mem = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return smoke_fail("mmap guest page");
	memcpy(mem, code, sizeof(code));
	struct kvm_userspace_memory_region region = {
		.slot = 0,
		.guest_phys_addr = SMOKE_GPA,
		.memory_size = page,
		.userspace_addr = (uintptr_t)mem,
	};
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region) < 0)
		return smoke_fail("KVM_SET_USER_MEMORY_REGION");

	int vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	if (vcpu < 0)
		return smoke_fail("KVM_CREATE_VCPU");
	int run_size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (run_size < (int)sizeof(struct kvm_run))
		return smoke_fail("KVM_GET_VCPU_MMAP_SIZE");
	struct kvm_run *run = mmap(NULL, run_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED)
		return smoke_fail("mmap kvm_run");

	struct kvm_sregs sregs;
	if (ioctl(vcpu, KVM_GET_SREGS, &sregs) < 0)
		return smoke_fail("KVM_GET_SREGS");
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	if (ioctl(vcpu, KVM_SET_SREGS, &sregs) < 0)
		return smoke_fail("KVM_SET_SREGS");
	struct kvm_regs regs = { .rip = SMOKE_GPA, .rflags = 0x2 };
	if (ioctl(vcpu, KVM_SET_REGS, &regs) < 0)
		return smoke_fail("KVM_SET_REGS");

	if (ioctl(vcpu, KVM_RUN, 0) < 0)
		return smoke_fail("KVM_RUN (first)");
	if (run->exit_reason != KVM_EXIT_IO) {
		fprintf(stderr, "kvm-smoke: first exit reason %u, expected KVM_EXIT_IO (%u)\n",
			run->exit_reason, KVM_EXIT_IO);
		return 1;
	}
	if (run->io.direction != KVM_EXIT_IO_OUT || run->io.size != 1 ||
	    run->io.port != SMOKE_PORT || run->io.count != 1) {
		fprintf(stderr, "kvm-smoke: KVM_EXIT_IO dir %u size %u port %#x count %u, expected out/1/%#x/1\n",
			run->io.direction, run->io.size, run->io.port, run->io.count, SMOKE_PORT);
		return 1;
	}
	uint8_t value = *((uint8_t *)run + run->io.data_offset);
	if (value != SMOKE_VALUE) {
		fprintf(stderr, "kvm-smoke: guest wrote %#x, expected %#x\n", value, SMOKE_VALUE);
		return 1;
	}

	if (ioctl(vcpu, KVM_RUN, 0) < 0)
		return smoke_fail("KVM_RUN (second)");
	if (run->exit_reason != KVM_EXIT_HLT) {
		fprintf(stderr, "kvm-smoke: second exit reason %u, expected KVM_EXIT_HLT (%u)\n",
			run->exit_reason, KVM_EXIT_HLT);
		return 1;
	}
	if (ioctl(vcpu, KVM_GET_REGS, &regs) < 0)
		return smoke_fail("KVM_GET_REGS");
	if (regs.rip != SMOKE_GPA + sizeof(code)) {
		fprintf(stderr, "kvm-smoke: halted at rip %#llx, expected %#zx\n",
			(unsigned long long)regs.rip, SMOKE_GPA + sizeof(code));
		return 1;
	}
	printf("kvm-smoke: ok (API %d, out %#x -> port %#x, hlt)\n", api, value, SMOKE_PORT);
	return 0;
}
