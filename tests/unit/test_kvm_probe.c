/* Direct or nested (vmm/kvm/kvm_probe.c): the MVM_KVM override, probe verdicts,
 * the per-boot verdict cache and what invalidates it. The probe itself is
 * a fake here that counts its calls; the real one needs a KVM. */
#include "tests/unit/check.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/kvm_probe.h"
#include "vmm/kvm/vcpu.h"
#include "vmm/kvm/vm.h"

#include <errno.h>
#include <linux/kvm.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

struct fake_probe {
	unsigned calls;
	enum kvm_verdict verdict;
	const char *reason;
	int ret;
};

static int fake(void *ctx, struct kvm_probe_result *res)
{
	struct fake_probe *f = ctx;

	f->calls++;
	res->verdict = f->verdict;
	snprintf(res->reason, sizeof(res->reason), "%s", f->reason);
	return f->ret;
}

static char dir[64];
static char cache[128];

static void tmpdir_remove(void)
{
	char cmd[96];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

static void tmpdir(void)
{
	if (dir[0])
		tmpdir_remove();
	else
		atexit(tmpdir_remove);
	snprintf(dir, sizeof(dir), "/tmp/mvm-kvmprobe.XXXXXX");
	CHECK(mkdtemp(dir));
	/* A directory that does not exist yet: kvm_choose creates it. */
	snprintf(cache, sizeof(cache), "%s/cache/mvm/kvm-verdict", dir);
}

static struct kvm_choice_env env_for(struct fake_probe *f, const char *boot, const char *key)
{
	return (struct kvm_choice_env){
		.override = NULL, .cache_path = cache, .boot_id = boot, .key = key,
		.probe = fake, .ctx = f,
	};
}

static void choose(const struct kvm_choice_env *env, struct kvm_choice *c)
{
	char err[256];

	CHECK_EQ(kvm_choose(env, c, err, sizeof(err)), 0);
}

TEST(override_values)
{
	enum kvm_mode mode;
	bool forced;

	CHECK_EQ(kvm_parse_override(NULL, &forced, &mode), 0);
	CHECK(!forced);
	CHECK_EQ(kvm_parse_override("", &forced, &mode), 0);
	CHECK(!forced);
	CHECK_EQ(kvm_parse_override("auto", &forced, &mode), 0);
	CHECK(!forced);
	CHECK_EQ(kvm_parse_override("direct", &forced, &mode), 0);
	CHECK(forced);
	CHECK_EQ(mode, KVM_MODE_DIRECT);
	CHECK_EQ(kvm_parse_override("nested", &forced, &mode), 0);
	CHECK(forced);
	CHECK_EQ(mode, KVM_MODE_NESTED);
	CHECK_EQ(kvm_parse_override("Direct", &forced, &mode), -EINVAL);
	CHECK_EQ(kvm_parse_override("yes", &forced, &mode), -EINVAL);
}

TEST(bad_override_is_an_error_with_a_message)
{
	struct fake_probe f = { .verdict = KVM_VERDICT_RUNS, .reason = "ok" };
	struct kvm_choice_env env;
	struct kvm_choice c;
	char err[256];

	tmpdir();
	env = env_for(&f, "boot-a", "key-1");
	env.override = "kvm";
	CHECK_EQ(kvm_choose(&env, &c, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "MVM_KVM 'kvm'"));
	CHECK(strstr(err, "direct, nested or auto"));
	CHECK_EQ(f.calls, 0);
	tmpdir_remove();
}

TEST(forced_mode_does_not_probe)
{
	struct fake_probe f = { .verdict = KVM_VERDICT_FAILS, .reason = "broken" };
	struct kvm_choice_env env;
	struct kvm_choice c;

	tmpdir();
	env = env_for(&f, "boot-a", "key-1");
	env.override = "direct";
	choose(&env, &c);
	CHECK_EQ(c.mode, KVM_MODE_DIRECT);
	CHECK(c.forced);
	CHECK_STR(c.why, "MVM_KVM=direct");
	env.override = "nested";
	choose(&env, &c);
	CHECK_EQ(c.mode, KVM_MODE_NESTED);
	CHECK_EQ(f.calls, 0);
	CHECK(access(cache, F_OK) != 0);    /* nothing cached either */
	tmpdir_remove();
}

TEST(verdicts_map_to_modes)
{
	static const struct { enum kvm_verdict v; enum kvm_mode m; } cases[] = {
		{ KVM_VERDICT_RUNS, KVM_MODE_DIRECT },
		{ KVM_VERDICT_FAILS, KVM_MODE_NESTED },
		{ KVM_VERDICT_ABSENT, KVM_MODE_NESTED },
	};
	unsigned i;

	for (i = 0; i < 3; i++) {
		struct fake_probe f = { .verdict = cases[i].v, .reason = "why" };
		struct kvm_choice_env env;
		struct kvm_choice c;

		tmpdir();
		env = env_for(&f, "boot-a", "key-1");
		choose(&env, &c);
		CHECK_EQ(c.mode, cases[i].m);
		CHECK_EQ(c.verdict, cases[i].v);
		CHECK(!c.forced);
		CHECK(!c.cached);
		CHECK_STR(c.why, "why");
		CHECK_EQ(f.calls, 1);
	}
	tmpdir_remove();
}

TEST(verdict_is_cached_for_the_boot)
{
	struct fake_probe f = { .verdict = KVM_VERDICT_FAILS,
				.reason = "step 4 (LOCK CMPXCHG16B): emulation failed" };
	struct kvm_choice_env env;
	struct kvm_choice c;

	tmpdir();
	env = env_for(&f, "boot-a", "key-1");
	choose(&env, &c);
	CHECK_EQ(f.calls, 1);
	CHECK(!c.cached);
	/* The second decision reads the cache: the probe does not run. */
	f.verdict = KVM_VERDICT_RUNS;
	choose(&env, &c);
	CHECK_EQ(f.calls, 1);
	CHECK(c.cached);
	CHECK_EQ(c.verdict, KVM_VERDICT_FAILS);
	CHECK_EQ(c.mode, KVM_MODE_NESTED);
	CHECK(strstr(c.why, "step 4 (LOCK CMPXCHG16B): emulation failed"));
	CHECK(strstr(c.why, "cached for this boot"));
	tmpdir_remove();
}

TEST(stale_cache_from_another_boot_is_replaced)
{
	struct fake_probe f = { .verdict = KVM_VERDICT_FAILS, .reason = "old" };
	struct kvm_choice_env env;
	struct kvm_choice c;

	tmpdir();
	env = env_for(&f, "boot-a", "key-1");
	choose(&env, &c);
	/* Rebooted (new boot id), and now KVM works. */
	f.verdict = KVM_VERDICT_RUNS;
	f.reason = "new";
	env.boot_id = "boot-b";
	choose(&env, &c);
	CHECK_EQ(f.calls, 2);
	CHECK(!c.cached);
	CHECK_EQ(c.mode, KVM_MODE_DIRECT);
	/* And the new verdict is what the cache holds now. */
	choose(&env, &c);
	CHECK_EQ(f.calls, 2);
	CHECK(c.cached);
	CHECK_EQ(c.mode, KVM_MODE_DIRECT);
	tmpdir_remove();
}

TEST(changed_key_probes_again)
{
	struct fake_probe f = { .verdict = KVM_VERDICT_ABSENT, .reason = "no /dev/kvm" };
	struct kvm_choice_env env;
	struct kvm_choice c;

	tmpdir();
	env = env_for(&f, "boot-a", "p1-abc-nokvm");
	choose(&env, &c);
	/* A KVM module was loaded (or the probe changed): another key. */
	f.verdict = KVM_VERDICT_RUNS;
	env.key = "p1-abc-kvm123.456.7";
	choose(&env, &c);
	CHECK_EQ(f.calls, 2);
	CHECK_EQ(c.mode, KVM_MODE_DIRECT);
	tmpdir_remove();
}

static void write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	CHECK(fp);
	fputs(text, fp);
	CHECK_EQ(fclose(fp), 0);
}

TEST(corrupt_cache_is_ignored_and_replaced)
{
	static const char *const junk[] = {
		"",
		"garbage\n",
		"mvm-kvm-verdict-1\tboot-a\tkey-1\tmaybe\twhy\n",     /* unknown verdict */
		"mvm-kvm-verdict-1\tboot-a\tkey-1\truns\n",            /* no reason */
		"mvm-kvm-verdict-1\tboot-a\tkey-1\truns\tno newline",  /* truncated */
		"mvm-kvm-verdict-0\tboot-a\tkey-1\truns\twhy\n",       /* other format */
	};
	unsigned i;

	for (i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
		struct fake_probe f = { .verdict = KVM_VERDICT_FAILS, .reason = "probed" };
		struct kvm_choice_env env;
		struct kvm_choice c;

		tmpdir();
		env = env_for(&f, "boot-a", "key-1");
		snprintf(cache, sizeof(cache), "%s/kvm-verdict", dir);
		write_file(cache, junk[i]);
		choose(&env, &c);
		CHECK_EQ(f.calls, 1);
		CHECK(!c.cached);
		CHECK_EQ(c.mode, KVM_MODE_NESTED);
		choose(&env, &c);
		CHECK_EQ(f.calls, 1);
		CHECK(c.cached);
	}
	tmpdir_remove();
}

TEST(a_well_formed_cache_entry_is_trusted)
{
	struct fake_probe f = { .verdict = KVM_VERDICT_FAILS, .reason = "probed" };
	struct kvm_choice_env env;
	struct kvm_choice c;

	tmpdir();
	snprintf(cache, sizeof(cache), "%s/kvm-verdict", dir);
	write_file(cache, "mvm-kvm-verdict-1\tboot-a\tkey-1\truns\tran fine earlier\n");
	env = env_for(&f, "boot-a", "key-1");
	choose(&env, &c);
	CHECK_EQ(f.calls, 0);
	CHECK_EQ(c.mode, KVM_MODE_DIRECT);
	CHECK(strstr(c.why, "ran fine earlier"));
	tmpdir_remove();
}

TEST(unwritable_cache_still_decides)
{
	struct fake_probe f = { .verdict = KVM_VERDICT_RUNS, .reason = "ok" };
	struct kvm_choice_env env;
	struct kvm_choice c;

	tmpdir();
	/* The cache's directory would have to be below a regular file. */
	snprintf(cache, sizeof(cache), "%s/file", dir);
	write_file(cache, "x");
	snprintf(cache, sizeof(cache), "%s/file/kvm-verdict", dir);
	env = env_for(&f, "boot-a", "key-1");
	choose(&env, &c);
	CHECK_EQ(c.mode, KVM_MODE_DIRECT);
	choose(&env, &c);
	CHECK_EQ(f.calls, 2);
	tmpdir_remove();
}

TEST(no_boot_id_means_no_cache)
{
	struct fake_probe f = { .verdict = KVM_VERDICT_RUNS, .reason = "ok" };
	struct kvm_choice_env env;
	struct kvm_choice c;

	tmpdir();
	env = env_for(&f, "", "key-1");
	choose(&env, &c);
	choose(&env, &c);
	CHECK_EQ(f.calls, 2);
	CHECK(access(cache, F_OK) != 0);
	env = env_for(&f, NULL, "key-1");
	choose(&env, &c);
	CHECK_EQ(f.calls, 3);
	tmpdir_remove();
}

TEST(host_failure_in_the_probe_is_not_cached)
{
	struct fake_probe f = { .verdict = KVM_VERDICT_FAILS, .reason = "", .ret = -ENOMEM };
	struct kvm_choice_env env;
	struct kvm_choice c;

	tmpdir();
	env = env_for(&f, "boot-a", "key-1");
	choose(&env, &c);
	CHECK_EQ(c.mode, KVM_MODE_NESTED);
	CHECK(strstr(c.why, "the probe failed"));
	f.ret = 0;
	f.verdict = KVM_VERDICT_RUNS;
	choose(&env, &c);
	CHECK_EQ(f.calls, 2);
	CHECK_EQ(c.mode, KVM_MODE_DIRECT);
	tmpdir_remove();
}

TEST(reason_with_tabs_survives_the_cache)
{
	struct fake_probe f = { .verdict = KVM_VERDICT_FAILS, .reason = "a\tb\nc" };
	struct kvm_choice_env env;
	struct kvm_choice c;

	tmpdir();
	env = env_for(&f, "boot-a", "key-1");
	choose(&env, &c);
	choose(&env, &c);
	CHECK_EQ(f.calls, 1);
	CHECK(c.cached);
	CHECK(strstr(c.why, "a b c"));
	tmpdir_remove();
}

TEST(pvm_detection)
{
	char path[160];

	tmpdir();
	CHECK(!kvm_host_is_pvm(dir));
	snprintf(path, sizeof(path), "%s/module", dir);
	CHECK_EQ(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/module/kvm_amd", dir);
	CHECK_EQ(mkdir(path, 0755), 0);
	CHECK(!kvm_host_is_pvm(dir));
	snprintf(path, sizeof(path), "%s/module/kvm_pvm", dir);
	CHECK_EQ(mkdir(path, 0755), 0);
	CHECK(kvm_host_is_pvm(dir));
	tmpdir_remove();
}

TEST(key_names_the_probe_and_dev_kvm)
{
	char key[128];

	kvm_probe_key(key, sizeof(key));
	CHECK(!strncmp(key, "p1-", 3));
	CHECK(strstr(key, access("/dev/kvm", F_OK) == 0 ? "-kvm" : "-nokvm"));
	CHECK(!strpbrk(key, "\t\n "));
}

/* A probe guest that never finishes: the "KVM_RUN" here blocks in poll()
 * with no timeout, as a vCPU inside the guest blocks in the ioctl. The
 * probe's timeout must kick it out (vcpu_kick: immediate_exit, then the
 * signal by tgkill) and join it, and say that it timed out. */
struct hung_run {
	struct vcpu *v;
	int interrupted;        /* poll() calls that a signal cut short */
	bool left;
};

static void hung_run(void *arg)
{
	struct hung_run *h = arg;

	while (!__atomic_load_n(&h->v->run->immediate_exit, __ATOMIC_SEQ_CST)) {
		if (poll(NULL, 0, -1) < 0 && errno == EINTR)
			h->interrupted++;
	}
	h->left = true;
}

TEST(a_probe_that_hangs_is_kicked_out_at_its_timeout)
{
	static struct kvm_run run;      /* what KVM would map */
	struct vm vm = { .kick_signal = 0 };
	struct vcpu v = { .vm = &vm, .run = &run };
	struct hung_run h = { .v = &v };
	atomic_bool timed_out;
	char reason[128] = "";

	atomic_init(&timed_out, false);
	CHECK_EQ(vcpu_signal_get(SIGUSR2), 0);
	CHECK_EQ(kvm_probe_vcpu_thread(&v, 100, SIGUSR2, hung_run, &h, &timed_out, reason,
				       sizeof(reason)), 0);
	CHECK(atomic_load(&timed_out));
	CHECK(h.left);
	/* Blocked in a syscall, the thread saw the signal, not just the flag. */
	CHECK(h.interrupted >= 1);
	CHECK(!v.started);      /* joined */
	CHECK_EQ(v.tid, 0);     /* and gone: no later kick can reach a reused tid */
}
