#include "devices/pcie_port.h"

#include <errno.h>
#include <string.h>

#include "vmm/base/byteorder.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"

/* Slot events the port reports (Slot Status, write 1 to clear); their
 * enables in Slot Control. */
#define PORT_EVENTS   (PCI_EXP_SLTSTA_ABP | PCI_EXP_SLTSTA_PFD | PCI_EXP_SLTSTA_MRLSC | \
		       PCI_EXP_SLTSTA_PDC | PCI_EXP_SLTSTA_CC | PCI_EXP_SLTSTA_DLLSC)

static uint16_t port_rd16(const struct pcie_port *p, unsigned reg)
{
	return le16_load(&p->pci.cfg[p->cap + reg]);
}

static void port_wr16(struct pcie_port *p, unsigned reg, uint16_t v)
{
	le16_store(&p->pci.cfg[p->cap + reg], v);
}

/* Drive INTA# to what the registers say (PCIe 6.7.3.4): an enabled event
 * pending, hot-plug interrupts on, INTx not disabled. Bus lock held. */
static void port_irq_update(struct pcie_port *p)
{
	uint16_t ctl = port_rd16(p, PCI_EXP_SLTCTL), sta = port_rd16(p, PCI_EXP_SLTSTA);
	uint16_t en = 0;
	bool level;

	if (ctl & PCI_EXP_SLTCTL_ABPE)
		en |= PCI_EXP_SLTSTA_ABP;
	if (ctl & PCI_EXP_SLTCTL_PDCE)
		en |= PCI_EXP_SLTSTA_PDC;
	if (ctl & PCI_EXP_SLTCTL_DLLSCE)
		en |= PCI_EXP_SLTSTA_DLLSC;
	level = (ctl & PCI_EXP_SLTCTL_HPIE) && (sta & en) &&
		!(pci_command(&p->pci) & PCI_COMMAND_INTX_DISABLE);
	if (level == p->line)
		return;
	p->line = level;
	/* The line is shared with bus 0's other functions on the same pin:
	 * KVM ORs this source with their irqfds'. */
	if (p->bus->vm && p->bus->vm->vm_fd >= 0)
		vm_irq_line(p->bus->vm, pci_dev_intx_line(&p->pci), level);
}

/* Presence and link follow whether a child is there; the changes are
 * events. Bus lock held. */
static void port_presence(struct pcie_port *p, bool present)
{
	uint16_t sta = port_rd16(p, PCI_EXP_SLTSTA), lnk = port_rd16(p, PCI_EXP_LNKSTA);

	sta = present ? sta | PCI_EXP_SLTSTA_PDS : sta & ~PCI_EXP_SLTSTA_PDS;
	lnk = present ? lnk | PCI_EXP_LNKSTA_DLLLA : lnk & ~PCI_EXP_LNKSTA_DLLLA;
	port_wr16(p, PCI_EXP_SLTSTA, sta | PCI_EXP_SLTSTA_PDC | PCI_EXP_SLTSTA_DLLSC);
	port_wr16(p, PCI_EXP_LNKSTA, lnk);
	port_irq_update(p);
}

/* The child leaves (the guest's power-off, or a surprise): config
 * accesses master-abort, its BARs are unmapped. Bus lock held. */
static void port_detach(struct pcie_port *p)
{
	if (!p->pci.child)
		return;
	pci_bus_detach_child_locked(p->pci.child);
	port_presence(p, false);
}

static void port_config_write(struct pci_dev *pd, unsigned off, unsigned len)
{
	struct pcie_port *p = pd->opaque;
	bool off_now = (port_rd16(p, PCI_EXP_SLTCTL) & PCI_EXP_SLTCTL_PCC) ==
		       PCI_EXP_SLTCTL_PWR_OFF;

	(void)off;
	(void)len;
	/* Power Controller Control going from on to off with a device there:
	 * the guest released it and powered the slot off, which pciehp does
	 * after a button press, or on its own (a user's "echo 0 > .../power").
	 * Only the edge counts: pciehp rewrites the whole register to change
	 * its enables, the power bit as it stands. */
	if (off_now && !p->powered_off) {
		p->off_at = mono_ns();
		if (pd->child) {
			port_detach(p);
			p->ejects++;
			p->eject_seen = true;
			pthread_cond_broadcast(&p->eject);
		}
	}
	p->powered_off = off_now;
	port_irq_update(p);
}

static const struct pci_dev_ops port_pci_ops = {
	.config_write = port_config_write,
};

/* The type 1 header's registers (PCI-to-PCI Bridge 1.2 §3.2). */
static void port_bridge_header(struct pcie_port *p, unsigned secondary)
{
	struct pci_dev *pd = &p->pci;

	pd->cfg[PCI_HEADER_TYPE] = PCI_HEADER_TYPE_BRIDGE;
	/* pci_dev_init's subsystem ids sit where a bridge keeps its
	 * prefetchable window's upper halves. */
	memset(&pd->cfg[PCI_PREF_BASE_UPPER32], 0, 8);
	pd->cfg[PCI_PRIMARY_BUS] = 0;
	pd->cfg[PCI_SECONDARY_BUS] = (uint8_t)secondary;
	pd->cfg[PCI_SUBORDINATE_BUS] = (uint8_t)secondary;
	pci_set_wmask(pd, PCI_PRIMARY_BUS, 2, 0xffff);
	pci_set_wmask(pd, PCI_SUBORDINATE_BUS, 1, 0xff);
	/* I/O and prefetchable windows closed (base above limit) but
	 * programmable, as the guest's resource code expects of a bridge. */
	pd->cfg[PCI_IO_BASE] = 0xf0;
	pd->cfg[PCI_IO_LIMIT] = 0x00;
	pci_set_wmask(pd, PCI_IO_BASE, 2, 0xf0f0);
	le16_store(&pd->cfg[PCI_PREF_MEMORY_BASE], 0xfff0);
	le16_store(&pd->cfg[PCI_PREF_MEMORY_LIMIT], 0x0000);
	pci_set_wmask(pd, PCI_PREF_MEMORY_BASE, 4, 0xfff0fff0);
	pci_set_wmask(pd, PCI_MEMORY_BASE, 4, 0xfff0fff0);
	pci_set_wmask(pd, PCI_BRIDGE_CONTROL, 2,
		      PCI_BRIDGE_CTL_PARITY | PCI_BRIDGE_CTL_SERR | PCI_BRIDGE_CTL_ISA |
		      PCI_BRIDGE_CTL_VGA | PCI_BRIDGE_CTL_MASTER_ABORT | PCI_BRIDGE_CTL_BUS_RESET);
}

/* The PCI Express capability, version 2 (PCIe 4.0 §7.5.3): a root port
 * whose slot is hot-plug capable. */
static int port_pcie_cap(struct pcie_port *p)
{
	struct pci_dev *pd = &p->pci;
	int off = pci_cap_add(pd, PCI_CAP_ID_EXP, PCIE_PORT_CAP_LEN);
	uint8_t *c;

	if (off < 0)
		return off;
	p->cap = (unsigned)off;
	c = &pd->cfg[off];
	le16_store(c + PCI_EXP_FLAGS, 2 | PCI_EXP_TYPE_ROOT_PORT << 4 | PCI_EXP_FLAGS_SLOT);
	le32_store(c + PCI_EXP_DEVCAP, PCI_EXP_DEVCAP_RBER);
	pci_set_wmask(pd, off + PCI_EXP_DEVCTL, 2, 0x7fff);
	le32_store(c + PCI_EXP_LNKCAP, PCI_EXP_LNKCAP_SLS_2_5GB | 1u << 4 |
		   PCI_EXP_LNKCAP_DLLLARC | (p->number & 0xff) << 24);
	pci_set_wmask(pd, off + PCI_EXP_LNKCTL, 2, 0x0ffb);   /* not Retrain Link */
	le16_store(c + PCI_EXP_LNKSTA, PCI_EXP_LNKSTA_CLS_2_5GB | PCI_EXP_LNKSTA_NLW_X1);
	le32_store(c + PCI_EXP_SLTCAP, PCI_EXP_SLTCAP_ABP | PCI_EXP_SLTCAP_PCP |
		   PCI_EXP_SLTCAP_HPC | PCI_EXP_SLTCAP_NCCS | (p->number & 0x1fff) << 19);
	/* An empty slot starts powered off. */
	le16_store(c + PCI_EXP_SLTCTL, PCI_EXP_SLTCTL_PWR_OFF);
	p->powered_off = true;
	pci_set_wmask(pd, off + PCI_EXP_SLTCTL, 2,
		      PCI_EXP_SLTCTL_ABPE | PCI_EXP_SLTCTL_PFDE | PCI_EXP_SLTCTL_MRLSCE |
		      PCI_EXP_SLTCTL_PDCE | PCI_EXP_SLTCTL_CCIE | PCI_EXP_SLTCTL_HPIE |
		      PCI_EXP_SLTCTL_PCC | PCI_EXP_SLTCTL_DLLSCE);
	le16_store(pd->w1c + off + PCI_EXP_SLTSTA, PORT_EVENTS);
	pci_set_wmask(pd, off + PCI_EXP_RTCTL, 2, 0x001f);
	le32_store(c + PCI_EXP_LNKCAP2, PCI_EXP_LNKCAP2_SLS_2_5GB);
	le16_store(c + PCI_EXP_LNKCTL2, 1);
	pci_set_wmask(pd, off + PCI_EXP_LNKCTL2, 2, 0x000f);
	return 0;
}

int pcie_port_init(struct pcie_port *p, struct pci_bus *bus, unsigned number)
{
	uint64_t at;
	int ret;

	if (number == 0 || number > 0xff)
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	p->bus = bus;
	p->number = number;
	pci_dev_init(&p->pci, "pcie-root-port", PCIE_PORT_VENDOR, PCIE_PORT_DEVICE,
		     PCIE_PORT_CLASS, 0, 0, 0, &port_pci_ops, p);
	port_bridge_header(p, number);
	ret = port_pcie_cap(p);
	if (ret)
		return ret;
	ret = mono_cond_init(&p->eject);
	if (ret)
		return ret;
	ret = pci_bus_add(bus, &p->pci);
	if (ret)
		goto destroy_cond;
	/* Its memory window, as firmware places it: 1 MiB aligned, after
	 * what the bus's functions took. */
	pthread_mutex_lock(&bus->lock);
	at = ALIGN_UP(bus->mmio_next, (uint64_t)PCIE_PORT_WINDOW);
	if (at + PCIE_PORT_WINDOW > bus->mmio_end) {
		pthread_mutex_unlock(&bus->lock);
		ret = -ENOSPC;
		goto remove;
	}
	bus->mmio_next = at + PCIE_PORT_WINDOW;
	le16_store(&p->pci.cfg[PCI_MEMORY_BASE], (uint16_t)(at >> 16) & 0xfff0);
	le16_store(&p->pci.cfg[PCI_MEMORY_LIMIT],
		   (uint16_t)((at + PCIE_PORT_WINDOW - 1) >> 16) & 0xfff0);
	pthread_mutex_unlock(&bus->lock);
	return 0;
remove:
	pci_bus_remove(bus, &p->pci);
destroy_cond:
	pthread_cond_destroy(&p->eject);
	return ret;
}

void pcie_port_destroy(struct pcie_port *p)
{
	if (!p->bus)
		return;
	pthread_mutex_lock(&p->bus->lock);
	if (p->line && p->bus->vm && p->bus->vm->vm_fd >= 0)
		vm_irq_line(p->bus->vm, pci_dev_intx_line(&p->pci), false);
	pthread_mutex_unlock(&p->bus->lock);
	pci_bus_remove(p->bus, &p->pci);
	pthread_cond_destroy(&p->eject);
	p->bus = NULL;
}

int pcie_port_attach(struct pcie_port *p, struct pci_dev *child)
{
	int ret;

	pthread_mutex_lock(&p->bus->lock);
	ret = pci_bus_add_child_locked(p->bus, &p->pci, child);
	pthread_mutex_unlock(&p->bus->lock);
	return ret;
}

void pcie_port_detach(struct pcie_port *p)
{
	pthread_mutex_lock(&p->bus->lock);
	if (p->pci.child)
		pci_bus_detach_child_locked(p->pci.child);
	pthread_mutex_unlock(&p->bus->lock);
}

void pcie_port_announce(struct pcie_port *p)
{
	pthread_mutex_lock(&p->bus->lock);
	if (p->pci.child) {
		p->eject_seen = false;
		p->plugs++;
		port_presence(p, true);
	}
	pthread_mutex_unlock(&p->bus->lock);
}

int pcie_port_plug(struct pcie_port *p, struct pci_dev *child)
{
	int ret = pcie_port_attach(p, child);

	if (!ret)
		pcie_port_announce(p);
	return ret;
}

int pcie_port_press_button(struct pcie_port *p)
{
	int ret = -ENODEV;

	pthread_mutex_lock(&p->bus->lock);
	if (p->pci.child) {
		port_wr16(p, PCI_EXP_SLTSTA, port_rd16(p, PCI_EXP_SLTSTA) | PCI_EXP_SLTSTA_ABP);
		port_irq_update(p);
		ret = 0;
	}
	pthread_mutex_unlock(&p->bus->lock);
	return ret;
}

int pcie_port_wait_eject(struct pcie_port *p, uint64_t deadline_ns)
{
	struct timespec ts = mono_timespec(deadline_ns);
	int ret = 0;

	pthread_mutex_lock(&p->bus->lock);
	while (!p->eject_seen) {
		if (pthread_cond_timedwait(&p->eject, &p->bus->lock, &ts) == ETIMEDOUT &&
		    !p->eject_seen) {
			ret = -ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&p->bus->lock);
	return ret;
}

void pcie_port_surprise_remove(struct pcie_port *p)
{
	pthread_mutex_lock(&p->bus->lock);
	if (p->pci.child) {
		port_detach(p);
		p->surprise++;
	}
	pthread_mutex_unlock(&p->bus->lock);
}

bool pcie_port_ready(struct pcie_port *p, uint64_t now_ns)
{
	bool r;

	pthread_mutex_lock(&p->bus->lock);
	r = !p->pci.child && p->powered_off && now_ns - p->off_at >= PCIE_PORT_SETTLE_NS;
	pthread_mutex_unlock(&p->bus->lock);
	return r;
}

bool pcie_port_occupied(struct pcie_port *p)
{
	bool r;

	pthread_mutex_lock(&p->bus->lock);
	r = p->pci.child != NULL;
	pthread_mutex_unlock(&p->bus->lock);
	return r;
}

int pcie_port_save(struct pcie_port *p, struct snap_w *w, char *err, size_t errlen)
{
	uint64_t now = mono_ns(), age;
	int ret;

	ret = pci_dev_save(&p->pci, w, err, errlen);
	if (ret)
		return ret;
	pthread_mutex_lock(&p->bus->lock);
	age = now > p->off_at ? now - p->off_at : 0;
	pthread_mutex_unlock(&p->bus->lock);
	snap_put_u64(w, MIN(age, PCIE_PORT_SETTLE_NS));
	return 0;
}

int pcie_port_load(struct pcie_port *p, struct snap_r *r, char *err, size_t errlen)
{
	static const unsigned ctl[] = { PCI_EXP_DEVCTL, PCI_EXP_LNKCTL, PCI_EXP_SLTCTL,
					PCI_EXP_RTCTL, PCI_EXP_LNKCTL2 };
	struct pci_dev *pd = &p->pci;
	uint8_t saved[PCI_CONF1_SIZE];
	uint16_t sta;
	uint64_t age;
	unsigned i;
	int ret;

	/* It writes the header's BAR range, which in a type 1 header holds
	 * the bus numbers and the I/O and memory windows. */
	ret = pci_dev_load_begin(pd, r, saved, err, errlen);
	if (ret)
		return ret;
	age = snap_get_u64(r);
	if (r->err)
		return snap_done(r, err, errlen);
	/* Presence and link as they were: the disk the snapshot had there
	 * was attached again (pcie_port_attach) before this load, or the
	 * slot was empty then and is now. */
	if (!(le16_load(&saved[p->cap + PCI_EXP_SLTSTA]) & PCI_EXP_SLTSTA_PDS) != !pd->child)
		return err_set(err, errlen, -EINVAL, "hot-plug slot %u %s; give the VM the "
			       "snapshot's disks", p->number, pd->child ?
			       "was empty in the snapshot, a disk is there here" :
			       "held a disk in the snapshot, none is there here");
	/* The rest of the type 1 header: the prefetchable window's upper
	 * halves, the I/O window's, bridge control. */
	for (i = PCI_PREF_BASE_UPPER32; i < PCI_BRIDGE_CONTROL + 2; i++)
		pci_cfg_write(pd, i, &saved[i], 1);
	/* The slot's controls: a power-off here is no eject (a fresh port
	 * is powered off, so writing off is no edge, and a disk attached
	 * for the load stays: the guest had not powered its slot on yet). */
	for (i = 0; i < sizeof(ctl) / sizeof(ctl[0]); i++)
		pci_cfg_write(pd, p->cap + ctl[i], &saved[p->cap + ctl[i]], 2);
	pthread_mutex_lock(&p->bus->lock);
	sta = le16_load(&saved[p->cap + PCI_EXP_SLTSTA]);
	sta = (uint16_t)((sta & (PORT_EVENTS | PCI_EXP_SLTSTA_PDS)) |
			 (port_rd16(p, PCI_EXP_SLTSTA) & ~(PORT_EVENTS | PCI_EXP_SLTSTA_PDS)));
	port_wr16(p, PCI_EXP_SLTSTA, sta);
	port_wr16(p, PCI_EXP_LNKSTA, (uint16_t)((port_rd16(p, PCI_EXP_LNKSTA) &
		  ~PCI_EXP_LNKSTA_DLLLA) | (le16_load(&saved[p->cap + PCI_EXP_LNKSTA]) &
					   PCI_EXP_LNKSTA_DLLLA)));
	p->off_at = mono_ns() - MIN(age, PCIE_PORT_SETTLE_NS);
	pthread_mutex_unlock(&p->bus->lock);
	pci_dev_load_finish(pd, saved);
	pthread_mutex_lock(&p->bus->lock);
	port_irq_update(p);
	pthread_mutex_unlock(&p->bus->lock);
	return 0;
}
