/* Can this host's /dev/kvm run a Linux guest, and so: run mvm directly, or
 * inside the nested harness (tests/nested/run)?
 *
 * Opening /dev/kvm proves nothing: a KVM without hardware virtualization
 * (PVM, kvm_pvm) opens, creates VMs and vCPUs, runs real-mode code, and
 * then fails on ordinary 64-bit kernel code with KVM_EXIT_INTERNAL_ERROR.
 * So the answer comes from behaviour: kvm_probe_run() boots a tiny payload
 * (arch/x86/probe_payload.S) with mvm's own VM and vCPU setup and checks that it
 * does what Linux does early on. kvm_choose() adds the user's override
 * (MVM_KVM=direct|nested|auto) and a verdict cache that holds for one host
 * boot (keyed by /proc/sys/kernel/random/boot_id, the probe's version and
 * /dev/kvm's identity), so the probe costs once per boot, not per test.
 *
 * Everything here returns errors; nothing prints or exits. */
#ifndef MVM_KVM_PROBE_H
#define MVM_KVM_PROBE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>

enum kvm_verdict {
	KVM_VERDICT_RUNS,     /* the probe guest ran and computed the right results */
	KVM_VERDICT_FAILS,    /* /dev/kvm opens but cannot run the probe guest */
	KVM_VERDICT_ABSENT,   /* no usable /dev/kvm (missing, no permission, old API) */
};

#define KVM_REASON_MAX 768

struct kvm_probe_result {
	enum kvm_verdict verdict;
	char reason[KVM_REASON_MAX];  /* one line: what was tested, or what failed */
};

/* Run the probe payload in a fresh one-vCPU VM, bounded by timeout_ms.
 * Always fills *res; returns 0, or -errno when the host itself failed
 * (out of memory, no threads), in which case res->verdict is FAILS.
 * Needs a no-op handler on kick_signal (vcpu_signal_get) so that a
 * payload that never finishes can be interrupted. */
int kvm_probe_run(unsigned timeout_ms, int kick_signal, struct kvm_probe_result *res);

/* For kvm_probe_run's implementations (arch/): open /dev/kvm and create a
 * one-vCPU VM with mem bytes of RAM. false with res filled (ABSENT: no
 * usable /dev/kvm; FAILS: no VM); true with res->verdict FAILS until the
 * probe says otherwise, and vm to vm_fini. */
struct vm;
bool kvm_probe_vm(struct vm *vm, uint64_t mem, struct kvm_probe_result *res);

/* For kvm_probe_run's implementations (arch/): run fn(arg) on a new thread
 * that drives vCPU v, for at most timeout_ms. Past that, *timed_out is set
 * and the vCPU is kicked out of KVM_RUN (immediate_exit, kick_signal), so fn
 * sees KVM_RUN fail and returns; the thread is always joined. 0, or -errno
 * with a reason when the thread could not start. */
struct vcpu;
int kvm_probe_vcpu_thread(struct vcpu *v, unsigned timeout_ms, int kick_signal,
			  void (*fn)(void *arg), void *arg, atomic_bool *timed_out,
			  char *reason, size_t len);

/* A board's probe run: what its vCPU thread found. The board's own state
 * embeds it; fn gets it back (container_of). */
struct kvm_probe_run {
	struct vcpu *v;
	atomic_bool timed_out;
	unsigned timeout_ms;
	bool ok;                        /* the guest showed what the board wanted */
	char why[KVM_REASON_MAX];       /* what failed, or, when ok, what ran */
};

/* The end every board's kvm_probe_run shares: fn drives v on its own
 * thread (kvm_probe_vcpu_thread, at most timeout_ms), then the verdict
 * into res: KVM_VERDICT_RUNS when r->ok, and r->why as the reason either
 * way. 0, or -errno with a reason when the thread could not start. */
int kvm_probe_vcpu_verdict(struct kvm_probe_run *r, struct vcpu *v, unsigned timeout_ms,
			   int kick_signal, void (*fn)(struct kvm_probe_run *r),
			   struct kvm_probe_result *res);


enum kvm_mode { KVM_MODE_DIRECT, KVM_MODE_NESTED };

/* MVM_KVM: NULL, "" and "auto" mean auto. 0 with *forced (false for auto)
 * and *mode, or -EINVAL. */
int kvm_parse_override(const char *value, bool *forced, enum kvm_mode *mode);

struct kvm_choice_env {
	const char *override;      /* MVM_KVM's value, or NULL */
	const char *cache_path;    /* verdict cache file, or NULL for none */
	const char *boot_id;       /* this boot's id, or NULL (no caching) */
	const char *key;           /* what the verdict depends on besides the boot */
	/* The probe (kvm_probe_run, or a fake in tests). */
	int (*probe)(void *ctx, struct kvm_probe_result *res);
	void *ctx;
};

struct kvm_choice {
	enum kvm_mode mode;
	enum kvm_verdict verdict;  /* meaningful unless forced */
	bool forced;               /* MVM_KVM said so; nothing was probed */
	bool cached;               /* the verdict came from the cache */
	char why[KVM_REASON_MAX + 128];
};

/* Decide: a forced mode wins; else a cached verdict from this boot with
 * the same key; else probe, and cache the verdict (best effort: a cache
 * that cannot be written is not an error). A cache entry from another boot
 * or key, or one that does not parse, is ignored and replaced.
 * 0, or -EINVAL for a bad override (message in err). */
int kvm_choose(const struct kvm_choice_env *env, struct kvm_choice *out, char *err,
	       size_t errlen);

/* The cache key of this build and host: probe version and payload hash,
 * and /dev/kvm's inode and change time (a reloaded KVM module makes a new
 * node). */
void kvm_probe_key(char *out, size_t outlen);

#endif
