#include "vmm/cli/jail.h"
#include "vmm/base/util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

/* Slack over the counted needs: a log line's stdio, a late eventfd. */
#define JAIL_SLACK 8

unsigned jail_count_tasks(uid_t uid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	unsigned n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[300], line[256];
		unsigned long ruid = ULONG_MAX, threads = 0;
		FILE *f;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/status", e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;       /* gone meanwhile */
		while (fgets(line, sizeof(line), f)) {
			if (!strncmp(line, "Uid:", 4))
				ruid = strtoul(line + 4, NULL, 10);
			else if (!strncmp(line, "Threads:", 8))
				threads = strtoul(line + 8, NULL, 10);
		}
		fclose(f);
		if (ruid == (unsigned long)uid)
			n += (unsigned)threads;
	}
	closedir(d);
	return n;
}

bool jail_nproc_exempt(uid_t uid)
{
	char line[128];
	unsigned long inside, outside, count;
	bool identity = false;
	FILE *f;

	if (uid != 0)
		return false;
	/* The initial user namespace maps all of 0..2^32-2 onto itself. */
	f = fopen("/proc/self/uid_map", "re");
	if (!f)
		return false;
	if (fgets(line, sizeof(line), f) &&
	    sscanf(line, "%lu %lu %lu", &inside, &outside, &count) == 3)
		identity = inside == 0 && outside == 0 && count == 4294967295UL;
	fclose(f);
	return identity;
}

int jail_max_fd(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int max = -1;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (isdigit((unsigned char)e->d_name[0]) && atoi(e->d_name) > max)
			max = atoi(e->d_name);
	}
	closedir(d);
	return max;
}


int jail_check(bool sandbox, bool set_ids, uid_t euid, char *err, size_t errlen)
{
	if (sandbox && euid == 0 && !set_ids)
		return err_set(err, errlen, -EINVAL, "running as root with --sandbox on: a guest "
			       "that escaped its device would act as root; give --uid N --gid N "
			       "(a user of its own, e.g. 65534), or --uid 0 --gid 0 to stay root "
			       "without capabilities");
	return 0;
}

static int jail_write_file(const char *path, const char *value)
{
	size_t len = strlen(value);
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, value, len) != (ssize_t)len)
		ret = errno ? -errno : -EIO;
	close(fd);
	return ret;
}

/* --cgroup: settings first, then this process moves in, before anything
 * is allocated (memory is charged to the cgroup of the task that faults
 * it in). mvm leaves the directory when it ends: the caller owns it. */
static int jail_cgroup(const struct jail_cfg *c, char *err, size_t errlen)
{
	char path[PATH_MAX];
	struct statfs fs;
	unsigned i;
	int ret;

	/* Every setting checked before anything is written. */
	for (i = 0; i < c->ncgroup_set; i++) {
		const char *s = c->cgroup_set[i], *eq = strchr(s, '=');
		size_t klen = eq ? (size_t)(eq - s) : 0;

		if (!klen || klen > NAME_MAX || memchr(s, '/', klen) ||
		    (klen <= 2 && !strncmp(s, "..", klen)))
			return err_set(err, errlen, -EINVAL, "--cgroup-set '%s': give FILE=VALUE "
				       "with a file of the cgroup, e.g. memory.max=1G", s);
		if ((klen == 12 && !strncmp(s, "cgroup.procs", 12)) ||
		    (klen == 14 && !strncmp(s, "cgroup.threads", 14)))
			return err_set(err, errlen, -EINVAL, "--cgroup-set '%s': mvm moves itself "
				       "into the cgroup; set a limit such as memory.max or pids.max", s);
	}
	if (mkdir(c->cgroup, 0755) && errno != EEXIST)
		return err_set(err, errlen, -errno, "--cgroup '%s': %s; give a directory in a "
			       "cgroup v2 hierarchy (/sys/fs/cgroup/...)", c->cgroup, strerror(errno));
	if (statfs(c->cgroup, &fs) || fs.f_type != CGROUP2_SUPER_MAGIC)
		return err_set(err, errlen, -ENOTDIR, "--cgroup '%s': not in a cgroup v2 "
			       "hierarchy; give a directory under a cgroup2 mount (/sys/fs/cgroup/...)",
			       c->cgroup);
	for (i = 0; i < c->ncgroup_set; i++) {
		const char *s = c->cgroup_set[i], *eq = strchr(s, '=');

		snprintf(path, sizeof(path), "%s/%.*s", c->cgroup, (int)(eq - s), s);
		ret = jail_write_file(path, eq + 1);
		if (ret)
			return err_set(err, errlen, ret, "--cgroup-set '%s': %s%s", s, strerror(-ret),
				       ret == -ENOENT ? "; is its controller in the parent's "
				       "cgroup.subtree_control?" : "");
	}
	snprintf(path, sizeof(path), "%s/cgroup.procs", c->cgroup);
	ret = jail_write_file(path, "0");
	if (ret)
		return err_set(err, errlen, ret, "--cgroup '%s': cannot move mvm in: %s", c->cgroup,
			       strerror(-ret));
	return 0;
}

static int jail_netns(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = 0;

	if (fd < 0 || setns(fd, CLONE_NEWNET))
		ret = err_set(err, errlen, -errno, "--netns '%s': %s; give a network namespace "
			      "file (/run/netns/NAME, /proc/PID/ns/net) and run mvm as root", path,
			      strerror(errno));
	if (fd >= 0)
		close(fd);
	return ret;
}

/* --new-pid-ns: the child is PID 1 of a new PID namespace and goes on to
 * run the VM; the parent only waits (jail_wait_child). SIGCHLD is blocked
 * before the fork, so the parent's signalfd sees even an early death. */
static int jail_pid_ns(struct jail_state *st, char *err, size_t errlen)
{
	sigset_t chld;
	pid_t pid;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &chld, NULL))
		return err_set(err, errlen, -errno, "sigprocmask: %s", strerror(errno));
	st->tty = tcgetattr(STDIN_FILENO, &st->tio) == 0;
	if (unshare(CLONE_NEWPID))
		return err_set(err, errlen, -errno, "--new-pid-ns: %s; a PID namespace needs root",
			       strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return err_set(err, errlen, -errno, "--new-pid-ns: fork: %s", strerror(errno));
	if (pid > 0) {
		st->child = pid;
		return 1;
	}
	sigprocmask(SIG_UNBLOCK, &chld, NULL);
	/* The VM must not outlive the process its caller waits for. (The
	 * parent is outside the namespace: getppid() says 0 here.) */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0))
		_exit(128 + SIGKILL);
	return 0;
}

int jail_wait_child(const struct jail_state *st)
{
	sigset_t sigs;
	int sfd, status, rc = 128 + SIGKILL;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGCHLD);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	for (;;) {
		struct signalfd_siginfo si;
		pid_t w = waitpid(st->child, &status, WNOHANG);

		if (w == st->child) {
			rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			break;
		}
		if (w < 0 && errno != EINTR)
			break;
		if (sfd < 0) {          /* no signalfd: wait without forwarding */
			if (waitpid(st->child, &status, 0) == st->child)
				rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			break;
		}
		if (read(sfd, &si, sizeof(si)) == sizeof(si) && si.ssi_signo != SIGCHLD)
			kill(st->child, (int)si.ssi_signo);
	}
	if (sfd >= 0)
		close(sfd);
	if (st->tty)
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &st->tio);
	return rc;
}

/* The descriptors open now, but 0-2 (and the directory being read). */
static int jail_list_fds(struct jail_state *st)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	unsigned cap = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		int fd;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		fd = atoi(e->d_name);
		if (fd <= STDERR_FILENO || fd == dirfd(d))
			continue;
		if (st->ninherited == cap) {
			int *n = realloc(st->inherited, (cap = cap ? 2 * cap : 16) * sizeof(*n));

			if (!n) {
				closedir(d);
				return -ENOMEM;
			}
			st->inherited = n;
		}
		st->inherited[st->ninherited++] = fd;
	}
	closedir(d);
	return 0;
}

int jail_begin(const struct jail_cfg *c, struct jail_state *st, char *err, size_t errlen)
{
	struct stat sb;
	int ret;

	memset(st, 0, sizeof(*st));
	if (c->chroot_dir && (stat(c->chroot_dir, &sb) || !S_ISDIR(sb.st_mode)))
		return err_set(err, errlen, errno ? -errno : -ENOTDIR, "--chroot '%s': %s; give an "
			       "existing directory", c->chroot_dir,
			       errno ? strerror(errno) : "not a directory");
	if (c->ncgroup_set && !c->cgroup)
		return err_set(err, errlen, -EINVAL, "--cgroup-set needs --cgroup DIR");
	if (c->cgroup) {
		ret = jail_cgroup(c, err, errlen);
		if (ret)
			return ret;
	}
	if (c->netns) {
		ret = jail_netns(c->netns, err, errlen);
		if (ret)
			return ret;
	}
	if (c->new_pid_ns) {
		ret = jail_pid_ns(st, err, errlen);
		if (ret)
			return ret;
	}
	/* A mount namespace of its own, private, so that the pivot_root in
	 * jail_enter changes no one else's view. Made now, while this is the
	 * only thread: a thread that exists at unshare (an io_uring worker
	 * later on) would keep the host's namespace. */
	if (c->chroot_dir &&
	    (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)))
		return err_set(err, errlen, -errno, "--chroot '%s': a mount namespace: %s; --chroot "
			       "needs root", c->chroot_dir, strerror(errno));
	ret = jail_list_fds(st);
	if (ret)
		return err_set(err, errlen, ret, "listing inherited descriptors (/proc/self/fd): %s",
			       strerror(-ret));
	return 0;
}

static int jail_limit(int res, rlim_t v, const char *name, char *err, size_t errlen)
{
	struct rlimit rl = { v, v };

	if (setrlimit(res, &rl))
		return err_set(err, errlen, -errno, "setrlimit(%s, %llu): %s", name,
			       (unsigned long long)v, strerror(errno));
	return 0;
}

static int jail_limits(const struct jail_cfg *c, uid_t uid, char *err, size_t errlen)
{
	int maxfd = jail_max_fd(), ret;

	/* Counted while /proc is still there (before the pivot_root). */
	if (maxfd < 0)
		maxfd = 1024;   /* no /proc: leave room rather than guess low */
	ret = jail_limit(RLIMIT_NOFILE, (rlim_t)maxfd + 1 + c->fds + JAIL_SLACK, "RLIMIT_NOFILE",
			 err, errlen);
	/* Counting the user's tasks reads every process's status: O(processes
	 * on the host), milliseconds on a busy one, for a limit that would
	 * never be checked. */
	if (!ret && !jail_nproc_exempt(uid))
		ret = jail_limit(RLIMIT_NPROC, (rlim_t)jail_count_tasks(uid) + c->threads +
				 JAIL_SLACK, "RLIMIT_NPROC", err, errlen);
	if (!ret)
		ret = jail_limit(RLIMIT_CORE, 0, "RLIMIT_CORE", err, errlen);
	if (!ret && c->memlock) {
		struct rlimit rl;

		/* A user that may not raise it keeps what it has: the disk
		 * then says once that it runs without registered RAM. */
		if (!getrlimit(RLIMIT_MEMLOCK, &rl) && rl.rlim_cur != RLIM_INFINITY &&
		    rl.rlim_cur + c->memlock > rl.rlim_cur) {
			rl.rlim_cur = rl.rlim_max = rl.rlim_cur + c->memlock;
			if (setrlimit(RLIMIT_MEMLOCK, &rl) && errno != EPERM)
				ret = err_set(err, errlen, -errno, "setrlimit(RLIMIT_MEMLOCK, %llu): %s",
					      (unsigned long long)rl.rlim_cur, strerror(errno));
		}
	}
	if (!ret && c->fsize) {
		/* A write past it fails with EFBIG (the console output then
		 * stops, saying so) instead of killing mvm with SIGXFSZ. */
		signal(SIGXFSZ, SIG_IGN);
		ret = jail_limit(RLIMIT_FSIZE, (rlim_t)c->fsize, "RLIMIT_FSIZE", err, errlen);
	}
	return ret;
}

/* The jail directory becomes "/": bound onto itself (a mount point, and
 * none of the mounts below it come along), read-only, nosuid, nodev,
 * noexec; the host's tree is detached. */
static int jail_pivot(const char *dir, char *err, size_t errlen)
{
	const char *what;

	if (mount(dir, dir, NULL, MS_BIND, NULL)) {
		what = "bind mount";
	} else if (mount(NULL, dir, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID |
			 MS_NODEV | MS_NOEXEC, NULL)) {
		what = "read-only remount";
	} else if (chdir(dir)) {
		what = "chdir";
	} else if (syscall(SYS_pivot_root, ".", ".")) {
		what = "pivot_root";
	} else if (umount2(".", MNT_DETACH)) {
		what = "detaching the host's root";
	} else if (chdir("/")) {
		what = "chdir /";
	} else {
		return 0;
	}
	return err_set(err, errlen, -errno, "--chroot '%s': %s: %s", dir, what, strerror(errno));
}

static int jail_capget(struct __user_cap_data_struct d[2])
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };

	return syscall(SYS_capget, &h, d) ? -errno : 0;
}

/* No capability left in any set, whoever mvm runs as: as root, first the
 * bounding set and securebits that keep root from ever getting them back
 * (no setuid fixup skipped, no ambient raise, root not special at
 * execve), all locked; then the groups and ids; then capset to nothing. */
static int jail_drop_privileges(const struct jail_cfg *c, char *err, size_t errlen)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { { 0 } };
	unsigned i;
	int cap;

	if (jail_capget(d))
		return err_set(err, errlen, -errno, "capget: %s", strerror(errno));
	if (d[CAP_TO_INDEX(CAP_SETPCAP)].effective & CAP_TO_MASK(CAP_SETPCAP)) {
		for (cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
			if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0))
				return err_set(err, errlen, -errno, "dropping capability %d from the "
					       "bounding set: %s", cap, strerror(errno));
		if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
			  SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
			  SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED, 0, 0, 0))
			return err_set(err, errlen, -errno, "securebits: %s", strerror(errno));
	}
	/* EINVAL: a kernel before ambient capabilities (4.3), none to clear. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && errno != EINVAL)
		return err_set(err, errlen, -errno, "clearing ambient capabilities: %s",
			       strerror(errno));
	if (c->set_ids) {
		/* Groups first: after setresuid they can no longer change. A
		 * user that cannot drop them (not root) may go on only if it
		 * has none besides the group it asked for. */
		if (setgroups(0, NULL)) {
			int e = errno, n = getgroups(0, NULL);
			gid_t g = c->gid;

			if (e != EPERM || n > 1 || (n == 1 && (getgroups(1, &g) != 1 || g != c->gid)))
				return err_set(err, errlen, -e, "setgroups: %s; mvm would keep %d "
					       "supplementary group(s): run it as root to drop them, "
					       "or leave out --uid/--gid", strerror(e), n);
		}
		if (setresgid(c->gid, c->gid, c->gid))
			return err_set(err, errlen, -errno, "--gid %u: %s; run mvm as root to "
				       "switch groups", (unsigned)c->gid, strerror(errno));
		if (setresuid(c->uid, c->uid, c->uid))
			return err_set(err, errlen, -errno, "--uid %u: %s; run mvm as root to "
				       "switch users", (unsigned)c->uid, strerror(errno));
	}
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capset, &h, d))
		return err_set(err, errlen, -errno, "capset: %s", strerror(errno));
	/* Closed, not open: verify rather than trust. */
	if (jail_capget(d))
		return err_set(err, errlen, -errno, "capget: %s", strerror(errno));
	for (i = 0; i < 2; i++)
		if (d[i].effective || d[i].permitted || d[i].inheritable)
			return err_set(err, errlen, -EPERM, "capabilities are still held after "
				       "dropping them");
	return 0;
}

/* The strings themselves, not only environ: /proc/PID/environ reads the
 * memory they were passed in. Nothing in mvm reads the environment after
 * mvm_prepare. */
static void jail_wipe_env(void)
{
	extern char **environ;
	char **e;

	for (e = environ; e && *e; e++)
		memset(*e, 0, strlen(*e));
	clearenv();
}

int jail_enter(const struct jail_cfg *c, struct jail_state *st, char *err, size_t errlen)
{
	uid_t uid = c->set_ids ? c->uid : getuid();
	unsigned i;
	int ret;

	/* Whatever the caller of mvm left open: mvm's own descriptors were
	 * opened since jail_begin (a disk given as /dev/fd/N is a new one). */
	for (i = 0; i < st->ninherited; i++)
		close(st->inherited[i]);
	free(st->inherited);
	st->inherited = NULL;
	st->ninherited = 0;
	ret = jail_limits(c, uid, err, errlen);
	if (!ret && c->chroot_dir)
		ret = jail_pivot(c->chroot_dir, err, errlen);
	if (!ret)
		ret = jail_drop_privileges(c, err, errlen);
	if (ret)
		return ret;
	jail_wipe_env();
	/* Not dumpable: no core, no ptrace by the same user, /proc/PID/ files
	 * root's. No new privileges: no set-id program could help anyway
	 * (there is no execve), and seccomp filters need it. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return err_set(err, errlen, -errno, "prctl: %s", strerror(errno));
	return 0;
}
