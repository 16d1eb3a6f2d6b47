/*
 * checkpoint.c: opens a checkpoint folder the way each consumer would and
 * records where their views disagree (see checkpoint.h).
 *
 * Shards are found two ways and both are kept: the folder glob mlx-lm uses and
 * the index's weight_map.  A shard the glob finds but the index omits is a
 * stray (mlx-lm loads it anyway: MTPLX issue 306's embedded head survived a
 * pruned index this way).  A tensor -> file table over the shards answers
 * lookups in O(1) for checkpoints of 100,000+ tensors.
 */
#include "forge/source/checkpoint.h"

#include "forge/core/str.h"
#include "forge/core/grow.h"
#include "forge/core/json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const sidecar_candidates[] = {
	"mtp.safetensors", "mtp/weights.safetensors", "model-mtp.safetensors",
};

/* ---- tensor name -> file index ---- */

struct name_slot {
	const char *name;
	size_t file;          /* the shard holding it */
	const char *target;   /* in the index map: the file the index names */
};

struct name_map {
	size_t n_slots, used;
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
	m->used = 0;
	return m->slots ? 0 : -1;
}

/* Insert name unless present; returns the slot either way. */
static struct name_slot *map_put(struct name_map *m, const char *name, size_t file,
				  const char *target)
{
	struct name_slot *s = map_slot(m, name);

	if (!s->name) {
		s->name = name;
		s->file = file;
		s->target = target;
		m->used++;
	}
	return s;
}

static void map_release(struct name_map *m)
{
	if (m)
		free(m->slots);
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

static int is_regular(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* config with text_config's keys (but model_type) copied over the top level. */
static int merge_text_config(cJSON **out, const cJSON *raw)
{
	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(raw, "text_config");
	const cJSON *kv;
	cJSON *merged = cJSON_Duplicate(raw, 1);

	if (!merged)
		return FG_ENOMEM;
	if (cJSON_IsObject(tc)) {
		cJSON_ArrayForEach(kv, tc) {
			cJSON *copy;

			if (strcmp(kv->string, "model_type") == 0)
				continue;
			copy = cJSON_Duplicate(kv, 1);
			if (!copy) {
				cJSON_Delete(merged);
				return FG_ENOMEM;
			}
			if (cJSON_GetObjectItemCaseSensitive(merged, kv->string))
				cJSON_ReplaceItemInObjectCaseSensitive(merged, kv->string, copy);
			else
				cJSON_AddItemToObject(merged, kv->string, copy);
		}
	}
	*out = merged;
	return 0;
}

static int add_file(struct fg_ckpt *c, size_t *cap, const char *name, struct fg_err *err)
{
	struct fg_ckpt_file *f;

	for (size_t i = 0; i < c->n_files; i++)
		if (strcmp(c->files[i].name, name) == 0)
			return (int)i;
	if (c->n_files == FG_CKPT_MAX_FILES)
		return fg_err_set(err, FG_EINPUT, "%s: more than %u safetensors files",
				  c->source, FG_CKPT_MAX_FILES);
	if (FG_GROW(c->files, c->n_files + 1, *cap))
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->source);
	f = &c->files[c->n_files];
	memset(f, 0, sizeof(*f));
	f->name = strdup(name);
	f->path = c->single_file ? strdup(c->source) : path_join(c->dir, name);
	if (!f->name || !f->path) {
		free(f->name);
		free(f->path);
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->source);
	}
	return (int)c->n_files++;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every model*.safetensors in the folder, sorted, as mlx-lm's glob sees them. */
static int glob_shards(struct fg_ckpt *c, size_t *cap, struct fg_err *err)
{
	DIR *d = opendir(c->dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, ncap = 0;
	int rc = 0;

	if (!d)
		return fg_err_set(err, FG_EINPUT, "%s: cannot list the folder: %s", c->dir, strerror(errno));
	while ((de = readdir(d))) {
		char *full;
		int reg;

		if (fnmatch("model*.safetensors", de->d_name, 0) != 0)
			continue;
		full = path_join(c->dir, de->d_name);
		reg = full && is_regular(full);
		free(full);
		if (!reg)
			continue;
		if (FG_GROW(names, n + 1, ncap)) {
			rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->dir);
			goto out;
		}
		if (!(names[n] = strdup(de->d_name))) {
			rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->dir);
			goto out;
		}
		n++;
	}
	qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		rc = add_file(c, cap, names[i], err);
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

/* A relative path inside the folder: no absolute path, no "..", no empty part. */
static int confined_relpath(const char *p)
{
	const char *s = p;

	if (!*p || *p == '/')
		return 0;
	while (*s) {
		size_t len = strcspn(s, "/");

		if (len == 0 || (len == 2 && s[0] == '.' && s[1] == '.'))
			return 0;
		s += len;
		if (*s == '/')
			s++;
	}
	return 1;
}

/* The index of the file called name in c->files, or NO_FILE. */
#define NO_FILE SIZE_MAX

static size_t find_file(const struct fg_ckpt *c, const char *name)
{
	for (size_t i = 0; i < c->n_files; i++)
		if (strcmp(c->files[i].name, name) == 0)
			return i;
	return NO_FILE;
}

/*
 * Does the folder hold file name?  A remote folder cannot be listed: with
 * probe, one small request asks (optional sidecars); without, the header fetch
 * will tell (files the index names).
 */
static int file_exists(const struct fg_ckpt *c, const char *name, int probe)
{
	struct fg_err ignored = { 0 };
	uint64_t size;
	char *path;
	int exists;

	if (c->pull)
		return !probe || fg_pull_size(c->pull, name, &size, &ignored) == 0;
	path = path_join(c->dir, name);
	exists = path && is_regular(path);
	free(path);
	return exists;
}

/* Record the files the index's weight_map names; label names the index in errors. */
static int process_index(struct fg_ckpt *c, size_t *cap, const char *label, struct fg_err *err)
{
	const cJSON *wm = cJSON_GetObjectItemCaseSensitive(c->index, "weight_map"), *kv;
	size_t last = NO_FILE;

	if (!cJSON_IsObject(wm))
		return fg_err_set(err, FG_EINPUT, "%s: no \"weight_map\" object", label);
	cJSON_ArrayForEach(kv, wm) {
		int idx;

		if (!cJSON_IsString(kv))
			return fg_err_set(err, FG_EINPUT, "%s: weight_map entry '%.200s' is not a file name",
					  label, kv->string);
		if (!confined_relpath(kv->valuestring))
			return fg_err_set(err, FG_EINPUT, "%s: weight_map entry '%.200s' names '%.200s', outside the folder",
					  label, kv->string, kv->valuestring);
		/* Index entries repeat a few file names: check each name once. */
		if (last != NO_FILE && strcmp(c->files[last].name, kv->valuestring) == 0)
			continue;
		last = find_file(c, kv->valuestring);
		if (last != NO_FILE) {
			c->files[last].in_index = 1;
			continue;
		}
		if (!file_exists(c, kv->valuestring, 0))
			return fg_err_set(err, FG_EINPUT, "%s: weight_map names '%.200s' (for '%.200s'), which is missing",
					  label, kv->valuestring, kv->string);
		idx = add_file(c, cap, kv->valuestring, err);
		if (idx < 0)
			return idx;
		c->files[idx].in_index = 1;
		/* A remote folder cannot be listed: what the index names stands for the glob. */
		c->files[idx].globbed = c->pull && fnmatch("model*.safetensors", kv->valuestring, 0) == 0;
		last = (size_t)idx;
	}
	return 0;
}

static int load_index(struct fg_ckpt *c, size_t *cap, struct fg_err *err)
{
	char *path = path_join(c->dir, "model.safetensors.index.json");
	int rc = 0;

	if (!path)
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->dir);
	if (access(path, F_OK) == 0) {
		rc = fg_json_load(&c->index, path, FG_CKPT_JSON_MAX, err);
		if (!rc)
			rc = process_index(c, cap, path, err);
	}
	free(path);
	return rc;
}

/* The sidecar pointer of config.json, then the conventional names. */
static int find_sidecars(struct fg_ckpt *c, size_t *cap, struct fg_err *err)
{
	const cJSON *extra = cJSON_GetObjectItemCaseSensitive(c->config_raw, "mlx_lm_extra_tensors");
	const cJSON *ptr = cJSON_GetObjectItemCaseSensitive(extra, "mtp_file");
	int idx;

	if (ptr) {
		if (!cJSON_IsString(ptr) || !confined_relpath(ptr->valuestring))
			return fg_err_set(err, FG_EINPUT,
					  "%s/config.json: mlx_lm_extra_tensors.mtp_file is not a relative path inside the folder",
					  c->dir);
		if (!file_exists(c, ptr->valuestring, 1))
			return fg_err_set(err, FG_EINPUT,
					  "%s/config.json: mlx_lm_extra_tensors.mtp_file names '%.200s', which is missing",
					  c->dir, ptr->valuestring);
		idx = add_file(c, cap, ptr->valuestring, err);
		if (idx < 0)
			return idx;
		c->files[idx].sidecar = 1;
		c->sidecar = idx;
	}
	for (size_t i = 0; i < sizeof(sidecar_candidates) / sizeof(*sidecar_candidates); i++) {
		if (find_file(c, sidecar_candidates[i]) == NO_FILE && !file_exists(c, sidecar_candidates[i], 1))
			continue;
		idx = add_file(c, cap, sidecar_candidates[i], err);
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

/*
 * Compare the index with the shard headers.  Every index entry is looked up
 * in the file it names (O(1) per entry); when each shard then has exactly as
 * many index entries found as it holds tensors, nothing is unlisted and no
 * second table is needed.  Only a mismatch pays for the name -> file table
 * that tells which tensors the index omits or misplaces.
 */
static int cross_check(struct fg_ckpt *c, struct fg_err *err)
{
	struct name_map idx = { 0, 0, NULL };
	const cJSON *wm = c->index ? cJSON_GetObjectItemCaseSensitive(c->index, "weight_map") : NULL;
	size_t *found = NULL, mcap = 0;
	const cJSON *kv;
	size_t last = NO_FILE;
	int rc = 0, complete = 1;

	if (!wm)
		return 0;
	found = calloc(c->n_files ? c->n_files : 1, sizeof(*found));
	if (!found)
		goto nomem;
	cJSON_ArrayForEach(kv, wm) {
		if (last == NO_FILE || strcmp(c->files[last].name, kv->valuestring) != 0)
			last = find_file(c, kv->valuestring);
		if (last == NO_FILE)
			continue;
		if (fg_st_find(c->files[last].st, kv->string))
			found[last]++;
		else if (add_mismatch(c, &mcap, FG_INDEX_MISSING, kv->string, c->files[last].name) != 0)
			goto nomem;
	}
	for (size_t i = 0; i < c->n_files; i++)
		if (is_shard(&c->files[i]) && found[i] != c->files[i].st->n_tensors)
			complete = 0;
	if (complete)
		goto out;
	if (map_init(&idx, (size_t)cJSON_GetArraySize(wm)) != 0)
		goto nomem;
	cJSON_ArrayForEach(kv, wm)
		map_put(&idx, kv->string, 0, kv->valuestring);
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
			if (add_mismatch(c, &mcap, p, name, f->name) != 0)
				goto nomem;
		}
	}
	goto out;
nomem:
	rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory cross-checking the index", c->source);
out:
	free(found);
	map_release(&idx);
	return rc;
}

/*
 * Files are opened by a few threads: parsing a 100,000-tensor checkpoint's
 * headers is most of an inspection's time, and headers are independent.  The
 * globbed shards start opening while the calling thread parses the index.
 * Workers see only the pool's own arrays, never c->files, which the index
 * may grow meanwhile.
 */
#define OPEN_THREADS_MAX FG_CKPT_OPEN_THREADS

struct open_pool {
	size_t n;
	const char **paths;
	struct fg_st_file **st;
	int *rc;
	struct fg_err *errs;
	size_t next;             /* next file to open, taken under lock */
	pthread_mutex_t lock;
	pthread_t tids[OPEN_THREADS_MAX];
	size_t started;
};

static void *open_worker(void *arg)
{
	struct open_pool *p = arg;

	for (;;) {
		size_t i;

		pthread_mutex_lock(&p->lock);
		i = p->next++;
		pthread_mutex_unlock(&p->lock);
		if (i >= p->n)
			return NULL;
		p->rc[i] = fg_st_open(&p->st[i], p->paths[i], &p->errs[i]);
	}
}

/* Start opening files [from, c->n_files) on n_threads threads. */
static int pool_start(struct open_pool *p, const struct fg_ckpt *c, size_t from, size_t n_threads)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	p->n = c->n_files - from;
	p->paths = calloc(p->n ? p->n : 1, sizeof(*p->paths));
	p->st = calloc(p->n ? p->n : 1, sizeof(*p->st));
	p->rc = calloc(p->n ? p->n : 1, sizeof(*p->rc));
	p->errs = calloc(p->n ? p->n : 1, sizeof(*p->errs));
	if (!p->paths || !p->st || !p->rc || !p->errs)
		return FG_ENOMEM;
	for (size_t i = 0; i < p->n; i++)
		p->paths[i] = c->files[from + i].path;
	if (n_threads > OPEN_THREADS_MAX)
		n_threads = OPEN_THREADS_MAX;
	if (n_threads > p->n)
		n_threads = p->n;
	for (size_t i = 0; i < n_threads; i++)
		if (pthread_create(&p->tids[p->started], NULL, open_worker, p) == 0)
			p->started++;
	return 0;
}

/* Wait for the pool (helping it), hand its files to c from index from, free it. */
static int pool_finish(struct open_pool *p, struct fg_ckpt *c, size_t from, int rc, struct fg_err *err)
{
	if (p->paths && p->st && p->rc && p->errs)
		open_worker(p);
	for (size_t i = 0; i < p->started; i++)
		pthread_join(p->tids[i], NULL);
	pthread_mutex_destroy(&p->lock);
	if (!p->paths || !p->st || !p->rc || !p->errs)
		rc = rc ? rc : fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->source);
	for (size_t i = 0; p->st && i < p->n; i++) {
		c->files[from + i].st = p->st[i];
		/* Report the first failing file in files[] order, as a serial open would. */
		if (!rc && p->rc[i]) {
			if (err)
				*err = p->errs[i];
			rc = fg_err_prefix(err, p->rc[i], "checkpoint '%s': ", c->source);
		}
	}
	free(p->paths);
	free(p->st);
	free(p->rc);
	free(p->errs);
	return rc;
}

static size_t open_threads(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	return cpus > 1 ? (size_t)cpus : 1;
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
	return c->dir ? 0 : fg_err_set(err, FG_ENOMEM, "out of memory");
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

/* A small JSON file of the remote folder; FG_ENOTFOUND when it is not there. */
static int remote_json(struct fg_ckpt *c, const char *name, cJSON **out, struct fg_err *err)
{
	uint8_t *text = NULL;
	size_t len = 0;
	char label[PATH_MAX];
	int rc = fg_pull_get(c->pull, name, &text, &len, FG_CKPT_JSON_MAX, err);

	if (rc)
		return rc;
	snprintf(label, sizeof(label), "%s/%s", c->dir, name);
	rc = fg_json_parse(out, (const char *)text, len, label, err);
	free(text);
	return rc;
}

/*
 * Every file's header by range requests: first the 8-byte lengths of all
 * files in one parallel call, then all headers in a second one.
 */
static int remote_headers(struct fg_ckpt *c, struct fg_err *err)
{
	struct fg_pull_range *r = calloc(c->n_files ? c->n_files : 1, sizeof(*r));
	int rc = 0;

	if (!r)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (size_t i = 0; i < c->n_files; i++) {
		r[i].file = c->files[i].name;
		r[i].offset = 0;
		r[i].len = 8;
	}
	rc = fg_pull_ranges(c->pull, r, c->n_files, err);
	for (size_t i = 0; !rc && i < c->n_files; i++) {
		uint64_t size = 0, hlen = 0;

		rc = fg_pull_size(c->pull, c->files[i].name, &size, err);
		for (int b = 7; !rc && b >= 0; b--)
			hlen = (hlen << 8) | r[i].data[b];
		if (!rc && (hlen > FG_ST_HEADER_MAX || hlen > size - 8))
			rc = fg_err_set(err, FG_EINPUT, "%s: header length %llu is over the cap or past the end of the file",
					c->files[i].path, (unsigned long long)hlen);
		r[i].len = 8 + hlen;
		r[i].data = NULL;
	}
	if (!rc)
		rc = fg_pull_ranges(c->pull, r, c->n_files, err);
	for (size_t i = 0; !rc && i < c->n_files; i++) {
		uint64_t size = 0;

		rc = fg_pull_size(c->pull, c->files[i].name, &size, err);
		if (!rc)
			rc = fg_st_parse_header(&c->files[i].st, r[i].data, (size_t)r[i].len, size,
						c->files[i].path, err);
	}
	free(r);
	if (rc == FG_ENOTFOUND)
		rc = FG_EINPUT; /* a file the index or config names is missing: malformed */
	return rc ? fg_err_prefix(err, rc, "checkpoint '%s': ", c->source) : 0;
}

static int open_remote(struct fg_ckpt *c, const char *source, const struct fg_pull_opts *o, size_t *cap,
		       struct fg_err *err)
{
	const char *single;
	size_t n;
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
	rc = remote_json(c, "config.json", &c->config_raw, err);
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
	if (single) {
		rc = add_file(c, cap, single, err);
		if (rc < 0)
			return rc;
		c->files[rc].globbed = fnmatch("model*.safetensors", single, 0) == 0;
		return remote_headers(c, err);
	}
	rc = remote_json(c, "model.safetensors.index.json", &c->index, err);
	if (rc == FG_ENOTFOUND) {
		/* No index: a single-shard model, as the Hugging Face tools assume. */
		rc = add_file(c, cap, "model.safetensors", err);
		if (rc < 0)
			return rc;
		c->files[rc].globbed = 1;
		rc = 0;
	} else if (!rc) {
		char label[PATH_MAX];

		snprintf(label, sizeof(label), "%s/model.safetensors.index.json", c->dir);
		rc = process_index(c, cap, label, err);
	}
	if (!rc)
		rc = find_sidecars(c, cap, err);
	if (!rc)
		rc = remote_headers(c, err);
	return rc;
}

int fg_ckpt_fetch(struct fg_ckpt *c, const struct fg_tensor *const *tensors, size_t n, struct fg_err *err)
{
	struct fg_pull_range *r;
	size_t *owner, m = 0;
	int rc;

	if (!c->pull || !n)
		return 0;
	r = calloc(n, sizeof(*r));
	owner = calloc(n, sizeof(*owner));
	if (!r || !owner) {
		free(r);
		free(owner);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		const struct fg_tensor *t = tensors[i];

		if (t->data || !fg_tensor_bytes(t))
			continue;
		for (size_t f = 0; f < c->n_files; f++) {
			const struct fg_st_file *st = c->files[f].st;

			if (t >= st->tensors && t < st->tensors + st->n_tensors) {
				r[m].file = c->files[f].name;
				r[m].offset = st->data_start + t->begin;
				r[m].len = fg_tensor_bytes(t);
				owner[m++] = i;
				break;
			}
		}
	}
	rc = fg_pull_ranges(c->pull, r, m, err);
	/* c owns its tensors: setting a view's data is its own business (see checkpoint.h). */
	for (size_t k = 0; !rc && k < m; k++)
		((struct fg_tensor *)(uintptr_t)tensors[owner[k]])->data = r[k].data;
	free(r);
	free(owner);
	return rc;
}

int fg_ckpt_open(struct fg_ckpt **out, const char *source, struct fg_err *err)
{
	return fg_ckpt_open_opts(out, source, NULL, err);
}

int fg_ckpt_open_opts(struct fg_ckpt **out, const char *source, const struct fg_pull_opts *pull,
		      struct fg_err *err)
{
	struct fg_ckpt *c = calloc(1, sizeof(*c));
	size_t cap = 0;
	char *cfg_path = NULL;
	int rc;

	if (!c)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	c->sidecar = -1;
	if (fg_pull_is_url(source)) {
		struct fg_pull_opts defaults;
		char cache[PATH_MAX];

		if (!pull) {
			fg_ckpt_pull_defaults(&defaults, cache, sizeof(cache));
			pull = &defaults;
		}
		rc = open_remote(c, source, pull, &cap, err);
		if (!rc)
			rc = cross_check(c, err);
		goto out;
	}
	rc = set_location(c, source, err);
	if (rc)
		goto out;
	cfg_path = path_join(c->dir, "config.json");
	if (!cfg_path) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	if (!c->single_file || access(cfg_path, F_OK) == 0) {
		if (access(cfg_path, F_OK) != 0) {
			rc = fg_err_set(err, FG_EINPUT, "%s: no config.json in the checkpoint folder", source);
			goto out;
		}
		rc = fg_json_load(&c->config_raw, cfg_path, FG_CKPT_JSON_MAX, err);
		if (rc)
			goto out;
		if (!cJSON_IsObject(c->config_raw)) {
			rc = fg_err_set(err, FG_EINPUT, "%s: not a JSON object", cfg_path);
			goto out;
		}
		if (merge_text_config(&c->config, c->config_raw) != 0) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
	}
	if (c->single_file) {
		const char *slash = strrchr(source, '/');

		rc = add_file(c, &cap, slash ? slash + 1 : source, err);
		if (rc < 0)
			goto out;
		c->files[rc].globbed = fnmatch("model*.safetensors", c->files[rc].name, 0) == 0;
		rc = 0;
	} else {
		struct open_pool pool;
		size_t n_glob;

		rc = glob_shards(c, &cap, err);
		if (rc)
			goto out;
		n_glob = c->n_files;
		/* The calling thread parses the index while the pool opens the shards. */
		if (pool_start(&pool, c, 0, open_threads()) == 0) {
			rc = load_index(c, &cap, err);
			if (!rc)
				rc = find_sidecars(c, &cap, err);
		}
		rc = pool_finish(&pool, c, 0, rc, err);
		if (!rc && c->n_files > n_glob) {
			if (pool_start(&pool, c, n_glob, open_threads()) != 0)
				rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory", source);
			rc = pool_finish(&pool, c, n_glob, rc, err);
		}
		if (rc)
			goto out;
		for (size_t i = 0; i < c->n_files; i++)
			c->files[i].stray = c->index && c->files[i].globbed && !c->files[i].in_index;
		if (c->n_files == 0) {
			rc = fg_err_set(err, FG_EINPUT, "%s: no model*.safetensors shards in the folder", source);
			goto out;
		}
	}
	if (c->single_file) {
		rc = fg_st_open(&c->files[0].st, c->files[0].path, err);
		if (rc)
			rc = fg_err_prefix(err, rc, "checkpoint '%s': ", c->source);
	}
	if (!rc)
		rc = cross_check(c, err);
out:
	free(cfg_path);
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
	free(c->files);
	free(c->mismatch);
	fg_pull_close(c->pull); /* after the files: their views point into it */
	cJSON_Delete(c->config_raw);
	cJSON_Delete(c->config);
	cJSON_Delete(c->index);
	free(c->source);
	free(c->dir);
	free(c);
}

const struct fg_tensor *fg_ckpt_find(const struct fg_ckpt *c, const char *name,
				     const struct fg_ckpt_file **file)
{
	/* Each shard's own table answers in O(1); checkpoints have tens of shards. */
	for (size_t i = 0; i < c->n_files; i++) {
		const struct fg_tensor *t;

		if (!is_shard(&c->files[i]))
			continue;
		t = fg_st_find(c->files[i].st, name);
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
