/* virtio-blk request validation: see blk_req.h. */
#include "devices/blk_req.h"
#include "devices/blk_image.h"
#include "devices/iov.h"
#include "vmm/base/byteorder.h"

#include <errno.h>
#include <string.h>

static bool range_ok(const struct blk_req_ctx *ctx, uint64_t sector, uint64_t nsec)
{
	return sector <= ctx->capacity && nsec <= ctx->capacity - sector;
}

enum blk_verdict blk_req_parse(const struct virtq_chain *c, const struct blk_req_ctx *ctx,
			       struct blk_req *req, uint8_t *status_out, uint32_t *used_len)
{
	/* The chain's two byte streams: device-readable, then device-writable. */
	const struct iovec *rd = c->iov, *wr = c->iov + c->n_readable;
	unsigned nrd = c->n_readable, nwr = c->n - c->n_readable;
	uint64_t rlen, wlen, dlen;
	uint8_t hdr[BLK_REQ_HDR_BYTES];
	uint8_t st = VIRTIO_BLK_S_IOERR;
	int niov;

	*used_len = 0;
	req->status = NULL;
	/* No writable buffer, or a zero-length one anywhere (the status byte
	 * might be the empty one): nothing to write the status to. */
	if (nwr == 0 || c->has_empty)
		return BLK_REQ_NO_STATUS;
	rlen = iov_len(rd, nrd);
	wlen = iov_len(wr, nwr);
	/* The status byte: last byte of the last writable buffer. */
	req->status = (uint8_t *)c->iov[c->n - 1].iov_base + c->iov[c->n - 1].iov_len - 1;
	wlen -= 1;
	*used_len = 1;

	if (rlen < BLK_REQ_HDR_BYTES)
		goto done;
	/* Copy the header once; the guest may rewrite it meanwhile. */
	iov_read(rd, nrd, 0, hdr, sizeof(hdr));
	req->type = le32_load(hdr);
	req->sector = le64_load(hdr + 8);
	req->niov = 0;
	req->len = 0;
	req->dwz_flags = 0;

	switch (req->type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_OUT: {
		bool in = req->type == VIRTIO_BLK_T_IN;
		/* A read must not carry device-readable data, a write no
		 * device-writable data (besides the status). */
		if (in ? rlen != BLK_REQ_HDR_BYTES : wlen != 0)
			goto done;
		if (!in && ctx->ro)
			goto done;
		dlen = in ? wlen : rlen - BLK_REQ_HDR_BYTES;
		if (dlen == 0 || dlen % BLK_SECTOR)
			goto done;
		if (!range_ok(ctx, req->sector, dlen / BLK_SECTOR))
			goto done;
		/* The data: a slice of the chain's iovec, no second walk. */
		niov = in ? iov_slice(wr, nwr, 0, dlen, req->iov, BLK_SEG_MAX)
			  : iov_slice(rd, nrd, BLK_REQ_HDR_BYTES, dlen, req->iov, BLK_SEG_MAX);
		if (niov < 0)
			goto done;
		/* seg_max and size_max are the driver's to honour (§5.2.6.1):
		 * a request is at most BLK_SEG_MAX * BLK_SIZE_MAX bytes of host
		 * work, not 126 segments of 4 GiB over one guest buffer. */
		for (int i = 0; i < niov; i++)
			if (req->iov[i].iov_len > BLK_SIZE_MAX)
				goto done;
		req->niov = (unsigned)niov;
		req->len = dlen;
		return BLK_REQ_SUBMIT;
	}
	case VIRTIO_BLK_T_FLUSH:
		/* A read-only disk was never written through this device:
		 * there is nothing to make durable (and its ring may not fsync). */
		if (ctx->ro) {
			st = VIRTIO_BLK_S_OK;
			goto done;
		}
		return BLK_REQ_SUBMIT;
	case VIRTIO_BLK_T_GET_ID: {
		uint8_t id[VIRTIO_BLK_ID_BYTES] = { 0 };
		size_t n = ctx->serial ? strnlen(ctx->serial, sizeof(id)) : 0;

		if (wlen < sizeof(id))
			goto done;
		if (n)          /* no serial: NULL, and memcpy's source may not be */
			memcpy(id, ctx->serial, n);
		iov_write(wr, nwr, 0, id, sizeof(id));
		*used_len = sizeof(id) + 1;
		st = VIRTIO_BLK_S_OK;
		goto done;
	}
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES: {
		bool discard = req->type == VIRTIO_BLK_T_DISCARD;
		uint8_t seg[BLK_DWZ_SEG_BYTES];
		uint64_t segbytes = rlen - BLK_REQ_HDR_BYTES;
		uint32_t nsec;

		/* Writes of any kind to a read-only disk fail even when the
		 * driver ignored VIRTIO_BLK_F_RO (§5.2.6.2). */
		if (ctx->ro)
			goto done;
		if (!(discard ? ctx->discard : ctx->write_zeroes)) {
			st = VIRTIO_BLK_S_UNSUPP;
			goto done;
		}
		if (segbytes == 0 || segbytes % BLK_DWZ_SEG_BYTES ||
		    segbytes / BLK_DWZ_SEG_BYTES > BLK_DWZ_MAX_SEG)
			goto done;
		iov_read(rd, nrd, BLK_REQ_HDR_BYTES, seg, sizeof(seg));
		req->sector = le64_load(seg);
		nsec = le32_load(seg + 8);
		req->dwz_flags = le32_load(seg + 12);
		/* §5.2.6.2: unknown flags, or unmap on a discard, are UNSUPP. */
		if ((req->dwz_flags & ~VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP) ||
		    (discard && req->dwz_flags)) {
			st = VIRTIO_BLK_S_UNSUPP;
			goto done;
		}
		if (nsec == 0 || nsec > BLK_DWZ_MAX_SECTORS || !range_ok(ctx, req->sector, nsec))
			goto done;
		req->len = (uint64_t)nsec * BLK_SECTOR;
		return BLK_REQ_SUBMIT;
	}
	default:
		st = VIRTIO_BLK_S_UNSUPP;
		goto done;
	}

done:
	*status_out = st;
	return BLK_REQ_DONE;
}
