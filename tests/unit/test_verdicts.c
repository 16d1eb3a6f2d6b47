/*
 * test_verdicts.c: the verdict table of design.md section 5 (codes and their
 * fixed severities, plus the two documented extensions) and the verdict list
 * a report carries: unknown codes refused, runtimes named once, tensor lists
 * capped while the count stays whole, error detection, and release (run this
 * under ASan to check the owned tensor copies are freed).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "forge/model/verdicts.h"

/* The list a test builds, outside its frame so the teardown frees it after a failed assertion. */
static struct fg_verdicts list;

static int release_list(void **state)
{
	(void)state;
	fg_verdicts_release(&list);
	return 0;
}

static void test_severities(void **state)
{
	/* design.md section 5, every code, and verdicts.h's two extensions. */
	static const struct {
		const char *code;
		enum fg_severity sev;
	} rows[] = {
		{ "trunk_double_shifted", FG_SEV_ERROR },
		{ "embedded_mtp_shift_hazard", FG_SEV_ERROR },
		{ "trunk_missing_shift", FG_SEV_ERROR },
		{ "head_convention_mismatch", FG_SEV_ERROR },
		{ "head_double_shifted", FG_SEV_ERROR },
		{ "mixed_convention", FG_SEV_ERROR },
		{ "no_convention_evidence", FG_SEV_ERROR },
		{ "nonfinite_norm", FG_SEV_ERROR },
		{ "degenerate_head", FG_SEV_ERROR },
		{ "expert_layout_ambiguous", FG_SEV_ERROR },
		{ "mtp_declared_missing", FG_SEV_ERROR },
		{ "malformed_checkpoint", FG_SEV_ERROR },
		{ "stray_shard", FG_SEV_WARNING },
		{ "index_mismatch", FG_SEV_WARNING },
		{ "bf16_shift_precision_loss", FG_SEV_WARNING },
		{ "quantized_mtp_head", FG_SEV_WARNING },
		{ "mixed_head_conventions_in_fleet", FG_SEV_WARNING },
		{ "raw_zero_centred_head", FG_SEV_INFO },
		{ "convention_structure_mismatch", FG_SEV_ERROR },
		{ "trunk_double_shift_at_load", FG_SEV_ERROR },
	};
	const size_t n_rows = sizeof(rows) / sizeof(rows[0]);
	const struct fg_verdict_code *all;
	size_t n = 0;

	(void)state;
	for (size_t i = 0; i < n_rows; i++) {
		const struct fg_verdict_code *c = fg_verdict_code(rows[i].code);

		if (!c)
			fail_msg("code %s missing from the table", rows[i].code);
		assert_string_equal(c->code, rows[i].code);
		if (c->severity != rows[i].sev)
			fail_msg("%s: severity %s, want %s", rows[i].code, fg_severity_name(c->severity),
				 fg_severity_name(rows[i].sev));
		assert_non_null(c->meaning);
	}
	/* The table holds those codes and nothing else, each once. */
	all = fg_verdict_codes(&n);
	assert_int_equal(n, n_rows);
	for (size_t i = 0; i < n; i++) {
		int known = 0;

		for (size_t k = 0; k < n_rows; k++)
			known += strcmp(all[i].code, rows[k].code) == 0;
		if (known != 1)
			fail_msg("table code %s appears %d times in the vocabulary", all[i].code, known);
		for (size_t k = i + 1; k < n; k++)
			assert_string_not_equal(all[i].code, all[k].code);
	}
	assert_null(fg_verdict_code("no_such_code"));
	assert_null(fg_verdict_code(""));
	assert_null(fg_verdict_code("STRAY_SHARD"));
	assert_string_equal(fg_severity_name(FG_SEV_INFO), "info");
	assert_string_equal(fg_severity_name(FG_SEV_WARNING), "warning");
	assert_string_equal(fg_severity_name(FG_SEV_ERROR), "error");
}

static void test_add_and_find(void **state)
{
	struct fg_verdict *v;

	(void)state;
	v = fg_verdicts_add(&list, "embedded_mtp_shift_hazard", "trunk",
			    "%d embedded mtp.* keys make %s add +1", 29, "mlx-lm 0.31");
	assert_non_null(v);
	assert_int_equal(list.n, 1);
	assert_ptr_equal(v->code, fg_verdict_code("embedded_mtp_shift_hazard"));
	assert_string_equal(v->set, "trunk");
	assert_string_equal(v->detail, "29 embedded mtp.* keys make mlx-lm 0.31 add +1");
	assert_int_equal(v->n_runtimes, 0);
	assert_int_equal(v->n_tensors, 0);

	/* An unknown code adds nothing. */
	assert_null(fg_verdicts_add(&list, "mtp_acceptance_collapsed", "trunk", "x"));
	assert_null(fg_verdicts_add(&list, "bogus", NULL, "x"));
	assert_int_equal(list.n, 1);

	/* No set is an empty set name. */
	v = fg_verdicts_add(&list, "stray_shard", NULL, "%s", "model-extra.safetensors");
	assert_non_null(v);
	assert_string_equal(v->set, "");
	assert_int_equal(list.n, 2);

	assert_non_null(fg_verdicts_find(&list, "stray_shard"));
	assert_string_equal(fg_verdicts_find(&list, "stray_shard")->detail, "model-extra.safetensors");
	assert_string_equal(fg_verdicts_find(&list, "embedded_mtp_shift_hazard")->set, "trunk");
	assert_null(fg_verdicts_find(&list, "trunk_missing_shift"));
	fg_verdicts_release(&list);
}

static void test_detail_truncated(void **state)
{
	char longtext[1000];
	struct fg_verdict *v;

	(void)state;
	memset(longtext, 'x', sizeof(longtext) - 1);
	longtext[sizeof(longtext) - 1] = '\0';
	v = fg_verdicts_add(&list, "index_mismatch", "a-set-name-that-is-much-longer-than-sixty-four-characters-in-all-of-it",
			    "%s", longtext);
	assert_non_null(v);
	assert_int_equal(strlen(v->detail), sizeof(v->detail) - 1);
	/* The detail is prose and may be cut; the set is a name a reader looks up: kept whole. */
	assert_string_equal(v->set, "a-set-name-that-is-much-longer-than-sixty-four-characters-in-all-of-it");
	fg_verdicts_release(&list);
}

static void test_runtimes_deduped(void **state)
{
	static const char *const ids[] = {
		"mlx-lm-0.31", "mlx-lm-0.32", "mlx-lm-pr990", "mtplx-2.11", "mtplx-2.12", "ollama", "hf",
		"r8", "r9", "r10",
	};
	struct fg_verdict *v;

	(void)state;
	v = fg_verdicts_add(&list, "embedded_mtp_shift_hazard", "trunk", "x");
	assert_non_null(v);
	fg_verdict_runtime(v, "mlx-lm-0.31");
	fg_verdict_runtime(v, "mtplx-2.12");
	fg_verdict_runtime(v, "mlx-lm-0.31");
	fg_verdict_runtime(v, "ollama");
	fg_verdict_runtime(v, "mtplx-2.12");
	assert_int_equal(v->n_runtimes, 3);
	assert_string_equal(v->runtimes[0], "mlx-lm-0.31");
	assert_string_equal(v->runtimes[1], "mtplx-2.12");
	assert_string_equal(v->runtimes[2], "ollama");
	/* The list holds at most FG_VERDICT_MAX_LIST runtimes. */
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		fg_verdict_runtime(v, ids[i]);
	assert_int_equal(v->n_runtimes, FG_VERDICT_MAX_LIST);
	for (size_t i = 0; i < v->n_runtimes; i++)
		for (size_t k = i + 1; k < v->n_runtimes; k++)
			assert_string_not_equal(v->runtimes[i], v->runtimes[k]);
	fg_verdicts_release(&list);
}

static void test_tensors_capped(void **state)
{
	struct fg_verdict *v;
	char name[64];

	(void)state;
	v = fg_verdicts_add(&list, "nonfinite_norm", "mtp", "x");
	assert_non_null(v);
	for (int i = 0; i < 12; i++) {
		snprintf(name, sizeof(name), "mtp.layers.%d.input_layernorm.weight", i);
		fg_verdict_tensor(v, name);
	}
	/* Overwrite the caller's buffer: the verdict holds copies. */
	memset(name, 'z', sizeof(name) - 1);
	assert_int_equal(v->n_tensors, 12);
	for (int i = 0; i < FG_VERDICT_MAX_LIST; i++) {
		char want[64];

		snprintf(want, sizeof(want), "mtp.layers.%d.input_layernorm.weight", i);
		assert_non_null(v->tensors[i]);
		assert_string_equal(v->tensors[i], want);
	}
	fg_verdicts_release(&list);
}

static void test_has_error(void **state)
{

	(void)state;
	assert_false(fg_verdicts_has_error(&list));
	assert_non_null(fg_verdicts_add(&list, "raw_zero_centred_head", "mtp", "delta head"));
	assert_non_null(fg_verdicts_add(&list, "stray_shard", NULL, "model-extra.safetensors"));
	assert_non_null(fg_verdicts_add(&list, "quantized_mtp_head", "mtp", "4-bit"));
	assert_false(fg_verdicts_has_error(&list));
	assert_non_null(fg_verdicts_add(&list, "trunk_missing_shift", "trunk", "probe 0.78"));
	assert_true(fg_verdicts_has_error(&list));
	fg_verdicts_release(&list);
	assert_false(fg_verdicts_has_error(&list));
}

static void test_growth_and_release(void **state)
{
	size_t n = 0;
	const struct fg_verdict_code *codes = fg_verdict_codes(&n);

	(void)state;
	/* More verdicts than the first allocation, each with owned tensor copies. */
	for (size_t i = 0; i < 3 * n; i++) {
		struct fg_verdict *v = fg_verdicts_add(&list, codes[i % n].code, "trunk", "verdict %zu", i);

		assert_non_null(v);
		for (size_t k = 0; k < i % (FG_VERDICT_MAX_LIST + 3); k++)
			fg_verdict_tensor(v, "model.layers.0.self_attn.q_norm.weight");
	}
	assert_int_equal(list.n, 3 * n);
	assert_true(list.cap >= list.n);
	/* Earlier verdicts survived the moves. */
	for (size_t i = 0; i < list.n; i++) {
		char want[32];

		snprintf(want, sizeof(want), "verdict %zu", i);
		assert_string_equal(list.v[i].detail, want);
		assert_ptr_equal(list.v[i].code, &codes[i % n]);
		assert_int_equal(list.v[i].n_tensors, i % (FG_VERDICT_MAX_LIST + 3));
	}
	fg_verdicts_release(&list);
	assert_int_equal(list.n, 0);
	assert_null(list.v);
	/* Releasing twice, or NULL, is harmless; the list is reusable. */
	fg_verdicts_release(&list);
	fg_verdicts_release(NULL);
	assert_non_null(fg_verdicts_add(&list, "stray_shard", NULL, "again"));
	assert_int_equal(list.n, 1);
	fg_verdicts_release(&list);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_severities, release_list),
		cmocka_unit_test_teardown(test_add_and_find, release_list),
		cmocka_unit_test_teardown(test_detail_truncated, release_list),
		cmocka_unit_test_teardown(test_runtimes_deduped, release_list),
		cmocka_unit_test_teardown(test_tensors_capped, release_list),
		cmocka_unit_test_teardown(test_has_error, release_list),
		cmocka_unit_test_teardown(test_growth_and_release, release_list),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
