/*
 * test_tset.c: tensor sets (forge/model/tset.h) keep their names whole,
 * however long: a set name is looked up later (verdicts name their set,
 * forge finds the head's verdicts by it), so a cut name could match another
 * set or none.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "forge/model/tset.h"

static void test_long_name_kept_whole(void **state)
{
	char a[400], b[400];
	struct fg_tset s1, s2;
	struct fg_tensor t = { .name = "mtp.norm.weight", .dtype = FG_DT_BF16, .rank = 1, .shape = { 0 } };
	struct fg_err err = { 0 };

	(void)state;
	/* Two sidecar-style names sharing a 300-character prefix. */
	memset(a, 'x', 300);
	memcpy(a, "sidecar:", 8);
	memcpy(b, a, 300);
	snprintf(a + 300, sizeof(a) - 300, "-one.safetensors");
	snprintf(b + 300, sizeof(b) - 300, "-two.safetensors");
	assert_int_equal(fg_tset_init(&s1, a, &err), 0);
	assert_int_equal(fg_tset_init(&s2, b, &err), 0);
	assert_string_equal(s1.name, a);
	assert_string_equal(s2.name, b);
	assert_int_equal(strlen(s1.name), 316);
	assert_string_not_equal(s1.name, s2.name);
	/* The name is the set's own copy. */
	assert_ptr_not_equal(s1.name, a);
	assert_int_equal(fg_tset_add(&s1, &t, "mtp.safetensors", &err), 0);
	assert_int_equal(s1.n_tensors, 1);
	fg_tset_release(&s1);
	fg_tset_release(&s2);
	assert_null(s1.name);
	fg_tset_release(&s1); /* released twice: still fine */
	fg_tset_release(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_long_name_kept_whole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
