/* virtio-blk device: real device code and real io_uring on a temp file,
 * driven by the fake-guest driver (tests/unit/vdrv.h) through the
 * virtio-mmio register model. No KVM. */
#include "tests/unit/disk_spec.h"
#include "tests/unit/check.h"
#include "vmm/base/json.h"
#include "tests/unit/vdrv.h"
#include "devices/virtio_blk.h"
#include "devices/blk_queue.h"
#include "devices/blk_req.h"
#include "devices/blk_image.h"
#include "vmm/base/log.h"
#include "vmm/kvm/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define IMG_SIZE (1u << 20)
#define QSIZE 128

struct t {
	struct vdrv d;
	struct virtio_dev *dev;
	char path[64];
	int fd;                   /* the test's own view of the image */
	unsigned nq;
};

static uint8_t pattern(uint64_t off)
{
	return (uint8_t)(off * 7 + off / 512 + 1);
}

static void make_image(struct t *t, uint64_t size)
{
	uint8_t *buf = malloc(size);
	uint64_t i;

	strcpy(t->path, "/tmp/mvm-test-blk-XXXXXX");
	t->fd = mkstemp(t->path);
	CHECK(t->fd >= 0);
	for (i = 0; i < size; i++)
		buf[i] = pattern(i);
	CHECK_EQ(pwrite(t->fd, buf, size, 0), (long long)size);
	free(buf);
}

static uint64_t all_features(void)
{
	return VIRTIO_BIT(VIRTIO_F_VERSION_1) | VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
	       VIRTIO_BIT(VIRTIO_RING_F_INDIRECT_DESC) | 0x7fffffULL;
}

/* Where the next setup's device logs from its creation on (NULL: nowhere),
 * and whether its threads enter their filters (the VM's sandbox, which
 * the transport sets on a device that exists already). */
static struct log_sink *setup_log;
static bool setup_sandbox;
static const char *setup_prefix = "";   /* dev->thread_prefix: the VM's names */
/* The next setup's image: sparse, of this size (0: IMG_SIZE of pattern). */
static uint64_t setup_image_size;

/* Create the device from "<image><opts>" with `backend` (NULL: the
 * file's), negotiate `features`, set up nq queues; DRIVER_OK unless !ok. */
static void setup_backend(struct t *t, const char *opts, unsigned nq, uint64_t features,
			  bool ok, const struct blk_backend_ops *backend)
{
	char spec[256], err[256];
	struct mvm_disk o;
	unsigned q;

	check_need_io_uring();
	memset(t, 0, sizeof(*t));
	if (setup_image_size) {
		strcpy(t->path, "/tmp/mvm-test-blk-XXXXXX");
		t->fd = mkstemp(t->path);
		CHECK(t->fd >= 0);
		CHECK_EQ(ftruncate(t->fd, (off_t)setup_image_size), 0);
	} else {
		make_image(t, IMG_SIZE);
	}
	snprintf(spec, sizeof(spec), "%s%s", t->path, opts);
	CHECK_EQ(test_disk_parse(spec, nq, &o, err, sizeof(err)), 0);
	CHECK_EQ(vdrv_ram_init(&t->d, 0x1000, 16 << 20), 0);
	if (blk_dev_new_backend(&o, &t->d.mem, backend ? backend : &blk_file_backend, NULL,
				&t->dev, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		CHECK(0);
	}
	t->dev->log = setup_log;
	t->dev->sandbox = setup_sandbox;
	snprintf(t->dev->thread_prefix, sizeof(t->dev->thread_prefix), "%s", setup_prefix);
	CHECK_EQ(vdrv_attach(&t->d, t->dev), 0);
	CHECK_EQ(vdrv_negotiate(&t->d, features), 0);
	t->nq = o.queues;
	for (q = 0; q < t->nq; q++)
		CHECK_EQ(vdrv_queue_setup(&t->d, q, QSIZE), 1);
	if (ok)
		vdrv_driver_ok(&t->d);
}

static void setup_ex(struct t *t, const char *opts, unsigned nq, uint64_t features, bool ok)
{
	setup_backend(t, opts, nq, features, ok, NULL);
}

static void setup(struct t *t, const char *opts, unsigned nq)
{
	setup_ex(t, opts, nq, all_features(), true);
}

static void teardown(struct t *t)
{
	vdrv_wr(&t->d, VIRTIO_MMIO_STATUS, 0);
	virtio_dev_destroy(t->dev);
	vdrv_detach(&t->d);
	close(t->fd);
	unlink(t->path);
	free(t->d.ram);
}

static uint64_t hdr(struct t *t, uint32_t type, uint64_t sector)
{
	uint64_t g = vdrv_alloc(&t->d, 16, 16);
	uint8_t *p = vdrv_host(&t->d, g);

	le32_store(p, type);
	le32_store(p + 4, 0);
	le64_store(p + 8, sector);
	return g;
}

static uint64_t status_buf(struct t *t)
{
	uint64_t g = vdrv_alloc(&t->d, 1, 1);
	*(uint8_t *)vdrv_host(&t->d, g) = 0xff;
	return g;
}

/* header, optional data buffer, status byte: the standard 3-descriptor chain. */
static int post(struct t *t, unsigned q, uint32_t type, uint64_t sector, uint64_t data,
		uint32_t len, bool data_writable, uint64_t *st)
{
	struct vdrv_sg sg[3];
	unsigned n = 0;

	*st = status_buf(t);
	sg[n++] = (struct vdrv_sg){ hdr(t, type, sector), 16, false };
	if (len)
		sg[n++] = (struct vdrv_sg){ data, len, data_writable };
	sg[n++] = (struct vdrv_sg){ *st, 1, true };
	return vdrv_add(&t->d, q, sg, n, false);
}

static uint8_t st_of(struct t *t, uint64_t st)
{
	return *(volatile uint8_t *)vdrv_host(&t->d, st);
}

/* Wait (up to 5 s) for one used element. */
static void wait_used(struct t *t, unsigned q, uint32_t *id, uint32_t *len)
{
	for (int i = 0; i < 50000; i++) {
		if (vdrv_get_used(&t->d, q, id, len))
			return;
		usleep(100);
	}
	CHECK(!"no used element within 5 s");
}

/* One request, kicked, waited for. Returns the status byte; *used = len. */
static uint8_t run1(struct t *t, unsigned q, uint32_t type, uint64_t sector, uint64_t data,
		    uint32_t len, bool data_writable, uint32_t *used)
{
	uint64_t st;
	uint32_t id, ulen;
	int head = post(t, q, type, sector, data, len, data_writable, &st);

	CHECK(head >= 0);
	vdrv_kick(&t->d, q);
	wait_used(t, q, &id, &ulen);
	CHECK_EQ(id, head);
	if (used)
		*used = ulen;
	return st_of(t, st);
}

static bool data_matches(const uint8_t *p, uint64_t off, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		if (p[i] != pattern(off + i))
			return false;
	return true;
}

static void stats(struct t *t, unsigned q, struct blk_queue_stats *s)
{
	CHECK_EQ(blk_get_queue_stats(t->dev, q, s), 0);
}

/* --- configuration and features --- */

static uint32_t cfg32(struct t *t, unsigned off)
{
	return vdrv_rd(&t->d, VIRTIO_MMIO_CONFIG + off);
}

TEST(config_space_fields)
{
	struct t t;
	uint8_t b[2];

	setup(&t, ",queues=4", 1);
	CHECK_EQ(vdrv_rd(&t.d, VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_BLOCK);
	CHECK_EQ(cfg32(&t, 0), IMG_SIZE / 512);          /* capacity low */
	CHECK_EQ(cfg32(&t, 4), 0);                       /* capacity high */
	CHECK_EQ(cfg32(&t, 8), BLK_SIZE_MAX);
	CHECK_EQ(cfg32(&t, 12), BLK_SEG_MAX);
	CHECK(BLK_SEG_MAX <= VIRTQ_MAX_CHAIN - 2);
	CHECK_EQ(cfg32(&t, 16), 0);                      /* geometry */
	CHECK_EQ(cfg32(&t, 20), 512);                    /* blk_size */
	virtio_mmio_read(&t.d.mmio, VIRTIO_MMIO_CONFIG + 34, b, 2);
	CHECK_EQ(le16_load(b), 4);                       /* num_queues */
	CHECK_EQ(cfg32(&t, 48), BLK_DWZ_MAX_SECTORS);    /* max_write_zeroes_sectors */
	CHECK_EQ(cfg32(&t, 52), 1);                      /* max_write_zeroes_seg */
	CHECK_EQ(cfg32(&t, 0x400), 0);                   /* past the end reads 0 */
	teardown(&t);
}

TEST(config_read_past_end_is_bounds_checked)
{
	struct t t;
	uint8_t b[8];

	setup(&t, "", 1);
	memset(b, 0xaa, sizeof(b));
	t.dev->ops->config_read(t.dev, UINT64_MAX - 2, b, 8);  /* wraps around */
	for (int i = 0; i < 8; i++)
		CHECK_EQ(b[i], 0);
	t.dev->ops->config_read(t.dev, 68, b, 8);               /* straddles the end */
	for (int i = 4; i < 8; i++)
		CHECK_EQ(b[i], 0);
	teardown(&t);
}

TEST(features_follow_options)
{
	struct t t;

	setup(&t, "", 1);
	CHECK(!(t.dev->host_features & VIRTIO_BIT(VIRTIO_BLK_F_RO)));
	CHECK(!(t.dev->host_features & VIRTIO_BIT(VIRTIO_BLK_F_MQ)));
	CHECK(!(t.dev->host_features & VIRTIO_BIT(VIRTIO_BLK_F_DISCARD)));
	CHECK(t.dev->host_features & VIRTIO_BIT(VIRTIO_BLK_F_WRITE_ZEROES));
	CHECK(t.dev->host_features & VIRTIO_BIT(VIRTIO_BLK_F_FLUSH));
	CHECK(t.dev->host_features & VIRTIO_BIT(VIRTIO_BLK_F_SEG_MAX));
	CHECK(t.dev->host_features & VIRTIO_BIT(VIRTIO_BLK_F_SIZE_MAX));
	CHECK(t.dev->host_features & VIRTIO_BIT(VIRTIO_BLK_F_BLK_SIZE));
	CHECK(t.dev->host_features & VIRTIO_BIT(VIRTIO_BLK_F_TOPOLOGY));
	teardown(&t);

	setup(&t, ",ro,queues=2", 1);
	CHECK(t.dev->host_features & VIRTIO_BIT(VIRTIO_BLK_F_RO));
	CHECK(t.dev->host_features & VIRTIO_BIT(VIRTIO_BLK_F_MQ));
	CHECK(!(t.dev->host_features & VIRTIO_BIT(VIRTIO_BLK_F_WRITE_ZEROES)));
	teardown(&t);

	setup(&t, ",discard=on", 1);
	CHECK(t.dev->host_features & VIRTIO_BIT(VIRTIO_BLK_F_DISCARD));  /* /tmp punches holes */
	teardown(&t);
}

/* --- data path --- */

TEST(read_write_roundtrip_qd1)
{
	struct t t;
	uint64_t buf;
	uint32_t used;
	uint8_t *p, chk[4096];

	setup(&t, "", 1);
	buf = vdrv_alloc(&t.d, 4096, 4096);
	p = vdrv_host(&t.d, buf);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 8, buf, 4096, true, &used), VIRTIO_BLK_S_OK);
	CHECK_EQ(used, 4097);
	CHECK(data_matches(p, 8 * 512, 4096));

	memset(p, 0x5a, 4096);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_OUT, 100, buf, 4096, false, &used), VIRTIO_BLK_S_OK);
	CHECK_EQ(pread(t.fd, chk, 4096, 100 * 512), 4096);
	for (int i = 0; i < 4096; i++)
		CHECK_EQ(chk[i], 0x5a);
	memset(p, 0, 4096);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 100, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(p[0], 0x5a);
	CHECK_EQ(p[4095], 0x5a);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, &used), VIRTIO_BLK_S_OK);
	teardown(&t);
}

/* 32 requests posted, one kick: data right, one interrupt, the whole drain
 * submitted with one io_uring_enter. */
static void qd32(const char *opts, bool page_cache)
{
	struct t t;
	struct blk_queue_stats a, b;
	uint64_t bufs[32], st[32];
	int heads[32];
	unsigned i, got = 0;

	setup(&t, opts, 1);
	/* Warm up (thread running and asleep in io_uring_enter). */
	bufs[0] = vdrv_alloc(&t.d, 4096, 4096);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, bufs[0], 4096, true, NULL), VIRTIO_BLK_S_OK);
	while (vdrv_irq(&t.d))
		;
	usleep(50000);
	/* Ask for an interrupt at the next used entry, as Linux's
	 * virtqueue_enable_cb does (EVENT_IDX). */
	vdrv_used_event_set(&t.d, 0, t.d.q[0].last_used);
	stats(&t, 0, &a);
	for (i = 0; i < 32; i++) {
		bufs[i] = vdrv_alloc(&t.d, 4096, 4096);
		heads[i] = post(&t, 0, VIRTIO_BLK_T_IN, (i * 37) % 2000, bufs[i], 4096, true, &st[i]);
		CHECK(heads[i] >= 0);
	}
	vdrv_kick(&t.d, 0);
	while (got < 32) {
		uint32_t id, len;
		wait_used(&t, 0, &id, &len);
		CHECK_EQ(len, 4097);
		got++;
	}
	usleep(50000);
	stats(&t, 0, &b);
	for (i = 0; i < 32; i++) {
		CHECK_EQ(st_of(&t, st[i]), VIRTIO_BLK_S_OK);
		CHECK(data_matches(vdrv_host(&t.d, bufs[i]), ((i * 37) % 2000) * 512ULL, 4096));
	}
	CHECK_EQ(b.requests - a.requests, 32);
	if (page_cache) {
		/* Page-cache reads complete inside the submitting enter. */
		CHECK_EQ(b.irqs - a.irqs, 1);
		CHECK_EQ(b.batches - a.batches, 1);
		/* wake-up from the previous sleep counts once, the submit of
		 * the drain (which also waits) once, going back to sleep once. */
		CHECK(b.enters - a.enters <= 3);
	} else {
		/* O_DIRECT completes from the disk over time: still at most
		 * one interrupt per batch and one enter per wake-up. */
		CHECK(b.irqs - a.irqs >= 1);
		CHECK(b.irqs - a.irqs <= b.batches - a.batches);
		CHECK(b.enters - a.enters <= b.batches - a.batches + 2);
	}
	CHECK_EQ(b.bytes_read - a.bytes_read, 32 * 4096);
	teardown(&t);
}

TEST(qd32_batch_one_enter_one_irq)
{
	qd32("", true);
}

TEST(qd32_batch_cache_none)
{
	qd32(",cache=none", false);
}

TEST(write_qd32_then_read_back)
{
	struct t t;
	uint64_t buf, st[32];
	unsigned i;
	uint32_t id, len;
	uint8_t chk[512];

	setup(&t, "", 1);
	for (i = 0; i < 32; i++) {
		buf = vdrv_alloc(&t.d, 512, 512);
		memset(vdrv_host(&t.d, buf), (int)i + 1, 512);
		CHECK(post(&t, 0, VIRTIO_BLK_T_OUT, 1000 + i, buf, 512, false, &st[i]) >= 0);
	}
	vdrv_kick(&t.d, 0);
	for (i = 0; i < 32; i++)
		wait_used(&t, 0, &id, &len);
	for (i = 0; i < 32; i++) {
		CHECK_EQ(st_of(&t, st[i]), VIRTIO_BLK_S_OK);
		CHECK_EQ(pread(t.fd, chk, 512, (1000 + i) * 512), 512);
		CHECK_EQ(chk[0], i + 1);
		CHECK_EQ(chk[511], i + 1);
	}
	teardown(&t);
}

/* No framing assumption (§2.6.4): header split over two descriptors, data
 * and status sharing one, indirect descriptors. */
TEST(any_descriptor_layout_is_accepted)
{
	struct t t;
	uint64_t h, db;
	uint32_t id, len;
	struct vdrv_sg sg[3];
	int head;

	setup(&t, "", 1);
	h = hdr(&t, VIRTIO_BLK_T_IN, 3);
	db = vdrv_alloc(&t.d, 1024 + 1, 512);
	*(uint8_t *)vdrv_host(&t.d, db + 1024) = 0xff;
	sg[0] = (struct vdrv_sg){ h, 8, false };
	sg[1] = (struct vdrv_sg){ h + 8, 8, false };
	sg[2] = (struct vdrv_sg){ db, 1025, true };
	head = vdrv_add(&t.d, 0, sg, 3, true);
	vdrv_kick(&t.d, 0);
	wait_used(&t, 0, &id, &len);
	CHECK_EQ(id, head);
	CHECK_EQ(len, 1025);
	CHECK_EQ(*(uint8_t *)vdrv_host(&t.d, db + 1024), VIRTIO_BLK_S_OK);
	CHECK(data_matches(vdrv_host(&t.d, db), 3 * 512, 1024));
	teardown(&t);
}

/* A request of more segments than a slot holds (BLK_SLOT_IOV) reads
 * every one of them: its segments live in the head's overflow array. */
TEST(many_segment_requests_read_and_write_every_segment)
{
	struct t t;
	struct vdrv_sg sg[12];
	uint64_t h, st, seg[10];
	uint32_t id, len;
	unsigned i;
	int head;

	setup(&t, "", 1);
	for (int round = 0; round < 2; round++) {
		bool write = round == 1;

		h = hdr(&t, write ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN, 40);
		st = status_buf(&t);
		sg[0] = (struct vdrv_sg){ h, 16, false };
		for (i = 0; i < 10; i++) {
			seg[i] = vdrv_alloc(&t.d, 512, 512);
			if (write)
				memset(vdrv_host(&t.d, seg[i]), 0xa0 + (int)i, 512);
			sg[1 + i] = (struct vdrv_sg){ seg[i], 512, !write };
		}
		sg[11] = (struct vdrv_sg){ st, 1, true };
		head = vdrv_add(&t.d, 0, sg, 12, round == 0);
		CHECK(head >= 0);
		vdrv_kick(&t.d, 0);
		wait_used(&t, 0, &id, &len);
		CHECK_EQ(id, head);
		CHECK_EQ(st_of(&t, st), VIRTIO_BLK_S_OK);
		CHECK_EQ(len, write ? 1 : 10 * 512 + 1);
		for (i = 0; i < 10 && !write; i++)
			CHECK(data_matches(vdrv_host(&t.d, seg[i]), (40 + i) * 512ULL, 512));
	}
	for (i = 0; i < 10; i++) {
		uint8_t chk[512];

		CHECK_EQ(pread(t.fd, chk, 512, (40 + i) * 512), 512);
		CHECK_EQ(chk[0], 0xa0 + i);
		CHECK_EQ(chk[511], 0xa0 + i);
	}
	teardown(&t);
}

/* A queue's request state grows with the requests in flight, not with
 * the guest's seg_max: 200 one-segment requests spread over every head
 * of a 128-entry ring leave at most 64 KiB of the queue's slot memory
 * resident (a slot that carried room for 126 segments took ~2 KiB, so
 * every head in use would have been 256 KiB). */
TEST(slot_memory_follows_queue_depth_not_seg_max)
{
	struct blk_dev *blk;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), resident = 0, i;
	unsigned char *vec;
	uint64_t bufs[40], st[40];
	uint32_t id, len;
	unsigned r, k;
	struct t t;

	setup(&t, "", 1);
	blk = (struct blk_dev *)t.dev;
	for (k = 0; k < 40; k++)
		bufs[k] = vdrv_alloc(&t.d, 4096, 4096);
	for (r = 0; r < 5; r++) {
		for (k = 0; k < 40; k++)
			CHECK(post(&t, 0, VIRTIO_BLK_T_IN, k * 8, bufs[k], 4096, true, &st[k]) >= 0);
		vdrv_kick(&t.d, 0);
		for (k = 0; k < 40; k++)
			wait_used(&t, 0, &id, &len);
		for (k = 0; k < 40; k++)
			CHECK_EQ(st_of(&t, st[k]), VIRTIO_BLK_S_OK);
	}
	vec = calloc(blk->slot_stride / page + 1, 1);
	CHECK(vec);
	CHECK_EQ(mincore(blk->slot_mem, blk->slot_stride, vec), 0);
	for (i = 0; i < blk->slot_stride / page; i++)
		resident += (vec[i] & 1) ? page : 0;
	free(vec);
	CHECK(resident > 0);
	CHECK(resident <= 64 * 1024);
	teardown(&t);
}

/* Threads of this process whose name starts with prefix; with filtered,
 * only those in a seccomp filter ("Seccomp: 2"). */
static unsigned count_threads_in(const char *prefix, bool filtered)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;

	CHECK(d != NULL);
	while ((e = readdir(d))) {
		char p[300], name[64] = "";
		FILE *f;
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f) && !strncmp(name, prefix, strlen(prefix))) {
			char line[128];
			bool in_filter = false;
			FILE *st;

			snprintf(p, sizeof(p), "/proc/self/task/%s/status", e->d_name);
			st = fopen(p, "r");
			while (st && fgets(line, sizeof(line), st))
				if (!strncmp(line, "Seccomp:", 8))
					in_filter = atoi(line + 8) == 2;
			if (st)
				fclose(st);
			n += !filtered || in_filter;
		}
		fclose(f);
	}
	closedir(d);
	return n;
}

static unsigned count_threads(const char *prefix)
{
	return count_threads_in(prefix, false);
}

/* Whether this process can install a seccomp filter (not under qemu-user). */
static bool seccomp_works(void)
{
	struct sandbox_fds fds = SANDBOX_NO_FDS;
	pid_t pid = fork();
	int st;

	CHECK(pid >= 0);
	if (pid == 0)
		_exit(sandbox_enter(SANDBOX_QUEUE, &fds) ? 1 : 0);
	CHECK(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* count_threads once it is n, or after 2 s. A thread that pthread_join
 * returned for has cleared its tid, but the kernel lists it under
 * /proc/self/task until it has finished exiting, a moment later. */
static unsigned count_threads_settled(const char *prefix, unsigned n)
{
	unsigned c, i;

	for (i = 0; (c = count_threads(prefix)) != n && i < 2000; i++)
		usleep(1000);
	return c;
}

/* The VM names its device's threads (dev->thread_prefix, "ID-dN" from
 * mvm_attach_disks): each I/O thread is PREFIX + "q" + its first queue,
 * and the device lists them (dev->vqws) with the ids their comm is under. */
TEST(io_threads_carry_the_vms_names_and_ids)
{
	const struct vqw *w;
	struct t t;
	unsigned n = 0;

	setup_prefix = "vm7-d2";
	setup(&t, ",queues=3,io-threads=2", 1);
	setup_prefix = "";
	CHECK_EQ(count_threads("vm7-d2q"), 2);
	CHECK_EQ(count_threads("mvm-blk-q"), 0);
	for (w = t.dev->vqws; w; w = w->dev_next, n++) {
		char path[64], comm[32] = "", want[16];
		FILE *f;

		snprintf(want, sizeof(want), "vm7-d2q%u", w->q[0].idx);
		CHECK_STR(w->thread_name, want);
		CHECK(w->hs.tid > 0);
		snprintf(path, sizeof(path), "/proc/self/task/%d/comm", w->hs.tid);
		f = fopen(path, "r");
		CHECK(f && fgets(comm, sizeof(comm), f));
		fclose(f);
		comm[strcspn(comm, "\n")] = '\0';
		CHECK_STR(comm, want);
	}
	CHECK_EQ(n, 2);
	teardown(&t);
}

TEST(multiple_queues_each_with_own_thread)
{
	struct t t;
	unsigned q;

	setup(&t, ",queues=4,io-threads=4", 1);
	CHECK_EQ(count_threads("mvm-blk-q"), 4);
	for (q = 0; q < 4; q++) {
		uint64_t buf = vdrv_alloc(&t.d, 512, 512);
		CHECK_EQ(run1(&t, q, VIRTIO_BLK_T_IN, q * 10, buf, 512, true, NULL),
			 VIRTIO_BLK_S_OK);
		CHECK(data_matches(vdrv_host(&t.d, buf), q * 10 * 512ULL, 512));
	}
	for (q = 0; q < 4; q++) {
		struct blk_queue_stats s;
		stats(&t, q, &s);
		CHECK_EQ(s.requests, 1);
	}
	teardown(&t);
	CHECK_EQ(count_threads_settled("mvm-blk-q", 0), 0);
}

/* The VM's stop ends the I/O threads before --stats reads the counters
 * and long before the device is freed: they stay readable, and count
 * what was done. */
TEST(counters_outlive_the_io_threads)
{
	struct blk_queue_stats s;
	uint64_t buf;
	struct t t;

	setup(&t, ",queues=2,io-threads=2", 1);
	buf = vdrv_alloc(&t.d, 512, 512);
	CHECK_EQ(run1(&t, 1, VIRTIO_BLK_T_IN, 0, buf, 512, true, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(run1(&t, 1, VIRTIO_BLK_T_OUT, 8, buf, 512, false, NULL), VIRTIO_BLK_S_OK);
	virtio_dev_stop(t.dev);
	virtio_dev_halt(t.dev);
	CHECK_EQ(count_threads_settled("mvm-blk-q", 0), 0);
	stats(&t, 1, &s);
	CHECK_EQ(s.requests, 2);
	CHECK_EQ(s.bytes_read, 512);
	CHECK_EQ(s.bytes_written, 512);
	CHECK_EQ(s.read_ops, 1);
	CHECK_EQ(s.write_ops, 1);
	CHECK(s.ring_valid);
	stats(&t, 0, &s);
	CHECK_EQ(s.requests, 0);
	teardown(&t);
}

/* The VM's sandbox reaches a disk after it was made (the transport's
 * attach): every I/O thread is in its filter before it serves anything,
 * and serves from there. */
TEST(io_threads_of_a_sandboxed_vm_serve_inside_their_filter)
{
	struct t t;
	unsigned q;

	if (!seccomp_works())
		CHECK_SKIP("seccomp filters cannot be installed here (qemu-user?)");
	setup_sandbox = true;
	setup(&t, ",queues=2,io-threads=2", 1);
	setup_sandbox = false;
	CHECK_EQ(count_threads_in("mvm-blk-q", true), 2);
	for (q = 0; q < 2; q++) {
		uint64_t buf = vdrv_alloc(&t.d, 512, 512);

		CHECK_EQ(run1(&t, q, VIRTIO_BLK_T_IN, q, buf, 512, true, NULL), VIRTIO_BLK_S_OK);
	}
	teardown(&t);
}

/* --io-threads: queue q is served by thread q % N; every queue works, its
 * counters stay its own, and a reset parks the shared threads, which serve
 * again after the next DRIVER_OK; they end with the device. */
TEST(io_threads_serve_several_queues_each)
{
	struct t t;
	unsigned q, round;

	setup(&t, ",queues=4,io-threads=2", 1);
	CHECK_EQ(count_threads("mvm-blk-q"), 2);
	for (round = 0; round < 2; round++) {
		for (q = 0; q < 4; q++) {
			uint64_t buf = vdrv_alloc(&t.d, 512, 512);
			CHECK_EQ(run1(&t, q, VIRTIO_BLK_T_IN, q * 10 + round, buf, 512, true, NULL),
				 VIRTIO_BLK_S_OK);
			CHECK(data_matches(vdrv_host(&t.d, buf), (q * 10 + round) * 512ULL, 512));
		}
		for (q = 0; q < 4; q++) {
			struct blk_queue_stats s;
			stats(&t, q, &s);
			CHECK_EQ(s.requests, round + 1);
		}
		if (!round) {
			vdrv_wr(&t.d, VIRTIO_MMIO_STATUS, 0);   /* reset: both threads park */
			CHECK_EQ(count_threads("mvm-blk-q"), 2);
			CHECK_EQ(vdrv_negotiate(&t.d, all_features()), 0);
			for (q = 0; q < 4; q++)
				CHECK_EQ(vdrv_queue_setup(&t.d, q, QSIZE), 1);
			vdrv_driver_ok(&t.d);
			CHECK_EQ(count_threads("mvm-blk-q"), 2);
		}
	}
	teardown(&t);
	CHECK_EQ(count_threads_settled("mvm-blk-q", 0), 0);
}

/* Whether every I/O thread of the device has parked (posted its ack),
 * waiting up to 2 s. */
static bool all_parked(struct t *t)
{
	struct blk_dev *blk = t->dev->priv;
	unsigned i, wi, parked = 0;
	int v;

	for (i = 0; i < 200 && parked < blk->nworkers; i++) {
		for (parked = wi = 0; wi < blk->nworkers; wi++)
			parked += sem_getvalue(&blk->workers[wi].w.parked, &v) == 0 && v > 0;
		if (parked < blk->nworkers)
			usleep(10000);
	}
	return parked == blk->nworkers;
}

/* At a reset or teardown the core first tells the device that every queue
 * is about to stop: each I/O thread then winds down and parks on its own,
 * side by side with the others, and the queue stops that follow only
 * wait. The threads serve again after the reset. */
TEST(stopping_tells_every_io_thread_before_any_queue_stops)
{
	struct t t;
	unsigned q;

	setup(&t, ",queues=4,io-threads=4", 1);
	CHECK_EQ(count_threads("mvm-blk-q"), 4);
	t.dev->ops->queues_stopping(t.dev);
	CHECK(all_parked(&t));          /* before any queue_stop waited */
	vdrv_wr(&t.d, VIRTIO_MMIO_STATUS, 0);
	CHECK_EQ(vdrv_negotiate(&t.d, all_features()), 0);
	for (q = 0; q < 4; q++)
		CHECK_EQ(vdrv_queue_setup(&t.d, q, QSIZE), 1);
	vdrv_driver_ok(&t.d);
	CHECK_EQ(count_threads("mvm-blk-q"), 4);
	for (q = 0; q < 4; q++) {
		uint64_t buf = vdrv_alloc(&t.d, 512, 512);
		CHECK_EQ(run1(&t, q, VIRTIO_BLK_T_IN, q, buf, 512, true, NULL), VIRTIO_BLK_S_OK);
	}
	teardown(&t);
	CHECK_EQ(count_threads_settled("mvm-blk-q", 0), 0);
}

/* The default: one thread per queue, but no more than the CPUs this
 * process may run on (threads sharing a CPU cost a switch per batch). */
TEST(io_threads_default_is_queues_capped_by_cpus)
{
	struct mvm_disk o = { .queues = 64 };
	cpu_set_t one;
	cpu_set_t all;

	CHECK_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
	CHECK_EQ(blk_io_threads(&o), (unsigned)CPU_COUNT(&all) < 64 ? (unsigned)CPU_COUNT(&all) : 64);
	o.queues = 1;
	CHECK_EQ(blk_io_threads(&o), 1);
	o.queues = 4;
	o.io_threads = 8;
	CHECK_EQ(blk_io_threads(&o), 4);     /* never more than queues */
	o.io_threads = 3;
	CHECK_EQ(blk_io_threads(&o), 3);
	o.io_threads = 0;
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
	CHECK_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
	CHECK_EQ(blk_io_threads(&o), 1);
	CHECK_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
}

TEST(get_id_returns_serial)
{
	struct t t;
	uint64_t buf;
	uint32_t used;

	setup(&t, ",serial=MVM-SERIAL-01", 1);
	buf = vdrv_alloc(&t.d, 20, 1);
	memset(vdrv_host(&t.d, buf), 0xee, 20);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_GET_ID, 0, buf, 20, true, &used), VIRTIO_BLK_S_OK);
	CHECK_EQ(used, 21);
	CHECK(!memcmp(vdrv_host(&t.d, buf), "MVM-SERIAL-01\0\0\0\0\0\0\0", 20));
	teardown(&t);
}

TEST(kick_before_driver_ok_is_drained_at_start)
{
	struct t t;
	uint64_t buf, st;
	uint32_t id, len;

	setup_ex(&t, "", 1, all_features(), false);
	buf = vdrv_alloc(&t.d, 512, 512);
	CHECK(post(&t, 0, VIRTIO_BLK_T_IN, 5, buf, 512, true, &st) >= 0);
	vdrv_kick(&t.d, 0);
	usleep(20000);
	CHECK_EQ(vdrv_used_idx(&t.d, 0), 0);     /* nothing before DRIVER_OK */
	vdrv_driver_ok(&t.d);
	wait_used(&t, 0, &id, &len);
	CHECK_EQ(st_of(&t, st), VIRTIO_BLK_S_OK);
	CHECK(data_matches(vdrv_host(&t.d, buf), 5 * 512, 512));
	teardown(&t);
}

TEST(write_zeroes_and_discard_zero_the_range)
{
	struct t t;
	uint64_t seg, buf;
	uint8_t *s, chk[4096];

	setup(&t, ",discard=on", 1);
	seg = vdrv_alloc(&t.d, 16, 16);
	s = vdrv_host(&t.d, seg);
	le64_store(s, 16);
	le32_store(s + 8, 8);
	le32_store(s + 12, 0);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_WRITE_ZEROES, 0, seg, 16, false, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(pread(t.fd, chk, 4096, 16 * 512), 4096);
	for (int i = 0; i < 4096; i++)
		CHECK_EQ(chk[i], 0);
	CHECK_EQ(pread(t.fd, chk, 1, 24 * 512), 1);
	CHECK_EQ(chk[0], pattern(24 * 512));        /* only the range */

	le64_store(s, 64);
	le32_store(s + 12, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_WRITE_ZEROES, 0, seg, 16, false, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(pread(t.fd, chk, 4096, 64 * 512), 4096);
	CHECK_EQ(chk[0], 0);
	CHECK_EQ(chk[4095], 0);

	le64_store(s, 128);
	le32_store(s + 12, 0);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_DISCARD, 0, seg, 16, false, NULL), VIRTIO_BLK_S_OK);
	buf = vdrv_alloc(&t.d, 4096, 4096);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 128, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(((uint8_t *)vdrv_host(&t.d, buf))[0], 0);
	CHECK_EQ(((uint8_t *)vdrv_host(&t.d, buf))[4095], 0);
	teardown(&t);
}

/* --- a guest that sleeps on interrupts (Linux's virtio_ring protocol) --- */

/* virtqueue_kick_prepare (split, EVENT_IDX): a full barrier, then a kick
 * only when avail.idx crossed the device's avail_event since `old`. */
static bool split_kick_prepare(struct t *t, unsigned q, uint16_t old)
{
	uint16_t new_idx = vdrv_avail_idx(&t->d, q), ev;

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	ev = vdrv_avail_event(&t->d, q);
	return (uint16_t)(new_idx - ev - 1) < (uint16_t)(new_idx - old);
}

/* virtqueue_enable_cb (EVENT_IDX): ask for an interrupt at the next used
 * entry, full barrier, true when one is already there. */
static bool irq_enable(struct t *t, unsigned q, bool packed)
{
	if (packed)
		return !vdrv_packed_enable_cb(&t->d, q);
	vdrv_used_event_set(&t->d, q, t->d.q[q].last_used);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return vdrv_used_idx(&t->d, q) == t->d.q[q].last_used;
}

/* A driver that keeps up to 16 reads and writes in flight, kicks only
 * where the device's event suppression asks for it, and, like virtio-blk's
 * virtblk_done, takes completions with interrupts off and then re-arms
 * them. It switches every 250 requests between streaming (one request
 * every 30-130 us, which gathering catches) and bursts of 1-4 with pauses
 * of 0-300 us where half the time it sleeps until an interrupt (which
 * turns gathering off again); whenever the queue is full it sleeps until
 * an interrupt. A
 * notification or an interrupt lost anywhere between them (gathering's
 * waits with notifications off, polling, the drain's re-check) leaves it
 * asleep: 3 s without an interrupt while requests are out fails. */
static void guest_sleeping_on_interrupts(const char *opts, bool packed)
{
	struct t t;
	uint64_t data[16], st[QSIZE];
	unsigned posted = 0, done = 0, out = 0, seed = 7, waits = 0;
	struct blk_queue_stats s;

	setup_ex(&t, opts, 1, all_features() | (packed ? VIRTIO_BIT(VIRTIO_F_RING_PACKED) : 0),
		 true);
	CHECK_EQ(t.dev->queues[0].vq.packed, packed);
	for (unsigned i = 0; i < 16; i++)
		data[i] = vdrv_alloc(&t.d, 4096, 4096);
	irq_enable(&t, 0, packed);
	while (done < 3000) {
		bool streaming = (posted / 250) % 2;
		unsigned burst = 1 + (seed = seed * 1103515245 + 12345) % 4, i;
		uint16_t old = vdrv_avail_idx(&t.d, 0);
		bool kick;
		uint32_t id, len;

		if (streaming)
			burst = 1;
		for (i = 0; i < burst && out < 16 && posted < 3000; i++, posted++, out++) {
			bool wr = posted % 2;
			uint64_t s;
			int h = post(&t, 0, wr ? VIRTIO_BLK_T_OUT : VIRTIO_BLK_T_IN,
				     (seed >> 8) % 2000, data[posted % 16], 4096, !wr, &s);

			CHECK(h >= 0 && h < QSIZE);
			st[h] = s;
		}
		kick = packed ? vdrv_packed_kick_prepare(&t.d, 0) : split_kick_prepare(&t, 0, old);
		if (kick)
			vdrv_kick(&t.d, 0);
		if (out == 16 || posted == 3000 || (!streaming && (seed >> 12) % 2)) {
			/* Sleep until the device interrupts (unless a used entry
			 * came before interrupts were re-armed). */
			if (out && irq_enable(&t, 0, packed)) {
				struct pollfd pfd = { .fd = t.d.mmio.irq_fd, .events = POLLIN };

				if (poll(&pfd, 1, 3000) != 1) {
					fprintf(stderr, "%u requests out, no interrupt in 3 s (posted %u, "
						"done %u)\n", out, posted, done);
					CHECK(!"a request or its interrupt was lost");
				}
				waits++;
			}
			vdrv_irq(&t.d);
		} else {
			usleep(streaming ? 30 + (seed >> 16) % 100 : (seed >> 16) % 300);
		}
		/* virtblk_done: interrupts off, take everything, re-arm and
		 * look again. */
		do {
			if (packed)
				vdrv_packed_disable_cb(&t.d, 0);
			while (vdrv_get_used(&t.d, 0, &id, &len) == 1) {
				CHECK(id < QSIZE);
				CHECK_EQ(st_of(&t, st[id]), VIRTIO_BLK_S_OK);
				done++;
				out--;
			}
		} while (!irq_enable(&t, 0, packed));
	}
	stats(&t, 0, &s);
	CHECK_EQ(s.requests, 3000);
	CHECK_EQ(s.errors, 0);
	CHECK(waits > 0);
	fprintf(stderr, "%u interrupt waits, %llu kicks, %llu interrupts, %llu gathers "
		"bringing %llu requests, %llu polled\n", waits, (unsigned long long)s.kicks,
		(unsigned long long)s.irqs, (unsigned long long)s.gathers,
		(unsigned long long)s.gathered, (unsigned long long)s.polled);
	teardown(&t);
}

TEST(guest_sleeping_on_interrupts_is_never_stranded_split)
{
	guest_sleeping_on_interrupts("", false);
}

TEST(guest_sleeping_on_interrupts_is_never_stranded_packed)
{
	guest_sleeping_on_interrupts("", true);
}

TEST(guest_sleeping_on_interrupts_is_never_stranded_gathering_split)
{
	guest_sleeping_on_interrupts(",gather=200", false);
}

TEST(guest_sleeping_on_interrupts_is_never_stranded_gathering_packed)
{
	guest_sleeping_on_interrupts(",gather=200", true);
}

/* The device's --stats members, as one JSON object (malloc'd). */
static char *dev_stats(struct t *t)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	struct json j;

	CHECK(f);
	json_init(&j, f);
	json_obj_begin(&j, NULL);
	t->dev->ops->stats_json(t->dev, &j);
	json_obj_end(&j);
	fclose(f);
	return out;
}

TEST(stats_json_has_per_queue_counters)
{
	struct t t;
	char *out;

	setup(&t, ",queues=2", 1);
	CHECK_EQ(run1(&t, 1, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, NULL), VIRTIO_BLK_S_OK);
	out = dev_stats(&t);
	CHECK(strstr(out, "\"kind\":\"virtio-blk\"") != NULL);
	CHECK(strstr(out, "\"queues\":[{\"requests\":0,") != NULL);
	CHECK(strstr(out, "},{\"requests\":1,") != NULL);
	CHECK(strstr(out, "\"io_uring_enter\":") != NULL);
	free(out);
	teardown(&t);
}

/* A stalled queue can be diagnosed after the fact: once its thread has
 * stopped, the statistics say where both sides of the ring stood. Here
 * the driver posts two requests without kicking (the device has asked for
 * kicks and does not poll), so they are still waiting when the queue
 * stops, and its interrupt request (used_event) is where it left it. */
TEST(stopped_queue_reports_where_its_ring_stands)
{
	struct t t;
	struct blk_queue_stats s;
	uint64_t st;
	char *out;
	int i;

	setup(&t, ",poll=0,gather=0", 1);
	stats(&t, 0, &s);
	CHECK(!s.ring_valid);                    /* running: nothing yet */
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, NULL), VIRTIO_BLK_S_OK);
	/* The thread re-arms kicks at avail index 1 before it sleeps. */
	for (i = 0; i < 5000 && vdrv_avail_event(&t.d, 0) != 1; i++)
		usleep(1000);
	CHECK_EQ(vdrv_avail_event(&t.d, 0), 1);
	usleep(100000);                          /* and is asleep */
	vdrv_used_event_set(&t.d, 0, 1);
	CHECK(post(&t, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, &st) >= 0);
	CHECK(post(&t, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, &st) >= 0);
	usleep(20000);
	vdrv_wr(&t.d, VIRTIO_MMIO_STATUS, 0);    /* reset: the queue stops */
	stats(&t, 0, &s);
	CHECK(s.ring_valid);
	CHECK(!s.ring.packed);
	CHECK_EQ(s.ring.last_avail, 1);
	CHECK_EQ(s.ring.used, 1);
	CHECK_EQ(s.ring.avail_pending, 2);       /* posted, never taken */
	CHECK_EQ(s.ring.in_flight, 0);
	CHECK_EQ(s.ring.driver_event, 1);        /* used_event */
	CHECK_EQ(s.ring.device_event, 1);        /* avail_event: kicks wanted */
	CHECK_EQ(s.ring.device_flags, 0);
	out = dev_stats(&t);
	CHECK(strstr(out, "\"ring\":{\"layout\":\"split\",\"last_avail\":1,\"used\":1,\"avail_pending\":2,"
			  "\"in_flight\":0,\"driver_event\":1,") != NULL);
	free(out);
	teardown(&t);
}

/* fixed-buffers=on: a read or write whose data is one segment of guest RAM
 * goes through the RAM the queue's ring registered (READ_FIXED /
 * WRITE_FIXED), with O_DIRECT as with the page cache; a request of several
 * segments goes the usual way. Data is right either way. */
static void fixed_buffers(const char *opts)
{
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	struct blk_queue_stats a, b;
	struct vdrv_sg sg[4];
	uint64_t buf, seg[2], st;
	uint32_t id, len;
	uint8_t *p, chk[4096];
	struct t t;
	int head;

	/* Root has CAP_IPC_LOCK; anyone else needs the limit above the RAM. */
	if (geteuid() && setrlimit(RLIMIT_MEMLOCK, &unlimited))
		CHECK_SKIP("RLIMIT_MEMLOCK cannot be raised to register the fake RAM\n");
	setup(&t, opts, 1);
	buf = vdrv_alloc(&t.d, 4096, 4096);
	p = vdrv_host(&t.d, buf);
	stats(&t, 0, &a);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 8, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	CHECK(data_matches(p, 8 * 512, 4096));
	memset(p, 0x3c, 4096);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_OUT, 200, buf, 4096, false, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(pread(t.fd, chk, 4096, 200 * 512), 4096);
	CHECK_EQ(chk[0], 0x3c);
	CHECK_EQ(chk[4095], 0x3c);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, NULL), VIRTIO_BLK_S_OK);
	stats(&t, 0, &b);
	CHECK_EQ(b.fixed - a.fixed, 2);          /* the read and the write, not the flush */

	/* Two segments: READV, data in both. */
	seg[0] = vdrv_alloc(&t.d, 4096, 4096);
	seg[1] = vdrv_alloc(&t.d, 4096, 4096);
	st = status_buf(&t);
	sg[0] = (struct vdrv_sg){ hdr(&t, VIRTIO_BLK_T_IN, 64), 16, false };
	sg[1] = (struct vdrv_sg){ seg[0], 4096, true };
	sg[2] = (struct vdrv_sg){ seg[1], 4096, true };
	sg[3] = (struct vdrv_sg){ st, 1, true };
	head = vdrv_add(&t.d, 0, sg, 4, false);
	CHECK(head >= 0);
	vdrv_kick(&t.d, 0);
	wait_used(&t, 0, &id, &len);
	CHECK_EQ(id, head);
	CHECK_EQ(st_of(&t, st), VIRTIO_BLK_S_OK);
	CHECK(data_matches(vdrv_host(&t.d, seg[0]), 64 * 512, 4096));
	CHECK(data_matches(vdrv_host(&t.d, seg[1]), 64 * 512 + 4096, 4096));
	stats(&t, 0, &a);
	CHECK_EQ(a.fixed, b.fixed);
	teardown(&t);
}

TEST(fixed_buffers_carry_one_segment_io_page_cache)
{
	fixed_buffers(",fixed-buffers=on");
}

TEST(fixed_buffers_carry_one_segment_io_o_direct)
{
	fixed_buffers(",fixed-buffers=on,cache=none");
}

TEST(fixed_buffers_are_off_by_default)
{
	struct blk_queue_stats s;
	uint64_t buf;
	struct t t;

	setup(&t, "", 1);
	buf = vdrv_alloc(&t.d, 4096, 4096);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 8, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	stats(&t, 0, &s);
	CHECK_EQ(s.requests, 1);
	CHECK_EQ(s.fixed, 0);
	teardown(&t);
}

/* The last warning, and the name of the thread that logged it. */
struct warning {
	char msg[512];
	char thread[16];
};

static void record_warning(void *opaque, int level, const char *msg)
{
	struct warning *w = opaque;

	if (level != LOG_WARNING)
		return;
	snprintf(w->msg, sizeof(w->msg), "%s", msg);
	pthread_getname_np(pthread_self(), w->thread, sizeof(w->thread));
}

/* Registering pins guest RAM, which counts against RLIMIT_MEMLOCK unless
 * the process has CAP_IPC_LOCK (mvm --uid drops it). A case that calls
 * this runs in a process of its own: drop the capability, and leave room
 * for a ring (accounted too), not for the test's 16 MiB of RAM. */
static void memlock_small(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct c[2];
	struct rlimit small = { 1 << 20, 1 << 20 };

	CHECK_EQ(syscall(SYS_capget, &h, c), 0);
	c[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	c[CAP_TO_INDEX(CAP_IPC_LOCK)].permitted &= ~CAP_TO_MASK(CAP_IPC_LOCK);
	CHECK_EQ(syscall(SYS_capset, &h, c), 0);
	CHECK_EQ(setrlimit(RLIMIT_MEMLOCK, &small), 0);
}

/* A started disk with fixed-buffers=on whose RAM does not fit
 * RLIMIT_MEMLOCK, logging to sink. */
static void setup_fixed_beyond_memlock(struct t *t, struct log_sink *sink)
{
	memlock_small();
	setup_log = sink;
	setup_ex(t, ",fixed-buffers=on", 1, all_features(), true);
	setup_log = NULL;
}

/* Where the RAM does not fit, the disk works without, and the host is
 * told why once. */
TEST(fixed_buffers_beyond_memlock_work_without_and_say_why)
{
	struct warning warning = { "", "" };
	struct log_sink sink = { .fn = record_warning, .opaque = &warning };
	struct blk_queue_stats s;
	uint64_t buf;
	struct t t;

	setup_fixed_beyond_memlock(&t, &sink);
	buf = vdrv_alloc(&t.d, 4096, 4096);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 8, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	CHECK(data_matches(vdrv_host(&t.d, buf), 8 * 512, 4096));
	stats(&t, 0, &s);
	CHECK_EQ(s.fixed, 0);
	CHECK(strstr(warning.msg, "fixed-buffers") != NULL);
	CHECK(strstr(warning.msg, "RLIMIT_MEMLOCK") != NULL);
	CHECK(strstr(warning.msg, t.path) != NULL);
	t.dev->log = NULL;
	teardown(&t);
}

/* Registering populates and pins all of guest RAM: the queue's own
 * thread does it as it starts, before its filter and while the guest
 * boots, not a vCPU (it would stall the guest). The thread that tried is
 * the one that says it could not. */
TEST(fixed_buffers_are_registered_by_the_queue_thread)
{
	struct warning warning = { "", "" };
	struct log_sink sink = { .fn = record_warning, .opaque = &warning };
	uint64_t buf;
	struct t t;

	setup_fixed_beyond_memlock(&t, &sink);
	buf = vdrv_alloc(&t.d, 4096, 4096);
	/* The request completes after the attempt: the warning is written. */
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 8, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	CHECK(strstr(warning.msg, "fixed-buffers") != NULL);
	CHECK_STR(warning.thread, "mvm-blk-q0");
	t.dev->log = NULL;
	teardown(&t);
}

/* --- bad input from the guest --- */

/* Host-I/O observer and fault injector (the device's test-only hook). */
static struct {
	int calls;
	int fail_res;             /* != 0: replace the first `fail_n` results */
	int fail_n;
	uint32_t only_type;       /* UINT32_MAX: any */
	int short_by;             /* > 0: report this many bytes fewer, once */
	uint8_t *rewrite_hdr;     /* guest header to scribble over at completion */
	unsigned delay_us;
} inj;

static int inject(void *arg, unsigned q, const struct blk_slot *s, int res)
{
	uint32_t type = s->req.type;

	(void)arg; (void)q;
	inj.calls++;
	if (inj.delay_us)
		usleep(inj.delay_us);
	if (inj.rewrite_hdr) {
		/* The guest changes type and sector after submission. */
		le32_store(inj.rewrite_hdr, VIRTIO_BLK_T_OUT);
		le64_store(inj.rewrite_hdr + 8, 1500);
		inj.rewrite_hdr = NULL;
	}
	if (inj.only_type != UINT32_MAX && type != inj.only_type)
		return res;
	if (inj.short_by > 0 && res > inj.short_by) {
		res -= inj.short_by;
		inj.short_by = 0;
		return res;
	}
	if (inj.fail_n > 0) {
		inj.fail_n--;
		return inj.fail_res;
	}
	return res;
}

static void inject_prep(const struct blk_slot *s, int file, struct io_uring_sqe *sqe)
{
	blk_file_backend.prep(s, file, sqe);
}

/* The file backend with inject() on its completions. */
static const struct blk_backend_ops inject_backend = {
	.name = "inject",
	.prep = inject_prep,
	.complete = inject,
	.sqe_ops = BLK_FILE_SQE_OPS,
};

/* A setup whose device has the hook from its creation. */
static void setup_inj_ex(struct t *t, const char *opts, uint64_t features)
{
	memset(&inj, 0, sizeof(inj));
	inj.only_type = UINT32_MAX;
	setup_backend(t, opts, 1, features, true, &inject_backend);
}

static void setup_inj(struct t *t, const char *opts)
{
	setup_inj_ex(t, opts, all_features());
}

/* Post a raw chain, kick, wait: returns the used length. */
static uint32_t run_sg(struct t *t, const struct vdrv_sg *sg, unsigned n)
{
	uint32_t id, len;
	int head = vdrv_add(&t->d, 0, sg, n, false);

	CHECK(head >= 0);
	vdrv_kick(&t->d, 0);
	wait_used(t, 0, &id, &len);
	CHECK_EQ(id, head);
	return len;
}

/* Chains without a usable status byte come back with used len 0 and their
 * slot is free again: more of them than the queue has entries still work. */
TEST(missing_or_readonly_status_returns_len_0_without_leak)
{
	struct t t;
	unsigned i;

	setup_inj(&t, "");
	for (i = 0; i < QSIZE + 10; i++) {
		uint64_t h = hdr(&t, VIRTIO_BLK_T_IN, 0), st = status_buf(&t);
		struct vdrv_sg only_hdr[1] = { { h, 16, false } };
		struct vdrv_sg ro_status[2] = { { h, 16, false }, { st, 1, false } };

		CHECK_EQ(run_sg(&t, i & 1 ? only_hdr : ro_status, i & 1 ? 1 : 2), 0);
		CHECK_EQ(st_of(&t, st), 0xff);
	}
	CHECK_EQ(inj.calls, 0);
	CHECK(!(vdrv_status(&t.d) & VIRTIO_CONFIG_S_NEEDS_RESET));
	/* The queue still works. */
	uint64_t buf = vdrv_alloc(&t.d, 512, 512);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 512, true, NULL), VIRTIO_BLK_S_OK);
	teardown(&t);
}

/* A zero-length status descriptor (or any zero-length buffer) leaves no
 * status byte to write: the chain comes back with used len 0, no host I/O,
 * and its slot is free again — more of them than the queue has entries
 * still work, and the device does not need a reset. */
TEST(zero_length_status_descriptor_returns_len_0_without_leak)
{
	struct t t;
	unsigned i;

	setup_inj(&t, "");
	for (i = 0; i < QSIZE + 10; i++) {
		uint64_t h = hdr(&t, VIRTIO_BLK_T_IN, 0), st = status_buf(&t);
		uint64_t data = vdrv_alloc(&t.d, 512, 512);
		struct vdrv_sg empty_status[2] = { { h, 16, false }, { st, 0, true } };
		struct vdrv_sg empty_data[3] = { { h, 16, false }, { data, 0, true },
						 { st, 1, true } };

		CHECK_EQ(run_sg(&t, i & 1 ? empty_data : empty_status, i & 1 ? 3 : 2), 0);
		CHECK_EQ(st_of(&t, st), 0xff);
	}
	CHECK_EQ(inj.calls, 0);
	CHECK(!(vdrv_status(&t.d) & VIRTIO_CONFIG_S_NEEDS_RESET));
	uint64_t buf = vdrv_alloc(&t.d, 512, 512);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 512, true, NULL), VIRTIO_BLK_S_OK);
	teardown(&t);
}

/* A broken split ring is no request at all: the queue thread sets
 * NEEDS_RESET, raises a config interrupt, issues no host I/O and publishes
 * no used element (the guest must reset the device). */
static void check_broken_ring_needs_reset(struct t *t)
{
	vdrv_kick(&t->d, 0);
	for (int i = 0; i < 5000 && !(vdrv_status(&t->d) & VIRTIO_CONFIG_S_NEEDS_RESET); i++)
		usleep(1000);
	CHECK(vdrv_status(&t->d) & VIRTIO_CONFIG_S_NEEDS_RESET);
	CHECK(vdrv_rd(&t->d, VIRTIO_MMIO_INTERRUPT_STATUS) & VIRTIO_MMIO_INT_CONFIG);
	CHECK_EQ(vdrv_used_idx(&t->d, 0), 0);
	CHECK_EQ(inj.calls, 0);
	teardown(t);
}

TEST(descriptor_loop_needs_reset_with_config_interrupt)
{
	struct t t;

	setup_inj(&t, "");
	vdrv_desc_set(&t.d, 0, 0, hdr(&t, VIRTIO_BLK_T_IN, 0), 16, VRING_DESC_F_NEXT, 1);
	/* Both readable, so the loop (not the readable-after-writable rule) is what
	 * the ring walk trips over. */
	vdrv_desc_set(&t.d, 0, 1, status_buf(&t), 1, VRING_DESC_F_NEXT, 0);
	vdrv_avail_add_head(&t.d, 0, 0);
	check_broken_ring_needs_reset(&t);
}

TEST(avail_idx_jump_beyond_queue_size_needs_reset_with_config_interrupt)
{
	struct t t;

	setup_inj(&t, "");
	vdrv_desc_set(&t.d, 0, 0, hdr(&t, VIRTIO_BLK_T_FLUSH, 0), 16, VRING_DESC_F_NEXT, 1);
	vdrv_desc_set(&t.d, 0, 1, status_buf(&t), 1, VRING_DESC_F_WRITE, 0);
	vdrv_avail_idx_set(&t.d, 0, QSIZE + 1);
	check_broken_ring_needs_reset(&t);
}

TEST(avail_head_out_of_range_needs_reset_with_config_interrupt)
{
	struct t t;

	setup_inj(&t, "");
	vdrv_avail_add_head(&t.d, 0, QSIZE);
	check_broken_ring_needs_reset(&t);
}

/* The status buffer runs past the end of guest RAM by one byte. */
TEST(buffer_crossing_end_of_ram_needs_reset_with_config_interrupt)
{
	struct t t;
	uint64_t ram_end;

	setup_inj(&t, "");
	ram_end = t.d.ram_gpa + t.d.ram_size;
	vdrv_desc_set(&t.d, 0, 0, hdr(&t, VIRTIO_BLK_T_FLUSH, 0), 16, VRING_DESC_F_NEXT, 1);
	vdrv_desc_set(&t.d, 0, 1, ram_end - 1, 2, VRING_DESC_F_WRITE, 0);
	vdrv_avail_add_head(&t.d, 0, 0);
	check_broken_ring_needs_reset(&t);
}

TEST(header_shorter_than_16_bytes_is_ioerr)
{
	struct t t;
	uint64_t h, st, buf;
	struct vdrv_sg sg[3];

	setup_inj(&t, "");
	h = hdr(&t, VIRTIO_BLK_T_IN, 0);
	st = status_buf(&t);
	buf = vdrv_alloc(&t.d, 512, 512);
	sg[0] = (struct vdrv_sg){ h, 12, false };
	sg[1] = (struct vdrv_sg){ buf, 512, true };
	sg[2] = (struct vdrv_sg){ st, 1, true };
	CHECK_EQ(run_sg(&t, sg, 3), 1);
	CHECK_EQ(st_of(&t, st), VIRTIO_BLK_S_IOERR);
	CHECK_EQ(inj.calls, 0);
	teardown(&t);
}

/* The device works from its copy of the header: rewriting it while the
 * read is in flight (and forcing a resubmission by a short completion)
 * changes neither the type nor the offset. */
TEST(header_rewritten_after_submission_is_ignored)
{
	struct t t;
	uint64_t h, st, buf;
	struct vdrv_sg sg[3];
	uint8_t chk[1];

	setup_inj(&t, "");
	h = hdr(&t, VIRTIO_BLK_T_IN, 40);
	st = status_buf(&t);
	buf = vdrv_alloc(&t.d, 4096, 4096);
	sg[0] = (struct vdrv_sg){ h, 16, false };
	sg[1] = (struct vdrv_sg){ buf, 4096, true };
	sg[2] = (struct vdrv_sg){ st, 1, true };
	inj.rewrite_hdr = vdrv_host(&t.d, h);
	inj.short_by = 1536;
	CHECK_EQ(run_sg(&t, sg, 3), 4097);
	CHECK_EQ(st_of(&t, st), VIRTIO_BLK_S_OK);
	CHECK_EQ(inj.calls, 2);                     /* short, then the remainder */
	CHECK(data_matches(vdrv_host(&t.d, buf), 40 * 512, 4096));
	CHECK_EQ(pread(t.fd, chk, 1, 1500 * 512), 1);
	CHECK_EQ(chk[0], pattern(1500 * 512));      /* nothing written */
	teardown(&t);
}

TEST(out_of_range_and_misaligned_requests_are_ioerr_without_io)
{
	struct t t;
	uint64_t buf;
	uint64_t cap = IMG_SIZE / 512;
	struct blk_queue_stats s;

	setup_inj(&t, "");
	buf = vdrv_alloc(&t.d, 8192, 4096);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, cap, buf, 512, true, NULL), VIRTIO_BLK_S_IOERR);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, cap - 1, buf, 1024, true, NULL), VIRTIO_BLK_S_IOERR);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_OUT, cap - 1, buf, 1024, false, NULL), VIRTIO_BLK_S_IOERR);
	/* sector + len wraps around 2^64 */
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, UINT64_MAX - 1, buf, 1024, true, NULL),
		 VIRTIO_BLK_S_IOERR);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, UINT64_MAX / 512 + 1, buf, 512, true, NULL),
		 VIRTIO_BLK_S_IOERR);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 100, true, NULL), VIRTIO_BLK_S_IOERR);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_OUT, 0, buf, 513, false, NULL), VIRTIO_BLK_S_IOERR);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, 0, 0, true, NULL), VIRTIO_BLK_S_IOERR);
	CHECK_EQ(inj.calls, 0);
	stats(&t, 0, &s);
	CHECK_EQ(s.bytes_read, 0);
	CHECK_EQ(s.bytes_written, 0);
	CHECK_EQ(s.read_ops + s.write_ops, 0);    /* failed requests are errors */
	CHECK_EQ(s.errors, 8);
	/* The last sector itself is fine. */
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, cap - 1, buf, 512, true, NULL), VIRTIO_BLK_S_OK);
	teardown(&t);
}

TEST(unknown_type_is_unsupp)
{
	struct t t;
	uint64_t buf;

	setup_inj(&t, "");
	buf = vdrv_alloc(&t.d, 512, 512);
	CHECK_EQ(run1(&t, 0, 2, 0, buf, 512, true, NULL), VIRTIO_BLK_S_UNSUPP);
	CHECK_EQ(run1(&t, 0, 0xdeadbeef, 0, 0, 0, false, NULL), VIRTIO_BLK_S_UNSUPP);
	CHECK_EQ(run1(&t, 0, 14 /* SECURE_ERASE, not offered */, 0, buf, 16, false, NULL),
		 VIRTIO_BLK_S_UNSUPP);
	CHECK_EQ(inj.calls, 0);
	teardown(&t);
}

TEST(get_id_buffer_under_20_bytes_is_ioerr)
{
	struct t t;
	uint64_t buf;

	setup_inj(&t, ",serial=abc");
	buf = vdrv_alloc(&t.d, 19, 1);
	memset(vdrv_host(&t.d, buf), 0xee, 19);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_GET_ID, 0, buf, 19, true, NULL), VIRTIO_BLK_S_IOERR);
	CHECK_EQ(((uint8_t *)vdrv_host(&t.d, buf))[0], 0xee);   /* untouched */
	teardown(&t);
}

static uint64_t dwz_segs(struct t *t, unsigned n, uint64_t sector, uint32_t nsec, uint32_t flags)
{
	uint64_t g = vdrv_alloc(&t->d, 16ULL * n, 16);

	for (unsigned i = 0; i < n; i++) {
		uint8_t *s = vdrv_host(&t->d, g + 16ULL * i);
		le64_store(s, sector + 8ULL * i);
		le32_store(s + 8, nsec);
		le32_store(s + 12, flags);
	}
	return g;
}

TEST(discard_write_zeroes_bad_segments)
{
	struct t t;

	setup_inj(&t, ",discard=on");
	/* unmap flag on a discard, unknown flags: UNSUPP (§5.2.6.2) */
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_DISCARD, 0, dwz_segs(&t, 1, 0, 8, 1), 16, false, NULL),
		 VIRTIO_BLK_S_UNSUPP);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_WRITE_ZEROES, 0, dwz_segs(&t, 1, 0, 8, 2), 16, false,
		      NULL), VIRTIO_BLK_S_UNSUPP);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_DISCARD, 0, dwz_segs(&t, 1, 0, 8, 0x80000000u), 16,
		      false, NULL), VIRTIO_BLK_S_UNSUPP);
	/* more segments than max_*_seg, a partial segment, none: IOERR */
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_DISCARD, 0, dwz_segs(&t, 2, 0, 8, 0), 32, false, NULL),
		 VIRTIO_BLK_S_IOERR);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_WRITE_ZEROES, 0, dwz_segs(&t, 1, 0, 8, 0), 12, false,
		      NULL), VIRTIO_BLK_S_IOERR);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_DISCARD, 0, 0, 0, false, NULL), VIRTIO_BLK_S_IOERR);
	/* range beyond the capacity, or wrapping */
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_DISCARD, 0,
		      dwz_segs(&t, 1, IMG_SIZE / 512 - 4, 8, 0), 16, false, NULL),
		 VIRTIO_BLK_S_IOERR);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_WRITE_ZEROES, 0,
		      dwz_segs(&t, 1, UINT64_MAX - 2, 8, 0), 16, false, NULL),
		 VIRTIO_BLK_S_IOERR);
	CHECK_EQ(inj.calls, 0);
	teardown(&t);
}

TEST(discard_write_zeroes_not_negotiated_are_unsupp)
{
	struct t t;
	uint64_t f = all_features() & ~(VIRTIO_BIT(VIRTIO_BLK_F_DISCARD) |
					 VIRTIO_BIT(VIRTIO_BLK_F_WRITE_ZEROES));

	setup_inj_ex(&t, ",discard=on", f);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_DISCARD, 0, dwz_segs(&t, 1, 0, 8, 0), 16, false, NULL),
		 VIRTIO_BLK_S_UNSUPP);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_WRITE_ZEROES, 0, dwz_segs(&t, 1, 0, 8, 0), 16, false,
		      NULL), VIRTIO_BLK_S_UNSUPP);
	CHECK_EQ(inj.calls, 0);
	teardown(&t);
}

/* Even a driver that ignores VIRTIO_BLK_F_RO cannot change a ro disk. */
TEST(writes_to_read_only_disk_are_ioerr_and_write_nothing)
{
	struct t t;
	uint64_t buf;
	uint8_t chk[4096];
	struct blk_queue_stats s;

	setup_inj_ex(&t, ",ro", all_features() & ~VIRTIO_BIT(VIRTIO_BLK_F_RO));
	buf = vdrv_alloc(&t.d, 4096, 4096);
	memset(vdrv_host(&t.d, buf), 0x11, 4096);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_OUT, 0, buf, 4096, false, NULL), VIRTIO_BLK_S_IOERR);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_DISCARD, 0, dwz_segs(&t, 1, 0, 8, 0), 16, false, NULL),
		 VIRTIO_BLK_S_IOERR);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_WRITE_ZEROES, 0, dwz_segs(&t, 1, 0, 8, 0), 16, false,
		      NULL), VIRTIO_BLK_S_IOERR);
	CHECK_EQ(inj.calls, 0);
	CHECK_EQ(pread(t.fd, chk, 4096, 0), 4096);
	CHECK(data_matches(chk, 0, 4096));
	stats(&t, 0, &s);
	CHECK_EQ(s.bytes_written, 0);
	/* Reads still work. */
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	teardown(&t);
}

TEST(data_buffer_with_wrong_direction_is_ioerr)
{
	struct t t;
	uint64_t buf;
	uint8_t chk[512];

	setup_inj(&t, "");
	buf = vdrv_alloc(&t.d, 512, 512);
	memset(vdrv_host(&t.d, buf), 0x22, 512);
	/* read whose data buffer is device-readable */
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 512, false, NULL), VIRTIO_BLK_S_IOERR);
	CHECK_EQ(((uint8_t *)vdrv_host(&t.d, buf))[0], 0x22);
	/* write whose data buffer is device-writable */
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_OUT, 0, buf, 512, true, NULL), VIRTIO_BLK_S_IOERR);
	CHECK_EQ(pread(t.fd, chk, 512, 0), 512);
	CHECK(data_matches(chk, 0, 512));
	CHECK_EQ(inj.calls, 0);
	teardown(&t);
}

/* --- host errors (injected into the completion path) --- */

TEST(host_eio_and_enospc_are_ioerr)
{
	struct t t;
	uint64_t buf;
	struct blk_queue_stats s;

	setup_inj(&t, "");
	buf = vdrv_alloc(&t.d, 4096, 4096);
	inj.fail_res = -EIO;
	inj.fail_n = 1;
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL), VIRTIO_BLK_S_IOERR);
	inj.fail_res = -ENOSPC;
	inj.fail_n = 1;
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_OUT, 0, buf, 4096, false, NULL), VIRTIO_BLK_S_IOERR);
	stats(&t, 0, &s);
	CHECK_EQ(s.errors, 2);
	CHECK_EQ(s.bytes_read + s.bytes_written, 0);
	teardown(&t);
}

TEST(short_completion_without_progress_is_ioerr)
{
	struct t t;
	uint64_t buf;

	setup_inj(&t, "");
	buf = vdrv_alloc(&t.d, 4096, 4096);
	inj.fail_res = 0;               /* EOF: 0 bytes */
	inj.fail_n = 1;
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL), VIRTIO_BLK_S_IOERR);
	inj.fail_res = 8192;            /* more than asked: never OK */
	inj.fail_n = 1;
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL), VIRTIO_BLK_S_IOERR);
	teardown(&t);
}

TEST(short_and_eagain_completions_are_resubmitted)
{
	struct t t;
	uint64_t buf;
	uint8_t chk[4096];

	setup_inj(&t, "");
	buf = vdrv_alloc(&t.d, 4096, 4096);
	inj.short_by = 4000;
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 2, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(inj.calls, 2);
	CHECK(data_matches(vdrv_host(&t.d, buf), 2 * 512, 4096));

	inj.calls = 0;
	inj.fail_res = -EAGAIN;
	inj.fail_n = 3;
	memset(vdrv_host(&t.d, buf), 0x33, 4096);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_OUT, 20, buf, 4096, false, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(inj.calls, 4);
	CHECK_EQ(pread(t.fd, chk, 4096, 20 * 512), 4096);
	CHECK_EQ(chk[0], 0x33);
	CHECK_EQ(chk[4095], 0x33);
	teardown(&t);
}

TEST(failed_fsync_makes_later_flushes_fail)
{
	struct t t;

	setup_inj(&t, "");
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, NULL), VIRTIO_BLK_S_OK);
	inj.fail_res = -EIO;
	inj.fail_n = 1;
	inj.only_type = VIRTIO_BLK_T_FLUSH;
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, NULL), VIRTIO_BLK_S_IOERR);
	CHECK_EQ(inj.fail_n, 0);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, NULL), VIRTIO_BLK_S_IOERR);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, NULL), VIRTIO_BLK_S_IOERR);
	teardown(&t);
}

/* A host that keeps refusing for now (-EAGAIN) is asked again a bounded
 * number of times, after growing waits (no thread spinning at 100%), and
 * then the request fails; a refusal that passes, or a signal's -EINTR, is
 * retried to success. */
TEST(transient_refusals_are_retried_a_bounded_number_of_times_then_fail)
{
	struct blk_queue_stats s;
	struct timespec a, b;
	struct t t;
	uint64_t buf;
	int res[] = { -EAGAIN, -EINTR, -ENOMEM, -EBUSY };
	unsigned i;

	setup_inj(&t, "");
	buf = vdrv_alloc(&t.d, 4096, 4096);
	inj.fail_res = -EAGAIN;
	inj.fail_n = 1000;
	clock_gettime(CLOCK_MONOTONIC, &a);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL), VIRTIO_BLK_S_IOERR);
	clock_gettime(CLOCK_MONOTONIC, &b);
	CHECK_EQ(inj.calls, 1 + BLK_RETRY_MAX);
	stats(&t, 0, &s);
	CHECK_EQ(s.retries, BLK_RETRY_MAX);
	/* The waits: VQW_RETRY_FIRST_NS doubling, BLK_RETRY_MAX of them. */
	CHECK((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec) >=
	      (long long)VQW_RETRY_FIRST_NS * ((1 << BLK_RETRY_MAX) - 1));
	for (i = 0; i < ARRAY_SIZE(res); i++) {
		inj.calls = 0;
		inj.fail_res = res[i];
		inj.fail_n = 2;
		CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 8, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
		CHECK_EQ(inj.calls, 3);
		CHECK(data_matches(vdrv_host(&t.d, buf), 8 * 512, 4096));
	}
	teardown(&t);
}

/* A FLUSH the host refused for now is retried and succeeds, and later
 * ones are not poisoned; only a real failure (EIO) sticks. */
TEST(transient_flush_failures_are_retried_before_they_stick)
{
	struct t t;

	setup_inj(&t, "");
	inj.only_type = VIRTIO_BLK_T_FLUSH;
	inj.fail_res = -EINTR;
	inj.fail_n = 3;
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, NULL), VIRTIO_BLK_S_OK);
	inj.fail_res = -EAGAIN;
	inj.fail_n = 1000;              /* keeps refusing: the data's fate is unknown */
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, NULL), VIRTIO_BLK_S_IOERR);
	inj.fail_n = 0;
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_FLUSH, 0, 0, 0, false, NULL), VIRTIO_BLK_S_IOERR);
	teardown(&t);
}

/* size_max is enforced, not only advertised: a data segment over it
 * fails before any host I/O, as does a write-zeroes over
 * max_write_zeroes_sectors. */
TEST(segments_over_size_max_and_oversized_write_zeroes_are_ioerr)
{
	struct vdrv_sg sg[3];
	uint64_t st, buf;
	uint32_t id, len;
	struct t t;
	int head;

	setup_inj(&t, "");
	buf = vdrv_alloc(&t.d, BLK_SIZE_MAX + 4096, 4096);
	st = status_buf(&t);
	sg[0] = (struct vdrv_sg){ hdr(&t, VIRTIO_BLK_T_IN, 0), 16, false };
	sg[1] = (struct vdrv_sg){ buf, BLK_SIZE_MAX + 512, true };
	sg[2] = (struct vdrv_sg){ st, 1, true };
	head = vdrv_add(&t.d, 0, sg, 3, false);
	CHECK(head >= 0);
	vdrv_kick(&t.d, 0);
	wait_used(&t, 0, &id, &len);
	CHECK_EQ(id, head);
	CHECK_EQ(st_of(&t, st), VIRTIO_BLK_S_IOERR);
	/* Exactly size_max is fine (the image is 1 MiB: read all of it). */
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, BLK_SIZE_MAX, true, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(inj.calls, 1);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_WRITE_ZEROES, 0,
		      dwz_segs(&t, 1, 0, BLK_DWZ_MAX_SECTORS + 1, 0), 16, false, NULL),
		 VIRTIO_BLK_S_IOERR);
	CHECK_EQ(inj.calls, 1);
	teardown(&t);
}

/* A queue's host work in flight is bounded: with more write-zeroes range
 * posted at once than BLK_QUEUE_BUDGET, those that do not fit wait for
 * the others (counted in budget_waits; the queue is held from the first,
 * so the second stays in the ring), and all complete. */
TEST(host_work_in_flight_per_queue_is_bounded)
{
	unsigned n = (unsigned)(BLK_QUEUE_BUDGET / (BLK_DWZ_MAX_SECTORS * 512ULL)) + 2, i;
	uint64_t st[8];
	uint32_t id, len;
	struct blk_queue_stats s;
	struct t t;

	CHECK(n <= ARRAY_SIZE(st));
	setup_image_size = (uint64_t)n * BLK_DWZ_MAX_SECTORS * 512;
	setup(&t, "", 1);
	setup_image_size = 0;
	for (i = 0; i < n; i++)
		CHECK(post(&t, 0, VIRTIO_BLK_T_WRITE_ZEROES, 0,
			   dwz_segs(&t, 1, (uint64_t)i * BLK_DWZ_MAX_SECTORS, BLK_DWZ_MAX_SECTORS, 0),
			   16, false, &st[i]) >= 0);
	vdrv_kick(&t.d, 0);
	for (i = 0; i < n; i++)
		wait_used(&t, 0, &id, &len);
	for (i = 0; i < n; i++)
		CHECK_EQ(st_of(&t, st[i]), VIRTIO_BLK_S_OK);
	stats(&t, 0, &s);
	CHECK(s.budget_waits >= 1 && s.budget_waits <= 2);
	teardown(&t);
}

/* Reset while a request is in flight: it waits for the I/O and nothing is
 * written to guest memory (used ring, status byte) after it returned. */
TEST(reset_with_io_in_flight_writes_nothing_after)
{
	struct t t;
	uint64_t buf, st;
	uint16_t used_before;

	setup_inj(&t, "");
	buf = vdrv_alloc(&t.d, 4096, 4096);
	inj.delay_us = 200000;
	CHECK(post(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, &st) >= 0);
	vdrv_kick(&t.d, 0);
	while (__atomic_load_n(&inj.calls, __ATOMIC_ACQUIRE) == 0)
		usleep(1000);
	vdrv_wr(&t.d, VIRTIO_MMIO_STATUS, 0);       /* reset: the queue thread parks */
	CHECK_EQ(vdrv_status(&t.d), 0);
	used_before = vdrv_used_idx(&t.d, 0);
	uint8_t s_before = st_of(&t, st);
	usleep(300000);
	CHECK_EQ(vdrv_used_idx(&t.d, 0), used_before);
	CHECK_EQ(st_of(&t, st), s_before);
	CHECK_EQ(count_threads("mvm-blk-q"), 1);     /* parked, not gone */
	teardown(&t);
}

/* --- I/O rate limits --- */

static double secs_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* ops_size=1 every 20 ms: 50 requests a second. Six requests one after
 * another take at least five refills (the first finds the bucket full),
 * and the five that waited are counted with their time. Only a lower
 * bound on time: a slow host may take longer, never less. */
TEST(a_rate_limited_disk_paces_requests_and_counts_the_wait)
{
	struct blk_queue_stats s;
	struct timespec t0;
	uint64_t buf;
	struct t t;
	int i;

	setup(&t, ",ops_size=1,ops_refill_time=20", 1);
	buf = vdrv_alloc(&t.d, 4096, 4096);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < 6; i++)
		CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, (uint64_t)i * 8, buf, 4096, true, NULL),
			 VIRTIO_BLK_S_OK);
	CHECK(secs_since(&t0) >= 0.099);
	stats(&t, 0, &s);
	CHECK_EQ(s.rate_delayed, 5);
	/* Each waited most of a refill (the request came right after the
	 * last went): well over half of 5 x 20 ms in all. */
	CHECK(s.rate_wait_us >= 50000);
	CHECK_EQ(s.requests, 6);
	teardown(&t);
}

/* Bytes: a 64 KiB bucket refilled in 100 ms (640 KiB/s). A 256 KiB read,
 * larger than the bucket, still goes (once the bucket is full) and
 * leaves a debt that the next request waits out: three of them take at
 * least 2 x 256 KiB / 640 KiB/s = 0.8 s. */
TEST(a_request_larger_than_the_bytes_bucket_goes_and_the_next_waits_its_debt)
{
	struct blk_queue_stats s;
	struct timespec t0;
	uint64_t buf;
	struct t t;
	int i;

	setup(&t, ",bw_size=65536,bw_refill_time=100", 1);
	buf = vdrv_alloc(&t.d, 256 << 10, 4096);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < 3; i++)
		CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 256 << 10, true, NULL),
			 VIRTIO_BLK_S_OK);
	CHECK(secs_since(&t0) >= 0.79);
	stats(&t, 0, &s);
	CHECK_EQ(s.rate_delayed, 2);
	CHECK_EQ(s.bytes_read, 3 * (256 << 10));
	teardown(&t);
}

/* A disk limited to one request per refill_ms: one request goes (the
 * bucket's token), then a read of `sector` into *buf is posted and waits
 * for the next token. Its head; its status byte at *st. */
static int post_waiting(struct t *t, unsigned refill_ms, uint64_t sector, uint64_t *buf,
			uint64_t *st)
{
	char opts[64];
	int head;

	snprintf(opts, sizeof(opts), ",ops_size=1,ops_refill_time=%u", refill_ms);
	setup(t, opts, 1);
	*buf = vdrv_alloc(&t->d, 4096, 4096);
	CHECK_EQ(run1(t, 0, VIRTIO_BLK_T_IN, 0, *buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	head = post(t, 0, VIRTIO_BLK_T_IN, sector, *buf, 4096, true, st);
	CHECK(head >= 0);
	vdrv_kick(&t->d, 0);
	usleep(50000);
	return head;
}

/* A request waiting for a token 100 s away goes as soon as the limit is
 * lifted: the change wakes the queue's thread (vqw_poke), which looks
 * again at once, rather than at the wait it had computed. */
TEST(a_limit_lifted_at_run_time_releases_the_waiting_request_at_once)
{
	struct mvm_rate_limit none;
	struct blk_queue_stats s;
	char err[256];
	uint64_t buf, st;
	uint32_t id, len;
	struct t t;
	int head;

	head = post_waiting(&t, 100000, 8, &buf, &st);
	CHECK(!vdrv_get_used(&t.d, 0, &id, &len));
	stats(&t, 0, &s);
	CHECK_EQ(s.rate_delayed, 1);
	memset(&none, 0, sizeof(none));
	CHECK_EQ(blk_set_rate(t.dev, &none, err, sizeof(err)), 0);
	wait_used(&t, 0, &id, &len);
	CHECK_EQ(id, head);
	CHECK_EQ(st_of(&t, st), VIRTIO_BLK_S_OK);
	teardown(&t);
}

/* A pause while a request waits for a token: the disk is quiet at once
 * (the request has no host I/O yet), the token time passing while paused
 * starts nothing, and the request goes once the pause ends. */
TEST(a_pause_holds_back_a_request_waiting_for_tokens_until_resume)
{
	struct timespec t0;
	uint64_t buf, st;
	uint32_t id, len;
	struct t t;
	int head;

	head = post_waiting(&t, 300, 8, &buf, &st);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	virtio_dev_quiesce(t.dev, true);
	CHECK_EQ(virtio_dev_quiesce_wait(t.dev, mono_ns() + 5000000000ull), 0);
	CHECK(secs_since(&t0) < 0.2);      /* not after the token came */
	usleep(600000);                    /* the token's time passes, paused */
	CHECK(!vdrv_get_used(&t.d, 0, &id, &len));
	virtio_dev_quiesce(t.dev, false);
	wait_used(&t, 0, &id, &len);
	CHECK_EQ(id, head);
	CHECK_EQ(st_of(&t, st), VIRTIO_BLK_S_OK);
	teardown(&t);
}

/* --- a swapped backing image --- */

/* A second image of size bytes, its first 4 KiB all `fill`; its path in
 * path (room for 32). */
static void make_other_image(char *path, uint64_t size, uint8_t fill)
{
	uint8_t b[4096];
	int fd;

	strcpy(path, "/tmp/mvm-test-blk-XXXXXX");
	fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, (off_t)size), 0);
	memset(b, fill, sizeof(b));
	CHECK_EQ(pwrite(fd, b, sizeof(b), 0), (long long)sizeof(b));
	close(fd);
}

/* Open path with the options of spec (what mvm_disk_swap does) and swap
 * it in, the device quiesced as in a paused VM; then let it go. */
static int swap_to(struct t *t, const char *path, const char *opts, char *err, size_t errlen)
{
	char spec[256];
	struct mvm_disk o;
	struct blk_image img;
	uint64_t t0;
	int r;

	snprintf(spec, sizeof(spec), "%s%s", path, opts);
	CHECK_EQ(test_disk_parse(spec, t->nq, &o, err, errlen), 0);
	CHECK_EQ(blk_image_open(&o, &img, NULL, err, errlen), 0);
	virtio_dev_quiesce(t->dev, true);
	CHECK_EQ(virtio_dev_quiesce_wait(t->dev, mono_ns() + 5000000000ull), 0);
	t0 = mono_ns();
	r = blk_swap(t->dev, &img, path, err, errlen);
	/* The old threads end at once: nothing sits out a deadline. */
	CHECK(mono_ns() - t0 < 2000000000ull);
	blk_image_close(&img);
	virtio_dev_quiesce(t->dev, false);
	return r;
}

static uint64_t config_capacity(struct t *t)
{
	return (uint64_t)vdrv_rd(&t->d, VIRTIO_MMIO_CONFIG) |
	       (uint64_t)vdrv_rd(&t->d, VIRTIO_MMIO_CONFIG + 4) << 32;
}

/* Firecracker's drive update: the queue goes on on the new image, where
 * the old one left it (the same ring, its counters carried on), the
 * capacity is the new one, and the guest is told (a configuration
 * interrupt, a new generation); a sector past the old end now reads. */
TEST(a_swapped_image_serves_the_queue_on_with_its_new_capacity)
{
	char other[32], err[256];
	struct blk_queue_stats s;
	uint32_t gen;
	uint64_t buf;
	struct t t;

	setup(&t, "", 1);
	buf = vdrv_alloc(&t.d, 4096, 4096);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(((uint8_t *)vdrv_host(&t.d, buf))[1], pattern(1));
	CHECK_EQ(config_capacity(&t), IMG_SIZE / 512);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, IMG_SIZE / 512, buf, 4096, true, NULL),
		 VIRTIO_BLK_S_IOERR);
	vdrv_irq(&t.d);
	gen = vdrv_rd(&t.d, VIRTIO_MMIO_CONFIG_GENERATION);
	make_other_image(other, 4 * IMG_SIZE, 0xa5);
	CHECK_EQ(swap_to(&t, other, "", err, sizeof(err)), 0);
	CHECK(vdrv_irq(&t.d) & VIRTIO_MMIO_INT_CONFIG);
	CHECK(vdrv_rd(&t.d, VIRTIO_MMIO_CONFIG_GENERATION) != gen);
	CHECK_EQ(config_capacity(&t), 4 * IMG_SIZE / 512);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(((uint8_t *)vdrv_host(&t.d, buf))[1], 0xa5);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, IMG_SIZE / 512, buf, 4096, true, NULL),
		 VIRTIO_BLK_S_OK);
	CHECK_EQ(blk_get_queue_stats(t.dev, 0, &s), 0);
	CHECK_EQ(s.requests, 4);
	CHECK(!s.ring_valid);           /* a running queue: no stopped ring to show */
	teardown(&t);
	unlink(other);
}

/* Resize the disk's image as mvm_disk_resize does: the queues quiesced
 * around it, as in a paused VM. */
static int resize_to(struct t *t, uint64_t size, char *err, size_t errlen)
{
	int r;

	virtio_dev_quiesce(t->dev, true);
	CHECK_EQ(virtio_dev_quiesce_wait(t->dev, mono_ns() + 5000000000ull), 0);
	r = blk_resize(t->dev, size, err, errlen);
	virtio_dev_quiesce(t->dev, false);
	return r;
}

/* Cloud Hypervisor's vm.resize-disk: the image file grows (sparse: the
 * new part reads as zeros) and the guest is told, a sector past the old
 * end now reads; cut again, that sector is an error once more and the
 * data below the new end is what it was. */
TEST(a_resized_image_gives_the_guest_its_new_capacity)
{
	char err[256];
	struct stat st;
	uint32_t gen;
	uint64_t buf;
	struct t t;

	setup(&t, "", 1);
	buf = vdrv_alloc(&t.d, 4096, 4096);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, IMG_SIZE / 512, buf, 4096, true, NULL),
		 VIRTIO_BLK_S_IOERR);
	vdrv_irq(&t.d);
	gen = vdrv_rd(&t.d, VIRTIO_MMIO_CONFIG_GENERATION);
	CHECK_EQ(resize_to(&t, 3 * IMG_SIZE, err, sizeof(err)), 0);
	CHECK(vdrv_irq(&t.d) & VIRTIO_MMIO_INT_CONFIG);
	CHECK(vdrv_rd(&t.d, VIRTIO_MMIO_CONFIG_GENERATION) != gen);
	CHECK_EQ(config_capacity(&t), 3 * IMG_SIZE / 512);
	CHECK_EQ(stat(t.path, &st), 0);
	CHECK_EQ((uint64_t)st.st_size, 3 * IMG_SIZE);
	memset(vdrv_host(&t.d, buf), 0xee, 4096);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, IMG_SIZE / 512, buf, 4096, true, NULL),
		 VIRTIO_BLK_S_OK);
	CHECK_EQ(((uint8_t *)vdrv_host(&t.d, buf))[7], 0);
	/* Cut to half the first size. */
	CHECK_EQ(resize_to(&t, IMG_SIZE / 2, err, sizeof(err)), 0);
	CHECK(vdrv_irq(&t.d) & VIRTIO_MMIO_INT_CONFIG);
	CHECK_EQ(config_capacity(&t), IMG_SIZE / 2 / 512);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, IMG_SIZE / 2 / 512, buf, 4096, true, NULL),
		 VIRTIO_BLK_S_IOERR);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(((uint8_t *)vdrv_host(&t.d, buf))[1], pattern(1));
	teardown(&t);
}

/* A size the disk cannot take, or a read-only disk: refused, the image
 * and the capacity as they were, and no interrupt. */
TEST(a_resize_the_disk_cannot_take_changes_nothing)
{
	char err[256];
	struct stat st;
	struct t t;

	setup(&t, "", 1);
	vdrv_irq(&t.d);
	CHECK_EQ(resize_to(&t, IMG_SIZE + 100, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "is not a non-zero multiple of 512 bytes"));
	CHECK_EQ(resize_to(&t, 0, err, sizeof(err)), -EINVAL);
	CHECK(!(vdrv_irq(&t.d) & VIRTIO_MMIO_INT_CONFIG));
	CHECK_EQ(config_capacity(&t), IMG_SIZE / 512);
	CHECK_EQ(stat(t.path, &st), 0);
	CHECK_EQ((uint64_t)st.st_size, IMG_SIZE);
	teardown(&t);
	setup(&t, ",ro", 1);
	CHECK_EQ(resize_to(&t, 2 * IMG_SIZE, err, sizeof(err)), -EROFS);
	CHECK(strstr(err, "is read-only"));
	CHECK_EQ(config_capacity(&t), IMG_SIZE / 512);
	CHECK_EQ(stat(t.path, &st), 0);
	CHECK_EQ((uint64_t)st.st_size, IMG_SIZE);
	teardown(&t);
}

/* An image the disk cannot use is refused before anything changes. */
TEST(a_swap_to_an_image_the_disk_cannot_use_changes_nothing)
{
	char other[32], err[256];
	uint64_t buf;
	struct t t;

	setup(&t, "", 1);
	buf = vdrv_alloc(&t.d, 4096, 4096);
	make_other_image(other, IMG_SIZE, 0x3c);
	CHECK_EQ(swap_to(&t, other, ",ro", err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "is read-only but the disk is read-write"));
	CHECK_EQ(config_capacity(&t), IMG_SIZE / 512);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(((uint8_t *)vdrv_host(&t.d, buf))[1], pattern(1));
	teardown(&t);
	unlink(other);
}

/* A request that waits for rate tokens when the image is swapped goes on
 * the new worker once the tokens are there, and reads the new image. */
TEST(a_request_waiting_for_tokens_across_a_swap_goes_on_the_new_image)
{
	char other[32], err[256];
	uint64_t buf, st;
	uint32_t id, len;
	struct t t;
	int head;

	head = post_waiting(&t, 300, 0, &buf, &st);
	make_other_image(other, IMG_SIZE, 0x77);
	CHECK_EQ(swap_to(&t, other, ",ops_size=1,ops_refill_time=300", err, sizeof(err)), 0);
	wait_used(&t, 0, &id, &len);
	CHECK_EQ(id, head);
	CHECK_EQ(st_of(&t, st), VIRTIO_BLK_S_OK);
	CHECK_EQ(((uint8_t *)vdrv_host(&t.d, buf))[1], 0x77);
	teardown(&t);
	unlink(other);
}

/* A swap inside the queue filter: each of the disk's I/O threads puts
 * the new image in its own ring's slots (a register call of its own,
 * which the filter allows), with the buffered twin of cache=none, and
 * both queues read the new image. */
TEST(a_swap_works_inside_the_queue_filter_on_every_io_thread)
{
	char other[32], err[256];
	uint64_t buf;
	struct t t;
	unsigned q;

	if (!seccomp_works())
		CHECK_SKIP("seccomp filters cannot be installed here (qemu-user?)");
	setup_sandbox = true;
	setup(&t, ",queues=2,io-threads=2,cache=none", 2);
	setup_sandbox = false;
	CHECK_EQ(count_threads_in("mvm-blk-q", true), 2);
	buf = vdrv_alloc(&t.d, 4096, 4096);
	make_other_image(other, 2 * IMG_SIZE, 0x5a);
	CHECK_EQ(swap_to(&t, other, ",queues=2,io-threads=2,cache=none", err, sizeof(err)), 0);
	CHECK_EQ(config_capacity(&t), 2 * IMG_SIZE / 512);
	for (q = 0; q < 2; q++) {
		CHECK_EQ(run1(&t, q, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
		CHECK_EQ(((uint8_t *)vdrv_host(&t.d, buf))[1], 0x5a);
	}
	/* Alive and filtered: the threads did nothing their filter kills. */
	CHECK_EQ(count_threads_in("mvm-blk-q", true), 2);
	teardown(&t);
	unlink(other);
}

/* --- a hot-plug slot's spare --- */

/* A spare made with two queues and no image offers an empty disk; given
 * an image (and one queue of its two) inside the queue filter, it serves
 * it with counters from zero; reset and emptied it lets the image go
 * (another VM may lock it); given another image it serves that one, its
 * counters from zero again. */
TEST(a_spare_disk_takes_an_image_serves_it_and_lets_it_go)
{
	char other[32], spec[160], err[256];
	struct blk_queue_stats s;
	struct blk_image img, again;
	struct mvm_disk shape, o;
	uint64_t buf;
	uint8_t b[2];
	struct t t;

	check_need_io_uring();
	if (!seccomp_works())
		CHECK_SKIP("seccomp filters cannot be installed here (qemu-user?)");
	memset(&t, 0, sizeof(t));
	make_image(&t, IMG_SIZE);
	CHECK_EQ(vdrv_ram_init(&t.d, 0x1000, 16 << 20), 0);
	mvm_disk_init(&shape, NULL);
	shape.queues = 2;
	CHECK_EQ(blk_dev_spare(&shape, &t.d.mem, &t.dev, err, sizeof(err)), 0);
	t.dev->sandbox = true;
	CHECK_EQ(vdrv_attach(&t.d, t.dev), 0);
	CHECK_EQ(count_threads_in("mvm-blk-q", true), 2);
	CHECK_EQ(config_capacity(&t), 0);

	snprintf(spec, sizeof(spec), "%s,queues=1,serial=spare1", t.path);
	CHECK_EQ(test_disk_parse(spec, 1, &o, err, sizeof(err)), 0);
	CHECK_EQ(blk_image_open(&o, &img, NULL, err, sizeof(err)), 0);
	CHECK_EQ(blk_fill(t.dev, &img, &o, NULL, err, sizeof(err)), 0);
	CHECK_EQ(config_capacity(&t), IMG_SIZE / 512);
	virtio_mmio_read(&t.d.mmio, VIRTIO_MMIO_CONFIG + 34, b, 2);
	CHECK_EQ(le16_load(b), 1);                       /* num_queues: the disk's */
	CHECK_EQ(vdrv_negotiate(&t.d, all_features()), 0);
	t.nq = 1;
	CHECK_EQ(vdrv_queue_setup(&t.d, 0, QSIZE), 1);
	vdrv_driver_ok(&t.d);
	buf = vdrv_alloc(&t.d, 4096, 4096);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(((uint8_t *)vdrv_host(&t.d, buf))[1], pattern(1));
	stats(&t, 0, &s);
	CHECK_EQ(s.requests, 1);
	/* A second image cannot go in while it has one. */
	CHECK_EQ(blk_image_open(&o, &again, NULL, err, sizeof(err)), -EBUSY);

	vdrv_wr(&t.d, VIRTIO_MMIO_STATUS, 0);
	blk_empty(t.dev);
	CHECK_EQ(config_capacity(&t), 0);
	CHECK_EQ(blk_image_open(&o, &again, NULL, err, sizeof(err)), 0);
	blk_image_close(&again);

	make_other_image(other, 2 * IMG_SIZE, 0x6b);
	snprintf(spec, sizeof(spec), "%s,queues=2", other);
	CHECK_EQ(test_disk_parse(spec, 1, &o, err, sizeof(err)), 0);
	CHECK_EQ(blk_image_open(&o, &img, NULL, err, sizeof(err)), 0);
	CHECK_EQ(blk_fill(t.dev, &img, &o, NULL, err, sizeof(err)), 0);
	CHECK_EQ(config_capacity(&t), 2 * IMG_SIZE / 512);
	stats(&t, 0, &s);
	CHECK_EQ(s.requests, 0);
	CHECK_EQ(vdrv_negotiate(&t.d, all_features()), 0);
	t.nq = 2;
	CHECK_EQ(vdrv_queue_setup(&t.d, 0, QSIZE), 1);
	CHECK_EQ(vdrv_queue_setup(&t.d, 1, QSIZE), 1);
	vdrv_driver_ok(&t.d);
	CHECK_EQ(run1(&t, 1, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(((uint8_t *)vdrv_host(&t.d, buf))[1], 0x6b);
	/* Three queues are more than the spare has: refused, nothing moves. */
	vdrv_wr(&t.d, VIRTIO_MMIO_STATUS, 0);
	blk_empty(t.dev);
	o.queues = 3;
	CHECK_EQ(blk_image_open(&o, &img, NULL, err, sizeof(err)), 0);
	CHECK_EQ(blk_fill(t.dev, &img, &o, NULL, err, sizeof(err)), -EINVAL);
	blk_image_close(&img);
	CHECK_EQ(count_threads_in("mvm-blk-q", true), 2);
	teardown(&t);
	unlink(other);
}

/* Limits the device is given at run time are checked like a spec's. */
TEST(bad_limits_at_run_time_are_refused_and_the_old_ones_stay)
{
	struct mvm_rate_limit bad;
	struct timespec t0;
	char err[256];
	uint64_t buf;
	struct t t;

	setup(&t, ",ops_size=1,ops_refill_time=50", 1);
	memset(&bad, 0, sizeof(bad));
	bad.ops.size = 5;       /* no refill time */
	CHECK_EQ(blk_set_rate(t.dev, &bad, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "ops_refill_time"));
	buf = vdrv_alloc(&t.d, 4096, 4096);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	CHECK(secs_since(&t0) >= 0.049);
	teardown(&t);
}

/* A reset while a request waits for tokens: the wait is cancelled with
 * the rest, the request ends without reaching the guest, and the stop
 * does not sit out its deadline (nothing is logged). */
TEST(a_reset_while_a_request_waits_for_tokens_stops_at_once)
{
	struct check_log lg = { 0 };
	struct log_sink sink = { .fn = check_log_line, .opaque = &lg };
	struct timespec t0;
	uint64_t buf, st;
	struct t t;

	setup_log = &sink;
	setup(&t, ",ops_size=1,ops_refill_time=100000", 1);
	setup_log = NULL;
	buf = vdrv_alloc(&t.d, 4096, 4096);
	CHECK_EQ(run1(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, NULL), VIRTIO_BLK_S_OK);
	CHECK(post(&t, 0, VIRTIO_BLK_T_IN, 8, buf, 4096, true, &st) >= 0);
	vdrv_kick(&t.d, 0);
	usleep(50000);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	vdrv_wr(&t.d, VIRTIO_MMIO_STATUS, 0);
	CHECK(secs_since(&t0) < 2.0);
	CHECK_EQ(st_of(&t, st), 0xff);      /* never written */
	CHECK_EQ(lg.lines, 0);
	teardown(&t);
}

/* Two disks in one group (ops_size=1 every 40 ms between them): three
 * requests each, taking turns, need five refills of the shared bucket,
 * where each disk alone would need two. */
TEST(disks_in_a_group_share_its_tokens)
{
	struct mvm_rate_limit g = { .ops = { .size = 1, .refill_time_ms = 40 } };
	struct blk_queue_stats sa, sb;
	struct ratelim group;
	struct timespec t0;
	uint64_t ba, bb;
	struct t a, b;
	int i;

	CHECK_EQ(ratelim_init(&group, &g, mono_ns()), 0);
	setup(&a, "", 1);
	setup(&b, "", 1);
	CHECK_EQ(blk_set_group(a.dev, &group), 0);
	CHECK_EQ(blk_set_group(b.dev, &group), 0);
	CHECK_EQ(blk_set_group(b.dev, &group), -EINVAL);      /* one group per disk */
	ba = vdrv_alloc(&a.d, 4096, 4096);
	bb = vdrv_alloc(&b.d, 4096, 4096);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < 3; i++) {
		CHECK_EQ(run1(&a, 0, VIRTIO_BLK_T_IN, 0, ba, 4096, true, NULL), VIRTIO_BLK_S_OK);
		CHECK_EQ(run1(&b, 0, VIRTIO_BLK_T_IN, 0, bb, 4096, true, NULL), VIRTIO_BLK_S_OK);
	}
	CHECK(secs_since(&t0) >= 0.199);
	stats(&a, 0, &sa);
	stats(&b, 0, &sb);
	CHECK_EQ(sa.rate_delayed + sb.rate_delayed, 5);
	teardown(&a);
	teardown(&b);
	ratelim_fini(&group);
}

/* The limiter inside the queue filter: its lock (a futex), the clock
 * (vDSO) and its waits (an io_uring timeout) need nothing more, and a
 * change from another thread reaches it through the worker's eventfd. */
TEST(rate_limits_work_inside_the_queue_filter)
{
	struct mvm_rate_limit rate;
	struct blk_queue_stats s;
	char err[256];
	uint64_t buf, st[5];
	uint32_t id, len;
	struct t t;

	if (!seccomp_works())
		CHECK_SKIP("seccomp filters cannot be installed here (qemu-user?)");
	setup_sandbox = true;
	setup(&t, ",ops_size=1,ops_refill_time=10", 1);
	setup_sandbox = false;
	CHECK_EQ(count_threads_in("mvm-blk-q", true), 1);
	buf = vdrv_alloc(&t.d, 4096, 4096);
	/* Three at once through a bucket of one: the second and the third
	 * wait for it (one at a time, not each after the last completed,
	 * which on a busy host could find the bucket refilled). */
	for (int i = 0; i < 3; i++)
		CHECK(post(&t, 0, VIRTIO_BLK_T_IN, 0, buf, 4096, true, &st[2 + i]) >= 0);
	vdrv_kick(&t.d, 0);
	for (int i = 0; i < 3; i++)
		wait_used(&t, 0, &id, &len);
	/* One token per 100 s: of the next two requests one waits at least
	 * (the bucket holds one token or none), until the limit goes. */
	rate = (struct mvm_rate_limit){ .ops = { .size = 1, .refill_time_ms = 100000 } };
	CHECK_EQ(blk_set_rate(t.dev, &rate, err, sizeof(err)), 0);
	CHECK(post(&t, 0, VIRTIO_BLK_T_IN, 8, buf, 4096, true, &st[0]) >= 0);
	CHECK(post(&t, 0, VIRTIO_BLK_T_IN, 16, buf, 4096, true, &st[1]) >= 0);
	vdrv_kick(&t.d, 0);
	usleep(50000);
	memset(&rate, 0, sizeof(rate));
	CHECK_EQ(blk_set_rate(t.dev, &rate, err, sizeof(err)), 0);
	wait_used(&t, 0, &id, &len);
	wait_used(&t, 0, &id, &len);
	stats(&t, 0, &s);
	CHECK(s.rate_delayed >= 3);
	teardown(&t);
}
