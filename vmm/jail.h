/* mvm(1)'s process-wide confinement, between mvm_prepare (everything is
 * open: /dev/kvm, the VM, the images, the kernel read) and mvm_start (the
 * first thread): chroot, the user and group to run as, resource limits,
 * no new privileges, not dumpable. Process-wide, so the CLI's and not the
 * library's (a host program embedding libmvm decides its own). */
#ifndef MVM_JAIL_H
#define MVM_JAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct jail_cfg {
	const char *chroot_dir;         /* NULL: stay */
	bool set_ids;                   /* switch to uid/gid (supplementary groups: none) */
	uid_t uid;
	gid_t gid;
	/* What the VM still creates after this: threads (vCPUs, queues,
	 * device helpers, control) and file descriptors (a ring and an
	 * eventfd per queue), for RLIMIT_NPROC and RLIMIT_NOFILE. */
	unsigned threads;
	unsigned fds;
};

/* Tasks (threads) now running as real user uid, from /proc; 0 if /proc
 * cannot be read. */
unsigned jail_count_tasks(uid_t uid);
/* Whether RLIMIT_NPROC binds tasks of real user uid: not for root of the
 * initial user namespace (Linux's copy_process exempts INIT_USER), where
 * jail_enter leaves it alone. Root of a container's namespace is bound. */
bool jail_nproc_exempt(uid_t uid);
/* The highest open file descriptor, from /proc/self/fd; -1 if unknown. */
int jail_max_fd(void);

/* Apply cfg to this (single-threaded) process: RLIMIT_NOFILE to what is
 * open plus cfg->fds, RLIMIT_NPROC to what the user runs plus
 * cfg->threads (unless jail_nproc_exempt), RLIMIT_CORE 0, then chroot and the ids, then not
 * dumpable and no new privileges. 0 or -errno with a one-line message. */
int jail_enter(const struct jail_cfg *cfg, char *err, size_t errlen);

#endif
