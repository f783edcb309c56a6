/* virtio-pci modern register model: identity, capabilities, common cfg
 * rules, notify, ISR/INTx, MSI-X per queue, PCI cfg access window.
 * No KVM: the transport is not attached; kicks and interrupts are read from
 * the eventfds. */
#include <errno.h>
#include <sys/eventfd.h>

#include "tests/unit/check.h"
#include "vmm/base/json.h"
#include "tests/unit/vnulldev.h"
#include "devices/virtio_pci.h"
#include "vmm/kvm/vm.h"

#define NQ 3

struct tvp {
	struct vm vm;
	struct vnull *v;
	struct virtio_pci vp;
};

static void bus_master(struct tvp *t, bool on)
{
	pci_cfg_write16(&t->vp.pci, PCI_COMMAND, on ? PCI_COMMAND_MASTER : 0);
}

static struct tvp *tvp_new(void)
{
	struct tvp *t = calloc(1, sizeof(*t));

	CHECK(t);
	t->vm.vm_fd = t->vm.kvm_fd = -1;
	t->v = calloc(1, sizeof(*t->v));
	CHECK(t->v);
	CHECK_EQ(vdrv_ram_init(&t->v->d, VNULL_RAM_GPA, VNULL_RAM_SIZE), 0);
	CHECK_EQ(virtio_dev_init(&t->v->dev, &vnull_ops, t->v, &t->v->d.mem, NQ, VNULL_QMAX), 0);
	CHECK_EQ(virtio_pci_init(&t->vp, &t->v->dev, &t->vm), 0);
	/* Linux's virtio_pci_probe makes the function a bus master
	 * (pci_set_master) before the virtio handshake. */
	bus_master(t, true);
	return t;
}

static void tvp_free(struct tvp *t)
{
	virtio_dev_destroy(&t->v->dev);
	virtio_pci_destroy(&t->vp);
	free(t->v->d.ram);
	free(t->v);
	free(t);
}

static void w(struct tvp *t, unsigned off, unsigned len, uint64_t val)
{
	uint8_t b[8];

	le_store_n(b, len, val);
	virtio_pci_bar_write(&t->vp, off, b, len);
}

static uint64_t r(struct tvp *t, unsigned off, unsigned len)
{
	uint8_t b[8];

	virtio_pci_bar_read(&t->vp, off, b, len);
	return le_load_n(b, len);
}

static uint8_t status(struct tvp *t)
{
	return (uint8_t)r(t, VIRTIO_PCI_COMMON_STATUS, 1);
}

static void negotiate(struct tvp *t)
{
	w(t, VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	w(t, VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	w(t, VIRTIO_PCI_COMMON_GFSELECT, 4, 1);
	w(t, VIRTIO_PCI_COMMON_GF, 4, 1);           /* VERSION_1 */
	w(t, VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
	  VIRTIO_CONFIG_S_FEATURES_OK);
	CHECK(status(t) & VIRTIO_CONFIG_S_FEATURES_OK);
}

/* Program queue q (size 64) the way Linux does: 64-bit addresses as two dwords. */
static void queue_setup(struct tvp *t, unsigned q, uint16_t vector)
{
	struct vdrv *d = &t->v->d;
	uint64_t desc = vdrv_alloc(d, VIRTQ_DESC_BYTES(64), 16);
	uint64_t avail = vdrv_alloc(d, VIRTQ_AVAIL_BYTES(64), 2);
	uint64_t used = vdrv_alloc(d, VIRTQ_USED_BYTES(64), 4);

	w(t, VIRTIO_PCI_COMMON_Q_SELECT, 2, q);
	w(t, VIRTIO_PCI_COMMON_Q_SIZE, 2, 64);
	w(t, VIRTIO_PCI_COMMON_Q_DESCLO, 4, (uint32_t)desc);
	w(t, VIRTIO_PCI_COMMON_Q_DESCLO + 4, 4, desc >> 32);
	w(t, VIRTIO_PCI_COMMON_Q_AVAILLO, 4, (uint32_t)avail);
	w(t, VIRTIO_PCI_COMMON_Q_AVAILLO + 4, 4, avail >> 32);
	w(t, VIRTIO_PCI_COMMON_Q_USEDLO, 8, used);
	w(t, VIRTIO_PCI_COMMON_Q_MSIX, 2, vector);
	w(t, VIRTIO_PCI_COMMON_Q_ENABLE, 2, 1);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_ENABLE, 2), 1);
}

static uint64_t efd_count(int fd)
{
	eventfd_t v = 0;

	if (eventfd_read(fd, &v) < 0)
		return 0;
	return v;
}

static void msix_enable_vector(struct tvp *t, unsigned vec)
{
	uint8_t b[4];

	pci_cfg_write16(&t->vp.pci, t->vp.msix.cap + PCI_MSIX_FLAGS, PCI_MSIX_FLAGS_ENABLE);
	le32_store(b, 0xfee00000);
	msix_bar_write(&t->vp.msix, vec * 16 + PCI_MSIX_ENTRY_LOWER_ADDR, b, 4);
	le32_store(b, 0x40 + vec);
	msix_bar_write(&t->vp.msix, vec * 16 + PCI_MSIX_ENTRY_DATA, b, 4);
	le32_store(b, 0);
	msix_bar_write(&t->vp.msix, vec * 16 + PCI_MSIX_ENTRY_VECTOR_CTRL, b, 4);
}

TEST(pci_identity)
{
	struct tvp *t = tvp_new();
	struct pci_dev *pd = &t->vp.pci;

	CHECK_EQ(pci_cfg_read32(pd, PCI_VENDOR_ID), (0x1040u + 0x7f) << 16 | 0x1af4);
	CHECK_EQ(pd->cfg[PCI_REVISION_ID], 1);
	CHECK_EQ(le16_load(&pd->cfg[PCI_SUBSYSTEM_VENDOR_ID]), 0x1af4);
	CHECK_EQ(le16_load(&pd->cfg[PCI_SUBSYSTEM_ID]), 0x1040 + 0x7f);
	CHECK_EQ(pd->cfg[PCI_REG_CLASS], 0xff);
	CHECK(pd->bars[VIRTIO_PCI_BAR].flags & PCI_BASE_ADDRESS_MEM_TYPE_64);
	CHECK(pd->bars[VIRTIO_PCI_BAR].flags & PCI_BASE_ADDRESS_MEM_PREFETCH);
	tvp_free(t);
}

TEST(capability_chain_as_linux_walks_it)
{
	struct tvp *t = tvp_new();
	struct pci_dev *pd = &t->vp.pci;
	unsigned ptr = pd->cfg[PCI_CAPABILITY_LIST], found = 0, n = 0;

	while (ptr && n++ < 48) {
		uint32_t hdr = pci_cfg_read32(pd, ptr);
		if ((hdr & 0xff) == PCI_CAP_ID_VNDR) {
			uint8_t type = hdr >> 24, bar = pci_cfg_read32(pd, ptr + 4) & 0xff;
			uint32_t off = pci_cfg_read32(pd, ptr + 8), len = pci_cfg_read32(pd, ptr + 12);
			found |= 1u << type;
			CHECK_EQ((hdr >> 16) & 0xff, type == VIRTIO_PCI_CAP_NOTIFY_CFG ||
				 type == VIRTIO_PCI_CAP_PCI_CFG ? 20 : 16);
			if (type == VIRTIO_PCI_CAP_COMMON_CFG) {
				CHECK_EQ(bar, VIRTIO_PCI_BAR);
				CHECK(len >= VIRTIO_PCI_COMMON_LEN);
				CHECK_EQ(off, VIRTIO_PCI_COMMON_OFF);
			}
			if (type == VIRTIO_PCI_CAP_NOTIFY_CFG) {
				CHECK_EQ(pci_cfg_read32(pd, ptr + 16), VIRTIO_PCI_NOTIFY_MULT);
				CHECK_EQ(len, NQ * VIRTIO_PCI_NOTIFY_MULT);
			}
			if (type != VIRTIO_PCI_CAP_PCI_CFG)
				CHECK(off + len <= VIRTIO_PCI_BAR_SIZE);
		} else {
			CHECK_EQ(hdr & 0xff, PCI_CAP_ID_MSIX);
			CHECK_EQ(hdr >> 16 & 0x7ff, NQ);        /* NQ + 1 vectors */
		}
		ptr = (hdr >> 8) & 0xfc;
	}
	CHECK_EQ(found, 1u << 1 | 1u << 2 | 1u << 3 | 1u << 4 | 1u << 5);
	tvp_free(t);
}

TEST(queue_select_beyond_num_queues_reads_zero_ignores_writes)
{
	struct tvp *t = tvp_new();

	negotiate(t);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_NUMQ, 2), NQ);
	w(t, VIRTIO_PCI_COMMON_Q_SELECT, 2, NQ);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_SELECT, 2), NQ);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_SIZE, 2), 0);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_NOFF, 2), 0);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_MSIX, 2), 0);
	w(t, VIRTIO_PCI_COMMON_Q_SIZE, 2, 16);
	w(t, VIRTIO_PCI_COMMON_Q_DESCLO, 8, 0x20000);
	w(t, VIRTIO_PCI_COMMON_Q_ENABLE, 2, 1);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_SIZE, 2), 0);
	for (unsigned q = 0; q < NQ; q++) {
		CHECK_EQ(t->v->dev.queues[q].vq.size, VNULL_QMAX);
		CHECK_EQ(t->v->dev.queues[q].vq.desc_gpa, 0);
		CHECK(!t->v->dev.queues[q].vq.ready);
	}
	tvp_free(t);
}

TEST(queue_config_ignored_while_enabled_or_after_driver_ok)
{
	struct tvp *t = tvp_new();
	uint64_t desc;

	negotiate(t);
	queue_setup(t, 0, 1);
	desc = t->v->dev.queues[0].vq.desc_gpa;
	/* Enabled: size/address/vector writes ignored. */
	w(t, VIRTIO_PCI_COMMON_Q_SIZE, 2, 32);
	w(t, VIRTIO_PCI_COMMON_Q_DESCLO, 4, 0x40000);
	w(t, VIRTIO_PCI_COMMON_Q_MSIX, 2, 2);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_SIZE, 2), 64);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_DESCLO, 8), desc);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_MSIX, 2), 1);
	w(t, VIRTIO_PCI_COMMON_STATUS, 1, status(t) | VIRTIO_CONFIG_S_DRIVER_OK);
	CHECK(status(t) & VIRTIO_CONFIG_S_DRIVER_OK);
	CHECK_EQ(t->v->started[0], 1);
	/* After DRIVER_OK, even a disabled queue cannot be configured. */
	w(t, VIRTIO_PCI_COMMON_Q_SELECT, 2, 1);
	w(t, VIRTIO_PCI_COMMON_Q_SIZE, 2, 16);
	w(t, VIRTIO_PCI_COMMON_Q_DESCLO, 8, 0x40000);
	w(t, VIRTIO_PCI_COMMON_Q_AVAILLO, 8, 0x41000);
	w(t, VIRTIO_PCI_COMMON_Q_USEDLO, 8, 0x42000);
	w(t, VIRTIO_PCI_COMMON_Q_MSIX, 2, 2);
	w(t, VIRTIO_PCI_COMMON_Q_ENABLE, 2, 1);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_SIZE, 2), VNULL_QMAX);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_DESCLO, 8), 0);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_AVAILLO, 8), 0);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_USEDLO, 8), 0);
	CHECK(!t->v->dev.queues[1].vq.ready);
	CHECK_EQ(t->v->started[1], 0);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_MSIX, 2), MSIX_NO_VECTOR);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_ENABLE, 2), 0);
	tvp_free(t);
}

TEST(msix_vector_beyond_table_reads_no_vector)
{
	struct tvp *t = tvp_new();

	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_MSIX, 2), MSIX_NO_VECTOR);
	w(t, VIRTIO_PCI_COMMON_MSIX, 2, NQ);            /* last valid vector */
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_MSIX, 2), NQ);
	w(t, VIRTIO_PCI_COMMON_MSIX, 2, NQ + 1);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_MSIX, 2), MSIX_NO_VECTOR);
	negotiate(t);
	w(t, VIRTIO_PCI_COMMON_Q_SELECT, 2, 2);
	w(t, VIRTIO_PCI_COMMON_Q_MSIX, 2, 0x100);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_MSIX, 2), MSIX_NO_VECTOR);
	w(t, VIRTIO_PCI_COMMON_Q_MSIX, 2, 0);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_MSIX, 2), 0);
	tvp_free(t);
}

TEST(notify_offsets_unique_and_kick_the_queue_eventfd)
{
	struct tvp *t = tvp_new();
	unsigned offs[NQ];

	for (unsigned q = 0; q < NQ; q++) {
		w(t, VIRTIO_PCI_COMMON_Q_SELECT, 2, q);
		offs[q] = (unsigned)r(t, VIRTIO_PCI_COMMON_Q_NOFF, 2);
		for (unsigned p = 0; p < q; p++)
			CHECK(offs[p] != offs[q]);
		CHECK(VIRTIO_PCI_NOTIFY_MULT * offs[q] < NQ * VIRTIO_PCI_NOTIFY_MULT);
	}
	for (unsigned q = 0; q < NQ; q++)
		efd_count(t->v->dev.queues[q].kick_fd);
	w(t, VIRTIO_PCI_NOTIFY_OFF + VIRTIO_PCI_NOTIFY_MULT * offs[1], 2, 1);
	CHECK_EQ(efd_count(t->v->dev.queues[1].kick_fd), 1);
	CHECK_EQ(efd_count(t->v->dev.queues[0].kick_fd), 0);
	CHECK_EQ(efd_count(t->v->dev.queues[2].kick_fd), 0);
	w(t, VIRTIO_PCI_NOTIFY_OFF + VIRTIO_PCI_NOTIFY_MULT * NQ, 2, 0);   /* past the end */
	for (unsigned q = 0; q < NQ; q++)
		CHECK_EQ(efd_count(t->v->dev.queues[q].kick_fd), 0);
	tvp_free(t);
}

TEST(intx_sets_isr_read_clears_and_resample_reasserts)
{
	struct tvp *t = tvp_new();
	struct virtio_dev *dev = &t->v->dev;

	negotiate(t);
	queue_setup(t, 0, 0);           /* vector set, but MSI-X disabled: INTx */
	virtio_signal_queue(dev, 0);
	CHECK_EQ(efd_count(t->vp.intx_fd), 1);
	CHECK(pci_cfg_read32(&t->vp.pci, PCI_COMMAND) >> 16 & PCI_STATUS_INTERRUPT);
	/* EOI before the handler read ISR: re-assert. */
	CHECK(virtio_pci_intx_resample(&t->vp));
	CHECK_EQ(efd_count(t->vp.intx_fd), 1);
	dev->tops->signal_config(dev);
	CHECK_EQ(r(t, VIRTIO_PCI_ISR_OFF, 1), VIRTIO_PCI_ISR_QUEUE | VIRTIO_PCI_ISR_CONFIG);
	CHECK_EQ(r(t, VIRTIO_PCI_ISR_OFF, 1), 0);        /* read-to-clear */
	CHECK(!virtio_pci_intx_resample(&t->vp));
	CHECK(!(pci_cfg_read32(&t->vp.pci, PCI_COMMAND) >> 16 & PCI_STATUS_INTERRUPT));
	/* INTx disable in the command register: ISR still set, line not raised. */
	efd_count(t->vp.intx_fd);
	pci_cfg_write16(&t->vp.pci, PCI_COMMAND, PCI_COMMAND_INTX_DISABLE);
	virtio_signal_queue(dev, 0);
	CHECK_EQ(efd_count(t->vp.intx_fd), 0);
	CHECK_EQ(r(t, VIRTIO_PCI_ISR_OFF, 1), VIRTIO_PCI_ISR_QUEUE);
	tvp_free(t);
}

TEST(msix_fires_per_queue_vector_not_intx)
{
	struct tvp *t = tvp_new();
	struct virtio_dev *dev = &t->v->dev;

	negotiate(t);
	queue_setup(t, 0, 1);
	queue_setup(t, 1, 2);
	queue_setup(t, 2, MSIX_NO_VECTOR);
	w(t, VIRTIO_PCI_COMMON_MSIX, 2, 0);
	msix_enable_vector(t, 0);
	msix_enable_vector(t, 1);
	msix_enable_vector(t, 2);
	virtio_signal_queue(dev, 1);
	CHECK_EQ(efd_count(t->vp.msix.v[2].fd), 1);
	CHECK_EQ(efd_count(t->vp.msix.v[1].fd), 0);
	virtio_signal_queue(dev, 0);
	CHECK_EQ(efd_count(t->vp.msix.v[1].fd), 1);
	dev->tops->signal_config(dev);
	CHECK_EQ(efd_count(t->vp.msix.v[0].fd), 1);
	virtio_signal_queue(dev, 2);            /* NO_VECTOR with MSI-X on: nothing */
	CHECK_EQ(efd_count(t->vp.intx_fd), 0);
	CHECK_EQ(r(t, VIRTIO_PCI_ISR_OFF, 1), 0);
	tvp_free(t);
}

TEST(pci_cfg_access_capability_reaches_the_bar)
{
	struct tvp *t = tvp_new();
	struct pci_dev *pd = &t->vp.pci;
	unsigned cap = t->vp.cap_pci_cfg;

	pci_cfg_write(pd, cap + 4, (const uint8_t[]){ VIRTIO_PCI_BAR }, 1);
	pci_cfg_write32(pd, cap + 8, VIRTIO_PCI_COMMON_NUMQ);
	pci_cfg_write32(pd, cap + 12, 2);
	CHECK_EQ(pci_cfg_read32(pd, cap + 16) & 0xffff, NQ);
	/* Write through the window: config_msix_vector. */
	pci_cfg_write32(pd, cap + 8, VIRTIO_PCI_COMMON_MSIX);
	pci_cfg_write32(pd, cap + 16, 2);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_MSIX, 2), 2);
	/* Bad length / BAR / offset: nothing happens, reads 0. */
	pci_cfg_write32(pd, cap + 12, 3);
	CHECK_EQ(pci_cfg_read32(pd, cap + 16), 0);
	pci_cfg_write32(pd, cap + 12, 4);
	pci_cfg_write32(pd, cap + 8, VIRTIO_PCI_BAR_SIZE);
	CHECK_EQ(pci_cfg_read32(pd, cap + 16), 0);
	tvp_free(t);
}

TEST(reset_restores_transport_defaults)
{
	struct tvp *t = tvp_new();

	negotiate(t);
	queue_setup(t, 1, 2);
	w(t, VIRTIO_PCI_COMMON_MSIX, 2, 0);
	w(t, VIRTIO_PCI_COMMON_STATUS, 1, 0);
	CHECK_EQ(status(t), 0);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_MSIX, 2), MSIX_NO_VECTOR);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_SELECT, 2), 0);
	w(t, VIRTIO_PCI_COMMON_Q_SELECT, 2, 1);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_MSIX, 2), MSIX_NO_VECTOR);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_Q_ENABLE, 2), 0);
	tvp_free(t);
}

TEST(wrong_width_common_access_ignored)
{
	struct tvp *t = tvp_new();

	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_NUMQ, 4), 0);     /* dword over a word field */
	w(t, VIRTIO_PCI_COMMON_MSIX, 4, 0);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_MSIX, 2), MSIX_NO_VECTOR);
	CHECK_EQ(t->vp.t.dev->guest_errors, 2);            /* both counted */
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_DF + 1, 1), 0);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_DF, 4), (uint32_t)VIRTIO_CORE_FEATURES);
	w(t, VIRTIO_PCI_COMMON_DFSELECT, 4, 1);
	CHECK_EQ(r(t, VIRTIO_PCI_COMMON_DF, 4), (uint32_t)(VIRTIO_CORE_FEATURES >> 32));
	tvp_free(t);
}

static void driver_ok(struct tvp *t)
{
	w(t, VIRTIO_PCI_COMMON_STATUS, 1, status(t) | VIRTIO_CONFIG_S_DRIVER_OK);
}

TEST(driver_ok_without_bus_mastering_starts_no_queue_and_needs_reset)
{
	struct tvp *t = tvp_new();

	negotiate(t);
	queue_setup(t, 0, MSIX_NO_VECTOR);
	bus_master(t, false);
	driver_ok(t);
	CHECK_EQ(t->v->started[0], 0);
	CHECK(!t->v->dev.queues[0].started);
	CHECK(status(t) & VIRTIO_CONFIG_S_NEEDS_RESET);
	CHECK_EQ(t->v->dev.guest_errors, 1);
	/* The driver resets, enables bus mastering and starts over: it works. */
	w(t, VIRTIO_PCI_COMMON_STATUS, 1, 0);
	bus_master(t, true);
	negotiate(t);
	queue_setup(t, 0, MSIX_NO_VECTOR);
	driver_ok(t);
	CHECK_EQ(t->v->started[0], 1);
	CHECK(!(status(t) & VIRTIO_CONFIG_S_NEEDS_RESET));
	tvp_free(t);
}

TEST(clearing_bus_master_stops_running_queues_and_needs_reset)
{
	struct tvp *t = tvp_new();

	negotiate(t);
	queue_setup(t, 0, MSIX_NO_VECTOR);
	queue_setup(t, 2, MSIX_NO_VECTOR);
	driver_ok(t);
	CHECK_EQ(t->v->started[0], 1);
	CHECK_EQ(t->v->started[2], 1);
	bus_master(t, false);
	/* Stopped before the config write returned: no more DMA. */
	CHECK_EQ(t->v->stopped[0], 1);
	CHECK_EQ(t->v->stopped[2], 1);
	CHECK(!t->v->dev.queues[0].started && !t->v->dev.queues[2].started);
	CHECK(status(t) & VIRTIO_CONFIG_S_NEEDS_RESET);
	/* Bus mastering back on does not restart them; only a reset does. */
	bus_master(t, true);
	CHECK_EQ(t->v->started[0], 1);
	bus_master(t, false);
	CHECK_EQ(t->v->stopped[0], 1);                   /* nothing left to stop */
	CHECK_EQ(t->v->dev.guest_errors, 1);
	tvp_free(t);
}

TEST(bus_master_toggled_before_driver_ok_changes_nothing)
{
	struct tvp *t = tvp_new();

	negotiate(t);
	queue_setup(t, 0, MSIX_NO_VECTOR);
	bus_master(t, false);
	bus_master(t, true);
	CHECK(!(status(t) & VIRTIO_CONFIG_S_NEEDS_RESET));
	CHECK_EQ(t->v->dev.guest_errors, 0);
	driver_ok(t);
	CHECK_EQ(t->v->started[0], 1);
	tvp_free(t);
}

TEST(no_msix_message_while_bus_mastering_is_off)
{
	struct tvp *t = tvp_new();
	struct virtio_dev *dev = &t->v->dev;

	negotiate(t);
	queue_setup(t, 0, 1);
	w(t, VIRTIO_PCI_COMMON_MSIX, 2, 0);
	msix_enable_vector(t, 0);
	msix_enable_vector(t, 1);
	driver_ok(t);
	bus_master(t, false);
	/* The NEEDS_RESET config interrupt and a late queue interrupt pend;
	 * MSI-X is enabled, so there is no INTx fallback either. */
	virtio_signal_queue(dev, 0);
	CHECK_EQ(efd_count(t->vp.msix.v[0].fd), 0);
	CHECK_EQ(efd_count(t->vp.msix.v[1].fd), 0);
	CHECK_EQ(efd_count(t->vp.intx_fd), 0);
	CHECK(msix_pending(&t->vp.msix, 0));
	CHECK(msix_pending(&t->vp.msix, 1));
	bus_master(t, true);
	CHECK_EQ(efd_count(t->vp.msix.v[0].fd), 1);
	CHECK_EQ(efd_count(t->vp.msix.v[1].fd), 1);
	tvp_free(t);
}

TEST(device_reset_clears_pending_msix_vectors)
{
	struct tvp *t = tvp_new();
	struct virtio_dev *dev = &t->v->dev;
	uint8_t b[4];

	negotiate(t);
	queue_setup(t, 0, 1);
	w(t, VIRTIO_PCI_COMMON_MSIX, 2, 0);
	msix_enable_vector(t, 0);
	msix_enable_vector(t, 1);
	pci_cfg_write16(&t->vp.pci, t->vp.msix.cap + PCI_MSIX_FLAGS,
			PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
	virtio_signal_queue(dev, 0);
	dev->tops->signal_config(dev);
	msix_bar_read(&t->vp.msix, VIRTIO_PCI_MSIX_PBA, b, 4);
	CHECK_EQ(le32_load(b), 0x3);
	w(t, VIRTIO_PCI_COMMON_STATUS, 1, 0);
	msix_bar_read(&t->vp.msix, VIRTIO_PCI_MSIX_PBA, b, 4);
	CHECK_EQ(le32_load(b), 0);
	/* The new driver instance unmasks: nothing of the old one fires. */
	pci_cfg_write16(&t->vp.pci, t->vp.msix.cap + PCI_MSIX_FLAGS, PCI_MSIX_FLAGS_ENABLE);
	CHECK_EQ(efd_count(t->vp.msix.v[0].fd), 0);
	CHECK_EQ(efd_count(t->vp.msix.v[1].fd), 0);
	tvp_free(t);
}

/* Every BAR4 move binds the queue notify ioeventfds again; when KVM
 * refuses (here: there is no KVM), the guest could have that logged at
 * will. One line per function, each failure counted, and the count in
 * --stats. */
TEST(notify_bind_failures_on_bar_moves_are_logged_once_and_counted_in_stats)
{
	struct tvp *t = tvp_new();
	struct pci_bus bus;
	struct check_log cl = { 0 };
	struct log_sink sink = { .fn = check_log_line, .opaque = &cl };
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	CHECK_EQ(iobus_init(&t->vm.pio), 0);
	CHECK_EQ(iobus_init(&t->vm.mmio), 0);
	CHECK_EQ(pci_bus_init(&bus, &t->vm, 0xe0000000, 0xfe000000, 20, NULL, 0), 0);
	t->vp.pci.log = &sink;
	CHECK_EQ(pci_bus_add(&bus, &t->vp.pci), 0);
	vtr_attach(&t->vp.t, &t->vm);
	t->vp.bus = &bus;               /* as virtio_pci_attach leaves it */
	pci_cfg_write16(&t->vp.pci, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	CHECK(t->vp.pci.bars[VIRTIO_PCI_BAR].mapped);
	CHECK_EQ(cl.lines, 1);
	CHECK_EQ(cl.level, LOG_WARNING);
	CHECK(strstr(cl.last, "pci 00:01.0 (virtio-null): cannot bind queue notify ioeventfds at "));
	CHECK(strstr(cl.last, "; kicks take the slow path (the first of its kind on this function"));
	pci_cfg_write16(&t->vp.pci, PCI_COMMAND, PCI_COMMAND_MASTER);
	pci_cfg_write16(&t->vp.pci, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	CHECK_EQ(cl.lines, 1);
	CHECK_EQ(pci_guest_errors(&t->vp.pci), 2);
	/* The kicks still work, through the BAR write. */
	w(t, VIRTIO_PCI_NOTIFY_OFF + VIRTIO_PCI_NOTIFY_MULT, 2, 1);
	CHECK_EQ(efd_count(t->v->dev.queues[1].kick_fd), 1);
	CHECK_EQ(vtr_register(&t->vp.t), 0);
	f = open_memstream(&buf, &len);
	CHECK(f);
	{
		struct json j_;

		json_init(&j_, f);
		t->vm.devices[0].ops->stats_json(t->vm.devices[0].dev, &j_);
	}
	fclose(f);
	CHECK(strstr(buf, ",\"slot\":1,\"pci_guest_errors\":2,\"msix_fired\":0,"));
	free(buf);
	t->vp.bus = NULL;
	pci_bus_destroy(&bus);
	iobus_destroy(&t->vm.pio);
	iobus_destroy(&t->vm.mmio);
	tvp_free(t);
}
