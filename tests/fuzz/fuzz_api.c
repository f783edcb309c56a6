/* The REST API's request path (vmm/api/api.c): the input is a request as
 * the server hands it over (method by the first byte's low bits, a
 * NUL-terminated URL, the rest the body), with no VM (Cloud Hypervisor's
 * state before vm.create): what a client of the socket controls once
 * libmicrohttpd has parsed the HTTP.
 *
 * vm.create's VmConfig parser runs against a host that makes no VM (as
 * if the library refused what it was given).
 *
 * Invariants (besides ASan/UBSan): every request gets a status of 2xx,
 * 4xx or 5xx; every body is JSON (an error's a string); a 2xx only for
 * the endpoints that answer without a VM (vmm.ping, vmm.shutdown); only
 * vmm.shutdown marks the server for its end; the host is asked to make
 * a VM only from a config with a kernel and disks that each have a path,
 * and never to boot one that is not there. */
#include "tests/fuzz/fuzz.h"
#include "vmm/api/api.h"

#include <jansson.h>

static const char *const methods[] = { "GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "", "put" };

static int fz_create(struct api_vm *v, const struct api_vmconfig *c, char *err, size_t errlen)
{
	unsigned i;

	(void)v;
	FZ_ASSERT(c->vm.kernel && *c->vm.kernel && c->ndisks <= MVM_MAX_DISKS);
	for (i = 0; i < c->ndisks; i++)
		FZ_ASSERT(c->disks[i].d.path && *c->disks[i].d.path &&
			  (!c->disks[i].d.id || *c->disks[i].d.id));
	FZ_ASSERT(!c->has_vsock || (c->vsock.socket && *c->vsock.socket));
	FZ_ASSERT(c->ngroups <= MVM_MAX_DISKS);
	for (i = 0; i < c->ngroups; i++)
		FZ_ASSERT(c->groups[i].id && *c->groups[i].id &&
			  strlen(c->groups[i].id) <= MVM_ID_MAX);
	snprintf(err, errlen, "no VM made here");
	return -EINVAL;
}

static int fz_boot(struct api_vm *v, char *err, size_t errlen)
{
	(void)v;
	(void)err;
	(void)errlen;
	FZ_ASSERT(0);
	return 0;
}

static int fz_restore(struct api_vm *v, const char *dir, bool resume, char *err,
		      size_t errlen)
{
	(void)resume;
	(void)v;
	FZ_ASSERT(dir && *dir);
	snprintf(err, errlen, "no VM restored here");
	return -EINVAL;
}

static const struct api_host fz_host = { .create = fz_create, .boot = fz_boot,
					 .restore = fz_restore };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct api_vm v = { .host = &fz_host };
	struct api_reply r;
	const char *url, *body;
	size_t ulen, blen;
	char *ubuf;

	if (size < 1)
		return 0;
	url = (const char *)data + 1;
	ulen = strnlen(url, size - 1);
	ubuf = malloc(ulen + 1);
	FZ_ASSERT(ubuf);
	memcpy(ubuf, url, ulen);
	ubuf[ulen] = 0;
	body = url + ulen + (ulen < size - 1);
	blen = size - 1 - ulen - (ulen < size - 1);
	api_handle(&v, methods[data[0] & 7], ubuf, blen ? body : NULL, blen, &r);
	FZ_ASSERT(r.status >= 200 && r.status < 600);
	if (r.body) {
		json_error_t e;
		json_t *j = json_loads(r.body, JSON_DECODE_ANY, &e);

		FZ_ASSERT(j);
		/* An error is Cloud Hypervisor's shape: an array of one message. */
		FZ_ASSERT(r.status < 300 || (json_is_array(j) && json_array_size(j) == 1 &&
					     json_is_string(json_array_get(j, 0))));
		json_decref(j);
	}
	/* Without a VM: a ping, a shutdown, and a vm.delete that finds
	 * nothing to do (204, as Cloud Hypervisor answers). */
	if (r.status < 300)
		FZ_ASSERT(!strcmp(ubuf, "/api/v1/vmm.ping") || !strcmp(ubuf, "/api/v1/vmm.shutdown") ||
			  !strcmp(ubuf, "/api/v1/vm.delete"));
	FZ_ASSERT(!v.shutdown || !strcmp(ubuf, "/api/v1/vmm.shutdown"));
	free(r.body);
	free(ubuf);
	return 0;
}

/* --- seeds --- */

static void seed(const char *name, uint8_t method, const char *url, const char *body)
{
	struct fz_buf s = { 0 };

	fzb_u8(&s, method);
	fzb_bytes(&s, url, strlen(url) + 1);
	fzb_bytes(&s, body, strlen(body));
	fuzz_seed(name, s.b, s.n);
}

static void fuzz_seeds(void)
{
	seed("ping", 0, "/api/v1/vmm.ping", "");
	seed("info", 0, "/api/v1/vm.info", "");
	seed("pause", 1, "/api/v1/vm.pause", "");
	seed("create", 1, "/api/v1/vm.create",
	     "{\"cpus\":{\"boot_vcpus\":2},\"memory\":{\"size\":268435456},"
	     "\"payload\":{\"kernel\":\"/k\"},\"disks\":[{\"path\":\"/d.img\"}]}");
	seed("create_full", 1, "/api/v1/vm.create",
	     "{\"payload\":{\"kernel\":\"/k\",\"initramfs\":\"/i\",\"cmdline\":\"quiet\"},"
	     "\"cpus\":{\"boot_vcpus\":2,\"max_vcpus\":4},\"memory\":{\"size\":268435456,"
	     "\"thp\":true},\"serial\":{\"mode\":\"Tty\"},\"console\":{\"mode\":\"Off\"},"
	     "\"vsock\":{\"cid\":3,\"socket\":\"/v.sock\"},\"rng\":{\"src\":\"/dev/urandom\"},"
	     "\"rate_limit_groups\":[{\"id\":\"t1\",\"rate_limiter_config\":{\"bandwidth\":"
	     "{\"size\":1048576,\"refill_time\":100}}}],"
	     "\"disks\":[{\"path\":\"/d.img\",\"id\":\"root\",\"num_queues\":2,"
	     "\"rate_limit_group\":\"t1\","
	     "\"rate_limiter_config\":{\"ops\":{\"size\":100,\"refill_time\":1000}}}]}");
	seed("boot", 1, "/api/v1/vm.boot", "");
	seed("add_disk_bad", 1, "/api/v1/vm.add-disk", "{\"path\":");
	seed("add_vsock", 1, "/api/v1/vm.add-vsock", "{\"cid\":3,\"socket\":\"/v.sock\"}");
	seed("update_disk", 1, "/api/v1/vm.update-disk",
	     "{\"id\":\"_disk0\",\"path\":\"/n.img\",\"rate_limiter_config\":{\"bandwidth\":"
	     "{\"size\":1048576,\"refill_time\":100},\"ops\":{\"size\":0}}}");
	seed("shutdown", 1, "/api/v1/vmm.shutdown", "");
}
