/* mvm-vsock: the test guest's end of mvm's --vsock (AF_VSOCK streams),
 * for the system tests and benchmarks, and for a guest's programs:
 *
 *   mvm-vsock listen PORT MODE [N]   accept N connections (default 1) on
 *                                    PORT, one after the other: echo each
 *                                    back (echo), count and drop its bytes
 *                                    (sink: prints "sink BYTES"), or copy it
 *                                    to stdout (cat)
 *   mvm-vsock connect CID PORT       stdin to the connection, then its
 *                                    write side shut, then what comes back
 *                                    to stdout
 *   mvm-vsock rr CID PORT COUNT      COUNT one-byte round trips against an
 *                                    echo: prints "rr COUNT NS_PER_RT"
 *   mvm-vsock stream CID PORT MIB    MIB mebibytes out: prints
 *                                    "stream MIB KIB_PER_S"
 *   mvm-vsock check CID PORT CONNS MIB
 *                                    CONNS connections at once to an echo,
 *                                    each sending MIB mebibytes of its own
 *                                    pattern while it reads the echo back
 *                                    and compares it byte for byte: prints
 *                                    "check CONNS MIB ok", or fails naming
 *                                    the connection and the first bad byte
 *   mvm-vsock serve PORT [N]         a command agent for the host: for each
 *                                    of N connections (default: no end), the
 *                                    bytes up to the host's end of writing
 *                                    are a shell command line; its stdout
 *                                    and stderr go back, then a last line
 *                                    "mvm-vsock-status: STATUS"
 *
 * The host is CID 2 (there, mvm connects it to the Unix socket
 * SOCKET_PORT); a host program reaches a guest listener through mvm's
 * socket with "CONNECT PORT\n". Exit status 0, or 1 with one line on
 * stderr. Static, as the guest's other helpers. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h> /* before vm_sockets.h: older UAPI headers need it */
#include <linux/vm_sockets.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "mvm-vsock: %s: %s\n", what, strerror(errno));
	exit(1);
}

static unsigned long num(const char *s, const char *what)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || !*s || *end) {
		fprintf(stderr, "mvm-vsock: %s '%s': not a number\n", what, s);
		exit(2);
	}
	return v;
}

static int vsock_socket(void)
{
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		die("socket(AF_VSOCK)");
	return fd;
}

static int dial(unsigned cid, unsigned port)
{
	struct sockaddr_vm a = { .svm_family = AF_VSOCK, .svm_cid = cid, .svm_port = port };
	/* Linux gives up on a connect after 2 s; under emulation (the nested
	 * harness) many connects at once take longer to be answered. */
	struct timeval t = { .tv_sec = 30 };
	int fd = vsock_socket();

	if (setsockopt(fd, AF_VSOCK, SO_VM_SOCKETS_CONNECT_TIMEOUT, &t, sizeof(t)))
		die("setsockopt(SO_VM_SOCKETS_CONNECT_TIMEOUT)");
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)))
		die("connect");
	return fd;
}

static void put_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("write");
		p += w;
		n -= (size_t)w;
	}
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static char buf[64 << 10];

static int cmd_listen(unsigned port, const char *mode, unsigned long n)
{
	struct sockaddr_vm a = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY,
				 .svm_port = port };
	int lfd = vsock_socket();

	if (strcmp(mode, "echo") && strcmp(mode, "sink") && strcmp(mode, "cat")) {
		fprintf(stderr, "mvm-vsock: listen mode '%s': give echo, sink or cat\n", mode);
		return 2;
	}
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 16))
		die("bind/listen");
	/* Listening: a script may start its host side now. */
	fprintf(stderr, "mvm-vsock: listening on port %u\n", port);
	while (n--) {
		unsigned long long total = 0;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		ssize_t r;

		if (fd < 0)
			die("accept");
		while ((r = read(fd, buf, sizeof(buf))) > 0) {
			total += (unsigned long long)r;
			if (!strcmp(mode, "echo"))
				put_all(fd, buf, (size_t)r);
			else if (!strcmp(mode, "cat"))
				put_all(STDOUT_FILENO, buf, (size_t)r);
		}
		if (r < 0)
			die("read");
		if (!strcmp(mode, "sink"))
			printf("sink %llu\n", total);
		close(fd);
	}
	fflush(stdout);
	return 0;
}

static int cmd_connect(unsigned cid, unsigned port)
{
	int fd = dial(cid, port);
	ssize_t r;

	while ((r = read(STDIN_FILENO, buf, sizeof(buf))) > 0)
		put_all(fd, buf, (size_t)r);
	if (r < 0)
		die("read stdin");
	if (shutdown(fd, SHUT_WR))
		die("shutdown");
	while ((r = read(fd, buf, sizeof(buf))) > 0)
		put_all(STDOUT_FILENO, buf, (size_t)r);
	if (r < 0)
		die("read");
	return 0;
}

static int cmd_rr(unsigned cid, unsigned port, unsigned long count)
{
	int fd = dial(cid, port);
	uint64_t t0 = now_ns();
	char c = 'x';

	for (unsigned long i = 0; i < count; i++) {
		put_all(fd, &c, 1);
		if (read(fd, &c, 1) != 1)
			die("read (is an echo listening?)");
	}
	printf("rr %lu %llu\n", count,
	       count ? (unsigned long long)((now_ns() - t0) / count) : 0ull);
	close(fd);
	return 0;
}

static int cmd_stream(unsigned cid, unsigned port, unsigned long mib)
{
	int fd = dial(cid, port);
	uint64_t t0, ns;

	memset(buf, 's', sizeof(buf));
	t0 = now_ns();
	for (unsigned long i = 0; i < mib * 16; i++)
		put_all(fd, buf, sizeof(buf));
	if (shutdown(fd, SHUT_WR))
		die("shutdown");
	/* The host side's end: everything was taken. */
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	ns = now_ns() - t0;
	printf("stream %lu %llu\n", mib,
	       ns ? (unsigned long long)(mib * 1024ull * 1000000000ull / ns) : 0ull);
	close(fd);
	return 0;
}

/* What connection i sends: 64 KiB blocks of its own pseudo-random bytes
 * (made once), each block's number in its first 8 bytes. Bytes that cross
 * connections, blocks lost, repeated or reordered, and any flipped bit
 * all show, and checking is a memcmp (the guest's CPU is slow where the
 * tests run it: emulated). */
#define CHECK_BLOCK sizeof(buf)
static char check_base[CHECK_BLOCK];

static void check_base_make(unsigned i)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (i + 1);

	for (size_t k = 0; k < CHECK_BLOCK; k += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(check_base + k, &x, 8);
	}
}

/* The n bytes at off of the stream into p (n within one block). */
static void check_expect(char *p, uint64_t off, size_t n)
{
	uint64_t blk = off / CHECK_BLOCK;
	size_t at = (size_t)(off % CHECK_BLOCK);

	memcpy(p, check_base + at, n);
	for (size_t k = at; k < 8 && k < at + n; k++)
		p[k - at] = (char)(blk >> (8 * k));
}

/* One connection of cmd_check: a writer process sends the pattern and
 * shuts its side, this one reads the echo (both at once, or the echo's
 * buffers fill and neither end moves). */
static void check_one(unsigned cid, unsigned port, unsigned i, uint64_t len)
{
	static char want[CHECK_BLOCK];
	int fd = dial(cid, port);
	uint64_t off = 0;
	pid_t w;
	ssize_t r;
	int st;

	check_base_make(i);
	w = fork();
	if (w < 0)
		die("fork");
	if (!w) {
		for (off = 0; off < len; off += CHECK_BLOCK) {
			size_t n = len - off < CHECK_BLOCK ? (size_t)(len - off) : CHECK_BLOCK;

			check_expect(buf, off, n);
			put_all(fd, buf, n);
		}
		if (shutdown(fd, SHUT_WR))
			die("shutdown");
		_exit(0);
	}
	/* Reads end at block boundaries, so each one's bytes lie in one block. */
	while ((r = read(fd, buf, CHECK_BLOCK - off % CHECK_BLOCK)) > 0) {
		check_expect(want, off, (size_t)r);
		if (memcmp(buf, want, (size_t)r)) {
			ssize_t k = 0;

			while (buf[k] == want[k])
				k++;
			fprintf(stderr, "mvm-vsock: connection %u: byte %llu differs\n", i,
				(unsigned long long)(off + (uint64_t)k));
			exit(1);
		}
		off += (uint64_t)r;
	}
	if (r < 0)
		die("read");
	if (waitpid(w, &st, 0) != w || !WIFEXITED(st) || WEXITSTATUS(st))
		exit(1);
	if (off != len) {
		fprintf(stderr, "mvm-vsock: connection %u: %llu of %llu bytes came back\n", i,
			(unsigned long long)off, (unsigned long long)len);
		exit(1);
	}
	exit(0);
}

static int cmd_check(unsigned cid, unsigned port, unsigned long conns, unsigned long mib)
{
	unsigned long bad = 0;
	int st;

	for (unsigned long i = 0; i < conns; i++) {
		pid_t p = fork();

		if (p < 0)
			die("fork");
		if (!p)
			check_one(cid, port, (unsigned)i, (uint64_t)mib << 20);
	}
	while (wait(&st) > 0)
		bad += !WIFEXITED(st) || WEXITSTATUS(st);
	if (bad) {
		fprintf(stderr, "mvm-vsock: check: %lu of %lu connections failed\n", bad, conns);
		return 1;
	}
	printf("check %lu %lu ok\n", conns, mib);
	return 0;
}

/* One command from the host: what it wrote until its shutdown(SHUT_WR),
 * run by sh -c with the connection as stdout and stderr. */
static void serve_one(int fd)
{
	static char cmd[64 << 10];
	size_t n = 0;
	ssize_t r;
	char tail[48];
	int status, len;
	pid_t pid;

	while (n < sizeof(cmd) - 1 && (r = read(fd, cmd + n, sizeof(cmd) - 1 - n)) > 0)
		n += (size_t)r;
	cmd[n] = '\0';
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(fd, STDOUT_FILENO) < 0 ||
		    dup2(fd, STDERR_FILENO) < 0)
			_exit(127);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		die("waitpid");
	len = snprintf(tail, sizeof(tail), "mvm-vsock-status: %d\n",
		       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	put_all(fd, tail, (size_t)len);
}

static int cmd_serve(unsigned port, unsigned long n, bool forever)
{
	struct sockaddr_vm a = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY,
				 .svm_port = port };
	int lfd = vsock_socket();

	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 16))
		die("bind/listen");
	fprintf(stderr, "mvm-vsock: serving commands on port %u\n", port);
	while (forever || n--) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0)
			die("accept");
		serve_one(fd);
		close(fd);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "listen") && argc <= 5)
		return cmd_listen((unsigned)num(argv[2], "port"), argv[3],
				  argc == 5 ? num(argv[4], "count") : 1);
	if (argc == 4 && !strcmp(argv[1], "connect"))
		return cmd_connect((unsigned)num(argv[2], "cid"), (unsigned)num(argv[3], "port"));
	if (argc == 5 && !strcmp(argv[1], "rr"))
		return cmd_rr((unsigned)num(argv[2], "cid"), (unsigned)num(argv[3], "port"),
			      num(argv[4], "count"));
	if (argc == 5 && !strcmp(argv[1], "stream"))
		return cmd_stream((unsigned)num(argv[2], "cid"), (unsigned)num(argv[3], "port"),
				  num(argv[4], "MiB"));
	if (argc == 6 && !strcmp(argv[1], "check"))
		return cmd_check((unsigned)num(argv[2], "cid"), (unsigned)num(argv[3], "port"),
				 num(argv[4], "connections"), num(argv[5], "MiB"));
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "serve"))
		return cmd_serve((unsigned)num(argv[2], "port"), argc == 4 ? num(argv[3], "count") : 0,
				 argc == 3);
	fprintf(stderr, "usage: mvm-vsock listen PORT echo|sink|cat [N] | connect CID PORT | "
		"rr CID PORT COUNT | stream CID PORT MIB | check CID PORT CONNS MIB | "
		"serve PORT [N]\n");
	return 2;
}
