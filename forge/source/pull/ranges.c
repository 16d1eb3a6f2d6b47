/*
 * ranges.c: the pure helpers of a pull (internal.h), exported through pull.h
 * so the unit tests can pin them: Content-Range parsing, the merge plan that
 * turns a file's misses into spans, the cache key of a file version, and the
 * eviction plan.  Nothing here does I/O or touches a struct fg_pull.
 */
#include "forge/source/pull/internal.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "forge/core/sha256.h"

int fgp_parse_u64(const char **s, uint64_t *out)
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
		if (fgp_parse_u64(&s, &a) || *s++ != '-' || fgp_parse_u64(&s, &b) || b < a)
			return FG_EINPUT;
	}
	if (*s++ != '/')
		return FG_EINPUT;
	if (*s == '*') {
		s++;
		if (a == FG_PULL_SIZE_UNKNOWN)
			return FG_EINPUT; /* "*" and "*" says nothing */
	} else if (fgp_parse_u64(&s, &t)) {
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
	fg_sha256_free(h);
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

int fg_pull_lfs_oid(const char *etag, char out[65])
{
	char hex[65];
	const char *s = etag;
	size_t n;

	if (strncmp(s, "W/", 2) == 0)
		s += 2;
	n = strlen(s);
	if (n == 66 && s[0] == '"' && s[65] == '"') {
		s++;
		n = 64;
	}
	if (n != 64)
		return 0;
	for (size_t i = 0; i < 64; i++) {
		char c = s[i];

		if (c >= 'A' && c <= 'F')
			c = (char)(c - 'A' + 'a');
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
		hex[i] = c;
	}
	hex[64] = '\0';
	memcpy(out, hex, sizeof(hex));
	return 1;
}
