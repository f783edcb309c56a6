#include "devices/console_buf.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"

#include <string.h>
#include <unistd.h>

void console_buf_init(struct console_buf *b)
{
	b->head = b->len = 0;
	b->wake_fd = -1;
}

size_t console_buf_put(struct console_buf *b, const uint8_t *p, size_t n)
{
	size_t was = b->len, done = 0;
	uint64_t one = 1;

	n = MIN(n, console_buf_room(b));
	while (done < n) {
		size_t at = (b->head + b->len) % CONSOLE_BUF_SIZE;
		size_t chunk = MIN(n - done, CONSOLE_BUF_SIZE - at);

		memcpy(b->data + at, p + done, chunk);
		b->len += chunk;
		done += chunk;
	}
	/* Only the empty -> non-empty edge: the drainer empties the ring
	 * (or waits for its fd) before it sleeps on wake_fd again. */
	if (!was && n && b->wake_fd >= 0 && write(b->wake_fd, &one, sizeof(one)) < 0) {
		/* a non-blocking eventfd that is already readable: awake anyway */
	}
	return n;
}

size_t console_buf_peek(const struct console_buf *b, uint8_t *out, size_t max)
{
	size_t n = MIN(max, b->len), first = MIN(n, CONSOLE_BUF_SIZE - b->head);

	memcpy(out, b->data + b->head, first);
	memcpy(out + first, b->data, n - first);
	return n;
}

void console_buf_consume(struct console_buf *b, size_t n)
{
	n = MIN(n, b->len);
	b->head = (b->head + n) % CONSOLE_BUF_SIZE;
	b->len -= n;
}

void console_port_init(struct console_port *p, pthread_mutex_t *lock,
		       const struct console_port_ops *ops, void *dev)
{
	memset(p, 0, sizeof(*p));
	console_buf_init(&p->tx);
	p->lock = lock;
	p->ops = ops;
	p->dev = dev;
}

size_t console_port_put(struct console_port *p, const uint8_t *buf, size_t n)
{
	size_t fit = console_buf_put(&p->tx, buf, n);

	__atomic_add_fetch(&p->tx_bytes, n, __ATOMIC_RELAXED);
	if (fit < n)
		__atomic_add_fetch(&p->tx_dropped, n - fit, __ATOMIC_RELAXED);
	return fit;
}

void console_port_set_tx_wake(struct console_port *p, int efd)
{
	pthread_mutex_lock(p->lock);
	p->tx.wake_fd = efd;
	pthread_mutex_unlock(p->lock);
}

size_t console_port_tx_peek(struct console_port *p, uint8_t *buf, size_t len)
{
	size_t n;

	pthread_mutex_lock(p->lock);
	n = console_buf_peek(&p->tx, buf, len);
	pthread_mutex_unlock(p->lock);
	return n;
}

void console_port_tx_consume(struct console_port *p, size_t n, bool delivered)
{
	pthread_mutex_lock(p->lock);
	n = MIN(n, p->tx.len);
	console_buf_consume(&p->tx, n);
	if (!delivered)
		__atomic_add_fetch(&p->tx_dropped, n, __ATOMIC_RELAXED);
	if (p->ops->tx_freed)
		p->ops->tx_freed(p->dev);
	pthread_mutex_unlock(p->lock);
}

size_t console_port_rx_room(struct console_port *p)
{
	size_t room;

	pthread_mutex_lock(p->lock);
	room = p->ops->rx_room(p->dev);
	pthread_mutex_unlock(p->lock);
	return room;
}

size_t console_port_rx_push(struct console_port *p, const uint8_t *buf, size_t len)
{
	size_t n;

	pthread_mutex_lock(p->lock);
	n = p->ops->rx_take(p->dev, buf, MIN(len, p->ops->rx_room(p->dev)));
	pthread_mutex_unlock(p->lock);
	return n;
}

void console_port_counters(struct console_port *p, uint64_t *out, uint64_t *in)
{
	*out = __atomic_load_n(&p->tx_bytes, __ATOMIC_RELAXED);
	*in = __atomic_load_n(&p->rx_bytes, __ATOMIC_RELAXED);
}

static size_t port_rx_room(void *dev)
{
	return console_port_rx_room(dev);
}

static size_t port_rx_push(void *dev, const uint8_t *buf, size_t len)
{
	return console_port_rx_push(dev, buf, len);
}

static void port_set_tx_wake(void *dev, int efd)
{
	console_port_set_tx_wake(dev, efd);
}

static size_t port_tx_peek(void *dev, uint8_t *buf, size_t len)
{
	return console_port_tx_peek(dev, buf, len);
}

static void port_tx_consume(void *dev, size_t n, bool delivered)
{
	console_port_tx_consume(dev, n, delivered);
}

static void port_counters(void *dev, uint64_t *out, uint64_t *in)
{
	console_port_counters(dev, out, in);
}

const struct vm_console_ops console_port_vm_ops = {
	.rx_room = port_rx_room,
	.rx_push = port_rx_push,
	.set_tx_wake = port_set_tx_wake,
	.tx_peek = port_tx_peek,
	.tx_consume = port_tx_consume,
	.counters = port_counters,
};
