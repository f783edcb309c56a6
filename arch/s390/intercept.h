/* s390 instruction intercepts (KVM_EXIT_S390_SIEIC): decoding the
 * intercepted instruction's operands from ipa/ipb and the vCPU's
 * registers, and what an instruction's end does to the PSW (condition
 * code). Pure functions on the register values, for unit tests. */
#ifndef MVM_S390_INTERCEPT_H
#define MVM_S390_INTERCEPT_H

#include <stdbool.h>
#include <stdint.h>

/* KVM's intercept codes (arch/s390/kvm/kvm-s390.h, ICPT_*). */
#define S390_ICPT_INST   0x04
#define S390_ICPT_PROGI  0x08
#define S390_ICPT_WAIT   0x1c
#define S390_ICPT_STOP   0x28

/* PSW mask bits (bit 0 = the most significant). */
#define S390_PSW_MASK_PSTATE  (1ULL << (63 - 15))   /* problem state */
#define S390_PSW_MASK_EA      (1ULL << (63 - 31))
#define S390_PSW_MASK_BA      (1ULL << (63 - 32))
#define S390_PSW_MASK_IO      (1ULL << (63 - 6))
#define S390_PSW_MASK_EXT     (1ULL << (63 - 7))
#define S390_PSW_MASK_MCHECK  (1ULL << (63 - 13))
#define S390_PSW_MASK_WAIT    (1ULL << (63 - 14))
#define S390_PSW_CC_SHIFT     (63 - 19)

/* Program interruption codes. */
#define S390_PGM_OPERATION     0x0001
#define S390_PGM_PRIVILEGED    0x0002
#define S390_PGM_ADDRESSING    0x0005
#define S390_PGM_SPECIFICATION 0x0006
#define S390_PGM_OPERAND       0x0015

/* Instruction operands are logical addresses (translated by the guest's
 * DAT when it is on: Linux passes stack buffers, which may be vmalloc'ed).
 * The accessor reads or writes len bytes there as the intercepted CPU
 * would: 0, S390_ACCESS_INJECTED when the access raised a program
 * exception that was delivered to the guest (the instruction is then
 * over), or -errno when the host failed. ar: the access register (B2). */
#define S390_ACCESS_INJECTED 1
struct s390_vmem {
	int (*read)(void *opaque, uint64_t addr, unsigned ar, void *buf, uint32_t len);
	int (*write)(void *opaque, uint64_t addr, unsigned ar, const void *buf, uint32_t len);
	void *opaque;
};

/* B2 of an S or RS instruction's second operand, D2(B2) in ipb. */
static inline unsigned s390_ipb_b2(uint32_t ipb) { return ipb >> 28; }
/* That operand's address: base = the value of GPR B2 (0 when B2 is 0),
 * plus D2, wrapped to the PSW's addressing mode. */
uint64_t s390_ipb_addr(uint64_t base, uint32_t ipb, uint64_t psw_mask);
/* R1 and R2 of an RRE instruction (ipb bits 8-15). */
static inline unsigned s390_rre_r1(uint32_t ipb) { return (ipb >> 20) & 0xf; }
static inline unsigned s390_rre_r2(uint32_t ipb) { return (ipb >> 16) & 0xf; }
/* R1 and R3 of an RS instruction (DIAG, SIGP: ipa's low byte). */
static inline unsigned s390_rs_r1(uint16_t ipa) { return (ipa >> 4) & 0xf; }
static inline unsigned s390_rs_r3(uint16_t ipa) { return ipa & 0xf; }
/* The PSW mask with condition code cc (0-3). */
static inline uint64_t s390_psw_set_cc(uint64_t mask, unsigned cc)
{
	return (mask & ~(3ULL << S390_PSW_CC_SHIFT)) | ((uint64_t)(cc & 3) << S390_PSW_CC_SHIFT);
}
/* A wait PSW with I/O, external and machine-check interrupts all off:
 * the CPU can never run again (Linux's disabled_wait() after a crash). */
static inline bool s390_psw_disabled_wait(uint64_t mask)
{
	return (mask & S390_PSW_MASK_WAIT) &&
	       !(mask & (S390_PSW_MASK_IO | S390_PSW_MASK_EXT | S390_PSW_MASK_MCHECK));
}

#endif
