/* mvm_coredump: a paused guest as an ELF core file (vmm/base/elfcore.h),
 * Cloud Hypervisor's vm.coredump. */
#include "vmm/lib/mvm_priv.h"
#include "arch/arch.h"
#include "vmm/base/elfcore.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COREDUMP_TMP_SUFFIX ".part"

/* The vCPUs' notes into *notes (the caller frees it): their length, or
 * -errno with a message. */
static int coredump_notes(struct mvm *m, uint8_t **notes, size_t *len, char *err,
			  size_t errlen)
{
	size_t cap = (size_t)m->nvcpus * ARCH_COREDUMP_NOTES_MAX, at = 0;
	uint8_t *buf = malloc(cap ? cap : 1);
	unsigned i;
	int n;

	if (!buf)
		return err_set(err, errlen, -ENOMEM, "out of memory");
	for (i = 0; i < m->nvcpus; i++) {
		n = arch_vcpu_coredump_notes(&m->vcpus[i], buf + at, cap - at, err, errlen);
		if (n < 0) {
			free(buf);
			return n;
		}
		at += (size_t)n;
	}
	*notes = buf;
	*len = at;
	return 0;
}

/* The file at `name` from at: headers, notes, guest RAM, written under a
 * temporary name and renamed once complete (a failure leaves nothing). */
static int coredump_write(struct mvm *m, const struct snapshot_at *at, const char *base,
			  const uint8_t *notes, size_t notes_len)
{
	const struct guest_mem *gm = &m->vm.mem;
	struct elfcore_seg segs[GMEM_MAX_REGIONS];
	char tmpbase[PATH_MAX], tmp[PATH_MAX], name[PATH_MAX];
	uint8_t *hdr;
	uint64_t notes_off, total;
	size_t hlen = ELFCORE_EHDR_SIZE + (size_t)(gm->nr + 1) * ELFCORE_PHDR_SIZE;
	unsigned i;
	int fd, ret;

	for (i = 0; i < gm->nr; i++)
		segs[i] = (struct elfcore_seg){ .paddr = gm->r[i].gpa, .size = gm->r[i].size };
	total = elfcore_layout(segs, gm->nr, notes_len, &notes_off);
	hdr = calloc(1, hlen);
	if (!hdr)
		return -ENOMEM;
	elfcore_headers(hdr, arch_coredump.machine, arch_coredump.big_endian, segs, gm->nr,
			notes_off, notes_len);
	snprintf(tmpbase, sizeof(tmpbase), "%s" COREDUMP_TMP_SUFFIX, base);
	snapshot_name(at, tmpbase, tmp);
	snapshot_name(at, base, name);
	fd = openat(at->dirfd, tmp, SNAP_OPEN_WRITE, 0600);
	if (fd < 0) {
		ret = -errno;
		goto free_hdr;
	}
	ret = snapshot_pwrite_all(fd, hdr, hlen, 0);
	if (!ret)
		ret = snapshot_pwrite_all(fd, notes, notes_len, (off_t)notes_off);
	for (i = 0; i < gm->nr && !ret; i++)
		ret = snapshot_pwrite_sparse(fd, gm->r[i].hva, gm->r[i].size, (off_t)segs[i].offset);
	ret = snapshot_file_finish(at, fd, tmp, name, total, ret);
free_hdr:
	free(hdr);
	return ret;
}

uint64_t mvm_coredump_size_max(unsigned cpus, uint64_t mem)
{
	/* elfcore_layout's: the headers, the notes, then each region from a
	 * page boundary (at most a page of padding before each). */
	return ELFCORE_EHDR_SIZE + (uint64_t)(GMEM_MAX_REGIONS + 1) * ELFCORE_PHDR_SIZE +
	       (uint64_t)cpus * ARCH_COREDUMP_NOTES_MAX + (uint64_t)GMEM_MAX_REGIONS * ELFCORE_PAGE +
	       mem;
}

int mvm_coredump(struct mvm *m, const char *path, char *err, size_t errlen)
{
	struct snapshot_at at;
	char dir[PATH_MAX], what[160];
	const char *slash, *base;
	uint8_t *notes = NULL;
	size_t notes_len = 0, n;
	int ret;

	if (!m)
		return err_set(err, errlen, -EINVAL, "mvm_coredump: vm is NULL");
	if (!path || !*path)
		return err_set(err, errlen, -EISDIR, "mvm_coredump: no file; give one to write the "
			       "core dump to");
	slash = strrchr(path, '/');
	base = slash ? slash + 1 : path;
	n = slash ? (size_t)(slash - path) : 0;
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return err_set(err, errlen, -EISDIR, "coredump %s: not a file name; give the "
			       "file to write, not a directory", path);
	if (n >= sizeof(dir) || strlen(base) + sizeof(COREDUMP_TMP_SUFFIX) > NAME_MAX + 1)
		return err_set(err, errlen, -ENAMETOOLONG, "coredump %s: too long a path", path);
	if (!slash) {
		strcpy(dir, ".");
	} else if (slash == path) {
		strcpy(dir, "/");
	} else {
		memcpy(dir, path, n);
		dir[n] = '\0';
	}
	pthread_mutex_lock(&m->ctl_lock);
	ret = mvm_check_paused(m, "mvm_coredump", err, errlen);
	if (ret)
		goto unlock;
	/* The notes first: an architecture without core dumps, or a vCPU
	 * whose registers cannot be read, leaves no file. */
	ret = coredump_notes(m, &notes, &notes_len, err, errlen);
	if (ret) {
		err_prefix(err, errlen, "coredump: ");
		goto unlock;
	}
	/* Its messages name the file first, then the directory they are
	 * about ("coredump /tmp/core: its directory /tmp: not beneath ..."). */
	snprintf(what, sizeof(what), "coredump %.*s: its directory",
		 (int)MIN(strlen(path), sizeof(what) - 32), path);
	ret = snapshot_target(m, what, dir, &at, err, errlen);
	if (ret)
		goto free_notes;
	ret = coredump_write(m, &at, base, notes, notes_len);
	if (ret)
		err_set(err, errlen, ret, "coredump %s: writing %llu MiB of guest memory: %s%s", path,
			(unsigned long long)(m->vm.mem.total >> 20), strerror(-ret),
			ret == -ENOSPC || ret == -EDQUOT ? "; check the directory's space" :
			ret == -EFBIG ? "; the process's file size limit (RLIMIT_FSIZE) is lower" : "");
	if (at.own)
		close(at.dirfd);
free_notes:
	free(notes);
unlock:
	pthread_mutex_unlock(&m->ctl_lock);
	return ret;
}
