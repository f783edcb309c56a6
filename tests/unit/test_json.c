/* The one JSON writer (vmm/base/json.c): members and nesting get their
 * commas, and a string is valid JSON whatever bytes it holds. */
#include "tests/unit/check.h"
#include "vmm/base/json.h"

#include <stdlib.h>

static char *doc;
static size_t doclen;

static struct json open_doc(FILE **f)
{
	struct json j;

	free(doc);
	doc = NULL;
	*f = open_memstream(&doc, &doclen);
	CHECK(*f);
	json_init(&j, *f);
	return j;
}

static const char *str_of(const char *s)
{
	FILE *f;
	struct json j = open_doc(&f);

	json_str(&j, NULL, s);
	fclose(f);
	return doc;
}

TEST(members_and_nesting_get_their_commas)
{
	FILE *f;
	struct json j = open_doc(&f);

	json_obj_begin(&j, NULL);
	json_u64(&j, "a", 18446744073709551615ULL);
	json_i64(&j, "b", -5);
	json_arr_begin(&j, "c");
	json_obj_begin(&j, NULL);
	json_bool(&j, "d", true);
	json_obj_end(&j);
	json_obj_begin(&j, NULL);
	json_obj_end(&j);
	json_u64(&j, NULL, 7);
	json_arr_end(&j);
	json_arr_begin(&j, "e");
	json_arr_end(&j);
	json_str(&j, "f", NULL);
	json_strf(&j, "g", "0x%x", 255);
	json_obj_end(&j);
	fclose(f);
	CHECK_STR(doc, "{\"a\":18446744073709551615,\"b\":-5,\"c\":[{\"d\":true},{},7],\"e\":[],"
		  "\"f\":null,\"g\":\"0xff\"}");
}

TEST(strings_are_escaped)
{
	CHECK_STR(str_of("plain /path"), "\"plain /path\"");
	CHECK_STR(str_of("a\"b\\c"), "\"a\\\"b\\\\c\"");
	CHECK_STR(str_of("l1\nl2\tx\r\x01\x1f\x7f"), "\"l1\\nl2\\tx\\u000d\\u0001\\u001f\\u007f\"");
}

/* UTF-8 passes as it is; a byte that is not part of well-formed UTF-8
 * (a stray continuation, a cut sequence, an overlong form, a surrogate,
 * past U+10FFFF) becomes U+FFFD, one per byte, so the document parses. */
TEST(bytes_that_are_not_utf8_become_replacement_characters)
{
	CHECK_STR(str_of("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
		  "\"\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
	CHECK_STR(str_of("a\x80z"), "\"a\\ufffdz\"");
	CHECK_STR(str_of("\xc3"), "\"\\ufffd\"");
	CHECK_STR(str_of("\xe2\x82"), "\"\\ufffd\\ufffd\"");
	CHECK_STR(str_of("\xc0\xaf"), "\"\\ufffd\\ufffd\"");          /* overlong '/' */
	CHECK_STR(str_of("\xe0\x80\xaf"), "\"\\ufffd\\ufffd\\ufffd\"");
	CHECK_STR(str_of("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  /* U+D800 */
	CHECK_STR(str_of("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
	CHECK_STR(str_of("\xff"), "\"\\ufffd\"");
}
