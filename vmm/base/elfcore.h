/* An ELF core file of a guest (mvm_coredump; docs/api.md, vm.coredump):
 * the layout QEMU's dump-guest-memory and Cloud Hypervisor's vm.coredump
 * write, which crash(8) reads beside the guest kernel's vmlinux:
 *
 *   ELF header | program headers: one PT_NOTE, one PT_LOAD per RAM region
 *   | the notes (per vCPU, the architecture's) | each region's bytes,
 *   page-aligned, its all-zero pages left as holes.
 *
 * A PT_LOAD's p_paddr is the region's guest-physical address and its
 * p_vaddr 0: the guest's virtual mappings are the guest's (crash walks
 * its page tables from the registers in the notes). Every field in the
 * architecture's byte order (ELF's EI_DATA), through these helpers. */
#ifndef MVM_ELFCORE_H
#define MVM_ELFCORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ELFCORE_EHDR_SIZE  64u
#define ELFCORE_PHDR_SIZE  56u
#define ELFCORE_PAGE       4096u

struct elfcore_seg {
	uint64_t paddr;         /* guest-physical */
	uint64_t size;
	uint64_t offset;        /* in the file (elfcore_layout) */
};

/* Where each part goes: the notes (notes_len bytes) after the headers,
 * each of the n segments after them, page-aligned. Returns the file's
 * size. */
uint64_t elfcore_layout(struct elfcore_seg *segs, unsigned n, size_t notes_len,
			uint64_t *notes_off);

/* The ELF header and the n + 1 program headers into buf (at least
 * ELFCORE_EHDR_SIZE + (n + 1) * ELFCORE_PHDR_SIZE bytes). */
void elfcore_headers(uint8_t *buf, uint16_t machine, bool big_endian,
		     const struct elfcore_seg *segs, unsigned n, uint64_t notes_off,
		     size_t notes_len);

/* One note (name, type, desc) at buf: its size (4-byte padded), or 0
 * where it does not fit in cap. */
size_t elfcore_note(uint8_t *buf, size_t cap, bool big_endian, const char *name,
		    uint32_t type, const void *desc, size_t desc_len);

#endif
