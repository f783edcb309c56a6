/* libmvm: the public API (vmm/mvm.h) over the VM runtime, the devices and
 * the architecture's boot code (arch/arch.h). A struct mvm owns everything of one VM; nothing here
 * is process-wide except the kick signal's handler (see mvm.h).
 *
 * Lifecycle (state, under vm->lock where two threads may race):
 *   CREATED  mvm_create: config checked and copied, kernel parsed;
 *            mvm_add_disk opens and locks images.
 *   PREPARED mvm_prepare: KVM VM, devices, boot tables, vCPUs; no thread
 *            yet, so the caller may still drop privileges (mvm(1) does).
 *   RUNNING  mvm_start (preparing first if needed): device threads, vCPU
 *            threads and the control thread, which polls the stop eventfd,
 *            the console input and the console output (the device's buffer
 *            to console_fn/console_out, never blocking), and on a stop
 *            request tears the vCPUs and device threads down, writes out
 *            the guest's last output, records the exit, signals wait_efd.
 *   ENDED    mvm_wait saw wait_efd and joined the control thread.
 *   FAILED   mvm_start failed and unwound; only mvm_destroy is left.
 */
#include "vmm/mvm.h"
#include "vmm/lib/mvm_priv.h"
#include "vmm/lib/console.h"
#include "vmm/lib/console_out.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/kvm_probe.h"
#include "vmm/base/json.h"
#include "vmm/base/log.h"
#include "vmm/kvm/sandbox.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vcpu.h"
#include "arch/arch.h"
#include "devices/blk_image.h"
#include "devices/pci.h"
#include "devices/pvpanic.h"
#include "devices/ratelim.h"
#include "devices/virtio_blk.h"
#include "devices/virtio_vsock.h"
#include "devices/virtio_mmio.h"
#include "devices/virtio_ccw.h"
#include "devices/virtio_pci.h"
#include "devices/virtq_worker.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

/* The caller's log callback behind the library's sink. */
static void mvm_log_bridge(void *opaque, int level, const char *msg)
{
	const struct mvm *m = opaque;

	m->cfg.log_fn(m->cfg.log_opaque, (enum mvm_log_level)level, msg);
}

/* The smallest struct sizes this library takes: 2.0's, the first with a
 * size (what mvm_config_init and mvm_disk_init, the functions a 2.0
 * program calls, fill). A field added later at the end leaves these as
 * they are. */
#define MVM_CONFIG_SIZE_MIN offsetof(struct mvm_config, pvpanic)
#define MVM_DISK_SIZE_MIN (offsetof(struct mvm_disk, fixed_buffers) + sizeof(bool))
/* 2.3's: the first. */
#define MVM_RATE_GROUP_SIZE_MIN sizeof(struct mvm_rate_group_config)
/* 2.2's: the first. */
#define MVM_VSOCK_SIZE_MIN (offsetof(struct mvm_vsock, conns) + sizeof(unsigned))

const char *mvm_version(void)
{
	return MVM_VERSION_STRING;
}

/* The caller's sized struct into ours, or why not. */
static int mvm_take(void *ours, size_t have, const void *theirs, size_t size, size_t min,
		    const char *what, const char *init, char *err, size_t errlen)
{
	int r = abi_copy_in(ours, have, theirs, size, min);

	if (r == -E2BIG)
		return err_set(err, errlen, -EINVAL, "%s: size %zu: set fields that this libmvm "
			       "(%s, %zu bytes) does not know; use a libmvm as new as the "
			       "program's mvm.h", what, size, MVM_VERSION_STRING, have);
	if (r)
		return err_set(err, errlen, -EINVAL, "%s: size %zu: not one of libmvm %d.0 or "
			       "later (%zu bytes here); fill it with %s", what, size,
			       MVM_VERSION_MAJOR, have, init);
	return 0;
}

/* ours (full, with defaults) into the caller's struct of size bytes:
 * what fits; the size is theirs, and bytes beyond ours (a newer
 * program's fields) are zero, which an older library reads as "not set". */
static void mvm_give(void *theirs, size_t size, const void *ours, size_t have)
{
	if (size < sizeof(size_t))
		return;         /* cannot even hold its size */
	abi_copy_out(theirs, size, ours, have);
	memcpy(theirs, &size, sizeof(size));    /* size is every struct's first field */
}

/* An id of a group, a VM or a disk: 1..max letters, digits, '-', '_', '.'. */
static bool mvm_name_ok(const char *id, size_t max)
{
	size_t i, n = strlen(id);

	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)id[i]) && !strchr("-_.", id[i]))
			return false;
	return n > 0 && n <= max;
}

static bool mvm_id_ok(const char *id)
{
	return mvm_name_ok(id, MVM_ID_MAX);
}

void mvm_config_init_size(struct mvm_config *cfg, size_t size)
{
	struct mvm_config c;

	memset(&c, 0, sizeof(c));
	c.cpus = 1;
	c.mem = 256ULL << 20;
	c.console_in = -1;
	c.console_out = -1;
	c.kick_signal = SIGUSR1;
	c.pvpanic = true;
	c.hotplug_queues = 1;
	if (cfg)
		mvm_give(cfg, size, &c, sizeof(c));
}

/* The function a program built with 2.0's mvm.h calls: its struct is 2.0's. */
void (mvm_config_init)(struct mvm_config *cfg)
{
	mvm_config_init_size(cfg, MVM_CONFIG_SIZE_MIN);
}

void mvm_disk_init_size(struct mvm_disk *disk, const char *path, size_t size)
{
	struct mvm_disk d;

	memset(&d, 0, sizeof(d));
	d.path = path;
	kv_defaults(&blk_disk_keys, &d);
	d.transport = arch_layout.has_ccw ? MVM_TRANSPORT_CCW : MVM_TRANSPORT_PCI;
	if (disk)
		mvm_give(disk, size, &d, sizeof(d));
}

void (mvm_disk_init)(struct mvm_disk *disk, const char *path)
{
	mvm_disk_init_size(disk, path, MVM_DISK_SIZE_MIN);
}

/* A spec in a key table's syntax over the caller's sized struct: taken
 * into ours (its defaults already there), parsed, given back. */
static int mvm_kv_parse(const struct kv_table *t, void *ours, size_t have, void *theirs,
			size_t size, size_t min, const char *what, const char *init,
			const char *spec, char *buf, size_t buflen, char *err, size_t errlen)
{
	int r = mvm_take(ours, have, theirs, size, min, what, init, err, errlen);

	if (!r)
		r = kv_parse(t, spec, ours, buf, buflen, err, errlen);
	if (!r)
		memcpy(theirs, ours, MIN(size, have));
	return r;
}

/* The device's keys write at this library's offsets: they work on a full
 * copy, and a key whose field lies beyond the caller's struct (a program
 * built with an older mvm.h) is refused rather than written past it. */
static int mvm_disk_edit(struct mvm_disk *disk, const char *spec, const char *key,
			 const char *value, char *buf, size_t buflen, char *err, size_t errlen)
{
	struct mvm_disk d, before;
	int r;

	if (!disk)
		return err_set(err, errlen, -EINVAL, "disk: NULL; fill one with mvm_disk_init");
	mvm_disk_init_size(&d, NULL, sizeof(d));
	r = mvm_take(&d, sizeof(d), disk, disk->size, MVM_DISK_SIZE_MIN, "disk", "mvm_disk_init",
		     err, errlen);
	if (r)
		return r;
	before = d;
	r = spec ? kv_parse(&blk_disk_keys, spec, &d, buf, buflen, err, errlen) :
		   kv_set_key(&blk_disk_keys, key, value, &d, err, errlen);
	if (r)
		return r;
	if (disk->size < sizeof(d) && memcmp((char *)&d + disk->size, (char *)&before + disk->size,
					     sizeof(d) - disk->size))
		return err_set(err, errlen, -EINVAL, "disk: size %zu: a key given is beyond this "
			       "program's struct mvm_disk; build it with libmvm %s's mvm.h",
			       disk->size, MVM_VERSION_STRING);
	memcpy(disk, &d, MIN(disk->size, sizeof(d)));
	return 0;
}

int mvm_disk_parse(struct mvm_disk *disk, const char *spec, char *buf, size_t buflen,
		   char *err, size_t errlen)
{
	if (!spec)
		return err_set(err, errlen, -EINVAL, "disk: no spec; give PATH[,key=value]...");
	return mvm_disk_edit(disk, spec, NULL, NULL, buf, buflen, err, errlen);
}

int mvm_disk_set(struct mvm_disk *disk, const char *key, const char *value, char *err,
		 size_t errlen)
{
	return mvm_disk_edit(disk, NULL, key, value, NULL, 0, err, errlen);
}

size_t mvm_disk_syntax(char *buf, size_t len)
{
	return kv_syntax(&blk_disk_keys, buf, len);
}

size_t mvm_disk_help(unsigned indent, char *buf, size_t len)
{
	return kv_help(&blk_disk_keys, indent, buf, len);
}

void mvm_vsock_init_size(struct mvm_vsock *vsock, size_t size)
{
	struct mvm_vsock v;

	memset(&v, 0, sizeof(v));
	kv_defaults(&vsock_keys, &v);
	v.transport = arch_layout.has_ccw ? MVM_TRANSPORT_CCW : MVM_TRANSPORT_PCI;
	if (vsock)
		mvm_give(vsock, size, &v, sizeof(v));
}

int mvm_vsock_parse(struct mvm_vsock *vsock, const char *spec, char *buf, size_t buflen,
		    char *err, size_t errlen)
{
	struct mvm_vsock v;

	if (!vsock)
		return err_set(err, errlen, -EINVAL, "vsock: NULL; fill one with mvm_vsock_init");
	mvm_vsock_init(&v);
	return mvm_kv_parse(&vsock_keys, &v, sizeof(v), vsock, vsock->size, MVM_VSOCK_SIZE_MIN,
			    "vsock", "mvm_vsock_init", spec, buf, buflen, err, errlen);
}

size_t mvm_vsock_syntax(char *buf, size_t len)
{
	return kv_syntax(&vsock_keys, buf, len);
}

size_t mvm_vsock_help(unsigned indent, char *buf, size_t len)
{
	return kv_help(&vsock_keys, indent, buf, len);
}

void mvm_rate_group_config_init_size(struct mvm_rate_group_config *g, size_t size)
{
	struct mvm_rate_group_config c;

	memset(&c, 0, sizeof(c));
	kv_defaults(&ratelim_group_keys, &c);
	if (g)
		mvm_give(g, size, &c, sizeof(c));
}

int mvm_rate_group_parse(struct mvm_rate_group_config *g, const char *spec, char *buf,
			 size_t buflen, char *err, size_t errlen)
{
	struct mvm_rate_group_config c;

	if (!g)
		return err_set(err, errlen, -EINVAL, "rate-limit-group: NULL; fill one with "
			       "mvm_rate_group_config_init");
	mvm_rate_group_config_init(&c);
	return mvm_kv_parse(&ratelim_group_keys, &c, sizeof(c), g, g->size,
			    MVM_RATE_GROUP_SIZE_MIN, "rate-limit-group", "mvm_rate_group_config_init",
			    spec, buf, buflen, err, errlen);
}

size_t mvm_rate_group_syntax(char *buf, size_t len)
{
	return kv_syntax(&ratelim_group_keys, buf, len);
}

size_t mvm_rate_group_help(unsigned indent, char *buf, size_t len)
{
	return kv_help(&ratelim_group_keys, indent, buf, len);
}

int mvm_rate_group_new(const struct mvm_rate_group_config *theirs, struct mvm_rate_group **out,
		       char *err, size_t errlen)
{
	struct mvm_rate_group_config c;
	struct mvm_rate_group *g;
	int r;

	if (!theirs || !out)
		return err_set(err, errlen, -EINVAL, "mvm_rate_group_new: %s is NULL",
			       theirs ? "out" : "config");
	mvm_rate_group_config_init(&c);
	r = mvm_take(&c, sizeof(c), theirs, theirs->size, MVM_RATE_GROUP_SIZE_MIN,
		     "rate-limit-group", "mvm_rate_group_config_init", err, errlen);
	if (r)
		return r;
	r = kv_check(&ratelim_group_keys, &c, c.id ? c.id : "(no id)", err, errlen);
	if (r)
		return r;
	if (!mvm_id_ok(c.id))
		return err_set(err, errlen, -EINVAL, "rate-limit-group id '%.64s': give 1 to %d "
			       "letters, digits, '-', '_' or '.'", c.id, MVM_ID_MAX);
	r = ratelim_check(&c.rate, "rate-limit-group", c.id, err, errlen);
	if (r)
		return r;
	g = calloc(1, sizeof(*g));
	if (!g)
		return err_set(err, errlen, -ENOMEM, "rate-limit-group %s: out of memory", c.id);
	r = ratelim_init(&g->rl, &c.rate, mono_ns());
	if (r) {
		free(g);
		return err_set(err, errlen, r, "rate-limit-group %s: %s", c.id, strerror(-r));
	}
	strcpy(g->id, c.id);
	g->refs = 1;
	*out = g;
	return 0;
}

int mvm_rate_group_set(struct mvm_rate_group *g, const struct mvm_rate_limit *theirs,
		       size_t len, char *err, size_t errlen)
{
	struct mvm_rate_limit rate;
	int r;

	if (!g || !theirs || len != sizeof(rate))
		return err_set(err, errlen, -EINVAL, "mvm_rate_group_set: %s; give a group, "
			       "limits and sizeof(struct mvm_rate_limit)",
			       !g ? "no group" : !theirs ? "no limits" : "a size not of this "
			       "struct mvm_rate_limit");
	rate = *theirs;
	r = ratelim_check(&rate, "rate-limit-group", g->id, err, errlen);
	if (r)
		return r;
	ratelim_set(&g->rl, &rate, mono_ns());
	return 0;
}

void mvm_rate_group_unref(struct mvm_rate_group *g)
{
	if (!g || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL))
		return;
	ratelim_fini(&g->rl);
	free(g);
}

struct mvm_rate_group *mvm_group_find(const struct mvm *m, const char *id)
{
	unsigned i;

	for (i = 0; i < m->ngroups; i++)
		if (!strcmp(m->groups[i]->id, id))
			return m->groups[i];
	return NULL;
}

int mvm_group_attach(struct mvm *m, struct mvm_rate_group *g, char *err, size_t errlen)
{
	if (mvm_group_find(m, g->id))
		return err_set(err, errlen, -EEXIST, "rate-limit-group %s: the VM has a group of "
			       "that id already; give each its own id", g->id);
	if (m->ngroups >= MVM_MAX_DISKS)
		return err_set(err, errlen, -ENOSPC, "rate-limit-group %s: more than %u groups "
			       "(one per disk at most)", g->id, MVM_MAX_DISKS);
	__atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
	m->groups[m->ngroups] = g;
	/* Pairs with mvm_get_rate_group's acquire: the entry before the count. */
	__atomic_store_n(&m->ngroups, m->ngroups + 1, __ATOMIC_RELEASE);
	return 0;
}

int mvm_add_rate_group(struct mvm *m, struct mvm_rate_group *g, char *err, size_t errlen)
{
	if (!m || !g)
		return err_set(err, errlen, -EINVAL, "mvm_add_rate_group: %s is NULL",
			       m ? "group" : "vm");
	if (atomic_load(&m->state) != MVM_CREATED)
		return err_set(err, errlen, -EBUSY, "rate-limit-group %s: the VM has been started; "
			       "add groups before mvm_start", g->id);
	return mvm_group_attach(m, g, err, errlen);
}

int mvm_get_rate_group(const struct mvm *m, unsigned group, struct mvm_rate_group_config *out,
		       size_t size)
{
	struct mvm_rate_group_config c;

	if (!m || !out || size < MVM_RATE_GROUP_SIZE_MIN)
		return -EINVAL;
	if (group >= __atomic_load_n(&m->ngroups, __ATOMIC_ACQUIRE))
		return -ENOENT;
	mvm_rate_group_config_init(&c);
	c.id = m->groups[group]->id;
	ratelim_rate_get(&m->groups[group]->rl, &c.rate);
	mvm_give(out, size, &c, sizeof(c));
	return 0;
}

int mvm_disk_set_rate_limit(struct mvm *m, unsigned disk, const struct mvm_rate_limit *theirs,
			    size_t len, char *err, size_t errlen)
{
	struct mvm_rate_limit rate;
	struct mvm_disk_slot *s;
	int r;

	if (!m || !theirs || len != sizeof(rate))
		return err_set(err, errlen, -EINVAL, "mvm_disk_set_rate_limit: %s; give a VM, "
			       "limits and sizeof(struct mvm_rate_limit)",
			       !m ? "no VM" : !theirs ? "no limits" : "a size not of this "
			       "struct mvm_rate_limit");
	pthread_mutex_lock(&m->ctl_lock);
	if (disk >= m->ndisks) {
		r = err_set(err, errlen, -EINVAL, "disk %u: the VM has %u disk%s%s", disk,
			    m->ndisks, m->ndisks == 1 ? "" : "s",
			    m->ndisks ? "; give its index, from 0 (vda)" : "; add one first");
		goto unlock;
	}
	s = &m->disks[disk];
	rate = *theirs;
	r = ratelim_check(&rate, "disk", s->opts.path, err, errlen);
	if (r)
		goto unlock;
	/* The device, once there, holds the limits its threads use; the
	 * options are what --stats and a later device start from. */
	if (s->dev)
		r = blk_set_rate(s->dev, &rate, err, errlen);
	if (!r)
		s->opts.rate = rate;
unlock:
	pthread_mutex_unlock(&m->ctl_lock);
	return r;
}

static const char *mvm_transport_name(enum mvm_transport t)
{
	return t == MVM_TRANSPORT_PCI ? "pci" : t == MVM_TRANSPORT_MMIO ? "mmio" : "ccw";
}

/* A transport the board has, or why not ("disk PATH", "vsock PATH"). */
static int mvm_transport_check(enum mvm_transport t, const char *what, const char *name,
			       char *err, size_t errlen)
{
	if ((t == MVM_TRANSPORT_PCI && arch_layout.pci_mmio_end == 0) ||
	    (t == MVM_TRANSPORT_MMIO && arch_layout.virtio_mmio_max == 0) ||
	    (t == MVM_TRANSPORT_CCW && !arch_layout.has_ccw))
		return err_set(err, errlen, -EINVAL, "%s %s: transport %s: %s guests have no "
			       "such bus; give transport=%s", what, name,
			       mvm_transport_name(t), arch_layout.name,
			       arch_layout.has_ccw ? "ccw" : "pci or transport=mmio");
	return 0;
}

unsigned mvm_max_cpus(void)
{
	return MIN(MVM_MAX_CPUS, arch_layout.max_vcpus);
}

static uint64_t mvm_host_mem(void)
{
	struct sysinfo si;

	if (sysinfo(&si))
		return 0;
	return ((uint64_t)si.totalram + si.totalswap) * si.mem_unit;
}

static int mvm_check_file(const char *what, const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (stat(path, &st))
		return err_set(err, errlen, -errno, "%s '%s': %s; check the path", what, path,
			       strerror(errno));
	if (!S_ISREG(st.st_mode))
		return err_set(err, errlen, -EINVAL, "%s '%s': not a regular file; give a %s file",
			       what, path, what);
	if (access(path, R_OK))
		return err_set(err, errlen, -errno, "%s '%s': %s; make it readable", what, path,
			       strerror(errno));
	return 0;
}

/* A call on a VM whose prepare or start failed. */
static int mvm_failed_err(const char *call, char *err, size_t errlen)
{
	return err_set(err, errlen, -EBUSY, "%s: an earlier mvm_prepare or mvm_start of this "
		       "VM failed; destroy it (mvm_destroy) and create a new one", call);
}

/* vcpu_signal_get's refusal, in words. */
static int mvm_kick_signal_err(int sig, int ret, char *err, size_t errlen)
{
	if (ret == -EINVAL)
		return err_set(err, errlen, ret, "kick_signal %d (%s): the kernel or the process "
			       "needs it for something else (a fault, a child, a pipe); give a "
			       "signal the process does not use, e.g. SIGUSR1", sig, strsignal(sig));
	if (ret == -EBUSY)
		return err_set(err, errlen, ret, "kick_signal %d (%s): the process has a handler "
			       "of its own for it; give a signal it does not use", sig,
			       strsignal(sig));
	return err_set(err, errlen, ret, "kick_signal %d: sigaction: %s", sig, strerror(-ret));
}

/* A thread name holds 15 bytes: "ID-d15q63" and "ID-ctl" must fit. */
static int mvm_check_id(const char *id, char *err, size_t errlen)
{
	if (id && !mvm_id_ok(id))
		return err_set(err, errlen, -EINVAL, "id '%.64s': give 1 to %d letters, digits, "
			       "'-', '_' or '.' (it begins the VM's thread names)", id, MVM_ID_MAX);
	return 0;
}

/* Everything about a config that needs no KVM. */
static int mvm_check_config(const struct mvm_config *cfg, char *err, size_t errlen)
{
	uint64_t host_mem;
	int ret;

	if (!cfg)
		return err_set(err, errlen, -EINVAL, "config: NULL; fill one with mvm_config_init");
	if (cfg->restore && (cfg->kernel || cfg->initrd || cfg->cmdline))
		return err_set(err, errlen, -EINVAL, "restore %s: with a %s given; a restored "
			       "guest goes on with the kernel in its memory, give neither",
			       cfg->restore, cfg->kernel ? "kernel" : cfg->initrd ? "initrd" :
			       "command line");
	if (cfg->snapshot_dir && !*cfg->snapshot_dir)
		return err_set(err, errlen, -EINVAL, "snapshot_dir: empty; give a directory, or "
			       "NULL for none");
	if (cfg->image_dir && !*cfg->image_dir)
		return err_set(err, errlen, -EINVAL, "image_dir: empty; give a directory, or "
			       "NULL for none");
	if (cfg->mem_file && !*cfg->mem_file)
		return err_set(err, errlen, -EINVAL, "mem_file: empty; give a file for guest RAM, "
			       "or NULL for anonymous memory");
	if (cfg->mem_file && cfg->restore)
		return err_set(err, errlen, -EINVAL, "mem_file %s with restore: a restored guest's "
			       "RAM is its snapshot's memory file, mapped privately; leave mem_file "
			       "out", cfg->mem_file);
	if (!cfg->restore && (!cfg->kernel || !*cfg->kernel))
		return err_set(err, errlen, -EINVAL, "kernel: not set; give a bzImage or an ELF "
			       "vmlinux with a PVH note");
	if (cfg->cpus < 1 || cfg->cpus > mvm_max_cpus())
		return err_set(err, errlen, -EINVAL, "cpus %u: out of range; give 1 to %u",
			       cfg->cpus, mvm_max_cpus());
	if (cfg->mem < MVM_MIN_MEM || cfg->mem % 4096)
		return err_set(err, errlen, -EINVAL, "mem %llu bytes: give at least 16 MiB, a "
			       "multiple of 4 KiB", (unsigned long long)cfg->mem);
	if (cfg->mem > MVM_MAX_GPA - GiB)
		return err_set(err, errlen, -EINVAL, "mem %llu MiB: above mvm's limit of %llu GiB "
			       "of guest RAM; give less", (unsigned long long)(cfg->mem >> 20),
			       (unsigned long long)((MVM_MAX_GPA - GiB) >> 30));
	host_mem = mvm_host_mem();
	if (host_mem && cfg->mem > host_mem)
		return err_set(err, errlen, -EINVAL, "mem %llu MiB: more than this host's RAM + "
			       "swap (%llu MiB); give less", (unsigned long long)(cfg->mem >> 20),
			       (unsigned long long)(host_mem >> 20));
	if (cfg->kick_signal <= 0 || cfg->kick_signal > SIGRTMAX)
		return err_set(err, errlen, -EINVAL, "kick_signal %d: not a signal; give e.g. "
			       "SIGUSR1", cfg->kick_signal);
	if (vcpu_signal_reserved(cfg->kick_signal))
		return mvm_kick_signal_err(cfg->kick_signal, -EINVAL, err, errlen);
	ret = mvm_check_id(cfg->id, err, errlen);
	if (ret)
		return ret;
	if (cfg->hotplug_slots > MVM_MAX_HOTPLUG_SLOTS)
		return err_set(err, errlen, -EINVAL, "hotplug_slots %u: give 0 to %u",
			       cfg->hotplug_slots, MVM_MAX_HOTPLUG_SLOTS);
	if (cfg->hotplug_queues > MVM_MAX_QUEUES)
		return err_set(err, errlen, -EINVAL, "hotplug_queues %u: give 1 to %u",
			       cfg->hotplug_queues, MVM_MAX_QUEUES);
	if (cfg->hotplug_slots && arch_layout.pci_mmio_end == 0 && !arch_layout.has_ccw)
		return err_set(err, errlen, -EINVAL, "hotplug_slots %u: this board has no PCI "
			       "bus or channel subsystem to put hot-plug slots on; give 0",
			       cfg->hotplug_slots);
	if (cfg->console_escape && cfg->console_in < 0)
		return err_set(err, errlen, -EINVAL, "console_escape: set without console_in");
	/* Checked now: an fd closed under the control thread's poll would
	 * read as POLLNVAL forever. */
	if (cfg->console_in >= 0 && fcntl(cfg->console_in, F_GETFD) < 0)
		return err_set(err, errlen, -EBADF, "console_in %d: not an open file descriptor; "
			       "give an open fd or -1", cfg->console_in);
	if (cfg->console_out >= 0 && fcntl(cfg->console_out, F_GETFD) < 0)
		return err_set(err, errlen, -EBADF, "console_out %d: not an open file descriptor; "
			       "give an open fd or -1", cfg->console_out);
	ret = cfg->kernel ? mvm_check_file("kernel", cfg->kernel, err, errlen) : 0;
	if (!ret && cfg->initrd)
		ret = mvm_check_file("initrd", cfg->initrd, err, errlen);
	return ret;
}

static char *mvm_strdup(const char *s, bool *oom)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*oom = true;
	return d;
}


/* As mvm_snapshot compares directories and files with it. */
char *mvm_abs_path(const char *dir)
{
	char cwd[PATH_MAX], *out;
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (dir[0] == '/')
		return strndup(dir, n);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	if (asprintf(&out, "%s%s%.*s", cwd, strcmp(cwd, "/") ? "/" : "", (int)n, dir) < 0)
		return NULL;
	return out;
}

int mvm_path_beneath(const char *root, const char *dir, char *rel, size_t rellen)
{
	size_t n = strcmp(root, "/") ? strlen(root) : 0, o = 0;
	const char *p = dir + n;

	if (strncmp(dir, root, n) || (*p && *p != '/') || (!n && *p != '/'))
		return -ENOENT;
	while (*p) {
		const char *e;
		size_t len;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		e = strchrnul(p, '/');
		len = (size_t)(e - p);
		if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
			return -EINVAL;
		if (o + len + 2 > rellen)
			return -ENAMETOOLONG;
		if (o)
			rel[o++] = '/';
		memcpy(rel + o, p, len);
		o += len;
		p = e;
	}
	rel[o] = '\0';
	return 0;
}

int mvm_create(const struct mvm_config *theirs, struct mvm **out, char *err, size_t errlen)
{
	struct arch_boot_cfg bcfg;
	struct mvm_config c, *cfg = &c;
	struct mvm *m;
	pthread_mutex_t *locks[4];
	unsigned nlocks;
	bool oom = false;
	int ret;

	if (!out)
		return err_set(err, errlen, -EINVAL, "mvm_create: out is NULL");
	*out = NULL;
	if (!theirs)
		return err_set(err, errlen, -EINVAL, "config: NULL; fill one with mvm_config_init");
	mvm_config_init(&c);
	ret = mvm_take(&c, sizeof(c), theirs, theirs->size, MVM_CONFIG_SIZE_MIN, "config",
		       "mvm_config_init", err, errlen);
	if (ret)
		return ret;
	c.size = sizeof(c);
	ret = mvm_check_config(cfg, err, errlen);
	if (ret)
		return ret;
	m = calloc(1, sizeof(*m));
	if (!m)
		return err_set(err, errlen, -ENOMEM, "out of memory");
	locks[0] = &m->lock;
	locks[1] = &m->threads_lock;
	locks[2] = &m->ctl_lock;
	locks[3] = &m->devs_lock;
	m->cfg = *cfg;
	if (!m->cfg.hotplug_queues)
		m->cfg.hotplug_queues = 1;
	if (!m->cfg.start_ns)
		m->cfg.start_ns = mono_ns();
	m->kernel = mvm_strdup(cfg->kernel, &oom);
	m->initrd = mvm_strdup(cfg->initrd, &oom);
	m->cmdline = mvm_strdup(cfg->cmdline, &oom);
	m->cfg.kernel = m->kernel;
	m->cfg.initrd = m->initrd;
	m->cfg.cmdline = m->cmdline;
	if (cfg->snapshot_dir) {
		m->snap_root = mvm_abs_path(cfg->snapshot_dir);
		oom |= !m->snap_root;
	}
	m->cfg.snapshot_dir = m->snap_root;
	if (cfg->image_dir) {
		m->image_root = mvm_abs_path(cfg->image_dir);
		oom |= !m->image_root;
	}
	m->cfg.image_dir = m->image_root;
	if (cfg->mem_file) {
		m->mem_file = mvm_abs_path(cfg->mem_file);
		oom |= !m->mem_file;
	}
	m->cfg.mem_file = m->mem_file;
	snprintf(m->id, sizeof(m->id), "%s", cfg->id ? cfg->id : "mvm");
	m->cfg.id = m->id;
	snprintf(m->ctl_name, sizeof(m->ctl_name), "%s-ctl", m->id);
	m->wait_efd = -1;
	m->tx_efd = -1;
	m->snap_mem_fd = -1;
	m->snap_root_fd = -1;
	m->image_root_fd = -1;
	m->mem_file_fd = -1;
	m->kimage = BOOT_IMAGE_NONE;
	atomic_init(&m->state, MVM_CREATED);
	atomic_init(&m->hurry, false);
	if (cfg->log_fn)
		m->log = (struct log_sink){ .fn = mvm_log_bridge, .opaque = m };
	atomic_init(&m->paused, false);
	for (nlocks = 0; nlocks < ARRAY_SIZE(locks); nlocks++) {
		ret = -pthread_mutex_init(locks[nlocks], NULL);
		if (ret)
			break;
	}
	if (oom || ret) {
		while (nlocks-- > 0)
			pthread_mutex_destroy(locks[nlocks]);
		free(m->kernel);
		free(m->initrd);
		free(m->cmdline);
		free(m->snap_root);
		free(m->image_root);
		free(m->mem_file);
		free(m);
		return err_set(err, errlen, oom ? -ENOMEM : ret, "out of memory");
	}
	if (cfg->restore) {
		/* The shape comes from the snapshot, and is checked as a
		 * caller's would be. */
		ret = snapshot_open(m, err, errlen);
		if (!ret)
			ret = mvm_check_config(&m->cfg, err, errlen);
		/* After the check, which refuses a restore given a kernel. */
		if (!ret && snapshot_payload(m))
			ret = err_set(err, errlen, -ENOMEM, "restore %s: out of memory",
				      m->restore_dir);
		if (ret) {
			mvm_destroy(m);
			return ret;
		}
		*out = m;
		return 0;
	}
	/* The kernel, initrd and command line are checked now (the command
	 * line without the devices' fragments; mvm_start checks it again). */
	if (vm_compose_cmdline(NULL, m->cmdline, m->cmdline_buf, sizeof(m->cmdline_buf))) {
		mvm_destroy(m);
		return err_set(err, errlen, -ENOSPC, "cmdline: too long (%zu bytes); shorten it",
			       strlen(cfg->cmdline));
	}
	bcfg = (struct arch_boot_cfg){
		.kernel_path = m->kernel, .initrd_path = m->initrd, .cmdline = m->cmdline_buf,
		.mem_size = cfg->mem, .ncpus = cfg->cpus,
	};
	ret = arch_boot_check(&bcfg, &m->kimage, err, errlen);
	if (ret) {
		mvm_destroy(m);
		return ret;
	}
	*out = m;
	return 0;
}


int mvm_disk_find(const struct mvm *m, const char *id)
{
	unsigned i, n;

	if (!m || !id)
		return -EINVAL;
	n = __atomic_load_n(&m->ndisks, __ATOMIC_ACQUIRE);
	for (i = 0; i < n; i++)
		if (!m->disks[i].removed && !strcmp(m->disks[i].id, id))
			return (int)i;
	return -ENOENT;
}

/* The id the next disk gets (into id, room for MVM_DISK_ID_MAX): d's,
 * checked and no other disk's, or the first "_diskN" from its number on
 * that no disk has. */
static int mvm_disk_id(const struct mvm *m, const struct mvm_disk *d, char *id, char *err,
		       size_t errlen)
{
	unsigned n;
	int other;

	if (d->id) {
		if (!mvm_name_ok(d->id, MVM_DISK_ID_MAX))
			return err_set(err, errlen, -EINVAL, "disk %s: id '%.80s': give 1 to %u "
				       "letters, digits, '-', '_' or '.'", d->path, d->id,
				       MVM_DISK_ID_MAX);
		other = mvm_disk_find(m, d->id);
		if (other >= 0)
			return err_set(err, errlen, -EEXIST, "disk %s: id %s: disk %d (%s) has it; "
				       "give another", d->path, d->id, other,
				       m->disks[other].path);
		strcpy(id, d->id);
		return 0;
	}
	for (n = m->ndisks;; n++) {
		snprintf(id, MVM_DISK_ID_MAX + 1, "_disk%u", n);
		if (mvm_disk_find(m, id) < 0)
			return 0;
	}
}

/* Where the calling thread opens the image at path: by path (AT_FDCWD),
 * or, for the thread mvm_confine_api_thread confined, beneath the image
 * directory only, through its descriptor (*dirfd) with rel. Checked
 * before any call is made: its filter kills a thread that opens
 * anything else. */
static int mvm_image_dirfd(struct mvm *m, const char *path, int *dirfd, char *rel,
			   size_t rellen, char *err, size_t errlen)
{
	int r;

	*dirfd = AT_FDCWD;
	if (!m->api_confined || !pthread_equal(pthread_self(), m->api_thread))
		return 0;
	if (!m->api_image_ok)
		return err_set(err, errlen, -EOPNOTSUPP, "disk image %s: this thread may not open "
			       "files (its seccomp filter): %s", path, m->image_root ?
			       "the kernel has no Landlock to hold it to the image directory" :
			       "give the VM an image directory (image_dir, --image-dir) and "
			       "images beneath it");
	r = mvm_path_beneath(m->image_root, path, rel, rellen);
	if (r == -ENAMETOOLONG)
		return err_set(err, errlen, r, "disk image %.64s...: too long a path", path);
	if (r || !*rel)
		return err_set(err, errlen, -EPERM, "disk image %s: not %s the image directory "
			       "%s, the only place this thread may open images; give the absolute "
			       "path of one there", path, r == -EINVAL ? "plainly beneath (a . or "
			       ".. in its path)" : "beneath", m->image_root);
	*dirfd = m->image_root_fd;
	return 0;
}

/* Check d and fill the next disk slot with it, its image opened and
 * locked (by the confined API thread, from the image directory); the
 * caller counts it (ndisks) once it keeps it. */
static int mvm_disk_slot_fill(struct mvm *m, const struct mvm_disk *d, char *err, size_t errlen)
{
	char id[MVM_DISK_ID_MAX + 1], rel[PATH_MAX];
	struct mvm_disk_slot *s;
	size_t n;
	int ret, dirfd;

	if (m->ndisks >= MVM_MAX_DISKS)
		return err_set(err, errlen, -ENOSPC, "disk %s: more than %u disks",
			       d->path ? d->path : "(null)", MVM_MAX_DISKS);
	if (!d->path || !*d->path)
		return err_set(err, errlen, -EINVAL, "disk: no path; give a raw image");
	n = strlen(d->path);
	if (n >= BLK_PATH_MAX)
		return err_set(err, errlen, -ENAMETOOLONG, "disk %.64s...: path longer than %d "
			       "bytes", d->path, BLK_PATH_MAX - 1);
	/* The device's table: the limits mvm_disk_parse and mvm(1) take. */
	ret = kv_check(&blk_disk_keys, d, d->path, err, errlen);
	if (ret)
		return ret;
	ret = ratelim_check(&d->rate, "disk", d->path, err, errlen);
	if (ret)
		return ret;
	ret = mvm_transport_check(d->transport, "disk", d->path, err, errlen);
	if (ret)
		return ret;
	ret = mvm_disk_id(m, d, id, err, errlen);
	if (ret)
		return ret;
	s = &m->disks[m->ndisks];
	memset(s, 0, sizeof(*s));
	if (d->rate_limit_group) {
		s->group = mvm_group_find(m, d->rate_limit_group);
		if (!s->group)
			return err_set(err, errlen, -EINVAL, "disk %s: rate_limit_group '%s' is not "
				       "one of the VM's; add it first (--rate-limit-group id=%s,...)",
				       d->path, d->rate_limit_group, d->rate_limit_group);
		strcpy(s->group_id, s->group->id);
	}
	s->opts = *d;
	s->opts.size = sizeof(s->opts);
	s->opts.path = memcpy(s->path, d->path, n + 1);
	s->opts.serial = d->serial ? strcpy(s->serial, d->serial) : NULL;
	s->opts.id = strcpy(s->id, id);
	s->opts.rate_limit_group = s->group ? s->group_id : NULL;
	/* Opened and locked now, once: a busy or odd-sized image fails here,
	 * before anything is started. */
	ret = mvm_image_dirfd(m, s->opts.path, &dirfd, rel, sizeof(rel), err, errlen);
	if (ret)
		return ret;
	return blk_image_openat(dirfd, dirfd == AT_FDCWD ? s->opts.path : rel, &s->opts, &s->img,
				&m->log, err, errlen);
}

/* Disk i's device from its slot (its image moves into it), not yet on a
 * transport. */
static int mvm_disk_dev_new(struct mvm *m, unsigned i, struct virtio_dev **out, char *err,
			    size_t errlen)
{
	struct mvm_disk_slot *s = &m->disks[i];
	struct virtio_dev *dev;
	int ret;

	ret = blk_dev_from_image(&s->opts, &s->img, &m->vm.mem, &dev, err, errlen);
	if (ret)
		return ret;
	/* Before the driver reads the features (virtio_dev_init zeroed it). */
	dev->no_packed = !s->opts.packed;
	if (s->group) {
		ret = blk_set_group(dev, &s->group->rl);
		if (ret) {
			virtio_dev_destroy(dev);
			return err_set(err, errlen, ret, "disk %s: rate_limit_group %s: %s",
				       s->opts.path, s->group->id, strerror(-ret));
		}
	}
	/* Before launch: "ID-dN", then the worker's "qM" or PCI's "irq". */
	snprintf(dev->thread_prefix, sizeof(dev->thread_prefix), "%s-d%u", m->id,
		 i % 100u);     /* i < MVM_MAX_DISKS: what fits 15 bytes */
	*out = dev;
	return 0;
}

/* The VM's hot-plug slots, of whichever kind its board has. */
static unsigned mvm_nslots(const struct mvm *m)
{
	return m->nports + m->nccw;
}

/* Is slot p (from 0) ready for a device? A PCIe port once the guest has
 * powered it off and let it settle (pcie_port_ready); a subchannel once
 * the guest has looked at it since its last device went. */
static bool mvm_slot_ready(struct mvm *m, unsigned p)
{
	if (m->nccw)
		return arch_ccw_slot_free(&m->vm, m->ccw_sch[p]);
	return pcie_port_ready(&m->ports[p], mono_ns());
}

/* A free hot-plug slot (its number from 1, or 0): no disk's (a disk the
 * guest ejected on its own keeps its port until mvm_disk_remove), and
 * ready for a device. A slot the guest is still letting go of (after a
 * removal) is waited for, up to 5 s; *settling says one was. ctl_lock. */
static unsigned mvm_free_slot(struct mvm *m, bool *settling)
{
	uint64_t deadline = mono_ns() + 5000000000ull;
	unsigned p, i;

	for (;;) {
		*settling = false;
		for (p = 0; p < mvm_nslots(m); p++) {
			for (i = 0; i < m->ndisks; i++)
				if (m->disks[i].hslot == p + 1 && !m->disks[i].removed)
					break;
			if (i < m->ndisks)
				continue;
			if (mvm_slot_ready(m, p))
				return p + 1;
			*settling = true;
		}
		if (!*settling || mono_ns() >= deadline || vm_stop_status(&m->vm) >= 0)
			return 0;
		usleep(50000);
	}
}

/* What a disk plugged into a hot-plug slot takes from the slot's spare
 * rather than from its options: refused where it asked for something
 * else. */
static int mvm_spare_fits(const struct mvm *m, const struct mvm_disk *d, char *err,
			  size_t errlen)
{
	struct mvm_disk shape;

	mvm_disk_init(&shape, NULL);
	if (d->queues > m->cfg.hotplug_queues)
		return err_set(err, errlen, -EINVAL, "disk %s: queues=%u: a hot-plug slot's disk "
			       "has at most %u (hotplug_queues, --queues); give fewer", d->path,
			       d->queues, m->cfg.hotplug_queues);
	if (d->fixed_buffers)
		return err_set(err, errlen, -EINVAL, "disk %s: fixed-buffers=on: a hot-plug slot's "
			       "disk has its slot's rings; leave it out", d->path);
	if ((d->io_threads && d->io_threads != shape.io_threads) ||
	    d->poll_us != shape.poll_us || d->gather_us != shape.gather_us)
		return err_set(err, errlen, -EINVAL, "disk %s: io-threads, poll and gather of a "
			       "hot-plug slot's disk are its slot's (the defaults); leave them out",
			       d->path);
	return 0;
}

/* mvm_add_disk on a running VM: the free slot's spare given the image
 * and the disk's options (no thread, ring or descriptor of the VM's is
 * made: a confined thread may plug), put behind its port, then the guest
 * told. ctl_lock held. */
static int mvm_disk_hotplug(struct mvm *m, const struct mvm_disk *d, char *err, size_t errlen)
{
	const char *path = d->path ? d->path : "(null)";
	struct mvm_disk_slot *s = &m->disks[m->ndisks];
	enum mvm_transport t = m->nccw ? MVM_TRANSPORT_CCW : MVM_TRANSPORT_PCI;
	struct virtio_dev *dev;
	unsigned slot;
	bool settling;
	int ret;

	ret = mvm_check_running(m, "mvm_add_disk", err, errlen);
	if (ret)
		return ret;
	if (!mvm_nslots(m))
		return err_set(err, errlen, -EBUSY, "disk %s: the VM has been started without "
			       "hot-plug slots; start it with some (--hotplug-slots N) to add disks "
			       "while it runs", path);
	if (d->transport != t)
		return err_set(err, errlen, -EINVAL, "disk %s: transport %s: hot-plug slots here "
			       "are on %s; give transport=%s", path, mvm_transport_name(d->transport),
			       mvm_transport_name(t), mvm_transport_name(t));
	ret = mvm_spare_fits(m, d, err, errlen);
	if (ret)
		return ret;
	slot = mvm_free_slot(m, &settling);
	if (!slot && settling)
		return err_set(err, errlen, -EBUSY, "disk %s: the guest has not let go of the "
			       "hot-plug slot of a disk removed before (%s); try again", path,
			       m->nccw ? "it has not yet looked at the subchannel the disk left"
				       : "it powers the slot off once done with it");
	if (!slot)
		return err_set(err, errlen, -ENOSPC, "disk %s: all %u hot-plug slots are taken; "
			       "remove a disk first, or start with more (--hotplug-slots)", path,
			       mvm_nslots(m));
	ret = mvm_disk_slot_fill(m, d, err, errlen);
	if (ret)
		return ret;
	dev = m->spares[slot - 1];
	/* As a new card: the function and its device as they were made (a
	 * subchannel's device was reset when its last disk went). */
	if (!m->nccw)
		virtio_pci_power_on(dev);
	/* Under devs_lock: --stats reads the device's options (its walk of
	 * the device list holds it). */
	pthread_mutex_lock(&m->devs_lock);
	ret = blk_fill(dev, &s->img, &s->opts, s->group ? &s->group->rl : NULL, err, errlen);
	pthread_mutex_unlock(&m->devs_lock);
	if (ret) {
		blk_image_close(&s->img);
		return ret;
	}
	if (!m->nccw) {
		ret = virtio_pci_port_attach(dev, &m->ports[slot - 1]);
		if (ret)
			goto empty;
	}
	pthread_mutex_lock(&m->devs_lock);
	s->dev = dev;
	s->hslot = slot;
	s->port = m->nccw ? NULL : &m->ports[slot - 1];
	m->ndisks++;
	pthread_mutex_unlock(&m->devs_lock);
	/* Only now is the guest told: presence detect on the port, or the
	 * subchannel's device installed with a channel report. */
	if (!m->nccw) {
		pcie_port_announce(s->port);
		return 0;
	}
	ret = arch_ccw_slot_set(&m->vm, m->ccw_sch[slot - 1], true);
	if (ret)
		log_err(&m->log, "disk %s: hot-plug slot %u: the guest was not told of it "
			"(%s): it finds the disk at its next channel report or boot", path, slot,
			strerror(-ret));
	return 0;

empty:
	pthread_mutex_lock(&m->devs_lock);
	blk_empty(dev);
	pthread_mutex_unlock(&m->devs_lock);
	return err_set(err, errlen, ret, "disk %s: cannot put it into hot-plug slot %u: %s",
		       path, slot, strerror(-ret));
}

int mvm_add_disk(struct mvm *m, const struct mvm_disk *theirs, char *err, size_t errlen)
{
	char id[MVM_DISK_ID_MAX + 1];
	struct mvm_disk dd;
	int ret, st;

	if (!m || !theirs)
		return err_set(err, errlen, -EINVAL, "mvm_add_disk: %s is NULL", m ? "disk" : "vm");
	mvm_disk_init(&dd, NULL);
	ret = mvm_take(&dd, sizeof(dd), theirs, theirs->size, MVM_DISK_SIZE_MIN, "disk",
		       "mvm_disk_init", err, errlen);
	if (ret)
		return ret;
	if (dd.fixed_buffers && m->mem_file)
		return err_set(err, errlen, -EINVAL, "disk %s: fixed-buffers=on with guest RAM in "
			       "a file (mem_file): its ring would hold the file's pages after a "
			       "snapshot made the RAM private; leave fixed-buffers out",
			       dd.path ? dd.path : "(null)");
	st = atomic_load(&m->state);
	if (st == MVM_CREATED) {
		if (m->restore_dir)
			snapshot_disk_inherit(m, m->ndisks, &dd, id);
		ret = mvm_disk_slot_fill(m, &dd, err, errlen);
		if (!ret)
			m->ndisks++;
		return ret;
	}
	if (st != MVM_RUNNING)
		return err_set(err, errlen, -EBUSY, "disk %s: the VM is %s; add disks before "
			       "mvm_prepare, or hot-plug them into a running VM",
			       dd.path ? dd.path : "(null)", st == MVM_PREPARED ? "prepared" :
			       st == MVM_ENDED ? "ended" : "not startable (its start failed)");
	pthread_mutex_lock(&m->ctl_lock);
	ret = mvm_disk_hotplug(m, &dd, err, errlen);
	pthread_mutex_unlock(&m->ctl_lock);
	return ret;
}

int mvm_get_disk(const struct mvm *m, unsigned disk, struct mvm_disk *out, size_t size)
{
	if (!m || !out || size < MVM_DISK_SIZE_MIN)
		return -EINVAL;
	if (disk >= __atomic_load_n(&m->ndisks, __ATOMIC_ACQUIRE) || m->disks[disk].removed)
		return -ENOENT;
	mvm_give(out, size, &m->disks[disk].opts, sizeof(m->disks[disk].opts));
	return 0;
}

int mvm_get_config(const struct mvm *m, struct mvm_config *out, size_t size)
{
	if (!m || !out || size < MVM_CONFIG_SIZE_MIN)
		return -EINVAL;
	mvm_give(out, size, &m->cfg, sizeof(m->cfg));
	return 0;
}

int mvm_get_vsock(const struct mvm *m, struct mvm_vsock *out, size_t size)
{
	if (!m || !out || size < MVM_VSOCK_SIZE_MIN)
		return -EINVAL;
	if (!m->has_vsock)
		return -ENOENT;
	mvm_give(out, size, &m->vsock, sizeof(m->vsock));
	return 0;
}

unsigned mvm_disk_count(const struct mvm *m)
{
	return m ? __atomic_load_n(&m->ndisks, __ATOMIC_RELAXED) : 0;
}

/* Wait for the guest to power disk's slot off: 0, -ETIMEDOUT at
 * deadline, -ESHUTDOWN when the VM stops meanwhile (looked at every
 * 100 ms: its control thread then waits for ctl_lock, which the caller
 * holds). */
static int mvm_wait_eject(struct mvm *m, struct pcie_port *port, uint64_t deadline)
{
	for (;;) {
		uint64_t now = mono_ns(), until = now + 100000000ull;
		int r;

		if (vm_stop_status(&m->vm) >= 0)
			return -ESHUTDOWN;
		r = pcie_port_wait_eject(port, until < deadline ? until : deadline);
		if (r != -ETIMEDOUT || until >= deadline)
			return r;
	}
}

static int mvm_pause_locked(struct mvm *m, const char *call, char *err, size_t errlen);
static int mvm_resume_locked(struct mvm *m, const char *call, char *err, size_t errlen);

/* A disk out of its subchannel (s390x): the channel subsystem has no
 * eject handshake, so the device goes at once, as QEMU's virtio-ccw
 * unplug does, and a channel report tells the guest. Unless by surprise,
 * the VM is paused around it (if it runs): its I/O in flight completes to
 * the guest first, so nothing the guest was answered is lost and nothing
 * it waits for is dropped. ctl_lock held. */
static int mvm_disk_unplug_ccw(struct mvm *m, unsigned disk, unsigned flags, char *err,
			       size_t errlen)
{
	struct mvm_disk_slot *s = &m->disks[disk];
	bool pause = !(flags & MVM_DISK_REMOVE_SURPRISE) && !atomic_load(&m->paused);
	char rerr[256];
	int r;

	if (pause) {
		r = mvm_pause_locked(m, "mvm_disk_remove", err, errlen);
		if (r)
			return r;
	}
	r = arch_ccw_slot_set(&m->vm, m->ccw_sch[s->hslot - 1], false);
	if (r)
		log_err(&m->log, "disk %u (%s): hot-plug slot %u: the guest was not told it went "
			"(%s): it finds out at its next channel report or boot", disk, s->path,
			s->hslot, strerror(-r));
	/* A resume that fails leaves the VM paused: say so (the disk is out). */
	if (pause && mvm_resume_locked(m, "mvm_disk_remove", rerr, sizeof(rerr)))
		log_err(&m->log, "%s", rerr);
	return 0;
}

int mvm_disk_remove(struct mvm *m, unsigned disk, unsigned flags, int timeout_ms, char *err,
		    size_t errlen)
{
	struct mvm_disk_slot *s;
	struct virtio_dev *dev;
	int r;

	if (!m)
		return err_set(err, errlen, -EINVAL, "mvm_disk_remove: vm is NULL");
	if (flags & ~MVM_DISK_REMOVE_SURPRISE)
		return err_set(err, errlen, -EINVAL, "mvm_disk_remove: flags 0x%x: unknown; give "
			       "0 or MVM_DISK_REMOVE_SURPRISE", flags);
	if (timeout_ms < 0)
		return err_set(err, errlen, -EINVAL, "mvm_disk_remove: timeout %d ms: give 0 or "
			       "more (the guest takes 5 s to release a disk)", timeout_ms);
	pthread_mutex_lock(&m->ctl_lock);
	r = mvm_check_running(m, "mvm_disk_remove", err, errlen);
	if (r)
		goto unlock;
	if (disk >= m->ndisks) {
		r = err_set(err, errlen, -EINVAL, "mvm_disk_remove: disk %u: the VM has %u disk%s; "
			    "give its number, from 0", disk, m->ndisks, m->ndisks == 1 ? "" : "s");
		goto unlock;
	}
	s = &m->disks[disk];
	if (s->removed) {
		r = err_set(err, errlen, -ENODEV, "mvm_disk_remove: disk %u (%s) was removed "
			    "already", disk, s->path);
		goto unlock;
	}
	if (!s->hslot) {
		r = err_set(err, errlen, -EINVAL, "mvm_disk_remove: disk %u (%s) is not on a "
			    "hot-plug slot (it was given before the start); only disks added to "
			    "the running VM can be removed", disk, s->path);
		goto unlock;
	}
	if (m->nccw) {
		r = mvm_disk_unplug_ccw(m, disk, flags, err, errlen);
		if (r)
			goto unlock;
	} else if (flags & MVM_DISK_REMOVE_SURPRISE) {
		pcie_port_surprise_remove(s->port);
	} else if (pcie_port_occupied(s->port)) {
		/* Else the guest powered the slot off already (on its own, or
		 * after an earlier call gave up waiting). */
		if (atomic_load(&m->paused)) {
			r = err_set(err, errlen, -EBUSY, "mvm_disk_remove: disk %u: the VM is "
				    "paused and cannot release it; resume it first, or remove it "
				    "by surprise", disk);
			goto unlock;
		}
		pcie_port_press_button(s->port);
		r = mvm_wait_eject(m, s->port, mono_ns() + (uint64_t)timeout_ms * 1000000ull);
		if (r == -ETIMEDOUT)
			r = err_set(err, errlen, r, "mvm_disk_remove: disk %u (%s): the guest did "
				    "not release it within %d ms (Linux's pciehp takes 5 s); wait "
				    "longer, or remove it by surprise", disk, s->path, timeout_ms);
		else if (r)
			r = err_set(err, errlen, r, "mvm_disk_remove: disk %u: the VM stopped",
				    disk);
		if (r)
			goto unlock;
	}
	/* The guest no longer sees it (its port detached it, or its
	 * subchannel shows no device): off the disk list, then the slot's
	 * spare reset (its queues stopped, host I/O in flight cancelled; a
	 * subchannel's was reset as it went) and emptied (its image closed
	 * and unlocked), for the next disk. */
	pthread_mutex_lock(&m->devs_lock);
	dev = s->dev;
	s->dev = NULL;
	s->removed = true;
	pthread_mutex_unlock(&m->devs_lock);
	if (!m->nccw)
		virtio_pci_power_on(dev);
	pthread_mutex_lock(&m->devs_lock);
	blk_empty(dev);
	pthread_mutex_unlock(&m->devs_lock);
unlock:
	pthread_mutex_unlock(&m->ctl_lock);
	return r;
}

/* Disk disk's bus address into buf (ccw: Linux's bus id too, else
 * PCI's only). */
static int mvm_disk_address(struct mvm *m, unsigned disk, bool ccw, char *buf, size_t len)
{
	unsigned bus, slot, devno;
	int r = -ENODEV, n = -1;

	if (!m || !buf)
		return -EINVAL;
	pthread_mutex_lock(&m->devs_lock);
	if (disk >= m->ndisks) {
		r = -EINVAL;
	} else if (m->disks[disk].dev) {
		r = virtio_pci_address(m->disks[disk].dev, &bus, &slot);
		if (!r)
			n = snprintf(buf, len, "0000:%02x:%02x.0", bus, slot);
		if (r && ccw) {
			r = virtio_ccw_devno(m->disks[disk].dev, &devno);
			if (!r)
				n = snprintf(buf, len, "0.0.%04x", devno);
		}
		if (!r)
			r = n < 0 || (size_t)n >= len ? -ENOSPC : 0;
	}
	pthread_mutex_unlock(&m->devs_lock);
	return r;
}

int mvm_disk_pci_address(struct mvm *m, unsigned disk, char *buf, size_t len)
{
	return mvm_disk_address(m, disk, false, buf, len);
}

int mvm_disk_bus_address(struct mvm *m, unsigned disk, char *buf, size_t len)
{
	return mvm_disk_address(m, disk, true, buf, len);
}

static int mvm_vsock_fill(struct mvm *m, const struct mvm_vsock *vs, char *err, size_t errlen);

int mvm_add_vsock(struct mvm *m, const struct mvm_vsock *theirs, char *err, size_t errlen)
{
	struct mvm_vsock v;
	int ret;

	if (!m || !theirs)
		return err_set(err, errlen, -EINVAL, "mvm_add_vsock: %s is NULL",
			       m ? "vsock" : "vm");
	mvm_vsock_init(&v);
	ret = mvm_take(&v, sizeof(v), theirs, theirs->size, MVM_VSOCK_SIZE_MIN, "vsock",
		       "mvm_vsock_init", err, errlen);
	if (ret)
		return ret;
	if (atomic_load(&m->state) != MVM_CREATED)
		return err_set(err, errlen, -EBUSY, "vsock: the VM has been started; add it "
			       "before mvm_start");
	if (m->restore_dir)
		snapshot_vsock_inherit(m, &v);
	return mvm_vsock_fill(m, &v, err, errlen);
}

/* The VM's vsock device from v, checked. */
static int mvm_vsock_fill(struct mvm *m, const struct mvm_vsock *vs, char *err, size_t errlen)
{
	struct mvm_vsock v = *vs;
	int ret;

	if (m->has_vsock)
		return err_set(err, errlen, -EEXIST, "vsock %s: the VM has one already (at %s); "
			       "give one --vsock", v.socket ? v.socket : "(null)", m->vsock_path);
	/* The device's table: the limits mvm_vsock_parse and mvm(1) take. */
	ret = kv_check(&vsock_keys, &v, v.socket ? v.socket : "(no socket)", err, errlen);
	if (ret)
		return ret;
	ret = mvm_transport_check(v.transport, "vsock", v.socket, err, errlen);
	if (ret)
		return ret;
	m->vsock = v;
	m->vsock.size = sizeof(m->vsock);
	m->vsock.socket = strcpy(m->vsock_path, v.socket);
	m->has_vsock = true;
	return 0;
}

/* The PCI bus, brought up by the first function that needs it. */
static int mvm_pci_bus(struct mvm *m, char *err, size_t errlen)
{
	int ret;

	if (m->pci_up)
		return 0;
	ret = pci_bus_init(&m->pci, &m->vm, arch_layout.pci_mmio_base, arch_layout.pci_mmio_end,
			   arch_layout.pci_intx_base, arch_layout.fixed_mmio,
			   arch_layout.nfixed_mmio);
	if (ret)
		return err_set(err, errlen, ret, "PCI bus: %s", strerror(-ret));
	m->pci_up = true;
	return 0;
}

/* pvpanic where the board has PCI, after the disks (which keep their
 * slots). Before vCPUs start. */
static int mvm_attach_pvpanic(struct mvm *m, char *err, size_t errlen)
{
	int ret;

	if (!m->cfg.pvpanic || arch_layout.pci_mmio_end == 0)
		return 0;
	ret = mvm_pci_bus(m, err, errlen);
	if (ret)
		return ret;
	ret = pvpanic_attach(&m->vm, &m->pci);
	if (ret)
		return err_set(err, errlen, ret, "pvpanic on: cannot attach the device: %s; "
			       "turn it off to go without", strerror(-ret));
	return 0;
}

/* The hot-plug slots' root ports, last on bus 0 (the cold-plugged
 * functions keep their slots). Before vCPUs start. */
static int mvm_attach_ports(struct mvm *m, char *err, size_t errlen)
{
	int ret;

	/* A channel subsystem's slots are subchannels: mvm_attach_spares. */
	if (!m->cfg.hotplug_slots || arch_layout.has_ccw)
		return 0;
	ret = mvm_pci_bus(m, err, errlen);
	if (ret)
		return ret;
	while (m->nports < m->cfg.hotplug_slots) {
		ret = pcie_port_init(&m->ports[m->nports], &m->pci, m->nports + 1);
		if (ret)
			return err_set(err, errlen, ret, "hotplug_slots %u: cannot make root port "
				       "%u: %s; give fewer", m->cfg.hotplug_slots, m->nports + 1,
				       strerror(-ret));
		m->nports++;
	}
	return 0;
}

/* A virtio device onto its transport (the PCI bus brought up where it is
 * the first to need it); on failure the device is destroyed. what and
 * name say whose it is in the message ("disk", its path). */
static int mvm_attach_virtio(struct mvm *m, struct virtio_dev *dev, enum mvm_transport t,
			     const char *what, const char *name, char *err, size_t errlen)
{
	const char *kind = t == MVM_TRANSPORT_PCI ? "virtio-pci" :
			   t == MVM_TRANSPORT_CCW ? "virtio-ccw" : "virtio-mmio";
	int ret;

	if (t == MVM_TRANSPORT_PCI) {
		ret = mvm_pci_bus(m, err, errlen);
		if (ret) {
			virtio_dev_destroy(dev);
			return ret;
		}
	}
	if (t == MVM_TRANSPORT_CCW)
		ret = arch_attach_ccw(&m->vm, dev);
	else
		ret = t == MVM_TRANSPORT_PCI ? virtio_pci_attach(&m->vm, &m->pci, dev) :
					       virtio_mmio_attach(&m->vm, dev);
	if (ret) {
		virtio_dev_destroy(dev);
		return err_set(err, errlen, ret, "%s %s: cannot attach the %s device: %s", what,
			       name, kind, strerror(-ret));
	}
	return 0;
}

/* Every disk on its transport (vda, vdb, ... in order). The PCI bus exists
 * when some disk uses it, or pvpanic does. Before vCPUs start. */
static int mvm_attach_disks(struct mvm *m, char *err, size_t errlen)
{
	unsigned i;
	int ret;

	for (i = 0; i < m->ndisks; i++) {
		struct mvm_disk_slot *s = &m->disks[i];
		struct virtio_dev *dev = NULL;

		if (s->restore_slot)
			continue;       /* mvm_attach_spares */
		ret = mvm_disk_dev_new(m, i, &dev, err, errlen);
		if (ret)
			return ret;
		ret = mvm_attach_virtio(m, dev, s->opts.transport, "disk", s->opts.path, err,
					errlen);
		if (ret)
			return ret;
		s->dev = dev;
	}
	return 0;
}

/* Each hot-plug slot's spare disk, after every other device, in slot
 * order (the VM's device list is the same whatever was plugged where,
 * so a snapshot's lines up with its restore's): made with the slot's
 * shape behind its port, then taken off the bus until a disk is plugged.
 * A restore's disk that the guest had in a slot fills that slot's spare
 * and stays behind its port, not announced: the port's state says the
 * guest knows it. */
static int mvm_attach_spares(struct mvm *m, char *err, size_t errlen)
{
	struct mvm_disk shape;
	unsigned p, i;
	int ret;

	for (i = 0; i < m->ndisks; i++)
		if (m->disks[i].restore_slot > m->cfg.hotplug_slots)
			return err_set(err, errlen, -EINVAL, "restore %s: disk %u was in hot-plug "
				       "slot %u; the VM has %u", m->restore_dir, i,
				       m->disks[i].restore_slot, m->cfg.hotplug_slots);
	mvm_disk_init(&shape, NULL);
	shape.queues = m->cfg.hotplug_queues;
	for (p = 0; p < m->cfg.hotplug_slots; p++) {
		struct pcie_port *port = &m->ports[p];
		struct mvm_disk_slot *s = NULL;
		struct virtio_dev *dev;

		ret = blk_dev_spare(&shape, &m->vm.mem, &dev, err, errlen);
		if (ret)
			return ret;
		/* "ID-hN": hot-plug slot N's, whatever disk is in it. */
		snprintf(dev->thread_prefix, sizeof(dev->thread_prefix), "%s-h%u", m->id,
			 (p + 1) % 10u);  /* p < MVM_MAX_HOTPLUG_SLOTS: what fits 15 bytes */
		ret = arch_layout.has_ccw ? arch_ccw_slot_attach(&m->vm, dev, &m->ccw_sch[p])
					  : virtio_pci_attach_port(&m->vm, &m->pci, port, dev);
		if (ret) {
			virtio_dev_destroy(dev);
			return err_set(err, errlen, ret, "hot-plug slot %u: cannot attach its "
				       "virtio-%s device: %s", p + 1,
				       mvm_transport_name(shape.transport), strerror(-ret));
		}
		m->spares[p] = dev;
		if (arch_layout.has_ccw)
			m->nccw++;      /* empty until a disk is plugged, or restored */
		for (i = 0; i < m->ndisks && !s; i++)
			if (m->disks[i].restore_slot == p + 1)
				s = &m->disks[i];
		if (!s) {
			if (!arch_layout.has_ccw)
				pcie_port_detach(port);
			continue;
		}
		ret = mvm_spare_fits(m, &s->opts, err, errlen);
		if (!ret)
			ret = blk_fill(dev, &s->img, &s->opts, s->group ? &s->group->rl : NULL, err,
				       errlen);
		if (ret)
			return ret;
		s->dev = dev;
		s->hslot = p + 1;
		/* A subchannel slot holds it once the channel subsystem's state
		 * is restored (arch_vm_load): snapshot_load_cpus checks. */
		s->port = arch_layout.has_ccw ? NULL : port;
	}
	return 0;
}

/* The vsock device on its transport, after the disks (which keep their
 * places on the bus). Its socket is made here. Before vCPUs start. */
static int mvm_attach_vsock(struct mvm *m, char *err, size_t errlen)
{
	struct virtio_dev *dev;
	int ret;

	if (!m->has_vsock)
		return 0;
	ret = vsock_dev_new(&m->vsock, &m->vm.mem, &dev, err, errlen);
	if (ret)
		return ret;
	/* "ID-vs", then the worker's "q0". */
	snprintf(dev->thread_prefix, sizeof(dev->thread_prefix), "%.8s-vs", m->id);
	ret = mvm_attach_virtio(m, dev, m->vsock.transport, "vsock", m->vsock_path, err, errlen);
	if (ret)
		return ret;
	m->vsock_dev = dev;
	return 0;
}

static void mvm_console_flush(struct mvm *m)
{
	size_t n = m->con.ops->rx_push(m->con.dev, m->carry, m->ncarry);

	memmove(m->carry, m->carry + n, m->ncarry - n);
	m->ncarry -= n;
}

/* One read of console input; returns true when the user typed Ctrl-A x. */
static bool mvm_console_read(struct mvm *m)
{
	uint8_t in[MVM_CONSOLE_CHUNK];
	size_t outn;
	ssize_t n;
	bool quit;

	n = read(m->cfg.console_in, in, sizeof(in));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return false;
	if (n <= 0) {
		m->con_open = false;    /* EOF or error: the guest just gets no input */
		return false;
	}
	quit = console_escape_filter(&m->esc, in, n, m->carry + m->ncarry, &outn);
	m->ncarry += outn;
	mvm_console_flush(m);
	return quit;
}

/* Stop what runs: vCPUs first (nothing then touches devices from the guest
 * side), then every device's threads. */
static void mvm_stop_threads(struct mvm *m, unsigned started)
{
	unsigned i;

	pthread_mutex_lock(&m->threads_lock);
	m->threads_going = true;
	pthread_mutex_unlock(&m->threads_lock);
	/* Paused vCPUs, and a pause waiting for them, see the stop. */
	vcpu_pause_wake(&m->vm);
	for (i = 0; i < started; i++)
		vcpu_kick(&m->vcpus[i]);
	for (i = 0; i < started; i++)
		vcpu_join(&m->vcpus[i]);
	/* Not in the middle of a pause's quiesce or a resume: those hold
	 * ctl_lock, and end soon once the vCPUs are gone. */
	pthread_mutex_lock(&m->ctl_lock);
	for (i = 0; i < m->vm.ndevices; i++)
		m->vm.devices[i].ops->stop(m->vm.devices[i].dev);
	m->threads_stopped = true;
	pthread_mutex_unlock(&m->ctl_lock);
}

/* Reset the eventfd a console device writes when output arrives: the
 * drain that follows sees everything written before. */
static void mvm_efd_reset(int efd)
{
	uint64_t v;

	if (read(efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing arrived */
	}
}

/* The VM has stopped (vCPUs joined, so no more output): write what the
 * guest wrote before it ended. After the guest's own end (exit port,
 * poweroff, an error) this waits for a slow reader as long as it takes,
 * so nothing the guest wrote before its exit is lost; mvm_stop (SIGTERM),
 * Ctrl-A x and mvm_destroy end the wait (and a stop they asked for does
 * not wait at all): then what the fd does not take at once is dropped. */
static void mvm_console_finish(struct mvm *m)
{
	struct kvm_state *ks = vm_kvm(&m->vm);

	if (vm_stop_reason(&m->vm) == VM_STOP_REQUESTED)
		atomic_store(&m->hurry, true);
	mvm_efd_reset(ks->stop_efd);
	for (;;) {
		struct pollfd p[3] = {
			{ .fd = ks->stop_efd, .events = POLLIN },
			{ .fd = -1, .events = POLLOUT },
			{ .fd = -1, .events = POLLIN },
		};
		bool quit;

		if (conout_drain(&m->out))
			return;
		/* Pairs with mvm_stop's store before its stop_efd write. */
		if (atomic_load(&m->hurry))
			break;
		p[1].fd = conout_wait_fd(&m->out);
		if (p[1].fd < 0)
			continue;       /* more to move, nothing to wait for */
		/* Ctrl-A x still works; other input has no guest to go to. */
		if (m->con_open && m->esc.raw)
			p[2].fd = m->cfg.console_in;
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents)
			mvm_efd_reset(ks->stop_efd);
		if (p[2].revents & POLLNVAL)
			m->con_open = false;
		if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
			uint8_t in[MVM_CONSOLE_CHUNK], out[MVM_CONSOLE_CHUNK + 1];
			ssize_t n = read(m->cfg.console_in, in, sizeof(in));
			size_t outn;

			if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN)))
				m->con_open = false;
			quit = n > 0 && console_escape_filter(&m->esc, in, (size_t)n, out, &outn);
			if (quit)
				atomic_store(&m->hurry, true);
		}
	}
	conout_discard(&m->out);
}

/* The halt probe's round, once a second while the VM runs (not paused):
 * a guest whose every vCPU answered two rounds in a row as stopped for
 * good (vcpu_probe_stopped: x86 Linux's halt, or its poweroff without
 * ACPI) has powered off, and the VM ends so, status 0, as Firecracker's
 * and Cloud Hypervisor's do when their guest powers off through ACPI.
 * Returns the poll timeout (ms) until the next round; *streak and *next
 * are the control thread's. */
#define MVM_HALT_PROBE_NS 1000000000ull
static int mvm_halt_probe(struct mvm *m, unsigned *streak, uint64_t *next)
{
	uint64_t now = mono_ns();

	if (now >= *next) {
		*next = now + MVM_HALT_PROBE_NS;
		if (atomic_load(&m->paused)) {
			*streak = 0;
		} else if (!vcpu_probe_stopped(m->vcpus, m->nvcpus)) {
			*streak = 0;
		} else if (++*streak == 2) {
			log_msg(&m->log, LOG_INFO, "the guest halted: every vCPU has stopped with "
				"interrupts off (a poweroff or halt without ACPI); the VM ends as "
				"powered off");
			vm_request_stop(&m->vm, VM_STOP_POWEROFF, MVM_EXIT_OK, NULL);
		}
	}
	return (int)((*next - now + 999999) / 1000000);
}

/* The control thread: console input and output until a stop request,
 * then teardown of the running parts, the guest's last output and the
 * exit record. */
static void *mvm_control(void *arg)
{
	struct mvm *m = arg;
	struct kvm_state *ks = vm_kvm(&m->vm);
	uint64_t one = 1, next_probe = mono_ns() + MVM_HALT_PROBE_NS;
	unsigned stopped_rounds = 0;
	int status;

	thread_begin(&m->control_hs, m->ctl_name);
	if (m->cfg.sandbox) {
		struct sandbox_fds fds = SANDBOX_NO_FDS;
		int r;

		fds.vm = m->vm.vm_fd;
		r = sandbox_enter(SANDBOX_CONTROL, &fds);
		if (r) {
			thread_ready(&m->control_hs, r);
			return NULL;
		}
	}
	thread_ready(&m->control_hs, 0);
	for (;;) {
		struct pollfd p[4] = {
			{ .fd = ks->stop_efd, .events = POLLIN },
			{ .fd = -1, .events = POLLIN },
			{ .fd = m->tx_efd, .events = POLLIN },
			{ .fd = -1, .events = POLLOUT },
		};
		int timeout = -1;

		if (m->ncarry)
			mvm_console_flush(m);
		if (m->con_open) {
			if (!m->ncarry && m->con.ops->rx_room(m->con.dev))
				p[1].fd = m->cfg.console_in;
			else
				timeout = 10;   /* the guest has not drained the FIFO yet */
		}
		/* Reset before the drain: output that arrives after it
		 * rewrites tx_efd (devices/console_buf.c). */
		mvm_efd_reset(m->tx_efd);
		if (!conout_drain(&m->out)) {
			p[3].fd = conout_wait_fd(&m->out);
			if (p[3].fd < 0)
				timeout = 0;    /* more to move at once */
		}
		if (arch_halt_probe()) {
			int probe_ms = mvm_halt_probe(m, &stopped_rounds, &next_probe);

			if (timeout < 0 || probe_ms < timeout)
				timeout = probe_ms;
		}
		if (poll(p, 4, timeout) < 0) {
			if (errno == EINTR)
				continue;
			log_err(&m->log, "poll: %s", strerror(errno));
			vm_request_stop(&m->vm, VM_STOP_HOST_ERROR, MVM_EXIT_INTERNAL,
					"the control thread's poll failed");
			break;
		}
		if (p[0].revents)
			break;
		if (p[1].revents & POLLNVAL) {
			/* The caller closed console_in under the VM: no more input. */
			log_warn(&m->log, "console_in %d was closed while the VM runs; no more "
				 "console input", m->cfg.console_in);
			m->con_open = false;
			continue;
		}
		if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) && mvm_console_read(m))
			vm_request_stop(&m->vm, VM_STOP_REQUESTED, MVM_EXIT_OK, NULL);
	}
	mvm_stop_threads(m, m->cfg.cpus);
	mvm_console_finish(m);
	status = vm_stop_status(&m->vm);
	m->exit.reason = (enum mvm_exit_reason)vm_stop_reason(&m->vm);
	m->exit.reboot = m->exit.reason == MVM_EXIT_POWEROFF && vm_stop_reboot(&m->vm);
	m->exit.status = status < 0 ? MVM_EXIT_INTERNAL : status;
	snprintf(m->exit.message, sizeof(m->exit.message), "%s", vm_stop_message(&m->vm));
	/* Pairs with mvm_wait's poll/read of wait_efd: the exit record is
	 * complete before the eventfd says so. */
	if (write(m->wait_efd, &one, sizeof(one)) < 0) {
		/* cannot fail: a fresh non-blocking eventfd */
	}
	return NULL;
}

/* The kernel, initrd and command line (with the devices' fragments) into
 * guest RAM: *m->boot says how the vCPUs start. */
static int mvm_boot_load(struct mvm *m, char *err, size_t errlen)
{
	struct arch_boot_cfg bcfg;
	int ret;

	if (vm_compose_cmdline(m->vm.cmdline_extra, m->cmdline, m->cmdline_buf,
			       sizeof(m->cmdline_buf)))
		return err_set(err, errlen, -ENOSPC, "cmdline: too long with the devices' "
			       "parameters; shorten it");
	bcfg = (struct arch_boot_cfg){
		.kernel_path = m->kernel, .initrd_path = m->initrd, .cmdline = m->cmdline_buf,
		.mem_size = m->cfg.mem, .ncpus = m->cfg.cpus,
		.kernel_image = m->kimage.buf ? &m->kimage : NULL,
	};
	/* arch_boot_load checks the kernel against the final command line
	 * (mvm_create checked everything else already). */
	ret = arch_boot_load(&m->vm, &bcfg, &m->boot, err, errlen);
	boot_image_free(&m->kimage);
	return ret;
}

/* A restore's vsock device: the caller's (another CID and socket, a
 * clone's), or the snapshot's. */
static int mvm_restore_vsock(struct mvm *m, char *err, size_t errlen)
{
	struct mvm_vsock v;
	char buf[1024];
	int ret;

	if (m->has_vsock)
		return 0;
	ret = snapshot_vsock(m, &v, buf, sizeof(buf), err, errlen);
	if (ret == -ENOENT)
		return 0;
	return ret ? ret : mvm_vsock_fill(m, &v, err, errlen);
}

/* A restore's disks: the caller's, in the snapshot's number, or the
 * snapshot's own from their paths; each one the guest had in a hot-plug
 * slot goes back there. */
static int mvm_restore_disks(struct mvm *m, char *err, size_t errlen)
{
	unsigned i, n = snapshot_ndisks(m);
	char buf[1024];
	int ret;

	if (m->ndisks && m->ndisks != n)
		return err_set(err, errlen, -EINVAL, "restore %s: the snapshot's VM had %u "
			       "disk(s), %u given; give %u, or none to open the snapshot's own",
			       m->restore_dir, n, m->ndisks, n);
	/* A failure leaves the images opened so far to mvm_destroy. */
	for (i = m->ndisks; i < n; i++) {
		struct mvm_disk d;

		ret = snapshot_disk(m, i, &d, buf, sizeof(buf), err, errlen);
		if (!ret)
			ret = mvm_disk_slot_fill(m, &d, err, errlen);
		if (ret)
			return ret;
		m->ndisks++;
	}
	for (i = 0; i < n; i++) {
		struct mvm_disk_slot *s = &m->disks[i];
		enum mvm_transport t = arch_layout.has_ccw ? MVM_TRANSPORT_CCW : MVM_TRANSPORT_PCI;

		s->restore_slot = snapshot_disk_slot(m, i);
		if (s->restore_slot && s->opts.transport != t)
			return err_set(err, errlen, -EINVAL, "restore %s: disk %u (%s) was in "
				       "hot-plug slot %u, which is on %s; give it transport=%s, or "
				       "leave transport out", m->restore_dir, i, s->opts.path,
				       s->restore_slot, mvm_transport_name(t), mvm_transport_name(t));
	}
	return 0;
}

/* cfg.mem_file, emptied and sized for guest RAM. */
static int mvm_mem_file_open(struct mvm *m, char *err, size_t errlen)
{
	struct stat st;

	m->mem_file_fd = open(m->mem_file, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (m->mem_file_fd < 0)
		return err_set(err, errlen, -errno, "mem_file %s: %s; give a file mvm may create "
			       "or write", m->mem_file, strerror(errno));
	if (fstat(m->mem_file_fd, &st) || !S_ISREG(st.st_mode))
		return err_set(err, errlen, -EINVAL, "mem_file %s: not a regular file; give a "
			       "file's path", m->mem_file);
	/* Emptied first: nothing of an earlier guest's RAM is read again. */
	if (ftruncate(m->mem_file_fd, 0) || ftruncate(m->mem_file_fd, (off_t)m->cfg.mem))
		return err_set(err, errlen, -errno, "mem_file %s: cannot size it to %llu MiB: %s",
			       m->mem_file, (unsigned long long)(m->cfg.mem >> 20),
			       strerror(errno));
	return 0;
}

int mvm_prepare(struct mvm *m, char *err, size_t errlen)
{
	int expected = MVM_CREATED, kvm_fd, ret;
	unsigned i, max;
	bool cow;

	if (!m)
		return err_set(err, errlen, -EINVAL, "mvm_prepare: vm is NULL");
	if (!atomic_compare_exchange_strong(&m->state, &expected, MVM_FAILED))
		return expected == MVM_FAILED ? mvm_failed_err("mvm_prepare", err, errlen) :
		       err_set(err, errlen, -EBUSY, "mvm_prepare: the VM was prepared already");
	m->phase_ns[MVM_PHASE_CREATE] = mono_ns();
	/* From here on, any failure leaves the VM FAILED (destroy only). */
	ret = snapshot_root_open(m, err, errlen);
	if (ret)
		return ret;
	if (m->image_root) {
		m->image_root_fd = open(m->image_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (m->image_root_fd < 0)
			return err_set(err, errlen, -errno, "image_dir %s: %s; give a directory",
				       m->image_root, strerror(errno));
	}
	if (m->restore_dir) {
		/* Groups first: the snapshot's disks may name them. */
		ret = snapshot_groups_make(m, err, errlen);
		if (!ret)
			ret = mvm_restore_disks(m, err, errlen);
		if (!ret)
			ret = mvm_restore_vsock(m, err, errlen);
		if (ret)
			return ret;
	}
	if (m->ndisks || m->has_vsock) {
		/* Said now, not as a queue that fails at the guest's DRIVER_OK. */
		ret = vqw_probe();
		if (ret)
			return err_set(err, errlen, -ENOTSUP, "io_uring: cannot create a queue "
				       "thread's ring (%s); mvm needs Linux 6.1 or newer with "
				       "io_uring enabled (sysctl kernel.io_uring_disabled=0)",
				       strerror(-ret));
	}
	kvm_fd = kvm_open(err, errlen);
	if (kvm_fd < 0)
		return kvm_fd == -ENOTSUP ? -ENOTSUP : -ENODEV;
	max = kvm_max_vcpus(kvm_fd);
	if (max && m->cfg.cpus > max) {
		close(kvm_fd);
		return err_set(err, errlen, -EINVAL, "cpus %u: KVM on this host supports at most "
			       "%u vCPUs; give %u or fewer", m->cfg.cpus, max, max);
	}
	cow = arch_ram_cow_ok(kvm_fd);
	if (m->mem_file && !cow) {
		close(kvm_fd);
		return err_set(err, errlen, -ENOTSUP, "mem_file %s: KVM on this host cannot run a "
			       "guest in file-backed RAM (s390x: no KVM_CAP_S390_COW, the CPU lacks "
			       "ESOP); leave mem_file out", m->mem_file);
	}
	if (m->mem_file) {
		ret = mvm_mem_file_open(m, err, errlen);
		if (ret) {
			close(kvm_fd);
			return ret;
		}
	}
	/* A snapshot's memory mapped privately, or where the host cannot
	 * take copy-on-write guest RAM, copied into the VM's own. */
	ret = kvm_vm_create(&m->vm, kvm_fd, m->cfg.mem, m->cfg.cpus,
			    m->mem_file ? m->mem_file_fd : cow ? m->snap_mem_fd : -1,
			    m->mem_file != NULL, err, errlen);
	if (ret)
		return ret;
	if (m->snap_mem_fd >= 0 && !cow) {
		ret = snapshot_memory_copy(m, err, errlen);
		if (ret)
			return ret;
	}
	if (m->snap_mem_fd >= 0) {
		close(m->snap_mem_fd);  /* the mapping keeps the file */
		m->snap_mem_fd = -1;
	}
	m->vm_up = true;
	m->phase_ns[MVM_PHASE_KVM] = mono_ns();
	m->vm.log = m->log;
	m->vm.kick_signal = m->cfg.kick_signal;
	m->vm.sandbox = m->cfg.sandbox;     /* before the devices copy it */
	m->wait_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (m->wait_efd < 0)
		return err_set(err, errlen, -errno, "eventfd: %s", strerror(errno));

	m->tx_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (m->tx_efd < 0)
		return err_set(err, errlen, -errno, "eventfd: %s", strerror(errno));

	ret = arch_board_create(&m->vm, &m->con);
	if (ret)
		return err_set(err, errlen, ret, "board devices: %s", strerror(-ret));
	m->con.ops->set_tx_wake(m->con.dev, m->tx_efd);
	ret = conout_init(&m->out, &m->con, m->cfg.console_out, m->cfg.console_fn,
			  m->cfg.console_opaque, &m->log);
	if (ret)
		return err_set(err, errlen, ret, "console_out %d: %s; give an open fd or -1",
			       m->cfg.console_out, strerror(-ret));
	m->out_up = true;
	ret = mvm_attach_disks(m, err, errlen);
	if (ret)
		return ret;
	ret = mvm_attach_vsock(m, err, errlen);
	if (ret)
		return ret;
	ret = mvm_attach_pvpanic(m, err, errlen);
	if (ret)
		return ret;
	ret = mvm_attach_ports(m, err, errlen);
	if (!ret)
		ret = mvm_attach_spares(m, err, errlen);
	if (ret)
		return ret;
	m->phase_ns[MVM_PHASE_DEVICES] = mono_ns();

	ret = m->restore_dir ? 0 : mvm_boot_load(m, err, errlen);
	if (ret)
		return ret;
	m->phase_ns[MVM_PHASE_LOAD] = mono_ns();

	m->vcpus = calloc(m->cfg.cpus, sizeof(*m->vcpus));
	if (!m->vcpus)
		return err_set(err, errlen, -ENOMEM, "out of memory for %u vCPUs", m->cfg.cpus);
	for (i = 0; i < m->cfg.cpus; i++) {
		ret = vcpu_create(&m->vcpus[i], &m->vm, i);
		if (ret)
			return err_set(err, errlen, ret, "vCPU %u: KVM_CREATE_VCPU: %s", i,
				       strerror(-ret));
		m->nvcpus++;
		ret = arch_vcpu_init(&m->vcpus[i], m->cfg.cpus, m->boot, err, errlen);
		if (ret)
			return ret;
	}
	if (m->restore_dir) {
		ret = snapshot_load_cpus(m, err, errlen);
		if (ret)
			return ret;
	}
	m->phase_ns[MVM_PHASE_VCPUS] = mono_ns();
	ret = vcpu_signal_get(m->cfg.kick_signal);
	if (ret)
		return mvm_kick_signal_err(m->cfg.kick_signal, ret, err, errlen);
	m->kick_held = true;

	m->con_open = m->cfg.console_in >= 0;
	m->esc.raw = m->cfg.console_escape;
	atomic_store(&m->state, MVM_PREPARED);
	return 0;
}

/* mvm_start, and with confine (and the sandbox on) the calling thread's
 * own filter, all before the gate lets the vCPUs run: the guest's first
 * instruction comes after every thread of the VM, the caller's included,
 * is confined. Any filter that cannot be installed fails the start. */
static int mvm_start_common(struct mvm *m, bool confine, char *err, size_t errlen)
{
	int expected = MVM_PREPARED, ret;
	unsigned i, started = 0;
	const char *what = "a device thread", *msg = NULL;
	bool restore_failed = false;

	if (!m)
		return err_set(err, errlen, -EINVAL, "mvm_start: vm is NULL");
	if (atomic_load(&m->state) == MVM_CREATED) {
		ret = mvm_prepare(m, err, errlen);
		if (ret)
			return ret;
	}
	if (!atomic_compare_exchange_strong(&m->state, &expected, MVM_FAILED))
		return expected == MVM_FAILED ? mvm_failed_err("mvm_start", err, errlen) :
		       err_set(err, errlen, -EBUSY, "mvm_start: the VM was started already");
	for (i = 0; i < m->vm.ndevices; i++) {
		if (!m->vm.devices[i].ops->start)
			continue;
		ret = m->vm.devices[i].ops->start(m->vm.devices[i].dev);
		if (ret)
			goto stop_vcpus;
	}
	/* Each device's queue threads now wait for work: a restored queue
	 * starts on them. No vCPU runs yet. */
	if (m->restore_dir) {
		ret = snapshot_load_devices(m, err, errlen);
		if (ret) {
			restore_failed = true;
			goto stop_vcpus;
		}
	}
	/* Its rate-limit groups are live from now on (a later restore into
	 * one keeps its buckets). */
	for (i = 0; i < m->ngroups; i++)
		__atomic_store_n(&m->groups[i]->started, true, __ATOMIC_RELEASE);
	for (i = 0; i < m->cfg.cpus; i++) {
		ret = vcpu_start(&m->vcpus[i]);
		if (ret) {
			what = "a vCPU thread";
			msg = m->vcpus[i].fatal[0] ? m->vcpus[i].fatal : NULL;
			goto stop_vcpus;
		}
		started++;
	}
	ret = thread_start_sync(&m->control, mvm_control, m, &m->control_hs);
	if (ret) {
		what = "the control thread";
		goto stop_vcpus;
	}
	m->control_started = true;
	if (confine && m->cfg.sandbox) {
		struct sandbox_fds fds = SANDBOX_NO_FDS;

		fds.vm = m->vm.vm_fd;
		fds.tty = m->cfg.console_in;
		fds.kick_signal = m->cfg.kick_signal;
		ret = sandbox_enter(SANDBOX_MAIN, &fds);
		if (ret) {
			what = "the calling thread";
			goto stop_control;
		}
	}
	/* Started paused: the vCPUs see the request before their first
	 * instruction, the pause below then waits for them to park. */
	if (m->cfg.start_paused)
		vcpu_pause_request(&m->vm);
	atomic_store(&m->state, MVM_RUNNING);
	m->phase_ns[MVM_PHASE_START] = mono_ns();
	vm_open_gate(&m->vm, started);
	if (m->cfg.start_paused) {
		pthread_mutex_lock(&m->ctl_lock);
		ret = mvm_pause_locked(m, "mvm_start (start_paused)", err, errlen);
		pthread_mutex_unlock(&m->ctl_lock);
		if (ret) {
			/* Not paused within the time: the VM must not run
			 * unasked; it stops, for mvm_wait and mvm_destroy. */
			mvm_stop(m, MVM_EXIT_INTERNAL);
			return ret;
		}
	}
	return 0;

stop_control:
	/* The control thread tears the VM down (every vCPU, every device)
	 * once it sees the stop; nothing is left running after the join. */
	vm_request_stop(&m->vm, VM_STOP_HOST_ERROR, MVM_EXIT_INTERNAL, NULL);
	vm_open_gate(&m->vm, started);
	pthread_join(m->control, NULL);
	m->control_started = false;
	m->joined = true;
	goto failed;
stop_vcpus:
	vm_request_stop(&m->vm, VM_STOP_HOST_ERROR, MVM_EXIT_INTERNAL, NULL);
	vm_open_gate(&m->vm, started);
	mvm_stop_threads(m, started);
	if (restore_failed)
		return ret;     /* err says what differs */
failed:
	if (msg)
		return err_set(err, errlen, ret, "%s", msg);
	return err_set(err, errlen, ret, "cannot start %s%s: %s", what,
		       ret == -EPERM || ret == -EACCES || ret == -EINVAL ?
		       " in its seccomp filter (--sandbox=off goes without)" : "", strerror(-ret));
}

int mvm_start(struct mvm *m, char *err, size_t errlen)
{
	return mvm_start_common(m, false, err, errlen);
}

int mvm_start_confined(struct mvm *m, char *err, size_t errlen)
{
	return mvm_start_common(m, true, err, errlen);
}

int mvm_stop(struct mvm *m, int status)
{
	uint64_t one = 1;
	int st;

	if (!m)
		return -EINVAL;
	st = atomic_load(&m->state);
	if (st != MVM_RUNNING && st != MVM_ENDED)
		return -EINVAL;
	vm_request_stop(&m->vm, VM_STOP_REQUESTED, status, NULL);
	/* A VM that ended by itself may still be writing out the guest's
	 * last output to a slow reader: that stops now. The store comes
	 * before the wake-up (mvm_console_finish loads it after resetting
	 * stop_efd); both async-signal-safe. */
	atomic_store(&m->hurry, true);
	if (write(vm_kvm(&m->vm)->stop_efd, &one, sizeof(one)) < 0) {
		/* non-blocking eventfd: readable already */
	}
	return 0;
}

/* The devices' queue threads take no more of the guest's buffers (on)
 * or go on (off), side by side; then wait for each: 0 or -ETIMEDOUT. */
static int mvm_devices_quiesce(struct mvm *m, bool on)
{
	uint64_t deadline = mono_ns() + MVM_QUIESCE_NS;
	unsigned i;
	int r, ret = 0;

	for (i = 0; i < m->vm.ndevices; i++)
		if (m->vm.devices[i].ops->quiesce)
			m->vm.devices[i].ops->quiesce(m->vm.devices[i].dev, on);
	for (i = 0; i < m->vm.ndevices; i++) {
		if (!m->vm.devices[i].ops->quiesce_wait)
			continue;
		r = m->vm.devices[i].ops->quiesce_wait(m->vm.devices[i].dev, deadline);
		if (r && !ret)
			ret = r;
	}
	return ret;
}

int mvm_check_running(struct mvm *m, const char *call, char *err, size_t errlen)
{
	int st = atomic_load(&m->state);

	if (st == MVM_CREATED || st == MVM_PREPARED)
		return err_set(err, errlen, -EINVAL, "%s: the VM has not been started; call "
			       "mvm_start first", call);
	if (st != MVM_RUNNING || vm_stop_status(&m->vm) >= 0 || m->threads_stopped)
		return err_set(err, errlen, -ESHUTDOWN, "%s: the VM has stopped", call);
	return 0;
}

int mvm_check_paused(struct mvm *m, const char *call, char *err, size_t errlen)
{
	int r = mvm_check_running(m, call, err, errlen);

	if (!r && !atomic_load(&m->paused))
		r = err_set(err, errlen, -EINVAL, "%s: the VM runs; pause it first (mvm_pause, "
			    "vm.pause)", call);
	return r;
}

/* mvm_pause's work, ctl_lock held; call names the caller in messages. */
static int mvm_pause_locked(struct mvm *m, const char *call, char *err, size_t errlen)
{
	int r;

	r = vcpu_pause_all(m->vcpus, m->cfg.cpus, mono_ns() + MVM_QUIESCE_NS);
	if (r == -ESHUTDOWN)
		return err_set(err, errlen, r, "%s: the VM stopped meanwhile", call);
	if (r)
		return err_set(err, errlen, r, "%s: the vCPUs did not leave the guest within %u s "
			       "(%s); the VM runs on", call, (unsigned)(MVM_QUIESCE_NS / 1000000000ull),
			       strerror(-r));
	r = mvm_devices_quiesce(m, true);
	if (r) {
		err_set(err, errlen, r, "%s: disk or vsock I/O in flight did not complete within "
			"%u s (%s); the VM runs on", call, (unsigned)(MVM_QUIESCE_NS / 1000000000ull),
			strerror(-r));
		goto resume_devices;
	}
	r = arch_vm_clock_save(&m->vm);
	if (r) {
		err_set(err, errlen, r, "%s: cannot read the guest's clock from KVM (%s); the VM "
			"runs on", call, strerror(-r));
		goto resume_devices;
	}
	m->paused_at = mono_ns();
	atomic_store(&m->paused, true);
	return 0;

resume_devices:
	mvm_devices_quiesce(m, false);
	vcpu_resume_all(&m->vm);
	return r;
}

/* mvm_resume's work, ctl_lock held. */
static int mvm_resume_locked(struct mvm *m, const char *call, char *err, size_t errlen)
{
	int r;

	/* The guest's clock first: it must not see the pause's time. */
	r = arch_vm_clock_restore(&m->vm);
	if (r)
		return err_set(err, errlen, r, "%s: cannot set the guest's clock in KVM (%s); the "
			       "VM stays paused", call, strerror(-r));
	/* Ending a quiesce waits for nothing but the threads' acknowledgement. */
	mvm_devices_quiesce(m, false);
	vcpu_resume_all(&m->vm);
	__atomic_store_n(&m->pauses, m->pauses + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&m->paused_ns, m->paused_ns + (mono_ns() - m->paused_at),
			 __ATOMIC_RELAXED);
	atomic_store(&m->paused, false);
	return 0;
}

int mvm_pause(struct mvm *m, char *err, size_t errlen)
{
	int r;

	if (!m)
		return err_set(err, errlen, -EINVAL, "mvm_pause: vm is NULL");
	pthread_mutex_lock(&m->ctl_lock);
	r = mvm_check_running(m, "mvm_pause", err, errlen);
	if (!r && atomic_load(&m->paused))
		r = err_set(err, errlen, -EALREADY, "mvm_pause: the VM is paused already");
	if (!r)
		r = mvm_pause_locked(m, "mvm_pause", err, errlen);
	pthread_mutex_unlock(&m->ctl_lock);
	return r;
}

int mvm_resume(struct mvm *m, char *err, size_t errlen)
{
	int r;

	if (!m)
		return err_set(err, errlen, -EINVAL, "mvm_resume: vm is NULL");
	pthread_mutex_lock(&m->ctl_lock);
	r = mvm_check_running(m, "mvm_resume", err, errlen);
	if (!r && !atomic_load(&m->paused))
		r = err_set(err, errlen, -EALREADY, "mvm_resume: the VM is not paused");
	if (!r)
		r = mvm_resume_locked(m, "mvm_resume", err, errlen);
	pthread_mutex_unlock(&m->ctl_lock);
	return r;
}

/* mvm_nmi's and mvm_power_button's work: the architecture's NMI (nmi)
 * or power button, to a running or paused VM. */
static int mvm_press(struct mvm *m, bool nmi, char *err, size_t errlen)
{
	const char *call = nmi ? "mvm_nmi" : "mvm_power_button";
	char why[MVM_ERR_MAX];
	int r;

	if (!m)
		return err_set(err, errlen, -EINVAL, "%s: vm is NULL", call);
	pthread_mutex_lock(&m->ctl_lock);
	r = mvm_check_running(m, call, err, errlen);
	if (!r) {
		r = nmi ? arch_vm_nmi(&m->vm, m->cfg.cpus, why, sizeof(why)) :
		    arch_vm_power_button(&m->vm, why, sizeof(why));
		if (r)
			err_set(err, errlen, r, "%s: %s", call, why);
		else if (nmi)
			__atomic_store_n(&m->nmis, m->nmis + 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&m->ctl_lock);
	return r;
}

int mvm_nmi(struct mvm *m, char *err, size_t errlen)
{
	return mvm_press(m, true, err, errlen);
}

int mvm_power_button(struct mvm *m, char *err, size_t errlen)
{
	return mvm_press(m, false, err, errlen);
}

/* A disk of the VM that is there (not removed, not a number past the
 * last): 0, or -EINVAL with a message naming call. ctl_lock held. */
static int mvm_disk_live(struct mvm *m, unsigned disk, const char *call, char *err,
			 size_t errlen)
{
	if (disk < m->ndisks && m->disks[disk].dev)
		return 0;
	return err_set(err, errlen, -EINVAL, "%s: disk %u: the VM has %u disk%s; give its "
		       "index, from 0 (vda)", call, disk, m->ndisks, m->ndisks == 1 ? "" : "s");
}

/* The VM paused for a change (call names it), unless it is already:
 * *was_paused says which, for mvm_resume_if_ran. ctl_lock held. */
static int mvm_pause_for(struct mvm *m, const char *call, bool *was_paused, char *err,
			 size_t errlen)
{
	*was_paused = atomic_load(&m->paused);
	return *was_paused ? 0 : mvm_pause_locked(m, call, err, errlen);
}

/* After a change made with the VM paused for it: a VM that ran before
 * (!was_paused) runs again. r: the change's result, returned; a resume
 * that fails leaves the VM paused, and says so where the change did not
 * fail already. ctl_lock held. */
static int mvm_resume_if_ran(struct mvm *m, const char *call, bool was_paused, int r, char *err,
			     size_t errlen)
{
	char rerr[256];

	if (!was_paused && mvm_resume_locked(m, call, rerr, sizeof(rerr)) && !r)
		r = err_set(err, errlen, -EIO, "%s", rerr);
	return r;
}

int mvm_disk_swap(struct mvm *m, unsigned disk, const char *path, char *err, size_t errlen)
{
	struct mvm_disk_slot *s;
	struct mvm_disk o;
	struct blk_image img;
	char rel[PATH_MAX];
	bool was_paused;
	int dirfd, r;

	if (!m || !path || !*path)
		return err_set(err, errlen, -EINVAL, "mvm_disk_swap: %s", !m ? "vm is NULL" :
			       "no path; give the new raw image");
	if (strlen(path) >= BLK_PATH_MAX)
		return err_set(err, errlen, -ENAMETOOLONG, "mvm_disk_swap: %.64s...: path longer "
			       "than %d bytes", path, BLK_PATH_MAX - 1);
	pthread_mutex_lock(&m->ctl_lock);
	r = mvm_check_running(m, "mvm_disk_swap", err, errlen);
	if (r)
		goto unlock;
	r = mvm_disk_live(m, disk, "mvm_disk_swap", err, errlen);
	if (r)
		goto unlock;
	s = &m->disks[disk];
	r = mvm_image_dirfd(m, path, &dirfd, rel, sizeof(rel), err, errlen);
	if (r)
		goto unlock;
	/* The new image with the disk's options: locked, its size checked;
	 * another VM's image (or this one's) is refused here. */
	o = s->opts;
	o.path = path;
	r = blk_image_openat(dirfd, dirfd == AT_FDCWD ? path : rel, &o, &img, &m->log, err,
			     errlen);
	if (r)
		goto unlock;
	r = mvm_pause_for(m, "mvm_disk_swap", &was_paused, err, errlen);
	if (r) {
		blk_image_close(&img);
		goto unlock;
	}
	r = blk_swap(s->dev, &img, path, err, errlen);
	blk_image_close(&img);          /* what the device did not take */
	if (!r)
		strcpy(s->path, path);  /* s->opts.path: ctl_lock's */
	r = mvm_resume_if_ran(m, "mvm_disk_swap", was_paused, r, err, errlen);
unlock:
	pthread_mutex_unlock(&m->ctl_lock);
	return r;
}

int mvm_disk_resize(struct mvm *m, unsigned disk, uint64_t size, char *err, size_t errlen)
{
	char why[MVM_ERR_MAX];
	bool was_paused;
	int r;

	if (!m)
		return err_set(err, errlen, -EINVAL, "mvm_disk_resize: vm is NULL");
	pthread_mutex_lock(&m->ctl_lock);
	r = mvm_check_running(m, "mvm_disk_resize", err, errlen);
	if (r)
		goto unlock;
	r = mvm_disk_live(m, disk, "mvm_disk_resize", err, errlen);
	if (r)
		goto unlock;
	r = mvm_pause_for(m, "mvm_disk_resize", &was_paused, err, errlen);
	if (r)
		goto unlock;
	r = blk_resize(m->disks[disk].dev, size, why, sizeof(why));
	if (r)
		err_set(err, errlen, r, "mvm_disk_resize: %s", why);
	r = mvm_resume_if_ran(m, "mvm_disk_resize", was_paused, r, err, errlen);
unlock:
	pthread_mutex_unlock(&m->ctl_lock);
	return r;
}

int mvm_confine_api_thread(struct mvm *m, int listen_fd, char *err, size_t errlen)
{
	struct sandbox_fds fds = SANDBOX_NO_FDS;
	int r;

	if (!m || listen_fd < 0)
		return err_set(err, errlen, -EINVAL, "mvm_confine_api_thread: %s",
			       !m ? "vm is NULL" : "no listening socket");
	if (!m->vm_up)
		return err_set(err, errlen, -EINVAL, "mvm_confine_api_thread: call mvm_prepare "
			       "(or mvm_start) first");
	fds.vm = m->vm.vm_fd;
	fds.listen = listen_fd;
	/* A snapshot reads every vCPU's state (docs/sandbox.md). */
	if (m->nvcpus) {
		fds.vcpu_lo = m->vcpus[0].fd;
		fds.vcpu_hi = m->vcpus[m->nvcpus - 1].fd;
	}
	fds.arch_dev = arch_vm_snap_fd(&m->vm);
	/* Landlock first (the filter forbids its calls); where it cannot
	 * hold the thread's file access to the snapshot and image
	 * directories, the filter allows no file call at all and
	 * mvm_snapshot and mvm_disk_swap say why. */
	if (m->snap_root_fd >= 0 || m->image_root_fd >= 0) {
		r = sandbox_beneath(m->snap_root_fd, m->image_root_fd);
		if (!r) {
			fds.snap_dir = m->snap_root_fd;
			fds.mem = m->snap_root_fd >= 0 ? m->mem_file_fd : -1;
			fds.image_dir = m->image_root_fd;
		}
		else
			log_warn(&m->log, "%s %s: this kernel cannot hold the API thread's file "
				 "access to it (Landlock: %s); the API takes no %s",
				 m->snap_root ? "snapshot_dir" : "image_dir",
				 m->snap_root ? m->snap_root : m->image_root, strerror(-r),
				 m->snap_root ? "snapshots" : "images for a swap");
	}
	r = sandbox_enter(SANDBOX_API, &fds);
	if (r)
		return err_set(err, errlen, r, "cannot enter the API thread's seccomp filter: %s",
			       strerror(-r));
	m->api_snap_ok = fds.snap_dir >= 0;
	m->api_image_ok = fds.image_dir >= 0;
	m->api_thread = pthread_self();
	m->api_confined = true;
	return 0;
}

int mvm_get_state(const struct mvm *m)
{
	if (!m)
		return -EINVAL;
	switch (atomic_load(&m->state)) {
	case MVM_CREATED:
	case MVM_PREPARED:
		return MVM_VM_CREATED;
	case MVM_RUNNING:
		if (vm_stop_status(&m->vm) >= 0)
			return MVM_VM_ENDED;
		return atomic_load(&m->paused) ? MVM_VM_PAUSED : MVM_VM_RUNNING;
	default:
		return MVM_VM_ENDED;
	}
}

const char *mvm_state_name(int state)
{
	switch (state) {
	case MVM_VM_CREATED: return "created";
	case MVM_VM_RUNNING: return "running";
	case MVM_VM_PAUSED: return "paused";
	case MVM_VM_ENDED: return "ended";
	default: return "unknown";
	}
}

int mvm_wait_fd(const struct mvm *m)
{
	return m ? m->wait_efd : -1;
}

int mvm_wait(struct mvm *m, int timeout_ms, struct mvm_exit *ex, size_t exlen)
{
	struct pollfd p;
	int st, ret;

	if (!m)
		return -EINVAL;
	st = atomic_load(&m->state);
	if (st != MVM_RUNNING && st != MVM_ENDED)
		return -EINVAL;
	p = (struct pollfd){ .fd = m->wait_efd, .events = POLLIN };
	do
		ret = poll(&p, 1, timeout_ms);
	while (ret < 0 && errno == EINTR);
	if (ret < 0)
		return -errno;
	if (ret == 0)
		return -ETIMEDOUT;
	pthread_mutex_lock(&m->lock);
	if (!m->joined) {
		pthread_join(m->control, NULL);
		m->joined = true;
		atomic_store(&m->state, MVM_ENDED);
	}
	pthread_mutex_unlock(&m->lock);
	if (ex)
		abi_copy_out(ex, exlen, &m->exit, sizeof(m->exit));
	return 0;
}

static void mvm_vcpu_stats_add(struct mvm_vcpu_stats *st, const struct vcpu *v)
{
	st->exits_io += v->exits[VCPU_EXIT_IO];
	st->exits_mmio += v->exits[VCPU_EXIT_MMIO];
	st->exits_intr += v->exits[VCPU_EXIT_INTR];
	st->exits_hlt += v->exits[VCPU_EXIT_HLT];
	st->exits_shutdown += v->exits[VCPU_EXIT_SHUTDOWN];
	st->exits_system_event += v->exits[VCPU_EXIT_SYSTEM_EVENT];
	st->exits_other += v->exits[VCPU_EXIT_OTHER];
	st->exits_arch += v->exits[VCPU_EXIT_ARCH];
}

int mvm_get_vcpu_stats(const struct mvm *m, unsigned vcpu, struct mvm_vcpu_stats *out,
		       size_t len)
{
	struct mvm_vcpu_stats st;
	unsigned i;

	if (!m || !out || (vcpu != MVM_ALL && vcpu >= m->nvcpus))
		return -EINVAL;
	memset(&st, 0, sizeof(st));
	for (i = 0; i < m->nvcpus; i++)
		if (vcpu == MVM_ALL || vcpu == i)
			mvm_vcpu_stats_add(&st, &m->vcpus[i]);
	abi_copy_out(out, len, &st, sizeof(st));
	return 0;
}

static void mvm_queue_stats_add(struct mvm_queue_stats *st, const struct blk_queue_stats *b)
{
	st->requests += b->requests;
	st->batches += b->batches;
	st->enters += b->enters;
	st->irqs += b->irqs;
	st->errors += b->errors;
	st->bytes_read += b->bytes_read;
	st->bytes_written += b->bytes_written;
	st->read_ops += b->read_ops;
	st->write_ops += b->write_ops;
	st->polled += b->polled;
	st->kicks += b->kicks;
	st->rate_delayed += b->rate_delayed;
	st->rate_wait_us += b->rate_wait_us;
}

int mvm_get_vsock_stats(const struct mvm *cm, struct mvm_vsock_stats *out, size_t len)
{
	struct mvm *m = (struct mvm *)cm;     /* for devs_lock alone */
	struct mvm_vsock_stats st;
	struct vsock_dev_stats s;

	if (!m || !out)
		return -EINVAL;
	if (!m->has_vsock)
		return -ENOENT;
	memset(&st, 0, sizeof(st));
	memset(&s, 0, sizeof(s));
	pthread_mutex_lock(&m->devs_lock);
	if (m->vm_up && m->vsock_dev)
		vsock_dev_get_stats(m->vsock_dev, &s);
	pthread_mutex_unlock(&m->devs_lock);
	st.connections_guest = s.conn.conns_guest;
	st.connections_host = s.conn.conns_host;
	st.connections_open = s.conn.conns_open;
	st.bytes_to_host = s.conn.bytes_to_host;
	st.bytes_to_guest = s.conn.bytes_to_guest;
	st.packets_from_guest = s.conn.pkts_from_guest;
	st.packets_to_guest = s.conn.pkts_to_guest;
	st.resets_sent = s.conn.rst_sent;
	st.resets_received = s.conn.rst_rcvd;
	st.credit_stalls = s.conn.credit_stalls;
	st.credit_updates = s.conn.credit_updates;
	st.connection_limit = s.conn.conn_limit;
	/* buffer_limit stays 0 (since 2.16): each connection's credit is
	 * its share of the cap, which therefore never holds the guest back. */
	st.no_listener = s.conn.no_listener;
	st.connect_timeouts = s.conn.timeouts;
	st.host_clients = s.accepted;
	st.handshakes_failed = s.handshake_failed;
	st.host_errors = s.host_errors;
	st.bad_packets = s.conn.bad;
	st.bad_rx_buffers = s.bad_rx;
	abi_copy_out(out, len, &st, sizeof(st));
	return 0;
}

int mvm_get_queue_stats(const struct mvm *cm, unsigned disk, unsigned queue,
			struct mvm_queue_stats *out, size_t len)
{
	struct mvm *m = (struct mvm *)cm;     /* for devs_lock alone */
	struct mvm_queue_stats st;
	struct blk_queue_stats b;
	unsigned i, q;
	int r = 0;

	if (!m || !out || (disk == MVM_ALL && queue != MVM_ALL))
		return -EINVAL;
	memset(&st, 0, sizeof(st));
	pthread_mutex_lock(&m->devs_lock);
	if (disk != MVM_ALL && (disk >= m->ndisks || !m->disks[disk].dev))
		r = -EINVAL;
	for (i = 0; !r && i < m->ndisks; i++) {
		if ((disk != MVM_ALL && disk != i) || !m->disks[i].dev)
			continue;
		for (q = 0; !r && q < m->disks[i].opts.queues; q++) {
			if (queue != MVM_ALL && queue != q)
				continue;
			if (blk_get_queue_stats(m->disks[i].dev, q, &b))
				r = -EINVAL;
			else
				mvm_queue_stats_add(&st, &b);
		}
		if (queue != MVM_ALL && queue >= m->disks[i].opts.queues)
			r = -EINVAL;
	}
	pthread_mutex_unlock(&m->devs_lock);
	if (!r)
		abi_copy_out(out, len, &st, sizeof(st));
	return r;
}

/* One entry, as much of it as the caller's entsize takes. */
static void mvm_thread_put(struct mvm_thread *out, size_t n, size_t entsize, unsigned *count,
			   int tid, enum mvm_thread_kind kind, unsigned index, unsigned disk,
			   const char *name)
{
	struct mvm_thread t = { .tid = tid, .kind = kind, .index = index, .disk = disk };

	if (!tid)
		return;         /* never started */
	snprintf(t.name, sizeof(t.name), "%s", name);
	if (*count < n)
		abi_copy_out((char *)out + *count * entsize, entsize, &t, sizeof(t));
	(*count)++;
}

int mvm_get_threads(const struct mvm *cm, struct mvm_thread *out, size_t n, size_t entsize)
{
	struct mvm *m = (struct mvm *)cm;     /* for threads_lock and devs_lock alone */
	unsigned count = 0, i;
	int state;

	if (!m || (n && (!out || !entsize)))
		return -EINVAL;
	/* The ids hold from mvm_start until the VM's threads are told to
	 * stop (the guest's end, mvm_stop, mvm_destroy). */
	state = atomic_load(&m->state);
	if (state != MVM_RUNNING && state != MVM_ENDED)
		return -ESRCH;
	pthread_mutex_lock(&m->threads_lock);
	if (m->threads_going) {
		pthread_mutex_unlock(&m->threads_lock);
		return -ESRCH;
	}
	for (i = 0; i < m->nvcpus; i++)
		if (m->vcpus[i].started)
			mvm_thread_put(out, n, entsize, &count, m->vcpus[i].hs.tid, MVM_THREAD_VCPU,
				       m->vcpus[i].id, MVM_ALL, m->vcpus[i].hs.name);
	pthread_mutex_lock(&m->devs_lock);
	for (i = 0; i < m->ndisks; i++) {
		const struct virtio_dev *dev = m->disks[i].dev;
		const struct vqw *w;

		if (!dev)
			continue;
		for (w = dev->vqws; w; w = w->dev_next)
			if (w->launched)
				mvm_thread_put(out, n, entsize, &count, w->hs.tid, MVM_THREAD_IO,
					       w->q[0].idx, i, w->hs.name);
		mvm_thread_put(out, n, entsize, &count, dev->helper_tid, MVM_THREAD_DEVICE, 0, i,
			       dev->helper_name);
	}
	pthread_mutex_unlock(&m->devs_lock);
	if (m->vsock_dev) {
		const struct vqw *w = m->vsock_dev->vqws;

		if (w && w->launched)
			mvm_thread_put(out, n, entsize, &count, w->hs.tid, MVM_THREAD_VSOCK, 0,
				       MVM_ALL, w->hs.name);
	}
	if (m->control_started)
		mvm_thread_put(out, n, entsize, &count, m->control_hs.tid, MVM_THREAD_CONTROL, 0,
			       MVM_ALL, m->control_hs.name);
	pthread_mutex_unlock(&m->threads_lock);
	return (int)count;
}

int mvm_get_stats(const struct mvm *m, struct mvm_stats *out, size_t len)
{
	struct mvm_stats st;

	if (!m || !out)
		return -EINVAL;
	memset(&st, 0, sizeof(st));
	st.cpus = m->cfg.cpus;
	st.mem = m->cfg.mem;
	st.disks = m->ndisks;
	if (m->con.ops)
		m->con.ops->counters(m->con.dev, &st.console_bytes_out, &st.console_bytes_in);
	st.pauses = __atomic_load_n(&m->pauses, __ATOMIC_RELAXED);
	st.paused_us = __atomic_load_n(&m->paused_ns, __ATOMIC_RELAXED) / 1000;
	st.nmis = __atomic_load_n(&m->nmis, __ATOMIC_RELAXED);
	abi_copy_out(out, len, &st, sizeof(st));
	return 0;
}

int mvm_stats_json(const struct mvm *m, char *buf, size_t len)
{
	struct json j;
	size_t n = 0;
	FILE *f;
	unsigned i;

	if (!m || !buf || !len)
		return -EINVAL;
	f = fmemopen(buf, len, "w");
	if (!f)
		return -errno;
	json_init(&j, f);
	json_obj_begin(&j, NULL);
	json_arr_begin(&j, "vcpus");
	for (i = 0; i < m->nvcpus; i++)
		vcpu_stats_json(&m->vcpus[i], &j);
	json_arr_end(&j);
	json_arr_begin(&j, "devices");
	pthread_mutex_lock((pthread_mutex_t *)&m->devs_lock);
	for (i = 0; m->vm_up && i < m->vm.ndevices; i++)
		if (m->vm.devices[i].ops->stats_json)
			m->vm.devices[i].ops->stats_json(m->vm.devices[i].dev, &j);
	pthread_mutex_unlock((pthread_mutex_t *)&m->devs_lock);
	json_arr_end(&j);
	json_str(&j, "state", mvm_state_name(mvm_get_state(m)));
	json_u64(&j, "pauses", __atomic_load_n(&m->pauses, __ATOMIC_RELAXED));
	json_u64(&j, "paused_us", __atomic_load_n(&m->paused_ns, __ATOMIC_RELAXED) / 1000);
	json_u64(&j, "nmis", __atomic_load_n(&m->nmis, __ATOMIC_RELAXED));
	if (m->vm_up) {
		uint64_t first = __atomic_load_n(&m->vm.first_run_ns, __ATOMIC_RELAXED);

		/* From the host program's start (mvm(1): its main()) to the
		 * guest's first instruction. */
		if (first) {
			uint64_t prev = m->cfg.start_ns;

			json_u64(&j, "startup_us", (first - m->cfg.start_ns) / 1000);
			/* The same time by step; "run": vCPU 0's thread up to
			 * its first KVM_RUN. */
			json_obj_begin(&j, "startup_phases_us");
			for (i = 0; i < MVM_PHASES; i++) {
				uint64_t t = m->phase_ns[i] ? m->phase_ns[i] : prev;

				json_u64(&j, mvm_phase_names[i], (t - prev) / 1000);
				prev = t;
			}
			json_u64(&j, "run", (first - prev) / 1000);
			json_obj_end(&j);
		}
	}
	json_obj_end(&j);
	n = (size_t)ftell(f);
	if (fclose(f) || n + 1 >= len)
		return -ENOSPC;
	return (int)n;
}

void mvm_destroy(struct mvm *m)
{
	unsigned i;

	if (!m)
		return;
	if (atomic_load(&m->state) == MVM_RUNNING || atomic_load(&m->state) == MVM_ENDED) {
		mvm_stop(m, MVM_EXIT_OK);
		mvm_wait(m, -1, NULL, 0);
	}
	if (m->vm_up) {
		if (!m->threads_stopped)
			mvm_stop_threads(m, 0);
		for (i = m->vm.ndevices; i-- > 0;)
			m->vm.devices[i].ops->destroy(m->vm.devices[i].dev);
	}
	for (i = 0; i < m->nports; i++)
		pcie_port_destroy(&m->ports[i]);
	if (m->pci_up)
		pci_bus_destroy(&m->pci);
	for (i = 0; i < m->nvcpus; i++)
		vcpu_destroy(&m->vcpus[i]);
	free(m->vcpus);
	arch_boot_free(m->boot);
	boot_image_free(&m->kimage);
	/* Images of disks that never became devices (no start, or a start
	 * that failed before them). */
	for (i = 0; i < m->ndisks; i++)
		if (!m->disks[i].dev)
			blk_image_close(&m->disks[i].img);
	if (m->vm_up)
		vm_fini(&m->vm);
	/* After the disks, whose threads took from them. */
	for (i = 0; i < m->ngroups; i++)
		mvm_rate_group_unref(m->groups[i]);
	/* After every vCPU thread was joined: none can be signalled now. */
	if (m->kick_held)
		vcpu_signal_put(m->cfg.kick_signal);
	if (m->out_up)
		conout_fini(&m->out);
	if (m->tx_efd >= 0)
		close(m->tx_efd);
	if (m->wait_efd >= 0)
		close(m->wait_efd);
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->threads_lock);
	pthread_mutex_destroy(&m->ctl_lock);
	pthread_mutex_destroy(&m->devs_lock);
	snapshot_close(m);
	if (m->snap_root_fd >= 0)
		close(m->snap_root_fd);
	free(m->snap_root);
	if (m->image_root_fd >= 0)
		close(m->image_root_fd);
	free(m->image_root);
	if (m->mem_file_fd >= 0)
		close(m->mem_file_fd);
	free(m->mem_file);
	free(m->kernel);
	free(m->initrd);
	free(m->cmdline);
	free(m);
}

static int mvm_probe_cb(void *ctx, struct kvm_probe_result *res)
{
	/* The payload takes microseconds; a KVM that has not finished it in
	 * two seconds never will. */
	return kvm_probe_run(2000, *(const int *)ctx, res);
}

int mvm_check_kvm(const char *override, const char *cache_path, int kick_signal,
		  struct mvm_kvm_check *theirs, size_t outlen, char *err, size_t errlen)
{
	char boot_id[64] = "", key[128];
	struct kvm_choice_env env = {
		.override = override, .cache_path = cache_path, .boot_id = boot_id, .key = key,
		.probe = mvm_probe_cb, .ctx = &kick_signal,
	};
	struct mvm_kvm_check o, *out = &o;
	struct kvm_choice c;
	FILE *fp;
	int ret;

	if (!theirs)
		return err_set(err, errlen, -EINVAL, "mvm_check_kvm: out is NULL");
	memset(out, 0, sizeof(*out));
	fp = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (fp) {
		if (!fgets(boot_id, sizeof(boot_id), fp))
			boot_id[0] = '\0';
		boot_id[strcspn(boot_id, "\n")] = '\0';
		fclose(fp);
	}
	kvm_probe_key(key, sizeof(key));
	ret = vcpu_signal_get(kick_signal);
	if (ret)
		return mvm_kick_signal_err(kick_signal, ret, err, errlen);
	ret = kvm_choose(&env, &c, err, errlen);
	vcpu_signal_put(kick_signal);
	if (ret)
		return ret;
	out->direct = c.mode == KVM_MODE_DIRECT;
	out->forced = c.forced;
	out->cached = c.cached;
	out->pvm = kvm_host_is_pvm("/sys");
	snprintf(out->why, sizeof(out->why), "%s", c.why);
	abi_copy_out(theirs, outlen, &o, sizeof(o));
	return 0;
}
