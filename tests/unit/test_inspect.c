/*
 * test_inspect.c: the inspection as a whole (inspect.h) on the generated
 * fixture checkpoints ($FIXTURES, made by tests/fixtures/gen_fixtures.py):
 * the trunk is set 0, and fg_inspect_summarize() gives the fields the
 * store keeps (family, ok, trunk probe, head convention, verdicts) for a
 * raw Hugging Face release, an absolute MLX artifact, a checkpoint without
 * a head, and a plain family without a probe.  Without $FIXTURES the tests
 * are skipped.
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

#include "forge/model/inspect.h"

/* Inspect $FIXTURES/name with the layout's default runtimes. */
static struct fg_inspect *inspect_fixture(const char *name)
{
	const char *dir = getenv("FIXTURES");
	struct fg_err err = { 0 };
	struct fg_inspect *r = NULL;
	char path[1024];

	if (!dir || !*dir)
		skip();
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (fg_inspect_run(&r, path, NULL, 0, &err) != 0)
		fail_msg("inspecting %s: %s", path, err.msg);
	return r;
}

static int has_verdict(const struct fg_inspect_summary *s, const char *code)
{
	for (size_t i = 0; i < s->n_verdicts; i++)
		if (strcmp(s->verdicts[i].row->name, code) == 0)
			return 1;
	return 0;
}

static void test_trunk_is_set_zero(void **state)
{
	static const char *const names[] = { "qwen35_hf", "qwen35_mlx_sidecar", "qwen35_mlx_embedded", "glm45" };

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct fg_inspect *r = inspect_fixture(names[i]);

		assert_ptr_equal(fg_inspect_trunk(r), &r->sets[0]);
		assert_string_equal(fg_inspect_trunk(r)->set.name, "trunk");
		for (size_t k = 1; k < r->n_sets; k++)
			assert_int_not_equal(r->sets[k].role, FG_ROLE_TRUNK);
		assert_non_null(fg_inspect_head(r));
		assert_int_equal(fg_inspect_trunk(r)->n_experts, 0);
		fg_inspect_free(r);
	}
}

static void test_summary_raw_hf(void **state)
{
	struct fg_inspect *r = inspect_fixture("qwen35_hf");
	struct fg_inspect_summary s;

	(void)state;
	fg_inspect_summarize(r, &s);
	assert_string_equal(s.family, "qwen3_5");
	assert_true(s.ok);
	assert_true(fabs(s.probe_mean - 0.7908) < 1e-3);
	assert_string_equal(s.head_convention, "delta");
	assert_int_equal(s.n_verdicts, r->verdicts.n);
	assert_ptr_equal(s.verdicts, r->verdicts.v);
	assert_true(has_verdict(&s, "raw_zero_centred_head"));
	fg_inspect_free(r);
}

static void test_summary_mlx_sidecar(void **state)
{
	struct fg_inspect *r = inspect_fixture("qwen35_mlx_sidecar");
	struct fg_inspect_summary s;

	(void)state;
	fg_inspect_summarize(r, &s);
	assert_string_equal(s.family, "qwen3_5");
	assert_true(s.ok);
	assert_true(fabs(s.probe_mean - 1.7913) < 1e-3);
	assert_string_equal(s.head_convention, "absolute");
	assert_int_equal(s.n_verdicts, 0);
	fg_inspect_free(r);
}

/*
 * The config declares a head no tensor holds: the empty "mtp" set has no
 * convention, and the note is info (issue 12): the default MLX targets load it.
 */
static void test_summary_no_head(void **state)
{
	struct fg_inspect *r = inspect_fixture("qwen35_mlx_no_head_declared");
	struct fg_inspect_summary s;

	(void)state;
	fg_inspect_summarize(r, &s);
	assert_true(s.ok);
	assert_null(s.head_convention);
	assert_null(fg_inspect_head(r));
	assert_true(has_verdict(&s, "mtp_declared_missing"));
	assert_true(isfinite(s.probe_mean) != 0);
	fg_inspect_free(r);
}

/* A plain family: no q_norm probe, the head's convention is "plain". */
static void test_summary_plain(void **state)
{
	struct fg_inspect *r = inspect_fixture("glm45");
	struct fg_inspect_summary s;

	(void)state;
	fg_inspect_summarize(r, &s);
	assert_string_equal(s.family, "glm4_moe");
	assert_true(isnan(s.probe_mean) != 0);
	assert_string_equal(s.head_convention, "plain");
	fg_inspect_free(r);
}

/* Expert layouts are decided once, in inspect, on head sets. */
static void test_experts_decided_in_inspect(void **state)
{
	struct fg_inspect *r = inspect_fixture("qwen35_moe_hf_numbered");
	const struct fg_set_report *head;

	(void)state;
	head = fg_inspect_head(r);
	assert_non_null(head);
	assert_true(head->n_experts > 0);
	assert_int_equal(head->experts[0].layout, FG_EXPERTS_NUMBERED);
	fg_inspect_free(r);
	r = inspect_fixture("qwen35_moe_hf_ambiguous");
	head = fg_inspect_head(r);
	assert_non_null(head);
	assert_int_equal(head->experts[0].layout, FG_EXPERTS_AMBIGUOUS);
	assert_non_null(fg_verdicts_find(&r->verdicts, FG_V_EXPERT_LAYOUT_AMBIGUOUS));
	fg_inspect_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trunk_is_set_zero),
		cmocka_unit_test(test_summary_raw_hf),
		cmocka_unit_test(test_summary_mlx_sidecar),
		cmocka_unit_test(test_summary_no_head),
		cmocka_unit_test(test_summary_plain),
		cmocka_unit_test(test_experts_decided_in_inspect),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
