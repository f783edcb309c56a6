/* virtio-ccw transport, device side (virtio 1.2 §4.3): see virtio_ccw.h. */
#include "devices/virtio_ccw.h"
#include "vmm/base/json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmm/base/byteorder.h"
#include "vmm/base/log.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"

/* ---- commands (vCPU threads, vc->t.lock held) ---------------------------- */

/* One command's outcome with the reason for a refusal, so that the first
 * driver error of a device is logged with what was wrong. */
struct vccw_res {
	int ret;                /* bytes transferred, CCW_REJECT, CCW_PROGRAM_CHECK */
	const char *why;        /* for ret < 0 */
};

static struct vccw_res done(uint32_t n)
{
	return (struct vccw_res){ .ret = (int)n };
}

static struct vccw_res reject(const char *why)
{
	return (struct vccw_res){ .ret = CCW_REJECT, .why = why };
}

static struct vccw_res program_check(const char *why)
{
	return (struct vccw_res){ .ret = CCW_PROGRAM_CHECK, .why = why };
}

/* The data area holds a payload of len bytes: exactly, or at least when
 * the CCW suppresses the incorrect-length indication (the rest is the
 * residual). A mismatch is the channel program's error, not the device's. */
static bool fits(bool sli, const struct ccw_data *d, uint32_t len)
{
	return sli ? d->count >= len : d->count == len;
}

static bool driver_ok(const struct virtio_ccw *vc)
{
	return vc->t.dev->status & VIRTIO_CONFIG_S_DRIVER_OK;
}

/* The revision the driver asked for (SET_VIRTIO_REV, or a snapshot's). */
static struct vccw_res rev_set(struct virtio_ccw *vc, uint16_t rev)
{
	if (vc->revision >= 0)
		return reject("second SET_VIRTIO_REV");
	/* Revision 0 is the legacy interface: mvm's devices are virtio 1.x
	 * only, and Linux falls back to 0 only when 1 is refused. Revisions
	 * 1 and 2 carry no data; data we could not interpret is refused. */
	if (rev < VIRTIO_CCW_REV_MIN || rev > VIRTIO_CCW_REV_MAX)
		return reject("unsupported revision (only 1 and 2, without data)");
	vc->revision = rev;
	return done(VIRTIO_CCW_REV_LEN);
}

static struct vccw_res set_rev(struct virtio_ccw *vc, bool sli, struct ccw_data *d)
{
	uint8_t b[VIRTIO_CCW_REV_LEN];
	uint16_t rev, len;

	if (d->count < VIRTIO_CCW_REV_LEN)
		return program_check("SET_VIRTIO_REV shorter than 4 bytes");
	ccw_data_read(d, b, sizeof(b));
	rev = be16_load(b);
	len = be16_load(b + 2);
	if (!fits(sli, d, VIRTIO_CCW_REV_LEN + (uint32_t)len))
		return program_check("SET_VIRTIO_REV count does not match its length field");
	if (len != 0)
		return reject("unsupported revision (only 1 and 2, without data)");
	return rev_set(vc, rev);
}

static struct vccw_res set_vq(struct virtio_ccw *vc, struct ccw_data *d)
{
	struct virtio_dev *dev = vc->t.dev;
	uint8_t b[VIRTIO_CCW_VQ_INFO_LEN];
	uint16_t index, num;
	struct virtq *vq;

	ccw_data_read(d, b, sizeof(b));
	index = be16_load(b + 12);
	num = be16_load(b + 14);
	/* From DRIVER_OK on, the rings belong to the queue threads. */
	if (driver_ok(vc))
		return reject("SET_VQ after DRIVER_OK");
	if (index >= dev->num_queues)
		return reject("SET_VQ for a queue the device does not have");
	vq = &dev->queues[index].vq;
	if (be64_load(b) == 0) {
		/* Disable: Linux does this for every queue when it deletes
		 * them, after the reset too; the queue is not started. */
		virtq_reset(vq);
		return done(VIRTIO_CCW_VQ_INFO_LEN);
	}
	if (!(dev->status & VIRTIO_CONFIG_S_FEATURES_OK))
		return reject("SET_VQ before FEATURES_OK");
	if (num == 0 || num > vq->max_size)
		return reject("SET_VQ num 0 or above the queue's maximum");
	vq->size = num;
	vq->desc_gpa = be64_load(b);
	vq->driver_gpa = be64_load(b + 16);
	vq->device_gpa = be64_load(b + 24);
	/* A bad ring leaves the queue disabled and the device in NEEDS_RESET
	 * (the core logs it); the command fails as well, so that the driver
	 * notices at once. */
	if (virtio_queue_set_ready(dev, index, true))
		return reject("SET_VQ with a ring outside RAM or a bad size or alignment");
	return done(VIRTIO_CCW_VQ_INFO_LEN);
}

static struct vccw_res read_vq_conf(struct virtio_ccw *vc, struct ccw_data *d)
{
	struct virtio_dev *dev = vc->t.dev;
	uint8_t b[VIRTIO_CCW_VQ_CONF_LEN];
	uint16_t index;

	/* The driver put the index in the area; max_num 0 tells it there is
	 * no such queue (Linux: -ENOENT, the end of its queue list). */
	ccw_data_read(d, b, sizeof(b));
	index = be16_load(b);
	be16_store(b + 2, index < dev->num_queues ? dev->queues[index].vq.max_size : 0);
	ccw_data_write(d, b, sizeof(b));
	return done(VIRTIO_CCW_VQ_CONF_LEN);
}

static struct vccw_res read_feat(struct virtio_ccw *vc, struct ccw_data *d)
{
	uint8_t b[VIRTIO_CCW_FEAT_LEN];

	ccw_data_read(d, b, sizeof(b));
	/* Words past 1 read 0 (the core's rule); only the features are
	 * written back, the index stays the driver's. */
	le32_store(b, virtio_read_features(vc->t.dev, b[4]));
	ccw_data_write(d, b, 4);
	return done(VIRTIO_CCW_FEAT_LEN);
}

static struct vccw_res write_feat(struct virtio_ccw *vc, struct ccw_data *d)
{
	uint8_t b[VIRTIO_CCW_FEAT_LEN];

	ccw_data_read(d, b, sizeof(b));
	/* Words past 1, and any word after FEATURES_OK: ignored by the core. */
	virtio_write_features(vc->t.dev, b[4], le32_load(b));
	return done(VIRTIO_CCW_FEAT_LEN);
}

/* READ_CONF / WRITE_CONF: the first count bytes of the device config
 * (Linux asks for offset + len from 0); the device bounds-checks. */
static struct vccw_res config_rw(struct virtio_ccw *vc, bool write, bool sli, struct ccw_data *d)
{
	uint8_t buf[VIRTIO_CCW_CONFIG_MAX];
	uint32_t n = d->count;

	if (n > sizeof(buf)) {
		if (!sli)
			return program_check("config access longer than 4 KiB");
		n = sizeof(buf);
	}
	if (n == 0)
		return done(0);
	if (write) {
		ccw_data_read(d, buf, n);
		vtr_config_write(&vc->t, 0, buf, n);
	} else {
		memset(buf, 0, n);
		vtr_config_read(&vc->t, 0, buf, n);
		ccw_data_write(d, buf, n);
	}
	return done(n);
}

static struct vccw_res write_status(struct virtio_ccw *vc, struct ccw_data *d)
{
	uint8_t s;

	ccw_data_read(d, &s, 1);
	vtr_set_status(&vc->t, s);
	/* A refused FEATURES_OK fails the command (as QEMU's does): Linux
	 * before revision 2 cannot read the status back and relies on it. */
	if ((s & VIRTIO_CONFIG_S_FEATURES_OK) &&
	    !(virtio_get_status(vc->t.dev) & VIRTIO_CONFIG_S_FEATURES_OK))
		return reject("FEATURES_OK refused (features not offered, or no VERSION_1)");
	return done(1);
}

static struct vccw_res read_status(struct virtio_ccw *vc, struct ccw_data *d)
{
	uint8_t s = virtio_get_status(vc->t.dev);

	ccw_data_write(d, &s, 1);
	return done(1);
}

static void unbind_adapter(struct virtio_ccw *vc)
{
	unsigned q;

	if (vc->adapter_bound && vc->irq->unbind_adapter)
		vc->irq->unbind_adapter(vc->opaque, vc);
	vc->adapter_bound = false;
	/* Whatever the binding left: the software path from now on. */
	for (q = 0; q < VIRTIO_MAX_QUEUES; q++)
		vc->irq_fd[q] = -1;
}

/* Forget the queue indicators (reset, or before new ones). */
static void clear_queue_indicators(struct virtio_ccw *vc)
{
	unbind_adapter(vc);
	vc->thinint = false;
	vc->summary = NULL;
	vc->ind = NULL;
	vc->summary_gpa = 0;
	vc->ind_gpa = 0;
	vc->ind_bit = 0;
	vc->isc = 0;
}

/* Classic queue indicators at gpa (SET_IND, or a snapshot's). */
static struct vccw_res ind_classic(struct virtio_ccw *vc, uint64_t gpa)
{
	uint8_t *p;

	/* The queue threads read the indicators without a lock: they may
	 * change only while no queue runs. */
	if (driver_ok(vc))
		return reject("SET_IND after DRIVER_OK");
	if (vc->thinint)
		return reject("SET_IND with adapter indicators set");
	if (vc->t.dev->num_queues > VIRTIO_CCW_CLASSIC_BITS)
		return reject("SET_IND: more queues than classic indicator bits");
	p = gmem_ptr(vc->mem, gpa, 8);
	if (!p)
		return reject("SET_IND: indicator outside guest RAM");
	vc->ind_gpa = gpa;
	vc->ind = p;
	return done(VIRTIO_CCW_IND_LEN);
}

static struct vccw_res set_ind(struct virtio_ccw *vc, struct ccw_data *d)
{
	uint8_t b[VIRTIO_CCW_IND_LEN];

	ccw_data_read(d, b, sizeof(b));
	return ind_classic(vc, be64_load(b));
}

/* The configuration-change indicator at gpa (SET_CONF_IND, or a
 * snapshot's). */
static struct vccw_res ind_config(struct virtio_ccw *vc, uint64_t gpa)
{
	uint8_t *p = gmem_ptr(vc->mem, gpa, 8);

	if (!p)
		return reject("SET_CONF_IND: indicator outside guest RAM");
	/* Read by signal_config from any thread: one atomic pointer, always
	 * a checked one, so this may change at any time. */
	vc->conf_ind_gpa = gpa;
	__atomic_store_n(&vc->conf_ind, p, __ATOMIC_RELEASE);
	return done(VIRTIO_CCW_IND_LEN);
}

static struct vccw_res set_conf_ind(struct virtio_ccw *vc, struct ccw_data *d)
{
	uint8_t b[VIRTIO_CCW_IND_LEN];

	ccw_data_read(d, b, sizeof(b));
	return ind_config(vc, be64_load(b));
}

/* Adapter (thin) indicators (SET_IND_ADAPTER, or a snapshot's). */
static struct vccw_res ind_adapter(struct virtio_ccw *vc, uint64_t summary_gpa, uint64_t ind_gpa,
				   uint64_t bit_nr, uint8_t isc)
{
	uint64_t first, last;
	unsigned nq = vc->t.dev->num_queues;
	uint8_t *summary, *ind;
	int ret;

	if (driver_ok(vc))
		return reject("SET_IND_ADAPTER after DRIVER_OK");
	if (vc->ind && !vc->thinint)
		return reject("SET_IND_ADAPTER with classic indicators set");
	if (isc > 7)
		return reject("SET_IND_ADAPTER: interruption subclass above 7");
	/* Every byte a queue's bit may land in, checked now: the queue
	 * threads write them without looking again. */
	if (bit_nr > UINT64_MAX - (nq - 1))
		return reject("SET_IND_ADAPTER: indicator bits wrap");
	first = bit_nr / 8;
	last = (bit_nr + nq - 1) / 8;
	if (first > UINT64_MAX - ind_gpa)
		return reject("SET_IND_ADAPTER: indicator outside guest RAM");
	ind = gmem_ptr(vc->mem, ind_gpa + first, last - first + 1);
	summary = gmem_ptr(vc->mem, summary_gpa, 1);
	if (!ind || !summary)
		return reject("SET_IND_ADAPTER: indicators outside guest RAM");
	clear_queue_indicators(vc);     /* a previous adapter binding */
	vc->thinint = true;
	vc->summary_gpa = summary_gpa;
	vc->ind_gpa = ind_gpa;
	vc->ind_bit = bit_nr;
	vc->isc = isc;
	vc->summary = summary;
	vc->ind = ind;
	if (vc->irq->bind_adapter) {
		ret = vc->irq->bind_adapter(vc->opaque, vc);
		if (ret == 0) {
			vc->adapter_bound = true;
		} else {
			/* The device sets the bits itself: slower, still correct. */
			virtio_ccw_fault(vc, VIRTIO_CCW_FAULT_ROUTE, ret);
			unbind_adapter(vc);
		}
	}
	return done(VIRTIO_CCW_THININT_LEN);
}

static struct vccw_res set_ind_adapter(struct virtio_ccw *vc, struct ccw_data *d)
{
	uint8_t b[VIRTIO_CCW_THININT_LEN];

	ccw_data_read(d, b, sizeof(b));
	return ind_adapter(vc, be64_load(b), be64_load(b + 8), be64_load(b + 16), b[24]);
}

/* Fixed-size commands: payload size and handler. */
struct vccw_cmd {
	uint8_t code;
	uint8_t len;
	struct vccw_res (*fn)(struct virtio_ccw *, struct ccw_data *);
};

static struct vccw_res vdev_reset(struct virtio_ccw *vc, struct ccw_data *d)
{
	(void)d;
	/* The core stops the queues, then vccw_reset forgets the indicators. */
	vtr_set_status(&vc->t, 0);
	return done(0);
}

static const struct vccw_cmd fixed_cmds[] = {
	{ VIRTIO_CCW_CMD_SET_VQ, VIRTIO_CCW_VQ_INFO_LEN, set_vq },
	{ VIRTIO_CCW_CMD_READ_VQ_CONF, VIRTIO_CCW_VQ_CONF_LEN, read_vq_conf },
	{ VIRTIO_CCW_CMD_VDEV_RESET, 0, vdev_reset },
	{ VIRTIO_CCW_CMD_READ_FEAT, VIRTIO_CCW_FEAT_LEN, read_feat },
	{ VIRTIO_CCW_CMD_WRITE_FEAT, VIRTIO_CCW_FEAT_LEN, write_feat },
	{ VIRTIO_CCW_CMD_WRITE_STATUS, 1, write_status },
	{ VIRTIO_CCW_CMD_READ_STATUS, 1, read_status },
	{ VIRTIO_CCW_CMD_SET_IND, VIRTIO_CCW_IND_LEN, set_ind },
	{ VIRTIO_CCW_CMD_SET_CONF_IND, VIRTIO_CCW_IND_LEN, set_conf_ind },
	{ VIRTIO_CCW_CMD_SET_IND_ADAPTER, VIRTIO_CCW_THININT_LEN, set_ind_adapter },
};

static struct vccw_res command(struct virtio_ccw *vc, uint8_t cmd, bool sli, struct ccw_data *d)
{
	const struct vccw_cmd *c = NULL;
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(fixed_cmds); i++)
		if (fixed_cmds[i].code == cmd)
			c = &fixed_cmds[i];
	if (!c && cmd != VIRTIO_CCW_CMD_SET_VIRTIO_REV && cmd != VIRTIO_CCW_CMD_READ_CONF &&
	    cmd != VIRTIO_CCW_CMD_WRITE_CONF)
		return reject("unknown command");
	if (cmd == VIRTIO_CCW_CMD_SET_VIRTIO_REV)
		return set_rev(vc, sli, d);
	/* A transitional device would now act as revision 0; mvm's are
	 * virtio 1.x only. */
	if (vc->revision < 0)
		return reject("command before SET_VIRTIO_REV");
	if (!c)
		return config_rw(vc, cmd == VIRTIO_CCW_CMD_WRITE_CONF, sli, d);
	if (!fits(sli, d, c->len))
		return program_check("count does not match the command's payload");
	return c->fn(vc, d);
}

static int vccw_command(void *opaque, uint8_t cmd, bool sli, struct ccw_data *d)
{
	struct virtio_ccw *vc = opaque;
	struct vccw_res r;

	pthread_mutex_lock(&vc->t.lock);
	r = command(vc, cmd, sli, d);
	if (r.ret < 0)
		virtio_guest_warn(vc->t.dev, VIRTIO_GW_ACCESS, "%s (%s): driver's command 0x%02x "
				  "(count %u%s) %s: %s", vc->t.dev->ops->name, vc->t.name, cmd,
				  d->count, sli ? ", SLI" : "",
				  r.ret == CCW_REJECT ? "rejected" : "is a program check", r.why);
	pthread_mutex_unlock(&vc->t.lock);
	return r.ret;
}

/* Enabled or disabled: the revision is negotiated once per enable. Off
 * also resets the device: Linux disables a subchannel only once its
 * device is offline (reset already), and a channel-subsystem reset
 * (re-IPL) must leave no queue writing into the next kernel's memory. */
static void vccw_enable(void *opaque, bool on)
{
	struct virtio_ccw *vc = opaque;

	pthread_mutex_lock(&vc->t.lock);
	vc->revision = -1;
	if (!on)
		vtr_set_status(&vc->t, 0);
	pthread_mutex_unlock(&vc->t.lock);
}

const struct ccw_dev_ops virtio_ccw_dev_ops = {
	.command = vccw_command,
	.enable = vccw_enable,
};

/* ---- interrupts (queue threads, any thread for config) ------------------ */

static void vccw_signal_queue(struct virtio_dev *dev, unsigned q)
{
	struct virtio_ccw *vc = dev->transport;
	uint64_t one = 1, bit;
	uint8_t *p;

	if (q >= dev->num_queues)
		return;
	if (vc->irq_fd[q] >= 0) {
		/* KVM's adapter route sets both bits and injects. */
		if (write(vc->irq_fd[q], &one, sizeof(one)) < 0) {
			/* EAGAIN: counter saturated, an interrupt is pending anyway */
		}
		return;
	}
	if (!vc->ind)
		return;                 /* the driver set no indicators: nothing to tell */
	if (vc->thinint) {
		/* vc->ind is the byte of queue 0's bit: bits are MSB-0. The
		 * queue bit is visible before the summary, the summary before
		 * the interrupt; one interrupt until the guest clears the
		 * summary (its handler scans again after clearing it). */
		bit = vc->ind_bit % 8 + q;
		p = vc->ind + bit / 8;
		__atomic_fetch_or(p, (uint8_t)(0x80 >> (bit % 8)), __ATOMIC_SEQ_CST);
		if (__atomic_fetch_or(vc->summary, 0x01, __ATOMIC_SEQ_CST) == 0) {
			__atomic_fetch_add(&vc->adapter_irqs, 1, __ATOMIC_RELAXED);
			vc->irq->adapter(vc->opaque, vc->isc);
		}
		return;
	}
	/* Classic: bit q of the big-endian 64-bit word. */
	if (q >= VIRTIO_CCW_CLASSIC_BITS)
		return;
	__atomic_fetch_or(vc->ind + 7 - q / 8, (uint8_t)(1u << (q % 8)), __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&vc->subchannel_irqs, 1, __ATOMIC_RELAXED);
	vc->irq->subchannel(vc->opaque);
}

/* Configuration change or NEEDS_RESET: bit 0 of the config indicator and
 * a subchannel interrupt, in both indicator modes. This may run inside a
 * command (a bad SET_VQ, a queue that fails to start at DRIVER_OK), i.e.
 * with the subchannel's lock held: irq->subchannel must not wait for it. */
static void vccw_signal_config(struct virtio_dev *dev)
{
	struct virtio_ccw *vc = dev->transport;
	uint8_t *p = __atomic_load_n(&vc->conf_ind, __ATOMIC_ACQUIRE);

	if (!p)
		return;
	__atomic_fetch_or(p + 7, (uint8_t)0x01, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&vc->subchannel_irqs, 1, __ATOMIC_RELAXED);
	vc->irq->subchannel(vc->opaque);
}

void virtio_ccw_fault(struct virtio_ccw *vc, enum virtio_ccw_fault kind, int err)
{
	static const struct {
		const char *what, *then, *counter;
	} f[] = {
		[VIRTIO_CCW_FAULT_ROUTE] = { "cannot route adapter interrupts through KVM",
					     "raising them from userspace", "route_errors" },
		[VIRTIO_CCW_FAULT_IO_IRQ] = { "cannot inject the subchannel's I/O interrupt",
					      "the guest may wait for it", "irq_errors" },
		[VIRTIO_CCW_FAULT_ADAPTER_IRQ] = { "cannot inject an adapter interrupt",
						   "the guest may wait for it", "irq_errors" },
	};
	unsigned bit = 1u << kind;

	__atomic_fetch_add(kind == VIRTIO_CCW_FAULT_ROUTE ? &vc->route_errors : &vc->irq_errors,
			   1, __ATOMIC_RELAXED);
	if (__atomic_fetch_or(&vc->faults_logged, bit, __ATOMIC_RELAXED) & bit)
		return;
	log_warn(vc->t.dev->log, "%s (%s): %s: %s; %s (the first on this device: the rest "
		 "are only counted, as %s in --stats)", vc->t.dev->ops->name, vc->t.name,
		 f[kind].what, strerror(-err), f[kind].then, f[kind].counter);
}

const struct virtio_transport_ops virtio_ccw_transport_ops = {
	.signal_queue = vccw_signal_queue,
	.signal_config = vccw_signal_config,
};

/* ---- the transport's life (struct vtr) ---------------------------------- */

/* Device reset (VDEV_RESET, status 0, disable): the queues are stopped;
 * the driver sets new indicators when it sets the device up again. */
static void vccw_reset(struct vtr *t)
{
	struct virtio_ccw *vc = container_of(t, struct virtio_ccw, t);

	clear_queue_indicators(vc);
	__atomic_store_n(&vc->conf_ind, NULL, __ATOMIC_RELEASE);
	vc->conf_ind_gpa = 0;
}

/* Teardown: the adapter routes go while the device is still there (the
 * binding may look at it). */
static void vccw_unbind(struct vtr *t)
{
	unbind_adapter(container_of(t, struct virtio_ccw, t));
}

static void vccw_stats_json(struct vtr *t, struct json *j)
{
	struct virtio_ccw *vc = container_of(t, struct virtio_ccw, t);
	const char *ind;
	int rev;

	pthread_mutex_lock(&t->lock);
	rev = vc->revision;
	ind = !vc->ind ? "none" : vc->thinint ? (vc->adapter_bound ? "adapter-kvm" : "adapter")
				   : "classic";
	pthread_mutex_unlock(&t->lock);
	json_strf(j, "schid", "0x%08" PRIx32, vc->schid);
	json_i64(j, "revision", rev);
	json_str(j, "indicators", ind);
	json_u64(j, "adapter_irqs", __atomic_load_n(&vc->adapter_irqs, __ATOMIC_RELAXED));
	json_u64(j, "subchannel_irqs", __atomic_load_n(&vc->subchannel_irqs, __ATOMIC_RELAXED));
	json_u64(j, "irq_errors", __atomic_load_n(&vc->irq_errors, __ATOMIC_RELAXED));
	json_u64(j, "route_errors", __atomic_load_n(&vc->route_errors, __ATOMIC_RELAXED));
}

static void vccw_free(struct vtr *t)
{
	struct virtio_ccw *vc = container_of(t, struct virtio_ccw, t);

	/* The device may be gone: nothing here looks at t->dev. */
	virtio_ccw_destroy(vc);
	if (vc->irq->free)
		vc->irq->free(vc->opaque, vc);
	else
		free(vc);
}

/* Snapshots: the subchannel the device sits on (a restore must find it
 * there: the guest's driver knows it by that number), the revision and
 * the indicators as the driver set them. The subchannel's own state
 * (PMCW, status) is the channel subsystem's (css_save). */
enum vccw_snap_ind { VCCW_SNAP_IND_NONE, VCCW_SNAP_IND_CLASSIC, VCCW_SNAP_IND_ADAPTER };

static int vccw_save(struct vtr *t, struct snap_w *w, char *err, size_t errlen)
{
	struct virtio_ccw *vc = container_of(t, struct virtio_ccw, t);

	(void)err;
	(void)errlen;
	pthread_mutex_lock(&t->lock);
	snap_put_u32(w, vc->schid);
	snap_put_u32(w, (uint32_t)vc->revision);
	snap_put_u8(w, !vc->ind ? VCCW_SNAP_IND_NONE : vc->thinint ? VCCW_SNAP_IND_ADAPTER :
		    VCCW_SNAP_IND_CLASSIC);
	snap_put_u64(w, vc->ind_gpa);
	snap_put_u64(w, vc->summary_gpa);
	snap_put_u64(w, vc->ind_bit);
	snap_put_u8(w, vc->isc);
	snap_put_u8(w, __atomic_load_n(&vc->conf_ind, __ATOMIC_ACQUIRE) != NULL);
	snap_put_u64(w, vc->conf_ind_gpa);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

/* Through the commands' own checks, on a device just made (status 0, so
 * the indicators may be set): a damaged snapshot's values are refused as
 * the driver's would be. */
static int vccw_load(struct vtr *t, struct snap_r *r, char *err, size_t errlen)
{
	struct virtio_ccw *vc = container_of(t, struct virtio_ccw, t);
	uint32_t schid = snap_get_u32(r), rev = snap_get_u32(r);
	uint8_t mode = snap_get_u8(r);
	uint64_t ind = snap_get_u64(r), summary = snap_get_u64(r), bit = snap_get_u64(r);
	uint8_t isc = snap_get_u8(r), has_conf = snap_get_u8(r);
	uint64_t conf = snap_get_u64(r);
	struct vccw_res res = done(0);

	if (r->err)
		return snap_done(r, err, errlen);
	if (schid != vc->schid)
		return err_set(err, errlen, -EINVAL, "snapshot: a %s on subchannel 0x%08" PRIx32
			       " there, 0x%08" PRIx32 " here; give the VM the snapshot's devices, in "
			       "its order", t->dev->ops->name, schid, vc->schid);
	pthread_mutex_lock(&t->lock);
	if (rev != UINT32_MAX)
		res = rev > UINT16_MAX ? reject("unsupported revision") : rev_set(vc, (uint16_t)rev);
	if (res.ret >= 0 && mode == VCCW_SNAP_IND_CLASSIC)
		res = ind_classic(vc, ind);
	else if (res.ret >= 0 && mode == VCCW_SNAP_IND_ADAPTER)
		res = ind_adapter(vc, summary, ind, bit, isc);
	else if (res.ret >= 0 && mode != VCCW_SNAP_IND_NONE)
		res = reject("no such kind of indicators");
	if (res.ret >= 0 && has_conf > 1)
		res = reject("a configuration indicator flag neither 0 nor 1");
	if (res.ret >= 0 && has_conf)
		res = ind_config(vc, conf);
	if (res.ret < 0) {
		/* As made: nothing of the damaged state stays. */
		vc->revision = -1;
		vccw_reset(t);
	}
	pthread_mutex_unlock(&t->lock);
	if (res.ret < 0)
		return err_set(err, errlen, -EINVAL, "snapshot: %s (%s): %s; the snapshot is "
			       "damaged", t->dev->ops->name, t->name, res.why);
	return 0;
}

static const struct vtr_ops vccw_vtr_ops = {
	.kind = "virtio-ccw",
	.reset = vccw_reset,
	.unbind = vccw_unbind,
	.stats_json = vccw_stats_json,
	.free = vccw_free,
	.save = vccw_save,
	.load = vccw_load,
};

int virtio_ccw_init(struct virtio_ccw *vc, struct virtio_dev *dev, const struct guest_mem *mem,
		    const struct virtio_ccw_irq_ops *irq, void *opaque)
{
	unsigned q;
	int ret;

	if (!irq || !irq->adapter || !irq->subchannel)
		return -EINVAL;
	memset(vc, 0, sizeof(*vc));
	ret = vtr_init(&vc->t, &vccw_vtr_ops, dev, &virtio_ccw_transport_ops, vc);
	if (ret)
		return ret;
	vc->mem = mem;
	vc->irq = irq;
	vc->opaque = opaque;
	vc->revision = -1;
	for (q = 0; q < VIRTIO_MAX_QUEUES; q++)
		vc->irq_fd[q] = -1;
	return 0;
}

void virtio_ccw_destroy(struct virtio_ccw *vc)
{
	if (vc->adapter_bound)
		unbind_adapter(vc);
	vtr_destroy(&vc->t);
}

void virtio_ccw_set_schid(struct virtio_ccw *vc, uint32_t schid)
{
	vc->schid = schid;
	/* cssid.ssid.sch_no, as Linux names the subchannel (0.0.0000). */
	snprintf(vc->t.name, sizeof(vc->t.name), "virtio-ccw on subchannel 0.%u.%04x",
		 (unsigned)(schid >> 17) & 3, (unsigned)schid & 0xffff);
}

int virtio_ccw_devno(const struct virtio_dev *dev, unsigned *devno)
{
	const struct virtio_ccw *vc = dev->transport;

	if (dev->tops != &virtio_ccw_transport_ops)
		return -ENODEV;
	/* The channel subsystem numbers a device as its subchannel. */
	*devno = vc->schid & 0xffff;
	return 0;
}
