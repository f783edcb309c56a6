/* The s390 channel subsystem as the guest's I/O instructions see it (z/Arch
 * Principles of Operation, ch. 14-16). KVM (with KVM_CAP_S390_CSS_SUPPORT)
 * hands every I/O instruction but TPI to user space; css_instruction()
 * answers it: operand checks first (a bad subchannel id is an operand
 * exception, a misaligned operand a specification exception), then the
 * condition code. A subchannel id no device uses is "not operational"
 * (cc 3); Linux stops scanning a subchannel set at the first such id.
 * No device model sits on a subchannel yet (virtio-ccw comes next), so
 * every id is not operational. KVM-free, for unit tests. */
#ifndef MVM_S390_CSS_H
#define MVM_S390_CSS_H

#include <stdint.h>

#include "arch/s390/intercept.h"

/* The second byte of the B2xx opcodes. */
#define CSS_OP_CSCH  0x30
#define CSS_OP_HSCH  0x31
#define CSS_OP_MSCH  0x32
#define CSS_OP_SSCH  0x33
#define CSS_OP_STSCH 0x34
#define CSS_OP_TSCH  0x35
#define CSS_OP_TPI   0x36
#define CSS_OP_SAL   0x37
#define CSS_OP_RSCH  0x38
#define CSS_OP_STCRW 0x39
#define CSS_OP_STCPS 0x3a
#define CSS_OP_RCHP  0x3b
#define CSS_OP_SCHM  0x3c
#define CSS_OP_CHSC  0x5f
#define CSS_OP_XSCH  0x76

/* CHSC response codes. */
#define CHSC_RC_OK            0x0001
#define CHSC_RC_INVALID_REQ   0x0003
#define CHSC_RC_NOT_SUPPORTED 0x0004

/* What an I/O instruction ends with besides a cc or -program code. */
#define CSS_INJECTED   (-1000)  /* an operand access raised an exception, delivered */
#define CSS_HOST_ERROR (-1001)  /* the host could not reach guest memory */

/* Is gpr1 a valid subchannel-id word (bit 15 one, no multiple-subchannel-
 * set extension: subchannel set 0 only)? */
int css_schid_valid(uint32_t gpr1);

/* The guest executed I/O instruction 0xb2<op> (or 0xb276 XSCH) with
 * general register 1 = gpr1 and second-operand address addr in access
 * register ar (for CHSC: the request block's address, from R1), operands
 * reached through vm. Returns the condition code, -code for a program
 * exception to deliver (the instruction is suppressed), CSS_INJECTED or
 * CSS_HOST_ERROR. */
int css_instruction(const struct s390_vmem *vm, unsigned op, uint32_t gpr1,
		    uint64_t addr, unsigned ar);

#endif
