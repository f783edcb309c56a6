/* A struct mvm_disk from a --disk value, for the tests and the benchmark
 * that build a device by hand: mvm_disk_init's defaults, default_queues
 * (0: the default), then mvm_disk_parse over them, as mvm(1) does. The
 * strings live in a per-thread ring of buffers, long enough for the
 * device to copy them. */
#ifndef MVM_TEST_DISK_SPEC_H
#define MVM_TEST_DISK_SPEC_H

#include "vmm/mvm.h"

#include <stddef.h>

static inline int test_disk_parse(const char *spec, unsigned default_queues, struct mvm_disk *d,
				  char *err, size_t errlen)
{
	static __thread char ring[8][4352];
	static __thread unsigned next;
	char *buf = ring[next++ % 8];

	mvm_disk_init(d, NULL);
	if (default_queues)
		d->queues = default_queues;
	return mvm_disk_parse(d, spec, buf, sizeof(ring[0]), err, errlen);
}

#endif
