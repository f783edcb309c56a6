/* "FIRST[,key[=value]]..." specs parsed against a table (kv_): the one
 * parser for every device's command-line value, as Cloud Hypervisor's
 * DiskConfig syntax string doubles as its help and Solo5's modules own
 * their arguments. A device owns its table (keys, limits, defaults, help
 * text) over the struct it is configured with; this file knows no device.
 *
 * The same table checks a struct that a program filled itself (kv_check)
 * and gives it its defaults (kv_defaults), so each limit, default and
 * check exists once, in the table. */
#ifndef MVM_KEYVAL_H
#define MVM_KEYVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum kv_kind {
	KV_FLAG,        /* "key" alone: the bool field becomes .max (ro, rw) */
	KV_BOOL,        /* key=on|off, or an alias in .values: a bool field */
	KV_UINT,        /* key=N, .min to .max: an unsigned field */
	KV_U64,         /* the same for a uint64_t field */
	KV_ENUM,        /* key=NAME, one of .values: an enum (int-sized) field */
	KV_STRING,      /* key=TEXT, printable ASCII, at most .max bytes: a
			 * const char * field, pointing into the caller's buffer */
};

struct kv_value {
	const char *name;
	int value;
	bool alias;     /* accepted, but not offered in help and messages */
};

struct kv_key {
	const char *name;
	enum kv_kind kind;
	size_t off;             /* of the field in the configured struct */
	uint64_t min, max;      /* KV_UINT: the range; KV_STRING: max bytes */
	uint64_t check_max;     /* KV_UINT: kv_check's bound where it is wider than
				 * what a spec may say (0: max) */
	uint64_t def;           /* default (KV_BOOL, KV_UINT, KV_ENUM) */
	bool no_default;        /* kv_defaults leaves the field alone */
	bool zero_is_unset;     /* KV_UINT: 0 in a struct means "not set", so
				 * kv_check lets it pass; key=0 is refused */
	bool required;          /* KV_UINT, KV_STRING: kv_check refuses 0 or NULL
				 * as missing; the syntax shows it unbracketed */
	const struct kv_value *values;  /* KV_BOOL, KV_ENUM: NULL-terminated */
	const char *meta;       /* the value's name in the syntax: N, USEC, ID */
	const char *unit;       /* KV_UINT, KV_U64: "us" or "ms" where the number is a time */
	const char *help;       /* what it does, word-wrapped by kv_help; NULL:
				 * the key is an alias, left out of the help */
};

struct kv_table {
	const char *what;       /* "disk": every message starts with it */
	const char *first;      /* what comes before the first comma: "PATH";
				 * NULL: none, the spec is keys alone */
	const char *first_name; /* ... in words, for messages: "image path" */
	size_t first_off;       /* its const char * field */
	const struct kv_key *keys;
	size_t nkeys;
};

/* The field offset, checked at compile time to be a field of type `ctype`
 * (by size: an enum, a bool, an unsigned or a pointer). */
#define KV_OFF(T, member, ctype)                                                  \
	(offsetof(T, member) + 0 * sizeof(struct {                                \
		_Static_assert(sizeof(((T *)0)->member) == sizeof(ctype),         \
			       #member " is not a " #ctype);                       \
		int kv_;                                                          \
	}))

/* Parse spec over *obj (which holds its defaults or the caller's values:
 * keys not in spec leave their fields alone). String fields point into
 * buf, which needs strlen(spec) + 1 bytes and must outlive obj's use.
 * 0, or -EINVAL (-ENOSPC: buf too small) with a one-line message in err
 * that starts with t->what and quotes the spec (control characters as
 * '?'). */
int kv_parse(const struct kv_table *t, const char *spec, void *obj, char *buf, size_t buflen,
	     char *err, size_t errlen);

/* One key over *obj: kv_parse's "key=value" without the spec around it
 * (val NULL for a flag). A string field points at val itself. Messages
 * start with the key: "queues '0': out of range; ...". */
int kv_set_key(const struct kv_table *t, const char *key, const char *val, void *obj,
	       char *err, size_t errlen);

/* Check a struct filled by a program: every KV_UINT in range, every
 * KV_ENUM and KV_BOOL a known value, every KV_STRING short enough and
 * printable. Messages start with "WHAT NAME: " (name: e.g. the path). */
int kv_check(const struct kv_table *t, const void *obj, const char *name, char *err,
	     size_t errlen);

/* Every field with a default gets it. */
void kv_defaults(const struct kv_table *t, void *obj);

/* "PATH[,ro][,serial=ID][,cache=none|writeback]..." into buf (cut to len),
 * returning the length it needs. */
size_t kv_syntax(const struct kv_table *t, char *buf, size_t len);

/* The keys of *obj as a spec parses them back ("cache=none,queues=4"):
 * every key a spec may hold (not aliases), with the field's value; a
 * flag where its field has the flag's value, a string or a zero_is_unset
 * number only where set. The first part (PATH) is left out: a table
 * copy with first = NULL parses the result. A number above what a spec
 * may say (up to check_max) is written as the spec's largest, which the
 * table's key means the same as (io-threads: one per queue). Into buf
 * (cut to len), the length it needs returned. */
size_t kv_format(const struct kv_table *t, const void *obj, char *buf, size_t len);
/* Whether kv_format's spec of obj parses back to obj: 0, or -EINVAL
 * naming the key whose value a spec cannot hold (a string with a comma,
 * which ends a key in a spec) with "WHAT NAME: " before it. */
int kv_format_check(const struct kv_table *t, const void *obj, const char *name, char *err,
		    size_t errlen);

/* The help text into buf (cut to len), returning the length it needs:
 * each key's syntax at indent, its help word-wrapped to 79 columns. */
size_t kv_help(const struct kv_table *t, unsigned indent, char *buf, size_t len);
/* text word-wrapped as kv_help wraps a key's help: every line from column
 * col (indented), at most width columns, ending in a newline. Into buf
 * (cut to len), returning the length it needs. */
size_t kv_wrap(const char *text, unsigned col, unsigned width, char *buf, size_t len);

#endif
