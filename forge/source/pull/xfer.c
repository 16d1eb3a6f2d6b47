/*
 * xfer.c: the transfers of a pull (internal.h; the policy is described in
 * pull.c's header).  It owns the libcurl easy handles and the run of a batch
 * on the pull's multi handle, the header and body callbacks (status,
 * validators, Content-Range, redirects against the allow-list, servers that
 * ignore Range), the sinks (a cache tmp file or memory), the commit of a
 * finished range into a cache entry, and retries with backoff.
 */
#include "forge/source/pull/internal.h"

#include "forge/core/fs.h"
#include "forge/core/grow.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "forge/core/sha256.h"

#define ERROR_BODY_MAX   (1u << 20)   /* error bodies are read and dropped up to this */
#define BACKOFF_MAX_MS   8000u
#define HDR_LINE_MAX     2048

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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
		return fgp_str_fmt("etag:%s", r->etag);
	if (r->lastmod[0])
		return fgp_str_fmt("lm:%s", r->lastmod);
	if (p->rev)
		return fgp_str_fmt("rev:%s", p->rev);
	return NULL;
}

/*
 * The commit a response of an hf:// pull names (X-Repo-Commit): it becomes
 * the pull's when it has none yet, and another one than the pull's means the
 * revision moved between two responses.  Then the files of this pull cannot
 * be trusted to belong together: fail, and drop their records so that the
 * next run reads them all again at the new commit.
 */
static int note_commit(struct xfer *x)
{
	struct fg_pull *p = x->p;

	if (!p->rev || !x->commit[0])
		return 0;
	if (p->commit[0] && strcmp(p->commit, x->commit) != 0) {
		for (size_t i = 0; i < p->n_files; i++)
			fgp_record_drop(p, p->files[i]);
		return xfer_fail(x, FG_EINPUT, "revision '%s' moved while being read (commit %s, now %s); run again",
				 p->rev, p->commit, x->commit);
	}
	memcpy(p->commit, x->commit, sizeof(p->commit));
	memcpy(x->f->commit, x->commit, sizeof(x->f->commit));
	return 0;
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
	char *v;
	int same, new_oid = x->lfs_oid[0] && strcmp(x->lfs_oid, f->lfs_oid) != 0;

	if (note_commit(x) != 0)
		return x->rc;
	v = resp_validator(p, &x->r);
	if (!v && (x->r.etag[0] || x->r.lastmod[0] || p->rev))
		return xfer_fail(x, FG_ENOMEM, "out of memory");
	same = (!v && !f->validator) || (v && f->validator && strcmp(v, f->validator) == 0);
	if (same && size != FG_PULL_SIZE_UNKNOWN && f->size != FG_PULL_SIZE_UNKNOWN &&
	    size != f->size)
		same = 0;
	if (f->state == F_KNOWN && same) {
		free(v);
		if (new_oid)
			memcpy(f->lfs_oid, x->lfs_oid, sizeof(f->lfs_oid));
		if ((f->size == FG_PULL_SIZE_UNKNOWN && size != FG_PULL_SIZE_UNKNOWN) || new_oid) {
			if (size != FG_PULL_SIZE_UNKNOWN)
				f->size = size;
			fgp_record_store(p, f, 0);
		}
		return 0;
	}
	if (f->state == F_KNOWN && f->served) {
		fgp_record_drop(p, f);
		free(v);
		return xfer_fail(x, FG_EINPUT,
				 "the file changed on the server while being read (was %s, %" PRIu64
				 " bytes); run again", f->validator ? f->validator : "unversioned",
				 f->size);
	}
	free(f->validator);
	f->validator = v;
	f->size = size;
	f->state = F_KNOWN;
	memcpy(f->lfs_oid, x->lfs_oid, sizeof(f->lfs_oid)); /* another version: its own oid, or none */
	f->disk_gen = 0;
	fgp_record_store(p, f, 0);
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
			xfer_fail(x, FG_EINPUT, "unexpected %ld %s", r->status, resp_reason(r));
		}
		return;
	}
	if (r->status == 206) {
		if (!r->crange[0] || fg_pull_parse_content_range(r->crange, &a, &b, &t) != 0 ||
		    a == FG_PULL_SIZE_UNKNOWN) {
			xfer_fail(x, FG_EINPUT, "206 with a malformed Content-Range '%.100s'", r->crange);
			return;
		}
		if (a != want || b > end) {
			xfer_fail(x, FG_EINPUT, "asked for bytes %" PRIu64 "-%" PRIu64
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
		xfer_fail(x, FG_EINPUT, "unexpected %ld %s", r->status, resp_reason(r));
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
	} else if (nl == 13 && strncasecmp(buf, "x-linked-etag", 13) == 0) {
		char tag[80];

		/* The hub's redirect of an LFS file names its SHA-256 (the LFS oid), quoted, maybe weak. */
		copy_value(tag, sizeof(tag), v, vl);
		fg_pull_lfs_oid(tag, x->lfs_oid);
	} else if (nl == 13 && strncasecmp(buf, "last-modified", 13) == 0) {
		copy_value(x->r.lastmod, sizeof(x->r.lastmod), v, vl);
	} else if (nl == 13 && strncasecmp(buf, "x-repo-commit", 13) == 0) {
		char c[COMMIT_BUF + 1];

		/* The hub's own hop names it; a CDN it redirects to does not: keep the first. */
		copy_value(c, sizeof(c), v, vl);
		if (!x->commit[0] && fgp_commit_ok(c))
			memcpy(x->commit, c, sizeof(x->commit));
	} else if (nl == 13 && strncasecmp(buf, "content-range", 13) == 0) {
		copy_value(x->r.crange, sizeof(x->r.crange), v, vl);
	} else if (nl == 14 && strncasecmp(buf, "content-length", 14) == 0) {
		char num[32];
		const char *s = num;

		copy_value(num, sizeof(num), v, vl);
		x->r.have_clen = fgp_parse_u64(&s, &x->r.clen) == 0 && *s == '\0';
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
		    fgp_url_host(target, host, sizeof(host), port, sizeof(port)) == 0)
			ok = fgp_host_allowed(x->p, host, port);
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
		int w = fg_fs_write_all(x->fd, data, n);

		if (w != 0)
			return xfer_fail(x, w == -ENOSPC ? FG_ENOSPC : FG_ESTATE, "cache: write '%s': %s", x->tmp,
					 strerror(-w));
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
	if (FG_GROW(x->buf, x->got + n + 1, x->buf_cap))
		return xfer_fail(x, FG_ENOMEM, "out of memory");
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
			xfer_fail(x, FG_EINPUT, "the server sent more bytes than asked");
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

struct xfer *fgp_xfer_new(struct fg_pull *p, struct pfile *f, enum xkind kind,
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

void fgp_xfer_free(struct xfer *x)
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
		x->fd = fgp_tmp_open(p, &x->tmp);
		if (x->fd >= 0) {
			x->sha = fg_sha256_new();
			if (!x->sha)
				return fgp_oom(err);
			return 0;
		}
		/* the cache is unusable right now: keep the bytes in memory */
	}
	if (x->len > SIZE_MAX)
		return fg_err_set(err, FG_ENOMEM, "%" PRIu64 " bytes do not fit in memory", x->len);
	x->buf = malloc(x->len ? (size_t)x->len : 1);
	return x->buf ? 0 : fgp_oom(err);
}

static int xfer_start(struct fg_pull *p, struct xfer *x, struct fg_err *err)
{
	char range[48];
	CURL *e;
	int rc;

	if (p->offline) {
		char label[FG_ERR_MSG_MAX];

		xfer_label(x, label, sizeof(label));
		return fg_err_set(err, FG_EINPUT, "%s: not in the cache, and HF_HUB_OFFLINE is set: no request is made",
				  label);
	}
	/* Sinks open at the first attempt, so at most maxconn tmp files are open. */
	if (x->tries == 0 && (rc = xfer_sink_init(x, err)) != 0)
		return rc;
	e = curl_easy_init();
	if (!e)
		return fgp_oom(err);
	x->easy = e;
	memset(&x->r, 0, sizeof(x->r));
	x->lfs_oid[0] = '\0';
	x->commit[0] = '\0';
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
			fgp_record_store(p, x->f, 0);
		}
		if (p->cache && x->f->validator && x->f->size == x->got) {
			size_t tlen;
			char *tmp = NULL, *trailer;
			int fd;

			fg_sha256_buf(x->buf ? x->buf : (const uint8_t *)"", (size_t)x->got, sha);
			trailer = fgp_entry_trailer(x->f, 0, x->got, sha, &tlen);
			fd = trailer ? fgp_tmp_open(p, &tmp) : -1;
			if (fd >= 0) {
				int ok = fg_fs_write_all(fd, x->buf ? x->buf : (const uint8_t *)"",
						       (size_t)x->got) == 0 &&
					 fg_fs_write_all(fd, trailer, tlen) == 0;

				close(fd);
				if (!(x->got > 0 && ok && fgp_entry_rename(p, x->f, tmp, 0, x->got) == 0))
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
		fg_sha256_free(x->sha);
		x->sha = NULL;
		map = fgp_load_region(p, x->fd, (size_t)x->len);
		if (!map)
			return xfer_fail(x, errno == ENOMEM ? FG_ENOMEM : FG_ESTATE, "cache: read '%s': %s",
					 x->tmp, strerror(errno));
		/* Without a validator the bytes cannot be named: serve, do not keep. */
		if (x->f->validator) {
			trailer = fgp_entry_trailer(x->f, x->start, x->len, sha, &tlen);
			if (trailer && fg_fs_write_all(x->fd, trailer, tlen) == 0 &&
			    fgp_entry_rename(p, x->f, x->tmp, x->start, x->len) == 0) {
				free(x->tmp);
				x->tmp = NULL;
			}
			free(trailer);
		}
		close(x->fd);
		x->fd = -1;
	} else {
		map = x->buf;
		if (fgp_add_mapping(p, map, (size_t)x->len, 0) != 0)
			return xfer_fail(x, FG_ENOMEM, "out of memory");
		x->buf = NULL;
	}
	x->data = map;
	if (fgp_add_extent(x->f, x->start, x->len, map) != 0)
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
	int retry = 0, code = FG_EINPUT;

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
		fgp_record_store(p, x->f, 1);
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
int fgp_run(struct fg_pull *p, struct xfer **xs, size_t n, struct fg_err *err)
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

void fgp_xfers_free(struct xfer **xs, size_t n)
{
	if (!xs)
		return;
	for (size_t i = 0; i < n; i++)
		fgp_xfer_free(xs[i]);
	free(xs);
}
