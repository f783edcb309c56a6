/* apicall SOCKET METHOD ENDPOINT [BODY]: one HTTP/1.1 request to mvm's
 * API socket (--api-socket), for the s390x system tests in Hercules' L1,
 * whose busybox has no HTTP client for a Unix socket (mvm-remote needs
 * libcurl, which the s390x cross build has not). Prints the status line's
 * code, then the body, on one line; exits 0 for a 2xx answer, 1 for
 * another, 2 when there is none. Built static by tests/s390/run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	const char *body = argc > 4 ? argv[4] : "";
	char req[8192], resp[65536], *p;
	size_t got = 0;
	ssize_t n;
	int fd, len, code;

	if (argc < 4 || argc > 5 || strlen(argv[1]) >= sizeof(a.sun_path)) {
		fprintf(stderr, "usage: apicall SOCKET METHOD ENDPOINT [BODY]\n");
		return 2;
	}
	strcpy(a.sun_path, argv[1]);
	len = snprintf(req, sizeof(req), "%s /api/v1/%s HTTP/1.1\r\nHost: localhost\r\n"
		       "Content-Type: application/json\r\nContent-Length: %zu\r\n"
		       "Connection: close\r\n\r\n%s", argv[2], argv[3], strlen(body), body);
	if (len < 0 || (size_t)len >= sizeof(req)) {
		fprintf(stderr, "apicall: request longer than %zu bytes\n", sizeof(req));
		return 2;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		fprintf(stderr, "apicall: %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	if (write(fd, req, (size_t)len) != len) {
		fprintf(stderr, "apicall: write: %s\n", strerror(errno));
		return 2;
	}
	while (got < sizeof(resp) - 1 && (n = read(fd, resp + got, sizeof(resp) - 1 - got)) > 0)
		got += (size_t)n;
	resp[got] = '\0';
	close(fd);
	if (sscanf(resp, "HTTP/1.%*d %d", &code) != 1) {
		fprintf(stderr, "apicall: no HTTP answer\n");
		return 2;
	}
	p = strstr(resp, "\r\n\r\n");
	printf("%d %s\n", code, p ? p + 4 : "");
	return code >= 200 && code < 300 ? 0 : 1;
}
