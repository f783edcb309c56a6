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
#include <linux/vm_sockets.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
	int fd = vsock_socket();

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
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "serve"))
		return cmd_serve((unsigned)num(argv[2], "port"), argc == 4 ? num(argv[3], "count") : 0,
				 argc == 3);
	fprintf(stderr, "usage: mvm-vsock listen PORT echo|sink|cat [N] | connect CID PORT | "
		"rr CID PORT COUNT | stream CID PORT MIB | serve PORT [N]\n");
	return 2;
}
