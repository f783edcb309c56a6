/* virtio-ccw transport, device side (virtio 1.2 §4.3): the virtio commands
 * of a virtio device on an s390 subchannel. The channel (arch/s390/css.c)
 * walks channel programs, answers NOOP / SENSE ID / BASIC SENSE / TIC itself
 * (SENSE ID: CU type VIRTIO_CCW_CU_TYPE, CU model virtio_ccw_cu_model()) and
 * hands every other command to virtio_ccw_dev_ops.command, with the data
 * area already resolved inside guest RAM.
 *
 * Only virtio 1.x (non-transitional): SET_VIRTIO_REV must come first after
 * the subchannel is enabled and must ask for revision 1 or 2 (length 0);
 * anything else before it, a second one, revision 0 or > 2 are rejected
 * (unit check, command reject). Unknown commands are rejected.
 *
 * Command data is big-endian except the features word (LE32). A payload
 * that does not fit the data area: channel-program check when the CCW
 * lacks SLI and count differs from the payload size, or when count is too
 * short; with SLI a longer area is fine (the rest is the residual).
 *
 * Queue state belongs to the queue threads after DRIVER_OK, so SET_VQ and
 * the queue indicators (SET_IND, SET_IND_ADAPTER) are rejected from then
 * on; Linux sets them up while probing, before DRIVER_OK. SET_CONF_IND is
 * allowed any time (one atomic pointer). Every indicator address is
 * checked against guest RAM when it is set, so the interrupt paths write
 * only checked bytes.
 *
 * Interrupts, device -> guest:
 *  - adapter (thin) interrupts, SET_IND_ADAPTER: queue q sets bit
 *    (ind_bit + q) of the indicator area in MSB-0 order (byte n/8, mask
 *    0x80 >> n%8), then 0x01 in the summary byte; only when the summary
 *    was 0 before, irq->adapter(isc) raises the adapter interrupt. With
 *    irq->bind_adapter the KVM binding may instead route each queue through
 *    an irqfd (KVM adapter route: ind_offset = ind_bit + q, summary_offset
 *    7, swap): signal_queue then only writes irq_fd[q];
 *  - classic indicators, SET_IND: queue q sets 1ULL << q of the big-endian
 *    u64 at the indicator (byte 7 - q/8, mask 1 << q%8), then
 *    irq->subchannel() (an unsolicited interrupt on the subchannel);
 *  - a configuration change (both modes): bit 0 of the SET_CONF_IND word
 *    (byte 7, 0x01), then irq->subchannel().
 * Nothing is raised for an indicator the driver has not set.
 *
 * Reset (VDEV_RESET, WRITE_STATUS 0, or the subchannel disabled): the core
 * stops the queues, then the indicators are forgotten (the adapter routes
 * unbound). The revision is per enable: enable(on or off) unsets it.
 *
 * Guest -> device notify: DIAG 0x500 subcode 3 with the subchannel-id word
 * in GPR2 and the queue index in GPR3; the KVM binding binds each queue's
 * kick eventfd with vtr_notify_bind(&vc->t, virtio_ccw_notify(schid)) and
 * passes a notify that still reaches userspace to vtr_kick(&vc->t, q).
 *
 * Locking: command() and enable() take vc->t.lock (the register lock; the
 * channel calls them with its subchannel lock held, so the lock order is
 * subchannel, then vtr), and a reset joins the queue threads with both
 * held. signal_queue / signal_config, which queue threads call, take no
 * lock and wait for none. */
#ifndef MVM_VIRTIO_CCW_H
#define MVM_VIRTIO_CCW_H

#include <stdbool.h>
#include <stdint.h>

#include "devices/ccw.h"
#include "devices/virtio.h"
#include "devices/virtio_transport.h"
#include "vmm/base/guest_mem.h"

/* SENSE ID identity: CU type 0x3832, CU model = virtio device id; the
 * virtual channel path's type. */
#define VIRTIO_CCW_CU_TYPE    0x3832
#define VIRTIO_CCW_CHPID_TYPE 0x32

/* Revisions offered: 1 (virtio 1.x), 2 (adds READ_STATUS). */
#define VIRTIO_CCW_REV_MIN 1
#define VIRTIO_CCW_REV_MAX 2

/* Commands (virtio 1.2 §4.3.2; Linux's drivers/s390/virtio/virtio_ccw.c). */
#define VIRTIO_CCW_CMD_SET_VQ          0x13
#define VIRTIO_CCW_CMD_VDEV_RESET      0x33
#define VIRTIO_CCW_CMD_SET_IND         0x43
#define VIRTIO_CCW_CMD_SET_CONF_IND    0x53
#define VIRTIO_CCW_CMD_SET_IND_ADAPTER 0x73
#define VIRTIO_CCW_CMD_READ_FEAT       0x12
#define VIRTIO_CCW_CMD_WRITE_FEAT      0x11
#define VIRTIO_CCW_CMD_READ_CONF       0x22
#define VIRTIO_CCW_CMD_WRITE_CONF      0x21
#define VIRTIO_CCW_CMD_WRITE_STATUS    0x31
#define VIRTIO_CCW_CMD_READ_VQ_CONF    0x32
#define VIRTIO_CCW_CMD_SET_VIRTIO_REV  0x83
#define VIRTIO_CCW_CMD_READ_STATUS     0x72

/* Payload sizes. */
#define VIRTIO_CCW_REV_LEN          4   /* be16 revision, be16 length */
#define VIRTIO_CCW_VQ_INFO_LEN      32  /* be64 desc, be32 res0, be16 index,
					 * be16 num, be64 avail, be64 used */
#define VIRTIO_CCW_VQ_CONF_LEN      4   /* be16 index, be16 max_num */
#define VIRTIO_CCW_FEAT_LEN         5   /* le32 features, u8 index */
#define VIRTIO_CCW_IND_LEN          8   /* be64 address */
#define VIRTIO_CCW_THININT_LEN      25  /* be64 summary, be64 indicator,
					 * be64 bit_nr, u8 isc */
#define VIRTIO_CCW_CONFIG_MAX       4096 /* READ_CONF / WRITE_CONF count */
/* Classic indicators are one 64-bit word: one bit per queue. */
#define VIRTIO_CCW_CLASSIC_BITS     64

struct virtio_ccw;

/* How interrupts reach the guest: the KVM binding's (or a test's) const
 * table; opaque is virtio_ccw_init's. adapter and subchannel must not
 * block: they are called from queue threads and from any thread that
 * signals a config change, and subchannel also from inside command() (a
 * NEEDS_RESET raised by a bad SET_VQ or a queue that fails to start at
 * DRIVER_OK), i.e. with the subchannel's lock and vc->t.lock held. Neither
 * may wait for either lock: the thread holding them may be waiting for the
 * very queue thread that raises the interrupt (a reset stops the queues
 * under both); css_notify only tries the subchannel lock. bind_adapter /
 * unbind_adapter run with vc->t.lock held. */
struct virtio_ccw_irq_ops {
	/* Raise an adapter (thin) I/O interrupt for interruption subclass isc. */
	void (*adapter)(void *opaque, uint8_t isc);
	/* Make the subchannel status-pending with an unsolicited interrupt
	 * (the channel drops it while the subchannel is already pending). */
	void (*subchannel)(void *opaque);
	/* Adapter indicators were set (vc->summary_gpa, ind_gpa, ind_bit, isc,
	 * all checked against guest RAM): the binding may route queue q
	 * through an irqfd by storing the eventfd in vc->irq_fd[q] (which it
	 * owns). 0, or -errno with every irq_fd left -1: the device then sets
	 * the indicators itself. May be NULL. */
	int (*bind_adapter)(void *opaque, struct virtio_ccw *vc);
	/* Undo bind_adapter (reset, new indicators, teardown); set irq_fd[]
	 * back to -1. Called only after a bind_adapter that returned 0, and
	 * only while no queue runs. May be NULL. */
	void (*unbind_adapter)(void *opaque, struct virtio_ccw *vc);
	/* The VM's teardown is done with vc (virtio_ccw_destroy has run):
	 * free it and whatever opaque holds. NULL: free(vc). */
	void (*free)(void *opaque, struct virtio_ccw *vc);
};

struct virtio_ccw {
	struct vtr t;                   /* lock, dev, notify binding, attach/stop/destroy */
	const struct guest_mem *mem;
	const struct virtio_ccw_irq_ops *irq;
	void *opaque;
	uint32_t schid;                 /* subchannel-id word 0x0001xxxx (names, stats) */

	int revision;                   /* negotiated, -1 until SET_VIRTIO_REV */

	/* Queue indicators: changed by commands only before DRIVER_OK, read by
	 * queue threads only after it (thread start/stop order them). */
	bool thinint;                   /* adapter indicators set */
	bool adapter_bound;             /* bind_adapter returned 0 */
	uint64_t summary_gpa;           /* thinint: summary byte */
	uint64_t ind_gpa;               /* thinint: indicator area; classic: the word */
	uint64_t ind_bit;               /* thinint: queue 0's bit (bit_nr) */
	uint8_t isc;                    /* thinint: interruption subclass 0..7 */
	uint8_t *summary;               /* host addresses, checked; NULL: not set */
	uint8_t *ind;                   /* thinint: byte ind_bit / 8; classic: byte 0 */
	int irq_fd[VIRTIO_MAX_QUEUES];  /* bind_adapter's eventfds, -1: none */

	uint8_t *conf_ind;              /* atomic; the config indicator word, NULL: not set */
	uint64_t conf_ind_gpa;          /* its guest address (snapshots; vc->t.lock) */

	uint64_t adapter_irqs;          /* atomic: adapter interrupts raised */
	uint64_t subchannel_irqs;       /* atomic: subchannel interrupts raised */

	/* Host-side failures a guest can make happen again and again
	 * (virtio_ccw_fault): a bit per kind already logged, and counts. */
	unsigned faults_logged;         /* atomic */
	uint64_t irq_errors;            /* atomic: interrupts KVM refused to inject */
	uint64_t route_errors;          /* atomic: adapter routes KVM refused */
};

/* What the host failed to do for a device, each logged once per device
 * and then only counted (irq_errors, route_errors in --stats): a guest
 * can repeat each as often as it likes (an interrupt per completion while
 * it keeps I/O interrupts disabled and KVM's queue is full; a
 * SET_IND_ADAPTER after every reset). */
enum virtio_ccw_fault {
	VIRTIO_CCW_FAULT_ROUTE,         /* adapter interrupts not routed through KVM */
	VIRTIO_CCW_FAULT_IO_IRQ,        /* a subchannel's I/O interrupt not injected */
	VIRTIO_CCW_FAULT_ADAPTER_IRQ,   /* an adapter interrupt not injected */
};
/* err: the -errno of the failure. Any thread; never blocks but for the
 * log sink's write of the first of a kind. */
void virtio_ccw_fault(struct virtio_ccw *vc, enum virtio_ccw_fault kind, int err);

/* Bind dev (virtio_dev_init'ed, mem its guest RAM) to vc: dev->tops /
 * dev->transport are set, every irq_fd is -1, the revision is unset. irq
 * and opaque: how interrupts are raised (irq must stay valid). 0 or -errno. */
int virtio_ccw_init(struct virtio_ccw *vc, struct virtio_dev *dev, const struct guest_mem *mem,
		    const struct virtio_ccw_irq_ops *irq, void *opaque);
/* Undo virtio_ccw_init (the adapter binding too, if still bound). The
 * device's queues must be stopped (virtio_dev_stop / reset). */
void virtio_ccw_destroy(struct virtio_ccw *vc);

/* The subchannel vc sits on: its id word (0x0001xxxx) names the device in
 * logs and stats. */
void virtio_ccw_set_schid(struct virtio_ccw *vc, uint32_t schid);
/* dev's device number, the last part of Linux's bus id 0.0.XXXX: 0, or
 * -ENODEV when dev is not on virtio-ccw. */
int virtio_ccw_devno(const struct virtio_dev *dev, unsigned *devno);

/* SENSE ID's CU model byte: the virtio device id. */
static inline uint8_t virtio_ccw_cu_model(const struct virtio_ccw *vc)
{
	return (uint8_t)vc->t.dev->ops->device_id;
}

/* Where the queues' notifies land for vtr_notify_bind: DIAG 0x500 on this
 * subchannel-id word, 8 bytes, the value (GPR3) = the queue index. */
static inline struct vtr_notify virtio_ccw_notify(uint32_t schid)
{
	return (struct vtr_notify){ .space = VM_IO_CCW, .addr = schid, .len = 8,
				    .datamatch = true };
}

/* The channel's view: command() and enable() on a struct virtio_ccw *. */
extern const struct ccw_dev_ops virtio_ccw_dev_ops;
extern const struct virtio_transport_ops virtio_ccw_transport_ops;

#endif
