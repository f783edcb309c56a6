#include "vmm/cli/relro.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

int relro_protect(const ElfW(Phdr) *ph, size_t n, uintptr_t base)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start, end;
	const ElfW(Phdr) *relro = NULL;
	size_t i;

	for (i = 0; i < n; i++) {
		if (ph[i].p_type == PT_INTERP)
			return 0;
		if (ph[i].p_type == PT_GNU_RELRO)
			relro = &ph[i];
	}
	if (!relro)
		return 0;
	start = (base + relro->p_vaddr) & ~(page - 1);
	end = (base + relro->p_vaddr + relro->p_memsz) & ~(page - 1);
	if (end <= start)
		return 0;
	if (mprotect((void *)start, end - start, PROT_READ))
		return -errno;
	return 1;
}

/* The first object dl_iterate_phdr reports is the program itself. */
static int relro_program(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	(void)relro_protect(info->dlpi_phdr, info->dlpi_phnum, info->dlpi_addr);
	return 1;
}

/* Before main, before any thread: nothing writes the segment after
 * relocation, so only an attacker's write can notice. A failure leaves
 * the segment as the C library left it, and there is no one to tell yet
 * (no log sink, no options parsed): test_relro checks the function, and
 * tests/hardening/elf-check that the static build links it. */
__attribute__((constructor)) static void relro_init(void)
{
	dl_iterate_phdr(relro_program, NULL);
}
