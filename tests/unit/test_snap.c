/* The snapshot state file (vmm/base/snap.c): what the writer puts in,
 * the reader gives back, byte for byte where the layout is documented;
 * every kind of damage is refused by snap_open with a message that says
 * where; the getters never leave their section; snap_w_write puts the
 * file in place whole or not at all. */
#include "tests/unit/check.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define T_VCPU SNAP_TAG('V', 'C', 'P', 'U')
#define T_DEV SNAP_TAG('D', 'E', 'V', '0')
#define T_END SNAP_TAG('E', 'N', 'D', '!')
#define HDR 24u
#define SEC_HDR 16u
#define TRAILER 24u

static char err[512];

/* The image of w (which is freed), checked to open. */
static uint8_t *image(struct snap_w *w, size_t *len)
{
	uint8_t *img;

	CHECK_EQ(snap_w_image(w, &img, len), 0);
	snap_w_free(w);
	return img;
}

static int open_img(struct snap_file *f, const uint8_t *buf, size_t len)
{
	err[0] = '\0';
	return snap_open(f, buf, len, err, sizeof(err));
}

/* Three sections: VCPU/0 and VCPU/1 with a u64 and a string each, DEV0/0
 * with 5 bytes (padded to 8). */
static uint8_t *sample(size_t *len)
{
	struct snap_w w;

	snap_w_init(&w);
	for (uint32_t i = 0; i < 2; i++) {
		snap_begin(&w, T_VCPU, i);
		snap_put_u64(&w, 0x1000 + i);
		snap_put_str(&w, i ? "one" : "zero");
		snap_end(&w);
	}
	snap_begin(&w, T_DEV, 0);
	snap_put_bytes(&w, "abcde", 5);
	snap_end(&w);
	return image(&w, len);
}

/* After an edit of a section's bytes: the header's length, the trailer's
 * count and both of its checksums made right again, so that only the
 * edit itself can be refused. */
static void reseal(uint8_t *buf, size_t len, uint32_t count)
{
	uint8_t *t = buf + len - TRAILER;

	le64_store(buf + 16, len);
	le32_store(t, T_END);
	le32_store(t + 4, 0);
	le32_store(t + 8, 8);
	le32_store(t + 16, count);
	le32_store(t + 20, snap_crc32c(0, buf, len - TRAILER));
	le32_store(t + 12, snap_crc32c(0, t + SEC_HDR, 8));
}

/* A section header at p, its CRC over payload of plen bytes after it. */
static size_t raw_section(uint8_t *p, uint32_t tag, uint32_t inst, uint32_t plen)
{
	le32_store(p, tag);
	le32_store(p + 4, inst);
	le32_store(p + 8, plen);
	le32_store(p + 12, snap_crc32c(0, p + SEC_HDR, plen));
	return SEC_HDR + ((plen + 7u) & ~7u);
}

/* --- round trip ---------------------------------------------------------- */

TEST(every_put_type_reads_back_as_written)
{
	static const uint8_t blob[11] = { 0, 1, 2, 0xff, 0x80, 5, 6, 7, 8, 9, 10 };
	struct snap_file f;
	struct snap_r r;
	struct snap_w w;
	uint8_t got[11], *img;
	char s[32];
	size_t len;

	snap_w_init(&w);
	snap_begin(&w, T_VCPU, 7);
	snap_put_u8(&w, 0xa5);
	snap_put_u16(&w, 0xbeef);
	snap_put_u32(&w, 0xdeadbeef);
	snap_put_u64(&w, 0x0123456789abcdefULL);
	snap_put_u64(&w, UINT64_MAX);
	snap_put_bytes(&w, blob, sizeof(blob));
	snap_put_bytes(&w, NULL, 0);
	snap_put_str(&w, "hello, world");
	snap_put_str(&w, "");
	snap_put_str(&w, NULL);
	snap_put_u8(&w, 0);
	snap_end(&w);
	img = image(&w, &len);

	CHECK_EQ(open_img(&f, img, len), 0);
	CHECK_EQ(f.nsections, 1);
	CHECK_EQ(f.version, SNAP_FORMAT_VERSION);
	CHECK_EQ(snap_find(&f, T_VCPU, 7, &r), 0);
	CHECK_EQ(r.tag, T_VCPU);
	CHECK_EQ(r.instance, 7);
	CHECK_EQ(snap_get_u8(&r), 0xa5);
	CHECK_EQ(snap_get_u16(&r), 0xbeef);
	CHECK_EQ(snap_get_u32(&r), 0xdeadbeef);
	CHECK(snap_get_u64(&r) == 0x0123456789abcdefULL);
	CHECK(snap_get_u64(&r) == UINT64_MAX);
	snap_get_bytes(&r, got, sizeof(got));
	CHECK(!memcmp(got, blob, sizeof(blob)));
	snap_get_bytes(&r, NULL, 0);
	snap_get_str(&r, s, sizeof(s));
	CHECK_STR(s, "hello, world");
	memset(s, 'x', sizeof(s));
	snap_get_str(&r, s, 1);                 /* "" fits a 1-byte buffer */
	CHECK_STR(s, "");
	snap_get_str(&r, s, sizeof(s));         /* NULL was written as "" */
	CHECK_STR(s, "");
	CHECK_EQ(snap_left(&r), 1);
	CHECK_EQ(snap_get_u8(&r), 0);
	CHECK_EQ(r.err, 0);
	CHECK_EQ(snap_left(&r), 0);
	CHECK_EQ(snap_done(&r, err, sizeof(err)), 0);
	free(img);
}

/* The layout docs/snapshot.md documents, pinned byte for byte. */
TEST(the_file_layout_is_the_documented_one)
{
	struct snap_w w;
	uint8_t *img, *t;
	size_t len;

	snap_w_init(&w);
	snap_begin(&w, SNAP_TAG('A', 'B', 'C', 'D'), 9);
	snap_put_u8(&w, 0x5a);
	snap_end(&w);
	img = image(&w, &len);

	CHECK_EQ(len, HDR + SEC_HDR + 8 + TRAILER);
	CHECK(!memcmp(img, "MVMSNAP\0", 8));
	CHECK_EQ(le32_load(img + 8), SNAP_FORMAT_VERSION);
	CHECK_EQ(le32_load(img + 12), 0);
	CHECK_EQ(le64_load(img + 16), len);
	CHECK(!memcmp(img + 24, "ABCD", 4));
	CHECK_EQ(le32_load(img + 28), 9);
	CHECK_EQ(le32_load(img + 32), 1);
	CHECK_EQ(le32_load(img + 36), snap_crc32c(0, "\x5a", 1));
	CHECK(!memcmp(img + 40, "\x5a\0\0\0\0\0\0\0", 8));
	t = img + 48;
	CHECK(!memcmp(t, "END!", 4));
	CHECK_EQ(le32_load(t + 4), 0);
	CHECK_EQ(le32_load(t + 8), 8);
	CHECK_EQ(le32_load(t + 12), snap_crc32c(0, t + 16, 8));
	CHECK_EQ(le32_load(t + 16), 1);
	CHECK_EQ(le32_load(t + 20), snap_crc32c(0, img, 48));
	free(img);
}

TEST(an_empty_state_is_a_file_of_header_and_trailer)
{
	struct snap_file f;
	struct snap_w w;
	struct snap_r r;
	uint8_t *img;
	size_t len;

	snap_w_init(&w);
	img = image(&w, &len);
	CHECK_EQ(len, HDR + TRAILER);
	CHECK_EQ(open_img(&f, img, len), 0);
	CHECK_EQ(f.nsections, 0);
	CHECK_EQ(snap_find(&f, T_VCPU, 0, &r), -ENOENT);
	free(img);
}

TEST(a_section_of_megabytes_round_trips)
{
	size_t n = 3 * 1024 * 1024 + 5, len;
	uint8_t *big = malloc(n), *back = malloc(n), *img;
	struct snap_file f;
	struct snap_r r;
	struct snap_w w;

	CHECK(big && back);
	for (size_t i = 0; i < n; i++)
		big[i] = (uint8_t)(i * 7 + (i >> 11));
	snap_w_init(&w);
	snap_begin(&w, T_DEV, 1);
	snap_put_bytes(&w, big, n);
	snap_end(&w);
	img = image(&w, &len);
	CHECK_EQ(open_img(&f, img, len), 0);
	CHECK_EQ(snap_find(&f, T_DEV, 1, &r), 0);
	CHECK_EQ(snap_left(&r), n);
	snap_get_bytes(&r, back, n);
	CHECK(!memcmp(big, back, n));
	CHECK_EQ(snap_done(&r, err, sizeof(err)), 0);
	free(big);
	free(back);
	free(img);
}

/* A file read from anywhere (a mapping at an odd offset): the getters
 * take no alignment for granted. */
TEST(a_file_at_an_odd_address_reads_the_same)
{
	size_t len;
	uint8_t *img = sample(&len), *odd = malloc(len + 1);
	struct snap_file f;
	struct snap_r r;
	char s[8];

	CHECK(odd);
	memcpy(odd + 1, img, len);
	CHECK_EQ(open_img(&f, odd + 1, len), 0);
	CHECK_EQ(snap_find(&f, T_VCPU, 1, &r), 0);
	CHECK(snap_get_u64(&r) == 0x1001);
	snap_get_str(&r, s, sizeof(s));
	CHECK_STR(s, "one");
	CHECK_EQ(snap_done(&r, err, sizeof(err)), 0);
	free(odd);
	free(img);
}

/* --- finding sections ---------------------------------------------------- */

TEST(a_section_is_found_by_tag_and_instance)
{
	size_t len;
	uint8_t *img = sample(&len);
	struct snap_file f;
	struct snap_r r;
	uint8_t b[5];
	char s[8];

	CHECK_EQ(open_img(&f, img, len), 0);
	CHECK_EQ(f.nsections, 3);
	CHECK_EQ(snap_find(&f, T_VCPU, 1, &r), 0);
	CHECK(snap_get_u64(&r) == 0x1001);
	snap_get_str(&r, s, sizeof(s));
	CHECK_STR(s, "one");
	CHECK_EQ(snap_find(&f, T_VCPU, 0, &r), 0);
	CHECK(snap_get_u64(&r) == 0x1000);
	snap_get_str(&r, s, sizeof(s));
	CHECK_STR(s, "zero");
	CHECK_EQ(snap_find(&f, T_DEV, 0, &r), 0);
	CHECK_EQ(r.len, 5);
	snap_get_bytes(&r, b, 5);
	CHECK(!memcmp(b, "abcde", 5));
	CHECK_EQ(snap_done(&r, err, sizeof(err)), 0);
	free(img);
}

TEST(an_absent_section_is_ENOENT_and_reads_as_zeros_that_fail_done)
{
	size_t len;
	uint8_t *img = sample(&len);
	struct snap_file f;
	struct snap_r r;

	CHECK_EQ(open_img(&f, img, len), 0);
	CHECK_EQ(snap_find(&f, T_VCPU, 2, &r), -ENOENT);
	CHECK_EQ(snap_find(&f, T_DEV, 1, &r), -ENOENT);
	CHECK_EQ(snap_find(&f, SNAP_TAG('N', 'O', 'N', 'E'), 0, &r), -ENOENT);
	CHECK(snap_get_u64(&r) == 0);
	CHECK_EQ(snap_left(&r), 0);
	CHECK_EQ(snap_done(&r, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "section NONE/0: not in the snapshot"));
	free(img);
}

TEST(snap_count_counts_the_sections_of_one_tag)
{
	size_t len;
	uint8_t *img = sample(&len);
	struct snap_file f;

	CHECK_EQ(open_img(&f, img, len), 0);
	CHECK_EQ(snap_count(&f, T_VCPU), 2);
	CHECK_EQ(snap_count(&f, T_DEV), 1);
	CHECK_EQ(snap_count(&f, SNAP_TAG('N', 'O', 'N', 'E')), 0);
	CHECK_EQ(snap_count(&f, T_END), 0);     /* the trailer is no section */
	free(img);
}

TEST(of_two_sections_with_one_tag_and_instance_the_first_is_found)
{
	struct snap_file f;
	struct snap_r r;
	struct snap_w w;
	uint8_t *img;
	size_t len;

	snap_w_init(&w);
	for (uint8_t i = 1; i <= 2; i++) {
		snap_begin(&w, T_DEV, 4);
		snap_put_u8(&w, i);
		snap_end(&w);
	}
	img = image(&w, &len);
	CHECK_EQ(open_img(&f, img, len), 0);
	CHECK_EQ(snap_find(&f, T_DEV, 4, &r), 0);
	CHECK_EQ(snap_get_u8(&r), 1);
	free(img);
}

/* --- getters stay inside their section ---------------------------------- */

TEST(a_read_past_the_section_end_yields_zeros_and_keeps_failing)
{
	size_t len;
	uint8_t *img = sample(&len), b[4] = { 1, 2, 3, 4 };
	struct snap_file f;
	struct snap_r r;

	CHECK_EQ(open_img(&f, img, len), 0);
	CHECK_EQ(snap_find(&f, T_DEV, 0, &r), 0);       /* 5 bytes, then padding */
	CHECK_EQ(snap_get_u32(&r), le32_load("abcd"));
	CHECK_EQ(snap_get_u16(&r), 0);                  /* 1 byte left: overrun */
	CHECK_EQ(r.err, -EINVAL);
	CHECK_EQ(snap_get_u8(&r), 0);                   /* that byte stays unread */
	CHECK(snap_get_u64(&r) == 0);
	snap_get_bytes(&r, b, sizeof(b));
	CHECK(!memcmp(b, "\0\0\0\0", 4));
	CHECK_EQ(r.err, -EINVAL);
	CHECK_EQ(snap_done(&r, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "section DEV0/0: read past its end"));
	CHECK(strstr(err, "take the snapshot again"));
	free(img);
}

TEST(bytes_left_unread_make_done_fail_saying_how_many)
{
	size_t len;
	uint8_t *img = sample(&len);
	struct snap_file f;
	struct snap_r r;

	CHECK_EQ(open_img(&f, img, len), 0);
	CHECK_EQ(snap_find(&f, T_VCPU, 1, &r), 0);
	snap_get_u64(&r);
	CHECK_EQ(r.err, 0);
	CHECK_EQ(snap_left(&r), 7);                     /* u32 3, "one" */
	CHECK_EQ(snap_done(&r, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "section VCPU/1: 7 of its 15 bytes left unread"));
	free(img);
}

static void str_section(struct snap_r *r, uint8_t **img, const void *body, size_t n)
{
	struct snap_file f;
	struct snap_w w;
	size_t len;

	snap_w_init(&w);
	snap_begin(&w, T_DEV, 0);
	snap_put_bytes(&w, body, n);
	snap_end(&w);
	*img = image(&w, &len);
	CHECK_EQ(open_img(&f, *img, len), 0);
	CHECK_EQ(snap_find(&f, T_DEV, 0, r), 0);
}

TEST(a_string_longer_than_the_buffer_is_an_error)
{
	struct snap_r r;
	uint8_t *img;
	char s[4] = "xyz";

	str_section(&r, &img, "\4\0\0\0abcd", 8);
	snap_get_str(&r, s, sizeof(s));         /* 4 bytes and the NUL: 5 */
	CHECK_EQ(r.err, -EINVAL);
	CHECK_STR(s, "");
	CHECK_EQ(snap_done(&r, err, sizeof(err)), -EINVAL);
	free(img);

	str_section(&r, &img, "\3\0\0\0abc", 7);
	snap_get_str(&r, s, sizeof(s));         /* 3 and the NUL fit */
	CHECK_EQ(r.err, 0);
	CHECK_STR(s, "abc");
	free(img);

	str_section(&r, &img, "\0\0\0\0", 4);
	snap_get_str(&r, s, 0);                 /* no room even for "" */
	CHECK_EQ(r.err, -EINVAL);
	free(img);
}

TEST(a_string_holding_a_nul_is_an_error)
{
	struct snap_r r;
	uint8_t *img;
	char s[8];

	str_section(&r, &img, "\3\0\0\0a\0c", 7);
	snap_get_str(&r, s, sizeof(s));
	CHECK_EQ(r.err, -EINVAL);
	CHECK_STR(s, "");
	free(img);
}

TEST(a_string_length_past_the_section_end_is_an_overrun)
{
	struct snap_r r;
	uint8_t *img;
	char s[64];

	str_section(&r, &img, "\x09\0\0\0abcd", 8);
	snap_get_str(&r, s, sizeof(s));
	CHECK_EQ(r.err, -EINVAL);
	CHECK_STR(s, "");
	free(img);

	str_section(&r, &img, "\xff\xff\xff\xff", 4);
	snap_get_str(&r, s, sizeof(s));
	CHECK_EQ(r.err, -EINVAL);
	free(img);

	str_section(&r, &img, "\1\0", 2);       /* not even the length */
	snap_get_str(&r, s, sizeof(s));
	CHECK_EQ(r.err, -EINVAL);
	CHECK_STR(s, "");
	free(img);
}

/* --- refusals ------------------------------------------------------------- */

TEST(a_file_without_the_magic_is_not_a_snapshot)
{
	size_t len;
	uint8_t *img = sample(&len);
	struct snap_file f;

	img[3] ^= 0x20;
	CHECK_EQ(open_img(&f, img, len), -EINVAL);
	CHECK(strstr(err, "byte 0: not a mvm snapshot"));
	CHECK_EQ(open_img(&f, (const uint8_t *)"#!/bin/sh", 9), -EINVAL);
	CHECK(strstr(err, "not a mvm snapshot"));
	free(img);
}

TEST(another_format_version_is_refused_with_EPROTO_naming_both)
{
	size_t len;
	uint8_t *img = sample(&len);
	struct snap_file f;
	char want[128];

	le32_store(img + 8, SNAP_FORMAT_VERSION + 1);
	CHECK_EQ(open_img(&f, img, len), -EPROTO);
	snprintf(want, sizeof(want), "snapshot format %u, this mvm reads %u: take the snapshot "
		 "again with this mvm", SNAP_FORMAT_VERSION + 1, SNAP_FORMAT_VERSION);
	CHECK_STR(err, want);
	/* Also when nothing else of the file is there to check. */
	CHECK_EQ(open_img(&f, img, 12), -EPROTO);
	free(img);
}

TEST(nonzero_header_flags_are_refused)
{
	size_t len;
	uint8_t *img = sample(&len);
	struct snap_file f;

	img[12] = 1;
	CHECK_EQ(open_img(&f, img, len), -EINVAL);
	CHECK(strstr(err, "byte 12: header flags 0x1"));
	free(img);
}

TEST(a_truncated_file_is_refused_naming_its_length)
{
	size_t len, cuts[] = { 0, 1, 8, 11, 12, 23, 24, 47, 48, 56, 64 }, n;
	uint8_t *img = sample(&len), *cut;
	struct snap_file f;
	char want[128];

	for (size_t i = 0; i <= ARRAY_SIZE(cuts) + 4; i++) {
		n = i < ARRAY_SIZE(cuts) ? cuts[i] : len - (i - ARRAY_SIZE(cuts)) * 8 - 1;
		/* Its own block, so that ASan sees any read past the cut. */
		cut = malloc(n ? n : 1);
		CHECK(cut);
		memcpy(cut, img, n);
		CHECK_EQ(open_img(&f, cut, n), -EINVAL);
		if (n < HDR + TRAILER)
			snprintf(want, sizeof(want), "truncated: file has %zu bytes, the smallest "
				 "snapshot has %u", n, HDR + TRAILER);
		else
			snprintf(want, sizeof(want), "truncated: file has %zu bytes, header says %zu",
				 n, len);
		if (!strstr(err, want)) {
			fprintf(stderr, "cut at %zu: %s\n", n, err);
			CHECK(0);
		}
		free(cut);
	}
	free(img);
}

TEST(a_file_extended_by_a_byte_is_refused)
{
	size_t len;
	uint8_t *img = sample(&len), *ext = calloc(1, len + 1);
	struct snap_file f;
	char want[128];

	CHECK(ext);
	memcpy(ext, img, len);
	CHECK_EQ(open_img(&f, ext, len + 1), -EINVAL);
	snprintf(want, sizeof(want), "file has %zu bytes, header says %zu", len + 1, len);
	CHECK(strstr(err, want));
	/* Even with the header's length made to match. */
	le64_store(ext + 16, len + 1);
	CHECK_EQ(open_img(&f, ext, len + 1), -EINVAL);
	free(ext);
	free(img);
}

TEST(a_flipped_bit_in_a_payload_fails_that_sections_checksum)
{
	size_t len;
	uint8_t *img = sample(&len);
	struct snap_file f;
	size_t dev = HDR + 2 * (SEC_HDR + 16);  /* two VCPU sections of 16 bytes */
	char want[64];

	CHECK(!memcmp(img + dev, "DEV0", 4));
	img[dev + SEC_HDR + 2] ^= 0x10;
	CHECK_EQ(open_img(&f, img, len), -EINVAL);
	snprintf(want, sizeof(want), "byte %zu, section DEV0/0: checksum", dev);
	CHECK(strstr(err, want));
	CHECK(strstr(err, "take the snapshot again"));
	free(img);
}

TEST(a_flipped_bit_in_a_section_header_is_refused)
{
	size_t len;
	uint8_t *img = sample(&len);
	struct snap_file f;
	size_t sec1 = HDR + SEC_HDR + 16;

	for (size_t bit = 0; bit < SEC_HDR * 8; bit++) {
		img[sec1 + bit / 8] ^= (uint8_t)(1u << (bit % 8));
		CHECK_EQ(open_img(&f, img, len), -EINVAL);
		img[sec1 + bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	/* A tag or instance is outside the section's own checksum: the
	 * file's catches it. */
	img[sec1 + 4] ^= 1;
	CHECK_EQ(open_img(&f, img, len), -EINVAL);
	CHECK(strstr(err, "trailer END!/0: file checksum"));
	img[sec1 + 4] ^= 1;
	CHECK_EQ(open_img(&f, img, len), 0);
	free(img);
}

TEST(a_flipped_bit_in_the_trailer_is_refused)
{
	size_t len;
	uint8_t *img = sample(&len);
	struct snap_file f;

	for (size_t bit = 0; bit < TRAILER * 8; bit++) {
		img[len - TRAILER + bit / 8] ^= (uint8_t)(1u << (bit % 8));
		CHECK_EQ(open_img(&f, img, len), -EINVAL);
		CHECK(strstr(err, "trailer") || strstr(err, "END!"));
		img[len - TRAILER + bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	CHECK_EQ(open_img(&f, img, len), 0);
	free(img);
}

TEST(every_single_bit_flip_anywhere_is_refused)
{
	size_t len;
	uint8_t *img = sample(&len);
	struct snap_file f;

	for (size_t bit = 0; bit < len * 8; bit++) {
		img[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		if (open_img(&f, img, len) == 0) {
			fprintf(stderr, "bit %zu flipped: accepted\n", bit);
			CHECK(0);
		}
		img[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	free(img);
}

TEST(a_trailer_counting_other_sections_is_refused)
{
	size_t len;
	uint8_t *img = sample(&len);
	struct snap_file f;

	reseal(img, len, 2);
	CHECK_EQ(open_img(&f, img, len), -EINVAL);
	CHECK(strstr(err, "counts 2 sections, the file has 3"));
	reseal(img, len, 3);
	CHECK_EQ(open_img(&f, img, len), 0);
	free(img);
}

TEST(a_section_length_beyond_the_file_is_refused)
{
	size_t len;
	uint8_t *img = sample(&len);
	struct snap_file f;
	size_t dev = HDR + 2 * (SEC_HDR + 16);
	char want[128];

	le32_store(img + dev + 8, 4096);
	reseal(img, len, 3);
	CHECK_EQ(open_img(&f, img, len), -EINVAL);
	snprintf(want, sizeof(want), "byte %zu, section DEV0/0: 4096 bytes long, runs past the "
		 "last section's end at byte %zu", dev, len - TRAILER);
	CHECK(strstr(err, want));
	/* Into the trailer by one padded unit. */
	le32_store(img + dev + 8, 9);
	reseal(img, len, 3);
	CHECK_EQ(open_img(&f, img, len), -EINVAL);
	CHECK(strstr(err, "runs past"));
	/* The largest u32: no wrap-around makes it fit. */
	le32_store(img + dev + 8, UINT32_MAX);
	reseal(img, len, 3);
	CHECK_EQ(open_img(&f, img, len), -EINVAL);
	free(img);
}

TEST(a_section_over_the_largest_size_is_refused)
{
	size_t len;
	uint8_t *img = sample(&len);
	struct snap_file f;

	le32_store(img + HDR + 8, SNAP_SECTION_MAX + 1);
	reseal(img, len, 3);
	CHECK_EQ(open_img(&f, img, len), -EINVAL);
	CHECK(strstr(err, "section VCPU/0"));
	CHECK(strstr(err, "more than the 67108864 a section holds"));
	free(img);
}

TEST(padding_that_is_not_zero_is_refused)
{
	size_t len;
	uint8_t *img = sample(&len);
	struct snap_file f;
	size_t dev = HDR + 2 * (SEC_HDR + 16);
	char want[64];

	img[dev + SEC_HDR + 6] = 1;             /* DEV0/0: 5 bytes, 3 of padding */
	reseal(img, len, 3);
	CHECK_EQ(open_img(&f, img, len), -EINVAL);
	snprintf(want, sizeof(want), "padding byte %zu is not zero", dev + SEC_HDR + 6);
	CHECK(strstr(err, want));
	free(img);
}

TEST(more_sections_than_the_most_a_file_holds_are_refused)
{
	size_t len = HDR + (SNAP_SECTIONS_MAX + 1) * SEC_HDR + TRAILER, off = HDR;
	uint8_t *img = calloc(1, len);
	struct snap_file f;
	unsigned i;

	CHECK(img);
	memcpy(img, SNAP_MAGIC, 8);
	le32_store(img + 8, SNAP_FORMAT_VERSION);
	for (i = 0; i <= SNAP_SECTIONS_MAX; i++)
		off += raw_section(img + off, T_DEV, i, 0);
	reseal(img, len, SNAP_SECTIONS_MAX + 1);
	CHECK_EQ(open_img(&f, img, len), -EINVAL);
	CHECK(strstr(err, "section DEV0/4096: more than the 4096 sections"));
	/* One fewer is fine. */
	len -= SEC_HDR;
	reseal(img, len, SNAP_SECTIONS_MAX);
	CHECK_EQ(open_img(&f, img, len), 0);
	CHECK_EQ(f.nsections, SNAP_SECTIONS_MAX);
	CHECK_EQ(snap_count(&f, T_DEV), SNAP_SECTIONS_MAX);
	free(img);
}

TEST(a_trailer_tag_before_the_end_is_refused)
{
	uint8_t img[HDR + SEC_HDR + TRAILER] = "MVMSNAP";
	struct snap_file f;

	le32_store(img + 8, SNAP_FORMAT_VERSION);
	raw_section(img + HDR, T_END, 0, 0);
	reseal(img, sizeof(img), 1);
	CHECK_EQ(open_img(&f, img, sizeof(img)), -EINVAL);
	CHECK(strstr(err, "byte 24, section END!/0: a trailer before the file's end"));
	reseal(img, sizeof(img), 0);
	CHECK_EQ(open_img(&f, img, sizeof(img)), -EINVAL);
}

TEST(a_file_without_its_trailer_is_refused)
{
	uint8_t img[HDR + SEC_HDR + 8] = "MVMSNAP";
	struct snap_file f;

	/* A last section of 8 bytes where the trailer should be. */
	le32_store(img + 8, SNAP_FORMAT_VERSION);
	le64_store(img + 16, sizeof(img));
	raw_section(img + HDR, T_DEV, 0, 8);
	CHECK_EQ(open_img(&f, img, sizeof(img)), -EINVAL);
	CHECK(strstr(err, "byte 24: no trailer END!/0 of 8 bytes at the file's end, section "
		      "DEV0/0 of 8 bytes instead"));
}

TEST(tag_names_are_four_printable_characters)
{
	char n[5];

	snap_tag_name(T_VCPU, n);
	CHECK_STR(n, "VCPU");
	snap_tag_name(SNAP_TAG('a', '\n', 0, 0xff), n);
	CHECK_STR(n, "a???");
}

TEST(crc32c_gives_the_standard_check_value_and_continues)
{
	CHECK_EQ(snap_crc32c(0, "123456789", 9), 0xE3069283u);
	CHECK_EQ(snap_crc32c(snap_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
	CHECK_EQ(snap_crc32c(0, "", 0), 0);
	/* RFC 3720 B.4: 32 bytes of zeros, of ones. */
	CHECK_EQ(snap_crc32c(0, (const uint8_t[32]){ 0 }, 32), 0x8A9136AAu);
	{
		uint8_t ff[32];

		memset(ff, 0xff, sizeof(ff));
		CHECK_EQ(snap_crc32c(0, ff, sizeof(ff)), 0x62A8AB43u);
	}
}

/* The bit-at-a-time definition (reflected 0x1EDC6F41), for every value
 * of a byte: every entry of a table behind it gets used. */
TEST(crc32c_matches_its_bitwise_definition_for_every_byte)
{
	for (unsigned b = 0; b < 256; b++) {
		uint8_t in[3] = { (uint8_t)b, (uint8_t)(b * 31), 0x5a };
		uint32_t c = 0xffffffff;

		for (unsigned i = 0; i < sizeof(in); i++) {
			c ^= in[i];
			for (unsigned k = 0; k < 8; k++)
				c = (c >> 1) ^ (0x82F63B78u & -(c & 1));
		}
		CHECK_EQ(snap_crc32c(0, in, sizeof(in)), ~c);
	}
}

/* --- the writer ----------------------------------------------------------- */

TEST(begin_after_begin_is_misuse_that_sticks)
{
	struct snap_w w;
	uint8_t *img = (uint8_t *)&w;
	size_t len = 1;

	snap_w_init(&w);
	snap_begin(&w, T_VCPU, 0);
	snap_begin(&w, T_VCPU, 1);
	CHECK_EQ(w.err, -EINVAL);
	snap_end(&w);
	snap_begin(&w, T_VCPU, 2);
	snap_end(&w);
	CHECK_EQ(w.err, -EINVAL);
	CHECK_EQ(snap_w_image(&w, &img, &len), -EINVAL);
	CHECK(img == NULL && len == 0);
	snap_w_free(&w);
}

TEST(end_or_put_outside_a_section_is_misuse)
{
	struct snap_w w;
	uint8_t *img;
	size_t len;

	snap_w_init(&w);
	snap_end(&w);
	CHECK_EQ(w.err, -EINVAL);
	snap_w_free(&w);

	snap_w_init(&w);
	snap_put_u32(&w, 1);
	CHECK_EQ(w.err, -EINVAL);
	snap_w_free(&w);

	snap_w_init(&w);
	snap_begin(&w, T_DEV, 0);
	snap_end(&w);
	snap_put_str(&w, "late");
	CHECK_EQ(w.err, -EINVAL);
	snap_w_free(&w);

	/* A section left open: no image. */
	snap_w_init(&w);
	snap_begin(&w, T_DEV, 0);
	CHECK_EQ(snap_w_image(&w, &img, &len), -EINVAL);
	snap_w_free(&w);
}

TEST(the_trailer_tag_is_refused_for_a_section)
{
	struct snap_w w;

	snap_w_init(&w);
	snap_begin(&w, T_END, 0);
	CHECK_EQ(w.err, -EINVAL);
	snap_w_free(&w);
}

TEST(the_writer_refuses_what_a_reader_would)
{
	struct snap_w w;
	uint8_t *big = calloc(1, SNAP_SECTION_MAX + 1);

	CHECK(big);
	snap_w_init(&w);
	snap_begin(&w, T_DEV, 0);
	snap_put_bytes(&w, big, SNAP_SECTION_MAX);      /* the largest: fine */
	CHECK_EQ(w.err, 0);
	snap_put_u8(&w, 0);
	CHECK_EQ(w.err, -EFBIG);
	snap_w_free(&w);
	free(big);

	snap_w_init(&w);
	for (unsigned i = 0; i < SNAP_SECTIONS_MAX; i++) {
		snap_begin(&w, T_DEV, i);
		snap_end(&w);
	}
	CHECK_EQ(w.err, 0);
	snap_begin(&w, T_DEV, SNAP_SECTIONS_MAX);
	CHECK_EQ(w.err, -EFBIG);
	snap_w_free(&w);
}

static char tmpdir[64];

static int mk_tmpdir(void)
{
	int fd;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/mvm-test-snap.XXXXXX");
	CHECK(mkdtemp(tmpdir) != NULL);
	fd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(fd >= 0);
	return fd;
}

/* The names in the directory, sorted, joined by spaces. */
static void dir_names(char *out, size_t outlen)
{
	struct dirent **ents;
	int n = scandir(tmpdir, &ents, NULL, alphasort);

	CHECK(n >= 0);
	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, "..")) {
			if (out[0])
				strncat(out, " ", outlen - strlen(out) - 1);
			strncat(out, ents[i]->d_name, outlen - strlen(out) - 1);
		}
		free(ents[i]);
	}
	free(ents);
}

static void rm_tmpdir(int dfd)
{
	char names[256], *save, *p;

	dir_names(names, sizeof(names));
	for (p = strtok_r(names, " ", &save); p; p = strtok_r(NULL, " ", &save))
		unlinkat(dfd, p, 0);
	close(dfd);
	rmdir(tmpdir);
}

TEST(snap_w_write_puts_the_file_in_place_and_leaves_no_temporary)
{
	int dfd = mk_tmpdir(), fd;
	size_t len, n;
	uint8_t *want = sample(&len), *got = malloc(len + 1);
	struct snap_file f;
	struct snap_r r;
	struct snap_w w;
	struct stat st;
	char names[256];

	CHECK(got);
	/* An older state under the name is replaced whole. */
	fd = openat(dfd, "state", O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "old", 3), 3);
	close(fd);

	snap_w_init(&w);
	for (uint32_t i = 0; i < 2; i++) {
		snap_begin(&w, T_VCPU, i);
		snap_put_u64(&w, 0x1000 + i);
		snap_put_str(&w, i ? "one" : "zero");
		snap_end(&w);
	}
	snap_begin(&w, T_DEV, 0);
	snap_put_bytes(&w, "abcde", 5);
	snap_end(&w);
	CHECK_EQ(snap_w_write(&w, dfd, "state", err, sizeof(err)), 0);
	snap_w_free(&w);

	dir_names(names, sizeof(names));
	CHECK_STR(names, "state");
	fd = openat(dfd, "state", O_RDONLY);
	CHECK(fd >= 0);
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_mode & 0777, 0600);
	n = (size_t)read(fd, got, len + 1);
	close(fd);
	CHECK_EQ(n, len);
	CHECK(!memcmp(got, want, len));
	CHECK_EQ(open_img(&f, got, n), 0);
	CHECK_EQ(snap_find(&f, T_VCPU, 1, &r), 0);
	CHECK(snap_get_u64(&r) == 0x1001);
	rm_tmpdir(dfd);
	free(got);
	free(want);
}

TEST(snap_w_write_failing_names_the_file_and_the_way_out)
{
	int dfd = mk_tmpdir();
	struct snap_w w;
	char names[256];

	snap_w_init(&w);
	snap_begin(&w, T_DEV, 0);
	snap_end(&w);
	CHECK_EQ(snap_w_write(&w, dfd, "nodir/state", err, sizeof(err)), -ENOENT);
	CHECK_STR(err, "snapshot state nodir/state: write: No such file or directory; check the "
		  "directory's space and permissions");
	/* Failing after the temporary file was made (a rename over a
	 * directory that is not empty): it goes too. */
	CHECK(mkdirat(dfd, "state", 0700) == 0);
	CHECK(mkdirat(dfd, "state/x", 0700) == 0);
	CHECK_EQ(snap_w_write(&w, dfd, "state", err, sizeof(err)), -EISDIR);
	CHECK(strstr(err, "snapshot state state: write: "));
	dir_names(names, sizeof(names));
	CHECK_STR(names, "state");
	CHECK(unlinkat(dfd, "state/x", AT_REMOVEDIR) == 0);
	CHECK(unlinkat(dfd, "state", AT_REMOVEDIR) == 0);
	snap_w_free(&w);
	rm_tmpdir(dfd);
}

TEST(snap_w_write_of_a_state_built_wrongly_writes_nothing)
{
	int dfd = mk_tmpdir();
	struct snap_w w;
	char names[256];

	snap_w_init(&w);
	snap_begin(&w, T_DEV, 0);
	snap_begin(&w, T_DEV, 1);
	snap_end(&w);
	CHECK_EQ(snap_w_write(&w, dfd, "state", err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "snapshot state state: "));
	CHECK(strstr(err, "a bug in mvm"));
	dir_names(names, sizeof(names));
	CHECK_STR(names, "");
	snap_w_free(&w);
	rm_tmpdir(dfd);
}

TEST(snap_w_write_into_a_subdirectory_syncs_that_one)
{
	int dfd = mk_tmpdir(), fd;

	struct snap_w w;

	CHECK(mkdirat(dfd, "sub", 0700) == 0);
	snap_w_init(&w);
	CHECK_EQ(snap_w_write(&w, dfd, "sub/state", err, sizeof(err)), 0);
	snap_w_free(&w);
	fd = openat(dfd, "sub/state", O_RDONLY);
	CHECK(fd >= 0);
	close(fd);
	CHECK(unlinkat(dfd, "sub/state", 0) == 0);
	CHECK(unlinkat(dfd, "sub", AT_REMOVEDIR) == 0);
	rm_tmpdir(dfd);
}
