/* The request path of mvm's REST API (vmm/api/api.h): routing, Cloud
 * Hypervisor's JSON shapes, the library calls. */
#include "vmm/api/api.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define API_PREFIX "/api/v1/"

enum api_method { API_GET, API_PUT };

/* Cloud Hypervisor's endpoints that mvm does not serve (yet): refused
 * with 501 and the endpoint's name, once a body they take is valid JSON
 * (docs/api.md says which and why). */
static const char *const api_unsupported[] = {
	"vm.create", "vm.boot", "vm.delete", "vm.reboot", "vm.power-button", "vm.resize",
	"vm.resize-zone", "vm.add-device", "vm.add-disk", "vm.add-fs", "vm.add-pmem",
	"vm.add-net", "vm.add-vsock", "vm.add-vdpa", "vm.add-user-device", "vm.remove-device",
	"vm.snapshot", "vm.coredump", "vm.restore", "vm.receive-migration",
	"vm.send-migration", "vm.nmi",
};

/* An error: Cloud Hypervisor answers a JSON string that says what went
 * wrong. */
__attribute__((format(printf, 3, 4)))
static void api_error(struct api_reply *r, unsigned status, const char *fmt, ...)
{
	char msg[512];
	json_t *s;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->status = status;
	s = json_string(msg);
	r->body = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
	json_decref(s);
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

static const char *api_state(const struct api_vm *v)
{
	if (!v->vm)
		return "Created";
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

/* A disk as Cloud Hypervisor's DiskConfig. */
static json_t *api_disk(const struct mvm_disk *d, unsigned i)
{
	char id[16];
	json_t *o, *rl, *bw, *ops;

	snprintf(id, sizeof(id), "_disk%u", i);
	o = json_pack("{s:s,s:b,s:b,s:I,s:I,s:s}", "path", d->path, "readonly", d->ro,
		      "direct", d->cache == MVM_CACHE_NONE, "num_queues", (json_int_t)d->queues,
		      "queue_size", (json_int_t)256, "id", id);
	if (!o)
		return NULL;
	if (d->serial)
		json_object_set_new(o, "serial", json_string(d->serial));
	if (d->rate_limit_group)
		json_object_set_new(o, "rate_limit_group", json_string(d->rate_limit_group));
	bw = api_bucket(&d->rate.bw);
	ops = api_bucket(&d->rate.ops);
	if (bw || ops) {
		rl = json_object();
		if (bw)
			json_object_set_new(rl, "bandwidth", bw);
		if (ops)
			json_object_set_new(rl, "ops", ops);
		json_object_set_new(o, "rate_limiter_config", rl);
	}
	return o;
}

/* GET vm.info: VmInfo { config: VmConfig, state, memory_actual_size }. */
static void api_vm_info(struct api_vm *v, struct api_reply *r)
{
	const struct mvm_config *c = v->cfg;
	json_t *cfg, *disks, *payload;
	unsigned i;

	if (!v->vm || !c) {
		api_error(r, 404, "vm.info: no VM has been created");
		return;
	}
	payload = json_pack("{s:s}", "kernel", c->kernel ? c->kernel : "");
	if (payload && c->initrd)
		json_object_set_new(payload, "initramfs", json_string(c->initrd));
	if (payload && c->cmdline)
		json_object_set_new(payload, "cmdline", json_string(c->cmdline));
	disks = json_array();
	for (i = 0; disks && i < v->ndisks; i++)
		json_array_append_new(disks, api_disk(&v->disks[i], i));
	cfg = json_pack("{s:{s:I,s:I},s:{s:I},s:o,s:o,s:{s:s},s:{s:s}}",
			"cpus", "boot_vcpus", (json_int_t)c->cpus, "max_vcpus", (json_int_t)c->cpus,
			"memory", "size", (json_int_t)c->mem,
			"payload", payload, "disks", disks,
			"serial", "mode", "Tty", "console", "mode", "Off");
	if (cfg && v->vsock)
		json_object_set_new(cfg, "vsock", json_pack("{s:I,s:s,s:s}", "cid",
							    (json_int_t)v->vsock->cid, "socket",
							    v->vsock->socket, "id", "_vsock0"));
	api_json(r, json_pack("{s:o,s:s,s:I}", "config", cfg, "state", api_state(v),
			      "memory_actual_size", (json_int_t)c->mem));
}

/* GET vm.counters: { device id: { counter: value } }, Cloud Hypervisor's
 * names where it has them (read_bytes, write_bytes, read_ops + write_ops
 * as "requests": mvm counts requests, not reads and writes apart). */
static void api_vm_counters(struct api_vm *v, struct api_reply *r)
{
	json_t *all;
	unsigned i;

	if (!v->vm) {
		api_error(r, 404, "vm.counters: no VM has been created");
		return;
	}
	all = json_object();
	for (i = 0; all && i < v->ndisks; i++) {
		struct mvm_queue_stats q;
		char id[16];

		if (mvm_get_queue_stats(v->vm, i, MVM_ALL, &q, sizeof(q)))
			continue;
		snprintf(id, sizeof(id), "_disk%u", i);
		json_object_set_new(all, id, json_pack(
			"{s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
			"read_bytes", (json_int_t)q.bytes_read, "write_bytes", (json_int_t)q.bytes_written,
			"requests", (json_int_t)q.requests, "errors", (json_int_t)q.errors,
			"irqs", (json_int_t)q.irqs, "rate_delayed", (json_int_t)q.rate_delayed,
			"rate_wait_us", (json_int_t)q.rate_wait_us));
	}
	api_json(r, all);
}

/* PUT vm.pause / vm.resume: 204; 404 without a VM; 405 where its state
 * does not allow it (not booted, paused already, ended). */
static void api_vm_pause(struct api_vm *v, bool pause, struct api_reply *r)
{
	char err[MVM_ERR_MAX];
	int ret;

	if (!v->vm) {
		api_error(r, 404, "vm.%s: no VM has been created", pause ? "pause" : "resume");
		return;
	}
	ret = pause ? mvm_pause(v->vm, err, sizeof(err)) : mvm_resume(v->vm, err, sizeof(err));
	if (!ret)
		r->status = 204;
	else if (ret == -EALREADY || ret == -EINVAL || ret == -ESHUTDOWN)
		api_error(r, 405, "%s", err);
	else
		api_error(r, 500, "%s", err);
}

/* PUT vm.shutdown, vmm.shutdown: the VM stops (mvm(1) then exits with
 * its status, as the VM was its reason to run). */
static void api_shutdown(struct api_vm *v, const char *what, struct api_reply *r)
{
	if (v->vm) {
		int st = mvm_get_state(v->vm);

		if (st == MVM_VM_ENDED && !strcmp(what, "vm.shutdown")) {
			api_error(r, 405, "vm.shutdown: the VM has already shut down");
			return;
		}
		if (st == MVM_VM_RUNNING || st == MVM_VM_PAUSED)
			mvm_stop(v->vm, 0);
	} else if (!strcmp(what, "vm.shutdown")) {
		api_error(r, 404, "vm.shutdown: no VM has been created");
		return;
	}
	v->shutdown = true;
	r->status = 204;
}

static void api_ping(struct api_reply *r)
{
	api_json(r, json_pack("{s:s,s:s,s:I,s:[]}", "build_version", mvm_version(), "version",
			      mvm_version(), "pid", (json_int_t)getpid(), "features"));
}

/* Whether a body is JSON (an endpoint that takes one), else the 400. */
static bool api_body_ok(const char *name, const char *body, size_t len, struct api_reply *r)
{
	json_error_t e;
	json_t *j;

	if (!len) {
		api_error(r, 400, "%s: the request has no body; send its JSON", name);
		return false;
	}
	j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &e);
	if (!j) {
		api_error(r, 400, "%s: invalid JSON at line %d column %d: %s", name, e.line,
			  e.column, e.text);
		return false;
	}
	json_decref(j);
	return true;
}

void api_handle(struct api_vm *v, const char *method, const char *url, const char *body,
		size_t len, struct api_reply *r)
{
	static const struct {
		const char *name;
		enum api_method method;
	} served[] = {
		{ "vmm.ping", API_GET }, { "vm.info", API_GET }, { "vm.counters", API_GET },
		{ "vm.pause", API_PUT }, { "vm.resume", API_PUT }, { "vm.shutdown", API_PUT },
		{ "vmm.shutdown", API_PUT },
	};
	enum api_method m;
	const char *name;
	unsigned i;

	r->status = 500;
	r->body = NULL;
	if (!strcmp(method, "GET"))
		m = API_GET;
	else if (!strcmp(method, "PUT"))
		m = API_PUT;
	else {
		api_error(r, 405, "method %.16s: the API takes GET and PUT", method);
		return;
	}
	if (strncmp(url, API_PREFIX, strlen(API_PREFIX))) {
		api_error(r, 404, "%.128s: not an API path; they begin with " API_PREFIX, url);
		return;
	}
	name = url + strlen(API_PREFIX);
	for (i = 0; i < sizeof(served) / sizeof(served[0]); i++) {
		if (strcmp(name, served[i].name))
			continue;
		if (m != served[i].method) {
			api_error(r, 405, "%s takes %s", name, served[i].method == API_GET ? "GET" : "PUT");
			return;
		}
		switch (i) {
		case 0: api_ping(r); return;
		case 1: api_vm_info(v, r); return;
		case 2: api_vm_counters(v, r); return;
		case 3: api_vm_pause(v, true, r); return;
		case 4: api_vm_pause(v, false, r); return;
		default: api_shutdown(v, name, r); return;
		}
	}
	for (i = 0; i < sizeof(api_unsupported) / sizeof(api_unsupported[0]); i++) {
		if (strcmp(name, api_unsupported[i]))
			continue;
		if (m != API_PUT) {
			api_error(r, 405, "%s takes PUT", name);
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
