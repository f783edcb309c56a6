/* pvpanic-pci: its identity in config space, the register in BAR0 (reads
 * the events mvm supports; a panic stops the VM with 123, a crash kernel
 * does not, anything else is ignored, logged once and counted). No KVM: a
 * struct vm from vm_init (no /dev/kvm), PCI bus 0 on its I/O buses. */
#include <errno.h>

#include "tests/unit/check.h"
#include "vmm/base/json.h"
#include "devices/pci.h"
#include "devices/pvpanic.h"
#include "vmm/base/byteorder.h"
#include "vmm/kvm/kvm.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"

/* x86's PCI window and INTx wiring. */
#define T_MMIO_BASE 0xe0000000ULL
#define T_MMIO_END  0xfe000000ULL
#define T_INTX_BASE 20

struct tvm {
	struct vm vm;
	struct pci_bus bus;
	struct pvpanic *p;
	struct check_log cl;
	struct log_sink sink;
};

static struct tvm *tvm_new(void)
{
	struct tvm *t = calloc(1, sizeof(*t));

	CHECK(t);
	CHECK_EQ(vm_init(&t->vm, 1), 0);
	CHECK_EQ(pci_bus_init(&t->bus, &t->vm, T_MMIO_BASE, T_MMIO_END, T_INTX_BASE, NULL, 0), 0);
	CHECK_EQ(pvpanic_attach(&t->vm, &t->bus), 0);
	CHECK_EQ(t->vm.ndevices, 1);
	CHECK_STR(t->vm.devices[0].ops->kind, "pvpanic");
	t->p = t->vm.devices[0].dev;
	t->sink = (struct log_sink){ .fn = check_log_line, .opaque = &t->cl };
	t->p->pci.log = &t->sink;
	return t;
}

static void tvm_free(struct tvm *t)
{
	t->vm.devices[0].ops->stop(t->vm.devices[0].dev);
	t->vm.devices[0].ops->destroy(t->vm.devices[0].dev);
	CHECK(!t->bus.slots[1]);
	pci_bus_destroy(&t->bus);
	vm_fini(&t->vm);
	free(t);
}

static uint32_t conf1_read(struct tvm *t, unsigned reg, unsigned len)
{
	uint8_t b[4];

	le32_store(b, PCI_CONF1_ENABLE | t->p->pci.slot << 11 | (reg & 0xfc));
	iobus_access(&t->vm.pio, PCI_CONF1_ADDR_PORT, b, 4, true);
	iobus_access(&t->vm.pio, PCI_CONF1_DATA_PORT + (reg & 3), b, len, false);
	return (uint32_t)le_load_n(b, len);
}

static void conf1_write(struct tvm *t, unsigned reg, unsigned len, uint32_t v)
{
	uint8_t b[4];

	le32_store(b, PCI_CONF1_ENABLE | t->p->pci.slot << 11 | (reg & 0xfc));
	iobus_access(&t->vm.pio, PCI_CONF1_ADDR_PORT, b, 4, true);
	le_store_n(b, len, v);
	iobus_access(&t->vm.pio, PCI_CONF1_DATA_PORT + (reg & 3), b, len, true);
}

/* BAR0 as the guest's driver finds it: memory decode on, where the
 * firmware (pci_bus_add) put it. */
static uint64_t bar0(struct tvm *t)
{
	conf1_write(t, PCI_COMMAND, 2, PCI_COMMAND_MEMORY);
	CHECK(t->p->pci.bars[0].mapped);
	return pci_bar_addr(&t->p->pci, 0);
}

static void bar_write(struct tvm *t, uint64_t off, uint8_t v)
{
	iobus_access(&t->vm.mmio, bar0(t) + off, &v, 1, true);
}

static bool stopping(struct tvm *t)
{
	return vm_stop_status(&t->vm) != -1;
}

TEST(config_space_is_qemus_pvpanic_pci)
{
	struct tvm *t = tvm_new();

	CHECK_EQ(t->p->pci.slot, 1);
	CHECK_EQ(conf1_read(t, PCI_VENDOR_ID, 2), 0x1b36);
	CHECK_EQ(conf1_read(t, PCI_DEVICE_ID, 2), 0x0011);
	CHECK_EQ(conf1_read(t, PCI_REVISION_ID, 1), 1);
	CHECK_EQ(conf1_read(t, PCI_CLASS_DEVICE, 2), 0x0880);   /* system peripheral, other */
	CHECK_EQ(conf1_read(t, PCI_CLASS_PROG, 1), 0);
	CHECK_EQ(conf1_read(t, PCI_SUBSYSTEM_VENDOR_ID, 2), 0x1af4);
	CHECK_EQ(conf1_read(t, PCI_SUBSYSTEM_ID, 2), 0x1100);
	CHECK_EQ(conf1_read(t, PCI_INTERRUPT_PIN, 1), 0);      /* no interrupt */
	CHECK_EQ(conf1_read(t, PCI_CAPABILITY_LIST, 1), 0);
	/* BAR0: 16 bytes of 32-bit memory, in the PCI window; no other BAR. */
	conf1_write(t, PCI_BASE_ADDRESS_0, 4, 0xffffffff);
	CHECK_EQ(conf1_read(t, PCI_BASE_ADDRESS_0, 4), 0xfffffff0);
	conf1_write(t, PCI_BASE_ADDRESS_0, 4, (uint32_t)T_MMIO_BASE);
	CHECK_EQ(conf1_read(t, PCI_BASE_ADDRESS_1, 4), 0);
	CHECK_EQ(bar0(t), T_MMIO_BASE);
	tvm_free(t);
}

TEST(register_reads_the_supported_events)
{
	struct tvm *t = tvm_new();
	uint64_t a = bar0(t);
	uint8_t b[4];

	iobus_access(&t->vm.mmio, a, b, 1, false);
	CHECK_EQ(b[0], PVPANIC_PANICKED | PVPANIC_CRASH_LOADED);
	CHECK_EQ(b[0], 3);
	memset(b, 0xee, sizeof(b));
	iobus_access(&t->vm.mmio, a + 1, b, 1, false);
	CHECK_EQ(b[0], 0);
	iobus_access(&t->vm.mmio, a + 12, b, 4, false);
	CHECK_EQ(le32_load(b), 0);
	CHECK(!stopping(t));
	tvm_free(t);
}

TEST(panicked_stops_the_vm_with_123_and_says_so_once)
{
	struct tvm *t = tvm_new();

	bar_write(t, 0, PVPANIC_PANICKED);
	CHECK_EQ(vm_stop_status(&t->vm), MVM_EXIT_PANICKED);
	CHECK_EQ(vm_stop_status(&t->vm), 123);
	CHECK_EQ(vm_stop_reason(&t->vm), VM_STOP_GUEST_PANIC);
	CHECK(strstr(vm_stop_message(&t->vm), "panicked"));
	CHECK_EQ(t->cl.lines, 1);
	CHECK_EQ(t->cl.level, LOG_ERROR);
	CHECK(strstr(t->cl.last, "the guest's kernel panicked (pvpanic)"));
	/* Another vCPU reporting too: counted, not logged again. */
	bar_write(t, 0, PVPANIC_PANICKED);
	CHECK_EQ(t->cl.lines, 1);
	CHECK_EQ(log_guest_count(&t->p->panicked), 2);
	tvm_free(t);
}

TEST(crash_loaded_is_logged_once_and_the_vm_goes_on)
{
	struct tvm *t = tvm_new();

	bar_write(t, 0, PVPANIC_CRASH_LOADED);
	CHECK(!stopping(t));
	CHECK_EQ(t->cl.lines, 1);
	CHECK_EQ(t->cl.level, LOG_WARNING);
	CHECK(strstr(t->cl.last, "crash kernel"));
	bar_write(t, 0, PVPANIC_CRASH_LOADED);
	CHECK(!stopping(t));
	CHECK_EQ(t->cl.lines, 1);
	CHECK_EQ(log_guest_count(&t->p->crash_loaded), 2);
	CHECK_EQ(log_guest_count(&t->p->panicked), 0);
	CHECK_EQ(pci_guest_errors(&t->p->pci), 0);
	tvm_free(t);
}

/* Unknown bits, a zero, or a write past the register: ignored, the
 * first of each kind logged, every one counted. */
TEST(other_values_and_offsets_are_ignored_logged_once_and_counted)
{
	struct tvm *t = tvm_new();

	bar_write(t, 0, 0x04);
	CHECK_EQ(t->cl.lines, 1);
	CHECK_EQ(t->cl.level, LOG_WARNING);
	CHECK(strstr(t->cl.last, "pvpanic: event 0x4 ignored"));
	bar_write(t, 0, 0x05);          /* panicked, but with a bit mvm does not know */
	bar_write(t, 0, 0x80);
	bar_write(t, 0, 0);
	CHECK_EQ(t->cl.lines, 1);
	bar_write(t, 1, PVPANIC_PANICKED);
	bar_write(t, 15, PVPANIC_PANICKED);
	CHECK_EQ(t->cl.lines, 2);
	CHECK(strstr(t->cl.last, "offset 1 ignored"));
	CHECK_EQ(pci_guest_errors(&t->p->pci), 6);
	CHECK(!stopping(t));
	CHECK_EQ(log_guest_count(&t->p->panicked), 0);
	tvm_free(t);
}

/* The device's counters in --stats. */
TEST(stats_count_the_events)
{
	struct tvm *t = tvm_new();
	char buf[256];
	FILE *f;

	bar_write(t, 0, PVPANIC_CRASH_LOADED);
	bar_write(t, 0, 0x10);
	f = fmemopen(buf, sizeof(buf), "w");
	CHECK(f);
	{
		struct json j_;

		json_init(&j_, f);
		t->vm.devices[0].ops->stats_json(t->vm.devices[0].dev, &j_);
	}
	fclose(f);
	CHECK_STR(buf, "{\"kind\":\"pvpanic\",\"slot\":1,\"panicked\":0,\"crash_loaded\":1,"
		  "\"pci_guest_errors\":1}");
	tvm_free(t);
}
