/* A thread-less virtio test device for the core/transport unit tests: it
 * records queue_start/stop/reset calls and lets the test itself act as the
 * queue owner (calling virtq_pop/push directly). 8 bytes of config space. */
#ifndef MVM_TESTS_VNULLDEV_H
#define MVM_TESTS_VNULLDEV_H

#include "tests/unit/check.h"
#include "tests/unit/vdrv.h"

struct vnull {
	struct virtio_dev dev;
	struct vdrv d;
	uint64_t features;          /* device-specific features offered */
	int start_ret;
	unsigned started[VIRTIO_MAX_QUEUES], stopped[VIRTIO_MAX_QUEUES], resets;
	/* queues_stopping calls, and how many queue_stops came before the last */
	unsigned stopping, stops_before_stopping;
	uint8_t config[8];
	/* order check: a queue_stop must come before ring state is cleared */
	bool ready_at_stop;
	/* queue_held: 1 + the id of the buffer queue q holds unstarted, 0: none */
	unsigned held[VIRTIO_MAX_QUEUES];
};

static uint64_t vnull_features(const struct virtio_dev *dev)
{
	return ((const struct vnull *)dev->priv)->features;
}

static void vnull_config_read(struct virtio_dev *dev, uint64_t off, uint8_t *data, unsigned len)
{
	struct vnull *v = dev->priv;

	if (off < sizeof(v->config) && len <= sizeof(v->config) - off)
		memcpy(data, v->config + off, len);
}

static void vnull_config_write(struct virtio_dev *dev, uint64_t off, const uint8_t *data,
			       unsigned len)
{
	struct vnull *v = dev->priv;

	if (off < sizeof(v->config) && len <= sizeof(v->config) - off)
		memcpy(v->config + off, data, len);
}

static int vnull_queue_start(struct virtio_dev *dev, unsigned q)
{
	struct vnull *v = dev->priv;

	if (v->start_ret)
		return v->start_ret;
	v->started[q]++;
	return 0;
}

static void vnull_queue_stop(struct virtio_dev *dev, unsigned q)
{
	struct vnull *v = dev->priv;

	v->stopped[q]++;
	v->ready_at_stop = dev->queues[q].vq.ready;
}

static void vnull_queues_stopping(struct virtio_dev *dev)
{
	struct vnull *v = dev->priv;
	unsigned q;

	v->stopping++;
	v->stops_before_stopping = 0;
	for (q = 0; q < VIRTIO_MAX_QUEUES; q++)
		v->stops_before_stopping += v->stopped[q];
}

static void vnull_reset(struct virtio_dev *dev)
{
	((struct vnull *)dev->priv)->resets++;
}

static int vnull_queue_held(struct virtio_dev *dev, unsigned q)
{
	return (int)((struct vnull *)dev->priv)->held[q] - 1;
}

static const struct virtio_device_ops vnull_ops = {
	.queue_held = vnull_queue_held,
	.name = "virtio-null",
	.device_id = 0x7f,
	.features = vnull_features,
	.config_read = vnull_config_read,
	.config_write = vnull_config_write,
	.queue_start = vnull_queue_start,
	.queue_stop = vnull_queue_stop,
	.queues_stopping = vnull_queues_stopping,
	.reset = vnull_reset,
};

#define VNULL_RAM_GPA  0x10000ULL
#define VNULL_RAM_SIZE (1ULL << 20)
#define VNULL_QMAX     256

/* Fake RAM at [64 KiB, 1 MiB + 64 KiB): gpa 0 is not RAM. */
static inline struct vnull *vnull_new(unsigned nq, uint64_t features)
{
	struct vnull *v = calloc(1, sizeof(*v));

	CHECK(v);
	v->features = features;
	CHECK_EQ(vdrv_ram_init(&v->d, VNULL_RAM_GPA, VNULL_RAM_SIZE), 0);
	CHECK_EQ(virtio_dev_init(&v->dev, &vnull_ops, v, &v->d.mem, nq, VNULL_QMAX), 0);
	CHECK_EQ(vdrv_attach(&v->d, &v->dev), 0);
	return v;
}

/* Negotiated, queue 0 of size qsize set up, DRIVER_OK. */
static inline struct vnull *vnull_running(unsigned nq, uint16_t qsize, uint64_t want)
{
	struct vnull *v = vnull_new(nq, 0);

	CHECK_EQ(vdrv_negotiate(&v->d, want | VIRTIO_BIT(VIRTIO_F_VERSION_1)), 0);
	for (unsigned q = 0; q < nq; q++)
		CHECK_EQ(vdrv_queue_setup(&v->d, q, qsize), 1);
	vdrv_driver_ok(&v->d);
	CHECK(vdrv_status(&v->d) & VIRTIO_CONFIG_S_DRIVER_OK);
	return v;
}

static inline void vnull_free(struct vnull *v)
{
	virtio_dev_destroy(&v->dev);
	vdrv_detach(&v->d);
	free(v->d.ram);
	free(v);
}

#endif
