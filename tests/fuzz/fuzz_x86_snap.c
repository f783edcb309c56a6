/* The x86 state a restore reads from a snapshot (arch/x86/snap.c:
 * x86_vcpu_state_get, x86_vm_state_get, x86_cpuid_check) from sections
 * the input gives, framed by the harness into a well-formed container (so
 * every byte of every payload is the fuzzer's; the container's own
 * framing is fuzz_snap's). x86 only.
 *
 * The input: sections, each a tag (one byte: an index into the tags a
 * vCPU's and the VM's state use, plus one no reader asks for), an
 * instance (one byte: vCPU 0 or 1, or a PIC), a 16-bit length and the
 * payload. Then the harness reads vCPU 0's and 1's state, the VM's, and
 * checks each vCPU's CPUID against a fixed host CPUID.
 *
 * Invariants (besides ASan/UBSan):
 *  - each read returns 0 or -EINVAL/-ENOMEM with one line of message;
 *  - what a read took is within what a reader takes: CPUID entries,
 *    MSRs, XCRs, an XSAVE area's and a nested state's size and format;
 *  - what a read took, written back (x86_vcpu_state_put,
 *    x86_vm_state_put: both 0, as their writer refuses only what a reader
 *    would) and read again, gives the same sections byte for byte;
 *  - the CPUID check returns 0 or -ENOTSUP with one line. */
#include "tests/fuzz/fuzz.h"
#include "arch/x86/x86.h"
#include "vmm/base/snap.h"

static const uint32_t tags[] = {
	X86_SNAP_CPU, X86_SNAP_MPSTATE, X86_SNAP_REGS, X86_SNAP_SREGS, X86_SNAP_XSAVE,
	X86_SNAP_XCRS, X86_SNAP_DEBUG, X86_SNAP_LAPIC, X86_SNAP_MSRS, X86_SNAP_EVENTS,
	X86_SNAP_NESTED, X86_SNAP_PIC, X86_SNAP_IOAPIC, X86_SNAP_PIT, X86_SNAP_CLOCK,
	SNAP_TAG('Z', 'Z', 'Z', 'Z'),
};
#define NTAGS (sizeof(tags) / sizeof(tags[0]))
#define MAX_SECTIONS 40

static void check_msg(const char *err, int ret)
{
	FZ_ASSERT(ret == -EINVAL || ret == -ENOMEM || ret == -ENOTSUP);
	FZ_ASSERT(err[0] && !strchr(err, '\n'));
}

/* A file image of what w holds, opened: the writer's framing is valid. */
static uint8_t *image(struct snap_w *w, struct snap_file *f)
{
	char err[256];
	uint8_t *buf;
	size_t len;

	FZ_ASSERT(snap_w_image(w, &buf, &len) == 0);
	snap_w_free(w);
	FZ_ASSERT(snap_open(f, buf, len, err, sizeof(err)) == 0);
	return buf;
}

/* The bytes of every section of instance id whose tag is in tags, in
 * order, as one buffer: what a round trip must give back. */
static void sections_of(const struct snap_file *f, unsigned id, uint8_t *out, size_t cap,
			size_t *len)
{
	unsigned i;

	*len = 0;
	for (i = 0; i < NTAGS; i++) {
		struct snap_r r;
		size_t n;

		if (snap_find(f, tags[i], id, &r))
			continue;
		n = snap_left(&r);
		FZ_ASSERT(n <= cap - *len);
		snap_get_bytes(&r, out + *len, n);
		*len += n;
	}
}

static void vcpu_round_trip(unsigned id, const struct x86_vcpu_state *s)
{
	static uint8_t a[2 << 20], b[2 << 20];
	struct x86_vcpu_state again;
	struct snap_file f1, f2;
	struct snap_w w;
	char err[256];
	uint8_t *img1, *img2;
	size_t la, lb;

	snap_w_init(&w);
	FZ_ASSERT(x86_vcpu_state_put(&w, id, s) == 0);
	img1 = image(&w, &f1);
	FZ_ASSERT(x86_vcpu_state_get(&f1, id, &again, err, sizeof(err)) == 0);
	snap_w_init(&w);
	FZ_ASSERT(x86_vcpu_state_put(&w, id, &again) == 0);
	img2 = image(&w, &f2);
	sections_of(&f1, id, a, sizeof(a), &la);
	sections_of(&f2, id, b, sizeof(b), &lb);
	FZ_ASSERT(la == lb && !memcmp(a, b, la));
	FZ_ASSERT(!again.nested == !s->nested);
	x86_vcpu_state_free(&again);
	free(img1);
	free(img2);
}

static void vcpu_check(const struct snap_file *f, unsigned id, const struct kvm_cpuid2 *host)
{
	struct x86_vcpu_state s;
	char err[256] = "";
	int ret;

	ret = x86_vcpu_state_get(f, id, &s, err, sizeof(err));
	if (ret) {
		check_msg(err, ret);
		x86_vcpu_state_free(&s);
		return;
	}
	FZ_ASSERT(s.cpuid && s.cpuid->nent <= X86_SNAP_CPUID_MAX);
	FZ_ASSERT(s.msrs && s.msrs->nmsrs <= X86_SNAP_MSRS_MAX);
	FZ_ASSERT(s.xsave && s.xsave_size >= X86_SNAP_XSAVE_MIN &&
		  s.xsave_size <= X86_SNAP_XSAVE_MAX);
	FZ_ASSERT(s.xcrs.nr_xcrs <= KVM_MAX_XCRS);
	FZ_ASSERT(s.tsc_khz != 0);
	FZ_ASSERT(!s.nested || (s.nested->size >= X86_SNAP_NESTED_HDR &&
				s.nested->size <= X86_SNAP_NESTED_MAX &&
				(s.nested->format == KVM_STATE_NESTED_FORMAT_VMX ||
				 s.nested->format == KVM_STATE_NESTED_FORMAT_SVM)));
	vcpu_round_trip(id, &s);
	err[0] = 0;
	ret = x86_cpuid_check(s.cpuid, host, id, err, sizeof(err));
	if (ret)
		check_msg(err, ret);
	x86_vcpu_state_free(&s);
}

static void vm_check(const struct snap_file *f)
{
	struct x86_vm_state s, again;
	struct snap_file f1, f2;
	struct snap_w w;
	char err[256] = "";
	uint8_t *img1, *img2;
	int ret;

	ret = x86_vm_state_get(f, &s, err, sizeof(err));
	if (ret) {
		check_msg(err, ret);
		return;
	}
	snap_w_init(&w);
	FZ_ASSERT(x86_vm_state_put(&w, &s) == 0);
	img1 = image(&w, &f1);
	FZ_ASSERT(x86_vm_state_get(&f1, &again, err, sizeof(err)) == 0);
	snap_w_init(&w);
	FZ_ASSERT(x86_vm_state_put(&w, &again) == 0);
	img2 = image(&w, &f2);
	FZ_ASSERT(f1.len == f2.len && !memcmp(f1.buf, f2.buf, f1.len));
	free(img1);
	free(img2);
}

/* A host CPUID with a few leaves, as KVM_GET_SUPPORTED_CPUID gives. */
static const struct kvm_cpuid2 *host_cpuid(void)
{
	static struct {
		struct kvm_cpuid2 c;
		struct kvm_cpuid_entry2 e[6];
	} h = {
		.c = { .nent = 6 },
		.e = {
			{ .function = 0, .eax = 0xd },
			{ .function = 1, .ecx = 0xf6f83203, .edx = 0x178bfbff },
			{ .function = 7, .index = 0, .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX,
			  .ebx = 0x219c07ab },
			{ .function = 0xd, .index = 0, .flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX,
			  .eax = 0x7 },
			{ .function = 0x80000001, .ecx = 0x75c237ff, .edx = 0x2fd3fbff },
			{ .function = 0x40000001, .eax = 0x01007afb },
		},
	};

	return &h.c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz in = { data, size };
	struct snap_file f;
	struct snap_w w;
	uint8_t *buf, *payload;
	unsigned n = 0;

	payload = malloc(65536);
	FZ_ASSERT(payload);
	snap_w_init(&w);
	while (fz_left(&in) >= 4 && n++ < MAX_SECTIONS) {
		uint32_t tag = tags[fz_u8(&in) % NTAGS];
		unsigned inst = fz_u8(&in) % 3;
		size_t len = fz_u16(&in);

		len = len < fz_left(&in) ? len : fz_left(&in);
		fz_bytes(&in, payload, len);
		snap_begin(&w, tag, inst);
		snap_put_bytes(&w, payload, len);
		snap_end(&w);
	}
	free(payload);
	if (w.err) {            /* two sections of one tag and instance */
		snap_w_free(&w);
		return 0;
	}
	buf = image(&w, &f);
	vcpu_check(&f, 0, host_cpuid());
	vcpu_check(&f, 1, host_cpuid());
	vm_check(&f);
	free(buf);
	return 0;
}

/* A seed: every section of s (vCPU 0) and of a VM state, in the input's
 * form. */
static void seed_from(const char *name, const struct x86_vcpu_state *s,
		      const struct x86_vm_state *vm)
{
	static struct fz_buf out;
	struct snap_file f;
	struct snap_w w;
	uint8_t *buf;
	unsigned i, inst;

	snap_w_init(&w);
	FZ_ASSERT(x86_vcpu_state_put(&w, 0, s) == 0);
	FZ_ASSERT(x86_vm_state_put(&w, vm) == 0);
	buf = image(&w, &f);
	out.n = 0;
	for (i = 0; i < NTAGS; i++) {
		for (inst = 0; inst < 3; inst++) {
			struct snap_r r;
			uint8_t sec[8192];
			size_t len;

			if (snap_find(&f, tags[i], inst, &r))
				continue;
			len = snap_left(&r);
			FZ_ASSERT(len <= sizeof(sec));
			snap_get_bytes(&r, sec, len);
			fzb_u8(&out, (uint8_t)i);
			fzb_u8(&out, (uint8_t)inst);
			fzb_u16(&out, (uint16_t)len);
			fzb_bytes(&out, sec, len);
		}
	}
	free(buf);
	fuzz_seed(name, out.b, out.n);
}

static void fuzz_seeds(void)
{
	static uint8_t xsave[4096];
	struct {
		struct kvm_cpuid2 c;
		struct kvm_cpuid_entry2 e[2];
	} cpuid = { .c = { .nent = 2 }, .e = { { .function = 0, .eax = 0xd },
					       { .function = 1, .ecx = 0x80000000 } } };
	struct {
		struct kvm_msrs m;
		struct kvm_msr_entry e[2];
	} msrs = { .m = { .nmsrs = 2 }, .e = { { .index = 0x10, .data = 123456789 },
					      { .index = 0x6e0, .data = 0 } } };
	struct {
		struct kvm_nested_state n;
		uint8_t data[4096];
	} nested = { .n = { .flags = KVM_STATE_NESTED_GIF_SET,
			    .format = KVM_STATE_NESTED_FORMAT_SVM,
			    .size = X86_SNAP_NESTED_HDR } };
	struct x86_vcpu_state s = {
		.tsc_khz = 2995200,
		.cpuid = &cpuid.c,
		.xsave_size = sizeof(xsave),
		.xsave = (struct kvm_xsave *)xsave,
		.msrs = &msrs.m,
		.xcrs = { .nr_xcrs = 1, .xcrs = { { .xcr = 0, .value = 7 } } },
	};
	struct x86_vm_state vm = { .clock = { .clock = 1000000 } };

	s.regs.rip = 0x1000000;
	s.sregs.cr0 = 0x80050033;
	seed_from("vcpu_and_vm", &s, &vm);
	nested.n.hdr.svm.vmcb_pa = 0x201000;
	s.nested = &nested.n;
	/* Its hypervisor's state outside a nested guest (a seed holds
	 * 8 KiB: the XSAVE area takes half; the fuzzer grows the rest). */
	seed_from("vcpu_with_nested_state", &s, &vm);
}
