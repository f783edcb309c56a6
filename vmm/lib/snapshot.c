/* Snapshots of a paused VM and restores of one (docs/snapshot.md).
 *
 * A snapshot directory holds two files: `memory`, guest RAM as the host
 * maps it (RAM below the hole, then the rest) with zero pages left as
 * holes, and `state`, the snapshot container (vmm/base/snap.h) with:
 *   MVM! 0   mvm's version, the architecture, the VM's shape (vCPUs, RAM,
 *            pvpanic, hot-plug slots and their queues, each disk's path, options as
 *            --disk spells them and hot-plug slot (0: none; removed
 *            disks left out), the vsock device's options as --vsock does),
 *            the number of devices, the PCI conf1 address latch, the
 *            payload the guest booted from (kernel, initrd, command line;
 *            "" for none), for those who ask the restored VM;
 *   the architecture's sections (arch_vm_save, arch_vcpu_save);
 *   DEV  i   device i of the VM's list: its kind, then what its
 *            vm_device_ops.save wrote.
 * `state` is written last, through a rename: a directory with one holds
 * a whole snapshot; the old one is removed before the new memory is
 * written, so a snapshot cut short leaves none.
 *
 * A restore makes the VM with the snapshot's shape as mvm_start would,
 * then, instead of loading a kernel, maps `memory` privately and sets the
 * state: the VM's and the vCPUs' before any thread starts (mvm_prepare),
 * each device's once its threads wait for work (mvm_start), through the
 * paths the guest's own register writes take. */
#include "vmm/lib/mvm_priv.h"
#include "arch/arch.h"
#include "devices/ratelim.h"
#include "devices/virtio_blk.h"
#include "devices/virtio_vsock.h"
#include "vmm/base/keyval.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#define SNAPSHOT_STATE "state"
#define SNAPSHOT_MEMORY "memory"
#define SNAPSHOT_MEMORY_TMP "memory.tmp"
/* The largest state file a restore reads: a VM's is a few hundred KiB
 * (the vCPUs' XSAVE areas and MSRs, each MSI-X table). */
#define SNAPSHOT_STATE_MAX (64u << 20)
#define SNAPSHOT_SPEC_MAX 1024u

#define SNAP_TAG_VM SNAP_TAG('M', 'V', 'M', '!')
#define SNAP_TAG_DEV SNAP_TAG('D', 'E', 'V', ' ')
#define SNAP_TAG_PORT SNAP_TAG('P', 'O', 'R', 'T')
#define SNAP_TAG_GRP SNAP_TAG('G', 'R', 'P', ' ')

/* The VM section, read back. */
struct snapshot_vm {
	char version[32];
	char arch[16];
	uint32_t cpus;
	uint64_t mem;
	bool pvpanic;
	uint32_t hotplug_slots;
	uint32_t hotplug_queues;
	uint32_t ndisks;
	char path[MVM_MAX_DISKS][BLK_PATH_MAX];
	char spec[MVM_MAX_DISKS][SNAPSHOT_SPEC_MAX];
	uint32_t slot[MVM_MAX_DISKS];  /* its hot-plug slot's number, or 0 */
	bool has_vsock;
	char vsock[SNAPSHOT_SPEC_MAX];
	uint32_t ndevices;
	uint32_t conf1;
	char kernel[PATH_MAX];
	char initrd[PATH_MAX];
	char cmdline[MVM_CMDLINE_MAX];
};

int snapshot_root_open(struct mvm *m, char *err, size_t errlen)
{
	if (!m->snap_root)
		return 0;
	if (mkdir(m->snap_root, 0700) && errno != EEXIST)
		return err_set(err, errlen, -errno, "snapshot_dir %s: cannot make it: %s",
			       m->snap_root, strerror(errno));
	m->snap_root_fd = open(m->snap_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (m->snap_root_fd < 0)
		return err_set(err, errlen, -errno, "snapshot_dir %s: %s; give a directory",
			       m->snap_root, strerror(errno));
	return 0;
}

int snapshot_target(struct mvm *m, const char *what, const char *dir, struct snapshot_at *at,
		    char *err, size_t errlen)
{
	bool confined = m->api_confined && pthread_equal(pthread_self(), m->api_thread);
	char rel[PATH_MAX - 32];        /* room for the file names after it */
	int r = m->snap_root ? mvm_path_beneath(m->snap_root, dir, rel, sizeof(rel)) : -ENOENT;

	if (r == -EINVAL || r == -ENAMETOOLONG)
		return err_set(err, errlen, r == -EINVAL ? -EPERM : r, "%s %s: %s beneath the snapshot directory %s; "
			       "give a plain path there", what, dir, r == -EINVAL ? "a . or .. in its path" :
			       "too long a path", m->snap_root);
	if (confined && !m->api_snap_ok)
		return err_set(err, errlen, -EOPNOTSUPP, "%s %s: this thread may not write files "
			       "(its seccomp filter): %s", what, dir, m->snap_root ?
			       "the kernel has no Landlock to hold it to the snapshot directory" :
			       "give the VM a snapshot directory (snapshot_dir, --snapshot-dir) and "
			       "snapshot beneath it");
	if (confined && r)
		return err_set(err, errlen, -EPERM, "%s %s: not beneath the snapshot "
			       "directory %s, the only place this thread may write; give a "
			       "directory there", what, dir, m->snap_root);
	if (!r && m->snap_root_fd >= 0) {
		at->dirfd = m->snap_root_fd;
		at->own = false;
		at->pfx[0] = '\0';
		if (!rel[0])
			return 0;
		if (mkdirat(m->snap_root_fd, rel, 0700) && errno != EEXIST)
			return err_set(err, errlen, -errno, "%s %s: cannot make the "
				       "directory: %s", what, dir, strerror(errno));
		snprintf(at->pfx, sizeof(at->pfx), "%s/", rel);
		return 0;
	}
	if (mkdir(dir, 0700) && errno != EEXIST)
		return err_set(err, errlen, -errno, "%s %s: cannot make the directory: %s",
			       what, dir, strerror(errno));
	at->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (at->dirfd < 0)
		return err_set(err, errlen, -errno, "%s %s: %s; give a directory", what, dir,
			       strerror(errno));
	at->own = true;
	at->pfx[0] = '\0';
	return 0;
}

const char *snapshot_name(const struct snapshot_at *at, const char *name, char *buf)
{
	snprintf(buf, PATH_MAX, "%s%s", at->pfx, name);
	return buf;
}

/* ---- taking one --------------------------------------------------------- */

static int snapshot_put_vm(struct mvm *m, struct snap_w *w, char *err, size_t errlen)
{
	char spec[SNAPSHOT_SPEC_MAX];
	unsigned i, live = 0;
	size_t n;

	for (i = 0; i < m->ndisks; i++)
		live += !m->disks[i].removed;
	snap_begin(w, SNAP_TAG_VM, 0);
	snap_put_str(w, MVM_VERSION_STRING);
	snap_put_str(w, arch_layout.name);
	snap_put_u32(w, m->cfg.cpus);
	snap_put_u64(w, m->cfg.mem);
	snap_put_u8(w, m->cfg.pvpanic);
	snap_put_u32(w, m->cfg.hotplug_slots);
	snap_put_u32(w, m->cfg.hotplug_queues);
	snap_put_u32(w, live);
	for (i = 0; i < m->ndisks; i++) {
		const struct mvm_disk_slot *s = &m->disks[i];

		if (s->removed)
			continue;
		if (kv_format_check(&blk_disk_keys, &s->opts, s->opts.path, err, errlen)) {
			err_prefix(err, errlen, "snapshot: ");
			return -EINVAL;
		}
		n = kv_format(&blk_disk_keys, &s->opts, spec, sizeof(spec));
		if (n >= sizeof(spec))
			return err_set(err, errlen, -ENAMETOOLONG, "snapshot: disk %s: its "
				       "options take %zu bytes, more than %u", s->opts.path, n,
				       SNAPSHOT_SPEC_MAX - 1);
		snap_put_str(w, s->opts.path);
		snap_put_str(w, spec);
		snap_put_u32(w, s->hslot);
	}
	snap_put_u8(w, m->has_vsock);
	if (m->has_vsock) {
		if (kv_format_check(&vsock_keys, &m->vsock, m->vsock_path, err, errlen)) {
			err_prefix(err, errlen, "snapshot: ");
			return -EINVAL;
		}
		n = kv_format(&vsock_keys, &m->vsock, spec, sizeof(spec));
		if (n >= sizeof(spec))
			return err_set(err, errlen, -ENAMETOOLONG, "snapshot: vsock %s: its options "
				       "take %zu bytes, more than %u", m->vsock_path, n,
				       SNAPSHOT_SPEC_MAX - 1);
		snap_put_str(w, spec);
	}
	snap_put_u32(w, m->vm.ndevices);
	snap_put_u32(w, m->pci_up ? pci_bus_conf1_get(&m->pci) : 0);
	snap_put_str(w, m->cfg.kernel ? m->cfg.kernel : "");
	snap_put_str(w, m->cfg.initrd ? m->cfg.initrd : "");
	snap_put_str(w, m->cfg.cmdline ? m->cfg.cmdline : "");
	snap_end(w);
	return 0;
}

static int snapshot_put_devices(struct mvm *m, struct snap_w *w, char *err, size_t errlen)
{
	unsigned i;
	int ret;

	for (i = 0; i < m->vm.ndevices; i++) {
		const struct vm_device_ops *ops = m->vm.devices[i].ops;

		if (!ops->save)
			return err_set(err, errlen, -EOPNOTSUPP, "snapshot: the %s device has no "
				       "snapshots yet", ops->kind);
		snap_begin(w, SNAP_TAG_DEV, i);
		snap_put_str(w, ops->kind);
		ret = ops->save(m->vm.devices[i].dev, w, err, errlen);
		if (ret)
			return ret;
		snap_end(w);
	}
	/* The hot-plug slots; a disk in one is a device above, after the
	 * VM's first ones in the order they were plugged in. */
	for (i = 0; i < m->nports; i++) {
		snap_begin(w, SNAP_TAG_PORT, i);
		ret = pcie_port_save(&m->ports[i], w, err, errlen);
		if (ret)
			return ret;
		snap_end(w);
	}
	/* Each rate-limit group's buckets, with what the requests its disks
	 * here hold paid given back (they pay again after the restore). */
	for (i = 0; i < m->ngroups; i++) {
		struct mvm_rate_group *g = m->groups[i];
		struct mvm_rate_group_config c;
		char spec[SNAPSHOT_SPEC_MAX];
		struct ratelim_levels lv;
		uint64_t bytes = 0, ops = 0;
		unsigned d;

		for (d = 0; d < m->ndisks; d++) {
			uint64_t b, o;

			if (m->disks[d].group != g || m->disks[d].removed || !m->disks[d].dev)
				continue;
			blk_held_cost(m->disks[d].dev, &b, &o);
			bytes += b;
			ops += o;
		}
		mvm_rate_group_config_init(&c);
		c.id = g->id;
		ratelim_rate_get(&g->rl, &c.rate);
		/* An id holds no comma (mvm_rate_group_new): it parses back. */
		if (kv_format(&ratelim_group_keys, &c, spec, sizeof(spec)) >= sizeof(spec))
			return err_set(err, errlen, -ENAMETOOLONG, "snapshot: rate-limit group %s: "
				       "its limits do not fit %u bytes", g->id, SNAPSHOT_SPEC_MAX);
		ratelim_levels_get(&g->rl, mono_ns(), bytes, ops, &lv);
		snap_begin(w, SNAP_TAG_GRP, i);
		snap_put_str(w, spec);
		ratelim_levels_put(w, &lv);
		snap_end(w);
	}
	return 0;
}

static bool snapshot_page_zero(const uint8_t *p)
{
	const uint64_t *q = (const uint64_t *)p;
	unsigned i;

	for (i = 0; i < SNAPSHOT_PAGE / 8; i++)
		if (q[i])
			return false;
	return true;
}

int snapshot_pwrite_sparse(int fd, const uint8_t *p, uint64_t len, off_t off)
{
	uint64_t at = 0;
	int ret = 0;

	while (at < len && !ret) {
		uint64_t run;

		if (snapshot_page_zero(p + at)) {
			at += SNAPSHOT_PAGE;
			continue;
		}
		for (run = SNAPSHOT_PAGE; at + run < len && !snapshot_page_zero(p + at + run);)
			run += SNAPSHOT_PAGE;
		ret = snapshot_pwrite_all(fd, p + at, run, off + (off_t)at);
		at += run;
	}
	return ret;
}

int snapshot_file_finish(const struct snapshot_at *at, int fd, const char *tmp, const char *name,
			 uint64_t size, int ret)
{
	if (!ret && ftruncate(fd, (off_t)size))
		ret = -errno;
	if (!ret && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && renameat(at->dirfd, tmp, at->dirfd, name))
		ret = -errno;
	if (ret)
		unlinkat(at->dirfd, tmp, 0);
	return ret;
}

int snapshot_pwrite_all(int fd, const uint8_t *p, size_t len, off_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, p, len, off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/* Guest RAM into DIR/memory: runs of pages that are not all zero, the
 * rest left as holes (a fresh file reads zeros there). */
static int snapshot_write_memory(struct mvm *m, const struct snapshot_at *where,
				 const char *dir, char *err, size_t errlen)
{
	const uint8_t *base = m->vm.mem.map_base;
	size_t len = m->vm.mem.map_len;
	char tmp[PATH_MAX], name[PATH_MAX];
	int fd, ret;

	snapshot_name(where, SNAPSHOT_MEMORY_TMP, tmp);
	snapshot_name(where, SNAPSHOT_MEMORY, name);
	fd = openat(where->dirfd, tmp, SNAP_OPEN_WRITE, 0600);
	if (fd < 0)
		return err_set(err, errlen, -errno, "snapshot %s: cannot create %s: %s", dir,
			       SNAPSHOT_MEMORY_TMP, strerror(errno));
	ret = snapshot_pwrite_sparse(fd, base, len, 0);
	ret = snapshot_file_finish(where, fd, tmp, name, len, ret);
	if (ret)
		return err_set(err, errlen, ret, "snapshot %s: writing %llu MiB of guest memory: "
			       "%s; check the directory's space", dir,
			       (unsigned long long)(len >> 20), strerror(-ret));
	return 0;
}

/* Whether dir's memory file is the one guest RAM is in (mem_file, still
 * shared): compared as written, both made absolute. A link or another
 * spelling that names it only makes the snapshot copy RAM instead. */
static bool snapshot_in_mem_file(struct mvm *m, const char *dir)
{
	size_t n;
	char *abs;
	bool same;

	if (!m->mem_file || m->mem_private)
		return false;
	abs = mvm_abs_path(dir);
	if (!abs)
		return false;
	n = strlen(abs);
	same = !strncmp(m->mem_file, abs, n) && m->mem_file[n] == '/' &&
	       !strcmp(m->mem_file + n + 1, SNAPSHOT_MEMORY);
	free(abs);
	return same;
}

/* Guest RAM is DIR/memory already: on the disk before the state. */
static int snapshot_flush_memory(struct mvm *m, const char *dir, char *err, size_t errlen)
{
	if (fsync(m->mem_file_fd))
		return err_set(err, errlen, -errno, "snapshot %s: syncing guest RAM's file %s: %s; "
			       "check the file system's space", dir, m->mem_file, strerror(errno));
	return 0;
}

/* The snapshot holds guest RAM's file as its memory: from now on the VM's
 * RAM is a private mapping of it, so what the guest does next leaves the
 * snapshot as it is (KVM drops its mappings of the shared pages and maps
 * the private ones as the guest touches them). The VM is paused: no vCPU
 * runs and no queue thread touches guest RAM meanwhile. */
static int snapshot_mem_private(struct mvm *m, const char *dir, char *err, size_t errlen)
{
	int ret = gmem_map_file(&m->vm.mem, m->mem_file_fd, false);

	if (ret) {
		/* MAP_FIXED may have taken the old mapping with it: the VM
		 * must not run again. */
		err_set(err, errlen, ret, "snapshot %s: written, but guest RAM cannot be made "
			"private (%s): the VM is stopped", dir, strerror(-ret));
		vm_request_stop(&m->vm, VM_STOP_HOST_ERROR, MVM_EXIT_INTERNAL, err);
		return ret;
	}
	m->mem_private = true;
	return 0;
}

int mvm_snapshot(struct mvm *m, const char *dir, char *err, size_t errlen)
{
	struct snapshot_at at;
	char name[PATH_MAX];
	struct snap_w w;
	bool flush;
	unsigned i;
	int ret;

	if (!m || !dir || !*dir)
		return err_set(err, errlen, -EINVAL, "mvm_snapshot: %s", !m ? "vm is NULL" :
			       "no directory; give one to write the snapshot to");
	pthread_mutex_lock(&m->ctl_lock);
	ret = mvm_check_paused(m, "mvm_snapshot", err, errlen);
	if (ret)
		goto unlock;
	/* A disk the guest let go of on its own (it powered its slot off)
	 * is still the VM's but in no slot: a restore would have nowhere to
	 * put it. */
	for (i = 0; i < m->ndisks; i++) {
		if (!m->disks[i].port || m->disks[i].removed || pcie_port_occupied(m->disks[i].port))
			continue;
		ret = err_set(err, errlen, -EBUSY, "snapshot: disk %u (%s): the guest released it "
			      "and powered its hot-plug slot off; remove it first (mvm_disk_remove, "
			      "vm.remove-device)", i, m->disks[i].opts.path);
		goto unlock;
	}
	ret = snapshot_target(m, "snapshot", dir, &at, err, errlen);
	if (ret)
		goto unlock;
	/* The whole state first, in memory: a device that cannot be
	 * snapshotted leaves the directory as it was. */
	snap_w_init(&w);
	ret = snapshot_put_vm(m, &w, err, errlen);
	if (!ret)
		ret = arch_vm_save(&m->vm, &w, err, errlen);
	for (i = 0; !ret && i < m->nvcpus; i++)
		ret = arch_vcpu_save(&m->vcpus[i], &w, err, errlen);
	if (!ret)
		ret = snapshot_put_devices(m, &w, err, errlen);
	if (!ret && w.err)
		ret = err_set(err, errlen, w.err, "snapshot: building the state: %s",
			      strerror(-w.err));
	if (ret)
		goto free_w;
	if (unlinkat(at.dirfd, snapshot_name(&at, SNAPSHOT_STATE, name), 0) && errno != ENOENT) {
		ret = err_set(err, errlen, -errno, "snapshot %s: cannot replace its state: %s",
			      dir, strerror(errno));
		goto free_w;
	}
	flush = snapshot_in_mem_file(m, dir);
	ret = flush ? snapshot_flush_memory(m, dir, err, errlen) :
	      snapshot_write_memory(m, &at, dir, err, errlen);
	if (!ret)
		ret = snap_w_write(&w, at.dirfd, name, err, errlen);
	if (!ret && flush)
		ret = snapshot_mem_private(m, dir, err, errlen);
free_w:
	snap_w_free(&w);
	if (at.own)
		close(at.dirfd);
unlock:
	pthread_mutex_unlock(&m->ctl_lock);
	return ret;
}

/* ---- restoring one ------------------------------------------------------ */

static int snapshot_read_state(int dirfd, const char *dir, uint8_t **out, size_t *outlen,
			       char *err, size_t errlen)
{
	struct stat st;
	uint8_t *buf;
	size_t got = 0;
	int fd, ret = 0;

	fd = openat(dirfd, SNAPSHOT_STATE, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_set(err, errlen, -errno, "restore %s: no snapshot there (%s: %s); "
			       "give a directory mvm_snapshot wrote", dir, SNAPSHOT_STATE,
			       strerror(errno));
	if (fstat(fd, &st)) {
		ret = err_set(err, errlen, -errno, "restore %s: %s: %s", dir, SNAPSHOT_STATE,
			      strerror(errno));
		goto close_fd;
	}
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 || (uint64_t)st.st_size > SNAPSHOT_STATE_MAX) {
		ret = err_set(err, errlen, -EINVAL, "restore %s: %s is %lld bytes, not a snapshot "
			      "state (at most %u MiB)", dir, SNAPSHOT_STATE, (long long)st.st_size,
			      SNAPSHOT_STATE_MAX >> 20);
		goto close_fd;
	}
	buf = malloc((size_t)st.st_size);
	if (!buf) {
		ret = err_set(err, errlen, -ENOMEM, "restore %s: out of memory", dir);
		goto close_fd;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = err_set(err, errlen, n ? -errno : -EIO, "restore %s: reading %s: %s",
				      dir, SNAPSHOT_STATE, n ? strerror(errno) : "cut short");
			free(buf);
			goto close_fd;
		}
		got += (size_t)n;
	}
	*out = buf;
	*outlen = got;
close_fd:
	close(fd);
	return ret;
}

static int snapshot_get_vm(const struct snap_file *f, struct snapshot_vm *v, char *err,
			   size_t errlen)
{
	struct snap_r r;
	unsigned i;

	if (snap_find(f, SNAP_TAG_VM, 0, &r))
		return err_set(err, errlen, -EINVAL, "snapshot: no MVM! section: the file is "
			       "damaged or not mvm's");
	snap_get_str(&r, v->version, sizeof(v->version));
	/* Another version's section may have another layout: its
	 * version is all the caller looks at (snapshot_open refuses it). */
	if (!r.err && strcmp(v->version, MVM_VERSION_STRING))
		return 0;
	snap_get_str(&r, v->arch, sizeof(v->arch));
	v->cpus = snap_get_u32(&r);
	v->mem = snap_get_u64(&r);
	v->pvpanic = snap_get_u8(&r);
	v->hotplug_slots = snap_get_u32(&r);
	v->hotplug_queues = snap_get_u32(&r);
	if (!r.err && (!v->hotplug_queues || v->hotplug_queues > MVM_MAX_QUEUES))
		return err_set(err, errlen, -EINVAL, "snapshot: hot-plug slots of %u queues: the "
			       "file is damaged", v->hotplug_queues);
	v->ndisks = snap_get_u32(&r);
	if (v->ndisks > MVM_MAX_DISKS)
		return err_set(err, errlen, -EINVAL, "snapshot: %u disks, more than mvm's %u: the "
			       "file is damaged", v->ndisks, MVM_MAX_DISKS);
	for (i = 0; i < v->ndisks; i++) {
		unsigned j;

		snap_get_str(&r, v->path[i], sizeof(v->path[i]));
		snap_get_str(&r, v->spec[i], sizeof(v->spec[i]));
		v->slot[i] = snap_get_u32(&r);
		if (r.err || !v->slot[i])
			continue;
		if (v->slot[i] > v->hotplug_slots)
			return err_set(err, errlen, -EINVAL, "snapshot: disk %u in hot-plug slot %u "
				       "of %u: the file is damaged", i, v->slot[i], v->hotplug_slots);
		for (j = 0; j < i; j++)
			if (v->slot[j] == v->slot[i])
				return err_set(err, errlen, -EINVAL, "snapshot: disks %u and %u both "
					       "in hot-plug slot %u: the file is damaged", j, i,
					       v->slot[i]);
	}
	v->has_vsock = snap_get_u8(&r);
	if (v->has_vsock)
		snap_get_str(&r, v->vsock, sizeof(v->vsock));
	v->ndevices = snap_get_u32(&r);
	v->conf1 = snap_get_u32(&r);
	snap_get_str(&r, v->kernel, sizeof(v->kernel));
	snap_get_str(&r, v->initrd, sizeof(v->initrd));
	snap_get_str(&r, v->cmdline, sizeof(v->cmdline));
	return snap_done(&r, err, errlen);
}

int snapshot_payload(struct mvm *m)
{
	const struct snapshot_vm *v = m->snap_vm;

	m->kernel = v->kernel[0] ? strdup(v->kernel) : NULL;
	m->initrd = v->initrd[0] ? strdup(v->initrd) : NULL;
	m->cmdline = v->cmdline[0] ? strdup(v->cmdline) : NULL;
	m->cfg.kernel = m->kernel;
	m->cfg.initrd = m->initrd;
	m->cfg.cmdline = m->cmdline;
	return (v->kernel[0] && !m->kernel) || (v->initrd[0] && !m->initrd) ||
	       (v->cmdline[0] && !m->cmdline) ? -ENOMEM : 0;
}

int snapshot_open(struct mvm *m, char *err, size_t errlen)
{
	const char *dir = m->cfg.restore;
	struct snapshot_vm *v;
	struct stat st;
	int dirfd, ret;

	m->restore_dir = strdup(dir);
	v = calloc(1, sizeof(*v));
	if (!m->restore_dir || !v) {
		free(v);
		return err_set(err, errlen, -ENOMEM, "restore %s: out of memory", dir);
	}
	m->snap_vm = v;
	m->cfg.restore = m->restore_dir;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return err_set(err, errlen, -errno, "restore %s: %s; give the directory "
			       "mvm_snapshot wrote", dir, strerror(errno));
	ret = snapshot_read_state(dirfd, dir, &m->snap_buf, &m->snap_len, err, errlen);
	if (ret)
		goto close_dir;
	ret = snap_open(&m->snap, m->snap_buf, m->snap_len, err, errlen);
	if (!ret)
		ret = snapshot_get_vm(&m->snap, v, err, errlen);
	if (ret) {
		err_prefix(err, errlen, "restore %s: ", dir);
		goto close_dir;
	}
	if (strcmp(v->version, MVM_VERSION_STRING)) {
		ret = err_set(err, errlen, -EPROTO, "restore %s: taken by mvm %s, this is mvm %s; "
			      "take the snapshot again with this mvm", dir, v->version,
			      MVM_VERSION_STRING);
		goto close_dir;
	}
	if (strcmp(v->arch, arch_layout.name)) {
		ret = err_set(err, errlen, -EINVAL, "restore %s: an %s guest's, this mvm runs %s "
			      "guests", dir, v->arch, arch_layout.name);
		goto close_dir;
	}
	m->cfg.cpus = v->cpus;
	m->cfg.mem = v->mem;
	m->cfg.pvpanic = v->pvpanic;
	m->cfg.hotplug_slots = v->hotplug_slots;
	m->cfg.hotplug_queues = v->hotplug_queues;
	m->snap_mem_fd = openat(dirfd, SNAPSHOT_MEMORY, O_RDONLY | O_CLOEXEC);
	if (m->snap_mem_fd < 0) {
		ret = err_set(err, errlen, -errno, "restore %s: %s: %s; the snapshot is not whole",
			      dir, SNAPSHOT_MEMORY, strerror(errno));
		goto close_dir;
	}
	if (fstat(m->snap_mem_fd, &st) || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != v->mem) {
		ret = err_set(err, errlen, -EINVAL, "restore %s: %s is %lld bytes, the guest had "
			      "%llu; the snapshot is cut short or not whole", dir, SNAPSHOT_MEMORY,
			      (long long)st.st_size, (unsigned long long)v->mem);
		goto close_dir;
	}
close_dir:
	close(dirfd);
	return ret;
}

unsigned snapshot_ndisks(const struct mvm *m)
{
	return m->snap_vm->ndisks;
}

unsigned snapshot_disk_slot(const struct mvm *m, unsigned i)
{
	return i < m->snap_vm->ndisks ? m->snap_vm->slot[i] : 0;
}

int snapshot_disk(struct mvm *m, unsigned i, struct mvm_disk *d, char *buf, size_t buflen,
		  char *err, size_t errlen)
{
	struct kv_table keys = blk_disk_keys;
	const struct snapshot_vm *v = m->snap_vm;
	int ret;

	/* The path apart: a path may hold a comma, a spec may not. */
	keys.first = NULL;
	mvm_disk_init(d, v->path[i]);
	ret = kv_parse(&keys, v->spec[i], d, buf, buflen, err, errlen);
	if (ret)
		err_prefix(err, errlen, "restore %s: disk %u: ", m->restore_dir, i);
	return ret;
}

int snapshot_vsock(struct mvm *m, struct mvm_vsock *vs, char *buf, size_t buflen, char *err,
		   size_t errlen)
{
	int ret;

	if (!m->snap_vm->has_vsock)
		return -ENOENT;
	mvm_vsock_init(vs);
	ret = kv_parse(&vsock_keys, m->snap_vm->vsock, vs, buf, buflen, err, errlen);
	if (ret)
		err_prefix(err, errlen, "restore %s: ", m->restore_dir);
	return ret;
}

/* A disk or vsock device a restore's caller gave takes from the snapshot's
 * what the guest saw and the caller left at its default (mvm_disk_init's,
 * mvm_vsock_init's): a clone's --disk names its image and --vsock its CID
 * and socket, and the rest is the snapshot's. A value the caller set to
 * something else stays, and the device's load refuses it if the guest
 * would notice. */
void snapshot_disk_inherit(struct mvm *m, unsigned i, struct mvm_disk *d,
			   char id[MVM_DISK_ID_MAX + 1])
{
	struct mvm_disk def, snap;
	char buf[SNAPSHOT_SPEC_MAX], e[256];

	/* One the snapshot cannot describe is refused at mvm_prepare. */
	if (!m->snap_vm || i >= m->snap_vm->ndisks ||
	    snapshot_disk(m, i, &snap, buf, sizeof(buf), e, sizeof(e)))
		return;
	mvm_disk_init(&def, NULL);
	if (d->queues == def.queues)
		d->queues = snap.queues;
	if (d->transport == def.transport)
		d->transport = snap.transport;
	if (d->packed == def.packed)
		d->packed = snap.packed;
	if (d->discard == def.discard)
		d->discard = snap.discard;
	/* Its name too, so that what drove the VM before finds it. */
	if (!d->id && snap.id)
		d->id = strcpy(id, snap.id);
}

void snapshot_vsock_inherit(struct mvm *m, struct mvm_vsock *v)
{
	struct mvm_vsock def, snap;
	char buf[SNAPSHOT_SPEC_MAX], e[256];

	if (!m->snap_vm || snapshot_vsock(m, &snap, buf, sizeof(buf), e, sizeof(e)))
		return;
	mvm_vsock_init(&def);
	if (v->transport == def.transport)
		v->transport = snap.transport;
}

int snapshot_memory_copy(struct mvm *m, char *err, size_t errlen)
{
	uint8_t *base = m->vm.mem.map_base;
	off_t len = (off_t)m->vm.mem.map_len, at = 0;

	while (at < len) {
		off_t data = lseek(m->snap_mem_fd, at, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break;          /* only a hole is left */
		if (data < 0)
			data = at;      /* no SEEK_DATA here: read it all */
		hole = lseek(m->snap_mem_fd, data, SEEK_HOLE);
		if (hole < 0 || hole > len)
			hole = len;
		while (data < hole) {
			ssize_t n = pread(m->snap_mem_fd, base + data, (size_t)(hole - data), data);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return err_set(err, errlen, n < 0 ? -errno : -EIO, "restore %s: "
					       "reading %s: %s", m->restore_dir, SNAPSHOT_MEMORY,
					       n < 0 ? strerror(errno) : "cut short");
			data += n;
		}
		at = hole;
	}
	return 0;
}

int snapshot_load_cpus(struct mvm *m, char *err, size_t errlen)
{
	unsigned i;
	int ret;

	ret = arch_vm_load(&m->vm, &m->snap, err, errlen);
	/* The subchannel slots the channel subsystem's state says hold a
	 * device are those the snapshot's disks were in. */
	for (i = 0; !ret && i < m->nccw; i++) {
		bool disk = false;
		unsigned d;

		for (d = 0; d < m->ndisks; d++)
			disk |= m->disks[d].hslot == i + 1;
		if (disk != arch_ccw_slot_present(&m->vm, m->ccw_sch[i]))
			ret = err_set(err, errlen, -EINVAL, "hot-plug slot %u %s a disk in the "
				      "snapshot's VM list, %s in its channel subsystem: the file is "
				      "damaged", i + 1, disk ? "holds" : "holds no",
				      disk ? "no device" : "a device");
	}
	for (i = 0; !ret && i < m->nvcpus; i++)
		ret = arch_vcpu_load(&m->vcpus[i], &m->snap, err, errlen);
	if (ret)
		err_prefix(err, errlen, "restore %s: ", m->restore_dir);
	return ret;
}

/* The snapshot's rate-limit group i: its id and limits as its spec says
 * (strings in buf), its buckets' levels. 0 or -EINVAL with a message. */
static int snapshot_group(struct mvm *m, unsigned i, struct mvm_rate_group_config *c,
			  char *buf, size_t buflen, struct ratelim_levels *lv, char *err,
			  size_t errlen)
{
	char spec[SNAPSHOT_SPEC_MAX];
	struct snap_r r;
	int ret;

	if (snap_find(&m->snap, SNAP_TAG_GRP, i, &r))
		return err_set(err, errlen, -EINVAL, "restore %s: no state for rate-limit group "
			       "%u: the file is damaged", m->restore_dir, i);
	snap_get_str(&r, spec, sizeof(spec));
	ratelim_levels_read(&r, lv);
	ret = snap_done(&r, err, errlen);
	if (ret)
		return ret;
	mvm_rate_group_config_init(c);
	ret = kv_parse(&ratelim_group_keys, spec, c, buf, buflen, err, errlen);
	if (!ret && !c->id)
		ret = err_set(err, errlen, -EINVAL, "no id");
	if (ret)
		err_prefix(err, errlen, "restore %s: rate-limit group %u: the file is damaged: ",
			   m->restore_dir, i);
	return ret;
}

/* Each of the snapshot's rate-limit groups: at load, its buckets into the
 * VM's group of its id (the caller's, or one snapshot_groups_make made),
 * unless another VM started with that group already: its buckets are
 * live then, and stay; else, made where the VM has no group of its id
 * (one the caller gave keeps the caller's limits). */
static int snapshot_groups_walk(struct mvm *m, bool load, char *err, size_t errlen)
{
	unsigned i, n = snap_count(&m->snap, SNAP_TAG_GRP);

	for (i = 0; i < n; i++) {
		struct mvm_rate_group_config c;
		struct mvm_rate_group *g;
		struct ratelim_levels lv;
		char buf[SNAPSHOT_SPEC_MAX];
		int ret;

		ret = snapshot_group(m, i, &c, buf, sizeof(buf), &lv, err, errlen);
		if (ret)
			return ret;
		g = mvm_group_find(m, c.id);
		if (load) {
			if (g && !__atomic_exchange_n(&g->started, true, __ATOMIC_ACQ_REL))
				ratelim_levels_set(&g->rl, &lv, mono_ns());
			continue;
		}
		if (g)
			continue;
		ret = mvm_rate_group_new(&c, &g, err, errlen);
		if (!ret) {
			ret = mvm_group_attach(m, g, err, errlen);
			mvm_rate_group_unref(g);
		}
		if (ret) {
			err_prefix(err, errlen, "restore %s: ", m->restore_dir);
			return ret;
		}
	}
	return 0;
}

int snapshot_groups_make(struct mvm *m, char *err, size_t errlen)
{
	return snapshot_groups_walk(m, false, err, errlen);
}

int snapshot_load_devices(struct mvm *m, char *err, size_t errlen)
{
	const struct snapshot_vm *v = m->snap_vm;
	char kind[32];
	unsigned i;
	int ret = 0;

	if (v->ndevices != m->vm.ndevices || snap_count(&m->snap, SNAP_TAG_DEV) != v->ndevices) {
		ret = err_set(err, errlen, -EINVAL, "the snapshot's VM had %u devices (%u saved), "
			      "this one %u; give it the snapshot's disks and options", v->ndevices,
			      snap_count(&m->snap, SNAP_TAG_DEV), m->vm.ndevices);
		goto out;
	}
	/* The groups' buckets first: a device's load starts its queues
	 * (DRIVER_OK kicks each), whose requests pay the group at once. */
	ret = snapshot_groups_walk(m, true, err, errlen);
	for (i = 0; i < v->ndevices && !ret; i++) {
		const struct vm_device_ops *ops = m->vm.devices[i].ops;
		struct snap_r r;

		if (snap_find(&m->snap, SNAP_TAG_DEV, i, &r)) {
			ret = err_set(err, errlen, -EINVAL, "no state for device %u: the file is "
				      "damaged", i);
			break;
		}
		snap_get_str(&r, kind, sizeof(kind));
		if (!r.err && strcmp(kind, ops->kind)) {
			ret = err_set(err, errlen, -EINVAL, "device %u is a %s there, a %s here; give "
				      "the VM the snapshot's devices", i, kind, ops->kind);
			break;
		}
		ret = ops->load ? ops->load(m->vm.devices[i].dev, &r, err, errlen) :
		      err_set(err, errlen, -EOPNOTSUPP, "the %s device has no snapshots", ops->kind);
		if (!ret)
			ret = snap_done(&r, err, errlen);
	}
	if (!ret && snap_count(&m->snap, SNAP_TAG_PORT) != m->nports)
		ret = err_set(err, errlen, -EINVAL, "the snapshot has %u hot-plug slots' state, "
			      "this VM %u slots: the file is damaged",
			      snap_count(&m->snap, SNAP_TAG_PORT), m->nports);
	for (i = 0; i < m->nports && !ret; i++) {
		struct snap_r r;

		if (snap_find(&m->snap, SNAP_TAG_PORT, i, &r)) {
			ret = err_set(err, errlen, -EINVAL, "no state for hot-plug slot %u: the file "
				      "is damaged", i + 1);
			break;
		}
		ret = pcie_port_load(&m->ports[i], &r, err, errlen);
		if (!ret)
			ret = snap_done(&r, err, errlen);
	}
	if (!ret && m->pci_up)
		pci_bus_conf1_set(&m->pci, v->conf1);
out:
	if (ret)
		err_prefix(err, errlen, "restore %s: ", m->restore_dir);
	return ret;
}

void snapshot_close(struct mvm *m)
{
	if (m->snap_mem_fd >= 0)
		close(m->snap_mem_fd);
	m->snap_mem_fd = -1;
	free(m->snap_buf);
	m->snap_buf = NULL;
	free(m->snap_vm);
	m->snap_vm = NULL;
	free(m->restore_dir);
	m->restore_dir = NULL;
}
