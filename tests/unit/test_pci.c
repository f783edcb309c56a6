/* PCI bus 0: conf1 decoding, host bridge, config space masks and bounds,
 * BAR sizing/placement/mapping, capability chain; PCIe root ports with a
 * hot-plug slot and the device behind one. No KVM: a struct vm with
 * vm_fd -1, real I/O buses, fake RAM at [0, 1 MiB) and [4 GiB, +1 MiB). */
#include <errno.h>
#include <string.h>

#include "tests/unit/check.h"
#include "devices/pci.h"
#include "devices/pcie_port.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"

/* The board's PCI window and INTx wiring for these tests (x86's values). */
#define T_MMIO_BASE 0xe0000000ULL
#define T_MMIO_END  0xfe000000ULL
#define T_INTX_BASE 20
/* The board's fixed ranges for these tests (an IOAPIC-like page and a
 * LAPIC-like 1 MiB window, as x86 has). */
#define T_IOAPIC    0xfec00000ULL
#define T_LAPIC     0xfee00000ULL
static const struct arch_range t_fixed[] = {
	{ T_IOAPIC, 0x1000, "the IOAPIC" },
	{ T_LAPIC, 0x100000, "the LAPIC" },
};

struct tbus {
	struct vm vm;
	struct pci_bus bus;
	uint8_t *ram;
};

static struct tbus *tbus_new(void)
{
	struct tbus *t = calloc(1, sizeof(*t));

	CHECK(t);
	t->vm.vm_fd = t->vm.kvm_fd = -1;
	CHECK_EQ(iobus_init(&t->vm.pio), 0);
	CHECK_EQ(iobus_init(&t->vm.mmio), 0);
	t->ram = calloc(1, 2 * MiB);
	CHECK(t->ram);
	CHECK_EQ(gmem_add_region(&t->vm.mem, 0, MiB, t->ram), 0);
	CHECK_EQ(gmem_add_region(&t->vm.mem, 4 * GiB, MiB, t->ram + MiB), 0);
	CHECK_EQ(pci_bus_init(&t->bus, &t->vm, T_MMIO_BASE, T_MMIO_END, T_INTX_BASE,
				  t_fixed, ARRAY_SIZE(t_fixed)), 0);
	return t;
}

static void tbus_free(struct tbus *t)
{
	pci_bus_destroy(&t->bus);
	iobus_destroy(&t->vm.pio);
	iobus_destroy(&t->vm.mmio);
	free(t->ram);
	free(t);
}

static void pio_out(struct tbus *t, uint16_t port, unsigned len, uint32_t v)
{
	uint8_t b[4];

	le_store_n(b, len, v);
	iobus_access(&t->vm.pio, port, b, len, true);
}

static uint32_t pio_in(struct tbus *t, uint16_t port, unsigned len)
{
	uint8_t b[4];

	iobus_access(&t->vm.pio, port, b, len, false);
	return (uint32_t)le_load_n(b, len);
}

static uint32_t conf1_addr(unsigned bus, unsigned slot, unsigned fn, unsigned reg)
{
	return PCI_CONF1_ENABLE | bus << 16 | slot << 11 | fn << 8 | (reg & 0xfc);
}

static uint32_t conf1_read_on(struct tbus *t, unsigned bus, unsigned slot, unsigned reg,
			      unsigned len)
{
	pio_out(t, PCI_CONF1_ADDR_PORT, 4, conf1_addr(bus, slot, 0, reg));
	return pio_in(t, PCI_CONF1_DATA_PORT + (reg & 3), len);
}

static uint32_t conf1_read(struct tbus *t, unsigned slot, unsigned reg, unsigned len)
{
	return conf1_read_on(t, 0, slot, reg, len);
}

static void conf1_write_on(struct tbus *t, unsigned bus, unsigned slot, unsigned reg,
			   unsigned len, uint32_t v)
{
	pio_out(t, PCI_CONF1_ADDR_PORT, 4, conf1_addr(bus, slot, 0, reg));
	pio_out(t, PCI_CONF1_DATA_PORT + (reg & 3), len, v);
}

static void conf1_write(struct tbus *t, unsigned slot, unsigned reg, unsigned len, uint32_t v)
{
	conf1_write_on(t, 0, slot, reg, len, v);
}

/* A device with a 4 KiB 32-bit BAR0 and a 16 KiB 64-bit prefetchable BAR2
 * whose accesses are counted. */
struct tdev {
	struct pci_dev pd;
	unsigned reads, writes;
	uint64_t last_off;
};

static void tdev_read(void *opaque, uint64_t off, uint8_t *data, unsigned len)
{
	struct tdev *d = opaque;

	d->reads++;
	d->last_off = off;
	memset(data, 0xab, len);
}

static void tdev_write(void *opaque, uint64_t off, const uint8_t *data, unsigned len)
{
	struct tdev *d = opaque;

	(void)data; (void)len;
	d->writes++;
	d->last_off = off;
}

static const struct io_ops tdev_ops = { tdev_read, tdev_write };

/* tdev_add's device, not on any bus yet. */
static struct tdev *tdev_new(void)
{
	struct tdev *d = calloc(1, sizeof(*d));

	CHECK(d);
	pci_dev_init(&d->pd, "tdev", 0x1234, 0x5678, 0xff0000, 3, 0x1234, 0x0001, NULL, NULL);
	CHECK_EQ(pci_dev_set_bar(&d->pd, 0, 0x1000, 0, &tdev_ops, d), 0);
	CHECK_EQ(pci_dev_set_bar(&d->pd, 2, 0x4000, PCI_BASE_ADDRESS_MEM_TYPE_64 | PCI_BASE_ADDRESS_MEM_PREFETCH,
				 &tdev_ops, d), 0);
	return d;
}

static struct tdev *tdev_add(struct tbus *t)
{
	struct tdev *d = tdev_new();

	CHECK_EQ(pci_bus_add(&t->bus, &d->pd), 0);
	return d;
}

static bool mmio_hits(struct tbus *t, uint64_t addr)
{
	uint8_t b[4];

	return iobus_access(&t->vm.mmio, addr, b, 4, false);
}

TEST(host_bridge_ids_and_class)
{
	struct tbus *t = tbus_new();

	CHECK_EQ(conf1_read(t, 0, PCI_VENDOR_ID, 4),
		 (uint32_t)PCI_HB_DEVICE << 16 | PCI_HB_VENDOR);
	CHECK_EQ(conf1_read(t, 0, PCI_REVISION_ID, 4) >> 8, 0x060000);  /* class 06/00/00 */
	CHECK_EQ(conf1_read(t, 0, PCI_HEADER_TYPE, 1), 0);
	conf1_write(t, 0, PCI_VENDOR_ID, 4, 0);                       /* read-only */
	CHECK_EQ(conf1_read(t, 0, PCI_VENDOR_ID, 2), PCI_HB_VENDOR);
	tbus_free(t);
}

TEST(conf1_address_register_latches_dwords_only)
{
	struct tbus *t = tbus_new();

	pio_out(t, PCI_CONF1_ADDR_PORT, 4, 0x80000000);    /* Linux's conf1 probe */
	CHECK_EQ(pio_in(t, PCI_CONF1_ADDR_PORT, 4), 0x80000000);
	pio_out(t, PCI_CONF1_ADDR_PORT, 4, 0xffffffff);    /* reserved bits read 0 */
	CHECK_EQ(pio_in(t, PCI_CONF1_ADDR_PORT, 4), 0x80fffffc);
	pio_out(t, PCI_CONF1_ADDR_PORT + 3, 1, 0x01);      /* byte write: ignored */
	CHECK_EQ(pio_in(t, PCI_CONF1_ADDR_PORT, 4), 0x80fffffc);
	CHECK_EQ(pio_in(t, PCI_CONF1_ADDR_PORT, 2), 0xffff);
	tbus_free(t);
}

TEST(conf1_disabled_wrong_bus_missing_device_read_all_ones)
{
	struct tbus *t = tbus_new();

	pio_out(t, PCI_CONF1_ADDR_PORT, 4, 0);             /* enable bit clear */
	CHECK_EQ(pio_in(t, PCI_CONF1_DATA_PORT, 4), 0xffffffff);
	pio_out(t, PCI_CONF1_ADDR_PORT, 4, conf1_addr(1, 0, 0, 0));   /* bus 1 */
	CHECK_EQ(pio_in(t, PCI_CONF1_DATA_PORT, 4), 0xffffffff);
	pio_out(t, PCI_CONF1_ADDR_PORT, 4, conf1_addr(0, 0, 1, 0));   /* function 1 */
	CHECK_EQ(pio_in(t, PCI_CONF1_DATA_PORT, 4), 0xffffffff);
	CHECK_EQ(conf1_read(t, 7, 0, 4), 0xffffffff);      /* empty slot */
	/* Writes through a disabled address do nothing. */
	pio_out(t, PCI_CONF1_ADDR_PORT, 4, PCI_COMMAND);
	pio_out(t, PCI_CONF1_DATA_PORT, 2, PCI_COMMAND_MEMORY);
	CHECK_EQ(conf1_read(t, 0, PCI_COMMAND, 2), 0);
	tbus_free(t);
}

TEST(conf1_data_port_sub_dword_and_unaligned_accesses)
{
	struct tbus *t = tbus_new();

	pio_out(t, PCI_CONF1_ADDR_PORT, 4, conf1_addr(0, 0, 0, 0));
	CHECK_EQ(pio_in(t, PCI_CONF1_DATA_PORT + 2, 2), PCI_HB_DEVICE);
	CHECK_EQ(pio_in(t, PCI_CONF1_DATA_PORT + 1, 1), PCI_HB_VENDOR >> 8);
	/* A word at 0xCFF would cross the dword: no device answers. */
	CHECK_EQ(pio_in(t, PCI_CONF1_DATA_PORT + 3, 2), 0xffff);
	/* The low address bits select nothing: reg is dword-aligned. */
	pio_out(t, PCI_CONF1_ADDR_PORT, 4, conf1_addr(0, 0, 0, 0) | 2);
	CHECK_EQ(pio_in(t, PCI_CONF1_DATA_PORT, 2), PCI_HB_VENDOR);
	tbus_free(t);
}

TEST(device_slot_intx_pin_and_line)
{
	struct tbus *t = tbus_new();
	struct tdev *a = tdev_add(t), *b = tdev_add(t);

	CHECK_EQ(a->pd.slot, 1);
	CHECK_EQ(b->pd.slot, 2);
	CHECK_EQ(conf1_read(t, 1, PCI_VENDOR_ID, 4), 0x56781234);
	CHECK_EQ(conf1_read(t, 2, PCI_INTERRUPT_PIN, 1), 1);          /* INTA# */
	CHECK_EQ(conf1_read(t, 2, PCI_INTERRUPT_LINE, 1), T_INTX_BASE + 2);
	CHECK_EQ(pci_intx_pin(&t->bus, 5), T_INTX_BASE + 1);
	tbus_free(t);
	free(a); free(b);
}

TEST(command_register_write_mask)
{
	struct tbus *t = tbus_new();
	struct tdev *d = tdev_add(t);

	conf1_write(t, 1, PCI_COMMAND, 2, 0xffff);
	CHECK_EQ(conf1_read(t, 1, PCI_COMMAND, 2),
		 PCI_COMMAND_IO | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER | PCI_COMMAND_INTX_DISABLE);
	conf1_write(t, 1, PCI_STATUS, 2, 0xffff);               /* read-only */
	CHECK_EQ(conf1_read(t, 1, PCI_STATUS, 2), 0);
	conf1_write(t, 1, PCI_REVISION_ID, 4, 0);                  /* class/rev read-only */
	CHECK_EQ(conf1_read(t, 1, PCI_REVISION_ID, 1), 3);
	tbus_free(t);
	free(d);
}

/* Device threads read the command register without the bus lock
 * (pci_command): they see what the guest's config writes left there, byte
 * and word writes alike, and read-only bits stay clear. */
TEST(lock_free_command_reads_follow_config_writes)
{
	struct tbus *t = tbus_new();
	struct tdev *d = tdev_add(t);

	CHECK_EQ(pci_command(&d->pd), 0);
	conf1_write(t, 1, PCI_COMMAND, 2, 0xffff);
	CHECK_EQ(pci_command(&d->pd),
		 PCI_COMMAND_IO | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER | PCI_COMMAND_INTX_DISABLE);
	conf1_write(t, 1, PCI_COMMAND + 1, 1, 0);               /* high byte only */
	CHECK_EQ(pci_command(&d->pd), PCI_COMMAND_IO | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	conf1_write(t, 1, PCI_COMMAND, 1, PCI_COMMAND_MASTER);  /* low byte only */
	CHECK_EQ(pci_command(&d->pd), PCI_COMMAND_MASTER);
	CHECK_EQ(pci_command(&d->pd), conf1_read(t, 1, PCI_COMMAND, 2));
	tbus_free(t);
	free(d);
}

TEST(bar_sizing_with_all_ones)
{
	struct tbus *t = tbus_new();
	struct tdev *d = tdev_add(t);

	conf1_write(t, 1, PCI_BASE_ADDRESS_0, 4, 0xffffffff);
	CHECK_EQ(conf1_read(t, 1, PCI_BASE_ADDRESS_0, 4), 0xfffff000);    /* 32-bit, 4 KiB */
	conf1_write(t, 1, PCI_BASE_ADDRESS_0 + 8, 4, 0xffffffff);
	conf1_write(t, 1, PCI_BASE_ADDRESS_0 + 12, 4, 0xffffffff);
	CHECK_EQ(conf1_read(t, 1, PCI_BASE_ADDRESS_0 + 8, 4), 0xffffc000 | PCI_BASE_ADDRESS_MEM_TYPE_64 | PCI_BASE_ADDRESS_MEM_PREFETCH);
	CHECK_EQ(conf1_read(t, 1, PCI_BASE_ADDRESS_0 + 12, 4), 0xffffffff);
	/* Unused BARs size to 0. */
	conf1_write(t, 1, PCI_BASE_ADDRESS_0 + 4, 4, 0xffffffff);
	CHECK_EQ(conf1_read(t, 1, PCI_BASE_ADDRESS_0 + 4, 4), 0);
	conf1_write(t, 1, PCI_BASE_ADDRESS_0 + 20, 4, 0xffffffff);
	CHECK_EQ(conf1_read(t, 1, PCI_BASE_ADDRESS_0 + 20, 4), 0);
	tbus_free(t);
	free(d);
}

TEST(bars_placed_in_pci_window_and_mapped_only_with_memory_decode)
{
	struct tbus *t = tbus_new();
	struct tdev *a = tdev_add(t), *b = tdev_add(t);
	uint64_t a0 = pci_bar_addr(&a->pd, 0), a2 = pci_bar_addr(&a->pd, 2);
	uint64_t b0 = pci_bar_addr(&b->pd, 0), b2 = pci_bar_addr(&b->pd, 2);

	CHECK(a0 >= T_MMIO_BASE && a0 + 0x1000 <= T_MMIO_END);
	CHECK(b2 >= T_MMIO_BASE && b2 + 0x4000 <= T_MMIO_END);
	CHECK_EQ(a0 % 0x1000, 0); CHECK_EQ(a2 % 0x4000, 0); CHECK_EQ(b2 % 0x4000, 0);
	CHECK(a2 >= a0 + 0x1000 && b0 >= a2 + 0x4000 && b2 >= b0 + 0x1000);
	CHECK(b2 < 4 * GiB);              /* 64-bit BAR placed below 4 GiB */
	CHECK_EQ(conf1_read(t, 1, PCI_BASE_ADDRESS_0 + 12, 4), 0);
	CHECK(!mmio_hits(t, a0));         /* decode off */
	conf1_write(t, 1, PCI_COMMAND, 2, PCI_COMMAND_MEMORY);
	CHECK(mmio_hits(t, a0));
	CHECK(mmio_hits(t, a2 + 0x3ffc));
	CHECK_EQ(a->reads, 2);
	CHECK_EQ(a->last_off, 0x3ffc);
	CHECK(!mmio_hits(t, b0));         /* the other device still off */
	conf1_write(t, 1, PCI_COMMAND, 2, 0);
	CHECK(!mmio_hits(t, a0));
	tbus_free(t);
	free(a); free(b);
}

TEST(bar_move_reregisters_range)
{
	struct tbus *t = tbus_new();
	struct tdev *d = tdev_add(t);
	uint64_t old = pci_bar_addr(&d->pd, 2), moved = 0xf0000000;

	conf1_write(t, 1, PCI_COMMAND, 2, PCI_COMMAND_MEMORY);
	CHECK(mmio_hits(t, old));
	conf1_write(t, 1, PCI_BASE_ADDRESS_0 + 8, 4, (uint32_t)moved);
	CHECK_EQ(pci_bar_addr(&d->pd, 2), moved);
	CHECK(!mmio_hits(t, old));
	CHECK(mmio_hits(t, moved + 8));
	CHECK(d->pd.bars[2].mapped && d->pd.bars[2].mapped_addr == moved);
	/* 64-bit BAR moved above 4 GiB, clear of RAM there. */
	conf1_write(t, 1, PCI_BASE_ADDRESS_0 + 12, 4, 0x10);
	CHECK(mmio_hits(t, 0x10ULL << 32 | moved));
	CHECK(!mmio_hits(t, moved));
	tbus_free(t);
	free(d);
}

TEST(bar_over_ram_or_other_bar_stays_unmapped)
{
	struct tbus *t = tbus_new();
	struct tdev *a = tdev_add(t), *b = tdev_add(t);
	uint64_t a2 = pci_bar_addr(&a->pd, 2);

	conf1_write(t, 1, PCI_COMMAND, 2, PCI_COMMAND_MEMORY);
	conf1_write(t, 2, PCI_COMMAND, 2, PCI_COMMAND_MEMORY);
	/* Over low RAM. */
	conf1_write(t, 1, PCI_BASE_ADDRESS_0, 4, 0x1000);
	CHECK(!a->pd.bars[0].mapped);
	CHECK_EQ(pci_guest_errors(&a->pd), 1);
	CHECK_EQ(conf1_read(t, 1, PCI_BASE_ADDRESS_0, 4), 0x1000);   /* value kept */
	/* Over RAM above 4 GiB (64-bit BAR). */
	conf1_write(t, 2, PCI_BASE_ADDRESS_0 + 12, 4, 1);
	conf1_write(t, 2, PCI_BASE_ADDRESS_0 + 8, 4, 0x4000);
	CHECK(!b->pd.bars[2].mapped);
	/* Over another device's mapped BAR. */
	conf1_write(t, 2, PCI_BASE_ADDRESS_0 + 12, 4, 0);
	conf1_write(t, 2, PCI_BASE_ADDRESS_0 + 8, 4, (uint32_t)a2);
	CHECK(!b->pd.bars[2].mapped);
	CHECK(a->pd.bars[2].mapped);
	CHECK(mmio_hits(t, a2));
	CHECK_EQ(b->reads, 0);
	CHECK_EQ(a->reads, 1);
	/* Moving somewhere free maps it. */
	conf1_write(t, 1, PCI_BASE_ADDRESS_0, 4, 0xf8000000);
	CHECK(a->pd.bars[0].mapped);
	CHECK(mmio_hits(t, 0xf8000000));
	tbus_free(t);
	free(a); free(b);
}

/* A notify ioeventfd in a BAR over the IOAPIC would shadow its IOREGSEL:
 * a BAR over any of the board's fixed ranges stays unmapped, as if its
 * decode were off, whether it covers the range or only its first byte. */
TEST(bar_over_a_fixed_platform_range_stays_unmapped)
{
	struct tbus *t = tbus_new();
	struct tdev *d = tdev_add(t);

	conf1_write(t, 1, PCI_COMMAND, 2, PCI_COMMAND_MEMORY);
	CHECK(d->pd.bars[0].mapped && d->pd.bars[2].mapped);
	/* BAR2 (16 KiB) over the IOAPIC's page. */
	conf1_write(t, 1, PCI_BASE_ADDRESS_0 + 8, 4, (uint32_t)T_IOAPIC);
	CHECK(!d->pd.bars[2].mapped);
	CHECK_EQ(pci_guest_errors(&d->pd), 1);
	CHECK(!mmio_hits(t, T_IOAPIC));
	CHECK_EQ(d->reads, 0);
	/* BAR0 (4 KiB) inside the LAPIC window, not on its first page. */
	conf1_write(t, 1, PCI_BASE_ADDRESS_0, 4, (uint32_t)T_LAPIC + 0x80000);
	CHECK(!d->pd.bars[0].mapped);
	CHECK(!mmio_hits(t, T_LAPIC + 0x80000));
	/* The registers keep the values the guest wrote. */
	CHECK_EQ(conf1_read(t, 1, PCI_BASE_ADDRESS_0, 4), (uint32_t)T_LAPIC + 0x80000);
	CHECK_EQ(pci_bar_addr(&d->pd, 2), T_IOAPIC);
	/* Right below the IOAPIC, ending where it starts: mapped. */
	conf1_write(t, 1, PCI_BASE_ADDRESS_0 + 8, 4, (uint32_t)T_IOAPIC - 0x4000);
	CHECK(d->pd.bars[2].mapped);
	CHECK(mmio_hits(t, T_IOAPIC - 4));
	/* Moved somewhere free: mapped again. */
	conf1_write(t, 1, PCI_BASE_ADDRESS_0, 4, 0xf8000000);
	CHECK(d->pd.bars[0].mapped);
	CHECK(mmio_hits(t, 0xf8000000));
	tbus_free(t);
	free(d);
}

/* A guest can move a BAR onto RAM on every exit: one line per function,
 * every refusal counted (pci_guest_errors, in virtio-pci's --stats). */
TEST(bars_refused_again_and_again_are_logged_once_per_function_and_counted)
{
	struct tbus *t = tbus_new();
	struct tdev *a = tdev_add(t), *b = tdev_add(t);
	struct check_log cl = { 0 };
	struct log_sink sink = { .fn = check_log_line, .opaque = &cl };

	a->pd.log = b->pd.log = &sink;
	conf1_write(t, 1, PCI_COMMAND, 2, PCI_COMMAND_MEMORY);
	conf1_write(t, 1, PCI_BASE_ADDRESS_0, 4, 0x1000);
	CHECK_EQ(cl.lines, 1);
	CHECK_EQ(cl.level, LOG_WARNING);
	CHECK_STR(cl.last, "pci 00:01.0 (tdev): BAR0 at 0x1000 (size 0x1000) overlaps guest RAM; "
		  "left unmapped until the guest moves it (the first of its kind on this "
		  "function: the rest are only counted, as pci_guest_errors in --stats)");
	conf1_write(t, 1, PCI_BASE_ADDRESS_0, 4, 0xf8000000);
	CHECK(a->pd.bars[0].mapped);
	conf1_write(t, 1, PCI_BASE_ADDRESS_0, 4, 0x1000);
	CHECK(!a->pd.bars[0].mapped);
	CHECK_EQ(cl.lines, 1);
	CHECK_EQ(pci_guest_errors(&a->pd), 2);
	/* Another function: its own line. */
	conf1_write(t, 2, PCI_COMMAND, 2, PCI_COMMAND_MEMORY);
	conf1_write(t, 2, PCI_BASE_ADDRESS_0, 4, (uint32_t)T_IOAPIC);
	CHECK_EQ(cl.lines, 2);
	CHECK_EQ(pci_guest_errors(&b->pd), 1);
	CHECK_EQ(pci_guest_errors(&a->pd), 2);
	tbus_free(t);
	free(a); free(b);
}

TEST(bar_refused_while_decode_is_off_stays_unmapped_when_decode_turns_on)
{
	struct tbus *t = tbus_new();
	struct tdev *d = tdev_add(t);

	conf1_write(t, 1, PCI_BASE_ADDRESS_0, 4, (uint32_t)T_IOAPIC);
	CHECK_EQ(pci_guest_errors(&d->pd), 0);          /* decode off: no check yet */
	conf1_write(t, 1, PCI_COMMAND, 2, PCI_COMMAND_MEMORY);
	CHECK(!d->pd.bars[0].mapped);
	CHECK_EQ(pci_guest_errors(&d->pd), 1);
	CHECK(d->pd.bars[2].mapped);                     /* the other BAR is fine */
	CHECK(!mmio_hits(t, T_IOAPIC));
	tbus_free(t);
	free(d);
}

TEST(config_access_bounds_and_capability_boundaries)
{
	struct pci_dev *pd = calloc(1, sizeof(*pd));
	uint8_t b[4] = { 1, 2, 3, 4 };
	int cap;

	CHECK(pd);
	pci_dev_init(pd, "t", 1, 2, 0, 0, 0, 0, NULL, NULL);
	cap = pci_cap_add(pd, 0x09, 12);
	CHECK_EQ(cap, 0x40);
	pci_set_wmask(pd, cap + 4, 4, 0xffffffff);
	pci_set_wmask(pd, cap + 8, 4, 0xffffffff);
	/* Inside the capability: fine. */
	pci_cfg_write32(pd, cap + 8, 0xdeadbeef);
	CHECK_EQ(pci_cfg_read32(pd, cap + 8), 0xdeadbeef);
	/* Straddling its end (0x4c) or its start: ignored, reads 0. */
	pci_cfg_write(pd, cap + 10, b, 4);
	CHECK_EQ(pci_cfg_read32(pd, cap + 8), 0xdeadbeef);
	pci_cfg_read(pd, cap + 10, b, 4);
	CHECK_EQ(le32_load(b), 0);
	pci_cfg_read(pd, cap - 2, b, 4);
	CHECK_EQ(le32_load(b), 0);
	/* Beyond 4 KiB, or running off its end: ignored. */
	memset(b, 0xee, 4);
	pci_cfg_read(pd, PCI_CFG_SIZE, b, 4);
	CHECK_EQ(le32_load(b), 0);
	pci_cfg_read(pd, PCI_CFG_SIZE - 2, b, 4);
	CHECK_EQ(le32_load(b), 0);
	pci_cfg_read(pd, UINT32_MAX - 1, b, 4);
	CHECK_EQ(le32_load(b), 0);
	pd->wmask[PCI_CFG_SIZE - 1] = 0xff;      /* even a writable byte there */
	pci_cfg_write(pd, PCI_CFG_SIZE - 1, b, 2);
	CHECK_EQ(pd->cfg[PCI_CFG_SIZE - 1], 0);
	/* Extended space exists (4 KiB storage) and is read-only by default. */
	pci_cfg_write32(pd, 0x800, 0x12345678);
	CHECK_EQ(pci_cfg_read32(pd, 0x800), 0);
	/* Width 3 is not an access. */
	pci_cfg_read(pd, 0, b, 3);
	CHECK_EQ(b[0], 0);
	free(pd);
}

TEST(capability_chain_walk_like_linux)
{
	struct pci_dev *pd = calloc(1, sizeof(*pd));
	static const uint8_t ids[] = { 0x11, 0x09, 0x09, 0x05 };
	static const unsigned lens[] = { 12, 16, 20, 10 };
	unsigned i, ptr, seen = 0;

	CHECK(pd);
	pci_dev_init(pd, "t", 1, 2, 0, 0, 0, 0, NULL, NULL);
	CHECK_EQ(pci_cfg_read32(pd, PCI_COMMAND) >> 16 & PCI_STATUS_CAP_LIST, 0);
	for (i = 0; i < ARRAY_SIZE(ids); i++)
		CHECK(pci_cap_add(pd, ids[i], lens[i]) >= (int)PCI_CAP_START);
	CHECK(le16_load(&pd->cfg[PCI_STATUS]) & PCI_STATUS_CAP_LIST);
	/* pci_find_capability: start at 0x34, follow next until 0 (bounded). */
	ptr = pd->cfg[PCI_CAPABILITY_LIST];
	while (ptr && seen < 48) {
		uint32_t hdr = pci_cfg_read32(pd, ptr);
		CHECK(ptr >= PCI_CAP_START && ptr % 4 == 0);
		CHECK_EQ(hdr & 0xff, ids[seen]);
		ptr = (hdr >> 8) & 0xfc;
		seen++;
	}
	CHECK_EQ(seen, ARRAY_SIZE(ids));
	/* No room left for a capability that would run past 256 bytes. */
	while (pci_cap_add(pd, 0x09, 64) >= 0)
		;
	CHECK(pd->cap_next <= PCI_CONF1_SIZE);
	free(pd);
}

TEST(bar_declaration_rules)
{
	struct pci_dev *pd = calloc(1, sizeof(*pd));

	CHECK(pd);
	pci_dev_init(pd, "t", 1, 2, 0, 0, 0, 0, NULL, NULL);
	CHECK_EQ(pci_dev_set_bar(pd, 0, 0x1800, 0, &tdev_ops, NULL), -EINVAL);  /* not pow2 */
	CHECK_EQ(pci_dev_set_bar(pd, 5, 0x1000, PCI_BASE_ADDRESS_MEM_TYPE_64, &tdev_ops, NULL), -EINVAL);
	CHECK_EQ(pci_dev_set_bar(pd, 6, 0x1000, 0, &tdev_ops, NULL), -EINVAL);
	CHECK_EQ(pci_dev_set_bar(pd, 0, 0x1000, PCI_BASE_ADDRESS_MEM_TYPE_64, &tdev_ops, NULL), 0);
	CHECK_EQ(pci_dev_set_bar(pd, 1, 0x1000, 0, &tdev_ops, NULL), -EBUSY);   /* upper half */
	free(pd);
}

/* ---- PCIe root ports (pcie_port.h) -------------------------------------- */

/* A port on the bus and its PCIe capability's offset, found as Linux
 * finds it (the capability list). */
static struct pcie_port *port_add(struct tbus *t, unsigned number, unsigned *cap)
{
	struct pcie_port *p = calloc(1, sizeof(*p));
	unsigned off;

	CHECK(p);
	CHECK_EQ(pcie_port_init(p, &t->bus, number), 0);
	for (off = conf1_read(t, p->pci.slot, PCI_CAPABILITY_LIST, 1); off;
	     off = conf1_read(t, p->pci.slot, off + 1, 1))
		if (conf1_read(t, p->pci.slot, off, 1) == PCI_CAP_ID_EXP)
			break;
	CHECK(off != 0);
	*cap = off;
	return p;
}

static void port_free(struct pcie_port *p)
{
	pcie_port_destroy(p);
	free(p);
}

static uint16_t slot_sta(struct tbus *t, struct pcie_port *p, unsigned cap)
{
	return (uint16_t)conf1_read(t, p->pci.slot, cap + PCI_EXP_SLTSTA, 2);
}

/* What pciehp writes: the slot's control register, whole. */
static void slot_ctl(struct tbus *t, struct pcie_port *p, unsigned cap, uint16_t v)
{
	conf1_write(t, p->pci.slot, cap + PCI_EXP_SLTCTL, 2, v);
}

#define SLT_ENABLES (PCI_EXP_SLTCTL_ABPE | PCI_EXP_SLTCTL_PDCE | PCI_EXP_SLTCTL_HPIE | \
		     PCI_EXP_SLTCTL_DLLSCE)

TEST(root_port_is_a_bridge_with_a_hot_plug_slot_and_its_own_window)
{
	struct tbus *t = tbus_new();
	struct pcie_port *p;
	unsigned cap, s;
	uint32_t base, limit;

	p = port_add(t, 3, &cap);
	s = p->pci.slot;
	CHECK_EQ(conf1_read(t, s, PCI_VENDOR_ID, 4), 0x000c1b36u);
	CHECK_EQ(conf1_read(t, s, PCI_CLASS_REVISION, 4) >> 8, PCIE_PORT_CLASS);
	CHECK_EQ(conf1_read(t, s, PCI_HEADER_TYPE, 1), PCI_HEADER_TYPE_BRIDGE);
	CHECK_EQ(conf1_read(t, s, PCI_PRIMARY_BUS, 4) & 0xffffff, 0x030300u);
	CHECK_EQ(conf1_read(t, s, cap + PCI_EXP_FLAGS, 2),
		 2u | PCI_EXP_TYPE_ROOT_PORT << 4 | PCI_EXP_FLAGS_SLOT);
	CHECK_EQ(conf1_read(t, s, cap + PCI_EXP_SLTCAP, 4),
		 PCI_EXP_SLTCAP_ABP | PCI_EXP_SLTCAP_PCP | PCI_EXP_SLTCAP_HPC |
		 PCI_EXP_SLTCAP_NCCS | 3u << 19);
	CHECK(conf1_read(t, s, cap + PCI_EXP_LNKCAP, 4) & PCI_EXP_LNKCAP_DLLLARC);
	/* Empty, powered off, link down; no event pending. */
	CHECK_EQ(slot_sta(t, p, cap), 0);
	CHECK_EQ(conf1_read(t, s, cap + PCI_EXP_SLTCTL, 2), PCI_EXP_SLTCTL_PWR_OFF);
	CHECK_EQ(conf1_read(t, s, cap + PCI_EXP_LNKSTA, 2) & PCI_EXP_LNKSTA_DLLLA, 0);
	/* A 1 MiB memory window in the bus's; I/O and prefetchable closed. */
	base = conf1_read(t, s, PCI_MEMORY_BASE, 2) << 16;
	limit = conf1_read(t, s, PCI_MEMORY_LIMIT, 2) << 16 | 0xfffff;
	CHECK_EQ(limit - base + 1, PCIE_PORT_WINDOW);
	CHECK(base >= T_MMIO_BASE && limit < T_MMIO_END);
	CHECK(conf1_read(t, s, PCI_IO_BASE, 1) > conf1_read(t, s, PCI_IO_LIMIT, 1));
	CHECK(conf1_read(t, s, PCI_PREF_MEMORY_BASE, 2) > conf1_read(t, s, PCI_PREF_MEMORY_LIMIT, 2));
	port_free(p);
	tbus_free(t);
}

TEST(device_behind_a_port_answers_at_device_0_of_its_secondary_bus_only)
{
	struct tbus *t = tbus_new();
	struct tdev *d = tdev_new();
	struct pcie_port *p;
	unsigned cap;

	p = port_add(t, 1, &cap);
	CHECK_EQ(conf1_read_on(t, 1, 0, PCI_VENDOR_ID, 4), 0xffffffffu);
	CHECK_EQ(pcie_port_plug(p, &d->pd), 0);
	CHECK_EQ(conf1_read_on(t, 1, 0, PCI_VENDOR_ID, 4), 0x56781234u);
	CHECK_EQ(conf1_read_on(t, 1, 1, PCI_VENDOR_ID, 4), 0xffffffffu);
	CHECK_EQ(conf1_read_on(t, 2, 0, PCI_VENDOR_ID, 4), 0xffffffffu);
	/* Its INTA# is its port's (the swizzle of device 0). */
	CHECK_EQ(conf1_read_on(t, 1, 0, PCI_INTERRUPT_LINE, 1), T_INTX_BASE + p->pci.slot % 4);
	/* The guest renumbers the port's secondary bus: the device follows. */
	conf1_write(t, p->pci.slot, PCI_SECONDARY_BUS, 1, 7);
	CHECK_EQ(conf1_read_on(t, 1, 0, PCI_VENDOR_ID, 4), 0xffffffffu);
	CHECK_EQ(conf1_read_on(t, 7, 0, PCI_VENDOR_ID, 4), 0x56781234u);
	/* A second device finds the port busy. */
	{
		struct tdev *e = tdev_new();
		CHECK_EQ(pcie_port_plug(p, &e->pd), -EBUSY);
		free(e);
	}
	pci_bus_remove(&t->bus, &d->pd);
	CHECK_EQ(conf1_read_on(t, 7, 0, PCI_VENDOR_ID, 4), 0xffffffffu);
	port_free(p);
	tbus_free(t);
	free(d);
}

TEST(plugged_device_bars_go_in_the_port_window_and_map_with_decode)
{
	struct tbus *t = tbus_new();
	struct tdev *d = tdev_new();
	struct pcie_port *p;
	unsigned cap;
	uint64_t base, bar0, bar2;

	p = port_add(t, 1, &cap);
	base = (uint64_t)conf1_read(t, p->pci.slot, PCI_MEMORY_BASE, 2) << 16;
	CHECK_EQ(pcie_port_plug(p, &d->pd), 0);
	bar0 = conf1_read_on(t, 1, 0, PCI_BASE_ADDRESS_0, 4) & ~0xfu;
	bar2 = conf1_read_on(t, 1, 0, PCI_BASE_ADDRESS_2, 4) & ~0xfu;
	CHECK(bar0 >= base && bar0 + 0x1000 <= base + PCIE_PORT_WINDOW);
	CHECK(bar2 >= base && bar2 + 0x4000 <= base + PCIE_PORT_WINDOW);
	CHECK(!mmio_hits(t, bar0));
	conf1_write_on(t, 1, 0, PCI_COMMAND, 2, PCI_COMMAND_MEMORY);
	CHECK(mmio_hits(t, bar0) && mmio_hits(t, bar2));
	pci_bus_remove(&t->bus, &d->pd);
	CHECK(!mmio_hits(t, bar0) && !mmio_hits(t, bar2));
	port_free(p);
	tbus_free(t);
	free(d);
}

TEST(device_larger_than_the_port_window_is_refused)
{
	struct tbus *t = tbus_new();
	struct pcie_port *p;
	struct tdev d = { 0 };
	unsigned cap;

	p = port_add(t, 1, &cap);
	pci_dev_init(&d.pd, "big", 0x1234, 0x5678, 0xff0000, 0, 0, 0, NULL, NULL);
	CHECK_EQ(pci_dev_set_bar(&d.pd, 0, 2 * PCIE_PORT_WINDOW, 0, &tdev_ops, &d), 0);
	CHECK_EQ(pcie_port_plug(p, &d.pd), -ENOSPC);
	CHECK(!pcie_port_occupied(p));
	CHECK_EQ(slot_sta(t, p, cap), 0);
	port_free(p);
	tbus_free(t);
}

TEST(plug_events_raise_intx_only_when_enabled_and_clearing_them_lowers_it)
{
	struct tbus *t = tbus_new();
	struct tdev *d = tdev_new();
	struct pcie_port *p;
	unsigned cap;

	p = port_add(t, 1, &cap);
	CHECK_EQ(pcie_port_plug(p, &d->pd), 0);
	CHECK_EQ(slot_sta(t, p, cap), PCI_EXP_SLTSTA_PDS | PCI_EXP_SLTSTA_PDC | PCI_EXP_SLTSTA_DLLSC);
	CHECK(conf1_read(t, p->pci.slot, cap + PCI_EXP_LNKSTA, 2) & PCI_EXP_LNKSTA_DLLLA);
	CHECK(!p->line);                       /* HPIE off */
	slot_ctl(t, p, cap, SLT_ENABLES | PCI_EXP_SLTCTL_PWR_OFF);
	CHECK(p->line);
	/* INTx Disable in the command register holds it low. */
	conf1_write(t, p->pci.slot, PCI_COMMAND, 2, PCI_COMMAND_INTX_DISABLE);
	CHECK(!p->line);
	conf1_write(t, p->pci.slot, PCI_COMMAND, 2, 0);
	CHECK(p->line);
	/* pciehp's ISR: write back the events it saw. */
	conf1_write(t, p->pci.slot, cap + PCI_EXP_SLTSTA, 2, PCI_EXP_SLTSTA_PDC);
	CHECK(p->line);                        /* DLLSC still pending */
	conf1_write(t, p->pci.slot, cap + PCI_EXP_SLTSTA, 2,
		    PCI_EXP_SLTSTA_DLLSC | PCI_EXP_SLTSTA_PDS);
	CHECK(!p->line);
	CHECK_EQ(slot_sta(t, p, cap), PCI_EXP_SLTSTA_PDS);   /* state bits stay */
	pci_bus_remove(&t->bus, &d->pd);
	port_free(p);
	tbus_free(t);
	free(d);
}

TEST(button_then_the_guest_powering_the_slot_off_ejects_the_device)
{
	struct tbus *t = tbus_new();
	struct tdev *d = tdev_new();
	struct pcie_port *p;
	unsigned cap;
	uint64_t bar0;

	p = port_add(t, 1, &cap);
	CHECK_EQ(pcie_port_press_button(p), -ENODEV);
	CHECK_EQ(pcie_port_plug(p, &d->pd), 0);
	bar0 = conf1_read_on(t, 1, 0, PCI_BASE_ADDRESS_0, 4) & ~0xfu;
	conf1_write_on(t, 1, 0, PCI_COMMAND, 2, PCI_COMMAND_MEMORY);
	/* The guest enables events (power still off: no eject), clears
	 * them and powers the slot on. */
	slot_ctl(t, p, cap, SLT_ENABLES | PCI_EXP_SLTCTL_PWR_OFF);
	CHECK(pcie_port_occupied(p));
	conf1_write(t, p->pci.slot, cap + PCI_EXP_SLTSTA, 2, 0xffff);
	slot_ctl(t, p, cap, SLT_ENABLES);
	CHECK(pcie_port_occupied(p) && !p->line);
	CHECK_EQ(pcie_port_press_button(p), 0);
	CHECK(slot_sta(t, p, cap) & PCI_EXP_SLTSTA_ABP);
	CHECK(p->line);
	CHECK_EQ(pcie_port_wait_eject(p, mono_ns() + 20 * 1000000ull), -ETIMEDOUT);
	CHECK(mmio_hits(t, bar0));
	/* The guest released it and powers the slot off. */
	conf1_write(t, p->pci.slot, cap + PCI_EXP_SLTSTA, 2, PCI_EXP_SLTSTA_ABP);
	slot_ctl(t, p, cap, SLT_ENABLES | PCI_EXP_SLTCTL_PWR_OFF);
	CHECK_EQ(pcie_port_wait_eject(p, mono_ns() + 1000000000ull), 0);
	CHECK(!pcie_port_occupied(p));
	CHECK(!mmio_hits(t, bar0));
	CHECK_EQ(conf1_read_on(t, 1, 0, PCI_VENDOR_ID, 4), 0xffffffffu);
	CHECK_EQ(slot_sta(t, p, cap), PCI_EXP_SLTSTA_PDC | PCI_EXP_SLTSTA_DLLSC);
	CHECK_EQ(conf1_read(t, p->pci.slot, cap + PCI_EXP_LNKSTA, 2) & PCI_EXP_LNKSTA_DLLLA, 0);
	CHECK_EQ(p->ejects, 1);
	/* The owner frees it afterwards: nothing left to undo. */
	pci_bus_remove(&t->bus, &d->pd);
	port_free(p);
	tbus_free(t);
	free(d);
}

TEST(surprise_removal_detaches_at_once_and_tells_the_guest)
{
	struct tbus *t = tbus_new();
	struct tdev *d = tdev_new();
	struct pcie_port *p;
	unsigned cap;
	uint64_t bar2;

	p = port_add(t, 1, &cap);
	CHECK_EQ(pcie_port_plug(p, &d->pd), 0);
	bar2 = conf1_read_on(t, 1, 0, PCI_BASE_ADDRESS_2, 4) & ~0xfu;
	conf1_write_on(t, 1, 0, PCI_COMMAND, 2, PCI_COMMAND_MEMORY);
	slot_ctl(t, p, cap, SLT_ENABLES);
	conf1_write(t, p->pci.slot, cap + PCI_EXP_SLTSTA, 2, 0xffff);
	CHECK(!p->line);
	pcie_port_surprise_remove(p);
	CHECK(!pcie_port_occupied(p));
	CHECK(!mmio_hits(t, bar2));
	CHECK_EQ(slot_sta(t, p, cap), PCI_EXP_SLTSTA_PDC | PCI_EXP_SLTSTA_DLLSC);
	CHECK(p->line);
	CHECK_EQ(p->surprise, 1);
	/* Powered on by the guest, the slot is not ready for another device
	 * until the guest powers it off (that write would eject the new
	 * one) and its 1 s of ignoring presence changes has passed. */
	CHECK(!pcie_port_ready(p, mono_ns()));
	slot_ctl(t, p, cap, SLT_ENABLES | PCI_EXP_SLTCTL_PWR_OFF);
	CHECK(!pcie_port_ready(p, mono_ns()));
	CHECK(pcie_port_ready(p, mono_ns() + PCIE_PORT_SETTLE_NS));
	/* The slot takes another device afterwards. */
	pci_bus_remove(&t->bus, &d->pd);
	CHECK_EQ(pcie_port_plug(p, &d->pd), 0);
	CHECK_EQ(conf1_read_on(t, 1, 0, PCI_VENDOR_ID, 4), 0x56781234u);
	pci_bus_remove(&t->bus, &d->pd);
	port_free(p);
	tbus_free(t);
	free(d);
}

/* ---- a slot's snapshot (pcie_port_save/load) ---------------------------- */

/* A slot's snapshot and where it goes: port p on bus a (the guest's, with
 * device d plugged in), a fresh port q on bus b to load it into, and a
 * third, o on bus c, for the load that is refused. The section's body is
 * read through r, in img. */
struct slot_snap {
	struct tbus *a, *b, *c;
	struct tdev *d, *e;
	struct pcie_port *p, *q, *o;
	unsigned cap;
	struct snap_w w;
	struct snap_r r;
	uint8_t *img;
};

static void slot_snap_new(struct slot_snap *f)
{
	memset(f, 0, sizeof(*f));
	f->a = tbus_new();
	f->b = tbus_new();
	f->c = tbus_new();
	f->d = tdev_new();
	f->e = tdev_new();
	f->p = port_add(f->a, 1, &f->cap);
	f->q = port_add(f->b, 1, &f->cap);
	f->o = port_add(f->c, 1, &f->cap);
	CHECK_EQ(pcie_port_plug(f->p, &f->d->pd), 0);
}

/* p's state as a snapshot holds it. */
static void slot_snap_save(struct slot_snap *f)
{
	struct snap_file file;
	char err[256];
	size_t len;

	snap_w_init(&f->w);
	snap_begin(&f->w, 1, 0);
	CHECK_EQ(pcie_port_save(f->p, &f->w, err, sizeof(err)), 0);
	snap_end(&f->w);
	CHECK_EQ(snap_w_image(&f->w, &f->img, &len), 0);
	CHECK_EQ(snap_open(&file, f->img, len, err, sizeof(err)), 0);
	CHECK_EQ(snap_find(&file, 1, 0, &f->r), 0);
}

/* Every register of q as the guest reads it is p's. */
static void slot_snap_regs_same(struct slot_snap *f)
{
	unsigned reg;

	for (reg = 0; reg < PCI_CONF1_SIZE; reg += 2)
		if (conf1_read(f->a, f->p->pci.slot, reg, 2) != conf1_read(f->b, f->q->pci.slot, reg, 2))
			fprintf(stderr, "register %#x: %#x there, %#x here\n", reg,
				conf1_read(f->a, f->p->pci.slot, reg, 2),
				conf1_read(f->b, f->q->pci.slot, reg, 2));
	for (reg = 0; reg < PCI_CONF1_SIZE; reg += 2)
		CHECK_EQ(conf1_read(f->a, f->p->pci.slot, reg, 2),
			 conf1_read(f->b, f->q->pci.slot, reg, 2));
}

/* The devices off whatever bus they are on, then everything freed. */
static void slot_snap_free(struct slot_snap *f)
{
	if (f->d->pd.bus)
		pci_bus_remove(f->d->pd.bus, &f->d->pd);
	if (f->e->pd.bus)
		pci_bus_remove(f->e->pd.bus, &f->e->pd);
	free(f->img);
	snap_w_free(&f->w);
	port_free(f->p);
	port_free(f->q);
	port_free(f->o);
	tbus_free(f->a);
	tbus_free(f->b);
	tbus_free(f->c);
	free(f->d);
	free(f->e);
}

/* An empty slot as the guest left it after a surprise removal (events
 * pending, interrupts enabled, powered off, the bus renumbered, a window
 * and bridge control written) comes back in a fresh port: the same
 * registers as the guest reads them, the line up for the pending events,
 * the settle time running on from the power-off, and another device
 * taken once it has passed. A port with a device attached for the load
 * is refused: the slot was empty. */
TEST(an_empty_slot_comes_back_as_the_guest_left_it)
{
	struct slot_snap f;
	struct snap_r r2;
	unsigned cap;
	char err[256];

	slot_snap_new(&f);
	cap = f.cap;
	slot_ctl(f.a, f.p, cap, SLT_ENABLES);
	pcie_port_surprise_remove(f.p);
	slot_ctl(f.a, f.p, cap, SLT_ENABLES | PCI_EXP_SLTCTL_PWR_OFF);
	conf1_write(f.a, f.p->pci.slot, PCI_SECONDARY_BUS, 1, 7);
	conf1_write(f.a, f.p->pci.slot, PCI_SUBORDINATE_BUS, 1, 7);
	conf1_write(f.a, f.p->pci.slot, PCI_BRIDGE_CONTROL, 2, PCI_BRIDGE_CTL_SERR);
	conf1_write(f.a, f.p->pci.slot, cap + PCI_EXP_DEVCTL, 2, 0x2810);
	CHECK(f.p->line);
	slot_snap_save(&f);
	r2 = f.r;
	CHECK_EQ(pcie_port_attach(f.o, &f.e->pd), 0);
	CHECK_EQ(pcie_port_load(f.o, &r2, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "hot-plug slot 1 was empty in the snapshot, a disk is there here"));
	CHECK(!f.q->line);
	CHECK_EQ(pcie_port_load(f.q, &f.r, err, sizeof(err)), 0);
	CHECK_EQ(snap_done(&f.r, err, sizeof(err)), 0);
	slot_snap_regs_same(&f);
	CHECK_EQ(slot_sta(f.b, f.q, cap), PCI_EXP_SLTSTA_PDC | PCI_EXP_SLTSTA_DLLSC);
	CHECK(f.q->line);
	CHECK(f.q->powered_off);
	CHECK(!pcie_port_ready(f.q, mono_ns()));
	CHECK(pcie_port_ready(f.q, mono_ns() + PCIE_PORT_SETTLE_NS));
	/* A device plugged in answers on the bus the guest numbered. */
	pci_bus_remove(&f.a->bus, &f.d->pd);
	CHECK_EQ(pcie_port_plug(f.q, &f.d->pd), 0);
	CHECK_EQ(conf1_read_on(f.b, 7, 0, PCI_VENDOR_ID, 4), 0x56781234u);
	slot_snap_free(&f);
}

/* A slot holding a device the guest powered on and numbered: in a fresh
 * port with the device attached again (not announced), the same
 * registers, present and linked with no event pending, the device
 * answering on the guest's bus number; the button then asks the guest
 * to let it go, and its power-off ejects it as before the snapshot. A
 * port with no device is refused: the slot held one. */
TEST(a_slot_holding_a_device_comes_back_with_it_and_the_guest_can_release_it)
{
	struct slot_snap f;
	struct snap_r r2;
	unsigned cap;
	char err[256];

	slot_snap_new(&f);
	cap = f.cap;
	slot_ctl(f.a, f.p, cap, SLT_ENABLES | PCI_EXP_SLTCTL_PWR_OFF);
	conf1_write(f.a, f.p->pci.slot, cap + PCI_EXP_SLTSTA, 2, 0xffff);
	slot_ctl(f.a, f.p, cap, SLT_ENABLES);
	conf1_write(f.a, f.p->pci.slot, PCI_SECONDARY_BUS, 1, 5);
	conf1_write(f.a, f.p->pci.slot, PCI_SUBORDINATE_BUS, 1, 5);
	CHECK(!f.p->line);
	slot_snap_save(&f);
	r2 = f.r;
	CHECK_EQ(pcie_port_load(f.o, &r2, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "hot-plug slot 1 held a disk in the snapshot, none is there here"));
	CHECK_EQ(pcie_port_attach(f.q, &f.e->pd), 0);
	CHECK_EQ(pcie_port_load(f.q, &f.r, err, sizeof(err)), 0);
	CHECK_EQ(snap_done(&f.r, err, sizeof(err)), 0);
	slot_snap_regs_same(&f);
	CHECK_EQ(slot_sta(f.b, f.q, cap), PCI_EXP_SLTSTA_PDS);
	CHECK(conf1_read(f.b, f.q->pci.slot, cap + PCI_EXP_LNKSTA, 2) & PCI_EXP_LNKSTA_DLLLA);
	CHECK(!f.q->line && !f.q->powered_off && pcie_port_occupied(f.q));
	CHECK_EQ(conf1_read_on(f.b, 5, 0, PCI_VENDOR_ID, 4), 0x56781234u);
	CHECK_EQ(pcie_port_press_button(f.q), 0);
	CHECK(f.q->line);
	conf1_write(f.b, f.q->pci.slot, cap + PCI_EXP_SLTSTA, 2, PCI_EXP_SLTSTA_ABP);
	slot_ctl(f.b, f.q, cap, SLT_ENABLES | PCI_EXP_SLTCTL_PWR_OFF);
	CHECK_EQ(pcie_port_wait_eject(f.q, mono_ns() + 1000000000ull), 0);
	CHECK(!pcie_port_occupied(f.q));
	CHECK_EQ(conf1_read_on(f.b, 5, 0, PCI_VENDOR_ID, 4), 0xffffffffu);
	slot_snap_free(&f);
}
