/* The per-thread seccomp filters (vmm/kvm/sandbox.c), installed for real in a
 * forked child, kind by kind: what each kind of thread needs keeps
 * working, and every other door — a direct system call, a new io_uring, a
 * register call on the thread's ring, an ioctl on the wrong descriptor,
 * an argument outside its checks — kills the process with SIGSYS. The
 * queue thread's ring itself refuses unlisted opcodes and unregistered
 * files with an error and no effect. docs/sandbox.md is this file in
 * words. */
#include "tests/unit/check.h"
#include "arch/arch.h"
#include "devices/blk_image.h"
#include "devices/virtio.h"
#include "devices/virtq_worker.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/sandbox.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define KILLED_BY_SIGSYS (128 + SIGSYS)
#define K(kind) SANDBOX_K(SANDBOX_##kind)
#define ANY (K(MAIN) | K(CONTROL) | K(VCPU) | K(QUEUE) | K(API))
#define NONE 0u

/* What a child has before it enters its filter: the descriptors the
 * filter names (eventfds stand in for KVM's: an allowed KVM ioctl on one
 * fails with ENOTTY, but the thread lives), a ring made the way a queue
 * worker's is (vqw_init, vqw_set_io: disabled, restricted), and a thread
 * started before the filter to share futexes with. */
struct env {
	struct sandbox_fds fds;
	int other;                      /* a descriptor no filter names */
	struct virtio_dev dev;
	struct vqw w;
	sem_t to_helper, from_helper;
	pthread_t helper;
	char tmp[64];                   /* a file that must not appear */
};

static struct env env;
/* Where set, the snapshot directory env_init gives the filters. */
static const char *snap_dir_path;
/* An image directory for the API thread (NULL: none), holding "img". */
static const char *image_dir_path;

static void *helper_thread(void *arg)
{
	(void)arg;
	/* Wakes the filtered thread, then waits for it: both futex ways. */
	while (sem_wait(&env.to_helper) && errno == EINTR)
		;
	sem_post(&env.from_helper);
	return NULL;
}

static const struct virtio_device_ops null_ops = { .name = "null" };
static const struct vqw_ops null_vqw_ops = { .name = "null" };

static void env_init(void)
{
	unsigned idx = 0;
	void *opaque = NULL;

	memset(&env, 0, sizeof(env));
	env.fds = SANDBOX_NO_FDS;
	env.fds.vm = eventfd(0, EFD_CLOEXEC);
	env.fds.vcpu = eventfd(0, EFD_CLOEXEC);
	env.fds.vcpu_lo = env.fds.vcpu_hi = env.fds.vcpu;
	env.fds.arch_dev = eventfd(0, EFD_CLOEXEC);
	env.fds.tty = open("/dev/null", O_RDWR | O_CLOEXEC);
	env.fds.kick_signal = SIGUSR2;
	/* A control server's listening socket (nobody connects: accept4
	 * answers EAGAIN). */
	env.fds.listen = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	{
		/* An abstract address of the kernel's choosing (autobind). */
		struct sockaddr_un a = { .sun_family = AF_UNIX };

		if (env.fds.listen < 0 ||
		    bind(env.fds.listen, (struct sockaddr *)&a, sizeof(sa_family_t)) ||
		    listen(env.fds.listen, 1))
			_exit(4);
	}
	env.other = eventfd(0, EFD_CLOEXEC);
	if (snap_dir_path) {
		char mem[96];

		env.fds.snap_dir = open(snap_dir_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
		snprintf(mem, sizeof(mem), "%s.mem", snap_dir_path);
		env.fds.mem = open(mem, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (env.fds.snap_dir < 0 || env.fds.mem < 0 || ftruncate(env.fds.mem, 8192))
			_exit(4);
	}
	if (image_dir_path) {
		env.fds.image_dir = open(image_dir_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (env.fds.image_dir < 0)
			_exit(4);
	}
	if (env.fds.vm < 0 || env.fds.vcpu < 0 || env.fds.tty < 0 || env.other < 0)
		_exit(4);
	if (virtio_dev_init(&env.dev, &null_ops, NULL, NULL, 1, 16) ||
	    vqw_init(&env.w, &null_vqw_ops, &env.dev, &idx, &opaque, 1, 4, 0, 0, "t") ||
	    (vqw_allow_set_files(&env.w), 0) ||
	    vqw_set_io(&env.w, (const int[]){ -1 }, 1, 1ULL << IORING_OP_NOP))
		_exit(5);
	/* The thread that enters the filter is the ring's submitter. */
	if (syscall(__NR_io_uring_register, env.w.ring.ring_fd, IORING_REGISTER_ENABLE_RINGS,
		    NULL, 0))
		_exit(6);
	env.fds.ring = env.w.ring.ring_fd;
	snprintf(env.tmp, sizeof(env.tmp), "/tmp/mvm-sandbox-%d", (int)getpid());
	if (sem_init(&env.to_helper, 0, 0) || sem_init(&env.from_helper, 0, 0) ||
	    pthread_create(&env.helper, NULL, helper_thread, NULL))
		_exit(7);
}

struct kind_call {
	enum sandbox_kind kind;
	void (*call)(void);
};

/* Child: set up, enter the filter, make the call, exit 0 if still alive
 * (a call checks its own result and exits 3 when it is wrong). */
static void run_in_filter(void *arg)
{
	const struct kind_call *kc = arg;

	env_init();
	if (sandbox_enter(kc->kind, &env.fds)) {
		printf("sandbox_enter failed\n");
		_exit(2);
	}
	kc->call();
	_exit(0);
}

/* qemu-user (the s390x unit tests on x86) cannot filter its guest. */
static void need_seccomp(void)
{
	struct sandbox_fds fds = SANDBOX_NO_FDS;
	pid_t pid = fork();
	int st;

	CHECK(pid >= 0);
	if (pid == 0)
		_exit(sandbox_enter(SANDBOX_QUEUE, &fds) ? 1 : 0);
	CHECK(waitpid(pid, &st, 0) == pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		CHECK_SKIP("seccomp filters cannot be installed here (qemu-user?)");
}

static int status_of(enum sandbox_kind kind, void (*call)(void))
{
	struct kind_call kc = { kind, call };
	char out[512] = "";
	int st;

	st = check_fork(run_in_filter, &kc, out, sizeof(out));
	if (st != 0 && st != KILLED_BY_SIGSYS && out[0])
		fprintf(stderr, "child said: %s\n", out);
	return st;
}

/* A call and the kinds that may make it: every other kind is killed. */
struct door {
	const char *what;
	void (*call)(void);
	unsigned allowed;
};

static void check_doors(const struct door *d, unsigned n)
{
	unsigned i, k, bad = 0;

	need_seccomp();
	check_need_io_uring();
	for (i = 0; i < n; i++) {
		for (k = 0; k < SANDBOX_KINDS; k++) {
			int want = (d[i].allowed >> k) & 1 ? 0 : KILLED_BY_SIGSYS;
			int got = status_of(k, d[i].call);

			if (got == want)
				continue;
			fprintf(stderr, "%s thread, %s: status %d, expected %d (%s)\n",
				sandbox_kind_names[k], d[i].what, got, want,
				want ? "killed" : "allowed");
			bad++;
		}
	}
	CHECK_EQ(bad, 0);
}

/* ---- files, sockets, processes, privileges ------------------------------ */

static void call_openat(void) { syscall(__NR_openat, AT_FDCWD, env.tmp, O_RDWR | O_CREAT, 0600); }
static void call_open_ro(void) { syscall(__NR_openat, AT_FDCWD, "/etc/passwd", O_RDONLY); }
static void call_socket(void) { syscall(__NR_socket, AF_UNIX, SOCK_STREAM, 0); }
static void call_socketpair(void)
{
	int sv[2];

	syscall(__NR_socketpair, AF_UNIX, SOCK_STREAM, 0, sv);
}
static void call_execve(void)
{
	static char *const argv[] = { "/bin/true", NULL };

	syscall(__NR_execve, "/bin/true", argv, NULL);
}
static void call_fork(void) { syscall(__NR_clone, SIGCHLD, 0, 0, 0, 0); }
static void *nothing(void *arg) { return arg; }
static void call_pthread_create(void)
{
	pthread_t t;

	/* glibc: clone3 (ENOSYS), then clone (killed). */
	if (pthread_create(&t, NULL, nothing, NULL) == 0)
		pthread_join(t, NULL);
}
static void call_ptrace(void) { syscall(__NR_ptrace, PTRACE_TRACEME, 0, 0, 0); }
static void call_memfd(void) { syscall(__NR_memfd_create, "x", 0); }
static void call_unshare(void) { syscall(__NR_unshare, CLONE_NEWNS); }
static void call_setns(void) { syscall(__NR_setns, env.other, 0); }
static void call_seccomp(void) { syscall(__NR_seccomp, SECCOMP_SET_MODE_STRICT, 0, NULL); }
static void call_prctl_dumpable(void) { prctl(PR_SET_DUMPABLE, 1, 0, 0, 0); }
static void call_prctl_name(void) { prctl(PR_SET_NAME, "x", 0, 0, 0); }
static void call_kill_parent(void) { syscall(__NR_kill, getppid(), 0); }
static void call_dup(void) { syscall(__NR_dup, 2); }
static void call_fstatat(void)
{
	struct stat st;

	syscall(__NR_newfstatat, AT_FDCWD, "/etc/passwd", &st, 0);
}

TEST(no_thread_may_open_files_sockets_processes_or_gain_privileges)
{
	static const struct door d[] = {
		{ "openat O_CREAT", call_openat, NONE },
		{ "openat /etc/passwd", call_open_ro, NONE },
		{ "fstatat of a path", call_fstatat, NONE },
		{ "socket", call_socket, NONE },
		{ "socketpair", call_socketpair, NONE },
		{ "execve", call_execve, NONE },
		{ "clone (fork)", call_fork, NONE },
		{ "pthread_create", call_pthread_create, NONE },
		{ "ptrace", call_ptrace, NONE },
		{ "memfd_create", call_memfd, NONE },
		{ "unshare", call_unshare, NONE },
		{ "setns", call_setns, NONE },
		{ "seccomp", call_seccomp, NONE },
		{ "prctl PR_SET_DUMPABLE", call_prctl_dumpable, NONE },
		{ "prctl PR_SET_NAME", call_prctl_name, NONE },
		{ "kill", call_kill_parent, NONE },
		{ "dup", call_dup, NONE },
	};

	check_doors(d, ARRAY_SIZE(d));
	CHECK(access(env.tmp, F_OK) != 0);
}

/* ---- io_uring: no new ring, no register call but the queue's three ----- */

static void call_uring_setup(void)
{
	struct io_uring_params p = { 0 };

	syscall(__NR_io_uring_setup, 8, &p);
}
static void call_register_files(void)
{
	int fd = env.other;

	syscall(__NR_io_uring_register, env.fds.ring, IORING_REGISTER_FILES, &fd, 1);
}
static void call_register_buffers(void)
{
	static char buf[4096];
	struct iovec v = { buf, sizeof(buf) };

	syscall(__NR_io_uring_register, env.fds.ring, IORING_REGISTER_BUFFERS, &v, 1);
}
static void call_register_restrictions(void)
{
	syscall(__NR_io_uring_register, env.fds.ring, IORING_REGISTER_RESTRICTIONS, NULL, 0);
}
static void call_register_personality(void)
{
	syscall(__NR_io_uring_register, env.fds.ring, IORING_REGISTER_PERSONALITY, NULL, 0);
}
static void call_register_iowq_aff(void)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(0, &s);
	syscall(__NR_io_uring_register, env.fds.ring, IORING_REGISTER_IOWQ_AFF, &s, sizeof(s));
}
static void call_unregister_files(void)
{
	/* Allowed (the queue thread's own end): it really drops them. */
	if (syscall(__NR_io_uring_register, env.fds.ring, IORING_UNREGISTER_FILES, NULL, 0))
		_exit(3);
}
static void call_files_update(void)
{
	int fd = env.other;
	struct io_uring_files_update up = { .offset = 0, .fds = (uintptr_t)&fd };

	/* Allowed (a disk's image swap): it really puts the descriptor in
	 * the ring's slot. */
	if (syscall(__NR_io_uring_register, env.fds.ring, IORING_REGISTER_FILES_UPDATE, &up, 1) != 1)
		_exit(3);
}
static void call_files_update_other_fd(void)
{
	int fd = env.other;
	struct io_uring_files_update up = { .offset = 0, .fds = (uintptr_t)&fd };

	syscall(__NR_io_uring_register, env.other, IORING_REGISTER_FILES_UPDATE, &up, 1);
}
static void call_enter_own_ring(void)
{
	if (syscall(__NR_io_uring_enter, env.fds.ring, 0, 0, 0, NULL, 0) < 0)
		_exit(3);
}
static void call_enter_other_fd(void)
{
	syscall(__NR_io_uring_enter, env.other, 0, 0, 0, NULL, 0);
}
static void call_unregister_other_fd(void)
{
	syscall(__NR_io_uring_register, env.other, IORING_UNREGISTER_FILES, NULL, 0);
}

TEST(no_thread_may_make_an_io_uring_or_register_with_one)
{
	static const struct door d[] = {
		{ "io_uring_setup", call_uring_setup, NONE },
		{ "IORING_REGISTER_FILES", call_register_files, NONE },
		{ "IORING_REGISTER_BUFFERS", call_register_buffers, NONE },
		{ "IORING_REGISTER_RESTRICTIONS", call_register_restrictions, NONE },
		{ "IORING_REGISTER_PERSONALITY", call_register_personality, NONE },
		{ "IORING_REGISTER_IOWQ_AFF", call_register_iowq_aff, NONE },
		{ "IORING_UNREGISTER_FILES on its own ring", call_unregister_files, K(QUEUE) },
		{ "IORING_UNREGISTER_FILES on another fd", call_unregister_other_fd, NONE },
		{ "IORING_REGISTER_FILES_UPDATE on its own ring", call_files_update, K(QUEUE) },
		{ "IORING_REGISTER_FILES_UPDATE on another fd", call_files_update_other_fd, NONE },
		{ "io_uring_enter on its own ring", call_enter_own_ring, K(QUEUE) },
		{ "io_uring_enter on another fd", call_enter_other_fd, NONE },
	};

	check_doors(d, ARRAY_SIZE(d));
}

/* What a queue thread asks of its own ring beyond the device's opcodes
 * comes back as an error, and nothing happens. */
static int ring_submit_one(void (*prep)(struct io_uring_sqe *), bool fixed)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&env.w.ring);
	struct io_uring_cqe *cqe;
	int res;

	if (!sqe)
		_exit(5);
	prep(sqe);
	if (fixed)
		sqe->flags |= IOSQE_FIXED_FILE;
	if (io_uring_submit_and_wait(&env.w.ring, 1) < 0 || io_uring_peek_cqe(&env.w.ring, &cqe))
		_exit(6);
	res = cqe->res;
	io_uring_cqe_seen(&env.w.ring, cqe);
	return res;
}
static void prep_openat(struct io_uring_sqe *sqe)
{
	io_uring_prep_openat(sqe, AT_FDCWD, env.tmp, O_RDWR | O_CREAT, 0600);
}
static void prep_socket(struct io_uring_sqe *sqe) { io_uring_prep_socket(sqe, AF_UNIX, SOCK_STREAM, 0, 0); }
static void prep_write_stderr(struct io_uring_sqe *sqe) { io_uring_prep_write(sqe, 2, "x", 1, 0); }
static void prep_nop(struct io_uring_sqe *sqe) { io_uring_prep_nop(sqe); }
static void queue_ring_tries_doors(void)
{
	/* Opcodes the device never declared. */
	if (ring_submit_one(prep_openat, true) != -EACCES ||
	    ring_submit_one(prep_socket, true) != -EACCES)
		_exit(3);
	/* A declared opcode on a file that is not registered. */
	if (ring_submit_one(prep_write_stderr, false) != -EACCES)
		_exit(3);
	/* A declared opcode, flagged as the restrictions want: runs. */
	if (ring_submit_one(prep_nop, true) != 0)
		_exit(3);
}

TEST(queue_ring_refuses_unlisted_opcodes_and_unregistered_files)
{
	need_seccomp();
	check_need_io_uring();
	CHECK_EQ(status_of(SANDBOX_QUEUE, queue_ring_tries_doors), 0);
	CHECK(access(env.tmp, F_OK) != 0);
}

/* ---- memory ---------------------------------------------------------------- */

static void call_malloc(void)
{
	void *p = malloc(1 << 20), *q = malloc(100);

	if (!p || !q)
		_exit(3);
	memset(p, 1, 1 << 20);
	free(p);
	free(q);
}
static void call_madvise_dontneed(void)
{
	void *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || madvise(p, 8192, MADV_DONTNEED) || munmap(p, 8192))
		_exit(3);
}
/* What musl's free does with a freed slot of several pages. */
static void call_madvise_free(void)
{
	void *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || madvise(p, 8192, MADV_FREE) || munmap(p, 8192))
		_exit(3);
}
static void *anon_page(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		_exit(3);
	return p;
}
static void call_mmap_exec(void)
{
	mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}
static void call_mmap_shared(void)
{
	mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
}
static void call_mmap_fd(void)
{
	mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, env.fds.tty, 0);
}
static void call_mprotect_exec(void) { mprotect(anon_page(), 4096, PROT_READ | PROT_EXEC); }
static void call_madvise_hwpoison(void) { madvise(anon_page(), 4096, MADV_HWPOISON); }
static void call_madvise_remove(void) { madvise(anon_page(), 4096, MADV_REMOVE); }
static void call_madvise_mergeable(void) { madvise(anon_page(), 4096, MADV_MERGEABLE); }
static void call_mremap(void) { mremap(anon_page(), 4096, 8192, MREMAP_MAYMOVE); }

TEST(memory_may_be_allocated_but_never_executable_shared_or_poisoned)
{
	static const struct door d[] = {
		{ "malloc and free", call_malloc, ANY },
		{ "madvise MADV_DONTNEED", call_madvise_dontneed, ANY },
		{ "madvise MADV_FREE", call_madvise_free, ANY },
		{ "mmap PROT_EXEC", call_mmap_exec, NONE },
		{ "mmap MAP_SHARED", call_mmap_shared, NONE },
		{ "mmap of a file", call_mmap_fd, NONE },
		{ "mprotect PROT_EXEC", call_mprotect_exec, NONE },
		{ "madvise MADV_HWPOISON", call_madvise_hwpoison, NONE },
		{ "madvise MADV_REMOVE", call_madvise_remove, NONE },
		{ "madvise MADV_MERGEABLE", call_madvise_mergeable, NONE },
		{ "mremap", call_mremap, NONE },
	};

	check_doors(d, ARRAY_SIZE(d));
}

/* ---- futexes: waits and wakes, nothing else -------------------------------- */

static void call_sem_with_helper(void)
{
	/* The helper, started before the filter, wakes us; we wake it and
	 * join it: FUTEX_WAKE, FUTEX_WAIT_BITSET and the join's wait. */
	sem_post(&env.to_helper);
	while (sem_wait(&env.from_helper) && errno == EINTR)
		;
	if (pthread_join(env.helper, NULL))
		_exit(3);
}
static void call_futex_requeue(void)
{
	static int a, b;

	syscall(__NR_futex, &a, FUTEX_CMP_REQUEUE_PRIVATE, 1, 1, &b, 0);
}
static void call_futex_lock_pi(void)
{
	static int a;

	syscall(__NR_futex, &a, FUTEX_LOCK_PI_PRIVATE, 0, NULL, NULL, 0);
}
static void call_futex_wake_op(void)
{
	static int a, b;

	syscall(__NR_futex, &a, FUTEX_WAKE_OP_PRIVATE, 1, 1, &b, 0);
}

TEST(futexes_may_wait_and_wake_only)
{
	static const struct door d[] = {
		{ "semaphores and pthread_join", call_sem_with_helper, ANY },
		{ "FUTEX_CMP_REQUEUE", call_futex_requeue, NONE },
		{ "FUTEX_LOCK_PI", call_futex_lock_pi, NONE },
		{ "FUTEX_WAKE_OP", call_futex_wake_op, NONE },
	};

	check_doors(d, ARRAY_SIZE(d));
}

/* ---- ioctls: by request and by descriptor ------------------------------- */

/* An allowed KVM ioctl on a stand-in eventfd: ENOTTY, and alive. */
static void expect_enotty(int r)
{
	if (r != -1 || errno != ENOTTY)
		_exit(3);
}
static void ioctl_run_own_vcpu(void) { expect_enotty(ioctl(env.fds.vcpu, KVM_RUN, 0)); }
static void ioctl_run_vm(void) { ioctl(env.fds.vm, KVM_RUN, 0); }
static void ioctl_irqfd_vm(void)
{
	struct kvm_irqfd f = { 0 };

	expect_enotty(ioctl(env.fds.vm, KVM_IRQFD, &f));
}
static void ioctl_irqfd_other(void)
{
	struct kvm_irqfd f = { 0 };

	ioctl(env.other, KVM_IRQFD, &f);
}
static void ioctl_devattr_arch_dev(void)
{
	struct kvm_device_attr a = { 0 };

	expect_enotty(ioctl(env.fds.arch_dev, KVM_GET_DEVICE_ATTR, &a));
	expect_enotty(ioctl(env.fds.arch_dev, KVM_SET_DEVICE_ATTR, &a));
}
static void ioctl_devattr_other(void)
{
	struct kvm_device_attr a = { 0 };

	ioctl(env.other, KVM_GET_DEVICE_ATTR, &a);
}
static void ioctl_ioeventfd_vm(void)
{
	struct kvm_ioeventfd e = { .fd = -1 };

	expect_enotty(ioctl(env.fds.vm, KVM_IOEVENTFD, &e));
}
static void ioctl_ioeventfd_other(void)
{
	struct kvm_ioeventfd e = { .fd = -1 };

	ioctl(env.other, KVM_IOEVENTFD, &e);
}
static void ioctl_irq_line_vm(void)
{
	struct kvm_irq_level l = { 0 };

	expect_enotty(ioctl(env.fds.vm, KVM_IRQ_LINE, &l));
}
static void ioctl_signal_msi_vm(void)
{
	struct kvm_msi m = { 0 };

	expect_enotty(ioctl(env.fds.vm, KVM_SIGNAL_MSI, &m));
}
/* KVM_GET_NESTED_STATE's request, spelled without x86's struct (its
 * 128-byte header) so that every build has it: a snapshot's read of a
 * vCPU's nested state (x86). */
struct nested_hdr {
	uint8_t b[128];
};
#define NESTED_GET _IOWR(KVMIO, 0xbe, struct nested_hdr)
#define NESTED_SET _IOW(KVMIO, 0xbf, struct nested_hdr)
static void ioctl_nested_get_vcpu(void)
{
	struct nested_hdr h = { { 0 } };

	expect_enotty(ioctl(env.fds.vcpu, NESTED_GET, &h));
}
static void ioctl_mp_state_vcpu(void)
{
	struct kvm_mp_state mp;

	expect_enotty(ioctl(env.fds.vcpu, KVM_GET_MP_STATE, &mp));
}
static void ioctl_mp_state_other(void)
{
	struct kvm_mp_state mp;

	ioctl(env.other, KVM_GET_MP_STATE, &mp);
}
static void ioctl_nested_get_other(void)
{
	struct nested_hdr h = { { 0 } };

	ioctl(env.other, NESTED_GET, &h);
}
static void ioctl_nested_set_vcpu(void)
{
	struct nested_hdr h = { { 0 } };

	ioctl(env.fds.vcpu, NESTED_SET, &h);
}
static void ioctl_create_vcpu(void) { ioctl(env.fds.vm, KVM_CREATE_VCPU, 1); }
static void ioctl_set_memory(void)
{
	struct kvm_userspace_memory_region r = { 0 };

	expect_enotty(ioctl(env.fds.vm, KVM_SET_USER_MEMORY_REGION, &r));
}
static void ioctl_tcgets_tty(void)
{
	struct termios t;

	expect_enotty(ioctl(env.fds.tty, TCGETS, &t));
}
static void ioctl_tcgets_other(void)
{
	struct termios t;

	ioctl(env.other, TCGETS, &t);
}
static void ioctl_tiocsti(void)
{
	char c = 'x';

	ioctl(env.fds.tty, TIOCSTI, &c);
}
static void ioctl_fionbio(void)
{
	int one = 1;

	ioctl(env.other, FIONBIO, &one);
}

TEST(ioctls_only_by_request_and_on_the_right_descriptor)
{
	/* vm.nmi's MSI: the API thread's, where the architecture has NMIs
	 * (x86); no thread's on s390x. */
	const unsigned nmi = arch_layout.has_ccw ? NONE : K(API);
	/* A hot-plugged virtio-ccw disk's removal unbinds its adapter routes
	 * on the API thread (s390x). */
	const unsigned irqfd = K(VCPU) | K(CONTROL) | K(MAIN) | (arch_layout.has_ccw ? K(API) : NONE);
	/* A snapshot's reads of x86 vCPU state: the API thread's. */
	const unsigned x86_snap = arch_layout.has_ccw ? NONE : K(API);
	const struct door d[] = {
		{ "KVM_RUN on its vCPU", ioctl_run_own_vcpu, K(VCPU) },
		{ "KVM_RUN on the VM", ioctl_run_vm, NONE },
		{ "KVM_IRQFD on the VM", ioctl_irqfd_vm, irqfd },
		{ "KVM_IRQFD on another fd", ioctl_irqfd_other, NONE },
		/* s390x's FLIC, whose floating interrupts a snapshot reads and
		 * puts back: the API thread's alone; x86's has none. */
		{ "KVM_GET/SET_DEVICE_ATTR on the architecture's device", ioctl_devattr_arch_dev,
		  arch_layout.has_ccw ? K(API) : NONE },
		{ "KVM_GET_DEVICE_ATTR on another fd", ioctl_devattr_other, NONE },
		{ "KVM_IRQ_LINE on the VM", ioctl_irq_line_vm, K(VCPU) | K(CONTROL) | K(API) },
		{ "KVM_SIGNAL_MSI on the VM", ioctl_signal_msi_vm, nmi },
		{ "KVM_IOEVENTFD on the VM", ioctl_ioeventfd_vm,
		  K(VCPU) | K(CONTROL) | K(MAIN) | K(API) },
		{ "KVM_IOEVENTFD on another fd", ioctl_ioeventfd_other, NONE },
		/* A snapshot reads a vCPU's nested state on the API thread
		 * (x86); a restore sets it before any filter. */
		{ "KVM_GET_NESTED_STATE on a vCPU", ioctl_nested_get_vcpu, x86_snap },
		/* x86: the halt probe's, on the vCPU's own thread; a
		 * snapshot's, on the API thread. */
		{ "KVM_GET_MP_STATE on a vCPU", ioctl_mp_state_vcpu,
		  arch_layout.has_ccw ? NONE : K(VCPU) | K(API) },
		{ "KVM_GET_MP_STATE on another fd", ioctl_mp_state_other, NONE },
		{ "KVM_GET_NESTED_STATE on another fd", ioctl_nested_get_other, NONE },
		{ "KVM_SET_NESTED_STATE on a vCPU", ioctl_nested_set_vcpu, NONE },
		{ "KVM_CREATE_VCPU", ioctl_create_vcpu, NONE },
		{ "KVM_SET_USER_MEMORY_REGION", ioctl_set_memory, K(CONTROL) | K(MAIN) },
		{ "TCGETS on the terminal", ioctl_tcgets_tty, K(MAIN) },
		{ "TCGETS on another fd", ioctl_tcgets_other, NONE },
		{ "TIOCSTI", ioctl_tiocsti, NONE },
		{ "FIONBIO", ioctl_fionbio, NONE },
	};

	check_doors(d, ARRAY_SIZE(d));
}

/* ---- what each kind needs besides ----------------------------------------- */

static void call_tgkill_self(void)
{
	if (syscall(__NR_tgkill, getpid(), gettid(), 0))
		_exit(3);
}
static void call_tgkill_parent(void) { syscall(__NR_tgkill, getppid(), getppid(), 0); }
static void call_time_and_sleep(void)
{
	struct timespec t = { 0, 1000 };

	if (clock_gettime(CLOCK_MONOTONIC, &t) || nanosleep(&(struct timespec){ 0, 1000 }, NULL))
		_exit(3);
}
static void call_eventfd_rw(void)
{
	uint64_t v = 1;

	if (write(env.other, &v, 8) != 8 || read(env.other, &v, 8) != 8 ||
	    write(2, "", 0) != 0)
		_exit(3);
}
static void call_eventfd_create(void) { eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }
static void call_poll(void)
{
	struct pollfd p = { .fd = env.other, .events = POLLIN };

	if (poll(&p, 1, 0) < 0)
		_exit(3);
}
static void call_getrusage_thread(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru))
		_exit(3);
}
static void call_getrusage_self(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
}
static void call_sendto(void) { sendto(env.other, "", 0, MSG_DONTWAIT, NULL, 0); }
static void call_accept_listen(void) { accept4(env.fds.listen, NULL, NULL, SOCK_CLOEXEC); }
static void call_accept_other(void) { accept4(env.other, NULL, NULL, SOCK_CLOEXEC); }
static void call_recvfrom(void)
{
	char b;

	recvfrom(env.other, &b, 1, MSG_DONTWAIT, NULL, NULL);
}
static void call_select(void)
{
	struct timeval tv = { 0, 0 };

	select(0, NULL, NULL, NULL, &tv);
}
static void call_shutdown(void) { shutdown(env.other, SHUT_WR); }
static void call_sendmsg(void)
{
	struct msghdr m = { 0 };

	sendmsg(env.other, &m, MSG_DONTWAIT);
}
static void call_sigaction_kick(void)
{
	struct sigaction sa;

	if (sigaction(SIGUSR2, NULL, &sa) || sigaction(SIGUSR2, &sa, NULL))
		_exit(3);
}
static void call_sigaction_other(void)
{
	struct sigaction sa = { .sa_handler = SIG_IGN };

	sigaction(SIGINT, &sa, NULL);
}
static void call_close(void)
{
	if (close(env.other))
		_exit(3);
}

TEST(each_kind_may_do_what_it_needs_and_no_more)
{
	const struct door d[] = {
		{ "tgkill of its own thread", call_tgkill_self, ANY },
		{ "tgkill of another process", call_tgkill_parent, NONE },
		{ "clock and sleep", call_time_and_sleep, ANY },
		{ "eventfd read, write; stderr", call_eventfd_rw, ANY },
		{ "close", call_close, ANY },
		{ "eventfd2", call_eventfd_create, arch_sandbox.ncalls ? K(VCPU) : NONE },
		{ "poll", call_poll, K(MAIN) | K(CONTROL) | K(QUEUE) | K(API) |
		  (arch_sandbox.ncalls ? K(VCPU) : 0) },
		{ "accept4 on its listening socket", call_accept_listen, K(API) },
		{ "accept4 on another fd", call_accept_other, NONE },
		{ "recvfrom", call_recvfrom, K(API) },
		{ "select", call_select, K(API) },
		{ "sendmsg", call_sendmsg, K(API) },
		{ "shutdown", call_shutdown, K(API) },
		{ "getrusage RUSAGE_THREAD", call_getrusage_thread, K(QUEUE) },
		{ "getrusage RUSAGE_SELF", call_getrusage_self, NONE },
		{ "sendto", call_sendto, K(CONTROL) | K(API) },
		{ "sigaction of the kick signal", call_sigaction_kick, K(MAIN) },
		{ "sigaction of another signal", call_sigaction_other, NONE },
	};

	check_doors(d, ARRAY_SIZE(d));
}

/* ---- a control server's snapshots ------------------------------------------ */

static void snap_write(int dfd, const char *name)
{
	int fd = openat(dfd, name, SNAP_OPEN_WRITE, 0600);

	if (fd < 0 || pwrite(fd, "x", 1, 4096) != 1 || ftruncate(fd, 8192) || fsync(fd) ||
	    close(fd))
		_exit(3);
}
/* What mvm_snapshot does, beneath the directory's descriptor. */
static void call_snapshot_files(void)
{
	int d = env.fds.snap_dir, fd;

	if (mkdirat(d, "sub", 0700) && errno != EEXIST)
		_exit(3);
	snap_write(d, "sub/memory.tmp");
	if (renameat(d, "sub/memory.tmp", d, "sub/memory") || unlinkat(d, "sub/memory", 0))
		_exit(3);
	fd = openat(d, "sub", SNAP_OPEN_DIR);
	if (fd < 0 || fsync(fd) || close(fd))
		_exit(3);
}
static void call_snap_open_cwd(void) { openat(AT_FDCWD, env.tmp, SNAP_OPEN_WRITE, 0600); }
static void call_snap_open_read(void) { openat(env.fds.snap_dir, "f", O_RDONLY | O_CLOEXEC); }
static void call_snap_open_rdwr(void)
{
	openat(env.fds.snap_dir, "f", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
}
static void call_snap_rename_out(void) { renameat(env.fds.snap_dir, "f", AT_FDCWD, env.tmp); }
static void call_snap_rmdir(void) { unlinkat(env.fds.snap_dir, "sub", AT_REMOVEDIR); }
static void call_snap_mkdir_cwd(void) { mkdirat(AT_FDCWD, env.tmp, 0700); }
/* A snapshot makes guest RAM in its file private (snapshot_mem_private). */
static void call_mmap_mem_private(void)
{
	void *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED ||
	    mmap(p, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, env.fds.mem, 0) != p)
		_exit(3);
}
static void call_mmap_mem_shared(void)
{
	mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, env.fds.mem, 0);
}
static void call_mmap_other_private(void)
{
	mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_FIXED, env.other, 0);
}
static void call_pwrite(void) { syscall(__NR_pwrite64, env.other, "", 0, 0); }
static void call_ftruncate(void) { syscall(__NR_ftruncate, env.other, 0); }

/* With a snapshot directory, the API thread may make, write, size, sync,
 * rename and remove files through its descriptor and no other; without
 * one (and every other kind, with or without), none of those calls but
 * ftruncate, which the API thread has in any case (a disk's open image
 * resized, mvm_disk_resize). */
TEST(api_thread_writes_files_only_through_its_snapshot_directory)
{
	const struct door with[] = {
		{ "a snapshot's files", call_snapshot_files, K(API) },
		{ "openat for writing, from the working directory", call_snap_open_cwd, NONE },
		{ "openat for reading", call_snap_open_read, NONE },
		{ "openat O_RDWR", call_snap_open_rdwr, NONE },
		{ "renameat out of the directory", call_snap_rename_out, NONE },
		{ "unlinkat AT_REMOVEDIR", call_snap_rmdir, NONE },
		{ "mkdirat from the working directory", call_snap_mkdir_cwd, NONE },
		{ "mmap of guest RAM's file, private, fixed", call_mmap_mem_private, K(API) },
		{ "mmap of guest RAM's file, shared", call_mmap_mem_shared, NONE },
		{ "mmap of another file", call_mmap_other_private, NONE },
	};
	const struct door without[] = {
		{ "pwrite64", call_pwrite, NONE },
		{ "ftruncate", call_ftruncate, K(API) },
	};
	char path[64], sub[80];

	snprintf(path, sizeof(path), "/tmp/mvm-sandbox-snap-%d", (int)getpid());
	snprintf(sub, sizeof(sub), "%s/sub", path);
	CHECK_EQ(mkdir(path, 0700), 0);
	snap_dir_path = path;
	check_doors(with, ARRAY_SIZE(with));
	snap_dir_path = NULL;
	check_doors(without, ARRAY_SIZE(without));
	/* What the calls made, they removed, but for the directory. */
	CHECK_EQ(rmdir(sub), 0);
	snprintf(sub, sizeof(sub), "%s.mem", path);
	CHECK_EQ(unlink(sub), 0);
	CHECK_EQ(rmdir(path), 0);
}

/* An image opened for a swap as mvm_disk_swap opens it: locked, looked
 * at, its twin opened O_DIRECT (cache=none), hole punching probed. */
static void open_image(bool ro)
{
	struct mvm_disk o;
	struct blk_image img;
	char err[256];

	mvm_disk_init(&o, "/images/img");
	o.ro = ro;
	o.cache = MVM_CACHE_NONE;
	o.discard = !ro;
	if (blk_image_openat(env.fds.image_dir, "img", &o, &img, NULL, err, sizeof(err)))
		_exit(3);
	blk_image_close(&img);
}
static void call_image_rw(void) { open_image(false); }
static void call_image_ro(void) { open_image(true); }
static void call_image_create(void)
{
	openat(env.fds.image_dir, "new", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
}
static void call_image_trunc(void)
{
	openat(env.fds.image_dir, "img", O_RDWR | O_TRUNC | O_CLOEXEC);
}
static void call_image_open_cwd(void)
{
	char p[96];

	snprintf(p, sizeof(p), "%s/img", image_dir_path);
	openat(AT_FDCWD, p, O_RDWR | O_CLOEXEC);
}
static void call_fcntl_other(void) { syscall(__NR_fcntl, env.other, F_SETFL, 0); }
static void call_fallocate_other_mode(void) { syscall(__NR_fallocate, env.other, 0, 0, 4096); }
static void call_fstat(void)
{
	struct stat st;

	syscall(__NR_fstat, env.other, &st);
}

/* With an image directory, the API thread may open images there, for
 * reading or reading and writing, and lock, look at and probe them; it
 * may not create or truncate, nor open anything by another way; without
 * one (and every other kind), none of that. */
TEST(api_thread_opens_images_only_through_its_image_directory)
{
	const struct door with[] = {
		{ "an image read-write (cache=none, discard)", call_image_rw, K(API) },
		{ "an image read-only (cache=none)", call_image_ro, K(API) },
		{ "openat O_CREAT", call_image_create, NONE },
		{ "openat O_TRUNC", call_image_trunc, NONE },
		{ "openat from the working directory", call_image_open_cwd, NONE },
		{ "fcntl F_SETFL", call_fcntl_other, NONE },
		{ "fallocate allocating", call_fallocate_other_mode, NONE },
	};
	const struct door without[] = {
		{ "fstat", call_fstat, NONE },
	};
	char path[64], img[80];
	int fd;

	snprintf(path, sizeof(path), "/tmp/mvm-sandbox-img-%d", (int)getpid());
	snprintf(img, sizeof(img), "%s/img", path);
	CHECK_EQ(mkdir(path, 0700), 0);
	fd = open(img, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, 1 << 20), 0);
	close(fd);
	image_dir_path = path;
	check_doors(with, ARRAY_SIZE(with));
	image_dir_path = NULL;
	check_doors(without, ARRAY_SIZE(without));
	CHECK_EQ(unlink(img), 0);
	CHECK_EQ(rmdir(path), 0);
}

/* Landlock beneath an image directory: images there are read and
 * written, nothing is made there, and nothing outside is opened. */
static void image_beneath_child(void *arg)
{
	const char *path = arg;
	char p[128];
	int d = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC), r;

	if (d < 0)
		_exit(10);
	r = sandbox_beneath(-1, d);
	if (r == -ENOSYS || r == -EOPNOTSUPP)
		_exit(77);
	if (r)
		_exit(11);
	if (openat(d, "img", O_RDWR | O_CLOEXEC) < 0)
		_exit(12);
	if (openat(d, "new", O_RDWR | O_CREAT | O_CLOEXEC, 0600) >= 0 || errno != EACCES)
		_exit(13);
	if (open("/etc/passwd", O_RDONLY) >= 0 || errno != EACCES)
		_exit(14);
	snprintf(p, sizeof(p), "%s/../escape", path);
	if (open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600) >= 0 || errno != EACCES)
		_exit(15);
	_exit(0);
}

TEST(landlock_lets_a_thread_read_and_write_images_beneath_its_image_directory)
{
	char path[64], p[96], out[256] = "";
	int st, fd;

	snprintf(path, sizeof(path), "/tmp/mvm-beneath-img-%d", (int)getpid());
	CHECK_EQ(mkdir(path, 0700), 0);
	snprintf(p, sizeof(p), "%s/img", path);
	fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	close(fd);
	st = check_fork(image_beneath_child, path, out, sizeof(out));
	unlink(p);
	rmdir(path);
	if (st == 77)
		CHECK_SKIP("no Landlock in this kernel");
	CHECK_EQ(st, 0);
}

/* Landlock (sandbox_beneath): the thread opens nothing outside the tree,
 * not through "..", not through a link planted inside it, and keeps the
 * descriptors it had. */
static void beneath_child(void *arg)
{
	const char *path = arg;
	char p[128];
	int d = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC), keep = open("/dev/null", O_RDWR);
	int r;

	if (d < 0 || keep < 0)
		_exit(10);
	r = sandbox_beneath(d, -1);
	if (r == -ENOSYS || r == -EOPNOTSUPP)
		_exit(77);
	if (r)
		_exit(11);
	snprintf(p, sizeof(p), "%s/f", path);
	if (open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) < 0)
		_exit(12);
	if (open("/etc/passwd", O_RDONLY) >= 0 || errno != EACCES)
		_exit(13);
	if (openat(d, "../escape", O_WRONLY | O_CREAT, 0600) >= 0 || errno != EACCES)
		_exit(14);
	if (openat(d, "link/passwd", O_RDONLY) >= 0 || errno != EACCES)
		_exit(15);
	if (open(p, O_RDONLY) >= 0 || errno != EACCES)   /* written, never read */
		_exit(16);
	if (write(keep, "x", 1) != 1)
		_exit(17);
	_exit(0);
}

TEST(landlock_holds_a_thread_beneath_one_directory)
{
	char path[64], p[96], out[256] = "";
	int st;

	snprintf(path, sizeof(path), "/tmp/mvm-beneath-%d", (int)getpid());
	CHECK_EQ(mkdir(path, 0700), 0);
	snprintf(p, sizeof(p), "%s/link", path);
	CHECK_EQ(symlink("/etc", p), 0);
	st = check_fork(beneath_child, path, out, sizeof(out));
	unlink(p);
	snprintf(p, sizeof(p), "%s/f", path);
	unlink(p);
	rmdir(path);
	if (st == 77)
		CHECK_SKIP("no Landlock in this kernel");
	CHECK_EQ(st, 0);
}

/* The kick: a plain handler (no SA_SIGINFO, as vcpu_signal_get installs)
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

	need_seccomp();
	check_need_io_uring();
	sigemptyset(&sa.sa_mask);
	CHECK_EQ(sigaction(SIGUSR2, &sa, NULL), 0);
	CHECK_EQ(status_of(SANDBOX_VCPU, vcpu_is_kicked), 0);
}

TEST(every_kind_builds_a_program_that_fits)
{
	struct sock_filter insn[SANDBOX_MAX_INSNS];
	struct sandbox_fds fds = { 3, 4, 4, 9, 5, 0, SIGUSR1, 6, 7, 8, 10, 11 };
	unsigned k;

	for (k = 0; k < SANDBOX_KINDS; k++) {
		int n = sandbox_build(k, &fds, insn, ARRAY_SIZE(insn));

		CHECK(n > 10);
		CHECK(n < SANDBOX_MAX_INSNS);
		CHECK_EQ(sandbox_build(k, &fds, insn, (unsigned)n - 1), -ENOSPC);
	}
	CHECK_EQ(sandbox_build(SANDBOX_KINDS, &fds, insn, ARRAY_SIZE(insn)), -EINVAL);
	CHECK_EQ(sandbox_build(SANDBOX_VCPU, NULL, insn, ARRAY_SIZE(insn)), -EINVAL);
}
