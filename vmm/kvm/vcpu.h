/* vCPU threads: one per vCPU, each looping on KVM_RUN and dispatching port
 * I/O and MMIO exits to the VM's buses. Stopping: the main thread sets
 * kvm_run->immediate_exit and sends vm->kick_signal (no-op handler) to each
 * thread, then joins it; never pthread_cancel. */
#ifndef MVM_VCPU_H
#define MVM_VCPU_H

#include <linux/kvm.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"

struct json;

enum vcpu_exit_kind {
	VCPU_EXIT_IO, VCPU_EXIT_MMIO, VCPU_EXIT_INTR, VCPU_EXIT_HLT, VCPU_EXIT_SHUTDOWN,
	VCPU_EXIT_SYSTEM_EVENT, VCPU_EXIT_OTHER, VCPU_EXIT_ARCH, VCPU_EXIT_KINDS,
};

struct vcpu {
	struct vm *vm;
	unsigned id;
	int fd;
	struct kvm_run *run;
	size_t run_size;
	pthread_t thread;
	bool started;
	int tid;                           /* the thread's, while it runs (0: not yet, or no more) */
	struct thread_handshake hs;        /* its filter is on (vcpu_start) */
	uint64_t exits[VCPU_EXIT_KINDS];   /* written by the vCPU thread only */
	char fatal[512];                   /* what a fatal exit was (vcpu_handle_exit) */
	/* The last KVM_RUN returned an exit mvm handled: KVM finishes it
	 * (an IN's data into RAX, the instruction's end) only on the next
	 * KVM_RUN. The vCPU's thread only. */
	bool exit_pending;
	/* The halt probe's answer (vcpu_probe_stopped): the round answered
	 * and whether the vCPU had stopped for good then. Written by the
	 * vCPU's thread, read by the control thread. */
	atomic_uint probe_seen;
	atomic_bool probe_stopped;
};

/* Handle one KVM exit described by run: dispatch I/O, classify the rest.
 * Returns -1 to keep running, or the exit status mvm should stop with
 * (for any but 0, v->fatal says why, and it was logged). Needs no KVM
 * (unit-testable). */
int vcpu_handle_exit(struct vcpu *v, struct kvm_run *run);

/* Why the VM stops when a vCPU exit ends it with status: 0 a poweroff,
 * MVM_EXIT_CRASHED a crash (triple fault), MVM_EXIT_PANICKED a panic the
 * guest reported, MVM_EXIT_INTERNAL a host failure, anything else an
 * exit mvm cannot handle. */
enum vm_stop_reason vcpu_stop_reason(int status);

/* The exit in words, for messages: "KVM_EXIT_INTERNAL_ERROR, suberror 1
 * (instruction emulation failed)", ... */
void vcpu_describe_exit(const struct kvm_run *run, char *out, size_t outlen);

/* A guest that stopped itself where the architecture does not say so
 * (x86: Linux's halt, and its poweroff without ACPI, leave every CPU in
 * HLT with interrupts off, and no exit comes): one round of the probe,
 * from the control thread about once a second while the VM runs.
 * Returns whether every vCPU answered the last round as stopped for good
 * (arch_vcpu_stopped), then kicks each for the next. A pause in between
 * leaves a round unanswered (false). false where the architecture tells
 * the VMM itself. */
bool vcpu_probe_stopped(struct vcpu *vcpus, unsigned n);

/* KVM_CREATE_VCPU + mmap of kvm_run. 0 or -errno. */
int vcpu_create(struct vcpu *v, struct vm *vm, unsigned id);
void vcpu_destroy(struct vcpu *v);

/* Take sig, the signal vcpu_kick sends (struct vm's kick_signal), for a
 * VM before any of its vCPUs starts: its no-op handler is installed by the
 * first taker (no SA_RESTART, so KVM_RUN returns EINTR) and the
 * disposition found then is restored when the last one gives it back.
 * -EINVAL: a signal the kernel sends for a fault, SIGCHLD and the like;
 * -EBUSY: the process has a handler of its own there. Process-wide by
 * nature: the embedding program chooses the signal. */
int vcpu_signal_get(int sig);
/* Whether sig is one vcpu_signal_get refuses as -EINVAL (a fault's, a
 * child's, SIGKILL...). */
bool vcpu_signal_reserved(int sig);
void vcpu_signal_put(int sig);
int vcpu_start(struct vcpu *v);
/* The first and last thing a thread that runs v does (vcpu_start's, or
 * the KVM probe's): publish its tid for vcpu_kick, and take it back. */
void vcpu_thread_enter(struct vcpu *v);
void vcpu_thread_leave(struct vcpu *v);
/* Kick out of KVM_RUN; the thread then sees the stop and returns. The
 * signal goes by tgkill to this process (what the sandbox allows), never
 * by pthread_kill: musl's is tkill, which a sandboxed thread may not call. */
void vcpu_kick(struct vcpu *v);
void vcpu_join(struct vcpu *v);

/* Pause the VM's vCPUs (vcpus[0..n), every one started): each is kicked
 * out of KVM_RUN and parks (arch_vcpu_paused on its thread) until
 * vcpu_resume_all. Returns once all n are parked: 0; -ESHUTDOWN when the
 * VM stops meanwhile, -ETIMEDOUT at deadline_ns (CLOCK_MONOTONIC): then
 * the pause is undone. One pauser at a time (the library's lock). */
int vcpu_pause_all(struct vcpu *vcpus, unsigned n, uint64_t deadline_ns);
/* Ask the VM's vCPUs to park before they run (a VM started paused):
 * set before the gate opens, each parks at its first look, and
 * vcpu_pause_all then waits for them. */
void vcpu_pause_request(struct vm *vm);
/* Let parked vCPUs run again; returns at once. */
void vcpu_resume_all(struct vm *vm);
/* After a stop request: parked vCPUs see it and end (before the joins),
 * and a pause waiting for them returns. */
void vcpu_pause_wake(struct vm *vm);

/* {"id":N,"exits":{...}} */
void vcpu_stats_json(const struct vcpu *v, struct json *j);

#endif
