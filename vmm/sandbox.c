/* Per-thread seccomp-bpf allow-lists (see sandbox.h). The program is built
 * at run time from tables: the architecture check, then one block per
 * allowed system call; a block either allows the call outright or checks
 * one argument (ioctl request numbers, prctl options, clone flags, ...)
 * and then allows or kills. Everything not listed kills the process.
 *
 * Blocks are independent ("jeq nr, 0, skip; <block ending in ret>"), so
 * every jump is short whatever the lists' lengths. */
#include "vmm/sandbox.h"
#include "arch/arch.h"
#include "vmm/kvm.h"
#include "vmm/util.h"

#include <errno.h>
#include <sched.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* What glibc's pthread_create passes, of which a thread needs these: no
 * new process (fork), no new address space. */
#define CLONE_THREAD_FLAGS (CLONE_VM | CLONE_THREAD | CLONE_SIGHAND)

const char *const sandbox_kind_names[SANDBOX_KINDS] = {
	[SANDBOX_MAIN] = "main", [SANDBOX_CONTROL] = "control",
	[SANDBOX_VCPU] = "vcpu", [SANDBOX_QUEUE] = "queue",
};

enum rule_kind {
	RULE_ALLOW,             /* any arguments */
	RULE_ARG_IN,            /* args[arg] (low 32 bits) is one of vals */
	RULE_ARG_CLEAR,         /* args[arg] & mask == 0 (low 32 bits) */
	RULE_ARG_SET,           /* args[arg] & mask == mask (low 32 bits) */
	RULE_ENOSYS,            /* fail with ENOSYS (clone3: glibc falls back to clone) */
	RULE_IOCTL,             /* ioctl: the request is on the kind's list */
	RULE_SELF_PID,          /* args[arg] is this process (tgkill) */
};

struct rule {
	long nr;
	enum rule_kind kind;
	int arg;                /* -1: the architecture does not pass it in a register */
	uint32_t mask;
	uint32_t vals[6];
	unsigned nvals;
};

/* Kinds that may make a call, as a bit mask. */
#define K_MAIN    (1u << SANDBOX_MAIN)
#define K_CONTROL (1u << SANDBOX_CONTROL)
#define K_VCPU    (1u << SANDBOX_VCPU)
#define K_QUEUE   (1u << SANDBOX_QUEUE)
#define K_ALL     (K_MAIN | K_CONTROL | K_VCPU | K_QUEUE)

struct entry {
	unsigned kinds;
	struct rule r;
};

#define ALLOW(k, name) { k, { __NR_##name, RULE_ALLOW, 0, 0, { 0 }, 0 } }

/* The generic lists. Queue threads are started by vCPU threads and
 * inherit the vCPU filter, so everything a queue thread does is on the
 * vCPU list too. What each group is for:
 *  - every thread: memory (malloc, thread stacks: no executable
 *    mappings), futexes, its own exit, signal return, messages to stderr
 *    (write), eventfds (read/write), time, naming itself, and glibc's
 *    thread start (set_robust_list, rseq, sigaltstack under sanitizers);
 *  - main and control: poll, the teardown of devices and queues (closing
 *    rings, unlocking images);
 *  - vCPU: starting and stopping queue threads and their rings at the
 *    guest's DRIVER_OK and reset;
 *  - queue: io_uring_enter (and poll for the INTx helper). */
static const struct entry generic[] = {
	ALLOW(K_ALL, read),
	ALLOW(K_ALL, write),
	ALLOW(K_ALL, writev),
	ALLOW(K_ALL, close),
	ALLOW(K_ALL, futex),
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
	ALLOW(K_ALL, madvise),
	ALLOW(K_ALL, munmap),
	ALLOW(K_ALL, brk),
	ALLOW(K_ALL, clock_gettime),
	ALLOW(K_ALL, clock_nanosleep),
	ALLOW(K_ALL, nanosleep),
	ALLOW(K_ALL, gettid),
	ALLOW(K_ALL, getpid),
	ALLOW(K_ALL, sched_yield),
	ALLOW(K_ALL, sched_getaffinity),
	ALLOW(K_ALL, set_robust_list),
#ifdef __NR_rseq
	ALLOW(K_ALL, rseq),
#endif
	ALLOW(K_ALL, getrandom),
	ALLOW(K_ALL, fstat),
	ALLOW(K_ALL, newfstatat),
	ALLOW(K_ALL, lseek),
	{ K_ALL, { __NR_mprotect, RULE_ARG_CLEAR, 2, PROT_EXEC, { 0 }, 0 } },
	{ K_ALL, { __NR_prctl, RULE_ARG_IN, 0, 0,
		   { PR_SET_NAME, PR_GET_NAME, PR_SET_NO_NEW_PRIVS, PR_GET_NO_NEW_PRIVS,
		     PR_GET_DUMPABLE }, 5 } },
	{ K_ALL, { __NR_tgkill, RULE_SELF_PID, 0, 0, { 0 }, 0 } },
	{ K_ALL, { __NR_ioctl, RULE_IOCTL, 1, 0, { 0 }, 0 } },

	ALLOW(K_MAIN | K_CONTROL | K_QUEUE | K_VCPU, ppoll),
#ifdef __NR_poll
	ALLOW(K_MAIN | K_CONTROL | K_QUEUE | K_VCPU, poll),
#endif
	/* Console output to a socket (MSG_DONTWAIT: vmm/console_out.c). */
	ALLOW(K_CONTROL, sendto),
	ALLOW(K_MAIN, fcntl),           /* the images' OFD locks at close */
	ALLOW(K_MAIN, fsync),
	ALLOW(K_MAIN, fdatasync),

	ALLOW(K_VCPU | K_QUEUE, io_uring_enter),
	/* A queue thread whose poll stalled asks whether it lost its CPU
	 * (devices/virtq_worker.c: vqw_poll_gap): its own counters only. */
	{ K_VCPU | K_QUEUE, { __NR_getrusage, RULE_ARG_IN, 0, 0, { RUSAGE_THREAD }, 1 } },
	ALLOW(K_VCPU, io_uring_setup),
	ALLOW(K_VCPU, eventfd2),
	{ K_VCPU, { __NR_io_uring_register, RULE_ARG_IN, 1, 0,
		    { IORING_REGISTER_FILES, IORING_UNREGISTER_FILES,
		      IORING_REGISTER_RESTRICTIONS, IORING_REGISTER_ENABLE_RINGS,
		      IORING_REGISTER_BUFFERS, IORING_UNREGISTER_BUFFERS }, 6 } },
	{ K_MAIN | K_CONTROL, { __NR_io_uring_register, RULE_ARG_IN, 1, 0,
				{ IORING_UNREGISTER_FILES, IORING_UNREGISTER_BUFFERS }, 2 } },
	/* A worker registers guest RAM with its own ring (fixed-buffers=on)
	 * once before it serves, and drops its files and buffers as it ends:
	 * only the ring's one submitter may (devices/virtq_worker.c:
	 * register_mem, release_registered). Its vCPU's filter, which it
	 * inherits, allows these too. */
	{ K_QUEUE, { __NR_io_uring_register, RULE_ARG_IN, 1, 0,
		     { IORING_REGISTER_BUFFERS, IORING_UNREGISTER_FILES,
		       IORING_UNREGISTER_BUFFERS }, 3 } },
	/* A queue thread adds its own filter: only ever narrower. */
	{ K_VCPU, { __NR_seccomp, RULE_ARG_IN, 0, 0, { SECCOMP_SET_MODE_FILTER }, 1 } },
#ifdef __NR_clone3
	/* clone3's flags are in memory, out of the filter's reach: glibc
	 * falls back to clone, whose flags must make a thread, not a process. */
	{ K_VCPU, { __NR_clone3, RULE_ENOSYS, 0, 0, { 0 }, 0 } },
#endif
};

/* Generic ioctls by kind (the architecture adds its own). */
static const unsigned long ioctls_vcpu[] = {
	KVM_RUN, KVM_IRQ_LINE, KVM_IRQFD, KVM_IOEVENTFD, KVM_SET_GSI_ROUTING, 0
};
static const unsigned long ioctls_queue[] = { 0 };
static const unsigned long ioctls_control[] = {
	/* console input raises the UART's line; device teardown */
	KVM_IRQ_LINE, KVM_IRQFD, KVM_IOEVENTFD, KVM_SET_GSI_ROUTING, 0
};
static const unsigned long ioctls_main[] = {
	/* device teardown; the terminal's mode restored at exit */
	KVM_IRQFD, KVM_IOEVENTFD, KVM_SET_GSI_ROUTING, KVM_SET_USER_MEMORY_REGION,
	TCGETS, TCSETS, TCSETSW, TCSETSF, 0
};
static const unsigned long *const generic_ioctls[SANDBOX_KINDS] = {
	[SANDBOX_MAIN] = ioctls_main, [SANDBOX_CONTROL] = ioctls_control,
	[SANDBOX_VCPU] = ioctls_vcpu, [SANDBOX_QUEUE] = ioctls_queue,
};

struct prog {
	struct sock_filter *insn;
	unsigned n, cap;
	bool overflow;
};

static void emit(struct prog *p, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k)
{
	if (p->n >= p->cap) {
		p->overflow = true;
		return;
	}
	p->insn[p->n++] = (struct sock_filter)BPF_JUMP(code, k, jt, jf);
}

#define RET(p, v) emit(p, BPF_RET | BPF_K, 0, 0, v)
#define RET_ALLOW(p) RET(p, SECCOMP_RET_ALLOW)
#define RET_KILL(p) RET(p, SECCOMP_RET_KILL_PROCESS)

/* Offset of the low 32 bits of args[i] in struct seccomp_data. */
static uint32_t arg_lo(int i)
{
	static const union { uint16_t u; uint8_t b[2]; } one = { .u = 1 };

	return (uint32_t)(offsetof(struct seccomp_data, args) + 8 * (unsigned)i +
			  (one.b[0] ? 0 : 4));
}

static unsigned count_ioctls(const unsigned long *l)
{
	unsigned n = 0;

	while (l && l[n])
		n++;
	return n;
}

static void emit_ioctls(struct prog *p, const unsigned long *l)
{
	unsigned i, n = count_ioctls(l);

	for (i = 0; i < n; i++)
		emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, (uint32_t)l[i]), RET_ALLOW(p);
}

/* The block of one rule, after its "jeq nr" (which skips it). */
static void emit_block(struct prog *p, const struct rule *r, enum sandbox_kind kind)
{
	unsigned i;

	switch (r->kind) {
	case RULE_ALLOW:
		RET_ALLOW(p);
		return;
	case RULE_ENOSYS:
		RET(p, SECCOMP_RET_ERRNO | ENOSYS);
		return;
	case RULE_IOCTL:
		emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, arg_lo(r->arg));
		emit_ioctls(p, generic_ioctls[kind]);
		emit_ioctls(p, arch_sandbox.ioctls[kind]);
		RET_KILL(p);
		return;
	case RULE_SELF_PID:
		emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, arg_lo(r->arg));
		emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, (uint32_t)getpid());
		RET_ALLOW(p);
		RET_KILL(p);
		return;
	case RULE_ARG_IN:
		emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, arg_lo(r->arg));
		for (i = 0; i < r->nvals; i++)
			emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, r->vals[i]), RET_ALLOW(p);
		RET_KILL(p);
		return;
	case RULE_ARG_CLEAR:
	case RULE_ARG_SET:
		if (r->arg < 0) {
			/* Not in a register on this architecture: unchecked. */
			RET_ALLOW(p);
			return;
		}
		emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, arg_lo(r->arg));
		emit(p, BPF_ALU | BPF_AND | BPF_K, 0, 0, r->mask);
		emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, r->kind == RULE_ARG_CLEAR ? 0 : r->mask);
		RET_ALLOW(p);
		RET_KILL(p);
		return;
	}
}

static void emit_rule(struct prog *p, const struct rule *r, enum sandbox_kind kind)
{
	unsigned start, len;

	emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, (uint32_t)r->nr);
	start = p->n;
	emit_block(p, r, kind);
	len = p->n - start;
	if (p->overflow)
		return;
	if (len > 255) {
		p->overflow = true;     /* a block too long for a jump over it */
		return;
	}
	p->insn[start - 1].jf = (uint8_t)len;
}

int sandbox_build(enum sandbox_kind kind, struct sock_filter *insn, unsigned cap)
{
	struct prog p = { .insn = insn, .cap = cap };
	struct rule mmap_rule = {
		.nr = __NR_mmap, .kind = RULE_ARG_CLEAR, .arg = arch_sandbox.mmap_prot_arg,
		.mask = PROT_EXEC,
	};
	struct rule clone_rule = {
		.nr = __NR_clone, .kind = RULE_ARG_SET, .arg = arch_sandbox.clone_flags_arg,
		.mask = CLONE_THREAD_FLAGS,
	};
	unsigned i, bit;

	if ((unsigned)kind >= SANDBOX_KINDS)
		return -EINVAL;
	bit = 1u << kind;
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
		emit_rule(&p, &generic[i].r, kind);
	}
	emit_rule(&p, &mmap_rule, kind);
	if (kind == SANDBOX_VCPU)
		emit_rule(&p, &clone_rule, kind);
	RET_KILL(&p);
	return p.overflow ? -ENOSPC : (int)p.n;
}

int sandbox_enter(enum sandbox_kind kind)
{
	struct sock_filter insn[SANDBOX_MAX_INSNS];
	struct sock_fprog fprog;
	int n = sandbox_build(kind, insn, ARRAY_SIZE(insn));

	if (n < 0)
		return n;
	fprog = (struct sock_fprog){ .len = (unsigned short)n, .filter = insn };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	/* No TSYNC: this thread only (and the threads it creates). */
	if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog))
		return -errno;
	return 0;
}
