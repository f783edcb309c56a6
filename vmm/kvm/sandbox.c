/* Per-thread seccomp-bpf allow-lists (see sandbox.h and docs/sandbox.md).
 * The program is built at run time from tables: the architecture check,
 * then one block per allowed system call. A block either allows the call
 * outright, fails it with an errno, or tries a list of alternatives: an
 * alternative is a conjunction of argument checks ("args[1] & mask is one
 * of these values", "args[0] is the VM's fd"); the first that holds
 * allows the call, and a call none holds for kills the process. Whatever
 * is not listed kills the process too.
 *
 * Layout: "ld nr; jeq NR, +1; ja next; <block ending in ret>; next: ...":
 * the accumulator holds the number at every rule's start (a block ends in
 * a ret on every path), and every skip is a 32-bit ja, so no jump depends
 * on the lists' lengths. Checks look at the low 32 bits of an argument:
 * every argument checked here is an int or is truncated to 32 bits by the
 * kernel (fd, cmd, op, advice), or has no meaning above them (mmap's and
 * mprotect's prot and flags). */
#include "vmm/kvm/sandbox.h"
#include "vmm/base/snap.h"
#include "arch/arch.h"
#include "vmm/kvm/kvm.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/futex.h>
#include <linux/landlock.h>
#include <linux/net.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

const char *const sandbox_kind_names[SANDBOX_KINDS] = {
	[SANDBOX_MAIN] = "main", [SANDBOX_CONTROL] = "control",
	[SANDBOX_VCPU] = "vcpu", [SANDBOX_QUEUE] = "queue", [SANDBOX_API] = "api",
};

#define K_MAIN    SANDBOX_K(SANDBOX_MAIN)
#define K_CONTROL SANDBOX_K(SANDBOX_CONTROL)
#define K_VCPU    SANDBOX_K(SANDBOX_VCPU)
#define K_QUEUE   SANDBOX_K(SANDBOX_QUEUE)
#define K_API     SANDBOX_K(SANDBOX_API)
#define K_ALL     (K_MAIN | K_CONTROL | K_VCPU | K_QUEUE | K_API)

/* One condition on an argument. */
enum check_op {
	CHECK_END,              /* no more conditions */
	CHECK_IN,               /* (args[arg] & mask) is one of vals */
	CHECK_FD,               /* args[arg] is the descriptor fd names */
	CHECK_HAS,              /* the thread has the descriptor fd names */
};

#define CHECK_VALS 8
struct check {
	enum check_op op;
	uint8_t arg;
	uint32_t mask;
	uint32_t vals[CHECK_VALS];
	uint8_t nvals;
	enum sandbox_fd fd;
};

#define ALT_CHECKS 3
struct alt {
	struct check c[ALT_CHECKS];     /* all of them hold */
};

enum action {
	ACT_ALLOW,              /* outright */
	ACT_ERRNO,              /* fail with errno_val, outright */
	ACT_CHECKED,            /* the first alternative that holds allows; none: kill */
};

struct rule {
	unsigned kinds;
	long nr;
	enum action act;
	int errno_val;
	struct alt alts[4];
	unsigned nalts;
};

#define MASK_ALL 0xffffffffu
/* The kernel's O_LARGEFILE on x86-64 and s390x (asm-generic/fcntl.h):
 * musl's openat adds it, glibc's (where the C library's is 0) does not. */
#define SANDBOX_O_LARGEFILE 0100000u
#define IN(a, m, ...) { CHECK_IN, (a), (m), { __VA_ARGS__ }, \
			sizeof((uint32_t[]){ __VA_ARGS__ }) / sizeof(uint32_t), 0 }
#define FD(a, which) { CHECK_FD, (a), 0, { 0 }, 0, (which) }
#define HAS(which) { CHECK_HAS, 0, 0, { 0 }, 0, (which) }
#define ALLOW(k, name) { (k), __NR_##name, ACT_ALLOW, 0, { { { { 0 } } } }, 0 }
#define CHECKED1(k, name, ...) \
	{ (k), __NR_##name, ACT_CHECKED, 0, { { { __VA_ARGS__ } } }, 1 }

/* Operations a futex may be asked for, whatever its PRIVATE and
 * CLOCK_REALTIME flags: what glibc's mutexes, condition variables,
 * semaphores and pthread_join use. Not the requeue, wake-op or
 * priority-inheritance operations (where the kernel's futex bugs were). */
#define FUTEX_OPS FUTEX_WAIT, FUTEX_WAKE, FUTEX_WAIT_BITSET, FUTEX_WAKE_BITSET
#define FUTEX_CMD (~(uint32_t)(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME))

/* What each kind may call (docs/sandbox.md is this table in words):
 *  - every thread: memory (brk, anonymous private mappings, munmap,
 *    mprotect; never executable), futexes, its own exit, signal return,
 *    messages to stderr and eventfd reads and writes (read, write), the
 *    clock and sleeping, its own ids, and signalling a thread of its own
 *    process (vcpu_kick);
 *  - main and control: poll, and the teardown of devices and queues
 *    (closing descriptors, KVM ioctls on the VM); main also gives the
 *    kick signal's handler back;
 *  - vCPU: KVM_RUN on its own vCPU, and the device emulation's ioctls on
 *    the VM;
 *  - queue: io_uring_enter on its own ring, and as it ends the two
 *    unregister calls that drop what its ring holds (the ring is single-
 *    issuer: no other thread can), and a disk's image swap (the new
 *    image's descriptors put in the ring's slots: nothing is opened;
 *    the ring's own restrictions allow it only where the device asked);
 *    poll for device helper threads;
 *    getrusage of its own thread for the poll-gap check. */
static const struct rule generic[] = {
	ALLOW(K_ALL, read),
	ALLOW(K_ALL, write),
	ALLOW(K_ALL, writev),
	ALLOW(K_ALL, close),
	ALLOW(K_ALL, exit),
	ALLOW(K_ALL, exit_group),
	ALLOW(K_ALL, rt_sigreturn),
#ifdef __NR_sigreturn
	/* s390x returns from a handler without SA_SIGINFO (the kick) here. */
	ALLOW(K_ALL, sigreturn),
#endif
	ALLOW(K_ALL, rt_sigprocmask),
	ALLOW(K_ALL, sigaltstack),
	ALLOW(K_ALL, restart_syscall),
	ALLOW(K_ALL, munmap),
	ALLOW(K_ALL, brk),
	ALLOW(K_ALL, clock_gettime),
	ALLOW(K_ALL, clock_nanosleep),
	ALLOW(K_ALL, nanosleep),
	ALLOW(K_ALL, gettid),
	ALLOW(K_ALL, getpid),
	ALLOW(K_ALL, sched_yield),
	ALLOW(K_ALL, getrandom),
	CHECKED1(K_ALL, futex, IN(1, FUTEX_CMD, FUTEX_OPS)),
	/* Never executable (mmap's own rule is built from arch_sandbox). */
	CHECKED1(K_ALL, mprotect, IN(2, PROT_EXEC, 0)),
	/* Giving pages back (thread stacks, malloc, a queue's request
	 * slots; musl's free gives a freed multi-page slot back with
	 * MADV_FREE) and what the sanitizers' allocator asks for; not
	 * MADV_REMOVE, MADV_HWPOISON, MADV_SOFT_OFFLINE, MADV_MERGEABLE and
	 * the rest, which act on shared or physical pages. */
	CHECKED1(K_ALL, madvise, IN(2, MASK_ALL, MADV_DONTNEED, MADV_FREE, MADV_NOHUGEPAGE, MADV_DONTDUMP)),
	/* A thread asks only whether it may dump (the sanitizers do). */
	CHECKED1(K_ALL, prctl, IN(0, MASK_ALL, PR_GET_DUMPABLE)),
	/* Signals go to this process's threads only (vcpu_kick): the pid
	 * is compared at build time. */
	CHECKED1(K_ALL, tgkill, { CHECK_IN, 0, MASK_ALL, { 0 }, 1, 0 }),
	/* The last VM's destroy gives the kick signal's disposition back
	 * (vcpu_signal_put): that signal only. */
	CHECKED1(K_MAIN, rt_sigaction, FD(0, SANDBOX_FD_KICK_SIGNAL)),

	ALLOW(K_MAIN | K_CONTROL | K_QUEUE | K_API, ppoll),
#ifdef __NR_poll
	ALLOW(K_MAIN | K_CONTROL | K_QUEUE | K_API, poll),
#endif
	/* A control server (vmm/api/server.c): connections accepted on its
	 * own socket only (new descriptors, but only of clients that reached
	 * that socket), requests read and answers written on them, the wait
	 * (libmicrohttpd's: select), a connection's end. */
	CHECKED1(K_API, accept4, FD(0, SANDBOX_FD_LISTEN)),
#ifdef __NR_select
	ALLOW(K_API, select),
#endif
	ALLOW(K_API, pselect6),
	ALLOW(K_API, recvfrom),
	ALLOW(K_API, sendmsg),
	ALLOW(K_API, shutdown),
	/* A control server's snapshots (vmm/lib/snapshot.c), into the one
	 * directory it was given: files made, renamed and removed through
	 * that directory's descriptor only (Landlock holds the thread to
	 * that tree, so no path leads out of it), opened to be written or
	 * to be synced, never followed through a link; then written, sized
	 * and synced. Without the descriptor (no snapshot directory, or a
	 * kernel without Landlock) none of these calls is allowed. */
	/* Or, with an image directory, an image for a swap (mvm_disk_swap,
	 * blk_image_openat), opened for reading or for reading and writing,
	 * with O_DIRECT for cache=none, through that directory's descriptor
	 * (Landlock holds the thread to that tree too); then looked at,
	 * locked, and asked whether it can punch holes. */
	{ K_API, __NR_openat, ACT_CHECKED, 0,
	  { { { FD(0, SANDBOX_FD_SNAP_DIR),
		IN(2, ~(uint32_t)SANDBOX_O_LARGEFILE, SNAP_OPEN_WRITE, SNAP_OPEN_DIR) } },
	    { { FD(0, SANDBOX_FD_IMAGE_DIR),
		IN(2, ~(uint32_t)(SANDBOX_O_LARGEFILE | O_DIRECT), O_RDONLY | O_CLOEXEC,
		   O_RDWR | O_CLOEXEC) } } }, 2 },
	CHECKED1(K_API, fstat, HAS(SANDBOX_FD_IMAGE_DIR)),
#ifdef __NR_newfstatat
	/* glibc's fstat: newfstatat(fd, "", AT_EMPTY_PATH). */
	CHECKED1(K_API, newfstatat, HAS(SANDBOX_FD_IMAGE_DIR), IN(3, MASK_ALL, AT_EMPTY_PATH)),
#endif
	CHECKED1(K_API, fcntl, HAS(SANDBOX_FD_IMAGE_DIR), IN(1, MASK_ALL, F_OFD_SETLK)),
	CHECKED1(K_API, fallocate, HAS(SANDBOX_FD_IMAGE_DIR),
		 IN(1, MASK_ALL, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)),
	CHECKED1(K_API, mkdirat, FD(0, SANDBOX_FD_SNAP_DIR)),
	CHECKED1(K_API, unlinkat, FD(0, SANDBOX_FD_SNAP_DIR), IN(2, MASK_ALL, 0)),
#ifdef __NR_renameat
	CHECKED1(K_API, renameat, FD(0, SANDBOX_FD_SNAP_DIR), FD(2, SANDBOX_FD_SNAP_DIR)),
#endif
	CHECKED1(K_API, renameat2, FD(0, SANDBOX_FD_SNAP_DIR), FD(2, SANDBOX_FD_SNAP_DIR),
		 IN(4, MASK_ALL, 0)),
	CHECKED1(K_API, pwrite64, HAS(SANDBOX_FD_SNAP_DIR)),
	/* A snapshot's files are sized; so is a disk's open image
	 * (mvm_disk_resize, which opens nothing). */
	ALLOW(K_API, ftruncate),
	CHECKED1(K_API, fsync, HAS(SANDBOX_FD_SNAP_DIR)),
	/* Console output to a socket (MSG_DONTWAIT: vmm/lib/console_out.c);
	 * a control server's answers. */
	ALLOW(K_CONTROL | K_API, sendto),
#ifdef __NR_socketcall
	/* s390x's C library makes these socket calls through socketcall,
	 * the call's number its first argument: the same calls, by number.
	 * Their descriptor is in memory there, out of the filter's reach,
	 * so accept4 is not held to the listening socket on s390x (only
	 * the API thread's filter has it). */
	CHECKED1(K_API, socketcall, IN(0, MASK_ALL, SYS_ACCEPT4, SYS_RECV, SYS_RECVFROM, SYS_SEND,
				      SYS_SENDTO, SYS_SENDMSG, SYS_SHUTDOWN)),
	CHECKED1(K_CONTROL, socketcall, IN(0, MASK_ALL, SYS_SEND, SYS_SENDTO)),
#endif

	CHECKED1(K_QUEUE, io_uring_enter, FD(0, SANDBOX_FD_RING)),
	CHECKED1(K_QUEUE, io_uring_register, FD(0, SANDBOX_FD_RING),
		 IN(1, MASK_ALL, IORING_UNREGISTER_FILES, IORING_UNREGISTER_BUFFERS,
		    IORING_REGISTER_FILES_UPDATE)),
	/* A queue thread whose poll stalled asks whether it lost its CPU
	 * (devices/virtq_worker.c: vqw_poll_gap): its own counters only. */
	CHECKED1(K_QUEUE, getrusage, IN(0, MASK_ALL, RUSAGE_THREAD)),
#ifdef __NR_clone3
	/* No thread is created after the filters are in, but glibc tries
	 * clone3 first: a clear error rather than a kill. */
	{ K_ALL, __NR_clone3, ACT_ERRNO, ENOSYS, { { { { 0 } } } }, 0 },
#endif
};

/* The generic ioctls, by kind and descriptor (the architecture adds its
 * own). */
static const struct sandbox_ioctl generic_ioctls[] = {
	{ K_VCPU, SANDBOX_FD_VCPU, KVM_RUN },
	/* Device emulation on a vCPU: legacy interrupt lines (UART), MSI-X
	 * vectors and their routes, notification addresses that follow a
	 * moved BAR. The API thread plugs and pulls disks: a hot-plug slot's
	 * interrupt line, and the notify addresses of a disk pulled out by
	 * surprise (its BARs unmapped). */
	{ K_VCPU | K_CONTROL | K_API, SANDBOX_FD_VM, KVM_IRQ_LINE },
	{ K_VCPU | K_CONTROL | K_MAIN, SANDBOX_FD_VM, KVM_IRQFD },
	{ K_VCPU | K_CONTROL | K_MAIN | K_API, SANDBOX_FD_VM, KVM_IOEVENTFD },
	{ K_VCPU | K_CONTROL | K_MAIN, SANDBOX_FD_VM, KVM_SET_GSI_ROUTING },
	/* Teardown of the virtio-mmio register pages' read-only slots. */
	{ K_CONTROL | K_MAIN, SANDBOX_FD_VM, KVM_SET_USER_MEMORY_REGION },
	/* The terminal's mode restored at exit (mvm(1)). */
	{ K_MAIN, SANDBOX_FD_TTY, TCGETS },
	{ K_MAIN, SANDBOX_FD_TTY, TCSETS },
	{ K_MAIN, SANDBOX_FD_TTY, TCSETSW },
	{ K_MAIN, SANDBOX_FD_TTY, TCSETSF },
};

struct prog {
	struct sock_filter *insn;
	unsigned n, cap;
	bool overflow;
	const struct sandbox_fds *fds;
};

static unsigned emit(struct prog *p, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k)
{
	if (p->n >= p->cap) {
		p->overflow = true;
		return p->n;
	}
	p->insn[p->n] = (struct sock_filter)BPF_JUMP(code, k, jt, jf);
	return p->n++;
}

/* A forward jump to be patched: its index, or cap (nothing emitted). */
static unsigned emit_ja(struct prog *p)
{
	return emit(p, BPF_JMP | BPF_JA, 0, 0, 0);
}

/* Point the ja at index `at` to the next instruction to be emitted. */
static void land(struct prog *p, unsigned at)
{
	if (!p->overflow && at < p->n)
		p->insn[at].k = p->n - at - 1;
}

#define RET(p, v) emit(p, BPF_RET | BPF_K, 0, 0, v)
#define RET_ALLOW(p) RET(p, SECCOMP_RET_ALLOW)
#define RET_KILL(p) RET(p, SECCOMP_RET_KILL_PROCESS)

/* Offset of the low 32 bits of args[i] in struct seccomp_data. */
static uint32_t arg_lo(unsigned i)
{
	static const union { uint16_t u; uint8_t b[2]; } one = { .u = 1 };

	return (uint32_t)(offsetof(struct seccomp_data, args) + 8 * i + (one.b[0] ? 0 : 4));
}

static void load_arg(struct prog *p, unsigned i)
{
	emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, arg_lo(i));
}

/* The descriptor range [*lo, *hi] that `which` names, or false. */
static bool fd_range(const struct sandbox_fds *f, enum sandbox_fd which, int *lo, int *hi)
{
	switch (which) {
	case SANDBOX_FD_VM: *lo = *hi = f->vm; break;
	case SANDBOX_FD_VCPU: *lo = *hi = f->vcpu; break;
	case SANDBOX_FD_VCPUS: *lo = f->vcpu_lo; *hi = f->vcpu_hi; break;
	case SANDBOX_FD_RING: *lo = *hi = f->ring; break;
	case SANDBOX_FD_TTY: *lo = *hi = f->tty; break;
	case SANDBOX_FD_KICK_SIGNAL: *lo = *hi = f->kick_signal; break;
	case SANDBOX_FD_LISTEN: *lo = *hi = f->listen; break;
	case SANDBOX_FD_SNAP_DIR: *lo = *hi = f->snap_dir; break;
	case SANDBOX_FD_MEM: *lo = *hi = f->mem; break;
	case SANDBOX_FD_IMAGE_DIR: *lo = *hi = f->image_dir; break;
	case SANDBOX_FD_ARCH_DEV: *lo = *hi = f->arch_dev; break;
	default: return false;
	}
	return *lo >= 0 && *hi >= *lo;
}

/* One condition; each way it can fail is a ja appended to fails. False
 * when it can never hold (a descriptor this thread does not have). */
static bool emit_check(struct prog *p, const struct check *c, unsigned *fails, unsigned *nfails)
{
	unsigned i;
	int lo, hi;

	switch (c->op) {
	case CHECK_END:
		return true;
	case CHECK_HAS:
		return fd_range(p->fds, c->fd, &lo, &hi);
	case CHECK_IN:
		load_arg(p, c->arg);
		if (c->mask != MASK_ALL)
			emit(p, BPF_ALU | BPF_AND | BPF_K, 0, 0, c->mask);
		/* A match jumps over the other values and the failing ja. */
		for (i = 0; i < c->nvals; i++)
			emit(p, BPF_JMP | BPF_JEQ | BPF_K, (uint8_t)(c->nvals - i), 0, c->vals[i]);
		fails[(*nfails)++] = emit_ja(p);
		return true;
	case CHECK_FD:
		if (!fd_range(p->fds, c->fd, &lo, &hi))
			return false;
		load_arg(p, c->arg);
		if (lo == hi) {
			emit(p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, (uint32_t)lo);
			fails[(*nfails)++] = emit_ja(p);
		} else {
			emit(p, BPF_JMP | BPF_JGE | BPF_K, 1, 0, (uint32_t)lo);
			fails[(*nfails)++] = emit_ja(p);
			emit(p, BPF_JMP | BPF_JGT | BPF_K, 0, 1, (uint32_t)hi);
			fails[(*nfails)++] = emit_ja(p);
		}
		return true;
	}
	return false;
}

/* One alternative: its checks, then allow; every failure lands after it. */
static void emit_alt(struct prog *p, const struct check *c, unsigned n)
{
	unsigned fails[2 * ALT_CHECKS], nfails = 0, i, start = p->n;

	for (i = 0; i < n && c[i].op != CHECK_END; i++) {
		if (!emit_check(p, &c[i], fails, &nfails)) {
			p->n = start;   /* never holds: leave it out */
			return;
		}
	}
	RET_ALLOW(p);
	for (i = 0; i < nfails; i++)
		land(p, fails[i]);
}

static void emit_rule(struct prog *p, const struct rule *r)
{
	unsigned skip, i;

	emit(p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, (uint32_t)r->nr);
	skip = emit_ja(p);
	switch (r->act) {
	case ACT_ALLOW:
		RET_ALLOW(p);
		break;
	case ACT_ERRNO:
		RET(p, SECCOMP_RET_ERRNO | ((uint32_t)r->errno_val & SECCOMP_RET_DATA));
		break;
	case ACT_CHECKED:
		for (i = 0; i < r->nalts; i++)
			emit_alt(p, r->alts[i].c, ALT_CHECKS);
		RET_KILL(p);
		break;
	}
	land(p, skip);
	/* Every block ended in a ret: the next rule finds nr in A again,
	 * but only if A was reloaded. */
	emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, nr));
}

/* The ioctl block: one alternative per (descriptor, request) the kind
 * may use. */
static void emit_ioctls(struct prog *p, unsigned bit, const struct sandbox_ioctl *l, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		struct check c[2] = {
			FD(0, l[i].fd),
			IN(1, MASK_ALL, (uint32_t)l[i].request),
		};

		if (l[i].kinds & bit)
			emit_alt(p, c, 2);
	}
}

int sandbox_build(enum sandbox_kind kind, const struct sandbox_fds *fds,
		  struct sock_filter *insn, unsigned cap)
{
	struct prog p = { .insn = insn, .cap = cap, .fds = fds };
	/* mmap: anonymous, private, never executable; where its arguments
	 * are out of reach, refused (arch_sandbox.mmap_args_in_memory). */
	struct rule mmap_rule = {
		.kinds = K_ALL, .nr = __NR_mmap, .act = ACT_CHECKED, .nalts = 2,
		.alts = { { { IN(2, PROT_EXEC, 0),
			      IN(3, MAP_ANONYMOUS | MAP_SHARED | MAP_SHARED_VALIDATE | MAP_PRIVATE,
				 MAP_ANONYMOUS | MAP_PRIVATE) } },
			  /* A snapshot that made guest RAM in its file private
			   * (vmm/lib/snapshot.c): that file, privately, at a
			   * fixed address; the API thread given the file. */
			  { { IN(2, PROT_EXEC, 0),
			      IN(3, MAP_ANONYMOUS | MAP_SHARED | MAP_SHARED_VALIDATE | MAP_PRIVATE |
				 MAP_FIXED, MAP_PRIVATE | MAP_FIXED),
			      FD(4, SANDBOX_FD_MEM) } } },
	};
	struct rule tgkill_self;
	unsigned i, bit, skip;

	if ((unsigned)kind >= SANDBOX_KINDS || !fds)
		return -EINVAL;
	bit = SANDBOX_K(kind);
	/* The second way (guest RAM's file) is the API thread's alone. */
	if (kind != SANDBOX_API)
		mmap_rule.nalts = 1;
	if (arch_sandbox.mmap_args_in_memory)
		mmap_rule = (struct rule){ .kinds = K_ALL, .nr = __NR_mmap, .act = ACT_ERRNO,
					   .errno_val = ENOMEM };
	/* A call made through another architecture's entry (x32, 31-bit
	 * compat) has other numbers: refuse it outright. */
	emit(&p, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, arch));
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, arch_sandbox.audit_arch);
	RET_KILL(&p);
	emit(&p, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, nr));
	if (arch_sandbox.syscall_nr_limit) {
		/* x86-64's x32 calls share the architecture, with bit 30 set. */
		emit(&p, BPF_JMP | BPF_JGE | BPF_K, 0, 1, arch_sandbox.syscall_nr_limit);
		RET_KILL(&p);
	}
	for (i = 0; i < ARRAY_SIZE(generic); i++) {
		if (!(generic[i].kinds & bit))
			continue;
		if (generic[i].nr == __NR_tgkill) {
			tgkill_self = generic[i];
			tgkill_self.alts[0].c[0].vals[0] = (uint32_t)getpid();
			emit_rule(&p, &tgkill_self);
			continue;
		}
		emit_rule(&p, &generic[i]);
	}
	emit_rule(&p, &mmap_rule);
	for (i = 0; i < arch_sandbox.ncalls; i++) {
		struct rule r = { .kinds = arch_sandbox.calls[i].kinds,
				  .nr = arch_sandbox.calls[i].nr, .act = ACT_ALLOW };

		if (r.kinds & bit)
			emit_rule(&p, &r);
	}
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, __NR_ioctl);
	skip = emit_ja(&p);
	emit_ioctls(&p, bit, generic_ioctls, ARRAY_SIZE(generic_ioctls));
	emit_ioctls(&p, bit, arch_sandbox.ioctls, arch_sandbox.nioctls);
	RET_KILL(&p);
	land(&p, skip);
	RET_KILL(&p);
	return p.overflow ? -ENOSPC : (int)p.n;
}

int sandbox_enter(enum sandbox_kind kind, const struct sandbox_fds *fds)
{
	struct sock_filter insn[SANDBOX_MAX_INSNS];
	struct sock_fprog fprog;
	int n = sandbox_build(kind, fds, insn, ARRAY_SIZE(insn));

	if (n < 0)
		return n;
	fprog = (struct sock_fprog){ .len = (unsigned short)n, .filter = insn };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	/* No TSYNC: this thread only. */
	if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog))
		return -errno;
	return 0;
}

/* Landlock (Documentation/userspace-api/landlock.rst), where the C
 * library's headers are older than the kernel's: one number on every
 * architecture. */
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

int sandbox_beneath(int snap_dirfd, int image_dirfd)
{
	/* Every access right of the kernel's Landlock ABI is handled (so
	 * denied outside the rules); beneath snap_dirfd what a snapshot
	 * does: list and sync a directory, make one, make, write, truncate,
	 * rename and remove regular files; beneath image_dirfd what opening
	 * an image does: read and write a file. */
	struct landlock_ruleset_attr ra = { 0 };
	struct landlock_path_beneath_attr pb = { 0 }, pi = { 0 };
	long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	uint64_t handled;
	int fd, ret = 0;

	if (abi < 1)
		return abi < 0 ? -errno : -EOPNOTSUPP;
	handled = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;       /* ABI 1 */
	if (abi >= 2)
		handled |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		handled |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		handled |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	ra.handled_access_fs = handled;
	pb.allowed_access = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
			    LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_REG |
			    LANDLOCK_ACCESS_FS_MAKE_DIR | (handled & LANDLOCK_ACCESS_FS_TRUNCATE);
	pb.parent_fd = snap_dirfd;
	pi.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE;
	pi.parent_fd = image_dirfd;
	fd = (int)syscall(__NR_landlock_create_ruleset, &ra, sizeof(ra), 0);
	if (fd < 0)
		return -errno;
	if ((snap_dirfd >= 0 &&
	     syscall(__NR_landlock_add_rule, fd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0)) ||
	    (image_dirfd >= 0 &&
	     syscall(__NR_landlock_add_rule, fd, LANDLOCK_RULE_PATH_BENEATH, &pi, 0)) ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(__NR_landlock_restrict_self, fd, 0))
		ret = -errno;
	close(fd);
	return ret;
}
