/* i8042 keyboard controller, enough for Linux's probe (controller self
 * test, CTR read/write, keyboard reset/identify answered with ACKs), for
 * its reboot: command 0xFE (pulse reset line) or an output-port write with
 * bit 0 clear stops the VM with status 0, and for one key: Power (the
 * VM's power button, i8042_power_key). No PS/2 aux port. */
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
#define I8042_CTR_KBDDIS 0x10
#define I8042_CTR_XLATE  0x40

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
 * for teardown; *out (may be NULL) the device, which the VM owns. */
int i8042_create(struct vm *vm, uint16_t port, struct i8042 **out);

/* The keyboard's Power key pressed and released: its scan codes (set 2,
 * E0 37 and E0 F0 37; set 1, E0 5E and E0 DE, where the guest has the
 * controller translate) into the output buffer, each byte raising the
 * keyboard interrupt as the guest reads the one before. Linux's atkbd
 * reports KEY_POWER, which systemd-logind (or acpid, or the test guest's
 * /init) takes as the power button. Any thread. 0; -EAGAIN while the
 * buffer has no room (the guest has not read an earlier press);
 * -ENODEV while the guest keeps the keyboard disabled. */
int i8042_power_key(struct i8042 *k);

#endif
