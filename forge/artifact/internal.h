/*
 * internal.h: what the files of the forge pipeline share, and nothing else:
 * the context of one run (struct forge), its stages, and the functions one
 * file calls in another, prefixed fg_art_.  forge.c runs the stages, reports
 * progress and renames the result into place; write.c writes the artifact's
 * files (the backbone's shards, the index, the linked extras, config.json,
 * the sidecar and the fingerprint); originals.c records the originals of
 * changed tensors and the relayouts; sources.c reads the source;
 * provenance.c builds forged.json.
 *
 * Only forge/artifact includes this header; everyone else sees forge.h.
 * One forge run is one thread (the writer's hash threads aside, which see
 * only the bytes handed to them): nothing here is locked.
 */
#ifndef FG_ARTIFACT_INTERNAL_H
#define FG_ARTIFACT_INTERNAL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "forge/artifact/forge.h"
#include "forge/artifact/layout.h"
#include "forge/artifact/plan.h"
#include "forge/artifact/policy.h"
#include "forge/core/error.h"
#include "forge/core/sha256.h"
#include "forge/format/safetensors.h"

struct fg_art_source;

/* One forge run: forge.c fills it, the writers add to it. */
struct forge {
	const struct fg_forge_opts *o;
	struct fg_forge_result *res;
	struct fg_inspect *src;
	struct fg_inspect *bb;          /* == src when the backbone is the source */
	struct fg_plan plan;
	const struct fg_runtime *targets[FG_LAYOUT_MAX_TARGETS]; /* the rows forged for */
	size_t n_targets;
	struct fg_layout layout;        /* where and how the head goes (layout.h) */
	struct fg_policy policy;
	cJSON *quant_record;            /* module -> what was done */
	char tmp[PATH_MAX];             /* the artifact being built, renamed into place at the end */
	const char *cache_dir;          /* forged's cache (file hashes), or NULL */
	cJSON *files;                   /* artifact file name -> sha256 */
	cJSON *originals;               /* array of original-tensor records */
	cJSON *relayouts;               /* tensors restacked or transposed, with their sources */
	cJSON *weight_map;              /* tensor -> shard, for the new index */
	cJSON *source_hashes;           /* source file path -> its SHA-256, looked up once per run */
	/*
	 * The head fingerprints (forge/model/mtplx.h), begun over config.json's
	 * text when it is written and fed the sidecar as it is written: MTPLX's
	 * framing, and forged's older one (fingerprint).
	 */
	struct fg_sha256 *framed, *legacy;
	unsigned long long total_size;
	size_t n_shards_written;
	struct fg_art_source *sources;  /* source files opened for copying (sources.c) */
	size_t n_sources, cap_sources;
	int stopped;                    /* the progress callback asked to stop */
	time_t created_at;              /* forged.json's created_at, mtplx_runtime.json's forged_at */
	/* the current stage's progress (forge.c) */
	int stage;
	uint64_t stage_done, stage_total;
	double stage_t0, last_report;
};

/*
 * The stages a forge reports, in order (forge.c's table gives each its name
 * and the fraction of the run at which it begins).  Remote reads (inspect,
 * fetch) fall before the backbone stage (fg_forge_fetch_fraction).
 */
enum fg_art_stage {
	FG_ART_INSPECT,
	FG_ART_FETCH,
	FG_ART_BACKBONE,
	FG_ART_SIDECAR,
	FG_ART_PROVENANCE,
	FG_ART_CHECK,
	FG_ART_DONE,
};

/* forge.c: stage s begins (0 of 0 bytes). */
void fg_art_progress(struct forge *f, enum fg_art_stage s);
/* The current stage moves total bytes (read, hashed or written), once that is known. */
void fg_art_stage_total(struct forge *f, uint64_t total);
/*
 * done bytes of the current stage are moved: reported with the stage's
 * rate and ETA, at most every FG_FORGE_PROGRESS_S and whenever done reaches
 * the total.
 */
void fg_art_stage_done(struct forge *f, uint64_t done);
/* FG_ECANCELLED once the progress callback asked to stop, else 0; checked between steps. */
int fg_art_stop_requested(struct forge *f, struct fg_err *err);

/*
 * Progress of one file's writing or hashing within a stage (the callback
 * of fg_st_write_opts and fg_filehash, ctx a struct fg_art_meter): the
 * stage has moved base + done bytes.  Non-zero once a stop was asked.
 */
struct fg_art_meter {
	struct forge *f;
	uint64_t base;
};
int fg_art_meter(void *ctx, uint64_t done, uint64_t total);

/*
 * write.c: the stages that write files into f->tmp, each recording the files
 * it wrote in f->files (name -> SHA-256): hashed as they are written, or,
 * for linked files, through the file-hash cache (forge/core/filehash.h), so
 * nothing written is read back.  All return 0 or an FG_E* code with err set.
 */
int fg_art_write_backbone(struct forge *f, struct fg_err *err);  /* shards, index, extras */
int fg_art_write_config(struct forge *f, struct fg_err *err);    /* config.json, the head fingerprints begun */
int fg_art_write_sidecar(struct forge *f, struct fg_err *err);   /* the head's file (f->layout), its fingerprints, the manifest */
/* doc as JSON text at path, atomically; hex (may be NULL) gets the text's SHA-256. */
int fg_art_write_json(const char *path, const cJSON *doc, char hex[FG_SHA256_HEX], struct fg_err *err);
/* The folders of a relative name inside root (root exists), as mkdir -p makes them. */
int fg_art_make_parents(const char *root, const char *name, struct fg_err *err);
/* Append a copy of name to the list items (n, cap); 0 or FG_ENOMEM. */
int fg_art_note_name(char ***items, size_t *n, size_t *cap, const char *name);

/*
 * originals.c: the originals of every source tensor whose values changed,
 * and the relayouts.  A local source's originals are references (its file,
 * the file's SHA-256, offset, length); a remote source's, or any with
 * FG_ORIGINALS_COPY, are zstd copies under provenance/originals/.
 */
int fg_art_write_originals(struct forge *f, struct fg_err *err);

/*
 * sources.c: reading the source, the one place the forge advises or opens
 * source files itself (so a reader API can take it over).
 *
 * fg_art_will_read: bytes [off, off + len) of source tensor t are about to
 * be read through its mapping: ask the kernel to read ahead of them, so a
 * cold source streams in while the bytes before are converted.  A hint:
 * nothing fails.
 *
 * fg_art_span: where bytes [at, at + len) of source tensor t are, for the
 * writer: the source file's own descriptor and offset, so they are copied
 * in the kernel, with the checkpoint's mapping of that file for the hash
 * threads.  Each file is opened once per run, beneath its folder, and only
 * while it is the file inspected (fg_ckpt_reopen); otherwise, and for
 * remote sources, the span is the tensor's view alone (fd -1).  len is not
 * cut.  t's file must be mapped or fetched.
 *
 * fg_art_check_sources: every source or backbone file the forge mapped is
 * still the version whose header was read (device, inode, size, mtime):
 * run once everything is written, so the bytes copied, converted and
 * hashed are one version's.  0 or FG_EINPUT naming the file.
 *
 * fg_art_file_of: the checkpoint file of r holding tensor t, or NULL.
 */
void fg_art_will_read(const struct fg_tensor *t, uint64_t off, uint64_t len);
/* ts[i] of n tensors read in turn is begun: read ahead into the ones after it. */
void fg_art_will_read_run(const struct fg_tensor *const *ts, size_t n, size_t i);
void fg_art_span(struct forge *f, const struct fg_tensor *t, uint64_t at, size_t len, struct fg_st_span *out);
const struct fg_ckpt_file *fg_art_file_of(const struct fg_inspect *r, const struct fg_tensor *t);
int fg_art_check_sources(struct forge *f, struct fg_err *err);
void fg_art_sources_close(struct forge *f);

/* provenance.c: a JSON array of copies of items; NULL on ENOMEM. */
cJSON *fg_art_string_array(char *const *items, size_t n);

#endif
