/*
 * pull.h: read a remote checkpoint folder by HTTP range requests.
 *
 * Checkpoints live on a Hugging Face hub, a mirror of one, or an internal
 * artifact server, and weigh hundreds of GB; forged needs their JSON files,
 * the safetensors headers and a few tensors.  A pull names one remote folder
 * (an http(s):// base URL, or hf://ORG/NAME[@REV] resolved against the hub
 * endpoint) and fetches whole small files and byte ranges of the others, in
 * parallel over reused connections, with retries, through a verified
 * content-addressed cache on disk so that a second look at the same revision
 * transfers nothing.
 *
 * A struct fg_pull is used by one thread at a time (it drives its own libcurl
 * multi handle on the calling thread); separate pulls may run in separate
 * threads.  Nothing here logs: failures come back as FG_E* codes with a
 * message naming the method, the URL, the status and the reason.
 */
#ifndef FG_PULL_H
#define FG_PULL_H

#include <stddef.h>
#include <stdint.h>

#include "forge/core/error.h"

#define FG_PULL_SIZE_UNKNOWN UINT64_MAX
#define FG_PULL_MERGE_GAP    (64u << 10) /* ranges of a file this close share a request */
/* The hub hf:// sources resolve against when neither hf_endpoint nor $HF_ENDPOINT names one. */
#define FG_PULL_HF_DEFAULT_ENDPOINT "https://huggingface.co"

struct fg_pull;

struct fg_pull_opts {
	const char *cache_dir;        /* content-addressed cache folder (created); NULL: no cache */
	uint64_t cache_cap_bytes;     /* LRU eviction above this; 0: no cap */
	unsigned cache_ttl_seconds;   /* how long a file's validator (ETag) learned from the
				       * server is trusted without asking again; an hf:// revision
				       * that is a 40-hex commit is trusted for ever; 0: ask once
				       * per pull (one 1-byte probe per file) */
	unsigned max_connections;     /* parallel transfers (0 is taken as 1) */
	uint64_t merge_gap;           /* misses of a file this close share a request (default
				       * FG_PULL_MERGE_GAP; 0: only touching ranges merge) */
	uint64_t max_bytes;           /* bytes this pull may download in all (an inspection, or a
				       * job's source: its inspection and its head fetch); a range
				       * fetch past it fails with FG_EINPUT before it starts; 0: none */
	unsigned timeout_seconds;     /* a transfer receiving nothing this long fails; 0: none */
	unsigned connect_timeout_seconds; /* 0: libcurl's default */
	unsigned retries;             /* extra attempts on 5xx, 429, network errors, truncation */
	unsigned backoff_ms;          /* first retry delay, doubled each time (capped at 8 s) */
	const char *hf_endpoint;      /* for hf:// (NULL: $HF_ENDPOINT; NULL or empty there:
				       * FG_PULL_HF_DEFAULT_ENDPOINT) */
	const char *hf_token;         /* bearer token for hf:// sources (NULL: $HF_TOKEN, else
				       * the first line of the hub's token file, see
				       * fg_pull_hf_token_path; "" sends none) */
	const char *hf_offline;       /* NULL: $HF_HUB_OFFLINE.  "1", "true", "yes" or "on"
				       * (any case): an hf:// pull makes no request; it serves
				       * what the cache holds, expired records included, and
				       * anything else fails (FG_EINPUT naming the URL) */
	const char *user_agent;       /* NULL: "forged" */
	const char *const *allow_hosts; /* when n_allow_hosts > 0, the source's host and every */
	size_t n_allow_hosts;           /* redirect target must be listed ("host" or "host:port") */
	/* Progress from the start (as fg_pull_set_progress), NULL: none. */
	int (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *progress_ctx;
};

/*
 * Fill o with the defaults: no cache, max_bytes 64 GiB, cap 10 GiB, TTL 1 hour,
 * 8 connections, timeout 60 s, connect timeout 10 s, 4 retries from 250 ms,
 * $HF_ENDPOINT, $HF_TOKEN (or the token file) and $HF_HUB_OFFLINE read at
 * fg_pull_open time, no host list.
 */
void fg_pull_opts_init(struct fg_pull_opts *o);

/* 1 when source is an http://, https:// or hf:// URL (case-insensitive scheme). */
int fg_pull_is_url(const char *source);

/*
 * Open the remote folder source: an http(s):// base URL (a trailing '/' is
 * implied) or hf://ORG/NAME[@REV] -> {endpoint}/ORG/NAME/resolve/REV/ (REV
 * default main, percent-encoded; a branch, a tag or a commit).  A URL whose
 * last segment ends in ".safetensors" names one file: the pull's folder is
 * its parent and fg_pull_source_file() returns the name.  o may be NULL
 * (defaults).  Nothing is fetched.  Errors: FG_EUSAGE for a malformed
 * source, a query string, an endpoint that is not http(s); FG_EFORBIDDEN
 * for a host not in allow_hosts;
 * FG_ESTATE (FG_ENOSPC on a full disk) when the cache folder cannot be
 * created; FG_ENOMEM.  On success *out is the caller's to
 * release with fg_pull_close().
 */
int fg_pull_open(struct fg_pull **out, const char *source, const struct fg_pull_opts *o,
		 struct fg_err *err);

/* The folder URL, ending in '/' (borrowed). */
const char *fg_pull_base_url(const struct fg_pull *p);

/* The file a single-file source named (borrowed), or NULL for a folder. */
const char *fg_pull_source_file(const struct fg_pull *p);

/* The hf:// revision as the source named it ("main" by default; borrowed), or NULL for http(s). */
const char *fg_pull_revision(const struct fg_pull *p);

/*
 * The commit an hf:// revision resolved to (borrowed), or NULL while unknown
 * (nothing read yet, or a server that does not say).  A revision that is a
 * commit is its own; a branch or tag resolves through the X-Repo-Commit
 * header the hub sends with every resolve response (the first hop of a
 * redirect included), and cache records keep it, so a pull served from the
 * cache knows it too.  All files of a pull come from one commit: a response
 * naming another one (the branch moved while being read) fails the call
 * with FG_EINPUT and drops the records of the pull's files, so a rerun reads
 * the new commit whole.
 */
const char *fg_pull_resolved_commit(const struct fg_pull *p);

/*
 * Fetch the whole of file (a path relative to the folder: no "..", no
 * leading '/', no query) into *data (malloc'd, NUL-terminated past *len; the
 * caller frees it).  404 -> FG_ENOTFOUND (callers treat optional files that
 * way); 401/403 and other failures -> FG_EINPUT (an input error) naming URL
 * and status; a redirect to a host not in allow_hosts -> FG_EFORBIDDEN; a
 * cache that cannot be read or written -> FG_ESTATE or FG_ENOSPC; a body
 * over cap bytes -> FG_EINPUT (the transfer stops at cap).  Served from the
 * cache when a verified copy of the same revision is there.
 */
int fg_pull_get(struct fg_pull *p, const char *file, uint8_t **data, size_t *len, size_t cap,
		struct fg_err *err);

struct fg_pull_range {
	const char *file;             /* borrowed for the call */
	uint64_t offset, len;
	const uint8_t *data;          /* out: len bytes, valid until fg_pull_close */
};

/*
 * Fetch n byte ranges (any files, any order, overlaps allowed).  Each range
 * is served from memory (already fetched by this pull), else from the cache
 * (verified against its SHA-256; a bad entry is deleted and refetched), else
 * fetched: the misses of one file are merged into one request while the gap
 * between them is at most FG_PULL_MERGE_GAP, and the requests run in parallel
 * on at most max_connections connections.  A server that ignores Range
 * (answers 200) is read up to the end of the range and the transfer dropped.
 * Each file's total size is recorded (see fg_pull_size).  On success every
 * r[i].data is set; on failure none is and err names the URL, the byte range
 * and the status or network error: FG_ENOTFOUND for 404, FG_EINPUT for a
 * range past the end of the file (416), FG_EINPUT otherwise, FG_ECANCELLED when
 * the progress callback asked to stop.  A failed transfer leaves no cache
 * entry.
 */
int fg_pull_ranges(struct fg_pull *p, struct fg_pull_range *r, size_t n, struct fg_err *err);

/*
 * The total size of file: known without a request once a range of it was
 * fetched (or served from the cache); otherwise one 1-byte range request.
 */
int fg_pull_size(struct fg_pull *p, const char *file, uint64_t *size, struct fg_err *err);

struct fg_pull_stats {
	uint64_t bytes_fetched;       /* response body bytes received (incl. skipped ones) */
	uint64_t bytes_from_cache;    /* bytes of verified cache entries read (whole entries) */
	uint64_t requests;            /* HTTP transfers started (each retry counts) */
	uint64_t bytes_to_fetch;      /* bytes this pull decided to download so far */
	uint64_t max_bytes;           /* fg_pull_opts.max_bytes (0: none) */
};

void fg_pull_stats(const struct fg_pull *p, struct fg_pull_stats *out);

/*
 * Call cb(ctx, done, total) on the calling thread while transfers run (done:
 * useful bytes received; total: stats.bytes_to_fetch).  A non-zero return
 * stops the current call with FG_ECANCELLED.  cb NULL removes it.
 */
void fg_pull_set_progress(struct fg_pull *p, int (*cb)(void *ctx, uint64_t done, uint64_t total),
			  void *ctx);

/*
 * The SHA-256 of file as the server named it: the hub's X-Linked-Etag of an
 * LFS file (its LFS oid, which is the file's SHA-256), learnt from a
 * response or kept in the cache's record of that file version; NULL when
 * the server gave none (or file is unknown to this pull).  Nothing is
 * fetched.  Borrowed, valid until fg_pull_close.
 */
const char *fg_pull_file_sha256(struct fg_pull *p, const char *file);

/* Release p, its connections and every range it handed out.  NULL allowed. */
void fg_pull_close(struct fg_pull *p);

/*
 * ---- For tests only ----
 *
 * The pure pieces a pull is built from (forge/source/pull/url.c and
 * ranges.c), exported so that tests/unit/test_pull.c can pin them without a
 * server.  They are not API: nothing outside forge/source/pull/ but the unit
 * tests calls them, and they change with the implementation.
 */

/*
 * Split source into the folder URL *base (malloc'd, ends in '/'), the hf
 * revision *rev (malloc'd, NULL for http(s)) and the single file *file
 * (malloc'd or NULL).  hf_endpoint is used for hf:// only (NULL or empty:
 * FG_PULL_HF_DEFAULT_ENDPOINT).
 */
int fg_pull_parse_source(const char *source, const char *hf_endpoint, char **base, char **rev,
			 char **file, struct fg_err *err);

/*
 * Where the hub's token file is: $HF_HOME/token, HF_HOME defaulting to
 * $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface (as the Hugging
 * Face tools keep it).  Written into buf; NULL when no variable gives a
 * folder or the path does not fit.
 */
const char *fg_pull_hf_token_path(char *buf, size_t len);

/* base + file with file's bytes percent-encoded (except '/'); malloc'd or NULL. */
char *fg_pull_file_url(const char *base, const char *file);

/*
 * Parse a Content-Range value: "bytes A-B/TOTAL", "bytes A-B/<star>" (total
 * unknown: *total = FG_PULL_SIZE_UNKNOWN) or the 416 form "bytes <star>/TOTAL"
 * (*first = *last = FG_PULL_SIZE_UNKNOWN).  Returns 0, or FG_EINPUT when
 * malformed (B < A, B >= TOTAL, overflow, trailing junk).
 */
int fg_pull_parse_content_range(const char *value, uint64_t *first, uint64_t *last,
				uint64_t *total);

struct fg_pull_extent {
	uint64_t offset, len;
};

struct fg_pull_span {
	uint64_t offset, len;
	size_t first, count;          /* order[first .. first + count) are its extents */
};

/*
 * Sort order[0..n) (indices into ext, filled here) by offset and group the
 * extents into spans: the next extent joins the current span when it starts
 * at most max_gap bytes past the span's end (overlaps always join).  spans
 * needs room for n.  Returns the number of spans.  Extents must not overflow
 * (offset + len <= UINT64_MAX).
 */
size_t fg_pull_plan(const struct fg_pull_extent *ext, size_t n, uint64_t max_gap, size_t *order,
		    struct fg_pull_span *spans);

/*
 * An X-Linked-Etag value ("HEX", W/"HEX" or HEX) that is a SHA-256 into out
 * (64 lower-case hex digits and a NUL; out may be etag itself): 1, else 0
 * and out untouched.
 */
int fg_pull_lfs_oid(const char *etag, char out[65]);

/* The cache folder of one remote file version: SHA-256 of (url, validator, size). */
void fg_pull_cache_key(const char *url, const char *validator, uint64_t size,
		       char hex[65]);

struct fg_pull_cache_item {
	uint64_t bytes;
	int64_t used_ns;              /* last use (mtime) */
	size_t id;                    /* the caller's tag */
};

/*
 * Sort items least recently used first (ties by id) and return how many of
 * the first ones must go for the rest to total at most cap bytes.
 */
size_t fg_pull_evict_plan(struct fg_pull_cache_item *items, size_t n, uint64_t cap);

#endif
