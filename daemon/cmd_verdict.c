/*
 * cmd_verdict.c: `forged verdict ROWS.json [--json] [--collapse-threshold X]`:
 * the MTP verdict of verification rows (docs/interfaces.md section 3): a
 * forged.verification.v1 document or MTPLX's own verify/tune output.
 *
 * The rules live in forge/verify/verify.c; this file reads the file, prints the
 * result and maps the verdict's severity to the exit code: an error verdict
 * (mtp_acceptance_collapsed: do not ship) exits 1, bad input or usage 2.
 */
#include "daemon/cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forge/core/json.h"
#include "forge/verify/verify.h"

/* Same cap as an API request body: a verification document is a few rows. */
#define VERDICT_JSON_MAX (1u << 20)

static int run_verdict(int argc, char **argv);
static const struct option *verdict_longopts(void);

const struct fg_cmd fg_cmd_verdict = {
	.name = "verdict",
	.summary = "decide the MTP verdict from verification rows",
	.usage = "forged verdict ROWS.json [--json] [--collapse-threshold X]\n\n"
		 "Reads verification rows (tok/s, per-position acceptance and a quality flag per\n"
		 "MTP depth, depth 0 being plain decode): a forged.verification.v1 document, or\n"
		 "what MTPLX writes, as it writes it (verify.json, build_outcome.json,\n"
		 "speed_evidence, mtplx_runtime.json, the mtplx tune payload; recognised by\n"
		 "shape, or named by \"schema\": mtplx.verify, mtplx.build_outcome,\n"
		 "mtplx.speed_evidence, mtplx.runtime, mtplx.tune).  Decides, in MTPLX's order:\n"
		 "mtp_depth_wins (a depth > 0 beats plain decode, quality not failed; the\n"
		 "fastest wins), no_quality_passed_mtp_depth_beat_ar (a faster depth failed\n"
		 "quality), mtp_acceptance_collapsed (a depth's best acceptance is at most X,\n"
		 "default 0.10; MTPLX's own threshold is 0.05; X must lie in (0, 1)),\n"
		 "no_mtp_depth_beat_ar (otherwise), with MTPLX's failure_reasons.  When the\n"
		 "document carries MTPLX's own verdict it is compared and a disagreement shown.\n"
		 "An unknown field is an error naming it.  --json prints one forged.verdict.v1\n"
		 "document.  Exit 1 for mtp_acceptance_collapsed (do not ship), 2 for bad usage\n"
		 "or input.\n",
	.run = run_verdict,
	.options = verdict_longopts,
};

enum { OPT_JSON = 2000, OPT_COLLAPSE_THRESHOLD };

static const struct option verdict_options[] = {
	FG_ARGS_GLOBAL_LONGOPTS,
	{ "json", no_argument, NULL, OPT_JSON },
	{ "collapse-threshold", required_argument, NULL, OPT_COLLAPSE_THRESHOLD },
	{ NULL, 0, NULL, 0 },
};

static const struct option *verdict_longopts(void)
{
	return verdict_options;
}

struct verdict_args {
	double threshold;
	int json;
};

/* X of --collapse-threshold, which must be a number strictly inside (0, 1). */
static int parse_threshold(const char *text, double *out)
{
	char *end = NULL;
	double v;

	errno = 0;
	v = strtod(text, &end);
	if (errno || end == text || *end || !(v > 0.0 && v < 1.0))
		return -1;
	*out = v;
	return 0;
}

static int verdict_option(void *ctx, int val, const char *arg)
{
	struct verdict_args *o = ctx;

	switch (val) {
	case OPT_JSON:
		o->json = 1;
		return 0;
	case OPT_COLLAPSE_THRESHOLD:
		if (parse_threshold(arg, &o->threshold) != 0)
			return fg_args_bad("collapse threshold '%s' is not a number in (0, 1)", arg);
		return 0;
	default:
		return fg_args_bad("unknown option");
	}
}

static int print_json(const struct fg_verify_result *r)
{
	cJSON *o = fg_verify_result_json(r);
	int rc;

	if (!o) {
		fprintf(stderr, "forged: error: out of memory printing the verdict\n");
		return FG_EXIT_INTERNAL;
	}
	rc = fg_cli_print_json(o);
	cJSON_Delete(o);
	return rc;
}

static void print_row(const struct fg_verify_row *row)
{
	static const char *const quality[] = { "-", "failed", "passed" };

	printf("%5d  %9.2f  %8.3fx  %-7s ", row->depth, row->tok_s, row->multiplier, quality[row->quality + 1]);
	if (row->n_accept == 0)
		printf(" -");
	for (size_t k = 0; k < row->n_accept; k++)
		printf(" %.3f", row->accept[k]);
	printf("\n");
}

/* "label: 1, 2, 3" for the depths of rows[idx[0..n)], or nothing when n is 0. */
static void print_depths(const char *label, const struct fg_verify_result *r, const int *idx, size_t n)
{
	if (!n)
		return;
	printf("%s:", label);
	for (size_t i = 0; i < n; i++)
		printf("%s %d", i ? "," : "", r->rows[idx[i]].depth);
	printf("\n");
}

/* MTPLX's own verdict, when the document carried one, and whether it agrees. */
static void print_mtplx(const struct fg_verify_result *r)
{
	if (!r->has_mtplx)
		return;
	printf("MTPLX's own verdict (%s): %s", r->mtplx_verdict_at ? r->mtplx_verdict_at : "",
	       r->has_mtplx_verdict ? r->mtplx_verdict : "(none)");
	if (r->has_mtplx_reasons) {
		printf(" [");
		for (size_t i = 0; i < r->n_mtplx_reasons; i++)
			printf("%s%s", i ? ", " : "", r->mtplx_reasons[i]);
		printf("]");
	}
	if (r->agrees)
		printf(": agrees\n");
	else
		printf(": DISAGREES with %s at collapse threshold %g\n", r->verdict->row->name, r->collapse_threshold);
}

static void print_human(const char *path, const struct fg_verify_result *r)
{
	size_t n_rules = 0;

	while (fg_verify_verdict_at(n_rules))
		n_rules++;
	printf("%s: %s (%s%s)\n", path, r->verdict->row->name, fg_severity_name(r->verdict->row->severity),
	       r->verdict->row->severity == FG_SEV_ERROR ? ": do not ship" : "");
	printf("source: %s\n", fg_verify_format_name(r->format));
	if (r->runtime[0] || r->hardware[0])
		printf("runtime %s on %s\n", r->runtime[0] ? r->runtime : "(unnamed)",
		       r->hardware[0] ? r->hardware : "(unnamed hardware)");
	if (r->best_depth >= 0)
		printf("best depth: %d\n", r->best_depth);
	else
		printf("best depth: none\n");
	printf("depth      tok/s   speed-up  quality  acceptance\n");
	for (size_t i = 0; i < r->n_rows; i++)
		print_row(&r->rows[i]);
	if (r->best_accept_depth >= 0)
		printf("best first-position acceptance: %.3f (depth %d), collapse threshold %g\n",
		       r->best_first_acceptance, r->best_accept_depth, r->collapse_threshold);
	else
		printf("best first-position acceptance: none reported, collapse threshold %g\n",
		       r->collapse_threshold);
	print_depths("acceptance collapsed at depth", r, r->collapsed, r->n_collapsed);
	print_depths("quality rejected at depth", r, r->rejected, r->n_rejected);
	printf("failure reasons:");
	for (size_t i = 0; i < r->n_reasons; i++)
		printf("%s %s", i ? "," : "", r->reasons[i]);
	printf("%s\n", r->n_reasons ? "" : " none");
	printf("decided by rule %d of %zu: %s\n", r->verdict->rule, n_rules, r->verdict->row->meaning);
	print_mtplx(r);
	if (r->n_unused) {
		printf("MTPLX fields kept, not used:");
		for (size_t i = 0; i < r->n_unused; i++)
			printf("%s %s%s%s", i ? "," : "", r->unused[i].where, r->unused[i].where[0] ? "." : "",
			       r->unused[i].name);
		printf("\n");
	}
	for (size_t i = 0; i < r->n_skipped && i < FG_VERIFY_MAX_SKIPPED; i++)
		printf("skipped, as MTPLX skips it: %s\n", r->skipped[i]);
	if (r->n_skipped > FG_VERIFY_MAX_SKIPPED)
		printf("skipped: %zu more rows\n", r->n_skipped - FG_VERIFY_MAX_SKIPPED);
}

static int run_verdict(int argc, char **argv)
{
	struct fg_verify_input in = { .rows = NULL };
	struct fg_verify_result r;
	struct fg_err err = { 0 };
	struct verdict_args o = { FG_VERIFY_COLLAPSE_DEFAULT, 0 };
	double threshold;
	const char *path;
	cJSON *doc = NULL;
	struct fg_args a;
	int json, rc;

	rc = fg_cli_parse(&fg_cmd_verdict, &a, argc, argv, FG_ARGS_GLOBAL_SHORTOPTS, verdict_options, verdict_option,
			  &o, 1, 1, "ROWS.json");
	if (rc != FG_CLI_RUN)
		return rc;
	path = a.pos[0];
	threshold = o.threshold;
	json = o.json;

	rc = fg_json_load(&doc, path, VERDICT_JSON_MAX, &err);
	if (rc == 0 && (rc = fg_verify_parse(&in, doc, &err)) != 0)
		fg_err_prefix(&err, rc, "%s: ", path);
	if (rc == 0)
		rc = fg_verify_decide(&in, threshold, &r, &err);
	if (rc) {
		rc = fg_cli_fail(&err);
		goto out;
	}
	if (json) {
		rc = print_json(&r);
	} else {
		print_human(path, &r);
		rc = FG_EXIT_OK;
	}
	if (fflush(stdout) != 0) {
		fprintf(stderr, "forged: error: writing output failed\n");
		rc = FG_EXIT_INTERNAL;
	}
	if (rc == FG_EXIT_OK && r.verdict->row->severity == FG_SEV_ERROR)
		rc = FG_EXIT_VERDICT;
out:
	fg_verify_release(&in);
	cJSON_Delete(doc);
	return rc;
}
