/*
 * test_verdicts.c: the one verdict table (docs/interfaces.md section 4's codes and their
 * fixed severities, the two documented extensions, the verification and fleet
 * codes; unique names, lookups, values outside the enum refused), the
 * severity names, and the verdict list
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
	/* docs/interfaces.md section 4, every code, and verdicts.h's two extensions. */
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
		{ "mtp_declared_missing", FG_SEV_INFO }, /* issue 12: a note; refusing runtimes get runtime_load_error */
		{ "runtime_load_error", FG_SEV_ERROR },
		{ "model_type_unsupported", FG_SEV_ERROR },
		{ "duplicate_tensor_order_dependent", FG_SEV_ERROR },
		{ "head_keys_not_loaded", FG_SEV_ERROR },
		{ "head_experts_not_loaded", FG_SEV_ERROR },
		{ "trunk_experts_not_loaded", FG_SEV_ERROR },
		{ "head_contract_mismatch", FG_SEV_ERROR },
		{ "malformed_checkpoint", FG_SEV_ERROR },
		{ "unreadable_shard", FG_SEV_ERROR },
		{ "stray_shard", FG_SEV_WARNING },
		{ "index_mismatch", FG_SEV_WARNING },
		{ "bf16_shift_precision_loss", FG_SEV_WARNING },
		{ "quantized_mtp_head", FG_SEV_WARNING },
		{ "mixed_head_conventions_in_fleet", FG_SEV_WARNING },
		{ "raw_zero_centred_head", FG_SEV_INFO },
		{ "convention_structure_mismatch", FG_SEV_ERROR },
		{ "trunk_double_shift_at_load", FG_SEV_ERROR },
		{ "layout_conflict", FG_SEV_ERROR }, /* issue 10 section 4: a forge refusal */
		/* issue 12 */
		{ "trunk_format_unsupported", FG_SEV_ERROR },
		{ "unsupported_quantization_format", FG_SEV_ERROR },
		{ "quantized_head_requantized", FG_SEV_WARNING },
		{ "bf16_shift_rounding", FG_SEV_INFO },
	};
	const size_t n_rows = sizeof(rows) / sizeof(rows[0]);
	size_t n = 0;

	(void)state;
	for (size_t i = 0; i < n_rows; i++) {
		const struct fg_verdict_row *c = fg_verdict_code_find(rows[i].code);

		if (!c)
			fail_msg("code %s missing from the table", rows[i].code);
		assert_string_equal(c->name, rows[i].code);
		if (c->severity != rows[i].sev)
			fail_msg("%s: severity %s, want %s", rows[i].code, fg_severity_name(c->severity),
				 fg_severity_name(rows[i].sev));
		assert_non_null(c->meaning);
	}
	/* The table's static and fleet codes are those and nothing else, each once. */
	for (size_t i = 0; i < FG_VERDICT_COUNT; i++) {
		const struct fg_verdict_row *all = fg_verdict_table;
		int known = 0;

		if (all[i].kind == FG_VK_VERIFICATION)
			continue;
		n++;
		for (size_t k = 0; k < n_rows; k++)
			known += strcmp(all[i].name, rows[k].code) == 0;
		if (known != 1)
			fail_msg("table code %s appears %d times in the vocabulary", all[i].name, known);
		for (size_t k = i + 1; k < FG_VERDICT_COUNT; k++)
			assert_string_not_equal(all[i].name, all[k].name);
	}
	assert_int_equal(n, n_rows);
	assert_null(fg_verdict_code_find("no_such_code"));
	assert_null(fg_verdict_code_find(""));
	assert_null(fg_verdict_code_find("STRAY_SHARD"));
	assert_string_equal(fg_severity_name(FG_SEV_INFO), "info");
	assert_string_equal(fg_severity_name(FG_SEV_WARNING), "warning");
	assert_string_equal(fg_severity_name(FG_SEV_ERROR), "error");
}

/* One table for static, verification and fleet codes, checked row by row. */
static void test_table(void **state)
{
	static const struct {
		const char *code;
		enum fg_severity sev;
		enum fg_verdict_kind kind;
	} others[] = {
		{ "mtp_depth_wins", FG_SEV_INFO, FG_VK_VERIFICATION },
		{ "no_quality_passed_mtp_depth_beat_ar", FG_SEV_WARNING, FG_VK_VERIFICATION },
		{ "mtp_acceptance_collapsed", FG_SEV_ERROR, FG_VK_VERIFICATION },
		{ "no_mtp_depth_beat_ar", FG_SEV_WARNING, FG_VK_VERIFICATION },
		{ "mixed_head_conventions_in_fleet", FG_SEV_WARNING, FG_VK_FLEET },
	};
	size_t n_verification = 0;

	(void)state;
	assert_int_equal(FG_VERDICT_COUNT, 37); /* 32 static, 1 fleet, 4 verification */
	for (size_t i = 0; i < FG_VERDICT_COUNT; i++) {
		const struct fg_verdict_row *row = fg_verdict_row((enum fg_verdict_code)i);

		/* The enum indexes the table, and each row knows its own code. */
		assert_ptr_equal(row, &fg_verdict_table[i]);
		assert_int_equal(row->code, i);
		/* A unique, identifier-like name that finds the row back. */
		assert_non_null(row->name);
		assert_true(strlen(row->name) > 0 && strlen(row->name) <= 64);
		assert_int_equal(strspn(row->name, "abcdefghijklmnopqrstuvwxyz0123456789_"), strlen(row->name));
		assert_ptr_equal(fg_verdict_code_find(row->name), row);
		for (size_t k = i + 1; k < FG_VERDICT_COUNT; k++)
			if (strcmp(row->name, fg_verdict_table[k].name) == 0)
				fail_msg("%s is the name of two codes", row->name);
		/* A severity and a kind of their enums, and a meaning. */
		assert_true(row->severity == FG_SEV_INFO || row->severity == FG_SEV_WARNING ||
			    row->severity == FG_SEV_ERROR);
		assert_string_not_equal(fg_severity_name(row->severity), "unknown");
		assert_true(row->kind == FG_VK_STATIC || row->kind == FG_VK_VERIFICATION || row->kind == FG_VK_FLEET);
		assert_true(row->meaning && row->meaning[0]);
		n_verification += row->kind == FG_VK_VERIFICATION;
	}
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		const struct fg_verdict_row *row = fg_verdict_code_find(others[i].code);

		if (!row)
			fail_msg("code %s missing from the table", others[i].code);
		assert_int_equal(row->severity, others[i].sev);
		assert_int_equal(row->kind, others[i].kind);
	}
	assert_int_equal(n_verification, 4);
	assert_ptr_equal(fg_verdict_code_find("mtp_acceptance_collapsed"), &fg_verdict_table[FG_V_MTP_ACCEPTANCE_COLLAPSED]);
	assert_string_equal(fg_verdict_table[FG_V_HEAD_DOUBLE_SHIFTED].name, "head_double_shifted");
	/* A value outside the enum has no row. */
	assert_null(fg_verdict_row(FG_VERDICT_COUNT));
	assert_null(fg_verdict_row((enum fg_verdict_code)(FG_VERDICT_COUNT + 7)));
	assert_null(fg_verdict_row((enum fg_verdict_code)-1));
	assert_null(fg_verdict_code_find(NULL));
	assert_null(fg_verdict_code_find("mtp_depth_wins "));
}

static void test_severity_names(void **state)
{
	enum fg_severity s = FG_SEV_WARNING;

	(void)state;
	for (int i = 0; i < FG_SEV_COUNT; i++) {
		enum fg_severity back = (enum fg_severity)((i + 1) % FG_SEV_COUNT);

		assert_true(fg_severity_parse(fg_severity_name((enum fg_severity)i), &back));
		assert_int_equal(back, i);
	}
	assert_true(fg_severity_parse("error", &s));
	assert_int_equal(s, FG_SEV_ERROR);
	/* Anything else is refused and leaves *out alone. */
	s = FG_SEV_WARNING;
	assert_false(fg_severity_parse("fatal", &s));
	assert_false(fg_severity_parse("Error", &s));
	assert_false(fg_severity_parse("", &s));
	assert_false(fg_severity_parse(NULL, &s));
	assert_int_equal(s, FG_SEV_WARNING);
	/* A value outside the enum is named, never read past the table. */
	assert_string_equal(fg_severity_name((enum fg_severity)FG_SEV_COUNT), "unknown");
	assert_string_equal(fg_severity_name((enum fg_severity)-1), "unknown");
}

static void test_add_and_find(void **state)
{
	struct fg_verdict *v;

	(void)state;
	assert_int_equal(fg_verdicts_add(&list, FG_V_EMBEDDED_MTP_SHIFT_HAZARD, "trunk", &v,
					 "%d embedded mtp.* keys make %s add +1", 29, "mlx-lm 0.31"), 0);
	assert_non_null(v);
	assert_int_equal(list.n, 1);
	assert_ptr_equal(v->row, fg_verdict_code_find("embedded_mtp_shift_hazard"));
	assert_string_equal(v->set, "trunk");
	assert_string_equal(v->detail, "29 embedded mtp.* keys make mlx-lm 0.31 add +1");
	assert_int_equal(v->n_runtimes, 0);
	assert_int_equal(v->n_tensors, 0);

	/* A verification code or a value outside the enum adds nothing, and is no ENOMEM. */
	v = NULL;
	assert_int_equal(fg_verdicts_add(&list, FG_V_MTP_ACCEPTANCE_COLLAPSED, "trunk", &v, "x"), FG_EINTERNAL);
	assert_int_equal(fg_verdicts_add(&list, FG_VERDICT_COUNT, NULL, &v, "x"), FG_EINTERNAL);
	assert_int_equal(fg_verdicts_add(&list, (enum fg_verdict_code)-1, NULL, &v, "x"), FG_EINTERNAL);
	assert_null(v);
	assert_int_equal(list.n, 1);

	/* No set is an empty set name. */
	assert_int_equal(fg_verdicts_add(&list, FG_V_STRAY_SHARD, NULL, &v, "%s", "model-extra.safetensors"), 0);
	assert_non_null(v);
	assert_string_equal(v->set, "");
	assert_int_equal(list.n, 2);

	assert_non_null(fg_verdicts_find(&list, FG_V_STRAY_SHARD));
	assert_string_equal(fg_verdicts_find(&list, FG_V_STRAY_SHARD)->detail, "model-extra.safetensors");
	assert_string_equal(fg_verdicts_find(&list, FG_V_EMBEDDED_MTP_SHIFT_HAZARD)->set, "trunk");
	assert_null(fg_verdicts_find(&list, FG_V_TRUNK_MISSING_SHIFT));
	fg_verdicts_release(&list);
}

static void test_detail_truncated(void **state)
{
	char longtext[1000];
	struct fg_verdict *v;

	(void)state;
	memset(longtext, 'x', sizeof(longtext) - 1);
	longtext[sizeof(longtext) - 1] = '\0';
	assert_int_equal(fg_verdicts_add(&list, FG_V_INDEX_MISMATCH,
					 "a-set-name-that-is-much-longer-than-sixty-four-characters-in-all-of-it", &v,
					 "%s", longtext), 0);
	assert_non_null(v);
	assert_int_equal(strlen(v->detail), sizeof(v->detail) - 1);
	/* The detail is prose and may be cut; the set is a name a reader looks up: kept whole. */
	assert_string_equal(v->set, "a-set-name-that-is-much-longer-than-sixty-four-characters-in-all-of-it");
	fg_verdicts_release(&list);
}

static void test_runtimes_deduped(void **state)
{
	static const char *const ids[] = {
		"mlx-lm-0.31", "mlx-lm-0.32", "mlx-lm-pr990", "mtplx-2.11", "mtplx-2.12", "ollama", "vllm",
		"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "r16", "r17", "r18", "r19", "r20",
		"r21", "r22", "r23", "r24", "r25", "r26", "r27", "r28", "r29", "r30", "r31", "r32", "r33",
	};
	struct fg_verdict *v;

	(void)state;
	assert_int_equal(fg_verdicts_add(&list, FG_V_EMBEDDED_MTP_SHIFT_HAZARD, "trunk", &v, "x"), 0);
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
	/* The list holds at most FG_VERDICT_MAX_RUNTIMES runtimes (every table row fits). */
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		fg_verdict_runtime(v, ids[i]);
	assert_int_equal(v->n_runtimes, FG_VERDICT_MAX_RUNTIMES);
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
	assert_int_equal(fg_verdicts_add(&list, FG_V_NONFINITE_NORM, "mtp", &v, "x"), 0);
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
	assert_int_equal(fg_verdicts_add(&list, FG_V_RAW_ZERO_CENTRED_HEAD, "mtp", NULL, "delta head"), 0);
	assert_int_equal(fg_verdicts_add(&list, FG_V_STRAY_SHARD, NULL, NULL, "model-extra.safetensors"), 0);
	assert_int_equal(fg_verdicts_add(&list, FG_V_QUANTIZED_MTP_HEAD, "mtp", NULL, "4-bit"), 0);
	assert_false(fg_verdicts_has_error(&list));
	assert_null(fg_verdicts_first_error(&list));
	assert_int_equal(fg_verdicts_add(&list, FG_V_TRUNK_MISSING_SHIFT, "trunk", NULL, "probe 0.78"), 0);
	assert_true(fg_verdicts_has_error(&list));
	assert_ptr_equal(fg_verdicts_first_error(&list), &list.v[3]);
	fg_verdicts_release(&list);
	assert_false(fg_verdicts_has_error(&list));
}

static void test_growth_and_release(void **state)
{
	/* The codes a report may carry (the verification codes are not list items). */
	const struct fg_verdict_row *codes[FG_VERDICT_COUNT];
	size_t n = 0;

	(void)state;
	for (size_t i = 0; i < FG_VERDICT_COUNT; i++)
		if (fg_verdict_table[i].kind != FG_VK_VERIFICATION)
			codes[n++] = &fg_verdict_table[i];
	/* More verdicts than the first allocation, each with owned tensor copies. */
	for (size_t i = 0; i < 3 * n; i++) {
		struct fg_verdict *v = NULL;

		assert_int_equal(fg_verdicts_add(&list, codes[i % n]->code, "trunk", &v, "verdict %zu", i), 0);
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
		assert_ptr_equal(list.v[i].row, codes[i % n]);
		assert_int_equal(list.v[i].n_tensors, i % (FG_VERDICT_MAX_LIST + 3));
	}
	fg_verdicts_release(&list);
	assert_int_equal(list.n, 0);
	assert_null(list.v);
	/* Releasing twice, or NULL, is harmless; the list is reusable. */
	fg_verdicts_release(&list);
	fg_verdicts_release(NULL);
	assert_int_equal(fg_verdicts_add(&list, FG_V_STRAY_SHARD, NULL, NULL, "again"), 0);
	assert_int_equal(list.n, 1);
	fg_verdicts_release(&list);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_severities, release_list),
		cmocka_unit_test_teardown(test_table, release_list),
		cmocka_unit_test_teardown(test_severity_names, release_list),
		cmocka_unit_test_teardown(test_add_and_find, release_list),
		cmocka_unit_test_teardown(test_detail_truncated, release_list),
		cmocka_unit_test_teardown(test_runtimes_deduped, release_list),
		cmocka_unit_test_teardown(test_tensors_capped, release_list),
		cmocka_unit_test_teardown(test_has_error, release_list),
		cmocka_unit_test_teardown(test_growth_and_release, release_list),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
