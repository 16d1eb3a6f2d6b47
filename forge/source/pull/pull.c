/*
 * pull.c: remote checkpoint folders over HTTP range requests (pull.h).
 *
 * This note is the design of the whole folder.  The code is split by what it
 * owns (internal.h lists it: url.c, ranges.c, cache.c, xfer.c); this file
 * keeps the helpers they share, the remote files of a pull, the regions it
 * hands out (mapped or copied, released by fg_pull_close) and the public API.
 *
 * Transfers.  Every fetch is a struct xfer run by one libcurl multi handle
 * that lives as long as the pull, so connections are reused across calls.
 * At most max_connections transfers are active at once; the rest wait in the
 * batch.  The response status is read by us (no CURLOPT_FAILONERROR): 404,
 * 401/403, 416 and other 4xx fail at once; 5xx, 429, network errors and
 * truncated bodies are retried with exponential backoff, a range transfer
 * resuming after the bytes it already kept.  A server that ignores Range
 * answers 200 with the whole file: the write callback skips to the range,
 * keeps it, and returns 0 once it has it, which drops the connection instead
 * of reading hundreds of GB (CURLE_WRITE_ERROR is then success).
 *
 * Validators.  A file's version is named by its ETag, else its Last-Modified,
 * else (hf:// only) the revision; the cache is keyed by it.  The first
 * response of a file fixes the validator the pull serves; a later response
 * of the same file with another validator means the file changed under us,
 * and the call fails rather than mixing two versions.
 *
 * Hub revisions.  hf://ORG/NAME@REV reads {endpoint}/ORG/NAME/resolve/REV/
 * (the endpoint: hf_endpoint, $HF_ENDPOINT, else FG_PULL_HF_DEFAULT_ENDPOINT;
 * the bearer token: hf_token, $HF_TOKEN, else the hub's token file).  REV is
 * a branch, a tag or a commit; the hub names the commit it served in the
 * X-Repo-Commit header of every resolve response, which becomes the pull's
 * resolved commit (fg_pull_resolved_commit) and is kept in each file's
 * record.  A second commit within one pull (the branch moved) fails the call
 * rather than mixing files of two commits.  A commit REV makes every record
 * immutable.  With $HF_HUB_OFFLINE (hf_offline) an hf:// pull makes no
 * request at all: records never expire, and what the cache lacks fails with
 * the URL that would have been asked.
 *
 * Cache layout (under cache_dir, all files written to tmp/ then renamed, so
 * a reader sees whole entries or none, and two processes fetching the same
 * range both rename identical bytes):
 *
 *   v1/files/<sha256("file\0" URL)>   a record: URL, validator, size, commit
 *                                      (hf://) and when the server last
 *                                      confirmed them (or that the file is
 *                                      absent: 404)
 *   v1/ranges/<K>/<OFFSET>-<LEN>       an entry: LEN data bytes, then a text
 *                                      trailer (URL, validator, size, range,
 *                                      SHA-256 of the data), its 8-byte length
 *                                      and the magic "FGCACHE1"
 *   v1/tmp/                            transfers in progress
 *
 * K = fg_pull_cache_key(URL, validator, size).  A record younger than the TTL
 * (for ever for a commit-pinned hf:// revision) is trusted without a request,
 * which is what lets a second inspect transfer nothing; an older one is
 * confirmed with a 1-byte range request.  Entries are found by containment
 * (any cached range holding the one asked for), verified against their
 * SHA-256 before first use (a mismatch is deleted and refetched), and their
 * mtime is their last use: eviction removes the least recently used files
 * until the cache is under its cap.  Data handed out is an mmap of the entry
 * when it is large (still valid if another process evicts it), a copy when it
 * is small (thousands of norm ranges must not cost thousands of mappings), or,
 * without a cache, the malloc'd buffer the transfer filled.
 */
#include "forge/source/pull/internal.h"

#include "forge/core/fs.h"
#include "forge/core/grow.h"
#include "forge/core/str.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#define USER_AGENT       "forged"
#define MAP_MIN          (256u << 10) /* smaller cached regions are copied, not mapped */

/* ---- small helpers ---- */

char *fgp_str_fmt(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	s = malloc((size_t)n + 1);
	if (!s)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

int fgp_oom(struct fg_err *err)
{
	return fg_err_set(err, FG_ENOMEM, "out of memory");
}

/* A full git commit id in lowercase hex: 40 digits (SHA-1) or 64 (SHA-256). */
int fgp_commit_ok(const char *s)
{
	size_t i = fg_lower_hex_span(s);

	return !s[i] && (i == 40 || i == 64);
}

static int truthy(const char *v)
{
	return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
		     strcasecmp(v, "on") == 0);
}

const char *fg_pull_hf_token_path(char *buf, size_t len)
{
	const char *hf_home = getenv("HF_HOME"), *xdg = getenv("XDG_CACHE_HOME"),
		   *home = getenv("HOME");
	int n = -1;

	if (hf_home && *hf_home)
		n = snprintf(buf, len, "%s/token", hf_home);
	else if (xdg && xdg[0] == '/') /* XDG: a relative path is to be ignored */
		n = snprintf(buf, len, "%s/huggingface/token", xdg);
	else if (home && *home)
		n = snprintf(buf, len, "%s/.cache/huggingface/token", home);
	return n > 0 && (size_t)n < len ? buf : NULL;
}

/*
 * The first line of the hub's token file, blanks trimmed, into buf; NULL
 * when there is no such file or it holds no token.  An unreadable file is
 * as good as none: the Hugging Face tools ignore it too, and a server that
 * needs a token says so (401, with a hint naming HF_TOKEN).
 */
static const char *token_from_file(char *buf, size_t len)
{
	char path[PATH_BUF];
	FILE *fp;
	size_t n;

	if (!fg_pull_hf_token_path(path, sizeof(path)) || !(fp = fopen(path, "re")))
		return NULL;
	if (!fgets(buf, (int)len, fp))
		buf[0] = '\0';
	fclose(fp);
	n = strcspn(buf, "\r\n");
	while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		n--;
	buf[n] = '\0';
	n = strspn(buf, " \t");
	memmove(buf, buf + n, strlen(buf + n) + 1);
	return buf[0] ? buf : NULL;
}

void fg_pull_opts_init(struct fg_pull_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->cache_cap_bytes = 10ull << 30;
	o->cache_ttl_seconds = 3600;
	o->max_connections = 8;
	o->merge_gap = FG_PULL_MERGE_GAP;
	o->timeout_seconds = 60;
	o->connect_timeout_seconds = 10;
	o->retries = 4;
	o->backoff_ms = 250;
}

/* ---- files of the folder ---- */

static void pfile_free(struct pfile *f)
{
	if (!f)
		return;
	free(f->name);
	free(f->url);
	free(f->validator);
	free(f->ext);
	free(f->disk);
	free(f);
}

/* The pfile for name, created (and its cache record read) on first use. */
static int file_get(struct fg_pull *p, const char *name, struct pfile **out, struct fg_err *err)
{
	struct pfile *f;

	for (size_t i = p->n_files; i-- > 0; ) {
		if (strcmp(p->files[i]->name, name) == 0) {
			*out = p->files[i];
			return 0;
		}
	}
	if (!fgp_file_name_ok(name))
		return fg_err_set(err, FG_EUSAGE, "bad remote file name '%.200s'", name);
	if (FG_GROW(p->files, p->n_files + 1, p->cap_files))
		return fgp_oom(err);
	f = calloc(1, sizeof(*f));
	if (!f)
		return fgp_oom(err);
	f->name = strdup(name);
	f->url = fg_pull_file_url(p->base, name);
	f->size = FG_PULL_SIZE_UNKNOWN;
	if (!f->name || !f->url) {
		pfile_free(f);
		return fgp_oom(err);
	}
	if (p->cache && fgp_record_load(p, f) != 0) {
		pfile_free(f);
		return fgp_oom(err);
	}
	p->files[p->n_files++] = f;
	*out = f;
	return 0;
}

int fgp_add_mapping(struct fg_pull *p, void *addr, size_t len, int is_mmap)
{
	if (FG_GROW(p->maps, p->n_maps + 1, p->cap_maps))
		return FG_ENOMEM;
	p->maps[p->n_maps].addr = addr;
	p->maps[p->n_maps].len = len;
	p->maps[p->n_maps].is_mmap = is_mmap;
	p->n_maps++;
	return 0;
}

/* Undo the last fgp_add_mapping (a region that failed verification). */
void fgp_drop_last_mapping(struct fg_pull *p)
{
	struct mapping *m = &p->maps[--p->n_maps];

	if (m->is_mmap)
		munmap(m->addr, m->len);
	else
		free(m->addr);
}

/*
 * The first len (> 0) bytes of fd, registered with p until fg_pull_close:
 * mapped when large, copied when small, so that thousands of small norm
 * ranges do not cost thousands of mappings.  NULL on failure (errno set).
 */
void *fgp_load_region(struct fg_pull *p, int fd, size_t len)
{
	uint8_t *m;
	size_t done = 0;

	if (len >= MAP_MIN) {
		void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);

		if (map == MAP_FAILED)
			return NULL;
		if (fgp_add_mapping(p, map, len, 1) != 0) {
			munmap(map, len);
			errno = ENOMEM;
			return NULL;
		}
		return map;
	}
	m = malloc(len);
	if (!m)
		return NULL;
	while (done < len) {
		ssize_t n = pread(fd, m + done, len - done, (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			free(m);
			return NULL;
		}
		done += (size_t)n;
	}
	if (fgp_add_mapping(p, m, len, 0) != 0) {
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	return m;
}

int fgp_add_extent(struct pfile *f, uint64_t offset, uint64_t len, const uint8_t *data)
{
	if (FG_GROW(f->ext, f->n_ext + 1, f->cap_ext))
		return FG_ENOMEM;
	f->ext[f->n_ext].offset = offset;
	f->ext[f->n_ext].len = len;
	f->ext[f->n_ext].data = data;
	f->n_ext++;
	f->served = 1;
	return 0;
}

static const uint8_t *mem_find(const struct pfile *f, uint64_t offset, uint64_t len)
{
	for (size_t i = 0; i < f->n_ext; i++) {
		const struct extent *e = &f->ext[i];

		if (offset >= e->offset && offset - e->offset <= e->len &&
		    len <= e->len - (offset - e->offset))
			return e->data + (offset - e->offset);
	}
	return NULL;
}

/* ---- public API ---- */

int fg_pull_open(struct fg_pull **out, const char *source, const struct fg_pull_opts *o,
		 struct fg_err *err)
{
	struct fg_pull_opts def;
	struct fg_pull *p = NULL;
	const char *endpoint, *token, *ua;
	char *base = NULL, *rev = NULL, *file = NULL, host[256], port[16], token_buf[1024];
	int rc;

	if (!o) {
		fg_pull_opts_init(&def);
		o = &def;
	}
	endpoint = o->hf_endpoint ? o->hf_endpoint : getenv("HF_ENDPOINT");
	rc = fg_pull_parse_source(source, endpoint, &base, &rev, &file, err);
	if (rc)
		return rc;
	p = calloc(1, sizeof(*p));
	if (!p) {
		rc = fgp_oom(err);
		goto fail;
	}
	p->base = base;
	p->rev = rev;
	p->single = file;
	base = rev = file = NULL;
	p->immutable = p->rev && fgp_commit_ok(p->rev);
	if (p->immutable)
		snprintf(p->commit, sizeof(p->commit), "%s", p->rev);
	p->offline = p->rev && truthy(o->hf_offline ? o->hf_offline : getenv("HF_HUB_OFFLINE"));
	p->cap = o->cache_cap_bytes;
	p->ttl = o->cache_ttl_seconds;
	p->maxconn = o->max_connections ? o->max_connections : 1;
	p->merge_gap = o->merge_gap;
	p->max_bytes = o->max_bytes;
	p->timeout = o->timeout_seconds;
	p->connect_timeout = o->connect_timeout_seconds;
	p->retries = o->retries;
	p->backoff_ms = o->backoff_ms;
	ua = o->user_agent ? o->user_agent : USER_AGENT;
	p->user_agent = strdup(ua);
	if (!p->user_agent) {
		rc = fgp_oom(err);
		goto fail;
	}
	if (strlen(p->base) > BASE_URL_MAX) {
		rc = fg_err_set(err, FG_EUSAGE, "source '%.200s...': URL too long", source);
		goto fail;
	}
	if (fgp_url_host(p->base, host, sizeof(host), port, sizeof(port)) != 0) {
		rc = fg_err_set(err, FG_EUSAGE, "source '%s': no host", source);
		goto fail;
	}
	if (o->n_allow_hosts) {
		p->allow = calloc(o->n_allow_hosts, sizeof(*p->allow));
		if (!p->allow) {
			rc = fgp_oom(err);
			goto fail;
		}
		for (size_t i = 0; i < o->n_allow_hosts; i++) {
			p->allow[i] = strdup(o->allow_hosts[i] ? o->allow_hosts[i] : "");
			if (!p->allow[i]) {
				rc = fgp_oom(err);
				goto fail;
			}
			p->n_allow++;
		}
		if (!fgp_host_allowed(p, host, port)) {
			rc = fg_err_set(err, FG_EFORBIDDEN, "source '%s': host '%s' is not in allow_hosts",
					source, host);
			goto fail;
		}
	}
	token = o->hf_token ? o->hf_token : getenv("HF_TOKEN");
	if (p->rev && !o->hf_token && (!token || !*token))
		token = token_from_file(token_buf, sizeof(token_buf));
	if (p->rev && token && *token) {
		char *h;

		if (strpbrk(token, "\r\n")) {
			rc = fg_err_set(err, FG_EUSAGE, "HF token holds a line break");
			goto fail;
		}
		h = fgp_str_fmt("Authorization: Bearer %s", token);
		if (!h) {
			rc = fgp_oom(err);
			goto fail;
		}
		/* curl drops this header on a redirect to another host (the CDN). */
		p->headers = curl_slist_append(NULL, h);
		free(h);
		if (!p->headers) {
			rc = fgp_oom(err);
			goto fail;
		}
	}
	if (o->cache_dir) {
		char sub[PATH_BUF];

		if (strlen(o->cache_dir) > OPEN_CACHE_DIR_MAX) {
			rc = fg_err_set(err, FG_EUSAGE, "cache folder path is too long");
			goto fail;
		}
		p->cache = fgp_str_fmt("%s/v1", o->cache_dir);
		if (!p->cache) {
			rc = fgp_oom(err);
			goto fail;
		}
		static const char *const subs[] = { "files", "ranges", "tmp" };
		for (size_t i = 0; i < 3; i++) {
			int mk;

			snprintf(sub, sizeof(sub), "%s/%s", p->cache, subs[i]);
			mk = fg_fs_mkdir_p(sub, 0700);
			if (mk != 0) {
				rc = fg_err_set(err, mk == -ENOSPC ? FG_ENOSPC : FG_ESTATE, "cache folder '%s': %s", sub,
						strerror(-mk));
				goto fail;
			}
		}
	}
	p->multi = curl_multi_init();
	if (!p->multi) {
		rc = fgp_oom(err);
		goto fail;
	}
	curl_multi_setopt(p->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)p->maxconn);
	curl_multi_setopt(p->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)p->maxconn);
	if (o->progress)
		fg_pull_set_progress(p, o->progress, o->progress_ctx);
	*out = p;
	return 0;
fail:
	free(base);
	free(rev);
	free(file);
	fg_pull_close(p);
	return rc;
}

const char *fg_pull_base_url(const struct fg_pull *p)
{
	return p->base;
}

const char *fg_pull_source_file(const struct fg_pull *p)
{
	return p->single;
}

const char *fg_pull_revision(const struct fg_pull *p)
{
	return p->rev;
}

const char *fg_pull_resolved_commit(const struct fg_pull *p)
{
	return p->commit[0] ? p->commit : NULL;
}

static int absent_error(const struct pfile *f, struct fg_err *err)
{
	return fg_err_set(err, FG_ENOTFOUND, "GET %s: 404 Not Found (remembered by the cache)",
			  f->url);
}

/* Confirm the stale records of the files in fs (one 1-byte request each). */
static int revalidate(struct fg_pull *p, struct pfile **fs, size_t n, struct fg_err *err)
{
	struct xfer **xs = NULL;
	size_t nx = 0;
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		int dup = 0;

		if (fs[i]->state != F_STALE)
			continue;
		for (size_t j = 0; j < nx && !dup; j++)
			dup = xs[j]->f == fs[i];
		if (dup)
			continue;
		if (!xs) {
			xs = calloc(n, sizeof(*xs));
			if (!xs)
				return fgp_oom(err);
		}
		xs[nx] = fgp_xfer_new(p, fs[i], XK_PROBE, 0, 1);
		if (!xs[nx]) {
			rc = fgp_oom(err);
			goto out;
		}
		nx++;
	}
	if (nx) {
		for (size_t i = 0; i < nx; i++) {
			xs[i]->buf = malloc(1);
			if (!xs[i]->buf) {
				rc = fgp_oom(err);
				goto out;
			}
		}
		p->st.bytes_to_fetch += nx;
		rc = fgp_run(p, xs, nx, err);
	}
out:
	fgp_xfers_free(xs, nx);
	return rc;
}

int fg_pull_size(struct fg_pull *p, const char *file, uint64_t *size, struct fg_err *err)
{
	struct pfile *f;
	struct xfer *x;
	int rc;

	if (!p || !file || !size)
		return fg_err_set(err, FG_EUSAGE, "fg_pull_size: missing argument");
	rc = file_get(p, file, &f, err);
	if (rc)
		return rc;
	if (f->state == F_ABSENT)
		return absent_error(f, err);
	if (f->state != F_KNOWN || f->size == FG_PULL_SIZE_UNKNOWN) {
		x = fgp_xfer_new(p, f, XK_PROBE, 0, 1);
		if (!x)
			return fgp_oom(err);
		x->buf = malloc(1);
		p->gen++;
		p->st.bytes_to_fetch += 1;
		rc = x->buf ? fgp_run(p, &x, 1, err) : fgp_oom(err);
		fgp_xfer_free(x);
		if (rc)
			return rc;
		if (f->size == FG_PULL_SIZE_UNKNOWN)
			return fg_err_set(err, FG_EINPUT, "GET %s: the server did not tell the file's size",
					  f->url);
	}
	*size = f->size;
	return 0;
}

int fg_pull_get(struct fg_pull *p, const char *file, uint8_t **data, size_t *len, size_t cap,
		struct fg_err *err)
{
	struct pfile *f;
	struct xfer *x;
	const uint8_t *hit = NULL;
	uint8_t *copy;
	int rc;

	if (!p || !file || !data || !len)
		return fg_err_set(err, FG_EUSAGE, "fg_pull_get: missing argument");
	rc = file_get(p, file, &f, err);
	if (rc)
		return rc;
	if (f->state == F_ABSENT)
		return absent_error(f, err);
	p->gen++;
	p->committed = 0;
	if (f->state == F_KNOWN && f->size != FG_PULL_SIZE_UNKNOWN) {
		if (f->size > cap)
			return fg_err_set(err, FG_EINPUT, "GET %s: %" PRIu64 " bytes, over the cap of %zu",
					  f->url, f->size, cap);
		if (f->size > 0) {
			hit = mem_find(f, 0, f->size);
			if (!hit && p->cache && f->validator &&
			    fgp_disk_find(p, f, 0, f->size, &hit) != 0)
				return fgp_oom(err);
		}
		if (hit || f->size == 0) {
			copy = malloc((size_t)f->size + 1);
			if (!copy)
				return fgp_oom(err);
			if (f->size)
				memcpy(copy, hit, (size_t)f->size);
			copy[f->size] = '\0';
			*data = copy;
			*len = (size_t)f->size;
			return 0;
		}
	}
	x = fgp_xfer_new(p, f, XK_GET, 0, cap);
	if (!x)
		return fgp_oom(err);
	rc = fgp_run(p, &x, 1, err);
	if (rc == 0) {
		if (!x->buf) {
			x->buf = malloc(1);
			if (!x->buf) {
				fgp_xfer_free(x);
				return fgp_oom(err);
			}
			x->buf[0] = '\0';
		}
		*data = x->buf;
		*len = (size_t)x->got;
		x->buf = NULL;
		if (p->committed)
			fgp_cache_evict(p);
	}
	fgp_xfer_free(x);
	return rc;
}

/*
 * Plan the misses r[miss[0..n_miss)] per file: group them by file, merge
 * each file's into spans (fg_pull_plan, p->merge_gap) and make one XK_RANGE
 * transfer per span: xs[0..*nx) (xs has room for n_miss), and miss_x[i] is
 * the one that will hold r[i].  On failure the transfers made so far stay in
 * xs[0..*nx) for the caller to free.
 */
static int plan_misses(struct fg_pull *p, const struct fg_pull_range *r, struct pfile *const *rf,
		       const size_t *miss, size_t n_miss, struct xfer **xs, size_t *nx,
		       struct xfer **miss_x, struct fg_err *err)
{
	struct fg_pull_extent *ext = calloc(n_miss, sizeof(*ext));
	struct fg_pull_span *spans = calloc(n_miss, sizeof(*spans));
	size_t *order = calloc(n_miss, sizeof(*order));
	size_t *idx = calloc(n_miss, sizeof(*idx));
	char *done = calloc(n_miss, 1);
	int rc = 0;

	if (!ext || !spans || !order || !idx || !done) {
		rc = fgp_oom(err);
		goto out;
	}
	for (size_t k = 0; k < n_miss; k++) {
		struct pfile *f = rf[miss[k]];
		size_t m = 0, ns;

		if (done[k])
			continue;
		for (size_t j = k; j < n_miss; j++) {
			if (!done[j] && rf[miss[j]] == f) {
				done[j] = 1;
				idx[m] = miss[j];
				ext[m].offset = r[miss[j]].offset;
				ext[m].len = r[miss[j]].len;
				m++;
			}
		}
		ns = fg_pull_plan(ext, m, p->merge_gap, order, spans);
		for (size_t s = 0; s < ns; s++) {
			struct xfer *x = fgp_xfer_new(p, f, XK_RANGE, spans[s].offset, spans[s].len);

			if (!x) {
				rc = fgp_oom(err);
				goto out;
			}
			xs[(*nx)++] = x;
			if (p->max_bytes && p->st.bytes_to_fetch + spans[s].len > p->max_bytes) {
				rc = fg_err_set(err, FG_EINPUT,
						"%s%s: fetching %llu more bytes would take this pull past its cap of %llu bytes "
						"(max_bytes; %llu fetched or planned so far)", p->base, f->name,
						(unsigned long long)spans[s].len, (unsigned long long)p->max_bytes,
						(unsigned long long)p->st.bytes_to_fetch);
				goto out;
			}
			p->st.bytes_to_fetch += spans[s].len;
			for (size_t c = 0; c < spans[s].count; c++)
				miss_x[idx[order[spans[s].first + c]]] = x;
		}
	}
out:
	free(ext);
	free(spans);
	free(order);
	free(idx);
	free(done);
	return rc;
}

int fg_pull_ranges(struct fg_pull *p, struct fg_pull_range *r, size_t n, struct fg_err *err)
{
	static const uint8_t empty[1];
	const uint8_t **res = NULL;
	struct pfile **rf = NULL;
	struct xfer **xs = NULL, **miss_x = NULL;
	size_t *miss = NULL, n_miss = 0, nx = 0;
	int rc = 0;

	if (n == 0)
		return 0;
	if (!p || !r)
		return fg_err_set(err, FG_EUSAGE, "fg_pull_ranges: missing argument");
	p->gen++;
	p->committed = 0;
	res = calloc(n, sizeof(*res));
	rf = calloc(n, sizeof(*rf));
	miss = calloc(n, sizeof(*miss));
	if (!res || !rf || !miss) {
		rc = fgp_oom(err);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!r[i].file) {
			rc = fg_err_set(err, FG_EUSAGE, "fg_pull_ranges: range %zu has no file", i);
			goto out;
		}
		rc = file_get(p, r[i].file, &rf[i], err);
		if (rc)
			goto out;
		if (r[i].offset > UINT64_MAX - r[i].len || r[i].len > SIZE_MAX) {
			rc = fg_err_set(err, FG_EINPUT, "%s: bad range %" PRIu64 "+%" PRIu64,
					rf[i]->url, r[i].offset, r[i].len);
			goto out;
		}
		if (rf[i]->state == F_ABSENT) {
			rc = absent_error(rf[i], err);
			goto out;
		}
	}
	if (p->cache) {
		rc = revalidate(p, rf, n, err);
		if (rc)
			goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct pfile *f = rf[i];

		if (f->size != FG_PULL_SIZE_UNKNOWN && (r[i].offset > f->size ||
							r[i].len > f->size - r[i].offset)) {
			rc = fg_err_set(err, FG_EINPUT,
					"GET %s (bytes %" PRIu64 "-%" PRIu64 "): past the end of the file (%"
					PRIu64 " bytes)", f->url, r[i].offset,
					r[i].offset + r[i].len - (r[i].len > 0), f->size);
			goto out;
		}
		if (r[i].len == 0) {
			res[i] = empty;
			continue;
		}
		res[i] = mem_find(f, r[i].offset, r[i].len);
		if (!res[i] && p->cache && f->state == F_KNOWN && f->validator &&
		    fgp_disk_find(p, f, r[i].offset, r[i].len, &res[i]) != 0) {
			rc = fgp_oom(err);
			goto out;
		}
		if (!res[i])
			miss[n_miss++] = i;
	}
	if (n_miss) {
		xs = calloc(n_miss, sizeof(*xs));
		miss_x = calloc(n, sizeof(*miss_x));
		if (!xs || !miss_x) {
			rc = fgp_oom(err);
			goto out;
		}
		rc = plan_misses(p, r, rf, miss, n_miss, xs, &nx, miss_x, err);
		if (rc)
			goto out;
		rc = fgp_run(p, xs, nx, err);
		if (rc)
			goto out;
		for (size_t k = 0; k < n_miss; k++) {
			size_t i = miss[k];
			struct xfer *x = miss_x[i];

			res[i] = x->data + (r[i].offset - x->start);
		}
	}
	for (size_t i = 0; i < n; i++)
		r[i].data = res[i];
	if (p->committed)
		fgp_cache_evict(p);
out:
	fgp_xfers_free(xs, nx);
	free(miss_x);
	free(miss);
	free(rf);
	free(res);
	return rc;
}

void fg_pull_stats(const struct fg_pull *p, struct fg_pull_stats *out)
{
	*out = p->st;
	out->max_bytes = p->max_bytes;
}

void fg_pull_set_progress(struct fg_pull *p, int (*cb)(void *ctx, uint64_t done, uint64_t total),
			  void *ctx)
{
	p->progress = cb;
	p->progress_ctx = ctx;
}

const char *fg_pull_file_sha256(struct fg_pull *p, const char *file)
{
	struct pfile *f = NULL;

	if (!p || !file || file_get(p, file, &f, NULL) != 0 || !f)
		return NULL;
	return f->lfs_oid[0] ? f->lfs_oid : NULL;
}

void fg_pull_close(struct fg_pull *p)
{
	if (!p)
		return;
	if (p->multi)
		curl_multi_cleanup(p->multi);
	for (size_t i = 0; i < p->n_maps; i++) {
		if (p->maps[i].is_mmap)
			munmap(p->maps[i].addr, p->maps[i].len);
		else
			free(p->maps[i].addr);
	}
	free(p->maps);
	for (size_t i = 0; i < p->n_files; i++)
		pfile_free(p->files[i]);
	free(p->files);
	for (size_t i = 0; i < p->n_allow; i++)
		free(p->allow[i]);
	free(p->allow);
	curl_slist_free_all(p->headers);
	free(p->user_agent);
	free(p->cache);
	free(p->base);
	free(p->rev);
	free(p->single);
	free(p);
}
