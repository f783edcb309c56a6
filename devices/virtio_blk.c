/* virtio-blk device model (virtio 1.2 §5.2): features, configuration space,
 * queue start/stop and --stats. The data path is in blk_queue.c. */
#include "devices/virtio_blk.h"
#include "devices/blk_queue.h"
#include "devices/virtio_transport.h"
#include "vmm/base/snap.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/json.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* struct virtio_blk_config (§5.2.4) offsets, from <linux/virtio_blk.h>. */
#define CFG(field) offsetof(struct virtio_blk_config, field)

static struct blk_dev *to_blk(const struct virtio_dev *dev)
{
	return dev->priv;
}

static uint64_t blk_features(const struct virtio_dev *dev)
{
	const struct blk_dev *blk = to_blk(dev);
	uint64_t f = VIRTIO_BIT(VIRTIO_BLK_F_SIZE_MAX) | VIRTIO_BIT(VIRTIO_BLK_F_SEG_MAX) |
		     VIRTIO_BIT(VIRTIO_BLK_F_BLK_SIZE) | VIRTIO_BIT(VIRTIO_BLK_F_FLUSH) |
		     VIRTIO_BIT(VIRTIO_BLK_F_TOPOLOGY);

	if (blk->img.ro)
		f |= VIRTIO_BIT(VIRTIO_BLK_F_RO);
	else
		f |= VIRTIO_BIT(VIRTIO_BLK_F_WRITE_ZEROES);
	if (blk->img.discard)
		f |= VIRTIO_BIT(VIRTIO_BLK_F_DISCARD);
	if (blk->opts.queues > 1)
		f |= VIRTIO_BIT(VIRTIO_BLK_F_MQ);
	return f;
}

static void blk_build_config(struct blk_dev *blk)
{
	uint8_t *c = blk->config;

	memset(c, 0, sizeof(blk->config));
	le64_store(c + CFG(capacity), blk->capacity);
	le32_store(c + CFG(size_max), BLK_SIZE_MAX);
	le32_store(c + CFG(seg_max), BLK_SEG_MAX);
	le32_store(c + CFG(blk_size), (uint32_t)BLK_SECTOR);
	c[CFG(physical_block_exp)] = 0;              /* physical block = logical block */
	c[CFG(alignment_offset)] = 0;
	le16_store(c + CFG(min_io_size), 1);     /* in logical blocks */
	le32_store(c + CFG(opt_io_size), 0);     /* no preference */
	c[CFG(wce)] = 0;                   /* CONFIG_WCE not offered */
	le16_store(c + CFG(num_queues), (uint16_t)blk->opts.queues);
	if (blk->img.discard) {
		le32_store(c + CFG(max_discard_sectors), BLK_DWZ_MAX_SECTORS);
		le32_store(c + CFG(max_discard_seg), BLK_DWZ_MAX_SEG);
		le32_store(c + CFG(discard_sector_alignment), 4096 / BLK_SECTOR);
	}
	if (!blk->img.ro) {
		le32_store(c + CFG(max_write_zeroes_sectors), BLK_DWZ_MAX_SECTORS);
		le32_store(c + CFG(max_write_zeroes_seg), BLK_DWZ_MAX_SEG);
		c[CFG(write_zeroes_may_unmap)] = blk->img.discard ? 1 : 0;
	}
}

/* Bytes past the end of our config read as 0 (virtio.h contract); off and
 * len come from the guest, so check without overflow. */
static void blk_config_read(struct virtio_dev *dev, uint64_t off, uint8_t *data, unsigned len)
{
	const struct blk_dev *blk = to_blk(dev);
	unsigned i;

	for (i = 0; i < len; i++) {
		uint64_t o = off + i;
		data[i] = (o >= off && o < sizeof(blk->config)) ? blk->config[o] : 0;
	}
}

/* Nothing is writable: `writeback` needs VIRTIO_BLK_F_CONFIG_WCE, not offered. */
static void blk_config_write(struct virtio_dev *dev, uint64_t off, const uint8_t *data,
			     unsigned len)
{
	(void)dev; (void)off; (void)data; (void)len;
}

static int blk_launch_op(struct virtio_dev *dev)
{
	return blk_workers_launch(to_blk(dev));
}

static void blk_halt_op(struct virtio_dev *dev)
{
	blk_workers_end(to_blk(dev));
}

static int blk_queue_start_op(struct virtio_dev *dev, unsigned q)
{
	return blk_queue_start(to_blk(dev), q);
}

static void blk_queue_stop_op(struct virtio_dev *dev, unsigned q)
{
	blk_queue_stop(to_blk(dev), q);
}

static void blk_queues_stopping_op(struct virtio_dev *dev)
{
	blk_queues_stopping(to_blk(dev));
}

static void blk_reset(struct virtio_dev *dev)
{
	/* Queues are stopped by the core before this; a failed flush stays
	 * failed across resets: the data it should have made durable may be
	 * gone, and a fresh driver must not be told otherwise. */
	(void)dev;
}

/* The members of the transport's "device" object. */
static void blk_stats_json(struct virtio_dev *dev, struct json *j)
{
	struct blk_dev *blk = to_blk(dev);
	unsigned q;

	json_str(j, "kind", "virtio-blk");
	if (blk->opts.id)
		json_str(j, "id", blk->opts.id);
	json_str(j, "path", __atomic_load_n(&blk->opts.path, __ATOMIC_ACQUIRE));
	json_u64(j, "io_threads", blk->nworkers);
	json_arr_begin(j, "queues");
	for (q = 0; q < dev->num_queues; q++) {
		struct blk_queue_stats s;

		blk_get_queue_stats(dev, q, &s);
		json_obj_begin(j, NULL);
		json_u64(j, "requests", s.requests);
		json_u64(j, "batches", s.batches);
		json_u64(j, "io_uring_enter", s.enters);
		json_u64(j, "irqs", s.irqs);
		json_u64(j, "errors", s.errors);
		json_u64(j, "bytes_read", s.bytes_read);
		json_u64(j, "bytes_written", s.bytes_written);
		json_u64(j, "read_ops", s.read_ops);
		json_u64(j, "write_ops", s.write_ops);
		json_u64(j, "polled", s.polled);
		json_u64(j, "poll_preempted", s.poll_preempted);
		json_u64(j, "kicks", s.kicks);
		json_u64(j, "gathers", s.gathers);
		json_u64(j, "gathered", s.gathered);
		json_u64(j, "fixed", s.fixed);
		json_u64(j, "retries", s.retries);
		json_u64(j, "budget_waits", s.budget_waits);
		json_u64(j, "rate_delayed", s.rate_delayed);
		json_u64(j, "rate_wait_us", s.rate_wait_us);
		if (s.ring_valid) {
			/* Where a stalled queue stopped: work the device never
			 * took (avail_pending), host I/O that never completed
			 * (in_flight), or completions past the driver's
			 * used_event that it never saw. */
			json_obj_begin(j, "ring");
			json_str(j, "layout", s.ring.packed ? "packed" : "split");
			json_u64(j, "last_avail", s.ring.last_avail);
			json_u64(j, "used", s.ring.used);
			json_u64(j, "avail_pending", s.ring.avail_pending);
			json_u64(j, "in_flight", s.ring.in_flight);
			json_u64(j, "driver_event", s.ring.driver_event);
			json_u64(j, "driver_flags", s.ring.driver_flags);
			json_u64(j, "device_event", s.ring.device_event);
			json_u64(j, "device_flags", s.ring.device_flags);
			json_obj_end(j);
		}
		json_obj_end(j);
	}
	json_arr_end(j);
}

static void blk_destroy(struct virtio_dev *dev)
{
	struct blk_dev *blk = to_blk(dev);

	/* Before the image: the rings hold its fds (a lost worker's ring
	 * and its files stay with it). */
	blk_workers_fini(blk);
	for (unsigned wi = 0; wi < blk->nworkers; wi++)
		if (blk->workers[wi].up)
			return;
	if (blk->rate_up)
		ratelim_fini(&blk->rate);
	blk_image_close(&blk->img);
	blk_slots_free(blk);
	free(blk->workers);
	free(blk->queues);
	free(blk);      /* holds dev: last */
}

/* The guest's driver knows the disk's size: a restore onto an image of
 * another size would have it read past the end, or miss the tail. The
 * disk's own rate limiter goes on where it stood (its group's is saved
 * by the VM: vmm/lib/snapshot.c). */
static int blk_save_op(struct virtio_dev *dev, struct snap_w *w, char *err, size_t errlen)
{
	struct blk_dev *blk = to_blk(dev);
	struct ratelim_levels lv;
	uint64_t bytes, ops;

	(void)err;
	(void)errlen;
	snap_put_u64(w, blk->capacity);
	blk_queues_held_cost(blk, &bytes, &ops);
	ratelim_levels_get(&blk->rate, mono_ns(), bytes, ops, &lv);
	ratelim_levels_put(w, &lv);
	return 0;
}

static int blk_load_op(struct virtio_dev *dev, struct snap_r *r, char *err, size_t errlen)
{
	struct blk_dev *blk = to_blk(dev);
	uint64_t cap = snap_get_u64(r);
	struct ratelim_levels lv;

	ratelim_levels_read(r, &lv);
	if (r->err)
		return snap_done(r, err, errlen);
	if (cap != blk->capacity)
		return err_set(err, errlen, -EINVAL, "snapshot: disk %s has %llu bytes, the "
			       "snapshot's guest had %llu; give an image of the snapshot's size",
			       blk->opts.path, (unsigned long long)blk->capacity * BLK_SECTOR,
			       (unsigned long long)cap * BLK_SECTOR);
	ratelim_levels_set(&blk->rate, &lv, mono_ns());
	return 0;
}

/* A request waiting for rate-limit tokens was taken and not started: a
 * snapshot gives it back to the ring (the restored queue takes it again
 * and its limits start afresh). The queue's thread is quiesced: the
 * pause's handshake ordered its last write of rate_waiting before this. */
void blk_held_cost(struct virtio_dev *dev, uint64_t *bytes, uint64_t *ops)
{
	blk_queues_held_cost(to_blk(dev), bytes, ops);
}

static int blk_queue_held_op(struct virtio_dev *dev, unsigned q)
{
	return __atomic_load_n(&to_blk(dev)->queues[q].rate_waiting, __ATOMIC_RELAXED);
}

/* A hot-plug slot's device between disks (blk_dev_spare, blk_empty). */
static bool blk_vacant_op(const struct virtio_dev *dev)
{
	return to_blk(dev)->img.fd < 0;
}

static const struct virtio_device_ops blk_ops = {
	.vacant = blk_vacant_op,
	.save = blk_save_op,
	.load = blk_load_op,
	.queue_held = blk_queue_held_op,
	.name = "virtio-blk",
	.device_id = VIRTIO_ID_BLOCK,
	.features = blk_features,
	.config_read = blk_config_read,
	.config_write = blk_config_write,
	.launch = blk_launch_op,
	.halt = blk_halt_op,
	.queue_start = blk_queue_start_op,
	.queue_stop = blk_queue_stop_op,
	.queues_stopping = blk_queues_stopping_op,
	.reset = blk_reset,
	.stats_json = blk_stats_json,
	.destroy = blk_destroy,
};

#define BLK_KEY(member, ctype) KV_OFF(struct mvm_disk, member, ctype)

static const struct kv_value blk_on_off[] = {
	{ .name = "on", .value = 1 },
	{ .name = "off", .value = 0 },
	{ .name = NULL },
};
static const struct kv_value blk_discard_values[] = {
	{ .name = "on", .value = 1 },
	{ .name = "off", .value = 0 },
	{ .name = "unmap", .value = 1, .alias = true },
	{ .name = "ignore", .value = 0, .alias = true },
	{ .name = NULL },
};
static const struct kv_value blk_cache_values[] = {
	{ .name = "none", .value = MVM_CACHE_NONE },
	{ .name = "writeback", .value = MVM_CACHE_WRITEBACK },
	{ .name = NULL },
};
/* In the order mvm --help shows them. The transport's default is the
 * architecture's (mvm_disk_init), not the device's. */
static const struct kv_key blk_keys[] = {
	{ "ro", KV_FLAG, BLK_KEY(ro, bool), .max = 1, .def = 0,
	  .help = "read-only: VIRTIO_BLK_F_RO, the guest's writes fail" },
	{ "rw", KV_FLAG, BLK_KEY(ro, bool), .max = 0, .no_default = true },
	{ "id", KV_STRING, BLK_KEY(id, const char *), .max = MVM_DISK_ID_MAX, .meta = "NAME",
	  .help = "the disk's id, as Cloud Hypervisor's (vm.info, vm.counters, "
		  "vm.remove-device, --stats): letters, digits, '-', '_', '.' (default "
		  "_diskN)" },
	{ "serial", KV_STRING, BLK_KEY(serial, const char *), .max = BLK_SERIAL_MAX,
	  .meta = "ID", .help = "the virtio-blk ID (/sys/block/vda/serial), up to 20 bytes" },
	{ "cache", KV_ENUM, BLK_KEY(cache, enum mvm_cache), .values = blk_cache_values,
	  .def = MVM_CACHE_WRITEBACK,
	  .help = "none: O_DIRECT on the host (default writeback)" },
	{ "discard", KV_BOOL, BLK_KEY(discard, bool), .values = blk_discard_values, .def = 0,
	  .help = "offer DISCARD (hole punching) where the host can (default off)" },
	{ "queues", KV_UINT, BLK_KEY(queues, unsigned), .min = 1, .max = MVM_MAX_QUEUES,
	  .def = 1, .meta = "N", .help = "virtqueues (default 1, or --queues)" },
	/* A program may give more threads than queues (it gets one per
	 * queue), as in 2.0; a spec may not. */
	{ "io-threads", KV_UINT, BLK_KEY(io_threads, unsigned), .min = 1,
	  .max = MVM_MAX_QUEUES, .check_max = UINT_MAX, .zero_is_unset = true, .meta = "N",
	  .help = "host threads serving the queues (default: one per queue, at most as "
		  "many as CPUs mvm may run on, or --io-threads)" },
	{ "poll", KV_UINT, BLK_KEY(poll_us, unsigned), .max = VQW_POLL_US_MAX,
	  .def = BLK_POLL_US_DEFAULT, .meta = "USEC", .unit = "us",
	  .help = "the longest time an idle I/O thread polls for work (default 32; it "
		  "adapts below that, 0: never)" },
	{ "gather", KV_UINT, BLK_KEY(gather_us, unsigned), .max = BLK_GATHER_US_MAX,
	  .def = BLK_GATHER_US_DEFAULT, .meta = "USEC", .unit = "us",
	  .help = "the longest an I/O thread waits after a kick for more requests to "
		  "batch (default 200; it adapts below that and turns itself off at low "
		  "queue depths; 0: never)" },
	{ "transport", KV_ENUM, BLK_KEY(transport, enum mvm_transport),
	  .values = vtr_transport_values, .no_default = true,
	  .help = "the virtio transport (default: --transport, or pci on x86, ccw on s390x)" },
	{ "packed", KV_BOOL, BLK_KEY(packed, bool), .values = blk_on_off, .def = 1,
	  .help = "offer the packed ring (default on)" },
	{ "fixed-buffers", KV_BOOL, BLK_KEY(fixed_buffers, bool), .values = blk_on_off,
	  .def = 0,
	  .help = "on: guest RAM registered with io_uring, so O_DIRECT I/O skips pinning "
		  "pages per request; pins all of guest RAM (needs RLIMIT_MEMLOCK or "
		  "CAP_IPC_LOCK; default off)" },
	RATELIM_KEYS(struct mvm_disk, rate),
	{ "rate_limit_group", KV_STRING, BLK_KEY(rate_limit_group, const char *),
	  .max = MVM_ID_MAX, .meta = "ID",
	  .help = "share the limits of the rate-limit group ID (--rate-limit-group) "
		  "with its other disks, on top of this disk's own" },
};

const struct kv_table blk_disk_keys = {
	.what = "disk",
	.first = "PATH",
	.first_name = "image path",
	.first_off = BLK_KEY(path, const char *),
	.keys = blk_keys,
	.nkeys = sizeof(blk_keys) / sizeof(blk_keys[0]),
};

static int blk_dev_create(const struct mvm_disk *o, struct blk_image *img,
			  const struct guest_mem *mem, const struct blk_backend_ops *backend,
			  void *backend_arg, struct virtio_dev **out, char *err, size_t errlen)
{
	struct blk_dev *blk;
	int r;

	if (!o->path || strlen(o->path) >= BLK_PATH_MAX) {
		snprintf(err, errlen, "disk %.64s: no path, or a path longer than %d bytes",
			 o->path ? o->path : "(null)", BLK_PATH_MAX - 1);
		r = -ENAMETOOLONG;
		goto close_image;
	}
	r = kv_check(&blk_disk_keys, o, o->path, err, errlen);
	if (!r)
		r = ratelim_check(&o->rate, "disk", o->path, err, errlen);
	if (r)
		goto close_image;
	blk = calloc(1, sizeof(*blk));
	if (!blk)
		goto oom;
	blk->opts = *o;
	blk->opts.path = strcpy(blk->path[0], o->path);
	blk->opts.serial = o->serial ? strcpy(blk->serial, o->serial) : NULL;
	blk->opts.id = o->id ? strcpy(blk->id, o->id) : NULL;
	blk->queues = calloc(o->queues, sizeof(*blk->queues));
	blk->nworkers = blk_io_threads(o);
	blk->workers = calloc(blk->nworkers, sizeof(*blk->workers));
	if (!blk->queues || !blk->workers) {
		free(blk->workers);
		free(blk->queues);
		free(blk);
		goto oom;
	}
	blk_image_move(&blk->img, img);     /* ours now */
	blk->backend = backend;
	blk->backend_arg = backend_arg;
	blk->capacity = blk->img.size / BLK_SECTOR;
	blk_build_config(blk);
	r = ratelim_init(&blk->rate, &o->rate, mono_ns());
	blk->rate_up = !r;
	if (!r)
		r = virtio_dev_init(&blk->vdev, &blk_ops, blk, mem, o->queues, BLK_QUEUE_SIZE_MAX);
	if (r) {
		snprintf(err, errlen, "disk %s: cannot create the virtio device: %s",
			 o->path, strerror(-r));
		if (blk->rate_up)
			ratelim_fini(&blk->rate);
		blk_image_close(&blk->img);
		free(blk->workers);
		free(blk->queues);
		free(blk);
		return r;
	}
	r = blk_slots_alloc(blk);
	if (r) {
		virtio_dev_destroy(&blk->vdev);     /* blk_destroy: everything */
		goto oom_closed;
	}
	/* The I/O threads' rings: now, while the process has one thread. */
	r = blk_workers_init(blk);
	if (r) {
		virtio_dev_destroy(&blk->vdev);
		snprintf(err, errlen, "disk %s: cannot set up its I/O rings: %s%s", o->path,
			 strerror(-r), r == -ENOMEM || r == -EMFILE ?
			 "; raise RLIMIT_NOFILE or RLIMIT_MEMLOCK, or give fewer queues" : "");
		return r;
	}
	*out = &blk->vdev;
	return 0;

oom_closed:
	snprintf(err, errlen, "disk %s: out of memory", o->path);
	return -ENOMEM;
oom:
	snprintf(err, errlen, "disk %s: out of memory", o->path);
	r = -ENOMEM;
close_image:
	blk_image_close(img);
	return r;
}

int blk_dev_spare(const struct mvm_disk *shape, const struct guest_mem *mem,
		  struct virtio_dev **out, char *err, size_t errlen)
{
	struct blk_image none = { .fd = -1, .fd_buffered = -1 };
	struct mvm_disk o = *shape;

	/* Read-write (its rings allow writing: a read-only image's
	 * descriptor refuses writes on its own), no image, no limits. */
	o.path = "";
	o.ro = false;
	o.serial = o.id = o.rate_limit_group = NULL;
	memset(&o.rate, 0, sizeof(o.rate));
	return blk_dev_create(&o, &none, mem, &blk_file_backend, NULL, out, err, errlen);
}

int blk_fill(struct virtio_dev *dev, struct blk_image *img, const struct mvm_disk *o,
	     struct ratelim *group, char *err, size_t errlen)
{
	int files[BLK_FILES] = { img->fd, img->fd_buffered }, none[BLK_FILES] = { -1, -1 };
	struct blk_dev *blk;
	struct mvm_disk shape;
	int r;

	if (dev->ops != &blk_ops || to_blk(dev)->img.fd >= 0 || virtio_get_status(dev))
		return err_set(err, errlen, -EINVAL, "disk %s: its slot's device is not an "
			       "empty one", o->path);
	blk = to_blk(dev);
	if (!o->queues || o->queues > dev->num_queues || strlen(o->path) >= BLK_PATH_MAX)
		return err_set(err, errlen, -EINVAL, "disk %s: %u queues, the slot's device "
			       "has %u", o->path, o->queues, dev->num_queues);
	r = blk_workers_set_files(blk, files, none);
	if (r == -ETIMEDOUT) {
		/* A thread may still take them: they stay open for good. */
		img->fd = img->fd_buffered = -1;
		virtio_dev_needs_reset(dev);
	}
	if (r)
		return err_set(err, errlen, r, "disk %s: cannot give the image to the slot's I/O "
			       "threads: %s", o->path, strerror(-r));
	if (group) {
		r = blk_set_group(dev, group);
		if (r) {
			blk_workers_set_files(blk, none, files);
			return err_set(err, errlen, r, "disk %s: cannot join its rate-limit "
				       "group: %s", o->path, strerror(-r));
		}
	}
	blk_image_move(&blk->img, img);
	/* The disk's own options; the threads' (how many, how they poll and
	 * gather, fixed buffers) and the transport stay the slot's. */
	shape = blk->opts;
	blk->opts = *o;
	blk->opts.io_threads = shape.io_threads;
	blk->opts.poll_us = shape.poll_us;
	blk->opts.gather_us = shape.gather_us;
	blk->opts.fixed_buffers = shape.fixed_buffers;
	blk->opts.transport = shape.transport;
	blk->opts.path = strcpy(blk->path[0], o->path);
	blk->opts.serial = o->serial ? strcpy(blk->serial, o->serial) : NULL;
	blk->opts.id = o->id ? strcpy(blk->id, o->id) : NULL;
	blk->capacity = blk->img.size / BLK_SECTOR;
	__atomic_store_n(&blk->flush_failed, false, __ATOMIC_RELAXED);
	ratelim_set(&blk->rate, &o->rate, mono_ns());
	dev->no_packed = !o->packed;
	blk_build_config(blk);
	blk_clear_stats(blk);
	return 0;
}

void blk_empty(struct virtio_dev *dev)
{
	int none[BLK_FILES] = { -1, -1 };
	struct mvm_rate_limit unlimited;
	struct blk_dev *blk = to_blk(dev);
	unsigned wi;

	if (dev->ops != &blk_ops)
		return;
	/* A thread that does not answer keeps the image: left open. */
	if (blk_workers_set_files(blk, none, none) == -ETIMEDOUT)
		blk_image_move(&(struct blk_image){ 0 }, &blk->img);
	blk_image_close(&blk->img);
	if (blk->group) {
		for (wi = 0; wi < blk->nworkers; wi++)
			ratelim_leave(blk->group, &blk->workers[wi].w);
		blk->group = NULL;
	}
	memset(&unlimited, 0, sizeof(unlimited));
	ratelim_set(&blk->rate, &unlimited, mono_ns());
	blk->opts.path = strcpy(blk->path[0], "");
	blk->opts.serial = blk->opts.id = blk->opts.rate_limit_group = NULL;
	memset(&blk->opts.rate, 0, sizeof(blk->opts.rate));
	blk->opts.ro = false;
	blk->capacity = 0;
	blk_build_config(blk);
}

int blk_dev_from_image(const struct mvm_disk *o, struct blk_image *img,
		       const struct guest_mem *mem, struct virtio_dev **out, char *err,
		       size_t errlen)
{
	return blk_dev_create(o, img, mem, &blk_file_backend, NULL, out, err, errlen);
}

int blk_dev_new_backend(const struct mvm_disk *o, const struct guest_mem *mem,
			const struct blk_backend_ops *backend, void *arg,
			struct virtio_dev **out, char *err, size_t errlen)
{
	struct blk_image img;
	int r;

	r = blk_image_open(o, &img, NULL, err, errlen);
	if (r)
		return r;
	return blk_dev_create(o, &img, mem, backend, arg, out, err, errlen);
}

int blk_dev_new(const struct mvm_disk *o, const struct guest_mem *mem,
		struct virtio_dev **out, char *err, size_t errlen)
{
	return blk_dev_new_backend(o, mem, &blk_file_backend, NULL, out, err, errlen);
}

int blk_get_queue_stats(struct virtio_dev *dev, unsigned q, struct blk_queue_stats *out)
{
	const struct blk_queue *bq;
	struct vqw_stats w;

	if (dev->ops != &blk_ops || q >= dev->num_queues)
		return -EINVAL;
	bq = &to_blk(dev)->queues[q];
	/* The worker's counters: it keeps them as long as the device. */
	vqw_get_stats(bq->wq, &w);
	out->requests = w.requests;
	out->batches = w.batches;
	out->enters = w.enters;
	out->irqs = w.irqs;
	out->polled = w.polled;
	out->poll_preempted = w.preempted;
	out->kicks = w.kicks;
	out->gathers = w.gathers;
	out->gathered = w.gathered;
	out->fixed = w.fixed;
	out->retries = w.retries;
	out->ring_valid = w.ring_valid;
	out->ring = w.ring;
	out->errors = __atomic_load_n(&bq->errors, __ATOMIC_RELAXED);
	out->budget_waits = __atomic_load_n(&bq->budget_waits, __ATOMIC_RELAXED);
	out->rate_delayed = __atomic_load_n(&bq->rate_delayed, __ATOMIC_RELAXED);
	out->rate_wait_us = __atomic_load_n(&bq->rate_wait_ns, __ATOMIC_RELAXED) / 1000;
	out->bytes_read = __atomic_load_n(&bq->bytes_read, __ATOMIC_RELAXED);
	out->bytes_written = __atomic_load_n(&bq->bytes_written, __ATOMIC_RELAXED);
	out->read_ops = __atomic_load_n(&bq->read_ops, __ATOMIC_RELAXED);
	out->write_ops = __atomic_load_n(&bq->write_ops, __ATOMIC_RELAXED);
	return 0;
}

int blk_set_rate(struct virtio_dev *dev, const struct mvm_rate_limit *rate, char *err,
		 size_t errlen)
{
	struct blk_dev *blk;
	int r;

	if (dev->ops != &blk_ops)
		return -EINVAL;
	blk = to_blk(dev);
	r = ratelim_check(rate, "disk", blk->opts.path, err, errlen);
	if (r)
		return r;
	ratelim_set(&blk->rate, rate, mono_ns());
	return 0;
}

int blk_swap(struct virtio_dev *dev, struct blk_image *img, const char *path, char *err,
	     size_t errlen)
{
	int r;

	if (dev->ops != &blk_ops)
		return err_set(err, errlen, -EINVAL, "%s: not a disk", path);
	r = blk_swap_image(to_blk(dev), img, path, err, errlen);
	if (r)
		return r;
	/* Virtio 1.2 section 5.2.2: the capacity may change, with a
	 * configuration change notification. */
	blk_build_config(to_blk(dev));
	virtio_config_changed(dev);
	return 0;
}

int blk_resize(struct virtio_dev *dev, uint64_t size, char *err, size_t errlen)
{
	struct blk_dev *blk;
	const char *path;

	if (dev->ops != &blk_ops)
		return err_set(err, errlen, -EINVAL, "not a disk");
	blk = to_blk(dev);
	path = blk->opts.path;
	if (blk->img.fd < 0)
		return err_set(err, errlen, -ENODEV, "an empty hot-plug slot has no image to "
			       "resize");
	if (!size || size % BLK_SECTOR || size > INT64_MAX)
		return err_set(err, errlen, -EINVAL, "disk %s: size %llu is not a non-zero "
			       "multiple of 512 bytes; give one", path, (unsigned long long)size);
	if (blk->img.ro)
		return err_set(err, errlen, -EROFS, "disk %s is read-only; only a read-write "
			       "disk's image can be resized", path);
	if (blk->img.blockdev)
		return err_set(err, errlen, -EOPNOTSUPP, "disk %s is a host block device: its "
			       "size is the host's to change; resize image files only", path);
	if (size == blk->img.size)
		return 0;
	if (ftruncate(blk->img.fd, (off_t)size) < 0) {
		int r = -errno;

		return err_set(err, errlen, r, "disk %s: cannot make it %llu bytes: %s", path,
			       (unsigned long long)size, strerror(-r));
	}
	blk->img.size = size;
	blk_queue_set_capacity(blk);
	/* Virtio 1.2 section 5.2.2, as in blk_swap. */
	blk_build_config(blk);
	virtio_config_changed(dev);
	return 0;
}

int blk_set_group(struct virtio_dev *dev, struct ratelim *group)
{
	struct blk_dev *blk;
	unsigned wi;
	int r;

	if (dev->ops != &blk_ops || to_blk(dev)->group)
		return -EINVAL;
	blk = to_blk(dev);
	for (wi = 0; wi < blk->nworkers; wi++) {
		r = ratelim_join(group, &blk->workers[wi].w);
		if (r) {
			while (wi--)
				ratelim_leave(group, &blk->workers[wi].w);
			return r;
		}
	}
	blk->group = group;
	return 0;
}
