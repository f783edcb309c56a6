/* Where an x86 vCPU stopped, for the message mvm prints on a fatal exit
 * (KVM_EXIT_INTERNAL_ERROR, KVM_EXIT_FAIL_ENTRY, an unknown exit): the
 * CPU mode, RIP and the instruction bytes at RIP, read from guest RAM
 * through the guest's own page tables.
 *
 * The walker and the reader are pure functions over struct guest_mem (the
 * only way mvm touches guest RAM: every table entry and every byte goes
 * through gmem_ptr, so a hostile CR3 or PTE cannot reach outside RAM), so
 * unit tests drive them with a fake guest memory. */
#ifndef MVM_X86_DIAG_H
#define MVM_X86_DIAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/base/guest_mem.h"

/* The control state that decides how a linear address is translated
 * (SDM vol. 3, 4.1.1: paging modes). */
struct x86_mmu {
	uint64_t cr0, cr3, cr4, efer;
};

#define X86_CR0_PE    (1ULL << 0)
#define X86_CR0_PG    (1ULL << 31)
#define X86_CR4_PSE   (1ULL << 4)
#define X86_CR4_PAE   (1ULL << 5)
#define X86_CR4_LA57  (1ULL << 12)
#define X86_EFER_LMA  (1ULL << 10)

/* Translate a linear address: 0 and *gpa, or -EFAULT when an entry is not
 * present, a table lies outside guest RAM, or the address is not canonical
 * for the paging mode. Paging off: the address itself (32 bits outside
 * long mode). Handles 2-level (with 4 MiB PSE pages), PAE, 4-level and
 * 5-level paging with large pages. Access rights are not checked: this is
 * for reading what the CPU was executing, not for emulating it. */
int x86_gva_to_gpa(const struct guest_mem *gm, const struct x86_mmu *m, uint64_t gva,
		   uint64_t *gpa);

/* Copy up to len bytes at linear address gva into buf, page by page;
 * returns how many could be read (0 when none: first page unmapped or
 * outside RAM). */
size_t x86_read_linear(const struct guest_mem *gm, const struct x86_mmu *m, uint64_t gva,
		       uint8_t *buf, size_t len);

/* Longest x86 instruction. */
#define X86_INSN_MAX 15

/* One line, no "mvm: " prefix and no newline: "RIP 0x... (64-bit long mode,
 * 4-level paging), bytes at RIP: 0f 01 d1 ..." or "... bytes at RIP:
 * unreadable (linear 0x... not mapped to guest RAM)". cs_base is added to
 * rip to form the linear address (0 in 64-bit mode). */
void x86_describe_stop(const struct guest_mem *gm, const struct x86_mmu *m, uint64_t rip,
		       uint64_t cs_base, bool cs_l, bool cs_db, char *out, size_t outlen);

/* x86_describe_stop for a KVM vCPU: reads its registers (KVM_GET_REGS,
 * KVM_GET_SREGS; from the vCPU's own thread). When they cannot be read,
 * says so. */
void x86_describe_vcpu(int vcpu_fd, const struct guest_mem *gm, char *out, size_t outlen);

#endif
