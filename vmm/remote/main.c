/* mvm-remote(1): one request to mvm's API socket, HTTP/1.1 over the Unix
 * socket with libcurl; what to ask and what the answer means are
 * remote.c's. */
#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmm/mvm.h"
#include "vmm/remote/remote.h"

/* The answer's body, bounded: a vm.info or vm.counters is a few KiB. */
struct remote_buf {
	char *data;
	size_t len;
	bool overflow;
};

static size_t remote_write(char *ptr, size_t size, size_t n, void *opaque)
{
	struct remote_buf *b = opaque;
	size_t add = size * n;
	char *d;

	if (b->len + add > REMOTE_BODY_MAX) {
		b->overflow = true;
		return 0;       /* curl ends the transfer with CURLE_WRITE_ERROR */
	}
	d = realloc(b->data, b->len + add + 1);
	if (!d)
		return 0;
	memcpy(d + b->len, ptr, add);
	b->data = d;
	b->len += add;
	d[b->len] = 0;
	return add;
}

/* Send req; *status and *b the answer. 0, or a curl error with a message. */
static int remote_send(const struct remote_req *req, long *status, struct remote_buf *b,
		       char *err, size_t errlen)
{
	struct curl_slist *hdrs = NULL;
	char url[64], cerr[CURL_ERROR_SIZE] = "";
	CURLcode rc = CURLE_OUT_OF_MEMORY;
	CURL *c;

	c = curl_easy_init();
	if (!c)
		goto fail;
	snprintf(url, sizeof(url), "http://localhost/api/v1/%s", req->endpoint);
	/* No 100-continue round trip before a body: the server answers at once. */
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (hdrs && req->body)
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	if (!hdrs)
		goto cleanup;
	if (curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, req->socket) ||
	    curl_easy_setopt(c, CURLOPT_URL, url) ||
	    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs) ||
	    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr) ||
	    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, remote_write) ||
	    curl_easy_setopt(c, CURLOPT_WRITEDATA, b) ||
	    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) ||
	    curl_easy_setopt(c, CURLOPT_TIMEOUT, req->timeout_s) ||
	    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http"))
		goto cleanup;
	if (!strcmp(req->method, "PUT")) {
		/* A PUT with its body in memory (Content-Length, even 0). */
		if (curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT") ||
		    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body ? req->body : "") ||
		    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, req->body ? (long)strlen(req->body) : 0L))
			goto cleanup;
	}
	rc = curl_easy_perform(c);
	if (!rc)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
cleanup:
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
fail:
	if (rc == CURLE_COULDNT_CONNECT)
		snprintf(err, errlen, "%s: cannot connect to %s (%s); is mvm running with "
			 "--api-socket %s?", req->command, req->socket,
			 access(req->socket, F_OK) ? strerror(errno) : "nobody listens",
			 req->socket);
	else if (rc == CURLE_OPERATION_TIMEDOUT)
		snprintf(err, errlen, "%s: no answer within %ld s from %s; give a longer --timeout",
			 req->command, req->timeout_s, req->socket);
	else if (rc == CURLE_WRITE_ERROR && b->overflow)
		snprintf(err, errlen, "%s: the answer is larger than %u bytes; is %s mvm's API "
			 "socket?", req->command, REMOTE_BODY_MAX, req->socket);
	else if (rc)
		snprintf(err, errlen, "%s: %s: %s", req->command, req->socket,
			 cerr[0] ? cerr : curl_easy_strerror(rc));
	return rc;
}

int main(int argc, char **argv)
{
	struct remote_buf b = { 0 };
	struct remote_req req;
	char err[1024], cwd[4096];
	long status = 0;
	int ret;

	if (argc == 2 && !strcmp(argv[1], "--version")) {
		printf("mvm-remote %s\n", MVM_VERSION_STRING);
		return REMOTE_EXIT_OK;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		strcpy(cwd, "/");
	if (remote_parse(argc, argv, cwd, &req, err, sizeof(err))) {
		fprintf(stderr, "mvm-remote: %s\n", err);
		return REMOTE_EXIT_USAGE;
	}
	if (req.help) {
		remote_usage(stdout);
		return REMOTE_EXIT_OK;
	}
	if (curl_global_init(CURL_GLOBAL_NOTHING)) {
		fprintf(stderr, "mvm-remote: libcurl would not start\n");
		ret = REMOTE_EXIT_FAILED;
		goto fini_req;
	}
	if (remote_send(&req, &status, &b, err, sizeof(err))) {
		fprintf(stderr, "mvm-remote: %s\n", err);
		ret = REMOTE_EXIT_FAILED;
	} else {
		ret = remote_reply(&req, status, b.data, b.len, stdout, stderr);
	}
	free(b.data);
	curl_global_cleanup();
fini_req:
	remote_req_fini(&req);
	return ret;
}
