/* hvsock: the host's end of mvm's hybrid vsock (--vsock cid=N,socket=PATH)
 * for the s390x system tests in Hercules' L1, whose busybox has no client
 * for a Unix socket (the x86 tests use socat and Python). Built static by
 * tests/s390/run.
 *
 *   hvsock connect PATH PORT    connect to PATH, send "CONNECT PORT\n" and
 *                               read "OK <host port>\n" (retried for 60 s
 *                               while the guest does not listen yet), then
 *                               copy stdin to the connection (its write
 *                               side shut at EOF) and the connection to
 *                               stdout until the guest closes it
 *   hvsock collect PATH         listen on PATH (guest-initiated connections
 *                               to port P reach PATH_P), take one
 *                               connection, copy it to stdout until the
 *                               guest shuts its side, answer "got N\n"
 *
 * Exit status 0, or 1 with one line on stderr. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int die(const char *what)
{
	fprintf(stderr, "hvsock: %s: %s\n", what, errno ? strerror(errno) : "unexpected end");
	exit(1);
}

/* All of p to f, now (stdio retries short writes). */
static void put(FILE *f, const char *p, size_t n)
{
	if (fwrite(p, 1, n, f) != n || fflush(f))
		die("write");
}

static void set_path(struct sockaddr_un *a, const char *path)
{
	if (strlen(path) >= sizeof(a->sun_path)) {
		errno = ENAMETOOLONG;
		die(path);
	}
	a->sun_family = AF_UNIX;
	strcpy(a->sun_path, path);
}

/* One try: the connected socket after "OK", or -1. */
static int try_connect(const char *path, const char *port)
{
	struct sockaddr_un a = { 0 };
	char line[64];
	size_t n = 0;
	int fd;

	set_path(&a, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket");
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)))
		goto fail;
	dprintf(fd, "CONNECT %s\n", port);
	while (n < sizeof(line) - 1) {
		if (read(fd, line + n, 1) != 1)
			goto fail;
		if (line[n++] == '\n')
			break;
	}
	line[n] = '\0';
	if (strncmp(line, "OK ", 3) != 0)
		goto fail;
	return fd;
fail:
	close(fd);
	return -1;
}

static int cmd_connect(const char *path, const char *port)
{
	struct pollfd p[2];
	char buf[65536];
	time_t end = time(NULL) + 60;
	FILE *out;
	int fd;

	while ((fd = try_connect(path, port)) < 0) {
		if (time(NULL) > end) {
			errno = 0;
			die("the guest never accepted the connection (60 s)");
		}
		usleep(300000);
	}
	out = fdopen(fd, "w");
	if (!out)
		die("fdopen");
	p[0] = (struct pollfd){ .fd = 0, .events = POLLIN };
	p[1] = (struct pollfd){ .fd = fd, .events = POLLIN };
	for (;;) {
		ssize_t n;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (p[0].revents) {
			n = read(0, buf, sizeof(buf));
			if (n < 0)
				die("stdin");
			if (n == 0) {
				shutdown(fd, SHUT_WR);
				p[0].fd = -1;
			} else {
				put(out, buf, (size_t)n);
			}
		}
		if (p[1].revents) {
			n = read(fd, buf, sizeof(buf));
			if (n < 0)
				die("read from the guest");
			if (n == 0)
				return 0;
			put(stdout, buf, (size_t)n);
		}
	}
}

static int cmd_collect(const char *path)
{
	struct sockaddr_un a = { 0 };
	char buf[65536];
	unsigned long long total = 0;
	ssize_t n;
	int l, c;

	set_path(&a, path);
	l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1))
		die(path);
	c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		die("accept");
	while ((n = read(c, buf, sizeof(buf))) > 0) {
		put(stdout, buf, (size_t)n);
		total += (unsigned long long)n;
	}
	if (n < 0)
		die("read from the guest");
	dprintf(c, "got %llu\n", total);
	close(c);
	close(l);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "connect") == 0)
		return cmd_connect(argv[2], argv[3]);
	if (argc == 3 && strcmp(argv[1], "collect") == 0)
		return cmd_collect(argv[2]);
	fprintf(stderr, "usage: hvsock connect PATH PORT | hvsock collect PATH\n");
	return 1;
}
