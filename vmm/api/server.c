/* mvm's REST API server (vmm/api/api.h): HTTP/1.1 over a Unix socket with
 * libmicrohttpd in its external-polling mode, so that the one thread that
 * serves it is ours: it polls, lets the daemon read, parse and write, and
 * enters its seccomp filter (SANDBOX_API) before the first request. */
#include "vmm/api/api.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Bounds for what a client can make the server hold: connections at
 * once, the memory each may use for its request line and headers
 * (libmicrohttpd answers 431 past it), and how long an idle or slow
 * connection lives. */
#define API_CONNECTIONS 16
#define API_CONN_MEMORY (32u << 10)
#define API_CONN_TIMEOUT_S 10
/* And how long a request may take to come in and its answer to go out,
 * however steadily its bytes trickle (the timeout above is for a
 * connection that says nothing): past it the connection is shut. */
#define API_REQUEST_NS 30000000000ull
/* At the end, how long answers already begun may take to go out. */
#define API_DRAIN_NS 2000000000ull

struct api_server {
	struct MHD_Daemon *d;
	struct api_vm *v;
	int lfd;
	int stop_efd;
	pthread_t thread;
	bool started;
	bool sandbox;
	bool handback;                 /* its thread stops without draining */
	bool drained;
	struct thread_handshake hs;
	/* Each open connection's socket and the time by which its request
	 * must have come and its answer gone (0: a free entry). */
	struct { struct MHD_Connection *c; int fd; uint64_t deadline; } conns[API_CONNECTIONS];
	char err[MVM_ERR_MAX];         /* why its thread could not start */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* One request's body as it comes (libmicrohttpd hands it in pieces). */
struct api_req {
	char *buf;
	size_t len;
	bool too_big;
};

/* RFC 9110 15.5.6: a 405 for the method names the ones allowed. */
static enum MHD_Result api_answer(struct MHD_Connection *c, unsigned status, char *body,
				  const char *allow)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(body ? strlen(body) : 0, body,
					       body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	if (body)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	if (allow)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result api_access(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *data,
				  size_t *data_size, void **req_cls)
{
	struct api_server *s = cls;
	struct api_req *q = *req_cls;
	struct api_reply r;

	(void)version;
	if (!q) {
		/* The first call has the headers only. */
		q = calloc(1, sizeof(*q));
		if (!q)
			return MHD_NO;
		*req_cls = q;
		return MHD_YES;
	}
	if (*data_size) {
		if (!q->too_big && q->len + *data_size <= API_BODY_MAX) {
			char *nb = realloc(q->buf, q->len + *data_size);

			if (!nb)
				return MHD_NO;
			q->buf = nb;
			memcpy(q->buf + q->len, data, *data_size);
			q->len += *data_size;
		} else {
			/* Read on and dropped: the 413 goes once it is all in. */
			q->too_big = true;
		}
		*data_size = 0;
		return MHD_YES;
	}
	if (q->too_big) {
		api_error(&r, 413, "request body larger than %u bytes", API_BODY_MAX);
		api_account(s->v, method, url, &r);
		return api_answer(c, r.status, r.body, NULL);
	}
	api_handle(s->v, method, url, q->buf, q->len, &r);
	return api_answer(c, r.status, r.body, r.allow);
}

static unsigned api_conn_find(struct api_server *s, const struct MHD_Connection *c)
{
	unsigned i;

	for (i = 0; i < API_CONNECTIONS && s->conns[i].c != c; i++)
		;
	return i;
}

/* A connection comes (its deadline starts) or goes. */
static void api_conn_notify(void *cls, struct MHD_Connection *c, void **socket_ctx,
			    enum MHD_ConnectionNotificationCode toe)
{
	struct api_server *s = cls;
	const union MHD_ConnectionInfo *ci;
	unsigned i;

	(void)socket_ctx;
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		i = api_conn_find(s, c);
		if (i < API_CONNECTIONS)
			s->conns[i].c = NULL;
		return;
	}
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	i = api_conn_find(s, NULL);
	if (!ci || i == API_CONNECTIONS)
		return;         /* cannot be: the daemon takes no more than that */
	s->conns[i].c = c;
	s->conns[i].fd = ci->connect_fd;
	s->conns[i].deadline = mono_ns() + API_REQUEST_NS;
}

/* Connections whose request or answer is overdue are shut (the daemon
 * then closes them); the milliseconds until the next deadline, at most
 * max_ms (-1: none). */
static long api_conn_expire(struct api_server *s, long max_ms)
{
	uint64_t now = mono_ns();
	unsigned i;

	for (i = 0; i < API_CONNECTIONS; i++) {
		uint64_t d = s->conns[i].deadline;

		if (!s->conns[i].c)
			continue;
		if (d <= now) {
			shutdown(s->conns[i].fd, SHUT_RDWR);
			s->conns[i].deadline = UINT64_MAX;   /* once */
			api_account_slow(s->v);
			continue;
		}
		if (d != UINT64_MAX && (max_ms < 0 || (d - now) / 1000000 < (uint64_t)max_ms))
			max_ms = (long)((d - now) / 1000000) + 1;
	}
	return max_ms;
}

static void api_completed(void *cls, struct MHD_Connection *c, void **req_cls,
			  enum MHD_RequestTerminationCode toe)
{
	struct api_server *s = cls;
	struct api_req *q = *req_cls;
	unsigned i;

	(void)toe;
	/* The next request on this connection gets its own time. */
	i = api_conn_find(s, c);
	if (i < API_CONNECTIONS && s->conns[i].deadline != UINT64_MAX)
		s->conns[i].deadline = mono_ns() + API_REQUEST_NS;
	if (q) {
		free(q->buf);
		free(q);
		*req_cls = NULL;
	}
}

/* A socket file at path that nobody accepts on: left by an mvm that was
 * killed; anything else there is not ours to remove. */
static bool api_stale_socket(const char *path, const struct sockaddr_un *a)
{
	struct stat st;
	int fd, r;

	if (lstat(path, &st) || !S_ISSOCK(st.st_mode))
		return false;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	r = connect(fd, (const struct sockaddr *)a, sizeof(*a));
	close(fd);
	return r < 0 && errno == ECONNREFUSED;
}

int api_server_new(const char *path, struct api_vm *v, struct api_server **out, char *err,
		   size_t errlen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct api_server *s;
	mode_t old;
	int r;

	if (!path || !*path || strlen(path) >= sizeof(a.sun_path))
		return err_set(err, errlen, -ENAMETOOLONG, "--api-socket: '%.64s': give a path of "
			       "1 to %zu bytes", path ? path : "", sizeof(a.sun_path) - 1);
	strcpy(a.sun_path, path);
	s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(err, errlen, -ENOMEM, "--api-socket: out of memory");
	s->v = v;
	s->stop_efd = -1;
	strcpy(s->path, path);
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->lfd < 0) {
		r = err_set(err, errlen, -errno, "--api-socket %s: socket: %s", path, strerror(errno));
		goto free_s;
	}
	if (api_stale_socket(path, &a))
		unlink(path);
	/* 0600 from its creation: no moment when others may connect. */
	old = umask(0177);
	r = bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) ? -errno : 0;
	umask(old);
	if (r) {
		r = err_set(err, errlen, r, "--api-socket %s: %s%s", path, strerror(-r),
			    r == -EADDRINUSE ? " (another mvm listens there, or a file is in the way; "
			    "remove it or choose another path)" : "");
		goto close_lfd;
	}
	if (listen(s->lfd, API_CONNECTIONS) < 0) {
		r = err_set(err, errlen, -errno, "--api-socket %s: listen: %s", path, strerror(errno));
		goto unlink_path;
	}
	s->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->stop_efd < 0) {
		r = err_set(err, errlen, -errno, "--api-socket: eventfd: %s", strerror(errno));
		goto unlink_path;
	}
	/* External polling: no thread of libmicrohttpd's own. */
	s->d = MHD_start_daemon(MHD_USE_ERROR_LOG, 0, NULL, NULL, api_access, s,
				MHD_OPTION_LISTEN_SOCKET, s->lfd,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)API_CONNECTIONS,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)API_CONN_MEMORY,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)API_CONN_TIMEOUT_S,
				MHD_OPTION_NOTIFY_COMPLETED, api_completed, s,
				MHD_OPTION_NOTIFY_CONNECTION, api_conn_notify, s,
				MHD_OPTION_END);
	if (!s->d) {
		r = err_set(err, errlen, -EIO, "--api-socket %s: the HTTP daemon did not start", path);
		goto close_efd;
	}
	*out = s;
	return 0;

close_efd:
	close(s->stop_efd);
unlink_path:
	unlink(path);
close_lfd:
	close(s->lfd);
free_s:
	free(s);
	return r;
}

/* Poll the daemon's sockets (and the stop eventfd until it has been
 * seen: draining), at most max_ms (-1: as long as the daemon lets us);
 * serve. Returns whether a stop came. */
static bool api_round(struct api_server *s, long max_ms, bool draining, int sig_fd)
{
	fd_set rs, ws, es;
	MHD_socket maxfd = s->stop_efd > sig_fd ? s->stop_efd : sig_fd;
	MHD_UNSIGNED_LONG_LONG to;
	struct timeval tv;
	long ms = max_ms;
	bool stop;

	FD_ZERO(&rs);
	FD_ZERO(&ws);
	FD_ZERO(&es);
	if (!draining)
		FD_SET(s->stop_efd, &rs);
	if (sig_fd >= 0)
		FD_SET(sig_fd, &rs);
	if (MHD_get_fdset(s->d, &rs, &ws, &es, &maxfd) != MHD_YES)
		return true;
	if (MHD_get_timeout(s->d, &to) == MHD_YES && (ms < 0 || to < (MHD_UNSIGNED_LONG_LONG)ms))
		ms = (long)to;
	ms = api_conn_expire(s, ms);
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	if (select(maxfd + 1, &rs, &ws, &es, ms < 0 ? NULL : &tv) < 0) {
		if (errno != EINTR)
			return true;
		FD_ZERO(&rs);
		FD_ZERO(&ws);
		FD_ZERO(&es);
	}
	stop = (!draining && FD_ISSET(s->stop_efd, &rs)) || (sig_fd >= 0 && FD_ISSET(sig_fd, &rs));
	MHD_run_from_select(s->d, &rs, &ws, &es);
	return stop;
}

/* glibc reads /proc/sys/vm/overcommit_memory the first time a thread's
 * arena gives memory back to the system (shrink_heap), which a request
 * with a large body makes happen: here, before the filter, a heap's worth
 * allocated and freed does it. musl's allocator opens nothing. */
static void api_prime_allocator(void)
{
#ifdef __GLIBC__
	void *p[64];
	unsigned i;

	for (i = 0; i < 64; i++)
		p[i] = malloc(16 << 10);
	for (i = 64; i-- > 0;)
		free(p[i]);
#endif
}

/* Answers already begun go out, for a while; no new connection. */
static void api_drain(struct api_server *s)
{
	uint64_t until = mono_ns() + API_DRAIN_NS;

	if (s->drained)
		return;
	s->drained = true;
	MHD_quiesce_daemon(s->d);
	while (mono_ns() < until) {
		const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->d,
								    MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

		if (!i || !i->num_connections)
			break;
		api_round(s, 50, true, -1);
	}
}

static void *api_thread(void *arg)
{
	struct api_server *s = arg;
	int r = 0;

	thread_begin(&s->hs, "mvm-api");
	/* Before the filter, which opens nothing: jansson seeds its hash
	 * tables from /dev/urandom with the first object it makes, the C
	 * library reads /etc/localtime the first time libmicrohttpd dates an
	 * answer, and its allocator another file (api_prime_allocator). */
	json_object_seed(0);
	tzset();
	api_prime_allocator();
	if (s->sandbox)
		r = mvm_confine_api_thread(s->v->vm, s->lfd, s->err, sizeof(s->err));
	thread_ready(&s->hs, r);
	if (r)
		return NULL;
	s->v->own_thread = true;
	while (!api_round(s, -1, false, -1))
		;
	if (!s->handback)
		api_drain(s);
	return NULL;
}

void api_server_serve_until_boot(struct api_server *s, int sig_fd)
{
	while (!s->v->booted && !s->v->shutdown)
		if (api_round(s, 200, false, sig_fd))
			break;
	if (!s->v->booted)
		api_drain(s);      /* vmm.shutdown's 204 goes out */
}

int api_server_start(struct api_server *s, bool sandbox, char *err, size_t errlen)
{
	int r;

	s->sandbox = sandbox;
	r = thread_start_sync(&s->thread, api_thread, s, &s->hs);
	if (r)
		return err_set(err, errlen, r, "--api-socket: cannot start its thread: %s",
			       s->err[0] ? s->err : strerror(-r));
	s->started = true;
	return 0;
}

/* The thread sees the stop eventfd, serves what it holds and ends. */
static void api_thread_end(struct api_server *s)
{
	uint64_t one = 1;

	if (write(s->stop_efd, &one, sizeof(one)) < 0) {
		/* a non-blocking eventfd: readable already */
	}
	pthread_join(s->thread, NULL);
	s->started = false;
	s->v->own_thread = false;
}

void api_server_stop(struct api_server *s)
{
	if (!s)
		return;
	if (s->started)
		api_thread_end(s);
	else
		api_drain(s);   /* handed back: answers begun go out from here */
}

void api_server_handback(struct api_server *s)
{
	uint64_t n;

	if (!s || !s->started)
		return;
	s->handback = true;
	api_thread_end(s);
	s->handback = false;
	/* Read back to 0, for the next api_server_start's thread. */
	if (read(s->stop_efd, &n, sizeof(n)) < 0) {
		/* nothing there: a non-blocking eventfd */
	}
}

void api_server_free(struct api_server *s)
{
	if (!s)
		return;
	api_server_stop(s);
	MHD_stop_daemon(s->d);
	close(s->lfd);
	close(s->stop_efd);
	free(s);
}
