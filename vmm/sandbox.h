/* Per-thread seccomp filters: one allow-list per kind of thread mvm runs.
 *
 * Each thread installs its own filter (no TSYNC) once its setup is done and
 * before it touches anything the guest controls; a filter is inherited by
 * the threads it creates (a vCPU thread starts queue threads at DRIVER_OK),
 * which then add their own, narrower one. A forbidden system call, or an
 * ioctl whose request number is not on the kind's list, kills the whole
 * process (SECCOMP_RET_KILL_PROCESS): the parent sees SIGSYS, the kernel
 * log names the thread and the call.
 *
 * The lists are what each thread does after setup (the ioctls come from
 * here and from the architecture, arch_sandbox_ioctls), plus what glibc
 * needs to start and end threads and to allocate. Setup itself (opening
 * /dev/kvm and the images, KVM_CREATE_*) happens before any filter. */
#ifndef MVM_SANDBOX_H
#define MVM_SANDBOX_H

#include <linux/filter.h>
#include <stddef.h>

enum sandbox_kind {
	SANDBOX_MAIN,           /* mvm(1)'s main thread: signals, wait, teardown */
	SANDBOX_CONTROL,        /* a VM's control thread: console input, teardown */
	SANDBOX_VCPU,           /* KVM_RUN and the device emulation it runs */
	SANDBOX_QUEUE,          /* virtqueue workers and device helper threads */
	SANDBOX_KINDS
};

extern const char *const sandbox_kind_names[SANDBOX_KINDS];

/* Room for any kind's program. */
#define SANDBOX_MAX_INSNS 1024

/* Build kind's BPF program into prog (room for cap instructions): the
 * number of instructions, or -errno (-ENOSPC: cap too small). */
int sandbox_build(enum sandbox_kind kind, struct sock_filter *prog, unsigned cap);

/* Install kind's filter on the calling thread, with PR_SET_NO_NEW_PRIVS
 * (needed for an unprivileged filter, and inherited anyway). 0 or -errno. */
int sandbox_enter(enum sandbox_kind kind);

#endif
