/* mvm(1)'s confinement (vmm/cli/jail.c), applied for real in a forked child:
 * a mount namespace and pivot_root, user and group, no capability, the
 * inherited descriptors closed, the environment wiped, resource limits,
 * not dumpable, no new privileges; a PID namespace, a network namespace,
 * a cgroup. Namespaces and switching users need root: skipped without. */
#include "tests/unit/check.h"
#include "vmm/cli/jail.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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
	char marker[96];
	int fd;

	snprintf(dir, sizeof(dir), "/tmp/mvm-jail-XXXXXX");
	CHECK(mkdtemp(dir));
	CHECK_EQ(chmod(dir, 0755), 0);
	snprintf(marker, sizeof(marker), "%s/marker", dir);
	fd = open(marker, O_CREAT | O_WRONLY, 0644);
	CHECK(fd >= 0);
	close(fd);
}

static void rm_dir(void)
{
	char marker[96];

	snprintf(marker, sizeof(marker), "%s/marker", dir);
	unlink(marker);
	rmdir(dir);
}

#define DIE_UNLESS(cond, code) do { if (!(cond)) { printf("failed: %s\n", #cond); fflush(stdout); _exit(code); } } while (0)

static void *park(void *arg)
{
	pause();
	return arg;
}

/* No capability in any set, the bounding set and ambient empty. */
static bool no_caps(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	int cap;

	if (syscall(SYS_capget, &h, d))
		return false;
	if (d[0].effective || d[1].effective || d[0].permitted || d[1].permitted ||
	    d[0].inheritable || d[1].inheritable)
		return false;
	for (cap = 0; cap <= CAP_LAST_CAP; cap++)
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 0 ||
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) > 0)
			return false;
	return true;
}

static bool has_effective_cap(int cap)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	return !syscall(SYS_capget, &h, d) && (d[cap / 32].effective >> (cap % 32)) & 1;
}

static void child_full(void *arg)
{
	struct jail_cfg c = { .chroot_dir = dir, .set_ids = true, .uid = NOBODY, .gid = NOBODY,
			      .threads = 3, .fds = 4, .fsize = 1 << 20, .memlock = 1 << 20 };
	struct rlimit memlock;
	struct jail_state st;
	bool can_raise;
	char err[256], *secret;
	struct rlimit rl;
	int made = 0, inherited, own;
	pthread_t t;

	(void)arg;
	inherited = open("/dev/null", O_RDONLY);        /* what mvm's caller left open */
	setenv("MVM_TEST_SECRET", "hunter2", 1);
	secret = getenv("MVM_TEST_SECRET");
	DIE_UNLESS(inherited > 2 && secret, 2);
	DIE_UNLESS(getrlimit(RLIMIT_MEMLOCK, &memlock) == 0, 2);
	/* A root without CAP_SYS_RESOURCE (some containers) keeps its limit. */
	can_raise = has_effective_cap(CAP_SYS_RESOURCE);
	DIE_UNLESS(jail_begin(&c, &st, err, sizeof(err)) == 0, 3);
	own = open("/dev/null", O_RDONLY);              /* what mvm opens itself */
	DIE_UNLESS(own > inherited, 2);
	DIE_UNLESS(jail_enter(&c, &st, err, sizeof(err)) == 0, 3);
	DIE_UNLESS(fcntl(inherited, F_GETFD) < 0 && errno == EBADF, 16);
	DIE_UNLESS(fcntl(own, F_GETFD) >= 0, 17);
	DIE_UNLESS(!getenv("MVM_TEST_SECRET") && !secret[0], 18);
	DIE_UNLESS(no_caps(), 19);
	DIE_UNLESS(prctl(PR_GET_SECUREBITS, 0, 0, 0, 0) & SECBIT_NOROOT_LOCKED, 20);
	DIE_UNLESS(getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur == 1 << 20 &&
		   rl.rlim_max == 1 << 20, 21);
	/* Pinned guest RAM fits without CAP_IPC_LOCK. */
	DIE_UNLESS(getrlimit(RLIMIT_MEMLOCK, &rl) == 0, 22);
	DIE_UNLESS(memlock.rlim_cur == RLIM_INFINITY || !can_raise ?
		   rl.rlim_cur == memlock.rlim_cur :
		   rl.rlim_cur == memlock.rlim_cur + (1 << 20) && rl.rlim_max == rl.rlim_cur, 22);
	DIE_UNLESS(getuid() == NOBODY && geteuid() == NOBODY, 4);
	DIE_UNLESS(getgid() == NOBODY && getegid() == NOBODY, 5);
	DIE_UNLESS(getgroups(0, NULL) == 0, 6);
	/* The root is the directory: the host's files are gone, and nothing
	 * can be written there. */
	DIE_UNLESS(access("/etc/passwd", F_OK) != 0, 7);
	DIE_UNLESS(access("/marker", F_OK) == 0, 7);
	DIE_UNLESS(mkdir("/x", 0755) < 0 && errno == EROFS, 7);
	DIE_UNLESS(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0, 8);
	DIE_UNLESS(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1, 9);
	DIE_UNLESS(getrlimit(RLIMIT_CORE, &rl) == 0 && rl.rlim_cur == 0 && rl.rlim_max == 0, 10);
	DIE_UNLESS(getrlimit(RLIMIT_NOFILE, &rl) == 0, 11);
	/* What is open (the inherited descriptors gone: own is the highest),
	 * what was declared, and a little slack; hard too. */
	DIE_UNLESS(rl.rlim_cur == rl.rlim_max, 12);
	DIE_UNLESS(rl.rlim_cur >= (rlim_t)own + 1 + 4 && rl.rlim_cur <= (rlim_t)own + 1 + 4 + 16,
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
	rm_dir();
}

static void child_bad_dir(void *arg)
{
	struct jail_cfg c = { .chroot_dir = "/nonexistent/mvm-jail" };
	struct jail_state st;
	char err[256];

	(void)arg;
	if (jail_begin(&c, &st, err, sizeof(err)) != -ENOENT)
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

TEST(jail_refuses_root_under_the_sandbox_without_ids)
{
	char err[512];

	CHECK_EQ(jail_check(true, false, 0, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "running as root with --sandbox on"));
	CHECK(strstr(err, "--uid 0 --gid 0"));
	CHECK_EQ(jail_check(true, true, 0, err, sizeof(err)), 0);
	CHECK_EQ(jail_check(false, false, 0, err, sizeof(err)), 0);
	CHECK_EQ(jail_check(true, false, 1000, err, sizeof(err)), 0);
}

static char nobody_file[64];

/* --uid 0 --gid 0: still uid 0, but no capability: another user's
 * private file is out of reach, and the bounding set is empty. */
static void child_root_without_caps(void *arg)
{
	struct jail_cfg c = { .set_ids = true, .uid = 0, .gid = 0, .threads = 1 };
	struct jail_state st;
	char err[256];

	(void)arg;
	DIE_UNLESS(jail_begin(&c, &st, err, sizeof(err)) == 0, 2);
	DIE_UNLESS(jail_enter(&c, &st, err, sizeof(err)) == 0, 3);
	DIE_UNLESS(getuid() == 0 && geteuid() == 0, 4);
	DIE_UNLESS(no_caps(), 5);
	DIE_UNLESS(open(nobody_file, O_RDONLY) < 0 && errno == EACCES, 6);
	DIE_UNLESS(setresuid(NOBODY, NOBODY, NOBODY) == 0 || errno == EPERM, 7);
	_exit(0);
}

TEST(jail_as_root_keeps_no_capability)
{
	char out[256];
	int fd, st;

	need_root();
	snprintf(nobody_file, sizeof(nobody_file), "/tmp/mvm-jail-file-XXXXXX");
	fd = mkstemp(nobody_file);
	CHECK(fd >= 0);
	CHECK_EQ(fchown(fd, NOBODY, NOBODY), 0);
	CHECK_EQ(fchmod(fd, 0600), 0);
	close(fd);
	st = check_fork(child_root_without_caps, NULL, out, sizeof(out));
	unlink(nobody_file);
	if (st)
		fprintf(stderr, "child: status %d: %s\n", st, out);
	CHECK_EQ(st, 0);
}

/* --new-pid-ns: the VM's side is PID 1 of its namespace, and the parent
 * exits with what the child exits with. */
static void child_pid_ns(void *arg)
{
	struct jail_cfg c = { .new_pid_ns = true };
	struct jail_state st;
	char err[256];
	int ret;

	(void)arg;
	ret = jail_begin(&c, &st, err, sizeof(err));
	if (ret == 1)
		_exit(jail_wait_child(&st));
	DIE_UNLESS(ret == 0, 2);
	_exit(getpid() == 1 ? 42 : 3);
}

TEST(jail_new_pid_ns_runs_the_vm_as_pid_1_and_passes_its_status)
{
	char out[256];

	need_root();
	CHECK_EQ(check_fork(child_pid_ns, NULL, out, sizeof(out)), 42);
}

static void child_pid_ns_signal(void *arg)
{
	struct jail_cfg c = { .new_pid_ns = true };
	struct jail_state st;
	char err[256];
	sigset_t term;
	int ret, sig;

	(void)arg;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigprocmask(SIG_BLOCK, &term, NULL);
	ret = jail_begin(&c, &st, err, sizeof(err));
	if (ret == 1) {
		kill(getpid(), SIGTERM);        /* to the parent: forwarded */
		_exit(jail_wait_child(&st));
	}
	DIE_UNLESS(ret == 0, 2);
	DIE_UNLESS(sigwait(&term, &sig) == 0, 3);
	_exit(sig == SIGTERM ? 43 : 4);
}

TEST(jail_new_pid_ns_forwards_sigterm_to_the_vm)
{
	char out[256];

	need_root();
	CHECK_EQ(check_fork(child_pid_ns_signal, NULL, out, sizeof(out)), 43);
}

static char netns_path[64];

static void child_netns(void *arg)
{
	struct jail_cfg c = { .netns = netns_path };
	struct jail_state st;
	struct stat want, got;
	char err[256];

	(void)arg;
	DIE_UNLESS(stat(netns_path, &want) == 0, 2);
	DIE_UNLESS(jail_begin(&c, &st, err, sizeof(err)) == 0, 3);
	DIE_UNLESS(stat("/proc/self/ns/net", &got) == 0, 4);
	DIE_UNLESS(got.st_ino == want.st_ino && got.st_dev == want.st_dev, 5);
	_exit(0);
}

TEST(jail_joins_the_network_namespace)
{
	char out[256];
	int go[2], st;
	pid_t holder;

	need_root();
	CHECK_EQ(pipe(go), 0);
	holder = fork();
	CHECK(holder >= 0);
	if (holder == 0) {
		char c;

		if (unshare(CLONE_NEWNET))
			_exit(1);
		close(go[1]);
		(void)!read(go[0], &c, 1);      /* until the test is done */
		_exit(0);
	}
	close(go[0]);
	snprintf(netns_path, sizeof(netns_path), "/proc/%d/ns/net", (int)holder);
	/* The holder's own namespace once it has unshared: poll briefly. */
	for (st = 0; st < 200; st++) {
		struct stat a, b;

		if (stat(netns_path, &a) == 0 && stat("/proc/self/ns/net", &b) == 0 &&
		    a.st_ino != b.st_ino)
			break;
		usleep(10000);
	}
	st = check_fork(child_netns, NULL, out, sizeof(out));
	close(go[1]);
	waitpid(holder, NULL, 0);
	if (st)
		fprintf(stderr, "child: status %d: %s\n", st, out);
	CHECK_EQ(st, 0);
}

TEST(jail_netns_that_is_not_one_says_which)
{
	struct jail_cfg c = { .netns = "/nonexistent/netns" };
	struct jail_state st;
	char err[256];

	CHECK_EQ(jail_begin(&c, &st, err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "--netns '/nonexistent/netns': No such file or directory"));
}

static char cg_dir[PATH_MAX];

static void child_cgroup(void *arg)
{
	struct jail_cfg c = { .cgroup = cg_dir, .ncgroup_set = 1,
			      .cgroup_set = { "cgroup.max.descendants=3" } };
	struct jail_state st;
	char err[256], line[PATH_MAX + 8];
	const char *name = strrchr(cg_dir, '/');
	bool in = false;
	FILE *f;

	(void)arg;
	if (jail_begin(&c, &st, err, sizeof(err))) {
		printf("%s\n", err);
		_exit(2);
	}
	f = fopen("/proc/self/cgroup", "r");
	DIE_UNLESS(f, 3);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, "0::", 3) && strlen(line) >= strlen(name) &&
		    !strcmp(line + strlen(line) - strlen(name), name))
			in = true;
	}
	fclose(f);
	DIE_UNLESS(in, 4);
	_exit(0);
}

/* The first cgroup2 mount, or skip. */
static void find_cgroup2(char *mnt, size_t len)
{
	char dev[256], path[200], type[64];
	FILE *f = fopen("/proc/self/mounts", "r");
	bool found = false;

	CHECK(f);
	while (!found && fscanf(f, "%255s %199s %63s %*[^\n]", dev, path, type) == 3)
		found = !strcmp(type, "cgroup2");
	fclose(f);
	if (!found)
		CHECK_SKIP("no cgroup2 mount on this host");
	snprintf(mnt, len, "%s", path);
}

TEST(jail_moves_into_the_cgroup_after_its_settings)
{
	char mnt[256], out[512], file[PATH_MAX + 32], val[32] = "";
	FILE *f;
	int st;

	need_root();
	find_cgroup2(mnt, sizeof(mnt));
	snprintf(cg_dir, sizeof(cg_dir), "%s/mvm-jail-test-%d", mnt, (int)getpid());
	st = check_fork(child_cgroup, NULL, out, sizeof(out));
	snprintf(file, sizeof(file), "%s/cgroup.max.descendants", cg_dir);
	f = fopen(file, "r");
	if (f) {
		CHECK(fgets(val, sizeof(val), f));
		fclose(f);
	}
	rmdir(cg_dir);
	if (st)
		fprintf(stderr, "child: status %d: %s\n", st, out);
	CHECK_EQ(st, 0);
	CHECK_STR(val, "3\n");
}

TEST(jail_cgroup_settings_are_checked_before_anything_is_written)
{
	static const char *const bad[] = { "cgroup.procs=1", "a/b=1", "noequals", "=1", "..=1" };
	char err[256];
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		struct jail_cfg c = { .cgroup = "/nonexistent/mvm-cg", .ncgroup_set = 1,
				      .cgroup_set = { bad[i] } };
		struct jail_state st;

		CHECK_EQ(jail_begin(&c, &st, err, sizeof(err)), -EINVAL);
		CHECK(strstr(err, "--cgroup-set '"));
	}
	{
		struct jail_cfg c = { .ncgroup_set = 1, .cgroup_set = { "pids.max=5" } };
		struct jail_state st;

		CHECK_EQ(jail_begin(&c, &st, err, sizeof(err)), -EINVAL);
		CHECK_STR(err, "--cgroup-set needs --cgroup DIR");
	}
}
