/* virtio-blk over the packed ring: the unchanged device code (blk_queue.c
 * uses only the virtq API) with a driver that negotiated
 * VIRTIO_F_RING_PACKED. Real io_uring on a temp file, no KVM. */
#include "tests/unit/disk_spec.h"
#include "tests/unit/check.h"
#include "tests/unit/vdrv.h"
#include "devices/virtio_blk.h"
#include "devices/blk_req.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define IMG_SIZE (1u << 20)
#define QSIZE 100               /* not a power of 2: packed allows it */

struct t {
	struct vdrv d;
	struct virtio_dev *dev;
	char path[64];
	int fd;
};

static uint8_t pattern(uint64_t off)
{
	return (uint8_t)(off * 13 + off / 512 + 5);
}

static void setup(struct t *t, bool ok)
{
	char spec[128], err[256];
	struct mvm_disk o;
	uint8_t *img = malloc(IMG_SIZE);

	check_need_io_uring();
	memset(t, 0, sizeof(*t));
	strcpy(t->path, "/tmp/mvm-test-pblk-XXXXXX");
	t->fd = mkstemp(t->path);
	CHECK(t->fd >= 0 && img);
	for (uint32_t i = 0; i < IMG_SIZE; i++)
		img[i] = pattern(i);
	CHECK_EQ(pwrite(t->fd, img, IMG_SIZE, 0), IMG_SIZE);
	free(img);
	snprintf(spec, sizeof(spec), "%s", t->path);
	CHECK_EQ(test_disk_parse(spec, 1, &o, err, sizeof(err)), 0);
	CHECK_EQ(vdrv_ram_init(&t->d, 0x1000, 16 << 20), 0);
	if (blk_dev_new(&o, &t->d.mem, &t->dev, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		CHECK(0);
	}
	CHECK_EQ(vdrv_attach(&t->d, t->dev), 0);
	CHECK_EQ(vdrv_negotiate(&t->d, VIRTIO_BIT(VIRTIO_F_VERSION_1) |
				VIRTIO_BIT(VIRTIO_F_RING_PACKED) |
				VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
				VIRTIO_BIT(VIRTIO_RING_F_INDIRECT_DESC)), 0);
	CHECK(t->d.features & VIRTIO_BIT(VIRTIO_F_RING_PACKED));
	CHECK_EQ(vdrv_queue_setup(&t->d, 0, QSIZE), 1);
	if (ok)
		vdrv_driver_ok(&t->d);
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

struct req {
	uint64_t hdr, data, st;
	int id;
};

static int post(struct t *t, struct req *r, uint32_t type, uint64_t sector, uint32_t len,
		bool indirect)
{
	struct vdrv_sg sg[3];
	uint8_t *h;

	r->hdr = vdrv_alloc(&t->d, 16, 16);
	r->data = vdrv_alloc(&t->d, len, 512);
	r->st = vdrv_alloc(&t->d, 1, 1);
	h = vdrv_host(&t->d, r->hdr);
	le32_store(h, type);
	le32_store(h + 4, 0);
	le64_store(h + 8, sector);
	*(uint8_t *)vdrv_host(&t->d, r->st) = 0xff;
	sg[0] = (struct vdrv_sg){ r->hdr, 16, false };
	sg[1] = (struct vdrv_sg){ r->data, len, type == VIRTIO_BLK_T_IN };
	sg[2] = (struct vdrv_sg){ r->st, 1, true };
	r->id = vdrv_add(&t->d, 0, sg, 3, indirect);
	return r->id;
}

static void wait_used(struct t *t, uint32_t *id, uint32_t *len)
{
	for (int i = 0; i < 50000; i++) {
		if (vdrv_get_used(&t->d, 0, id, len))
			return;
		usleep(100);
	}
	CHECK(!"no used descriptor within 5 s");
}

TEST(blk_read_and_write_over_packed_ring)
{
	struct t t;
	struct req w, r;
	uint32_t id, len;

	setup(&t, true);
	CHECK(t.dev->queues[0].vq.packed);
	CHECK(post(&t, &w, VIRTIO_BLK_T_OUT, 8, 4096, false) >= 0);
	memset(vdrv_host(&t.d, w.data), 0x5a, 4096);
	vdrv_kick(&t.d, 0);
	wait_used(&t, &id, &len);
	CHECK_EQ(id, w.id);
	CHECK_EQ(len, 1);
	CHECK_EQ(*(uint8_t *)vdrv_host(&t.d, w.st), VIRTIO_BLK_S_OK);
	/* read back through an indirect table, plus the untouched next sector */
	CHECK(post(&t, &r, VIRTIO_BLK_T_IN, 8, 4608, true) >= 0);
	/* Kick only when the device's event suppression asks for it (Linux):
	 * a device that is polling, or about to re-check, needs none. */
	if (vdrv_packed_kick_prepare(&t.d, 0))
		vdrv_kick(&t.d, 0);
	wait_used(&t, &id, &len);
	CHECK_EQ(id, r.id);
	CHECK_EQ(len, 4609);
	CHECK_EQ(*(uint8_t *)vdrv_host(&t.d, r.st), VIRTIO_BLK_S_OK);
	const uint8_t *p = vdrv_host(&t.d, r.data);
	for (unsigned i = 0; i < 4096; i++)
		CHECK_EQ(p[i], 0x5a);
	for (unsigned i = 4096; i < 4608; i++)
		CHECK_EQ(p[i], pattern(8 * 512 + i));
	teardown(&t);
}

TEST(blk_many_requests_in_flight_over_packed_ring)
{
	/* 90 reads at once (indirect: one slot each), then the ring is
	 * refilled as completions come back, several laps around it. */
	struct t t;
	struct req r[QSIZE];
	uint32_t id, len;
	unsigned posted = 0, done = 0;

	setup(&t, true);
	for (; posted < 90; posted++)
		CHECK(post(&t, &r[posted % QSIZE], VIRTIO_BLK_T_IN, posted % 2000, 512, true) >= 0);
	vdrv_kick(&t.d, 0);
	while (done < 1000) {
		wait_used(&t, &id, &len);
		CHECK(id < QSIZE);
		done++;
		CHECK_EQ(len, 513);
		/* refill while the ring has room (direct chains take 3 slots) */
		while (posted < 1000 && t.d.q[0].num_free >= 3) {
			struct req *n = &r[posted % QSIZE];
			CHECK(post(&t, n, VIRTIO_BLK_T_IN, posted % 2000, 512, posted % 3 != 0) >= 0);
			posted++;
			if (vdrv_packed_kick_prepare(&t.d, 0))
				vdrv_kick(&t.d, 0);
		}
	}
	CHECK_EQ(t.d.q[0].num_free, QSIZE);
	CHECK(!(vdrv_status(&t.d) & VIRTIO_CONFIG_S_NEEDS_RESET));
	teardown(&t);
}

TEST(blk_buffer_id_reused_while_in_flight_needs_reset)
{
	/* Two reads made available before DRIVER_OK, the second carrying the
	 * first one's buffer id: the first is in flight (host I/O) when the
	 * second is popped -> -EBUSY -> NEEDS_RESET, no crash, no hang. */
	struct t t;
	struct req a, b;

	setup(&t, false);
	CHECK(post(&t, &a, VIRTIO_BLK_T_IN, 0, 4096, false) >= 0);
	CHECK(post(&t, &b, VIRTIO_BLK_T_IN, 8, 4096, false) >= 0);
	CHECK(a.id != b.id);
	le16_store(vdrv_host(&t.d, t.d.q[0].desc + 16 * 5 + 12), (uint16_t)a.id);  /* b's last */
	vdrv_driver_ok(&t.d);
	for (int i = 0; i < 5000 && !(vdrv_status(&t.d) & VIRTIO_CONFIG_S_NEEDS_RESET); i++)
		usleep(1000);
	CHECK(vdrv_status(&t.d) & VIRTIO_CONFIG_S_NEEDS_RESET);
	teardown(&t);
}

TEST(blk_broken_packed_chain_needs_reset)
{
	/* A chain that says NEXT around the whole ring. */
	struct t t;
	uint64_t a;

	setup(&t, false);
	a = vdrv_alloc(&t.d, 16, 16);
	for (uint16_t i = QSIZE; i-- > 0;)
		vdrv_pdesc_set(&t.d, 0, i, a, 16, 0, VRING_DESC_F_NEXT | (1u << VRING_PACKED_DESC_F_AVAIL));
	vdrv_driver_ok(&t.d);
	for (int i = 0; i < 5000 && !(vdrv_status(&t.d) & VIRTIO_CONFIG_S_NEEDS_RESET); i++)
		usleep(1000);
	CHECK(vdrv_status(&t.d) & VIRTIO_CONFIG_S_NEEDS_RESET);
	teardown(&t);
}
