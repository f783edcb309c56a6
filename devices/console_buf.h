/* A console's output on its way to the host: a bounded byte ring that the
 * console device fills on a vCPU thread and the VM's control thread drains
 * to the console fd or callback (vmm/lib/console_out.c). The vCPU thread thus
 * never writes to the host's output: a reader that stops reading can only
 * fill the ring, which the device turns into back-pressure on the guest
 * (the UART stops reporting THRE) or, where it has none, into counted
 * losses.
 *
 * Not thread-safe by itself: the owning device's lock guards every call. */
#ifndef MVM_CONSOLE_BUF_H
#define MVM_CONSOLE_BUF_H

#include <stddef.h>
#include <stdint.h>

/* 16 KiB: a Linux boot log's burst at a time, and the most a host reader
 * may fall behind before the guest waits. */
#define CONSOLE_BUF_SIZE 16384

struct console_buf {
	uint8_t data[CONSOLE_BUF_SIZE];
	size_t head, len;       /* oldest byte at data[head], len bytes */
	int wake_fd;            /* eventfd written when output arrives in an empty
				 * ring (the drainer sleeps on it); -1: none */
};

void console_buf_init(struct console_buf *b);

static inline size_t console_buf_room(const struct console_buf *b)
{
	return CONSOLE_BUF_SIZE - b->len;
}

/* Append up to n bytes; returns how many fit. Wakes the drainer when the
 * ring was empty. */
size_t console_buf_put(struct console_buf *b, const uint8_t *p, size_t n);

/* Copy up to max of the oldest bytes to out, leaving them queued. */
size_t console_buf_peek(const struct console_buf *b, uint8_t *out, size_t max);

/* Drop the n oldest bytes (n <= len). */
void console_buf_consume(struct console_buf *b, size_t n);

#endif
