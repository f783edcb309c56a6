#include "vmm/cli/cli.h"
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
	OPT_CGROUP, OPT_CGROUP_SET, OPT_ID, OPT_VSOCK, OPT_RATE_GROUP, OPT_API_SOCKET,
	OPT_HOTPLUG_SLOTS, OPT_RESTORE, OPT_SNAPSHOT_DIR, OPT_IMAGE_DIR, OPT_MEM_FILE,
};

/* One row per option; cli_parse switches on .val. */
static const struct option cli_options[] = {
	{ "kernel",  required_argument, NULL, OPT_KERNEL },
	{ "initrd",  required_argument, NULL, OPT_INITRD },
	{ "cmdline", required_argument, NULL, OPT_CMDLINE },
	{ "cpus",    required_argument, NULL, OPT_CPUS },
	{ "mem",     required_argument, NULL, OPT_MEM },
	{ "stats",   no_argument,       NULL, OPT_STATS },
	{ "api-socket", required_argument, NULL, OPT_API_SOCKET },
	{ "disk",    required_argument, NULL, OPT_DISK },
	{ "queues",  required_argument, NULL, OPT_QUEUES },
	{ "io-threads", required_argument, NULL, OPT_IO_THREADS },
	{ "transport", required_argument, NULL, OPT_TRANSPORT },
	{ "vsock",   required_argument, NULL, OPT_VSOCK },
	{ "rate-limit-group", required_argument, NULL, OPT_RATE_GROUP },
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
	{ "id",      required_argument, NULL, OPT_ID },
	{ "hotplug-slots", required_argument, NULL, OPT_HOTPLUG_SLOTS },
	{ "restore", required_argument, NULL, OPT_RESTORE },
	{ "snapshot-dir", required_argument, NULL, OPT_SNAPSHOT_DIR },
	{ "image-dir", required_argument, NULL, OPT_IMAGE_DIR },
	{ "mem-file", required_argument, NULL, OPT_MEM_FILE },
	{ "help",    no_argument,       NULL, OPT_HELP },
	{ "version", no_argument,       NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

/* The long name of option c, without its dashes. */
static const char *cli_option_name(int c)
{
	const struct option *o;

	for (o = cli_options; o->name; o++)
		if (o->val == c)
			return o->name;
	return "?";
}

/* A usage error: err_set's one line ("mvm: ...", exit status 2), whatever
 * the argument it quotes holds. */
__attribute__((format(printf, 3, 4)))
static int cli_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = err_vset(err, errlen, -EINVAL, fmt, ap);
	va_end(ap);
	return ret;
}

/* --disk's syntax and keys come from the device's table (mvm_disk_parse):
 * what the parser takes is what the help says. */
/* A syntax line after its option, wrapped at the brackets, the
 * continuation indented. */
static void cli_usage_syntax(FILE *out, const char *option, const char *syntax)
{
	const char *p, *cut;
	/* --disk's first line sets the width the others keep. */
	size_t w = strlen(option) > 6 ? strlen(option) - 6 : 0;

	fprintf(out, "  %s ", option);
	for (p = syntax; *p; p = cut) {
		cut = strchr(p + 1, '[');
		if (!cut)
			cut = p + strlen(p);
		if (w && w + (size_t)(cut - p) > 70) {
			fputs("\n       ", out);
			w = 0;
		}
		fprintf(out, "%.*s", (int)(cut - p), p);
		w += (size_t)(cut - p);
	}
}

static void cli_usage_disk(FILE *out)
{
	char syntax[1024], help[4096];

	mvm_disk_syntax(syntax, sizeof(syntax));
	cli_usage_syntax(out, "--disk", syntax);
	fputs("\n                   raw disk image as virtio-blk (vda, vdb, ... in order; up to 16):\n",
	      out);
	mvm_disk_help(19, help, sizeof(help));
	fputs(help, out);
}

/* --vsock's, from the device's table (mvm_vsock_parse). */
static void cli_usage_vsock(FILE *out)
{
	char syntax[512], help[4096];

	mvm_vsock_syntax(syntax, sizeof(syntax));
	fprintf(out, "  --vsock %s\n"
		"                   a virtio-vsock device: host programs reach the guest's ports\n"
		"                   through PATH (\"CONNECT <port>\\n\", as Firecracker and Cloud\n"
		"                   Hypervisor), the guest's connects to CID 2 port P reach PATH_P:\n",
		syntax);
	mvm_vsock_help(19, help, sizeof(help));
	fputs(help, out);
}

/* --rate-limit-group's, from its table (mvm_rate_group_parse). */
static void cli_usage_rate_group(FILE *out)
{
	char syntax[512], help[4096];

	mvm_rate_group_syntax(syntax, sizeof(syntax));
	cli_usage_syntax(out, "--rate-limit-group", syntax);
	fprintf(out, "\n                   I/O limits that the disks naming it (rate_limit_group=ID)\n"
		"                   share, on top of their own (repeatable):\n");
	mvm_rate_group_help(19, help, sizeof(help));
	fputs(help, out);
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
	      "                   the host's RAM + swap and below 1 TiB)\n",
	      out);
	cli_usage_disk(out);
	cli_usage_vsock(out);
	cli_usage_rate_group(out);
	fputs("  --queues N       virtqueues per disk (default 1) for every disk without\n"
	      "                   ,queues= and for each hot-plug slot's; without --cpus, the\n"
	      "                   guest gets as many vCPUs as the most queues of any disk\n"
	      "  --io-threads N   host threads serving each disk's queues, for every disk\n"
	      "                   without ,io-threads= (default: one per queue, at most as\n"
	      "                   many as CPUs mvm may run on; never more than queues)\n"
	      "  --transport T    pci, mmio or ccw, for every disk and --vsock without\n"
	      "                   ,transport= (default: pci on x86, ccw on s390x)\n"
	      "  --id NAME        the VM's name in its threads' names (NAME-ctl, NAME-d0q0;\n"
	      "                   vCPUs are vcpu0, vcpu1, ...): up to 8 letters, digits, '-',\n"
	      "                   '_' or '.' (default mvm)\n"
	      "  --hotplug-slots N  empty hot-plug slots (0 to 8, default 0): PCIe root\n"
	      "                   ports (x86; the guest needs pciehp) or subchannels\n"
	      "                   (s390x); disks added while the VM runs go there (the\n"
	      "                   API's vm.add-disk)\n"
	      "  --restore DIR    go on from the snapshot in DIR (vm.snapshot) instead of\n"
	      "                   booting: its vCPUs, memory, devices and disks; --disk\n"
	      "                   options, in the snapshot's number, give other images\n"
	      "  --mem-file PATH  guest RAM in this file (emptied first), mapped shared: a\n"
	      "                   snapshot into its directory (PATH is DIR/memory) costs a\n"
	      "                   flush, not a copy\n"
	      "  --snapshot-dir DIR  where the API's vm.snapshot may write (made if missing,\n"
	      "                   opened at the start): DIR or directories beneath it; the\n"
	      "                   only place with --sandbox on, even after --chroot\n"
	      "  --image-dir DIR  where the API may open images while the VM runs (a new\n"
	      "                   image for vm.update-disk, a disk for vm.add-disk), opened\n"
	      "                   at the start: the only place with --sandbox on, even after\n"
	      "                   --chroot\n"
	      "  --stats          print exit and device counters as JSON on stderr at exit\n"
	      "  --api-socket [path=]PATH\n"
	      "                   serve Cloud Hypervisor's REST API (HTTP over this Unix\n"
	      "                   socket, mode 0600): vmm.ping, vm.info, vm.counters,\n"
	      "                   vm.pause, vm.resume, vm.snapshot, vm.restore, vm.shutdown,\n"
	      "                   vmm.shutdown (docs/api.md)\n"
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

/* What cli_parse keeps while it reads the line. --queues, --io-threads
 * and --transport set the keys of a disk that every --disk starts from
 * (with the device's own parser, mvm_disk_set), so they apply wherever
 * they stand on the line and a disk's own ,queues= and so on win. */
struct cli_state {
	const char *disk_specs[MVM_MAX_DISKS];
	struct mvm_disk tmpl;
	const char *vsock_spec;
	const char *group_specs[MVM_MAX_DISKS];
	bool transport_given;
	bool uid_given, gid_given;
	const char *shape_opt;  /* an option a restore's snapshot decides */
};

/* A library message about a field ("queues '0': ...", "disk ...") as the
 * command line says it: about its option. */
static int cli_err_option(char *err, size_t errlen)
{
	char msg[MVM_ERR_MAX];

	snprintf(msg, sizeof(msg), "%s", err);
	return cli_err(err, errlen, "--%s", msg);
}

/* Each --disk value straight into its struct mvm_disk: the template, then
 * what the value says (the device's keys: mvm_disk_parse). Their strings
 * live in cfg->disk_text. */
static int cli_parse_disks(struct cli_config *cfg, const struct cli_state *st, char *err,
			   size_t errlen)
{
	size_t used = 0;
	unsigned i;
	int ret;

	for (i = 0; i < cfg->ndisks; i++) {
		struct mvm_disk *d = &cfg->disks[i];

		*d = st->tmpl;
		ret = mvm_disk_parse(d, st->disk_specs[i], cfg->disk_text + used,
				     sizeof(cfg->disk_text) - used, err, errlen);
		if (ret == -ENOSPC)
			return cli_err(err, errlen, "--disk '%.64s...': the disks' values are "
				       "longer than %zu bytes in all; give shorter paths",
				       st->disk_specs[i], sizeof(cfg->disk_text));
		if (ret)
			return cli_err_option(err, errlen);
		used += strlen(st->disk_specs[i]) + 1;
	}
	return 0;
}

/* The VM's own options, into cfg->vm. 1: taken, 0: not one of these. */
static int cli_vm_option(int c, const char *arg, struct cli_config *cfg, char *err,
			 size_t errlen)
{
	uint64_t v;
	int ret;

	switch (c) {
	case OPT_KERNEL:
	case OPT_INITRD:
		if (!*arg)
			return c == OPT_KERNEL ?
			       cli_err(err, errlen, "--kernel: empty path; give a bzImage or vmlinux") :
			       cli_err(err, errlen, "--initrd: empty path; give an initramfs file");
		*(c == OPT_KERNEL ? &cfg->vm.kernel : &cfg->vm.initrd) = arg;
		return 1;
	case OPT_CMDLINE:
		cfg->vm.cmdline = arg;
		return 1;
	case OPT_CPUS:
		ret = parse_uint(arg, 1, MVM_MAX_CPUS, &v);
		if (ret)
			return cli_err(err, errlen, "--cpus '%s': %s; give a number from 1 to %d",
				       arg, ret == -ERANGE ? "out of range" : "not a number",
				       MVM_MAX_CPUS);
		cfg->vm.cpus = v;
		cfg->cpus_given = true;
		return 1;
	case OPT_MEM:
		ret = parse_size(arg, &v);
		if (ret)
			return cli_err(err, errlen, "--mem '%s': %s; give a size like 512M or 2G",
				       arg, ret == -ERANGE ? "too large" : "malformed size");
		if (v < MVM_MIN_MEM)
			return cli_err(err, errlen, "--mem '%s': too small; give at least 16M "
				       "(a number without suffix is bytes)", arg);
		if (v % 4096)
			return cli_err(err, errlen, "--mem '%s': not a multiple of 4 KiB; "
				       "give a size like 512M", arg);
		cfg->vm.mem = v;
		return 1;
	case OPT_ID:
		cfg->vm.id = arg;       /* checked by the library (mvm_create) */
		return 1;
	case OPT_RESTORE:
		if (!*arg)
			return cli_err(err, errlen, "--restore: empty path; give the directory of "
				       "a snapshot (vm.snapshot)");
		cfg->vm.restore = arg;
		return 1;
	case OPT_SNAPSHOT_DIR:
		if (!*arg)
			return cli_err(err, errlen, "--snapshot-dir: empty path; give the directory "
				       "snapshots go to");
		cfg->vm.snapshot_dir = arg;
		return 1;
	case OPT_IMAGE_DIR:
		if (!*arg)
			return cli_err(err, errlen, "--image-dir: empty path; give the directory "
				       "the API may open images in");
		cfg->vm.image_dir = arg;
		return 1;
	case OPT_MEM_FILE:
		if (!*arg)
			return cli_err(err, errlen, "--mem-file: empty path; give the file guest RAM "
				       "is to be in");
		cfg->vm.mem_file = arg;
		return 1;
	case OPT_HOTPLUG_SLOTS:
		ret = parse_uint(arg, 0, MVM_MAX_HOTPLUG_SLOTS, &v);
		if (ret)
			return cli_err(err, errlen, "--hotplug-slots '%s': %s; give a number from 0 "
				       "to %d", arg, ret == -ERANGE ? "out of range" : "not a number",
				       MVM_MAX_HOTPLUG_SLOTS);
		cfg->vm.hotplug_slots = v;
		return 1;
	case OPT_SANDBOX:
	case OPT_PVPANIC:
		if (strcmp(arg, "on") && strcmp(arg, "off"))
			return cli_err(err, errlen, "--%s '%s': give on or off",
				       c == OPT_SANDBOX ? "sandbox" : "pvpanic", arg);
		*(c == OPT_SANDBOX ? &cfg->vm.sandbox : &cfg->vm.pvpanic) = !strcmp(arg, "on");
		return 1;
	}
	return 0;
}

/* --disk and the defaults for every disk. 1: taken, 0: not one of these. */
static int cli_disk_option(int c, const char *arg, struct cli_config *cfg, struct cli_state *st,
			   char *err, size_t errlen)
{
	const char *key = c == OPT_QUEUES ? "queues" : c == OPT_IO_THREADS ? "io-threads" :
			  c == OPT_TRANSPORT ? "transport" : NULL;

	if (c == OPT_DISK) {
		if (cfg->ndisks == MVM_MAX_DISKS)
			return cli_err(err, errlen, "--disk '%s': more than %d disks; give at most %d",
				       arg, MVM_MAX_DISKS, MVM_MAX_DISKS);
		st->disk_specs[cfg->ndisks++] = arg;
		return 1;
	}
	if (c == OPT_VSOCK) {
		if (st->vsock_spec)
			return cli_err(err, errlen, "--vsock '%s': a second one; a VM has one vsock "
				       "device (give --vsock once)", arg);
		st->vsock_spec = arg;
		return 1;
	}
	if (c == OPT_RATE_GROUP) {
		if (cfg->ngroups == MVM_MAX_DISKS)
			return cli_err(err, errlen, "--rate-limit-group '%s': more than %d groups; "
				       "give at most %d", arg, MVM_MAX_DISKS, MVM_MAX_DISKS);
		st->group_specs[cfg->ngroups++] = arg;
		return 1;
	}
	if (!key)
		return 0;
	if (mvm_disk_set(&st->tmpl, key, arg, err, errlen))
		return cli_err_option(err, errlen);
	st->transport_given |= c == OPT_TRANSPORT;
	return 1;
}

/* Each --rate-limit-group value into its config; the library checks the
 * limits and the ids (mvm_rate_group_new, mvm_add_rate_group). */
static int cli_parse_groups(struct cli_config *cfg, const struct cli_state *st, char *err,
			    size_t errlen)
{
	size_t used = 0;
	unsigned i;
	int ret;

	for (i = 0; i < cfg->ngroups; i++) {
		mvm_rate_group_config_init(&cfg->groups[i]);
		ret = mvm_rate_group_parse(&cfg->groups[i], st->group_specs[i],
					   cfg->group_text + used, sizeof(cfg->group_text) - used,
					   err, errlen);
		if (ret == -ENOSPC)
			return cli_err(err, errlen, "--rate-limit-group '%.64s...': the groups' "
				       "values are longer than %zu bytes in all; give shorter ones",
				       st->group_specs[i], sizeof(cfg->group_text));
		if (ret)
			return cli_err_option(err, errlen);
		used += strlen(st->group_specs[i]) + 1;
	}
	return 0;
}

/* --vsock's value into cfg->vsock: --transport's default, then the spec. */
static int cli_parse_vsock(struct cli_config *cfg, const struct cli_state *st, char *err,
			   size_t errlen)
{
	if (!st->vsock_spec)
		return 0;
	mvm_vsock_init(&cfg->vsock);
	if (st->transport_given)
		cfg->vsock.transport = st->tmpl.transport;
	if (mvm_vsock_parse(&cfg->vsock, st->vsock_spec, cfg->vsock_text,
			    sizeof(cfg->vsock_text), err, errlen))
		return cli_err_option(err, errlen);
	cfg->has_vsock = true;
	return 0;
}

/* The jail's options (vmm/cli/jail.h). 1: taken, 0: not one of these. */
static int cli_jail_option(int c, const char *arg, struct cli_config *cfg, struct cli_state *st,
			   char *err, size_t errlen)
{
	uint64_t v;

	switch (c) {
	case OPT_CHROOT:
		if (!*arg)
			return cli_err(err, errlen, "--chroot: empty path; give a directory");
		cfg->chroot_dir = arg;
		return 1;
	case OPT_UID:
	case OPT_GID:
		if (parse_uint(arg, 0, UINT32_MAX - 1, &v))
			return cli_err(err, errlen, "--%s '%s': not a numeric id; give a number "
				       "like 65534", c == OPT_UID ? "uid" : "gid", arg);
		if (c == OPT_UID)
			cfg->uid = (unsigned)v, st->uid_given = true;
		else
			cfg->gid = (unsigned)v, st->gid_given = true;
		return 1;
	case OPT_NETNS:
	case OPT_CGROUP:
		if (!*arg)
			return cli_err(err, errlen, "--%s: empty path; give a %s",
				       c == OPT_NETNS ? "netns" : "cgroup", c == OPT_NETNS ?
				       "network namespace file" : "cgroup v2 directory");
		*(c == OPT_NETNS ? &cfg->netns : &cfg->cgroup) = arg;
		return 1;
	case OPT_NEW_PID_NS:
		cfg->new_pid_ns = true;
		return 1;
	case OPT_CGROUP_SET:
		if (cfg->ncgroup_set == JAIL_MAX_CGROUP_SET)
			return cli_err(err, errlen, "--cgroup-set '%s': more than %d; set the others "
				       "in the cgroup beforehand", arg, JAIL_MAX_CGROUP_SET);
		cfg->cgroup_set[cfg->ncgroup_set++] = arg;
		return 1;
	}
	return 0;
}

int cli_parse(int argc, char **argv, struct cli_config *cfg, char *err, size_t errlen)
{
	struct cli_state st;
	int c, ret;

	memset(cfg, 0, sizeof(*cfg));
	memset(&st, 0, sizeof(st));
	mvm_config_init(&cfg->vm);
	cfg->vm.sandbox = true;         /* the library's default is off: mvm(1)'s is on */
	mvm_disk_init(&st.tmpl, NULL);
	optind = 0;     /* GNU: full re-initialisation, so tests can parse again */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:", cli_options, NULL)) != -1) {
		if (c == ':')
			return cli_err(err, errlen, "%s: needs a value; see mvm --help",
				       argv[optind - 1]);
		if (c == OPT_KERNEL || c == OPT_INITRD || c == OPT_CMDLINE || c == OPT_CPUS ||
		    c == OPT_MEM || c == OPT_HOTPLUG_SLOTS || c == OPT_PVPANIC || c == OPT_MEM_FILE)
			st.shape_opt = cli_option_name(c);
		ret = cli_vm_option(c, optarg, cfg, err, errlen);
		if (!ret)
			ret = cli_disk_option(c, optarg, cfg, &st, err, errlen);
		if (ret > 0 && c != OPT_ID && c != OPT_SANDBOX && c != OPT_PVPANIC &&
		    c != OPT_HOTPLUG_SLOTS && c != OPT_QUEUES && c != OPT_IO_THREADS &&
		    c != OPT_TRANSPORT && c != OPT_SNAPSHOT_DIR && c != OPT_IMAGE_DIR)
			cfg->vm_given = true;
		if (!ret)
			ret = cli_jail_option(c, optarg, cfg, &st, err, errlen);
		if (ret < 0)
			return ret;
		if (ret)
			continue;
		if (c == OPT_STATS)
			cfg->stats = true;
		else if (c == OPT_API_SOCKET) {
			/* Cloud Hypervisor takes "path=PATH" or PATH. */
			const char *p = !strncmp(optarg, "path=", 5) ? optarg + 5 : optarg;

			if (!*p)
				return cli_err(err, errlen, "--api-socket: empty path; give the "
					       "socket's PATH");
			cfg->api_socket = p;
		}
		else if (c == OPT_HELP)
			cfg->help = true;
		else if (c == OPT_PROBE_KVM)
			cfg->probe_kvm = true;
		else if (c == OPT_VERSION)
			cfg->version = true;
		else
			return cli_err(err, errlen, "unknown option '%s'; see mvm --help",
				       argv[optind - 1]);
	}
	if (optind < argc)
		return cli_err(err, errlen, "unexpected argument '%s'; options start with --, "
			       "see mvm --help", argv[optind]);
	if (st.uid_given != st.gid_given)
		return cli_err(err, errlen, "--%s given without --%s; give both",
			       st.uid_given ? "uid" : "gid", st.uid_given ? "gid" : "uid");
	cfg->ids_set = st.uid_given;
	if (cfg->vm.restore && st.shape_opt)
		return cli_err(err, errlen, "--%s with --restore: the snapshot's VM has its own; "
			       "leave it out (--disk may give the disks' images)", st.shape_opt);
	/* Disks and vsock last: the template is complete once the line is read. */
	ret = cli_parse_vsock(cfg, &st, err, errlen);
	if (!ret)
		ret = cli_parse_groups(cfg, &st, err, errlen);
	if (ret)
		return ret;
	/* Disks plugged in while the VM runs get --queues' queues too. */
	cfg->vm.hotplug_queues = st.tmpl.queues;
	return cli_parse_disks(cfg, &st, err, errlen);
}

bool cli_vm_from_api(const struct cli_config *cfg)
{
	return cfg->api_socket && !cfg->vm_given;
}

unsigned cli_max_queues(const struct cli_config *cfg)
{
	unsigned i, q = 0;

	for (i = 0; i < cfg->ndisks; i++)
		q = MAX(q, cfg->disks[i].queues);
	return q;
}

bool cli_auto_cpus(struct cli_config *cfg)
{
	unsigned q = cli_max_queues(cfg), max = mvm_max_cpus();

	if (cfg->vm.restore || cfg->cpus_given || q <= cfg->vm.cpus || cfg->vm.cpus >= max)
		return false;
	cfg->vm.cpus = MIN(q, max);
	return true;
}

int cli_default_guest(struct cli_config *cfg, const char *exe_dir, char *err, size_t errlen)
{
	if (cfg->vm.kernel || cfg->vm.restore)
		return 0;
	if ((size_t)snprintf(cfg->kernel_buf, sizeof(cfg->kernel_buf), "%s/build/guest/bzImage",
			     exe_dir) >= sizeof(cfg->kernel_buf) ||
	    (size_t)snprintf(cfg->initrd_buf, sizeof(cfg->initrd_buf),
			     "%s/build/guest/initramfs.cpio.gz", exe_dir) >= sizeof(cfg->initrd_buf))
		return cli_err(err, errlen, "path of the mvm binary too long: '%s'", exe_dir);
	if (access(cfg->kernel_buf, R_OK) ||
	    (!cfg->vm.initrd && access(cfg->initrd_buf, R_OK))) {
		cli_err(err, errlen, "no --kernel given and the test guest (%s) is missing; "
			"run 'make guest' or pass --kernel", cfg->kernel_buf);
		return -ENOENT;
	}
	cfg->vm.kernel = cfg->kernel_buf;
	if (!cfg->vm.initrd)
		cfg->vm.initrd = cfg->initrd_buf;
	return 0;
}
