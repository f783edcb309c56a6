/* MP configuration table (Intel MultiProcessor Specification 1.4, ch. 4):
 * how a guest without ACPI learns its CPUs, its IOAPIC and which IOAPIC pin
 * every interrupt source is wired to.
 *
 * The floating pointer sits at X86_MPTABLE_ADDR (the last KiB of base
 * memory, one of the places Linux scans); the configuration table follows
 * it and may extend past 0xa0000 for many vCPUs (it is addressed by
 * pointer, and e820 reserves [0x9fc00, 1 MiB)).
 *
 * Interrupt wiring matches KVM's default GSI routing (GSI n -> IOAPIC pin n,
 * including the in-kernel PIT on GSI 0 -> pin 0), so ISA IRQs and pins map
 * 1:1. Pins 16-19 are edge/active-high lines for virtio-mmio devices; pins
 * 20-23 carry PCI INTx (bus 0 device d INTA# -> pin 20 + d % 4, level,
 * active low). The PCI bus has MP bus id 0 because Linux looks PCI IRQs up
 * by MP bus id == PCI bus number; ISA is bus 1. */
#include "arch/x86/x86.h"
#include "arch/x86/layout.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <string.h>

#define MP_FP_SIZE       16
#define MP_HDR_SIZE      44
#define MP_PROC_SIZE     20
#define MP_ENTRY_SIZE    8     /* bus, IOAPIC, I/O and local interrupt entries */

#define MP_ENT_PROC      0
#define MP_ENT_BUS       1
#define MP_ENT_IOAPIC    2
#define MP_ENT_IOINT     3
#define MP_ENT_LINT      4

#define MP_INT_INT       0
#define MP_INT_NMI       1
#define MP_INT_EXTINT    3

/* I/O interrupt flags: polarity in bits 0-1, trigger mode in bits 2-3. */
#define MP_IRQ_CONFORM   0x0
#define MP_IRQ_EDGE_HIGH 0x5   /* active high (01), edge (01) */
#define MP_IRQ_LEVEL_LOW 0xf   /* active low (11), level (11) */

#define MP_LAPIC_VERSION  0x14
#define MP_IOAPIC_VERSION 0x11
#define MP_ISA_IRQS      16
#define MP_EDGE_PINS_END 20    /* pins 16..19 */
#define MP_PCI_SLOTS     32

static unsigned mp_nioints(void)
{
	return MP_EDGE_PINS_END + MP_PCI_SLOTS;
}

size_t x86_mptable_size(unsigned ncpus)
{
	/* 2 buses + 1 IOAPIC + I/O interrupts + 2 local interrupts */
	return MP_FP_SIZE + MP_HDR_SIZE + (size_t)ncpus * MP_PROC_SIZE +
	       (3 + mp_nioints() + 2) * MP_ENTRY_SIZE;
}

static uint8_t mp_checksum(const uint8_t *p, size_t len)
{
	uint8_t sum = 0;

	while (len--)
		sum += *p++;
	return (uint8_t)-sum;
}

static uint8_t *mp_ioint(uint8_t *p, uint8_t type, uint16_t flags, uint8_t bus,
			 uint8_t busirq, uint8_t ioapic, uint8_t pin)
{
	p[0] = MP_ENT_IOINT;
	p[1] = type;
	le16_store(p + 2, flags);
	p[4] = bus;
	p[5] = busirq;
	p[6] = ioapic;
	p[7] = pin;
	return p + MP_ENTRY_SIZE;
}

static uint8_t *mp_lint(uint8_t *p, uint8_t type, uint8_t lint)
{
	p[0] = MP_ENT_LINT;
	p[1] = type;
	le16_store(p + 2, MP_IRQ_CONFORM);
	p[4] = X86_MP_BUS_ISA;
	p[5] = 0;
	p[6] = 0xff;          /* all local APICs */
	p[7] = lint;
	return p + MP_ENTRY_SIZE;
}

static uint8_t *mp_bus(uint8_t *p, uint8_t id, const char type[6])
{
	p[0] = MP_ENT_BUS;
	p[1] = id;
	memcpy(p + 2, type, 6);
	return p + MP_ENTRY_SIZE;
}

int x86_mptable_write(struct guest_mem *gm, unsigned ncpus)
{
	size_t size = x86_mptable_size(ncpus);
	uint8_t ioapic_id = (uint8_t)ncpus;
	uint8_t *fp, *hdr, *p;
	unsigned i, nentries;

	if (ncpus == 0 || ncpus > X86_MAX_VCPUS)
		return -EINVAL;
	fp = gmem_ptr(gm, X86_MPTABLE_ADDR, size);
	if (!fp || X86_MPTABLE_ADDR + size > X86_HIMEM_START)
		return -EFAULT;
	memset(fp, 0, size);
	hdr = fp + MP_FP_SIZE;

	/* Floating pointer structure (4.1). */
	memcpy(fp, "_MP_", 4);
	le32_store(fp + 4, X86_MPTABLE_ADDR + MP_FP_SIZE);
	fp[8] = 1;            /* length in 16-byte units */
	fp[9] = 4;            /* spec revision 1.4 */
	/* feature bytes 1-5 zero: a configuration table is present */

	p = hdr + MP_HDR_SIZE;
	for (i = 0; i < ncpus; i++) {
		p[0] = MP_ENT_PROC;
		p[1] = (uint8_t)i;                     /* local APIC id == vCPU id */
		p[2] = MP_LAPIC_VERSION;
		p[3] = 0x01 | (i == 0 ? 0x02 : 0);     /* enabled, BSP */
		le32_store(p + 4, 0x600);              /* family 6 signature */
		le32_store(p + 8, 0x201);              /* FPU, APIC */
		p += MP_PROC_SIZE;
	}
	p = mp_bus(p, X86_MP_BUS_PCI, "PCI   ");
	p = mp_bus(p, X86_MP_BUS_ISA, "ISA   ");

	p[0] = MP_ENT_IOAPIC;
	p[1] = ioapic_id;
	p[2] = MP_IOAPIC_VERSION;
	p[3] = 0x01;                                    /* enabled */
	le32_store(p + 4, X86_IOAPIC_ADDR);
	p += MP_ENTRY_SIZE;

	for (i = 0; i < MP_ISA_IRQS; i++)
		p = mp_ioint(p, MP_INT_INT, MP_IRQ_CONFORM, X86_MP_BUS_ISA, i, ioapic_id, i);
	for (i = MP_ISA_IRQS; i < MP_EDGE_PINS_END; i++)
		p = mp_ioint(p, MP_INT_INT, MP_IRQ_EDGE_HIGH, X86_MP_BUS_ISA, i, ioapic_id, i);
	/* PCI source bus IRQ: bits 0-1 the INTx pin (0 = INTA#), 2-6 the device. */
	for (i = 0; i < MP_PCI_SLOTS; i++)
		p = mp_ioint(p, MP_INT_INT, MP_IRQ_LEVEL_LOW, X86_MP_BUS_PCI, (uint8_t)(i << 2),
			     ioapic_id, X86_PCI_INTX_BASE + i % 4);

	p = mp_lint(p, MP_INT_EXTINT, 0);
	p = mp_lint(p, MP_INT_NMI, 1);

	/* Configuration table header (4.2). */
	nentries = ncpus + 3 + mp_nioints() + 2;
	memcpy(hdr, "PCMP", 4);
	le16_store(hdr + 4, (uint16_t)(p - hdr));      /* base table length */
	hdr[6] = 4;                                     /* spec revision 1.4 */
	memcpy(hdr + 8, "MVM     ", 8);                 /* OEM id */
	memcpy(hdr + 16, "MICROVM     ", 12);           /* product id */
	le16_store(hdr + 34, (uint16_t)nentries);
	le32_store(hdr + 36, X86_LAPIC_ADDR);
	hdr[7] = mp_checksum(hdr, (size_t)(p - hdr));
	fp[10] = mp_checksum(fp, MP_FP_SIZE);
	return 0;
}
