#include "devices/msix.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "devices/pci.h"
#include "vmm/base/snap.h"
#include "vmm/base/byteorder.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"

static bool addr_valid(const struct msix_vector *v)
{
	return v->addr_hi == 0 && (v->addr_lo & MSIX_ADDR_MASK) == MSIX_ADDR_BASE;
}

/* The function may send messages: MSI-X enabled, not function-masked, and
 * bus master (PCIe 7.5.1.1.3, Command register: MSI/MSI-X messages are
 * memory writes, so a clear Bus Master Enable disables them too). */
static bool live(const struct msix *m)
{
	return m->enabled && !m->fmask && m->master;
}

static bool usable(const struct msix *m, const struct msix_vector *v)
{
	return live(m) && !(v->ctrl & PCI_MSIX_ENTRY_CTRL_MASKBIT);
}

static void pba_set(struct msix *m, unsigned i, bool on)
{
	if (on)
		m->pba[i / 64] |= 1ULL << (i % 64);
	else
		m->pba[i / 64] &= ~(1ULL << (i % 64));
}

static bool pba_test(const struct msix *m, unsigned i)
{
	return (m->pba[i / 64] >> (i % 64)) & 1;
}

/* Install or remove vector i's route to match its table entry. Lock held. */
static void sync_route(struct msix *m, unsigned i)
{
	struct msix_vector *v = &m->v[i];
	uint64_t addr = (uint64_t)v->addr_hi << 32 | v->addr_lo;
	int ret;

	if (!usable(m, v))
		return;                 /* masked: routed on unmask */
	if (!addr_valid(v)) {
		pci_guest_warn(m->pd, PCI_GW_MSIX_ADDR, "MSI-X vector %u has address 0x%" PRIx64
			       " outside the LAPIC window 0xfeexxxxx; vector not routed", i, addr);
		if (v->routed) {
			m->reroutes++;
			if (m->bound)
				vm_msi_route(m->vm, v->gsi, 0, 0, true);
		}
		v->routed = false;
		return;
	}
	if (v->routed && v->route_addr == addr && v->route_data == v->data)
		return;                 /* KVM has this route: no update */
	m->reroutes++;
	if (m->bound) {
		ret = vm_msi_route(m->vm, v->gsi, addr, v->data, false);
		if (ret) {
			pci_guest_warn(m->pd, PCI_GW_MSIX_ROUTE, "MSI-X vector %u: routing GSI %u "
				       "to 0x%" PRIx64 " data 0x%x failed: %s; vector not routed", i,
				       v->gsi, addr, v->data, strerror(-ret));
			v->routed = false;
			return;
		}
	}
	v->routed = true;
	v->route_addr = addr;
	v->route_data = v->data;
}

/* Lock held; the vector is usable. */
static int fire(struct msix *m, unsigned i)
{
	struct msix_vector *v = &m->v[i];

	if (!v->routed)
		return -EINVAL;
	/* Written under m->lock so that a concurrent mask/re-route cannot slip
	 * between the usable check and the write (see msix.h). A full eventfd
	 * counter (EAGAIN) still has an interrupt outstanding: nothing lost. */
	if (eventfd_write(v->fd, 1) == 0)
		m->fired++;
	return 0;
}

/* After unmask / fmask clear / enable / bus master enable: route, then
 * deliver pending once. */
static void unmasked(struct msix *m, unsigned i)
{
	sync_route(m, i);
	if (usable(m, &m->v[i]) && pba_test(m, i)) {
		pba_set(m, i, false);
		fire(m, i);
	}
}

int msix_init(struct msix *m, struct pci_dev *pd, struct vm *vm, unsigned nvec,
	      unsigned bar, uint32_t table_off, uint32_t pba_off)
{
	unsigned i;
	int cap, ret;

	memset(m, 0, sizeof(*m));
	if (nvec == 0 || nvec > MSIX_MAX_VECTORS || bar >= PCI_NUM_BARS ||
	    (table_off & 7) || (pba_off & 7))
		return -EINVAL;
	if (table_off < pba_off ? table_off + nvec * PCI_MSIX_ENTRY_SIZE > pba_off
				: pba_off + ALIGN_UP(nvec, 64u) / 8 > table_off)
		return -EINVAL;
	m->vm = vm;
	m->pd = pd;
	m->nvec = nvec;
	m->table_off = table_off;
	m->pba_off = pba_off;
	m->master = pci_command(pd) & PCI_COMMAND_MASTER;
	ret = -pthread_mutex_init(&m->lock, NULL);
	if (ret)
		return ret;
	m->v = calloc(nvec, sizeof(*m->v));
	m->pba = calloc(ALIGN_UP(nvec, 64u) / 64, sizeof(*m->pba));
	if (!m->v || !m->pba) {
		ret = -ENOMEM;
		goto free_arrays;
	}
	for (i = 0; i < nvec; i++) {
		m->v[i].ctrl = PCI_MSIX_ENTRY_CTRL_MASKBIT;
		m->v[i].fd = -1;
	}
	for (i = 0; i < nvec; i++) {
		m->v[i].fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (m->v[i].fd < 0) {
			ret = -errno;
			goto close_fds;
		}
	}
	cap = pci_cap_add(pd, PCI_CAP_ID_MSIX, MSIX_CAP_LEN);
	if (cap < 0) {
		ret = cap;
		goto close_fds;
	}
	m->cap = cap;
	le16_store(&pd->cfg[cap + PCI_MSIX_FLAGS], (uint16_t)(nvec - 1));
	le32_store(&pd->cfg[cap + PCI_MSIX_TABLE], table_off | bar);
	le32_store(&pd->cfg[cap + PCI_MSIX_PBA], pba_off | bar);
	pci_set_wmask(pd, cap + PCI_MSIX_FLAGS, 2, PCI_MSIX_FLAGS_ENABLE | PCI_MSIX_FLAGS_MASKALL);
	return 0;
close_fds:
	for (i = 0; i < nvec; i++)
		if (m->v[i].fd >= 0)
			close(m->v[i].fd);
free_arrays:
	free(m->v);
	free(m->pba);
	pthread_mutex_destroy(&m->lock);
	memset(m, 0, sizeof(*m));
	return ret;
}

int msix_bind(struct msix *m)
{
	unsigned i;
	int ret;

	for (i = 0; i < m->nvec; i++) {
		ret = vm_alloc_msi_gsi(m->vm, &m->v[i].gsi);
		if (ret)
			goto unbind;
		ret = vm_irqfd(m->vm, m->v[i].gsi, m->v[i].fd, false);
		if (ret)
			goto unbind;
	}
	pthread_mutex_lock(&m->lock);
	m->bound = true;
	for (i = 0; i < m->nvec; i++)   /* routes the guest set up before binding */
		if (m->v[i].routed) {
			m->v[i].routed = false;
			sync_route(m, i);
		}
	pthread_mutex_unlock(&m->lock);
	return 0;
unbind:
	while (i-- > 0)
		vm_irqfd(m->vm, m->v[i].gsi, m->v[i].fd, true);
	return ret;
}

void msix_destroy(struct msix *m)
{
	unsigned i;

	if (!m->v)
		return;
	for (i = 0; i < m->nvec; i++) {
		if (m->bound)
			vm_irqfd(m->vm, m->v[i].gsi, m->v[i].fd, true);
		close(m->v[i].fd);
	}
	free(m->v);
	free(m->pba);
	pthread_mutex_destroy(&m->lock);
	memset(m, 0, sizeof(*m));
}

void msix_reset(struct msix *m)
{
	unsigned i;

	if (!m->v)
		return;
	pthread_mutex_lock(&m->lock);
	m->enabled = m->fmask = false;
	m->master = pci_command(m->pd) & PCI_COMMAND_MASTER;
	/* Routes stay installed: a vector the next driver unmasks is routed
	 * again where it differs (unmasked, sync_route). */
	for (i = 0; i < m->nvec; i++) {
		m->v[i].addr_lo = m->v[i].addr_hi = m->v[i].data = 0;
		m->v[i].ctrl = PCI_MSIX_ENTRY_CTRL_MASKBIT;
	}
	memset(m->pba, 0, ALIGN_UP(m->nvec, 64u) / 8);
	pthread_mutex_unlock(&m->lock);
}

void msix_config_write(struct msix *m, unsigned off, unsigned len)
{
	bool in_cap, in_cmd, was_live;
	uint16_t ctrl;
	unsigned i;

	if (!m->v)
		return;
	in_cap = off < m->cap + MSIX_CAP_LEN && off + len > m->cap;
	in_cmd = off < PCI_COMMAND + 2 && off + len > PCI_COMMAND;
	if (!in_cap && !in_cmd)
		return;
	ctrl = le16_load(&m->pd->cfg[m->cap + PCI_MSIX_FLAGS]);
	pthread_mutex_lock(&m->lock);
	was_live = live(m);
	m->enabled = ctrl & PCI_MSIX_FLAGS_ENABLE;
	m->fmask = ctrl & PCI_MSIX_FLAGS_MASKALL;
	m->master = pci_command(m->pd) & PCI_COMMAND_MASTER;
	if (live(m) && !was_live)
		for (i = 0; i < m->nvec; i++)
			unmasked(m, i);
	pthread_mutex_unlock(&m->lock);
}

bool msix_enabled(struct msix *m)
{
	bool en;

	pthread_mutex_lock(&m->lock);
	en = m->enabled;
	pthread_mutex_unlock(&m->lock);
	return en;
}

int msix_signal(struct msix *m, unsigned vec)
{
	int ret;

	if (vec >= m->nvec)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	if (!m->enabled) {
		ret = -ENOTSUP;
	} else if (!usable(m, &m->v[vec])) {
		pba_set(m, vec, true);
		m->pended++;
		ret = 1;
	} else {
		ret = fire(m, vec);
	}
	pthread_mutex_unlock(&m->lock);
	return ret;
}

bool msix_pending(struct msix *m, unsigned vec)
{
	bool p;

	if (vec >= m->nvec)
		return false;
	pthread_mutex_lock(&m->lock);
	p = pba_test(m, vec);
	pthread_mutex_unlock(&m->lock);
	return p;
}

void msix_clear_pending(struct msix *m)
{
	if (!m->pba)
		return;
	pthread_mutex_lock(&m->lock);
	memset(m->pba, 0, ALIGN_UP(m->nvec, 64u) / 8);
	pthread_mutex_unlock(&m->lock);
}

/* ---- BAR: table and PBA ------------------------------------------------- */

static bool access_ok(uint64_t off, unsigned len)
{
	return (len == 4 || len == 8) && (off & (len - 1)) == 0;
}

static uint32_t *entry_field(struct msix_vector *v, unsigned field)
{
	switch (field) {
	case PCI_MSIX_ENTRY_LOWER_ADDR: return &v->addr_lo;
	case PCI_MSIX_ENTRY_UPPER_ADDR: return &v->addr_hi;
	case PCI_MSIX_ENTRY_DATA: return &v->data;
	default: return &v->ctrl;
	}
}

void msix_bar_read(struct msix *m, uint64_t off, uint8_t *data, unsigned len)
{
	uint64_t table_len = (uint64_t)m->nvec * PCI_MSIX_ENTRY_SIZE;
	uint64_t pba_len = ALIGN_UP(m->nvec, 64u) / 8;
	unsigned k;

	memset(data, 0, len);
	if (!access_ok(off, len))
		return;
	pthread_mutex_lock(&m->lock);
	if (off >= m->table_off && off - m->table_off < table_len) {
		uint64_t t = off - m->table_off;
		for (k = 0; k < len; k += 4) {
			struct msix_vector *v = &m->v[(t + k) / PCI_MSIX_ENTRY_SIZE];
			le32_store(data + k, *entry_field(v, (t + k) % PCI_MSIX_ENTRY_SIZE));
		}
	} else if (off >= m->pba_off && off - m->pba_off < pba_len) {
		uint64_t word = m->pba[(off - m->pba_off) / 8];
		if (len == 8)
			le64_store(data, word);
		else
			le32_store(data, (uint32_t)(word >> (((off - m->pba_off) & 4) * 8)));
	}
	pthread_mutex_unlock(&m->lock);
}

static void table_write32(struct msix *m, uint64_t t, uint32_t val)
{
	unsigned i = t / PCI_MSIX_ENTRY_SIZE, field = t % PCI_MSIX_ENTRY_SIZE;
	struct msix_vector *v = &m->v[i];
	bool was_masked = v->ctrl & PCI_MSIX_ENTRY_CTRL_MASKBIT;

	if (field == PCI_MSIX_ENTRY_VECTOR_CTRL) {
		v->ctrl = val & PCI_MSIX_ENTRY_CTRL_MASKBIT;       /* other bits reserved */
		if (was_masked && !(v->ctrl & PCI_MSIX_ENTRY_CTRL_MASKBIT))
			unmasked(m, i);
		return;
	}
	*entry_field(v, field) = val;
	sync_route(m, i);            /* a live vector follows its new message */
}

void msix_bar_write(struct msix *m, uint64_t off, const uint8_t *data, unsigned len)
{
	uint64_t table_len = (uint64_t)m->nvec * PCI_MSIX_ENTRY_SIZE;
	unsigned k;

	if (!access_ok(off, len) || off < m->table_off || off - m->table_off >= table_len)
		return;                 /* the PBA is read-only */
	pthread_mutex_lock(&m->lock);
	for (k = 0; k < len; k += 4)
		table_write32(m, off - m->table_off + k, le32_load(data + k));
	pthread_mutex_unlock(&m->lock);
}

static void bar_read(void *opaque, uint64_t off, uint8_t *data, unsigned len)
{
	msix_bar_read(opaque, off, data, len);
}

static void bar_write(void *opaque, uint64_t off, const uint8_t *data, unsigned len)
{
	msix_bar_write(opaque, off, data, len);
}

const struct io_ops msix_bar_ops = { bar_read, bar_write };

/* ---- snapshots ---------------------------------------------------------- */

void msix_save(struct msix *m, struct snap_w *w)
{
	unsigned i;

	pthread_mutex_lock(&m->lock);
	snap_put_u32(w, m->nvec);
	for (i = 0; i < m->nvec; i++) {
		snap_put_u32(w, m->v[i].addr_lo);
		snap_put_u32(w, m->v[i].addr_hi);
		snap_put_u32(w, m->v[i].data);
		snap_put_u32(w, m->v[i].ctrl);
	}
	for (i = 0; i < ALIGN_UP(m->nvec, 64u) / 64; i++)
		snap_put_u64(w, m->pba[i]);
	pthread_mutex_unlock(&m->lock);
}

int msix_load(struct msix *m, struct snap_r *r, const uint8_t *saved_cfg, char *err,
	      size_t errlen)
{
	uint32_t nvec = snap_get_u32(r);
	unsigned i, k;
	uint8_t b[4];

	if (nvec != m->nvec)
		return err_set(err, errlen, -EINVAL, "snapshot: %s has %u MSI-X vectors there, "
			       "%u here; give the devices the snapshot's VM had", m->pd->name,
			       nvec, m->nvec);
	for (i = 0; i < nvec; i++)
		for (k = 0; k < PCI_MSIX_ENTRY_SIZE; k += 4) {
			le32_store(b, snap_get_u32(r));
			msix_bar_write(m, m->table_off + (uint64_t)i * PCI_MSIX_ENTRY_SIZE + k, b, 4);
		}
	pthread_mutex_lock(&m->lock);
	for (i = 0; i < ALIGN_UP(nvec, 64u) / 64; i++) {
		uint64_t bits = snap_get_u64(r);

		if (i == nvec / 64)
			bits &= (1ULL << (nvec % 64)) - 1;      /* none beyond the table */
		m->pba[i] = bits;
	}
	pthread_mutex_unlock(&m->lock);
	if (r->err)
		return snap_done(r, err, errlen);
	pci_cfg_write(m->pd, m->cap + PCI_MSIX_FLAGS, saved_cfg + m->cap + PCI_MSIX_FLAGS, 2);
	return 0;
}
