/*
 * checkpoint.h: a model checkpoint as each consumer sees it.
 *
 * A checkpoint is a folder (or one .safetensors file) holding config.json,
 * shards, an optional model.safetensors.index.json and optional MTP sidecars.
 * Consumers disagree on which files count: mlx-lm loads every
 * `model*.safetensors` in the folder and ignores the index; Hugging Face tools
 * follow the index's weight_map; MTPLX loads the sidecar that config.json's
 * `mlx_lm_extra_tensors.mtp_file` names, else the first of `mtp.safetensors`,
 * `mtp/weights.safetensors`, `model-mtp.safetensors`.  This module records all
 * three views, and where the index and the headers disagree, so later stages
 * can predict each runtime without opening anything again.
 */
#ifndef FG_CHECKPOINT_H
#define FG_CHECKPOINT_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "forge/core/error.h"
#include "forge/core/fs.h"
#include "forge/core/version.h"
#include "forge/source/pull/pull.h"
#include "forge/format/safetensors.h"

#define FG_CKPT_JSON_MAX (256u << 20) /* index size cap (scanned, never a tree) */
#define FG_CKPT_CONFIG_MAX (4u << 20) /* config.json size cap: a real one is kilobytes */
#define FG_CKPT_CONFIG_NODES 200000u  /* config.json JSON values cap (a cJSON node is ~64 bytes) */
#define FG_CKPT_MAX_FILES 100000u
#define FG_CKPT_PULL_MAX_BYTES (64ull << 30) /* a pull's max_bytes by default: an inspection, or a
					      * job's source (its inspection and its head fetch) */
#define FG_CKPT_OPEN_THREADS 8        /* header-parsing threads per fg_ckpt_open (see there) */

struct fg_ckpt_file {
	char *name;           /* relative to the checkpoint folder, e.g. "mtp/weights.safetensors" */
	char *path;           /* as opened */
	struct fg_st_file *st;
	int globbed;          /* matches model*.safetensors: mlx-lm loads it */
	int in_index;         /* the index's weight_map names it */
	int stray;            /* globbed, an index exists, and the index does not name it */
	int sidecar;          /* an MTP sidecar location */
	/* private: where the file came from, to keep files[] in discovery order */
	int group;
	size_t seq;
};

/*
 * A file a runtime's glob would find that is no readable regular file (a
 * FIFO, a device, a symbolic link forged does not follow, a link loop): it
 * is not opened, and inspect reports it (verdict unreadable_shard).
 */
struct fg_ckpt_unreadable {
	char *name;
	const char *why;      /* static words (fg_fs_open_why) */
	int globbed;          /* matches model*.safetensors */
};

enum fg_index_problem {
	FG_INDEX_MISSING,     /* the index maps a tensor to a file whose header lacks it */
	FG_INDEX_UNLISTED,    /* a shard's header holds a tensor the index does not map */
	FG_INDEX_WRONG_FILE,  /* the index maps the tensor to another file */
};

struct fg_index_mismatch {
	enum fg_index_problem problem;
	const char *tensor;   /* borrowed from the index or a header */
	const char *file;     /* the file concerned (borrowed) */
};

struct fg_ckpt {
	char *source;         /* as given */
	char *dir;            /* the folder (for a single file, the file's folder) */
	int single_file;
	cJSON *config_raw;    /* config.json as written; NULL when a single file has none */
	cJSON *config;        /* config.json with text_config folded in (see fg_ckpt_open) */
	cJSON *index;         /* the index's "metadata" (its weight_map is scanned, never kept), or NULL
			       * when the folder has no index */
	size_t n_files;
	struct fg_ckpt_file *files; /* shards (sorted by name), then sidecars */
	int sidecar;          /* the sidecar MTPLX loads: index into files, or -1 */
	size_t n_mismatch;
	struct fg_index_mismatch *mismatch;
	struct fg_pull *pull;  /* remote sources: the HTTP session (owned), else NULL */
	size_t n_unreadable;
	struct fg_ckpt_unreadable *unreadable;
	/* private */
	int dirfd;            /* the local folder, open for the checkpoint's life; -1 remote */
	struct fg_fs_links links;
	const struct fg_st_parse_opts *parse; /* during fg_ckpt_open_with only */
	struct fg_st_slab **slabs; /* the files' tables and names (one slab per parsing thread) */
	size_t n_slabs, cap_slabs;
	void **blocks;        /* bytes read for fg_ckpt_fetch (local), freed with c */
	size_t n_blocks, cap_blocks;
	char *mismatch_names; /* names the mismatches borrow when the index holds them */
	void *fileidx;        /* name -> files[] table */
};

/* How to open a checkpoint (all optional: zeroed is the default). */
struct fg_ckpt_opts {
	const struct fg_pull_opts *pull;        /* remote sources; NULL: fg_ckpt_pull_defaults */
	struct fg_fs_links links;               /* symbolic links beneath the folder: refused by default */
	const struct fg_st_parse_opts *parse;   /* a classifier run on every tensor at parse time */
	/* Called once config.json is read, before any header is parsed (config may be NULL). */
	void (*on_config)(const cJSON *config, void *ctx);
	void *config_ctx;
};

/*
 * Open the checkpoint at source (a folder or a .safetensors file), reading
 * config.json, the index and every safetensors header.  config is config.json
 * with every key of `text_config` (except `model_type`) copied over the top
 * level, as mlx-lm's text models read their arguments.  On success *out is the
 * caller's to release with fg_ckpt_free().  Errors (FG_EINPUT; for remote
 * sources also those of fg_pull_open; FG_ENOMEM) name the checkpoint, the file and the reason: a folder without
 * config.json, an unreadable or malformed shard, an index naming a missing file,
 * a sidecar pointer that escapes the folder or names a missing file.
 *
 * Threads: a local checkpoint's headers are parsed on a pool of up to
 * FG_CKPT_OPEN_THREADS threads (no more than the CPUs online), started and
 * joined inside this call; the calling thread works in the pool too.  Under
 * `forged serve` every worker and API handler opening a checkpoint does
 * this at once, so the peak is callers x FG_CKPT_OPEN_THREADS threads.
 */
int fg_ckpt_open(struct fg_ckpt **out, const char *source, struct fg_err *err);

/*
 * The same, also for remote sources (http(s)://, hf://, see pull.h): config
 * and index are fetched whole, each shard's header by range requests, and no
 * tensor data (tensors have data == NULL until fg_ckpt_fetch).  pull may be
 * NULL: fg_ckpt_pull_defaults().  A remote folder cannot be listed, so the
 * files the index names stand for mlx-lm's glob and stray shards cannot be
 * seen.
 */
int fg_ckpt_open_opts(struct fg_ckpt **out, const char *source, const struct fg_pull_opts *pull,
		      struct fg_err *err);

/* The same with every option. */
int fg_ckpt_open_with(struct fg_ckpt **out, const char *source, const struct fg_ckpt_opts *o, struct fg_err *err);

/* The User-Agent of every remote read forged makes (CLI, API and workers alike). */
#define FG_CKPT_USER_AGENT "forged/" FG_VERSION

/*
 * The pull options every caller builds, in one place: fg_pull_opts_init's
 * defaults, merge_gap 0 (see checkpoint.c), max_bytes FG_CKPT_PULL_MAX_BYTES, FG_CKPT_USER_AGENT, the cache
 * folder (NULL: no cache) and the allowed hosts (n_allow_hosts 0: any).
 * Strings and the host list are borrowed and must outlive o; progress and
 * the other fields are the caller's to set after.
 */
void fg_ckpt_pull_opts(struct fg_pull_opts *o, const char *cache_dir, const char *const *allow_hosts,
		       size_t n_allow_hosts);

/*
 * The default cache folder, $FORGED_CACHE_DIR, else $XDG_CACHE_HOME/forged
 * (when absolute), else ~/.cache/forged, written into buf (len bytes);
 * returns buf, or NULL when none is set or the path does not fit.
 */
const char *fg_ckpt_default_cache_dir(char *buf, size_t len);

/*
 * fg_ckpt_pull_opts with the default cache folder and any host (the CLI, and
 * fg_ckpt_open_opts without options).  o->cache_dir points into the caller's
 * buf (len bytes, PATH_MAX is enough), so buf must outlive o, and two option
 * sets never share a buffer unless the caller makes them.
 */
void fg_ckpt_pull_defaults(struct fg_pull_opts *o, char *buf, size_t len);

/*
 * Make the data of n tensors of c readable.  Local files: each tensor's
 * bytes are read with pread into memory c owns (the file re-opened beneath
 * the folder, checked to be the file whose header was read, and checked
 * again after reading: size and mtime); meant for the few small tensors an
 * inspection reads (norms).  For remote ones, their byte ranges are fetched (merged, in parallel, from
 * the cache when present) and each tensor's data set.  The tensors must
 * belong to c's files.
 *
 * Ownership: the views are handed out as const (an inspection and a plan
 * borrow them), but c owns them, and this call writes their data pointers
 * through a cast; the bytes live in c->pull until fg_ckpt_free.  So a
 * remote checkpoint, and any struct fg_inspect over it, changes here: do
 * not share one between threads while anyone may fetch.  Local checkpoints
 * are never written after fg_ckpt_open.
 */
int fg_ckpt_fetch(struct fg_ckpt *c, const struct fg_tensor *const *tensors, size_t n, struct fg_err *err);

/*
 * Make the data of n tensors readable for streaming whole tensors (a
 * forge): local files holding them are mapped (fg_st_map: every tensor of
 * such a file gets its data, advised MADV_SEQUENTIAL); read mapped bytes
 * under fg_st_guard.  Nothing is asked for ahead here: the streaming reader
 * advises MADV_WILLNEED a step ahead of what it reads (forge/artifact/
 * sources.c), since a head can be larger than the page cache and asking
 * for all of it at once would evict its start before it is read.  Remote
 * checkpoints: fg_ckpt_fetch.
 */
int fg_ckpt_map(struct fg_ckpt *c, const struct fg_tensor *const *tensors, size_t n, struct fg_err *err);

/*
 * Open the file name beneath a local checkpoint's folder with the checked
 * open (fg_fs_open_beneath and the checkpoint's link rule): 0 with *fd (the
 * caller closes it), or the fg_fs_open_beneath code (never an err: a
 * caller decides whether a file that is no regular file matters).
 */
int fg_ckpt_open_file(const struct fg_ckpt *c, const char *name, int *fd);

/* fg_ckpt_map of every tensor of files[idx]. */
int fg_ckpt_map_file(struct fg_ckpt *c, size_t idx, struct fg_err *err);

/*
 * Open files[idx] of a local checkpoint again, the checked way (beneath the
 * folder, the checkpoint's link rule) and only if it is still the file whose
 * header was read (fg_st_check_same): 0 with *fd (the caller closes it), or
 * FG_EINPUT naming the file and what changed.  A forge opens the files it
 * copies from this way, and checks every file it read once it has written
 * (the bytes it copied and hashed are then one version's).
 */
int fg_ckpt_reopen(const struct fg_ckpt *c, size_t idx, int *fd, struct fg_err *err);

/*
 * Up to len bytes from the start of t's data into buf; *got gets how many
 * (t's size when smaller).  Reads t->data when set, else the local file
 * (checked as fg_ckpt_fetch does).  FG_ENOTFOUND for a remote tensor not
 * fetched (nothing read).
 */
int fg_ckpt_peek(struct fg_ckpt *c, const struct fg_tensor *t, uint8_t *buf, size_t len, size_t *got,
		 struct fg_err *err);

void fg_ckpt_free(struct fg_ckpt *c);

/*
 * The tensor called name in the shards (not the sidecars), or NULL.  When file
 * is not NULL it receives the file holding it.  A name held by several shards
 * resolves to the first in files[] order (shards sorted by name).
 */
const struct fg_tensor *fg_ckpt_find(const struct fg_ckpt *c, const char *name,
				     const struct fg_ckpt_file **file);

/* The model_type of config.json's top level, or of text_config, or NULL. */
const char *fg_ckpt_model_type(const struct fg_ckpt *c);
const char *fg_ckpt_text_model_type(const struct fg_ckpt *c);

/* Number of stray shards (globbed by mlx-lm, absent from the index). */
size_t fg_ckpt_stray_count(const struct fg_ckpt *c);

#endif
