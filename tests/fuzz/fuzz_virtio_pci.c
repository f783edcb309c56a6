/* The virtio-pci modern transport (devices/virtio_pci.c, virtio 1.2 §4.1)
 * on mvm's PCI bus (devices/pci.c) with its MSI-X table and PBA
 * (devices/msix.c), under a fuzzed driver: config space through the conf1
 * ports and directly (the extended space, the PCI_CFG capability window),
 * BAR moves and memory decode on and off, BAR accesses through the MMIO bus
 * wherever the BARs are, interrupts raised and resampled. A struct vm with
 * no KVM (vm_fd -1), like the unit tests; null device with 3 queues. */
#include "tests/fuzz/fuzz_vnull.h"
#include "devices/virtio_pci.h"
#include "vmm/kvm/vm.h"

#include <sys/eventfd.h>

#define NQ 3
#define MMIO_BASE 0xe0000000ULL
#define MMIO_END  0xfe000000ULL

struct tp {
	struct vm vm;
	struct pci_bus bus;
	struct vnull *v;
	struct virtio_pci vp;
};

static const unsigned lens[] = { 4, 1, 2, 8 };

/* conf1: address register, then 1/2/4 bytes of the data port. */
static void op_conf1(struct tp *t, struct fz *f, bool write)
{
	uint8_t how = fz_u8(f), b[4];
	/* enable, bus 0, our slot (1) or any, register */
	uint32_t addr = how & 1 ? fz_u32(f) :
			PCI_CONF1_ENABLE | (1u << 11) | (fz_u8(f) & 0xfcu);
	unsigned len = how & 2 ? 4 : (how & 4 ? 2 : 1), port = PCI_CONF1_DATA_PORT + (how >> 3) % 4;

	le32_store(b, addr);
	iobus_access(&t->vm.pio, PCI_CONF1_ADDR_PORT, b, 4, true);
	le32_store(b, fz_u32(f));
	iobus_access(&t->vm.pio, port, b, len, write);
}

/* Config space directly (all 4 KiB), any width and alignment. */
static void op_cfg(struct tp *t, struct fz *f, bool write)
{
	unsigned off = fz_u16(f) % PCI_CFG_SIZE, len = lens[fz_u8(f) % 3];
	uint8_t b[4];

	le32_store(b, fz_u32(f));
	if (off + len > PCI_CFG_SIZE)
		off = PCI_CFG_SIZE - len;
	if (write)
		pci_cfg_write(&t->vp.pci, off, b, len);
	else
		pci_cfg_read(&t->vp.pci, off, b, len);
}

/* An MMIO access at BAR1/BAR4 (where config space says they are now) plus
 * an offset, or anywhere in the PCI window; the bus dispatches it. */
static void op_mmio(struct tp *t, struct fz *f, bool write)
{
	uint8_t how = fz_u8(f);
	uint64_t addr;
	unsigned len = lens[(how >> 2) % 4];
	uint8_t b[8];

	switch (how % 4) {
	case 0:
		addr = pci_bar_addr(&t->vp.pci, VIRTIO_PCI_BAR) + fz_u16(f) % VIRTIO_PCI_BAR_SIZE;
		break;
	case 1:
		addr = pci_bar_addr(&t->vp.pci, VIRTIO_PCI_MSIX_BAR) +
		       fz_u16(f) % VIRTIO_PCI_MSIX_BAR_SIZE;
		break;
	case 2:
		/* a known common-cfg field */
		addr = pci_bar_addr(&t->vp.pci, VIRTIO_PCI_BAR) + fz_u8(f) % VIRTIO_PCI_COMMON_LEN;
		break;
	default:
		addr = MMIO_BASE + fz_u32(f) % (MMIO_END - MMIO_BASE);
		break;
	}
	le64_store(b, fz_u64(f));
	iobus_access(&t->vm.mmio, addr, b, len, write);
}

/* The BAR handlers directly, whether mapped or not. */
static void op_bar(struct tp *t, struct fz *f, bool write)
{
	uint8_t how = fz_u8(f);
	uint64_t off = fz_u16(f);
	unsigned len = lens[(how >> 1) % 4];
	uint8_t b[8];

	le64_store(b, fz_u64(f));
	if (how & 1) {
		off %= VIRTIO_PCI_MSIX_BAR_SIZE;
		if (write)
			msix_bar_write(&t->vp.msix, off, b, len);
		else
			msix_bar_read(&t->vp.msix, off, b, len);
	} else {
		off %= VIRTIO_PCI_BAR_SIZE;
		if (write)
			virtio_pci_bar_write(&t->vp, off, b, len);
		else
			virtio_pci_bar_read(&t->vp, off, b, len);
	}
}

/* The device side: queue / config interrupts, INTx resample, and the
 * vectors' eventfds read (as KVM would consume them). */
static void op_signal(struct tp *t, struct fz *f)
{
	uint8_t how = fz_u8(f);
	eventfd_t cnt;

	switch (how % 4) {
	case 0:
		t->v->dev.tops->signal_queue(&t->v->dev, (how >> 2) % NQ);
		break;
	case 1:
		t->v->dev.tops->signal_config(&t->v->dev);
		break;
	case 2:
		virtio_pci_intx_resample(&t->vp);
		break;
	default:
		for (unsigned i = 0; i < t->vp.msix.nvec; i++)
			eventfd_read(t->vp.msix.v[i].fd, &cnt);
		eventfd_read(t->vp.intx_fd, &cnt);
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = { data, size };
	struct tp *t = calloc(1, sizeof(*t));
	unsigned stops[NQ] = { 0 }, steps = 0;

	FZ_ASSERT(t);
	t->vm.vm_fd = t->vm.kvm_fd = -1;
	FZ_ASSERT(iobus_init(&t->vm.pio) == 0);
	FZ_ASSERT(iobus_init(&t->vm.mmio) == 0);
	t->v = fv_new(NQ, fz_u32(&in) & 0xffffff);
	/* The board's fixed ranges, as mvm_start gives them: BARs over them stay off. */
	FZ_ASSERT(pci_bus_init(&t->bus, &t->vm, MMIO_BASE, MMIO_END, 20, arch_layout.fixed_mmio,
			       arch_layout.nfixed_mmio) == 0);
	FZ_ASSERT(virtio_pci_init(&t->vp, &t->v->dev, &t->vm) == 0);
	FZ_ASSERT(pci_bus_add(&t->bus, &t->vp.pci) == 0);

	while (fz_left(&in) && ++steps < 4096) {
		uint8_t op = fz_u8(&in);

		switch (op % 12) {
		case 0:
		case 1:
			op_conf1(t, &in, op % 12 == 0);
			break;
		case 2:
		case 3:
			op_cfg(t, &in, op % 12 == 2);
			break;
		case 4:
		case 5:
		case 6:
			op_mmio(t, &in, op % 12 != 6);
			break;
		case 7:
		case 8:
			op_bar(t, &in, op % 12 == 7);
			break;
		case 9:
			op_signal(t, &in);
			break;
		case 10:
			fv_poke(t->v, &in);
			break;
		case 11:
			fv_serve(t->v, &in);
			break;
		}
		fv_check(t->v, stops);
	}
	pci_bus_destroy(&t->bus);
	virtio_dev_destroy(&t->v->dev);
	virtio_pci_destroy(&t->vp);
	iobus_destroy(&t->vm.pio);
	iobus_destroy(&t->vm.mmio);
	fv_free(t->v);
	free(t);
	return 0;
}

/* --- seeds: memory decode on, then Linux's probe through BAR4; MSI-X --- */

static void cfg_w(struct fz_buf *s, uint16_t off, unsigned len, uint32_t v)
{
	fzb_u8(s, 2);
	fzb_u16(s, off);
	fzb_u8(s, len == 4 ? 0 : len == 1 ? 1 : 2);
	fzb_u32(s, v);
}

/* common cfg field write at BAR4 + off */
static void common_w(struct fz_buf *s, uint8_t off, unsigned len, uint64_t v)
{
	fzb_u8(s, 4);
	fzb_u8(s, (uint8_t)(2 | (len == 4 ? 0 : len == 1 ? 1 : len == 2 ? 2 : 3) << 2));
	fzb_u8(s, off);
	fzb_u64(s, v);
}

static void common_r(struct fz_buf *s, uint8_t off, unsigned len)
{
	fzb_u8(s, 6);
	fzb_u8(s, (uint8_t)(2 | (len == 4 ? 0 : len == 1 ? 1 : len == 2 ? 2 : 3) << 2));
	fzb_u8(s, off);
	fzb_u64(s, 0);
}

static void msix_w(struct fz_buf *s, uint16_t off, uint32_t v)
{
	fzb_u8(s, 7);
	fzb_u8(s, 1);           /* MSI-X BAR, 4 bytes */
	fzb_u16(s, off);
	fzb_u64(s, v);
}

static void fuzz_seeds(void)
{
	struct fz_buf s;
	uint64_t ram = FV_RAM_GPA;

	s.n = 0;
	fzb_u32(&s, 0);
	cfg_w(&s, PCI_COMMAND, 2, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	common_w(&s, VIRTIO_PCI_COMMON_STATUS, 1, 1);
	common_w(&s, VIRTIO_PCI_COMMON_STATUS, 1, 3);
	common_w(&s, VIRTIO_PCI_COMMON_GFSELECT, 4, 1);
	common_w(&s, VIRTIO_PCI_COMMON_GF, 4, 1);
	common_w(&s, VIRTIO_PCI_COMMON_STATUS, 1, 11);
	common_r(&s, VIRTIO_PCI_COMMON_STATUS, 1);
	common_w(&s, VIRTIO_PCI_COMMON_Q_SELECT, 2, 0);
	common_w(&s, VIRTIO_PCI_COMMON_Q_SIZE, 2, 16);
	common_w(&s, VIRTIO_PCI_COMMON_Q_DESCLO, 8, ram);
	common_w(&s, VIRTIO_PCI_COMMON_Q_AVAILLO, 4, (uint32_t)(ram + 0x400));
	common_w(&s, VIRTIO_PCI_COMMON_Q_USEDLO, 8, ram + 0x800);
	common_w(&s, VIRTIO_PCI_COMMON_Q_MSIX, 2, 1);
	common_w(&s, VIRTIO_PCI_COMMON_Q_ENABLE, 2, 1);
	common_w(&s, VIRTIO_PCI_COMMON_MSIX, 2, 0);
	common_w(&s, VIRTIO_PCI_COMMON_STATUS, 1, 15);
	fuzz_seed("probe_intx", s.b, s.n);

	/* MSI-X on, vectors 0 and 1 programmed, a queue and a config interrupt */
	cfg_w(&s, 0x40 + PCI_MSIX_FLAGS, 2, PCI_MSIX_FLAGS_ENABLE);
	msix_w(&s, 0 * 16 + PCI_MSIX_ENTRY_LOWER_ADDR, 0xfee00000);
	msix_w(&s, 0 * 16 + PCI_MSIX_ENTRY_DATA, 0x41);
	msix_w(&s, 0 * 16 + PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
	msix_w(&s, 1 * 16 + PCI_MSIX_ENTRY_LOWER_ADDR, 0xfee00000);
	msix_w(&s, 1 * 16 + PCI_MSIX_ENTRY_DATA, 0x42);
	fzb_u8(&s, 9); fzb_u8(&s, 0);      /* queue 0 interrupt: vector 1 masked? pending */
	msix_w(&s, 1 * 16 + PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
	fzb_u8(&s, 9); fzb_u8(&s, 1);      /* config interrupt */
	fzb_u8(&s, 8); fzb_u8(&s, 1); fzb_u16(&s, VIRTIO_PCI_MSIX_PBA); fzb_u64(&s, 0);
	fzb_u8(&s, 9); fzb_u8(&s, 3);
	fuzz_seed("msix", s.b, s.n);

	/* conf1 walk of the header and a BAR4 move */
	s.n = 0;
	fzb_u32(&s, 0);
	for (uint8_t reg = 0; reg < 0x40; reg += 4) {
		fzb_u8(&s, 1); fzb_u8(&s, 2); fzb_u8(&s, reg); fzb_u32(&s, 0);
	}
	fzb_u8(&s, 0); fzb_u8(&s, 2); fzb_u8(&s, PCI_BASE_ADDRESS_4); fzb_u32(&s, 0xffffffff);
	fzb_u8(&s, 1); fzb_u8(&s, 2); fzb_u8(&s, PCI_BASE_ADDRESS_4); fzb_u32(&s, 0);
	fzb_u8(&s, 0); fzb_u8(&s, 2); fzb_u8(&s, PCI_BASE_ADDRESS_4); fzb_u32(&s, 0xe8000000);
	cfg_w(&s, PCI_COMMAND, 2, PCI_COMMAND_MEMORY);
	common_r(&s, VIRTIO_PCI_COMMON_NUMQ, 2);
	fuzz_seed("conf1_bar_move", s.b, s.n);
}
