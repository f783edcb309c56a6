/* x86 snapshot state (arch/x86/snap.c): the vCPU and VM state through the
 * snapshot container and back, the refusals of a damaged file, the CPUID
 * check a restore makes against this host, and the MSR fix-ups. No KVM. */
#include "tests/unit/check.h"
#include "arch/x86/x86.h"
#include "vmm/base/snap.h"
#include "vmm/base/util.h"

#include <errno.h>

#define VCPU 3  /* an id other than 0, so instances are told apart */

static const uint32_t vcpu_tags[] = {
	X86_SNAP_CPU, X86_SNAP_MPSTATE, X86_SNAP_REGS, X86_SNAP_SREGS, X86_SNAP_XSAVE,
	X86_SNAP_XCRS, X86_SNAP_DEBUG, X86_SNAP_LAPIC, X86_SNAP_MSRS, X86_SNAP_EVENTS,
};

/* Bytes that differ from field to field (xorshift), so a field written
 * into another's place, or not at all, shows. */
static void fill(void *p, size_t n, uint32_t *seed)
{
	uint8_t *b = p;
	size_t i;

	for (i = 0; i < n; i++) {
		*seed ^= *seed << 13;
		*seed ^= *seed >> 17;
		*seed ^= *seed << 5;
		b[i] = (uint8_t)(*seed | 1);
	}
}

/* A vCPU state with every saved field set and every padding or reserved
 * field (which the format leaves out) zero. */
static void vcpu_state_make(struct x86_vcpu_state *s, unsigned ncpuid, unsigned nmsrs,
			    uint32_t xsave_size)
{
	struct kvm_segment *seg[] = {
		&s->sregs.cs, &s->sregs.ds, &s->sregs.es, &s->sregs.fs,
		&s->sregs.gs, &s->sregs.ss, &s->sregs.tr, &s->sregs.ldt,
	};
	uint32_t seed = 0x2545f491;
	unsigned i;

	memset(s, 0, sizeof(*s));
	s->tsc_khz = 2995200;
	s->cpuid = calloc(1, sizeof(*s->cpuid) + ncpuid * sizeof(s->cpuid->entries[0]));
	s->msrs = calloc(1, sizeof(*s->msrs) + nmsrs * sizeof(s->msrs->entries[0]));
	s->xsave = calloc(1, xsave_size);
	CHECK(s->cpuid && s->msrs && s->xsave);
	s->cpuid->nent = ncpuid;
	for (i = 0; i < ncpuid; i++) {
		struct kvm_cpuid_entry2 *e = &s->cpuid->entries[i];

		fill(e, offsetof(struct kvm_cpuid_entry2, padding), &seed);
	}
	s->msrs->nmsrs = nmsrs;
	for (i = 0; i < nmsrs; i++) {
		fill(&s->msrs->entries[i].index, 4, &seed);
		fill(&s->msrs->entries[i].data, 8, &seed);
	}
	s->xsave_size = xsave_size;
	fill(s->xsave, xsave_size, &seed);

	fill(&s->mp, sizeof(s->mp), &seed);
	fill(&s->regs, sizeof(s->regs), &seed);
	fill(&s->sregs, sizeof(s->sregs), &seed);
	for (i = 0; i < ARRAY_SIZE(seg); i++)
		seg[i]->padding = 0;
	memset(s->sregs.gdt.padding, 0, sizeof(s->sregs.gdt.padding));
	memset(s->sregs.idt.padding, 0, sizeof(s->sregs.idt.padding));
	s->xcrs.nr_xcrs = 3;
	fill(&s->xcrs.flags, 4, &seed);
	for (i = 0; i < s->xcrs.nr_xcrs; i++) {
		fill(&s->xcrs.xcrs[i].xcr, 4, &seed);
		fill(&s->xcrs.xcrs[i].value, 8, &seed);
	}
	fill(&s->debugregs, offsetof(struct kvm_debugregs, reserved), &seed);
	fill(&s->lapic, sizeof(s->lapic), &seed);
	fill(&s->events, sizeof(s->events), &seed);
	s->events.nmi.pad = 0;
	memset(s->events.reserved, 0, sizeof(s->events.reserved));
}

static void vcpu_state_same(const struct x86_vcpu_state *a, const struct x86_vcpu_state *b)
{
	CHECK_EQ(a->tsc_khz, b->tsc_khz);
	CHECK_EQ(a->cpuid->nent, b->cpuid->nent);
	CHECK(!memcmp(a->cpuid->entries, b->cpuid->entries,
		      a->cpuid->nent * sizeof(a->cpuid->entries[0])));
	CHECK(!memcmp(&a->mp, &b->mp, sizeof(a->mp)));
	CHECK(!memcmp(&a->regs, &b->regs, sizeof(a->regs)));
	CHECK(!memcmp(&a->sregs, &b->sregs, sizeof(a->sregs)));
	CHECK_EQ(a->xsave_size, b->xsave_size);
	CHECK(!memcmp(a->xsave, b->xsave, a->xsave_size));
	CHECK(!memcmp(&a->xcrs, &b->xcrs, sizeof(a->xcrs)));
	CHECK(!memcmp(&a->debugregs, &b->debugregs, sizeof(a->debugregs)));
	CHECK(!memcmp(&a->lapic, &b->lapic, sizeof(a->lapic)));
	CHECK_EQ(a->msrs->nmsrs, b->msrs->nmsrs);
	CHECK(!memcmp(a->msrs->entries, b->msrs->entries,
		      a->msrs->nmsrs * sizeof(a->msrs->entries[0])));
	CHECK(!memcmp(&a->events, &b->events, sizeof(a->events)));
}

/* A snapshot file image and its checked view. */
struct image {
	uint8_t *buf;
	size_t len;
	struct snap_file f;
};

static void image_close(struct snap_w *w, struct image *im)
{
	char err[256];

	CHECK_EQ(snap_w_image(w, &im->buf, &im->len), 0);
	snap_w_free(w);
	CHECK_EQ(snap_open(&im->f, im->buf, im->len, err, sizeof(err)), 0);
}

static void image_of_vcpu(const struct x86_vcpu_state *s, unsigned id, struct image *im)
{
	struct snap_w w;

	snap_w_init(&w);
	CHECK_EQ(x86_vcpu_state_put(&w, id, s), 0);
	image_close(&w, im);
}

/* vCPU id's sections of src copied into a new image: drop left out,
 * resize one byte shorter (delta -1) or longer (+1). */
static void image_edit(const struct image *src, unsigned id, uint32_t drop, uint32_t resize,
		       int delta, struct image *out)
{
	struct snap_w w;
	unsigned i;

	snap_w_init(&w);
	for (i = 0; i < ARRAY_SIZE(vcpu_tags); i++) {
		struct snap_r r;
		uint8_t *b;
		size_t n;

		if (vcpu_tags[i] == drop)
			continue;
		CHECK_EQ(snap_find(&src->f, vcpu_tags[i], id, &r), 0);
		n = snap_left(&r);
		b = calloc(1, n + 1);
		CHECK(b);
		snap_get_bytes(&r, b, n);
		if (vcpu_tags[i] == resize)
			n = (size_t)((long)n + delta);
		snap_begin(&w, vcpu_tags[i], id);
		snap_put_bytes(&w, b, n);
		snap_end(&w);
		free(b);
	}
	image_close(&w, out);
}

TEST(a_vcpu_state_comes_back_field_by_field_through_the_container)
{
	struct x86_vcpu_state s, back;
	struct image im;
	char err[256] = "";

	vcpu_state_make(&s, 40, 150, 4096 + 64);
	image_of_vcpu(&s, VCPU, &im);
	CHECK_EQ(snap_count(&im.f, X86_SNAP_MSRS), 1);
	CHECK_EQ(x86_vcpu_state_get(&im.f, VCPU, &back, err, sizeof(err)), 0);
	vcpu_state_same(&s, &back);
	x86_vcpu_state_free(&back);
	x86_vcpu_state_free(&s);
	free(im.buf);
}

TEST(a_vcpu_state_is_found_by_its_vcpu_id_only)
{
	struct x86_vcpu_state s, back;
	struct image im;
	char err[256] = "";

	vcpu_state_make(&s, 2, 2, 4096);
	image_of_vcpu(&s, VCPU, &im);
	CHECK_EQ(x86_vcpu_state_get(&im.f, 0, &back, err, sizeof(err)), -EINVAL);
	CHECK_STR(err, "snapshot has no XCPU section for vCPU 0: the file is damaged or from "
		       "another mvm");
	CHECK(back.cpuid == NULL && back.msrs == NULL && back.xsave == NULL);
	x86_vcpu_state_free(&back);
	x86_vcpu_state_free(&s);
	free(im.buf);
}

TEST(a_missing_vcpu_section_is_refused_by_name)
{
	struct x86_vcpu_state s, back;
	struct image im, cut;
	unsigned i;

	vcpu_state_make(&s, 4, 5, 4096);
	image_of_vcpu(&s, VCPU, &im);
	for (i = 0; i < ARRAY_SIZE(vcpu_tags); i++) {
		char err[256] = "", want[128], name[5];

		image_edit(&im, VCPU, vcpu_tags[i], 0, 0, &cut);
		CHECK_EQ(x86_vcpu_state_get(&cut.f, VCPU, &back, err, sizeof(err)), -EINVAL);
		snap_tag_name(vcpu_tags[i], name);
		snprintf(want, sizeof(want), "snapshot has no %s section for vCPU %u:", name, VCPU);
		if (strncmp(err, want, strlen(want))) {
			fprintf(stderr, "dropping %s: %s\n", name, err);
			CHECK(0);
		}
		x86_vcpu_state_free(&back);
		free(cut.buf);
	}
	/* And the edit itself keeps a good file good. */
	image_edit(&im, VCPU, 0, 0, 0, &cut);
	CHECK_EQ(x86_vcpu_state_get(&cut.f, VCPU, &back, NULL, 0), 0);
	vcpu_state_same(&s, &back);
	x86_vcpu_state_free(&back);
	free(cut.buf);
	x86_vcpu_state_free(&s);
	free(im.buf);
}

TEST(a_vcpu_section_one_byte_short_or_long_is_refused)
{
	struct x86_vcpu_state s, back;
	struct image im, bad;
	unsigned i;
	int delta;

	vcpu_state_make(&s, 4, 5, 4096);
	image_of_vcpu(&s, VCPU, &im);
	for (delta = -1; delta <= 1; delta += 2) {
		for (i = 0; i < ARRAY_SIZE(vcpu_tags); i++) {
			char err[512] = "", name[5], want[64];

			image_edit(&im, VCPU, 0, vcpu_tags[i], delta, &bad);
			CHECK_EQ(x86_vcpu_state_get(&bad.f, VCPU, &back, err, sizeof(err)),
				 -EINVAL);
			snap_tag_name(vcpu_tags[i], name);
			snprintf(want, sizeof(want), "snapshot: vCPU %u: section %s/%u", VCPU,
				 name, VCPU);
			if (strncmp(err, want, strlen(want))) {
				fprintf(stderr, "%s %+d: %s\n", name, delta, err);
				CHECK(0);
			}
			x86_vcpu_state_free(&back);
			free(bad.buf);
		}
	}
	x86_vcpu_state_free(&s);
	free(im.buf);
}

/* A file whose vCPU sections are those of s but for tag, written by the
 * caller's put (the format by hand); a tag s has none of comes last. */
static void image_with(const struct x86_vcpu_state *s, uint32_t tag,
		       void (*put)(struct snap_w *, unsigned), unsigned arg, struct image *out)
{
	struct image im;
	struct snap_w w;
	unsigned i;

	bool put_done = false;

	image_of_vcpu(s, VCPU, &im);
	snap_w_init(&w);
	for (i = 0; i < ARRAY_SIZE(vcpu_tags); i++) {
		struct snap_r r;
		uint8_t *b;
		size_t n;

		snap_begin(&w, vcpu_tags[i], VCPU);
		if (vcpu_tags[i] == tag) {
			put(&w, arg);
			put_done = true;
		} else {
			CHECK_EQ(snap_find(&im.f, vcpu_tags[i], VCPU, &r), 0);
			n = snap_left(&r);
			b = malloc(n + 1);
			CHECK(b);
			snap_get_bytes(&r, b, n);
			snap_put_bytes(&w, b, n);
			free(b);
		}
		snap_end(&w);
	}
	/* An optional section (X86_SNAP_NESTED): after the others. */
	if (!put_done) {
		snap_begin(&w, tag, VCPU);
		put(&w, arg);
		snap_end(&w);
	}
	free(im.buf);
	image_close(&w, out);
}

static void put_msrs(struct snap_w *w, unsigned n)
{
	unsigned i;

	snap_put_u32(w, n);
	for (i = 0; i < n; i++) {
		snap_put_u32(w, 0xc0000100 + i);
		snap_put_u64(w, i);
	}
}

/* A count of n with only half the entries. */
static void put_msrs_half(struct snap_w *w, unsigned n)
{
	unsigned i;

	snap_put_u32(w, n);
	for (i = 0; i < n / 2; i++) {
		snap_put_u32(w, 0xc0000100 + i);
		snap_put_u64(w, i);
	}
}

static void put_cpuid(struct snap_w *w, unsigned n)
{
	unsigned i;

	snap_put_u32(w, 3000000);       /* TSC kHz */
	snap_put_u32(w, n);
	for (i = 0; i < n * 7; i++)
		snap_put_u32(w, i);
}

static void put_xsave(struct snap_w *w, unsigned size)
{
	uint8_t *b = calloc(1, size + 1);

	CHECK(b);
	snap_put_u32(w, size);
	snap_put_bytes(w, b, size);
	free(b);
}

static void put_xcrs(struct snap_w *w, unsigned n)
{
	unsigned i;

	snap_put_u32(w, n);
	snap_put_u32(w, 0);
	for (i = 0; i < n; i++) {
		snap_put_u32(w, i);
		snap_put_u64(w, 1);
	}
}

/* get's verdict on a file whose tag section put wrote with arg. */
static int get_with(const struct x86_vcpu_state *s, uint32_t tag,
		    void (*put)(struct snap_w *, unsigned), unsigned arg, char *err, size_t errlen)
{
	struct x86_vcpu_state back;
	struct image im;
	int ret;

	image_with(s, tag, put, arg, &im);
	err[0] = 0;
	ret = x86_vcpu_state_get(&im.f, VCPU, &back, err, errlen);
	x86_vcpu_state_free(&back);
	free(im.buf);
	return ret;
}

TEST(an_msr_count_beyond_the_maximum_is_refused_and_the_maximum_taken)
{
	struct x86_vcpu_state s;
	char err[256];

	vcpu_state_make(&s, 2, 2, 4096);
	CHECK_EQ(get_with(&s, X86_SNAP_MSRS, put_msrs, X86_SNAP_MSRS_MAX, err, sizeof(err)), 0);
	CHECK_EQ(get_with(&s, X86_SNAP_MSRS, put_msrs, X86_SNAP_MSRS_MAX + 1, err, sizeof(err)),
		 -EINVAL);
	CHECK_STR(err, "snapshot: vCPU 3: 1025 MSRs, this mvm takes at most 1024: the file is "
		       "damaged");
	/* A count the section does not hold. */
	CHECK_EQ(get_with(&s, X86_SNAP_MSRS, put_msrs_half, 1000, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "snapshot: vCPU 3: section XMSR/3: read past its end"));
	x86_vcpu_state_free(&s);
}

TEST(cpuid_xsave_and_xcr_counts_beyond_kvms_are_refused)
{
	struct x86_vcpu_state s;
	char err[256];

	vcpu_state_make(&s, 2, 2, 4096);
	CHECK_EQ(get_with(&s, X86_SNAP_CPU, put_cpuid, 256, err, sizeof(err)), 0);
	CHECK_EQ(get_with(&s, X86_SNAP_CPU, put_cpuid, 257, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "257 CPUID entries"));
	CHECK_EQ(get_with(&s, X86_SNAP_CPU, put_cpuid, 0, err, sizeof(err)), 0);

	CHECK_EQ(get_with(&s, X86_SNAP_XSAVE, put_xsave, 4096 + 4, err, sizeof(err)), 0);
	CHECK_EQ(get_with(&s, X86_SNAP_XSAVE, put_xsave, 4095, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "XSAVE area of 4095 bytes"));
	CHECK_EQ(get_with(&s, X86_SNAP_XSAVE, put_xsave, X86_SNAP_XSAVE_MAX + 1, err,
			  sizeof(err)), -EINVAL);

	CHECK_EQ(get_with(&s, X86_SNAP_XCRS, put_xcrs, KVM_MAX_XCRS, err, sizeof(err)), 0);
	CHECK_EQ(get_with(&s, X86_SNAP_XCRS, put_xcrs, KVM_MAX_XCRS + 1, err, sizeof(err)),
		 -EINVAL);
	CHECK(strstr(err, "17 XCRs"));
	x86_vcpu_state_free(&s);
}

TEST(a_tsc_rate_of_zero_is_refused)
{
	struct x86_vcpu_state s, back;
	struct image im;
	char err[256] = "";

	vcpu_state_make(&s, 2, 2, 4096);
	s.tsc_khz = 0;
	image_of_vcpu(&s, VCPU, &im);
	CHECK_EQ(x86_vcpu_state_get(&im.f, VCPU, &back, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "TSC rate of 0 kHz"));
	x86_vcpu_state_free(&back);
	x86_vcpu_state_free(&s);
	free(im.buf);
}

TEST(put_refuses_a_state_the_reader_would_refuse)
{
	struct x86_vcpu_state s;
	struct snap_w w;

	vcpu_state_make(&s, 2, X86_SNAP_MSRS_MAX + 1, 4096);
	snap_w_init(&w);
	CHECK_EQ(x86_vcpu_state_put(&w, 0, &s), -EINVAL);
	CHECK_EQ(w.nsections, 0);
	snap_w_free(&w);
	x86_vcpu_state_free(&s);

	vcpu_state_make(&s, 2, 2, 4096);
	s.xcrs.nr_xcrs = KVM_MAX_XCRS + 1;
	snap_w_init(&w);
	CHECK_EQ(x86_vcpu_state_put(&w, 0, &s), -EINVAL);
	snap_w_free(&w);
	x86_vcpu_state_free(&s);
}

/* A nested state of format fmt and size bytes (header and data), every
 * field the format keeps set, the header's padding zero. */
static struct kvm_nested_state *nested_make(uint16_t fmt, uint32_t size, uint16_t flags)
{
	struct kvm_nested_state *n = calloc(1, X86_SNAP_NESTED_MAX);
	uint32_t seed = 0x9e3779b9;

	CHECK(n);
	n->flags = flags;
	n->format = fmt;
	n->size = size;
	if (fmt == KVM_STATE_NESTED_FORMAT_VMX) {
		n->hdr.vmx.vmxon_pa = 0x10000;
		n->hdr.vmx.vmcs12_pa = 0x11000;
		n->hdr.vmx.smm.flags = 2;
		n->hdr.vmx.flags = 1;
		n->hdr.vmx.preemption_timer_deadline = 0x123456789aull;
	} else {
		n->hdr.svm.vmcb_pa = 0x7f000;
	}
	fill((uint8_t *)n + X86_SNAP_NESTED_HDR, size - X86_SNAP_NESTED_HDR, &seed);
	return n;
}

/* The guest's own hypervisor's state (KVM_GET_NESTED_STATE) comes back
 * with the vCPU's, header field by field and data byte for byte, for
 * SVM's and VMX's formats; a snapshot without it (a KVM that keeps none)
 * reads as none. */
TEST(a_nested_state_comes_back_in_either_format_and_its_absence_is_none)
{
	static const struct { uint16_t fmt; uint32_t size; uint16_t flags; } cases[] = {
		{ KVM_STATE_NESTED_FORMAT_SVM, X86_SNAP_NESTED_HDR + 4096,
		  KVM_STATE_NESTED_GUEST_MODE | KVM_STATE_NESTED_GIF_SET },
		{ KVM_STATE_NESTED_FORMAT_SVM, X86_SNAP_NESTED_HDR, KVM_STATE_NESTED_GIF_SET },
		{ KVM_STATE_NESTED_FORMAT_VMX, X86_SNAP_NESTED_HDR + 8192,
		  KVM_STATE_NESTED_GUEST_MODE | KVM_STATE_NESTED_RUN_PENDING },
	};
	struct x86_vcpu_state s, back;
	struct image im;
	char err[256] = "";
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		vcpu_state_make(&s, 4, 5, 4096);
		s.nested = nested_make(cases[i].fmt, cases[i].size, cases[i].flags);
		image_of_vcpu(&s, VCPU, &im);
		CHECK_EQ(snap_count(&im.f, X86_SNAP_NESTED), 1);
		CHECK_EQ(x86_vcpu_state_get(&im.f, VCPU, &back, err, sizeof(err)), 0);
		vcpu_state_same(&s, &back);
		CHECK(back.nested);
		CHECK(!memcmp(s.nested, back.nested, cases[i].size));
		x86_vcpu_state_free(&back);
		x86_vcpu_state_free(&s);
		free(im.buf);
	}
	vcpu_state_make(&s, 4, 5, 4096);
	image_of_vcpu(&s, VCPU, &im);
	CHECK_EQ(snap_count(&im.f, X86_SNAP_NESTED), 0);
	CHECK_EQ(x86_vcpu_state_get(&im.f, VCPU, &back, err, sizeof(err)), 0);
	CHECK(!back.nested);
	x86_vcpu_state_free(&back);
	x86_vcpu_state_free(&s);
	free(im.buf);
}

/* A nested-state section by hand: format, size, then nested_len bytes
 * after the header's fields. */
static uint16_t nested_fmt;
static uint32_t nested_size;

static void put_nested_by_hand(struct snap_w *w, unsigned nested_len)
{
	uint8_t *b = calloc(1, nested_len + 1);

	CHECK(b);
	snap_put_u16(w, KVM_STATE_NESTED_GUEST_MODE);
	snap_put_u16(w, nested_fmt);
	snap_put_u32(w, nested_size);
	snap_put_u64(w, 0x7f000);       /* SVM's vmcb_pa */
	snap_put_bytes(w, b, nested_len);
	free(b);
}

static int get_nested_with(const struct x86_vcpu_state *s, uint16_t fmt, uint32_t size,
			   size_t len, char *err, size_t errlen)
{
	nested_fmt = fmt;
	nested_size = size;
	return get_with(s, X86_SNAP_NESTED, put_nested_by_hand, (unsigned)len, err, errlen);
}

TEST(a_nested_state_of_an_unknown_format_or_size_is_refused_as_damaged)
{
	struct x86_vcpu_state s;
	struct snap_w w;
	char err[256];

	vcpu_state_make(&s, 2, 2, 4096);
	CHECK_EQ(get_nested_with(&s, KVM_STATE_NESTED_FORMAT_SVM, X86_SNAP_NESTED_HDR + 4096,
				 4096, err, sizeof(err)), 0);
	CHECK_EQ(get_nested_with(&s, 7, X86_SNAP_NESTED_HDR + 4096, 4096, err, sizeof(err)),
		 -EINVAL);
	CHECK(strstr(err, "vCPU 3: nested state of format 7 and 4224 bytes: the file is damaged"));
	CHECK_EQ(get_nested_with(&s, KVM_STATE_NESTED_FORMAT_SVM, X86_SNAP_NESTED_MAX + 1,
				 X86_SNAP_NESTED_MAX + 1 - X86_SNAP_NESTED_HDR, err, sizeof(err)),
		 -EINVAL);
	CHECK(strstr(err, "the file is damaged"));
	CHECK_EQ(get_nested_with(&s, KVM_STATE_NESTED_FORMAT_SVM, 64, 0, err, sizeof(err)),
		 -EINVAL);
	/* A size the section does not hold, or more than it says. */
	CHECK_EQ(get_nested_with(&s, KVM_STATE_NESTED_FORMAT_SVM, X86_SNAP_NESTED_HDR + 4096,
				 100, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "section XNST/3: read past its end"));
	CHECK_EQ(get_nested_with(&s, KVM_STATE_NESTED_FORMAT_SVM, X86_SNAP_NESTED_HDR,
				 8, err, sizeof(err)), -EINVAL);
	/* What the reader refuses is not written. */
	s.nested = nested_make(7, X86_SNAP_NESTED_HDR, 0);
	snap_w_init(&w);
	CHECK_EQ(x86_vcpu_state_put(&w, 0, &s), -EINVAL);
	snap_w_free(&w);
	x86_vcpu_state_free(&s);
}

static void vm_state_make(struct x86_vm_state *s)
{
	uint32_t seed = 0x9e3779b9;
	unsigned i;

	memset(s, 0, sizeof(*s));
	fill(s->pic, sizeof(s->pic), &seed);
	fill(&s->ioapic, sizeof(s->ioapic), &seed);
	s->ioapic.pad = 0;
	for (i = 0; i < ARRAY_SIZE(s->pit.channels); i++)
		fill(&s->pit.channels[i], sizeof(s->pit.channels[i]), &seed);
	fill(&s->pit.flags, sizeof(s->pit.flags), &seed);
	fill(&s->clock.clock, 8, &seed);
	fill(&s->clock.flags, 4, &seed);
	fill(&s->clock.realtime, 8, &seed);
	fill(&s->clock.host_tsc, 8, &seed);
}

TEST(the_vm_state_comes_back_field_by_field_through_the_container)
{
	struct x86_vm_state s, back;
	struct snap_w w;
	struct image im;
	char err[256] = "";

	vm_state_make(&s);
	snap_w_init(&w);
	CHECK_EQ(x86_vm_state_put(&w, &s), 0);
	CHECK_EQ(w.nsections, 5);
	image_close(&w, &im);
	CHECK_EQ(x86_vm_state_get(&im.f, &back, err, sizeof(err)), 0);
	CHECK(!memcmp(&s, &back, sizeof(s)));
	free(im.buf);
}

TEST(a_missing_vm_section_is_refused_by_name)
{
	static const struct { uint32_t tag, instance; const char *msg; } drop[] = {
		{ X86_SNAP_PIC, 0, "snapshot has no XPIC section for the master PIC:" },
		{ X86_SNAP_PIC, 1, "snapshot has no XPIC section for the slave PIC:" },
		{ X86_SNAP_IOAPIC, 0, "snapshot has no XIOA section for the VM:" },
		{ X86_SNAP_PIT, 0, "snapshot has no XPIT section for the VM:" },
		{ X86_SNAP_CLOCK, 0, "snapshot has no XCLK section for the VM:" },
	};
	static const struct { uint32_t tag, instance; } all[] = {
		{ X86_SNAP_PIC, 0 }, { X86_SNAP_PIC, 1 }, { X86_SNAP_IOAPIC, 0 },
		{ X86_SNAP_PIT, 0 }, { X86_SNAP_CLOCK, 0 },
	};
	struct x86_vm_state s, back;
	struct snap_w w;
	struct image im, cut;
	unsigned d, i;

	vm_state_make(&s);
	snap_w_init(&w);
	CHECK_EQ(x86_vm_state_put(&w, &s), 0);
	image_close(&w, &im);
	for (d = 0; d < ARRAY_SIZE(drop); d++) {
		char err[256] = "";

		snap_w_init(&w);
		for (i = 0; i < ARRAY_SIZE(all); i++) {
			struct snap_r r;
			uint8_t b[512];
			size_t n;

			if (all[i].tag == drop[d].tag && all[i].instance == drop[d].instance)
				continue;
			CHECK_EQ(snap_find(&im.f, all[i].tag, all[i].instance, &r), 0);
			n = snap_left(&r);
			CHECK(n <= sizeof(b));
			snap_get_bytes(&r, b, n);
			snap_begin(&w, all[i].tag, all[i].instance);
			snap_put_bytes(&w, b, n);
			snap_end(&w);
		}
		image_close(&w, &cut);
		CHECK_EQ(x86_vm_state_get(&cut.f, &back, err, sizeof(err)), -EINVAL);
		if (strncmp(err, drop[d].msg, strlen(drop[d].msg))) {
			fprintf(stderr, "%s\n", err);
			CHECK(0);
		}
		free(cut.buf);
	}
	free(im.buf);
}

/* ---- CPUID --------------------------------------------------------------- */

struct cpuid_buf {
	struct kvm_cpuid2 c;
	struct kvm_cpuid_entry2 e[16];
};

static void add(struct cpuid_buf *b, uint32_t fn, uint32_t idx, uint32_t flags, uint32_t eax,
		uint32_t ebx, uint32_t ecx, uint32_t edx)
{
	struct kvm_cpuid_entry2 *e = &b->c.entries[b->c.nent++];

	CHECK(b->c.nent <= ARRAY_SIZE(b->e));
	memset(e, 0, sizeof(*e));
	e->function = fn;
	e->index = idx;
	e->flags = flags;
	e->eax = eax;
	e->ebx = ebx;
	e->ecx = ecx;
	e->edx = edx;
}

#define SIG KVM_CPUID_FLAG_SIGNIFCANT_INDEX

/* A host: what KVM_GET_SUPPORTED_CPUID might say. */
static void host(struct cpuid_buf *b)
{
	memset(b, 0, sizeof(*b));
	add(b, 0, 0, 0, 0xd, 0x756e6547, 0x6c65746e, 0x49656e69);
	add(b, 1, 0, 0, 0x000906ea, 0x00000800, 0x77fa3203, 0x0f8bfbff);
	add(b, 7, 0, SIG, 1, 0x009c27ab, 0x00400004, 0xbc000400);
	add(b, 7, 1, SIG, 0, 0, 0, 0);
	add(b, 0xd, 0, SIG, 0x7, 0x340, 0x340, 0);
	add(b, 0xd, 1, SIG, 0xf, 0, 0, 0);
	add(b, 0x40000001, 0, 0, 0x01007afb, 0, 0, 0);
	add(b, 0x80000001, 0, 0, 0, 0, 0x00000121, 0x2c100800);
}

/* The guest's CPUID as x86_cpuid_build makes it from that host. */
static void guest(struct cpuid_buf *b, unsigned id)
{
	struct cpuid_buf h;

	host(&h);
	memset(b, 0, sizeof(*b));
	CHECK_EQ(x86_cpuid_build(&h.c, id, 4, &b->c, ARRAY_SIZE(b->e)), 0);
}

static struct kvm_cpuid_entry2 *entry(struct cpuid_buf *b, uint32_t fn, uint32_t idx)
{
	unsigned i;

	for (i = 0; i < b->c.nent; i++)
		if (b->c.entries[i].function == fn && b->c.entries[i].index == idx)
			return &b->c.entries[i];
	CHECK(0);
	return NULL;
}

TEST(cpuid_check_accepts_the_guests_cpuid_and_any_subset_of_the_host)
{
	struct cpuid_buf h, g;
	char err[256] = "";

	host(&h);
	guest(&g, 2);
	CHECK_EQ(x86_cpuid_check(&g.c, &h.c, 2, err, sizeof(err)), 0);
	/* Fewer features than the host: fine. */
	entry(&g, 7, 0)->ebx &= ~0x20u;
	entry(&g, 0x80000001, 0)->edx = 0;
	CHECK_EQ(x86_cpuid_check(&g.c, &h.c, 2, err, sizeof(err)), 0);
	/* Leaves that announce no features may differ. */
	entry(&g, 0, 0)->ebx = 0x68747541;
	CHECK_EQ(x86_cpuid_check(&g.c, &h.c, 2, err, sizeof(err)), 0);
}

TEST(cpuid_check_ignores_bits_that_mvm_or_the_guest_sets)
{
	struct cpuid_buf h, g;
	char err[256] = "";

	host(&h);
	entry(&h, 1, 0)->ecx &= ~((1u << 31) | (1u << 27));
	entry(&h, 1, 0)->edx &= ~(1u << 28);
	entry(&h, 7, 0)->ecx &= ~(1u << 4);
	guest(&g, 0);
	/* hypervisor and HTT (mvm's), OSXSAVE and OSPKE (the guest's CR4) */
	entry(&g, 1, 0)->ecx |= (1u << 31) | (1u << 27);
	entry(&g, 1, 0)->edx |= 1u << 28;
	entry(&g, 7, 0)->ecx |= 1u << 4;
	CHECK_EQ(x86_cpuid_check(&g.c, &h.c, 0, err, sizeof(err)), 0);
}

TEST(cpuid_check_refuses_a_feature_the_host_lacks_naming_leaf_register_and_bits)
{
	struct cpuid_buf h, g;
	char err[256] = "";

	host(&h);
	guest(&g, 1);
	entry(&g, 7, 0)->ebx |= 1u << 16;       /* AVX512F */
	CHECK_EQ(x86_cpuid_check(&g.c, &h.c, 1, err, sizeof(err)), -ENOTSUP);
	CHECK_STR(err, "snapshot: vCPU 1's CPUID leaf 0x7 subleaf 0 ebx has bits 0x00010000 this "
		       "host's KVM cannot give; restore on a host with the same CPU features");

	guest(&g, 1);
	entry(&g, 1, 0)->ecx |= 1u << 5;        /* VMX */
	CHECK_EQ(x86_cpuid_check(&g.c, &h.c, 1, err, sizeof(err)), -ENOTSUP);
	CHECK(strstr(err, "leaf 0x1 ecx has bits 0x00000020 "));

	guest(&g, 1);
	entry(&g, 0xd, 0)->eax |= 0xe0;         /* AVX-512 state components */
	CHECK_EQ(x86_cpuid_check(&g.c, &h.c, 1, err, sizeof(err)), -ENOTSUP);
	CHECK(strstr(err, "leaf 0xd subleaf 0 eax has bits 0x000000e0 "));

	guest(&g, 1);
	entry(&g, 0x40000001, 0)->eax |= 1u << 30;
	CHECK_EQ(x86_cpuid_check(&g.c, &h.c, 1, err, sizeof(err)), -ENOTSUP);
	CHECK(strstr(err, "leaf 0x40000001 eax has bits 0x40000000 "));
}

TEST(cpuid_check_refuses_the_features_of_a_leaf_the_host_has_not)
{
	struct cpuid_buf h, g;
	char err[256] = "";
	unsigned i, j;

	host(&h);
	guest(&g, 0);
	/* This host without leaf 0x80000001 at all. */
	for (i = j = 0; i < h.c.nent; i++)
		if (h.c.entries[i].function != 0x80000001)
			h.c.entries[j++] = h.c.entries[i];
	h.c.nent = j;
	CHECK_EQ(x86_cpuid_check(&g.c, &h.c, 0, err, sizeof(err)), -ENOTSUP);
	CHECK(strstr(err, "leaf 0x80000001 ecx has bits 0x00000121 "));
}

/* ---- MSRs ---------------------------------------------------------------- */

TEST(a_zero_tsc_deadline_is_saved_as_the_tsc_so_the_timer_fires_again)
{
	struct kvm_msr_entry e[3] = {
		{ .index = 0x10, .data = 123456789 },           /* IA32_TSC */
		{ .index = 0x6e0, .data = 0 },                  /* IA32_TSC_DEADLINE */
		{ .index = 0xc0000080, .data = 0xd01 },
	};

	x86_msrs_save_fixup(e, 3);
	CHECK_EQ(e[1].data, 123456789);
	CHECK_EQ(e[0].data, 123456789);
	CHECK_EQ(e[2].data, 0xd01);
	/* An armed deadline stays as it is. */
	e[1].data = 5;
	x86_msrs_save_fixup(e, 3);
	CHECK_EQ(e[1].data, 5);
	/* Without a TSC there is nothing to put there. */
	e[0].index = 0x11;
	e[1].data = 0;
	x86_msrs_save_fixup(e, 3);
	CHECK_EQ(e[1].data, 0);
}

TEST(the_tsc_deadline_is_restored_after_the_tsc)
{
	struct kvm_msr_entry e[4] = {
		{ .index = 0x6e0, .data = 7 },
		{ .index = 0x3b, .data = 1 },
		{ .index = 0x10, .data = 2 },
		{ .index = 0xc0000080, .data = 3 },
	};

	x86_msrs_load_order(e, 4);
	CHECK_EQ(e[0].index, 0x3b);
	CHECK_EQ(e[1].index, 0x10);
	CHECK_EQ(e[2].index, 0xc0000080);
	CHECK_EQ(e[3].index, 0x6e0);
	CHECK_EQ(e[3].data, 7);
	CHECK_EQ(e[1].data, 2);
	/* Already last, or absent: unchanged. */
	x86_msrs_load_order(e, 4);
	CHECK_EQ(e[3].index, 0x6e0);
	x86_msrs_load_order(e, 3);
	CHECK_EQ(e[0].index, 0x3b);
	x86_msrs_load_order(e, 0);
}
