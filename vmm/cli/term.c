#include "vmm/cli/term.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <termios.h>
#include <unistd.h>

static struct termios term_saved;
static int term_fd = -1;

void term_restore(void)
{
	if (term_fd >= 0) {
		tcsetattr(term_fd, TCSANOW, &term_saved);
		term_fd = -1;
	}
}

int term_raw(int fd)
{
	static bool registered;
	struct termios t;

	if (!isatty(fd))
		return -ENOTTY;
	if (tcgetattr(fd, &term_saved))
		return -errno;
	t = term_saved;
	/* Raw input (the guest gets Ctrl-C, Ctrl-Z...), but keep output
	 * post-processing so the guest's "\n" still starts a line. */
	t.c_iflag &= ~(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON);
	t.c_lflag &= ~(ECHO | ECHONL | ICANON | ISIG | IEXTEN);
	t.c_cflag &= ~(CSIZE | PARENB);
	t.c_cflag |= CS8;
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	if (!registered) {
		atexit(term_restore);
		registered = true;
	}
	term_fd = fd;
	if (tcsetattr(fd, TCSANOW, &t)) {
		term_fd = -1;
		return -errno;
	}
	return 0;
}
