/* Opening and locking the raw image. */
#include "devices/blk_image.h"
#include "vmm/base/util.h"
#include "vmm/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>

#define ERR(e, ...) (snprintf(err, errlen, __VA_ARGS__), (e))

/* The images this process's VMs have open. An OFD lock also conflicts
 * with another open file description in the same process, but its
 * refusal cannot say whose it is, and a VM of another process that just
 * ended is worth a short wait while one of this process is not: this
 * table tells them apart. Process-wide by nature (the locks are). */
#define BLK_OPEN_MAX 256
static struct blk_open {
	dev_t dev;
	ino_t ino;
	unsigned readers, writers;
} blk_open_tab[BLK_OPEN_MAX];
static pthread_mutex_t blk_open_lock = PTHREAD_MUTEX_INITIALIZER;

/* Count the image in the table: -EBUSY when a VM of this process has it
 * read-write (or has it at all and we want to write), -ENOSPC when the
 * table is full. */
static int blk_open_count(dev_t dev, ino_t ino, bool ro)
{
	struct blk_open *e, *free_e = NULL;
	int r = 0;
	unsigned i;

	pthread_mutex_lock(&blk_open_lock);
	for (i = 0; i < BLK_OPEN_MAX; i++) {
		e = &blk_open_tab[i];
		if (!e->readers && !e->writers) {
			if (!free_e)
				free_e = e;
			continue;
		}
		if (e->dev == dev && e->ino == ino)
			break;
	}
	if (i < BLK_OPEN_MAX) {
		if (e->writers || !ro)
			r = -EBUSY;
	} else if (free_e) {
		e = free_e;
		e->dev = dev;
		e->ino = ino;
	} else {
		r = -ENOSPC;
	}
	if (!r) {
		if (ro)
			e->readers++;
		else
			e->writers++;
	}
	pthread_mutex_unlock(&blk_open_lock);
	return r;
}

static void blk_open_uncount(dev_t dev, ino_t ino, bool ro)
{
	unsigned i;

	pthread_mutex_lock(&blk_open_lock);
	for (i = 0; i < BLK_OPEN_MAX; i++) {
		struct blk_open *e = &blk_open_tab[i];

		if ((e->readers || e->writers) && e->dev == dev && e->ino == ino) {
			if (ro && e->readers)
				e->readers--;
			else if (!ro && e->writers)
				e->writers--;
			break;
		}
	}
	pthread_mutex_unlock(&blk_open_lock);
}

/* Probe hole punching past EOF: a no-op where supported, EOPNOTSUPP where
 * the filesystem lacks it. Never changes the file's contents or size. */
static bool blk_probe_punch(int fd, uint64_t size)
{
	return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			 (off_t)size, (off_t)BLK_SECTOR) == 0;
}

int blk_image_open(const struct mvm_disk *o, struct blk_image *img, const struct log_sink *log,
		   char *err, size_t errlen)
{
	return blk_image_openat(AT_FDCWD, o->path, o, img, log, err, errlen);
}

int blk_image_openat(int dirfd, const char *rel, const struct mvm_disk *o, struct blk_image *img,
		     const struct log_sink *log, char *err, size_t errlen)
{
	int flags = (o->ro ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	struct flock fl = { .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
	struct stat st;
	int fd, r;

	memset(img, 0, sizeof(*img));
	img->fd = img->fd_buffered = -1;
	img->ro = o->ro;
	if (!o->path || !rel)
		return err_set(err, errlen, -EINVAL, "disk: no path; give a raw image");

	fd = openat(dirfd, rel, flags);
	if (fd < 0) {
		r = -errno;
		return ERR(r, "disk %s: cannot open image: %s%s", o->path, strerror(-r),
			   r == -EACCES || r == -EROFS ? " (add ,ro to open it read-only)" : "");
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		r = ERR(r, "disk %s: stat: %s", o->path, strerror(-r));
		goto close_fd;
	}
	if (S_ISBLK(st.st_mode) && dirfd != AT_FDCWD) {
		r = ERR(-EINVAL, "disk %s: a block device; beneath an image directory give a "
			"regular file", o->path);
		goto close_fd;
	} else if (S_ISBLK(st.st_mode)) {
		uint64_t bytes;
		if (ioctl(fd, BLKGETSIZE64, &bytes) < 0) {
			r = -errno;
			r = ERR(r, "disk %s: BLKGETSIZE64: %s", o->path, strerror(-r));
			goto close_fd;
		}
		img->size = bytes;
		img->blockdev = true;
	} else if (S_ISREG(st.st_mode)) {
		img->size = (uint64_t)st.st_size;
	} else {
		r = ERR(-EINVAL, "disk %s: not a regular file or block device; "
			"give a raw disk image", o->path);
		goto close_fd;
	}
	if (img->size == 0 || img->size % BLK_SECTOR) {
		r = ERR(-EINVAL, "disk %s: image size %llu is not a non-zero multiple of 512 "
			"bytes; resize it (e.g. truncate -s 64M %s)", o->path,
			(unsigned long long)img->size, o->path);
		goto close_fd;
	}

	r = blk_open_count(st.st_dev, st.st_ino, o->ro);
	if (r) {
		r = r == -EBUSY ?
		    ERR(-EBUSY, "disk %s: image is in use by another VM of this process%s; "
			"destroy that VM first or use a copy of the image", o->path,
			o->ro ? " (read-write)" : "") :
		    ERR(r, "disk %s: more than %u images open in this process", o->path,
			BLK_OPEN_MAX);
		goto close_fd;
	}
	img->counted = true;
	img->dev = st.st_dev;
	img->ino = st.st_ino;
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
			r = ERR(-EBUSY, "disk %s: image is locked by another process%s; "
			    "stop the other VM or use a copy of the image", o->path,
			    o->ro ? " (open read-write)" : "");
		else
			r = ERR(r, "disk %s: cannot lock image: %s", o->path, strerror(-r));
		goto close_fd;
	}

	if (o->cache == MVM_CACHE_NONE) {
		struct stat dst;
		int dfd;

		/* Opened again by its name (a confined thread has no /proc),
		 * and refused unless it is the same file, should the path
		 * have been renamed meanwhile. */
		dfd = openat(dirfd, rel, flags | O_DIRECT);
		if (dfd >= 0 && (fstat(dfd, &dst) || dst.st_dev != st.st_dev ||
				 dst.st_ino != st.st_ino)) {
			close(dfd);
			r = ERR(-EAGAIN, "disk %s: the image changed while it was opened; try "
				"again", o->path);
			goto close_fd;
		}
		if (dfd < 0 && errno == EINVAL) {
			log_warn(log, "disk %s: the filesystem refuses O_DIRECT; cache=none falls "
				  "back to the host page cache (writeback)", o->path);
		} else if (dfd < 0) {
			r = -errno;
			r = ERR(r, "disk %s: cannot open with O_DIRECT: %s", o->path, strerror(-r));
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
		log_warn(log, "disk %s: the filesystem cannot punch holes; discard is not offered "
			  "to the guest", o->path);
	return 0;

close_fd:
	close(fd);
	if (img->counted)
		blk_open_uncount(img->dev, img->ino, img->ro);
	img->counted = false;
	return r;
}

void blk_image_close(struct blk_image *img)
{
	if (img->fd >= 0)
		close(img->fd);
	if (img->fd_buffered >= 0)
		close(img->fd_buffered);
	img->fd = img->fd_buffered = -1;
	if (img->counted)
		blk_open_uncount(img->dev, img->ino, img->ro);
	img->counted = false;
}

void blk_image_move(struct blk_image *to, struct blk_image *from)
{
	*to = *from;
	from->fd = from->fd_buffered = -1;
	from->counted = false;
}
