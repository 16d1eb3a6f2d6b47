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

#include <stddef.h>

#include "forge/format/safetensors.h"

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

/*
 * ---- Facts computed once per tensor, at parse time ----
 *
 * fg_name_classify is the classifier inspect hands to the safetensors
 * parser (struct fg_st_parse_opts): it fills t->facts with the answers of
 * the rules above (so each is worked out once per tensor, on the parsing
 * threads) and t->skip with fg_name_strip's offset.  ctx points to a long,
 * the num_hidden_layers the head scheme is judged against (-1: unknown).
 */
#define FG_FACT_NORM_MASK  0x0007u  /* enum fg_name_norm */
#define FG_FACT_ZERO_C     0x0008u  /* fg_name_zero_centred */
#define FG_FACT_MLX_SHIFT  0x0010u  /* fg_name_mlx_shifted */
#define FG_FACT_MTP_KEY    0x0020u  /* the name contains "mtp." */
#define FG_FACT_SCALES     0x0040u  /* ends ".scales" (MLX quantized) */
#define FG_FACT_SCALE_INV  0x0080u  /* ends "_scale_inv" (FP8) */
#define FG_FACT_CONV1D     0x0100u  /* ends "conv1d.weight" */
#define FG_FACT_SCHEME_SH  9        /* bits 9-10: enum fg_name_scheme */
#define FG_FACT_SCHEME     (3u << FG_FACT_SCHEME_SH)
#define FG_FACT_EXPERT_SH  11       /* bits 11-12: enum fg_name_expert */
#define FG_FACT_EXPERT     (3u << FG_FACT_EXPERT_SH)
#define FG_FACT_VALID      0x8000u

/* How a name spells a routed expert (the part of inspect's layout test that reads the name). */
enum fg_name_expert {
	FG_EXPERT_NONE,
	FG_EXPERT_NUMBERED,    /* experts.{e}.* */
	FG_EXPERT_GATE_UP,     /* experts.gate_up_proj[.weight]: fused, oriented by its shape */
	FG_EXPERT_SWITCH_MLP,  /* switch_mlp.*, MLX-stacked */
};

void fg_name_classify(struct fg_tensor *t, size_t name_len, void *ctx);

/* The facts of t: its own when classified, else computed now from its name (n_layers for the scheme). */
unsigned fg_name_facts(const struct fg_tensor *t, long n_layers);

/* The expert naming of t: from its facts when classified, else from its name. */
enum fg_name_expert fg_name_expert_kind(const struct fg_tensor *t);

static inline enum fg_name_norm fg_tensor_norm_class(const struct fg_tensor *t)
{
	return (t->facts & FG_FACT_VALID) ? (enum fg_name_norm)(t->facts & FG_FACT_NORM_MASK)
					  : fg_name_norm_class(t->name);
}

#endif
