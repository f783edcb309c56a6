/* The REST API's request path (vmm/api/api.c): the input is a request as
 * the server hands it over (method by the first byte's low bits, a
 * NUL-terminated URL, the rest the body), with no VM (Cloud Hypervisor's
 * state before vm.create): what a client of the socket controls once
 * libmicrohttpd has parsed the HTTP.
 *
 * Invariants (besides ASan/UBSan): every request gets a status of 2xx,
 * 4xx or 5xx; every body is JSON (an error's a string); a 2xx only for
 * the endpoints that answer without a VM (vmm.ping, vmm.shutdown); only
 * vmm.shutdown marks the server for its end. */
#include "tests/fuzz/fuzz.h"
#include "vmm/api/api.h"

#include <jansson.h>

static const char *const methods[] = { "GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "", "put" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct api_vm v = { 0 };
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
		FZ_ASSERT(r.status < 300 || json_is_string(j));
		json_decref(j);
	}
	if (r.status < 300)
		FZ_ASSERT(!strcmp(ubuf, "/api/v1/vmm.ping") || !strcmp(ubuf, "/api/v1/vmm.shutdown"));
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
	seed("add_disk_bad", 1, "/api/v1/vm.add-disk", "{\"path\":");
	seed("shutdown", 1, "/api/v1/vmm.shutdown", "");
}
