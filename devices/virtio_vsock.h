/* virtio-vsock device (virtio 1.2 §5.10), transport-agnostic: stream
 * sockets between the guest and host programs, over hybrid vsock's Unix
 * sockets (Firecracker's and Cloud Hypervisor's framing).
 *
 * The protocol is devices/vsock_conn.c's; this file does the host I/O it
 * asks for, on one generic queue worker serving all three queues: TX
 * pushed (a chain is a packet), RX and event pulled (filled only when
 * there is something to say). Every host socket is an io_uring direct
 * descriptor in a slot of the worker's file table: made there (SOCKET,
 * ACCEPT), used there (CONNECT, RECV, SEND, SHUTDOWN) and closed by a
 * fresh unconnected socket put in its place, so none is ever in the
 * process's file table and the worker's seccomp filter allows no socket
 * call. docs/vsock.md has the design. */
#ifndef MVM_VIRTIO_VSOCK_H
#define MVM_VIRTIO_VSOCK_H

#include <stddef.h>
#include <stdint.h>

#include "devices/virtio.h"
#include "devices/vsock_conn.h"
#include "vmm/base/keyval.h"
#include "vmm/mvm.h"

#define VSOCK_QUEUE_SIZE 256       /* QueueNumMax of each queue */
/* Host clients accepted and not yet past their CONNECT line, at once; a
 * client gets VSOCK_HANDSHAKE_TIMEOUT_NS to send it. */
#define VSOCK_HANDSHAKES 16u
#define VSOCK_HANDSHAKE_TIMEOUT_NS 5000000000ull
/* The longest socket= path: the guest's connects go to PATH_<port>,
 * which must fit sockaddr_un's 108 bytes with a 10-digit port. */
#define VSOCK_PATH_MAX (108 - 12)
/* Bytes of guest data a VM may hold for host sockets that have not taken
 * them, all connections together: each connection's credit is its share
 * (VSOCK_BUF_ALLOC at most: 256 KiB each for the default 256 connections,
 * 16 KiB each for 4096). */
#define VSOCK_BUFFERED_MAX (64ull << 20)

/* The device's keys ("cid=N,socket=PATH[,conns=N]..."), over struct
 * mvm_vsock: limits, defaults and help for the CLI, mvm_vsock_init and
 * mvm_add_vsock's check alike. */
extern const struct kv_table vsock_keys;

/* The device, not yet bound to a transport: its listening socket bound
 * at o->socket (a stale socket file there, which nobody listens on, is
 * replaced; anything else is an error) and its worker's ring. *out is
 * freed by virtio_dev_destroy(), which removes the socket file unless the
 * device is sandboxed. 0 or -errno with a one-line message. */
int vsock_dev_new(const struct mvm_vsock *o, const struct guest_mem *mem,
		  struct virtio_dev **out, char *err, size_t errlen);

/* The device's counters beyond the core's (any thread). */
struct vsock_dev_stats {
	struct vsock_stats conn;   /* the protocol's (devices/vsock_conn.h) */
	uint64_t accepted;         /* host clients accepted */
	uint64_t handshake_failed; /* clients that sent no valid CONNECT line in time */
	uint64_t host_errors;      /* host socket calls that failed (connects aside) */
	uint64_t bad_rx;           /* RX buffers that cannot hold a packet */
	uint64_t polled;           /* its thread's polls that found work (poll=) */
	uint64_t poll_preempted;   /* polls cut short: the thread lost its CPU */
};
/* -EINVAL when dev is not a vsock device. */
int vsock_dev_get_stats(struct virtio_dev *dev, struct vsock_dev_stats *out);
/* The guest's CID, or 0 when dev is not a vsock device. */
unsigned vsock_dev_cid(const struct virtio_dev *dev);

#endif
