/* A section the test wrote (w, its one open section ended) through a
 * snapshot file, as a restore reads it: imaged (snap_w_image), checked
 * (snap_open) and found (snap_find) into *r, for a device's or a model's
 * load to read. The image backs r: snap_sec_free after the load, which
 * also frees w. */
#ifndef MVM_TEST_SNAP_SEC_H
#define MVM_TEST_SNAP_SEC_H

#include "tests/unit/check.h"
#include "vmm/base/snap.h"

#include <stdlib.h>

struct snap_sec {
	uint8_t *img;
	struct snap_w *w;
};

static inline struct snap_sec snap_sec_open(struct snap_w *w, uint32_t tag, uint32_t instance,
					    struct snap_r *r)
{
	struct snap_sec s = { .w = w };
	struct snap_file f;
	char msg[256];
	size_t len;

	CHECK_EQ(w->err, 0);
	CHECK_EQ(snap_w_image(w, &s.img, &len), 0);
	CHECK_EQ(snap_open(&f, s.img, len, msg, sizeof(msg)), 0);
	CHECK_EQ(snap_find(&f, tag, instance, r), 0);
	return s;
}

static inline void snap_sec_free(struct snap_sec *s)
{
	free(s->img);
	snap_w_free(s->w);
}

#endif
