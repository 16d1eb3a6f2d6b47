/*
 * mtplx.h: what forged speaks of MTPLX's artifact contract: the head
 * fingerprint in MTPLX's exact framing, and mtplx_runtime.json (read when an
 * artifact has one, written for MTPLX targets, restamped when a verification
 * is posted).
 *
 * Sources (youssofal/MTPLX; commits name the indexed file version):
 * - the fingerprint: mtplx/commands/forge.py@3d2f74dab79a7e84ff0b30757aa9601bd30390d6
 *   `_verification_artifact_fingerprint`: "sha256:" + SHA-256 over
 *   "config.json" NUL <config.json bytes> NUL "mtp" NUL <mtp file bytes> NUL,
 *   the mtp file being `artifacts.expected_mtp_file` (config.json's
 *   mlx_lm_extra_tensors.mtp_file, else the first of mtp.safetensors,
 *   mtp/weights.safetensors, model-mtp.safetensors that exists);
 * - the runtime contract: mtplx/backends/registry.py@a845fd10a5a9196fac0ac602f39bbfe9e6856358
 *   (`RuntimeContract.from_dict`: required mtplx_version, arch_id,
 *   mtp_depth_max > 0, recommended_profile, exactness_baseline and
 *   verified_on as objects; `_runtime_contract_blocker`: a status in
 *   BLOCKING_RUNTIME_STATUSES or a blocking speed verdict makes the pack
 *   "unverified", still runnable), the profiles of mtplx/profiles.py@1b4643b2
 *   (PROFILE_CHOICES), the stamp of forge.py `_stamp_runtime_metadata`.
 *
 * The older forged fingerprint (forged.forge.v1 `fingerprint` before issue
 * 13) is SHA-256 over config.json then mtp.safetensors with no framing: it
 * is computed in the same pass and kept as the legacy value.
 */
#ifndef FG_MTPLX_H
#define FG_MTPLX_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "forge/core/error.h"
#include "forge/core/sha256.h"

#define FG_MTPLX_RUNTIME_FILE "mtplx_runtime.json"
/* "sha256:" and 64 hex digits and a NUL: the head fingerprint and the artifact digest. */
#define FG_DIGEST_MAX 72
/* The largest mtplx_runtime.json read (MTPLX's own are a few KB with their verify rows). */
#define FG_MTPLX_RUNTIME_MAX (4u << 20)
#define FG_MTPLX_RUNTIME_NODES (1u << 18) /* JSON values in it at most */

/*
 * The mtp file MTPLX's fingerprint covers in folder dir, given config.json
 * (config_raw, may be NULL): written to path (cap bytes) relative to dir.
 * True when that file exists and is a regular file.
 */
int fg_mtplx_mtp_file(const char *dir, const cJSON *config_raw, char *path, size_t cap);

struct fg_head_fingerprints {
	char mtplx[FG_DIGEST_MAX];     /* MTPLX's framing: the head fingerprint */
	char legacy[FG_SHA256_HEX];    /* forged's framing before issue 13 (config.json, mtp.safetensors) */
	char sidecar[FG_SHA256_HEX];   /* the mtp file's own SHA-256 */
	char mtp_file[256];            /* which file, relative to dir */
};

/*
 * MTPLX's head-fingerprint framing, fed around the two files' bytes:
 * open ("config.json" NUL), config.json's bytes, between (NUL "mtp" NUL),
 * the mtp file's bytes, close (NUL).  fg_mtplx_head_fingerprint and the
 * forge's writer both frame through these.
 */
void fg_mtplx_frame_open(struct fg_sha256 *h);
void fg_mtplx_frame_between(struct fg_sha256 *h);
void fg_mtplx_frame_close(struct fg_sha256 *h);

/*
 * The head fingerprints of folder dir in one pass over config.json and the
 * mtp file (a multi-GB head is read once).  0, or FG_EINPUT (no config.json,
 * no mtp file, a read error: the artifact cannot be fingerprinted, as MTPLX
 * returns None) / FG_ENOMEM with err set; *out untouched on failure.
 */
int fg_mtplx_head_fingerprint(const char *dir, struct fg_head_fingerprints *out, struct fg_err *err);

/*
 * The artifact digest of a forged.json `files` object ({name: sha256hex}):
 * "sha256:" + SHA-256 over, for each file in byte order of its name,
 * name NUL sha256hex LF.  0, or FG_EINPUT (not an object, a value that is
 * not 64 lower-case hex digits, a name with a NUL) with err set.
 */
int fg_artifact_digest(const cJSON *files, char out[FG_DIGEST_MAX], struct fg_err *err);

/* MTPLX's arch_id for a forged family id (registry.py ARCHITECTURE_CATALOG); "generic-mtp" when none. */
const char *fg_mtplx_arch_id(const char *family);

/*
 * What an inspect report says of an mtplx_runtime.json (doc, borrowed):
 * {file, loads, error, mtplx_version, arch_id, mtp_depth_max,
 * recommended_profile, min_engine_version, verified, blocker, verified_on,
 * speed_verdict, artifact_fingerprint, written_by}.  loads/error: whether
 * MTPLX's RuntimeContract.from_dict accepts it; verified/blocker: MTPLX's
 * `_runtime_contract_blocker` (a blocker makes the pack run as unverified).
 * NULL on ENOMEM.
 */
cJSON *fg_mtplx_runtime_summary(const cJSON *doc);

/* What forged knows when it writes an MTPLX pack's runtime file. */
struct fg_mtplx_pack {
	const char *target;            /* the runtime row id: mtplx-2.11, mtplx-2.12 */
	const char *target_version;    /* the row's first version ("2.12.0") */
	const char *family;            /* forged's family id */
	const char *model_type;        /* config.json's top-level model_type, or NULL */
	long head_layers;              /* declared MTP layers (at least 1 is written) */
	const char *source;            /* provenance source.path */
	const char *source_commit;     /* an hf:// source's resolved commit, else NULL */
	const char *source_layout;     /* "hf", "mlx", "unknown" */
	const char *backbone;
	const char *policy;
	const char *forged_version;
	const char *forged_at;         /* RFC 3339 UTC */
	const char *head_fingerprint;  /* MTPLX framing */
	const char *digest;            /* the artifact digest */
	const char *mtp_file;          /* the sidecar MTPLX reads (the forge's layout); NULL: mtp.safetensors */
};

/*
 * The mtplx_runtime.json forged writes into an MTPLX pack before any
 * verification: every field RuntimeContract.from_dict requires, verified_on
 * and speed_evidence marked {"status": "unverified", ...} (a blocking status
 * for MTPLX: the pack loads as architecture-compatible-but-unverified),
 * speed_evidence.artifact_fingerprint the head fingerprint.  NULL on ENOMEM.
 */
cJSON *fg_mtplx_runtime_new(const struct fg_mtplx_pack *p);

/*
 * Restamp doc (owned by the caller, changed in place) with a verification:
 * result is a forged.verdict.v1 document (its speed_evidence, verdict and
 * failure_reasons, MTPLX's structure), verified_at its RFC 3339 time.  As
 * MTPLX's `_stamp_runtime_metadata` does: mtp_depth_max = max(the deepest
 * verified depth > 0, the value before); recommended_profile "stable" when
 * no depth wins, else MTPLX's default "sustained"; verified_on {timestamp,
 * hardware, machine_arch, macos, model}; speed_evidence replaced (its
 * artifact_fingerprint kept); a launch-blocking exactness_baseline reset to
 * {}.  0, FG_EINPUT (doc or result not objects) or FG_ENOMEM.
 */
int fg_mtplx_runtime_stamp(cJSON *doc, const cJSON *result, const char *verified_at, struct fg_err *err);

#endif
