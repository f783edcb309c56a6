/* Byte streams over iovec arrays: see iov.h. */
#include "devices/iov.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

uint64_t iov_len(const struct iovec *v, unsigned n)
{
	uint64_t len = 0;

	while (n--)
		len += (v++)->iov_len;
	return len;
}

/* Skip whole entries before offset *skip: the index of the entry holding
 * it (n when the stream ends first), *skip then relative to that entry. */
static unsigned seek(const struct iovec *v, unsigned n, uint64_t *skip)
{
	unsigned i = 0;

	while (i < n && *skip >= v[i].iov_len)
		*skip -= v[i++].iov_len;
	return i;
}

static uint64_t copy(const struct iovec *v, unsigned n, uint64_t skip, void *mem,
		     uint64_t len, bool to_iov)
{
	uint8_t *p = mem;
	uint64_t done = 0;
	unsigned i;

	for (i = seek(v, n, &skip); i < n && done < len; i++, skip = 0) {
		uint64_t c = v[i].iov_len - skip;

		if (c > len - done)
			c = len - done;
		if (to_iov)
			memcpy((uint8_t *)v[i].iov_base + skip, p + done, c);
		else
			memcpy(p + done, (const uint8_t *)v[i].iov_base + skip, c);
		done += c;
	}
	return done;
}

uint64_t iov_read(const struct iovec *v, unsigned n, uint64_t skip, void *dst, uint64_t len)
{
	return copy(v, n, skip, dst, len, false);
}

uint64_t iov_write(const struct iovec *v, unsigned n, uint64_t skip, const void *src,
		   uint64_t len)
{
	return copy(v, n, skip, (void *)src, len, true);
}

int iov_slice(const struct iovec *v, unsigned n, uint64_t skip, uint64_t len,
	      struct iovec *out, unsigned max)
{
	unsigned i, cnt = 0;

	for (i = seek(v, n, &skip); i < n && len; i++, skip = 0) {
		uint64_t c = v[i].iov_len - skip;

		if (c == 0)
			continue;
		if (cnt == max)
			return -E2BIG;
		if (c > len)
			c = len;
		out[cnt].iov_base = (uint8_t *)v[i].iov_base + skip;
		out[cnt].iov_len = c;
		cnt++;
		len -= c;
	}
	return len ? -ERANGE : (int)cnt;
}
