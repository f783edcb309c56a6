/* kvm_probe_run (vmm/kvm/kvm_probe.h) for x86: boot the probe payload
 * (probe_payload.S) in a one-vCPU VM made with mvm's own VM and vCPU setup,
 * and follow its step reports on X86_PROBE_PORT until it says done, computes
 * a wrong result, or KVM fails it. */
#include "vmm/kvm/kvm_probe.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/vcpu.h"
#include "arch/x86/diag.h"
#include "arch/x86/probe.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/* The vCPU thread's state; the caller reads it after joining. */
struct probe_run {
	struct kvm_probe_run base;      /* ok: X86_PROBE_DONE seen */
	struct vm *vm;
	unsigned step;          /* last step the payload reported */
	uint64_t t0;            /* probe_now_us() before the VM was made */
};

static uint64_t probe_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* why = "step N (what it checks): detail". */
static void probe_fail_step(struct probe_run *r, const char *detail)
{
	char *why = r->base.why;

	if (r->step)
		snprintf(why, sizeof(r->base.why), "step %u (%s): %.600s", r->step,
			 x86_probe_step_name(r->step), detail);
	else
		snprintf(why, sizeof(r->base.why), "before the first instruction: %.600s", detail);
}

static void probe_thread(struct kvm_probe_run *base)
{
	struct probe_run *r = container_of(base, struct probe_run, base);
	struct kvm_run *run = base->v->run;
	char tested[96];
	char exit_desc[160], where[256], both[sizeof(exit_desc) + sizeof(where) + 2];

	for (;;) {
		if (ioctl(base->v->fd, KVM_RUN, 0) < 0) {
			if ((errno == EINTR || errno == EAGAIN) && !atomic_load(&base->timed_out))
				continue;
			if (atomic_load(&base->timed_out)) {
				snprintf(exit_desc, sizeof(exit_desc), "did not finish within %u ms",
					 base->timeout_ms);
			} else {
				snprintf(exit_desc, sizeof(exit_desc), "KVM_RUN failed: %s",
					 strerror(errno));
			}
			probe_fail_step(r, exit_desc);
			break;
		}
		if (run->exit_reason == KVM_EXIT_INTR)
			continue;
		if (run->exit_reason == KVM_EXIT_IO && run->io.port == X86_PROBE_PORT &&
		    run->io.direction == KVM_EXIT_IO_OUT && run->io.size == 1 &&
		    run->io.count == 1) {
			uint8_t b = *((uint8_t *)run + run->io.data_offset);

			if (b == X86_PROBE_DONE) {
				base->ok = true;
				x86_probe_tested(&r->vm->mem, tested, sizeof(tested));
				snprintf(base->why, sizeof(base->why), "the probe guest ran 64-bit "
					 "code with paging, string ops, CPUID and %s (%llu us)", tested,
					 (unsigned long long)(probe_now_us() - r->t0));
				break;
			}
			if (b & X86_PROBE_WRONG) {
				r->step = b & ~X86_PROBE_WRONG;
				probe_fail_step(r, "the guest computed a wrong result");
				break;
			}
			r->step = b;
			continue;
		}
		/* Anything else is a failure of this KVM: say what and where. */
		vcpu_describe_exit(run, exit_desc, sizeof(exit_desc));
		x86_describe_vcpu(base->v->fd, &r->vm->mem, where, sizeof(where));
		snprintf(both, sizeof(both), "%s; %s", exit_desc, where);
		probe_fail_step(r, both);
		break;
	}
}

int kvm_probe_run(unsigned timeout_ms, int kick_signal, struct kvm_probe_result *res)
{
	struct probe_run r;
	struct x86_boot_info info;
	struct vcpu v;
	struct vm vm;
	char err[KVM_REASON_MAX / 2];
	int ret;

	memset(&r, 0, sizeof(r));
	r.t0 = probe_now_us();
	r.vm = &vm;

	if (!kvm_probe_vm(&vm, X86_PROBE_MEM, res))
		return 0;
	ret = x86_probe_load(&vm.mem, &info);
	if (ret) {
		snprintf(res->reason, sizeof(res->reason), "cannot load the probe: %s",
			 strerror(-ret));
		goto fini_vm;
	}
	ret = vcpu_create(&v, &vm, 0);
	if (ret) {
		snprintf(res->reason, sizeof(res->reason), "KVM_CREATE_VCPU: %s", strerror(-ret));
		ret = 0;
		goto fini_vm;
	}
	ret = x86_arch_vcpu_init(&v, 1, &info, err, sizeof(err));
	if (ret) {
		snprintf(res->reason, sizeof(res->reason), "vCPU setup failed: %s", err);
		ret = 0;
		goto destroy_vcpu;
	}
	ret = kvm_probe_vcpu_verdict(&r.base, &v, timeout_ms, kick_signal, probe_thread, res);
destroy_vcpu:
	vcpu_destroy(&v);
fini_vm:
	vm_fini(&vm);
	return ret;
}
