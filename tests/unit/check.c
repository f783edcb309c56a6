#include "tests/unit/check.h"

#include <errno.h>
#include <linux/io_uring.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK_MAX_CASES 512

static struct {
	const char *name;
	void (*fn)(void);
} cases[CHECK_MAX_CASES];
static int ncases;

void check_register(const char *name, void (*fn)(void))
{
	if (ncases == CHECK_MAX_CASES) {
		fprintf(stderr, "check: too many cases\n");
		exit(2);
	}
	cases[ncases].name = name;
	cases[ncases].fn = fn;
	ncases++;
}

void check_need_io_uring(void)
{
	struct io_uring_params p;
	long fd;

	memset(&p, 0, sizeof(p));
	fd = syscall(__NR_io_uring_setup, 1, &p);
	if (fd >= 0) {
		close((int)fd);
		return;
	}
	if (errno == ENOSYS)
		CHECK_SKIP("io_uring is not available (ENOSYS: qemu-user does not emulate it); "
			   "this case runs on a native kernel");
}

void check_log_line(void *opaque, int level, const char *msg)
{
	struct check_log *cl = opaque;

	cl->lines++;
	cl->level = level;
	snprintf(cl->last, sizeof(cl->last), "%s", msg);
}

int check_fork(void (*fn)(void *), void *arg, char *out, size_t outlen)
{
	int pipefd[2], status;
	size_t got = 0;
	pid_t pid;

	if (pipe(pipefd))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(pipefd[0]);
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		fn(arg);
		fflush(NULL);
		_exit(0);
	}
	close(pipefd[1]);
	for (;;) {
		char tmp[512];
		ssize_t n = read(pipefd[0], tmp, sizeof(tmp));
		if (n <= 0)
			break;
		if (out && got + 1 < outlen) {
			size_t c = ((outlen - 1 - got) < (size_t)n ? (outlen - 1 - got) : (size_t)n);
			memcpy(out + got, tmp, c);
			got += c;
		}
	}
	if (out && outlen)
		out[got] = '\0';
	close(pipefd[0]);
	if (waitpid(pid, &status, 0) < 0)
		return -1;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

static void run_case(void *c)
{
	((typeof(&cases[0]))c)->fn();
}

int main(int argc, char **argv)
{
	int i, failed = 0;

	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (i = 0; i < ncases; i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	if (argc == 2) {
		for (i = 0; i < ncases; i++) {
			if (!strcmp(argv[1], cases[i].name)) {
				cases[i].fn();
				return 0;
			}
		}
		fprintf(stderr, "check: no case named '%s' (try --list)\n", argv[1]);
		return 2;
	}
	for (i = 0; i < ncases; i++) {
		int st = check_fork(run_case, &cases[i], NULL, 0);
		printf("%s %s\n", st ? "FAIL" : "ok  ", cases[i].name);
		failed += st != 0;
	}
	printf("%d passed, %d failed\n", ncases - failed, failed);
	return failed ? 1 : 0;
}
