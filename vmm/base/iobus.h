/* Dispatch of guest port I/O and MMIO exits to device models.
 *
 * A device registers an address range with a const ops table and an opaque
 * pointer; vCPU threads look ranges up under a read lock (ranges change only
 * at setup and when a guest reprograms a PCI BAR, under the write lock).
 * Register data is passed as the raw bytes the guest wrote/reads, i.e. in
 * guest (little-endian) order: devices decode it with le_load_n/le_store_n. */
#ifndef MVM_IOBUS_H
#define MVM_IOBUS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct io_ops {
	/* off is relative to the range base; len is 1, 2, 4 or 8. read must
	 * fill all len bytes (0 for unknown registers). */
	void (*read)(void *opaque, uint64_t off, uint8_t *data, unsigned len);
	void (*write)(void *opaque, uint64_t off, const uint8_t *data, unsigned len);
};

struct iobus_range {
	uint64_t base;
	uint64_t len;
	const struct io_ops *ops;
	void *opaque;
};

struct iobus {
	pthread_rwlock_t lock;
	struct iobus_range *r;  /* sorted by base, non-overlapping */
	unsigned nr, cap;
};

int iobus_init(struct iobus *bus);
void iobus_destroy(struct iobus *bus);
/* 0, -EEXIST when [base, base+len) overlaps a registered range, -EINVAL for
 * len 0 or wrap-around, -ENOMEM. */
int iobus_register(struct iobus *bus, uint64_t base, uint64_t len,
		   const struct io_ops *ops, void *opaque);
/* Remove the range that starts at base and belongs to opaque: 0 or -ENOENT. */
int iobus_unregister(struct iobus *bus, uint64_t base, void *opaque);
/* Dispatch one access. Returns false when no range covers the whole access
 * (reads then see all-ones, as on a real bus). */
bool iobus_access(struct iobus *bus, uint64_t addr, uint8_t *data, unsigned len,
		  bool is_write);

#endif
/* Note: handlers run under the bus's read lock, so a handler must not
 * (un)register ranges on its own bus; a PCI config write (port I/O bus) may
 * move a BAR on the MMIO bus. */
