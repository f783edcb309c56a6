/* The per-thread seccomp filters (vmm/sandbox.c), installed for real in a
 * forked child: what each kind of thread may do keeps working, and a call
 * off its list kills the process with SIGSYS. */
#include "tests/unit/check.h"
#include "vmm/sandbox.h"
#include "vmm/kvm.h"
#include "vmm/util.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define KILLED_BY_SIGSYS (128 + SIGSYS)

/* qemu-user (the s390x unit tests on x86) cannot filter its guest. */
static void need_seccomp(void)
{
	pid_t pid = fork();
	int st;

	CHECK(pid >= 0);
	if (pid == 0)
		_exit(sandbox_enter(SANDBOX_QUEUE) ? 1 : 0);
	CHECK(waitpid(pid, &st, 0) == pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		CHECK_SKIP("seccomp filters cannot be installed here (qemu-user?)");
}

struct kind_call {
	enum sandbox_kind kind;
	void (*call)(void);
};

static void *nothing(void *arg)
{
	return arg;
}

/* Child: enter the filter, make the call, and exit 0 if still alive. The
 * filters are entered in a process that already has threads, as in mvm
 * (glibc's first pthread_create installs its signal handlers). */
static void run_in_filter(void *arg)
{
	const struct kind_call *kc = arg;
	pthread_t t;

	if (pthread_create(&t, NULL, nothing, NULL) || pthread_join(t, NULL))
		_exit(2);
	if (sandbox_enter(kc->kind)) {
		printf("sandbox_enter failed\n");
		_exit(2);
	}
	kc->call();
	_exit(0);
}

static int status_of(enum sandbox_kind kind, void (*call)(void))
{
	struct kind_call kc = { kind, call };
	char out[512];
	int st;

	need_seccomp();
	st = check_fork(run_in_filter, &kc, out, sizeof(out));
	if (st != 0 && st != KILLED_BY_SIGSYS)
		fprintf(stderr, "child said: %s\n", out);
	return st;
}

static void call_openat(void) { syscall(__NR_openat, AT_FDCWD, "/etc/passwd", O_RDONLY); }
static void call_socket(void) { syscall(__NR_socket, AF_INET, SOCK_STREAM, 0); }
static void call_execve(void)
{
	static char *const argv[] = { "/bin/true", NULL };

	syscall(__NR_execve, "/bin/true", argv, NULL);
}
static void call_ptrace(void) { syscall(__NR_ptrace, 0, 0, 0, 0); }

TEST(every_kind_builds_a_program_that_fits)
{
	struct sock_filter insn[SANDBOX_MAX_INSNS];
	unsigned k;

	for (k = 0; k < SANDBOX_KINDS; k++) {
		int n = sandbox_build(k, insn, ARRAY_SIZE(insn));

		CHECK(n > 10);
		CHECK(n < SANDBOX_MAX_INSNS);
		CHECK_EQ(sandbox_build(k, insn, (unsigned)n - 1), -ENOSPC);
	}
	CHECK_EQ(sandbox_build(SANDBOX_KINDS, insn, ARRAY_SIZE(insn)), -EINVAL);
}

TEST(vcpu_thread_opening_a_file_kills_the_process)
{
	CHECK_EQ(status_of(SANDBOX_VCPU, call_openat), KILLED_BY_SIGSYS);
}

TEST(queue_thread_opening_a_socket_kills_the_process)
{
	CHECK_EQ(status_of(SANDBOX_QUEUE, call_socket), KILLED_BY_SIGSYS);
}

TEST(control_thread_running_a_program_kills_the_process)
{
	CHECK_EQ(status_of(SANDBOX_CONTROL, call_execve), KILLED_BY_SIGSYS);
}

TEST(main_thread_tracing_kills_the_process)
{
	CHECK_EQ(status_of(SANDBOX_MAIN, call_ptrace), KILLED_BY_SIGSYS);
	CHECK_EQ(status_of(SANDBOX_MAIN, call_openat), KILLED_BY_SIGSYS);
}

/* ioctls: by request number, per kind. */
static void ioctl_kvm_run_on_eventfd(void)
{
	int fd = eventfd(0, 0);

	/* Allowed for a vCPU: the eventfd itself says ENOTTY. */
	if (ioctl(fd, KVM_RUN, 0) != -1 || errno != ENOTTY)
		_exit(3);
}
static void ioctl_tcgets(void)
{
	unsigned char t[64];

	ioctl(1, TCGETS, t);    /* a pipe here: ENOTTY */
}
static void ioctl_fionbio(void)
{
	int fd = eventfd(0, 0), one = 1;

	ioctl(fd, FIONBIO, &one);
}

TEST(vcpu_thread_may_issue_kvm_run)
{
	CHECK_EQ(status_of(SANDBOX_VCPU, ioctl_kvm_run_on_eventfd), 0);
}

TEST(queue_thread_issuing_kvm_run_kills_the_process)
{
	CHECK_EQ(status_of(SANDBOX_QUEUE, ioctl_kvm_run_on_eventfd), KILLED_BY_SIGSYS);
}

TEST(vcpu_thread_issuing_a_terminal_ioctl_kills_the_process)
{
	CHECK_EQ(status_of(SANDBOX_VCPU, ioctl_tcgets), KILLED_BY_SIGSYS);
	CHECK_EQ(status_of(SANDBOX_VCPU, ioctl_fionbio), KILLED_BY_SIGSYS);
}

TEST(main_thread_may_restore_the_terminal)
{
	/* TCGETS on an eventfd: ENOTTY, but allowed. */
	CHECK_EQ(status_of(SANDBOX_MAIN, ioctl_tcgets), 0);
}

/* Memory: allocation works, executable memory does not. */
static void call_malloc(void)
{
	void *p = malloc(1 << 20), *q = malloc(100);

	if (!p || !q)
		_exit(3);
	memset(p, 1, 1 << 20);
	free(p);
	free(q);
}
static void call_mprotect_exec(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		_exit(3);
	mprotect(p, 4096, PROT_READ | PROT_EXEC);
}

TEST(every_kind_may_allocate_memory)
{
	unsigned k;

	for (k = 0; k < SANDBOX_KINDS; k++)
		CHECK_EQ(status_of(k, call_malloc), 0);
}

TEST(making_memory_executable_kills_the_process)
{
	unsigned k;

	for (k = 0; k < SANDBOX_KINDS; k++)
		CHECK_EQ(status_of(k, call_mprotect_exec), KILLED_BY_SIGSYS);
}

/* Signals: to this process only. */
static void call_tgkill_self(void)
{
	if (syscall(__NR_tgkill, getpid(), gettid(), 0))
		_exit(3);
}
static void call_tgkill_parent(void) { syscall(__NR_tgkill, getppid(), getppid(), 0); }

TEST(threads_may_signal_their_own_process_only)
{
	CHECK_EQ(status_of(SANDBOX_CONTROL, call_tgkill_self), 0);
	CHECK_EQ(status_of(SANDBOX_CONTROL, call_tgkill_parent), KILLED_BY_SIGSYS);
}

static void call_prctl_dumpable(void) { prctl(PR_SET_DUMPABLE, 1, 0, 0, 0); }
static void call_prctl_name(void)
{
	if (prctl(PR_SET_NAME, "mvm-test", 0, 0, 0))
		_exit(3);
}

TEST(threads_may_name_themselves_but_not_become_dumpable)
{
	CHECK_EQ(status_of(SANDBOX_QUEUE, call_prctl_name), 0);
	CHECK_EQ(status_of(SANDBOX_QUEUE, call_prctl_dumpable), KILLED_BY_SIGSYS);
}

/* A vCPU thread starts queue threads (DRIVER_OK): a thread, a ring with
 * its files and restrictions, an eventfd; the queue thread adds its own
 * filter and uses the ring. Processes cannot be made. */
static void *queue_thread(void *arg)
{
	struct io_uring *ring = arg;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	uint64_t buf = 0;

	if (sandbox_enter(SANDBOX_QUEUE))
		return (void *)1;
	if (prctl(PR_SET_NAME, "mvm-q", 0, 0, 0))
		return (void *)2;
	sqe = io_uring_get_sqe(ring);
	io_uring_prep_read(sqe, 0, &buf, sizeof(buf), 0);
	sqe->flags |= IOSQE_FIXED_FILE;
	if (io_uring_submit_and_wait(ring, 1) != 1 || io_uring_peek_cqe(ring, &cqe) ||
	    cqe->res != 8 || buf != 5)
		return (void *)3;
	io_uring_cqe_seen(ring, cqe);
	return NULL;
}

static void vcpu_starts_a_queue(void)
{
	struct io_uring ring;
	pthread_t t;
	void *ret;
	int efd = eventfd(5, EFD_CLOEXEC);

	if (efd < 0 || io_uring_queue_init(8, &ring, 0) ||
	    io_uring_register_files(&ring, &efd, 1))
		_exit(4);
	if (pthread_create(&t, NULL, queue_thread, &ring) || pthread_join(t, &ret))
		_exit(5);
	if (ret)
		_exit(10 + (int)(intptr_t)ret);
	io_uring_unregister_files(&ring);
	io_uring_queue_exit(&ring);
	close(efd);
}
static void vcpu_forks(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
}

TEST(vcpu_thread_may_start_a_queue_thread_with_its_ring)
{
	check_need_io_uring();
	CHECK_EQ(status_of(SANDBOX_VCPU, vcpu_starts_a_queue), 0);
}

TEST(vcpu_thread_creating_a_process_kills_it)
{
	CHECK_EQ(status_of(SANDBOX_VCPU, vcpu_forks), KILLED_BY_SIGSYS);
}

static void queue_creates_ring(void)
{
	struct io_uring ring;

	io_uring_queue_init(8, &ring, 0);
}

TEST(queue_thread_creating_a_ring_kills_the_process)
{
	CHECK_EQ(status_of(SANDBOX_QUEUE, queue_creates_ring), KILLED_BY_SIGSYS);
}

/* The kick: a plain handler (no SA_SIGINFO, as vcpu_signal_setup installs)
 * runs and returns inside the vCPU filter (s390x returns through
 * sigreturn, x86-64 through rt_sigreturn). */
static volatile sig_atomic_t kicked;
static void on_kick(int sig)
{
	(void)sig;
	kicked = 1;
}
static void vcpu_is_kicked(void)
{
	if (syscall(__NR_tgkill, getpid(), gettid(), SIGUSR2) || !kicked)
		_exit(3);
}

TEST(vcpu_thread_returns_from_the_kick_handler)
{
	struct sigaction sa = { .sa_handler = on_kick };

	sigemptyset(&sa.sa_mask);
	CHECK_EQ(sigaction(SIGUSR2, &sa, NULL), 0);
	CHECK_EQ(status_of(SANDBOX_VCPU, vcpu_is_kicked), 0);
}
