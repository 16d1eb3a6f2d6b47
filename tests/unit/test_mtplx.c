/*
 * test_mtplx.c: forge/model/mtplx.h: the head fingerprint in MTPLX's exact
 * framing (and forged's legacy framing from the same pass), the artifact
 * digest, and mtplx_runtime.json as forged writes, reads and restamps it.
 *
 * Every digest below was computed outside forged, with hashlib in
 * /usr/bin/python3, from the bytes written here, by the rules MTPLX and
 * docs/interfaces.md give:
 *   MTPLX (youssofal/MTPLX mtplx/commands/forge.py@3d2f74da
 *   `_verification_artifact_fingerprint`):
 *     "sha256:" + sha256(b"config.json\0" + config + b"\0mtp\0" + mtp + b"\0")
 *   legacy: sha256(config + mtp.safetensors)
 *   digest: "sha256:" + sha256(b"".join(name + b"\0" + hex + b"\n" for name in sorted(files)))
 * The restamp is checked against MTPLX's own stamp tests
 * (tests/test_forge_cli.py@55169e3f, carried in
 * tests/fixtures/mtplx_verdict_vectors.json).
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

#include "forge/core/fs.h"
#include "forge/core/json.h"
#include "forge/model/mtplx.h"
#include "forge/verify/verify.h"
#include "tests/unit/support.h"

static void test_head_fingerprint(void **state)
{
	char dir[PATH_MAX], sub[PATH_MAX];
	struct fg_head_fingerprints fp;
	struct fg_err err = { 0 };

	(void)state;
	tmpdir_new(dir, sizeof(dir), "mtplx_fp");
	write_text(dir, "config.json", "{\"a\":1}");
	/* No mtp file: MTPLX cannot fingerprint it either; the output is untouched. */
	memset(&fp, 'x', sizeof(fp));
	fp.mtplx[sizeof(fp.mtplx) - 1] = '\0';
	assert_int_equal(fg_mtplx_head_fingerprint(dir, &fp, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "mtp.safetensors"));
	assert_int_equal(fp.legacy[0], 'x');
	write_text(dir, "mtp.safetensors", "sidecar bytes");
	assert_int_equal(fg_mtplx_head_fingerprint(dir, &fp, &err), 0);
	assert_string_equal(fp.mtplx, "sha256:74dde1aafbfa849a8339e2e19db364c668fbb5548fac93b8ada5bdfdb6b8e534");
	assert_string_equal(fp.legacy, "dbaca7894bb1b46ebaed640958acd4c8c0a3776db4173e783cf0ec775f02fd03");
	assert_string_equal(fp.sidecar, "2a708564b7d4940d983e7aae40151cfdc1d6e2f05ca881687aadad4be1bba8e0");
	assert_string_equal(fp.mtp_file, "mtp.safetensors");
	/* The config's pointer wins over mtp.safetensors (artifacts.expected_mtp_file). */
	write_text(dir, "config.json", "{\"mlx_lm_extra_tensors\":{\"mtp_file\":\"head/x.safetensors\"}}");
	make_dir(sub, sizeof(sub), dir, "head");
	write_text(sub, "x.safetensors", "pointed head");
	assert_int_equal(fg_mtplx_head_fingerprint(dir, &fp, &err), 0);
	assert_string_equal(fp.mtplx, "sha256:70e137b64d9755e9060b835898990d24ede887268373a0d923b18036e3f959d2");
	assert_string_equal(fp.mtp_file, "head/x.safetensors");
	/* A pointer to nothing is not fingerprinted, even though mtp.safetensors exists (MTPLX returns None). */
	write_text(dir, "config.json", "{\"mlx_lm_extra_tensors\":{\"mtp_file\":\"gone.safetensors\"}}");
	assert_int_equal(fg_mtplx_head_fingerprint(dir, &fp, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "gone.safetensors"));
	/* Without a pointer the candidates go in MTPLX's order. */
	assert_int_equal(fg_fs_rm_rf(dir), 0);
	tmpdir_new(dir, sizeof(dir), "mtplx_fp2");
	write_text(dir, "config.json", "{\"a\":1}");
	write_text(dir, "model-mtp.safetensors", "sidecar bytes");
	make_dir(sub, sizeof(sub), dir, "mtp");
	write_text(sub, "weights.safetensors", "sidecar bytes");
	assert_int_equal(fg_mtplx_head_fingerprint(dir, &fp, &err), 0);
	assert_string_equal(fp.mtp_file, "mtp/weights.safetensors");
	assert_string_equal(fp.mtplx, "sha256:74dde1aafbfa849a8339e2e19db364c668fbb5548fac93b8ada5bdfdb6b8e534");
	assert_string_equal(fp.legacy, ""); /* no mtp.safetensors: no legacy value */
	assert_int_equal(fg_fs_rm_rf(dir), 0);
}

static void test_digest(void **state)
{
	char d[FG_DIGEST_MAX];
	struct fg_err err = { 0 };
	cJSON *files = cJSON_Parse("{\"mtp.safetensors\": \"" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" "\","
				   " \"config.json\": \"" "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" "\","
				   " \"model-00001-of-00002.safetensors\": \"" "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc" "\","
				   " \"provenance/originals/0000.zst\": \"" "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd" "\","
				   " \"\\u00e9.bin\": \"" "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee" "\"}");
	cJSON *bad;

	(void)state;
	assert_non_null(files);
	assert_int_equal(fg_artifact_digest(files, d, &err), 0);
	assert_string_equal(d, "sha256:ca1a886fdea01c8291fe5ba2a335c84c74dc48b772b1e324100cdc29f85c20b2");
	/* A trunk shard that changes changes the digest. */
	cJSON_ReplaceItemInObject(files, "model-00001-of-00002.safetensors",
				  cJSON_CreateString("cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccd"));
	assert_int_equal(fg_artifact_digest(files, d, &err), 0);
	assert_string_not_equal(d, "sha256:ca1a886fdea01c8291fe5ba2a335c84c74dc48b772b1e324100cdc29f85c20b2");
	cJSON_Delete(files);
	bad = cJSON_Parse("{\"a\": \"ABCD\"}");
	assert_int_equal(fg_artifact_digest(bad, d, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "files['a']"));
	cJSON_Delete(bad);
	bad = cJSON_Parse("{\"a\": \"" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" "\", \"a\": \""
			  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" "\"}");
	assert_int_equal(fg_artifact_digest(bad, d, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "twice"));
	cJSON_Delete(bad);
	assert_int_equal(fg_artifact_digest(NULL, d, &err), FG_EINPUT);
}

static const struct fg_mtplx_pack pack = {
	.target = "mtplx-2.12", .target_version = "2.12.0", .family = "qwen3_5", .model_type = "qwen3_5",
	.head_layers = 1, .source = "/models/src", .source_layout = "hf", .backbone = "/models/src", .policy = "keep",
	.forged_version = "0.1.0", .forged_at = "2026-12-01T00:00:00Z",
	.head_fingerprint = "sha256:74dde1aafbfa849a8339e2e19db364c668fbb5548fac93b8ada5bdfdb6b8e534",
	.digest = "sha256:ca1a886fdea01c8291fe5ba2a335c84c74dc48b772b1e324100cdc29f85c20b2",
};

static const char *str_at(const cJSON *o, const char *a, const char *b)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);

	return cJSON_GetStringValue(b ? cJSON_GetObjectItemCaseSensitive(v, b) : v);
}

/* What forged writes before a verification loads in MTPLX, as unverified. */
static void test_runtime_new(void **state)
{
	static const char *const required[] = { "mtplx_version", "arch_id", "mtp_depth_max", "recommended_profile",
						"exactness_baseline", "verified_on" };
	cJSON *doc = fg_mtplx_runtime_new(&pack), *sum;

	(void)state;
	assert_non_null(doc);
	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
		assert_non_null(cJSON_GetObjectItemCaseSensitive(doc, required[i]));
	assert_string_equal(str_at(doc, "arch_id", NULL), "qwen3-next-mtp");
	assert_string_equal(str_at(doc, "mtplx_version", NULL), "2.12.0");
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(doc, "mtp_depth_max")->valueint, 1);
	assert_string_equal(str_at(doc, "verified_on", "status"), "unverified");
	assert_string_equal(str_at(doc, "speed_evidence", "status"), "unverified");
	assert_string_equal(str_at(doc, "speed_evidence", "artifact_fingerprint"), pack.head_fingerprint);
	assert_string_equal(str_at(doc, "mtp_contract", "hidden_variant"), "post_norm");
	assert_string_equal(str_at(doc, "forge_provenance", "digest"), pack.digest);
	sum = fg_mtplx_runtime_summary(doc);
	assert_non_null(sum);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "loads")));
	assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(sum, "verified")));
	assert_string_equal(str_at(sum, "blocker", NULL), "speed_evidence status is unverified");
	assert_string_equal(str_at(sum, "written_by", NULL), "forged");
	cJSON_Delete(sum);
	cJSON_Delete(doc);
	/* The families MTPLX's catalog names, and its fallback. */
	assert_string_equal(fg_mtplx_arch_id("deepseek_v32"), "deepseek-v3-mtp");
	assert_string_equal(fg_mtplx_arch_id("mimo_v2"), "mimo-mtp");
	assert_string_equal(fg_mtplx_arch_id("unknown"), "generic-mtp");
}

/* RuntimeContract.from_dict's refusals and _runtime_contract_blocker's reasons. */
static void test_runtime_summary(void **state)
{
	static const struct {
		const char *doc;
		int loads, verified;
		const char *error, *blocker;
	} cases[] = {
		{ "{\"arch_id\": \"x\"}", 0, 0,
		  "runtime contract missing required keys: mtplx_version, mtp_depth_max, recommended_profile, "
		  "exactness_baseline, verified_on", NULL },
		{ "{\"mtplx_version\": \"2.12.0\", \"arch_id\": \"x\", \"mtp_depth_max\": 0, \"recommended_profile\": "
		  "\"stable\", \"exactness_baseline\": {}, \"verified_on\": {}}", 0, 0,
		  "runtime contract mtp_depth_max must be positive", NULL },
		{ "{\"mtplx_version\": \"2.12.0\", \"arch_id\": \"x\", \"mtp_depth_max\": 3, \"recommended_profile\": "
		  "\"stable\", \"exactness_baseline\": {}, \"verified_on\": null}", 0, 0,
		  "runtime contract verified_on is not an object", NULL },
		{ "{\"mtplx_version\": \"2.12.0\", \"arch_id\": \"x\", \"mtp_depth_max\": 3, \"recommended_profile\": "
		  "\"sustained\", \"exactness_baseline\": {}, \"verified_on\": {}, \"speed_evidence\": "
		  "{\"verdict\": \"mtp_depth_wins\"}}", 1, 1, NULL, NULL },
		{ "{\"mtplx_version\": \"2.12.0\", \"arch_id\": \"x\", \"mtp_depth_max\": 3, \"recommended_profile\": "
		  "\"stable\", \"exactness_baseline\": {}, \"verified_on\": {}, \"speed_evidence\": "
		  "{\"verdict\": \"mtp_acceptance_collapsed\"}}", 1, 0, NULL,
		  "speed_evidence verdict is mtp_acceptance_collapsed" },
		/* Statuses compare lower-case with '-' read as '_', and by prefix. */
		{ "{\"mtplx_version\": \"2.12.0\", \"arch_id\": \"x\", \"mtp_depth_max\": 3, \"recommended_profile\": "
		  "\"stable\", \"exactness_baseline\": {\"status\": \"Pending-Cyankiwi-35B\"}, \"verified_on\": {}}", 1, 0,
		  NULL, "exactness_baseline status is Pending-Cyankiwi-35B" },
		{ "{\"mtplx_version\": \"2.12.0\", \"arch_id\": \"x\", \"mtp_depth_max\": 3, \"recommended_profile\": "
		  "\"stable\", \"exactness_baseline\": {}, \"verified_on\": {}, \"speed_evidence\": "
		  "{\"public_release_blocker\": true, \"verdict\": \"mtp_depth_wins\"}}", 1, 0, NULL,
		  "speed_evidence is marked public_release_blocker" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *doc = cJSON_Parse(cases[i].doc), *sum;

		assert_non_null(doc);
		sum = fg_mtplx_runtime_summary(doc);
		assert_non_null(sum);
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "loads")) != cases[i].loads ||
		    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "verified")) != cases[i].verified)
			fail_msg("case %zu: loads/verified %s", i, cJSON_PrintUnformatted(sum));
		if (cases[i].error)
			assert_string_equal(str_at(sum, "error", NULL), cases[i].error);
		else
			assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(sum, "error")));
		if (cases[i].blocker)
			assert_string_equal(str_at(sum, "blocker", NULL), cases[i].blocker);
		else
			assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(sum, "blocker")));
		cJSON_Delete(sum);
		cJSON_Delete(doc);
	}
}

#define VECTORS_DEFAULT "tests/fixtures/mtplx_verdict_vectors.json"

/* The forged.verdict.v1 result of a vector's rows at MTPLX's threshold. */
static cJSON *result_of(const cJSON *document, const char *id)
{
	struct fg_verify_input in;
	struct fg_verify_result res;
	struct fg_err err = { 0 };
	cJSON *r;

	memset(&in, 0, sizeof(in));
	if (fg_verify_parse(&in, document, &err) != 0 || fg_verify_decide(&in, FG_VERIFY_COLLAPSE_MTPLX, &res, &err) != 0)
		fail_msg("%s: %s", id, err.msg);
	r = fg_verify_result_json(&res);
	fg_verify_release(&in);
	assert_non_null(r);
	return r;
}

/*
 * MTPLX's stamp tests: the rows of each `_stamp_runtime_metadata` vector
 * posted against the document forged wrote must give what MTPLX's test
 * asserts of its own stamp (mtp_depth_max, recommended_profile, the
 * contract's hidden variant, a launch-blocking exactness baseline reset),
 * and a document MTPLX's registry then reads as verified exactly when a
 * depth won.
 */
static void test_stamp_vectors(void **state)
{
	const char *path = getenv("FORGED_MTPLX_VECTORS");
	struct fg_err err = { 0 };
	cJSON *file = NULL;
	const cJSON *v;
	int n = 0;

	(void)state;
	if (fg_json_load(&file, path ? path : VECTORS_DEFAULT, 1u << 20, &err) != 0)
		fail_msg("%s", err.msg);
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(file, "vectors")) {
		const char *id = str_at(v, "id", NULL), *entry = str_at(v, "entry", NULL);
		const cJSON *want = cJSON_GetObjectItemCaseSensitive(v, "mtplx_test_expected"), *w;
		cJSON *doc, *result, *sum;
		const char *verdict;

		if (!entry || strcmp(entry, "_stamp_runtime_metadata") != 0)
			continue;
		doc = fg_mtplx_runtime_new(&pack);
		/* test_runtime_stamp_clears_stale_launch_blockers stamps over a pending baseline. */
		if (cJSON_GetObjectItemCaseSensitive(want, "note_existing_status"))
			cJSON_ReplaceItemInObject(doc, "exactness_baseline",
						  cJSON_Parse("{\"status\": \"pending-cyankiwi-35b-moe-benchmark\"}"));
		result = result_of(cJSON_GetObjectItemCaseSensitive(v, "document"), id);
		verdict = str_at(result, "verdict", NULL);
		assert_string_equal(verdict, str_at(want, "verdict", NULL));
		assert_int_equal(fg_mtplx_runtime_stamp(doc, result, "2026-12-01T12:00:00.000Z", &err), 0);
		if ((w = cJSON_GetObjectItemCaseSensitive(want, "mtp_depth_max")))
			assert_int_equal(cJSON_GetObjectItemCaseSensitive(doc, "mtp_depth_max")->valueint, w->valueint);
		if ((w = cJSON_GetObjectItemCaseSensitive(want, "recommended_profile")))
			assert_string_equal(str_at(doc, "recommended_profile", NULL), w->valuestring);
		if ((w = cJSON_GetObjectItemCaseSensitive(want, "mtp_contract.hidden_variant")))
			assert_string_equal(str_at(doc, "mtp_contract", "hidden_variant"), w->valuestring);
		if ((w = cJSON_GetObjectItemCaseSensitive(want, "exactness_baseline")))
			assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(doc, "exactness_baseline")),
					 cJSON_GetArraySize(w));
		assert_string_equal(str_at(doc, "speed_evidence", "verdict"), verdict);
		assert_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "speed_evidence"),
							     "status"));
		assert_string_equal(str_at(doc, "speed_evidence", "artifact_fingerprint"), pack.head_fingerprint);
		assert_string_equal(str_at(doc, "verified_on", "timestamp"), "2026-12-01T12:00:00.000Z");
		sum = fg_mtplx_runtime_summary(doc);
		assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "loads")));
		assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sum, "verified")),
				 strcmp(verdict, "mtp_depth_wins") == 0);
		printf("mtplx stamp vector %-36s %s: mtp_depth_max %d, profile %s, %s\n", id, verdict,
		       cJSON_GetObjectItemCaseSensitive(doc, "mtp_depth_max")->valueint,
		       str_at(doc, "recommended_profile", NULL),
		       str_at(sum, "blocker", NULL) ? str_at(sum, "blocker", NULL) : "verified");
		cJSON_Delete(sum);
		cJSON_Delete(result);
		cJSON_Delete(doc);
		n++;
	}
	assert_int_equal(n, 4);
	cJSON_Delete(file);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head_fingerprint),
		cmocka_unit_test(test_digest),
		cmocka_unit_test(test_runtime_new),
		cmocka_unit_test(test_runtime_summary),
		cmocka_unit_test(test_stamp_vectors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
