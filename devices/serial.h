/* 8250/16550A UART (COM1). Register emulation runs on vCPU threads; the
 * VM's control thread feeds received bytes and takes the transmitted ones
 * through its console port (s->con: console_port_rx_push, _tx_peek,
 * _tx_consume). All state is under one mutex.
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

	/* Transmitted, not yet taken by the host; tx_bytes counts what the
	 * guest wrote to THR (loopback excluded), rx_bytes what entered the
	 * RX FIFO. The host drains it through console_port_vm_ops. */
	struct console_port con;
	bool tx_busy;            /* THRE withheld: the buffer ran short of room */
	uint64_t tx_waits;       /* atomic: times THRE was withheld (the guest waited) */
};

extern const struct io_ops serial_io_ops;

/* Initialise a UART signalling through set_irq. */
int serial_init(struct serial *s, void (*set_irq)(void *, bool), void *opaque);
void serial_fini(struct serial *s);

/* The host's side (output, input, counters) is s->con, a console port
 * (devices/console_buf.h): console_port_vm_ops with dev = &s->con as the
 * VM's console. */

/* A UART on the VM at I/O ports port..port+7, interrupt line irq via
 * KVM_IRQ_LINE (x86 COM1: 0x3f8, 4), registered with the VM for
 * stats/teardown. */
int serial_create(struct vm *vm, uint16_t port, unsigned irq, struct serial **out);

#endif
