/*
 * test_pull.c: the remote-source layer (forge/source/pull).
 *
 * Without FORGED_TEST_BASE_URL this runs the pure parts only, with no
 * network: source parsing and hf:// URL building, file URL escaping,
 * Content-Range parsing, range merging, cache keys and eviction order, and
 * the refusals fg_pull_open gives before any request.
 *
 * With FORGED_TEST_BASE_URL (set by tests/e2e/test_pull.sh, which serves the
 * fixtures with nginx under the Hugging Face layout /ORG/NAME/resolve/REV/FILE)
 * it runs the HTTP group of FORGED_TEST_PHASE instead:
 *   main     ranges equal the local bytes, merging, parallel ranges, sizes,
 *            404/401/416/503, redirects and allow_hosts, a server that ignores
 *            Range, the cache (second pull makes no request, corrupt entry
 *            refetched), a mid-transfer disconnect with and without retries
 *   cold / warm / refetch
 *            one fixed set of reads through FORGED_TEST_CACHE_DIR, expecting
 *            requests (cold), none (warm), or a refetch after the shell
 *            corrupted an entry (refetch); the shell checks nginx's log
 * Other variables: FORGED_TEST_NORANGE_URL, FORGED_TEST_SLOW_URL (hub
 * endpoints of the Range-ignoring and rate-limited locations),
 * FORGED_TEST_LOCAL_ROOT (the served folder), FORGED_TEST_ACCESS_LOG,
 * FORGED_TEST_KILL_CMD (kills nginx's workers mid-transfer).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forge/source/pull/pull.h"
#include "forge/format/safetensors.h"
#include "tests/unit/support.h"

/* ---- pure parts ---- */

static void test_is_url(void **state)
{
	(void)state;
	assert_true(fg_pull_is_url("http://h/x"));
	assert_true(fg_pull_is_url("HTTPS://h/x"));
	assert_true(fg_pull_is_url("hf://org/name"));
	assert_false(fg_pull_is_url("file:///x"));
	assert_false(fg_pull_is_url("/data/model"));
	assert_false(fg_pull_is_url("hf:/org/name"));
	assert_false(fg_pull_is_url(NULL));
}

static void test_parse_hf(void **state)
{
	struct fg_err err = { 0 };
	char *base, *rev, *file;

	(void)state;
	assert_int_equal(fg_pull_parse_source("hf://Qwen/Qwen3.5-9B", "http://127.0.0.1:8080/",
					      &base, &rev, &file, &err), 0);
	assert_string_equal(base, "http://127.0.0.1:8080/Qwen/Qwen3.5-9B/resolve/main/");
	assert_string_equal(rev, "main");
	assert_null(file);
	free(base);
	free(rev);

	assert_int_equal(fg_pull_parse_source("hf://org/name@refs/pr/1", "https://hub.local",
					      &base, &rev, &file, &err), 0);
	assert_string_equal(base, "https://hub.local/org/name/resolve/refs%2Fpr%2F1/");
	assert_string_equal(rev, "refs/pr/1");
	free(base);
	free(rev);

	assert_int_equal(fg_pull_parse_source("hf://o/n@0123456789abcdef0123456789abcdef01234567",
					      "http://e", &base, &rev, &file, &err), 0);
	assert_string_equal(base, "http://e/o/n/resolve/0123456789abcdef0123456789abcdef01234567/");
	free(base);
	free(rev);
}

/* Without an endpoint (NULL or empty), hf:// means the Hugging Face Hub itself. */
static void test_parse_hf_default_endpoint(void **state)
{
	struct fg_err err = { 0 };
	char *base, *rev, *file;

	(void)state;
	assert_string_equal(FG_PULL_HF_DEFAULT_ENDPOINT, "https://huggingface.co");
	assert_int_equal(fg_pull_parse_source("hf://a/b", NULL, &base, &rev, &file, &err), 0);
	assert_string_equal(base, "https://huggingface.co/a/b/resolve/main/");
	free(base);
	free(rev);
	assert_int_equal(fg_pull_parse_source("hf://Qwen/Qwen3.5-9B@v1.0", "", &base, &rev, &file, &err), 0);
	assert_string_equal(base, "https://huggingface.co/Qwen/Qwen3.5-9B/resolve/v1.0/");
	assert_string_equal(rev, "v1.0");
	free(base);
	free(rev);
}

/* $HF_HOME/token, else $XDG_CACHE_HOME/huggingface/token (absolute only), else ~/.cache/huggingface/token. */
static void test_hf_token_path(void **state)
{
	char buf[256], tiny[8], *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;

	(void)state;
	assert_int_equal(setenv("HF_HOME", "/hf", 1), 0);
	assert_int_equal(setenv("XDG_CACHE_HOME", "/xdg", 1), 0);
	assert_int_equal(setenv("HOME", "/home/q", 1), 0);
	assert_string_equal(fg_pull_hf_token_path(buf, sizeof(buf)), "/hf/token");
	assert_int_equal(unsetenv("HF_HOME"), 0);
	assert_string_equal(fg_pull_hf_token_path(buf, sizeof(buf)), "/xdg/huggingface/token");
	assert_int_equal(setenv("XDG_CACHE_HOME", "relative", 1), 0);
	assert_string_equal(fg_pull_hf_token_path(buf, sizeof(buf)), "/home/q/.cache/huggingface/token");
	assert_int_equal(unsetenv("XDG_CACHE_HOME"), 0);
	assert_string_equal(fg_pull_hf_token_path(buf, sizeof(buf)), "/home/q/.cache/huggingface/token");
	assert_null(fg_pull_hf_token_path(tiny, sizeof(tiny)));
	assert_int_equal(unsetenv("HOME"), 0);
	assert_null(fg_pull_hf_token_path(buf, sizeof(buf)));
	if (home)
		assert_int_equal(setenv("HOME", home, 1), 0);
	free(home);
}

static void test_parse_hf_refusals(void **state)
{
	static const char *const bad[] = {
		"hf://name", "hf://a/b/c", "hf:///b", "hf://a/", "hf://../b", "hf://a/..",
		"hf://a/b@", "hf://a b/c", "hf://a/b@x y",
	};
	struct fg_err err = { 0 };
	char *base, *rev, *file;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(fg_pull_parse_source(bad[i], "http://e", &base, &rev, &file, &err),
				 FG_EUSAGE);
		assert_null(base);
	}
	assert_int_equal(fg_pull_parse_source("hf://a/b", "ftp://e", &base, &rev, &file, &err),
			 FG_EUSAGE);
	assert_int_equal(fg_pull_parse_source("ftp://h/x", NULL, &base, &rev, &file, &err),
			 FG_EUSAGE);
}

static void test_parse_http(void **state)
{
	struct fg_err err = { 0 };
	char *base, *rev, *file;

	(void)state;
	assert_int_equal(fg_pull_parse_source("http://127.0.0.1:9/m/ckpt", NULL, &base, &rev,
					      &file, &err), 0);
	assert_string_equal(base, "http://127.0.0.1:9/m/ckpt/");
	assert_null(rev);
	assert_null(file);
	free(base);

	assert_int_equal(fg_pull_parse_source("https://h.example/m/ckpt/", NULL, &base, &rev,
					      &file, &err), 0);
	assert_string_equal(base, "https://h.example/m/ckpt/");
	free(base);

	assert_int_equal(fg_pull_parse_source("http://h/m/model%2Dx.safetensors", NULL, &base,
					      &rev, &file, &err), 0);
	assert_string_equal(base, "http://h/m/");
	assert_string_equal(file, "model-x.safetensors");
	free(base);
	free(file);

	assert_int_equal(fg_pull_parse_source("http://h/m/?sig=1", NULL, &base, &rev, &file, &err),
			 FG_EUSAGE);
	assert_non_null(strstr(err.msg, "query"));
	assert_int_equal(fg_pull_parse_source("http://h/m#x", NULL, &base, &rev, &file, &err),
			 FG_EUSAGE);
	assert_int_equal(fg_pull_parse_source("http://", NULL, &base, &rev, &file, &err),
			 FG_EUSAGE);
}

static void test_file_url(void **state)
{
	char *u;

	(void)state;
	u = fg_pull_file_url("http://h/a/", "mtp/weights.safetensors");
	assert_string_equal(u, "http://h/a/mtp/weights.safetensors");
	free(u);
	u = fg_pull_file_url("http://h/a/", "my file#1%.json");
	assert_string_equal(u, "http://h/a/my%20file%231%25.json");
	free(u);
}

static void test_content_range(void **state)
{
	uint64_t a, b, t;

	(void)state;
	assert_int_equal(fg_pull_parse_content_range("bytes 0-7/100", &a, &b, &t), 0);
	assert_true(a == 0 && b == 7 && t == 100);
	assert_int_equal(fg_pull_parse_content_range("  bytes 10-10/11\r\n", &a, &b, &t), 0);
	assert_true(a == 10 && b == 10 && t == 11);
	assert_int_equal(fg_pull_parse_content_range("bytes 5-9/*", &a, &b, &t), 0);
	assert_true(a == 5 && b == 9 && t == FG_PULL_SIZE_UNKNOWN);
	assert_int_equal(fg_pull_parse_content_range("bytes */4096", &a, &b, &t), 0);
	assert_true(a == FG_PULL_SIZE_UNKNOWN && b == FG_PULL_SIZE_UNKNOWN && t == 4096);
	assert_int_equal(fg_pull_parse_content_range("bytes 0-18446744073709551614/*", &a, &b, &t),
			 0);
	assert_true(b == UINT64_MAX - 1);

	static const char *const bad[] = {
		"", "bytes", "bytes 7-0/100", "bytes 0-100/100", "bytes 0-7", "bytes 0-7/100x",
		"bits 0-7/100", "bytes -7/100", "bytes 0-/100", "bytes */*",
		"bytes 0-99999999999999999999/*", "bytes 1-2/3 4", "bytes0-7/100",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(fg_pull_parse_content_range(bad[i], &a, &b, &t), FG_EINPUT);
}

static void test_plan_merges(void **state)
{
	/* unsorted; 0-99 and 100-199 touch; 300 is a 100-byte gap; 70000+64KiB is
	 * exactly the gap limit; the last is one byte further */
	const struct fg_pull_extent ext[] = {
		{ 300, 10 }, { 0, 100 }, { 100, 100 }, { 310 + FG_PULL_MERGE_GAP, 5 },
		{ 315 + 2 * FG_PULL_MERGE_GAP + 1, 1 },
	};
	struct fg_pull_span spans[5];
	size_t order[5], ns;

	(void)state;
	ns = fg_pull_plan(ext, 5, FG_PULL_MERGE_GAP, order, spans);
	assert_int_equal(ns, 2);
	assert_int_equal(spans[0].offset, 0);
	assert_int_equal(spans[0].len, 315 + FG_PULL_MERGE_GAP);
	assert_int_equal(spans[0].count, 4);
	assert_int_equal(order[spans[0].first], 1);
	assert_int_equal(order[spans[0].first + 1], 2);
	assert_int_equal(order[spans[0].first + 2], 0);
	assert_int_equal(order[spans[0].first + 3], 3);
	assert_int_equal(spans[1].offset, 315 + 2 * FG_PULL_MERGE_GAP + 1);
	assert_int_equal(spans[1].len, 1);
	assert_int_equal(spans[1].count, 1);
	assert_int_equal(order[spans[1].first], 4);
}

static void test_plan_overlaps(void **state)
{
	/* a range inside another, a duplicate, and no gap allowed */
	const struct fg_pull_extent ext[] = {
		{ 1000, 500 }, { 1100, 10 }, { 1000, 500 }, { 1501, 1 }, { 0, 1 },
	};
	struct fg_pull_span spans[5];
	size_t order[5], ns;

	(void)state;
	ns = fg_pull_plan(ext, 5, 0, order, spans);
	assert_int_equal(ns, 3);
	assert_true(spans[0].offset == 0 && spans[0].len == 1);
	assert_true(spans[1].offset == 1000 && spans[1].len == 500 && spans[1].count == 3);
	assert_true(spans[2].offset == 1501 && spans[2].len == 1);
	assert_int_equal(fg_pull_plan(ext, 0, 0, order, spans), 0);
}

/* X-Linked-Etag values: a quoted (maybe weak) SHA-256 is an LFS oid, lower-cased; anything else is not. */
static void test_lfs_oid(void **state)
{
	static const char hex[] = "A1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90";
	char tag[80], out[65] = "untouched";

	(void)state;
	snprintf(tag, sizeof(tag), "\"%s\"", hex);
	assert_int_equal(fg_pull_lfs_oid(tag, out), 1);
	assert_string_equal(out, "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90");
	snprintf(tag, sizeof(tag), "W/\"%s\"", hex);
	assert_int_equal(fg_pull_lfs_oid(tag, out), 1);
	assert_int_equal(fg_pull_lfs_oid(hex, out), 1);
	memcpy(out, "untouched", 10);
	assert_int_equal(fg_pull_lfs_oid("\"a1b2c3d4e5f6071829\"", out), 0); /* a git blob id is 40 */
	snprintf(tag, sizeof(tag), "\"%.63sg\"", hex);
	assert_int_equal(fg_pull_lfs_oid(tag, out), 0);
	assert_int_equal(fg_pull_lfs_oid("", out), 0);
	assert_string_equal(out, "untouched");
}

static void test_cache_key(void **state)
{
	char a[65], b[65];

	(void)state;
	fg_pull_cache_key("http://h/f", "etag:\"1\"", 10, a);
	assert_int_equal(strlen(a), 64);
	fg_pull_cache_key("http://h/f", "etag:\"1\"", 10, b);
	assert_string_equal(a, b);
	fg_pull_cache_key("http://h/g", "etag:\"1\"", 10, b);
	assert_string_not_equal(a, b);
	fg_pull_cache_key("http://h/f", "etag:\"2\"", 10, b);
	assert_string_not_equal(a, b);
	fg_pull_cache_key("http://h/f", "etag:\"1\"", 11, b);
	assert_string_not_equal(a, b);
	/* fields are delimited: moving a byte across the boundary changes the key */
	fg_pull_cache_key("http://h/fe", "tag:\"1\"", 10, b);
	assert_string_not_equal(a, b);
}

static void test_evict_plan(void **state)
{
	struct fg_pull_cache_item it[] = {
		{ 100, 50, 0 }, { 200, 10, 1 }, { 300, 30, 2 }, { 50, 10, 3 }, { 10, 90, 4 },
	};
	struct fg_pull_cache_item copy[5];
	size_t k;

	(void)state;
	memcpy(copy, it, sizeof(it));
	k = fg_pull_evict_plan(copy, 5, 1000);
	assert_int_equal(k, 0);
	/* total 660; cap 400: drop ids 1 (t10), 3 (t10, tie by id) -> 410, then 2 (t30) -> 110 */
	memcpy(copy, it, sizeof(it));
	k = fg_pull_evict_plan(copy, 5, 400);
	assert_int_equal(k, 3);
	assert_int_equal(copy[0].id, 1);
	assert_int_equal(copy[1].id, 3);
	assert_int_equal(copy[2].id, 2);
	assert_int_equal(copy[3].id, 0);
	assert_int_equal(copy[4].id, 4);
	memcpy(copy, it, sizeof(it));
	assert_int_equal(fg_pull_evict_plan(copy, 5, 0), 5);
	memcpy(copy, it, sizeof(it));
	assert_int_equal(fg_pull_evict_plan(copy, 5, 660), 0);
	assert_int_equal(fg_pull_evict_plan(copy, 0, 0), 0);
}

static void test_open_refusals(void **state)
{
	static const char *const hosts[] = { "hub.internal", "127.0.0.1:8080" };
	struct fg_pull_opts o;
	struct fg_pull *p = (struct fg_pull *)&o; /* must stay untouched */
	struct fg_err err = { 0 };
	char dir[PATH_MAX], sub[PATH_MAX + 32];
	struct stat sb;

	(void)state;
	fg_pull_opts_init(&o);
	o.allow_hosts = hosts;
	o.n_allow_hosts = 2;
	assert_int_equal(fg_pull_open(&p, "http://other.host/m/", &o, &err), FG_EFORBIDDEN);
	assert_non_null(strstr(err.msg, "other.host"));
	assert_ptr_equal(p, (struct fg_pull *)&o);
	assert_int_equal(fg_pull_open(&p, "http://127.0.0.1:8081/m/", &o, &err), FG_EFORBIDDEN);

	/* listed hosts open (nothing is fetched), and the cache folder is made */
	tmpdir_new(dir, sizeof(dir), "pull");
	snprintf(sub, sizeof(sub), "%s/state/cache", dir);
	o.cache_dir = sub;
	assert_int_equal(fg_pull_open(&p, "http://hub.internal/m/model.safetensors", &o, &err), 0);
	assert_string_equal(fg_pull_base_url(p), "http://hub.internal/m/");
	assert_string_equal(fg_pull_source_file(p), "model.safetensors");
	fg_pull_close(p);
	snprintf(sub, sizeof(sub), "%s/state/cache/v1/ranges", dir);
	assert_int_equal(stat(sub, &sb), 0);
	assert_int_equal(fg_pull_open(&p, "http://127.0.0.1:8080/m", &o, &err), 0);
	assert_null(fg_pull_source_file(p));
	fg_pull_close(p);

	/* no endpoint anywhere: the Hub's own (listed here, so allowed); nothing is fetched */
	o.hf_endpoint = NULL;
	unsetenv("HF_ENDPOINT");
	static const char *const hub[] = { "huggingface.co" };
	o.allow_hosts = hub;
	o.n_allow_hosts = 1;
	assert_int_equal(fg_pull_open(&p, "hf://a/b@v2", &o, &err), 0);
	assert_string_equal(fg_pull_base_url(p), "https://huggingface.co/a/b/resolve/v2/");
	assert_string_equal(fg_pull_revision(p), "v2");
	assert_null(fg_pull_resolved_commit(p)); /* not known before a response */
	fg_pull_close(p);
	assert_int_equal(fg_pull_open(&p, "hf://a/b@0123456789abcdef0123456789abcdef01234567", &o, &err), 0);
	assert_string_equal(fg_pull_resolved_commit(p), "0123456789abcdef0123456789abcdef01234567");
	fg_pull_close(p);
	assert_int_equal(fg_pull_open(&p, "http://127.0.0.1:8080/m", &o, &err), FG_EFORBIDDEN);
	o.allow_hosts = hosts;
	o.n_allow_hosts = 2;
	assert_int_equal(fg_pull_open(&p, "http://127.0.0.1:8080/m", &o, &err), 0);
	assert_null(fg_pull_revision(p));
	assert_null(fg_pull_resolved_commit(p));
	fg_pull_close(p);
	o.hf_endpoint = "http://hub.internal";
	assert_int_equal(fg_pull_open(&p, "hf://a/b", &o, &err), 0);
	/* bad file names are refused before any request */
	uint8_t *data = NULL;
	size_t len = 0;
	assert_int_equal(fg_pull_get(p, "../etc/passwd", &data, &len, 100, &err), FG_EUSAGE);
	assert_int_equal(fg_pull_get(p, "/abs", &data, &len, 100, &err), FG_EUSAGE);
	assert_int_equal(fg_pull_get(p, "a//b", &data, &len, 100, &err), FG_EUSAGE);
	assert_int_equal(fg_pull_get(p, "a?b", &data, &len, 100, &err), FG_EUSAGE);
	assert_null(data);
	fg_pull_close(p);
	fg_pull_close(NULL);

	assert_int_equal(rm_tree(dir), 0);
}

/* ---- HTTP (against nginx, see tests/e2e/test_pull.sh) ---- */

static const char *base_url, *norange_url, *slow_url, *local_root, *access_log, *cache_root,
	*kill_cmd;

static uint8_t *read_local(const char *rel, uint64_t off, uint64_t len)
{
	char path[1024];
	uint8_t *buf = malloc(len ? len : 1);
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", local_root, rel);
	fp = fopen(path, "rb");
	assert_non_null(fp);
	assert_non_null(buf);
	assert_int_equal(fseeko(fp, (off_t)off, SEEK_SET), 0);
	assert_int_equal(fread(buf, 1, len, fp), len);
	fclose(fp);
	return buf;
}

static uint64_t local_size(const char *rel)
{
	char path[1024];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/%s", local_root, rel);
	assert_int_equal(stat(path, &sb), 0);
	return (uint64_t)sb.st_size;
}

static void assert_local(const char *rel, uint64_t off, uint64_t len, const uint8_t *data)
{
	uint8_t *want = read_local(rel, off, len);

	assert_non_null(data);
	assert_memory_equal(data, want, len);
	free(want);
}

/* nginx writes a request's log line after sending the response, so a client
 * can read the log before the line is there: wait for the count to settle. */
static size_t log_lines(void)
{
	FILE *fp;
	size_t n = 0;
	int c;

	usleep(150 * 1000);
	fp = fopen(access_log, "r");
	assert_non_null(fp);
	while ((c = fgetc(fp)) != EOF)
		n += c == '\n';
	fclose(fp);
	return n;
}

/* The access log's last line (status body_bytes "request" "range"). */
static void log_last(char *out, size_t cap)
{
	FILE *fp;
	char line[2048];

	usleep(150 * 1000); /* see log_lines */
	fp = fopen(access_log, "r");
	assert_non_null(fp);
	out[0] = '\0';
	while (fgets(line, sizeof(line), fp))
		snprintf(out, cap, "%s", line);
	fclose(fp);
}

static void opts_for_test(struct fg_pull_opts *o, const char *endpoint)
{
	fg_pull_opts_init(o);
	o->hf_endpoint = endpoint;
	o->hf_token = "";
	o->retries = 0;
	o->backoff_ms = 10;
	o->timeout_seconds = 20;
}

static struct fg_pull *open_ok(const char *source, const struct fg_pull_opts *o)
{
	struct fg_pull *p = NULL;
	struct fg_err err = { 0 };
	int rc = fg_pull_open(&p, source, o, &err);

	if (rc)
		fail_msg("open %s: %s", source, err.msg);
	return p;
}

static void cache_dir_for(char *out, size_t cap, const char *name)
{
	path_join(out, cap, cache_root, name);
	assert_int_equal(rm_tree(out), 0);
}

/* Fetch a safetensors header remotely; *st parsed header-only. */
static void fetch_header(struct fg_pull *p, const char *file, struct fg_st_file **st)
{
	struct fg_err err = { 0 };
	struct fg_pull_range r = { file, 0, 8, NULL };
	uint64_t n = 0, size = 0;
	int rc;

	rc = fg_pull_ranges(p, &r, 1, &err);
	if (rc)
		fail_msg("%s", err.msg);
	for (int i = 7; i >= 0; i--)
		n = (n << 8) | r.data[i];
	assert_int_equal(fg_pull_size(p, file, &size, &err), 0);
	struct fg_pull_range h = { file, 0, 8 + n, NULL };
	assert_int_equal(fg_pull_ranges(p, &h, 1, &err), 0);
	rc = fg_st_parse_header(st, h.data, 8 + n, size, file, &err);
	if (rc)
		fail_msg("%s", err.msg);
}

/* Every tensor of a shard, read remotely in one call, equals the local bytes. */
static void check_shard_tensors(struct fg_pull *p, const char *repo, const char *file)
{
	struct fg_err err = { 0 };
	struct fg_st_file *st = NULL;
	struct fg_pull_range *r;
	char rel[512];

	fetch_header(p, file, &st);
	r = calloc(st->n_tensors, sizeof(*r));
	assert_non_null(r);
	for (size_t i = 0; i < st->n_tensors; i++) {
		/* reversed order: the pull sorts */
		const struct fg_tensor *t = &st->tensors[st->n_tensors - 1 - i];

		r[i].file = file;
		r[i].offset = st->data_start + t->begin;
		r[i].len = fg_tensor_bytes(t);
	}
	if (fg_pull_ranges(p, r, st->n_tensors, &err))
		fail_msg("%s", err.msg);
	snprintf(rel, sizeof(rel), "%s/%s", repo, file);
	for (size_t i = 0; i < st->n_tensors; i++)
		assert_local(rel, r[i].offset, r[i].len, r[i].data);
	free(r);
	fg_st_close(st);
}

static void test_http_get(void **state)
{
	struct fg_pull_opts o;
	struct fg_pull *p;
	struct fg_err err = { 0 };
	uint8_t *data = NULL;
	size_t len = 0;

	(void)state;
	opts_for_test(&o, base_url);
	p = open_ok("hf://fx/qwen35_hf", &o);
	assert_int_equal(fg_pull_get(p, "config.json", &data, &len, 1 << 20, &err), 0);
	assert_int_equal(len, local_size("fx/qwen35_hf/config.json"));
	assert_local("fx/qwen35_hf/config.json", 0, len, data);
	assert_int_equal(data[len], '\0');
	free(data);
	assert_int_equal(fg_pull_get(p, "model.safetensors.index.json", &data, &len, 1 << 20, &err),
			 0);
	assert_local("fx/qwen35_hf/model.safetensors.index.json", 0, len, data);
	free(data);
	/* over the cap: the transfer stops, FG_EINPUT */
	data = NULL;
	assert_int_equal(fg_pull_get(p, "model-00001-of-00002.safetensors", &data, &len, 1000,
				     &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "cap"));
	assert_null(data);
	fg_pull_close(p);
}

static void test_http_not_found(void **state)
{
	struct fg_pull_opts o;
	struct fg_pull *p;
	struct fg_err err = { 0 };
	uint8_t *data = NULL;
	size_t len = 0;
	uint64_t size;
	char want[512];

	(void)state;
	opts_for_test(&o, base_url);
	p = open_ok("hf://fx/qwen35_hf", &o);
	assert_int_equal(fg_pull_get(p, "mtp.safetensors", &data, &len, 1 << 20, &err),
			 FG_ENOTFOUND);
	snprintf(want, sizeof(want), "GET %s/fx/qwen35_hf/resolve/main/mtp.safetensors: 404 Not Found",
		 base_url);
	assert_string_equal(err.msg, want);
	struct fg_pull_range r = { "model-00009-of-00009.safetensors", 0, 8, NULL };
	assert_int_equal(fg_pull_ranges(p, &r, 1, &err), FG_ENOTFOUND);
	assert_non_null(strstr(err.msg, "model-00009-of-00009.safetensors"));
	assert_non_null(strstr(err.msg, "404"));
	assert_null(r.data);
	assert_int_equal(fg_pull_size(p, "nope.bin", &size, &err), FG_ENOTFOUND);
	fg_pull_close(p);
	/* a repository that does not exist */
	p = open_ok("hf://fx/no_such_model", &o);
	assert_int_equal(fg_pull_get(p, "config.json", &data, &len, 1 << 20, &err), FG_ENOTFOUND);
	fg_pull_close(p);
}

static void test_http_shards_match_local(void **state)
{
	struct fg_pull_opts o;
	struct fg_pull *p;
	struct fg_pull_stats st0, st1;
	struct fg_st_file *st = NULL;
	struct fg_err err = { 0 };
	char src[512];
	uint64_t size;

	(void)state;
	opts_for_test(&o, base_url);
	snprintf(src, sizeof(src), "%s/fx/qwen35_hf/resolve/main", base_url);
	p = open_ok(src, &o);
	check_shard_tensors(p, "fx/qwen35_hf", "model-00001-of-00002.safetensors");
	check_shard_tensors(p, "fx/qwen35_hf", "model-00002-of-00002.safetensors");
	/* sizes were recorded by the range responses: no request */
	fg_pull_stats(p, &st0);
	assert_int_equal(fg_pull_size(p, "model-00002-of-00002.safetensors", &size, &err), 0);
	assert_int_equal(size, local_size("fx/qwen35_hf/model-00002-of-00002.safetensors"));
	fg_pull_stats(p, &st1);
	assert_int_equal(st1.requests, st0.requests);
	/* 2 shards x (length, header, tensors): the tensors of a shard are one request */
	assert_int_equal(st1.requests, 6);
	assert_int_equal(st1.bytes_from_cache, 0);
	fg_pull_close(p);

	/* hf:// and a sidecar */
	p = open_ok("hf://fx/qwen35_mlx_sidecar", &o);
	check_shard_tensors(p, "fx/qwen35_mlx_sidecar", "mtp.safetensors");
	fetch_header(p, "model-00001-of-00002.safetensors", &st);
	fg_st_close(st);
	fg_pull_close(p);

	/* a URL naming one file */
	snprintf(src, sizeof(src), "%s/fx/qwen35_hf/resolve/main/model-00002-of-00002.safetensors",
		 base_url);
	p = open_ok(src, &o);
	assert_string_equal(fg_pull_source_file(p), "model-00002-of-00002.safetensors");
	check_shard_tensors(p, "fx/qwen35_hf", fg_pull_source_file(p));
	fg_pull_close(p);
}

static void test_http_merging(void **state)
{
	struct fg_pull_opts o;
	struct fg_pull *p;
	struct fg_pull_stats s;
	struct fg_err err = { 0 };
	const char *f = "blob.bin";
	const uint64_t G = FG_PULL_MERGE_GAP;
	struct fg_pull_range near[] = {
		{ f, 100, 10, NULL }, { f, 110 + G, 10, NULL }, { f, 0, 4, NULL },
	};
	struct fg_pull_range far[] = {
		{ f, 1000000, 10, NULL }, { f, 1000010 + G + 1, 10, NULL },
	};

	(void)state;
	opts_for_test(&o, base_url);
	p = open_ok("hf://big/data", &o);
	assert_int_equal(fg_pull_ranges(p, near, 3, &err), 0);
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 1);
	assert_int_equal(s.bytes_to_fetch, 120 + G);
	for (size_t i = 0; i < 3; i++)
		assert_local("big/data/blob.bin", near[i].offset, near[i].len, near[i].data);
	assert_int_equal(fg_pull_ranges(p, far, 2, &err), 0);
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 3);
	for (size_t i = 0; i < 2; i++)
		assert_local("big/data/blob.bin", far[i].offset, far[i].len, far[i].data);
	/* already held: no request */
	struct fg_pull_range again = { f, 105, 3, NULL };
	assert_int_equal(fg_pull_ranges(p, &again, 1, &err), 0);
	assert_ptr_equal(again.data, near[0].data + 5);
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 3);
	fg_pull_close(p);
}

static void test_http_parallel(void **state)
{
	enum { N = 300 };
	struct fg_pull_opts o;
	struct fg_pull *p;
	struct fg_pull_stats s;
	struct fg_err err = { 0 };
	struct fg_pull_range r[N];
	uint64_t size = local_size("big/data/blob.bin"), x = 88172645463325252ull;
	uint8_t *all = read_local("big/data/blob.bin", 0, size);

	(void)state;
	opts_for_test(&o, base_url);
	o.max_connections = 4;
	for (size_t i = 0; i < N; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		r[i].file = i % 7 ? "blob.bin" : "model.bin"; /* two names, same bytes */
		r[i].len = 1 + x % 5000;
		r[i].offset = (x >> 20) % (size - r[i].len);
		r[i].data = NULL;
	}
	p = open_ok("hf://big/data", &o);
	if (fg_pull_ranges(p, r, N, &err))
		fail_msg("%s", err.msg);
	for (size_t i = 0; i < N; i++)
		assert_memory_equal(r[i].data, all + r[i].offset, r[i].len);
	fg_pull_stats(p, &s);
	assert_true(s.requests > 10 && s.requests <= N);
	assert_true(s.bytes_fetched == s.bytes_to_fetch);
	fg_pull_close(p);
	free(all);
}

static void test_http_norange(void **state)
{
	struct fg_pull_opts o;
	struct fg_pull *p;
	struct fg_pull_stats s;
	struct fg_err err = { 0 };
	uint64_t size = local_size("big/data/blob.bin"), got;
	struct fg_pull_range r[] = {
		{ "blob.bin", 0, 8, NULL }, { "blob.bin", 3000000, 4096, NULL },
	};
	char last[2048];

	(void)state;
	opts_for_test(&o, norange_url);
	p = open_ok("hf://big/data", &o);
	assert_int_equal(fg_pull_ranges(p, r, 2, &err), 0);
	assert_local("big/data/blob.bin", 0, 8, r[0].data);
	assert_local("big/data/blob.bin", 3000000, 4096, r[1].data);
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 2);
	/* both transfers were dropped early, far before the 96 MiB end */
	assert_true(s.bytes_fetched < size / 4);
	log_last(last, sizeof(last));
	assert_true(strncmp(last, "200 ", 4) == 0);
	assert_true(strtoull(last + 4, NULL, 10) < size / 4);
	/* the size came from Content-Length */
	assert_int_equal(fg_pull_size(p, "blob.bin", &got, &err), 0);
	assert_int_equal(got, size);
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 2);
	fg_pull_close(p);

	/* the very end of a file read through a server that ignores Range */
	p = open_ok("hf://big/data", &o);
	struct fg_pull_range tail = { "tail.bin", size - 10, 10, NULL };
	assert_int_equal(fg_pull_ranges(p, &tail, 1, &err), 0);
	assert_local("big/data/blob.bin", size - 10, 10, tail.data);
	/* and a range past its end: refused from the size learned, no request */
	struct fg_pull_range past = { "tail.bin", size - 5, 10, NULL };
	assert_int_equal(fg_pull_ranges(p, &past, 1, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "past the end"));
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 1);
	fg_pull_close(p);
}

static void test_http_416(void **state)
{
	struct fg_pull_opts o;
	struct fg_pull *p;
	struct fg_err err = { 0 };
	uint64_t size = local_size("fx/qwen35_hf/config.json");
	struct fg_pull_range r = { "config.json", size + 10, 5, NULL };

	(void)state;
	opts_for_test(&o, base_url);
	p = open_ok("hf://fx/qwen35_hf", &o);
	assert_int_equal(fg_pull_ranges(p, &r, 1, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "416 Requested Range Not Satisfiable"));
	assert_non_null(strstr(err.msg, "config.json"));
	assert_null(r.data);
	fg_pull_close(p);
}

static void test_http_errors(void **state)
{
	struct fg_pull_opts o;
	struct fg_pull *p;
	struct fg_err err = { 0 };
	struct fg_pull_stats s;
	char ep[512];
	uint8_t *data = NULL;
	size_t len, before;

	(void)state;
	/* 503 is retried with backoff, then reported */
	snprintf(ep, sizeof(ep), "%s/flaky", base_url);
	opts_for_test(&o, ep);
	o.retries = 2;
	p = open_ok("hf://fx/qwen35_hf", &o);
	before = log_lines();
	assert_int_equal(fg_pull_get(p, "config.json", &data, &len, 1 << 20, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "503 Service"));
	assert_non_null(strstr(err.msg, "after 3 attempts"));
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 3);
	assert_int_equal(log_lines(), before + 3);
	fg_pull_close(p);

	/* 401 without the token, a clear message; fine with it */
	snprintf(ep, sizeof(ep), "%s/private", base_url);
	opts_for_test(&o, ep);
	o.retries = 3;
	p = open_ok("hf://fx/qwen35_hf", &o);
	assert_int_equal(fg_pull_get(p, "config.json", &data, &len, 1 << 20, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "401 Unauthorized"));
	assert_non_null(strstr(err.msg, "HF_TOKEN"));
	assert_non_null(strstr(err.msg, "/private/fx/qwen35_hf/resolve/main/config.json"));
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 1); /* not retried */
	fg_pull_close(p);
	o.hf_token = "sekrit";
	p = open_ok("hf://fx/qwen35_hf", &o);
	assert_int_equal(fg_pull_get(p, "config.json", &data, &len, 1 << 20, &err), 0);
	assert_local("fx/qwen35_hf/config.json", 0, len, data);
	free(data);
	fg_pull_close(p);

	/* nothing listens there: a network error after the retries */
	opts_for_test(&o, "http://127.0.0.1:9");
	o.retries = 1;
	p = open_ok("hf://fx/qwen35_hf", &o);
	assert_int_equal(fg_pull_get(p, "config.json", &data, &len, 1 << 20, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "http://127.0.0.1:9/fx/qwen35_hf/resolve/main/config.json"));
	assert_non_null(strstr(err.msg, "after 2 attempts"));
	fg_pull_close(p);
}

static void test_http_redirects(void **state)
{
	static const char *const loopback[] = { "127.0.0.1" };
	struct fg_pull_opts o;
	struct fg_pull *p;
	struct fg_err err = { 0 };
	char ep[512];
	uint8_t *data = NULL;
	size_t len;

	(void)state;
	/* /redir/X answers 302 to /X on the same host: followed */
	snprintf(ep, sizeof(ep), "%s/redir", base_url);
	opts_for_test(&o, ep);
	o.allow_hosts = loopback;
	o.n_allow_hosts = 1;
	p = open_ok("hf://fx/qwen35_hf", &o);
	assert_int_equal(fg_pull_get(p, "config.json", &data, &len, 1 << 20, &err), 0);
	assert_local("fx/qwen35_hf/config.json", 0, len, data);
	free(data);
	struct fg_pull_range r = { "model-00001-of-00002.safetensors", 8, 100, NULL };
	assert_int_equal(fg_pull_ranges(p, &r, 1, &err), 0);
	assert_local("fx/qwen35_hf/model-00001-of-00002.safetensors", 8, 100, r.data);
	fg_pull_close(p);

	/* /offsite/X redirects to localhost: refused when only 127.0.0.1 is allowed */
	snprintf(ep, sizeof(ep), "%s/offsite", base_url);
	o.hf_endpoint = ep;
	p = open_ok("hf://fx/qwen35_hf", &o);
	data = NULL;
	assert_int_equal(fg_pull_get(p, "config.json", &data, &len, 1 << 20, &err), FG_EFORBIDDEN);
	assert_non_null(strstr(err.msg, "redirect to 'http://localhost:"));
	assert_non_null(strstr(err.msg, "allow_hosts"));
	assert_null(data);
	fg_pull_close(p);
}

static size_t count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Regular files in cache/v1/ranges/(star)/(star). */
static size_t count_entries(const char *cache, char *any, size_t cap)
{
	char dir[1100], sub[1400];
	struct dirent *de, *e2;
	size_t n = 0;
	DIR *d, *d2;

	snprintf(dir, sizeof(dir), "%s/v1/ranges", cache);
	d = opendir(dir);
	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
		d2 = opendir(sub);
		if (!d2)
			continue;
		while ((e2 = readdir(d2)) != NULL) {
			if (e2->d_name[0] == '.')
				continue;
			n++;
			if (any)
				snprintf(any, cap, "%s/%s", sub, e2->d_name);
		}
		closedir(d2);
	}
	closedir(d);
	return n;
}

/* One fixed set of reads: config.json, both shard headers and tensors. */
static void read_fixed(struct fg_pull *p)
{
	struct fg_err err = { 0 };
	uint8_t *data = NULL;
	size_t len;

	if (fg_pull_get(p, "config.json", &data, &len, 1 << 20, &err))
		fail_msg("%s", err.msg);
	assert_local("fx/qwen35_hf/config.json", 0, len, data);
	free(data);
	check_shard_tensors(p, "fx/qwen35_hf", "model-00001-of-00002.safetensors");
	check_shard_tensors(p, "fx/qwen35_hf", "model-00002-of-00002.safetensors");
}

static void test_http_cache(void **state)
{
	struct fg_pull_opts o;
	struct fg_pull *p;
	struct fg_pull_stats s;
	struct fg_err err = { 0 };
	char cache[1024], entry[2000], cmd[2400];
	size_t before, n_entries;

	(void)state;
	opts_for_test(&o, base_url);
	cache_dir_for(cache, sizeof(cache), "main");
	o.cache_dir = cache;
	p = open_ok("hf://fx/qwen35_hf", &o);
	read_fixed(p);
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 7);
	assert_int_equal(s.bytes_from_cache, 0);
	fg_pull_close(p);
	n_entries = count_entries(cache, entry, sizeof(entry));
	assert_int_equal(n_entries, 7);

	/* a second pull of the same revision makes no request */
	before = log_lines();
	p = open_ok("hf://fx/qwen35_hf", &o);
	read_fixed(p);
	/* a range inside a cached one is served from it */
	struct fg_pull_range sub = { "model-00001-of-00002.safetensors", 9, 20, NULL };
	assert_int_equal(fg_pull_ranges(p, &sub, 1, &err), 0);
	assert_local("fx/qwen35_hf/model-00001-of-00002.safetensors", 9, 20, sub.data);
	uint64_t size;
	assert_int_equal(fg_pull_size(p, "model-00002-of-00002.safetensors", &size, &err), 0);
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 0);
	assert_true(s.bytes_from_cache > 0);
	assert_int_equal(s.bytes_fetched, 0);
	fg_pull_close(p);
	assert_int_equal(log_lines(), before);

	/* a flipped byte in an entry: detected, dropped, refetched */
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import sys; f=open(sys.argv[1],\"r+b\"); b=f.read(1); f.seek(0); "
		 "f.write(bytes([b[0]^1]))' '%s'", entry);
	assert_int_equal(system(cmd), 0);
	p = open_ok("hf://fx/qwen35_hf", &o);
	read_fixed(p);
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 1);
	fg_pull_close(p);
	assert_int_equal(log_lines(), before + 1);
	assert_int_equal(count_entries(cache, NULL, 0), n_entries);
	p = open_ok("hf://fx/qwen35_hf", &o);
	read_fixed(p);
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 0);
	fg_pull_close(p);

	/* a 404 is remembered too */
	uint8_t *data = NULL;
	size_t len;
	p = open_ok("hf://fx/qwen35_hf", &o);
	assert_int_equal(fg_pull_get(p, "mtp.safetensors", &data, &len, 1 << 20, &err),
			 FG_ENOTFOUND);
	fg_pull_close(p);
	before = log_lines();
	p = open_ok("hf://fx/qwen35_hf", &o);
	assert_int_equal(fg_pull_get(p, "mtp.safetensors", &data, &len, 1 << 20, &err),
			 FG_ENOTFOUND);
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 0);
	fg_pull_close(p);
	assert_int_equal(log_lines(), before);

	/* TTL 0: every file is confirmed once per pull with a 1-byte request */
	o.cache_ttl_seconds = 0;
	p = open_ok("hf://fx/qwen35_hf", &o);
	read_fixed(p);
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 3); /* a probe per shard; config.json is fetched again */
	fg_pull_close(p);
}

/*
 * The hub's commit (nginx_lib.sh sends X-Repo-Commit for main) is learned
 * from responses and kept in the records; offline (hf_offline), every record
 * is trusted however old, nothing is asked, and a miss names its URL.
 */
static void test_http_offline_and_commit(void **state)
{
	struct fg_pull_opts o;
	struct fg_pull *p;
	struct fg_pull_stats s;
	struct fg_err err = { 0 };
	const char *want = getenv("FORGED_TEST_HUB_COMMIT");
	char cache[1024];
	size_t before;
	uint8_t *data = NULL;
	size_t len;

	(void)state;
	assert_non_null(want);
	opts_for_test(&o, base_url);
	cache_dir_for(cache, sizeof(cache), "offline");
	o.cache_dir = cache;
	p = open_ok("hf://fx/qwen35_hf", &o);
	assert_null(fg_pull_resolved_commit(p));
	read_fixed(p);
	assert_string_equal(fg_pull_resolved_commit(p), want);
	fg_pull_close(p);

	/* TTL 0 would confirm every file: offline, the expired records are served as they are */
	before = log_lines();
	o.cache_ttl_seconds = 0;
	o.hf_offline = "1";
	p = open_ok("hf://fx/qwen35_hf", &o);
	read_fixed(p);
	assert_string_equal(fg_pull_resolved_commit(p), want); /* from the records */
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 0);
	assert_int_equal(s.bytes_fetched, 0);
	/* what the cache lacks: FG_EINPUT naming the URL, still no request */
	assert_int_equal(fg_pull_get(p, "generation_config.json", &data, &len, 1 << 20, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "/fx/qwen35_hf/resolve/main/generation_config.json"));
	assert_non_null(strstr(err.msg, "HF_HUB_OFFLINE"));
	struct fg_pull_range r = { "other.safetensors", 1000, 10, NULL };
	assert_int_equal(fg_pull_ranges(p, &r, 1, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "(bytes 1000-1009)"));
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 0);
	fg_pull_close(p);
	assert_int_equal(log_lines(), before);
	/* "0", and any other value than 1/true/yes/on, is online; http(s):// is never offline */
	o.hf_offline = "TRUE";
	p = open_ok("hf://fx/qwen35_hf", &o);
	assert_int_equal(fg_pull_get(p, "generation_config.json", &data, &len, 1 << 20, &err), FG_EINPUT);
	fg_pull_close(p);
	o.hf_offline = "0";
	p = open_ok("hf://fx/qwen35_hf", &o);
	data = NULL;
	assert_int_not_equal(fg_pull_get(p, "generation_config.json", &data, &len, 1 << 20, &err), FG_EINPUT);
	free(data);
	fg_pull_close(p);
	o.hf_offline = "1";
	char folder[600];
	snprintf(folder, sizeof(folder), "%s/fx/qwen35_hf/resolve/main/", base_url);
	p = open_ok(folder, &o);
	data = NULL;
	if (fg_pull_get(p, "config.json", &data, &len, 1 << 20, &err))
		fail_msg("offline does not apply to http(s)://: %s", err.msg);
	assert_null(fg_pull_resolved_commit(p));
	free(data);
	fg_pull_close(p);
}

static void test_http_cache_eviction(void **state)
{
	struct fg_pull_opts o;
	struct fg_pull *p;
	struct fg_err err = { 0 };
	char cache[1024], tmpdir[1100];
	const uint64_t M = 1 << 20;
	struct fg_pull_range a = { "blob.bin", 0, 2 * M, NULL };
	struct fg_pull_range b = { "blob.bin", 10 * M, 2 * M, NULL };
	struct fg_pull_range c = { "blob.bin", 20 * M, 2 * M, NULL };
	struct fg_pull_stats s;

	(void)state;
	opts_for_test(&o, base_url);
	cache_dir_for(cache, sizeof(cache), "evict");
	o.cache_dir = cache;
	o.cache_cap_bytes = 5 * M;
	p = open_ok("hf://big/data", &o);
	assert_int_equal(fg_pull_ranges(p, &a, 1, &err), 0);
	sleep(1); /* distinct mtimes on coarse file systems */
	assert_int_equal(fg_pull_ranges(p, &b, 1, &err), 0);
	fg_pull_close(p);
	assert_int_equal(count_entries(cache, NULL, 0), 2);
	sleep(1);
	/* use a again, so b is the least recently used */
	p = open_ok("hf://big/data", &o);
	assert_int_equal(fg_pull_ranges(p, &a, 1, &err), 0);
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 0);
	sleep(1);
	assert_int_equal(fg_pull_ranges(p, &c, 1, &err), 0); /* 6 MiB > 5: b goes */
	assert_local("big/data/blob.bin", 0, 2 * M, a.data);
	assert_local("big/data/blob.bin", 20 * M, 2 * M, c.data);
	fg_pull_close(p);
	assert_int_equal(count_entries(cache, NULL, 0), 2);
	p = open_ok("hf://big/data", &o);
	assert_int_equal(fg_pull_ranges(p, &a, 1, &err), 0);
	assert_int_equal(fg_pull_ranges(p, &c, 1, &err), 0);
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 0);
	assert_int_equal(fg_pull_ranges(p, &b, 1, &err), 0);
	fg_pull_stats(p, &s);
	assert_int_equal(s.requests, 1);
	fg_pull_close(p);
	snprintf(tmpdir, sizeof(tmpdir), "%s/v1/tmp", cache);
	assert_int_equal(count_files(tmpdir), 0);
}

struct killer {
	uint64_t at;
	int fired;
};

static int kill_midway(void *ctx, uint64_t done, uint64_t total)
{
	struct killer *k = ctx;

	(void)total;
	if (!k->fired && done >= k->at) {
		k->fired = 1;
		if (system(kill_cmd) != 0)
			fail_msg("%s failed", kill_cmd);
	}
	return 0;
}

static void test_http_disconnect(void **state)
{
	struct fg_pull_opts o;
	struct fg_pull *p;
	struct fg_err err = { 0 };
	struct fg_pull_stats s;
	struct killer k = { 256 << 10, 0 };
	char cache[1024], tmpdir[1100], last[2048];
	const uint64_t len = 3 << 20;
	struct fg_pull_range r = { "blob.bin", 4096, len, NULL };

	(void)state;
	if (!kill_cmd || !*kill_cmd)
		skip();
	opts_for_test(&o, slow_url);
	cache_dir_for(cache, sizeof(cache), "disconnect");
	o.cache_dir = cache;
	o.retries = 0;
	p = open_ok("hf://big/data", &o);
	fg_pull_set_progress(p, kill_midway, &k);
	assert_int_equal(fg_pull_ranges(p, &r, 1, &err), FG_EINPUT);
	assert_true(k.fired);
	assert_null(r.data);
	assert_non_null(strstr(err.msg, "/slow/big/data/resolve/main/blob.bin (bytes 4096-"));
	assert_non_null(strstr(err.msg, "broke off after"));
	fg_pull_close(p);
	/* nothing half-written is left */
	assert_int_equal(count_entries(cache, NULL, 0), 0);
	snprintf(tmpdir, sizeof(tmpdir), "%s/v1/tmp", cache);
	assert_int_equal(count_files(tmpdir), 0);

	/* with retries, the transfer resumes where it stopped */
	o.retries = 3;
	k.fired = 0;
	usleep(200 * 1000); /* let the master start a new worker */
	p = open_ok("hf://big/data", &o);
	fg_pull_set_progress(p, kill_midway, &k);
	if (fg_pull_ranges(p, &r, 1, &err))
		fail_msg("%s", err.msg);
	assert_true(k.fired);
	assert_local("big/data/blob.bin", 4096, len, r.data);
	fg_pull_stats(p, &s);
	assert_true(s.requests >= 2);
	log_last(last, sizeof(last));
	/* the last request asked for the rest only: bytes=N-M with N > 4096 */
	char *range = strstr(last, "\"bytes=");
	assert_non_null(range);
	assert_true(strtoull(range + 7, NULL, 10) > 4096);
	fg_pull_close(p);
	assert_int_equal(count_entries(cache, NULL, 0), 1);
	assert_int_equal(count_files(tmpdir), 0);
}

static int progress_calls;
static uint64_t progress_done, progress_total;

static int record_progress(void *ctx, uint64_t done, uint64_t total)
{
	(void)ctx;
	progress_calls++;
	progress_done = done;
	progress_total = total;
	return 0;
}

static int cancel_now(void *ctx, uint64_t done, uint64_t total)
{
	(void)ctx;
	(void)done;
	(void)total;
	return 1;
}

static void test_http_progress(void **state)
{
	struct fg_pull_opts o;
	struct fg_pull *p;
	struct fg_err err = { 0 };
	struct fg_pull_stats s;
	struct fg_pull_range r[] = {
		{ "blob.bin", 0, 5 << 20, NULL }, { "blob.bin", 30 << 20, 1 << 20, NULL },
	};

	(void)state;
	opts_for_test(&o, base_url);
	p = open_ok("hf://big/data", &o);
	fg_pull_set_progress(p, record_progress, NULL);
	assert_int_equal(fg_pull_ranges(p, r, 2, &err), 0);
	fg_pull_stats(p, &s);
	assert_true(progress_calls > 0);
	assert_int_equal(progress_total, 6 << 20);
	assert_int_equal(progress_done, 6 << 20);
	assert_int_equal(s.bytes_to_fetch, 6 << 20);
	fg_pull_close(p);

	r[0].data = r[1].data = NULL;
	p = open_ok("hf://big/data", &o);
	fg_pull_set_progress(p, cancel_now, NULL);
	assert_int_equal(fg_pull_ranges(p, r, 2, &err), FG_ECANCELLED);
	assert_null(r[0].data);
	fg_pull_close(p);
}

/* The shell's rounds over one cache: cold, warm, and refetch after it
 * corrupted an entry.  It checks nginx's log between them. */
static void test_http_phase(void **state)
{
	const char *phase = getenv("FORGED_TEST_PHASE");
	struct fg_pull_opts o;
	struct fg_pull *p;
	struct fg_pull_stats s;
	char cache[1024];

	(void)state;
	opts_for_test(&o, base_url);
	snprintf(cache, sizeof(cache), "%s/shell", cache_root);
	o.cache_dir = cache;
	p = open_ok("hf://fx/qwen35_hf", &o);
	read_fixed(p);
	fg_pull_stats(p, &s);
	fg_pull_close(p);
	printf("phase %s: requests %" PRIu64 ", from cache %" PRIu64 "\n", phase, s.requests,
	       s.bytes_from_cache);
	if (strcmp(phase, "cold") == 0) {
		assert_int_equal(s.requests, 7);
		assert_int_equal(s.bytes_from_cache, 0);
	} else if (strcmp(phase, "warm") == 0) {
		assert_int_equal(s.requests, 0);
		assert_int_equal(s.bytes_fetched, 0);
		assert_true(s.bytes_from_cache > 0);
	} else {
		assert_int_equal(s.requests, 1);
	}
}

int main(void)
{
	const struct CMUnitTest unit[] = {
		cmocka_unit_test(test_is_url),
		cmocka_unit_test(test_parse_hf),
		cmocka_unit_test(test_parse_hf_default_endpoint),
		cmocka_unit_test(test_hf_token_path),
		cmocka_unit_test(test_parse_hf_refusals),
		cmocka_unit_test(test_parse_http),
		cmocka_unit_test(test_file_url),
		cmocka_unit_test(test_content_range),
		cmocka_unit_test(test_plan_merges),
		cmocka_unit_test(test_plan_overlaps),
		cmocka_unit_test(test_cache_key),
		cmocka_unit_test(test_lfs_oid),
		cmocka_unit_test(test_evict_plan),
		cmocka_unit_test(test_open_refusals),
	};
	const struct CMUnitTest http[] = {
		cmocka_unit_test(test_http_get),
		cmocka_unit_test(test_http_not_found),
		cmocka_unit_test(test_http_shards_match_local),
		cmocka_unit_test(test_http_merging),
		cmocka_unit_test(test_http_parallel),
		cmocka_unit_test(test_http_norange),
		cmocka_unit_test(test_http_416),
		cmocka_unit_test(test_http_errors),
		cmocka_unit_test(test_http_redirects),
		cmocka_unit_test(test_http_cache),
		cmocka_unit_test(test_http_offline_and_commit),
		cmocka_unit_test(test_http_cache_eviction),
		cmocka_unit_test(test_http_disconnect),
		cmocka_unit_test(test_http_progress),
	};
	const struct CMUnitTest phase[] = {
		cmocka_unit_test(test_http_phase),
	};
	const char *ph;

	base_url = getenv("FORGED_TEST_BASE_URL");
	if (!base_url || !*base_url)
		return cmocka_run_group_tests(unit, NULL, NULL);
	norange_url = getenv("FORGED_TEST_NORANGE_URL");
	slow_url = getenv("FORGED_TEST_SLOW_URL");
	local_root = getenv("FORGED_TEST_LOCAL_ROOT");
	access_log = getenv("FORGED_TEST_ACCESS_LOG");
	cache_root = getenv("FORGED_TEST_CACHE_DIR");
	kill_cmd = getenv("FORGED_TEST_KILL_CMD");
	ph = getenv("FORGED_TEST_PHASE");
	if (!norange_url || !slow_url || !local_root || !access_log || !cache_root) {
		fprintf(stderr, "test_pull: FORGED_TEST_BASE_URL needs the other FORGED_TEST_* "
				"variables (see tests/e2e/test_pull.sh)\n");
		return 2;
	}
	if (ph && strcmp(ph, "main") != 0)
		return cmocka_run_group_tests(phase, NULL, NULL);
	return cmocka_run_group_tests(http, NULL, NULL);
}
