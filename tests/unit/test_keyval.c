/* The one key=value parser (vmm/base/keyval.c), over a table of its own:
 * what a spec sets, what it refuses and how it says so, that the same
 * table checks a struct a program filled and writes the help. */
#include "tests/unit/check.h"
#include "vmm/base/keyval.h"

#include <errno.h>
#include <stdbool.h>

enum color { RED, GREEN = 5 };

struct thing {
	const char *name;
	bool flag;
	bool on;
	unsigned count;
	unsigned usec;
	unsigned threads;
	enum color color;
	const char *label;
};

static const struct kv_value on_off[] = {
	{ .name = "on", .value = 1 },
	{ .name = "off", .value = 0 },
	{ .name = "yes", .value = 1, .alias = true },
	{ .name = NULL },
};
static const struct kv_value colors[] = {
	{ .name = "red", .value = RED },
	{ .name = "green", .value = GREEN },
	{ .name = NULL },
};

#define OFF(m, t) KV_OFF(struct thing, m, t)
static const struct kv_key keys[] = {
	{ "flag", KV_FLAG, OFF(flag, bool), .max = 1, .help = "sets the flag" },
	{ "noflag", KV_FLAG, OFF(flag, bool), .max = 0 },
	{ "on", KV_BOOL, OFF(on, bool), .values = on_off, .def = 1, .help = "a switch" },
	{ "count", KV_UINT, OFF(count, unsigned), .min = 1, .max = 8, .def = 2, .meta = "N",
	  .help = "how many" },
	{ "usec", KV_UINT, OFF(usec, unsigned), .max = 100, .def = 10, .meta = "USEC",
	  .unit = "us", .help = "a long help text that goes on and on so that it has to be "
	  "wrapped, more than once, at the seventy-nine columns a terminal shows" },
	{ "threads", KV_UINT, OFF(threads, unsigned), .min = 1, .max = 4, .check_max = 6,
	  .zero_is_unset = true, .meta = "N", .help = "threads (0 in a struct: automatic)" },
	{ "color", KV_ENUM, OFF(color, enum color), .values = colors, .def = GREEN,
	  .help = "red or green" },
	{ "label", KV_STRING, OFF(label, const char *), .max = 4, .meta = "ID",
	  .help = "up to 4 bytes" },
};
static const struct kv_table table = {
	.what = "thing", .first = "NAME", .first_name = "name", .first_off = OFF(name, const char *),
	.keys = keys, .nkeys = sizeof(keys) / sizeof(keys[0]),
};

static char err[256], buf[128];

static int parse(struct thing *t, const char *spec)
{
	err[0] = '\0';
	return kv_parse(&table, spec, t, buf, sizeof(buf), err, sizeof(err));
}

TEST(defaults_then_the_spec_over_them)
{
	struct thing t = { 0 };

	kv_defaults(&table, &t);
	CHECK(!t.flag && t.on && t.count == 2 && t.usec == 10 && t.color == GREEN);
	CHECK(t.label == NULL && t.threads == 0);
	CHECK_EQ(parse(&t, "x,flag,on=off,count=8,usec=0,color=red,label=ab,threads=3"), 0);
	CHECK_STR(t.name, "x");
	CHECK(t.flag && !t.on && t.count == 8 && t.usec == 0 && t.color == RED);
	CHECK_STR(t.label, "ab");
	CHECK_EQ(t.threads, 3);
	/* Keys left out keep what the struct held; later keys win. */
	CHECK_EQ(parse(&t, "y,noflag,on=yes,count=1,count=3"), 0);
	CHECK(!t.flag && t.on && t.count == 3 && t.color == RED);
	/* Strings point into the caller's buffer, not into the spec. */
	CHECK(t.name >= buf && t.name < buf + sizeof(buf));
}

TEST(refusals_name_the_value_and_the_way_out)
{
	struct thing t = { 0 };

	CHECK_EQ(parse(&t, ",flag"), -EINVAL);
	CHECK(strstr(err, "missing name; use NAME[,flag][,on=on|off]"));
	CHECK_EQ(parse(&t, "x,,flag"), -EINVAL);
	CHECK(strstr(err, "empty option"));
	CHECK_EQ(parse(&t, "x,bogus=1"), -EINVAL);
	CHECK(strstr(err, "unknown option 'bogus=1'; valid options are flag, on=on|off, count=N"));
	CHECK_EQ(parse(&t, "x,flag=1"), -EINVAL);
	CHECK(strstr(err, "flag takes no value"));
	CHECK_EQ(parse(&t, "x,count"), -EINVAL);
	CHECK(strstr(err, "count needs a value; give count=N"));
	CHECK_EQ(parse(&t, "x,count=9"), -EINVAL);
	CHECK(strstr(err, "thing count='9': out of range; use a number from 1 to 8"));
	CHECK_EQ(parse(&t, "x,usec=z"), -EINVAL);
	CHECK(strstr(err, "usec='z': not a number; use 0 (off) to 100 microseconds"));
	CHECK_EQ(parse(&t, "x,threads=0"), -EINVAL);    /* 0 is "unset", not typed */
	CHECK_EQ(parse(&t, "x,color=blue"), -EINVAL);
	CHECK(strstr(err, "color 'blue' unknown; give color=red or color=green"));
	CHECK_EQ(parse(&t, "x,on=maybe"), -EINVAL);
	CHECK(strstr(err, "give on=on or on=off") && !strstr(err, "yes"));   /* no aliases */
	CHECK_EQ(parse(&t, "x,label=abcde"), -EINVAL);
	CHECK(strstr(err, "label 'abcde' is 5 bytes; at most 4"));
	CHECK_EQ(parse(&t, "x,label=a\tb"), -EINVAL);
	CHECK(strstr(err, "printable ASCII") && !strchr(err, '\t'));
}

TEST(a_spec_that_does_not_fit_the_buffer_is_refused)
{
	struct thing t = { 0 };
	char small[4];

	CHECK_EQ(kv_parse(&table, "abcd", &t, small, sizeof(small), err, sizeof(err)), -ENOSPC);
	CHECK(t.name == NULL);
	CHECK_EQ(kv_parse(&table, "abc", &t, small, sizeof(small), err, sizeof(err)), 0);
	CHECK_STR(t.name, "abc");
}

/* Control characters in what the caller typed show as '?': one line. */
TEST(messages_stay_one_line)
{
	struct thing t = { 0 };

	CHECK_EQ(parse(&t, "x\n,color=\r\x7f"), -EINVAL);
	CHECK(!strchr(err, '\n') && !strchr(err, '\r') && !strchr(err, 0x7f));
	CHECK(strstr(err, "'x?,color=?" "?'"));
}

TEST(the_same_table_checks_a_struct_a_program_filled)
{
	struct thing t = { 0 };

	kv_defaults(&table, &t);
	CHECK_EQ(kv_check(&table, &t, "x", err, sizeof(err)), 0);
	t.count = 0;
	CHECK_EQ(kv_check(&table, &t, "x", err, sizeof(err)), -EINVAL);
	CHECK_STR(err, "thing x: 0 count; give 1 to 8");
	t.count = 1;
	t.usec = 101;
	CHECK_EQ(kv_check(&table, &t, "x", err, sizeof(err)), -EINVAL);
	CHECK_STR(err, "thing x: usec 101 us; give 0 to 100");
	t.usec = 0;
	t.threads = 0;          /* unset: allowed */
	CHECK_EQ(kv_check(&table, &t, "x", err, sizeof(err)), 0);
	t.threads = 6;          /* a struct may say more than a spec (check_max) */
	CHECK_EQ(kv_check(&table, &t, "x", err, sizeof(err)), 0);
	CHECK_EQ(parse(&t, "x,threads=6"), -EINVAL);
	t.threads = 7;
	CHECK_EQ(kv_check(&table, &t, "x", err, sizeof(err)), -EINVAL);
	t.threads = 4;
	t.color = (enum color)3;
	CHECK_EQ(kv_check(&table, &t, "x", err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "color 3 unknown; give red or green"));
	t.color = RED;
	t.label = "12345";
	CHECK_EQ(kv_check(&table, &t, "x", err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "longer than 4 bytes"));
	t.label = "1\n";
	CHECK_EQ(kv_check(&table, &t, "x", err, sizeof(err)), -EINVAL);
	CHECK(!strchr(err, '\n'));
}

TEST(syntax_and_help_come_from_the_table)
{
	char text[2048], *line;
	size_t n;

	n = kv_syntax(&table, text, sizeof(text));
	CHECK_STR(text, "NAME[,flag][,on=on|off][,count=N][,usec=USEC][,threads=N]"
		  "[,color=red|green][,label=ID]");
	CHECK_EQ(n, strlen(text));
	CHECK(kv_syntax(&table, text, 8) == n && strlen(text) == 7);    /* cut, not overrun */
	CHECK_EQ(kv_syntax(&table, NULL, 0), n);                       /* the length alone */
	CHECK_EQ(kv_help(&table, 4, NULL, 0), kv_help(&table, 4, text, sizeof(text)));
	n = kv_help(&table, 4, text, sizeof(text));
	CHECK_EQ(n, strlen(text));
	CHECK(strstr(text, "    ,flag            sets the flag\n"));
	CHECK(!strstr(text, "noflag"));                 /* aliases stay out */
	for (line = text; *line; line = strchr(line, '\n') + 1)
		CHECK(strchr(line, '\n') - line <= 79);
	CHECK(strstr(text, "seventy-nine"));
}

/* One key alone (a program's option that sets it for every spec): the
 * same limits, messages that start with the key. */
TEST(one_key_alone)
{
	struct thing t = { 0 };

	kv_defaults(&table, &t);
	CHECK_EQ(kv_set_key(&table, "count", "5", &t, err, sizeof(err)), 0);
	CHECK_EQ(t.count, 5);
	CHECK_EQ(kv_set_key(&table, "color", "red", &t, err, sizeof(err)), 0);
	CHECK_EQ(t.color, RED);
	CHECK_EQ(kv_set_key(&table, "flag", NULL, &t, err, sizeof(err)), 0);
	CHECK(t.flag);
	CHECK_EQ(kv_set_key(&table, "count", "0", &t, err, sizeof(err)), -EINVAL);
	CHECK_STR(err, "count '0': out of range; use a number from 1 to 8");
	CHECK_EQ(kv_set_key(&table, "color", "blue", &t, err, sizeof(err)), -EINVAL);
	CHECK_STR(err, "color 'blue': unknown; give red or green");
	CHECK_EQ(kv_set_key(&table, "flag", "1", &t, err, sizeof(err)), -EINVAL);
	CHECK_EQ(kv_set_key(&table, "count", NULL, &t, err, sizeof(err)), -EINVAL);
	CHECK_STR(err, "count: needs a value");
	CHECK_EQ(kv_set_key(&table, "nope", "1", &t, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "no key 'nope'; the keys are flag, on=on|off"));
	CHECK_EQ(t.count, 5);           /* refusals leave the struct alone */
}

/* A table with no word before the keys, and keys a spec must give
 * ("cid=N,socket=PATH"): the syntax leads with them, unbracketed, and a
 * struct without them is refused naming the missing key. */
struct addr {
	unsigned id;
	const char *where;
	unsigned conns;
};
#define AOFF(m, t) KV_OFF(struct addr, m, t)
static const struct kv_key addr_keys[] = {
	{ "id", KV_UINT, AOFF(id, unsigned), .min = 3, .max = 100, .required = true, .meta = "N",
	  .help = "whose" },
	{ "where", KV_STRING, AOFF(where, const char *), .max = 16, .required = true,
	  .meta = "PATH", .help = "there" },
	{ "conns", KV_UINT, AOFF(conns, unsigned), .min = 1, .max = 9, .def = 4, .meta = "N",
	  .help = "how many" },
};
static const struct kv_table addr_table = {
	.what = "addr", .keys = addr_keys, .nkeys = sizeof(addr_keys) / sizeof(addr_keys[0]),
};

TEST(a_table_of_keys_alone_with_required_ones)
{
	struct addr a = { 0 };
	char text[256];

	kv_syntax(&addr_table, text, sizeof(text));
	CHECK_STR(text, "id=N,where=PATH[,conns=N]");
	kv_defaults(&addr_table, &a);
	CHECK_EQ(a.conns, 4);
	CHECK_EQ(kv_parse(&addr_table, "where=/x,id=7", &a, buf, sizeof(buf), err, sizeof(err)),
		 0);
	CHECK_EQ(a.id, 7);
	CHECK_STR(a.where, "/x");
	CHECK_EQ(kv_check(&addr_table, &a, "/x", err, sizeof(err)), 0);
	a = (struct addr){ .conns = 4 };
	CHECK_EQ(kv_parse(&addr_table, "id=5", &a, buf, sizeof(buf), err, sizeof(err)), 0);
	CHECK_EQ(kv_check(&addr_table, &a, "-", err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "where= is missing; use id=N,where=PATH[,conns=N]"));
	a.where = "/y";
	a.id = 0;
	CHECK_EQ(kv_check(&addr_table, &a, "/y", err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "id= is missing"));
	CHECK_EQ(kv_parse(&addr_table, "", &a, buf, sizeof(buf), err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "empty spec"));
	CHECK_EQ(kv_parse(&addr_table, "id=2,where=/z", &a, buf, sizeof(buf), err, sizeof(err)),
		 -EINVAL);
	CHECK(strstr(err, "use a number from 3 to 100"));
}
