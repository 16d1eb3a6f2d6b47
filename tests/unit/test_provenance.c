/*
 * test_provenance.c: forged.json built from struct fg_provenance
 * (forge/artifact/provenance.h): every key in its documented order with the
 * struct's values, the lists copied (the caller keeps its own); the
 * fingerprints and the digest have their own test (test_mtplx.c).
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

#include "forge/artifact/provenance.h"
#include "forge/core/fs.h"
#include "tests/unit/support.h"

static void test_document(void **state)
{
	static const char *const keys[] = {
		"schema", "forged_version", "created_at", "source", "backbone", "target", "layout", "policy", "decisions",
		"removed_from_backbone", "originals", "relayouts", "files", "fingerprint", "head_fingerprint", "digest",
		"mtplx_runtime",
	};
	char *shifted[] = { "mtp.norm.weight" }, *removed[] = { "mtp.fc.weight", "mtp.norm.weight" };
	cJSON *originals = cJSON_CreateArray(), *files = cJSON_CreateObject(), *doc, *it;
	struct fg_provenance p = {
		.forged_version = NULL, /* "unknown" */
		.created_at = 86400 + 3661,
		.source = "/models/src", .family = "qwen3_5", .head_set = "mtp", .backbone = "/models/bb",
		.target = "mtplx-2.12", .policy = "keep",
		.source_convention = FG_CONV_DELTA, .target_convention = FG_CONV_ABSOLUTE,
		.shifted = shifted, .n_shifted = 1, .expert_layout = "",
		.removed = removed, .n_removed = 2,
		.originals = originals, .relayouts = NULL, .files = files,
		.fingerprint = "ab",
	};
	size_t k = 0;

	(void)state;
	cJSON_AddItemToArray(originals, cJSON_CreateString("o"));
	cJSON_AddStringToObject(files, "config.json", "cd");
	doc = fg_provenance_json(&p);
	assert_non_null(doc);
	cJSON_ArrayForEach(it, doc) {
		assert_true(k < sizeof(keys) / sizeof(keys[0]));
		assert_string_equal(it->string, keys[k++]);
	}
	assert_int_equal(k, sizeof(keys) / sizeof(keys[0]));
	assert_string_equal(cJSON_GetObjectItem(doc, "schema")->valuestring, "forged.provenance.v1");
	assert_string_equal(cJSON_GetObjectItem(doc, "forged_version")->valuestring, "unknown");
	assert_string_equal(cJSON_GetObjectItem(doc, "created_at")->valuestring, "1970-01-02T01:01:01Z");
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(doc, "layout"))); /* none given */
	it = cJSON_GetObjectItem(doc, "source");
	assert_string_equal(cJSON_GetObjectItem(it, "path")->valuestring, "/models/src");
	assert_string_equal(cJSON_GetObjectItem(it, "family")->valuestring, "qwen3_5");
	assert_string_equal(cJSON_GetObjectItem(it, "head_set")->valuestring, "mtp");
	it = cJSON_GetObjectItem(doc, "decisions");
	assert_string_equal(cJSON_GetObjectItem(it, "source_convention")->valuestring, "delta");
	assert_string_equal(cJSON_GetObjectItem(it, "target_convention")->valuestring, "absolute");
	assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(it, "shifted_tensors"), 0)->valuestring,
			    "mtp.norm.weight");
	assert_string_equal(cJSON_GetObjectItem(it, "shift_precision")->valuestring, "f32");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "removed_from_backbone")), 2);
	/* NULL lists are empty ones; given lists are copies. */
	assert_true(cJSON_IsArray(cJSON_GetObjectItem(doc, "relayouts")));
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "relayouts")), 0);
	assert_ptr_not_equal(cJSON_GetObjectItem(doc, "originals"), originals);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "files"), "config.json")->valuestring, "cd");
	cJSON_Delete(doc);
	assert_int_equal(cJSON_GetArraySize(originals), 1); /* still the caller's */
	cJSON_Delete(originals);
	cJSON_Delete(files);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_document),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
