#include "vmm/kvm/vcpu.h"
#include "vmm/base/json.h"
#include "vmm/kvm/sandbox.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/kvm_probe.h"
#include "vmm/base/util.h"
#include "arch/arch.h"

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *const vcpu_exit_names[VCPU_EXIT_KINDS] = {
	"io", "mmio", "intr", "hlt", "shutdown", "system_event", "other", "arch",
};

static const char *vcpu_internal_suberror(uint32_t s)
{
	switch (s) {
	case KVM_INTERNAL_ERROR_EMULATION: return "instruction emulation failed";
	case KVM_INTERNAL_ERROR_SIMUL_EX: return "exception while delivering an exception";
	case KVM_INTERNAL_ERROR_DELIVERY_EV: return "exception during event delivery";
	default: return "unknown suberror";
	}
}

void vcpu_describe_exit(const struct kvm_run *run, char *out, size_t outlen)
{
	switch (run->exit_reason) {
	case KVM_EXIT_INTERNAL_ERROR:
		snprintf(out, outlen, "KVM_EXIT_INTERNAL_ERROR, suberror %u (%s)",
			 run->internal.suberror, vcpu_internal_suberror(run->internal.suberror));
		break;
	case KVM_EXIT_FAIL_ENTRY:
		snprintf(out, outlen, "KVM_EXIT_FAIL_ENTRY, hardware entry failure reason %#llx "
			 "(the guest's CPU state is invalid)",
			 (unsigned long long)run->fail_entry.hardware_entry_failure_reason);
		break;
	case KVM_EXIT_SHUTDOWN:
		snprintf(out, outlen, "KVM_EXIT_SHUTDOWN (triple fault)");
		break;
	case KVM_EXIT_HLT:
		snprintf(out, outlen, "KVM_EXIT_HLT (halted with no in-kernel LAPIC)");
		break;
	case KVM_EXIT_IO:
		snprintf(out, outlen, "KVM_EXIT_IO, port %#x", run->io.port);
		break;
	case KVM_EXIT_MMIO:
		snprintf(out, outlen, "KVM_EXIT_MMIO, address %#llx",
			 (unsigned long long)run->mmio.phys_addr);
		break;
	default:
		snprintf(out, outlen, "unhandled KVM exit reason %u", run->exit_reason);
		break;
	}
}

/* A vCPU exit mvm cannot handle: say what, and where the guest was (mode,
 * RIP, the instruction bytes), and on a PVM host why it is not the guest's
 * fault. Status 126. */
static int vcpu_fatal(struct vcpu *v, struct kvm_run *run)
{
	char what[160], where[256];

	v->exits[VCPU_EXIT_OTHER]++;
	vcpu_describe_exit(run, what, sizeof(what));
	arch_describe_vcpu(v, run, where, sizeof(where));
	snprintf(v->fatal, sizeof(v->fatal), "vCPU %u: %s; %s", v->id, what, where);
	log_err(&v->vm->log, "%s", v->fatal);
	if (v->vm->host_pvm)
		log_err(&v->vm->log, "this host's KVM is PVM (kvm_pvm), which cannot run unmodified "
			"guests; run mvm under the nested harness instead: MVM_KVM=nested "
			"tests/with-kvm ./mvm ...");
	return MVM_EXIT_UNHANDLED;
}

enum vm_stop_reason vcpu_stop_reason(int status)
{
	switch (status) {
	case MVM_EXIT_OK: return VM_STOP_POWEROFF;
	case MVM_EXIT_CRASHED: return VM_STOP_GUEST_CRASH;
	case MVM_EXIT_PANICKED: return VM_STOP_GUEST_PANIC;
	case MVM_EXIT_INTERNAL: return VM_STOP_HOST_ERROR;
	default: return VM_STOP_GUEST_ERROR;
	}
}

int vcpu_handle_exit(struct vcpu *v, struct kvm_run *run)
{
	struct vm *vm = v->vm;

	switch (run->exit_reason) {
	case KVM_EXIT_IO: {
		uint8_t *p = (uint8_t *)run + run->io.data_offset;
		uint32_t i;

		v->exits[VCPU_EXIT_IO]++;
		/* String I/O (rep ins/outs) arrives as count elements. */
		for (i = 0; i < run->io.count; i++, p += run->io.size)
			iobus_access(&vm->pio, run->io.port, p, run->io.size,
				     run->io.direction == KVM_EXIT_IO_OUT);
		return -1;
	}
	case KVM_EXIT_MMIO:
		v->exits[VCPU_EXIT_MMIO]++;
		/* Unclaimed MMIO is not fatal: reads see all-ones. */
		if (run->mmio.len <= sizeof(run->mmio.data))
			iobus_access(&vm->mmio, run->mmio.phys_addr, run->mmio.data,
				     run->mmio.len, run->mmio.is_write);
		return -1;
	case KVM_EXIT_INTR:
		v->exits[VCPU_EXIT_INTR]++;
		return -1;
	case KVM_EXIT_HLT:
		/* Only without an in-kernel LAPIC; a halted CPU with no way to
		 * wake it up is a powered-off machine. */
		v->exits[VCPU_EXIT_HLT]++;
		return MVM_EXIT_OK;
	case KVM_EXIT_SHUTDOWN: {
		/* Triple fault. mvm's guests reboot through the i8042 (reboot=k
		 * in the base command line), so this is a kernel that crashed
		 * (before it had a console, or with reboot=t asked for it): a
		 * crash, never a success. Where it was, as for a fatal exit;
		 * KVM on AMD re-initialises a vCPU that shut down, and then
		 * the description says it stands at the reset vector. */
		char where[320];

		v->exits[VCPU_EXIT_SHUTDOWN]++;
		arch_describe_vcpu(v, run, where, sizeof(where));
		snprintf(v->fatal, sizeof(v->fatal), "vCPU %u: the guest triple-faulted (it "
			 "crashed); %s", v->id, where);
		log_err(&vm->log, "%s", v->fatal);
		return MVM_EXIT_CRASHED;
	}
	case KVM_EXIT_SYSTEM_EVENT:
		v->exits[VCPU_EXIT_SYSTEM_EVENT]++;
		if (run->system_event.type == KVM_SYSTEM_EVENT_RESET)
			vm_request_reboot(vm);  /* before the vCPU's own stop: says why */
		if (run->system_event.type == KVM_SYSTEM_EVENT_SHUTDOWN ||
		    run->system_event.type == KVM_SYSTEM_EVENT_RESET)
			return MVM_EXIT_OK;
		if (run->system_event.type == KVM_SYSTEM_EVENT_CRASH) {
			/* The guest's own report of a panic (x86: the Hyper-V
			 * crash MSRs), as pvpanic's. */
			snprintf(v->fatal, sizeof(v->fatal), "vCPU %u: the guest reported a "
				 "crash (KVM_SYSTEM_EVENT_CRASH): its kernel panicked", v->id);
			log_err(&vm->log, "%s", v->fatal);
			return MVM_EXIT_PANICKED;
		}
		snprintf(v->fatal, sizeof(v->fatal), "vCPU %u: guest system event %u; "
			 "stopping", v->id, run->system_event.type);
		log_err(&vm->log, "%s", v->fatal);
		return MVM_EXIT_UNHANDLED;
	default: {
		/* The architecture's own exits (s390 intercepts); then
		 * KVM_EXIT_INTERNAL_ERROR, KVM_EXIT_FAIL_ENTRY, the unknown. */
		int st = arch_vcpu_exit(v, run);

		if (st == ARCH_EXIT_UNKNOWN)
			return vcpu_fatal(v, run);
		v->exits[VCPU_EXIT_ARCH]++;
		return st;
	}
	}
}

int vcpu_create(struct vcpu *v, struct vm *vm, unsigned id)
{
	struct kvm_state *ks = vm_kvm(vm);
	int ret;

	memset(v, 0, sizeof(*v));
	v->vm = vm;
	v->id = id;
	v->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)id);
	if (v->fd < 0)
		return -errno;
	if (ks->vcpu_fd_lo < 0 || v->fd < ks->vcpu_fd_lo)
		ks->vcpu_fd_lo = v->fd;
	if (v->fd > ks->vcpu_fd_hi)
		ks->vcpu_fd_hi = v->fd;
	v->run_size = ks->vcpu_mmap_size;
	v->run = mmap(NULL, v->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	if (v->run == MAP_FAILED) {
		ret = -errno;
		close(v->fd);
		v->fd = -1;
		v->run = NULL;
		return ret;
	}
	return 0;
}

void vcpu_destroy(struct vcpu *v)
{
	if (v->run)
		munmap(v->run, v->run_size);
	if (v->fd >= 0)
		close(v->fd);
	v->run = NULL;
	v->fd = -1;
}

static void vcpu_kick_handler(int sig)
{
	(void)sig;
}

/* The kick handler is process-wide by nature: every VM of the process
 * that kicks with a signal holds a reference to its handler there, and
 * the last one gives the signal back to the disposition it found. */
static struct {
	pthread_mutex_t lock;
	unsigned refs[_NSIG];
	struct sigaction old[_NSIG];
} vcpu_sig = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Signals the kernel sends for a thread's own faults (and the ones a
 * process must keep): a no-op handler there would turn a crash into a
 * loop, or a child's end into nothing. */
bool vcpu_signal_reserved(int sig)
{
	switch (sig) {
	case SIGSEGV: case SIGBUS: case SIGFPE: case SIGILL: case SIGTRAP: case SIGABRT:
	case SIGSYS: case SIGCHLD: case SIGKILL: case SIGSTOP: case SIGPIPE: case SIGXFSZ:
	case SIGXCPU:
		return true;
	}
	return false;
}

int vcpu_signal_get(int sig)
{
	struct sigaction sa, old;
	int r = 0;

	if (sig <= 0 || sig >= _NSIG || sig > SIGRTMAX || vcpu_signal_reserved(sig))
		return -EINVAL;
	pthread_mutex_lock(&vcpu_sig.lock);
	if (vcpu_sig.refs[sig]) {
		vcpu_sig.refs[sig]++;
		goto unlock;
	}
	if (sigaction(sig, NULL, &old)) {
		r = -errno;
		goto unlock;
	}
	/* A handler the process installed itself is its own: not taken. */
	if ((old.sa_flags & SA_SIGINFO) ||
	    (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)) {
		r = -EBUSY;
		goto unlock;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = vcpu_kick_handler;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: KVM_RUN must return EINTR. */
	if (sigaction(sig, &sa, NULL)) {
		r = -errno;
		goto unlock;
	}
	vcpu_sig.old[sig] = old;
	vcpu_sig.refs[sig] = 1;
unlock:
	pthread_mutex_unlock(&vcpu_sig.lock);
	return r;
}

void vcpu_signal_put(int sig)
{
	if (sig <= 0 || sig >= _NSIG)
		return;
	pthread_mutex_lock(&vcpu_sig.lock);
	if (vcpu_sig.refs[sig] && !--vcpu_sig.refs[sig])
		sigaction(sig, &vcpu_sig.old[sig], NULL);
	pthread_mutex_unlock(&vcpu_sig.lock);
}

static bool vcpu_stopping(const struct vcpu *v)
{
	return atomic_load(&vm_kvm(v->vm)->stopping);
}

void vcpu_thread_enter(struct vcpu *v)
{
	/* For vcpu_kick. seq_cst, as its store of immediate_exit: either it
	 * sees this tid, or this thread's KVM_RUN sees immediate_exit. */
	__atomic_store_n(&v->tid, (int)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
}

void vcpu_thread_leave(struct vcpu *v)
{
	/* No kick for a thread that is gone (its tid may be reused). */
	__atomic_store_n(&v->tid, 0, __ATOMIC_SEQ_CST);
}

/* A pause: wait, out of KVM_RUN, until it ends or the VM stops. */
static void vcpu_park(struct vcpu *v)
{
	struct kvm_state *ks = vm_kvm(v->vm);

	/* KVM's API (KVM_RUN, "immediate_exit"): the port or MMIO access
	 * handled last is complete, and the registers say so, only after
	 * one more KVM_RUN, which with immediate_exit set runs no guest
	 * instruction and returns EINTR. A snapshot then reads registers
	 * that need nothing of this process's kvm_run. */
	if (v->exit_pending) {
		__atomic_store_n(&v->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
		/* EINTR; a failure shows again at the next KVM_RUN. */
		(void)ioctl(v->fd, KVM_RUN, 0);
		v->exit_pending = false;
	}
	arch_vcpu_paused(v);
	pthread_mutex_lock(&ks->pause_lock);
	ks->parked++;
	pthread_cond_broadcast(&ks->pause_cond);
	while (atomic_load(&ks->pause_req) && !vcpu_stopping(v))
		pthread_cond_wait(&ks->pause_cond, &ks->pause_lock);
	ks->parked--;
	pthread_mutex_unlock(&ks->pause_lock);
	/* The pause's kick set immediate_exit. Cleared before the loop looks
	 * at `stopping` again, both seq_cst as in vcpu_kick: a stop's kick
	 * that stores after this clear is seen by KVM_RUN, one before it
	 * came after its `stopping`, which the loop then sees. */
	__atomic_store_n(&v->run->immediate_exit, 0, __ATOMIC_SEQ_CST);
}

/* Out of KVM_RUN by a kick (EINTR), with no exit pending. The kick set
 * immediate_exit: cleared as a pause's is (vcpu_park), before the loop
 * looks at `stopping` and `pause_req` again (a stop's or a pause's kick
 * stored after the clear is seen by KVM_RUN, one stored before it came
 * after its flag, which the loop then sees), so that a halt probe's kick
 * leaves nothing behind. Then the probe's round, if one is new, is
 * answered. */
static void vcpu_kicked(struct vcpu *v)
{
	unsigned seq;

	__atomic_store_n(&v->run->immediate_exit, 0, __ATOMIC_SEQ_CST);
	seq = atomic_load(&vm_kvm(v->vm)->probe_seq);
	if (seq == atomic_load(&v->probe_seen))
		return;
	atomic_store(&v->probe_stopped, arch_vcpu_stopped(v));
	/* Pairs with vcpu_probe_stopped's load of probe_seen (seq_cst):
	 * the answer is there before the round says answered. */
	atomic_store(&v->probe_seen, seq);
}

bool vcpu_probe_stopped(struct vcpu *vcpus, unsigned n)
{
	struct kvm_state *ks;
	unsigned seq, i;
	bool all;

	if (!n || !arch_halt_probe())
		return false;
	ks = vm_kvm(vcpus[0].vm);
	seq = atomic_load(&ks->probe_seq);
	all = seq != 0;
	for (i = 0; i < n && all; i++)
		all = atomic_load(&vcpus[i].probe_seen) == seq &&
		      atomic_load(&vcpus[i].probe_stopped);
	atomic_store(&ks->probe_seq, seq + 1);
	for (i = 0; i < n; i++)
		vcpu_kick(&vcpus[i]);
	return all;
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	struct kvm_state *ks = vm_kvm(v->vm);
	char name[16];
	int st;

	/* "vcpuN", as Cloud Hypervisor names them: tools that look for
	 * ^vcpu[0-9]+$ find them; mvm_get_threads says which VM's. */
	snprintf(name, sizeof(name), "vcpu%u", v->id);
	thread_begin(&v->hs, name);
	vcpu_thread_enter(v);
	/* Before the guest's first instruction: from here on, everything this
	 * thread does on the guest's behalf is inside the filter. */
	if (v->vm->sandbox) {
		struct sandbox_fds fds = SANDBOX_NO_FDS;

		fds.vm = v->vm->vm_fd;
		fds.vcpu = v->fd;
		fds.vcpu_lo = ks->vcpu_fd_lo;
		fds.vcpu_hi = ks->vcpu_fd_hi;
		st = sandbox_enter(SANDBOX_VCPU, &fds);
		if (st) {
			snprintf(v->fatal, sizeof(v->fatal), "vCPU %u: cannot enter its seccomp "
				 "filter: %s; run with --sandbox=off to go without", v->id,
				 strerror(-st));
			vcpu_thread_leave(v);
			thread_ready(&v->hs, st);
			return NULL;
		}
	}
	thread_ready(&v->hs, 0);
	/* The guest runs once every thread of the VM is confined
	 * (mvm_start: vm_open_gate). */
	while (sem_wait(&ks->gate) && errno == EINTR)
		;
	if (v->id == 0)
		__atomic_store_n(&v->vm->first_run_ns, mono_ns(), __ATOMIC_RELAXED);
	while (!vcpu_stopping(v)) {
		if (atomic_load(&ks->pause_req)) {
			vcpu_park(v);
			continue;
		}
		st = arch_vcpu_before_run(v);
		if (st > 0)
			break;
		if (st < 0)
			continue;
		if (ioctl(v->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN) {
				v->exit_pending = false;
				v->exits[VCPU_EXIT_INTR]++;
				vcpu_kicked(v);
				continue;
			}
			snprintf(v->fatal, sizeof(v->fatal), "vCPU %u: KVM_RUN: %s", v->id,
				 strerror(errno));
			log_err(&v->vm->log, "%s", v->fatal);
			vm_request_stop(v->vm, VM_STOP_HOST_ERROR, MVM_EXIT_INTERNAL, v->fatal);
			break;
		}
		v->exit_pending = true;
		st = vcpu_handle_exit(v, v->run);
		if (st >= 0) {
			vm_request_stop(v->vm, vcpu_stop_reason(st), st,
					v->fatal[0] ? v->fatal : NULL);
			break;
		}
	}
	vcpu_thread_leave(v);
	return NULL;
}

int vcpu_start(struct vcpu *v)
{
	int ret = thread_start_sync(&v->thread, vcpu_thread, v, &v->hs);

	if (ret)
		return ret;
	v->started = true;
	return 0;
}

void vcpu_kick(struct vcpu *v)
{
	int tid;

	if (!v->started)
		return;
	/* immediate_exit covers a kick that lands just before KVM_RUN is
	 * entered; the signal covers a vCPU already inside the guest. */
	__atomic_store_n(&v->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	/* tgkill with our own pid, the only signal call the sandbox allows:
	 * musl's pthread_kill is tkill, which could reach any process's
	 * thread, so the filter kills mvm for it (static build, a vCPU still
	 * in the guest at stop: seen as status 159). tid 0: the thread has
	 * not stored it yet (its KVM_RUN then sees immediate_exit) or has
	 * returned. */
	tid = __atomic_load_n(&v->tid, __ATOMIC_SEQ_CST);
	if (tid)
		syscall(SYS_tgkill, getpid(), tid, v->vm->kick_signal);
}

int vcpu_pause_all(struct vcpu *vcpus, unsigned n, uint64_t deadline_ns)
{
	struct kvm_state *ks;
	struct timespec ts;
	unsigned i;
	int r = 0, e;

	if (!n)
		return 0;
	ks = vm_kvm(vcpus[0].vm);
	atomic_store(&ks->pause_req, true);
	for (i = 0; i < n; i++)
		vcpu_kick(&vcpus[i]);
	ts = mono_timespec(deadline_ns);
	pthread_mutex_lock(&ks->pause_lock);
	while (ks->parked < n) {
		if (atomic_load(&ks->stopping)) {
			r = -ESHUTDOWN;
			break;
		}
		e = pthread_cond_timedwait(&ks->pause_cond, &ks->pause_lock, &ts);
		if (e == ETIMEDOUT && ks->parked < n) {
			r = -ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&ks->pause_lock);
	if (r)
		vcpu_resume_all(vcpus[0].vm);
	return r;
}

void vcpu_pause_request(struct vm *vm)
{
	atomic_store(&vm_kvm(vm)->pause_req, true);
}

void vcpu_resume_all(struct vm *vm)
{
	struct kvm_state *ks = vm_kvm(vm);

	pthread_mutex_lock(&ks->pause_lock);
	atomic_store(&ks->pause_req, false);
	pthread_cond_broadcast(&ks->pause_cond);
	pthread_mutex_unlock(&ks->pause_lock);
}

void vcpu_pause_wake(struct vm *vm)
{
	struct kvm_state *ks = vm_kvm(vm);

	pthread_mutex_lock(&ks->pause_lock);
	pthread_cond_broadcast(&ks->pause_cond);
	pthread_mutex_unlock(&ks->pause_lock);
}

void vcpu_join(struct vcpu *v)
{
	if (!v->started)
		return;
	pthread_join(v->thread, NULL);
	v->started = false;
}

void vcpu_stats_json(const struct vcpu *v, struct json *j)
{
	unsigned i;

	json_obj_begin(j, NULL);
	json_u64(j, "id", v->id);
	json_obj_begin(j, "exits");
	for (i = 0; i < VCPU_EXIT_KINDS; i++)
		json_u64(j, vcpu_exit_names[i], v->exits[i]);
	json_obj_end(j);
	json_obj_end(j);
}
