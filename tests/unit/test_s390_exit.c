/* How an s390x guest's end reaches mvm's exit status, through the vCPU
 * exit path (vcpu_handle_exit -> arch_vcpu_exit) on a KVM-less VM: a
 * disabled wait is a kernel that gave up (Linux's panic ends in one),
 * status MVM_EXIT_PANICKED with its own stop reason; the quiesced
 * shutdown's wait at 0xfff, a re-IPL the guest asked for (KVM's reset
 * exit, DIAG 0x308 load subcodes) are an orderly end, status 0. */
#include <string.h>

#include "arch/s390/intercept.h"
#include "tests/unit/check.h"
#include "vmm/kvm/kvm.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vcpu.h"
#include "vmm/kvm/vm.h"

/* Linux's disabled_wait(): PSW_MASK_BASE | WAIT | EA | BA, no interrupts. */
#define DISABLED_WAIT 0x0002000180000000ULL

struct t {
	struct vm vm;
	struct vcpu v;
	uint8_t page[4096] __attribute__((aligned(4096)));
	struct kvm_run *run;
};

static struct t *setup(void)
{
	struct t *t = calloc(1, sizeof(*t));

	CHECK(t);
	CHECK_EQ(vm_init(&t->vm, 2), 0);
	t->v.vm = &t->vm;
	t->v.id = 1;
	t->v.fd = -1;
	t->run = (struct kvm_run *)t->page;
	return t;
}

static void teardown(struct t *t)
{
	vm_fini(&t->vm);
	free(t);
}

static int wait_exit(struct t *t, uint64_t mask, uint64_t addr)
{
	memset(t->page, 0, sizeof(t->page));
	t->run->exit_reason = KVM_EXIT_S390_SIEIC;
	t->run->s390_sieic.icptcode = S390_ICPT_WAIT;
	t->run->psw_mask = mask;
	t->run->psw_addr = addr;
	return vcpu_handle_exit(&t->v, t->run);
}

TEST(disabled_wait_is_a_panic_with_its_own_status_and_reason)
{
	struct t *t = setup();

	CHECK(s390_psw_disabled_wait(DISABLED_WAIT));
	/* Where panic()'s on_panic action stops: a kernel text address. */
	CHECK_EQ(wait_exit(t, DISABLED_WAIT, 0x1234a6), MVM_EXIT_PANICKED);
	CHECK(MVM_EXIT_PANICKED != MVM_EXIT_OK && MVM_EXIT_PANICKED != MVM_EXIT_UNHANDLED);
	CHECK_EQ(vm_stop_reason(&t->vm), VM_STOP_GUEST_PANIC);
	CHECK_EQ(vm_stop_status(&t->vm), MVM_EXIT_PANICKED);
	CHECK(strstr(vm_stop_message(&t->vm), "vCPU 1"));
	CHECK(strstr(vm_stop_message(&t->vm), "disabled wait"));
	CHECK(strstr(vm_stop_message(&t->vm), "0x00000000001234a6"));
	CHECK(strstr(vm_stop_message(&t->vm), "panicked"));
	CHECK(strstr(t->v.fatal, "panicked"));
	/* The vCPU thread then asks to stop as a guest error with the
	 * status it got (vmm/kvm/vcpu.c): the panic's reason stays. */
	vm_request_stop(&t->vm, VM_STOP_GUEST_ERROR, MVM_EXIT_PANICKED, t->v.fatal);
	CHECK_EQ(vm_stop_reason(&t->vm), VM_STOP_GUEST_PANIC);
	CHECK_EQ(vm_stop_status(&t->vm), MVM_EXIT_PANICKED);
	teardown(t);
}

TEST(quiesced_shutdown_wait_is_a_poweroff)
{
	struct t *t = setup();

	/* The SCLP signal-quiesce handler's PSW: address 0xfff. */
	CHECK_EQ(wait_exit(t, DISABLED_WAIT, 0xfff), MVM_EXIT_OK);
	CHECK_EQ(t->v.fatal[0], '\0');
	CHECK_EQ(vm_stop_status(&t->vm), -1);           /* nothing requested yet */
	teardown(t);
}

TEST(reboots_the_guest_asks_for_end_with_0)
{
	struct t *t = setup();
	static const unsigned load[] = { 0, 1, 7 };     /* DIAG 0x308: clear, normal, ... */

	/* Subcodes 3 and 4 (load clear / normal with dump) are KVM's
	 * reset exit. */
	memset(t->page, 0, sizeof(t->page));
	t->run->exit_reason = KVM_EXIT_S390_RESET;
	CHECK_EQ(vcpu_handle_exit(&t->v, t->run), MVM_EXIT_OK);
	for (unsigned i = 0; i < 3; i++) {
		memset(t->page, 0, sizeof(t->page));
		t->run->exit_reason = KVM_EXIT_S390_SIEIC;
		t->run->s390_sieic.icptcode = S390_ICPT_INST;
		t->run->s390_sieic.ipa = 0x8324;        /* DIAG R1 = 2, R3 = 4 */
		t->run->s390_sieic.ipb = 0x03080000;    /* D2 = 0x308, B2 = 0 */
		t->run->psw_mask = 0x0400000180000000ULL;  /* DAT, 64-bit, supervisor */
		t->run->s.regs.gprs[4] = load[i];
		CHECK_EQ(vcpu_handle_exit(&t->v, t->run), MVM_EXIT_OK);
	}
	CHECK_EQ(t->v.fatal[0], '\0');
	/* A poweroff (status 0) that says it was the guest's reboot. */
	CHECK_EQ(vm_stop_status(&t->vm), 0);
	CHECK(vm_stop_reboot(&t->vm));
	teardown(t);
}
