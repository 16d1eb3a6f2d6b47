/*
 * inspect.h: the inspect report of docs/interfaces.md section 3.
 *
 * fg_inspect_run() opens a checkpoint, recognises its family, splits its
 * tensors into sets (the trunk, the head embedded in the shards, each
 * sidecar head), decides each set's convention once, records the structural
 * evidence, simulates every runtime, and derives the verdicts.  It reads the
 * safetensors headers and the norm tensors' bytes, nothing else (plus one
 * page per head tensor until a non-zero byte shows the head is not empty).
 */
#ifndef FG_INSPECT_H
#define FG_INSPECT_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "forge/source/checkpoint.h"
#include "forge/model/convention.h"
#include "forge/model/experts.h"
#include "forge/model/family.h"
#include "forge/model/qmods.h"
#include "forge/model/tset.h"
#include "forge/model/runtimes.h"
#include "forge/model/verdicts.h"
#include "forge/model/mtplx.h"

#define FG_INSPECT_MAX_SETS 8
#define FG_INSPECT_MAX_RUNTIMES 32
#define FG_INSPECT_NO_SET (-1)   /* a set index that names no set */
#define FG_INSPECT_MAX_FORMATS 16 /* distinct trunk weight formats kept */
#define FG_INSPECT_READ_MAX (256ull << 20) /* norm bytes one inspection reads or fetches, by default */

enum fg_set_role { FG_ROLE_TRUNK, FG_ROLE_EMBEDDED_HEAD, FG_ROLE_SIDECAR_HEAD };

struct fg_structure {
	const char *conv1d;          /* "hf", "mlx" or NULL (no conv1d) */
	int format_mlx;              /* a shard carries {"format": "mlx"} */
	int quantized;               /* some trunk module is MLX-quantized (a U32 .weight) */
	const char *declared;        /* mtp_norm_encoding / mtplx_mtp_norm_encoding, or NULL */
	const char *declared_key;
};

/*
 * One tensor set with what inspect decided about it: the set's convention
 * (decided once for the whole set; its norm pointers borrow from set) and,
 * for head sets, the layout of each expert block (decided from shapes).
 * Forge reads these decisions instead of deciding again.
 */
struct fg_set_report {
	struct fg_tset set;
	struct fg_decision decision;
	enum fg_set_role role;
	size_t n_experts;                     /* head sets only; 0 for the trunk */
	struct fg_expert_block experts[FG_EXPERTS_MAX_BLOCKS];
	struct fg_qmods qmods;                /* its quantized modules by tensor family (checked for head sets) */
};

/*
 * A finished inspection is read-only for its users, with one exception: over
 * a remote checkpoint, fg_ckpt_fetch (forge fetching the head) fills the
 * tensor views' data, so share an inspection between threads only when
 * nobody fetches (checkpoint.h).
 */
struct fg_inspect {
	struct fg_ckpt *ckpt;                 /* owned */
	const struct fg_family *family;
	int moe;
	long n_layers;                        /* num_hidden_layers, or -1 */
	const char *layout;                   /* "hf", "mlx", "unknown" */
	struct fg_structure structure;
	int declared_mtp;                     /* -1 when nothing declares it */
	const char *location;                 /* "embedded", "sidecar", "none" */
	enum fg_name_scheme scheme;
	int primary_head;                     /* set index of "mtp", or FG_INSPECT_NO_SET */
	int embedded_head;                    /* set index of the head in the shards, or FG_INSPECT_NO_SET */
	struct fg_qconfig qconfig;            /* the quantization config (borrows ckpt->config_raw, qconfig_docs) */
	int qconfig_ok;                       /* fg_qconfig_parse succeeded */
	char qconfig_error[FG_ERR_MSG_MAX];   /* why not */
	cJSON *qconfig_docs[2];               /* hf_quant_config.json, quantize_config.json (owned, may be NULL) */
	struct fg_format_need trunk_formats[FG_INSPECT_MAX_FORMATS]; /* what reading the trunk takes */
	size_t n_trunk_formats;
	struct fg_file_facts *facts;          /* one per ckpt file */
	unsigned trunk_experts;               /* FG_XL_* layouts of the trunk's experts (runtimes.h) */
	int trunk_keys_prefixed;              /* 1: every shifted trunk norm starts "language_model.", 0: none, -1: some */
	int pointer_file;                     /* the file config.json's mlx_lm_extra_tensors.mtp_file names, or -1 */
	struct fg_head_input heads_in[FG_INSPECT_MAX_SETS]; /* per set (head sets only): what the simulation reads */
	cJSON *manifests[FG_INSPECT_MAX_SETS];  /* a manifest.json beside a sidecar set's file (owned), or NULL */
	size_t n_dups;                        /* names held by two files (differing copies first) */
	struct fg_dup_input *dups;            /* owned; names borrowed from the headers */
	size_t n_sets;                        /* at least 1 */
	struct fg_set_report sets[FG_INSPECT_MAX_SETS]; /* sets[0] is the trunk: fg_inspect_trunk() */
	size_t n_runtimes;
	struct fg_runtime_result runtimes[FG_INSPECT_MAX_RUNTIMES];
	struct fg_verdicts verdicts;
	int ok;
	uint64_t read_cap;                    /* the norm bytes this inspection may read */
	/* A local checkpoint's mtplx_runtime.json (owned), or NULL; when it exists but cannot be read, why. */
	cJSON *mtplx_runtime;
	char mtplx_runtime_error[FG_ERR_MSG_MAX];
};

/* How to inspect (zeroed is the default). */
struct fg_inspect_opts {
	const struct fg_pull_opts *pull;      /* remote sources (NULL: defaults) */
	struct fg_fs_links links;             /* symbolic links beneath the folder (refused by default) */
	uint64_t read_cap;                    /* norm bytes read at most; 0: FG_INSPECT_READ_MAX */
};

/*
 * Inspect source.  runtimes (n_runtimes ids, may be 0) are the targeted
 * runtimes; with none, the rows whose default_for names the layout are
 * targeted (runtimes.c; an unknown layout targets every runtime).  On
 * success *out is the caller's to free with fg_inspect_free().  Errors: an
 * unknown runtime id (FG_EUSAGE), an unreadable or malformed checkpoint
 * (FG_EINPUT), a URL host not allowed (FG_EFORBIDDEN), a failing cache
 * (FG_ESTATE, FG_ENOSPC), FG_ENOMEM.
 */
int fg_inspect_run(struct fg_inspect **out, const char *source, const char *const *runtimes,
		   size_t n_runtimes, struct fg_err *err);

/* The same for any source, remote ones with these pull options (NULL: defaults). */
int fg_inspect_run_opts(struct fg_inspect **out, const char *source, const char *const *runtimes,
			size_t n_runtimes, const struct fg_pull_opts *pull, struct fg_err *err);

/* The same with every option (o may be NULL). */
int fg_inspect_run_with(struct fg_inspect **out, const char *source, const char *const *runtimes,
			size_t n_runtimes, const struct fg_inspect_opts *o, struct fg_err *err);

void fg_inspect_free(struct fg_inspect *r);

/* The forged.inspect.v1 document; caller frees with cJSON_Delete. NULL on ENOMEM. */
cJSON *fg_inspect_json(const struct fg_inspect *r);

/*
 * An inspection's digest, its identity in the store: "sha256:" + SHA-256
 * of report (a forged.inspect.v1 document) printed without white space,
 * without the remote read's counters (remote.bytes_fetched,
 * bytes_from_cache, requests: how the bytes came, not what they are).  The
 * same source revision inspected for the same runtimes gives the same
 * report, so the same digest.  0, FG_EINPUT (not an object) or FG_ENOMEM.
 */
int fg_inspect_report_digest(const cJSON *report, char out[FG_DIGEST_MAX], struct fg_err *err);

/* 1 when name, held by file f of r's checkpoint, belongs to the MTP head. */
int fg_inspect_is_head(const struct fg_inspect *r, const struct fg_ckpt_file *f, const char *name);

/* The trunk's set, which is always sets[0] (asserted). */
const struct fg_set_report *fg_inspect_trunk(const struct fg_inspect *r);

/* The primary head's set (primary_head: the head a forge extracts), or NULL when no set holds one. */
const struct fg_set_report *fg_inspect_head(const struct fg_inspect *r);

/*
 * What the store and the API keep of an inspection, derived in this one
 * place.  Everything is borrowed from r (or static) and lives as long as r.
 */
struct fg_inspect_summary {
	const char *family;            /* the family id */
	int ok;                        /* no error verdict (r->ok) */
	double probe_mean;             /* the trunk probe's q-norm mean; NAN without a probe */
	const char *head_convention;   /* the primary head set's convention word; NULL when no set
				        * holds head tensors (an empty "mtp" set has no convention) */
	size_t n_verdicts;
	const struct fg_verdict *verdicts; /* r's verdicts, in report order */
};

void fg_inspect_summarize(const struct fg_inspect *r, struct fg_inspect_summary *out);

/*
 * The simulation input of runtimes.h as inspect built it (everything
 * borrowed from r; sidecars, the caller's, receives the sidecar heads), so
 * a caller can simulate a row itself, or a variant of the input.
 */
void fg_inspect_runtime_input(const struct fg_inspect *r, struct fg_runtime_input *in,
			      struct fg_head_input sidecars[FG_INSPECT_MAX_SETS]);

/*
 * The FG_XL_* layout one expert tensor shows (runtimes.h), 0 for any other
 * tensor, as inspect records it for the simulation: numbered experts.{e}.*,
 * fused experts.gate_up_proj oriented by the hidden size of d ([E,2I,H]
 * linear, [E,H,2I] bmm), MLX-stacked switch_mlp.*.  The forge's layout
 * judges planned heads with it.
 */
unsigned fg_inspect_expert_layout(const struct fg_tensor *t, const struct fg_expert_dims *d);

/* The set called name, or NULL. */
const struct fg_tset *fg_inspect_set(const struct fg_inspect *r, const char *name,
				     const struct fg_decision **decision);

#endif
