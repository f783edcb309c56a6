/* Run-time control of a running VM through libmvm, as an orchestrator
 * drives it; the system test tests/system/run_control.sh.
 *
 *   mvm-control KERNEL INITRD IMAGE MD5 IMAGE2 MD5_2 IMAGE3 MD5_3
 *
 * One guest, with every thread of the VM and the calling thread in their
 * seccomp filters (mvm_start_confined), prints a tick with its uptime
 * every 100 ms while it reads the first 2 MiB of its disk (IMAGE, at least 2
 * MiB; MD5 the md5sum of those) through a 512 KiB/s rate limit. The host
 *  1. pauses it mid-read: mvm_pause returns, the state says paused, a
 *     second pause is refused, and for 3 s the guest prints nothing and
 *     its disk takes no request;
 *  2. resumes it: the ticks go on and the guest's clock did not jump by
 *     the pause (where its clocksource is kvm-clock, which the pause
 *     keeps), the read ends with the data the image holds (its md5sum);
 *  3. swaps the disk's image for IMAGE2 (12 MiB; MD5_2 that of its first
 *     2 MiB) while it runs, from a thread of the host program that is not
 *     confined (mvm_disk_swap opens the file): the guest sees the new
 *     size and, once it drops its cache, the new data; a swap to an image
 *     that is busy (the disk's own) is refused and changes nothing; then
 *     resizes that image to 16 MiB (mvm_disk_resize, Cloud Hypervisor's
 *     vm.resize-disk): the file grows, the guest sees the new size and
 *     reads zeros past the old end; a size not of whole sectors is
 *     refused;
 *  4. hot-plugs a disk (IMAGE3, 4 MiB; MD5_3 that of its first MiB) into
 *     its one hot-plug slot while a guest loop reads every hot-plugged
 *     disk: the guest finds it (vdb) with its size and data, a second one
 *     finds no free slot, the cold-plugged disk cannot be removed; then
 *     removes it with the guest's cooperation (attention button, the
 *     guest's pciehp releases it and powers the slot off), plugs it again
 *     (its image was closed and unlocked) and pulls it by surprise in the
 *     middle of the guest's reads: the guest sees it go each time and
 *     runs on;
 *  5. pauses it again and stops it while paused: it ends as stopped, with
 *     the status given, at once.
 * Prints one line per step and "control: ok"; exit 0 on success. */
#include <mvm.h>

#include <errno.h>
#include <semaphore.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The console's last bytes, then what failed (the runner shows the tail). */
#define FAIL(...) do { fprintf(stderr, "console, its last bytes:\n%s\n", \
			       con.len > 1500 ? con.buf + con.len - 1500 : con.buf); \
		       fprintf(stderr, "control: FAIL: " __VA_ARGS__); fputc('\n', stderr); \
		       exit(1); } while (0)

#define READ_BYTES (2u << 20)
#define PAUSE_MS 3000

/* The guest's console as it came, for the steps to look at (the control
 * thread appends, the main thread reads, both under lock). */
static struct {
	pthread_mutex_t lock;
	char buf[64 << 10];
	size_t len;
} con = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void console_out(void *opaque, const uint8_t *buf, size_t len)
{
	(void)opaque;
	pthread_mutex_lock(&con.lock);
	if (len > sizeof(con.buf) - 1 - con.len)
		len = sizeof(con.buf) - 1 - con.len;
	memcpy(con.buf + con.len, buf, len);
	con.len += len;
	con.buf[con.len] = 0;
	pthread_mutex_unlock(&con.lock);
}

static void log_line(void *opaque, enum mvm_log_level level, const char *msg)
{
	(void)opaque;
	fprintf(stderr, "control: mvm %s: %s\n", level == MVM_LOG_ERROR ? "error" :
		level == MVM_LOG_WARNING ? "warning" : "info", msg);
}

static size_t con_len(void)
{
	size_t n;

	pthread_mutex_lock(&con.lock);
	n = con.len;
	pthread_mutex_unlock(&con.lock);
	return n;
}

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&t, &t) && errno == EINTR)
		;
}

/* The last "tick N UPTIME" line that begins before byte `end` of the
 * console (end 0: anywhere): N, and the uptime in *up. -1: none. */
static long last_tick(size_t end, double *up)
{
	long n = -1;
	const char *p;

	pthread_mutex_lock(&con.lock);
	if (!end || end > con.len)
		end = con.len;
	for (p = con.buf; (p = strstr(p, "tick ")) && (size_t)(p - con.buf) < end; p++) {
		long k;
		double u;

		if (sscanf(p, "tick %ld %lf", &k, &u) == 2 && strchr(p, '\n')) {
			n = k;
			*up = u;
		}
	}
	pthread_mutex_unlock(&con.lock);
	return n;
}

/* The first tick line after byte `from`. */
static long next_tick(size_t from, double *up)
{
	long n = -1, k;
	const char *p;
	double u;

	pthread_mutex_lock(&con.lock);
	for (p = con.buf + from; (p = strstr(p, "tick ")); p++)
		if (sscanf(p, "tick %ld %lf", &k, &u) == 2 && strchr(p, '\n')) {
			n = k;
			*up = u;
			break;
		}
	pthread_mutex_unlock(&con.lock);
	return n;
}

static bool con_has(const char *s)
{
	bool r;

	pthread_mutex_lock(&con.lock);
	r = strstr(con.buf, s) != NULL;
	pthread_mutex_unlock(&con.lock);
	return r;
}

/* The guest's line that begins with s (its first 80 bytes), or "none". */
static void con_line(const char *s, char *out, size_t len)
{
	const char *p;

	pthread_mutex_lock(&con.lock);
	p = strstr(con.buf, s);
	snprintf(out, len, "%.*s", p ? (int)strcspn(p, "\r\n") : 4, p ? p : "none");
	pthread_mutex_unlock(&con.lock);
}

/* Wait up to ms for the guest to print s. */
static bool wait_for(const char *s, long ms)
{
	for (; ms > 0; ms -= 20) {
		if (con_has(s))
			return true;
		sleep_ms(20);
	}
	return con_has(s);
}

static uint64_t disk_requests(struct mvm *vm)
{
	struct mvm_queue_stats q;

	if (mvm_get_queue_stats(vm, 0, MVM_ALL, &q, sizeof(q)))
		FAIL("mvm_get_queue_stats failed");
	return q.requests;
}

/* The host program's unconfined thread: the calls that open files or
 * make threads (a swap, a hot-plug and its removal). */
enum op { OP_SWAP, OP_ADD, OP_REMOVE, OP_RESIZE };
static struct {
	sem_t go, done;
	struct mvm *vm;
	enum op op;
	const char *path;
	unsigned disk, flags;
	uint64_t size;
	int ret;
	char err[512];
} swapper;

static void *swap_thread(void *arg)
{
	struct mvm_disk d;

	(void)arg;
	for (;;) {
		while (sem_wait(&swapper.go) && errno == EINTR)
			;
		if (!swapper.vm)
			return NULL;
		swapper.err[0] = 0;
		switch (swapper.op) {
		case OP_SWAP:
			swapper.ret = mvm_disk_swap(swapper.vm, 0, swapper.path, swapper.err,
						    sizeof(swapper.err));
			break;
		case OP_ADD:
			mvm_disk_init(&d, swapper.path);
			swapper.ret = mvm_add_disk(swapper.vm, &d, swapper.err, sizeof(swapper.err));
			break;
		case OP_REMOVE:
			swapper.ret = mvm_disk_remove(swapper.vm, swapper.disk, swapper.flags, 20000,
						      swapper.err, sizeof(swapper.err));
			break;
		case OP_RESIZE:
			swapper.ret = mvm_disk_resize(swapper.vm, swapper.disk, swapper.size,
						      swapper.err, sizeof(swapper.err));
			break;
		}
		sem_post(&swapper.done);
	}
}

static int on_host_thread(struct mvm *vm, enum op op, const char *path, unsigned disk,
			  unsigned flags)
{
	swapper.vm = vm;
	swapper.op = op;
	swapper.path = path;
	swapper.disk = disk;
	swapper.flags = flags;
	sem_post(&swapper.go);
	while (sem_wait(&swapper.done) && errno == EINTR)
		;
	return swapper.ret;
}

static int swap_disk(struct mvm *vm, const char *path)
{
	return on_host_thread(vm, OP_SWAP, path, 0, 0);
}

static int resize_disk(struct mvm *vm, unsigned disk, uint64_t size)
{
	swapper.size = size;
	return on_host_thread(vm, OP_RESIZE, NULL, disk, 0);
}

/* How many times the guest printed s. */
static unsigned con_count(const char *s)
{
	unsigned n = 0;
	const char *p;

	pthread_mutex_lock(&con.lock);
	for (p = con.buf; (p = strstr(p, s)); p++)
		n++;
	pthread_mutex_unlock(&con.lock);
	return n;
}

/* Wait up to ms for the guest to have printed s n times. */
static bool wait_count(const char *s, unsigned n, long ms)
{
	for (; ms > 0 && con_count(s) < n; ms -= 20)
		sleep_ms(20);
	return con_count(s) >= n;
}

/* Step 4: a disk hot-plugged, removed with the guest's cooperation,
 * plugged again and pulled by surprise. */
static void hotplug_steps(struct mvm *vm, const char *image, const char *md5)
{
	char want[160], addr[32], stats[16384];
	long t;

	snprintf(want, sizeof(want), "hp-new vdb %u %.32s", (4u << 20) / 512, md5);
	if (on_host_thread(vm, OP_ADD, image, 0, 0))
		FAIL("hot-plug mvm_add_disk: %s", swapper.err);
	if (mvm_disk_count(vm) != 2)
		FAIL("mvm_disk_count after a hot-plug: %u", mvm_disk_count(vm));
	if (mvm_disk_pci_address(vm, 1, addr, sizeof(addr)) || strcmp(addr, "0000:01:00.0"))
		FAIL("the hot-plugged disk's address: '%s'", addr);
	if (!wait_count(want, 1, 30000))
		FAIL("the guest did not find the hot-plugged disk ('%s') within 30 s", want);
	printf("control: hot-plugged a disk: the guest found it at %s (%s)\n", addr, want);
	if (on_host_thread(vm, OP_ADD, "/nonexistent", 0, 0) != -ENOSPC ||
	    !strstr(swapper.err, "hot-plug slots are taken"))
		FAIL("a second hot-plug into no free slot: %d '%s'", swapper.ret, swapper.err);
	if (on_host_thread(vm, OP_REMOVE, NULL, 0, 0) != -EINVAL ||
	    !strstr(swapper.err, "not on a hot-plug slot"))
		FAIL("removing the cold-plugged disk: %d '%s'", swapper.ret, swapper.err);
	if (mvm_stats_json(vm, stats, sizeof(stats)) < 0 || !strstr(stats, "\"bus\":1"))
		FAIL("--stats does not show the disk behind its port: %.400s", stats);

	t = now_ms();
	if (on_host_thread(vm, OP_REMOVE, NULL, 1, 0))
		FAIL("mvm_disk_remove: %s", swapper.err);
	t = now_ms() - t;
	if (!wait_count("hp-gone vdb", 1, 10000))
		FAIL("the guest did not see the disk go");
	if (on_host_thread(vm, OP_REMOVE, NULL, 1, 0) != -ENODEV)
		FAIL("a second removal: %d '%s'", swapper.ret, swapper.err);
	if (mvm_stats_json(vm, stats, sizeof(stats)) < 0 || strstr(stats, "\"bus\":1"))
		FAIL("--stats still shows the removed disk: %.400s", stats);
	printf("control: removed it with the guest's cooperation in %ld ms (attention button, "
	       "the guest powered the slot off); the guest saw it go\n", t);

	/* Its image was closed and unlocked: it goes in again. */
	if (on_host_thread(vm, OP_ADD, image, 0, 0))
		FAIL("hot-plug again: %s", swapper.err);
	if (!wait_count(want, 2, 30000))
		FAIL("the guest did not find the disk plugged again");
	/* The guest's loop reads it: pull it in the middle of that. */
	sleep_ms(300);
	t = now_ms();
	if (on_host_thread(vm, OP_REMOVE, NULL, 2, MVM_DISK_REMOVE_SURPRISE))
		FAIL("surprise mvm_disk_remove: %s", swapper.err);
	t = now_ms() - t;
	if (!wait_count("hp-gone vdb", 2, 10000))
		FAIL("the guest did not see the disk pulled");
	printf("control: plugged it again and pulled it by surprise in %ld ms mid-read; the "
	       "guest saw it go\n", t);
}

static void expect_state(struct mvm *vm, int want, const char *when)
{
	int st = mvm_get_state(vm);

	if (st != want)
		FAIL("%s: state %s, expected %s", when, mvm_state_name(st), mvm_state_name(want));
}

int main(int argc, char **argv)
{
	char err[512], want_sum[128], want_swap[160], want_resize[64], cmdline[2048], stats[8192];
	pthread_t swap_th;
	long t_swap;
	struct mvm_config cfg;
	struct mvm_disk disk;
	struct mvm_exit ex;
	struct mvm_stats st;
	struct mvm *vm;
	uint64_t req;
	size_t at_pause, at_resume;
	double up_before = 0, up_after = 0;
	long t_before, t_after;
	int r;

	if (argc != 9) {
		fprintf(stderr, "usage: mvm-control KERNEL INITRD IMAGE MD5 IMAGE2 MD5_2 IMAGE3 "
			"MD5_3\n");
		return 2;
	}
	/* Unbuffered: a buffered stdout asks fstat(2) on its first line, which
	 * the confined thread may not. */
	setvbuf(stdout, NULL, _IONBF, 0);
	snprintf(want_sum, sizeof(want_sum), "dd-done %.64s", argv[4]);
	snprintf(want_swap, sizeof(want_swap), "swapped %u %.64s", (12u << 20) / 512, argv[6]);
	if (sem_init(&swapper.go, 0, 0) || sem_init(&swapper.done, 0, 0) ||
	    pthread_create(&swap_th, NULL, swap_thread, NULL))
		FAIL("cannot start the swap thread");

	mvm_config_init(&cfg);
	cfg.kernel = argv[1];
	cfg.initrd = argv[2];
	snprintf(cmdline, sizeof(cmdline), "quiet -- echo cs "
		 "$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource); "
		 "(echo dd-done $(dd if=/dev/vda bs=4096 count=%u 2>/dev/null | md5sum)) & "
		 "(s0=$(cat /sys/block/vda/size); while [ $(cat /sys/block/vda/size) = $s0 ]; "
		 "do sleep 0.1; done; echo 3 >/proc/sys/vm/drop_caches; s1=$(cat /sys/block/vda/size); "
		 "echo swapped $s1 $(dd if=/dev/vda bs=4096 count=%u 2>/dev/null | "
		 "md5sum); while [ $(cat /sys/block/vda/size) = $s1 ]; "
		 "do sleep 0.1; done; echo resized $(cat /sys/block/vda/size) $(dd if=/dev/vda "
		 "bs=4096 skip=4080 count=16 2>/dev/null | wc -c) $(dd if=/dev/vda bs=4096 "
		 "skip=4080 count=16 2>/dev/null | tr -d '\\000' | wc -c)) & "
		 "(p=; while :; do c=; for b in /sys/block/vd[b-z]; do [ -e $b ] && "
		 "c=$c,${b##*/}; done; for d in $(echo $c | tr , ' '); do case $p, in *,$d,*) ;; "
		 "*) echo hp-new $d $(cat /sys/block/$d/size) $(dd if=/dev/$d bs=4096 count=256 "
		 "2>/dev/null | md5sum);; esac; done; for d in $(echo $p | tr , ' '); do case $c, "
		 "in *,$d,*) ;; *) echo hp-gone $d;; esac; done; p=$c; sleep 0.1; done) & "
		 "(while :; do [ -b /dev/vdb ] && dd if=/dev/vdb of=/dev/null bs=64k count=16 "
		 "iflag=direct 2>/dev/null; sleep 0.02; done) & "
		 "i=0; while [ $i -lt 600 ]; do echo tick $i $(cut -d' ' -f1 /proc/uptime); "
		 "i=$((i+1)); sleep 0.1; done; wait; exit 7", READ_BYTES / 4096, READ_BYTES / 4096);
	if (strlen(cmdline) >= sizeof(cmdline) - 1)
		FAIL("the guest's command line does not fit");
	cfg.cmdline = cmdline;
	cfg.mem = 256 << 20;
	cfg.console_fn = console_out;
	cfg.log_fn = log_line;
	cfg.sandbox = true;
	cfg.id = "ctl";
	cfg.hotplug_slots = 1;
	if (mvm_create(&cfg, &vm, err, sizeof(err)))
		FAIL("mvm_create: %s", err);
	expect_state(vm, MVM_VM_CREATED, "created");
	if (mvm_pause(vm, err, sizeof(err)) != -EINVAL || !strstr(err, "not been started"))
		FAIL("mvm_pause before the start: '%s'", err);
	mvm_disk_init(&disk, argv[3]);
	/* 512 KiB/s: the read takes 4 s, so the pause lands in it. */
	disk.rate.bw.size = 64 << 10;
	disk.rate.bw.refill_time_ms = 125;
	if (mvm_add_disk(vm, &disk, err, sizeof(err)))
		FAIL("mvm_add_disk: %s", err);
	if (mvm_start_confined(vm, err, sizeof(err)))
		FAIL("mvm_start_confined: %s", err);
	expect_state(vm, MVM_VM_RUNNING, "started");

	/* 1. Paused mid-read. */
	if (!wait_for("tick 10 ", 120000))
		FAIL("no tick 10 within 120 s");
	if (con_has("dd-done"))
		FAIL("the read ended before the pause (no rate limit?)");
	if (mvm_pause(vm, err, sizeof(err)))
		FAIL("mvm_pause: %s", err);
	expect_state(vm, MVM_VM_PAUSED, "paused");
	if (mvm_pause(vm, err, sizeof(err)) != -EALREADY)
		FAIL("a second mvm_pause was not refused: '%s'", err);
	at_pause = con_len();
	req = disk_requests(vm);
	if (mvm_stats_json(vm, stats, sizeof(stats)) < 0 || !strstr(stats, "\"state\":\"paused\""))
		FAIL("--stats while paused does not say so: %.300s", stats);
	sleep_ms(PAUSE_MS);
	if (con_len() != at_pause)
		FAIL("the guest printed %zu bytes while paused", con_len() - at_pause);
	if (disk_requests(vm) != req)
		FAIL("the disk took %llu requests while paused",
		     (unsigned long long)(disk_requests(vm) - req));
	printf("control: paused mid-read for %d ms: no output, no disk request, a second "
	       "pause refused\n", PAUSE_MS);

	/* 2. Resumed: the ticks go on, the clock did not jump, the read ends right. */
	if (mvm_resume(vm, err, sizeof(err)))
		FAIL("mvm_resume: %s", err);
	expect_state(vm, MVM_VM_RUNNING, "resumed");
	if (mvm_resume(vm, err, sizeof(err)) != -EALREADY)
		FAIL("mvm_resume of a running VM was not refused: '%s'", err);
	at_resume = con_len();
	if (!wait_for(want_sum, 60000)) {
		mvm_stats_json(vm, stats, sizeof(stats));
		FAIL("the read did not end with '%s' within 60 s of the resume; stats %s", want_sum,
		     stats);
	}
	t_before = last_tick(at_resume, &up_before);
	t_after = next_tick(at_resume, &up_after);
	if (t_before < 0 || t_after != t_before + 1)
		FAIL("ticks around the pause: %ld then %ld", t_before, t_after);
	printf("control: resumed: tick %ld at uptime %.2f, tick %ld at %.2f; the read ended "
	       "with the image's data (%s)\n", t_before, up_before, t_after, up_after, want_sum);
	if (con_has("cs kvm-clock")) {
		/* A tick is 0.1 s of sleep plus the guest's own slowness; the
		 * pause was 3 s. */
		if (up_after - up_before > 2.0)
			FAIL("the guest's clock jumped %.2f s over a %d ms pause", up_after - up_before,
			     PAUSE_MS);
		printf("control: the guest's kvm-clock went on from where it stood (%.2f s "
		       "between two ticks over a %d ms pause)\n", up_after - up_before, PAUSE_MS);
	} else {
		printf("control: the guest's clocksource is not kvm-clock: its jump not checked\n");
	}
	if (mvm_get_stats(vm, &st, sizeof(st)))
		FAIL("mvm_get_stats");
	if (st.pauses != 1 || st.paused_us < PAUSE_MS * 1000ull)
		FAIL("stats: %llu pauses, %llu us paused", (unsigned long long)st.pauses,
		     (unsigned long long)st.paused_us);

	/* 3. The image swapped while it runs. */
	if (!wait_for("tick 30 ", 60000))
		FAIL("no tick 30");
	if (swap_disk(vm, argv[3]) != -EBUSY || !strstr(swapper.err, argv[3]))
		FAIL("a swap to the disk's own (busy) image: %d '%s'", swapper.ret, swapper.err);
	expect_state(vm, MVM_VM_RUNNING, "after a refused swap");
	t_swap = now_ms();
	if (swap_disk(vm, argv[5]))
		FAIL("mvm_disk_swap: %s", swapper.err);
	t_swap = now_ms() - t_swap;
	expect_state(vm, MVM_VM_RUNNING, "after the swap");
	if (!wait_for(want_swap, 60000))
		FAIL("the guest did not see the new image ('%s') within 60 s", want_swap);
	printf("control: swapped the image while it ran (mvm_disk_swap took %ld ms): the guest "
	       "saw the new size and data (%s); a swap to a busy image was refused\n", t_swap,
	       want_swap);
	/* The VM is paused for the swap: it must not take long (it waited
	 * for a stuck thread's 5 s once). */
	if (t_swap > 2000)
		FAIL("mvm_disk_swap took %ld ms", t_swap);
	/* The swapped-in image resized: 12 MiB to 16, the new 4 MiB zeros. */
	if (resize_disk(vm, 0, (16u << 20) + 100) != -EINVAL ||
	    !strstr(swapper.err, "not a non-zero multiple of 512"))
		FAIL("a resize to a size not of whole sectors: %d '%s'", swapper.ret, swapper.err);
	if (resize_disk(vm, 0, 16u << 20))
		FAIL("mvm_disk_resize: %s", swapper.err);
	expect_state(vm, MVM_VM_RUNNING, "after the resize");
	/* The last 64 KiB of the new 4 MiB: read, all zeros. */
	snprintf(want_resize, sizeof(want_resize), "resized %u %u 0", (16u << 20) / 512, 64u << 10);
	if (!wait_for(want_resize, 60000)) {
		con_line("resized ", err, 81);
		FAIL("the guest did not see the resized image ('%s') within 60 s: '%s'",
		     want_resize, err);
	}
	/* The file's size: run_control.sh's to check (this thread may not stat). */
	printf("control: resized the image to 16 MiB while it ran: the guest saw "
	       "the new size and zeros past the old end (%s); a size of 16 MiB + 100 was "
	       "refused\n", want_resize);

	/* 4. Hot-plug. */
	hotplug_steps(vm, argv[7], argv[8]);

	/* 5. Stopped while paused. */
	if (!wait_for("tick 60 ", 60000))
		FAIL("no tick 60");
	if (mvm_pause(vm, err, sizeof(err)))
		FAIL("second mvm_pause: %s", err);
	if (mvm_stop(vm, 42))
		FAIL("mvm_stop");
	r = mvm_wait(vm, 20000, &ex, sizeof(ex));
	if (r)
		FAIL("mvm_wait after a stop while paused: %s", strerror(-r));
	if (ex.reason != MVM_EXIT_STOPPED || ex.status != 42)
		FAIL("stopped while paused: reason %d status %d (%s)", ex.reason, ex.status,
		     ex.message);
	expect_state(vm, MVM_VM_ENDED, "stopped");
	if (mvm_resume(vm, err, sizeof(err)) != -ESHUTDOWN)
		FAIL("mvm_resume of an ended VM: '%s'", err);
	printf("control: paused again and stopped while paused: it ended as stopped, status 42\n");
	mvm_destroy(vm);
	swapper.vm = NULL;
	sem_post(&swapper.go);
	pthread_join(swap_th, NULL);
	printf("control: ok\n");
	return 0;
}
