/* What every virtio transport (virtio-mmio, virtio-pci, virtio-ccw) shares,
 * so that each one keeps only its register layout and its interrupt
 * mechanism:
 *  - the register lock and the once-per-device log of a misbehaving driver;
 *  - the device status write, whose 0 resets the device (§2.1.2) and then
 *    the transport's own registers (ops->reset);
 *  - each queue's notify bound to its kick eventfd with KVM_IOEVENTFD, so a
 *    guest kick wakes the queue's thread with no exit to userspace, undone
 *    in reverse; and the slow-path kick when no ioeventfd caught the write;
 *  - attaching to a VM, stopping and destroying in one order (transport
 *    threads, then queues; notify, transport binding, device, transport);
 *  - one stats shape: {"transport":KIND,<transport fields>,"device":{...}}.
 *
 * A transport embeds struct vtr (any position; its callbacks get the vtr
 * and use container_of). Register accessors take vtr.lock; queue threads
 * never do (signal_queue must not block). */
#ifndef MVM_VIRTIO_TRANSPORT_H
#define MVM_VIRTIO_TRANSPORT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "devices/virtio.h"
#include "vmm/base/keyval.h"
#include "vmm/kvm/vm.h"

struct json;
struct snap_r;
struct snap_w;

struct vtr;

/* What a device's transport= key takes (enum mvm_transport's values), the
 * one list every device's key table names. */
extern const struct kv_value vtr_transport_values[];

/* One const table per transport kind. */
struct vtr_ops {
	const char *kind;                       /* "virtio-mmio": logs, stats */
	/* The transport's registers back to their reset values (§2.1.2), after
	 * the device reset. Register lock held. May be NULL. */
	void (*reset)(struct vtr *);
	/* Start the transport's own threads, before the vCPUs run. May be
	 * NULL. 0 or -errno. */
	int (*start)(struct vtr *);
	/* Stop the transport's own threads (before the queues stop). May be NULL. */
	void (*stop)(struct vtr *);
	/* Undo the transport's own KVM binding (irqfds, bus slot), after the
	 * notify ioeventfds are gone. Safe on a partial binding. May be NULL. */
	void (*unbind)(struct vtr *);
	/* The transport's stats fields, each as ,"name":value. May be NULL. */
	void (*stats_json)(struct vtr *, struct json *j);
	/* Free the transport (the device is gone already). */
	void (*free)(struct vtr *);
	/* Snapshots: the transport's own registers, before the virtio core's
	 * state (virtio_save / virtio_load). Called without the register
	 * lock (a PCI function's config space nests the other way); each
	 * takes what it needs. load leaves the device able to run its queues
	 * (virtio-pci: bus mastering and the BARs back). NULL: this
	 * transport has no snapshots (-EOPNOTSUPP and a message). */
	int (*save)(struct vtr *, struct snap_w *w, char *err, size_t errlen);
	int (*load)(struct vtr *, struct snap_r *r, char *err, size_t errlen);
	/* After virtio_load, the register lock held: what the transport
	 * shows of the core's state (virtio-mmio: its register page). May
	 * be NULL. */
	void (*loaded)(struct vtr *);
};

/* Where a queue's notify lands: queue q's doorbell is at addr + q * stride
 * in `space`, `len` bytes wide (0: any width, KVM's fast MMIO path); with
 * datamatch, only a write of the value q counts (several queues share one
 * address: virtio-mmio's QueueNotify, virtio-ccw's subchannel). */
struct vtr_notify {
	enum vm_io_space space;
	uint64_t addr;
	uint64_t stride;
	unsigned len;
	bool datamatch;
};

struct vtr {
	const struct vtr_ops *ops;
	struct virtio_dev *dev;
	pthread_mutex_t lock;           /* serialises register accesses (vCPU threads) */
	char name[48];                  /* "virtio-mmio at 0xd0000000": log messages */
	/* KVM binding (vtr_attach onwards) */
	struct vm *vm;
	struct vtr_notify notify;
	unsigned notify_bound;          /* queues whose notify is bound */
};

/* Bind dev to the transport t (dev->tops = tops, dev->transport =
 * transport) and set up the lock. 0 or -errno. */
int vtr_init(struct vtr *t, const struct vtr_ops *ops, struct virtio_dev *dev,
	     const struct virtio_transport_ops *tops, void *transport);
void vtr_destroy(struct vtr *t);

/* A driver access the transport ignores: log it once per device (`what`:
 * "read"/"write", `where`: the register block, `rule`: what is allowed). */
void vtr_bad_access(struct vtr *t, const char *what, const char *where, uint64_t off,
		    unsigned len, const char *rule);

/* Driver writes device status (§2.1, §3.1.1): the core's state machine;
 * 0 resets the device, then the transport's registers. Register lock held. */
void vtr_set_status(struct vtr *t, uint8_t val);

/* Driver reads/writes device configuration (§2.5) at off (relative to the
 * device's config space), delegated to the device's ops. Register lock
 * held. */
void vtr_config_read(struct vtr *t, uint64_t off, uint8_t *data, unsigned len);
void vtr_config_write(struct vtr *t, uint64_t off, const uint8_t *data, unsigned len);

/* A notify write that reached userspace (unbound, or a unit test): signal
 * queue q's kick eventfd, as the ioeventfd would. q out of range: ignored. */
void vtr_kick(struct vtr *t, uint64_t q);

/* Before attaching: the device's log becomes the VM's, and later calls
 * bind through vm. */
void vtr_attach(struct vtr *t, struct vm *vm);
/* Bind every queue's notify as described by n (after vtr_attach). On
 * failure nothing stays bound. 0 or -errno. */
int vtr_notify_bind(struct vtr *t, const struct vtr_notify *n);
/* Undo vtr_notify_bind, queues in reverse order; nothing bound: no-op. */
void vtr_notify_unbind(struct vtr *t);
/* Hand t to the VM (vm_add_device): from then on the VM stops and destroys
 * it, and --stats prints it. 0 or -errno; on failure call vtr_abort. */
int vtr_register(struct vtr *t);
/* A failed attach: stop the transport's threads, unbind notify and the
 * transport's binding, give dev
 * back unbound (dev->tops/transport NULL) and free the transport. dev is
 * still the caller's. */
void vtr_abort(struct vtr *t);

#endif
