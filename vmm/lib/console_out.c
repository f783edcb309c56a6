#include "vmm/lib/console_out.h"
#include "devices/console_buf.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* One write's worth: the control thread's stack, not the heap. */
#define CONOUT_CHUNK 4096

int conout_init(struct conout *o, const struct vm_console *con, int fd,
		void (*fn)(void *opaque, const uint8_t *buf, size_t len), void *opaque,
		const struct log_sink *log)
{
	char path[64];
	struct stat st;
	int fl, nfd;

	memset(o, 0, sizeof(*o));
	o->con = con;
	o->log = log;
	o->fd = -1;
	if (fn) {
		o->fn = fn;
		o->opaque = opaque;
		return 0;
	}
	if (fd < 0)
		return 0;
	if (fstat(fd, &st))
		return -errno;
	o->fd = fd;
	if (S_ISSOCK(st.st_mode)) {
		o->sock = true;
		return 0;
	}
	if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))
		return 0;
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0 && (fl & O_NONBLOCK))
		return 0;       /* the caller's description is non-blocking already */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	nfd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (fl >= 0 ? fl & O_APPEND : 0));
	if (nfd >= 0) {
		o->fd = nfd;
		o->own_fd = true;
		return 0;
	}
	o->may_block = true;
	log_warn(log, "console output: cannot open %s non-blocking (%s); a reader that stops "
		 "reading may delay the VM's control thread", path, strerror(errno));
	return 0;
}

void conout_fini(struct conout *o)
{
	if (o->own_fd)
		close(o->fd);
	o->own_fd = false;
	o->fd = -1;
}

static ssize_t conout_write(struct conout *o, const uint8_t *buf, size_t len)
{
	struct pollfd p = { .fd = o->fd, .events = POLLOUT };

	if (o->sock)
		return send(o->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (o->may_block) {
		/* POLLOUT on a pipe means PIPE_BUF bytes of room: a write of
		 * no more than that does not wait. */
		if (poll(&p, 1, 0) == 0) {
			errno = EAGAIN;
			return -1;
		}
		len = MIN(len, (size_t)PIPE_BUF);
	}
	return write(o->fd, buf, len);
}

bool conout_drain(struct conout *o)
{
	const struct vm_console_ops *ops = o->con->ops;
	uint8_t chunk[CONOUT_CHUNK];
	size_t moved = 0;

	o->blocked = false;
	/* Bounded, so a guest that writes as fast as the reader reads does
	 * not keep the control thread from its other fds. */
	while (moved < CONSOLE_BUF_SIZE) {
		size_t n = ops->tx_peek(o->con->dev, chunk, sizeof(chunk));
		ssize_t w;

		if (!n)
			return true;
		if (o->fn || o->fd < 0 || o->dead) {
			if (o->fn)
				o->fn(o->opaque, chunk, n);
			/* Nowhere by the caller's choice counts as delivered;
			 * a dead fd's output as dropped. */
			ops->tx_consume(o->con->dev, n, !o->dead);
			moved += n;
			continue;
		}
		w = conout_write(o, chunk, n);
		if (w > 0) {
			ops->tx_consume(o->con->dev, (size_t)w, true);
			moved += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			o->blocked = true;
			return false;
		}
		/* EPIPE, EIO, ...: the reader is gone for good. The guest's
		 * output is dropped from now on, so it never waits for it. */
		log_warn(o->log, "console output: %s; the guest's further console output is "
			 "dropped", w < 0 ? strerror(errno) : "a write wrote nothing");
		o->dead = true;
	}
	return false;
}

int conout_wait_fd(const struct conout *o)
{
	return o->blocked ? o->fd : -1;
}

void conout_discard(struct conout *o)
{
	const struct vm_console_ops *ops = o->con->ops;
	uint8_t chunk[CONOUT_CHUNK];
	size_t n;

	while ((n = ops->tx_peek(o->con->dev, chunk, sizeof(chunk))) > 0)
		ops->tx_consume(o->con->dev, n, false);
}
