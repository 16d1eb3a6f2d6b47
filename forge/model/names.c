/*
 * names.c: the name rules of names.h.
 *
 * They work on suffixes and on the name with container prefixes stripped,
 * because the same tensor is spelled `mtp.fc.weight`, `model.mtp.fc.weight`
 * or `language_model.model.mtp.fc.weight` depending on who exported it.
 */
#include "forge/model/names.h"

#include "forge/core/str.h"

#include <string.h>

const char *fg_name_scheme_name(enum fg_name_scheme s)
{
	switch (s) {
	case FG_SCHEME_PREFIX:
		return "prefix";
	case FG_SCHEME_APPENDED:
		return "appended_layers";
	case FG_SCHEME_MTP_LAYERS:
		return "mtp_layers";
	default:
		return NULL;
	}
}

/* Suffix -> class, first match wins; ".norm.weight" must come after linear_attn. */
static const struct norm_rule {
	const char *suffix;
	size_t len;        /* strlen(suffix) */
	enum fg_name_norm cls;
	int zero_centred;  /* stores an offset in zero-centred families */
	int mlx_shifted;   /* in mlx-lm's sanitize suffix list */
} norm_rules[] = {
	{ ".q_norm.weight", sizeof(".q_norm.weight") - 1, FG_NAME_QK, 1, 1 },
	{ ".k_norm.weight", sizeof(".k_norm.weight") - 1, FG_NAME_QK, 1, 1 },
	{ ".input_layernorm.weight", sizeof(".input_layernorm.weight") - 1, FG_NAME_LOW, 1, 1 },
	{ ".post_attention_layernorm.weight", sizeof(".post_attention_layernorm.weight") - 1, FG_NAME_LOW, 1, 1 },
	{ ".pre_fc_norm_embedding.weight", sizeof(".pre_fc_norm_embedding.weight") - 1, FG_NAME_LOW, 1, 0 },
	{ ".pre_fc_norm_hidden.weight", sizeof(".pre_fc_norm_hidden.weight") - 1, FG_NAME_LOW, 1, 0 },
	/* The pre-fc norms of the plain families' heads: evidence-class only. */
	{ ".enorm.weight", sizeof(".enorm.weight") - 1, FG_NAME_LOW, 0, 0 },
	{ ".hnorm.weight", sizeof(".hnorm.weight") - 1, FG_NAME_LOW, 0, 0 },
	{ ".token_layernorm.weight", sizeof(".token_layernorm.weight") - 1, FG_NAME_LOW, 0, 0 },
	{ ".hidden_layernorm.weight", sizeof(".hidden_layernorm.weight") - 1, FG_NAME_LOW, 0, 0 },
	{ "linear_attn.norm.weight", sizeof("linear_attn.norm.weight") - 1, FG_NAME_NEVER, 0, 0 },
	{ "model.norm.weight", sizeof("model.norm.weight") - 1, FG_NAME_FINAL, 1, 1 },
	{ "mtp.norm.weight", sizeof("mtp.norm.weight") - 1, FG_NAME_FINAL, 1, 0 },
};

#define N_RULES (sizeof(norm_rules) / sizeof(norm_rules[0]))

static int ends_n(const char *s, size_t n, const char *suffix, size_t m)
{
	return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* The first rule whose suffix ends name (n bytes), or NULL. */
static const struct norm_rule *find_norm_rule_n(const char *name, size_t n)
{
	/* Every rule ends in "norm.weight", "norm_embedding.weight" or "norm_hidden.weight". */
	if (!ends_n(name, n, "norm.weight", 11) && !ends_n(name, n, "norm_embedding.weight", 21) &&
	    !ends_n(name, n, "norm_hidden.weight", 18))
		return NULL;
	for (size_t i = 0; i < N_RULES; i++)
		if (ends_n(name, n, norm_rules[i].suffix, norm_rules[i].len))
			return &norm_rules[i];
	return NULL;
}

static const struct norm_rule *find_norm_rule(const char *name)
{
	return find_norm_rule_n(name, strlen(name));
}

static enum fg_name_norm norm_class_n(const char *name, size_t n, const struct norm_rule *r)
{
	const char *last, *end;

	if (r)
		return r->cls;
	if (!ends_n(name, n, ".weight", 7))
		return FG_NAME_NOT_NORM;
	/* The module name before ".weight" says whether it is a norm. */
	end = name + n - 7;
	last = end;
	while (last > name && last[-1] != '.')
		last--;
	for (const char *p = last; p + 4 <= end; p++)
		if (memcmp(p, "norm", 4) == 0)
			return FG_NAME_OTHER;
	return FG_NAME_NOT_NORM;
}

enum fg_name_norm fg_name_norm_class(const char *name)
{
	size_t n = strlen(name);

	return norm_class_n(name, n, find_norm_rule_n(name, n));
}

int fg_name_zero_centred(const char *name)
{
	const struct norm_rule *r = find_norm_rule(name);

	return r && r->zero_centred;
}

int fg_name_mlx_shifted(const char *name)
{
	const struct norm_rule *r = find_norm_rule(name);

	return r && r->mlx_shifted;
}

const char *fg_name_strip(const char *name)
{
	for (;;) {
		if (strncmp(name, "model.", 6) == 0)
			name += 6;
		else if (strncmp(name, "language_model.", 15) == 0)
			name += 15;
		else
			return name;
	}
}

/* Parse a decimal number at s followed by '.'; returns -1 when there is none. */
static long parse_index(const char *s)
{
	long v = 0;
	int digits = 0;

	while (*s >= '0' && *s <= '9' && digits < 9) {
		v = v * 10 + (*s++ - '0');
		digits++;
	}
	return digits && *s == '.' ? v : -1;
}

enum fg_name_scheme fg_name_head_scheme(const char *name, long n_layers, int *index)
{
	const char *s = fg_name_strip(name);
	long i;

	if (index)
		*index = 0;
	if (strncmp(s, "mtp.", 4) == 0) {
		if (index && strncmp(s + 4, "layers.", 7) == 0 && (i = parse_index(s + 11)) >= 0)
			*index = (int)i;
		return FG_SCHEME_PREFIX;
	}
	if (strncmp(s, "mtp_layers.", 11) == 0 && (i = parse_index(s + 11)) >= 0) {
		if (index)
			*index = (int)i;
		return FG_SCHEME_MTP_LAYERS;
	}
	if (n_layers >= 0 && strncmp(s, "layers.", 7) == 0 && (i = parse_index(s + 7)) >= n_layers) {
		if (index)
			*index = (int)(i - n_layers);
		return FG_SCHEME_APPENDED;
	}
	return FG_SCHEME_NONE;
}

long fg_name_layer(const char *name)
{
	const char *p = strstr(name, "layers.");

	while (p) {
		if (p == name || p[-1] == '.') {
			long i = parse_index(p + 7);

			if (i >= 0)
				return i;
		}
		p = strstr(p + 1, "layers.");
	}
	return FG_NAME_NO_LAYER;
}

/* name is NUL-terminated, n bytes long. */
static unsigned facts_of(const char *name, size_t n, long n_layers)
{
	const struct norm_rule *r = find_norm_rule_n(name, n);
	unsigned f = FG_FACT_VALID | (unsigned)norm_class_n(name, n, r);

	if (r && r->zero_centred)
		f |= FG_FACT_ZERO_C;
	if (r && r->mlx_shifted)
		f |= FG_FACT_MLX_SHIFT;
	if (strstr(name, "mtp."))
		f |= FG_FACT_MTP_KEY;
	if (ends_n(name, n, ".scales", 7))
		f |= FG_FACT_SCALES;
	if (ends_n(name, n, "_scale_inv", 10))
		f |= FG_FACT_SCALE_INV;
	if (ends_n(name, n, "conv1d.weight", 13))
		f |= FG_FACT_CONV1D;
	f |= (unsigned)fg_name_head_scheme(name, n_layers, NULL) << FG_FACT_SCHEME_SH;
	return f;
}

void fg_name_classify(struct fg_tensor *t, size_t name_len, void *ctx)
{
	long n_layers = ctx ? *(const long *)ctx : -1;
	size_t skip = (size_t)(fg_name_strip(t->name) - t->name);

	t->facts = (uint16_t)facts_of(t->name, name_len, n_layers);
	t->skip = (uint8_t)(skip < 255 ? skip : 255);
}

unsigned fg_name_facts(const struct fg_tensor *t, long n_layers)
{
	return (t->facts & FG_FACT_VALID) ? t->facts : facts_of(t->name, strlen(t->name), n_layers);
}
