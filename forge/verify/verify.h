/*
 * verify.h: verification rows in, one MTP verdict out (docs/interfaces.md section 3).
 *
 * A runner on the serving hardware decodes plain (depth 0, autoregressive)
 * and with the MTP head at depths 1..N, and reports tok/s, per-position draft
 * acceptance and a quality flag per depth.  This module reads such a report
 * into rows, annotates each depth with its speed-up over plain decode, and
 * applies the verdict rules in their fixed order.  The rules are rows of a
 * table (verdict code, rule); the verdicts' names, severities and meanings
 * are rows of forge/model/verdicts.h's one table; the first rule that matches
 * decides.
 *
 * Two families of documents are read (README.md "Verification rows"):
 * forged's own `forged.verification.v1`, and what MTPLX writes as it writes
 * it: verify.json, build_outcome.json, a bare speed_evidence object,
 * mtplx_runtime.json (its speed_evidence) and the `mtplx tune` payload.  The
 * rule is MTPLX's forge rule (mtplx/commands/forge.py `_speed_evidence`):
 * the same verdicts, failure_reasons strings and order, per-depth collapse
 * and quality-rejection lists, and evidence.  Only the collapse threshold
 * differs by default: 0.10, under which MTPLX issue 306's published figures
 * (best acceptance 0.067) are mtp_acceptance_collapsed, as published; MTPLX's
 * own constant, 0.05, is FG_VERIFY_COLLAPSE_MTPLX.
 *
 * Pure domain code: no printing, no I/O.  The CLI (`forged verdict`) and the
 * API (`POST /v1/artifacts/{id}/verifications`) both call it, so every error
 * message names the row index and field and can be shown verbatim.
 */
#ifndef FG_VERIFY_H
#define FG_VERIFY_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "forge/core/error.h"
#include "forge/model/verdicts.h"

#define FG_VERIFY_SCHEMA "forged.verification.v1"
#define FG_VERDICT_SCHEMA "forged.verdict.v1"
/* `schema` values naming an MTPLX document (MTPLX itself writes none). */
#define FG_VERIFY_SCHEMA_MTPLX_VERIFY "mtplx.verify"
#define FG_VERIFY_SCHEMA_MTPLX_OUTCOME "mtplx.build_outcome"
#define FG_VERIFY_SCHEMA_MTPLX_EVIDENCE "mtplx.speed_evidence"
#define FG_VERIFY_SCHEMA_MTPLX_RUNTIME "mtplx.runtime"
#define FG_VERIFY_SCHEMA_MTPLX_TUNE "mtplx.tune"
#define FG_VERIFY_MAX_ROWS 64          /* rows array length cap */
#define FG_VERIFY_MAX_DEPTH 16         /* deepest draft depth accepted */
#define FG_VERIFY_MAX_ACCEPT 16        /* acceptance entries per row */
#define FG_VERIFY_COLLAPSE_DEFAULT 0.10 /* a depth whose best acceptance is at or below: collapsed */
#define FG_VERIFY_COLLAPSE_MTPLX 0.05  /* MTPLX's ACCEPTANCE_COLLAPSE_THRESHOLD */
#define FG_VERIFY_FINISH_MAX 256       /* finish_reasons as compact JSON, with its NUL */
#define FG_VERIFY_MAX_REASONS 8        /* failure_reasons entries read from an MTPLX document */
#define FG_VERIFY_REASON_MAX 64        /* a verdict or reason string, with its NUL */
#define FG_VERIFY_MAX_UNUSED 64        /* distinct kept-but-unused MTPLX fields listed */
#define FG_VERIFY_MAX_SKIPPED 8        /* skipped tune rows described */

/* Which document the rows came from; fg_verify_format_name() is its `schema`. */
enum fg_verify_format {
	FG_VF_FORGED,           /* forged.verification.v1 */
	FG_VF_MTPLX_VERIFY,     /* MTPLX verify.json: {rows, verdict?, failure_reasons?} */
	FG_VF_MTPLX_OUTCOME,    /* MTPLX build_outcome.json: verify_rows, speed_evidence */
	FG_VF_MTPLX_EVIDENCE,   /* an MTPLX speed_evidence object: forge_verify_rows */
	FG_VF_MTPLX_RUNTIME,    /* mtplx_runtime.json: speed_evidence.forge_verify_rows */
	FG_VF_MTPLX_TUNE,       /* the `mtplx tune` payload: results (mode, acceptance_by_depth) */
};

/* One measured depth.  Depth 0 is plain (AR) decode, the baseline. */
struct fg_verify_row {
	int depth;                          /* 0..FG_VERIFY_MAX_DEPTH */
	double tok_s;                       /* finite, >= 0; > 0 at depth 0 */
	size_t n_accept;                    /* 0: no acceptance data */
	double accept[FG_VERIFY_MAX_ACCEPT]; /* per draft position, each in [0, 1] */
	int quality;                        /* -1 absent, 0 false, 1 true */
	/* MTPLX's row fields; all zero (absent) in a forged.verification.v1 row. */
	int has_multiplier;                 /* multiplier_vs_ar given: kept as given, as MTPLX does */
	double multiplier;
	double verify_time_s;               /* 0 when absent */
	int has_hit_budget, hit_budget;     /* hit_token_budget */
	int has_hit_budget_count;
	long long hit_budget_count;         /* hit_token_budget_count */
	char finish_reasons[FG_VERIFY_FINISH_MAX]; /* the object as compact JSON; "" when absent */
};

/* A field MTPLX writes that the verdict does not use: kept (the API stores the document) and listed. */
struct fg_verify_field {
	const char *where;                  /* "" (the document), "rows[]", "speed_evidence", ... */
	const char *name;
};

/* A validated verification document. */
struct fg_verify_input {
	char hardware[128];                 /* "" when absent */
	char runtime[64];                   /* "" when absent */
	size_t n_rows;
	struct fg_verify_row *rows;         /* owned; in document order, distinct depths */
	enum fg_verify_format format;
	/* MTPLX's own verdict in the document, when it has one. */
	int has_mtplx_verdict;
	char mtplx_verdict[FG_VERIFY_REASON_MAX];
	int has_mtplx_reasons;
	size_t n_mtplx_reasons;
	char mtplx_reasons[FG_VERIFY_MAX_REASONS][FG_VERIFY_REASON_MAX];
	const char *mtplx_verdict_at;       /* where it was read: "verdict", "best_multiplier.verdict", ... */
	size_t n_unused;                    /* listed (at most FG_VERIFY_MAX_UNUSED) */
	struct fg_verify_field unused[FG_VERIFY_MAX_UNUSED];
	size_t n_skipped;                   /* tune rows MTPLX skips too (no tok/s), all counted */
	char skipped[FG_VERIFY_MAX_SKIPPED][128]; /* the first few, described */
};

/*
 * A rule of the verdict table: the verdict it decides (its name, severity and
 * meaning live in forge/model/verdicts.h's one table) and its position.
 */
struct fg_verify_verdict {
	const struct fg_verdict_row *row;   /* a FG_VK_VERIFICATION row of fg_verdict_table */
	int rule;                           /* 1-based position in the rule order */
};

/* The speed-up of one depth > 0 over depth 0 (unrounded). */
struct fg_verify_speedup {
	int depth;
	double speedup;
};

struct fg_verify_result {
	const struct fg_verify_verdict *verdict; /* a row of the static table */
	int best_depth;                     /* winning depth, or -1 (null) */
	double ar_tok_s;                    /* depth 0's tok/s */
	size_t n_speedups;
	struct fg_verify_speedup speedups[FG_VERIFY_MAX_DEPTH]; /* depths > 0, ascending */
	int best_accept_depth;              /* depth holding the best acceptance[0], or -1 */
	double best_first_acceptance;       /* meaningful only when best_accept_depth >= 0 */
	double collapse_threshold;          /* as used */
	char hardware[128];                 /* copied from the input */
	char runtime[64];
	/* MTPLX's structure (mtplx/commands/forge.py `_speed_evidence`). */
	enum fg_verify_format format;       /* copied from the input */
	size_t n_rows;
	struct fg_verify_row rows[FG_VERIFY_MAX_DEPTH + 1]; /* annotated: ascending depth, multiplier set */
	int evidence_depth;                 /* speed_evidence.depth: the winner's, 0 when none */
	size_t n_collapsed;                 /* depths > 0 whose best acceptance <= threshold */
	int collapsed[FG_VERIFY_MAX_DEPTH]; /* indices into rows */
	size_t n_rejected;                  /* depths > 0 beating AR with quality_passed false */
	int rejected[FG_VERIFY_MAX_DEPTH];  /* indices into rows */
	size_t n_reasons;
	const char *reasons[3];             /* failure_reasons, MTPLX's strings in MTPLX's order */
	int has_mtplx;                      /* the document carried MTPLX's verdict or reasons */
	int agrees;                         /* ... and they equal ours */
	int has_mtplx_verdict;
	char mtplx_verdict[FG_VERIFY_REASON_MAX];
	int has_mtplx_reasons;
	size_t n_mtplx_reasons;
	char mtplx_reasons[FG_VERIFY_MAX_REASONS][FG_VERIFY_REASON_MAX];
	const char *mtplx_verdict_at;
	size_t n_unused;
	struct fg_verify_field unused[FG_VERIFY_MAX_UNUSED];
	size_t n_skipped;
	char skipped[FG_VERIFY_MAX_SKIPPED][128];
};

/*
 * Row i of the verdict table, or NULL past its end.  The rows, in rule order:
 * mtp_depth_wins (info), no_quality_passed_mtp_depth_beat_ar (warning),
 * mtp_acceptance_collapsed (error), no_mtp_depth_beat_ar (warning).
 */
const struct fg_verify_verdict *fg_verify_verdict_at(size_t i);

/* The rule deciding the verdict called name, or NULL (also for NULL). */
const struct fg_verify_verdict *fg_verify_verdict_find(const char *name);

/* The `schema` string of a format ("forged.verification.v1", "mtplx.verify", ...). */
const char *fg_verify_format_name(enum fg_verify_format f);

/*
 * Validate doc (borrowed) as a verification document and fill *out, which the
 * caller releases with fg_verify_release().  The format is chosen by `schema`
 * when present (forged.verification.v1 or one of the FG_VERIFY_SCHEMA_MTPLX_*
 * values), else by a shape that is recognisably MTPLX's (README.md lists the
 * rules); a document without `schema` and without such a shape is refused.
 * Every field must be one the format defines: an unknown field is FG_EINPUT
 * naming it (all of them, with their rows), while fields MTPLX writes that the
 * verdict does not use are accepted and listed in out->unused.
 *
 * FG_EINPUT, naming the row index and field, also for: doc not an object;
 * `schema` not a string or not a known value; `hardware`/`runtime` not
 * strings or too long; the rows missing, not an array, empty or longer than
 * FG_VERIFY_MAX_ROWS; a row not an object; `depth` missing, not an integer or
 * outside 0..FG_VERIFY_MAX_DEPTH, or repeated; `tok_s` missing, not a finite
 * number, negative, or not positive at depth 0; acceptance not an array of at
 * most FG_VERIFY_MAX_ACCEPT numbers in [0, 1] (MTPLX's null entries are
 * dropped, as MTPLX drops them); `quality_passed` not a boolean (MTPLX: or
 * null); MTPLX's multiplier_vs_ar, verify_time_s, hit_token_budget(_count),
 * finish_reasons, verdict or failure_reasons of the wrong type or too long; no
 * depth-0 row.  FG_ENOMEM when out of memory.  *out is untouched on failure.
 */
int fg_verify_parse(struct fg_verify_input *out, const cJSON *doc, struct fg_err *err);

/* The same from JSON text of len bytes (need not be NUL-terminated). */
int fg_verify_parse_text(struct fg_verify_input *out, const char *text, size_t len,
			 struct fg_err *err);

/* Free the rows of in (NULL allowed) and leave it empty. */
void fg_verify_release(struct fg_verify_input *in);

/*
 * Annotate the rows as MTPLX's `_annotate_verify_rows` does (ascending depth;
 * multiplier_vs_ar 1.0 at depth 0; a depth's given multiplier kept, else its
 * tok/s over depth 0's) and apply the rules, in order, the first match
 * deciding:
 *   1. mtp_depth_wins: some depth > 0 has multiplier > 1.0 and quality_passed
 *      not false; best_depth is the fastest such depth (highest tok/s, the
 *      shallower on a tie).
 *   2. no_quality_passed_mtp_depth_beat_ar: some depth > 0 had multiplier >
 *      1.0 but failed quality.
 *   3. mtp_acceptance_collapsed: some depth > 0 reports acceptance and its
 *      best acceptance (over positions) is <= collapse_threshold.  Without
 *      acceptance data nothing can collapse.
 *   4. no_mtp_depth_beat_ar: otherwise.
 * failure_reasons are MTPLX's: none when a depth wins, else
 * "mtp_acceptance_collapsed" (a depth collapsed), "quality_failed_fast_mtp"
 * (rule 2's depths), "no_mtp_depth_beat_ar" (there is a depth > 0), in that
 * order.  When the document carried MTPLX's own verdict, out->agrees says
 * whether verdict and reasons are equal to these.
 * collapse_threshold must lie in (0, 1) (FG_EUSAGE otherwise; pass
 * FG_VERIFY_COLLAPSE_DEFAULT).  FG_EINPUT when in lacks a depth-0 row with
 * positive tok/s or holds a depth out of range or twice (possible only for
 * input not made by fg_verify_parse).  *out is untouched on failure.
 */
int fg_verify_decide(const struct fg_verify_input *in, double collapse_threshold,
		     struct fg_verify_result *out, struct fg_err *err);

/*
 * The forged.verdict.v1 object for r, or NULL when out of memory; the caller
 * frees it with cJSON_Delete().  Fields:
 *   "schema": "forged.verdict.v1",
 *   "verdict": code, "severity": "info"|"warning"|"error",
 *   "best_depth": N or null,
 *   "speedups": {"1": 0.895, ...}  (depth > 0 as a string key, its
 *               multiplier_vs_ar: tok/s at that depth over tok/s at depth 0
 *               unless the document gave one; rounded to 3 decimals),
 *   "best_first_acceptance": the best acceptance[0] over depths > 0, or null
 *               when no depth reports acceptance,
 *   "runtime", "hardware": as given, or null when absent,
 * and MTPLX's structure:
 *   "source_format": fg_verify_format_name() of the input,
 *   "threshold": the collapse threshold used,
 *   "failure_reasons": [...],
 *   "acceptance_collapsed": [{depth, tok_s, multiplier_vs_ar,
 *               acceptance_by_position, verify_time_s}],
 *   "quality_rejected": [{depth, tok_s, multiplier_vs_ar, hit_token_budget,
 *               hit_token_budget_count, finish_reasons}],
 *   "speed_evidence": {depth, tok_s: [winner's] or [], acceptance_by_depth,
 *               greedy_diagnostic: {tok_s}, forge_verify_rows: the annotated
 *               rows, quality_rejected, acceptance_collapsed,
 *               failure_reasons, verdict}: MTPLX's speed_evidence for these
 *               rows,
 *   "unused_fields": ["rows[].validations_total", ...],
 *   "skipped_rows": ["results[4] (D3): ..."],
 *   and, only when the document carried MTPLX's own verdict:
 *   "mtplx_verdict", "mtplx_failure_reasons" (when given), "mtplx_verdict_at",
 *   "agrees": true|false.
 */
cJSON *fg_verify_result_json(const struct fg_verify_result *r);

#endif
