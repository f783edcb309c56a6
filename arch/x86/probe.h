/* The KVM probe's x86 side: its guest payload (probe_payload.S) and how to lay it
 * out in guest RAM. vmm/kvm/kvm_probe.c runs it. */
#ifndef MVM_X86_PROBE_H
#define MVM_X86_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "arch/x86/boot.h"
#include "vmm/base/guest_mem.h"

/* Keep in step with probe_payload.S. */
#define X86_PROBE_LOAD   0x100000ULL   /* code */
#define X86_PROBE_DATA   0x110000ULL   /* scratch and results */
#define X86_PROBE_PORT   0x510         /* step reports: outb N */
#define X86_PROBE_MEM    (16ULL << 20) /* guest RAM of the probe VM */
#define X86_PROBE_WRONG  0x80          /* | step: that step's result was wrong */
#define X86_PROBE_DONE   0xff
#define X86_PROBE_STEPS  7             /* steps are 1..6 */

/* Write the GDT, the identity page tables and the payload into gm (at
 * least X86_PROBE_MEM of RAM from 0) and fill *info for a 64-bit entry
 * (x86_bsp_regs). 0 or -EFAULT. */
int x86_probe_load(struct guest_mem *gm, struct x86_boot_info *info);

/* What step N checks, in words ("BMI2 SHLX (VEX)"); "?" when unknown. */
const char *x86_probe_step_name(unsigned step);

/* After X86_PROBE_DONE: the optional steps the payload ran (the others
 * were not offered by the guest's CPUID), as "cx16 xsave bmi2". */
void x86_probe_tested(const struct guest_mem *gm, char *out, size_t outlen);

struct vcpu;
/* arch_vcpu_init for a boot described by info (the probe's, or a kernel's). */
int x86_arch_vcpu_init(struct vcpu *v, unsigned ncpus, const struct x86_boot_info *info,
		       char *err, size_t errlen);

/* A hash of the payload's bytes: part of the key a cached verdict is
 * stored under, so a changed probe probes again. */
uint64_t x86_probe_hash(void);

#endif
