/* virtio core (status machine §2.1/§3.1, features §2.2) and the virtio-mmio
 * v2 register model (§4.2), driven through registers like a guest driver. */
#include "tests/unit/check.h"
#include "tests/unit/vnulldev.h"

#include <errno.h>
#include <fcntl.h>

#include "arch/arch.h"
#include "vmm/kvm/vm.h"

#define V1 VIRTIO_BIT(VIRTIO_F_VERSION_1)
#define ACK VIRTIO_CONFIG_S_ACKNOWLEDGE
#define DRV VIRTIO_CONFIG_S_DRIVER
#define FOK VIRTIO_CONFIG_S_FEATURES_OK
#define DOK VIRTIO_CONFIG_S_DRIVER_OK
#define RAM_END (VNULL_RAM_GPA + VNULL_RAM_SIZE)

static uint64_t eventfd_count(int fd)
{
	uint64_t c = 0;

	if (read(fd, &c, sizeof(c)) != sizeof(c))
		return 0;
	return c;
}

static struct vnull *negotiated(unsigned nq)
{
	struct vnull *v = vnull_new(nq, 0);

	CHECK_EQ(vdrv_negotiate(&v->d, V1), 0);
	return v;
}

static uint32_t rd(struct vnull *v, uint64_t off) { return vdrv_rd(&v->d, off); }
static void wr(struct vnull *v, uint64_t off, uint32_t val) { vdrv_wr(&v->d, off, val); }

/* ---- identification and features ---- */

TEST(identification_registers)
{
	struct vnull *v = vnull_new(1, 0);

	CHECK_EQ(rd(v, VIRTIO_MMIO_MAGIC_VALUE), 0x74726976);
	CHECK_EQ(rd(v, VIRTIO_MMIO_VERSION), 2);
	CHECK_EQ(rd(v, VIRTIO_MMIO_DEVICE_ID), 0x7f);
	CHECK_EQ(rd(v, VIRTIO_MMIO_VENDOR_ID), VIRTIO_MMIO_VENDOR);
	vnull_free(v);
}

TEST(offers_version_1_ring_features_and_device_features)
{
	struct vnull *v = vnull_new(1, 1ULL << 9);

	wr(v, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	CHECK_EQ(rd(v, VIRTIO_MMIO_DEVICE_FEATURES),
		 (1u << 9) | (1u << VIRTIO_RING_F_EVENT_IDX) | (1u << VIRTIO_RING_F_INDIRECT_DESC));
	wr(v, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	CHECK_EQ(rd(v, VIRTIO_MMIO_DEVICE_FEATURES),            /* VERSION_1, RING_PACKED */
		 1u | (1u << (VIRTIO_F_RING_PACKED - 32)));
	wr(v, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 2);
	CHECK_EQ(rd(v, VIRTIO_MMIO_DEVICE_FEATURES), 0);
	vnull_free(v);
}

TEST(negotiation_accepts_offered_subset)
{
	struct vnull *v = vnull_new(1, 1ULL << 9);

	CHECK_EQ(vdrv_negotiate(&v->d, V1 | VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX)), 0);
	CHECK_EQ(v->dev.guest_features, V1 | VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX));
	CHECK_EQ(vdrv_status(&v->d), ACK | DRV | FOK);
	vnull_free(v);
}

TEST(features_ok_refused_for_feature_never_offered)
{
	struct vnull *v = vnull_new(1, 0);

	CHECK_EQ(vdrv_negotiate_raw(&v->d, V1 | (1ULL << 9), true), -EIO);
	CHECK_EQ(vdrv_status(&v->d), ACK | DRV);
	v->dev.no_packed = true;                /* packed=off: RING_PACKED not offered */
	CHECK_EQ(vdrv_negotiate_raw(&v->d, V1 | VIRTIO_BIT(VIRTIO_F_RING_PACKED), true), -EIO);
	vnull_free(v);
}

TEST(features_ok_refused_without_version_1)
{
	struct vnull *v = vnull_new(1, 0);

	CHECK_EQ(vdrv_negotiate(&v->d, VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX)), -EIO);
	CHECK(!(vdrv_status(&v->d) & FOK));
	/* and DRIVER_OK cannot follow */
	wr(v, VIRTIO_MMIO_STATUS, ACK | DRV | FOK | DOK);
	CHECK_EQ(vdrv_status(&v->d), ACK | DRV);
	vnull_free(v);
}

TEST(features_written_after_features_ok_ignored)
{
	struct vnull *v = negotiated(1);

	wr(v, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	wr(v, VIRTIO_MMIO_DRIVER_FEATURES, 1u << VIRTIO_RING_F_EVENT_IDX);
	wr(v, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	wr(v, VIRTIO_MMIO_DRIVER_FEATURES, 0);
	CHECK_EQ(v->dev.guest_features, V1);
	vnull_free(v);
}

/* ---- status state machine ---- */

TEST(status_bits_need_their_predecessors)
{
	struct vnull *v = vnull_new(1, 0);

	wr(v, VIRTIO_MMIO_STATUS, DRV);                 /* DRIVER without ACKNOWLEDGE */
	CHECK_EQ(vdrv_status(&v->d), 0);
	wr(v, VIRTIO_MMIO_STATUS, ACK);
	wr(v, VIRTIO_MMIO_STATUS, ACK | FOK);           /* FEATURES_OK without DRIVER */
	CHECK_EQ(vdrv_status(&v->d), ACK);
	wr(v, VIRTIO_MMIO_STATUS, ACK | DRV);
	wr(v, VIRTIO_MMIO_STATUS, ACK | DRV | DOK);     /* DRIVER_OK without FEATURES_OK */
	CHECK_EQ(vdrv_status(&v->d), ACK | DRV);
	vnull_free(v);
}

TEST(driver_cannot_clear_status_bits)
{
	struct vnull *v = negotiated(1);

	wr(v, VIRTIO_MMIO_STATUS, ACK | FOK);
	CHECK_EQ(vdrv_status(&v->d), ACK | DRV | FOK);
	vnull_free(v);
}

TEST(driver_cannot_set_needs_reset)
{
	struct vnull *v = vnull_new(1, 0);

	wr(v, VIRTIO_MMIO_STATUS, ACK | VIRTIO_CONFIG_S_NEEDS_RESET);
	CHECK_EQ(vdrv_status(&v->d), ACK);
	vnull_free(v);
}

TEST(failed_is_recorded)
{
	struct vnull *v = negotiated(1);

	wr(v, VIRTIO_MMIO_STATUS, ACK | DRV | FOK | VIRTIO_CONFIG_S_FAILED);
	CHECK_EQ(vdrv_status(&v->d), ACK | DRV | FOK | VIRTIO_CONFIG_S_FAILED);
	vnull_free(v);
}

TEST(driver_ok_starts_ready_queues_and_kicks_each_once)
{
	struct vnull *v = negotiated(3);

	CHECK_EQ(vdrv_queue_setup(&v->d, 0, 16), 1);
	CHECK_EQ(vdrv_queue_setup(&v->d, 2, 16), 1);
	CHECK_EQ(v->started[0], 0);
	vdrv_driver_ok(&v->d);
	CHECK_EQ(vdrv_status(&v->d), ACK | DRV | FOK | DOK);
	CHECK_EQ(v->started[0], 1);
	CHECK_EQ(v->started[1], 0);                     /* never made ready */
	CHECK_EQ(v->started[2], 1);
	CHECK_EQ(eventfd_count(v->dev.queues[0].kick_fd), 1);
	CHECK_EQ(eventfd_count(v->dev.queues[1].kick_fd), 0);
	CHECK_EQ(eventfd_count(v->dev.queues[2].kick_fd), 1);
	vnull_free(v);
}

TEST(queue_start_failure_sets_needs_reset)
{
	struct vnull *v = negotiated(1);

	CHECK_EQ(vdrv_queue_setup(&v->d, 0, 16), 1);
	v->start_ret = -ENOMEM;
	vdrv_driver_ok(&v->d);
	CHECK(vdrv_status(&v->d) & VIRTIO_CONFIG_S_NEEDS_RESET);
	CHECK_EQ(vdrv_irq(&v->d), VIRTIO_MMIO_INT_CONFIG);
	vnull_free(v);
}

TEST(reset_stops_queues_before_clearing_ring_state)
{
	struct vnull *v = vnull_running(2, 16, 0);
	unsigned resets = v->resets;    /* negotiation starts with a reset too */

	wr(v, VIRTIO_MMIO_STATUS, 0);
	CHECK_EQ(v->stopped[0], 1);
	CHECK_EQ(v->stopped[1], 1);
	/* told once, before any queue stopped: their threads wind down together */
	CHECK_EQ(v->stopping, 1);
	CHECK_EQ(v->stops_before_stopping, 0);
	CHECK(v->ready_at_stop);                        /* ring still configured at stop */
	CHECK_EQ(v->resets, resets + 1);
	CHECK_EQ(vdrv_status(&v->d), 0);
	CHECK_EQ(v->dev.guest_features, 0);
	wr(v, VIRTIO_MMIO_QUEUE_SEL, 0);
	CHECK_EQ(rd(v, VIRTIO_MMIO_QUEUE_READY), 0);
	CHECK_EQ(v->dev.queues[0].vq.size, VNULL_QMAX);
	/* reset again: queues are not stopped twice, nor announced */
	wr(v, VIRTIO_MMIO_STATUS, 0);
	CHECK_EQ(v->stopped[0], 1);
	CHECK_EQ(v->stopping, 1);
	vnull_free(v);
}

TEST(reset_writes_nothing_to_guest_memory)
{
	struct vnull *v = vnull_running(1, 16, VIRTIO_BIT(VIRTIO_RING_F_EVENT_IDX));
	uint8_t *snap = malloc(VNULL_RAM_SIZE);

	CHECK(snap);
	memset(v->d.ram, 0xa5, VNULL_RAM_SIZE);
	memcpy(snap, v->d.ram, VNULL_RAM_SIZE);
	wr(v, VIRTIO_MMIO_STATUS, 0);
	CHECK(memcmp(snap, v->d.ram, VNULL_RAM_SIZE) == 0);
	free(snap);
	vnull_free(v);
}

TEST(reset_clears_interrupt_status_selectors_and_stale_kicks)
{
	struct vnull *v = vnull_running(2, 16, 0);

	virtio_signal_queue(&v->dev, 0);
	wr(v, VIRTIO_MMIO_QUEUE_SEL, 1);
	vdrv_kick(&v->d, 1);
	wr(v, VIRTIO_MMIO_STATUS, 0);
	CHECK_EQ(rd(v, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	CHECK_EQ(v->d.mmio.queue_sel, 0);
	CHECK_EQ(eventfd_count(v->dev.queues[1].kick_fd), 0);
	vnull_free(v);
}

TEST(needs_reset_sets_status_and_signals_config_once)
{
	struct vnull *v = vnull_running(1, 16, 0);

	virtio_dev_needs_reset(&v->dev);
	virtio_dev_needs_reset(&v->dev);
	CHECK(vdrv_status(&v->d) & VIRTIO_CONFIG_S_NEEDS_RESET);
	CHECK_EQ(eventfd_count(v->d.mmio.irq_fd), 1);
	CHECK_EQ(rd(v, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_CONFIG);
	wr(v, VIRTIO_MMIO_STATUS, 0);
	CHECK_EQ(vdrv_status(&v->d), 0);
	vnull_free(v);
}

/* ---- queue configuration ---- */

static void check_queue_refused(uint32_t size, uint64_t desc, uint64_t avail, uint64_t used)
{
	struct vnull *v = negotiated(1);

	CHECK_EQ(vdrv_queue_program(&v->d, 0, size, desc, avail, used), 0);
	CHECK(!v->dev.queues[0].vq.ready);
	CHECK(vdrv_status(&v->d) & VIRTIO_CONFIG_S_NEEDS_RESET);
	vnull_free(v);
}

#define GOOD_DESC  (VNULL_RAM_GPA + 0x1000)
#define GOOD_AVAIL (VNULL_RAM_GPA + 0x2000)
#define GOOD_USED  (VNULL_RAM_GPA + 0x3000)

TEST(queue_with_good_configuration_becomes_ready)
{
	struct vnull *v = negotiated(1);

	CHECK_EQ(vdrv_queue_program(&v->d, 0, 16, GOOD_DESC, GOOD_AVAIL, GOOD_USED), 1);
	CHECK(!(vdrv_status(&v->d) & VIRTIO_CONFIG_S_NEEDS_RESET));
	vnull_free(v);
}

TEST(queue_size_0_refused)
{
	check_queue_refused(0, GOOD_DESC, GOOD_AVAIL, GOOD_USED);
}

TEST(queue_size_not_power_of_2_refused)
{
	check_queue_refused(24, GOOD_DESC, GOOD_AVAIL, GOOD_USED);
}

TEST(queue_size_above_max_refused)
{
	check_queue_refused(VNULL_QMAX * 2, GOOD_DESC, GOOD_AVAIL, GOOD_USED);
	check_queue_refused(0x10010, GOOD_DESC, GOOD_AVAIL, GOOD_USED);  /* not truncated to 16 */
}

TEST(queue_rings_outside_ram_refused)
{
	check_queue_refused(16, 0, GOOD_AVAIL, GOOD_USED);                  /* gpa 0 is no RAM */
	check_queue_refused(16, GOOD_DESC, RAM_END - 16, GOOD_USED);        /* crosses the end */
	check_queue_refused(16, GOOD_DESC, GOOD_AVAIL, RAM_END + 0x1000);   /* beyond */
	check_queue_refused(16, GOOD_DESC, GOOD_AVAIL, (1ULL << 40) + GOOD_USED); /* high half */
}

TEST(queue_rings_misaligned_refused)
{
	check_queue_refused(16, GOOD_DESC + 8, GOOD_AVAIL, GOOD_USED);
	check_queue_refused(16, GOOD_DESC, GOOD_AVAIL + 1, GOOD_USED);
	check_queue_refused(16, GOOD_DESC, GOOD_AVAIL, GOOD_USED + 2);
}

TEST(queue_ready_before_features_ok_ignored)
{
	struct vnull *v = vnull_new(1, 0);

	wr(v, VIRTIO_MMIO_STATUS, ACK);
	wr(v, VIRTIO_MMIO_STATUS, ACK | DRV);
	CHECK_EQ(vdrv_queue_program(&v->d, 0, 16, GOOD_DESC, GOOD_AVAIL, GOOD_USED), 0);
	vnull_free(v);
}

TEST(queue_config_after_driver_ok_ignored)
{
	struct vnull *v = vnull_running(2, 16, 0);
	struct virtq before = v->dev.queues[1].vq;

	/* queue 1 is ready; try re-programming it and disabling it */
	CHECK_EQ(vdrv_queue_program(&v->d, 1, 32, GOOD_DESC, GOOD_AVAIL, GOOD_USED), 1);
	wr(v, VIRTIO_MMIO_QUEUE_READY, 0);
	CHECK_EQ(rd(v, VIRTIO_MMIO_QUEUE_READY), 1);
	CHECK(memcmp(&before, &v->dev.queues[1].vq, sizeof(before)) == 0);
	vnull_free(v);
}

/* A queue left unready at DRIVER_OK cannot be configured or enabled later
 * (§4.2.3.2: queue setup belongs before DRIVER_OK); nothing starts. */
TEST(queue_config_of_unready_queue_after_driver_ok_ignored)
{
	struct vnull *v = negotiated(2);

	CHECK_EQ(vdrv_queue_setup(&v->d, 0, 16), 1);
	vdrv_driver_ok(&v->d);
	CHECK(vdrv_status(&v->d) & VIRTIO_CONFIG_S_DRIVER_OK);
	CHECK_EQ(vdrv_queue_program(&v->d, 1, 16, GOOD_DESC, GOOD_AVAIL, GOOD_USED), 0);
	CHECK(!v->dev.queues[1].vq.ready);
	CHECK_EQ(v->dev.queues[1].vq.size, VNULL_QMAX);
	CHECK_EQ(v->dev.queues[1].vq.desc_gpa, 0);
	CHECK_EQ(v->dev.queues[1].vq.driver_gpa, 0);
	CHECK_EQ(v->dev.queues[1].vq.device_gpa, 0);
	CHECK_EQ(v->started[1], 0);
	CHECK_EQ(v->started[0], 1);
	vnull_free(v);
}

TEST(queue_config_while_ready_ignored)
{
	struct vnull *v = negotiated(1);

	CHECK_EQ(vdrv_queue_program(&v->d, 0, 16, GOOD_DESC, GOOD_AVAIL, GOOD_USED), 1);
	wr(v, VIRTIO_MMIO_QUEUE_NUM, 32);
	wr(v, VIRTIO_MMIO_QUEUE_DESC_LOW, 0x5000);
	CHECK_EQ(v->dev.queues[0].vq.size, 16);
	CHECK_EQ(v->dev.queues[0].vq.desc_gpa, GOOD_DESC);
	/* disabling first (before DRIVER_OK) makes it writable again */
	wr(v, VIRTIO_MMIO_QUEUE_READY, 0);
	CHECK_EQ(rd(v, VIRTIO_MMIO_QUEUE_READY), 0);
	wr(v, VIRTIO_MMIO_QUEUE_NUM, 32);
	CHECK_EQ(v->dev.queues[0].vq.size, 32);
	vnull_free(v);
}

TEST(queue_sel_beyond_num_queues_selects_nothing)
{
	struct vnull *v = negotiated(2);

	wr(v, VIRTIO_MMIO_QUEUE_SEL, 0);
	CHECK_EQ(rd(v, VIRTIO_MMIO_QUEUE_NUM_MAX), VNULL_QMAX);
	CHECK_EQ(vdrv_queue_program(&v->d, 2, 16, GOOD_DESC, GOOD_AVAIL, GOOD_USED), 0);
	CHECK_EQ(rd(v, VIRTIO_MMIO_QUEUE_NUM_MAX), 0);
	CHECK_EQ(vdrv_queue_program(&v->d, 0xffffffff, 16, GOOD_DESC, GOOD_AVAIL, GOOD_USED), 0);
	CHECK(!(vdrv_status(&v->d) & VIRTIO_CONFIG_S_NEEDS_RESET));
	CHECK_EQ(v->dev.queues[0].vq.desc_gpa, 0);
	CHECK_EQ(v->dev.queues[1].vq.desc_gpa, 0);
	vnull_free(v);
}

TEST(queue_notify_kicks_the_queue_eventfd)
{
	struct vnull *v = vnull_running(2, 16, 0);

	eventfd_count(v->dev.queues[0].kick_fd);              /* the DRIVER_OK kicks */
	eventfd_count(v->dev.queues[1].kick_fd);
	wr(v, VIRTIO_MMIO_QUEUE_NOTIFY, 1);
	CHECK_EQ(eventfd_count(v->dev.queues[1].kick_fd), 1);
	CHECK_EQ(eventfd_count(v->dev.queues[0].kick_fd), 0);
	vnull_free(v);
}

TEST(queue_notify_beyond_num_queues_ignored)
{
	struct vnull *v = vnull_running(2, 16, 0);

	eventfd_count(v->dev.queues[0].kick_fd);
	eventfd_count(v->dev.queues[1].kick_fd);
	wr(v, VIRTIO_MMIO_QUEUE_NOTIFY, 2);
	wr(v, VIRTIO_MMIO_QUEUE_NOTIFY, 0x10000);
	CHECK_EQ(eventfd_count(v->dev.queues[0].kick_fd), 0);
	CHECK_EQ(eventfd_count(v->dev.queues[1].kick_fd), 0);
	vnull_free(v);
}

/* ---- interrupts, config space ---- */

TEST(signal_queue_sets_bit_0_and_fires_irqfd_ack_clears)
{
	struct vnull *v = vnull_running(1, 16, 0);

	virtio_signal_queue(&v->dev, 0);
	CHECK_EQ(rd(v, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_VRING);
	virtio_config_changed(&v->dev);
	CHECK_EQ(rd(v, VIRTIO_MMIO_INTERRUPT_STATUS),
		 VIRTIO_MMIO_INT_VRING | VIRTIO_MMIO_INT_CONFIG);
	CHECK_EQ(eventfd_count(v->d.mmio.irq_fd), 2);
	wr(v, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_VRING);
	CHECK_EQ(rd(v, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_CONFIG);
	wr(v, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_CONFIG);
	CHECK_EQ(rd(v, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	vnull_free(v);
}

TEST(config_change_bumps_generation)
{
	struct vnull *v = vnull_new(1, 0);
	uint32_t g = rd(v, VIRTIO_MMIO_CONFIG_GENERATION);

	virtio_config_changed(&v->dev);
	CHECK_EQ(rd(v, VIRTIO_MMIO_CONFIG_GENERATION), g + 1);
	vnull_free(v);
}

TEST(config_space_is_delegated_at_any_width)
{
	struct vnull *v = vnull_new(1, 0);
	uint8_t b[8];

	memcpy(v->config, "\x11\x22\x33\x44\x55\x66\x77\x88", 8);
	virtio_mmio_read(&v->d.mmio, 0x101, b, 1);
	CHECK_EQ(b[0], 0x22);
	virtio_mmio_read(&v->d.mmio, 0x102, b, 2);
	CHECK_EQ(le16_load(b), 0x4433);
	virtio_mmio_read(&v->d.mmio, 0x104, b, 4);
	CHECK_EQ(le32_load(b), 0x88776655);
	virtio_mmio_read(&v->d.mmio, 0x108, b, 4);      /* beyond the device's config */
	CHECK_EQ(le32_load(b), 0);
	le16_store(b, 0xbeef);
	virtio_mmio_write(&v->d.mmio, 0x100, b, 2);
	CHECK_EQ(v->config[0], 0xef);
	CHECK_EQ(v->config[1], 0xbe);
	vnull_free(v);
}

static void count_line(void *opaque, int level, const char *msg)
{
	(void)level;
	(void)msg;
	(*(int *)opaque)++;
}

/* Run fn with the device's log sink counting lines; returns the count. */
static int log_lines(void (*fn)(struct vnull *), struct vnull *v)
{
	int lines = 0;
	struct log_sink sink = { .fn = count_line, .opaque = &lines };

	v->dev.log = &sink;
	fn(v);
	v->dev.log = NULL;
	return lines;
}

static void bad_accesses(struct vnull *v)
{
	uint8_t b[8];

	memset(b, 0xff, sizeof(b));
	virtio_mmio_read(&v->d.mmio, VIRTIO_MMIO_MAGIC_VALUE, b, 2);      /* wrong width */
	CHECK_EQ(le16_load(b), 0);
	memset(b, 0xff, sizeof(b));
	virtio_mmio_read(&v->d.mmio, VIRTIO_MMIO_MAGIC_VALUE + 2, b, 4);  /* misaligned */
	CHECK_EQ(le32_load(b), 0);
	memset(b, 0xff, sizeof(b));
	virtio_mmio_read(&v->d.mmio, VIRTIO_MMIO_STATUS, b, 8);
	CHECK_EQ(le64_load(b), 0);
	memset(b, 0, sizeof(b));
	b[0] = ACK;
	virtio_mmio_write(&v->d.mmio, VIRTIO_MMIO_STATUS, b, 1);          /* ignored */
	CHECK_EQ(rd(v, VIRTIO_MMIO_QUEUE_NUM), 0);                         /* write-only */
	wr(v, VIRTIO_MMIO_MAGIC_VALUE, 0);                                 /* read-only */
	CHECK_EQ(rd(v, 0x0f0), 0);                                         /* unknown */
}

TEST(bad_register_accesses_ignored_and_logged_once)
{
	struct vnull *v = vnull_new(1, 0);

	CHECK_EQ(log_lines(bad_accesses, v), 1);
	CHECK_EQ(vdrv_status(&v->d), 0);
	CHECK_EQ(rd(v, VIRTIO_MMIO_MAGIC_VALUE), 0x74726976);
	vnull_free(v);
}

/* A driver that enables a badly configured queue over and over: one VM
 * exit each, the same mistake each time. */
static void bad_queue_ready_flood(struct vnull *v)
{
	unsigned i;

	CHECK_EQ(vdrv_negotiate(&v->d, V1), 0);
	wr(v, VIRTIO_MMIO_QUEUE_SEL, 0);
	wr(v, VIRTIO_MMIO_QUEUE_NUM, 3);                /* not a power of 2 */
	for (i = 0; i < 1000; i++)
		wr(v, VIRTIO_MMIO_QUEUE_READY, 1);
}

TEST(bad_queue_config_flood_logs_one_line_and_counts_all)
{
	struct vnull *v = vnull_new(1, 0);

	CHECK_EQ(log_lines(bad_queue_ready_flood, v), 1);
	CHECK_EQ(v->dev.guest_errors, 1000);
	CHECK(vdrv_status(&v->d) & VIRTIO_CONFIG_S_NEEDS_RESET);
	vnull_free(v);
}

static void good_accesses(struct vnull *v)
{
	CHECK_EQ(vdrv_negotiate(&v->d, V1), 0);
	CHECK_EQ(vdrv_queue_setup(&v->d, 0, 16), 1);
	vdrv_driver_ok(&v->d);
	CHECK_EQ(rd(v, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
}

TEST(good_register_accesses_log_nothing)
{
	struct vnull *v = vnull_new(1, 0);

	CHECK_EQ(log_lines(good_accesses, v), 0);
	vnull_free(v);
}

/* ---- KVM binding ---- */

TEST(attach_without_kvm_fails_and_unwinds)
{
	/* No VM fd: the first KVM_IOEVENTFD fails; nothing may stay registered. */
	static struct vm vm;
	struct vnull *v;
	uint8_t b[4];

	if (arch_layout.virtio_mmio_max == 0)
		CHECK_SKIP("%s guests have no virtio-mmio windows", arch_layout.name);
	v = vnull_new(2, 0);
	vm.vm_fd = -1;
	CHECK_EQ(iobus_init(&vm.mmio), 0);
	CHECK_EQ(virtio_mmio_attach(&vm, &v->dev), -EBADF);
	CHECK_EQ(vm.mmio.nr, 0);
	CHECK(!iobus_access(&vm.mmio, 0xd0000000ULL, b, 4, false));
	CHECK(v->dev.tops == NULL);
	CHECK_EQ(vm.ndevices, 0);
	iobus_destroy(&vm.mmio);
	vnull_free(v);
}

/* ---- the register page (what a mapped window shows the guest) ---- */

/* Every 32-bit register and config word in the page reads as through an
 * exit; registers that cannot be read are 0 in the page. */
static void check_page_matches_registers(struct vnull *v)
{
	uint64_t off;

	for (off = 0; off < VIRTIO_MMIO_WINDOW; off += 4) {
		uint8_t b[4] = { 0 };
		uint32_t page = le32_load(v->d.mmio.regs + off);
		bool readable = off >= VIRTIO_MMIO_CONFIG;

		switch (off) {
		case VIRTIO_MMIO_MAGIC_VALUE: case VIRTIO_MMIO_VERSION:
		case VIRTIO_MMIO_DEVICE_ID: case VIRTIO_MMIO_VENDOR_ID:
		case VIRTIO_MMIO_DEVICE_FEATURES: case VIRTIO_MMIO_QUEUE_NUM_MAX:
		case VIRTIO_MMIO_QUEUE_READY: case VIRTIO_MMIO_INTERRUPT_STATUS:
		case VIRTIO_MMIO_STATUS: case VIRTIO_MMIO_CONFIG_GENERATION:
			readable = true;
			break;
		}
		if (readable)
			virtio_mmio_read(&v->d.mmio, off, b, 4);
		if (page != le32_load(b)) {
			fprintf(stderr, "page at 0x%03llx: 0x%08x, register reads 0x%08x\n",
				(unsigned long long)off, page, le32_load(b));
			CHECK(false);
		}
	}
}

TEST(register_page_follows_every_step_of_a_driver)
{
	struct vnull *v = vnull_new(2, 1ULL << 9);

	memcpy(v->config, "\x11\x22\x33\x44\x55\x66\x77\x88", 8);
	virtio_config_changed(&v->dev);         /* the config reaches the page */
	check_page_matches_registers(v);
	CHECK_EQ(le32_load(v->d.mmio.regs + VIRTIO_MMIO_MAGIC_VALUE), VIRTIO_MMIO_MAGIC);
	CHECK_EQ(le32_load(v->d.mmio.regs + VIRTIO_MMIO_CONFIG + 4), 0x88776655);
	wr(v, VIRTIO_MMIO_STATUS, ACK);
	check_page_matches_registers(v);
	wr(v, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	check_page_matches_registers(v);
	CHECK_EQ(le32_load(v->d.mmio.regs + VIRTIO_MMIO_DEVICE_FEATURES),
		 1u | (1u << (VIRTIO_F_RING_PACKED - 32)));
	CHECK_EQ(vdrv_negotiate(&v->d, V1), 0);
	check_page_matches_registers(v);
	CHECK_EQ(vdrv_queue_setup(&v->d, 1, 16), 1);
	wr(v, VIRTIO_MMIO_QUEUE_SEL, 1);
	check_page_matches_registers(v);
	CHECK_EQ(le32_load(v->d.mmio.regs + VIRTIO_MMIO_QUEUE_READY), 1);
	wr(v, VIRTIO_MMIO_QUEUE_SEL, 7);        /* selects nothing: reads 0 */
	check_page_matches_registers(v);
	CHECK_EQ(le32_load(v->d.mmio.regs + VIRTIO_MMIO_QUEUE_NUM_MAX), 0);
	vdrv_driver_ok(&v->d);
	check_page_matches_registers(v);
	CHECK_EQ(le32_load(v->d.mmio.regs + VIRTIO_MMIO_STATUS) & DOK, DOK);
	wr(v, VIRTIO_MMIO_STATUS, 0);
	check_page_matches_registers(v);
	CHECK_EQ(le32_load(v->d.mmio.regs + VIRTIO_MMIO_STATUS), 0);
	vnull_free(v);
}

TEST(interrupt_status_is_the_page_word_itself)
{
	struct vnull *v = vnull_running(1, 16, 0);
	const uint8_t *isr = v->d.mmio.regs + VIRTIO_MMIO_INTERRUPT_STATUS;

	virtio_signal_queue(&v->dev, 0);
	CHECK_EQ(le32_load(isr), VIRTIO_MMIO_INT_VRING);
	/* The driver acks what it read; a bit raised meanwhile stays. */
	virtio_config_changed(&v->dev);
	wr(v, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_VRING);
	CHECK_EQ(le32_load(isr), VIRTIO_MMIO_INT_CONFIG);
	check_page_matches_registers(v);
	wr(v, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_CONFIG);
	CHECK_EQ(le32_load(isr), 0);
	virtio_signal_queue(&v->dev, 0);
	wr(v, VIRTIO_MMIO_STATUS, 0);           /* reset clears it (§4.2.3.1) */
	CHECK_EQ(le32_load(isr), 0);
	vnull_free(v);
}

/* A queue thread that puts the device in NEEDS_RESET, or a config change,
 * raises the config interrupt: the page must say why before the edge,
 * because the guest reads it without asking us. */
static void *needs_reset_thread(void *arg)
{
	virtio_dev_needs_reset(arg);
	return NULL;
}

TEST(needs_reset_and_generation_are_in_the_page_before_the_interrupt)
{
	struct vnull *v = vnull_running(1, 16, 0);
	uint32_t g = le32_load(v->d.mmio.regs + VIRTIO_MMIO_CONFIG_GENERATION);
	pthread_t t;

	CHECK_EQ(pthread_create(&t, NULL, needs_reset_thread, &v->dev), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(eventfd_count(v->d.mmio.irq_fd), 1);
	CHECK(le32_load(v->d.mmio.regs + VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET);
	CHECK_EQ(le32_load(v->d.mmio.regs + VIRTIO_MMIO_INTERRUPT_STATUS),
		 VIRTIO_MMIO_INT_CONFIG);
	v->config[0] = 0x5a;
	virtio_config_changed(&v->dev);
	CHECK_EQ(le32_load(v->d.mmio.regs + VIRTIO_MMIO_CONFIG_GENERATION), g + 1);
	CHECK_EQ(v->d.mmio.regs[VIRTIO_MMIO_CONFIG], 0x5a);
	check_page_matches_registers(v);
	vnull_free(v);
}
