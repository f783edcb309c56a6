/* mvm-exit STATUS: report the guest's exit status to mvm.
 *
 * mvm exits with STATUS when the guest writes it as one byte to the mvm exit
 * port (arch/x86/layout.h). /init runs this after the command (or the shell)
 * finishes. When nothing listens on the port (plain QEMU without
 * isa-debug-exit) the write is ignored and this returns, so /init falls back
 * to rebooting. Built static (gcc -static -Os) into the initramfs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <sys/io.h>
#include <termios.h>

#include "arch/x86/layout.h"

int main(int argc, char **argv)
{
	char *end;
	long status;

	if (argc != 2) {
		fprintf(stderr, "usage: mvm-exit STATUS (0-255)\n");
		return 2;
	}
	errno = 0;
	status = strtol(argv[1], &end, 10);
	if (errno || end == argv[1] || *end || status < 0 || status > 255) {
		fprintf(stderr, "mvm-exit: bad status '%s': give a number from 0 to 255\n", argv[1]);
		return 2;
	}
	/* /dev/port (CONFIG_DEVPORT) turns a 1-byte write at offset P into
	 * outb to port P and works without CONFIG_X86_IOPL_IOPERM; ioperm +
	 * outb is the fallback. Both need CAP_SYS_RAWIO: /init runs as root. */
	unsigned char b = (unsigned char)status;
	/* mvm ends the VM at once on this write: first let the console's
	 * UART send what the command printed last (no-op when not a tty). */
	tcdrain(STDOUT_FILENO);
	tcdrain(STDERR_FILENO);
	int fd = open("/dev/port", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = pwrite(fd, &b, 1, X86_MVM_EXIT_PORT);
		close(fd);
		if (n == 1)
			return 0;
	}
	if (ioperm(X86_MVM_EXIT_PORT, 1, 1) != 0) {
		perror("mvm-exit: neither /dev/port nor ioperm works");
		return 1;
	}
	outb(b, X86_MVM_EXIT_PORT);
	return 0;
}
