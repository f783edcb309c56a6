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
	"vm.resize-zone", "vm.add-device", "vm.add-fs", "vm.add-pmem",
	"vm.add-net", "vm.add-vsock", "vm.add-vdpa", "vm.add-user-device",
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

/* The id of a disk the command line gave (Cloud Hypervisor's default
 * ids: "_disk" and its number). */
static void api_cold_id(char *id, size_t len, unsigned i)
{
	snprintf(id, len, "_disk%u", i);
}

/* A disk as Cloud Hypervisor's DiskConfig. */
static json_t *api_disk(const struct mvm_disk *d, const char *id)
{
	json_t *o, *rl, *bw, *ops;

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
	for (i = 0; disks && i < v->ndisks; i++) {
		char id[16];

		api_cold_id(id, sizeof(id), i);
		json_array_append_new(disks, api_disk(&v->disks[i], id));
	}
	for (i = 0; disks && i < v->nhot; i++)
		if (!v->hot[i].removed)
			json_array_append_new(disks, api_disk(&v->hot[i].d, v->hot[i].id));
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
	for (i = 0; all && i < v->ndisks + v->nhot; i++) {
		const struct api_hotdisk *h = i >= v->ndisks ? &v->hot[i - v->ndisks] : NULL;
		struct mvm_queue_stats q;
		char id[16];

		if (h && h->removed)
			continue;
		api_cold_id(id, sizeof(id), i);
		/* A disk of a VM not started has no device yet: zeros. */
		if (mvm_get_queue_stats(v->vm, h ? h->index : i, MVM_ALL, &q, sizeof(q)))
			memset(&q, 0, sizeof(q));
		json_object_set_new(all, h ? h->id : id, json_pack(
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

/* A TokenBucket into b; false (and the 400) when it is not one. */
static bool api_bucket_parse(const char *name, json_t *o, struct mvm_token_bucket *b,
			     struct api_reply *r)
{
	static const char *const keys[] = { "size", "one_time_burst", "refill_time" };
	uint64_t *fields[] = { &b->size, &b->one_time_burst, &b->refill_time_ms };
	const char *k;
	json_t *val;
	unsigned i;

	if (!json_is_object(o)) {
		api_error(r, 400, "vm.add-disk: rate_limiter_config.%s: not an object; give "
			  "{\"size\": N, \"refill_time\": MS}", name);
		return false;
	}
	json_object_foreach(o, k, val) {
		for (i = 0; i < 3 && strcmp(k, keys[i]); i++)
			;
		if (i == 3 || !json_is_integer(val) || json_integer_value(val) < 0) {
			api_error(r, 400, "vm.add-disk: rate_limiter_config.%s.%.64s: %s", name, k,
				  i == 3 ? "unknown field; give size, one_time_burst, refill_time" :
				  "not a number of 0 or more");
			return false;
		}
		*fields[i] = (uint64_t)json_integer_value(val);
	}
	return true;
}

/* Cloud Hypervisor's DiskConfig into h (its strings copied into h); the
 * library checks the values (mvm_add_disk). False (and the 400) on a
 * field mvm does not know, or one it cannot honour that changes what the
 * guest gets. */
static bool api_disk_parse(json_t *o, struct api_hotdisk *h, struct api_reply *r)
{
	const char *k;
	json_t *val;

	mvm_disk_init(&h->d, NULL);
	h->id[0] = 0;
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
			if (!str || !*str || strlen(str) > API_ID_MAX)
				bad = "give 1 to 64 characters";
			else
				strcpy(h->id, str);
		} else if (!strcmp(k, "serial")) {
			if (!str || strlen(str) >= sizeof(h->serial))
				bad = "give up to 20 characters";
			else
				h->d.serial = strcpy(h->serial, str);
		} else if (!strcmp(k, "rate_limit_group")) {
			if (!str || strlen(str) >= sizeof(h->group))
				bad = "give the id of one of the VM's --rate-limit-group";
			else
				h->d.rate_limit_group = strcpy(h->group, str);
		} else if (!strcmp(k, "rate_limiter_config")) {
			json_t *bw = json_object_get(val, "bandwidth"), *ops = json_object_get(val, "ops");

			if (!json_is_object(val) || json_object_size(val) != (size_t)!!bw + !!ops)
				bad = "give an object with bandwidth and/or ops";
			else if ((bw && !api_bucket_parse("bandwidth", bw, &h->d.rate.bw, r)) ||
				 (ops && !api_bucket_parse("ops", ops, &h->d.rate.ops, r)))
				return false;
		} else if (!strcmp(k, "queue_size") || !strcmp(k, "disable_io_uring") ||
			   !strcmp(k, "disable_aio") || !strcmp(k, "sparse")) {
			/* The host's choices, or the guest's (its queue size, up
			 * to mvm's 256): nothing the guest depends on. */
			if (!is_int && !is_bool)
				bad = "not a number or boolean";
		} else if (!strcmp(k, "iommu") || !strcmp(k, "vhost_user")) {
			if (!is_bool || json_is_true(val))
				bad = json_is_true(val) ? "mvm does not have this; leave it false" :
				      "give false";
		} else if (!strcmp(k, "pci_segment")) {
			if (!is_int || json_integer_value(val) != 0)
				bad = "mvm has PCI segment 0 only; give 0";
		} else {
			api_error(r, 400, "vm.add-disk: field %.64s: unknown to mvm (docs/api.md has "
				  "the DiskConfig fields it takes)", k);
			return false;
		}
		if (bad) {
			api_error(r, 400, "vm.add-disk: %s: %s", k, bad);
			return false;
		}
	}
	if (!h->d.path) {
		api_error(r, 400, "vm.add-disk: no path; give the image's path");
		return false;
	}
	return true;
}

/* The library's number of the disk with this id, or -1. */
static int api_disk_find(const struct api_vm *v, const char *id, struct api_hotdisk **hot)
{
	char cold[16];
	unsigned i;

	*hot = NULL;
	for (i = 0; i < v->ndisks; i++) {
		api_cold_id(cold, sizeof(cold), i);
		if (!strcmp(id, cold))
			return (int)i;
	}
	for (i = 0; i < v->nhot; i++)
		if (!v->hot[i].removed && !strcmp(id, v->hot[i].id)) {
			*hot = (struct api_hotdisk *)&v->hot[i];
			return (int)v->hot[i].index;
		}
	return -1;
}

/* Hot-plug opens a file and makes a ring and threads: what the API
 * thread's filter (and every filter of a sandboxed mvm) forbids. */
static bool api_hotplug_ok(const struct api_vm *v, const char *name, struct api_reply *r)
{
	if (!v->vm) {
		api_error(r, 404, "%s: no VM has been created", name);
		return false;
	}
	if (v->cfg && v->cfg->sandbox) {
		api_error(r, 500, "%s: not with --sandbox on: plugging a disk in opens its image "
			  "and makes threads, which mvm's filters forbid once the VM runs; run "
			  "with --sandbox off, or embed libmvm and call mvm_add_disk from a thread "
			  "of your own", name);
		return false;
	}
	return true;
}

/* PUT vm.add-disk: DiskConfig in, PciDeviceInfo { id, bdf } out. */
static void api_vm_add_disk(struct api_vm *v, const char *body, size_t len,
			    struct api_reply *r)
{
	struct api_hotdisk *h, *other;
	char err[MVM_ERR_MAX], bdf[32];
	json_error_t e;
	json_t *j;
	int ret;

	if (!api_hotplug_ok(v, "vm.add-disk", r))
		return;
	if (v->nhot == MVM_MAX_DISKS) {
		api_error(r, 500, "vm.add-disk: %u disks were plugged in already; mvm takes no "
			  "more", MVM_MAX_DISKS);
		return;
	}
	j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &e);
	if (!json_is_object(j)) {
		if (j)
			api_error(r, 400, "vm.add-disk: the body is not a DiskConfig object");
		else
			api_error(r, 400, "vm.add-disk: invalid JSON at line %d column %d: %s",
				  e.line, e.column, e.text);
		json_decref(j);
		return;
	}
	h = &v->hot[v->nhot];
	memset(h, 0, sizeof(*h));
	if (!api_disk_parse(j, h, r)) {
		json_decref(j);
		return;
	}
	json_decref(j);
	if (h->id[0] && (api_disk_find(v, h->id, &other) >= 0 || !strcmp(h->id, "_vsock0"))) {
		api_error(r, 400, "vm.add-disk: id %s: a device of the VM has it; give another",
			  h->id);
		return;
	}
	h->index = mvm_disk_count(v->vm);
	ret = mvm_add_disk(v->vm, &h->d, err, sizeof(err));
	if (ret) {
		api_error(r, ret == -EINVAL || ret == -ENAMETOOLONG ? 400 : 500, "vm.add-disk: %s",
			  err);
		return;
	}
	if (!h->id[0])
		api_cold_id(h->id, sizeof(h->id), h->index);
	v->nhot++;
	if (mvm_disk_pci_address(v->vm, h->index, bdf, sizeof(bdf)))
		strcpy(bdf, "");
	api_json(r, json_pack("{s:s,s:s}", "id", h->id, "bdf", bdf));
}

/* PUT vm.remove-device { id }: a disk vm.add-disk plugged in, with the
 * guest's cooperation (it releases the disk within 5 s). 204. */
static void api_vm_remove_device(struct api_vm *v, const char *body, size_t len,
				 struct api_reply *r)
{
	char err[MVM_ERR_MAX];
	struct api_hotdisk *h;
	json_error_t e;
	const char *id;
	json_t *j;
	int idx, ret;

	if (!api_hotplug_ok(v, "vm.remove-device", r))
		return;
	j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &e);
	id = json_string_value(json_object_get(j, "id"));
	if (!id || json_object_size(j) != 1) {
		api_error(r, 400, "vm.remove-device: give {\"id\": \"ID\"} (vm.info lists them)");
		json_decref(j);
		return;
	}
	idx = api_disk_find(v, id, &h);
	if (idx < 0 || !h) {
		api_error(r, idx < 0 ? 404 : 500, "vm.remove-device: %.64s: %s", id, idx < 0 ?
			  "no such device; vm.info lists them" : "not plugged in by vm.add-disk; "
			  "mvm removes only those");
		json_decref(j);
		return;
	}
	json_decref(j);
	ret = mvm_disk_remove(v->vm, (unsigned)idx, 0, API_REMOVE_TIMEOUT_MS, err, sizeof(err));
	if (ret) {
		api_error(r, 500, "vm.remove-device: %s", err);
		return;
	}
	h->removed = true;
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
		{ "vmm.shutdown", API_PUT }, { "vm.add-disk", API_PUT },
		{ "vm.remove-device", API_PUT },
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
		case 7: api_vm_add_disk(v, body, len, r); return;
		case 8: api_vm_remove_device(v, body, len, r); return;
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
