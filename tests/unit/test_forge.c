/*
 * test_forge.c: fg_forge_run (forge/artifact/forge.h) on a generated
 * fixture (fixture_path: $FIXTURES or BUILD/fixtures, skipped without it): the result carries the
 * provenance it wrote, equal to forged.json on disk, so a caller storing
 * the artifact never has to read the file back; progress walks the stage
 * table in order, from 0 to 1, never backwards.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "forge/artifact/forge.h"
#include "forge/core/json.h"
#include "tests/unit/support.h"

struct seen {
	size_t n;
	char stage[64][16];
	double fraction[64];
};

static int record(void *ctx, const char *stage, double fraction)
{
	struct seen *s = ctx;

	if (s->n < 64) {
		snprintf(s->stage[s->n], sizeof(s->stage[0]), "%s", stage);
		s->fraction[s->n++] = fraction;
	}
	return 0;
}

static void test_result_carries_provenance(void **state)
{
	char tmp[PATH_MAX], src[PATH_MAX], out[PATH_MAX + 16], prov_path[PATH_MAX + 16];
	struct seen seen = { 0 };
	struct fg_forge_opts o = { .version = "test", .progress = record, .progress_ctx = &seen };
	static const char *const order[] = { "inspect", "backbone", "sidecar", "provenance", "check", "done" };
	size_t k = 0;
	struct fg_forge_result res;
	struct fg_err err = { 0 };
	cJSON *on_disk = NULL;

	(void)state;
	if (!fixture_path(src, sizeof(src), "qwen35_hf"))
		skip();
	tmpdir_new(tmp, sizeof(tmp), "forge");
	snprintf(out, sizeof(out), "%s/artifact", tmp);
	o.source = src;
	o.out = out;
	if (fg_forge_run(&o, &res, &err) != 0)
		fail_msg("forge: %s", err.msg);
	assert_true(res.ok);
	assert_non_null(res.provenance);
	snprintf(prov_path, sizeof(prov_path), "%s/forged.json", res.artifact);
	assert_int_equal(fg_json_load(&on_disk, prov_path, 64u << 20, &err), 0);
	assert_true(cJSON_Compare(on_disk, res.provenance, 1));
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(res.provenance, "fingerprint")),
			    res.fingerprint);
	assert_true(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(res.provenance, "originals")) > 0);
	assert_non_null(cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(res.provenance, "files"), "mtp.safetensors"));
	assert_string_equal(res.target, FG_FORGE_DEFAULT_TARGET);
	/* The default target's layout: MTPLX's sidecar, which the config points at (layout.h). */
	assert_int_equal(res.n_targets, 1);
	assert_string_equal(res.targets[0], FG_FORGE_DEFAULT_TARGET);
	assert_string_equal(res.head_file, "mtp.safetensors");
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(res.provenance, "layout"), "file")), "mtp.safetensors");
	cJSON_Delete(on_disk);
	/* A local source: every stage but fetch, in order; fractions from 0 to 1, never backwards. */
	assert_true(seen.n >= 6);
	assert_true(seen.fraction[0] == 0.0 && seen.fraction[seen.n - 1] == 1.0);
	for (size_t i = 0; i < seen.n; i++) {
		if (i)
			assert_true(seen.fraction[i] >= seen.fraction[i - 1]);
		if (k < 6 && strcmp(seen.stage[i], order[k]) == 0)
			k++;
		else if (!k || strcmp(seen.stage[i], order[k - 1]) != 0)
			fail_msg("stage %s out of order", seen.stage[i]);
	}
	assert_int_equal(k, 6);
	fg_forge_result_release(&res);
	assert_null(res.provenance);
	assert_int_equal(rm_tree(tmp), 0);
}

/* Remote reads stand for the part of the run before the backbone stage. */
static void test_fetch_fraction(void **state)
{
	(void)state;
	assert_true(fg_forge_fetch_fraction(0, 0) == 0.0);
	assert_true(fg_forge_fetch_fraction(0, 100) == 0.0);
	assert_true(fg_forge_fetch_fraction(50, 100) > 0.0);
	assert_true(fg_forge_fetch_fraction(50, 100) < fg_forge_fetch_fraction(100, 100));
	assert_true(fg_forge_fetch_fraction(100, 100) <= 0.1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fetch_fraction),
		cmocka_unit_test(test_result_carries_provenance),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
