/* virtio-blk request parsing and validation (virtio 1.2 §5.2.6).
 *
 * A request is validated completely here, before any host I/O: the header
 * is copied out of guest memory once and only the copy is used afterwards
 * (the guest may rewrite it while the request is in flight). No framing is
 * assumed (§2.6.4): the header is the first 16 device-readable bytes, the
 * status the last device-writable byte, data whatever lies in between. */
#ifndef MVM_BLK_REQ_H
#define MVM_BLK_REQ_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <linux/virtio_blk.h>

#include "devices/virtq.h"

/* Feature bits (§5.2.3), request types and status values (§5.2.6) and
 * VIRTIO_BLK_ID_BYTES, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP: <linux/virtio_blk.h>. */

#define BLK_REQ_HDR_BYTES 16
#define BLK_DWZ_SEG_BYTES 16
/* Limits advertised in config space and enforced here. */
#define BLK_SEG_MAX       126          /* data segments per request */
#define BLK_SIZE_MAX      (1u << 20)   /* bytes per data segment */
#define BLK_DWZ_MAX_SEG   1            /* one fallocate per request */
/* 64 MiB per discard / write-zeroes: on a block device, write-zeroes
 * without an offload is the kernel writing that many zeroes. */
#define BLK_DWZ_MAX_SECTORS (1u << 17)

/* What the device knows when validating a request. */
struct blk_req_ctx {
	uint64_t capacity;         /* sectors */
	bool ro;                   /* disk opened read-only (F_RO offered) */
	bool discard;              /* VIRTIO_BLK_F_DISCARD negotiated */
	bool write_zeroes;         /* VIRTIO_BLK_F_WRITE_ZEROES negotiated */
	const char *serial;        /* GET_ID answer, <= 20 bytes */
};

/* A validated request that needs host I/O. */
struct blk_req {
	uint32_t type;
	uint64_t sector;           /* from the header copy */
	uint8_t *status;           /* host pointer of the status byte (NULL: none);
				    * written when the request completes */
	uint64_t len;              /* IN/OUT: data bytes; DISCARD/WZ: range bytes */
	uint32_t dwz_flags;        /* DISCARD/WZ segment flags */
	unsigned niov;
	/* The data segments: blk_req_parse fills BLK_SEG_MAX entries here
	 * (the caller points iov at them); the caller may move them after. */
	struct iovec *iov;
};

enum blk_verdict {
	BLK_REQ_SUBMIT,            /* valid, needs host I/O described by req */
	BLK_REQ_DONE,              /* completed here: status byte written */
	BLK_REQ_NO_STATUS,         /* no device-writable byte for a status: used len 0 */
};

/* Validate the chain; touches no guest memory but to copy the header (and
 * discard/write-zeroes segment) out and, for GET_ID, the id in. On
 * BLK_REQ_DONE *status_out holds the status to complete with and *used_len
 * the bytes written to the guest (GET_ID id + status, or 1); the caller
 * writes the status byte (req->status) when it completes the request. */
enum blk_verdict blk_req_parse(const struct virtq_chain *c, const struct blk_req_ctx *ctx,
			       struct blk_req *req, uint8_t *status_out, uint32_t *used_len);

#endif
