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
#include "vmm/base/guest_mem.h"
#include "vmm/base/snap.h"
#include "vmm/kvm/kvm.h"

#include <linux/kvm.h>
#include <stddef.h>

struct sclp;
struct snap_file;
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
	bool irq_state;                 /* KVM_CAP_S390_IRQ_STATE (a snapshot's vCPU interrupts) */
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

/* snap.c: what a snapshot holds of one vCPU and of the VM (docs/
 * snapshot.md), encoded and checked by pure functions (unit-tested
 * without KVM) and filled and applied with KVM's calls. An interrupt
 * KVM holds pending goes as KVM's own byte image of it (struct
 * kvm_s390_irq: the type, then its 64-byte union), as x86's LAPIC page. */
#define S390_SNAP_VM  SNAP_TAG('S', '3', '9', 'V')
#define S390_SNAP_CSS SNAP_TAG('C', 'S', 'S', ' ')
#define S390_SNAP_CPU SNAP_TAG('S', '3', '9', 'C')
/* A vCPU's pending interrupts: KVM's VCPU_IRQS_MAX_BUF holds one per
 * vCPU KVM allows (KVM_MAX_VCPUS, 255: emergency signals) and 32 more
 * (LOCAL_IRQS); KVM_S390_SET_IRQ_STATE takes no more. */
#define S390_SNAP_IRQS_MAX (255u + 32u)
/* The VM's floating ones: what KVM_DEV_FLIC_GET_ALL_IRQS's largest
 * buffer (32 MiB) holds. */
#define S390_SNAP_FLOAT_MAX ((32u << 20) / (unsigned)sizeof(struct kvm_s390_irq))
/* The facets of a vCPU's state a snapshot holds, as KVM's
 * kvm_valid_regs names them. */
#define S390_SNAP_FACETS (KVM_SYNC_PREFIX | KVM_SYNC_GPRS | KVM_SYNC_ACRS | KVM_SYNC_CRS |    \
			  KVM_SYNC_ARCH0 | KVM_SYNC_PFAULT | KVM_SYNC_VRS | KVM_SYNC_RICCB | \
			  KVM_SYNC_FPRS | KVM_SYNC_GSCB | KVM_SYNC_BPBC | KVM_SYNC_ETOKEN |  \
			  KVM_SYNC_DIAG318)

struct s390_vcpu_state {
	bool operating;                 /* mvm's run state: stopped vCPUs wait for SIGP */
	uint64_t facets;                /* KVM_SYNC_* held below (S390_SNAP_FACETS) */
	uint64_t psw_mask, psw_addr;
	uint64_t prefix, gprs[16], crs[16];
	uint32_t acrs[16];
	uint64_t todpr, cputm, ckc, pp, gbea;   /* ARCH0 */
	uint64_t pft, pfs, pfc;                 /* PFAULT */
	uint32_t fpc;
	uint64_t fprs[16];                      /* FPRS */
	uint64_t vrs[32][2];                    /* VRS (FPR i is vrs[i][0]) */
	uint8_t riccb[64];                      /* RICCB */
	uint64_t gscb[4];                       /* GSCB */
	uint8_t bpbc;                           /* BPBC */
	uint64_t etoken, etoken_ext;            /* ETOKEN */
	uint64_t diag318;                       /* DIAG318 */
	uint32_t nirqs;
	struct kvm_s390_irq irqs[S390_SNAP_IRQS_MAX];
};

struct s390_vm_state {
	bool tod_ext;                   /* the epoch index is valid */
	struct kvm_s390_vm_tod_clock tod;
	bool has_model;                 /* the CPU model below is known */
	struct kvm_s390_vm_cpu_processor model;
	bool has_keys;                  /* the guest uses storage keys */
	unsigned nregions;
	struct { uint64_t gfn, count; uint8_t *keys; } region[GMEM_MAX_REGIONS];
	uint32_t nfloat;
	struct kvm_s390_irq *floats;    /* malloc'd */
};

/* Encode into w (its own section): 0 or -errno (w->err). */
int s390_vcpu_state_put(struct snap_w *w, unsigned id, const struct s390_vcpu_state *s);
int s390_vm_state_put(struct snap_w *w, const struct s390_vm_state *s);
/* Decode from f, every bound checked: 0, or -EINVAL with a message
 * naming what is missing or damaged. s390_vm_state_free frees what
 * s390_vm_state_get allocated, whatever it returned. */
int s390_vcpu_state_get(const struct snap_file *f, unsigned id, struct s390_vcpu_state *s,
			char *err, size_t errlen);
int s390_vm_state_get(const struct snap_file *f, struct s390_vm_state *s, char *err,
		      size_t errlen);
void s390_vm_state_free(struct s390_vm_state *s);
/* Can a vCPU whose KVM keeps the facets `here` take state s (0), or
 * which facet is missing (-ENOTSUP and a message)? */
int s390_vcpu_facets_check(const struct s390_vcpu_state *s, uint64_t here, unsigned id,
			   char *err, size_t errlen);
/* Does this VM's CPU model (here) offer every facility the snapshot's
 * guest saw (0), or the first it lacks (-ENOTSUP and a message)? */
int s390_model_check(const struct kvm_s390_vm_cpu_processor *snap,
		     const struct kvm_s390_vm_cpu_processor *here, char *err, size_t errlen);

/* coredump.c: one vCPU's notes in a guest core dump from its kvm_run's
 * synchronized registers, into buf (cap bytes): their size, or 0 where
 * they do not fit. Needs no KVM. */
size_t s390_coredump_notes(uint8_t *buf, size_t cap, unsigned id, const struct kvm_run *run);

#endif
