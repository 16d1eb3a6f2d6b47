/*
 * pull.c: remote checkpoint folders over HTTP range requests (pull.h).
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
 * Cache layout (under cache_dir, all files written to tmp/ then renamed, so
 * a reader sees whole entries or none, and two processes fetching the same
 * range both rename identical bytes):
 *
 *   v1/files/<sha256("file\0" URL)>   a record: URL, validator, size and when
 *                                      the server last confirmed them (or that
 *                                      the file is absent: 404)
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
#include "forge/source/pull.h"

#include <ctype.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "forge/core/sha256.h"

#define CACHE_MAGIC      "FGCACHE1"
#define TRAILER_MAX      (64u << 10)
#define ERROR_BODY_MAX   (1u << 20)   /* error bodies are read and dropped up to this */
#define BACKOFF_MAX_MS   8000u
#define TMP_STALE_SEC    3600         /* a tmp file this old belongs to a dead process */
#define FILE_NAME_MAX    1024
#define PATH_BUF         4096
#define HDR_LINE_MAX     2048
#define USER_AGENT       "forged"
#define OPEN_CACHE_DIR_MAX 3000
#define MAP_MIN          (256u << 10) /* smaller cached regions are copied, not mapped */
#define BASE_URL_MAX     3000         /* + an encoded file name fits URL_BUF */
#define URL_BUF          8192

enum fstate {
	F_UNKNOWN,   /* nothing known: the first response tells */
	F_STALE,     /* a record older than the TTL: confirm before using the cache */
	F_KNOWN,     /* validator and size trusted */
	F_ABSENT,    /* a fresh record says 404 */
};

struct extent {
	uint64_t offset, len;
	const uint8_t *data;
};

/* One remote file of the folder, as far as this pull knows it. */
struct pfile {
	char *name;
	char *url;
	enum fstate state;
	char *validator;             /* NULL: the server gave none (not cached) */
	uint64_t size;               /* FG_PULL_SIZE_UNKNOWN */
	int served;                  /* bytes under validator were handed out */
	struct extent *ext;          /* ranges held in memory */
	size_t n_ext, cap_ext;
	struct fg_pull_extent *disk; /* cache entries listed in this call */
	size_t n_disk;
	unsigned disk_gen;           /* p->gen when listed */
};

struct mapping {
	void *addr;
	size_t len;
	int is_mmap;
};

struct fg_pull {
	char *base;                  /* ends in '/' */
	char *rev;                   /* hf revision, or NULL */
	char *single;                /* the file a single-file source named */
	int immutable;               /* rev is a commit: records never expire */
	char *user_agent;
	struct curl_slist *headers;  /* Authorization, when a token applies */
	char **allow;
	size_t n_allow;
	char *cache;                 /* cache_dir/v1, or NULL */
	uint64_t cap;
	unsigned ttl, maxconn, timeout, connect_timeout, retries, backoff_ms;
	uint64_t merge_gap;
	CURLM *multi;
	struct pfile **files;
	size_t n_files, cap_files;
	struct mapping *maps;
	size_t n_maps, cap_maps;
	struct fg_pull_stats st;
	uint64_t done_bytes;         /* useful bytes received (progress) */
	int (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *progress_ctx;
	unsigned gen;                /* bumped per call: disk listings expire */
	int committed;               /* a cache entry was written in this call */
};

enum xkind { XK_RANGE, XK_GET, XK_PROBE };
enum xstate { XS_WAIT, XS_ACTIVE, XS_DONE };
enum bodymode { BM_NONE, BM_KEEP, BM_SKIP, BM_DISCARD };

/* One HTTP response, reset at each status line (redirects give several). */
struct resp {
	long status;
	char reason[64];
	char etag[256];
	char lastmod[64];
	char crange[128];
	int have_clen;
	uint64_t clen;
	int have_location;
};

struct xfer {
	struct fg_pull *p;
	struct pfile *f;
	enum xkind kind;
	enum xstate state;
	uint64_t start, len;         /* the byte range; for XK_GET len is the cap */
	uint64_t got;                /* bytes kept so far (contiguous from start) */
	uint64_t body_pos;           /* bytes of the current body seen */
	uint64_t discarded;
	enum bodymode mode;
	int headers_done;
	int complete;
	struct resp r;
	CURL *easy;
	char errbuf[CURL_ERROR_SIZE];
	unsigned tries;
	int64_t ready_ms;
	/* sink: a cache tmp file, or memory */
	int fd;
	char *tmp;
	struct fg_sha256 *sha;
	uint8_t *buf;
	size_t buf_cap;
	/* outcome */
	int fatal;                   /* set by a callback: not retried */
	int rc;
	struct fg_err err;
	const uint8_t *data;         /* XK_RANGE result */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ready;

static void curl_init_once(void)
{
	curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

/* ---- small helpers ---- */

static char *str_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *str_fmt(const char *fmt, ...)
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

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int oom(struct fg_err *err)
{
	return fg_err_set(err, FG_ENOMEM, "out of memory");
}

static int is_hex40(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return 0;
	return i == 40;
}

static int has_prefix_ci(const char *s, const char *prefix)
{
	return strncasecmp(s, prefix, strlen(prefix)) == 0;
}

int fg_pull_is_url(const char *source)
{
	return source && (has_prefix_ci(source, "http://") || has_prefix_ci(source, "https://") ||
			  has_prefix_ci(source, "hf://"));
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

static const char *status_text(long s)
{
	static const struct { long code; const char *text; } table[] = {
		{ 200, "OK" }, { 206, "Partial Content" }, { 301, "Moved Permanently" },
		{ 302, "Found" }, { 307, "Temporary Redirect" }, { 308, "Permanent Redirect" },
		{ 400, "Bad Request" }, { 401, "Unauthorized" }, { 403, "Forbidden" },
		{ 404, "Not Found" }, { 405, "Method Not Allowed" }, { 410, "Gone" },
		{ 416, "Range Not Satisfiable" }, { 429, "Too Many Requests" },
		{ 500, "Internal Server Error" }, { 502, "Bad Gateway" },
		{ 503, "Service Unavailable" }, { 504, "Gateway Timeout" },
	};

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].code == s)
			return table[i].text;
	return "";
}

/* ---- URLs ---- */

static int unreserved(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

/* Percent-encode s, keeping '/' when keep_slash. */
static char *pct_encode(const char *s, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(3 * n + 1), *o = out;

	if (!out)
		return NULL;
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (unreserved(*c) || (keep_slash && *c == '/')) {
			*o++ = (char)*c;
		} else {
			*o++ = '%';
			*o++ = hex[*c >> 4];
			*o++ = hex[*c & 15];
		}
	}
	*o = '\0';
	return out;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return 16; /* not a hex digit */
}

/* Decode %XX in place; FG_EUSAGE on a bad escape or an encoded NUL. */
static int pct_decode(char *s)
{
	char *o = s;

	for (char *c = s; *c; c++) {
		if (*c == '%') {
			int hi = hexval(c[1]), lo = hi > 15 ? 16 : hexval(c[2]);

			if (hi > 15 || lo > 15 || (hi == 0 && lo == 0))
				return FG_EUSAGE;
			*o++ = (char)(hi * 16 + lo);
			c += 2;
		} else {
			*o++ = *c;
		}
	}
	*o = '\0';
	return 0;
}

/* A folder-relative file name we are willing to put in a URL and a message. */
static int file_name_ok(const char *name)
{
	size_t n;

	if (!name || !*name || name[0] == '/')
		return 0;
	n = strnlen(name, FILE_NAME_MAX + 1);
	if (n > FILE_NAME_MAX)
		return 0;
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		if (*c < 0x20 || *c == 0x7f || *c == '\\' || *c == '?' || *c == '#')
			return 0;
	/* no empty, "." or ".." segment */
	for (const char *seg = name; seg; ) {
		const char *end = strchr(seg, '/');
		size_t len = end ? (size_t)(end - seg) : strlen(seg);

		if (len == 0 || (len == 1 && seg[0] == '.') ||
		    (len == 2 && seg[0] == '.' && seg[1] == '.'))
			return 0;
		seg = end ? end + 1 : NULL;
	}
	return 1;
}

char *fg_pull_file_url(const char *base, const char *file)
{
	char *enc = pct_encode(file, 1), *url;

	if (!enc)
		return NULL;
	url = str_fmt("%s%s", base, enc);
	free(enc);
	return url;
}

static int repo_part_ok(const char *s, size_t len)
{
	if (len == 0 || len > 96 || s[0] == '.' || s[0] == '-')
		return 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!isalnum(c) && c != '-' && c != '_' && c != '.')
			return 0;
		if (c == '.' && i + 1 < len && s[i + 1] == '.')
			return 0;
	}
	return 1;
}

static int parse_hf(const char *source, const char *endpoint, char **base, char **rev,
		    struct fg_err *err)
{
	const char *repo = source + 5, *at = strchr(repo, '@'), *slash;
	size_t repo_len = at ? (size_t)(at - repo) : strlen(repo);
	const char *r = at ? at + 1 : "main";
	char *erev = NULL, *ep = NULL;
	size_t elen;

	slash = memchr(repo, '/', repo_len);
	if (!slash || !repo_part_ok(repo, (size_t)(slash - repo)) ||
	    !repo_part_ok(slash + 1, repo_len - (size_t)(slash - repo) - 1))
		return fg_err_set(err, FG_EUSAGE,
				  "source '%s': expected hf://ORG/NAME[@REV] (letters, digits, '-', '_', '.')",
				  source);
	if (!*r || strlen(r) > 255)
		return fg_err_set(err, FG_EUSAGE, "source '%s': empty or overlong revision", source);
	for (const unsigned char *c = (const unsigned char *)r; *c; c++)
		if (*c <= 0x20 || *c == 0x7f)
			return fg_err_set(err, FG_EUSAGE, "source '%s': bad character in revision",
					  source);
	if (!endpoint || !*endpoint)
		return fg_err_set(err, FG_EUSAGE,
				  "source '%s': hf:// needs a hub endpoint (set HF_ENDPOINT)", source);
	if (!has_prefix_ci(endpoint, "http://") && !has_prefix_ci(endpoint, "https://"))
		return fg_err_set(err, FG_EUSAGE, "hub endpoint '%s' is not an http(s) URL", endpoint);
	elen = strlen(endpoint);
	while (elen > 0 && endpoint[elen - 1] == '/')
		elen--;
	ep = strndup(endpoint, elen);
	erev = pct_encode(r, 0);
	if (!ep || !erev)
		goto nomem;
	*base = str_fmt("%s/%.*s/resolve/%s/", ep, (int)repo_len, repo, erev);
	*rev = strdup(r);
	free(ep);
	free(erev);
	if (!*base || !*rev) {
		free(*base);
		free(*rev);
		*base = *rev = NULL;
		return oom(err);
	}
	return 0;
nomem:
	free(ep);
	free(erev);
	return oom(err);
}

static int parse_http(const char *source, char **base, char **file, struct fg_err *err)
{
	CURLU *u = curl_url();
	char *norm = NULL, *query = NULL, *frag = NULL, *last;
	int rc = 0;
	size_t n;

	if (!u)
		return oom(err);
	if (curl_url_set(u, CURLUPART_URL, source, 0) != CURLUE_OK) {
		rc = fg_err_set(err, FG_EUSAGE, "source '%s': not a valid URL", source);
		goto out;
	}
	if (curl_url_get(u, CURLUPART_QUERY, &query, 0) == CURLUE_OK ||
	    curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0) == CURLUE_OK) {
		rc = fg_err_set(err, FG_EUSAGE,
				"source '%s': query strings and fragments are not supported", source);
		goto out;
	}
	if (curl_url_get(u, CURLUPART_URL, &norm, 0) != CURLUE_OK) {
		rc = fg_err_set(err, FG_EUSAGE, "source '%s': not a valid URL", source);
		goto out;
	}
	n = strlen(norm);
	last = strrchr(norm, '/');
	if (n > 0 && norm[n - 1] == '/') {
		*base = strdup(norm);
	} else if (last && n - (size_t)(last - norm) > 12 &&
		   strcmp(norm + n - 12, ".safetensors") == 0) {
		char *name = strdup(last + 1);

		if (!name) {
			rc = oom(err);
			goto out;
		}
		if (pct_decode(name) != 0 || !file_name_ok(name)) {
			free(name);
			rc = fg_err_set(err, FG_EUSAGE, "source '%s': bad file name", source);
			goto out;
		}
		*file = name;
		*base = strndup(norm, (size_t)(last - norm) + 1);
	} else {
		*base = str_fmt("%s/", norm);
	}
	if (!*base) {
		free(*file);
		*file = NULL;
		rc = oom(err);
	}
out:
	curl_free(norm);
	curl_free(query);
	curl_free(frag);
	curl_url_cleanup(u);
	return rc;
}

int fg_pull_parse_source(const char *source, const char *hf_endpoint, char **base, char **rev,
			 char **file, struct fg_err *err)
{
	*base = *rev = *file = NULL;
	if (!source)
		return fg_err_set(err, FG_EUSAGE, "no source");
	pthread_once(&curl_once, curl_init_once);
	if (!curl_ready)
		return fg_err_set(err, FG_EINTERNAL, "libcurl failed to initialise");
	if (has_prefix_ci(source, "hf://"))
		return parse_hf(source, hf_endpoint, base, rev, err);
	if (has_prefix_ci(source, "http://") || has_prefix_ci(source, "https://"))
		return parse_http(source, base, file, err);
	return fg_err_set(err, FG_EUSAGE, "source '%s' is not an http(s):// or hf:// URL", source);
}

/* Host (and port) of url; FG_EUSAGE when it has none. */
static int url_host(const char *url, char *host, size_t hcap, char *port, size_t pcap)
{
	CURLU *u = curl_url();
	char *h = NULL, *pt = NULL;
	int rc = FG_EUSAGE;

	if (!u)
		return FG_ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK) {
		snprintf(host, hcap, "%s", h);
		if (curl_url_get(u, CURLUPART_PORT, &pt, CURLU_DEFAULT_PORT) == CURLUE_OK)
			snprintf(port, pcap, "%s", pt);
		else
			port[0] = '\0';
		rc = 0;
	}
	curl_free(h);
	curl_free(pt);
	curl_url_cleanup(u);
	return rc;
}

static int host_allowed(const struct fg_pull *p, const char *host, const char *port)
{
	char hp[320];

	if (p->n_allow == 0)
		return 1;
	snprintf(hp, sizeof(hp), "%s:%s", host, port);
	for (size_t i = 0; i < p->n_allow; i++)
		if (strcasecmp(p->allow[i], host) == 0 || strcasecmp(p->allow[i], hp) == 0)
			return 1;
	return 0;
}

/* ---- Content-Range and planning (pure) ---- */

static int parse_u64(const char **s, uint64_t *out)
{
	uint64_t v = 0;
	const char *c = *s;

	if (!isdigit((unsigned char)*c))
		return FG_EINPUT;
	for (; isdigit((unsigned char)*c); c++) {
		unsigned d = (unsigned)(*c - '0');

		if (v > (UINT64_MAX - d) / 10)
			return FG_EINPUT;
		v = v * 10 + d;
	}
	*s = c;
	*out = v;
	return 0;
}

int fg_pull_parse_content_range(const char *value, uint64_t *first, uint64_t *last,
				uint64_t *total)
{
	const char *s = value;
	uint64_t a = FG_PULL_SIZE_UNKNOWN, b = FG_PULL_SIZE_UNKNOWN, t = FG_PULL_SIZE_UNKNOWN;

	while (*s == ' ' || *s == '\t')
		s++;
	if (strncasecmp(s, "bytes", 5) != 0)
		return FG_EINPUT;
	s += 5;
	if (*s != ' ' && *s != '=')
		return FG_EINPUT;
	while (*s == ' ' || *s == '=')
		s++;
	if (*s == '*') {
		s++;
	} else {
		if (parse_u64(&s, &a) || *s++ != '-' || parse_u64(&s, &b) || b < a)
			return FG_EINPUT;
	}
	if (*s++ != '/')
		return FG_EINPUT;
	if (*s == '*') {
		s++;
		if (a == FG_PULL_SIZE_UNKNOWN)
			return FG_EINPUT; /* "*" and "*" says nothing */
	} else if (parse_u64(&s, &t)) {
		return FG_EINPUT;
	}
	while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
		s++;
	if (*s)
		return FG_EINPUT;
	if (t != FG_PULL_SIZE_UNKNOWN && a != FG_PULL_SIZE_UNKNOWN && b >= t)
		return FG_EINPUT;
	*first = a;
	*last = b;
	*total = t;
	return 0;
}

/* Extents by offset, then length, then index (a stable, total order). */
static int cmp_order_r(const void *pa, const void *pb, void *ctx)
{
	const struct fg_pull_extent *ext = ctx;
	const struct fg_pull_extent *a = &ext[*(const size_t *)pa];
	const struct fg_pull_extent *b = &ext[*(const size_t *)pb];

	if (a->offset != b->offset)
		return a->offset < b->offset ? -1 : 1;
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	return *(const size_t *)pa < *(const size_t *)pb ? -1 : 1;
}

size_t fg_pull_plan(const struct fg_pull_extent *ext, size_t n, uint64_t max_gap, size_t *order,
		    struct fg_pull_span *spans)
{
	size_t ns = 0;

	for (size_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), cmp_order_r, (void *)ext);
	for (size_t k = 0; k < n; k++) {
		const struct fg_pull_extent *e = &ext[order[k]];
		uint64_t end = e->offset + e->len;

		if (ns > 0) {
			struct fg_pull_span *s = &spans[ns - 1];
			uint64_t send = s->offset + s->len;

			if (e->offset <= send || e->offset - send <= max_gap) {
				if (end > send)
					s->len = end - s->offset;
				s->count++;
				continue;
			}
		}
		spans[ns].offset = e->offset;
		spans[ns].len = e->len;
		spans[ns].first = k;
		spans[ns].count = 1;
		ns++;
	}
	return ns;
}

void fg_pull_cache_key(const char *url, const char *validator, uint64_t size, char hex[65])
{
	struct fg_sha256 *h = fg_sha256_new();
	char sz[24];

	if (!h) {
		/* Out of memory: a key of the URL alone.  Entries name their URL and
		 * validator in the trailer, so a shared key costs a miss, never data. */
		fg_sha256_buf(url, strlen(url), hex);
		return;
	}
	snprintf(sz, sizeof(sz), "%" PRIu64, size);
	fg_sha256_update(h, "range", 6);
	fg_sha256_update(h, url, strlen(url) + 1);
	fg_sha256_update(h, validator, strlen(validator) + 1);
	fg_sha256_update(h, sz, strlen(sz) + 1);
	fg_sha256_final_hex(h, hex);
}

static int cmp_item(const void *pa, const void *pb)
{
	const struct fg_pull_cache_item *a = pa, *b = pb;

	if (a->used_ns != b->used_ns)
		return a->used_ns < b->used_ns ? -1 : 1;
	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	return 0;
}

size_t fg_pull_evict_plan(struct fg_pull_cache_item *items, size_t n, uint64_t cap)
{
	uint64_t total = 0;
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		total += items[i].bytes;
	qsort(items, n, sizeof(*items), cmp_item);
	while (k < n && total > cap)
		total -= items[k++].bytes;
	return k;
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

static int write_file_atomic(const struct fg_pull *p, const char *final, const void *data,
			     size_t len);
static int record_load(struct fg_pull *p, struct pfile *f);

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
	if (!file_name_ok(name))
		return fg_err_set(err, FG_EUSAGE, "bad remote file name '%.200s'", name);
	if (p->n_files == p->cap_files) {
		size_t nc = p->cap_files ? 2 * p->cap_files : 16;
		struct pfile **nf = realloc(p->files, nc * sizeof(*nf));

		if (!nf)
			return oom(err);
		p->files = nf;
		p->cap_files = nc;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return oom(err);
	f->name = strdup(name);
	f->url = fg_pull_file_url(p->base, name);
	f->size = FG_PULL_SIZE_UNKNOWN;
	if (!f->name || !f->url) {
		pfile_free(f);
		return oom(err);
	}
	if (p->cache && record_load(p, f) != 0) {
		pfile_free(f);
		return oom(err);
	}
	p->files[p->n_files++] = f;
	*out = f;
	return 0;
}

static int add_mapping(struct fg_pull *p, void *addr, size_t len, int is_mmap)
{
	if (p->n_maps == p->cap_maps) {
		size_t nc = p->cap_maps ? 2 * p->cap_maps : 32;
		struct mapping *nm = realloc(p->maps, nc * sizeof(*nm));

		if (!nm)
			return FG_ENOMEM;
		p->maps = nm;
		p->cap_maps = nc;
	}
	p->maps[p->n_maps].addr = addr;
	p->maps[p->n_maps].len = len;
	p->maps[p->n_maps].is_mmap = is_mmap;
	p->n_maps++;
	return 0;
}

/* Undo the last add_mapping (a region that failed verification). */
static void drop_last_mapping(struct fg_pull *p)
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
static void *load_region(struct fg_pull *p, int fd, size_t len)
{
	uint8_t *m;
	size_t done = 0;

	if (len >= MAP_MIN) {
		void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);

		if (map == MAP_FAILED)
			return NULL;
		if (add_mapping(p, map, len, 1) != 0) {
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
	if (add_mapping(p, m, len, 0) != 0) {
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	return m;
}

static int add_extent(struct pfile *f, uint64_t offset, uint64_t len, const uint8_t *data)
{
	if (f->n_ext == f->cap_ext) {
		size_t nc = f->cap_ext ? 2 * f->cap_ext : 8;
		struct extent *ne = realloc(f->ext, nc * sizeof(*ne));

		if (!ne)
			return FG_ENOMEM;
		f->ext = ne;
		f->cap_ext = nc;
	}
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

/* ---- cache: records ---- */

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_BUF];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return FG_ESTATE;
	memcpy(buf, path, n + 1);
	for (char *c = buf + 1; *c; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		if (mkdir(buf, mode) != 0 && errno != EEXIST)
			return FG_ESTATE;
		*c = '/';
	}
	if (mkdir(buf, mode) != 0 && errno != EEXIST)
		return FG_ESTATE;
	return 0;
}

static void record_path(const struct fg_pull *p, const char *url, char *out, size_t cap)
{
	struct fg_sha256 *h = fg_sha256_new();
	char hex[FG_SHA256_HEX];

	if (h) {
		fg_sha256_update(h, "file", 5);
		fg_sha256_update(h, url, strlen(url));
		fg_sha256_final_hex(h, hex);
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
	return parse_u64(&s, out) == 0 && *s == '\0' ? 0 : FG_EINPUT;
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
static int record_load(struct fg_pull *p, struct pfile *f)
{
	char path[PATH_BUF], url[URL_BUF], val[300];
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
	int fresh = p->immutable ||
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
	free(text);
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
static void record_store(struct fg_pull *p, const struct pfile *f, int absent)
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
		text = str_fmt("forged-pull-file v1\nurl=%s\nabsent=1\nsize=-\nchecked=%lld\n", f->url,
			       (long long)time(NULL));
	else
		text = str_fmt("forged-pull-file v1\nurl=%s\nvalidator=%s\nsize=%s\nchecked=%lld\n",
			       f->url, f->validator, size, (long long)time(NULL));
	if (!text)
		return;
	write_file_atomic(p, path, text, strlen(text));
	free(text);
}

static void record_drop(struct fg_pull *p, const struct pfile *f)
{
	char path[PATH_BUF];

	if (!p->cache)
		return;
	record_path(p, f->url, path, sizeof(path));
	unlink(path);
}

/* ---- cache: entries ---- */

static int write_all(int fd, const void *data, size_t len)
{
	const uint8_t *c = data;

	while (len > 0) {
		ssize_t n = write(fd, c, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return FG_ESTATE; /* errno says why */
		}
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

static int tmp_open(const struct fg_pull *p, char **path)
{
	char *t = str_fmt("%s/tmp/XXXXXX", p->cache);
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
	int fd = tmp_open(p, &tmp), rc = FG_ESTATE;

	if (fd < 0)
		return fd;
	if (write_all(fd, data, len) == 0 && close(fd) == 0) {
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
static char *entry_trailer(const struct pfile *f, uint64_t offset, uint64_t len,
			   const char *sha, size_t *tlen)
{
	char size[24];
	char *meta, *t;
	size_t ml;

	if (f->size == FG_PULL_SIZE_UNKNOWN)
		snprintf(size, sizeof(size), "-");
	else
		snprintf(size, sizeof(size), "%" PRIu64, f->size);
	meta = str_fmt("forged-pull-entry v1\nurl=%s\nvalidator=%s\nsize=%s\noffset=%" PRIu64
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
static int entry_rename(struct fg_pull *p, const struct pfile *f, const char *tmp,
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

		if (parse_u64(&s, &off) || *s++ != '-' || parse_u64(&s, &len) || *s || len == 0 ||
		    off > UINT64_MAX - len)
			continue;
		if (f->n_disk == cap) {
			size_t nc = cap ? 2 * cap : 16;
			struct fg_pull_extent *nd = realloc(f->disk, nc * sizeof(*nd));

			if (!nd) {
				closedir(d);
				return FG_ENOMEM;
			}
			f->disk = nd;
			cap = nc;
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
	map = load_region(p, fd, (size_t)len);
	if (!map)
		goto out;
	fg_sha256_buf(map, (size_t)len, actual);
	good = strcmp(actual, sha) == 0;
	if (!good)
		drop_last_mapping(p);
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
static int disk_find(struct fg_pull *p, struct pfile *f, uint64_t offset, uint64_t len,
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
		if (add_extent(f, f->disk[best].offset, f->disk[best].len, map) != 0)
			return FG_ENOMEM;
		p->st.bytes_from_cache += f->disk[best].len;
		*data = map + (offset - f->disk[best].offset);
		return 0;
	}
}

struct evict_entry {
	char *path;
	int is_range;
};

static int evict_add(struct fg_pull_cache_item **items, struct evict_entry **ents, size_t *n,
		     size_t *cap, const char *path, const struct stat *sb, int is_range)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 256;
		struct fg_pull_cache_item *ni = realloc(*items, nc * sizeof(*ni));

		if (!ni)
			return FG_ENOMEM;
		*items = ni;
		struct evict_entry *ne = realloc(*ents, nc * sizeof(*ne));

		if (!ne)
			return FG_ENOMEM;
		*ents = ne;
		*cap = nc;
	}
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
static void cache_evict(struct fg_pull *p)
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

/* ---- transfers ---- */

static void xfer_label(const struct xfer *x, char *out, size_t cap)
{
	if (x->kind == XK_GET)
		snprintf(out, cap, "GET %s", x->f->url);
	else
		snprintf(out, cap, "GET %s (bytes %" PRIu64 "-%" PRIu64 ")", x->f->url, x->start,
			 x->start + x->len - 1);
}

static const char *resp_reason(const struct resp *r)
{
	return r->reason[0] ? r->reason : status_text(r->status);
}

static int xfer_fail(struct xfer *x, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Record a callback's error: the transfer stops and is not retried. */
static int xfer_fail(struct xfer *x, int code, const char *fmt, ...)
{
	char label[FG_ERR_MSG_MAX], what[FG_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	xfer_label(x, label, sizeof(label));
	fg_err_set(&x->err, code, "%s: %s", label, what);
	x->fatal = 1;
	x->rc = code;
	return code;
}

/* The version name the current response gives its file, or NULL. */
static char *resp_validator(const struct fg_pull *p, const struct resp *r)
{
	if (r->etag[0])
		return str_fmt("etag:%s", r->etag);
	if (r->lastmod[0])
		return str_fmt("lm:%s", r->lastmod);
	if (p->rev)
		return str_fmt("rev:%s", p->rev);
	return NULL;
}

/*
 * Take the validator and size a response gives f.  A file whose bytes were
 * already handed out under another validator changed on the server: fail
 * rather than mix versions, and drop its record so the next run starts over.
 */
static int learn(struct xfer *x, uint64_t size)
{
	struct fg_pull *p = x->p;
	struct pfile *f = x->f;
	char *v = resp_validator(p, &x->r);
	int same;

	if (!v && (x->r.etag[0] || x->r.lastmod[0] || p->rev))
		return xfer_fail(x, FG_ENOMEM, "out of memory");
	same = (!v && !f->validator) || (v && f->validator && strcmp(v, f->validator) == 0);
	if (same && size != FG_PULL_SIZE_UNKNOWN && f->size != FG_PULL_SIZE_UNKNOWN &&
	    size != f->size)
		same = 0;
	if (f->state == F_KNOWN && same) {
		free(v);
		if (f->size == FG_PULL_SIZE_UNKNOWN && size != FG_PULL_SIZE_UNKNOWN) {
			f->size = size;
			record_store(p, f, 0);
		}
		return 0;
	}
	if (f->state == F_KNOWN && f->served) {
		record_drop(p, f);
		free(v);
		return xfer_fail(x, FG_EIO,
				 "the file changed on the server while being read (was %s, %" PRIu64
				 " bytes); run again", f->validator ? f->validator : "unversioned",
				 f->size);
	}
	free(f->validator);
	f->validator = v;
	f->size = size;
	f->state = F_KNOWN;
	f->disk_gen = 0;
	record_store(p, f, 0);
	return 0;
}

/* The headers of the final response are in: decide what its body is. */
static void on_headers(struct xfer *x)
{
	struct resp *r = &x->r;
	uint64_t a, b, t, want = x->start + x->got, end = x->start + x->len - 1;

	x->headers_done = 1;
	x->mode = BM_DISCARD;
	if (x->kind == XK_GET) {
		if (r->status == 200) {
			if (r->have_clen && r->clen > x->len) {
				xfer_fail(x, FG_EINPUT, "%" PRIu64 " bytes, over the cap of %" PRIu64,
					  r->clen, x->len);
				return;
			}
			x->mode = BM_KEEP;
			if (r->have_clen && x->tries == 1)
				x->p->st.bytes_to_fetch += r->clen;
			learn(x, r->have_clen ? r->clen : FG_PULL_SIZE_UNKNOWN);
		} else if (r->status >= 200 && r->status < 300) {
			xfer_fail(x, FG_EIO, "unexpected %ld %s", r->status, resp_reason(r));
		}
		return;
	}
	if (r->status == 206) {
		if (!r->crange[0] || fg_pull_parse_content_range(r->crange, &a, &b, &t) != 0 ||
		    a == FG_PULL_SIZE_UNKNOWN) {
			xfer_fail(x, FG_EIO, "206 with a malformed Content-Range '%.100s'", r->crange);
			return;
		}
		if (a != want || b > end) {
			xfer_fail(x, FG_EIO, "asked for bytes %" PRIu64 "-%" PRIu64
				  ", the server sent %" PRIu64 "-%" PRIu64, want, end, a, b);
			return;
		}
		x->mode = BM_KEEP;
		learn(x, t);
	} else if (r->status == 200) {
		uint64_t size = r->have_clen ? r->clen : FG_PULL_SIZE_UNKNOWN;

		if (size != FG_PULL_SIZE_UNKNOWN && end >= size) {
			xfer_fail(x, FG_EINPUT, "past the end of the file (%" PRIu64 " bytes)", size);
			return;
		}
		x->mode = BM_SKIP; /* the server ignores Range */
		x->body_pos = 0;
		learn(x, size);
	} else if (r->status == 416) {
		if (r->crange[0] && fg_pull_parse_content_range(r->crange, &a, &b, &t) == 0 &&
		    t != FG_PULL_SIZE_UNKNOWN)
			learn(x, t);
	} else if (r->status >= 200 && r->status < 300) {
		xfer_fail(x, FG_EIO, "unexpected %ld %s", r->status, resp_reason(r));
	}
}

static void copy_value(char *dst, size_t cap, const char *v, size_t len)
{
	if (len >= cap)
		len = cap - 1;
	memcpy(dst, v, len);
	dst[len] = '\0';
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *ud)
{
	struct xfer *x = ud;
	size_t n = size * nitems, len = n;
	const char *colon, *v;
	size_t nl, vl;

	if (x->fatal)
		return 0;
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	if (len >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
		const char *s = buf + 5, *e = buf + len;
		long status = 0;

		memset(&x->r, 0, sizeof(x->r));
		x->headers_done = 0;
		while (s < e && *s != ' ')
			s++;
		while (s < e && *s == ' ')
			s++;
		for (int i = 0; i < 3 && s < e && isdigit((unsigned char)*s); i++, s++)
			status = status * 10 + (*s - '0');
		while (s < e && *s == ' ')
			s++;
		x->r.status = status;
		copy_value(x->r.reason, sizeof(x->r.reason), s, (size_t)(e - s));
		return n;
	}
	if (len == 0) {
		if (x->r.status >= 100 && x->r.status < 200)
			return n;
		if (x->r.status >= 300 && x->r.status < 400 && x->r.have_location)
			return n; /* curl follows it */
		on_headers(x);
		return x->fatal ? 0 : n;
	}
	colon = memchr(buf, ':', len);
	if (!colon)
		return n;
	nl = (size_t)(colon - buf);
	v = colon + 1;
	while (v < buf + len && (*v == ' ' || *v == '\t'))
		v++;
	vl = (size_t)(buf + len - v);
	while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
		vl--;
	if (nl == 4 && strncasecmp(buf, "etag", 4) == 0) {
		copy_value(x->r.etag, sizeof(x->r.etag), v, vl);
	} else if (nl == 13 && strncasecmp(buf, "last-modified", 13) == 0) {
		copy_value(x->r.lastmod, sizeof(x->r.lastmod), v, vl);
	} else if (nl == 13 && strncasecmp(buf, "content-range", 13) == 0) {
		copy_value(x->r.crange, sizeof(x->r.crange), v, vl);
	} else if (nl == 14 && strncasecmp(buf, "content-length", 14) == 0) {
		char num[32];
		const char *s = num;

		copy_value(num, sizeof(num), v, vl);
		x->r.have_clen = parse_u64(&s, &x->r.clen) == 0 && *s == '\0';
	} else if (nl == 8 && strncasecmp(buf, "location", 8) == 0 && x->r.status >= 300 &&
		   x->r.status < 400) {
		char loc[HDR_LINE_MAX], host[256], port[16];
		char *cur = NULL, *target = NULL;
		CURLU *u;
		int ok = 0;

		x->r.have_location = 1;
		if (x->p->n_allow == 0)
			return n;
		copy_value(loc, sizeof(loc), v, vl);
		curl_easy_getinfo(x->easy, CURLINFO_EFFECTIVE_URL, &cur);
		u = curl_url();
		if (u && cur && curl_url_set(u, CURLUPART_URL, cur, 0) == CURLUE_OK &&
		    curl_url_set(u, CURLUPART_URL, loc, 0) == CURLUE_OK &&
		    curl_url_get(u, CURLUPART_URL, &target, 0) == CURLUE_OK &&
		    url_host(target, host, sizeof(host), port, sizeof(port)) == 0)
			ok = host_allowed(x->p, host, port);
		if (!ok)
			xfer_fail(x, FG_EFORBIDDEN, "redirect to '%.200s' refused: host not in allow_hosts",
				  target ? target : loc);
		curl_free(target);
		curl_url_cleanup(u);
		return ok ? n : 0;
	}
	return n;
}

/* Keep n body bytes at the end of what the transfer holds. */
static int sink(struct xfer *x, const char *data, size_t n)
{
	if (n == 0)
		return 0;
	if (x->fd >= 0) {
		if (write_all(x->fd, data, n) != 0)
			return xfer_fail(x, errno == ENOSPC ? FG_ENOSPC : FG_ESTATE, "cache: write '%s': %s", x->tmp,
					 strerror(errno));
		fg_sha256_update(x->sha, data, n);
	} else {
		memcpy(x->buf + x->got, data, n);
	}
	x->got += n;
	x->p->done_bytes += n;
	return 0;
}

static int get_append(struct xfer *x, const char *data, size_t n)
{
	if (n > x->len - x->got)
		return xfer_fail(x, FG_EINPUT, "over the cap of %" PRIu64 " bytes", x->len);
	if (x->got + n + 1 > x->buf_cap) {
		size_t nc = x->buf_cap ? x->buf_cap : 4096;
		uint8_t *nb;

		while (nc < x->got + n + 1)
			nc *= 2;
		nb = realloc(x->buf, nc);
		if (!nb)
			return xfer_fail(x, FG_ENOMEM, "out of memory");
		x->buf = nb;
		x->buf_cap = nc;
	}
	memcpy(x->buf + x->got, data, n);
	x->got += n;
	x->buf[x->got] = '\0';
	x->p->done_bytes += n;
	return 0;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	size_t n = size * nmemb;
	uint64_t want, skip, take;

	if (x->fatal)
		return 0;
	if (!x->headers_done) {
		on_headers(x);
		if (x->fatal)
			return 0;
	}
	x->p->st.bytes_fetched += n;
	switch (x->mode) {
	case BM_KEEP:
		if (x->kind == XK_GET)
			return get_append(x, ptr, n) ? 0 : n;
		if (n > x->len - x->got) {
			xfer_fail(x, FG_EIO, "the server sent more bytes than asked");
			return 0;
		}
		if (sink(x, ptr, n))
			return 0;
		x->complete = x->got == x->len;
		return n;
	case BM_SKIP:
		want = x->start + x->got;
		if (x->body_pos + n > want) {
			skip = want > x->body_pos ? want - x->body_pos : 0;
			take = n - skip;
			if (take > x->len - x->got)
				take = x->len - x->got;
			if (sink(x, ptr + skip, (size_t)take))
				return 0;
		}
		x->body_pos += n;
		if (x->got == x->len) {
			x->complete = 1;
			return 0; /* drop the rest of the file */
		}
		return n;
	case BM_DISCARD:
	case BM_NONE:
	default:
		x->discarded += n;
		return x->discarded > ERROR_BODY_MAX ? 0 : n;
	}
}

static struct xfer *xfer_new(struct fg_pull *p, struct pfile *f, enum xkind kind,
			     uint64_t start, uint64_t len)
{
	struct xfer *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->p = p;
	x->f = f;
	x->kind = kind;
	x->start = start;
	x->len = len;
	x->fd = -1;
	return x;
}

static void xfer_free(struct xfer *x)
{
	if (!x)
		return;
	if (x->easy)
		curl_easy_cleanup(x->easy);
	if (x->fd >= 0)
		close(x->fd);
	if (x->tmp) {
		unlink(x->tmp); /* never leave a partial entry */
		free(x->tmp);
	}
	fg_sha256_free(x->sha);
	free(x->buf);
	free(x);
}

/* Prepare the sink before the first attempt. */
static int xfer_sink_init(struct xfer *x, struct fg_err *err)
{
	struct fg_pull *p = x->p;

	if (x->kind != XK_RANGE)
		return 0;
	if (p->cache) {
		x->fd = tmp_open(p, &x->tmp);
		if (x->fd >= 0) {
			x->sha = fg_sha256_new();
			if (!x->sha)
				return oom(err);
			return 0;
		}
		/* the cache is unusable right now: keep the bytes in memory */
	}
	if (x->len > SIZE_MAX)
		return fg_err_set(err, FG_ENOMEM, "%" PRIu64 " bytes do not fit in memory", x->len);
	x->buf = malloc(x->len ? (size_t)x->len : 1);
	return x->buf ? 0 : oom(err);
}

static int xfer_start(struct fg_pull *p, struct xfer *x, struct fg_err *err)
{
	char range[48];
	CURL *e;
	int rc;

	/* Sinks open at the first attempt, so at most maxconn tmp files are open. */
	if (x->tries == 0 && (rc = xfer_sink_init(x, err)) != 0)
		return rc;
	e = curl_easy_init();
	if (!e)
		return oom(err);
	x->easy = e;
	memset(&x->r, 0, sizeof(x->r));
	x->mode = BM_NONE;
	x->headers_done = 0;
	x->body_pos = 0;
	x->discarded = 0;
	x->errbuf[0] = '\0';
	x->tries++;
	if (x->kind == XK_GET) {
		x->got = 0; /* a retried GET starts over */
		if (x->buf)
			x->buf[0] = '\0';
	}
	curl_easy_setopt(e, CURLOPT_URL, x->f->url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, (void *)x);
	curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
	curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(e, CURLOPT_USERAGENT, p->user_agent);
	if (p->headers)
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, p->headers);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	if (p->connect_timeout)
		curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, (long)p->connect_timeout);
	if (p->timeout) {
		/* A stall, not a duration: a multi-GB head tensor may take minutes. */
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)p->timeout);
	}
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, (void *)x);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, (void *)x);
	if (x->kind != XK_GET) {
		snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64, x->start + x->got,
			 x->start + x->len - 1);
		curl_easy_setopt(e, CURLOPT_RANGE, range);
	}
	if (curl_multi_add_handle(p->multi, e) != CURLM_OK) {
		curl_easy_cleanup(e);
		x->easy = NULL;
		return fg_err_set(err, FG_EINTERNAL, "libcurl refused a transfer");
	}
	x->state = XS_ACTIVE;
	p->st.requests++;
	return 0;
}

/* A successful range transfer: make its bytes a cache entry and map them. */
static int xfer_commit(struct fg_pull *p, struct xfer *x)
{
	char sha[FG_SHA256_HEX];
	void *map;

	if (x->kind == XK_PROBE)
		return 0;
	if (x->kind == XK_GET) {
		if (x->f->size == FG_PULL_SIZE_UNKNOWN) {
			x->f->size = x->got;
			record_store(p, x->f, 0);
		}
		if (p->cache && x->f->validator && x->f->size == x->got) {
			size_t tlen;
			char *tmp = NULL, *trailer;
			int fd;

			fg_sha256_buf(x->buf ? x->buf : (const uint8_t *)"", (size_t)x->got, sha);
			trailer = entry_trailer(x->f, 0, x->got, sha, &tlen);
			fd = trailer ? tmp_open(p, &tmp) : -1;
			if (fd >= 0) {
				int ok = write_all(fd, x->buf ? x->buf : (const uint8_t *)"",
						   (size_t)x->got) == 0 &&
					 write_all(fd, trailer, tlen) == 0;

				close(fd);
				if (!(x->got > 0 && ok && entry_rename(p, x->f, tmp, 0, x->got) == 0))
					unlink(tmp);
				free(tmp);
			}
			free(trailer);
		}
		return 0;
	}
	if (x->fd >= 0) {
		size_t tlen;
		char *trailer;

		fg_sha256_final_hex(x->sha, sha);
		x->sha = NULL;
		map = load_region(p, x->fd, (size_t)x->len);
		if (!map)
			return xfer_fail(x, errno == ENOMEM ? FG_ENOMEM : FG_ESTATE, "cache: read '%s': %s",
					 x->tmp, strerror(errno));
		/* Without a validator the bytes cannot be named: serve, do not keep. */
		if (x->f->validator) {
			trailer = entry_trailer(x->f, x->start, x->len, sha, &tlen);
			if (trailer && write_all(x->fd, trailer, tlen) == 0 &&
			    entry_rename(p, x->f, x->tmp, x->start, x->len) == 0) {
				free(x->tmp);
				x->tmp = NULL;
			}
			free(trailer);
		}
		close(x->fd);
		x->fd = -1;
	} else {
		map = x->buf;
		if (add_mapping(p, map, (size_t)x->len, 0) != 0)
			return xfer_fail(x, FG_ENOMEM, "out of memory");
		x->buf = NULL;
	}
	x->data = map;
	if (add_extent(x->f, x->start, x->len, map) != 0)
		return xfer_fail(x, FG_ENOMEM, "out of memory");
	return 0;
}

static int retryable_curl(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_PARTIAL_FILE:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
		return 1;
	default:
		return 0;
	}
}

/* A transfer ended: success, a retry scheduled, or a final error. */
static void xfer_finish(struct fg_pull *p, struct xfer *x, CURLcode res)
{
	char label[FG_ERR_MSG_MAX], why[FG_ERR_MSG_MAX];
	long s = x->r.status;
	int retry = 0, code = FG_EIO;

	x->state = XS_DONE;
	if (x->fatal)
		return;
	if (x->complete && (res == CURLE_OK || res == CURLE_WRITE_ERROR)) {
		x->rc = xfer_commit(p, x);
		return;
	}
	xfer_label(x, label, sizeof(label));
	if (res != CURLE_OK) {
		const char *cm = x->errbuf[0] ? x->errbuf : curl_easy_strerror(res);

		if (x->kind == XK_RANGE && (res == CURLE_PARTIAL_FILE || res == CURLE_RECV_ERROR ||
					    res == CURLE_OPERATION_TIMEDOUT))
			snprintf(why, sizeof(why), "the transfer broke off after %" PRIu64 " of %"
				 PRIu64 " bytes (%s)", x->got, x->len, cm);
		else
			snprintf(why, sizeof(why), "%s", cm);
		retry = retryable_curl(res);
	} else if (s >= 200 && s < 300) {
		if (x->kind == XK_GET || x->got == x->len) {
			x->rc = xfer_commit(p, x);
			return;
		}
		snprintf(why, sizeof(why), "the response ended after %" PRIu64 " of %" PRIu64 " bytes",
			 x->got, x->len);
		retry = 1;
	} else if (s == 416) {
		if (x->kind == XK_PROBE && x->f->size != FG_PULL_SIZE_UNKNOWN)
			return; /* an empty file: its size is known, nothing to fetch */
		code = FG_EINPUT;
		if (x->f->size != FG_PULL_SIZE_UNKNOWN)
			snprintf(why, sizeof(why), "416 %s: the file has %" PRIu64 " bytes",
				 resp_reason(&x->r), x->f->size);
		else
			snprintf(why, sizeof(why), "416 %s", resp_reason(&x->r));
	} else if (s == 404 || s == 410) {
		code = FG_ENOTFOUND;
		snprintf(why, sizeof(why), "%ld %s", s, resp_reason(&x->r));
		record_store(p, x->f, 1);
	} else if (s == 401 || s == 403) {
		snprintf(why, sizeof(why), "%ld %s%s", s, resp_reason(&x->r),
			 p->rev ? (p->headers ? " (is HF_TOKEN allowed to read this repository?)"
					      : " (set HF_TOKEN for a gated or private repository)")
				: "");
	} else if (s == 429 || s >= 500) {
		snprintf(why, sizeof(why), "%ld %s", s, resp_reason(&x->r));
		retry = 1;
	} else {
		snprintf(why, sizeof(why), "%ld %s", s, resp_reason(&x->r));
	}
	if (retry && x->tries <= p->retries) {
		unsigned shift = x->tries - 1 < 16 ? x->tries - 1 : 16;
		uint64_t delay = (uint64_t)p->backoff_ms << shift;

		x->state = XS_WAIT;
		x->ready_ms = now_ms() + (int64_t)(delay > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay);
		return;
	}
	if (retry && x->tries > 1)
		fg_err_set(&x->err, code, "%s: %s (after %u attempts)", label, why, x->tries);
	else
		fg_err_set(&x->err, code, "%s: %s", label, why);
	x->rc = code;
}

static int report_progress(struct fg_pull *p)
{
	if (!p->progress)
		return 0;
	return p->progress(p->progress_ctx, p->done_bytes, p->st.bytes_to_fetch);
}

/*
 * Run the transfers to completion, at most maxconn at once.  The first
 * failure stops the rest; its error is returned.  Transfers are left for
 * the caller to free (successful ones own their results until then).
 */
static int run(struct fg_pull *p, struct xfer **xs, size_t n, struct fg_err *err)
{
	size_t active = 0;
	int rc = 0;
	uint64_t last_done = UINT64_MAX;

	for (size_t i = 0; i < n; i++) {
		xs[i]->state = XS_WAIT;
		xs[i]->ready_ms = 0;
	}
	for (;;) {
		int64_t now = now_ms(), wait_ms = 200; /* progress and cancellation stay responsive */
		int running = 0, left = 0, waiting = 0;
		CURLMsg *m;

		/* start what may start, in order: fresh transfers and due retries */
		for (size_t i = 0; i < n && active < p->maxconn; i++) {
			struct xfer *x = xs[i];

			if (x->state != XS_WAIT || x->ready_ms > now)
				continue;
			rc = xfer_start(p, x, err);
			if (rc)
				goto abort;
			active++;
		}
		if (active == 0) {
			/* only retries waiting for their time, or nothing left */
			for (size_t i = 0; i < n; i++) {
				if (xs[i]->state == XS_WAIT) {
					if (!waiting || xs[i]->ready_ms - now < wait_ms)
						wait_ms = xs[i]->ready_ms - now;
					waiting = 1;
				}
			}
			if (!waiting)
				break;
			if (wait_ms > 0)
				curl_multi_poll(p->multi, NULL, 0, (int)wait_ms, NULL);
			continue;
		}
		curl_multi_perform(p->multi, &running);
		while ((m = curl_multi_info_read(p->multi, &left)) != NULL) {
			struct xfer *x = NULL;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
			CURLcode res = m->data.result;

			curl_multi_remove_handle(p->multi, x->easy);
			curl_easy_cleanup(x->easy);
			x->easy = NULL;
			active--;
			xfer_finish(p, x, res);
			if (x->state == XS_DONE && x->rc) {
				if (err) {
					err->code = x->err.code;
					memcpy(err->msg, x->err.msg, sizeof(err->msg));
				}
				rc = x->rc;
				goto abort;
			}
		}
		if (p->done_bytes != last_done) {
			last_done = p->done_bytes;
			if (report_progress(p)) {
				rc = fg_err_set(err, FG_ECANCELLED, "fetching from %s: cancelled", p->base);
				goto abort;
			}
		}
		if (active > 0)
			curl_multi_poll(p->multi, NULL, 0, (int)wait_ms, NULL);
	}
	return 0;
abort:
	for (size_t i = 0; i < n; i++) {
		if (xs[i]->easy) {
			curl_multi_remove_handle(p->multi, xs[i]->easy);
			curl_easy_cleanup(xs[i]->easy);
			xs[i]->easy = NULL;
		}
	}
	return rc;
}

static void xfers_free(struct xfer **xs, size_t n)
{
	if (!xs)
		return;
	for (size_t i = 0; i < n; i++)
		xfer_free(xs[i]);
	free(xs);
}

/* ---- public API ---- */

int fg_pull_open(struct fg_pull **out, const char *source, const struct fg_pull_opts *o,
		 struct fg_err *err)
{
	struct fg_pull_opts def;
	struct fg_pull *p = NULL;
	const char *endpoint, *token, *ua;
	char *base = NULL, *rev = NULL, *file = NULL, host[256], port[16];
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
		rc = oom(err);
		goto fail;
	}
	p->base = base;
	p->rev = rev;
	p->single = file;
	base = rev = file = NULL;
	p->immutable = p->rev && is_hex40(p->rev);
	p->cap = o->cache_cap_bytes;
	p->ttl = o->cache_ttl_seconds;
	p->maxconn = o->max_connections ? o->max_connections : 1;
	p->merge_gap = o->merge_gap;
	p->timeout = o->timeout_seconds;
	p->connect_timeout = o->connect_timeout_seconds;
	p->retries = o->retries;
	p->backoff_ms = o->backoff_ms;
	ua = o->user_agent ? o->user_agent : USER_AGENT;
	p->user_agent = strdup(ua);
	if (!p->user_agent) {
		rc = oom(err);
		goto fail;
	}
	if (strlen(p->base) > BASE_URL_MAX) {
		rc = fg_err_set(err, FG_EUSAGE, "source '%.200s...': URL too long", source);
		goto fail;
	}
	if (url_host(p->base, host, sizeof(host), port, sizeof(port)) != 0) {
		rc = fg_err_set(err, FG_EUSAGE, "source '%s': no host", source);
		goto fail;
	}
	if (o->n_allow_hosts) {
		p->allow = calloc(o->n_allow_hosts, sizeof(*p->allow));
		if (!p->allow) {
			rc = oom(err);
			goto fail;
		}
		for (size_t i = 0; i < o->n_allow_hosts; i++) {
			p->allow[i] = strdup(o->allow_hosts[i] ? o->allow_hosts[i] : "");
			if (!p->allow[i]) {
				rc = oom(err);
				goto fail;
			}
			p->n_allow++;
		}
		if (!host_allowed(p, host, port)) {
			rc = fg_err_set(err, FG_EFORBIDDEN, "source '%s': host '%s' is not in allow_hosts",
					source, host);
			goto fail;
		}
	}
	token = o->hf_token ? o->hf_token : getenv("HF_TOKEN");
	if (p->rev && token && *token) {
		char *h;

		if (strpbrk(token, "\r\n")) {
			rc = fg_err_set(err, FG_EUSAGE, "HF token holds a line break");
			goto fail;
		}
		h = str_fmt("Authorization: Bearer %s", token);
		if (!h) {
			rc = oom(err);
			goto fail;
		}
		/* curl drops this header on a redirect to another host (the CDN). */
		p->headers = curl_slist_append(NULL, h);
		free(h);
		if (!p->headers) {
			rc = oom(err);
			goto fail;
		}
	}
	if (o->cache_dir) {
		char sub[PATH_BUF];

		if (strlen(o->cache_dir) > OPEN_CACHE_DIR_MAX) {
			rc = fg_err_set(err, FG_EUSAGE, "cache folder path is too long");
			goto fail;
		}
		p->cache = str_fmt("%s/v1", o->cache_dir);
		if (!p->cache) {
			rc = oom(err);
			goto fail;
		}
		static const char *const subs[] = { "files", "ranges", "tmp" };
		for (size_t i = 0; i < 3; i++) {
			snprintf(sub, sizeof(sub), "%s/%s", p->cache, subs[i]);
			if (mkdir_p(sub, 0700) != 0) {
				rc = fg_err_set(err, errno == ENOSPC ? FG_ENOSPC : FG_ESTATE, "cache folder '%s': %s", sub,
						strerror(errno));
				goto fail;
			}
		}
	}
	p->multi = curl_multi_init();
	if (!p->multi) {
		rc = oom(err);
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
				return oom(err);
		}
		xs[nx] = xfer_new(p, fs[i], XK_PROBE, 0, 1);
		if (!xs[nx]) {
			rc = oom(err);
			goto out;
		}
		nx++;
	}
	if (nx) {
		for (size_t i = 0; i < nx; i++) {
			xs[i]->buf = malloc(1);
			if (!xs[i]->buf) {
				rc = oom(err);
				goto out;
			}
		}
		p->st.bytes_to_fetch += nx;
		rc = run(p, xs, nx, err);
	}
out:
	xfers_free(xs, nx);
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
		x = xfer_new(p, f, XK_PROBE, 0, 1);
		if (!x)
			return oom(err);
		x->buf = malloc(1);
		p->gen++;
		p->st.bytes_to_fetch += 1;
		rc = x->buf ? run(p, &x, 1, err) : oom(err);
		xfer_free(x);
		if (rc)
			return rc;
		if (f->size == FG_PULL_SIZE_UNKNOWN)
			return fg_err_set(err, FG_EIO, "GET %s: the server did not tell the file's size",
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
			    disk_find(p, f, 0, f->size, &hit) != 0)
				return oom(err);
		}
		if (hit || f->size == 0) {
			copy = malloc((size_t)f->size + 1);
			if (!copy)
				return oom(err);
			if (f->size)
				memcpy(copy, hit, (size_t)f->size);
			copy[f->size] = '\0';
			*data = copy;
			*len = (size_t)f->size;
			return 0;
		}
	}
	x = xfer_new(p, f, XK_GET, 0, cap);
	if (!x)
		return oom(err);
	rc = run(p, &x, 1, err);
	if (rc == 0) {
		if (!x->buf) {
			x->buf = malloc(1);
			if (!x->buf) {
				xfer_free(x);
				return oom(err);
			}
			x->buf[0] = '\0';
		}
		*data = x->buf;
		*len = (size_t)x->got;
		x->buf = NULL;
		if (p->committed)
			cache_evict(p);
	}
	xfer_free(x);
	return rc;
}

int fg_pull_ranges(struct fg_pull *p, struct fg_pull_range *r, size_t n, struct fg_err *err)
{
	static const uint8_t empty[1];
	const uint8_t **res = NULL;
	struct pfile **rf = NULL;
	struct xfer **xs = NULL, **miss_x = NULL;
	size_t *miss = NULL, n_miss = 0, nx = 0;
	struct fg_pull_extent *ext = NULL;
	struct fg_pull_span *spans = NULL;
	size_t *order = NULL;
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
		rc = oom(err);
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
		    disk_find(p, f, r[i].offset, r[i].len, &res[i]) != 0) {
			rc = oom(err);
			goto out;
		}
		if (!res[i])
			miss[n_miss++] = i;
	}
	if (n_miss) {
		/* plan per file: group the misses by file, merge, one transfer per span */
		xs = calloc(n_miss, sizeof(*xs));
		miss_x = calloc(n, sizeof(*miss_x));
		ext = calloc(n_miss, sizeof(*ext));
		spans = calloc(n_miss, sizeof(*spans));
		order = calloc(n_miss, sizeof(*order));
		size_t *idx = calloc(n_miss, sizeof(*idx));
		char *done = calloc(n_miss, 1);

		if (!xs || !miss_x || !ext || !spans || !order || !idx || !done) {
			free(idx);
			free(done);
			rc = oom(err);
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
				struct xfer *x = xfer_new(p, f, XK_RANGE, spans[s].offset, spans[s].len);

				if (!x) {
					free(idx);
					free(done);
					rc = oom(err);
					goto out;
				}
				xs[nx++] = x;
				p->st.bytes_to_fetch += spans[s].len;
				for (size_t c = 0; c < spans[s].count; c++)
					miss_x[idx[order[spans[s].first + c]]] = x;
			}
		}
		free(idx);
		free(done);
		rc = run(p, xs, nx, err);
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
		cache_evict(p);
out:
	xfers_free(xs, nx);
	free(miss_x);
	free(ext);
	free(spans);
	free(order);
	free(miss);
	free(rf);
	free(res);
	return rc;
}

void fg_pull_stats(const struct fg_pull *p, struct fg_pull_stats *out)
{
	*out = p->st;
}

void fg_pull_set_progress(struct fg_pull *p, int (*cb)(void *ctx, uint64_t done, uint64_t total),
			  void *ctx)
{
	p->progress = cb;
	p->progress_ctx = ctx;
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
