/* The command line: options, defaults, kernel command-line composition,
 * and every bad input — through cli_* and through the real ./mvm binary
 * (one "mvm: ..." line, exit status 2, nothing started). */
#include "tests/unit/check.h"
#include "arch/arch.h"
#include "vmm/cli/cli.h"
#include "vmm/base/util.h"
#include "vmm/base/byteorder.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char err[512];

#define PARSE(cfg, ...)                                                          \
	({                                                                        \
		char *argv_[] = { "mvm", __VA_ARGS__, NULL };                     \
		cli_parse((int)ARRAY_SIZE(argv_) - 1, argv_, (cfg), err, sizeof(err)); \
	})

TEST(defaults_are_one_cpu_256m)
{
	struct cli_config c;
	char *argv[] = { "mvm", NULL };

	CHECK_EQ(cli_parse(1, argv, &c, err, sizeof(err)), 0);
	CHECK_EQ(c.vm.cpus, 1);
	CHECK_EQ(c.vm.mem, 256 * MiB);
	CHECK(c.vm.kernel == NULL && c.vm.initrd == NULL && c.vm.cmdline == NULL);
	CHECK(!c.stats && !c.help && !c.version);
}

TEST(every_option_separate_value)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--kernel", "k", "--initrd", "i", "--cmdline", "-- exit 3",
		       "--cpus", "4", "--mem", "1G", "--stats"), 0);
	CHECK_STR(c.vm.kernel, "k");
	CHECK_STR(c.vm.initrd, "i");
	CHECK_STR(c.vm.cmdline, "-- exit 3");
	CHECK_EQ(c.vm.cpus, 4);
	CHECK_EQ(c.vm.mem, GiB);
	CHECK(c.stats);
}

TEST(every_option_equals_value)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--kernel=k", "--initrd=i", "--cmdline=quiet", "--cpus=32",
		       "--mem=5G"), 0);
	CHECK_STR(c.vm.kernel, "k");
	CHECK_STR(c.vm.initrd, "i");
	CHECK_STR(c.vm.cmdline, "quiet");
	CHECK_EQ(c.vm.cpus, 32);
	CHECK_EQ(c.vm.mem, 5 * GiB);
}

/* --id goes to the library as it is: mvm_create checks it. */
TEST(id_names_the_vm)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--cpus", "1"), 0);
	CHECK(c.vm.id == NULL);
	CHECK_EQ(PARSE(&c, "--id", "web1"), 0);
	CHECK_STR(c.vm.id, "web1");
}

TEST(sandbox_is_on_unless_turned_off)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--cpus", "1"), 0);
	CHECK(c.vm.sandbox);
	CHECK(!c.chroot_dir && !c.ids_set);
	CHECK_EQ(PARSE(&c, "--sandbox=off"), 0);
	CHECK(!c.vm.sandbox);
	CHECK_EQ(PARSE(&c, "--sandbox", "on"), 0);
	CHECK(c.vm.sandbox);
	CHECK_EQ(PARSE(&c, "--sandbox=maybe"), -EINVAL);
	CHECK_STR(err, "--sandbox 'maybe': give on or off");
}

TEST(pvpanic_is_on_unless_turned_off)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--cpus", "1"), 0);
	CHECK(c.vm.pvpanic);
	CHECK_EQ(PARSE(&c, "--pvpanic=off"), 0);
	CHECK(!c.vm.pvpanic);
	CHECK_EQ(PARSE(&c, "--pvpanic", "on"), 0);
	CHECK(c.vm.pvpanic);
	CHECK_EQ(PARSE(&c, "--pvpanic=1"), -EINVAL);
	CHECK_STR(err, "--pvpanic '1': give on or off");
}

TEST(chroot_and_ids)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--chroot", "/var/empty", "--uid", "1000", "--gid=100"), 0);
	CHECK_STR(c.chroot_dir, "/var/empty");
	CHECK(c.ids_set);
	CHECK_EQ(c.uid, 1000);
	CHECK_EQ(c.gid, 100);
	CHECK_EQ(PARSE(&c, "--uid", "1000"), -EINVAL);
	CHECK_STR(err, "--uid given without --gid; give both");
	CHECK_EQ(PARSE(&c, "--gid", "0"), -EINVAL);
	CHECK_STR(err, "--gid given without --uid; give both");
	CHECK_EQ(PARSE(&c, "--uid", "nobody", "--gid", "1"), -EINVAL);
	CHECK_STR(err, "--uid 'nobody': not a numeric id; give a number like 65534");
	CHECK_EQ(PARSE(&c, "--chroot="), -EINVAL);
	CHECK_STR(err, "--chroot: empty path; give a directory");
}

TEST(help_and_version)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--help"), 0);
	CHECK(c.help);
	CHECK_EQ(PARSE(&c, "--version"), 0);
	CHECK(c.version);
}

TEST(parse_can_run_twice)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--cpus", "2"), 0);
	CHECK_EQ(PARSE(&c, "--cpus", "3"), 0);
	CHECK_EQ(c.vm.cpus, 3);
}

TEST(bad_cpus)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--cpus", "0"), -EINVAL);
	CHECK(strstr(err, "--cpus '0'") && strstr(err, "1 to 254"));
	CHECK_EQ(PARSE(&c, "--cpus", "255"), -EINVAL);
	CHECK(strstr(err, "'255'"));
	CHECK_EQ(PARSE(&c, "--cpus", "two"), -EINVAL);
	CHECK(strstr(err, "not a number"));
	CHECK_EQ(PARSE(&c, "--cpus", "-1"), -EINVAL);
}

/* --hotplug-slots N; each slot's disk device has --queues' queues. */
TEST(hotplug_slots_fill_the_config)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--cpus", "1"), 0);
	CHECK_EQ(c.vm.hotplug_slots, 0);
	CHECK_EQ(c.vm.hotplug_queues, 1);
	CHECK_EQ(PARSE(&c, "--hotplug-slots", "3", "--queues", "4"), 0);
	CHECK_EQ(c.vm.hotplug_slots, 3);
	CHECK_EQ(c.vm.hotplug_queues, 4);
	CHECK_EQ(PARSE(&c, "--hotplug-slots=9"), -EINVAL);
	CHECK_STR(err, "--hotplug-slots '9': out of range; give a number from 0 to 8");
	CHECK_EQ(PARSE(&c, "--hotplug-slots", "x"), -EINVAL);
	CHECK(strstr(err, "not a number"));
}

TEST(bad_mem)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--mem", "0"), -EINVAL);
	CHECK(strstr(err, "--mem '0'") && strstr(err, "too small"));
	CHECK_EQ(PARSE(&c, "--mem", "12Q"), -EINVAL);
	CHECK(strstr(err, "'12Q'") && strstr(err, "malformed"));
	CHECK_EQ(PARSE(&c, "--mem", "4k"), -EINVAL);
	CHECK_EQ(PARSE(&c, "--mem", "99999999999999999999"), -EINVAL);
	CHECK(strstr(err, "too large"));
	CHECK_EQ(PARSE(&c, "--mem", "16777217"), -EINVAL);
	CHECK(strstr(err, "multiple of 4 KiB"));
	CHECK_EQ(PARSE(&c, "--mem", "16M"), 0);
}

TEST(unknown_option_missing_value_stray_argument)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--frobnicate"), -EINVAL);
	CHECK(strstr(err, "unknown option '--frobnicate'"));
	CHECK_EQ(PARSE(&c, "-x"), -EINVAL);
	CHECK(strstr(err, "unknown option '-x'"));
	CHECK_EQ(PARSE(&c, "--cpus"), -EINVAL);
	CHECK(strstr(err, "--cpus") && strstr(err, "needs a value"));
	CHECK_EQ(PARSE(&c, "bzImage"), -EINVAL);
	CHECK(strstr(err, "unexpected argument 'bzImage'"));
	CHECK_EQ(PARSE(&c, "--kernel="), -EINVAL);
}

/* --- files ------------------------------------------------------------- */

static char tmpdir[64];

static void mk_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/mvm-test-cli.XXXXXX");
	CHECK(mkdtemp(tmpdir) != NULL);
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	CHECK(fd >= 0);
	CHECK_EQ(write(fd, data, len), (long long)len);
	close(fd);
}

/* A minimal bzImage header: protocol 2.15, 64-bit entry, cmdline_size 255,
 * initrd_addr_max 4 MiB. */
static void write_fake_bzimage(const char *path)
{
	static uint8_t k[8192];

	memset(k, 0, sizeof(k));
	k[0x1f1] = 1;
	k[0x1fe] = 0x55; k[0x1ff] = 0xaa;
	memcpy(k + 0x202, "HdrS", 4);
	k[0x206] = 0x0f; k[0x207] = 0x02;
	k[0x211] = 0x01;                         /* LOADED_HIGH */
	k[0x22c] = 0x00; k[0x22d] = 0x00; k[0x22e] = 0x40;   /* initrd_addr_max 4 MiB */
	k[0x230] = 0x00; k[0x232] = 0x20;        /* kernel_alignment 2 MiB */
	k[0x236] = 0x01;                         /* XLF_KERNEL_64 */
	k[0x238] = 255;                          /* cmdline_size */
	k[0x25a] = 0x00; k[0x25b] = 0x01;        /* pref_address 16 MiB */
	k[0x262] = 0x10;                         /* init_size 1 MiB */
	write_file(path, k, sizeof(k));
}

TEST(default_guest_missing_says_make_guest)
{
	struct cli_config c;

	mk_tmpdir();
	CHECK_EQ(PARSE(&c, "--cpus", "1"), 0);
	CHECK_EQ(cli_default_guest(&c, tmpdir, err, sizeof(err)), -ENOENT);
	CHECK(strstr(err, "make guest"));
	rmdir(tmpdir);
}

TEST(default_guest_found_next_to_binary)
{
	struct cli_config c;
	char path[256];

	mk_tmpdir();
	snprintf(path, sizeof(path), "%s/build", tmpdir); mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/build/guest", tmpdir); mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/build/guest/bzImage", tmpdir); write_file(path, "x", 1);
	snprintf(path, sizeof(path), "%s/build/guest/initramfs.cpio.gz", tmpdir); write_file(path, "x", 1);
	CHECK_EQ(PARSE(&c, "--cpus", "1"), 0);
	CHECK_EQ(cli_default_guest(&c, tmpdir, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/build/guest/bzImage", tmpdir);
	CHECK_STR(c.vm.kernel, path);
	CHECK(strstr(c.vm.initrd, "/build/guest/initramfs.cpio.gz"));
	/* An explicit --kernel wins and gets no default initrd. */
	CHECK_EQ(PARSE(&c, "--kernel", "/k"), 0);
	CHECK_EQ(cli_default_guest(&c, tmpdir, err, sizeof(err)), 0);
	CHECK_STR(c.vm.kernel, "/k");
	CHECK(c.vm.initrd == NULL);
}

/* --- the real binary ----------------------------------------------------- */

static const char *mvm_bin(void)
{
	const char *b = getenv("MVM");

	if (!b)
		b = "./mvm";
	if (access(b, X_OK)) {
		printf("skip: %s not built\n", b);
		exit(77);
	}
	return b;
}

/* Run mvm with args; returns the exit status, stderr+stdout in out. As
 * root, with_ids adds --uid 0 --gid 0 (the sandbox refuses root without). */
static int run_mvm_ids(char *out, size_t outlen, const char *const *args, bool with_ids)
{
	const char *argv[32];
	int p[2], st;
	size_t n = 0, i = 0;
	pid_t pid;

	argv[i++] = mvm_bin();
	if (with_ids && geteuid() == 0) {
		argv[i++] = "--uid=0";
		argv[i++] = "--gid=0";
	}
	for (; *args && i < 31; args++)
		argv[i++] = *args;
	argv[i] = NULL;
	CHECK(pipe(p) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		execv(argv[0], (char **)argv);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		ssize_t r = read(p[0], out + n, outlen - 1 - n);
		if (r <= 0)
			break;
		n += r;
	}
	out[n] = '\0';
	close(p[0]);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static int run_mvm(char *out, size_t outlen, const char *const *args)
{
	return run_mvm_ids(out, outlen, args, true);
}

/* Exit 2 with exactly one line "mvm: ...<want>...". */
static void expect_usage_error(const char *want, const char *const *args)
{
	char out[2048];
	int rc = run_mvm(out, sizeof(out), args);

	if (rc != 2 || strncmp(out, "mvm: ", 5) || !strstr(out, want) ||
	    strchr(out, '\n') != out + strlen(out) - 1) {
		fprintf(stderr, "rc=%d, output: %s(want '%s')\n", rc, out, want);
		CHECK(0);
	}
}

#define EXPECT_USAGE(want, ...) \
	expect_usage_error(want, (const char *const[]){ __VA_ARGS__, NULL })

TEST(binary_rejects_bad_options)
{
	EXPECT_USAGE("--cpus '0'", "--cpus", "0");
	EXPECT_USAGE("--mem '0'", "--mem", "0");
	EXPECT_USAGE("--mem '12Q'", "--mem", "12Q");
	EXPECT_USAGE("unknown option '--bogus'", "--bogus");
	EXPECT_USAGE("--cpus '255'", "--cpus=255");
}

TEST(binary_rejects_bad_files)
{
	char k[128], junk[128], big[128];
	static uint8_t blob[5 << 20];

	mvm_bin();
	mk_tmpdir();
	snprintf(k, sizeof(k), "%s/bzImage", tmpdir);
	snprintf(junk, sizeof(junk), "%s/junk", tmpdir);
	snprintf(big, sizeof(big), "%s/initrd", tmpdir);
	write_fake_bzimage(k);
	write_file(junk, "this is neither a bzImage nor an ELF file, just text", 48);
	memset(blob, 0x5a, sizeof(blob));
	write_file(big, blob, sizeof(blob));

	EXPECT_USAGE("--kernel '/nonexistent/k'", "--kernel", "/nonexistent/k");
	EXPECT_USAGE("--initrd '/nonexistent/i'", "--kernel", k, "--initrd", "/nonexistent/i");
	EXPECT_USAGE("junk", "--kernel", junk);
	/* 5 MiB initrd above the kernel's 4 MiB initrd_addr_max. */
	EXPECT_USAGE("initrd", "--kernel", k, "--initrd", big);
	/* cmdline_size 255 */
	memset(blob, 'a', 300);
	blob[300] = '\0';
	EXPECT_USAGE("ommand line", "--kernel", k, "--cmdline", (char *)blob);
	EXPECT_USAGE("RAM + swap", "--kernel", k, "--mem", "1000G");
	unlink(k); unlink(junk); unlink(big);
	rmdir(tmpdir);
}

/* "Unreadable" as root: a path that cannot be read as a file (a directory);
 * permission bits do not stop root. */
TEST(binary_rejects_directory_as_kernel_or_initrd)
{
	char k[128];

	mvm_bin();
	mk_tmpdir();
	snprintf(k, sizeof(k), "%s/bzImage", tmpdir);
	write_fake_bzimage(k);
	EXPECT_USAGE("not a regular file", "--kernel", tmpdir);
	EXPECT_USAGE("not a regular file", "--kernel", k, "--initrd", tmpdir);
	unlink(k);
	rmdir(tmpdir);
}

/* A well-formed x86-64 ELF executable without the Xen PVH entry note is no
 * kernel mvm can boot. */
TEST(binary_rejects_elf_without_pvh_note)
{
	static uint8_t e[0x1100];
	char k[128];

	mvm_bin();
	mk_tmpdir();
	memset(e, 0, sizeof(e));
	memcpy(e, "\x7f" "ELF", 4);
	e[4] = 2; e[5] = 1; e[6] = 1;                 /* ELFCLASS64, LSB, EV_CURRENT */
	le16_store(e + 16, 2);                        /* ET_EXEC */
	le16_store(e + 18, 62);                       /* EM_X86_64 */
	le32_store(e + 20, 1);
	le64_store(e + 24, 0x1000000);                /* e_entry */
	le64_store(e + 32, 64);                       /* e_phoff */
	le16_store(e + 52, 64);                       /* e_ehsize */
	le16_store(e + 54, 56);                       /* e_phentsize */
	le16_store(e + 56, 1);                        /* e_phnum */
	le32_store(e + 64, 1);                        /* PT_LOAD */
	le32_store(e + 68, 5);
	le64_store(e + 72, 0x1000);                   /* p_offset */
	le64_store(e + 80, 0x1000000);                /* p_vaddr */
	le64_store(e + 88, 0x1000000);                /* p_paddr */
	le64_store(e + 96, 0x100);                    /* p_filesz */
	le64_store(e + 104, 0x100);                   /* p_memsz */
	le64_store(e + 112, 0x1000);                  /* p_align */
	snprintf(k, sizeof(k), "%s/vmlinux", tmpdir);
	write_file(k, e, sizeof(e));
	EXPECT_USAGE("PVH", "--kernel", k);
	unlink(k);
	rmdir(tmpdir);
}

TEST(binary_without_kvm_says_use_the_harness)
{
	char k[128];

	if (access("/dev/kvm", F_OK) == 0) {
		printf("skip: this host has /dev/kvm\n");
		exit(77);
	}
	mvm_bin();
	mk_tmpdir();
	snprintf(k, sizeof(k), "%s/bzImage", tmpdir);
	write_fake_bzimage(k);
	EXPECT_USAGE("/dev/kvm not found: this host has no KVM; run mvm under the nested "
		     "harness: tests/with-kvm ./mvm ...", "--kernel", k);
	unlink(k);
	rmdir(tmpdir);
}

TEST(binary_help_and_version)
{
	char out[16384];

	CHECK_EQ(run_mvm(out, sizeof(out), (const char *const[]){ "--help", NULL }), 0);
	CHECK(strstr(out, "--kernel") && strstr(out, "Ctrl-A x"));
	CHECK_EQ(run_mvm(out, sizeof(out), (const char *const[]){ "--version", NULL }), 0);
	CHECK(strncmp(out, "mvm ", 4) == 0);
}

/* --- disks --------------------------------------------------------------- */

TEST(disks_in_order_with_global_queues_and_transport)
{
	struct cli_config c;

	/* --queues/--transport apply to every disk without its own value,
	 * wherever they stand (the README's `--disk img --queues 4`). */
	CHECK_EQ(PARSE(&c, "--disk", "a.img", "--disk", "b.img,ro,queues=2,transport=pci",
		       "--queues", "4", "--transport", "mmio"), 0);
	CHECK_EQ(c.ndisks, 2);
	CHECK_STR(c.disks[0].path, "a.img");
	CHECK_EQ(c.disks[0].queues, 4);
	CHECK_EQ(c.disks[0].transport, MVM_TRANSPORT_MMIO);
	CHECK(c.disks[0].packed && !c.disks[0].ro);
	CHECK_STR(c.disks[1].path, "b.img");
	CHECK_EQ(c.disks[1].queues, 2);
	CHECK_EQ(c.disks[1].transport, MVM_TRANSPORT_PCI);
	CHECK(c.disks[1].ro);
	CHECK_EQ(cli_max_queues(&c), 4);
}

/* --io-threads is a default like --queues; a disk's own io-threads= wins;
 * without either the device decides (0). */
TEST(io_threads_global_and_per_disk)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--disk", "a.img,queues=4", "--disk", "b.img,io-threads=3",
		       "--io-threads", "2"), 0);
	CHECK_EQ(c.disks[0].io_threads, 2);
	CHECK_EQ(c.disks[1].io_threads, 3);
	CHECK_EQ(PARSE(&c, "--disk", "a.img,queues=4"), 0);
	CHECK_EQ(c.disks[0].io_threads, 0);
	CHECK_EQ(PARSE(&c, "--io-threads", "0"), -EINVAL);
	CHECK(strstr(err, "--io-threads '0'") && strstr(err, "1 to 64"));
	CHECK_EQ(PARSE(&c, "--disk", "a.img,io-threads=x"), -EINVAL);
	CHECK(strstr(err, "io-threads='x'") && strstr(err, "not a number"));
}

/* A disk's transport keys and its block keys fill one struct mvm_disk;
 * without transport= or --transport, the library's choice stands. */
TEST(disk_transport_and_block_keys_in_one_struct)
{
	struct cli_config c;
	struct mvm_disk dflt;

	CHECK_EQ(PARSE(&c, "--disk", "x.img,packed=off,serial=abc,transport=mmio,cache=none"), 0);
	CHECK(!c.disks[0].packed);
	CHECK_EQ(c.disks[0].transport, MVM_TRANSPORT_MMIO);
	CHECK_STR(c.disks[0].serial, "abc");
	CHECK_EQ(c.disks[0].cache, MVM_CACHE_NONE);
	CHECK_EQ(c.disks[0].queues, 1);
	mvm_disk_init(&dflt, NULL);
	CHECK_EQ(PARSE(&c, "--disk", "x.img"), 0);
	CHECK_EQ(c.disks[0].transport, dflt.transport);
	CHECK_EQ(c.disks[0].size, sizeof(struct mvm_disk));
	CHECK_EQ(PARSE(&c, "--transport", "ccw", "--disk", "x.img", "--disk", "y.img,transport=pci"), 0);
	CHECK_EQ(c.disks[0].transport, MVM_TRANSPORT_CCW);
	CHECK_EQ(c.disks[1].transport, MVM_TRANSPORT_PCI);
}

/* fixed-buffers= registers guest RAM with the disk's rings: off unless
 * asked, and anything but on or off is refused with what to give. */
TEST(disk_fixed_buffers_is_off_unless_asked)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--disk", "a.img", "--disk", "b.img,fixed-buffers=on,cache=none",
		       "--disk", "c.img,fixed-buffers=off"), 0);
	CHECK(!c.disks[0].fixed_buffers);
	CHECK(c.disks[1].fixed_buffers);
	CHECK(!c.disks[2].fixed_buffers);
	CHECK_EQ(PARSE(&c, "--disk", "a.img,fixed-buffers=yes"), -EINVAL);
	CHECK(strstr(err, "fixed-buffers 'yes'") && strstr(err, "fixed-buffers=on"));
	CHECK_EQ(PARSE(&c, "--disk", "a.img,fixed-buffers"), -EINVAL);
}

TEST(bad_disk_options)
{
	struct cli_config c;
	char *many[2 + 2 * (MVM_MAX_DISKS + 1)];
	int i, n = 0;

	CHECK_EQ(PARSE(&c, "--disk", "x.img,transport=virtio"), -EINVAL);
	CHECK(strstr(err, "transport 'virtio'") && strstr(err, "mmio"));
	CHECK_EQ(PARSE(&c, "--disk", "x.img,packed=maybe"), -EINVAL);
	CHECK(strstr(err, "packed 'maybe'"));
	CHECK_EQ(PARSE(&c, "--disk", "x.img,bogus=1"), -EINVAL);
	CHECK_EQ(PARSE(&c, "--transport", "isa"), -EINVAL);
	CHECK(strstr(err, "--transport 'isa'") && strstr(err, "ccw"));
	CHECK_EQ(PARSE(&c, "--queues", "0"), -EINVAL);
	CHECK_EQ(PARSE(&c, "--queues", "65"), -EINVAL);
	CHECK_EQ(PARSE(&c, "--disk", "x.img", "--queues", "4x"), -EINVAL);
	many[n++] = "mvm";
	for (i = 0; i <= MVM_MAX_DISKS; i++) {
		many[n++] = "--disk";
		many[n++] = "x.img";
	}
	many[n] = NULL;
	CHECK_EQ(cli_parse(n, many, &c, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "at most 16"));
}

/* Found by tests/fuzz/fuzz_cli.c: a bad value with a newline in it made a
 * two-line error, where the contract is one "mvm: ..." line. Control
 * characters in a quoted value show as '?'. */
TEST(bad_value_with_newline_is_still_one_line)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--transport", "pci\nmmio"), -EINVAL);
	CHECK(strchr(err, '\n') == NULL);
	CHECK(strstr(err, "--transport 'pci?mmio'"));
	CHECK_EQ(PARSE(&c, "--disk", "x.img,cache=\r\nnone\x7f"), -EINVAL);
	CHECK(strchr(err, '\n') == NULL && strchr(err, '\r') == NULL && strchr(err, 0x7f) == NULL);
	CHECK(strstr(err, "??none?"));
	CHECK_EQ(PARSE(&c, "--cpus", "1\n2"), -EINVAL);
	CHECK(strchr(err, '\n') == NULL);
}

TEST(queues_raise_vcpus_only_without_cpus)
{
	struct cli_config c;

	unsigned max = MIN(MVM_MAX_CPUS, arch_layout.max_vcpus);

	CHECK_EQ(PARSE(&c, "--disk", "x.img", "--queues", "4"), 0);
	/* As many as the queues, as far as the architecture goes (s390x: 1). */
	CHECK_EQ(cli_auto_cpus(&c), max > 1);
	CHECK_EQ(c.vm.cpus, MIN(4, max));
	CHECK_EQ(PARSE(&c, "--disk", "x.img", "--queues", "4", "--cpus", "2"), 0);
	CHECK(!cli_auto_cpus(&c));
	CHECK_EQ(c.vm.cpus, 2);
	CHECK_EQ(PARSE(&c, "--queues", "4"), 0);     /* no disk: nothing to use them */
	CHECK(!cli_auto_cpus(&c));
	CHECK_EQ(c.vm.cpus, 1);
}

TEST(binary_rejects_bad_disks)
{
	char k[160], odd[160], img[160];
	static uint8_t blob[4096];

	mvm_bin();
	mk_tmpdir();
	snprintf(k, sizeof(k), "%s/bz", tmpdir);
	write_fake_bzimage(k);
	snprintf(odd, sizeof(odd), "%s/odd.img", tmpdir);
	write_file(odd, blob, 1000);
	snprintf(img, sizeof(img), "%s/ok.img", tmpdir);
	write_file(img, blob, sizeof(blob));
	EXPECT_USAGE("/nonexistent.img", "--kernel", k, "--disk", "/nonexistent.img");
	EXPECT_USAGE("512", "--kernel", k, "--disk", odd);
	EXPECT_USAGE("--queues '0'", "--kernel", k, "--disk", img, "--queues", "0");
	EXPECT_USAGE("serial", "--kernel", k, "--disk", "x,serial=123456789012345678901");
}

/* As root, --sandbox on (the default) needs --uid/--gid, and says why. */
TEST(binary_as_root_without_ids_is_refused)
{
	char out[2048];

	if (geteuid() != 0)
		CHECK_SKIP("the refusal is for root");
	CHECK_EQ(run_mvm_ids(out, sizeof(out), (const char *const[]){ "--kernel", "/nonexistent/k",
		 NULL }, false), 2);
	CHECK(strstr(out, "mvm: running as root with --sandbox on: a guest that escaped"));
	CHECK(strstr(out, "--uid 0 --gid 0"));
}

/* --vsock: the device's keys, --transport as its default too, once. */
TEST(vsock_option_fills_the_librarys_struct)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--vsock", "cid=7,socket=/run/v.sock", "--transport", "mmio"), 0);
	CHECK(c.has_vsock);
	CHECK_EQ(c.vsock.cid, 7);
	CHECK_STR(c.vsock.socket, "/run/v.sock");
	CHECK_EQ(c.vsock.conns, 256);
	CHECK_EQ(c.vsock.transport, MVM_TRANSPORT_MMIO);
	CHECK_EQ(c.vsock.size, sizeof(c.vsock));
	CHECK_EQ(PARSE(&c, "--transport", "mmio", "--vsock", "socket=/v,cid=9,transport=pci,"
		       "conns=4"), 0);
	CHECK_EQ(c.vsock.transport, MVM_TRANSPORT_PCI);
	CHECK_EQ(c.vsock.conns, 4);
	CHECK_EQ(PARSE(&c, "--kernel", "k"), 0);
	CHECK(!c.has_vsock);
}

/* --api-socket takes PATH or Cloud Hypervisor's path=PATH. */
/* --api-socket alone waits for vm.create: options that say how to run
 * any VM keep it so, those that describe the VM do not. */
TEST(api_socket_alone_takes_the_vm_from_the_api)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--api-socket", "/s"), 0);
	CHECK(cli_vm_from_api(&c));
	CHECK_EQ(PARSE(&c, "--api-socket", "/s", "--sandbox", "off", "--hotplug-slots", "1",
		       "--id", "a", "--pvpanic", "off", "--queues", "2", "--stats"), 0);
	CHECK(cli_vm_from_api(&c));
	CHECK_EQ(PARSE(&c, "--api-socket", "/s", "--disk", "x.img"), 0);
	CHECK(!cli_vm_from_api(&c));
	CHECK_EQ(PARSE(&c, "--api-socket", "/s", "--mem", "64M"), 0);
	CHECK(!cli_vm_from_api(&c));
	CHECK_EQ(PARSE(&c, "--kernel", "k"), 0);
	CHECK(!cli_vm_from_api(&c));
	CHECK_EQ(PARSE(&c, "--cpus", "1"), 0);
	CHECK(!cli_vm_from_api(&c));
}

TEST(api_socket_takes_a_path_or_path_equals)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--kernel", "k"), 0);
	CHECK(!c.api_socket);
	CHECK_EQ(PARSE(&c, "--api-socket", "/run/a.sock"), 0);
	CHECK_STR(c.api_socket, "/run/a.sock");
	CHECK_EQ(PARSE(&c, "--api-socket", "path=/run/b.sock"), 0);
	CHECK_STR(c.api_socket, "/run/b.sock");
	CHECK_EQ(PARSE(&c, "--api-socket", "path="), -EINVAL);
	CHECK(strstr(err, "--api-socket: empty path; give the socket's PATH"));
}

TEST(bad_vsock_options)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--vsock", "cid=2,socket=/v"), -EINVAL);
	CHECK(strstr(err, "--vsock cid='2': out of range; use a number from 3 to 4294967294"));
	CHECK_EQ(PARSE(&c, "--vsock", "cid=3,socket=/v,conns=5000"), -EINVAL);
	CHECK(strstr(err, "1 to 4096"));
	CHECK_EQ(PARSE(&c, "--vsock", "cid=3,port=5"), -EINVAL);
	CHECK(strstr(err, "unknown option 'port=5'"));
	CHECK_EQ(PARSE(&c, "--vsock", "cid=3,socket=/a", "--vsock", "cid=4,socket=/b"), -EINVAL);
	CHECK(strstr(err, "a VM has one vsock device"));
	CHECK_EQ(PARSE(&c, "--vsock", ""), -EINVAL);
	CHECK(strstr(err, "empty spec; use cid=N,socket=PATH"));
}

/* --rate-limit-group and a disk's limits: Cloud Hypervisor's key names,
 * straight into the library's structs; the groups in line order. */
TEST(rate_limit_options_fill_the_librarys_structs)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--rate-limit-group", "id=g0,bw_size=1048576,bw_refill_time=1000",
		       "--disk", "a.img,ops_size=100,ops_refill_time=10,ops_one_time_burst=50,"
		       "rate_limit_group=g0", "--rate-limit-group",
		       "id=g1,ops_size=5,ops_refill_time=1"), 0);
	CHECK_EQ(c.ngroups, 2);
	CHECK_STR(c.groups[0].id, "g0");
	CHECK_EQ(c.groups[0].rate.bw.size, 1048576);
	CHECK_EQ(c.groups[0].rate.bw.refill_time_ms, 1000);
	CHECK_EQ(c.groups[0].rate.ops.size, 0);
	CHECK_STR(c.groups[1].id, "g1");
	CHECK_EQ(c.groups[1].rate.ops.size, 5);
	CHECK_EQ(c.disks[0].rate.ops.size, 100);
	CHECK_EQ(c.disks[0].rate.ops.refill_time_ms, 10);
	CHECK_EQ(c.disks[0].rate.ops.one_time_burst, 50);
	CHECK_EQ(c.disks[0].rate.bw.size, 0);
	CHECK_STR(c.disks[0].rate_limit_group, "g0");
	CHECK_EQ(PARSE(&c, "--disk", "a.img"), 0);
	CHECK_EQ(c.ngroups, 0);
	CHECK(!c.disks[0].rate_limit_group);
}

TEST(bad_rate_limit_options)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--disk", "a.img,bw_refill_time=3600001"), -EINVAL);
	CHECK(strstr(err, "--disk bw_refill_time='3600001': out of range; use 0 (off) to "
		      "3600000 milliseconds"));
	CHECK_EQ(PARSE(&c, "--disk", "a.img,ops_size=x"), -EINVAL);
	CHECK(strstr(err, "ops_size='x': not a number"));
	CHECK_EQ(PARSE(&c, "--rate-limit-group", "id=g0,iops=5"), -EINVAL);
	CHECK(strstr(err, "--rate-limit-group: unknown option 'iops=5'"));
	CHECK_EQ(PARSE(&c, "--rate-limit-group", ""), -EINVAL);
	CHECK(strstr(err, "--rate-limit-group: an empty spec; use id=ID"));
}

TEST(restore_takes_a_directory_and_no_shape_of_its_own)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--restore", "/snap"), 0);
	CHECK_STR(c.vm.restore, "/snap");
	CHECK(c.vm_given);
	/* No default guest, no vCPUs raised for queues: the snapshot has them. */
	CHECK_EQ(cli_default_guest(&c, "/nonexistent", err, sizeof(err)), 0);
	CHECK(c.vm.kernel == NULL);
	CHECK_EQ(PARSE(&c, "--restore", "/snap", "--disk", "a.img,queues=4"), 0);
	CHECK(!cli_auto_cpus(&c));
	CHECK_EQ(c.ndisks, 1);
	CHECK_EQ(PARSE(&c, "--restore", ""), -EINVAL);
	CHECK(strstr(err, "--restore: empty path"));
	CHECK_EQ(PARSE(&c, "--restore", "/snap", "--cpus", "2"), -EINVAL);
	CHECK_STR(err, "--cpus with --restore: the snapshot's VM has its own; leave it out "
		  "(--disk may give the disks' images)");
	CHECK_EQ(PARSE(&c, "--kernel", "/k", "--restore", "/snap"), -EINVAL);
	CHECK(strstr(err, "--kernel with --restore"));
	CHECK_EQ(PARSE(&c, "--restore", "/snap", "--mem=1G"), -EINVAL);
	CHECK(strstr(err, "--mem with --restore"));
}

/* --snapshot-dir is the process's, like --sandbox: given with
 * --api-socket alone, mvm still waits for the API to describe the VM. */
TEST(snapshot_dir_is_taken_and_leaves_the_vm_to_the_api)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--snapshot-dir", "/snaps", "--api-socket", "/s"), 0);
	CHECK_STR(c.vm.snapshot_dir, "/snaps");
	CHECK(cli_vm_from_api(&c));
	CHECK_EQ(PARSE(&c, "--snapshot-dir", "/snaps", "--restore", "/snap"), 0);
	CHECK_STR(c.vm.snapshot_dir, "/snaps");
	CHECK_EQ(PARSE(&c, "--snapshot-dir", ""), -EINVAL);
	CHECK_STR(err, "--snapshot-dir: empty path; give the directory snapshots go to");
}

/* --mem-file puts guest RAM in a file: a VM option (a restore has the
 * snapshot's memory instead). */
TEST(mem_file_is_taken_and_refused_with_restore)
{
	struct cli_config c;

	CHECK_EQ(PARSE(&c, "--mem-file", "/snaps/a/memory", "--api-socket", "/s"), 0);
	CHECK_STR(c.vm.mem_file, "/snaps/a/memory");
	CHECK(!cli_vm_from_api(&c));
	CHECK_EQ(PARSE(&c, "--mem-file", ""), -EINVAL);
	CHECK_STR(err, "--mem-file: empty path; give the file guest RAM is to be in");
	CHECK_EQ(PARSE(&c, "--restore", "/snap", "--mem-file", "/m"), -EINVAL);
	CHECK(strstr(err, "--mem-file with --restore: the snapshot's VM has its own"));
}

TEST(binary_refuses_a_directory_without_a_snapshot)
{
	char out[2048], dir[160];
	int rc;

	mk_tmpdir();
	snprintf(dir, sizeof(dir), "%s/none", tmpdir);
	mkdir(dir, 0700);
	rc = run_mvm(out, sizeof(out), (const char *const[]){ "--restore", dir, NULL });
	CHECK_EQ(rc, 2);
	CHECK(strstr(out, "no snapshot there"));
	CHECK(strchr(out, '\n') == out + strlen(out) - 1);
	/* A state file that is not one: refused naming what is wrong. */
	snprintf(out, sizeof(out), "%s/state", dir);
	write_file(out, "not a snapshot at all, but long enough to be read whole", 56);
	rc = run_mvm(out, sizeof(out), (const char *const[]){ "--restore", dir, NULL });
	CHECK_EQ(rc, 2);
	CHECK(strstr(out, "restore ") && strstr(out, "magic"));
}
