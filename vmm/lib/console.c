#include "vmm/lib/console.h"

bool console_escape_filter(struct console_escape *e, const uint8_t *in, size_t len,
			   uint8_t *out, size_t *outlen)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++) {
		uint8_t c = in[i];

		if (!e->raw) {
			out[n++] = c;
			continue;
		}
		if (e->pending) {
			e->pending = false;
			if (c == 'x' || c == 'X') {
				*outlen = n;
				return true;
			}
			/* Ctrl-A Ctrl-A: one literal Ctrl-A; Ctrl-A + anything
			 * else: both bytes, as typed. */
			out[n++] = CONSOLE_ESCAPE;
			if (c != CONSOLE_ESCAPE)
				out[n++] = c;
			continue;
		}
		if (c == CONSOLE_ESCAPE) {
			e->pending = true;
			continue;
		}
		out[n++] = c;
	}
	*outlen = n;
	return false;
}
