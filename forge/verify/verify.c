/*
 * verify.c: the MTP verdict from verification rows (docs/interfaces.md section 3).
 *
 * Parsing is strict because the rows decide whether an artifact ships: a
 * typo'd depth or a tok/s of -1 must be a clear error naming the row and the
 * field, never a silent verdict.  The decision first reduces the rows to a few
 * facts (the fastest quality-passing depth that beats plain decode, whether a
 * faster depth failed quality, the best first-position acceptance), then walks
 * the verdict table, whose rows are in rule order and each carry a predicate
 * over those facts; the first that holds decides.  Adding a verdict is adding
 * a row.
 */
#include "forge/verify/verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the rules look at, computed once from the rows. */
struct verify_facts {
	double threshold;
	int win_depth;          /* fastest depth > 0 beating AR, quality not false; -1 */
	int failed_faster;      /* some depth > 0 beat AR but failed quality */
	int accept_depth;       /* depth with the best acceptance[0], or -1 when none report it */
	double best_accept;
};

static int holds_depth_wins(const struct verify_facts *f)
{
	return f->win_depth >= 0;
}

static int holds_quality_failed(const struct verify_facts *f)
{
	return f->failed_faster;
}

static int holds_collapsed(const struct verify_facts *f)
{
	/* Rows without acceptance data cannot show a collapse. */
	return f->accept_depth >= 0 && f->best_accept <= f->threshold;
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

/* An optional string field copied into buf (of len bytes); absent leaves "". */
static int parse_label(char *buf, size_t len, const cJSON *doc, const char *field,
		       struct fg_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, field);
	size_t n;

	buf[0] = '\0';
	if (!v)
		return 0;
	if (!cJSON_IsString(v) || !v->valuestring)
		return fg_err_set(err, FG_EINPUT, "\"%s\" is not a string", field);
	n = strlen(v->valuestring);
	if (n >= len)
		return fg_err_set(err, FG_EINPUT, "\"%s\" is longer than %zu bytes", field, len - 1);
	memcpy(buf, v->valuestring, n + 1);
	return 0;
}

static int parse_depth(struct fg_verify_row *row, const cJSON *o, int i, struct fg_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "depth");
	double d;

	if (!v)
		return fg_err_set(err, FG_EINPUT, "rows[%d]: \"depth\" is missing", i);
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || floor(v->valuedouble) != v->valuedouble)
		return fg_err_set(err, FG_EINPUT, "rows[%d]: \"depth\" is not an integer", i);
	d = v->valuedouble;
	if (d < 0 || d > FG_VERIFY_MAX_DEPTH)
		return fg_err_set(err, FG_EINPUT, "rows[%d]: \"depth\" %g is outside 0..%d", i, d,
				  FG_VERIFY_MAX_DEPTH);
	row->depth = (int)d;
	return 0;
}

static int parse_tok_s(struct fg_verify_row *row, const cJSON *o, int i, struct fg_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "tok_s");

	if (!v)
		return fg_err_set(err, FG_EINPUT, "rows[%d]: \"tok_s\" is missing", i);
	if (!cJSON_IsNumber(v))
		return fg_err_set(err, FG_EINPUT, "rows[%d]: \"tok_s\" is not a number", i);
	if (!isfinite(v->valuedouble))
		return fg_err_set(err, FG_EINPUT, "rows[%d]: \"tok_s\" is not finite", i);
	if (v->valuedouble < 0)
		return fg_err_set(err, FG_EINPUT, "rows[%d]: \"tok_s\" is negative (%g)", i,
				  v->valuedouble);
	/* Depth 0 is the divisor of every speed-up. */
	if (row->depth == 0 && v->valuedouble <= 0)
		return fg_err_set(err, FG_EINPUT,
				  "rows[%d]: \"tok_s\" at depth 0 must be positive (got %g)", i,
				  v->valuedouble);
	row->tok_s = v->valuedouble;
	return 0;
}

static int parse_acceptance(struct fg_verify_row *row, const cJSON *o, int i, struct fg_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "acceptance");
	const cJSON *a;
	int n, k = 0;

	row->n_accept = 0;
	if (!v)
		return 0;
	if (!cJSON_IsArray(v))
		return fg_err_set(err, FG_EINPUT, "rows[%d]: \"acceptance\" is not an array", i);
	n = cJSON_GetArraySize(v);
	if (n > FG_VERIFY_MAX_ACCEPT)
		return fg_err_set(err, FG_EINPUT,
				  "rows[%d]: \"acceptance\" has %d entries, more than %d", i, n,
				  FG_VERIFY_MAX_ACCEPT);
	cJSON_ArrayForEach(a, v) {
		if (!cJSON_IsNumber(a))
			return fg_err_set(err, FG_EINPUT,
					  "rows[%d]: \"acceptance\"[%d] is not a number", i, k);
		/* Written so that NaN fails too. */
		if (!(a->valuedouble >= 0.0 && a->valuedouble <= 1.0))
			return fg_err_set(err, FG_EINPUT,
					  "rows[%d]: \"acceptance\"[%d] is %g, outside [0, 1]", i, k,
					  a->valuedouble);
		row->accept[k++] = a->valuedouble;
	}
	row->n_accept = (size_t)k;
	return 0;
}

static int parse_quality(struct fg_verify_row *row, const cJSON *o, int i, struct fg_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "quality_passed");

	row->quality = -1;
	if (!v)
		return 0;
	if (!cJSON_IsBool(v))
		return fg_err_set(err, FG_EINPUT, "rows[%d]: \"quality_passed\" is not a boolean", i);
	row->quality = cJSON_IsTrue(v) ? 1 : 0;
	return 0;
}

int fg_verify_parse(struct fg_verify_input *out, const cJSON *doc, struct fg_err *err)
{
	struct fg_verify_input in;
	int seen[FG_VERIFY_MAX_DEPTH + 1];
	const cJSON *rows, *schema, *o;
	int n, i = 0, rc = 0;

	memset(&in, 0, sizeof(in));
	for (int d = 0; d <= FG_VERIFY_MAX_DEPTH; d++)
		seen[d] = -1;
	if (!cJSON_IsObject(doc))
		return fg_err_set(err, FG_EINPUT, "verification document is not a JSON object");
	schema = cJSON_GetObjectItemCaseSensitive(doc, "schema");
	if (schema && (!cJSON_IsString(schema) || !schema->valuestring))
		return fg_err_set(err, FG_EINPUT, "\"schema\" is not a string");
	if (schema && strcmp(schema->valuestring, FG_VERIFY_SCHEMA) != 0)
		return fg_err_set(err, FG_EINPUT, "\"schema\" is '%.80s', expected '%s'",
				  schema->valuestring, FG_VERIFY_SCHEMA);
	rc = parse_label(in.hardware, sizeof(in.hardware), doc, "hardware", err);
	if (rc)
		return rc;
	rc = parse_label(in.runtime, sizeof(in.runtime), doc, "runtime", err);
	if (rc)
		return rc;
	rows = cJSON_GetObjectItemCaseSensitive(doc, "rows");
	if (!rows)
		return fg_err_set(err, FG_EINPUT, "no \"rows\" array");
	if (!cJSON_IsArray(rows))
		return fg_err_set(err, FG_EINPUT, "\"rows\" is not an array");
	n = cJSON_GetArraySize(rows);
	if (n == 0)
		return fg_err_set(err, FG_EINPUT, "\"rows\" is empty");
	if (n > FG_VERIFY_MAX_ROWS)
		return fg_err_set(err, FG_EINPUT, "\"rows\" has %d rows, more than the cap of %d", n,
				  FG_VERIFY_MAX_ROWS);
	in.rows = calloc((size_t)n, sizeof(*in.rows));
	if (!in.rows)
		return fg_err_set(err, FG_ENOMEM, "out of memory for %d verification rows", n);
	cJSON_ArrayForEach(o, rows) {
		struct fg_verify_row *row = &in.rows[i];

		if (!cJSON_IsObject(o)) {
			rc = fg_err_set(err, FG_EINPUT, "rows[%d] is not an object", i);
			goto out;
		}
		if ((rc = parse_depth(row, o, i, err)) || (rc = parse_tok_s(row, o, i, err)) ||
		    (rc = parse_acceptance(row, o, i, err)) || (rc = parse_quality(row, o, i, err)))
			goto out;
		if (seen[row->depth] >= 0) {
			rc = fg_err_set(err, FG_EINPUT, "rows[%d]: depth %d repeats rows[%d]", i,
					row->depth, seen[row->depth]);
			goto out;
		}
		seen[row->depth] = i++;
	}
	in.n_rows = (size_t)i;
	if (seen[0] < 0) {
		rc = fg_err_set(err, FG_EINPUT, "rows have no depth 0 (plain decode) to compare against");
		goto out;
	}
	*out = in;
	in.rows = NULL;
out:
	free(in.rows);
	return rc;
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

int fg_verify_decide(const struct fg_verify_input *in, double collapse_threshold,
		     struct fg_verify_result *out, struct fg_err *err)
{
	const struct fg_verify_row *by_depth[FG_VERIFY_MAX_DEPTH + 1] = { 0 };
	struct verify_facts f = { collapse_threshold, -1, 0, -1, 0.0 };
	struct fg_verify_result r;
	double ar, best_win = 0.0;
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

	memset(&r, 0, sizeof(r));
	ar = by_depth[0]->tok_s;
	r.ar_tok_s = ar;
	r.collapse_threshold = collapse_threshold;
	/* Ascending depth, so on equal speed-ups the shallower depth is kept. */
	for (int d = 1; d <= FG_VERIFY_MAX_DEPTH; d++) {
		const struct fg_verify_row *row = by_depth[d];
		double s;

		if (!row)
			continue;
		s = row->tok_s / ar;
		r.speedups[r.n_speedups].depth = d;
		r.speedups[r.n_speedups++].speedup = s;
		if (s > 1.0 && row->quality != 0 && (f.win_depth < 0 || s > best_win)) {
			f.win_depth = d;
			best_win = s;
		}
		if (s > 1.0 && row->quality == 0)
			f.failed_faster = 1;
		if (row->n_accept > 0 && (f.accept_depth < 0 || row->accept[0] > f.best_accept)) {
			f.accept_depth = d;
			f.best_accept = row->accept[0];
		}
	}
	for (rule = 0; rule < N_RULES; rule++)
		if (rules[rule].holds(&f))
			break;
	if (rule == N_RULES)
		return fg_err_set(err, FG_EINTERNAL, "no verdict rule matched");
	r.verdict = &rules[rule].verdict;
	r.best_depth = rules[rule].names_depth ? f.win_depth : -1;
	r.best_accept_depth = f.accept_depth;
	r.best_first_acceptance = f.accept_depth >= 0 ? f.best_accept : 0.0;
	memcpy(r.hardware, in->hardware, sizeof(r.hardware));
	memcpy(r.runtime, in->runtime, sizeof(r.runtime));
	r.hardware[sizeof(r.hardware) - 1] = '\0';
	r.runtime[sizeof(r.runtime) - 1] = '\0';
	*out = r;
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

cJSON *fg_verify_result_json(const struct fg_verify_result *r)
{
	cJSON *o = cJSON_CreateObject(), *sp;
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
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}
