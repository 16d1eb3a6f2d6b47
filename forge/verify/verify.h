/*
 * verify.h: verification rows in, one MTP verdict out (docs/interfaces.md section 3).
 *
 * A runner on the serving hardware decodes plain (depth 0, autoregressive)
 * and with the MTP head at depths 1..N, and reports tok/s, per-position draft
 * acceptance and a quality flag per depth as a `forged.verification.v1`
 * document.  This module validates such a document into rows, computes each
 * depth's speed-up over plain decode, and applies the verdict rules in their
 * fixed order.  The rules are rows of a table (verdict code, rule); the
 * verdicts' names, severities and meanings are rows of forge/model/verdicts.h's
 * one table; the first rule that matches decides.
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
#define FG_VERIFY_MAX_ROWS 64          /* rows array length cap */
#define FG_VERIFY_MAX_DEPTH 16         /* deepest draft depth accepted */
#define FG_VERIFY_MAX_ACCEPT 16        /* acceptance entries per row */
#define FG_VERIFY_COLLAPSE_DEFAULT 0.10 /* best first-position acceptance at or below: collapsed */

/* One measured depth.  Depth 0 is plain (AR) decode, the baseline. */
struct fg_verify_row {
	int depth;                          /* 0..FG_VERIFY_MAX_DEPTH */
	double tok_s;                       /* finite, >= 0; > 0 at depth 0 */
	size_t n_accept;                    /* 0: no acceptance data */
	double accept[FG_VERIFY_MAX_ACCEPT]; /* per draft position, each in [0, 1] */
	int quality;                        /* -1 absent, 0 false, 1 true */
};

/* A validated forged.verification.v1 document. */
struct fg_verify_input {
	char hardware[128];                 /* "" when absent */
	char runtime[64];                   /* "" when absent */
	size_t n_rows;
	struct fg_verify_row *rows;         /* owned; in document order, distinct depths */
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
};

/*
 * Row i of the verdict table, or NULL past its end.  The rows, in rule order:
 * mtp_depth_wins (info), no_quality_passed_mtp_depth_beat_ar (warning),
 * mtp_acceptance_collapsed (error), no_mtp_depth_beat_ar (warning).
 */
const struct fg_verify_verdict *fg_verify_verdict_at(size_t i);

/* The rule deciding the verdict called name, or NULL (also for NULL). */
const struct fg_verify_verdict *fg_verify_verdict_find(const char *name);

/*
 * Validate doc (borrowed) as a forged.verification.v1 document and fill *out,
 * which the caller releases with fg_verify_release().  Unknown fields are
 * ignored.  FG_EINPUT, naming the row index and field, for: doc not an object;
 * `schema` present but not "forged.verification.v1"; `hardware`/`runtime` not
 * strings or too long; `rows` missing, not an array, empty or longer than
 * FG_VERIFY_MAX_ROWS; a row not an object; `depth` missing, not an integer or
 * outside 0..FG_VERIFY_MAX_DEPTH, or repeated; `tok_s` missing, not a finite
 * number, negative, or not positive at depth 0; `acceptance` not an array of
 * at most FG_VERIFY_MAX_ACCEPT numbers in [0, 1]; `quality_passed` not a
 * boolean; no depth-0 row.  FG_ENOMEM when out of memory.  *out is untouched
 * on failure.
 */
int fg_verify_parse(struct fg_verify_input *out, const cJSON *doc, struct fg_err *err);

/* The same from JSON text of len bytes (need not be NUL-terminated). */
int fg_verify_parse_text(struct fg_verify_input *out, const char *text, size_t len,
			 struct fg_err *err);

/* Free the rows of in (NULL allowed) and leave it empty. */
void fg_verify_release(struct fg_verify_input *in);

/*
 * Apply the rules of docs/interfaces.md section 3 to in, in order, the first match
 * deciding:
 *   1. mtp_depth_wins: some depth > 0 has speed-up > 1.0 and quality_passed
 *      not false; best_depth is the one with the highest speed-up (the
 *      shallower on a tie).
 *   2. no_quality_passed_mtp_depth_beat_ar: some depth > 0 had speed-up > 1.0
 *      but failed quality.
 *   3. mtp_acceptance_collapsed: the best acceptance[0] over the depths > 0
 *      that report acceptance is <= collapse_threshold.  Without any
 *      acceptance data nothing can collapse.
 *   4. no_mtp_depth_beat_ar: otherwise.
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
 *   "speedups": {"1": 0.895, ...}  (depth > 0 as a string key, tok/s at that
 *               depth over tok/s at depth 0, rounded to 3 decimals),
 *   "best_first_acceptance": the best acceptance[0] over depths > 0, or null
 *               when no depth reports acceptance,
 *   "runtime", "hardware": as given, or null when absent.
 */
cJSON *fg_verify_result_json(const struct fg_verify_result *r);

#endif
