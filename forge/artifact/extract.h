/*
 * extract.h: the plan of an MTP sidecar: which tensors the target runtime
 * gets, under which names, in which layout and convention, and from which
 * source bytes.
 *
 * A plan is data: one entry per output tensor with the operation that makes
 * it (copy the bytes, shift a zero-centred norm, dequantize FP8, stack
 * numbered experts, split or transpose fused experts).  Nothing is read until
 * fg_head_materialize() fills a caller's buffer for one entry, so a writer
 * holds at most one tensor at a time.  Names come from a table per (family,
 * target): Qwen heads become `mtp.*` with container prefixes stripped; GLM,
 * DeepSeek and MiMo heads keep their source names.  Experts become stacked
 * `switch_mlp.{gate,up,down}_proj.weight` for MLX targets.
 */
#ifndef FG_EXTRACT_H
#define FG_EXTRACT_H

#include <stddef.h>
#include <stdint.h>

#include "forge/model/convention.h"
#include "forge/core/error.h"
#include "forge/model/experts.h"
#include "forge/model/inspect.h"
#include "forge/format/safetensors.h"

enum fg_head_op {
	FG_HEAD_VIEW,        /* the source bytes, unchanged */
	FG_HEAD_SHIFT,       /* source + shift, computed and stored in F32 */
	FG_HEAD_FP8,         /* E4M3 * scale_inv blocks (128x128), stored BF16 */
	FG_HEAD_STACK,       /* numbered experts stacked on a new first axis */
	FG_HEAD_SPLIT,       /* half of a fused [E,2I,H] gate_up (linear) */
	FG_HEAD_SPLIT_T,     /* half of a fused [E,H,2I] gate_up (bmm), transposed to [E,I,H] */
	FG_HEAD_TRANSPOSE,   /* a fused bmm down [E,I,H] transposed to [E,H,I] */
	FG_HEAD_QUANT,       /* MLX-quantize the product of `base`; part says which output */
};

enum fg_quant_part { FG_QPART_WEIGHT, FG_QPART_SCALES, FG_QPART_BIASES };

struct fg_quant_spec {
	int bits;              /* 0: not quantized */
	int group;
	int mxfp4;             /* 1: mxfp4 (no biases) */
};

/* A quantization policy: keep, match (the backbone's block), affine, mxfp4. */
enum fg_quant_policy { FG_QUANT_KEEP, FG_QUANT_MATCH, FG_QUANT_AFFINE, FG_QUANT_MXFP4 };

struct fg_policy {
	enum fg_quant_policy kind;
	struct fg_quant_spec spec;      /* AFFINE: bits and group; MXFP4: group 32 */
	char text[32];                  /* as given: "keep", "affine:4:64", ... */
};

/* Parse "keep", "match", "affine:BITS:GROUP" or "mxfp4" (NULL: keep); FG_EUSAGE otherwise. */
int fg_policy_parse(const char *text, struct fg_policy *out, struct fg_err *err);

struct fg_quant_cache;

struct fg_head_out {
	char name[256];
	enum fg_dtype dtype;
	int rank;
	uint64_t shape[FG_ST_MAX_RANK];
	enum fg_head_op op;
	const struct fg_tensor *src;        /* VIEW, SHIFT, FP8, SPLIT(_T), TRANSPOSE */
	const struct fg_tensor *scale_inv;  /* FP8 sources (also per stacked expert) */
	const struct fg_tensor **srcs;      /* STACK: one per expert (owned array) */
	const struct fg_tensor **scale_invs;/* STACK: parallel, entries may be NULL */
	size_t n_srcs;
	int half;                           /* SPLIT(_T): 0 gate, 1 up */
	float shift;                        /* SHIFT: +1 (to absolute) or -1 (to delta) */
	int changed;                        /* values differ from the source's (originals kept) */
	int relayout;                       /* same values, new layout (recorded, not copied) */
	/* FG_HEAD_QUANT */
	struct fg_quant_spec quant;
	enum fg_quant_part part;
	int base;                           /* index of the plan entry quantized (not written) */
	int hidden;                         /* 1: an input of a QUANT entry only, not written */
};

struct fg_head_plan {
	size_t n, cap;
	struct fg_head_out *t;
	enum fg_convention source_conv;     /* the head set's decided convention */
	enum fg_convention target_conv;     /* absolute, delta, or plain */
	const char *target;
	size_t n_shifted;
	char expert_layout[32];             /* "numbered", "fused_linear", ... or "" */
	struct fg_quant_cache *qcache;      /* the last quantized tensor's outputs (owned) */
};

/* 1 when a runtime id is an MLX-style target (absolute norms, stacked experts). */
int fg_target_is_mlx(const char *runtime);

/*
 * Plan the sidecar of the inspected source's head for target.  Refuses with
 * FG_EINPUT (and a message naming the reason) a source without a head, a head
 * whose convention cannot be decided or is already broken, an ambiguous expert
 * layout, fewer numbered experts than the config declares, FP8 tensors
 * without scales, and norms of unsupported dtypes.  The plan borrows tensors
 * from r, which must outlive it.
 */
int fg_extract_plan(const struct fg_inspect *r, const char *target, struct fg_head_plan *plan,
		    struct fg_err *err);

void fg_head_plan_release(struct fg_head_plan *plan);

/*
 * Apply a quantization policy to a plan: each head linear the policy selects
 * becomes a hidden input of MLX-quantized outputs (`.weight` U32, `.scales`,
 * `.biases`; mxfp4 has no biases).  With FG_QUANT_MATCH the backbone's
 * config.json `quantization` block and the backbone's own `.scales` tensors
 * decide, module by module: a head linear is quantized as its backbone
 * counterpart is, and not at all when the counterpart is not (or there is
 * none: fc, eh_proj and input_proj).  Norms, biases and routers are never
 * selected unless the backbone quantizes its own.  record (a cJSON object,
 * may be NULL) receives module -> {"bits","group_size","mode"} or null.
 */
int fg_quant_apply(struct fg_head_plan *plan, const struct fg_policy *policy, const struct fg_inspect *backbone,
		   cJSON *record, struct fg_err *err);

/* Bytes of one plan entry's output. */
uint64_t fg_head_out_bytes(const struct fg_head_out *o);

/*
 * Fill buf (fg_head_out_bytes(o) bytes) with entry o's output.  plan gives
 * QUANT entries their base.  Reads only o's source tensors.
 */
int fg_head_materialize(const struct fg_head_plan *plan, const struct fg_head_out *o, uint8_t *buf,
			struct fg_err *err);

#endif
