/* s390x snapshots without KVM (arch/s390/snap.c's pure half): a vCPU's
 * and the VM's state written into a snapshot file and read back, what a
 * host must have to take them (the register facets its KVM keeps, the
 * facilities its CPU model offers), and damaged sections refused with a
 * one-line message. Runs under qemu-s390x-static on x86. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arch/s390/s390.h"
#include "tests/unit/check.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"

static char msg[512];

/* w's sections as a checked file (free f->buf's image with free()). */
static void open_image(struct snap_w *w, struct snap_file *f, uint8_t **img)
{
	size_t len;

	CHECK_EQ(w->err, 0);
	CHECK_EQ(snap_w_image(w, img, &len), 0);
	CHECK_EQ(snap_open(f, *img, len, msg, sizeof(msg)), 0);
}

static struct s390_vcpu_state *vcpu_sample(uint64_t facets)
{
	struct s390_vcpu_state *s = calloc(1, sizeof(*s));
	unsigned i;

	CHECK(s);
	s->operating = true;
	s->facets = facets;
	s->psw_mask = 0x0704c00180000000ull;
	s->psw_addr = 0x1c1a24;
	s->prefix = 0xc70000;
	for (i = 0; i < 16; i++) {
		s->gprs[i] = 0x1111111100000000ull + i;
		s->acrs[i] = 0xa0 + i;
		s->crs[i] = 0xc000000000000000ull >> i;
		s->fprs[i] = 0xf0f0f0f000000000ull | i;
	}
	for (i = 0; i < 32; i++) {
		s->vrs[i][0] = 0x5600000000000000ull | i;
		s->vrs[i][1] = i * 3;
	}
	s->todpr = 1;
	s->cputm = 0x7fffffffffff0000ull;
	s->ckc = 0xd000000000000000ull;
	s->pp = 4;
	s->gbea = 5;
	s->pft = 6;
	s->pfs = 7;
	s->pfc = 8;
	s->fpc = 0x00080000;
	memset(s->riccb, 0x3c, sizeof(s->riccb));
	s->gscb[3] = 9;
	s->bpbc = 1;
	s->etoken = 10;
	s->etoken_ext = 11;
	s->diag318 = 12;
	s->nirqs = 2;
	s->irqs[0].type = KVM_S390_INT_CLOCK_COMP;
	s->irqs[1].type = KVM_S390_INT_EMERGENCY;
	s->irqs[1].u.emerg.code = 3;
	return s;
}

TEST(a_vcpu_comes_back_field_by_field_with_its_pending_interrupts)
{
	const uint64_t forms[] = {
		KVM_SYNC_PREFIX | KVM_SYNC_GPRS | KVM_SYNC_ACRS | KVM_SYNC_CRS | KVM_SYNC_ARCH0 |
		KVM_SYNC_PFAULT | KVM_SYNC_FPRS,
		S390_SNAP_FACETS & ~(uint64_t)KVM_SYNC_FPRS,
	};

	for (unsigned k = 0; k < ARRAY_SIZE(forms); k++) {
		struct s390_vcpu_state *s = vcpu_sample(forms[k]), *g = malloc(sizeof(*g));
		struct snap_file f;
		struct snap_w w;
		uint8_t *img;

		CHECK(g);
		snap_w_init(&w);
		CHECK_EQ(s390_vcpu_state_put(&w, 3, s), 0);
		open_image(&w, &f, &img);
		CHECK_EQ(s390_vcpu_state_get(&f, 3, g, msg, sizeof(msg)), 0);
		CHECK_EQ(g->operating, true);
		CHECK_EQ(g->facets, s->facets);
		CHECK_EQ(g->psw_mask, s->psw_mask);
		CHECK_EQ(g->psw_addr, s->psw_addr);
		CHECK_EQ(g->prefix, s->prefix);
		CHECK(!memcmp(g->gprs, s->gprs, sizeof(g->gprs)));
		CHECK(!memcmp(g->acrs, s->acrs, sizeof(g->acrs)));
		CHECK(!memcmp(g->crs, s->crs, sizeof(g->crs)));
		CHECK_EQ(g->cputm, s->cputm);
		CHECK_EQ(g->ckc, s->ckc);
		CHECK_EQ(g->todpr, 1);
		CHECK_EQ(g->pp, 4);
		CHECK_EQ(g->gbea, 5);
		CHECK_EQ(g->pft, 6);
		CHECK_EQ(g->pfs, 7);
		CHECK_EQ(g->pfc, 8);
		CHECK_EQ(g->fpc, s->fpc);
		if (k == 0) {
			/* The floating-point form only; nothing of the rest. */
			CHECK(!memcmp(g->fprs, s->fprs, sizeof(g->fprs)));
			CHECK_EQ(g->vrs[5][0], 0);
			CHECK_EQ(g->riccb[0], 0);
			CHECK_EQ(g->gscb[3], 0);
			CHECK_EQ(g->bpbc, 0);
			CHECK_EQ(g->etoken, 0);
			CHECK_EQ(g->diag318, 0);
		} else {
			CHECK(!memcmp(g->vrs, s->vrs, sizeof(g->vrs)));
			CHECK(!memcmp(g->riccb, s->riccb, sizeof(g->riccb)));
			CHECK_EQ(g->gscb[3], 9);
			CHECK_EQ(g->bpbc, 1);
			CHECK_EQ(g->etoken, 10);
			CHECK_EQ(g->etoken_ext, 11);
			CHECK_EQ(g->diag318, 12);
		}
		CHECK_EQ(g->nirqs, 2);
		CHECK_EQ(g->irqs[0].type, KVM_S390_INT_CLOCK_COMP);
		CHECK_EQ(g->irqs[1].type, KVM_S390_INT_EMERGENCY);
		CHECK_EQ(g->irqs[1].u.emerg.code, 3);
		/* Another vCPU's section is not this one's. */
		CHECK_EQ(s390_vcpu_state_get(&f, 2, g, msg, sizeof(msg)), -EINVAL);
		CHECK(strstr(msg, "vCPU 2"));
		free(img);
		snap_w_free(&w);
		free(s);
		free(g);
	}
}

TEST(a_damaged_vcpu_section_is_refused_with_what_is_wrong)
{
	struct s390_vcpu_state *s = vcpu_sample(KVM_SYNC_PREFIX | KVM_SYNC_FPRS);
	struct s390_vcpu_state *g = malloc(sizeof(*g));
	struct snap_file f;
	struct snap_w w;
	uint8_t *img;

	CHECK(g);
	/* Facets this mvm does not know. */
	s->facets |= 1ull << 40;
	snap_w_init(&w);
	CHECK_EQ(s390_vcpu_state_put(&w, 0, s), 0);
	open_image(&w, &f, &img);
	CHECK_EQ(s390_vcpu_state_get(&f, 0, g, msg, sizeof(msg)), -EINVAL);
	CHECK(strstr(msg, "facets this mvm does not know"));
	free(img);
	snap_w_free(&w);
	/* More pending interrupts than KVM holds: refused by the writer and
	 * by the reader (a section written by hand). */
	s->facets = KVM_SYNC_PREFIX | KVM_SYNC_FPRS;
	s->nirqs = S390_SNAP_IRQS_MAX + 1;
	snap_w_init(&w);
	CHECK_EQ(s390_vcpu_state_put(&w, 0, s), -E2BIG);
	snap_w_free(&w);
	snap_w_init(&w);
	snap_begin(&w, S390_SNAP_CPU, 0);
	snap_put_u8(&w, 1);                             /* operating */
	snap_put_u64(&w, KVM_SYNC_FPRS);                /* facets */
	for (unsigned i = 0; i < 2 + 1 + 16; i++)       /* PSW, prefix, GPRs */
		snap_put_u64(&w, 0);
	for (unsigned i = 0; i < 16; i++)               /* access registers */
		snap_put_u32(&w, 0);
	for (unsigned i = 0; i < 16 + 8; i++)           /* CRs, ARCH0, PFAULT */
		snap_put_u64(&w, 0);
	snap_put_u32(&w, 0);                            /* FPC */
	for (unsigned i = 0; i < 16; i++)               /* FPRs */
		snap_put_u64(&w, 0);
	snap_put_u32(&w, S390_SNAP_IRQS_MAX + 1);
	snap_end(&w);
	open_image(&w, &f, &img);
	CHECK_EQ(s390_vcpu_state_get(&f, 0, g, msg, sizeof(msg)), -EINVAL);
	CHECK(strstr(msg, "interrupts pending"));
	free(img);
	snap_w_free(&w);
	free(s);
	free(g);
}

TEST(a_host_without_a_facet_the_vcpu_had_is_refused_naming_it)
{
	const uint64_t base = KVM_SYNC_PREFIX | KVM_SYNC_GPRS | KVM_SYNC_ACRS | KVM_SYNC_CRS |
			      KVM_SYNC_ARCH0;
	struct s390_vcpu_state *s = vcpu_sample(base | KVM_SYNC_VRS);

	CHECK_EQ(s390_vcpu_facets_check(s, base | KVM_SYNC_VRS, 1, msg, sizeof(msg)), 0);
	CHECK_EQ(s390_vcpu_facets_check(s, base | KVM_SYNC_FPRS, 1, msg, sizeof(msg)), -ENOTSUP);
	CHECK(strstr(msg, "vCPU 1's state holds vector registers"));
	/* Floating-point registers go into either form. */
	s->facets = base | KVM_SYNC_FPRS;
	CHECK_EQ(s390_vcpu_facets_check(s, base | KVM_SYNC_VRS, 1, msg, sizeof(msg)), 0);
	CHECK_EQ(s390_vcpu_facets_check(s, base | KVM_SYNC_FPRS, 1, msg, sizeof(msg)), 0);
	s->facets = base | KVM_SYNC_FPRS | KVM_SYNC_GSCB;
	CHECK_EQ(s390_vcpu_facets_check(s, base | KVM_SYNC_FPRS, 0, msg, sizeof(msg)), -ENOTSUP);
	CHECK(strstr(msg, "guarded storage"));
	free(s);
}

TEST(a_host_without_a_facility_the_guest_saw_is_refused_naming_it)
{
	struct kvm_s390_vm_cpu_processor snap = { 0 }, here = { 0 };

	snap.fac_list[0] = here.fac_list[0] = 0xfbfffffbfcfff840ull;
	snap.fac_list[2] = 1ull << (63 - (129 - 128));  /* facility 129: vector */
	CHECK_EQ(s390_model_check(&snap, &here, msg, sizeof(msg)), -ENOTSUP);
	CHECK(strstr(msg, "facility 129,"));
	here.fac_list[2] = ~0ull;
	CHECK_EQ(s390_model_check(&snap, &here, msg, sizeof(msg)), 0);
	/* More than the guest saw is fine. */
	here.fac_list[5] = 1;
	CHECK_EQ(s390_model_check(&snap, &here, msg, sizeof(msg)), 0);
}

TEST(the_vm_comes_back_with_its_clock_model_keys_and_floating_interrupts)
{
	struct s390_vm_state s = { 0 }, g;
	struct snap_file f;
	struct snap_w w;
	uint8_t *img, keys[16];

	s.tod_ext = true;
	s.tod.epoch_idx = 1;
	s.tod.tod = 0xdeadbeefcafe0000ull;
	s.has_model = true;
	s.model.cpuid = 0xff00000000000000ull;
	s.model.ibc = 0x123;
	s.model.fac_list[255] = 77;
	s.has_keys = true;
	s.nregions = 1;
	s.region[0].gfn = 0;
	s.region[0].count = sizeof(keys);
	for (unsigned i = 0; i < sizeof(keys); i++)
		keys[i] = (uint8_t)(i << 4);
	s.region[0].keys = keys;
	s.nfloat = 1;
	s.floats = calloc(1, sizeof(*s.floats));
	CHECK(s.floats);
	s.floats[0].type = KVM_S390_INT_IO(0, 0, 0, 2);
	s.floats[0].u.io.subchannel_nr = 2;
	s.floats[0].u.io.io_int_word = 0x18000000;
	snap_w_init(&w);
	CHECK_EQ(s390_vm_state_put(&w, &s), 0);
	open_image(&w, &f, &img);
	CHECK_EQ(s390_vm_state_get(&f, &g, msg, sizeof(msg)), 0);
	CHECK(g.tod_ext);
	CHECK_EQ(g.tod.epoch_idx, 1);
	CHECK_EQ(g.tod.tod, s.tod.tod);
	CHECK(g.has_model);
	CHECK_EQ(g.model.cpuid, s.model.cpuid);
	CHECK_EQ(g.model.ibc, 0x123);
	CHECK_EQ(g.model.fac_list[255], 77);
	CHECK(g.has_keys);
	CHECK_EQ(g.nregions, 1);
	CHECK_EQ(g.region[0].count, sizeof(keys));
	CHECK(!memcmp(g.region[0].keys, keys, sizeof(keys)));
	CHECK_EQ(g.nfloat, 1);
	CHECK_EQ(g.floats[0].type, s.floats[0].type);
	CHECK_EQ(g.floats[0].u.io.subchannel_nr, 2);
	CHECK_EQ(g.floats[0].u.io.io_int_word, 0x18000000);
	s390_vm_state_free(&g);
	free(img);
	snap_w_free(&w);
	free(s.floats);
}

/* A VM section by hand, up to the storage keys: their region count and
 * one region of `count` keys with `have` of them written; then `nfloat`. */
static int vm_get_raw(uint32_t nregions, uint64_t count, uint64_t have, uint32_t nfloat)
{
	struct s390_vm_state g;
	struct snap_file f;
	struct snap_w w;
	uint8_t *img;
	int ret;

	snap_w_init(&w);
	snap_begin(&w, S390_SNAP_VM, 0);
	snap_put_u8(&w, 0);
	snap_put_u8(&w, 0);
	snap_put_u64(&w, 0);
	snap_put_u8(&w, 0);
	snap_put_u64(&w, 0);
	snap_put_u16(&w, 0);
	for (unsigned i = 0; i < 256; i++)
		snap_put_u64(&w, 0);
	snap_put_u8(&w, nregions != 0);
	snap_put_u32(&w, nregions);
	if (nregions) {
		snap_put_u64(&w, 0);
		snap_put_u64(&w, count);
		for (uint64_t i = 0; i < have; i++)
			snap_put_u8(&w, 0x10);
	}
	snap_put_u32(&w, nfloat);
	snap_end(&w);
	open_image(&w, &f, &img);
	ret = s390_vm_state_get(&f, &g, msg, sizeof(msg));
	s390_vm_state_free(&g);
	free(img);
	snap_w_free(&w);
	return ret;
}

TEST(a_damaged_vm_section_is_refused_before_anything_is_allocated_for_it)
{
	CHECK_EQ(vm_get_raw(0, 0, 0, 0), 0);
	CHECK_EQ(vm_get_raw(1, 8, 8, 0), 0);
	/* A count the section does not hold (no 2^60-byte allocation). */
	CHECK_EQ(vm_get_raw(1, 1ull << 60, 8, 0), -EINVAL);
	CHECK(strstr(msg, "more than the file holds"));
	CHECK_EQ(vm_get_raw(GMEM_MAX_REGIONS + 1, 0, 0, 0), -EINVAL);
	CHECK_EQ(vm_get_raw(0, 0, 0, 5), -EINVAL);
	CHECK(strstr(msg, "5 floating interrupts"));
	CHECK_EQ(vm_get_raw(0, 0, 0, S390_SNAP_FLOAT_MAX + 1), -EINVAL);
	CHECK(strstr(msg, "KVM holds"));
}
