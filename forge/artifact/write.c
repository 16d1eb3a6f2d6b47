/*
 * write.c: the files of an artifact, written into the forge's temporary
 * folder (internal.h): the backbone's shards (hard-linked when they hold no
 * head tensor, else rewritten without them), the regenerated index, the
 * other backbone files a runtime needs (linked), the head's file where the
 * layout puts it (a sidecar, or a shard of its own added to the index; one
 * plan entry materialized at a time) and the manifest beside it,
 * config.json patched for the layout, and the zstd originals of every
 * source tensor whose bytes changed.  Each file written is hashed into
 * f->files for forged.json.
 */
#include "forge/artifact/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "forge/core/fs.h"
#include "forge/core/grow.h"
#include "forge/core/sha256.h"
#include "forge/core/str.h"

/* The folders of a relative name inside root (root exists), as mkdir -p makes them. */
static int make_parents(const char *root, const char *name, struct fg_err *err)
{
	char path[PATH_MAX];
	int rc = fg_fs_join(path, sizeof(path), root, name, err);

	if (rc)
		return rc;
	*strrchr(path, '/') = '\0'; /* fg_fs_join wrote one */
	rc = fg_fs_mkdir_p(path, 0755);
	if (rc)
		return fg_err_set(err, FG_EIO, "%s: cannot create folder: %s", path, strerror(-rc));
	return 0;
}

int fg_art_write_json(const char *path, const cJSON *doc, struct fg_err *err)
{
	char *text = cJSON_Print(doc);
	int rc;

	if (!text)
		return fg_err_set(err, FG_ENOMEM, "out of memory printing %s", path);
	rc = fg_fs_write_atomic(path, text, strlen(text), err);
	free(text);
	return rc;
}

static int add_file_hash(struct forge *f, const char *name, struct fg_err *err)
{
	char path[PATH_MAX], hex[FG_SHA256_HEX];
	int rc = fg_fs_join(path, sizeof(path), f->tmp, name, err);

	if (!rc)
		rc = fg_sha256_file(path, hex, err);
	if (!rc && !cJSON_AddStringToObject(f->files, name, hex))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	return rc;
}

static int is_backbone_shard(const struct fg_ckpt_file *cf)
{
	return cf->globbed || cf->in_index || !cf->sidecar;
}

/* Append a copy of name to the list items (n, cap); 0 or FG_ENOMEM. */
static int note_name(char ***items, size_t *n, size_t *cap, const char *name)
{
	if (FG_GROW(*items, *n + 1, *cap) || !((*items)[*n] = strdup(name)))
		return FG_ENOMEM;
	(*n)++;
	return 0;
}

/* One backbone shard: linked when it holds no head tensor, else rewritten without them. */
static int write_shard(struct forge *f, size_t idx, struct fg_err *err)
{
	const struct fg_ckpt_file *cf = &f->bb->ckpt->files[idx];
	const struct fg_st_file *st = cf->st;
	/* A lone file becomes model.safetensors: mlx-lm's glob must find the trunk. */
	const char *name = f->bb->ckpt->single_file ? "model.safetensors" : cf->name;
	struct fg_st_out *keep = NULL;
	char dst[PATH_MAX];
	size_t n_keep = 0;
	int rc;

	rc = fg_fs_join(dst, sizeof(dst), f->tmp, name, err);
	if (!rc)
		rc = make_parents(f->tmp, name, err);
	if (rc)
		return rc;
	keep = calloc(st->n_tensors ? st->n_tensors : 1, sizeof(*keep));
	if (!keep)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	if ((rc = fg_ckpt_map_file(f->bb->ckpt, idx, err)))
		goto out;
	for (size_t k = 0; k < st->n_tensors; k++) {
		const struct fg_tensor *t = &st->tensors[k];

		if (fg_inspect_is_head(f->bb, cf, t->name)) {
			if (note_name(&f->res->removed, &f->res->n_removed, &f->res->cap_removed, t->name)) {
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
				goto out;
			}
			continue;
		}
		keep[n_keep].name = t->name;
		keep[n_keep].dtype = t->dtype;
		keep[n_keep].rank = t->rank;
		memcpy(keep[n_keep].shape, t->shape, sizeof(t->shape));
		keep[n_keep].data = t->data;
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
		rc = fg_fs_link_or_copy(cf->path, dst, err);
	} else {
		rc = fg_st_write(dst, keep, n_keep, st->meta, st->n_meta, err);
	}
	if (!rc) {
		f->n_shards_written++;
		rc = add_file_hash(f, name, err);
	}
out:
	free(keep);
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
	char path[PATH_MAX];
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
	for (i = 0; i < n; i++)
		cJSON_AddStringToObject(wm, items[i]->string, items[i]->valuestring);
	free(items);
	rc = fg_fs_join(path, sizeof(path), f->tmp, "model.safetensors.index.json", err);
	if (!rc)
		rc = fg_art_write_json(path, doc, err);
	cJSON_Delete(doc);
	if (!rc)
		rc = add_file_hash(f, "model.safetensors.index.json", err);
	return rc;
}

/* Other backbone files a runtime needs (tokenizer, generation config, ...). */
static int link_extras(struct forge *f, struct fg_err *err)
{
	const char *dir = f->bb->ckpt->dir;
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (f->bb->ckpt->single_file)
		return 0;
	d = opendir(dir);
	if (!d)
		return fg_err_set(err, FG_EIO, "%s: cannot list: %s", dir, strerror(errno));
	while (!rc && (de = readdir(d))) {
		char src[PATH_MAX], dst[PATH_MAX];
		int fd;

		if (de->d_name[0] == '.' || strcmp(de->d_name, "config.json") == 0 ||
		    strcmp(de->d_name, "forged.json") == 0 ||
		    strcmp(de->d_name, "model.safetensors.index.json") == 0 ||
		    fg_str_ends_with(de->d_name, ".safetensors"))
			continue;
		if (fg_fs_join(src, sizeof(src), dir, de->d_name, err) ||
		    fg_fs_join(dst, sizeof(dst), f->tmp, de->d_name, err))
			rc = err->code;
		/* Only a regular file inside the folder, opened without following links, is carried. */
		else if (fg_ckpt_open_file(f->bb->ckpt, de->d_name, &fd) == 0) {
			rc = fg_fs_link_or_copy_fd(fd, src, dst, err);
			close(fd);
			if (!rc)
				rc = add_file_hash(f, de->d_name, err);
		}
	}
	closedir(d);
	return rc;
}

int fg_art_write_backbone(struct forge *f, struct fg_err *err)
{
	const struct fg_ckpt *c = f->bb->ckpt;
	int rc = 0;

	for (size_t i = 0; !rc && i < c->n_files; i++) {
		if (!is_backbone_shard(&c->files[i]) || (c->files[i].sidecar && !c->files[i].in_index &&
							 f->bb->facts[i].head_tensors == c->files[i].st->n_tensors))
			continue;
		rc = write_shard(f, i, err);
		fg_art_progress_within(f, FG_ART_BACKBONE, (double)(i + 1) / (double)c->n_files);
		if (!rc)
			rc = fg_art_stop_requested(f, err);
	}
	/* An embedded head adds its shard to the index: written with it (fg_art_write_sidecar). */
	if (!rc && f->layout.place != FG_PLACE_EMBEDDED && (c->index || f->n_shards_written > 1))
		rc = write_index(f, err);
	if (!rc)
		rc = link_extras(f, err);
	return rc;
}

/* Produces one plan entry's bytes on demand, holding one tensor at a time. */
struct head_producer {
	const struct fg_plan *plan;
	const struct fg_plan_entry *entry;
	uint8_t *buf;
	uint64_t bytes;
};

static int produce_entry(void *ctx, uint8_t *buf, uint64_t offset, size_t len, struct fg_err *err)
{
	struct head_producer *p = ctx;
	int rc;

	if (!p->buf) {
		p->buf = malloc(p->bytes ? (size_t)p->bytes : 1);
		if (!p->buf)
			return fg_err_set(err, FG_ENOMEM, "out of memory for tensor '%s' (%llu bytes)",
					  p->entry->name, (unsigned long long)p->bytes);
		rc = fg_plan_materialize(p->plan, p->entry, p->buf, err);
		if (rc)
			return rc;
	}
	memcpy(buf, p->buf + offset, len);
	if (offset + len == p->bytes) {
		free(p->buf);
		p->buf = NULL;
	}
	return 0;
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
	char rel[96], path[PATH_MAX];
	cJSON *doc;
	int rc;

	if (!fg_layout_manifest_path(&f->layout, rel, sizeof(rel)))
		return 0;
	if (!(doc = fg_layout_manifest(&f->layout, &f->plan)))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_fs_join(path, sizeof(path), f->tmp, rel, err);
	if (!rc)
		rc = fg_art_write_json(path, doc, err);
	cJSON_Delete(doc);
	if (!rc)
		rc = add_file_hash(f, rel, err);
	return rc;
}

int fg_art_write_sidecar(struct forge *f, struct fg_err *err)
{
	const struct fg_plan *plan = &f->plan;
	struct fg_st_out *outs = calloc(plan->n ? plan->n : 1, sizeof(*outs));
	struct head_producer *prod = calloc(plan->n ? plan->n : 1, sizeof(*prod));
	struct fg_st_meta md[2];
	size_t n_md = head_meta(f, md);
	int embedded = f->layout.place == FG_PLACE_EMBEDDED;
	char path[PATH_MAX];
	size_t n = 0;
	int rc;

	if (!outs || !prod) {
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
		if (e->op == FG_OP_VIEW) {
			outs[n].data = e->src->data;
		} else {
			prod[n].plan = plan;
			prod[n].entry = e;
			prod[n].bytes = fg_plan_entry_bytes(e);
			outs[n].produce = produce_entry;
			outs[n].ctx = &prod[n];
		}
		n++;
	}
	f->res->head_tensors = n;
	rc = fg_fs_join(path, sizeof(path), f->tmp, f->layout.file, err);
	if (!rc)
		rc = make_parents(f->tmp, f->layout.file, err);
	if (!rc)
		rc = fg_st_write(path, outs, n, md, n_md, err); /* hashed with the fingerprint */
	if (!rc && embedded)
		rc = write_index(f, err);
	if (!rc)
		rc = write_manifest(f, err);
out:
	for (size_t i = 0; prod && i < plan->n; i++)
		free(prod[i].buf);
	free(prod);
	free(outs);
	return rc;
}

/*
 * Compress len bytes of data into fd as one zstd frame, streaming: the
 * input is fed in ORIGINAL_IN_CHUNK slices straight from the mapping and
 * the output leaves through one ORIGINAL_OUT_CHUNK buffer, so memory stays
 * bounded whatever the tensor's size (a fused MoE expert is several GB), and
 * every slice is hashed into sha as it goes: the tensor is read once.  The
 * frame records the content size, as one-shot compression did.  0, or an
 * FG_E* code with err naming path.
 */
#define ORIGINAL_IN_CHUNK (8u << 20)
#define ORIGINAL_OUT_CHUNK (8u << 20)

static int compress_original(int fd, const uint8_t *data, uint64_t len, struct fg_sha256 *sha,
			     const char *path, struct fg_err *err)
{
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	uint8_t *obuf = malloc(ORIGINAL_OUT_CHUNK);
	uint64_t off = 0;
	size_t zr;
	int rc = 0;

	if (!cctx || !obuf) {
		rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory for the compressor", path);
		goto out;
	}
	zr = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1); /* weights barely compress: be fast */
	if (!ZSTD_isError(zr))
		zr = ZSTD_CCtx_setPledgedSrcSize(cctx, len);
	if (ZSTD_isError(zr)) {
		rc = fg_err_set(err, FG_EINTERNAL, "%s: zstd: %s", path, ZSTD_getErrorName(zr));
		goto out;
	}
	do {
		size_t n = len - off > ORIGINAL_IN_CHUNK ? ORIGINAL_IN_CHUNK : (size_t)(len - off);
		ZSTD_EndDirective mode = off + n == len ? ZSTD_e_end : ZSTD_e_continue;
		const uint8_t *slice = n ? data + off : NULL; /* an empty tensor may have no data */
		ZSTD_inBuffer in = { slice, n, 0 };
		int done;

		fg_sha256_update(sha, slice, n);
		do {
			ZSTD_outBuffer zout = { obuf, ORIGINAL_OUT_CHUNK, 0 };

			zr = ZSTD_compressStream2(cctx, &zout, &in, mode);
			if (ZSTD_isError(zr)) {
				rc = fg_err_set(err, FG_EINTERNAL, "%s: zstd: %s", path, ZSTD_getErrorName(zr));
				goto out;
			}
			rc = fg_fs_write_all(fd, obuf, zout.pos);
			if (rc) {
				rc = fg_err_set(err, FG_EIO, "%s: cannot write: %s", path, strerror(-rc));
				goto out;
			}
			/* e_end is done when zstd has flushed the whole frame; e_continue when it took the slice. */
			done = mode == ZSTD_e_end ? zr == 0 : in.pos == in.size;
		} while (!done);
		off += n;
	} while (off < len);
out:
	free(obuf);
	ZSTD_freeCCtx(cctx);
	return rc;
}

/* zstd-compress one source tensor's bytes into provenance/originals/. */
static int keep_original(struct forge *f, const struct fg_tensor *t, const char *file, struct fg_err *err)
{
	char rel[64], path[PATH_MAX], hex[FG_SHA256_HEX];
	struct fg_sha256 *sha = NULL;
	cJSON *rec, *shape;
	const cJSON *it;
	int fd = -1, rc;

	cJSON_ArrayForEach(it, f->originals)
		if (strcmp(cJSON_GetObjectItemCaseSensitive(it, "tensor")->valuestring, t->name) == 0)
			return 0;
	snprintf(rel, sizeof(rel), "provenance/originals/%04d.zst", cJSON_GetArraySize(f->originals));
	if ((rc = fg_fs_join(path, sizeof(path), f->tmp, rel, err)) || (rc = make_parents(f->tmp, rel, err)))
		return rc;
	if (!(sha = fg_sha256_new()))
		return fg_err_set(err, FG_ENOMEM, "out of memory hashing '%s'", t->name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = fg_err_set(err, FG_EIO, "%s: cannot create: %s", path, strerror(errno));
		goto out;
	}
	rc = compress_original(fd, t->data, fg_tensor_bytes(t), sha, path, err);
	if (rc)
		goto out;
	if (fsync(fd) != 0) {
		rc = fg_err_set(err, FG_EIO, "%s: fsync: %s", path, strerror(errno));
		goto out;
	}
	rc = close(fd);
	fd = -1;
	if (rc != 0) {
		rc = fg_err_set(err, FG_EIO, "%s: close: %s", path, strerror(errno));
		goto out;
	}
	fg_sha256_final_hex(sha, hex);
	rec = cJSON_CreateObject();
	if (!rec) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	cJSON_AddStringToObject(rec, "tensor", t->name);
	cJSON_AddStringToObject(rec, "source_file", file);
	cJSON_AddStringToObject(rec, "dtype", fg_dtype_name(t->dtype));
	shape = cJSON_AddArrayToObject(rec, "shape");
	for (int d = 0; shape && d < t->rank; d++)
		cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
	cJSON_AddNumberToObject(rec, "bytes", (double)fg_tensor_bytes(t));
	cJSON_AddStringToObject(rec, "sha256", hex);
	cJSON_AddStringToObject(rec, "blob", rel);
	cJSON_AddItemToArray(f->originals, rec);
	rc = add_file_hash(f, rel, err);
out:
	if (fd >= 0)
		close(fd);
	fg_sha256_free(sha);
	return rc;
}

static const char *source_file_of(const struct fg_inspect *r, const struct fg_tensor *t)
{
	for (size_t s = 0; s < r->n_sets; s++)
		for (size_t i = 0; i < r->sets[s].set.n_tensors; i++)
			if (r->sets[s].set.tensors[i] == t)
				return r->sets[s].set.tensor_files[i];
	return "";
}

/*
 * A restacked or transposed tensor holds its sources' values unchanged, so it
 * is recorded (which sources, which operation) rather than copied: undoing it
 * needs no original bytes.
 */
static int note_relayout(struct forge *f, const struct fg_plan_entry *e, struct fg_err *err)
{
	static const char *const ops[] = {
		[FG_OP_STACK] = "stack", [FG_OP_SPLIT] = "split", [FG_OP_SPLIT_T] = "split_transpose",
		[FG_OP_TRANSPOSE] = "transpose", [FG_OP_VIEW] = "rename",
	};
	cJSON *rec = cJSON_CreateObject(), *srcs;

	if (!rec)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	cJSON_AddStringToObject(rec, "tensor", e->name);
	cJSON_AddStringToObject(rec, "op", e->op < sizeof(ops) / sizeof(ops[0]) && ops[e->op] ? ops[e->op] : "relayout");
	if (e->op == FG_OP_SPLIT || e->op == FG_OP_SPLIT_T)
		cJSON_AddStringToObject(rec, "half", e->half ? "up" : "gate");
	srcs = cJSON_AddArrayToObject(rec, "sources");
	if (e->src)
		cJSON_AddItemToArray(srcs, cJSON_CreateString(e->src->name));
	for (size_t k = 0; k < e->n_srcs; k++)
		cJSON_AddItemToArray(srcs, cJSON_CreateString(e->srcs[k]->name));
	cJSON_AddItemToArray(f->relayouts, rec);
	return 0;
}

int fg_art_write_originals(struct forge *f, struct fg_err *err)
{
	int rc = 0;

	for (size_t i = 0; !rc && i < f->plan.n; i++) {
		const struct fg_plan_entry *e = &f->plan.t[i];

		if (e->relayout && !e->changed && !e->hidden && (rc = note_relayout(f, e, err)))
			break;
		if (!e->changed)
			continue;
		if (e->op == FG_OP_SHIFT &&
		    note_name(&f->res->shifted, &f->res->n_shifted, &f->res->cap_shifted, e->name))
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		if (e->src)
			rc = keep_original(f, e->src, source_file_of(f->src, e->src), err);
		if (!rc && e->scale_inv)
			rc = keep_original(f, e->scale_inv, source_file_of(f->src, e->scale_inv), err);
		for (size_t k = 0; !rc && k < e->n_srcs; k++) {
			rc = keep_original(f, e->srcs[k], source_file_of(f->src, e->srcs[k]), err);
			if (!rc && e->scale_invs && e->scale_invs[k])
				rc = keep_original(f, e->scale_invs[k], source_file_of(f->src, e->scale_invs[k]), err);
		}
		/* a dequantized module's other tensors (scales, zero points, g_idx, ...) are its originals too */
		for (size_t k = 0; !rc && k <= e->n_srcs; k++) {
			const struct fg_qmod *q = k < e->n_srcs ? (e->qsrcs ? e->qsrcs[k] : NULL) : e->qsrc;

			for (int r = 0; !rc && q && r < FG_QR_COUNT; r++)
				if (q->m.t[r])
					rc = keep_original(f, q->m.t[r], source_file_of(f->src, q->m.t[r]), err);
		}
	}
	return rc;
}

int fg_art_write_config(struct forge *f, struct fg_err *err)
{
	cJSON *cfg = cJSON_Duplicate(f->bb->ckpt->config_raw, 1);
	char path[PATH_MAX];
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
	if (!rc)
		rc = fg_fs_join(path, sizeof(path), f->tmp, "config.json", err);
	if (!rc)
		rc = fg_art_write_json(path, cfg, err);
	cJSON_Delete(cfg);
	if (!rc)
		rc = add_file_hash(f, "config.json", err);
	return rc;
}
