/* mvm's REST API: Cloud Hypervisor's endpoints, methods, JSON field names
 * and status codes (its OpenAPI document, cloud-hypervisor.yaml), for what
 * mvm supports; docs/api.md is the table, endpoint by endpoint.
 *
 * A client of the public library, like the command line: the request
 * path (api_handle: method, URL and body in, status and JSON out) is pure
 * and KVM-free for the unit tests and the fuzz target; the server
 * (api_server_*: HTTP/1.1 over a Unix socket with libmicrohttpd, on a
 * thread of its own in a seccomp filter of its own) is a thin shell
 * around it. JSON is parsed and written with jansson. */
#ifndef MVM_API_H
#define MVM_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/mvm.h"

/* Request bodies larger than this are refused (413) before they are read
 * whole; Cloud Hypervisor's largest (a VmConfig) is a few KiB. */
#define API_BODY_MAX (64u << 10)

#define API_PATH_MAX 4096
/* How long vm.remove-device waits for the guest to release a disk (Linux
 * takes 5 s after the attention button). */
#define API_REMOVE_TIMEOUT_MS 15000

/* A disk's DiskConfig as vm.create or vm.add-disk took it. */
struct api_hotdisk {
	char id[MVM_DISK_ID_MAX + 1];
	char path[API_PATH_MAX];
	char serial[32];
	char group[MVM_ID_MAX + 1];
	struct mvm_disk d;         /* its strings point into the above */
};

/* A VmConfig as vm.create took it: the library's structs, their strings
 * in here. */
struct api_vmconfig {
	struct mvm_config vm;      /* kernel, initrd, cmdline, cpus, mem, pvpanic */
	struct api_hotdisk disks[MVM_MAX_DISKS];
	unsigned ndisks;
	bool has_vsock;
	struct mvm_vsock vsock;
	bool console_off;          /* serial mode Off or Null: the guest's output dropped */
	char serial_mode[8];       /* as given (vm.info shows it): Tty, Off or Null */
	/* rate_limit_groups: the groups its disks may name, their ids in
	 * group_ids. */
	struct mvm_rate_group_config groups[MVM_MAX_DISKS];
	char group_ids[MVM_MAX_DISKS][MVM_ID_MAX + 1];
	unsigned ngroups;
	char kernel[API_PATH_MAX], initrd[API_PATH_MAX], vsock_socket[API_PATH_MAX];
	char cmdline[8192];
};

/* What the API's clients got wrong and what the server failed at, a
 * kind each (an error status, or a client too slow for its deadline):
 * each kind counted (vm.counters' "_api") and its first one logged
 * (api_vm.log), so that a client repeating a mistake costs one line. */
enum api_kind {
	API_K_400, API_K_404, API_K_405, API_K_409, API_K_413, API_K_500, API_K_501,
	API_K_OTHER,            /* any other status of 400 or more */
	API_K_SLOW,             /* a connection shut: its request or answer took too long */
	API_KINDS
};
struct api_counts {
	uint64_t requests;      /* answered, errors included */
	uint64_t kind[API_KINDS];
	bool logged[API_KINDS];
};

struct api_vm;
/* What the program serving the API does for vm.create and vm.boot (mvm(1):
 * vmm/cli/main.c), so that the VM is made as the command line makes one.
 * create: make the VM (not started) from c, set v->vm, v->cfg, v->vsock; c
 * stays valid (v->created) while v lives. boot: start it; on success the
 * API sets v->booted. Each 0 or -errno with a message. */
struct api_host {
	int (*create)(struct api_vm *v, const struct api_vmconfig *c, char *err, size_t errlen);
	int (*boot)(struct api_vm *v, char *err, size_t errlen);
	/* vm.restore: the VM made from the snapshot in dir and prepared, to
	 * be started paused (v->vm set). 0 or -errno with a message. */
	int (*restore)(struct api_vm *v, const char *dir, bool resume, char *err,
		       size_t errlen);
};

/* Why the VM is ending at the API's request, where the program serving
 * it can make another (api_vm.relaunch). */
enum api_ending {
	API_END_NONE,
	API_END_SHUTDOWN,          /* vm.shutdown: its VmConfig kept, vm.boot makes it again */
	API_END_REBOOT,            /* vm.reboot: made again from its VmConfig and booted */
	API_END_DELETE,            /* vm.delete: its VmConfig forgotten */
};

/* The VM the API drives and what it was made from (the command line's
 * structs, or vm.create's; the API never changes them), and the disks it
 * plugged in. vm NULL: none created, or (created set) shut down. */
struct api_vm {
	struct mvm *vm;
	const struct mvm_config *cfg;
	const struct mvm_vsock *vsock;     /* or NULL */
	/* vmm.shutdown and vm.shutdown asked the VM to stop (the server then
	 * ends once the answer is out). */
	bool shutdown;
	/* vm.create and vm.boot: served where host is set (NULL: 501); what
	 * vm.create took (the API's, freed by api_vm_fini); the VM booted
	 * (from the start where the command line made it). */
	const struct api_host *host;
	void *host_ctx;
	struct api_vmconfig *created;
	bool booted;
	/* Set by the program: once the VM has ended at the API's request, it
	 * destroys it and serves on (api_vm_relaunch), so that vm.shutdown
	 * keeps the VmConfig, vm.reboot and vm.boot make the VM again, and
	 * vm.delete forgets it, as Cloud Hypervisor does. Unset (a process
	 * that confined itself: --sandbox on, a jail), vm.shutdown and
	 * vm.delete end mvm with its VM, and vm.reboot is refused. */
	bool relaunch;
	enum api_ending ending;    /* written before the API stops the VM */
	/* Requests are served on the API's own thread (api_server_start),
	 * not the main thread's, which starts a booted VM once it has left
	 * api_server_serve_until_boot. Written by the API's thread. */
	bool own_thread;
	/* Counted by the thread that serves (one at a time: the main thread
	 * until the boot, then the API's, which the main thread joins before
	 * it serves again). log: where the first error of each kind goes, a
	 * line without its newline (NULL: nowhere). */
	struct api_counts counts;
	void (*log)(void *opaque, const char *line);
	void *log_opaque;
};

struct api_reply {
	unsigned status;        /* HTTP status */
	char *body;             /* JSON (malloc'd; free with free()), or NULL: none */
	const char *allow;      /* a 405 for the request's method: the Allow header's
				 * methods (static), else NULL */
};

/* Handle one request: method ("GET", "PUT", ...), URL path
 * ("/api/v1/vm.info"), body (len bytes, not NUL-terminated; may be NULL
 * when len is 0). Fills r; never fails: an error is a 4xx/5xx status
 * with Cloud Hypervisor's error shape (api_error). */
void api_handle(struct api_vm *v, const char *method, const char *url, const char *body,
		size_t len, struct api_reply *r);

/* An error answer: status, and Cloud Hypervisor's error shape as its
 * body, a JSON array of messages from the outermost to the root cause
 * (mvm's: one, saying what, which value and what to do). Bytes of the
 * message that are not UTF-8 become '?'. */
__attribute__((format(printf, 3, 4)))
void api_error(struct api_reply *r, unsigned status, const char *fmt, ...);

/* Count an answer (and log it where it is the first of its kind); for
 * answers the server makes itself (413). api_handle counts its own. */
void api_account(struct api_vm *v, const char *method, const char *url,
		 const struct api_reply *r);
/* Count (and log the first) connection shut for being too slow. */
void api_account_slow(struct api_vm *v);

/* What vm.create left (v->created). */
void api_vm_fini(struct api_vm *v);

/* The VM (v->vm) has ended and the program is about to destroy it: its
 * disks as they are now become its VmConfig's (v->created), so that a
 * vm.boot or reboot makes it with those vm.add-disk plugged in and
 * vm.update-disk changed, and without those vm.remove-device took out,
 * as Cloud Hypervisor keeps its config. Nothing without a VmConfig. */
void api_vm_keep_disks(struct api_vm *v);

/* The VM ended at the API's request (v->ending) and the program destroyed
 * it, the API's thread stopped: the API forgets it, and its VmConfig too
 * for vm.delete. True when vm.reboot asked for it to be made again from
 * v->created and booted (the program does both, as for vm.create and
 * vm.boot, and sets v->booted). */
bool api_vm_relaunch(struct api_vm *v);

/* The server. api_server_new: the listening socket at path (mode 0600,
 * through the umask; a stale socket nobody listens on is replaced, any
 * other file refused) and the daemon, before the process confines
 * itself; 0 or -errno with a message. api_server_start: its thread,
 * which enters its seccomp filter (sandbox) before the first request;
 * api_server_stop: the thread answers what it has begun, ends, and is
 * joined; api_server_free. */
struct api_server;
int api_server_new(const char *path, struct api_vm *v, struct api_server **out, char *err,
		   size_t errlen);
int api_server_start(struct api_server *s, bool sandbox, char *err, size_t errlen);
/* Serve on the calling thread until the VM has booted (vm.create and
 * vm.boot), a shutdown was asked (v->shutdown) or sig_fd (the caller's
 * signalfd; -1: none) is readable, before any thread runs:
 * the VM's files are opened by the thread that then confines the process.
 * api_server_start then goes on serving on its thread. */
void api_server_serve_until_boot(struct api_server *s, int sig_fd);
void api_server_stop(struct api_server *s);
/* The thread stops without draining: its connections stay with the
 * daemon, and the calling thread serves them next
 * (api_server_serve_until_boot), then maybe api_server_start again. */
void api_server_handback(struct api_server *s);
void api_server_free(struct api_server *s);

#endif
