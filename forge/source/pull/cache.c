/*
 * cache.c: the pull cache on disk (internal.h; the layout is described in
 * pull.c's header).  It owns the records (v1/files/: a file's URL,
 * validator, size, the hf:// commit and when they were confirmed, or its
 * 404), the entries
 * (v1/ranges/: data plus a trailer naming and hashing it, written to v1/tmp/
 * and renamed), their lookup and verification, and eviction by last use.
 */
#include "forge/source/pull/internal.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "forge/core/sha256.h"
#include "forge/core/fs.h"
#include "forge/core/grow.h"

#define CACHE_MAGIC      "FGCACHE1"
#define TRAILER_MAX      (64u << 10)
#define TMP_STALE_SEC    3600         /* a tmp file this old belongs to a dead process */

static int write_file_atomic(const struct fg_pull *p, const char *final, const void *data,
			     size_t len);

/* ---- records ---- */

static void record_path(const struct fg_pull *p, const char *url, char *out, size_t cap)
{
	struct fg_sha256 *h = fg_sha256_new();
	char hex[FG_SHA256_HEX];

	if (h) {
		fg_sha256_update(h, "file", 5);
		fg_sha256_update(h, url, strlen(url));
		fg_sha256_final_hex(h, hex);
		fg_sha256_free(h);
	} else {
		fg_sha256_buf(url, strlen(url), hex);
	}
	snprintf(out, cap, "%s/files/%s", p->cache, hex);
}

/* The value of "key=" in a record or trailer text, copied into out. */
static int text_field(const char *text, const char *key, char *out, size_t cap)
{
	size_t kl = strlen(key);

	for (const char *line = text; line && *line; ) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);

		if (len > kl && strncmp(line, key, kl) == 0 && line[kl] == '=') {
			size_t vl = len - kl - 1;

			if (vl >= cap)
				return FG_EINPUT;
			memcpy(out, line + kl + 1, vl);
			out[vl] = '\0';
			return 0;
		}
		line = nl ? nl + 1 : NULL;
	}
	return FG_ENOTFOUND;
}

static int text_u64(const char *text, const char *key, uint64_t *out)
{
	char v[32];
	const char *s = v;

	if (text_field(text, key, v, sizeof(v)) != 0)
		return FG_ENOTFOUND;
	if (strcmp(v, "-") == 0) {
		*out = FG_PULL_SIZE_UNKNOWN;
		return 0;
	}
	return fgp_parse_u64(&s, out) == 0 && *s == '\0' ? 0 : FG_EINPUT;
}

/* Read a small file whole (NUL-terminated); NULL when absent or unreadable. */
static char *read_small(const char *path, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf;
	ssize_t n;

	if (fd < 0)
		return NULL;
	buf = malloc(cap + 1);
	if (!buf) {
		close(fd);
		return NULL;
	}
	n = read(fd, buf, cap);
	close(fd);
	if (n < 0 || (size_t)n >= cap) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

/*
 * Learn what the cache's record says about f.  Only ENOMEM is an error: an
 * unreadable or foreign record is as good as none.
 */
int fgp_record_load(struct fg_pull *p, struct pfile *f)
{
	char path[PATH_BUF], url[URL_BUF], val[300], commit[COMMIT_BUF];
	uint64_t size, checked;
	char *text;
	time_t now = time(NULL);

	record_path(p, f->url, path, sizeof(path));
	text = read_small(path, 8192);
	if (!text)
		return 0;
	if (strncmp(text, "forged-pull-file v1\n", 20) != 0 ||
	    text_field(text, "url", url, sizeof(url)) != 0 || strcmp(url, f->url) != 0 ||
	    text_u64(text, "size", &size) != 0 || text_u64(text, "checked", &checked) != 0) {
		free(text);
		return 0;
	}
	/* Offline, whatever the cache knows is all there is: no record expires. */
	int fresh = p->immutable || p->offline ||
		    (p->ttl > 0 && (uint64_t)now >= checked && (uint64_t)now - checked < p->ttl);
	if (text_field(text, "absent", val, sizeof(val)) == 0) {
		free(text);
		if (fresh)
			f->state = F_ABSENT;
		return 0;
	}
	if (text_field(text, "validator", val, sizeof(val)) != 0 || !*val) {
		free(text);
		return 0;
	}
	/*
	 * The commit the record was confirmed at.  One of another commit than
	 * the pull's is as good as none: the file is read again, and a server
	 * still at that other commit then fails the call (the branch moved).
	 */
	if (text_field(text, "commit", commit, sizeof(commit)) != 0 || !fgp_commit_ok(commit))
		commit[0] = '\0';
	if (commit[0] && p->commit[0] && strcmp(commit, p->commit) != 0) {
		free(text);
		return 0;
	}
	if (text_field(text, "lfs_sha256", f->lfs_oid, sizeof(f->lfs_oid)) != 0 || !fg_pull_lfs_oid(f->lfs_oid, f->lfs_oid))
		f->lfs_oid[0] = '\0';
	free(text);
	if (commit[0] && p->rev) {
		snprintf(f->commit, sizeof(f->commit), "%s", commit);
		if (!p->commit[0])
			snprintf(p->commit, sizeof(p->commit), "%s", commit);
	}
	f->validator = strdup(val);
	if (!f->validator)
		return FG_ENOMEM;
	f->size = size;
	f->state = fresh ? F_KNOWN : F_STALE;
	if (fresh)
		utimensat(AT_FDCWD, path, NULL, 0); /* last use, for eviction */
	return 0;
}

/* Write (absent = 0) or the 404 (absent = 1) record of f.  Failures only cost a
 * request next time, so they are not reported. */
void fgp_record_store(struct fg_pull *p, const struct pfile *f, int absent)
{
	char path[PATH_BUF], size[24];
	char *text;

	if (!p->cache || (!absent && !f->validator))
		return;
	record_path(p, f->url, path, sizeof(path));
	if (f->size == FG_PULL_SIZE_UNKNOWN)
		snprintf(size, sizeof(size), "-");
	else
		snprintf(size, sizeof(size), "%" PRIu64, f->size);
	if (absent)
		text = fgp_str_fmt("forged-pull-file v1\nurl=%s\nabsent=1\nsize=-\nchecked=%lld\n", f->url,
				   (long long)time(NULL));
	else
		text = fgp_str_fmt("forged-pull-file v1\nurl=%s\nvalidator=%s\nsize=%s\nchecked=%lld\n%s%s%s%s%s%s",
				   f->url, f->validator, size, (long long)time(NULL),
				   f->commit[0] ? "commit=" : "", f->commit, f->commit[0] ? "\n" : "",
				   f->lfs_oid[0] ? "lfs_sha256=" : "", f->lfs_oid, f->lfs_oid[0] ? "\n" : "");
	if (!text)
		return;
	write_file_atomic(p, path, text, strlen(text));
	free(text);
}

void fgp_record_drop(struct fg_pull *p, const struct pfile *f)
{
	char path[PATH_BUF];

	if (!p->cache)
		return;
	record_path(p, f->url, path, sizeof(path));
	unlink(path);
}

/* ---- entries ---- */

int fgp_tmp_open(const struct fg_pull *p, char **path)
{
	char *t = fgp_str_fmt("%s/tmp/XXXXXX", p->cache);
	int fd;

	if (!t)
		return FG_ENOMEM;
	fd = mkostemp(t, O_CLOEXEC);
	if (fd < 0) {
		free(t);
		return FG_ESTATE;
	}
	*path = t;
	return fd;
}

static int write_file_atomic(const struct fg_pull *p, const char *final, const void *data,
			     size_t len)
{
	char *tmp = NULL;
	int fd = fgp_tmp_open(p, &tmp), rc = FG_ESTATE;

	if (fd < 0)
		return fd;
	if (fg_fs_write_all(fd, data, len) == 0 && close(fd) == 0) {
		fd = -1;
		rc = rename(tmp, final) == 0 ? 0 : FG_ESTATE;
	}
	if (fd >= 0)
		close(fd);
	if (rc != 0)
		unlink(tmp);
	free(tmp);
	return rc;
}

static void entry_dir(const struct fg_pull *p, const struct pfile *f, char *out, size_t cap)
{
	char key[FG_SHA256_HEX];

	fg_pull_cache_key(f->url, f->validator, f->size, key);
	snprintf(out, cap, "%s/ranges/%s", p->cache, key);
}

/* The trailer appended to an entry's data. */
char *fgp_entry_trailer(const struct pfile *f, uint64_t offset, uint64_t len,
		       const char *sha, size_t *tlen)
{
	char size[24];
	char *meta, *t;
	size_t ml;

	if (f->size == FG_PULL_SIZE_UNKNOWN)
		snprintf(size, sizeof(size), "-");
	else
		snprintf(size, sizeof(size), "%" PRIu64, f->size);
	meta = fgp_str_fmt("forged-pull-entry v1\nurl=%s\nvalidator=%s\nsize=%s\noffset=%" PRIu64
			   "\nlen=%" PRIu64 "\nsha256=%s\n", f->url, f->validator, size, offset, len, sha);
	if (!meta)
		return NULL;
	ml = strlen(meta);
	t = realloc(meta, ml + 16);
	if (!t) {
		free(meta);
		return NULL;
	}
	for (int i = 0; i < 8; i++)
		t[ml + (size_t)i] = (char)(((uint64_t)ml >> (8 * i)) & 0xff);
	memcpy(t + ml + 8, CACHE_MAGIC, 8);
	*tlen = ml + 16;
	return t;
}

/* Rename tmp to the entry name of (offset, len), creating its folder; a
 * concurrent eviction may remove the folder in between, hence the retry. */
int fgp_entry_rename(struct fg_pull *p, const struct pfile *f, const char *tmp,
		     uint64_t offset, uint64_t len)
{
	char dir[PATH_BUF], final[PATH_BUF + 64];

	entry_dir(p, f, dir, sizeof(dir));
	snprintf(final, sizeof(final), "%s/%" PRIu64 "-%" PRIu64, dir, offset, len);
	for (int attempt = 0; attempt < 2; attempt++) {
		if (mkdir(dir, 0700) != 0 && errno != EEXIST)
			return FG_ESTATE;
		if (rename(tmp, final) == 0) {
			p->committed = 1;
			return 0;
		}
		if (errno != ENOENT)
			return FG_ESTATE;
	}
	return FG_ESTATE;
}

/* List f's cache folder once per call. */
static int disk_list(struct fg_pull *p, struct pfile *f)
{
	char dir[PATH_BUF];
	struct dirent *de;
	DIR *d;
	size_t cap = 0;

	if (f->disk_gen == p->gen)
		return 0;
	f->disk_gen = p->gen;
	f->n_disk = 0;
	entry_dir(p, f, dir, sizeof(dir));
	d = opendir(dir);
	if (!d)
		return 0;
	cap = f->n_disk;
	while ((de = readdir(d)) != NULL) {
		const char *s = de->d_name;
		uint64_t off, len;

		if (fgp_parse_u64(&s, &off) || *s++ != '-' || fgp_parse_u64(&s, &len) || *s ||
		    len == 0 || off > UINT64_MAX - len)
			continue;
		if (FG_GROW(f->disk, f->n_disk + 1, cap)) {
			closedir(d);
			return FG_ENOMEM;
		}
		f->disk[f->n_disk].offset = off;
		f->disk[f->n_disk].len = len;
		f->n_disk++;
	}
	closedir(d);
	return 0;
}

/*
 * Map and verify the entry (offset, len) of f: its trailer must name the same
 * file, version and range, and its data must hash to the recorded SHA-256.
 * Returns the mapping, or NULL (a bad entry is deleted).
 */
static const uint8_t *entry_open(struct fg_pull *p, const struct pfile *f, uint64_t offset,
				 uint64_t len)
{
	char dir[PATH_BUF], path[PATH_BUF + 64], url[URL_BUF], val[300], sha[80];
	char actual[FG_SHA256_HEX], *meta = NULL;
	uint8_t tail[16];
	uint64_t ml = 0, v;
	struct stat sb;
	void *map = NULL;
	int fd, good = 0;

	entry_dir(p, f, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/%" PRIu64 "-%" PRIu64, dir, offset, len);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &sb) != 0 || len > SIZE_MAX || (uint64_t)sb.st_size < len + 16 ||
	    pread(fd, tail, 16, sb.st_size - 16) != 16 || memcmp(tail + 8, CACHE_MAGIC, 8) != 0)
		goto out;
	for (int i = 7; i >= 0; i--)
		ml = (ml << 8) | tail[i];
	if (ml == 0 || ml > TRAILER_MAX || (uint64_t)sb.st_size != len + ml + 16)
		goto out;
	meta = malloc(ml + 1);
	if (!meta || pread(fd, meta, ml, (off_t)len) != (ssize_t)ml)
		goto out;
	meta[ml] = '\0';
	if (strncmp(meta, "forged-pull-entry v1\n", 21) != 0 ||
	    text_field(meta, "url", url, sizeof(url)) || strcmp(url, f->url) ||
	    text_field(meta, "validator", val, sizeof(val)) || strcmp(val, f->validator) ||
	    text_u64(meta, "offset", &v) || v != offset || text_u64(meta, "len", &v) ||
	    v != len || text_field(meta, "sha256", sha, sizeof(sha)))
		goto out;
	map = fgp_load_region(p, fd, (size_t)len);
	if (!map)
		goto out;
	fg_sha256_buf(map, (size_t)len, actual);
	good = strcmp(actual, sha) == 0;
	if (!good)
		fgp_drop_last_mapping(p);
out:
	close(fd);
	free(meta);
	if (!good) {
		unlink(path); /* corrupt, truncated or foreign: refetch */
		return NULL;
	}
	utimensat(AT_FDCWD, path, NULL, 0);
	return map;
}

/* Serve [offset, offset+len) of f from a verified cache entry holding it. */
int fgp_disk_find(struct fg_pull *p, struct pfile *f, uint64_t offset, uint64_t len,
		  const uint8_t **data)
{
	if (disk_list(p, f) != 0)
		return FG_ENOMEM;
	for (;;) {
		size_t best = SIZE_MAX;
		const uint8_t *map;

		for (size_t i = 0; i < f->n_disk; i++) {
			const struct fg_pull_extent *e = &f->disk[i];

			if (e->len && offset >= e->offset && offset - e->offset <= e->len &&
			    len <= e->len - (offset - e->offset) &&
			    (best == SIZE_MAX || e->len < f->disk[best].len))
				best = i;
		}
		if (best == SIZE_MAX)
			return 0;
		map = entry_open(p, f, f->disk[best].offset, f->disk[best].len);
		if (!map) {
			f->disk[best].len = 0; /* gone or bad */
			continue;
		}
		if (fgp_add_extent(f, f->disk[best].offset, f->disk[best].len, map) != 0)
			return FG_ENOMEM;
		p->st.bytes_from_cache += f->disk[best].len;
		*data = map + (offset - f->disk[best].offset);
		return 0;
	}
}

/* ---- eviction ---- */

struct evict_entry {
	char *path;
	int is_range;
};

static int evict_add(struct fg_pull_cache_item **items, struct evict_entry **ents, size_t *n,
		     size_t *cap, const char *path, const struct stat *sb, int is_range)
{
	/* Two parallel arrays, one capacity: each grows from the same cap to the same new one. */
	size_t cap_items = *cap, cap_ents = *cap;

	if (FG_GROW(*items, *n + 1, cap_items) || FG_GROW(*ents, *n + 1, cap_ents))
		return FG_ENOMEM;
	assert(cap_items == cap_ents);
	*cap = cap_items;
	(*ents)[*n].path = strdup(path);
	if (!(*ents)[*n].path)
		return FG_ENOMEM;
	(*ents)[*n].is_range = is_range;
	(*items)[*n].bytes = (uint64_t)sb->st_size;
	(*items)[*n].used_ns = (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
	(*items)[*n].id = *n;
	(*n)++;
	return 0;
}

/* Scan one folder of the cache: regular files become eviction candidates. */
static int evict_scan(const char *dir, struct fg_pull_cache_item **items,
		      struct evict_entry **ents, size_t *n, size_t *cap, int is_range)
{
	char path[PATH_BUF + 300];
	struct dirent *de;
	struct stat sb;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
			continue;
		if (evict_add(items, ents, n, cap, path, &sb, is_range) != 0) {
			closedir(d);
			return FG_ENOMEM;
		}
	}
	closedir(d);
	return 0;
}

/*
 * Bring the cache under its cap, least recently used first, and remove tmp
 * files left by crashed processes.  Best effort: a failure leaves the cache
 * larger, never wrong.
 */
void fgp_cache_evict(struct fg_pull *p)
{
	struct fg_pull_cache_item *items = NULL;
	struct evict_entry *ents = NULL;
	size_t n = 0, cap = 0, k;
	char dir[PATH_BUF], sub[PATH_BUF + 300];
	struct dirent *de;
	struct stat sb;
	DIR *d;
	time_t now = time(NULL);

	if (!p->cache || p->cap == 0)
		return;
	snprintf(dir, sizeof(dir), "%s/tmp", p->cache);
	d = opendir(dir);
	if (d) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
			if (lstat(sub, &sb) == 0 && S_ISREG(sb.st_mode) &&
			    now - sb.st_mtim.tv_sec > TMP_STALE_SEC)
				unlink(sub);
		}
		closedir(d);
	}
	snprintf(dir, sizeof(dir), "%s/files", p->cache);
	if (evict_scan(dir, &items, &ents, &n, &cap, 0) != 0)
		goto out;
	snprintf(dir, sizeof(dir), "%s/ranges", p->cache);
	d = opendir(dir);
	if (d) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
			if (evict_scan(sub, &items, &ents, &n, &cap, 1) != 0) {
				closedir(d);
				goto out;
			}
		}
		closedir(d);
	}
	k = fg_pull_evict_plan(items, n, p->cap);
	for (size_t i = 0; i < k; i++) {
		struct evict_entry *e = &ents[items[i].id];

		unlink(e->path);
		if (e->is_range) {
			char *slash = strrchr(e->path, '/');

			*slash = '\0';
			rmdir(e->path); /* fails while the folder holds other entries */
		}
	}
out:
	for (size_t i = 0; i < n; i++)
		free(ents[i].path);
	free(ents);
	free(items);
}
