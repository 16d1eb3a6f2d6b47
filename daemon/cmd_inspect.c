/*
 * cmd_inspect.c: `forged inspect SOURCE [--json] [--runtime ID]...`: the
 * inspect report as a five-second table for people, or the
 * forged.inspect.v1 document.  Exit 1 when a verdict has error severity.
 */
#include "daemon/cli.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/validate.h"
#include "forge/model/inspect.h"

#define MAX_RUNTIME_ARGS 16

static int run_inspect(int argc, char **argv);
static const struct option *inspect_longopts(void);

const struct fg_cmd fg_cmd_inspect = {
	.name = "inspect",
	.summary = "decide norm conventions, predict every runtime, give verdicts",
	.usage = "forged inspect SOURCE [--json] [--runtime ID]... [--follow-symlinks]\n\n"
		 "SOURCE is a checkpoint folder or one .safetensors file.  Reads the headers\n"
		 "and the norm tensors only.  Decides each tensor set's convention once\n"
		 "(trunk, embedded head, sidecar head), simulates each runtime's loader and\n"
		 "lists verdicts.  --runtime ID (repeatable) sets the targeted runtimes\n"
		 "(listed below); by default the layout's own.  Files inside the folder are\n"
		 "opened without following symbolic links; --follow-symlinks follows them (a\n"
		 "Hugging Face cache snapshot links into ../../blobs).  Exit 0 ok, 1 error verdicts\n"
		 "(do not ship), 2 unreadable or malformed input, 3 a failure of forged's own\n"
		 "state (the pull cache) or an internal error.\n",
	.run = run_inspect,
	.options = inspect_longopts,
	.help_extra = fg_cli_print_runtimes,
};

enum { OPT_JSON = 2000, OPT_RUNTIME, OPT_FOLLOW_SYMLINKS };

static const struct option inspect_options[] = {
	FG_ARGS_GLOBAL_LONGOPTS,
	{ "json", no_argument, NULL, OPT_JSON },
	{ "runtime", required_argument, NULL, OPT_RUNTIME },
	{ "follow-symlinks", no_argument, NULL, OPT_FOLLOW_SYMLINKS },
	{ NULL, 0, NULL, 0 },
};

static const struct option *inspect_longopts(void)
{
	return inspect_options;
}

struct inspect_args {
	const char *runtimes[MAX_RUNTIME_ARGS];
	size_t n_runtimes;
	int json, follow;
};

static int inspect_option(void *ctx, int val, const char *arg)
{
	struct inspect_args *o = ctx;

	switch (val) {
	case OPT_JSON:
		o->json = 1;
		return 0;
	case OPT_FOLLOW_SYMLINKS:
		o->follow = 1;
		return 0;
	case OPT_RUNTIME:
		if (o->n_runtimes == MAX_RUNTIME_ARGS)
			return fg_args_bad("more than %d --runtime options", MAX_RUNTIME_ARGS);
		o->runtimes[o->n_runtimes++] = arg;
		return fg_args_check_runtime("--runtime", arg);
	default:
		return fg_args_bad("unknown option");
	}
}

struct palette {
	const char *error, *warning, *info, *bold, *reset;
};

static struct palette palette_for(FILE *out)
{
	static const struct palette plain = { "", "", "", "", "" };
	static const struct palette ansi = { "\033[31m", "\033[33m", "\033[36m", "\033[1m", "\033[0m" };

	return fg_cli_color(out) ? ansi : plain;
}

static void print_figure(const char *label, int has, double v)
{
	if (has)
		printf("  %s %.4f", label, v);
	else
		printf("  %s -", label);
}

static void print_human(const struct fg_inspect *r)
{
	struct palette p = palette_for(stdout);
	const struct fg_tset *head = r->primary_head >= 0 ? &r->sets[r->primary_head].set : NULL;
	size_t errors = 0;

	printf("%s%s%s  family %s, %s norms, %s layout%s\n", p.bold, r->ckpt->source, p.reset,
	       r->family->id, fg_family_style_name(r->family->norm_style), r->layout, r->moe ? ", MoE" : "");
	printf("mtp: %s", r->location);
	if (head)
		printf(", %s, %zu tensors%s", fg_name_scheme_name(r->scheme) ? fg_name_scheme_name(r->scheme) : "sidecar",
		       head->n_tensors, head->n_quantized ? ", quantized" : "");
	if (r->ckpt->sidecar >= 0)
		printf(", sidecar %s", r->ckpt->files[r->ckpt->sidecar].name);
	if (r->declared_mtp >= 0)
		printf(", config declares %d", r->declared_mtp);
	printf("\n\nsets\n");
	for (size_t i = 0; i < r->n_sets; i++) {
		const struct fg_decision *d = &r->sets[i].decision;

		printf("  %-14s %-15s %6zu tensors %4zu norms", r->sets[i].set.name, fg_conv_name(d->conv),
		       r->sets[i].set.n_tensors, r->sets[i].set.n_norms);
		print_figure("qk_max", d->has_qk, d->qk_max);
		print_figure("low_min", d->has_low, d->low_min);
		if (i == 0 && d->probe)
			printf("  probe %s %.4f", d->probe->t->name, d->probe->st.mean);
		printf("\n");
	}
	printf("\nruntimes        trunk           head            outcome   probe after  shift          breakage\n");
	for (size_t i = 0; i < r->n_runtimes; i++) {
		const struct fg_runtime_result *rt = &r->runtimes[i];
		const char *col = rt->outcome == FG_OUTCOME_OK ? "" :
				  rt->outcome == FG_OUTCOME_DEGRADED ? p.warning : p.error;

		printf("%c %-13s %-15s %-15s %s%-9s%s", rt->targeted ? '*' : ' ', rt->rt->id,
		       fg_runtime_trunk_name(rt->trunk), fg_runtime_head_name(rt->head), col,
		       fg_runtime_outcome_name(rt->outcome), p.reset);
		if (rt->has_probe)
			printf(" %11.4f", rt->trunk_probe_after);
		else
			printf(" %11s", "-");
		printf("  %-13s", rt->trunk_shift ? fg_runtime_shift_reason_name(rt->shift_reason) : "-");
		if (rt->load_cause != FG_LOAD_OK)
			printf("  load error: %s", fg_runtime_load_cause_name(rt->load_cause));
		else if (rt->breakage)
			for (unsigned b = 0; b < FG_BREAK_COUNT; b++)
				if (rt->breakage & (1u << b))
					printf("  %s", fg_runtime_breakage_name(1u << b));
		if (!rt->modelled)
			printf("  (not modelled)");
		printf("\n");
	}
	printf("  (* targeted; \"not modelled\": the row's sources do not cover this case, docs/runtimes.md)\n\nverdicts\n");
	if (!r->verdicts.n)
		printf("  none\n");
	for (size_t i = 0; i < r->verdicts.n; i++) {
		const struct fg_verdict *v = &r->verdicts.v[i];
		enum fg_severity s = v->row->severity;
		const char *col = s == FG_SEV_ERROR ? p.error : s == FG_SEV_WARNING ? p.warning : p.info;

		errors += s == FG_SEV_ERROR;
		printf("  %s%-7s %s%s", col, fg_severity_name(s), v->row->name, p.reset);
		if (v->set[0])
			printf(" [%s]", v->set);
		printf(": %s", v->detail);
		for (size_t k = 0; k < v->n_runtimes; k++)
			printf("%s%s", k ? ", " : " (", v->runtimes[k]);
		printf("%s\n", v->n_runtimes ? ")" : "");
	}
	if (r->ok)
		printf("\n%sok%s: no error verdict for the targeted runtimes\n", p.bold, p.reset);
	else
		printf("\n%sNOT OK%s: %zu error verdict(s): do not ship\n", p.error, p.reset, errors);
}

static int run_inspect(int argc, char **argv)
{
	struct inspect_args o;
	struct fg_pull_opts pull;
	char cache[PATH_MAX];
	struct fg_inspect *r = NULL;
	struct fg_err err = { 0 };
	const char *source;
	struct fg_inspect_opts io;
	struct fg_args a;
	int json, rc;

	memset(&o, 0, sizeof(o));
	rc = fg_cli_parse(&fg_cmd_inspect, &a, argc, argv, FG_ARGS_GLOBAL_SHORTOPTS, inspect_options, inspect_option,
			  &o, 1, 1, "SOURCE");
	if (rc != FG_CLI_RUN)
		return rc;
	source = a.pos[0];
	json = o.json;
	fg_cli_pull_opts(&pull, cache, sizeof(cache));
	memset(&io, 0, sizeof(io));
	io.pull = &pull;
	io.links.follow = o.follow; /* the caller's own files: a link may point anywhere */
	rc = fg_inspect_run_with(&r, source, o.runtimes, o.n_runtimes, &io, &err);
	if (pull.progress && fg_pull_is_url(source))
		fputc('\n', stderr);
	if (rc == FG_EUSAGE)
		return fg_cli_usage_error(&fg_cmd_inspect, "%s", err.msg);
	if (rc)
		return fg_cli_fail(&err);
	if (json) {
		cJSON *doc = fg_inspect_json(r);

		/* File and tensor names are any bytes: the document is UTF-8 (U+FFFD for the rest). */
		if (doc)
			fg_json_utf8_fix(doc);
		rc = doc ? fg_cli_print_json(doc) : FG_EXIT_INTERNAL;
		if (!doc)
			fprintf(stderr, "forged: error: out of memory printing the report\n");
		cJSON_Delete(doc);
		if (rc) {
			fg_inspect_free(r);
			return rc;
		}
	} else {
		print_human(r);
	}
	rc = r->ok ? FG_EXIT_OK : FG_EXIT_VERDICT;
	if (FG_CLI_FREE_AT_EXIT)
		fg_inspect_free(r);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "forged: error: writing output failed\n");
		return FG_EXIT_INTERNAL;
	}
	return rc;
}
