/*
 * cmd_forge.c: `forged forge SOURCE --out DIR [...]`: extract the MTP head,
 * fix its convention once, write the artifact atomically, inspect it.
 */
#include "daemon/cli.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/validate.h"
#include "forge/artifact/forge.h"

static int run_forge(int argc, char **argv);

const struct fg_cmd fg_cmd_forge = {
	.name = "forge",
	.summary = "extract an MTP sidecar in the target's convention into a new artifact",
	.usage = "forged forge SOURCE --out DIR [--backbone SOURCE] [--target RUNTIME]\n"
		 "             [--quant keep|match|affine:BITS:GROUP|mxfp4] [--json] [--force]\n\n"
		 "Takes the MTP head of SOURCE (a raw Hugging Face release or an MLX artifact\n"
		 "with embedded head keys) and writes DIR: the backbone (default SOURCE) with\n"
		 "head tensors removed from its shards, mtp.safetensors in the convention,\n"
		 "names and precision TARGET loads (default " FG_FORGE_DEFAULT_TARGET ", runtimes below),\n"
		 "a patched config.json and forged.json provenance.  DIR appears only when\n"
		 "complete and clean for TARGET; --force replaces an existing DIR.\n"
		 "With --json a refusal prints the document with its refusal {code, severity,\n"
		 "detail}.  Exit 0 written, 1 refused by a verdict, 2 bad usage or input,\n"
		 "3 a failure of forged's own state (the pull cache) or an internal error.\n",
	.run = run_forge,
};

/*
 * Progress on a TTY.  FORGED_FAULT_STAGE=STAGE kills the process with SIGKILL
 * when STAGE begins: the crash tests use it to prove that an interrupted forge
 * leaves nothing at the destination.
 */
static int on_progress(void *ctx, const char *stage, double fraction)
{
	const char *fault = getenv("FORGED_FAULT_STAGE");

	(void)ctx;
	if (fault && strcmp(fault, stage) == 0)
		raise(SIGKILL);
	if (isatty(STDERR_FILENO))
		fprintf(stderr, "\rforge: %-10s %3d%%%s", stage, (int)(fraction * 100.0),
			fraction >= 1.0 ? "\n" : "");
	return 0;
}

/* The value of --name VALUE or --name=VALUE at argv[*i], or NULL when argv[*i] is not --name. */
static const char *option_value(int argc, char **argv, int *i, const char *name, int *missing)
{
	size_t n = strlen(name);

	if (strncmp(argv[*i], name, n) != 0)
		return NULL;
	if (argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (argv[*i][n] != '\0')
		return NULL;
	if (*i + 1 >= argc) {
		*missing = 1;
		return NULL;
	}
	return argv[++*i];
}

static int run_forge(int argc, char **argv)
{
	struct fg_forge_opts o = { .version = FG_VERSION };
	struct fg_pull_opts pull;
	char cache[PATH_MAX];
	struct fg_forge_result res;
	struct fg_err err = { 0 };
	int json = 0, rc;

	for (int i = 1; i < argc; i++) {
		static const char *const names[] = { "--out", "--backbone", "--target", "--quant" };
		const char **slots[] = { &o.out, &o.backbone, &o.target, &o.quant };
		int matched = 0, missing = 0;

		if (fg_cli_is_help(argv[i])) {
			fputs(fg_cmd_forge.usage, stdout);
			fg_cli_print_runtimes(stdout);
			return FG_EXIT_OK;
		}
		for (size_t k = 0; k < 4 && !matched; k++) {
			const char *v = option_value(argc, argv, &i, names[k], &missing);

			if (missing)
				return fg_cli_usage_error(&fg_cmd_forge, "%s needs a value", names[k]);
			if (v) {
				*slots[k] = v;
				matched = 1;
			}
		}
		if (matched)
			continue;
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (strcmp(argv[i], "--force") == 0)
			o.force = 1;
		else if (argv[i][0] == '-' && argv[i][1])
			return fg_cli_usage_error(&fg_cmd_forge, "unknown option '%s'", argv[i]);
		else if (o.source)
			return fg_cli_usage_error(&fg_cmd_forge, "one SOURCE only (got '%s' and '%s')", o.source, argv[i]);
		else
			o.source = argv[i];
	}
	if (!o.source)
		return fg_cli_usage_error(&fg_cmd_forge, "missing SOURCE");
	if (!o.out)
		return fg_cli_usage_error(&fg_cmd_forge, "missing --out DIR");
	o.progress = on_progress;
	fg_cli_pull_opts(&pull, cache, sizeof(cache));
	o.pull = &pull;
	rc = fg_forge_run(&o, &res, &err);
	if (rc == FG_EUSAGE) {
		fg_forge_result_release(&res);
		return fg_cli_usage_error(&fg_cmd_forge, "%s", err.msg);
	}
	if (rc && rc != FG_EVERDICT) {
		fg_forge_result_release(&res);
		return fg_cli_fail(&err);
	}
	if (rc) {
		const struct fg_verdict_row *row = fg_verdict_row(fg_err_refusal(&err));

		fprintf(stderr, "forged: refused: %s%s%s\n", row ? row->name : "", row ? ": " : "", err.msg);
	}
	if (json) {
		cJSON *doc = fg_forge_result_json(&res);
		char *text;

		/* File and tensor names are any bytes: the document is UTF-8 (U+FFFD for the rest). */
		if (doc)
			fg_json_utf8_fix(doc);
		text = doc ? cJSON_Print(doc) : NULL;

		if (text)
			puts(text);
		free(text);
		cJSON_Delete(doc);
	} else if (!rc) {
		printf("%s\n  fingerprint %s\n  target %s, policy %s, %zu head tensors, %zu removed from the backbone, "
		       "%zu norms shifted\n", res.artifact, res.fingerprint, res.target, res.policy, res.head_tensors,
		       res.n_removed, res.n_shifted);
	}
	fg_forge_result_release(&res);
	return rc ? FG_EXIT_VERDICT : FG_EXIT_OK;
}
