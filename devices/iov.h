/* Byte streams over an array of iovecs (a virtqueue chain's readable or
 * writable part, see struct virtq_chain): copy in/out at an offset, and
 * describe a byte range as a slice of the array without walking guest
 * descriptors again. */
#ifndef MVM_IOV_H
#define MVM_IOV_H

#include <stdint.h>
#include <sys/uio.h>

/* Bytes in v[0..n). */
uint64_t iov_len(const struct iovec *v, unsigned n);

/* Copy len bytes at stream offset skip out of (iov_read) or into
 * (iov_write) v[0..n). Returns the bytes copied: fewer than len when the
 * stream ends first. */
uint64_t iov_read(const struct iovec *v, unsigned n, uint64_t skip, void *dst, uint64_t len);
uint64_t iov_write(const struct iovec *v, unsigned n, uint64_t skip, const void *src,
		   uint64_t len);

/* The len bytes at stream offset skip as iovecs into out[0..max) (the first
 * and last trimmed, the middle ones as they are). Returns the count, or
 * -E2BIG when more than max entries are needed, -ERANGE when the stream is
 * shorter than skip + len. */
int iov_slice(const struct iovec *v, unsigned n, uint64_t skip, uint64_t len,
	      struct iovec *out, unsigned max);

#endif
