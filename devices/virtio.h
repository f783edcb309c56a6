/* virtio core (virtio 1.2): device status state machine (§2.1, §3.1),
 * feature negotiation (§2.2), and the two const ops tables that keep a
 * device model (virtio-blk, ...) apart from its transport (mmio, pci, ccw).
 *
 * Threads and ownership:
 *  - Register-level calls (virtio_set_status, virtio_write_features,
 *    virtio_queue_set_ready, virtio_reset) come from the transport, which
 *    serialises them (vCPU threads, under the transport's lock).
 *  - Once a queue is started (ops->queue_start at DRIVER_OK), its struct
 *    virtq belongs to the device's queue thread alone; the transport touches
 *    it again only after ops->queue_stop returned (reset, teardown).
 *  - virtio_dev_needs_reset / virtio_signal_* may be called from any thread.
 *
 * Only virtio 1.x is supported: VIRTIO_F_VERSION_1 is always offered and
 * FEATURES_OK is refused without it. */
#ifndef MVM_VIRTIO_H
#define MVM_VIRTIO_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_ring.h>

#include "devices/virtq.h"
#include "vmm/base/guest_mem.h"

struct json;
struct snap_r;
struct snap_w;

/* Status bits (§2.1, VIRTIO_CONFIG_S_*), reserved feature bits (§6,
 * VIRTIO_F_*, VIRTIO_RING_F_*) and device IDs (§5, VIRTIO_ID_*) come from
 * the Linux UAPI headers; VIRTIO_BIT from the ring layer below
 * (devices/virtq.h). */

/* Feature bits the core offers on top of ops->features(): the ring features
 * implemented by virtq.c, and VERSION_1. RING_PACKED is withheld from a
 * device whose `no_packed` is set (the split ring is then the only layout). */
#define VIRTIO_CORE_FEATURES (VIRTIO_BIT(VIRTIO_F_VERSION_1) | \
			      VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX) | \
			      VIRTIO_BIT(VIRTIO_RING_F_INDIRECT_DESC) | \
			      VIRTIO_BIT(VIRTIO_F_RING_PACKED))

#define VIRTIO_MAX_QUEUES 64

struct virtio_dev;

/* One virtqueue and what belongs to it, in one place. */
struct virtio_queue {
	struct virtq vq;                /* ring state (the queue thread's once started) */
	int kick_fd;                    /* eventfd, guest -> device notify; bound with
					 * KVM_IOEVENTFD by the transport */
	bool started;                   /* queue_start succeeded */
	uint16_t msix_vector;           /* virtio-pci: queue_msix_vector (atomic) */
};

/* One const table per device type. All callbacks get the virtio_dev; the
 * device finds its state in dev->priv. */
struct virtio_device_ops {
	const char *name;                    /* "virtio-blk": logs, stats */
	uint32_t device_id;                  /* VIRTIO_ID_* */
	/* virtio-pci: the MSI-X table's entries. 0: one per queue and one
	 * for configuration changes, which lets the driver give each queue
	 * its own vector; 2: one for the configuration and one its queues
	 * share (Linux then names it "virtqueues" and looks at every queue
	 * per interrupt), for a device whose queues all live on one thread
	 * and complete together. */
	unsigned msix_vectors;
	/* Device-specific feature bits offered (the core adds VIRTIO_CORE_FEATURES). */
	uint64_t (*features)(const struct virtio_dev *);
	/* Device configuration space (§4.2.2 offset 0x100+). off/len come from the
	 * guest: the device must bounds-check (reads beyond its config give 0,
	 * writes there are ignored). Data is in guest (little-endian) order. */
	void (*config_read)(struct virtio_dev *, uint64_t off, uint8_t *data, unsigned len);
	void (*config_write)(struct virtio_dev *, uint64_t off, const uint8_t *data, unsigned len);
	/* Before any vCPU runs (the VM's start): start the device's threads,
	 * which then wait for queue_start. Everything they need (rings,
	 * eventfds) was made with the device. 0 or -errno. May be NULL. */
	int (*launch)(struct virtio_dev *);
	/* At teardown, after every queue stopped: end those threads. May be
	 * NULL. */
	void (*halt)(struct virtio_dev *);
	/* DRIVER_OK with queue q enabled: have the queue's thread serve it; it
	 * then owns dev->queues[q].vq and waits on dev->queues[q].kick_fd.
	 * Nothing is created here. 0 or -errno (the core then sets
	 * NEEDS_RESET). */
	int (*queue_start)(struct virtio_dev *, unsigned q);
	/* Stop queue q's thread: wait for or cancel in-flight I/O so that nothing
	 * is written to guest memory after it returns. Only called for started
	 * queues. */
	void (*queue_stop)(struct virtio_dev *, unsigned q);
	/* Every started queue is about to be stopped (reset, teardown): ask
	 * their threads to wind down now, so that they do it side by side;
	 * queue_stop then waits for each. Returns at once. May be NULL. */
	void (*queues_stopping)(struct virtio_dev *);
	/* Device reset (§2.1.2), after all queues were stopped: forget negotiated
	 * state. May be NULL. */
	void (*reset)(struct virtio_dev *);
	/* One JSON object describing the device (for --stats). May be NULL. */
	void (*stats_json)(struct virtio_dev *, struct json *j);
	/* Whether the device holds nothing to show (a hot-plug slot's disk
	 * device without a disk): the VM's statistics leave it out. May be
	 * NULL. */
	bool (*vacant)(const struct virtio_dev *);
	/* Free device-private state (dev->priv) at teardown, after every queue
	 * was stopped; called last by virtio_dev_destroy, so it may free the
	 * memory holding dev itself. May be NULL. */
	void (*destroy)(struct virtio_dev *);
	/* Snapshots (virtio_save/virtio_load): the device's own state, after
	 * the core's; load before the queues start again. Either may be
	 * NULL: nothing of its own. 0 or -errno with a message. */
	int (*save)(struct virtio_dev *, struct snap_w *w, char *err, size_t errlen);
	int (*load)(struct virtio_dev *, struct snap_r *r, char *err, size_t errlen);
	/* Snapshots of a paused VM: the id of a buffer queue q took and has
	 * not started (blk: waiting for rate-limit tokens), given back to
	 * the ring in the snapshot (virtq_get_pos); -1: none. Read while
	 * the queue's thread is quiesced. May be NULL. */
	int (*queue_held)(struct virtio_dev *, unsigned q);
};

/* One const table per transport. */
struct virtio_transport_ops {
	/* Used buffers in queue q: raise the queue interrupt. Called from the
	 * queue's own thread (must not block or take the register lock). */
	void (*signal_queue)(struct virtio_dev *, unsigned q);
	/* Which interrupt signal_queue(q) raises, for queues that share one:
	 * the same number for queues whose signal is one and the same
	 * interrupt (virtio-pci: one MSI-X vector, or INTx; virtio-mmio: its
	 * one line), so that a thread that published several of them signals
	 * once. -1, or NULL: the queue's own (virtio-ccw: its indicator).
	 * Queue threads, as signal_queue. */
	int (*queue_irq)(struct virtio_dev *, unsigned q);
	/* Configuration change (or NEEDS_RESET): raise the config interrupt. */
	void (*signal_config)(struct virtio_dev *);
	/* Whether the driver lets the device access guest memory now
	 * (virtio-pci: the command register's Bus Master Enable). DRIVER_OK
	 * starts no queue while it says no. Register lock held. NULL: always. */
	bool (*dma_allowed)(struct virtio_dev *);
};

struct vqw;

struct virtio_dev {
	const struct virtio_device_ops *ops;
	const struct virtio_transport_ops *tops;   /* set by the transport */
	void *transport;                /* transport private */
	void *priv;                     /* device private */
	const struct guest_mem *mem;
	const struct log_sink *log;     /* the VM's (set by the transport), or NULL */

	uint64_t host_features;         /* ops->features() | VIRTIO_CORE_FEATURES; what
					 * is offered is virtio_offered_features() */
	uint64_t guest_features;        /* written by the driver; final once FEATURES_OK */
	/* Do not offer VIRTIO_F_RING_PACKED (--disk ...,packed=off). Set by the
	 * device owner after virtio_dev_init and before the driver reads the
	 * features; the driver then gets split rings only. */
	bool no_packed;
	/* Its threads enter their seccomp filters (the VM's sandbox, set by
	 * the transport at attach), which name the VM's fd (-1: none). */
	bool sandbox;
	int vm_fd;
	/* Names and ids of its threads, for the VM's owner: thread_prefix
	 * begins their names (the VM's "ID-dN"; "": the device's own
	 * names), set before launch; vqws lists its queue threads (vqw_init
	 * links, vqw_fini unlinks); helper_tid is the transport's own thread
	 * (virtio-pci's INTx resampler) once started, 0: none. */
	char thread_prefix[13];
	struct vqw *vqws;
	int helper_tid;
	char helper_name[16];

	/* §2.1 status as written by the driver (transport lock). NEEDS_RESET is
	 * kept apart in `needs_reset` (atomic: set from queue threads);
	 * virtio_get_status() combines both. */
	uint8_t status;
	bool needs_reset;
	uint32_t config_generation;     /* atomic; bumped by virtio_config_changed */

	unsigned num_queues;
	struct virtio_queue *queues;    /* num_queues entries */
	bool launched;                  /* ops->launch succeeded, ops->halt not yet run */

	/* What the guest got wrong (virtio_guest_warn): a bit per kind
	 * already logged, and how many times in all (both atomic: vCPU and
	 * queue threads). */
	unsigned guest_warned;
	unsigned long long guest_errors;
};

/* Kinds of guest mistakes, each logged once per device. */
enum {
	VIRTIO_GW_ACCESS,               /* a bad register access or command */
	VIRTIO_GW_QUEUE_CONFIG,         /* a queue enabled with a bad configuration */
	VIRTIO_GW_QUEUE_START,          /* a queue that could not start */
	VIRTIO_GW_RING,                 /* the guest broke a ring */
	VIRTIO_GW_DMA,                  /* queues needed DMA the driver forbade */
};

/* Something the guest can repeat at will (a write per VM exit, a ring it
 * breaks after every reset) must not flood the host's log: the first of
 * each kind on a device is logged, with a note that the rest are only
 * counted (guest_errors, in --stats). Any thread. */
__attribute__((format(printf, 3, 4)))
void virtio_guest_warn(struct virtio_dev *dev, unsigned kind, const char *fmt, ...);

/* Set up dev for a device type: allocates num_queues (1..VIRTIO_MAX_QUEUES)
 * virtqueues with QueueNumMax queue_max (power of 2, <= VIRTQ_MAX_SIZE) and
 * one non-blocking eventfd per queue. The transport sets tops/transport
 * afterwards. 0 or -errno. */
int virtio_dev_init(struct virtio_dev *dev, const struct virtio_device_ops *ops,
		    void *priv, const struct guest_mem *mem,
		    unsigned num_queues, uint16_t queue_max);
/* ops->launch: the device's threads, before any vCPU runs. 0 or -errno. */
int virtio_dev_launch(struct virtio_dev *dev);
/* Stop started queues, end the device's threads (ops->halt), free what
 * virtio_dev_init made, then call ops->destroy. */
void virtio_dev_destroy(struct virtio_dev *dev);
/* ops->halt once: after virtio_dev_stop, at teardown. */
void virtio_dev_halt(struct virtio_dev *dev);

/* A pause: every queue thread of dev takes no more of the guest's
 * buffers (on) or goes on (off), side by side (vqw_quiesce); then wait
 * until each has carried it out, in-flight host I/O completed for on:
 * 0 or -ETIMEDOUT at deadline_ns (CLOCK_MONOTONIC). */
void virtio_dev_quiesce(struct virtio_dev *dev, bool on);
int virtio_dev_quiesce_wait(struct virtio_dev *dev, uint64_t deadline_ns);

/* Stop every started queue (ops->queue_stop), e.g. at VM teardown. */
void virtio_dev_stop(struct virtio_dev *dev);

/* Driver-visible status: status | NEEDS_RESET when set. */
uint8_t virtio_get_status(const struct virtio_dev *dev);
/* Driver writes the status register (§2.1, §3.1.1):
 *  - 0 resets the device (virtio_reset);
 *  - clearing a bit, or setting one whose predecessor is missing
 *    (ACKNOWLEDGE -> DRIVER -> FEATURES_OK -> DRIVER_OK), is ignored;
 *  - FEATURES_OK is not set when guest_features has a bit never offered or
 *    lacks VERSION_1 (the driver reads status back and sees it missing);
 *  - DRIVER_OK starts every ready queue and kicks each once, so buffers the
 *    driver queued before DRIVER_OK are processed; when the transport's
 *    dma_allowed says no, it starts none and sets NEEDS_RESET instead
 *    (the device cannot work without DMA; the driver must reset it);
 *  - FAILED is recorded; NEEDS_RESET written by the driver is ignored. */
void virtio_set_status(struct virtio_dev *dev, uint8_t val);
/* Reset (§2.1.2): stop queues first (ops->queue_stop), then ops->reset, then
 * clear ring state, features and status. Nothing touches guest memory after. */
void virtio_reset(struct virtio_dev *dev);

/* Snapshots: the core's state (status, features, each queue's
 * configuration and position), then the device's (ops->save). The VM is
 * paused and its queues quiet: -EBUSY with a message when a queue holds
 * a request it has not completed (one waiting for rate-limit tokens).
 * virtio_load, on a device just made (or reset), with the transport's
 * registers back (a virtio-pci function's Bus Master Enable): replays
 * the driver's initialisation through the state machine and the queue
 * checks the driver's own writes go through (status, features,
 * FEATURES_OK, each queue's configuration and enable), puts each queue at
 * its saved position, then DRIVER_OK starts the queues, each kicked once,
 * so what the guest made available before the snapshot is served. A
 * saved state the device would refuse from its driver (features never
 * offered, a ring outside guest RAM) is refused: -EINVAL and a message.
 * Register lock held (vtr). */
int virtio_save(struct virtio_dev *dev, struct snap_w *w, char *err, size_t errlen);
int virtio_load(struct virtio_dev *dev, struct snap_r *r, char *err, size_t errlen);

/* The features offered to the driver: host_features less RING_PACKED when
 * no_packed. */
static inline uint64_t virtio_offered_features(const struct virtio_dev *dev)
{
	return dev->host_features & ~(dev->no_packed ? VIRTIO_BIT(VIRTIO_F_RING_PACKED) : 0);
}

/* 32-bit feature word `sel` (0, 1) of the offered features; 0 for other sel. */
uint32_t virtio_read_features(const struct virtio_dev *dev, uint32_t sel);
/* Driver writes feature word sel; ignored once FEATURES_OK is set or for sel > 1. */
void virtio_write_features(struct virtio_dev *dev, uint32_t sel, uint32_t val);
static inline bool virtio_has_feature(const struct virtio_dev *dev, unsigned bit)
{
	return (dev->guest_features >> bit) & 1;
}

/* Driver enables (ready = true) or disables queue q. Enabling validates the
 * queue configuration (virtq_enable). Allowed only after FEATURES_OK and
 * before DRIVER_OK (-EBUSY otherwise). 0, or -EINVAL/-EFAULT for a bad
 * configuration: the queue stays disabled and the device is put in
 * NEEDS_RESET (the driver's own error). */
int virtio_queue_set_ready(struct virtio_dev *dev, unsigned q, bool ready);

/* The device hit a guest error it cannot complete with an error status (e.g.
 * a broken ring): set NEEDS_RESET (§2.1.2) and signal a config change. Any
 * thread. The queue stays stopped in effect: the caller stops consuming it. */
void virtio_dev_needs_reset(struct virtio_dev *dev);
/* Device config changed: bump ConfigGeneration and signal the driver. */
void virtio_config_changed(struct virtio_dev *dev);

static inline void virtio_signal_queue(struct virtio_dev *dev, unsigned q)
{
	dev->tops->signal_queue(dev, q);
}

static inline int virtio_queue_irq(struct virtio_dev *dev, unsigned q)
{
	return dev->tops->queue_irq ? dev->tops->queue_irq(dev, q) : -1;
}

#endif
