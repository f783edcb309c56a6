/* The snapshot state file (snap.h): a writer that builds the whole image
 * in memory and puts it in place with one rename, and a reader that checks
 * every byte of framing and every checksum before a section is read.
 *
 * Layout, all integers little-endian, every offset a multiple of 8:
 *
 *   header   0   8  magic SNAP_MAGIC ("MVMSNAP\0")
 *            8   4  format version (SNAP_FORMAT_VERSION)
 *           12   4  flags, 0
 *           16   8  total file length in bytes
 *   section  +0  4  tag (SNAP_TAG)
 *   (any     +4  4  instance
 *   number)  +8  4  payload length L (at most SNAP_SECTION_MAX)
 *           +12  4  CRC-32C of the L payload bytes
 *           +16  L  payload, then zeros up to a multiple of 8
 *   trailer  +0  4  tag SNAP_TAG('E','N','D','!')
 *   (a       +4  4  instance 0
 *   section, +8  4  payload length 8
 *   last)   +12  4  CRC-32C of its 8 payload bytes
 *           +16  4  number of sections before it (at most SNAP_SECTIONS_MAX)
 *           +20  4  CRC-32C of every byte of the file before the trailer
 *
 * The tag END! is the trailer's alone: the writer refuses it for a section
 * and the reader refuses a section carrying it, so that the end of a file
 * is never a matter of interpretation. */
#include "vmm/base/snap.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HDR_SIZE 24u
#define SEC_HDR_SIZE 16u
#define TRAILER_SIZE (SEC_HDR_SIZE + 8u)
#define TAG_END SNAP_TAG('E', 'N', 'D', '!')

/* Castagnoli polynomial 0x1EDC6F41, bit-reflected (0x82F63B78): entry i
 * is the CRC register after shifting the byte i through it. */
static const uint32_t crc32c_table[256] = {
	0x00000000, 0xf26b8303, 0xe13b70f7, 0x1350f3f4, 0xc79a971f, 0x35f1141c,
	0x26a1e7e8, 0xd4ca64eb, 0x8ad958cf, 0x78b2dbcc, 0x6be22838, 0x9989ab3b,
	0x4d43cfd0, 0xbf284cd3, 0xac78bf27, 0x5e133c24, 0x105ec76f, 0xe235446c,
	0xf165b798, 0x030e349b, 0xd7c45070, 0x25afd373, 0x36ff2087, 0xc494a384,
	0x9a879fa0, 0x68ec1ca3, 0x7bbcef57, 0x89d76c54, 0x5d1d08bf, 0xaf768bbc,
	0xbc267848, 0x4e4dfb4b, 0x20bd8ede, 0xd2d60ddd, 0xc186fe29, 0x33ed7d2a,
	0xe72719c1, 0x154c9ac2, 0x061c6936, 0xf477ea35, 0xaa64d611, 0x580f5512,
	0x4b5fa6e6, 0xb93425e5, 0x6dfe410e, 0x9f95c20d, 0x8cc531f9, 0x7eaeb2fa,
	0x30e349b1, 0xc288cab2, 0xd1d83946, 0x23b3ba45, 0xf779deae, 0x05125dad,
	0x1642ae59, 0xe4292d5a, 0xba3a117e, 0x4851927d, 0x5b016189, 0xa96ae28a,
	0x7da08661, 0x8fcb0562, 0x9c9bf696, 0x6ef07595, 0x417b1dbc, 0xb3109ebf,
	0xa0406d4b, 0x522bee48, 0x86e18aa3, 0x748a09a0, 0x67dafa54, 0x95b17957,
	0xcba24573, 0x39c9c670, 0x2a993584, 0xd8f2b687, 0x0c38d26c, 0xfe53516f,
	0xed03a29b, 0x1f682198, 0x5125dad3, 0xa34e59d0, 0xb01eaa24, 0x42752927,
	0x96bf4dcc, 0x64d4cecf, 0x77843d3b, 0x85efbe38, 0xdbfc821c, 0x2997011f,
	0x3ac7f2eb, 0xc8ac71e8, 0x1c661503, 0xee0d9600, 0xfd5d65f4, 0x0f36e6f7,
	0x61c69362, 0x93ad1061, 0x80fde395, 0x72966096, 0xa65c047d, 0x5437877e,
	0x4767748a, 0xb50cf789, 0xeb1fcbad, 0x197448ae, 0x0a24bb5a, 0xf84f3859,
	0x2c855cb2, 0xdeeedfb1, 0xcdbe2c45, 0x3fd5af46, 0x7198540d, 0x83f3d70e,
	0x90a324fa, 0x62c8a7f9, 0xb602c312, 0x44694011, 0x5739b3e5, 0xa55230e6,
	0xfb410cc2, 0x092a8fc1, 0x1a7a7c35, 0xe811ff36, 0x3cdb9bdd, 0xceb018de,
	0xdde0eb2a, 0x2f8b6829, 0x82f63b78, 0x709db87b, 0x63cd4b8f, 0x91a6c88c,
	0x456cac67, 0xb7072f64, 0xa457dc90, 0x563c5f93, 0x082f63b7, 0xfa44e0b4,
	0xe9141340, 0x1b7f9043, 0xcfb5f4a8, 0x3dde77ab, 0x2e8e845f, 0xdce5075c,
	0x92a8fc17, 0x60c37f14, 0x73938ce0, 0x81f80fe3, 0x55326b08, 0xa759e80b,
	0xb4091bff, 0x466298fc, 0x1871a4d8, 0xea1a27db, 0xf94ad42f, 0x0b21572c,
	0xdfeb33c7, 0x2d80b0c4, 0x3ed04330, 0xccbbc033, 0xa24bb5a6, 0x502036a5,
	0x4370c551, 0xb11b4652, 0x65d122b9, 0x97baa1ba, 0x84ea524e, 0x7681d14d,
	0x2892ed69, 0xdaf96e6a, 0xc9a99d9e, 0x3bc21e9d, 0xef087a76, 0x1d63f975,
	0x0e330a81, 0xfc588982, 0xb21572c9, 0x407ef1ca, 0x532e023e, 0xa145813d,
	0x758fe5d6, 0x87e466d5, 0x94b49521, 0x66df1622, 0x38cc2a06, 0xcaa7a905,
	0xd9f75af1, 0x2b9cd9f2, 0xff56bd19, 0x0d3d3e1a, 0x1e6dcdee, 0xec064eed,
	0xc38d26c4, 0x31e6a5c7, 0x22b65633, 0xd0ddd530, 0x0417b1db, 0xf67c32d8,
	0xe52cc12c, 0x1747422f, 0x49547e0b, 0xbb3ffd08, 0xa86f0efc, 0x5a048dff,
	0x8ecee914, 0x7ca56a17, 0x6ff599e3, 0x9d9e1ae0, 0xd3d3e1ab, 0x21b862a8,
	0x32e8915c, 0xc083125f, 0x144976b4, 0xe622f5b7, 0xf5720643, 0x07198540,
	0x590ab964, 0xab613a67, 0xb831c993, 0x4a5a4a90, 0x9e902e7b, 0x6cfbad78,
	0x7fab5e8c, 0x8dc0dd8f, 0xe330a81a, 0x115b2b19, 0x020bd8ed, 0xf0605bee,
	0x24aa3f05, 0xd6c1bc06, 0xc5914ff2, 0x37faccf1, 0x69e9f0d5, 0x9b8273d6,
	0x88d28022, 0x7ab90321, 0xae7367ca, 0x5c18e4c9, 0x4f48173d, 0xbd23943e,
	0xf36e6f75, 0x0105ec76, 0x12551f82, 0xe03e9c81, 0x34f4f86a, 0xc69f7b69,
	0xd5cf889d, 0x27a40b9e, 0x79b737ba, 0x8bdcb4b9, 0x988c474d, 0x6ae7c44e,
	0xbe2da0a5, 0x4c4623a6, 0x5f16d052, 0xad7d5351,
};

uint32_t snap_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	/* Inverted in and out, so that a CRC continues across calls and
	 * leading zero bytes still count. */
	crc = ~crc;
	while (len--)
		crc = crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

void snap_tag_name(uint32_t tag, char out[5])
{
	for (unsigned i = 0; i < 4; i++) {
		uint8_t c = (uint8_t)(tag >> (8 * i));

		out[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	out[4] = '\0';
}

/* --- writer --- */

void snap_w_init(struct snap_w *w)
{
	*w = (struct snap_w){ .sec_start = SIZE_MAX };
}

void snap_w_free(struct snap_w *w)
{
	free(w->buf);
	snap_w_init(w);
}

static void w_fail(struct snap_w *w, int err)
{
	if (!w->err)
		w->err = err;
}

/* n more bytes at the end of buf: where they go, or NULL with w->err. */
static uint8_t *w_grow(struct snap_w *w, size_t n)
{
	size_t cap = w->cap ? w->cap : 4096;
	uint8_t *b;

	if (w->err)
		return NULL;
	if (n > w->cap - w->len) {
		while (n > cap - w->len) {
			if (cap > SIZE_MAX / 2) {
				w_fail(w, -ENOMEM);
				return NULL;
			}
			cap *= 2;
		}
		b = realloc(w->buf, cap);
		if (!b) {
			w_fail(w, -ENOMEM);
			return NULL;
		}
		w->buf = b;
		w->cap = cap;
	}
	w->len += n;
	return w->buf + w->len - n;
}

/* n more payload bytes of the open section. A section the reader would
 * refuse fails here, before megabytes of it are copied. */
static uint8_t *w_payload(struct snap_w *w, size_t n)
{
	if (w->err)
		return NULL;
	if (w->sec_start == SIZE_MAX) {
		w_fail(w, -EINVAL);
		return NULL;
	}
	if (n > SNAP_SECTION_MAX - (w->len - w->sec_start - SEC_HDR_SIZE)) {
		w_fail(w, -EFBIG);
		return NULL;
	}
	return w_grow(w, n);
}

void snap_begin(struct snap_w *w, uint32_t tag, uint32_t instance)
{
	uint8_t *p;

	if (w->err)
		return;
	if (w->sec_start != SIZE_MAX || tag == TAG_END) {
		w_fail(w, -EINVAL);
		return;
	}
	if (w->nsections >= SNAP_SECTIONS_MAX) {
		w_fail(w, -EFBIG);
		return;
	}
	p = w_grow(w, SEC_HDR_SIZE);
	if (!p)
		return;
	le32_store(p, tag);
	le32_store(p + 4, instance);
	memset(p + 8, 0, 8);            /* length and CRC: snap_end */
	w->sec_start = w->len - SEC_HDR_SIZE;
}

void snap_end(struct snap_w *w)
{
	size_t start = w->sec_start, plen;
	uint8_t *pad, *h;

	if (w->err)
		return;
	if (start == SIZE_MAX) {
		w_fail(w, -EINVAL);
		return;
	}
	w->sec_start = SIZE_MAX;
	plen = w->len - start - SEC_HDR_SIZE;
	pad = w_grow(w, ALIGN_UP(plen, 8) - plen);
	if (!pad)
		return;
	memset(pad, 0, ALIGN_UP(plen, 8) - plen);
	h = w->buf + start;
	le32_store(h + 8, (uint32_t)plen);
	le32_store(h + 12, snap_crc32c(0, h + SEC_HDR_SIZE, plen));
	w->nsections++;
}

void snap_put_u8(struct snap_w *w, uint8_t v)
{
	uint8_t *p = w_payload(w, 1);

	if (p)
		*p = v;
}

void snap_put_u16(struct snap_w *w, uint16_t v)
{
	uint8_t *p = w_payload(w, 2);

	if (p)
		le16_store(p, v);
}

void snap_put_u32(struct snap_w *w, uint32_t v)
{
	uint8_t *p = w_payload(w, 4);

	if (p)
		le32_store(p, v);
}

void snap_put_u64(struct snap_w *w, uint64_t v)
{
	uint8_t *p = w_payload(w, 8);

	if (p)
		le64_store(p, v);
}

void snap_put_bytes(struct snap_w *w, const void *p, size_t n)
{
	uint8_t *d = w_payload(w, n);

	if (d && n)
		memcpy(d, p, n);
}

void snap_put_str(struct snap_w *w, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	uint8_t *d;

	if (n > SNAP_SECTION_MAX) {
		w_fail(w, -EFBIG);
		return;
	}
	d = w_payload(w, 4 + n);
	if (!d)
		return;
	le32_store(d, (uint32_t)n);
	if (n)
		memcpy(d + 4, s, n);
}

int snap_w_image(struct snap_w *w, uint8_t **out, size_t *outlen)
{
	size_t len, end;
	uint8_t *img, *t;

	*out = NULL;
	*outlen = 0;
	if (!w->err && w->sec_start != SIZE_MAX)
		w_fail(w, -EINVAL);
	if (w->err)
		return w->err;
	end = HDR_SIZE + w->len;
	len = end + TRAILER_SIZE;
	img = malloc(len);
	if (!img) {
		w_fail(w, -ENOMEM);
		return w->err;
	}
	memcpy(img, SNAP_MAGIC, 8);
	le32_store(img + 8, SNAP_FORMAT_VERSION);
	le32_store(img + 12, 0);
	le64_store(img + 16, len);
	if (w->len)
		memcpy(img + HDR_SIZE, w->buf, w->len);
	t = img + end;
	le32_store(t, TAG_END);
	le32_store(t + 4, 0);
	le32_store(t + 8, 8);
	le32_store(t + 16, w->nsections);
	le32_store(t + 20, snap_crc32c(0, img, end));
	le32_store(t + 12, snap_crc32c(0, t + SEC_HDR_SIZE, 8));
	*out = img;
	*outlen = len;
	return 0;
}

/* Make the rename in name's directory durable: without it a crash can
 * leave the old file, or none, under name even though the write returned. */
static int sync_dir(int dirfd, const char *name, char *path, size_t pathlen)
{
	const char *slash = strrchr(name, '/');
	int dfd, ret = 0;

	if (!slash)
		snprintf(path, pathlen, ".");
	else
		snprintf(path, pathlen, "%.*s", slash == name ? 1 : (int)(slash - name), name);
	dfd = openat(dirfd, path, SNAP_OPEN_DIR);
	if (dfd < 0)
		return -errno;
	if (fsync(dfd) < 0)
		ret = -errno;
	close(dfd);
	return ret;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_err(char *err, size_t errlen, int ret, const char *name)
{
	return err_set(err, errlen, ret, "snapshot state %s: write: %s; check the directory's "
		       "space and permissions", name, strerror(-ret));
}

int snap_w_write(struct snap_w *w, int dirfd, const char *name, char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	uint8_t *img;
	size_t len;
	int fd, ret;

	ret = snap_w_image(w, &img, &len);
	if (ret == -ENOMEM)
		return err_set(err, errlen, ret, "snapshot state %s: out of memory for %zu bytes of "
			       "state; free some memory and take the snapshot again", name, w->len);
	if (ret == -EFBIG)
		return err_set(err, errlen, ret, "snapshot state %s: a section over %u bytes or over "
			       "%u sections, more than a snapshot holds: a bug in mvm, report it",
			       name, SNAP_SECTION_MAX, SNAP_SECTIONS_MAX);
	if (ret)
		return err_set(err, errlen, ret, "snapshot state %s: built with a section left open "
			       "or data outside one: a bug in mvm, report it", name);
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", name) >= sizeof(tmp)) {
		ret = -ENAMETOOLONG;
		goto free_image;
	}
	/* 0600: the state holds the guest's secrets as much as its RAM does.
	 * O_NOFOLLOW: a link planted at NAME.tmp is not followed elsewhere. */
	fd = openat(dirfd, tmp, SNAP_OPEN_WRITE, 0600);
	if (fd < 0) {
		ret = -errno;
		goto free_image;
	}
	ret = write_all(fd, img, len);
	if (ret)
		goto close_fd;
	if (fsync(fd) < 0) {
		ret = -errno;
		goto close_fd;
	}
	/* The descriptor is gone even when close fails (Linux). */
	if (close(fd) < 0) {
		ret = -errno;
		goto unlink_tmp;
	}
	if (renameat(dirfd, tmp, dirfd, name) < 0) {
		ret = -errno;
		goto unlink_tmp;
	}
	free(img);
	/* The file is in place; one that may not survive a crash is still
	 * a failure to the caller. */
	ret = sync_dir(dirfd, name, tmp, sizeof(tmp));
	if (ret)
		return write_err(err, errlen, ret, name);
	return 0;
close_fd:
	close(fd);
unlink_tmp:
	unlinkat(dirfd, tmp, 0);
free_image:
	free(img);
	return write_err(err, errlen, ret, name);
}

/* --- reader --- */

struct sec {
	uint32_t tag, instance, len, crc;
};

static void sec_load(const uint8_t *p, struct sec *s)
{
	s->tag = le32_load(p);
	s->instance = le32_load(p + 4);
	s->len = le32_load(p + 8);
	s->crc = le32_load(p + 12);
}

static size_t sec_next(size_t off, uint32_t len)
{
	return off + SEC_HDR_SIZE + ALIGN_UP((size_t)len, 8);
}

#define DAMAGED "; the file is damaged: take the snapshot again"

/* The sections between the header and the trailer (end): each framed,
 * padded and checked. Their number, or -EINVAL with the message. */
static int check_sections(const uint8_t *buf, size_t end, unsigned *count, char *err,
			  size_t errlen)
{
	size_t off, padded;
	unsigned n = 0;
	struct sec s;
	uint32_t crc;
	char tn[5];

	for (off = HDR_SIZE; off < end; off = sec_next(off, s.len)) {
		const uint8_t *pl = buf + off + SEC_HDR_SIZE;

		if (end - off < SEC_HDR_SIZE)
			return err_set(err, errlen, -EINVAL, "byte %zu: a section header of %u bytes "
				       "runs into the trailer at byte %zu" DAMAGED,
				       off, SEC_HDR_SIZE, end);
		sec_load(buf + off, &s);
		snap_tag_name(s.tag, tn);
		if (s.tag == TAG_END)
			return err_set(err, errlen, -EINVAL, "byte %zu, section %s/%u: a trailer "
				       "before the file's end (byte %zu)" DAMAGED,
				       off, tn, s.instance, end);
		if (n == SNAP_SECTIONS_MAX)
			return err_set(err, errlen, -EINVAL, "byte %zu, section %s/%u: more than "
				       "the %u sections a snapshot holds" DAMAGED,
				       off, tn, s.instance, SNAP_SECTIONS_MAX);
		if (s.len > SNAP_SECTION_MAX)
			return err_set(err, errlen, -EINVAL, "byte %zu, section %s/%u: %" PRIu32
				       " bytes long, more than the %u a section holds" DAMAGED,
				       off, tn, s.instance, s.len, SNAP_SECTION_MAX);
		padded = ALIGN_UP((size_t)s.len, 8);
		if (padded > end - off - SEC_HDR_SIZE)
			return err_set(err, errlen, -EINVAL, "byte %zu, section %s/%u: %" PRIu32
				       " bytes long, runs past the last section's end at byte %zu"
				       DAMAGED, off, tn, s.instance, s.len, end);
		for (size_t i = s.len; i < padded; i++)
			if (pl[i])
				return err_set(err, errlen, -EINVAL, "byte %zu, section %s/%u: "
					       "padding byte %zu is not zero" DAMAGED,
					       off, tn, s.instance, off + SEC_HDR_SIZE + i);
		crc = snap_crc32c(0, pl, s.len);
		if (crc != s.crc)
			return err_set(err, errlen, -EINVAL, "byte %zu, section %s/%u: checksum "
				       "0x%08" PRIx32 ", its %" PRIu32 " bytes give 0x%08" PRIx32
				       DAMAGED, off, tn, s.instance, s.crc, s.len, crc);
		n++;
	}
	*count = n;
	return 0;
}

int snap_open(struct snap_file *f, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
	size_t end;
	uint64_t flen;
	uint32_t version, flags, crc, want;
	unsigned n = 0;
	struct sec s;
	char tn[5];
	int ret;

	/* What is there of the magic first: a short file of something
	 * else is not a snapshot, not a truncated one. */
	if (len && memcmp(buf, SNAP_MAGIC, MIN(len, (size_t)8)))
		return err_set(err, errlen, -EINVAL, "byte 0: not a mvm snapshot (no %s magic); "
			       "give a state file that mvm's snapshot wrote", SNAP_MAGIC);
	if (len >= 12) {
		version = le32_load(buf + 8);
		if (version != SNAP_FORMAT_VERSION)
			return err_set(err, errlen, -EPROTO, "snapshot format %" PRIu32 ", this mvm "
				       "reads %u: take the snapshot again with this mvm",
				       version, SNAP_FORMAT_VERSION);
	}
	if (len < HDR_SIZE + TRAILER_SIZE)
		return err_set(err, errlen, -EINVAL, "truncated: file has %zu bytes, the smallest "
			       "snapshot has %u; take the snapshot again", len,
			       HDR_SIZE + TRAILER_SIZE);
	flags = le32_load(buf + 12);
	if (flags)
		return err_set(err, errlen, -EINVAL, "byte 12: header flags 0x%" PRIx32 ", format "
			       "%u has none" DAMAGED, flags, SNAP_FORMAT_VERSION);
	flen = le64_load(buf + 16);
	if (flen > len)
		return err_set(err, errlen, -EINVAL, "truncated: file has %zu bytes, header says %"
			       PRIu64 "; take the snapshot again", len, flen);
	if (flen < len)
		return err_set(err, errlen, -EINVAL, "file has %zu bytes, header says %" PRIu64
			       ": something was appended; take the snapshot again", len, flen);
	end = len - TRAILER_SIZE;
	ret = check_sections(buf, end, &n, err, errlen);
	if (ret)
		return ret;

	sec_load(buf + end, &s);
	snap_tag_name(s.tag, tn);
	if (s.tag != TAG_END || s.instance != 0 || s.len != 8)
		return err_set(err, errlen, -EINVAL, "byte %zu: no trailer END!/0 of 8 bytes at the "
			       "file's end, section %s/%" PRIu32 " of %" PRIu32 " bytes instead" DAMAGED,
			       end, tn, s.instance, s.len);
	crc = snap_crc32c(0, buf + end + SEC_HDR_SIZE, 8);
	if (crc != s.crc)
		return err_set(err, errlen, -EINVAL, "byte %zu, trailer END!/0: checksum 0x%08"
			       PRIx32 ", its 8 bytes give 0x%08" PRIx32 DAMAGED, end, s.crc, crc);
	want = le32_load(buf + end + SEC_HDR_SIZE);
	if (want != n)
		return err_set(err, errlen, -EINVAL, "byte %zu, trailer END!/0: counts %" PRIu32
			       " sections, the file has %u" DAMAGED, end, want, n);
	/* The sections' checksums leave out their headers: this one
	 * covers a flipped tag or instance too. */
	want = le32_load(buf + end + SEC_HDR_SIZE + 4);
	crc = snap_crc32c(0, buf, end);
	if (want != crc)
		return err_set(err, errlen, -EINVAL, "byte %zu, trailer END!/0: file checksum 0x%08"
			       PRIx32 ", bytes 0 to %zu give 0x%08" PRIx32 DAMAGED,
			       end, want, end - 1, crc);
	*f = (struct snap_file){ .buf = buf, .len = len, .version = SNAP_FORMAT_VERSION,
				 .nsections = n, .first = HDR_SIZE };
	return 0;
}

int snap_find(const struct snap_file *f, uint32_t tag, uint32_t instance, struct snap_r *r)
{
	size_t off = f->first;
	struct sec s;

	for (unsigned i = 0; i < f->nsections; i++, off = sec_next(off, s.len)) {
		sec_load(f->buf + off, &s);
		if (s.tag == tag && s.instance == instance) {
			*r = (struct snap_r){ .p = f->buf + off + SEC_HDR_SIZE, .len = s.len,
					      .tag = tag, .instance = instance };
			return 0;
		}
	}
	/* A caller that reads on regardless gets zeros, and snap_done
	 * says the section was missing. */
	*r = (struct snap_r){ .tag = tag, .instance = instance, .err = -ENOENT };
	return -ENOENT;
}

unsigned snap_count(const struct snap_file *f, uint32_t tag)
{
	size_t off = f->first;
	unsigned n = 0;
	struct sec s;

	for (unsigned i = 0; i < f->nsections; i++, off = sec_next(off, s.len)) {
		sec_load(f->buf + off, &s);
		n += s.tag == tag;
	}
	return n;
}

/* n bytes of the section into dst, or zeros there and the error kept
 * (the first one: later reads of a broken section stay zeros). */
static bool r_take(struct snap_r *r, void *dst, size_t n)
{
	if (!r->err && n > r->len - r->off)
		r->err = -EINVAL;
	if (r->err) {
		if (n)
			memset(dst, 0, n);
		return false;
	}
	if (n)
		memcpy(dst, r->p + r->off, n);
	r->off += n;
	return true;
}

uint8_t snap_get_u8(struct snap_r *r)
{
	uint8_t v;

	r_take(r, &v, 1);
	return v;
}

uint16_t snap_get_u16(struct snap_r *r)
{
	uint8_t b[2];

	r_take(r, b, 2);
	return le16_load(b);
}

uint32_t snap_get_u32(struct snap_r *r)
{
	uint8_t b[4];

	r_take(r, b, 4);
	return le32_load(b);
}

uint64_t snap_get_u64(struct snap_r *r)
{
	uint8_t b[8];

	r_take(r, b, 8);
	return le64_load(b);
}

void snap_get_bytes(struct snap_r *r, void *p, size_t n)
{
	r_take(r, p, n);
}

void snap_get_str(struct snap_r *r, char *buf, size_t buflen)
{
	uint32_t n = snap_get_u32(r);

	if (buflen)
		buf[0] = '\0';
	if (r->err)
		return;
	/* Room for the NUL too; buflen 0 holds not even "". */
	if (n >= buflen) {
		r->err = -EINVAL;
		return;
	}
	if (!r_take(r, buf, n))
		return;
	if (memchr(buf, '\0', n)) {
		r->err = -EINVAL;
		buf[0] = '\0';
		return;
	}
	buf[n] = '\0';
}

size_t snap_left(const struct snap_r *r)
{
	return r->len - r->off;
}

int snap_done(const struct snap_r *r, char *err, size_t errlen)
{
	char tn[5];

	snap_tag_name(r->tag, tn);
	if (r->err == -ENOENT)
		return err_set(err, errlen, -EINVAL, "section %s/%" PRIu32 ": not in the snapshot; "
			       "take the snapshot again with this mvm", tn, r->instance);
	if (r->err)
		return err_set(err, errlen, -EINVAL, "section %s/%" PRIu32 ": read past its end "
			       "(%zu bytes) or a string too long or holding a NUL: not what this "
			       "mvm wrote; take the snapshot again with this mvm",
			       tn, r->instance, r->len);
	if (r->off != r->len)
		return err_set(err, errlen, -EINVAL, "section %s/%" PRIu32 ": %zu of its %zu bytes "
			       "left unread: not what this mvm wrote; take the snapshot again with "
			       "this mvm", tn, r->instance, r->len - r->off, r->len);
	return 0;
}
