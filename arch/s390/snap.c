/* Snapshots of an s390x VM (arch/arch.h, docs/snapshot.md), as QEMU's
 * s390x migration keeps them: each vCPU's registers from its kvm_run's
 * synchronized registers (the PSW, prefix, general, access, control and
 * floating-point or vector registers, the CPU timer, clock comparator,
 * TOD programmable register and the facets the CPU has), its pending
 * interrupts (KVM_S390_GET_IRQ_STATE) and mvm's run state for it
 * (operating, or stopped until a SIGP); the VM's TOD clock as the pause
 * kept it, its CPU model (a restore needs every facility the guest saw),
 * the storage keys where the guest uses them, the floating interrupts
 * (the FLIC's), and the channel subsystem (css_save).
 *
 * Encoding and checks are pure functions (s390.h); the KVM calls that
 * fill and apply them follow. Fields go one by one, little-endian, but
 * for KVM's fixed byte images (a pending interrupt's union, the runtime-
 * instrumentation block). */
#include "arch/arch.h"
#include "arch/s390/css.h"
#include "arch/s390/s390.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/vcpu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#define PAGE_SHIFT_4K 12

/* ---- encoding ------------------------------------------------------------ */

static void put_irqs(struct snap_w *w, const struct kvm_s390_irq *irqs, uint32_t n)
{
	uint32_t i;

	snap_put_u32(w, n);
	for (i = 0; i < n; i++) {
		snap_put_u64(w, irqs[i].type);
		snap_put_bytes(w, &irqs[i].u, sizeof(irqs[i].u));
	}
}

/* n interrupts into irqs (room for max); false where the count is larger. */
static bool get_irqs(struct snap_r *r, struct kvm_s390_irq *irqs, uint32_t n, uint32_t max)
{
	uint32_t i;

	if (n > max)
		return false;
	for (i = 0; i < n; i++) {
		irqs[i].type = snap_get_u64(r);
		snap_get_bytes(r, &irqs[i].u, sizeof(irqs[i].u));
	}
	return true;
}

int s390_vcpu_state_put(struct snap_w *w, unsigned id, const struct s390_vcpu_state *s)
{
	unsigned i;

	if (s->nirqs > S390_SNAP_IRQS_MAX)
		return -E2BIG;
	snap_begin(w, S390_SNAP_CPU, id);
	snap_put_u8(w, s->operating);
	snap_put_u64(w, s->facets);
	snap_put_u64(w, s->psw_mask);
	snap_put_u64(w, s->psw_addr);
	snap_put_u64(w, s->prefix);
	for (i = 0; i < 16; i++)
		snap_put_u64(w, s->gprs[i]);
	for (i = 0; i < 16; i++)
		snap_put_u32(w, s->acrs[i]);
	for (i = 0; i < 16; i++)
		snap_put_u64(w, s->crs[i]);
	snap_put_u64(w, s->todpr);
	snap_put_u64(w, s->cputm);
	snap_put_u64(w, s->ckc);
	snap_put_u64(w, s->pp);
	snap_put_u64(w, s->gbea);
	snap_put_u64(w, s->pft);
	snap_put_u64(w, s->pfs);
	snap_put_u64(w, s->pfc);
	snap_put_u32(w, s->fpc);
	if (s->facets & KVM_SYNC_VRS) {
		for (i = 0; i < 32; i++) {
			snap_put_u64(w, s->vrs[i][0]);
			snap_put_u64(w, s->vrs[i][1]);
		}
	} else {
		for (i = 0; i < 16; i++)
			snap_put_u64(w, s->fprs[i]);
	}
	if (s->facets & KVM_SYNC_RICCB)
		snap_put_bytes(w, s->riccb, sizeof(s->riccb));
	if (s->facets & KVM_SYNC_GSCB)
		for (i = 0; i < 4; i++)
			snap_put_u64(w, s->gscb[i]);
	if (s->facets & KVM_SYNC_BPBC)
		snap_put_u8(w, s->bpbc);
	if (s->facets & KVM_SYNC_ETOKEN) {
		snap_put_u64(w, s->etoken);
		snap_put_u64(w, s->etoken_ext);
	}
	if (s->facets & KVM_SYNC_DIAG318)
		snap_put_u64(w, s->diag318);
	put_irqs(w, s->irqs, s->nirqs);
	snap_end(w);
	return w->err;
}

static int sec_find(const struct snap_file *f, uint32_t tag, uint32_t instance, const char *who,
		    struct snap_r *r, char *err, size_t errlen)
{
	char name[5];

	if (!snap_find(f, tag, instance, r))
		return 0;
	snap_tag_name(tag, name);
	return err_set(err, errlen, -EINVAL, "snapshot: no %s section for %s: the file is "
		       "damaged or from another architecture", name, who);
}

int s390_vcpu_state_get(const struct snap_file *f, unsigned id, struct s390_vcpu_state *s,
			char *err, size_t errlen)
{
	char who[32];
	struct snap_r r;
	uint8_t operating;
	unsigned i;
	int ret;

	memset(s, 0, sizeof(*s));
	snprintf(who, sizeof(who), "vCPU %u", id);
	ret = sec_find(f, S390_SNAP_CPU, id, who, &r, err, errlen);
	if (ret)
		return ret;
	operating = snap_get_u8(&r);
	s->facets = snap_get_u64(&r);
	s->psw_mask = snap_get_u64(&r);
	s->psw_addr = snap_get_u64(&r);
	s->prefix = snap_get_u64(&r);
	for (i = 0; i < 16; i++)
		s->gprs[i] = snap_get_u64(&r);
	for (i = 0; i < 16; i++)
		s->acrs[i] = snap_get_u32(&r);
	for (i = 0; i < 16; i++)
		s->crs[i] = snap_get_u64(&r);
	s->todpr = snap_get_u64(&r);
	s->cputm = snap_get_u64(&r);
	s->ckc = snap_get_u64(&r);
	s->pp = snap_get_u64(&r);
	s->gbea = snap_get_u64(&r);
	s->pft = snap_get_u64(&r);
	s->pfs = snap_get_u64(&r);
	s->pfc = snap_get_u64(&r);
	s->fpc = snap_get_u32(&r);
	if (s->facets & KVM_SYNC_VRS) {
		for (i = 0; i < 32; i++) {
			s->vrs[i][0] = snap_get_u64(&r);
			s->vrs[i][1] = snap_get_u64(&r);
		}
	} else {
		for (i = 0; i < 16; i++)
			s->fprs[i] = snap_get_u64(&r);
	}
	if (s->facets & KVM_SYNC_RICCB)
		snap_get_bytes(&r, s->riccb, sizeof(s->riccb));
	if (s->facets & KVM_SYNC_GSCB)
		for (i = 0; i < 4; i++)
			s->gscb[i] = snap_get_u64(&r);
	if (s->facets & KVM_SYNC_BPBC)
		s->bpbc = snap_get_u8(&r);
	if (s->facets & KVM_SYNC_ETOKEN) {
		s->etoken = snap_get_u64(&r);
		s->etoken_ext = snap_get_u64(&r);
	}
	if (s->facets & KVM_SYNC_DIAG318)
		s->diag318 = snap_get_u64(&r);
	s->nirqs = snap_get_u32(&r);
	if (!r.err && !get_irqs(&r, s->irqs, s->nirqs, S390_SNAP_IRQS_MAX))
		return err_set(err, errlen, -EINVAL, "snapshot: vCPU %u has %u interrupts pending, "
			       "more than KVM holds (%u): the file is damaged", id, s->nirqs,
			       S390_SNAP_IRQS_MAX);
	if (!r.err && (operating > 1 || (s->facets & ~(uint64_t)S390_SNAP_FACETS) ||
		       s->bpbc > 1))
		return err_set(err, errlen, -EINVAL, "snapshot: vCPU %u: %s; the file is damaged",
			       id, operating > 1 || s->bpbc > 1 ? "a flag neither 0 nor 1" :
			       "register facets this mvm does not know");
	s->operating = operating;
	ret = snap_done(&r, err, errlen);
	if (ret)
		err_prefix(err, errlen, "snapshot: vCPU %u: ", id);
	return ret;
}

int s390_vm_state_put(struct snap_w *w, const struct s390_vm_state *s)
{
	unsigned i;

	if (s->nfloat > S390_SNAP_FLOAT_MAX || s->nregions > GMEM_MAX_REGIONS)
		return -E2BIG;
	snap_begin(w, S390_SNAP_VM, 0);
	snap_put_u8(w, s->tod_ext);
	snap_put_u8(w, s->tod.epoch_idx);
	snap_put_u64(w, s->tod.tod);
	snap_put_u8(w, s->has_model);
	snap_put_u64(w, s->model.cpuid);
	snap_put_u16(w, s->model.ibc);
	for (i = 0; i < ARRAY_SIZE(s->model.fac_list); i++)
		snap_put_u64(w, s->model.fac_list[i]);
	snap_put_u8(w, s->has_keys);
	snap_put_u32(w, s->has_keys ? s->nregions : 0);
	for (i = 0; s->has_keys && i < s->nregions; i++) {
		snap_put_u64(w, s->region[i].gfn);
		snap_put_u64(w, s->region[i].count);
		snap_put_bytes(w, s->region[i].keys, s->region[i].count);
	}
	put_irqs(w, s->floats, s->nfloat);
	snap_end(w);
	return w->err;
}

void s390_vm_state_free(struct s390_vm_state *s)
{
	unsigned i;

	for (i = 0; i < GMEM_MAX_REGIONS; i++) {
		free(s->region[i].keys);
		s->region[i].keys = NULL;
	}
	free(s->floats);
	s->floats = NULL;
}

int s390_vm_state_get(const struct snap_file *f, struct s390_vm_state *s, char *err,
		      size_t errlen)
{
	struct snap_r r;
	uint8_t ext, model, keys;
	uint32_t nregions, nfloat;
	unsigned i;
	int ret;

	memset(s, 0, sizeof(*s));
	ret = sec_find(f, S390_SNAP_VM, 0, "the VM", &r, err, errlen);
	if (ret)
		return ret;
	ext = snap_get_u8(&r);
	s->tod.epoch_idx = snap_get_u8(&r);
	s->tod.tod = snap_get_u64(&r);
	model = snap_get_u8(&r);
	s->model.cpuid = snap_get_u64(&r);
	s->model.ibc = snap_get_u16(&r);
	for (i = 0; i < ARRAY_SIZE(s->model.fac_list); i++)
		s->model.fac_list[i] = snap_get_u64(&r);
	keys = snap_get_u8(&r);
	nregions = snap_get_u32(&r);
	if (r.err)
		return snap_done(&r, err, errlen);
	if (ext > 1 || model > 1 || keys > 1 || nregions > GMEM_MAX_REGIONS ||
	    (nregions && !keys))
		return err_set(err, errlen, -EINVAL, "snapshot: the VM: %s; the file is damaged",
			       nregions > GMEM_MAX_REGIONS || (nregions && !keys) ?
			       "more storage-key regions than RAM has" : "a flag neither 0 nor 1");
	s->tod_ext = ext;
	s->has_model = model;
	s->has_keys = keys;
	s->nregions = nregions;
	for (i = 0; i < nregions; i++) {
		s->region[i].gfn = snap_get_u64(&r);
		s->region[i].count = snap_get_u64(&r);
		/* Bounded by what is left: a count the section cannot hold
		 * is refused before anything is allocated for it. */
		if (r.err || s->region[i].count > snap_left(&r))
			return err_set(err, errlen, -EINVAL, "snapshot: the VM: storage keys of "
				       "%llu pages, more than the file holds: the file is damaged",
				       (unsigned long long)s->region[i].count);
		s->region[i].keys = malloc(s->region[i].count ? s->region[i].count : 1);
		if (!s->region[i].keys)
			return err_set(err, errlen, -ENOMEM, "snapshot: out of memory for the "
				       "storage keys");
		snap_get_bytes(&r, s->region[i].keys, s->region[i].count);
	}
	nfloat = snap_get_u32(&r);
	if (r.err)
		return snap_done(&r, err, errlen);
	if (nfloat > S390_SNAP_FLOAT_MAX ||
	    (uint64_t)nfloat * (8 + sizeof(s->floats[0].u)) > snap_left(&r))
		return err_set(err, errlen, -EINVAL, "snapshot: the VM: %u floating interrupts, "
			       "more than %s: the file is damaged", nfloat,
			       nfloat > S390_SNAP_FLOAT_MAX ? "KVM holds" : "the file holds");
	s->floats = calloc(nfloat ? nfloat : 1, sizeof(*s->floats));
	if (!s->floats)
		return err_set(err, errlen, -ENOMEM, "snapshot: out of memory for the interrupts");
	get_irqs(&r, s->floats, nfloat, S390_SNAP_FLOAT_MAX);
	s->nfloat = nfloat;
	ret = snap_done(&r, err, errlen);
	if (ret)
		err_prefix(err, errlen, "snapshot: the VM: ");
	return ret;
}

static const struct {
	uint64_t bit;
	const char *name;
} facet_names[] = {
	{ KVM_SYNC_PFAULT, "pfault handshake" },
	{ KVM_SYNC_VRS, "vector registers" },
	{ KVM_SYNC_RICCB, "runtime instrumentation" },
	{ KVM_SYNC_GSCB, "guarded storage" },
	{ KVM_SYNC_BPBC, "branch prediction blocking" },
	{ KVM_SYNC_ETOKEN, "an etoken" },
	{ KVM_SYNC_DIAG318, "DIAG 318 information" },
	{ KVM_SYNC_ARCH0, "CPU timer and clock comparator" },
	{ KVM_SYNC_PREFIX, "a prefix register" },
	{ KVM_SYNC_CRS, "control registers" },
};

int s390_vcpu_facets_check(const struct s390_vcpu_state *s, uint64_t here, unsigned id,
			   char *err, size_t errlen)
{
	/* Floating-point registers go into vector registers too (FPR i
	 * is the left half of vector i), so FPRS needs either. */
	uint64_t need = s->facets & ~(uint64_t)(KVM_SYNC_FPRS | KVM_SYNC_GPRS | KVM_SYNC_ACRS);
	uint64_t missing = need & ~here;
	unsigned i;

	if (!(s->facets & KVM_SYNC_VRS) && !(here & (KVM_SYNC_FPRS | KVM_SYNC_VRS)))
		missing |= KVM_SYNC_FPRS;
	if (!missing)
		return 0;
	for (i = 0; i < ARRAY_SIZE(facet_names); i++)
		if (missing & facet_names[i].bit)
			break;
	return err_set(err, errlen, -ENOTSUP, "snapshot: vCPU %u's state holds %s, which this "
		       "host's KVM does not keep (its synchronized registers 0x%llx lack 0x%llx); "
		       "restore on a host with the same CPU features", id,
		       i < ARRAY_SIZE(facet_names) ? facet_names[i].name : "floating-point registers",
		       (unsigned long long)here, (unsigned long long)missing);
}

int s390_model_check(const struct kvm_s390_vm_cpu_processor *snap,
		     const struct kvm_s390_vm_cpu_processor *here, char *err, size_t errlen)
{
	unsigned i;

	/* STFLE's facility bits, numbered from the left of word 0. */
	for (i = 0; i < ARRAY_SIZE(snap->fac_list); i++) {
		uint64_t lack = snap->fac_list[i] & ~here->fac_list[i];

		if (lack)
			return err_set(err, errlen, -ENOTSUP, "snapshot: the guest saw facility %u, "
				       "which this host's CPU model does not offer; restore on a host "
				       "with the same CPU", i * 64 + (unsigned)__builtin_clzll(lack));
	}
	return 0;
}

/* ---- KVM ------------------------------------------------------------------ */

static int vm_call(int fd, unsigned long req, void *arg, const char *what, char *err,
		   size_t errlen)
{
	int e;

	if (ioctl(fd, req, arg) >= 0)
		return 0;
	e = errno;
	return err_set(err, errlen, -e, "snapshot: %s: %s", what, strerror(e));
}

static int model_get(struct vm *vm, struct kvm_s390_vm_cpu_processor *p)
{
	struct kvm_device_attr a = {
		.group = KVM_S390_VM_CPU_MODEL, .attr = KVM_S390_VM_CPU_PROCESSOR,
		.addr = (uint64_t)(uintptr_t)p,
	};

	memset(p, 0, sizeof(*p));
	return ioctl(vm->vm_fd, KVM_GET_DEVICE_ATTR, &a) < 0 ? -errno : 0;
}

/* Storage keys, one byte a 4 KiB page, of every RAM region; none where
 * the guest never used them (KVM_S390_GET_SKEYS_NONE). */
static int keys_read(struct vm *vm, struct s390_vm_state *s, char *err, size_t errlen)
{
	unsigned i;

	for (i = 0; i < vm->mem.nr; i++) {
		const struct gmem_region *g = &vm->mem.r[i];
		uint64_t n = g->size >> PAGE_SHIFT_4K, done = 0;

		s->region[i].gfn = g->gpa >> PAGE_SHIFT_4K;
		s->region[i].count = n;
		s->region[i].keys = malloc(n ? n : 1);
		if (!s->region[i].keys)
			return err_set(err, errlen, -ENOMEM, "snapshot: out of memory for the "
				       "storage keys");
		s->nregions = i + 1;
		while (done < n) {
			struct kvm_s390_skeys k = {
				.start_gfn = s->region[i].gfn + done,
				.count = MIN(n - done, (uint64_t)KVM_S390_SKEYS_MAX),
				.skeydata_addr = (uint64_t)(uintptr_t)(s->region[i].keys + done),
			};
			int r = ioctl(vm->vm_fd, KVM_S390_GET_SKEYS, &k);

			if (r == KVM_S390_GET_SKEYS_NONE) {
				s->has_keys = false;
				return 0;
			}
			if (r < 0)
				return err_set(err, errlen, -errno, "snapshot: KVM_S390_GET_SKEYS: %s",
					       strerror(errno));
			done += k.count;
		}
	}
	s->has_keys = true;
	return 0;
}

/* An adapter (thin) interrupt, KVM's image of it: the AI bit in the type,
 * the ISC in the interruption-identification word. */
#define S390_IRQ_AI (1u << 26)

static bool irq_is_adapter(const struct kvm_s390_irq *irq)
{
	return irq->type <= KVM_S390_INT_IO_MAX && (irq->type & S390_IRQ_AI);
}

static int floats_enqueue(int flic_fd, const struct kvm_s390_irq *irqs, uint32_t n)
{
	struct kvm_device_attr a = {
		.group = KVM_DEV_FLIC_ENQUEUE,
		.attr = (uint64_t)n * sizeof(*irqs),
		.addr = (uint64_t)(uintptr_t)irqs,
	};

	return !n || ioctl(flic_fd, KVM_SET_DEVICE_ATTR, &a) == 0 ? 0 : -errno;
}

/* Reading the floating interrupts takes the adapter interrupts KVM holds
 * in the GISA out of it (Linux's get_all_floating_irqs tests and clears
 * each ISC's pending bit): they go back, or the VM that goes on after the
 * snapshot would never be told of them again (the guest's summary
 * indicator stays set, and no new one is raised while it is). Where KVM
 * has no GISA they never left, and the copy is one spurious adapter
 * interrupt per ISC, which a guest takes as finding nothing new. */
static int floats_put_back_adapters(struct s390_vm *sv, const struct kvm_s390_irq *irqs,
				    uint32_t n)
{
	struct kvm_s390_irq ai[8];
	uint32_t i, k = 0;

	for (i = 0; i < n && k < ARRAY_SIZE(ai); i++)
		if (irq_is_adapter(&irqs[i]))
			ai[k++] = irqs[i];
	return floats_enqueue(sv->flic_fd, ai, k);
}

/* One adapter interrupt for every ISC: after a read that failed, what it
 * took out of the GISA is not known (see above). */
static int floats_raise_adapters(struct s390_vm *sv)
{
	struct kvm_s390_irq ai[8];
	unsigned isc;

	memset(ai, 0, sizeof(ai));
	for (isc = 0; isc < ARRAY_SIZE(ai); isc++) {
		ai[isc].type = KVM_S390_INT_IO(1, 0, 0, 0);
		ai[isc].u.io.io_int_word = 0x80000000u | (uint32_t)isc << 27;
	}
	return floats_enqueue(sv->flic_fd, ai, ARRAY_SIZE(ai));
}

/* The FLIC's floating interrupts: the buffer grows until they fit. */
static int floats_read(struct s390_vm *sv, struct s390_vm_state *s, char *err, size_t errlen)
{
	uint32_t room = 256;
	int ret;

	if (sv->flic_fd < 0)
		return err_set(err, errlen, -ENODEV, "snapshot: KVM gave the VM no floating-"
			       "interrupt controller (FLIC), whose interrupts a snapshot must hold");
	for (;;) {
		struct kvm_device_attr a = { .group = KVM_DEV_FLIC_GET_ALL_IRQS };
		int n, e;

		free(s->floats);
		s->floats = calloc(room, sizeof(*s->floats));
		if (!s->floats)
			return err_set(err, errlen, -ENOMEM, "snapshot: out of memory for the "
				       "interrupts");
		a.attr = (uint64_t)room * sizeof(*s->floats);
		a.addr = (uint64_t)(uintptr_t)s->floats;
		n = ioctl(sv->flic_fd, KVM_GET_DEVICE_ATTR, &a);
		e = errno;
		if (n >= 0) {
			s->nfloat = (uint32_t)MIN((unsigned)n, room);
			ret = floats_put_back_adapters(sv, s->floats, s->nfloat);
			return ret ? err_set(err, errlen, ret, "snapshot: KVM_DEV_FLIC_ENQUEUE (the "
					     "adapter interrupts read): %s", strerror(-ret)) : 0;
		}
		ret = floats_raise_adapters(sv);
		if (ret)
			return err_set(err, errlen, ret, "snapshot: KVM_DEV_FLIC_ENQUEUE (adapter "
				       "interrupts after a failed read): %s", strerror(-ret));
		if (e != ENOMEM || room >= S390_SNAP_FLOAT_MAX)
			return err_set(err, errlen, -e, "snapshot: KVM_DEV_FLIC_GET_ALL_IRQS: %s",
				       strerror(e));
		room = MIN(room * 8, S390_SNAP_FLOAT_MAX);
	}
}

int arch_vm_save(struct vm *vm, struct snap_w *w, char *err, size_t errlen)
{
	struct s390_vm *sv = s390_vm(vm);
	struct s390_vm_state s;
	int ret;

	memset(&s, 0, sizeof(s));
	/* The channel subsystem first: an attention it still holds becomes
	 * an I/O interrupt, which the floating ones below then carry. */
	snap_begin(w, S390_SNAP_CSS, 0);
	css_save(&sv->css, w);
	snap_end(w);
	/* The clock as the pause stopped it (arch_vm_clock_save). */
	s.tod_ext = sv->tod_ext;
	s.tod = sv->tod;
	s.has_model = model_get(vm, &s.model) == 0;
	ret = keys_read(vm, &s, err, errlen);
	if (!ret)
		ret = floats_read(sv, &s, err, errlen);
	if (!ret) {
		ret = s390_vm_state_put(w, &s);
		if (ret)
			err_set(err, errlen, ret, "snapshot: the VM: %s",
				ret == -ENOMEM ? "out of memory" : strerror(-ret));
	}
	s390_vm_state_free(&s);
	return ret;
}

static int keys_write(struct vm *vm, const struct s390_vm_state *s, char *err, size_t errlen)
{
	unsigned i;

	for (i = 0; s->has_keys && i < s->nregions; i++) {
		uint64_t done = 0;

		while (done < s->region[i].count) {
			struct kvm_s390_skeys k = {
				.start_gfn = s->region[i].gfn + done,
				.count = MIN(s->region[i].count - done, (uint64_t)KVM_S390_SKEYS_MAX),
				.skeydata_addr = (uint64_t)(uintptr_t)(s->region[i].keys + done),
			};
			int ret = vm_call(vm->vm_fd, KVM_S390_SET_SKEYS, &k, "KVM_S390_SET_SKEYS",
					  err, errlen);

			if (ret)
				return ret;
			done += k.count;
		}
	}
	return 0;
}

int arch_vm_load(struct vm *vm, const struct snap_file *f, char *err, size_t errlen)
{
	struct s390_vm *sv = s390_vm(vm);
	struct kvm_s390_vm_cpu_processor here;
	struct s390_vm_state s;
	struct snap_r r;
	unsigned i;
	int ret;

	/* Check first, set after. */
	ret = s390_vm_state_get(f, &s, err, errlen);
	if (ret)
		goto free_state;
	for (i = 0; i < s.nregions; i++) {
		const struct gmem_region *g = &vm->mem.r[i];

		if (i >= vm->mem.nr || s.region[i].gfn != g->gpa >> PAGE_SHIFT_4K ||
		    s.region[i].count != g->size >> PAGE_SHIFT_4K) {
			ret = err_set(err, errlen, -EINVAL, "snapshot: storage keys for pages "
				      "0x%llx+%llu, which are not this VM's RAM: the file is damaged",
				      (unsigned long long)s.region[i].gfn,
				      (unsigned long long)s.region[i].count);
			goto free_state;
		}
	}
	if (s.has_model) {
		ret = model_get(vm, &here);
		if (ret) {
			ret = err_set(err, errlen, -ENOTSUP, "snapshot: the snapshot holds the guest's "
				      "CPU model, this host's KVM does not give its own (%s)",
				      strerror(-ret));
			goto free_state;
		}
		ret = s390_model_check(&s.model, &here, err, errlen);
		if (ret)
			goto free_state;
	}
	if (sv->flic_fd < 0) {
		ret = err_set(err, errlen, -ENODEV, "snapshot: KVM gave this VM no floating-"
			      "interrupt controller (FLIC) to put the snapshot's interrupts in");
		goto free_state;
	}
	if (sec_find(f, S390_SNAP_CSS, 0, "the channel subsystem", &r, err, errlen)) {
		ret = -EINVAL;
		goto free_state;
	}
	ret = css_load(&sv->css, &r, err, errlen);
	if (!ret)
		ret = snap_done(&r, err, errlen);
	if (ret)
		goto free_state;

	/* The TOD clock where the snapshot stopped it, kept as
	 * arch_vm_clock_save would have, for arch_vm_clock_restore. */
	sv->tod = s.tod;
	sv->tod_ext = s.tod_ext;
	ret = arch_vm_clock_restore(vm);
	if (ret) {
		ret = err_set(err, errlen, ret, "snapshot: setting the TOD clock: %s",
			      strerror(-ret));
		goto free_state;
	}
	ret = keys_write(vm, &s, err, errlen);
	/* KVM checks each interrupt as an injection of it. */
	if (!ret) {
		ret = floats_enqueue(sv->flic_fd, s.floats, s.nfloat);
		if (ret)
			err_set(err, errlen, ret, "snapshot: KVM_DEV_FLIC_ENQUEUE: %s; the snapshot "
				"holds interrupts this host's KVM does not take", strerror(-ret));
	}
free_state:
	s390_vm_state_free(&s);
	return ret;
}

/* What KVM left in kvm_run at the vCPU's last exit (the VM is paused:
 * nothing runs it meanwhile), and its pending interrupts. */
static int vcpu_read(struct vcpu *v, struct s390_vcpu_state *s, char *err, size_t errlen)
{
	const struct kvm_run *run = v->run;
	const struct kvm_sync_regs *g = &run->s.regs;
	struct kvm_s390_irq_state is = {
		.buf = (uint64_t)(uintptr_t)s->irqs, .len = sizeof(s->irqs),
	};
	int n;

	memset(s, 0, sizeof(*s));
	if (!s390_vm(v->vm)->irq_state)
		return err_set(err, errlen, -ENOTSUP, "snapshot: this host's KVM cannot give a "
			       "vCPU's pending interrupts (no KVM_CAP_S390_IRQ_STATE)");
	s->operating = __atomic_load_n(&s390_vm(v->vm)->cpu[v->id].operating, __ATOMIC_ACQUIRE);
	s->facets = run->kvm_valid_regs & S390_SNAP_FACETS;
	/* Both forms of the floating-point registers are KVM's view of one
	 * state: the vector form where it keeps it. */
	if (s->facets & KVM_SYNC_VRS)
		s->facets &= ~(uint64_t)KVM_SYNC_FPRS;
	s->psw_mask = run->psw_mask;
	s->psw_addr = run->psw_addr;
	s->prefix = g->prefix;
	memcpy(s->gprs, g->gprs, sizeof(s->gprs));
	memcpy(s->acrs, g->acrs, sizeof(s->acrs));
	memcpy(s->crs, g->crs, sizeof(s->crs));
	s->todpr = g->todpr;
	s->cputm = g->cputm;
	s->ckc = g->ckc;
	s->pp = g->pp;
	s->gbea = g->gbea;
	s->pft = g->pft;
	s->pfs = g->pfs;
	s->pfc = g->pfc;
	s->fpc = g->fpc;
	if (s->facets & KVM_SYNC_VRS)
		memcpy(s->vrs, g->vrs, sizeof(s->vrs));
	else
		memcpy(s->fprs, g->fprs, sizeof(s->fprs));
	memcpy(s->riccb, g->riccb, sizeof(s->riccb));
	memcpy(s->gscb, g->gscb, sizeof(s->gscb));
	s->bpbc = g->bpbc;
	s->etoken = g->etoken;
	s->etoken_ext = g->etoken_extension;
	s->diag318 = g->diag318;
	/* Bytes of interrupts KVM stored. */
	n = ioctl(v->fd, KVM_S390_GET_IRQ_STATE, &is);
	if (n < 0)
		return err_set(err, errlen, -errno, "snapshot: vCPU %u: KVM_S390_GET_IRQ_STATE: %s",
			       v->id, strerror(errno));
	s->nirqs = (uint32_t)((unsigned)n / sizeof(s->irqs[0]));
	return 0;
}

int arch_vcpu_save(struct vcpu *v, struct snap_w *w, char *err, size_t errlen)
{
	struct s390_vcpu_state *s = malloc(sizeof(*s));
	int ret;

	if (!s)
		return err_set(err, errlen, -ENOMEM, "snapshot: out of memory");
	ret = vcpu_read(v, s, err, errlen);
	if (!ret) {
		ret = s390_vcpu_state_put(w, v->id, s);
		if (ret)
			err_set(err, errlen, ret, "snapshot: vCPU %u: %s", v->id,
				ret == -ENOMEM ? "out of memory" : strerror(-ret));
	}
	free(s);
	return ret;
}

/* Into kvm_run, marked for KVM to take at the first KVM_RUN (the PSW,
 * general, access and floating-point or vector registers it takes every
 * time), then the pending interrupts and mvm's run state. */
static int vcpu_write(struct vcpu *v, const struct s390_vcpu_state *s, char *err,
		      size_t errlen)
{
	struct s390_vm *sv = s390_vm(v->vm);
	struct kvm_run *run = v->run;
	struct kvm_sync_regs *g = &run->s.regs;
	uint64_t dirty = KVM_SYNC_PREFIX | KVM_SYNC_CRS | KVM_SYNC_ARCH0;
	unsigned i;

	if (s->nirqs) {
		struct kvm_s390_irq_state is = {
			.buf = (uint64_t)(uintptr_t)s->irqs,
			.len = s->nirqs * (uint32_t)sizeof(s->irqs[0]),
		};
		int ret = vm_call(v->fd, KVM_S390_SET_IRQ_STATE, &is, "KVM_S390_SET_IRQ_STATE",
				  err, errlen);

		if (ret)
			return ret;
	}
	run->psw_mask = s->psw_mask;
	run->psw_addr = s->psw_addr;
	g->prefix = s->prefix;
	memcpy(g->gprs, s->gprs, sizeof(g->gprs));
	memcpy(g->acrs, s->acrs, sizeof(g->acrs));
	memcpy(g->crs, s->crs, sizeof(g->crs));
	g->todpr = s->todpr;
	g->cputm = s->cputm;
	g->ckc = s->ckc;
	g->pp = s->pp;
	g->gbea = s->gbea;
	g->fpc = s->fpc;
	if (s->facets & KVM_SYNC_VRS) {
		memcpy(g->vrs, s->vrs, sizeof(g->vrs));
	} else if (run->kvm_valid_regs & KVM_SYNC_VRS) {
		memset(g->vrs, 0, sizeof(g->vrs));
		for (i = 0; i < 16; i++)
			g->vrs[i][0] = s->fprs[i];
	} else {
		memcpy(g->fprs, s->fprs, sizeof(g->fprs));
	}
	if (s->facets & KVM_SYNC_PFAULT) {
		g->pft = s->pft;
		g->pfs = s->pfs;
		g->pfc = s->pfc;
		dirty |= KVM_SYNC_PFAULT;
	}
	if (s->facets & KVM_SYNC_RICCB) {
		memcpy(g->riccb, s->riccb, sizeof(g->riccb));
		dirty |= KVM_SYNC_RICCB;
	}
	if (s->facets & KVM_SYNC_GSCB) {
		memcpy(g->gscb, s->gscb, sizeof(g->gscb));
		dirty |= KVM_SYNC_GSCB;
	}
	if (s->facets & KVM_SYNC_BPBC) {
		g->bpbc = s->bpbc;
		dirty |= KVM_SYNC_BPBC;
	}
	if (s->facets & KVM_SYNC_ETOKEN) {
		g->etoken = s->etoken;
		g->etoken_extension = s->etoken_ext;
		dirty |= KVM_SYNC_ETOKEN;
	}
	if (s->facets & KVM_SYNC_DIAG318) {
		g->diag318 = s->diag318;
		dirty |= KVM_SYNC_DIAG318;
	}
	run->kvm_dirty_regs |= dirty;
	if (s->operating) {
		__atomic_store_n(&sv->cpu[v->id].operating, true, __ATOMIC_RELEASE);
		__atomic_add_fetch(&sv->operating, 1, __ATOMIC_ACQ_REL);
	}
	return 0;
}

int arch_vcpu_load(struct vcpu *v, const struct snap_file *f, char *err, size_t errlen)
{
	struct s390_vcpu_state *s = malloc(sizeof(*s));
	int ret;

	if (!s)
		return err_set(err, errlen, -ENOMEM, "snapshot: out of memory");
	ret = s390_vcpu_state_get(f, v->id, s, err, errlen);
	if (!ret)
		ret = s390_vcpu_facets_check(s, v->run->kvm_valid_regs, v->id, err, errlen);
	if (!ret && s->nirqs && !s390_vm(v->vm)->irq_state)
		ret = err_set(err, errlen, -ENOTSUP, "snapshot: vCPU %u has interrupts pending, "
			      "which this host's KVM cannot take (no KVM_CAP_S390_IRQ_STATE)", v->id);
	if (!ret)
		ret = vcpu_write(v, s, err, errlen);
	free(s);
	return ret;
}
