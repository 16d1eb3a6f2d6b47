/*
 * runtimes.h: the loader contracts of docs/domain.md section 4, as a table, and a
 * simulation of what each runtime loads from a checkpoint.
 *
 * Each runtime owns the +1 of zero-centred norms differently: mlx-lm 0.31
 * shifts the trunk when any key contains "mtp." or a conv1d is raw, 0.32 only
 * for a raw conv1d, MTPLX loads the trunk through mlx-lm and heals its sidecar
 * head by the two-signal rule, Ollama shifts trunk and head together, and
 * Hugging Face runtimes compute 1 + w at run time.  The simulation applies a
 * row to the checkpoint's files and tensor-set decisions and classifies the
 * trunk, the head and the outcome with docs/interfaces.md section 3's words.
 */
#ifndef FG_RUNTIMES_H
#define FG_RUNTIMES_H

#include <stddef.h>

#include "forge/source/checkpoint.h"
#include "forge/model/convention.h"
#include "forge/model/family.h"

enum fg_runtime_file_rule {
	FG_FILES_GLOB,    /* every model*.safetensors (mlx-lm) */
	FG_FILES_INDEX,   /* the index's weight_map, else model.safetensors (transformers, vLLM) */
	FG_FILES_OLLAMA,  /* the first pattern of Ollama's converter that matches */
};

enum fg_runtime_head_source {
	FG_HSRC_UNUSED,   /* the runtime does not run MTP: head keys are dropped */
	FG_HSRC_SHARDS,   /* the head is loaded from the shards with the trunk */
	FG_HSRC_SIDECAR,  /* the head comes from the sidecar only */
};

enum fg_runtime_head_shift {
	FG_HSHIFT_NONE,
	FG_HSHIFT_WITH_TRUNK,      /* shifted exactly when the trunk is */
	FG_HSHIFT_HEAL,            /* +1 when the head set's own rule says delta */
	FG_HSHIFT_HEAL_DENSE_ONLY, /* as HEAL, but MoE heads pass byte for byte (MTPLX < 2.12) */
};

/* The checkpoint layouts a runtime may be a default target for (bits of default_for). */
enum fg_runtime_layout {
	FG_LAYOUT_MLX = 1 << 0,    /* converted by mlx-lm: conv1d [C,K,1], format mlx, or quantized */
	FG_LAYOUT_HF = 1 << 1,     /* as Hugging Face releases it */
};

/*
 * One row per runtime.  Everything forged knows about a runtime is here, so
 * adding one is adding a row: the CLI usage lists the ids from this table and
 * tests/unit/test_openapi.c checks docs/openapi.json's RuntimeId against it.
 */
struct fg_runtime {
	const char *id;
	enum fg_runtime_file_rule files;
	int shift_on_mtp_key;      /* any loaded key containing "mtp." triggers the trunk shift */
	int shift_on_raw_conv1d;   /* a [C,1,K] conv1d triggers it */
	enum fg_runtime_head_source head_source;
	enum fg_runtime_head_shift head_shift;
	int adds_one_at_run_time;  /* effective gain 1 + stored (Hugging Face) */
	double refuse_probe_above; /* refuses to serve above this probe mean (0: never) */
	int mlx;                   /* an MLX-style forge target: absolute norms, stacked experts */
	unsigned default_for;      /* FG_LAYOUT_* bits: targeted when inspect is given no runtime */
	const char *contract;      /* one line for humans */
};

/* Every runtime row, in report order. */
const struct fg_runtime *fg_runtime_all(size_t *n);

/* The row called id, or NULL. */
const struct fg_runtime *fg_runtime_find(const char *id);

/*
 * The FG_LAYOUT_* bit of an inspect layout name ("mlx", "hf"); 0 for any
 * other (such as "unknown", for which inspect targets every runtime).
 */
unsigned fg_runtime_layout_bit(const char *layout);

/* What the simulation needs to know of each checkpoint file. */
struct fg_file_facts {
	size_t mtp_keys;        /* tensor names containing "mtp." */
	size_t head_tensors;    /* tensors of the MTP head (any scheme) */
	int raw_conv1d;         /* holds a conv1d in Hugging Face layout [C,1,K] */
};

/* The checkpoint as the simulation sees it (everything borrowed). */
struct fg_runtime_input {
	const struct fg_ckpt *ckpt;
	const struct fg_file_facts *facts;   /* one per ckpt->files */
	enum fg_family_style style;
	int moe;
	const struct fg_decision *trunk;
	const struct fg_decision *embedded_head;  /* head tensors in the shards, or NULL */
	const struct fg_decision *sidecar_head;   /* the sidecar MTPLX loads, or NULL */
};

/*
 * What the simulation says of a runtime, in docs/interfaces.md section 3's words.
 * Each enum has one name table (fg_runtime_*_name); the names are the
 * strings of the inspect report.
 */
enum fg_runtime_trunk {
	FG_TRUNK_OK,
	FG_TRUNK_DOUBLE_SHIFTED,   /* effective probe above 2.4: +1 applied to an absolute trunk */
	FG_TRUNK_MISSING_SHIFT,    /* effective probe below 1.25: a delta trunk without its +1 */
};

enum fg_runtime_head {
	FG_HEAD_OK,
	FG_HEAD_INVERTED,          /* loads delta (or mixed) where absolute is expected */
	FG_HEAD_DOUBLE_SHIFTED,
	FG_HEAD_DROPPED,           /* a head exists but this runtime drops its keys */
	FG_HEAD_ABSENT,            /* no head where this runtime looks */
};

enum fg_runtime_outcome {
	FG_OUTCOME_OK,
	FG_OUTCOME_DEGRADED,       /* serves, but the head is wrong or missing */
	FG_OUTCOME_BROKEN,         /* the trunk loads wrong */
	FG_OUTCOME_REFUSED,        /* the runtime refuses to serve it */
};

/* Why the runtime shifts the trunk at load. */
enum fg_shift_reason {
	FG_SHIFT_NONE,
	FG_SHIFT_MTP_KEYS,         /* a loaded key contains "mtp." */
	FG_SHIFT_RAW_CONV1D,       /* a conv1d is in Hugging Face layout */
};

/* "ok", "double_shifted", "missing_shift"; "unknown" outside the enum. */
const char *fg_runtime_trunk_name(enum fg_runtime_trunk t);

/* "ok", "inverted", "double_shifted", "dropped", "absent"; "unknown" outside the enum. */
const char *fg_runtime_head_name(enum fg_runtime_head h);

/* "ok", "degraded", "broken", "refused"; "unknown" outside the enum. */
const char *fg_runtime_outcome_name(enum fg_runtime_outcome o);

/* "mtp_keys", "raw_conv1d"; NULL for FG_SHIFT_NONE and outside the enum. */
const char *fg_runtime_shift_reason_name(enum fg_shift_reason r);

#define FG_RUNTIME_MAX_FILES 64

struct fg_runtime_result {
	const struct fg_runtime *rt;
	int targeted;
	size_t n_files;                 /* files the runtime reads (up to FG_RUNTIME_MAX_FILES listed) */
	const char *files[FG_RUNTIME_MAX_FILES];
	int trunk_shift;
	enum fg_shift_reason shift_reason; /* FG_SHIFT_NONE unless trunk_shift */
	int has_probe;
	double trunk_probe_after;
	int head_shift;
	size_t head_keys_dropped;       /* head keys read and then dropped */
	enum fg_convention head_after;  /* effective head convention (MLX terms) */
	enum fg_runtime_trunk trunk;
	enum fg_runtime_head head;
	enum fg_runtime_outcome outcome;
};

/* Simulate rt on the checkpoint. */
void fg_runtime_simulate(const struct fg_runtime *rt, const struct fg_runtime_input *in,
			 struct fg_runtime_result *out);

#endif
