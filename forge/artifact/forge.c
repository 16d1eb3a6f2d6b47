/*
 * forge.c: the forge pipeline (forge.h).
 *
 * Stages: inspect the source and the backbone; plan the head (plan.c, policy.c);
 * build the artifact in `.NAME.forged-tmp-PID` beside the destination: shards
 * without head tensors, the sidecar, config.json, the originals of changed
 * tensors (zstd), forged.json; inspect the folder for the target; fsync and
 * rename it into place.  Any failure removes the temporary folder, so the
 * destination holds either nothing new or a complete artifact.
 */
#include "forge/artifact/forge.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "forge/artifact/policy.h"

static unsigned long forge_seq;
#define COPY_CHUNK (4u << 20)

struct forge {
	const struct fg_forge_opts *o;
	struct fg_forge_result *res;
	struct fg_inspect *src;
	struct fg_inspect *bb;          /* == src when the backbone is the source */
	struct fg_plan plan;
	struct fg_policy policy;
	cJSON *quant_record;            /* module -> what was done */
	char tmp[PATH_MAX];
	cJSON *files;                   /* artifact file name -> sha256 */
	cJSON *originals;               /* array of original-tensor records */
	cJSON *relayouts;               /* tensors restacked or transposed, with their sources */
	cJSON *weight_map;              /* tensor -> shard, for the new index */
	unsigned long long total_size;
	size_t n_shards_written;
	int stopped;                    /* the progress callback asked to stop */
};

/*
 * The stages a forge reports, in order, with the fraction of the whole run
 * at which each begins; a stage ends where the next begins.  Remote reads
 * (inspect, fetch) fall before the backbone stage (fg_forge_fetch_fraction).
 */
enum stage { ST_INSPECT, ST_FETCH, ST_BACKBONE, ST_SIDECAR, ST_PROVENANCE, ST_CHECK, ST_DONE };

static const struct {
	const char *name;   /* the stage word of progress callbacks and job rows */
	double start;
} stages[] = {
	[ST_INSPECT] = { "inspect", 0.0 },
	[ST_FETCH] = { "fetch", 0.05 },
	[ST_BACKBONE] = { "backbone", 0.1 },
	[ST_SIDECAR] = { "sidecar", 0.4 },
	[ST_PROVENANCE] = { "provenance", 0.7 },
	[ST_CHECK] = { "check", 0.9 },
	[ST_DONE] = { "done", 1.0 },
};

static void progress_at(struct forge *f, const char *stage, double frac)
{
	if (f->o->progress && f->o->progress(f->o->progress_ctx, stage, frac))
		f->stopped = 1;
}

/* Stage s begins. */
static void progress(struct forge *f, enum stage s)
{
	progress_at(f, stages[s].name, stages[s].start);
}

/* Stage s is done (0..1) of the way through. */
static void progress_within(struct forge *f, enum stage s, double done)
{
	progress_at(f, stages[s].name, stages[s].start + (stages[s + 1].start - stages[s].start) * done);
}

double fg_forge_fetch_fraction(uint64_t done, uint64_t total)
{
	return total ? stages[ST_BACKBONE].start * (double)done / (double)total : 0.0;
}

/* FG_ECANCELLED once the callback asked to stop; checked between stages. */
static int stop_requested(struct forge *f, struct fg_err *err)
{
	return f->stopped ? fg_err_set(err, FG_ECANCELLED, "forge stopped on request") : 0;
}

/* ---- file system helpers ---- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	return remove(path);
}

static void rm_rf(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int join(char *buf, size_t len, const char *dir, const char *name, struct fg_err *err)
{
	int n = snprintf(buf, len, "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= len)
		return fg_err_set(err, FG_EUSAGE, "path too long: %s/%s", dir, name);
	return 0;
}

static int fsync_path(const char *path, int dir)
{
	int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) != 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* mkdir -p for the folders of a relative name inside root. */
static int make_parents(const char *root, const char *name, struct fg_err *err)
{
	char path[PATH_MAX];
	const char *slash = name;

	while ((slash = strchr(slash, '/'))) {
		if (join(path, sizeof(path), root, name, err))
			return err->code;
		path[strlen(root) + 1 + (size_t)(slash - name)] = '\0';
		if (mkdir(path, 0755) != 0 && errno != EEXIST)
			return fg_err_set(err, FG_EINPUT, "%s: cannot create folder: %s", path, strerror(errno));
		slash++;
	}
	return 0;
}

static int copy_file(const char *src, const char *dst, struct fg_err *err)
{
	int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = 0;
	char *buf = NULL;

	if (in < 0)
		return fg_err_set(err, FG_EINPUT, "%s: cannot open: %s", src, strerror(errno));
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	buf = malloc(COPY_CHUNK);
	if (out < 0 || !buf) {
		rc = fg_err_set(err, FG_EINPUT, "%s: cannot create: %s", dst, strerror(errno));
		goto out;
	}
	for (;;) {
		ssize_t got = read(in, buf, COPY_CHUNK), put = 0;

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			if (got < 0)
				rc = fg_err_set(err, FG_EINPUT, "%s: read: %s", src, strerror(errno));
			break;
		}
		while (put < got) {
			ssize_t w = write(out, buf + put, (size_t)(got - put));

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				rc = fg_err_set(err, FG_EINPUT, "%s: write: %s", dst, strerror(errno));
				goto out;
			}
			put += w;
		}
	}
	if (!rc && fsync(out) != 0)
		rc = fg_err_set(err, FG_EINPUT, "%s: fsync: %s", dst, strerror(errno));
out:
	free(buf);
	if (out >= 0)
		close(out);
	close(in);
	return rc;
}

/* Hard-link src to dst (same file system), else copy it. */
static int link_or_copy(const char *src, const char *dst, struct fg_err *err)
{
	if (link(src, dst) == 0)
		return 0;
	if (errno != EXDEV && errno != EPERM && errno != EMLINK)
		return fg_err_set(err, FG_EINPUT, "%s: cannot link from %s: %s", dst, src, strerror(errno));
	return copy_file(src, dst, err);
}

static int write_text(const char *path, const char *text, struct fg_err *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), rc = 0;
	size_t len = strlen(text), off = 0;

	if (fd < 0)
		return fg_err_set(err, FG_EINPUT, "%s: cannot create: %s", path, strerror(errno));
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rc = fg_err_set(err, FG_EINPUT, "%s: write: %s", path, strerror(errno));
			break;
		}
		off += (size_t)w;
	}
	if (!rc && fsync(fd) != 0)
		rc = fg_err_set(err, FG_EINPUT, "%s: fsync: %s", path, strerror(errno));
	close(fd);
	return rc;
}

static int write_json(const char *path, const cJSON *doc, struct fg_err *err)
{
	char *text = cJSON_Print(doc);
	int rc;

	if (!text)
		return fg_err_set(err, FG_ENOMEM, "out of memory printing %s", path);
	rc = write_text(path, text, err);
	free(text);
	return rc;
}

/* Remove temporary folders of dead forges of the same destination. */
static void clean_stale(const char *parent, const char *base)
{
	DIR *d = opendir(parent);
	struct dirent *de;
	char prefix[NAME_MAX + 32];

	if (!d)
		return;
	snprintf(prefix, sizeof(prefix), ".%s.forged-tmp-", base);
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		long pid;

		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
			continue;
		pid = strtol(de->d_name + strlen(prefix), NULL, 10);
		if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", parent, de->d_name) < (int)sizeof(path))
			rm_rf(path);
	}
	closedir(d);
}

static void split_out(const char *out, char *parent, size_t plen, char *base, size_t blen)
{
	char copy[PATH_MAX];
	size_t n;
	char *slash;

	snprintf(copy, sizeof(copy), "%s", out);
	n = strlen(copy);
	while (n > 1 && copy[n - 1] == '/')
		copy[--n] = '\0';
	slash = strrchr(copy, '/');
	if (!slash) {
		snprintf(parent, plen, ".");
		snprintf(base, blen, "%s", copy);
	} else {
		snprintf(base, blen, "%s", slash + 1);
		if (slash == copy)
			slash[1] = '\0';
		else
			*slash = '\0';
		snprintf(parent, plen, "%s", copy);
	}
}

/* ---- stages ---- */

static int add_file_hash(struct forge *f, const char *name, struct fg_err *err)
{
	char path[PATH_MAX], hex[FG_SHA256_HEX];
	int rc = join(path, sizeof(path), f->tmp, name, err);

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

static int note_removed(struct forge *f, const char *name)
{
	char **n = realloc(f->res->removed, (f->res->n_removed + 1) * sizeof(*n));

	if (!n)
		return FG_ENOMEM;
	f->res->removed = n;
	n[f->res->n_removed] = strdup(name);
	if (!n[f->res->n_removed])
		return FG_ENOMEM;
	f->res->n_removed++;
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

	rc = join(dst, sizeof(dst), f->tmp, name, err);
	if (!rc)
		rc = make_parents(f->tmp, name, err);
	if (rc)
		return rc;
	keep = calloc(st->n_tensors ? st->n_tensors : 1, sizeof(*keep));
	if (!keep)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (size_t k = 0; k < st->n_tensors; k++) {
		const struct fg_tensor *t = &st->tensors[k];

		if (fg_inspect_is_head(f->bb, cf, t->name)) {
			if (note_removed(f, t->name)) {
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
		rc = link_or_copy(cf->path, dst, err);
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
	rc = join(path, sizeof(path), f->tmp, "model.safetensors.index.json", err);
	if (!rc)
		rc = write_json(path, doc, err);
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
		return fg_err_set(err, FG_EINPUT, "%s: cannot list: %s", dir, strerror(errno));
	while (!rc && (de = readdir(d))) {
		char src[PATH_MAX], dst[PATH_MAX];
		struct stat st;
		size_t len = strlen(de->d_name);

		if (de->d_name[0] == '.' || strcmp(de->d_name, "config.json") == 0 ||
		    strcmp(de->d_name, "forged.json") == 0 ||
		    strcmp(de->d_name, "model.safetensors.index.json") == 0 ||
		    (len > 12 && strcmp(de->d_name + len - 12, ".safetensors") == 0))
			continue;
		if (join(src, sizeof(src), dir, de->d_name, err) || join(dst, sizeof(dst), f->tmp, de->d_name, err))
			rc = err->code;
		else if (stat(src, &st) == 0 && S_ISREG(st.st_mode)) {
			rc = link_or_copy(src, dst, err);
			if (!rc)
				rc = add_file_hash(f, de->d_name, err);
		}
	}
	closedir(d);
	return rc;
}

static int write_backbone(struct forge *f, struct fg_err *err)
{
	const struct fg_ckpt *c = f->bb->ckpt;
	int rc = 0;

	for (size_t i = 0; !rc && i < c->n_files; i++) {
		if (!is_backbone_shard(&c->files[i]) || (c->files[i].sidecar && !c->files[i].in_index &&
							 f->bb->facts[i].head_tensors == c->files[i].st->n_tensors))
			continue;
		rc = write_shard(f, i, err);
		progress_within(f, ST_BACKBONE, (double)(i + 1) / (double)c->n_files);
		if (!rc)
			rc = stop_requested(f, err);
	}
	if (!rc && (c->index || f->n_shards_written > 1))
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

static int write_sidecar(struct forge *f, struct fg_err *err)
{
	const struct fg_plan *plan = &f->plan;
	struct fg_st_out *outs = calloc(plan->n ? plan->n : 1, sizeof(*outs));
	struct head_producer *prod = calloc(plan->n ? plan->n : 1, sizeof(*prod));
	struct fg_st_meta md = { "format", "mlx" };
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
	rc = join(path, sizeof(path), f->tmp, "mtp.safetensors", err);
	if (!rc)
		rc = fg_st_write(path, outs, n, &md, 1, err); /* hashed with the fingerprint */
out:
	for (size_t i = 0; prod && i < plan->n; i++)
		free(prod[i].buf);
	free(prod);
	free(outs);
	return rc;
}

/* zstd-compress one source tensor's bytes into provenance/originals/. */
static int keep_original(struct forge *f, const struct fg_tensor *t, const char *file, struct fg_err *err)
{
	char rel[64], path[PATH_MAX], hex[FG_SHA256_HEX];
	size_t cap, len;
	void *dst;
	cJSON *rec, *shape;
	const cJSON *it;

	cJSON_ArrayForEach(it, f->originals)
		if (strcmp(cJSON_GetObjectItemCaseSensitive(it, "tensor")->valuestring, t->name) == 0)
			return 0;
	snprintf(rel, sizeof(rel), "provenance/originals/%04d.zst", cJSON_GetArraySize(f->originals));
	cap = ZSTD_compressBound((size_t)fg_tensor_bytes(t));
	dst = malloc(cap ? cap : 1);
	if (!dst)
		return fg_err_set(err, FG_ENOMEM, "out of memory compressing '%s'", t->name);
	len = ZSTD_compress(dst, cap, t->data, (size_t)fg_tensor_bytes(t), 1); /* weights barely compress: be fast */
	if (ZSTD_isError(len)) {
		free(dst);
		return fg_err_set(err, FG_EINTERNAL, "zstd: %s", ZSTD_getErrorName(len));
	}
	if (join(path, sizeof(path), f->tmp, rel, err) || make_parents(f->tmp, rel, err)) {
		free(dst);
		return err->code;
	}
	{
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		ssize_t w = fd >= 0 ? write(fd, dst, len) : -1;

		if (fd < 0 || w != (ssize_t)len || fsync(fd) != 0) {
			if (fd >= 0)
				close(fd);
			free(dst);
			return fg_err_set(err, FG_EINPUT, "%s: cannot write: %s", path, strerror(errno));
		}
		close(fd);
	}
	free(dst);
	fg_sha256_buf(t->data, (size_t)fg_tensor_bytes(t), hex);
	rec = cJSON_CreateObject();
	if (!rec)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
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
	return add_file_hash(f, rel, err);
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

static int write_originals(struct forge *f, struct fg_err *err)
{
	int rc = 0;

	for (size_t i = 0; !rc && i < f->plan.n; i++) {
		const struct fg_plan_entry *e = &f->plan.t[i];

		if (e->relayout && !e->changed && !e->hidden && (rc = note_relayout(f, e, err)))
			break;
		if (!e->changed)
			continue;
		if (e->op == FG_OP_SHIFT && !(rc = 0)) {
			char **n = realloc(f->res->shifted, (f->res->n_shifted + 1) * sizeof(*n));

			if (!n)
				return fg_err_set(err, FG_ENOMEM, "out of memory");
			f->res->shifted = n;
			if (!(n[f->res->n_shifted] = strdup(e->name)))
				return fg_err_set(err, FG_ENOMEM, "out of memory");
			f->res->n_shifted++;
		}
		if (e->src)
			rc = keep_original(f, e->src, source_file_of(f->src, e->src), err);
		if (!rc && e->scale_inv)
			rc = keep_original(f, e->scale_inv, source_file_of(f->src, e->scale_inv), err);
		for (size_t k = 0; !rc && k < e->n_srcs; k++) {
			rc = keep_original(f, e->srcs[k], source_file_of(f->src, e->srcs[k]), err);
			if (!rc && e->scale_invs[k])
				rc = keep_original(f, e->scale_invs[k], source_file_of(f->src, e->scale_invs[k]), err);
		}
	}
	return rc;
}

static const char *encoding_name(enum fg_convention c)
{
	return c == FG_CONV_ABSOLUTE ? "absolute" : c == FG_CONV_DELTA ? "delta" : NULL;
}

static int write_config(struct forge *f, struct fg_err *err)
{
	cJSON *cfg = cJSON_Duplicate(f->bb->ckpt->config_raw, 1), *extra, *q;
	char path[PATH_MAX];
	const char *enc = encoding_name(f->plan.target_conv);
	int rc;

	if (!cfg)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	cJSON_DeleteItemFromObjectCaseSensitive(cfg, "mlx_lm_extra_tensors");
	cJSON_DeleteItemFromObjectCaseSensitive(cfg, "mtp_norm_encoding");
	cJSON_DeleteItemFromObjectCaseSensitive(cfg, "mtplx_mtp_norm_encoding");
	cJSON_DeleteItemFromObjectCaseSensitive(cfg, "mtp_quantization");
	extra = cJSON_AddObjectToObject(cfg, "mlx_lm_extra_tensors");
	if (extra)
		cJSON_AddStringToObject(extra, "mtp_file", "mtp.safetensors");
	if (enc)
		cJSON_AddStringToObject(cfg, "mtp_norm_encoding", enc);
	q = cJSON_AddObjectToObject(cfg, "mtp_quantization");
	if (q) {
		cJSON_AddStringToObject(q, "policy", f->res->policy);
		cJSON_AddItemToObject(q, "modules", cJSON_Duplicate(f->quant_record, 1));
	}
	rc = join(path, sizeof(path), f->tmp, "config.json", err);
	if (!rc)
		rc = write_json(path, cfg, err);
	cJSON_Delete(cfg);
	if (!rc)
		rc = add_file_hash(f, "config.json", err);
	return rc;
}

/*
 * The fingerprint is SHA-256 over config.json then mtp.safetensors: the
 * artifact's identity.  One pass over the sidecar feeds both the fingerprint
 * and the sidecar's own file hash, so a multi-GB head is read once.
 */
static int fingerprint(struct forge *f, struct fg_err *err)
{
	struct fg_sha256 *fp = fg_sha256_new(), *file = fg_sha256_new();
	uint8_t *buf = malloc(COPY_CHUNK);
	char path[PATH_MAX], hex[FG_SHA256_HEX];
	int rc = 0, fd = -1;

	if (!fp || !file || !buf) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	for (int part = 0; !rc && part < 2; part++) {
		if ((rc = join(path, sizeof(path), f->tmp, part ? "mtp.safetensors" : "config.json", err)))
			break;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rc = fg_err_set(err, FG_EINPUT, "%s: %s", path, strerror(errno));
			break;
		}
		for (;;) {
			ssize_t got = read(fd, buf, COPY_CHUNK);

			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				if (got < 0)
					rc = fg_err_set(err, FG_EINPUT, "%s: %s", path, strerror(errno));
				break;
			}
			fg_sha256_update(fp, buf, (size_t)got);
			if (part)
				fg_sha256_update(file, buf, (size_t)got);
		}
		close(fd);
	}
	if (!rc) {
		fg_sha256_final_hex(fp, f->res->fingerprint);
		fg_sha256_final_hex(file, hex);
		fp = file = NULL;
		if (!cJSON_AddStringToObject(f->files, "mtp.safetensors", hex))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
out:
	fg_sha256_free(fp);
	fg_sha256_free(file);
	free(buf);
	return rc;
}

static cJSON *string_array(char **items, size_t n)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(items[i]));
	return a;
}

static int write_provenance(struct forge *f, struct fg_err *err)
{
	cJSON *doc = cJSON_CreateObject(), *dec, *src;
	char path[PATH_MAX], when[32];
	time_t now = time(NULL);
	struct tm tm;
	int rc;

	if (!doc)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	cJSON_AddStringToObject(doc, "schema", "forged.provenance.v1");
	cJSON_AddStringToObject(doc, "forged_version", f->o->version ? f->o->version : "unknown");
	cJSON_AddStringToObject(doc, "created_at", when);
	src = cJSON_AddObjectToObject(doc, "source");
	if (src) {
		cJSON_AddStringToObject(src, "path", f->src->ckpt->source);
		cJSON_AddStringToObject(src, "family", f->src->family->id);
		cJSON_AddStringToObject(src, "head_set", fg_inspect_head(f->src)->set.name);
	}
	cJSON_AddStringToObject(doc, "backbone", f->bb->ckpt->source);
	cJSON_AddStringToObject(doc, "target", f->res->target);
	cJSON_AddStringToObject(doc, "policy", f->res->policy);
	dec = cJSON_AddObjectToObject(doc, "decisions");
	if (dec) {
		cJSON_AddStringToObject(dec, "source_convention", fg_conv_name(f->plan.source_conv));
		cJSON_AddStringToObject(dec, "target_convention", fg_conv_name(f->plan.target_conv));
		cJSON_AddItemToObject(dec, "shifted_tensors", string_array(f->res->shifted, f->res->n_shifted));
		cJSON_AddStringToObject(dec, "expert_layout", f->plan.expert_layout);
		cJSON_AddStringToObject(dec, "shift_precision", "f32");
	}
	cJSON_AddItemToObject(doc, "removed_from_backbone", string_array(f->res->removed, f->res->n_removed));
	/* The lists move into the document: the result keeps it, and nothing later adds to them. */
	if (cJSON_AddItemToObject(doc, "originals", f->originals))
		f->originals = NULL;
	if (cJSON_AddItemToObject(doc, "relayouts", f->relayouts))
		f->relayouts = NULL;
	if (cJSON_AddItemToObject(doc, "files", f->files))
		f->files = NULL;
	cJSON_AddStringToObject(doc, "fingerprint", f->res->fingerprint);
	if (f->o->job)
		cJSON_AddItemToObject(doc, "job", cJSON_Duplicate(f->o->job, 1));
	rc = join(path, sizeof(path), f->tmp, "forged.json", err);
	if (!rc)
		rc = write_json(path, doc, err);
	if (rc) {
		cJSON_Delete(doc);
		return rc;
	}
	f->res->provenance = doc;
	return 0;
}

/* A remote source's head tensors are fetched (by ranges, cached) before writing. */
static int fetch_head(struct forge *f, struct fg_err *err)
{
	const struct fg_tensor **want;
	size_t n = 0, cap = 0;
	int rc;

	if (!f->src->ckpt->pull)
		return 0;
	for (size_t i = 0; i < f->plan.n; i++)
		cap += 2 + 2 * f->plan.t[i].n_srcs;
	want = calloc(cap ? cap : 1, sizeof(*want));
	if (!want)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (size_t i = 0; i < f->plan.n; i++) {
		const struct fg_plan_entry *e = &f->plan.t[i];

		if (e->src)
			want[n++] = e->src;
		if (e->scale_inv)
			want[n++] = e->scale_inv;
		for (size_t k = 0; k < e->n_srcs; k++) {
			want[n++] = e->srcs[k];
			if (e->scale_invs[k])
				want[n++] = e->scale_invs[k];
		}
	}
	progress(f, ST_FETCH);
	rc = fg_ckpt_fetch(f->src->ckpt, want, n, err);
	free(want);
	return rc;
}

static int check_backbone(const struct fg_inspect *src, const struct fg_inspect *bb, struct fg_err *err)
{
	const cJSON *hs = cJSON_GetObjectItemCaseSensitive(src->ckpt->config, "hidden_size");
	const cJSON *hb = cJSON_GetObjectItemCaseSensitive(bb->ckpt->config, "hidden_size");

	if (!bb->ckpt->config_raw)
		return fg_err_set(err, FG_EINPUT, "backbone %s has no config.json", bb->ckpt->source);
	if (strcmp(src->family->id, bb->family->id) != 0)
		return fg_err_set(err, FG_EINPUT, "backbone %s is family %s, the source is %s",
				  bb->ckpt->source, bb->family->id, src->family->id);
	if (cJSON_IsNumber(hs) && cJSON_IsNumber(hb) && hs->valuedouble != hb->valuedouble)
		return fg_err_set(err, FG_EINPUT, "backbone hidden_size %g differs from the source's %g",
				  hb->valuedouble, hs->valuedouble);
	return 0;
}

static int finish(struct forge *f, const char *parent, struct fg_err *err)
{
	const char *target = f->res->target;
	struct stat st;
	char old[PATH_MAX];
	int rc;

	progress(f, ST_CHECK);
	if ((rc = stop_requested(f, err)) != 0)
		return rc;
	rc = fg_inspect_run(&f->res->check, f->tmp, &target, 1, err);
	if (rc)
		return fg_err_prefix(err, rc, "inspecting the new artifact: ");
	f->res->ok = f->res->check->ok;
	if (!f->res->ok) {
		/* Not ok means an error verdict: the first one names the refusal. */
		const struct fg_verdict *first = fg_verdicts_first_error(&f->res->check->verdicts);

		return fg_err_verdict(err, first ? (int)first->row->code : FG_ERR_NO_VERDICT,
				      "the artifact would not inspect clean for %s%s%s", target,
				      first ? ": " : "", first ? first->detail : "");
	}
	if ((rc = fsync_path(f->tmp, 1)) != 0)
		return fg_err_set(err, FG_EINPUT, "%s: fsync: %s", f->tmp, strerror(-rc));
	old[0] = '\0';
	if (lstat(f->o->out, &st) == 0) {
		if (snprintf(old, sizeof(old), "%s-old", f->tmp) >= (int)sizeof(old))
			return fg_err_set(err, FG_EUSAGE, "%s: path too long", f->o->out);
		if (rename(f->o->out, old) != 0)
			return fg_err_set(err, FG_EINPUT, "%s: cannot move the old artifact aside: %s", f->o->out,
					  strerror(errno));
	}
	if (rename(f->tmp, f->o->out) != 0) {
		rc = fg_err_set(err, FG_EINPUT, "%s: cannot rename into place: %s", f->o->out, strerror(errno));
		if (old[0])
			rename(old, f->o->out);
		return rc;
	}
	fsync_path(parent, 1);
	if (old[0])
		rm_rf(old);
	if (!realpath(f->o->out, f->res->artifact))
		snprintf(f->res->artifact, sizeof(f->res->artifact), "%s", f->o->out);
	progress(f, ST_DONE);
	return 0;
}

int fg_forge_run(const struct fg_forge_opts *o, struct fg_forge_result *res, struct fg_err *err)
{
	struct forge f;
	char parent[PATH_MAX], base[NAME_MAX + 1];
	struct stat st;
	int rc;

	memset(res, 0, sizeof(*res));
	memset(&f, 0, sizeof(f));
	f.o = o;
	f.res = res;
	snprintf(res->target, sizeof(res->target), "%s", o->target ? o->target : FG_FORGE_DEFAULT_TARGET);
	if (!fg_runtime_find(res->target))
		return fg_err_set(err, FG_EUSAGE, "unknown target runtime '%s'", res->target);
	if ((rc = fg_policy_parse(o->quant, &f.policy, err)))
		return rc;
	snprintf(res->policy, sizeof(res->policy), "%s", f.policy.text);
	if (!o->out || !*o->out)
		return fg_err_set(err, FG_EUSAGE, "--out DIR is required");
	if (lstat(o->out, &st) == 0 && !o->force)
		return fg_err_set(err, FG_EUSAGE, "%s already exists (use --force to replace it)", o->out);
	progress(&f, ST_INSPECT);
	if (fg_pull_is_url(o->backbone ? o->backbone : o->source)) {
		/* The artifact is the backbone's shards: they must be local files to link. */
		rc = fg_err_set(err, FG_EUSAGE, "the backbone must be a local folder (--backbone DIR); "
				"a remote source's head is fetched, its shards are not");
		goto out;
	}
	rc = fg_inspect_run_opts(&f.src, o->source, NULL, 0, o->pull, err);
	if (rc)
		goto out;
	if (o->backbone && strcmp(o->backbone, o->source) != 0) {
		rc = fg_inspect_run(&f.bb, o->backbone, NULL, 0, err);
		if (!rc)
			rc = check_backbone(f.src, f.bb, err);
		if (rc)
			goto out;
	} else {
		f.bb = f.src;
		if (!f.bb->ckpt->config_raw) {
			rc = fg_err_set(err, FG_EINPUT, "%s: a forge source needs a config.json", o->source);
			goto out;
		}
	}
	rc = fg_plan_build(f.src, res->target, &f.plan, err);
	if (rc)
		goto out;
	f.quant_record = cJSON_CreateObject();
	if (!f.quant_record) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	rc = fg_policy_apply(&f.plan, &f.policy, f.bb, f.quant_record, err);
	if (!rc)
		rc = fetch_head(&f, err);
	if (rc)
		goto out;
	split_out(o->out, parent, sizeof(parent), base, sizeof(base));
	clean_stale(parent, base);
	/* pid, then a sequence number: worker threads of one daemon forge at once. */
	if (snprintf(f.tmp, sizeof(f.tmp), "%s/.%s.forged-tmp-%ld-%lu", parent, base, (long)getpid(),
		     __atomic_fetch_add(&forge_seq, 1, __ATOMIC_RELAXED)) >= (int)sizeof(f.tmp)) {
		rc = fg_err_set(err, FG_EUSAGE, "%s: path too long", o->out);
		goto out;
	}
	rm_rf(f.tmp);
	if (mkdir(f.tmp, 0755) != 0) {
		rc = fg_err_set(err, FG_EINPUT, "%s: cannot create: %s", f.tmp, strerror(errno));
		f.tmp[0] = '\0';
		goto out;
	}
	f.files = cJSON_CreateObject();
	f.originals = cJSON_CreateArray();
	f.relayouts = cJSON_CreateArray();
	f.weight_map = cJSON_CreateObject();
	if (!f.files || !f.originals || !f.relayouts || !f.weight_map) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	progress(&f, ST_BACKBONE);
	rc = stop_requested(&f, err);
	if (!rc)
		rc = write_backbone(&f, err);
	if (!rc) {
		progress(&f, ST_SIDECAR);
		rc = stop_requested(&f, err);
	}
	if (!rc)
		rc = write_sidecar(&f, err);
	if (!rc) {
		progress(&f, ST_PROVENANCE);
		rc = stop_requested(&f, err);
	}
	if (!rc)
		rc = write_originals(&f, err);
	if (!rc)
		rc = write_config(&f, err);
	if (!rc)
		rc = fingerprint(&f, err);
	if (!rc)
		rc = write_provenance(&f, err);
	if (!rc)
		rc = finish(&f, parent, err);
out:
	if (rc == FG_EVERDICT && err)
		res->refusal = *err;
	if (f.tmp[0])
		rm_rf(f.tmp); /* after a successful rename this path no longer exists */
	fg_plan_release(&f.plan);
	cJSON_Delete(f.quant_record);
	cJSON_Delete(f.files);
	cJSON_Delete(f.originals);
	cJSON_Delete(f.relayouts);
	cJSON_Delete(f.weight_map);
	if (f.bb != f.src)
		fg_inspect_free(f.bb);
	fg_inspect_free(f.src);
	return rc;
}

void fg_forge_result_release(struct fg_forge_result *res)
{
	if (!res)
		return;
	for (size_t i = 0; i < res->n_removed; i++)
		free(res->removed[i]);
	for (size_t i = 0; i < res->n_shifted; i++)
		free(res->shifted[i]);
	free(res->removed);
	free(res->shifted);
	fg_inspect_free(res->check);
	cJSON_Delete(res->provenance);
	memset(res, 0, sizeof(*res));
}

/* {code, severity, detail} of a refusal. */
static cJSON *refusal_json(const struct fg_verdict_row *row, const struct fg_err *refusal)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "code", row->name);
	cJSON_AddStringToObject(o, "severity", fg_severity_name(row->severity));
	cJSON_AddStringToObject(o, "detail", refusal->msg);
	return o;
}

/* A refusal in the verdict shape of the inspect report (forged.inspect.v1 verdicts[]). */
static cJSON *refusal_verdict_json(const struct fg_verdict_row *row, const struct fg_err *refusal)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "code", row->name);
	cJSON_AddStringToObject(o, "severity", fg_severity_name(row->severity));
	cJSON_AddNullToObject(o, "set");
	cJSON_AddArrayToObject(o, "runtimes");
	cJSON_AddArrayToObject(o, "tensors");
	cJSON_AddNumberToObject(o, "tensor_count", 0);
	cJSON_AddStringToObject(o, "detail", refusal->msg);
	return o;
}

cJSON *fg_forge_result_json(const struct fg_forge_result *res)
{
	cJSON *o = cJSON_CreateObject(), *report;
	const struct fg_verdict_row *refusal = fg_verdict_row(fg_err_refusal(&res->refusal));

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "schema", "forged.forge.v1");
	if (res->ok && res->artifact[0])
		cJSON_AddStringToObject(o, "artifact", res->artifact);
	else
		cJSON_AddNullToObject(o, "artifact");
	if (res->fingerprint[0] && res->ok)
		cJSON_AddStringToObject(o, "fingerprint", res->fingerprint);
	else
		cJSON_AddNullToObject(o, "fingerprint");
	cJSON_AddStringToObject(o, "target", res->target);
	cJSON_AddStringToObject(o, "policy", res->policy);
	cJSON_AddNumberToObject(o, "head_tensors", (double)res->head_tensors);
	cJSON_AddItemToObject(o, "removed_from_backbone", string_array(res->removed, res->n_removed));
	cJSON_AddItemToObject(o, "shifted_tensors", string_array(res->shifted, res->n_shifted));
	report = res->check ? fg_inspect_json(res->check) : NULL;
	if (report) {
		cJSON_AddItemToObject(o, "verdicts", cJSON_DetachItemFromObjectCaseSensitive(report, "verdicts"));
		cJSON_Delete(report);
	} else {
		cJSON *list = cJSON_AddArrayToObject(o, "verdicts");

		/* Refused before there was an artifact to inspect: the refusal is the verdict. */
		if (list && refusal)
			cJSON_AddItemToArray(list, refusal_verdict_json(refusal, &res->refusal));
	}
	if (refusal)
		cJSON_AddItemToObject(o, "refusal", refusal_json(refusal, &res->refusal));
	else
		cJSON_AddNullToObject(o, "refusal");
	cJSON_AddBoolToObject(o, "ok", res->ok);
	return o;
}
