/* The snapshot state file: a versioned container of tagged sections, each
 * a little-endian byte string with a checksum of its own, the whole file
 * covered by another. docs/snapshot.md describes the layout byte by byte.
 *
 * A snapshot is input: snap_open checks the framing and every checksum
 * before anyone reads a section, and the typed getters never read past
 * a section's end (an overrun sets the reader's error and yields zeros),
 * so a parser written on them needs no bounds checks of its own and
 * cannot be steered outside the file.
 *
 * The writer builds the whole state in memory (a few hundred KiB for the
 * largest VM), so a state that fails half-way leaves no file behind, and
 * snap_w_write puts it in place with one rename. */
#ifndef MVM_SNAP_H
#define MVM_SNAP_H

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* File layout version: bumped for any change an older reader would
 * misread. A reader takes exactly its own version. */
#define SNAP_FORMAT_VERSION 1
#define SNAP_MAGIC "MVMSNAP\0"          /* 8 bytes */

/* A section tag: four ASCII characters, e.g. SNAP_TAG('V','C','P','U').
 * "END!" is the trailer's alone: the writer refuses it for a section. */
#define SNAP_TAG(a, b, c, d) \
	((uint32_t)(uint8_t)(a) | (uint32_t)(uint8_t)(b) << 8 | \
	 (uint32_t)(uint8_t)(c) << 16 | (uint32_t)(uint8_t)(d) << 24)

/* Largest section, and most sections, a reader takes. */
#define SNAP_SECTION_MAX (64u << 20)
#define SNAP_SECTIONS_MAX 4096u

struct snap_w {
	uint8_t *buf;
	size_t len, cap;
	size_t sec_start;               /* offset of the open section's header, or SIZE_MAX */
	int err;                        /* first error: -ENOMEM; -EINVAL: misuse;
					 * -EFBIG: more than a reader takes
					 * (SNAP_SECTION_MAX, SNAP_SECTIONS_MAX) */
	unsigned nsections;
};

/* An empty state; the header is written by snap_w_write. */
void snap_w_init(struct snap_w *w);
void snap_w_free(struct snap_w *w);
/* Open section (tag, instance): instance tells apart sections of one
 * kind (vCPU n, device n). Sections do not nest: begin after begin
 * without end is misuse (w->err = -EINVAL). */
void snap_begin(struct snap_w *w, uint32_t tag, uint32_t instance);
void snap_end(struct snap_w *w);
void snap_put_u8(struct snap_w *w, uint8_t v);
void snap_put_u16(struct snap_w *w, uint16_t v);
void snap_put_u32(struct snap_w *w, uint32_t v);
void snap_put_u64(struct snap_w *w, uint64_t v);
void snap_put_bytes(struct snap_w *w, const void *p, size_t n);
/* A string: u32 length, then the bytes (no NUL). NULL is written as "". */
void snap_put_str(struct snap_w *w, const char *s);
/* How a snapshot's files are opened: to be written (0600, never through
 * a link planted at the name), and a directory to be synced. The API
 * thread's seccomp filter allows openat with these flags only. */
#define SNAP_OPEN_WRITE (O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW)
#define SNAP_OPEN_DIR (O_RDONLY | O_DIRECTORY | O_CLOEXEC)

/* The whole file (header, sections, trailer with the checksum) written
 * to dirfd/name through a temporary name, fsync'd, renamed over name.
 * 0 or -errno (also w->err, when building failed) with a message. */
int snap_w_write(struct snap_w *w, int dirfd, const char *name, char *err, size_t errlen);
/* The same file image into a malloc'd buffer (for tests and fuzzing):
 * 0 or -errno. */
int snap_w_image(struct snap_w *w, uint8_t **out, size_t *outlen);

/* A section (or a whole file) being read. */
struct snap_r {
	const uint8_t *p;
	size_t len, off;
	uint32_t tag, instance;
	int err;                        /* 0; -EINVAL once a read overran or a
					 * string was bad; -ENOENT from a failed
					 * snap_find */
};

/* The checked file: buf must outlive it. */
struct snap_file {
	const uint8_t *buf;
	size_t len;
	uint32_t version;
	unsigned nsections;
	size_t first;                   /* offset of the first section */
};

/* Check a whole file image: magic, format version (a different one is
 * refused with "snapshot format N, this mvm reads M: take the snapshot
 * again with this mvm"), flags 0, the framing of every section (lengths inside the file, at most
 * SNAP_SECTION_MAX and SNAP_SECTIONS_MAX), each section's checksum and the
 * file's. 0 or -EINVAL (-EPROTO for another version) with a one-line
 * message naming what is wrong and where (byte offset, section tag). */
int snap_open(struct snap_file *f, const uint8_t *buf, size_t len, char *err, size_t errlen);
/* Section (tag, instance): 0 and *r positioned at its start, or -ENOENT.
 * When several match (a damaged file that still checks out), the first. */
int snap_find(const struct snap_file *f, uint32_t tag, uint32_t instance, struct snap_r *r);
/* How many sections carry tag. */
unsigned snap_count(const struct snap_file *f, uint32_t tag);

uint8_t snap_get_u8(struct snap_r *r);
uint16_t snap_get_u16(struct snap_r *r);
uint32_t snap_get_u32(struct snap_r *r);
uint64_t snap_get_u64(struct snap_r *r);
/* n bytes into p (zeros on overrun). */
void snap_get_bytes(struct snap_r *r, void *p, size_t n);
/* A string written by snap_put_str into buf (NUL-terminated); one longer
 * than buflen - 1 or holding a NUL is an error (r->err = -EINVAL). */
void snap_get_str(struct snap_r *r, char *buf, size_t buflen);
/* Bytes left unread in the section. */
size_t snap_left(const struct snap_r *r);
/* The section was read exactly to its end with no overrun: 0, else
 * -EINVAL with "section XXXX/n: ..." in err. */
int snap_done(const struct snap_r *r, char *err, size_t errlen);
/* The tag as four printable characters and a NUL ('?' for others). */
void snap_tag_name(uint32_t tag, char out[5]);

/* CRC-32C (Castagnoli) of buf, continuing from crc (0 to start). */
uint32_t snap_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
