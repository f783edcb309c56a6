/* iov.c: byte streams over iovec arrays, as virtio-blk reads a chain. */
#include <errno.h>
#include <string.h>

#include "devices/iov.h"
#include "tests/unit/check.h"

/* Three buffers of 4, 0 and 6 bytes over one array "abcd" "" "efghij". */
static char mem[10];
static struct iovec v[3];

static void setup(void)
{
	memcpy(mem, "abcdefghij", 10);
	v[0] = (struct iovec){ mem, 4 };
	v[1] = (struct iovec){ mem + 4, 0 };
	v[2] = (struct iovec){ mem + 4, 6 };
}

TEST(len_sums_every_entry)
{
	setup();
	CHECK_EQ(iov_len(v, 3), 10);
	CHECK_EQ(iov_len(v, 0), 0);
}

TEST(read_crosses_entries_at_an_offset)
{
	char out[8] = { 0 };

	setup();
	CHECK_EQ(iov_read(v, 3, 2, out, 5), 5);
	CHECK_STR(out, "cdefg");
}

TEST(read_stops_where_the_stream_ends)
{
	char out[8] = { 0 };

	setup();
	CHECK_EQ(iov_read(v, 3, 7, out, 8), 3);
	CHECK_STR(out, "hij");
	CHECK_EQ(iov_read(v, 3, 10, out, 1), 0);
	CHECK_EQ(iov_read(v, 3, 99, out, 1), 0);
}

TEST(write_lands_in_the_right_bytes)
{
	setup();
	CHECK_EQ(iov_write(v, 3, 3, "XYZ", 3), 3);
	CHECK(memcmp(mem, "abcXYZghij", 10) == 0);
}

TEST(slice_trims_first_and_last_and_skips_empty)
{
	struct iovec out[4];

	setup();
	CHECK_EQ(iov_slice(v, 3, 2, 5, out, 4), 2);
	CHECK(out[0].iov_base == mem + 2 && out[0].iov_len == 2);
	CHECK(out[1].iov_base == mem + 4 && out[1].iov_len == 3);
	/* Starting exactly at an entry boundary. */
	CHECK_EQ(iov_slice(v, 3, 4, 6, out, 4), 1);
	CHECK(out[0].iov_base == mem + 4 && out[0].iov_len == 6);
}

TEST(slice_refuses_too_many_entries_or_a_short_stream)
{
	struct iovec out[4];

	setup();
	CHECK_EQ(iov_slice(v, 3, 0, 10, out, 1), -E2BIG);
	CHECK_EQ(iov_slice(v, 3, 5, 6, out, 4), -ERANGE);
	CHECK_EQ(iov_slice(v, 3, 0, 0, out, 0), 0);
}
