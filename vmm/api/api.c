/* The request path of mvm's REST API (vmm/api/api.h): routing, Cloud
 * Hypervisor's JSON shapes, the library calls. */
#include "vmm/api/api.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define API_PREFIX "/api/v1/"

enum api_method { API_GET, API_PUT };

/* A VM booted (or restored) is started by the program's main thread
 * once the process is confined, a moment after vm.boot's 204, and this
 * thread may serve meanwhile: a request waits for that start (10 s at
 * most; a start that fails ends mvm), so that vm.info says Running and
 * vm.shutdown stops what runs, as right after Cloud Hypervisor's boot. */
static void api_wait_started(const struct api_vm *v)
{
	static const struct timespec ms = { 0, 1000000 };
	unsigned i;

	for (i = 0; v->own_thread && v->vm && v->booted && i < 10000 &&
		    mvm_get_state(v->vm) == MVM_VM_CREATED; i++)
		nanosleep(&ms, NULL);
}

/* Cloud Hypervisor's endpoints that mvm does not serve (yet): refused
 * with 501 and the endpoint's name, once a body they take is valid JSON
 * (docs/api.md says which and why). */
static const char *const api_unsupported[] = {
	"vm.resize", "vm.resize-zone", "vm.add-device", "vm.add-fs", "vm.add-pmem",
	"vm.add-net", "vm.add-vdpa", "vm.add-user-device", "vm.add-generic-vhost-user",
	"vm.receive-migration", "vm.send-migration",
};

void api_error(struct api_reply *r, unsigned status, const char *fmt, ...)
{
	char msg[512];
	json_t *s;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->status = status;
	s = json_string(msg);
	if (!s) {
		/* Not UTF-8 (a client's bytes, or one cut by a %.64s): its
		 * bytes beyond ASCII become '?', so the answer keeps a body. */
		for (char *p = msg; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
		s = json_string(msg);
	}
	/* Cloud Hypervisor's shape since v47 (vmm/src/api/http: the error
	 * chain's messages); json_pack's "o" takes s, NULL included. */
	s = json_pack("[o]", s);
	r->body = s ? json_dumps(s, JSON_COMPACT) : NULL;
	json_decref(s);
}

/* An error the library reported for endpoint `what`: its message, which
 * names the library's call ("mvm_pause: ..."), is the endpoint's to a
 * client of the API ("vm.pause: ..."). */
static void api_lib_error(struct api_reply *r, unsigned status, const char *what,
			  const char *err)
{
	const char *p = err;

	if (!strncmp(p, "mvm_", 4)) {
		p += 4;
		while ((*p >= 'a' && *p <= 'z') || *p == '_')
			p++;
		p = !strncmp(p, ": ", 2) ? p + 2 : err;
	}
	api_error(r, status, "%s: %s", what, p);
}

/* The status for what the library refused in a VmConfig or DiskConfig:
 * 409 for an image another VM holds (Cloud Hypervisor's answer to a
 * path given twice), 400 for what the request got wrong (a value, a
 * path that names no usable file, a kernel that is not one or does not
 * fit), 500 for the host's own failures. */
static unsigned api_config_status(int ret)
{
	switch (-ret) {
	case EBUSY:
		return 409;
	case EINVAL: case ENOENT: case ENOEXEC: case EEXIST: case EBADF: case ENAMETOOLONG:
	case EPERM: case EACCES: case E2BIG: case EISDIR: case ENOTDIR: case ELOOP:
	case EFBIG: case ERANGE: case EOVERFLOW:
		return 400;
	default:
		return 500;
	}
}

/* A 200 with obj as its body (taken). */
static void api_json(struct api_reply *r, json_t *obj)
{
	if (!obj) {
		api_error(r, 500, "out of memory");
		return;
	}
	r->body = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	r->status = r->body ? 200 : 500;
}

/* Whether there is a VM to act on; else the 404 (none), or the 405 of
 * one that has shut down (its VmConfig kept: api_vm.relaunch). */
static bool api_have_vm(const struct api_vm *v, const char *name, struct api_reply *r)
{
	if (v->vm)
		return true;
	if (v->created)
		api_error(r, 405, "%s: the VM has shut down; vm.boot makes it again, vm.delete "
			  "forgets it", name);
	else
		api_error(r, 404, "%s: no VM has been created", name);
	return false;
}

/* Whether the VM has booted (api_have_vm first); else the 405. */
static bool api_booted(const struct api_vm *v, const char *name, struct api_reply *r)
{
	if (mvm_get_state(v->vm) != MVM_VM_CREATED)
		return true;
	api_error(r, 405, "%s: the VM has not booted; vm.boot starts it", name);
	return false;
}

/* Whether this mvm makes its VMs through the API (--api-socket alone);
 * else the 501 (it was given its VM on the command line). */
static bool api_host_ok(const struct api_vm *v, const char *name, struct api_reply *r)
{
	if (v->host)
		return true;
	api_error(r, 501, "%s: this mvm was given its VM on the command line; run mvm "
		  "--api-socket PATH alone to make VMs through the API", name);
	return false;
}

static const char *api_state(const struct api_vm *v)
{
	if (!v->vm)
		return v->created ? "Shutdown" : "Created";
	switch (mvm_get_state(v->vm)) {
	case MVM_VM_CREATED: return "Created";
	case MVM_VM_PAUSED: return "Paused";
	case MVM_VM_ENDED: return "Shutdown";
	default: return "Running";
	}
}

/* A token bucket in Cloud Hypervisor's TokenBucket shape, or NULL for none. */
static json_t *api_bucket(const struct mvm_token_bucket *b)
{
	if (!b->size)
		return NULL;
	return json_pack("{s:I,s:I,s:I}", "size", (json_int_t)b->size,
			 "one_time_burst", (json_int_t)b->one_time_burst,
			 "refill_time", (json_int_t)b->refill_time_ms);
}

/* A rate limit in Cloud Hypervisor's RateLimiterConfig shape, or NULL for
 * none. */
static json_t *api_rate(const struct mvm_rate_limit *rate)
{
	json_t *rl, *bw = api_bucket(&rate->bw), *ops = api_bucket(&rate->ops);

	if (!bw && !ops)
		return NULL;
	rl = json_object();
	if (bw)
		json_object_set_new(rl, "bandwidth", bw);
	if (ops)
		json_object_set_new(rl, "ops", ops);
	return rl;
}

/* A disk as Cloud Hypervisor's DiskConfig; its id as the library has it
 * (a VmConfig's not booted: as given, or none). */
static json_t *api_disk(const struct mvm_disk *d)
{
	json_t *o, *rl;

	o = json_pack("{s:s,s:b,s:b,s:I,s:I}", "path", d->path, "readonly", d->ro,
		      "direct", d->cache == MVM_CACHE_NONE, "num_queues", (json_int_t)d->queues,
		      "queue_size", (json_int_t)256);
	if (!o)
		return NULL;
	if (d->id)
		json_object_set_new(o, "id", json_string(d->id));
	if (d->serial)
		json_object_set_new(o, "serial", json_string(d->serial));
	if (d->rate_limit_group)
		json_object_set_new(o, "rate_limit_group", json_string(d->rate_limit_group));
	rl = api_rate(&d->rate);
	if (rl)
		json_object_set_new(o, "rate_limiter_config", rl);
	return o;
}

/* A rate-limit group as Cloud Hypervisor's RateLimitGroupConfig. */
static json_t *api_group(const struct mvm_rate_group_config *g)
{
	json_t *o = json_pack("{s:s}", "id", g->id), *rl = api_rate(&g->rate);

	if (o && rl)
		json_object_set_new(o, "rate_limiter_config", rl);
	else
		json_decref(rl);
	return o;
}

/* The VM's rate-limit groups as the library has them (the command
 * line's, the VmConfig's, a restored VM's snapshot's); a VM shut down's
 * as its VmConfig gave them. NULL: none. */
static json_t *api_groups(const struct api_vm *v)
{
	struct mvm_rate_group_config g;
	json_t *a = json_array();
	unsigned i;

	mvm_rate_group_config_init(&g);
	for (i = 0; a && v->vm && !mvm_get_rate_group(v->vm, i, &g, sizeof(g)); i++)
		json_array_append_new(a, api_group(&g));
	for (i = 0; a && !v->vm && v->created && i < v->created->ngroups; i++)
		json_array_append_new(a, api_group(&v->created->groups[i]));
	if (!json_array_size(a)) {
		json_decref(a);
		return NULL;
	}
	return a;
}

/* GET vm.info: VmInfo { config: VmConfig, state, memory_actual_size }. */
static void api_vm_info(struct api_vm *v, struct api_reply *r)
{
	const struct mvm_config *c = v->cfg;
	struct mvm_config now;
	json_t *cfg, *disks, *payload, *groups;
	unsigned i;

	if ((!v->vm && !v->created) || !c) {
		api_error(r, 404, "vm.info: no VM has been created");
		return;
	}
	/* The VM's own, where there is one: a restored VM's shape and
	 * payload are its snapshot's. */
	mvm_config_init(&now);
	if (v->vm && !mvm_get_config(v->vm, &now, sizeof(now)))
		c = &now;
	payload = json_pack("{s:s}", "kernel", c->kernel ? c->kernel : "");
	if (payload && c->initrd)
		json_object_set_new(payload, "initramfs", json_string(c->initrd));
	if (payload && c->cmdline)
		json_object_set_new(payload, "cmdline", json_string(c->cmdline));
	disks = json_array();
	/* As the VM has them now (a swap's path, limits changed since, those
	 * plugged in, less those removed); a VM shut down's as its VmConfig
	 * gave them. */
	for (i = 0; disks && v->vm && i < mvm_disk_count(v->vm); i++) {
		struct mvm_disk now;

		mvm_disk_init(&now, NULL);
		if (!mvm_get_disk(v->vm, i, &now, sizeof(now)))
			json_array_append_new(disks, api_disk(&now));
	}
	for (i = 0; disks && !v->vm && v->created && i < v->created->ndisks; i++)
		json_array_append_new(disks, api_disk(&v->created->disks[i].d));
	/* The serial port as the VmConfig set it (a VM the command line
	 * made, or a restored one, writes to mvm's stdout: Tty). */
	cfg = json_pack("{s:{s:I,s:I},s:{s:I},s:o,s:o,s:{s:s},s:{s:s},s:b}",
			"cpus", "boot_vcpus", (json_int_t)c->cpus, "max_vcpus", (json_int_t)c->cpus,
			"memory", "size", (json_int_t)c->mem,
			"payload", payload, "disks", disks,
			"serial", "mode", v->created && v->created->serial_mode[0] ?
			v->created->serial_mode : "Tty", "console", "mode", "Off",
			"pvpanic", (int)c->pvpanic);
	if (cfg && v->vsock)
		json_object_set_new(cfg, "vsock", json_pack("{s:I,s:s,s:s}", "cid",
							    (json_int_t)v->vsock->cid, "socket",
							    v->vsock->socket, "id", "_vsock0"));
	if (cfg && (groups = api_groups(v)))
		json_object_set_new(cfg, "rate_limit_groups", groups);
	api_json(r, json_pack("{s:o,s:s,s:I}", "config", cfg, "state", api_state(v),
			      "memory_actual_size", (json_int_t)c->mem));
}

/* GET vm.counters: { device id: { counter: value } }, Cloud Hypervisor's
 * names where it has them (read_bytes, write_bytes, read_ops, write_ops),
 * mvm's own besides. */
/* The vsock device's counters under its id, "_vsock0" (Cloud Hypervisor
 * counts none for its vsock device; mvm's are --stats' own). */
static void api_vsock_counters(struct api_vm *v, json_t *all)
{
#define API_VS(f) { #f, offsetof(struct mvm_vsock_stats, f) }
	static const struct {
		const char *name;
		size_t off;
	} fields[] = {
		API_VS(connections_guest), API_VS(connections_host), API_VS(connections_open),
		API_VS(bytes_to_host), API_VS(bytes_to_guest), API_VS(packets_from_guest),
		API_VS(packets_to_guest), API_VS(resets_sent), API_VS(resets_received),
		API_VS(credit_stalls), API_VS(credit_updates), API_VS(connection_limit),
		API_VS(no_listener), API_VS(connect_timeouts),
		API_VS(host_clients), API_VS(handshakes_failed), API_VS(host_errors),
		API_VS(bad_packets), API_VS(bad_rx_buffers),
	};
#undef API_VS
	struct mvm_vsock_stats st;
	json_t *o;
	unsigned i;

	if (mvm_get_vsock_stats(v->vm, &st, sizeof(st)))
		return;         /* no vsock device */
	o = json_object();
	for (i = 0; o && i < sizeof(fields) / sizeof(fields[0]); i++) {
		uint64_t n;

		memcpy(&n, (const char *)&st + fields[i].off, sizeof(n));
		json_object_set_new(o, fields[i].name, json_integer((json_int_t)n));
	}
	if (o)
		json_object_set_new(all, "_vsock0", o);
}

/* The API's own counters (api_counts), under "_api": requests, then
 * each kind of error by its status, and the slow clients shut out. */
static json_t *api_counts_json(const struct api_counts *c)
{
	static const char *const names[API_KINDS] = {
		[API_K_400] = "http_400", [API_K_404] = "http_404", [API_K_405] = "http_405",
		[API_K_409] = "http_409", [API_K_413] = "http_413", [API_K_500] = "http_500",
		[API_K_501] = "http_501", [API_K_OTHER] = "http_other_errors",
		[API_K_SLOW] = "slow_clients",
	};
	json_t *o = json_pack("{s:I}", "requests", (json_int_t)c->requests);
	unsigned i;

	for (i = 0; o && i < API_KINDS; i++)
		json_object_set_new(o, names[i], json_integer((json_int_t)c->kind[i]));
	return o;
}

static void api_vm_counters(struct api_vm *v, struct api_reply *r)
{
	json_t *all;
	unsigned i;

	if (!api_have_vm(v, "vm.counters", r))
		return;
	all = json_object();
	for (i = 0; all && i < mvm_disk_count(v->vm); i++) {
		struct mvm_queue_stats q;
		struct mvm_disk d;

		mvm_disk_init(&d, NULL);
		if (mvm_get_disk(v->vm, i, &d, sizeof(d)))
			continue;       /* removed */
		/* A disk of a VM not started has no device yet: zeros. */
		if (mvm_get_queue_stats(v->vm, i, MVM_ALL, &q, sizeof(q)))
			memset(&q, 0, sizeof(q));
		json_object_set_new(all, d.id, json_pack(
			"{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
			"read_bytes", (json_int_t)q.bytes_read, "write_bytes", (json_int_t)q.bytes_written,
			"read_ops", (json_int_t)q.read_ops, "write_ops", (json_int_t)q.write_ops,
			"requests", (json_int_t)q.requests, "errors", (json_int_t)q.errors,
			"irqs", (json_int_t)q.irqs, "rate_delayed", (json_int_t)q.rate_delayed,
			"rate_wait_us", (json_int_t)q.rate_wait_us));
	}
	if (all)
		api_vsock_counters(v, all);
	if (all)
		json_object_set_new(all, "_api", api_counts_json(&v->counts));
	api_json(r, all);
}

/* PUT vm.pause, vm.resume, vm.nmi, vm.power-button: the library's call
 * `call` on the VM, no body. 204; 404 without a VM; 405 where its state
 * does not allow it (not booted, paused already or not paused, ended);
 * 501 where the architecture has no such thing (vm.nmi on s390x,
 * vm.power-button on x86); 500 for a failure. */
static void api_vm_call(struct api_vm *v, const char *name,
			int (*call)(struct mvm *, char *, size_t), struct api_reply *r)
{
	char err[MVM_ERR_MAX];
	int ret;

	if (!api_have_vm(v, name, r) || !api_booted(v, name, r))
		return;
	ret = call(v->vm, err, sizeof(err));
	if (!ret)
		r->status = 204;
	else if (ret == -EALREADY || ret == -EINVAL || ret == -ESHUTDOWN)
		api_lib_error(r, 405, name, err);
	else
		api_lib_error(r, ret == -EOPNOTSUPP ? 501 : 500, name, err);
}

/* A booted VM that runs or is paused stops at the API's request: where
 * the program makes VMs again (v->relaunch), for why (the program then
 * destroys it and serves on); else mvm(1) exits with it, as the VM was
 * its reason to run. */
static void api_stop(struct api_vm *v, enum api_ending why)
{
	if (v->relaunch)
		v->ending = why;
	else
		v->shutdown = true;
	mvm_stop(v->vm, 0);
}

/* PUT vmm.shutdown: mvm ends, its VM stopped. PUT vm.shutdown: the VM
 * stops; mvm goes on serving with its VmConfig where it can make it
 * again (v->relaunch), else ends with it. */
static void api_shutdown(struct api_vm *v, const char *what, struct api_reply *r)
{
	bool vmm = !strcmp(what, "vmm.shutdown");
	int st;

	if (!vmm && !api_have_vm(v, what, r))
		return;
	st = v->vm ? mvm_get_state(v->vm) : MVM_VM_ENDED;
	if (vmm) {
		if (st == MVM_VM_RUNNING || st == MVM_VM_PAUSED)
			mvm_stop(v->vm, 0);
		v->shutdown = true;
	} else if (st == MVM_VM_ENDED) {
		api_error(r, 405, "vm.shutdown: the VM has already shut down");
		return;
	} else if (st == MVM_VM_CREATED && v->relaunch && !v->booted) {
		/* Never booted, where mvm serves on: nothing runs to stop (as
		 * Cloud Hypervisor's: the VM is not running). */
		api_error(r, 405, "vm.shutdown: the VM has not booted; vm.boot runs it, vm.delete "
			  "forgets it");
		return;
	} else if (st == MVM_VM_CREATED) {
		v->shutdown = true;     /* never booted: mvm ends, as before */
	} else {
		api_stop(v, API_END_SHUTDOWN);
	}
	r->status = 204;
}

/* PUT vm.reboot: the VM stops and is made again from its VmConfig and
 * booted (a fresh guest, as Cloud Hypervisor's reboot), by the program
 * once it has destroyed the old one (api_vm_relaunch). */
static void api_vm_reboot(struct api_vm *v, struct api_reply *r)
{
	int st;

	if (!api_host_ok(v, "vm.reboot", r) || !api_have_vm(v, "vm.reboot", r))
		return;
	st = mvm_get_state(v->vm);
	if (!v->booted || (st != MVM_VM_RUNNING && st != MVM_VM_PAUSED)) {
		api_error(r, 405, "vm.reboot: the VM is not running (%s); vm.boot it",
			  mvm_state_name(st));
		return;
	}
	if (!v->relaunch) {
		api_error(r, 500, "vm.reboot: not in a confined mvm (--sandbox on, a jail): a "
			  "reboot makes the VM again (KVM, its images, its threads), which the "
			  "process may no longer do; run with --sandbox off, or shut the VM down "
			  "and start another mvm");
		return;
	}
	if (!v->created) {
		api_error(r, 405, "vm.reboot: a VM restored from a snapshot has no VmConfig to "
			  "boot again; vm.delete it and vm.create one");
		return;
	}
	api_stop(v, API_END_REBOOT);
	r->status = 204;
}

/* PUT vm.delete: the VM and its VmConfig are gone. One not booted is
 * destroyed here (no thread of it runs: this is the thread that made
 * it); a booted one stops, and the program destroys it (v->relaunch) or
 * ends with it. */
static void api_vm_delete(struct api_vm *v, struct api_reply *r)
{
	int st;

	if (!api_host_ok(v, "vm.delete", r))
		return;
	/* Nothing to delete: done, as Cloud Hypervisor answers (a client
	 * cleaning up may delete whatever it finds). */
	if (!v->vm && !v->created) {
		r->status = 204;
		return;
	}
	st = v->vm ? mvm_get_state(v->vm) : MVM_VM_ENDED;
	if (v->vm && !v->booted) {
		mvm_destroy(v->vm);
		v->vm = NULL;
		api_vm_fini(v);
	} else if (!v->vm) {
		api_vm_fini(v);          /* shut down already */
	} else if (st == MVM_VM_RUNNING || st == MVM_VM_PAUSED) {
		api_stop(v, API_END_DELETE);
	} else {
		api_error(r, 405, "vm.delete: the VM is ending; try again");
		return;
	}
	r->status = 204;
}

/* Cloud Hypervisor reads its bodies with serde, where a member whose
 * value is null is an Option left unset: the same as leaving it out.
 * So every object member that is null goes before a body is read (array
 * elements stay: a null there is not a thing left out). */
static void api_drop_nulls(json_t *j)
{
	const char *k;
	json_t *val;
	void *tmp;
	size_t i;

	if (json_is_array(j)) {
		json_array_foreach(j, i, val)
			api_drop_nulls(val);
		return;
	}
	if (!json_is_object(j))
		return;
	json_object_foreach_safe(j, tmp, k, val) {
		if (json_is_null(val))
			json_object_del(j, k);
		else
			api_drop_nulls(val);
	}
}

/* A request's body as JSON (duplicate keys refused), null members
 * dropped: a new reference, or NULL and the 400. shape: the object it
 * must be ("DiskConfig"), or NULL for any JSON. */
static json_t *api_load(const char *name, const char *body, size_t len, const char *shape,
			struct api_reply *r)
{
	json_error_t e;
	json_t *j;

	if (!len) {
		api_error(r, 400, "%s: no body; give a %s", name, shape ? shape : "JSON body");
		return NULL;
	}
	j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &e);
	if (!j) {
		api_error(r, 400, "%s: invalid JSON at line %d column %d: %s", name, e.line,
			  e.column, e.text);
		return NULL;
	}
	if (shape && !json_is_object(j)) {
		api_error(r, 400, "%s: the body is not a %s object", name, shape);
		json_decref(j);
		return NULL;
	}
	api_drop_nulls(j);
	return j;
}

/* A TokenBucket into b; false (and the 400) when it is not one. */
static bool api_bucket_parse(const char *what, const char *name, json_t *o,
			     struct mvm_token_bucket *b, struct api_reply *r)
{
	static const char *const keys[] = { "size", "one_time_burst", "refill_time" };
	uint64_t *fields[] = { &b->size, &b->one_time_burst, &b->refill_time_ms };
	const char *k;
	json_t *val;
	unsigned i;

	if (!json_is_object(o)) {
		api_error(r, 400, "%s: rate_limiter_config.%s: not an object; give "
			  "{\"size\": N, \"refill_time\": MS}", what, name);
		return false;
	}
	json_object_foreach(o, k, val) {
		for (i = 0; i < 3 && strcmp(k, keys[i]); i++)
			;
		if (i == 3 || !json_is_integer(val) || json_integer_value(val) < 0) {
			api_error(r, 400, "%s: rate_limiter_config.%s.%.64s: %s", what, name, k,
				  i == 3 ? "unknown field; give size, one_time_burst, refill_time" :
				  "not a number of 0 or more");
			return false;
		}
		*fields[i] = (uint64_t)json_integer_value(val);
	}
	return true;
}

/* A RateLimiterConfig over the limits in *rate (a disk's, a group's):
 * each bucket given replaces that bucket whole (a size of 0 lifts its
 * limit), one left out (or null, as Cloud Hypervisor's clients write an
 * unset one) stays, as Firecracker's drive update does; {} changes
 * nothing. False (and the 400) when it is not one. */
static bool api_rate_update(const char *what, json_t *o, struct mvm_rate_limit *rate,
			    struct api_reply *r)
{
	static const char *const names[] = { "bandwidth", "ops" };
	struct mvm_token_bucket *b[] = { &rate->bw, &rate->ops };
	unsigned i, n = 0;

	for (i = 0; i < 2; i++) {
		json_t *bj = json_object_get(o, names[i]);

		if (!bj)
			continue;
		n++;
		if (json_is_null(bj))
			continue;
		*b[i] = (struct mvm_token_bucket){ 0 };
		if (!api_bucket_parse(what, names[i], bj, b[i], r))
			return false;
	}
	if (!json_is_object(o) || json_object_size(o) != n) {
		api_error(r, 400, "%s: rate_limiter_config: give an object with bandwidth and/or "
			  "ops", what);
		return false;
	}
	return true;
}

/* Cloud Hypervisor's DiskConfig into h (its strings copied into h); the
 * library checks the values (mvm_add_disk). False (and the 400) on a
 * field mvm does not know, or one it cannot honour that changes what the
 * guest gets. */
static bool api_disk_parse(const char *what, json_t *o, struct api_hotdisk *h,
			   struct api_reply *r)
{
	const char *k;
	json_t *val;

	mvm_disk_init(&h->d, NULL);
	json_object_foreach(o, k, val) {
		const char *str = json_string_value(val);
		bool is_bool = json_is_boolean(val), is_int = json_is_integer(val);
		const char *bad = NULL;

		if (!strcmp(k, "path")) {
			if (!str || !*str || strlen(str) >= sizeof(h->path))
				bad = "give the image's path";
			else
				h->d.path = strcpy(h->path, str);
		} else if (!strcmp(k, "readonly") || !strcmp(k, "direct")) {
			if (!is_bool)
				bad = "give true or false";
			else if (!strcmp(k, "readonly"))
				h->d.ro = json_is_true(val);
			else
				h->d.cache = json_is_true(val) ? MVM_CACHE_NONE : MVM_CACHE_WRITEBACK;
		} else if (!strcmp(k, "num_queues")) {
			if (!is_int || json_integer_value(val) < 1 ||
			    json_integer_value(val) > MVM_MAX_QUEUES)
				bad = "give 1 to the most queues a disk takes (64)";
			else
				h->d.queues = (unsigned)json_integer_value(val);
		} else if (!strcmp(k, "id")) {
			/* The library checks it (mvm_disk.id); the vsock
			 * device's is the API's. */
			if (!str || !*str || strlen(str) > MVM_DISK_ID_MAX)
				bad = "give 1 to 64 letters, digits, '-', '_' or '.'";
			else if (!strcmp(str, "_vsock0"))
				bad = "_vsock0 is the vsock device's; give another";
			else
				h->d.id = strcpy(h->id, str);
		} else if (!strcmp(k, "serial")) {
			if (!str || strlen(str) >= sizeof(h->serial))
				bad = "give up to 20 characters";
			else
				h->d.serial = strcpy(h->serial, str);
		} else if (!strcmp(k, "rate_limit_group")) {
			if (!str || strlen(str) >= sizeof(h->group))
				bad = "give the id of one of the VM's rate_limit_groups";
			else
				h->d.rate_limit_group = strcpy(h->group, str);
		} else if (!strcmp(k, "rate_limiter_config")) {
			if (!api_rate_update(what, val, &h->d.rate, r))
				return false;
		} else if (!strcmp(k, "queue_size")) {
			/* The most the guest's driver may use; mvm's queues
			 * offer 256 and the driver takes what is offered. */
			if (!is_int || json_integer_value(val) < 1 ||
			    json_integer_value(val) > 32768)
				bad = "give a number, 1 to 32768";
		} else if (!strcmp(k, "disable_io_uring") || !strcmp(k, "disable_aio") ||
			   !strcmp(k, "sparse")) {
			/* The host's choices: nothing the guest depends on. */
			if (!is_bool)
				bad = "give true or false";
		} else if (!strcmp(k, "iommu") || !strcmp(k, "vhost_user") ||
			   !strcmp(k, "backing_files")) {
			if (!is_bool || json_is_true(val))
				bad = json_is_true(val) ? "mvm does not have this; leave it false" :
				      "give false";
		} else if (!strcmp(k, "image_type")) {
			/* What the image holds: mvm serves raw images. */
			if (!str || strcmp(str, "Raw"))
				bad = "mvm serves raw images only; give Raw or leave it out";
		} else if (!strcmp(k, "lock_granularity")) {
			/* How the image is locked on the host: mvm locks it whole,
			 * which the guest does not see. */
			if (!str || (strcmp(str, "ByteRange") && strcmp(str, "Full")))
				bad = "give ByteRange or Full";
		} else if (!strcmp(k, "queue_affinity")) {
			/* Host CPUs for the disk's queues: the host's choice. */
			if (!json_is_array(val))
				bad = "give an array";
		} else if (!strcmp(k, "vhost_socket")) {
			bad = "mvm has no vhost-user; leave it out";
		} else if (!strcmp(k, "pci_device_id")) {
			bad = "mvm places its devices itself; leave it out";
		} else if (!strcmp(k, "pci_segment")) {
			if (!is_int || json_integer_value(val) != 0)
				bad = "mvm has PCI segment 0 only; give 0";
		} else {
			api_error(r, 400, "%s: field %.64s: unknown to mvm (docs/api.md has "
				  "the DiskConfig fields it takes)", what, k);
			return false;
		}
		if (bad) {
			api_error(r, 400, "%s: %s: %s", what, k, bad);
			return false;
		}
	}
	if (!h->d.path) {
		api_error(r, 400, "%s: no path; give the image's path", what);
		return false;
	}
	return true;
}

/* src into *dst, its strings with it. */
static void api_hotdisk_copy(struct api_hotdisk *dst, const struct api_hotdisk *src)
{
	*dst = *src;
	dst->d.path = src->d.path ? dst->path : NULL;
	dst->d.serial = src->d.serial ? dst->serial : NULL;
	dst->d.rate_limit_group = src->d.rate_limit_group ? dst->group : NULL;
	dst->d.id = src->d.id ? dst->id : NULL;
}

/* PUT vm.add-disk: DiskConfig in, PciDeviceInfo { id, bdf } out. */
static void api_vm_add_disk(struct api_vm *v, const char *body, size_t len,
			    struct api_reply *r)
{
	char err[MVM_ERR_MAX], bdf[32];
	struct api_hotdisk h;
	struct mvm_disk now;
	unsigned idx;
	bool booted;
	json_t *j;
	int ret;

	if (!api_have_vm(v, "vm.add-disk", r))
		return;
	j = api_load("vm.add-disk", body, len, "DiskConfig", r);
	if (!j)
		return;
	memset(&h, 0, sizeof(h));
	if (!api_disk_parse("vm.add-disk", j, &h, r)) {
		json_decref(j);
		return;
	}
	json_decref(j);
	idx = mvm_disk_count(v->vm);
	booted = mvm_get_state(v->vm) != MVM_VM_CREATED;
	if (!booted && v->created && v->created->ndisks == MVM_MAX_DISKS) {
		api_error(r, 500, "vm.add-disk: the VmConfig has %u disks already; mvm takes no "
			  "more", MVM_MAX_DISKS);
		return;
	}
	ret = mvm_add_disk(v->vm, &h.d, err, sizeof(err));
	if (ret) {
		api_lib_error(r, api_config_status(ret), "vm.add-disk", err);
		return;
	}
	/* Before vm.boot the disk is the VmConfig's too, as Cloud
	 * Hypervisor keeps it: a vm.shutdown and vm.boot make it again. */
	if (!booted && v->created)
		api_hotdisk_copy(&v->created->disks[v->created->ndisks++], &h);
	mvm_disk_init(&now, NULL);
	if (mvm_get_disk(v->vm, idx, &now, sizeof(now)) ||
	    mvm_disk_bus_address(v->vm, idx, bdf, sizeof(bdf)))
		strcpy(bdf, "");
	api_json(r, json_pack("{s:s,s:s}", "id", now.id ? now.id : "", "bdf", bdf));
}

static bool api_vsock_parse(const char *what, json_t *o, struct api_vmconfig *c,
			    struct api_reply *r);

/* PUT vm.add-vsock: a VsockConfig before vm.boot (the device is made
 * with the VM; mvm has no vsock hot-plug), into the VmConfig too, as
 * vm.add-disk's disks go before the boot. 200 PciDeviceInfo { id, bdf }
 * (bdf empty: the device is placed at the boot); 405 once the VM has
 * booted; 400 for a bad VsockConfig, or one the library refuses (a
 * second device, a CID below 3, a socket path too long). */
static void api_vm_add_vsock(struct api_vm *v, const char *body, size_t len,
			     struct api_reply *r)
{
	struct api_vmconfig *c = v->created;
	char err[MVM_ERR_MAX];
	json_t *j;
	int ret;

	if (!api_have_vm(v, "vm.add-vsock", r))
		return;
	j = api_load("vm.add-vsock", body, len, "VsockConfig", r);
	if (!j)
		return;
	if (v->booted || mvm_get_state(v->vm) != MVM_VM_CREATED || !c) {
		json_decref(j);
		api_error(r, 405, "vm.add-vsock: the VM has booted; mvm makes the vsock device with "
			  "the VM (no vsock hot-plug): add it before vm.boot, or in vm.create's "
			  "VmConfig");
		return;
	}
	if (c->has_vsock) {
		json_decref(j);
		api_error(r, 400, "vm.add-vsock: the VM has a vsock device already (cid %u); it "
			  "takes one", c->vsock.cid);
		return;
	}
	if (!api_vsock_parse("vm.add-vsock: VsockConfig", j, c, r)) {
		c->has_vsock = false;
		json_decref(j);
		return;
	}
	json_decref(j);
	ret = mvm_add_vsock(v->vm, &c->vsock, err, sizeof(err));
	if (ret) {
		c->has_vsock = false;
		api_lib_error(r, ret == -EINVAL || ret == -ENAMETOOLONG || ret == -EEXIST ? 400 : 500,
			      "vm.add-vsock", err);
		return;
	}
	/* vm.info shows it; vm.boot's host takes it from the VM (its
	 * sandbox's limits too). */
	v->vsock = &c->vsock;
	api_json(r, json_pack("{s:s,s:s}", "id", "_vsock0", "bdf", ""));
}

/* PUT vm.remove-device { id }: a disk vm.add-disk plugged in, with the
 * guest's cooperation (it releases the disk within 5 s). 204. */
static void api_vm_remove_device(struct api_vm *v, const char *body, size_t len,
				 struct api_reply *r)
{
	struct mvm_vsock vs;
	char err[MVM_ERR_MAX];
	json_error_t e;
	const char *id;
	json_t *j;
	int idx, ret;

	if (!api_have_vm(v, "vm.remove-device", r))
		return;
	j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &e);
	id = json_string_value(json_object_get(j, "id"));
	if (!id || json_object_size(j) != 1) {
		api_error(r, 400, "vm.remove-device: give {\"id\": \"ID\"} (vm.info lists them)");
		json_decref(j);
		return;
	}
	idx = mvm_disk_find(v->vm, id);
	mvm_vsock_init(&vs);
	if (idx < 0 && !strcmp(id, "_vsock0") && !mvm_get_vsock(v->vm, &vs, sizeof(vs))) {
		/* It is there, as vm.info says; it stays for the VM's life. */
		api_error(r, 500, "vm.remove-device: _vsock0: the vsock device cannot be removed "
			  "while the VM runs (mvm has no vsock hot-plug); vm.shutdown ends it");
		json_decref(j);
		return;
	}
	if (idx < 0) {
		api_error(r, 404, "vm.remove-device: %.64s: no such device; vm.info lists them",
			  id);
		json_decref(j);
		return;
	}
	if (mvm_get_state(v->vm) == MVM_VM_CREATED) {
		api_error(r, 405, "vm.remove-device: %.64s: the VM has not booted; vm.delete and "
			  "vm.create it without the disk", id);
		json_decref(j);
		return;
	}
	json_decref(j);
	/* One of the VM's first disks too: the library removes those in a
	 * hot-plug slot (a restored VM's that were plugged in before its
	 * snapshot) and says why not of the others. */
	ret = mvm_disk_remove(v->vm, (unsigned)idx, 0, API_REMOVE_TIMEOUT_MS, err, sizeof(err));
	if (ret) {
		api_lib_error(r, 500, "vm.remove-device", err);
		return;
	}
	r->status = 204;
}

/* PUT vm.update-disk, mvm's own (Firecracker's PATCH /drives/{id} in Cloud
 * Hypervisor's names; Cloud Hypervisor has no such endpoint): { id, path,
 * rate_limiter_config }, a new backing image and/or new limits for a
 * running disk. The limits are set first and set back if the swap then
 * fails: a request that fails leaves the disk as it was. */
static void api_vm_update_disk(struct api_vm *v, const char *body, size_t len,
			       struct api_reply *r)
{
	static const char *const what = "vm.update-disk";
	char err[MVM_ERR_MAX];
	struct mvm_rate_limit old, rate;
	struct mvm_disk d;
	json_t *j, *val, *rl;
	const char *k, *id, *path;
	int idx, ret;

	if (!api_have_vm(v, what, r))
		return;
	j = api_load(what, body, len, "DiskUpdate", r);
	if (!j)
		return;
	json_object_foreach(j, k, val) {
		if (strcmp(k, "id") && strcmp(k, "path") && strcmp(k, "rate_limiter_config")) {
			api_error(r, 400, "%s: field %.64s: unknown to mvm; give id, path, "
				  "rate_limiter_config", what, k);
			goto put_json;
		}
	}
	id = json_string_value(json_object_get(j, "id"));
	val = json_object_get(j, "path");
	path = json_string_value(val);
	rl = json_object_get(j, "rate_limiter_config");
	if (!id || (val && (!path || !*path)) || (!path && !rl)) {
		api_error(r, 400, "%s: give {\"id\": ID} (vm.info lists them) with a new "
			  "\"path\" and/or \"rate_limiter_config\"", what);
		goto put_json;
	}
	idx = mvm_disk_find(v->vm, id);
	if (idx < 0) {
		api_error(r, 404, "%s: %.64s: no such disk; vm.info lists them", what, id);
		goto put_json;
	}
	if (mvm_get_disk(v->vm, (unsigned)idx, &d, sizeof(d))) {
		api_error(r, 404, "%s: %.64s: removed already", what, id);
		goto put_json;
	}
	old = rate = d.rate;
	if (rl) {
		if (!api_rate_update(what, rl, &rate, r))
			goto put_json;
		ret = mvm_disk_set_rate_limit(v->vm, (unsigned)idx, &rate, sizeof(rate), err,
					      sizeof(err));
		if (ret) {
			api_lib_error(r, 400, what, err);
			goto put_json;
		}
	}
	if (path) {
		ret = mvm_disk_swap(v->vm, (unsigned)idx, path, err, sizeof(err));
		if (ret) {
			if (rl)
				mvm_disk_set_rate_limit(v->vm, (unsigned)idx, &old, sizeof(old), NULL, 0);
			api_lib_error(r, ret == -ENOMEM || ret == -EIO ? 500 : 400, what, err);
			goto put_json;
		}
	}
	r->status = 204;
put_json:
	json_decref(j);
}

/* A JSON string of at most len - 1 bytes into buf; false when it is
 * not one. */
static bool api_str(json_t *val, char *buf, size_t len)
{
	const char *str = json_string_value(val);

	if (!str || !*str || strlen(str) >= len)
		return false;
	strcpy(buf, str);
	return true;
}

/* An object's members against a list of what mvm takes: false (and the
 * 400 naming it) for another one. */
static bool api_known(const char *what, json_t *o, const char *const *keys, struct api_reply *r)
{
	const char *k;
	json_t *val;
	unsigned i;

	if (!json_is_object(o)) {
		api_error(r, 400, "%s: not an object", what);
		return false;
	}
	json_object_foreach(o, k, val) {
		for (i = 0; keys[i] && strcmp(keys[i], k); i++)
			;
		if (!keys[i]) {
			api_error(r, 400, "%s.%.64s: unknown to mvm (docs/api.md has the fields "
				  "it takes)", what, k);
			return false;
		}
	}
	return true;
}

/* A boolean member that mvm has only as false (400 otherwise). */
static bool api_false_only(const char *what, json_t *o, const char *key, struct api_reply *r)
{
	json_t *val = json_object_get(o, key);

	if (val && !json_is_false(val)) {
		api_error(r, 400, "%s.%s: mvm does not have this; give false or leave it out",
			  what, key);
		return false;
	}
	return true;
}

/* PUT vm.resize-disk: Cloud Hypervisor's VmResizeDisk ({"id",
 * "desired_size"} in bytes) to mvm_disk_resize. 204; 404 without a VM or
 * such a disk; 405 before the boot or after the VM ended; 400 for a size
 * the disk cannot take (not a multiple of 512, a read-only disk, a host
 * block device); 500 for the host's failure (no space). */
static void api_vm_resize_disk(struct api_vm *v, const char *body, size_t len,
			       struct api_reply *r)
{
	static const char *const what = "vm.resize-disk";
	static const char *const keys[] = { "id", "desired_size", NULL };
	char err[MVM_ERR_MAX];
	struct mvm_disk d;
	json_t *j, *size;
	const char *id;
	int idx, ret;

	if (!api_have_vm(v, what, r))
		return;
	j = api_load(what, body, len, "VmResizeDisk", r);
	if (!j)
		return;
	if (!api_known(what, j, keys, r))
		goto put_json;
	id = json_string_value(json_object_get(j, "id"));
	size = json_object_get(j, "desired_size");
	if (!id || !json_is_integer(size) || json_integer_value(size) <= 0) {
		api_error(r, 400, "%s: give {\"id\": ID, \"desired_size\": BYTES} (vm.info lists "
			  "the disks' ids), a size above 0", what);
		goto put_json;
	}
	idx = mvm_disk_find(v->vm, id);
	if (idx < 0 || mvm_get_disk(v->vm, (unsigned)idx, &d, sizeof(d))) {
		api_error(r, 404, "%s: %.64s: no such disk; vm.info lists them", what, id);
		goto put_json;
	}
	if (!api_booted(v, what, r))
		goto put_json;
	ret = mvm_disk_resize(v->vm, (unsigned)idx, (uint64_t)json_integer_value(size), err,
			      sizeof(err));
	if (!ret)
		r->status = 204;
	else if (ret == -ESHUTDOWN)
		api_lib_error(r, 405, what, err);
	else if (ret == -EINVAL || ret == -EROFS || ret == -EOPNOTSUPP || ret == -EFBIG)
		api_lib_error(r, 400, what, err);
	else
		api_lib_error(r, 500, what, err);
put_json:
	json_decref(j);
}

static bool api_payload_parse(json_t *o, struct api_vmconfig *c, struct api_reply *r)
{
	static const char *const keys[] = { "kernel", "initramfs", "cmdline", "firmware",
					    "igvm", "host_data", NULL };
	static const char *const fw[] = { "firmware", "igvm", "host_data" };
	json_t *val;
	unsigned i;

	if (!api_known("vm.create: payload", o, keys, r))
		return false;
	for (i = 0; i < 3; i++)
		if (json_object_get(o, fw[i])) {
			api_error(r, 400, "vm.create: payload.%s: mvm boots a kernel directly; "
				  "give payload.kernel", fw[i]);
			return false;
		}
	if (!api_str(json_object_get(o, "kernel"), c->kernel, sizeof(c->kernel))) {
		api_error(r, 400, "vm.create: payload.kernel: give the kernel's path (a bzImage "
			  "or a vmlinux with a PVH note)");
		return false;
	}
	c->vm.kernel = c->kernel;
	val = json_object_get(o, "initramfs");
	if (val) {
		if (!api_str(val, c->initrd, sizeof(c->initrd))) {
			api_error(r, 400, "vm.create: payload.initramfs: give the initramfs' path");
			return false;
		}
		c->vm.initrd = c->initrd;
	}
	val = json_object_get(o, "cmdline");
	if (val) {
		if (!json_is_string(val) || strlen(json_string_value(val)) >= sizeof(c->cmdline)) {
			api_error(r, 400, "vm.create: payload.cmdline: give a string of less than "
				  "%zu bytes", sizeof(c->cmdline));
			return false;
		}
		c->vm.cmdline = strcpy(c->cmdline, json_string_value(val));
	}
	return true;
}

/* cpus: boot_vcpus; max_vcpus above it is CPU hot-plug, which mvm does
 * not offer: the guest gets boot_vcpus, as it would until a hot-plug. */
static bool api_cpus_parse(json_t *o, struct api_vmconfig *c, struct api_reply *r)
{
	static const char *const keys[] = { "boot_vcpus", "max_vcpus", "topology",
					    "kvm_hyperv", "max_phys_bits", "affinity",
					    "features", "nested", "core_scheduling", NULL };
	json_t *boot = json_object_get(o, "boot_vcpus"), *max = json_object_get(o, "max_vcpus");
	json_t *nested = json_object_get(o, "nested"), *sched = json_object_get(o, "core_scheduling");

	if (!api_known("vm.create: cpus", o, keys, r) ||
	    !api_false_only("vm.create: cpus", o, "kvm_hyperv", r))
		return false;
	/* mvm's vCPUs have SVM or VMX wherever KVM offers nested
	 * virtualization, as Cloud Hypervisor's default (true) has them. */
	if (nested && !json_is_true(nested)) {
		api_error(r, 400, "vm.create: cpus.nested: mvm's guests may run VMs where KVM "
			  "offers it; give true or leave it out");
		return false;
	}
	/* Which vCPU threads may share a core: the host's scheduling. */
	if (sched && (!json_is_string(sched) || (strcmp(json_string_value(sched), "Vm") &&
						strcmp(json_string_value(sched), "Vcpu") &&
						strcmp(json_string_value(sched), "Off")))) {
		api_error(r, 400, "vm.create: cpus.core_scheduling: give Vm, Vcpu or Off");
		return false;
	}
	if (boot) {
		if (!json_is_integer(boot) || json_integer_value(boot) < 1 ||
		    json_integer_value(boot) > MVM_MAX_CPUS) {
			api_error(r, 400, "vm.create: cpus.boot_vcpus: give 1 to %d", MVM_MAX_CPUS);
			return false;
		}
		c->vm.cpus = (unsigned)json_integer_value(boot);
	}
	if (max && (!json_is_integer(max) || json_integer_value(max) < c->vm.cpus)) {
		api_error(r, 400, "vm.create: cpus.max_vcpus: give at least boot_vcpus (%u)",
			  c->vm.cpus);
		return false;
	}
	return true;
}

static bool api_memory_parse(json_t *o, struct api_vmconfig *c, struct api_reply *r)
{
	static const char *const keys[] = { "size", "mergeable", "shared", "hugepages",
					    "hugepage_size", "thp", "prefault", "hotplug_method",
					    "hotplug_size", "hotplugged_size", "zones", "reserve",
					    NULL };
	json_t *size = json_object_get(o, "size"), *zones = json_object_get(o, "zones");
	json_t *reserve = json_object_get(o, "reserve");

	if (!api_known("vm.create: memory", o, keys, r) ||
	    !api_false_only("vm.create: memory", o, "shared", r) ||
	    !api_false_only("vm.create: memory", o, "hugepages", r))
		return false;
	/* reserve: whether the host reserves swap for the RAM up front. */
	if (reserve && !json_is_boolean(reserve)) {
		api_error(r, 400, "vm.create: memory.reserve: give true or false");
		return false;
	}
	if ((zones && !json_is_array(zones)) || json_array_size(zones)) {
		api_error(r, 400, "vm.create: memory.zones: mvm has one memory region; give size");
		return false;
	}
	if (size) {
		if (!json_is_integer(size) || json_integer_value(size) <= 0) {
			api_error(r, 400, "vm.create: memory.size: give the guest's RAM in bytes");
			return false;
		}
		c->vm.mem = (uint64_t)json_integer_value(size);
	}
	return true;
}

/* serial and console: where the guest's console goes. mvm has one, on
 * its stdin and stdout (Tty), or dropped (Off, Null). */
static bool api_console_parse(const char *what, json_t *o, struct api_vmconfig *c,
			      struct api_reply *r)
{
	static const char *const keys[] = { "mode", "file", "socket", "iommu", "id",
					    "pci_segment", "pci_device_id", NULL };
	const char *mode = json_string_value(json_object_get(o, "mode"));
	char path[24];

	snprintf(path, sizeof(path), "vm.create: %s", what);
	if (!api_known(path, o, keys, r) || !api_false_only(path, o, "iommu", r))
		return false;
	if (!mode || (strcmp(mode, "Tty") && strcmp(mode, "Off") && strcmp(mode, "Null"))) {
		api_error(r, 400, "vm.create: %s.mode: give Tty (mvm's stdin and stdout), Off or "
			  "Null", what);
		return false;
	}
	/* The serial port is the guest's console; "console" is Cloud
	 * Hypervisor's virtio-console, which mvm has not: Off only. */
	if (!strcmp(what, "serial")) {
		c->console_off = strcmp(mode, "Tty") != 0;
		strcpy(c->serial_mode, mode);
	} else if (strcmp(mode, "Off")) {
		api_error(r, 400, "vm.create: console.mode: mvm has no virtio-console; give Off");
		return false;
	}
	return true;
}

/* A VsockConfig into c (what names it in messages: "vm.create: vsock"). */
static bool api_vsock_parse(const char *what, json_t *o, struct api_vmconfig *c,
			    struct api_reply *r)
{
	static const char *const keys[] = { "cid", "socket", "id", "iommu", "pci_segment",
					    "pci_device_id", NULL };
	json_t *cid = json_object_get(o, "cid"), *seg = json_object_get(o, "pci_segment");

	if (!api_known(what, o, keys, r) || !api_false_only(what, o, "iommu", r))
		return false;
	if (seg && (!json_is_integer(seg) || json_integer_value(seg))) {
		api_error(r, 400, "%s.pci_segment: mvm has PCI segment 0 only; give 0", what);
		return false;
	}
	if (json_object_get(o, "pci_device_id")) {
		api_error(r, 400, "%s.pci_device_id: mvm places its devices itself; leave it "
			  "out", what);
		return false;
	}
	/* The device's id is mvm's (_vsock0); one given must still be one. */
	if (json_object_get(o, "id") && !json_is_string(json_object_get(o, "id"))) {
		api_error(r, 400, "%s.id: give a string (mvm names the device _vsock0)", what);
		return false;
	}
	mvm_vsock_init(&c->vsock);
	if (!json_is_integer(cid) || json_integer_value(cid) < 0 ||
	    json_integer_value(cid) > UINT32_MAX ||
	    !api_str(json_object_get(o, "socket"), c->vsock_socket, sizeof(c->vsock_socket))) {
		api_error(r, 400, "%s: give cid (3 or more) and socket (a path)", what);
		return false;
	}
	c->vsock.cid = (uint32_t)json_integer_value(cid);
	c->vsock.socket = c->vsock_socket;
	c->has_vsock = true;
	return true;
}

/* VmConfig.rate_limit_groups, Cloud Hypervisor's RateLimitGroupConfig
 * array ({ id, rate_limiter_config }), into c: groups its disks name in
 * rate_limit_group. The library checks ids and limits
 * (mvm_rate_group_new) and refuses one id twice (mvm_add_rate_group). */
static bool api_groups_parse(json_t *a, struct api_vmconfig *c, struct api_reply *r)
{
	unsigned i;

	if (!json_is_array(a)) {
		api_error(r, 400, "vm.create: rate_limit_groups: give an array of "
			  "RateLimitGroupConfig");
		return false;
	}
	if (json_array_size(a) > MVM_MAX_DISKS) {
		api_error(r, 400, "vm.create: rate_limit_groups: more than %u", MVM_MAX_DISKS);
		return false;
	}
	for (i = 0; i < json_array_size(a); i++) {
		static const char *const keys[] = { "id", "rate_limiter_config", NULL };
		struct mvm_rate_group_config *g = &c->groups[i];
		json_t *o = json_array_get(a, i);
		const char *id = json_string_value(json_object_get(o, "id"));
		char what[48];

		snprintf(what, sizeof(what), "vm.create: rate_limit_groups[%u]", i);
		if (!json_is_object(o)) {
			api_error(r, 400, "%s: not a RateLimitGroupConfig object", what);
			return false;
		}
		if (!api_known(what, o, keys, r))
			return false;
		if (!id || !*id || strlen(id) > MVM_ID_MAX) {
			api_error(r, 400, "%s: id: give 1 to %d letters, digits, '-', '_' or '.'",
				  what, MVM_ID_MAX);
			return false;
		}
		if (!json_object_get(o, "rate_limiter_config")) {
			api_error(r, 400, "%s: no rate_limiter_config; give its bandwidth and/or ops",
				  what);
			return false;
		}
		mvm_rate_group_config_init(g);
		g->id = strcpy(c->group_ids[i], id);
		if (!api_rate_update(what, json_object_get(o, "rate_limiter_config"), &g->rate, r))
			return false;
		c->ngroups++;
	}
	return true;
}

/* Cloud Hypervisor's VmConfig into c, field by field as docs/api.md
 * says: taken, ignored where nothing the guest gets depends on it, or
 * refused with a 400 that names it. The library checks the values. */
static bool api_vmconfig_parse(json_t *o, struct api_vmconfig *c, struct api_reply *r)
{
	static const char *const keys[] = {
		"payload", "cpus", "memory", "disks", "serial", "console", "vsock", "pvpanic",
		"net", "fs", "pmem", "devices", "user_devices", "vdpa", "numa", "sgx_epc",
		"tpm", "rng", "balloon", "watchdog", "iommu", "platform", "landlock_enable",
		"landlock_rules", "preserved_fds", "rate_limit_groups", "debug_console", "rtc",
		"pci_segments", "generic_vhost_user", NULL };
	static const char *const absent[] = { "net", "fs", "pmem", "devices", "user_devices",
					      "vdpa", "numa", "sgx_epc", "landlock_rules",
					      "preserved_fds", "pci_segments",
					      "generic_vhost_user", NULL };
	json_t *val, *disks;
	unsigned i;

	mvm_config_init(&c->vm);
	if (!api_known("vm.create: VmConfig", o, keys, r) ||
	    !api_false_only("vm.create: VmConfig", o, "iommu", r) ||
	    !api_false_only("vm.create: VmConfig", o, "watchdog", r) ||
	    !api_false_only("vm.create: VmConfig", o, "landlock_enable", r))
		return false;
	for (i = 0; absent[i]; i++) {
		val = json_object_get(o, absent[i]);
		if (val && !json_is_null(val) && !(json_is_array(val) && !json_array_size(val))) {
			api_error(r, 400, "vm.create: %s: mvm does not have this (docs/api.md); "
				  "leave it out", absent[i]);
			return false;
		}
	}
	for (i = 0; i < 4; i++) {
		static const char *const devs[] = { "tpm", "balloon", "debug_console", "rng" };

		val = json_object_get(o, devs[i]);
		/* rng: Cloud Hypervisor adds one by default; without it the
		 * guest seeds its entropy itself, as it does under mvm. A
		 * debug console whose mode is Off is none. */
		if (i == 2 && json_is_object(val) &&
		    !strcmp(json_string_value(json_object_get(val, "mode")) ?: "", "Off"))
			continue;
		if (val && !json_is_null(val) && i < 3) {
			api_error(r, 400, "vm.create: %s: mvm does not have this device; leave it "
				  "out", devs[i]);
			return false;
		}
	}
	if (!json_object_get(o, "payload")) {
		api_error(r, 400, "vm.create: no payload; give payload.kernel");
		return false;
	}
	/* rtc: where Cloud Hypervisor puts its clock device; the guest
	 * keeps its time with kvm-clock. */
	val = json_object_get(o, "rtc");
	if (val) {
		static const char *const rtc_keys[] = { "id", "pci_segment", "pci_device_id",
							"iommu", NULL };

		if (!api_known("vm.create: rtc", val, rtc_keys, r) ||
		    !api_false_only("vm.create: rtc", val, "iommu", r))
			return false;
	}
	if (!api_payload_parse(json_object_get(o, "payload"), c, r) ||
	    ((val = json_object_get(o, "cpus")) && !api_cpus_parse(val, c, r)) ||
	    ((val = json_object_get(o, "memory")) && !api_memory_parse(val, c, r)) ||
	    ((val = json_object_get(o, "serial")) && !api_console_parse("serial", val, c, r)) ||
	    ((val = json_object_get(o, "console")) && !api_console_parse("console", val, c, r)) ||
	    ((val = json_object_get(o, "vsock")) && !json_is_null(val) &&
	     !api_vsock_parse("vm.create: vsock", val, c, r)) ||
	    ((val = json_object_get(o, "rate_limit_groups")) && !json_is_null(val) &&
	     !api_groups_parse(val, c, r)))
		return false;
	val = json_object_get(o, "pvpanic");
	if (val) {
		if (!json_is_boolean(val)) {
			api_error(r, 400, "vm.create: pvpanic: give true or false");
			return false;
		}
		c->vm.pvpanic = json_is_true(val);
	}
	disks = json_object_get(o, "disks");
	if (disks && !json_is_null(disks) && !json_is_array(disks)) {
		api_error(r, 400, "vm.create: disks: give an array of DiskConfig");
		return false;
	}
	if (json_array_size(disks) > MVM_MAX_DISKS) {
		api_error(r, 400, "vm.create: disks: more than %u", MVM_MAX_DISKS);
		return false;
	}
	for (i = 0; i < json_array_size(disks); i++) {
		struct api_hotdisk *h = &c->disks[i];
		char what[32];

		snprintf(what, sizeof(what), "vm.create: disks[%u]", i);
		if (!json_is_object(json_array_get(disks, i))) {
			api_error(r, 400, "%s: not a DiskConfig object", what);
			return false;
		}
		if (!api_disk_parse(what, json_array_get(disks, i), h, r))
			return false;
		c->ndisks++;
	}
	return true;
}

/* PUT vm.create: a VmConfig; the VM is made (its kernel and images
 * checked and opened) but does not run until vm.boot. 204. */
static void api_vm_create(struct api_vm *v, const char *body, size_t len, struct api_reply *r)
{
	struct api_vmconfig *c;
	char err[MVM_ERR_MAX];
	json_t *j;
	int ret;

	j = api_load("vm.create", body, len, "VmConfig", r);
	if (!j)
		return;
	if (v->vm || v->created) {
		api_error(r, 405, "vm.create: a VM exists already (vm.info describes it; vm.delete "
			  "forgets it)");
		json_decref(j);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		json_decref(j);
		api_error(r, 500, "vm.create: out of memory");
		return;
	}
	if (!api_vmconfig_parse(j, c, r)) {
		json_decref(j);
		free(c);
		return;
	}
	json_decref(j);
	ret = v->host->create(v, c, err, sizeof(err));
	if (ret) {
		free(c);
		api_lib_error(r, api_config_status(ret), "vm.create", err);
		return;
	}
	v->created = c;
	r->status = 204;
}

/* PUT vm.boot: the VM vm.create made starts. 204. */
static void api_vm_boot(struct api_vm *v, struct api_reply *r)
{
	char err[MVM_ERR_MAX];
	int ret;

	if (!v->vm && !v->created) {
		api_error(r, 404, "vm.boot: no VM has been created; vm.create first");
		return;
	}
	if (v->booted) {
		api_error(r, 405, "vm.boot: the VM has booted already");
		return;
	}
	/* Shut down: made again from its VmConfig, as vm.create made it. */
	if (!v->vm) {
		ret = v->host->create(v, v->created, err, sizeof(err));
		if (ret) {
			api_lib_error(r, 500, "vm.boot", err);
			return;
		}
	}
	ret = v->host->boot(v, err, sizeof(err));
	if (ret) {
		char again[MVM_ERR_MAX];

		api_lib_error(r, 500, "vm.boot", err);
		/* A VM whose preparing failed cannot be prepared again: one
		 * made afresh from its VmConfig stays created, as before the
		 * boot (else it is shut down, and the next vm.boot tries). */
		if (v->created && v->vm) {
			mvm_destroy(v->vm);
			v->vm = NULL;
			if (v->host->create(v, v->created, again, sizeof(again)))
				v->vm = NULL;
		}
		return;
	}
	v->booted = true;
	r->status = 204;
}

void api_vm_fini(struct api_vm *v)
{
	free(v->created);
	v->created = NULL;
}

void api_vm_keep_disks(struct api_vm *v)
{
	struct api_vmconfig *c = v->created;
	unsigned i, n = 0;

	if (!c || !v->vm)
		return;
	/* The library holds each disk's options as they were given or
	 * changed since; removed ones are -ENOENT. Each string fits: the
	 * API or the VmConfig gave it within these bounds. */
	for (i = 0; i < mvm_disk_count(v->vm) && n < MVM_MAX_DISKS; i++) {
		struct api_hotdisk h;

		memset(&h, 0, sizeof(h));
		mvm_disk_init(&h.d, NULL);
		if (mvm_get_disk(v->vm, i, &h.d, sizeof(h.d)))
			continue;
		if (h.d.path)
			snprintf(h.path, sizeof(h.path), "%s", h.d.path);
		if (h.d.serial)
			snprintf(h.serial, sizeof(h.serial), "%s", h.d.serial);
		if (h.d.rate_limit_group)
			snprintf(h.group, sizeof(h.group), "%s", h.d.rate_limit_group);
		if (h.d.id)
			snprintf(h.id, sizeof(h.id), "%s", h.d.id);
		api_hotdisk_copy(&c->disks[n++], &h);
	}
	c->ndisks = n;
}

bool api_vm_relaunch(struct api_vm *v)
{
	enum api_ending why = v->ending;

	v->vm = NULL;
	v->booted = false;
	v->ending = API_END_NONE;
	if (why == API_END_DELETE || !v->created) {
		api_vm_fini(v);
		v->vsock = NULL;
	}
	return why == API_END_REBOOT && v->created;
}

static void api_ping(struct api_reply *r)
{
	api_json(r, json_pack("{s:s,s:s,s:I,s:[]}", "build_version", mvm_version(), "version",
			      mvm_version(), "pid", (json_int_t)getpid(), "features"));
}

/* Whether a body is JSON (an endpoint that takes one), else the 400. */
static bool api_body_ok(const char *name, const char *body, size_t len, struct api_reply *r)
{
	json_t *j;

	if (!len) {
		api_error(r, 400, "%s: the request has no body; send its JSON", name);
		return false;
	}
	j = api_load(name, body, len, NULL, r);
	json_decref(j);
	return j != NULL;
}

/* A path from Cloud Hypervisor's file:// URL (field name:
 * destination_url, source_url) in j, which may hold only the fields in
 * also besides it: the path, or NULL and the 400, which says what to give
 * ("file:///" what, the path's meaning). */
static const char *api_file_url(const char *name, json_t *j, const char *field,
				const char *const *also, const char *what, const char *meaning,
				struct api_reply *r)
{
	const char *url, *key, *const *a;
	json_t *val;

	json_object_foreach(j, key, val) {
		for (a = also; *a && strcmp(*a, key); a++)
			;
		if (strcmp(key, field) && !*a) {
			api_error(r, 400, "%s: field %.64s: not one mvm takes; give %s", name, key,
				  field);
			return NULL;
		}
	}
	url = json_string_value(json_object_get(j, field));
	if (!url || strncmp(url, "file://", 7) || !url[7]) {
		api_error(r, 400, "%s: %s %.128s: give \"file:///%s\", %s", name, field,
			  url ? url : "missing", what, meaning);
		return NULL;
	}
	return url + 7;
}

/* PUT vm.restore, Cloud Hypervisor's RestoreConfig { source_url:
 * "file:///DIR", prefault, memory_restore_mode, resume }: where mvm was
 * started with --api-socket alone and no VM was made, the VM restored
 * from DIR and left paused, as Cloud Hypervisor leaves it (vm.resume runs
 * it), or running with resume: true. prefault and memory_restore_mode
 * are taken and have no effect (mvm maps the memory file and the guest's
 * touches bring pages in). 204. */
static void api_vm_restore(struct api_vm *v, const char *body, size_t len,
			   struct api_reply *r)
{
	static const char *const also[] = { "prefault", "memory_restore_mode", "resume",
					    "zone_updates", NULL };
	char err[MVM_ERR_MAX];
	const char *dir, *mode;
	json_t *j, *pf, *resume, *zones;
	int ret;

	if (!v->host) {
		if (len && !api_body_ok("vm.restore", body, len, r))
			return;
		api_error(r, 501, "vm.restore: this mvm was given its VM on the command line; run "
			  "mvm --api-socket PATH alone to restore one through the API, or mvm "
			  "--restore DIR");
		return;
	}
	if (v->vm || v->created) {
		api_error(r, 405, "vm.restore: a VM exists already");
		return;
	}
	j = api_load("vm.restore", body, len, "RestoreConfig", r);
	if (!j)
		return;
	pf = json_object_get(j, "prefault");
	resume = json_object_get(j, "resume");
	zones = json_object_get(j, "zone_updates");
	mode = json_string_value(json_object_get(j, "memory_restore_mode"));
	if ((pf && !json_is_boolean(pf)) || (resume && !json_is_boolean(resume))) {
		api_error(r, 400, "vm.restore: %s: give true or false",
			  pf && !json_is_boolean(pf) ? "prefault" : "resume");
		json_decref(j);
		return;
	}
	/* Copy or OnDemand: mvm maps the memory file either way (pages come
	 * in at the guest's first touch), which the guest does not see. */
	if (json_object_get(j, "memory_restore_mode") &&
	    (!mode || (strcmp(mode, "Copy") && strcmp(mode, "OnDemand")))) {
		api_error(r, 400, "vm.restore: memory_restore_mode: give Copy or OnDemand");
		json_decref(j);
		return;
	}
	if (zones && (!json_is_array(zones) || json_array_size(zones))) {
		api_error(r, 400, "vm.restore: zone_updates: mvm has one memory region, no zones; "
			  "leave it out");
		json_decref(j);
		return;
	}
	dir = api_file_url("vm.restore", j, "source_url", also, "DIR", "the snapshot's directory",
			   r);
	if (!dir) {
		json_decref(j);
		return;
	}
	ret = v->host->restore(v, dir, json_is_true(resume), err, sizeof(err));
	json_decref(j);
	if (ret) {
		api_lib_error(r, ret == -EINVAL || ret == -ENOENT || ret == -EPROTO ? 400 : 500,
			      "vm.restore", err);
		return;
	}
	v->booted = true;
	r->status = 204;
}

/* What vm.snapshot and vm.coredump share: a paused VM written to a path
 * from Cloud Hypervisor's { destination_url: "file:///PATH" } (schema
 * names the body, path_kind and meaning the 400 for a bad URL) by
 * write, mvm_snapshot or mvm_coredump. 204; 405 while it runs or after it
 * ended; 400 for a path this thread may not write (under --sandbox on,
 * one not beneath --snapshot-dir) or that names no file; 500 for what it
 * cannot write (a device a snapshot cannot carry yet) or a file error;
 * 404 without a VM. */
static void api_vm_write(struct api_vm *v, const char *name, const char *schema,
			 const char *path_kind, const char *meaning,
			 int (*write)(struct mvm *, const char *, char *, size_t), const char *body,
			 size_t len, struct api_reply *r)
{
	static const char *const also[] = { NULL };
	char err[MVM_ERR_MAX];
	const char *path;
	json_t *j;
	int ret;

	if (!api_have_vm(v, name, r))
		return;
	j = api_load(name, body, len, schema, r);
	if (!j)
		return;
	path = api_file_url(name, j, "destination_url", also, path_kind, meaning, r);
	if (!path) {
		json_decref(j);
		return;
	}
	ret = write(v->vm, path, err, sizeof(err));
	json_decref(j);
	if (!ret)
		r->status = 204;
	else if (ret == -EINVAL && !api_booted(v, name, r))
		return;         /* the path was fine: the VM is not booted */
	else
		api_lib_error(r, ret == -EINVAL || ret == -ESHUTDOWN ? 405 :
			      ret == -EPERM || ret == -ENAMETOOLONG || ret == -EISDIR ? 400 : 500, name,
			      err);
}

static void api_route(struct api_vm *v, const char *method, const char *url, const char *body,
		      size_t len, struct api_reply *r)
{
	static const struct {
		const char *name;
		enum api_method method;
	} served[] = {
		{ "vmm.ping", API_GET }, { "vm.info", API_GET }, { "vm.counters", API_GET },
		{ "vm.pause", API_PUT }, { "vm.resume", API_PUT }, { "vm.shutdown", API_PUT },
		{ "vmm.shutdown", API_PUT }, { "vm.add-disk", API_PUT },
		{ "vm.remove-device", API_PUT }, { "vm.create", API_PUT }, { "vm.boot", API_PUT },
		{ "vm.snapshot", API_PUT }, { "vm.restore", API_PUT },
		{ "vm.update-disk", API_PUT }, { "vm.delete", API_PUT }, { "vm.reboot", API_PUT },
		{ "vm.nmi", API_PUT }, { "vm.coredump", API_PUT }, { "vm.power-button", API_PUT },
		{ "vm.add-vsock", API_PUT }, { "vm.resize-disk", API_PUT },
	};
	enum api_method m;
	const char *name;
	unsigned i;

	r->status = 500;
	r->body = NULL;
	r->allow = NULL;
	if (!strcmp(method, "GET"))
		m = API_GET;
	else if (!strcmp(method, "PUT"))
		m = API_PUT;
	else {
		api_error(r, 405, "method %.16s: the API takes GET and PUT", method);
		r->allow = "GET, PUT";
		return;
	}
	if (strncmp(url, API_PREFIX, strlen(API_PREFIX))) {
		api_error(r, 404, "%.128s: not an API path; they begin with " API_PREFIX, url);
		return;
	}
	name = url + strlen(API_PREFIX);
	api_wait_started(v);
	for (i = 0; i < sizeof(served) / sizeof(served[0]); i++) {
		if (strcmp(name, served[i].name))
			continue;
		if (m != served[i].method) {
			r->allow = served[i].method == API_GET ? "GET" : "PUT";
			api_error(r, 405, "%s takes %s", name, r->allow);
			return;
		}
		switch (i) {
		case 0: api_ping(r); return;
		case 1: api_vm_info(v, r); return;
		case 2: api_vm_counters(v, r); return;
		case 3: api_vm_call(v, name, mvm_pause, r); return;
		case 4: api_vm_call(v, name, mvm_resume, r); return;
		case 7: api_vm_add_disk(v, body, len, r); return;
		case 11:
			api_vm_write(v, name, "SnapshotConfig", "DIR", "the snapshot's directory",
				     mvm_snapshot, body, len, r);
			return;
		case 12: api_vm_restore(v, body, len, r); return;
		case 13: api_vm_update_disk(v, body, len, r); return;
		case 14: api_vm_delete(v, r); return;
		case 15: api_vm_reboot(v, r); return;
		case 16:
		case 18:
			if (len && !api_body_ok(name, body, len, r))
				return;
			api_vm_call(v, name, i == 16 ? mvm_nmi : mvm_power_button, r);
			return;
		case 17:
			api_vm_write(v, name, "VmCoredumpData", "FILE", "the core file", mvm_coredump,
				     body, len, r);
			return;
		case 8: api_vm_remove_device(v, body, len, r); return;
		case 19: api_vm_add_vsock(v, body, len, r); return;
		case 20: api_vm_resize_disk(v, body, len, r); return;
		case 9:
		case 10:
			if (!v->host && len && !api_body_ok(name, body, len, r))
				return;
			if (!api_host_ok(v, name, r))
				return;
			if (i == 9)
				api_vm_create(v, body, len, r);
			else
				api_vm_boot(v, r);
			return;
		default: api_shutdown(v, name, r); return;
		}
	}
	for (i = 0; i < sizeof(api_unsupported) / sizeof(api_unsupported[0]); i++) {
		if (strcmp(name, api_unsupported[i]))
			continue;
		if (m != API_PUT) {
			api_error(r, 405, "%s takes PUT", name);
			r->allow = "PUT";
			return;
		}
		if (len && !api_body_ok(name, body, len, r))
			return;
		api_error(r, 501, "%s: mvm does not support this endpoint yet (docs/api.md); the "
			  "VM is as it was", name);
		return;
	}
	api_error(r, 404, "%.128s: no such endpoint", name);
}

static void api_log_once(struct api_vm *v, enum api_kind k, const char *what)
{
	char line[768];

	if (v->counts.logged[k])
		return;
	v->counts.logged[k] = true;
	if (!v->log)
		return;
	snprintf(line, sizeof(line), "API: %s (the first of its kind: later ones are counted, "
		 "in vm.counters' _api, not logged)", what);
	v->log(v->log_opaque, line);
}

void api_account(struct api_vm *v, const char *method, const char *url,
		 const struct api_reply *r)
{
	static const unsigned status[] = {
		[API_K_400] = 400, [API_K_404] = 404, [API_K_405] = 405, [API_K_409] = 409,
		[API_K_413] = 413, [API_K_500] = 500, [API_K_501] = 501,
	};
	enum api_kind k = API_K_OTHER;
	char what[640];
	json_t *j;
	unsigned i;

	v->counts.requests++;
	if (r->status < 400)
		return;
	for (i = 0; i < API_K_OTHER; i++)
		if (status[i] == r->status)
			k = (enum api_kind)i;
	v->counts.kind[k]++;
	if (v->counts.logged[k])
		return;
	/* The message of the answer's body (Cloud Hypervisor's shape). */
	j = r->body ? json_loads(r->body, 0, NULL) : NULL;
	snprintf(what, sizeof(what), "%.16s %.128s: HTTP %u: %s", method, url, r->status,
		 json_string_value(json_array_get(j, 0)) ?: "(no message)");
	json_decref(j);
	/* A client's bytes go to a log: nothing that could end its line. */
	for (char *p = what; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	api_log_once(v, k, what);
}

void api_account_slow(struct api_vm *v)
{
	v->counts.kind[API_K_SLOW]++;
	api_log_once(v, API_K_SLOW, "a connection shut: its request and answer took more than "
		     "their 30 s");
}

void api_handle(struct api_vm *v, const char *method, const char *url, const char *body,
		size_t len, struct api_reply *r)
{
	api_route(v, method, url, body, len, r);
	api_account(v, method, url, r);
}
