/* The virtio-mmio register model (devices/virtio_mmio.c, virtio 1.2 §4.2)
 * under a fuzzed driver: any sequence of register reads and writes (any
 * offset in the window, any width), ring contents, the device serving its
 * queues, interrupts raised and acknowledged. Null device (3 queues, 8
 * bytes of config) from the unit tests; see fuzz_vnull.h for the checks. */
#include "tests/fuzz/fuzz_vnull.h"

#define NQ 3

/* Registers a driver uses, so that most accesses hit one. */
static const uint16_t regs[] = {
	VIRTIO_MMIO_MAGIC_VALUE, VIRTIO_MMIO_VERSION, VIRTIO_MMIO_DEVICE_ID,
	VIRTIO_MMIO_VENDOR_ID, VIRTIO_MMIO_DEVICE_FEATURES, VIRTIO_MMIO_DEVICE_FEATURES_SEL,
	VIRTIO_MMIO_DRIVER_FEATURES, VIRTIO_MMIO_DRIVER_FEATURES_SEL, VIRTIO_MMIO_QUEUE_SEL,
	VIRTIO_MMIO_QUEUE_NUM_MAX, VIRTIO_MMIO_QUEUE_NUM, VIRTIO_MMIO_QUEUE_READY,
	VIRTIO_MMIO_QUEUE_NOTIFY, VIRTIO_MMIO_INTERRUPT_STATUS, VIRTIO_MMIO_INTERRUPT_ACK,
	VIRTIO_MMIO_STATUS, VIRTIO_MMIO_QUEUE_DESC_LOW, VIRTIO_MMIO_QUEUE_DESC_HIGH,
	VIRTIO_MMIO_QUEUE_AVAIL_LOW, VIRTIO_MMIO_QUEUE_AVAIL_HIGH, VIRTIO_MMIO_QUEUE_USED_LOW,
	VIRTIO_MMIO_QUEUE_USED_HIGH, VIRTIO_MMIO_CONFIG_GENERATION, VIRTIO_MMIO_CONFIG,
	VIRTIO_MMIO_CONFIG + 4,
};

static uint64_t offset(struct fz *f)
{
	uint8_t how = fz_u8(f);

	if (how & 1)
		return regs[(how >> 1) % ARRAY_SIZE(regs)];
	return fz_u16(f) % VIRTIO_MMIO_WINDOW;
}

static void op_access(struct vnull *v, struct fz *f, bool write)
{
	static const unsigned lens[] = { 4, 1, 2, 8 };
	uint64_t off = offset(f);
	unsigned len = lens[fz_u8(f) % 4];
	uint8_t b[8];

	if (write) {
		le64_store(b, fz_u64(f));
		virtio_mmio_write(&v->d.mmio, off, b, len);
	} else {
		memset(b, 0xa5, sizeof(b));
		virtio_mmio_read(&v->d.mmio, off, b, len);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = { data, size };
	uint64_t features = fz_u64(&in) & 0xffffff;    /* device-specific bits */
	struct vnull *v = fv_new(NQ, features);
	unsigned stops[NQ] = { 0 }, steps = 0;

	FZ_ASSERT(vdrv_attach(&v->d, &v->dev) == 0);
	while (fz_left(&in) && ++steps < 4096) {
		switch (fz_u8(&in) % 8) {
		case 0:
		case 1:
		case 2:
			op_access(v, &in, true);
			break;
		case 3:
			op_access(v, &in, false);
			break;
		case 4:
			fv_poke(v, &in);
			break;
		case 5:
			fv_serve(v, &in);
			break;
		case 6:
			/* the interrupt handler: eventfd, then InterruptStatus / ACK */
			vdrv_irq(&v->d);
			break;
		case 7:
			/* the device's next queue_start fails (or works again) */
			v->start_ret = fz_u8(&in) & 1 ? -ENOMEM : 0;
			break;
		}
		fv_check(v, stops);
	}
	virtio_dev_destroy(&v->dev);
	vdrv_detach(&v->d);
	fv_free(v);
	return 0;
}

/* --- seeds: Linux's probe, a queue set up and used, a reset --- */

static void w32(struct fz_buf *s, uint16_t reg, uint32_t val)
{
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(regs) && regs[i] != reg; i++)
		;
	fzb_u8(s, 0);                       /* write */
	fzb_u8(s, (uint8_t)(1 | i << 1));   /* a known register */
	fzb_u8(s, 0);                       /* 4 bytes */
	fzb_u64(s, val);
}

static void r32(struct fz_buf *s, uint16_t reg)
{
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(regs) && regs[i] != reg; i++)
		;
	fzb_u8(s, 3);
	fzb_u8(s, (uint8_t)(1 | i << 1));
	fzb_u8(s, 0);
}

static void setup(struct fz_buf *s, bool packed)
{
	uint64_t desc = FV_RAM_GPA, avail = FV_RAM_GPA + 0x400, used = FV_RAM_GPA + 0x800;

	s->n = 0;
	fzb_u64(s, 0);
	r32(s, VIRTIO_MMIO_MAGIC_VALUE);
	r32(s, VIRTIO_MMIO_VERSION);
	w32(s, VIRTIO_MMIO_STATUS, 0);
	w32(s, VIRTIO_MMIO_STATUS, 1);
	w32(s, VIRTIO_MMIO_STATUS, 3);
	w32(s, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	w32(s, VIRTIO_MMIO_DRIVER_FEATURES, 1 | (packed ? 1u << (VIRTIO_F_RING_PACKED - 32) : 0));
	w32(s, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	w32(s, VIRTIO_MMIO_DRIVER_FEATURES, 1u << VIRTIO_RING_F_EVENT_IDX);
	w32(s, VIRTIO_MMIO_STATUS, 11);
	r32(s, VIRTIO_MMIO_STATUS);
	w32(s, VIRTIO_MMIO_QUEUE_SEL, 0);
	r32(s, VIRTIO_MMIO_QUEUE_NUM_MAX);
	w32(s, VIRTIO_MMIO_QUEUE_NUM, 16);
	w32(s, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)desc);
	w32(s, VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)avail);
	w32(s, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)used);
	w32(s, VIRTIO_MMIO_QUEUE_READY, 1);
	w32(s, VIRTIO_MMIO_STATUS, 15);
}

static void fuzz_seeds(void)
{
	struct fz_buf s;

	setup(&s, false);
	/* one descriptor (split: desc[0] = 16 bytes at +0x1000), avail.idx = 1 */
	fzb_u8(&s, 4); fzb_u16(&s, 0); fzb_u8(&s, 14);
	fzb_u64(&s, FV_RAM_GPA + 0x1000); fzb_u32(&s, 16); fzb_u16(&s, 0);
	fzb_u8(&s, 4); fzb_u16(&s, 0x402); fzb_u8(&s, 2); fzb_u16(&s, 1);
	w32(&s, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	fzb_u8(&s, 5); fzb_u8(&s, 0); fzb_u8(&s, 4);
	fzb_u8(&s, 6);
	r32(&s, VIRTIO_MMIO_CONFIG_GENERATION);
	w32(&s, VIRTIO_MMIO_STATUS, 0);
	fuzz_seed("split_one_chain_then_reset", s.b, s.n);

	setup(&s, true);
	/* packed desc[0]: 16 bytes, id 0, AVAIL set */
	fzb_u8(&s, 4); fzb_u16(&s, 0); fzb_u8(&s, 16);
	fzb_u64(&s, FV_RAM_GPA + 0x1000); fzb_u32(&s, 16); fzb_u16(&s, 0);
	fzb_u16(&s, 1u << VRING_PACKED_DESC_F_AVAIL);
	fzb_u8(&s, 5); fzb_u8(&s, 0); fzb_u8(&s, 4);
	fzb_u8(&s, 6);
	fuzz_seed("packed_one_chain", s.b, s.n);

	/* a bad queue (size not a power of 2, split) puts the device in NEEDS_RESET */
	setup(&s, false);
	s.n -= 2 * 11;          /* drop QUEUE_READY and DRIVER_OK */
	w32(&s, VIRTIO_MMIO_QUEUE_NUM, 12);
	w32(&s, VIRTIO_MMIO_QUEUE_READY, 1);
	r32(&s, VIRTIO_MMIO_QUEUE_READY);
	r32(&s, VIRTIO_MMIO_STATUS);
	fuzz_seed("bad_queue_needs_reset", s.b, s.n);
}
