/* mvm(1)'s command line (vmm/cli/cli.c) and the kernel command line built from
 * it (vm_compose_cmdline): the input is an argv (arguments separated by
 * NUL bytes) through cli_parse, as the unit tests call it; or, by its
 * first byte, one --disk value through mvm_disk_parse alone.
 *
 * Invariants (besides ASan/UBSan): the result is 0 or -EINVAL; an error
 * has a one-line message; a parsed configuration is within the documented
 * ranges (cpus 1..254, mem >= 16 MiB, at most 16 disks, each with 1..N
 * queues, a serial that fits VIRTIO_BLK_ID_BYTES, a poll window within
 * VQW_POLL_US_MAX), and every disk it accepts passes mvm_add_disk's check
 * (kv_check over the same table); composing its kernel command line either
 * fits or says -ENOSPC, NUL-terminated either way. */
#include "tests/fuzz/fuzz.h"
#include "vmm/cli/cli.h"
#include "vmm/kvm/vm.h"
#include "devices/virtio_blk.h"
#include "devices/virtq_worker.h"

#define MAX_ARGS 64

static char err[512];

static void check_err(int ret)
{
	FZ_ASSERT(ret == 0 || ret == -EINVAL);
	if (ret) {
		FZ_ASSERT(memchr(err, 0, sizeof(err)));
		FZ_ASSERT(err[0] != 0);
		FZ_ASSERT(!strchr(err, '\n'));       /* "mvm: ...": one line */
	}
}

static void check_disk(const struct mvm_disk *o)
{
	char cerr[512];

	FZ_ASSERT(o->path && o->path[0]);
	FZ_ASSERT(!o->serial || strlen(o->serial) <= BLK_SERIAL_MAX);
	FZ_ASSERT(o->queues >= 1 && o->queues <= MVM_MAX_QUEUES);
	FZ_ASSERT(o->poll_us <= VQW_POLL_US_MAX);
	FZ_ASSERT(o->gather_us <= BLK_GATHER_US_MAX);
	FZ_ASSERT(o->cache == MVM_CACHE_WRITEBACK || o->cache == MVM_CACHE_NONE);
	FZ_ASSERT(o->transport == MVM_TRANSPORT_PCI || o->transport == MVM_TRANSPORT_MMIO ||
		  o->transport == MVM_TRANSPORT_CCW);
	FZ_ASSERT(kv_check(&blk_disk_keys, o, o->path, cerr, sizeof(cerr)) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf, *argv[MAX_ARGS + 2];
	struct cli_config *cfg;
	char line[4096];
	int argc = 1, ret;
	size_t i;

	if (size < 1)
		return 0;
	/* The strings: the input after its first byte, NUL-terminated. */
	buf = malloc(size);
	FZ_ASSERT(buf);
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = 0;

	if (data[0] & 1) {
		struct mvm_disk d;
		char *text = malloc(size);

		FZ_ASSERT(text);
		mvm_disk_init(&d, NULL);
		d.queues = 1 + (data[0] >> 3) % 8;
		ret = mvm_disk_parse(&d, buf, text, size, err, sizeof(err));
		check_err(ret);
		if (ret == 0)
			check_disk(&d);
		free(text);
		free(buf);
		return 0;
	}

	argv[0] = "mvm";
	for (i = 0; i < size - 1 && argc <= MAX_ARGS; ) {
		argv[argc++] = buf + i;
		i += strlen(buf + i) + 1;
	}
	argv[argc] = NULL;
	cfg = malloc(sizeof(*cfg));
	FZ_ASSERT(cfg);
	ret = cli_parse(argc, argv, cfg, err, sizeof(err));
	check_err(ret);
	if (ret == 0) {
		FZ_ASSERT(cfg->vm.cpus >= 1 && cfg->vm.cpus <= MVM_MAX_CPUS);
		FZ_ASSERT(cfg->vm.mem >= MVM_MIN_MEM);
		FZ_ASSERT(cfg->ndisks <= MVM_MAX_DISKS);
		for (unsigned d = 0; d < cfg->ndisks; d++)
			check_disk(&cfg->disks[d]);
		FZ_ASSERT(cli_max_queues(cfg) >= (cfg->ndisks ? 1u : 0u));
		cli_auto_cpus(cfg);
		FZ_ASSERT(cfg->vm.cpus >= 1 && cfg->vm.cpus <= MVM_MAX_CPUS);
		ret = vm_compose_cmdline("virtio_mmio.device=4K@0xd0000000:5", cfg->vm.cmdline,
					 line, sizeof(line));
		FZ_ASSERT(ret == 0 || ret == -ENOSPC);
		FZ_ASSERT(memchr(line, 0, sizeof(line)));
	}
	free(cfg);
	free(buf);
	return 0;
}

static void seed(const char *name, uint8_t mode, const char *const *args)
{
	struct fz_buf s = { .n = 0 };

	fzb_u8(&s, mode);
	for (; *args; args++)
		fzb_bytes(&s, *args, strlen(*args) + 1);
	fuzz_seed(name, s.b, s.n);
}

static void fuzz_seeds(void)
{
	seed("every_option", 0, (const char *const[]){
		"--kernel", "bzImage", "--initrd=initrd.cpio", "--cmdline", "console=ttyS0 -- true",
		"--cpus=4", "--mem", "1G", "--queues=2", "--transport", "pci", "--stats", NULL });
	seed("disks", 0, (const char *const[]){
		"--disk", "a.img,ro,serial=disk-a,cache=none,queues=4,poll=50",
		"--disk=b.img,discard=on,transport=mmio,packed=off", "--mem=64M", NULL });
	seed("help", 0, (const char *const[]){ "--help", NULL });
	seed("bad_cpus", 0, (const char *const[]){ "--cpus", "0", "extra", NULL });
	/* what found the two-line error (test_cli: bad_value_with_newline_*) */
	seed("newline_in_value", 0, (const char *const[]){ "--transport", "pci\n\n", NULL });
	seed("disk_spec", 1, (const char *const[]){
		"x.img,serial=0123456789abcdefghij,cache=writeback,discard=off,transport=pci", NULL });
}
