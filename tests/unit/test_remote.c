/* mvm-remote's commands (vmm/remote/remote.c): what each one asks of the
 * API socket (method, endpoint, Cloud Hypervisor's JSON), what it refuses
 * before asking, and what an answer turns into (output, one error line,
 * exit status). The HTTP exchange itself is the system tests'. */
#include "tests/unit/check.h"
#include "vmm/remote/remote.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct remote_req req;
static char err[1024];

/* Parse "mvm-remote ARGS..." (NULL-terminated) with cwd /work. */
static int parse(const char *first, ...)
{
	char *argv[16];
	int argc = 0;
	va_list ap;

	remote_req_fini(&req);
	argv[argc++] = "mvm-remote";
	va_start(ap, first);
	for (const char *a = first; a && argc < 15; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	err[0] = 0;
	return remote_parse(argc, argv, "/work", &req, err, sizeof(err));
}

/* The request's body equals the JSON text want. */
static void check_body(const char *want)
{
	json_t *a, *b;

	CHECK(req.body);
	a = json_loads(req.body, 0, NULL);
	b = json_loads(want, 0, NULL);
	CHECK(a && b);
	if (!json_equal(a, b))
		fprintf(stderr, "body %s, wanted %s\n", req.body, want);
	CHECK(json_equal(a, b));
	json_decref(a);
	json_decref(b);
}

/* One line that says what: no newline inside, the words given in it. */
static void check_err(const char *has)
{
	CHECK(err[0]);
	CHECK(!strchr(err, '\n'));
	if (!strstr(err, has))
		fprintf(stderr, "error '%s' lacks '%s'\n", err, has);
	CHECK(strstr(err, has));
}

TEST(commands_without_an_argument_send_no_body)
{
	CHECK_EQ(parse("--api-socket", "/run/s", "ping", NULL), 0);
	CHECK_STR(req.method, "GET");
	CHECK_STR(req.endpoint, "vmm.ping");
	CHECK_STR(req.socket, "/run/s");
	CHECK(!req.body);
	CHECK_EQ(parse("--api-socket=/run/s", "info", NULL), 0);
	CHECK_STR(req.endpoint, "vm.info");
	CHECK_EQ(parse("--api-socket", "s", "counters", NULL), 0);
	CHECK_STR(req.endpoint, "vm.counters");
	CHECK_EQ(parse("--api-socket", "s", "pause", NULL), 0);
	CHECK_STR(req.method, "PUT");
	CHECK_STR(req.endpoint, "vm.pause");
	CHECK(!req.body);
	CHECK_EQ(parse("--api-socket", "s", "resume", NULL), 0);
	CHECK_STR(req.endpoint, "vm.resume");
	CHECK_EQ(parse("--api-socket", "s", "boot", NULL), 0);
	CHECK_STR(req.endpoint, "vm.boot");
	CHECK_EQ(parse("--api-socket", "s", "shutdown", NULL), 0);
	CHECK_STR(req.endpoint, "vm.shutdown");
	CHECK_EQ(parse("--api-socket", "s", "reboot", NULL), 0);
	CHECK_STR(req.endpoint, "vm.reboot");
	CHECK_EQ(parse("--api-socket", "s", "delete", NULL), 0);
	CHECK_STR(req.endpoint, "vm.delete");
	CHECK(!req.body);
	CHECK_EQ(parse("--api-socket", "s", "--timeout", "30", "shutdown-vmm", NULL), 0);
	CHECK_STR(req.endpoint, "vmm.shutdown");
	CHECK_EQ(req.timeout_s, 30);
}

TEST(snapshot_sends_its_directory_as_an_absolute_file_url)
{
	CHECK_EQ(parse("--api-socket", "s", "snapshot", "snaps/one", NULL), 0);
	CHECK_STR(req.endpoint, "vm.snapshot");
	check_body("{\"destination_url\": \"file:///work/snaps/one\"}");
	CHECK_EQ(parse("--api-socket", "s", "snapshot", "/var/snap", NULL), 0);
	check_body("{\"destination_url\": \"file:///var/snap\"}");
	CHECK_EQ(parse("--api-socket", "s", "snapshot", "file:///a=b", NULL), 0);
	check_body("{\"destination_url\": \"file:///a=b\"}");
	CHECK_EQ(parse("--api-socket", "s", "snapshot", "destination_url=file:///x", NULL), 0);
	check_body("{\"destination_url\": \"file:///x\"}");
	CHECK_EQ(parse("--api-socket", "s", "snapshot", "a=b,c", NULL), 0);
	check_body("{\"destination_url\": \"file:///work/a=b,c\"}");
}

TEST(coredump_and_nmi_send_what_cloud_hypervisors_take)
{
	CHECK_EQ(parse("--api-socket", "s", "coredump", "guest.core", NULL), 0);
	CHECK_STR(req.endpoint, "vm.coredump");
	check_body("{\"destination_url\": \"file:///work/guest.core\"}");
	CHECK_EQ(parse("--api-socket", "s", "coredump", "destination_url=file:///c", NULL), 0);
	check_body("{\"destination_url\": \"file:///c\"}");
	CHECK_EQ(parse("--api-socket", "s", "nmi", NULL), 0);
	CHECK_STR(req.endpoint, "vm.nmi");
	CHECK(!req.body);
	CHECK_EQ(parse("--api-socket", "s", "power-button", NULL), 0);
	CHECK_STR(req.endpoint, "vm.power-button");
	CHECK(!req.body);
}

TEST(restore_takes_a_directory_or_cloud_hypervisors_keys)
{
	CHECK_EQ(parse("--api-socket", "s", "restore", "snap", NULL), 0);
	CHECK_STR(req.endpoint, "vm.restore");
	check_body("{\"source_url\": \"file:///work/snap\"}");
	CHECK_EQ(parse("--api-socket", "s", "restore", "source_url=file:///s,prefault=on", NULL), 0);
	check_body("{\"source_url\": \"file:///s\", \"prefault\": true}");
}

TEST(add_disk_keys_become_a_disk_config_with_its_rate_limiter)
{
	CHECK_EQ(parse("--api-socket", "s", "add-disk",
		       "path=/i.img,readonly=on,direct=off,num_queues=2,serial=0123,id=data,"
		       "bw_size=1000,bw_refill_time=100,ops_size=10,ops_one_time_burst=5", NULL), 0);
	CHECK_STR(req.endpoint, "vm.add-disk");
	check_body("{\"path\": \"/i.img\", \"readonly\": true, \"direct\": false, \"num_queues\": 2,"
		   " \"serial\": \"0123\", \"id\": \"data\", \"rate_limiter_config\": {"
		   "\"bandwidth\": {\"size\": 1000, \"refill_time\": 100},"
		   " \"ops\": {\"size\": 10, \"one_time_burst\": 5}}}");
	/* A key mvm does not know goes as typed: the server names it. */
	CHECK_EQ(parse("--api-socket", "s", "add-disk", "path=/i,vhost_user=true,x=y", NULL), 0);
	check_body("{\"path\": \"/i\", \"vhost_user\": true, \"x\": \"y\"}");
}

TEST(add_disk_takes_a_disk_config_as_json)
{
	CHECK_EQ(parse("--api-socket", "s", "add-disk", "{\"path\": \"/a,b\", \"id\": \"x\"}", NULL),
		 0);
	check_body("{\"path\": \"/a,b\", \"id\": \"x\"}");
	CHECK(parse("--api-socket", "s", "add-disk", "{\"path\": ", NULL) == -EINVAL);
	check_err("not JSON");
	CHECK(parse("--api-socket", "s", "add-disk", "{", NULL) == -EINVAL);
	check_err("add-disk");
}

/* add-vsock: ch-remote's cid=N,socket=PATH, the socket a string. */
TEST(add_vsock_sends_a_vsock_config)
{
	CHECK_EQ(parse("--api-socket", "s", "add-vsock", "cid=3,socket=/run/v.sock", NULL), 0);
	CHECK_STR(req.endpoint, "vm.add-vsock");
	check_body("{\"cid\": 3, \"socket\": \"/run/v.sock\"}");
	CHECK_EQ(parse("--api-socket", "s", "add-vsock", "{\"cid\": 4, \"socket\": \"1\"}", NULL),
		 0);
	check_body("{\"cid\": 4, \"socket\": \"1\"}");
}

TEST(update_disk_sends_its_id_path_and_limits)
{
	CHECK_EQ(parse("--api-socket", "s", "update-disk",
		       "id=_disk0,path=/new.img,ops_size=0,bw_size=4096,bw_refill_time=10", NULL), 0);
	CHECK_STR(req.endpoint, "vm.update-disk");
	check_body("{\"id\": \"_disk0\", \"path\": \"/new.img\", \"rate_limiter_config\": {"
		   "\"ops\": {\"size\": 0}, \"bandwidth\": {\"size\": 4096, \"refill_time\": 10}}}");
}

TEST(resize_disk_sends_a_vm_resize_disk)
{
	CHECK_EQ(parse("--api-socket", "s", "resize-disk", "id=_disk0,desired_size=17179869184",
		       NULL), 0);
	CHECK_STR(req.endpoint, "vm.resize-disk");
	check_body("{\"id\": \"_disk0\", \"desired_size\": 17179869184}");
}

TEST(remove_device_sends_its_id)
{
	CHECK_EQ(parse("--api-socket", "s", "remove-device", "_disk1", NULL), 0);
	CHECK_STR(req.endpoint, "vm.remove-device");
	check_body("{\"id\": \"_disk1\"}");
	CHECK(parse("--api-socket", "s", "remove-device", "", NULL) == -EINVAL);
	check_err("empty id");
}

TEST(create_sends_the_vmconfig_file)
{
	char path[] = "/tmp/mvm-remote-test.XXXXXX";
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	CHECK(write(fd, "{\"cpus\": {\"boot_vcpus\": 2}}\n", 28) == 28);
	CHECK_EQ(parse("--api-socket", "s", "create", path, NULL), 0);
	CHECK_STR(req.endpoint, "vm.create");
	check_body("{\"cpus\": {\"boot_vcpus\": 2}}");
	CHECK(ftruncate(fd, 0) == 0);
	CHECK(pwrite(fd, "[1, 2]", 6, 0) == 6);
	CHECK(parse("--api-socket", "s", "create", path, NULL) == -EINVAL);
	check_err("not a JSON object");
	close(fd);
	unlink(path);
	CHECK(parse("--api-socket", "s", "create", path, NULL) == -ENOENT);
	check_err("No such file");
}

TEST(bad_command_lines_are_refused_with_one_line_each)
{
	CHECK(parse("--api-socket", "s", NULL) == -EINVAL);
	check_err("no command; give one of ping, info");
	CHECK(parse("--api-socket", "s", "resize", NULL) == -EINVAL);
	check_err("resize: unknown command");
	CHECK(parse("pause", NULL) == -EINVAL);
	check_err("no --api-socket");
	CHECK(parse("--api-socket", "", "pause", NULL) == -EINVAL);
	check_err("--api-socket: empty");
	CHECK(parse("--api-socket", "s", "pause", "now", NULL) == -EINVAL);
	check_err("takes no argument");
	CHECK(parse("--api-socket", "s", "snapshot", NULL) == -EINVAL);
	check_err("snapshot: give DIR");
	CHECK(parse("--api-socket", "s", "add-disk", "path=/a", "readonly=on", NULL) == -EINVAL);
	check_err("no spaces between keys");
	CHECK(parse("--api-socket", "s", "add-disk", "path=/a,readonly", NULL) == -EINVAL);
	check_err("'readonly': give KEY=VALUE");
	CHECK(parse("--api-socket", "s", "add-disk", "path=/a,path=/b", NULL) == -EINVAL);
	check_err("path given twice");
	CHECK(parse("--api-socket", "s", "add-disk", "bw_size=1,bw_size=2", NULL) == -EINVAL);
	check_err("bw_size given twice");
	CHECK(parse("--api-socket", "s", "add-disk", ",", NULL) == -EINVAL);
	check_err("nothing given");
	CHECK(parse("--api-socket", "s", "--timeout", "0", "ping", NULL) == -EINVAL);
	check_err("--timeout '0'");
	CHECK(parse("--api-socket", "s", "--timeout", "5s", "ping", NULL) == -EINVAL);
	check_err("--timeout '5s'");
	CHECK(parse("--socket", "s", "ping", NULL) == -EINVAL);
	check_err("unknown option");
	CHECK(parse("--api-socket", "s", "snapshot", "", NULL) == -EINVAL);
	check_err("empty path");
	CHECK_EQ(parse("--help", NULL), 0);
	CHECK(req.help);
}

/* remote_reply's output and error text, and its exit status. */
static char *out_text, *err_text;

static int reply(const char *endpoint, long status, const char *body)
{
	size_t olen, elen;
	FILE *out = open_memstream(&out_text, &olen), *errf = open_memstream(&err_text, &elen);
	struct remote_req r = { .endpoint = "" };
	int ret;

	CHECK(out && errf);
	snprintf(r.endpoint, sizeof(r.endpoint), "%s", endpoint);
	ret = remote_reply(&r, status, body, body ? strlen(body) : 0, out, errf);
	fclose(out);
	fclose(errf);
	return ret;
}

static void reply_fini(void)
{
	free(out_text);
	free(err_text);
	out_text = err_text = NULL;
}

TEST(an_answer_goes_to_stdout_and_an_error_to_one_line_on_stderr)
{
	CHECK_EQ(reply("vm.pause", 204, NULL), REMOTE_EXIT_OK);
	CHECK_STR(out_text, "");
	CHECK_STR(err_text, "");
	reply_fini();
	CHECK_EQ(reply("vm.info", 200, "{\"state\":\"Running\"}"), REMOTE_EXIT_OK);
	CHECK_STR(out_text, "{\"state\":\"Running\"}\n");
	reply_fini();
	CHECK_EQ(reply("vm.pause", 405, "[\"vm.pause: the VM is paused already\"]"),
		 REMOTE_EXIT_FAILED);
	CHECK_STR(out_text, "");
	CHECK_STR(err_text, "mvm-remote: vm.pause: the VM is paused already (HTTP 405)\n");
	reply_fini();
	/* Cloud Hypervisor's chain, outermost first; and the string of
	 * mvm before 2.17 (and Cloud Hypervisor before v47). */
	CHECK_EQ(reply("vm.add-disk", 500, "[\"Error adding disk\",\"No such file\"]"),
		 REMOTE_EXIT_FAILED);
	CHECK_STR(err_text, "mvm-remote: vm.add-disk: Error adding disk: No such file (HTTP 500)\n");
	reply_fini();
	CHECK_EQ(reply("vm.pause", 405, "\"vm.pause: the VM is paused already\""), REMOTE_EXIT_FAILED);
	CHECK_STR(err_text, "mvm-remote: vm.pause: the VM is paused already (HTTP 405)\n");
	reply_fini();
	CHECK_EQ(reply("vm.info", 500, "\"out of memory\""), REMOTE_EXIT_FAILED);
	CHECK_STR(err_text, "mvm-remote: vm.info: out of memory (HTTP 500)\n");
	reply_fini();
	/* Not the API's shape: the text itself, one line. */
	CHECK_EQ(reply("vm.info", 502, "bad\ngateway\n"), REMOTE_EXIT_FAILED);
	CHECK_STR(err_text, "mvm-remote: vm.info: bad?gateway (HTTP 502)\n");
	reply_fini();
	CHECK_EQ(reply("vm.boot", 500, ""), REMOTE_EXIT_FAILED);
	CHECK_STR(err_text, "mvm-remote: vm.boot: (no message) (HTTP 500)\n");
	reply_fini();
	remote_req_fini(&req);
}
