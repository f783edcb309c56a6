/* Device state from a snapshot (the body of a device's DEV section, as
 * vmm/lib/snapshot.c hands it to the device's vm_device_ops.load) loaded
 * into a fresh device, as a restore does: a virtio-pci function of the
 * null device with 3 queues (devices/virtio_transport.c vtr_vm_load,
 * virtio_pci.c vp_load, pci.c pci_dev_load_begin/_finish, msix.c
 * msix_load, virtio.c virtio_load, virtq.c virtq_set_pos) on a PCI bus of
 * a KVM-less struct vm, or the 16550A UART (serial.c). The reader runs
 * over the input directly (a snap_r: what snap_find gives a device once
 * snap_open checked the file's framing and checksums, which fuzz_snap
 * covers), so every byte of the state is the fuzzer's.
 *
 * The input: a mode byte, then
 *  - virtio-pci (even): a u16 length, that many bytes of state, then
 *    steps on the restored device (fuzz_vnull.h): bytes written into
 *    guest RAM (32 KiB; the rings the state points at) and the queues
 *    served by the harness, their owner (popped, pushed, published),
 *    then every queue served until it is quiet;
 *  - UART (odd): the state.
 *
 * Invariants (besides ASan/UBSan):
 *  - a load returns 0 or a negative errno with a one-line message;
 *  - a load that fails starts no queue (none started, queue_start never
 *    called); a UART load that fails changes no register, FIFO or
 *    interrupt line;
 *  - after any load: a ready queue's rings lie wholly in guest RAM;
 *    queue_start / queue_stop alternate; a packed queue's positions lie
 *    in its ring; every MSI-X vector number the transport holds is in the
 *    table or NO_VECTOR; no pending bit beyond the table; the UART's
 *    FIFO holds at most what its FCR allows (16 bytes, 1 with the FIFO
 *    off) and the room it reports for input is at most 16, its LSR
 *    error bits are only OE/PE/FE/BI and its FCR only what a guest's
 *    write keeps, its interrupt line is what its registers say, and its
 *    FIFO reads back the state's bytes in order, LSR showing no data
 *    ready once it is empty;
 *  - the device still answers: config space and the common configuration
 *    read as the function's, the UART's registers as written;
 *  - a restored device, once its queues are served and quiet, saves
 *    again (0), and that state loads into another fresh device, which
 *    saves the same bytes (the UART: always);
 *  - a device reset (status 0) leaves no queue ready or started and no
 *    MSI-X bit pending, and a driver initialises the device again from
 *    there up to DRIVER_OK with a running queue. */
#include "tests/fuzz/fuzz_vnull.h"
#include "devices/serial.h"
#include "devices/virtio_pci.h"
#include "devices/virtio_transport.h"
#include "vmm/base/snap.h"
#include "vmm/kvm/vm.h"

#define NQ 3
#define NVEC (NQ + 1)
#define MMIO_BASE 0xe0000000ULL
#define MMIO_END  0xfe000000ULL
#define COM1 0x3f8
#define T_DEV SNAP_TAG('D', 'E', 'V', ' ')
/* The null device's own feature bits offered: bit 3 of device space. */
#define FEATURES VIRTIO_BIT(3)

static char err[1024];

static void check_refusal(int ret)
{
	FZ_ASSERT(ret <= 0);
	if (!ret)
		return;
	FZ_ASSERT(err[0]);
	FZ_ASSERT(!strchr(err, '\n'));
}

/* ---- virtio-pci --------------------------------------------------------- */

struct tp {
	struct vm vm;
	struct pci_bus bus;
	struct vnull *v;
	struct virtio_pci *vp;          /* the VM's: freed by its destroy */
	unsigned idx;
	unsigned stops[NQ];
};

static struct tp *tp_new(void)
{
	struct tp *t = calloc(1, sizeof(*t));

	FZ_ASSERT(t);
	t->vm.vm_fd = t->vm.kvm_fd = -1;
	FZ_ASSERT(iobus_init(&t->vm.pio) == 0);
	FZ_ASSERT(iobus_init(&t->vm.mmio) == 0);
	FZ_ASSERT(pci_bus_init(&t->bus, &t->vm, MMIO_BASE, MMIO_END, 20, arch_layout.fixed_mmio,
			       arch_layout.nfixed_mmio) == 0);
	t->v = fv_new(NQ, FEATURES);
	t->vp = calloc(1, sizeof(*t->vp));
	FZ_ASSERT(t->vp);
	FZ_ASSERT(virtio_pci_init(t->vp, &t->v->dev, &t->vm) == 0);
	vtr_attach(&t->vp->t, &t->vm);
	FZ_ASSERT(pci_bus_add(&t->bus, &t->vp->pci) == 0);
	t->vp->bus = &t->bus;
	t->idx = t->vm.ndevices;
	FZ_ASSERT(vtr_register(&t->vp->t) == 0);
	return t;
}

static void tp_free(struct tp *t)
{
	void *dev = t->vm.devices[t->idx].dev;

	t->vm.devices[t->idx].ops->stop(dev);
	t->vm.devices[t->idx].ops->destroy(dev);
	pci_bus_destroy(&t->bus);
	iobus_destroy(&t->vm.pio);
	iobus_destroy(&t->vm.mmio);
	fv_free(t->v);
	free(t);
}

static int tp_load(struct tp *t, const uint8_t *p, size_t n)
{
	struct snap_r r = { .p = p, .len = n, .tag = T_DEV };
	int ret;

	err[0] = '\0';
	ret = t->vm.devices[t->idx].ops->load(t->vm.devices[t->idx].dev, &r, err, sizeof(err));
	check_refusal(ret);
	return ret;
}

/* The device's state as the snapshot code saves it; 0 or the save's
 * error. *out malloc'd. */
static int dev_save(struct vm *vm, unsigned idx, uint8_t **out, size_t *len)
{
	struct snap_w w;
	struct snap_file f;
	struct snap_r r;
	uint8_t *img;
	size_t ilen;
	int ret;

	snap_w_init(&w);
	snap_begin(&w, T_DEV, 0);
	err[0] = '\0';
	ret = vm->devices[idx].ops->save(vm->devices[idx].dev, &w, err, sizeof(err));
	if (ret) {
		check_refusal(ret);
		snap_w_free(&w);
		return ret;
	}
	snap_end(&w);
	FZ_ASSERT(snap_w_image(&w, &img, &ilen) == 0);
	snap_w_free(&w);
	FZ_ASSERT(snap_open(&f, img, ilen, err, sizeof(err)) == 0);
	FZ_ASSERT(snap_find(&f, T_DEV, 0, &r) == 0);
	*out = malloc(r.len + 1);
	FZ_ASSERT(*out);
	memcpy(*out, r.p, r.len);
	*len = r.len;
	free(img);
	return 0;
}

static uint64_t bar_r(struct tp *t, unsigned off, unsigned len)
{
	uint8_t b[8];

	virtio_pci_bar_read(t->vp, off, b, len);
	return le_load_n(b, len);
}

static void bar_w(struct tp *t, unsigned off, unsigned len, uint64_t v)
{
	uint8_t b[8];

	le_store_n(b, len, v);
	virtio_pci_bar_write(t->vp, off, b, len);
}

static void tp_check(struct tp *t)
{
	struct virtio_dev *dev = &t->v->dev;
	struct msix *m = &t->vp->msix;

	fv_check(t->v, t->stops);
	for (unsigned q = 0; q < NQ; q++) {
		const struct virtq *vq = &dev->queues[q].vq;
		uint16_t vec = __atomic_load_n(&dev->queues[q].msix_vector, __ATOMIC_RELAXED);

		FZ_ASSERT(vec < m->nvec || vec == MSIX_NO_VECTOR);
		if (dev->queues[q].started)
			FZ_ASSERT(vq->ready && (dev->status & VIRTIO_CONFIG_S_DRIVER_OK));
		if (vq->ready && vq->packed)
			FZ_ASSERT(vq->last_avail < vq->size && vq->used_idx < vq->size &&
				  vq->pending_pos < vq->size);
	}
	FZ_ASSERT(t->vp->config_vector < m->nvec || t->vp->config_vector == MSIX_NO_VECTOR);
	FZ_ASSERT((m->pba[0] >> m->nvec) == 0);
	/* Still the function it was made as. */
	FZ_ASSERT(pci_cfg_read32(&t->vp->pci, PCI_VENDOR_ID) ==
		  ((VIRTIO_PCI_DEVICE_BASE + 0x7fu) << 16 | VIRTIO_PCI_VENDOR));
	FZ_ASSERT(bar_r(t, VIRTIO_PCI_COMMON_NUMQ, 2) == NQ);
	FZ_ASSERT(bar_r(t, VIRTIO_PCI_COMMON_STATUS, 1) == virtio_get_status(dev));
}

/* The queues' owner: every started queue drained, each chain handed
 * back, published (the interrupt when due), as fv_serve does. */
static void tp_serve(struct tp *t)
{
	static struct virtq_chain c;

	for (unsigned q = 0; q < NQ; q++) {
		struct virtio_queue *vq = &t->v->dev.queues[q];
		bool any = false;
		int r = 0;

		if (!vq->started)
			continue;
		for (unsigned i = 0; i < 2u * VNULL_QMAX && (r = virtq_pop(&vq->vq, &c)) > 0; i++) {
			virtq_push(&vq->vq, c.head, 0);
			any = true;
		}
		if (r < 0)
			virtio_dev_needs_reset(&t->v->dev);
		if (any && virtq_publish(&vq->vq))
			t->v->dev.tops->signal_queue(&t->v->dev, q);
		tp_check(t);
	}
}

/* Reset, then a driver's initialisation with queue 0 up to DRIVER_OK,
 * then reset again. */
static void tp_reset_and_reinit(struct tp *t)
{
	struct virtio_dev *dev = &t->v->dev;
	const uint64_t ram = FV_RAM_GPA;

	bar_w(t, VIRTIO_PCI_COMMON_STATUS, 1, 0);
	FZ_ASSERT(bar_r(t, VIRTIO_PCI_COMMON_STATUS, 1) == 0);
	for (unsigned q = 0; q < NQ; q++) {
		FZ_ASSERT(!dev->queues[q].vq.ready && !dev->queues[q].started);
		FZ_ASSERT(t->v->started[q] == t->v->stopped[q]);
	}
	FZ_ASSERT(t->vp->msix.pba[0] == 0);
	tp_check(t);
	pci_cfg_write16(&t->vp->pci, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	bar_w(t, VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	bar_w(t, VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	bar_w(t, VIRTIO_PCI_COMMON_GFSELECT, 4, 0);
	bar_w(t, VIRTIO_PCI_COMMON_GF, 4, 0);
	bar_w(t, VIRTIO_PCI_COMMON_GFSELECT, 4, 1);
	bar_w(t, VIRTIO_PCI_COMMON_GF, 4, 1);          /* VERSION_1 */
	bar_w(t, VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
	      VIRTIO_CONFIG_S_FEATURES_OK);
	FZ_ASSERT(bar_r(t, VIRTIO_PCI_COMMON_STATUS, 1) & VIRTIO_CONFIG_S_FEATURES_OK);
	bar_w(t, VIRTIO_PCI_COMMON_Q_SELECT, 2, 0);
	bar_w(t, VIRTIO_PCI_COMMON_Q_SIZE, 2, 16);
	bar_w(t, VIRTIO_PCI_COMMON_Q_DESCLO, 8, ram);
	bar_w(t, VIRTIO_PCI_COMMON_Q_AVAILLO, 8, ram + 0x400);
	bar_w(t, VIRTIO_PCI_COMMON_Q_USEDLO, 8, ram + 0x800);
	bar_w(t, VIRTIO_PCI_COMMON_Q_ENABLE, 2, 1);
	FZ_ASSERT(bar_r(t, VIRTIO_PCI_COMMON_Q_ENABLE, 2) == 1);
	bar_w(t, VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
	      VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
	FZ_ASSERT(bar_r(t, VIRTIO_PCI_COMMON_STATUS, 1) ==
		  (VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
		   VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK));
	FZ_ASSERT(dev->queues[0].started);
	tp_check(t);
	bar_w(t, VIRTIO_PCI_COMMON_STATUS, 1, 0);
	FZ_ASSERT(!dev->queues[0].started);
	tp_check(t);
}

static void run_virtio(struct fz *in)
{
	struct tp *t = tp_new(), *u;
	size_t n = fz_u16(in), l1, l2;
	uint8_t *state, *s1, *s2;
	unsigned steps = 0;
	int ret;

	if (n > fz_left(in))
		n = fz_left(in);
	/* A block of the state's own size: ASan sees a read past it. */
	state = malloc(n ? n : 1);
	FZ_ASSERT(state);
	fz_bytes(in, state, n);
	ret = tp_load(t, state, n);
	free(state);
	if (ret)
		for (unsigned q = 0; q < NQ; q++)
			FZ_ASSERT(!t->v->dev.queues[q].started && t->v->started[q] == 0);
	tp_check(t);
	while (fz_left(in) && ++steps < 4096) {
		if (fz_u8(in) & 1)
			fv_serve(t->v, in);
		else
			fv_poke(t->v, in);
		tp_check(t);
	}
	if (!ret) {
		bool needs_reset;

		tp_serve(t);
		needs_reset = __atomic_load_n(&t->v->dev.needs_reset, __ATOMIC_ACQUIRE);
		/* Quiet now: it saves, and what it saves loads. */
		FZ_ASSERT(dev_save(&t->vm, t->idx, &s1, &l1) == 0);
		u = tp_new();
		memcpy(u->v->d.ram, t->v->d.ram, FV_RAM_SIZE);
		FZ_ASSERT(tp_load(u, s1, l1) == 0);
		tp_check(u);
		FZ_ASSERT(dev_save(&u->vm, u->idx, &s2, &l2) == 0);
		/* The same state (a device that needs a reset keeps no
		 * position: its queues are not running). */
		if (!needs_reset)
			FZ_ASSERT(l1 == l2 && !memcmp(s1, s2, l1));
		free(s1);
		free(s2);
		tp_free(u);
	}
	tp_reset_and_reinit(t);
	tp_free(t);
}

/* ---- the UART ----------------------------------------------------------- */

struct tu {
	struct vm vm;
	unsigned idx;
	struct serial *s;
};

static struct tu *tu_new(void)
{
	struct tu *t = calloc(1, sizeof(*t));

	FZ_ASSERT(t);
	t->vm.vm_fd = t->vm.kvm_fd = -1;
	FZ_ASSERT(iobus_init(&t->vm.pio) == 0);
	FZ_ASSERT(iobus_init(&t->vm.mmio) == 0);
	t->idx = t->vm.ndevices;
	FZ_ASSERT(serial_create(&t->vm, COM1, 4, &t->s) == 0);
	return t;
}

static void tu_free(struct tu *t)
{
	t->vm.devices[t->idx].ops->destroy(t->vm.devices[t->idx].dev);
	iobus_destroy(&t->vm.pio);
	iobus_destroy(&t->vm.mmio);
	free(t);
}

static int tu_load(struct tu *t, const uint8_t *p, size_t n)
{
	struct snap_r r = { .p = p, .len = n, .tag = T_DEV };
	int ret;

	err[0] = '\0';
	ret = t->vm.devices[t->idx].ops->load(t->vm.devices[t->idx].dev, &r, err, sizeof(err));
	check_refusal(ret);
	return ret;
}

static uint8_t uin(struct tu *t, unsigned reg)
{
	uint8_t b = 0;

	FZ_ASSERT(iobus_access(&t->vm.pio, COM1 + reg, &b, 1, false));
	return b;
}

static void uout(struct tu *t, unsigned reg, uint8_t v)
{
	FZ_ASSERT(iobus_access(&t->vm.pio, COM1 + reg, &v, 1, true));
}

/* The registers, the FIFO in order, the line. */
struct uart_regs {
	uint8_t ier, lcr, mcr, lsr_err, msr, scr, fcr, dll, dlm;
	bool thr_ipending, irq_level;
	unsigned rx_count;
	uint8_t rx[SERIAL_FIFO_SIZE];
};

static void uart_regs(const struct serial *s, struct uart_regs *u)
{
	memset(u, 0, sizeof(*u));
	u->ier = s->ier;
	u->lcr = s->lcr;
	u->mcr = s->mcr;
	u->lsr_err = s->lsr_err;
	u->msr = s->msr;
	u->scr = s->scr;
	u->fcr = s->fcr;
	u->dll = s->dll;
	u->dlm = s->dlm;
	u->thr_ipending = s->thr_ipending;
	u->irq_level = s->irq_level;
	u->rx_count = s->rx_count;
	for (unsigned i = 0; i < s->rx_count && i < SERIAL_FIFO_SIZE; i++)
		u->rx[i] = s->rx[(s->rx_head + i) % SERIAL_FIFO_SIZE];
}

static void run_uart(struct fz *in)
{
	struct tu *t = tu_new(), *u;
	struct uart_regs before, after;
	size_t n = fz_left(in);
	uint8_t *body = malloc(n ? n : 1), *s1, *s2, v;
	size_t l1, l2;
	int ret;

	FZ_ASSERT(body);
	memcpy(body, in->p, n);
	uart_regs(t->s, &before);
	ret = tu_load(t, body, n);
	uart_regs(t->s, &after);
	/* Loaded or not, the input it takes fits its FIFO. */
	FZ_ASSERT(console_port_rx_room(&t->s->con) <= SERIAL_FIFO_SIZE);
	if (ret) {
		FZ_ASSERT(!memcmp(&before, &after, sizeof(before)));
	} else {
		FZ_ASSERT(after.rx_count <= ((after.fcr & UART_FCR_ENABLE) ? SERIAL_FIFO_SIZE : 1));
		FZ_ASSERT(!(after.lsr_err & ~0x1e) && !(after.fcr & ~(UART_FCR_ENABLE | 0xc0)));
		FZ_ASSERT(after.ier <= 0x0f && after.mcr <= 0x1f);
		/* As saved: ten registers, the count, the bytes. */
		FZ_ASSERT(n >= 11 && after.rx_count == body[10]);
		FZ_ASSERT(!memcmp(after.rx, body + 11, after.rx_count));
		/* A restored UART saves what it was given (normalised). */
		FZ_ASSERT(dev_save(&t->vm, t->idx, &s1, &l1) == 0);
		u = tu_new();
		FZ_ASSERT(tu_load(u, s1, l1) == 0);
		FZ_ASSERT(console_port_rx_room(&u->s->con) <= SERIAL_FIFO_SIZE);
		FZ_ASSERT(dev_save(&u->vm, u->idx, &s2, &l2) == 0);
		FZ_ASSERT(l1 == l2 && !memcmp(s1, s2, l1));
		free(s1);
		free(s2);
		tu_free(u);
		/* The line is what the registers say; the FIFO reads back in
		 * order. */
		v = uin(t, UART_IIR);
		FZ_ASSERT(after.irq_level == !(v & UART_IIR_NO_INT));
		uout(t, UART_LCR, after.lcr & ~UART_LCR_DLAB);
		for (unsigned i = 0; i < after.rx_count; i++) {
			FZ_ASSERT(uin(t, UART_LSR) & UART_LSR_DR);
			FZ_ASSERT(uin(t, UART_RBR) == after.rx[i]);
		}
		/* Empty: no data ready, whatever LSR bits the state held. */
		FZ_ASSERT(!(uin(t, UART_LSR) & UART_LSR_DR));
	}
	/* It answers: every register reads, the scratch register holds. */
	for (unsigned reg = 0; reg < 8; reg++)
		uin(t, reg);
	uout(t, UART_SCR, 0xa5);
	FZ_ASSERT(uin(t, UART_SCR) == 0xa5);
	free(body);
	tu_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = { data, size };

	if (fz_u8(&in) & 1)
		run_uart(&in);
	else
		run_virtio(&in);
	return 0;
}

/* --- seeds: real saved states ------------------------------------------- */

/* mode, the state, then (virtio) guest RAM's first rlen bytes written
 * back in pokes of 31 and queue 0 served. */
static void seed_state(const char *name, uint8_t mode, const uint8_t *state, size_t n,
		       const uint8_t *ram, size_t rlen)
{
	static struct fz_buf s;

	s.n = 0;
	fzb_u8(&s, mode);
	if (!(mode & 1))
		fzb_u16(&s, (uint16_t)n);
	fzb_bytes(&s, state, n);
	for (size_t off = 0; ram && off < rlen; off += 31) {
		uint8_t len = (uint8_t)(rlen - off < 31 ? rlen - off : 31);

		fzb_u8(&s, 0);
		fzb_u16(&s, (uint16_t)off);
		fzb_u8(&s, len);
		fzb_bytes(&s, ram + off, len);
	}
	if (ram) {
		fzb_u8(&s, 1);
		fzb_u8(&s, 0);          /* queue 0 */
		fzb_u8(&s, 4);          /* up to 4 chains */
	}
	fuzz_seed(name, s.b, s.n);
}

/* A driver's probe (Linux's order) with want, queues 0 and 1 of 16
 * (queue 2 left off), DRIVER_OK unless !ok, then requests on both
 * queues served and completed; the state saved with the RAM the rings
 * use. */
static void seed_virtio(const char *name, uint64_t want, bool ok)
{
	struct tp *t = tp_new();
	struct vdrv *d = &t->v->d;
	struct msix *m = &t->vp->msix;
	uint64_t f, buf;
	uint8_t *state, b[4];
	size_t n;

	pci_cfg_write16(&t->vp->pci, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	pci_cfg_write16(&t->vp->pci, m->cap + PCI_MSIX_FLAGS, PCI_MSIX_FLAGS_ENABLE);
	for (unsigned v = 0; v < NVEC; v++) {
		le32_store(b, 0xfee00000u);
		msix_bar_write(m, m->table_off + v * 16u + PCI_MSIX_ENTRY_LOWER_ADDR, b, 4);
		le32_store(b, 0x40 + v);
		msix_bar_write(m, m->table_off + v * 16u + PCI_MSIX_ENTRY_DATA, b, 4);
		le32_store(b, v == 2 ? 1 : 0);          /* vector 2 stays masked */
		msix_bar_write(m, m->table_off + v * 16u + PCI_MSIX_ENTRY_VECTOR_CTRL, b, 4);
	}
	bar_w(t, VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	bar_w(t, VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	f = want | VIRTIO_BIT(VIRTIO_F_VERSION_1);
	bar_w(t, VIRTIO_PCI_COMMON_GFSELECT, 4, 0);
	bar_w(t, VIRTIO_PCI_COMMON_GF, 4, (uint32_t)f);
	bar_w(t, VIRTIO_PCI_COMMON_GFSELECT, 4, 1);
	bar_w(t, VIRTIO_PCI_COMMON_GF, 4, (uint32_t)(f >> 32));
	bar_w(t, VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
	      VIRTIO_CONFIG_S_FEATURES_OK);
	FZ_ASSERT(bar_r(t, VIRTIO_PCI_COMMON_STATUS, 1) & VIRTIO_CONFIG_S_FEATURES_OK);
	d->features = f;
	for (unsigned q = 0; q < 2; q++) {
		vdrv_queue_layout(d, q, 16);
		bar_w(t, VIRTIO_PCI_COMMON_Q_SELECT, 2, q);
		bar_w(t, VIRTIO_PCI_COMMON_Q_SIZE, 2, 16);
		bar_w(t, VIRTIO_PCI_COMMON_Q_DESCLO, 8, d->q[q].desc);
		bar_w(t, VIRTIO_PCI_COMMON_Q_AVAILLO, 8, d->q[q].avail);
		bar_w(t, VIRTIO_PCI_COMMON_Q_USEDLO, 8, d->q[q].used);
		bar_w(t, VIRTIO_PCI_COMMON_Q_MSIX, 2, q + 1);
		bar_w(t, VIRTIO_PCI_COMMON_Q_ENABLE, 2, 1);
	}
	bar_w(t, VIRTIO_PCI_COMMON_MSIX, 2, 0);
	buf = vdrv_alloc(d, 64, 16);
	if (ok) {
		bar_w(t, VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE |
		      VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK |
		      VIRTIO_CONFIG_S_DRIVER_OK);
		for (unsigned i = 0; i < 11; i++) {
			unsigned q = i % 3 ? 0 : 1;
			struct vdrv_sg sg[2] = { { buf, 16, false }, { buf + 32, 16, true } };
			uint32_t id, len;

			FZ_ASSERT(vdrv_add(d, q, sg, 2, false) >= 0);
			tp_serve(t);
			FZ_ASSERT(vdrv_get_used(d, q, &id, &len) == 1);
		}
		/* One more made available and not served: served after the
		 * restore. */
		{
			struct vdrv_sg sg[2] = { { buf, 16, false }, { buf + 32, 16, true } };

			FZ_ASSERT(vdrv_add(d, 0, sg, 2, false) >= 0);
		}
	}
	FZ_ASSERT(dev_save(&t->vm, t->idx, &state, &n) == 0);
	seed_state(name, 0, state, n, d->ram, (size_t)(d->brk - d->ram_gpa));
	free(state);
	tp_free(t);
}

static void fuzz_seeds(void)
{
	struct tu *t;
	uint8_t *state;
	size_t n;

	seed_virtio("virtio_split", VIRTIO_BIT(VIRTIO_RING_F_INDIRECT_DESC) | FEATURES, true);
	seed_virtio("virtio_packed", VIRTIO_BIT(VIRTIO_F_RING_PACKED) |
		    VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX), true);
	seed_virtio("virtio_features_ok", 0, false);

	/* A UART with its FIFO on, input waiting across the ring's end,
	 * interrupts enabled. */
	t = tu_new();
	uout(t, UART_LCR, UART_LCR_DLAB | 3);
	uout(t, UART_DLL, 1);
	uout(t, UART_LCR, 3);
	uout(t, UART_FCR, UART_FCR_ENABLE);
	uout(t, UART_IER, UART_IER_RDI | UART_IER_THRI);
	FZ_ASSERT(console_port_rx_push(&t->s->con, (const uint8_t *)"0123456789", 10) == 10);
	for (unsigned i = 0; i < 8; i++)
		uin(t, UART_RBR);
	FZ_ASSERT(console_port_rx_push(&t->s->con, (const uint8_t *)"abcdefghij", 10) == 10);
	FZ_ASSERT(dev_save(&t->vm, t->idx, &state, &n) == 0);
	seed_state("uart", 1, state, n, NULL, 0);
	free(state);
	tu_free(t);
	t = tu_new();
	FZ_ASSERT(dev_save(&t->vm, t->idx, &state, &n) == 0);
	seed_state("uart_reset", 1, state, n, NULL, 0);
	free(state);
	tu_free(t);
}
