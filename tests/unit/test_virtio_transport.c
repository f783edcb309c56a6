/* The shared transport helper (devices/virtio_transport.c), driven by a
 * made-up third transport that has nothing but its vtr_ops: what mmio and
 * pci get from it (status reset order, kicks, bad-access logging, notify
 * unwinding, stop/destroy order, the stats shape) works for any transport. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

#include "devices/virtio_transport.h"
#include "tests/unit/check.h"
#include "vmm/base/json.h"
#include "tests/unit/vnulldev.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"

/* What the fake transport saw, in order: "r" reset, "s" stop, "u" unbind,
 * "f" free; plus the device's own "Q" queue_stop (via vnull counters). */
struct ttr {
	struct vtr t;
	char trace[32];
	struct vnull *v;
	unsigned queue_stops_at_reset;  /* vnull stop count when ops->reset ran */
};

static void trace(struct ttr *x, char c)
{
	size_t n = strlen(x->trace);

	if (n + 1 < sizeof(x->trace))
		x->trace[n] = c;
}

static void ttr_reset(struct vtr *t)
{
	struct ttr *x = container_of(t, struct ttr, t);

	x->queue_stops_at_reset = x->v->stopped[0];
	trace(x, 'r');
}

static void ttr_stop(struct vtr *t)
{
	trace(container_of(t, struct ttr, t), 's');
}

static void ttr_unbind(struct vtr *t)
{
	trace(container_of(t, struct ttr, t), 'u');
}

static void ttr_stats(struct vtr *t, struct json *j)
{
	(void)t;
	json_u64(j, "doorbells", 7);
}

static unsigned ttr_freed;

static void ttr_free(struct vtr *t)
{
	struct ttr *x = container_of(t, struct ttr, t);

	trace(x, 'f');
	vtr_destroy(t);
	ttr_freed++;
}

static const struct vtr_ops ttr_ops = {
	.kind = "virtio-test",
	.reset = ttr_reset,
	.stop = ttr_stop,
	.unbind = ttr_unbind,
	.stats_json = ttr_stats,
	.free = ttr_free,
};

static void ttr_signal_queue(struct virtio_dev *dev, unsigned q)
{
	(void)dev;
	(void)q;
}

static void ttr_signal_config(struct virtio_dev *dev)
{
	(void)dev;
}

static const struct virtio_transport_ops ttr_tops = {
	.signal_queue = ttr_signal_queue,
	.signal_config = ttr_signal_config,
};

/* A vnull device on the fake transport (not on virtio-mmio). */
static struct ttr *ttr_new(unsigned nq)
{
	struct ttr *x = calloc(1, sizeof(*x));
	struct vnull *v = calloc(1, sizeof(*v));

	CHECK(x && v);
	CHECK_EQ(vdrv_ram_init(&v->d, VNULL_RAM_GPA, VNULL_RAM_SIZE), 0);
	CHECK_EQ(virtio_dev_init(&v->dev, &vnull_ops, v, &v->d.mem, nq, VNULL_QMAX), 0);
	CHECK_EQ(vtr_init(&x->t, &ttr_ops, &v->dev, &ttr_tops, x), 0);
	CHECK(v->dev.transport == x);
	CHECK(v->dev.tops == &ttr_tops);
	x->v = v;
	return x;
}

static void ttr_drop(struct ttr *x)
{
	struct vnull *v = x->v;

	virtio_dev_destroy(&v->dev);
	free(v->d.ram);
	free(v);
	free(x);
}

/* Drive the device to DRIVER_OK with queue 0 running, through the helper. */
static void ttr_run(struct ttr *x)
{
	struct virtio_dev *dev = &x->v->dev;
	struct virtq *vq = &dev->queues[0].vq;

	vtr_set_status(&x->t, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	vtr_set_status(&x->t, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	virtio_write_features(dev, 1, 1);       /* VERSION_1 */
	vtr_set_status(&x->t, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
			      VIRTIO_CONFIG_S_FEATURES_OK);
	vq->size = 16;
	vq->desc_gpa = VNULL_RAM_GPA;
	vq->driver_gpa = VNULL_RAM_GPA + 0x1000;
	vq->device_gpa = VNULL_RAM_GPA + 0x2000;
	CHECK_EQ(virtio_queue_set_ready(dev, 0, true), 0);
	vtr_set_status(&x->t, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
			      VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
	CHECK_EQ(x->v->started[0], 1);
}

TEST(status_zero_resets_device_then_transport_registers)
{
	struct ttr *x = ttr_new(1);

	ttr_run(x);
	vtr_set_status(&x->t, 0);
	CHECK_STR(x->trace, "r");
	/* The queue was stopped before the transport's registers were reset. */
	CHECK_EQ(x->queue_stops_at_reset, 1);
	CHECK_EQ(x->v->resets, 1);
	CHECK_EQ(virtio_get_status(&x->v->dev), 0);
	CHECK(!x->v->dev.queues[0].vq.ready);
	ttr_drop(x);
}

TEST(status_nonzero_never_resets_transport)
{
	struct ttr *x = ttr_new(1);

	vtr_set_status(&x->t, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	vtr_set_status(&x->t, VIRTIO_CONFIG_S_FAILED);
	CHECK_STR(x->trace, "");
	ttr_drop(x);
}

TEST(kick_signals_the_queue_eventfd_and_ignores_bad_index)
{
	struct ttr *x = ttr_new(2);
	eventfd_t n;

	vtr_kick(&x->t, 1);
	vtr_kick(&x->t, 2);
	vtr_kick(&x->t, 1ULL << 32);
	CHECK_EQ(eventfd_read(x->v->dev.queues[0].kick_fd, &n), -1);   /* EAGAIN */
	CHECK_EQ(eventfd_read(x->v->dev.queues[1].kick_fd, &n), 0);
	CHECK_EQ(n, 1);
	ttr_drop(x);
}

TEST(guest_mistakes_logged_once_per_kind_and_device_then_counted)
{
	struct ttr *x = ttr_new(1);
	struct ttr *y = ttr_new(1);
	struct check_log cl = { 0 };
	struct log_sink sink = { .fn = check_log_line, .opaque = &cl };

	x->v->dev.log = y->v->dev.log = &sink;
	snprintf(x->t.name, sizeof(x->t.name), "virtio-test 0.0.0001");
	vtr_bad_access(&x->t, "read", "register", 0x12, 2, "registers are 64-bit");
	CHECK_STR(cl.last, "virtio-null (virtio-test 0.0.0001): driver made a 2-byte read at "
		  "register offset 0x12; ignored (registers are 64-bit) (the first of its kind "
		  "on this device: the rest are only counted, as guest_errors in --stats)");
	vtr_bad_access(&x->t, "write", "register", 0x13, 1, "registers are 64-bit");
	CHECK_EQ(cl.lines, 1);
	CHECK_EQ(cl.level, LOG_WARNING);
	CHECK_EQ(x->v->dev.guest_errors, 2);
	vtr_bad_access(&y->t, "write", "register", 0x13, 1, "registers are 64-bit");
	CHECK_EQ(cl.lines, 2);     /* another device: its own message */
	virtio_guest_warn(&x->v->dev, VIRTIO_GW_RING, "queue 0: broken");
	CHECK_EQ(cl.lines, 3);     /* another kind: its own message */
	virtio_guest_warn(&x->v->dev, VIRTIO_GW_RING, "queue 0: broken");
	CHECK_EQ(cl.lines, 3);
	CHECK_EQ(x->v->dev.guest_errors, 4);
	ttr_drop(x);
	ttr_drop(y);
}

TEST(notify_bind_failure_leaves_nothing_bound)
{
	static struct vm vm;
	struct ttr *x = ttr_new(3);

	vm.vm_fd = -1;          /* no KVM: the first KVM_IOEVENTFD fails */
	vtr_attach(&x->t, &vm);
	CHECK(x->v->dev.log == &vm.log);
	CHECK(vtr_notify_bind(&x->t, &(struct vtr_notify){
		.space = VM_IO_CCW, .addr = 0x10000, .len = 8, .datamatch = true }) < 0);
	CHECK_EQ(x->t.notify_bound, 0);
	vtr_notify_unbind(&x->t);               /* nothing bound: no-op */
	CHECK_EQ(x->t.notify_bound, 0);
	ttr_drop(x);
}

TEST(abort_stops_unbinds_and_gives_the_device_back)
{
	static struct vm vm;
	struct ttr *x = ttr_new(1);
	struct vnull *v = x->v;

	vtr_attach(&x->t, &vm);
	ttr_freed = 0;
	vtr_abort(&x->t);
	CHECK_STR(x->trace, "suf");
	CHECK_EQ(ttr_freed, 1);
	CHECK(v->dev.tops == NULL && v->dev.transport == NULL);
	x->v = v;
	ttr_drop(x);
}

TEST(vm_stops_transport_then_queues_and_destroys_in_order)
{
	static struct vm vm;
	struct ttr *x = ttr_new(1);
	struct vnull *v = x->v;

	vtr_attach(&x->t, &vm);
	CHECK_EQ(vtr_register(&x->t), 0);
	CHECK_EQ(vm.ndevices, 1);
	ttr_run(x);
	vm.devices[0].ops->stop(vm.devices[0].dev);
	CHECK_STR(x->trace, "s");
	CHECK_EQ(v->stopped[0], 1);             /* the queue stopped after the transport */
	ttr_freed = 0;
	/* destroy: unbind, then the device (vnull has no destroy: it stays ours),
	 * then the transport. */
	vm.devices[0].ops->destroy(vm.devices[0].dev);
	CHECK_STR(x->trace, "suf");
	CHECK_EQ(ttr_freed, 1);
	CHECK(v->dev.queues == NULL);           /* virtio_dev_destroy ran */
	free(v->d.ram);
	free(v);
	free(x);
}

TEST(stats_have_one_shape_transport_fields_then_device)
{
	static struct vm vm;
	struct ttr *x = ttr_new(1);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	vtr_attach(&x->t, &vm);
	vm.ndevices = 0;
	CHECK_EQ(vtr_register(&x->t), 0);
	vtr_bad_access(&x->t, "read", "register", 0, 1, "none");
	{
		struct json j_;

		json_init(&j_, f);
		vm.devices[0].ops->stats_json(vm.devices[0].dev, &j_);
	}
	fclose(f);
	CHECK_STR(buf, "{\"transport\":\"virtio-test\",\"guest_errors\":1,\"doorbells\":7,"
		  "\"device\":{\"kind\":\"virtio-null\"}}");
	free(buf);
	ttr_drop(x);
}
