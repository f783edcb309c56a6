#include "vmm/base/keyval.h"
#include "vmm/base/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void *kv_field(void *obj, const struct kv_key *k)
{
	return (char *)obj + k->off;
}

static const void *kv_cfield(const void *obj, const struct kv_key *k)
{
	return (const char *)obj + k->off;
}

/* Text appended to a caller's buffer, cut where it is full (always
 * NUL-terminated); n counts what the whole text takes. A NULL buffer or
 * length 0 asks for the length alone. */
struct kv_out {
	char *buf;
	size_t len, n;
	char scratch;
};

static void kv_out_init(struct kv_out *o, char *buf, size_t len)
{
	o->buf = buf && len ? buf : &o->scratch;
	o->len = buf && len ? len : 1;
	o->n = 0;
	o->buf[0] = '\0';
}

__attribute__((format(printf, 2, 3)))
static void kv_put(struct kv_out *o, const char *fmt, ...)
{
	size_t at = MIN(o->n, o->len - 1);
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(o->buf + at, o->len - at, fmt, ap);
	va_end(ap);
	if (r > 0)
		o->n += (size_t)r;
}

/* "mmio, pci or ccw" (sep ", "/" or ") or "none|writeback" (sep "|"),
 * with prefix before each name ("transport="). */
static void kv_values(const struct kv_key *k, const char *prefix, bool words, struct kv_out *o)
{
	size_t shown = 0, total = 0, i;

	for (i = 0; k->values[i].name; i++)
		total += !k->values[i].alias;
	for (i = 0; k->values[i].name; i++) {
		const char *sep = "";

		if (k->values[i].alias)
			continue;
		if (shown)
			sep = !words ? "|" : shown + 1 == total ? " or " : ", ";
		shown++;
		kv_put(o, "%s%s%s", sep, prefix, k->values[i].name);
	}
}

static const struct kv_value *kv_lookup(const struct kv_key *k, const char *name)
{
	size_t i;

	for (i = 0; k->values[i].name; i++)
		if (!strcmp(k->values[i].name, name))
			return &k->values[i];
	return NULL;
}

static void kv_key_list(const struct kv_table *t, struct kv_out *o);

/* A time unit in words, for messages. */
static const char *kv_unit_word(const struct kv_key *k)
{
	return !strcmp(k->unit, "ms") ? "milliseconds" : "microseconds";
}

/* Messages quote the whole spec where there is one (kv_parse), or the
 * key and its value alone (kv_set_key: spec NULL). */
static int kv_set(const struct kv_table *t, const struct kv_key *k, const char *spec,
		  const char *val, void *obj, char *err, size_t errlen)
{
	const struct kv_value *v;
	char list[256], prefix[64], label[160];
	struct kv_out o;
	uint64_t u, lo;
	size_t i, n;
	int r;

	if (spec)
		snprintf(label, sizeof(label), "%s %s='%s'", t->what, k->name, val ? val : "");
	else
		snprintf(label, sizeof(label), "%s '%s'", k->name, val ? val : "");
	switch (k->kind) {
	case KV_FLAG:
		*(bool *)kv_field(obj, k) = k->max != 0;
		return 0;
	case KV_BOOL:
	case KV_ENUM:
		v = kv_lookup(k, val);
		if (!v && spec) {
			snprintf(prefix, sizeof(prefix), "%s=", k->name);
			kv_out_init(&o, list, sizeof(list));
			kv_values(k, prefix, true, &o);
			return err_set(err, errlen, -EINVAL, "%s '%s': %s '%s' unknown; give %s",
				      t->what, spec, k->name, val, list);
		}
		if (!v) {
			kv_out_init(&o, list, sizeof(list));
			kv_values(k, "", true, &o);
			return err_set(err, errlen, -EINVAL, "%s: unknown; give %s", label, list);
		}
		if (k->kind == KV_BOOL)
			*(bool *)kv_field(obj, k) = v->value != 0;
		else
			*(int *)kv_field(obj, k) = v->value;
		return 0;
	case KV_UINT:
	case KV_U64:
		lo = k->zero_is_unset ? MAX(k->min, 1) : k->min;
		r = parse_uint(val, lo, k->max, &u);
		if (r && k->unit)
			return err_set(err, errlen, -EINVAL, "%s: %s; use %llu%s to %llu %s",
				      label, r == -ERANGE ? "out of range" : "not a number",
				      (unsigned long long)lo, lo ? "" : " (off)",
				      (unsigned long long)k->max, kv_unit_word(k));
		if (r)
			return err_set(err, errlen, -EINVAL, "%s: %s; use a number from %llu to %llu",
				      label, r == -ERANGE ? "out of range" : "not a number",
				      (unsigned long long)lo, (unsigned long long)k->max);
		if (k->kind == KV_U64)
			*(uint64_t *)kv_field(obj, k) = u;
		else
			*(unsigned *)kv_field(obj, k) = (unsigned)u;
		return 0;
	case KV_STRING:
		n = strlen(val);
		if (n > k->max)
			return err_set(err, errlen, -EINVAL, "%s%s%s '%s' is %zu bytes; at most %llu "
				      "bytes fit, give a shorter %s", spec ? t->what : "",
				      spec ? " " : "", k->name, val, n, (unsigned long long)k->max,
				      k->name);
		for (i = 0; i < n; i++)
			if (val[i] < 0x20 || val[i] > 0x7e)
				return err_set(err, errlen, -EINVAL, "%s%s%s '%s': only printable "
					      "ASCII is allowed", spec ? t->what : "", spec ? " " : "",
					      k->name, val);
		*(const char **)kv_field(obj, k) = val;
		return 0;
	}
	return err_set(err, errlen, -EINVAL, "%s: key %s of unknown kind", t->what, k->name);
}

int kv_set_key(const struct kv_table *t, const char *key, const char *val, void *obj,
	       char *err, size_t errlen)
{
	char keys[1024];
	struct kv_out o;
	size_t i;

	for (i = 0; key && i < t->nkeys; i++) {
		const struct kv_key *k = &t->keys[i];

		if (strcmp(k->name, key))
			continue;
		if ((k->kind == KV_FLAG) != !val)
			return err_set(err, errlen, -EINVAL, "%s: %s", key,
				      val ? "takes no value" : "needs a value");
		return kv_set(t, k, NULL, val, obj, err, errlen);
	}
	kv_out_init(&o, keys, sizeof(keys));
	kv_key_list(t, &o);
	return err_set(err, errlen, -EINVAL, "%s: no key '%s'; the keys are %s", t->what,
		      key ? key : "(null)", keys);
}

static void kv_key_syntax(const struct kv_key *k, struct kv_out *o)
{
	switch (k->kind) {
	case KV_FLAG:
		kv_put(o, "%s", k->name);
		break;
	case KV_BOOL:
	case KV_ENUM:
		kv_put(o, "%s=", k->name);
		kv_values(k, "", false, o);
		break;
	default:
		kv_put(o, "%s=%s", k->name, k->meta ? k->meta : "VALUE");
	}
}

/* "ro, serial=ID, cache=none|writeback, ...": the keys a spec may hold. */
static void kv_key_list(const struct kv_table *t, struct kv_out *o)
{
	size_t i;

	for (i = 0; i < t->nkeys; i++) {
		if (!t->keys[i].help)
			continue;
		if (o->n)
			kv_put(o, ", ");
		kv_key_syntax(&t->keys[i], o);
	}
}

int kv_parse(const struct kv_table *t, const char *spec, void *obj, char *buf, size_t buflen,
	     char *err, size_t errlen)
{
	char syntax[1024];
	struct kv_out o;
	char *p, *next;
	size_t n;

	if (!spec)
		return err_set(err, errlen, -EINVAL, "%s: no spec; give %s%skey=value...", t->what,
			      t->first ? t->first : "", t->first ? "[," : "[");
	n = strlen(spec);
	if (!buf || n >= buflen)
		return err_set(err, errlen, -ENOSPC, "%s '%.64s': %zu bytes, more than the %zu "
			      "bytes of room for it; give a buffer of strlen(spec) + 1", t->what,
			      spec, n, buflen);
	memcpy(buf, spec, n + 1);
	next = buf;
	if (t->first) {
		next = strchr(buf, ',');
		if (next)
			*next++ = '\0';
		if (!*buf) {
			kv_syntax(t, syntax, sizeof(syntax));
			return err_set(err, errlen, -EINVAL, "%s '%s': missing %s; use %s", t->what,
				      spec, t->first_name, syntax);
		}
		*(const char **)kv_field(obj, &(struct kv_key){ .off = t->first_off }) = buf;
	} else if (!*buf) {
		kv_syntax(t, syntax, sizeof(syntax));
		return err_set(err, errlen, -EINVAL, "%s: an empty spec; use %s", t->what, syntax);
	}
	for (p = next; p; p = next) {
		const struct kv_key *k = NULL;
		char *val;
		size_t i;
		int r;

		next = strchr(p, ',');
		if (next)
			*next++ = '\0';
		if (!*p)
			return err_set(err, errlen, -EINVAL, "%s '%s': empty option (two commas or "
				      "a trailing comma); remove it", t->what, spec);
		val = strchr(p, '=');
		if (val)
			*val++ = '\0';
		for (i = 0; i < t->nkeys && !k; i++)
			if (!strcmp(t->keys[i].name, p))
				k = &t->keys[i];
		kv_out_init(&o, syntax, sizeof(syntax));
		if (k && (k->kind == KV_FLAG) != !val) {
			kv_key_syntax(k, &o);
			return err_set(err, errlen, -EINVAL, "%s '%s': %s %s; give %s", t->what, spec,
				      p, val ? "takes no value" : "needs a value", syntax);
		}
		if (!k) {
			kv_key_list(t, &o);
			return err_set(err, errlen, -EINVAL, "%s: unknown option '%s%s%s'; valid "
				      "options are %s", t->what, p, val ? "=" : "", val ? val : "",
				      syntax);
		}
		r = kv_set(t, k, spec, val, obj, err, errlen);
		if (r)
			return r;
	}
	return 0;
}

static int kv_missing(const struct kv_table *t, const struct kv_key *k, const char *name,
		      char *err, size_t errlen)
{
	char syntax[1024];

	kv_syntax(t, syntax, sizeof(syntax));
	return err_set(err, errlen, -EINVAL, "%s %s: %s= is missing; use %s", t->what, name,
		      k->name, syntax);
}

int kv_check(const struct kv_table *t, const void *obj, const char *name, char *err,
	     size_t errlen)
{
	char list[256];
	struct kv_out o;
	size_t i, j;

	for (i = 0; i < t->nkeys; i++) {
		const struct kv_key *k = &t->keys[i];
		const void *f = kv_cfield(obj, k);
		const char *s;
		uint64_t u;
		int e;

		switch (k->kind) {
		case KV_FLAG:
		case KV_BOOL:
			break;          /* a bool holds nothing else */
		case KV_UINT:
		case KV_U64:
			u = k->kind == KV_U64 ? *(const uint64_t *)f : *(const unsigned *)f;
			if (u == 0 && k->required)
				return kv_missing(t, k, name, err, errlen);
			if ((u == 0 && k->zero_is_unset) ||
			    (u >= k->min && u <= (k->check_max ? k->check_max : k->max)))
				break;
			if (k->unit)
				return err_set(err, errlen, -EINVAL, "%s %s: %s %llu %s; give %llu to "
					      "%llu", t->what, name, k->name, (unsigned long long)u,
					      k->unit, (unsigned long long)k->min,
					      (unsigned long long)k->max);
			return err_set(err, errlen, -EINVAL, "%s %s: %llu %s; give %llu to %llu",
				      t->what, name, (unsigned long long)u, k->name,
				      (unsigned long long)k->min, (unsigned long long)k->max);
		case KV_ENUM:
			e = *(const int *)f;
			for (j = 0; k->values[j].name; j++)
				if (k->values[j].value == e)
					break;
			if (k->values[j].name)
				break;
			kv_out_init(&o, list, sizeof(list));
			kv_values(k, "", true, &o);
			return err_set(err, errlen, -EINVAL, "%s %s: %s %d unknown; give %s (the "
				      "values of enum mvm_%s)", t->what, name, k->name, e, list,
				      k->name);
		case KV_STRING:
			s = *(const char *const *)f;
			if (!s && k->required)
				return kv_missing(t, k, name, err, errlen);
			if (!s)
				break;
			if (strlen(s) > k->max)
				return err_set(err, errlen, -EINVAL, "%s %s: %s '%s' longer than %llu "
					      "bytes", t->what, name, k->name, s,
					      (unsigned long long)k->max);
			for (j = 0; s[j]; j++)
				if (s[j] < 0x20 || s[j] > 0x7e)
					return err_set(err, errlen, -EINVAL, "%s %s: %s '%s': only "
						      "printable ASCII is allowed", t->what, name,
						      k->name, s);
			break;
		}
	}
	return 0;
}

void kv_defaults(const struct kv_table *t, void *obj)
{
	size_t i;

	for (i = 0; i < t->nkeys; i++) {
		const struct kv_key *k = &t->keys[i];

		if (k->no_default || !k->help)
			continue;
		switch (k->kind) {
		case KV_FLAG:
		case KV_BOOL:
			*(bool *)kv_field(obj, k) = k->def != 0;
			break;
		case KV_UINT:
			*(unsigned *)kv_field(obj, k) = (unsigned)k->def;
			break;
		case KV_U64:
			*(uint64_t *)kv_field(obj, k) = k->def;
			break;
		case KV_ENUM:
			*(int *)kv_field(obj, k) = (int)k->def;
			break;
		case KV_STRING:
			*(const char **)kv_field(obj, k) = NULL;
			break;
		}
	}
}

size_t kv_syntax(const struct kv_table *t, char *buf, size_t len)
{
	struct kv_out o;
	size_t i;

	kv_out_init(&o, buf, len);
	if (t->first)
		kv_put(&o, "%s", t->first);
	/* The required keys first, as the first word is: "cid=N,socket=PATH". */
	for (i = 0; i < t->nkeys; i++) {
		if (!t->keys[i].help || !t->keys[i].required)
			continue;
		if (o.n)
			kv_put(&o, ",");
		kv_key_syntax(&t->keys[i], &o);
	}
	for (i = 0; i < t->nkeys; i++) {
		if (!t->keys[i].help || t->keys[i].required)
			continue;
		kv_put(&o, o.n ? "[," : "[");
		kv_key_syntax(&t->keys[i], &o);
		kv_put(&o, "]");
	}
	return o.n;
}

/* The name of value v among k's values (not an alias), or NULL. */
static const char *kv_value_name(const struct kv_key *k, int v)
{
	const struct kv_value *x;

	for (x = k->values; x && x->name; x++)
		if (!x->alias && x->value == v)
			return x->name;
	return NULL;
}

size_t kv_format(const struct kv_table *t, const void *obj, char *buf, size_t len)
{
	struct kv_out o;
	size_t i;

	kv_out_init(&o, buf, len);
	for (i = 0; i < t->nkeys; i++) {
		const struct kv_key *k = &t->keys[i];
		const void *f = kv_cfield(obj, k);
		const char *sep = o.n ? "," : "", *name;
		uint64_t u;

		if (!k->help)
			continue;
		switch (k->kind) {
		case KV_FLAG:
			if (*(const bool *)f == (k->max != 0))
				kv_put(&o, "%s%s", sep, k->name);
			break;
		case KV_BOOL:
		case KV_ENUM:
			name = kv_value_name(k, k->kind == KV_BOOL ? *(const bool *)f :
					     *(const int *)f);
			if (name)
				kv_put(&o, "%s%s=%s", sep, k->name, name);
			break;
		case KV_UINT:
		case KV_U64:
			u = k->kind == KV_U64 ? *(const uint64_t *)f : *(const unsigned *)f;
			if (k->check_max && u > k->max)
				u = k->max;
			if (u || !k->zero_is_unset)
				kv_put(&o, "%s%s=%llu", sep, k->name, (unsigned long long)u);
			break;
		case KV_STRING:
			if (*(const char *const *)f)
				kv_put(&o, "%s%s=%s", sep, k->name, *(const char *const *)f);
			break;
		}
	}
	return o.n;
}

int kv_format_check(const struct kv_table *t, const void *obj, const char *name, char *err,
		    size_t errlen)
{
	size_t i;

	for (i = 0; i < t->nkeys; i++) {
		const struct kv_key *k = &t->keys[i];
		const char *v;

		if (!k->help || k->kind != KV_STRING)
			continue;
		v = *(const char *const *)kv_cfield(obj, k);
		if (v && strchr(v, ','))
			return err_set(err, errlen, -EINVAL, "%s %s: %s '%s' has a comma, which a "
				      "spec cannot hold", t->what, name, k->name, v);
	}
	return 0;
}

/* text word-wrapped at width, every line from col; the first goes on
 * from column at (before col: padded to it). */
static void kv_wrap_out(struct kv_out *o, const char *text, unsigned col, unsigned at,
			unsigned width)
{
	while (*text) {
		size_t w = strcspn(text, " ");

		if (at > col && at + 1 + w > width) {
			kv_put(o, "\n");
			at = 0;
		}
		if (at < col) {
			kv_put(o, "%*s", (int)(col - at), "");
			at = col;
		} else {
			kv_put(o, " ");
			at++;
		}
		kv_put(o, "%.*s", (int)w, text);
		at += (unsigned)w;
		text += w;
		text += strspn(text, " ");
	}
	kv_put(o, "\n");
}

size_t kv_wrap(const char *text, unsigned col, unsigned width, char *buf, size_t len)
{
	struct kv_out o;

	kv_out_init(&o, buf, len);
	kv_wrap_out(&o, text, col, 0, width);
	return o.n;
}

size_t kv_help(const struct kv_table *t, unsigned indent, char *buf, size_t len)
{
	const unsigned width = 79;
	struct kv_out o;
	size_t i;
	unsigned col;

	indent = MIN(indent, 40u);      /* the text still has room beside it */
	col = indent + 17;
	kv_out_init(&o, buf, len);
	for (i = 0; i < t->nkeys; i++) {
		const char *h = t->keys[i].help;
		size_t line = o.n;      /* where this key's first line begins */
		unsigned at;

		if (!h)
			continue;
		kv_put(&o, "%*s%s", (int)indent, "", t->first ? "," : "");
		kv_key_syntax(&t->keys[i], &o);
		at = (unsigned)(o.n - line);
		if (at >= col) {
			kv_put(&o, "\n");
			at = 0;
		}
		kv_wrap_out(&o, h, col, at, width);
	}
	return o.n;
}
