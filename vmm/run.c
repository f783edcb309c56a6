#include "vmm/run.h"
#include "vmm/cli.h"
#include "vmm/kvm.h"
#include "vmm/kvm_probe.h"
#include "vmm/term.h"
#include "vmm/util.h"
#include "vmm/vcpu.h"
#include "arch/x86/boot.h"
#include "arch/x86/layout.h"
#include "devices/exitport.h"
#include "devices/i8042.h"
#include "devices/serial.h"
#include "devices/pci.h"
#include "devices/virtio_blk.h"
#include "devices/virtio_mmio.h"
#include "devices/virtio_pci.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#define MVM_VERSION "0.1"

/* The whole kernel command line (base + device fragments + user). */
static char run_cmdline[X86_CMDLINE_MAX];

static void run_exe_dir(char *dir, size_t len)
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

/* Console input: stdin -> Ctrl-A filter -> UART RX FIFO. Bytes the FIFO
 * cannot take yet wait in carry (at most a read's worth). */
struct run_console {
	struct serial *uart;
	struct term_escape esc;
	bool open;
	uint8_t carry[SERIAL_FIFO_SIZE + 1];
	size_t ncarry;
};

static void run_console_flush(struct run_console *c)
{
	size_t n = serial_rx_push(c->uart, c->carry, c->ncarry);

	memmove(c->carry, c->carry + n, c->ncarry - n);
	c->ncarry -= n;
}

/* Returns true when the user typed the quit escape. */
static bool run_console_read(struct run_console *c)
{
	uint8_t in[SERIAL_FIFO_SIZE];
	size_t outn;
	ssize_t n;
	bool quit;

	n = read(STDIN_FILENO, in, sizeof(in));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return false;
	if (n <= 0) {
		c->open = false;   /* EOF or error: the guest just gets no input */
		return false;
	}
	quit = term_escape_filter(&c->esc, in, n, c->carry + c->ncarry, &outn);
	c->ncarry += outn;
	run_console_flush(c);
	return quit;
}

static void run_stats(struct vm *vm, struct vcpu *vcpus, unsigned n)
{
	bool first = true;
	unsigned i;

	fputs("{\"vcpus\":[", stderr);
	for (i = 0; i < n; i++) {
		if (i)
			fputc(',', stderr);
		vcpu_stats_json(&vcpus[i], stderr);
	}
	fputs("],\"devices\":[", stderr);
	for (i = 0; i < vm->ndevices; i++) {
		if (!vm->devices[i].ops->stats_json)
			continue;
		if (!first)
			fputc(',', stderr);
		first = false;
		vm->devices[i].ops->stats_json(vm->devices[i].dev, stderr);
	}
	fputs("]}\n", stderr);
}

/* Poll until a stop request; turns signals and the quit escape into one. */
static void run_loop(struct vm *vm, int sfd, struct run_console *con)
{
	struct kvm_state *ks = vm_kvm(vm);

	for (;;) {
		struct pollfd p[3] = {
			{ .fd = ks->stop_efd, .events = POLLIN },
			{ .fd = sfd, .events = POLLIN },
			{ .fd = -1, .events = POLLIN },
		};
		int timeout = -1;

		if (con->ncarry)
			run_console_flush(con);
		if (con->open) {
			if (!con->ncarry && serial_rx_room(con->uart))
				p[2].fd = STDIN_FILENO;
			else
				timeout = 10;   /* guest has not drained the FIFO yet */
		}
		if (poll(p, 3, timeout) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "mvm: poll: %s\n", strerror(errno));
			vm_request_stop(vm, MVM_EXIT_INTERNAL);
			return;
		}
		if (p[0].revents)
			return;
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == sizeof(si))
				vm_request_stop(vm, 128 + (int)si.ssi_signo);
		}
		if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
			if (run_console_read(con))
				vm_request_stop(vm, MVM_EXIT_OK);
		}
	}
}

/* Open (and lock) every image once before KVM is touched, so a missing,
 * odd-sized or busy image fails like any other bad input. */
static int run_check_disks(const struct mvm_config *cfg, char *err, size_t errlen)
{
	struct blk_image img;
	unsigned i;
	int ret;

	for (i = 0; i < cfg->ndisks; i++) {
		ret = blk_image_open(&cfg->disks[i].opts, &img, err, errlen);
		if (ret)
			return ret;
		blk_image_close(&img);
	}
	return 0;
}

/* Create every --disk in order (vda, vdb, ...) on its transport. The PCI
 * bus exists only when some disk uses it. Before vCPUs start. */
static int run_create_disks(struct vm *vm, const struct mvm_config *cfg, struct pci_bus *bus,
			    bool *bus_up, char *err, size_t errlen)
{
	unsigned i;
	int ret;

	for (i = 0; i < cfg->ndisks; i++) {
		const struct cli_disk *d = &cfg->disks[i];
		struct virtio_dev *dev;

		ret = blk_dev_new(&d->opts, &vm->mem, &dev, err, errlen);
		if (ret)
			return ret;
		/* Before the driver reads the features (virtio_dev_init zeroed it). */
		dev->no_packed = !d->packed;
		if (d->transport == CLI_TRANSPORT_PCI) {
			if (!*bus_up) {
				ret = pci_bus_init(bus, vm);
				if (ret) {
					snprintf(err, errlen, "PCI bus: %s", strerror(-ret));
					virtio_dev_destroy(dev);
					return ret;
				}
				*bus_up = true;
			}
			ret = virtio_pci_attach(vm, bus, dev);
		} else {
			ret = virtio_mmio_attach(vm, dev);
		}
		if (ret) {
			snprintf(err, errlen, "--disk %s: cannot attach the %s device: %s", d->spec,
				 d->transport == CLI_TRANSPORT_PCI ? "virtio-pci" : "virtio-mmio",
				 strerror(-ret));
			virtio_dev_destroy(dev);
			return ret;
		}
	}
	return 0;
}

static int run_probe(void *ctx, struct kvm_probe_result *res)
{
	(void)ctx;
	/* The payload takes microseconds; a KVM that has not finished it in
	 * two seconds never will. */
	return kvm_probe_run(2000, res);
}

/* --probe-kvm: "direct: WHY" or "nested: WHY" on stdout. The cache lives
 * with mvm's other caches (the guest's, the harness's). */
static int run_probe_kvm(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char cache[PATH_MAX], boot_id[64] = "", key[128], err[256];
	struct kvm_choice_env env = {
		.override = getenv("MVM_KVM"),
		.boot_id = boot_id,
		.key = key,
		.probe = run_probe,
	};
	struct kvm_choice c;
	FILE *fp;
	int ret;

	if (xdg && *xdg)
		snprintf(cache, sizeof(cache), "%s/mvm/kvm-verdict", xdg);
	else if (home && *home)
		snprintf(cache, sizeof(cache), "%s/.cache/mvm/kvm-verdict", home);
	else
		cache[0] = '\0';
	env.cache_path = cache[0] ? cache : NULL;
	fp = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (fp) {
		if (!fgets(boot_id, sizeof(boot_id), fp))
			boot_id[0] = '\0';
		boot_id[strcspn(boot_id, "\n")] = '\0';
		fclose(fp);
	}
	kvm_probe_key(key, sizeof(key));
	ret = vcpu_signal_setup();
	if (ret)
		die("sigaction: %s", strerror(-ret));
	if (kvm_choose(&env, &c, err, sizeof(err)))
		die_usage("%s", err);
	if (c.mode == KVM_MODE_NESTED && !c.forced && c.verdict == KVM_VERDICT_FAILS &&
	    kvm_host_is_pvm("/sys"))
		printf("nested: /dev/kvm is PVM (kvm_pvm) and cannot run unmodified guests: %s\n",
		       c.why);
	else
		printf("%s: %s\n", c.mode == KVM_MODE_DIRECT ? "direct" : "nested", c.why);
	return 0;
}

int mvm_main(int argc, char **argv)
{
	struct pci_bus pci_bus;
	bool pci_up = false;
	struct mvm_config cfg;
	struct x86_boot_cfg bcfg;
	struct x86_boot_info info;
	struct run_console con;
	struct vcpu *vcpus;
	struct vm vm;
	char err[512], exe_dir[PATH_MAX];
	sigset_t sigs;
	uint64_t host_mem;
	unsigned i, started = 0;
	int kvm_fd, sfd, ret, status;

	if (cli_parse(argc, argv, &cfg, err, sizeof(err)))
		die_usage("%s", err);
	if (cfg.help) {
		cli_usage(stdout);
		return 0;
	}
	if (cfg.version) {
		printf("mvm %s\n", MVM_VERSION);
		return 0;
	}
	if (cfg.probe_kvm)
		return run_probe_kvm();
	/* Signals become events on the main loop (signalfd). Blocked before
	 * any thread exists so every thread inherits the mask; a SIGTERM
	 * during setup waits and is handled by the same teardown. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	if (pthread_sigmask(SIG_BLOCK, &sigs, NULL))
		die("pthread_sigmask failed");
	signal(SIGPIPE, SIG_IGN);   /* a closed stdout must not kill the VM */

	/* A multi-queue disk is only used multi-queue by a guest with as
	 * many vCPUs (blk-mq caps hardware queues at nr_cpu_ids). */
	if (cli_auto_cpus(&cfg)) {
		fprintf(stderr, "mvm: %u vCPUs so the guest can use all %u queues "
			"(set --cpus to choose)\n", cfg.cpus, cli_max_queues(&cfg));
	}

	/* Everything about the input is checked before /dev/kvm is opened. */
	run_exe_dir(exe_dir, sizeof(exe_dir));
	if (cli_default_guest(&cfg, exe_dir, err, sizeof(err)) ||
	    cli_check_files(&cfg, err, sizeof(err)) ||
	    run_check_disks(&cfg, err, sizeof(err)))
		die_usage("%s", err);
	host_mem = cli_host_mem();
	if (cli_check_host(&cfg, 0, host_mem, err, sizeof(err)))
		die_usage("%s", err);
	if (cli_compose_cmdline(NULL, cfg.cmdline, run_cmdline, sizeof(run_cmdline)))
		die_usage("--cmdline: too long (%zu bytes); shorten it", strlen(cfg.cmdline));
	bcfg = (struct x86_boot_cfg){
		.kernel_path = cfg.kernel,
		.initrd_path = cfg.initrd,
		.cmdline = run_cmdline,
		.mem_size = cfg.mem,
		.ncpus = cfg.cpus,
	};
	if (x86_boot_check(&bcfg, err, sizeof(err)))
		die_usage("%s", err);

	kvm_fd = kvm_open(err, sizeof(err));
	if (kvm_fd < 0)
		die_status(kvm_fd == -ENOTSUP ? MVM_EXIT_INTERNAL : MVM_EXIT_USAGE, "%s", err);
	if (cli_check_host(&cfg, kvm_max_vcpus(kvm_fd), host_mem, err, sizeof(err)))
		die_usage("%s", err);
	if (kvm_vm_create(&vm, kvm_fd, cfg.mem, cfg.cpus, err, sizeof(err)))
		die("%s", err);

	memset(&con, 0, sizeof(con));
	ret = serial_create(&vm, STDOUT_FILENO, &con.uart);
	if (!ret)
		ret = i8042_create(&vm);
	if (!ret)
		ret = exitport_create(&vm);
	if (ret)
		die("legacy devices: %s", strerror(-ret));
	if (run_create_disks(&vm, &cfg, &pci_bus, &pci_up, err, sizeof(err)))
		die_usage("%s", err);

	if (cli_compose_cmdline(vm.cmdline_extra, cfg.cmdline, run_cmdline, sizeof(run_cmdline)))
		die_usage("kernel command line too long with the devices' parameters; "
			  "shorten --cmdline");
	if (x86_boot_check(&bcfg, err, sizeof(err)))
		die_usage("%s", err);
	if (x86_boot_load(&vm.mem, &bcfg, &info, err, sizeof(err)))
		die("%s", err);

	vcpus = calloc(cfg.cpus, sizeof(*vcpus));
	if (!vcpus)
		die("out of memory for %u vCPUs", cfg.cpus);
	for (i = 0; i < cfg.cpus; i++) {
		ret = vcpu_create(&vcpus[i], &vm, i);
		if (ret)
			die("vCPU %u: KVM_CREATE_VCPU: %s", i, strerror(-ret));
		ret = x86_vcpu_init(vcpus[i].fd, i, cfg.cpus, vm_kvm(&vm)->cpuid, &info);
		if (ret)
			die("vCPU %u: setup failed: %s", i, strerror(-ret));
	}
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		die("signalfd: %s", strerror(errno));
	ret = vcpu_signal_setup();
	if (ret)
		die("sigaction: %s", strerror(-ret));

	con.open = true;
	con.esc.raw = term_raw(STDIN_FILENO) == 0;
	if (con.esc.raw)
		fputs("mvm: console on this terminal; Ctrl-A x quits\r\n", stderr);

	for (i = 0; i < cfg.cpus; i++) {
		ret = vcpu_start(&vcpus[i]);
		if (ret) {
			fprintf(stderr, "mvm: vCPU %u thread: %s\n", i, strerror(-ret));
			vm_request_stop(&vm, MVM_EXIT_INTERNAL);
			break;
		}
		started++;
	}
	if (started == cfg.cpus)
		run_loop(&vm, sfd, &con);

	/* Teardown: the first stop request decided the status. */
	status = vm_stop_status(&vm);
	for (i = 0; i < cfg.cpus; i++)
		vcpu_kick(&vcpus[i]);
	for (i = 0; i < cfg.cpus; i++)
		vcpu_join(&vcpus[i]);
	for (i = 0; i < vm.ndevices; i++)
		vm.devices[i].ops->stop(vm.devices[i].dev);
	if (cfg.stats)
		run_stats(&vm, vcpus, cfg.cpus);
	for (i = vm.ndevices; i-- > 0;)
		vm.devices[i].ops->destroy(vm.devices[i].dev);
	if (pci_up)
		pci_bus_destroy(&pci_bus);
	for (i = 0; i < cfg.cpus; i++)
		vcpu_destroy(&vcpus[i]);
	free(vcpus);
	close(sfd);
	vm_fini(&vm);
	term_restore();
	return status < 0 ? MVM_EXIT_INTERNAL : status;
}
