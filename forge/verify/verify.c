/*
 * verify.c: the MTP verdict from verification rows (docs/interfaces.md section 3).
 *
 * The rule is MTPLX's forge rule (mtplx/commands/forge.py `_speed_evidence`,
 * `_winning_row`, `_quality_rejected_winning_rows`,
 * `_acceptance_collapsed_rows`, `_speed_failure_reasons`), re-stated here,
 * not translated: the rows are annotated once (ascending depth, a
 * multiplier per depth), reduced to a few facts (the fastest depth beating
 * plain decode whose quality did not fail, the depths that beat it but failed
 * quality, the depths whose acceptance collapsed), then the verdict table is
 * walked; its rows are in rule order and each carries a predicate over those
 * facts; the first that holds decides.  Adding a verdict is adding a row.
 * Reading the documents is formats.c.
 */
#include "forge/verify/verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the rules look at, computed once from the rows. */
struct verify_facts {
	int win;                /* index of the fastest depth > 0 beating AR, quality not false; -1 */
	size_t n_rejected;      /* depths > 0 beating AR whose quality failed */
	size_t n_collapsed;     /* depths > 0 whose best acceptance is <= the threshold */
};

static int holds_depth_wins(const struct verify_facts *f)
{
	return f->win >= 0;
}

static int holds_quality_failed(const struct verify_facts *f)
{
	return f->n_rejected > 0;
}

static int holds_collapsed(const struct verify_facts *f)
{
	/* Rows without acceptance data cannot show a collapse. */
	return f->n_collapsed > 0;
}

static int holds_always(const struct verify_facts *f)
{
	(void)f;
	return 1;
}

/* The verdict table, in rule order; the first rule that holds decides. */
struct verify_rule {
	struct fg_verify_verdict verdict;
	int (*holds)(const struct verify_facts *f);
	int names_depth;        /* the verdict carries the winning depth as best_depth */
};

static const struct verify_rule rules[] = {
	{ { &fg_verdict_table[FG_V_MTP_DEPTH_WINS], 1 }, holds_depth_wins, 1 },
	{ { &fg_verdict_table[FG_V_NO_QUALITY_PASSED_MTP_DEPTH_BEAT_AR], 2 }, holds_quality_failed, 0 },
	{ { &fg_verdict_table[FG_V_MTP_ACCEPTANCE_COLLAPSED], 3 }, holds_collapsed, 0 },
	{ { &fg_verdict_table[FG_V_NO_MTP_DEPTH_BEAT_AR], 4 }, holds_always, 0 },
};

#define N_RULES (sizeof(rules) / sizeof(rules[0]))

/* MTPLX's failure_reasons strings (forge.py `_speed_failure_reasons`). */
#define REASON_COLLAPSED "mtp_acceptance_collapsed"
#define REASON_QUALITY "quality_failed_fast_mtp"
#define REASON_NO_WIN "no_mtp_depth_beat_ar"

const struct fg_verify_verdict *fg_verify_verdict_at(size_t i)
{
	return i < N_RULES ? &rules[i].verdict : NULL;
}

const struct fg_verify_verdict *fg_verify_verdict_find(const char *name)
{
	for (size_t i = 0; name && i < N_RULES; i++)
		if (strcmp(rules[i].verdict.row->name, name) == 0)
			return &rules[i].verdict;
	return NULL;
}

int fg_verify_parse_text(struct fg_verify_input *out, const char *text, size_t len,
			 struct fg_err *err)
{
	const char *end = NULL;
	cJSON *doc;
	int rc;

	if (memchr(text, '\0', len))
		return fg_err_set(err, FG_EINPUT, "not JSON text (contains a NUL byte)");
	doc = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (!doc)
		return fg_err_set(err, FG_EINPUT, "invalid JSON near byte %td",
				  end ? end - text : (ptrdiff_t)0);
	/* cJSON stops after the first value; only whitespace may follow it. */
	for (; end && end < text + len; end++) {
		if (!strchr(" \t\r\n", *end)) {
			cJSON_Delete(doc);
			return fg_err_set(err, FG_EINPUT, "trailing data after the JSON document at byte %td",
					  end - text);
		}
	}
	rc = fg_verify_parse(out, doc, err);
	cJSON_Delete(doc);
	return rc;
}

void fg_verify_release(struct fg_verify_input *in)
{
	if (!in)
		return;
	free(in->rows);
	in->rows = NULL;
	in->n_rows = 0;
}

/* The best acceptance of row over its positions (its max); -1 without acceptance data. */
static double best_acceptance(const struct fg_verify_row *row)
{
	double best = -1.0;

	for (size_t k = 0; k < row->n_accept; k++)
		if (row->accept[k] > best)
			best = row->accept[k];
	return best;
}

/* Whether the document's MTPLX verdict and reasons are the ones decided in r. */
static int mtplx_agrees(const struct fg_verify_result *r)
{
	if (r->has_mtplx_verdict && strcmp(r->mtplx_verdict, r->verdict->row->name) != 0)
		return 0;
	if (!r->has_mtplx_reasons)
		return 1;
	if (r->n_mtplx_reasons != r->n_reasons)
		return 0;
	for (size_t i = 0; i < r->n_reasons; i++)
		if (strcmp(r->mtplx_reasons[i], r->reasons[i]) != 0)
			return 0;
	return 1;
}

/* Copy what the input says about itself (labels, format, MTPLX's verdict, field lists) into r. */
static void copy_provenance(struct fg_verify_result *r, const struct fg_verify_input *in)
{
	memcpy(r->hardware, in->hardware, sizeof(r->hardware));
	memcpy(r->runtime, in->runtime, sizeof(r->runtime));
	r->hardware[sizeof(r->hardware) - 1] = '\0';
	r->runtime[sizeof(r->runtime) - 1] = '\0';
	r->format = in->format;
	r->has_mtplx_verdict = in->has_mtplx_verdict;
	memcpy(r->mtplx_verdict, in->mtplx_verdict, sizeof(r->mtplx_verdict));
	r->mtplx_verdict[sizeof(r->mtplx_verdict) - 1] = '\0';
	r->has_mtplx_reasons = in->has_mtplx_reasons;
	r->n_mtplx_reasons = in->n_mtplx_reasons < FG_VERIFY_MAX_REASONS ? in->n_mtplx_reasons
									 : FG_VERIFY_MAX_REASONS;
	memcpy(r->mtplx_reasons, in->mtplx_reasons, sizeof(r->mtplx_reasons));
	for (size_t i = 0; i < FG_VERIFY_MAX_REASONS; i++)
		r->mtplx_reasons[i][FG_VERIFY_REASON_MAX - 1] = '\0';
	r->mtplx_verdict_at = in->mtplx_verdict_at;
	r->has_mtplx = in->has_mtplx_verdict || in->has_mtplx_reasons;
	r->n_unused = in->n_unused < FG_VERIFY_MAX_UNUSED ? in->n_unused : FG_VERIFY_MAX_UNUSED;
	memcpy(r->unused, in->unused, r->n_unused * sizeof(r->unused[0]));
	r->n_skipped = in->n_skipped;
	memcpy(r->skipped, in->skipped, sizeof(r->skipped));
	for (size_t i = 0; i < FG_VERIFY_MAX_SKIPPED; i++)
		r->skipped[i][sizeof(r->skipped[i]) - 1] = '\0';
}

int fg_verify_decide(const struct fg_verify_input *in, double collapse_threshold,
		     struct fg_verify_result *out, struct fg_err *err)
{
	const struct fg_verify_row *by_depth[FG_VERIFY_MAX_DEPTH + 1] = { 0 };
	struct verify_facts f = { -1, 0, 0 };
	struct fg_verify_result *r;
	double ar;
	size_t rule;

	if (!(collapse_threshold > 0.0 && collapse_threshold < 1.0))
		return fg_err_set(err, FG_EUSAGE, "collapse threshold %g is outside (0, 1)",
				  collapse_threshold);
	for (size_t i = 0; i < in->n_rows; i++) {
		const struct fg_verify_row *row = &in->rows[i];

		if (row->depth < 0 || row->depth > FG_VERIFY_MAX_DEPTH || by_depth[row->depth])
			return fg_err_set(err, FG_EINPUT, "rows[%zu]: depth %d is out of range or repeated",
					  i, row->depth);
		if (row->n_accept > FG_VERIFY_MAX_ACCEPT)
			return fg_err_set(err, FG_EINPUT, "rows[%zu]: %zu acceptance entries, more than %d",
					  i, row->n_accept, FG_VERIFY_MAX_ACCEPT);
		by_depth[row->depth] = row;
	}
	if (!by_depth[0] || !(by_depth[0]->tok_s > 0.0))
		return fg_err_set(err, FG_EINPUT, "rows have no depth 0 (plain decode) to compare against");

	/* The result is large (its own copy of the rows): built on the heap, copied out at the end. */
	r = calloc(1, sizeof(*r));
	if (!r)
		return fg_err_set(err, FG_ENOMEM, "out of memory deciding a verdict");
	ar = by_depth[0]->tok_s;
	r->ar_tok_s = ar;
	r->collapse_threshold = collapse_threshold;
	r->best_accept_depth = -1;
	/* Annotation, in ascending depth (MTPLX sorts by depth). */
	for (int d = 0; d <= FG_VERIFY_MAX_DEPTH; d++) {
		struct fg_verify_row *row;

		if (!by_depth[d])
			continue;
		row = &r->rows[r->n_rows++];
		*row = *by_depth[d];
		row->finish_reasons[sizeof(row->finish_reasons) - 1] = '\0';
		if (d == 0) {
			row->multiplier = 1.0;
		} else if (!row->has_multiplier) {
			row->multiplier = row->tok_s / ar;
		}
		row->has_multiplier = 1;
	}
	for (size_t i = 0; i < r->n_rows; i++) {
		const struct fg_verify_row *row = &r->rows[i];
		double best;

		if (row->depth == 0)
			continue;
		r->speedups[r->n_speedups].depth = row->depth;
		r->speedups[r->n_speedups++].speedup = row->multiplier;
		/* The fastest by tok/s; on a tie the first, which is the shallower. */
		if (row->multiplier > 1.0 && row->quality != 0 &&
		    (f.win < 0 || row->tok_s > r->rows[f.win].tok_s))
			f.win = (int)i;
		if (row->multiplier > 1.0 && row->quality == 0)
			r->rejected[r->n_rejected++] = (int)i;
		best = best_acceptance(row);
		if (row->n_accept > 0 && best <= collapse_threshold)
			r->collapsed[r->n_collapsed++] = (int)i;
		if (row->n_accept > 0 && (r->best_accept_depth < 0 || row->accept[0] > r->best_first_acceptance)) {
			r->best_accept_depth = row->depth;
			r->best_first_acceptance = row->accept[0];
		}
	}
	f.n_rejected = r->n_rejected;
	f.n_collapsed = r->n_collapsed;
	for (rule = 0; rule < N_RULES; rule++)
		if (rules[rule].holds(&f))
			break;
	if (rule == N_RULES) {
		free(r);
		return fg_err_set(err, FG_EINTERNAL, "no verdict rule matched");
	}
	r->verdict = &rules[rule].verdict;
	r->best_depth = rules[rule].names_depth ? r->rows[f.win].depth : -1;
	r->evidence_depth = f.win >= 0 ? r->rows[f.win].depth : 0;
	if (r->best_accept_depth < 0)
		r->best_first_acceptance = 0.0;
	if (f.win < 0) {
		if (r->n_collapsed)
			r->reasons[r->n_reasons++] = REASON_COLLAPSED;
		if (r->n_rejected)
			r->reasons[r->n_reasons++] = REASON_QUALITY;
		if (r->n_speedups)
			r->reasons[r->n_reasons++] = REASON_NO_WIN;
	}
	copy_provenance(r, in);
	r->agrees = r->has_mtplx ? mtplx_agrees(r) : 0;
	*out = *r;
	free(r);
	return 0;
}

/* x rounded to 3 decimals, for printing only. */
static double round3(double x)
{
	return round(x * 1000.0) / 1000.0;
}

static int add_label(cJSON *o, const char *key, const char *value)
{
	return value[0] ? cJSON_AddStringToObject(o, key, value) != NULL
			: cJSON_AddNullToObject(o, key) != NULL;
}

/* The acceptance list of row as a JSON array, added to o under key. */
static int add_acceptance(cJSON *o, const char *key, const struct fg_verify_row *row)
{
	cJSON *a = cJSON_AddArrayToObject(o, key);

	for (size_t k = 0; a && k < row->n_accept; k++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(row->accept[k])))
			return 0;
	return a != NULL;
}

/* finish_reasons of row (its stored JSON text, or {}) added to o. */
static int add_finish_reasons(cJSON *o, const struct fg_verify_row *row)
{
	cJSON *v = row->finish_reasons[0] ? cJSON_Parse(row->finish_reasons) : cJSON_CreateObject();

	if (!v)
		return 0;
	if (!cJSON_AddItemToObject(o, "finish_reasons", v)) {
		cJSON_Delete(v);
		return 0;
	}
	return 1;
}

static int add_hit_budget(cJSON *o, const struct fg_verify_row *row)
{
	int ok = row->has_hit_budget ? cJSON_AddBoolToObject(o, "hit_token_budget", row->hit_budget) != NULL
				     : cJSON_AddNullToObject(o, "hit_token_budget") != NULL;

	return ok && (row->has_hit_budget_count
			      ? cJSON_AddNumberToObject(o, "hit_token_budget_count", (double)row->hit_budget_count) != NULL
			      : cJSON_AddNullToObject(o, "hit_token_budget_count") != NULL);
}

enum row_view {
	VIEW_ROW,        /* an annotated row, as MTPLX's `_verify_row_from_mapping` keeps it */
	VIEW_COLLAPSED,  /* an acceptance_collapsed entry */
	VIEW_REJECTED,   /* a quality_rejected entry */
};

/* One row in one of MTPLX's three shapes, appended to arr. */
static int add_row(cJSON *arr, const struct fg_verify_row *row, enum row_view view)
{
	cJSON *o = cJSON_CreateObject();
	int ok = o && cJSON_AddItemToArray(arr, o);

	if (!ok) {
		cJSON_Delete(o);
		return 0;
	}
	ok = cJSON_AddNumberToObject(o, "depth", row->depth) && cJSON_AddNumberToObject(o, "tok_s", row->tok_s) &&
	     cJSON_AddNumberToObject(o, "multiplier_vs_ar", row->multiplier);
	if (ok && view != VIEW_REJECTED)
		ok = add_acceptance(o, "acceptance_by_position", row) &&
		     cJSON_AddNumberToObject(o, "verify_time_s", row->verify_time_s);
	if (ok && view == VIEW_ROW)
		ok = row->quality < 0 ? cJSON_AddNullToObject(o, "quality_passed") != NULL
				      : cJSON_AddBoolToObject(o, "quality_passed", row->quality) != NULL;
	if (ok && view != VIEW_COLLAPSED)
		ok = add_hit_budget(o, row) && add_finish_reasons(o, row);
	return ok;
}

/* rows[idx[0..n)] of r in view, as an array under key of o. */
static int add_rows(cJSON *o, const char *key, const struct fg_verify_result *r, const int *idx, size_t n,
		    enum row_view view)
{
	cJSON *a = cJSON_AddArrayToObject(o, key);

	for (size_t i = 0; a && i < n; i++)
		if (!add_row(a, &r->rows[idx ? (size_t)idx[i] : i], view))
			return 0;
	return a != NULL;
}

static int add_strings(cJSON *o, const char *key, const char *const *s, size_t n)
{
	cJSON *a = cJSON_AddArrayToObject(o, key);

	for (size_t i = 0; a && i < n; i++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(s[i])))
			return 0;
	return a != NULL;
}

/* MTPLX's speed_evidence for r (forge.py `_speed_evidence`), under "speed_evidence". */
static int add_evidence(cJSON *o, const struct fg_verify_result *r)
{
	cJSON *e = cJSON_AddObjectToObject(o, "speed_evidence"), *tok, *g;
	const struct fg_verify_row *winner = NULL;

	if (!e)
		return 0;
	for (size_t i = 0; i < r->n_rows; i++)
		if (r->rows[i].depth == r->evidence_depth)
			winner = &r->rows[i];
	/* No winner: the AR row stands in, as in MTPLX. */
	if (!cJSON_AddNumberToObject(e, "depth", r->evidence_depth) || !(tok = cJSON_AddArrayToObject(e, "tok_s")))
		return 0;
	if (winner && !cJSON_AddItemToArray(tok, cJSON_CreateNumber(winner->tok_s)))
		return 0;
	if (winner ? !add_acceptance(e, "acceptance_by_depth", winner) : !cJSON_AddArrayToObject(e, "acceptance_by_depth"))
		return 0;
	g = cJSON_AddObjectToObject(e, "greedy_diagnostic");
	return g && cJSON_AddNumberToObject(g, "tok_s", r->ar_tok_s) &&
	       add_rows(e, "forge_verify_rows", r, NULL, r->n_rows, VIEW_ROW) &&
	       add_rows(e, "quality_rejected", r, r->rejected, r->n_rejected, VIEW_REJECTED) &&
	       add_rows(e, "acceptance_collapsed", r, r->collapsed, r->n_collapsed, VIEW_COLLAPSED) &&
	       add_strings(e, "failure_reasons", r->reasons, r->n_reasons) &&
	       cJSON_AddStringToObject(e, "verdict", r->verdict->row->name);
}

static int add_unused(cJSON *o, const struct fg_verify_result *r)
{
	cJSON *a = cJSON_AddArrayToObject(o, "unused_fields");

	for (size_t i = 0; a && i < r->n_unused; i++) {
		char name[160];

		snprintf(name, sizeof(name), "%s%s%s", r->unused[i].where, r->unused[i].where[0] ? "." : "",
			 r->unused[i].name);
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(name)))
			return 0;
	}
	return a != NULL;
}

static int add_mtplx(cJSON *o, const struct fg_verify_result *r)
{
	const char *reasons[FG_VERIFY_MAX_REASONS];

	if (!r->has_mtplx)
		return 1;
	for (size_t i = 0; i < r->n_mtplx_reasons; i++)
		reasons[i] = r->mtplx_reasons[i];
	if (!(r->has_mtplx_verdict ? cJSON_AddStringToObject(o, "mtplx_verdict", r->mtplx_verdict) != NULL
				   : cJSON_AddNullToObject(o, "mtplx_verdict") != NULL))
		return 0;
	if (r->has_mtplx_reasons && !add_strings(o, "mtplx_failure_reasons", reasons, r->n_mtplx_reasons))
		return 0;
	return cJSON_AddStringToObject(o, "mtplx_verdict_at", r->mtplx_verdict_at ? r->mtplx_verdict_at : "") &&
	       cJSON_AddBoolToObject(o, "agrees", r->agrees);
}

cJSON *fg_verify_result_json(const struct fg_verify_result *r)
{
	cJSON *o = cJSON_CreateObject(), *sp, *sk;
	int ok;

	if (!o)
		return NULL;
	ok = cJSON_AddStringToObject(o, "schema", FG_VERDICT_SCHEMA) &&
	     cJSON_AddStringToObject(o, "verdict", r->verdict->row->name) &&
	     cJSON_AddStringToObject(o, "severity", fg_severity_name(r->verdict->row->severity));
	if (ok)
		ok = r->best_depth >= 0 ? cJSON_AddNumberToObject(o, "best_depth", r->best_depth) != NULL
					: cJSON_AddNullToObject(o, "best_depth") != NULL;
	sp = ok ? cJSON_AddObjectToObject(o, "speedups") : NULL;
	ok = sp != NULL;
	for (size_t i = 0; ok && i < r->n_speedups; i++) {
		char key[16];

		snprintf(key, sizeof(key), "%d", r->speedups[i].depth);
		ok = cJSON_AddNumberToObject(sp, key, round3(r->speedups[i].speedup)) != NULL;
	}
	if (ok)
		ok = r->best_accept_depth >= 0
			     ? cJSON_AddNumberToObject(o, "best_first_acceptance",
						       r->best_first_acceptance) != NULL
			     : cJSON_AddNullToObject(o, "best_first_acceptance") != NULL;
	ok = ok && add_label(o, "runtime", r->runtime) && add_label(o, "hardware", r->hardware);
	ok = ok && cJSON_AddStringToObject(o, "source_format", fg_verify_format_name(r->format)) &&
	     cJSON_AddNumberToObject(o, "threshold", r->collapse_threshold) &&
	     add_strings(o, "failure_reasons", r->reasons, r->n_reasons) &&
	     add_rows(o, "acceptance_collapsed", r, r->collapsed, r->n_collapsed, VIEW_COLLAPSED) &&
	     add_rows(o, "quality_rejected", r, r->rejected, r->n_rejected, VIEW_REJECTED) &&
	     add_evidence(o, r) && add_mtplx(o, r) && add_unused(o, r);
	sk = ok ? cJSON_AddArrayToObject(o, "skipped_rows") : NULL;
	ok = sk != NULL;
	for (size_t i = 0; ok && i < r->n_skipped && i < FG_VERIFY_MAX_SKIPPED; i++)
		ok = cJSON_AddItemToArray(sk, cJSON_CreateString(r->skipped[i])) != 0;
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}
