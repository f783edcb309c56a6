/* A virtio-ccw device reset while its queue thread completes requests and
 * raises classic-indicator interrupts, as a guest can force it: the real
 * channel subsystem (arch/s390/css.c, KVM-free, linked on every
 * architecture), the real virtio-ccw transport, a virtio-blk device with
 * its real queue thread and io_uring (the null backend: NOPs, so requests
 * complete as fast as the thread can take them). A driver thread keeps the
 * ring full and kicks; the "vCPU" (the test's main thread) resets the
 * device with a channel program (VDEV_RESET, WRITE_STATUS 0) or disables
 * the subchannel (MSCH), each of which stops the queue thread while the
 * channel subsystem's lock is held, and sets the device up again.
 *
 * The queue thread's interrupt reaches css_notify(). If that waited for
 * the channel subsystem's lock, the vCPU holding it would wait for the
 * queue thread forever: a watchdog fails the case when a reset does not
 * finish in time. Needs io_uring: skipped under qemu-user. */
#include "tests/unit/disk_spec.h"
#include "arch/s390/css.h"
#include "devices/blk_queue.h"
#include "devices/virtio_blk.h"
#include "devices/virtio_ccw.h"
#include "tests/unit/blk_null.h"
#include "tests/unit/check.h"
#include "tests/unit/vdrv.h"
#include "vmm/base/byteorder.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define RAM_GPA   0x100000ULL
#define RAM_SIZE  (4ULL << 20)
#define ORB       (RAM_GPA + 0x0000)
#define IRB       (RAM_GPA + 0x0100)
#define SCHIB     (RAM_GPA + 0x0200)
#define PROG      (RAM_GPA + 0x1000)    /* the channel program's CCWs */
#define PAYLOAD   (RAM_GPA + 0x2000)    /* their data areas, 64 bytes each */
#define IND       (RAM_GPA + 0x3000)    /* classic queue indicators */
#define CONF_IND  (RAM_GPA + 0x3008)
#define DESC      (RAM_GPA + 0x4000)
#define AVAIL     (RAM_GPA + 0x5000)
#define USED      (RAM_GPA + 0x6000)
#define REQ_HDR   (RAM_GPA + 0x8000)
#define REQ_ST    (RAM_GPA + 0x8100)
#define REQ_DATA  (RAM_GPA + 0x9000)
#define QSIZE     64
#define SCH0      css_schid(0)
#define ISC       3

/* How many resets of each kind, and how long one may take. */
#define ROUNDS         300
#define WATCHDOG_MS    10000

struct rt {
	struct vdrv d;                  /* fake RAM and the driver's ring state */
	struct css css;
	struct virtio_dev *dev;
	struct virtio_ccw vc;
	struct s390_vmem vm;
	char path[64];
	bool need_rev;                  /* the subchannel was (re)enabled */
	unsigned io_irqs;               /* css interrupts: with the css lock held */
	unsigned long notified;         /* atomic: classic-indicator interrupts raised */
	/* driver thread */
	pthread_t drv;
	bool drv_stop;                  /* atomic */
	unsigned long completed;        /* atomic: used entries the driver took */
	/* watchdog */
	pthread_t wd;
	int wd_efd;
	unsigned progress;              /* atomic: resets done */
	const char *doing;              /* atomic: the reset in progress */
};

/* KVM's MEM_OP, faked: logical = absolute, inside the fake RAM. */
static int vm_read(void *opaque, uint64_t addr, unsigned ar, void *buf, uint32_t len)
{
	struct rt *t = opaque;
	const void *p = gmem_ptr(&t->d.mem, addr, len);

	(void)ar;
	CHECK(p);
	memcpy(buf, p, len);
	return 0;
}

static int vm_write(void *opaque, uint64_t addr, unsigned ar, const void *buf, uint32_t len)
{
	struct rt *t = opaque;
	void *p = gmem_ptr(&t->d.mem, addr, len);

	(void)ar;
	CHECK(p);
	memcpy(p, buf, len);
	return 0;
}

static void on_io(void *opaque, unsigned schno, uint32_t intparm, unsigned isc)
{
	struct rt *t = opaque;

	(void)schno;
	(void)intparm;
	(void)isc;
	t->io_irqs++;                   /* css lock held: no atomics needed */
}

/* The KVM binding's part, as arch/s390/ccw.c does it: classic indicators
 * and config changes make the subchannel status-pending. */
static void irq_adapter(void *opaque, uint8_t isc)
{
	(void)opaque;
	(void)isc;
	CHECK(!"no adapter indicators in this test");
}

static void irq_subchannel(void *opaque)
{
	struct rt *t = opaque;

	__atomic_fetch_add(&t->notified, 1, __ATOMIC_RELAXED);
	css_notify(&t->css, 0);
}

static const struct virtio_ccw_irq_ops irq_ops = {
	.adapter = irq_adapter,
	.subchannel = irq_subchannel,
	.free = NULL,
};

static uint8_t *ram(struct rt *t, uint64_t gpa)
{
	return vdrv_host(&t->d, gpa);
}

static int insn(struct rt *t, unsigned op, uint64_t addr)
{
	return css_instruction(&t->css, &t->vm, op, SCH0, addr, 0);
}

/* TSCH until no status is pending (the guest's interrupt handler). */
static void drain_status(struct rt *t)
{
	int r;

	do
		r = insn(t, CSS_OP_TSCH, IRB);
	while (r == 0);
	CHECK_EQ(r, 1);
}

/* MSCH: enabled with ISC 3, or disabled; status pending first goes
 * through TSCH, as Linux's cio does. */
static void modify(struct rt *t, bool enable)
{
	uint8_t *s = ram(t, SCHIB);
	int r;

	for (;;) {
		memset(s, 0, CSS_SCHIB_LEN);
		be16_store(s + 4, enable ? (uint16_t)(0x0080 | ISC << 11) : 0);
		s[8] = 0x80;
		r = insn(t, CSS_OP_MSCH, SCHIB);
		if (r != 1)
			break;
		drain_status(t);
	}
	CHECK_EQ(r, 0);
	if (enable)
		t->need_rev = true;
}

/* A channel program being built at PROG, data areas at PAYLOAD. */
struct prog {
	struct rt *t;
	unsigned n;
};

static void ccw(struct prog *p, uint8_t cmd, const void *data, uint16_t len)
{
	uint8_t *w = ram(p->t, PROG + 8ULL * p->n);
	uint64_t area = PAYLOAD + 64ULL * p->n;

	CHECK(len <= 64 && p->n < 64);
	if (len)
		memcpy(ram(p->t, area), data, len);
	if (p->n)
		w[-7] |= CCW_FLAG_CC;   /* chain the previous CCW to this one */
	w[0] = cmd;
	w[1] = 0;
	be16_store(w + 2, len);
	be32_store(w + 4, (uint32_t)area);
	p->n++;
}

/* SSCH of the program (format-1 CCWs), then TSCH: the program must end
 * with channel end and device end, no check. */
static void start(struct prog *p)
{
	struct rt *t = p->t;
	uint8_t *o = ram(t, ORB), *irb = ram(t, IRB);
	int r;

	memset(o, 0, 12);
	be32_store(o, 0x1234abcd);
	be16_store(o + 4, 0x0080);
	o[6] = 0xff;
	be32_store(o + 8, (uint32_t)PROG);
	/* An unsolicited status (an indicator interrupt) may be pending. */
	while ((r = insn(t, CSS_OP_SSCH, ORB)) == 1)
		drain_status(t);
	CHECK_EQ(r, 0);
	CHECK_EQ(insn(t, CSS_OP_TSCH, IRB), 0);
	CHECK_EQ(irb[9], 0);                                    /* channel status */
	CHECK_EQ(irb[8], SCSW_DSTAT_CE | SCSW_DSTAT_DE);        /* no unit check */
}

static void cmd_u8(struct prog *p, uint8_t cmd, uint8_t v)
{
	ccw(p, cmd, &v, 1);
}

static void cmd_u64(struct prog *p, uint8_t cmd, uint64_t v)
{
	uint8_t b[8];

	be64_store(b, v);
	ccw(p, cmd, b, 8);
}

static void cmd_feat(struct prog *p, uint8_t index, uint32_t bits)
{
	uint8_t b[5];

	le32_store(b, bits);
	b[4] = index;
	ccw(p, VIRTIO_CCW_CMD_WRITE_FEAT, b, 5);
}

/* Linux's virtio_ccw probe in one program: revision (after an enable),
 * status, features (VERSION_1 only), classic indicators, queue 0,
 * DRIVER_OK. The ring is laid out afresh first. */
static void set_up(struct rt *t)
{
	struct vdrv_queue *q = &t->d.q[0];
	struct prog p = { t, 0 };
	uint8_t vq[32] = { 0 };

	memset(ram(t, DESC), 0, 0x3000);
	memset(q, 0, sizeof(*q));
	q->size = QSIZE;
	q->num_free = QSIZE;
	for (unsigned i = 0; i < QSIZE; i++)
		q->free_next[i] = (uint16_t)(i + 1);
	q->desc = DESC;
	q->avail = AVAIL;
	q->used = USED;
	if (t->need_rev) {
		uint8_t rev[4] = { 0, 1, 0, 0 };

		ccw(&p, VIRTIO_CCW_CMD_SET_VIRTIO_REV, rev, 4);
		t->need_rev = false;
	}
	cmd_u8(&p, VIRTIO_CCW_CMD_WRITE_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	cmd_u8(&p, VIRTIO_CCW_CMD_WRITE_STATUS,
	       VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	cmd_feat(&p, 0, 0);
	cmd_feat(&p, 1, 1);                     /* VIRTIO_F_VERSION_1 */
	cmd_u8(&p, VIRTIO_CCW_CMD_WRITE_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE |
	       VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK);
	cmd_u64(&p, VIRTIO_CCW_CMD_SET_IND, IND);
	cmd_u64(&p, VIRTIO_CCW_CMD_SET_CONF_IND, CONF_IND);
	be64_store(vq, DESC);
	be16_store(vq + 12, 0);
	be16_store(vq + 14, QSIZE);
	be64_store(vq + 16, AVAIL);
	be64_store(vq + 24, USED);
	ccw(&p, VIRTIO_CCW_CMD_SET_VQ, vq, 32);
	cmd_u8(&p, VIRTIO_CCW_CMD_WRITE_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE |
	       VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
	start(&p);
	CHECK(t->dev->queues[0].started);
}

/* One 4 KiB read (header, data, status); all share their buffers: the
 * null backend never touches the data. */
static int post_read(struct rt *t)
{
	const struct vdrv_sg sg[3] = {
		{ REQ_HDR, 16, false }, { REQ_DATA, 4096, true }, { REQ_ST, 1, true },
	};

	return vdrv_add(&t->d, 0, sg, 3, false);
}

/* The guest's driver: keep the ring full, take what completes, kick. */
static void *driver(void *arg)
{
	struct rt *t = arg;

	while (!__atomic_load_n(&t->drv_stop, __ATOMIC_ACQUIRE)) {
		uint32_t id, len;
		bool any = false;

		while (vdrv_get_used(&t->d, 0, &id, &len)) {
			__atomic_fetch_add(&t->completed, 1, __ATOMIC_RELAXED);
			any = true;
		}
		while (post_read(t) >= 0)
			any = true;
		if (any)
			vtr_kick(&t->vc.t, 0);
		else
			usleep(20);
	}
	return NULL;
}

static void driver_start(struct rt *t)
{
	__atomic_store_n(&t->drv_stop, false, __ATOMIC_RELEASE);
	CHECK_EQ(pthread_create(&t->drv, NULL, driver, t), 0);
}

static void driver_stop(struct rt *t)
{
	__atomic_store_n(&t->drv_stop, true, __ATOMIC_RELEASE);
	CHECK_EQ(pthread_join(t->drv, NULL), 0);
}

/* Fails the case (exit 1, from this thread: the others may be stuck)
 * when no reset finished within WATCHDOG_MS. */
static void *watchdog(void *arg)
{
	struct rt *t = arg;
	unsigned last = __atomic_load_n(&t->progress, __ATOMIC_ACQUIRE);
	struct pollfd p = { .fd = t->wd_efd, .events = POLLIN };

	while (poll(&p, 1, WATCHDOG_MS) == 0) {
		unsigned now = __atomic_load_n(&t->progress, __ATOMIC_ACQUIRE);

		if (now == last) {
			fprintf(stderr, "%s did not finish within %d ms (after %u resets): the "
				"vCPU and the queue thread are deadlocked\n",
				__atomic_load_n(&t->doing, __ATOMIC_ACQUIRE), WATCHDOG_MS, now);
			_exit(1);
		}
		last = now;
	}
	return NULL;
}

static struct rt *rt_new(void)
{
	struct rt *t = calloc(1, sizeof(*t));
	char spec[128], err[256];
	struct mvm_disk o;
	int fd;

	check_need_io_uring();
	CHECK(t);
	strcpy(t->path, "/tmp/mvm-test-ccw-race-XXXXXX");
	fd = mkstemp(t->path);
	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, 1 << 20), 0);
	close(fd);
	snprintf(spec, sizeof(spec), "%s", t->path);
	CHECK_EQ(test_disk_parse(spec, 1, &o, err, sizeof(err)), 0);
	CHECK_EQ(vdrv_ram_init(&t->d, RAM_GPA, RAM_SIZE), 0);
	if (blk_dev_new_backend(&o, &t->d.mem, &blk_null_backend, NULL, &t->dev, err,
				sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		CHECK(0);
	}
	CHECK_EQ(virtio_ccw_init(&t->vc, t->dev, &t->d.mem, &irq_ops, t), 0);
	/* As the VM's start does: the device's threads, parked until DRIVER_OK. */
	CHECK_EQ(virtio_dev_launch(t->dev), 0);
	CHECK_EQ(css_init(&t->css, &t->d.mem, on_io, t), 0);
	CHECK_EQ(css_attach(&t->css, &virtio_ccw_dev_ops, &t->vc, VIRTIO_CCW_CU_TYPE,
			    virtio_ccw_cu_model(&t->vc)), 0);
	t->vm = (struct s390_vmem){ vm_read, vm_write, t };
	t->doing = "setting up";
	t->wd_efd = eventfd(0, EFD_CLOEXEC);
	CHECK(t->wd_efd >= 0);
	CHECK_EQ(pthread_create(&t->wd, NULL, watchdog, t), 0);
	modify(t, true);
	return t;
}

static void rt_free(struct rt *t)
{
	CHECK_EQ(eventfd_write(t->wd_efd, 1), 0);
	CHECK_EQ(pthread_join(t->wd, NULL), 0);
	close(t->wd_efd);
	virtio_dev_destroy(t->dev);
	virtio_ccw_destroy(&t->vc);
	css_fini(&t->css);
	free(t->d.ram);
	unlink(t->path);
	free(t);
}

enum reset_kind { VDEV_RESET, STATUS_0, DISABLE, KINDS };

static const char *const kind_names[KINDS] = {
	"a VDEV_RESET channel program", "a WRITE_STATUS 0 channel program",
	"an MSCH that disables the subchannel",
};

/* Reset the running device one way; the queue thread must be stopped. */
static void reset(struct rt *t, enum reset_kind k)
{
	struct prog p = { t, 0 };

	__atomic_store_n(&t->doing, kind_names[k], __ATOMIC_RELEASE);
	switch (k) {
	case VDEV_RESET:
		ccw(&p, VIRTIO_CCW_CMD_VDEV_RESET, NULL, 0);
		start(&p);
		break;
	case STATUS_0:
		cmd_u8(&p, VIRTIO_CCW_CMD_WRITE_STATUS, 0);
		start(&p);
		break;
	case DISABLE:
		modify(t, false);
		break;
	case KINDS:
		break;
	}
	CHECK(!t->dev->queues[0].started);
	CHECK_EQ(virtio_get_status(t->dev), 0);
	__atomic_add_fetch(&t->progress, 1, __ATOMIC_RELEASE);
	if (k == DISABLE)
		modify(t, true);
}

static void reset_loop(const enum reset_kind *kinds, unsigned nkinds)
{
	struct rt *t = rt_new();
	unsigned long before;

	for (unsigned i = 0; i < ROUNDS * nkinds; i++) {
		set_up(t);
		driver_start(t);
		/* Let completions flow (each one an interrupt through
		 * css_notify), then reset in the middle of them. */
		before = __atomic_load_n(&t->completed, __ATOMIC_RELAXED);
		while (__atomic_load_n(&t->completed, __ATOMIC_RELAXED) < before + 1 + i % 7 * 16)
			usleep(10);
		reset(t, kinds[i % nkinds]);
		driver_stop(t);
	}
	/* Requests completed with the device's interrupts, and the driver
	 * saw them: the test raced what it meant to. */
	CHECK(__atomic_load_n(&t->notified, __ATOMIC_RELAXED) >= ROUNDS * nkinds);
	CHECK(t->io_irqs > 0);
	rt_free(t);
}

TEST(vdev_reset_while_the_queue_thread_interrupts)
{
	static const enum reset_kind k[] = { VDEV_RESET };

	reset_loop(k, 1);
}

TEST(status_0_while_the_queue_thread_interrupts)
{
	static const enum reset_kind k[] = { STATUS_0 };

	reset_loop(k, 1);
}

TEST(msch_disable_while_the_queue_thread_interrupts)
{
	static const enum reset_kind k[] = { DISABLE };

	reset_loop(k, 1);
}
