/* A guest that is a hypervisor itself, for system/snapshot_nested: booted
 * by mvm through the PVH entry (32-bit protected mode, paging off,
 * interrupts off), it turns paging and AMD SVM on and runs a guest of its own (the
 * nested guest) with VMRUN. The nested guest counts in memory until the
 * TSC has moved on by DELTA ticks (about 10 s), then halts, which this
 * hypervisor intercepts: it reports the exit code and the count on the
 * serial port and ends the VM through mvm's exit port, 0 where the
 * nested guest ended in the intercepted HLT.
 *
 * A snapshot taken while the nested guest counts holds the vCPU in guest
 * mode: a restore that loses the nested state goes on in the nested
 * guest's code as if it were this hypervisor, whose HLT nobody
 * intercepts, and never reports. AMD APM vol. 2, 15.5 (VMRUN), 15.9
 * (intercepts), appendix B (the VMCB's layout).
 *
 * Lines it prints: "svm-nest: start", "svm-nest: no svm" (the CPU mvm
 * gives has none: exit 77), "svm-nest: running the nested guest",
 * "svm-nest: exit 0x<code> count 0x<count>". */
#define COM1      0x3f8
#define EXIT_PORT 0x501

#define MSR_EFER     0xc0000080
#define EFER_SVME    (1 << 12)
#define MSR_HSAVE_PA 0xc0010117

/* Guest-physical pages above the image (loaded at 1 MiB). */
#define HSAVE   0x200000
#define VMCB    0x201000
#define IOPM    0x202000        /* 12 KiB, all zero: no port intercepted */
#define MSRPM   0x205000        /* 8 KiB, all zero: no MSR intercepted */
#define NSTACK  0x208000        /* the nested guest's stack, growing down */
#define COUNTER 0x208000
#define STACK   0x1ff000
#define IDT     0x1ff000        /* 32 gates, above the stack */
#define PGDIR   0x209000        /* 32-bit paging's page directory (zero-filled: RAM is) */

/* The VMCB's control area and save area (APM vol. 2, tables B-1, B-2). */
#define VMCB_INTERCEPT_MISC1 0x00c
#define VMCB_INTERCEPT_MISC2 0x010
#define VMCB_IOPM_BASE       0x040
#define VMCB_MSRPM_BASE      0x048
#define VMCB_ASID            0x058
#define VMCB_EXITCODE        0x070
#define VMCB_ES              0x400
#define VMCB_CS              0x410
#define VMCB_SS              0x420
#define VMCB_DS              0x430
#define VMCB_CPL             0x4cb
#define VMCB_EFER            0x4d0
#define VMCB_CR4             0x548
#define VMCB_CR3             0x550
#define VMCB_CR0             0x558
#define VMCB_DR7             0x560
#define VMCB_DR6             0x568
#define VMCB_RFLAGS          0x570
#define VMCB_RIP             0x578
#define VMCB_RSP             0x5d8
#define VMCB_RAX             0x5f8
#define VMCB_GPAT            0x668

#define INTERCEPT_HLT      (1 << 24)
#define INTERCEPT_SHUTDOWN (1 << 31)
#define INTERCEPT_VMRUN    (1 << 0)

/* About 10 s of a 2-3 GHz TSC: long enough to be snapshotted mid-count. */
#define DELTA_HI 6

	.section .note.pvh, "a", @note
	.balign 4
	.long 4                 /* namesz: "Xen\0" */
	.long 4                 /* descsz */
	.long 18                /* XEN_ELFNOTE_PHYS32_ENTRY */
	.asciz "Xen"
	.long _start

/* A segment of the nested guest's: selector, attributes (type, S, DPL,
 * P, AVL, L, D/B, G), a 4 GiB limit, base 0. */
.macro SEG off, sel, attr
	movw $\sel, VMCB + \off
	movw $\attr, VMCB + \off + 2
	movl $0xffffffff, VMCB + \off + 4
.endm

	.text
	.code32
	.globl _start
_start:
	cli
	mov $STACK, %esp
	mov $msg_start, %esi
	call puts
	call idt_setup
	mov $0x80000001, %eax
	cpuid
	test $(1 << 2), %ecx    /* SVM */
	jnz 1f
	mov $msg_nosvm, %esi
	call puts
	mov $77, %al
	mov $EXIT_PORT, %dx
	outb %al, %dx
	hlt
1:
	/* Paging on, as KVM wants of a guest that uses SVM's instructions
	 * (nested_svm_check_permissions): the first 8 MiB identity-mapped in
	 * two 4 MiB pages. */
	movl $0x000083, PGDIR           /* present, writable, 4 MiB */
	movl $0x400083, PGDIR + 4
	mov %cr4, %eax
	or $(1 << 4), %eax              /* PSE */
	mov %eax, %cr4
	mov $PGDIR, %eax
	mov %eax, %cr3
	mov %cr0, %eax
	or $(1 << 31), %eax             /* PG */
	mov %eax, %cr0
	mov $MSR_EFER, %ecx
	rdmsr
	or $EFER_SVME, %eax
	wrmsr
	mov $MSR_HSAVE_PA, %ecx
	mov $HSAVE, %eax
	xor %edx, %edx
	wrmsr

	/* The VMCB, the bitmaps and the counter zeroed. */
	mov $VMCB, %edi
	mov $((NSTACK + 4096 - VMCB) / 4), %ecx
	xor %eax, %eax
	cld
	rep stosl

	movl $(INTERCEPT_HLT | INTERCEPT_SHUTDOWN), VMCB + VMCB_INTERCEPT_MISC1
	movl $INTERCEPT_VMRUN, VMCB + VMCB_INTERCEPT_MISC2
	movl $IOPM, VMCB + VMCB_IOPM_BASE
	movl $MSRPM, VMCB + VMCB_MSRPM_BASE
	movl $1, VMCB + VMCB_ASID

	/* The nested guest: flat 32-bit protected mode, paging off, on
	 * this guest's physical memory (no nested paging). A segment is
	 * selector (16 bits), attributes (16: type, S, DPL, P, AVL, L,
	 * D/B, G), limit (32), base (64). */
	SEG VMCB_CS, 0x08, 0xc9b       /* code: execute/read, accessed */
	SEG VMCB_DS, 0x10, 0xc93       /* data: read/write, accessed */
	SEG VMCB_ES, 0x10, 0xc93
	SEG VMCB_SS, 0x10, 0xc93
	movb $0, VMCB + VMCB_CPL
	movl $EFER_SVME, VMCB + VMCB_EFER
	movl $0x11, VMCB + VMCB_CR0     /* PE, ET */
	movl $0x400, VMCB + VMCB_DR7
	movl $0xffff0ff0, VMCB + VMCB_DR6
	movl $0x2, VMCB + VMCB_RFLAGS
	movl $nested_guest, VMCB + VMCB_RIP
	movl $(NSTACK - 16), VMCB + VMCB_RSP
	movl $0x00070406, VMCB + VMCB_GPAT
	movl $0x00070406, VMCB + VMCB_GPAT + 4

	mov $msg_run, %esi
	call puts
	mov $VMCB, %eax
	vmrun
	/* #VMEXIT: this hypervisor's state is back (APM 15.6). */
	mov $msg_exit, %esi
	call puts
	mov VMCB + VMCB_EXITCODE, %eax
	call puthex
	mov $msg_count, %esi
	call puts
	mov COUNTER, %eax
	call puthex
	mov $'\n', %al
	call putc
	xor %al, %al
	cmpl $0x78, VMCB + VMCB_EXITCODE        /* VMEXIT_HLT */
	je 3f
	mov $1, %al
3:	mov $EXIT_PORT, %dx
	outb %al, %dx
	hlt

/* The nested guest: counts until the TSC passes its start + DELTA_HI << 32. */
nested_guest:
	rdtsc
	mov %eax, %esi
	lea DELTA_HI(%edx), %edi
4:	incl COUNTER
	rdtsc
	cmp %edi, %edx
	jb 4b
	ja 5f
	cmp %esi, %eax
	jb 4b
5:	hlt
	jmp 5b

/* Exceptions of this hypervisor (not of its nested guest, which
 * exits on its own): each of the first 32 vectors is reported, and the VM
 * ends with status 2, rather than a triple fault that says nothing. */
idt_setup:
	mov %cs, %ax
	shl $16, %eax
	mov $IDT, %edi
	mov $exc_stubs, %edx
	mov $32, %ecx
8:	mov %edx, %ebx
	and $0xffff, %ebx
	or %eax, %ebx           /* selector, offset 15:0 */
	mov %ebx, (%edi)
	mov %edx, %ebx
	and $0xffff0000, %ebx
	or $0x8e00, %ebx        /* present, DPL 0, 32-bit interrupt gate */
	mov %ebx, 4(%edi)
	add $8, %edi
	add $16, %edx
	loop 8b
	lidt idt_desc
	ret

	.balign 16
exc_stubs:
	.irp v, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
	.balign 16
	push $\v
	jmp exc_common
	.endr
exc_common:
	mov $msg_exc, %esi
	call puts
	pop %eax
	call puthex
	mov $msg_at, %esi
	call puts
	mov (%esp), %eax        /* the EIP, or the error code where there is one */
	call puthex
	mov $'\n', %al
	call putc
	mov $2, %al
	mov $EXIT_PORT, %dx
	outb %al, %dx
	hlt

putc:
	push %edx
	mov $COM1, %dx
	outb %al, %dx
	pop %edx
	ret

/* The NUL-terminated string at %esi. */
puts:
	lodsb
	test %al, %al
	jz 6f
	call putc
	jmp puts
6:	ret

/* %eax as 8 hex digits. */
puthex:
	mov %eax, %ebx
	mov $8, %ecx
7:	rol $4, %ebx
	mov %ebx, %eax
	and $0xf, %eax
	movb hexdigits(%eax), %al
	call putc
	loop 7b
	ret

	.section .rodata
hexdigits:	.ascii "0123456789abcdef"
msg_start:	.asciz "svm-nest: start\n"
msg_nosvm:	.asciz "svm-nest: no svm\n"
msg_run:	.asciz "svm-nest: running the nested guest\n"
msg_exit:	.asciz "svm-nest: exit 0x"
msg_count:	.asciz " count 0x"
msg_exc:	.asciz "svm-nest: exception 0x"
msg_at:		.asciz " at 0x"
	.balign 8
idt_desc:	.word 32 * 8 - 1
		.long IDT
