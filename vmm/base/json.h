/* The one JSON writer (RFC 8259) behind every statistics printer: objects
 * and arrays nest, commas and key quoting are its business, and strings
 * are escaped whatever they hold (quotes, backslashes, control
 * characters, bytes that are not UTF-8), so a path with a newline in it
 * or a guest's odd bytes cannot break the document --stats prints.
 *
 * Members: key is the member's name inside an object, NULL for a value in
 * an array or the document itself. Keys are the program's own (ASCII,
 * written as they are). Nesting deeper than JSON_MAX_DEPTH is a bug. */
#ifndef MVM_JSON_H
#define MVM_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json {
	FILE *out;
	unsigned depth;
	bool comma[JSON_MAX_DEPTH + 1];    /* the next member of depth d needs a ',' */
};

void json_init(struct json *j, FILE *out);

void json_obj_begin(struct json *j, const char *key);
void json_obj_end(struct json *j);
void json_arr_begin(struct json *j, const char *key);
void json_arr_end(struct json *j);

void json_u64(struct json *j, const char *key, uint64_t v);
void json_i64(struct json *j, const char *key, int64_t v);
void json_bool(struct json *j, const char *key, bool v);
/* NULL writes null. */
void json_str(struct json *j, const char *key, const char *s);
/* A string from printf arguments (escaped like json_str). */
__attribute__((format(printf, 3, 4)))
void json_strf(struct json *j, const char *key, const char *fmt, ...);

#endif
