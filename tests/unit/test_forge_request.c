/*
 * test_forge_request.c: the forge job parameters codec (forge/artifact/request.h)
 * that POST /v1/jobs and the workers share: valid bodies with their
 * defaults, each invalid body with the fault (the API's problem type) and
 * the message the API shows, and the stored form read back unchanged.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "forge/artifact/request.h"
#include "forge/model/runtimes.h"

/* Parse json as a request; returns the code, with fault and err filled. */
static int parse(const char *json, cJSON **doc, struct fg_forge_request *rq, enum fg_forge_request_fault *fault,
		 struct fg_err *err)
{
	*doc = cJSON_Parse(json);
	assert_non_null(*doc);
	return fg_forge_request_from_json(rq, *doc, fault, err);
}

static void test_defaults(void **state)
{
	struct fg_forge_request rq;
	enum fg_forge_request_fault fault = FG_FREQ_INVALID_FIELD;
	struct fg_err err = { 0 };
	cJSON *doc;

	(void)state;
	assert_int_equal(parse("{\"kind\": \"forge\", \"source\": \"models/q\"}", &doc, &rq, &fault, &err), 0);
	assert_int_equal(fault, FG_FREQ_OK);
	assert_string_equal(rq.source, "models/q");
	assert_null(rq.backbone);
	assert_null(rq.out);
	assert_string_equal(rq.target, FG_FORGE_DEFAULT_TARGET);
	assert_non_null(fg_runtime_find(rq.target));
	assert_string_equal(rq.quant, "keep");
	cJSON_Delete(doc);
}

/* A target list is kept as given, and stored the same. */
static void test_target_list(void **state)
{
	struct fg_forge_request rq;
	struct fg_err err = { 0 };
	cJSON *doc, *back;

	(void)state;
	assert_int_equal(parse("{\"kind\": \"forge\", \"source\": \"m\", \"target\": \"mtplx-2.12, vllm-mlx\"}",
			       &doc, &rq, NULL, &err), 0);
	assert_string_equal(rq.target, "mtplx-2.12, vllm-mlx");
	back = fg_forge_request_to_json(&rq);
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(back, "target")), "mtplx-2.12, vllm-mlx");
	cJSON_Delete(back);
	cJSON_Delete(doc);
}

static void test_every_field(void **state)
{
	struct fg_forge_request rq;
	struct fg_forge_opts o;
	struct fg_err err = { 0 };
	cJSON *doc;

	(void)state;
	assert_int_equal(parse("{\"kind\": \"forge\", \"source\": \"hf://org/m\", \"backbone\": \"/m/bb\","
			       " \"target\": \"hf\", \"quant\": \"affine:4:64\", \"out\": \"/m/out\"}",
			       &doc, &rq, NULL, &err), 0);
	assert_string_equal(rq.source, "hf://org/m");
	assert_string_equal(rq.backbone, "/m/bb");
	assert_string_equal(rq.target, "hf");
	assert_string_equal(rq.quant, "affine:4:64");
	assert_string_equal(rq.out, "/m/out");
	memset(&o, 0, sizeof(o));
	o.force = 1;
	fg_forge_request_opts(&rq, &o);
	assert_ptr_equal(o.source, rq.source);
	assert_ptr_equal(o.backbone, rq.backbone);
	assert_ptr_equal(o.target, rq.target);
	assert_ptr_equal(o.quant, rq.quant);
	assert_ptr_equal(o.out, rq.out);
	assert_int_equal(o.force, 1);
	cJSON_Delete(doc);
}

static void test_invalid_bodies(void **state)
{
	static const struct {
		const char *json;
		enum fg_forge_request_fault fault;
		const char *msg;
	} cases[] = {
		{ "{\"source\": \"m\"}", FG_FREQ_INVALID_FIELD, "\"kind\" must be \"forge\"" },
		{ "{\"kind\": \"inspect\", \"source\": \"m\"}", FG_FREQ_INVALID_FIELD, "\"kind\" must be \"forge\"" },
		{ "{\"kind\": 1, \"source\": \"m\"}", FG_FREQ_INVALID_FIELD, "\"kind\" must be \"forge\"" },
		{ "{\"kind\": \"forge\"}", FG_FREQ_INVALID_FIELD, "\"source\" must be a string" },
		{ "{\"kind\": \"forge\", \"source\": 7}", FG_FREQ_INVALID_FIELD, "\"source\" must be a string" },
		{ "{\"kind\": \"forge\", \"source\": \"m\", \"target\": \"vllm-9\"}", FG_FREQ_UNKNOWN_RUNTIME,
		  "\"target\" 'vllm-9' is not a runtime id" },
		/* A list: each entry is checked, the first bad one named (issue 10 section 4). */
		{ "{\"kind\": \"forge\", \"source\": \"m\", \"target\": \"mtplx-2.12,vllm-9\"}", FG_FREQ_UNKNOWN_RUNTIME,
		  "\"target\" 'vllm-9' is not a runtime id" },
		{ "{\"kind\": \"forge\", \"source\": \"m\", \"target\": \"vllm,\"}", FG_FREQ_UNKNOWN_RUNTIME,
		  "\"target\" target list 'vllm,' has an empty entry" },
		{ "{\"kind\": \"forge\", \"source\": \"m\", \"quant\": \"affine:7:64\"}", FG_FREQ_INVALID_FIELD,
		  "\"quant\" must be keep, match, mxfp4 or affine:BITS:GROUP" },
		{ "{\"kind\": \"forge\", \"source\": \"m\", \"quant\": \"affine:4:16\"}", FG_FREQ_INVALID_FIELD,
		  "\"quant\" must be keep, match, mxfp4 or affine:BITS:GROUP" },
		{ "{\"kind\": \"forge\", \"source\": \"m\", \"quant\": \"int4\"}", FG_FREQ_INVALID_FIELD,
		  "\"quant\" must be keep, match, mxfp4 or affine:BITS:GROUP" },
		{ "{\"kind\": \"forge\", \"source\": \"https://hub.example/m\"}", FG_FREQ_BACKBONE_REQUIRED,
		  "a remote source needs a local \"backbone\": the artifact links its shards" },
		{ "[]", FG_FREQ_INVALID_FIELD, "\"kind\" must be \"forge\"" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fg_forge_request rq = { .source = "untouched" };
		enum fg_forge_request_fault fault = FG_FREQ_OK;
		struct fg_err err = { 0 };
		cJSON *doc;

		assert_int_equal(parse(cases[i].json, &doc, &rq, &fault, &err), FG_EINPUT);
		assert_int_equal(err.code, FG_EINPUT);
		assert_int_equal(fault, cases[i].fault);
		assert_string_equal(err.msg, cases[i].msg);
		assert_string_equal(rq.source, "untouched");
		cJSON_Delete(doc);
	}
	/* No document at all (unparsable stored params) is a bad kind too. */
	{
		struct fg_forge_request rq;
		struct fg_err err = { 0 };

		assert_int_equal(fg_forge_request_from_json(&rq, NULL, NULL, &err), FG_EINPUT);
	}
}

/* Optional fields that are not strings are ignored (the API's behaviour before the codec). */
static void test_non_string_optionals(void **state)
{
	struct fg_forge_request rq;
	struct fg_err err = { 0 };
	cJSON *doc;

	(void)state;
	assert_int_equal(parse("{\"kind\": \"forge\", \"source\": \"m\", \"backbone\": 3, \"target\": null,"
			       " \"quant\": false, \"out\": {}}", &doc, &rq, NULL, &err), 0);
	assert_null(rq.backbone);
	assert_null(rq.out);
	assert_string_equal(rq.target, FG_FORGE_DEFAULT_TARGET);
	assert_string_equal(rq.quant, "keep");
	cJSON_Delete(doc);
}

/* The stored form: defaults written out, read back the same, in the order the queue always held. */
static void test_round_trip(void **state)
{
	struct fg_forge_request rq = { .source = "/m/src", .out = "/m/out" }, back;
	struct fg_err err = { 0 };
	cJSON *doc;
	char *text;

	(void)state;
	doc = fg_forge_request_to_json(&rq);
	assert_non_null(doc);
	text = cJSON_PrintUnformatted(doc);
	assert_string_equal(text, "{\"kind\":\"forge\",\"source\":\"/m/src\",\"target\":\"" FG_FORGE_DEFAULT_TARGET
				  "\",\"quant\":\"keep\",\"out\":\"/m/out\"}");
	free(text);
	assert_int_equal(fg_forge_request_from_json(&back, doc, NULL, &err), 0);
	assert_string_equal(back.source, "/m/src");
	assert_null(back.backbone);
	assert_string_equal(back.target, FG_FORGE_DEFAULT_TARGET);
	assert_string_equal(back.quant, "keep");
	assert_string_equal(back.out, "/m/out");
	cJSON_Delete(doc);

	rq.backbone = "/m/bb";
	rq.target = "mlx-lm-0.32";
	rq.quant = "mxfp4";
	rq.out = NULL;
	doc = fg_forge_request_to_json(&rq);
	text = cJSON_PrintUnformatted(doc);
	assert_string_equal(text, "{\"kind\":\"forge\",\"source\":\"/m/src\",\"backbone\":\"/m/bb\","
				  "\"target\":\"mlx-lm-0.32\",\"quant\":\"mxfp4\"}");
	free(text);
	assert_int_equal(fg_forge_request_from_json(&back, doc, NULL, &err), 0);
	assert_string_equal(back.backbone, "/m/bb");
	assert_null(back.out);
	cJSON_Delete(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_every_field),
		cmocka_unit_test(test_target_list),
		cmocka_unit_test(test_invalid_bodies),
		cmocka_unit_test(test_non_string_optionals),
		cmocka_unit_test(test_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
