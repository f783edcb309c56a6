/* The channel subsystem's instructions: see css.h. */
#include "arch/s390/css.h"
#include "arch/s390/intercept.h"
#include "vmm/byteorder.h"

#include <string.h>

int css_schid_valid(uint32_t gpr1)
{
	/* 0x0001ssss: bit 15 ("one") set, bits 0-14 zero (no M bit, set 0). */
	return (gpr1 >> 16) == 0x0001;
}

/* CHSC: the request block (page aligned) starts with its length and
 * command code; the response follows it. No command is implemented: each
 * gets "not supported", which Linux handles (it then scans with STSCH). */
static int access_result(int r)
{
	return r == S390_ACCESS_INJECTED ? CSS_INJECTED : CSS_HOST_ERROR;
}

static int chsc(const struct s390_vmem *vm, uint64_t addr, unsigned ar)
{
	uint8_t hdr[4], resp[8];
	unsigned len;
	int r;

	if (addr & 0xfff)
		return -S390_PGM_SPECIFICATION;
	r = vm->read(vm->opaque, addr, ar, hdr, sizeof(hdr));
	if (r)
		return access_result(r);
	len = be16_load(hdr);
	if (len < 16 || len > 4096 - 8 || len % 8)
		return -S390_PGM_OPERAND;
	be16_store(resp, 8);                        /* response length */
	be16_store(resp + 2, CHSC_RC_NOT_SUPPORTED);
	memset(resp + 4, 0, 4);
	r = vm->write(vm->opaque, addr + len, ar, resp, sizeof(resp));
	return r ? access_result(r) : 0;
}

int css_instruction(const struct s390_vmem *vm, unsigned op, uint32_t gpr1,
		    uint64_t addr, unsigned ar)
{
	static const uint8_t no_crw[4];
	int r;

	switch (op) {
	case CSS_OP_STSCH:      /* SCHIB: 52 bytes, word aligned */
	case CSS_OP_MSCH:
	case CSS_OP_SSCH:       /* ORB */
	case CSS_OP_TSCH:       /* IRB */
		if (addr & 3)
			return -S390_PGM_SPECIFICATION;
		/* fall through */
	case CSS_OP_CSCH:
	case CSS_OP_HSCH:
	case CSS_OP_RSCH:
	case CSS_OP_XSCH:
		if (!css_schid_valid(gpr1))
			return -S390_PGM_OPERAND;
		return 3;               /* no device there: not operational */
	case CSS_OP_STCRW:
		/* No channel report is ever pending: store zeros, cc 1. */
		if (addr & 3)
			return -S390_PGM_SPECIFICATION;
		r = vm->write(vm->opaque, addr, ar, no_crw, sizeof(no_crw));
		return r ? access_result(r) : 1;
	case CSS_OP_CHSC:
		return chsc(vm, addr, ar);
	case CSS_OP_SCHM:
		/* Channel measurement: nothing is measured; bit 0-26 of GPR1
		 * must be zero apart from the mode bits. */
		if (gpr1 & 0xfffffffc)
			return -S390_PGM_OPERAND;
		return 0;
	case CSS_OP_SAL:
		return 0;               /* one address limit for all: none */
	default:                        /* TPI is KVM's; STCPS, RCHP: absent */
		return -S390_PGM_OPERATION;
	}
}
