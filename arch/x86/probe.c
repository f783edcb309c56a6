#include "arch/x86/probe.h"
#include "arch/x86/x86.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

extern const uint8_t x86_probe_payload[], x86_probe_payload_end[];

/* Index = step number; optional steps carry the short name used in
 * x86_probe_tested(). */
static const struct {
	const char *what;
	const char *tag;
} x86_probe_steps[X86_PROBE_STEPS] = {
	[1] = { "64-bit code with paging", NULL },
	[2] = { "REP MOVSB/CMPSB on guest-written memory", NULL },
	[3] = { "CPUID", NULL },
	[4] = { "LOCK CMPXCHG16B", "cx16" },
	[5] = { "SSE, XSAVE/XRSTOR", "xsave" },
	[6] = { "BMI2 SHLX (VEX)", "bmi2" },
};

int x86_probe_load(struct guest_mem *gm, struct x86_boot_info *info)
{
	size_t len = (size_t)(x86_probe_payload_end - x86_probe_payload);
	uint8_t *code = gmem_ptr(gm, X86_PROBE_LOAD, len);
	uint8_t *data = gmem_ptr(gm, X86_PROBE_DATA, 0x2000);
	int ret;

	if (!code || !data)
		return -EFAULT;
	ret = x86_gdt_write(gm);
	if (!ret)
		ret = x86_pagetables_write(gm);
	if (ret)
		return ret;
	memcpy(code, x86_probe_payload, len);
	memset(data, 0, 0x2000);
	*info = (struct x86_boot_info){ .pvh = false, .entry = X86_PROBE_LOAD, .params = 0 };
	return 0;
}

const char *x86_probe_step_name(unsigned step)
{
	if (step >= X86_PROBE_STEPS || !x86_probe_steps[step].what)
		return "?";
	return x86_probe_steps[step].what;
}

void x86_probe_tested(const struct guest_mem *gm, char *out, size_t outlen)
{
	const uint8_t *p = gmem_ptr(gm, X86_PROBE_DATA + 4, 4);
	uint32_t mask = p ? le32_load(p) : 0;
	size_t off = 0;
	unsigned i;

	out[0] = '\0';
	for (i = 1; i < X86_PROBE_STEPS && off < outlen; i++) {
		if (x86_probe_steps[i].tag && (mask & (1u << i)))
			off += snprintf(out + off, outlen - off, "%s%s", off ? " " : "",
					x86_probe_steps[i].tag);
	}
	if (!off)
		snprintf(out, outlen, "none of cx16 xsave bmi2 offered");
}

uint64_t x86_probe_hash(void)
{
	const uint8_t *p;
	uint64_t h = 0xcbf29ce484222325ULL;    /* FNV-1a */

	for (p = x86_probe_payload; p < x86_probe_payload_end; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	return h;
}
