/* Per-thread seccomp filters: one allow-list per kind of thread mvm runs.
 *
 * Every thread of a VM is started by mvm_start, before any vCPU runs and
 * while the starting thread is not filtered, and installs its own filter
 * (no TSYNC) once its setup is done and before it touches anything the
 * guest controls; a thread that cannot install it fails the start. No
 * thread is created after that, so no filter allows clone, and none
 * allows a call that opens a file or a socket, creates an io_uring or
 * registers anything with one: everything of that kind is done by
 * mvm_prepare, while the process has one thread.
 *
 * Arguments are checked where a value decides what the call can do:
 * ioctls by request number AND by the descriptor they act on (the VM's
 * fd, the thread's own vCPU fd, the terminal), io_uring_enter only on the
 * thread's own ring, futex operations, mmap/mprotect protections and
 * flags, madvise advice. A forbidden call, or an allowed call with
 * arguments outside its checks, kills the whole process
 * (SECCOMP_RET_KILL_PROCESS): the parent sees SIGSYS, the kernel log names
 * the thread and the call. docs/sandbox.md has the table, kind by kind.
 *
 * The lists are what each thread does after setup (the architecture adds
 * its own ioctls and calls, arch_sandbox), plus what glibc needs to end
 * threads and to allocate. */
#ifndef MVM_SANDBOX_H
#define MVM_SANDBOX_H

#include <linux/filter.h>
#include <stddef.h>

enum sandbox_kind {
	SANDBOX_MAIN,           /* the thread that waits for the VM: signals, wait, teardown */
	SANDBOX_CONTROL,        /* a VM's control thread: console, teardown */
	SANDBOX_VCPU,           /* KVM_RUN and the device emulation it runs */
	SANDBOX_QUEUE,          /* virtqueue workers and device helper threads */
	SANDBOX_API,            /* a control server's thread (mvm --api-socket):
				 * accept on its socket, HTTP, run-time control */
	SANDBOX_KINDS
};

extern const char *const sandbox_kind_names[SANDBOX_KINDS];

/* The descriptors (and the signal) a thread's filter names; -1: none (a
 * call on it is then refused). */
struct sandbox_fds {
	int vm;                 /* the VM's: interrupt lines, irqfds, ioeventfds, routes */
	int vcpu;               /* a vCPU thread's own: KVM_RUN */
	int vcpu_lo, vcpu_hi;   /* every vCPU's, lowest and highest (s390: SIGP) */
	int ring;               /* a queue thread's io_uring */
	int tty;                /* the main thread's terminal (its mode restored) */
	int kick_signal;        /* the main thread gives its handler back at destroy */
	int listen;             /* a control server's listening socket */
	int snap_dir;           /* a control server's snapshot directory (O_PATH) */
	int mem;                /* the file guest RAM is in (mvm_config.mem_file) */
	int image_dir;          /* a control server's image directory (O_PATH) */
	int arch_dev;           /* the architecture's KVM device a snapshot reads
				 * (arch_vm_snap_fd: s390x's FLIC) */
};
#define SANDBOX_NO_FDS ((struct sandbox_fds){ -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1 })

/* A kind's bit in the masks below. */
#define SANDBOX_K(kind) (1u << (kind))

/* Which descriptor of struct sandbox_fds a call must name. */
enum sandbox_fd {
	SANDBOX_FD_VM,
	SANDBOX_FD_VCPU,        /* the thread's own vCPU */
	SANDBOX_FD_VCPUS,       /* any vCPU of the VM */
	SANDBOX_FD_RING,
	SANDBOX_FD_TTY,
	SANDBOX_FD_KICK_SIGNAL, /* not a descriptor: the VM's kick signal */
	SANDBOX_FD_LISTEN,      /* the control server's listening socket */
	SANDBOX_FD_SNAP_DIR,    /* its snapshot directory */
	SANDBOX_FD_MEM,         /* the file guest RAM is in */
	SANDBOX_FD_IMAGE_DIR,   /* its image directory */
	SANDBOX_FD_ARCH_DEV,    /* the architecture's KVM device (s390x: the FLIC) */
};

/* An ioctl the kinds in `kinds` may issue on descriptor `fd`. */
struct sandbox_ioctl {
	unsigned kinds;
	enum sandbox_fd fd;
	unsigned long request;
};

/* A system call the kinds in `kinds` may make with any arguments (for an
 * architecture's own needs; see arch_sandbox). */
struct sandbox_call {
	unsigned kinds;
	long nr;
};

/* Room for any kind's program. */
#define SANDBOX_MAX_INSNS 1024

/* Build kind's BPF program for fds into prog (room for cap
 * instructions): the number of instructions, or -errno (-ENOSPC: cap too
 * small). */
int sandbox_build(enum sandbox_kind kind, const struct sandbox_fds *fds,
		  struct sock_filter *prog, unsigned cap);

/* Install kind's filter on the calling thread, with PR_SET_NO_NEW_PRIVS
 * (needed for an unprivileged filter). 0 or -errno. */
int sandbox_enter(enum sandbox_kind kind, const struct sandbox_fds *fds);

/* Hold the calling thread's file access (Landlock; the thread's later
 * children inherit it) to two trees (O_PATH descriptors will do; -1:
 * none): beneath snap_dirfd it may make directories and regular files,
 * write, truncate, rename and remove them, and list and sync
 * directories (a snapshot); beneath image_dirfd read and write regular
 * files (an image for a swap); everywhere else it may open nothing.
 * Descriptors open already are not affected. Before sandbox_enter (its
 * filter forbids Landlock's calls). 0, or -errno: -ENOSYS or -EOPNOTSUPP
 * where the kernel has no Landlock or it is off. */
int sandbox_beneath(int snap_dirfd, int image_dirfd);

#endif
