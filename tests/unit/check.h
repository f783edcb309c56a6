/* Minimal unit-test framework. A test program is a list of TEST(name) cases;
 * `prog --list` prints the case names, `prog NAME` runs one case (the runner
 * runs each case in its own process with a timeout), `prog` runs all.
 * A failed CHECK prints file:line and the expression and exits 1. */
#ifndef MVM_CHECK_H
#define MVM_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void check_register(const char *name, void (*fn)(void));

#define TEST(name)                                                        \
	static void test_##name(void);                                    \
	__attribute__((constructor)) static void register_##name(void)    \
	{                                                                 \
		check_register(#name, test_##name);                       \
	}                                                                 \
	static void test_##name(void)

#define CHECK(cond)                                                       \
	do {                                                              \
		if (!(cond)) {                                            \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n",      \
				__FILE__, __LINE__, #cond);               \
			exit(1);                                          \
		}                                                         \
	} while (0)

#define CHECK_EQ(a, b)                                                    \
	do {                                                              \
		long long check_a_ = (long long)(a);                      \
		long long check_b_ = (long long)(b);                      \
		if (check_a_ != check_b_) {                               \
			fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s "\
				"(%lld != %lld)\n", __FILE__, __LINE__,   \
				#a, #b, check_a_, check_b_);              \
			exit(1);                                          \
		}                                                         \
	} while (0)

#define CHECK_STR(a, b)                                                   \
	do {                                                              \
		const char *check_a_ = (a), *check_b_ = (b);              \
		if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_)) {\
			fprintf(stderr, "%s:%d: CHECK_STR failed: %s == %s "\
				"(\"%s\" != \"%s\")\n", __FILE__, __LINE__,\
				#a, #b, check_a_ ? check_a_ : "(null)",   \
				check_b_ ? check_b_ : "(null)");          \
			exit(1);                                          \
		}                                                         \
	} while (0)

/* End this case as skipped (exit 77): only for what truly cannot run
 * here, saying why. */
#define CHECK_SKIP(...)                                                   \
	do {                                                              \
		printf("skip: " __VA_ARGS__);                             \
		printf("\n");                                             \
		exit(77);                                                 \
	} while (0)

/* Skip the case when this host has no io_uring: qemu-user (the s390x
 * unit tests on x86) does not emulate it and answers ENOSYS. */
void check_need_io_uring(void);

/* For tests of what is logged: check_log_line is a log sink's function
 * (struct log_sink, vmm/base/log.h) whose opaque is a struct check_log; it
 * counts the lines and keeps the last one with its level. */
struct check_log {
	unsigned lines;
	int level;
	char last[1024];
};
void check_log_line(void *opaque, int level, const char *msg);

/* Run `argv0 args...` style: fork, run fn in the child, return the child's
 * exit status (or 128+signal). Lets a case check that code exits/dies. */
int check_fork(void (*fn)(void *), void *arg, char *out, size_t outlen);

#endif
