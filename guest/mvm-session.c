/* mvm-session CMD [ARGS...]: run CMD as the child of a session leader that
 * waits for the console to drain before it exits; exits with CMD's status
 * (128+N when a signal N killed it, as a shell reports it).
 *
 * Why: /init runs the command in a session of its own whose controlling
 * terminal is the console (setsid cttyhack). When a session leader exits,
 * Linux hangs its controlling terminal up (disassociate_ctty ->
 * tty_vhangup_session), and the hangup flushes the tty driver's transmit
 * buffer (tty_ldisc_hangup -> tty_driver_flush_buffer -> uart_flush_buffer):
 * whatever the 8250 driver had not yet written to the UART, which it does
 * one 16-byte FIFO load per THRE interrupt, is discarded. A command's last
 * line was lost that way whenever its shell, the session leader, exited
 * while an interrupt handler on another vCPU was still sending it (mvm-exit's
 * tcdrain came too late: the bytes were gone). So the leader here is this
 * program: it drains the console (tcdrain waits until the driver's buffer
 * is empty and the UART reports its transmitter empty) and only then exits.
 * Built static (gcc -static -Os) into the initramfs, like mvm-exit. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int status;
	pid_t pid, w;

	if (argc < 2) {
		fprintf(stderr, "usage: mvm-session CMD [ARGS...]\n");
		return 2;
	}
	pid = fork();
	if (pid < 0) {
		perror("mvm-session: fork");
		return 126;
	}
	if (pid == 0) {
		execvp(argv[1], argv + 1);
		fprintf(stderr, "mvm-session: %s: %m\n", argv[1]);
		_exit(errno == ENOENT ? 127 : 126);
	}
	/* Like a shell waiting for its foreground job: the terminal's
	 * Ctrl-C, Ctrl-\ and Ctrl-Z are for the command, not for us; and
	 * tcdrain from a background process group (an interactive shell
	 * took the foreground) must not stop us with SIGTTOU. */
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	signal(SIGTSTP, SIG_IGN);
	signal(SIGTTOU, SIG_IGN);
	do
		w = waitpid(pid, &status, 0);
	while (w < 0 && errno == EINTR);
	if (w < 0) {
		perror("mvm-session: waitpid");
		status = 126 << 8;
	}
	tcdrain(STDOUT_FILENO);
	tcdrain(STDERR_FILENO);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
