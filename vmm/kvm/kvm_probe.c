/* The behavioural KVM probe and the direct-or-nested decision: see
 * kvm_probe.h. */
#include "vmm/kvm/kvm_probe.h"
#include "vmm/kvm/kvm.h"
#include "vmm/base/util.h"
#include "arch/arch.h"
#include "vmm/kvm/vcpu.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <pthread.h>
#include <poll.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bump when the probe's VM or vCPU setup changes in a way that could change
 * a verdict (the payload's own bytes are hashed into the key anyway). */
#define KVM_PROBE_VERSION 1


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
			 (unsigned long long)arch_probe_hash(), (unsigned long long)st.st_ino,
			 (long long)st.st_ctim.tv_sec, (long)st.st_ctim.tv_nsec);
	else
		snprintf(out, outlen, "p%d-%016llx-nokvm", KVM_PROBE_VERSION,
			 (unsigned long long)arch_probe_hash());
}

struct probe_thread {
	struct vcpu *v;
	void (*fn)(void *arg);
	void *arg;
	int done_efd;
};

static void *probe_thread_main(void *p)
{
	struct probe_thread *t = p;

	vcpu_thread_enter(t->v);
	t->fn(t->arg);
	vcpu_thread_leave(t->v);
	if (eventfd_write(t->done_efd, 1) < 0) {
		/* cannot fail on a fresh eventfd; the caller's poll times out */
	}
	return NULL;
}

int kvm_probe_vcpu_thread(struct vcpu *v, unsigned timeout_ms, int kick_signal,
			  void (*fn)(void *arg), void *arg, atomic_bool *timed_out,
			  char *reason, size_t len)
{
	struct probe_thread t = { v, fn, arg, -1 };
	struct pollfd p;
	int ret;

	t.done_efd = eventfd(0, EFD_CLOEXEC);
	if (t.done_efd < 0) {
		ret = -errno;
		snprintf(reason, len, "eventfd: %s", strerror(errno));
		return ret;
	}
	/* The probe's thread is v's thread: vcpu_kick and vcpu_join serve it
	 * as they serve a running VM's, with the caller's signal. */
	v->vm->kick_signal = kick_signal;
	ret = thread_start(&v->thread, probe_thread_main, &t);
	if (ret) {
		snprintf(reason, len, "probe thread: %s", strerror(-ret));
		close(t.done_efd);
		return ret;
	}
	v->started = true;
	p = (struct pollfd){ .fd = t.done_efd, .events = POLLIN };
	while ((ret = poll(&p, 1, (int)timeout_ms)) < 0 && errno == EINTR)
		;
	if (ret <= 0) {
		atomic_store(timed_out, true);
		vcpu_kick(v);
	}
	vcpu_join(v);
	close(t.done_efd);
	return 0;
}

struct probe_verdict {
	struct kvm_probe_run *r;
	void (*fn)(struct kvm_probe_run *r);
};

static void probe_verdict_run(void *arg)
{
	struct probe_verdict *p = arg;

	p->fn(p->r);
}

int kvm_probe_vcpu_verdict(struct kvm_probe_run *r, struct vcpu *v, unsigned timeout_ms,
			   int kick_signal, void (*fn)(struct kvm_probe_run *r),
			   struct kvm_probe_result *res)
{
	struct probe_verdict p = { r, fn };
	int ret;

	r->v = v;
	r->timeout_ms = timeout_ms;
	atomic_init(&r->timed_out, false);
	r->ok = false;
	r->why[0] = '\0';
	ret = kvm_probe_vcpu_thread(v, timeout_ms, kick_signal, probe_verdict_run, &p,
				    &r->timed_out, res->reason, sizeof(res->reason));
	if (ret)
		return ret;
	if (r->ok)
		res->verdict = KVM_VERDICT_RUNS;
	snprintf(res->reason, sizeof(res->reason), "%s", r->why);
	return 0;
}

bool kvm_probe_vm(struct vm *vm, uint64_t mem, struct kvm_probe_result *res)
{
	char err[KVM_REASON_MAX / 2];
	int kvm_fd;

	memset(res, 0, sizeof(*res));
	res->verdict = KVM_VERDICT_FAILS;
	kvm_fd = kvm_open(err, sizeof(err));
	if (kvm_fd < 0) {
		res->verdict = KVM_VERDICT_ABSENT;
		snprintf(res->reason, sizeof(res->reason), "%s", err);
		return false;
	}
	/* kvm_vm_create takes kvm_fd over, also on failure. */
	if (kvm_vm_create(vm, kvm_fd, mem, 1, -1, false, err, sizeof(err))) {
		snprintf(res->reason, sizeof(res->reason), "cannot create a VM: %s", err);
		return false;
	}
	return true;
}
