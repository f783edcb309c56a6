#include "vmm/base/iobus.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int iobus_init(struct iobus *bus)
{
	memset(bus, 0, sizeof(*bus));
	return -pthread_rwlock_init(&bus->lock, NULL);
}

void iobus_destroy(struct iobus *bus)
{
	pthread_rwlock_destroy(&bus->lock);
	free(bus->r);
	memset(bus, 0, sizeof(*bus));
}

int iobus_register(struct iobus *bus, uint64_t base, uint64_t len,
		   const struct io_ops *ops, void *opaque)
{
	unsigned i, pos;
	int ret = 0;

	if (len == 0 || base + len < base || !ops)
		return -EINVAL;
	pthread_rwlock_wrlock(&bus->lock);
	for (pos = 0; pos < bus->nr && bus->r[pos].base < base; pos++)
		;
	if ((pos > 0 && bus->r[pos - 1].base + bus->r[pos - 1].len > base) ||
	    (pos < bus->nr && base + len > bus->r[pos].base)) {
		ret = -EEXIST;
		goto unlock;
	}
	if (bus->nr == bus->cap) {
		unsigned cap = bus->cap ? bus->cap * 2 : 16;
		struct iobus_range *r = realloc(bus->r, cap * sizeof(*r));
		if (!r) {
			ret = -ENOMEM;
			goto unlock;
		}
		bus->r = r;
		bus->cap = cap;
	}
	for (i = bus->nr; i > pos; i--)
		bus->r[i] = bus->r[i - 1];
	bus->r[pos] = (struct iobus_range){ base, len, ops, opaque };
	bus->nr++;
unlock:
	pthread_rwlock_unlock(&bus->lock);
	return ret;
}

int iobus_unregister(struct iobus *bus, uint64_t base, void *opaque)
{
	unsigned i;
	int ret = -ENOENT;

	pthread_rwlock_wrlock(&bus->lock);
	for (i = 0; i < bus->nr; i++) {
		if (bus->r[i].base == base && bus->r[i].opaque == opaque) {
			memmove(&bus->r[i], &bus->r[i + 1],
				(bus->nr - i - 1) * sizeof(bus->r[0]));
			bus->nr--;
			ret = 0;
			break;
		}
	}
	pthread_rwlock_unlock(&bus->lock);
	return ret;
}

bool iobus_access(struct iobus *bus, uint64_t addr, uint8_t *data, unsigned len,
		  bool is_write)
{
	unsigned lo = 0, hi;
	bool found = false;

	pthread_rwlock_rdlock(&bus->lock);
	hi = bus->nr;
	while (lo < hi) {   /* last range with base <= addr */
		unsigned mid = (lo + hi) / 2;
		if (bus->r[mid].base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0) {
		const struct iobus_range *r = &bus->r[lo - 1];
		uint64_t off = addr - r->base;
		if (off < r->len && len <= r->len - off) {
			found = true;
			if (is_write)
				r->ops->write(r->opaque, off, data, len);
			else
				r->ops->read(r->opaque, off, data, len);
		}
	}
	pthread_rwlock_unlock(&bus->lock);
	if (!found && !is_write)
		memset(data, 0xff, len);
	return found;
}
