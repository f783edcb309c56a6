/* The REST API's request path (vmm/api/api.c), KVM-free: routes, methods,
 * Cloud Hypervisor's JSON shapes and status codes, what a bad request
 * gets. The server around it (HTTP over the socket, its filter) is
 * tests/system/api_socket.sh's. */
#include "tests/unit/check.h"
#include "tests/unit/fake_kernel.h"
#include "vmm/api/api.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static char dir[64], kernel[128], image[128];

static void cleanup(void)
{
	fake_vm_files_remove(dir);
}

static void files(void)
{
	static bool once;

	fake_vm_files(dir, kernel, image);
	if (!once)
		atexit(cleanup);
	once = true;
}

/* The request, its status checked; the body parsed (NULL: none). */
static json_t *call(struct api_vm *v, const char *method, const char *url, const char *body,
		    unsigned want)
{
	struct api_reply r;
	json_error_t e;
	json_t *j = NULL;

	api_handle(v, method, url, body, body ? strlen(body) : 0, &r);
	if (r.status != want)
		fprintf(stderr, "%s %s: %u %s\n", method, url, r.status, r.body ? r.body : "");
	CHECK_EQ(r.status, want);
	if (r.body) {
		j = json_loads(r.body, JSON_DECODE_ANY, &e);
		CHECK(j);
	}
	free(r.body);
	return j;
}

/* The Allow header of the answer to method url (NULL: none). */
static const char *allow_of(struct api_vm *v, const char *method, const char *url)
{
	struct api_reply r;

	api_handle(v, method, url, NULL, 0, &r);
	free(r.body);
	return r.allow;
}

/* A 405 for the method says which are allowed (RFC 9110 15.5.6); one
 * for the VM's state is not about the method and has no Allow. */
TEST(a_method_not_allowed_names_the_allowed_ones)
{
	struct api_vm v = { 0 };

	CHECK_STR(allow_of(&v, "GET", "/api/v1/vm.pause"), "PUT");
	CHECK_STR(allow_of(&v, "PUT", "/api/v1/vm.info"), "GET");
	CHECK_STR(allow_of(&v, "DELETE", "/api/v1/vm.info"), "GET, PUT");
	CHECK_STR(allow_of(&v, "GET", "/api/v1/vm.add-net"), "PUT");
	CHECK(!allow_of(&v, "PUT", "/api/v1/vm.pause"));     /* 404: no VM */
	CHECK(!allow_of(&v, "GET", "/api/v1/vmm.ping"));
}

/* An error's body, Cloud Hypervisor's shape (v47 on): an array of
 * messages from the outermost to the root cause; mvm's has one, which
 * contains `part`. */
static void error_says(json_t *j, const char *part)
{
	const char *msg = json_string_value(json_array_get(j, 0));

	CHECK(json_is_array(j));
	CHECK_EQ(json_array_size(j), 1);
	CHECK(msg);
	if (!strstr(msg, part))
		fprintf(stderr, "error '%s' lacks '%s'\n", msg, part);
	CHECK(strstr(msg, part));
	json_decref(j);
}

TEST(ping_answers_the_version_and_the_pid)
{
	struct api_vm v = { 0 };
	json_t *j = call(&v, "GET", "/api/v1/vmm.ping", NULL, 200);

	CHECK_STR(json_string_value(json_object_get(j, "version")), mvm_version());
	CHECK_STR(json_string_value(json_object_get(j, "build_version")), mvm_version());
	CHECK_EQ(json_integer_value(json_object_get(j, "pid")), getpid());
	CHECK(json_is_array(json_object_get(j, "features")));
	json_decref(j);
}

TEST(unknown_paths_and_wrong_methods_are_refused)
{
	struct api_vm v = { 0 };

	error_says(call(&v, "GET", "/", NULL, 404), "begin with /api/v1/");
	error_says(call(&v, "GET", "/api/v1/vm.teleport", NULL, 404), "vm.teleport: no such endpoint");
	error_says(call(&v, "POST", "/api/v1/vmm.ping", NULL, 405), "GET and PUT");
	error_says(call(&v, "PUT", "/api/v1/vm.info", NULL, 405), "vm.info takes GET");
	error_says(call(&v, "GET", "/api/v1/vm.pause", NULL, 405), "vm.pause takes PUT");
	error_says(call(&v, "GET", "/api/v1/vm.add-disk", NULL, 405), "vm.add-disk takes PUT");
}

/* An endpoint mvm does not serve says so by name (501), once its body is
 * JSON; a body that is not, or nests deeper than the parser's limit, is
 * the client's error (400, with where). */
TEST(unserved_endpoints_are_501_and_bad_json_400)
{
	struct api_vm v = { 0 };
	char *deep;
	size_t i, n = 5000;

	error_says(call(&v, "PUT", "/api/v1/vm.add-net", "{\"tap\":\"tap0\"}", 501),
		   "vm.add-net: mvm does not support this endpoint");
	error_says(call(&v, "PUT", "/api/v1/vm.add-generic-vhost-user", "{\"socket\":\"/s\"}", 501),
		   "vm.add-generic-vhost-user: mvm does not support this endpoint");
	error_says(call(&v, "PUT", "/api/v1/vm.frobnicate", NULL, 404), "no such endpoint");
	error_says(call(&v, "PUT", "/api/v1/vm.create", "{\"cpus\":", 400),
		   "vm.create: invalid JSON at line 1");
	error_says(call(&v, "PUT", "/api/v1/vm.send-migration", "{\"a\":1,\"a\":2}", 400),
		   "duplicate");
	deep = malloc(2 * n + 1);
	CHECK(deep);
	for (i = 0; i < n; i++) {
		deep[i] = '[';
		deep[n + i] = ']';
	}
	deep[2 * n] = 0;
	error_says(call(&v, "PUT", "/api/v1/vm.create", deep, 400), "invalid JSON");
	free(deep);
}

/* Without a VM: what needs one is 404, as Cloud Hypervisor's before
 * vm.create; vmm.shutdown still ends the process. */
TEST(without_a_vm_vm_endpoints_are_404)
{
	struct api_vm v = { 0 };

	error_says(call(&v, "GET", "/api/v1/vm.info", NULL, 404), "no VM");
	error_says(call(&v, "GET", "/api/v1/vm.counters", NULL, 404), "no VM");
	error_says(call(&v, "PUT", "/api/v1/vm.pause", NULL, 404), "no VM");
	error_says(call(&v, "PUT", "/api/v1/vm.resume", NULL, 404), "no VM");
	error_says(call(&v, "PUT", "/api/v1/vm.nmi", NULL, 404), "no VM");
	error_says(call(&v, "PUT", "/api/v1/vm.power-button", NULL, 404), "no VM");
	error_says(call(&v, "PUT", "/api/v1/vm.coredump", "{\"destination_url\":\"file:///c\"}",
			404), "no VM");
	error_says(call(&v, "PUT", "/api/v1/vm.shutdown", NULL, 404), "no VM");
	error_says(call(&v, "PUT", "/api/v1/vm.snapshot", "{\"destination_url\":\"file:///x\"}",
			404), "no VM");
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", "{\"path\":\"/x.img\"}", 404), "no VM");
	error_says(call(&v, "PUT", "/api/v1/vm.remove-device", "{\"id\":\"_disk0\"}", 404),
		   "no VM");
	error_says(call(&v, "PUT", "/api/v1/vm.update-disk", "{\"id\":\"_disk0\"}", 404),
		   "no VM");
	error_says(call(&v, "PUT", "/api/v1/vm.resize-disk",
			"{\"id\":\"_disk0\",\"desired_size\":1048576}", 404), "no VM");
	CHECK(!v.shutdown);
	CHECK(!call(&v, "PUT", "/api/v1/vmm.shutdown", NULL, 204));
	CHECK(v.shutdown);
}

/* v: a VM made from c (not started) with disk d, as the command line
 * hands them to the API. Skips where no disk transport is built. */
static void created_with_disk(struct api_vm *v, const struct mvm_config *c,
			      const struct mvm_disk *d)
{
	char err[MVM_ERR_MAX];

	CHECK_EQ(mvm_create(c, &v->vm, err, sizeof(err)), 0);
	if (mvm_add_disk(v->vm, d, err, sizeof(err))) {
		mvm_destroy(v->vm);
		CHECK_SKIP("no disk transport on this architecture here");
	}
	v->cfg = c;
}

/* vm.info in Cloud Hypervisor's VmInfo shape: the VmConfig's fields as
 * its clients read them, the state, the memory size. A VM not booted
 * cannot be paused (405); its counters are there, at zero. */
TEST(info_counters_and_pause_of_a_created_vm)
{
	char err[MVM_ERR_MAX];
	struct mvm_vsock vs;
	struct mvm_config c;
	struct mvm_disk d;
	struct api_vm v = { 0 };
	json_t *j, *cfg, *disk;

	files();
	mvm_config_init(&c);
	c.kernel = kernel;
	c.cpus = 2;
	c.mem = 64 << 20;
	c.cmdline = "quiet";
	mvm_disk_init(&d, image);
	d.ro = true;
	d.queues = 2;
	d.rate.ops.size = 100;
	d.rate.ops.refill_time_ms = 1000;
	created_with_disk(&v, &c, &d);
	j = call(&v, "GET", "/api/v1/vm.info", NULL, 200);
	CHECK_STR(json_string_value(json_object_get(j, "state")), "Created");
	CHECK_EQ(json_integer_value(json_object_get(j, "memory_actual_size")), 64 << 20);
	cfg = json_object_get(j, "config");
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(cfg, "cpus"), "boot_vcpus")), 2);
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(cfg, "memory"), "size")),
		 64 << 20);
	CHECK_STR(json_string_value(json_object_get(json_object_get(cfg, "payload"), "kernel")),
		  kernel);
	CHECK_STR(json_string_value(json_object_get(json_object_get(cfg, "payload"), "cmdline")),
		  "quiet");
	disk = json_array_get(json_object_get(cfg, "disks"), 0);
	CHECK_STR(json_string_value(json_object_get(disk, "path")), image);
	CHECK(json_is_true(json_object_get(disk, "readonly")));
	CHECK_EQ(json_integer_value(json_object_get(disk, "num_queues")), 2);
	CHECK_STR(json_string_value(json_object_get(disk, "id")), "_disk0");
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(json_object_get(
		 disk, "rate_limiter_config"), "ops"), "size")), 100);
	CHECK(!json_object_get(json_object_get(disk, "rate_limiter_config"), "bandwidth"));
	json_decref(j);
	j = call(&v, "GET", "/api/v1/vm.counters", NULL, 200);
	CHECK(json_is_integer(json_object_get(json_object_get(j, "_disk0"), "read_bytes")));
	CHECK(json_is_integer(json_object_get(json_object_get(j, "_disk0"), "read_ops")));
	CHECK(json_is_integer(json_object_get(json_object_get(j, "_disk0"), "write_ops")));
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(j, "_disk0"), "read_bytes")), 0);
	/* No vsock device, no _vsock0; with one, its counters, at zero. */
	CHECK(!json_object_get(j, "_vsock0"));
	json_decref(j);
	mvm_vsock_init(&vs);
	vs.cid = 3;
	vs.socket = "/tmp/mvm-test-api-v.sock";
	CHECK_EQ(mvm_add_vsock(v.vm, &vs, err, sizeof(err)), 0);
	j = call(&v, "GET", "/api/v1/vm.counters", NULL, 200);
	CHECK(json_is_integer(json_object_get(json_object_get(j, "_vsock0"), "connections_host")));
	CHECK(json_is_integer(json_object_get(json_object_get(j, "_vsock0"), "bad_rx_buffers")));
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(j, "_vsock0"), "bytes_to_host")), 0);
	CHECK_EQ(json_object_size(json_object_get(j, "_vsock0")), 19);
	json_decref(j);
	error_says(call(&v, "PUT", "/api/v1/vm.pause", NULL, 405), "vm.pause: the VM has not booted; vm.boot starts it");
	error_says(call(&v, "PUT", "/api/v1/vm.resume", NULL, 405), "vm.resume: the VM has not booted");
	/* vm.nmi takes no body; one that is not JSON is refused first. */
	error_says(call(&v, "PUT", "/api/v1/vm.nmi", NULL, 405), "vm.nmi: the VM has not booted");
	error_says(call(&v, "PUT", "/api/v1/vm.nmi", "{", 400), "invalid JSON");
	error_says(call(&v, "GET", "/api/v1/vm.nmi", NULL, 405), "vm.nmi takes PUT");
	error_says(call(&v, "PUT", "/api/v1/vm.power-button", NULL, 405),
		   "vm.power-button: the VM has not booted");
	/* vm.snapshot: Cloud Hypervisor's SnapshotConfig, a file:// URL; a
	 * VM not started cannot be snapshotted. */
	error_says(call(&v, "PUT", "/api/v1/vm.snapshot", "{\"destination_url\":\"/tmp/x\"}",
			400), "give \"file:///DIR\"");
	error_says(call(&v, "PUT", "/api/v1/vm.snapshot",
			"{\"destination_url\":\"file:///tmp/x\",\"compress\":true}", 400),
		   "field compress: not one mvm takes");
	error_says(call(&v, "PUT", "/api/v1/vm.snapshot", "{}", 400), "destination_url missing");
	error_says(call(&v, "PUT", "/api/v1/vm.snapshot",
			"{\"destination_url\":\"file:///tmp/x\"}", 405), "vm.snapshot: the VM has not booted");
	/* vm.coredump: VmCoredumpData, a file:// URL of a file. */
	error_says(call(&v, "PUT", "/api/v1/vm.coredump", "{\"destination_url\":\"/tmp/c\"}",
			400), "give \"file:///FILE\", the core file");
	error_says(call(&v, "PUT", "/api/v1/vm.coredump",
			"{\"destination_url\":\"file:///tmp/c\",\"format\":\"elf\"}", 400),
		   "field format: not one mvm takes");
	error_says(call(&v, "PUT", "/api/v1/vm.coredump", "{\"destination_url\":\"file:///tmp/\"}",
			400), "not a file name");
	error_says(call(&v, "PUT", "/api/v1/vm.coredump", "{\"destination_url\":\"file:///tmp/c\"}",
			405), "vm.coredump: the VM has not booted");
	mvm_destroy(v.vm);
}

/* The disk's rate_limiter_config in vm.info: bucket (bandwidth, ops) and
 * field, or -1 where it has none. */
static long long info_limit(struct api_vm *v, const char *bucket, const char *field)
{
	json_t *j = call(v, "GET", "/api/v1/vm.info", NULL, 200), *b;
	long long n;

	b = json_object_get(json_object_get(json_array_get(json_object_get(json_object_get(
		j, "config"), "disks"), 0), "rate_limiter_config"), bucket);
	n = b ? (long long)json_integer_value(json_object_get(b, field)) : -1;
	json_decref(j);
	return n;
}

/* vm.update-disk (mvm's; Firecracker's drive update in Cloud Hypervisor's
 * names): a bucket given replaces that bucket whole and one left out
 * stays, a size of 0 lifts the limit, vm.info shows the limits as they
 * are now; bad limits, an unknown disk or field, nothing to change are
 * refused with the disk as it was, and so is a swap that fails, its new
 * limits set back. */
TEST(update_disk_changes_limits_and_a_failed_request_leaves_the_disk_as_it_was)
{
	struct mvm_config c;
	struct mvm_disk d;
	struct api_vm v = { 0 };

	files();
	mvm_config_init(&c);
	c.kernel = kernel;
	c.mem = 64 << 20;
	mvm_disk_init(&d, image);
	d.rate.ops.size = 100;
	d.rate.ops.refill_time_ms = 1000;
	created_with_disk(&v, &c, &d);
	CHECK(!call(&v, "PUT", "/api/v1/vm.update-disk", "{\"id\":\"_disk0\",\"rate_limiter_config\":"
		    "{\"bandwidth\":{\"size\":1048576,\"refill_time\":100}}}", 204));
	CHECK_EQ(info_limit(&v, "bandwidth", "size"), 1048576);
	CHECK_EQ(info_limit(&v, "bandwidth", "refill_time"), 100);
	CHECK_EQ(info_limit(&v, "ops", "size"), 100);
	CHECK(!call(&v, "PUT", "/api/v1/vm.update-disk", "{\"id\":\"_disk0\",\"rate_limiter_config\":"
		    "{\"ops\":{\"size\":0}}}", 204));
	CHECK_EQ(info_limit(&v, "ops", "size"), -1);
	CHECK_EQ(info_limit(&v, "bandwidth", "size"), 1048576);
	/* Refused, the disk as it was. */
	error_says(call(&v, "PUT", "/api/v1/vm.update-disk", "{\"id\":\"_disk0\",\"rate_limiter_config\":"
			"{\"ops\":{\"size\":10}}}", 400), "refill");
	error_says(call(&v, "PUT", "/api/v1/vm.update-disk", "{\"id\":\"_disk0\",\"rate_limiter_config\":"
			"{\"iops\":{\"size\":10}}}", 400), "bandwidth and/or ops");
	error_says(call(&v, "PUT", "/api/v1/vm.update-disk", "{\"id\":\"_disk7\",\"rate_limiter_config\":"
			"{\"ops\":{\"size\":0}}}", 404), "_disk7: no such disk");
	error_says(call(&v, "PUT", "/api/v1/vm.update-disk", "{\"id\":\"_disk0\"}", 400),
		   "\"path\" and/or \"rate_limiter_config\"");
	error_says(call(&v, "PUT", "/api/v1/vm.update-disk", "{\"rate_limiter_config\":{}}", 400),
		   "give {\"id\": ID}");
	error_says(call(&v, "PUT", "/api/v1/vm.update-disk", "{\"id\":\"_disk0\",\"readonly\":true}",
			400), "field readonly: unknown to mvm");
	error_says(call(&v, "PUT", "/api/v1/vm.update-disk", "{\"id\":\"_disk0\",\"path\":\"\"}", 400),
		   "give {\"id\": ID}");
	/* A swap that fails (the VM has not started) sets its limits back. */
	json_decref(call(&v, "PUT", "/api/v1/vm.update-disk", "{\"id\":\"_disk0\",\"path\":\"/nonexistent.img\","
		    "\"rate_limiter_config\":{\"ops\":{\"size\":5,\"refill_time\":1000}}}", 400));
	CHECK_EQ(info_limit(&v, "ops", "size"), -1);
	CHECK_EQ(info_limit(&v, "bandwidth", "size"), 1048576);
	/* vm.resize-disk: Cloud Hypervisor's VmResizeDisk, for a disk of a
	 * booted VM (the resize itself: test_blk and system/run_control). */
	error_says(call(&v, "PUT", "/api/v1/vm.resize-disk",
			"{\"id\":\"_disk0\",\"desired_size\":1048576}", 405),
		   "vm.resize-disk: the VM has not booted");
	error_says(call(&v, "PUT", "/api/v1/vm.resize-disk",
			"{\"id\":\"_disk3\",\"desired_size\":1048576}", 404), "_disk3: no such disk");
	error_says(call(&v, "PUT", "/api/v1/vm.resize-disk", "{\"id\":\"_disk0\"}", 400),
		   "give {\"id\": ID, \"desired_size\": BYTES}");
	error_says(call(&v, "PUT", "/api/v1/vm.resize-disk",
			"{\"id\":\"_disk0\",\"desired_size\":\"1G\"}", 400), "desired_size");
	error_says(call(&v, "PUT", "/api/v1/vm.resize-disk",
			"{\"id\":\"_disk0\",\"desired_size\":-512}", 400), "a size above 0");
	error_says(call(&v, "PUT", "/api/v1/vm.resize-disk",
			"{\"id\":\"_disk0\",\"desired_size\":512,\"force\":true}", 400),
		   "vm.resize-disk.force: unknown to mvm");
	error_says(call(&v, "GET", "/api/v1/vm.resize-disk", NULL, 405), "vm.resize-disk takes PUT");
	/* Sandboxed, the same (where a confined thread may open the image
	 * is the library's: test_mvm, test_sandbox). */
	c.sandbox = true;
	CHECK(!call(&v, "PUT", "/api/v1/vm.update-disk", "{\"id\":\"_disk0\",\"rate_limiter_config\":"
		    "{\"ops\":{\"size\":7,\"refill_time\":10}}}", 204));
	CHECK_EQ(info_limit(&v, "ops", "size"), 7);
	mvm_destroy(v.vm);
}

/* vm.add-disk takes Cloud Hypervisor's DiskConfig (here into a VM not
 * started yet, where the library adds it as a cold disk) and answers its
 * PciDeviceInfo; fields mvm cannot honour are 400 naming the field, and
 * nothing is added; vm.info and vm.counters show the disk under its id;
 * vm.remove-device finds devices by id. With the sandbox on, neither is
 * served once the VM runs (they open files and make threads:
 * system/api_socket); before vm.boot they are. */
TEST(add_disk_takes_a_disk_config_and_remove_device_an_id)
{
	static struct api_vm v;
	struct mvm_config c;
	char err[MVM_ERR_MAX], body[512];
	json_t *j, *disk;

	files();
	mvm_config_init(&c);
	c.kernel = kernel;
	c.mem = 64 << 20;
	CHECK_EQ(mvm_create(&c, &v.vm, err, sizeof(err)), 0);
	v.cfg = &c;
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", "{\"path\":\"/x\",\"iommu\":true}",
			400), "iommu: mvm does not have this");
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", "{\"path\":\"/x\",\"pci_segment\":1}",
			400), "pci_segment: mvm has PCI segment 0 only");
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", "{\"path\":\"/x\",\"vhost_user\":1}",
			400), "vhost_user: give false");
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", "{\"path\":\"/x\",\"tap\":\"t\"}", 400),
		   "field tap: unknown to mvm");
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", "{\"readonly\":true}", 400), "no path");
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", "[1]", 400), "not a DiskConfig");
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", "{\"path\":", 400), "invalid JSON");
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", "{\"path\":\"/x\",\"num_queues\":0}",
			400), "num_queues: give 1 to");
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", "{\"path\":\"/x\",\"rate_limiter_config\":"
			"{\"ops\":{\"size\":-1}}}", 400), "rate_limiter_config.ops.size: not a number");
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", "{\"path\":\"/nonexistent.img\"}", 400),
		   "/nonexistent.img");
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", "{\"path\":\"/x\",\"id\":\"_vsock0\"}",
			400), "id: _vsock0 is the vsock device's");
	snprintf(body, sizeof(body), "{\"path\":\"%s\",\"id\":\"a b\"}", image);
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", body, 400), "id 'a b': give 1 to 64");
	CHECK_EQ(mvm_disk_count(v.vm), 0);
	snprintf(body, sizeof(body), "{\"path\":\"%s\",\"id\":\"data\",\"readonly\":true,"
		 "\"num_queues\":2,\"queue_size\":128,\"serial\":\"S1\",\"rate_limiter_config\":"
		 "{\"bandwidth\":{\"size\":1000000,\"refill_time\":100}}}", image);
	j = call(&v, "PUT", "/api/v1/vm.add-disk", body, 200);
	if (!j) {
		mvm_destroy(v.vm);
		CHECK_SKIP("no disk transport on this architecture here");
	}
	CHECK_STR(json_string_value(json_object_get(j, "id")), "data");
	CHECK(json_is_string(json_object_get(j, "bdf")));
	json_decref(j);
	CHECK_EQ(mvm_disk_count(v.vm), 1);
	/* Ids are the VM's to give once. */
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", body, 400), "id data: disk 0");
	j = call(&v, "GET", "/api/v1/vm.info", NULL, 200);
	disk = json_array_get(json_object_get(json_object_get(j, "config"), "disks"), 0);
	CHECK_STR(json_string_value(json_object_get(disk, "id")), "data");
	CHECK_STR(json_string_value(json_object_get(disk, "serial")), "S1");
	CHECK_EQ(json_integer_value(json_object_get(disk, "num_queues")), 2);
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(json_object_get(
		 disk, "rate_limiter_config"), "bandwidth"), "size")), 1000000);
	json_decref(j);
	j = call(&v, "GET", "/api/v1/vm.counters", NULL, 200);
	CHECK(json_object_get(j, "data"));
	json_decref(j);
	error_says(call(&v, "PUT", "/api/v1/vm.remove-device", "{\"id\":\"nope\"}", 404),
		   "nope: no such device");
	error_says(call(&v, "PUT", "/api/v1/vm.remove-device", "{}", 400), "give {\"id\"");
	/* Not booted: nothing to remove it from yet. */
	error_says(call(&v, "PUT", "/api/v1/vm.remove-device", "{\"id\":\"data\"}", 405),
		   "data: the VM has not booted");
	/* Sandboxed, a VM not booted yet still takes a disk (nothing is
	 * confined before vm.boot): the library answers, not the sandbox. */
	c.sandbox = true;
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", "{\"path\":\"/x\"}", 400),
		   "disk /x: cannot open image");
	mvm_destroy(v.vm);
}

/* vm.create and vm.boot through a host as mvm(1)'s main makes one: the
 * VM made from the VmConfig by the library itself (no KVM needed until
 * the boot), the boot asked of the host. */
static struct mvm_disk fake_disks[MVM_MAX_DISKS];
static int fake_boot_ret, fake_boots;

static int fake_create(struct api_vm *v, const struct api_vmconfig *c, char *err, size_t errlen)
{
	struct mvm_config mc = c->vm;
	unsigned i;
	int r;

	r = mvm_create(&mc, &v->vm, err, errlen);
	for (i = 0; !r && i < c->ngroups; i++) {
		struct mvm_rate_group *g = NULL;

		r = mvm_rate_group_new(&c->groups[i], &g, err, errlen);
		if (!r)
			r = mvm_add_rate_group(v->vm, g, err, errlen);
		mvm_rate_group_unref(g);
	}
	for (i = 0; !r && i < c->ndisks; i++) {
		fake_disks[i] = c->disks[i].d;
		r = mvm_add_disk(v->vm, &fake_disks[i], err, errlen);
	}
	if (r && v->vm) {
		mvm_destroy(v->vm);
		v->vm = NULL;
	}
	if (!r)
		v->cfg = &c->vm;
	return r;
}

static int fake_boot(struct api_vm *v, char *err, size_t errlen)
{
	(void)v;
	fake_boots++;
	if (fake_boot_ret)
		snprintf(err, errlen, "no KVM here");
	return fake_boot_ret;
}

static char fake_restored[256];
static int fake_restore_ret;
static bool fake_resumed;

static int fake_restore(struct api_vm *v, const char *dir, bool resume, char *err,
			size_t errlen)
{
	(void)v;
	fake_resumed = resume;
	snprintf(fake_restored, sizeof(fake_restored), "%s", dir);
	if (fake_restore_ret)
		snprintf(err, errlen, "restore %s: no snapshot there", dir);
	return fake_restore_ret;
}

static const struct api_host fake_host = { .create = fake_create, .boot = fake_boot,
					   .restore = fake_restore };

/* vm.restore: Cloud Hypervisor's RestoreConfig (source_url a file://
 * URL, prefault taken), served only by an mvm without a VM (--api-socket
 * alone); the host restores the directory the URL names; what the
 * library refuses is a 400; the VM is then booted (started paused). */
TEST(restore_takes_a_restore_config_where_there_is_no_vm)
{
	struct api_vm v = { 0 };

	error_says(call(&v, "PUT", "/api/v1/vm.restore", "{\"source_url\":\"file:///s\"}", 501),
		   "mvm --api-socket PATH alone");
	v = (struct api_vm){ .host = &fake_host };
	error_says(call(&v, "PUT", "/api/v1/vm.restore", "{\"source_url\":\"/s\"}", 400),
		   "give \"file:///DIR\"");
	error_says(call(&v, "PUT", "/api/v1/vm.restore",
			"{\"source_url\":\"file:///s\",\"net_fds\":[3]}", 400),
		   "field net_fds: not one mvm takes");
	error_says(call(&v, "PUT", "/api/v1/vm.restore",
			"{\"source_url\":\"file:///s\",\"prefault\":1}", 400), "prefault");
	CHECK_STR(fake_restored, "");
	fake_restore_ret = -ENOENT;
	error_says(call(&v, "PUT", "/api/v1/vm.restore", "{\"source_url\":\"file:///s\"}", 400),
		   "vm.restore: restore /s: no snapshot there");
	CHECK(!v.booted);
	fake_restore_ret = 0;
	error_says(call(&v, "PUT", "/api/v1/vm.restore",
			"{\"source_url\":\"file:///s\",\"memory_restore_mode\":\"Lazy\"}", 400),
		   "memory_restore_mode: give Copy or OnDemand");
	error_says(call(&v, "PUT", "/api/v1/vm.restore",
			"{\"source_url\":\"file:///s\",\"zone_updates\":[{\"id\":\"z\"}]}", 400),
		   "zone_updates");
	error_says(call(&v, "PUT", "/api/v1/vm.restore", "", 400), "no body");
	CHECK(!call(&v, "PUT", "/api/v1/vm.restore",
		    "{\"source_url\":\"file:///snap/1\",\"prefault\":true,"
		    "\"memory_restore_mode\":\"OnDemand\",\"resume\":null}", 204));
	CHECK_STR(fake_restored, "/snap/1");
	CHECK(!fake_resumed);                  /* left paused, as Cloud Hypervisor leaves it */
	CHECK(v.booted);
	v.booted = false;
	CHECK(!call(&v, "PUT", "/api/v1/vm.restore",
		    "{\"source_url\":\"file:///snap/1\",\"resume\":true}", 204));
	CHECK(fake_resumed);
	v.vm = (struct mvm *)&v;        /* a VM exists now: not looked into */
	error_says(call(&v, "PUT", "/api/v1/vm.restore", "{\"source_url\":\"file:///s\"}", 405),
		   "a VM exists already");
}

TEST(create_takes_a_vmconfig_and_boot_starts_it)
{
	static struct api_vm v;
	char body[1024];
	json_t *j, *cfg;

	files();
	v = (struct api_vm){ .host = &fake_host };
	error_says(call(&v, "PUT", "/api/v1/vm.boot", NULL, 404), "vm.create first");
	error_says(call(&v, "PUT", "/api/v1/vm.create", "{}", 400), "no payload");
	error_says(call(&v, "PUT", "/api/v1/vm.create", "{\"payload\":{}}", 400),
		   "payload.kernel: give the kernel's path");
	error_says(call(&v, "PUT", "/api/v1/vm.create", "{\"payload\":{\"firmware\":\"/f\"}}",
			400), "payload.firmware: mvm boots a kernel directly");
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},\"net\":[{\"tap\":"
		 "\"t0\"}]}", kernel);
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 400), "net: mvm does not have this");
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},\"memory\":{\"size\":"
		 "67108864,\"hugepages\":true}}", kernel);
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 400), "memory.hugepages");
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},\"cpus\":{\"boot_vcpus\":"
		 "2,\"max_vcpus\":1}}", kernel);
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 400), "cpus.max_vcpus");
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},\"serial\":{\"mode\":"
		 "\"File\",\"file\":\"/tmp/x\"}}", kernel);
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 400), "serial.mode: give Tty");
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},\"tdx\":true}", kernel);
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 400), "VmConfig.tdx: unknown");
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},\"disks\":[{\"path\":"
		 "\"%s\",\"iommu\":true}]}", kernel, image);
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 400), "disks[0]: iommu");
	/* The library's own checks answer too: a kernel that is not one. */
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"}}", image);
	json_decref(call(&v, "PUT", "/api/v1/vm.create", body, 400));
	CHECK(!v.vm && !v.created);
	/* What Kata Containers sends, in short: taken. */
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\",\"cmdline\":\"quiet\"},"
		 "\"cpus\":{\"boot_vcpus\":2,\"max_vcpus\":4,\"topology\":{\"threads_per_core\":1}},"
		 "\"memory\":{\"size\":67108864,\"shared\":false,\"thp\":true},\"serial\":"
		 "{\"mode\":\"Tty\"},\"console\":{\"mode\":\"Off\"},\"rng\":{\"src\":"
		 "\"/dev/urandom\"},\"disks\":[{\"path\":\"%s\",\"readonly\":true}],"
		 "\"net\":[],\"iommu\":false}", kernel, image);
	CHECK(!call(&v, "PUT", "/api/v1/vm.create", body, 204));
	CHECK(v.vm && v.created);
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 405), "a VM exists already");
	j = call(&v, "GET", "/api/v1/vm.info", NULL, 200);
	CHECK_STR(json_string_value(json_object_get(j, "state")), "Created");
	cfg = json_object_get(j, "config");
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(cfg, "cpus"), "boot_vcpus")), 2);
	CHECK_EQ(json_integer_value(json_object_get(json_object_get(cfg, "memory"), "size")),
		 64 << 20);
	CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(cfg, "disks"), 0),
						    "path")), image);
	CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(cfg, "disks"), 0),
						    "id")), "_disk0");
	json_decref(j);
	/* A boot that fails leaves the VM created; one that works, booted. */
	fake_boot_ret = -ENODEV;
	error_says(call(&v, "PUT", "/api/v1/vm.boot", NULL, 500), "vm.boot: no KVM here");
	CHECK(!v.booted);
	CHECK(v.vm);                           /* made again from its VmConfig */
	j = call(&v, "GET", "/api/v1/vm.info", NULL, 200);
	CHECK_STR(json_string_value(json_object_get(j, "state")), "Created");
	json_decref(j);
	fake_boot_ret = 0;
	CHECK(!call(&v, "PUT", "/api/v1/vm.boot", NULL, 204));
	CHECK(v.booted);
	CHECK_EQ(fake_boots, 2);
	error_says(call(&v, "PUT", "/api/v1/vm.boot", NULL, 405), "booted already");
	mvm_destroy(v.vm);
	api_vm_fini(&v);
	CHECK(!v.created);
	/* Without a host (a program that gives its VM itself), 501. */
	v = (struct api_vm){ 0 };
	error_says(call(&v, "PUT", "/api/v1/vm.create", "{}", 501), "vm.create: this mvm was given");
}

/* What Kata Containers' clh driver sends, as its generated client writes
 * it (every field of Cloud Hypervisor's document it sets, nulls for what
 * it leaves unset): taken, what mvm does not have refused by name. */
TEST(create_takes_what_kata_containers_sends)
{
	static struct api_vm v;
	char body[2048], disk[512];
	json_t *j;

	files();
	v = (struct api_vm){ .host = &fake_host };
	snprintf(disk, sizeof(disk), "{\"path\":\"%s\",\"readonly\":true,\"direct\":false,"
		 "\"iommu\":false,\"num_queues\":1,\"queue_size\":128,\"vhost_user\":false,"
		 "\"vhost_socket\":null,\"backing_files\":false,\"sparse\":true,"
		 "\"image_type\":\"Raw\",\"lock_granularity\":\"ByteRange\","
		 "\"queue_affinity\":[],\"pci_device_id\":null,\"id\":null}", image);
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\",\"cmdline\":"
		 "\"console=hvc0\",\"initramfs\":null,\"firmware\":null,\"igvm\":null},"
		 "\"platform\":{\"num_pci_segments\":1,\"tdx\":false},\"memory\":{\"size\":"
		 "67108864,\"mergeable\":false,\"hotplug_method\":\"Acpi\",\"shared\":false,"
		 "\"hugepages\":false,\"prefault\":false,\"thp\":true,\"reserve\":false,"
		 "\"zones\":null},\"cpus\":{\"boot_vcpus\":1,\"max_vcpus\":2,\"kvm_hyperv\":"
		 "false,\"nested\":true,\"core_scheduling\":\"Vm\",\"topology\":"
		 "{\"threads_per_core\":1,\"cores_per_die\":2,\"dies_per_package\":1,"
		 "\"packages\":1}},\"rng\":{\"src\":\"/dev/urandom\",\"iommu\":false},"
		 "\"disks\":[%s],\"serial\":{\"mode\":\"Tty\",\"iommu\":false},\"console\":"
		 "{\"mode\":\"Off\",\"iommu\":false,\"id\":null},\"vsock\":null,"
		 "\"rtc\":{\"iommu\":false},\"pci_segments\":[],\"generic_vhost_user\":null,"
		 "\"iommu\":false,\"watchdog\":false,\"pvpanic\":false,"
		 "\"landlock_enable\":false,\"tpm\":null,\"balloon\":null}", kernel, disk);
	CHECK(!call(&v, "PUT", "/api/v1/vm.create", body, 204));
	CHECK(v.vm && v.created);
	j = call(&v, "GET", "/api/v1/vm.info", NULL, 200);
	CHECK_STR(json_string_value(json_object_get(j, "state")), "Created");
	json_decref(j);
	/* Its hot-plug DiskConfig, before the boot. */
	snprintf(disk, sizeof(disk), "{\"path\":\"%s\",\"readonly\":true,\"backing_files\":"
		 "false,\"sparse\":true,\"image_type\":\"Raw\",\"id\":\"kata1\"}", image);
	json_decref(call(&v, "PUT", "/api/v1/vm.add-disk", disk, 200));
	/* What changes what the guest gets, named. */
	snprintf(disk, sizeof(disk), "{\"path\":\"%s\",\"image_type\":\"Qcow2\"}", image);
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", disk, 400),
		   "image_type: mvm serves raw images only");
	snprintf(disk, sizeof(disk), "{\"path\":\"%s\",\"backing_files\":true}", image);
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", disk, 400), "backing_files");
	snprintf(disk, sizeof(disk), "{\"path\":\"%s\",\"pci_device_id\":3}", image);
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", disk, 400), "pci_device_id");
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", "", 400), "no body; give a DiskConfig");
	/* Fields it takes and ignores must still be of their type. */
	snprintf(disk, sizeof(disk), "{\"path\":\"%s\",\"queue_size\":true}", image);
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", disk, 400), "queue_size: give a number");
	snprintf(disk, sizeof(disk), "{\"path\":\"%s\",\"sparse\":1}", image);
	error_says(call(&v, "PUT", "/api/v1/vm.add-disk", disk, 400), "sparse: give true or false");
	/* Not booted, where mvm serves on: nothing to shut down, nor to
	 * remove a device from; vm.delete forgets it, and again finds
	 * nothing to do (204, as Cloud Hypervisor). */
	v.relaunch = true;
	error_says(call(&v, "PUT", "/api/v1/vm.shutdown", NULL, 405), "has not booted");
	CHECK(!v.shutdown);
	error_says(call(&v, "PUT", "/api/v1/vm.remove-device", "{\"id\":\"kata1\"}", 405),
		   "has not booted");
	CHECK(!call(&v, "PUT", "/api/v1/vm.delete", NULL, 204));
	CHECK(!v.vm && !v.created);
	CHECK(!call(&v, "PUT", "/api/v1/vm.delete", NULL, 204));
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},\"cpus\":"
		 "{\"nested\":false}}", kernel);
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 400), "cpus.nested");
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\",\"igvm\":\"/i\"}}",
		 kernel);
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 400), "payload.igvm");
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},\"memory\":"
		 "{\"zones\":\"garbage\"}}", kernel);
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 400), "memory.zones");
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},\"vsock\":{\"cid\":3,"
		 "\"socket\":\"/x\",\"pci_device_id\":2}}", kernel);
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 400), "vsock.pci_device_id");
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},\"vsock\":{\"cid\":3,"
		 "\"socket\":\"/x\",\"id\":5}}", kernel);
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 400), "vsock.id: give a string");
	/* A debug console that is Off is none; one that is on is a device
	 * mvm does not have, and so is a balloon. */
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},\"debug_console\":"
		 "{\"mode\":\"Off\",\"iobase\":233}}", kernel);
	CHECK(!call(&v, "PUT", "/api/v1/vm.create", body, 204));
	CHECK(!call(&v, "PUT", "/api/v1/vm.delete", NULL, 204));
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},\"debug_console\":"
		 "{\"mode\":\"Tty\"}}", kernel);
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 400),
		   "debug_console: mvm does not have this device");
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},\"balloon\":{\"size\":0}}",
		 kernel);
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 400),
		   "balloon: mvm does not have this device");
	CHECK(!v.vm && !v.created);
}

/* The lines the API logs, for the case below. */
static struct {
	unsigned n;
	char last[1024];
} logged;

static void log_line(void *opaque, const char *line)
{
	(void)opaque;
	logged.n++;
	snprintf(logged.last, sizeof(logged.last), "%s", line);
}

static long long api_count(struct api_vm *v, const char *name)
{
	json_t *j = call(v, "GET", "/api/v1/vm.counters", NULL, 200);
	long long n = json_integer_value(json_object_get(json_object_get(j, "_api"), name));

	json_decref(j);
	return n;
}

/* A client's mistakes, and the server's failures, are counted by kind
 * (vm.counters' _api) and the first of each kind logged, one line: a
 * client that repeats one costs no more log. */
TEST(errors_are_counted_by_kind_and_the_first_of_each_logged)
{
	static struct api_vm v;
	char body[512];
	unsigned i;

	files();
	v = (struct api_vm){ .host = &fake_host, .log = log_line };
	logged.n = 0;
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"}}", kernel);
	CHECK(!call(&v, "PUT", "/api/v1/vm.create", body, 204));
	CHECK_EQ(logged.n, 0);
	for (i = 0; i < 3; i++)
		json_decref(call(&v, "PUT", "/api/v1/vm.create", "{\"cpus\":", 400));
	CHECK_EQ(logged.n, 1);
	CHECK(strstr(logged.last, "API: PUT /api/v1/vm.create: HTTP 400: vm.create: invalid JSON"));
	CHECK(strstr(logged.last, "later ones are counted"));
	json_decref(call(&v, "GET", "/api/v1/vm.pause", NULL, 405));
	json_decref(call(&v, "GET", "/api/v1/vm.pause", NULL, 405));
	/* A client's bytes never end the log's line. */
	json_decref(call(&v, "GET", "/api/v1/vm\n.x", NULL, 404));
	CHECK_EQ(logged.n, 3);
	CHECK(!strchr(logged.last, '\n'));
	api_account_slow(&v);
	api_account_slow(&v);
	CHECK_EQ(logged.n, 4);
	CHECK_EQ(api_count(&v, "http_400"), 3);
	CHECK_EQ(api_count(&v, "http_405"), 2);
	CHECK_EQ(api_count(&v, "http_404"), 1);
	CHECK_EQ(api_count(&v, "slow_clients"), 2);
	CHECK_EQ(api_count(&v, "http_500"), 0);
	/* Every answer before the vm.counters that tells them: the five
	 * vm.counters before it among them. */
	CHECK_EQ(api_count(&v, "requests"), 1 + 3 + 2 + 1 + 5);
	CHECK_EQ(logged.n, 4);
	mvm_destroy(v.vm);
	api_vm_fini(&v);
}

/* vm.info gives back the serial port's mode and pvpanic as the VmConfig
 * set them (it said Tty and left pvpanic out whatever was asked). */
TEST(vm_info_shows_the_serial_mode_and_pvpanic_it_was_given)
{
	static const struct {
		const char *fields, *mode;
		bool pvpanic;
	} cases[] = {
		{ ",\"serial\":{\"mode\":\"Null\"},\"pvpanic\":true", "Null", true },
		{ ",\"pvpanic\":false", "Tty", false },
	};
	static struct api_vm v;
	char body[512];
	json_t *j, *cfg;

	files();
	v = (struct api_vm){ .host = &fake_host, .relaunch = true };
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"}%s}", kernel,
			 cases[i].fields);
		CHECK(!call(&v, "PUT", "/api/v1/vm.create", body, 204));
		j = call(&v, "GET", "/api/v1/vm.info", NULL, 200);
		cfg = json_object_get(j, "config");
		CHECK_STR(json_string_value(json_object_get(json_object_get(cfg, "serial"),
							    "mode")), cases[i].mode);
		CHECK_EQ(json_is_true(json_object_get(cfg, "pvpanic")), cases[i].pvpanic);
		CHECK(json_is_boolean(json_object_get(cfg, "pvpanic")));
		json_decref(j);
		CHECK(!call(&v, "PUT", "/api/v1/vm.delete", NULL, 204));
	}
}

/* An error's message is JSON whatever bytes a client sent: what is not
 * UTF-8 (a URL's %ff, a name cut in a character) becomes '?'. */
TEST(errors_keep_a_body_whatever_bytes_they_quote)
{
	struct api_vm v = { 0 };
	char body[160];

	error_says(call(&v, "GET", "/api/v1/\xff", NULL, 404), "?");
	/* 63 ASCII bytes then a 2-byte character: the name's %.64s cuts it. */
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"/k\"},\"%063d\xc3\xa9\":1}", 0);
	v.host = &fake_host;
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 400), "unknown to mvm");
}

/* VmConfig.rate_limit_groups: Cloud Hypervisor's RateLimitGroupConfig
 * array makes the groups the VM's disks name in rate_limit_group; vm.info
 * shows them ({} and null buckets: no limit, as its defaults). A group that is not one, an id twice, a disk naming a
 * group the VmConfig lacks: 400, and no VM. */
TEST(create_takes_rate_limit_groups_that_its_disks_share)
{
	static const struct {
		const char *groups, *disk_group, *says;
	} bad[] = {
		{ "{\"id\":\"g\"}", "g", "rate_limit_groups: give an array" },
		{ "[7]", "g", "rate_limit_groups[0]: not a RateLimitGroupConfig" },
		{ "[{\"rate_limiter_config\":{\"ops\":{\"size\":10,\"refill_time\":100}}}]",
		  "g", "rate_limit_groups[0]: id: give 1 to 8" },
		{ "[{\"id\":\"g\"}]", "g", "rate_limit_groups[0]: no rate_limiter_config" },
		{ "[{\"id\":\"g\",\"rate_limiter_config\":7}]", "g",
		  "rate_limit_groups[0]: rate_limiter_config: give an object with bandwidth" },
		{ "[{\"id\":\"g\",\"rate_limiter_config\":{\"ops\":{\"size\":-1}}}]", "g",
		  "rate_limiter_config.ops.size: not a number of 0 or more" },
		{ "[{\"id\":\"g\",\"weight\":3,\"rate_limiter_config\":{\"ops\":{}}}]", "g",
		  "rate_limit_groups[0].weight: unknown" },
		/* The library's own checks: a bucket without a refill time,
		 * an id it does not take, one id twice, a group not there. */
		{ "[{\"id\":\"g\",\"rate_limiter_config\":{\"ops\":{\"size\":10}}}]", "g",
		  "refill" },
		{ "[{\"id\":\"g/1\",\"rate_limiter_config\":{\"ops\":{\"size\":10,"
		  "\"refill_time\":100}}}]", "g/1", "g/1" },
		{ "[{\"id\":\"g\",\"rate_limiter_config\":{\"ops\":{\"size\":10,"
		  "\"refill_time\":100}}},{\"id\":\"g\",\"rate_limiter_config\":{\"ops\":"
		  "{\"size\":5,\"refill_time\":100}}}]", "g", "has a" },
		{ "[{\"id\":\"g\",\"rate_limiter_config\":{\"ops\":{\"size\":10,"
		  "\"refill_time\":100}}}]", "h", "rate_limit_group 'h' is not" },
	};
	static struct api_vm v;
	char body[1536];
	json_t *j, *g, *d;
	unsigned i;

	files();
	v = (struct api_vm){ .host = &fake_host };
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},"
			 "\"rate_limit_groups\":%s,\"disks\":[{\"path\":\"%s\","
			 "\"rate_limit_group\":\"%s\"}]}", kernel, bad[i].groups, image,
			 bad[i].disk_group);
		error_says(call(&v, "PUT", "/api/v1/vm.create", body, 400), bad[i].says);
		CHECK(!v.vm && !v.created);
	}
	/* An empty array, as Cloud Hypervisor's clients send: none. */
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},"
		 "\"rate_limit_groups\":[]}", kernel);
	CHECK(!call(&v, "PUT", "/api/v1/vm.create", body, 204));
	j = call(&v, "GET", "/api/v1/vm.info", NULL, 200);
	CHECK(!json_object_get(json_object_get(j, "config"), "rate_limit_groups"));
	json_decref(j);
	mvm_destroy(v.vm);
	api_vm_fini(&v);
	v = (struct api_vm){ .host = &fake_host };
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},"
		 "\"rate_limit_groups\":[{\"id\":\"tenant1\",\"rate_limiter_config\":"
		 "{\"ops\":{\"size\":500,\"refill_time\":100},\"bandwidth\":{\"size\":"
		 "1048576,\"one_time_burst\":4096,\"refill_time\":1000}}},{\"id\":\"t2\","
		 "\"rate_limiter_config\":{\"ops\":{\"size\":10,\"refill_time\":10},"
		 "\"bandwidth\":null}},{\"id\":\"t3\",\"rate_limiter_config\":{}}],"
		 "\"disks\":[{\"path\":\"%s\",\"rate_limit_group\":\"tenant1\"}]}",
		 kernel, image);
	CHECK(!call(&v, "PUT", "/api/v1/vm.create", body, 204));
	j = call(&v, "GET", "/api/v1/vm.info", NULL, 200);
	g = json_object_get(json_object_get(j, "config"), "rate_limit_groups");
	CHECK_EQ(json_array_size(g), 3);
	CHECK_STR(json_string_value(json_object_get(json_array_get(g, 0), "id")), "tenant1");
	d = json_object_get(json_object_get(json_array_get(g, 0), "rate_limiter_config"), "ops");
	CHECK_EQ(json_integer_value(json_object_get(d, "size")), 500);
	CHECK_EQ(json_integer_value(json_object_get(d, "refill_time")), 100);
	d = json_object_get(json_object_get(json_array_get(g, 0), "rate_limiter_config"),
			    "bandwidth");
	CHECK_EQ(json_integer_value(json_object_get(d, "size")), 1048576);
	CHECK_EQ(json_integer_value(json_object_get(d, "one_time_burst")), 4096);
	CHECK_STR(json_string_value(json_object_get(json_array_get(g, 1), "id")), "t2");
	CHECK(!json_object_get(json_object_get(json_array_get(g, 1), "rate_limiter_config"),
			       "bandwidth"));
	/* {} and a null bucket are no limit, as Cloud Hypervisor's defaults. */
	CHECK_STR(json_string_value(json_object_get(json_array_get(g, 2), "id")), "t3");
	CHECK(!json_object_get(json_array_get(g, 2), "rate_limiter_config"));
	d = json_array_get(json_object_get(json_object_get(j, "config"), "disks"), 0);
	CHECK_STR(json_string_value(json_object_get(d, "rate_limit_group")), "tenant1");
	json_decref(j);
	mvm_destroy(v.vm);
	api_vm_fini(&v);
}

/* vm.add-vsock: a VsockConfig before the boot goes into the VM and its
 * VmConfig (vm.info shows it, vm.boot's host takes it); bad configs and
 * a second device are 400, after the boot 405 (no vsock hot-plug);
 * vm.remove-device of _vsock0 is 404 without one, 500 with one. */
TEST(add_vsock_before_boot_goes_into_the_vmconfig)
{
	static struct api_vm v;
	char body[512];
	json_t *j, *vs;

	files();
	v = (struct api_vm){ .host = &fake_host };
	error_says(call(&v, "PUT", "/api/v1/vm.add-vsock", "{\"cid\":3,\"socket\":\"/v\"}", 404),
		   "no VM");
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"}}", kernel);
	CHECK(!call(&v, "PUT", "/api/v1/vm.create", body, 204));
	error_says(call(&v, "PUT", "/api/v1/vm.add-vsock", "{\"cid\":3}", 400),
		   "vm.add-vsock: VsockConfig: give cid (3 or more) and socket (a path)");
	error_says(call(&v, "PUT", "/api/v1/vm.add-vsock",
			"{\"cid\":3,\"socket\":\"/v\",\"iommu\":true}", 400), "iommu");
	error_says(call(&v, "PUT", "/api/v1/vm.add-vsock",
			"{\"cid\":3,\"socket\":\"/v\",\"pci_segment\":1}", 400), "segment 0 only");
	error_says(call(&v, "PUT", "/api/v1/vm.add-vsock", "{\"cid\":2,\"socket\":\"/v\"}", 400),
		   "vm.add-vsock: ");
	error_says(call(&v, "PUT", "/api/v1/vm.add-vsock", "[3]", 400), "not a VsockConfig");
	j = call(&v, "GET", "/api/v1/vm.info", NULL, 200);
	CHECK(!json_object_get(json_object_get(j, "config"), "vsock"));
	json_decref(j);
	error_says(call(&v, "PUT", "/api/v1/vm.remove-device", "{\"id\":\"_vsock0\"}", 404),
		   "_vsock0: no such device");
	j = call(&v, "PUT", "/api/v1/vm.add-vsock",
		 "{\"cid\":7,\"socket\":\"/run/v.sock\",\"id\":\"_vsock0\"}", 200);
	CHECK_STR(json_string_value(json_object_get(j, "id")), "_vsock0");
	json_decref(j);
	j = call(&v, "GET", "/api/v1/vm.info", NULL, 200);
	vs = json_object_get(json_object_get(j, "config"), "vsock");
	CHECK_EQ(json_integer_value(json_object_get(vs, "cid")), 7);
	CHECK_STR(json_string_value(json_object_get(vs, "socket")), "/run/v.sock");
	json_decref(j);
	CHECK(v.created->has_vsock);
	/* There, and it stays: no vsock hot-plug. */
	error_says(call(&v, "PUT", "/api/v1/vm.remove-device", "{\"id\":\"_vsock0\"}", 500),
		   "_vsock0: the vsock device cannot be removed");
	error_says(call(&v, "PUT", "/api/v1/vm.add-vsock", "{\"cid\":8,\"socket\":\"/w\"}", 400),
		   "has a vsock device already (cid 7)");
	CHECK(!call(&v, "PUT", "/api/v1/vm.boot", NULL, 204));
	error_says(call(&v, "PUT", "/api/v1/vm.add-vsock", "{\"cid\":8,\"socket\":\"/w\"}", 405),
		   "vm.add-vsock: the VM has booted");
	mvm_destroy(v.vm);
	api_vm_fini(&v);
}

/* Cloud Hypervisor's life of a VM through a host: vm.delete destroys a
 * VM not booted and forgets its VmConfig (a new vm.create is taken);
 * vm.reboot wants a running VM. Once a booted VM has ended at the API's
 * request and the program destroyed it (api_vm_relaunch): after
 * vm.shutdown its VmConfig stays (vm.info says Shutdown, what needs a VM
 * is 405, vm.create refused) and vm.boot makes it again and boots it;
 * the disks it had when it ended are the VmConfig's; after vm.reboot the
 * program is told to make it again; vm.delete then forgets it. Without a
 * host, 501. */
TEST(delete_reboot_and_shutdown_follow_the_vms_life_as_cloud_hypervisor_does)
{
	static struct api_vm v;
	char body[512], err[MVM_ERR_MAX], second[128], third[128], add[256];
	struct mvm_disk late;
	json_t *j;
	int fd;

	files();
	v = (struct api_vm){ .host = &fake_host };
	CHECK(!call(&v, "PUT", "/api/v1/vm.delete", NULL, 204));   /* nothing to delete */
	error_says(call(&v, "PUT", "/api/v1/vm.reboot", NULL, 404), "no VM has been created");
	snprintf(body, sizeof(body), "{\"payload\":{\"kernel\":\"%s\"},\"memory\":{\"size\":"
		 "67108864},\"disks\":[{\"path\":\"%s\",\"id\":\"root\"}]}", kernel, image);
	CHECK(!call(&v, "PUT", "/api/v1/vm.create", body, 204));
	error_says(call(&v, "PUT", "/api/v1/vm.reboot", NULL, 405), "not running (created)");
	CHECK(!call(&v, "PUT", "/api/v1/vm.delete", NULL, 204));
	CHECK(!v.vm && !v.created);
	error_says(call(&v, "GET", "/api/v1/vm.info", NULL, 404), "no VM has been created");
	CHECK(!call(&v, "PUT", "/api/v1/vm.create", body, 204));
	/* A disk added before the boot joins the VmConfig. */
	snprintf(second, sizeof(second), "%s/second.img", dir);
	fd = open(second, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && ftruncate(fd, 1 << 20) == 0);
	close(fd);
	snprintf(add, sizeof(add), "{\"path\":\"%s\",\"id\":\"extra\"}", second);
	json_decref(call(&v, "PUT", "/api/v1/vm.add-disk", add, 200));
	CHECK_EQ(v.created->ndisks, 2);
	CHECK(!call(&v, "PUT", "/api/v1/vm.boot", NULL, 204));
	fake_boots = 0;
	/* The VmConfig's disk ids are the VM's (and the API's own counters). */
	j = call(&v, "GET", "/api/v1/vm.counters", NULL, 200);
	CHECK(json_object_get(j, "root") && json_object_get(j, "extra") &&
	      json_object_get(j, "_api") && json_object_size(j) == 3);
	json_decref(j);
	CHECK_EQ(mvm_disk_find(v.vm, "root"), 0);

	/* Shut down at the API's request, destroyed by the program. */
	v.relaunch = true;
	v.ending = API_END_SHUTDOWN;
	mvm_destroy(v.vm);
	CHECK(!api_vm_relaunch(&v));
	CHECK(!v.vm && v.created && !v.booted && v.ending == API_END_NONE);
	j = call(&v, "GET", "/api/v1/vm.info", NULL, 200);
	CHECK_STR(json_string_value(json_object_get(j, "state")), "Shutdown");
	CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(
		  json_object_get(j, "config"), "disks"), 0), "path")), image);
	CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(
		  json_object_get(j, "config"), "disks"), 0), "id")), "root");
	CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(
		  json_object_get(j, "config"), "disks"), 1), "id")), "extra");
	json_decref(j);
	error_says(call(&v, "PUT", "/api/v1/vm.create", body, 405), "vm.delete forgets it");
	error_says(call(&v, "PUT", "/api/v1/vm.restore", "{\"source_url\":\"file:///s\"}", 405),
		   "a VM exists already");
	error_says(call(&v, "PUT", "/api/v1/vm.pause", NULL, 405), "has shut down; vm.boot");
	error_says(call(&v, "GET", "/api/v1/vm.counters", NULL, 405), "has shut down");
	error_says(call(&v, "PUT", "/api/v1/vm.shutdown", NULL, 405), "has shut down");
	error_says(call(&v, "PUT", "/api/v1/vm.reboot", NULL, 405), "has shut down");
	CHECK(!call(&v, "PUT", "/api/v1/vm.boot", NULL, 204));
	CHECK(v.vm && v.booted);
	CHECK_EQ(fake_boots, 1);
	CHECK_EQ(mvm_disk_find(v.vm, "extra"), 1);      /* made again with it */

	/* Its disks as it ends are the VmConfig's (api_vm_keep_disks): one
	 * plugged in since (through the library here, as vm.add-disk does
	 * once the VM runs) is kept, in strings of the VmConfig's own. */
	snprintf(third, sizeof(third), "%s/third.img", dir);
	fd = open(third, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && ftruncate(fd, 1 << 20) == 0);
	close(fd);
	mvm_disk_init(&late, NULL);
	late.path = third;
	late.id = "late";
	late.serial = "LATE-1";
	CHECK(!mvm_add_disk(v.vm, &late, err, sizeof(err)));
	CHECK_EQ(v.created->ndisks, 2);
	api_vm_keep_disks(&v);
	CHECK_EQ(v.created->ndisks, 3);
	CHECK_STR(v.created->disks[2].d.path, third);
	CHECK(v.created->disks[2].d.path == v.created->disks[2].path);
	CHECK_STR(v.created->disks[2].d.id, "late");
	CHECK_STR(v.created->disks[2].d.serial, "LATE-1");
	CHECK_STR(v.created->disks[0].d.id, "root");

	/* Rebooted: the program makes it again from its VmConfig. */
	v.ending = API_END_REBOOT;
	mvm_destroy(v.vm);
	CHECK(api_vm_relaunch(&v));
	CHECK(!v.vm && v.created && !v.booted);
	CHECK_EQ(v.host->create(&v, v.created, err, sizeof(err)), 0);
	v.booted = true;
	CHECK_EQ(mvm_disk_find(v.vm, "late"), 2);

	/* Deleted while it ran: forgotten once destroyed. */
	v.ending = API_END_DELETE;
	mvm_destroy(v.vm);
	CHECK(!api_vm_relaunch(&v));
	CHECK(!v.vm && !v.created);
	error_says(call(&v, "GET", "/api/v1/vm.info", NULL, 404), "no VM has been created");

	/* Shut down, then deleted. */
	CHECK(!call(&v, "PUT", "/api/v1/vm.create", body, 204));
	CHECK(!call(&v, "PUT", "/api/v1/vm.boot", NULL, 204));
	v.ending = API_END_SHUTDOWN;
	mvm_destroy(v.vm);
	CHECK(!api_vm_relaunch(&v));
	CHECK(!call(&v, "PUT", "/api/v1/vm.delete", NULL, 204));
	CHECK(!v.created);
	CHECK(!call(&v, "PUT", "/api/v1/vm.delete", NULL, 204));

	v = (struct api_vm){ 0 };
	error_says(call(&v, "PUT", "/api/v1/vm.reboot", NULL, 501), "given its VM on the command line");
	error_says(call(&v, "PUT", "/api/v1/vm.delete", NULL, 501), "given its VM on the command line");
}

/* --- the server around it, over its socket (no VM, no filter) --- */

/* Send req whole to the server at path, read the answer until the server
 * closes; the status line's code, the answer in out. */
static int http(const char *path, const char *req, size_t len, char *out, size_t outlen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t n = 0;
	ssize_t r;
	int fd, code = -1;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	CHECK_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	while (len) {
		r = write(fd, req, len);
		if (r <= 0)
			break;          /* the server may answer (413) and close early */
		req += r;
		len -= (size_t)r;
	}
	shutdown(fd, SHUT_WR);
	while (n + 1 < outlen && (r = read(fd, out + n, outlen - 1 - n)) > 0)
		n += (size_t)r;
	out[n] = 0;
	close(fd);
	sscanf(out, "HTTP/1.1 %d", &code);
	return code;
}

static int http_str(const char *path, const char *req, char *out, size_t outlen)
{
	return http(path, req, strlen(req), out, outlen);
}

static struct api_server *server_at(const char *path, struct api_vm *v)
{
	struct api_server *s;
	char err[MVM_ERR_MAX];

	if (api_server_new(path, v, &s, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		CHECK(0);
	}
	CHECK_EQ(api_server_start(s, false, err, sizeof(err)), 0);
	return s;
}

/* The socket is 0600 whatever the umask, a stale one (nobody accepts on
 * it) is replaced, a live one or another file is not; requests go through
 * HTTP to the same answers; a body over the limit is 413. */
TEST(server_socket_is_private_and_answers_over_http)
{
	char path[108], out[4096], err[MVM_ERR_MAX], *big;
	struct api_vm v = { 0 };
	struct api_server *s, *s2;
	struct stat st;
	size_t blen = API_BODY_MAX + 4096, hlen;
	mode_t old;
	int fd;

	files();
	snprintf(path, sizeof(path), "%s/api.sock", dir);
	/* A stale socket: bound, never listened on. */
	{
		struct sockaddr_un a = { .sun_family = AF_UNIX };

		snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
		close(fd);
	}
	old = umask(0);
	s = server_at(path, &v);
	umask(old);
	CHECK_EQ(stat(path, &st), 0);
	CHECK_EQ(st.st_mode & 0777, 0600);
	/* A live one is refused, and stays. */
	CHECK_EQ(api_server_new(path, &v, &s2, err, sizeof(err)), -EADDRINUSE);
	CHECK(strstr(err, "another mvm listens there"));
	CHECK_EQ(http_str(path, "GET /api/v1/vmm.ping HTTP/1.1\r\nHost: x\r\nConnection: close"
			  "\r\n\r\n", out, sizeof(out)), 200);
	CHECK(strstr(out, "application/json"));
	CHECK(strstr(out, "\"version\":\""));
	CHECK_EQ(http_str(path, "PUT /api/v1/vm.pause HTTP/1.1\r\nHost: x\r\nConnection: close"
			  "\r\n\r\n", out, sizeof(out)), 404);
	big = malloc(blen + 256);
	CHECK(big);
	hlen = (size_t)snprintf(big, 256, "PUT /api/v1/vm.create HTTP/1.1\r\nHost: x\r\n"
				"Connection: close\r\nContent-Length: %zu\r\n\r\n", blen);
	memset(big + hlen, ' ', blen);
	CHECK_EQ(http(path, big, hlen + blen, out, sizeof(out)), 413);
	free(big);
	api_server_free(s);
	/* Another file at the path is not the server's to remove. */
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0);
	close(fd);
	CHECK_EQ(api_server_new(path, &v, &s2, err, sizeof(err)), -EADDRINUSE);
	CHECK(strstr(err, "--api-socket"));
	unlink(path);
}
