#include "devices/pci.h"
#include "vmm/base/log.h"
#include "vmm/base/snap.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"

/* ---- config space helpers ---------------------------------------------- */

void pci_guest_warn(struct pci_dev *pd, unsigned kind, const char *fmt, ...)
{
	char what[640];
	va_list ap;

	if (!log_guest_first(&pd->guest, kind))
		return;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	log_warn(pd->log, "pci %02x:%02x.0 (%s): %s (the first of its kind on this function: the "
		 "rest are only counted, as pci_guest_errors in --stats)", pd->busno, pd->slot,
		 pd->name ? pd->name : "?", what);
}

void pci_set_wmask(struct pci_dev *pd, unsigned off, unsigned len, uint32_t mask)
{
	if (off >= PCI_CFG_SIZE || len > PCI_CFG_SIZE - off || len > 4)
		return;
	le_store_n(&pd->wmask[off], len, mask);
}

static void cfg_store(struct pci_dev *pd, unsigned off, unsigned len, uint32_t v)
{
	le_store_n(&pd->cfg[off], len, v);
}

void pci_dev_init(struct pci_dev *pd, const char *name, uint16_t vendor, uint16_t device,
		  uint32_t class_code, uint8_t revision, uint16_t subsys_vendor,
		  uint16_t subsys_id, const struct pci_dev_ops *ops, void *opaque)
{
	memset(pd, 0, sizeof(*pd));
	pd->name = name;
	pd->ops = ops;
	pd->opaque = opaque;
	pd->cap_next = PCI_CAP_START;
	cfg_store(pd, PCI_VENDOR_ID, 2, vendor);
	cfg_store(pd, PCI_DEVICE_ID, 2, device);
	pd->cfg[PCI_REVISION_ID] = revision;
	pd->cfg[PCI_CLASS_PROG] = class_code & 0xff;
	pd->cfg[PCI_CLASS_DEVICE] = (class_code >> 8) & 0xff;
	pd->cfg[PCI_REG_CLASS] = (class_code >> 16) & 0xff;
	pd->cfg[PCI_HEADER_TYPE] = 0;              /* type 0, single function */
	cfg_store(pd, PCI_SUBSYSTEM_VENDOR_ID, 2, subsys_vendor);
	cfg_store(pd, PCI_SUBSYSTEM_ID, 2, subsys_id);
	pci_set_wmask(pd, PCI_COMMAND, 2,
		      PCI_COMMAND_IO | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER | PCI_COMMAND_INTX_DISABLE);
	pci_set_wmask(pd, PCI_INTERRUPT_LINE, 1, 0xff);
}

int pci_dev_set_bar(struct pci_dev *pd, unsigned bar, uint64_t size, uint32_t flags,
		    const struct io_ops *ops, void *opaque)
{
	bool is64 = flags & PCI_BASE_ADDRESS_MEM_TYPE_64;
	unsigned reg = PCI_BASE_ADDRESS_0 + 4 * bar;
	uint64_t mask;

	if (bar >= PCI_NUM_BARS || (is64 && bar + 1 >= PCI_NUM_BARS) || !ops ||
	    !IS_POW2(size) || size < 16 || (!is64 && size > 2 * GiB) ||
	    (flags & ~(uint32_t)(PCI_BASE_ADDRESS_MEM_TYPE_64 | PCI_BASE_ADDRESS_MEM_PREFETCH)) || pd->bus)
		return -EINVAL;
	if (pd->bars[bar].size || (is64 && pd->bars[bar + 1].size) ||
	    (bar > 0 && (pd->bars[bar - 1].flags & PCI_BASE_ADDRESS_MEM_TYPE_64)))
		return -EBUSY;
	pd->bars[bar] = (struct pci_bar){ .size = size, .flags = flags, .ops = ops,
					  .opaque = opaque };
	/* Address bits above the size are writable; the size bits and the
	 * type flags read back fixed, which is what makes all-ones sizing work. */
	mask = ~(size - 1);
	cfg_store(pd, reg, 4, flags);
	pci_set_wmask(pd, reg, 4, (uint32_t)mask & ~0xfu);
	if (is64)
		pci_set_wmask(pd, reg + 4, 4, (uint32_t)(mask >> 32));
	return 0;
}

int pci_cap_add(struct pci_dev *pd, uint8_t id, unsigned len)
{
	unsigned off = ALIGN_UP(pd->cap_next, 4u);

	if (len < 2 || pd->ncaps >= PCI_MAX_CAPS || off + len > PCI_CONF1_SIZE)
		return -ENOSPC;
	pd->cfg[off] = id;
	pd->cfg[off + 1] = 0;
	if (pd->ncaps == 0)
		pd->cfg[PCI_CAPABILITY_LIST] = off;
	else
		pd->cfg[pd->caps[pd->ncaps - 1].off + 1] = off;
	pd->caps[pd->ncaps++] = (struct pci_cap_range){ off, len };
	pd->cap_next = off + len;
	cfg_store(pd, PCI_STATUS, 2,
		  le16_load(&pd->cfg[PCI_STATUS]) | PCI_STATUS_CAP_LIST);
	return off;
}

uint64_t pci_bar_addr(const struct pci_dev *pd, unsigned bar)
{
	unsigned reg = PCI_BASE_ADDRESS_0 + 4 * bar;
	uint64_t a;

	if (bar >= PCI_NUM_BARS)
		return 0;
	a = le32_load(&pd->cfg[reg]) & ~0xfull;
	if (pd->bars[bar].flags & PCI_BASE_ADDRESS_MEM_TYPE_64)
		a |= (uint64_t)le32_load(&pd->cfg[reg + 4]) << 32;
	return a;
}

uint16_t pci_command(const struct pci_dev *pd)
{
	/* Relaxed byte loads, pairing with cfg_write_locked's atomic stores:
	 * each bit is read whole; the two bytes are not one snapshot, which
	 * no caller needs (each tests bits of its own). Nothing else is
	 * ordered by the command register: the state a bit guards is handed
	 * over under locks of its own (msix's, the transport's). */
	return (uint16_t)(__atomic_load_n(&pd->cfg[PCI_COMMAND], __ATOMIC_RELAXED) |
			  __atomic_load_n(&pd->cfg[PCI_COMMAND + 1], __ATOMIC_RELAXED) << 8);
}

/* An access is valid when it lies in config space, has width 1, 2 or 4, and
 * either lies wholly inside one capability or touches none. */
static bool cfg_access_ok(const struct pci_dev *pd, unsigned off, unsigned len)
{
	unsigned i;

	if ((len != 1 && len != 2 && len != 4) || off >= PCI_CFG_SIZE ||
	    len > PCI_CFG_SIZE - off)
		return false;
	for (i = 0; i < pd->ncaps; i++) {
		unsigned s = pd->caps[i].off, e = s + pd->caps[i].len;
		bool overlaps = off < e && s < off + len;
		bool inside = off >= s && off + len <= e;
		if (overlaps && !inside)
			return false;
	}
	return true;
}

/* ---- BAR mapping -------------------------------------------------------- */

static bool range_overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

/* Why [addr, addr+size) cannot hold a BAR, or NULL when it can. */
static const char *bar_conflict(struct pci_bus *bus, struct pci_dev *pd, unsigned bar,
				uint64_t addr, uint64_t size)
{
	const struct guest_mem *gm = &bus->vm->mem;
	unsigned i, s, b;

	if (addr == 0 || addr + size < addr)
		return "an invalid address";
	for (i = 0; i < gm->nr; i++)
		if (range_overlaps(addr, size, gm->r[i].gpa, gm->r[i].size))
			return "guest RAM";
	/* Not all of these are on vm->mmio (KVM emulates the IOAPIC and the
	 * LAPIC itself), so iobus_register would not refuse them. */
	for (i = 0; i < bus->nfixed; i++)
		if (range_overlaps(addr, size, bus->fixed[i].base, bus->fixed[i].size))
			return bus->fixed[i].name;
	for (s = 0; s < 2 * PCI_MAX_SLOTS; s++) {
		/* Every function of bus 0, then every child behind a bridge. */
		struct pci_dev *o = bus->slots[s % PCI_MAX_SLOTS];
		if (o && s >= PCI_MAX_SLOTS)
			o = o->child;
		if (!o)
			continue;
		for (b = 0; b < PCI_NUM_BARS; b++) {
			if ((o == pd && b == bar) || !o->bars[b].mapped)
				continue;
			if (range_overlaps(addr, size, o->bars[b].mapped_addr, o->bars[b].size))
				return "another PCI BAR";
		}
	}
	return NULL;
}

static void bar_unmap(struct pci_dev *pd, unsigned bar)
{
	struct pci_bar *b = &pd->bars[bar];

	if (!b->mapped)
		return;
	iobus_unregister(&pd->bus->vm->mmio, b->mapped_addr, b->opaque);
	b->mapped = false;
	if (pd->ops && pd->ops->bar_map)
		pd->ops->bar_map(pd, bar, b->mapped_addr, false);
}

static void bar_map(struct pci_dev *pd, unsigned bar, uint64_t addr)
{
	struct pci_bar *b = &pd->bars[bar];
	const char *why = bar_conflict(pd->bus, pd, bar, addr, b->size);
	int ret;

	if (!why) {
		ret = iobus_register(&pd->bus->vm->mmio, addr, b->size, b->ops, b->opaque);
		if (ret == 0) {
			b->mapped = true;
			b->mapped_addr = addr;
			if (pd->ops && pd->ops->bar_map)
				pd->ops->bar_map(pd, bar, addr, true);
			return;
		}
		why = ret == -EEXIST ? "another MMIO device" : "an invalid range";
	}
	pci_guest_warn(pd, PCI_GW_BAR, "BAR%u at 0x%" PRIx64 " (size 0x%" PRIx64 ") overlaps %s; "
		       "left unmapped until the guest moves it", bar, addr, b->size, why);
}

/* Make the mapped state of every BAR match the command register and the
 * BAR registers: unmap what moved or lost decode, then map what should be. */
static void bars_update(struct pci_dev *pd)
{
	bool decode = pci_command(pd) & PCI_COMMAND_MEMORY;
	unsigned i;

	if (!pd->bus)
		return;
	for (i = 0; i < PCI_NUM_BARS; i++) {
		struct pci_bar *b = &pd->bars[i];
		if (!b->size)
			continue;
		if (b->mapped && (!decode || b->mapped_addr != pci_bar_addr(pd, i)))
			bar_unmap(pd, i);
	}
	if (!decode)
		return;
	for (i = 0; i < PCI_NUM_BARS; i++) {
		struct pci_bar *b = &pd->bars[i];
		if (b->size && !b->mapped)
			bar_map(pd, i, pci_bar_addr(pd, i));
	}
}

/* ---- config access ------------------------------------------------------ */

static void cfg_read_locked(struct pci_dev *pd, unsigned off, uint8_t *data, unsigned len)
{
	if (!cfg_access_ok(pd, off, len)) {
		memset(data, 0, len);
		return;
	}
	if (pd->ops && pd->ops->config_read)
		pd->ops->config_read(pd, off, len);
	memcpy(data, &pd->cfg[off], len);
}

static void cfg_write_locked(struct pci_dev *pd, unsigned off, const uint8_t *data,
			     unsigned len)
{
	bool remap;
	unsigned i;

	if (!cfg_access_ok(pd, off, len))
		return;
	for (i = 0; i < len; i++) {
		uint8_t *c = &pd->cfg[off + i];
		uint8_t wm = pd->wmask[off + i], w1c = pd->w1c[off + i];
		/* An atomic store: the command register is also read without
		 * the lock (pci_command, by device threads), and a plain store
		 * racing those loads would be a data race. Reading *c plainly
		 * is fine: every writer holds the bus lock. */
		__atomic_store_n(c, (uint8_t)(((*c & ~wm) | (data[i] & wm)) & ~(data[i] & w1c)),
				 __ATOMIC_RELAXED);
	}
	remap = range_overlaps(off, len, PCI_COMMAND, 2) ||
		range_overlaps(off, len, PCI_BASE_ADDRESS_0, 4 * PCI_NUM_BARS);
	if (remap)
		bars_update(pd);
	if (pd->ops && pd->ops->config_write)
		pd->ops->config_write(pd, off, len);
}

void pci_cfg_read(struct pci_dev *pd, unsigned off, uint8_t *data, unsigned len)
{
	if (pd->bus)
		pthread_mutex_lock(&pd->bus->lock);
	cfg_read_locked(pd, off, data, len);
	if (pd->bus)
		pthread_mutex_unlock(&pd->bus->lock);
}

void pci_cfg_write(struct pci_dev *pd, unsigned off, const uint8_t *data, unsigned len)
{
	if (pd->bus)
		pthread_mutex_lock(&pd->bus->lock);
	cfg_write_locked(pd, off, data, len);
	if (pd->bus)
		pthread_mutex_unlock(&pd->bus->lock);
}

uint32_t pci_cfg_read32(struct pci_dev *pd, unsigned off)
{
	uint8_t b[4];

	pci_cfg_read(pd, off, b, 4);
	return le32_load(b);
}

void pci_cfg_write32(struct pci_dev *pd, unsigned off, uint32_t v)
{
	uint8_t b[4];

	le32_store(b, v);
	pci_cfg_write(pd, off, b, 4);
}

void pci_cfg_write16(struct pci_dev *pd, unsigned off, uint16_t v)
{
	uint8_t b[2];

	le16_store(b, v);
	pci_cfg_write(pd, off, b, 2);
}

/* The address register bits that latch: enable, bus, device, function,
 * dword-aligned register; reserved 30:24 and 1:0 read as zero. */
#define PCI_CONF1_ADDR_BITS 0x80fffffcu

/* ---- snapshots ---------------------------------------------------------- */

int pci_dev_save(struct pci_dev *pd, struct snap_w *w, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	if (pd->bus)
		pthread_mutex_lock(&pd->bus->lock);
	snap_put_bytes(w, pd->cfg, PCI_CONF1_SIZE);
	if (pd->bus)
		pthread_mutex_unlock(&pd->bus->lock);
	return 0;
}

/* The bytes that say which function this is. */
static bool pci_same_identity(const uint8_t *a, const uint8_t *b)
{
	return !memcmp(a + PCI_VENDOR_ID, b + PCI_VENDOR_ID, 4) &&
	       !memcmp(a + PCI_CLASS_REVISION, b + PCI_CLASS_REVISION, 4) &&
	       (a[PCI_HEADER_TYPE] & 0x7f) == (b[PCI_HEADER_TYPE] & 0x7f) &&
	       !memcmp(a + PCI_SUBSYSTEM_VENDOR_ID, b + PCI_SUBSYSTEM_VENDOR_ID, 4);
}

int pci_dev_load_begin(struct pci_dev *pd, struct snap_r *r, uint8_t saved[PCI_CONF1_SIZE],
		       char *err, size_t errlen)
{
	unsigned off;

	snap_get_bytes(r, saved, PCI_CONF1_SIZE);
	if (r->err)
		return snap_done(r, err, errlen);
	if (!pci_same_identity(saved, pd->cfg))
		return err_set(err, errlen, -EINVAL, "snapshot: PCI function %s is "
			       "%04x:%04x class %06x there, %04x:%04x class %06x here; give the "
			       "devices the snapshot's VM had, in its order", pd->name,
			       le16_load(saved + PCI_VENDOR_ID), le16_load(saved + PCI_DEVICE_ID),
			       le32_load(saved + PCI_CLASS_REVISION) >> 8,
			       le16_load(pd->cfg + PCI_VENDOR_ID), le16_load(pd->cfg + PCI_DEVICE_ID),
			       le32_load(pd->cfg + PCI_CLASS_REVISION) >> 8);
	/* Byte by byte through the masks, as a guest could write them:
	 * decode is still off, so a BAR half-written maps nothing. */
	for (off = PCI_BASE_ADDRESS_0; off < PCI_BASE_ADDRESS_0 + 4 * PCI_NUM_BARS; off++)
		pci_cfg_write(pd, off, &saved[off], 1);
	pci_cfg_write(pd, PCI_INTERRUPT_LINE, &saved[PCI_INTERRUPT_LINE], 1);
	return 0;
}

void pci_dev_load_finish(struct pci_dev *pd, const uint8_t saved[PCI_CONF1_SIZE])
{
	pci_cfg_write16(pd, PCI_COMMAND, le16_load(saved + PCI_COMMAND));
}

int pci_dev_load(struct pci_dev *pd, struct snap_r *r, char *err, size_t errlen)
{
	uint8_t saved[PCI_CONF1_SIZE];
	int ret = pci_dev_load_begin(pd, r, saved, err, errlen);

	if (ret)
		return ret;
	pci_dev_load_finish(pd, saved);
	return 0;
}

uint32_t pci_bus_conf1_get(struct pci_bus *bus)
{
	uint32_t a;

	pthread_mutex_lock(&bus->lock);
	a = bus->conf1_addr;
	pthread_mutex_unlock(&bus->lock);
	return a;
}

void pci_bus_conf1_set(struct pci_bus *bus, uint32_t addr)
{
	pthread_mutex_lock(&bus->lock);
	bus->conf1_addr = addr & PCI_CONF1_ADDR_BITS;
	pthread_mutex_unlock(&bus->lock);
}

/* ---- configuration mechanism #1 ----------------------------------------- */

/* Address register: only dword accesses at 0xCF8 latch/read it (Linux's
 * probe writes 0x80000000 and expects it back); byte/word accesses to
 * 0xCF8-0xCFB are ignored and read all-ones. Reserved bits 30:24 and 1:0
 * read as zero. */
static void conf1_addr_read(void *opaque, uint64_t off, uint8_t *data, unsigned len)
{
	struct pci_bus *bus = opaque;

	if (off != 0 || len != 4) {
		memset(data, 0xff, len);
		return;
	}
	pthread_mutex_lock(&bus->lock);
	le32_store(data, bus->conf1_addr);
	pthread_mutex_unlock(&bus->lock);
}

static void conf1_addr_write(void *opaque, uint64_t off, const uint8_t *data, unsigned len)
{
	struct pci_bus *bus = opaque;

	if (off != 0 || len != 4)
		return;
	pthread_mutex_lock(&bus->lock);
	bus->conf1_addr = le32_load(data) & PCI_CONF1_ADDR_BITS;
	pthread_mutex_unlock(&bus->lock);
}

/* The function the latched address selects, and the config offset of data
 * port byte `off`; NULL when disabled, no such bus/device/function, or the
 * access would cross the dword. */
static struct pci_dev *conf1_target(struct pci_bus *bus, uint64_t off, unsigned len,
				    unsigned *reg)
{
	uint32_t a = bus->conf1_addr;
	unsigned busno = (a >> 16) & 0xff, slot = (a >> 11) & 0x1f, fn = (a >> 8) & 7;

	unsigned s;

	if (!(a & PCI_CONF1_ENABLE) || fn != 0 || off + len > 4)
		return NULL;
	*reg = (a & 0xfc) + (unsigned)off;
	if (busno == 0)
		return bus->slots[slot];
	/* A bridge's secondary bus holds its child at device 0 only (a PCIe
	 * link has one device); any other number master-aborts. */
	for (s = 1; s < PCI_MAX_SLOTS && slot == 0; s++) {
		struct pci_dev *b = bus->slots[s];
		if (b && (b->cfg[PCI_HEADER_TYPE] & 0x7f) == PCI_HEADER_TYPE_BRIDGE &&
		    b->cfg[PCI_SECONDARY_BUS] == busno)
			return b->child;
	}
	return NULL;
}

static void conf1_data_read(void *opaque, uint64_t off, uint8_t *data, unsigned len)
{
	struct pci_bus *bus = opaque;
	struct pci_dev *pd;
	unsigned reg;

	pthread_mutex_lock(&bus->lock);
	pd = conf1_target(bus, off, len, &reg);
	if (pd)
		cfg_read_locked(pd, reg, data, len);
	else
		memset(data, 0xff, len);   /* master abort */
	pthread_mutex_unlock(&bus->lock);
}

static void conf1_data_write(void *opaque, uint64_t off, const uint8_t *data, unsigned len)
{
	struct pci_bus *bus = opaque;
	struct pci_dev *pd;
	unsigned reg;

	pthread_mutex_lock(&bus->lock);
	pd = conf1_target(bus, off, len, &reg);
	if (pd)
		cfg_write_locked(pd, reg, data, len);
	pthread_mutex_unlock(&bus->lock);
}

const struct io_ops pci_conf1_addr_ops = { conf1_addr_read, conf1_addr_write };
const struct io_ops pci_conf1_data_ops = { conf1_data_read, conf1_data_write };

/* ---- bus ---------------------------------------------------------------- */

unsigned pci_intx_pin(const struct pci_bus *bus, unsigned slot)
{
	return bus->intx_base + slot % 4;
}

int pci_bus_init(struct pci_bus *bus, struct vm *vm, uint64_t mmio_base, uint64_t mmio_end,
		 unsigned intx_base, const struct arch_range *fixed, unsigned nfixed)
{
	int ret;

	memset(bus, 0, sizeof(*bus));
	bus->vm = vm;
	bus->fixed = fixed;
	bus->nfixed = nfixed;
	bus->mmio_next = mmio_base;
	bus->mmio_end = mmio_end;
	bus->intx_base = intx_base;
	ret = -pthread_mutex_init(&bus->lock, NULL);
	if (ret)
		return ret;
	ret = iobus_register(&vm->pio, PCI_CONF1_ADDR_PORT, 4, &pci_conf1_addr_ops, bus);
	if (ret)
		goto destroy_lock;
	ret = iobus_register(&vm->pio, PCI_CONF1_DATA_PORT, 4, &pci_conf1_data_ops, bus);
	if (ret)
		goto unregister_addr;
	/* Host bridge, class 06/00/00: no BARs, nothing writable but the
	 * command register; it is what makes Linux trust conf1. */
	pci_dev_init(&bus->host_bridge, "host-bridge", PCI_HB_VENDOR, PCI_HB_DEVICE,
		     0x060000, 0, PCI_HB_VENDOR, PCI_HB_DEVICE, NULL, NULL);
	bus->host_bridge.bus = bus;
	bus->host_bridge.slot = 0;
	bus->slots[0] = &bus->host_bridge;
	return 0;
unregister_addr:
	iobus_unregister(&vm->pio, PCI_CONF1_ADDR_PORT, bus);
destroy_lock:
	pthread_mutex_destroy(&bus->lock);
	return ret;
}

void pci_bus_destroy(struct pci_bus *bus)
{
	unsigned s;

	for (s = 1; s < PCI_MAX_SLOTS; s++)
		if (bus->slots[s])
			pci_bus_remove(bus, bus->slots[s]);
	iobus_unregister(&bus->vm->pio, PCI_CONF1_DATA_PORT, bus);
	iobus_unregister(&bus->vm->pio, PCI_CONF1_ADDR_PORT, bus);
	pthread_mutex_destroy(&bus->lock);
}

int pci_bus_add(struct pci_bus *bus, struct pci_dev *pd)
{
	uint64_t next;
	unsigned s, i;
	int ret = -ENOSPC;

	pthread_mutex_lock(&bus->lock);
	for (s = 1; s < PCI_MAX_SLOTS && bus->slots[s]; s++)
		;
	if (s == PCI_MAX_SLOTS)
		goto unlock;
	/* Firmware placement: largest BARs first would pack better, but BARs
	 * are few and small; natural alignment within the 32-bit window. */
	next = bus->mmio_next;
	for (i = 0; i < PCI_NUM_BARS; i++) {
		uint64_t size = pd->bars[i].size, at;
		if (!size)
			continue;
		at = ALIGN_UP(next, size);
		if (at + size > bus->mmio_end || at + size < at)
			goto unlock;
		next = at + size;
	}
	for (i = 0; i < PCI_NUM_BARS; i++) {
		uint64_t size = pd->bars[i].size, at;
		unsigned reg = PCI_BASE_ADDRESS_0 + 4 * i;
		if (!size)
			continue;
		at = ALIGN_UP(bus->mmio_next, size);
		cfg_store(pd, reg, 4, (uint32_t)at | pd->bars[i].flags);
		if (pd->bars[i].flags & PCI_BASE_ADDRESS_MEM_TYPE_64)
			cfg_store(pd, reg + 4, 4, (uint32_t)(at >> 32));
		bus->mmio_next = at + size;
	}
	pd->bus = bus;
	pd->slot = s;
	if (!pd->log && bus->vm)
		pd->log = &bus->vm->log;
	pd->cfg[PCI_INTERRUPT_PIN] = 1;               /* INTA# */
	pd->cfg[PCI_INTERRUPT_LINE] = pci_intx_pin(bus, s);
	bus->slots[s] = pd;
	ret = 0;
unlock:
	pthread_mutex_unlock(&bus->lock);
	return ret;
}

void pci_bus_remove(struct pci_bus *bus, struct pci_dev *pd)
{
	unsigned i;

	pthread_mutex_lock(&bus->lock);
	if (pd->parent) {
		pci_bus_detach_child_locked(pd);
	} else {
		for (i = 0; i < PCI_NUM_BARS; i++)
			if (pd->bars[i].size)
				bar_unmap(pd, i);
		if (pd->slot < PCI_MAX_SLOTS && bus->slots[pd->slot] == pd)
			bus->slots[pd->slot] = NULL;
	}
	pd->bus = NULL;
	pthread_mutex_unlock(&bus->lock);
}

/* A type 1 header's memory window: [*base, *limit], from the 16-bit
 * base and limit registers (address bits 31:20). False when disabled. */
static bool bridge_window(const struct pci_dev *br, uint64_t *base, uint64_t *limit)
{
	*base = (uint64_t)(le16_load(&br->cfg[PCI_MEMORY_BASE]) & 0xfff0u) << 16;
	*limit = ((uint64_t)(le16_load(&br->cfg[PCI_MEMORY_LIMIT]) & 0xfff0u) << 16) | 0xfffff;
	return *base <= *limit;
}

int pci_bus_add_child_locked(struct pci_bus *bus, struct pci_dev *bridge, struct pci_dev *pd)
{
	uint64_t base, limit, next;
	unsigned i, pass;

	if (bridge->child)
		return -EBUSY;
	if (!bridge_window(bridge, &base, &limit))
		return -ENOSPC;
	/* Two passes: check that every BAR fits, then place them. */
	for (pass = 0; pass < 2; pass++) {
		next = base;
		for (i = 0; i < PCI_NUM_BARS; i++) {
			uint64_t size = pd->bars[i].size, at;
			unsigned reg = PCI_BASE_ADDRESS_0 + 4 * i;
			if (!size)
				continue;
			at = ALIGN_UP(next, size);
			if (at + size - 1 > limit || at + size < at)
				return -ENOSPC;
			next = at + size;
			if (!pass)
				continue;
			cfg_store(pd, reg, 4, (uint32_t)at | pd->bars[i].flags);
			if (pd->bars[i].flags & PCI_BASE_ADDRESS_MEM_TYPE_64)
				cfg_store(pd, reg + 4, 4, (uint32_t)(at >> 32));
		}
	}
	pd->bus = bus;
	pd->slot = 0;
	pd->busno = bridge->cfg[PCI_SECONDARY_BUS];
	pd->parent = bridge;
	if (!pd->log && bus->vm)
		pd->log = &bus->vm->log;
	pd->cfg[PCI_INTERRUPT_PIN] = 1;               /* INTA# */
	pd->cfg[PCI_INTERRUPT_LINE] = pci_dev_intx_line(pd);
	bridge->child = pd;
	return 0;
}

void pci_bus_detach_child_locked(struct pci_dev *pd)
{
	unsigned i;

	for (i = 0; i < PCI_NUM_BARS; i++)
		if (pd->bars[i].size)
			bar_unmap(pd, i);
	if (pd->parent && pd->parent->child == pd)
		pd->parent->child = NULL;
}

unsigned pci_dev_intx_line(const struct pci_dev *pd)
{
	return pci_intx_pin(pd->bus, pd->parent ? pd->parent->slot : pd->slot);
}
