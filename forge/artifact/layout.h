/*
 * layout.h: where and how an artifact carries its MTP head, decided for the
 * runtimes it is forged for (issue 10 section 4; docs/runtimes.md "Forging
 * for targets").
 *
 * A layout is one copy of the head: its place (a sidecar file of its own,
 * which config.json's mlx_lm_extra_tensors.mtp_file names, or a shard of
 * its own listed in the index, where runtimes reading embedded keys find
 * it), the convention of its zero-centred norms, whether its experts are
 * restacked into switch_mlp or kept as the source has them, and the
 * declarations the runtimes read about it: mtp_norm_encoding, vllm-mlx's
 * manifest.json beside the file, norm_convention "mlx" (mlx-lm PR 1751)
 * over an absolute trunk.  Key spelling is the family's (plan.h: Qwen heads
 * become mtp.*, GLM, DeepSeek and MiMo keep their names).
 *
 * Rows in, one layout or a conflict out: the candidates are the places,
 * conventions and expert layouts the targets' rows name (struct
 * fg_rt_forge, then every place any row reads), in the order the rows
 * prefer them, and each is judged by running every target's row
 * (fg_runtime_simulate) on the artifact the candidate would make, built
 * from the backbone's inspection and the head's plan without writing
 * anything.  The first candidate every target loads right wins (the one
 * most targets load ok, where some are not modelled).  A target whose row
 * refuses or breaks the backbone's trunk with no head at all is left to the
 * artifact's own inspection (its verdict names why); no layout changes it.
 */
#ifndef FG_LAYOUT_H
#define FG_LAYOUT_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "forge/artifact/plan.h"
#include "forge/core/error.h"
#include "forge/model/inspect.h"
#include "forge/model/runtimes.h"

#define FG_LAYOUT_MAX_TARGETS FG_INSPECT_MAX_RUNTIMES

/*
 * The shard an embedded head is written to: a model*.safetensors every
 * glob and pattern finds, listed in the index, and none of the sidecar
 * names a loader looks for (MTPLX and vllm-mlx read model-mtp.safetensors
 * and model-mtp-head.safetensors as sidecars).
 */
#define FG_LAYOUT_HEAD_SHARD "model-head.safetensors"

enum fg_layout_place {
	FG_PLACE_SIDECAR,     /* .file, outside the index; config.json points at it */
	FG_PLACE_EMBEDDED,    /* FG_LAYOUT_HEAD_SHARD, in the index beside the trunk's shards */
};

/* How a target loads the chosen layout. */
enum fg_layout_fit {
	FG_FIT_OK,            /* the trunk and, where the row runs MTP, the head load right */
	FG_FIT_UNMODELLED,    /* the row's sources do not cover this case (modelled: false) */
	FG_FIT_TRUNK,         /* the row refuses or breaks the backbone's trunk whatever the head:
			       * the artifact's inspection says why */
	FG_FIT_FAILS,         /* the head is refused, skipped or loaded wrong */
};

struct fg_layout {
	enum fg_layout_place place;
	char file[64];                 /* the head's file, relative to the artifact */
	int pointer;                   /* config.json's mtp_file names .file */
	struct fg_plan_spec spec;      /* the head's convention and expert layout */
	int experts;                   /* the head has routed experts (spec.restack matters) */
	const char *encoding;          /* config.json mtp_norm_encoding: "absolute", "delta", or NULL */
	int manifest;                  /* manifest.json beside .file says the norms are MLX gains */
	int norm_convention;           /* config.json norm_convention "mlx": the trunk is absolute */
	int index;                     /* the artifact has model.safetensors.index.json */
	size_t n_targets;
	const struct fg_runtime *targets[FG_LAYOUT_MAX_TARGETS];
	enum fg_layout_fit fit[FG_LAYOUT_MAX_TARGETS];
	/* a refusal: the targets it names (borrowed ids), 1 or 2 */
	size_t n_conflict;
	const char *conflict[2];
};

/*
 * Parse a target list ("mtplx-2.12,vllm-mlx": ids, aliases or versioned
 * ids, separated by commas, blanks around them ignored) into rows, each
 * once.  text NULL or empty: FG_FORGE_DEFAULT_TARGET's list.  FG_EUSAGE
 * naming the entry for an unknown id, an empty entry or more than
 * FG_LAYOUT_MAX_TARGETS rows; *n is the number of rows.
 */
int fg_layout_targets(const char *text, const struct fg_runtime *rows[FG_LAYOUT_MAX_TARGETS], size_t *n,
		      struct fg_err *err);

/*
 * 1 when the artifact carries backbone file i (bb->ckpt->files[i]) as a
 * shard of its own: a file the loaders read as the backbone's (globbed,
 * listed by the index, or not a sidecar) that holds a tensor other than
 * the head's.  The writer writes exactly these (it also reads a backbone
 * shard of head tensors only, to report them removed); the layout
 * simulates them.
 */
int fg_layout_carried(const struct fg_inspect *bb, size_t i);

/*
 * Decide the layout of src's primary head on bb's trunk for the n targets,
 * and plan the head for it with opts (fg_plan_build_spec; may be NULL; an
 * MLX-quantized module stays quantized only when every target reads its
 * format) (*plan, the caller's to release, also on failure).  Errors: those of fg_plan_build_spec (a head that cannot be
 * forged: FG_EVERDICT, FG_EINPUT); FG_EVERDICT with FG_V_LAYOUT_CONFLICT
 * when no candidate serves every target (out->conflict names the target no
 * layout serves, or two targets no one layout serves together, and err the
 * reason in the simulation's words); FG_ENOMEM.
 */
int fg_layout_decide(const struct fg_inspect *src, const struct fg_inspect *bb,
		     const struct fg_runtime *const *targets, size_t n, const struct fg_plan_opts *opts,
		     struct fg_layout *out, struct fg_plan *plan, struct fg_err *err);

/*
 * Judge one candidate as fg_layout_decide judges each: l's place, file,
 * pointer and spec (the declarations follow from them as decide sets them),
 * src's head on bb's trunk, every target's row simulated on the artifact it
 * would make.  fits[t] and reasons[t] (FG_LAYOUT_REASON_MAX bytes each, the
 * simulation's words) get each target's.  For tests, and for anyone asking
 * "what if the head went there".  Errors: the plan's, FG_ENOMEM.
 */
#define FG_LAYOUT_REASON_MAX 200
int fg_layout_judge(const struct fg_inspect *src, const struct fg_inspect *bb,
		    const struct fg_runtime *const *targets, size_t n, const struct fg_plan_opts *opts,
		    const struct fg_layout *l,
		    enum fg_layout_fit *fits, char (*reasons)[FG_LAYOUT_REASON_MAX], struct fg_err *err);

/*
 * config.json as the layout wants it (cfg, a copy of the backbone's): the
 * pointer, mtp_norm_encoding and norm_convention written, stale ones of the
 * backbone removed (mtplx_mtp_norm_encoding too).  0 or FG_ENOMEM.
 */
int fg_layout_patch_config(const struct fg_layout *l, cJSON *cfg, struct fg_err *err);

/*
 * The manifest.json to write beside the head's file (NULL when the layout
 * has none, or on ENOMEM: check l->manifest): the schema version and
 * rmsnorm_weight_format vllm-mlx reads, and the head's tensor names
 * (plan's outputs), as vllm-mlx's own converter writes them.
 */
cJSON *fg_layout_manifest(const struct fg_layout *l, const struct fg_plan *plan);

/* Its path relative to the artifact ("mtp/manifest.json"), into buf; NULL without a manifest. */
const char *fg_layout_manifest_path(const struct fg_layout *l, char *buf, size_t len);

/*
 * How a row loads a checkpoint, in a few words for refusals: "refuses it
 * (cause: message)", "loads it wrong (head_inverted)", "decodes plain (head
 * absent)", "loads it".
 */
void fg_layout_describe(const struct fg_runtime_result *r, char *buf, size_t len);

/* "ok", "unmodelled", "trunk", "fails". */
const char *fg_layout_fit_name(enum fg_layout_fit fit);

/*
 * The layout as forged.json and the forge document record it: place, file,
 * pointer, convention, experts ("switch_mlp", "as_source", or null for a
 * head without routed experts), encoding,
 * manifest, norm_convention, index, and targets [{runtime, fit}].  NULL on
 * ENOMEM.
 */
cJSON *fg_layout_json(const struct fg_layout *l);

#endif
