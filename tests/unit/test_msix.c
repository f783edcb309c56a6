/* MSI-X state machine: masks, pending bits, routing state, table access.
 * Not bound to KVM: the tests check the route each vector would have and
 * read each vector's eventfd to see what fired. */
#include <errno.h>
#include <sys/eventfd.h>

#include "tests/unit/check.h"
#include "devices/msix.h"
#include "devices/pci.h"
#include "vmm/base/byteorder.h"
#include "vmm/kvm/vm.h"

#define NVEC 4

struct tmx {
	struct vm vm;
	struct pci_dev pd;
	struct msix m;
};

static void tm_config_write(struct pci_dev *pd, unsigned off, unsigned len)
{
	msix_config_write(pd->opaque, off, len);
}

static const struct pci_dev_ops tm_pci_ops = { .config_write = tm_config_write };

static struct tmx *tm_new(void)
{
	struct tmx *t = calloc(1, sizeof(*t));

	CHECK(t);
	t->vm.vm_fd = t->vm.kvm_fd = -1;
	pci_dev_init(&t->pd, "tm", 1, 2, 0, 0, 0, 0, &tm_pci_ops, &t->m);
	CHECK_EQ(msix_init(&t->m, &t->pd, &t->vm, NVEC, 1, 0, 0x800), 0);
	/* The driver's probe makes the function a bus master (Linux's
	 * pci_set_master) before it uses MSI-X: messages are DMA writes. */
	pci_cfg_write16(&t->pd, PCI_COMMAND, PCI_COMMAND_MASTER);
	return t;
}

static void tm_free(struct tmx *t)
{
	msix_destroy(&t->m);
	free(t);
}

static void ctrl_write(struct tmx *t, uint16_t v)
{
	pci_cfg_write16(&t->pd, t->m.cap + PCI_MSIX_FLAGS, v);
}

static void tab_w32(struct tmx *t, unsigned vec, unsigned field, uint32_t v)
{
	uint8_t b[4];

	le32_store(b, v);
	msix_bar_write(&t->m, vec * PCI_MSIX_ENTRY_SIZE + field, b, 4);
}

static uint32_t tab_r32(struct tmx *t, uint64_t off)
{
	uint8_t b[4];

	msix_bar_read(&t->m, off, b, 4);
	return le32_load(b);
}

/* Program vector vec with a valid LAPIC message and unmask it. */
static void vec_setup(struct tmx *t, unsigned vec, uint32_t data)
{
	tab_w32(t, vec, PCI_MSIX_ENTRY_LOWER_ADDR, 0xfee00000 | vec << 12);
	tab_w32(t, vec, PCI_MSIX_ENTRY_UPPER_ADDR, 0);
	tab_w32(t, vec, PCI_MSIX_ENTRY_DATA, data);
	tab_w32(t, vec, PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
}

/* How many times vector vec fired since the last call. */
static uint64_t fired(struct tmx *t, unsigned vec)
{
	eventfd_t v = 0;

	if (eventfd_read(t->m.v[vec].fd, &v) < 0)
		return 0;
	return v;
}

TEST(capability_layout)
{
	struct tmx *t = tm_new();
	unsigned cap = t->pd.cfg[PCI_CAPABILITY_LIST];

	CHECK_EQ(cap, t->m.cap);
	CHECK_EQ(t->pd.cfg[cap], PCI_CAP_ID_MSIX);
	CHECK_EQ(pci_cfg_read32(&t->pd, cap) >> 16, NVEC - 1);      /* table size - 1 */
	CHECK_EQ(pci_cfg_read32(&t->pd, cap + PCI_MSIX_TABLE), 0 | 1);   /* BIR 1 */
	CHECK_EQ(pci_cfg_read32(&t->pd, cap + PCI_MSIX_PBA), 0x800 | 1);
	/* Only enable and function mask are writable. */
	ctrl_write(t, 0xffff);
	CHECK_EQ(pci_cfg_read32(&t->pd, cap) >> 16, PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL | (NVEC - 1));
	tm_free(t);
}

TEST(vectors_start_masked_and_signal_sets_pending_bit)
{
	struct tmx *t = tm_new();

	for (unsigned i = 0; i < NVEC; i++)
		CHECK_EQ(tab_r32(t, i * 16 + PCI_MSIX_ENTRY_VECTOR_CTRL), PCI_MSIX_ENTRY_CTRL_MASKBIT);
	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);
	CHECK_EQ(msix_signal(&t->m, 2), 1);
	CHECK(msix_pending(&t->m, 2));
	CHECK_EQ(tab_r32(t, 0x800), 1u << 2);       /* PBA through the BAR */
	CHECK_EQ(fired(t, 2), 0);
	tm_free(t);
}

TEST(unmask_fires_pending_vector_once)
{
	struct tmx *t = tm_new();

	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);
	tab_w32(t, 1, PCI_MSIX_ENTRY_LOWER_ADDR, 0xfee00000);
	tab_w32(t, 1, PCI_MSIX_ENTRY_DATA, 0x41);
	CHECK(!t->m.v[1].routed);                   /* masked: not routed yet */
	CHECK_EQ(msix_signal(&t->m, 1), 1);
	CHECK_EQ(msix_signal(&t->m, 1), 1);         /* still one pending bit */
	tab_w32(t, 1, PCI_MSIX_ENTRY_VECTOR_CTRL, 0);          /* unmask */
	CHECK(t->m.v[1].routed);
	CHECK_EQ(t->m.v[1].route_addr, 0xfee00000);
	CHECK_EQ(t->m.v[1].route_data, 0x41);
	CHECK_EQ(fired(t, 1), 1);
	CHECK(!msix_pending(&t->m, 1));
	CHECK_EQ(tab_r32(t, 0x800), 0);
	/* Unmasked: fires directly. */
	CHECK_EQ(msix_signal(&t->m, 1), 0);
	CHECK_EQ(fired(t, 1), 1);
	/* Mask again: pends; unmask with nothing pending fires nothing extra. */
	tab_w32(t, 1, PCI_MSIX_ENTRY_VECTOR_CTRL, 1);
	tab_w32(t, 1, PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
	CHECK_EQ(fired(t, 1), 0);
	tm_free(t);
}

TEST(function_mask_defers_all_vectors)
{
	struct tmx *t = tm_new();

	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);
	vec_setup(t, 0, 0x30);
	vec_setup(t, 3, 0x33);
	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
	CHECK_EQ(msix_signal(&t->m, 0), 1);
	CHECK_EQ(msix_signal(&t->m, 3), 1);
	CHECK_EQ(fired(t, 0) + fired(t, 3), 0);
	CHECK_EQ(tab_r32(t, 0x800), 0x9);
	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);            /* clear function mask */
	CHECK_EQ(fired(t, 0), 1);
	CHECK_EQ(fired(t, 3), 1);
	CHECK_EQ(tab_r32(t, 0x800), 0);
	tm_free(t);
}

TEST(disabled_msix_reports_intx_fallback)
{
	struct tmx *t = tm_new();

	vec_setup(t, 0, 0x30);
	CHECK(!msix_enabled(&t->m));
	CHECK_EQ(msix_signal(&t->m, 0), -ENOTSUP);
	CHECK_EQ(msix_signal(&t->m, NVEC), -EINVAL);     /* out of range */
	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);
	CHECK(msix_enabled(&t->m));
	CHECK_EQ(msix_signal(&t->m, 0), 0);
	CHECK_EQ(fired(t, 0), 1);
	tm_free(t);
}

TEST(bad_address_leaves_vector_unrouted)
{
	struct tmx *t = tm_new();

	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);
	tab_w32(t, 2, PCI_MSIX_ENTRY_LOWER_ADDR, 0xfec00000);    /* IOAPIC, not LAPIC */
	tab_w32(t, 2, PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
	CHECK(!t->m.v[2].routed);
	CHECK_EQ(pci_guest_errors(&t->pd), 1);
	CHECK_EQ(msix_signal(&t->m, 2), -EINVAL);
	CHECK_EQ(fired(t, 2), 0);
	/* Non-zero high dword is not a LAPIC address either. */
	tab_w32(t, 2, PCI_MSIX_ENTRY_LOWER_ADDR, 0xfee00000);
	CHECK(t->m.v[2].routed);
	tab_w32(t, 2, PCI_MSIX_ENTRY_UPPER_ADDR, 1);
	CHECK(!t->m.v[2].routed);
	tab_w32(t, 2, PCI_MSIX_ENTRY_UPPER_ADDR, 0);
	CHECK(t->m.v[2].routed);
	CHECK_EQ(msix_signal(&t->m, 2), 0);
	CHECK_EQ(fired(t, 2), 1);
	tm_free(t);
}

/* Table writes come at the guest's will: a bad message address is one
 * line per function, however many vectors and writes; all counted. */
TEST(bad_message_addresses_are_logged_once_per_function_and_counted)
{
	struct tmx *t = tm_new();
	struct check_log cl = { 0 };
	struct log_sink sink = { .fn = check_log_line, .opaque = &cl };

	t->pd.log = &sink;
	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);
	tab_w32(t, 1, PCI_MSIX_ENTRY_LOWER_ADDR, 0xfec00000);
	tab_w32(t, 1, PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
	CHECK_EQ(cl.lines, 1);
	CHECK_EQ(cl.level, LOG_WARNING);
	CHECK_STR(cl.last, "pci 00:00.0 (tm): MSI-X vector 1 has address 0xfec00000 outside the "
		  "LAPIC window 0xfeexxxxx; vector not routed (the first of its kind on this "
		  "function: the rest are only counted, as pci_guest_errors in --stats)");
	tab_w32(t, 3, PCI_MSIX_ENTRY_LOWER_ADDR, 0x1000);
	tab_w32(t, 3, PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
	CHECK_EQ(cl.lines, 1);
	CHECK_EQ(pci_guest_errors(&t->pd), 2);
	CHECK(!t->m.v[1].routed && !t->m.v[3].routed);
	tm_free(t);
}

/* A route KVM refuses (here: no KVM at all) leaves the vector unrouted,
 * logged once per function however often the guest rewrites it. */
TEST(refused_routes_are_logged_once_per_function_and_counted)
{
	struct tmx *t = tm_new();
	struct check_log cl = { 0 };
	struct log_sink sink = { .fn = check_log_line, .opaque = &cl };

	t->pd.log = &sink;
	t->m.bound = true;              /* routes go to vm_msi_route: -ENODEV */
	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);
	vec_setup(t, 0, 0x41);
	CHECK(!t->m.v[0].routed);
	CHECK_EQ(cl.lines, 1);
	CHECK_EQ(cl.level, LOG_WARNING);
	CHECK(strstr(cl.last, "MSI-X vector 0: routing GSI 0 to 0xfee00000 data 0x41 failed"));
	vec_setup(t, 1, 0x42);
	CHECK(!t->m.v[1].routed);
	CHECK_EQ(cl.lines, 1);
	CHECK_EQ(pci_guest_errors(&t->pd), 2);
	CHECK_EQ(msix_signal(&t->m, 1), -EINVAL);      /* dropped, not fired */
	t->m.bound = false;
	tm_free(t);
}

TEST(message_change_while_running_reroutes)
{
	struct tmx *t = tm_new();
	uint8_t q[8];

	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);
	vec_setup(t, 1, 0x40);
	CHECK_EQ(t->m.v[1].route_data, 0x40);
	CHECK_EQ(t->m.v[1].route_addr, 0xfee01000);
	/* Affinity change: new destination and vector, entry left unmasked. */
	le64_store(q, 0xfee03000);                  /* aligned qword write */
	msix_bar_write(&t->m, 1 * 16 + PCI_MSIX_ENTRY_LOWER_ADDR, q, 8);
	tab_w32(t, 1, PCI_MSIX_ENTRY_DATA, 0x51);
	CHECK(t->m.v[1].routed);
	CHECK_EQ(t->m.v[1].route_addr, 0xfee03000);
	CHECK_EQ(t->m.v[1].route_data, 0x51);
	CHECK_EQ(msix_signal(&t->m, 1), 0);
	CHECK_EQ(fired(t, 1), 1);
	tm_free(t);
}

TEST(table_access_widths_and_read_only_pba)
{
	struct tmx *t = tm_new();
	uint8_t b[8] = { 0x11, 0x22, 0, 0, 0, 0, 0, 0 };

	tab_w32(t, 0, PCI_MSIX_ENTRY_DATA, 0xaabbccdd);
	msix_bar_write(&t->m, PCI_MSIX_ENTRY_DATA, b, 2);     /* word: ignored */
	CHECK_EQ(tab_r32(t, PCI_MSIX_ENTRY_DATA), 0xaabbccdd);
	msix_bar_write(&t->m, PCI_MSIX_ENTRY_DATA + 1, b, 4); /* unaligned: ignored */
	CHECK_EQ(tab_r32(t, PCI_MSIX_ENTRY_DATA), 0xaabbccdd);
	msix_bar_read(&t->m, PCI_MSIX_ENTRY_DATA, b, 2);
	CHECK_EQ(le16_load(b), 0);
	msix_bar_read(&t->m, 0, b, 8);                    /* qword read of addr lo/hi */
	CHECK_EQ(le64_load(b), 0);
	/* Reserved vector control bits read 0. */
	tab_w32(t, 0, PCI_MSIX_ENTRY_VECTOR_CTRL, 0xfffffffe);
	CHECK_EQ(tab_r32(t, PCI_MSIX_ENTRY_VECTOR_CTRL), 0);
	/* PBA writes are ignored. */
	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
	CHECK_EQ(msix_signal(&t->m, 0), 1);
	le32_store(b, 0);
	msix_bar_write(&t->m, 0x800, b, 4);
	CHECK_EQ(tab_r32(t, 0x800), 1);
	/* Beyond the table: reads 0. */
	CHECK_EQ(tab_r32(t, NVEC * 16), 0);
	tm_free(t);
}

/* Writes past the table (the gap, the PBA, the end of the BAR, offsets that
 * wrap) change no vector and touch no memory outside the table. */
TEST(table_writes_with_bad_address_ignored)
{
	struct tmx *t = tm_new();
	uint32_t before[NVEC * 4];
	uint8_t b[8];
	unsigned i;

	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);
	vec_setup(t, NVEC - 1, 0x41);
	for (i = 0; i < NVEC * 4; i++)
		before[i] = tab_r32(t, 4ULL * i);
	memset(b, 0xff, sizeof(b));
	msix_bar_write(&t->m, NVEC * PCI_MSIX_ENTRY_SIZE, b, 4);       /* first byte past */
	msix_bar_write(&t->m, NVEC * PCI_MSIX_ENTRY_SIZE, b, 8);
	msix_bar_write(&t->m, 0x800 - 8, b, 8);                    /* just below the PBA */
	msix_bar_write(&t->m, 0x800, b, 8);                        /* the PBA */
	msix_bar_write(&t->m, 0xffc, b, 4);                        /* end of the BAR */
	msix_bar_write(&t->m, 0x1000, b, 4);                       /* beyond it */
	msix_bar_write(&t->m, UINT64_MAX - 3, b, 4);               /* wraps */
	msix_bar_write(&t->m, UINT64_MAX - 7, b, 8);
	msix_bar_write(&t->m, (NVEC - 1) * PCI_MSIX_ENTRY_SIZE + 12, b, 8); /* misaligned qword */
	for (i = 0; i < NVEC * 4; i++)
		CHECK_EQ(tab_r32(t, 4ULL * i), before[i]);
	CHECK_EQ(tab_r32(t, NVEC * PCI_MSIX_ENTRY_SIZE), 0);
	CHECK(t->m.v[NVEC - 1].routed);
	tm_free(t);
}

TEST(init_rejects_bad_layout)
{
	struct tmx *t = calloc(1, sizeof(*t));

	CHECK(t);
	pci_dev_init(&t->pd, "tm", 1, 2, 0, 0, 0, 0, NULL, NULL);
	CHECK_EQ(msix_init(&t->m, &t->pd, &t->vm, 0, 1, 0, 0x800), -EINVAL);
	CHECK_EQ(msix_init(&t->m, &t->pd, &t->vm, 200, 1, 0, 0x800), -EINVAL); /* table hits PBA */
	CHECK_EQ(msix_init(&t->m, &t->pd, &t->vm, 4, 1, 4, 0x800), -EINVAL);   /* misaligned */
	CHECK_EQ(t->pd.ncaps, 0);
	free(t);
}

TEST(no_message_while_bus_mastering_is_off_the_vector_pends_instead)
{
	struct tmx *t = tm_new();

	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);
	vec_setup(t, 1, 0x41);
	pci_cfg_write16(&t->pd, PCI_COMMAND, 0);          /* Bus Master Enable off */
	CHECK_EQ(msix_signal(&t->m, 1), 1);
	CHECK_EQ(msix_signal(&t->m, 1), 1);
	CHECK_EQ(fired(t, 1), 0);
	CHECK(msix_pending(&t->m, 1));
	CHECK_EQ(tab_r32(t, 0x800), 1u << 1);
	/* Another vector's pending state is its own. */
	CHECK(!msix_pending(&t->m, 0));
	tm_free(t);
}

TEST(bus_master_enable_delivers_each_pending_unmasked_vector_once)
{
	struct tmx *t = tm_new();

	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);
	vec_setup(t, 0, 0x40);
	vec_setup(t, 2, 0x42);
	pci_cfg_write16(&t->pd, PCI_COMMAND, 0);
	CHECK_EQ(msix_signal(&t->m, 0), 1);
	CHECK_EQ(msix_signal(&t->m, 2), 1);
	tab_w32(t, 2, PCI_MSIX_ENTRY_VECTOR_CTRL, PCI_MSIX_ENTRY_CTRL_MASKBIT);
	pci_cfg_write16(&t->pd, PCI_COMMAND, PCI_COMMAND_MASTER);
	CHECK_EQ(fired(t, 0), 1);
	CHECK(!msix_pending(&t->m, 0));
	/* Vector 2 is masked now: it stays pending until unmasked. */
	CHECK_EQ(fired(t, 2), 0);
	CHECK(msix_pending(&t->m, 2));
	tab_w32(t, 2, PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
	CHECK_EQ(fired(t, 2), 1);
	/* Bus master again: messages go out directly. */
	CHECK_EQ(msix_signal(&t->m, 0), 0);
	CHECK_EQ(fired(t, 0), 1);
	tm_free(t);
}

TEST(unmask_while_bus_mastering_is_off_sends_nothing)
{
	struct tmx *t = tm_new();

	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);
	tab_w32(t, 3, PCI_MSIX_ENTRY_LOWER_ADDR, 0xfee00000);
	tab_w32(t, 3, PCI_MSIX_ENTRY_DATA, 0x43);
	CHECK_EQ(msix_signal(&t->m, 3), 1);               /* masked: pends */
	pci_cfg_write16(&t->pd, PCI_COMMAND, 0);
	tab_w32(t, 3, PCI_MSIX_ENTRY_VECTOR_CTRL, 0);     /* unmask */
	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);             /* function mask toggled */
	CHECK_EQ(fired(t, 3), 0);
	CHECK(msix_pending(&t->m, 3));
	pci_cfg_write16(&t->pd, PCI_COMMAND, PCI_COMMAND_MASTER);
	CHECK_EQ(fired(t, 3), 1);
	CHECK(!msix_pending(&t->m, 3));
	tm_free(t);
}

TEST(clear_pending_forgets_every_pending_vector)
{
	struct tmx *t = tm_new();

	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);
	vec_setup(t, 0, 0x40);
	vec_setup(t, 3, 0x43);
	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
	CHECK_EQ(msix_signal(&t->m, 0), 1);
	CHECK_EQ(msix_signal(&t->m, 3), 1);
	CHECK_EQ(tab_r32(t, 0x800), 0x9);
	msix_clear_pending(&t->m);
	CHECK_EQ(tab_r32(t, 0x800), 0);
	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);             /* nothing left to deliver */
	CHECK_EQ(fired(t, 0) + fired(t, 3), 0);
	/* The table itself is kept: new signals fire through it. */
	CHECK_EQ(msix_signal(&t->m, 3), 0);
	CHECK_EQ(fired(t, 3), 1);
	tm_free(t);
}

/* Each route change costs a KVM_SET_GSI_ROUTING: only a change of a live
 * vector's effective message makes one. */
TEST(table_writes_reroute_only_when_the_effective_message_changes)
{
	struct tmx *t = tm_new();
	uint64_t n;

	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);
	vec_setup(t, 1, 0x41);
	n = t->m.reroutes;
	CHECK_EQ(n, 1);                                  /* routed on unmask */
	/* Rewriting the same message, as a driver restoring state does. */
	tab_w32(t, 1, PCI_MSIX_ENTRY_LOWER_ADDR, 0xfee01000);
	tab_w32(t, 1, PCI_MSIX_ENTRY_UPPER_ADDR, 0);
	tab_w32(t, 1, PCI_MSIX_ENTRY_DATA, 0x41);
	CHECK_EQ(t->m.reroutes, n);
	/* Mask, unmask; function mask on and off: the route stays. */
	tab_w32(t, 1, PCI_MSIX_ENTRY_VECTOR_CTRL, PCI_MSIX_ENTRY_CTRL_MASKBIT);
	tab_w32(t, 1, PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
	ctrl_write(t, PCI_MSIX_FLAGS_ENABLE);
	CHECK_EQ(t->m.reroutes, n);
	/* Linux's affinity change: mask, new message, unmask: one update. */
	tab_w32(t, 1, PCI_MSIX_ENTRY_VECTOR_CTRL, PCI_MSIX_ENTRY_CTRL_MASKBIT);
	tab_w32(t, 1, PCI_MSIX_ENTRY_LOWER_ADDR, 0xfee02000);
	tab_w32(t, 1, PCI_MSIX_ENTRY_DATA, 0x51);
	CHECK_EQ(t->m.reroutes, n);
	tab_w32(t, 1, PCI_MSIX_ENTRY_VECTOR_CTRL, 0);
	CHECK_EQ(t->m.reroutes, n + 1);
	CHECK_EQ(t->m.v[1].route_data, 0x51);
	/* A live vector's new data: one update. */
	tab_w32(t, 1, PCI_MSIX_ENTRY_DATA, 0x52);
	CHECK_EQ(t->m.reroutes, n + 2);
	/* A never-unmasked vector's writes: none. */
	tab_w32(t, 2, PCI_MSIX_ENTRY_LOWER_ADDR, 0xfee00000);
	tab_w32(t, 2, PCI_MSIX_ENTRY_DATA, 0x42);
	CHECK_EQ(t->m.reroutes, n + 2);
	tm_free(t);
}
