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
#include "forge/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
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

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s) {
		h ^= (uint8_t)*s++;
		h *= 1099511628211ull;
	}
	return h;
}

static struct name_slot *map_slot(const struct name_map *m, const char *name)
{
	size_t mask = m->n_slots - 1, i = (size_t)hash_str(name) & mask;

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

int fg_json_load(cJSON **out, const char *path, size_t cap, struct fg_err *err)
{
	struct stat st;
	char *text = NULL;
	const char *end = NULL;
	cJSON *doc;
	size_t got = 0;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fg_err_set(err, FG_EIO, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		rc = fg_err_set(err, FG_EIO, "%s: not a readable regular file", path);
		goto out;
	}
	if ((uint64_t)st.st_size > cap) {
		rc = fg_err_set(err, FG_EINPUT, "%s: %lld bytes exceed the cap of %zu",
				path, (long long)st.st_size, cap);
		goto out;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory", path);
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, text + got, (size_t)st.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = fg_err_set(err, FG_EIO, "%s: read failed: %s", path,
					r < 0 ? strerror(errno) : "file shrank");
			goto out;
		}
		got += (size_t)r;
	}
	text[got] = '\0';
	if (memchr(text, '\0', got)) {
		rc = fg_err_set(err, FG_EINPUT, "%s: not JSON text (contains a NUL byte)", path);
		goto out;
	}
	doc = cJSON_ParseWithOpts(text, &end, 1);
	if (!doc) {
		rc = fg_err_set(err, FG_EINPUT, "%s: invalid JSON near byte %td", path,
				end ? end - text : (ptrdiff_t)0);
		goto out;
	}
	*out = doc;
out:
	free(text);
	close(fd);
	return rc;
}

/* config with text_config's keys (but model_type) copied over the top level. */
static int merge_text_config(cJSON **out, const cJSON *raw)
{
	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(raw, "text_config");
	const cJSON *kv;
	cJSON *merged = cJSON_Duplicate(raw, 1);

	if (!merged)
		return -1;
	if (cJSON_IsObject(tc)) {
		cJSON_ArrayForEach(kv, tc) {
			cJSON *copy;

			if (strcmp(kv->string, "model_type") == 0)
				continue;
			copy = cJSON_Duplicate(kv, 1);
			if (!copy) {
				cJSON_Delete(merged);
				return -1;
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
	if (c->n_files == *cap) {
		size_t ncap = *cap ? *cap * 2 : 8;
		struct fg_ckpt_file *nf = realloc(c->files, ncap * sizeof(*nf));

		if (!nf)
			return fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->source);
		c->files = nf;
		*cap = ncap;
	}
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
		return fg_err_set(err, FG_EIO, "%s: cannot list the folder: %s", c->dir, strerror(errno));
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
		if (n == ncap) {
			char **nn = realloc(names, (ncap = ncap ? ncap * 2 : 16) * sizeof(*nn));

			if (!nn) {
				rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->dir);
				goto out;
			}
			names = nn;
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

static int find_file(const struct fg_ckpt *c, const char *name)
{
	for (size_t i = 0; i < c->n_files; i++)
		if (strcmp(c->files[i].name, name) == 0)
			return (int)i;
	return -1;
}

static int load_index(struct fg_ckpt *c, size_t *cap, struct fg_err *err)
{
	char *path = path_join(c->dir, "model.safetensors.index.json");
	const cJSON *wm, *kv;
	int rc = 0, last = -1;

	if (!path)
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", c->dir);
	if (access(path, F_OK) != 0)
		goto out;
	rc = fg_json_load(&c->index, path, FG_CKPT_JSON_MAX, err);
	if (rc)
		goto out;
	wm = cJSON_GetObjectItemCaseSensitive(c->index, "weight_map");
	if (!cJSON_IsObject(wm)) {
		rc = fg_err_set(err, FG_EINPUT, "%s: no \"weight_map\" object", path);
		goto out;
	}
	cJSON_ArrayForEach(kv, wm) {
		char *file_path;
		int idx, exists;

		if (!cJSON_IsString(kv)) {
			rc = fg_err_set(err, FG_EINPUT, "%s: weight_map entry '%.200s' is not a file name",
					path, kv->string);
			goto out;
		}
		if (!confined_relpath(kv->valuestring)) {
			rc = fg_err_set(err, FG_EINPUT, "%s: weight_map entry '%.200s' names '%.200s', outside the folder",
					path, kv->string, kv->valuestring);
			goto out;
		}
		/* Index entries repeat a few file names: stat each name once. */
		if (last >= 0 && strcmp(c->files[last].name, kv->valuestring) == 0)
			continue;
		last = find_file(c, kv->valuestring);
		if (last >= 0) {
			c->files[last].in_index = 1;
			continue;
		}
		file_path = path_join(c->dir, kv->valuestring);
		exists = file_path && is_regular(file_path);
		free(file_path);
		if (!exists) {
			rc = fg_err_set(err, FG_EINPUT, "%s: weight_map names '%.200s' (for '%.200s'), which is missing",
					path, kv->valuestring, kv->string);
			goto out;
		}
		idx = add_file(c, cap, kv->valuestring, err);
		if (idx < 0) {
			rc = idx;
			goto out;
		}
		c->files[idx].in_index = 1;
		last = idx;
	}
out:
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
		char *path;
		int exists;

		if (!cJSON_IsString(ptr) || !confined_relpath(ptr->valuestring))
			return fg_err_set(err, FG_EINPUT,
					  "%s/config.json: mlx_lm_extra_tensors.mtp_file is not a relative path inside the folder",
					  c->dir);
		path = path_join(c->dir, ptr->valuestring);
		exists = path && is_regular(path);
		free(path);
		if (!exists)
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
		char *path = path_join(c->dir, sidecar_candidates[i]);
		int exists = path && is_regular(path);

		free(path);
		if (!exists)
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
	if (c->n_mismatch == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct fg_index_mismatch *nm = realloc(c->mismatch, ncap * sizeof(*nm));

		if (!nm)
			return -1;
		c->mismatch = nm;
		*cap = ncap;
	}
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
	int last = -1, rc = 0, complete = 1;

	if (!wm)
		return 0;
	found = calloc(c->n_files ? c->n_files : 1, sizeof(*found));
	if (!found)
		goto nomem;
	cJSON_ArrayForEach(kv, wm) {
		if (last < 0 || strcmp(c->files[last].name, kv->valuestring) != 0)
			last = find_file(c, kv->valuestring);
		if (last < 0)
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
#define OPEN_THREADS_MAX 8

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
		return -1;
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
		return fg_err_set(err, FG_EIO, "%s: cannot open checkpoint: %s", source, strerror(errno));
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
		return fg_err_set(err, FG_EIO, "%s: neither a folder nor a file", source);
	}
	return c->dir ? 0 : fg_err_set(err, FG_ENOMEM, "out of memory");
}

int fg_ckpt_open(struct fg_ckpt **out, const char *source, struct fg_err *err)
{
	struct fg_ckpt *c = calloc(1, sizeof(*c));
	size_t cap = 0;
	char *cfg_path = NULL;
	int rc;

	if (!c)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	c->sidecar = -1;
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
