/*
 * provenance.h: an artifact's forged.json (schema forged.provenance.v1) and
 * its fingerprint.
 *
 * The document says where the artifact came from (source, family, head set,
 * backbone), what forge decided (target, policy, conventions, the norms it
 * shifted, the expert layout), what it removed from the backbone, the
 * originals of every tensor whose bytes changed, the relayouts, and the
 * SHA-256 of every file.  It is built from struct fg_provenance in one
 * place, so its keys and their order are written once.
 *
 * Two digests identify the artifact (forge/model/mtplx.h computes them):
 * the head fingerprint, in MTPLX's framing over config.json and the mtp
 * file, which an MTPLX host computes for itself (a layout with the head in
 * the shards has no mtp file, so none); and the artifact digest, over every
 * file the `files` object lists, which the store dedupes artifacts by (a
 * trunk change changes it).  `fingerprint` keeps forged's older framing
 * (SHA-256 over config.json then mtp.safetensors; empty without one).
 * `layout` is where and how the head went (forge/artifact/layout.h).
 */
#ifndef FG_PROVENANCE_H
#define FG_PROVENANCE_H

#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "forge/core/error.h"
#include "forge/core/sha256.h"
#include "forge/model/mtplx.h"
#include "forge/model/convention.h"

#define FG_PROVENANCE_SCHEMA "forged.provenance.v1"

/* What forged.json records.  Everything is borrowed; strings may not be NULL unless said. */
struct fg_provenance {
	const char *forged_version;         /* NULL: "unknown" */
	time_t created_at;                  /* written as RFC 3339 UTC */
	const char *source;                 /* the source's folder or URL */
	const char *family;                 /* the source's family id */
	const char *head_set;               /* the source's head set, as inspect names it */
	const char *revision;               /* an hf:// source's revision as named, else NULL */
	const char *resolved_commit;        /* the commit it resolved to, else NULL */
	const char *backbone;               /* the backbone's folder */
	const char *target;                 /* the target list (runtime ids, commas) */
	const char *policy;                 /* quantization policy text */
	enum fg_convention source_convention;
	enum fg_convention target_convention;
	char *const *shifted;               /* output names of the norms forge shifted */
	size_t n_shifted;
	const char *expert_layout;          /* "numbered", "fused_linear", ... or "" */
	const cJSON *quantization;          /* config.json's mtp_quantization (policy, allow_requantize,
					     * modules, requantized), or NULL */
	char *const *removed;               /* head tensors removed from the backbone's shards */
	size_t n_removed;
	const cJSON *originals;             /* array of original-tensor records */
	const cJSON *relayouts;             /* array of relayout records */
	const cJSON *files;                 /* object: artifact file name -> SHA-256 */
	const char *fingerprint;            /* the legacy framing (fg_head_fingerprints.legacy) */
	const char *head_fingerprint;       /* MTPLX's framing */
	const char *digest;                 /* fg_artifact_digest of files */
	const char *mtplx_runtime;          /* "mtplx_runtime.json" when one is written, else NULL */
	const cJSON *layout;                /* fg_layout_json's (layout.h), or NULL */
	const cJSON *job;                   /* the daemon's job ({"id", "created_at"}), copied as "job"; NULL: none */
};

/*
 * The forged.provenance.v1 document of p (the lists are copied: p keeps
 * its own).  The caller frees it with cJSON_Delete.  NULL on ENOMEM.
 */
cJSON *fg_provenance_json(const struct fg_provenance *p);

/*
 * Check the originals forged.json of the artifact folder records against
 * the bytes they name.  A reference: its source file (source_file under
 * source, a folder or the single file forged from; NULL: the provenance's
 * source path) is read whole and must hash to file_sha256, and its header
 * must place the tensor, with its dtype, at [offset, offset + length).  A
 * copy: its blob must decompress to length bytes hashing to sha256.  Each
 * file is hashed once, read for real (not from the file-hash cache).
 * *report gets a forged.originals-check.v1 document (artifact, source, ok,
 * checked, failed, originals: [{tensor, form, ok, detail}]), the caller's to
 * free; *n_failed the records that did not check out.  Returns 0 whatever
 * the records say, or FG_EINPUT (no readable forged.json, a malformed
 * record) / FG_ENOMEM.
 */
#define FG_ORIGINALS_CHECK_SCHEMA "forged.originals-check.v1"

int fg_provenance_verify_originals(const char *artifact, const char *source, cJSON **report, size_t *n_failed,
				   struct fg_err *err);

#endif
