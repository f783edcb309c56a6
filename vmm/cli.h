/* mvm's command line: parsing (pure, unit-testable), validation against
 * the host's limits (passed in, so tests need no KVM), and composition of
 * the guest kernel command line.
 *
 * To add an option: a field in struct mvm_config, a row in the option table
 * in cli.c (and its case in cli_parse), a line in the usage text. */
#ifndef MVM_CLI_H
#define MVM_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "devices/blk_image.h"

#define CLI_DEFAULT_CPUS 1
#define CLI_DEFAULT_MEM (256ULL << 20)
#define CLI_MIN_MEM (16ULL << 20)
/* Guest RAM must stay below the guest physical address limit we promise to
 * support (40 bits leaves room for the 3-4 GiB hole on every KVM host). */
#define CLI_MAX_GPA (1ULL << 40)
#define CLI_MAX_CPUS 254          /* IOAPIC id = ncpus must fit in 8 bits */

/* Kernel parameters mvm always passes (a lean guest without ACPI): serial
 * console, reboot through the i8042 (mvm exits 0), no PS/2 mouse/mux/PnP
 * probing, no timer check (slow under nested virtualization). Device
 * fragments follow, the user's --cmdline comes last so it can override. */
#define CLI_BASE_CMDLINE "console=ttyS0 reboot=k panic=-1 i8042.noaux i8042.nomux " \
	"i8042.nopnp i8042.dumbkbd no_timer_check"

#define CLI_MAX_DISKS 16

/* Which virtio transport a disk sits on. */
enum cli_transport { CLI_TRANSPORT_MMIO, CLI_TRANSPORT_PCI };
/* virtio-pci by default on x86: each queue gets its own MSI-X vector, so
 * completions interrupt the vCPU that submitted and an interrupt costs no
 * exit to mvm (virtio-mmio has one shared line, and every interrupt makes
 * the guest read InterruptStatus and write InterruptACK: two MMIO exits);
 * it is also what distribution kernels have built in. virtio-mmio stays
 * for minimal kernels without PCI (--transport mmio). */
#define CLI_DEFAULT_TRANSPORT CLI_TRANSPORT_PCI

struct cli_disk {
	const char *spec;               /* the --disk argument, for messages */
	struct blk_opts opts;           /* blk part of the spec */
	enum cli_transport transport;   /* ,transport= or --transport */
	bool transport_set;             /* ,transport= given on this disk */
	bool packed;                    /* offer VIRTIO_F_RING_PACKED (,packed=off clears) */
};

struct mvm_config {
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
	/* storage for the default guest paths */
	char kernel_buf[4096];
	char initrd_buf[4096];
};

/* Parse argv into cfg (defaults applied first). 0, or -EINVAL with a
 * one-line message (no "mvm: " prefix) in err. Checks syntax and ranges
 * that need no host knowledge (sizes, --cpus 1..254, --mem >= 16 MiB). */
int cli_parse(int argc, char **argv, struct mvm_config *cfg, char *err, size_t errlen);

/* Split one --disk argument: the transport keys (transport=mmio|pci,
 * packed=on|off) are taken here, the rest goes to blk_parse_spec with
 * default_queues. 0 or -EINVAL with a one-line message. */
int cli_parse_disk(const char *spec, unsigned default_queues, enum cli_transport default_transport,
		   struct cli_disk *d, char *err, size_t errlen);

/* Largest queue count of any disk (0 without disks). */
unsigned cli_max_queues(const struct mvm_config *cfg);

/* Without --cpus, give the guest as many vCPUs as the most queues of any
 * disk (blk-mq uses at most nr_cpu_ids hardware queues). Returns true when
 * cfg->cpus was raised. */
bool cli_auto_cpus(struct mvm_config *cfg);

/* Checks against the host: cpus <= max_vcpus (KVM_CAP_MAX_VCPUS, or 0 when
 * not known yet), mem <= host_mem (RAM + swap) and below CLI_MAX_GPA.
 * 0 or -EINVAL with a message. */
int cli_check_host(const struct mvm_config *cfg, unsigned max_vcpus, uint64_t host_mem,
		   char *err, size_t errlen);

/* Fill in the shipped test guest when no --kernel was given: exe_dir is the
 * directory of the mvm binary. 0, or -ENOENT with "run make guest". */
int cli_default_guest(struct mvm_config *cfg, const char *exe_dir, char *err, size_t errlen);

/* Check that kernel/initrd are readable regular files. 0 or -errno + message. */
int cli_check_files(const struct mvm_config *cfg, char *err, size_t errlen);

/* CLI_BASE_CMDLINE + " " + extra (device fragments, may be empty/NULL) +
 * " " + user cmdline. 0, or -ENOSPC when it does not fit in len. */
int cli_compose_cmdline(const char *extra, const char *user, char *out, size_t len);

/* Host RAM + swap in bytes (sysinfo). */
uint64_t cli_host_mem(void);

void cli_usage(FILE *out);

#endif
