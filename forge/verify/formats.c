/*
 * formats.c: reading a verification document into rows (verify.h).
 *
 * forged.verification.v1 is forged's own; the others are what MTPLX writes,
 * accepted as written (README.md "Verification rows"):
 *
 *   mtplx.verify          verify.json: {rows, verdict?, failure_reasons?}
 *   mtplx.build_outcome   build_outcome.json: verify_rows and speed_evidence
 *   mtplx.speed_evidence  a speed_evidence object: forge_verify_rows
 *   mtplx.runtime         mtplx_runtime.json: speed_evidence.forge_verify_rows
 *   mtplx.tune            the `mtplx tune` payload: results (mode "AR"/"D1"..,
 *                         depth null for AR, acceptance_by_depth)
 *
 * MTPLX writes no `schema`; a document without one is read as MTPLX's only
 * when its shape says so.  Every object's fields are checked against a table
 * first: a field no table names is an error naming it (all of them at once,
 * before any value is looked at, so a typo is reported as a typo); a field
 * MTPLX writes that the verdict does not use is accepted and listed.  The
 * rows are then read the way MTPLX reads them: `_verify_row_from_mapping` for
 * verify rows, `_verify_rows_from_tune_payload` for tune rows (depth null
 * with mode "AR" is depth 0, acceptance_by_depth is acceptance_by_position,
 * a row without tok/s is skipped, as there, and described).
 */
#include "forge/verify/verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum use {
	USED,   /* read by forged (or a forged label) */
	KEPT,   /* written by MTPLX, not used by the verdict: accepted and listed */
};

struct field {
	const char *name;
	enum use use;
};

#define END { NULL, USED }

/* ---- the field tables ---- */

static const struct field forged_doc[] = {
	{ "schema", USED }, { "hardware", USED }, { "runtime", USED }, { "rows", USED }, END,
};

static const struct field forged_row[] = {
	{ "depth", USED }, { "tok_s", USED }, { "acceptance", USED }, { "quality_passed", USED }, END,
};

/* forged's labels on an MTPLX document (MTPLX writes neither). */
static const struct field labels[] = {
	{ "schema", USED }, { "hardware", USED }, { "runtime", USED }, END,
};

/* verify.json: forge.py writes {"rows", "verdict", "failure_reasons"}. */
static const struct field verify_doc[] = {
	{ "rows", USED }, { "verdict", USED }, { "failure_reasons", USED }, END,
};

/*
 * A verify row (verify.json rows, build_outcome verify_rows, speed_evidence
 * forge_verify_rows): `_row_from_tune_file` and `_verify_row_from_mapping`'s
 * fields, the aliases the latter reads, and summarize_benchmark_quality()'s.
 */
static const struct field mtplx_row[] = {
	{ "depth", USED }, { "tok_s", USED }, { "decode_tok_s", USED }, { "multiplier_vs_ar", USED },
	{ "acceptance_by_position", USED }, { "acceptance_by_depth", USED }, { "verify_time_s", USED },
	{ "elapsed_s", USED }, { "quality_passed", USED }, { "hit_token_budget", USED },
	{ "hit_token_budget_count", USED }, { "finish_reasons", USED },
	{ "validations_total", KEPT }, { "validations_passed", KEPT },
	{ "quality_failure_validations", KEPT }, { "quality_inconclusive_validations", KEPT }, END,
};

/* build_outcome.json (forge.py `_build_outcome_payload`). */
static const struct field outcome_doc[] = {
	{ "verify_rows", USED }, { "speed_evidence", USED }, { "verdict", USED }, { "failure_reasons", USED },
	{ "converted_path", KEPT }, { "phase", KEPT }, { "message", KEPT }, { "diagnostic", KEPT },
	{ "ar_tok_s", KEPT }, { "best_mtp_depth", KEPT }, { "best_mtp_tok_s", KEPT },
	{ "best_mtp_multiplier_vs_ar", KEPT }, { "architecture_id", KEPT }, END,
};

/*
 * speed_evidence (forge.py `_speed_evidence`, stamped with
 * artifact_fingerprint; public_release_blocker and status are what MTPLX's
 * registry reads; artifact, ar_tok_s, mtp_tok_s and mtp_depth are the legacy
 * keys `_verify_rows_from_runtime` falls back to).
 */
#define EVIDENCE_KEPT                                                                              \
	{ "depth", KEPT }, { "tok_s", KEPT }, { "acceptance_by_depth", KEPT },                    \
	{ "greedy_diagnostic", KEPT }, { "quality_rejected", KEPT }, { "acceptance_collapsed", KEPT }, \
	{ "artifact_fingerprint", KEPT }, { "public_release_blocker", KEPT }, { "status", KEPT },  \
	{ "artifact", KEPT }, { "ar_tok_s", KEPT }, { "mtp_tok_s", KEPT }, { "mtp_depth", KEPT }

static const struct field evidence[] = {
	{ "forge_verify_rows", USED }, { "verdict", USED }, { "failure_reasons", USED }, EVIDENCE_KEPT, END,
};

/* build_outcome's copy of speed_evidence when verify_rows are read instead. */
static const struct field evidence_copy[] = {
	{ "forge_verify_rows", KEPT }, { "verdict", KEPT }, { "failure_reasons", KEPT }, EVIDENCE_KEPT, END,
};

/* mtplx_runtime.json (forge.py `_stamp_runtime_metadata`, registry.py's RuntimeContract). */
static const struct field runtime_doc[] = {
	{ "speed_evidence", USED }, { "mtplx_version", USED }, { "verified_on", USED },
	{ "arch_id", KEPT }, { "mtp_depth_max", KEPT }, { "recommended_profile", KEPT }, { "sampler", KEPT },
	{ "exactness_baseline", KEPT }, { "mtp_contract", KEPT }, { "mtp_sidecar", KEPT }, { "vision", KEPT },
	{ "base_trunk", KEPT }, { "artifact_role", KEPT }, { "forge_provenance", KEPT },
	{ "recommended_draft_lm_head", KEPT }, { "recommended_draft_sampler", KEPT },
	{ "runtime_env_overrides", KEPT }, { "min_engine_version", KEPT },
	{ "recommended_generation_mode", KEPT }, { "status", KEPT }, END,
};

/* The tune payload (public.py `_tune_payload`; rows is the alias forge.py reads). */
static const struct field tune_doc[] = {
	{ "schema", USED }, { "results", USED }, { "rows", USED }, { "best_multiplier", USED },
	{ "action", KEPT }, { "run_id", KEPT }, { "model", KEPT }, { "profile", KEPT }, { "suite", KEPT },
	{ "control_field", KEPT }, { "settings", KEPT }, { "best", KEPT }, { "hardware", KEPT },
	{ "software", KEPT }, { "backend", KEPT }, { "thermal", KEPT }, { "diagnostics", KEPT },
	{ "state_key", KEPT }, { "artifacts", KEPT }, END,
};

/* A tune result row (public.py `_tune_candidate_summary`, `_annotate_multipliers`, telemetry). */
static const struct field tune_row[] = {
	{ "mode", USED }, { "depth", USED }, { "tok_s", USED }, { "decode_tok_s", USED },
	{ "multiplier_vs_ar", USED }, { "acceptance_by_depth", USED }, { "acceptance_by_position", USED },
	{ "verify_time_s", USED }, { "elapsed_s", USED }, { "quality_passed", USED },
	{ "hit_token_budget", USED }, { "hit_token_budget_count", USED }, { "finish_reasons", USED },
	{ "error", USED },
	{ "control_field", KEPT }, { "draft_block_size", KEPT }, { "candidate", KEPT }, { "returncode", KEPT },
	{ "artifact", KEPT }, { "stdout", KEPT }, { "command", KEPT }, { "child_error", KEPT },
	{ "detail", KEPT }, { "model", KEPT }, { "end_to_end_tok_s", KEPT }, { "generated_tokens", KEPT },
	{ "prompt_eval_time_s", KEPT }, { "decode_elapsed_s", KEPT }, { "generation_windows", KEPT },
	{ "generation_window_s", KEPT }, { "verify_calls", KEPT }, { "verify_ms_per_call", KEPT },
	{ "verify_forward_ms_per_call", KEPT }, { "verify_eval_ms_per_call", KEPT },
	{ "verify_hidden_eval_ms_per_call", KEPT }, { "accepted_by_depth", KEPT },
	{ "drafted_by_depth", KEPT }, { "acceptance_percent_by_depth", KEPT },
	{ "mean_accept_probability_by_depth", KEPT }, { "speedup_vs_ar", KEPT }, { "telemetry", KEPT },
	{ "validations_total", KEPT }, { "validations_passed", KEPT },
	{ "quality_failure_validations", KEPT }, { "quality_inconclusive_validations", KEPT }, END,
};

/* ---- formats ---- */

static const struct {
	enum fg_verify_format format;
	const char *schema;
	const char *what;       /* for messages */
} formats[] = {
	{ FG_VF_FORGED, FG_VERIFY_SCHEMA, "a forged.verification.v1 document" },
	{ FG_VF_MTPLX_VERIFY, FG_VERIFY_SCHEMA_MTPLX_VERIFY, "an MTPLX verify.json" },
	{ FG_VF_MTPLX_OUTCOME, FG_VERIFY_SCHEMA_MTPLX_OUTCOME, "an MTPLX build_outcome.json" },
	{ FG_VF_MTPLX_EVIDENCE, FG_VERIFY_SCHEMA_MTPLX_EVIDENCE, "an MTPLX speed_evidence object" },
	{ FG_VF_MTPLX_RUNTIME, FG_VERIFY_SCHEMA_MTPLX_RUNTIME, "an MTPLX mtplx_runtime.json" },
	{ FG_VF_MTPLX_TUNE, FG_VERIFY_SCHEMA_MTPLX_TUNE, "an MTPLX tune payload" },
};

#define N_FORMATS (sizeof(formats) / sizeof(formats[0]))

const char *fg_verify_format_name(enum fg_verify_format f)
{
	for (size_t i = 0; i < N_FORMATS; i++)
		if (formats[i].format == f)
			return formats[i].schema;
	return "unknown";
}

static const char *format_what(enum fg_verify_format f)
{
	for (size_t i = 0; i < N_FORMATS; i++)
		if (formats[i].format == f)
			return formats[i].what;
	return "a verification document";
}

/* ---- the parse context: unknown fields are collected over the whole document ---- */

struct pctx {
	struct fg_verify_input *in;
	struct fg_err *err;
	char unknown[360];      /* "rows[1].foo, bar" */
	size_t n_unknown;
	int unknown_truncated;
};

static const struct field *field_find(const struct field *t, const char *name)
{
	for (; t && t->name; t++)
		if (strcmp(t->name, name) == 0)
			return t;
	return NULL;
}

static void note_unused(struct fg_verify_input *in, const char *where, const char *name)
{
	for (size_t i = 0; i < in->n_unused; i++)
		if (strcmp(in->unused[i].where, where) == 0 && strcmp(in->unused[i].name, name) == 0)
			return;
	if (in->n_unused < FG_VERIFY_MAX_UNUSED) {
		in->unused[in->n_unused].where = where;
		in->unused[in->n_unused++].name = name;
	}
}

/* Append path + name (made printable, at most 40 bytes) to the unknown list. */
static void note_unknown(struct pctx *c, const char *path, const char *name)
{
	char item[96], clean[41];
	size_t len = strlen(c->unknown), k = 0;

	for (; name[k] && k < sizeof(clean) - 1; k++)
		clean[k] = (name[k] >= 0x20 && name[k] < 0x7f && name[k] != '"') ? name[k] : '?';
	clean[k] = '\0';
	snprintf(item, sizeof(item), "%s%s%s%s%s", c->n_unknown ? ", " : "", path, path[0] ? "." : "", clean,
		 name[k] ? "..." : "");
	c->n_unknown++;
	if (c->unknown_truncated)
		return;
	if (len + strlen(item) + 1 > sizeof(c->unknown)) {
		c->unknown_truncated = 1;
		return;
	}
	memcpy(c->unknown + len, item, strlen(item) + 1);
}

/*
 * Check every field of o against the tables t1 and t2 (t2 may be NULL):
 * unknown ones are collected under path ("" for the document, "rows[3]"),
 * kept ones listed under where ("", "rows[]").
 */
static void check_fields(struct pctx *c, const cJSON *o, const struct field *t1, const struct field *t2,
			 const char *path, const char *where)
{
	const cJSON *kv;

	if (!cJSON_IsObject(o))
		return;
	cJSON_ArrayForEach(kv, o) {
		const struct field *f = field_find(t1, kv->string);

		if (!f)
			f = field_find(t2, kv->string);
		if (!f)
			note_unknown(c, path, kv->string);
		else if (f->use == KEPT)
			note_unused(c->in, where, f->name);
	}
}

/* Check the fields of every object row of arr, named name[i]. */
static void check_rows(struct pctx *c, const cJSON *arr, const char *name, const struct field *t, const char *where)
{
	const cJSON *o;
	int i = 0;

	if (!cJSON_IsArray(arr))
		return;
	cJSON_ArrayForEach(o, arr) {
		char path[80];

		snprintf(path, sizeof(path), "%s[%d]", name, i++);
		check_fields(c, o, t, NULL, path, where);
		if (i > FG_VERIFY_MAX_ROWS)
			break;
	}
}

static int unknown_fail(struct pctx *c, enum fg_verify_format f)
{
	if (!c->n_unknown)
		return 0;
	if (f == FG_VF_FORGED)
		return fg_err_set(c->err, FG_EINPUT,
				  "unknown field%s in %s: %s%s (it has schema, hardware, runtime and rows; a row has "
				  "depth, tok_s, acceptance and quality_passed)",
				  c->n_unknown > 1 ? "s" : "", format_what(f), c->unknown,
				  c->unknown_truncated ? ", ..." : "");
	return fg_err_set(c->err, FG_EINPUT, "unknown field%s in %s: %s%s (not a field MTPLX writes there)",
			  c->n_unknown > 1 ? "s" : "", format_what(f), c->unknown,
			  c->unknown_truncated ? ", ..." : "");
}

/* ---- values ---- */

static int is_absent(const cJSON *v)
{
	return !v || cJSON_IsNull(v);
}

/* An optional string field copied into buf (of len bytes); absent leaves "". */
static int parse_label(char *buf, size_t len, const cJSON *doc, const char *field, struct fg_err *err)
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

static int parse_depth_value(int *out, const cJSON *v, const char *p, struct fg_err *err)
{
	double d;

	if (!v)
		return fg_err_set(err, FG_EINPUT, "%s: \"depth\" is missing", p);
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || floor(v->valuedouble) != v->valuedouble)
		return fg_err_set(err, FG_EINPUT, "%s: \"depth\" is not an integer", p);
	d = v->valuedouble;
	if (d < 0 || d > FG_VERIFY_MAX_DEPTH)
		return fg_err_set(err, FG_EINPUT, "%s: \"depth\" %g is outside 0..%d", p, d, FG_VERIFY_MAX_DEPTH);
	*out = (int)d;
	return 0;
}

static int parse_tok_s_value(struct fg_verify_row *row, const cJSON *v, const char *name, const char *p,
			     struct fg_err *err)
{
	if (!v)
		return fg_err_set(err, FG_EINPUT, "%s: \"%s\" is missing", p, name);
	if (!cJSON_IsNumber(v))
		return fg_err_set(err, FG_EINPUT, "%s: \"%s\" is not a number", p, name);
	if (!isfinite(v->valuedouble))
		return fg_err_set(err, FG_EINPUT, "%s: \"%s\" is not finite", p, name);
	if (v->valuedouble < 0)
		return fg_err_set(err, FG_EINPUT, "%s: \"%s\" is negative (%g)", p, name, v->valuedouble);
	/* Depth 0 is the divisor of every speed-up. */
	if (row->depth == 0 && v->valuedouble <= 0)
		return fg_err_set(err, FG_EINPUT, "%s: \"%s\" at depth 0 must be positive (got %g)", p, name,
				  v->valuedouble);
	row->tok_s = v->valuedouble;
	return 0;
}

/* An acceptance array; skip_null: MTPLX's reading, which drops non-numbers (null is all it writes). */
static int parse_acceptance_value(struct fg_verify_row *row, const cJSON *v, const char *name, const char *p,
				  int skip_null, struct fg_err *err)
{
	const cJSON *a;
	int k = 0, n = 0;

	row->n_accept = 0;
	if (!v || (skip_null && cJSON_IsNull(v)))
		return 0;
	if (!cJSON_IsArray(v))
		return fg_err_set(err, FG_EINPUT, "%s: \"%s\" is not an array", p, name);
	cJSON_ArrayForEach(a, v) {
		if (skip_null && cJSON_IsNull(a)) {
			k++;
			continue;
		}
		if (n == FG_VERIFY_MAX_ACCEPT)
			return fg_err_set(err, FG_EINPUT, "%s: \"%s\" has %d entries, more than %d", p, name,
					  cJSON_GetArraySize(v), FG_VERIFY_MAX_ACCEPT);
		if (!cJSON_IsNumber(a))
			return fg_err_set(err, FG_EINPUT, "%s: \"%s\"[%d] is not a number", p, name, k);
		/* Written so that NaN fails too. */
		if (!(a->valuedouble >= 0.0 && a->valuedouble <= 1.0))
			return fg_err_set(err, FG_EINPUT, "%s: \"%s\"[%d] is %g, outside [0, 1]", p, name, k,
					  a->valuedouble);
		row->accept[n++] = a->valuedouble;
		k++;
	}
	row->n_accept = (size_t)n;
	return 0;
}

static int parse_quality_value(struct fg_verify_row *row, const cJSON *v, const char *p, int null_ok,
			       struct fg_err *err)
{
	row->quality = -1;
	if (!v || (null_ok && cJSON_IsNull(v)))
		return 0;
	if (!cJSON_IsBool(v))
		return fg_err_set(err, FG_EINPUT, "%s: \"quality_passed\" is not a boolean", p);
	row->quality = cJSON_IsTrue(v) ? 1 : 0;
	return 0;
}

/* An optional finite, non-negative number (null allowed): *has 0 when absent. */
static int parse_opt_number(int *has, double *out, const cJSON *o, const char *name, const char *p,
			    struct fg_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	*has = 0;
	if (is_absent(v))
		return 0;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0)
		return fg_err_set(err, FG_EINPUT, "%s: \"%s\" is not a finite number >= 0", p, name);
	*has = 1;
	*out = v->valuedouble;
	return 0;
}

/* The fields MTPLX's rows carry beyond forged's: multiplier, verify time, budget, finish reasons. */
static int parse_mtplx_extras(struct fg_verify_row *row, const cJSON *o, const char *p, struct fg_err *err)
{
	const cJSON *v;
	double t = 0.0, count = 0.0;
	int has = 0, rc;
	char *text;

	if ((rc = parse_opt_number(&row->has_multiplier, &row->multiplier, o, "multiplier_vs_ar", p, err)))
		return rc;
	/* float(row.get("verify_time_s") or row.get("elapsed_s") or 0.0): the first non-zero. */
	if ((rc = parse_opt_number(&has, &t, o, "verify_time_s", p, err)))
		return rc;
	if (!has || t == 0.0) {
		if ((rc = parse_opt_number(&has, &t, o, "elapsed_s", p, err)))
			return rc;
		if (!has)
			t = 0.0;
	}
	row->verify_time_s = t;
	v = cJSON_GetObjectItemCaseSensitive(o, "hit_token_budget");
	if (!is_absent(v)) {
		if (!cJSON_IsBool(v))
			return fg_err_set(err, FG_EINPUT, "%s: \"hit_token_budget\" is not a boolean", p);
		row->has_hit_budget = 1;
		row->hit_budget = cJSON_IsTrue(v);
	}
	if ((rc = parse_opt_number(&row->has_hit_budget_count, &count, o, "hit_token_budget_count", p, err)))
		return rc;
	if (row->has_hit_budget_count) {
		if (floor(count) != count || count > 1e15)
			return fg_err_set(err, FG_EINPUT, "%s: \"hit_token_budget_count\" is not an integer", p);
		row->hit_budget_count = (long long)count;
	}
	v = cJSON_GetObjectItemCaseSensitive(o, "finish_reasons");
	row->finish_reasons[0] = '\0';
	if (!is_absent(v)) {
		if (!cJSON_IsObject(v))
			return fg_err_set(err, FG_EINPUT, "%s: \"finish_reasons\" is not an object", p);
		text = cJSON_PrintUnformatted(v);
		if (!text)
			return fg_err_set(err, FG_ENOMEM, "out of memory reading %s", p);
		if (strlen(text) >= sizeof(row->finish_reasons)) {
			free(text);
			return fg_err_set(err, FG_EINPUT, "%s: \"finish_reasons\" is longer than %zu bytes as JSON", p,
					  sizeof(row->finish_reasons) - 1);
		}
		memcpy(row->finish_reasons, text, strlen(text) + 1);
		free(text);
	}
	return 0;
}

/* The first of o[a], o[b] that is present and not null (NULL when neither), and its name. */
static const cJSON *either(const cJSON *o, const char *a, const char *b, const char **name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);

	*name = a;
	if (!is_absent(v))
		return v;
	v = cJSON_GetObjectItemCaseSensitive(o, b);
	if (v)
		*name = b;
	return is_absent(v) ? NULL : v;
}

enum dialect {
	D_FORGED,   /* forged.verification.v1 */
	D_MTPLX,    /* a verify row (`_verify_row_from_mapping`) */
	D_TUNE,     /* a tune result row (`_verify_rows_from_tune_payload`) */
};

/* Why a tune row is skipped, as MTPLX skips it (no tok/s): appended to in->skipped. */
static void note_skipped(struct fg_verify_input *in, const cJSON *o, const char *p)
{
	const cJSON *mode = cJSON_GetObjectItemCaseSensitive(o, "mode");
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(o, "error");

	if (in->n_skipped < FG_VERIFY_MAX_SKIPPED)
		snprintf(in->skipped[in->n_skipped], sizeof(in->skipped[0]), "%s (%.12s): no tok_s%s%.60s", p,
			 cJSON_IsString(mode) ? mode->valuestring : "?", cJSON_IsString(error) ? ": " : "",
			 cJSON_IsString(error) ? error->valuestring : "");
	in->n_skipped++;
}

/* Row o (named p) in dialect d into *row; *skip set when MTPLX would skip it. */
static int parse_row(struct pctx *c, struct fg_verify_row *row, const cJSON *o, const char *p, enum dialect d,
		     int *skip)
{
	const cJSON *v;
	const char *name;
	int rc;

	*skip = 0;
	memset(row, 0, sizeof(*row));
	if (!cJSON_IsObject(o))
		return fg_err_set(c->err, FG_EINPUT, "%s is not an object", p);
	v = cJSON_GetObjectItemCaseSensitive(o, "depth");
	if (d == D_TUNE && is_absent(v)) {
		const cJSON *mode = cJSON_GetObjectItemCaseSensitive(o, "mode");

		/* depth_value = 0 if depth is None and row.get("mode") == "AR" */
		if (!cJSON_IsString(mode) || strcmp(mode->valuestring, "AR") != 0)
			return fg_err_set(c->err, FG_EINPUT, "%s: \"depth\" is %s and \"mode\" is not \"AR\"", p,
					  v ? "null" : "missing");
		row->depth = 0;
	} else if ((rc = parse_depth_value(&row->depth, v, p, c->err))) {
		return rc;
	}
	if (d == D_FORGED) {
		if ((rc = parse_tok_s_value(row, cJSON_GetObjectItemCaseSensitive(o, "tok_s"), "tok_s", p, c->err)) ||
		    (rc = parse_acceptance_value(row, cJSON_GetObjectItemCaseSensitive(o, "acceptance"),
						 "acceptance", p, 0, c->err)))
			return rc;
		return parse_quality_value(row, cJSON_GetObjectItemCaseSensitive(o, "quality_passed"), p, 0, c->err);
	}
	/* row.get("tok_s") or row.get("decode_tok_s") */
	v = either(o, "tok_s", "decode_tok_s", &name);
	if (!v && d == D_TUNE) {
		*skip = 1;
		note_skipped(c->in, o, p);
		return 0;
	}
	if ((rc = parse_tok_s_value(row, v, v ? name : "tok_s", p, c->err)))
		return rc;
	if (d == D_TUNE) {
		/* row.get("acceptance_by_depth") or row.get("acceptance_by_position") or []: the first non-empty. */
		v = cJSON_GetObjectItemCaseSensitive(o, "acceptance_by_depth");
		name = "acceptance_by_depth";
		if (is_absent(v) || (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0)) {
			v = cJSON_GetObjectItemCaseSensitive(o, "acceptance_by_position");
			name = "acceptance_by_position";
		}
	} else {
		/* acceptance_by_position, or acceptance_by_depth when that is None */
		v = either(o, "acceptance_by_position", "acceptance_by_depth", &name);
	}
	if ((rc = parse_acceptance_value(row, v, name, p, 1, c->err)) ||
	    (rc = parse_quality_value(row, cJSON_GetObjectItemCaseSensitive(o, "quality_passed"), p, 1, c->err)))
		return rc;
	return parse_mtplx_extras(row, o, p, c->err);
}

/* The rows of arr (named name) in dialect d into in->rows. */
static int parse_rows(struct pctx *c, const cJSON *arr, const char *name, enum dialect d)
{
	struct fg_verify_input *in = c->in;
	int seen[FG_VERIFY_MAX_DEPTH + 1];
	const cJSON *o;
	int n, i = 0, kept = 0, rc;

	for (int k = 0; k <= FG_VERIFY_MAX_DEPTH; k++)
		seen[k] = -1;
	if (!arr)
		return fg_err_set(c->err, FG_EINPUT, "no \"%s\" array", name);
	if (!cJSON_IsArray(arr))
		return fg_err_set(c->err, FG_EINPUT, "\"%s\" is not an array", name);
	n = cJSON_GetArraySize(arr);
	if (n == 0)
		return fg_err_set(c->err, FG_EINPUT, "\"%s\" is empty", name);
	if (n > FG_VERIFY_MAX_ROWS)
		return fg_err_set(c->err, FG_EINPUT, "\"%s\" has %d rows, more than the cap of %d", name, n,
				  FG_VERIFY_MAX_ROWS);
	in->rows = calloc((size_t)n, sizeof(*in->rows));
	if (!in->rows)
		return fg_err_set(c->err, FG_ENOMEM, "out of memory for %d verification rows", n);
	cJSON_ArrayForEach(o, arr) {
		struct fg_verify_row *row = &in->rows[kept];
		char p[80];
		int skip;

		snprintf(p, sizeof(p), "%s[%d]", name, i);
		if ((rc = parse_row(c, row, o, p, d, &skip)))
			return rc;
		if (!skip) {
			if (seen[row->depth] >= 0)
				return fg_err_set(c->err, FG_EINPUT, "%s: depth %d repeats %s[%d]", p, row->depth, name,
						  seen[row->depth]);
			seen[row->depth] = i;
			kept++;
		}
		i++;
	}
	in->n_rows = (size_t)kept;
	if (seen[0] < 0)
		return fg_err_set(c->err, FG_EINPUT, "rows have no depth 0 (plain decode) to compare against");
	return 0;
}

/* MTPLX's own verdict and failure_reasons in o, read at the paths at and at_reasons. */
static int parse_mtplx_verdict(struct pctx *c, const cJSON *o, const char *at, const char *at_reasons)
{
	struct fg_verify_input *in = c->in;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "verdict"), *r;
	int k = 0;

	if (!is_absent(v)) {
		if (!cJSON_IsString(v))
			return fg_err_set(c->err, FG_EINPUT, "\"%s\" is not a string", at);
		if (strlen(v->valuestring) >= sizeof(in->mtplx_verdict))
			return fg_err_set(c->err, FG_EINPUT, "\"%s\" is longer than %zu bytes", at,
					  sizeof(in->mtplx_verdict) - 1);
		memcpy(in->mtplx_verdict, v->valuestring, strlen(v->valuestring) + 1);
		in->has_mtplx_verdict = 1;
	}
	v = cJSON_GetObjectItemCaseSensitive(o, "failure_reasons");
	if (!is_absent(v)) {
		if (!cJSON_IsArray(v))
			return fg_err_set(c->err, FG_EINPUT, "\"%s\" is not an array", at_reasons);
		if (cJSON_GetArraySize(v) > FG_VERIFY_MAX_REASONS)
			return fg_err_set(c->err, FG_EINPUT, "\"%s\" has more than %d entries", at_reasons,
					  FG_VERIFY_MAX_REASONS);
		cJSON_ArrayForEach(r, v) {
			if (!cJSON_IsString(r) || strlen(r->valuestring) >= FG_VERIFY_REASON_MAX)
				return fg_err_set(c->err, FG_EINPUT, "\"%s\"[%d] is not a string of at most %d bytes",
						  at_reasons, k, FG_VERIFY_REASON_MAX - 1);
			memcpy(in->mtplx_reasons[k++], r->valuestring, strlen(r->valuestring) + 1);
		}
		in->n_mtplx_reasons = (size_t)k;
		in->has_mtplx_reasons = 1;
	}
	if (in->has_mtplx_verdict || in->has_mtplx_reasons)
		in->mtplx_verdict_at = at;
	return 0;
}

/* ---- recognising the format ---- */

/* Does any object row of arr have a field of t that forged's rows do not have?  Or field name? */
static int rows_have(const cJSON *arr, const char *name, const struct field *t)
{
	const cJSON *o, *kv;

	cJSON_ArrayForEach(o, arr) {
		if (!cJSON_IsObject(o))
			continue;
		cJSON_ArrayForEach(kv, o) {
			if (name && strcmp(kv->string, name) == 0)
				return 1;
			if (t && field_find(t, kv->string) && !field_find(forged_row, kv->string))
				return 1;
		}
	}
	return 0;
}

static int recognise(const cJSON *doc, enum fg_verify_format *out, struct fg_err *err)
{
	const cJSON *schema = cJSON_GetObjectItemCaseSensitive(doc, "schema");
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "rows");
	const cJSON *ev = cJSON_GetObjectItemCaseSensitive(doc, "speed_evidence");
	int mtplx_rows, forged_rows;

	if (schema) {
		if (!cJSON_IsString(schema) || !schema->valuestring)
			return fg_err_set(err, FG_EINPUT, "\"schema\" is not a string");
		for (size_t i = 0; i < N_FORMATS; i++)
			if (strcmp(schema->valuestring, formats[i].schema) == 0) {
				*out = formats[i].format;
				return 0;
			}
		return fg_err_set(err, FG_EINPUT,
				  "\"schema\" is '%.80s', expected '%s' or one of MTPLX's: %s, %s, %s, %s, %s",
				  schema->valuestring, FG_VERIFY_SCHEMA, FG_VERIFY_SCHEMA_MTPLX_VERIFY,
				  FG_VERIFY_SCHEMA_MTPLX_OUTCOME, FG_VERIFY_SCHEMA_MTPLX_EVIDENCE,
				  FG_VERIFY_SCHEMA_MTPLX_RUNTIME, FG_VERIFY_SCHEMA_MTPLX_TUNE);
	}
	/* No schema: MTPLX's shapes only, each by a key only MTPLX writes. */
	if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(doc, "results"))) {
		*out = FG_VF_MTPLX_TUNE;
		return 0;
	}
	if (cJSON_GetObjectItemCaseSensitive(doc, "verify_rows")) {
		*out = FG_VF_MTPLX_OUTCOME;
		return 0;
	}
	if (cJSON_GetObjectItemCaseSensitive(doc, "forge_verify_rows")) {
		*out = FG_VF_MTPLX_EVIDENCE;
		return 0;
	}
	if (cJSON_IsObject(ev)) {
		*out = cJSON_GetObjectItemCaseSensitive(doc, "phase") ? FG_VF_MTPLX_OUTCOME : FG_VF_MTPLX_RUNTIME;
		return 0;
	}
	if (cJSON_IsArray(rows)) {
		if (rows_have(rows, "mode", NULL)) {
			*out = FG_VF_MTPLX_TUNE;
			return 0;
		}
		mtplx_rows = rows_have(rows, NULL, mtplx_row);
		forged_rows = rows_have(rows, "acceptance", NULL);
		if (!forged_rows && (mtplx_rows || cJSON_GetObjectItemCaseSensitive(doc, "verdict") ||
				     cJSON_GetObjectItemCaseSensitive(doc, "failure_reasons"))) {
			*out = FG_VF_MTPLX_VERIFY;
			return 0;
		}
		if (forged_rows && mtplx_rows)
			return fg_err_set(err, FG_EINPUT,
					  "no \"schema\", and the rows mix forged's \"acceptance\" with MTPLX's fields: "
					  "name the format with \"schema\"");
		if (forged_rows)
			return fg_err_set(err, FG_EINPUT,
					  "no \"schema\": rows with \"acceptance\" are forged.verification.v1, which must "
					  "say so (\"schema\": \"%s\"); only MTPLX's documents are recognised by their shape",
					  FG_VERIFY_SCHEMA);
		return fg_err_set(err, FG_EINPUT,
				  "no \"schema\", and the rows are not recognisably MTPLX's (no acceptance_by_position, "
				  "multiplier_vs_ar, verify_time_s or other MTPLX field, no verdict): name the format "
				  "with \"schema\" ('%s' or '%s')",
				  FG_VERIFY_SCHEMA, FG_VERIFY_SCHEMA_MTPLX_VERIFY);
	}
	return fg_err_set(err, FG_EINPUT,
			  "no \"schema\", and no shape forged recognises: a document names its format with \"schema\" "
			  "('%s'), or has MTPLX's shape: rows with MTPLX's fields (verify.json), verify_rows "
			  "(build_outcome.json), forge_verify_rows or speed_evidence, or results (tune)",
			  FG_VERIFY_SCHEMA);
}

/* ---- the formats ---- */

static int parse_forged(struct pctx *c, const cJSON *doc)
{
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "rows");
	int rc;

	check_fields(c, doc, forged_doc, NULL, "", "");
	check_rows(c, rows, "rows", forged_row, "rows[]");
	if ((rc = unknown_fail(c, FG_VF_FORGED)) ||
	    (rc = parse_label(c->in->hardware, sizeof(c->in->hardware), doc, "hardware", c->err)) ||
	    (rc = parse_label(c->in->runtime, sizeof(c->in->runtime), doc, "runtime", c->err)))
		return rc;
	return parse_rows(c, rows, "rows", D_FORGED);
}

static int parse_labels(struct pctx *c, const cJSON *doc)
{
	int rc = parse_label(c->in->hardware, sizeof(c->in->hardware), doc, "hardware", c->err);

	return rc ? rc : parse_label(c->in->runtime, sizeof(c->in->runtime), doc, "runtime", c->err);
}

static int parse_verify(struct pctx *c, const cJSON *doc)
{
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "rows");
	int rc;

	check_fields(c, doc, verify_doc, labels, "", "");
	check_rows(c, rows, "rows", mtplx_row, "rows[]");
	if ((rc = unknown_fail(c, FG_VF_MTPLX_VERIFY)) || (rc = parse_labels(c, doc)) ||
	    (rc = parse_mtplx_verdict(c, doc, "verdict", "failure_reasons")))
		return rc;
	return parse_rows(c, rows, "rows", D_MTPLX);
}

static int parse_outcome(struct pctx *c, const cJSON *doc)
{
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "verify_rows");
	const cJSON *ev = cJSON_GetObjectItemCaseSensitive(doc, "speed_evidence");
	const char *name = "verify_rows";
	int rc;

	if (ev && !cJSON_IsObject(ev))
		return fg_err_set(c->err, FG_EINPUT, "\"speed_evidence\" is not an object");
	check_fields(c, doc, outcome_doc, labels, "", "");
	if (rows) {
		check_fields(c, ev, evidence_copy, NULL, "speed_evidence", "speed_evidence");
	} else {
		/* No verify_rows: the rows speed_evidence carries. */
		check_fields(c, ev, evidence, NULL, "speed_evidence", "speed_evidence");
		rows = cJSON_GetObjectItemCaseSensitive(ev, "forge_verify_rows");
		name = "speed_evidence.forge_verify_rows";
	}
	check_rows(c, rows, name, mtplx_row,
		   strcmp(name, "verify_rows") == 0 ? "verify_rows[]" : "speed_evidence.forge_verify_rows[]");
	if ((rc = unknown_fail(c, FG_VF_MTPLX_OUTCOME)) || (rc = parse_labels(c, doc)) ||
	    (rc = parse_mtplx_verdict(c, doc, "verdict", "failure_reasons")))
		return rc;
	if (!rows && !ev)
		return fg_err_set(c->err, FG_EINPUT, "no \"verify_rows\" array");
	return parse_rows(c, rows, name, D_MTPLX);
}

/* The rows of a speed_evidence object ev, named prefix ("" or "speed_evidence."). */
static int evidence_rows(struct pctx *c, const cJSON *ev, const char *name)
{
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(ev, "forge_verify_rows");

	if (!rows)
		return fg_err_set(c->err, FG_EINPUT,
				  "no \"%s\" array (speed evidence without it is MTPLX's legacy speed grid, "
				  "which forged does not read)",
				  name);
	return parse_rows(c, rows, name, D_MTPLX);
}

static int parse_evidence(struct pctx *c, const cJSON *doc)
{
	int rc;

	check_fields(c, doc, evidence, labels, "", "");
	check_rows(c, cJSON_GetObjectItemCaseSensitive(doc, "forge_verify_rows"), "forge_verify_rows", mtplx_row,
		   "forge_verify_rows[]");
	if ((rc = unknown_fail(c, FG_VF_MTPLX_EVIDENCE)) || (rc = parse_labels(c, doc)) ||
	    (rc = parse_mtplx_verdict(c, doc, "verdict", "failure_reasons")))
		return rc;
	return evidence_rows(c, doc, "forge_verify_rows");
}

static int parse_runtime(struct pctx *c, const cJSON *doc)
{
	const cJSON *ev = cJSON_GetObjectItemCaseSensitive(doc, "speed_evidence");
	const cJSON *version = cJSON_GetObjectItemCaseSensitive(doc, "mtplx_version");
	const cJSON *hw = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "verified_on"),
							    "hardware");
	int rc;

	check_fields(c, doc, runtime_doc, labels, "", "");
	check_fields(c, ev, evidence, NULL, "speed_evidence", "speed_evidence");
	check_rows(c, cJSON_GetObjectItemCaseSensitive(ev, "forge_verify_rows"), "speed_evidence.forge_verify_rows",
		   mtplx_row, "speed_evidence.forge_verify_rows[]");
	if ((rc = unknown_fail(c, FG_VF_MTPLX_RUNTIME)))
		return rc;
	if (!cJSON_IsObject(ev))
		return fg_err_set(c->err, FG_EINPUT, "no \"speed_evidence\" object");
	/* Labels: forged's if given, else what MTPLX stamped (verified_on.hardware, mtplx_version). */
	if ((rc = parse_labels(c, doc)))
		return rc;
	if (!c->in->hardware[0] && cJSON_IsString(hw))
		snprintf(c->in->hardware, sizeof(c->in->hardware), "%s", hw->valuestring);
	if (!c->in->runtime[0] && cJSON_IsString(version))
		snprintf(c->in->runtime, sizeof(c->in->runtime), "mtplx-%s", version->valuestring);
	if ((rc = parse_mtplx_verdict(c, ev, "speed_evidence.verdict", "speed_evidence.failure_reasons")))
		return rc;
	return evidence_rows(c, ev, "speed_evidence.forge_verify_rows");
}

static int parse_tune(struct pctx *c, const cJSON *doc)
{
	/* payload.get("results") or payload.get("rows") */
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "results");
	const cJSON *best = cJSON_GetObjectItemCaseSensitive(doc, "best_multiplier");
	const char *name = "results";
	int rc;

	if (!cJSON_IsArray(rows) || cJSON_GetArraySize(rows) == 0) {
		const cJSON *alt = cJSON_GetObjectItemCaseSensitive(doc, "rows");

		if (alt) {
			rows = alt;
			name = "rows";
		}
	}
	check_fields(c, doc, tune_doc, NULL, "", "");
	check_rows(c, rows, name, tune_row, strcmp(name, "rows") == 0 ? "rows[]" : "results[]");
	if ((rc = unknown_fail(c, FG_VF_MTPLX_TUNE)))
		return rc;
	if (best && !cJSON_IsObject(best))
		return fg_err_set(c->err, FG_EINPUT, "\"best_multiplier\" is not an object");
	if (best && (rc = parse_mtplx_verdict(c, best, "best_multiplier.verdict", "best_multiplier.failure_reasons")))
		return rc;
	return parse_rows(c, rows, name, D_TUNE);
}

int fg_verify_parse(struct fg_verify_input *out, const cJSON *doc, struct fg_err *err)
{
	struct fg_verify_input *in;
	struct pctx c;
	enum fg_verify_format f = FG_VF_FORGED;
	int rc;

	if (!cJSON_IsObject(doc))
		return fg_err_set(err, FG_EINPUT, "verification document is not a JSON object");
	if ((rc = recognise(doc, &f, err)))
		return rc;
	in = calloc(1, sizeof(*in));
	if (!in)
		return fg_err_set(err, FG_ENOMEM, "out of memory reading verification rows");
	memset(&c, 0, sizeof(c));
	c.in = in;
	c.err = err;
	in->format = f;
	switch (f) {
	case FG_VF_FORGED:
		rc = parse_forged(&c, doc);
		break;
	case FG_VF_MTPLX_VERIFY:
		rc = parse_verify(&c, doc);
		break;
	case FG_VF_MTPLX_OUTCOME:
		rc = parse_outcome(&c, doc);
		break;
	case FG_VF_MTPLX_EVIDENCE:
		rc = parse_evidence(&c, doc);
		break;
	case FG_VF_MTPLX_RUNTIME:
		rc = parse_runtime(&c, doc);
		break;
	case FG_VF_MTPLX_TUNE:
		rc = parse_tune(&c, doc);
		break;
	default:
		rc = fg_err_set(err, FG_EINTERNAL, "verification format %d has no reader", (int)f);
		break;
	}
	if (rc) {
		free(in->rows);
	} else {
		*out = *in;
	}
	free(in);
	return rc;
}
