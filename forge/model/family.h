/*
 * family.h: the model families forged knows, as a table.
 *
 * One row per family of domain.md section 1: how config.json names it, its
 * RMSNorm style, the config keys that declare MTP layers, where its head
 * lives and in which order the head concatenates its inputs.  Adding a family
 * is adding a row.  A config that matches no row is `unknown`: forged never
 * guesses a family.
 *
 * The name helpers below classify tensor names the same way for every
 * family: which names are norms and which evidence class they belong to, and
 * which names belong to the MTP head under each storage scheme.
 */
#ifndef FG_FAMILY_H
#define FG_FAMILY_H

#include <stddef.h>

#include <cjson/cJSON.h>

enum fg_norm_style {
	FG_STYLE_UNKNOWN,
	FG_STYLE_ZERO_CENTRED, /* g = 1 + w: stored delta in HF, absolute after MLX conversion */
	FG_STYLE_PLAIN,        /* g = w */
};

enum fg_head_scheme {
	FG_SCHEME_NONE,
	FG_SCHEME_PREFIX,      /* mtp.* after container prefixes */
	FG_SCHEME_APPENDED,    /* model.layers.{L+i}.* */
	FG_SCHEME_MTP_LAYERS,  /* model.mtp_layers.{i}.* */
};

struct fg_family {
	const char *id;                       /* design.md section 5 vocabulary */
	const char *const *model_types;       /* config model_type or text_config.model_type */
	const char *const *architectures;     /* config architectures[] entries */
	enum fg_norm_style norm_style;
	const char *const *mtp_count_keys;    /* first present wins */
	int implied_mtp_layers;               /* when no key is present (MiMo-V2: 3), else 0 */
	enum fg_head_scheme scheme;           /* where the family's own releases keep the head */
	int hidden_first;                     /* concat order: 1 for MiMo-7B, else embedding first */
	int moe_types;                        /* bit set of model_types indexes that are MoE */
};

/* The unknown family (id "unknown"), returned when nothing matches. */
extern const struct fg_family fg_family_unknown;

/*
 * Recognise config (the raw config.json; NULL allowed) by model_type, then
 * text_config.model_type, then architectures.  Never NULL: unknown configs
 * get &fg_family_unknown.  *moe (may be NULL) is set when the matched type is
 * a mixture-of-experts variant or the config declares experts.
 */
const struct fg_family *fg_family_detect(const cJSON *config, int *moe);

/* Every family row, for tests and listings. */
const struct fg_family *const *fg_family_all(size_t *n);

const char *fg_norm_style_name(enum fg_norm_style s);
const char *fg_head_scheme_name(enum fg_head_scheme s);

/*
 * Declared MTP layers: the first count key present in config (the merged
 * config: text_config keys included), else implied_mtp_layers.  Returns -1
 * when the family declares nothing and the config has no key.
 */
int fg_family_declared_mtp(const struct fg_family *fam, const cJSON *config);

/* Evidence classes of norm tensors (domain.md section 2). */
enum fg_norm_class {
	FG_NORM_QK,     /* self_attn.q_norm / k_norm */
	FG_NORM_LOW,    /* input/post-attention layernorms and the pre-fc norms (enorm/hnorm too) */
	FG_NORM_FINAL,  /* model.norm, mtp.norm: zero-centred but never evidence */
	FG_NORM_NEVER,  /* linear_attn.norm: never zero-centred */
	FG_NORM_OTHER,  /* other norms (shared_head.norm, q_a_layernorm, ...) */
	FG_NORM_NONE,   /* not a norm */
};

/* Classify a tensor name (the caller checks rank 1 and a float dtype). */
enum fg_norm_class fg_norm_classify(const char *name);

/*
 * True when, in a zero-centred family, the norm called name stores an offset
 * (so a runtime or forge adds 1 to it).  linear_attn.norm and norms of no
 * known zero-centred role are false.
 */
int fg_norm_zero_centred(const char *name);

/* True when mlx-lm's sanitize would add 1 to this name (the mlx-lm suffixes). */
int fg_norm_mlx_shifted(const char *name);

/*
 * The name with its container prefixes ("model.", "language_model.", in any
 * order, repeated) removed.  Returns a pointer into name.
 */
const char *fg_name_strip(const char *name);

/*
 * Which head scheme name belongs to, given L = num_hidden_layers (or -1 when
 * unknown): FG_SCHEME_PREFIX for mtp.*, FG_SCHEME_APPENDED for layers.{>=L},
 * FG_SCHEME_MTP_LAYERS for mtp_layers.*, else FG_SCHEME_NONE.  *index (may be
 * NULL) gets the head layer index (i for layers L+i and mtp_layers.i; the
 * number after mtp.layers. for prefix names, else 0).
 */
enum fg_head_scheme fg_head_name_scheme(const char *name, long n_layers, int *index);

/* The decoder layer number of a trunk name ("...layers.7.x" -> 7), or -1. */
long fg_name_layer(const char *name);

#endif
