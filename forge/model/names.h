/*
 * names.h: the name rules shared by every family.
 *
 * They classify tensor names the same way for every family: which names are
 * norms and which evidence class they belong to (docs/domain.md section 2), which
 * of them store an offset in zero-centred families, which mlx-lm shifts, and
 * which names belong to the MTP head under each storage scheme.
 */
#ifndef FG_NAMES_H
#define FG_NAMES_H

enum fg_name_scheme {
	FG_SCHEME_NONE,
	FG_SCHEME_PREFIX,      /* mtp.* after container prefixes */
	FG_SCHEME_APPENDED,    /* model.layers.{L+i}.* */
	FG_SCHEME_MTP_LAYERS,  /* model.mtp_layers.{i}.* */
};

const char *fg_name_scheme_name(enum fg_name_scheme s);

/* Evidence classes of norm tensors (docs/domain.md section 2). */
enum fg_name_norm {
	FG_NAME_QK,     /* self_attn.q_norm / k_norm */
	FG_NAME_LOW,    /* input/post-attention layernorms and the pre-fc norms (enorm/hnorm too) */
	FG_NAME_FINAL,  /* model.norm, mtp.norm: zero-centred but never evidence */
	FG_NAME_NEVER,  /* linear_attn.norm: never zero-centred */
	FG_NAME_OTHER,  /* other norms (shared_head.norm, q_a_layernorm, ...) */
	FG_NAME_NOT_NORM,   /* not a norm */
};

/* Classify a tensor name (the caller checks rank 1 and a float dtype). */
enum fg_name_norm fg_name_norm_class(const char *name);

/*
 * True when, in a zero-centred family, the norm called name stores an offset
 * (so a runtime or forge adds 1 to it).  linear_attn.norm and norms of no
 * known zero-centred role are false.
 */
int fg_name_zero_centred(const char *name);

/* True when mlx-lm's sanitize would add 1 to this name (the mlx-lm suffixes). */
int fg_name_mlx_shifted(const char *name);

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
enum fg_name_scheme fg_name_head_scheme(const char *name, long n_layers, int *index);

/* What fg_name_layer returns for a name without a layer number. */
#define FG_NAME_NO_LAYER (-1L)

/* The decoder layer number of a trunk name ("...layers.7.x" -> 7), or FG_NAME_NO_LAYER. */
long fg_name_layer(const char *name);

#endif
