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
};

static int run_verify_originals(int argc, char **argv)
{
	const char *artifact = NULL, *source = NULL;
	struct fg_err err = { 0 };
	cJSON *report = NULL;
	const cJSON *row;
	size_t failed = 0;
	int json = 0, rc;

	for (int i = 1; i < argc; i++) {
		if (fg_cli_is_help(argv[i])) {
			fputs(fg_cmd_verify_originals.usage, stdout);
			return FG_EXIT_OK;
		}
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (strcmp(argv[i], "--source") == 0 && i + 1 < argc)
			source = argv[++i];
		else if (strncmp(argv[i], "--source=", 9) == 0)
			source = argv[i] + 9;
		else if (argv[i][0] == '-' && argv[i][1])
			return fg_cli_usage_error(&fg_cmd_verify_originals, "unknown option '%s'", argv[i]);
		else if (artifact)
			return fg_cli_usage_error(&fg_cmd_verify_originals, "one ARTIFACT only");
		else
			artifact = argv[i];
	}
	if (!artifact)
		return fg_cli_usage_error(&fg_cmd_verify_originals, "missing ARTIFACT");
	rc = fg_provenance_verify_originals(artifact, source, &report, &failed, &err);
	if (rc)
		return fg_cli_fail(&err);
	if (json) {
		char *text = cJSON_Print(report);

		if (text)
			puts(text);
		free(text);
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
