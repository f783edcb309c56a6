/* An x86 vCPU in a guest core dump (arch/x86/coredump.c): NT_PRSTATUS
 * with the registers where Linux's struct elf_prstatus and struct
 * user_regs_struct put them (what gdb reads), and QEMU's CPU state note,
 * version 1, with the segments, descriptor tables and control registers
 * (what crash reads CR3 from). No KVM. */
#include "tests/unit/check.h"
#include "arch/x86/x86.h"
#include "vmm/base/byteorder.h"

#include <elf.h>
#include <string.h>

TEST(the_notes_hold_the_registers_where_gdb_and_crash_look)
{
	struct kvm_regs r;
	struct kvm_sregs s;
	uint8_t buf[1024];
	const uint8_t *pr, *q;
	size_t n;

	memset(&r, 0, sizeof(r));
	memset(&s, 0, sizeof(s));
	r.rax = 0x1111;
	r.rbx = 0x2222;
	r.rsp = 0xffffc90000003f00ull;
	r.r15 = 0xf15;
	r.rip = 0xffffffff81234567ull;
	r.rflags = 0x246;
	s.cs = (struct kvm_segment){ .selector = 0x10, .type = 11, .s = 1, .present = 1, .l = 1,
				     .g = 1, .limit = 0xffffffff };
	s.ss.selector = 0x18;
	s.gs.base = 0xffff88800f000000ull;
	s.gdt.base = 0xfffffe0000001000ull;
	s.gdt.limit = 0x7f;
	s.cr0 = 0x80050033;
	s.cr3 = 0x2a0c000;
	s.cr4 = 0x3706f0;
	n = x86_coredump_notes(buf, sizeof(buf), 2, &r, &s, 0xabc);
	CHECK_EQ(n, (12 + 8 + 336) + (12 + 8 + 440));
	/* NT_PRSTATUS, "CORE" */
	CHECK_EQ(le32_load(buf + 4), 336);
	CHECK_EQ(le32_load(buf + 8), NT_PRSTATUS);
	CHECK(!memcmp(buf + 12, "CORE", 5));
	pr = buf + 20;
	CHECK_EQ(le32_load(pr + 32), 3);                        /* pr_pid: vCPU 2, from 1 */
	CHECK_EQ(le64_load(pr + 112 + 0 * 8), 0xf15);           /* r15 first */
	CHECK_EQ(le64_load(pr + 112 + 5 * 8), 0x2222);          /* rbx */
	CHECK_EQ(le64_load(pr + 112 + 10 * 8), 0x1111);         /* rax */
	CHECK_EQ(le64_load(pr + 112 + 16 * 8), r.rip);          /* rip */
	CHECK_EQ(le64_load(pr + 112 + 17 * 8), 0x10);           /* cs */
	CHECK_EQ(le64_load(pr + 112 + 18 * 8), 0x246);          /* eflags */
	CHECK_EQ(le64_load(pr + 112 + 19 * 8), r.rsp);          /* rsp */
	CHECK_EQ(le64_load(pr + 112 + 20 * 8), 0x18);           /* ss */
	CHECK_EQ(le64_load(pr + 112 + 22 * 8), s.gs.base);      /* gs_base */
	/* "QEMU", type 0: QEMUCPUState */
	q = buf + 20 + 336;
	CHECK_EQ(le32_load(q), 5);
	CHECK_EQ(le32_load(q + 4), 440);
	CHECK_EQ(le32_load(q + 8), 0);
	CHECK(!memcmp(q + 12, "QEMU", 5));
	q += 20;
	CHECK_EQ(le32_load(q), 1);                              /* version */
	CHECK_EQ(le32_load(q + 4), 440);
	CHECK_EQ(le64_load(q + 8), 0x1111);                     /* rax first */
	CHECK_EQ(le64_load(q + 8 + 6 * 8), r.rsp);
	CHECK_EQ(le64_load(q + 8 + 16 * 8), r.rip);
	CHECK_EQ(le64_load(q + 8 + 17 * 8), 0x246);
	q += 8 + 18 * 8;                                        /* cs */
	CHECK_EQ(le32_load(q), 0x10);
	CHECK_EQ(le32_load(q + 4), 0xffffffff);
	/* type 11 | S | P | L | G, as in the descriptor's second dword */
	CHECK_EQ(le32_load(q + 8), (11u << 8) | (1u << 12) | (1u << 15) | (1u << 21) | (1u << 23));
	CHECK_EQ(le64_load(q + 4 * 24 + 16), s.gs.base);        /* gs */
	CHECK_EQ(le64_load(q + 8 * 24 + 16), s.gdt.base);       /* gdt after ldt, tr */
	CHECK_EQ(le32_load(q + 8 * 24 + 4), 0x7f);
	q += 10 * 24;
	CHECK_EQ(le64_load(q), 0x80050033);                     /* cr0 */
	CHECK_EQ(le64_load(q + 3 * 8), 0x2a0c000);              /* cr3 */
	CHECK_EQ(le64_load(q + 4 * 8), 0x3706f0);               /* cr4 */
	CHECK_EQ(le64_load(q + 5 * 8), 0xabc);                  /* KernelGSBase */
	/* Too small a buffer: nothing. */
	CHECK_EQ(x86_coredump_notes(buf, 500, 0, &r, &s, 0), 0);
}
