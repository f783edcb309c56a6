/* The port I/O bus (vmm/base/iobus.c) with the devices a guest reaches on it:
 * the i8042 (devices/i8042.c) at 0x60-0x64, the exit port and the POST
 * port sink (devices/exitport.c) at 0x501 and 0x80, the UART
 * (devices/serial.c) at 0x3f8 and the PCI conf1 ports (devices/pci.c) at
 * 0xcf8/0xcfc, on a struct vm without KVM (vm_init) so that stop
 * requests are recorded, plus ranges of the fuzzer's own registered and
 * unregistered at any base and length anywhere in the 64-bit space, also
 * overlapping, touching and wrapping. Accesses of 1, 2, 4 and 8 bytes at
 * any address, also unaligned and straddling range ends, go through
 * iobus_access and through vcpu_handle_exit's KVM_EXIT_IO (string I/O: a
 * count of elements from the run page).
 *
 * A model of the bus says what must happen: a registration succeeds iff
 * its range is valid and overlaps none (-EEXIST, -EINVAL otherwise), an
 * unregistration iff that base is registered for that opaque; an access
 * reaches exactly the one range that covers all of it, once, at its
 * offset (a read of no range gives all-ones); the first stop request
 * wins, and only a one-byte exit port write (status = the byte) or the
 * i8042's reset line (status 0) makes one. The i8042's output queue stays
 * in bounds and its interrupt line follows it. */
#include "tests/fuzz/fuzz.h"
#include "devices/exitport.h"
#include "devices/i8042.h"
#include "devices/pci.h"
#include "devices/serial.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/vcpu.h"
#include "vmm/kvm/vm.h"

#include <linux/kvm.h>

#define NFAKE 12
#define NRANGES (NFAKE + 8)

struct range {
	uint64_t base, len;
	int fake;                       /* index into fakes, or -1: a device */
	bool used;
};

struct fake {
	unsigned calls;
	uint64_t off;
	unsigned len;
	bool write;
	uint8_t last[8];
};

struct tp {
	struct vm vm;
	struct i8042 k;
	struct serial s;
	struct pci_bus bus;
	struct range r[NRANGES];
	struct fake fakes[NFAKE];
	int want_status;                /* first stop: its status, -1 none */
	enum vm_stop_reason want_reason;
};

static void fake_read(void *opaque, uint64_t off, uint8_t *data, unsigned len)
{
	struct fake *f = opaque;

	f->calls++;
	f->off = off;
	f->len = len;
	f->write = false;
	for (unsigned i = 0; i < len; i++)
		data[i] = (uint8_t)(off + i);
}

static void fake_write(void *opaque, uint64_t off, const uint8_t *data, unsigned len)
{
	struct fake *f = opaque;

	f->calls++;
	f->off = off;
	f->len = len;
	f->write = true;
	memcpy(f->last, data, len);
}

static const struct io_ops fake_ops = { fake_read, fake_write };

static void model_add(struct tp *t, uint64_t base, uint64_t len, int fake)
{
	for (unsigned i = 0; i < NRANGES; i++) {
		if (!t->r[i].used) {
			t->r[i] = (struct range){ base, len, fake, true };
			return;
		}
	}
	FZ_ASSERT(0);
}

static bool overlaps(const struct range *r, uint64_t base, uint64_t len)
{
	/* Both valid (no wrap): [base, base+len) against [r->base, r->base+r->len). */
	return base < r->base + r->len && r->base < base + len;
}

/* The range that covers all of [addr, addr+len), or NULL. */
static const struct range *model_find(const struct tp *t, uint64_t addr, unsigned len)
{
	for (unsigned i = 0; i < NRANGES; i++) {
		const struct range *r = &t->r[i];
		if (r->used && addr >= r->base && addr - r->base < r->len &&
		    len <= r->len - (addr - r->base))
			return r;
	}
	return NULL;
}

/* An address: near a device's ports, a small port, or anywhere (with a
 * bias towards the top of the space, where ranges may end at 2^64). */
static uint64_t pick_addr(struct fz *f)
{
	static const uint64_t near[] = { 0x60, 0x64, 0x80, 0x3f8, 0x501, 0xcf8, 0xcfc, 0 };
	uint8_t how = fz_u8(f);

	switch (how % 4) {
	case 0:
	case 1:
		return near[(how >> 2) % ARRAY_SIZE(near)] + (int8_t)fz_u8(f) / 16;
	case 2:
		return fz_u16(f);
	default:
		return (how & 0x80) ? UINT64_MAX - fz_u16(f) : fz_u64(f);
	}
}

/* A registration of a fake range, as the model says it must end. */
static void op_register(struct tp *t, struct fz *f)
{
	unsigned id = fz_u8(f) % NFAKE;
	uint64_t base = pick_addr(f), len;
	uint8_t how = fz_u8(f);
	int want = 0, ret;

	len = (how & 0x80) ? fz_u64(f) : how % 16;
	for (unsigned i = 0; i < NRANGES; i++)
		if (t->r[i].used && t->r[i].fake == (int)id)
			return;                 /* one range per fake */
	if (len == 0 || base + len < base)
		want = -EINVAL;
	else
		for (unsigned i = 0; i < NRANGES; i++)
			if (t->r[i].used && overlaps(&t->r[i], base, len))
				want = -EEXIST;
	ret = iobus_register(&t->vm.pio, base, len, &fake_ops, &t->fakes[id]);
	FZ_ASSERT(ret == want);
	if (!ret)
		model_add(t, base, len, (int)id);
}

static void op_unregister(struct tp *t, struct fz *f)
{
	unsigned id = fz_u8(f) % NFAKE, i;
	bool exact = fz_u8(f) & 1;
	uint64_t base = exact ? 0 : pick_addr(f);
	struct range *hit = NULL;

	for (i = 0; i < NRANGES; i++) {
		if (t->r[i].used && t->r[i].fake == (int)id) {
			if (exact)
				base = t->r[i].base;
			if (t->r[i].base == base)
				hit = &t->r[i];
		}
	}
	FZ_ASSERT(iobus_unregister(&t->vm.pio, base, &t->fakes[id]) == (hit ? 0 : -ENOENT));
	if (hit)
		hit->used = false;
}

/* What a write reaching device range r at addr will do to the stop
 * state: the exit port's byte is a status, the i8042's reset line (a
 * command 0xf0-0xfe with bit 0 clear, or an output port write with bit 0
 * clear after command 0xd1, `pending`) a poweroff with status 0. Only
 * the first stop counts. */
static void expect_stop(struct tp *t, const struct range *r, uint64_t addr, const uint8_t *d,
			uint8_t pending)
{
	int status = -1;

	if (t->want_status >= 0)
		return;
	if (r->base == 0x501) {
		status = d[0];
		t->want_reason = VM_STOP_GUEST_STATUS;
	} else if (r->base == 0x60 && ((addr == 0x64 && d[0] >= 0xf0 && !(d[0] & 1)) ||
				      (addr == 0x60 && pending == 0xd1 && !(d[0] & 1)))) {
		status = 0;
		t->want_reason = VM_STOP_POWEROFF;
	}
	t->want_status = status;
}

/* One access through the bus, checked against the model. */
static void access_one(struct tp *t, uint64_t addr, uint8_t *d, unsigned len, bool write)
{
	const struct range *r = model_find(t, addr, len);
	struct fake *f = r && r->fake >= 0 ? &t->fakes[r->fake] : NULL;
	unsigned calls = f ? f->calls : 0;
	uint8_t before[8];

	memcpy(before, d, len);
	if (r && r->fake < 0 && write)
		expect_stop(t, r, addr, d, t->k.pending_cmd);
	FZ_ASSERT(iobus_access(&t->vm.pio, addr, d, len, write) == (r != NULL));
	if (f) {
		FZ_ASSERT(f->calls == calls + 1);
		FZ_ASSERT(f->off == addr - r->base && f->len == len && f->write == write);
		if (write)
			FZ_ASSERT(!memcmp(f->last, before, len));
		else
			for (unsigned i = 0; i < len; i++)
				FZ_ASSERT(d[i] == (uint8_t)(f->off + i));
	}
	if (!r && !write)
		for (unsigned i = 0; i < len; i++)
			FZ_ASSERT(d[i] == 0xff);
}

static const unsigned lens[] = { 1, 2, 4, 8 };

static void op_access(struct tp *t, struct fz *f)
{
	uint8_t how = fz_u8(f), d[8];
	uint64_t addr = pick_addr(f);

	le64_store(d, fz_u64(f));
	access_one(t, addr, d, lens[how % 4], how & 4);
}

/* KVM_EXIT_IO as a vCPU thread sees it: count elements of size bytes at
 * data_offset in the run page (KVM keeps them inside the page), all to
 * one port, each one access in order. */
static void op_exit_io(struct tp *t, struct fz *f)
{
	static uint8_t page[4096] __attribute__((aligned(64)));
	struct kvm_run *run = (struct kvm_run *)page;
	struct vcpu v = { .vm = &t->vm };
	uint8_t how = fz_u8(f), *elems;
	unsigned size = lens[how % 3], off = 1024 + (fz_u8(f) % 64) * 4, max, count, i;
	uint16_t port = (uint16_t)pick_addr(f);
	bool out = how & 4;
	const struct range *r = model_find(t, port, size);
	struct fake *fk = r && r->fake >= 0 ? &t->fakes[r->fake] : NULL;
	unsigned calls = fk ? fk->calls : 0;

	max = (unsigned)((sizeof(page) - off) / size);
	count = 1 + fz_u16(f) % (max < 64 ? max : 64);
	memset(page, 0, sizeof(page));
	elems = page + off;
	fz_bytes(f, elems, size * count);
	run->exit_reason = KVM_EXIT_IO;
	run->io.direction = out ? KVM_EXIT_IO_OUT : KVM_EXIT_IO_IN;
	run->io.size = (uint8_t)size;
	run->io.port = port;
	run->io.count = count;
	run->io.data_offset = off;
	/* A string to one i8042 port: only the first data byte sees a
	 * pending command (each data write clears it). */
	if (out && r && r->fake < 0)
		for (i = 0; i < count; i++)
			expect_stop(t, r, port, elems + i * size, i == 0 ? t->k.pending_cmd : 0);
	FZ_ASSERT(vcpu_handle_exit(&v, run) == -1);
	FZ_ASSERT(v.exits[VCPU_EXIT_IO] == 1);
	if (fk) {
		FZ_ASSERT(fk->calls == calls + count);
		FZ_ASSERT(fk->off == port - r->base && fk->len == size && fk->write == out);
		if (out)
			FZ_ASSERT(!memcmp(fk->last, elems + (count - 1) * size, size));
	}
	for (i = 0; !out && (!r || fk) && i < count * size; i++)
		FZ_ASSERT(elems[i] == (r ? (uint8_t)(port - r->base + i % size) : 0xff));
}

static void check(struct tp *t)
{
	FZ_ASSERT(t->k.out_count <= sizeof(t->k.out) && t->k.out_head < sizeof(t->k.out));
	FZ_ASSERT(t->k.irq_level == (t->k.out_count && (t->k.ctr & I8042_CTR_KBDINT)));
	FZ_ASSERT(!!(t->k.status & I8042_STS_OBF) == (t->k.out_count != 0));
	FZ_ASSERT(vm_stop_status(&t->vm) == t->want_status);
	if (t->want_status >= 0)
		FZ_ASSERT(vm_stop_reason(&t->vm) == t->want_reason);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = { data, size };
	struct tp *t = calloc(1, sizeof(*t));
	unsigned steps = 0;

	FZ_ASSERT(t);
	FZ_ASSERT(vm_init(&t->vm, 1) == 0);
	t->want_status = -1;
	FZ_ASSERT(i8042_init(&t->k, &t->vm) == 0);
	FZ_ASSERT(iobus_register(&t->vm.pio, 0x60, 5, &i8042_io_ops, &t->k) == 0);
	model_add(t, 0x60, 5, -1);
	FZ_ASSERT(exitport_create(&t->vm, 0x501, 0x80) == 0);
	model_add(t, 0x501, 1, -1);
	model_add(t, 0x80, 1, -1);
	FZ_ASSERT(serial_init(&t->s, NULL, NULL) == 0);
	FZ_ASSERT(iobus_register(&t->vm.pio, 0x3f8, 8, &serial_io_ops, &t->s) == 0);
	model_add(t, 0x3f8, 8, -1);
	FZ_ASSERT(pci_bus_init(&t->bus, &t->vm, 0xe0000000, 0xfe000000, 20, arch_layout.fixed_mmio,
			       arch_layout.nfixed_mmio) == 0);
	model_add(t, PCI_CONF1_ADDR_PORT, 4, -1);
	model_add(t, PCI_CONF1_DATA_PORT, 4, -1);

	while (fz_left(&in) && ++steps < 2048) {
		uint8_t op = fz_u8(&in);

		switch (op % 8) {
		case 0:
		case 1:
			op_register(t, &in);
			break;
		case 2:
			op_unregister(t, &in);
			break;
		case 3:
			op_exit_io(t, &in);
			break;
		default:
			op_access(t, &in);
			break;
		}
		check(t);
	}
	pci_bus_destroy(&t->bus);
	serial_fini(&t->s);
	pthread_mutex_destroy(&t->k.lock);
	vm_fini(&t->vm);
	free(t);
	return 0;
}

/* --- seeds --- */

static void acc(struct fz_buf *s, uint64_t port, unsigned len, bool write, uint64_t v)
{
	fzb_u8(s, 4);
	fzb_u8(s, (uint8_t)((len == 1 ? 0 : len == 2 ? 1 : len == 4 ? 2 : 3) | (write ? 4 : 0)));
	fzb_u8(s, 2);                   /* a 16-bit port */
	fzb_u16(s, (uint16_t)port);
	fzb_u64(s, v);
}

static void fuzz_seeds(void)
{
	struct fz_buf s;

	/* Linux's i8042 probe, then reboot=k: 0xfe on the command port. */
	s.n = 0;
	acc(&s, 0x64, 1, false, 0);
	acc(&s, 0x64, 1, true, 0xaa);
	acc(&s, 0x64, 1, false, 0);
	acc(&s, 0x60, 1, false, 0);
	acc(&s, 0x64, 1, true, 0x20);
	acc(&s, 0x60, 1, false, 0);
	acc(&s, 0x64, 1, true, 0x60);
	acc(&s, 0x60, 1, true, 0x47);
	acc(&s, 0x60, 1, true, 0xff);
	acc(&s, 0x60, 4, false, 0);
	acc(&s, 0x80, 1, true, 0);
	acc(&s, 0x64, 1, true, 0xfe);
	fuzz_seed("i8042_probe_reboot", s.b, s.n);

	/* The exit port: a word write (no status), then a byte. */
	s.n = 0;
	acc(&s, 0x501, 2, true, 7);
	acc(&s, 0x500, 2, true, 7);
	acc(&s, 0x501, 1, true, 42);
	acc(&s, 0x501, 1, true, 43);
	fuzz_seed("exit_port", s.b, s.n);

	/* Fakes registered next to each other, one overlapping; accesses
	 * across their ends; a string OUT through the vCPU exit path. */
	s.n = 0;
	fzb_u8(&s, 0); fzb_u8(&s, 0); fzb_u8(&s, 2); fzb_u16(&s, 0x100); fzb_u8(&s, 8);
	fzb_u8(&s, 0); fzb_u8(&s, 1); fzb_u8(&s, 2); fzb_u16(&s, 0x108); fzb_u8(&s, 8);
	fzb_u8(&s, 0); fzb_u8(&s, 2); fzb_u8(&s, 2); fzb_u16(&s, 0x104); fzb_u8(&s, 8);
	acc(&s, 0x106, 4, true, 0x11223344);
	acc(&s, 0x107, 2, false, 0);
	acc(&s, 0x10c, 4, false, 0);
	acc(&s, 0x10d, 4, false, 0);
	fzb_u8(&s, 3); fzb_u8(&s, 6); fzb_u8(&s, 0); fzb_u8(&s, 2); fzb_u16(&s, 0x108);
	fzb_u16(&s, 4); fzb_bytes(&s, "hello", 5);
	fzb_u8(&s, 2); fzb_u8(&s, 0); fzb_u8(&s, 1);
	acc(&s, 0x100, 1, false, 0);
	fuzz_seed("fakes_overlap_and_string_io", s.b, s.n);
}
