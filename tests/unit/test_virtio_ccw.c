/* virtio-ccw, device side (devices/virtio_ccw.c): the virtio commands as
 * the channel hands them over (data areas inside a fake guest RAM), the
 * indicators and interrupts, reset; driven like Linux's virtio_ccw.c
 * would, with the thread-less vnull device. Byte-level checks only, so
 * that the big-endian run (qemu-s390x) means the same as the x86 one. */
#include "devices/virtio_ccw.h"
#include "tests/unit/check.h"
#include "vmm/base/json.h"
#include "tests/unit/vnulldev.h"

#include <errno.h>
#include <stdio.h>
#include <sys/eventfd.h>

#include "vmm/base/byteorder.h"
#include "vmm/base/log.h"
#include "tests/unit/snap_sec.h"
#include "vmm/base/snap.h"

#define V1 VIRTIO_BIT(VIRTIO_F_VERSION_1)
#define ACK VIRTIO_CONFIG_S_ACKNOWLEDGE
#define DRV VIRTIO_CONFIG_S_DRIVER
#define FOK VIRTIO_CONFIG_S_FEATURES_OK
#define DOK VIRTIO_CONFIG_S_DRIVER_OK
#define RAM_END (VNULL_RAM_GPA + VNULL_RAM_SIZE)

/* A virtio-ccw device on the test's "subchannel": what the interrupt
 * callbacks saw, and a scratch data area in fake RAM. */
struct tc {
	struct vnull *v;
	struct virtio_ccw vc;
	uint64_t area;                  /* gpa of the commands' data area */
	unsigned adapter, subchannel;   /* interrupts raised */
	uint8_t isc;                    /* of the last adapter interrupt */
	unsigned binds, unbinds, frees;
	int bind_ret;
	int efd[VIRTIO_MAX_QUEUES];     /* bind_adapter's "irqfds" */
};

static void t_adapter(void *opaque, uint8_t isc)
{
	struct tc *t = opaque;

	t->adapter++;
	t->isc = isc;
}

static void t_subchannel(void *opaque)
{
	((struct tc *)opaque)->subchannel++;
}

static int t_bind(void *opaque, struct virtio_ccw *vc)
{
	struct tc *t = opaque;
	unsigned q;

	t->binds++;
	if (t->bind_ret)
		return t->bind_ret;
	for (q = 0; q < vc->t.dev->num_queues; q++)
		vc->irq_fd[q] = t->efd[q];
	return 0;
}

static void t_unbind(void *opaque, struct virtio_ccw *vc)
{
	struct tc *t = opaque;
	unsigned q;

	t->unbinds++;
	for (q = 0; q < VIRTIO_MAX_QUEUES; q++)
		vc->irq_fd[q] = -1;
}

static void t_free(void *opaque, struct virtio_ccw *vc)
{
	struct tc *t = opaque;

	CHECK(vc == &t->vc);
	t->frees++;
}

/* Software indicators only (no KVM routes). */
static const struct virtio_ccw_irq_ops soft_irq = {
	.adapter = t_adapter,
	.subchannel = t_subchannel,
};

/* With a "KVM binding" that routes queues through eventfds. */
static const struct virtio_ccw_irq_ops kvm_irq = {
	.adapter = t_adapter,
	.subchannel = t_subchannel,
	.bind_adapter = t_bind,
	.unbind_adapter = t_unbind,
	.free = t_free,
};

static struct tc *tc_new_ops(unsigned nq, uint64_t features, const struct virtio_ccw_irq_ops *irq)
{
	struct tc *t = calloc(1, sizeof(*t));
	struct vnull *v = calloc(1, sizeof(*v));
	unsigned q;

	CHECK(t && v);
	v->features = features;
	CHECK_EQ(vdrv_ram_init(&v->d, VNULL_RAM_GPA, VNULL_RAM_SIZE), 0);
	CHECK_EQ(virtio_dev_init(&v->dev, &vnull_ops, v, &v->d.mem, nq, VNULL_QMAX), 0);
	CHECK_EQ(virtio_ccw_init(&t->vc, &v->dev, &v->d.mem, irq, t), 0);
	CHECK(v->dev.transport == &t->vc);
	CHECK(v->dev.tops == &virtio_ccw_transport_ops);
	t->v = v;
	t->area = vdrv_alloc(&v->d, 8192, 4096);
	for (q = 0; q < VIRTIO_MAX_QUEUES; q++) {
		t->efd[q] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		CHECK(t->efd[q] >= 0);
	}
	/* The channel enables the subchannel before any I/O. */
	virtio_ccw_dev_ops.enable(&t->vc, true);
	return t;
}

static struct tc *tc_new(unsigned nq, uint64_t features)
{
	return tc_new_ops(nq, features, &soft_irq);
}

/* Everything but vc (the VM's teardown frees that through vtr_ops). */
static void tc_free_rest(struct tc *t)
{
	unsigned q;

	virtio_dev_destroy(&t->v->dev);
	for (q = 0; q < VIRTIO_MAX_QUEUES; q++)
		close(t->efd[q]);
	free(t->v->d.ram);
	free(t->v);
	free(t);
}

static void tc_free(struct tc *t)
{
	virtio_ccw_destroy(&t->vc);
	tc_free_rest(t);
}

static uint8_t *host(struct tc *t, uint64_t gpa)
{
	return vdrv_host(&t->v->d, gpa);
}

/* One command on a data area of count bytes at t->area: in (count bytes,
 * or NULL: leave RAM as it is) is what the driver put there, out gets the
 * area afterwards. Returns what command() returned. */
static int run(struct tc *t, uint8_t cmd, bool sli, const void *in, uint32_t count, void *out)
{
	struct ccw_data d = { .count = count };

	CHECK(count <= 8192);
	if (count) {
		d.n = 1;
		d.seg[0].iov_base = gmem_ptr(&t->v->d.mem, t->area, count);
		d.seg[0].iov_len = count;
		CHECK(d.seg[0].iov_base);
		if (in)
			memcpy(d.seg[0].iov_base, in, count);
	}
	int ret = virtio_ccw_dev_ops.command(&t->vc, cmd, sli, &d);
	if (out && count)
		memcpy(out, d.seg[0].iov_base, count);
	return ret;
}

static int set_rev(struct tc *t, uint16_t rev)
{
	uint8_t b[4];

	be16_store(b, rev);
	be16_store(b + 2, 0);
	return run(t, VIRTIO_CCW_CMD_SET_VIRTIO_REV, false, b, 4, NULL);
}

static int write_status(struct tc *t, uint8_t s)
{
	return run(t, VIRTIO_CCW_CMD_WRITE_STATUS, false, &s, 1, NULL);
}

static int read_status(struct tc *t)
{
	uint8_t s = 0xee;
	int ret = run(t, VIRTIO_CCW_CMD_READ_STATUS, false, &s, 1, &s);

	return ret == 1 ? s : ret;
}

static int feat(struct tc *t, uint8_t cmd, uint8_t index, uint32_t *val)
{
	uint8_t b[5];
	int ret;

	le32_store(b, *val);
	b[4] = index;
	ret = run(t, cmd, false, b, 5, b);
	CHECK_EQ(b[4], index);          /* the index stays the driver's */
	*val = le32_load(b);
	return ret;
}

static void write_features(struct tc *t, uint64_t f)
{
	uint32_t lo = (uint32_t)f, hi = (uint32_t)(f >> 32);

	CHECK_EQ(feat(t, VIRTIO_CCW_CMD_WRITE_FEAT, 0, &lo), 5);
	CHECK_EQ(feat(t, VIRTIO_CCW_CMD_WRITE_FEAT, 1, &hi), 5);
}

static int set_vq_raw(struct tc *t, bool sli, uint32_t count, uint16_t index, uint16_t num,
		      uint64_t desc, uint64_t avail, uint64_t used)
{
	uint8_t b[64] = { 0 };

	be64_store(b, desc);
	be32_store(b + 8, 0);
	be16_store(b + 12, index);
	be16_store(b + 14, num);
	be64_store(b + 16, avail);
	be64_store(b + 24, used);
	return run(t, VIRTIO_CCW_CMD_SET_VQ, sli, b, count, NULL);
}

/* A split ring of num entries in fake RAM, as Linux lays it out
 * (4 KiB-aligned parts). */
static int set_vq(struct tc *t, uint16_t index, uint16_t num)
{
	uint64_t desc = vdrv_alloc(&t->v->d, VIRTQ_DESC_BYTES(num), 4096);
	uint64_t avail = vdrv_alloc(&t->v->d, VIRTQ_AVAIL_BYTES(num), 4096);
	uint64_t used = vdrv_alloc(&t->v->d, VIRTQ_USED_BYTES(num), 4096);

	return set_vq_raw(t, false, 32, index, num, desc, avail, used);
}

static int read_vq_conf(struct tc *t, uint16_t index)
{
	uint8_t b[4];
	int ret;

	be16_store(b, index);
	be16_store(b + 2, 0xbeef);
	ret = run(t, VIRTIO_CCW_CMD_READ_VQ_CONF, false, b, 4, b);
	CHECK_EQ(ret, 4);
	CHECK_EQ(be16_load(b), index);
	return be16_load(b + 2);
}

static int set_ind(struct tc *t, uint8_t cmd, uint64_t gpa)
{
	uint8_t b[8];

	be64_store(b, gpa);
	return run(t, cmd, false, b, 8, NULL);
}

/* As Linux sends it: 25 bytes, SLI. */
static int set_ind_adapter(struct tc *t, uint64_t summary, uint64_t ind, uint64_t bit_nr,
			   uint8_t isc)
{
	uint8_t b[25];

	be64_store(b, summary);
	be64_store(b + 8, ind);
	be64_store(b + 16, bit_nr);
	b[24] = isc;
	return run(t, VIRTIO_CCW_CMD_SET_IND_ADAPTER, true, b, 25, NULL);
}

/* Revision 2, features accepted (want | VERSION_1), FEATURES_OK. */
static void negotiate(struct tc *t, uint64_t want)
{
	CHECK_EQ(set_rev(t, 2), 4);
	CHECK_EQ(write_status(t, ACK), 1);
	CHECK_EQ(write_status(t, ACK | DRV), 1);
	write_features(t, want | V1);
	CHECK_EQ(write_status(t, ACK | DRV | FOK), 1);
	CHECK_EQ(read_status(t), ACK | DRV | FOK);
}

static uint64_t eventfd_count(int fd)
{
	uint64_t c = 0;

	if (read(fd, &c, sizeof(c)) != sizeof(c))
		return 0;
	return c;
}

/* ---- revision ---------------------------------------------------------- */

TEST(identity_for_sense_id)
{
	struct tc *t = tc_new(1, 0);

	CHECK_EQ(VIRTIO_CCW_CU_TYPE, 0x3832);
	CHECK_EQ(virtio_ccw_cu_model(&t->vc), vnull_ops.device_id);
	CHECK_EQ(t->vc.revision, -1);
	tc_free(t);
}

TEST(set_virtio_rev_must_come_first)
{
	struct tc *t = tc_new(1, 0);

	/* Not transitional: nothing before SET_VIRTIO_REV. */
	CHECK_EQ(read_status(t), CCW_REJECT);
	CHECK_EQ(write_status(t, ACK), CCW_REJECT);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_READ_VQ_CONF, false, NULL, 4, NULL), CCW_REJECT);
	CHECK_EQ(t->v->dev.status, 0);
	CHECK_EQ(set_rev(t, 2), 4);
	CHECK_EQ(t->vc.revision, 2);
	CHECK_EQ(read_status(t), 0);
	CHECK_EQ(write_status(t, ACK), 1);
	CHECK_EQ(read_status(t), ACK);
	/* Once per enable. */
	CHECK_EQ(set_rev(t, 1), CCW_REJECT);
	CHECK_EQ(set_rev(t, 2), CCW_REJECT);
	CHECK_EQ(t->vc.revision, 2);
	tc_free(t);
}

TEST(revision_0_and_above_2_rejected)
{
	struct tc *t = tc_new(1, 0);
	uint8_t b[8] = { 0 };

	CHECK_EQ(set_rev(t, 0), CCW_REJECT);    /* legacy: not offered */
	CHECK_EQ(set_rev(t, 3), CCW_REJECT);
	CHECK_EQ(set_rev(t, 0xffff), CCW_REJECT);
	/* revision 1 with data we cannot interpret */
	be16_store(b, 1);
	be16_store(b + 2, 4);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_SET_VIRTIO_REV, false, b, 8, NULL), CCW_REJECT);
	/* the length field promises more than the area holds */
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_SET_VIRTIO_REV, true, b, 6, NULL), CCW_PROGRAM_CHECK);
	/* shorter than the header */
	be16_store(b + 2, 0);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_SET_VIRTIO_REV, false, b, 3, NULL), CCW_PROGRAM_CHECK);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_SET_VIRTIO_REV, true, b, 3, NULL), CCW_PROGRAM_CHECK);
	/* longer: only with SLI */
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_SET_VIRTIO_REV, false, b, 8, NULL), CCW_PROGRAM_CHECK);
	CHECK_EQ(t->vc.revision, -1);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_SET_VIRTIO_REV, true, b, 8, NULL), 4);
	CHECK_EQ(t->vc.revision, 1);
	tc_free(t);
}

TEST(enable_unsets_revision_disable_resets_device)
{
	struct tc *t = tc_new(1, 0);

	negotiate(t, 0);
	CHECK_EQ(set_vq(t, 0, 16), 32);
	CHECK_EQ(write_status(t, ACK | DRV | FOK | DOK), 1);
	CHECK_EQ(t->v->started[0], 1);
	/* disabled: the running queue stops, the device is reset */
	virtio_ccw_dev_ops.enable(&t->vc, false);
	CHECK_EQ(t->v->stopped[0], 1);
	CHECK_EQ(t->v->dev.status, 0);
	CHECK(!t->v->dev.queues[0].vq.ready);
	CHECK_EQ(t->vc.revision, -1);
	virtio_ccw_dev_ops.enable(&t->vc, true);
	CHECK_EQ(read_status(t), CCW_REJECT);
	CHECK_EQ(set_rev(t, 1), 4);
	CHECK_EQ(read_status(t), 0);
	/* enabling again (MSCH with the enable bit still on) unsets it too */
	virtio_ccw_dev_ops.enable(&t->vc, true);
	CHECK_EQ(read_status(t), CCW_REJECT);
	CHECK_EQ(set_rev(t, 2), 4);
	tc_free(t);
}

/* ---- features and status ----------------------------------------------- */

TEST(features_round_trip_little_endian)
{
	struct tc *t = tc_new(1, 1ULL << 9);
	uint64_t offered = virtio_offered_features(&t->v->dev);
	uint8_t b[5];
	uint32_t v;
	unsigned i;

	CHECK_EQ(set_rev(t, 2), 4);
	CHECK(offered & (1ULL << 9));
	CHECK(offered & V1);
	/* Raw bytes in the data area: LE32, whatever the host's order. */
	for (uint8_t index = 0; index < 2; index++) {
		memset(b, 0xaa, sizeof(b));
		b[4] = index;
		CHECK_EQ(run(t, VIRTIO_CCW_CMD_READ_FEAT, false, b, 5, b), 5);
		for (i = 0; i < 4; i++)
			CHECK_EQ(b[i], (uint8_t)(offered >> (32 * index + 8 * i)));
		CHECK_EQ(b[4], index);
		if (index == 0)
			CHECK_EQ(b[1] & 0x02, 0x02);     /* bit 9 */
		else
			CHECK_EQ(b[0] & 0x01, 0x01);     /* bit 32: VERSION_1 */
	}
	v = 0x12345678;
	CHECK_EQ(feat(t, VIRTIO_CCW_CMD_READ_FEAT, 2, &v), 5);
	CHECK_EQ(v, 0);
	/* Written words land where the driver meant them. */
	CHECK_EQ(write_status(t, ACK | DRV), 1);
	b[0] = 0x00; b[1] = 0x02; b[2] = 0x00; b[3] = 0x00; b[4] = 0;
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_WRITE_FEAT, false, b, 5, NULL), 5);
	b[0] = 0x01; b[1] = 0x00; b[4] = 1;
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_WRITE_FEAT, false, b, 5, NULL), 5);
	b[0] = 0xff; b[4] = 2;                  /* no such word: ignored */
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_WRITE_FEAT, false, b, 5, NULL), 5);
	CHECK_EQ(t->v->dev.guest_features, V1 | (1ULL << 9));
	CHECK_EQ(write_status(t, ACK | DRV | FOK), 1);
	CHECK_EQ(read_status(t), ACK | DRV | FOK);
	tc_free(t);
}

TEST(refused_features_ok_is_rejected)
{
	struct tc *t = tc_new(1, 0);

	CHECK_EQ(set_rev(t, 1), 4);
	CHECK_EQ(write_status(t, ACK | DRV), 1);
	write_features(t, 1ULL << 9);           /* never offered, no VERSION_1 */
	CHECK_EQ(write_status(t, ACK | DRV | FOK), CCW_REJECT);
	CHECK_EQ(read_status(t), ACK | DRV);
	write_features(t, V1);
	CHECK_EQ(write_status(t, ACK | DRV | FOK), 1);
	CHECK_EQ(read_status(t), ACK | DRV | FOK);
	tc_free(t);
}

/* ---- queues ------------------------------------------------------------ */

TEST(set_vq_then_driver_ok_starts_queue)
{
	struct tc *t = tc_new(2, 0);
	struct virtq *vq = &t->v->dev.queues[1].vq;
	uint64_t desc = vdrv_alloc(&t->v->d, VIRTQ_DESC_BYTES(64), 4096);
	uint64_t avail = vdrv_alloc(&t->v->d, VIRTQ_AVAIL_BYTES(64), 4096);
	uint64_t used = vdrv_alloc(&t->v->d, VIRTQ_USED_BYTES(64), 4096);

	negotiate(t, 0);
	CHECK_EQ(set_vq_raw(t, false, 32, 1, 64, desc, avail, used), 32);
	CHECK(vq->ready);
	CHECK_EQ(vq->size, 64);
	CHECK_EQ(vq->desc_gpa, desc);
	CHECK_EQ(vq->driver_gpa, avail);
	CHECK_EQ(vq->device_gpa, used);
	CHECK(!t->v->dev.queues[0].vq.ready);
	CHECK_EQ(write_status(t, ACK | DRV | FOK | DOK), 1);
	CHECK_EQ(t->v->started[1], 1);
	CHECK_EQ(t->v->started[0], 0);          /* never set up */
	/* From DRIVER_OK on the queue is the queue thread's. */
	CHECK_EQ(set_vq(t, 0, 16), CCW_REJECT);
	CHECK_EQ(set_vq_raw(t, false, 32, 1, 0, 0, 0, 0), CCW_REJECT);
	CHECK(vq->ready);
	CHECK_EQ(vq->desc_gpa, desc);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_VDEV_RESET, false, NULL, 0, NULL), 0);
	CHECK_EQ(t->v->stopped[1], 1);
	CHECK(!vq->ready);
	CHECK_EQ(read_status(t), 0);
	/* Linux deletes its queues after the reset: desc 0 is accepted. */
	CHECK_EQ(set_vq_raw(t, false, 32, 1, 0, 0, 0, 0), 32);
	tc_free(t);
}

TEST(set_vq_bad_arguments_rejected)
{
	struct tc *t = tc_new(2, 0);
	uint64_t desc = vdrv_alloc(&t->v->d, VIRTQ_DESC_BYTES(16), 4096);
	uint64_t avail = vdrv_alloc(&t->v->d, VIRTQ_AVAIL_BYTES(16), 4096);
	uint64_t used = vdrv_alloc(&t->v->d, VIRTQ_USED_BYTES(16), 4096);

	CHECK_EQ(set_rev(t, 2), 4);
	/* before FEATURES_OK */
	CHECK_EQ(set_vq_raw(t, false, 32, 0, 16, desc, avail, used), CCW_REJECT);
	CHECK(!t->v->dev.queues[0].vq.ready);
	CHECK_EQ(write_status(t, ACK), 1);
	CHECK_EQ(write_status(t, ACK | DRV), 1);
	write_features(t, V1);
	CHECK_EQ(write_status(t, ACK | DRV | FOK), 1);
	CHECK_EQ(set_vq_raw(t, false, 32, 2, 16, desc, avail, used), CCW_REJECT); /* no queue 2 */
	CHECK_EQ(set_vq_raw(t, false, 32, 0xffff, 16, desc, avail, used), CCW_REJECT);
	CHECK_EQ(set_vq_raw(t, false, 32, 0, VNULL_QMAX * 2, desc, avail, used), CCW_REJECT);
	CHECK_EQ(set_vq_raw(t, false, 32, 0, 0, desc, avail, used), CCW_REJECT);
	CHECK(!t->v->dev.queues[0].vq.ready);
	CHECK_EQ(read_status(t), ACK | DRV | FOK);      /* nothing the device minds */
	/* a ring outside RAM: rejected, and the core's NEEDS_RESET */
	CHECK_EQ(set_vq_raw(t, false, 32, 0, 16, RAM_END, avail, used), CCW_REJECT);
	CHECK(!t->v->dev.queues[0].vq.ready);
	CHECK_EQ(read_status(t), ACK | DRV | FOK | VIRTIO_CONFIG_S_NEEDS_RESET);
	/* fine ones, then disabled with desc 0 */
	CHECK_EQ(set_vq_raw(t, false, 32, 0, 16, desc, avail, used), 32);
	CHECK(t->v->dev.queues[0].vq.ready);
	CHECK_EQ(set_vq_raw(t, false, 32, 0, 0, 0, 0, 0), 32);
	CHECK(!t->v->dev.queues[0].vq.ready);
	CHECK_EQ(t->v->dev.queues[0].vq.desc_gpa, 0);
	tc_free(t);
}

TEST(read_vq_conf_gives_max_or_0)
{
	struct tc *t = tc_new(3, 0);

	CHECK_EQ(set_rev(t, 2), 4);
	CHECK_EQ(read_vq_conf(t, 0), VNULL_QMAX);
	CHECK_EQ(read_vq_conf(t, 2), VNULL_QMAX);
	CHECK_EQ(read_vq_conf(t, 3), 0);        /* Linux's end of the list */
	CHECK_EQ(read_vq_conf(t, 0xffff), 0);
	tc_free(t);
}

/* ---- length rules ------------------------------------------------------ */

TEST(count_must_match_payload_without_sli)
{
	struct tc *t = tc_new(1, 0);
	uint64_t desc = vdrv_alloc(&t->v->d, VIRTQ_DESC_BYTES(16), 4096);
	uint64_t avail = vdrv_alloc(&t->v->d, VIRTQ_AVAIL_BYTES(16), 4096);
	uint64_t used = vdrv_alloc(&t->v->d, VIRTQ_USED_BYTES(16), 4096);
	uint8_t b[8] = { 0 };

	negotiate(t, 0);
	CHECK_EQ(set_vq_raw(t, false, 31, 0, 16, desc, avail, used), CCW_PROGRAM_CHECK);
	CHECK_EQ(set_vq_raw(t, false, 33, 0, 16, desc, avail, used), CCW_PROGRAM_CHECK);
	CHECK_EQ(set_vq_raw(t, true, 31, 0, 16, desc, avail, used), CCW_PROGRAM_CHECK);
	CHECK(!t->v->dev.queues[0].vq.ready);
	/* SLI: a longer area is fine, 32 bytes transferred */
	CHECK_EQ(set_vq_raw(t, true, 40, 0, 16, desc, avail, used), 32);
	CHECK(t->v->dev.queues[0].vq.ready);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_READ_STATUS, false, b, 2, NULL), CCW_PROGRAM_CHECK);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_READ_STATUS, false, b, 0, NULL), CCW_PROGRAM_CHECK);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_READ_STATUS, true, b, 8, b), 1);
	CHECK_EQ(b[0], ACK | DRV | FOK);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_READ_FEAT, false, b, 4, NULL), CCW_PROGRAM_CHECK);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_SET_CONF_IND, false, b, 7, NULL), CCW_PROGRAM_CHECK);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_VDEV_RESET, false, b, 1, NULL), CCW_PROGRAM_CHECK);
	CHECK_EQ(read_status(t), ACK | DRV | FOK);      /* that reset did not happen */
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_VDEV_RESET, true, b, 8, NULL), 0);
	CHECK_EQ(read_status(t), 0);
	tc_free(t);
}

TEST(data_area_in_pieces)
{
	/* The channel resolves IDAW lists into several host pieces: a
	 * payload split across them reads as one. */
	struct tc *t = tc_new(1, 0);
	uint64_t desc = vdrv_alloc(&t->v->d, VIRTQ_DESC_BYTES(16), 4096);
	uint64_t avail = vdrv_alloc(&t->v->d, VIRTQ_AVAIL_BYTES(16), 4096);
	uint64_t used = vdrv_alloc(&t->v->d, VIRTQ_USED_BYTES(16), 4096);
	uint64_t a = vdrv_alloc(&t->v->d, 64, 8), b = vdrv_alloc(&t->v->d, 64, 8);
	uint8_t p[32];
	struct ccw_data d = { .count = 32, .n = 3 };

	negotiate(t, 0);
	be64_store(p, desc);
	be32_store(p + 8, 0);
	be16_store(p + 12, 0);
	be16_store(p + 14, 16);
	be64_store(p + 16, avail);
	be64_store(p + 24, used);
	memcpy(host(t, a), p, 5);
	memcpy(host(t, b), p + 5, 20);
	memcpy(host(t, a + 32), p + 25, 7);
	d.seg[0] = (struct iovec){ host(t, a), 5 };
	d.seg[1] = (struct iovec){ host(t, b), 20 };
	d.seg[2] = (struct iovec){ host(t, a + 32), 7 };
	CHECK_EQ(virtio_ccw_dev_ops.command(&t->vc, VIRTIO_CCW_CMD_SET_VQ, false, &d), 32);
	CHECK_EQ(t->v->dev.queues[0].vq.desc_gpa, desc);
	CHECK_EQ(t->v->dev.queues[0].vq.device_gpa, used);
	/* and a read answer spread the same way */
	d.count = 4;
	d.n = 2;
	d.seg[0] = (struct iovec){ host(t, a), 3 };
	d.seg[1] = (struct iovec){ host(t, b), 1 };
	be16_store(host(t, a), 0);
	CHECK_EQ(virtio_ccw_dev_ops.command(&t->vc, VIRTIO_CCW_CMD_READ_VQ_CONF, false, &d), 4);
	CHECK_EQ(host(t, a)[2], VNULL_QMAX >> 8);
	CHECK_EQ(host(t, b)[0], VNULL_QMAX & 0xff);
	tc_free(t);
}

/* ---- indicators and interrupts ----------------------------------------- */

TEST(adapter_indicators_bits_and_summary)
{
	struct tc *t = tc_new(3, 0);
	uint64_t summary = vdrv_alloc(&t->v->d, 8, 8);
	uint64_t ind = vdrv_alloc(&t->v->d, 64, 64);
	uint8_t *s = host(t, summary), *i = host(t, ind);
	uint64_t bit_nr = 14;                   /* queues 0..2: bits 14, 15, 16 */
	unsigned q;

	negotiate(t, 0);
	CHECK_EQ(set_ind_adapter(t, summary, ind, bit_nr, 3), 25);
	CHECK(t->vc.thinint);
	for (q = 0; q < 3; q++)
		CHECK_EQ(set_vq(t, q, 16), 32);
	CHECK_EQ(write_status(t, ACK | DRV | FOK | DOK), 1);

	/* queue 2: bit 16 = byte 2, MSB first */
	virtio_signal_queue(&t->v->dev, 2);
	CHECK_EQ(i[2], 0x80 >> ((bit_nr + 2) % 8));
	CHECK_EQ(i[2], 0x80);
	CHECK_EQ(i[1], 0);
	CHECK_EQ(s[0], 0x01);
	CHECK_EQ(t->adapter, 1);
	CHECK_EQ(t->isc, 3);
	CHECK_EQ(t->subchannel, 0);
	/* summary still set: bits, but no second interrupt */
	virtio_signal_queue(&t->v->dev, 0);
	virtio_signal_queue(&t->v->dev, 1);
	CHECK_EQ(i[1], 0x02 | 0x01);            /* bits 14, 15 */
	CHECK_EQ(t->adapter, 1);
	/* the guest's handler clears the summary: the next one interrupts */
	s[0] = 0;
	i[1] = 0;
	virtio_signal_queue(&t->v->dev, 1);
	CHECK_EQ(i[1], 0x01);
	CHECK_EQ(s[0], 0x01);
	CHECK_EQ(t->adapter, 2);
	/* nothing else was touched */
	CHECK_EQ(i[0], 0);
	CHECK_EQ(i[3], 0);
	CHECK_EQ(s[1], 0);
	/* out-of-range queue: ignored */
	virtio_signal_queue(&t->v->dev, 3);
	CHECK_EQ(t->adapter, 2);
	CHECK_EQ(t->vc.adapter_irqs, 2);
	tc_free(t);
}

TEST(classic_indicators_and_config_indicator)
{
	struct tc *t = tc_new(10, 0);
	uint64_t ind = vdrv_alloc(&t->v->d, 8, 8), conf = vdrv_alloc(&t->v->d, 8, 8);
	uint8_t *i = host(t, ind), *c = host(t, conf);

	negotiate(t, 0);
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_IND, ind), 8);
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_CONF_IND, conf), 8);
	CHECK(!t->vc.thinint);
	virtio_signal_queue(&t->v->dev, 9);
	CHECK_EQ(i[7 - 9 / 8], 1 << (9 % 8));
	CHECK_EQ(i[6], 0x02);
	CHECK_EQ(be64_load(i), 1ULL << 9);
	CHECK_EQ(t->subchannel, 1);
	virtio_signal_queue(&t->v->dev, 0);
	CHECK_EQ(be64_load(i), (1ULL << 9) | 1);
	CHECK_EQ(i[7], 0x01);
	CHECK_EQ(t->subchannel, 2);
	CHECK_EQ(t->adapter, 0);
	CHECK_EQ(be64_load(c), 0);
	/* a config change: bit 0 of the config word */
	virtio_config_changed(&t->v->dev);
	CHECK_EQ(be64_load(c), 1);
	CHECK_EQ(c[7], 0x01);
	CHECK_EQ(t->subchannel, 3);
	CHECK_EQ(be64_load(i), (1ULL << 9) | 1);
	tc_free(t);
}

TEST(config_indicator_with_adapter_interrupts)
{
	struct tc *t = tc_new(1, 0);
	uint64_t summary = vdrv_alloc(&t->v->d, 1, 1), ind = vdrv_alloc(&t->v->d, 8, 8);
	uint64_t conf = vdrv_alloc(&t->v->d, 8, 8);

	negotiate(t, 0);
	/* nothing set yet: nothing raised */
	virtio_config_changed(&t->v->dev);
	virtio_signal_queue(&t->v->dev, 0);
	CHECK_EQ(t->subchannel + t->adapter, 0);
	CHECK_EQ(set_ind_adapter(t, summary, ind, 0, 2), 25);
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_CONF_IND, conf), 8);
	virtio_config_changed(&t->v->dev);
	CHECK_EQ(host(t, conf)[7], 0x01);
	CHECK_EQ(t->subchannel, 1);
	CHECK_EQ(t->adapter, 0);
	CHECK_EQ(host(t, summary)[0], 0);
	tc_free(t);
}

TEST(classic_and_adapter_indicators_exclude_each_other)
{
	struct tc *t = tc_new(2, 0);
	uint64_t summary = vdrv_alloc(&t->v->d, 1, 1), ind = vdrv_alloc(&t->v->d, 8, 8);
	uint64_t ind2 = vdrv_alloc(&t->v->d, 8, 8);

	negotiate(t, 0);
	CHECK_EQ(set_ind_adapter(t, summary, ind, 0, 3), 25);
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_IND, ind2), CCW_REJECT);
	/* new adapter indicators replace the old ones */
	CHECK_EQ(set_ind_adapter(t, summary, ind2, 8, 5), 25);
	CHECK_EQ(t->vc.ind_gpa, ind2);
	CHECK_EQ(t->vc.isc, 5);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_VDEV_RESET, false, NULL, 0, NULL), 0);

	CHECK_EQ(write_status(t, ACK | DRV), 1);
	write_features(t, V1);
	CHECK_EQ(write_status(t, ACK | DRV | FOK), 1);
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_IND, ind2), 8);
	CHECK_EQ(set_ind_adapter(t, summary, ind, 0, 3), CCW_REJECT);
	CHECK(!t->vc.thinint);
	CHECK_EQ(t->vc.ind_gpa, ind2);
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_IND, ind), 8);   /* classic again: fine */
	CHECK_EQ(t->vc.ind_gpa, ind);
	tc_free(t);
}

TEST(indicators_outside_ram_rejected)
{
	struct tc *t = tc_new(4, 0);
	uint64_t ok = vdrv_alloc(&t->v->d, 8, 8);

	negotiate(t, 0);
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_IND, 0), CCW_REJECT);        /* gpa 0: not RAM here */
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_IND, RAM_END - 4), CCW_REJECT);
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_IND, UINT64_MAX - 3), CCW_REJECT);
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_CONF_IND, RAM_END), CCW_REJECT);
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_CONF_IND, RAM_END - 7), CCW_REJECT);
	CHECK(!t->vc.ind);
	CHECK(!t->vc.conf_ind);
	/* summary outside; indicator area's last queue bit past RAM; a
	 * bit number so large that it wraps; an ISC that does not exist */
	CHECK_EQ(set_ind_adapter(t, RAM_END, ok, 0, 3), CCW_REJECT);
	CHECK_EQ(set_ind_adapter(t, ok, RAM_END - 1, 6, 3), CCW_REJECT);  /* bits 6..9 */
	CHECK_EQ(set_ind_adapter(t, ok, ok, UINT64_MAX - 1, 3), CCW_REJECT);
	CHECK_EQ(set_ind_adapter(t, ok, ok, (RAM_END - ok) * 8, 3), CCW_REJECT);
	CHECK_EQ(set_ind_adapter(t, ok, UINT64_MAX, 64, 3), CCW_REJECT);
	CHECK_EQ(set_ind_adapter(t, ok, ok, 0, 8), CCW_REJECT);
	CHECK(!t->vc.thinint);
	CHECK(!t->vc.ind);
	/* the last bytes of RAM are fine */
	CHECK_EQ(set_ind_adapter(t, RAM_END - 1, RAM_END - 1, 4, 7), 25); /* bits 4..7 */
	CHECK(t->vc.thinint);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_VDEV_RESET, false, NULL, 0, NULL), 0);
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_CONF_IND, RAM_END - 8), 8);
	tc_free(t);
}

TEST(indicators_fixed_after_driver_ok)
{
	struct tc *t = tc_new(1, 0);
	uint64_t summary = vdrv_alloc(&t->v->d, 1, 1), ind = vdrv_alloc(&t->v->d, 8, 8);
	uint64_t conf = vdrv_alloc(&t->v->d, 8, 8);

	negotiate(t, 0);
	CHECK_EQ(set_vq(t, 0, 16), 32);
	CHECK_EQ(write_status(t, ACK | DRV | FOK | DOK), 1);
	CHECK_EQ(set_ind_adapter(t, summary, ind, 0, 3), CCW_REJECT);
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_IND, ind), CCW_REJECT);
	CHECK(!t->vc.ind);
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_CONF_IND, conf), 8);
	tc_free(t);
}

TEST(vdev_reset_clears_status_and_indicators)
{
	struct tc *t = tc_new(1, 0);
	uint64_t summary = vdrv_alloc(&t->v->d, 1, 1), ind = vdrv_alloc(&t->v->d, 8, 8);
	uint64_t conf = vdrv_alloc(&t->v->d, 8, 8);
	unsigned resets;

	negotiate(t, 0);
	CHECK_EQ(set_ind_adapter(t, summary, ind, 0, 3), 25);
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_CONF_IND, conf), 8);
	CHECK_EQ(set_vq(t, 0, 16), 32);
	CHECK_EQ(write_status(t, ACK | DRV | FOK | DOK), 1);
	resets = t->v->resets;
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_VDEV_RESET, false, NULL, 0, NULL), 0);
	CHECK_EQ(t->v->resets, resets + 1);
	CHECK_EQ(t->v->stopped[0], 1);
	CHECK_EQ(read_status(t), 0);
	CHECK_EQ(t->v->dev.guest_features, 0);
	CHECK(!t->vc.thinint);
	CHECK(!t->vc.ind);
	CHECK(!t->vc.conf_ind);
	virtio_signal_queue(&t->v->dev, 0);
	virtio_config_changed(&t->v->dev);
	CHECK_EQ(t->adapter + t->subchannel, 0);
	CHECK_EQ(host(t, summary)[0], 0);
	CHECK_EQ(host(t, ind)[0], 0);
	CHECK_EQ(be64_load(host(t, conf)), 0);
	/* the revision is per enable, not per reset */
	CHECK_EQ(t->vc.revision, 2);
	CHECK_EQ(write_status(t, ACK), 1);
	/* and a status of 0 is the same reset */
	CHECK_EQ(set_ind(t, VIRTIO_CCW_CMD_SET_IND, ind), 8);
	CHECK_EQ(write_status(t, 0), 1);
	CHECK(!t->vc.ind);
	CHECK_EQ(t->v->resets, resets + 2);
	tc_free(t);
}

TEST(adapter_routes_through_kvm_binding)
{
	struct tc *t = tc_new_ops(2, 0, &kvm_irq);
	uint64_t summary = vdrv_alloc(&t->v->d, 1, 1), ind = vdrv_alloc(&t->v->d, 8, 8);

	negotiate(t, 0);
	CHECK_EQ(t->vc.irq_fd[0], -1);
	CHECK_EQ(set_ind_adapter(t, summary, ind, 8, 3), 25);
	CHECK_EQ(t->binds, 1);
	CHECK(t->vc.adapter_bound);
	CHECK_EQ(t->vc.summary_gpa, summary);
	CHECK_EQ(t->vc.ind_bit, 8);
	for (unsigned q = 0; q < 2; q++)
		CHECK_EQ(set_vq(t, q, 16), 32);
	CHECK_EQ(write_status(t, ACK | DRV | FOK | DOK), 1);
	/* KVM sets the bits: the device only writes the eventfd */
	virtio_signal_queue(&t->v->dev, 1);
	virtio_signal_queue(&t->v->dev, 1);
	CHECK_EQ(eventfd_count(t->efd[1]), 2);
	CHECK_EQ(eventfd_count(t->efd[0]), 0);
	CHECK_EQ(host(t, ind)[1], 0);
	CHECK_EQ(host(t, summary)[0], 0);
	CHECK_EQ(t->adapter, 0);
	/* reset: unbound once, software path from then on */
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_VDEV_RESET, false, NULL, 0, NULL), 0);
	CHECK_EQ(t->unbinds, 1);
	CHECK(!t->vc.adapter_bound);
	CHECK_EQ(t->vc.irq_fd[1], -1);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_VDEV_RESET, false, NULL, 0, NULL), 0);
	CHECK_EQ(t->unbinds, 1);
	/* a binding that fails: the device raises them itself */
	CHECK_EQ(write_status(t, ACK | DRV), 1);
	write_features(t, V1);
	CHECK_EQ(write_status(t, ACK | DRV | FOK), 1);
	t->bind_ret = -ENOSPC;
	CHECK_EQ(set_ind_adapter(t, summary, ind, 8, 3), 25);
	CHECK_EQ(t->binds, 2);
	CHECK(!t->vc.adapter_bound);
	CHECK_EQ(set_vq(t, 1, 16), 32);
	CHECK_EQ(write_status(t, ACK | DRV | FOK | DOK), 1);
	virtio_signal_queue(&t->v->dev, 1);
	CHECK_EQ(eventfd_count(t->efd[1]), 0);
	CHECK_EQ(host(t, ind)[1], 0x40);         /* bit 9 */
	CHECK_EQ(t->adapter, 1);
	CHECK_EQ(t->unbinds, 1);
	/* new indicators while bound: the old binding goes first */
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_VDEV_RESET, false, NULL, 0, NULL), 0);
	CHECK_EQ(write_status(t, ACK | DRV), 1);
	write_features(t, V1);
	CHECK_EQ(write_status(t, ACK | DRV | FOK), 1);
	t->bind_ret = 0;
	CHECK_EQ(set_ind_adapter(t, summary, ind, 0, 3), 25);
	CHECK_EQ(set_ind_adapter(t, summary, ind, 16, 3), 25);
	CHECK_EQ(t->binds, 4);
	CHECK_EQ(t->unbinds, 2);
	CHECK(t->vc.adapter_bound);
	/* the VM's teardown: unbind while the device exists, then free */
	t->vc.t.ops->unbind(&t->vc.t);
	CHECK_EQ(t->unbinds, 3);
	t->vc.t.ops->free(&t->vc.t);
	CHECK_EQ(t->frees, 1);
	CHECK_EQ(t->unbinds, 3);
	tc_free_rest(t);
}

TEST(unknown_commands_rejected)
{
	struct tc *t = tc_new(1, 0);
	static const uint8_t cmds[] = { 0x00, 0x01, 0x02, 0x14, 0x23, 0x42, 0x44, 0x63,
					0x82, 0x84, 0xff,
					/* the channel's own: never the device's */
					CCW_CMD_NOOP, CCW_CMD_BASIC_SENSE, CCW_CMD_TIC,
					CCW_CMD_SENSE_ID };
	uint8_t b[32] = { 0 };

	for (unsigned i = 0; i < sizeof(cmds); i++)
		CHECK_EQ(run(t, cmds[i], true, b, 32, NULL), CCW_REJECT);
	CHECK_EQ(set_rev(t, 2), 4);
	for (unsigned i = 0; i < sizeof(cmds); i++)
		CHECK_EQ(run(t, cmds[i], true, b, 32, NULL), CCW_REJECT);
	CHECK_EQ(read_status(t), 0);
	tc_free(t);
}

TEST(config_read_write_go_to_the_device)
{
	struct tc *t = tc_new(1, 0);
	uint8_t b[8];

	for (unsigned i = 0; i < 8; i++)
		t->v->config[i] = (uint8_t)(0xa0 + i);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_READ_CONF, false, b, 8, b), CCW_REJECT);  /* no revision */
	CHECK_EQ(set_rev(t, 2), 4);
	memset(b, 0, sizeof(b));
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_READ_CONF, false, b, 8, b), 8);
	for (unsigned i = 0; i < 8; i++)
		CHECK_EQ(b[i], 0xa0 + i);
	/* Linux reads offset + len from 0 */
	memset(b, 0, sizeof(b));
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_READ_CONF, false, b, 3, b), 3);
	CHECK_EQ(b[2], 0xa2);
	b[0] = 0x11; b[1] = 0x22; b[2] = 0x33; b[3] = 0x44;
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_WRITE_CONF, false, b, 4, NULL), 4);
	CHECK_EQ(t->v->config[0], 0x11);
	CHECK_EQ(t->v->config[3], 0x44);
	CHECK_EQ(t->v->config[4], 0xa4);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_READ_CONF, false, NULL, VIRTIO_CCW_CONFIG_MAX + 1, NULL),
		 CCW_PROGRAM_CHECK);
	CHECK_EQ(run(t, VIRTIO_CCW_CMD_READ_CONF, true, NULL, VIRTIO_CCW_CONFIG_MAX + 1, NULL),
		 VIRTIO_CCW_CONFIG_MAX);
	tc_free(t);
}

TEST(stats_name_the_subchannel)
{
	struct tc *t = tc_new(1, 0);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK(f);
	virtio_ccw_set_schid(&t->vc, 0x00010002);
	CHECK_STR(t->vc.t.name, "virtio-ccw on subchannel 0.0.0002");
	CHECK_EQ(set_rev(t, 2), 4);
	{
		struct json j_;

		json_init(&j_, f);
		json_obj_begin(&j_, NULL);
		t->vc.t.ops->stats_json(&t->vc.t, &j_);
		json_obj_end(&j_);
	}
	fclose(f);
	CHECK_STR(buf, "{\"schid\":\"0x00010002\",\"revision\":2,\"indicators\":\"none\","
		  "\"adapter_irqs\":0,\"subchannel_irqs\":0,\"irq_errors\":0,\"route_errors\":0}");
	free(buf);
	struct vtr_notify n = virtio_ccw_notify(0x00010002);
	CHECK_EQ(n.space, VM_IO_CCW);
	CHECK_EQ(n.addr, 0x00010002);
	CHECK_EQ(n.len, 8);
	CHECK(n.datamatch);
	tc_free(t);
}

/* ---- what the guest can make the host fail at, again and again --------- */

struct lines {
	unsigned n;
	char first[512];
};

static void record_line(void *opaque, int level, const char *msg)
{
	struct lines *l = opaque;

	(void)level;
	if (!l->n++)
		snprintf(l->first, sizeof(l->first), "%s", msg);
}

static char *stats_of(struct tc *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK(f);
	{
		struct json j_;

		json_init(&j_, f);
		json_obj_begin(&j_, NULL);
		t->vc.t.ops->stats_json(&t->vc.t, &j_);
		json_obj_end(&j_);
	}
	fclose(f);
	return buf;
}

TEST(failed_adapter_routes_are_logged_once_and_counted)
{
	struct tc *t = tc_new_ops(1, 0, &kvm_irq);
	uint64_t summary = vdrv_alloc(&t->v->d, 1, 1), ind = vdrv_alloc(&t->v->d, 8, 8);
	struct lines l = { 0 };
	struct log_sink sink = { record_line, &l };
	char *st;

	t->v->dev.log = &sink;
	t->bind_ret = -ENOSPC;
	/* A guest resetting and setting adapter indicators in a loop. */
	CHECK_EQ(set_rev(t, 2), 4);
	for (unsigned i = 0; i < 10; i++) {
		CHECK_EQ(write_status(t, ACK), 1);
		CHECK_EQ(write_status(t, ACK | DRV), 1);
		write_features(t, V1);
		CHECK_EQ(write_status(t, ACK | DRV | FOK), 1);
		CHECK_EQ(set_ind_adapter(t, summary, ind, 0, 3), 25);
		CHECK(!t->vc.adapter_bound);
		CHECK_EQ(run(t, VIRTIO_CCW_CMD_VDEV_RESET, false, NULL, 0, NULL), 0);
	}
	CHECK_EQ(t->binds, 10);
	CHECK_EQ(l.n, 1);
	CHECK(strstr(l.first, "cannot route adapter interrupts through KVM"));
	CHECK(strstr(l.first, strerror(ENOSPC)));
	CHECK(strstr(l.first, "route_errors in --stats"));
	st = stats_of(t);
	CHECK(strstr(st, "\"route_errors\":10"));
	CHECK(strstr(st, "\"irq_errors\":0"));
	free(st);
	t->vc.t.ops->free(&t->vc.t);
	tc_free_rest(t);
}

TEST(interrupts_that_cannot_be_injected_are_logged_once_per_kind_and_counted)
{
	struct tc *t = tc_new(1, 0);
	struct lines l = { 0 };
	struct log_sink sink = { record_line, &l };
	char *st;

	t->v->dev.log = &sink;
	virtio_ccw_set_schid(&t->vc, 0x00010003);
	/* The KVM binding's report, once an interrupt per completion. */
	for (unsigned i = 0; i < 1000; i++)
		virtio_ccw_fault(&t->vc, VIRTIO_CCW_FAULT_IO_IRQ, -EINVAL);
	CHECK_EQ(l.n, 1);
	CHECK(strstr(l.first, "virtio-ccw on subchannel 0.0.0003"));
	CHECK(strstr(l.first, "cannot inject the subchannel's I/O interrupt"));
	CHECK(strstr(l.first, strerror(EINVAL)));
	CHECK(strstr(l.first, "irq_errors in --stats"));
	/* Another kind is logged once of its own. */
	for (unsigned i = 0; i < 1000; i++)
		virtio_ccw_fault(&t->vc, VIRTIO_CCW_FAULT_ADAPTER_IRQ, -EBUSY);
	CHECK_EQ(l.n, 2);
	st = stats_of(t);
	CHECK(strstr(st, "\"irq_errors\":2000,\"route_errors\":0"));
	free(st);
	tc_free(t);
}

/* ---- snapshots ---------------------------------------------------------- */

#define T_SEC SNAP_TAG('T', 'S', 'T', ' ')

/* a's transport state saved (vtr_ops.save) and loaded into b (.load),
 * through a snapshot file: what load returned; its message in msg. */
static char msg[512];

/* The section in w (ended) loaded into b: what load returned, or
 * snap_done's error where it read the section short of its end. */
static int ccw_load_from(struct snap_w *w, struct tc *b)
{
	struct snap_sec sec;
	struct snap_r r;
	int ret;

	sec = snap_sec_open(w, T_SEC, 0, &r);
	ret = b->vc.t.ops->load(&b->vc.t, &r, msg, sizeof(msg));
	if (!ret)
		ret = snap_done(&r, msg, sizeof(msg));
	snap_sec_free(&sec);
	return ret;
}

static int ccw_round_trip(struct tc *a, struct tc *b)
{
	struct snap_w w;

	snap_w_init(&w);
	snap_begin(&w, T_SEC, 0);
	CHECK_EQ(a->vc.t.ops->save(&a->vc.t, &w, msg, sizeof(msg)), 0);
	snap_end(&w);
	return ccw_load_from(&w, b);
}

/* Fixed addresses in both devices' fake RAM (each has its own). */
#define T_SUMMARY (VNULL_RAM_GPA + 0x10000)
#define T_IND     (VNULL_RAM_GPA + 0x10040)
#define T_CONF    (VNULL_RAM_GPA + 0x10080)

TEST(a_snapshot_carries_the_revision_and_indicators_and_binds_them_again)
{
	struct tc *a = tc_new_ops(2, 0, &kvm_irq), *b = tc_new_ops(2, 0, &kvm_irq);

	virtio_ccw_set_schid(&a->vc, 0x00010003);
	virtio_ccw_set_schid(&b->vc, 0x00010003);
	negotiate(a, 0);
	CHECK_EQ(set_ind_adapter(a, T_SUMMARY, T_IND, 8, 3), 25);
	CHECK_EQ(set_ind(a, VIRTIO_CCW_CMD_SET_CONF_IND, T_CONF), 8);
	CHECK_EQ(ccw_round_trip(a, b), 0);
	CHECK_EQ(b->vc.revision, 2);
	CHECK(b->vc.thinint);
	CHECK_EQ(b->vc.summary_gpa, T_SUMMARY);
	CHECK_EQ(b->vc.ind_gpa, T_IND);
	CHECK_EQ(b->vc.ind_bit, 8);
	CHECK_EQ(b->vc.isc, 3);
	/* Routed through "KVM" again, as the driver's command had it. */
	CHECK_EQ(b->binds, 1);
	CHECK(b->vc.adapter_bound);
	CHECK_EQ(b->vc.irq_fd[1], b->efd[1]);
	/* The config indicator is b's own RAM at the same address. */
	virtio_config_changed(&b->v->dev);
	CHECK_EQ(host(b, T_CONF)[7], 0x01);
	CHECK_EQ(b->subchannel, 1);
	CHECK_EQ(host(a, T_CONF)[7], 0);
	/* A device that never set a revision or indicators comes back so. */
	tc_free(b);
	b = tc_new(2, 0);
	virtio_ccw_set_schid(&b->vc, 0x00010003);
	tc_free(a);
	a = tc_new(2, 0);
	virtio_ccw_set_schid(&a->vc, 0x00010003);
	CHECK_EQ(ccw_round_trip(a, b), 0);
	CHECK_EQ(b->vc.revision, -1);
	CHECK(!b->vc.ind);
	CHECK(!b->vc.conf_ind);
	tc_free(a);
	tc_free(b);
}

TEST(a_snapshot_with_indicators_outside_ram_or_another_subchannel_is_refused)
{
	struct tc *a = tc_new(2, 0), *b = tc_new(2, 0);

	virtio_ccw_set_schid(&a->vc, 0x00010001);
	virtio_ccw_set_schid(&b->vc, 0x00010002);
	negotiate(a, 0);
	CHECK_EQ(set_ind(a, VIRTIO_CCW_CMD_SET_IND, T_IND), 8);
	CHECK_EQ(ccw_round_trip(a, b), -EINVAL);
	CHECK(strstr(msg, "0x00010001 there, 0x00010002 here"));
	virtio_ccw_set_schid(&b->vc, 0x00010001);
	/* What the command would refuse, the snapshot's load refuses. */
	a->vc.ind_gpa = RAM_END - 4;
	CHECK_EQ(ccw_round_trip(a, b), -EINVAL);
	CHECK(strstr(msg, "outside guest RAM"));
	CHECK(strstr(msg, "damaged"));
	CHECK_EQ(b->vc.revision, -1);           /* nothing of it stayed */
	CHECK(!b->vc.ind);
	a->vc.ind_gpa = T_IND;
	a->vc.revision = 7;
	CHECK_EQ(ccw_round_trip(a, b), -EINVAL);
	CHECK(strstr(msg, "revision"));
	a->vc.revision = 2;
	CHECK_EQ(ccw_round_trip(a, b), 0);
	CHECK_EQ(b->vc.ind_gpa, T_IND);
	CHECK(!b->vc.thinint);
	tc_free(a);
	tc_free(b);
}

/* A section by hand: the subchannel, revision 2, indicators of `mode`
 * (classic at T_IND), the configuration indicator flag `conf`. */
static int ccw_load_raw(struct tc *b, uint8_t mode, uint8_t conf)
{
	struct snap_w w;

	snap_w_init(&w);
	snap_begin(&w, T_SEC, 0);
	snap_put_u32(&w, b->vc.schid);
	snap_put_u32(&w, 2);
	snap_put_u8(&w, mode);
	snap_put_u64(&w, T_IND);
	snap_put_u64(&w, 0);
	snap_put_u64(&w, 0);
	snap_put_u8(&w, 0);
	snap_put_u8(&w, conf);
	snap_put_u64(&w, T_CONF);
	snap_end(&w);
	return ccw_load_from(&w, b);
}

TEST(a_snapshot_with_no_such_kind_of_indicators_or_flag_is_refused)
{
	struct tc *b = tc_new(2, 0);

	virtio_ccw_set_schid(&b->vc, 0x00010001);
	CHECK_EQ(ccw_load_raw(b, 3, 0), -EINVAL);
	CHECK(strstr(msg, "no such kind of indicators"));
	CHECK_EQ(ccw_load_raw(b, 1, 2), -EINVAL);
	CHECK(strstr(msg, "flag neither 0 nor 1"));
	CHECK_EQ(b->vc.revision, -1);
	CHECK(!b->vc.ind && !b->vc.conf_ind);
	CHECK_EQ(ccw_load_raw(b, 1, 1), 0);
	CHECK_EQ(b->vc.ind_gpa, T_IND);
	CHECK(b->vc.conf_ind);
	tc_free(b);
}
