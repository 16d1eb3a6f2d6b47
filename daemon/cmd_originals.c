/*
 * cmd_originals.c: `forged verify-originals ARTIFACT`: check the originals
 * an artifact's forged.json records against the bytes they name
 * (fg_provenance_verify_originals): a reference's source file and offsets,
 * a copy's zstd blob.
 */
#include "daemon/cli.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forge/artifact/provenance.h"

static int run_verify_originals(int argc, char **argv);
static const struct option *originals_longopts(void);

const struct fg_cmd fg_cmd_verify_originals = {
	.name = "verify-originals",
	.summary = "check an artifact's recorded originals against the source bytes",
	.usage = "forged verify-originals ARTIFACT [--source SOURCE] [--json]\n\n"
		 "Reads ARTIFACT/forged.json and checks every original it records: a reference\n"
		 "(the source file, its SHA-256, offset and length) against the source file,\n"
		 "read whole and hashed, its header placing the tensor at that offset; a zstd\n"
		 "copy by decompressing it to the recorded length and SHA-256.  SOURCE is the\n"
		 "folder (or single file) forged from, by default the provenance's source path:\n"
		 "name it when the source has moved.  --json prints one forged.originals-check.v1\n"
		 "document (artifact, source, ok, checked, failed, originals [{tensor, form, ok,\n"
		 "detail}]).  Exit 0 all check out, 1 some do not, 2 bad usage or no readable\n"
		 "forged.json.\n",
	.run = run_verify_originals,
	.options = originals_longopts,
};

enum { OPT_SOURCE = 2000, OPT_JSON };

static const struct option originals_options[] = {
	FG_ARGS_GLOBAL_LONGOPTS,
	{ "source", required_argument, NULL, OPT_SOURCE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ NULL, 0, NULL, 0 },
};

static const struct option *originals_longopts(void)
{
	return originals_options;
}

struct originals_args {
	const char *source;
	int json;
};

static int originals_option(void *ctx, int val, const char *arg)
{
	struct originals_args *o = ctx;

	switch (val) {
	case OPT_SOURCE:
		o->source = arg;
		return 0;
	case OPT_JSON:
		o->json = 1;
		return 0;
	default:
		return fg_args_bad("unknown option");
	}
}

static int run_verify_originals(int argc, char **argv)
{
	struct originals_args o = { NULL, 0 };
	struct fg_err err = { 0 };
	cJSON *report = NULL;
	const cJSON *row;
	size_t failed = 0;
	const char *artifact;
	struct fg_args a;
	int json, rc;

	rc = fg_cli_parse(&fg_cmd_verify_originals, &a, argc, argv, FG_ARGS_GLOBAL_SHORTOPTS, originals_options,
			  originals_option, &o, 1, 1, "ARTIFACT");
	if (rc != FG_CLI_RUN)
		return rc;
	artifact = a.pos[0];
	json = o.json;
	rc = fg_provenance_verify_originals(artifact, o.source, &report, &failed, &err);
	if (rc)
		return fg_cli_fail(&err);
	if (json) {
		rc = fg_cli_print_json(report);
		if (rc) {
			cJSON_Delete(report);
			return rc;
		}
	} else {
		cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(report, "originals"))
			printf("%s  %-9s %s: %s\n", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "ok")) ? "ok  " : "FAIL",
			       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "form")),
			       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "tensor")),
			       cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(row, "detail")));
		printf("%s: %.0f originals checked, %zu failed\n", artifact,
		       cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(report, "checked")), failed);
	}
	cJSON_Delete(report);
	return failed ? FG_EXIT_VERDICT : FG_EXIT_OK;
}
