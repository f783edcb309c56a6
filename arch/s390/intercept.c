/* The intercepts through which the guest talks to mvm (arch_vcpu_exit):
 * SERVC to the SCLP, the I/O instructions and TSCH to the channel
 * subsystem, DIAG (IPL, the test guest's exit), the SIGP orders KVM
 * leaves to user space, stop, disabled wait and reset; the operand
 * decoding they share is intercept.h's, and arch_describe_vcpu names the
 * PSW for a fatal exit's message. */
#include "arch/arch.h"
#include "arch/s390/css.h"
#include "arch/s390/intercept.h"
#include "arch/s390/s390.h"
#include "arch/s390/sclp.h"
#include "vmm/base/log.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"
#include "vmm/kvm/vcpu.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

/* The test guest's exit status: DIAG 0x500 with this in GPR1 (any value
 * but 3, KVM's virtio-ccw notify) and the status in GPR2. Documented in
 * README ("The test guest"). */
#define S390_DIAG_MVM_EXIT   0x4d564d00u   /* "MVM\0" */
#define S390_DIAG_HYPERCALL  0x500
#define S390_DIAG_IPL        0x308

uint64_t s390_ipb_addr(uint64_t base, uint32_t ipb, uint64_t psw_mask)
{
	uint64_t a = base + ((ipb >> 16) & 0xfff);

	if (!(psw_mask & S390_PSW_MASK_EA))
		a &= (psw_mask & S390_PSW_MASK_BA) ? 0x7fffffffULL : 0xffffffULL;
	return a;
}

static void set_cc(struct kvm_run *run, unsigned cc)
{
	run->psw_mask = s390_psw_set_cc(run->psw_mask, cc);
}

/* Deliver a program exception for the intercepted instruction. */
static int program_exception(struct vcpu *v, unsigned code)
{
	struct kvm_s390_interrupt irq = { .type = KVM_S390_PROGRAM_INT, .parm = code };

	if (ioctl(v->fd, KVM_S390_INTERRUPT, &irq) < 0) {
		snprintf(v->fatal, sizeof(v->fatal), "vCPU %u: cannot deliver program exception "
			 "0x%04x: %s", v->id, code, strerror(errno));
		log_err(&v->vm->log, "%s", v->fatal);
		return MVM_EXIT_INTERNAL;
	}
	return -1;
}

static int vmem_op(void *opaque, uint64_t addr, unsigned ar, void *buf, uint32_t len,
		   uint32_t op)
{
	struct vcpu *v = opaque;
	struct kvm_s390_mem_op mop = {
		.gaddr = addr, .size = len, .op = op, .buf = (uintptr_t)buf, .ar = (uint8_t)ar,
		.flags = KVM_S390_MEMOP_F_INJECT_EXCEPTION,
	};
	int r = ioctl(v->fd, KVM_S390_MEM_OP, &mop);

	if (r < 0)
		return -errno;
	return r > 0 ? S390_ACCESS_INJECTED : 0;
}

static int vmem_read(void *opaque, uint64_t addr, unsigned ar, void *buf, uint32_t len)
{
	return vmem_op(opaque, addr, ar, buf, len, KVM_S390_MEMOP_LOGICAL_READ);
}

static int vmem_write(void *opaque, uint64_t addr, unsigned ar, const void *buf, uint32_t len)
{
	return vmem_op(opaque, addr, ar, (void *)buf, len, KVM_S390_MEMOP_LOGICAL_WRITE);
}

/* An instruction's result: a condition code, a program exception, or a
 * host failure. */
static int finish(struct vcpu *v, int r, const char *what)
{
	if (r >= 0) {
		set_cc(v->run, (unsigned)r);
		return -1;
	}
	if (r == CSS_INJECTED)
		return -1;
	if (r == CSS_HOST_ERROR) {
		snprintf(v->fatal, sizeof(v->fatal), "vCPU %u: %s: KVM_S390_MEM_OP failed on the "
			 "instruction's operand", v->id, what);
		log_err(&v->vm->log, "%s", v->fatal);
		return MVM_EXIT_INTERNAL;
	}
	return program_exception(v, (unsigned)-r);
}

static int handle_servc(struct vcpu *v, struct kvm_run *run)
{
	struct sclp *s = s390_vm(v->vm)->sclp;
	uint32_t ipb = run->s390_sieic.ipb;
	__u64 *g = run->s.regs.gprs;

	if (!s)
		return finish(v, 3, "SERVC");   /* no SCLP: not operational */
	return finish(v, sclp_service_call(s, (uint32_t)g[s390_rre_r1(ipb)], g[s390_rre_r2(ipb)],
					   run->psw_mask & S390_PSW_MASK_PSTATE), "SERVC");
}

static int handle_io(struct vcpu *v, struct kvm_run *run, unsigned op)
{
	const struct s390_vmem vm = { vmem_read, vmem_write, v };
	uint32_t ipb = run->s390_sieic.ipb;
	__u64 *g = run->s.regs.gprs;
	uint64_t addr;
	unsigned ar;
	int r;

	if (op == CSS_OP_CHSC) {
		ar = s390_rre_r1(ipb);
		addr = g[ar];
	} else {
		ar = s390_ipb_b2(ipb);
		addr = s390_ipb_addr(ar ? g[ar] : 0, ipb, run->psw_mask);
	}
	r = css_instruction(&s390_vm(v->vm)->css, &vm, op, (uint32_t)g[1], addr, ar);
	/* SCHM and SAL set no condition code. */
	if (r == 0 && (op == CSS_OP_SCHM || op == CSS_OP_SAL))
		return -1;
	return finish(v, r, "I/O instruction");
}

/* DIAG 0x308 subcodes other than 3 and 4 (which KVM turns into
 * KVM_EXIT_S390_RESET): Linux asks for its IPL parameter block at boot. */
static int handle_diag308(struct vcpu *v, struct kvm_run *run)
{
	unsigned r1 = s390_rs_r1(run->s390_sieic.ipa), r3 = s390_rs_r3(run->s390_sieic.ipa);
	__u64 *g = run->s.regs.gprs;

	switch (g[r3] & 0xffff) {
	case 5:         /* SET an IPL block: mvm keeps none (a re-IPL ends it) */
	case 6:         /* STORE it */
		if ((r1 & 1) || (g[r1] & 0xfff))
			return program_exception(v, S390_PGM_SPECIFICATION);
		g[r1 + 1] = (g[r3] & 0xffff) == 6 ? 0x0102 /* no configuration */
						  : 0x0402 /* invalid */;
		run->kvm_dirty_regs |= KVM_SYNC_GPRS;
		return -1;
	case 0:         /* clear reset */
	case 1:         /* load normal with reset */
	case 7:         /* load normal */
		vm_request_reboot(v->vm);
		return MVM_EXIT_OK;     /* a reboot, as on x86: the VM ends */
	default:
		return program_exception(v, S390_PGM_SPECIFICATION);
	}
}

static int handle_diag(struct vcpu *v, struct kvm_run *run)
{
	__u64 *g = run->s.regs.gprs;
	uint32_t ipb = run->s390_sieic.ipb;
	unsigned b2 = s390_ipb_b2(ipb);
	unsigned code = (unsigned)(s390_ipb_addr(b2 ? g[b2] : 0, ipb, ~0ULL) & 0xffff);

	if (run->psw_mask & S390_PSW_MASK_PSTATE)
		return program_exception(v, S390_PGM_PRIVILEGED);
	if (code == S390_DIAG_IPL)
		return handle_diag308(v, run);
	if (code == S390_DIAG_HYPERCALL && (uint32_t)g[1] == S390_DIAG_MVM_EXIT) {
		vm_request_stop(v->vm, VM_STOP_GUEST_STATUS,
				(int)(g[s390_rs_r3(run->s390_sieic.ipa)] & 0xff), NULL);
		return -1;
	}
	return program_exception(v, S390_PGM_SPECIFICATION);
}

/* SIGP orders KVM leaves to user space (arch/s390/kvm/sigp.c): START,
 * RESTART, the two resets; anything else is an invalid order. R1 gets the
 * status on cc 1; R3 names the target CPU; the order is the second
 * operand's address. */
#define SIGP_START              0x04
#define SIGP_RESTART            0x06
#define SIGP_INITIAL_CPU_RESET  0x0b
#define SIGP_CPU_RESET          0x0c
#define SIGP_STATUS_INVALID_ORDER 0x00000002u
#define SIGP_STATUS_INCORRECT_STATE 0x00000200u

static int handle_sigp(struct vcpu *v, struct kvm_run *run)
{
	struct s390_vm *sv = s390_vm(v->vm);
	uint16_t ipa = run->s390_sieic.ipa;
	uint32_t ipb = run->s390_sieic.ipb;
	__u64 *g = run->s.regs.gprs;
	unsigned r1 = s390_rs_r1(ipa), b2 = s390_ipb_b2(ipb);
	unsigned order = (unsigned)(s390_ipb_addr(b2 ? g[b2] : 0, ipb, ~0ULL) & 0xff);
	unsigned target = (unsigned)(g[s390_rs_r3(ipa)] & 0xffff);
	struct s390_cpu *t;
	uint32_t status = 0;

	if (run->psw_mask & S390_PSW_MASK_PSTATE)
		return program_exception(v, S390_PGM_PRIVILEGED);
	if (target >= S390_MAX_VCPUS || !sv->cpu[target].v) {
		set_cc(run, 3);         /* no such CPU */
		return -1;
	}
	t = &sv->cpu[target];
	switch (order) {
	case SIGP_START:
		cpu_start(sv, target);
		break;
	case SIGP_RESTART: {
		struct kvm_s390_irq irq = { .type = KVM_S390_RESTART };

		/* KVM delivers it (old PSW to lowcore 0x120, new from 0x1a0
		 * of the target's prefix area) when the CPU next runs. */
		if (ioctl(t->v->fd, KVM_S390_IRQ, &irq) < 0) {
			set_cc(run, 2);         /* busy: the guest retries */
			return -1;
		}
		cpu_start(sv, target);
		break;
	}
	case SIGP_INITIAL_CPU_RESET:
	case SIGP_CPU_RESET:
		/* Only on a stopped CPU: its thread is not in KVM_RUN. */
		if (__atomic_load_n(&t->operating, __ATOMIC_ACQUIRE)) {
			status = SIGP_STATUS_INCORRECT_STATE;
			break;
		}
		if (ioctl(t->v->fd, KVM_S390_INITIAL_RESET, 0) < 0) {
			set_cc(run, 2);
			return -1;
		}
		break;
	default:
		status = SIGP_STATUS_INVALID_ORDER;
		break;
	}
	if (status) {
		g[r1] = (g[r1] & ~0xffffffffULL) | status;
		run->kvm_dirty_regs |= KVM_SYNC_GPRS;
		set_cc(run, 1);
	} else {
		set_cc(run, 0);
	}
	return -1;
}

static int handle_instruction(struct vcpu *v, struct kvm_run *run)
{
	uint16_t ipa = run->s390_sieic.ipa;

	switch (ipa >> 8) {
	case 0xb2:
		if ((ipa & 0xff) == 0x20)
			return handle_servc(v, run);
		if (((ipa & 0xff) >= CSS_OP_CSCH && (ipa & 0xff) <= CSS_OP_SCHM) ||
		    (ipa & 0xff) == CSS_OP_CHSC || (ipa & 0xff) == CSS_OP_XSCH)
			return handle_io(v, run, ipa & 0xff);
		break;
	case 0x83:
		return handle_diag(v, run);
	case 0xae:
		return handle_sigp(v, run);
	}
	return program_exception(v, S390_PGM_OPERATION);
}

/* KVM hands a wait to user space only when the PSW has I/O, external and
 * machine-check interrupts all off: the CPU can never run again. At
 * address 0xfff (...fff) it is Linux's quiesced shutdown (the SCLP's
 * signal-quiesce handler): a poweroff. Anywhere else the kernel gave up:
 * a panic ends in one (kernel/panic.c's panic notifiers run s390's
 * on_panic action, "stop" by default, and then stop_run() loads a
 * disabled-wait PSW at its own address, before panic=N could reboot), as
 * do the early boot failures. That is the guest's own report of a panic:
 * the VM ends with MVM_EXIT_PANICKED. The stop reason is requested here,
 * so that the exit record says panic whatever the caller maps the status
 * to (the first request wins). */
static int disabled_wait(struct vcpu *v, const struct kvm_run *run)
{
	if ((run->psw_addr & 0xfff) == 0xfff)
		return MVM_EXIT_OK;
	snprintf(v->fatal, sizeof(v->fatal), "vCPU %u: the guest stopped in a disabled wait "
		 "(PSW 0x%016llx 0x%016llx): its kernel panicked", v->id,
		 (unsigned long long)run->psw_mask, (unsigned long long)run->psw_addr);
	log_err(&v->vm->log, "%s", v->fatal);
	vm_request_stop(v->vm, VM_STOP_GUEST_PANIC, MVM_EXIT_PANICKED, v->fatal);
	return MVM_EXIT_PANICKED;
}

int arch_vcpu_exit(struct vcpu *v, struct kvm_run *run)
{
	switch (run->exit_reason) {
	case KVM_EXIT_S390_SIEIC:
		switch (run->s390_sieic.icptcode) {
		case S390_ICPT_INST:
			return handle_instruction(v, run);
		case S390_ICPT_STOP:
			/* Stopped (SIGP STOP, from itself or another CPU): not
			 * run again until started; the last one is poweroff. */
			return cpu_stopped(s390_vm(v->vm), v->id) ? MVM_EXIT_OK : -1;
		case S390_ICPT_WAIT:
			return disabled_wait(v, run);
		}
		return ARCH_EXIT_UNKNOWN;
	case KVM_EXIT_S390_RESET:
		vm_request_reboot(v->vm);
		return MVM_EXIT_OK;     /* re-IPL (reboot): the VM ends, as on x86 */
	case KVM_EXIT_S390_TSCH:
		{
			const struct s390_vmem vm = { vmem_read, vmem_write, v };
			uint32_t ipb = run->s390_tsch.ipb;
			unsigned b2 = s390_ipb_b2(ipb);
			uint64_t addr = s390_ipb_addr(b2 ? run->s.regs.gprs[b2] : 0, ipb,
						      run->psw_mask);

			struct s390_vm *sv = s390_vm(v->vm);
			int r = css_instruction(&sv->css, &vm, CSS_OP_TSCH,
						(uint32_t)run->s.regs.gprs[1], addr, b2);

			/* KVM took the interrupt off its queue for this TSCH;
			 * an instruction that did not complete leaves it due. */
			if (r < 0 && run->s390_tsch.dequeued)
				io_interrupt(sv, run->s390_tsch.subchannel_nr,
					     run->s390_tsch.io_int_parm,
					     (run->s390_tsch.io_int_word >> 27) & 7);
			return finish(v, r, "TSCH");
		}
	}
	return ARCH_EXIT_UNKNOWN;
}

void arch_describe_vcpu(const struct vcpu *v, const struct kvm_run *run, char *out,
			size_t outlen)
{
	(void)v;
	snprintf(out, outlen, "PSW 0x%016llx 0x%016llx (%s)", (unsigned long long)run->psw_mask,
		 (unsigned long long)run->psw_addr,
		 run->psw_mask & (1ULL << (63 - 5)) ? "DAT on" : "DAT off");
}
