/* virtio-blk backing image: the host file behind a disk.
 *
 * Raw images only. The image is locked with an OFD lock (shared for ro,
 * exclusive for rw) held for as long as the fd is open, so two mvm
 * processes cannot write the same image. */
#ifndef MVM_BLK_IMAGE_H
#define MVM_BLK_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vmm/base/log.h"
/* struct mvm_disk: a disk has one shape, from the command line (or a
 * program) through the library to this device. */
#include "vmm/mvm.h"

#define BLK_PATH_MAX 4096          /* an image path, with its NUL */
#define BLK_SERIAL_MAX 20          /* VIRTIO_BLK_ID_BYTES */
#define BLK_SECTOR 512ULL          /* virtio-blk sector unit, also our blk_size */
#define BLK_POLL_US_DEFAULT 32     /* like QEMU's iothread poll-max-ns */
/* The longest slice an I/O thread sleeps after a kick to gather more
 * requests (struct vqw_gather): long enough for a nested or overcommitted
 * guest to post its next request (docs/benchmarks.md: how far apart they
 * come); off on its own where the guest waits for each. */
#define BLK_GATHER_US_DEFAULT 200
#define BLK_GATHER_US_MAX 1000

struct blk_image {
	int fd;                    /* O_DIRECT when direct */
	int fd_buffered;           /* same file without O_DIRECT, or -1 */
	uint64_t size;             /* bytes, multiple of 512 */
	bool ro;
	bool direct;               /* cache=none took effect */
	bool discard;              /* discard=on requested and fallocate works */
	bool blockdev;             /* a host block device (else a regular file) */
	/* Counted in this process's table of open images (the file's device
	 * and inode): another VM of the process is refused at once. Moves
	 * with the fds (blk_image_move). */
	bool counted;
	dev_t dev;
	ino_t ino;
};

/* Hand an open image to a new owner: *to gets everything, *from nothing. */
void blk_image_move(struct blk_image *to, struct blk_image *from);

/* Open and lock the image. 0 or -errno with a one-line message in err.
 * Warnings (O_DIRECT refused, no hole punching) go to log (may be NULL). */
int blk_image_open(const struct mvm_disk *o, struct blk_image *img, const struct log_sink *log,
		   char *err, size_t errlen);
/* The same, the image at rel from dirfd (AT_FDCWD: o->path's own
 * lookup); o->path names it in messages. Beneath a directory only a
 * regular file (a thread confined to an image directory has no ioctl for
 * a block device's size): the calls are openat on dirfd, fstat,
 * fcntl(F_OFD_SETLK) and, for discard, fallocate(PUNCH_HOLE|KEEP_SIZE). */
int blk_image_openat(int dirfd, const char *rel, const struct mvm_disk *o, struct blk_image *img,
		     const struct log_sink *log, char *err, size_t errlen);
void blk_image_close(struct blk_image *img);

#endif
