/*
 * convention.h: one convention decision per tensor set.
 *
 * The two-signal rule of docs/domain.md section 2: with qk_max the largest q/k
 * norm mean and low_min the smallest mean of the low set (input and
 * post-attention layernorms, pre-fc norms), a zero-centred set is already
 * absolute when qk_max >= 1.25 or low_min >= 0.5, else delta.  Final norms
 * and linear_attn.norm are never evidence.  forged's guards come first:
 * qk_max > 2.4 is double_shifted; q/k means on both sides of 1.25 are mixed;
 * no q/k and no low-set norm is no_evidence, and so is a set without q/k
 * norms whose low set lies on both sides of 0.5 (absolute pre-fc gains can
 * sit below 0.5); plain families are plain; a set
 * without norms is empty.  The decision is never made tensor by tensor.
 */
#ifndef FG_CONVENTION_H
#define FG_CONVENTION_H

#include "forge/model/family.h"
#include "forge/model/tset.h"

/*
 * The q-norm figures, written once (plain literals: store/db.c builds its
 * probe_bucket SQL from them by stringizing).
 */
#define FG_QK_ABSOLUTE_MIN  1.25
#define FG_LOW_ABSOLUTE_MIN 0.5
#define FG_QK_DOUBLE_ABOVE  2.4
/* Where a healthy absolute trunk's probe sits; fleet health reports it, nothing is decided by it. */
#define FG_QK_BAND_MIN      1.74
#define FG_QK_BAND_MAX      1.83

enum fg_convention {
	FG_CONV_DELTA,
	FG_CONV_ABSOLUTE,
	FG_CONV_DOUBLE_SHIFTED,
	FG_CONV_MIXED,
	FG_CONV_NO_EVIDENCE,
	FG_CONV_PLAIN,
	FG_CONV_EMPTY,
};

struct fg_decision {
	enum fg_convention conv;
	int has_qk, has_low;
	double qk_max, qk_min, low_min;
	const struct fg_norm *qk_max_norm;   /* borrowed from the set */
	const struct fg_norm *qk_min_norm;
	const struct fg_norm *low_min_norm;
	const struct fg_norm *probe;         /* first decoder layer's q_norm, or NULL */
};

/* Decide the convention of a measured set for a family of the given style. */
void fg_conv_decide(const struct fg_tset *s, enum fg_family_style style, struct fg_decision *out);

/* The docs/interfaces.md vocabulary word for a convention. */
const char *fg_conv_name(enum fg_convention c);

/*
 * The convention a set ends up in after a runtime adds `shift` (0 or 1) to its
 * zero-centred norms: delta+1 is absolute, absolute+1 double_shifted, and so
 * on.  no_evidence is treated as the rule's default, delta.
 */
enum fg_convention fg_conv_after_shift(enum fg_convention c, int shift);

/* The two-signal rule alone: 1 when a runtime deciding by it says absolute. */
int fg_conv_rule_says_absolute(const struct fg_decision *d);

#endif
