/* mvm(1)'s command line: parsing into struct cli_config, which holds the
 * library's own struct mvm_config and struct mvm_disk (pure, unit-
 * testable), and the defaults that belong to the command line (the shipped
 * test guest, vCPUs to match queues). A disk's keys are its device's
 * (mvm_disk_parse); the checks against the host and the guest kernel
 * command line are the library's.
 *
 * To add an option: a field in struct cli_config (or the library's
 * struct), a row in the option table in cli.c (and its case in cli_parse),
 * a line in the usage text. */
#ifndef MVM_CLI_H
#define MVM_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vmm/cli/jail.h"
#include "vmm/mvm.h"

/* Room for every --disk value's strings (mvm_disk_parse's buffer). */
#define CLI_DISK_TEXT (MVM_MAX_DISKS * 4352)

struct cli_config {
	/* The VM's config and its disks, filled straight from the command
	 * line: main hands them to the library as they are. */
	struct mvm_config vm;
	/* Disks in command-line order (vda, vdb, ...). --queues, --io-threads
	 * and --transport are defaults: they apply to every disk that does
	 * not set ,queues= / ,io-threads= / ,transport= itself, wherever they
	 * stand on the line. */
	struct mvm_disk disks[MVM_MAX_DISKS];
	unsigned ndisks;
	/* --vsock cid=N,socket=PATH[,...] (once); --transport is its default
	 * too. */
	bool has_vsock;
	struct mvm_vsock vsock;
	/* --rate-limit-group id=ID,... (repeatable): groups of limits that
	 * disks name with ,rate_limit_group=ID. */
	struct mvm_rate_group_config groups[MVM_MAX_DISKS];
	unsigned ngroups;
	bool cpus_given;        /* --cpus on the command line */
	bool vm_given;          /* any option that describes the VM (kernel, initrd,
				 * cmdline, cpus, mem, disk, vsock, rate groups) */
	bool stats;
	const char *api_socket; /* --api-socket [path=]PATH, or NULL */
	bool help;
	bool version;
	bool probe_kvm;         /* --probe-kvm: decide direct or nested, then exit */
	/* Confinement (vmm/cli/jail.h; the filters: vm.sandbox): --sandbox
	 * on|off (default on), --chroot DIR, --uid N and --gid N (together),
	 * --netns PATH, --new-pid-ns, --cgroup DIR and --cgroup-set
	 * FILE=VALUE (repeated). */
	const char *chroot_dir;
	bool ids_set;
	unsigned uid, gid;
	const char *netns;
	bool new_pid_ns;
	const char *cgroup;
	const char *cgroup_set[JAIL_MAX_CGROUP_SET];
	unsigned ncgroup_set;
	/* storage: the disks' strings, the default guest's paths */
	char disk_text[CLI_DISK_TEXT];
	char vsock_text[4096];
	char group_text[MVM_MAX_DISKS * 512];
	char kernel_buf[4096];
	char initrd_buf[4096];
};

/* Parse argv into cfg (defaults applied first). 0, or -EINVAL with a
 * one-line message (no "mvm: " prefix) in err. Checks syntax and ranges
 * that need no host knowledge (sizes, --cpus 1..254, --mem >= 16 MiB). */
int cli_parse(int argc, char **argv, struct cli_config *cfg, char *err, size_t errlen);

/* --api-socket and nothing that describes the VM: the VM comes from the
 * API's vm.create and vm.boot, as Cloud Hypervisor's does. */
bool cli_vm_from_api(const struct cli_config *cfg);

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
