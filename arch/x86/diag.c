/* Fatal-exit diagnosis: see diag.h. Paging structures follow SDM vol. 3,
 * chapter 4 (4.3 32-bit paging, 4.4 PAE paging, 4.5 4-level and 5-level
 * paging). */
#include "arch/x86/diag.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#define PTE_P   (1ULL << 0)
#define PTE_PS  (1ULL << 7)
/* Bits 51:12 of a 64-bit entry: the next table or a 4 KiB frame. */
#define PTE_ADDR_MASK 0x000ffffffffff000ULL

/* One 4- or 8-byte little-endian table entry at gpa; -EFAULT outside RAM. */
static int diag_entry(const struct guest_mem *gm, uint64_t gpa, unsigned size, uint64_t *e)
{
	const uint8_t *p = gmem_ptr(gm, gpa, size);

	if (!p)
		return -EFAULT;
	*e = size == 8 ? le64_load(p) : le32_load(p);
	return (*e & PTE_P) ? 0 : -EFAULT;
}

/* 32-bit paging: 1024-entry directory and tables of 4-byte entries; a
 * directory entry with PS (and CR4.PSE) maps 4 MiB, its bits 20:13 giving
 * physical address bits 39:32 (PSE-36). */
static int diag_walk32(const struct guest_mem *gm, uint64_t cr3, bool pse, uint32_t va,
		       uint64_t *gpa)
{
	uint64_t pde, pte;
	int ret;

	ret = diag_entry(gm, (cr3 & 0xfffff000) + 4 * (va >> 22), 4, &pde);
	if (ret)
		return ret;
	if (pse && (pde & PTE_PS)) {
		*gpa = (pde & 0xffc00000) | (((pde >> 13) & 0xff) << 32) | (va & 0x3fffff);
		return 0;
	}
	ret = diag_entry(gm, (pde & 0xfffff000) + 4 * ((va >> 12) & 0x3ff), 4, &pte);
	if (ret)
		return ret;
	*gpa = (pte & 0xfffff000) | (va & 0xfff);
	return 0;
}

/* 8-byte-entry walk from the table at `table`, starting at the level whose
 * index is bits [shift+8:shift] of va (shift 39 for 4-level, 48 for
 * 5-level, 29 for the PAE directory after its PDPTE). Entries at shift 30
 * (1 GiB) and 21 (2 MiB) may be large pages, except at PAE's first level. */
static int diag_walk64(const struct guest_mem *gm, uint64_t table, unsigned shift, uint64_t va,
		       uint64_t *gpa)
{
	uint64_t e;
	int ret;

	for (;;) {
		ret = diag_entry(gm, (table & PTE_ADDR_MASK) + 8 * ((va >> shift) & 0x1ff), 8, &e);
		if (ret)
			return ret;
		if (shift == 12) {
			*gpa = (e & PTE_ADDR_MASK) | (va & 0xfff);
			return 0;
		}
		if ((shift == 30 || shift == 21) && (e & PTE_PS)) {
			uint64_t size = 1ULL << shift;
			*gpa = (e & PTE_ADDR_MASK & ~(size - 1)) | (va & (size - 1));
			return 0;
		}
		table = e;
		shift -= 9;
	}
}

int x86_gva_to_gpa(const struct guest_mem *gm, const struct x86_mmu *m, uint64_t gva,
		   uint64_t *gpa)
{
	bool long_mode = m->efer & X86_EFER_LMA;
	uint64_t pdpte;
	int ret;

	if (!(m->cr0 & X86_CR0_PG) || !(m->cr0 & X86_CR0_PE)) {
		*gpa = long_mode ? gva : (gva & 0xffffffffULL);
		return 0;
	}
	if (long_mode) {
		unsigned bits = (m->cr4 & X86_CR4_LA57) ? 57 : 48;
		int64_t sext = (int64_t)(gva << (64 - bits)) >> (64 - bits);

		if ((uint64_t)sext != gva)
			return -EFAULT;     /* not canonical */
		return diag_walk64(gm, m->cr3, bits == 57 ? 48 : 39, gva, gpa);
	}
	gva &= 0xffffffffULL;
	if (!(m->cr4 & X86_CR4_PAE))
		return diag_walk32(gm, m->cr3, m->cr4 & X86_CR4_PSE, (uint32_t)gva, gpa);
	/* PAE: CR3 bits 31:5 point at four PDPTEs, indexed by bits 31:30. */
	ret = diag_entry(gm, (m->cr3 & 0xffffffe0) + 8 * (gva >> 30), 8, &pdpte);
	if (ret)
		return ret;
	return diag_walk64(gm, pdpte, 21, gva, gpa);
}

size_t x86_read_linear(const struct guest_mem *gm, const struct x86_mmu *m, uint64_t gva,
		       uint8_t *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		uint64_t va = gva + done, gpa;
		size_t chunk = MIN(len - done, 4096 - (va & 0xfff));
		const uint8_t *p;

		if (x86_gva_to_gpa(gm, m, va, &gpa))
			break;
		p = gmem_ptr(gm, gpa, chunk);
		if (!p)
			break;
		memcpy(buf + done, p, chunk);
		done += chunk;
	}
	return done;
}

static void diag_mode(const struct x86_mmu *m, bool cs_l, bool cs_db, char *out, size_t len)
{
	const char *paging;

	if (!(m->cr0 & X86_CR0_PE)) {
		snprintf(out, len, "real mode");
		return;
	}
	if (m->efer & X86_EFER_LMA) {
		snprintf(out, len, "%s, %s", cs_l ? "64-bit long mode" : "compatibility mode",
			 (m->cr4 & X86_CR4_LA57) ? "5-level paging" : "4-level paging");
		return;
	}
	if (!(m->cr0 & X86_CR0_PG))
		paging = "paging off";
	else if (m->cr4 & X86_CR4_PAE)
		paging = "PAE paging";
	else
		paging = "32-bit paging";
	snprintf(out, len, "%s protected mode, %s", cs_db ? "32-bit" : "16-bit", paging);
}

void x86_describe_stop(const struct guest_mem *gm, const struct x86_mmu *m, uint64_t rip,
		       uint64_t cs_base, bool cs_l, bool cs_db, char *out, size_t outlen)
{
	uint8_t insn[X86_INSN_MAX];
	char mode[64], bytes[3 * X86_INSN_MAX + 1];
	uint64_t linear;
	size_t n, i, off = 0;
	bool reset;

	diag_mode(m, cs_l, cs_db, mode, sizeof(mode));
	if ((m->efer & X86_EFER_LMA) && cs_l)
		linear = rip;
	else if (!(m->cr0 & X86_CR0_PE))
		linear = cs_base + (rip & 0xffff);
	else
		linear = (cs_base + rip) & 0xffffffffULL;
	/* The state after RESET or INIT (SDM vol. 3, 9.1.4): KVM on AMD puts
	 * a vCPU that shut down (triple fault) there, so what it ran is gone. */
	reset = !(m->cr0 & X86_CR0_PE) && cs_base == 0xffff0000 && rip == 0xfff0;
	n = x86_read_linear(gm, m, linear, insn, sizeof(insn));
	if (!n) {
		snprintf(out, outlen, "RIP %#llx (%s), bytes at RIP: unreadable (linear %#llx is "
			 "not mapped to guest RAM)%s", (unsigned long long)rip, mode,
			 (unsigned long long)linear, reset ? "; the CPU was reset (KVM on AMD "
			 "resets it after a triple fault): where it was is lost" : "");
		return;
	}
	for (i = 0; i < n; i++)
		off += snprintf(bytes + off, sizeof(bytes) - off, "%s%02x", i ? " " : "", insn[i]);
	snprintf(out, outlen, "RIP %#llx (%s), bytes at RIP: %s%s", (unsigned long long)rip, mode,
		 bytes, n < sizeof(insn) ? " (then unmapped)" : "");
}

void x86_describe_vcpu(int vcpu_fd, const struct guest_mem *gm, char *out, size_t outlen)
{
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct x86_mmu m;

	if (ioctl(vcpu_fd, KVM_GET_REGS, &regs) < 0 || ioctl(vcpu_fd, KVM_GET_SREGS, &sregs) < 0) {
		snprintf(out, outlen, "registers unreadable (%s)", strerror(errno));
		return;
	}
	m = (struct x86_mmu){ .cr0 = sregs.cr0, .cr3 = sregs.cr3, .cr4 = sregs.cr4,
			      .efer = sregs.efer };
	x86_describe_stop(gm, &m, regs.rip, sregs.cs.base, sregs.cs.l, sregs.cs.db, out, outlen);
}
