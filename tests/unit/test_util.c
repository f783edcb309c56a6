/* Size/number parsing and the guest memory translation helper. */
#include "tests/unit/check.h"
#include "vmm/base/util.h"
#include "vmm/base/guest_mem.h"
#include "vmm/base/byteorder.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

TEST(parse_size_units)
{
	uint64_t v;
	CHECK_EQ(parse_size("4096", &v), 0); CHECK_EQ(v, 4096);
	CHECK_EQ(parse_size("256M", &v), 0); CHECK_EQ(v, 256 * MiB);
	CHECK_EQ(parse_size("2k", &v), 0); CHECK_EQ(v, 2048);
	CHECK_EQ(parse_size("1GiB", &v), 0); CHECK_EQ(v, GiB);
	CHECK_EQ(parse_size("3G", &v), 0); CHECK_EQ(v, 3 * GiB);
}

TEST(parse_size_rejects_malformed)
{
	uint64_t v;
	CHECK_EQ(parse_size("12Q", &v), -EINVAL);
	CHECK_EQ(parse_size("", &v), -EINVAL);
	CHECK_EQ(parse_size("M", &v), -EINVAL);
	CHECK_EQ(parse_size("-1M", &v), -EINVAL);
	CHECK_EQ(parse_size("1MM", &v), -EINVAL);
	CHECK_EQ(parse_size("99999999999999999999", &v), -ERANGE);
	CHECK_EQ(parse_size("17179869184G", &v), -ERANGE);
}

TEST(parse_uint_range)
{
	uint64_t v;
	CHECK_EQ(parse_uint("4", 1, 32, &v), 0); CHECK_EQ(v, 4);
	CHECK_EQ(parse_uint("0", 1, 32, &v), -ERANGE);
	CHECK_EQ(parse_uint("33", 1, 32, &v), -ERANGE);
	CHECK_EQ(parse_uint("4x", 1, 32, &v), -EINVAL);
	CHECK_EQ(parse_uint("-4", 0, 32, &v), -EINVAL);
}

TEST(gmem_ptr_bounds)
{
	static uint8_t a[4096], b[8192];
	struct guest_mem gm = {0};

	CHECK_EQ(gmem_add_region(&gm, 0, sizeof(a), a), 0);
	CHECK_EQ(gmem_add_region(&gm, 0x10000, sizeof(b), b), 0);
	CHECK(gmem_ptr(&gm, 0, 4096) == a);
	CHECK(gmem_ptr(&gm, 4095, 1) == a + 4095);
	CHECK(gmem_ptr(&gm, 4095, 2) == NULL);          /* crosses region end */
	CHECK(gmem_ptr(&gm, 4096, 1) == NULL);          /* hole */
	CHECK(gmem_ptr(&gm, 0x10000 + 8191, 1) == b + 8191);
	CHECK(gmem_ptr(&gm, 0x10000, 8193) == NULL);
	CHECK(gmem_ptr(&gm, 0, 0) == NULL);             /* length 0 */
	CHECK(gmem_ptr(&gm, UINT64_MAX, 2) == NULL);    /* wraps */
	CHECK(gmem_ptr(&gm, 0x10, UINT64_MAX) == NULL);
	CHECK_EQ(gmem_add_region(&gm, 0x800, 16, b), -EINVAL); /* overlap */
}

TEST(gmem_map_splits_around_hole)
{
	struct guest_mem gm;

	CHECK_EQ(gmem_map(&gm, 3 * MiB, 2 * MiB), 0);
	CHECK_EQ(gm.nr, 2);
	CHECK_EQ(gm.r[0].gpa, 0); CHECK_EQ(gm.r[0].size, 2 * MiB);
	CHECK_EQ(gm.r[1].gpa, 4 * GiB); CHECK_EQ(gm.r[1].size, MiB);
	CHECK(gmem_ptr(&gm, 2 * MiB, 1) == NULL);
	CHECK(gmem_ptr(&gm, 4 * GiB + MiB - 8, 8) != NULL);
	gmem_unmap(&gm);
}

TEST(gmem_map_host_base_is_2mib_aligned)
{
	struct guest_mem gm;
	unsigned i;

	/* Several times: the mapping lands at different addresses. */
	for (i = 0; i < 8; i++) {
		CHECK_EQ(gmem_map(&gm, 16 * MiB + 4096 * i, 4 * GiB), 0);
		CHECK_EQ(gm.nr, 1);
		CHECK_EQ((uintptr_t)gm.r[0].hva % (2 * MiB), 0);
		/* The whole range is usable: first and last byte. */
		*(volatile uint8_t *)gmem_ptr(&gm, 0, 1) = 1;
		*(volatile uint8_t *)gmem_ptr(&gm, gm.r[0].size - 1, 1) = 1;
		gmem_unmap(&gm);
	}
}

TEST(le_accessors)
{
	uint8_t buf[8] = {0};
	le32_store(buf + 1, 0x11223344);   /* unaligned */
	CHECK_EQ(buf[1], 0x44); CHECK_EQ(buf[4], 0x11);
	CHECK_EQ(le32_load(buf + 1), 0x11223344);
	le16_store(buf, 0xabcd);
	CHECK_EQ(buf[0], 0xcd);
	le64_store(buf, 0x0102030405060708ULL);
	CHECK_EQ(buf[0], 8);
	CHECK_EQ(le64_load(buf), 0x0102030405060708ULL);
}

TEST(be_accessors)
{
	uint8_t buf[9] = {0};

	be32_store(buf + 1, 0x11223344);   /* unaligned */
	CHECK_EQ(buf[1], 0x11); CHECK_EQ(buf[4], 0x44);
	CHECK_EQ(be32_load(buf + 1), 0x11223344);
	be16_store(buf, 0xabcd);
	CHECK_EQ(buf[0], 0xab); CHECK_EQ(buf[1], 0xcd);
	CHECK_EQ(be16_load(buf), 0xabcd);
	be64_store(buf + 1, 0x0102030405060708ULL);
	CHECK_EQ(buf[1], 1); CHECK_EQ(buf[8], 8);
	CHECK_EQ(be64_load(buf + 1), 0x0102030405060708ULL);
	/* The same bytes read the other way round. */
	CHECK_EQ(le64_load(buf + 1), 0x0807060504030201ULL);
}

/* An initrd is read straight into guest RAM at the size open_initrd
 * took: a file that shrinks meanwhile is an error that says so, not a
 * short initrd in the guest. */
TEST(initrd_that_shrinks_while_read_is_an_error)
{
	char path[] = "/tmp/mvm-test-initrd-XXXXXX", err[512] = "";
	uint8_t buf[8192];
	size_t len = 0;
	int fd = mkstemp(path), rfd = -1;

	CHECK(fd >= 0);
	memset(buf, 0x42, sizeof(buf));
	CHECK_EQ(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	CHECK_EQ(open_initrd(path, 4096, &rfd, &len, err, sizeof(err)), -EFBIG);
	CHECK(strstr(err, path) && strstr(err, "larger than guest RAM"));
	CHECK_EQ(open_initrd(path, 1 << 20, &rfd, &len, err, sizeof(err)), 0);
	CHECK_EQ(len, sizeof(buf));
	CHECK_EQ(ftruncate(fd, 100), 0);
	CHECK_EQ(read_initrd_into(rfd, path, buf, len, err, sizeof(err)), -EIO);
	CHECK(strstr(err, path) && strstr(err, "shorter"));
	close(rfd);
	CHECK_EQ(open_initrd("/tmp", 1 << 20, &rfd, &len, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "not a regular file"));
	close(fd);
	unlink(path);
}

/* A boot check's initrd: its size, or why not, naming the file. */
TEST(initrd_size_names_what_is_wrong)
{
	char err[512] = "";
	uint64_t size = 7;

	CHECK_EQ(initrd_size("/nonexistent/initrd", &size, err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "cannot open initrd /nonexistent/initrd: No such file"));
	CHECK_EQ(initrd_size("/tmp", &size, err, sizeof(err)), -EINVAL);
	CHECK_STR(err, "initrd /tmp is not a regular file");
	CHECK_EQ(size, 7);
	CHECK_EQ(initrd_size("/proc/self/exe", &size, err, sizeof(err)), 0);
	CHECK(size > 0);
}

/* A program built with an older header hands over a shorter struct: the
 * fields it did not know keep the library's defaults. A newer program's
 * longer one is taken when the part beyond is zero. */
TEST(abi_copy_in_takes_what_the_caller_knew)
{
	struct v1 { size_t size; uint64_t a; } old = { sizeof(old), 5 };
	struct v2 { size_t size; uint64_t a, b; } ours = { 0, 1, 42 };
	struct v3 { size_t size; uint64_t a, b, c; } newer = { sizeof(newer), 6, 7, 0 };

	CHECK_EQ(abi_copy_in(&ours, sizeof(ours), &old, old.size, sizeof(old)), 0);
	CHECK_EQ(ours.a, 5);
	CHECK_EQ(ours.b, 42);
	CHECK_EQ(abi_copy_in(&ours, sizeof(ours), &newer, newer.size, sizeof(old)), 0);
	CHECK_EQ(ours.a, 6);
	CHECK_EQ(ours.b, 7);
	newer.c = 1;
	CHECK_EQ(abi_copy_in(&ours, sizeof(ours), &newer, newer.size, sizeof(old)), -E2BIG);
	CHECK_EQ(abi_copy_in(&ours, sizeof(ours), &old, sizeof(size_t), sizeof(old)), -EINVAL);
}

TEST(abi_copy_out_writes_what_fits_and_zeros_beyond)
{
	uint8_t src[4] = { 1, 2, 3, 4 }, dst[6];

	memset(dst, 0xee, sizeof(dst));
	abi_copy_out(dst, 2, src, sizeof(src));
	CHECK(dst[0] == 1 && dst[1] == 2 && dst[2] == 0xee);
	abi_copy_out(dst, sizeof(dst), src, sizeof(src));
	CHECK(dst[3] == 4 && dst[4] == 0 && dst[5] == 0);
}
