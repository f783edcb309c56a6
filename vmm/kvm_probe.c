/* The behavioural KVM probe and the direct-or-nested decision: see
 * kvm_probe.h. */
#include "vmm/kvm_probe.h"
#include "vmm/kvm.h"
#include "vmm/util.h"
#include "vmm/vcpu.h"
#include "arch/x86/diag.h"
#include "arch/x86/probe.h"
#include "arch/x86/x86.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Bump when the probe's VM or vCPU setup changes in a way that could change
 * a verdict (the payload's own bytes are hashed into the key anyway). */
#define KVM_PROBE_VERSION 1

/* The vCPU thread's state; the caller reads it after joining. */
struct probe_run {
	struct vm *vm;
	struct vcpu *v;
	int done_efd;
	atomic_bool timed_out;
	unsigned timeout_ms;
	unsigned step;          /* last step the payload reported */
	bool done;              /* X86_PROBE_DONE seen */
	char fail[KVM_REASON_MAX];
};

/* r->fail = "step N (what it checks): detail". */
static void probe_fail_step(struct probe_run *r, const char *detail)
{
	if (r->step)
		snprintf(r->fail, sizeof(r->fail), "step %u (%s): %.600s", r->step,
			 x86_probe_step_name(r->step), detail);
	else
		snprintf(r->fail, sizeof(r->fail), "before the first instruction: %.600s", detail);
}

static void *probe_thread(void *arg)
{
	struct probe_run *r = arg;
	struct kvm_run *run = r->v->run;
	char exit_desc[160], where[256], both[sizeof(exit_desc) + sizeof(where) + 2];
	uint64_t one = 1;

	for (;;) {
		if (ioctl(r->v->fd, KVM_RUN, 0) < 0) {
			if ((errno == EINTR || errno == EAGAIN) && !atomic_load(&r->timed_out))
				continue;
			if (atomic_load(&r->timed_out)) {
				snprintf(exit_desc, sizeof(exit_desc), "did not finish within %u ms",
					 r->timeout_ms);
			} else {
				snprintf(exit_desc, sizeof(exit_desc), "KVM_RUN failed: %s",
					 strerror(errno));
			}
			probe_fail_step(r, exit_desc);
			break;
		}
		if (run->exit_reason == KVM_EXIT_INTR)
			continue;
		if (run->exit_reason == KVM_EXIT_IO && run->io.port == X86_PROBE_PORT &&
		    run->io.direction == KVM_EXIT_IO_OUT && run->io.size == 1 &&
		    run->io.count == 1) {
			uint8_t b = *((uint8_t *)run + run->io.data_offset);

			if (b == X86_PROBE_DONE) {
				r->done = true;
				break;
			}
			if (b & X86_PROBE_WRONG) {
				r->step = b & ~X86_PROBE_WRONG;
				probe_fail_step(r, "the guest computed a wrong result");
				break;
			}
			r->step = b;
			continue;
		}
		/* Anything else is a failure of this KVM: say what and where. */
		vcpu_describe_exit(run, exit_desc, sizeof(exit_desc));
		x86_describe_vcpu(r->v->fd, &r->vm->mem, where, sizeof(where));
		snprintf(both, sizeof(both), "%s; %s", exit_desc, where);
		probe_fail_step(r, both);
		break;
	}
	if (write(r->done_efd, &one, sizeof(one)) < 0) {
		/* The caller's poll then times out and joins us anyway. */
	}
	return NULL;
}

static uint64_t probe_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int kvm_probe_run(unsigned timeout_ms, int kick_signal, struct kvm_probe_result *res)
{
	struct probe_run r;
	struct x86_boot_info info;
	struct vcpu v;
	struct vm vm;
	struct pollfd p;
	pthread_t thread;
	char err[KVM_REASON_MAX / 2], tested[96];
	uint64_t t0 = probe_now_us();
	int kvm_fd, ret;

	memset(res, 0, sizeof(*res));
	res->verdict = KVM_VERDICT_FAILS;
	kvm_fd = kvm_open(err, sizeof(err));
	if (kvm_fd < 0) {
		res->verdict = KVM_VERDICT_ABSENT;
		snprintf(res->reason, sizeof(res->reason), "%s", err);
		return 0;
	}
	/* kvm_vm_create takes kvm_fd over, also on failure. */
	ret = kvm_vm_create(&vm, kvm_fd, X86_PROBE_MEM, 1, err, sizeof(err));
	if (ret) {
		snprintf(res->reason, sizeof(res->reason), "cannot create a VM: %s", err);
		return 0;
	}
	ret = x86_probe_load(&vm.mem, &info);
	if (ret) {
		snprintf(res->reason, sizeof(res->reason), "cannot load the probe: %s",
			 strerror(-ret));
		goto fini_vm;
	}
	ret = vcpu_create(&v, &vm, 0);
	if (ret) {
		snprintf(res->reason, sizeof(res->reason), "KVM_CREATE_VCPU: %s", strerror(-ret));
		ret = 0;
		goto fini_vm;
	}
	ret = x86_vcpu_init(v.fd, 0, 1, vm_kvm(&vm)->cpuid, &info, err, sizeof(err));
	if (ret) {
		snprintf(res->reason, sizeof(res->reason), "vCPU setup failed: %s", err);
		ret = 0;
		goto destroy_vcpu;
	}
	memset(&r, 0, sizeof(r));
	r.vm = &vm;
	r.v = &v;
	r.timeout_ms = timeout_ms;
	atomic_init(&r.timed_out, false);
	r.done_efd = eventfd(0, EFD_CLOEXEC);
	if (r.done_efd < 0) {
		ret = -errno;
		snprintf(res->reason, sizeof(res->reason), "eventfd: %s", strerror(errno));
		goto destroy_vcpu;
	}
	ret = -pthread_create(&thread, NULL, probe_thread, &r);
	if (ret) {
		snprintf(res->reason, sizeof(res->reason), "probe thread: %s", strerror(-ret));
		goto close_efd;
	}
	p = (struct pollfd){ .fd = r.done_efd, .events = POLLIN };
	while ((ret = poll(&p, 1, (int)timeout_ms)) < 0 && errno == EINTR)
		;
	if (ret <= 0) {
		/* Out of KVM_RUN: immediate_exit covers a thread about to
		 * enter it, the signal one already inside (vcpu_kick). */
		atomic_store(&r.timed_out, true);
		__atomic_store_n(&v.run->immediate_exit, 1, __ATOMIC_SEQ_CST);
		pthread_kill(thread, kick_signal);
	}
	pthread_join(thread, NULL);
	ret = 0;
	if (r.done) {
		res->verdict = KVM_VERDICT_RUNS;
		x86_probe_tested(&vm.mem, tested, sizeof(tested));
		snprintf(res->reason, sizeof(res->reason),
			 "the probe guest ran 64-bit code with paging, string ops, CPUID and %s "
			 "(%llu us)", tested, (unsigned long long)(probe_now_us() - t0));
	} else {
		snprintf(res->reason, sizeof(res->reason), "%s", r.fail);
	}
close_efd:
	close(r.done_efd);
destroy_vcpu:
	vcpu_destroy(&v);
fini_vm:
	vm_fini(&vm);
	return ret;
}

bool kvm_host_is_pvm(const char *sysfs_root)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/module/kvm_pvm", sysfs_root);
	return access(path, F_OK) == 0;
}

int kvm_parse_override(const char *value, bool *forced, enum kvm_mode *mode)
{
	*forced = false;
	*mode = KVM_MODE_DIRECT;
	if (!value || !*value || !strcmp(value, "auto"))
		return 0;
	if (!strcmp(value, "direct") || !strcmp(value, "nested")) {
		*forced = true;
		*mode = value[0] == 'd' ? KVM_MODE_DIRECT : KVM_MODE_NESTED;
		return 0;
	}
	return -EINVAL;
}

static const char *const kvm_verdict_words[] = {
	[KVM_VERDICT_RUNS] = "runs",
	[KVM_VERDICT_FAILS] = "fails",
	[KVM_VERDICT_ABSENT] = "absent",
};

#define KVM_CACHE_MAGIC "mvm-kvm-verdict-1"

/* One line: magic, boot id, key, verdict word, reason; tab-separated. A
 * line that does not parse, or is for another boot or key, is a miss. */
static bool kvm_cache_read(const struct kvm_choice_env *env, struct kvm_probe_result *res)
{
	char line[KVM_REASON_MAX + 512], *f[5], *save = NULL, *s = line;
	FILE *fp = fopen(env->cache_path, "re");
	unsigned i;
	size_t n;

	if (!fp)
		return false;
	if (!fgets(line, sizeof(line), fp)) {
		fclose(fp);
		return false;
	}
	fclose(fp);
	n = strlen(line);
	if (!n || line[n - 1] != '\n')
		return false;
	line[n - 1] = '\0';
	for (i = 0; i < 5; i++, s = NULL) {
		f[i] = strtok_r(s, i < 4 ? "\t" : "", &save);
		if (!f[i])
			return false;
	}
	if (strcmp(f[0], KVM_CACHE_MAGIC) || strcmp(f[1], env->boot_id) || strcmp(f[2], env->key))
		return false;
	for (i = 0; i < ARRAY_SIZE(kvm_verdict_words); i++) {
		if (!strcmp(f[3], kvm_verdict_words[i])) {
			res->verdict = i;
			snprintf(res->reason, sizeof(res->reason), "%s", f[4]);
			return true;
		}
	}
	return false;
}

/* mkdir -p of path's parent directory. */
static void kvm_cache_mkdirs(const char *path)
{
	char dir[PATH_MAX], *p;

	snprintf(dir, sizeof(dir), "%s", path);
	p = strrchr(dir, '/');
	if (!p || p == dir)
		return;
	*p = '\0';
	for (p = dir + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			mkdir(dir, 0755);
			*p = '/';
		}
	}
	mkdir(dir, 0755);
}

/* Best effort: a read-only or missing home only costs a probe next time.
 * Written to a temporary file and renamed, so readers never see half. */
static void kvm_cache_write(const struct kvm_choice_env *env, const struct kvm_probe_result *res)
{
	char tmp[PATH_MAX], reason[KVM_REASON_MAX];
	FILE *fp;
	size_t i;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", env->cache_path,
			     (long)getpid()) >= sizeof(tmp))
		return;
	snprintf(reason, sizeof(reason), "%s", res->reason);
	for (i = 0; reason[i]; i++) {
		if (reason[i] == '\t' || reason[i] == '\n')
			reason[i] = ' ';
	}
	kvm_cache_mkdirs(env->cache_path);
	fp = fopen(tmp, "we");
	if (!fp)
		return;
	fprintf(fp, "%s\t%s\t%s\t%s\t%s\n", KVM_CACHE_MAGIC, env->boot_id, env->key,
		kvm_verdict_words[res->verdict], reason);
	if (fclose(fp) || rename(tmp, env->cache_path))
		unlink(tmp);
}

int kvm_choose(const struct kvm_choice_env *env, struct kvm_choice *out, char *err,
	       size_t errlen)
{
	struct kvm_probe_result res;
	bool cacheable = env->cache_path && env->boot_id && *env->boot_id && env->key &&
			 !strpbrk(env->boot_id, "\t\n") && !strpbrk(env->key, "\t\n");
	int ret;

	memset(out, 0, sizeof(*out));
	if (kvm_parse_override(env->override, &out->forced, &out->mode)) {
		snprintf(err, errlen, "MVM_KVM '%s': not a KVM mode; set it to direct, nested or "
			 "auto (the default)", env->override);
		return -EINVAL;
	}
	if (out->forced) {
		snprintf(out->why, sizeof(out->why), "MVM_KVM=%s", env->override);
		return 0;
	}
	memset(&res, 0, sizeof(res));
	if (cacheable && kvm_cache_read(env, &res)) {
		out->cached = true;
	} else {
		ret = env->probe(env->ctx, &res);
		if (ret && !res.reason[0])
			snprintf(res.reason, sizeof(res.reason), "the probe failed: %s",
				 strerror(-ret));
		/* A host failure says nothing about KVM: do not keep it. */
		if (cacheable && !ret)
			kvm_cache_write(env, &res);
	}
	out->verdict = res.verdict;
	out->mode = res.verdict == KVM_VERDICT_RUNS ? KVM_MODE_DIRECT : KVM_MODE_NESTED;
	snprintf(out->why, sizeof(out->why), "%s%s", res.reason,
		 out->cached ? " (verdict cached for this boot)" : "");
	return 0;
}

void kvm_probe_key(char *out, size_t outlen)
{
	struct stat st;

	if (stat("/dev/kvm", &st) == 0)
		snprintf(out, outlen, "p%d-%016llx-kvm%llu.%lld.%ld", KVM_PROBE_VERSION,
			 (unsigned long long)x86_probe_hash(), (unsigned long long)st.st_ino,
			 (long long)st.st_ctim.tv_sec, (long)st.st_ctim.tv_nsec);
	else
		snprintf(out, outlen, "p%d-%016llx-nokvm", KVM_PROBE_VERSION,
			 (unsigned long long)x86_probe_hash());
}
