/* kvm_probe_run (vmm/kvm/kvm_probe.h) for s390x: a six-instruction guest, made
 * with mvm's own VM and vCPU setup, computes 6 * 7 in 64-bit mode and
 * reports it with DIAG 0x500 (GPR1 = a probe code KVM leaves to user
 * space). The verdict is "runs" only when that exit arrives with the right
 * registers. */
#include "vmm/kvm/kvm_probe.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/vcpu.h"
#include "arch/arch.h"
#include "arch/s390/intercept.h"
#include "arch/s390/layout.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define PROBE_MEM   (16ULL << 20)
#define PROBE_CODE  0x4d56u            /* GPR1 at the DIAG: not 3 (virtio notify) */
#define PROBE_ANSWER 42

static const uint8_t probe_payload[] = {
	0xa7, 0x29, 0x00, 0x06,         /* lghi  %r2,6 */
	0xa7, 0x39, 0x00, 0x07,         /* lghi  %r3,7 */
	0xb9, 0x0c, 0x00, 0x23,         /* msgr  %r2,%r3 */
	0xa7, 0x19, 0x4d, 0x56,         /* lghi  %r1,0x4d56 */
	0x83, 0x12, 0x05, 0x00,         /* diag  %r1,%r2,0x500 */
	0xa7, 0xf4, 0x00, 0x00,         /* j     . */
};

uint64_t arch_probe_hash(void)
{
	uint64_t h = 0xcbf29ce484222325ULL;    /* FNV-1a */
	size_t i;

	for (i = 0; i < sizeof(probe_payload); i++)
		h = (h ^ probe_payload[i]) * 0x100000001b3ULL;
	return h;
}

static void probe_thread(struct kvm_probe_run *r)
{
	struct kvm_run *run = r->v->run;
	char what[160];

	for (;;) {
		if (ioctl(r->v->fd, KVM_RUN, 0) < 0) {
			if ((errno == EINTR || errno == EAGAIN) && !atomic_load(&r->timed_out))
				continue;
			if (atomic_load(&r->timed_out))
				snprintf(r->why, sizeof(r->why), "the probe guest did not finish "
					 "within %u ms", r->timeout_ms);
			else
				snprintf(r->why, sizeof(r->why), "KVM_RUN failed: %s",
					 strerror(errno));
			break;
		}
		if (run->exit_reason == KVM_EXIT_INTR)
			continue;
		if (run->exit_reason == KVM_EXIT_S390_SIEIC &&
		    run->s390_sieic.icptcode == S390_ICPT_INST &&
		    run->s390_sieic.ipa == 0x8312) {
			r->ok = run->s.regs.gprs[1] == PROBE_CODE &&
				run->s.regs.gprs[2] == PROBE_ANSWER;
			if (r->ok)
				snprintf(r->why, sizeof(r->why), "the probe guest ran 64-bit code and "
					 "reported its result through DIAG 0x500");
			else
				snprintf(r->why, sizeof(r->why), "the probe guest computed a wrong "
					 "result (r1 0x%llx, r2 %llu)",
					 (unsigned long long)run->s.regs.gprs[1],
					 (unsigned long long)run->s.regs.gprs[2]);
			break;
		}
		vcpu_describe_exit(run, what, sizeof(what));
		snprintf(r->why, sizeof(r->why), "%s; PSW 0x%016llx 0x%016llx", what,
			 (unsigned long long)run->psw_mask, (unsigned long long)run->psw_addr);
		break;
	}
}

int kvm_probe_run(unsigned timeout_ms, int kick_signal, struct kvm_probe_result *res)
{
	struct kvm_probe_run r;
	struct vcpu v;
	struct vm vm;
	struct kvm_enable_cap css = { .cap = KVM_CAP_S390_CSS_SUPPORT };
	uint8_t *code;
	int ret;

	if (!kvm_probe_vm(&vm, PROBE_MEM, res))
		return 0;
	code = gmem_ptr(&vm.mem, S390_KERNEL_ENTRY, sizeof(probe_payload));
	memcpy(code, probe_payload, sizeof(probe_payload));
	ret = vcpu_create(&v, &vm, 0);
	if (ret) {
		snprintf(res->reason, sizeof(res->reason), "KVM_CREATE_VCPU: %s", strerror(-ret));
		ret = 0;
		goto fini_vm;
	}
	if (ioctl(v.fd, KVM_ENABLE_CAP, &css) < 0 || ioctl(v.fd, KVM_S390_INITIAL_RESET, 0) < 0) {
		snprintf(res->reason, sizeof(res->reason), "vCPU setup failed: %s", strerror(errno));
		ret = 0;
		goto destroy_vcpu;
	}
	v.run->psw_mask = S390_PSW_MASK_64;
	v.run->psw_addr = S390_KERNEL_ENTRY;
	ret = kvm_probe_vcpu_verdict(&r, &v, timeout_ms, kick_signal, probe_thread, res);
destroy_vcpu:
	vcpu_destroy(&v);
fini_vm:
	vm_fini(&vm);
	return ret;
}
