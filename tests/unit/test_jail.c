/* mvm(1)'s confinement (vmm/jail.c), applied for real in a forked child:
 * chroot, user and group, resource limits, not dumpable, no new
 * privileges. Switching users needs root: skipped without it. */
#include "tests/unit/check.h"
#include "vmm/jail.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define NOBODY 65534

static char dir[64];

static void need_root(void)
{
	if (geteuid() != 0)
		CHECK_SKIP("switching users needs root");
}

static void mk_dir(void)
{
	snprintf(dir, sizeof(dir), "/tmp/mvm-jail-XXXXXX");
	CHECK(mkdtemp(dir));
	CHECK_EQ(chmod(dir, 0755), 0);
}

#define DIE_UNLESS(cond, code) do { if (!(cond)) { printf("failed: %s\n", #cond); fflush(stdout); _exit(code); } } while (0)

static void *park(void *arg)
{
	pause();
	return arg;
}

static void child_full(void *arg)
{
	struct jail_cfg c = { .chroot_dir = dir, .set_ids = true, .uid = NOBODY, .gid = NOBODY,
			      .threads = 3, .fds = 4 };
	char err[256];
	struct rlimit rl;
	int maxfd = jail_max_fd(), made = 0;
	pthread_t t;

	(void)arg;
	DIE_UNLESS(maxfd >= 2, 2);
	DIE_UNLESS(jail_enter(&c, err, sizeof(err)) == 0, 3);
	DIE_UNLESS(getuid() == NOBODY && geteuid() == NOBODY, 4);
	DIE_UNLESS(getgid() == NOBODY && getegid() == NOBODY, 5);
	DIE_UNLESS(getgroups(0, NULL) == 0, 6);
	/* The root is the directory: the host's files are gone. */
	DIE_UNLESS(access("/etc/passwd", F_OK) != 0, 7);
	DIE_UNLESS(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0, 8);
	DIE_UNLESS(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1, 9);
	DIE_UNLESS(getrlimit(RLIMIT_CORE, &rl) == 0 && rl.rlim_cur == 0 && rl.rlim_max == 0, 10);
	DIE_UNLESS(getrlimit(RLIMIT_NOFILE, &rl) == 0, 11);
	/* What is open, what was declared, and a little slack; hard too. */
	DIE_UNLESS(rl.rlim_cur == rl.rlim_max, 12);
	DIE_UNLESS(rl.rlim_cur >= (rlim_t)maxfd + 1 + 4 && rl.rlim_cur <= (rlim_t)maxfd + 1 + 4 + 16,
		   13);
	/* Threads: the declared ones fit, a runaway does not. */
	while (made < 100 && pthread_create(&t, NULL, park, NULL) == 0)
		made++;
	DIE_UNLESS(made >= 3, 14);
	DIE_UNLESS(made < 100, 15);
	_exit(0);
}

TEST(jail_drops_to_the_user_in_the_directory_with_limits)
{
	char out[256];
	int st;

	need_root();
	mk_dir();
	st = check_fork(child_full, NULL, out, sizeof(out));
	if (st)
		fprintf(stderr, "child: status %d: %s\n", st, out);
	CHECK_EQ(st, 0);
	rmdir(dir);
}

static void child_bad_dir(void *arg)
{
	struct jail_cfg c = { .chroot_dir = "/nonexistent/mvm-jail" };
	char err[256];

	(void)arg;
	if (jail_enter(&c, err, sizeof(err)) != -ENOENT)
		_exit(2);
	printf("%s\n", err);
	fflush(stdout);
	_exit(0);
}

TEST(jail_into_a_missing_directory_says_which)
{
	char out[512];

	CHECK_EQ(check_fork(child_bad_dir, NULL, out, sizeof(out)), 0);
	CHECK(strstr(out, "--chroot '/nonexistent/mvm-jail'"));
	CHECK(strstr(out, "No such file or directory"));
}

TEST(jail_counts_this_users_tasks)
{
	/* At least this process, whoever runs the test. */
	CHECK(jail_count_tasks(getuid()) >= 1);
	CHECK(jail_max_fd() >= 2);
}

/* Root of the initial user namespace is not bound by RLIMIT_NPROC, so
 * mvm does not count every task on the host for it; any other user is. */
TEST(jail_nproc_binds_everyone_but_the_hosts_root)
{
	FILE *f = fopen("/proc/self/uid_map", "r");
	char line[128] = "";

	CHECK(f);
	CHECK(fgets(line, sizeof(line), f));
	fclose(f);
	CHECK(!jail_nproc_exempt(NOBODY));
	CHECK(!jail_nproc_exempt(1000));
	/* This test's own namespace decides for uid 0. */
	CHECK_EQ(jail_nproc_exempt(0), strstr(line, "4294967295") != NULL &&
		 strtoul(line, NULL, 10) == 0);
}
