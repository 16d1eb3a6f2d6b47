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
	enum fg_name_norm cls;
	int zero_centred;  /* stores an offset in zero-centred families */
	int mlx_shifted;   /* in mlx-lm's sanitize suffix list */
} norm_rules[] = {
	{ ".q_norm.weight", FG_NAME_QK, 1, 1 },
	{ ".k_norm.weight", FG_NAME_QK, 1, 1 },
	{ ".input_layernorm.weight", FG_NAME_LOW, 1, 1 },
	{ ".post_attention_layernorm.weight", FG_NAME_LOW, 1, 1 },
	{ ".pre_fc_norm_embedding.weight", FG_NAME_LOW, 1, 0 },
	{ ".pre_fc_norm_hidden.weight", FG_NAME_LOW, 1, 0 },
	/* The pre-fc norms of the plain families' heads: evidence-class only. */
	{ ".enorm.weight", FG_NAME_LOW, 0, 0 },
	{ ".hnorm.weight", FG_NAME_LOW, 0, 0 },
	{ ".token_layernorm.weight", FG_NAME_LOW, 0, 0 },
	{ ".hidden_layernorm.weight", FG_NAME_LOW, 0, 0 },
	{ "linear_attn.norm.weight", FG_NAME_NEVER, 0, 0 },
	{ "model.norm.weight", FG_NAME_FINAL, 1, 1 },
	{ "mtp.norm.weight", FG_NAME_FINAL, 1, 0 },
};

/* The first rule whose suffix ends name, or NULL. */
static const struct norm_rule *find_norm_rule(const char *name)
{
	for (size_t i = 0; i < sizeof(norm_rules) / sizeof(norm_rules[0]); i++)
		if (fg_str_ends_with(name, norm_rules[i].suffix))
			return &norm_rules[i];
	return NULL;
}

enum fg_name_norm fg_name_norm_class(const char *name)
{
	const char *last, *end;
	const struct norm_rule *r = find_norm_rule(name);

	if (r)
		return r->cls;
	if (!fg_str_ends_with(name, ".weight"))
		return FG_NAME_NOT_NORM;
	/* The module name before ".weight" says whether it is a norm. */
	end = name + strlen(name) - strlen(".weight");
	last = end;
	while (last > name && last[-1] != '.')
		last--;
	for (const char *p = last; p + 4 <= end; p++)
		if (memcmp(p, "norm", 4) == 0)
			return FG_NAME_OTHER;
	return FG_NAME_NOT_NORM;
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
