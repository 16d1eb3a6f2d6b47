/*
 * internal.h: what the files of the forge pipeline share, and nothing else:
 * the context of one run (struct forge), its stages, and the functions one
 * file calls in another, prefixed fg_art_.  forge.c runs the stages and
 * renames the result into place; write.c writes the artifact's files (the
 * backbone's shards, the index, the linked extras, the sidecar, config.json,
 * the originals); provenance.c builds forged.json and the fingerprint.
 *
 * Only forge/artifact includes this header; everyone else sees forge.h.
 * One forge run is one thread: nothing here is locked.
 */
#ifndef FG_ARTIFACT_INTERNAL_H
#define FG_ARTIFACT_INTERNAL_H

#include <limits.h>
#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "forge/artifact/forge.h"
#include "forge/artifact/layout.h"
#include "forge/artifact/plan.h"
#include "forge/artifact/policy.h"
#include "forge/core/error.h"

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
	cJSON *files;                   /* artifact file name -> sha256 */
	cJSON *originals;               /* array of original-tensor records */
	cJSON *relayouts;               /* tensors restacked or transposed, with their sources */
	cJSON *weight_map;              /* tensor -> shard, for the new index */
	unsigned long long total_size;
	size_t n_shards_written;
	int stopped;                    /* the progress callback asked to stop */
	time_t created_at;              /* forged.json's created_at, mtplx_runtime.json's forged_at */
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

/* forge.c: stage s begins; stage s is done (0..1) of the way through. */
void fg_art_progress(struct forge *f, enum fg_art_stage s);
void fg_art_progress_within(struct forge *f, enum fg_art_stage s, double done);
/* FG_ECANCELLED once the progress callback asked to stop, else 0; checked between steps. */
int fg_art_stop_requested(struct forge *f, struct fg_err *err);

/*
 * write.c: the stages that write files into f->tmp, each recording the
 * files it wrote in f->files (name -> SHA-256) but the head's file, which
 * the fingerprint pass hashes.  All return 0 or an FG_E* code with err set.
 */
int fg_art_write_backbone(struct forge *f, struct fg_err *err);  /* shards, index, extras */
int fg_art_write_sidecar(struct forge *f, struct fg_err *err);   /* the head's file (f->layout), its manifest */
int fg_art_write_originals(struct forge *f, struct fg_err *err); /* provenance/originals/, relayouts */
int fg_art_write_config(struct forge *f, struct fg_err *err);    /* config.json */
/* doc as JSON text at path, atomically. */
int fg_art_write_json(const char *path, const cJSON *doc, struct fg_err *err);

/* provenance.c: a JSON array of copies of items; NULL on ENOMEM. */
cJSON *fg_art_string_array(char *const *items, size_t n);

#endif
