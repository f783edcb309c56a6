#include "vmm/base/util.h"

#include <errno.h>
#include <time.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int err_vset(char *err, size_t errlen, int ret, const char *fmt, va_list ap)
{
	char *p;

	if (!err || !errlen)
		return ret;
	vsnprintf(err, errlen, fmt, ap);
	for (p = err; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return ret;
}

int err_set(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ret = err_vset(err, errlen, ret, fmt, ap);
	va_end(ap);
	return ret;
}

void err_prefix(char *err, size_t errlen, const char *fmt, ...)
{
	char prefix[512];
	size_t n, have;
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	n = strlen(prefix);
	if (n >= errlen)
		n = errlen - 1;
	have = strnlen(err, errlen - 1);
	if (have > errlen - 1 - n)
		have = errlen - 1 - n;
	memmove(err + n, err, have);
	memcpy(err, prefix, n);
	err[n + have] = '\0';
	for (have = 0; have < n; have++)
		if ((unsigned char)err[have] < 0x20 || err[have] == 0x7f)
			err[have] = '?';
}

int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	case '\0': break;
	default: return -EINVAL;
	}
	if (shift && *end == 'i')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

int file_open_regular(const char *path, uint64_t max, int *fd, size_t *size)
{
	struct stat st;
	int f, ret;

	f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return -errno;
	if (fstat(f, &st) < 0) {
		ret = -errno;
		goto close_fd;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		goto close_fd;
	}
	if ((uint64_t)st.st_size > max || (uint64_t)st.st_size > SIZE_MAX / 2) {
		ret = -EFBIG;
		goto close_fd;
	}
	*fd = f;
	*size = (size_t)st.st_size;
	return 0;
close_fd:
	close(f);
	return ret;
}

int read_full(int fd, void *dst, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, (uint8_t *)dst + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;    /* the file shrank since its size was taken */
		done += (size_t)n;
	}
	return 0;
}

/* Under AddressSanitizer the blocks are its allocator's, which opens
 * nothing and checks every access against the block's end. */
#if defined(__SANITIZE_ADDRESS__)
#define PAGES_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PAGES_ASAN 1
#endif
#endif

void *pages_alloc(size_t len)
{
#ifdef PAGES_ASAN
	return calloc(1, len ? len : 1);
#else
	void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	return p == MAP_FAILED ? NULL : p;
#endif
}

void *pages_reserve(size_t len)
{
#ifdef PAGES_ASAN
	return calloc(1, len ? len : 1);
#else
	void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
#endif
}

void pages_discard(void *p, size_t len)
{
#ifdef PAGES_ASAN
	/* The allocator's block, not whole pages of its own: kept. */
	(void)p;
	(void)len;
#else
	if (p && len)
		madvise(p, len, MADV_DONTNEED);
#endif
}

void pages_free(void *p, size_t len)
{
#ifdef PAGES_ASAN
	(void)len;
	free(p);
#else
	if (p)
		munmap(p, len ? len : 1);
#endif
}

int boot_image_read(const char *path, uint64_t max, size_t head,
		    bool (*head_only)(const uint8_t *buf, size_t n, size_t len),
		    struct boot_image *im)
{
	size_t size, n;
	uint8_t *b;
	int fd, ret;

	*im = BOOT_IMAGE_NONE;
	ret = file_open_regular(path, max, &fd, &size);
	if (ret)
		return ret;
	/* A kernel is megabytes, read once at start (pages_alloc). Pages
	 * that are not read into stay untouched and cost nothing. */
	b = pages_alloc(size);
	if (!b) {
		ret = -ENOMEM;
		goto close_fd;
	}
	n = size < head ? size : head;
	ret = read_full(fd, b, n);
	if (ret)
		goto free_buf;
	if (n < size && head_only && head_only(b, n, size)) {
		*im = (struct boot_image){ .buf = b, .len = size, .head = n, .fd = fd };
		return 0;
	}
	ret = read_full(fd, b + n, size - n);
	if (ret)
		goto free_buf;
	close(fd);
	*im = (struct boot_image){ .buf = b, .len = size, .head = size, .fd = -1 };
	return 0;
free_buf:
	pages_free(b, size);
close_fd:
	close(fd);
	return ret;
}

/* Read exactly len bytes at off of fd into dst. 0 or -errno (-EIO: the
 * file ended first). */
static int pread_full(int fd, uint8_t *dst, size_t len, size_t off)
{
	while (len) {
		ssize_t r = pread(fd, dst, len, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO;
		dst += (size_t)r;
		off += (size_t)r;
		len -= (size_t)r;
	}
	return 0;
}

int boot_image_copy(const struct boot_image *im, void *dst, size_t off, size_t len)
{
	uint8_t *d = dst;
	size_t from_buf;

	if (off > im->len || len > im->len - off)
		return -EINVAL;
	from_buf = off < im->head ? MIN(len, im->head - off) : 0;
	memcpy(d, im->buf + off, from_buf);
	return pread_full(im->fd, d + from_buf, len - from_buf, off + from_buf);
}

int boot_image_fill(const struct boot_image *im, size_t off, size_t len)
{
	size_t start;

	if (off > im->len || len > im->len - off)
		return -EINVAL;
	if (off + len <= im->head)
		return 0;
	start = MAX(off, im->head);
	return pread_full(im->fd, im->buf + start, off + len - start, start);
}

void boot_image_free(struct boot_image *im)
{
	if (im->buf)
		pages_free(im->buf, im->len);
	if (im->fd >= 0)
		close(im->fd);
	*im = BOOT_IMAGE_NONE;
}

int open_initrd(const char *path, uint64_t mem_size, int *fd, size_t *len, char *err,
		size_t errlen)
{
	int ret = file_open_regular(path, mem_size, fd, len);

	if (ret)
		return err_set(err, errlen, ret, "cannot read initrd %s: %s", path,
			       ret == -EFBIG ? "larger than guest RAM; use more --mem" :
			       ret == -EINVAL ? "not a regular file" : strerror(-ret));
	if (!*len) {
		close(*fd);
		return err_set(err, errlen, -EINVAL, "initrd %s is empty: pass a real initramfs "
			       "or none", path);
	}
	return 0;
}

int initrd_size(const char *path, uint64_t *size, char *err, size_t errlen)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return err_set(err, errlen, -errno, "cannot open initrd %s: %s", path,
			       strerror(errno));
	if (!S_ISREG(st.st_mode))
		return err_set(err, errlen, -EINVAL, "initrd %s is not a regular file", path);
	*size = (uint64_t)st.st_size;
	return 0;
}

int read_initrd_into(int fd, const char *path, void *dst, size_t len, char *err,
		     size_t errlen)
{
	int ret;

	if (!dst)
		return err_set(err, errlen, -EFAULT, "initrd %s of %zu bytes: its place is "
			       "outside guest RAM", path, len);
	ret = read_full(fd, dst, len);

	if (ret)
		return err_set(err, errlen, ret, "cannot read initrd %s: %s", path,
			       ret == -EIO ? "it became shorter while mvm read it" : strerror(-ret));
	return 0;
}

uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int mono_cond_init(pthread_cond_t *c)
{
	pthread_condattr_t ca;
	int ret;

	ret = -pthread_condattr_init(&ca);
	if (ret)
		return ret;
	ret = -pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (!ret)
		ret = -pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
	return ret;
}

struct timespec mono_timespec(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000ull),
				  .tv_nsec = (long)(ns % 1000000000ull) };
}

int thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	pthread_attr_t a;
	int r;

	/* pthread functions return an error number, not -1/errno. */
	r = pthread_attr_init(&a);
	if (r)
		return -r;
	r = pthread_attr_setstacksize(&a, UTIL_THREAD_STACK);
	if (!r)
		r = pthread_create(t, &a, fn, arg);
	pthread_attr_destroy(&a);
	return -r;
}

int thread_start_sync(pthread_t *t, void *(*fn)(void *), void *arg,
		      struct thread_handshake *hs)
{
	int r;

	if (sem_init(&hs->sem, 0, 0))
		return -errno;
	hs->err = 0;
	hs->tid = 0;
	hs->name[0] = '\0';
	r = thread_start(t, fn, arg);
	if (r)
		goto destroy_sem;
	while (sem_wait(&hs->sem) && errno == EINTR)
		;
	/* Pairs with thread_ready's sem_post: err was written before. */
	r = hs->err;
	if (r)
		pthread_join(*t, NULL);
destroy_sem:
	sem_destroy(&hs->sem);
	return r;
}

void thread_begin(struct thread_handshake *hs, const char *name)
{
	/* Published by thread_ready's sem_post, like err. */
	snprintf(hs->name, sizeof(hs->name), "%s", name);
	pthread_setname_np(pthread_self(), hs->name);
	hs->tid = (int)gettid();
}

void thread_ready(struct thread_handshake *hs, int err)
{
	hs->err = err;
	sem_post(&hs->sem);
}

int abi_copy_in(void *dst, size_t dst_size, const void *src, size_t src_size, size_t min_size)
{
	const uint8_t *tail = (const uint8_t *)src + dst_size;
	size_t i;

	if (src_size < min_size)
		return -EINVAL;
	for (i = 0; dst_size < src_size && i < src_size - dst_size; i++)
		if (tail[i])
			return -E2BIG;
	memcpy(dst, src, src_size < dst_size ? src_size : dst_size);
	return 0;
}

void abi_copy_out(void *dst, size_t len, const void *src, size_t src_size)
{
	size_t n = len < src_size ? len : src_size;

	memcpy(dst, src, n);
	memset((uint8_t *)dst + n, 0, len - n);
}
