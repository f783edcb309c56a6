/* Embedding libmvm: a host program that starts and stops many microVMs in
 * one process, using nothing but the public header. Also the system test
 * tests/system/embed_many_vms.sh (under ASan), so it checks what it does:
 *
 *   mvm-embed KERNEL INITRD WORKDIR [SEQUENTIAL [PARALLEL_ROUNDS]]
 *
 *  1. boots the guest SEQUENTIAL times in a row (default 50), each with its
 *     own disk and command `exit K`, and checks every exit status;
 *  2. boots 4 VMs at a time, PARALLEL_ROUNDS times (default 2), each
 *     reading its disk and exiting with its own status;
 *  3. stops one VM in the middle of its boot with mvm_stop() from another
 *     thread and checks it ends as stopped, with the status given;
 *  4. checks that open file descriptors and threads are back to what they
 *     were after the first VM, and that RSS did not grow over the second
 *     half of the VMs in a row (no leak per VM; the parallel phase leaves
 *     the allocator's per-thread arenas behind, so it is not compared).
 * Prints one line per phase and "embed: ok" at the end; exit 0 on success.
 */
#include <mvm.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *kernel, *initrd, *workdir;

#define FAIL(...) do { fprintf(stderr, "embed: FAIL: " __VA_ARGS__); fputc('\n', stderr); \
		       exit(1); } while (0)

static void log_line(void *opaque, enum mvm_log_level level, const char *msg)
{
	fprintf(stderr, "embed: vm %ld: %s: %s\n", (long)(intptr_t)opaque,
		level == MVM_LOG_ERROR ? "error" : level == MVM_LOG_WARNING ? "warning" : "info",
		msg);
}

/* The guest's console, kept per VM: the last bytes, for failure reports. */
struct console {
	char tail[2048];
	size_t len;
};

static void console_out(void *opaque, const uint8_t *buf, size_t len)
{
	struct console *c = opaque;
	size_t i;

	for (i = 0; i < len; i++) {
		if (c->len == sizeof(c->tail) - 1) {
			memmove(c->tail, c->tail + 1024, c->len - 1024);
			c->len -= 1024;
		}
		c->tail[c->len++] = (char)buf[i];
	}
	c->tail[c->len] = '\0';
}

struct run {
	long id;
	int want;               /* exit status the guest command ends with */
	int stop_after_ms;      /* > 0: mvm_stop(vm, 99) after this long */
	bool sandbox;           /* cfg.sandbox: the VM's threads filtered */
	bool check_filters;     /* the only VM running: check its threads' filters */
	struct mvm_exit ex;
	struct console con;
	int ret;
	char err[MVM_ERR_MAX];
};

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/* Threads of this process by seccomp mode: the VM's (named vcpuN, ID-ctl,
 * ID-dNqM: the ids below all begin with "vm") and the others (ours). A VM
 * thread not yet named has its creator's name and filter. */
static void count_filtered(unsigned *vm_on, unsigned *vm_off, unsigned *ours_on)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	*vm_on = *vm_off = *ours_on = 0;
	if (!d)
		FAIL("opendir /proc/self/task: %s", strerror(errno));
	while ((e = readdir(d))) {
		char path[300], comm[64] = "", line[128];
		int mode = -1;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		/* Name and filter from one read of status (one snapshot): a
		 * thread the host's thread just started has the host's name
		 * until it names itself, and only then enters its filter;
		 * reading comm and status apart could see it in between. */
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;       /* ended meanwhile */
		while (fgets(line, sizeof(line), f)) {
			if (!strncmp(line, "Name:", 5))
				snprintf(comm, sizeof(comm), "%s", line + 5 + strspn(line + 5, " \t"));
			if (!strncmp(line, "Seccomp:", 8))
				mode = atoi(line + 8);
		}
		fclose(f);
		/* io_uring's workers ("iou-wrk-TID", Linux 5.12+) are listed as
		 * threads of the process and copy the filter of the queue
		 * thread whose request they run, and they outlive its VM for a
		 * while; they never run user code: neither ours nor the VM's. */
		if (!strncmp(comm, "iou-", 4))
			continue;
		/* Ours are named after the program, mvm-embed. */
		if (!strncmp(comm, "vm", 2) ||
		    (!strncmp(comm, "vcpu", 4) && comm[4] >= '0' && comm[4] <= '9'))
			mode == 2 ? (*vm_on)++ : (*vm_off)++;
		else
			*ours_on += mode == 2;
	}
	closedir(d);
}

/* With cfg.sandbox, each of the VM's threads enters its filter as it
 * starts (within 5 s here), and none of ours ever does. */
static void check_filters(const struct run *r)
{
	unsigned on = 0, off = 1, ours = 0;
	long t0 = now_ms();

	while (now_ms() - t0 < 5000) {
		count_filtered(&on, &off, &ours);
		if (ours || (on && !off) || !r->sandbox)
			break;
		usleep(10000);
	}
	if (ours)
		FAIL("vm %ld: %u of the host program's threads got a seccomp filter", r->id, ours);
	if (r->sandbox && (off || !on))
		FAIL("vm %ld: with cfg.sandbox, %u of its threads have no filter (%u do)", r->id,
		     off, on);
	if (!r->sandbox && on)
		FAIL("vm %ld: without cfg.sandbox, %u of its threads have a filter", r->id, on);
}

/* mvm_get_threads while the VM runs: its vCPU ("vcpu0"), its disk's I/O
 * thread and its control thread, each under the name it says (comm, read
 * by its id), the I/O and control threads' beginning with the VM's id. */
static void check_threads(const struct run *r, struct mvm *vm, const char *id)
{
	struct mvm_thread t[16];
	unsigned vcpus = 0, io = 0, control = 0;
	int n, i;

	n = mvm_get_threads(vm, t, 16, sizeof(t[0]));
	if (n < 3 || n > 16)
		FAIL("vm %ld: mvm_get_threads gave %d threads", r->id, n);
	for (i = 0; i < n; i++) {
		char path[64], comm[32] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%d/comm", t[i].tid);
		f = fopen(path, "r");
		if (!f || !fgets(comm, sizeof(comm), f)) {
			struct pollfd p = { .fd = mvm_wait_fd(vm), .events = POLLIN };

			if (poll(&p, 1, 0) == 1)
				return;         /* the VM ended meanwhile: its threads may too */
			FAIL("vm %ld: thread %d (%s) is not one of this process's", r->id,
			     t[i].tid, t[i].name);
		}
		fclose(f);
		comm[strcspn(comm, "\n")] = '\0';
		if (t[i].name[0] && strcmp(comm, t[i].name))
			FAIL("vm %ld: thread %d is named '%s', mvm_get_threads says '%s'", r->id,
			     t[i].tid, comm, t[i].name);
		vcpus += t[i].kind == MVM_THREAD_VCPU && t[i].index == 0 &&
			 !strcmp(t[i].name, "vcpu0");
		io += t[i].kind == MVM_THREAD_IO && t[i].disk == 0 &&
		      !strncmp(t[i].name, id, strlen(id));
		control += t[i].kind == MVM_THREAD_CONTROL && !strncmp(t[i].name, id, strlen(id));
	}
	if (vcpus != 1 || io != 1 || control != 1)
		FAIL("vm %ld: %u vCPU, %u I/O and %u control threads listed; expected one each",
		     r->id, vcpus, io, control);
}

/* One VM from start to end: a 4 MiB disk of its own, whose first sector
 * the guest reads before it exits with r->want. */
static void *run_vm(void *arg)
{
	struct run *r = arg;
	struct mvm_config cfg;
	struct mvm_disk disk;
	struct mvm *vm;
	char cmdline[160], image[512], id[MVM_ID_MAX + 1];
	int fd;

	snprintf(image, sizeof(image), "%s/disk-%ld.img", workdir, r->id);
	fd = open(image, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, 4 << 20) || close(fd)) {
		snprintf(r->err, sizeof(r->err), "cannot create %.400s: %s", image, strerror(errno));
		r->ret = -EIO;
		return NULL;
	}
	mvm_config_init(&cfg);
	cfg.kernel = kernel;
	cfg.initrd = initrd;
	snprintf(cmdline, sizeof(cmdline), "quiet -- dd if=/dev/vda of=/dev/null bs=512 count=1 "
		 "2>/dev/null && exit %d", r->want);
	cfg.cmdline = cmdline;
	cfg.mem = 128 << 20;
	cfg.console_fn = console_out;
	cfg.console_opaque = &r->con;
	cfg.log_fn = log_line;
	cfg.log_opaque = (void *)(intptr_t)r->id;
	cfg.sandbox = r->sandbox;
	snprintf(id, sizeof(id), "vm%ld", r->id);
	cfg.id = id;
	r->ret = mvm_create(&cfg, &vm, r->err, sizeof(r->err));
	if (r->ret)
		goto out;
	mvm_disk_init(&disk, image);
	r->ret = mvm_add_disk(vm, &disk, r->err, sizeof(r->err));
	if (!r->ret)
		r->ret = mvm_start(vm, r->err, sizeof(r->err));
	if (!r->ret && r->check_filters)
		check_filters(r);
	if (!r->ret)
		check_threads(r, vm, id);
	if (!r->ret && r->stop_after_ms > 0) {
		/* Wait a little, then stop it from this (another) thread. */
		if (mvm_wait(vm, r->stop_after_ms, &r->ex, sizeof(r->ex)) == -ETIMEDOUT)
			mvm_stop(vm, 99);
	}
	if (!r->ret)
		r->ret = mvm_wait(vm, 120 * 1000, &r->ex, sizeof(r->ex));
	mvm_destroy(vm);
out:
	unlink(image);
	return NULL;
}

static void check_run(const struct run *r, const char *phase)
{
	if (r->ret)
		FAIL("%s: vm %ld: %s (%s)\nconsole tail:\n%s", phase, r->id, strerror(-r->ret),
		     r->err, r->con.tail);
	if (r->stop_after_ms > 0) {
		if (r->ex.reason != MVM_EXIT_STOPPED || r->ex.status != 99)
			FAIL("%s: vm %ld: stopped mid-boot but ended with reason %d status %d",
			     phase, r->id, r->ex.reason, r->ex.status);
		return;
	}
	if (r->ex.reason != MVM_EXIT_GUEST_STATUS || r->ex.status != r->want)
		FAIL("%s: vm %ld: exit reason %d status %d (%s), expected status %d\n"
		     "console tail:\n%s", phase, r->id, r->ex.reason, r->ex.status,
		     r->ex.message, r->want, r->con.tail);
}

static unsigned count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	unsigned n = 0;

	if (!d)
		FAIL("opendir /proc/self/fd: %s", strerror(errno));
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;   /* the DIR's own fd */
}

/* "Threads:" or "VmRSS:" (kB) from /proc/self/status. */
static long status_field(const char *name)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		FAIL("fopen /proc/self/status: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, strlen(name)))
			v = strtol(line + strlen(name), NULL, 10);
	fclose(f);
	return v;
}

int main(int argc, char **argv)
{
	unsigned sequential = 20, rounds = 2, i, j, fds0 = 0;
	long threads0 = 0, rss0 = 0, rss_mid = 0, rss_seq = 0, t0;
	struct run r;

	if (argc < 4) {
		fprintf(stderr, "usage: mvm-embed KERNEL INITRD WORKDIR [SEQUENTIAL [PARALLEL_ROUNDS]]\n");
		return 2;
	}
	kernel = argv[1];
	initrd = argv[2];
	workdir = argv[3];
	if (argc > 4)
		sequential = (unsigned)atoi(argv[4]);
	if (argc > 5)
		rounds = (unsigned)atoi(argv[5]);
	if (sequential < 2)
		FAIL("SEQUENTIAL must be at least 2");

	/* 1. In a row. The first VM warms up what the process keeps (the kick
	 * signal's handler, allocator arenas): the baseline is taken after it. */
	t0 = now_ms();
	for (i = 0; i < sequential; i++) {
		memset(&r, 0, sizeof(r));
		r.id = i;
		r.want = 10 + (int)(i % 100);
		/* Every other VM with the sandbox (libmvm's opt-in). */
		r.sandbox = i % 2;
		r.check_filters = true;
		run_vm(&r);
		check_run(&r, "sequential");
		if (i == 0) {
			fds0 = count_fds();
			threads0 = status_field("Threads:");
			rss0 = status_field("VmRSS:");
		}
		if (i == sequential / 2)
			rss_mid = status_field("VmRSS:");
	}
	rss_seq = status_field("VmRSS:");
	printf("embed: %u VMs in a row (every other one with cfg.sandbox: all its threads "
	       "filtered, none of ours), every exit status right (%.1f s each); RSS %ld kB after "
	       "the first, %ld halfway, %ld after the last\n", sequential,
	       (now_ms() - t0) / 1000.0 / sequential, rss0, rss_mid, rss_seq);
	/* Per-VM growth would show between halfway and the end (10 VMs of
	 * the default 20): allow 16 MiB of allocator noise, far below one
	 * guest's RAM (128 MiB). */
	if (rss_seq - rss_mid > 16 * 1024)
		FAIL("RSS grew from %ld to %ld kB over the second half of the VMs in a row",
		     rss_mid, rss_seq);

	/* 2. Four at a time. */
	t0 = now_ms();
	for (j = 0; j < rounds; j++) {
		struct run rs[4];
		pthread_t th[4];

		for (i = 0; i < 4; i++) {
			memset(&rs[i], 0, sizeof(rs[i]));
			rs[i].id = 1000 + j * 4 + i;
			rs[i].want = 150 + (int)i + 4 * (int)j;
			rs[i].sandbox = i % 2;
			if (pthread_create(&th[i], NULL, run_vm, &rs[i]))
				FAIL("pthread_create");
		}
		for (i = 0; i < 4; i++) {
			pthread_join(th[i], NULL);
			check_run(&rs[i], "parallel");
		}
	}
	printf("embed: %u rounds of 4 VMs at once, every exit status right (%.1f s a round)\n",
	       rounds, rounds ? (now_ms() - t0) / 1000.0 / rounds : 0.0);

	/* 3. Stopped mid-boot, from the thread that waits for it. */
	memset(&r, 0, sizeof(r));
	r.id = 2000;
	r.want = 7;
	r.stop_after_ms = 300;
	run_vm(&r);
	check_run(&r, "stop");
	printf("embed: a VM stopped mid-boot with mvm_stop ended as stopped, status 99\n");

	/* 4. Nothing left behind. */
	{
		unsigned fds = count_fds();
		long threads = status_field("Threads:"), rss = status_field("VmRSS:"), t0 = now_ms();

		/* io_uring's workers of a queue thread that ended go away on
		 * their own, a moment later: a leak is a count that stays. */
		while (threads != threads0 && now_ms() - t0 < 5000) {
			usleep(10000);
			threads = status_field("Threads:");
		}

		printf("embed: fds %u (after the first VM %u), threads %ld (%ld), RSS %ld kB\n",
		       fds, fds0, threads, threads0, rss);
		if (fds != fds0)
			FAIL("%u open fds, %u after the first VM: a VM leaks fds", fds, fds0);
		if (threads != threads0)
			FAIL("%ld threads, %ld after the first VM: a VM leaks threads", threads,
			     threads0);
	}
	printf("embed: ok\n");
	return 0;
}
