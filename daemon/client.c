/*
 * client.c: the server connection, option parsing, HTTP with retries and
 * output helpers of the client commands (client.h).
 */
#include "daemon/client.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define BODY_MAX ((size_t)256 << 20)
#define TOKEN_FILE_MAX 4096
#define REQUEST_TIMEOUT_MS 60000L
#define CONNECT_TIMEOUT_MS 10000L
#define BACKOFF_FIRST 0.2
#define BACKOFF_MAX 5.0
#define RETRY_AFTER_MAX 30.0

/* ---- argument parsing ---- */

/* True when synopsis names --name as a whole word. */
static int synopsis_has(const char *synopsis, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = synopsis; p && (p = strstr(p, "--")) != NULL; p += 2)
		if (strncmp(p + 2, name, n) == 0 &&
		    !(p[2 + n] == '-' || (p[2 + n] >= 'a' && p[2 + n] <= 'z') || (p[2 + n] >= '0' && p[2 + n] <= '9')))
			return 1;
	return 0;
}

static void list_subs(const struct fg_cmd *cmd, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (const struct fg_subcmd *s = cmd->subs; s->name && used < len; s++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", s == cmd->subs ? "" : ", ", s->name);
}

int fg_client_usage(const struct fg_client_args *a, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "forged %s: ", a->label);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (a->sub)
		fprintf(stderr, "\nusage: forged %s %s %s %s\n", a->cmd->name, a->sub->name, a->sub->synopsis,
			a->cmd->common ? a->cmd->common : "");
	else
		fprintf(stderr, "\n'forged help %s' lists its subcommands\n", a->cmd->name);
	return FG_EXIT_USAGE;
}

/* Apply a common option; 0 when val is not one. */
static int common_option(struct fg_client_args *a, int val, const char *arg)
{
	switch (val) {
	case FG_OPT_SERVER:
		a->server = arg;
		return 1;
	case FG_OPT_TOKEN:
		a->token = arg;
		return 1;
	case FG_OPT_TOKEN_FILE:
		a->token_file = arg;
		return 1;
	case FG_OPT_OUTPUT:
		a->output = arg;
		return 1;
	default:
		return 0;
	}
}

struct group_ctx {
	struct fg_client_args *a;
	int (*handle)(void *ctx, int val, const char *arg);
	void *ctx;
};

static int group_option(void *ctx, int val, const char *arg)
{
	struct group_ctx *g = ctx;

	if (common_option(g->a, val, arg))
		return 0;
	return g->handle ? g->handle(g->ctx, val, arg) : 0;
}

/* The global options every command takes, whatever a synopsis says. */
static int is_global(const char *name)
{
	return strcmp(name, "help") == 0 || strcmp(name, "color") == 0 || strcmp(name, "json-style") == 0;
}

int fg_client_parse(struct fg_client_args *a, const struct fg_cmd *cmd, int argc, char **argv,
		    const char *shortopts, const struct option *longopts,
		    int (*handle)(void *ctx, int val, const char *arg), void *ctx)
{
	struct group_ctx g = { a, handle, ctx };
	struct fg_args *p = calloc(1, sizeof(*p));
	const char *error;
	char subs[200];

	memset(a, 0, sizeof(*a));
	a->cmd = cmd;
	snprintf(a->label, sizeof(a->label), "%s", cmd->name);
	if (!p) {
		fprintf(stderr, "forged %s: out of memory\n", cmd->name);
		return FG_EXIT_INTERNAL;
	}
	fg_args_parse(p, argc, argv, shortopts, longopts, group_option, &g);
	for (size_t i = 0; i < p->n_pos && i < FG_CLIENT_MAX_ARGS; i++)
		a->pos[a->n_pos++] = p->pos[i];
	if (p->n_pos > FG_CLIENT_MAX_ARGS && !p->error[0])
		snprintf(p->error, sizeof(p->error), "too many arguments ('%s')", p->pos[FG_CLIENT_MAX_ARGS]);
	for (size_t i = 0; i < p->n_seen && a->n_seen < FG_CLIENT_MAX_SEEN; i++)
		a->seen[a->n_seen++] = p->seen[i];
	a->help = p->help;
	error = p->error;
	list_subs(cmd, subs, sizeof(subs));
	if (a->help) {
		fg_cli_print_help(cmd, stdout);
		free(p);
		return 0;
	}
	if (!a->n_pos) {
		int rc = error[0] ? fg_client_usage(a, "%s", error)
				  : fg_client_usage(a, "missing subcommand: one of %s", subs);

		free(p);
		return rc;
	}
	a->sub = fg_cli_find_sub(cmd, a->pos[0]);
	if (!a->sub) {
		int rc = error[0] ? fg_client_usage(a, "%s", error)
				  : fg_client_usage(a, "unknown subcommand '%s': one of %s", a->pos[0], subs);

		free(p);
		return rc;
	}
	snprintf(a->label, sizeof(a->label), "%s %s", cmd->name, a->sub->name);
	/* The subcommand is not an argument of its own. */
	memmove(a->pos, a->pos + 1, (a->n_pos - 1) * sizeof(a->pos[0]));
	a->n_pos--;
	if (error[0]) {
		int rc = fg_client_usage(a, "%s", error);

		free(p);
		return rc;
	}
	free(p);
	for (size_t i = 0; i < a->n_seen; i++)
		if (!is_global(a->seen[i]) && !synopsis_has(a->sub->synopsis, a->seen[i]) &&
		    !synopsis_has(cmd->common, a->seen[i]))
			return fg_client_usage(a, "--%s is not an option of 'forged %s'", a->seen[i], a->label);
	return 0;
}

int fg_client_want_args(const struct fg_client_args *a, size_t n, const char *names)
{
	if (a->n_pos < n)
		return fg_client_usage(a, "missing %s", names);
	if (a->n_pos > n)
		return fg_client_usage(a, "unexpected argument '%s'", a->pos[n]);
	return 0;
}

int fg_client_id(const struct fg_client_args *a, const char *text, const char *what, long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(text, &end, 10);
	if (!*text || *end || errno || v < 1 || text[0] == '+' || text[0] == ' ')
		return fg_client_usage(a, "%s '%s' is not a positive integer", what, text);
	*out = v;
	return 0;
}

/* ---- connection ---- */

/* n bytes as "12.3 MB" (decimal units, as the rate is). */
static void human(char *buf, size_t len, double n)
{
	static const char *const units[] = { "B", "kB", "MB", "GB", "TB" };
	int u = 0;

	while (n >= 1000.0 && u < 4) {
		n /= 1000.0;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", n, units[u]);
}

void fg_client_progress_text(char *buf, size_t len, const char *stage, double fraction, double done, double total,
			     double rate, double eta_s)
{
	char a[24], b[24], r[24];
	int n = snprintf(buf, len, "%-10s %3d%%", stage, (int)(fraction * 100.0));
	size_t at;

	if (n < 0 || (size_t)n >= len || !(total > 0) || done < 0)
		return;
	at = (size_t)n;
	human(a, sizeof(a), done);
	human(b, sizeof(b), total);
	n = snprintf(buf + at, len - at, "  %s/%s", a, b);
	if (n < 0 || (size_t)n >= len - at)
		return;
	at += (size_t)n;
	if (eta_s < 0)
		return; /* no ETA: the rate is not known either (forge passes 0 then) */
	if (rate >= 0) {
		human(r, sizeof(r), rate);
		n = snprintf(buf + at, len - at, "  %s/s", r);
		if (n < 0 || (size_t)n >= len - at)
			return;
		at += (size_t)n;
	}
	snprintf(buf + at, len - at, "  eta %.0f s", eta_s);
}

double fg_client_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void fg_client_sleep(double seconds)
{
	struct timespec ts;

	if (seconds <= 0)
		return;
	ts.tv_sec = (time_t)seconds;
	ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* The first line of path without surrounding white space; NULL (message printed) when unusable. */
static char *read_token_file(const struct fg_client_args *a, const char *path)
{
	char buf[TOKEN_FILE_MAX + 1];
	FILE *fp = fopen(path, "r");
	size_t n, start = 0;

	if (!fp) {
		fg_client_usage(a, "token file '%s': %s", path, strerror(errno));
		return NULL;
	}
	n = fread(buf, 1, TOKEN_FILE_MAX, fp);
	fclose(fp);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	n = strlen(buf);
	while (n && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		buf[--n] = '\0';
	while (buf[start] == ' ' || buf[start] == '\t')
		start++;
	if (!buf[start]) {
		fg_client_usage(a, "token file '%s' holds no token on its first line", path);
		return NULL;
	}
	return strdup(buf + start);
}

/* The default token file, when it exists: $XDG_CONFIG_HOME/forged/token, else ~/.config/forged/token. */
static int default_token_file(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");

	if (xdg && *xdg)
		snprintf(buf, len, "%s/forged/token", xdg);
	else if (home && *home)
		snprintf(buf, len, "%s/.config/forged/token", home);
	else
		return 0;
	return access(buf, F_OK) == 0;
}

static int valid_token(const char *t)
{
	for (const unsigned char *p = (const unsigned char *)t; *p; p++)
		if (*p <= ' ' || *p == 0x7f)
			return 0;
	return *t != '\0';
}

int fg_client_open(struct fg_client *c, const struct fg_client_args *a)
{
	static int curl_ready;
	const char *url = a->server, *env_token = getenv("FORGED_TOKEN");
	char path[4096];
	char *token = NULL;
	unsigned char rnd[16];
	size_t n;

	memset(c, 0, sizeof(*c));
	c->args = a;
	if (!url) {
		url = getenv("FORGED_URL");
		if (!url || !*url)
			url = FG_CLIENT_DEFAULT_URL;
	}
	if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
		return fg_client_usage(a, "server '%s' is not an http:// or https:// URL", url);
	n = strlen(url);
	while (n > 8 && url[n - 1] == '/')
		n--;
	if (n >= sizeof(c->base) - 64)
		return fg_client_usage(a, "server URL is too long");
	snprintf(c->base, sizeof(c->base), "%.*s", (int)n, url);
	if (a->output) {
		if (strcmp(a->output, "table") == 0)
			c->format = FG_FORMAT_TABLE;
		else if (strcmp(a->output, "json") == 0)
			c->format = FG_FORMAT_JSON;
		else
			return fg_client_usage(a, "-o '%s' is not an output format: table or json", a->output);
	} else {
		c->format = isatty(STDOUT_FILENO) ? FG_FORMAT_TABLE : FG_FORMAT_JSON;
	}
	if (a->token && a->token_file)
		return fg_client_usage(a, "--token and --token-file exclude each other");
	if (a->token)
		token = strdup(a->token);
	else if (a->token_file)
		token = read_token_file(a, a->token_file);
	else if (env_token && *env_token)
		token = strdup(env_token);
	else if (default_token_file(path, sizeof(path)))
		token = read_token_file(a, path);
	else
		token = strdup("");
	if (!token)
		return FG_EXIT_USAGE;
	if (*token && !valid_token(token)) {
		free(token);
		return fg_client_usage(a, "the token holds a space or a control character");
	}
	if (*token) {
		size_t len = strlen(token) + 32;

		c->auth = malloc(len);
		if (c->auth)
			snprintf(c->auth, len, "Authorization: Bearer %s", token);
	}
	free(token);
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		fprintf(stderr, "forged %s: getrandom: %s\n", a->label, strerror(errno));
		fg_client_close(c);
		return FG_EXIT_INTERNAL;
	}
	n = (size_t)snprintf(c->idem_key, sizeof(c->idem_key), "forged-");
	for (size_t i = 0; i < sizeof(rnd); i++)
		n += (size_t)snprintf(c->idem_key + n, sizeof(c->idem_key) - n, "%02x", rnd[i]);
	if (!curl_ready) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
			fprintf(stderr, "forged %s: libcurl failed to initialise\n", a->label);
			fg_client_close(c);
			return FG_EXIT_INTERNAL;
		}
		curl_ready = 1;
	}
	c->curl = curl_easy_init();
	if (!c->curl) {
		fprintf(stderr, "forged %s: out of memory\n", a->label);
		fg_client_close(c);
		return FG_EXIT_INTERNAL;
	}
	return 0;
}

void fg_client_close(struct fg_client *c)
{
	if (c->curl)
		curl_easy_cleanup(c->curl);
	c->curl = NULL;
	if (c->auth) {
		explicit_bzero(c->auth, strlen(c->auth));
		free(c->auth);
	}
	c->auth = NULL;
}

/* ---- HTTP ---- */

struct sink {
	char *buf;
	size_t len, cap;
	int too_big;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct sink *s = ctx;
	size_t n = size * nmemb;

	if (s->len + n > BODY_MAX) {
		s->too_big = 1;
		return 0;
	}
	if (s->len + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;
		char *p;

		while (cap < s->len + n + 1)
			cap *= 2;
		p = realloc(s->buf, cap);
		if (!p)
			return 0;
		s->buf = p;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, data, n);
	s->len += n;
	s->buf[s->len] = '\0';
	return n;
}

void fg_http_release(struct fg_http *r)
{
	free(r->body);
	r->body = NULL;
	r->len = 0;
}

/* One attempt.  Returns the CURLcode; fills r (status, body, error) and *retry_after (seconds, or -1). */
static CURLcode perform(struct fg_client *c, const char *method, const char *body, struct fg_http *r,
			double *retry_after)
{
	CURL *h = c->curl;
	struct curl_slist *hdrs = NULL;
	struct sink sink = { NULL, 0, 0, 0 };
	char errbuf[CURL_ERROR_SIZE] = "", idem[96];
	long timeout = REQUEST_TIMEOUT_MS;
	curl_off_t ra = -1;
	CURLcode cc;

	if (c->deadline > 0) {
		double left = c->deadline - fg_client_now();

		if (left < 0.001)
			left = 0.001;
		if (left * 1000.0 < (double)timeout)
			timeout = (long)(left * 1000.0) + 1;
	}
	fg_http_release(r);
	r->status = 0;
	r->error[0] = '\0';
	*retry_after = -1;
	curl_easy_reset(h);
	hdrs = curl_slist_append(hdrs, "Accept: application/json");
	if (c->auth)
		hdrs = curl_slist_append(hdrs, c->auth);
	if (body) {
		snprintf(idem, sizeof(idem), "Idempotency-Key: %s", c->idem_key);
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
		hdrs = curl_slist_append(hdrs, idem);
		hdrs = curl_slist_append(hdrs, "Expect:");
	}
	curl_easy_setopt(h, CURLOPT_URL, r->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
	curl_easy_setopt(h, CURLOPT_USERAGENT, "forged/" FG_VERSION);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS < timeout ? CONNECT_TIMEOUT_MS : timeout);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	}
	if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	cc = curl_easy_perform(h);
	curl_slist_free_all(hdrs);
	if (cc == CURLE_OK) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
		if (curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra >= 0)
			*retry_after = (double)ra;
		r->body = sink.buf;
		r->len = sink.len;
		if (!r->body)
			r->body = calloc(1, 1);
	} else {
		free(sink.buf);
		snprintf(r->error, sizeof(r->error), "%s", sink.too_big ? "the answer is larger than 256 MiB" :
			 errbuf[0] ? errbuf : curl_easy_strerror(cc));
	}
	return cc;
}

static int transient(CURLcode cc, long status, enum fg_retry retry)
{
	if (cc == CURLE_OK) {
		if (retry == FG_RETRY_UNSENT)
			return status == 503;
		return status == 408 || status == 429 || status == 502 || status == 503 || status == 504;
	}
	if (cc == CURLE_COULDNT_CONNECT)
		return 1;
	if (retry == FG_RETRY_UNSENT)
		return 0;
	return cc == CURLE_SEND_ERROR || cc == CURLE_RECV_ERROR || cc == CURLE_GOT_NOTHING ||
	       cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_PARTIAL_FILE;
}

int fg_client_call(struct fg_client *c, const char *method, const char *path, const char *body,
		   enum fg_retry retry, struct fg_http *r)
{
	double backoff = BACKOFF_FIRST, retry_after;
	CURLcode cc;

	memset(r, 0, sizeof(*r));
	snprintf(r->method, sizeof(r->method), "%s", method);
	snprintf(r->url, sizeof(r->url), "%s%s", c->base, path);
	for (int attempt = 1;; attempt++) {
		double wait;

		cc = perform(c, method, body, r, &retry_after);
		if (!transient(cc, r->status, retry) || attempt >= FG_CLIENT_TRIES)
			break;
		wait = retry_after >= 0 ? (retry_after < RETRY_AFTER_MAX ? retry_after : RETRY_AFTER_MAX) : backoff;
		backoff = backoff * 2 < BACKOFF_MAX ? backoff * 2 : BACKOFF_MAX;
		if (c->deadline > 0 && fg_client_now() + wait >= c->deadline)
			break;
		if (cc == CURLE_OK)
			fprintf(stderr, "forged %s: %s %s: HTTP %ld, retrying in %.1f s (%d of %d tries)\n",
				c->args->label, method, r->url, r->status, wait, attempt, FG_CLIENT_TRIES);
		else
			fprintf(stderr, "forged %s: %s %s: %s, retrying in %.1f s (%d of %d tries)\n", c->args->label,
				method, r->url, r->error, wait, attempt, FG_CLIENT_TRIES);
		fg_client_sleep(wait);
	}
	if (cc != CURLE_OK)
		return FG_EXIT_INTERNAL;
	if (r->status >= 200 && r->status < 300)
		return FG_EXIT_OK;
	if (r->status >= 400 && r->status < 500 && r->status != 408 && r->status != 429)
		return FG_EXIT_USAGE;
	return FG_EXIT_INTERNAL;
}

char *fg_client_escape(struct fg_client *c, const char *value)
{
	char *e = curl_easy_escape(c->curl, value, 0), *out = e ? strdup(e) : NULL;

	curl_free(e);
	return out;
}

const char *fg_json_get_str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

double fg_json_get_num(const cJSON *o, const char *key, double def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	/* Within +-2^53, so a caller converting it to an integer is never undefined (a server sending 1e300). */
	return cJSON_IsNumber(v) && v->valuedouble >= -9007199254740992.0 && v->valuedouble <= 9007199254740992.0
		       ? v->valuedouble
		       : def;
}

int fg_client_fail(struct fg_client *c, const struct fg_http *r, int rc)
{
	const char *label = c->args->label;
	cJSON *doc;

	if (!r->status) {
		fprintf(stderr, "forged %s: %s %s: %s\n", label, r->method, r->url, r->error);
		return rc;
	}
	doc = r->body ? cJSON_Parse(r->body) : NULL;
	if (cJSON_IsObject(doc) && fg_json_get_str(doc, "type")) {
		const char *type = fg_json_get_str(doc, "type"), *detail = fg_json_get_str(doc, "detail");
		const char *slug = strncmp(type, "urn:forged:problem:", 19) == 0 ? type + 19 : type;

		fprintf(stderr, "forged %s: %s %s: HTTP %ld %s: %s\n", label, r->method, r->url, r->status, slug,
			detail ? detail : fg_json_get_str(doc, "title") ? fg_json_get_str(doc, "title") : "");
		if (r->status == 401)
			fprintf(stderr, "forged %s: give a token with --token-file FILE, $FORGED_TOKEN or "
				"$XDG_CONFIG_HOME/forged/token\n", label);
		/* A 409 naming the artifacts a fingerprint fits: each, so the report can name one. */
		{
			const cJSON *cand;

			cJSON_ArrayForEach(cand, cJSON_GetObjectItemCaseSensitive(doc, "candidates"))
				fprintf(stderr, "forged %s:   candidate artifact %lld digest %s source %s\n", label,
					(long long)fg_json_get_num(cand, "artifact_id", 0),
					fg_json_get_str(cand, "digest") ? fg_json_get_str(cand, "digest") : "-",
					fg_json_get_str(cand, "source") ? fg_json_get_str(cand, "source") : "-");
		}
		if (c->format == FG_FORMAT_JSON)
			fg_client_print_body(r);
	} else {
		size_t n = r->len < 200 ? r->len : 200;
		char snippet[201];

		for (size_t i = 0; i < n; i++)
			snippet[i] = r->body[i] >= ' ' && r->body[i] < 0x7f ? r->body[i] : ' ';
		snippet[n] = '\0';
		fprintf(stderr, "forged %s: %s %s: HTTP %ld%s%s\n", label, r->method, r->url, r->status,
			n ? ": " : "", snippet);
	}
	cJSON_Delete(doc);
	return rc;
}

cJSON *fg_client_doc(struct fg_client *c, const struct fg_http *r)
{
	cJSON *doc = r->body ? cJSON_ParseWithLength(r->body, r->len) : NULL;

	if (!cJSON_IsObject(doc)) {
		cJSON_Delete(doc);
		fprintf(stderr, "forged %s: %s %s: HTTP %ld but the answer is not a JSON object\n", c->args->label,
			r->method, r->url, r->status);
		return NULL;
	}
	return doc;
}

int fg_client_print_body(const struct fg_http *r)
{
	if (fg_cli_json_pretty(stdout) && r->len) {
		/* Pretty, as every command prints its documents on a terminal; else the bytes as sent. */
		cJSON *doc = cJSON_ParseWithLength(r->body, r->len);

		if (doc) {
			int rc = fg_cli_print_json(doc);

			cJSON_Delete(doc);
			return rc;
		}
	}
	if (r->len && fwrite(r->body, 1, r->len, stdout) != r->len)
		return FG_EXIT_INTERNAL;
	if (!r->len || r->body[r->len - 1] != '\n')
		fputc('\n', stdout);
	return fflush(stdout) == 0 ? 0 : FG_EXIT_INTERNAL;
}

struct fg_client_palette fg_client_palette(void)
{
	static const struct fg_client_palette plain = { "", "", "", "", "" };
	static const struct fg_client_palette ansi = { "\033[31m", "\033[32m", "\033[33m", "\033[1m", "\033[0m" };

	return fg_cli_color(stdout) ? ansi : plain;
}

char *fg_client_read_file(const struct fg_client_args *a, const char *path, size_t max, size_t *len)
{
	FILE *fp = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	char *buf;
	size_t n;

	if (!fp) {
		fg_client_usage(a, "%s: %s", path, strerror(errno));
		return NULL;
	}
	buf = malloc(max + 1);
	if (!buf) {
		if (fp != stdin)
			fclose(fp);
		fprintf(stderr, "forged %s: out of memory\n", a->label);
		return NULL;
	}
	n = fread(buf, 1, max + 1, fp);
	if (ferror(fp) || n > max) {
		if (ferror(fp))
			fg_client_usage(a, "%s: %s", path, strerror(errno));
		else
			fg_client_usage(a, "%s: larger than %zu bytes", path, max);
		if (fp != stdin)
			fclose(fp);
		free(buf);
		return NULL;
	}
	if (fp != stdin)
		fclose(fp);
	buf[n] = '\0';
	*len = n;
	return buf;
}
