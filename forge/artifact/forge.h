/*
 * forge.h: the forge pipeline: a source checkpoint's MTP head and a backbone
 * in, one servable artifact out (docs/interfaces.md section 3).
 *
 * The artifact is the backbone without head tensors in its shards (unchanged
 * shards hard-linked, only shards that held head tensors rewritten, the index
 * regenerated), the head where and how its targets load it (layout.h: a
 * sidecar such as `mtp.safetensors`, or a shard of its own in the index, in
 * the targets' convention, names, expert layout and precision), a patched
 * config.json and forged.json provenance with the SHA-256 of every file, the
 * decisions, the layout, and the originals of every tensor whose bytes
 * changed (references to a local source, zstd copies of a remote one).  It
 * is built in a hidden sibling folder, inspected for every target, fsynced
 * and renamed into place only when clean: a crash leaves nothing at the
 * destination, and a rerun succeeds.
 */
#ifndef FG_FORGE_H
#define FG_FORGE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "forge/core/error.h"
#include "forge/core/sha256.h"
#include "forge/model/inspect.h"
#include "forge/model/mtplx.h"

/*
 * The target list when none is named: the one place the default is written
 * (CLI, API, docs test).  A list is runtime ids separated by commas
 * ("mtplx-2.12,vllm-mlx"); `forged serve`'s forge_target setting replaces
 * it for jobs.
 */
#define FG_FORGE_DEFAULT_TARGET "mtplx-2.12"

/* The longest target list text kept (17 ids and their commas fit). */
#define FG_FORGE_TARGET_MAX 512
#define FG_FORGE_MAX_TARGETS FG_INSPECT_MAX_RUNTIMES /* = FG_LAYOUT_MAX_TARGETS: forge.c copies one into the other */

/* What forged.json keeps of the source tensors whose values change (README, "Forging a sidecar"). */
enum fg_forge_originals {
	FG_ORIGINALS_AUTO,      /* references (file, its SHA-256, offset, length) to a local source; a
				 * remote source's are copied */
	FG_ORIGINALS_COPY,      /* zstd copies under provenance/originals/ whatever the source */
};

/*
 * Where a forge is: the stage, the fraction of the whole run (0..1, never
 * decreasing), and within the stage the bytes moved (read, hashed,
 * quantized or written) of the stage's total, their rate and the seconds
 * left at that rate.  A stage that moves no counted bytes has 0 of 0, rate
 * 0 and eta_s -1.
 */
struct fg_forge_progress {
	const char *stage;      /* inspect, fetch, backbone, sidecar, provenance, check, done */
	double fraction;
	uint64_t bytes_done, bytes_total;
	double rate;            /* bytes a second since the stage began */
	double eta_s;           /* -1: unknown */
};

struct fg_forge_opts {
	const char *source;
	const char *backbone;   /* NULL: the source */
	const char *out;
	const char *target;     /* a runtime id or a comma-separated list; NULL: FG_FORGE_DEFAULT_TARGET */
	const char *quant;      /* NULL: keep */
	int force;              /* replace an existing artifact */
	int allow_requantize;   /* quant may quantize a head the source already quantized (dequantized first) */
	/*
	 * 1: every component of out's parent folder is opened without following
	 * a symbolic link (the caller resolved and confined it: a folder swapped
	 * for a link since then is refused, FG_EFORBIDDEN).  0: out's parent is
	 * opened as it is spelled.  Either way the artifact is created and
	 * renamed into place relative to that one opened folder.
	 */
	int out_nofollow;
	enum fg_forge_originals originals;
	const char *version;    /* forged's version, for provenance */
	const struct fg_pull_opts *pull; /* remote sources (NULL: defaults); the backbone is local.
					  * Its cache_dir also keeps the file hashes (filehash.h). */
	const cJSON *job;       /* the daemon's job, recorded in forged.json as "job" (NULL: none) */
	/*
	 * Progress, may be NULL: called when a stage begins, then as its bytes
	 * move, at most every FG_FORGE_PROGRESS_S seconds and at the stage's
	 * end.  A non-zero return stops the forge at its next chunk or stage
	 * (FG_ECANCELLED, nothing left behind).
	 */
	int (*progress)(void *ctx, const struct fg_forge_progress *p);
	void *progress_ctx;
};

#define FG_FORGE_PROGRESS_S 0.05

struct fg_forge_result {
	char artifact[PATH_MAX];
	char fingerprint[FG_SHA256_HEX];        /* the legacy framing (config.json then mtp.safetensors) */
	char head_fingerprint[FG_DIGEST_MAX];   /* MTPLX's framing (forge/model/mtplx.h) */
	char digest[FG_DIGEST_MAX];             /* over every file forged.json lists */
	char policy[48];
	char target[FG_FORGE_TARGET_MAX]; /* the list as given, blanks removed */
	size_t n_targets;
	const char *targets[FG_FORGE_MAX_TARGETS]; /* the rows' ids, each once (static strings) */
	char head_file[64];       /* where the layout put the head (a sidecar or the head's shard) */
	cJSON *layout;            /* the layout decided (fg_layout_json; owned), or NULL before one */
	size_t head_tensors;
	size_t n_removed, cap_removed;
	char **removed;           /* head tensors removed from the backbone's shards */
	size_t n_shifted, cap_shifted;
	char **shifted;           /* norms whose convention forge changed */
	struct fg_inspect *check; /* the artifact's own inspection (owned) */
	cJSON *provenance;        /* forged.json exactly as written (owned; NULL until written), so a
				   * caller storing the artifact never reads the file back */
	cJSON *mtplx_runtime;     /* mtplx_runtime.json as written for an MTPLX target (owned), else NULL */
	int ok;
	struct fg_err refusal;    /* FG_EVERDICT with its verdict when refused, else code 0 */
	size_t n_refusal_runtimes;
	const char *refusal_runtimes[2]; /* a layout_conflict's targets (static strings) */
};

/*
 * Run the pipeline.  Returns 0 with res filled (res->ok says whether the
 * artifact inspects clean; when not, nothing is left at out and the return is
 * FG_EVERDICT), or an error: FG_EUSAGE (bad options, out exists without
 * force, or that appeared while forging: the artifact is never put over
 * another without force), FG_EINPUT (unreadable or unsuitable input, an out
 * that cannot be written: nothing is left), FG_EFORBIDDEN (out_nofollow and
 * a link in out's parent path), FG_ESTATE/FG_ENOSPC (the pull cache failed),
 * FG_EVERDICT (the head cannot be forged: a refusing verdict, named in err),
 * FG_ECANCELLED (the progress callback asked to stop).
 * Release res with fg_forge_result_release() in every case.
 */
int fg_forge_run(const struct fg_forge_opts *o, struct fg_forge_result *res, struct fg_err *err);

void fg_forge_result_release(struct fg_forge_result *res);

/*
 * The fraction of a forge run that a remote read of done of total bytes
 * stands for, for a pull progress callback: reads happen while inspecting
 * and fetching, before the backbone stage begins, so the value stays below
 * that stage's start.
 */
double fg_forge_fetch_fraction(uint64_t done, uint64_t total);

/*
 * The forged.forge.v1 document: artifact, fingerprint, target, targets (row
 * ids), layout (or null), policy, head_tensors, removed_from_backbone,
 * shifted_tensors, verdicts (the new artifact's, or the refusal alone when
 * it was refused before one existed), refusal ({code, severity, detail,
 * runtimes} or null) and ok; since issue 13 also head_fingerprint, digest
 * and mtplx_runtime (the file's name, or null) (null when refused), and
 * source and out as asked (o, may be NULL: null).
 */
cJSON *fg_forge_result_json(const struct fg_forge_result *res, const struct fg_forge_opts *o);

#endif
