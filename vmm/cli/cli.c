#include "vmm/cli/cli.h"
#include "arch/arch.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
	OPT_KERNEL = 'k', OPT_INITRD = 'i', OPT_CMDLINE = 'a', OPT_CPUS = 'c',
	OPT_MEM = 'm', OPT_HELP = 'h', OPT_VERSION = 'V',
	OPT_STATS = 0x100, OPT_DISK, OPT_QUEUES, OPT_IO_THREADS, OPT_TRANSPORT, OPT_PROBE_KVM,
	OPT_SANDBOX, OPT_CHROOT, OPT_UID, OPT_GID, OPT_PVPANIC, OPT_NETNS, OPT_NEW_PID_NS,
	OPT_CGROUP, OPT_CGROUP_SET,
};

/* One row per option; cli_parse switches on .val. */
static const struct option cli_options[] = {
	{ "kernel",  required_argument, NULL, OPT_KERNEL },
	{ "initrd",  required_argument, NULL, OPT_INITRD },
	{ "cmdline", required_argument, NULL, OPT_CMDLINE },
	{ "cpus",    required_argument, NULL, OPT_CPUS },
	{ "mem",     required_argument, NULL, OPT_MEM },
	{ "stats",   no_argument,       NULL, OPT_STATS },
	{ "disk",    required_argument, NULL, OPT_DISK },
	{ "queues",  required_argument, NULL, OPT_QUEUES },
	{ "io-threads", required_argument, NULL, OPT_IO_THREADS },
	{ "transport", required_argument, NULL, OPT_TRANSPORT },
	{ "probe-kvm", no_argument,     NULL, OPT_PROBE_KVM },
	{ "sandbox", required_argument, NULL, OPT_SANDBOX },
	{ "pvpanic", required_argument, NULL, OPT_PVPANIC },
	{ "chroot",  required_argument, NULL, OPT_CHROOT },
	{ "uid",     required_argument, NULL, OPT_UID },
	{ "gid",     required_argument, NULL, OPT_GID },
	{ "netns",   required_argument, NULL, OPT_NETNS },
	{ "new-pid-ns", no_argument,    NULL, OPT_NEW_PID_NS },
	{ "cgroup",  required_argument, NULL, OPT_CGROUP },
	{ "cgroup-set", required_argument, NULL, OPT_CGROUP_SET },
	{ "help",    no_argument,       NULL, OPT_HELP },
	{ "version", no_argument,       NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

/* The message quotes what the user typed, which may hold a newline or
 * other control characters: they become '?', so that it stays one line
 * ("mvm: ...", exit status 2) whatever the argument. */
__attribute__((format(printf, 3, 4)))
static int cli_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	char *p;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	for (p = err; errlen && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return -EINVAL;
}

void cli_usage(FILE *out)
{
	fputs("usage: mvm [options]\n"
	      "  --kernel PATH    bzImage or ELF vmlinux with a PVH note\n"
	      "                   (default: build/guest/bzImage next to mvm, the test guest)\n"
	      "  --initrd PATH    initramfs (default with the test guest: build/guest/initramfs.cpio.gz)\n"
	      "  --cmdline STR    kernel parameters, appended last so they override mvm's\n"
	      "                   defaults; the test guest runs what follows ' -- '\n"
	      "  --cpus N         vCPUs, 1 to min(254, KVM's maximum) (default 1)\n"
	      "  --mem SIZE       guest RAM, e.g. 512M, 4G (default 256M; at least 16M, at most\n"
	      "                   the host's RAM + swap and below 1 TiB)\n"
	      "  --disk PATH[,ro][,serial=ID][,cache=none|writeback][,discard=on][,queues=N]\n"
	      "       [,io-threads=N][,poll=USEC][,gather=USEC][,transport=mmio|pci|ccw]\n"
	      "       [,packed=on|off][,fixed-buffers=on|off]\n"
	      "                   raw disk image as virtio-blk (vda, vdb, ... in order; up to 16)\n"
	      "  --queues N       virtqueues per disk (default 1) for every disk without\n"
	      "                   ,queues=; without --cpus, the guest gets as many vCPUs as\n"
	      "                   the most queues of any disk\n"
	      "  --io-threads N   host threads serving each disk's queues, for every disk\n"
	      "                   without ,io-threads= (default: one per queue, at most as\n"
	      "                   many as CPUs mvm may run on; never more than queues)\n"
	      "                   ,poll=USEC: the longest time an idle thread polls for work\n"
	      "                   (default 32; it adapts below that, 0: never)\n"
	      "                   ,gather=USEC: the longest an I/O thread waits after a kick\n"
	      "                   for more requests to batch (default 200; it adapts below\n"
	      "                   that and turns itself off at low queue depths; 0: never)\n"
	      "                   ,fixed-buffers=on: guest RAM registered with io_uring, so\n"
	      "                   O_DIRECT I/O skips pinning pages per request; pins all of\n"
	      "                   guest RAM (needs RLIMIT_MEMLOCK or CAP_IPC_LOCK; default off)\n"
	      "  --transport T    pci, mmio or ccw, for every disk without ,transport=\n"
	      "                   (default: pci on x86, ccw on s390x)\n"
	      "  --stats          print exit and device counters as JSON on stderr at exit\n"
	      "  --sandbox on|off seccomp filters per thread, resource limits, no new\n"
	      "                   privileges (default on; off only to debug)\n"
	      "  --pvpanic on|off a pvpanic device (x86): a guest kernel panic ends mvm with\n"
	      "                   status 123 instead of a reboot (default on)\n"
	      "  --chroot DIR     once /dev/kvm, the kernel and the disks are open, DIR becomes\n"
	      "                   the root (a mount namespace, pivot_root, read-only; root only)\n"
	      "  --uid N --gid N  then run as this user and group, with no supplementary group\n"
	      "                   and no capability (give both; a uid of its own per VM:\n"
	      "                   RLIMIT_NPROC counts the user's other threads). As root,\n"
	      "                   --sandbox on needs them: --uid 0 --gid 0 stays root\n"
	      "  --netns PATH     join this network namespace (/run/netns/NAME) first\n"
	      "  --new-pid-ns     run the VM as PID 1 of a new PID namespace (mvm forks; the\n"
	      "                   parent forwards signals and exits with the VM's status)\n"
	      "  --cgroup DIR     move mvm into this cgroup v2 directory (made if missing)\n"
	      "                   first, after writing each --cgroup-set FILE=VALUE there\n"
	      "                   (e.g. memory.max=1G, cpu.max=\"50000 100000\", pids.max=64)\n"
	      "  --probe-kvm      say whether this host's /dev/kvm can run guests: prints\n"
	      "                   'direct: WHY' or 'nested: WHY' (MVM_KVM=direct|nested|auto\n"
	      "                   overrides; the verdict is cached for this host boot)\n"
	      "  --help, --version\n"
	      "Console: the guest's serial port is on stdin/stdout; on a terminal type\n"
	      "Ctrl-A x to quit, Ctrl-A Ctrl-A to send Ctrl-A.\n"
	      "Exit status: 0 guest poweroff/reboot, the byte the guest wrote to port 0x501,\n"
	      "2 bad usage, 122 guest crashed (triple fault), 123 guest kernel panicked,\n"
	      "125 host/KVM failure, 126 unhandled guest exit, 128+N on signal N.\n",
	      out);
}

int cli_parse(int argc, char **argv, struct cli_config *cfg, char *err, size_t errlen)
{
	uint64_t v;
	int c, ret;

	const char *disk_specs[CLI_MAX_DISKS];
	bool uid_given = false, gid_given = false;
	unsigned io_threads = 0;
	unsigned i;

	memset(cfg, 0, sizeof(*cfg));
	cfg->cpus = CLI_DEFAULT_CPUS;
	cfg->queues = 1;
	cfg->transport = CLI_DEFAULT_TRANSPORT;
	cfg->mem = CLI_DEFAULT_MEM;
	cfg->sandbox = true;
	cfg->pvpanic = true;
	optind = 0;     /* GNU: full re-initialisation, so tests can parse again */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:", cli_options, NULL)) != -1) {
		switch (c) {
		case OPT_KERNEL:
			if (!*optarg)
				return cli_err(err, errlen, "--kernel: empty path; give a bzImage or vmlinux");
			cfg->kernel = optarg;
			break;
		case OPT_INITRD:
			if (!*optarg)
				return cli_err(err, errlen, "--initrd: empty path; give an initramfs file");
			cfg->initrd = optarg;
			break;
		case OPT_CMDLINE:
			cfg->cmdline = optarg;
			break;
		case OPT_CPUS:
			ret = parse_uint(optarg, 1, CLI_MAX_CPUS, &v);
			if (ret)
				return cli_err(err, errlen, "--cpus '%s': %s; give a number from 1 to %d",
					       optarg, ret == -ERANGE ? "out of range" : "not a number",
					       CLI_MAX_CPUS);
			cfg->cpus = v;
			cfg->cpus_given = true;
			break;
		case OPT_MEM:
			ret = parse_size(optarg, &v);
			if (ret)
				return cli_err(err, errlen, "--mem '%s': %s; give a size like 512M or 2G",
					       optarg, ret == -ERANGE ? "too large" : "malformed size");
			if (v < CLI_MIN_MEM)
				return cli_err(err, errlen, "--mem '%s': too small; give at least 16M "
					       "(a number without suffix is bytes)", optarg);
			if (v % 4096)
				return cli_err(err, errlen, "--mem '%s': not a multiple of 4 KiB; "
					       "give a size like 512M", optarg);
			cfg->mem = v;
			break;
		case OPT_STATS:
			cfg->stats = true;
			break;
		case OPT_DISK:
			if (cfg->ndisks == CLI_MAX_DISKS)
				return cli_err(err, errlen, "--disk '%s': more than %d disks; "
					       "give at most %d", optarg, CLI_MAX_DISKS, CLI_MAX_DISKS);
			disk_specs[cfg->ndisks++] = optarg;
			break;
		case OPT_QUEUES:
			ret = parse_uint(optarg, 1, BLK_MAX_QUEUES, &v);
			if (ret)
				return cli_err(err, errlen, "--queues '%s': %s; give a number from 1 to %d",
					       optarg, ret == -ERANGE ? "out of range" : "not a number",
					       BLK_MAX_QUEUES);
			cfg->queues = v;
			break;
		case OPT_IO_THREADS:
			ret = parse_uint(optarg, 1, BLK_MAX_QUEUES, &v);
			if (ret)
				return cli_err(err, errlen, "--io-threads '%s': %s; give a number from 1 "
					       "to %d", optarg, ret == -ERANGE ? "out of range" :
					       "not a number", BLK_MAX_QUEUES);
			io_threads = (unsigned)v;
			break;
		case OPT_TRANSPORT:
			if (!strcmp(optarg, "mmio"))
				cfg->transport = CLI_TRANSPORT_MMIO;
			else if (!strcmp(optarg, "pci"))
				cfg->transport = CLI_TRANSPORT_PCI;
			else if (!strcmp(optarg, "ccw"))
				cfg->transport = CLI_TRANSPORT_CCW;
			else
				return cli_err(err, errlen, "--transport '%s': unknown; give mmio, pci "
					       "or ccw", optarg);
			break;
		case OPT_SANDBOX:
			if (!strcmp(optarg, "on"))
				cfg->sandbox = true;
			else if (!strcmp(optarg, "off"))
				cfg->sandbox = false;
			else
				return cli_err(err, errlen, "--sandbox '%s': give on or off", optarg);
			break;
		case OPT_PVPANIC:
			if (!strcmp(optarg, "on"))
				cfg->pvpanic = true;
			else if (!strcmp(optarg, "off"))
				cfg->pvpanic = false;
			else
				return cli_err(err, errlen, "--pvpanic '%s': give on or off", optarg);
			break;
		case OPT_CHROOT:
			if (!*optarg)
				return cli_err(err, errlen, "--chroot: empty path; give a directory");
			cfg->chroot_dir = optarg;
			break;
		case OPT_UID:
		case OPT_GID:
			ret = parse_uint(optarg, 0, UINT32_MAX - 1, &v);
			if (ret)
				return cli_err(err, errlen, "--%s '%s': not a numeric id; give a "
					       "number like 65534", c == OPT_UID ? "uid" : "gid", optarg);
			if (c == OPT_UID)
				cfg->uid = (unsigned)v, uid_given = true;
			else
				cfg->gid = (unsigned)v, gid_given = true;
			break;
		case OPT_NETNS:
		case OPT_CGROUP:
			if (!*optarg)
				return cli_err(err, errlen, "--%s: empty path; give a %s",
					       c == OPT_NETNS ? "netns" : "cgroup", c == OPT_NETNS ?
					       "network namespace file" : "cgroup v2 directory");
			*(c == OPT_NETNS ? &cfg->netns : &cfg->cgroup) = optarg;
			break;
		case OPT_NEW_PID_NS:
			cfg->new_pid_ns = true;
			break;
		case OPT_CGROUP_SET:
			if (cfg->ncgroup_set == JAIL_MAX_CGROUP_SET)
				return cli_err(err, errlen, "--cgroup-set '%s': more than %d; set the "
					       "others in the cgroup beforehand", optarg,
					       JAIL_MAX_CGROUP_SET);
			cfg->cgroup_set[cfg->ncgroup_set++] = optarg;
			break;
		case OPT_HELP:
			cfg->help = true;
			break;
		case OPT_PROBE_KVM:
			cfg->probe_kvm = true;
			break;
		case OPT_VERSION:
			cfg->version = true;
			break;
		case ':':
			return cli_err(err, errlen, "%s: needs a value; see mvm --help",
				       argv[optind - 1]);
		default:
			return cli_err(err, errlen, "unknown option '%s'; see mvm --help",
				       argv[optind - 1]);
		}
	}
	if (optind < argc)
		return cli_err(err, errlen, "unexpected argument '%s'; options start with --, "
			       "see mvm --help", argv[optind]);
	if (uid_given != gid_given)
		return cli_err(err, errlen, "--%s given without --%s; give both",
			       uid_given ? "uid" : "gid", uid_given ? "gid" : "uid");
	cfg->ids_set = uid_given;
	/* Disks last: --queues/--transport are global defaults. */
	for (i = 0; i < cfg->ndisks; i++) {
		ret = cli_parse_disk(disk_specs[i], cfg->queues, cfg->transport, &cfg->disks[i],
				     err, errlen);
		if (ret)
			return ret;
		if (!cfg->disks[i].opts.io_threads)
			cfg->disks[i].opts.io_threads = io_threads;
	}
	return 0;
}

/* A --disk NAME=USEC option: 0 (off) to max microseconds. */
static int parse_usec_opt(const char *name, const char *what, const char *val, unsigned max,
			  unsigned *out, char *err, size_t errlen)
{
	uint64_t us;

	if (parse_uint(val, 0, max, &us))
		return cli_err(err, errlen, "--disk %s='%s': %s in microseconds; use 0 (off) to %u",
			       name, val, what, max);
	*out = (unsigned)us;
	return 0;
}

int cli_parse_blk_opts(const char *spec, unsigned default_queues, struct blk_opts *o,
		   char *err, size_t errlen)
{
	const char *p, *comma;
	size_t n;

	memset(o, 0, sizeof(*o));
	o->cache = BLK_CACHE_WRITEBACK;
	o->queues = default_queues ? default_queues : 1;
	o->poll_us = BLK_POLL_US_DEFAULT;
	o->gather_us = BLK_GATHER_US_DEFAULT;
	if (o->queues > BLK_MAX_QUEUES)
		return cli_err(err, errlen, "--queues %u: at most %u queues per disk; use a smaller number",
			   default_queues, BLK_MAX_QUEUES);
	if (!spec || !*spec || *spec == ',')
		return cli_err(err, errlen, "--disk '%s': missing image path; use --disk PATH[,ro][,serial=ID]"
			   "[,cache=none|writeback][,discard=on][,queues=N]", spec ? spec : "");

	comma = strchr(spec, ',');
	n = comma ? (size_t)(comma - spec) : strlen(spec);
	if (n >= sizeof(o->path))
		return cli_err(err, errlen, "--disk: image path is longer than %zu bytes; use a shorter path",
			   sizeof(o->path) - 1);
	memcpy(o->path, spec, n);
	o->path[n] = '\0';

	for (p = comma; p; p = comma) {
		char opt[128];
		const char *val;

		p++;
		comma = strchr(p, ',');
		n = comma ? (size_t)(comma - p) : strlen(p);
		if (n == 0)
			return cli_err(err, errlen, "--disk '%s': empty option (two commas or a trailing comma); "
				   "remove it", spec);
		if (n >= sizeof(opt))
			return cli_err(err, errlen, "--disk '%s': option too long; see --help for disk options", spec);
		memcpy(opt, p, n);
		opt[n] = '\0';
		val = strchr(opt, '=');
		if (val)
			val++;

		if (!strcmp(opt, "ro")) {
			o->ro = true;
		} else if (!strcmp(opt, "rw")) {
			o->ro = false;
		} else if (!strncmp(opt, "serial=", 7)) {
			size_t i, len = strlen(val);
			if (len > BLK_SERIAL_MAX)
				return cli_err(err, errlen, "--disk serial '%s' is %zu bytes; at most %u bytes fit "
					   "the virtio-blk ID, use a shorter serial",
					   val, len, BLK_SERIAL_MAX);
			for (i = 0; i < len; i++)
				if (val[i] < 0x20 || val[i] > 0x7e)
					return cli_err(err, errlen, "--disk serial '%s': only printable ASCII is allowed",
						   val);
			memcpy(o->serial, val, len + 1);
		} else if (!strncmp(opt, "cache=", 6)) {
			if (!strcmp(val, "none"))
				o->cache = BLK_CACHE_NONE;
			else if (!strcmp(val, "writeback"))
				o->cache = BLK_CACHE_WRITEBACK;
			else
				return cli_err(err, errlen, "--disk cache='%s': unknown cache mode; use cache=none "
					   "or cache=writeback", val);
		} else if (!strncmp(opt, "discard=", 8)) {
			if (!strcmp(val, "on") || !strcmp(val, "unmap"))
				o->discard = true;
			else if (!strcmp(val, "off") || !strcmp(val, "ignore"))
				o->discard = false;
			else
				return cli_err(err, errlen, "--disk discard='%s': use discard=on or discard=off", val);
		} else if (!strncmp(opt, "queues=", 7)) {
			uint64_t q;
			int r = parse_uint(val, 1, BLK_MAX_QUEUES, &q);
			if (r)
				return cli_err(err, errlen, "--disk queues='%s': %s; use a number from 1 to %u",
					   val, r == -ERANGE ? "out of range" : "not a number",
					   BLK_MAX_QUEUES);
			o->queues = (unsigned)q;
		} else if (!strncmp(opt, "io-threads=", 11)) {
			uint64_t t;
			int r = parse_uint(val, 1, BLK_MAX_QUEUES, &t);
			if (r)
				return cli_err(err, errlen, "--disk io-threads='%s': %s; use a number from "
					       "1 to %u", val, r == -ERANGE ? "out of range" :
					       "not a number", BLK_MAX_QUEUES);
			o->io_threads = (unsigned)t;
		} else if (!strncmp(opt, "poll=", 5)) {
			if (parse_usec_opt("poll", "polling window", val, BLK_POLL_US_MAX, &o->poll_us,
					   err, errlen))
				return -EINVAL;
		} else if (!strncmp(opt, "fixed-buffers=", 14)) {
			if (!strcmp(val, "on"))
				o->fixed_buffers = true;
			else if (!strcmp(val, "off"))
				o->fixed_buffers = false;
			else
				return cli_err(err, errlen, "--disk fixed-buffers='%s': use fixed-buffers=on "
					       "or fixed-buffers=off", val);
		} else if (!strncmp(opt, "gather=", 7)) {
			if (parse_usec_opt("gather", "wait after a kick", val, BLK_GATHER_US_MAX,
					   &o->gather_us, err, errlen))
				return -EINVAL;
		} else {
			return cli_err(err, errlen, "--disk: unknown option '%s'; valid options are ro, serial=ID, "
				   "cache=none|writeback, discard=on|off, queues=N, io-threads=N, poll=USEC, "
				   "gather=USEC, fixed-buffers=on|off", opt);
		}
	}
	return 0;
}

int cli_parse_disk(const char *spec, unsigned default_queues, enum cli_transport default_transport,
		   struct cli_disk *d, char *err, size_t errlen)
{
	char rest[sizeof(d->opts.path) + 256];
	const char *p, *comma;
	size_t n = 0;

	memset(d, 0, sizeof(*d));
	d->spec = spec;
	d->transport = default_transport;
	d->packed = true;
	/* The first field is the path (it may not contain a comma); keep it
	 * and every key mvm's block layer understands, take ours out. */
	comma = strchr(spec, ',');
	n = comma ? (size_t)(comma - spec) : strlen(spec);
	if (n >= sizeof(rest))
		return cli_err(err, errlen, "--disk '%.64s...': path too long", spec);
	memcpy(rest, spec, n);
	for (p = comma; p; p = comma) {
		const char *key = p + 1;
		size_t klen;

		comma = strchr(key, ',');
		klen = comma ? (size_t)(comma - key) : strlen(key);
		if (klen == 14 && !strncmp(key, "transport=mmio", klen)) {
			d->transport = CLI_TRANSPORT_MMIO;
			d->transport_set = true;
		} else if (klen == 13 && !strncmp(key, "transport=pci", klen)) {
			d->transport = CLI_TRANSPORT_PCI;
			d->transport_set = true;
		} else if (klen == 13 && !strncmp(key, "transport=ccw", klen)) {
			d->transport = CLI_TRANSPORT_CCW;
			d->transport_set = true;
		} else if (klen > 10 && !strncmp(key, "transport=", 10)) {
			return cli_err(err, errlen, "--disk '%s': transport '%.*s' unknown; "
				       "give transport=mmio, transport=pci or transport=ccw", spec,
				       (int)(klen - 10), key + 10);
		} else if (klen == 9 && !strncmp(key, "packed=on", klen)) {
			d->packed = true;
		} else if (klen == 10 && !strncmp(key, "packed=off", klen)) {
			d->packed = false;
		} else if (klen >= 7 && !strncmp(key, "packed=", 7)) {
			return cli_err(err, errlen, "--disk '%s': packed '%.*s' unknown; "
				       "give packed=on or packed=off", spec, (int)(klen - 7), key + 7);
		} else {
			if (n + 1 + klen >= sizeof(rest))
				return cli_err(err, errlen, "--disk '%.64s...': too long", spec);
			rest[n++] = ',';
			memcpy(rest + n, key, klen);
			n += klen;
		}
	}
	rest[n] = '\0';
	return cli_parse_blk_opts(rest, default_queues, &d->opts, err, errlen);
}

unsigned cli_max_queues(const struct cli_config *cfg)
{
	unsigned i, q = 0;

	for (i = 0; i < cfg->ndisks; i++)
		q = MAX(q, cfg->disks[i].opts.queues);
	return q;
}

bool cli_auto_cpus(struct cli_config *cfg)
{
	unsigned q = cli_max_queues(cfg), max = MIN(CLI_MAX_CPUS, arch_layout.max_vcpus);

	if (cfg->cpus_given || q <= cfg->cpus || cfg->cpus >= max)
		return false;
	cfg->cpus = MIN(q, max);
	return true;
}

int cli_default_guest(struct cli_config *cfg, const char *exe_dir, char *err, size_t errlen)
{
	if (cfg->kernel)
		return 0;
	if ((size_t)snprintf(cfg->kernel_buf, sizeof(cfg->kernel_buf), "%s/build/guest/bzImage",
			     exe_dir) >= sizeof(cfg->kernel_buf) ||
	    (size_t)snprintf(cfg->initrd_buf, sizeof(cfg->initrd_buf),
			     "%s/build/guest/initramfs.cpio.gz", exe_dir) >= sizeof(cfg->initrd_buf))
		return cli_err(err, errlen, "path of the mvm binary too long: '%s'", exe_dir);
	if (access(cfg->kernel_buf, R_OK) ||
	    (!cfg->initrd && access(cfg->initrd_buf, R_OK))) {
		cli_err(err, errlen, "no --kernel given and the test guest (%s) is missing; "
			"run 'make guest' or pass --kernel", cfg->kernel_buf);
		return -ENOENT;
	}
	cfg->kernel = cfg->kernel_buf;
	if (!cfg->initrd)
		cfg->initrd = cfg->initrd_buf;
	return 0;
}
