/*
 * write.c: the files of an artifact, written into the forge's temporary
 * folder (internal.h): the backbone's shards (hard-linked when they hold no
 * head tensor, else rewritten without them), the regenerated index, the
 * other backbone files a runtime needs (linked), config.json patched for
 * the layout, the head's file where the layout puts it (a sidecar, or a
 * shard of its own added to the index), streamed chunk by chunk from the
 * plan, and the manifest beside it.
 *
 * Every file gets its SHA-256 in f->files without being read back: what
 * forged writes is hashed as it is written (the writer's hash threads, or
 * the text in memory), what it links is hashed once per file version
 * through the file-hash cache, so a rerun on an unchanged backbone reads
 * none of its shards.  A sidecar is hashed up to three ways as it is
 * written, each on a hash thread beside the writer: its own SHA-256, MTPLX's
 * head fingerprint over config.json then the sidecar (forge/model/mtplx.h),
 * and forged's older `fingerprint` when the sidecar is mtp.safetensors, both
 * begun over config.json's text when that is written; a head in a shard of
 * its own is fingerprinted by neither (MTPLX fingerprints no such
 * artifact).  Nothing is read back.
 */
#include "forge/artifact/internal.h"
#include "forge/model/mtplx.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forge/core/filehash.h"
#include "forge/core/fs.h"
#include "forge/core/grow.h"
#include "forge/core/sha256.h"
#include "forge/core/str.h"

int fg_art_make_parents(const char *root, const char *name, struct fg_err *err)
{
	char path[PATH_MAX];
	int rc = fg_fs_join(path, sizeof(path), root, name, err);

	if (rc)
		return rc;
	*strrchr(path, '/') = '\0'; /* fg_fs_join wrote one */
	rc = fg_fs_mkdir_p(path, 0755);
	if (rc)
		return fg_err_set(err, fg_fs_write_errcode(-rc), "%s: cannot create folder: %s", path, strerror(-rc));
	return 0;
}

int fg_art_write_json(const char *path, const cJSON *doc, char hex[FG_SHA256_HEX], struct fg_err *err)
{
	char *text = cJSON_Print(doc);
	int rc;

	if (!text)
		return fg_err_set(err, FG_ENOMEM, "out of memory printing %s", path);
	rc = fg_fs_write_atomic(path, text, strlen(text), err);
	if (!rc && hex)
		fg_sha256_buf(text, strlen(text), hex);
	free(text);
	return rc;
}

int fg_art_note_name(char ***items, size_t *n, size_t *cap, const char *name)
{
	if (FG_GROW(*items, *n + 1, *cap) || !((*items)[*n] = strdup(name)))
		return FG_ENOMEM;
	(*n)++;
	return 0;
}

static int add_hash(struct forge *f, const char *name, const char *hex, struct fg_err *err)
{
	if (!cJSON_AddStringToObject(f->files, name, hex))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	return 0;
}

/* A linked file's SHA-256: remembered per file version, else read once (counted in the stage). */
static int add_linked_hash(struct forge *f, const char *name, const char *path, uint64_t *base,
			   struct fg_err *err)
{
	char hex[FG_SHA256_HEX];
	struct fg_art_meter m = { f, *base };
	uint64_t got = 0;
	int rc = fg_filehash(f->cache_dir, path, hex, &got, fg_art_meter, &m, err);

	*base += got;
	fg_art_stage_done(f, *base);
	return rc ? rc : add_hash(f, name, hex, err);
}


/* A file the loaders read as the backbone's (carried or not). */
static int is_backbone_shard(const struct fg_ckpt_file *cf)
{
	return cf->globbed || cf->in_index || !cf->sidecar;
}

/*
 * A backbone file the writer goes through: every one the artifact carries
 * (fg_layout_carried, which the layout simulated), and an indexed or
 * non-sidecar shard of head tensors only, whose tensors it records as
 * removed from the backbone (write_shard) without writing the shard.
 */
static int visited(const struct forge *f, size_t i)
{
	const struct fg_ckpt_file *cf = &f->bb->ckpt->files[i];

	return fg_layout_carried(f->bb, i) || cf->in_index || !cf->sidecar;
}

/* A kept tensor of a rewritten shard: its bytes come from the source file, copied in the kernel. */
struct kept {
	struct forge *f;
	const struct fg_tensor *t;
};

static int span_kept(void *ctx, uint64_t offset, size_t len, struct fg_st_span *out, struct fg_err *err)
{
	const struct kept *k = ctx;

	(void)err;
	fg_art_span(k->f, k->t, offset, len, out);
	if (out->fd < 0)
		fg_art_will_read(k->t, offset, len);
	return 1;
}

static int produce_kept(void *ctx, uint8_t *buf, uint64_t offset, size_t len, struct fg_err *err)
{
	const struct kept *k = ctx;

	(void)err;
	memcpy(buf, k->t->data + offset, len);
	return 0;
}

/*
 * One backbone shard: linked when it holds no head tensor, else rewritten
 * without them.  *base counts the stage's bytes moved so far.
 */
static int write_shard(struct forge *f, size_t idx, uint64_t *base, struct fg_err *err)
{
	const struct fg_ckpt_file *cf = &f->bb->ckpt->files[idx];
	const struct fg_st_file *st = cf->st;
	/* A lone file becomes model.safetensors: mlx-lm's glob must find the trunk. */
	const char *name = f->bb->ckpt->single_file ? "model.safetensors" : cf->name;
	struct fg_st_out *keep = NULL;
	struct kept *ctx = NULL;
	char dst[PATH_MAX], hex[FG_SHA256_HEX];
	size_t n_keep = 0;
	int rc;

	rc = fg_fs_join(dst, sizeof(dst), f->tmp, name, err);
	if (!rc)
		rc = fg_art_make_parents(f->tmp, name, err);
	if (rc)
		return rc;
	keep = calloc(st->n_tensors ? st->n_tensors : 1, sizeof(*keep));
	ctx = calloc(st->n_tensors ? st->n_tensors : 1, sizeof(*ctx));
	if (!keep || !ctx) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = fg_ckpt_map_file(f->bb->ckpt, idx, err)))
		goto out;
	for (size_t k = 0; k < st->n_tensors; k++) {
		const struct fg_tensor *t = &st->tensors[k];

		if (fg_inspect_is_head(f->bb, cf, t->name)) {
			if (fg_art_note_name(&f->res->removed, &f->res->n_removed, &f->res->cap_removed, t->name)) {
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
				goto out;
			}
			continue;
		}
		keep[n_keep].name = t->name;
		keep[n_keep].dtype = t->dtype;
		keep[n_keep].rank = t->rank;
		memcpy(keep[n_keep].shape, t->shape, sizeof(keep[n_keep].shape));
		ctx[n_keep].f = f;
		ctx[n_keep].t = t;
		keep[n_keep].span = span_kept;
		keep[n_keep].produce = produce_kept;
		keep[n_keep].ctx = &ctx[n_keep];
		if (!cJSON_AddStringToObject(f->weight_map, t->name, name)) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		f->total_size += fg_tensor_bytes(t);
		n_keep++;
	}
	if (n_keep == 0)
		goto out; /* a shard that held only head tensors is not carried */
	if (n_keep == st->n_tensors) {
		int fd = -1;

		/* The very file inspected, opened beneath the folder: a name swapped meanwhile is not linked. */
		rc = fg_ckpt_reopen(f->bb->ckpt, idx, &fd, err);
		if (!rc) {
			rc = fg_fs_link_or_copy_fd(fd, cf->path, dst, err);
			close(fd);
		}
		if (!rc)
			rc = add_linked_hash(f, name, dst, base, err);
	} else {
		struct fg_sha256 *sha = fg_sha256_new();
		struct fg_art_meter m = { f, *base };
		const struct fg_st_write_opts wo = { .hashes = &sha, .n_hashes = 1, .progress = fg_art_meter,
						     .progress_ctx = &m };

		rc = sha ? fg_st_write_with(dst, keep, n_keep, st->meta, st->n_meta, &wo, err)
			 : fg_err_set(err, FG_ENOMEM, "out of memory");
		if (!rc) {
			fg_sha256_final_hex(sha, hex);
			rc = add_hash(f, name, hex, err);
		}
		fg_sha256_free(sha);
		for (size_t k = 0; k < n_keep; k++)
			*base += fg_tensor_bytes(ctx[k].t);
	}
	if (!rc)
		f->n_shards_written++;
out:
	free(keep);
	free(ctx);
	return rc;
}

static int cmp_json_keys(const void *a, const void *b)
{
	return strcmp((*(cJSON *const *)a)->string, (*(cJSON *const *)b)->string);
}

/* The index as mlx-lm writes it: metadata.total_size and a sorted weight_map. */
static int write_index(struct forge *f, struct fg_err *err)
{
	cJSON *doc = cJSON_CreateObject(), *md, *wm, **items = NULL, *it;
	char path[PATH_MAX], hex[FG_SHA256_HEX];
	size_t n = 0, i = 0;
	int rc;

	md = cJSON_AddObjectToObject(doc, "metadata");
	wm = cJSON_AddObjectToObject(doc, "weight_map");
	if (!doc || !md || !wm || !cJSON_AddNumberToObject(md, "total_size", (double)f->total_size)) {
		cJSON_Delete(doc);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	cJSON_ArrayForEach(it, f->weight_map)
		n++;
	items = calloc(n ? n : 1, sizeof(*items));
	if (!items) {
		cJSON_Delete(doc);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	cJSON_ArrayForEach(it, f->weight_map)
		items[i++] = it;
	qsort(items, n, sizeof(*items), cmp_json_keys);
	for (i = 0; i < n && cJSON_AddStringToObject(wm, items[i]->string, items[i]->valuestring); i++)
		;
	free(items);
	if (i < n) {
		cJSON_Delete(doc);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	rc = fg_fs_join(path, sizeof(path), f->tmp, "model.safetensors.index.json", err);
	if (!rc)
		rc = fg_art_write_json(path, doc, hex, err);
	cJSON_Delete(doc);
	if (!rc)
		rc = add_hash(f, "model.safetensors.index.json", hex, err);
	return rc;
}

/*
 * 1 when a folder entry of the backbone is an extra file to carry
 * (tokenizer, generation config, ...).  Never the files that describe the
 * backbone as an artifact (a backbone forged, or packed by MTPLX, before):
 * forged.json, and mtplx_runtime.json, whose fingerprints and verification
 * name that artifact, not this one (the forge writes its own for an MTPLX
 * target).
 */
static int is_extra(const char *name)
{
	return name[0] != '.' && strcmp(name, "config.json") != 0 && strcmp(name, "forged.json") != 0 &&
	       strcmp(name, FG_MTPLX_RUNTIME_FILE) != 0 && strcmp(name, "model.safetensors.index.json") != 0 &&
	       !fg_str_ends_with(name, ".safetensors");
}

/* Other backbone files a runtime needs, linked. */
static int link_extras(struct forge *f, uint64_t *base, struct fg_err *err)
{
	const char *dir = f->bb->ckpt->dir;
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (f->bb->ckpt->single_file)
		return 0;
	d = opendir(dir);
	if (!d)
		return fg_err_set(err, FG_EINPUT, "%s: cannot list: %s", dir, strerror(errno));
	while (!rc && (de = readdir(d))) {
		char src[PATH_MAX], dst[PATH_MAX];
		int fd;

		if (!is_extra(de->d_name))
			continue;
		if (fg_fs_join(src, sizeof(src), dir, de->d_name, err) ||
		    fg_fs_join(dst, sizeof(dst), f->tmp, de->d_name, err))
			rc = err->code;
		/* Only a regular file inside the folder, opened without following links, is carried. */
		else if (fg_ckpt_open_file(f->bb->ckpt, de->d_name, &fd) == 0) {
			rc = fg_fs_link_or_copy_fd(fd, src, dst, err);
			close(fd);
			if (!rc)
				rc = add_linked_hash(f, de->d_name, dst, base, err);
		}
	}
	closedir(d);
	return rc;
}

/* Bytes the backbone stage moves: rewritten shards, and linked files whose hash is not remembered. */
static uint64_t backbone_bytes(struct forge *f)
{
	const struct fg_ckpt *c = f->bb->ckpt;
	char hex[FG_SHA256_HEX];
	uint64_t total = 0, size;

	for (size_t i = 0; i < c->n_files; i++) {
		const struct fg_ckpt_file *cf = &c->files[i];
		uint64_t head = 0, kept = 0;

		if (!visited(f, i))
			continue;
		for (size_t k = 0; k < cf->st->n_tensors; k++) {
			if (fg_inspect_is_head(f->bb, cf, cf->st->tensors[k].name))
				head++;
			else
				kept += fg_tensor_bytes(&cf->st->tensors[k]);
		}
		if (head)
			total += kept;
		else if (!fg_filehash_cached(f->cache_dir, cf->path, hex, &size))
			total += size;
	}
	if (!c->single_file) {
		DIR *d = opendir(c->dir);
		struct dirent *de;
		char path[PATH_MAX];

		while (d && (de = readdir(d)))
			if (is_extra(de->d_name) && fg_fs_join(path, sizeof(path), c->dir, de->d_name, NULL) == 0 &&
			    !fg_filehash_cached(f->cache_dir, path, hex, &size))
				total += size;
		if (d)
			closedir(d);
	}
	return total;
}

int fg_art_write_backbone(struct forge *f, struct fg_err *err)
{
	const struct fg_ckpt *c = f->bb->ckpt;
	uint64_t done = 0;
	int rc = 0;

	fg_art_stage_total(f, backbone_bytes(f));
	for (size_t i = 0; !rc && i < c->n_files; i++) {
		if (!visited(f, i))
			continue;
		rc = write_shard(f, i, &done, err);
		fg_art_stage_done(f, done);
		if (!rc)
			rc = fg_art_stop_requested(f, err);
	}
	/* An embedded head adds its shard to the index: written with it (fg_art_write_sidecar). */
	if (!rc && f->layout.place != FG_PLACE_EMBEDDED && (c->index || f->n_shards_written > 1))
		rc = write_index(f, err);
	if (!rc)
		rc = link_extras(f, &done, err);
	return rc;
}

int fg_art_write_config(struct forge *f, struct fg_err *err)
{
	cJSON *cfg = cJSON_Duplicate(f->bb->ckpt->config_raw, 1);
	char path[PATH_MAX];
	char *text = NULL;
	int rc;

	if (!cfg)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	/* The pointer, mtp_norm_encoding and norm_convention are the layout's (layout.c). */
	if ((rc = fg_layout_patch_config(&f->layout, cfg, err))) {
		cJSON_Delete(cfg);
		return rc;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(cfg, "mtp_quantization");
	rc = fg_policy_write_config(cfg, &f->plan, &f->policy, f->quant_record, err);
	text = rc ? NULL : cJSON_Print(cfg);
	cJSON_Delete(cfg);
	if (rc)
		return rc;
	if (!text)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_fs_join(path, sizeof(path), f->tmp, "config.json", err);
	if (!rc)
		rc = fg_fs_write_atomic(path, text, strlen(text), err);
	if (!rc) {
		char hex[FG_SHA256_HEX];

		/*
		 * MTPLX's framing: "config.json" NUL <config.json> NUL "mtp" NUL
		 * <the mtp file> NUL, the mtp file being the sidecar config.json
		 * points at (the layout's file); the older one: <config.json>
		 * <mtp.safetensors>.  Begun for a sidecar only; the older one only
		 * when the sidecar is mtp.safetensors (fg_mtplx_head_fingerprint
		 * computes neither otherwise).
		 */
		fg_sha256_buf(text, strlen(text), hex);
		rc = add_hash(f, "config.json", hex, err);
		if (!rc && f->layout.place != FG_PLACE_EMBEDDED) {
			int legacy = strcmp(f->layout.file, "mtp.safetensors") == 0;

			if (!(f->framed = fg_sha256_new()) || (legacy && !(f->legacy = fg_sha256_new())))
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			if (!rc) {
				fg_mtplx_frame_open(f->framed);
				fg_sha256_update(f->framed, text, strlen(text));
				fg_mtplx_frame_between(f->framed);
				if (legacy)
					fg_sha256_update(f->legacy, text, strlen(text));
			}
		}
	}
	free(text);
	return rc;
}

/* One plan entry, chunk by chunk: source runs as spans, computed bytes produced. */
struct head_producer {
	struct forge *f;
	const struct fg_plan_entry *entry;
};

static int span_entry(void *ctx, uint64_t offset, size_t len, struct fg_st_span *out, struct fg_err *err)
{
	const struct head_producer *p = ctx;
	uint64_t at = 0;
	const struct fg_tensor *t = fg_plan_direct(p->entry, offset, &len, &at);

	(void)err;
	if (!t)
		return 0;
	fg_art_span(p->f, t, at, len, out);
	if (out->fd < 0)
		fg_art_will_read(t, at, len); /* written from the mapping: read ahead of it */
	return 1;
}

static int produce_entry(void *ctx, uint8_t *buf, uint64_t offset, size_t len, struct fg_err *err)
{
	const struct head_producer *p = ctx;

	return fg_plan_materialize_range(&p->f->plan, p->entry, offset, len, buf, err);
}

/* The head's metadata: a sidecar is MLX's ({"format": "mlx"}, norm_convention "mlx" when absolute);
 * a head shard says what the backbone's shards say (format "pt" without). */
static size_t head_meta(const struct forge *f, struct fg_st_meta md[2])
{
	const char *fmt = NULL;

	if (f->layout.place == FG_PLACE_EMBEDDED) {
		for (size_t i = 0; !fmt && i < f->bb->ckpt->n_files; i++)
			if (is_backbone_shard(&f->bb->ckpt->files[i]))
				fmt = fg_st_meta(f->bb->ckpt->files[i].st, "format");
		md[0] = (struct fg_st_meta){ "format", fmt ? fmt : "pt" };
		return 1;
	}
	md[0] = (struct fg_st_meta){ "format", "mlx" };
	if (f->plan.target_conv != FG_CONV_ABSOLUTE)
		return 1;
	md[1] = (struct fg_st_meta){ "norm_convention", "mlx" };
	return 2;
}

/* vllm-mlx's manifest.json beside the head, when the layout has one. */
static int write_manifest(struct forge *f, struct fg_err *err)
{
	char rel[96], path[PATH_MAX], hex[FG_SHA256_HEX];
	cJSON *doc;
	int rc;

	if (!fg_layout_manifest_path(&f->layout, rel, sizeof(rel)))
		return 0;
	if (!(doc = fg_layout_manifest(&f->layout, &f->plan)))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_fs_join(path, sizeof(path), f->tmp, rel, err);
	if (!rc)
		rc = fg_art_write_json(path, doc, hex, err);
	cJSON_Delete(doc);
	if (!rc)
		rc = add_hash(f, rel, hex, err);
	return rc;
}

int fg_art_write_sidecar(struct forge *f, struct fg_err *err)
{
	const struct fg_plan *plan = &f->plan;
	struct fg_st_out *outs = calloc(plan->n ? plan->n : 1, sizeof(*outs));
	struct head_producer *prod = calloc(plan->n ? plan->n : 1, sizeof(*prod));
	struct fg_st_meta md[2];
	size_t n_md = head_meta(f, md), n_hashes = 1;
	int embedded = f->layout.place == FG_PLACE_EMBEDDED;
	struct fg_sha256 *file = fg_sha256_new();
	struct fg_sha256 *hashes[3] = { file, NULL, NULL };
	struct fg_art_meter m = { f, 0 };
	struct fg_st_write_opts wo = { .hashes = hashes, .progress = fg_art_meter, .progress_ctx = &m };
	char path[PATH_MAX], hex[FG_SHA256_HEX];
	uint64_t total = 0;
	size_t n = 0;
	int rc;

	/* A sidecar's head fingerprints were begun over config.json (fg_art_write_config). */
	if (f->framed)
		hashes[n_hashes++] = f->framed;
	if (f->legacy)
		hashes[n_hashes++] = f->legacy;
	wo.n_hashes = n_hashes;
	if (!outs || !prod || !file || (!embedded && !f->framed)) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < plan->n; i++) {
		const struct fg_plan_entry *e = &plan->t[i];

		if (e->hidden)
			continue;
		outs[n].name = e->name;
		outs[n].dtype = e->dtype;
		outs[n].rank = e->rank;
		memcpy(outs[n].shape, e->shape, sizeof(e->shape));
		if (embedded) {
			if (!cJSON_AddStringToObject(f->weight_map, e->name, f->layout.file)) {
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
				goto out;
			}
			f->total_size += fg_plan_entry_bytes(e);
		}
		prod[n].f = f;
		prod[n].entry = e;
		outs[n].span = span_entry;
		outs[n].produce = produce_entry;
		outs[n].ctx = &prod[n];
		total += fg_plan_entry_bytes(e);
		n++;
	}
	f->res->head_tensors = n;
	fg_art_stage_total(f, total);
	rc = fg_fs_join(path, sizeof(path), f->tmp, f->layout.file, err);
	if (!rc)
		rc = fg_art_make_parents(f->tmp, f->layout.file, err);
	if (!rc)
		rc = fg_st_write_with(path, outs, n, md, n_md, &wo, err);
	if (!rc) {
		char framed[FG_SHA256_HEX];

		if (f->framed) {
			fg_mtplx_frame_close(f->framed);
			fg_sha256_final_hex(f->framed, framed);
			snprintf(f->res->head_fingerprint, sizeof(f->res->head_fingerprint), "sha256:%s", framed);
		}
		if (f->legacy)
			fg_sha256_final_hex(f->legacy, f->res->fingerprint);
		fg_sha256_final_hex(file, hex);
		rc = add_hash(f, f->layout.file, hex, err);
	}
	/* An embedded head adds its shard to the index: written after it. */
	if (!rc && embedded)
		rc = write_index(f, err);
	if (!rc)
		rc = write_manifest(f, err);
out:
	fg_sha256_free(file);
	free(prod);
	free(outs);
	return rc;
}
