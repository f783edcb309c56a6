/* Shared pieces of the libFuzzer targets (tests/fuzz/fuzz_*.c), header-only.
 *
 * Each target is one LLVMFuzzerTestOneInput over a real mvm component with
 * fakes around it (no KVM, no threads): every input builds its own state
 * and frees it, so an input replays the same way on its own (a crash
 * reproduces with `build/fuzz/fuzz_<name> <file>`).
 *
 *  - struct fz reads the input as a stream of little-endian integers and
 *    byte strings; past the end it reads zeroes (fz_left() says when).
 *  - FZ_ASSERT is a harness invariant: it prints and aborts, which
 *    libFuzzer reports as a crash and saves the input.
 *  - Seeds: every target has fuzz_seeds(), a few hand-made valid inputs;
 *    `fuzz_<name> -write_seeds=DIR` writes them (one file each) and exits
 *    (make fuzz-seeds refreshes tests/fuzz/corpus/<name>/ that way). */
#ifndef MVM_TESTS_FUZZ_H
#define MVM_TESTS_FUZZ_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

struct fz {
	const uint8_t *p;
	size_t n;
};

static inline size_t fz_left(const struct fz *f)
{
	return f->n;
}

/* Copy up to len input bytes to dst, zero-filling past the end. */
static inline void fz_bytes(struct fz *f, void *dst, size_t len)
{
	size_t k = len < f->n ? len : f->n;

	memcpy(dst, f->p, k);
	memset((uint8_t *)dst + k, 0, len - k);
	f->p += k;
	f->n -= k;
}

static inline uint8_t fz_u8(struct fz *f)
{
	uint8_t v;

	fz_bytes(f, &v, 1);
	return v;
}

static inline uint16_t fz_u16(struct fz *f)
{
	uint8_t b[2];

	fz_bytes(f, b, 2);
	return le16_load(b);
}

static inline uint32_t fz_u32(struct fz *f)
{
	uint8_t b[4];

	fz_bytes(f, b, 4);
	return le32_load(b);
}

static inline uint64_t fz_u64(struct fz *f)
{
	uint8_t b[8];

	fz_bytes(f, b, 8);
	return le64_load(b);
}

#define FZ_ASSERT(cond)                                                     \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", \
				__FILE__, __LINE__, #cond);                 \
			abort();                                            \
		}                                                           \
	} while (0)

/* --- seeds: a growable byte buffer and the -write_seeds mode --- */

struct fz_buf {
	uint8_t b[8192];
	size_t n;
};

static inline void fzb_bytes(struct fz_buf *s, const void *p, size_t len)
{
	FZ_ASSERT(len <= sizeof(s->b) - s->n);
	memcpy(s->b + s->n, p, len);
	s->n += len;
}

static inline void fzb_u8(struct fz_buf *s, uint8_t v)
{
	fzb_bytes(s, &v, 1);
}

static inline void fzb_u16(struct fz_buf *s, uint16_t v)
{
	uint8_t b[2];

	le16_store(b, v);
	fzb_bytes(s, b, 2);
}

static inline void fzb_u32(struct fz_buf *s, uint32_t v)
{
	uint8_t b[4];

	le32_store(b, v);
	fzb_bytes(s, b, 4);
}

static inline void fzb_u64(struct fz_buf *s, uint64_t v)
{
	uint8_t b[8];

	le64_store(b, v);
	fzb_bytes(s, b, 8);
}

static const char *fuzz_seed_dir;

/* Write one seed file DIR/NAME (in -write_seeds mode). */
static inline void fuzz_seed(const char *name, const void *p, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", fuzz_seed_dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, len, f) != len || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* Defined by each target. */
static void fuzz_seeds(void);

/* Runs before libFuzzer parses its flags: -write_seeds=DIR is ours. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	for (int i = 1; i < *argc; i++) {
		if (!strncmp((*argv)[i], "-write_seeds=", 13)) {
			fuzz_seed_dir = (*argv)[i] + 13;
			fuzz_seeds();
			exit(0);
		}
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
