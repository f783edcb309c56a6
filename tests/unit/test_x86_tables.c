/* MP table, GDT and identity page tables, read back from a fake guest
 * memory the way a guest would walk them. No KVM. */
#include "tests/unit/check.h"
#include "arch/x86/x86.h"
#include "arch/x86/layout.h"
#include "arch/arch.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"

#include <errno.h>

#define LOW_SIZE (2 * MiB)

static uint8_t *low_guest(struct guest_mem *gm)
{
	uint8_t *low = calloc(1, LOW_SIZE);

	CHECK(low);
	memset(gm, 0, sizeof(*gm));
	CHECK_EQ(gmem_add_region(gm, 0, LOW_SIZE, low), 0);
	return low;
}

static uint8_t sum(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s += *p++;
	return s;
}

/* What a guest learns from the MP table. */
struct mp_view {
	unsigned nentries, nproc, nbus, nioapic, nioint, nlint;
	uint8_t apic_id[256], cpu_flags[256];
	uint8_t ioapic_id;
	uint32_t ioapic_addr, lapic_addr;
	int pci_bus, isa_bus;
	/* I/O interrupt entries: [n] = {type, flags, bus, busirq, apic, pin} */
	struct { uint8_t type; uint16_t flags; uint8_t bus, irq, apic, pin; } ioint[128];
	struct { uint8_t type, lint, dest; } lint[4];
};

/* Check both checksums and decode every entry. */
static void mp_read(const uint8_t *low, struct mp_view *v)
{
	const uint8_t *fp = low + X86_MPTABLE_ADDR, *h, *p, *end;
	unsigned i;

	memset(v, 0, sizeof(*v));
	v->pci_bus = v->isa_bus = -1;
	CHECK(memcmp(fp, "_MP_", 4) == 0);
	CHECK_EQ(fp[8], 1);
	CHECK_EQ(fp[9], 4);
	CHECK_EQ(sum(fp, 16), 0);
	CHECK_EQ(fp[11], 0);                          /* config table present */
	h = low + le32_load(fp + 4);
	CHECK(memcmp(h, "PCMP", 4) == 0);
	CHECK_EQ(h[6], 4);
	CHECK_EQ(sum(h, le16_load(h + 4)), 0);
	v->lapic_addr = le32_load(h + 36);
	v->nentries = le16_load(h + 34);
	p = h + 44;
	end = h + le16_load(h + 4);
	for (i = 0; i < v->nentries; i++) {
		CHECK(p < end);
		switch (p[0]) {
		case 0:
			v->apic_id[v->nproc] = p[1];
			v->cpu_flags[v->nproc] = p[3];
			v->nproc++;
			p += 20;
			continue;
		case 1:
			if (memcmp(p + 2, "PCI   ", 6) == 0)
				v->pci_bus = p[1];
			if (memcmp(p + 2, "ISA   ", 6) == 0)
				v->isa_bus = p[1];
			v->nbus++;
			break;
		case 2:
			v->ioapic_id = p[1];
			CHECK_EQ(p[3] & 1, 1);
			v->ioapic_addr = le32_load(p + 4);
			v->nioapic++;
			break;
		case 3:
			CHECK(v->nioint < 128);
			v->ioint[v->nioint].type = p[1];
			v->ioint[v->nioint].flags = le16_load(p + 2);
			v->ioint[v->nioint].bus = p[4];
			v->ioint[v->nioint].irq = p[5];
			v->ioint[v->nioint].apic = p[6];
			v->ioint[v->nioint].pin = p[7];
			v->nioint++;
			break;
		case 4:
			CHECK(v->nlint < 4);
			v->lint[v->nlint].type = p[1];
			v->lint[v->nlint].dest = p[6];
			v->lint[v->nlint].lint = p[7];
			v->nlint++;
			break;
		default:
			CHECK(!"unknown MP entry type");
		}
		p += 8;
	}
	CHECK(p == end);
}

static void check_cpus(unsigned ncpus)
{
	struct guest_mem gm;
	uint8_t *low = low_guest(&gm);
	struct mp_view v;
	unsigned i;

	CHECK_EQ(x86_mptable_write(&gm, ncpus), 0);
	mp_read(low, &v);
	CHECK_EQ(v.nproc, ncpus);
	for (i = 0; i < ncpus; i++) {
		CHECK_EQ(v.apic_id[i], i);
		CHECK_EQ(v.cpu_flags[i], i == 0 ? 3 : 1);   /* enabled; BSP only on 0 */
	}
	CHECK_EQ(v.ioapic_id, ncpus);
	CHECK_EQ(v.lapic_addr, X86_LAPIC_ADDR);
	CHECK(X86_MPTABLE_ADDR + x86_mptable_size(ncpus) <= X86_HIMEM_START);
	free(low);
}

TEST(mptable_1_cpu)
{
	check_cpus(1);
}

TEST(mptable_4_cpus)
{
	check_cpus(4);
}

TEST(mptable_32_cpus)
{
	check_cpus(32);
}

TEST(mptable_254_cpus_fits_below_1m)
{
	check_cpus(X86_MAX_VCPUS);
}

TEST(mptable_rejects_bad_cpu_count)
{
	struct guest_mem gm;
	uint8_t *low = low_guest(&gm);

	CHECK_EQ(x86_mptable_write(&gm, 0), -EINVAL);
	CHECK_EQ(x86_mptable_write(&gm, X86_MAX_VCPUS + 1), -EINVAL);
	free(low);
}

TEST(mptable_ioapic_and_buses)
{
	struct guest_mem gm;
	uint8_t *low = low_guest(&gm);
	struct mp_view v;

	CHECK_EQ(x86_mptable_write(&gm, 4), 0);
	mp_read(low, &v);
	CHECK_EQ(v.nioapic, 1);
	CHECK_EQ(v.ioapic_addr, X86_IOAPIC_ADDR);
	CHECK_EQ(v.nbus, 2);
	CHECK_EQ(v.pci_bus, 0);          /* MP bus id == PCI bus number */
	CHECK_EQ(v.isa_bus, X86_MP_BUS_ISA);
	free(low);
}

TEST(mptable_isa_and_virtio_pins_identity_edge)
{
	struct guest_mem gm;
	uint8_t *low = low_guest(&gm);
	struct mp_view v;
	bool seen[24] = { false };
	unsigned i;

	CHECK_EQ(x86_mptable_write(&gm, 4), 0);
	mp_read(low, &v);
	for (i = 0; i < v.nioint; i++) {
		if (v.ioint[i].bus != X86_MP_BUS_ISA)
			continue;
		CHECK_EQ(v.ioint[i].type, 0);                /* INT */
		CHECK_EQ(v.ioint[i].apic, 4);
		/* KVM's default routing: GSI n -> pin n, PIT included */
		CHECK_EQ(v.ioint[i].pin, v.ioint[i].irq);
		CHECK(v.ioint[i].pin < 20);
		if (v.ioint[i].pin >= 16)
			CHECK_EQ(v.ioint[i].flags, 0x5);     /* edge, active high */
		else
			CHECK_EQ(v.ioint[i].flags, 0);       /* ISA conforming */
		seen[v.ioint[i].pin] = true;
	}
	for (i = 0; i < 20; i++)
		CHECK(seen[i]);
	free(low);
}

TEST(mptable_pci_intx_to_pins_20_23_level_low)
{
	struct guest_mem gm;
	uint8_t *low = low_guest(&gm);
	struct mp_view v;
	unsigned i, npci = 0;

	CHECK_EQ(x86_mptable_write(&gm, 2), 0);
	mp_read(low, &v);
	for (i = 0; i < v.nioint; i++) {
		unsigned dev;

		if (v.ioint[i].bus != 0)
			continue;
		dev = v.ioint[i].irq >> 2;
		CHECK_EQ(v.ioint[i].irq & 3, 0);             /* INTA# */
		CHECK_EQ(v.ioint[i].pin, X86_PCI_INTX_BASE + dev % 4);
		CHECK_EQ(v.ioint[i].flags, 0xf);             /* level, active low */
		CHECK_EQ(v.ioint[i].apic, 2);
		npci++;
	}
	CHECK_EQ(npci, 32);
	free(low);
}

TEST(mptable_local_interrupts_extint_and_nmi)
{
	struct guest_mem gm;
	uint8_t *low = low_guest(&gm);
	struct mp_view v;

	CHECK_EQ(x86_mptable_write(&gm, 1), 0);
	mp_read(low, &v);
	CHECK_EQ(v.nlint, 2);
	CHECK_EQ(v.lint[0].type, 3);    /* ExtINT */
	CHECK_EQ(v.lint[0].lint, 0);
	CHECK_EQ(v.lint[0].dest, 0xff);
	CHECK_EQ(v.lint[1].type, 1);    /* NMI */
	CHECK_EQ(v.lint[1].lint, 1);
	free(low);
}

/* Walk PML4 -> PDPT -> PD like the MMU for a 2 MiB page. */
static uint64_t translate(const uint8_t *low, uint64_t va)
{
	uint64_t e;

	e = le64_load(low + X86_PML4_ADDR + 8 * ((va >> 39) & 511));
	CHECK(e & 1);
	e = le64_load(low + (e & ~0xfffULL) + 8 * ((va >> 30) & 511));
	CHECK(e & 1);
	CHECK(!(e & 0x80));
	e = le64_load(low + (e & ~0xfffULL) + 8 * ((va >> 21) & 511));
	CHECK(e & 1);
	CHECK(e & 2);
	CHECK(e & 0x80);                 /* 2 MiB page */
	return (e & ~0x1fffffULL) + (va & 0x1fffff);
}

TEST(pagetables_identity_map_low_4g)
{
	struct guest_mem gm;
	uint8_t *low = low_guest(&gm);
	uint64_t va;

	CHECK_EQ(x86_pagetables_write(&gm), 0);
	for (va = 0; va < 4 * GiB; va += 2 * MiB + 0x1234)
		CHECK_EQ(translate(low, va), va);
	CHECK_EQ(translate(low, 4 * GiB - 1), 4 * GiB - 1);
	CHECK_EQ(translate(low, X86_LAPIC_ADDR), X86_LAPIC_ADDR);
	/* nothing above 4 GiB */
	CHECK_EQ(le64_load(low + X86_PDPT_ADDR + 8 * 4), 0);
	CHECK_EQ(le64_load(low + X86_PML4_ADDR + 8), 0);
	free(low);
}

TEST(gdt_flat_segments)
{
	struct guest_mem gm;
	uint8_t *low = low_guest(&gm);
	uint64_t c64, c32, d, tss;

	CHECK_EQ(x86_gdt_write(&gm), 0);
	CHECK_EQ(le64_load(low + X86_GDT_ADDR), 0);
	c32 = le64_load(low + X86_GDT_ADDR + X86_SEL_CODE32);
	c64 = le64_load(low + X86_GDT_ADDR + X86_SEL_CODE64);
	d = le64_load(low + X86_GDT_ADDR + X86_SEL_DATA);
	tss = le64_load(low + X86_GDT_ADDR + X86_SEL_TSS);
	CHECK_EQ(c64, 0x00af9b000000ffffULL);   /* L=1, D=0, present, code */
	CHECK_EQ(c32, 0x00cf9b000000ffffULL);   /* D=1, 4 GiB flat */
	CHECK_EQ(d, 0x00cf93000000ffffULL);
	CHECK_EQ((tss >> 40) & 0xff, 0x8b);      /* present busy TSS */
	CHECK_EQ(x86_gdt_entry(0x12345678, 0xabcde, 0xc093), 0x12ca93345678bcdeULL);
	free(low);
}

TEST(layout_virtio_irqs_avoid_legacy_and_pci_pins)
{
	unsigned i;

	CHECK_EQ(arch_irq_pins(), X86_IOAPIC_PINS);
	CHECK(arch_layout.pci_intx_base + 3 < X86_IOAPIC_PINS);
	for (i = 0; i < arch_layout.nvirtio_irqs; i++) {
		unsigned g = arch_layout.virtio_irqs[i];

		/* 0 timer, 1 keyboard, 2 cascade, 3/4 serial, 8 rtc */
		CHECK(g != 0 && g != 1 && g != 2 && g != 3 && g != 4 && g != 8);
		CHECK(g < arch_layout.pci_intx_base);
	}
}

TEST(layout_windows_inside_the_mmio_hole)
{
	CHECK_EQ(arch_layout.ram_hole, X86_MMIO_HOLE_START);
	CHECK(arch_layout.virtio_mmio_base >= X86_MMIO_HOLE_START);
	CHECK(arch_layout.pci_mmio_base >= arch_layout.virtio_mmio_base +
	      arch_layout.virtio_mmio_max * arch_layout.virtio_mmio_size);
	CHECK(arch_layout.pci_mmio_end <= X86_IOAPIC_ADDR);
}

static bool fixed_covers(uint64_t addr, uint64_t size)
{
	for (unsigned i = 0; i < arch_layout.nfixed_mmio; i++) {
		const struct arch_range *r = &arch_layout.fixed_mmio[i];
		if (addr >= r->base && addr + size <= r->base + r->size)
			return true;
	}
	return false;
}

/* What KVM and mvm put in the MMIO hole is off limits to PCI BARs (pci.h):
 * the IOAPIC, the LAPIC and the MSI window, KVM's TSS (3 pages) and
 * identity map page, the virtio-mmio windows; never the PCI window. */
TEST(layout_fixed_ranges_cover_what_the_platform_uses)
{
	unsigned i;

	CHECK(fixed_covers(X86_IOAPIC_ADDR, 0x1000));
	CHECK(fixed_covers(X86_LAPIC_ADDR, 0x1000));
	CHECK(fixed_covers(0xfee00000, 0x100000));
	CHECK(fixed_covers(X86_KVM_TSS_ADDR, 3 * 0x1000));
	CHECK(fixed_covers(X86_KVM_IDMAP_ADDR, 0x1000));
	CHECK(fixed_covers(arch_layout.virtio_mmio_base,
			   arch_layout.virtio_mmio_max * arch_layout.virtio_mmio_size));
	for (i = 0; i < arch_layout.nfixed_mmio; i++) {
		const struct arch_range *r = &arch_layout.fixed_mmio[i];
		CHECK(r->size > 0 && r->name);
		CHECK(r->base >= arch_layout.ram_hole && r->base + r->size <= 1ULL << 32);
		CHECK(r->base + r->size <= arch_layout.pci_mmio_base ||
		      r->base >= arch_layout.pci_mmio_end);
	}
}

static const struct kvm_irq_routing_entry *find_chip_route(const struct kvm_irq_routing_entry *r,
							   unsigned n, unsigned gsi, unsigned chip)
{
	for (unsigned i = 0; i < n; i++)
		if (r[i].gsi == gsi && r[i].type == KVM_IRQ_ROUTING_IRQCHIP &&
		    r[i].u.irqchip.irqchip == chip)
			return &r[i];
	return NULL;
}

TEST(irq_routes_pic_and_ioapic_pins)
{
	struct kvm_irq_routing_entry r[64];
	const struct kvm_irq_routing_entry *e;
	unsigned n, g;

	n = arch_irq_routes(r, 64);
	CHECK_EQ(n, 16 + 24);          /* PIC: ISA IRQs 0-15; IOAPIC: pins 0-23 */
	/* GSI n -> pin n, as the MP table says (the PIT on pin 0). */
	for (g = 0; g < 24; g++) {
		e = find_chip_route(r, n, g, KVM_IRQCHIP_IOAPIC);
		CHECK(e && e->u.irqchip.pin == g);
	}
	e = find_chip_route(r, n, 9, KVM_IRQCHIP_PIC_SLAVE);
	CHECK(e && e->u.irqchip.pin == 1);
	/* A short table: the count is still the full one, nothing overruns. */
	CHECK_EQ(arch_irq_routes(r, 4), 16 + 24);
}
