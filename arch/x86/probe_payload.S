/* The KVM probe's guest payload (arch/x86/probe.c, vmm/kvm/kvm_probe.c).
 *
 * It answers "can this /dev/kvm run a Linux guest?" by doing, in a few
 * microseconds, what Linux does in its first second and what a KVM without
 * hardware virtualization (PVM) fails on: 64-bit code with paging on, string
 * instructions on memory the guest wrote, CPUID, LOCK CMPXCHG16B, SSE,
 * XSAVE/XRSTOR and BMI2's SHLX (VEX-encoded, as in the decompressor's
 * zstd), each only where the CPUID mvm gives the guest offers it.
 *
 * No AVX (ymm) step: under a nested KVM (QEMU TCG emulating SVM, our own
 * test harness) XCR0 falls back to x87-only after an exit to L1, so an
 * AVX instruction raises #UD there although Linux runs fine (it notices,
 * warns "XSAVE consistency problem" and leaves AVX off). SHLX is VEX too
 * and needs no XCR0 state.
 *
 * Protocol with the host: before step N the payload writes the byte N to
 * X86_PROBE_PORT; a wrong result writes 0x80|N and stops; after the last
 * step it stores the mask of the optional steps it ran at
 * X86_PROBE_DATA + 4 and writes 0xff. The host stops at 0x80|N, 0xff, or
 * any exit it does not expect (KVM_EXIT_INTERNAL_ERROR, ...).
 *
 * Entered like a 64-bit boot-protocol kernel (x86_bsp_regs): long mode,
 * identity-mapped 4 GiB, flat segments, interrupts off. Code is loaded at
 * X86_PROBE_LOAD, so data is addressed absolutely; both are in the first
 * 2 MiB page of the identity map. Keep these numbers in step with probe.h.
 */
#define PORT 0x510
#define DATA 0x110000

#define STEP_LONG_MODE 1
#define STEP_MEMORY    2
#define STEP_CPUID     3
#define STEP_CX16      4
#define STEP_XSAVE     5
#define STEP_BMI2      6
#define STEP_DONE      0xff

	.section .rodata.x86_probe, "a"
	.globl x86_probe_payload, x86_probe_payload_end
	.code64
x86_probe_payload:
	.macro step n
	movb $\n, %al
	movw $PORT, %dx
	outb %al, %dx
	.endm
	.macro wrong n
	movb $(0x80 | \n), %al
	jmp report_and_stop
	.endm

	step STEP_LONG_MODE
	xorl %r11d, %r11d             /* optional steps run, one bit each */

	/* Memory: a pattern written byte by byte, copied with REP MOVSB and
	 * compared with REPE CMPSB (emulators get string ops wrong first). */
	step STEP_MEMORY
	movl $(DATA + 0x100), %edi
	xorl %eax, %eax
1:	movb %al, (%rdi)
	incq %rdi
	incl %eax
	cmpl $256, %eax
	jne 1b
	cld
	movl $(DATA + 0x100), %esi
	movl $(DATA + 0x200), %edi
	movl $256, %ecx
	rep movsb
	movl $(DATA + 0x100), %esi
	movl $(DATA + 0x200), %edi
	movl $256, %ecx
	repe cmpsb
	je 2f
	wrong STEP_MEMORY
2:
	step STEP_CPUID
	movl $1, %eax
	xorl %ecx, %ecx
	cpuid
	movl %ecx, %r8d               /* leaf 1 ECX: CX16 13, XSAVE 26, AVX 28 */
	xorl %r9d, %r9d
	xorl %eax, %eax
	cpuid
	cmpl $7, %eax
	jb 3f
	movl $7, %eax
	xorl %ecx, %ecx
	cpuid
	movl %ebx, %r9d               /* leaf 7 EBX: BMI2 8 */
3:
	step STEP_CX16
	btl $13, %r8d
	jnc 4f
	orl $(1 << STEP_CX16), %r11d
	movq $0x1111, %rax
	movq %rax, (DATA + 0x300)
	movq $0x2222, %rdx
	movq %rdx, (DATA + 0x308)
	movq $0x3333, %rbx
	movq $0x4444, %rcx
	lock cmpxchg16b (DATA + 0x300)
	jnz 40f
	cmpq $0x3333, (DATA + 0x300)
	jne 40f
	cmpq $0x4444, (DATA + 0x308)
	je 4f
40:	wrong STEP_CX16
4:
	/* SSE on (CR0.MP set, EM clear; CR4.OSFXSR|OSXMMEXCPT) and checked
	 * with PADDD; then XSAVE/XRSTOR of that state. Their round trip is
	 * not compared: under a nested KVM (QEMU TCG emulating SVM, our own
	 * test harness) XCR0 reads back as set right after XSETBV but falls
	 * back to x87-only after the next exit to L1, so XSAVE skips the SSE
	 * state. Linux survives that ("XSAVE consistency problem", then
	 * FXSAVE); what it cannot survive, and what PVM does, is a KVM that
	 * fails to execute the instructions at all. */
	step STEP_XSAVE
	movq %cr0, %rax
	andq $~(1 << 2), %rax
	orq $(1 << 1), %rax
	movq %rax, %cr0
	movq %cr4, %rax
	orq $(3 << 9), %rax
	movq %rax, %cr4
	movq $0x0123456789abcdef, %rax
	movq %rax, (DATA + 0x400)
	movq $0x0fedcba987654321, %rax
	movq %rax, (DATA + 0x408)
	movq $0x1122334455667788, %rax
	movq %rax, (DATA + 0x410)
	movq $0x99aabbccddeeff00, %rax
	movq %rax, (DATA + 0x418)
	movdqu (DATA + 0x400), %xmm0
	paddd %xmm0, %xmm0
	movdqu %xmm0, (DATA + 0x420)
	movl (DATA + 0x40c), %eax
	addl %eax, %eax
	cmpl (DATA + 0x42c), %eax
	je 52f
	wrong STEP_XSAVE
52:	btl $26, %r8d
	jnc 5f
	orl $(1 << STEP_XSAVE), %r11d
	movq %cr4, %rax
	orq $(1 << 18), %rax          /* OSXSAVE */
	movq %rax, %cr4
	movl $3, %eax                 /* XCR0 = x87 | SSE */
	xorl %edx, %edx
	xorl %ecx, %ecx
	xsetbv
	movl $(DATA + 0x1000), %edi   /* 4 KiB save area, 64-byte aligned */
	movl $4096, %ecx
	xorl %eax, %eax
	rep stosb
	movl $-1, %eax
	movl $-1, %edx
	xsave (DATA + 0x1000)
	movl $-1, %eax
	movl $-1, %edx
	xrstor (DATA + 0x1000)
5:
	step STEP_BMI2
	btl $8, %r9d
	jnc 7f
	orl $(1 << STEP_BMI2), %r11d
	movl $5, %ecx
	movl $1, %eax
	shlxl %ecx, %eax, %edx        /* register form: 1 << 5 */
	cmpl $32, %edx
	jne 70f
	movl $3, (DATA + 0x480)
	shlxl %ecx, (DATA + 0x480), %edx   /* memory source: 3 << 5 */
	cmpl $96, %edx
	je 7f
70:	wrong STEP_BMI2
7:
	movl %r11d, (DATA + 4)
	movb $STEP_DONE, %al
report_and_stop:
	movw $PORT, %dx
	outb %al, %dx
8:	hlt
	jmp 8b
x86_probe_payload_end:
	.section .note.GNU-stack, "", @progbits
