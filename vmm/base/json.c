#include "vmm/base/json.h"

#include <stdarg.h>
#include <string.h>

void json_init(struct json *j, FILE *out)
{
	memset(j, 0, sizeof(*j));
	j->out = out;
}

/* The comma and the key before a member of the current level. */
static void json_member(struct json *j, const char *key)
{
	if (j->comma[j->depth])
		fputc(',', j->out);
	j->comma[j->depth] = true;
	if (key)
		fprintf(j->out, "\"%s\":", key);
}

static void json_open(struct json *j, const char *key, char c)
{
	json_member(j, key);
	fputc(c, j->out);
	if (j->depth < JSON_MAX_DEPTH)
		j->depth++;
	j->comma[j->depth] = false;
}

static void json_close(struct json *j, char c)
{
	fputc(c, j->out);
	if (j->depth)
		j->depth--;
}

void json_obj_begin(struct json *j, const char *key)
{
	json_open(j, key, '{');
}

void json_obj_end(struct json *j)
{
	json_close(j, '}');
}

void json_arr_begin(struct json *j, const char *key)
{
	json_open(j, key, '[');
}

void json_arr_end(struct json *j)
{
	json_close(j, ']');
}

void json_u64(struct json *j, const char *key, uint64_t v)
{
	json_member(j, key);
	fprintf(j->out, "%llu", (unsigned long long)v);
}

void json_i64(struct json *j, const char *key, int64_t v)
{
	json_member(j, key);
	fprintf(j->out, "%lld", (long long)v);
}

void json_bool(struct json *j, const char *key, bool v)
{
	json_member(j, key);
	fputs(v ? "true" : "false", j->out);
}

/* The length of the well-formed UTF-8 sequence at p (1 to 4), or 0. */
static size_t json_utf8_len(const unsigned char *p)
{
	size_t n, i;
	uint32_t c;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, c = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, c = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, c = p[0] & 0x07;
	else
		return 0;
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	/* Overlong forms, UTF-16 surrogates and code points past U+10FFFF
	 * are not UTF-8 either. */
	if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)) ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	return n;
}

void json_str(struct json *j, const char *key, const char *s)
{
	const unsigned char *p;

	json_member(j, key);
	if (!s) {
		fputs("null", j->out);
		return;
	}
	fputc('"', j->out);
	for (p = (const unsigned char *)s; *p;) {
		size_t n = json_utf8_len(p);

		if (*p == '"' || *p == '\\') {
			fputc('\\', j->out);
			fputc(*p, j->out);
		} else if (*p == '\n') {
			fputs("\\n", j->out);
		} else if (*p == '\t') {
			fputs("\\t", j->out);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(j->out, "\\u%04x", *p);
		} else if (!n) {
			fputs("\\ufffd", j->out);     /* a byte that is not UTF-8 */
			n = 1;
		} else {
			fwrite(p, 1, n, j->out);
		}
		p += n ? n : 1;
	}
	fputc('"', j->out);
}

void json_strf(struct json *j, const char *key, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	json_str(j, key, buf);
}
