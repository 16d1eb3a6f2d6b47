/*
 * convention.c: the per-set decision of convention.h.
 */
#include "forge/model/convention.h"

#include <string.h>

static const char *const conv_names[] = {
	[FG_CONV_DELTA] = "delta",
	[FG_CONV_ABSOLUTE] = "absolute",
	[FG_CONV_DOUBLE_SHIFTED] = "double_shifted",
	[FG_CONV_MIXED] = "mixed",
	[FG_CONV_NO_EVIDENCE] = "no_evidence",
	[FG_CONV_PLAIN] = "plain",
	[FG_CONV_EMPTY] = "empty",
};

const char *fg_conv_name(enum fg_convention c)
{
	return conv_names[c];
}

int fg_conv_rule_says_absolute(const struct fg_decision *d)
{
	return (d->has_qk && d->qk_max >= FG_QK_ABSOLUTE_MIN) ||
	       (d->has_low && d->low_min >= FG_LOW_ABSOLUTE_MIN);
}

/* The first decoder layer (lowest index) that has a self_attn.q_norm. */
static const struct fg_norm *find_probe(const struct fg_tset *s)
{
	const struct fg_norm *best = NULL;
	long best_layer = -1;

	for (size_t i = 0; i < s->n_norms; i++) {
		const struct fg_norm *n = &s->norms[i];
		static const char probe_suffix[] = "self_attn.q_norm.weight";
		size_t len = strlen(n->t->name), plen = sizeof(probe_suffix) - 1;
		long layer;

		if (len < plen || strcmp(n->t->name + len - plen, probe_suffix) != 0 ||
		    !n->st.has_finite)
			continue;
		layer = fg_name_layer(n->t->name);
		if (layer >= 0 && (!best || layer < best_layer)) {
			best = n;
			best_layer = layer;
		}
	}
	return best;
}

void fg_conv_decide(const struct fg_tset *s, enum fg_family_style style, struct fg_decision *out)
{
	int above = 0, below = 0, low_above = 0, low_below = 0;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < s->n_norms; i++) {
		const struct fg_norm *n = &s->norms[i];
		double m = n->st.mean;

		if (!n->st.has_finite)
			continue;
		if (n->cls == FG_NAME_QK) {
			if (!out->has_qk || m > out->qk_max) {
				out->qk_max = m;
				out->qk_max_norm = n;
			}
			if (!out->has_qk || m < out->qk_min) {
				out->qk_min = m;
				out->qk_min_norm = n;
			}
			out->has_qk = 1;
			if (m >= FG_QK_ABSOLUTE_MIN)
				above++;
			else
				below++;
		} else if (n->cls == FG_NAME_LOW) {
			if (!out->has_low || m < out->low_min) {
				out->low_min = m;
				out->low_min_norm = n;
			}
			out->has_low = 1;
			if (m >= FG_LOW_ABSOLUTE_MIN)
				low_above++;
			else
				low_below++;
		}
	}
	out->probe = find_probe(s);
	if (s->n_norms == 0)
		out->conv = FG_CONV_EMPTY;
	else if (style == FG_STYLE_PLAIN)
		out->conv = FG_CONV_PLAIN;
	else if (style != FG_STYLE_ZERO_CENTRED || (!out->has_qk && !out->has_low))
		out->conv = FG_CONV_NO_EVIDENCE;
	/*
	 * Without q/k norms only the low set speaks, and absolute pre-fc gains
	 * can sit below 0.5 (0.2734 seen): a low set on both sides of 0.5 could
	 * be either convention, so nothing decides it.
	 */
	else if (!out->has_qk && low_above && low_below)
		out->conv = FG_CONV_NO_EVIDENCE;
	else if (out->has_qk && out->qk_max > FG_QK_DOUBLE_ABOVE)
		out->conv = FG_CONV_DOUBLE_SHIFTED;
	else if (above && below)
		out->conv = FG_CONV_MIXED;
	else
		out->conv = fg_conv_rule_says_absolute(out) ? FG_CONV_ABSOLUTE : FG_CONV_DELTA;
}

enum fg_convention fg_conv_after_shift(enum fg_convention c, int shift)
{
	if (!shift)
		return c == FG_CONV_NO_EVIDENCE ? FG_CONV_DELTA : c;
	switch (c) {
	case FG_CONV_DELTA:
	case FG_CONV_NO_EVIDENCE:
		return FG_CONV_ABSOLUTE;
	case FG_CONV_ABSOLUTE:
	case FG_CONV_DOUBLE_SHIFTED:
		return FG_CONV_DOUBLE_SHIFTED;
	default:
		return c; /* mixed stays mixed; plain and empty are never shifted */
	}
}
