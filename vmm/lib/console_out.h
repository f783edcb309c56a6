/* Where the guest's console output goes: the caller's console_fn, the
 * console_out fd, or nowhere (vmm/mvm.h). The VM's control thread moves
 * what the console device has buffered (devices/console_buf.h) there with
 * conout_drain, which never blocks on the fd: a pipe, FIFO or terminal
 * gets a non-blocking file description of its own, opened through
 * /proc/self/fd (the caller's description, which stdout shares with
 * stderr and with the shell, keeps its flags); a socket is written with
 * MSG_DONTWAIT; a regular file or block device as it is (such a write
 * waits for no reader). Per VM; control thread only. */
#ifndef MVM_CONSOLE_OUT_H
#define MVM_CONSOLE_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/base/log.h"
#include "vmm/kvm/vm.h"

struct conout {
	const struct vm_console *con;
	void (*fn)(void *opaque, const uint8_t *buf, size_t len);
	void *opaque;
	int fd;                 /* -1: no fd (fn, or nowhere) */
	bool own_fd;            /* our non-blocking reopen of the caller's fd */
	bool sock;              /* send(MSG_DONTWAIT) */
	bool may_block;         /* no non-blocking handle could be had: fd is
				 * written only after poll says POLLOUT, at most
				 * PIPE_BUF at a time (a terminal may still block) */
	bool blocked;           /* the last write would have blocked */
	bool dead;              /* writes failed for good: output is dropped */
	const struct log_sink *log;
};

/* Output of the console con to fn when set, else to fd when >= 0, else
 * nowhere. 0 or -errno (fstat of fd failed). */
int conout_init(struct conout *o, const struct vm_console *con, int fd,
		void (*fn)(void *opaque, const uint8_t *buf, size_t len), void *opaque,
		const struct log_sink *log);
void conout_fini(struct conout *o);

/* Move the device's output to the sink, at most one buffer's worth per
 * call, without blocking. Returns true when the device's buffer is empty;
 * false when the fd would block (conout_wait_fd then says which fd to
 * wait on for POLLOUT) or more is left to move (-1: call again). */
bool conout_drain(struct conout *o);
int conout_wait_fd(const struct conout *o);

/* Drop what the device still holds (the device counts it as dropped). */
void conout_discard(struct conout *o);

#endif
