/*
 * cmd_forge.c: `forged forge SOURCE --out DIR [...]`: extract the MTP head,
 * fix its convention once, write the artifact atomically, inspect it.
 */
#include "daemon/cli.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/validate.h"
#include "daemon/client.h"
#include "daemon/fault.h"
#include "forge/artifact/forge.h"

static int run_forge(int argc, char **argv);
static const struct option *forge_longopts(void);

const struct fg_cmd fg_cmd_forge = {
	.name = "forge",
	.summary = "extract an MTP head where and how the targets load it into a new artifact",
	.usage = "forged forge SOURCE --out DIR [--backbone SOURCE] [--target RUNTIME[,RUNTIME...]]\n"
		 "             [--quant keep|match|affine:BITS:GROUP|mxfp4] [--allow-requantize]\n"
		 "             [--keep-originals copy|auto] [--json] [--force]\n\n"
		 "Takes the MTP head of SOURCE (a raw Hugging Face release or an MLX artifact\n"
		 "with embedded head keys) and writes DIR: the backbone (default SOURCE) with\n"
		 "head tensors removed from its shards, and the head where, and in the\n"
		 "convention, names, expert layout and precision, every TARGET loads it: a\n"
		 "sidecar (mtp.safetensors for MTPLX, mtp/weights.safetensors for vllm-mlx)\n"
		 "or a shard of its own in the index (vLLM, SGLang, Ollama, llama.cpp), with\n"
		 "the declarations they read, a patched config.json and forged.json\n"
		 "provenance.  --target takes a comma-separated list (repeatable; default\n"
		 FG_FORGE_DEFAULT_TARGET ", runtimes below): one layout serving every target is\n"
		 "chosen, or the forge is refused with layout_conflict naming the targets\n"
		 "and why.  A quantized head is read in its format (GPTQ, AWQ,\n"
		 "compressed-tensors, FP8, NVFP4, MLX) and kept in an MLX format every target\n"
		 "reads, else dequantized to BF16; a format forged cannot read is refused by\n"
		 "name.  Quantizing such a head again (--quant other than keep) needs\n"
		 "--allow-requantize (recorded; a warning verdict).  DIR appears only when\n"
		 "complete and clean for every target; --force replaces an existing DIR.\n"
		 "Originals of changed tensors are recorded by reference to a local SOURCE\n"
		 "(file, SHA-256, offset, length; 'forged verify-originals DIR' checks them)\n"
		 "and copied (zstd) for a remote one, or for any with --keep-originals copy.\n"
		 "With --json a refusal prints the document with its refusal {code, severity,\n"
		 "detail}.  Exit 0 written, 1 refused by a verdict, 2 bad usage or input,\n"
		 "3 a failure of forged's own state (the pull cache) or an internal error.\n",
	.run = run_forge,
	.options = forge_longopts,
	.help_extra = fg_cli_print_runtimes,
};

/*
 * Progress people can watch: on a TTY one live line (redrawn at most ten
 * times a second), off one (a CI log) a line every FORGED_PROGRESS_SECONDS
 * (default 5; none for a forge that ends sooner), each with the stage, its
 * bytes done of total, the rate and the ETA.  Each stage is a kill point
 * (fault.h: FORGED_FAULT, FORGED_FAULT_STAGE): the crash tests use them to
 * prove that an interrupted forge leaves nothing at the destination.
 * FORGED_TEST_STAGE_DELAY=STAGE:MS sleeps MS milliseconds when STAGE begins
 * (tests only: two forges racing for one destination).
 */
struct cli_progress {
	int tty;
	double interval;        /* off a TTY: seconds between lines */
	double last;            /* when a line was last printed */
	char stage[16];         /* the stage of the last report */
	int drawn;              /* a TTY line is on the screen */
};

static void progress_text(char *buf, size_t len, const struct fg_forge_progress *p)
{
	fg_client_progress_text(buf, len, p->stage, p->fraction, (double)p->bytes_done, (double)p->bytes_total,
				p->rate, p->eta_s);
}

static void stage_hooks(const char *stage)
{
	const char *delay = getenv("FORGED_TEST_STAGE_DELAY");
	size_t n = strlen(stage);

	fg_fault_point(stage);
	if (delay && strncmp(delay, stage, n) == 0 && delay[n] == ':') {
		long ms = strtol(delay + n + 1, NULL, 10);

		if (ms > 0 && ms < 600000)
			nanosleep(&(struct timespec){ ms / 1000, (ms % 1000) * 1000000 }, NULL);
	}
}

static int on_progress(void *ctx, const struct fg_forge_progress *p)
{
	struct cli_progress *c = ctx;
	double now = fg_client_now();
	char text[160];
	int new_stage = strcmp(c->stage, p->stage) != 0;

	if (new_stage) {
		snprintf(c->stage, sizeof(c->stage), "%s", p->stage);
		stage_hooks(p->stage);
	}
	if (c->tty) {
		if (!new_stage && p->fraction < 1.0 && now - c->last < 0.1)
			return 0;
		progress_text(text, sizeof(text), p);
		fprintf(stderr, "\rforge: %s\033[K%s", text, p->fraction >= 1.0 ? "\n" : "");
		c->drawn = p->fraction < 1.0;
		c->last = now;
	} else if (now - c->last >= c->interval && p->fraction < 1.0) {
		progress_text(text, sizeof(text), p);
		fprintf(stderr, "forge: %s\n", text);
		c->last = now;
	}
	return 0;
}

static void progress_init(struct cli_progress *c)
{
	const char *v = getenv("FORGED_PROGRESS_SECONDS");
	char *end = NULL;
	double s = v && *v ? strtod(v, &end) : 0.0;

	memset(c, 0, sizeof(*c));
	c->tty = isatty(STDERR_FILENO);
	c->interval = end && !*end && s > 0.0 ? s : 5.0;
	c->last = fg_client_now(); /* the first line off a TTY comes one interval in */
}

enum { OPT_OUT = 2000, OPT_BACKBONE, OPT_TARGET, OPT_QUANT, OPT_KEEP_ORIGINALS, OPT_JSON, OPT_FORCE, OPT_ALLOW_REQUANTIZE };

static const struct option forge_options[] = {
	FG_ARGS_GLOBAL_LONGOPTS,
	{ "out", required_argument, NULL, OPT_OUT },
	{ "backbone", required_argument, NULL, OPT_BACKBONE },
	{ "target", required_argument, NULL, OPT_TARGET },
	{ "quant", required_argument, NULL, OPT_QUANT },
	{ "keep-originals", required_argument, NULL, OPT_KEEP_ORIGINALS },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "force", no_argument, NULL, OPT_FORCE },
	{ "allow-requantize", no_argument, NULL, OPT_ALLOW_REQUANTIZE },
	{ NULL, 0, NULL, 0 },
};

static const struct option *forge_longopts(void)
{
	return forge_options;
}

struct forge_args {
	struct fg_forge_opts *o;
	int json;
	char targets[FG_FORGE_TARGET_MAX]; /* --target values, joined: a,b and a then b are one list */
};

static int forge_option(void *ctx, int val, const char *arg)
{
	struct forge_args *f = ctx;

	switch (val) {
	case OPT_OUT:
		f->o->out = arg;
		return 0;
	case OPT_BACKBONE:
		f->o->backbone = arg;
		return 0;
	case OPT_TARGET:
		if (fg_args_check_targets("--target", arg) || fg_args_add_target(f->targets, sizeof(f->targets), arg))
			return -1;
		f->o->target = f->targets;
		return 0;
	case OPT_QUANT:
		f->o->quant = arg;
		return fg_args_check_policy("--quant", arg);
	case OPT_KEEP_ORIGINALS: {
		static const char *const modes[] = { "auto", "copy", NULL };
		int k = fg_args_pick("--keep-originals", arg, modes);

		if (k < 0)
			return k;
		f->o->originals = k == 1 ? FG_ORIGINALS_COPY : FG_ORIGINALS_AUTO;
		return 0;
	}
	case OPT_JSON:
		f->json = 1;
		return 0;
	case OPT_FORCE:
		f->o->force = 1;
		return 0;
	case OPT_ALLOW_REQUANTIZE:
		f->o->allow_requantize = 1;
		return 0;
	default:
		return fg_args_bad("unknown option");
	}
}

static int run_forge(int argc, char **argv)
{
	struct fg_forge_opts o = { .version = FG_VERSION };
	struct fg_pull_opts pull;
	char cache[PATH_MAX];
	struct fg_forge_result res;
	struct cli_progress progress;
	struct fg_err err = { 0 };
	struct forge_args f = { .o = &o };
	struct fg_args a;
	int json, rc;

	rc = fg_cli_parse(&fg_cmd_forge, &a, argc, argv, FG_ARGS_GLOBAL_SHORTOPTS, forge_options, forge_option, &f,
			  1, 1, "SOURCE");
	if (rc != FG_CLI_RUN)
		return rc;
	o.source = a.pos[0];
	json = f.json;
	if (!o.out)
		return fg_cli_usage_error(&fg_cmd_forge, "missing --out DIR");
	progress_init(&progress);
	o.progress = on_progress;
	o.progress_ctx = &progress;
	fg_cli_pull_opts(&pull, cache, sizeof(cache));
	o.pull = &pull;
	rc = fg_forge_run(&o, &res, &err);
	if (progress.drawn)
		fputc('\n', stderr); /* a live line cut short by a failure */
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
		cJSON *doc = fg_forge_result_json(&res, &o);
		int prc;

		/* File and tensor names are any bytes: the document is UTF-8 (U+FFFD for the rest). */
		if (doc)
			fg_json_utf8_fix(doc);
		prc = doc ? fg_cli_print_json(doc) : FG_EXIT_INTERNAL;
		if (!doc)
			fprintf(stderr, "forged: error: out of memory making the document\n");
		cJSON_Delete(doc);
		if (prc) {
			fg_forge_result_release(&res);
			return prc;
		}
	} else if (!rc) {
		printf("%s\n  head fingerprint %s\n  digest %s\n  fingerprint %s (legacy framing)\n  target %s, policy %s, "
		       "%zu head tensors, %zu removed from the backbone, %zu norms shifted\n  head in %s\n", res.artifact,
		       res.head_fingerprint[0] ? res.head_fingerprint : "(none: no mtp file)", res.digest,
		       res.fingerprint[0] ? res.fingerprint : "(none: no mtp.safetensors)", res.target, res.policy,
		       res.head_tensors, res.n_removed, res.n_shifted, res.head_file);
	}
	fg_forge_result_release(&res);
	return rc ? FG_EXIT_VERDICT : FG_EXIT_OK;
}
