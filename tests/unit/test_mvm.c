/* libmvm's API (vmm/mvm.h) as a caller meets it: every bad config and
 * every misuse gets -errno and a one-line message naming the field, and
 * nothing exits. These cases need no KVM; the two that call mvm_start
 * accept either outcome of the start (no /dev/kvm here, or a KVM that
 * cannot run the fake kernel) and check what follows it. Booting real
 * guests from the API is tests/embed (a system test). */
#include "tests/unit/check.h"
#include "tests/unit/fake_kernel.h"
#include "vmm/mvm.h"
#include "arch/arch.h"
#include "vmm/base/util.h"
#include "vmm/kvm/vm.h"
#include "vmm/base/snap.h"
#include "devices/ratelim.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char err[MVM_ERR_MAX];
static char dir[64], kernel[128], image[128];

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	CHECK(fd >= 0);
	CHECK_EQ(write(fd, data, len), (long long)len);
	close(fd);
}

static void cleanup(void)
{
	fake_vm_files_remove(dir);
}

/* A temporary directory with a minimal kernel (tests/unit/fake_kernel.h)
 * and a 1 MiB raw image. */
static void setup(void)
{
	static bool once;

	fake_vm_files(dir, kernel, image);
	if (!once)
		atexit(cleanup);
	once = true;
}

static struct mvm_config config(void)
{
	struct mvm_config c;

	mvm_config_init(&c);
	c.kernel = kernel;
	return c;
}

/* Disks need a transport the architecture has (s390x: virtio-ccw, not
 * in this version yet). */
static void need_disk_transport(void)
{
	if (arch_layout.pci_mmio_end == 0 && arch_layout.virtio_mmio_max == 0 && !arch_layout.has_ccw)
		CHECK_SKIP("%s guests have no disk transport in this version of mvm",
			   arch_layout.name);
}

/* mvm_create must fail with ret and a message containing want. */
static void create_fails(const struct mvm_config *c, int ret, const char *want)
{
	struct mvm *vm = (struct mvm *)0x1;

	err[0] = '\0';
	CHECK_EQ(mvm_create(c, &vm, err, sizeof(err)), ret);
	CHECK(vm == NULL);
	if (!strstr(err, want)) {
		fprintf(stderr, "message '%s' lacks '%s'\n", err, want);
		CHECK(0);
	}
}

TEST(defaults)
{
	struct mvm_config c;
	struct mvm_disk d;

	mvm_config_init(&c);
	CHECK_EQ(c.cpus, 1);
	CHECK_EQ(c.mem, 256ULL << 20);
	CHECK_EQ(c.console_in, -1);
	CHECK_EQ(c.console_out, -1);
	CHECK_EQ(c.kick_signal, SIGUSR1);
	CHECK(!c.console_escape);
	mvm_disk_init(&d, "x.img");
	CHECK_STR(d.path, "x.img");
	CHECK_EQ(d.queues, 1);
	CHECK(d.packed);
	CHECK_EQ(d.transport, arch_layout.has_ccw ? MVM_TRANSPORT_CCW : MVM_TRANSPORT_PCI);
	CHECK_EQ(d.poll_us, 32);
	CHECK_EQ(d.gather_us, 200);
	CHECK(!d.fixed_buffers);
}

TEST(create_valid_config_and_destroy)
{
	struct mvm_config c;
	struct mvm *vm = NULL;

	setup();
	c = config();
	c.cmdline = "quiet -- exit 3";
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	CHECK(vm);
	CHECK_EQ(mvm_wait_fd(vm), -1);
	mvm_destroy(vm);
	mvm_destroy(NULL);
}

/* cfg.id begins the VM's thread names, which hold 15 bytes: 1 to 8 of
 * [A-Za-z0-9_.-]. The thread list exists from mvm_start on. */
TEST(vm_id_and_thread_list_before_start)
{
	struct mvm_config c;
	struct mvm_thread t[4];
	struct mvm *vm;

	setup();
	c = config();
	c.id = "";
	create_fails(&c, -EINVAL, "id '': give 1 to 8 letters");
	c.id = "123456789";
	create_fails(&c, -EINVAL, "id '123456789'");
	c.id = "a/b";
	create_fails(&c, -EINVAL, "id 'a/b'");
	c.id = "web-1.a_";
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	CHECK_EQ(mvm_get_threads(vm, t, 4, sizeof(t[0])), -ESRCH);
	CHECK_EQ(mvm_get_threads(vm, NULL, 4, sizeof(t[0])), -EINVAL);
	CHECK_EQ(mvm_get_threads(vm, t, 4, 0), -EINVAL);
	CHECK_EQ(mvm_get_threads(NULL, t, 4, sizeof(t[0])), -EINVAL);
	mvm_destroy(vm);
}

TEST(create_rejects_bad_configs)
{
	struct mvm_config c;
	struct mvm *vm;
	char want[64];

	setup();
	CHECK_EQ(mvm_create(NULL, &vm, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "config: NULL"));
	c = config();
	CHECK_EQ(mvm_create(&c, NULL, err, sizeof(err)), -EINVAL);
	c.kernel = NULL;
	create_fails(&c, -EINVAL, "kernel: not set");
	c = config();
	c.cpus = 0;
	snprintf(want, sizeof(want), "cpus 0: out of range; give 1 to %u",
		 MIN(MVM_MAX_CPUS, arch_layout.max_vcpus));
	create_fails(&c, -EINVAL, want);
	c.cpus = MIN(MVM_MAX_CPUS, arch_layout.max_vcpus) + 1;
	snprintf(want, sizeof(want), "cpus %u", c.cpus);
	create_fails(&c, -EINVAL, want);
	c = config();
	c.mem = 8 << 20;
	create_fails(&c, -EINVAL, "mem 8388608 bytes: give at least 16 MiB");
	c.mem = (64 << 20) + 512;
	create_fails(&c, -EINVAL, "multiple of 4 KiB");
	c.mem = 1ULL << 40;
	create_fails(&c, -EINVAL, "above mvm's limit");
	c.mem = 1000ULL << 30;     /* below the limit, above any test host's RAM */
	create_fails(&c, -EINVAL, "RAM + swap");
	c = config();
	c.kick_signal = SIGKILL;
	create_fails(&c, -EINVAL, "kick_signal 9");
	c.kick_signal = 0;
	create_fails(&c, -EINVAL, "kick_signal 0");
	/* The kernel's signals for a thread's own faults: a no-op handler
	 * there turns a crash into a loop. */
	c.kick_signal = SIGSEGV;
	create_fails(&c, -EINVAL, "kick_signal 11 (Segmentation fault): the kernel or the "
		     "process needs it");
	c.kick_signal = SIGCHLD;
	create_fails(&c, -EINVAL, "kick_signal 17");
	c = config();
	c.console_in = 1000;
	create_fails(&c, -EBADF, "console_in 1000: not an open file descriptor; give an open "
		     "fd or -1");
	c = config();
	c.console_out = 1001;
	create_fails(&c, -EBADF, "console_out 1001: not an open file descriptor");
	c = config();
	c.console_escape = true;
	create_fails(&c, -EINVAL, "console_escape: set without console_in");
	c = config();
	c.hotplug_slots = MVM_MAX_HOTPLUG_SLOTS + 1;
	create_fails(&c, -EINVAL, "hotplug_slots 9: give 0 to 8");
	c = config();
	c.hotplug_queues = MVM_MAX_QUEUES + 1;
	create_fails(&c, -EINVAL, "hotplug_queues 65: give 1 to 64");
}

TEST(create_checks_files_and_kernel)
{
	static char big[70000];
	struct mvm_config c;
	char path[160];

	setup();
	c = config();
	c.kernel = "/nonexistent/bzImage";
	create_fails(&c, -ENOENT, "kernel '/nonexistent/bzImage': No such file or directory");
	c.kernel = dir;
	create_fails(&c, -EINVAL, "not a regular file");
	c = config();
	c.initrd = "/nonexistent/initrd";
	create_fails(&c, -ENOENT, "initrd '/nonexistent/initrd'");
	/* Not a kernel at all. */
	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	write_file(path, "hello", 5);
	c = config();
	c.kernel = path;
	create_fails(&c, -ENOEXEC, "kernel");
	/* The fake kernel accepts 255 bytes of command line. */
	memset(big, 'a', 300);
	c = config();
	c.cmdline = big;
	create_fails(&c, -E2BIG, "kernel command line is");
	memset(big, 'a', sizeof(big) - 1);
	create_fails(&c, -ENOSPC, "cmdline: too long");
}

TEST(cmdline_order_base_devices_user)
{
	const char *base = arch_layout.base_cmdline;
	char out[512], want[512];

	CHECK_EQ(vm_compose_cmdline(" virtio_mmio.device=4K@0xd0000000:5", "-- exit 3",
				    out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "%s virtio_mmio.device=4K@0xd0000000:5 -- exit 3", base);
	CHECK_STR(out, want);
	CHECK_EQ(vm_compose_cmdline(NULL, NULL, out, sizeof(out)), 0);
	CHECK_STR(out, base);
	CHECK_EQ(vm_compose_cmdline("", "quiet", out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "%s quiet", base);
	CHECK_STR(out, want);
	CHECK(strstr(out, "panic=-1"));         /* a crashed guest ends mvm */
	CHECK_EQ(vm_compose_cmdline(NULL, "quiet", out, strlen(base) + 4), -ENOSPC);
}

/* mvm(1)'s --disk syntax is the library's (mvm_disk_parse): what it
 * parses, mvm_add_disk takes; the strings live in the caller's buffer
 * until mvm_add_disk copies them. */
TEST(disk_parse_gives_what_add_disk_takes)
{
	struct mvm_config c;
	struct mvm_disk d;
	struct mvm *vm;
	char spec[256], buf[256], syntax[512];

	need_disk_transport();

	setup();
	c = config();
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	mvm_disk_init(&d, NULL);
	d.queues = 3;           /* a program's default, as --queues is mvm(1)'s */
	snprintf(spec, sizeof(spec), "%s,ro,serial=abc,cache=writeback,poll=0", image);
	CHECK_EQ(mvm_disk_parse(&d, spec, buf, sizeof(buf), err, sizeof(err)), 0);
	CHECK_STR(d.path, image);
	CHECK(d.ro && d.queues == 3 && d.poll_us == 0);
	CHECK_STR(d.serial, "abc");
	CHECK(d.path >= buf && d.path < buf + sizeof(buf));
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), 0);
	memset(buf, 'x', sizeof(buf));          /* copied: the VM no longer needs it */
	CHECK_EQ(mvm_disk_parse(&d, spec, buf, strlen(spec), err, sizeof(err)), -ENOSPC);
	CHECK_EQ(mvm_disk_parse(&d, "x.img,queues=65", buf, sizeof(buf), err, sizeof(err)),
		 -EINVAL);
	CHECK(strncmp(err, "disk queues='65'", 16) == 0 && strstr(err, "1 to 64"));
	CHECK_EQ(mvm_disk_parse(NULL, "x.img", buf, sizeof(buf), err, sizeof(err)), -EINVAL);
	/* One key for every disk, as mvm(1)'s --queues sets it. */
	mvm_disk_init(&d, NULL);
	CHECK_EQ(mvm_disk_set(&d, "queues", "4", err, sizeof(err)), 0);
	CHECK_EQ(d.queues, 4);
	CHECK_EQ(mvm_disk_set(&d, "transport", "dma", err, sizeof(err)), -EINVAL);
	CHECK(strncmp(err, "transport 'dma': unknown; give mmio, pci or ccw", 40) == 0);
	CHECK(mvm_disk_syntax(syntax, sizeof(syntax)) == strlen(syntax));
	CHECK(strncmp(syntax, "PATH[,ro][,id=NAME][,serial=ID]", 31) == 0);
	mvm_destroy(vm);
}

/* Each disk has an id for those who drive the VM: the caller's, checked
 * and unique, or "_diskN" from its number on, skipping one a caller took;
 * mvm_disk_find looks them up. */
TEST(disk_ids_are_given_or_default_to_diskN_and_are_unique)
{
	char paths[4][192], big[MVM_DISK_ID_MAX + 2];
	struct mvm_config c;
	struct mvm_disk d, got;
	struct mvm *vm;
	unsigned i;

	need_disk_transport();
	setup();
	for (i = 0; i < 4; i++) {
		int fd;

		snprintf(paths[i], sizeof(paths[i]), "%s/id%u.img", dir, i);
		fd = open(paths[i], O_WRONLY | O_CREAT | O_TRUNC, 0600);
		CHECK(fd >= 0 && ftruncate(fd, 1 << 20) == 0);
		close(fd);
	}
	c = config();
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	mvm_disk_init(&d, paths[0]);
	d.id = "_disk1";                 /* a default's name, taken first */
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), 0);
	mvm_disk_init(&d, paths[1]);     /* number 1: _disk1 is taken, so _disk2 */
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), 0);
	mvm_disk_init(&d, paths[2]);
	d.id = "_disk2";
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -EEXIST);
	CHECK(strstr(err, "id _disk2: disk 1 (") && strstr(err, "has it; give another"));
	d.id = "a,b";
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "id 'a,b': give 1 to 64 letters, digits"));
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	d.id = big;
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -EINVAL);
	d.id = "data.1";
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), 0);
	mvm_disk_init(&got, NULL);
	CHECK_EQ(mvm_get_disk(vm, 1, &got, sizeof(got)), 0);
	CHECK_STR(got.id, "_disk2");
	CHECK_EQ(mvm_disk_find(vm, "_disk1"), 0);
	CHECK_EQ(mvm_disk_find(vm, "_disk2"), 1);
	CHECK_EQ(mvm_disk_find(vm, "data.1"), 2);
	CHECK_EQ(mvm_disk_find(vm, "_disk0"), -ENOENT);
	CHECK_EQ(mvm_disk_find(vm, NULL), -EINVAL);
	CHECK_EQ(mvm_disk_find(NULL, "_disk1"), -EINVAL);
	mvm_destroy(vm);
}

TEST(add_disk_rejects_bad_disks)
{
	struct mvm_config c;
	struct mvm_disk d;
	struct mvm *vm;
	char missing[160];

	need_disk_transport();

	setup();
	c = config();
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	mvm_disk_init(&d, image);
	CHECK_EQ(mvm_add_disk(NULL, &d, err, sizeof(err)), -EINVAL);
	CHECK_EQ(mvm_add_disk(vm, NULL, err, sizeof(err)), -EINVAL);
	d.queues = 0;
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "disk ") == err && strstr(err, "0 queues; give 1 to 64"));
	d.queues = 65;
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -EINVAL);
	mvm_disk_init(&d, image);
	d.poll_us = 1001;
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "poll 1001 us"));
	mvm_disk_init(&d, image);
	d.gather_us = 1001;
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "gather 1001 us; give 0 to 1000"));
	mvm_disk_init(&d, image);
	d.serial = "012345678901234567890";   /* 21 bytes */
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "longer than 20 bytes"));
	mvm_disk_init(&d, image);
	d.transport = (enum mvm_transport)7;
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -EINVAL);
	mvm_disk_init(&d, NULL);
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -EINVAL);
	snprintf(missing, sizeof(missing), "%s/missing.img", dir);
	mvm_disk_init(&d, missing);
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "disk ") == err && strstr(err, "cannot open image"));
	mvm_destroy(vm);
}

TEST(disk_limit)
{
	struct mvm_config c;
	struct mvm_disk d;
	struct mvm *vm;
	unsigned i;

	need_disk_transport();

	setup();
	c = config();
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	mvm_disk_init(&d, image);
	d.ro = true;          /* shared locks: the same image may be added 16 times */
	for (i = 0; i < MVM_MAX_DISKS; i++)
		CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), 0);
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -ENOSPC);
	CHECK(strstr(err, "more than 16 disks"));
	mvm_destroy(vm);
}

TEST(two_vms_same_image_second_refused)
{
	struct mvm_config c;
	struct mvm_disk d;
	struct mvm *a, *b;
	struct timespec t0, t1;

	need_disk_transport();

	setup();
	c = config();
	CHECK_EQ(mvm_create(&c, &a, err, sizeof(err)), 0);
	CHECK_EQ(mvm_create(&c, &b, err, sizeof(err)), 0);
	mvm_disk_init(&d, image);
	CHECK_EQ(mvm_add_disk(a, &d, err, sizeof(err)), 0);
	/* At once (no wait for a lock that another process may drop), and
	 * saying whose it is. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK_EQ(mvm_add_disk(b, &d, err, sizeof(err)), -EBUSY);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(strstr(err, "in use by another VM of this process"));
	CHECK(t1.tv_sec - t0.tv_sec < 1);
	/* A read-only disk is refused too while the other has it read-write. */
	d.ro = true;
	CHECK_EQ(mvm_add_disk(b, &d, err, sizeof(err)), -EBUSY);
	d.ro = false;
	/* Destroying the first VM releases its lock. */
	mvm_destroy(a);
	CHECK_EQ(mvm_add_disk(b, &d, err, sizeof(err)), 0);
	mvm_destroy(b);
}

TEST(stop_and_wait_before_start)
{
	struct mvm_config c;
	struct mvm_exit ex;
	struct mvm_stats st;
	struct mvm_vcpu_stats vs;
	struct mvm_queue_stats qs;
	struct mvm *vm;
	char json[256];

	setup();
	c = config();
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	CHECK_EQ(mvm_stop(vm, 3), -EINVAL);
	CHECK_EQ(mvm_wait(vm, 0, &ex, sizeof(ex)), -EINVAL);
	CHECK_EQ(mvm_stop(NULL, 0), -EINVAL);
	CHECK_EQ(mvm_wait(NULL, 0, &ex, sizeof(ex)), -EINVAL);
	/* Statistics of a VM that never ran: zeros, valid JSON. */
	CHECK_EQ(mvm_get_stats(vm, &st, sizeof(st)), 0);
	CHECK_EQ(st.cpus, 1);
	CHECK_EQ(mvm_get_vcpu_stats(vm, MVM_ALL, &vs, sizeof(vs)), 0);
	CHECK_EQ(vs.exits_io, 0);
	CHECK_EQ(mvm_get_vcpu_stats(vm, 0, &vs, sizeof(vs)), -EINVAL);
	CHECK_EQ(mvm_get_queue_stats(vm, 0, 0, &qs, sizeof(qs)), -EINVAL);
	CHECK_EQ(mvm_get_queue_stats(vm, MVM_ALL, MVM_ALL, &qs, sizeof(qs)), 0);
	CHECK_EQ(qs.requests, 0);
	CHECK(mvm_stats_json(vm, json, sizeof(json)) > 0);
	CHECK_STR(json, "{\"vcpus\":[],\"devices\":[],\"state\":\"created\",\"pauses\":0,"
		  "\"paused_us\":0,\"nmis\":0}");
	CHECK_EQ(mvm_stats_json(vm, json, 8), -ENOSPC);
	mvm_destroy(vm);
}

/* Pause, resume and an image swap need a started VM: refused before,
 * with the state saying "created"; the state's names are the ones
 * vm.info uses. */
TEST(run_time_control_before_start_is_refused_and_state_says_created)
{
	struct mvm_config c;
	struct mvm *vm;

	setup();
	c = config();
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	CHECK_EQ(mvm_get_state(vm), MVM_VM_CREATED);
	CHECK_EQ(mvm_pause(vm, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "mvm_pause: the VM has not been started"));
	CHECK_EQ(mvm_resume(vm, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "mvm_resume: the VM has not been started"));
	CHECK_EQ(mvm_get_state(vm), MVM_VM_CREATED);
	CHECK_EQ(mvm_nmi(vm, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "mvm_nmi: the VM has not been started"));
	CHECK_EQ(mvm_nmi(NULL, err, sizeof(err)), -EINVAL);
	CHECK_EQ(mvm_power_button(vm, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "mvm_power_button: the VM has not been started"));
	CHECK_EQ(mvm_pause(NULL, err, sizeof(err)), -EINVAL);
	CHECK_EQ(mvm_get_state(NULL), -EINVAL);
	CHECK_STR(mvm_state_name(MVM_VM_RUNNING), "running");
	CHECK_STR(mvm_state_name(MVM_VM_PAUSED), "paused");
	CHECK_STR(mvm_state_name(MVM_VM_ENDED), "ended");
	CHECK_STR(mvm_state_name(99), "unknown");
	/* A disk's image is swapped in a started VM only. */
	CHECK_EQ(mvm_disk_swap(vm, 0, "/nonexistent.img", err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "mvm_disk_swap: the VM has not been started"));
	CHECK_EQ(mvm_disk_swap(vm, 0, "", err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "no path"));
	/* Nor is one removed; the count and addresses say there is none. */
	CHECK_EQ(mvm_disk_remove(vm, 0, 0, 1000, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "mvm_disk_remove: the VM has not been started"));
	CHECK_EQ(mvm_disk_remove(vm, 0, 2, 1000, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "flags 0x2: unknown"));
	CHECK_EQ(mvm_disk_remove(vm, 0, 0, -1, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "timeout -1 ms"));
	CHECK_EQ(mvm_disk_count(vm), 0);
	CHECK_EQ(mvm_disk_count(NULL), 0);
	CHECK_EQ(mvm_disk_pci_address(vm, 0, err, sizeof(err)), -EINVAL);
	mvm_destroy(vm);
}

/* After mvm_start, whatever it returned, the VM cannot be started again
 * nor get disks; destroy cleans up either way. */
TEST(double_start_and_add_after_start)
{
	struct mvm_config c;
	struct mvm_disk d;
	struct mvm *vm;
	int ret;

	need_disk_transport();

	setup();
	c = config();
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	mvm_disk_init(&d, image);
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), 0);
	ret = mvm_start(vm, err, sizeof(err));
	CHECK(ret == 0 || ret == -ENODEV || ret == -ENOTSUP);
	CHECK_EQ(mvm_start(vm, err, sizeof(err)), -EBUSY);
	/* A start that failed says so, not "started already". */
	CHECK(strstr(err, ret ? "an earlier mvm_prepare or mvm_start of this VM failed"
			      : "started already"));
	/* Without hot-plug slots, nothing more goes in once it runs. */
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -EBUSY);
	CHECK(strstr(err, ret ? "add disks before mvm_prepare, or hot-plug them"
			      : "started without hot-plug slots"));
	if (ret == 0) {
		struct mvm_exit ex;

		CHECK(mvm_wait_fd(vm) >= 0);
		CHECK_EQ(mvm_stop(vm, 42), 0);
		CHECK_EQ(mvm_wait(vm, -1, &ex, sizeof(ex)), 0);
		/* Stopped by us, unless the fake kernel ended it first (a KVM
		 * that cannot run it: 126; a crash: triple fault, status 0). */
		if (ex.reason == MVM_EXIT_STOPPED)
			CHECK_EQ(ex.status, 42);
		else
			CHECK(ex.reason == MVM_EXIT_GUEST_ERROR || ex.reason == MVM_EXIT_POWEROFF);
	} else {
		CHECK_EQ(mvm_stop(vm, 1), -EINVAL);
	}
	mvm_destroy(vm);
	/* The image's lock went with the VM. */
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), 0);
	mvm_destroy(vm);
}

static void host_handler(int sig)
{
	(void)sig;
}

/* The kick signal's handler is the one process-wide thing mvm installs:
 * a handler the host program installed itself is not taken over, and
 * the disposition mvm found comes back when the last VM that used the
 * signal is destroyed. */
TEST(kick_signal_is_refused_over_a_host_handler_and_given_back)
{
	struct sigaction sa = { .sa_handler = host_handler }, now;
	struct mvm_config c;
	struct mvm *a, *b;
	int ret;

	setup();
	c = config();
	c.kick_signal = SIGUSR2;
	sigemptyset(&sa.sa_mask);
	CHECK_EQ(sigaction(SIGUSR2, &sa, NULL), 0);
	CHECK_EQ(mvm_create(&c, &a, err, sizeof(err)), 0);
	ret = mvm_prepare(a, err, sizeof(err));
	if (ret == -ENODEV || ret == -ENOTSUP)
		CHECK_SKIP("no KVM here to prepare a VM with (%s)", err);
	CHECK_EQ(ret, -EBUSY);
	CHECK(strstr(err, "kick_signal 12 (User defined signal 2): the process has a handler "
		      "of its own for it"));
	mvm_destroy(a);
	CHECK_EQ(sigaction(SIGUSR2, NULL, &now), 0);
	CHECK(now.sa_handler == host_handler);          /* untouched */

	signal(SIGUSR2, SIG_DFL);
	CHECK_EQ(mvm_create(&c, &a, err, sizeof(err)), 0);
	CHECK_EQ(mvm_create(&c, &b, err, sizeof(err)), 0);
	CHECK_EQ(mvm_prepare(a, err, sizeof(err)), 0);
	CHECK_EQ(mvm_prepare(b, err, sizeof(err)), 0);
	CHECK_EQ(sigaction(SIGUSR2, NULL, &now), 0);
	CHECK(now.sa_handler != SIG_DFL);
	mvm_destroy(a);
	CHECK_EQ(sigaction(SIGUSR2, NULL, &now), 0);
	CHECK(now.sa_handler != SIG_DFL);               /* b still kicks with it */
	mvm_destroy(b);
	CHECK_EQ(sigaction(SIGUSR2, NULL, &now), 0);
	CHECK(now.sa_handler == SIG_DFL);
}

/* pvpanic is on by default where the board has PCI (x86), also for a
 * program built with 2.0's header (a config without the field), and off
 * on request; the board without PCI (s390x) has none either way. */
static bool has_pvpanic(const struct mvm_config *c)
{
	static char json[8192];
	struct mvm *vm;
	int ret;

	CHECK_EQ(mvm_create(c, &vm, err, sizeof(err)), 0);
	ret = mvm_prepare(vm, err, sizeof(err));
	if (ret == -ENODEV || ret == -ENOTSUP)
		CHECK_SKIP("no KVM here to prepare a VM with (%s)", err);
	CHECK_EQ(ret, 0);
	CHECK(mvm_stats_json(vm, json, sizeof(json)) > 0);
	mvm_destroy(vm);
	return strstr(json, "\"kind\":\"pvpanic\"") != NULL;
}

TEST(pvpanic_is_on_by_default_where_there_is_pci)
{
	bool pci = arch_layout.pci_mmio_end != 0;
	struct mvm_config c;

	setup();
	c = config();
	CHECK(c.pvpanic);
	CHECK_EQ(has_pvpanic(&c), pci);
	c.size = offsetof(struct mvm_config, pvpanic);
	c.pvpanic = false;      /* beyond a 2.0 config: never read */
	CHECK_EQ(has_pvpanic(&c), pci);
	c = config();
	c.pvpanic = false;
	CHECK(!has_pvpanic(&c));
}

/* The ABI can grow: a config and a disk carry their size. One that no
 * init function filled is refused; one from a program built with a newer
 * header is taken as long as the fields this library does not know are
 * left zero; the statistics calls write what the caller has room for. */
/* A program built with 2.0's mvm.h calls the functions mvm_config_init
 * and mvm_disk_init on 2.0's structs: nothing is written past them, the
 * size says 2.0's, and the library takes them as they are. */
TEST(a_20_program_s_structs_are_not_overrun)
{
	const size_t c20 = offsetof(struct mvm_config, pvpanic);
	const size_t d20 = offsetof(struct mvm_disk, fixed_buffers) + sizeof(bool);
	union { struct mvm_config c; uint8_t b[sizeof(struct mvm_config) + 16]; } cu;
	union { struct mvm_disk d; uint8_t b[sizeof(struct mvm_disk) + 16]; } du;
	char buf[256];
	struct mvm *vm;
	size_t i;

	setup();
	memset(&cu, 0xa5, sizeof(cu));
	(mvm_config_init)(&cu.c);
	CHECK_EQ(cu.c.size, c20);
	for (i = c20; i < sizeof(cu); i++)
		CHECK_EQ(cu.b[i], 0xa5);
	CHECK_EQ(cu.c.cpus, 1);
	cu.c.kernel = kernel;
	CHECK_EQ(mvm_create(&cu.c, &vm, err, sizeof(err)), 0);
	memset(&du, 0xa5, sizeof(du));
	(mvm_disk_init)(&du.d, image);
	CHECK_EQ(du.d.size, d20);
	for (i = d20; i < sizeof(du); i++)
		CHECK_EQ(du.b[i], 0xa5);
	CHECK_EQ(mvm_disk_parse(&du.d, "x.img,queues=2,fixed-buffers=on", buf, sizeof(buf), err,
				sizeof(err)), 0);
	CHECK(du.d.queues == 2 && du.d.fixed_buffers && du.d.size == d20);
	for (i = d20; i < sizeof(du); i++)
		CHECK_EQ(du.b[i], 0xa5);
	mvm_destroy(vm);
	/* The macros fill the whole struct of the header the program has. */
	memset(&cu, 0xa5, sizeof(cu));
	mvm_config_init(&cu.c);
	CHECK_EQ(cu.c.size, sizeof(struct mvm_config));
	CHECK(cu.c.pvpanic && cu.c.id == NULL);
}

TEST(structs_carry_their_size_and_may_grow)
{
	struct newer { struct mvm_config c; uint64_t future; } n;
	struct { struct mvm_disk d; uint64_t future; } nd;
	struct mvm_config c;
	struct mvm_stats st;
	struct mvm *vm;
	uint8_t buf[sizeof(struct mvm_stats) + 8];

	setup();
	CHECK_STR(mvm_version(), MVM_VERSION_STRING);
	memset(&c, 0, sizeof(c));
	c.kernel = kernel;
	c.cpus = 1;
	c.mem = 256 << 20;
	create_fails(&c, -EINVAL, "config: size 0: not one of libmvm 2.0 or later");
	create_fails(&c, -EINVAL, "fill it with mvm_config_init");
	memset(&n, 0, sizeof(n));
	mvm_config_init(&n.c);
	n.c.kernel = kernel;
	n.c.size = sizeof(n);
	CHECK_EQ(mvm_create(&n.c, &vm, err, sizeof(err)), 0);
	need_disk_transport();
	memset(&nd, 0, sizeof(nd));
	mvm_disk_init(&nd.d, image);
	nd.d.size = sizeof(nd);
	nd.future = 1;
	CHECK_EQ(mvm_add_disk(vm, &nd.d, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "disk: size") == err && strstr(err, "does not know"));
	nd.future = 0;
	CHECK_EQ(mvm_add_disk(vm, &nd.d, err, sizeof(err)), 0);
	/* A caller's struct shorter than ours gets what fits, one longer
	 * zeros beyond. */
	memset(buf, 0xee, sizeof(buf));
	CHECK_EQ(mvm_get_stats(vm, (struct mvm_stats *)buf, sizeof(unsigned)), 0);
	CHECK_EQ(((struct mvm_stats *)buf)->cpus, 1);
	CHECK_EQ(buf[sizeof(unsigned)], 0xee);
	CHECK_EQ(mvm_get_stats(vm, (struct mvm_stats *)buf, sizeof(buf)), 0);
	CHECK_EQ(((struct mvm_stats *)buf)->disks, 1);
	CHECK_EQ(buf[sizeof(buf) - 1], 0);
	CHECK_EQ(mvm_get_stats(vm, &st, sizeof(st)), 0);
	mvm_destroy(vm);
	n.future = 7;
	create_fails(&n.c, -EINVAL, "set fields that this libmvm");
}

/* The vsock device's struct: defaults, the --vsock syntax, and what
 * mvm_add_vsock refuses (the same table's limits), one per VM. */
TEST(vsock_parse_and_add_take_one_device)
{
	struct mvm_vsock_stats vs;
	struct mvm_config c;
	struct mvm_vsock v;
	struct mvm *vm;
	char buf[256], syntax[256];

	need_disk_transport();
	setup();
	c = config();
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	mvm_vsock_init(&v);
	CHECK_EQ(v.size, sizeof(v));
	CHECK_EQ(v.cid, 0);
	CHECK(!v.socket);
	CHECK_EQ(v.conns, 256);
	CHECK_EQ(v.transport, arch_layout.has_ccw ? MVM_TRANSPORT_CCW : MVM_TRANSPORT_PCI);
	CHECK_EQ(mvm_add_vsock(vm, &v, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "cid= is missing"));
	CHECK(mvm_vsock_syntax(syntax, sizeof(syntax)) == strlen(syntax));
	CHECK_STR(syntax, "cid=N,socket=PATH[,conns=N][,transport=mmio|pci|ccw][,poll=USEC]");
	CHECK_EQ(mvm_vsock_parse(&v, "cid=5", buf, sizeof(buf), err, sizeof(err)), 0);
	CHECK_EQ(mvm_add_vsock(vm, &v, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "socket= is missing"));
	CHECK_EQ(mvm_vsock_parse(&v, "socket=/tmp/mvm-test-v.sock,conns=2", buf, sizeof(buf),
				 err, sizeof(err)), 0);
	CHECK_EQ(v.cid, 5);
	CHECK_EQ(v.conns, 2);
	v.conns = 0;
	CHECK_EQ(mvm_add_vsock(vm, &v, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "conns; give 1 to 4096"));
	v.conns = 2;
	/* Its counters: none without the device, zeros before the start. */
	memset(&vs, 0xff, sizeof(vs));
	CHECK_EQ(mvm_get_vsock_stats(vm, &vs, sizeof(vs)), -ENOENT);
	CHECK_EQ(mvm_add_vsock(vm, &v, err, sizeof(err)), 0);
	CHECK_EQ(mvm_get_vsock_stats(vm, &vs, sizeof(vs)), 0);
	CHECK_EQ(vs.connections_host, 0);
	CHECK_EQ(vs.bad_rx_buffers, 0);
	/* An older caller's shorter struct gets what fits, nothing beyond. */
	memset(&vs, 0xff, sizeof(vs));
	CHECK_EQ(mvm_get_vsock_stats(vm, &vs, offsetof(struct mvm_vsock_stats, bytes_to_host)), 0);
	CHECK_EQ(vs.connections_open, 0);
	CHECK_EQ(vs.bytes_to_host, UINT64_MAX);
	CHECK_EQ(mvm_get_vsock_stats(vm, NULL, sizeof(vs)), -EINVAL);
	CHECK_EQ(mvm_add_vsock(vm, &v, err, sizeof(err)), -EEXIST);
	CHECK(strstr(err, "has one already"));
	CHECK_EQ(mvm_add_vsock(NULL, &v, err, sizeof(err)), -EINVAL);
	mvm_destroy(vm);
}

/* Rate-limit groups: parsed from the --rate-limit-group syntax, checked
 * when made, added to a VM once per id, named by its disks; a disk that
 * names a group the VM lacks is refused, and the VM keeps the group
 * alive after the caller lets go of it. */
TEST(rate_groups_are_made_added_and_named_by_disks)
{
	struct mvm_rate_group_config gc;
	struct mvm_rate_group *g, *g2;
	struct mvm_config c;
	struct mvm_disk d;
	struct mvm *vm;
	char buf[256], dbuf[256], spec[256];

	need_disk_transport();
	setup();
	c = config();
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	mvm_rate_group_config_init(&gc);
	CHECK_EQ(gc.size, sizeof(gc));
	CHECK_EQ(mvm_rate_group_new(&gc, &g, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "id= is missing"));
	CHECK_EQ(mvm_rate_group_parse(&gc, "id=g0,ops_size=100", buf, sizeof(buf), err,
				      sizeof(err)), 0);
	CHECK_EQ(gc.rate.ops.size, 100);
	CHECK_EQ(mvm_rate_group_new(&gc, &g, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "ops_refill_time") && strstr(err, "give both"));
	CHECK_EQ(mvm_rate_group_parse(&gc, "id=g/0,ops_size=100,ops_refill_time=10", buf,
				      sizeof(buf), err, sizeof(err)), 0);
	CHECK_EQ(mvm_rate_group_new(&gc, &g, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "'g/0'"));
	CHECK_EQ(mvm_rate_group_parse(&gc, "id=g0,ops_size=100,ops_refill_time=10", buf,
				      sizeof(buf), err, sizeof(err)), 0);
	CHECK_EQ(mvm_rate_group_new(&gc, &g, err, sizeof(err)), 0);
	CHECK_EQ(mvm_rate_group_new(&gc, &g2, err, sizeof(err)), 0);

	/* A disk naming a group the VM does not have. */
	snprintf(spec, sizeof(spec), "%s,rate_limit_group=g0", image);
	mvm_disk_init(&d, NULL);
	CHECK_EQ(mvm_disk_parse(&d, spec, dbuf, sizeof(dbuf), err, sizeof(err)), 0);
	CHECK_STR(d.rate_limit_group, "g0");
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "rate_limit_group 'g0' is not one of the VM's"));

	CHECK_EQ(mvm_add_rate_group(vm, g, err, sizeof(err)), 0);
	CHECK_EQ(mvm_add_rate_group(vm, g2, err, sizeof(err)), -EEXIST);
	CHECK(strstr(err, "g0"));
	mvm_rate_group_unref(g2);
	mvm_rate_group_unref(g);        /* the VM holds its own */
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), 0);
	mvm_destroy(vm);
}

/* A disk's own limits: checked at mvm_add_disk, changeable before the
 * start (and, tests/embed, while the VM runs), never for a disk that is
 * not there. */
TEST(disk_rate_limits_are_checked_and_settable)
{
	struct mvm_rate_limit r;
	struct mvm_config c;
	struct mvm_disk d;
	struct mvm *vm;

	need_disk_transport();
	setup();
	c = config();
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	mvm_disk_init(&d, image);
	CHECK_EQ(d.rate.bw.size, 0);
	CHECK(!d.rate_limit_group);
	d.rate.bw.size = 1 << 20;
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "disk ") == err && strstr(err, "bw_refill_time"));
	d.rate.bw.refill_time_ms = MVM_RATE_REFILL_MS_MAX + 1;
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "bw_refill_time"));
	d.rate.bw.refill_time_ms = 1000;
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), 0);

	memset(&r, 0, sizeof(r));
	r.ops.one_time_burst = 5;
	CHECK_EQ(mvm_disk_set_rate_limit(vm, 0, &r, sizeof(r), err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "ops_one_time_burst 5 without ops_size"));
	r.ops.one_time_burst = 0;
	CHECK_EQ(mvm_disk_set_rate_limit(vm, 1, &r, sizeof(r), err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "disk 1: the VM has 1 disk;"));
	CHECK_EQ(mvm_disk_set_rate_limit(vm, 0, &r, sizeof(r) - 1, err, sizeof(err)), -EINVAL);
	CHECK_EQ(mvm_disk_set_rate_limit(vm, 0, &r, sizeof(r), err, sizeof(err)), 0);
	mvm_destroy(vm);
}

/* A snapshot directory as mvm_snapshot writes it (docs/snapshot.md): the
 * MVM! section with version, architecture and shape (slots hot-plug
 * slots, its disk in slot disk_slot), no vCPU or device state
 * (mvm_create reads only this), and a memory file of mem bytes. */
/* A snapshot's state and memory files: its disk (image) with disk_spec's
 * keys, in hot-plug slot disk_slot of slots; a rate-limit group of
 * group_spec's id and limits where given. */
static void write_snapshot_with(const char *snapdir, const char *version, uint32_t cpus,
				uint64_t mem, uint64_t memfile, uint32_t slots, uint32_t disk_slot,
				const char *disk_spec, const char *group_spec)
{
	struct ratelim_levels lv = { 0 };
	struct snap_w w;
	char path[192];
	int dfd, fd;

	mkdir(snapdir, 0700);
	snap_w_init(&w);
	snap_begin(&w, SNAP_TAG('M', 'V', 'M', '!'), 0);
	snap_put_str(&w, version);
	snap_put_str(&w, arch_layout.name);
	snap_put_u32(&w, cpus);
	snap_put_u64(&w, mem);
	snap_put_u8(&w, 1);             /* pvpanic */
	snap_put_u32(&w, slots);
	snap_put_u32(&w, 2);            /* each slot's queues */
	snap_put_u32(&w, 1);            /* disks */
	snap_put_str(&w, image);
	snap_put_str(&w, disk_spec);
	snap_put_u32(&w, disk_slot);
	snap_put_u8(&w, 0);             /* no vsock */
	snap_put_u32(&w, 0);            /* devices */
	snap_put_u32(&w, 0);            /* conf1 */
	snap_put_str(&w, "/boot/guest-bzImage");        /* the payload */
	snap_put_str(&w, "");
	snap_put_str(&w, "console=ttyS0 quiet");
	snap_end(&w);
	if (group_spec) {
		snap_begin(&w, SNAP_TAG('G', 'R', 'P', ' '), 0);
		snap_put_str(&w, group_spec);
		ratelim_levels_put(&w, &lv);
		snap_end(&w);
	}
	dfd = open(snapdir, O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0);
	CHECK_EQ(snap_w_write(&w, dfd, "state", err, sizeof(err)), 0);
	snap_w_free(&w);
	snprintf(path, sizeof(path), "%s/memory", snapdir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(ftruncate(fd, (off_t)memfile), 0);
	close(fd);
	close(dfd);
}

static void write_snapshot_slots(const char *snapdir, const char *version, uint32_t cpus,
				 uint64_t mem, uint64_t memfile, uint32_t slots, uint32_t disk_slot)
{
	write_snapshot_with(snapdir, version, cpus, mem, memfile, slots, disk_slot,
			    "queues=2,cache=writeback,id=hot0", NULL);
}

static void write_snapshot(const char *snapdir, const char *version, uint32_t cpus,
			   uint64_t mem, uint64_t memfile)
{
	write_snapshot_slots(snapdir, version, cpus, mem, memfile, 0, 0);
}

/* mvm_config.restore: the VM's shape is the snapshot's (the config's
 * cpus and mem are not looked at), its disks come with it, and
 * mvm_get_config gives the payload its guest booted from; a kernel given
 * too, another mvm version, memory cut short and a directory without a
 * snapshot are refused by name. */
TEST(restore_takes_the_snapshots_shape_and_refuses_what_differs)
{
	struct mvm_config c, now;
	struct mvm_stats st;
	char snapdir[128];
	struct mvm *vm;

	setup();
	snprintf(snapdir, sizeof(snapdir), "%s/snap", dir);
	write_snapshot(snapdir, MVM_VERSION_STRING, 3, 64 << 20, 64 << 20);
	mvm_config_init(&c);
	c.restore = snapdir;
	c.cpus = 1;
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	CHECK_EQ(mvm_get_stats(vm, &st, sizeof(st)), 0);
	CHECK_EQ(st.cpus, 3);
	CHECK_EQ(st.mem, 64 << 20);
	mvm_config_init(&now);
	CHECK_EQ(mvm_get_config(vm, &now, sizeof(now)), 0);
	CHECK_EQ(now.cpus, 3);
	CHECK_EQ(now.mem, 64 << 20);
	CHECK(now.kernel && !strcmp(now.kernel, "/boot/guest-bzImage"));
	CHECK(!now.initrd);
	CHECK(now.cmdline && !strcmp(now.cmdline, "console=ttyS0 quiet"));
	CHECK_EQ(mvm_get_config(vm, &now, sizeof(size_t)), -EINVAL);
	mvm_destroy(vm);

	c.kernel = kernel;
	create_fails(&c, -EINVAL, "with a kernel given; a restored guest goes on with the "
		     "kernel in its memory");
	c.kernel = NULL;
	write_snapshot(snapdir, "1.9.9", 3, 64 << 20, 64 << 20);
	create_fails(&c, -EPROTO, "taken by mvm 1.9.9, this is mvm " MVM_VERSION_STRING);
	write_snapshot(snapdir, MVM_VERSION_STRING, 3, 64 << 20, 32 << 20);
	create_fails(&c, -EINVAL, "memory is 33554432 bytes, the guest had 67108864");
	write_snapshot(snapdir, MVM_VERSION_STRING, 0, 64 << 20, 64 << 20);
	create_fails(&c, -EINVAL, "cpus 0: out of range");
	write_snapshot_slots(snapdir, MVM_VERSION_STRING, 1, 64 << 20, 64 << 20, 1, 2);
	create_fails(&c, -EINVAL, "disk 0 in hot-plug slot 2 of 1: the file is damaged");
	c.restore = dir;
	create_fails(&c, -ENOENT, "no snapshot there");
}

/* A restore's disk given by the caller takes from the snapshot what the
 * guest saw and the caller left at its default (queues=2 here), and keeps
 * what the caller set. (A vsock device's transport, inherited the same
 * way, is checked by system/snapshot's clones.) */
TEST(restore_disks_given_take_the_snapshots_shape_where_left_at_default)
{
	struct mvm_config c;
	struct mvm_disk d, got;
	char snapdir[128];
	struct mvm *vm;

	setup();
	snprintf(snapdir, sizeof(snapdir), "%s/snap", dir);
	write_snapshot(snapdir, MVM_VERSION_STRING, 2, 64 << 20, 64 << 20);
	mvm_config_init(&c);
	c.restore = snapdir;
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	mvm_disk_init(&d, image);
	d.cache = MVM_CACHE_WRITEBACK;
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), 0);
	mvm_disk_init(&got, NULL);
	CHECK_EQ(mvm_get_disk(vm, 0, &got, sizeof(got)), 0);
	CHECK_EQ(got.queues, 2);                /* the snapshot's */
	CHECK_STR(got.id, "hot0");              /* its name too */
	CHECK_STR(got.path, image);             /* the caller's */
	mvm_destroy(vm);

	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	mvm_disk_init(&d, image);
	d.queues = 3;
	d.id = "mine";
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), 0);
	CHECK_EQ(mvm_get_disk(vm, 0, &got, sizeof(got)), 0);
	CHECK_EQ(got.queues, 3);                /* set: stays (the load refuses it) */
	CHECK_STR(got.id, "mine");
	mvm_destroy(vm);
}

/* The snapshot's rate-limit groups come with it, as Cloud Hypervisor's
 * VmConfig does: its disk names group tg, which the restoring caller did
 * not give, and the restore makes it with the snapshot's limits
 * (mvm_get_rate_group). A group the caller gave keeps the caller's
 * limits; a group the file cannot describe fails the prepare by name. */
TEST(restore_makes_the_snapshots_rate_limit_groups_the_caller_did_not_give)
{
	const char *disk = "queues=2,cache=writeback,id=hot0,rate_limit_group=tg";
	struct mvm_rate_group_config gc;
	struct mvm_rate_group *g;
	struct mvm_config c;
	struct mvm_disk got;
	char snapdir[128], buf[128];
	struct mvm *vm;

	setup();
	snprintf(snapdir, sizeof(snapdir), "%s/snap", dir);
	write_snapshot_with(snapdir, MVM_VERSION_STRING, 1, 64 << 20, 64 << 20, 0, 0, disk,
			    "id=tg,ops_size=20,ops_refill_time=10000");
	mvm_config_init(&c);
	c.restore = snapdir;
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	mvm_rate_group_config_init(&gc);
	CHECK_EQ(mvm_get_rate_group(vm, 0, &gc, sizeof(gc)), -ENOENT);
	/* Whatever KVM then says, the groups and disks come first. */
	mvm_prepare(vm, err, sizeof(err));
	CHECK_EQ(mvm_get_rate_group(vm, 0, &gc, sizeof(gc)), 0);
	CHECK_STR(gc.id, "tg");
	CHECK_EQ(gc.rate.ops.size, 20);
	CHECK_EQ(gc.rate.ops.refill_time_ms, 10000);
	CHECK_EQ(gc.rate.bw.size, 0);
	CHECK_EQ(mvm_get_rate_group(vm, 1, &gc, sizeof(gc)), -ENOENT);
	CHECK_EQ(mvm_get_rate_group(vm, 0, &gc, sizeof(size_t)), -EINVAL);
	mvm_disk_init(&got, NULL);
	CHECK_EQ(mvm_get_disk(vm, 0, &got, sizeof(got)), 0);
	CHECK_STR(got.rate_limit_group, "tg");
	mvm_destroy(vm);

	/* The caller's group of that id stays as the caller made it. */
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	CHECK_EQ(mvm_rate_group_parse(&gc, "id=tg,ops_size=5,ops_refill_time=1000", buf,
				      sizeof(buf), err, sizeof(err)), 0);
	CHECK_EQ(mvm_rate_group_new(&gc, &g, err, sizeof(err)), 0);
	CHECK_EQ(mvm_add_rate_group(vm, g, err, sizeof(err)), 0);
	mvm_rate_group_unref(g);
	mvm_prepare(vm, err, sizeof(err));
	CHECK_EQ(mvm_get_rate_group(vm, 0, &gc, sizeof(gc)), 0);
	CHECK_EQ(gc.rate.ops.size, 5);
	CHECK_EQ(gc.rate.ops.refill_time_ms, 1000);
	CHECK_EQ(mvm_get_rate_group(vm, 1, &gc, sizeof(gc)), -ENOENT);
	mvm_destroy(vm);

	write_snapshot_with(snapdir, MVM_VERSION_STRING, 1, 64 << 20, 64 << 20, 0, 0, disk,
			    "id=tg,ops_size=lots");
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	CHECK_EQ(mvm_prepare(vm, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "rate-limit group 0: the file is damaged: ") && strstr(err, "ops_size"));
	mvm_destroy(vm);
	write_snapshot_with(snapdir, MVM_VERSION_STRING, 1, 64 << 20, 64 << 20, 0, 0, disk,
			    "id=tg,ops_size=20");
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	CHECK_EQ(mvm_prepare(vm, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "restore ") && strstr(err, "give both"));
	mvm_destroy(vm);
}

/* A disk the snapshot's guest had in a hot-plug slot goes back there, on
 * the slots' transport (x86: PCI): given another, the restore fails at
 * mvm_prepare, naming the disk and its slot, before anything of the VM
 * is made. */
TEST(restore_puts_a_hot_plugged_disk_back_in_its_slot_on_the_slots_transport)
{
	struct mvm_config c;
	struct mvm_disk d;
	char snapdir[128];
	struct mvm *vm;

	setup();
	if (arch_layout.pci_mmio_end == 0)
		CHECK_SKIP("this board has no PCI bus, so no hot-plug slots");
	snprintf(snapdir, sizeof(snapdir), "%s/snap", dir);
	write_snapshot_slots(snapdir, MVM_VERSION_STRING, 1, 64 << 20, 64 << 20, 1, 1);
	mvm_config_init(&c);
	c.restore = snapdir;
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	mvm_disk_init(&d, image);
	d.transport = MVM_TRANSPORT_MMIO;
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), 0);
	CHECK_EQ(mvm_prepare(vm, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "disk 0 (") && strstr(err, "was in hot-plug slot 1, which is on pci; "
						  "give it transport=pci"));
	mvm_destroy(vm);
}

/* mvm_config.snapshot_dir: an empty one is refused at mvm_create; the
 * directory is made (mode 0700) and opened by mvm_prepare, relative to the
 * working directory; a path that is a file fails the prepare by name. */
TEST(snapshot_dir_is_made_and_opened_at_prepare)
{
	struct mvm_config c;
	char snaps[128], cwd[256];
	struct stat st;
	struct mvm *vm;
	int ret;

	setup();
	c = config();
	c.snapshot_dir = "";
	create_fails(&c, -EINVAL, "snapshot_dir: empty; give a directory");
	snprintf(snaps, sizeof(snaps), "%s/snaps/", dir);
	c.snapshot_dir = snaps;
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	ret = mvm_prepare(vm, err, sizeof(err));
	if (ret == -ENODEV || ret == -ENOTSUP)
		CHECK_SKIP("no KVM here to prepare a VM with (%s)", err);
	CHECK_EQ(ret, 0);
	mvm_destroy(vm);
	snaps[strlen(snaps) - 1] = '\0';
	CHECK_EQ(stat(snaps, &st), 0);
	CHECK(S_ISDIR(st.st_mode));
	CHECK_EQ(st.st_mode & 0777, 0700);

	/* Relative: from the working directory as mvm_create found it. */
	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK_EQ(chdir(dir), 0);
	c.snapshot_dir = "rel";
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	CHECK_EQ(chdir(cwd), 0);
	CHECK_EQ(mvm_prepare(vm, err, sizeof(err)), 0);
	mvm_destroy(vm);
	snprintf(snaps, sizeof(snaps), "%s/rel", dir);
	CHECK_EQ(stat(snaps, &st), 0);
	CHECK(S_ISDIR(st.st_mode));

	c.snapshot_dir = image;
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	CHECK_EQ(mvm_prepare(vm, err, sizeof(err)), -ENOTDIR);
	CHECK(strstr(err, "snapshot_dir "));
	CHECK(strstr(err, "Not a directory; give a directory"));
	mvm_destroy(vm);
}

/* mvm_config.mem_file: empty, or with a restore, refused at mvm_create; a
 * disk with fixed buffers refused beside it (its ring would keep the
 * file's pages after a snapshot made RAM private); mvm_prepare makes the
 * file, emptied and of the guest's RAM size. */
TEST(mem_file_is_checked_and_made_at_prepare)
{
	struct mvm_config c;
	struct mvm_disk d;
	char path[128];
	struct stat st;
	struct mvm *vm;
	int fd, ret;

	setup();
	c = config();
	c.mem_file = "";
	create_fails(&c, -EINVAL, "mem_file: empty; give a file for guest RAM");
	c.mem_file = "/m";
	c.kernel = NULL;
	c.restore = "/snap";
	create_fails(&c, -EINVAL, "mem_file /m with restore: a restored guest's RAM is its "
		     "snapshot's memory file");
	c = config();
	snprintf(path, sizeof(path), "%s/memory", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "old guest", 9), 9);
	close(fd);
	c.mem_file = path;
	c.mem = 32 << 20;
	CHECK_EQ(mvm_create(&c, &vm, err, sizeof(err)), 0);
	mvm_disk_init(&d, image);
	d.fixed_buffers = true;
	CHECK_EQ(mvm_add_disk(vm, &d, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "fixed-buffers=on with guest RAM in a file (mem_file)"));
	ret = mvm_prepare(vm, err, sizeof(err));
	if (ret == -ENODEV || ret == -ENOTSUP) {
		mvm_destroy(vm);
		CHECK_SKIP("no KVM here to prepare a VM with (%s)", err);
	}
	CHECK_EQ(ret, 0);
	CHECK_EQ(stat(path, &st), 0);
	CHECK_EQ(st.st_size, 32 << 20);
	CHECK(st.st_blocks < 1024);     /* emptied, then sized: holes */
	mvm_destroy(vm);
}
