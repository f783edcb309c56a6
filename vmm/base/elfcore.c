/* ELF core files of guests (vmm/base/elfcore.h). The field offsets are
 * the ELF-64 specification's (System V ABI, "ELF Header", "Program
 * Header", "Note Section"). */
#include "vmm/base/elfcore.h"
#include "vmm/base/byteorder.h"

#include <elf.h>
#include <string.h>

static void put16(uint8_t *p, bool be, uint16_t v)
{
	if (be)
		be16_store(p, v);
	else
		le16_store(p, v);
}

static void put32(uint8_t *p, bool be, uint32_t v)
{
	if (be)
		be32_store(p, v);
	else
		le32_store(p, v);
}

static void put64(uint8_t *p, bool be, uint64_t v)
{
	if (be)
		be64_store(p, v);
	else
		le64_store(p, v);
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

uint64_t elfcore_layout(struct elfcore_seg *segs, unsigned n, size_t notes_len,
			uint64_t *notes_off)
{
	uint64_t at = ELFCORE_EHDR_SIZE + (uint64_t)(n + 1) * ELFCORE_PHDR_SIZE;
	unsigned i;

	*notes_off = at;
	at += notes_len;
	for (i = 0; i < n; i++) {
		at = align_up(at, ELFCORE_PAGE);
		segs[i].offset = at;
		at += segs[i].size;
	}
	return at;
}

static void phdr(uint8_t *p, bool be, uint32_t type, uint32_t flags, uint64_t off,
		 uint64_t paddr, uint64_t size, uint64_t align)
{
	put32(p + 0, be, type);
	put32(p + 4, be, flags);
	put64(p + 8, be, off);
	put64(p + 16, be, 0);           /* p_vaddr: the guest's own business */
	put64(p + 24, be, paddr);
	put64(p + 32, be, size);        /* p_filesz */
	put64(p + 40, be, size);        /* p_memsz */
	put64(p + 48, be, align);
}

void elfcore_headers(uint8_t *buf, uint16_t machine, bool big_endian,
		     const struct elfcore_seg *segs, unsigned n, uint64_t notes_off,
		     size_t notes_len)
{
	bool be = big_endian;
	unsigned i;

	memset(buf, 0, ELFCORE_EHDR_SIZE);
	memcpy(buf, ELFMAG, SELFMAG);
	buf[EI_CLASS] = ELFCLASS64;
	buf[EI_DATA] = be ? ELFDATA2MSB : ELFDATA2LSB;
	buf[EI_VERSION] = EV_CURRENT;
	buf[EI_OSABI] = ELFOSABI_NONE;
	put16(buf + 16, be, ET_CORE);
	put16(buf + 18, be, machine);
	put32(buf + 20, be, EV_CURRENT);
	put64(buf + 24, be, 0);                         /* e_entry */
	put64(buf + 32, be, ELFCORE_EHDR_SIZE);         /* e_phoff */
	put64(buf + 40, be, 0);                         /* e_shoff: no sections */
	put32(buf + 48, be, 0);                         /* e_flags */
	put16(buf + 52, be, ELFCORE_EHDR_SIZE);
	put16(buf + 54, be, ELFCORE_PHDR_SIZE);
	put16(buf + 56, be, (uint16_t)(n + 1));
	put16(buf + 58, be, 0);                         /* e_shentsize */
	put16(buf + 60, be, 0);
	put16(buf + 62, be, SHN_UNDEF);
	buf += ELFCORE_EHDR_SIZE;
	phdr(buf, be, PT_NOTE, 0, notes_off, 0, notes_len, 1);
	for (i = 0; i < n; i++)
		phdr(buf + (i + 1) * ELFCORE_PHDR_SIZE, be, PT_LOAD, PF_R | PF_W | PF_X,
		     segs[i].offset, segs[i].paddr, segs[i].size, ELFCORE_PAGE);
}

size_t elfcore_note(uint8_t *buf, size_t cap, bool big_endian, const char *name,
		    uint32_t type, const void *desc, size_t desc_len)
{
	size_t namesz = strlen(name) + 1;
	size_t len = 12 + align_up(namesz, 4) + align_up(desc_len, 4);

	if (len > cap || desc_len > UINT32_MAX)
		return 0;
	memset(buf, 0, len);
	put32(buf, big_endian, (uint32_t)namesz);
	put32(buf + 4, big_endian, (uint32_t)desc_len);
	put32(buf + 8, big_endian, type);
	memcpy(buf + 12, name, namesz);
	memcpy(buf + 12 + align_up(namesz, 4), desc, desc_len);
	return len;
}
