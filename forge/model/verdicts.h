/*
 * verdicts.h: the verdict codes of design.md section 5 (static analysis) and
 * the list a report carries.
 *
 * Codes and severities are a table; a report adds verdicts by code and the
 * severity comes from the table, so a code can never be raised at two
 * severities.  Two codes extend the v1 vocabulary (documented in README.md):
 * `convention_structure_mismatch` (structure and norm values disagree) and
 * `trunk_double_shift_at_load` (a targeted runtime adds +1 to an absolute
 * trunk for a reason other than embedded head keys).
 */
#ifndef FG_VERDICTS_H
#define FG_VERDICTS_H

#include <stddef.h>

#include "forge/core/error.h"

enum fg_severity {
	FG_SEV_INFO,
	FG_SEV_WARNING,
	FG_SEV_ERROR,
};

struct fg_verdict_code {
	const char *code;
	enum fg_severity severity;
	const char *meaning;
};

#define FG_VERDICT_MAX_LIST 8   /* runtimes and tensors named per verdict */

struct fg_verdict {
	const struct fg_verdict_code *code;
	char *set;                                  /* owned, whole; "" for none */
	size_t n_runtimes;
	const char *runtimes[FG_VERDICT_MAX_LIST];  /* borrowed static strings */
	size_t n_tensors;                           /* total involved (may exceed the list) */
	char *tensors[FG_VERDICT_MAX_LIST];         /* owned copies, the first few */
	char detail[320];
};

struct fg_verdicts {
	size_t n, cap;
	struct fg_verdict *v;
};

/* The table row for code, or NULL. */
const struct fg_verdict_code *fg_verdict_code(const char *code);

/* Every code, for listings and tests. */
const struct fg_verdict_code *fg_verdict_codes(size_t *n);

const char *fg_severity_name(enum fg_severity s);

/*
 * Append a verdict with code (which must be in the table) for set (may be
 * NULL) and a printf-style detail.  Returns the new verdict (to add runtimes
 * and tensors to) or NULL when out of memory or the code is unknown.
 */
struct fg_verdict *fg_verdicts_add(struct fg_verdicts *list, const char *code, const char *set,
				   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Name a runtime (a static string) or a tensor (copied) in a verdict. */
void fg_verdict_runtime(struct fg_verdict *v, const char *runtime);
void fg_verdict_tensor(struct fg_verdict *v, const char *tensor);

/* True when any verdict in the list has error severity. */
int fg_verdicts_has_error(const struct fg_verdicts *list);

/* The code's verdict in the list, or NULL. */
const struct fg_verdict *fg_verdicts_find(const struct fg_verdicts *list, const char *code);

void fg_verdicts_release(struct fg_verdicts *list);

#endif
