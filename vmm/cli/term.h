/* mvm(1)'s host terminal: raw mode while the guest owns the console
 * (restored on every exit path through atexit). Process-wide by nature, so
 * the CLI's alone: the library never touches the terminal. */
#ifndef MVM_TERM_H
#define MVM_TERM_H


/* Put fd (a tty) into raw mode; remembered and restored by term_restore,
 * which is also registered with atexit. 0, or -errno (-ENOTTY when fd is
 * not a terminal: nothing to do). */
int term_raw(int fd);
void term_restore(void);

#endif
