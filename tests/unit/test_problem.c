/*
 * test_problem.c: the HTTP answer to an error is chosen by its code alone
 * (api/server.c fg_problem_from_err): forged's own state is 503 with
 * Retry-After, its full disk 507, never 422; the client's input 422; a
 * forbidden path or host 403.  The message cannot change the status: the
 * same code with any text gets the same answer.  Every type answered is one
 * of docs/openapi.json's problem types.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

static struct fg_req req = { .url = "/v1/inspections", .request_id = "test-1" };

/* The answer to err: status, retry_after and the problem type, in *type. */
static unsigned answer(int code, const char *msg, unsigned *retry_after, char *type, size_t cap)
{
	struct fg_err err = { 0 };
	struct fg_resp resp;
	cJSON *doc;
	unsigned status;

	memset(&resp, 0, sizeof(resp));
	fg_err_set(&err, code, "%s", msg);
	fg_problem_from_err(&resp, &req, &err);
	assert_non_null(resp.body);
	assert_string_equal(resp.content_type, "application/problem+json");
	doc = cJSON_Parse(resp.body);
	assert_non_null(doc);
	assert_int_equal((unsigned)cJSON_GetObjectItem(doc, "status")->valuedouble, resp.status);
	assert_string_equal(cJSON_GetObjectItem(doc, "detail")->valuestring, msg);
	snprintf(type, cap, "%s", cJSON_GetObjectItem(doc, "type")->valuestring);
	cJSON_Delete(doc);
	free(resp.body);
	*retry_after = resp.retry_after;
	status = resp.status;
	/* Nothing travels through the Location field. */
	assert_string_equal(resp.location, "");
	return status;
}

static bool documented(const char *type)
{
	cJSON *doc = cJSON_ParseWithLength(fg_openapi_json, fg_openapi_json_len);
	const cJSON *it, *types;
	bool found = false;

	assert_non_null(doc);
	types = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(
						cJSON_GetObjectItem(doc, "components"), "schemas"), "Problem"),
					"properties"), "type");
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(types, "enum"))
		found |= strcmp(it->valuestring, type) == 0;
	cJSON_Delete(doc);
	return found;
}

static void test_status_by_code(void **state)
{
	static const struct {
		int code;
		unsigned status, retry_after;
		const char *type;
	} rows[] = {
		{ FG_ESTATE, 503, FG_API_RETRY_AFTER_S, "urn:forged:problem:store-unavailable" },
		{ FG_ENOSPC, 507, 0, "urn:forged:problem:insufficient-storage" },
		{ FG_EINPUT, 422, 0, "urn:forged:problem:unprocessable" },
		{ FG_EUSAGE, 422, 0, "urn:forged:problem:unprocessable" },
		{ FG_EFORBIDDEN, 403, 0, "urn:forged:problem:forbidden" },
		{ FG_ENOTFOUND, 404, 0, "urn:forged:problem:not-found" },
		{ FG_ECONFLICT, 422, 0, "urn:forged:problem:idempotency-key-reused" },
		{ FG_EBUSY, 503, 0, "urn:forged:problem:queue-full" },
		{ FG_ENOMEM, 500, 0, "urn:forged:problem:internal" },
		{ FG_EINTERNAL, 500, 0, "urn:forged:problem:internal" },
	};
	/* Texts that once steered the status (allow_hosts, URL) and a full disk's words. */
	static const char *const texts[] = {
		"storing artifact 'x': database or disk is full",
		"source 'http://h/': host 'h' is not in allow_hosts",
		"URL sources are not supported by this server",
		"database is locked",
	};
	char type[128];
	unsigned retry;

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
			unsigned status = answer(rows[i].code, texts[t], &retry, type, sizeof(type));

			if (status != rows[i].status || retry != rows[i].retry_after ||
			    strcmp(type, rows[i].type) != 0)
				fail_msg("code %d (\"%s\"): %u %s retry %u, want %u %s retry %u", rows[i].code, texts[t],
					 status, type, retry, rows[i].status, rows[i].type, rows[i].retry_after);
		}
		if (!documented(rows[i].type))
			fail_msg("%s is not a problem type of docs/openapi.json", rows[i].type);
	}
	/* A failure of forged's own state is never the client's fault. */
	assert_int_not_equal(answer(FG_ESTATE, "x", &retry, type, sizeof(type)), 422);
	assert_int_not_equal(answer(FG_ENOSPC, "x", &retry, type, sizeof(type)), 422);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_by_code),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
