/*
 * verdicts.h: every verdict code forged raises, as one table the compiler
 * checks, and the verdict list a report carries.
 *
 * One X-macro list holds each code's name, severity, kind and meaning: the
 * static codes of docs/interfaces.md section 4, its verification codes
 * (forge/verify decides which one applies) and the fleet code fleet health
 * raises (store/fleet.c).  It generates enum fg_verdict_code (FG_V_<NAME>)
 * and fg_verdict_table, indexed by that enum, so a misspelt code is a compile
 * error and a code can never be raised at two severities.  Names are the
 * stable strings of the JSON documents and of the store.  Static codes that
 * extend the v1 vocabulary (documented in README.md and docs/runtimes.md):
 * `convention_structure_mismatch` (structure and norm values disagree),
 * `trunk_double_shift_at_load` (a targeted runtime adds +1 to an absolute
 * trunk for a reason other than embedded head keys) and, since issue 10, the
 * per-runtime load codes `runtime_load_error`, `model_type_unsupported`,
 * `duplicate_tensor_order_dependent`, `head_keys_not_loaded`,
 * `head_experts_not_loaded`, `trunk_experts_not_loaded` and
 * `head_contract_mismatch`; `mtp_declared_missing` became info (issue 12), and
 * issue 12 adds `trunk_format_unsupported`, `unsupported_quantization_format`
 * (a forge refusal), `quantized_head_requantized` and `bf16_shift_rounding`
 * (`bf16_shift_precision_loss` split by the size of the worst error).
 */
#ifndef FG_VERDICTS_H
#define FG_VERDICTS_H

#include <stdbool.h>
#include <stddef.h>

#include "forge/core/error.h"

/* One severity for static, verification and fleet verdicts. */
enum fg_severity {
	FG_SEV_INFO,
	FG_SEV_WARNING,
	FG_SEV_ERROR,      /* the artifact must not ship (exit 1) */
};

#define FG_SEV_COUNT 3

/* Where a code comes from: which list may carry it. */
enum fg_verdict_kind {
	FG_VK_STATIC,         /* an inspect report (forge/model/inspect.c), or a forge refusal */
	FG_VK_VERIFICATION,   /* a verification verdict (forge/verify), one per result */
	FG_VK_FLEET,          /* a fleet health warning (store/fleet.c) */
};

/* X(ID, name, severity, kind, meaning): FG_V_<ID> is the code. */
#define FG_VERDICT_CODES(X)                                                                        \
	X(TRUNK_DOUBLE_SHIFTED, "trunk_double_shifted", FG_SEV_ERROR, FG_VK_STATIC,                \
	  "the trunk's norms are already shifted twice on disk")                                  \
	X(EMBEDDED_MTP_SHIFT_HAZARD, "embedded_mtp_shift_hazard", FG_SEV_ERROR, FG_VK_STATIC,      \
	  "embedded mtp.* keys make a runtime add +1 to an absolute trunk")                       \
	X(TRUNK_MISSING_SHIFT, "trunk_missing_shift", FG_SEV_ERROR, FG_VK_STATIC,                  \
	  "a targeted runtime loads a delta trunk without its +1")                                \
	X(TRUNK_DOUBLE_SHIFT_AT_LOAD, "trunk_double_shift_at_load", FG_SEV_ERROR, FG_VK_STATIC,    \
	  "a targeted runtime adds +1 to an absolute trunk (not because of head keys)")           \
	X(HEAD_CONVENTION_MISMATCH, "head_convention_mismatch", FG_SEV_ERROR, FG_VK_STATIC,        \
	  "the head loads inverted or double-shifted in a targeted runtime")                      \
	X(HEAD_DOUBLE_SHIFTED, "head_double_shifted", FG_SEV_ERROR, FG_VK_STATIC,                  \
	  "the head's norms are already shifted twice on disk")                                   \
	X(MIXED_CONVENTION, "mixed_convention", FG_SEV_ERROR, FG_VK_STATIC,                        \
	  "one tensor set holds both conventions")                                                \
	X(NO_CONVENTION_EVIDENCE, "no_convention_evidence", FG_SEV_ERROR, FG_VK_STATIC,            \
	  "a shift may be needed but no norm decides it")                                         \
	X(CONVENTION_STRUCTURE_MISMATCH, "convention_structure_mismatch", FG_SEV_ERROR,            \
	  FG_VK_STATIC, "the checkpoint's structure and its norm values disagree on the convention") \
	X(NONFINITE_NORM, "nonfinite_norm", FG_SEV_ERROR, FG_VK_STATIC,                            \
	  "a norm tensor holds NaN or infinity")                                                  \
	X(DEGENERATE_HEAD, "degenerate_head", FG_SEV_ERROR, FG_VK_STATIC,                          \
	  "the head's norms are all zero or its payload is empty")                                \
	X(EXPERT_LAYOUT_AMBIGUOUS, "expert_layout_ambiguous", FG_SEV_ERROR, FG_VK_STATIC,          \
	  "expert tensors fit both fused layouts, or neither")                                    \
	X(MTP_DECLARED_MISSING, "mtp_declared_missing", FG_SEV_INFO, FG_VK_STATIC,                 \
	  "config.json declares an MTP head but no tensor holds it: runtimes fall back to plain decoding") \
	X(MALFORMED_CHECKPOINT, "malformed_checkpoint", FG_SEV_ERROR, FG_VK_STATIC,                \
	  "the checkpoint contradicts itself")                                                    \
	X(RUNTIME_LOAD_ERROR, "runtime_load_error", FG_SEV_ERROR, FG_VK_STATIC,                    \
	  "a targeted runtime refuses to load the checkpoint (the detail quotes why)")            \
	X(MODEL_TYPE_UNSUPPORTED, "model_type_unsupported", FG_SEV_ERROR, FG_VK_STATIC,            \
	  "a targeted runtime has no model class for config.json's model_type")                   \
	X(DUPLICATE_TENSOR_ORDER_DEPENDENT, "duplicate_tensor_order_dependent", FG_SEV_ERROR,     \
	  FG_VK_STATIC, "two files a targeted runtime reads hold different copies of a name: the folder order picks one") \
	X(HEAD_KEYS_NOT_LOADED, "head_keys_not_loaded", FG_SEV_ERROR, FG_VK_STATIC,                \
	  "a targeted runtime binds the head but filters out or skips its keys: random weights")   \
	X(HEAD_EXPERTS_NOT_LOADED, "head_experts_not_loaded", FG_SEV_ERROR, FG_VK_STATIC,          \
	  "a targeted runtime skips the head's routed experts (a layout it does not stack)")       \
	X(TRUNK_EXPERTS_NOT_LOADED, "trunk_experts_not_loaded", FG_SEV_ERROR, FG_VK_STATIC,        \
	  "a targeted runtime's lenient load skips the trunk's routed experts")                   \
	X(HEAD_CONTRACT_MISMATCH, "head_contract_mismatch", FG_SEV_ERROR, FG_VK_STATIC,            \
	  "a targeted runtime feeds the head a concatenation order its family does not use")      \
	X(LAYOUT_CONFLICT, "layout_conflict", FG_SEV_ERROR, FG_VK_STATIC,                          \
	  "no artifact layout loads the head right in every target of a forge (a forge refusal)")  \
	X(TRUNK_FORMAT_UNSUPPORTED, "trunk_format_unsupported", FG_SEV_ERROR, FG_VK_STATIC,        \
	  "a targeted runtime cannot read the trunk's weight format (forge with --backbone naming one it loads)") \
	X(UNSUPPORTED_QUANTIZATION_FORMAT, "unsupported_quantization_format", FG_SEV_ERROR,        \
	  FG_VK_STATIC, "the head is quantized in a format forged does not read: refused by name, never copied") \
	X(UNREADABLE_SHARD, "unreadable_shard", FG_SEV_ERROR, FG_VK_STATIC,                        \
	  "a model*.safetensors is no readable regular file: a runtime that globs fails to load it") \
	X(STRAY_SHARD, "stray_shard", FG_SEV_WARNING, FG_VK_STATIC,                                \
	  "a model*.safetensors absent from the index: mlx-lm loads it anyway")                   \
	X(INDEX_MISMATCH, "index_mismatch", FG_SEV_WARNING, FG_VK_STATIC,                          \
	  "the index and the shard headers disagree")                                             \
	X(BF16_SHIFT_PRECISION_LOSS, "bf16_shift_precision_loss", FG_SEV_WARNING, FG_VK_STATIC,    \
	  "a runtime stores +1 as a 16-bit sum that misses a gain by more than half a BF16 step at 1.0") \
	X(QUANTIZED_MTP_HEAD, "quantized_mtp_head", FG_SEV_WARNING, FG_VK_STATIC,                  \
	  "the MTP head is quantized")                                                            \
	X(QUANTIZED_HEAD_REQUANTIZED, "quantized_head_requantized", FG_SEV_WARNING, FG_VK_STATIC,  \
	  "an already quantized head was dequantized and quantized again (--allow-requantize); reports disagree on acceptance") \
	X(RAW_ZERO_CENTRED_HEAD, "raw_zero_centred_head", FG_SEV_INFO, FG_VK_STATIC,               \
	  "a delta head; fine for runtimes that heal it")                                         \
	X(BF16_SHIFT_ROUNDING, "bf16_shift_rounding", FG_SEV_INFO, FG_VK_STATIC,                   \
	  "a runtime stores +1 as a 16-bit sum, within half a BF16 step at 1.0 of every gain")      \
	X(MIXED_HEAD_CONVENTIONS_IN_FLEET, "mixed_head_conventions_in_fleet", FG_SEV_WARNING,      \
	  FG_VK_FLEET, "the fleet serves heads of both conventions")                              \
	X(MTP_DEPTH_WINS, "mtp_depth_wins", FG_SEV_INFO, FG_VK_VERIFICATION,                       \
	  "a depth > 0 beats plain decode and did not fail quality; the fastest such depth wins") \
	X(NO_QUALITY_PASSED_MTP_DEPTH_BEAT_AR, "no_quality_passed_mtp_depth_beat_ar",              \
	  FG_SEV_WARNING, FG_VK_VERIFICATION, "a depth > 0 beat plain decode but failed quality")  \
	X(MTP_ACCEPTANCE_COLLAPSED, "mtp_acceptance_collapsed", FG_SEV_ERROR, FG_VK_VERIFICATION,  \
	  "no depth beats plain decode and first-position acceptance has collapsed")              \
	X(NO_MTP_DEPTH_BEAT_AR, "no_mtp_depth_beat_ar", FG_SEV_WARNING, FG_VK_VERIFICATION,        \
	  "no depth > 0 beats plain decode, and acceptance has not collapsed")

enum fg_verdict_code {
#define FG_VERDICT_ENUM(id, name, severity, kind, meaning) FG_V_##id,
	FG_VERDICT_CODES(FG_VERDICT_ENUM)
#undef FG_VERDICT_ENUM
	FG_VERDICT_COUNT   /* not a code: the number of codes */
};

/* A row of the verdict table. */
struct fg_verdict_row {
	enum fg_verdict_code code;  /* its own index in fg_verdict_table */
	const char *name;           /* "head_double_shifted": the JSON and store string */
	enum fg_severity severity;
	enum fg_verdict_kind kind;
	const char *meaning;        /* one line, lower-case */
};

/* The table, indexed by enum fg_verdict_code (fg_verdict_table[c].code == c). */
extern const struct fg_verdict_row fg_verdict_table[FG_VERDICT_COUNT];

/* The row of code, or NULL when code is not an enum fg_verdict_code value. */
const struct fg_verdict_row *fg_verdict_row(enum fg_verdict_code code);

/* The row whose name is name (exact, case-sensitive), or NULL (also for NULL). */
const struct fg_verdict_row *fg_verdict_code_find(const char *name);

/* "info", "warning" or "error"; "unknown" for a value outside the enum. */
const char *fg_severity_name(enum fg_severity s);

/* Parse a severity name into *out; false (out untouched) for anything else, NULL included. */
bool fg_severity_parse(const char *name, enum fg_severity *out);

#define FG_VERDICT_MAX_LIST 8   /* tensors named per verdict */
#define FG_VERDICT_MAX_RUNTIMES 32 /* runtimes named per verdict: every row of the runtime table */

struct fg_verdict {
	const struct fg_verdict_row *row;
	char *set;                                  /* owned, whole; "" for none */
	size_t n_runtimes;
	const char *runtimes[FG_VERDICT_MAX_RUNTIMES]; /* borrowed static strings */
	size_t n_tensors;                           /* total involved (may exceed the list) */
	char *tensors[FG_VERDICT_MAX_LIST];         /* owned copies, the first few */
	char detail[320];
};

struct fg_verdicts {
	size_t n, cap;
	struct fg_verdict *v;
};

/*
 * Append a verdict with code for set (may be NULL) and a printf-style detail;
 * *out (out may be NULL) gets the new verdict, to add runtimes and tensors to,
 * valid until the next add.  Returns 0; FG_ENOMEM when out of memory;
 * FG_EINTERNAL when code is not a table row or is a verification code (a
 * verification result carries one verdict, not a list).  The list is
 * unchanged on failure.
 */
int fg_verdicts_add(struct fg_verdicts *list, enum fg_verdict_code code, const char *set,
		    struct fg_verdict **out, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Name a runtime (a static string) or a tensor (copied) in a verdict. */
void fg_verdict_runtime(struct fg_verdict *v, const char *runtime);
void fg_verdict_tensor(struct fg_verdict *v, const char *tensor);

/* True when any verdict in the list has error severity. */
bool fg_verdicts_has_error(const struct fg_verdicts *list);

/* The first verdict of the list with error severity, or NULL. */
const struct fg_verdict *fg_verdicts_first_error(const struct fg_verdicts *list);

/* The code's verdict in the list, or NULL. */
const struct fg_verdict *fg_verdicts_find(const struct fg_verdicts *list, enum fg_verdict_code code);

void fg_verdicts_release(struct fg_verdicts *list);

#endif
