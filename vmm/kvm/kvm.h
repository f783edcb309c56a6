/* The VM runtime's side of struct vm (vmm/kvm/vm.h): KVM VM creation and the
 * state behind vm->arch — the GSI routing table and the stop request. */
#ifndef MVM_KVM_H
#define MVM_KVM_H

#include <linux/kvm.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/kvm/vm.h"

/* GSIs below arch_irq_pins() are the interrupt controller's pins (x86:
 * 0..23 the IOAPIC, 0..15 also the PICs); MSI routes use KVM_MSI_GSI_FIRST..
 * up to KVM_MSI_GSI_END (exclusive). */
#define KVM_MSI_GSI_FIRST 24
#define KVM_MSI_GSI_END   1024

/* A GSI routed to an MSI message (PCI MSI-X) or, on s390, to an I/O
 * adapter's indicator bits (virtio-ccw adapter interrupts). */
struct kvm_msi_slot {
	bool active;
	bool adapter;                   /* an s390 adapter route, not MSI */
	uint64_t addr;
	uint32_t data;
	struct kvm_irq_routing_s390_adapter ad;
};

#define KVM_MSI_SLOTS      (KVM_MSI_GSI_END - KVM_MSI_GSI_FIRST)
#define KVM_CHIP_ROUTES_MAX 64u         /* room for arch_irq_routes */
#define KVM_ROUTE_NONE     UINT16_MAX

struct kvm_state {
	/* Routing: KVM_SET_GSI_ROUTING replaces KVM's whole table, and costs
	 * the kernel a new table and an RCU grace period; PCI devices change
	 * routes at run time (an MSI-X table write). So mvm keeps the table
	 * as KVM has it: the irqchip's fixed routes first, then one entry per
	 * active slot (in no particular order; route_idx says where). A
	 * route change rewrites, appends or removes (the last entry moves
	 * into the hole) that one entry, and the table is pushed only when an
	 * entry's content changed; route_pushes counts the pushes (with no
	 * KVM, in unit tests: the pushes that would have been made). All
	 * under route_lock. */
	pthread_mutex_t route_lock;
	struct kvm_msi_slot msi[KVM_MSI_SLOTS];
	uint16_t route_idx[KVM_MSI_SLOTS];     /* msi[i]'s entry, or KVM_ROUTE_NONE */
	struct kvm_irq_routing *routes;         /* room for route_cap entries */
	unsigned route_cap;
	uint64_t route_pushes;

	/* Stop request: the first vm_request_stop() records the status and
	 * signals stop_efd, which the main loop polls. */
	int stop_efd;
	atomic_bool stopping;
	atomic_bool reboot;     /* that request was the guest's reset (vm_request_reboot) */
	/* vCPU threads wait here, confined, until mvm_start has every thread
	 * of the VM confined too (vm_open_gate): no guest instruction runs
	 * before. */
	sem_t gate;
	/* Pause (vcpu_pause_all): pause_req is set, every vCPU is kicked out
	 * of KVM_RUN and parks in vcpu_park, counted in `parked`; it leaves
	 * when pause_req is cleared or the VM stops (vcpu_pause_wake).
	 * parked and the waits under pause_lock; pause_cond (CLOCK_MONOTONIC)
	 * is broadcast on every change of either. */
	atomic_bool pause_req;
	/* The halt probe (vcpu_probe_stopped): its round, which each vCPU
	 * answers in its own probe_seen once kicked. */
	atomic_uint probe_seq;
	pthread_mutex_t pause_lock;
	pthread_cond_t pause_cond;
	unsigned parked;
	/* The lowest and highest vCPU fd (a vCPU's filter names them: s390's
	 * SIGP acts on other vCPUs); -1 before the first. */
	int vcpu_fd_lo, vcpu_fd_hi;
	atomic_int status;
	atomic_int reason;                 /* enum vm_stop_reason */
	char stop_msg[512];                /* written by the winner before stop_efd */

	size_t vcpu_mmap_size;
	unsigned max_vcpus;
	void *arch_state;           /* arch_vm_init's (x86: supported CPUID) */
};

/* Set up struct vm without KVM (buses, allocators, stop eventfd, routing
 * state): used by kvm_vm_create and by unit tests. 0 or -errno. */
int vm_init(struct vm *vm, unsigned ncpus);
/* Undo vm_init and kvm_vm_create (closes fds, unmaps RAM). */
void vm_fini(struct vm *vm);

/* Open /dev/kvm, check the API version and the capabilities mvm needs.
 * Returns the fd or -errno; on -ENOENT the caller reports "no KVM". */
int kvm_open(char *err, size_t errlen);
/* Most vCPUs this KVM supports (KVM_CAP_MAX_VCPUS, else NR_VCPUS). */
unsigned kvm_max_vcpus(int kvm_fd);

/* Create the VM on kvm_fd (taken over): arch_vm_init (x86: TSS, identity
 * map, irqchip, PIT, supported CPUID), GSI routing, guest RAM: anonymous,
 * or with mem_fd >= 0 mapped from that file, privately (a snapshot's
 * memory) or shared (mem_shared: mvm_config.mem_file), gmem_map_file;
 * the caller keeps the fd. 0 or -errno + message. */
int kvm_vm_create(struct vm *vm, int kvm_fd, uint64_t mem, unsigned ncpus, int mem_fd,
		  bool mem_shared, char *err, size_t errlen);

/* The routing table as mvm keeps it for KVM (irqchip routes, then active
 * MSI / adapter routes), copied into r, which has room for cap entries.
 * Returns the entry count. Takes route_lock. */
unsigned kvm_get_routes(struct kvm_state *ks, struct kvm_irq_routing_entry *r, unsigned cap);

/* Whether the host's KVM is PVM (/sys/module/kvm_pvm under sysfs_root,
 * "/sys" on a real host): a KVM that cannot run unmodified guests. */
bool kvm_host_is_pvm(const char *sysfs_root);

/* Let n vCPU threads waiting at the gate run (or see the stop). */
void vm_open_gate(struct vm *vm, unsigned n);

static inline struct kvm_state *vm_kvm(const struct vm *vm)
{
	return vm->arch;
}

/* Status recorded by the first vm_request_stop (or -1 when none). */
int vm_stop_status(const struct vm *vm);
/* Its reason and message (after the stop request was seen). */
enum vm_stop_reason vm_stop_reason(const struct vm *vm);
const char *vm_stop_message(const struct vm *vm);

#endif
