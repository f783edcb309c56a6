/* The snapshot state file (vmm/base/snap.c): snap_open on any bytes, the
 * getters on whatever it accepts, and the writer from any sequence of
 * calls. The input: a mode byte, a getter script (a length byte, then
 * that many bytes: which getter, how many bytes, what buffer), then by
 * mode:
 *  - raw: the rest is the file, as it is;
 *  - sealed: a damage and where, then sections (tag, instance, a length
 *    and the payload) that the harness frames, pads and checksums as the
 *    layout says (snap.c's comment), then perhaps damages in one way: a
 *    bit flipped anywhere, bytes cut from the end or added to it, or,
 *    with the file's checksum made right again, a padding byte set, the
 *    trailer's count, the version or the flags changed;
 *  - writer: the rest is calls to the writer (begin, end, every put, in
 *    any order, misuse too), imaged with snap_w_image.
 * Each file lies in a block of its exact size, so ASan sees any read
 * outside it.
 *
 * Invariants (besides ASan/UBSan):
 *  - a sealed file without damage is accepted, one with damage refused
 *    (-EPROTO for the version, -EINVAL else); any refusal is -EINVAL or
 *    -EPROTO with a one-line message;
 *  - an accepted file is everything the layout says, checked by the
 *    harness on its own: header fields, each section's framing, zero
 *    padding and checksum, the trailer's count and checksums;
 *  - the writer fails (-EINVAL) exactly on misuse, and its image is
 *    accepted, counting its sections, and reads back what was put, typed
 *    as it was put, each section to its end (snap_done 0);
 *  - an accepted file's sections, walked by the harness from f.first,
 *    lie inside the file and end exactly at the trailer, number
 *    f.nsections, and each is found by snap_find (the first of its tag
 *    and instance) with its payload, counted by snap_count;
 *  - the getters, in any order on any section, return exactly the
 *    section's bytes (little-endian) while inside it, and zeros from the
 *    first overrun on, err -EINVAL from then; strings come back
 *    NUL-terminated within their buffer; snap_left and snap_done agree
 *    with a model of the read (done is 0 iff no error and nothing left);
 *  - an absent section is -ENOENT and reads as zeros that fail done. */
#include "tests/fuzz/fuzz.h"
#include "vmm/base/snap.h"

#define HDR 24u
#define SEC_HDR 16u
#define TRAILER 24u
#define T_END SNAP_TAG('E', 'N', 'D', '!')

enum { MODE_RAW, MODE_SEALED, MODE_WRITER, NMODES };

struct script {
	const uint8_t *p;
	size_t n;
};

static void check_msg(const char *err, int ret)
{
	FZ_ASSERT(ret == -EINVAL || ret == -EPROTO);
	FZ_ASSERT(err[0]);
	for (const char *c = err; *c; c++)
		FZ_ASSERT(*c != '\n');
}

/* The getters on r against a model that reads p (the section's payload
 * as the harness found it, len bytes) directly. */
static void run_script(struct snap_r *r, const uint8_t *p, size_t len, const struct script *sc)
{
	struct fz in = { sc->p, sc->n };
	size_t off = 0;
	int err = 0;
	char msg[512];

	while (fz_left(&in)) {
		uint8_t op = fz_u8(&in), arg = fz_u8(&in);
		static const unsigned widths[] = { 1, 2, 4, 8 };
		uint8_t bytes[256];
		char str[24];
		size_t w;
		uint64_t v = 0, want = 0;

		switch (op % 6) {
		case 0: case 1: case 2: case 3:
			w = widths[op % 6];
			switch (w) {
			case 1: v = snap_get_u8(r); break;
			case 2: v = snap_get_u16(r); break;
			case 4: v = snap_get_u32(r); break;
			case 8: v = snap_get_u64(r); break;
			}
			if (!err && w > len - off)
				err = -EINVAL;
			if (!err) {
				for (size_t i = 0; i < w; i++)
					want |= (uint64_t)p[off + i] << (8 * i);
				off += w;
			}
			FZ_ASSERT(v == want);
			break;
		case 4:
			w = arg;
			memset(bytes, 0xa5, sizeof(bytes));
			snap_get_bytes(r, bytes, w);
			if (!err && w > len - off)
				err = -EINVAL;
			if (!err) {
				FZ_ASSERT(!memcmp(bytes, p + off, w));
				off += w;
			} else {
				for (size_t i = 0; i < w; i++)
					FZ_ASSERT(bytes[i] == 0);
			}
			FZ_ASSERT(w == sizeof(bytes) || bytes[w] == 0xa5);
			break;
		default: {
			/* Buffers of 0 to 23 bytes, guarded on both sides by
			 * the array's end (ASan) and a canary. */
			size_t buflen = arg % sizeof(str);
			char *buf = str + sizeof(str) - buflen;

			memset(str, 'Z', sizeof(str));
			snap_get_str(r, buf, buflen);
			for (char *c = str; c < buf; c++)
				FZ_ASSERT(*c == 'Z');
			if (!err && len - off < 4) {
				err = -EINVAL;
			} else if (!err) {
				uint32_t n = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 |
					     (uint32_t)p[off + 2] << 16 | (uint32_t)p[off + 3] << 24;

				off += 4;
				if (n >= buflen || n > len - off) {
					err = -EINVAL;
				} else if (memchr(p + off, 0, n)) {
					err = -EINVAL;
					off += n;
				} else {
					FZ_ASSERT(!memcmp(buf, p + off, n) && buf[n] == '\0');
					off += n;
				}
			}
			if (err && buflen)
				FZ_ASSERT(buf[0] == '\0');
			break;
		}
		}
		FZ_ASSERT(r->err == err);
		FZ_ASSERT(snap_left(r) == len - off);
	}
	msg[0] = '\0';
	if (!err && off == len) {
		FZ_ASSERT(snap_done(r, msg, sizeof(msg)) == 0);
	} else {
		FZ_ASSERT(snap_done(r, msg, sizeof(msg)) == -EINVAL);
		FZ_ASSERT(!strncmp(msg, "section ", 8) && !strchr(msg, '\n'));
	}
}

/* Every section of an accepted file, walked here from f->first. */
static void walk(const struct snap_file *f, const uint8_t *buf, size_t len,
		 const struct script *sc)
{
	size_t off = f->first, end = len - TRAILER, *offs;
	unsigned n = f->nsections;
	struct snap_r r;

	FZ_ASSERT(f->buf == buf && f->len == len && f->version == SNAP_FORMAT_VERSION);
	FZ_ASSERT(f->first == HDR && n <= SNAP_SECTIONS_MAX);
	/* Accepted: the file is everything the layout says, checked here
	 * on its own. */
	FZ_ASSERT(len >= HDR + TRAILER && !memcmp(buf, SNAP_MAGIC, 8));
	FZ_ASSERT(le32_load(buf + 8) == SNAP_FORMAT_VERSION && le32_load(buf + 12) == 0);
	FZ_ASSERT(le64_load(buf + 16) == len);
	FZ_ASSERT(le32_load(buf + end) == T_END && le32_load(buf + end + 4) == 0);
	FZ_ASSERT(le32_load(buf + end + 8) == 8);
	FZ_ASSERT(le32_load(buf + end + 12) == snap_crc32c(0, buf + end + SEC_HDR, 8));
	FZ_ASSERT(le32_load(buf + end + 16) == n);
	FZ_ASSERT(le32_load(buf + end + 20) == snap_crc32c(0, buf, end));
	offs = malloc((n ? n : 1) * sizeof(*offs));
	FZ_ASSERT(offs);
	for (unsigned i = 0; i < n; i++) {
		uint32_t plen;

		FZ_ASSERT(off <= end && end - off >= SEC_HDR);
		plen = le32_load(buf + off + 8);
		FZ_ASSERT(plen <= SNAP_SECTION_MAX);
		FZ_ASSERT(ALIGN_UP((size_t)plen, 8) <= end - off - SEC_HDR);
		FZ_ASSERT(le32_load(buf + off) != T_END);
		FZ_ASSERT(le32_load(buf + off + 12) == snap_crc32c(0, buf + off + SEC_HDR, plen));
		for (size_t j = plen; j < ALIGN_UP((size_t)plen, 8); j++)
			FZ_ASSERT(buf[off + SEC_HDR + j] == 0);
		offs[i] = off;
		off += SEC_HDR + ALIGN_UP((size_t)plen, 8);
	}
	FZ_ASSERT(off == end);

	for (unsigned i = 0; i < n; i++) {
		const uint8_t *h = buf + offs[i];
		uint32_t tag = le32_load(h), inst = le32_load(h + 4), plen = le32_load(h + 8);
		unsigned first = i, count = 0;
		char name[5];

		for (unsigned j = 0; j < n; j++) {
			const uint8_t *g = buf + offs[j];

			if (le32_load(g) == tag) {
				count++;
				if (j < first && le32_load(g + 4) == inst)
					first = j;
			}
		}
		FZ_ASSERT(snap_count(f, tag) == count);
		snap_tag_name(tag, name);
		FZ_ASSERT(strlen(name) == 4);
		FZ_ASSERT(snap_find(f, tag, inst, &r) == 0);
		FZ_ASSERT(r.tag == tag && r.instance == inst && r.off == 0 && r.err == 0);
		FZ_ASSERT(r.p == buf + offs[first] + SEC_HDR);
		if (first != i)
			continue;
		FZ_ASSERT(r.len == plen);
		run_script(&r, r.p, r.len, sc);
	}
	free(offs);

	/* A tag no section carries (the trailer's). */
	FZ_ASSERT(snap_find(f, T_END, 0, &r) == -ENOENT);
	FZ_ASSERT(snap_get_u64(&r) == 0 && snap_left(&r) == 0 && r.err);
	FZ_ASSERT(snap_done(&r, NULL, 0) == -EINVAL);
	FZ_ASSERT(snap_count(f, T_END) == 0);
}

/* Open a copy of buf in a block of its own size; walk it if accepted.
 * The verdict. */
static int open_and_walk(const uint8_t *data, size_t len, const struct script *sc)
{
	uint8_t *buf = malloc(len ? len : 1);
	struct snap_file f;
	char err[512];
	int ret;

	FZ_ASSERT(buf);
	if (len)
		memcpy(buf, data, len);
	err[0] = '\0';
	ret = snap_open(&f, buf, len, err, sizeof(err));
	if (ret)
		check_msg(err, ret);
	else
		walk(&f, buf, len, sc);
	free(buf);
	return ret;
}

/* --- sealed: the harness's own framing -------------------------------- */

static uint32_t crc(const uint8_t *p, size_t n)
{
	return snap_crc32c(0, p, n);
}

/* The header's length and the trailer (count, checksums) for the len
 * bytes of header and sections: after an edit, a file that only the
 * edit itself can make wrong. */
static void seal(uint8_t *b, size_t len, uint32_t count)
{
	uint8_t *t = b + len;

	le64_store(b + 16, len + TRAILER);
	le32_store(t, T_END);
	le32_store(t + 4, 0);
	le32_store(t + 8, 8);
	le32_store(t + 16, count);
	le32_store(t + 20, crc(b, len));
	le32_store(t + 12, crc(t + SEC_HDR, 8));
}

static void fuzz_sealed(struct fz *in, const struct script *sc)
{
	size_t cap = 64 * 1024, len = HDR, nsec = 0, padded[64], npadded = 0;
	uint8_t *b = calloc(1, cap + TRAILER + 64);
	/* What damage, and where: read first, the sections take the rest. */
	uint8_t dmg = fz_u8(in);
	uint16_t dpos = fz_u16(in);

	FZ_ASSERT(b);
	/* Sections while the input lasts (and room does). */
	while (fz_left(in) && nsec < 64) {
		uint32_t tag = fz_u32(in), inst = fz_u32(in), plen = fz_u16(in) % 1024;

		if (tag == T_END)
			tag = 0;
		if (len + SEC_HDR + ALIGN_UP(plen, 8) > cap)
			break;
		le32_store(b + len, tag);
		le32_store(b + len + 4, inst);
		le32_store(b + len + 8, plen);
		fz_bytes(in, b + len + SEC_HDR, plen);
		le32_store(b + len + 12, crc(b + len + SEC_HDR, plen));
		if (plen % 8)
			padded[npadded++] = len + SEC_HDR + plen;      /* its first padding byte */
		len += SEC_HDR + ALIGN_UP(plen, 8);
		nsec++;
	}
	memcpy(b, SNAP_MAGIC, 8);
	le32_store(b + 8, SNAP_FORMAT_VERSION);
	seal(b, len, (uint32_t)nsec);

	/* The damages 4 to 7 are sealed again after the edit, so that
	 * the file's checksum is right and only the edit can be refused. */
	switch (dmg % 8) {
	case 0:
		FZ_ASSERT(open_and_walk(b, len + TRAILER, sc) == 0);
		break;
	case 1:
		/* CRC-32C sees every single-bit error in what it covers,
		 * and everything else is checked field by field. */
		b[dpos % (len + TRAILER)] ^= (uint8_t)(1u << (dmg >> 5));
		FZ_ASSERT(open_and_walk(b, len + TRAILER, sc) != 0);
		break;
	case 2:
		FZ_ASSERT(open_and_walk(b, len + TRAILER - 1 - dpos % (len + TRAILER), sc) != 0);
		break;
	case 3:
		FZ_ASSERT(open_and_walk(b, len + TRAILER + 1 + dpos % 64, sc) != 0);
		break;
	case 4: {
		size_t pad = npadded ? padded[dpos % npadded] : 0;

		if (!npadded)
			break;
		/* Sections start 8-aligned: pad & 7 is the payload's tail. */
		b[pad + (dmg >> 3) % (8 - (pad & 7))] = (uint8_t)(dmg | 1);
		seal(b, len, (uint32_t)nsec);
		FZ_ASSERT(open_and_walk(b, len + TRAILER, sc) == -EINVAL);
		break;
	}
	case 5:
		seal(b, len, (uint32_t)nsec + 1 + dpos);
		FZ_ASSERT(open_and_walk(b, len + TRAILER, sc) == -EINVAL);
		break;
	case 6:
		le32_store(b + 8, SNAP_FORMAT_VERSION + 1 + dpos);
		seal(b, len, (uint32_t)nsec);
		FZ_ASSERT(open_and_walk(b, len + TRAILER, sc) == -EPROTO);
		break;
	default:
		le32_store(b + 12, 1u + dpos);
		seal(b, len, (uint32_t)nsec);
		FZ_ASSERT(open_and_walk(b, len + TRAILER, sc) == -EINVAL);
		break;
	}
	free(b);
}

/* --- writer: calls in any order, against a model ------------------------ */

#define W_SECTIONS 32
#define W_ITEMS 64

enum { IT_U8, IT_U16, IT_U32, IT_U64, IT_BYTES, IT_STR };

struct w_item {
	uint8_t kind;
	uint64_t v;
	uint8_t bytes[32];
	size_t n;
};

struct w_sec {
	uint32_t tag, inst;
	struct w_item it[W_ITEMS];
	unsigned nit;
};

struct w_model {
	struct w_sec s[W_SECTIONS];
	unsigned n;
	bool open;
	bool lost;                      /* more items than the model keeps */
	int err;
};

static const uint32_t w_tags[] = {
	SNAP_TAG('V', 'C', 'P', 'U'), SNAP_TAG('D', 'E', 'V', '0'), SNAP_TAG('R', 'A', 'M', ' '),
	T_END,
};

static void fuzz_writer(struct fz *in, const struct script *sc)
{
	struct w_model *m = calloc(1, sizeof(*m));
	struct snap_file f;
	struct snap_w w;
	uint8_t *img = NULL;
	size_t len = 0;
	char err[512];
	int ret;

	FZ_ASSERT(m);
	snap_w_init(&w);
	while (fz_left(in)) {
		uint8_t op = fz_u8(in);
		struct w_sec *s = m->open ? &m->s[m->n - 1] : NULL;
		struct w_item it = { .kind = (uint8_t)(op % 8 - 2) };
		char str[32];

		switch (op % 8) {
		case 0: {
			uint32_t tag = w_tags[(op >> 3) % 4], inst = (op >> 5) % 3;

			if (!m->open && m->n == W_SECTIONS && tag != T_END)
				continue;               /* room in the model, not a misuse */
			snap_begin(&w, tag, inst);
			if (m->open || tag == T_END) {
				if (!m->err)
					m->err = -EINVAL;
			} else if (!m->err) {
				m->s[m->n++] = (struct w_sec){ .tag = tag, .inst = inst };
				m->open = true;
			}
			continue;
		}
		case 1:
			snap_end(&w);
			if (!m->open && !m->err)
				m->err = -EINVAL;
			if (!m->err)
				m->open = false;
			continue;
		case 2: it.v = fz_u8(in); snap_put_u8(&w, (uint8_t)it.v); break;
		case 3: it.v = fz_u16(in); snap_put_u16(&w, (uint16_t)it.v); break;
		case 4: it.v = fz_u32(in); snap_put_u32(&w, (uint32_t)it.v); break;
		case 5: it.v = fz_u64(in); snap_put_u64(&w, it.v); break;
		case 6:
			it.n = fz_u8(in) % sizeof(it.bytes);
			fz_bytes(in, it.bytes, it.n);
			snap_put_bytes(&w, it.bytes, it.n);
			break;
		default:
			it.n = fz_u8(in) % sizeof(str);
			fz_bytes(in, str, it.n);
			str[it.n] = '\0';
			it.n = strlen(str);     /* up to the first NUL */
			memcpy(it.bytes, str, it.n);
			/* NULL is written as "". */
			snap_put_str(&w, it.n || (op & 8) ? str : NULL);
			break;
		}
		if (!s && !m->err)
			m->err = -EINVAL;
		if (m->err)
			continue;
		if (s->nit < W_ITEMS)
			s->it[s->nit++] = it;
		else
			m->lost = true;
	}
	ret = snap_w_image(&w, &img, &len);
	if (!m->err && m->open) {
		FZ_ASSERT(ret == -EINVAL && w.err == -EINVAL);
	} else {
		FZ_ASSERT(ret == m->err && w.err == m->err);
	}
	if (ret) {
		FZ_ASSERT(!img && !len);
		snap_w_free(&w);
		free(m);
		return;
	}
	snap_w_free(&w);
	FZ_ASSERT(snap_open(&f, img, len, err, sizeof(err)) == 0);
	FZ_ASSERT(f.nsections == m->n);

	/* Typed read-back of each first (tag, instance). */
	for (unsigned i = 0; i < m->n && !m->lost; i++) {
		struct w_sec *s = &m->s[i];
		struct snap_r r;
		bool first = true;

		for (unsigned j = 0; j < i; j++)
			first &= !(m->s[j].tag == s->tag && m->s[j].inst == s->inst);
		if (!first)
			continue;
		FZ_ASSERT(snap_find(&f, s->tag, s->inst, &r) == 0);
		for (unsigned k = 0; k < s->nit; k++) {
			struct w_item *it = &s->it[k];
			uint8_t b[32];
			char str[33];

			switch (it->kind) {
			case IT_U8: FZ_ASSERT(snap_get_u8(&r) == it->v); break;
			case IT_U16: FZ_ASSERT(snap_get_u16(&r) == it->v); break;
			case IT_U32: FZ_ASSERT(snap_get_u32(&r) == it->v); break;
			case IT_U64: FZ_ASSERT(snap_get_u64(&r) == it->v); break;
			case IT_BYTES:
				snap_get_bytes(&r, b, it->n);
				FZ_ASSERT(!memcmp(b, it->bytes, it->n));
				break;
			default:
				snap_get_str(&r, str, it->n + 1);       /* the tightest fit */
				FZ_ASSERT(strlen(str) == it->n && !memcmp(str, it->bytes, it->n));
				break;
			}
		}
		FZ_ASSERT(snap_done(&r, err, sizeof(err)) == 0);
	}
	open_and_walk(img, len, sc);
	free(img);
	free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = { data, size };
	uint8_t mode = fz_u8(&in), slen = fz_u8(&in);
	struct script sc;

	sc.n = slen < fz_left(&in) ? slen : fz_left(&in);
	sc.p = in.p;
	in.p += sc.n;
	in.n -= sc.n;
	switch (mode % NMODES) {
	case MODE_RAW:
		open_and_walk(in.p, in.n, &sc);
		break;
	case MODE_SEALED:
		fuzz_sealed(&in, &sc);
		break;
	default:
		fuzz_writer(&in, &sc);
		break;
	}
	return 0;
}

/* --- seeds --- */

static void seed_head(struct fz_buf *s, uint8_t mode, const uint8_t *script, uint8_t slen)
{
	s->n = 0;
	fzb_u8(s, mode);
	fzb_u8(s, slen);
	fzb_bytes(s, script, slen);
}

static void fuzz_seeds(void)
{
	/* u64, a string into 16 bytes, then bytes: a VCPU section's shape. */
	static const uint8_t script[] = { 3, 0, 5, 16, 4, 3, 0, 0 };
	struct fz_buf s;
	struct snap_w w;
	uint8_t *img;
	size_t len;

	/* A state as the writer makes it, read raw. */
	snap_w_init(&w);
	for (uint32_t i = 0; i < 2; i++) {
		snap_begin(&w, SNAP_TAG('V', 'C', 'P', 'U'), i);
		snap_put_u64(&w, 0xfff0 + i);
		snap_put_str(&w, i ? "cpu one" : "cpu zero");
		snap_put_u16(&w, 0x1234);
		snap_put_u8(&w, 7);
		snap_end(&w);
	}
	snap_begin(&w, SNAP_TAG('D', 'E', 'V', '0'), 0);
	snap_put_u32(&w, 3);
	snap_put_bytes(&w, "\x01\x02\x03\x04\x05", 5);
	snap_end(&w);
	FZ_ASSERT(snap_w_image(&w, &img, &len) == 0);
	snap_w_free(&w);
	seed_head(&s, MODE_RAW, script, sizeof(script));
	fzb_bytes(&s, img, len);
	fuzz_seed("raw_state", s.b, s.n);
	free(img);

	snap_w_init(&w);
	FZ_ASSERT(snap_w_image(&w, &img, &len) == 0);
	seed_head(&s, MODE_RAW, script, 0);
	fzb_bytes(&s, img, len);
	fuzz_seed("raw_empty", s.b, s.n);
	free(img);

	/* Two sections framed by the harness, undamaged. */
	seed_head(&s, MODE_SEALED, script, sizeof(script));
	fzb_u8(&s, 0);
	fzb_u16(&s, 0);
	fzb_u32(&s, SNAP_TAG('V', 'C', 'P', 'U'));
	fzb_u32(&s, 0);
	fzb_u16(&s, 17);
	fzb_u64(&s, 42);
	fzb_u32(&s, 5);
	fzb_bytes(&s, "hello", 5);
	fzb_u32(&s, SNAP_TAG('D', 'E', 'V', '0'));
	fzb_u32(&s, 1);
	fzb_u16(&s, 3);
	fzb_bytes(&s, "abc", 3);
	fuzz_seed("sealed_two", s.b, s.n);

	/* The writer: a section of every put, then misuse (end twice). */
	seed_head(&s, MODE_WRITER, script, sizeof(script));
	fzb_u8(&s, 0);                          /* begin VCPU/0 */
	fzb_u8(&s, 2); fzb_u8(&s, 0x11);
	fzb_u8(&s, 3); fzb_u16(&s, 0x2222);
	fzb_u8(&s, 4); fzb_u32(&s, 0x33333333);
	fzb_u8(&s, 5); fzb_u64(&s, 0x4444444444444444ULL);
	fzb_u8(&s, 6); fzb_u8(&s, 3); fzb_bytes(&s, "xyz", 3);
	fzb_u8(&s, 7); fzb_u8(&s, 4); fzb_bytes(&s, "name", 4);
	fzb_u8(&s, 1);                          /* end */
	fzb_u8(&s, 8);                          /* begin DEV0/0 */
	fzb_u8(&s, 7); fzb_u8(&s, 0);           /* "" */
	fzb_u8(&s, 1);
	fuzz_seed("writer_every_put", s.b, s.n);
	fzb_u8(&s, 1);
	fuzz_seed("writer_end_twice", s.b, s.n);
}
