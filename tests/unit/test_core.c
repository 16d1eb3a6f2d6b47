/*
 * test_core.c: the plumbing of forge/core that every layer shares: the
 * string helpers (str.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ends_with),
		cmocka_unit_test(test_fnv1a),
		cmocka_unit_test(test_hex_nibble),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
