/* 8250/16550A UART (COM1). Register emulation runs on vCPU threads; the
 * main event loop feeds received bytes with serial_rx_push. All state is
 * under one mutex. TX goes straight to out_fd (unbuffered). */
#ifndef MVM_SERIAL_H
#define MVM_SERIAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/iobus.h"

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
	int out_fd;
	/* When set, output goes here instead of out_fd (serial_set_output). */
	void (*out_fn)(void *opaque, const uint8_t *buf, size_t len);
	void *out_opaque;
	/* Drives the interrupt line; called under lock on level changes. */
	void (*set_irq)(void *opaque, bool level);
	void *irq_opaque;
	bool irq_level;

	uint8_t ier, lcr, mcr, lsr_err, msr, scr, fcr, dll, dlm;
	bool thr_ipending;       /* THRE interrupt armed, cleared by IIR read / THR write */
	uint8_t rx[SERIAL_FIFO_SIZE];
	unsigned rx_head, rx_count;

	uint64_t tx_bytes, rx_bytes;
};

extern const struct io_ops serial_io_ops;

/* Initialise a UART writing to out_fd and signalling through set_irq. */
int serial_init(struct serial *s, int out_fd, void (*set_irq)(void *, bool), void *opaque);
void serial_fini(struct serial *s);

/* Send output to fn instead of the fd; before the guest runs. fn is called
 * from a vCPU thread with the UART's lock held. */
static inline void serial_set_output(struct serial *s,
				     void (*fn)(void *opaque, const uint8_t *buf, size_t len),
				     void *opaque)
{
	s->out_fn = fn;
	s->out_opaque = opaque;
}

/* Free room in the RX FIFO (the main loop reads at most that from stdin). */
unsigned serial_rx_room(struct serial *s);
/* Queue received bytes; returns how many were taken. */
size_t serial_rx_push(struct serial *s, const uint8_t *buf, size_t len);

/* The UART as the VM's console (struct vm_console): dev is a struct serial. */
extern const struct vm_console_ops serial_console_ops;

/* A UART on the VM at I/O ports port..port+7, interrupt line irq via
 * KVM_IRQ_LINE (x86 COM1: 0x3f8, 4), registered with the VM for
 * stats/teardown. */
int serial_create(struct vm *vm, uint16_t port, unsigned irq, int out_fd, struct serial **out);

#endif
