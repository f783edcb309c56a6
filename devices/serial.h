/* 8250/16550A UART (COM1). Register emulation runs on vCPU threads; the
 * VM's control thread feeds received bytes with serial_rx_push and takes
 * the transmitted ones with serial_tx_peek/serial_tx_consume. All state is
 * under one mutex.
 *
 * TX: THR writes go into a bounded buffer (devices/console_buf.h), never
 * to a host fd, so a vCPU never waits for the host's reader. THR and the
 * transmitter count as empty (LSR THRE|TEMT, the THRE interrupt) while
 * that buffer has room for a FIFO load; once it has less, they stay busy
 * until the host has taken half the buffer, and the guest's driver waits,
 * as behind a line held by flow control: a slow reader slows the guest
 * down, nothing is dropped. Only a guest that writes THR regardless, into
 * a buffer with no room at all, loses bytes (counted in tx_dropped). */
#ifndef MVM_SERIAL_H
#define MVM_SERIAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/console_buf.h"
#include "vmm/base/iobus.h"

struct vm;

#define SERIAL_FIFO_SIZE 16

/* Register offsets and bits (PC16550D data sheet). */
#define UART_RBR 0  /* DLAB=0 read */
#define UART_THR 0  /* DLAB=0 write */
#define UART_DLL 0  /* DLAB=1 */
#define UART_IER 1  /* DLAB=0 */
#define UART_DLM 1  /* DLAB=1 */
#define UART_IIR 2  /* read */
#define UART_FCR 2  /* write */
#define UART_LCR 3
#define UART_MCR 4
#define UART_LSR 5
#define UART_MSR 6
#define UART_SCR 7

#define UART_IER_RDI  0x01
#define UART_IER_THRI 0x02
#define UART_IER_RLSI 0x04
#define UART_IER_MSI  0x08
#define UART_IIR_NO_INT 0x01
#define UART_IIR_MSI  0x00
#define UART_IIR_THRI 0x02
#define UART_IIR_RDI  0x04
#define UART_IIR_RLSI 0x06
#define UART_IIR_FIFO 0xc0
#define UART_FCR_ENABLE 0x01
#define UART_FCR_CLEAR_RX 0x02
#define UART_FCR_CLEAR_TX 0x04
#define UART_LCR_DLAB 0x80
#define UART_MCR_DTR  0x01
#define UART_MCR_RTS  0x02
#define UART_MCR_OUT1 0x04
#define UART_MCR_OUT2 0x08
#define UART_MCR_LOOP 0x10
#define UART_LSR_DR   0x01
#define UART_LSR_OE   0x02
#define UART_LSR_THRE 0x20
#define UART_LSR_TEMT 0x40
#define UART_MSR_DCTS 0x01
#define UART_MSR_DDSR 0x02
#define UART_MSR_TERI 0x04
#define UART_MSR_DDCD 0x08
#define UART_MSR_CTS  0x10
#define UART_MSR_DSR  0x20
#define UART_MSR_RI   0x40
#define UART_MSR_DCD  0x80

struct serial {
	pthread_mutex_t lock;
	/* Drives the interrupt line; called under lock on level changes. */
	void (*set_irq)(void *opaque, bool level);
	void *irq_opaque;
	bool irq_level;

	uint8_t ier, lcr, mcr, lsr_err, msr, scr, fcr, dll, dlm;
	bool thr_ipending;       /* THRE interrupt armed, cleared by IIR read / THR write */
	uint8_t rx[SERIAL_FIFO_SIZE];
	unsigned rx_head, rx_count;

	struct console_buf tx;   /* transmitted, not yet taken by the host */
	bool tx_busy;            /* THRE withheld: the buffer ran short of room */

	/* Read with atomic loads by --stats while the guest runs. */
	uint64_t tx_bytes;       /* the guest wrote to THR (loopback excluded) */
	uint64_t rx_bytes;
	uint64_t tx_waits;       /* times THRE was withheld (the guest waited) */
	uint64_t tx_dropped;     /* bytes that never reached the host's output */
};

extern const struct io_ops serial_io_ops;

/* Initialise a UART signalling through set_irq. */
int serial_init(struct serial *s, void (*set_irq)(void *, bool), void *opaque);
void serial_fini(struct serial *s);

/* The eventfd written when output arrives in an empty buffer (-1: none);
 * before the guest runs. */
void serial_set_tx_wake(struct serial *s, int efd);
/* Copy up to len of the oldest transmitted bytes to buf, leaving them
 * queued; returns how many. */
size_t serial_tx_peek(struct serial *s, uint8_t *buf, size_t len);
/* The n oldest bytes are done with: written to the host (delivered) or
 * discarded (counted in tx_dropped). Room again gives the guest THRE back,
 * with its interrupt. */
void serial_tx_consume(struct serial *s, size_t n, bool delivered);

/* Free room in the RX FIFO (the main loop reads at most that from stdin). */
unsigned serial_rx_room(struct serial *s);
/* Queue received bytes; returns how many were taken. */
size_t serial_rx_push(struct serial *s, const uint8_t *buf, size_t len);

/* The UART as the VM's console (struct vm_console): dev is a struct serial. */
extern const struct vm_console_ops serial_console_ops;

/* A UART on the VM at I/O ports port..port+7, interrupt line irq via
 * KVM_IRQ_LINE (x86 COM1: 0x3f8, 4), registered with the VM for
 * stats/teardown. */
int serial_create(struct vm *vm, uint16_t port, unsigned irq, struct serial **out);

#endif
