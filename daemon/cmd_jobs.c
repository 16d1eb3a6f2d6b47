/*
 * cmd_jobs.c: `forged jobs submit|list|get|cancel|wait`: forge jobs on a
 * `forged serve`, through POST/GET/DELETE /v1/jobs (client.h).
 *
 * `submit --wait` and `wait` poll GET /v1/jobs/ID every 0.2 s, doubling to
 * 5 s, until the job ends: exit 0 when it succeeded, 1 when it failed (a
 * refusal: its `refusal` object when the server gives one, else its `error`
 * text, is printed) or was cancelled, 3 when --timeout S passes first (the
 * job goes on).
 */
#include "daemon/client.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#define WAIT_FIRST 0.2
#define WAIT_MAX 5.0

static int run_jobs(int argc, char **argv);
static const struct option *jobs_longopts(void);

static const struct fg_subcmd jobs_subs[] = {
	{ "submit", "SOURCE [--backbone SOURCE] [--target RUNTIME[,RUNTIME...]] [--quant keep|match|affine:BITS:GROUP|mxfp4] "
		    "[--allow-requantize] [--out DIR] [-w|--wait] [--timeout S]",
	  "queue a forge job of SOURCE; with --wait, wait for its end" },
	{ "list", "[--state queued|running|succeeded|failed|cancelled] [--limit N] [--cursor ID]",
	  "list jobs by id (one page; the next --cursor is printed)" },
	{ "get", "ID", "show one job" },
	{ "cancel", "ID", "cancel a queued job, or ask a running one to stop" },
	{ "wait", "ID [--timeout S]", "wait for a job's end and exit as submit --wait does" },
	{ NULL, NULL, NULL },
};

const struct fg_cmd fg_cmd_jobs = {
	.name = "jobs",
	.summary = "submit, list, show, cancel and wait for forge jobs on a server",
	.usage = "Talks to `forged serve` at --server URL (else $FORGED_URL, else\n"
		 "http://127.0.0.1:8470) with a bearer token: --token TOKEN, --token-file FILE,\n"
		 "$FORGED_TOKEN, or the first line of $XDG_CONFIG_HOME/forged/token\n"
		 "(~/.config/forged/token) when that file exists.  SOURCE, --backbone and --out\n"
		 "are paths on the server, inside its allow_roots (or URLs of its allow_hosts).\n"
		 "--target is a runtime id or a comma-separated list of them (repeatable; default\n"
		 "the server's forge_target, else mtplx-2.12), --quant a policy (default keep).\n"
		 "--wait polls the job (0.2 s doubling to 5 s) until it ends; --timeout S gives\n"
		 "up after S seconds.  Transient failures (connection refused or reset, 502,\n"
		 "503, 504, 408, 429) are retried up to 5 times, honouring Retry-After; one\n"
		 "Idempotency-Key per invocation makes a retried submission the same job.\n"
		 "-o json prints the API's job document (list: the page), -o table a table;\n"
		 "the default is table on a terminal, JSON otherwise.\n"
		 "Exit 0 ok (with --wait: the job succeeded); 1 the job failed (refused by a\n"
		 "verdict: the refusal is printed) or was cancelled; 2 bad usage or a request the\n"
		 "server refused (4xx); 3 server or transport failure (5xx, connection refused,\n"
		 "timeout), or --timeout passed.\n",
	.run = run_jobs,
	.subs = jobs_subs,
	.common = FG_CLIENT_COMMON,
	.options = jobs_longopts,
	.help_extra = fg_cli_print_runtimes,
};

enum { OPT_WAIT = 'w', OPT_BACKBONE = 2000, OPT_TARGET, OPT_QUANT, OPT_OUT, OPT_TIMEOUT, OPT_STATE, OPT_LIMIT,
       OPT_CURSOR, OPT_ALLOW_REQUANTIZE };

static const struct option jobs_options[] = {
	FG_CLIENT_LONGOPTS,
	{ "backbone", required_argument, NULL, OPT_BACKBONE },
	{ "target", required_argument, NULL, OPT_TARGET },
	{ "quant", required_argument, NULL, OPT_QUANT },
	{ "allow-requantize", no_argument, NULL, OPT_ALLOW_REQUANTIZE },
	{ "out", required_argument, NULL, OPT_OUT },
	{ "wait", no_argument, NULL, OPT_WAIT },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "state", required_argument, NULL, OPT_STATE },
	{ "limit", required_argument, NULL, OPT_LIMIT },
	{ "cursor", required_argument, NULL, OPT_CURSOR },
	{ NULL, 0, NULL, 0 },
};

static const struct option *jobs_longopts(void)
{
	return jobs_options;
}

struct jobs_opts {
	const char *backbone, *target, *quant, *out, *state;
	char targets[512];   /* --target values, joined (FG_FORGE_TARGET_MAX) */
	int wait, allow_requantize;
	double timeout;
	long long limit, cursor;
};

static const char *const job_states[] = { "queued", "running", "succeeded", "failed", "cancelled", NULL };

/* A whole number in lo..hi. */
static int parse_count(const char *text, long long lo, long long hi, long long *out)
{
	char *end;
	long long v = strtoll(text, &end, 10);

	if (!*text || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int jobs_option(void *ctx, int val, const char *arg)
{
	struct jobs_opts *o = ctx;
	char *end;

	switch (val) {
	case OPT_BACKBONE:
		o->backbone = arg;
		return 0;
	case OPT_OUT:
		o->out = arg;
		return 0;
	case OPT_WAIT:
		o->wait = 1;
		return 0;
	case OPT_ALLOW_REQUANTIZE:
		o->allow_requantize = 1;
		return 0;
	case OPT_TARGET:
		if (fg_args_check_targets("--target", arg) || fg_args_add_target(o->targets, sizeof(o->targets), arg))
			return -1;
		o->target = o->targets;
		return 0;
	case OPT_QUANT:
		o->quant = arg;
		return fg_args_check_policy("--quant", arg);
	case OPT_TIMEOUT:
		o->timeout = strtod(arg, &end);
		if (!*arg || *end || !isfinite(o->timeout) || o->timeout <= 0)
			return fg_args_bad("--timeout '%s' is not a number of seconds above 0", arg);
		return 0;
	case OPT_STATE:
		o->state = arg;
		return fg_args_pick("--state", arg, job_states) < 0 ? -1 : 0;
	case OPT_LIMIT:
		if (parse_count(arg, 1, 500, &o->limit))
			return fg_args_bad("--limit '%s' is not a number in 1..500", arg);
		return 0;
	case OPT_CURSOR:
		if (parse_count(arg, 0, (long long)1 << 62, &o->cursor))
			return fg_args_bad("--cursor '%s' is not a job id (0 or more)", arg);
		return 0;
	default:
		return fg_args_bad("unknown option");
	}
}

/* ---- tables ---- */

static const char *state_colour(const struct fg_client_palette *p, const char *state)
{
	if (!state)
		return "";
	if (strcmp(state, "succeeded") == 0)
		return p->green;
	if (strcmp(state, "failed") == 0)
		return p->red;
	if (strcmp(state, "cancelled") == 0)
		return p->yellow;
	return "";
}

static void print_num_or_dash(const cJSON *o, const char *key, int width)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (cJSON_IsNumber(v))
		printf("%-*.0f", width, v->valuedouble); /* a server's number: printed, never cast */
	else
		printf("%-*s", width, "-");
}

static const char *str_or_dash(const cJSON *o, const char *key)
{
	const char *s = fg_json_get_str(o, key);

	return s && *s ? s : "-";
}

static void print_refusal(FILE *out, const cJSON *ref)
{
	const char *sev = fg_json_get_str(ref, "severity");

	fprintf(out, "%s%s%s%s: %s", str_or_dash(ref, "code"), sev ? " (" : "", sev ? sev : "", sev ? ")" : "",
		str_or_dash(ref, "detail"));
}

static void print_job(const cJSON *job)
{
	struct fg_client_palette p = fg_client_palette();
	const char *state = fg_json_get_str(job, "state");
	const cJSON *ref = cJSON_GetObjectItemCaseSensitive(job, "refusal");
	const cJSON *rq = cJSON_GetObjectItemCaseSensitive(job, "request");

	printf("%sjob %lld%s  %s%s%s\n", p.bold, (long long)fg_json_get_num(job, "id", 0), p.reset,
	       state_colour(&p, state), state ? state : "?", p.reset);
	printf("  kind      %s\n", str_or_dash(job, "kind"));
	if (cJSON_IsObject(rq)) {
		/* What was asked (issue 13): the source as named, and where it resolved to. */
		const char *named = fg_json_get_str(rq, "source"), *resolved = fg_json_get_str(rq, "source_resolved");

		printf("  source    %s", named ? named : "-");
		if (resolved && (!named || strcmp(named, resolved) != 0))
			printf(" (%s)", resolved);
		printf("\n  target    %s, quant %s\n", str_or_dash(rq, "target"), str_or_dash(rq, "quant"));
		printf("  out       %s\n", str_or_dash(rq, "out"));
	}
	printf("  stage     %s\n", str_or_dash(job, "stage"));
	printf("  progress  %.0f%%\n", fg_json_get_num(job, "progress", 0) * 100.0);
	printf("  artifact  ");
	print_num_or_dash(job, "artifact_id", 0);
	printf("\n  created   %s\n", str_or_dash(job, "created_at"));
	printf("  updated   %s\n", str_or_dash(job, "updated_at"));
	if (cJSON_IsObject(ref)) {
		printf("  refusal   ");
		print_refusal(stdout, ref);
		putchar('\n');
	}
	if (fg_json_get_str(job, "error"))
		printf("  error     %s\n", fg_json_get_str(job, "error"));
}

static void print_job_list(const cJSON *page)
{
	struct fg_client_palette p = fg_client_palette();
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(page, "items"), *job;
	const cJSON *next = cJSON_GetObjectItemCaseSensitive(page, "next_cursor");

	printf("%s%-7s %-10s %-10s %-8s %-9s %-25s %s%s\n", p.bold, "ID", "STATE", "STAGE", "PROGRESS", "ARTIFACT",
	       "UPDATED", "ERROR", p.reset);
	cJSON_ArrayForEach(job, items) {
		const char *state = fg_json_get_str(job, "state"), *error = fg_json_get_str(job, "error");

		print_num_or_dash(job, "id", 8);
		printf("%s%-10s%s %-10s %7.0f%%  ", state_colour(&p, state), state ? state : "?", p.reset,
		       str_or_dash(job, "stage"), fg_json_get_num(job, "progress", 0) * 100.0);
		print_num_or_dash(job, "artifact_id", 10);
		printf("%-25s %.60s%s\n", str_or_dash(job, "updated_at"), error ? error : "-",
		       error && strlen(error) > 60 ? "..." : "");
	}
	if (!cJSON_GetArraySize(items))
		printf("(no jobs)\n");
	if (cJSON_IsNumber(next))
		printf("more: --cursor %.0f\n", next->valuedouble);
}

/* ---- requests ---- */

/* GET /v1/jobs/ID into r (released first); the parsed job in *doc.  Returns 0 or an exit code (reported). */
static int get_job(struct fg_client *c, long long id, struct fg_http *r, cJSON **doc)
{
	char path[64];
	int rc;

	snprintf(path, sizeof(path), "/v1/jobs/%lld", id);
	fg_http_release(r);   /* the previous poll's answer */
	rc = fg_client_call(c, "GET", path, NULL, FG_RETRY_SAFE, r);
	if (rc)
		return fg_client_fail(c, r, rc);
	*doc = fg_client_doc(c, r);
	return *doc ? 0 : FG_EXIT_INTERNAL;
}

static int terminal_state(const char *state)
{
	return state && (strcmp(state, "succeeded") == 0 || strcmp(state, "failed") == 0 ||
			 strcmp(state, "cancelled") == 0);
}

/*
 * Print the final job (document or table) and its verdict; return the exit
 * code: 0 succeeded, 1 failed or cancelled.
 */
static int job_outcome(struct fg_client *c, const struct fg_http *r, const cJSON *job)
{
	const char *state = fg_json_get_str(job, "state"), *error = fg_json_get_str(job, "error");
	const cJSON *ref = cJSON_GetObjectItemCaseSensitive(job, "refusal");
	long long id = (long long)fg_json_get_num(job, "id", 0);

	if (c->format == FG_FORMAT_JSON)
		fg_client_print_body(r);
	else
		print_job(job);
	if (strcmp(state, "succeeded") == 0)
		return FG_EXIT_OK;
	if (strcmp(state, "cancelled") == 0) {
		fprintf(stderr, "forged %s: job %lld was cancelled\n", c->args->label, id);
		return FG_EXIT_VERDICT;
	}
	fprintf(stderr, "forged %s: job %lld refused: ", c->args->label, id);
	if (cJSON_IsObject(ref))
		print_refusal(stderr, ref);
	else
		fputs(error ? error : "no error text", stderr);
	fputc('\n', stderr);
	return FG_EXIT_VERDICT;
}

/* Poll job id until it ends or the deadline passes. */
static int wait_job(struct fg_client *c, long long id, double timeout)
{
	struct fg_http r;
	double delay = WAIT_FIRST;
	int tty = isatty(STDERR_FILENO), shown = 0, rc;

	memset(&r, 0, sizeof(r));
	for (;;) {
		cJSON *job = NULL;
		const char *state;

		rc = get_job(c, id, &r, &job);
		if (rc)
			break;
		state = fg_json_get_str(job, "state");
		if (!state) {
			fprintf(stderr, "forged %s: job %lld: the answer has no state\n", c->args->label, id);
			cJSON_Delete(job);
			rc = FG_EXIT_INTERNAL;
			break;
		}
		if (tty && !terminal_state(state)) {
			char text[160];

			/* The stage's bytes and ETA, when the server reports them (no rate: it does not). */
			fg_client_progress_text(text, sizeof(text), str_or_dash(job, "stage"),
						fg_json_get_num(job, "progress", 0), fg_json_get_num(job, "bytes_done", -1),
						fg_json_get_num(job, "bytes_total", -1), -1, fg_json_get_num(job, "eta_s", -1));
			fprintf(stderr, "\rjob %lld: %-9s %s\033[K", id, state, text);
			shown = 1;
		}
		if (terminal_state(state)) {
			if (shown)
				fputc('\n', stderr);
			rc = job_outcome(c, &r, job);
			cJSON_Delete(job);
			break;
		}
		cJSON_Delete(job);
		if (c->deadline > 0 && fg_client_now() + delay > c->deadline) {
			fg_client_sleep(c->deadline - fg_client_now());
			if (shown)
				fputc('\n', stderr);
			fprintf(stderr, "forged %s: job %lld has not ended after %g s (it goes on: "
				"'forged jobs cancel %lld' stops it)\n", c->args->label, id, timeout, id);
			if (c->format == FG_FORMAT_JSON)
				fg_client_print_body(&r);
			rc = FG_EXIT_INTERNAL;
			break;
		}
		fg_client_sleep(delay);
		delay = delay * 2 < WAIT_MAX ? delay * 2 : WAIT_MAX;
	}
	fg_http_release(&r);
	return rc;
}

static int do_submit(struct fg_client *c, const struct fg_client_args *a, const struct jobs_opts *o)
{
	cJSON *body = cJSON_CreateObject(), *job = NULL;
	struct fg_http r;
	char *text;
	long long id;
	int rc;

	cJSON_AddStringToObject(body, "kind", "forge");
	cJSON_AddStringToObject(body, "source", a->pos[0]);
	if (o->backbone)
		cJSON_AddStringToObject(body, "backbone", o->backbone);
	if (o->target)
		cJSON_AddStringToObject(body, "target", o->target);
	if (o->quant)
		cJSON_AddStringToObject(body, "quant", o->quant);
	if (o->out)
		cJSON_AddStringToObject(body, "out", o->out);
	if (o->allow_requantize)
		cJSON_AddBoolToObject(body, "allow_requantize", 1);
	text = cJSON_PrintUnformatted(body);
	cJSON_Delete(body);
	if (!text) {
		fprintf(stderr, "forged %s: out of memory\n", a->label);
		return FG_EXIT_INTERNAL;
	}
	rc = fg_client_call(c, "POST", "/v1/jobs", text, FG_RETRY_SAFE, &r);
	free(text);
	if (rc) {
		rc = fg_client_fail(c, &r, rc);
		fg_http_release(&r);
		return rc;
	}
	job = fg_client_doc(c, &r);
	if (!job || fg_json_get_num(job, "id", 0) < 1) {
		if (job)
			fprintf(stderr, "forged %s: the answer has no job id\n", a->label);
		cJSON_Delete(job);
		fg_http_release(&r);
		return FG_EXIT_INTERNAL;
	}
	id = (long long)fg_json_get_num(job, "id", 0);
	if (!o->wait) {
		if (c->format == FG_FORMAT_JSON)
			rc = fg_client_print_body(&r);
		else
			print_job(job);
	} else if (terminal_state(fg_json_get_str(job, "state"))) {
		/* A replayed submission may name a job that has already ended. */
		rc = job_outcome(c, &r, job);
	} else {
		rc = wait_job(c, id, o->timeout);
	}
	cJSON_Delete(job);
	fg_http_release(&r);
	return rc;
}

static int do_list(struct fg_client *c, const struct jobs_opts *o)
{
	char path[256];
	size_t n = (size_t)snprintf(path, sizeof(path), "/v1/jobs?limit=%lld", o->limit ? o->limit : 50);
	struct fg_http r;
	cJSON *page;
	int rc;

	if (o->state)
		n += (size_t)snprintf(path + n, sizeof(path) - n, "&state=%s", o->state);
	if (o->cursor)
		snprintf(path + n, sizeof(path) - n, "&cursor=%lld", o->cursor);
	rc = fg_client_call(c, "GET", path, NULL, FG_RETRY_SAFE, &r);
	if (rc) {
		rc = fg_client_fail(c, &r, rc);
	} else if (c->format == FG_FORMAT_JSON) {
		rc = fg_client_print_body(&r);
	} else if ((page = fg_client_doc(c, &r)) != NULL) {
		print_job_list(page);
		cJSON_Delete(page);
	} else {
		rc = FG_EXIT_INTERNAL;
	}
	fg_http_release(&r);
	return rc;
}

/* get and cancel: one job document. */
static int do_one(struct fg_client *c, const char *method, long long id)
{
	char path[64];
	struct fg_http r;
	cJSON *job;
	int rc;

	snprintf(path, sizeof(path), "/v1/jobs/%lld", id);
	rc = fg_client_call(c, method, path, NULL, FG_RETRY_SAFE, &r);
	if (rc) {
		rc = fg_client_fail(c, &r, rc);
	} else if (c->format == FG_FORMAT_JSON) {
		rc = fg_client_print_body(&r);
	} else if ((job = fg_client_doc(c, &r)) != NULL) {
		print_job(job);
		if (strcmp(method, "DELETE") == 0 && r.status == 202)
			printf("(the job is running: it stops at its next stage)\n");
		cJSON_Delete(job);
	} else {
		rc = FG_EXIT_INTERNAL;
	}
	fg_http_release(&r);
	return rc;
}

static int run_jobs(int argc, char **argv)
{
	struct fg_client_args a;
	struct jobs_opts o;
	struct fg_client c;
	const char *sub;
	long long id = 0;
	int rc;

	memset(&o, 0, sizeof(o));
	rc = fg_client_parse(&a, &fg_cmd_jobs, argc, argv, FG_CLIENT_SHORTOPTS "w", jobs_options, jobs_option, &o);
	if (rc || a.help)
		return rc;
	sub = a.sub->name;
	if (strcmp(sub, "submit") == 0)
		rc = fg_client_want_args(&a, 1, "SOURCE");
	else if (strcmp(sub, "list") == 0)
		rc = fg_client_want_args(&a, 0, "");
	else if ((rc = fg_client_want_args(&a, 1, "ID")) == 0)
		rc = fg_client_id(&a, a.pos[0], "job ID", &id);
	if (rc)
		return rc;
	if ((rc = fg_client_open(&c, &a)) != 0)
		return rc;
	if (o.timeout > 0)
		c.deadline = fg_client_now() + o.timeout;
	if (strcmp(sub, "submit") == 0)
		rc = do_submit(&c, &a, &o);
	else if (strcmp(sub, "list") == 0)
		rc = do_list(&c, &o);
	else if (strcmp(sub, "get") == 0)
		rc = do_one(&c, "GET", id);
	else if (strcmp(sub, "cancel") == 0)
		rc = do_one(&c, "DELETE", id);
	else
		rc = wait_job(&c, id, o.timeout);
	fg_client_close(&c);
	return rc;
}
