/* RELRO where no one else applies it. The linker's -z relro -z now puts
 * the GOT, .init_array/.fini_array and every relocated constant
 * (.data.rel.ro: ops tables holding function pointers) into one
 * PT_GNU_RELRO segment, which the dynamic loader, or glibc's static
 * start-up code, makes read-only once relocation is done. musl's static
 * start-up (the static PIE `make static` builds) relocates but leaves the
 * segment writable, so a constructor in mvm(1) does it there (part of the
 * command line's objects, not of libmvm: a library does not change its
 * host program's mappings). */
#ifndef MVM_RELRO_H
#define MVM_RELRO_H

#include <link.h>
#include <stddef.h>
#include <stdint.h>

/* For a program loaded at base with program headers ph[0..n): make its
 * PT_GNU_RELRO pages read-only (the segment's start rounded down, its end
 * rounded down to a page, as ld.so does: the page it ends in holds
 * writable data too), unless it has a PT_INTERP, whose loader did that
 * already. 1: protected, 0: nothing to do, -errno: mprotect failed. */
int relro_protect(const ElfW(Phdr) *ph, size_t n, uintptr_t base);

#endif
