/*
 * plan.h: the plan of an MTP sidecar: which tensors the target runtime
 * gets, under which names, in which layout and convention, and from which
 * source bytes.
 *
 * A plan is data: one entry per output tensor with the operation that makes
 * it (copy the bytes, shift a zero-centred norm, dequantize FP8 or any
 * quantized module, stack numbered experts, split or transpose fused
 * experts).  Nothing is read until fg_plan_materialize_range() fills a
 * caller's buffer with a range of one entry, so a writer holds one chunk at
 * a time, never a whole tensor (a dequantized module is made a band of rows
 * at a time).  Names come from a table per (family,
 * target): Qwen heads become `mtp.*` with container prefixes stripped; GLM,
 * DeepSeek and MiMo heads keep their source names.  Experts become stacked
 * `switch_mlp.{gate,up,down}_proj.weight` for MLX targets.
 */
#ifndef FG_PLAN_H
#define FG_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "forge/model/convention.h"
#include "forge/core/error.h"
#include "forge/model/experts.h"
#include "forge/core/nameidx.h"
#include "forge/model/inspect.h"
#include "forge/model/qmods.h"
#include "forge/format/safetensors.h"

enum fg_plan_op {
	FG_OP_VIEW,        /* the source bytes, unchanged */
	FG_OP_SHIFT,       /* source + shift, computed and stored in F32 */
	FG_OP_FP8,         /* E4M3 * scale_inv blocks (128x128), stored BF16 */
	FG_OP_STACK,       /* numbered experts stacked on a new first axis */
	FG_OP_SPLIT,       /* half of a fused [E,2I,H] gate_up (linear) */
	FG_OP_SPLIT_T,     /* half of a fused [E,H,2I] gate_up (bmm), transposed to [E,I,H] */
	FG_OP_TRANSPOSE,   /* a fused bmm down [E,I,H] transposed to [E,H,I] */
	FG_OP_QUANT,       /* MLX-quantize the product of `base`; part says which output */
	FG_OP_DEQUANT,     /* a quantized module (qsrc) dequantized to BF16 W [out, in] ([E, out, in] stacked) */
};

enum fg_plan_part { FG_PART_WEIGHT, FG_PART_SCALES, FG_PART_BIASES };

struct fg_plan_quant {
	int bits;              /* 0: not quantized */
	int group;
	int mxfp4;             /* 1: mxfp4 (no biases) */
};

struct fg_plan_qcache;

struct fg_plan_entry {
	char *name;                         /* the output name (owned, whole) */
	enum fg_dtype dtype;
	int rank;
	uint64_t shape[FG_ST_MAX_RANK];
	enum fg_plan_op op;
	const struct fg_tensor *src;        /* VIEW, SHIFT, FP8, SPLIT(_T), TRANSPOSE */
	const struct fg_tensor *scale_inv;  /* FP8 sources (also per stacked expert) */
	const struct fg_tensor **srcs;      /* STACK: one per expert (owned array) */
	const struct fg_tensor **scale_invs;/* STACK: parallel, entries may be NULL */
	const struct fg_qmod *qsrc;         /* DEQUANT: the module (qmods.h), its tensors its sources */
	const struct fg_qmod **qsrcs;       /* STACK: parallel, the quantized experts (entries may be NULL) */
	size_t n_srcs;
	int half;                           /* SPLIT(_T): 0 gate, 1 up */
	float shift;                        /* SHIFT: +1 (to absolute) or -1 (to delta) */
	int changed;                        /* values differ from the source's (originals kept) */
	int relayout;                       /* same values, new layout (recorded, not copied) */
	/*
	 * FG_OP_QUANT.  The parts of one base follow each other in part order
	 * (weight, scales, biases), so the entry of part p is this one's
	 * address + (p - part): materialization relies on it (asserted).
	 */
	struct fg_plan_quant quant;
	enum fg_plan_part part;
	int base;                           /* index of the plan entry quantized (not written) */
	int hidden;                         /* 1: an input of a QUANT entry only, not written */
};

/* How a quantized head module reaches the sidecar. */
enum fg_plan_qhow {
	FG_PQ_KEPT,        /* its tensors copied in the source's MLX format, which the target reads */
	FG_PQ_DEQUANT,     /* dequantized to BF16 (then the policy may quantize it again) */
};

/* One quantized module of the source head and what the plan does with it. */
struct fg_plan_module {
	char *source;                       /* the module as stored in the source (owned) */
	char *out;                          /* the output module (owned): the name the policy and config use */
	const struct fg_qmod *q;            /* its format (for stacked experts: expert 0's) */
	size_t experts;                     /* numbered experts stacked into out (0: one module) */
	enum fg_plan_qhow how;
	int requantized;                    /* policy.c quantized it again (--allow-requantize) */
};

/* What fg_plan_build needs besides the inspection. */
struct fg_plan_opts {
	const cJSON *config;                /* the artifact's config.json (the backbone's), or NULL: an MLX-quantized
					     * head module is kept only when it has a `quantization` block */
	int dequant_all;                    /* dequantize every quantized head module (a policy will requantize) */
};

struct fg_plan {
	size_t n, cap;
	struct fg_plan_entry *t;
	size_t n_mods, cap_mods;
	struct fg_plan_module *mods;        /* the source head's quantized modules */
	enum fg_convention source_conv;     /* the head set's decided convention */
	enum fg_convention target_conv;     /* absolute, delta, or plain */
	const char *target;
	size_t n_shifted;
	char expert_layout[32];             /* "numbered", "fused_linear", ... or "" */
	struct fg_plan_qcache *qcache;      /* the last quantized base's scales and biases and band
					     * buffers (owned); updated by materialization although it
					     * takes a const plan, so one thread at a time
					     * materializes a plan */
	/* private: name lookups of the build (a scan per expert was quadratic in the head) */
	const struct fg_tset *by_name_set;  /* the set by_name sorts */
	size_t *by_name;                    /* its tensors' indices by name, then position */
	struct fg_nameidx mods_by_out;      /* mods by out name: their index */
};

/* 1 when a runtime id is an MLX-style target (its row's .mlx: absolute norms, stacked experts). */
int fg_target_is_mlx(const char *runtime);

/*
 * What a sidecar is made as (the artifact layout decides it, layout.h):
 * the norm convention of its zero-centred norms (absolute or delta; a
 * plain family's norms are never shifted whatever this says), and whether
 * expert blocks are restacked into MLX switch_mlp tensors or kept in the
 * source's own layout.  target names the runtimes it is for, for the
 * record (plan->target); rows, when given, are those runtimes' rows, every
 * one of which must read an MLX format for a head module to keep it.
 */
struct fg_plan_spec {
	enum fg_convention conv;
	int restack;
	const char *target;
	const struct fg_runtime *const *rows; /* the rows whose formats decide what stays quantized; NULL: target's */
	size_t n_rows;
};

/* The spec fg_plan_build uses for one runtime id: its row's .mlx says absolute and restacked. */
void fg_plan_spec_for(const char *target, struct fg_plan_spec *out);

/*
 * Plan the sidecar of the inspected source's head for target.  Refuses with
 * FG_EVERDICT and the verdict code in err->verdict (fg_err_verdict; the
 * message is the detail) a head whose convention cannot be decided or is
 * already broken (head_double_shifted, mixed_convention,
 * no_convention_evidence) and an ambiguous or incomplete expert layout
 * (expert_layout_ambiguous); with FG_EINPUT (and a message naming the reason)
 * a source without a head, fewer numbered experts than the config declares,
 * FP8 tensors without scales, and norms of unsupported dtypes.  The plan
 * borrows tensors from r, which must outlive it.
 */
int fg_plan_build(const struct fg_inspect *r, const char *target, struct fg_plan *plan,
		    struct fg_err *err);

/*
 * fg_plan_build with options (NULL: none).  The head's quantized modules are
 * read by their tensor families (inspect's qmods): an MLX format the target
 * reads (its row's formats) is kept as it is when opts->config has a
 * `quantization` block and nothing asks to dequantize; every other format is
 * dequantized exactly to BF16 (numbered quantized experts too, then
 * stacked).  A module forged cannot read is refused with FG_EVERDICT
 * unsupported_quantization_format and its format's name, never copied;
 * tensors the config contradicts are FG_EINPUT.  plan->mods records each
 * quantized module and what became of it.
 */
int fg_plan_build_opts(const struct fg_inspect *r, const char *target, const struct fg_plan_opts *opts,
		       struct fg_plan *plan, struct fg_err *err);

/* The plan's record of the quantized head module whose output module is out, or NULL. */
struct fg_plan_module *fg_plan_module_find(const struct fg_plan *plan, const char *out);

/*
 * fg_plan_build_opts made as spec says (fg_plan_build_opts is this with
 * fg_plan_spec_for's spec): an MLX-quantized module is kept only when every
 * row of spec->rows (NULL: spec->target's row) reads its format.
 */
int fg_plan_build_spec(const struct fg_inspect *r, const struct fg_plan_spec *spec, const struct fg_plan_opts *opts,
		       struct fg_plan *plan, struct fg_err *err);

void fg_plan_release(struct fg_plan *plan);

/*
 * The source tensors entry e reads, each handed to fn(ctx, t): its src and
 * FP8 scales, each stacked expert and its scales, then every tensor of a
 * dequantized module's format (scales, zero points, g_idx, ...).  A tensor
 * may come twice; NULL slots are skipped.  Stops at fn's first non-zero
 * return, which it returns; else 0.  fg_plan_entry_max_inputs: the most
 * calls it can make for e.
 */
int fg_plan_entry_inputs(const struct fg_plan_entry *e, int (*fn)(void *ctx, const struct fg_tensor *t), void *ctx);
size_t fg_plan_entry_max_inputs(const struct fg_plan_entry *e);

/* Append an entry named name (copied whole; zeroed otherwise); NULL (FG_ENOMEM in err) on failure. */
struct fg_plan_entry *fg_plan_add(struct fg_plan *plan, const char *name, struct fg_err *err);

/* Bytes of one plan entry's output. */
uint64_t fg_plan_entry_bytes(const struct fg_plan_entry *o);

/*
 * Fill buf (fg_plan_entry_bytes(o) bytes) with entry o's output.  plan gives
 * QUANT entries their base.  Reads only o's source tensors.
 */
int fg_plan_materialize(const struct fg_plan *plan, const struct fg_plan_entry *o, uint8_t *buf,
			struct fg_err *err);

/*
 * Fill buf with bytes [offset, offset + len) of entry o's output, reading
 * only the source bytes that range needs, so a writer streams an entry in
 * chunks of its choosing: copies, shifts, FP8 and transposes work on the
 * elements or rows the range covers; a QUANT entry quantizes its base in
 * row bands and keeps the base's scales and biases (not its packed words)
 * in the plan's cache for the parts that follow, so parts written in order
 * (weight, scales, biases) quantize every row once.  Any order is right,
 * only slower.  The bytes are those of fg_plan_materialize at that offset.
 * FG_EINTERNAL for a range outside the entry.
 */
int fg_plan_materialize_range(const struct fg_plan *plan, const struct fg_plan_entry *o, uint64_t offset,
			      size_t len, uint8_t *buf, struct fg_err *err);

/*
 * Where o's output bytes from offset are a source tensor's unchanged (a
 * copy, a stacked expert that is not FP8, half of a fused expert): that
 * tensor, with *at the offset in its bytes and *len cut to the contiguous
 * run there; NULL when the bytes must be computed
 * (fg_plan_materialize_range) or are not fetched.  Reads nothing and advises
 * nothing: a caller reading the run through the tensor's mapping asks for
 * read-ahead itself (a kernel copy from the file reads ahead on its own).
 */
const struct fg_tensor *fg_plan_direct(const struct fg_plan_entry *o, uint64_t offset, size_t *len,
				       uint64_t *at);

#endif
