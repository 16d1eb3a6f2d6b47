/*
 * originals.c: what forged.json records of the source tensors a forge
 * changed (internal.h): every tensor whose values differ in the artifact
 * (shifted norms, FP8 weights, quantized linears) gets an original record,
 * and every tensor only laid out anew (restacked, split, transposed
 * experts) a relayout record naming its sources.
 *
 * An original is a reference when the source is local: the source file,
 * the file's SHA-256 (remembered per file version, forge/core/filehash.h,
 * so a second forge of the same source reads nothing to hash), the byte
 * offset of the tensor in the file and its length; nothing is copied, and
 * fg_provenance_verify_originals checks it against the file.  A remote
 * source (its files are not here to point at), or FG_ORIGINALS_COPY, keeps
 * a zstd copy under provenance/originals/ instead (a hub file's record still
 * names the file's SHA-256: its LFS oid, from the hub's X-Linked-Etag): compressed on the
 * threads zstd starts (ZSTD_c_nbWorkers), the tensor's bytes and the
 * compressed stream hashed as they pass, by hash threads, never read back.
 */
#include "forge/artifact/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "forge/core/filehash.h"
#include "forge/core/fs.h"
#include "forge/core/nameidx.h"
#include "forge/core/sha256.h"

#define ORIGINAL_IN_CHUNK ((size_t)8 << 20)
#define ORIGINAL_OUT_CHUNK ((size_t)8 << 20)
#define N_OUT_BUFS 4
#define ZSTD_WORKERS 2

/* Output of one compressor: a ring of buffers whose bytes are written, then hashed by a pipe thread. */
struct zsink {
	int fd;
	const char *path;
	struct fg_sha256_pipe *pipe;
	uint8_t *buf[N_OUT_BUFS];
	unsigned long long ticket[N_OUT_BUFS];
	unsigned next;
};

/*
 * Compress len bytes of data into the sink as one zstd frame recording the
 * content size: the input is taken in ORIGINAL_IN_CHUNK slices, each handed
 * to raw (the tensor's hash) as it is and copied into slice_buf for zstd,
 * so memory stays bounded whatever the tensor's size (a fused MoE expert is
 * several GB) and the tensor is read once.  zstd's own threads only ever
 * see slice_buf: a mapped source that shrinks raises SIGBUS in the copy,
 * on the caller's thread (under its guard), never inside zstd.
 */
static int compress_original(ZSTD_CCtx *cctx, uint8_t *slice_buf, struct zsink *z, const uint8_t *data,
			     uint64_t len, struct fg_sha256_pipe *raw, const struct fg_tensor *t, struct forge *f,
			     uint64_t *base, struct fg_err *err)
{
	uint64_t off = 0;
	size_t zr;
	int rc = 0;

	zr = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1); /* weights barely compress: be fast */
	if (!ZSTD_isError(zr))
		zr = ZSTD_CCtx_setPledgedSrcSize(cctx, len);
	if (ZSTD_isError(zr)) {
		rc = fg_err_set(err, FG_EINTERNAL, "%s: zstd: %s", z->path, ZSTD_getErrorName(zr));
		goto out;
	}
	if (len >= 2 * ORIGINAL_IN_CHUNK)
		(void)ZSTD_CCtx_setParameter(cctx, ZSTD_c_nbWorkers, ZSTD_WORKERS); /* single-threaded where unsupported */
	do {
		size_t n = len - off > ORIGINAL_IN_CHUNK ? ORIGINAL_IN_CHUNK : (size_t)(len - off);
		ZSTD_EndDirective mode = off + n == len ? ZSTD_e_end : ZSTD_e_continue;
		const uint8_t *slice = n ? data + off : NULL; /* an empty tensor may have no data */
		ZSTD_inBuffer in = { n ? slice_buf : NULL, n, 0 };
		int done;

		fg_art_will_read(t, off, n);
		if (n) {
			fg_sha256_pipe_push(raw, slice, n);
			memcpy(slice_buf, slice, n); /* zstd took the last slice whole: the buffer is free */
		}
		do {
			unsigned k = z->next;
			ZSTD_outBuffer zout;

			if (!z->buf[k] && !(z->buf[k] = malloc(ORIGINAL_OUT_CHUNK))) {
				rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory for the compressor", z->path);
				goto out;
			}
			fg_sha256_pipe_wait(z->pipe, z->ticket[k]);
			zout = (ZSTD_outBuffer){ z->buf[k], ORIGINAL_OUT_CHUNK, 0 };
			zr = ZSTD_compressStream2(cctx, &zout, &in, mode);
			if (ZSTD_isError(zr)) {
				rc = fg_err_set(err, FG_EINTERNAL, "%s: zstd: %s", z->path, ZSTD_getErrorName(zr));
				goto out;
			}
			if (zout.pos) {
				rc = fg_fs_write_all(z->fd, z->buf[k], zout.pos);
				if (rc) {
					rc = fg_err_set(err, fg_fs_write_errcode(-rc), "%s: cannot write: %s",
							z->path, strerror(-rc));
					goto out;
				}
				z->ticket[k] = fg_sha256_pipe_push(z->pipe, z->buf[k], zout.pos);
				z->next = (k + 1) % N_OUT_BUFS;
			}
			/* e_end is done when zstd has flushed the whole frame; e_continue when it took the slice. */
			done = mode == ZSTD_e_end ? zr == 0 : in.pos == in.size;
		} while (!done);
		off += n;
		fg_art_stage_done(f, *base + off);
		if ((rc = fg_art_stop_requested(f, err)) != 0)
			goto out;
	} while (off < len);
out:
	return rc;
}

struct compress_call {
	ZSTD_CCtx *cctx;
	uint8_t *slice_buf;
	struct zsink *z;
	const struct fg_tensor *t;
	struct fg_sha256_pipe *raw;
	struct forge *f;
	uint64_t *base;
};

static int run_compress(void *ctx, struct fg_err *err)
{
	struct compress_call *c = ctx;

	return compress_original(c->cctx, c->slice_buf, c->z, c->t->data, fg_tensor_bytes(c->t), c->raw, c->t, c->f, c->base, err);
}

/* The SHA-256 of a local source file, hashed at most once a run (and once per version with a cache). */
static int source_file_hash(struct forge *f, const struct fg_ckpt_file *cf, const char **hex, uint64_t *base,
			    struct fg_err *err)
{
	const cJSON *have = cJSON_GetObjectItemCaseSensitive(f->source_hashes, cf->path);
	char h[FG_SHA256_HEX];
	struct fg_art_meter m = { f, *base };
	uint64_t got = 0;
	int rc;

	if (!cJSON_IsString(have)) {
		const struct fg_ckpt *c = f->src->ckpt;
		int fd = -1;

		/* The very file inspected, opened beneath its folder: not whatever its path names now. */
		rc = fg_ckpt_reopen(c, (size_t)(cf - c->files), &fd, err);
		if (!rc) {
			rc = fg_filehash_fd(f->cache_dir, fd, cf->path, h, &got, fg_art_meter, &m, err);
			close(fd);
		}
		*base += got;
		if (rc)
			return fg_err_prefix(err, rc, "hashing the source file of an original: ");
		if (!(have = cJSON_AddStringToObject(f->source_hashes, cf->path, h)))
			return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	*hex = have->valuestring;
	return 0;
}

static int copy_originals(const struct forge *f)
{
	return f->src->ckpt->pull || (f->o->originals == FG_ORIGINALS_COPY);
}

/* The record of t's original: tensor, form, source file, the file's SHA-256, offset, length, dtype, shape. */
static cJSON *record(const struct fg_tensor *t, const struct fg_ckpt_file *cf, const char *form,
		     const char *file_sha)
{
	cJSON *rec = cJSON_CreateObject(), *shape;

	if (!rec)
		return NULL;
	cJSON_AddStringToObject(rec, "tensor", t->name);
	cJSON_AddStringToObject(rec, "form", form);
	cJSON_AddStringToObject(rec, "source_file", cf ? cf->name : "");
	if (file_sha)
		cJSON_AddStringToObject(rec, "file_sha256", file_sha);
	else
		cJSON_AddNullToObject(rec, "file_sha256");
	cJSON_AddNumberToObject(rec, "offset", cf ? (double)(cf->st->data_start + t->begin) : 0.0);
	cJSON_AddNumberToObject(rec, "length", (double)fg_tensor_bytes(t));
	cJSON_AddStringToObject(rec, "dtype", fg_dtype_name(t->dtype));
	shape = cJSON_AddArrayToObject(rec, "shape");
	for (int d = 0; shape && d < t->rank; d++)
		cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
	cJSON_AddNumberToObject(rec, "bytes", (double)fg_tensor_bytes(t));
	return rec;
}

/* A zstd copy of t's bytes under provenance/originals/, hashed as it is written. */
static int copy_original(struct forge *f, const struct fg_tensor *t, size_t nth, cJSON *rec, uint64_t *base,
			 struct fg_err *err)
{
	char rel[64], path[PATH_MAX], hex[FG_SHA256_HEX], zhex[FG_SHA256_HEX];
	struct fg_sha256 *sha = fg_sha256_new(), *zsha = fg_sha256_new();
	struct fg_sha256_pipe *raw = NULL;
	struct zsink z = { .fd = -1, .path = path };
	int rc;

	snprintf(rel, sizeof(rel), "provenance/originals/%04zu.zst", nth);
	if ((rc = fg_fs_join(path, sizeof(path), f->tmp, rel, err)) || (rc = fg_art_make_parents(f->tmp, rel, err)))
		goto out;
	/* raw hashes the source tensor's bytes, which may be mapped: under the SIGBUS guard. */
	if (!sha || !zsha || !(raw = fg_sha256_pipe_start_guarded(&sha, 1, fg_st_guard)) ||
	    !(z.pipe = fg_sha256_pipe_start(&zsha, 1))) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory hashing '%s'", t->name);
		goto out;
	}
	z.fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (z.fd < 0) {
		rc = fg_err_set(err, fg_fs_write_errcode(errno), "%s: cannot create: %s", path, strerror(errno));
		goto out;
	}
	{
		struct compress_call cc = { ZSTD_createCCtx(), malloc(ORIGINAL_IN_CHUNK), &z, t, raw, f, base };

		/* Under a guard of its own, so a source that shrinks still frees the compressor and finishes the pipes. */
		rc = cc.cctx && cc.slice_buf ? fg_st_guard(run_compress, &cc, t->name, err)
					     : fg_err_set(err, FG_ENOMEM, "%s: out of memory for the compressor", path);
		ZSTD_freeCCtx(cc.cctx);
		free(cc.slice_buf);
	}
	*base += fg_tensor_bytes(t);
	if (!rc && fg_sha256_pipe_finish(raw) != 0)
		rc = fg_err_set(err, FG_EINPUT, "'%s': the source changed while it was read (hashing it raised SIGBUS)",
				t->name);
	raw = NULL;
	if (rc)
		goto out;
	if (fsync(z.fd) != 0) {
		rc = fg_err_set(err, fg_fs_write_errcode(errno), "%s: fsync: %s", path, strerror(errno));
		goto out;
	}
	rc = close(z.fd);
	z.fd = -1;
	if (rc != 0) {
		rc = fg_err_set(err, fg_fs_write_errcode(errno), "%s: close: %s", path, strerror(errno));
		goto out;
	}
	fg_sha256_pipe_finish(z.pipe);
	z.pipe = NULL;
	fg_sha256_final_hex(sha, hex);
	fg_sha256_final_hex(zsha, zhex);
	cJSON_AddStringToObject(rec, "sha256", hex);
	cJSON_AddStringToObject(rec, "blob", rel);
	if (!cJSON_AddStringToObject(f->files, rel, zhex))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
out:
	fg_sha256_pipe_finish(raw);
	fg_sha256_pipe_finish(z.pipe); /* before the buffers go */
	for (unsigned k = 0; k < N_OUT_BUFS; k++)
		free(z.buf[k]);
	if (z.fd >= 0)
		close(z.fd);
	fg_sha256_free(sha);
	fg_sha256_free(zsha);
	return rc;
}

/* Record the original of source tensor t, the nth record (keep_input sees that it is once). */
static int keep_original(struct forge *f, const struct fg_tensor *t, size_t nth, uint64_t *base, struct fg_err *err)
{
	const struct fg_ckpt_file *cf = fg_art_file_of(f->src, t);
	const char *file_sha = NULL;
	cJSON *rec;
	int rc = 0;

	if (!copy_originals(f)) {
		if (!cf)
			return fg_err_set(err, FG_EINTERNAL, "'%s': no source file to refer to", t->name);
		if ((rc = source_file_hash(f, cf, &file_sha, base, err)) != 0)
			return rc;
	} else if (f->src->ckpt->pull && cf) {
		/* A hub file's SHA-256 is its LFS oid, which the hub names: no bytes to read for it. */
		file_sha = fg_pull_file_sha256(f->src->ckpt->pull, cf->name);
	}
	rec = record(t, cf, copy_originals(f) ? "copy" : "reference", file_sha);
	if (!rec)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	if (copy_originals(f))
		rc = copy_original(f, t, nth, rec, base, err);
	if (rc) {
		cJSON_Delete(rec);
		return rc;
	}
	cJSON_AddItemToArray(f->originals, rec);
	return 0;
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

/* Bytes the provenance stage moves: copies compressed, or source files hashed (not remembered). */
struct count_ctx {
	struct forge *f;
	cJSON *seen;     /* source files counted */
	uint64_t total;
};

/* Count t's bytes once: a copy's, or its source file's when its hash is not remembered. */
static int count_original(void *ctx, const struct fg_tensor *t)
{
	struct count_ctx *c = ctx;
	const struct fg_ckpt_file *cf = fg_art_file_of(c->f->src, t);
	char hex[FG_SHA256_HEX];
	uint64_t size;

	if (copy_originals(c->f)) {
		c->total += fg_tensor_bytes(t);
	} else if (cf && !cJSON_GetObjectItemCaseSensitive(c->seen, cf->path)) {
		cJSON_AddTrueToObject(c->seen, cf->path);
		if (!fg_filehash_cached(c->f->cache_dir, cf->path, hex, &size))
			c->total += size;
	}
	return 0;
}

static uint64_t originals_bytes(struct forge *f)
{
	struct count_ctx c = { f, cJSON_CreateObject(), 0 };

	for (size_t i = 0; c.seen && i < f->plan.n; i++)
		if (f->plan.t[i].changed)
			fg_plan_entry_inputs(&f->plan.t[i], count_original, &c);
	cJSON_Delete(c.seen);
	return c.total;
}

/*
 * keep_original for fg_plan_entry_inputs, once per source tensor name (a
 * scale grid or an expert may serve several entries): the names recorded
 * are kept in a hash set (a scan of the records per input was quadratic:
 * 30,000 originals took 6 s).  Its failure stays in err.
 */
struct keep_ctx {
	struct forge *f;
	uint64_t *done;
	struct fg_err *err;
	struct fg_nameidx seen; /* the names recorded */
	size_t n_kept;          /* records made (the next copy's blob number) */
};

static int keep_input(void *ctx, const struct fg_tensor *t)
{
	struct keep_ctx *k = ctx;
	int rc = fg_nameidx_put(&k->seen, t->name, 0, NULL);

	if (rc == FG_ENOMEM)
		return fg_err_set(k->err, FG_ENOMEM, "out of memory");
	if (rc)
		return 0;
	if ((rc = keep_original(k->f, t, k->n_kept, k->done, k->err)) == 0)
		k->n_kept++;
	return rc;
}

int fg_art_write_originals(struct forge *f, struct fg_err *err)
{
	uint64_t done = 0;
	struct keep_ctx k = { f, &done, err, { 0 }, (size_t)cJSON_GetArraySize(f->originals) };
	int rc = 0;

	fg_art_stage_total(f, originals_bytes(f));
	for (size_t i = 0; !rc && i < f->plan.n; i++) {
		const struct fg_plan_entry *e = &f->plan.t[i];

		if (e->relayout && !e->changed && !e->hidden && (rc = note_relayout(f, e, err)))
			break;
		if (!e->changed)
			continue;
		if (e->op == FG_OP_SHIFT &&
		    fg_art_note_name(&f->res->shifted, &f->res->n_shifted, &f->res->cap_shifted, e->name)) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			break;
		}
		/* every input, a dequantized module's other tensors (scales, zero points, g_idx, ...) too */
		rc = fg_plan_entry_inputs(e, keep_input, &k);
	}
	fg_nameidx_free(&k.seen);
	fg_art_stage_done(f, done);
	return rc;
}
