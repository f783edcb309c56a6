/* Guest-visible fields are little-endian (virtio 1.x, x86 boot protocol)
 * or big-endian (s390 channel I/O and SCLP).
 * Every load/store of a guest-visible field goes through these accessors so
 * that a big-endian host (s390x, later) needs no other change. They take an
 * unaligned pointer: guest structures are not guaranteed aligned for us. */
#ifndef MVM_BYTEORDER_H
#define MVM_BYTEORDER_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t le16_load(const void *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static inline uint32_t le32_load(const void *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static inline uint64_t le64_load(const void *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static inline void le16_store(void *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void le32_store(void *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void le64_store(void *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

/* Big-endian fields: s390's channel subsystem (CCW, ORB, SCHIB, IRB) and
 * SCLP structures, and virtio-ccw's own command data. */
static inline uint16_t be16_load(const void *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return be16toh(v);
}

static inline uint32_t be32_load(const void *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static inline uint64_t be64_load(const void *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

static inline void be16_store(void *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void be32_store(void *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void be64_store(void *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, sizeof(v));
}

/* Load/store of an n-byte (1, 2, 4, 8) little-endian value, for register
 * accesses whose width comes from the guest. */
static inline uint64_t le_load_n(const void *p, unsigned n)
{
	switch (n) {
	case 1: return *(const uint8_t *)p;
	case 2: return le16_load(p);
	case 4: return le32_load(p);
	case 8: return le64_load(p);
	}
	return 0;
}

static inline void le_store_n(void *p, unsigned n, uint64_t v)
{
	switch (n) {
	case 1: *(uint8_t *)p = (uint8_t)v; break;
	case 2: le16_store(p, (uint16_t)v); break;
	case 4: le32_store(p, (uint32_t)v); break;
	case 8: le64_store(p, v); break;
	}
}

#endif
