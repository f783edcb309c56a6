/* arch/s390 internals: the per-VM state that the board's files share
 * (arch.c makes it at arch_vm_init; the console, virtio-ccw, vCPU and
 * intercept code reach it through s390_vm()) and the few functions that
 * one of these files calls in another, like arch/x86/x86.h. */
#ifndef MVM_S390_S390_H
#define MVM_S390_S390_H

#include <stdbool.h>
#include <stdint.h>

#include "arch/s390/css.h"
#include "arch/s390/layout.h"
#include "vmm/kvm/kvm.h"

struct sclp;
struct vcpu;

/* One vCPU's run state (the CPU's own thread waits on start_efd while
 * stopped; SIGP from another vCPU's thread starts it). */
struct s390_cpu {
	struct vcpu *v;
	bool operating;                 /* atomic */
	int start_efd;
};

/* Per-VM s390 state. */
struct s390_vm {
	struct vm *vm;
	struct sclp *sclp;              /* the board's, once created */
	struct css css;                 /* the channel subsystem */
	struct s390_cpu cpu[S390_MAX_VCPUS];
	unsigned operating;             /* atomic: vCPUs operating */
	int flic_fd;                    /* KVM's floating-interrupt controller, -1: none */
	struct kvm_s390_vm_tod_clock tod;   /* arch_vm_clock_save's */
	bool tod_ext;                   /* it came from KVM_S390_VM_TOD_EXT */
};

static inline struct s390_vm *s390_vm(const struct vm *vm)
{
	return vm_kvm(vm)->arch_state;
}

/* arch.c: the channel subsystem's interrupt callback (css_init); the TSCH
 * intercept queues an interrupt again with it. */
void io_interrupt(void *opaque, unsigned schno, uint32_t intparm, unsigned isc);

/* load.c's arch_boot_load fills it, vcpu.c's arch_vcpu_init starts the
 * boot CPU there. */
struct arch_boot {
	uint64_t entry;
};

/* vcpu.c: a vCPU's run state, changed by the stop intercept and SIGP. */
bool cpu_stopped(struct s390_vm *sv, unsigned id);
void cpu_start(struct s390_vm *sv, unsigned id);

/* coredump.c: one vCPU's notes in a guest core dump from its kvm_run's
 * synchronized registers, into buf (cap bytes): their size, or 0 where
 * they do not fit. Needs no KVM. */
size_t s390_coredump_notes(uint8_t *buf, size_t cap, unsigned id, const struct kvm_run *run);

#endif
