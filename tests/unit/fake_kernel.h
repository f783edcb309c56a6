/* A minimal kernel image for tests that create VMs without booting them:
 * both a bzImage (protocol 2.15, 64-bit entry, cmdline_size 255) and an
 * s390x image ("S390EP" at 0x10008, 256 bytes of command line), so the
 * tests run on either architecture. */
#ifndef MVM_TEST_FAKE_KERNEL_H
#define MVM_TEST_FAKE_KERNEL_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check.h"

static inline void fake_kernel_write(const char *path)
{
	static uint8_t k[0x10480 + 4096];
	int fd;

	memset(k, 0, sizeof(k));
	k[0x1f1] = 1;
	k[0x1fe] = 0x55; k[0x1ff] = 0xaa;
	memcpy(k + 0x202, "HdrS", 4);
	k[0x206] = 0x0f; k[0x207] = 0x02;
	k[0x211] = 0x01;
	k[0x22e] = 0x40;
	k[0x232] = 0x20;
	k[0x236] = 0x01;
	k[0x238] = 255;
	k[0x25b] = 0x01;
	k[0x262] = 0x10;
	memcpy(k + 0x10008, "S390EP", 6);
	k[0x10430 + 6] = 0x01;          /* max_command_line_size 256, big-endian */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, k, sizeof(k)), (long long)sizeof(k));
	close(fd);
}

/* fake_vm_files' directory with all a test put in it (a snapshot, a
 * socket); nothing when none was made. */
static inline void fake_vm_files_remove(char *dir)
{
	char cmd[96];

	if (!dir[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", dir);
	dir[0] = '\0';
}

/* A fresh directory (dir, 64 bytes) holding the kernel above (kernel,
 * 128 bytes: DIR/bzImage) and a 1 MiB raw image (image: DIR/disk.img).
 * One made before through dir (by an earlier test in the same process)
 * is removed first. */
static inline void fake_vm_files(char *dir, char *kernel, char *image)
{
	int fd;

	fake_vm_files_remove(dir);
	snprintf(dir, 64, "/tmp/mvm-test-api.XXXXXX");
	CHECK(mkdtemp(dir));
	snprintf(kernel, 128, "%s/bzImage", dir);
	fake_kernel_write(kernel);
	snprintf(image, 128, "%s/disk.img", dir);
	fd = open(image, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, 1 << 20), 0);
	close(fd);
}

#endif
