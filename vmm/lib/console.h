/* The console escape: Ctrl-A x stops the VM, Ctrl-A Ctrl-A sends one
 * Ctrl-A, as in QEMU's -nographic. Pure and per-VM (no globals). */
#ifndef MVM_CONSOLE_H
#define MVM_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONSOLE_ESCAPE 0x01   /* Ctrl-A */

struct console_escape {
	bool raw;       /* escapes are interpreted only when set */
	bool pending;   /* previous byte was Ctrl-A */
};

/* Filter input bytes: copies what the guest should receive to out (room
 * for len + 1 bytes: a Ctrl-A held over from the previous call may be
 * emitted) and sets *outlen. Returns true when the user asked to quit
 * (Ctrl-A x). */
bool console_escape_filter(struct console_escape *e, const uint8_t *in, size_t len,
			   uint8_t *out, size_t *outlen);

#endif
