/* libmvm: boot and run Linux microVMs on KVM from your own program.
 *
 * One header, one library (libmvm.so / libmvm.a, pkg-config "mvm"). A VM is
 * a `struct mvm`: create it from a config, add disks, start it, wait for it
 * to end (or stop it), read its statistics, destroy it. Many VMs may run in
 * one process at once; each has its own threads (one per vCPU, one per
 * virtqueue, one control thread) and nothing is shared between them.
 *
 *     struct mvm_config cfg;
 *     struct mvm_disk disk;
 *     struct mvm *vm;
 *     struct mvm_exit ex;
 *     char err[MVM_ERR_MAX];
 *
 *     mvm_config_init(&cfg);
 *     cfg.kernel = "bzImage";
 *     cfg.initrd = "initramfs.cpio.gz";
 *     cfg.cmdline = "-- echo hello";
 *     cfg.console_out = STDOUT_FILENO;
 *     if (mvm_create(&cfg, &vm, err, sizeof(err)))
 *         ... err says what is wrong ...
 *     mvm_disk_init(&disk, "disk.img");
 *     disk.queues = 2;
 *     if (mvm_add_disk(vm, &disk, err, sizeof(err)) || mvm_start(vm, err, sizeof(err)))
 *         ...
 *     mvm_wait(vm, -1, &ex, sizeof(ex));   // ex.status: what mvm(1) would exit with
 *     mvm_destroy(vm);
 *
 * Messages about a field of the config or a disk start with its name
 * ("kernel '...': ...", "mem ...", "disk PATH: ..."), so a command line can
 * put its own option syntax in front.
 *
 * Rules the library keeps:
 *  - every call returns 0 or a negative errno value, and fills the caller's
 *    err buffer (when given) with a one-line message: what, which value,
 *    what to do. Nothing in the library exits, aborts or prints, except
 *    through the log callback the caller installs;
 *  - no process-wide state: no globals, no atexit, no signal mask changes.
 *    The one process-wide thing is the handler of cfg.kick_signal, which
 *    mvm_start installs (a no-op handler, without SA_RESTART) because KVM
 *    needs a signal to interrupt a running vCPU: choose a signal the host
 *    process does not otherwise use;
 *  - mvm_stop is async-signal-safe and may be called from any thread;
 *  - no vCPU thread ever waits for the console's reader (see console_out).
 *
 * Threads created by the library inherit the calling thread's signal mask:
 * block the signals your process handles itself (e.g. with signalfd)
 * before mvm_start, as mvm(1) does, so they are not delivered to VM threads.
 */
#ifndef MVM_H
#define MVM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One version for the header, the library, its package and mvm(1):
 * MAJOR.MINOR.PATCH, and libmvm.so.MAJOR. A new MAJOR only when a call or
 * a field changes meaning or a struct's layout stops being compatible; new
 * calls and new fields (at the end of a struct, which carries its size or
 * is passed with it) make a new MINOR: a program built against an older
 * header runs against a newer library of the same MAJOR. */
#define MVM_VERSION_MAJOR 2
#define MVM_VERSION_MINOR 17
#define MVM_VERSION_PATCH 0
#define MVM_VERSION_STRING "2.17.0"
#define MVM_ERR_MAX 512          /* enough for any message */
/* For the statistics calls: every vCPU, every disk, every queue. */
#define MVM_ALL (~0u)
#define MVM_MAX_DISKS 16
#define MVM_MAX_QUEUES 64
#define MVM_MAX_CPUS 254
#define MVM_MIN_MEM (16ULL << 20)
#define MVM_ID_MAX 8             /* bytes of mvm_config.id */
#define MVM_DISK_ID_MAX 64       /* bytes of mvm_disk.id (Cloud Hypervisor's device ids) */

struct mvm;

enum mvm_log_level { MVM_LOG_ERROR, MVM_LOG_WARNING, MVM_LOG_INFO };

/* A log line, without "mvm: " and without a newline. Called from any of the
 * VM's threads (vCPU, queue, control) and from the caller's thread; it must
 * not call back into the library for the same VM. */
typedef void (*mvm_log_fn)(void *opaque, enum mvm_log_level level, const char *msg);

/* Guest console output, in order, from the VM's control thread (never a
 * vCPU thread: the guest's bytes wait in the console's 16 KiB buffer).
 * Return promptly: while it runs, the control thread does nothing else
 * (console input, mvm_stop wait), and once the buffer is full the guest
 * waits for it. */
typedef void (*mvm_console_fn)(void *opaque, const uint8_t *buf, size_t len);

/* Structs the caller fills begin with their size, which mvm_config_init /
 * mvm_disk_init set: a library newer than the program reads only what the
 * program knew of and takes defaults for the rest; an older library
 * accepts a newer program's struct as long as the fields it does not
 * know are left zero. */
struct mvm_config {
	size_t size;            /* sizeof(struct mvm_config): mvm_config_init */
	const char *kernel;     /* bzImage (64-bit boot protocol) or ELF vmlinux with
				 * a PVH note; required */
	const char *initrd;     /* initramfs, or NULL */
	const char *cmdline;    /* appended after mvm's own kernel parameters, or NULL */
	unsigned cpus;          /* 1..MVM_MAX_CPUS (and KVM's limit); default 1 */
	uint64_t mem;           /* guest RAM in bytes: >= 16 MiB, a multiple of 4 KiB;
				 * default 256 MiB */
	/* Console (x86: the guest's COM1 UART; s390x: the SCLP console).
	 * Output goes to console_fn when set, else to console_out when >= 0,
	 * else nowhere. Input is read from console_in when >= 0 (by the VM's
	 * control thread). Defaults: -1.
	 *
	 * The guest's output waits in a 16 KiB buffer, which the VM's control
	 * thread writes out; no vCPU ever writes to console_out. The control
	 * thread never blocks on it either: a pipe, FIFO or terminal is
	 * written through a non-blocking file description of its own (opened
	 * through /proc/self/fd; console_out's own flags are left alone), a
	 * socket with MSG_DONTWAIT, a regular file as it is. When the reader
	 * falls behind, the buffer fills and the guest's UART reports itself
	 * busy, so the guest waits (nothing is dropped); mvm_stop still works.
	 * When the reader is gone (EPIPE), output is dropped from then on.
	 * When the guest ends the VM itself (exit port, poweroff), the VM has
	 * ended (mvm_wait, mvm_wait_fd) only once everything it wrote has
	 * been written, however long the reader takes, unless mvm_stop is
	 * called meanwhile; after mvm_stop, Ctrl-A x or mvm_destroy, what
	 * console_out does not take at once is dropped. */
	int console_in;
	int console_out;
	mvm_console_fn console_fn;
	void *console_opaque;
	/* Interpret Ctrl-A in console_in: Ctrl-A x stops the VM (status 0),
	 * Ctrl-A Ctrl-A sends one Ctrl-A. Default false. */
	bool console_escape;
	/* Messages (warnings about the host, what a guest did wrong). NULL: none. */
	mvm_log_fn log_fn;
	void *log_opaque;
	/* The signal that kicks vCPU threads out of KVM_RUN (see above).
	 * Default SIGUSR1. */
	int kick_signal;
	/* Each of the VM's threads (vCPUs, queues, device helpers, control)
	 * installs a seccomp filter for its kind before it handles anything
	 * of the guest's: a forbidden system call kills the process with
	 * SIGSYS. Off by default: turning it on is the host program's choice,
	 * and its own threads are never filtered. Needs Linux seccomp. */
	bool sandbox;
	/* Where startup counts from (CLOCK_MONOTONIC ns; 0: mvm_create's
	 * entry): mvm_stats_json reports "startup_us", from here to vCPU 0's
	 * first KVM_RUN. mvm(1) passes the start of its main(). */
	uint64_t start_ns;
	/* A pvpanic device (QEMU's pvpanic-pci) where the board has PCI
	 * (x86): a guest kernel that panics says so, and the VM ends with
	 * MVM_EXIT_GUEST_PANIC (status 123) rather than rebooting. Default
	 * true; ignored on s390x, whose panics end in a disabled wait. */
	bool pvpanic;
	/* Since 2.1. The VM's name in its threads' names: "ID-ctl" (control),
	 * "ID-dNqM" (disk N's I/O thread whose first queue is M), "ID-dNirq"
	 * (a virtio-pci disk's INTx helper), "ID-hNqM" and "ID-hNirq" (hot-plug
	 * slot N's disk device's, since 2.10); vCPU threads are "vcpuN"
	 * whatever it is, as Cloud Hypervisor names them. 1 to MVM_ID_MAX
	 * letters, digits, '-', '_' or '.'; NULL (default): "mvm".
	 * mvm_get_threads lists them with their ids. */
	const char *id;
	/* Since 2.5. PCIe root ports with an empty hot-plug slot each
	 * (x86), 0..MVM_MAX_HOTPLUG_SLOTS: mvm_add_disk on the running VM
	 * puts a virtio-pci disk in a free one, mvm_disk_remove takes it
	 * out; since 2.10 each slot's disk device is made with the VM
	 * (hotplug_queues), so neither makes a thread. The guest's kernel
	 * needs pciehp (CONFIG_HOTPLUG_PCI_PCIE). Since 2.13, on s390x,
	 * subchannels that show no device until a virtio-ccw disk is put
	 * in (a channel report tells the guest, as a removal does).
	 * Default 0. */
	unsigned hotplug_slots;
	/* Since 2.6. A snapshot's directory (mvm_snapshot): the VM goes on
	 * from where the snapshot's guest stood instead of booting. kernel,
	 * initrd and cmdline must then be NULL (the guest's memory holds its
	 * kernel); cpus, mem, pvpanic, hotplug_slots and hotplug_queues are the snapshot's
	 * (the config's are ignored). Disks added with mvm_add_disk take the
	 * places of the snapshot's, in order, and must have their shapes
	 * (size, queues, transport, ...): a clone gets a copy of the image;
	 * with none added, the snapshot's disks are opened again from their
	 * paths with their options. Likewise its vsock device: one given
	 * with mvm_add_vsock (a clone's own CID and socket) takes its
	 * place; the guest's vsock connections are reset (TRANSPORT_RESET,
	 * virtio 1.2 §5.10.6.7), its listeners stay. Guest RAM is mapped privately from
	 * DIR/memory: pages are read as the guest touches them, and VMs
	 * restored from one snapshot share them in the host's page cache
	 * (s390x whose KVM lacks KVM_CAP_S390_COW: read into the VM's own
	 * RAM instead, as it cannot run a guest in copy-on-write memory).
	 * A snapshot of another mvm version, another shape or a damaged one
	 * is refused (mvm_create, mvm_prepare or mvm_start), naming what
	 * differs. docs/snapshot.md. */
	const char *restore;
	/* Since 2.6. mvm_start leaves the VM paused: its vCPUs park before
	 * their first instruction, its queues take nothing from the guest,
	 * and mvm_resume lets it run (Cloud Hypervisor's vm.restore leaves
	 * the restored VM so, for its owner to resume). Default false. */
	bool start_paused;
	/* Since 2.7. A directory for snapshots (made, mode 0700, when
	 * missing), opened by mvm_prepare and held: mvm_snapshot writes a
	 * snapshot whose directory is this one or beneath it through that
	 * descriptor, so it can be taken after a chroot (mvm(1)'s jail) and
	 * by the thread mvm_confine_api_thread confined. That thread may
	 * write snapshots there and nowhere else: Landlock confines its
	 * file access to this tree (where the kernel has Landlock: Linux
	 * 5.13, "landlock" among its LSMs), its seccomp filter lets it
	 * create, rename and remove files only through this descriptor.
	 * NULL (default): none; mvm_snapshot takes any path from a thread
	 * that may open files, and none from a confined one. */
	const char *snapshot_dir;
	/* Since 2.7. Guest RAM in this file (made, mode 0600, or emptied:
	 * its old contents are gone) rather than in anonymous memory,
	 * mapped shared: the guest's writes go to the file (and, on a disk
	 * file system, are written back by the host's page cache). A
	 * snapshot into the directory holding it as "memory" (DIR/memory
	 * is this path) then costs a flush, not a copy: the file is synced
	 * and the state written beside it; from then on the VM's RAM is a
	 * private mapping of that file, so the snapshot stays as it was
	 * whatever the VM does next. Not with restore; not with a disk's
	 * fixed_buffers; not on s390x whose KVM lacks KVM_CAP_S390_COW
	 * (mvm_prepare: -ENOTSUP). NULL (default): anonymous memory. */
	const char *mem_file;
	/* Since 2.10. A directory of images for a running VM's disks,
	 * opened by mvm_prepare (O_PATH) and held, so that it outlasts a
	 * chroot: the thread mvm_confine_api_thread confined may open an
	 * image beneath it (its path absolute, as written, no "." or "..")
	 * for mvm_disk_swap or mvm_add_disk on the running VM, and nowhere else. Landlock holds that thread's
	 * file access to this tree (read and write regular files; with
	 * snapshot_dir, that one's rights there), its seccomp filter lets it
	 * open files only through this descriptor. NULL (default): a
	 * confined thread swaps and plugs no image. Other threads take any
	 * path. */
	const char *image_dir;
	/* Since 2.10. The queues of each hot-plug slot's disk device,
	 * 1..MVM_MAX_QUEUES (0: 1; default 1): mvm_prepare makes one disk
	 * device per slot, with this many queues, its I/O threads and rings
	 * and no image, and mvm_add_disk on the running VM gives the free
	 * slot's device the disk's image and options (so a thread in its
	 * filter may plug one: nothing is made). A disk plugged in may ask for
	 * fewer queues, not more; its io_threads, poll_us and gather_us are
	 * the slot's (the defaults), and it has no fixed_buffers. A restore
	 * takes the snapshot's. */
	unsigned hotplug_queues;
};
#define MVM_MAX_HOTPLUG_SLOTS 8

enum mvm_transport { MVM_TRANSPORT_PCI, MVM_TRANSPORT_MMIO, MVM_TRANSPORT_CCW };

/* Since 2.3. A token bucket, Firecracker's and Cloud Hypervisor's model,
 * so that their settings carry over: it holds up to `size` tokens and
 * refills from empty to full in `refill_time_ms`, continuously (mvm
 * computes when the next request fits and waits exactly that long; no
 * re-check timer). `one_time_burst` tokens more are there at the start,
 * used first and never refilled. It starts full. A request that costs
 * more than `size` waits for a full bucket and then goes (the bucket
 * goes into debt): nothing is ever refused. size 0: no limit. */
struct mvm_token_bucket {
	uint64_t size;          /* 0 (no limit) .. MVM_RATE_SIZE_MAX */
	uint64_t one_time_burst;/* 0 .. MVM_RATE_SIZE_MAX */
	uint64_t refill_time_ms;/* 1 .. MVM_RATE_REFILL_MS_MAX where size is set */
};
#define MVM_RATE_SIZE_MAX (1ULL << 50)
#define MVM_RATE_REFILL_MS_MAX 3600000ULL
/* A disk's I/O limits (since 2.3): bytes read and written, and requests
 * (every request that reaches the host: reads, writes, flushes, discards,
 * write-zeroes). A request waits until both buckets have its tokens; the
 * guest's next requests wait in the ring meanwhile. */
struct mvm_rate_limit {
	struct mvm_token_bucket bw;     /* bytes */
	struct mvm_token_bucket ops;    /* requests */
};
enum mvm_cache { MVM_CACHE_WRITEBACK, MVM_CACHE_NONE };

struct mvm_disk {
	size_t size;            /* sizeof(struct mvm_disk): mvm_disk_init */
	const char *path;       /* raw image (size a multiple of 512) or block device */
	bool ro;                /* read-only: VIRTIO_BLK_F_RO, writes fail */
	const char *serial;     /* VIRTIO_BLK_T_GET_ID, up to 20 bytes, or NULL */
	enum mvm_cache cache;   /* MVM_CACHE_NONE: O_DIRECT on the host */
	bool discard;           /* offer DISCARD (hole punching) when the host can */
	unsigned queues;        /* virtqueues, 1..MVM_MAX_QUEUES; default 1 */
	enum mvm_transport transport;   /* default: the architecture's (x86:
					 * MVM_TRANSPORT_PCI, s390x: _CCW) */
	bool packed;            /* offer the packed ring; default true */
	unsigned poll_us;       /* the longest an idle I/O thread polls for work
				 * (the window adapts below it), 0..1000 us;
				 * default 32; 0: never */
	unsigned io_threads;    /* host threads serving the queues (queue q on
				 * thread q % io_threads); 0 (default): one per
				 * queue, at most one per CPU the process may
				 * run on; more than queues means queues */
	unsigned gather_us;     /* after a guest notification, the longest an I/O
				 * thread sleeps for more requests to batch (it
				 * adapts below it, and stops where the guest
				 * waits for each completion), 0..1000 us;
				 * default 200; 0: never */
	bool fixed_buffers;     /* register guest RAM with the I/O threads'
				 * io_uring as fixed buffers: O_DIRECT I/O skips
				 * pinning pages per request, but all of guest RAM
				 * is pinned (RLIMIT_MEMLOCK without CAP_IPC_LOCK;
				 * where it does not fit, a warning and the disk
				 * runs without); default false */
	/* Since 2.3. This disk's own I/O limits (default none), and the
	 * id of a rate-limit group (mvm_add_rate_group) whose limits it
	 * shares with the group's other disks, of this VM and of others in
	 * the process: a request waits for the tokens of both. NULL: none. */
	struct mvm_rate_limit rate;
	const char *rate_limit_group;
	/* Since 2.9. The disk's name for those who drive the VM (Cloud
	 * Hypervisor's DiskConfig id: vm.info, vm.counters, vm.remove-device,
	 * --stats): 1..MVM_DISK_ID_MAX letters, digits, '-', '_', '.', unique
	 * among the VM's disks (a removed disk's may be taken again). NULL:
	 * "_diskN", N the disk's number (or the next one no disk has), as
	 * Cloud Hypervisor names them. Snapshots keep it; mvm_get_disk gives
	 * it, mvm_disk_find looks it up. */
	const char *id;
};

/* Since 2.3. A rate-limit group: limits that several disks share (Cloud
 * Hypervisor's rate_limit_groups). The config of mvm_rate_group_new, and
 * mvm(1)'s --rate-limit-group "id=NAME,bw_size=N,..." */
struct mvm_rate_group_config {
	size_t size;            /* sizeof: mvm_rate_group_config_init */
	const char *id;         /* 1..MVM_ID_MAX letters, digits, '-', '_', '.' */
	struct mvm_rate_limit rate;
};
struct mvm_rate_group;

/* A virtio-vsock device (one per VM): a stream channel between the
 * guest and host programs, as Firecracker's and Cloud Hypervisor's
 * "hybrid vsock" over Unix sockets. Host programs connect to `socket` and
 * write "CONNECT <port>\n" to reach the guest's port (mvm answers
 * "OK <host port>\n"); a guest connecting to CID 2 port P reaches
 * whoever listens on the Unix socket "<socket>_P". */
struct mvm_vsock {
	size_t size;            /* sizeof(struct mvm_vsock): mvm_vsock_init */
	unsigned cid;           /* the guest's CID, 3..0xfffffffe */
	const char *socket;     /* PATH of the listening Unix socket mvm makes */
	enum mvm_transport transport;   /* default: the architecture's */
	unsigned conns;         /* connections at once, 1..4096; default 256 (since 2.16;
				 * 1024 before): each gets 64 MiB / conns of credit,
				 * 256 KiB at most */
	/* 2.11: the longest time its idle thread polls for the guest's next
	 * packet or a host socket's answer, 0..1000 us; default 0 (never) */
	unsigned poll_us;
};

/* Why a VM ended. */
enum mvm_exit_reason {
	MVM_EXIT_POWEROFF,      /* the guest powered off or rebooted: status 0 (x86:
				 * also every vCPU stopped with interrupts off, as
				 * Linux's poweroff without ACPI leaves them; the
				 * control thread looks once a second) */
	MVM_EXIT_GUEST_STATUS,  /* the guest wrote its status to the exit port */
	MVM_EXIT_STOPPED,       /* mvm_stop(), or Ctrl-A x: status as given */
	MVM_EXIT_GUEST_ERROR,   /* the guest did something mvm cannot handle, or this
				 * KVM cannot run it: status 126, message says what */
	MVM_EXIT_HOST_ERROR,    /* a host or KVM failure: status 125 */
	MVM_EXIT_GUEST_CRASH,   /* the guest crashed (x86: a triple fault): status 122,
				 * message says where */
	MVM_EXIT_GUEST_PANIC,   /* the guest's kernel panicked and said so (x86:
				 * pvpanic; s390x: a disabled wait): status 123 */
};

struct mvm_exit {
	enum mvm_exit_reason reason;
	int status;             /* what mvm(1) exits with for this end */
	char message[MVM_ERR_MAX];   /* empty unless an error ended the VM */
	/* Since 2.8 (mvm_wait copies what the caller's exlen holds): with
	 * MVM_EXIT_POWEROFF, the guest asked for a reboot (x86: the i8042's
	 * reset line; s390x: a re-IPL), not a poweroff. The VM has ended
	 * either way; a caller that wants the guest back makes it again. */
	bool reboot;
};

/* Statistics since mvm_start. The calls that fill these take the size of
 * the caller's struct and write that much (fields a newer library has
 * beyond it are left out; fields an older one lacks read as zero). */
struct mvm_vcpu_stats {
	uint64_t exits_io, exits_mmio, exits_intr, exits_hlt, exits_shutdown,
		 exits_system_event, exits_other;
	uint64_t exits_arch;    /* the architecture's own (s390: intercepted instructions) */
};

struct mvm_queue_stats {
	uint64_t requests;      /* requests the guest submitted */
	uint64_t batches;       /* publishes of completed requests */
	uint64_t enters;        /* io_uring_enter calls */
	uint64_t irqs;          /* interrupts sent to the guest */
	uint64_t errors;        /* requests completed with an error status */
	uint64_t bytes_read, bytes_written;
	uint64_t polled;        /* rounds where polling found work */
	uint64_t kicks;         /* guest notifications (VM exits), +1 per queue start */
	/* Since 2.3: requests the disk's rate limits (or its group's)
	 * delayed, and the time they waited in all. */
	uint64_t rate_delayed;
	uint64_t rate_wait_us;
	/* Since 2.5: reads and writes that completed OK (Cloud Hypervisor's
	 * read_ops and write_ops). */
	uint64_t read_ops, write_ops;
};

struct mvm_stats {
	unsigned cpus, disks;
	uint64_t console_bytes_out, console_bytes_in;
	/* Since 2.4: pauses ended (mvm_resume) and their time in all. */
	uint64_t pauses;
	uint64_t paused_us;
	/* Since 2.6: guest RAM in bytes (a restored VM's is its snapshot's). */
	uint64_t mem;
	/* Since 2.12: mvm_nmi calls that every vCPU took. */
	uint64_t nmis;
};

/* The library's version (MVM_VERSION_STRING as it was built), whatever
 * header the program was built with. */
const char *mvm_version(void);

/* The most vCPUs a VM of this library's architecture takes (at most
 * MVM_MAX_CPUS; KVM may allow fewer still). Since 2.1. */
unsigned mvm_max_cpus(void);

/* Defaults for every field, and the size: that of the caller's struct,
 * which the macros pass, so that a program built with an older mvm.h gets
 * the fields it knows and nothing is written past them. The functions of
 * the same names are what programs built with 2.0's mvm.h call (they fill
 * 2.0's structs). _size: since 2.1. */
void mvm_config_init_size(struct mvm_config *cfg, size_t size);
void mvm_disk_init_size(struct mvm_disk *disk, const char *path, size_t size);
void mvm_config_init(struct mvm_config *cfg);
void mvm_disk_init(struct mvm_disk *disk, const char *path);
#define mvm_config_init(cfg) mvm_config_init_size((cfg), sizeof(*(cfg)))
#define mvm_disk_init(disk, path) mvm_disk_init_size((disk), (path), sizeof(*(disk)))

/* Parse mvm(1)'s --disk syntax, "PATH[,key=value]..." (mvm_disk_syntax
 * writes it out: "PATH[,ro][,serial=ID][,cache=none|writeback]..."), over
 * *disk: keys the spec leaves out keep what disk holds (mvm_disk_init's
 * defaults, or the caller's). path and serial then point into buf, which
 * needs strlen(spec) + 1 bytes and must live until mvm_add_disk (which
 * copies them). The limits are mvm_add_disk's. 0, or -EINVAL (-ENOSPC:
 * buf too small) with a one-line message that starts with "disk". Since
 * 2.1. */
int mvm_disk_parse(struct mvm_disk *disk, const char *spec, char *buf, size_t buflen,
		   char *err, size_t errlen);
/* One key of that syntax over *disk ("queues", "4"; value NULL for a
 * flag such as "ro"): for a program's option that sets it for every disk
 * (mvm(1)'s --queues, --io-threads, --transport). A string key points at
 * value itself. 0 or -EINVAL with a message that starts with the key.
 * Since 2.1. */
int mvm_disk_set(struct mvm_disk *disk, const char *key, const char *value, char *err,
		 size_t errlen);
/* That syntax into buf (cut to len, NUL-terminated); returns the length
 * it needs (buf NULL or len 0: the length alone). Since 2.1. */
size_t mvm_disk_syntax(char *buf, size_t len);
/* What each key means, for a program's help (one key per paragraph,
 * indented by indent), into buf as mvm_disk_syntax. Since 2.1. */
size_t mvm_disk_help(unsigned indent, char *buf, size_t len);

/* The vsock device's (struct mvm_vsock) counterparts of the four calls
 * above, over mvm(1)'s --vsock syntax "cid=N,socket=PATH[,key=value]..."
 * (socket then points into buf). mvm_vsock_init leaves cid and socket
 * unset: mvm_add_vsock refuses a struct without them. Since 2.2. */
void mvm_vsock_init_size(struct mvm_vsock *vsock, size_t size);
#define mvm_vsock_init(vsock) mvm_vsock_init_size((vsock), sizeof(*(vsock)))
int mvm_vsock_parse(struct mvm_vsock *vsock, const char *spec, char *buf, size_t buflen,
		    char *err, size_t errlen);
size_t mvm_vsock_syntax(char *buf, size_t len);
size_t mvm_vsock_help(unsigned indent, char *buf, size_t len);

/* Since 2.3: rate-limit groups. _init, _parse, _syntax and _help are
 * the counterparts of mvm_disk's over the --rate-limit-group syntax
 * "id=NAME[,bw_size=N]..." (id then points into buf). A group is made
 * with one reference, the caller's; each VM it is added to takes one
 * more (dropped by mvm_destroy), and the last mvm_rate_group_unref frees
 * it. mvm_rate_group_set changes its limits at any time, for every disk
 * in it at once (tokens it holds beyond the new size are dropped; a new
 * one_time_burst is granted again). */
void mvm_rate_group_config_init_size(struct mvm_rate_group_config *g, size_t size);
#define mvm_rate_group_config_init(g) mvm_rate_group_config_init_size((g), sizeof(*(g)))
int mvm_rate_group_parse(struct mvm_rate_group_config *g, const char *spec, char *buf,
			 size_t buflen, char *err, size_t errlen);
size_t mvm_rate_group_syntax(char *buf, size_t len);
size_t mvm_rate_group_help(unsigned indent, char *buf, size_t len);
int mvm_rate_group_new(const struct mvm_rate_group_config *g, struct mvm_rate_group **out,
		       char *err, size_t errlen);
int mvm_rate_group_set(struct mvm_rate_group *grp, const struct mvm_rate_limit *rate,
		       size_t len, char *err, size_t errlen);
void mvm_rate_group_unref(struct mvm_rate_group *grp);

/* Check cfg and make a VM that is not running yet (the config is copied;
 * files are checked and the kernel is parsed now). 0 or -errno. */
int mvm_create(const struct mvm_config *cfg, struct mvm **out, char *err, size_t errlen);

/* Add a virtio-blk disk (vda, vdb, ... in order) before mvm_start. The
 * image is opened and locked now (an image another VM holds read-write is
 * refused: -EBUSY). -ENOSPC past MVM_MAX_DISKS. Disks are numbered in
 * the order they were added, from 0; a removed disk's number is not
 * given again.
 *
 * Since 2.5, on a running (or paused) VM with a free hot-plug slot
 * (mvm_config.hotplug_slots), the disk is hot-plugged: its device made
 * and started behind the slot's port, then the guest told (PCIe native
 * hot-plug); its number is mvm_disk_count() - 1 on return. Only the
 * virtio-pci transport (since 2.13 on s390x virtio-ccw: the slot's
 * subchannel and a channel report); -ENOSPC when every slot is taken,
 * -EBUSY without hot-plug slots. Not from a thread mvm_start_confined or
 * mvm_confine_api_thread confined (it opens the image, makes a ring and
 * threads). */
int mvm_add_disk(struct mvm *vm, const struct mvm_disk *disk, char *err, size_t errlen);

/* Let the VM's disks name grp (its id) in rate_limit_group; before
 * mvm_add_disk of those disks and before mvm_start. -EEXIST: a group of
 * that id is there already; -EBUSY after mvm_start. Since 2.3. */
int mvm_add_rate_group(struct mvm *vm, struct mvm_rate_group *grp, char *err, size_t errlen);

/* Change disk's own rate limits (len: sizeof(*rate)), before or while
 * the VM runs: from the next request on, and a request waiting for
 * tokens is looked at again at once. As mvm_rate_group_set for the
 * tokens. -EINVAL: no such disk or bad limits. Any thread but one that
 * mvm_start_confined confined (the change writes the queue threads'
 * eventfds, which its filter does not allow). Since 2.3. */
int mvm_disk_set_rate_limit(struct mvm *vm, unsigned disk, const struct mvm_rate_limit *rate,
			    size_t len, char *err, size_t errlen);

/* Give the VM its virtio-vsock device (one per VM) before mvm_start. The
 * listening socket is made at mvm_start (mvm_prepare), and removed when
 * the VM is destroyed unless it is sandboxed (the next start replaces it). -EBUSY after mvm_start, -EEXIST for a second one.
 * Since 2.2. */
int mvm_add_vsock(struct mvm *vm, const struct mvm_vsock *vsock, char *err, size_t errlen);

/* Everything of mvm_start that opens or creates something, and no thread:
 * open /dev/kvm, create the KVM VM, its devices and vCPUs, load the kernel.
 * Optional: for a caller that drops privileges (chroot, setuid) between
 * the two, while the process still has one thread. Once per VM (-EBUSY
 * again); errors as mvm_start's, and on failure the VM can only be
 * destroyed. */
int mvm_prepare(struct mvm *vm, char *err, size_t errlen);

/* Start the VM: mvm_prepare unless done, then the devices' threads, the
 * vCPUs and the VM's control thread. Once per VM (-EBUSY again). On
 * failure nothing is left running; the VM can only be destroyed.
 * -ENODEV: no usable /dev/kvm (missing, no permission); -ENOTSUP: this
 * KVM or kernel lacks what mvm needs (io_uring: Linux 6.1); -EINVAL,
 * -ENOSPC, -ENOEXEC, -E2BIG: the kernel, command line or sizes do not
 * fit; others: host failures. */
int mvm_start(struct mvm *vm, char *err, size_t errlen);

/* mvm_start, and with cfg.sandbox on, before any vCPU runs, the calling
 * thread enters the seccomp filter of a thread that only waits for the VM
 * and ends it: mvm_stop, mvm_wait, mvm_wait_fd, the statistics calls and
 * mvm_destroy, poll and read on descriptors it has, messages on stderr,
 * memory, restoring the terminal console_in names, exit (what mvm(1)'s
 * main thread does; docs/sandbox.md lists the calls). For a host thread
 * that does nothing else from then on: anything beyond kills the process.
 * The filter cannot be removed. Errors as mvm_start's, and a filter that
 * cannot be installed fails the start (nothing is left running). */
int mvm_start_confined(struct mvm *vm, char *err, size_t errlen);

/* Ask the VM to stop; it ends with MVM_EXIT_STOPPED and `status` unless it
 * already ended for another reason (then its console output still
 * waiting for a slow reader is dropped: see console_out). Returns at once
 * (mvm_wait waits). Async-signal-safe. -EINVAL before mvm_start. */
int mvm_stop(struct mvm *vm, int status);

/* Wait for the VM to end, at most timeout_ms (-1: forever, 0: poll); the
 * VM's threads are joined when it returns 0, and ex (exlen bytes: sizeof,
 * or 0 with ex NULL) says why it ended. -ETIMEDOUT, or -EINVAL before
 * mvm_start. */
int mvm_wait(struct mvm *vm, int timeout_ms, struct mvm_exit *ex, size_t exlen);

/* Since 2.4. Pause a running VM: every vCPU leaves the guest and waits,
 * each disk and vsock queue thread takes no more requests (what the guest
 * posts waits in its rings) and what it had in flight completes, and the
 * guest's clock is kept (x86: kvmclock, with KVM_KVMCLOCK_CTRL so the
 * guest does not report a soft lockup; s390: the TOD clock): after
 * mvm_resume the guest's time goes on from where it stood. The console
 * keeps its input for the guest. Returns once all of that is done: 0;
 * -EALREADY (paused already), -ESHUTDOWN (the VM stopped), -EINVAL (not
 * started), -ETIMEDOUT (a vCPU or host I/O did not stop within 5 s: the
 * VM runs on, as before the call), with a message in err. A paused VM
 * still stops (mvm_stop, a signal) and mvm_destroy takes it. */
int mvm_pause(struct mvm *vm, char *err, size_t errlen);
/* Since 2.4. Let a paused VM run again: 0, -EALREADY (not paused), or
 * -errno with a message (the VM then stays paused). */
int mvm_resume(struct mvm *vm, char *err, size_t errlen);

/* Since 2.12. One non-maskable interrupt to every vCPU of a running or
 * paused VM (Cloud Hypervisor's vm.nmi; a paused guest takes it when it
 * resumes), as a watchdog or a debugger's "NMI button" would, for a guest
 * set to dump its stacks, panic or start kdump on one (Linux: the
 * kernel.unknown_nmi_panic and kernel.panic_on_unrecovered_nmi
 * settings). Each call delivers one to each vCPU; one that arrives
 * while the guest still handles the last merges with it, as on hardware.
 * x86 only. 0; -EINVAL (not started), -ESHUTDOWN (stopped), -EOPNOTSUPP
 * (s390x: no such interrupt), -EIO (a vCPU's local APIC took none: the
 * guest turned it off), with a message that names the vCPU. */
int mvm_nmi(struct mvm *vm, char *err, size_t errlen);

/* Since 2.12. Press the VM's power button: the guest is asked to shut
 * down, and the VM ends when it has (Cloud Hypervisor's vm.power-button).
 * s390x: the SCLP's Signal Quiesce event, as QEMU's system_powerdown
 * (Linux runs ctrl_alt_del(): its init's orderly shutdown where init
 * took Ctrl-Alt-Del as a signal, else the kernel's restart path, which
 * quiesces the CPUs: a poweroff, status 0). A paused guest hears it when
 * it resumes. Since 2.13, x86: the i8042 keyboard's Power key, pressed
 * and released (the guest gets no ACPI, the bus of Cloud Hypervisor's
 * button; Firecracker's SendCtrlAltDel is that keyboard's too): Linux's
 * atkbd reports KEY_POWER, which systemd-logind or acpid take as the
 * power button (the guest needs CONFIG_SERIO_I8042 and
 * CONFIG_KEYBOARD_ATKBD). Returns once the guest has been told, not when
 * it is down (mvm_wait). 0; -EINVAL (not started), -ESHUTDOWN (stopped),
 * -EAGAIN (x86: the guest has not read the last press), -ENODEV (x86:
 * the guest disabled its keyboard). */
int mvm_power_button(struct mvm *vm, char *err, size_t errlen);

/* Since 2.12. Write a paused VM (mvm_pause) to the file at path as an ELF
 * core dump, Cloud Hypervisor's vm.coredump and QEMU's
 * dump-guest-memory: per vCPU its registers (x86: NT_PRSTATUS and QEMU's
 * CPU state note, which crash(8) reads; s390x: NT_PRSTATUS with the PSW,
 * NT_FPREGSET and Linux's NT_S390_* notes), then each guest RAM region as a
 * PT_LOAD at its guest-physical address (p_paddr), its all-zero pages left
 * as holes. Open it with crash and the guest kernel's vmlinux. The file is
 * written under path.part, mode 0600, and renamed once complete (a
 * failure leaves nothing); its directory is made (0700) where missing.
 * The caller's thread writes it, as mvm_snapshot does, with the same
 * rules for a confined API thread (beneath mvm_config.snapshot_dir
 * only). The VM stays paused. 0, or -errno with a message: -EINVAL (not
 * paused), -EISDIR (a path that names no file: "", "DIR/"), -EPERM (not
 * beneath the snapshot directory, for that thread), or a file error. */
int mvm_coredump(struct mvm *vm, const char *path, char *err, size_t errlen);
/* Since 2.12. The largest file mvm_coredump writes for a VM of `cpus`
 * vCPUs and `mem` bytes of RAM: the RAM and what the ELF core adds around
 * it (headers, each vCPU's notes, page alignment). A file-size limit
 * (RLIMIT_FSIZE) that lets core dumps through is at least this. */
uint64_t mvm_coredump_size_max(unsigned cpus, uint64_t mem);

/* Since 2.6. Write a snapshot of a paused VM (mvm_pause) to dir, made
 * (mode 0700) when missing: DIR/memory, guest RAM with its zero pages
 * left as holes, then DIR/state, the vCPUs', the interrupt controllers'
 * and every device's state in a versioned file with checksums
 * (docs/snapshot.md), which marks the snapshot complete; an older
 * snapshot there is replaced, and one cut short leaves no state file.
 * What the queues had in flight completed at the pause; what the guest
 * made available and the devices had not taken stays in the rings and
 * is served after a restore (mvm_config.restore), and so is a request a
 * disk holds for rate-limit tokens (given back to its ring in the
 * snapshot). The VM stays paused:
 * mvm_resume lets it go on, mvm_stop ends it. The caller's thread writes
 * the files: not a thread confined by mvm_start_confined; the thread
 * mvm_confine_api_thread confined only beneath mvm_config.snapshot_dir
 * (-EPERM elsewhere). 0, or -errno with a message: -EINVAL (not paused),
 * -EBUSY (a device holds requests it cannot give back: resume, then try
 * again), -EOPNOTSUPP (what snapshots cannot carry: a KVM without
 * KVM_CAP_S390_IRQ_STATE on s390x), or a file error. Hot-plug slots are
 * carried, with the disks plugged into them. Since 2.14 on s390x too
 * (docs/snapshot.md#s390x). A vsock device's connections are not kept:
 * a restore resets them (the guest gets a TRANSPORT_RESET). */
int mvm_snapshot(struct mvm *vm, const char *dir, char *err, size_t errlen);

/* Since 2.4. Swap disk `disk`'s (0: vda) backing image for the raw image
 * at path, in a running or paused VM, as Firecracker's drive update does:
 * the new image is opened with the disk's options (read-only, cache,
 * discard) and locked, the VM paused for the swap if it runs (what was in
 * flight completes on the old image), and the guest gets a configuration
 * change: it sees the new capacity at once (Linux: "new size" in its log).
 * Data the guest cached from the old image stays in its page cache until
 * it drops it; swap an image the guest does not have mounted. Refused,
 * with nothing changed: an image that is busy, odd-sized or missing, one
 * read-only for a read-write disk (or the reverse), one that cannot punch
 * holes for a disk that offered discard. The caller's thread opens the
 * file: not a thread confined by mvm_start_confined. 0 or -errno with a
 * message. */
int mvm_disk_swap(struct mvm *vm, unsigned disk, const char *path, char *err, size_t errlen);

/* Since 2.17. Make disk `disk`'s image file `size` bytes long in a running
 * or paused VM, as Cloud Hypervisor's vm.resize-disk does: grown (the new
 * part reads as zeros, the file sparse) or cut (what lay past the new end
 * is gone: shrink only what the guest no longer uses). The VM is paused
 * for it if it runs (what was in flight completes on the old size), and
 * the guest gets a configuration change, as with mvm_disk_swap. Refused,
 * with nothing changed: a size that is not a non-zero multiple of 512, a
 * read-only disk, a host block device (its size is the host's to change).
 * Calls ftruncate on the open image only: any thread, the API thread
 * under mvm_confine_api_thread's filter included (not one confined by
 * mvm_start_confined). 0 or -errno with a message. */
int mvm_disk_resize(struct mvm *vm, unsigned disk, uint64_t size, char *err, size_t errlen);

/* Since 2.5. How many disks were added (removed ones included: their
 * numbers stay taken); 0 for NULL. */
unsigned mvm_disk_count(const struct mvm *vm);

/* Since 2.6. Disk `disk`'s options as the VM took them (a restored VM's
 * disks included, from mvm_prepare on), into *out (size: sizeof(*out));
 * its strings are the VM's, valid until mvm_destroy or the disk's
 * removal or swap. 0, -ENOENT (no such disk), -EINVAL. */
int mvm_get_disk(const struct mvm *vm, unsigned disk, struct mvm_disk *out, size_t size);
/* Since 2.9. The number of the disk whose id (mvm_disk.id) is `id`, a
 * removed one's excepted: 0.., or -ENOENT (none), -EINVAL (NULL). */
int mvm_disk_find(const struct mvm *vm, const char *id);
/* Since 2.10. The VM's configuration as it runs, into *out (size:
 * sizeof(*out)): what mvm_create took, with a restored VM's shape and
 * payload (cpus, mem, pvpanic, hotplug_slots; kernel, initrd and cmdline
 * as the snapshot's guest booted, though the VM loads none of them) from
 * its snapshot. Its strings are the VM's, valid until mvm_destroy. 0 or
 * -EINVAL. */
int mvm_get_config(const struct mvm *vm, struct mvm_config *out, size_t size);
/* Since 2.6. The vsock device's options likewise: 0, -ENOENT (none). */
int mvm_get_vsock(const struct mvm *vm, struct mvm_vsock *out, size_t size);
/* Since 2.15. The VM's rate-limit group `group` (0.., in the order they
 * were added; a restored VM's from mvm_prepare on, those its snapshot
 * brought after the caller's) with its limits as they are now
 * (mvm_rate_group_set), into *out (size: sizeof(*out)); its id is the
 * group's, valid until mvm_destroy. 0, -ENOENT (no such group), -EINVAL. */
int mvm_get_rate_group(const struct mvm *vm, unsigned group, struct mvm_rate_group_config *out,
		       size_t size);

/* Since 2.12. The vsock device's counters, by --stats' names (fields a
 * newer library adds beyond len are left out; fields an older one lacks
 * read as zero). */
struct mvm_vsock_stats {
	uint64_t connections_guest;     /* connections the guest opened */
	uint64_t connections_host;      /* connections host clients opened */
	uint64_t connections_open;      /* open now */
	uint64_t bytes_to_host, bytes_to_guest;
	uint64_t packets_from_guest, packets_to_guest;
	uint64_t resets_sent, resets_received;
	uint64_t credit_stalls;         /* host data that waited for the guest's credit */
	uint64_t credit_updates;        /* CREDIT_UPDATEs sent */
	uint64_t connection_limit;      /* guest connects refused: the connection cap */
	uint64_t buffer_limit;          /* 0 since 2.16: the cap is shared out as credit */
	uint64_t no_listener;           /* guest connects nobody listened for */
	uint64_t connect_timeouts;      /* host connects the guest never answered, and
					 * (since 2.16) guest connects no host listener
					 * took, each within 2 s */
	uint64_t host_clients;          /* host clients accepted */
	uint64_t handshakes_failed;     /* clients without a valid CONNECT line in time */
	uint64_t host_errors;           /* host socket calls that failed */
	uint64_t bad_packets;           /* packets the guest got wrong */
	uint64_t bad_rx_buffers;        /* RX buffers that cannot hold a packet */
};
/* Since 2.12. The VM's vsock device's counters (zeros before mvm_start):
 * 0; -ENOENT without a vsock device; -EINVAL for NULL arguments. Any
 * thread, while the VM lives. */
int mvm_get_vsock_stats(const struct mvm *vm, struct mvm_vsock_stats *out, size_t len);

/* Since 2.5. Remove hot-plugged disk `disk` from a running VM. Without
 * flags, with the guest's cooperation, as a person pressing the slot's
 * attention button: the guest (Linux's pciehp, after its 5 s grace)
 * releases the disk, flushing what it wrote, and powers the slot off;
 * mvm then stops the device and closes the image. Waits at most
 * timeout_ms for that (-ETIMEDOUT: the disk stays, a later call may try
 * again or force). MVM_DISK_REMOVE_SURPRISE: pull it at once, as a card
 * yanked from its slot: the guest learns it is gone, host I/O in flight
 * is cancelled and never completed to the guest (its driver fails those
 * requests); what the device completed before stays written. A paused VM
 * takes only a surprise removal (-EBUSY). -EINVAL: no such disk, or it
 * is not on a hot-plug slot (disks given before mvm_start are not);
 * -ENODEV: removed already. Same threads as mvm_add_disk. 0 or -errno
 * with a message. Since 2.13 on s390x (a subchannel's disk): the channel
 * subsystem has no eject handshake, so the disk goes at once, a channel
 * report telling the guest, and timeout_ms is not used; without flags a
 * running VM is paused around it, so its I/O in flight completes to the
 * guest first, and a paused VM takes either kind. */
#define MVM_DISK_REMOVE_SURPRISE 1u
int mvm_disk_remove(struct mvm *vm, unsigned disk, unsigned flags, int timeout_ms, char *err,
		    size_t errlen);
/* Since 2.5. Where disk `disk` is on the guest's PCI bus, as
 * "0000:BB:DD.0" (Cloud Hypervisor's PciDeviceInfo "bdf"), into buf.
 * 0, -ENODEV (not on PCI, not started, or removed), -ENOSPC (buf too
 * small), -EINVAL. */
int mvm_disk_pci_address(struct mvm *vm, unsigned disk, char *buf, size_t len);
/* Since 2.13. Where disk `disk` is on the guest's bus, into buf: on PCI
 * as mvm_disk_pci_address gives it, on the channel subsystem (s390x) as
 * Linux's ccw bus id "0.0.XXXX" (its device number). 0, -ENODEV (on
 * virtio-mmio, not started, or removed), -ENOSPC, -EINVAL. */
int mvm_disk_bus_address(struct mvm *vm, unsigned disk, char *buf, size_t len);

/* Since 2.4. Put the calling thread, one of the host program's that
 * serves run-time control of vm over a socket (mvm(1)'s --api-socket),
 * in the seccomp filter of that kind of thread: it may accept connections
 * on listen_fd only, read and write them, wait with poll or select, and
 * make the library's run-time calls (mvm_pause, mvm_resume, mvm_stop, the
 * state and statistics calls, rate limits), nothing that opens a file or
 * a socket (mvm_disk_swap) or makes a thread; docs/sandbox.md has the
 * table. After mvm_prepare. The filter cannot be removed. 0 or -errno. */
int mvm_confine_api_thread(struct mvm *vm, int listen_fd, char *err, size_t errlen);

/* Since 2.4. The VM's state, for an orchestrator's "vm.info". */
enum mvm_vm_state {
	MVM_VM_CREATED,         /* mvm_create'd, not started */
	MVM_VM_RUNNING,
	MVM_VM_PAUSED,          /* mvm_pause */
	MVM_VM_ENDED,           /* it stopped, or asked to (mvm_wait then returns) */
};
/* enum mvm_vm_state, or -EINVAL for NULL. Any thread, at any time. */
int mvm_get_state(const struct mvm *vm);
/* "created", "running", "paused", "ended" ("unknown" for other values). */
const char *mvm_state_name(int state);

/* An eventfd that becomes readable once the VM has ended (then mvm_wait
 * returns at once), for the caller's poll loop; -1 before mvm_start. */
int mvm_wait_fd(const struct mvm *vm);

int mvm_get_stats(const struct mvm *vm, struct mvm_stats *st, size_t len);
/* One vCPU's or one queue's statistics, or with MVM_ALL their sums (all
 * vCPUs; all queues of a disk, or of every disk): -EINVAL for an index
 * out of range. len: sizeof(*st). */
int mvm_get_vcpu_stats(const struct mvm *vm, unsigned vcpu, struct mvm_vcpu_stats *st,
		       size_t len);
int mvm_get_queue_stats(const struct mvm *vm, unsigned disk, unsigned queue,
			struct mvm_queue_stats *st, size_t len);
/* The statistics as one JSON object (what mvm --stats prints), into buf
 * (NUL-terminated). Returns the length, or -ENOSPC when buf is too small. */
int mvm_stats_json(const struct mvm *vm, char *buf, size_t len);

/* The VM's threads, for a host that pins them or puts them in cgroups. */
enum mvm_thread_kind {
	MVM_THREAD_VCPU,        /* index: the vCPU's id */
	MVM_THREAD_IO,          /* a disk's I/O thread; index: the first queue it serves */
	MVM_THREAD_CONTROL,     /* the console and the VM's end */
	MVM_THREAD_DEVICE,      /* a device's helper (virtio-pci's INTx resampler) */
	MVM_THREAD_VSOCK,       /* the vsock device's thread (index 0); since 2.2 */
};

struct mvm_thread {
	int tid;                /* the Linux thread id (gettid; /proc/PID/task/TID) */
	enum mvm_thread_kind kind;
	unsigned index;
	unsigned disk;          /* MVM_THREAD_IO, _DEVICE: the disk (vda: 0); else MVM_ALL */
	char name[16];          /* as its comm reads, unless the thread renamed itself */
};

/* From mvm_start until the VM's threads are told to stop (it ended, or
 * mvm_stop, mvm_destroy): up to n entries of entsize bytes each
 * (sizeof(struct mvm_thread)) into out, vCPUs first. Returns how many
 * threads the VM has (more than n: the rest left out), -ESRCH before
 * mvm_start or once they stop, -EINVAL for bad arguments. Since 2.1. */
int mvm_get_threads(const struct mvm *vm, struct mvm_thread *out, size_t n, size_t entsize);

/* Stop the VM if it runs, wait for it, free everything. NULL is ignored. */
void mvm_destroy(struct mvm *vm);

/* Can this host's /dev/kvm run a Linux guest? See docs/kvm.md.
 * override: MVM_KVM's value (NULL = auto); cache_path: where the verdict
 * is kept for this host boot (NULL: not cached). */
struct mvm_kvm_check {
	bool direct;            /* run guests on /dev/kvm (else: a nested harness) */
	bool forced;            /* the override decided */
	bool cached;            /* the verdict came from the cache */
	bool pvm;               /* the host's KVM is PVM */
	char why[1024];
};
int mvm_check_kvm(const char *override, const char *cache_path, int kick_signal,
		  struct mvm_kvm_check *out, size_t outlen, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
