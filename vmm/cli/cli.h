/* mvm(1)'s command line: parsing into struct cli_config (pure, unit-
 * testable) and the defaults that belong to the command line (the shipped
 * test guest, vCPUs to match queues). Validation against the host and the
 * guest kernel command line are the library's (vmm/lib/mvm.c).
 *
 * To add an option: a field in struct cli_config, a row in the option table
 * in cli.c (and its case in cli_parse), a line in the usage text. */
#ifndef MVM_CLI_H
#define MVM_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "devices/blk_image.h"
#include "vmm/cli/jail.h"

#define CLI_DEFAULT_CPUS 1
#define CLI_DEFAULT_MEM (256ULL << 20)
#define CLI_MIN_MEM (16ULL << 20)
#define CLI_MAX_CPUS 254          /* IOAPIC id = ncpus must fit in 8 bits */

#define CLI_MAX_DISKS 16

/* Which virtio transport a disk sits on. */
enum cli_transport { CLI_TRANSPORT_MMIO, CLI_TRANSPORT_PCI, CLI_TRANSPORT_CCW,
		     CLI_TRANSPORT_DEFAULT };
/* By default the library's choice for the architecture (mvm_disk_init):
 * virtio-pci on x86 (each queue gets its own MSI-X vector, so completions
 * interrupt the vCPU that submitted and an interrupt costs no exit to mvm;
 * virtio-mmio has one shared line, and every interrupt makes the guest read
 * InterruptStatus and write InterruptACK: two MMIO exits; and distribution
 * kernels have it built in), virtio-ccw on s390x. virtio-mmio stays for
 * minimal kernels without PCI (--transport mmio). */
#define CLI_DEFAULT_TRANSPORT CLI_TRANSPORT_DEFAULT

struct cli_disk {
	const char *spec;               /* the --disk argument, for messages */
	struct blk_opts opts;           /* blk part of the spec */
	enum cli_transport transport;   /* ,transport= or --transport */
	bool transport_set;             /* ,transport= given on this disk */
	bool packed;                    /* offer VIRTIO_F_RING_PACKED (,packed=off clears) */
};

struct cli_config {
	const char *kernel;     /* NULL: the shipped test guest */
	const char *initrd;     /* NULL: none (or the shipped one with the test guest) */
	const char *cmdline;    /* user's part, may be NULL */
	unsigned cpus;
	uint64_t mem;
	bool cpus_given;        /* --cpus on the command line */
	bool stats;
	/* Disks in command-line order (vda, vdb, ...). --queues and --transport
	 * are global defaults: they apply to every disk that does not set
	 * ,queues= / ,transport= itself, wherever they stand on the line. */
	struct cli_disk disks[CLI_MAX_DISKS];
	unsigned ndisks;
	unsigned queues;        /* --queues, default 1 */
	enum cli_transport transport; /* --transport */
	bool help;
	bool version;
	bool probe_kvm;         /* --probe-kvm: decide direct or nested, then exit */
	bool pvpanic;           /* --pvpanic on|off (default on; x86 only) */
	/* Confinement (vmm/cli/jail.h, vmm/kvm/sandbox.h): --sandbox on|off (default
	 * on), --chroot DIR, --uid N and --gid N (together), --netns PATH,
	 * --new-pid-ns, --cgroup DIR and --cgroup-set FILE=VALUE (repeated). */
	bool sandbox;
	const char *chroot_dir;
	bool ids_set;
	unsigned uid, gid;
	const char *netns;
	bool new_pid_ns;
	const char *cgroup;
	const char *cgroup_set[JAIL_MAX_CGROUP_SET];
	unsigned ncgroup_set;
	/* storage for the default guest paths */
	char kernel_buf[4096];
	char initrd_buf[4096];
};

/* Parse argv into cfg (defaults applied first). 0, or -EINVAL with a
 * one-line message (no "mvm: " prefix) in err. Checks syntax and ranges
 * that need no host knowledge (sizes, --cpus 1..254, --mem >= 16 MiB). */
int cli_parse(int argc, char **argv, struct cli_config *cfg, char *err, size_t errlen);

/* Parse the block part of a --disk value,
 * "PATH[,ro][,serial=ID][,cache=none|writeback][,discard=on|off][,queues=N][,poll=USEC]";
 * default_queues comes from --queues. 0 or -EINVAL with a one-line message
 * in err (what, which value, what to do). */
int cli_parse_blk_opts(const char *spec, unsigned default_queues, struct blk_opts *o,
		       char *err, size_t errlen);

/* Split one --disk argument: the transport keys (transport=mmio|pci,
 * packed=on|off) are taken here, the rest goes to cli_parse_blk_opts with
 * default_queues. 0 or -EINVAL with a one-line message. */
int cli_parse_disk(const char *spec, unsigned default_queues, enum cli_transport default_transport,
		   struct cli_disk *d, char *err, size_t errlen);

/* Largest queue count of any disk (0 without disks). */
unsigned cli_max_queues(const struct cli_config *cfg);

/* Without --cpus, give the guest as many vCPUs as the most queues of any
 * disk (blk-mq uses at most nr_cpu_ids hardware queues). Returns true when
 * cfg->cpus was raised. */
bool cli_auto_cpus(struct cli_config *cfg);

/* Fill in the shipped test guest when no --kernel was given: exe_dir is the
 * directory of the mvm binary. 0, or -ENOENT with "run make guest". */
int cli_default_guest(struct cli_config *cfg, const char *exe_dir, char *err, size_t errlen);

void cli_usage(FILE *out);

#endif
