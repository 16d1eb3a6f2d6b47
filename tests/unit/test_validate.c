/*
 * test_validate.c: api/validate.c, the request checks behind the problems'
 * errors[]: UTF-8 as RFC 3629 defines it (overlongs, surrogates and code
 * points past U+10FFFF refused), U+FFFD repair of answers, RFC 6901
 * pointers, the raw-text scan that finds \u0000 and bad bytes with their
 * pointers, unknown members, and numbers range-checked before conversion.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/validate.h"

static void test_utf8_valid(void **state)
{
	static const struct {
		const char *s;
		bool ok;
	} rows[] = {
		{ "plain ascii", true },
		{ "caf\xC3\xA9", true },
		{ "\xE2\x82\xAC", true },           /* U+20AC */
		{ "\xF0\x9F\x98\x80", true },       /* U+1F600 */
		{ "\xF4\x8F\xBF\xBF", true },       /* U+10FFFF */
		{ "gpu-\xFF\xFE-01", false },
		{ "\xC0\xAF", false },              /* overlong '/' */
		{ "\xE0\x80\xAF", false },          /* overlong */
		{ "\xED\xA0\x80", false },          /* a UTF-16 surrogate */
		{ "\xF4\x90\x80\x80", false },      /* past U+10FFFF */
		{ "\xC3", false },                  /* cut short */
		{ "\x80", false },                  /* a lone continuation byte */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if (fg_utf8_valid(rows[i].s, strlen(rows[i].s)) != rows[i].ok)
			fail_msg("row %zu: fg_utf8_valid says %d", i, !rows[i].ok);
}

static void test_fix(void **state)
{
	cJSON *doc = cJSON_CreateObject(), *arr;
	char *copy, *text;

	(void)state;
	copy = fg_utf8_fixed_copy("gpu-\xFF\xFE-01", 10);
	assert_string_equal(copy, "gpu-\xEF\xBF\xBD\xEF\xBF\xBD-01");
	free(copy);
	cJSON_AddStringToObject(doc, "name", "model-\xFF.safetensors");
	cJSON_AddStringToObject(doc, "k\xFE", "fine");
	arr = cJSON_AddArrayToObject(doc, "list");
	cJSON_AddItemToArray(arr, cJSON_CreateString("\xC0\xAF"));
	cJSON_AddItemToArray(arr, cJSON_CreateString("ok"));
	assert_int_equal(fg_json_utf8_fix(doc), 3);
	text = cJSON_PrintUnformatted(doc);
	assert_true(fg_utf8_valid(text, strlen(text)));
	assert_string_equal(text, "{\"name\":\"model-\xEF\xBF\xBD.safetensors\",\"k\xEF\xBF\xBD\":\"fine\","
				  "\"list\":[\"\xEF\xBF\xBD\xEF\xBF\xBD\",\"ok\"]}");
	free(text);
	assert_int_equal(fg_json_utf8_fix(doc), 0);
	cJSON_Delete(doc);
}

static void test_pointer(void **state)
{
	char p[FG_V_POINTER_MAX];

	(void)state;
	fg_v_pointer(p, sizeof(p), "", "source");
	assert_string_equal(p, "/source");
	fg_v_pointer(p, sizeof(p), "/observed", "a/b~c");
	assert_string_equal(p, "/observed/a~1b~0c");
	fg_v_pointer(p, sizeof(p), "", "sou\xFFrce");
	assert_string_equal(p, "/sou\xEF\xBF\xBDrce");
}

/* The faults of scanning text, as "pointer=slug" joined by spaces. */
static void scan(const char *text, char *out, size_t cap)
{
	struct fg_vlist v = { .n = 0 };
	size_t o = 0;

	fg_v_scan_json_text(&v, text, strlen(text));
	out[0] = '\0';
	for (size_t i = 0; i < v.n; i++)
		o += (size_t)snprintf(out + o, cap - o, "%s%s=%s", i ? " " : "", v.e[i].pointer, v.e[i].slug);
}

static void test_scan(void **state)
{
	char got[512];

	(void)state;
	scan("{\"source\": \"qwen35_hf\", \"runtimes\": [\"a\", \"b\"]}", got, sizeof(got));
	assert_string_equal(got, "");
	scan("{\"source\": \"qwen35_hf\\u0000/../x\"}", got, sizeof(got));
	assert_string_equal(got, "/source=invalid-field");
	scan("{\"a\": {\"b\": [1, \"x\\u0000\"]}, \"c\": \"\\u00000\"}", got, sizeof(got));
	assert_string_equal(got, "/a/b/1=invalid-field /c=invalid-field");
	scan("{\"host\": \"gpu-\xFF\xFE-01\", \"ok\": \"\\u00e9\\\\u0000\"}", got, sizeof(got));
	assert_string_equal(got, "/host=invalid-utf8");
	scan("{\"a/b\": [{\"k\\u0000\": 1}]}", got, sizeof(got));
	assert_string_equal(got, "/a~1b/0/k?=invalid-field");
	scan("{\"sou\xFFrce\": 1}", got, sizeof(got));
	assert_string_equal(got, "/sou\xEF\xBF\xBDrce=invalid-utf8");
}

static void test_known_and_str(void **state)
{
	static const char *const allowed[] = { "source", "runtimes", NULL };
	cJSON *doc = cJSON_Parse("{\"source\": 7, \"traget\": \"x\", \"runtimes\": [], \"b\": null}");
	struct fg_vlist v = { .n = 0 };

	(void)state;
	fg_v_known(&v, doc, "", allowed);
	assert_int_equal(v.n, 2);
	assert_string_equal(v.e[0].pointer, "/traget");
	assert_string_equal(v.e[0].detail, "unknown field");
	assert_int_equal(v.e[0].status, 422);
	assert_string_equal(v.e[1].pointer, "/b");
	assert_null(fg_v_str(&v, doc, "", "source", true, 1, 10));
	assert_null(fg_v_str(&v, doc, "", "absent", true, 1, 10));
	assert_null(fg_v_str(&v, doc, "", "optional", false, 1, 10));
	assert_int_equal(v.n, 4);
	assert_string_equal(v.e[2].pointer, "/source");
	assert_string_equal(v.e[3].pointer, "/absent");
	cJSON_Delete(doc);
}

static void test_numbers(void **state)
{
	int64_t n = 42;

	(void)state;
	assert_int_equal(fg_json_to_int(7, 1, 100, &n), 0);
	assert_int_equal(n, 7);
	n = 42;
	assert_int_equal(fg_json_to_int(1e300, 1, 100, &n), -1);
	assert_int_equal(fg_json_to_int(-1e300, 1, 100, &n), -1);
	assert_int_equal(fg_json_to_int(9223372036854775808.0, 0, 9007199254740992LL, &n), -1);
	assert_int_equal(fg_json_to_int(1.5, 0, 100, &n), -1);
	assert_int_equal(fg_json_to_int(INFINITY, 0, 100, &n), -1);
	assert_int_equal(fg_json_to_int(NAN, 0, 100, &n), -1);
	assert_int_equal(fg_json_to_int(0, 1, 100, &n), -1);
	assert_int_equal(n, 42); /* untouched on failure */
	assert_int_equal(fg_json_to_int(9007199254740992.0, 1, 9007199254740992LL, &n), 0);
	assert_int_equal(n, 9007199254740992LL);
}

static void test_overflow_listed(void **state)
{
	struct fg_vlist v = { .n = 0 };

	(void)state;
	for (int i = 0; i < FG_V_MAX + 5; i++)
		fg_v_add(&v, "invalid-field", "/x", "fault %d", i);
	assert_int_equal(v.n, FG_V_MAX);
	assert_int_equal(v.more, 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_utf8_valid),   cmocka_unit_test(test_fix),
		cmocka_unit_test(test_pointer),      cmocka_unit_test(test_scan),
		cmocka_unit_test(test_known_and_str), cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_overflow_listed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
