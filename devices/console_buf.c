#include "devices/console_buf.h"
#include "vmm/base/util.h"

#include <string.h>
#include <unistd.h>

void console_buf_init(struct console_buf *b)
{
	b->head = b->len = 0;
	b->wake_fd = -1;
}

size_t console_buf_put(struct console_buf *b, const uint8_t *p, size_t n)
{
	size_t was = b->len, done = 0;
	uint64_t one = 1;

	n = MIN(n, console_buf_room(b));
	while (done < n) {
		size_t at = (b->head + b->len) % CONSOLE_BUF_SIZE;
		size_t chunk = MIN(n - done, CONSOLE_BUF_SIZE - at);

		memcpy(b->data + at, p + done, chunk);
		b->len += chunk;
		done += chunk;
	}
	/* Only the empty -> non-empty edge: the drainer empties the ring
	 * (or waits for its fd) before it sleeps on wake_fd again. */
	if (!was && n && b->wake_fd >= 0 && write(b->wake_fd, &one, sizeof(one)) < 0) {
		/* a non-blocking eventfd that is already readable: awake anyway */
	}
	return n;
}

size_t console_buf_peek(const struct console_buf *b, uint8_t *out, size_t max)
{
	size_t n = MIN(max, b->len), first = MIN(n, CONSOLE_BUF_SIZE - b->head);

	memcpy(out, b->data + b->head, first);
	memcpy(out + first, b->data, n - first);
	return n;
}

void console_buf_consume(struct console_buf *b, size_t n)
{
	n = MIN(n, b->len);
	b->head = (b->head + n) % CONSOLE_BUF_SIZE;
	b->len -= n;
}
