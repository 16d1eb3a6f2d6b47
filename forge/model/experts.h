/*
 * experts.h: the routed-expert layouts of MoE heads (docs/domain.md section 1).
 *
 * Heads store experts numbered (`experts.{e}.{gate,up,down}_proj.weight`, or a
 * quantized format's `.qweight` / `.weight_packed` with its companions),
 * fused "linear" (`experts.gate_up_proj` [E, 2I, H], `experts.down_proj`
 * [E, H, I]) or fused "bmm" (the same transposed: [E, H, 2I], [E, I, H]).
 * The layout is decided from shapes against the config's hidden size H (and
 * moe_intermediate_size I and the expert count E when the config gives them).
 * Each fused tensor must fit exactly one layout on its own and both must
 * agree; a tensor that fits both (2I == H) or neither is refused rather than
 * guessed: dropping or transposing experts silently leaves a head useless.
 */
#ifndef FG_EXPERTS_H
#define FG_EXPERTS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "forge/model/tset.h"

enum fg_expert_layout {
	FG_EXPERTS_NUMBERED,
	FG_EXPERTS_FUSED_LINEAR,
	FG_EXPERTS_FUSED_BMM,
	FG_EXPERTS_AMBIGUOUS,   /* a fused tensor fits both layouts */
	FG_EXPERTS_INVALID,     /* fits neither, the two disagree, or experts are missing */
};

#define FG_EXPERTS_MAX_BLOCKS 16
#define FG_EXPERTS_MAX_INDEX (1u << 20) /* a numbered expert's number is below this (input error beyond) */

struct fg_expert_block {
	char *prefix;                     /* name up to and including "experts." (owned, whole) */
	enum fg_expert_layout layout;
	uint64_t n_experts;               /* E as found */
	const struct fg_tensor *gate_up;  /* fused layouts */
	const struct fg_tensor *down;
	size_t n_numbered;                /* numbered layout: tensors found */
	uint64_t max_index;               /* numbered layout: highest expert number seen */
	char why[160];                    /* for AMBIGUOUS / INVALID */
};

#define FG_EXPERTS_UNKNOWN (-1)  /* a dimension the config does not give */

struct fg_expert_dims {
	int64_t hidden;        /* H, FG_EXPERTS_UNKNOWN when unknown */
	int64_t intermediate;  /* I (moe_intermediate_size), FG_EXPERTS_UNKNOWN when unknown */
	int64_t experts;       /* E (num_experts / n_routed_experts), FG_EXPERTS_UNKNOWN when unknown */
};

/* Read H, I and E from a (merged) config.json. */
void fg_experts_dims(const cJSON *config, struct fg_expert_dims *out);

/*
 * Find the expert blocks among a set's tensors and decide each block's
 * layout.  Returns 0 with the number of blocks written to blocks (at most
 * max) in *n, FG_EINPUT for an expert number of FG_EXPERTS_MAX_INDEX or more
 * (no model has a million experts; the count check must not wrap), or
 * FG_ENOMEM (err set, blocks released either way).  Each block owns its
 * prefix: release the n blocks with fg_experts_release.
 */
int fg_experts_scan(const struct fg_tset *set, const struct fg_expert_dims *dims,
		    struct fg_expert_block *blocks, size_t max, size_t *n, struct fg_err *err);

/* Free what the n blocks own (their prefixes) and zero them. */
void fg_experts_release(struct fg_expert_block *blocks, size_t n);

const char *fg_expert_layout_name(enum fg_expert_layout l);

#endif
