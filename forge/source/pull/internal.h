/*
 * internal.h: declarations shared by the .c files of forge/source/pull/ and
 * by nothing else.  Only those files include it; every other caller, the
 * unit tests included, goes through pull.h, and the split added nothing
 * there.  It holds the buffer limits the files agree on, the state of a pull
 * (struct fg_pull), of one remote file (struct pfile) and of one transfer
 * (struct xfer), and the functions one file calls in another, all named
 * fgp_*; everything else stays static in its file.
 *
 * Who owns what: url.c parses sources, encodes file names and checks hosts;
 * ranges.c holds the pure helpers (Content-Range, merge plan, cache key,
 * eviction plan); cache.c reads and writes the cache on disk; xfer.c runs
 * the transfers; pull.c keeps the files, the regions handed out and the
 * public API, and its header paragraph is the design note of the whole.
 */
#ifndef FG_PULL_INTERNAL_H
#define FG_PULL_INTERNAL_H

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "forge/core/error.h"
#include "forge/source/pull/pull.h"

/* Limits that hold together: a cache folder of OPEN_CACHE_DIR_MAX plus an
 * entry name fits PATH_BUF; a base URL plus an encoded file name fits URL_BUF. */
#define FILE_NAME_MAX    1024
#define PATH_BUF         4096
#define OPEN_CACHE_DIR_MAX 3000
#define BASE_URL_MAX     3000         /* + an encoded file name fits URL_BUF */
#define URL_BUF          8192
#define COMMIT_BUF       65           /* a git commit id: 40 (SHA-1) or 64 (SHA-256) hex digits */

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
	char commit[COMMIT_BUF];     /* the hf:// commit validator and size belong to, or "" */
	int served;                  /* bytes under validator were handed out */
	char lfs_oid[65];            /* the hub's SHA-256 of the file (X-Linked-Etag), or "" */
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
	int offline;                 /* HF_HUB_OFFLINE for an hf:// source: no request at all */
	char commit[COMMIT_BUF];     /* the commit rev resolved to, or "" while unknown */
	char *user_agent;
	struct curl_slist *headers;  /* Authorization, when a token applies */
	char **allow;
	size_t n_allow;
	char *cache;                 /* cache_dir/v1, or NULL */
	uint64_t cap;
	unsigned ttl, maxconn, timeout, connect_timeout, retries, backoff_ms;
	uint64_t merge_gap;
	uint64_t max_bytes;       /* fg_pull_opts.max_bytes */
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
	char lfs_oid[65];            /* X-Linked-Etag of any response of this attempt, when a SHA-256 */
	char commit[COMMIT_BUF];     /* X-Repo-Commit of any response of this attempt */
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

/* pull.c: helpers, the files of the folder and the regions handed out */
char *fgp_str_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int fgp_oom(struct fg_err *err);
int fgp_add_mapping(struct fg_pull *p, void *addr, size_t len, int is_mmap);
void fgp_drop_last_mapping(struct fg_pull *p);
void *fgp_load_region(struct fg_pull *p, int fd, size_t len);
int fgp_add_extent(struct pfile *f, uint64_t offset, uint64_t len, const uint8_t *data);
int fgp_commit_ok(const char *s);

/* url.c: file names and hosts */
int fgp_file_name_ok(const char *name);
int fgp_url_host(const char *url, char *host, size_t hcap, char *port, size_t pcap);
int fgp_host_allowed(const struct fg_pull *p, const char *host, const char *port);

/* ranges.c: a decimal uint64_t (Content-Range, cache names and records, Content-Length) */
int fgp_parse_u64(const char **s, uint64_t *out);

/* cache.c: records, entries and eviction */
int fgp_record_load(struct fg_pull *p, struct pfile *f);
void fgp_record_store(struct fg_pull *p, const struct pfile *f, int absent);
void fgp_record_drop(struct fg_pull *p, const struct pfile *f);
int fgp_tmp_open(const struct fg_pull *p, char **path);
char *fgp_entry_trailer(const struct pfile *f, uint64_t offset, uint64_t len,
			const char *sha, size_t *tlen);
int fgp_entry_rename(struct fg_pull *p, const struct pfile *f, const char *tmp,
		     uint64_t offset, uint64_t len);
int fgp_disk_find(struct fg_pull *p, struct pfile *f, uint64_t offset, uint64_t len,
		  const uint8_t **data);
void fgp_cache_evict(struct fg_pull *p);

/* xfer.c: transfers */
struct xfer *fgp_xfer_new(struct fg_pull *p, struct pfile *f, enum xkind kind,
			  uint64_t start, uint64_t len);
void fgp_xfer_free(struct xfer *x);
void fgp_xfers_free(struct xfer **xs, size_t n);
int fgp_run(struct fg_pull *p, struct xfer **xs, size_t n, struct fg_err *err);

#endif
