/* libmvm's own view of a VM (struct mvm), shared by its files: mvm.c
 * (the public calls) and snapshot.c (snapshots and restores). Nothing
 * outside vmm/lib/ includes it. */
#ifndef MVM_LIB_PRIV_H
#define MVM_LIB_PRIV_H

#include "vmm/mvm.h"
#include "vmm/lib/console.h"
#include "vmm/lib/console_out.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/vcpu.h"
#include "vmm/base/snap.h"
#include "devices/blk_image.h"
#include "devices/pci.h"
#include "devices/pcie_port.h"
#include "devices/ratelim.h"
#include "devices/virtio_vsock.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define MVM_MAX_GPA (1ULL << 40)     /* guest RAM + the 1 GiB hole stays below */
/* The longest a pause waits for the vCPUs to leave the guest and for the
 * queues' host I/O in flight: a queue thread's stop deadline. */
#define MVM_QUIESCE_NS 5000000000ull

enum mvm_state { MVM_CREATED, MVM_PREPARED, MVM_RUNNING, MVM_ENDED, MVM_FAILED };

struct mvm_disk_slot {
	struct mvm_disk opts;          /* the caller's, checked; its strings are ours: */
	char path[BLK_PATH_MAX];
	char serial[BLK_SERIAL_MAX + 1];
	char id[MVM_DISK_ID_MAX + 1];
	struct blk_image img;          /* open from mvm_add_disk until mvm_start */
	struct virtio_dev *dev;        /* from mvm_start; the VM owns it. Set and
					* cleared (hot-plug) under devs_lock */
	unsigned hslot;                /* its hot-plug slot (1..), or 0 */
	struct pcie_port *port;        /* that slot's PCIe port (x86), or NULL */
	unsigned restore_slot;         /* a restore puts it in this slot (1..), or 0 */
	bool removed;                  /* mvm_disk_remove took it (dev NULL) */
	char group_id[MVM_ID_MAX + 1];
	struct mvm_rate_group *group;  /* its rate_limit_group (the VM holds it), or NULL */
};

/* A rate-limit group: limits shared by disks of one VM or of several
 * (ratelim_take locks a disk's own limiter before its group's). */
struct mvm_rate_group {
	struct ratelim rl;
	char id[MVM_ID_MAX + 1];
	unsigned refs;                 /* atomic: the caller's and each VM's */
	bool started;                  /* atomic: a VM started with it; from then on
					* its buckets are live, and a restore keeps
					* them rather than loading the snapshot's */
};

/* Room for the composed kernel command line; the kernel's own limit is
 * checked by arch_boot_check/arch_boot_load. */
#define MVM_CMDLINE_MAX 65536
/* Console input is read in chunks of this many bytes, each only when the
 * device has taken everything before it (carry: the escape filter may
 * turn a chunk into one byte more). */
#define MVM_CONSOLE_CHUNK 16

/* The steps from main() to the guest's first instruction, in order. */
enum mvm_phase {
	MVM_PHASE_CREATE,    /* main(), the CLI, mvm_create (the kernel's head) */
	MVM_PHASE_KVM,       /* /dev/kvm, KVM_CREATE_VM, guest RAM, irqchip */
	MVM_PHASE_DEVICES,   /* board devices, console, disks */
	MVM_PHASE_LOAD,      /* kernel and initrd into guest RAM */
	MVM_PHASE_VCPUS,     /* KVM_CREATE_VCPU and each vCPU's registers */
	MVM_PHASE_START,     /* every thread started and confined (mvm_start up to the gate) */
	MVM_PHASES
};
static const char *const mvm_phase_names[MVM_PHASES] = {
	"create", "kvm", "devices", "load", "vcpus", "start",
};

struct mvm {
	struct mvm_config cfg;         /* copy; its strings point into ours */
	char *kernel, *initrd, *cmdline;
	char id[MVM_ID_MAX + 1];       /* cfg.id, or "mvm": its threads' names begin with it */
	char ctl_name[16];
	struct log_sink log;
	atomic_int state;              /* enum mvm_state */

	struct mvm_disk_slot disks[MVM_MAX_DISKS];
	unsigned ndisks;
	/* The vsock device: its options (socket pointing at vsock_path) from
	 * mvm_add_vsock, the device from mvm_prepare (the VM owns it). */
	struct mvm_rate_group *groups[MVM_MAX_DISKS];  /* mvm_add_rate_group: one ref each */
	unsigned ngroups;
	bool has_vsock;
	struct mvm_vsock vsock;
	char vsock_path[VSOCK_PATH_MAX + 1];
	struct virtio_dev *vsock_dev;

	struct vm vm;
	bool vm_up;
	struct pci_bus pci;
	bool pci_up;
	/* The hot-plug slots (mvm_prepare), one kind per board: PCIe root
	 * ports, or subchannels of the channel subsystem (s390x: ccw_sch,
	 * each slot's subchannel number). */
	struct pcie_port ports[MVM_MAX_HOTPLUG_SLOTS];
	unsigned nports;               /* made */
	unsigned ccw_sch[MVM_MAX_HOTPLUG_SLOTS];
	unsigned nccw;                 /* made */
	/* Each slot's spare disk (mvm_prepare): made with the slot's shape
	 * (cfg.hotplug_queues) and no image, its threads started with the
	 * VM's, behind its port (in its subchannel) only while a disk is
	 * plugged there (the disk slot's dev is then this). The VM owns them
	 * (its device list). */
	struct virtio_dev *spares[MVM_MAX_HOTPLUG_SLOTS];
	/* The VM's device list and the disks' devices against those who
	 * walk them from other threads (--stats, mvm_get_threads) while a
	 * hot-plug changes them (under ctl_lock too). Held briefly. */
	pthread_mutex_t devs_lock;
	struct vm_console con;         /* the board's console device */
	struct arch_boot *boot;        /* how the vCPUs start (arch_boot_load) */
	struct boot_image kimage;      /* as mvm_create checked it, until mvm_prepare loads it */
	struct vcpu *vcpus;
	unsigned nvcpus;               /* created */
	bool threads_stopped;          /* mvm_stop_threads ran: devices stopped */
	/* mvm_get_threads against the joins: threads_going is set under
	 * threads_lock before mvm_stop_threads joins anything, so a listing
	 * either ends before the first join or says -ESRCH. Never held
	 * across a join. */
	pthread_mutex_t threads_lock;
	bool threads_going;
	bool kick_held;                /* vcpu_signal_get succeeded: put at destroy */

	/* Console input: console_in -> escape filter -> UART RX FIFO. Bytes
	 * the FIFO cannot take yet wait in carry. Control thread only. */
	struct console_escape esc;
	bool con_open;
	uint8_t carry[MVM_CONSOLE_CHUNK + 1];
	size_t ncarry;

	/* Console output: the device's buffer -> out (control thread). The
	 * device writes tx_efd when output arrives in its empty buffer. */
	struct conout out;
	bool out_up;
	int tx_efd;
	/* mvm_stop was called: the end-of-VM flush of console output stops
	 * waiting for a slow reader. Set before stop_efd is written (which
	 * wakes the flush); seq_cst, paired with the flush's load after it
	 * resets stop_efd. */
	atomic_bool hurry;

	/* When each step of the start ended (mono_ns; 0: not reached), for
	 * --stats' startup_phases_us: where startup_us goes. */
	uint64_t phase_ns[MVM_PHASES];

	pthread_t control;
	bool control_started;
	struct thread_handshake control_hs;   /* its filter is on */
	int wait_efd;                  /* readable once the VM has ended */
	pthread_mutex_t lock;          /* mvm_wait/mvm_destroy: joining */
	/* Run-time control (mvm_pause, mvm_resume, a disk's limits and
	 * image, which it also guards): one at a time, and not
	 * while the control thread stops the devices (it takes ctl_lock
	 * after the vCPUs are joined; a pause waiting for vCPUs returns once
	 * they see the stop). paused is read without it (mvm_get_state). */
	pthread_mutex_t ctl_lock;
	atomic_bool paused;
	uint64_t paused_at;            /* mono_ns of the pause (ctl_lock) */
	uint64_t pauses;               /* pauses so far, and their time in all: */
	uint64_t paused_ns;            /* atomic (--stats reads them) */
	uint64_t nmis;                 /* mvm_nmi calls every vCPU took; atomic */
	bool joined;
	struct mvm_exit exit;          /* written by the control thread before wait_efd */
	char cmdline_buf[MVM_CMDLINE_MAX];

	/* A restore (cfg.restore): the state file as read and checked, and
	 * the memory file, until the VM runs (snapshot.c). */
	char *restore_dir;
	uint8_t *snap_buf;
	size_t snap_len;
	struct snap_file snap;
	struct snapshot_vm *snap_vm;    /* its MVM! section */
	int snap_mem_fd;
	/* cfg.snapshot_dir, its trailing slashes gone, and the O_PATH
	 * descriptor mvm_prepare opened on it (-1: none). */
	char *snap_root;
	int snap_root_fd;
	/* The thread mvm_confine_api_thread confined, and whether Landlock
	 * holds its file access to snap_root (snapshots allowed there). */
	bool api_confined;
	bool api_snap_ok;
	/* cfg.image_dir made absolute, the O_PATH descriptor mvm_prepare
	 * opened on it (-1: none), and whether Landlock holds the confined
	 * API thread's file access to it (swaps from there allowed). */
	char *image_root;
	int image_root_fd;
	bool api_image_ok;
	pthread_t api_thread;
	/* cfg.mem_file made absolute, its descriptor (-1: none), and
	 * whether a snapshot made the mapping private (snapshot.c). */
	char *mem_file;
	int mem_file_fd;
	bool mem_private;
};

/* Whether the VM runs (started, not stopped or stopping), for run-time
 * control; else why not in err. ctl_lock held. */
int mvm_check_running(struct mvm *m, const char *call, char *err, size_t errlen);
/* Whether the VM is paused (mvm_check_running's refusals, or -EINVAL
 * while it runs), for what needs it still: snapshots, core dumps.
 * ctl_lock held. */
int mvm_check_paused(struct mvm *m, const char *call, char *err, size_t errlen);

/* Snapshots (snapshot.c). */
/* With cfg->restore: the snapshot's state read and checked, the config's
 * cpus, mem, pvpanic and hotplug_slots taken from it, its memory file
 * opened. From mvm_create; 0 or -errno with a message. */
int snapshot_open(struct mvm *m, char *err, size_t errlen);
/* The snapshot's disks: how many, and disk i as mvm_disk_parse would
 * give it (strings in buf). */
unsigned snapshot_ndisks(const struct mvm *m);
/* The number of the hot-plug slot the snapshot's disk i was in (a disk
 * plugged in at run time), or 0. */
unsigned snapshot_disk_slot(const struct mvm *m, unsigned i);
int snapshot_disk(struct mvm *m, unsigned i, struct mvm_disk *d, char *buf, size_t buflen,
		  char *err, size_t errlen);
/* The snapshot's rate-limit groups the VM lacks (the caller gave none of
 * that id), made with the limits they had: from mvm_prepare, before the
 * snapshot's disks, which may name them. 0 or -errno with a message. */
int snapshot_groups_make(struct mvm *m, char *err, size_t errlen);
/* The VM's group of that id, or NULL. */
struct mvm_rate_group *mvm_group_find(const struct mvm *m, const char *id);
/* g into the VM's groups (a reference of its own): 0, -EEXIST (one of
 * that id), -ENOSPC, with a message. mvm_add_rate_group's checks aside. */
int mvm_group_attach(struct mvm *m, struct mvm_rate_group *g, char *err, size_t errlen);
/* The snapshot's vsock device as mvm_vsock_parse would give it: 0,
 * -ENOENT (it had none), or -errno with a message. */
int snapshot_vsock(struct mvm *m, struct mvm_vsock *vs, char *buf, size_t buflen, char *err,
		   size_t errlen);
/* From mvm_prepare, the vCPUs made: the VM's and each vCPU's state. */
int snapshot_load_cpus(struct mvm *m, char *err, size_t errlen);
/* The snapshot's memory read into the VM's own RAM (where KVM cannot run
 * the guest in a private mapping of it: arch_ram_cow_ok), its holes left
 * as the fresh RAM's zeros. 0 or -errno with a message. */
int snapshot_memory_copy(struct mvm *m, char *err, size_t errlen);
/* From mvm_start, the devices' threads started, before the vCPUs: each
 * device's state. */
int snapshot_load_devices(struct mvm *m, char *err, size_t errlen);
/* path made absolute (from the working directory) without trailing
 * slashes; NULL: no memory (or no working directory). */
char *mvm_abs_path(const char *path);
/* dir's path beneath root (absolute, no trailing slash), read as written
 * (no links followed) into rel: "" for root itself. -ENOENT: dir is not
 * root nor beneath it; -EINVAL: a "." or ".." in the rest;
 * -ENAMETOOLONG. */
int mvm_path_beneath(const char *root, const char *dir, char *rel, size_t rellen);
/* A restore's caller-given disk i and vsock device: what the guest saw and
 * the caller left at the default, from the snapshot. */
void snapshot_disk_inherit(struct mvm *m, unsigned i, struct mvm_disk *d,
			   char id[MVM_DISK_ID_MAX + 1]);
void snapshot_vsock_inherit(struct mvm *m, struct mvm_vsock *v);
/* mvm_create, a restore's config checked: kernel, initrd and cmdline
 * (m's and m->cfg's) the snapshot's guest booted from. 0 or -ENOMEM. */
int snapshot_payload(struct mvm *m);
/* Where a snapshot's (or a core dump's) files go: names are looked up
 * from dirfd with pfx before them. */
struct snapshot_at {
	int dirfd;
	bool own;               /* dirfd is ours to close */
	char pfx[PATH_MAX];     /* "" or "SUB/" beneath the snapshot directory */
};
/* Where the caller writes files into dir (made, mode 0700, where
 * missing): beneath the snapshot directory through its descriptor;
 * elsewhere by path, unless the calling thread is the one
 * mvm_confine_api_thread confined (-EPERM, -EOPNOTSUPP). `what` names
 * the work in messages ("snapshot", "coredump"). Close at->dirfd where
 * at->own. */
int snapshot_target(struct mvm *m, const char *what, const char *dir, struct snapshot_at *at,
		    char *err, size_t errlen);
/* at's name for file `name`, into buf (PATH_MAX). */
const char *snapshot_name(const struct snapshot_at *at, const char *name, char *buf);
/* Guest RAM is written a page at a time, all-zero pages left as holes:
 * len bytes at p to fd at off, runs of pages that are not all zero (a
 * fresh file reads zeros in the rest). 0 or -errno. */
#define SNAPSHOT_PAGE 4096u
int snapshot_pwrite_sparse(int fd, const uint8_t *p, uint64_t len, off_t off);
int snapshot_pwrite_all(int fd, const uint8_t *p, size_t len, off_t off);
/* A file written under tmp (from at) made whole: size bytes long,
 * synced, closed (fd) and renamed to name; on a failure (or ret, the
 * writing's, not 0) removed. ret or the first error. */
int snapshot_file_finish(const struct snapshot_at *at, int fd, const char *tmp, const char *name,
			 uint64_t size, int ret);
/* mvm_prepare: make and open cfg.snapshot_dir. */
int snapshot_root_open(struct mvm *m, char *err, size_t errlen);
/* mvm_destroy: what snapshot_open kept. */
void snapshot_close(struct mvm *m);

#endif
