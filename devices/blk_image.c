/* --disk option parsing and opening/locking the raw image. */
#include "devices/blk_image.h"
#include "vmm/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -EINVAL)

int blk_parse_spec(const char *spec, unsigned default_queues, struct blk_opts *o,
		   char *err, size_t errlen)
{
	const char *p, *comma;
	size_t n;

	memset(o, 0, sizeof(*o));
	o->cache = BLK_CACHE_WRITEBACK;
	o->backend = BLK_BACKEND_FILE;
	o->queues = default_queues ? default_queues : 1;
	o->poll_us = BLK_POLL_US_DEFAULT;
	if (o->queues > BLK_MAX_QUEUES)
		return ERR("--queues %u: at most %u queues per disk; use a smaller number",
			   default_queues, BLK_MAX_QUEUES);
	if (!spec || !*spec || *spec == ',')
		return ERR("--disk '%s': missing image path; use --disk PATH[,ro][,serial=ID]"
			   "[,cache=none|writeback][,discard=on][,queues=N]", spec ? spec : "");

	comma = strchr(spec, ',');
	n = comma ? (size_t)(comma - spec) : strlen(spec);
	if (n >= sizeof(o->path))
		return ERR("--disk: image path is longer than %zu bytes; use a shorter path",
			   sizeof(o->path) - 1);
	memcpy(o->path, spec, n);
	o->path[n] = '\0';

	for (p = comma; p; p = comma) {
		char opt[128];
		const char *val;

		p++;
		comma = strchr(p, ',');
		n = comma ? (size_t)(comma - p) : strlen(p);
		if (n == 0)
			return ERR("--disk '%s': empty option (two commas or a trailing comma); "
				   "remove it", spec);
		if (n >= sizeof(opt))
			return ERR("--disk '%s': option too long; see --help for disk options", spec);
		memcpy(opt, p, n);
		opt[n] = '\0';
		val = strchr(opt, '=');
		if (val)
			val++;

		if (!strcmp(opt, "ro")) {
			o->ro = true;
		} else if (!strcmp(opt, "rw")) {
			o->ro = false;
		} else if (!strncmp(opt, "serial=", 7)) {
			size_t i, len = strlen(val);
			if (len > BLK_SERIAL_MAX)
				return ERR("--disk serial '%s' is %zu bytes; at most %u bytes fit "
					   "the virtio-blk ID, use a shorter serial",
					   val, len, BLK_SERIAL_MAX);
			for (i = 0; i < len; i++)
				if (val[i] < 0x20 || val[i] > 0x7e)
					return ERR("--disk serial '%s': only printable ASCII is allowed",
						   val);
			memcpy(o->serial, val, len + 1);
		} else if (!strncmp(opt, "cache=", 6)) {
			if (!strcmp(val, "none"))
				o->cache = BLK_CACHE_NONE;
			else if (!strcmp(val, "writeback"))
				o->cache = BLK_CACHE_WRITEBACK;
			else
				return ERR("--disk cache='%s': unknown cache mode; use cache=none "
					   "or cache=writeback", val);
		} else if (!strncmp(opt, "discard=", 8)) {
			if (!strcmp(val, "on") || !strcmp(val, "unmap"))
				o->discard = true;
			else if (!strcmp(val, "off") || !strcmp(val, "ignore"))
				o->discard = false;
			else
				return ERR("--disk discard='%s': use discard=on or discard=off", val);
		} else if (!strncmp(opt, "queues=", 7)) {
			uint64_t q;
			int r = parse_uint(val, 1, BLK_MAX_QUEUES, &q);
			if (r)
				return ERR("--disk queues='%s': %s; use a number from 1 to %u",
					   val, r == -ERANGE ? "out of range" : "not a number",
					   BLK_MAX_QUEUES);
			o->queues = (unsigned)q;
		} else if (!strncmp(opt, "poll=", 5)) {
			uint64_t us;
			if (parse_uint(val, 0, BLK_POLL_US_MAX, &us))
				return ERR("--disk poll='%s': polling window in microseconds; "
					   "use 0 (off) to %u", val, BLK_POLL_US_MAX);
			o->poll_us = (unsigned)us;
		} else {
			return ERR("--disk: unknown option '%s'; valid options are ro, serial=ID, "
				   "cache=none|writeback, discard=on|off, queues=N, poll=USEC", opt);
		}
	}
	return 0;
}

#undef ERR
#define ERR(e, ...) (snprintf(err, errlen, __VA_ARGS__), (e))

/* Probe hole punching past EOF: a no-op where supported, EOPNOTSUPP where
 * the filesystem lacks it. Never changes the file's contents or size. */
static bool blk_probe_punch(int fd, uint64_t size)
{
	return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			 (off_t)size, (off_t)BLK_SECTOR) == 0;
}

int blk_image_open(const struct blk_opts *o, struct blk_image *img, char *err, size_t errlen)
{
	int flags = (o->ro ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	struct flock fl = { .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
	struct stat st;
	int fd, r;

	memset(img, 0, sizeof(*img));
	img->fd = img->fd_buffered = -1;
	img->ro = o->ro;

	fd = open(o->path, flags);
	if (fd < 0) {
		r = -errno;
		return ERR(r, "--disk %s: cannot open image: %s%s", o->path, strerror(-r),
			   r == -EACCES || r == -EROFS ? " (add ,ro to open it read-only)" : "");
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		r = ERR(r, "--disk %s: stat: %s", o->path, strerror(-r));
		goto close_fd;
	}
	if (S_ISBLK(st.st_mode)) {
		uint64_t bytes;
		if (ioctl(fd, BLKGETSIZE64, &bytes) < 0) {
			r = -errno;
			r = ERR(r, "--disk %s: BLKGETSIZE64: %s", o->path, strerror(-r));
			goto close_fd;
		}
		img->size = bytes;
	} else if (S_ISREG(st.st_mode)) {
		img->size = (uint64_t)st.st_size;
	} else {
		r = ERR(-EINVAL, "--disk %s: not a regular file or block device; "
			"give a raw disk image", o->path);
		goto close_fd;
	}
	if (img->size == 0 || img->size % BLK_SECTOR) {
		r = ERR(-EINVAL, "--disk %s: image size %llu is not a non-zero multiple of 512 "
			"bytes; resize it (e.g. truncate -s 64M %s)", o->path,
			(unsigned long long)img->size, o->path);
		goto close_fd;
	}

	/* OFD locks belong to the open file description, not the process, so
	 * they survive across our threads and drop exactly when fd closes. */
	fl.l_type = o->ro ? F_RDLCK : F_WRLCK;
	/* A VM that just ended may still hold the lock for a moment (the
	 * kernel drops an io_uring's registered files asynchronously when a
	 * process dies without tearing its rings down): retry for ~1 s
	 * before calling the image busy. */
	for (int tries = 0; fcntl(fd, F_OFD_SETLK, &fl) < 0; tries++) {
		r = -errno;
		if ((r == -EAGAIN || r == -EACCES) && tries < 20) {
			usleep(50 * 1000);
			continue;
		}
		if (r == -EAGAIN || r == -EACCES)
			r = ERR(-EBUSY, "--disk %s: image is locked by another process%s; "
			    "stop the other VM or use a copy of the image", o->path,
			    o->ro ? " (open read-write)" : "");
		else
			r = ERR(r, "--disk %s: cannot lock image: %s", o->path, strerror(-r));
		goto close_fd;
	}

	if (o->cache == BLK_CACHE_NONE) {
		char self[64];
		int dfd;

		/* Reopen through /proc so the O_DIRECT fd is the same file even
		 * if the path was renamed meanwhile. */
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		dfd = open(self, flags | O_DIRECT);
		if (dfd < 0 && errno == EINVAL) {
			warnx_mvm("--disk %s: the filesystem refuses O_DIRECT; cache=none falls "
				  "back to the host page cache (writeback)", o->path);
		} else if (dfd < 0) {
			r = -errno;
			r = ERR(r, "--disk %s: cannot open with O_DIRECT: %s", o->path, strerror(-r));
			goto close_fd;
		} else {
			/* Keep the locked buffered fd for requests O_DIRECT refuses
			 * (buffers not aligned to the host's logical block size). */
			img->fd_buffered = fd;
			fd = dfd;
			img->direct = true;
		}
	}
	img->fd = fd;
	if (o->discard && !o->ro)
		img->discard = blk_probe_punch(fd, img->size);
	if (o->discard && !o->ro && !img->discard)
		warnx_mvm("--disk %s: the filesystem cannot punch holes; discard is not offered "
			  "to the guest", o->path);
	return 0;

close_fd:
	close(fd);
	return r;
}

void blk_image_close(struct blk_image *img)
{
	if (img->fd >= 0)
		close(img->fd);
	if (img->fd_buffered >= 0)
		close(img->fd_buffered);
	img->fd = img->fd_buffered = -1;
}
