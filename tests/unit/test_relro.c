/* RELRO applied by mvm itself (vmm/cli/relro.c), for the static musl build
 * whose start-up code leaves the segment writable: program headers made up
 * over a mapping of our own, a write into the protected pages faults (in a
 * child), the rest of the mapping stays writable. */
#include "tests/unit/check.h"
#include "vmm/cli/relro.h"

#include <signal.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t page;

/* Three writable pages, and headers for a "program" loaded there: a
 * PT_LOAD over all of it and a PT_GNU_RELRO from 16 bytes in to the middle
 * of the last page (where the writable data would begin). */
static uint8_t *load(ElfW(Phdr) ph[3], bool interp)
{
	uint8_t *m;

	page = (size_t)sysconf(_SC_PAGESIZE);
	m = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	memset(ph, 0, 3 * sizeof(ph[0]));
	ph[0].p_type = PT_LOAD;
	ph[0].p_vaddr = 0;
	ph[0].p_memsz = 3 * page;
	ph[1].p_type = PT_GNU_RELRO;
	ph[1].p_vaddr = 16;
	ph[1].p_memsz = 2 * page + page / 2 - 16;
	ph[2].p_type = interp ? PT_INTERP : PT_NULL;
	return m;
}

static void write_byte(void *p)
{
	*(volatile uint8_t *)p = 1;
}

/* A write at p faults: the child dies of SIGSEGV (under ASan, whose
 * handler takes the signal, it exits saying SEGV). */
static bool write_faults(void *p)
{
	char out[4096];
	int st = check_fork(write_byte, p, out, sizeof(out));

	return st == 128 + SIGSEGV || (st != 0 && strstr(out, "SEGV"));
}

TEST(relro_pages_become_read_only_the_rest_stays_writable)
{
	ElfW(Phdr) ph[3];
	uint8_t *m = load(ph, false);

	CHECK_EQ(relro_protect(ph, 3, (uintptr_t)m), 1);
	CHECK(write_faults(m));
	CHECK(write_faults(m + 2 * page - 1));
	CHECK_EQ(m[16], 0);                     /* still readable */
	/* The page the segment ends in holds writable data too. */
	m[2 * page + page / 2] = 1;
	m[2 * page] = 1;
	munmap(m, 3 * page);
}

TEST(a_program_with_an_interpreter_is_left_to_its_loader)
{
	ElfW(Phdr) ph[3];
	uint8_t *m = load(ph, true);

	CHECK_EQ(relro_protect(ph, 3, (uintptr_t)m), 0);
	m[16] = 1;
	CHECK_EQ(check_fork(write_byte, m + 16, NULL, 0), 0);
	munmap(m, 3 * page);
}

TEST(a_program_without_relro_is_left_alone)
{
	ElfW(Phdr) ph[3];
	uint8_t *m = load(ph, false);

	ph[1].p_type = PT_NULL;
	CHECK_EQ(relro_protect(ph, 3, (uintptr_t)m), 0);
	m[16] = 1;
	munmap(m, 3 * page);
}

TEST(a_segment_inside_one_page_protects_nothing)
{
	ElfW(Phdr) ph[3];
	uint8_t *m = load(ph, false);

	ph[1].p_memsz = page / 2;                /* starts and ends in page 0 */
	CHECK_EQ(relro_protect(ph, 3, (uintptr_t)m), 0);
	m[16] = 1;
	munmap(m, 3 * page);
}

/* Whoever applied it (the loader, glibc's static start-up, or
 * relro_protect under musl): this program's own RELRO is read-only. */
static int own_relro(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	for (unsigned i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_GNU_RELRO)
			*(uint8_t **)data = (uint8_t *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	return 1;
}

TEST(this_programs_relro_is_read_only)
{
	uint8_t *relro = NULL;

	dl_iterate_phdr(own_relro, &relro);
	CHECK(relro);
	CHECK(write_faults(relro));
}
