/* Device state in snapshots, without KVM: each device's save, put into a
 * snapshot file (snap_w_image), opened (snap_open) and loaded into a
 * fresh device of the same shape, as vmm/lib/snapshot.c does it (a DEV
 * section: the device's kind, then its state, read to its end). The
 * UART, the i8042, a PCI function's config space, MSI-X, and a
 * virtio-pci function of the null device (tests/unit/vnulldev.h) on a
 * PCI bus of a KVM-less struct vm, driven by the fake driver's ring code
 * (tests/unit/vdrv.h) through the common configuration registers, the
 * test itself being the queues' owner; a virtio-blk disk's capacity.
 * What a damaged or foreign saved state holds is refused, with a
 * one-line message, leaving no queue running. And the helpers the
 * snapshot code brought: virtq_get_pos / virtq_set_pos, kv_format,
 * kv_format_check and err_prefix. */
#include <errno.h>
#include <fcntl.h>
#include <linux/virtio_mmio.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "tests/unit/disk_spec.h"
#include "tests/unit/vnulldev.h"
#include "devices/i8042.h"
#include "devices/msix.h"
#include "devices/pci.h"
#include "devices/serial.h"
#include "devices/blk_queue.h"
#include "devices/virtio_blk.h"
#include "devices/virtio_mmio.h"
#include "devices/virtio_pci.h"
#include "devices/virtio_transport.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/keyval.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/vm.h"
#include "vmm/mvm.h"

#define T_DEV SNAP_TAG('D', 'E', 'V', ' ')
/* x86's PCI window and INTx wiring. */
#define T_MMIO_BASE 0xe0000000ULL
#define T_MMIO_END  0xfe000000ULL
#define T_INTX_BASE 20

static char err[1024];

/* ---- saved states ------------------------------------------------------- */

/* A snapshot file holding one DEV section, and where its payload lies. */
struct saved {
	uint8_t *img;
	size_t len;
	const uint8_t *body;
	size_t blen;
};

static void saved_open(struct saved *s, unsigned inst)
{
	struct snap_file f;
	struct snap_r r;

	CHECK_EQ(snap_open(&f, s->img, s->len, err, sizeof(err)), 0);
	CHECK_EQ(snap_find(&f, T_DEV, inst, &r), 0);
	s->body = r.p;
	s->blen = r.len;
}

/* The file image of w (freed). */
static struct saved saved_image(struct snap_w *w, unsigned inst)
{
	struct saved s;

	CHECK_EQ(w->err, 0);
	CHECK_EQ(snap_w_image(w, &s.img, &s.len), 0);
	snap_w_free(w);
	saved_open(&s, inst);
	return s;
}

/* A file whose DEV section inst holds body as given (a state edited). */
static struct saved saved_from(const uint8_t *body, size_t blen, unsigned inst)
{
	struct snap_w w;

	snap_w_init(&w);
	snap_begin(&w, T_DEV, inst);
	snap_put_bytes(&w, body, blen);
	snap_end(&w);
	return saved_image(&w, inst);
}

/* s's payload with the le `len`-byte field at off set to v. */
static struct saved saved_edit(const struct saved *s, size_t off, unsigned len, uint64_t v)
{
	uint8_t *b = malloc(s->blen);
	struct saved e;

	CHECK(b);
	CHECK(off + len <= s->blen);
	memcpy(b, s->body, s->blen);
	le_store_n(b + off, len, v);
	e = saved_from(b, s->blen, 0);
	free(b);
	return e;
}

static void saved_free(struct saved *s)
{
	free(s->img);
	s->img = NULL;
}

/* Device i of vm saved as the snapshot code saves it: a DEV section with
 * the device's kind, then its state. */
static struct saved save_device(struct vm *vm, unsigned i)
{
	struct snap_w w;

	snap_w_init(&w);
	snap_begin(&w, T_DEV, 0);
	snap_put_str(&w, vm->devices[i].ops->kind);
	err[0] = '\0';
	CHECK_EQ(vm->devices[i].ops->save(vm->devices[i].dev, &w, err, sizeof(err)), 0);
	snap_end(&w);
	return saved_image(&w, 0);
}

/* Load device i of vm from s as the restore does: the kind checked, the
 * device's load, the section read to its end. A refusal comes with a
 * one-line message. */
static int load_device(struct vm *vm, unsigned i, const struct saved *s)
{
	struct snap_file f;
	struct snap_r r;
	char kind[32];
	int ret;

	CHECK_EQ(snap_open(&f, s->img, s->len, err, sizeof(err)), 0);
	CHECK_EQ(snap_find(&f, T_DEV, 0, &r), 0);
	snap_get_str(&r, kind, sizeof(kind));
	CHECK_STR(kind, vm->devices[i].ops->kind);
	err[0] = '\0';
	ret = vm->devices[i].ops->load(vm->devices[i].dev, &r, err, sizeof(err));
	if (ret) {
		CHECK(ret < 0);
		CHECK(err[0]);
		CHECK(!strchr(err, '\n'));
	} else {
		CHECK_EQ(snap_done(&r, err, sizeof(err)), 0);
	}
	return ret;
}

/* ---- the UART ----------------------------------------------------------- */

#define COM1 0x3f8

struct tuart {
	struct vm vm;
	unsigned idx;
	struct serial *s;
};

static struct tuart *tuart_new(void)
{
	struct tuart *t = calloc(1, sizeof(*t));

	CHECK(t);
	CHECK_EQ(vm_init(&t->vm, 1), 0);
	t->idx = t->vm.ndevices;
	CHECK_EQ(serial_create(&t->vm, COM1, 4, &t->s), 0);
	CHECK_STR(t->vm.devices[t->idx].ops->kind, "serial");
	return t;
}

static void tuart_free(struct tuart *t)
{
	t->vm.devices[t->idx].ops->destroy(t->vm.devices[t->idx].dev);
	vm_fini(&t->vm);
	free(t);
}

static uint8_t uin(struct tuart *t, unsigned reg)
{
	uint8_t b = 0;

	CHECK(iobus_access(&t->vm.pio, COM1 + reg, &b, 1, false));
	return b;
}

static void uout(struct tuart *t, unsigned reg, uint8_t v)
{
	CHECK(iobus_access(&t->vm.pio, COM1 + reg, &v, 1, true));
}

/* A guest's UART mid-session: divisor 0x0201, 8 bits with parity,
 * FIFO on, modem lines up, the receive and THRE interrupts enabled, and
 * twelve typed bytes the guest has not read, lying across the end of
 * the FIFO's ring ("89abcdefghij"). */
static void uart_busy(struct tuart *t)
{
	uout(t, UART_LCR, UART_LCR_DLAB | 0x03);
	uout(t, UART_DLL, 0x01);
	uout(t, UART_DLM, 0x02);
	uout(t, UART_LCR, 0x1b);
	uout(t, UART_FCR, UART_FCR_ENABLE);
	uout(t, UART_MCR, UART_MCR_DTR | UART_MCR_RTS | UART_MCR_OUT2);
	uout(t, UART_SCR, 0x5a);
	uout(t, UART_IER, UART_IER_RDI | UART_IER_THRI);
	CHECK_EQ(console_port_rx_push(&t->s->con, (const uint8_t *)"0123456789", 10), 10);
	for (unsigned i = 0; i < 8; i++)
		CHECK_EQ(uin(t, UART_RBR), '0' + i);
	CHECK_EQ(console_port_rx_push(&t->s->con, (const uint8_t *)"abcdefghij", 10), 10);
	CHECK(t->s->rx_head + t->s->rx_count > SERIAL_FIFO_SIZE);
	CHECK(t->s->irq_level);
}

/* What the guest reads of the UART, every register and then the FIFO
 * until LSR says it is empty; n bytes. */
static size_t uart_dump(struct tuart *t, uint8_t *out)
{
	size_t n = 0;
	uint8_t lcr = uin(t, UART_LCR);

	out[n++] = lcr;
	uout(t, UART_LCR, lcr | UART_LCR_DLAB);
	out[n++] = uin(t, UART_DLL);
	out[n++] = uin(t, UART_DLM);
	uout(t, UART_LCR, lcr);
	out[n++] = uin(t, UART_IER);
	out[n++] = uin(t, UART_MCR);
	out[n++] = uin(t, UART_SCR);
	out[n++] = uin(t, UART_MSR);
	out[n++] = uin(t, UART_IIR);
	while (uin(t, UART_LSR) & UART_LSR_DR) {
		CHECK(n < 64);
		out[n++] = uin(t, UART_RBR);
	}
	out[n++] = uin(t, UART_IIR);    /* THRE, once the FIFO is read */
	out[n++] = uin(t, UART_IIR);
	out[n++] = uin(t, UART_LSR);
	return n;
}

TEST(a_uart_with_unread_input_comes_back_with_its_registers_fifo_and_interrupt_line)
{
	struct tuart *a = tuart_new(), *b = tuart_new();
	uint8_t da[64], db[64];
	struct saved s;
	size_t na, nb;

	uart_busy(a);
	s = save_device(&a->vm, a->idx);
	CHECK(!b->s->irq_level);
	CHECK_EQ(load_device(&b->vm, b->idx, &s), 0);
	CHECK(b->s->irq_level);                 /* the line as it was: RDA */
	CHECK_EQ(b->s->rx_count, 12);
	CHECK_EQ(b->s->ier, a->s->ier);
	CHECK_EQ(b->s->lcr, a->s->lcr);
	CHECK_EQ(b->s->mcr, a->s->mcr);
	CHECK_EQ(b->s->fcr, a->s->fcr);
	CHECK_EQ(b->s->dll, a->s->dll);
	CHECK_EQ(b->s->dlm, a->s->dlm);
	CHECK_EQ(b->s->scr, a->s->scr);
	CHECK_EQ(b->s->msr, a->s->msr);
	CHECK_EQ(b->s->thr_ipending, a->s->thr_ipending);
	/* The guest reads the same from both, the FIFO in order. */
	na = uart_dump(a, da);
	nb = uart_dump(b, db);
	CHECK_EQ(nb, na);
	CHECK(!memcmp(da, db, na));
	CHECK(!memcmp(db + 8, "89abcdefghij", 12));
	CHECK_EQ(db[0], 0x1b);
	CHECK_EQ(db[1], 0x01);
	CHECK_EQ(db[2], 0x02);
	CHECK_EQ(db[7], UART_IIR_FIFO | UART_IIR_RDI);
	CHECK_EQ(db[20], UART_IIR_FIFO | UART_IIR_THRI);
	CHECK_EQ(db[21], UART_IIR_FIFO | UART_IIR_NO_INT);
	CHECK(!b->s->irq_level);
	/* Input typed after the restore goes on behind it. */
	CHECK_EQ(console_port_rx_push(&b->s->con, (const uint8_t *)"z", 1), 1);
	CHECK_EQ(uin(b, UART_RBR), 'z');
	saved_free(&s);
	tuart_free(a);
	tuart_free(b);
}

TEST(a_uart_state_with_more_than_sixteen_fifo_bytes_is_refused_and_changes_nothing)
{
	struct tuart *a = tuart_new(), *b = tuart_new();
	struct saved s, bad;
	uint8_t body[64], before[64], after[64];
	size_t nbefore, nafter, k = 0;
	struct snap_r r;

	uart_busy(a);
	s = save_device(&a->vm, a->idx);
	/* The kind, the ten registers, then a count of 17 and 17 bytes. */
	r = (struct snap_r){ .p = s.body, .len = s.blen };
	snap_get_str(&r, (char[16]){ 0 }, 16);
	memcpy(body, s.body, r.off + 10);
	k = r.off + 10;
	body[k++] = SERIAL_FIFO_SIZE + 1;
	for (unsigned i = 0; i <= SERIAL_FIFO_SIZE; i++)
		body[k++] = (uint8_t)('A' + i);
	bad = saved_from(body, k, 0);
	/* b: a guest's own state, which a refused load must leave alone. */
	uout(b, UART_FCR, UART_FCR_ENABLE);
	uout(b, UART_SCR, 0x11);
	uout(b, UART_IER, UART_IER_RDI);
	CHECK_EQ(console_port_rx_push(&b->s->con, (const uint8_t *)"xy", 2), 2);
	CHECK(b->s->irq_level);
	CHECK_EQ(load_device(&b->vm, b->idx, &bad), -EINVAL);
	CHECK(strstr(err, "17 bytes"));
	CHECK(b->s->irq_level);
	/* A twin given the same guest state reads the same as b. */
	nafter = uart_dump(b, after);
	saved_free(&s);
	tuart_free(a);
	a = tuart_new();
	uout(a, UART_FCR, UART_FCR_ENABLE);
	uout(a, UART_SCR, 0x11);
	uout(a, UART_IER, UART_IER_RDI);
	CHECK_EQ(console_port_rx_push(&a->s->con, (const uint8_t *)"xy", 2), 2);
	nbefore = uart_dump(a, before);
	CHECK_EQ(nafter, nbefore);
	CHECK(!memcmp(before, after, nbefore));
	saved_free(&bad);
	tuart_free(a);
	tuart_free(b);
}

TEST(a_uart_state_cut_short_is_refused_and_changes_nothing)
{
	struct tuart *a = tuart_new(), *b = tuart_new();
	struct saved s, cut;
	uint8_t scr;

	uart_busy(a);
	s = save_device(&a->vm, a->idx);
	cut = saved_from(s.body, s.blen - 3, 0);        /* three FIFO bytes missing */
	scr = uin(b, UART_SCR);
	CHECK_EQ(load_device(&b->vm, b->idx, &cut), -EINVAL);
	CHECK_EQ(b->s->rx_count, 0);
	CHECK_EQ(uin(b, UART_SCR), scr);
	CHECK_EQ(b->s->dll, 12);
	CHECK(!b->s->irq_level);
	saved_free(&s);
	saved_free(&cut);
	tuart_free(a);
	tuart_free(b);
}

TEST(a_uart_state_with_its_fifo_off_holding_two_bytes_is_refused_and_a_saved_lsr_keeps_only_its_error_bits)
{
	struct tuart *a = tuart_new(), *b = tuart_new();
	struct saved s, bad, ok, b0, b1;
	uint8_t body[64], lsr;
	struct snap_r r;
	size_t k;

	/* A fresh UART's state (FIFO off, nothing waiting), edited: the
	 * kind, ten registers (LSR's error bits at 3, FCR at 6), the count. */
	s = save_device(&a->vm, a->idx);
	r = (struct snap_r){ .p = s.body, .len = s.blen };
	snap_get_str(&r, (char[16]){ 0 }, 16);
	k = r.off;
	CHECK_EQ(s.blen, k + 11);
	memcpy(body, s.body, s.blen);
	CHECK(!(body[k + 6] & UART_FCR_ENABLE));
	body[k + 10] = 2;                       /* one byte is all it holds */
	body[k + 11] = 'p';
	body[k + 12] = 'q';
	bad = saved_from(body, k + 13, 0);
	/* b: a guest's own state, FIFO off, one byte waiting. */
	uout(b, UART_SCR, 0x22);
	uout(b, UART_IER, UART_IER_RDI);
	CHECK_EQ(console_port_rx_push(&b->s->con, (const uint8_t *)"x", 1), 1);
	CHECK(b->s->irq_level);
	b0 = save_device(&b->vm, b->idx);
	CHECK_EQ(load_device(&b->vm, b->idx, &bad), -EINVAL);
	CHECK(strstr(err, "2 bytes"));
	CHECK(strstr(err, "FIFO off"));
	b1 = save_device(&b->vm, b->idx);
	CHECK_EQ(b1.blen, b0.blen);
	CHECK(!memcmp(b1.body, b0.body, b0.blen));
	CHECK(b->s->irq_level);
	CHECK_EQ(console_port_rx_room(&b->s->con), 0);
	CHECK_EQ(uin(b, UART_RBR), 'x');
	CHECK_EQ(console_port_rx_room(&b->s->con), 1);

	/* Every LSR bit saved, FCR's too, the FIFO empty: the error bits
	 * load (data ready is the FIFO's, THRE the transmitter's), and FCR
	 * as a guest's write keeps it. */
	body[k + 3] = 0xff;
	body[k + 6] = 0xff;
	body[k + 10] = 0;
	ok = saved_from(body, k + 11, 0);
	CHECK_EQ(load_device(&b->vm, b->idx, &ok), 0);
	CHECK_EQ(b->s->lsr_err, 0x1e);
	CHECK_EQ(b->s->fcr, UART_FCR_ENABLE | 0xc0);
	CHECK_EQ(b->s->rx_count, 0);
	CHECK_EQ(console_port_rx_room(&b->s->con), SERIAL_FIFO_SIZE);
	lsr = uin(b, UART_LSR);
	CHECK(!(lsr & UART_LSR_DR));
	CHECK_EQ(lsr, UART_LSR_THRE | UART_LSR_TEMT | 0x1e);
	CHECK_EQ(uin(b, UART_LSR), UART_LSR_THRE | UART_LSR_TEMT);     /* read: cleared */
	saved_free(&s);
	saved_free(&bad);
	saved_free(&ok);
	saved_free(&b0);
	saved_free(&b1);
	tuart_free(a);
	tuart_free(b);
}

/* ---- the i8042 ---------------------------------------------------------- */

struct tkbd {
	struct vm vm;
	unsigned idx;
	struct i8042 *k;
};

static struct tkbd *tkbd_new(void)
{
	struct tkbd *t = calloc(1, sizeof(*t));

	CHECK(t);
	CHECK_EQ(vm_init(&t->vm, 1), 0);
	t->idx = t->vm.ndevices;
	CHECK_EQ(i8042_create(&t->vm, 0x60, NULL), 0);
	CHECK_STR(t->vm.devices[t->idx].ops->kind, "i8042");
	t->k = t->vm.devices[t->idx].dev;
	return t;
}

static void tkbd_free(struct tkbd *t)
{
	t->vm.devices[t->idx].ops->destroy(t->vm.devices[t->idx].dev);
	vm_fini(&t->vm);
	free(t);
}

static uint8_t kin(struct tkbd *t, unsigned port)
{
	uint8_t b = 0;

	CHECK(iobus_access(&t->vm.pio, port, &b, 1, false));
	return b;
}

static void kout(struct tkbd *t, unsigned port, uint8_t v)
{
	CHECK(iobus_access(&t->vm.pio, port, &v, 1, true));
}

/* Linux's probe, paused: the command byte written (0x45), seven replies
 * queued across the end of the queue's ring (FA AB 83 FA AA 45 FF), and
 * a "write keyboard output buffer" command waiting for its data byte. */
static void kbd_busy(struct tkbd *t)
{
	kout(t, 0x64, 0x60);
	kout(t, 0x60, 0x45);
	kout(t, 0x64, 0xaa);
	kout(t, 0x64, 0xab);
	CHECK_EQ(kin(t, 0x60), 0x55);
	CHECK_EQ(kin(t, 0x60), 0x00);
	kout(t, 0x60, 0xf2);
	kout(t, 0x60, 0xff);
	kout(t, 0x64, 0x20);
	kout(t, 0x64, 0xa9);
	kout(t, 0x64, 0xd2);
	CHECK_EQ(t->k->out_count, 7);
	CHECK(t->k->out_head + t->k->out_count > sizeof(t->k->out));
	CHECK(t->k->irq_level);
}

TEST(an_i8042_comes_back_with_its_command_byte_queued_replies_and_pending_command)
{
	struct tkbd *a = tkbd_new(), *b = tkbd_new();
	static const uint8_t want[] = { 0xfa, 0xab, 0x83, 0xfa, 0xaa, 0x45, 0xff, 0x99 };
	struct saved s;

	kbd_busy(a);
	s = save_device(&a->vm, a->idx);
	CHECK(!b->k->irq_level);
	CHECK_EQ(load_device(&b->vm, b->idx, &s), 0);
	CHECK_EQ(b->k->ctr, 0x45);
	CHECK_EQ(b->k->pending_cmd, 0xd2);
	CHECK_EQ(b->k->out_count, 7);
	CHECK(b->k->irq_level);
	CHECK_EQ(kin(b, 0x64), kin(a, 0x64));
	CHECK(kin(b, 0x64) & I8042_STS_OBF);
	/* The waiting command takes the next data byte, queued last. */
	kout(b, 0x60, 0x99);
	for (unsigned i = 0; i < sizeof(want); i++)
		CHECK_EQ(kin(b, 0x60), want[i]);
	CHECK(!(kin(b, 0x64) & I8042_STS_OBF));
	CHECK(!b->k->irq_level);
	saved_free(&s);
	tkbd_free(a);
	tkbd_free(b);
}

TEST(an_i8042_state_with_more_than_eight_queued_bytes_is_refused_and_changes_nothing)
{
	struct tkbd *a = tkbd_new(), *b = tkbd_new();
	struct saved s, bad;
	uint8_t body[64], ctr, status;
	struct snap_r r;
	size_t k;

	kbd_busy(a);
	s = save_device(&a->vm, a->idx);
	r = (struct snap_r){ .p = s.body, .len = s.blen };
	snap_get_str(&r, (char[16]){ 0 }, 16);
	k = r.off + 3;                                  /* ctr, status, pending */
	memcpy(body, s.body, k);
	body[k++] = 9;
	for (unsigned i = 0; i < 9; i++)
		body[k++] = (uint8_t)i;
	bad = saved_from(body, k, 0);
	kout(b, 0x64, 0xaa);                            /* b's own: one reply */
	ctr = b->k->ctr;
	status = kin(b, 0x64);
	CHECK_EQ(load_device(&b->vm, b->idx, &bad), -EINVAL);
	CHECK(strstr(err, "9 bytes"));
	CHECK_EQ(b->k->ctr, ctr);
	CHECK_EQ(b->k->pending_cmd, 0);
	CHECK_EQ(kin(b, 0x64), status);
	CHECK_EQ(b->k->out_count, 1);
	CHECK_EQ(kin(b, 0x60), 0x55);
	saved_free(&s);
	saved_free(&bad);
	tkbd_free(a);
	tkbd_free(b);
}

/* ---- a PCI function's config space -------------------------------------- */

struct tfn_event {
	char what;              /* 'w': config write at a, 'm': BAR a mapped at addr */
	unsigned a;
	uint64_t addr;
};

struct tfn {
	struct vm vm;
	struct pci_bus bus;
	struct pci_dev pd;
	unsigned hits[PCI_NUM_BARS];
	struct tfn_event ev[512];
	unsigned nev;
};

static void tfn_bar_read(void *opaque, uint64_t off, uint8_t *data, unsigned len)
{
	(void)off;
	memset(data, 0xab, len);
	++*(unsigned *)opaque;
}

static void tfn_bar_write(void *opaque, uint64_t off, const uint8_t *data, unsigned len)
{
	(void)off;
	(void)data;
	(void)len;
	++*(unsigned *)opaque;
}

static const struct io_ops tfn_bar_ops = { tfn_bar_read, tfn_bar_write };

static void tfn_config_write(struct pci_dev *pd, unsigned off, unsigned len)
{
	struct tfn *t = pd->opaque;

	(void)len;
	if (t->nev < ARRAY_SIZE(t->ev))
		t->ev[t->nev++] = (struct tfn_event){ 'w', off, 0 };
}

static void tfn_bar_map(struct pci_dev *pd, unsigned bar, uint64_t addr, bool mapped)
{
	struct tfn *t = pd->opaque;

	if (t->nev < ARRAY_SIZE(t->ev))
		t->ev[t->nev++] = (struct tfn_event){ mapped ? 'm' : 'u', bar, addr };
}

static const struct pci_dev_ops tfn_ops = {
	.config_write = tfn_config_write,
	.bar_map = tfn_bar_map,
};

/* A function (vendor 0x1b36, device `device`, class `class`) with a
 * 32-bit BAR0 of 4 KiB and a 64-bit BAR2 of 16 KiB, on bus 0 of a VM of
 * its own, where firmware placed them. */
static struct tfn *tfn_new(uint16_t device, uint32_t class)
{
	struct tfn *t = calloc(1, sizeof(*t));

	CHECK(t);
	CHECK_EQ(vm_init(&t->vm, 1), 0);
	CHECK_EQ(pci_bus_init(&t->bus, &t->vm, T_MMIO_BASE, T_MMIO_END, T_INTX_BASE, NULL, 0), 0);
	pci_dev_init(&t->pd, "tfn", 0x1b36, device, class, 2, 0x1b36, 7, &tfn_ops, t);
	CHECK_EQ(pci_dev_set_bar(&t->pd, 0, 0x1000, 0, &tfn_bar_ops, &t->hits[0]), 0);
	CHECK_EQ(pci_dev_set_bar(&t->pd, 2, 0x4000, PCI_BASE_ADDRESS_MEM_TYPE_64, &tfn_bar_ops,
				 &t->hits[2]), 0);
	CHECK_EQ(pci_bus_add(&t->bus, &t->pd), 0);
	t->nev = 0;
	return t;
}

static void tfn_free(struct tfn *t)
{
	pci_bus_remove(&t->bus, &t->pd);
	pci_bus_destroy(&t->bus);
	vm_fini(&t->vm);
	free(t);
}

/* The guest moved both BARs away from firmware's places, set the
 * interrupt line, and turned memory decode on. */
#define MOVED_BAR0 0xe8000000u
#define MOVED_BAR2 0xe9000000u

static void tfn_guest(struct tfn *t)
{
	pci_cfg_write32(&t->pd, PCI_BASE_ADDRESS_0, MOVED_BAR0);
	pci_cfg_write32(&t->pd, PCI_BASE_ADDRESS_2, MOVED_BAR2);
	pci_cfg_write32(&t->pd, PCI_BASE_ADDRESS_3, 0);
	pci_cfg_write(&t->pd, PCI_INTERRUPT_LINE, (const uint8_t[]){ 11 }, 1);
	pci_cfg_write16(&t->pd, PCI_COMMAND, PCI_COMMAND_MEMORY);
	CHECK(t->pd.bars[0].mapped && t->pd.bars[0].mapped_addr == MOVED_BAR0);
}

static struct saved tfn_save(struct tfn *t)
{
	struct snap_w w;

	snap_w_init(&w);
	snap_begin(&w, T_DEV, 0);
	CHECK_EQ(pci_dev_save(&t->pd, &w, err, sizeof(err)), 0);
	snap_end(&w);
	return saved_image(&w, 0);
}

static int tfn_load(struct tfn *t, const struct saved *s)
{
	struct snap_r r = { .p = s->body, .len = s->blen };
	int ret;

	err[0] = '\0';
	ret = pci_dev_load(&t->pd, &r, err, sizeof(err));
	if (!ret)
		CHECK_EQ(snap_done(&r, err, sizeof(err)), 0);
	return ret;
}

static unsigned mmio_hits(struct tfn *t, uint64_t addr, unsigned bar)
{
	unsigned before = t->hits[bar];
	uint8_t b[4];

	iobus_access(&t->vm.mmio, addr, b, 4, false);
	return t->hits[bar] - before;
}

TEST(a_pci_function_restored_decodes_its_bars_where_the_guest_had_moved_them)
{
	struct tfn *a = tfn_new(0x0100, 0x088000), *b = tfn_new(0x0100, 0x088000);
	uint64_t fw0 = pci_bar_addr(&b->pd, 0), fw2 = pci_bar_addr(&b->pd, 2);
	struct saved s;

	CHECK(fw0 != MOVED_BAR0 && fw2 != MOVED_BAR2);
	tfn_guest(a);
	s = tfn_save(a);
	CHECK_EQ(tfn_load(b, &s), 0);
	CHECK_EQ(pci_bar_addr(&b->pd, 0), MOVED_BAR0);
	CHECK_EQ(pci_bar_addr(&b->pd, 2), MOVED_BAR2);
	CHECK(b->pd.bars[0].mapped && b->pd.bars[0].mapped_addr == MOVED_BAR0);
	CHECK(b->pd.bars[2].mapped && b->pd.bars[2].mapped_addr == MOVED_BAR2);
	CHECK_EQ(b->pd.cfg[PCI_INTERRUPT_LINE], 11);
	CHECK_EQ(pci_command(&b->pd), PCI_COMMAND_MEMORY);
	CHECK_EQ(mmio_hits(b, MOVED_BAR0 + 4, 0), 1);
	CHECK_EQ(mmio_hits(b, MOVED_BAR2 + 0x100, 2), 1);
	CHECK_EQ(mmio_hits(b, fw0 + 4, 0), 0);
	CHECK_EQ(mmio_hits(b, fw2 + 0x100, 2), 0);
	/* The whole header reads as the saved function's. */
	for (unsigned off = 0; off < 0x40; off += 4)
		CHECK_EQ(pci_cfg_read32(&b->pd, off), pci_cfg_read32(&a->pd, off));
	saved_free(&s);
	tfn_free(a);
	tfn_free(b);
}

TEST(a_pci_function_load_writes_the_command_register_last_so_no_half_written_bar_maps)
{
	struct tfn *a = tfn_new(0x0100, 0x088000), *b = tfn_new(0x0100, 0x088000);
	unsigned i, maps = 0, last_bar_write = 0;
	struct saved s;

	tfn_guest(a);
	s = tfn_save(a);
	CHECK_EQ(tfn_load(b, &s), 0);
	CHECK(b->nev > 2);
	/* Last: the command register's write, and nothing after it. */
	CHECK_EQ(b->ev[b->nev - 1].what, 'w');
	CHECK_EQ(b->ev[b->nev - 1].a, PCI_COMMAND);
	for (i = 0; i < b->nev; i++)
		if (b->ev[i].what == 'w' && b->ev[i].a >= PCI_BASE_ADDRESS_0 &&
		    b->ev[i].a < PCI_BASE_ADDRESS_0 + 4 * PCI_NUM_BARS)
			last_bar_write = i;
	for (i = 0; i + 1 < b->nev; i++) {
		if (b->ev[i].what == 'w') {
			CHECK(b->ev[i].a != PCI_COMMAND);
			continue;
		}
		/* Each BAR mapped once, at its final place, after every BAR write. */
		CHECK_EQ(b->ev[i].what, 'm');
		CHECK(i > last_bar_write);
		CHECK_EQ(b->ev[i].addr, b->ev[i].a == 0 ? MOVED_BAR0 : MOVED_BAR2);
		maps++;
	}
	CHECK_EQ(maps, 2);
	saved_free(&s);
	tfn_free(a);
	tfn_free(b);
}

TEST(a_pci_function_of_another_device_id_is_refused_naming_both_and_left_as_it_was)
{
	struct tfn *a = tfn_new(0x0100, 0x088000), *b = tfn_new(0x0101, 0x088000);
	uint64_t fw0 = pci_bar_addr(&b->pd, 0);
	struct saved s;

	tfn_guest(a);
	s = tfn_save(a);
	CHECK_EQ(tfn_load(b, &s), -EINVAL);
	CHECK(strstr(err, "1b36:0100"));
	CHECK(strstr(err, "1b36:0101"));
	CHECK(!strchr(err, '\n'));
	CHECK_EQ(b->nev, 0);
	CHECK_EQ(pci_bar_addr(&b->pd, 0), fw0);
	CHECK_EQ(pci_command(&b->pd), 0);
	CHECK(!b->pd.bars[0].mapped);
	saved_free(&s);
	tfn_free(a);
	tfn_free(b);
}

TEST(a_pci_function_of_another_class_is_refused_naming_both_classes)
{
	struct tfn *a = tfn_new(0x0100, 0x088000), *b = tfn_new(0x0100, 0x0c0330);
	struct saved s;

	tfn_guest(a);
	s = tfn_save(a);
	CHECK_EQ(tfn_load(b, &s), -EINVAL);
	CHECK(strstr(err, "class 088000"));
	CHECK(strstr(err, "class 0c0330"));
	CHECK_EQ(pci_command(&b->pd), 0);
	saved_free(&s);
	tfn_free(a);
	tfn_free(b);
}

TEST(a_pci_function_state_cut_short_is_refused)
{
	struct tfn *a = tfn_new(0x0100, 0x088000), *b = tfn_new(0x0100, 0x088000);
	struct saved s, cut;

	tfn_guest(a);
	s = tfn_save(a);
	cut = saved_from(s.body, s.blen - 1, 0);
	CHECK_EQ(tfn_load(b, &cut), -EINVAL);
	CHECK_EQ(b->nev, 0);
	saved_free(&s);
	saved_free(&cut);
	tfn_free(a);
	tfn_free(b);
}

TEST(the_conf1_address_latch_is_set_back_with_its_reserved_bits_clear)
{
	struct tfn *t = tfn_new(0x0100, 0x088000);
	uint8_t b[4];

	le32_store(b, PCI_CONF1_ENABLE | 1u << 11 | PCI_COMMAND);
	iobus_access(&t->vm.pio, PCI_CONF1_ADDR_PORT, b, 4, true);
	CHECK_EQ(pci_bus_conf1_get(&t->bus), PCI_CONF1_ENABLE | 1u << 11 | PCI_COMMAND);
	pci_bus_conf1_set(&t->bus, 0);
	CHECK_EQ(pci_bus_conf1_get(&t->bus), 0);
	pci_bus_conf1_set(&t->bus, 0xffffffffu);
	CHECK_EQ(pci_bus_conf1_get(&t->bus), 0x80fffffcu);
	/* A guest paused between its two accesses reads the right register. */
	pci_bus_conf1_set(&t->bus, PCI_CONF1_ENABLE | 1u << 11 | PCI_VENDOR_ID);
	iobus_access(&t->vm.pio, PCI_CONF1_DATA_PORT, b, 4, false);
	CHECK_EQ(le32_load(b), 0x0100u << 16 | 0x1b36);
	tfn_free(t);
}

/* ---- MSI-X -------------------------------------------------------------- */

#define NVEC 4

struct tmx {
	struct vm vm;
	struct pci_dev pd;
	struct msix m;
};

static void tmx_config_write(struct pci_dev *pd, unsigned off, unsigned len)
{
	msix_config_write(pd->opaque, off, len);
}

static const struct pci_dev_ops tmx_ops = { .config_write = tmx_config_write };

/* A fresh function with nvec vectors in BAR1 (table at 0, PBA at 0x800):
 * bus mastering off, MSI-X off, every vector masked. */
static struct tmx *tmx_new(unsigned nvec)
{
	struct tmx *t = calloc(1, sizeof(*t));

	CHECK(t);
	t->vm.vm_fd = t->vm.kvm_fd = -1;
	pci_dev_init(&t->pd, "tmx", 0x1b36, 0x10, 0xff0000, 1, 0, 0, &tmx_ops, &t->m);
	CHECK_EQ(msix_init(&t->m, &t->pd, &t->vm, nvec, 1, 0, 0x800), 0);
	return t;
}

static void tmx_free(struct tmx *t)
{
	msix_destroy(&t->m);
	free(t);
}

static void tmx_entry(struct tmx *t, unsigned vec, unsigned field, uint32_t v)
{
	uint8_t b[4];

	le32_store(b, v);
	msix_bar_write(&t->m, vec * PCI_MSIX_ENTRY_SIZE + field, b, 4);
}

static uint32_t tmx_r32(struct tmx *t, uint64_t off)
{
	uint8_t b[4];

	msix_bar_read(&t->m, off, b, 4);
	return le32_load(b);
}

static uint64_t tmx_fired(struct tmx *t, unsigned vec)
{
	eventfd_t v = 0;

	if (eventfd_read(t->m.v[vec].fd, &v) < 0)
		return 0;
	return v;
}

/* The driver's setup: bus master, MSI-X enabled under the function mask,
 * each vector a LAPIC message, every vector unmasked but `masked`, then
 * the function mask as `fmask` says. */
static void tmx_driver(struct tmx *t, unsigned masked, bool fmask)
{
	pci_cfg_write16(&t->pd, PCI_COMMAND, PCI_COMMAND_MASTER);
	pci_cfg_write16(&t->pd, t->m.cap + PCI_MSIX_FLAGS,
			PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
	for (unsigned v = 0; v < t->m.nvec; v++) {
		tmx_entry(t, v, PCI_MSIX_ENTRY_LOWER_ADDR, 0xfee00000u | v << 12);
		tmx_entry(t, v, PCI_MSIX_ENTRY_UPPER_ADDR, 0);
		tmx_entry(t, v, PCI_MSIX_ENTRY_DATA, 0x40 + v);
		tmx_entry(t, v, PCI_MSIX_ENTRY_VECTOR_CTRL,
			  v == masked ? PCI_MSIX_ENTRY_CTRL_MASKBIT : 0);
	}
	pci_cfg_write16(&t->pd, t->m.cap + PCI_MSIX_FLAGS,
			PCI_MSIX_FLAGS_ENABLE | (fmask ? PCI_MSIX_FLAGS_MASKALL : 0));
}

static struct saved tmx_save(struct tmx *t)
{
	struct snap_w w;

	snap_w_init(&w);
	snap_begin(&w, T_DEV, 0);
	CHECK_EQ(pci_dev_save(&t->pd, &w, err, sizeof(err)), 0);
	msix_save(&t->m, &w);
	snap_end(&w);
	return saved_image(&w, 0);
}

/* As virtio-pci loads: config space, MSI-X, then the command register. */
static int tmx_load(struct tmx *t, const struct saved *s)
{
	struct snap_r r = { .p = s->body, .len = s->blen };
	uint8_t cfg[PCI_CONF1_SIZE];
	int ret;

	err[0] = '\0';
	ret = pci_dev_load_begin(&t->pd, &r, cfg, err, sizeof(err));
	if (!ret)
		ret = msix_load(&t->m, &r, cfg, err, sizeof(err));
	if (ret)
		return ret;
	pci_dev_load_finish(&t->pd, cfg);
	CHECK_EQ(snap_done(&r, err, sizeof(err)), 0);
	return 0;
}

TEST(msix_table_entries_enable_and_pending_bits_come_back_and_a_pending_vector_fires_on_unmask)
{
	struct tmx *a = tmx_new(NVEC), *b = tmx_new(NVEC);
	struct saved s;
	unsigned v;

	tmx_driver(a, 2, false);
	CHECK_EQ(msix_signal(&a->m, 2), 1);             /* masked: pending */
	CHECK(msix_pending(&a->m, 2));
	s = tmx_save(a);
	CHECK_EQ(tmx_load(b, &s), 0);
	for (v = 0; v < NVEC * PCI_MSIX_ENTRY_SIZE; v += 4)
		CHECK_EQ(tmx_r32(b, v), tmx_r32(a, v));
	CHECK_EQ(tmx_r32(b, 0x800), 1u << 2);
	CHECK_EQ(pci_cfg_read32(&b->pd, b->m.cap), pci_cfg_read32(&a->pd, a->m.cap));
	CHECK(msix_enabled(&b->m));
	CHECK(!b->m.fmask);
	CHECK_EQ(pci_command(&b->pd), PCI_COMMAND_MASTER);
	for (v = 0; v < NVEC; v++)
		CHECK_EQ(tmx_fired(b, v), 0);           /* masked and pending: still */
	/* Unmasked vectors are routed again: a signal fires at once. */
	CHECK_EQ(msix_signal(&b->m, 1), 0);
	CHECK_EQ(tmx_fired(b, 1), 1);
	CHECK(b->m.v[1].routed);
	CHECK_EQ(b->m.v[1].route_data, 0x41);
	/* The pending one fires once when the guest unmasks it. */
	tmx_entry(b, 2, PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
	CHECK_EQ(tmx_fired(b, 2), 1);
	CHECK(!msix_pending(&b->m, 2));
	CHECK_EQ(tmx_fired(b, 2), 0);
	saved_free(&s);
	tmx_free(a);
	tmx_free(b);
}

TEST(msix_function_mask_comes_back_with_its_pending_vector_which_fires_once_unmasked)
{
	struct tmx *a = tmx_new(NVEC), *b = tmx_new(NVEC);
	struct saved s;

	tmx_driver(a, NVEC, true);
	CHECK_EQ(msix_signal(&a->m, 0), 1);
	s = tmx_save(a);
	CHECK_EQ(tmx_load(b, &s), 0);
	CHECK(b->m.fmask);
	CHECK(msix_enabled(&b->m));
	CHECK(msix_pending(&b->m, 0));
	CHECK_EQ(tmx_fired(b, 0), 0);
	CHECK_EQ(le16_load(&b->pd.cfg[b->m.cap + PCI_MSIX_FLAGS]) &
		 (PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL),
		 PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
	pci_cfg_write16(&b->pd, b->m.cap + PCI_MSIX_FLAGS, PCI_MSIX_FLAGS_ENABLE);
	CHECK_EQ(tmx_fired(b, 0), 1);
	CHECK_EQ(tmx_fired(b, 0), 0);
	saved_free(&s);
	tmx_free(a);
	tmx_free(b);
}

TEST(msix_state_of_another_vector_count_is_refused_naming_both_counts)
{
	struct tmx *a = tmx_new(NVEC), *b = tmx_new(2 * NVEC);
	struct saved s;

	tmx_driver(a, 2, false);
	s = tmx_save(a);
	CHECK_EQ(tmx_load(b, &s), -EINVAL);
	CHECK(strstr(err, "4 MSI-X vectors there, 8 here"));
	CHECK(!msix_enabled(&b->m));
	CHECK_EQ(tmx_r32(b, PCI_MSIX_ENTRY_VECTOR_CTRL), PCI_MSIX_ENTRY_CTRL_MASKBIT);
	saved_free(&s);
	tmx_free(a);
	tmx_free(b);
}

/* The PBA's one word in a saved state of NVEC vectors: after config
 * space, nvec and the table. */
#define PBA_OFF (PCI_CONF1_SIZE + 4 + NVEC * PCI_MSIX_ENTRY_SIZE)

TEST(msix_pending_bits_past_the_last_vector_are_dropped)
{
	struct tmx *a = tmx_new(NVEC), *b = tmx_new(NVEC);
	struct saved s, bad;

	tmx_driver(a, 2, true);                 /* function-masked: nothing fires */
	s = tmx_save(a);
	bad = saved_edit(&s, PBA_OFF, 8, ~0ULL);
	CHECK_EQ(tmx_load(b, &bad), 0);
	CHECK_EQ(b->m.pba[0], (1u << NVEC) - 1);
	saved_free(&s);
	saved_free(&bad);
	tmx_free(a);
	tmx_free(b);
}

TEST(msix_vectors_saved_pending_and_usable_fire_once_when_bus_mastering_is_back)
{
	struct tmx *a = tmx_new(NVEC), *b = tmx_new(NVEC);
	struct saved s, bad;

	tmx_driver(a, 2, false);
	s = tmx_save(a);
	bad = saved_edit(&s, PBA_OFF, 8, (1u << NVEC) - 1);
	CHECK_EQ(tmx_load(b, &bad), 0);
	CHECK_EQ(tmx_fired(b, 0), 1);
	CHECK_EQ(tmx_fired(b, 1), 1);
	CHECK_EQ(tmx_fired(b, 2), 0);           /* masked: pending still */
	CHECK_EQ(tmx_fired(b, 3), 1);
	CHECK_EQ(b->m.pba[0], 1u << 2);
	saved_free(&s);
	saved_free(&bad);
	tmx_free(a);
	tmx_free(b);
}

/* ---- virtio-pci and the virtio core ------------------------------------- */

#define NQ 2
#define QSIZE 8
#define MOVED_BAR4 0xe8000000u

/* A KVM-less VM holding one virtio-pci function of a null device, set up
 * as virtio_pci_attach does short of KVM (the notify ioeventfds fail to
 * bind: kicks take the BAR's slow path), registered with the VM. */
struct tvm {
	struct vm vm;
	struct pci_bus bus;
	struct vnull *v;
	struct virtio_pci *vp;
	unsigned idx;
	struct check_log cl;
	uint64_t buf[NQ];       /* a request's buffers, per queue */
};

static struct tvm *tvm_new_ex(unsigned nq, uint64_t features, uint64_t ram)
{
	struct tvm *t = calloc(1, sizeof(*t));

	CHECK(t);
	CHECK_EQ(vm_init(&t->vm, 1), 0);
	t->vm.log = (struct log_sink){ .fn = check_log_line, .opaque = &t->cl };
	CHECK_EQ(pci_bus_init(&t->bus, &t->vm, T_MMIO_BASE, T_MMIO_END, T_INTX_BASE, NULL, 0), 0);
	t->v = calloc(1, sizeof(*t->v));
	CHECK(t->v);
	t->v->features = features;
	CHECK_EQ(vdrv_ram_init(&t->v->d, VNULL_RAM_GPA, ram), 0);
	CHECK_EQ(virtio_dev_init(&t->v->dev, &vnull_ops, t->v, &t->v->d.mem, nq, VNULL_QMAX), 0);
	t->vp = calloc(1, sizeof(*t->vp));
	CHECK(t->vp);
	CHECK_EQ(virtio_pci_init(t->vp, &t->v->dev, &t->vm), 0);
	vtr_attach(&t->vp->t, &t->vm);
	CHECK_EQ(pci_bus_add(&t->bus, &t->vp->pci), 0);
	t->vp->bus = &t->bus;
	t->idx = t->vm.ndevices;
	CHECK_EQ(vtr_register(&t->vp->t), 0);
	CHECK_STR(t->vm.devices[t->idx].ops->kind, "virtio");
	return t;
}

static struct tvm *tvm_new(void)
{
	return tvm_new_ex(NQ, 0, VNULL_RAM_SIZE);
}

static void tvm_free(struct tvm *t)
{
	void *dev = t->vm.devices[t->idx].dev;

	t->vm.devices[t->idx].ops->stop(dev);
	t->vm.devices[t->idx].ops->destroy(dev);      /* frees t->vp */
	pci_bus_destroy(&t->bus);
	free(t->v->d.ram);
	free(t->v);
	vm_fini(&t->vm);
	free(t);
}

static void cw(struct tvm *t, unsigned off, unsigned len, uint64_t val)
{
	uint8_t b[8];

	le_store_n(b, len, val);
	virtio_pci_bar_write(t->vp, off, b, len);
}

static uint64_t cr(struct tvm *t, unsigned off, unsigned len)
{
	uint8_t b[8];

	virtio_pci_bar_read(t->vp, off, b, len);
	return le_load_n(b, len);
}

static uint8_t vstatus(struct tvm *t)
{
	return (uint8_t)cr(t, VIRTIO_PCI_COMMON_STATUS, 1);
}

static uint64_t efd_count(int fd)
{
	eventfd_t v = 0;

	if (eventfd_read(fd, &v) < 0)
		return 0;
	return v;
}

/* Linux's virtio_pci probe, up to the virtio handshake: BAR4 moved,
 * memory decode and bus mastering on, MSI-X with one vector per queue
 * and one for configuration changes. */
static void drv_probe(struct tvm *t)
{
	struct pci_dev *pd = &t->vp->pci;
	struct msix *m = &t->vp->msix;
	uint8_t b[4];

	pci_cfg_write32(pd, PCI_BASE_ADDRESS_0 + 4 * VIRTIO_PCI_BAR, MOVED_BAR4 |
			PCI_BASE_ADDRESS_MEM_TYPE_64 | PCI_BASE_ADDRESS_MEM_PREFETCH);
	pci_cfg_write32(pd, PCI_BASE_ADDRESS_0 + 4 * VIRTIO_PCI_BAR + 4, 0);
	pci_cfg_write16(pd, PCI_COMMAND, PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER);
	CHECK(pd->bars[VIRTIO_PCI_BAR].mapped);
	pci_cfg_write16(pd, m->cap + PCI_MSIX_FLAGS,
			PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
	for (unsigned v = 0; v < m->nvec; v++) {
		uint64_t e = m->table_off + (uint64_t)v * PCI_MSIX_ENTRY_SIZE;

		le32_store(b, 0xfee00000u | v << 12);
		msix_bar_write(m, e + PCI_MSIX_ENTRY_LOWER_ADDR, b, 4);
		le32_store(b, 0x50 + v);
		msix_bar_write(m, e + PCI_MSIX_ENTRY_DATA, b, 4);
		le32_store(b, 0);
		msix_bar_write(m, e + PCI_MSIX_ENTRY_VECTOR_CTRL, b, 4);
	}
	pci_cfg_write16(pd, m->cap + PCI_MSIX_FLAGS, PCI_MSIX_FLAGS_ENABLE);
}

/* The handshake to FEATURES_OK with want & offered; 0, or -EIO when the
 * device refused. */
static int drv_features(struct tvm *t, uint64_t want)
{
	uint64_t offered, f;

	cw(t, VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	cw(t, VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	cw(t, VIRTIO_PCI_COMMON_DFSELECT, 4, 1);
	offered = cr(t, VIRTIO_PCI_COMMON_DF, 4) << 32;
	cw(t, VIRTIO_PCI_COMMON_DFSELECT, 4, 0);
	offered |= cr(t, VIRTIO_PCI_COMMON_DF, 4);
	f = want & offered;
	cw(t, VIRTIO_PCI_COMMON_GFSELECT, 4, 0);
	cw(t, VIRTIO_PCI_COMMON_GF, 4, (uint32_t)f);
	cw(t, VIRTIO_PCI_COMMON_GFSELECT, 4, 1);
	cw(t, VIRTIO_PCI_COMMON_GF, 4, (uint32_t)(f >> 32));
	cw(t, VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
	   VIRTIO_CONFIG_S_FEATURES_OK);
	if (!(vstatus(t) & VIRTIO_CONFIG_S_FEATURES_OK))
		return -EIO;
	t->v->d.features = f;
	return 0;
}

/* Queue q laid out in fake RAM (split or packed, as negotiated) and
 * enabled, its interrupts on vector q + 1; a request's two buffers. */
static void drv_queue(struct tvm *t, unsigned q)
{
	struct vdrv *d = &t->v->d;
	struct vdrv_queue *dq = &d->q[q];

	vdrv_queue_layout(d, q, QSIZE);
	cw(t, VIRTIO_PCI_COMMON_Q_SELECT, 2, q);
	cw(t, VIRTIO_PCI_COMMON_Q_SIZE, 2, QSIZE);
	cw(t, VIRTIO_PCI_COMMON_Q_DESCLO, 4, (uint32_t)dq->desc);
	cw(t, VIRTIO_PCI_COMMON_Q_DESCLO + 4, 4, dq->desc >> 32);
	cw(t, VIRTIO_PCI_COMMON_Q_AVAILLO, 4, (uint32_t)dq->avail);
	cw(t, VIRTIO_PCI_COMMON_Q_AVAILLO + 4, 4, dq->avail >> 32);
	cw(t, VIRTIO_PCI_COMMON_Q_USEDLO, 8, dq->used);
	cw(t, VIRTIO_PCI_COMMON_Q_MSIX, 2, q + 1);
	cw(t, VIRTIO_PCI_COMMON_Q_ENABLE, 2, 1);
	CHECK_EQ(cr(t, VIRTIO_PCI_COMMON_Q_ENABLE, 2), 1);
	t->buf[q] = vdrv_alloc(d, 64, 16);
}

static void drv_ok(struct tvm *t)
{
	cw(t, VIRTIO_PCI_COMMON_MSIX, 2, 0);
	cw(t, VIRTIO_PCI_COMMON_STATUS, 1, vstatus(t) | VIRTIO_CONFIG_S_DRIVER_OK);
}

/* The whole probe to DRIVER_OK with every queue. */
static void drv_up(struct tvm *t, uint64_t want)
{
	drv_probe(t);
	CHECK_EQ(drv_features(t, want | VIRTIO_BIT(VIRTIO_F_VERSION_1)), 0);
	for (unsigned q = 0; q < t->v->dev.num_queues; q++)
		drv_queue(t, q);
	drv_ok(t);
	CHECK(vstatus(t) & VIRTIO_CONFIG_S_DRIVER_OK);
	for (unsigned q = 0; q < t->v->dev.num_queues; q++)
		CHECK(t->v->dev.queues[q].started);
}

/* The driver makes a request available on queue q: a readable buffer
 * and a writable one. Its id. */
static int drv_add(struct tvm *t, unsigned q)
{
	struct vdrv_sg sg[2] = {
		{ t->buf[q], 16, false },
		{ t->buf[q] + 32, 16, true },
	};
	int id = vdrv_add(&t->v->d, q, sg, 2, false);

	CHECK(id >= 0);
	return id;
}

/* The device (the test, owner of the queues) serves what queue q holds:
 * how many chains; *head the last one's. */
static unsigned dev_serve(struct tvm *t, unsigned q, uint16_t *head)
{
	struct virtq *vq = &t->v->dev.queues[q].vq;
	static struct virtq_chain c;
	unsigned n = 0;
	int r;

	CHECK(t->v->dev.queues[q].started);
	while ((r = virtq_pop(vq, &c)) == 1) {
		CHECK_EQ(c.n, 2);
		CHECK_EQ(c.n_readable, 1);
		virtq_push(vq, c.head, 16);
		if (head)
			*head = c.head;
		n++;
	}
	CHECK_EQ(r, 0);
	if (n && virtq_publish(vq))
		t->v->dev.tops->signal_queue(&t->v->dev, q);
	return n;
}

/* n requests on queue q, each made available, served and taken back. */
static void round_trips(struct tvm *t, unsigned q, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int id = drv_add(t, q);
		uint32_t uid, len;
		uint16_t head;

		CHECK_EQ(dev_serve(t, q, &head), 1);
		CHECK_EQ(head, id);
		CHECK_EQ(vdrv_get_used(&t->v->d, q, &uid, &len), 1);
		CHECK_EQ(uid, (uint32_t)id);
		CHECK_EQ(len, 16);
	}
}

/* What the VM's memory snapshot carries: guest RAM, and (for the test's
 * driver to go on) the driver's view of its rings. */
static void guest_moves(struct tvm *from, struct tvm *to)
{
	struct vdrv *a = &from->v->d, *b = &to->v->d;

	memcpy(b->ram, a->ram, MIN(a->ram_size, b->ram_size));
	memcpy(b->q, a->q, sizeof(a->q));
	b->features = a->features;
	b->brk = a->brk;
	memcpy(to->buf, from->buf, sizeof(from->buf));
}

static void check_no_queue_started(struct tvm *t)
{
	for (unsigned q = 0; q < t->v->dev.num_queues; q++) {
		CHECK(!t->v->dev.queues[q].started);
		CHECK_EQ(t->v->started[q], 0);
	}
}

/* The registers the driver reads, the same on both. */
#define SAME_REG(a, b, off, len) CHECK_EQ(cr(b, VIRTIO_PCI_COMMON_##off, len), \
					  cr(a, VIRTIO_PCI_COMMON_##off, len))

static void check_same_registers(struct tvm *a, struct tvm *b)
{
	struct pci_dev *pa = &a->vp->pci, *pb = &b->vp->pci;
	unsigned q;

	SAME_REG(a, b, DFSELECT, 4);
	SAME_REG(a, b, GFSELECT, 4);
	SAME_REG(a, b, Q_SELECT, 2);
	SAME_REG(a, b, STATUS, 1);
	SAME_REG(a, b, MSIX, 2);
	SAME_REG(a, b, CFGGENERATION, 1);
	for (unsigned sel = 0; sel < 2; sel++) {
		cw(a, VIRTIO_PCI_COMMON_GFSELECT, 4, sel);
		cw(b, VIRTIO_PCI_COMMON_GFSELECT, 4, sel);
		SAME_REG(a, b, GF, 4);
	}
	CHECK_EQ(b->v->dev.guest_features, a->v->dev.guest_features);
	for (q = 0; q < a->v->dev.num_queues; q++) {
		cw(a, VIRTIO_PCI_COMMON_Q_SELECT, 2, q);
		cw(b, VIRTIO_PCI_COMMON_Q_SELECT, 2, q);
		SAME_REG(a, b, Q_SIZE, 2);
		SAME_REG(a, b, Q_ENABLE, 2);
		SAME_REG(a, b, Q_MSIX, 2);
		SAME_REG(a, b, Q_DESCLO, 8);
		SAME_REG(a, b, Q_AVAILLO, 8);
		SAME_REG(a, b, Q_USEDLO, 8);
	}
	/* Config space (MSI-X control, BARs, command) and the vector table. */
	for (unsigned off = 0; off < PCI_CONF1_SIZE; off += 4)
		if (off != b->vp->cap_pci_cfg + 16)
			CHECK_EQ(pci_cfg_read32(pb, off), pci_cfg_read32(pa, off));
	for (unsigned off = 0; off < a->vp->msix.nvec * PCI_MSIX_ENTRY_SIZE; off += 4) {
		uint8_t x[4], y[4];

		msix_bar_read(&a->vp->msix, a->vp->msix.table_off + off, x, 4);
		msix_bar_read(&b->vp->msix, b->vp->msix.table_off + off, y, 4);
		CHECK_EQ(le32_load(y), le32_load(x));
	}
}

/* The main case: a device in use, saved, and a fresh one of the same
 * shape loaded from it carries on from where the first stopped. */
static void check_device_carries_on(uint64_t want)
{
	struct tvm *a = tvm_new(), *b = tvm_new();
	unsigned q, counts[NQ] = { 5, 9 };
	struct saved s;

	drv_up(a, want);
	CHECK_EQ(a->vp->t.dev->guest_features & VIRTIO_BIT(VIRTIO_F_RING_PACKED),
		 want & VIRTIO_BIT(VIRTIO_F_RING_PACKED));
	/* Enough requests that the rings have wrapped (packed: a chain is
	 * two slots of eight, so queue 0 wrapped once, queue 1 twice). */
	for (q = 0; q < NQ; q++)
		round_trips(a, q, counts[q]);
	cw(a, VIRTIO_PCI_COMMON_DFSELECT, 4, 1);
	cw(a, VIRTIO_PCI_COMMON_GFSELECT, 4, 1);
	cw(a, VIRTIO_PCI_COMMON_Q_SELECT, 2, 1);
	s = save_device(&a->vm, a->idx);

	guest_moves(a, b);
	CHECK_EQ(load_device(&b->vm, b->idx, &s), 0);
	check_same_registers(a, b);
	CHECK_EQ(pci_bar_addr(&b->vp->pci, VIRTIO_PCI_BAR), MOVED_BAR4);
	{
		uint8_t x[2];

		CHECK(iobus_access(&b->vm.mmio, MOVED_BAR4 + VIRTIO_PCI_COMMON_NUMQ, x, 2, false));
		CHECK_EQ(le16_load(x), NQ);
	}
	CHECK(msix_enabled(&b->vp->msix));
	for (q = 0; q < NQ; q++) {
		const struct virtq *va = &a->v->dev.queues[q].vq, *vb = &b->v->dev.queues[q].vq;

		CHECK(vb->ready);
		CHECK_EQ(vb->packed, va->packed);
		CHECK_EQ(vb->last_avail, va->last_avail);
		CHECK_EQ(vb->used_idx, va->used_idx);
		CHECK_EQ(vb->avail_wrap, va->avail_wrap);
		CHECK_EQ(vb->used_wrap, va->used_wrap);
		CHECK(vb->last_avail != 0);
		/* Started once, and kicked once, by DRIVER_OK. */
		CHECK(b->v->dev.queues[q].started);
		CHECK_EQ(b->v->started[q], 1);
		CHECK_EQ(efd_count(b->v->dev.queues[q].kick_fd), 1);
		CHECK_EQ(efd_count(b->vp->msix.v[q + 1].fd), 0);
	}
	if (want & VIRTIO_BIT(VIRTIO_F_RING_PACKED)) {
		CHECK(!b->v->dev.queues[0].vq.avail_wrap);     /* wrapped once */
		CHECK(b->v->dev.queues[1].vq.avail_wrap);      /* twice */
	}
	/* The driver's next request is the one the device serves, on the
	 * queue's vector, and the driver gets it back. */
	for (q = 0; q < NQ; q++) {
		int id = drv_add(b, q);
		uint32_t uid, len;
		uint16_t head;

		CHECK_EQ(dev_serve(b, q, &head), 1);
		CHECK_EQ(head, id);
		CHECK_EQ(efd_count(b->vp->msix.v[q + 1].fd), 1);
		CHECK_EQ(vdrv_get_used(&b->v->d, q, &uid, &len), 1);
		CHECK_EQ(uid, (uint32_t)id);
		CHECK_EQ(vdrv_get_used(&b->v->d, q, &uid, &len), 0);
		round_trips(b, q, QSIZE + 3);                  /* and many more */
	}
	CHECK_EQ(b->v->dev.guest_errors, 0);
	saved_free(&s);
	tvm_free(a);
	tvm_free(b);
}

TEST(a_split_ring_device_restored_serves_the_drivers_next_request_from_the_saved_indices)
{
	check_device_carries_on(VIRTIO_BIT(VIRTIO_RING_F_INDIRECT_DESC));
}

TEST(a_packed_ring_device_restored_serves_the_drivers_next_request_from_the_saved_positions)
{
	check_device_carries_on(VIRTIO_BIT(VIRTIO_F_RING_PACKED));
}

TEST(a_device_saved_before_driver_ok_is_restored_there_and_the_driver_finishes)
{
	struct tvm *a = tvm_new(), *b = tvm_new();
	struct saved s;

	drv_probe(a);
	CHECK_EQ(drv_features(a, VIRTIO_BIT(VIRTIO_F_VERSION_1)), 0);
	drv_queue(a, 0);                /* queue 1 not set up yet */
	s = save_device(&a->vm, a->idx);
	guest_moves(a, b);
	CHECK_EQ(load_device(&b->vm, b->idx, &s), 0);
	CHECK_EQ(vstatus(b), VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
		 VIRTIO_CONFIG_S_FEATURES_OK);
	CHECK(b->v->dev.queues[0].vq.ready);
	CHECK(!b->v->dev.queues[1].vq.ready);
	check_no_queue_started(b);
	check_same_registers(a, b);
	drv_queue(b, 1);
	drv_ok(b);
	CHECK(vstatus(b) & VIRTIO_CONFIG_S_DRIVER_OK);
	CHECK(b->v->dev.queues[0].started && b->v->dev.queues[1].started);
	round_trips(b, 0, 3);
	round_trips(b, 1, 3);
	saved_free(&s);
	tvm_free(a);
	tvm_free(b);
}

TEST(a_device_saved_after_the_driver_wrote_its_features_but_before_features_ok_takes_features_ok_once_restored)
{
	const uint64_t f = VIRTIO_BIT(VIRTIO_F_VERSION_1) | VIRTIO_BIT(VIRTIO_F_RING_PACKED);
	const uint8_t ad = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER;
	struct tvm *a = tvm_new(), *b = tvm_new(), *t;
	struct saved s;

	/* drv_features' steps up to its FEATURES_OK. */
	drv_probe(a);
	cw(a, VIRTIO_PCI_COMMON_STATUS, 1, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	cw(a, VIRTIO_PCI_COMMON_STATUS, 1, ad);
	cw(a, VIRTIO_PCI_COMMON_GFSELECT, 4, 0);
	cw(a, VIRTIO_PCI_COMMON_GF, 4, (uint32_t)f);
	cw(a, VIRTIO_PCI_COMMON_GFSELECT, 4, 1);
	cw(a, VIRTIO_PCI_COMMON_GF, 4, (uint32_t)(f >> 32));
	CHECK_EQ(a->v->dev.guest_features, f);
	s = save_device(&a->vm, a->idx);
	guest_moves(a, b);
	CHECK_EQ(load_device(&b->vm, b->idx, &s), 0);
	CHECK_EQ(vstatus(b), ad);
	CHECK_EQ(b->v->dev.guest_features, f);
	check_same_registers(a, b);
	/* The driver goes on: both take its FEATURES_OK alike. */
	for (unsigned i = 0; i < 2; i++) {
		t = i ? b : a;
		cw(t, VIRTIO_PCI_COMMON_STATUS, 1, ad | VIRTIO_CONFIG_S_FEATURES_OK);
		CHECK_EQ(vstatus(t), ad | VIRTIO_CONFIG_S_FEATURES_OK);
	}
	b->v->d.features = f;
	drv_queue(b, 0);
	drv_queue(b, 1);
	drv_ok(b);
	CHECK(vstatus(b) & VIRTIO_CONFIG_S_DRIVER_OK);
	CHECK(b->v->dev.queues[0].vq.packed && b->v->dev.queues[1].vq.packed);
	round_trips(b, 0, QSIZE + 1);
	round_trips(b, 1, 3);
	CHECK_EQ(b->v->dev.guest_errors, 0);
	saved_free(&s);
	tvm_free(a);
	tvm_free(b);
}

TEST(a_device_that_needs_a_reset_is_restored_needing_it_with_no_queue_running)
{
	struct tvm *a = tvm_new(), *b = tvm_new();
	struct saved s;

	drv_up(a, 0);
	round_trips(a, 0, 2);
	/* The driver turns bus mastering off under running queues. */
	pci_cfg_write16(&a->vp->pci, PCI_COMMAND, PCI_COMMAND_MEMORY);
	CHECK(vstatus(a) & VIRTIO_CONFIG_S_NEEDS_RESET);
	s = save_device(&a->vm, a->idx);
	guest_moves(a, b);
	CHECK_EQ(load_device(&b->vm, b->idx, &s), 0);
	CHECK_EQ(vstatus(b), vstatus(a));
	CHECK(vstatus(b) & VIRTIO_CONFIG_S_DRIVER_OK);
	check_no_queue_started(b);
	/* The driver resets it and starts over. */
	cw(b, VIRTIO_PCI_COMMON_STATUS, 1, 0);
	CHECK_EQ(vstatus(b), 0);
	memset(b->v->d.q, 0, sizeof(b->v->d.q));
	drv_up(b, 0);
	round_trips(b, 0, 2);
	saved_free(&s);
	tvm_free(a);
	tvm_free(b);
}

/* Where the fields of a virtio-pci device's state lie in its section
 * (after the kind): the format of vtr_vm_save, vp_save, msix_save and
 * virtio_save. */
struct vp_layout {
	size_t features, nq, queue0;
};
#define QREC 33u                /* size, ready, 3 ring addresses, position */
#define QREC_DESC 3u
#define QREC_LAST_AVAIL 27u

static struct vp_layout vp_layout(const struct saved *s, unsigned nq)
{
	struct snap_r r = { .p = s->body, .len = s->blen };
	struct vp_layout l;
	char str[64];
	uint8_t skip[PCI_CONF1_SIZE];
	uint32_t nvec;

	snap_get_str(&r, str, sizeof(str));
	CHECK_STR(str, "virtio");
	snap_get_str(&r, str, sizeof(str));
	CHECK_STR(str, "virtio-null");
	snap_get_str(&r, str, sizeof(str));
	CHECK_STR(str, "virtio-pci");
	snap_get_bytes(&r, skip, PCI_CONF1_SIZE);
	nvec = snap_get_u32(&r);
	CHECK_EQ(nvec, nq + 1);
	r.off += nvec * PCI_MSIX_ENTRY_SIZE + ALIGN_UP(nvec, 64u) / 8;
	r.off += 4 + 4 + 2 + 2 + 2 * nq + 1;    /* selects, vectors, ISR */
	r.off += 1 + 1;                         /* status, needs_reset */
	l.features = r.off;
	r.off += 8 + 4;                         /* features, generation */
	l.nq = r.off;
	CHECK_EQ(le32_load(s->body + l.nq), nq);
	l.queue0 = r.off + 4;
	CHECK_EQ(l.queue0 + nq * QREC, s->blen);
	CHECK_EQ(r.err, 0);
	return l;
}

/* a: in use with want; its saved state (the caller frees both). */
static struct tvm *busy_device(uint64_t features, uint64_t want, struct saved *s)
{
	struct tvm *a = tvm_new_ex(NQ, features, VNULL_RAM_SIZE);

	drv_up(a, want);
	round_trips(a, 0, 3);
	round_trips(a, 1, 1);
	*s = save_device(&a->vm, a->idx);
	return a;
}

TEST(a_saved_state_with_features_the_device_does_not_offer_is_refused_starting_no_queue)
{
	struct saved s;
	struct tvm *a = busy_device(VIRTIO_BIT(3), VIRTIO_BIT(3), &s), *b = tvm_new();

	CHECK(a->v->dev.guest_features & VIRTIO_BIT(3));
	guest_moves(a, b);
	CHECK_EQ(load_device(&b->vm, b->idx, &s), -EINVAL);
	CHECK(strstr(err, "virtio-null"));
	CHECK(strstr(err, "not what this device offers"));
	CHECK(strstr(err, "0x100000008"));              /* VERSION_1 and bit 3 */
	check_no_queue_started(b);
	/* A device still: the driver can reset it and use it. */
	cw(b, VIRTIO_PCI_COMMON_STATUS, 1, 0);
	memset(b->v->d.q, 0, sizeof(b->v->d.q));
	drv_up(b, 0);
	round_trips(b, 0, 1);
	saved_free(&s);
	tvm_free(a);
	tvm_free(b);
}

TEST(a_packed_ring_state_loaded_into_a_device_without_packed_rings_is_refused)
{
	struct saved s;
	struct tvm *a = busy_device(0, VIRTIO_BIT(VIRTIO_F_RING_PACKED), &s), *b = tvm_new();

	b->v->dev.no_packed = true;
	guest_moves(a, b);
	CHECK_EQ(load_device(&b->vm, b->idx, &s), -EINVAL);
	CHECK(strstr(err, "not what this device offers"));
	check_no_queue_started(b);
	saved_free(&s);
	tvm_free(a);
	tvm_free(b);
}

TEST(a_saved_queue_whose_ring_lies_outside_guest_ram_is_refused_starting_no_queue)
{
	struct saved s, bad;
	struct tvm *a = busy_device(0, 0, &s), *b = tvm_new();
	struct vp_layout l = vp_layout(&s, NQ);

	/* Queue 1's descriptor table past the end of RAM. */
	bad = saved_edit(&s, l.queue0 + QREC + QREC_DESC, 8, VNULL_RAM_GPA + VNULL_RAM_SIZE);
	guest_moves(a, b);
	CHECK_EQ(load_device(&b->vm, b->idx, &bad), -EINVAL);
	CHECK(strstr(err, "queue 1"));
	CHECK(strstr(err, "not a queue this device takes"));
	check_no_queue_started(b);
	CHECK(!(vstatus(b) & VIRTIO_CONFIG_S_DRIVER_OK));
	/* And onto a guest whose RAM ends between queue 0's rings and 1's. */
	saved_free(&bad);
	tvm_free(b);
	b = tvm_new_ex(NQ, 0, 256);
	CHECK(a->v->d.q[0].used + VIRTQ_USED_BYTES(QSIZE) <= VNULL_RAM_GPA + 256);
	CHECK(a->v->d.q[1].desc >= VNULL_RAM_GPA + 256);
	guest_moves(a, b);
	CHECK_EQ(load_device(&b->vm, b->idx, &s), -EINVAL);
	CHECK(strstr(err, "queue 1"));
	CHECK(strstr(err, "not a queue this device takes"));
	check_no_queue_started(b);
	saved_free(&s);
	tvm_free(a);
	tvm_free(b);
}

TEST(a_saved_state_with_another_queue_count_is_refused_naming_both)
{
	struct saved s, bad;
	struct tvm *a = busy_device(0, 0, &s), *b = tvm_new();
	struct vp_layout l = vp_layout(&s, NQ);

	bad = saved_edit(&s, l.nq, 4, NQ + 1);
	guest_moves(a, b);
	CHECK_EQ(load_device(&b->vm, b->idx, &bad), -EINVAL);
	CHECK(strstr(err, "3 queues there, 2 here"));
	check_no_queue_started(b);
	CHECK_EQ(vstatus(b), 0);
	saved_free(&bad);
	/* Fewer, too (the records of the queues it has are all there). */
	bad = saved_edit(&s, l.nq, 4, NQ - 1);
	CHECK_EQ(load_device(&b->vm, b->idx, &bad), -EINVAL);
	CHECK(strstr(err, "1 queues there, 2 here"));
	check_no_queue_started(b);
	CHECK_EQ(vstatus(b), 0);
	saved_free(&s);
	saved_free(&bad);
	tvm_free(a);
	tvm_free(b);
}

TEST(a_saved_state_of_a_function_with_another_msix_table_size_is_refused)
{
	struct saved s;
	struct tvm *a = busy_device(0, 0, &s), *b = tvm_new_ex(NQ + 1, 0, VNULL_RAM_SIZE);

	guest_moves(a, b);
	CHECK_EQ(load_device(&b->vm, b->idx, &s), -EINVAL);
	CHECK(strstr(err, "3 MSI-X vectors there, 4 here"));
	check_no_queue_started(b);
	saved_free(&s);
	tvm_free(a);
	tvm_free(b);
}

TEST(a_saved_packed_position_at_or_past_the_ring_size_is_refused)
{
	struct saved s, bad;
	struct tvm *a = busy_device(0, VIRTIO_BIT(VIRTIO_F_RING_PACKED), &s), *b;
	struct vp_layout l = vp_layout(&s, NQ);

	for (unsigned v = QSIZE; v <= QSIZE + 1; v++) {
		b = tvm_new();
		bad = saved_edit(&s, l.queue0 + QREC_LAST_AVAIL, 2, v);
		guest_moves(a, b);
		CHECK_EQ(load_device(&b->vm, b->idx, &bad), -EINVAL);
		CHECK(strstr(err, "queue 0"));
		check_no_queue_started(b);
		saved_free(&bad);
		tvm_free(b);
	}
	/* The used position too. */
	b = tvm_new();
	bad = saved_edit(&s, l.queue0 + QREC + QREC_LAST_AVAIL + 2, 2, QSIZE);
	guest_moves(a, b);
	CHECK_EQ(load_device(&b->vm, b->idx, &bad), -EINVAL);
	CHECK(strstr(err, "queue 1"));
	check_no_queue_started(b);
	saved_free(&bad);
	tvm_free(b);
	saved_free(&s);
	tvm_free(a);
}

TEST(a_state_of_another_device_type_is_refused_naming_both)
{
	struct saved s, bad;
	struct tvm *a = busy_device(0, 0, &s), *b = tvm_new();
	uint8_t *body = malloc(s.blen);
	struct snap_r r = { .p = s.body, .len = s.blen };

	CHECK(body);
	snap_get_str(&r, (char[16]){ 0 }, 16);          /* "virtio", then "virtio-null" */
	memcpy(body, s.body, s.blen);
	memcpy(body + r.off + 4, "virtio-nulx", 11);
	bad = saved_from(body, s.blen, 0);
	CHECK_EQ(load_device(&b->vm, b->idx, &bad), -EINVAL);
	CHECK(strstr(err, "virtio-nulx"));
	CHECK(strstr(err, "virtio-null"));
	check_no_queue_started(b);
	free(body);
	saved_free(&s);
	saved_free(&bad);
	tvm_free(a);
	tvm_free(b);
}

TEST(a_device_holding_a_request_it_has_not_completed_is_not_saved)
{
	struct tvm *a = tvm_new();
	static struct virtq_chain c;
	struct virtq *vq;
	struct snap_w w;

	drv_up(a, 0);
	round_trips(a, 1, 2);
	drv_add(a, 1);
	vq = &a->v->dev.queues[1].vq;
	CHECK_EQ(virtq_pop(vq, &c), 1);
	snap_w_init(&w);
	snap_begin(&w, T_DEV, 0);
	err[0] = '\0';
	CHECK_EQ(a->vm.devices[a->idx].ops->save(a->vm.devices[a->idx].dev, &w, err,
						  sizeof(err)), -EBUSY);
	CHECK(strstr(err, "queue 1"));
	snap_w_free(&w);
	/* Once it is completed and published, it is. */
	virtq_push(vq, c.head, 0);
	virtq_publish(vq);
	snap_w_init(&w);
	snap_begin(&w, T_DEV, 0);
	CHECK_EQ(a->vm.devices[a->idx].ops->save(a->vm.devices[a->idx].dev, &w, err,
						  sizeof(err)), 0);
	snap_w_free(&w);
	tvm_free(a);
}

/* ---- virtio-mmio ---------------------------------------------------------- */

/* A KVM-less VM with one virtio-mmio window of a null device (base and
 * interrupt 0: no KVM to allocate them), registered with the VM. */
struct tmm {
	struct vm vm;
	struct vnull *v;
	struct virtio_mmio *m;
	unsigned idx;
	struct check_log cl;
	uint64_t buf[NQ];
};

static struct tmm *tmm_new(void)
{
	struct tmm *t = calloc(1, sizeof(*t));

	CHECK(t);
	CHECK_EQ(vm_init(&t->vm, 1), 0);
	t->vm.log = (struct log_sink){ .fn = check_log_line, .opaque = &t->cl };
	t->v = calloc(1, sizeof(*t->v));
	t->m = calloc(1, sizeof(*t->m));
	CHECK(t->v && t->m);
	CHECK_EQ(vdrv_ram_init(&t->v->d, VNULL_RAM_GPA, VNULL_RAM_SIZE), 0);
	CHECK_EQ(virtio_dev_init(&t->v->dev, &vnull_ops, t->v, &t->v->d.mem, NQ, VNULL_QMAX), 0);
	CHECK_EQ(virtio_mmio_init(t->m, &t->v->dev), 0);
	vtr_attach(&t->m->t, &t->vm);
	t->idx = t->vm.ndevices;
	CHECK_EQ(vtr_register(&t->m->t), 0);
	return t;
}

static void tmm_free(struct tmm *t)
{
	void *dev = t->vm.devices[t->idx].dev;

	t->vm.devices[t->idx].ops->stop(dev);
	t->vm.devices[t->idx].ops->destroy(dev);      /* frees t->m */
	free(t->v->d.ram);
	free(t->v);
	vm_fini(&t->vm);
	free(t);
}

static void mw(struct tmm *t, unsigned off, uint32_t v)
{
	uint8_t b[4];

	le32_store(b, v);
	virtio_mmio_write(t->m, off, b, 4);
}

static uint32_t mr(struct tmm *t, unsigned off)
{
	uint8_t b[4];

	virtio_mmio_read(t->m, off, b, 4);
	return le32_load(b);
}

/* Linux's virtio_mmio probe to DRIVER_OK with every queue; the device
 * selects left on the high words and queue 1, as a driver may leave them. */
static void mm_driver_up(struct tmm *t, uint64_t want)
{
	struct vdrv *d = &t->v->d;
	const uint32_t ad = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER;
	uint64_t f;

	mw(t, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	mw(t, VIRTIO_MMIO_STATUS, ad);
	mw(t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	f = mr(t, VIRTIO_MMIO_DEVICE_FEATURES);
	mw(t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	f |= (uint64_t)mr(t, VIRTIO_MMIO_DEVICE_FEATURES) << 32;
	f &= want | VIRTIO_BIT(VIRTIO_F_VERSION_1);
	mw(t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	mw(t, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)f);
	mw(t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	mw(t, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(f >> 32));
	mw(t, VIRTIO_MMIO_STATUS, ad | VIRTIO_CONFIG_S_FEATURES_OK);
	CHECK(mr(t, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_FEATURES_OK);
	d->features = f;
	for (unsigned q = 0; q < NQ; q++) {
		struct vdrv_queue *dq = &d->q[q];

		vdrv_queue_layout(d, q, QSIZE);
		mw(t, VIRTIO_MMIO_QUEUE_SEL, q);
		mw(t, VIRTIO_MMIO_QUEUE_NUM, QSIZE);
		mw(t, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)dq->desc);
		mw(t, VIRTIO_MMIO_QUEUE_DESC_HIGH, (uint32_t)(dq->desc >> 32));
		mw(t, VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)dq->avail);
		mw(t, VIRTIO_MMIO_QUEUE_AVAIL_HIGH, (uint32_t)(dq->avail >> 32));
		mw(t, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)dq->used);
		mw(t, VIRTIO_MMIO_QUEUE_USED_HIGH, (uint32_t)(dq->used >> 32));
		mw(t, VIRTIO_MMIO_QUEUE_READY, 1);
		CHECK_EQ(mr(t, VIRTIO_MMIO_QUEUE_READY), 1);
		t->buf[q] = vdrv_alloc(d, 64, 16);
	}
	mw(t, VIRTIO_MMIO_STATUS, ad | VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
	for (unsigned q = 0; q < NQ; q++)
		CHECK(t->v->dev.queues[q].started);
}

/* n requests on queue q, made available, served by the test (the queues'
 * owner), taken back by the driver. */
static void mm_round_trips(struct tmm *t, unsigned q, unsigned n)
{
	struct virtq *vq = &t->v->dev.queues[q].vq;
	static struct virtq_chain c;

	for (unsigned i = 0; i < n; i++) {
		struct vdrv_sg sg[2] = { { t->buf[q], 16, false }, { t->buf[q] + 32, 16, true } };
		int id = vdrv_add(&t->v->d, q, sg, 2, false);
		uint32_t uid, len;

		CHECK(id >= 0);
		CHECK_EQ(virtq_pop(vq, &c), 1);
		CHECK_EQ(c.head, id);
		virtq_push(vq, c.head, 16);
		if (virtq_publish(vq))
			t->v->dev.tops->signal_queue(&t->v->dev, q);
		CHECK_EQ(vdrv_get_used(&t->v->d, q, &uid, &len), 1);
		CHECK_EQ(uid, (uint32_t)id);
	}
}

/* Every register a driver can read, equal on both (InterruptStatus as
 * it was). */
static void mm_same_registers(struct tmm *a, struct tmm *b)
{
	static const unsigned regs[] = {
		VIRTIO_MMIO_MAGIC_VALUE, VIRTIO_MMIO_VERSION, VIRTIO_MMIO_DEVICE_ID,
		VIRTIO_MMIO_DEVICE_FEATURES, VIRTIO_MMIO_QUEUE_NUM_MAX, VIRTIO_MMIO_QUEUE_READY,
		VIRTIO_MMIO_INTERRUPT_STATUS, VIRTIO_MMIO_STATUS, VIRTIO_MMIO_CONFIG_GENERATION,
	};

	for (unsigned i = 0; i < ARRAY_SIZE(regs); i++)
		CHECK_EQ(mr(b, regs[i]), mr(a, regs[i]));
	/* And the page guest reads come from without an exit. */
	CHECK(!memcmp(b->m->regs, a->m->regs, VIRTIO_MMIO_CONFIG));
}

/* A virtio-mmio device comes back with its selects, InterruptStatus and
 * register page, and serves the driver's next requests from the saved
 * ring positions (split and packed), its pending interrupt raised again. */
static void check_mmio_carries_on(uint64_t want)
{
	struct tmm *a = tmm_new(), *b = tmm_new();
	struct saved s;
	uint64_t fired;

	mm_driver_up(a, want);
	mm_round_trips(a, 0, QSIZE + 2);
	mm_round_trips(a, 1, 3);
	CHECK_EQ(mr(a, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_VRING);   /* not ACKed */
	mw(a, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	mw(a, VIRTIO_MMIO_QUEUE_SEL, 1);
	s = save_device(&a->vm, a->idx);
	memcpy(b->v->d.ram, a->v->d.ram, a->v->d.ram_size);
	memcpy(b->v->d.q, a->v->d.q, sizeof(a->v->d.q));
	b->v->d.features = a->v->d.features;
	b->v->d.brk = a->v->d.brk;
	memcpy(b->buf, a->buf, sizeof(a->buf));
	efd_count(b->m->irq_fd);
	CHECK_EQ(load_device(&b->vm, b->idx, &s), 0);
	fired = efd_count(b->m->irq_fd);
	CHECK(fired >= 1);                      /* the interrupt the guest had not taken */
	mm_same_registers(a, b);
	CHECK_EQ(mr(b, VIRTIO_MMIO_DEVICE_FEATURES), mr(a, VIRTIO_MMIO_DEVICE_FEATURES));
	mw(b, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_VRING);
	CHECK_EQ(mr(b, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	for (unsigned q = 0; q < NQ; q++)
		CHECK(b->v->dev.queues[q].started);
	mm_round_trips(b, 0, QSIZE + 3);
	mm_round_trips(b, 1, 3);
	CHECK_EQ(b->v->dev.guest_errors, 0);
	saved_free(&s);
	tmm_free(a);
	tmm_free(b);
}

TEST(a_virtio_mmio_device_restored_serves_the_drivers_next_requests_split)
{
	check_mmio_carries_on(0);
}

TEST(a_virtio_mmio_device_restored_serves_the_drivers_next_requests_packed)
{
	check_mmio_carries_on(VIRTIO_BIT(VIRTIO_F_RING_PACKED));
}

/* The guest found the device where its command line said: a window or
 * interrupt elsewhere is refused naming both. */
TEST(a_virtio_mmio_device_at_another_window_is_refused_naming_both)
{
	struct tmm *a = tmm_new(), *b = tmm_new();
	struct saved s;

	mm_driver_up(a, 0);
	a->m->base = 0xd0000000u;
	a->m->gsi = 5;
	s = save_device(&a->vm, a->idx);
	b->m->base = 0xd0001000u;
	b->m->gsi = 5;
	CHECK_EQ(load_device(&b->vm, b->idx, &s), -EINVAL);
	CHECK(strstr(err, "virtio-mmio device at 0xd0000000 (interrupt 5) there, at 0xd0001000 "
		     "(interrupt 5) here"));
	for (unsigned q = 0; q < NQ; q++)
		CHECK(!b->v->dev.queues[q].started);
	a->m->base = b->m->base = 0;
	saved_free(&s);
	tmm_free(a);
	tmm_free(b);
}

/* A request the device holds unstarted (a disk waiting for rate-limit
 * tokens: queue_held) does not stop a snapshot: the saved queue is where
 * it stood before it took the request, so the restored device takes it
 * again and the driver gets its completion, once. */
static void check_held_request_served_after_restore(uint64_t want)
{
	struct tvm *a = tvm_new(), *b = tvm_new();
	static struct virtq_chain c;
	struct saved s;
	uint32_t uid, len;
	uint16_t head;
	int id;

	drv_up(a, want);
	round_trips(a, 1, 2);
	id = drv_add(a, 1);
	CHECK_EQ(virtq_pop(&a->v->dev.queues[1].vq, &c), 1);
	CHECK_EQ(c.head, id);
	a->v->held[1] = (unsigned)id + 1;
	s = save_device(&a->vm, a->idx);
	guest_moves(a, b);
	CHECK_EQ(load_device(&b->vm, b->idx, &s), 0);
	CHECK(b->v->dev.queues[1].started);
	CHECK_EQ(vdrv_get_used(&b->v->d, 1, &uid, &len), 0);   /* not done yet */
	CHECK_EQ(dev_serve(b, 1, &head), 1);
	CHECK_EQ(head, id);
	CHECK_EQ(vdrv_get_used(&b->v->d, 1, &uid, &len), 1);
	CHECK_EQ(uid, (uint32_t)id);
	CHECK_EQ(vdrv_get_used(&b->v->d, 1, &uid, &len), 0);   /* once */
	round_trips(b, 1, 3);
	CHECK_EQ(b->v->dev.guest_errors, 0);
	saved_free(&s);
	tvm_free(a);
	tvm_free(b);
}

TEST(a_request_held_for_rate_limit_tokens_is_given_back_and_served_after_the_restore_split)
{
	check_held_request_served_after_restore(0);
}

TEST(a_request_held_for_rate_limit_tokens_is_given_back_and_served_after_the_restore_packed)
{
	check_held_request_served_after_restore(VIRTIO_BIT(VIRTIO_F_RING_PACKED));
}

/* ---- virtq positions ---------------------------------------------------- */

static void check_pos_busy_until_published(uint64_t want, uint16_t last_avail)
{
	struct vnull *v = vnull_running(1, QSIZE, want);
	struct virtq *vq = &v->dev.queues[0].vq;
	uint64_t buf = vdrv_alloc(&v->d, 64, 16);
	struct vdrv_sg sg[2] = { { buf, 16, false }, { buf + 32, 16, true } };
	static struct virtq_chain c;
	struct virtq_pos p;

	CHECK_EQ(virtq_get_pos(vq, -1, &p), 0);
	CHECK_EQ(p.last_avail, 0);
	CHECK_EQ(p.used_idx, 0);
	CHECK(vdrv_add(&v->d, 0, sg, 2, false) >= 0);
	CHECK_EQ(virtq_pop(vq, &c), 1);
	CHECK_EQ(virtq_get_pos(vq, -1, &p), -EBUSY);        /* popped, not pushed */
	virtq_push(vq, c.head, 16);
	CHECK_EQ(virtq_get_pos(vq, -1, &p), -EBUSY);        /* pushed, not published */
	virtq_publish(vq);
	CHECK_EQ(virtq_get_pos(vq, -1, &p), 0);
	CHECK_EQ(p.last_avail, last_avail);
	CHECK_EQ(p.used_idx, last_avail);
	CHECK_EQ(p.last_avail, vq->last_avail);
	CHECK_EQ(p.avail_wrap, vq->avail_wrap);
	CHECK_EQ(p.used_wrap, vq->used_wrap);
	vnull_free(v);
}

TEST(virtq_get_pos_is_busy_from_pop_until_the_push_is_published_split)
{
	check_pos_busy_until_published(0, 1);
}

TEST(virtq_get_pos_is_busy_from_pop_until_the_push_is_published_packed)
{
	check_pos_busy_until_published(VIRTIO_BIT(VIRTIO_F_RING_PACKED), 2);
}

/* A buffer popped and never started, the last popped, is given back: the
 * position is the one before its pop (the queue as it was; a restored
 * device set there takes it again: a_request_held_...). Not one that is not the last
 * popped, nor while another is in flight. Around the ring's end: a packed
 * chain of two slots straddling it flips the wrap counter back. */
static void check_pos_gives_back_the_held_buffer(uint64_t want)
{
	struct vnull *v = vnull_running(1, QSIZE, want);
	struct virtq *vq = &v->dev.queues[0].vq;
	uint64_t buf = vdrv_alloc(&v->d, 64, 16);
	struct vdrv_sg sg[2] = { { buf, 16, false }, { buf + 32, 16, true } };
	static struct virtq_chain c, c2;
	struct virtq_pos before, p;
	int id, id2;

	/* Up to one slot short of the ring's end (packed: each request two slots). */
	for (unsigned i = 0; i < (vq->packed ? QSIZE / 2 - 1 : QSIZE - 1) + 1; i++) {
		CHECK(vdrv_add(&v->d, 0, sg, vq->packed && i == QSIZE / 2 - 1 ? 1 : 2,
			       false) >= 0);
		CHECK_EQ(virtq_pop(vq, &c), 1);
		virtq_push(vq, c.head, 0);
		virtq_publish(vq);
		CHECK(vdrv_get_used(&v->d, 0, (uint32_t[1]){ 0 }, (uint32_t[1]){ 0 }) == 1);
	}
	CHECK_EQ(virtq_get_pos(vq, -1, &before), 0);
	id = vdrv_add(&v->d, 0, sg, 2, false);
	CHECK(id >= 0);
	CHECK_EQ(virtq_pop(vq, &c), 1);
	CHECK_EQ(c.head, id);
	CHECK_EQ(virtq_get_pos(vq, -1, &p), -EBUSY);
	CHECK_EQ(virtq_get_pos(vq, id, &p), 0);
	CHECK_EQ(p.last_avail, before.last_avail);
	CHECK_EQ(p.avail_wrap, before.avail_wrap);
	CHECK_EQ(p.used_idx, before.used_idx);
	CHECK_EQ(p.used_wrap, before.used_wrap);
	CHECK_EQ(virtq_get_pos(vq, (id + 1) % QSIZE, &p), -EBUSY);      /* not in flight */
	/* Two in flight: neither can be given back. */
	id2 = vdrv_add(&v->d, 0, sg, 2, false);
	CHECK_EQ(virtq_pop(vq, &c2), 1);
	CHECK_EQ(virtq_get_pos(vq, id, &p), -EBUSY);
	CHECK_EQ(virtq_get_pos(vq, id2, &p), -EBUSY);
	/* The earlier one done: the later is the last popped, and given back. */
	virtq_push(vq, c.head, 0);
	virtq_publish(vq);
	CHECK_EQ(virtq_get_pos(vq, id, &p), -EBUSY);
	CHECK_EQ(virtq_get_pos(vq, id2, &p), 0);
	vnull_free(v);
}

TEST(virtq_get_pos_gives_back_the_last_buffer_popped_split)
{
	check_pos_gives_back_the_held_buffer(0);
}

TEST(virtq_get_pos_gives_back_the_last_buffer_popped_packed_across_the_wrap)
{
	check_pos_gives_back_the_held_buffer(VIRTIO_BIT(VIRTIO_F_RING_PACKED));
}

TEST(virtq_set_pos_refuses_a_packed_position_outside_the_ring_and_takes_any_split_index)
{
	struct vnull *v = vnull_running(1, QSIZE, VIRTIO_BIT(VIRTIO_F_RING_PACKED));
	struct virtq *vq = &v->dev.queues[0].vq;
	struct virtq_pos p = { .last_avail = QSIZE - 1, .used_idx = 3, .avail_wrap = false,
			       .used_wrap = true };

	CHECK(vq->packed);
	CHECK_EQ(virtq_set_pos(vq, &p), 0);
	CHECK_EQ(vq->last_avail, QSIZE - 1);
	CHECK_EQ(vq->used_idx, 3);
	CHECK(!vq->avail_wrap);
	CHECK(vq->used_wrap);
	p.last_avail = QSIZE;
	CHECK_EQ(virtq_set_pos(vq, &p), -EINVAL);
	p.last_avail = 0;
	p.used_idx = QSIZE;
	CHECK_EQ(virtq_set_pos(vq, &p), -EINVAL);
	p.used_idx = 0xffff;
	CHECK_EQ(virtq_set_pos(vq, &p), -EINVAL);
	CHECK_EQ(vq->last_avail, QSIZE - 1);            /* refused: unchanged */
	vnull_free(v);

	v = vnull_running(1, QSIZE, 0);
	vq = &v->dev.queues[0].vq;
	p = (struct virtq_pos){ .last_avail = 0xfff0, .used_idx = 0xffef, .avail_wrap = false };
	CHECK_EQ(virtq_set_pos(vq, &p), 0);
	CHECK_EQ(vq->last_avail, 0xfff0);
	CHECK_EQ(vq->used_idx, 0xffef);
	CHECK_EQ(vq->published_used, 0xffef);
	CHECK(vq->avail_wrap && vq->used_wrap);        /* unused by split rings */
	vnull_free(v);
}

/* ---- a virtio-blk disk's own state -------------------------------------- */

/* A disk on a new image of size bytes, with keys (",ops_size=..." or ""). */
static struct virtio_dev *blk_with(char *path, uint64_t size, const char *keys,
				   struct guest_mem *mem)
{
	struct virtio_dev *dev;
	struct mvm_disk o;
	char spec[256];
	int fd;

	strcpy(path, "/tmp/mvm-test-snapdev-XXXXXX");
	fd = mkstemp(path);
	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, (off_t)size), 0);
	close(fd);
	snprintf(spec, sizeof(spec), "%s%s", path, keys);
	CHECK_EQ(test_disk_parse(spec, 1, &o, err, sizeof(err)), 0);
	if (blk_dev_new(&o, mem, &dev, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		CHECK(0);
	}
	return dev;
}

static struct virtio_dev *blk_of_size(char *path, uint64_t size, struct guest_mem *mem)
{
	return blk_with(path, size, "", mem);
}

/* Three disks and their images gone. */
static void blk_free3(struct virtio_dev *a, struct virtio_dev *b, struct virtio_dev *c,
		      const char *pa, const char *pb, const char *pc)
{
	virtio_dev_destroy(a);
	virtio_dev_destroy(b);
	virtio_dev_destroy(c);
	unlink(pa);
	unlink(pb);
	unlink(pc);
}

/* A disk's own section, saved. */
static struct saved blk_saved(struct virtio_dev *dev)
{
	struct snap_w w;

	snap_w_init(&w);
	snap_begin(&w, T_DEV, 0);
	CHECK_EQ(dev->ops->save(dev, &w, err, sizeof(err)), 0);
	snap_end(&w);
	return saved_image(&w, 0);
}

TEST(a_disk_restored_onto_an_image_of_another_size_is_refused_naming_both_sizes)
{
	struct virtio_dev *a, *b, *c;
	char pa[64], pb[64], pc[64];
	struct guest_mem mem = { 0 };
	struct saved s;
	struct snap_r r;

	check_need_io_uring();
	a = blk_of_size(pa, 1 << 20, &mem);
	b = blk_of_size(pb, 2 << 20, &mem);
	c = blk_of_size(pc, 1 << 20, &mem);
	s = blk_saved(a);
	r = (struct snap_r){ .p = s.body, .len = s.blen };
	CHECK_EQ(b->ops->load(b, &r, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, pb));
	CHECK(strstr(err, "has 2097152 bytes"));
	CHECK(strstr(err, "had 1048576"));
	r = (struct snap_r){ .p = s.body, .len = s.blen };
	CHECK_EQ(c->ops->load(c, &r, err, sizeof(err)), 0);
	CHECK_EQ(snap_done(&r, err, sizeof(err)), 0);
	saved_free(&s);
	blk_free3(a, b, c, pa, pb, pc);
}

/* A disk's own rate limiter goes on from where the snapshot left it: the
 * tokens used and the one-time burst spent stay used in the restored disk
 * (and in every clone), instead of a full bucket and a new burst. */
TEST(a_disks_rate_limiter_goes_on_from_its_saved_level)
{
	/* 100 requests per 100 s: nothing refills while the test runs. */
	const char *keys = ",ops_size=100,ops_refill_time=100000,ops_one_time_burst=50";
	struct virtio_dev *a, *b, *c;
	char pa[64], pb[64], pc[64];
	struct guest_mem mem = { 0 };
	struct ratelim *rl;
	struct saved s;
	struct snap_r r;

	check_need_io_uring();
	a = blk_with(pa, 1 << 20, keys, &mem);
	b = blk_with(pb, 1 << 20, keys, &mem);
	c = blk_of_size(pc, 1 << 20, &mem);
	rl = &((struct blk_dev *)a)->rate;
	for (unsigned i = 0; i < 120; i++)
		CHECK_EQ(ratelim_take(&rl, 1, 512, mono_ns(), false), 0);
	CHECK_EQ(rl->ops.tokens, 30);
	CHECK_EQ(rl->ops.burst, 0);
	s = blk_saved(a);
	CHECK_EQ(((struct blk_dev *)b)->rate.ops.tokens, 100);
	CHECK_EQ(((struct blk_dev *)b)->rate.ops.burst, 50);
	r = (struct snap_r){ .p = s.body, .len = s.blen };
	CHECK_EQ(b->ops->load(b, &r, err, sizeof(err)), 0);
	CHECK_EQ(snap_done(&r, err, sizeof(err)), 0);
	CHECK_EQ(((struct blk_dev *)b)->rate.ops.tokens, 30);
	CHECK_EQ(((struct blk_dev *)b)->rate.ops.burst, 0);
	/* A restore given no limits has none. */
	r = (struct snap_r){ .p = s.body, .len = s.blen };
	CHECK_EQ(c->ops->load(c, &r, err, sizeof(err)), 0);
	CHECK(!((struct blk_dev *)c)->rate.on);
	saved_free(&s);
	blk_free3(a, b, c, pa, pb, pc);
}

/* ---- kv_format ---------------------------------------------------------- */

/* spec (from kv_format) parsed as the restore parses it: over a disk
 * with mvm_disk_init's defaults, through the table without its PATH. */
static void disk_reparse(const char *spec, struct mvm_disk *d, char *buf, size_t buflen)
{
	struct kv_table keys = blk_disk_keys;

	keys.first = NULL;
	mvm_disk_init(d, "disk.img");
	err[0] = '\0';
	if (kv_parse(&keys, spec, d, buf, buflen, err, sizeof(err))) {
		fprintf(stderr, "'%s': %s\n", spec, err);
		CHECK(0);
	}
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static void check_same_disk(const struct mvm_disk *a, const struct mvm_disk *b)
{
	CHECK_STR(b->path, a->path);
	CHECK_EQ(b->ro, a->ro);
	CHECK(str_eq(b->serial, a->serial));
	CHECK_EQ(b->cache, a->cache);
	CHECK_EQ(b->discard, a->discard);
	CHECK_EQ(b->queues, a->queues);
	CHECK_EQ(b->transport, a->transport);
	CHECK_EQ(b->packed, a->packed);
	CHECK_EQ(b->poll_us, a->poll_us);
	CHECK_EQ(b->io_threads, a->io_threads);
	CHECK_EQ(b->gather_us, a->gather_us);
	CHECK_EQ(b->fixed_buffers, a->fixed_buffers);
	CHECK(!memcmp(&b->rate, &a->rate, sizeof(a->rate)));
	CHECK(str_eq(b->rate_limit_group, a->rate_limit_group));
	CHECK(str_eq(b->id, a->id));
}

TEST(kv_format_of_a_disk_with_every_option_set_parses_back_to_the_same_disk)
{
	struct mvm_disk d, e;
	char spec[1024], again[1024], buf[1024];
	size_t n;

	mvm_disk_init(&d, "disk.img");
	d.ro = true;
	d.serial = "SN-0042";
	d.cache = MVM_CACHE_NONE;
	d.discard = true;
	d.queues = 4;
	d.transport = MVM_TRANSPORT_MMIO;
	d.packed = false;
	d.poll_us = 0;
	d.io_threads = 2;
	d.gather_us = 75;
	d.fixed_buffers = true;
	d.rate.bw = (struct mvm_token_bucket){ .size = 1 << 20, .one_time_burst = 4096,
					       .refill_time_ms = 100 };
	d.rate.ops = (struct mvm_token_bucket){ .size = 500, .refill_time_ms = 1000 };
	d.rate_limit_group = "grp-1";
	d.id = "hot0";
	n = kv_format(&blk_disk_keys, &d, spec, sizeof(spec));
	CHECK_EQ(n, strlen(spec));
	CHECK(!strstr(spec, "disk.img"));
	CHECK(!strncmp(spec, "ro,", 3));
	CHECK(strstr(spec, ",id=hot0,serial=SN-0042,"));
	CHECK(strstr(spec, ",cache=none,"));
	CHECK(strstr(spec, ",queues=4,"));
	CHECK(strstr(spec, ",transport=mmio,"));
	CHECK(strstr(spec, ",bw_size=1048576,"));
	CHECK(strstr(spec, ",rate_limit_group=grp-1"));
	CHECK(!strstr(spec, ",rw"));                    /* an alias: never written */
	disk_reparse(spec, &e, buf, sizeof(buf));
	check_same_disk(&d, &e);
	/* And it formats the same again. */
	CHECK_EQ(kv_format(&blk_disk_keys, &e, again, sizeof(again)), n);
	CHECK_STR(again, spec);
}

TEST(kv_format_of_a_default_disk_parses_back_to_the_defaults)
{
	struct mvm_disk d, e;
	char spec[1024], buf[1024];

	mvm_disk_init(&d, "disk.img");
	kv_format(&blk_disk_keys, &d, spec, sizeof(spec));
	CHECK(strncmp(spec, "ro,", 3) && !strstr(spec, ",ro,"));
	CHECK(!strstr(spec, "serial="));
	CHECK(!strstr(spec, "io-threads="));            /* 0: unset */
	CHECK(!strstr(spec, "rate_limit_group="));
	CHECK(strstr(spec, "cache=writeback"));
	/* "rw" is ro's alias, left out of the help: never written. */
	CHECK(strncmp(spec, "rw", 2) && !strstr(spec, ",rw"));
	/* Parsed over a disk that differs, it gives the defaults back
	 * wherever the spec names the key. */
	disk_reparse(spec, &e, buf, sizeof(buf));
	check_same_disk(&d, &e);
	e.cache = MVM_CACHE_NONE;
	e.queues = 7;
	e.packed = false;
	e.poll_us = 3;
	e.rate.bw.size = 99;
	{
		struct kv_table keys = blk_disk_keys;

		keys.first = NULL;
		CHECK_EQ(kv_parse(&keys, spec, &e, buf, sizeof(buf), err, sizeof(err)), 0);
	}
	check_same_disk(&d, &e);
}

TEST(kv_format_cuts_to_the_buffer_and_returns_the_length_it_needs)
{
	struct mvm_disk d;
	char full[1024], small[10], canary[4] = "xyz";
	size_t n;

	mvm_disk_init(&d, "disk.img");
	d.serial = "abc";
	n = kv_format(&blk_disk_keys, &d, full, sizeof(full));
	CHECK(n > sizeof(small));
	CHECK_EQ(kv_format(&blk_disk_keys, &d, small, sizeof(small)), n);
	CHECK_EQ(strlen(small), sizeof(small) - 1);
	CHECK(!strncmp(small, full, sizeof(small) - 1));
	CHECK_EQ(kv_format(&blk_disk_keys, &d, NULL, 0), n);
	CHECK_EQ(kv_format(&blk_disk_keys, &d, canary, 0), n);
	CHECK_STR(canary, "xyz");
}

TEST(kv_format_writes_io_threads_past_the_queue_limit_as_the_limit_and_kv_format_check_refuses_a_serial_with_a_comma)
{
	struct mvm_disk d, e;
	char spec[1024], again[1024], buf[1024];
	size_t n;

	/* io-threads=100 (kv_check takes it: one per queue) formats as the
	 * spec's largest, which the restore's parse takes back. */
	mvm_disk_init(&d, "disk.img");
	d.io_threads = 100;
	n = kv_format(&blk_disk_keys, &d, spec, sizeof(spec));
	CHECK(strstr(spec, "io-threads=64"));
	CHECK(!strstr(spec, "io-threads=100"));
	disk_reparse(spec, &e, buf, sizeof(buf));
	CHECK_EQ(e.io_threads, 64);
	d.io_threads = 64;
	check_same_disk(&d, &e);
	CHECK_EQ(kv_format(&blk_disk_keys, &e, again, sizeof(again)), n);
	CHECK_STR(again, spec);

	/* A comma ends a key in a spec: a serial holding one is refused,
	 * naming the disk, the key and the value. */
	mvm_disk_init(&d, "disk.img");
	d.serial = "a,b";
	err[0] = '\0';
	CHECK_EQ(kv_format_check(&blk_disk_keys, &d, "disk.img", err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "disk.img"));
	CHECK(strstr(err, "serial"));
	CHECK(strstr(err, "'a,b'"));
	CHECK(!strchr(err, '\n'));
	/* A disk with every string set, none with a comma, passes. */
	d.serial = "SN-0042";
	d.rate_limit_group = "grp-1";
	CHECK_EQ(kv_format_check(&blk_disk_keys, &d, "disk.img", err, sizeof(err)), 0);
	mvm_disk_init(&d, "disk.img");
	CHECK_EQ(kv_format_check(&blk_disk_keys, &d, "disk.img", err, sizeof(err)), 0);
}

/* ---- err_prefix --------------------------------------------------------- */

TEST(err_prefix_puts_the_prefix_before_the_message)
{
	char e[64] = "no such file";

	err_prefix(e, sizeof(e), "restore %s: disk %u: ", "/snap", 2);
	CHECK_STR(e, "restore /snap: disk 2: no such file");
	e[0] = '\0';
	err_prefix(e, sizeof(e), "%s", "alone");
	CHECK_STR(e, "alone");
}

TEST(err_prefix_cuts_the_whole_to_errlen_leaving_bytes_past_it_alone)
{
	char e[32];

	memset(e, '#', sizeof(e));
	strcpy(e, "0123456789");
	err_prefix(e, 16, "abcdefgh: ");
	CHECK_STR(e, "abcdefgh: 01234");
	CHECK_EQ(e[16], '#');
	/* A prefix longer than the buffer: its start only. */
	memset(e, '#', sizeof(e));
	strcpy(e, "msg");
	err_prefix(e, 8, "%s", "a-very-long-prefix");
	CHECK_STR(e, "a-very-");
	CHECK_EQ(e[8], '#');
	/* errlen 1: room for the NUL alone. */
	strcpy(e, "msg");
	err_prefix(e, 1, "pre");
	CHECK_STR(e, "");
}

TEST(err_prefix_keeps_the_message_one_line)
{
	char e[128] = "bad";

	err_prefix(e, sizeof(e), "restore %s: ", "a\nb\tc\x7f");
	CHECK_STR(e, "restore a?b?c?: bad");
	CHECK(!strchr(e, '\n'));
}

TEST(err_prefix_without_a_buffer_does_nothing)
{
	char e[4] = "abc";

	err_prefix(NULL, 16, "x");
	err_prefix(e, 0, "x");
	CHECK_STR(e, "abc");
}
