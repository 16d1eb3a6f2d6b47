/*
 * family.h: the model families forged knows, as a table.
 *
 * One row per family of docs/domain.md section 1: how config.json names it, its
 * RMSNorm style, the config keys that declare MTP layers, where its head
 * lives and in which order the head concatenates its inputs.  Adding a family
 * is adding a row.  A config that matches no row is `unknown`: forged never
 * guesses a family.
 *
 * The name rules every family shares are in names.h.
 */
#ifndef FG_FAMILY_H
#define FG_FAMILY_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "forge/model/names.h"

enum fg_family_style {
	FG_STYLE_UNKNOWN,
	FG_STYLE_ZERO_CENTRED, /* g = 1 + w: stored delta in HF, absolute after MLX conversion */
	FG_STYLE_PLAIN,        /* g = w */
};

/* A config model_type a family answers to, and whether that variant is mixture-of-experts. */
struct fg_model_type {
	const char *name;
	int moe;
};

/*
 * Where a family's trunk probe (the first full-attention layer's
 * self_attn.q_norm mean) sits after load, as published for its fleet:
 * healthy is where healthy packs sit, plausible what inspect accepts as a
 * loaded absolute trunk (below: the shift is missing; above: shifted twice).
 * Fleet health buckets a served artifact's after-load probe against its
 * family's band; a family without one gets a distribution and no alarm.
 */
struct fg_probe_band {
	double healthy_lo, healthy_hi;
	double plausible_lo, plausible_hi;
	const char *source;                   /* where the figures are published */
};

struct fg_family {
	const char *id;                       /* docs/interfaces.md section 3 vocabulary */
	const struct fg_model_type *model_types; /* config model_type or text_config.model_type;
						  * ends with a NULL name */
	const char *const *architectures;     /* config architectures[] entries */
	enum fg_family_style norm_style;
	const char *const *mtp_count_keys;    /* first present wins */
	int implied_mtp_layers;               /* when no key is present (MiMo-V2: 3), else 0 */
	enum fg_name_scheme scheme;           /* where the family's own releases keep the head */
	int hidden_first;                     /* concat order: 1 for MiMo-7B, else embedding first */
	int strips_to_mtp;                    /* a forged sidecar names the head mtp.*, container
					       * prefixes stripped (Qwen); else source names are kept */
	const char *const *head_linears;      /* the last name parts of the head linears an explicit
					       * quantization policy quantizes (NULL-terminated) */
	const struct fg_probe_band *probe_band; /* the fleet's published trunk q-norm band, or NULL */
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

/*
 * 1 when module's last name part ("...self_attn.q_proj" -> "q_proj") is one
 * of fam's head_linears.
 */
int fg_family_is_head_linear(const struct fg_family *fam, const char *module);

/* Every family row, for tests and listings. */
const struct fg_family *const *fg_family_all(size_t *n);

const char *fg_family_style_name(enum fg_family_style s);

/* The probe band of the family with id family (NULL: none published, or an unknown id). */
const struct fg_probe_band *fg_family_probe_band(const char *family);

/*
 * Declared MTP layers: the first count key present in config (the merged
 * config: text_config keys included), else implied_mtp_layers.  Returns -1
 * when the family declares nothing and the config has no key.
 */
int fg_family_declared_mtp(const struct fg_family *fam, const cJSON *config);

#endif
