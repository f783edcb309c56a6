#include "vmm/jail.h"
#include "vmm/util.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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

static int jail_limit(int res, rlim_t v, const char *name, char *err, size_t errlen)
{
	struct rlimit rl = { v, v };

	if (setrlimit(res, &rl))
		return err_set(err, errlen, -errno, "setrlimit(%s, %llu): %s", name,
			       (unsigned long long)v, strerror(errno));
	return 0;
}

int jail_enter(const struct jail_cfg *c, char *err, size_t errlen)
{
	uid_t uid = c->set_ids ? c->uid : getuid();
	int maxfd = jail_max_fd(), ret;

	/* Counted while /proc is still there (before the chroot). */
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
	if (ret)
		return ret;
	if (c->chroot_dir) {
		if (chdir(c->chroot_dir) || chroot(".") || chdir("/"))
			return err_set(err, errlen, -errno, "--chroot '%s': %s; give an existing "
				       "directory (chroot needs root)", c->chroot_dir,
				       strerror(errno));
	}
	if (c->set_ids) {
		/* Groups first: after setresuid we may no longer change them. */
		if (setgroups(0, NULL) && errno != EPERM)
			return err_set(err, errlen, -errno, "setgroups: %s", strerror(errno));
		if (setresgid(c->gid, c->gid, c->gid))
			return err_set(err, errlen, -errno, "--gid %u: %s; run mvm as root to "
				       "switch groups", (unsigned)c->gid, strerror(errno));
		if (setresuid(c->uid, c->uid, c->uid))
			return err_set(err, errlen, -errno, "--uid %u: %s; run mvm as root to "
				       "switch users", (unsigned)c->uid, strerror(errno));
	}
	/* Not dumpable: no core, no ptrace by the same user, /proc/PID/ files
	 * root's. No new privileges: no set-id program could help anyway
	 * (there is no execve), and seccomp filters need it. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return err_set(err, errlen, -errno, "prctl: %s", strerror(errno));
	return 0;
}
