/* Small helpers shared by every module: error reporting, sizes, counting. */
#ifndef MVM_UTIL_H
#define MVM_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdbool.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* The struct holding `member` at ptr (type-checked). */
#define container_of(ptr, type, member) \
	((type *)((char *)(1 ? (ptr) : &((type *)0)->member) - offsetof(type, member)))
#define ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((__typeof__(x))(a) - 1))
#define ALIGN_DOWN(x, a) ((x) & ~((__typeof__(x))(a) - 1))
#define IS_POW2(x) ((x) != 0 && ((x) & ((x) - 1)) == 0)
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#define KiB (1024ULL)
#define MiB (1024ULL * KiB)
#define GiB (1024ULL * MiB)

/* mvm's own exit statuses (documented in README.md). A status the guest
 * reports through the exit port is passed through unchanged. */
enum {
	MVM_EXIT_OK = 0,
	MVM_EXIT_USAGE = 2,     /* bad command line or input file; nothing started */
	MVM_EXIT_INTERNAL = 125, /* KVM or host failure after start */
	MVM_EXIT_CRASHED = 122, /* the guest crashed: a triple fault (x86) */
	MVM_EXIT_PANICKED = 123, /* the guest kernel panicked and said so (pvpanic on x86, a disabled wait on s390) */
	MVM_EXIT_UNHANDLED = 126, /* guest did something mvm does not handle */
};

/* Format a one-line message into err (when err and errlen are non-zero)
 * and return ret: `return err_set(err, errlen, -EINVAL, "...", ...);`.
 * What it quotes may hold a newline or other control characters (a path,
 * a value the caller typed): they become '?', so it stays one line. */
__attribute__((format(printf, 4, 5)))
int err_set(char *err, size_t errlen, int ret, const char *fmt, ...);
/* Put a formatted prefix before the message already in err (cut to
 * errlen), e.g. the name of the file a lower layer's message is about. */
__attribute__((format(printf, 3, 4)))
void err_prefix(char *err, size_t errlen, const char *fmt, ...);
__attribute__((format(printf, 4, 0)))
int err_vset(char *err, size_t errlen, int ret, const char *fmt, va_list ap);

/* Public structs across versions (vmm/mvm.h). abi_copy_in: the caller's
 * struct of src_size bytes into dst (dst_size bytes, holding the
 * defaults): min(src_size, dst_size) bytes are taken; a longer one (a
 * program built with a newer header) is accepted when everything beyond
 * dst_size is zero. -EINVAL: src_size below min_size, or set fields this
 * version does not know (-E2BIG). abi_copy_out: src (src_size bytes)
 * into the caller's dst of len bytes, zeros beyond what src has. */
int abi_copy_in(void *dst, size_t dst_size, const void *src, size_t src_size, size_t min_size);
void abi_copy_out(void *dst, size_t len, const void *src, size_t src_size);

/* Parse "256M", "1G", "4096", "2k" (binary units, optional trailing B/iB).
 * Returns 0 or -EINVAL (malformed) / -ERANGE (overflow). */
int parse_size(const char *s, uint64_t *out);

/* Parse a non-negative decimal integer within [min, max]. 0 or -EINVAL/-ERANGE. */
int parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* Open a regular file of at most max bytes for reading: *fd and its
 * *size. 0 or -errno (-EINVAL: not a regular file, -EFBIG: larger). */
int file_open_regular(const char *path, uint64_t max, int *fd, size_t *size);
/* Read exactly len bytes from fd into dst. 0 or -errno (-EIO: the file
 * ended first). */
int read_full(int fd, void *dst, size_t len);

/* A kernel image between a boot loader's check and its load: the bytes
 * read (buf, as long as the file, len), and where fd >= 0, only its
 * first head bytes are there: the rest is read from fd at load time,
 * straight into guest RAM. */
struct boot_image {
	uint8_t *buf;
	size_t len;
	size_t head;
	int fd;
};
#define BOOT_IMAGE_NONE ((struct boot_image){ .fd = -1 })
/* Read path (no larger than max) into *im: all of it, or only its first
 * head bytes (keeping fd open) when head_only says those are all a
 * parser needs; head_only sees the first min(len, head) bytes. The rest
 * of buf is an untouched anonymous mapping (zeroes, not resident).
 * head SIZE_MAX, head_only NULL: the whole file. 0 or -errno (-EFBIG:
 * larger than max). */
int boot_image_read(const char *path, uint64_t max, size_t head,
		    bool (*head_only)(const uint8_t *buf, size_t n, size_t len),
		    struct boot_image *im);
/* Copy len bytes at off of the image to dst: from buf, or from fd past
 * the head. 0 or -errno (-EIO: the file became shorter). */
int boot_image_copy(const struct boot_image *im, void *dst, size_t off, size_t len);
/* Bring the file's bytes [off, off + len) into buf where they are not
 * there yet (past the head), for a parser that needs a few more of them
 * than the head: buf then holds them at their file offsets; the rest
 * stays as it was. 0 or -errno (-EINVAL: the range lies beyond the file,
 * -EIO: the file became shorter). */
int boot_image_fill(const struct boot_image *im, size_t off, size_t len);
void boot_image_free(struct boot_image *im);

/* A boot loader's initrd, read straight into its place in guest RAM (no
 * copy of megabytes through a buffer of mvm's own): open_initrd opens it
 * and says how large it is (non-empty, no larger than guest RAM,
 * mem_size), the loader places it and read_initrd_into fills the place
 * (dst: gmem_ptr of it; NULL, outside guest RAM, is an error); the caller
 * closes *fd. 0, or -errno with "... initrd PATH ..." in err. */
int open_initrd(const char *path, uint64_t mem_size, int *fd, size_t *len, char *err,
		size_t errlen);
/* What a boot check needs before any loading: the initrd's size (a
 * regular file). 0, or -errno with "... initrd PATH ..." in err. */
int initrd_size(const char *path, uint64_t *size, char *err, size_t errlen);
int read_initrd_into(int fd, const char *path, void *dst, size_t len, char *err,
		     size_t errlen);

/* A buffer of its own anonymous private mapping (NULL when none could be
 * had; len 0 takes a page) and its release, for blocks that come and go
 * while a VM runs (a vsock connection's ring) and for megabytes read once
 * (a kernel image). Not malloc: glibc puts such a block on a thread's
 * arena once an earlier one was freed (it raises its mmap threshold), and
 * trimming that arena later reads /proc/sys/vm/overcommit_memory, a file
 * no seccomp filter lets a thread open (docs/sandbox.md); the main arena
 * would keep the pages resident instead. */
void *pages_alloc(size_t len);
void pages_free(void *p, size_t len);
/* Address space for many such buffers, reserved when a device is made
 * (MAP_NORESERVE: nothing committed until touched; freed with
 * pages_free), so that its thread maps nothing once filtered: s390x's
 * filter refuses every mmap (its arguments are out of the filter's
 * reach). pages_discard gives a buffer's pages back inside it
 * (MADV_DONTNEED: it reads as zeros again). */
void *pages_reserve(size_t len);
void pages_discard(void *p, size_t len);

/* CLOCK_MONOTONIC in nanoseconds (vDSO: no system call). */
uint64_t mono_ns(void);
/* A condition variable whose timed waits count on CLOCK_MONOTONIC, and
 * such a deadline (mono_ns) as pthread_cond_timedwait takes it. 0 or
 * -errno. */
int mono_cond_init(pthread_cond_t *c);
struct timespec mono_timespec(uint64_t ns);

/* Start one of mvm's threads (vCPU, I/O, control, helper) with a stack of
 * UTIL_THREAD_STACK instead of the default 8 MiB: none recurses on guest
 * input, and a stack region of 2 MiB or more gets a transparent huge page
 * on first touch where THP is "always" (Debian's default), 2 MiB of
 * resident memory per thread. 0 or -errno. */
#ifdef __SANITIZE_ADDRESS__
#define UTIL_THREAD_STACK (1024 * 1024)    /* ASan's redzones: larger frames */
#else
#define UTIL_THREAD_STACK (256 * 1024)
#endif
int thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/* A thread's first word to whoever started it: its setup (its name, its
 * seccomp filter, what it must do before anything of the guest's) is
 * done, 0, or failed, -errno. thread_start_sync waits for it, so a thread
 * that could not confine itself fails its start instead of running on;
 * the thread calls thread_ready once, then returns at once on failure
 * (the starter joins it). */
struct thread_handshake {
	sem_t sem;
	int err;
	int tid;                /* the thread's id (gettid) and name, from
				 * thread_begin: the starter reads them once
				 * thread_start_sync returned */
	char name[16];
};
int thread_start_sync(pthread_t *t, void *(*fn)(void *), void *arg,
		      struct thread_handshake *hs);
/* A started thread's first call, before its filter: its name (comm, at
 * most 15 bytes) and its id into hs. Named by itself: naming another
 * thread opens a file in /proc. */
void thread_begin(struct thread_handshake *hs, const char *name);
void thread_ready(struct thread_handshake *hs, int err);

#endif
