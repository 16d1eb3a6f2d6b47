/*
 * fuzz_api.c: libFuzzer target for the HTTP API's request handling (api/:
 * on_request's body accumulation, dispatch, authorize, fg_req_json and every
 * route handler in api/routes.c, down to the request codec, forge/verify,
 * path confinement, URL parsing and the store on a temporary SQLite file).
 *
 * How it drives the handlers, and why this way: the harness links libapi,
 * libstore and libforge, starts the real server in this process with
 * fg_api_start on 127.0.0.1 (an ephemeral port, one handler thread, a tokens
 * file, a queue cap, allowed roots) and sends each input as one HTTP/1.1
 * request over a kept-alive loopback connection, then checks the answer.
 * The alternative, calling server.c's static dispatch() with a hand-made
 * struct fg_req, would need a test hook in api/ and, worse, a fake
 * MHD_Connection: fg_req_header and fg_req_query read headers and the query
 * string through libmicrohttpd from the connection, so the handlers cannot
 * run without one.  A real connection costs a loopback round trip per input
 * (thousands of inputs a second) and buys what a client can actually reach:
 * percent-decoding of the path and query, header folding and limits, the
 * body cap (413), content types, bearer tokens, keep-alive.  A crash, a
 * sanitizer report or a leak in the handler thread ends this process as one
 * on the fuzzer's own thread would (the coverage counters and the sanitizer
 * runtimes are the process's); a running `forged serve` under ASan would see
 * the same code but give libFuzzer no coverage and no reproducer.
 *
 * Input (text, as a request is written; seeds in tests/fuzz/seeds/api):
 *
 *   METHOD TARGET            first line; METHOD is letters only (else GET),
 *   Name: value              TARGET is sent with bytes outside 0x21..0x7e
 *   ...                      percent-encoded, so the handlers see them decoded
 *                            (an empty line ends the headers)
 *   BODY                     the rest, sent with its Content-Length
 *
 * Anywhere in the input, "$WRITE" and "$READ" become the write and read
 * tokens of the server's tokens file (a bearer token no mutation would find)
 * and "$HUB" the host:port of the one allowed host of URL sources: a second
 * server in this process that answers 404 to everything.  Host,
 * Content-Length, Transfer-Encoding, Connection, Expect and Upgrade are the
 * harness's own and dropped from the input.  Relative source paths resolve in
 * the first allowed root, which holds `fix`, a link to the fixture
 * checkpoints ($FORGED_FUZZ_FIXTURES, make test's build/fixtures): a body may
 * name "fix/qwen35_hf".  Artifacts 1 and 2 exist from the start (inspections
 * of two fixtures), and artifact 3 has the fingerprint FINGERPRINT below.
 *
 * The answer must be well-formed: a status line, a Content-Length matching
 * the body, JSON bodies that parse (problem+json with the status it is sent
 * with), a status the API documents, and never 500 (docs/interfaces.md:
 * internal means out of memory or a bug).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <strings.h>
#include <sys/socket.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "api/api.h"
#include "forge/core/sha256.h"
#include "store/store.h"
#include "tests/fuzz/fuzz_common.h"

/* SHA-256 of "fuzz": artifact 3's fingerprint. */
#define FINGERPRINT "93850b707585e404e4951a3ddc1f05a34b3d4f5fc081d616f46d8a2e8f1c8e68"
#define WRITE_TOKEN "fuzz-write-token"
#define READ_TOKEN "fuzz-read-token"
#define MAX_BODY 16384
#define ANSWER_TIMEOUT_MS 20000

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fg_api *api;
static uint16_t port;
static int sock = -1;
static struct MHD_Daemon *hub;
static char hub_host[32];

/*
 * The store commits with synchronous=FULL, so every request it accepts waits
 * for the disk: tens of milliseconds on a busy CI machine, which left a
 * 5-second smoke run inside its seeds.  Durability is not what this target
 * tests (tests/e2e and the store's tests do), so in this process fsync and
 * fdatasync return at once: SQLite's calls bind to these definitions
 * (the executable's symbols come first), and nothing else changes.
 */
int fsync(int fd);
int fdatasync(int fd);

int fsync(int fd)
{
	return fd >= 0 ? 0 : (errno = EBADF, -1);
}

int fdatasync(int fd)
{
	return fsync(fd);
}

/* ---- a growing byte buffer ---- */

struct buf {
	char *p;
	size_t len, cap;
};

static void put(struct buf *b, const void *data, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;

		while (cap < b->len + n + 1)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p)
			fz_die("realloc");
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void puts_buf(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* ---- the connection ---- */

static void disconnect(void)
{
	if (sock >= 0)
		close(sock);
	sock = -1;
}

static void connect_server(void)
{
	struct sockaddr_in a;
	int one = 1;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		fz_die("socket");
	setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(sock, (struct sockaddr *)&a, sizeof(a)) != 0)
		fz_die("connect to the in-process server");
}

static int send_all(const char *p, size_t n)
{
	while (n) {
		ssize_t k = send(sock, p, n, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Read more bytes into b; 0 at EOF, -1 on error; aborts when the server does not answer. */
static ssize_t read_some(struct buf *b)
{
	struct pollfd pfd = { sock, POLLIN, 0 };
	char chunk[16384];
	ssize_t k;
	int r;

	do
		r = poll(&pfd, 1, ANSWER_TIMEOUT_MS);
	while (r < 0 && errno == EINTR);
	if (r == 0) {
		fprintf(stderr, "fuzz_api: no answer within %d ms (a handler hangs)\n", ANSWER_TIMEOUT_MS);
		abort();
	}
	k = recv(sock, chunk, sizeof(chunk), 0);
	if (k > 0)
		put(b, chunk, (size_t)k);
	return k;
}

struct answer {
	unsigned status;
	char content_type[128];
	int closes;
	const char *body;
	size_t body_len;
};

/* The value of header name in the head (NUL-terminated, lines end in \r\n), copied into out. */
static int head_value(const char *head, const char *name, char *out, size_t size)
{
	size_t n = strlen(name);

	for (const char *l = strstr(head, "\r\n"); l && l[2]; l = strstr(l + 2, "\r\n")) {
		const char *h = l + 2;

		if (strncasecmp(h, name, n) == 0 && h[n] == ':') {
			const char *v = h + n + 1, *e = strstr(v, "\r\n");

			while (*v == ' ' || *v == '\t')
				v++;
			snprintf(out, size, "%.*s", (int)(e ? e - v : (ptrdiff_t)strlen(v)), v);
			return 1;
		}
	}
	return 0;
}

/* Read one answer into b; 0, or -1 when the server closed before answering. */
static int read_answer(struct buf *b, int head_request, struct answer *ans)
{
	char *end, value[64];
	size_t head_len, want;
	int has_length;

	b->len = 0;
	if (b->p)
		b->p[0] = '\0';
	while (!b->p || !(end = strstr(b->p, "\r\n\r\n"))) {
		ssize_t k = read_some(b);

		if (k <= 0) {
			if (b->len)
				fprintf(stderr, "fuzz_api: the connection ended inside an answer's head\n");
			return -1;
		}
	}
	head_len = (size_t)(end - b->p) + 4;
	*end = '\0';
	memset(ans, 0, sizeof(*ans));
	if (sscanf(b->p, "HTTP/1.%*1[01] %3u", &ans->status) != 1) {
		fprintf(stderr, "fuzz_api: not a status line: %.80s\n", b->p);
		abort();
	}
	head_value(b->p, "Content-Type", ans->content_type, sizeof(ans->content_type));
	ans->closes = head_value(b->p, "Connection", value, sizeof(value)) && strcasecmp(value, "close") == 0;
	has_length = head_value(b->p, "Content-Length", value, sizeof(value));
	want = has_length ? strtoul(value, NULL, 10) : 0;
	*end = '\r';
	if (head_request || ans->status == 304 || ans->status == 204 || ans->status < 200)
		want = 0;
	else if (!has_length) {
		/* Until the server closes. */
		while (read_some(b) > 0)
			;
		want = b->len - head_len;
		ans->closes = 1;
	}
	while (b->len < head_len + want)
		if (read_some(b) <= 0) {
			fprintf(stderr, "fuzz_api: the body ended after %zu of %zu bytes\n", b->len - head_len, want);
			abort();
		}
	if (b->len > head_len + want && !ans->closes) {
		fprintf(stderr, "fuzz_api: %zu bytes after the answer's body: %.*s\n", b->len - head_len - want,
			(int)(b->len - head_len - want), b->p + head_len + want);
		abort();
	}
	ans->body = b->p + head_len;
	ans->body_len = want;
	return 0;
}

/* Send req and read its answer, reconnecting once if the kept-alive connection was closed. */
static int exchange(const struct buf *req, struct buf *resp, int head_request, struct answer *ans)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		if (sock < 0)
			connect_server();
		if (send_all(req->p, req->len) == 0 && read_answer(resp, head_request, ans) == 0) {
			if (ans->closes)
				disconnect();
			return 0;
		}
		disconnect();
	}
	return -1;
}

/* ---- the checks ---- */

static int documented_status(unsigned s)
{
	/* 409: job-finished (a DELETE of a job the input cancelled before), out-exists, idempotency-key-in-use,
	 * ambiguous-artifact and artifact-mismatch are all documented (docs/openapi.json). */
	static const unsigned ok[] = { 200, 201, 202, 304, 400, 401, 403, 404, 405, 409, 413, 415, 422, 503, 507 };

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (ok[i] == s)
			return 1;
	return 0;
}

static void check_answer(const struct answer *ans, int head_request)
{
	int json = strncmp(ans->content_type, "application/json", 16) == 0;
	int problem = strncmp(ans->content_type, "application/problem+json", 24) == 0;

	if (ans->status == 500) {
		fprintf(stderr, "fuzz_api: 500: %.*s\n", (int)ans->body_len, ans->body);
		abort();
	}
	if (!json && !problem)
		return; /* libmicrohttpd's own answers (400, 414, 431, ...), /metrics, the dashboard */
	if (!documented_status(ans->status)) {
		fprintf(stderr, "fuzz_api: undocumented status %u: %.*s\n", ans->status, (int)ans->body_len, ans->body);
		abort();
	}
	if (head_request || ans->status == 304)
		return;
	{
		cJSON *doc = cJSON_ParseWithLength(ans->body, ans->body_len);
		const cJSON *st;

		if (!doc) {
			fprintf(stderr, "fuzz_api: a %u answer is not JSON: %.*s\n", ans->status, (int)ans->body_len,
				ans->body);
			abort();
		}
		st = cJSON_GetObjectItemCaseSensitive(doc, "status");
		if (problem && !(cJSON_IsNumber(st) && st->valuedouble == (double)ans->status)) {
			fprintf(stderr, "fuzz_api: a problem sent as %u says otherwise: %.*s\n", ans->status,
				(int)ans->body_len, ans->body);
			abort();
		}
		cJSON_Delete(doc);
	}
}

/* ---- building a request from the input ---- */

static int harness_header(const char *name, size_t n)
{
	static const char *const own[] = { "host", "content-length", "transfer-encoding", "connection", "expect",
					   "upgrade", "keep-alive", "te", "trailer" };

	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (strlen(own[i]) == n && strncasecmp(own[i], name, n) == 0)
			return 1;
	return 0;
}

/* A header value with CR, LF and NUL dropped. */
static void put_value(struct buf *b, const char *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] != '\r' && v[i] != '\n' && v[i] != '\0')
			put(b, v + i, 1);
}

/* The input with its placeholders replaced: $WRITE, $READ (the tokens), $HUB (the hub's host:port). */
static void expand(struct buf *out, const uint8_t *data, size_t size)
{
	static const char *const names[] = { "$WRITE", "$READ", "$HUB" };
	const char *values[] = { WRITE_TOKEN, READ_TOKEN, hub_host };

	out->len = 0;
	put(out, "", 0);
	for (size_t i = 0; i < size; i++) {
		size_t k = 0;

		if (data[i] == '$')
			for (; k < 3; k++)
				if (size - i >= strlen(names[k]) && memcmp(data + i, names[k], strlen(names[k])) == 0)
					break;
		if (data[i] == '$' && k < 3) {
			puts_buf(out, values[k]);
			i += strlen(names[k]) - 1;
		} else {
			put(out, data + i, 1);
		}
	}
}

/* The request for one input into req; *head_request set for HEAD. */
static void build_request(struct buf *req, const uint8_t *data, size_t size, int *head_request)
{
	const char *p = (const char *)data, *end = p + size, *nl, *sp;
	char method[16];
	size_t m = 0, body_len;
	const char *body;

	/* The request line. */
	nl = memchr(p, '\n', size);
	if (!nl)
		nl = end;
	sp = memchr(p, ' ', (size_t)(nl - p));
	for (const char *c = p; c < (sp ? sp : p) && m < sizeof(method) - 1; c++)
		if (isupper((unsigned char)*c))
			method[m++] = *c;
	if (!m)
		m = (size_t)snprintf(method, sizeof(method), "GET");
	method[m] = '\0';
	*head_request = strcmp(method, "HEAD") == 0;
	req->len = 0;
	puts_buf(req, method);
	puts_buf(req, " ");
	{
		const char *t = sp ? sp + 1 : p, *te = nl;
		size_t sent = 0;

		if (te > t && te[-1] == '\r')
			te--;
		if (t == te || *t != '/')
			puts_buf(req, "/");
		for (; t < te && sent < 8192; t++, sent++) {
			unsigned char c = (unsigned char)*t;

			if (c > 0x20 && c < 0x7f) {
				put(req, t, 1);
			} else {
				char enc[4];

				snprintf(enc, sizeof(enc), "%%%02X", c);
				put(req, enc, 3);
			}
		}
	}
	puts_buf(req, " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
	/* Headers, until an empty line. */
	p = nl < end ? nl + 1 : end;
	for (int n_headers = 0; p < end;) {
		const char *line = p, *colon;
		size_t len, name_len = 0;

		nl = memchr(p, '\n', (size_t)(end - p));
		p = nl ? nl + 1 : end;
		len = (size_t)((nl ? nl : end) - line);
		if (len && line[len - 1] == '\r')
			len--;
		if (!len)
			break;
		colon = memchr(line, ':', len);
		if (!colon || n_headers >= 32)
			continue;
		/* The name: token characters only, else the line is dropped. */
		name_len = (size_t)(colon - line);
		for (size_t i = 0; i < name_len; i++)
			if (!line[i] || (!isalnum((unsigned char)line[i]) && !strchr("!#$%&'*+-.^_`|~", line[i])))
				name_len = 0;
		if (!name_len || harness_header(line, name_len))
			continue;
		put(req, line, name_len);
		puts_buf(req, ": ");
		put_value(req, colon + 1, len - name_len - 1 > 4096 ? 4096 : len - name_len - 1);
		puts_buf(req, "\r\n");
		n_headers++;
	}
	body = p;
	body_len = (size_t)(end - p);
	{
		char cl[48];

		snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n\r\n", body_len);
		puts_buf(req, cl);
	}
	put(req, body, body_len);
}

/* ---- set-up ---- */

static void write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	if (!fp || fputs(text, fp) < 0 || fclose(fp) != 0)
		fz_die(path);
}

static void post(const char *path, const char *body)
{
	struct buf req = { 0 }, resp = { 0 };
	struct answer ans;
	char line[512];

	snprintf(line, sizeof(line),
		 "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " WRITE_TOKEN
		 "\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
		 path, strlen(body));
	puts_buf(&req, line);
	puts_buf(&req, body);
	if (exchange(&req, &resp, 0, &ans) != 0 || ans.status >= 300)
		fprintf(stderr, "fuzz_api: set-up POST %s %s: %u (without fixtures, fewer routes succeed)\n", path,
			body, ans.status);
	free(req.p);
	free(resp.p);
}

static void stop_server(void)
{
	disconnect();
	fg_api_stop(api);
	api = NULL;
	if (hub)
		MHD_stop_daemon(hub);
	hub = NULL;
}

/*
 * The hub: the one allowed host of URL sources, in this process, answering
 * 404 to everything.  A source on it fails at once, as a missing checkpoint
 * does, where a closed port would be retried with back-off (seconds per input).
 */
static enum MHD_Result hub_answer(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	static const char body[] = "no such file\n";
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)cls; (void)url; (void)method; (void)version; (void)upload;
	if (!*con_cls) {
		*con_cls = conn;
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0;
		return MHD_YES;
	}
	r = MHD_create_response_from_buffer(sizeof(body) - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	ret = MHD_queue_response(conn, MHD_HTTP_NOT_FOUND, r);
	MHD_destroy_response(r);
	return ret;
}

static void start_hub(void)
{
	struct sockaddr_in a;
	const union MHD_DaemonInfo *info;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	hub = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, hub_answer, NULL,
			       MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a, MHD_OPTION_END);
	info = hub ? MHD_get_daemon_info(hub, MHD_DAEMON_INFO_BIND_PORT) : NULL;
	if (!info) {
		fprintf(stderr, "fuzz_api: cannot start the hub\n");
		abort();
	}
	snprintf(hub_host, sizeof(hub_host), "127.0.0.1:%u", (unsigned)info->port);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *work = fz_setup_work("api"), *fixtures = getenv("FORGED_FUZZ_FIXTURES");
	char fixtures_abs[PATH_MAX];
	char root[PATH_MAX], db[PATH_MAX], tokens[PATH_MAX], cache[PATH_MAX], link[PATH_MAX + 8], text[512];
	char whex[FG_SHA256_HEX], rhex[FG_SHA256_HEX];
	struct fg_api_config cfg;
	struct fg_err err = { 0 };
	struct fg_store *store = NULL;

	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN);
	snprintf(root, sizeof(root), "%s/root", work);
	snprintf(db, sizeof(db), "%s/forged.db", work);
	snprintf(tokens, sizeof(tokens), "%s/tokens", work);
	snprintf(cache, sizeof(cache), "%s/cache/forged", work);
	if (mkdir(root, 0700) != 0)
		fz_die(root);
	/* Run by hand from the top of the tree, the fixtures of `make test` are found too. */
	if (!fixtures || !*fixtures)
		fixtures = "build/fixtures";
	snprintf(link, sizeof(link), "%s/fix", root);
	if (realpath(fixtures, fixtures_abs) && symlink(fixtures_abs, link) == 0) {
		fixtures = fixtures_abs;
	} else {
		fprintf(stderr, "fuzz_api: no fixtures at %s: fewer routes succeed\n", fixtures);
		fixtures = NULL;
	}
	fg_sha256_buf(WRITE_TOKEN, strlen(WRITE_TOKEN), whex);
	fg_sha256_buf(READ_TOKEN, strlen(READ_TOKEN), rhex);
	snprintf(text, sizeof(text), "# fuzz_api\nwrite fuzz-writer %s\nread fuzz-reader %s\n", whex, rhex);
	write_file(tokens, text);

	memset(&cfg, 0, sizeof(cfg));
	cfg.listen_addr = "127.0.0.1";
	cfg.port = 0;
	cfg.db_path = db;
	cfg.state_dir = work;
	cfg.tokens_file = tokens;
	cfg.allow_roots[cfg.n_allow_roots++] = root;
	if (fixtures)
		cfg.allow_roots[cfg.n_allow_roots++] = fixtures;
	start_hub();
	cfg.allow_hosts[cfg.n_allow_hosts++] = hub_host;
	cfg.cache_dir = cache;
	cfg.max_body_bytes = MAX_BODY;
	cfg.threads = 2; /* MHD ignores a pool of 1 */
	cfg.queue_cap = 1000;
	if (fg_api_start(&api, &cfg, &err) != 0) {
		fprintf(stderr, "fuzz_api: fg_api_start: %s\n", err.msg);
		abort();
	}
	port = fg_api_port(api);
	atexit(stop_server);

	post("/v1/inspections", "{\"source\":\"fix/qwen35_hf\"}");
	post("/v1/inspections", "{\"source\":\"fix/qwen35_mlx_head_shifted\"}");
	/* An artifact with a fingerprint, as a forge job stores one. */
	if (fg_store_open(&store, db, &err) == 0) {
		cJSON *report = cJSON_Parse("{\"schema\":\"forged.inspect.v1\",\"verdicts\":[]}");
		struct fg_artifact_in a = { .source = "fuzz", .family = "qwen3_5", .fingerprint = FINGERPRINT,
					    .report = report, .ok = 1, .probe_mean = 1.0 };
		int64_t id;

		if (fg_store_artifact_put(store, &a, &id, NULL, &err) != 0)
			fprintf(stderr, "fuzz_api: storing the fingerprinted artifact: %s\n", err.msg);
		cJSON_Delete(report);
		fg_store_close(store);
	} else {
		fprintf(stderr, "fuzz_api: fg_store_open: %s\n", err.msg);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct buf in, req, resp;
	struct answer ans;
	int head_request = 0;

	expand(&in, data, size);
	build_request(&req, (const uint8_t *)in.p, in.len, &head_request);
	if (exchange(&req, &resp, head_request, &ans) == 0)
		check_answer(&ans, head_request);
	return 0;
}
