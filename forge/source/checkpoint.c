/*
 * checkpoint.c: opens a checkpoint folder the way each consumer would and
 * records where their views disagree (see checkpoint.h).
 *
 * Shards are found two ways and both are kept: the folder glob mlx-lm uses and
 * the index's weight_map.  A shard the glob finds but the index omits is a
 * stray (mlx-lm loads it anyway: MTPLX issue 306's embedded head survived a
 * pruned index this way).
 *
 * Every file beneath the folder is opened through one checked open
 * (fg_fs_open_beneath: no symbolic links unless the caller allows them
 * within given roots, O_NONBLOCK so a FIFO cannot wedge the open, regular
 * files only) from a descriptor of the folder kept for the checkpoint's
 * life.  No tensor data is read while opening: headers are mapped, parsed
 * into compact tables (packed into one slab per parsing thread) on a pool
 * of threads and unmapped, the index is scanned once (jsonlex.h, no tree)
 * and checked against those tables as it goes, each entry compared first
 * with the next name of its file's header, and tensor bytes are read
 * later, on request (fg_ckpt_fetch, fg_ckpt_map).
 */
#include "forge/source/checkpoint.h"

#include "forge/core/str.h"
#include "forge/core/grow.h"
#include "forge/core/json.h"
#include "forge/format/jsonlex.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const sidecar_candidates[] = {
	"mtp.safetensors", "mtp/weights.safetensors", "model-mtp.safetensors",
};

enum { GROUP_GLOB, GROUP_INDEX, GROUP_SIDECAR };

/* ---- tensor name -> file index (the index's map, built only on a mismatch) ---- */

struct name_slot {
	const char *name;
	const char *target;   /* the file the index names */
};

struct name_map {
	size_t n_slots;
	struct name_slot *slots;
};

static struct name_slot *map_slot(const struct name_map *m, const char *name)
{
	size_t mask = m->n_slots - 1, i = (size_t)fg_fnv1a(name) & mask;

	while (m->slots[i].name && strcmp(m->slots[i].name, name) != 0)
		i = (i + 1) & mask;
	return &m->slots[i];
}

static int map_init(struct name_map *m, size_t expect)
{
	size_t n = 16;

	while (n < 2 * expect + 2)
		n <<= 1;
	m->slots = calloc(n, sizeof(*m->slots));
	m->n_slots = n;
	return m->slots ? 0 : FG_ENOMEM;
}

/* ---- file name -> files[] (linear in the number of files) ---- */

struct file_table {
	size_t n_slots;
	size_t *slots;        /* index + 1, 0 empty */
};

static size_t ft_probe(const struct fg_ckpt *c, const struct file_table *t, const char *name, size_t len)
{
	size_t mask = t->n_slots - 1, i = (size_t)fg_fnv1a_n(name, len) & mask;

	while (t->slots[i]) {
		const char *n = c->files[t->slots[i] - 1].name;

		if (strncmp(n, name, len) == 0 && n[len] == '\0')
			break;
		i = (i + 1) & mask;
	}
	return i;
}

/* The index of the file called name (len bytes) in c->files, or NO_FILE. */
#define NO_FILE SIZE_MAX

static size_t find_file_n(const struct fg_ckpt *c, const char *name, size_t len)
{
	const struct file_table *t = c->fileidx;
	size_t i;

	if (!t || !t->n_slots)
		return NO_FILE;
	i = ft_probe(c, t, name, len);
	return t->slots[i] ? t->slots[i] - 1 : NO_FILE;
}

static size_t find_file(const struct fg_ckpt *c, const char *name)
{
	return find_file_n(c, name, strlen(name));
}

static int ft_add(struct fg_ckpt *c, size_t idx)
{
	struct file_table *t = c->fileidx;

	if (!t) {
		if (!(t = calloc(1, sizeof(*t))))
			return FG_ENOMEM;
		c->fileidx = t;
	}
	if (2 * (idx + 1) >= t->n_slots) {
		size_t n = t->n_slots ? 2 * t->n_slots : 64;
		size_t *s = calloc(n, sizeof(*s));

		if (!s)
			return FG_ENOMEM;
		free(t->slots);
		t->slots = s;
		t->n_slots = n;
		for (size_t k = 0; k < idx; k++)
			t->slots[ft_probe(c, t, c->files[k].name, strlen(c->files[k].name))] = k + 1;
	}
	t->slots[ft_probe(c, t, c->files[idx].name, strlen(c->files[idx].name))] = idx + 1;
	return 0;
}

static void ft_rebuild(struct fg_ckpt *c)
{
	struct file_table *t = c->fileidx;

	if (!t)
		return;
	memset(t->slots, 0, t->n_slots * sizeof(*t->slots));
	for (size_t k = 0; k < c->n_files; k++)
		t->slots[ft_probe(c, t, c->files[k].name, strlen(c->files[k].name))] = k + 1;
}

/* ---- helpers ---- */

static char *path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s/%s", dir, name);
	return p;
}

/* A config key and its place, sorted by (key, place) to answer "first" and "last" in O(log n). */
struct keypos {
	const char *key;
	size_t pos;
	const cJSON *item;
};

static int cmp_keypos(const void *pa, const void *pb)
{
	const struct keypos *a = pa, *b = pb;
	int c = strcmp(a->key, b->key);

	return c ? c : (a->pos < b->pos ? -1 : a->pos > b->pos);
}

/* The first (want_last 0) or last element of v[0..n) with key, or NULL. */
static const struct keypos *kp_find(const struct keypos *v, size_t n, const char *key, int want_last)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(v[mid].key, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == n || strcmp(v[lo].key, key) != 0)
		return NULL;
	while (want_last && lo + 1 < n && strcmp(v[lo + 1].key, key) == 0)
		lo++;
	return &v[lo];
}

static struct keypos *kp_list(const cJSON *o, size_t *n)
{
	const cJSON *kv;
	struct keypos *v;
	size_t i = 0;

	*n = 0;
	cJSON_ArrayForEach(kv, o)
		(*n)++;
	if (!(v = calloc(*n ? *n : 1, sizeof(*v))))
		return NULL;
	cJSON_ArrayForEach(kv, o) {
		v[i].key = kv->string;
		v[i].pos = i;
		v[i].item = kv;
		i++;
	}
	qsort(v, *n, sizeof(*v), cmp_keypos);
	return v;
}

/*
 * config with text_config's keys (but model_type) over the top level, as a
 * copy of raw followed by cJSON_ReplaceItemInObject / AddItemToObject of
 * each text_config key would have it, but holding references to raw's
 * items instead of copies (the merged tree costs one node per key).
 */
static int merge_text_config(cJSON **out, const cJSON *raw)
{
	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(raw, "text_config");
	struct keypos *r = NULL, *t = NULL;
	size_t nr, nt = 0, i = 0;
	const cJSON *kv;
	cJSON *merged = cJSON_CreateObject();
	int rc = FG_ENOMEM;

	if (!merged || !(r = kp_list(raw, &nr)) || (cJSON_IsObject(tc) && !(t = kp_list(tc, &nt))))
		goto out;
	cJSON_ArrayForEach(kv, raw) {
		const struct keypos *first = kp_find(r, nr, kv->string, 0);
		const struct keypos *over = NULL;

		if (t && first->pos == i && strcmp(kv->string, "model_type") != 0)
			over = kp_find(t, nt, kv->string, 1);
		if (!cJSON_AddItemReferenceToObject(merged, kv->string, (cJSON *)(uintptr_t)(over ? over->item : kv)))
			goto out;
		i++;
	}
	i = 0;
	if (t) {
		cJSON_ArrayForEach(kv, tc) {
			const struct keypos *first = kp_find(t, nt, kv->string, 0);

			if (first->pos == i && strcmp(kv->string, "model_type") != 0 && !kp_find(r, nr, kv->string, 0) &&
			    !cJSON_AddItemReferenceToObject(merged, kv->string,
							    (cJSON *)(uintptr_t)kp_find(t, nt, kv->string, 1)->item))
				goto out;
			i++;
		}
	}
	*out = merged;
	merged = NULL;
	rc = 0;
out:
	cJSON_Delete(merged);
	free(r);
	free(t);
	return rc;
}

static int add_file(struct fg_ckpt *c, size_t *cap, const char *name, int group, struct fg_err *err)
{
	struct fg_ckpt_file *f;
	size_t found = find_file(c, name);

	if (found != NO_FILE)
		return (int)found;
	if (c->n_files == FG_CKPT_MAX_FILES)
		return fg_err_set(err, FG_EINPUT, "%s: more than %u safetensors files",
				  c->source, FG_CKPT_MAX_FILES);
	if (FG_GROW(c->files, c->n_files + 1, *cap))
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->source);
	f = &c->files[c->n_files];
	memset(f, 0, sizeof(*f));
	f->name = strdup(name);
	f->path = c->single_file && !c->pull ? strdup(c->source) : path_join(c->dir, name);
	f->group = group;
	f->seq = c->n_files;
	if (!f->name || !f->path || ft_add(c, c->n_files)) {
		free(f->name);
		free(f->path);
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->source);
	}
	return (int)c->n_files++;
}

static int add_unreadable(struct fg_ckpt *c, size_t *cap, const char *name, int rc, struct fg_err *err)
{
	struct fg_ckpt_unreadable *u;

	if (FG_GROW(c->unreadable, c->n_unreadable + 1, *cap))
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->source);
	u = &c->unreadable[c->n_unreadable];
	if (!(u->name = strdup(name)))
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->source);
	u->why = fg_fs_open_why(rc);
	u->globbed = fnmatch("model*.safetensors", name, 0) == 0;
	c->n_unreadable++;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Probe name beneath the folder with the checked open: 0 (a regular file), -ENOENT, or another failure. */
static int probe(const struct fg_ckpt *c, const char *name)
{
	int fd, rc = fg_fs_open_beneath(c->dirfd, name, &c->links, &fd);

	if (!rc)
		close(fd);
	return rc;
}

/*
 * Every model*.safetensors in the folder, sorted, as mlx-lm's glob sees
 * them.  Names that are no regular file (or a link forged does not follow)
 * go to c->unreadable instead.
 */
static int glob_shards(struct fg_ckpt *c, size_t *cap, size_t *ucap, struct fg_err *err)
{
	int dfd = dup(c->dirfd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, ncap = 0;
	int rc = 0;

	if (!d) {
		rc = fg_err_set(err, FG_EINPUT, "%s: cannot list the folder: %s", c->dir, strerror(errno));
		if (dfd >= 0)
			close(dfd);
		return rc;
	}
	while ((de = readdir(d))) {
		struct stat st;
		int why = 0;

		if (fnmatch("model*.safetensors", de->d_name, 0) != 0)
			continue;
		if (de->d_type == DT_REG) {
			why = 0;
		} else if (fstatat(c->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
			why = -errno;
		} else if (S_ISLNK(st.st_mode)) {
			why = probe(c, de->d_name);
		} else if (!S_ISREG(st.st_mode)) {
			why = FG_FS_NOT_REGULAR;
		}
		if (why) {
			rc = add_unreadable(c, ucap, de->d_name, why, err);
			if (rc)
				goto out;
			continue;
		}
		if (FG_GROW(names, n + 1, ncap) || !(names[n] = strdup(de->d_name))) {
			rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->dir);
			goto out;
		}
		n++;
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		rc = add_file(c, cap, names[i], GROUP_GLOB, err);
		if (rc < 0)
			goto out;
		c->files[rc].globbed = 1;
		rc = 0;
	}
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return rc;
}

/*
 * Does the folder hold file name?  A remote folder cannot be listed: with
 * remote_probe, one small request asks (optional sidecars); without, the
 * header fetch will tell (files the index names).  0 when it does, -ENOENT
 * when it does not, another fg_fs_open_beneath code when it is no regular
 * file (or a refused link).
 */
static int file_exists(const struct fg_ckpt *c, const char *name, int remote_probe)
{
	struct fg_err ignored = { 0 };
	uint64_t size;

	if (c->pull)
		return !remote_probe || fg_pull_size(c->pull, name, &size, &ignored) == 0 ? 0 : -ENOENT;
	return probe(c, name);
}

/* The sidecar pointer of config.json, then the conventional names. */
static int find_sidecars(struct fg_ckpt *c, size_t *cap, size_t *ucap, struct fg_err *err)
{
	const cJSON *extra = cJSON_GetObjectItemCaseSensitive(c->config_raw, "mlx_lm_extra_tensors");
	const cJSON *ptr = cJSON_GetObjectItemCaseSensitive(extra, "mtp_file");
	int idx, why;

	if (ptr) {
		if (!cJSON_IsString(ptr) || !fg_fs_confined_relpath(ptr->valuestring))
			return fg_err_set(err, FG_EINPUT,
					  "%s/config.json: mlx_lm_extra_tensors.mtp_file is not a relative path inside the folder",
					  c->dir);
		why = file_exists(c, ptr->valuestring, 1);
		if (why == -ENOENT)
			return fg_err_set(err, FG_EINPUT,
					  "%s/config.json: mlx_lm_extra_tensors.mtp_file names '%.200s', which is missing",
					  c->dir, ptr->valuestring);
		if (why)
			return fg_err_set(err, FG_EINPUT, "%s/config.json: mlx_lm_extra_tensors.mtp_file names '%.200s', which %s",
					  c->dir, ptr->valuestring, fg_fs_open_why(why));
		idx = add_file(c, cap, ptr->valuestring, GROUP_SIDECAR, err);
		if (idx < 0)
			return idx;
		c->files[idx].sidecar = 1;
		c->sidecar = idx;
	}
	for (size_t i = 0; i < sizeof(sidecar_candidates) / sizeof(*sidecar_candidates); i++) {
		if (find_file(c, sidecar_candidates[i]) == NO_FILE) {
			why = file_exists(c, sidecar_candidates[i], 1);
			if (why == -ENOENT)
				continue;
			if (why) {
				/* A glob-matching candidate is already listed by the glob. */
				if (fnmatch("model*.safetensors", sidecar_candidates[i], 0) != 0 &&
				    add_unreadable(c, ucap, sidecar_candidates[i], why, err))
					return err ? err->code : FG_ENOMEM;
				continue;
			}
		}
		idx = add_file(c, cap, sidecar_candidates[i], GROUP_SIDECAR, err);
		if (idx < 0)
			return idx;
		c->files[idx].sidecar = 1;
		if (c->sidecar < 0)
			c->sidecar = idx;
	}
	return 0;
}

static int add_mismatch(struct fg_ckpt *c, size_t *cap, enum fg_index_problem p,
			const char *tensor, const char *file)
{
	if (FG_GROW(c->mismatch, c->n_mismatch + 1, *cap))
		return FG_ENOMEM;
	c->mismatch[c->n_mismatch].problem = p;
	c->mismatch[c->n_mismatch].tensor = tensor;
	c->mismatch[c->n_mismatch].file = file;
	c->n_mismatch++;
	return 0;
}

static int is_shard(const struct fg_ckpt_file *f)
{
	return f->globbed || f->in_index || !f->sidecar;
}

/* ---- the index: scanned once, never kept as a tree ---- */

/* The text of the index (mapped, or the remote body) and what scanning it found. */
struct index_text {
	const char *text;
	size_t len;
	const char *label;
	int mapped;
	size_t *clean;        /* bytes from the start known to hold no NUL (NULL: the whole text is) */
};

/*
 * The index must hold no NUL byte (the reader relies on it, and a NUL
 * anywhere is the error reported, whatever else is wrong).  A local index
 * is checked a window at a time just ahead of the first scan (so the scan
 * reads pages the check brought in, once), and what the scan did not reach
 * is checked when it ends (scan_first).
 */
#define INDEX_WINDOW ((size_t)1 << 20)

/* Check the window ahead of p; true when it holds a NUL. */
static bool index_nul_ahead(const struct index_text *ix, const char *p)
{
	size_t want;

	if (!ix->clean)
		return false;
	want = (size_t)(p - ix->text) + INDEX_WINDOW;
	if (want > ix->len)
		want = ix->len;
	while (*ix->clean < want) {
		size_t n = ix->len - *ix->clean < INDEX_WINDOW ? ix->len - *ix->clean : INDEX_WINDOW;

		if (memchr(ix->text + *ix->clean, '\0', n))
			return true;
		*ix->clean += n;
	}
	return false;
}

static int index_nul_error(const struct index_text *ix, struct fg_err *err)
{
	return fg_err_set(err, FG_EINPUT, "%s: not JSON text (contains a NUL byte)", ix->label);
}

/* Is the whole text JSON by fg_json_parse's rule?  (A meaning error is reported only then.) */
static bool index_json_ok(const struct index_text *ix)
{
	struct fg_jl l;

	fg_jl_init(&l, ix->text, ix->len);
	return fg_jl_skip(&l) && fg_jl_end_plain(&l);
}

static int index_syntax(const struct index_text *ix, struct fg_err *err)
{
	struct fg_jl l;

	fg_jl_init(&l, ix->text, ix->len);
	if (fg_jl_skip(&l))
		fg_jl_end_plain(&l);
	return fg_err_set(err, FG_EINPUT, "%s: invalid JSON near byte %td", ix->label,
			  l.bad ? l.bad - ix->text : (ptrdiff_t)0);
}

/* A meaning error, unless the text is no JSON at all (that wins, as when a tree was parsed first). */
#define INDEX_FAIL(ix, err, ...) \
	(index_json_ok(ix) ? fg_err_set(err, FG_EINPUT, __VA_ARGS__) : index_syntax(ix, err))

/* The first "weight_map" member's value: the cursor is left there.  0, or FG_EINPUT. */
static int index_find_map(const struct index_text *ix, struct fg_jl *l, cJSON **meta, char *scratch,
			  struct fg_err *err)
{
	struct fg_jl_str key;
	const char *map_at = NULL, *meta_at = NULL, *meta_end = NULL;
	bool first = true;

	fg_jl_init(l, ix->text, ix->len);
	if (fg_jl_peek(l) != FG_JL_OBJECT)
		return INDEX_FAIL(ix, err, "%s: no \"weight_map\" object", ix->label);
	if (!fg_jl_begin(l, '{'))
		return index_syntax(ix, err);
	while (fg_jl_more(l, '}', &first)) {
		size_t klen;
		const char *k;
		char *tmp = NULL;

		(void)scratch;
		if (!fg_jl_key(l, &key))
			return index_syntax(ix, err);
		if (key.escaped) {
			if (!(tmp = malloc(key.len + 1)))
				return fg_err_set(err, FG_ENOMEM, "%s: out of memory", ix->label);
			klen = fg_jl_decode(&key, tmp);
			k = tmp;
		} else {
			klen = key.len;
			k = key.raw;
		}
		if (!map_at && klen == 10 && memcmp(k, "weight_map", 10) == 0)
			map_at = l->p;
		else if (meta && !meta_at && klen == 8 && memcmp(k, "metadata", 8) == 0)
			meta_at = l->p;
		free(tmp);
		if (!fg_jl_skip(l))
			return index_syntax(ix, err);
		if (meta_at && !meta_end)
			meta_end = l->tok_end;
	}
	if (l->bad || !fg_jl_end_plain(l))
		return index_syntax(ix, err);
	if (meta) {
		*meta = NULL;
		if (meta_at && fg_json_parse(meta, meta_at, (size_t)(meta_end - meta_at), ix->label, NULL) != 0)
			*meta = NULL;
	}
	if (!map_at)
		return fg_err_set(err, FG_EINPUT, "%s: no \"weight_map\" object", ix->label);
	fg_jl_init(l, map_at, (size_t)(ix->text + ix->len - map_at));
	if (fg_jl_peek(l) != FG_JL_OBJECT)
		return fg_err_set(err, FG_EINPUT, "%s: no \"weight_map\" object", ix->label);
	return 0;
}

/* What a pass over weight_map does. */
enum scan_mode {
	SCAN_FILES = 1,   /* check entries, mark in_index, add the files the index alone names */
	SCAN_COUNT = 2,   /* look each entry up in its file's table: found[], FG_INDEX_MISSING */
};

struct scan {
	struct fg_ckpt *c;
	size_t *cap, *mcap;
	size_t *found;        /* per file (n_files at the start of the pass) */
	const char **cursor;  /* per file: the next name of its header order (st->strings), or NULL */
	size_t n_found;
	int added;            /* SCAN_FILES added a file: a SCAN_COUNT pass must follow its open */
	size_t n_entries;
	char *names;          /* FG_INDEX_MISSING names, copied (c->mismatch_names chain) */
};

/* Copy a missing tensor's name for the mismatch list (it outlives the index text). */
static const char *keep_name(struct fg_ckpt *c, const char *name, size_t len)
{
	/* Each copy is its own block on the blocks list: rare (only mismatches). */
	char *p = malloc(len + 1);

	if (!p || FG_GROW(c->blocks, c->n_blocks + 1, c->cap_blocks)) {
		free(p);
		return NULL;
	}
	memcpy(p, name, len);
	p[len] = '\0';
	c->blocks[c->n_blocks++] = p;
	return p;
}

static bool grow_buf(char **buf, size_t *cap, size_t need)
{
	char *p = realloc(*buf, need);

	if (!p)
		return false;
	*buf = p;
	*cap = need;
	return true;
}

/* The entries of the weight_map object at l's cursor (see scan_index). */
static int scan_entries(struct scan *s, const struct index_text *ix, struct fg_jl *l, int mode, struct fg_err *err)
{
	struct fg_ckpt *c = s->c;
	struct fg_jl_str key, val;
	/* Decoded names are never longer than their text; the buffers grow to the longest seen. */
	size_t kcap = 4096, vcap = 4096;
	char *kbuf = malloc(kcap), *vbuf = malloc(vcap);
	const char *last_raw = NULL, *drop_to = ix->text;
	size_t last_len = 0, last = NO_FILE;
	bool first = true;
	int rc = 0;

	if (!kbuf || !vbuf) {
		rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory", ix->label);
		goto out;
	}
	if (!fg_jl_begin(l, '{')) {
		rc = index_syntax(ix, err);
		goto out;
	}
	s->n_entries = 0;
	while (fg_jl_more(l, '}', &first)) {
		if (index_nul_ahead(ix, l->p)) {
			rc = index_nul_error(ix, err);
			goto out;
		}
		/* What was scanned leaves the resident set: the index is read once, front to back. */
		if (ix->mapped && l->p - drop_to > (1 << 20)) {
			const char *upto = (const char *)((uintptr_t)l->p & ~(uintptr_t)4095);

			madvise((void *)(uintptr_t)drop_to, (size_t)(upto - drop_to), MADV_DONTNEED);
			drop_to = upto;
		}
		const char *kname, *vname, *cur;
		const struct fg_st_file *st;
		const struct fg_tensor *t;
		size_t klen, vlen;

		/*
		 * The entry as a converter writes it: the next name of the file
		 * the entry before named, and the same file name.  Both are
		 * compared as they stand in the text (the header's names came
		 * from keys without escapes, so equal bytes are equal strings);
		 * anything else is read from the same place below.
		 */
		if ((mode & SCAN_COUNT) && last_raw && last != NO_FILE && last < s->n_found && (st = c->files[last].st) &&
		    st->plain_names) {
			const char *p = l->p, *q;

			cur = s->cursor[last] ? s->cursor[last] : st->strings;
			klen = cur < st->strings + st->names_len ? strlen(cur) : 0;
			if (klen && (size_t)(l->end - p) > klen + 1 && p[0] == '"' && p[1 + klen] == '"' &&
			    memcmp(p + 1, cur, klen) == 0) {
				q = p + 2 + klen;
				while (q < l->end && (unsigned char)*q <= 32)
					q++;
				if (q < l->end && *q == ':') {
					for (q++; q < l->end && (unsigned char)*q <= 32; q++)
						;
					if ((size_t)(l->end - q) > last_len + 1 && q[0] == '"' && q[1 + last_len] == '"' &&
					    memcmp(q + 1, last_raw, last_len) == 0) {
						l->p = l->tok_end = q + 2 + last_len;
						fg_jl_ws(l);
						s->n_entries++;
						s->found[last]++;
						s->cursor[last] = cur + klen + 1;
						continue;
					}
				}
			}
		}
		if (!fg_jl_key(l, &key)) {
			rc = index_syntax(ix, err);
			goto out;
		}
		if (key.len >= kcap && !grow_buf(&kbuf, &kcap, key.len + 1)) {
			rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory", ix->label);
			goto out;
		}
		s->n_entries++;
		if (fg_jl_peek(l) != FG_JL_STRING) {
			klen = fg_jl_decode(&key, kbuf);
			rc = INDEX_FAIL(ix, err, "%s: weight_map entry '%.200s' is not a file name", ix->label, kbuf);
			goto out;
		}
		if (!fg_jl_string(l, &val)) {
			rc = index_syntax(ix, err);
			goto out;
		}
		if (val.len >= vcap && !grow_buf(&vbuf, &vcap, val.len + 1)) {
			rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory", ix->label);
			goto out;
		}
		/* The file name: compared raw with the last one, decoded when it changes. */
		if (!last_raw || val.escaped || val.len != last_len || memcmp(val.raw, last_raw, val.len) != 0) {
			vlen = fg_jl_decode(&val, vbuf);
			vname = vbuf;
			if (!fg_fs_confined_relpath(vname)) {
				fg_jl_decode(&key, kbuf);
				rc = INDEX_FAIL(ix, err, "%s: weight_map entry '%.200s' names '%.200s', outside the folder",
						ix->label, kbuf, vname);
				goto out;
			}
			last = find_file_n(c, vname, vlen);
			if (last == NO_FILE && (mode & SCAN_FILES)) {
				int why = file_exists(c, vname, 0), idx;

				fg_jl_decode(&key, kbuf);
				if (why == -ENOENT) {
					rc = INDEX_FAIL(ix, err, "%s: weight_map names '%.200s' (for '%.200s'), which is missing",
							ix->label, vname, kbuf);
					goto out;
				}
				if (why) {
					rc = INDEX_FAIL(ix, err, "%s: weight_map names '%.200s' (for '%.200s'), which %s",
							ix->label, vname, kbuf, fg_fs_open_why(why));
					goto out;
				}
				idx = add_file(c, s->cap, vname, GROUP_INDEX, err);
				if (idx < 0) {
					rc = idx;
					goto out;
				}
				/* A remote folder cannot be listed: what the index names stands for the glob. */
				c->files[idx].globbed = c->pull && fnmatch("model*.safetensors", vname, 0) == 0;
				c->files[idx].seq = s->n_entries;
				last = (size_t)idx;
				s->added = 1;
			}
			if (last != NO_FILE && (mode & SCAN_FILES) && !c->files[last].in_index) {
				c->files[last].in_index = 1;
				if (c->files[last].group != GROUP_GLOB) {
					/* Listed in the order the index first names it, as the index added it before. */
					c->files[last].group = GROUP_INDEX;
					c->files[last].seq = s->n_entries;
				}
			}
			last_raw = val.escaped ? NULL : val.raw;
			last_len = val.len;
		}
		if (!(mode & SCAN_COUNT) || last == NO_FILE || last >= s->n_found || !c->files[last].st)
			continue;
		if (key.escaped) {
			klen = fg_jl_decode(&key, kbuf);
			kname = kbuf;
		} else {
			kname = key.raw;
			klen = key.len;
		}
		/*
		 * The index and the headers list names in the same (sorted) order in
		 * every checkpoint a converter writes, so the entry is first compared
		 * with the next name of its file's header (a walk of that file's
		 * names: sequential memory, no hash); only when that fails is the
		 * name looked up, and the walk resumes after the name found.
		 */
		st = c->files[last].st;
		cur = s->cursor[last] ? s->cursor[last] : st->strings;
		if ((size_t)(st->strings + st->names_len - cur) > klen && cur[klen] == '\0' &&
		    memcmp(cur, kname, klen) == 0) {
			s->found[last]++;
			s->cursor[last] = cur + klen + 1;
		} else if ((t = fg_st_find_n(st, kname, klen, fg_st_name_hash(kname, klen)))) {
			s->found[last]++;
			s->cursor[last] = t->name + klen + 1;
		} else {
			const char *copy = keep_name(c, kname, klen);

			if (!copy || add_mismatch(c, s->mcap, FG_INDEX_MISSING, copy, c->files[last].name) != 0) {
				rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory cross-checking the index", c->source);
				goto out;
			}
		}
	}
	if (l->bad) {
		rc = index_syntax(ix, err);
		goto out;
	}
out:
	free(kbuf);
	free(vbuf);
	return rc;
}


/*
 * One pass over the index: the top-level object's members are skipped but
 * for the first "weight_map", whose entries are handled as they are read
 * (scan_entries), and, on the SCAN_FILES pass, the first "metadata", kept
 * as c->index.
 */
static int scan_index(struct scan *s, const struct index_text *ix, int mode, struct fg_err *err)
{
	struct fg_jl l;
	struct fg_jl_str key;
	const char *meta_at = NULL, *meta_end = NULL;
	bool first = true, seen_map = false, map_ok = false;
	int rc;

	fg_jl_init(&l, ix->text, ix->len);
	if (fg_jl_peek(&l) != FG_JL_OBJECT)
		return INDEX_FAIL(ix, err, "%s: no \"weight_map\" object", ix->label);
	if (!fg_jl_begin(&l, '{'))
		return index_syntax(ix, err);
	while (fg_jl_more(&l, '}', &first)) {
		size_t klen;
		const char *k;
		char *tmp = NULL;

		if (!fg_jl_key(&l, &key))
			return index_syntax(ix, err);
		if (key.escaped) {
			if (!(tmp = malloc(key.len + 1)))
				return fg_err_set(err, FG_ENOMEM, "%s: out of memory", ix->label);
			klen = fg_jl_decode(&key, tmp);
			k = tmp;
		} else {
			klen = key.len;
			k = key.raw;
		}
		if (!seen_map && klen == 10 && memcmp(k, "weight_map", 10) == 0) {
			free(tmp);
			seen_map = true;
			if (fg_jl_peek(&l) == FG_JL_OBJECT) {
				map_ok = true;
				rc = scan_entries(s, ix, &l, mode, err);
				if (rc)
					return rc;
				continue;
			}
		} else if ((mode & SCAN_FILES) && !meta_at && klen == 8 && memcmp(k, "metadata", 8) == 0) {
			free(tmp);
			meta_at = l.p;
			if (!fg_jl_skip(&l))
				return index_syntax(ix, err);
			meta_end = l.tok_end;
			continue;
		} else {
			free(tmp);
		}
		if (!fg_jl_skip(&l))
			return index_syntax(ix, err);
	}
	if (l.bad || !fg_jl_end_plain(&l))
		return index_syntax(ix, err);
	if (!map_ok)
		return fg_err_set(err, FG_EINPUT, "%s: no \"weight_map\" object", ix->label);
	if (meta_at && !s->c->index && fg_json_parse(&s->c->index, meta_at, (size_t)(meta_end - meta_at), ix->label, NULL))
		s->c->index = NULL;
	return 0;
}

/* The first scan of a text: scan_index, then the NUL check of whatever it did not reach, which wins. */
static int scan_first(struct scan *s, const struct index_text *ix, int mode, struct fg_err *err)
{
	int rc = scan_index(s, ix, mode, err);

	if (ix->clean && *ix->clean < ix->len && index_nul_ahead(ix, ix->text + ix->len))
		return index_nul_error(ix, err);
	return rc;
}

/*
 * The second half of the cross-check, paid only on a mismatch: the index's
 * name -> file map (a second scan of its text) tells which tensors of a
 * shard it omits or places in another file.
 */
static int cross_check_tail(struct fg_ckpt *c, const struct index_text *ix, const size_t *found, size_t *mcap,
			    size_t n_entries, struct fg_err *err)
{
	struct name_map idx = { 0, NULL };
	struct fg_jl l;
	struct fg_jl_str key, val;
	char *arena = NULL, *scratch = NULL;
	size_t pos = 0;
	bool first = true;
	int rc = 0;

	if (map_init(&idx, n_entries) != 0 || !(arena = malloc(ix->len + 1)) || !(scratch = malloc(ix->len + 1)))
		goto nomem;
	if (index_find_map(ix, &l, NULL, scratch, err) || !fg_jl_begin(&l, '{'))
		goto nomem; /* scanned fine before: cannot happen */
	while (fg_jl_more(&l, '}', &first)) {
		struct name_slot *e;
		char *k = arena + pos, *v;

		if (!fg_jl_key(&l, &key) || !fg_jl_string(&l, &val))
			break;
		pos += fg_jl_decode(&key, k) + 1;
		v = arena + pos;
		pos += fg_jl_decode(&val, v) + 1;
		e = map_slot(&idx, k);
		if (!e->name) {
			e->name = k;
			e->target = v;
		}
	}
	for (size_t i = 0; i < c->n_files; i++) {
		const struct fg_ckpt_file *f = &c->files[i];

		if (!is_shard(f) || found[i] == f->st->n_tensors)
			continue;
		for (size_t k = 0; k < f->st->n_tensors; k++) {
			const char *name = f->st->tensors[k].name;
			const struct name_slot *e = map_slot(&idx, name);
			enum fg_index_problem p;

			if (e->name && strcmp(e->target, f->name) == 0)
				continue;
			p = e->name ? FG_INDEX_WRONG_FILE : FG_INDEX_UNLISTED;
			if (add_mismatch(c, mcap, p, name, f->name) != 0)
				goto nomem;
		}
	}
	goto out;
nomem:
	rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory cross-checking the index", c->source);
out:
	free(arena);
	free(scratch);
	free(idx.slots);
	return rc;
}

/*
 * Compare the index with the shard headers.  Every index entry is looked up
 * in the file it names (O(1) per entry, as the scan goes); when each shard
 * then has exactly as many entries found as it holds tensors, nothing is
 * unlisted and no map is needed.
 */
static int cross_check(struct fg_ckpt *c, const struct index_text *ix, struct scan *s, struct fg_err *err)
{
	int complete = 1;

	for (size_t i = 0; i < c->n_files; i++)
		if (is_shard(&c->files[i]) && s->found[i] != c->files[i].st->n_tensors)
			complete = 0;
	if (complete)
		return 0;
	return cross_check_tail(c, ix, s->found, s->mcap, s->n_entries, err);
}

/* found[] and cursor[] (zeroed) for every file now known: 0 or FG_ENOMEM with err set. */
static int scan_counts(struct scan *s, struct fg_err *err)
{
	free(s->found);
	free(s->cursor);
	s->n_found = s->c->n_files;
	s->found = calloc(s->n_found ? s->n_found : 1, sizeof(*s->found));
	s->cursor = calloc(s->n_found ? s->n_found : 1, sizeof(*s->cursor));
	if (!s->found || !s->cursor)
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", s->c->source);
	return 0;
}

static void scan_release(struct scan *s)
{
	free(s->found);
	free(s->cursor);
}

/* A pass that counts, for every file now known. */
static int count_pass(struct scan *s, const struct index_text *ix, struct fg_err *err)
{
	int rc = scan_counts(s, err);

	return rc ? rc : scan_index(s, ix, SCAN_COUNT, err);
}

/* Files in discovery order: the glob's (sorted), those the index alone names, then sidecars. */
static int cmp_group(const void *pa, const void *pb)
{
	const struct fg_ckpt_file *a = pa, *b = pb;

	if (a->group != b->group)
		return a->group < b->group ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static void order_files(struct fg_ckpt *c)
{
	const char *side = c->sidecar >= 0 ? c->files[c->sidecar].name : NULL;

	for (size_t i = 0; i < c->n_files; i++)
		if (c->files[i].group == GROUP_GLOB)
			c->files[i].seq = i;
	if (c->n_files)
		qsort(c->files, c->n_files, sizeof(*c->files), cmp_group);
	ft_rebuild(c);
	if (side)
		c->sidecar = (int)find_file(c, side);
}

/*
 * Files are opened by a few threads: parsing a 100,000-tensor checkpoint's
 * headers is most of an inspection's time, and headers are independent.
 * Workers see only the pool's own arrays, never c->files.
 */
#define OPEN_THREADS_MAX FG_CKPT_OPEN_THREADS

struct open_pool {
	size_t n;
	const struct fg_ckpt *c;
	const char **names, **paths;
	struct fg_st_file **st;
	int *rc;
	struct fg_err *errs;
	size_t next;             /* next file to open, taken under lock */
	pthread_mutex_t lock;
	pthread_t tids[OPEN_THREADS_MAX];
	size_t started;
	struct open_worker {
		struct open_pool *p;
		struct fg_st_parse_opts parse; /* the checkpoint's, with this worker's slab */
	} workers[OPEN_THREADS_MAX];
};

/* Open one file beneath the folder and parse its header with opts. */
static int open_one(const struct fg_ckpt *c, const char *name, const char *path, const struct fg_st_parse_opts *opts,
		    struct fg_st_file **st, struct fg_err *err)
{
	int fd, rc = fg_fs_open_beneath(c->dirfd, name, &c->links, &fd);

	if (rc)
		return fg_err_set(err, FG_EINPUT, "%s: cannot open: %s", path, fg_fs_open_why(rc));
	rc = fg_st_open_fd(st, fd, path, opts, err);
	close(fd);
	return rc;
}

static void *open_worker(void *arg)
{
	struct open_worker *w = arg;
	struct open_pool *p = w->p;

	for (;;) {
		size_t i;

		pthread_mutex_lock(&p->lock);
		i = p->next++;
		pthread_mutex_unlock(&p->lock);
		if (i >= p->n)
			return NULL;
		p->rc[i] = open_one(p->c, p->names[i], p->paths[i], &w->parse, &p->st[i], &p->errs[i]);
	}
}

/*
 * Parse options with a new slab of c's (tables and names packed into huge
 * pages, freed with c: fg_st_slab_new): 0, or FG_ENOMEM with err set.
 */
static int slab_opts(struct fg_ckpt *c, struct fg_st_parse_opts *o, struct fg_err *err)
{
	memset(o, 0, sizeof(*o));
	if (c->parse)
		*o = *c->parse;
	if (FG_GROW(c->slabs, c->n_slabs + 1, c->cap_slabs) || !(o->slab = fg_st_slab_new()))
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->source);
	c->slabs[c->n_slabs++] = o->slab;
	return 0;
}

static size_t open_threads(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	return cpus > 1 ? (size_t)cpus : 1;
}

/* Open the headers of files [from, c->n_files) that have none, on a pool; the first failure in files[] order wins. */
static int open_files(struct fg_ckpt *c, size_t from, struct fg_err *err)
{
	struct open_pool p;
	size_t n_threads = open_threads();
	int rc = 0;

	memset(&p, 0, sizeof(p));
	p.c = c;
	p.n = c->n_files - from;
	if (!p.n)
		return 0;
	pthread_mutex_init(&p.lock, NULL);
	p.names = calloc(p.n, sizeof(*p.names));
	p.paths = calloc(p.n, sizeof(*p.paths));
	p.st = calloc(p.n, sizeof(*p.st));
	p.rc = calloc(p.n, sizeof(*p.rc));
	p.errs = calloc(p.n, sizeof(*p.errs));
	if (!p.names || !p.paths || !p.st || !p.rc || !p.errs) {
		rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->source);
		goto out;
	}
	for (size_t i = 0; i < p.n; i++) {
		p.names[i] = c->files[from + i].name;
		p.paths[i] = c->files[from + i].path;
	}
	if (n_threads > OPEN_THREADS_MAX)
		n_threads = OPEN_THREADS_MAX;
	if (n_threads > p.n)
		n_threads = p.n;
	/* One slab per worker: a slab takes one thread at a time. */
	for (size_t i = 0; i < n_threads; i++) {
		p.workers[i].p = &p;
		if ((rc = slab_opts(c, &p.workers[i].parse, err)))
			goto out;
	}
	/* The calling thread is one of the workers. */
	for (size_t i = 1; i < n_threads; i++)
		if (pthread_create(&p.tids[p.started], NULL, open_worker, &p.workers[p.started + 1]) == 0)
			p.started++;
	open_worker(&p.workers[0]);
	for (size_t i = 0; i < p.started; i++)
		pthread_join(p.tids[i], NULL);
	for (size_t i = 0; i < p.n; i++) {
		c->files[from + i].st = p.st[i];
		if (!rc && p.rc[i]) {
			if (err)
				*err = p.errs[i];
			rc = fg_err_prefix(err, p.rc[i], "checkpoint '%s': ", c->source);
		}
	}
out:
	pthread_mutex_destroy(&p.lock);
	free(p.names);
	free(p.paths);
	free(p.st);
	free(p.rc);
	free(p.errs);
	return rc;
}

static int set_location(struct fg_ckpt *c, const char *source, struct fg_err *err)
{
	struct stat st;

	if (stat(source, &st) != 0)
		return fg_err_set(err, FG_EINPUT, "%s: cannot open checkpoint: %s", source, strerror(errno));
	c->source = strdup(source);
	if (!c->source)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	if (S_ISDIR(st.st_mode)) {
		c->dir = strdup(source);
	} else if (S_ISREG(st.st_mode)) {
		const char *slash = strrchr(source, '/');

		c->single_file = 1;
		c->dir = slash ? strndup(source, (size_t)(slash - source) + (slash == source)) : strdup(".");
	} else {
		return fg_err_set(err, FG_EINPUT, "%s: neither a folder nor a file", source);
	}
	if (!c->dir)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	/* The folder itself may be reached through links (the caller confined it); nothing beneath it is. */
	c->dirfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->dirfd < 0)
		return fg_err_set(err, FG_EINPUT, "%s: cannot open the folder: %s", c->dir, strerror(errno));
	return 0;
}

/* config.json beneath the folder: -ENOENT when absent (*found 0), else loaded or an error. */
static int load_config(struct fg_ckpt *c, int *found, struct fg_err *err)
{
	char label[PATH_MAX];
	int fd, rc = fg_fs_open_beneath(c->dirfd, "config.json", &c->links, &fd);

	*found = rc != -ENOENT;
	snprintf(label, sizeof(label), "%s/config.json", c->dir);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return fg_err_set(err, FG_EINPUT, "%s: cannot open: %s", label, fg_fs_open_why(rc));
	rc = fg_json_load_fd(&c->config_raw, fd, label, FG_CKPT_CONFIG_MAX, FG_CKPT_CONFIG_NODES, err);
	close(fd);
	if (rc)
		return rc;
	if (!cJSON_IsObject(c->config_raw))
		return fg_err_set(err, FG_EINPUT, "%s: not a JSON object", label);
	if (merge_text_config(&c->config, c->config_raw) != 0)
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", label);
	return 0;
}

/* The index beneath the folder, mapped (ix->text NULL when there is none). */
static int map_index(struct fg_ckpt *c, struct index_text *ix, char *label, size_t label_len, size_t *clean,
		     struct fg_err *err)
{
	struct stat st;
	int fd, rc = fg_fs_open_beneath(c->dirfd, "model.safetensors.index.json", &c->links, &fd);
	void *m;

	memset(ix, 0, sizeof(*ix));
	snprintf(label, label_len, "%s/model.safetensors.index.json", c->dir);
	ix->label = label;
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return fg_err_set(err, FG_EINPUT, "%s: cannot open: %s", label, fg_fs_open_why(rc));
	if (fstat(fd, &st) != 0) {
		rc = fg_err_set(err, FG_EINPUT, "%s: cannot stat: %s", label, strerror(errno));
		goto out;
	}
	if ((uint64_t)st.st_size > FG_CKPT_JSON_MAX) {
		rc = fg_err_set(err, FG_EINPUT, "%s: %lld bytes exceed the cap of %u", label, (long long)st.st_size,
				FG_CKPT_JSON_MAX);
		goto out;
	}
	if (st.st_size == 0) {
		ix->text = "";
		goto out;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED) {
		rc = fg_err_set(err, FG_EINPUT, "%s: cannot map: %s", label, strerror(errno));
		goto out;
	}
	madvise(m, (size_t)st.st_size, MADV_SEQUENTIAL);
	ix->text = m;
	ix->len = (size_t)st.st_size;
	ix->mapped = 1;
	/* NUL bytes: checked as the first scan goes (scan_first). */
	ix->clean = clean;
	*clean = 0;
out:
	close(fd);
	return rc;
}

static void unmap_index(struct index_text *ix)
{
	if (ix->mapped)
		munmap((void *)(uintptr_t)ix->text, ix->len);
	ix->mapped = 0;
}

static void config_ready(const struct fg_ckpt *c, const struct fg_ckpt_opts *o)
{
	if (o && o->on_config)
		o->on_config(c->config, o->config_ctx);
}

static int open_local(struct fg_ckpt *c, const char *source, const struct fg_ckpt_opts *o, size_t *cap,
		      struct fg_err *err)
{
	struct index_text ix;
	struct scan s;
	char label[PATH_MAX];
	size_t ucap = 0, mcap = 0, clean = 0;
	int rc, has_config;

	memset(&s, 0, sizeof(s));
	memset(&ix, 0, sizeof(ix));
	rc = set_location(c, source, err);
	if (rc)
		return rc;
	rc = load_config(c, &has_config, err);
	if (rc)
		return rc;
	if (!has_config && !c->single_file)
		return fg_err_set(err, FG_EINPUT, "%s: no config.json in the checkpoint folder", source);
	config_ready(c, o);
	if (c->single_file) {
		const char *slash = strrchr(source, '/');
		struct fg_st_parse_opts one;
		int fd;

		rc = add_file(c, cap, slash ? slash + 1 : source, GROUP_GLOB, err);
		if (rc < 0)
			return rc;
		c->files[rc].globbed = fnmatch("model*.safetensors", c->files[rc].name, 0) == 0;
		/* The file the caller named: opened as given (it may be a link the caller resolved). */
		fd = open(source, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		if (fd < 0)
			return fg_err_set(err, FG_EINPUT, "checkpoint '%s': %s: cannot open: %s", source, source,
					  strerror(errno));
		rc = slab_opts(c, &one, err);
		if (!rc)
			rc = fg_st_open_fd(&c->files[0].st, fd, c->files[0].path, &one, err);
		close(fd);
		return rc ? fg_err_prefix(err, rc, "checkpoint '%s': ", c->source) : 0;
	}
	rc = glob_shards(c, cap, &ucap, err);
	if (!rc)
		rc = find_sidecars(c, cap, &ucap, err);
	if (!rc)
		rc = map_index(c, &ix, label, sizeof(label), &clean, err);
	if (rc)
		goto out;
	rc = open_files(c, 0, err);
	if (rc && ix.text) {
		/* An index error comes first, as when the index was read before the shards. */
		struct fg_err ierr = { 0 };
		int irc;

		s.c = c;
		s.cap = cap;
		s.mcap = &mcap;
		irc = scan_first(&s, &ix, SCAN_FILES, &ierr);
		if (irc && err)
			*err = ierr;
		rc = irc ? irc : rc;
		goto out;
	}
	if (rc)
		goto out;
	if (ix.text) {
		size_t before = c->n_files;

		s.c = c;
		s.cap = cap;
		s.mcap = &mcap;
		rc = scan_counts(&s, err);
		if (rc)
			goto out;
		rc = scan_first(&s, &ix, SCAN_FILES | SCAN_COUNT, err);
		if (!rc && s.added) {
			rc = open_files(c, before, err);
			c->n_mismatch = 0;
			if (!rc)
				rc = count_pass(&s, &ix, err);
		}
		if (!rc)
			rc = cross_check(c, &ix, &s, err);
		if (rc)
			goto out;
		if (!c->index && !(c->index = cJSON_CreateObject())) {
			rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory", source);
			goto out;
		}
	}
	order_files(c);
	for (size_t i = 0; i < c->n_files; i++)
		c->files[i].stray = c->index && c->files[i].globbed && !c->files[i].in_index;
	if (c->n_files == 0 && c->n_unreadable == 0)
		rc = fg_err_set(err, FG_EINPUT, "%s: no model*.safetensors shards in the folder", source);
	else if (c->n_files == 0)
		rc = fg_err_set(err, FG_EINPUT, "%s: no readable model*.safetensors shard in the folder: %s %s", source,
				c->unreadable[0].name, c->unreadable[0].why);
out:
	unmap_index(&ix);
	scan_release(&s);
	return rc;
}

/* ---- remote checkpoints ---- */

void fg_ckpt_pull_opts(struct fg_pull_opts *o, const char *cache_dir, const char *const *allow_hosts,
		       size_t n_allow_hosts)
{
	fg_pull_opts_init(o);
	/*
	 * Norms sit megabytes apart in real models: exact ranges cost few extra
	 * requests, while merging across FG_PULL_MERGE_GAP would fetch the
	 * weights between them.
	 */
	o->merge_gap = 0;
	o->user_agent = FG_CKPT_USER_AGENT;
	o->cache_dir = cache_dir;
	o->allow_hosts = allow_hosts;
	o->n_allow_hosts = n_allow_hosts;
	o->max_bytes = FG_CKPT_PULL_MAX_BYTES;
}

const char *fg_ckpt_default_cache_dir(char *buf, size_t len)
{
	const char *env = getenv("FORGED_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int n = -1;

	if (env && *env)
		n = snprintf(buf, len, "%s", env);
	else if (xdg && xdg[0] == '/') /* the XDG base directory spec: a relative path is ignored */
		n = snprintf(buf, len, "%s/forged", xdg);
	else if (home && *home)
		n = snprintf(buf, len, "%s/.cache/forged", home);
	return n > 0 && (size_t)n < len ? buf : NULL;
}

void fg_ckpt_pull_defaults(struct fg_pull_opts *o, char *buf, size_t len)
{
	fg_ckpt_pull_opts(o, fg_ckpt_default_cache_dir(buf, len), NULL, 0);
}

/* config.json of the remote folder; FG_ENOTFOUND when it is not there. */
static int remote_config(struct fg_ckpt *c, struct fg_err *err)
{
	uint8_t *text = NULL;
	size_t len = 0;
	char label[PATH_MAX];
	int rc = fg_pull_get(c->pull, "config.json", &text, &len, FG_CKPT_CONFIG_MAX, err);
	size_t nodes;

	if (rc)
		return rc;
	snprintf(label, sizeof(label), "%s/config.json", c->dir);
	if ((nodes = fg_json_count_nodes((const char *)text, len)) > FG_CKPT_CONFIG_NODES)
		rc = fg_err_set(err, FG_EINPUT, "%s: up to %zu JSON values exceed the cap of %u", label, nodes,
				FG_CKPT_CONFIG_NODES);
	else
		rc = fg_json_parse(&c->config_raw, (const char *)text, len, label, err);
	free(text);
	return rc;
}

/*
 * Every file's header by range requests: first the 8-byte lengths of all
 * files in one parallel call, then all headers in a second one.
 */
static int remote_headers(struct fg_ckpt *c, size_t from, struct fg_err *err)
{
	size_t n = c->n_files - from;
	struct fg_pull_range *r = calloc(n ? n : 1, sizeof(*r));
	int rc = 0;

	if (!r)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		r[i].file = c->files[from + i].name;
		r[i].offset = 0;
		r[i].len = 8;
	}
	rc = fg_pull_ranges(c->pull, r, n, err);
	for (size_t i = 0; !rc && i < n; i++) {
		uint64_t size = 0, hlen = 0;

		rc = fg_pull_size(c->pull, c->files[from + i].name, &size, err);
		for (int b = 7; !rc && b >= 0; b--)
			hlen = (hlen << 8) | r[i].data[b];
		if (!rc && (hlen > FG_ST_HEADER_MAX || hlen > size - 8))
			rc = fg_err_set(err, FG_EINPUT, "%s: header length is over the cap or past the end of the file",
					c->files[from + i].path);
		r[i].len = 8 + hlen;
		r[i].data = NULL;
	}
	if (!rc)
		rc = fg_pull_ranges(c->pull, r, n, err);
	for (size_t i = 0; !rc && i < n; i++) {
		uint64_t size = 0;

		rc = fg_pull_size(c->pull, c->files[from + i].name, &size, err);
		if (!rc)
			rc = fg_st_parse_header(&c->files[from + i].st, r[i].data, (size_t)r[i].len, size,
						c->files[from + i].path, err);
		if (!rc && c->parse && c->parse->classify) {
			struct fg_st_file *st = c->files[from + i].st;

			for (size_t k = 0; k < st->n_tensors; k++)
				c->parse->classify(&st->tensors[k], strlen(st->tensors[k].name), c->parse->ctx);
		}
	}
	free(r);
	if (rc == FG_ENOTFOUND)
		rc = FG_EINPUT; /* a file the index or config names is missing: malformed */
	return rc ? fg_err_prefix(err, rc, "checkpoint '%s': ", c->source) : 0;
}

static int open_remote(struct fg_ckpt *c, const char *source, const struct fg_pull_opts *o,
		       const struct fg_ckpt_opts *co, size_t *cap, struct fg_err *err)
{
	const char *single;
	size_t n, ucap = 0, mcap = 0;
	uint8_t *text = NULL;
	int rc;

	rc = fg_pull_open(&c->pull, source, o, err);
	if (rc)
		return rc;
	c->source = strdup(source);
	c->dir = strdup(fg_pull_base_url(c->pull));
	if (!c->source || !c->dir)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	n = strlen(c->dir);
	if (n > 1 && c->dir[n - 1] == '/')
		c->dir[n - 1] = '\0';
	single = fg_pull_source_file(c->pull);
	c->single_file = single != NULL;
	rc = remote_config(c, err);
	if (rc == FG_ENOTFOUND && single)
		rc = 0;
	else if (rc == FG_ENOTFOUND)
		return fg_err_set(err, FG_EINPUT, "%s: no config.json in the checkpoint folder", source);
	if (rc)
		return rc;
	if (c->config_raw && !cJSON_IsObject(c->config_raw))
		return fg_err_set(err, FG_EINPUT, "%s/config.json: not a JSON object", c->dir);
	if (c->config_raw && merge_text_config(&c->config, c->config_raw) != 0)
		return fg_err_set(err, FG_ENOMEM, "%s/config.json: out of memory", c->dir);
	config_ready(c, co);
	if (single) {
		rc = add_file(c, cap, single, GROUP_GLOB, err);
		if (rc < 0)
			return rc;
		c->files[rc].globbed = fnmatch("model*.safetensors", single, 0) == 0;
		return remote_headers(c, 0, err);
	}
	n = 0;
	rc = fg_pull_get(c->pull, "model.safetensors.index.json", &text, &n, FG_CKPT_JSON_MAX, err);
	if (rc == FG_ENOTFOUND) {
		/* No index: a single-shard model, as the Hugging Face tools assume. */
		rc = add_file(c, cap, "model.safetensors", GROUP_GLOB, err);
		if (rc < 0)
			return rc;
		c->files[rc].globbed = 1;
		rc = find_sidecars(c, cap, &ucap, err);
		if (!rc)
			rc = remote_headers(c, 0, err);
		return rc;
	}
	if (!rc) {
		char label[PATH_MAX];
		struct index_text ix = { (const char *)text, n, label, 0, NULL }; /* checked whole below */
		struct scan s;

		memset(&s, 0, sizeof(s));
		s.c = c;
		s.cap = cap;
		s.mcap = &mcap;
		snprintf(label, sizeof(label), "%s/model.safetensors.index.json", c->dir);
		if (memchr(text, '\0', n))
			rc = fg_err_set(err, FG_EINPUT, "%s: not JSON text (contains a NUL byte)", label);
		if (!rc)
			rc = scan_index(&s, &ix, SCAN_FILES, err);
		if (!rc)
			rc = find_sidecars(c, cap, &ucap, err);
		if (!rc)
			rc = remote_headers(c, 0, err);
		if (!rc)
			rc = count_pass(&s, &ix, err);
		if (!rc)
			rc = cross_check(c, &ix, &s, err);
		if (!rc && !c->index && !(c->index = cJSON_CreateObject()))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		scan_release(&s);
		if (!rc)
			order_files(c);
	}
	free(text);
	return rc;
}

/* ---- reading tensor bytes ---- */

/* Which file holds tensor t: files sorted by their tensor arrays' addresses, searched. */
struct owner {
	const struct fg_tensor *lo, *hi;
	size_t file;
};

static int cmp_owner(const void *pa, const void *pb)
{
	const struct owner *a = pa, *b = pb;

	return a->lo < b->lo ? -1 : a->lo > b->lo;
}

static struct owner *owners(const struct fg_ckpt *c)
{
	struct owner *o = calloc(c->n_files ? c->n_files : 1, sizeof(*o));

	if (!o)
		return NULL;
	for (size_t i = 0; i < c->n_files; i++) {
		o[i].lo = c->files[i].st->tensors;
		o[i].hi = c->files[i].st->tensors + c->files[i].st->n_tensors;
		o[i].file = i;
	}
	qsort(o, c->n_files, sizeof(*o), cmp_owner);
	return o;
}

static size_t owner_of(const struct owner *o, size_t n, const struct fg_tensor *t)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t < o[mid].lo)
			hi = mid;
		else if (t >= o[mid].hi)
			lo = mid + 1;
		else
			return o[mid].file;
	}
	return NO_FILE;
}

struct want {
	size_t file;
	const struct fg_tensor *t;
};

static int cmp_want(const void *pa, const void *pb)
{
	const struct want *a = pa, *b = pb;

	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	return a->t->begin < b->t->begin ? -1 : a->t->begin > b->t->begin;
}

/* The wanted tensors (not yet read, not empty) with their files, grouped by file.  *n in/out. */
static struct want *wants(const struct fg_ckpt *c, const struct fg_tensor *const *tensors, size_t *n,
			  struct fg_err *err)
{
	struct owner *o = owners(c);
	struct want *w = calloc(*n ? *n : 1, sizeof(*w));
	size_t m = 0;

	if (!o || !w) {
		free(o);
		free(w);
		fg_err_set(err, FG_ENOMEM, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < *n; i++) {
		size_t f;

		if (tensors[i]->data || !fg_tensor_bytes(tensors[i]))
			continue;
		f = owner_of(o, c->n_files, tensors[i]);
		if (f == NO_FILE)
			continue;
		w[m].file = f;
		w[m++].t = tensors[i];
	}
	free(o);
	qsort(w, m, sizeof(*w), cmp_want);
	*n = m;
	return w;
}

static int reopen(const struct fg_ckpt *c, const struct fg_ckpt_file *f, int *fd, struct fg_err *err)
{
	int rc;

	if (c->single_file)
		*fd = open(c->source, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), rc = *fd < 0 ? -errno : 0;
	else
		rc = fg_fs_open_beneath(c->dirfd, f->name, &c->links, fd);
	if (rc)
		return fg_err_set(err, FG_EINPUT, "%s: cannot open: %s", f->path, fg_fs_open_why(rc));
	rc = fg_st_check_same(f->st, *fd, err);
	if (rc)
		close(*fd);
	return rc;
}

static int pread_all(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t got = pread(fd, buf, len, (off_t)off);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : -EIO;
		buf += got;
		len -= (size_t)got;
		off += (uint64_t)got;
	}
	return 0;
}

/* Local fetch: the tensors of one file read into one block c owns, the file checked before and after. */
static int fetch_file(struct fg_ckpt *c, const struct want *w, size_t n, struct fg_err *err)
{
	const struct fg_ckpt_file *f = &c->files[w[0].file];
	uint64_t total = 0, at = 0;
	uint8_t *block;
	int fd, rc;

	for (size_t i = 0; i < n; i++)
		total += fg_tensor_bytes(w[i].t);
	if (total > SIZE_MAX || FG_GROW(c->blocks, c->n_blocks + 1, c->cap_blocks) ||
	    !(block = malloc((size_t)total)))
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory for %llu bytes of tensors", f->path,
				  (unsigned long long)total);
	c->blocks[c->n_blocks++] = block;
	rc = reopen(c, f, &fd, err);
	if (rc)
		return rc;
	for (size_t i = 0; !rc && i < n; i++) {
		uint64_t len = fg_tensor_bytes(w[i].t);

		rc = pread_all(fd, block + at, (size_t)len, f->st->data_start + w[i].t->begin);
		if (rc)
			rc = fg_err_set(err, FG_EINPUT, "%s: tensor '%s': %s", f->path, w[i].t->name,
					rc == -EIO ? "the file is shorter than its header says (changed while it was read)"
						   : strerror(-rc));
		at += len;
	}
	if (!rc)
		rc = fg_st_check_same(f->st, fd, err); /* the same file after the reads: size and mtime */
	close(fd);
	at = 0;
	/* c owns its tensors: setting a view's data is its own business (see checkpoint.h). */
	for (size_t i = 0; !rc && i < n; i++) {
		((struct fg_tensor *)(uintptr_t)w[i].t)->data = block + at;
		at += fg_tensor_bytes(w[i].t);
	}
	return rc;
}

static int fetch_remote(struct fg_ckpt *c, const struct want *w, size_t m, struct fg_err *err)
{
	struct fg_pull_range *r = calloc(m ? m : 1, sizeof(*r));
	int rc;

	if (!r)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (size_t k = 0; k < m; k++) {
		const struct fg_st_file *st = c->files[w[k].file].st;

		r[k].file = c->files[w[k].file].name;
		r[k].offset = st->data_start + w[k].t->begin;
		r[k].len = fg_tensor_bytes(w[k].t);
	}
	rc = fg_pull_ranges(c->pull, r, m, err);
	for (size_t k = 0; !rc && k < m; k++)
		((struct fg_tensor *)(uintptr_t)w[k].t)->data = r[k].data;
	free(r);
	return rc;
}

int fg_ckpt_fetch(struct fg_ckpt *c, const struct fg_tensor *const *tensors, size_t n, struct fg_err *err)
{
	struct want *w;
	int rc = 0;

	if (!n)
		return 0;
	if (!(w = wants(c, tensors, &n, err)))
		return FG_ENOMEM;
	if (c->pull) {
		rc = fetch_remote(c, w, n, err);
	} else {
		for (size_t i = 0; !rc && i < n; ) {
			size_t j = i;

			while (j < n && w[j].file == w[i].file)
				j++;
			rc = fetch_file(c, w + i, j - i, err);
			i = j;
		}
	}
	free(w);
	return rc;
}

int fg_ckpt_map(struct fg_ckpt *c, const struct fg_tensor *const *tensors, size_t n, struct fg_err *err)
{
	struct want *w;
	int rc = 0;

	if (c->pull)
		return fg_ckpt_fetch(c, tensors, n, err);
	if (!n)
		return 0;
	if (!(w = wants(c, tensors, &n, err)))
		return FG_ENOMEM;
	/* Mapped only: the streaming reader asks for read-ahead a step at a time (checkpoint.h). */
	for (size_t i = 0; !rc && i < n; i++) {
		struct fg_ckpt_file *f = &c->files[w[i].file];

		if (!f->st->map) {
			int fd;

			rc = reopen(c, f, &fd, err);
			if (rc)
				break;
			rc = fg_st_map(f->st, fd, err);
			close(fd);
		}
	}
	free(w);
	return rc;
}

int fg_ckpt_open_file(const struct fg_ckpt *c, const char *name, int *fd)
{
	if (c->dirfd < 0)
		return -EBADF;
	return fg_fs_open_beneath(c->dirfd, name, &c->links, fd);
}

int fg_ckpt_reopen(const struct fg_ckpt *c, size_t idx, int *fd, struct fg_err *err)
{
	if (c->pull || idx >= c->n_files)
		return fg_err_set(err, FG_EINTERNAL, "%s: no local file %zu to open", c->source, idx);
	return reopen(c, &c->files[idx], fd, err);
}

int fg_ckpt_map_file(struct fg_ckpt *c, size_t idx, struct fg_err *err)
{
	struct fg_ckpt_file *f = &c->files[idx];
	int fd, rc;

	if (c->pull || f->st->map)
		return 0;
	rc = reopen(c, f, &fd, err);
	if (rc)
		return rc;
	rc = fg_st_map(f->st, fd, err);
	close(fd);
	return rc;
}

int fg_ckpt_peek(struct fg_ckpt *c, const struct fg_tensor *t, uint8_t *buf, size_t len, size_t *got,
		 struct fg_err *err)
{
	struct owner *o;
	size_t f;
	int fd, rc;

	*got = fg_tensor_bytes(t) < len ? (size_t)fg_tensor_bytes(t) : len;
	if (t->data || !*got) {
		if (*got)
			memcpy(buf, t->data, *got);
		return 0;
	}
	if (c->pull) {
		*got = 0;
		return FG_ENOTFOUND;
	}
	if (!(o = owners(c)))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	f = owner_of(o, c->n_files, t);
	free(o);
	if (f == NO_FILE)
		return fg_err_set(err, FG_EINTERNAL, "tensor '%s' is not one of the checkpoint's", t->name);
	rc = reopen(c, &c->files[f], &fd, err);
	if (rc)
		return rc;
	rc = pread_all(fd, buf, *got, c->files[f].st->data_start + t->begin);
	if (rc)
		rc = fg_err_set(err, FG_EINPUT, "%s: tensor '%s': %s", c->files[f].path, t->name,
				rc == -EIO ? "the file is shorter than its header says" : strerror(-rc));
	if (!rc)
		rc = fg_st_check_same(c->files[f].st, fd, err);
	close(fd);
	return rc;
}

/* ---- opening ---- */

int fg_ckpt_open(struct fg_ckpt **out, const char *source, struct fg_err *err)
{
	return fg_ckpt_open_with(out, source, NULL, err);
}

int fg_ckpt_open_opts(struct fg_ckpt **out, const char *source, const struct fg_pull_opts *pull,
		      struct fg_err *err)
{
	struct fg_ckpt_opts o;

	memset(&o, 0, sizeof(o));
	o.pull = pull;
	return fg_ckpt_open_with(out, source, &o, err);
}

int fg_ckpt_open_with(struct fg_ckpt **out, const char *source, const struct fg_ckpt_opts *o, struct fg_err *err)
{
	struct fg_ckpt *c = calloc(1, sizeof(*c));
	size_t cap = 0;
	int rc;

	if (!c)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	c->sidecar = -1;
	c->dirfd = -1;
	if (o) {
		c->links = o->links;
		c->parse = o->parse;
	}
	if (fg_pull_is_url(source)) {
		struct fg_pull_opts defaults;
		char cache[PATH_MAX];
		const struct fg_pull_opts *pull = o ? o->pull : NULL;

		if (!pull) {
			fg_ckpt_pull_defaults(&defaults, cache, sizeof(cache));
			pull = &defaults;
		}
		rc = open_remote(c, source, pull, o, &cap, err);
	} else {
		rc = open_local(c, source, o, &cap, err);
	}
	c->parse = NULL;
	if (rc) {
		fg_ckpt_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void fg_ckpt_free(struct fg_ckpt *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_files; i++) {
		fg_st_close(c->files[i].st);
		free(c->files[i].name);
		free(c->files[i].path);
	}
	for (size_t i = 0; i < c->n_slabs; i++) /* after the files: their tables and names live there */
		fg_st_slab_free(c->slabs[i]);
	free(c->slabs);
	for (size_t i = 0; i < c->n_unreadable; i++)
		free(c->unreadable[i].name);
	for (size_t i = 0; i < c->n_blocks; i++)
		free(c->blocks[i]);
	free(c->blocks);
	free(c->unreadable);
	free(c->files);
	free(c->mismatch);
	if (c->fileidx)
		free(((struct file_table *)c->fileidx)->slots);
	free(c->fileidx);
	fg_pull_close(c->pull); /* after the files: their views point into it */
	cJSON_Delete(c->config);  /* references into config_raw: first */
	cJSON_Delete(c->config_raw);
	cJSON_Delete(c->index);
	if (c->dirfd >= 0)
		close(c->dirfd);
	free(c->source);
	free(c->dir);
	free(c);
}

const struct fg_tensor *fg_ckpt_find(const struct fg_ckpt *c, const char *name,
				     const struct fg_ckpt_file **file)
{
	size_t len = strlen(name);
	uint32_t h = fg_st_name_hash(name, len);

	/* Each shard's own table answers in O(1); checkpoints have tens of shards. */
	for (size_t i = 0; i < c->n_files; i++) {
		const struct fg_tensor *t;

		if (!is_shard(&c->files[i]))
			continue;
		t = fg_st_find_n(c->files[i].st, name, len, h);
		if (t) {
			if (file)
				*file = &c->files[i];
			return t;
		}
	}
	return NULL;
}

const char *fg_ckpt_model_type(const struct fg_ckpt *c)
{
	const cJSON *mt = cJSON_GetObjectItemCaseSensitive(c->config_raw, "model_type");

	return cJSON_IsString(mt) ? mt->valuestring : NULL;
}

const char *fg_ckpt_text_model_type(const struct fg_ckpt *c)
{
	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(c->config_raw, "text_config");
	const cJSON *mt = cJSON_GetObjectItemCaseSensitive(tc, "model_type");

	return cJSON_IsString(mt) ? mt->valuestring : NULL;
}

size_t fg_ckpt_stray_count(const struct fg_ckpt *c)
{
	size_t n = 0;

	for (size_t i = 0; i < c->n_files; i++)
		n += (size_t)c->files[i].stray;
	return n;
}
