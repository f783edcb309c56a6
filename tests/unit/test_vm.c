/* VM plumbing without KVM: allocators, command-line fragments, device
 * registry, the GSI routing table, stop requests, exit handling of vCPU
 * exits (status mapping), the exit port, the i8042 reset and the console
 * escape. */
#include "tests/unit/check.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/vcpu.h"
#include "vmm/mvm.h"
#include "vmm/lib/console.h"
#include "vmm/base/util.h"
#include "vmm/base/byteorder.h"
#include <unistd.h>
#include "devices/exitport.h"
#include "devices/i8042.h"
#include "arch/arch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct vm *mkvm(void)
{
	struct vm *vm = calloc(1, sizeof(*vm));

	CHECK(vm);
	CHECK_EQ(vm_init(vm, 1), 0);
	return vm;
}

static void rmvm(struct vm *vm)
{
	vm_fini(vm);
	free(vm);
}

TEST(alloc_virtio_irqs_in_layout_order_and_run_out)
{
	struct vm *vm = mkvm();
	unsigned gsi, i;

	for (i = 0; i < arch_layout.nvirtio_irqs; i++) {
		CHECK_EQ(vm_alloc_irq(vm, &gsi), 0);
		CHECK_EQ(gsi, arch_layout.virtio_irqs[i]);
		CHECK(gsi < arch_irq_pins());
	}
	CHECK_EQ(vm_alloc_irq(vm, &gsi), -ENOSPC);
	rmvm(vm);
}

TEST(alloc_virtio_mmio_windows)
{
	struct vm *vm = mkvm();
	uint64_t base;
	unsigned i;

	for (i = 0; i < arch_layout.virtio_mmio_max; i++) {
		CHECK_EQ(vm_alloc_virtio_mmio(vm, &base), 0);
		CHECK_EQ(base, arch_layout.virtio_mmio_base + i * arch_layout.virtio_mmio_size);
		/* Never RAM: inside the hole below 4 GiB. */
		CHECK(base >= arch_layout.ram_hole && base + arch_layout.virtio_mmio_size <= (1ULL << 32));
	}
	CHECK_EQ(vm_alloc_virtio_mmio(vm, &base), -ENOSPC);
	rmvm(vm);
}

TEST(alloc_msi_gsis_above_the_irqchip_pins)
{
	struct vm *vm = mkvm();
	unsigned a, b;

	CHECK_EQ(vm_alloc_msi_gsi(vm, &a), 0);
	CHECK_EQ(vm_alloc_msi_gsi(vm, &b), 0);
	CHECK_EQ(a, KVM_MSI_GSI_FIRST);
	CHECK(a >= arch_irq_pins());
	CHECK_EQ(b, a + 1);
	vm->next_gsi = KVM_MSI_GSI_END;
	CHECK_EQ(vm_alloc_msi_gsi(vm, &a), -ENOSPC);
	rmvm(vm);
}

TEST(cmdline_fragments_append_with_spaces)
{
	struct vm *vm = mkvm();
	char big[5000];

	CHECK_EQ(vm_cmdline_append(vm, "virtio_mmio.device=4K@%#llx:%u", 0xd0000000ULL, 5), 0);
	CHECK_EQ(vm_cmdline_append(vm, "foo"), 0);
	CHECK_STR(vm->cmdline_extra, " virtio_mmio.device=4K@0xd0000000:5 foo");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK_EQ(vm_cmdline_append(vm, "%s", big), -ENOSPC);
	CHECK_STR(vm->cmdline_extra, " virtio_mmio.device=4K@0xd0000000:5 foo");
	rmvm(vm);
}

static int stopped;
static void dstop(void *d) { (void)d; stopped++; }
static void ddestroy(void *d) { (void)d; }
static const struct vm_device_ops dops = { .kind = "t", .stop = dstop, .destroy = ddestroy };

TEST(device_registry_full)
{
	struct vm *vm = mkvm();
	unsigned i;

	for (i = 0; i < VM_MAX_DEVICES; i++)
		CHECK_EQ(vm_add_device(vm, &dops, NULL), 0);
	CHECK_EQ(vm_add_device(vm, &dops, NULL), -ENOSPC);
	CHECK_EQ(vm->ndevices, VM_MAX_DEVICES);
	rmvm(vm);
}

static const struct kvm_irq_routing_entry *find_msi(const struct kvm_irq_routing_entry *r,
						    unsigned n, unsigned gsi)
{
	for (unsigned i = 0; i < n; i++)
		if (r[i].gsi == gsi && r[i].type == KVM_IRQ_ROUTING_MSI)
			return &r[i];
	return NULL;
}

TEST(routing_table_keeps_irqchip_routes_with_msi)
{
	struct vm *vm = mkvm();
	struct kvm_state *ks = vm_kvm(vm);
	struct kvm_irq_routing_entry r[128], chip[128];
	const struct kvm_irq_routing_entry *e;
	unsigned n, base, gsi;

	/* The architecture's fixed routes first (x86: PIC and IOAPIC pins,
	 * see test_x86_tables), then one per active MSI. */
	base = arch_irq_routes(chip, ARRAY_SIZE(chip));
	n = kvm_get_routes(ks, r, ARRAY_SIZE(r));
	CHECK_EQ(n, base);
	CHECK(memcmp(r, chip, base * sizeof(r[0])) == 0);
	CHECK_EQ(vm_alloc_msi_gsi(vm, &gsi), 0);
	CHECK_EQ(vm_msi_route(vm, gsi, 0xfee00000, 0x4041, false), 0);
	n = kvm_get_routes(ks, r, ARRAY_SIZE(r));
	CHECK_EQ(n, base + 1);
	e = find_msi(r, n, gsi);
	CHECK(e && e->u.msi.address_lo == 0xfee00000 && e->u.msi.data == 0x4041);
	CHECK(memcmp(r, chip, base * sizeof(r[0])) == 0);
	CHECK_EQ(vm_msi_route(vm, gsi, 0xfee00000, 0x4041, true), 0);   /* masked: gone */
	CHECK_EQ(kvm_get_routes(ks, r, ARRAY_SIZE(r)), base);
	CHECK_EQ(vm_msi_route(vm, 3, 0, 0, false), -EINVAL);              /* not an MSI gsi */
	rmvm(vm);
}

TEST(adapter_routes_join_the_table_and_leave_it)
{
	struct vm *vm = mkvm();
	struct kvm_state *ks = vm_kvm(vm);
	struct kvm_irq_routing_entry r[128], chip[128];
	unsigned base, gsi, i, n;
	const struct kvm_irq_routing_entry *e = NULL;

	base = arch_irq_routes(chip, ARRAY_SIZE(chip));
	CHECK_EQ(vm_alloc_msi_gsi(vm, &gsi), 0);
	CHECK_EQ(vm_adapter_route(vm, gsi, 0x12340, 0x5670, 65, 7, 3, false), 0);
	n = kvm_get_routes(ks, r, ARRAY_SIZE(r));
	CHECK_EQ(n, base + 1);
	for (i = 0; i < n; i++)
		if (r[i].gsi == gsi)
			e = &r[i];
	CHECK(e && e->type == KVM_IRQ_ROUTING_S390_ADAPTER);
	CHECK_EQ(e->u.adapter.ind_addr, 0x12340);
	CHECK_EQ(e->u.adapter.summary_addr, 0x5670);
	CHECK_EQ(e->u.adapter.ind_offset, 65);
	CHECK_EQ(e->u.adapter.summary_offset, 7);
	CHECK_EQ(e->u.adapter.adapter_id, 3);
	/* The same GSI as an MSI route again: the adapter fields go. */
	CHECK_EQ(vm_msi_route(vm, gsi, 0xfee00000, 0x41, false), 0);
	n = kvm_get_routes(ks, r, ARRAY_SIZE(r));
	for (i = 0; i < n; i++)
		if (r[i].gsi == gsi)
			CHECK_EQ(r[i].type, KVM_IRQ_ROUTING_MSI);
	CHECK_EQ(vm_adapter_route(vm, gsi, 0, 0, 0, 0, 0, true), 0);
	CHECK_EQ(kvm_get_routes(ks, r, ARRAY_SIZE(r)), base);
	CHECK_EQ(vm_adapter_route(vm, 3, 0, 0, 0, 0, 0, false), -EINVAL);   /* not ours */
	rmvm(vm);
}

/* KVM_SET_GSI_ROUTING costs the kernel a new table and an RCU grace
 * period: mvm pushes its table only when a route's content changes. */
TEST(routing_table_is_pushed_only_when_a_route_changes)
{
	struct vm *vm = mkvm();
	struct kvm_state *ks = vm_kvm(vm);
	unsigned gsi;

	CHECK_EQ(vm_alloc_msi_gsi(vm, &gsi), 0);
	CHECK_EQ(ks->route_pushes, 0);
	CHECK_EQ(vm_msi_route(vm, gsi, 0xfee00000, 0x41, false), 0);
	CHECK_EQ(ks->route_pushes, 1);
	CHECK_EQ(vm_msi_route(vm, gsi, 0xfee00000, 0x41, false), 0);   /* the same message */
	CHECK_EQ(ks->route_pushes, 1);
	CHECK_EQ(vm_msi_route(vm, gsi, 0xfee00000, 0x42, false), 0);   /* new data */
	CHECK_EQ(ks->route_pushes, 2);
	CHECK_EQ(vm_msi_route(vm, gsi, 0xfee01000, 0x42, false), 0);   /* new address */
	CHECK_EQ(ks->route_pushes, 3);
	CHECK_EQ(vm_msi_route(vm, gsi, 0, 0, true), 0);                /* removed */
	CHECK_EQ(ks->route_pushes, 4);
	CHECK_EQ(vm_msi_route(vm, gsi, 0xfee00000, 0x41, true), 0);    /* still removed */
	CHECK_EQ(ks->route_pushes, 4);
	/* The same GSI as an adapter route with the MSI's numbers: a change. */
	CHECK_EQ(vm_adapter_route(vm, gsi, 1, 2, 3, 4, 5, false), 0);
	CHECK_EQ(vm_adapter_route(vm, gsi, 1, 2, 3, 4, 5, false), 0);
	CHECK_EQ(ks->route_pushes, 5);
	CHECK_EQ(vm_adapter_route(vm, gsi, 1, 2, 3, 4, 6, false), 0);
	CHECK_EQ(ks->route_pushes, 6);
	rmvm(vm);
}

/* The kept table is updated one entry at a time: whatever order routes
 * come and go in, it holds the irqchip's routes first, then exactly the
 * active routes, each once, with its current message. */
TEST(kept_routing_table_holds_exactly_the_active_routes)
{
	struct vm *vm = mkvm();
	struct kvm_state *ks = vm_kvm(vm);
	struct kvm_irq_routing_entry r[128], chip[128];
	const struct kvm_irq_routing_entry *e;
	unsigned base, gsi[5], i, n;

	base = arch_irq_routes(chip, ARRAY_SIZE(chip));
	for (i = 0; i < 5; i++) {
		CHECK_EQ(vm_alloc_msi_gsi(vm, &gsi[i]), 0);
		CHECK_EQ(vm_msi_route(vm, gsi[i], 0xfee00000, 0x40 + i, false), 0);
	}
	CHECK_EQ(vm_msi_route(vm, gsi[0], 0, 0, true), 0);     /* first: the last moves */
	CHECK_EQ(vm_msi_route(vm, gsi[4], 0, 0, true), 0);     /* now somewhere inside */
	CHECK_EQ(vm_msi_route(vm, gsi[2], 0xfee02000, 0x52, false), 0);
	CHECK_EQ(vm_msi_route(vm, gsi[0], 0xfee00000, 0x60, false), 0);   /* back */
	n = kvm_get_routes(ks, r, ARRAY_SIZE(r));
	CHECK_EQ(n, base + 4);
	CHECK(memcmp(r, chip, base * sizeof(r[0])) == 0);
	CHECK(!find_msi(r, n, gsi[4]));
	e = find_msi(r, n, gsi[0]);
	CHECK(e && e->u.msi.data == 0x60);
	e = find_msi(r, n, gsi[1]);
	CHECK(e && e->u.msi.data == 0x41 && e->u.msi.address_lo == 0xfee00000);
	e = find_msi(r, n, gsi[2]);
	CHECK(e && e->u.msi.data == 0x52 && e->u.msi.address_lo == 0xfee02000);
	e = find_msi(r, n, gsi[3]);
	CHECK(e && e->u.msi.data == 0x43);
	for (i = base; i < n; i++)                              /* each GSI once */
		for (unsigned j = i + 1; j < n; j++)
			CHECK(r[i].gsi != r[j].gsi);
	rmvm(vm);
}

TEST(first_stop_request_wins)
{
	struct vm *vm = mkvm();
	uint64_t cnt;

	CHECK_EQ(vm_stop_status(vm), -1);
	vm_request_stop(vm, VM_STOP_GUEST_STATUS, 3, NULL);
	vm_request_stop(vm, VM_STOP_POWEROFF, 0, NULL);
	CHECK_EQ(vm_stop_status(vm), 3);
	CHECK_EQ(read(vm_kvm(vm)->stop_efd, &cnt, sizeof(cnt)), sizeof(cnt));
	CHECK_EQ(cnt, 1);
	CHECK(!vm_stop_reboot(vm));
	rmvm(vm);
}

/* The guest's reset is a poweroff (status 0) that says it was a reboot,
 * when it is the first request; after another, it changes nothing. */
TEST(a_reboot_request_is_a_poweroff_that_says_so_when_it_wins)
{
	struct vm *vm = mkvm();

	vm_request_reboot(vm);
	vm_request_stop(vm, VM_STOP_REQUESTED, 9, NULL);
	CHECK_EQ(vm_stop_status(vm), 0);
	CHECK_EQ(vm_stop_reason(vm), VM_STOP_POWEROFF);
	CHECK(vm_stop_reboot(vm));
	rmvm(vm);
	vm = mkvm();
	vm_request_stop(vm, VM_STOP_REQUESTED, 9, NULL);
	vm_request_reboot(vm);
	CHECK_EQ(vm_stop_status(vm), 9);
	CHECK(!vm_stop_reboot(vm));
	rmvm(vm);
}

TEST(exit_port_byte_is_the_status_post_port_ignored)
{
	struct vm *vm = mkvm();
	uint8_t b = 42, w[2] = { 7, 0 }, r[4];

	CHECK_EQ(exitport_create(vm, 0x501, 0x80), 0);
	CHECK(iobus_access(&vm->pio, 0x80, &b, 1, true));
	CHECK_EQ(vm_stop_status(vm), -1);
	CHECK(iobus_access(&vm->pio, 0x501, w, 2, true) == false ||
	      vm_stop_status(vm) == -1);       /* word write: not a status */
	CHECK(iobus_access(&vm->pio, 0x501, &b, 1, true));
	CHECK_EQ(vm_stop_status(vm), 42);
	CHECK(!iobus_access(&vm->pio, 0x2f8, r, 1, false));   /* COM2 absent */
	CHECK_EQ(r[0], 0xff);
	rmvm(vm);
}

TEST(i8042_probe_and_reset)
{
	struct vm *vm = mkvm();
	struct i8042 k;
	uint8_t v;

	CHECK_EQ(i8042_init(&k, vm), 0);
	k.vm = NULL;   /* no KVM: IRQ line not driven */
	i8042_io_ops.read(&k, 4, &v, 1);
	CHECK(v != 0xff && (v & I8042_STS_SYS) && !(v & I8042_STS_OBF));
	v = 0xaa; i8042_io_ops.write(&k, 4, &v, 1);      /* self test */
	i8042_io_ops.read(&k, 4, &v, 1);
	CHECK(v & I8042_STS_OBF);
	i8042_io_ops.read(&k, 0, &v, 1);
	CHECK_EQ(v, 0x55);
	v = 0x20; i8042_io_ops.write(&k, 4, &v, 1);      /* read CTR */
	i8042_io_ops.read(&k, 0, &v, 1);
	CHECK(v & I8042_CTR_SYS);
	v = 0x60; i8042_io_ops.write(&k, 4, &v, 1);      /* write CTR */
	v = 0x45; i8042_io_ops.write(&k, 0, &v, 1);
	CHECK_EQ(k.ctr, 0x45);
	v = 0xff; i8042_io_ops.write(&k, 0, &v, 1);      /* keyboard reset */
	i8042_io_ops.read(&k, 0, &v, 1); CHECK_EQ(v, 0xfa);
	i8042_io_ops.read(&k, 0, &v, 1); CHECK_EQ(v, 0xaa);
	CHECK(!k.reset);
	k.vm = vm;
	v = 0xfe; i8042_io_ops.write(&k, 4, &v, 1);      /* pulse reset line */
	CHECK(k.reset);
	CHECK_EQ(vm_stop_status(vm), 0);
	CHECK(vm_stop_reboot(vm));
	rmvm(vm);
}

/* The guest's reads of the data port until the buffer is empty. */
static unsigned i8042_drain(struct i8042 *k, uint8_t *out, unsigned cap)
{
	unsigned n = 0;
	uint8_t st;

	for (;;) {
		i8042_io_ops.read(k, 4, &st, 1);
		if (!(st & I8042_STS_OBF) || n == cap)
			return n;
		i8042_io_ops.read(k, 0, &out[n++], 1);
	}
}

/* The power button on x86: the keyboard's Power key, pressed and
 * released, in the scan code set the guest reads (set 2, or set 1 where
 * the controller translates); refused while the keyboard is disabled or
 * the buffer cannot hold a whole press, never half a one. */
TEST(i8042_power_key_is_one_press_and_release)
{
	static const uint8_t set2[] = { 0xe0, 0x37, 0xe0, 0xf0, 0x37 };
	static const uint8_t set1[] = { 0xe0, 0x5e, 0xe0, 0xde };
	struct i8042 k;
	uint8_t got[16], v;

	CHECK_EQ(i8042_init(&k, NULL), 0);
	CHECK_EQ(i8042_power_key(&k), 0);
	CHECK(k.irq_level);                             /* the keyboard interrupt */
	CHECK_EQ(i8042_drain(&k, got, sizeof(got)), sizeof(set2));
	CHECK(!memcmp(got, set2, sizeof(set2)));
	CHECK(!k.irq_level);
	/* A second press while the first is unread: refused whole. */
	CHECK_EQ(i8042_power_key(&k), 0);
	CHECK_EQ(i8042_power_key(&k), -EAGAIN);
	CHECK_EQ(i8042_drain(&k, got, sizeof(got)), sizeof(set2));
	/* Translated (CTR bit 6): set 1. */
	v = 0x60; i8042_io_ops.write(&k, 4, &v, 1);
	v = I8042_CTR_KBDINT | I8042_CTR_SYS | I8042_CTR_XLATE; i8042_io_ops.write(&k, 0, &v, 1);
	CHECK_EQ(i8042_power_key(&k), 0);
	CHECK_EQ(i8042_drain(&k, got, sizeof(got)), sizeof(set1));
	CHECK(!memcmp(got, set1, sizeof(set1)));
	/* The keyboard disabled (command 0xAD): no key reaches the guest. */
	v = 0xad; i8042_io_ops.write(&k, 4, &v, 1);
	CHECK_EQ(i8042_power_key(&k), -ENODEV);
	CHECK_EQ(i8042_drain(&k, got, sizeof(got)), 0);
	v = 0xae; i8042_io_ops.write(&k, 4, &v, 1);
	CHECK_EQ(i8042_power_key(&k), 0);
	CHECK_EQ(i8042_drain(&k, got, sizeof(got)), sizeof(set1));
	pthread_mutex_destroy(&k.lock);
}

static int fake_io_writes;
static uint8_t fake_last;
static void fio_read(void *o, uint64_t off, uint8_t *d, unsigned len)
{
	(void)o; (void)off;
	memset(d, 0x5a, len);
}
static void fio_write(void *o, uint64_t off, const uint8_t *d, unsigned len)
{
	(void)o; (void)off; (void)len;
	fake_io_writes++;
	fake_last = d[0];
}
static const struct io_ops fio = { fio_read, fio_write };

TEST(vcpu_exit_io_dispatch_including_string_io)
{
	struct vm *vm = mkvm();
	struct vcpu v = { .vm = vm };
	static uint8_t page[4096];
	struct kvm_run *run = (struct kvm_run *)page;

	CHECK_EQ(iobus_register(&vm->pio, 0x3f8, 8, &fio, NULL), 0);
	run->exit_reason = KVM_EXIT_IO;
	run->io.direction = KVM_EXIT_IO_OUT;
	run->io.size = 1;
	run->io.port = 0x3f8;
	run->io.count = 3;
	run->io.data_offset = 1024;
	memcpy(page + 1024, "abc", 3);
	CHECK_EQ(vcpu_handle_exit(&v, run), -1);
	CHECK_EQ(fake_io_writes, 3);
	CHECK_EQ(fake_last, 'c');
	run->io.direction = KVM_EXIT_IO_IN;
	run->io.count = 1;
	run->io.port = 0x2f8;                  /* unclaimed: all-ones */
	CHECK_EQ(vcpu_handle_exit(&v, run), -1);
	CHECK_EQ(page[1024], 0xff);
	run->io.port = 0x3f9;
	CHECK_EQ(vcpu_handle_exit(&v, run), -1);
	CHECK_EQ(page[1024], 0x5a);
	CHECK_EQ(v.exits[VCPU_EXIT_IO], 3);
	rmvm(vm);
}

TEST(vcpu_exit_mmio_unclaimed_reads_ones)
{
	struct vm *vm = mkvm();
	struct vcpu v = { .vm = vm };
	static uint8_t page[4096];
	struct kvm_run *run = (struct kvm_run *)page;

	run->exit_reason = KVM_EXIT_MMIO;
	run->mmio.phys_addr = 0xd0000000;
	run->mmio.len = 4;
	run->mmio.is_write = 0;
	CHECK_EQ(vcpu_handle_exit(&v, run), -1);
	CHECK_EQ(le32_load(run->mmio.data), 0xffffffff);
	CHECK_EQ(iobus_register(&vm->mmio, 0xd0000000, 0x1000, &fio, NULL), 0);
	CHECK_EQ(vcpu_handle_exit(&v, run), -1);
	CHECK_EQ(run->mmio.data[0], 0x5a);
	rmvm(vm);
}

static void exit_with(unsigned reason, int want)
{
	struct vm *vm = mkvm();
	struct vcpu v = { .vm = vm };
	static uint8_t page[4096];
	struct kvm_run *run = (struct kvm_run *)page;

	memset(page, 0, sizeof(page));
	run->exit_reason = reason;
	if (reason == KVM_EXIT_SYSTEM_EVENT)
		run->system_event.type = want == MVM_EXIT_OK ? KVM_SYSTEM_EVENT_SHUTDOWN :
					 want == MVM_EXIT_PANICKED ? KVM_SYSTEM_EVENT_CRASH :
					 0xff;  /* no such event */
	CHECK_EQ(vcpu_handle_exit(&v, run), want);
	rmvm(vm);
}

TEST(vcpu_exit_status_mapping)
{
	exit_with(KVM_EXIT_SHUTDOWN, MVM_EXIT_CRASHED);     /* triple fault */
	exit_with(KVM_EXIT_HLT, MVM_EXIT_OK);
	exit_with(KVM_EXIT_SYSTEM_EVENT, MVM_EXIT_OK);
	exit_with(KVM_EXIT_SYSTEM_EVENT, MVM_EXIT_PANICKED);  /* KVM_SYSTEM_EVENT_CRASH */
	exit_with(KVM_EXIT_SYSTEM_EVENT, MVM_EXIT_UNHANDLED);
	exit_with(KVM_EXIT_INTERNAL_ERROR, MVM_EXIT_UNHANDLED);
	exit_with(KVM_EXIT_FAIL_ENTRY, MVM_EXIT_UNHANDLED);
	exit_with(KVM_EXIT_DEBUG, MVM_EXIT_UNHANDLED);         /* unknown to mvm */
	exit_with(KVM_EXIT_INTR, -1);
}

/* The status a vCPU exit ends the VM with decides the reason the exit
 * record gives: a crash or a panic is never a poweroff. */
TEST(vcpu_stop_reason_follows_the_status)
{
	CHECK_EQ(vcpu_stop_reason(MVM_EXIT_OK), VM_STOP_POWEROFF);
	CHECK_EQ(vcpu_stop_reason(MVM_EXIT_CRASHED), VM_STOP_GUEST_CRASH);
	CHECK_EQ(vcpu_stop_reason(MVM_EXIT_PANICKED), VM_STOP_GUEST_PANIC);
	CHECK_EQ(vcpu_stop_reason(MVM_EXIT_INTERNAL), VM_STOP_HOST_ERROR);
	CHECK_EQ(vcpu_stop_reason(MVM_EXIT_UNHANDLED), VM_STOP_GUEST_ERROR);
	/* Same values as the public enum (mvm.c casts one to the other). */
	CHECK_EQ((int)VM_STOP_GUEST_CRASH, (int)MVM_EXIT_GUEST_CRASH);
	CHECK_EQ((int)VM_STOP_GUEST_PANIC, (int)MVM_EXIT_GUEST_PANIC);
}

/* A triple fault is a crash (status 122), not a reboot: mvm's guests
 * reboot through the i8042. Its message says so, and which vCPU; an
 * orderly shutdown event says nothing. */
TEST(vcpu_exit_triple_fault_is_a_crash_that_says_so)
{
	struct vm *vm = mkvm();
	struct vcpu v = { .vm = vm, .id = 3, .fd = -1 };
	static uint8_t page[4096];
	struct kvm_run *run = (struct kvm_run *)page;

	memset(page, 0, sizeof(page));
	run->exit_reason = KVM_EXIT_SYSTEM_EVENT;
	run->system_event.type = KVM_SYSTEM_EVENT_SHUTDOWN;
	CHECK_EQ(vcpu_handle_exit(&v, run), MVM_EXIT_OK);
	CHECK_EQ(v.fatal[0], '\0');
	run->exit_reason = KVM_EXIT_SHUTDOWN;
	CHECK_EQ(vcpu_handle_exit(&v, run), MVM_EXIT_CRASHED);
	CHECK(strstr(v.fatal, "vCPU 3") && strstr(v.fatal, "triple-faulted"));
	CHECK_EQ(v.exits[VCPU_EXIT_SHUTDOWN], 1);
	CHECK(!strchr(v.fatal, '\n'));
	rmvm(vm);
}

TEST(console_escape_ctrl_a_x_quits)
{
	struct console_escape e = { .raw = true };
	uint8_t out[16];
	size_t n;

	CHECK(!console_escape_filter(&e, (const uint8_t *)"ab\x03", 3, out, &n));
	CHECK_EQ(n, 3);
	CHECK_EQ(out[2], 3);                                  /* Ctrl-C reaches the guest */
	CHECK(!console_escape_filter(&e, (const uint8_t *)"\x01\x01z", 3, out, &n));
	CHECK_EQ(n, 2);
	CHECK(out[0] == 1 && out[1] == 'z');
	CHECK(!console_escape_filter(&e, (const uint8_t *)"q\x01", 2, out, &n));   /* split */
	CHECK_EQ(n, 1);
	CHECK(console_escape_filter(&e, (const uint8_t *)"x", 1, out, &n));
	e = (struct console_escape){ .raw = false };
	CHECK(!console_escape_filter(&e, (const uint8_t *)"\x01x", 2, out, &n));   /* not a tty */
	CHECK_EQ(n, 2);
}
