/* mvm-remote's commands: argv to Cloud Hypervisor's endpoints and JSON,
 * and their answers to output and an exit status (remote.h). */
#include "vmm/remote/remote.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/base/keyval.h"
#include "vmm/mvm.h"

/* What a command's one argument is. */
enum remote_arg {
	REMOTE_ARG_NONE,
	REMOTE_ARG_SNAPSHOT,    /* PATH, file:///PATH or destination_url=...: SnapshotConfig,
				 * VmCoredumpData */
	REMOTE_ARG_RESTORE,     /* DIR, file:///DIR or source_url=...[,prefault=on]: RestoreConfig */
	REMOTE_ARG_DISK,        /* path=PATH[,key=value]... or {JSON}: DiskConfig (VsockConfig) */
	REMOTE_ARG_ID,          /* a device's id: {"id": ID} */
	REMOTE_ARG_FILE,        /* a VmConfig in a JSON file, - for stdin */
};

struct remote_cmd {
	const char *name, *method, *endpoint;
	enum remote_arg arg;
	const char *meta;       /* the argument in the usage, or NULL */
	const char *help;
};

/* ch-remote's command names; the endpoints are the server's table
 * (vmm/api/api.c, docs/api.md). */
static const struct remote_cmd remote_cmds[] = {
	{ "ping", "GET", "vmm.ping", REMOTE_ARG_NONE, NULL, "the VMM's version and pid" },
	{ "info", "GET", "vm.info", REMOTE_ARG_NONE, NULL, "the VM's config, state and devices" },
	{ "counters", "GET", "vm.counters", REMOTE_ARG_NONE, NULL, "the VM's counters, per device" },
	{ "create", "PUT", "vm.create", REMOTE_ARG_FILE, "FILE",
	  "make the VM from a VmConfig (JSON; - reads standard input)" },
	{ "boot", "PUT", "vm.boot", REMOTE_ARG_NONE, NULL, "boot the VM that create made" },
	{ "pause", "PUT", "vm.pause", REMOTE_ARG_NONE, NULL, "pause the VM" },
	{ "resume", "PUT", "vm.resume", REMOTE_ARG_NONE, NULL, "resume the VM" },
	{ "snapshot", "PUT", "vm.snapshot", REMOTE_ARG_SNAPSHOT, "DIR",
	  "write a snapshot of the paused VM into DIR (or destination_url=file:///DIR)" },
	{ "coredump", "PUT", "vm.coredump", REMOTE_ARG_SNAPSHOT, "FILE",
	  "write the paused VM into FILE as an ELF core dump, for crash(8) (or "
	  "destination_url=file:///FILE)" },
	{ "restore", "PUT", "vm.restore", REMOTE_ARG_RESTORE, "DIR",
	  "restore the snapshot in DIR into an mvm started with --api-socket alone; it stays "
	  "paused until resume (or source_url=file:///DIR[,prefault=on])" },
	{ "add-disk", "PUT", "vm.add-disk", REMOTE_ARG_DISK, "path=PATH[,KEY=VALUE]...",
	  "plug a disk into the running VM: Cloud Hypervisor's DiskConfig keys (readonly, "
	  "direct, num_queues, id, serial, rate_limit_group, bw_size, bw_refill_time, "
	  "bw_one_time_burst, ops_size, ops_refill_time, ops_one_time_burst), or the "
	  "DiskConfig as JSON; prints the device's id and its PCI address (s390x: its ccw bus "
	  "id)" },
	{ "update-disk", "PUT", "vm.update-disk", REMOTE_ARG_DISK,
	  "id=ID[,path=PATH][,bw_size=N,bw_refill_time=MS]...",
	  "mvm's own: give a running disk a new image (path) and/or new limits; a bucket "
	  "given (bw_*, ops_*) replaces that bucket, a size of 0 lifts it, one left out "
	  "stays" },
	{ "resize-disk", "PUT", "vm.resize-disk", REMOTE_ARG_DISK, "id=ID,desired_size=BYTES",
	  "make a running disk's image file BYTES long (a multiple of 512); the guest sees "
	  "the new capacity at once (or Cloud Hypervisor's VmResizeDisk as JSON)" },
	{ "add-vsock", "PUT", "vm.add-vsock", REMOTE_ARG_DISK, "cid=CID,socket=PATH",
	  "give the VM that create made a vsock device, before boot (Cloud Hypervisor's "
	  "VsockConfig keys, or its JSON)" },
	{ "remove-device", "PUT", "vm.remove-device", REMOTE_ARG_ID, "ID",
	  "unplug the device with this id (info lists them) once the guest lets it go" },
	{ "nmi", "PUT", "vm.nmi", REMOTE_ARG_NONE, NULL, "one non-maskable interrupt to each vCPU" },
	{ "power-button", "PUT", "vm.power-button", REMOTE_ARG_NONE, NULL,
	  "ask the guest to shut down (x86: the keyboard's Power key; s390x: a quiesce)" },
	{ "reboot", "PUT", "vm.reboot", REMOTE_ARG_NONE, NULL,
	  "make the VM again from its config and boot it" },
	{ "shutdown", "PUT", "vm.shutdown", REMOTE_ARG_NONE, NULL, "stop the VM" },
	{ "delete", "PUT", "vm.delete", REMOTE_ARG_NONE, NULL, "stop the VM and forget its config" },
	{ "shutdown-vmm", "PUT", "vmm.shutdown", REMOTE_ARG_NONE, NULL, "stop the VM and the mvm process" },
};
#define REMOTE_NCMDS (sizeof(remote_cmds) / sizeof(remote_cmds[0]))

/* Keys of the key=value syntax whose values stay strings even where they
 * read as a number or a boolean (a serial of digits, a path "on"). */
static const char *const remote_string_keys[] = {
	"path", "id", "serial", "rate_limit_group", "socket", "source_url", "destination_url",
};

/* DiskConfig's rate_limiter_config, flattened as ch-remote flattens it:
 * PREFIX_FIELD into rate_limiter_config.BUCKET.FIELD. */
static const struct {
	const char *prefix, *bucket;
} remote_buckets[] = { { "bw_", "bandwidth" }, { "ops_", "ops" } };

static int remote_err(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return ret;
}

void remote_usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: mvm-remote --api-socket PATH [--timeout S] COMMAND [ARGUMENT]\n"
		   "A client of mvm's API socket (mvm --api-socket PATH) for scripts: each command is\n"
		   "one request; its JSON answer goes to standard output, an error to standard\n"
		   "error as one line. Exit status: 0 done, 1 refused or failed, 2 usage.\n"
		   "  --api-socket PATH  the socket mvm serves\n"
		   "  --timeout S        give up after S seconds (default: wait as long as it takes)\n"
		   "Commands:\n");
	for (i = 0; i < REMOTE_NCMDS; i++) {
		const struct remote_cmd *c = &remote_cmds[i];
		char help[1024];

		fprintf(f, "  %s%s%s\n", c->name, c->meta ? " " : "", c->meta ? c->meta : "");
		kv_wrap(c->help, 6, 79, help, sizeof(help));
		fputs(help, f);
	}
	fprintf(f, "Paths are the server's: a relative DIR is made absolute here.\n");
}

/* A JSON value from one key=value's text: on/off and true/false are
 * booleans, digits an integer, anything else (and the string keys) a
 * string. */
static json_t *remote_value(const char *key, const char *val)
{
	size_t i;
	char *end;

	for (i = 0; i < sizeof(remote_string_keys) / sizeof(remote_string_keys[0]); i++)
		if (!strcmp(key, remote_string_keys[i]))
			return json_string(val);
	if (!strcmp(val, "on") || !strcmp(val, "true"))
		return json_true();
	if (!strcmp(val, "off") || !strcmp(val, "false"))
		return json_false();
	if (*val >= '0' && *val <= '9') {
		unsigned long long n;

		errno = 0;
		n = strtoull(val, &end, 10);
		if (!*end && !errno && n <= (unsigned long long)INT64_MAX)
			return json_integer((json_int_t)n);
	}
	return json_string(val);
}

/* Where key=value goes in obj: the object itself, or a rate limiter's
 * bucket (made as needed), with *field the name there. */
static json_t *remote_slot(json_t *obj, const char *key, const char **field)
{
	size_t i;

	*field = key;
	for (i = 0; i < sizeof(remote_buckets) / sizeof(remote_buckets[0]); i++) {
		size_t n = strlen(remote_buckets[i].prefix);
		json_t *rl, *b;

		if (strncmp(key, remote_buckets[i].prefix, n) || !key[n])
			continue;
		rl = json_object_get(obj, "rate_limiter_config");
		if (!rl) {
			rl = json_object();
			if (json_object_set_new(obj, "rate_limiter_config", rl))
				return NULL;
		}
		b = json_object_get(rl, remote_buckets[i].bucket);
		if (!b) {
			b = json_object();
			if (json_object_set_new(rl, remote_buckets[i].bucket, b))
				return NULL;
		}
		*field = key + n;
		return b;
	}
	return obj;
}

/* "key=value,key=value" (Cloud Hypervisor's syntax for a config on its
 * command line and ch-remote's) into a JSON object. */
static int remote_keys(const char *what, const char *spec, json_t **out, char *err, size_t errlen)
{
	char *copy, *item, *save = NULL;
	json_t *obj;
	int ret = 0;

	copy = strdup(spec);
	obj = json_object();
	if (!copy || !obj) {
		ret = remote_err(err, errlen, -ENOMEM, "%s: out of memory", what);
		goto free_obj;
	}
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		const char *field;
		json_t *slot, *v;

		if (!eq || eq == item) {
			ret = remote_err(err, errlen, -EINVAL, "%s: '%.64s': give KEY=VALUE "
					 "(mvm-remote --help)", what, item);
			goto free_obj;
		}
		*eq = 0;
		slot = remote_slot(obj, item, &field);
		if (slot && json_object_get(slot, field)) {
			ret = remote_err(err, errlen, -EINVAL, "%s: %.64s given twice; give it once",
					 what, item);
			goto free_obj;
		}
		v = remote_value(item, eq + 1);
		if (!slot || !v || json_object_set_new(slot, field, v)) {
			ret = remote_err(err, errlen, -ENOMEM, "%s: out of memory", what);
			goto free_obj;
		}
	}
	if (!json_object_size(obj)) {
		ret = remote_err(err, errlen, -EINVAL, "%s: nothing given; give KEY=VALUE", what);
		goto free_obj;
	}
	*out = obj;
	obj = NULL;
free_obj:
	json_decref(obj);
	free(copy);
	return ret;
}

/* A snapshot's directory as Cloud Hypervisor's file:// URL: an absolute
 * path as it is, a relative one from cwd. */
static int remote_dir_url(const char *what, const char *dir, const char *cwd, json_t *obj,
			  const char *field, char *err, size_t errlen)
{
	char url[8192];
	int n;

	if (!*dir)
		return remote_err(err, errlen, -EINVAL, "%s: empty path; give one", what);
	if (!strncmp(dir, "file://", 7))
		n = snprintf(url, sizeof(url), "%s", dir);
	else if (dir[0] == '/')
		n = snprintf(url, sizeof(url), "file://%s", dir);
	else
		n = snprintf(url, sizeof(url), "file://%s/%s", cwd, dir);
	if (n < 0 || (size_t)n >= sizeof(url))
		return remote_err(err, errlen, -EINVAL, "%s: path too long; give a shorter one",
				  what);
	if (json_object_set_new(obj, field, json_string(url)))
		return remote_err(err, errlen, -ENOMEM, "%s: out of memory", what);
	return 0;
}

/* A JSON object from text (a DiskConfig typed as JSON, a VmConfig file). */
static int remote_json(const char *what, const char *text, size_t len, json_t **out, char *err,
		       size_t errlen)
{
	json_error_t je;
	json_t *j = json_loadb(text, len, 0, &je);

	if (!j)
		return remote_err(err, errlen, -EINVAL, "%s: not JSON: line %d: %.128s; give a JSON "
				  "object", what, je.line, je.text);
	if (!json_is_object(j)) {
		json_decref(j);
		return remote_err(err, errlen, -EINVAL, "%s: not a JSON object; give {...}", what);
	}
	*out = j;
	return 0;
}

/* The whole of a file, or of standard input for "-", up to REMOTE_BODY_MAX. */
static int remote_read_file(const char *what, const char *path, char **text, size_t *len,
			    char *err, size_t errlen)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "re") : stdin;
	char *buf;
	size_t n;
	int ret = 0;

	if (!f)
		return remote_err(err, errlen, -errno, "%s: %.256s: %s; give a VmConfig file",
				  what, path, strerror(errno));
	buf = malloc(REMOTE_BODY_MAX + 1);
	if (!buf) {
		ret = remote_err(err, errlen, -ENOMEM, "%s: out of memory", what);
		goto close_file;
	}
	n = fread(buf, 1, REMOTE_BODY_MAX + 1, f);
	if (ferror(f))
		ret = remote_err(err, errlen, -EIO, "%s: %.256s: cannot read it", what, path);
	else if (n > REMOTE_BODY_MAX)
		ret = remote_err(err, errlen, -EFBIG, "%s: %.256s: larger than %u bytes; a VmConfig "
				 "is a few KiB", what, path, REMOTE_BODY_MAX);
	if (ret) {
		free(buf);
		goto close_file;
	}
	*text = buf;
	*len = n;
close_file:
	if (f != stdin)
		fclose(f);
	return ret;
}

/* The request body of command c with argument arg. */
static int remote_body(const struct remote_cmd *c, const char *arg, const char *cwd,
		       json_t **out, char *err, size_t errlen)
{
	const char *url;
	char *text = NULL;
	size_t len = 0;
	int ret;

	*out = NULL;
	switch (c->arg) {
	case REMOTE_ARG_NONE:
		return 0;
	case REMOTE_ARG_SNAPSHOT:
	case REMOTE_ARG_RESTORE:
		/* Cloud Hypervisor's keys where they begin with its URL's,
		 * else a directory (whatever characters its name has). */
		url = c->arg == REMOTE_ARG_SNAPSHOT ? "destination_url" : "source_url";
		if (!strncmp(arg, url, strlen(url)) && arg[strlen(url)] == '=')
			return remote_keys(c->name, arg, out, err, errlen);
		*out = json_object();
		if (!*out)
			return remote_err(err, errlen, -ENOMEM, "%s: out of memory", c->name);
		return remote_dir_url(c->name, arg, cwd, *out, url, err, errlen);
	case REMOTE_ARG_DISK:
		if (arg[0] == '{')
			return remote_json(c->name, arg, strlen(arg), out, err, errlen);
		return remote_keys(c->name, arg, out, err, errlen);
	case REMOTE_ARG_ID:
		if (!*arg)
			return remote_err(err, errlen, -EINVAL, "%s: empty id; give the device's id "
					  "(info lists them)", c->name);
		*out = json_pack("{ss}", "id", arg);
		return *out ? 0 : remote_err(err, errlen, -ENOMEM, "%s: out of memory", c->name);
	case REMOTE_ARG_FILE:
		ret = remote_read_file(c->name, arg, &text, &len, err, errlen);
		if (ret)
			return ret;
		ret = remote_json(c->name, text, len, out, err, errlen);
		free(text);
		return ret;
	}
	return -EINVAL;
}

static const struct remote_cmd *remote_find(const char *name)
{
	size_t i;

	for (i = 0; i < REMOTE_NCMDS; i++)
		if (!strcmp(remote_cmds[i].name, name))
			return &remote_cmds[i];
	return NULL;
}

/* "ping, info, ..." for a message. */
static void remote_names(char *buf, size_t len)
{
	size_t i, at = 0;

	buf[0] = 0;
	for (i = 0; i < REMOTE_NCMDS && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "", remote_cmds[i].name);
}

int remote_parse(int argc, char **argv, const char *cwd, struct remote_req *req, char *err,
		 size_t errlen)
{
	static const struct option opts[] = {
		{ "api-socket", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct remote_cmd *c;
	char names[256], *end;
	json_t *body = NULL;
	int opt, ret;

	*req = (struct remote_req){ 0 };
	optind = 0;             /* glibc and musl: start over (the tests parse many) */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		switch (opt) {
		case 's':
			if (!*optarg)
				return remote_err(err, errlen, -EINVAL, "--api-socket: empty; give the "
						  "path mvm --api-socket serves");
			req->socket = optarg;
			break;
		case 't':
			errno = 0;
			req->timeout_s = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || req->timeout_s < 1 ||
			    req->timeout_s > 86400)
				return remote_err(err, errlen, -EINVAL, "--timeout '%.32s': give 1 to "
						  "86400 seconds", optarg);
			break;
		case 'h':
			req->help = 1;
			return 0;
		default:
			return remote_err(err, errlen, -EINVAL, "%.64s: unknown option; see "
					  "mvm-remote --help", argv[optind - 1]);
		}
	}
	remote_names(names, sizeof(names));
	if (optind >= argc)
		return remote_err(err, errlen, -EINVAL, "no command; give one of %s", names);
	c = remote_find(argv[optind]);
	if (!c)
		return remote_err(err, errlen, -EINVAL, "%.64s: unknown command; give one of %s",
				  argv[optind], names);
	if (!req->socket)
		return remote_err(err, errlen, -EINVAL, "%s: no --api-socket; give the path mvm "
				  "--api-socket serves", c->name);
	if (c->arg == REMOTE_ARG_NONE && argc - optind != 1)
		return remote_err(err, errlen, -EINVAL, "%s: takes no argument; '%.64s' is one too "
				  "many", c->name, argv[optind + 1]);
	if (c->arg != REMOTE_ARG_NONE && argc - optind != 2)
		return remote_err(err, errlen, -EINVAL, "%s: give %s%s", c->name, c->meta,
				  argc - optind > 2 ? " once (one argument; no spaces between "
				  "keys)" : "");
	ret = remote_body(c, argc - optind == 2 ? argv[optind + 1] : "", cwd, &body, err, errlen);
	if (ret) {
		json_decref(body);      /* what it made before it failed */
		return ret;
	}
	if (body) {
		req->body = json_dumps(body, JSON_COMPACT);
		json_decref(body);
		if (!req->body)
			return remote_err(err, errlen, -ENOMEM, "%s: out of memory", c->name);
	}
	req->command = c->name;
	req->method = c->method;
	snprintf(req->endpoint, sizeof(req->endpoint), "%s", c->endpoint);
	return 0;
}

void remote_req_fini(struct remote_req *req)
{
	free(req->body);
	req->body = NULL;
}

/* An error answer's message: Cloud Hypervisor's shape is a JSON array
 * of messages, the outermost first (v47 on; a JSON string before, and in
 * mvm before libmvm 2.17), joined with ": "; anything else is shown as
 * text, control characters as '?'. */
static void remote_message(const char *body, size_t len, char *msg, size_t msglen)
{
	json_t *j = len ? json_loadb(body, len, JSON_DECODE_ANY, NULL) : NULL, *e;
	char chain[1024];
	const char *s = json_string_value(j);
	size_t i, n, at = 0;

	if (json_is_array(j) && json_array_size(j)) {
		chain[0] = 0;
		json_array_foreach(j, i, e) {
			if (!json_is_string(e) || at >= sizeof(chain))
				break;
			at += (size_t)snprintf(chain + at, sizeof(chain) - at, "%s%s", i ? ": " : "",
					       json_string_value(e));
		}
		if (i == json_array_size(j) || at >= sizeof(chain))
			s = chain;
	}
	if (!s) {
		s = body;
		n = len;
	} else {
		n = strlen(s);
	}
	if (!n) {
		snprintf(msg, msglen, "(no message)");
	} else {
		for (i = 0; i < n && i + 1 < msglen; i++)
			msg[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
		msg[i] = 0;
		while (i && msg[i - 1] == '?')  /* a trailing newline */
			msg[--i] = 0;
	}
	json_decref(j);
}

int remote_reply(const struct remote_req *req, long status, const char *body, size_t len,
		 FILE *out, FILE *errf)
{
	size_t elen = strlen(req->endpoint);
	char msg[1024];

	if (status >= 200 && status < 300) {
		if (len) {
			fwrite(body, 1, len, out);
			if (body[len - 1] != '\n')
				fputc('\n', out);
		}
		return REMOTE_EXIT_OK;
	}
	remote_message(body, len, msg, sizeof(msg));
	/* The server's messages start with their endpoint ("vm.pause: ..."). */
	if (!strncmp(msg, req->endpoint, elen) && msg[elen] == ':')
		fprintf(errf, "mvm-remote: %s (HTTP %ld)\n", msg, status);
	else
		fprintf(errf, "mvm-remote: %s: %s (HTTP %ld)\n", req->endpoint, msg, status);
	return REMOTE_EXIT_FAILED;
}
