/*
 * names.c: the name rules of names.h.
 *
 * They work on suffixes and on the name with container prefixes stripped,
 * because the same tensor is spelled `mtp.fc.weight`, `model.mtp.fc.weight`
 * or `language_model.model.mtp.fc.weight` depending on who exported it.
 */
#include "forge/model/names.h"

#include "forge/core/str.h"

#include <stdbool.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

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
	/*
	 * The DSA indexer's k_norm (DeepSeek-V3.2, GLM-5.x) is a LayerNorm with a
	 * bias, not an RMSNorm gain: never q/k evidence, never zero-centred, even
	 * though its name ends like the attention's k_norm (mlx-lm's suffix test
	 * would still match it).
	 */
	{ ".indexer.k_norm.weight", sizeof(".indexer.k_norm.weight") - 1, FG_NAME_OTHER, 0, 1 },
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
	last = memrchr(name, '.', (size_t)(end - name));
	last = last ? last + 1 : name;
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

/* fg_name_strip of the n bytes at name: how many bytes of prefixes it removes. */
static size_t strip_len(const char *name, size_t n)
{
	size_t at = 0;

	for (;;) {
		if (n - at >= 6 && memcmp(name + at, "model.", 6) == 0)
			at += 6;
		else if (n - at >= 15 && memcmp(name + at, "language_model.", 15) == 0)
			at += 15;
		else
			return at;
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

/* Does the C string s, n bytes long, start with the m bytes of prefix? */
static inline bool starts_n(const char *s, size_t n, const char *prefix, size_t m)
{
	return n >= m && memcmp(s, prefix, m) == 0;
}

/* fg_name_head_scheme of a name already stripped of its container prefixes (n bytes). */
static enum fg_name_scheme head_scheme_stripped(const char *s, size_t n, long n_layers, int *index)
{
	long i;

	if (index)
		*index = 0;
	if (starts_n(s, n, "mtp.", 4)) {
		if (index && starts_n(s + 4, n - 4, "layers.", 7) && (i = parse_index(s + 11)) >= 0)
			*index = (int)i;
		return FG_SCHEME_PREFIX;
	}
	if (starts_n(s, n, "mtp_layers.", 11) && (i = parse_index(s + 11)) >= 0) {
		if (index)
			*index = (int)i;
		return FG_SCHEME_MTP_LAYERS;
	}
	if (n_layers >= 0 && starts_n(s, n, "layers.", 7) && (i = parse_index(s + 7)) >= n_layers) {
		if (index)
			*index = (int)(i - n_layers);
		return FG_SCHEME_APPENDED;
	}
	return FG_SCHEME_NONE;
}

enum fg_name_scheme fg_name_head_scheme(const char *name, long n_layers, int *index)
{
	const char *s = fg_name_strip(name);

	return head_scheme_stripped(s, strlen(s), n_layers, index);
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

/*
 * The first place in the n bytes at s where the m bytes of sub (m >= 2)
 * stand, or NULL: memmem, but a name is short and glibc's memmem builds a
 * shift table per call, so candidates are found 16 bytes at a time by
 * their first two bytes and then compared.
 */
static const char *find_sub(const char *s, size_t n, const char *sub, size_t m)
{
	size_t i = 0;

	if (n < m)
		return NULL;
#ifdef __SSE2__
	if (n >= 17) {
		const __m128i c0 = _mm_set1_epi8(sub[0]), c1 = _mm_set1_epi8(sub[1]);

		/*
		 * Windows of 16 starting places whose second byte is inside the
		 * name; the last window is moved back to end at the name's end
		 * (its places already tried fail again: the first match still wins).
		 */
		for (;; i += 16) {
			__m128i a, b;
			unsigned hit;

			if (i > n - 17)
				i = n - 17;
			a = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
			b = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 1));
			hit = (unsigned)_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(a, c0), _mm_cmpeq_epi8(b, c1)));
			for (; hit; hit &= hit - 1) {
				size_t at = i + (size_t)__builtin_ctz(hit);

				if (at + m <= n && memcmp(s + at + 2, sub + 2, m - 2) == 0)
					return s + at;
			}
			if (i == n - 17)
				return NULL;
		}
	}
#endif
	for (; i + m <= n; i++)
		if (s[i] == sub[0] && memcmp(s + i + 1, sub + 1, m - 1) == 0)
			return s + i;
	return NULL;
}

/* The first occurrences in a name of the substrings the facts test for (NULL: none). */
struct marks {
	const char *mtp;        /* "mtp." */
	const char *experts;    /* "experts." */
	const char *switch_mlp; /* "switch_mlp." */
};

/* The first of the places in hit (bit k: s + at + k starts with sub's first two bytes) where sub stands. */
static inline const char *first_hit(const char *s, size_t n, size_t at, unsigned hit, const char *sub, size_t m)
{
	for (; hit; hit &= hit - 1) {
		size_t k = at + (size_t)__builtin_ctz(hit);

		if (k + m <= n && memcmp(s + k + 2, sub + 2, m - 2) == 0)
			return s + k;
	}
	return NULL;
}

/*
 * find_sub for the three marks in one pass: each 16-place window is
 * tested for all three first pairs, and the windows come in order, so the
 * first hit found of each mark is its first occurrence.
 */
static void find_marks(const char *s, size_t n, struct marks *mk)
{
	mk->mtp = mk->experts = mk->switch_mlp = NULL;
#ifdef __SSE2__
	if (n >= 17) {
		for (size_t i = 0;; i += 16) {
			__m128i a, b;

			if (i > n - 17)
				i = n - 17;
			a = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
			b = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 1));
#define PAIR(x, y) _mm_and_si128(_mm_cmpeq_epi8(a, _mm_set1_epi8(x)), _mm_cmpeq_epi8(b, _mm_set1_epi8(y)))
			__m128i m = PAIR('m', 't'), e = PAIR('e', 'x'), w = PAIR('s', 'w');
#undef PAIR

			/* Most windows hold none of the three: one test for all. */
			if (_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(m, e), w))) {
				if (!mk->mtp)
					mk->mtp = first_hit(s, n, i, (unsigned)_mm_movemask_epi8(m), "mtp.", 4);
				if (!mk->experts)
					mk->experts = first_hit(s, n, i, (unsigned)_mm_movemask_epi8(e), "experts.", 8);
				if (!mk->switch_mlp)
					mk->switch_mlp = first_hit(s, n, i, (unsigned)_mm_movemask_epi8(w), "switch_mlp.", 11);
			}
			if (i == n - 17)
				return;
		}
	}
#endif
	mk->mtp = find_sub(s, n, "mtp.", 4);
	mk->experts = find_sub(s, n, "experts.", 8);
	mk->switch_mlp = find_sub(s, n, "switch_mlp.", 11);
}

/*
 * Which expert naming the n bytes at name show, as the inspection's layout
 * test reads them: the first "experts." (at a component boundary, else
 * none) followed by a digit, or by "gate_up_proj" ending the name or
 * followed by ".weight"; without "experts.", the first "switch_mlp." at a
 * component boundary.
 */
static enum fg_name_expert expert_kind(const char *name, size_t n, const struct marks *mk)
{
	const char *p = mk->experts, *rest;
	size_t left;

	if (!p) {
		p = mk->switch_mlp;
		return p && (p == name || p[-1] == '.') ? FG_EXPERT_SWITCH_MLP : FG_EXPERT_NONE;
	}
	if (p != name && p[-1] != '.')
		return FG_EXPERT_NONE;
	rest = p + 8;
	left = (size_t)(name + n - rest);
	if (left && *rest >= '0' && *rest <= '9')
		return FG_EXPERT_NUMBERED;
	if (left < 12 || memcmp(rest, "gate_up_proj", 12) != 0 ||
	    (left > 12 && (left != 19 || memcmp(rest + 12, ".weight", 7) != 0)))
		return FG_EXPERT_NONE;
	return FG_EXPERT_GATE_UP;
}

/*
 * name is NUL-terminated, n bytes long; strip the length of its container
 * prefixes.  The suffix rules are tried only for the suffixes they can
 * match, so most names (expert weights) cost a few compares and two
 * substring scans.
 */
static unsigned facts_of(const char *name, size_t n, size_t strip, long n_layers)
{
	const struct norm_rule *r = NULL;
	unsigned f = FG_FACT_VALID;
	struct marks mk;

	if (ends_n(name, n, ".weight", 7)) {
		r = find_norm_rule_n(name, n);
		if (ends_n(name, n, "conv1d.weight", 13))
			f |= FG_FACT_CONV1D;
	} else if (ends_n(name, n, ".scales", 7)) {
		f |= FG_FACT_SCALES;
	} else if (ends_n(name, n, "_scale_inv", 10)) {
		f |= FG_FACT_SCALE_INV;
	}
	f |= (unsigned)norm_class_n(name, n, r);
	if (r && r->zero_centred)
		f |= FG_FACT_ZERO_C;
	if (r && r->mlx_shifted)
		f |= FG_FACT_MLX_SHIFT;
	find_marks(name, n, &mk);
	if (mk.mtp)
		f |= FG_FACT_MTP_KEY;
	f |= (unsigned)head_scheme_stripped(name + strip, n - strip, n_layers, NULL) << FG_FACT_SCHEME_SH;
	f |= (unsigned)expert_kind(name, n, &mk) << FG_FACT_EXPERT_SH;
	return f;
}

void fg_name_classify(struct fg_tensor *t, size_t name_len, void *ctx)
{
	long n_layers = ctx ? *(const long *)ctx : -1;
	size_t skip = strip_len(t->name, name_len);

	t->facts = (uint16_t)facts_of(t->name, name_len, skip, n_layers);
	t->skip = (uint8_t)(skip < 255 ? skip : 255);
}

unsigned fg_name_facts(const struct fg_tensor *t, long n_layers)
{
	size_t n;

	if (t->facts & FG_FACT_VALID)
		return t->facts;
	n = strlen(t->name);
	return facts_of(t->name, n, strip_len(t->name, n), n_layers);
}

enum fg_name_expert fg_name_expert_kind(const struct fg_tensor *t)
{
	struct marks mk;
	size_t n;

	if (t->facts & FG_FACT_VALID)
		return (enum fg_name_expert)((t->facts & FG_FACT_EXPERT) >> FG_FACT_EXPERT_SH);
	n = strlen(t->name);
	find_marks(t->name, n, &mk);
	return expert_kind(t->name, n, &mk);
}
