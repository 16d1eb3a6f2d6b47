/*
 * test_core.c: the plumbing of forge/core that every layer shares: the
 * string helpers (str.h), array growth (grow.h), the running SHA-256,
 * whose final step leaves the hash to its owner (sha256.h), and JSON from
 * files and buffers (json.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forge/core/grow.h"
#include "forge/core/json.h"
#include "forge/core/sha256.h"
#include "forge/core/str.h"

/* ---- str.h ---- */

static void test_ends_with(void **state)
{
	(void)state;
	assert_true(fg_str_ends_with("mtp.fc.weight", ".weight"));
	assert_true(fg_str_ends_with(".weight", ".weight"));
	assert_true(fg_str_ends_with("x", ""));
	assert_false(fg_str_ends_with("weight", ".weight"));
	assert_false(fg_str_ends_with("mtp.fc.weights", ".weight"));
	assert_false(fg_str_ends_with("", "x"));
}

static void test_fnv1a(void **state)
{
	(void)state;
	/* The published 64-bit FNV-1a test vectors. */
	assert_true(fg_fnv1a("") == 0xcbf29ce484222325ull);
	assert_true(fg_fnv1a("a") == 0xaf63dc4c8601ec8cull);
	assert_true(fg_fnv1a("foobar") == 0x85944171f73967e8ull);
	assert_true(fg_fnv1a("mtp.fc.weight") != fg_fnv1a("mtp.fc.weigh"));
}

static void test_hex_nibble(void **state)
{
	static const char digits[] = "0123456789abcdef";

	(void)state;
	for (int i = 0; i < 16; i++) {
		assert_int_equal(fg_hex_nibble(digits[i]), i);
		if (i >= 10)
			assert_int_equal(fg_hex_nibble(digits[i] - 'a' + 'A'), i);
	}
	assert_int_equal(fg_hex_nibble('g'), -1);
	assert_int_equal(fg_hex_nibble('G'), -1);
	assert_int_equal(fg_hex_nibble('/'), -1);
	assert_int_equal(fg_hex_nibble(':'), -1);
	assert_int_equal(fg_hex_nibble('\0'), -1);
	assert_int_equal(fg_hex_nibble(-80), -1); /* a negative char */
}

/* ---- grow.h ---- */

static void test_grow_one_at_a_time(void **state)
{
	uint32_t *v = NULL;
	size_t n = 0, cap = 0, reallocs = 0;

	(void)state;
	for (uint32_t i = 0; i < 10000; i++) {
		size_t before = cap;

		assert_int_equal(FG_GROW(v, n + 1, cap), 0);
		reallocs += cap != before;
		assert_true(cap >= n + 1);
		v[n++] = i;
	}
	for (uint32_t i = 0; i < 10000; i++)
		assert_int_equal(v[i], i);
	assert_true(reallocs <= 12); /* doubling from FG_GROW_FIRST, not one per element */
	/* Already large enough: nothing moves. */
	{
		uint32_t *same = v;
		size_t c = cap;

		assert_int_equal(FG_GROW(v, 5, cap), 0);
		assert_ptr_equal(v, same);
		assert_int_equal(cap, c);
	}
	free(v);
}

static void test_grow_exact_need(void **state)
{
	char *s = NULL;
	size_t cap = 0;

	(void)state;
	assert_int_equal(FG_GROW(s, 1, cap), 0);
	assert_int_equal(cap, FG_GROW_FIRST);
	assert_int_equal(FG_GROW(s, 1000, cap), 0);
	assert_true(cap >= 1000 && cap < 2048);
	memset(s, 'x', 1000);
	free(s);
}

static void test_grow_overflow(void **state)
{
	uint64_t *v = NULL, *kept;
	size_t cap = 0;

	(void)state;
	assert_int_equal(FG_GROW(v, 4, cap), 0);
	v[3] = 42;
	kept = v;
	/* need * sizeof(uint64_t) overflows size_t: refused, nothing touched. */
	assert_int_equal(FG_GROW(v, SIZE_MAX / 4, cap), FG_ENOMEM);
	assert_ptr_equal(v, kept);
	assert_int_equal(cap, FG_GROW_FIRST);
	assert_int_equal(v[3], 42);
	assert_int_equal(FG_GROW(v, SIZE_MAX, cap), FG_ENOMEM);
	assert_int_equal(cap, FG_GROW_FIRST);
	free(v);
}

/* ---- sha256.h ---- */

static void test_sha256_final_leaves_the_hash(void **state)
{
	struct fg_sha256 *h = fg_sha256_new();
	char hex[FG_SHA256_HEX], buf_hex[FG_SHA256_HEX];

	(void)state;
	assert_non_null(h);
	fg_sha256_update(h, "ab", 2);
	fg_sha256_update(h, "c", 1);
	fg_sha256_final_hex(h, hex);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	fg_sha256_buf("abc", 3, buf_hex);
	assert_string_equal(buf_hex, hex);
	fg_sha256_free(h); /* the caller's: final did not free it (ASan checks) */
	fg_sha256_free(NULL);
}

/* ---- json.h ---- */

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static void test_json_parse(void **state)
{
	struct fg_err err = { 0, "" };
	cJSON *doc = NULL, *untouched = (cJSON *)&err;

	(void)state;
	assert_int_equal(fg_json_parse(&doc, "{\"a\": 1}\n\t ", 11, "x.json", &err), 0);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(doc, "a")->valueint, 1);
	cJSON_Delete(doc);
	assert_int_equal(fg_json_parse(&untouched, "{} {}", 5, "two.json", &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "two.json: invalid JSON"));
	assert_ptr_equal(untouched, (cJSON *)&err);
	assert_int_equal(fg_json_parse(&untouched, "{\"a\"\0: 1}", 10, "nul.json", &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "nul.json: not JSON text (contains a NUL byte)"));
	assert_ptr_equal(untouched, (cJSON *)&err);
}

static void test_json_load(void **state)
{
	char dir[] = "/tmp/forged-test-core-XXXXXX", path[64];
	struct fg_err err = { 0, "" };
	cJSON *doc = NULL;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/c.json", dir);
	write_text(path, "{\"hidden_size\": 64}");
	assert_int_equal(fg_json_load(&doc, path, 64, &err), 0);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(doc, "hidden_size")->valueint, 64);
	cJSON_Delete(doc);
	doc = NULL;
	/* Over the cap: refused before it is read. */
	assert_int_equal(fg_json_load(&doc, path, 8, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "exceed the cap of 8"));
	assert_null(doc);
	/* A folder is not a readable regular file; a missing file cannot be opened. */
	assert_int_equal(fg_json_load(&doc, dir, 64, &err), FG_EIO);
	unlink(path);
	assert_int_equal(fg_json_load(&doc, path, 64, &err), FG_EIO);
	assert_non_null(strstr(err.msg, "cannot open"));
	assert_null(doc);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ends_with),
		cmocka_unit_test(test_fnv1a),
		cmocka_unit_test(test_hex_nibble),
		cmocka_unit_test(test_grow_one_at_a_time),
		cmocka_unit_test(test_grow_exact_need),
		cmocka_unit_test(test_grow_overflow),
		cmocka_unit_test(test_sha256_final_leaves_the_hash),
		cmocka_unit_test(test_json_parse),
		cmocka_unit_test(test_json_load),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
