/* mvm(1)'s process-wide confinement, in two steps. jail_begin, before
 * anything is opened (one thread): the cgroup, the network namespace, a
 * new PID namespace (a fork: the parent only waits), a private mount
 * namespace for --chroot; it remembers the descriptors mvm inherited.
 * jail_enter, between mvm_prepare (everything is open: /dev/kvm, the VM,
 * the images, the kernel read) and mvm_start (the first thread): the
 * inherited descriptors closed, resource limits, pivot_root into the jail
 * directory, every capability and supplementary group dropped, the user
 * and group to run as, the environment wiped, not dumpable, no new
 * privileges. Process-wide, so the CLI's and not the library's (a host
 * program embedding libmvm decides its own). docs/sandbox-jail.md. */
#ifndef MVM_JAIL_H
#define MVM_JAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <termios.h>

#define JAIL_MAX_CGROUP_SET 16

/* Console output to a file may grow by this much past its size at the
 * start (RLIMIT_FSIZE; the disks' sizes are allowed anyway). */
#define JAIL_CONSOLE_FILE_MAX (1ULL << 30)

struct jail_cfg {
	/* jail_begin */
	const char *chroot_dir;         /* NULL: stay (else: needs root) */
	const char *netns;              /* NULL, or a network namespace file to join */
	bool new_pid_ns;                /* mvm runs as PID 1 of a new PID namespace */
	const char *cgroup;             /* NULL, or a cgroup v2 directory (made if missing) */
	const char *cgroup_set[JAIL_MAX_CGROUP_SET];    /* "FILE=VALUE", written first */
	unsigned ncgroup_set;
	/* jail_enter */
	bool set_ids;                   /* switch to uid/gid (supplementary groups: none) */
	uid_t uid;
	gid_t gid;
	/* What the VM still creates after this: threads (vCPUs, queues,
	 * device helpers, control) and file descriptors (a ring and an
	 * eventfd per queue), for RLIMIT_NPROC and RLIMIT_NOFILE. */
	unsigned threads;
	unsigned fds;
	/* RLIMIT_FSIZE: the largest offset mvm may write (the largest disk,
	 * the console file's allowance); 0: leave it. */
	uint64_t fsize;
	/* RLIMIT_MEMLOCK: what the I/O threads will pin (fixed-buffers=on,
	 * after every capability, CAP_IPC_LOCK too, is gone), on top of the
	 * limit now; 0: leave it. Raised where mvm may (as root). */
	uint64_t memlock;
};

/* What jail_begin hands to jail_enter. */
struct jail_state {
	int *inherited;                 /* descriptors open when mvm started (> 2) */
	unsigned ninherited;
	pid_t child;                    /* in the parent of a new PID namespace: the child */
	bool tty;                       /* stdin is a terminal: its mode, given back by */
	struct termios tio;             /* jail_wait_child however the child ended */
};

/* Whether mvm may run as configured by a user of effective id euid:
 * --sandbox on as root needs --uid/--gid (an explicit --uid 0 --gid 0
 * stays root, without capabilities). 0 or -EINVAL with a message. */
int jail_check(bool sandbox, bool set_ids, uid_t euid, char *err, size_t errlen);

/* The first step (see above). 0: go on in this process. 1: this is the
 * parent of a new PID namespace: call jail_wait_child and exit with its
 * result. Or -errno with a one-line message. */
int jail_begin(const struct jail_cfg *cfg, struct jail_state *st, char *err, size_t errlen);

/* In the parent of --new-pid-ns: forward SIGINT, SIGTERM and SIGHUP
 * (blocked by the caller) to the child, wait for it, give the terminal
 * its mode back; the child's exit status, 128+N if signal N killed it. */
int jail_wait_child(const struct jail_state *st);

/* The second step (see above), in a single-threaded process. 0 or -errno
 * with a one-line message; on an error the process may be half confined
 * and must not go on. */
int jail_enter(const struct jail_cfg *cfg, struct jail_state *st, char *err, size_t errlen);

/* Tasks (threads) now running as real user uid, from /proc; 0 if /proc
 * cannot be read. */
unsigned jail_count_tasks(uid_t uid);
/* Whether RLIMIT_NPROC binds tasks of real user uid: not for root of the
 * initial user namespace (Linux's copy_process exempts INIT_USER), where
 * jail_enter leaves it alone. Root of a container's namespace is bound. */
bool jail_nproc_exempt(uid_t uid);
/* The highest open file descriptor, from /proc/self/fd; -1 if unknown. */
int jail_max_fd(void);

#endif
