/*
 * url.c: what a pull's source and file names become as URLs (internal.h).
 *
 * It owns the parsing of a source (http(s):// folder or single file,
 * hf://ORG/NAME[@REV] against the hub endpoint, FG_PULL_HF_DEFAULT_ENDPOINT
 * unless one is given), the percent-encoding of file
 * names and revisions, the file-name rules, and the host allow-list that the
 * source and every redirect target are checked against.  libcurl is
 * initialised here, on the first source parsed.
 */
#include "forge/source/pull/internal.h"

#include "forge/core/str.h"

#include <ctype.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ready;

static void curl_init_once(void)
{
	curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
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

/* Decode %XX in place; FG_EUSAGE on a bad escape or an encoded NUL. */
static int pct_decode(char *s)
{
	char *o = s;

	for (char *c = s; *c; c++) {
		if (*c == '%') {
			int hi = fg_hex_nibble(c[1]), lo = hi == FG_HEX_NONE ? FG_HEX_NONE : fg_hex_nibble(c[2]);

			if (hi == FG_HEX_NONE || lo == FG_HEX_NONE || (hi == 0 && lo == 0))
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
int fgp_file_name_ok(const char *name)
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
	url = fgp_str_fmt("%s%s", base, enc);
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
		endpoint = FG_PULL_HF_DEFAULT_ENDPOINT;
	if (!has_prefix_ci(endpoint, "http://") && !has_prefix_ci(endpoint, "https://"))
		return fg_err_set(err, FG_EUSAGE, "hub endpoint '%s' is not an http(s) URL", endpoint);
	elen = strlen(endpoint);
	while (elen > 0 && endpoint[elen - 1] == '/')
		elen--;
	ep = strndup(endpoint, elen);
	erev = pct_encode(r, 0);
	if (!ep || !erev)
		goto nomem;
	*base = fgp_str_fmt("%s/%.*s/resolve/%s/", ep, (int)repo_len, repo, erev);
	*rev = strdup(r);
	free(ep);
	free(erev);
	if (!*base || !*rev) {
		free(*base);
		free(*rev);
		*base = *rev = NULL;
		return fgp_oom(err);
	}
	return 0;
nomem:
	free(ep);
	free(erev);
	return fgp_oom(err);
}

static int parse_http(const char *source, char **base, char **file, struct fg_err *err)
{
	CURLU *u = curl_url();
	char *norm = NULL, *query = NULL, *frag = NULL, *last;
	int rc = 0;
	size_t n;

	if (!u)
		return fgp_oom(err);
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
			rc = fgp_oom(err);
			goto out;
		}
		if (pct_decode(name) != 0 || !fgp_file_name_ok(name)) {
			free(name);
			rc = fg_err_set(err, FG_EUSAGE, "source '%s': bad file name", source);
			goto out;
		}
		*file = name;
		*base = strndup(norm, (size_t)(last - norm) + 1);
	} else {
		*base = fgp_str_fmt("%s/", norm);
	}
	if (!*base) {
		free(*file);
		*file = NULL;
		rc = fgp_oom(err);
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
int fgp_url_host(const char *url, char *host, size_t hcap, char *port, size_t pcap)
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

int fgp_host_allowed(const struct fg_pull *p, const char *host, const char *port)
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
