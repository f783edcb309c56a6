/* --disk values (mvm_disk_parse, the device's keys) and image open/lock. */
#include "tests/unit/disk_spec.h"
#include "tests/unit/check.h"
#include "devices/blk_image.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int parse(const char *spec, unsigned defq, struct mvm_disk *o, char *err)
{
	err[0] = '\0';
	return test_disk_parse(spec, defq, o, err, 256);
}

TEST(spec_path_only_gets_defaults)
{
	struct mvm_disk o;
	char err[256];

	CHECK_EQ(parse("disk.img", 0, &o, err), 0);
	CHECK_STR(o.path, "disk.img");
	CHECK(!o.ro);
	CHECK(!o.discard);
	CHECK_EQ(o.cache, MVM_CACHE_WRITEBACK);
	CHECK_EQ(o.queues, 1);
	CHECK(o.serial == NULL);
	CHECK_EQ(o.poll_us, BLK_POLL_US_DEFAULT);
	CHECK_EQ(parse("disk.img,poll=0", 0, &o, err), 0);
	CHECK_EQ(o.poll_us, 0);
	CHECK_EQ(o.gather_us, BLK_GATHER_US_DEFAULT);
	CHECK_EQ(parse("disk.img,gather=0", 0, &o, err), 0);
	CHECK_EQ(o.gather_us, 0);
	CHECK_EQ(parse("disk.img,gather=1000", 0, &o, err), 0);
	CHECK_EQ(o.gather_us, 1000);
	CHECK_EQ(parse("disk.img,gather=1001", 0, &o, err), -EINVAL);
	CHECK(strstr(err, "gather='1001'") && strstr(err, "use 0 (off) to 1000"));
	CHECK_EQ(parse("disk.img,gather=x", 0, &o, err), -EINVAL);
}

TEST(spec_all_options)
{
	struct mvm_disk o;
	char err[256];

	CHECK_EQ(parse("/tmp/a.raw,ro,serial=abc-123,cache=none,discard=on,queues=8", 2,
		       &o, err), 0);
	CHECK_STR(o.path, "/tmp/a.raw");
	CHECK(o.ro);
	CHECK(o.discard);
	CHECK_EQ(o.cache, MVM_CACHE_NONE);
	CHECK_EQ(o.queues, 8);
	CHECK_STR(o.serial, "abc-123");
}

TEST(spec_default_queues_from_cli)
{
	struct mvm_disk o;
	char err[256];

	CHECK_EQ(parse("x.img", 4, &o, err), 0);
	CHECK_EQ(o.queues, 4);
	CHECK_EQ(parse("x.img,queues=2", 4, &o, err), 0);
	CHECK_EQ(o.queues, 2);
}

TEST(spec_rejects_bad_values_with_one_line_error)
{
	static const char *bad[] = {
		"", ",ro", "x.img,", "x.img,,ro", "x.img,bogus", "x.img,cache=maybe",
		"x.img,discard=yes", "x.img,queues=0", "x.img,queues=65", "x.img,queues=two",
		"x.img,serial=123456789012345678901", "x.img,serial=a\tb", "x.img,cache=",
		"x.img,poll=1001", "x.img,poll=-1",
	};
	struct mvm_disk o;
	char err[256];
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(parse(bad[i], 1, &o, err), -EINVAL);
		CHECK(strlen(err) > 10);
		CHECK(strchr(err, '\n') == NULL);
		CHECK(strncmp(err, "disk", 4) == 0);     /* mvm(1) puts "--" in front */
	}
	CHECK_EQ(parse("x.img,queues=65", 1, &o, err), -EINVAL);
	/* The error names the offending value. */
	CHECK_EQ(parse("x.img,cache=maybe", 1, &o, err), -EINVAL);
	CHECK(strstr(err, "maybe") != NULL);
}

TEST(spec_serial_of_exactly_20_bytes_fits)
{
	struct mvm_disk o;
	char err[256];

	CHECK_EQ(parse("x.img,serial=12345678901234567890", 1, &o, err), 0);
	CHECK_STR(o.serial, "12345678901234567890");
}

static char *make_image(uint64_t size)
{
	static char path[64];
	int fd;

	strcpy(path, "/tmp/mvm-test-blk-XXXXXX");
	fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, (off_t)size), 0);
	close(fd);
	return path;
}

TEST(open_reports_size_and_mode)
{
	struct mvm_disk o;
	struct blk_image img;
	char err[256], *path = make_image(1 << 20);

	CHECK_EQ(parse(path, 1, &o, err), 0);
	CHECK_EQ(blk_image_open(&o, &img, NULL, err, sizeof(err)), 0);
	CHECK_EQ(img.size, 1 << 20);
	CHECK(!img.ro);
	CHECK(!img.direct);
	CHECK((fcntl(img.fd, F_GETFL) & O_ACCMODE) == O_RDWR);
	blk_image_close(&img);

	o.ro = true;
	CHECK_EQ(blk_image_open(&o, &img, NULL, err, sizeof(err)), 0);
	CHECK((fcntl(img.fd, F_GETFL) & O_ACCMODE) == O_RDONLY);
	blk_image_close(&img);
	unlink(path);
}

TEST(open_rejects_size_not_multiple_of_512)
{
	struct mvm_disk o;
	struct blk_image img;
	char err[256], *path = make_image(1000);

	CHECK_EQ(parse(path, 1, &o, err), 0);
	CHECK_EQ(blk_image_open(&o, &img, NULL, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "512") != NULL);
	CHECK(strstr(err, path) != NULL);
	unlink(path);
}

TEST(open_missing_file_names_it)
{
	struct mvm_disk o;
	struct blk_image img;
	char err[256];

	CHECK_EQ(parse("/nonexistent/mvm.img", 1, &o, err), 0);
	CHECK_EQ(blk_image_open(&o, &img, NULL, err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "/nonexistent/mvm.img") != NULL);
}

/* OFD locks conflict between open file descriptions even within one
 * process, which is exactly what a second mvm would hit. */
TEST(open_locks_image_against_second_user)
{
	struct mvm_disk o, oro;
	struct blk_image a, b, c;
	char err[256], *path = make_image(4096);

	CHECK_EQ(parse(path, 1, &o, err), 0);
	oro = o;
	oro.ro = true;
	CHECK_EQ(blk_image_open(&o, &a, NULL, err, sizeof(err)), 0);
	CHECK_EQ(blk_image_open(&o, &b, NULL, err, sizeof(err)), -EBUSY);
	CHECK(strstr(err, path) != NULL);
	CHECK_EQ(blk_image_open(&oro, &b, NULL, err, sizeof(err)), -EBUSY);
	blk_image_close(&a);

	/* Two read-only users share the image; a writer is then refused. */
	CHECK_EQ(blk_image_open(&oro, &a, NULL, err, sizeof(err)), 0);
	CHECK_EQ(blk_image_open(&oro, &b, NULL, err, sizeof(err)), 0);
	CHECK_EQ(blk_image_open(&o, &c, NULL, err, sizeof(err)), -EBUSY);
	blk_image_close(&a);
	blk_image_close(&b);
	unlink(path);
}

TEST(open_cache_none_uses_o_direct_or_falls_back)
{
	struct mvm_disk o;
	struct blk_image img;
	char err[256], *path = make_image(1 << 20);

	CHECK_EQ(parse(path, 1, &o, err), 0);
	o.cache = MVM_CACHE_NONE;
	CHECK_EQ(blk_image_open(&o, &img, NULL, err, sizeof(err)), 0);
	if (img.direct) {
		CHECK(fcntl(img.fd, F_GETFL) & O_DIRECT);
		CHECK(img.fd_buffered >= 0);
		CHECK(!(fcntl(img.fd_buffered, F_GETFL) & O_DIRECT));
	} else {
		CHECK_EQ(img.fd_buffered, -1);
	}
	blk_image_close(&img);
	unlink(path);
}
