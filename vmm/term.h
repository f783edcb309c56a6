/* The host terminal: raw mode while the guest owns the console (restored
 * on every exit path through atexit and the signal path), and the
 * Ctrl-A escape: Ctrl-A x quits mvm, Ctrl-A Ctrl-A sends one Ctrl-A. */
#ifndef MVM_TERM_H
#define MVM_TERM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TERM_ESCAPE 0x01   /* Ctrl-A */

/* Put fd (a tty) into raw mode; remembered and restored by term_restore,
 * which is also registered with atexit. 0, or -errno (-ENOTTY when fd is
 * not a terminal: nothing to do). */
int term_raw(int fd);
void term_restore(void);

struct term_escape {
	bool raw;       /* escapes are interpreted only on a raw terminal */
	bool pending;   /* previous byte was Ctrl-A */
};

/* Filter input bytes: copies what the guest should receive to out (room
 * for len + 1 bytes: a Ctrl-A held over from the previous call may be
 * emitted) and sets *outlen. Returns true when the user asked to quit
 * (Ctrl-A x). */
bool term_escape_filter(struct term_escape *e, const uint8_t *in, size_t len,
			uint8_t *out, size_t *outlen);

#endif
