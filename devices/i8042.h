/* i8042 keyboard controller, enough for Linux's probe (controller self
 * test, CTR read/write, keyboard reset/identify answered with ACKs) and for
 * its reboot: command 0xFE (pulse reset line) or an output-port write with
 * bit 0 clear stops the VM with status 0. No PS/2 aux port. */
#ifndef MVM_I8042_H
#define MVM_I8042_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "vmm/base/iobus.h"

struct vm;

#define I8042_STS_OBF    0x01
#define I8042_STS_SYS    0x04
#define I8042_STS_CMD    0x08
#define I8042_STS_UNLOCKED 0x10
#define I8042_CTR_KBDINT 0x01
#define I8042_CTR_SYS    0x04

struct i8042 {
	pthread_mutex_t lock;
	struct vm *vm;
	uint8_t ctr;           /* controller configuration ("command byte") */
	uint8_t status;
	uint8_t pending_cmd;   /* command waiting for its data byte, or 0 */
	uint8_t out[8];        /* output buffer queue (controller/keyboard replies) */
	unsigned out_head, out_count;
	bool irq_level;
	bool reset;            /* set when the guest pulsed the reset line */
	uint16_t port;         /* i8042_create's data port */
};

extern const struct io_ops i8042_io_ops;

/* vm may be NULL (unit tests): then the reset is only recorded in ->reset. */
int i8042_init(struct i8042 *k, struct vm *vm);
/* Ports port..port+4 on the VM (x86: 0x60, command port 0x64), registered
 * for teardown. */
int i8042_create(struct vm *vm, uint16_t port);

#endif
