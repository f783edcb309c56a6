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

#include <pthread.h>
#include <stdbool.h>
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

/* The host's side of a console device, one for the UART and the SCLP:
 * the output ring and the byte counters, guarded by the device's own
 * lock (which also guards its registers), and the one vm_console_ops
 * table the VM's control thread drains every console through
 * (console_port_vm_ops, dev: the struct console_port). What differs per
 * device is in its console_port_ops, each called with the lock held. */
struct console_port_ops {
	/* Bytes of input the device takes now. */
	size_t (*rx_room)(void *dev);
	/* Take up to len bytes of input (at most rx_room); returns how many.
	 * The device counts rx_bytes where the guest gets them. */
	size_t (*rx_take)(void *dev, const uint8_t *buf, size_t len);
	/* Output left the ring (delivered or dropped): room for the guest
	 * again, e.g. the UART's THRE. NULL: nothing to do. */
	void (*tx_freed)(void *dev);
};

struct console_port {
	struct console_buf tx;          /* output the host has not taken yet */
	pthread_mutex_t *lock;          /* the device's */
	const struct console_port_ops *ops;
	void *dev;
	/* Written under the lock, read with atomic loads (--stats). */
	uint64_t tx_bytes;              /* output the guest wrote */
	uint64_t rx_bytes;              /* input the guest was given */
	uint64_t tx_dropped;            /* output that never reached the host */
};

void console_port_init(struct console_port *p, pthread_mutex_t *lock,
		       const struct console_port_ops *ops, void *dev);
/* The guest wrote n bytes (lock held): into the ring, counted; what does
 * not fit is dropped and counted. Returns how many fit. */
size_t console_port_put(struct console_port *p, const uint8_t *buf, size_t n);

/* The host's calls, each taking the device's lock. */
void console_port_set_tx_wake(struct console_port *p, int efd);
size_t console_port_tx_peek(struct console_port *p, uint8_t *buf, size_t len);
void console_port_tx_consume(struct console_port *p, size_t n, bool delivered);
size_t console_port_rx_room(struct console_port *p);
size_t console_port_rx_push(struct console_port *p, const uint8_t *buf, size_t len);
void console_port_counters(struct console_port *p, uint64_t *out, uint64_t *in);

/* A console port as the VM's console (struct vm_console). */
struct vm_console_ops;
extern const struct vm_console_ops console_port_vm_ops;

#endif
