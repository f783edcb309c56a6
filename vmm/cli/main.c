/* mvm(1): the command line over libmvm (vmm/mvm.h). Parses the options
 * (vmm/cli/cli.c), builds a struct mvm_config and the disks, owns what is
 * process-wide — the terminal's raw mode, signals (SIGINT, SIGTERM, SIGHUP
 * become mvm_stop with status 128+N), SIGPIPE, stderr — and turns errors
 * into exit statuses. The only place in mvm that exits. */
#include "vmm/api/api.h"
#include "vmm/cli/cli.h"
#include "vmm/cli/jail.h"
#include "vmm/mvm.h"
#include "vmm/cli/term.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

__attribute__((noreturn, format(printf, 2, 3)))
static void die_status(int status, const char *fmt, ...)
{
	va_list ap;

	fputs("mvm: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(status);
}
#define die(...) die_status(MVM_EXIT_INTERNAL, __VA_ARGS__)
#define die_usage(...) die_status(MVM_EXIT_USAGE, __VA_ARGS__)

/* The library's messages, as mvm has always printed them. */
static void main_log(void *opaque, enum mvm_log_level level, const char *msg)
{
	(void)opaque;
	fprintf(stderr, level == MVM_LOG_WARNING ? "mvm: warning: %s\n" : "mvm: %s\n", msg);
}

/* The API server's lines (a client's first mistake of each kind). */
static void main_api_log(void *opaque, const char *line)
{
	(void)opaque;
	fprintf(stderr, "mvm: %s\n", line);
}

/* The library names the config field a message is about first ("kernel
 * '...': ...", "disk PATH: ..."); on the command line that is an option. */
static const char *main_option_prefix(const char *msg)
{
	static const char *const fields[] = { "kernel ", "initrd ", "cmdline", "cpus ",
					      "mem ", "disk ", "disk:", "pvpanic ", "id ", "vsock ",
					      "vsock:", "rate-limit-group " };
	unsigned i;

	for (i = 0; i < ARRAY_SIZE(fields); i++)
		if (!strncmp(msg, fields[i], strlen(fields[i])))
			return "--";
	return "";
}

static void main_exe_dir(char *dir, size_t len)
{
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);

	if (n <= 0) {
		snprintf(dir, len, ".");
		return;
	}
	path[n] = '\0';
	snprintf(dir, len, "%s", dirname(path));
}

/* --probe-kvm: "direct: WHY" or "nested: WHY" on stdout. The verdict is
 * cached with mvm's other caches (the guest's, the harness's). */
static int main_probe_kvm(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char cache[PATH_MAX] = "", err[MVM_ERR_MAX];
	struct mvm_kvm_check c;

	if (xdg && *xdg)
		snprintf(cache, sizeof(cache), "%s/mvm/kvm-verdict", xdg);
	else if (home && *home)
		snprintf(cache, sizeof(cache), "%s/.cache/mvm/kvm-verdict", home);
	if (mvm_check_kvm(getenv("MVM_KVM"), cache[0] ? cache : NULL, SIGUSR1, &c, sizeof(c),
			  err, sizeof(err)))
		die_usage("%s", err);
	if (!c.direct && !c.forced && c.pvm)
		printf("nested: /dev/kvm is PVM (kvm_pvm) and cannot run unmodified guests: %s\n",
		       c.why);
	else
		printf("%s: %s\n", c.direct ? "direct" : "nested", c.why);
	return 0;
}

/* RLIMIT_FSIZE for the jail: every disk may be written to its end, the
 * console and log output, where they go to files, may grow by
 * JAIL_CONSOLE_FILE_MAX from where they stand now, guest RAM's file
 * (--mem-file) or a snapshot's memory file holds guest RAM, and a core
 * dump beneath --snapshot-dir a little more. With --image-dir none (0):
 * an image swapped in may be larger than any. */
static uint64_t main_fsize(const struct cli_config *cfg)
{
	uint64_t max = cfg->vm.snapshot_dir ? mvm_coredump_size_max(cfg->vm.cpus, cfg->vm.mem) :
		       cfg->vm.mem_file ? cfg->vm.mem : 0, end;
	unsigned i;
	int fd;

	if (cfg->vm.image_dir)
		return 0;

	for (i = 0; i < cfg->ndisks; i++) {
		fd = open(cfg->disks[i].path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;       /* mvm_prepare opened it: only a race, and it is open */
		end = (uint64_t)lseek(fd, 0, SEEK_END);
		close(fd);
		if (end != (uint64_t)-1 && end > max)
			max = end;
	}
	for (fd = STDOUT_FILENO; fd <= STDERR_FILENO; fd++) {
		off_t off = lseek(fd, 0, SEEK_CUR);

		end = (off > 0 ? (uint64_t)off : 0) + JAIL_CONSOLE_FILE_MAX;
		if (end > max)
			max = end;
	}
	return max;
}

/* Errors of mvm_start: bad input and a missing /dev/kvm are usage errors
 * (nothing ran); everything else is the host's or KVM's. */
static int main_start_status(int ret)
{
	switch (ret) {
	case -ENODEV: case -EINVAL: case -ENOSPC: case -ENOEXEC: case -E2BIG: case -EPROTO:
		return MVM_EXIT_USAGE;
	default:
		return MVM_EXIT_INTERNAL;
	}
}

/* Wait for the VM, turning the blocked signals into mvm_stop(128+N);
 * whether one came. */
static bool main_loop(struct mvm *vm, int sfd)
{
	bool signalled = false;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = mvm_wait_fd(vm), .events = POLLIN },
			{ .fd = sfd, .events = POLLIN },
		};

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "mvm: poll: %s\n", strerror(errno));
			mvm_stop(vm, MVM_EXIT_INTERNAL);
			return true;
		}
		if (p[0].revents)
			return signalled;
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				mvm_stop(vm, 128 + (int)si.ssi_signo);
				signalled = true;
			}
		}
	}
}

/* SIGINT, SIGTERM and SIGHUP become events of the main loop (signalfd).
 * Blocked before any thread exists, so every VM thread inherits the
 * mask; a SIGTERM during setup waits and is handled by the same teardown. */
static void main_block_signals(sigset_t *sigs)
{
	sigemptyset(sigs);
	sigaddset(sigs, SIGINT);
	sigaddset(sigs, SIGTERM);
	sigaddset(sigs, SIGHUP);
	if (pthread_sigmask(SIG_BLOCK, sigs, NULL))
		die("pthread_sigmask failed");
	signal(SIGPIPE, SIG_IGN);   /* a closed stdout must not kill the VM */
}

/* The jail's settings from the command line; whether there is a jail. */
static bool main_jail_cfg(const struct cli_config *cfg, struct jail_cfg *jail)
{
	*jail = (struct jail_cfg){
		.chroot_dir = cfg->chroot_dir, .netns = cfg->netns, .new_pid_ns = cfg->new_pid_ns,
		.cgroup = cfg->cgroup, .ncgroup_set = cfg->ncgroup_set, .set_ids = cfg->ids_set,
		.uid = cfg->uid, .gid = cfg->gid, .threads = cfg->vm.cpus + 1,  /* vCPUs, control */
	};
	memcpy(jail->cgroup_set, cfg->cgroup_set, sizeof(jail->cgroup_set));
	return cfg->vm.sandbox || cfg->chroot_dir || cfg->ids_set || cfg->netns ||
	       cfg->new_pid_ns || cfg->cgroup;
}

/* What disk d's threads need of the jail's limits. */
static void main_jail_disk(struct jail_cfg *jail, const struct mvm_disk *d, uint64_t mem)
{
	/* Per queue a thread, its ring and stop eventfd; PCI's INTx helper. */
	jail->threads += d->queues + (d->transport == MVM_TRANSPORT_PCI);
	jail->fds += 2 * d->queues;
	/* Each of the disk's I/O threads (at most one per queue) pins all of
	 * guest RAM in its ring. */
	if (d->fixed_buffers)
		jail->memlock += mem * d->queues;
}

/* What the hot-plug slots of vm need of the jail's limits: each slot's
 * disk device, made at the start with the slot's queues, and the image a
 * disk plugged in brings (two descriptors with cache=none). */
static void main_jail_slots(struct jail_cfg *jail, const struct mvm_config *vm)
{
	struct mvm_disk shape;
	unsigned i;

	mvm_disk_init(&shape, NULL);
	shape.queues = vm->hotplug_queues ? vm->hotplug_queues : 1;
	for (i = 0; i < vm->hotplug_slots; i++) {
		main_jail_disk(jail, &shape, vm->mem);
		jail->fds += 4;
	}
}

/* What the vsock device's threads need of the jail's limits: its thread
 * and the io_uring worker its shutdown(SHUT_WR)s run on (the kernel never
 * does them inline), PCI's INTx helper; its ring, listening socket and 3
 * queues' eventfds (the sockets live in the ring, not the fd table). */
static void main_jail_vsock(struct jail_cfg *jail, const struct mvm_vsock *v)
{
	jail->threads += 2 + (v->transport == MVM_TRANSPORT_PCI);
	jail->fds += 6;
}

/* The VM's disks past the command line's (or the VmConfig's): a
 * restore's own, those vm.add-disk gave before the boot; for the jail's
 * limits and the image sizes it allows. */
static void main_take_disks(struct cli_config *cfg, struct mvm *vm, struct jail_cfg *jail)
{
	unsigned i;

	for (i = cfg->ndisks; i < mvm_disk_count(vm) && i < MVM_MAX_DISKS; i++) {
		mvm_disk_init(&cfg->disks[i], NULL);
		if (mvm_get_disk(vm, i, &cfg->disks[i], sizeof(cfg->disks[i])))
			break;
		main_jail_disk(jail, &cfg->disks[i], cfg->vm.mem);
		cfg->ndisks++;
	}
}

/* The VM's vsock device where the command line (or the VmConfig) gave
 * none: a restore's, or one vm.add-vsock gave before the boot; for the
 * jail's limits and the API's vm.info. */
static void main_take_vsock(struct cli_config *cfg, struct mvm *vm, struct jail_cfg *jail)
{
	if (cfg->has_vsock)
		return;
	mvm_vsock_init(&cfg->vsock);
	if (!mvm_get_vsock(vm, &cfg->vsock, sizeof(cfg->vsock))) {
		cfg->has_vsock = true;
		main_jail_vsock(jail, &cfg->vsock);
	}
}

/* A restored VM's shape, which its snapshot gave (mvm_prepare): its
 * vCPUs and disks, for the jail's limits and the API's vm.info. */
static void main_restored(struct cli_config *cfg, struct mvm *vm, struct jail_cfg *jail)
{
	struct mvm_config now;
	struct mvm_stats st;

	if (!mvm_get_stats(vm, &st, sizeof(st))) {
		jail->threads += st.cpus;
		jail->threads -= cfg->vm.cpus;
		cfg->vm.cpus = st.cpus;
		cfg->vm.mem = st.mem;
	}
	/* Its hot-plug slots' devices are the snapshot's too. */
	mvm_config_init(&now);
	if (!mvm_get_config(vm, &now, sizeof(now)) && !cfg->vm.hotplug_slots) {
		main_jail_slots(jail, &now);
		cfg->vm.hotplug_slots = now.hotplug_slots;
		cfg->vm.hotplug_queues = now.hotplug_queues;
	}
	main_take_vsock(cfg, vm, jail);
	main_take_disks(cfg, vm, jail);
}

/* The VM as the command line (or vm.create) has it, on this process's
 * stdin and stdout, with its disks; the jail's limits grow with what each
 * disk needs. 0 or -errno with a message (the VM destroyed, the jail's
 * limits as they were). */
static int main_create(const struct cli_config *cfg, uint64_t start_ns, struct jail_cfg *jail,
		       bool *escape, struct mvm **out, char *err, size_t errlen)
{
	struct mvm_config mc = cfg->vm;
	struct jail_cfg before = *jail;
	struct mvm *vm;
	unsigned i;
	int r;

	mc.console_in = STDIN_FILENO;
	mc.console_out = STDOUT_FILENO;
	mc.log_fn = main_log;
	/* Ctrl-A x and Ctrl-A Ctrl-A mean something only on a raw terminal
	 * (restored by atexit on every exit, by term_restore at the end). */
	mc.console_escape = *escape = term_raw(STDIN_FILENO) == 0;
	mc.start_ns = start_ns;
	r = mvm_create(&mc, &vm, err, errlen);
	if (r)
		return r;
	for (i = 0; !r && i < cfg->ngroups; i++) {
		struct mvm_rate_group *g = NULL;

		r = mvm_rate_group_new(&cfg->groups[i], &g, err, errlen);
		if (!r)
			r = mvm_add_rate_group(vm, g, err, errlen);
		/* The VM holds a reference of its own. */
		mvm_rate_group_unref(g);
	}
	for (i = 0; !r && i < cfg->ndisks; i++) {
		r = mvm_add_disk(vm, &cfg->disks[i], err, errlen);
		main_jail_disk(jail, &cfg->disks[i], cfg->vm.mem);
	}
	if (!r && cfg->has_vsock) {
		r = mvm_add_vsock(vm, &cfg->vsock, err, errlen);
		main_jail_vsock(jail, &cfg->vsock);
	}
	main_jail_slots(jail, &cfg->vm);
	if (r) {
		mvm_destroy(vm);
		*jail = before;
		return r;
	}
	*out = vm;
	return 0;
}

/* vm.create and vm.boot where mvm was started with --api-socket alone:
 * the VmConfig fills the command line's structs, and the VM is made and
 * prepared as the command line's is, on this (main) thread, before any
 * other runs and before the process is confined. */
struct main_api {
	struct cli_config *cfg;
	struct jail_cfg *jail;
	/* The jail's limits as the command line alone makes them (its vCPU
	 * count): each VM the API makes (vm.delete, then vm.create again)
	 * counts from there, so they do not grow with every VM. */
	struct jail_cfg jail_base;
	unsigned base_cpus;
	/* The command line's --rate-limit-group count: a VmConfig's
	 * rate_limit_groups follow them. */
	unsigned base_groups;
	uint64_t start_ns;
	bool escape;
	/* serial.mode Off or Null: stdout on /dev/null, the terminal's kept
	 * (stdout_kept, or -1) for a later VmConfig that says Tty. */
	bool stdout_off;
	int stdout_kept;
};

/* mvm's stdout for the guest's console (off: to /dev/null), as a VmConfig
 * asks: 0 or -errno with a message, stdout as it was on failure. */
static int main_console_to(struct main_api *x, bool off, char *err, size_t errlen)
{
	int fd;

	if (off == x->stdout_off)
		return 0;
	if (!off) {
		if (dup2(x->stdout_kept, STDOUT_FILENO) < 0)
			return err_set(err, errlen, -errno, "serial.mode Tty: stdout: %s",
				       strerror(errno));
		x->stdout_off = false;
		return 0;
	}
	if (x->stdout_kept < 0) {
		x->stdout_kept = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
		if (x->stdout_kept < 0)
			return err_set(err, errlen, -errno, "serial.mode Off: stdout: %s",
				       strerror(errno));
	}
	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		return err_set(err, errlen, -e, "serial.mode Off: /dev/null: %s", strerror(e));
	}
	close(fd);
	x->stdout_off = true;
	return 0;
}

static int main_api_create(struct api_vm *v, const struct api_vmconfig *c, char *err,
			   size_t errlen)
{
	struct main_api *x = v->host_ctx;
	struct cli_config *cfg = x->cfg;
	struct mvm_config keep = cfg->vm;
	struct jail_cfg was = *x->jail;
	unsigned i;
	int r;

	if (c->ngroups > MVM_MAX_DISKS - x->base_groups)
		return err_set(err, errlen, -EINVAL, "rate_limit_groups: %u with the command "
			       "line's %u, more than %d; give fewer", c->ngroups, x->base_groups,
			       MVM_MAX_DISKS);
	bool was_off = x->stdout_off;
	char scratch[8];

	/* Before anything of cfg changes: a failure leaves it as it was. */
	r = main_console_to(x, c->console_off, err, errlen);
	if (r)
		return r;
	/* What the command line gave (sandbox, pvpanic unless the VmConfig
	 * says, id, hot-plug slots) stays. */
	cfg->vm.kernel = c->vm.kernel;
	cfg->vm.initrd = c->vm.initrd;
	cfg->vm.cmdline = c->vm.cmdline;
	/* The jail counted the command line's vCPUs. */
	*x->jail = x->jail_base;
	x->jail->threads += c->vm.cpus;
	x->jail->threads -= x->base_cpus;
	cfg->vm.cpus = c->vm.cpus;
	cfg->vm.mem = c->vm.mem;
	cfg->vm.pvpanic = c->vm.pvpanic;
	for (i = 0; i < c->ndisks; i++)
		cfg->disks[i] = c->disks[i].d;
	cfg->ndisks = c->ndisks;
	cfg->ngroups = x->base_groups;
	for (i = 0; i < c->ngroups; i++)
		cfg->groups[cfg->ngroups++] = c->groups[i];
	cfg->has_vsock = c->has_vsock;
	if (c->has_vsock)
		cfg->vsock = c->vsock;
	r = main_create(cfg, x->start_ns, x->jail, &x->escape, &v->vm, err, errlen);
	if (r) {
		*x->jail = was;
		cfg->vm = keep;
		cfg->ndisks = 0;
		cfg->ngroups = x->base_groups;
		cfg->has_vsock = false;
		main_console_to(x, was_off, scratch, sizeof(scratch));
		return r;
	}
	v->cfg = &cfg->vm;
	v->vsock = cfg->has_vsock ? &cfg->vsock : NULL;
	return 0;
}

static int main_api_boot(struct api_vm *v, char *err, size_t errlen)
{
	struct main_api *x = v->host_ctx;

	/* Disks and a vsock device vm.add-disk and vm.add-vsock gave before
	 * the boot count in the jail too. */
	main_take_disks(x->cfg, v->vm, x->jail);
	main_take_vsock(x->cfg, v->vm, x->jail);
	if (x->cfg->has_vsock)
		v->vsock = &x->cfg->vsock;
	return mvm_prepare(v->vm, err, errlen);
}

/* vm.restore: the VM from the snapshot, as mvm --restore DIR makes it,
 * prepared on this thread like vm.boot's, and started paused. */
static int main_api_restore(struct api_vm *v, const char *dir, bool resume, char *err,
			    size_t errlen)
{
	struct main_api *x = v->host_ctx;
	struct cli_config *cfg = x->cfg;
	struct mvm_config keep = cfg->vm;
	struct jail_cfg was = *x->jail;
	int r;

	cfg->vm.restore = strdup(dir);
	if (!cfg->vm.restore)
		return err_set(err, errlen, -ENOMEM, "out of memory");
	*x->jail = x->jail_base;
	cfg->vm.cpus = x->base_cpus;   /* main_restored counts from the command line's */
	cfg->vm.start_paused = !resume;
	/* The guest goes on with the kernel in its memory: none of a VmConfig
	 * made before (vm.delete freed the strings these pointed into). */
	cfg->vm.kernel = cfg->vm.initrd = cfg->vm.cmdline = NULL;
	/* The snapshot's disks, vsock device and groups, with the command
	 * line's groups: none of a VmConfig made before (vm.delete freed
	 * it, and its groups' limits are not the snapshot's). */
	cfg->ndisks = 0;
	cfg->has_vsock = false;
	cfg->ngroups = x->base_groups;
	r = main_create(cfg, x->start_ns, x->jail, &x->escape, &v->vm, err, errlen);
	if (!r) {
		r = mvm_prepare(v->vm, err, errlen);
		if (r) {
			mvm_destroy(v->vm);
			v->vm = NULL;
		}
	}
	if (r) {
		free((char *)cfg->vm.restore);
		cfg->vm = keep;
		*x->jail = was;
		return r;
	}
	main_restored(cfg, v->vm, x->jail);
	v->cfg = &cfg->vm;
	v->vsock = cfg->has_vsock ? &cfg->vsock : NULL;
	return 0;
}

static const struct api_host main_api_host = {
	.create = main_api_create,
	.boot = main_api_boot,
	.restore = main_api_restore,
};

/* The API socket's file goes with mvm, as the vsock device's does: not
 * from a jail, whose root (or user) may not reach its path; there the
 * next mvm replaces it. */
static void main_api_socket_gone(const struct cli_config *cfg, bool jailed)
{
	if (cfg->api_socket && !jailed)
		unlink(cfg->api_socket);
}

static void main_print_stats(const struct mvm *vm)
{
	size_t len = 1 << 20;
	char *json = malloc(len);

	if (json && mvm_stats_json(vm, json, len) >= 0)
		fprintf(stderr, "%s\n", json);
	free(json);
}

/* The VM ended at the API's request (vm.shutdown, vm.reboot, vm.delete),
 * or its guest rebooted, in an mvm that may make another: it is
 * destroyed, the API's thread handed back to this one, and for a reboot
 * it is made again from its VmConfig and booted, as vm.create and
 * vm.boot do (Cloud Hypervisor reboots a guest that resets itself). A
 * restored VM's snapshot is forgotten. */
static void main_api_relaunch(struct api_server *api, struct api_vm *v, struct cli_config *cfg,
			      struct mvm *vm)
{
	char err[MVM_ERR_MAX];

	api_server_handback(api);
	/* Its thread joined: what it set is all there. vmm.shutdown that
	 * came meanwhile wins (serve_until_boot then ends mvm). */
	if (v->shutdown)
		v->ending = API_END_SHUTDOWN;
	else if (v->ending == API_END_NONE)
		v->ending = API_END_REBOOT;     /* the guest's own reboot */
	if (cfg->stats)
		main_print_stats(vm);
	api_vm_keep_disks(v);
	mvm_destroy(vm);
	if (cfg->vm.restore) {
		free((char *)cfg->vm.restore);
		cfg->vm.restore = NULL;
		cfg->vm.start_paused = false;
	}
	if (!api_vm_relaunch(v))
		return;
	if (main_api_create(v, v->created, err, sizeof(err)) ||
	    main_api_boot(v, err, sizeof(err))) {
		fprintf(stderr, "mvm: vm.reboot: %s\n", err);
		if (v->vm)
			mvm_destroy(v->vm);
		v->vm = NULL;   /* shut down: vm.boot tries again */
		return;
	}
	v->booted = true;
}

int main(int argc, char **argv)
{
	static struct cli_config cfg;   /* its disks' text is large for a stack */
	static struct api_vm api_vm;
	static struct main_api api_ctx;
	struct api_server *api = NULL;
	struct jail_cfg jail;
	struct jail_state jst;
	bool jailed, escape, signalled;
	struct mvm_exit ex;
	struct mvm *vm;
	char err[MVM_ERR_MAX], exe_dir[PATH_MAX];
	sigset_t sigs;
	bool snap_dir_made;
	int sfd, ret;

	uint64_t start_ns = mono_ns();

	if (cli_parse(argc, argv, &cfg, err, sizeof(err)))
		die_usage("%s", err);
	if (cfg.help) {
		cli_usage(stdout);
		return 0;
	}
	if (cfg.version) {
		printf("mvm %s\n", MVM_VERSION_STRING);
		return 0;
	}
	if (cfg.probe_kvm)
		return main_probe_kvm();
	if (jail_check(cfg.vm.sandbox, cfg.ids_set, geteuid(), err, sizeof(err)))
		die_usage("%s", err);
	main_block_signals(&sigs);
	/* A multi-queue disk is only used multi-queue by a guest with as
	 * many vCPUs (blk-mq caps hardware queues at nr_cpu_ids). */
	if (cli_auto_cpus(&cfg))
		fprintf(stderr, "mvm: %u vCPUs so the guest can use all %u queues "
			"(set --cpus to choose)\n", cfg.vm.cpus, cli_max_queues(&cfg));
	main_exe_dir(exe_dir, sizeof(exe_dir));
	if (!cli_vm_from_api(&cfg) && cli_default_guest(&cfg, exe_dir, err, sizeof(err)))
		die_usage("%s", err);

	/* The jail's first half, before anything is opened or allocated:
	 * cgroup, network and PID namespaces, the mount namespace. */
	jailed = main_jail_cfg(&cfg, &jail);
	if (jailed) {
		ret = jail_begin(&jail, &jst, err, sizeof(err));
		if (ret < 0)
			die_usage("%s", err);
		if (ret > 0)
			return jail_wait_child(&jst);
	}
	/* mvm_prepare makes a missing snapshot directory: the jail's user
	 * is to write there, so it gets it (below). */
	snap_dir_made = cfg.vm.snapshot_dir && access(cfg.vm.snapshot_dir, F_OK);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		die("signalfd: %s", strerror(errno));
	api_ctx = (struct main_api){ .cfg = &cfg, .jail = &jail, .start_ns = start_ns };
	api_vm = (struct api_vm){ .host = &main_api_host, .host_ctx = &api_ctx,
				  .log = main_api_log };
	if (cli_vm_from_api(&cfg)) {
		/* The VM comes from vm.create and vm.boot: this thread serves
		 * them (the socket made before a chroot hides it) and makes
		 * the VM as it would from the command line. */
		if (api_server_new(cfg.api_socket, &api_vm, &api, err, sizeof(err)))
			die_usage("%s", err);
		/* Not confined, it makes another VM once one ends at the API's
		 * request (main_api_relaunch). */
		api_vm.relaunch = !cfg.vm.sandbox && !jailed;
	} else {
		if (main_create(&cfg, start_ns, &jail, &escape, &vm, err, sizeof(err)))
			die_usage("%s%s", main_option_prefix(err), err);
		ret = mvm_prepare(vm, err, sizeof(err));
		if (ret)
			die_status(main_start_status(ret), "%s%s", main_option_prefix(err), err);
		if (cfg.vm.restore)
			main_restored(&cfg, vm, &jail);
		/* The API's socket at its path, before a chroot hides it. */
		if (cfg.api_socket) {
			api_vm.vm = vm;
			api_vm.cfg = &cfg.vm;
			api_vm.vsock = cfg.has_vsock ? &cfg.vsock : NULL;
			api_vm.booted = true;
			if (api_server_new(cfg.api_socket, &api_vm, &api, err, sizeof(err)))
				die_usage("%s", err);
		}
	}
	if (api) {
		jail.threads++;
		jail.fds += 20;         /* its socket, eventfd, connections */
	}
	api_ctx.jail_base = jail;
	api_ctx.stdout_kept = -1;
	api_ctx.base_cpus = cfg.vm.cpus;
	api_ctx.base_groups = cfg.ngroups;
relaunch:
	if (cli_vm_from_api(&cfg)) {
		api_server_serve_until_boot(api, sfd);
		if (!api_vm.booted) {      /* vmm.shutdown or a signal before a boot */
			api_server_free(api);
			api_vm_fini(&api_vm);
			main_api_socket_gone(&cfg, jailed);
			return 0;
		}
		vm = api_vm.vm;
		escape = api_ctx.escape;
	}
	/* Everything is open and no thread runs yet: confine the process. */
	if (jailed) {
		if (snap_dir_made && cfg.ids_set &&
		    chown(cfg.vm.snapshot_dir, (uid_t)cfg.uid, (gid_t)cfg.gid))
			die("--snapshot-dir %s: cannot give it to uid %u: %s", cfg.vm.snapshot_dir,
			    cfg.uid, strerror(errno));
		jail.fsize = main_fsize(&cfg);
		ret = jail_enter(&jail, &jst, err, sizeof(err));
		if (ret)
			die_usage("%s", err);
	}
	/* Its thread enters its own filter before the first request; started
	 * before this thread's, which allows no new thread. */
	if (api && api_server_start(api, cfg.vm.sandbox, err, sizeof(err)))
		die("%s", err);
	/* This thread only waits, turns signals into mvm_stop and tears the
	 * VM down: it enters a filter of its own before the guest runs. */
	ret = mvm_start_confined(vm, err, sizeof(err));
	if (ret)
		die_status(main_start_status(ret), "%s%s", main_option_prefix(err), err);
	if (escape)
		fputs("mvm: console on this terminal; Ctrl-A x quits\r\n", stderr);
	signalled = main_loop(vm, sfd);
	mvm_wait(vm, -1, &ex, sizeof(ex));
	/* ending: set by the API's thread before it stopped the VM, whose
	 * end this thread has seen since. A guest that rebooted itself is
	 * made again where it has a VmConfig, unless mvm is to end. */
	if (api_vm.relaunch && !signalled && !api_vm.shutdown &&
	    (api_vm.ending != API_END_NONE || (ex.reboot && api_vm.created))) {
		main_api_relaunch(api, &api_vm, &cfg, vm);
		goto relaunch;
	}
	/* What the API began answering (vmm.shutdown's 204) goes out first. */
	api_server_stop(api);
	term_restore();
	/* Nothing more to say about how it ended: a crash, a panic or an
	 * error was logged (one line) when it happened. */
	if (cfg.stats)
		main_print_stats(vm);
	mvm_destroy(vm);
	main_api_socket_gone(&cfg, jailed);
	close(sfd);
	return ex.status;
}
