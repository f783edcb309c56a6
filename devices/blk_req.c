/* virtio-blk request validation: see blk_req.h. */
#include "devices/blk_req.h"
#include "devices/blk_image.h"
#include "vmm/byteorder.h"

#include <errno.h>
#include <string.h>

#define MIN_U64(a, b) ((uint64_t)(a) < (uint64_t)(b) ? (uint64_t)(a) : (uint64_t)(b))

/* The readable buffers [0, n_readable) and the writable ones [n_readable, n)
 * each form one byte stream; `skip` bytes into the stream [first, end). */
struct blk_span {
	unsigned first, end;
};

/* Copy len bytes at stream offset skip (caller checked the stream is long
 * enough). Direction: to_guest copies src into guest memory. */
static void span_copy(const struct virtq_chain *c, struct blk_span s, uint64_t skip,
		      void *host, uint64_t len, bool to_guest)
{
	uint8_t *p = host;
	unsigned i;

	for (i = s.first; i < s.end && len; i++) {
		uint64_t blen = c->buf[i].len, n;
		if (skip >= blen) {
			skip -= blen;
			continue;
		}
		n = MIN_U64(blen - skip, len);
		if (to_guest)
			memcpy((uint8_t *)c->buf[i].host + skip, p, n);
		else
			memcpy(p, (uint8_t *)c->buf[i].host + skip, n);
		p += n;
		len -= n;
		skip = 0;
	}
}

/* Describe len bytes at stream offset skip as iovecs; -E2BIG past BLK_SEG_MAX. */
static int span_iov(const struct virtq_chain *c, struct blk_span s, uint64_t skip,
		    uint64_t len, struct blk_req *r)
{
	unsigned i;

	r->niov = 0;
	for (i = s.first; i < s.end && len; i++) {
		uint64_t blen = c->buf[i].len, n;
		if (skip >= blen) {
			skip -= blen;
			continue;
		}
		if (r->niov == BLK_SEG_MAX)
			return -E2BIG;
		n = MIN_U64(blen - skip, len);
		r->iov[r->niov].iov_base = (uint8_t *)c->buf[i].host + skip;
		r->iov[r->niov].iov_len = n;
		r->niov++;
		len -= n;
		skip = 0;
	}
	return 0;
}

static bool range_ok(const struct blk_req_ctx *ctx, uint64_t sector, uint64_t nsec)
{
	return sector <= ctx->capacity && nsec <= ctx->capacity - sector;
}

enum blk_verdict blk_req_parse(const struct virtq_chain *c, const struct blk_req_ctx *ctx,
			       struct blk_req *req, uint8_t *status_out, uint32_t *used_len)
{
	struct blk_span rd = { 0, c->n_readable }, wr = { c->n_readable, c->n };
	uint64_t rlen = 0, wlen = 0, dlen;
	uint8_t hdr[BLK_REQ_HDR_BYTES];
	uint8_t st = VIRTIO_BLK_S_IOERR;
	unsigned i;

	*used_len = 0;
	/* No writable buffer, or a zero-length one anywhere (the status byte
	 * might be the empty one): nothing to write the status to. */
	if (c->n_readable >= c->n || c->has_empty)
		return BLK_REQ_NO_STATUS;
	for (i = 0; i < c->n; i++) {
		if (i < c->n_readable)
			rlen += c->buf[i].len;
		else
			wlen += c->buf[i].len;
	}
	/* The status byte: last byte of the last writable buffer. */
	req->status = (uint8_t *)c->buf[c->n - 1].host + c->buf[c->n - 1].len - 1;
	wlen -= 1;
	*used_len = 1;

	if (rlen < BLK_REQ_HDR_BYTES)
		goto done;
	/* Copy the header once; the guest may rewrite it meanwhile. */
	span_copy(c, rd, 0, hdr, sizeof(hdr), false);
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
		if (span_iov(c, in ? wr : rd, in ? 0 : BLK_REQ_HDR_BYTES, dlen, req))
			goto done;
		req->len = dlen;
		return BLK_REQ_SUBMIT;
	}
	case VIRTIO_BLK_T_FLUSH:
		return BLK_REQ_SUBMIT;
	case VIRTIO_BLK_T_GET_ID: {
		uint8_t id[VIRTIO_BLK_ID_BYTES] = { 0 };
		size_t n = ctx->serial ? strnlen(ctx->serial, sizeof(id)) : 0;

		if (wlen < sizeof(id))
			goto done;
		memcpy(id, ctx->serial, n);
		span_copy(c, wr, 0, id, sizeof(id), true);
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
		span_copy(c, rd, BLK_REQ_HDR_BYTES, seg, sizeof(seg), false);
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
	*req->status = st;
	*status_out = st;
	return BLK_REQ_DONE;
}
