/* mvm-remote: a command-line client of mvm's API socket for scripts, as
 * ch-remote is Cloud Hypervisor's (its command names and its DiskConfig
 * syntax). What a command asks (remote_parse: argv to method, endpoint and
 * JSON body) and what its answer means (remote_reply: status and body to
 * output and exit status) are here, pure and KVM-free for the unit tests;
 * the HTTP exchange (libcurl over the Unix socket) is vmm/remote/main.c.
 * Every field the server takes or refuses is checked once, by the server:
 * this client only shapes what was typed into Cloud Hypervisor's JSON. */
#ifndef MVM_REMOTE_H
#define MVM_REMOTE_H

#include <stddef.h>
#include <stdio.h>

/* Exit statuses: done; the VMM answered with an error or could not be
 * reached; the command line was wrong. */
#define REMOTE_EXIT_OK 0
#define REMOTE_EXIT_FAILED 1
#define REMOTE_EXIT_USAGE 2

/* A body larger than this is refused before it is sent (the server's own
 * limit, API_BODY_MAX, is smaller: it answers 413). */
#define REMOTE_BODY_MAX (1u << 20)

struct remote_req {
	const char *socket;      /* --api-socket PATH */
	long timeout_s;          /* --timeout S; 0: none */
	const char *command;     /* "snapshot" */
	const char *method;      /* "GET" or "PUT" */
	char endpoint[32];       /* "vm.snapshot" */
	char *body;              /* JSON (malloc'd), or NULL: none */
	int help;                /* --help: print remote_usage, nothing sent */
};

/* argv (argv[0] the program) into *req. 0, or -EINVAL/-ENOMEM with a
 * one-line message. cwd: the directory relative snapshot paths are taken
 * from (the server's may differ; it is sent absolute). */
int remote_parse(int argc, char **argv, const char *cwd, struct remote_req *req, char *err,
		 size_t errlen);
void remote_req_fini(struct remote_req *req);
void remote_usage(FILE *f);

/* What the answer (HTTP status, body of len bytes) means: a 2xx body goes
 * to out (a line), an error's message (Cloud Hypervisor's shape: a JSON
 * string) to errf as "mvm-remote: MESSAGE (HTTP STATUS)". Returns the
 * exit status. */
int remote_reply(const struct remote_req *req, long status, const char *body, size_t len,
		 FILE *out, FILE *errf);

#endif
