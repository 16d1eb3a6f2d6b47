/*
 * qconfig.h: a checkpoint's quantization config, read from its JSON files,
 * and the parameters it gives one module (struct fg_qparams of dequant.h,
 * the input of fg_qformat_detect).  Format knowledge only: which modules a
 * model has, and which of them form the MTP head, is forge/model's business.
 *
 * Where the config is (notes/quant-formats.md sections 2.5, 3.4, 4.5, 5, 6.5,
 * 7.5, 8, 9): config.json "quantization_config" (or text_config's, for
 * vision-language models); MLX's top-level "quantization" (mlx-lm also
 * writes a copy as "quantization_config" without quant_method, which is
 * read as MLX too); ModelOpt's hf_quant_config.json; AutoGPTQ's legacy
 * quantize_config.json / AutoAWQ's quant_config.json.  quant_method:
 *   gptq     bits (w_bit), group_size (q_group_size), desc_act, sym,
 *            checkpoint_format (else format; lower case; default "gptq"),
 *            is_marlin_format, pack_dtype, and GPTQModel's "dynamic":
 *            ordered regex -> overrides, "-:" = not quantized, first match
 *            wins;
 *   awq      bits, group_size, zero_point, version, modules_to_not_convert
 *            (substring match, as AutoAWQ);
 *   compressed-tensors  format, version, config_groups (a scheme object with
 *            targets and weights, or a preset name mapped to targets), ignore;
 *   modelopt quant_algo, config_groups' weights, ignore; or
 *            hf_quant_config.json's quantization {quant_algo, group_size,
 *            exclude_modules, quantized_layers}; entries with '*' wildcards;
 *   fp8      fmt, weight_block_size, modules_to_not_convert (substring),
 *            ignored_layers (the name or a "name." prefix);
 *   MLX      group_size, bits, mode, and module paths mapped to false or to
 *            their own {group_size, bits, mode};
 *   anything else: FG_QM_UNSUPPORTED, named (fg_qformat_detect refuses it for
 *            any module whose tensors are quantized).
 * forged's own artifacts also carry its record of the MTP head it wrote,
 * mtp_quantization.modules (module path -> {bits, group_size, mode}, an MLX
 * format, or null / bits null for a module kept as floats): over a float
 * trunk there is no block, over a Hugging Face format the trunk's config
 * does not describe the MLX head modules.  fg_qconfig_for_head_module
 * resolves the modules the record quantizes as MLX with its fields, and
 * everything else as fg_qconfig_for_module does (which never reads it).
 *
 * Matching (compressed-tensors, utils/match.py): an ignore or target entry
 * "re:<regex>" matches when the regex matches at the start of the module
 * name (Python re.match; fg_qpattern_match); any other entry matches the
 * name exactly; a target that is no name but a class name matches only if
 * it is "Linear" (checkpoints do not record classes, and every module forged
 * dequantizes is a linear layer).  ignore wins over targets; among groups,
 * an exact target beats a regex, a regex beats a class name, and ties go to
 * the first group in the file.  Module names are without ".weight".
 *
 * The parsed config borrows the cJSON trees given to fg_qconfig_parse (they
 * must outlive it); what it allocates (an index of a large MLX block's
 * per-module keys) goes with fg_qconfig_release.
 * Every value is type-checked at parse time and every regex compiled, so a
 * malformed config fails fg_qconfig_parse, not a later module lookup.
 */
#ifndef FG_QCONFIG_H
#define FG_QCONFIG_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "forge/core/error.h"
#include "forge/core/nameidx.h"
#include "forge/format/quant/dequant.h"

/* The JSON files a checkpoint may carry (any may be NULL). */
struct fg_qconfig_src {
	const cJSON *config;          /* config.json */
	const cJSON *hf_quant_config; /* hf_quant_config.json (ModelOpt) */
	const cJSON *quantize_config; /* quantize_config.json / quant_config.json (legacy GPTQ / AWQ) */
};

/* How an exclusion list matches a module name. */
enum fg_qmatch {
	FG_QMATCH_CT,        /* "re:" regex at the start, else the exact name */
	FG_QMATCH_SUBSTRING, /* the entry occurs in the name */
	FG_QMATCH_PREFIX,    /* the name, or the name starts with entry + "." */
	FG_QMATCH_WILDCARD,  /* the whole name, '*' matching any run of characters */
};

struct fg_qconfig {
	struct fg_qparams base;   /* the config's global parameters */
	const cJSON *qc;          /* the object read (borrowed) */
	const cJSON *groups;      /* config_groups (object) */
	const cJSON *ignore;      /* exclusions (array of strings) */
	enum fg_qmatch ignore_rule;
	const cJSON *ignore2;     /* fp8 ignored_layers (FG_QMATCH_PREFIX) */
	const cJSON *dynamic;     /* GPTQModel dynamic (object) */
	const cJSON *mlx;         /* MLX quantization object: per-module keys */
	const cJSON *layers;      /* ModelOpt MIXED_PRECISION quantized_layers (object) */
	const cJSON *record;      /* forged's mtp_quantization.modules (head modules only) */
	/* private: mlx's and record's members by key when they have many (a lookup per module scanned them all) */
	struct fg_nameidx mlx_keys, record_keys;
};

/*
 * Read the quantization config from src.  A checkpoint without one gives
 * base.method FG_QM_NONE.  Returns 0, or FG_EINPUT naming the key and what is
 * wrong with its value, FG_EUSAGE for NULL arguments.
 */
int fg_qconfig_parse(struct fg_qconfig *c, const struct fg_qconfig_src *src, struct fg_err *err);

/* Free what fg_qconfig_parse allocated (NULL, and a config never parsed but zeroed, allowed). */
void fg_qconfig_release(struct fg_qconfig *c);

/*
 * The parameters c gives module (e.g. "model.layers.61.mlp.down_proj"):
 * out->quantized says whether the config quantizes it (ignore lists,
 * targets, "-:" patterns, per-module false), out->have_weights whether the
 * weight fields describe it, and out->why which rule decided.  Returns 0 or
 * FG_EINPUT (a regex error cannot happen here after fg_qconfig_parse).
 */
int fg_qconfig_for_module(const struct fg_qconfig *c, const char *module, struct fg_qparams *out,
			  struct fg_err *err);

/*
 * The same for a module of an MTP head: forged's record first (a module it
 * names with bits), else fg_qconfig_for_module.
 */
int fg_qconfig_for_head_module(const struct fg_qconfig *c, const char *module, struct fg_qparams *out,
			       struct fg_err *err);

/*
 * Python re.match(pattern, name) for the subset of Python's syntax that
 * qregex.c documents: *matched is true when pattern matches a prefix of
 * name.  Returns 0, or FG_EINPUT for a pattern outside the subset (named,
 * with the reason and position), FG_ENOMEM.
 */
int fg_qpattern_match(const char *pattern, const char *name, bool *matched, struct fg_err *err);

/* Whether entry matches module under rule (a regex error is FG_EINPUT). */
int fg_qmatch_entry(enum fg_qmatch rule, const char *entry, const char *module, bool *matched,
		    struct fg_err *err);

#endif
