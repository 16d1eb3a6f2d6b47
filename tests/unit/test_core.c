/*
 * test_core.c: the plumbing of forge/core that every layer shares: the
 * string helpers (str.h), array growth (grow.h), the running SHA-256,
 * whose final step leaves the hash to its owner, and the hash pipe that
 * hashes a stream on threads of its own (sha256.h), file hashes remembered
 * per file version (filehash.h), JSON from files and buffers (json.h), and
 * the file-system steps (fs.h): whole writes, atomic replacement, mkdir -p,
 * tree removal, link-else-copy.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "forge/core/filehash.h"
#include "forge/core/fs.h"
#include "forge/core/grow.h"
#include "forge/core/nameidx.h"
#include "forge/core/json.h"
#include "forge/core/sha256.h"
#include "forge/core/str.h"
#include "tests/unit/support.h"

/* ---- str.h ---- */

static void test_ends_with(void **state)
{
	(void)state;
	assert_true(fg_str_ends_with("mtp.fc.weight", ".weight"));
	assert_true(fg_str_ends_with(".weight", ".weight"));
	assert_true(fg_str_ends_with("x", ""));
	assert_false(fg_str_ends_with("weight", ".weight"));
	assert_false(fg_str_ends_with("mtp.fc.weights", ".weight"));
	assert_false(fg_str_ends_with("", "x"));
}

/*
 * The name hash: the same bytes hash the same wherever they stand and
 * whatever follows them (every length 0-40, the tail is loaded two ways),
 * and the names of a checkpoint's expert tensors do not collide.
 */
/* 3,000 names through several growths: each reads back its own value, a second put keeps the first. */
static void test_nameidx(void **state)
{
	static char names[3000][16];
	struct fg_nameidx x = { 0 };
	uintptr_t v = 0;

	(void)state;
	assert_int_equal(fg_nameidx_get(&x, "a", &v), 0);
	for (int i = 0; i < 3000; i++) {
		snprintf(names[i], sizeof(names[i]), "m.%d.w", i);
		assert_int_equal(fg_nameidx_put(&x, names[i], (uintptr_t)i * 7, NULL), 0);
	}
	assert_int_equal(fg_nameidx_put(&x, "m.17.w", 1, &v), 1);
	assert_int_equal(v, 17 * 7);
	for (int i = 0; i < 3000; i++) {
		assert_int_equal(fg_nameidx_get(&x, names[i], &v), 1);
		assert_int_equal(v, (uintptr_t)i * 7);
	}
	assert_int_equal(fg_nameidx_get(&x, "m.3000.w", &v), 0);
	assert_int_equal(fg_nameidx_get(&x, "m.1", &v), 0);
	assert_int_equal(x.n, 3000);
	assert_true(x.n * 3 < (x.mask + 1) * 2);
	fg_nameidx_free(&x);
	assert_null(x.slot);
	assert_int_equal(fg_nameidx_get(&x, "m.1.w", &v), 0);
	fg_nameidx_free(NULL);
}

static void test_hash_bytes(void **state)
{
	char text[64], moved[128], name[80];
	uint32_t seen[2048];
	size_t n_seen = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = (char)('a' + i % 26);
	for (size_t n = 0; n <= 40; n++) {
		for (size_t at = 0; at < 16; at++) {
			memset(moved, 'z' - (int)at, sizeof(moved));
			memcpy(moved + at, text, n);
			assert_int_equal(fg_hash_bytes(moved + at, n), fg_hash_bytes(text, n));
		}
		if (n)
			assert_int_not_equal(fg_hash_bytes(text, n), fg_hash_bytes(text, n - 1));
	}
	for (int l = 0; l < 8; l++) {
		for (int e = 0; e < 256; e++) {
			int len = snprintf(name, sizeof(name), "model.layers.%d.mlp.experts.%d.down_proj.weight", l, e);
			uint32_t h = fg_hash_bytes(name, (size_t)len);

			for (size_t k = 0; k < n_seen; k++)
				assert_int_not_equal(seen[k], h);
			seen[n_seen++] = h;
		}
	}
}

static void test_fnv1a(void **state)
{
	(void)state;
	/* The published 64-bit FNV-1a test vectors. */
	assert_true(fg_fnv1a("") == 0xcbf29ce484222325ull);
	assert_true(fg_fnv1a("a") == 0xaf63dc4c8601ec8cull);
	assert_true(fg_fnv1a("foobar") == 0x85944171f73967e8ull);
	assert_true(fg_fnv1a("mtp.fc.weight") != fg_fnv1a("mtp.fc.weigh"));
}

static void test_hex_nibble(void **state)
{
	static const char digits[] = "0123456789abcdef";

	(void)state;
	for (int i = 0; i < 16; i++) {
		assert_int_equal(fg_hex_nibble(digits[i]), i);
		if (i >= 10)
			assert_int_equal(fg_hex_nibble(digits[i] - 'a' + 'A'), i);
	}
	assert_int_equal(fg_hex_nibble('g'), FG_HEX_NONE);
	assert_int_equal(fg_hex_nibble('G'), FG_HEX_NONE);
	assert_int_equal(fg_hex_nibble('/'), FG_HEX_NONE);
	assert_int_equal(fg_hex_nibble(':'), FG_HEX_NONE);
	assert_int_equal(fg_hex_nibble('\0'), FG_HEX_NONE);
	assert_int_equal(fg_hex_nibble(-80), FG_HEX_NONE); /* a negative char */
}

/* ---- grow.h ---- */

static void test_grow_one_at_a_time(void **state)
{
	uint32_t *v = NULL;
	size_t n = 0, cap = 0, reallocs = 0;

	(void)state;
	for (uint32_t i = 0; i < 10000; i++) {
		size_t before = cap;

		assert_int_equal(FG_GROW(v, n + 1, cap), 0);
		reallocs += cap != before;
		assert_true(cap >= n + 1);
		v[n++] = i;
	}
	for (uint32_t i = 0; i < 10000; i++)
		assert_int_equal(v[i], i);
	assert_true(reallocs <= 12); /* doubling from FG_GROW_FIRST, not one per element */
	/* Already large enough: nothing moves. */
	{
		uint32_t *same = v;
		size_t c = cap;

		assert_int_equal(FG_GROW(v, 5, cap), 0);
		assert_ptr_equal(v, same);
		assert_int_equal(cap, c);
	}
	free(v);
}

static void test_grow_exact_need(void **state)
{
	char *s = NULL;
	size_t cap = 0;

	(void)state;
	assert_int_equal(FG_GROW(s, 1, cap), 0);
	assert_int_equal(cap, FG_GROW_FIRST);
	assert_int_equal(FG_GROW(s, 1000, cap), 0);
	assert_true(cap >= 1000 && cap < 2048);
	memset(s, 'x', 1000);
	free(s);
}

static void test_grow_overflow(void **state)
{
	uint64_t *v = NULL, *kept;
	size_t cap = 0;

	(void)state;
	assert_int_equal(FG_GROW(v, 4, cap), 0);
	v[3] = 42;
	kept = v;
	/* need * sizeof(uint64_t) overflows size_t: refused, nothing touched. */
	assert_int_equal(FG_GROW(v, SIZE_MAX / 4, cap), FG_ENOMEM);
	assert_ptr_equal(v, kept);
	assert_int_equal(cap, FG_GROW_FIRST);
	assert_int_equal(v[3], 42);
	assert_int_equal(FG_GROW(v, SIZE_MAX, cap), FG_ENOMEM);
	assert_int_equal(cap, FG_GROW_FIRST);
	free(v);
}

/* ---- sha256.h ---- */

static void test_sha256_final_leaves_the_hash(void **state)
{
	struct fg_sha256 *h = fg_sha256_new();
	char hex[FG_SHA256_HEX], buf_hex[FG_SHA256_HEX];

	(void)state;
	assert_non_null(h);
	fg_sha256_update(h, "ab", 2);
	fg_sha256_update(h, "c", 1);
	fg_sha256_final_hex(h, hex);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	fg_sha256_buf("abc", 3, buf_hex);
	assert_string_equal(buf_hex, hex);
	fg_sha256_free(h); /* the caller's: final did not free it (ASan checks) */
	fg_sha256_free(NULL);
}

/* SHA-256 of one million 'a' (FIPS 180-2, appendix B.3). */
#define MILLION_A "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"

/*
 * The pipe's hashes equal the stream's SHA-256 whatever the chunking: a
 * million 'a' pushed from three reused buffers in chunks of 1..7919 bytes,
 * each buffer refilled only after the ticket of its last push (a buffer
 * changed too early would change the hash), into two hashes at once; and a
 * pipe of no hashes takes pushes and does nothing.
 */
static void test_sha256_pipe(void **state)
{
	struct fg_sha256 *h[2] = { fg_sha256_new(), fg_sha256_new() };
	struct fg_sha256_pipe *p, *none;
	unsigned long long ticket[3] = { 0 }, last = 0;
	static char buf[3][7919];
	char hex[FG_SHA256_HEX];
	size_t done = 0, step = 1;

	(void)state;
	assert_non_null(h[0]);
	assert_non_null(h[1]);
	p = fg_sha256_pipe_start(h, 2);
	assert_non_null(p);
	for (unsigned k = 0; done < 1000000; k = (k + 1) % 3) {
		size_t len = step % 7919 + 1;

		if (len > 1000000 - done)
			len = 1000000 - done;
		/*
		 * Up to three chunks in flight: buffer k is spoiled as soon as its
		 * last chunk is taken, then refilled; a wait that returned before
		 * the hash threads had read it would hash 'x' bytes.
		 */
		fg_sha256_pipe_wait(p, ticket[k]);
		memset(buf[k], 'x', sizeof(buf[k]));
		memset(buf[k], 'a', len);
		ticket[k] = fg_sha256_pipe_push(p, buf[k], len);
		assert_true(ticket[k] == last + 1); /* tickets count the pushes */
		last = ticket[k];
		done += len;
		step = step * 31 + 7;
	}
	fg_sha256_pipe_finish(p);
	for (int i = 0; i < 2; i++) {
		fg_sha256_final_hex(h[i], hex);
		assert_string_equal(hex, MILLION_A);
		fg_sha256_free(h[i]);
	}
	none = fg_sha256_pipe_start(NULL, 0);
	assert_non_null(none);
	assert_true(fg_sha256_pipe_push(none, "abc", 3) > 0);
	fg_sha256_pipe_finish(none);
	fg_sha256_pipe_finish(NULL);
}

/* ---- filehash.h ---- */

struct meter {
	uint64_t last, total;
	int calls;
};

static int meter(void *ctx, uint64_t done, uint64_t total)
{
	struct meter *m = ctx;

	assert_true(done >= m->last); /* never backwards */
	m->last = done;
	m->total = total;
	m->calls++;
	return 0;
}

static int stop_at_once(void *ctx, uint64_t done, uint64_t total)
{
	(void)ctx;
	(void)done;
	(void)total;
	return 1;
}

/* Write len bytes of c to path, its mtime set age_s seconds in the past (negative: the future; 0: left as written). */
static void put_aged(const char *path, char c, size_t len, int age_s)
{
	char *b = malloc(len ? len : 1);
	struct timespec ts[2];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_non_null(b);
	assert_true(fd >= 0);
	memset(b, c, len);
	assert_int_equal(fg_fs_write_all(fd, b, len), 0);
	if (age_s) {
		clock_gettime(CLOCK_REALTIME, &ts[0]);
		ts[0].tv_sec -= age_s;
		ts[1] = ts[0];
		assert_int_equal(futimens(fd, ts), 0);
	}
	close(fd);
	free(b);
}

/*
 * A file's SHA-256 is read once per version (device, inode, size, mtime_ns):
 * the first call reads every byte and remembers it, the second reads none
 * and gives the same hash, a hard link (one inode) hits the same entry; a
 * new mtime (same size) or a new size is a new version, read again; a file
 * written within the racy window is hashed but not remembered; an entry
 * whose key is not the file's (a name collision, a torn write) is not
 * trusted; no cache folder means no cache; a folder is no file to hash.
 */
static void test_filehash(void **state)
{
	char dir[] = "/tmp/forged-test-filehash-XXXXXX", cache[64], path[64], link_path[64];
	char hex[FG_SHA256_HEX], again[FG_SHA256_HEX], entry[96];
	struct fg_err err = { 0 };
	struct meter m = { 0 };
	uint64_t got = 1, size = 0;
	DIR *d;
	struct dirent *de;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	snprintf(path, sizeof(path), "%s/a.bin", dir);
	snprintf(link_path, sizeof(link_path), "%s/link.bin", dir);
	put_aged(path, 'a', 1000000, 3600);
	assert_int_equal(fg_filehash_cached(cache, path, hex, &size), 0);
	assert_int_equal(size, 1000000);
	assert_int_equal(fg_filehash(cache, path, hex, &got, meter, &m, &err), 0);
	assert_string_equal(hex, MILLION_A);
	assert_int_equal(got, 1000000);
	assert_int_equal(m.last, 1000000);
	assert_int_equal(m.total, 1000000);
	assert_int_equal(fg_filehash_cached(cache, path, again, &size), 1);
	assert_string_equal(again, MILLION_A);
	memset(again, 0, sizeof(again));
	got = 1;
	assert_int_equal(fg_filehash(cache, path, again, &got, NULL, NULL, &err), 0);
	assert_int_equal(got, 0); /* remembered: nothing read */
	assert_string_equal(again, MILLION_A);
	assert_int_equal(link(path, link_path), 0);
	assert_int_equal(fg_filehash(cache, link_path, again, &got, NULL, NULL, &err), 0);
	assert_int_equal(got, 0);
	assert_string_equal(again, MILLION_A);
	unlink(link_path);

	/* Same size, other bytes, another mtime: another version. */
	put_aged(path, 'b', 1000000, 1800);
	assert_int_equal(fg_filehash_cached(cache, path, again, NULL), 0);
	assert_int_equal(fg_filehash(cache, path, again, &got, NULL, NULL, &err), 0);
	assert_int_equal(got, 1000000);
	/* hashlib.sha256(b"b" * 1000000).hexdigest() */
	assert_string_equal(again, "e57d44305d1b321432135bd8ee95e1612d88662ab611b8c64518a2e4479d3ad9");
	/* Another size, the same mtime to the nanosecond: another version too. */
	{
		struct stat before;
		struct timespec ts[2];

		assert_int_equal(stat(path, &before), 0);
		put_aged(path, 'a', 999999, 0);
		ts[0] = ts[1] = before.st_mtim;
		assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
	}
	assert_int_equal(fg_filehash(cache, path, again, &got, NULL, NULL, &err), 0);
	assert_int_equal(got, 999999);

	/*
	 * Written "just now" (an mtime inside the racy window: here a minute
	 * ahead, so no timing is involved): hashed, not remembered (a write in the
	 * same tick could keep the mtime).
	 */
	put_aged(path, 'a', 1000000, -60);
	assert_int_equal(fg_filehash(cache, path, again, &got, NULL, NULL, &err), 0);
	assert_string_equal(again, MILLION_A);
	assert_int_equal(fg_filehash(cache, path, again, &got, NULL, NULL, &err), 0);
	assert_int_equal(got, 1000000);

	/* An entry that does not carry this file's key is not trusted. */
	put_aged(path, 'a', 1000000, 600);
	assert_int_equal(fg_filehash(cache, path, hex, &got, NULL, NULL, &err), 0);
	assert_int_equal(fg_filehash_cached(cache, path, again, NULL), 1);
	snprintf(entry, sizeof(entry), "%s/v1/hashes", cache);
	d = opendir(entry);
	assert_non_null(d);
	while ((de = readdir(d))) {
		char p2[512];
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(p2, sizeof(p2), "%s/%s", entry, de->d_name);
		f = fopen(p2, "w");
		assert_non_null(f);
		fprintf(f, "forged-filehash-v1 dev=0 ino=0 size=0 mtime_ns=0\nsha256=%064d\n", 0);
		fclose(f);
	}
	closedir(d);
	assert_int_equal(fg_filehash_cached(cache, path, again, NULL), 0);
	assert_int_equal(fg_filehash(cache, path, again, &got, NULL, NULL, &err), 0);
	assert_int_equal(got, 1000000);
	assert_string_equal(again, MILLION_A);

	/* No cache folder: read every time. */
	assert_int_equal(fg_filehash(NULL, path, again, &got, NULL, NULL, &err), 0);
	assert_int_equal(got, 1000000);
	assert_int_equal(fg_filehash_cached(NULL, path, again, &size), 0);
	assert_int_equal(size, 1000000);
	/* Stopped on request; a folder or a missing file is no file to hash. */
	put_aged(path, 'c', 1000000, 600);
	assert_int_equal(fg_filehash(cache, path, again, &got, stop_at_once, NULL, &err), FG_ECANCELLED);
	assert_int_equal(fg_filehash_cached(cache, path, again, NULL), 0); /* a stopped hash is not remembered */
	assert_int_equal(fg_filehash(cache, dir, again, &got, NULL, NULL, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "not a regular file"));
	assert_int_equal(fg_filehash(cache, link_path, again, &got, NULL, NULL, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "link.bin"));
	assert_int_equal(fg_fs_rm_rf(dir), 0);
}

/* ---- json.h ---- */

static void test_json_parse(void **state)
{
	struct fg_err err = { 0 };
	cJSON *doc = NULL, *untouched = (cJSON *)&err;

	(void)state;
	assert_int_equal(fg_json_parse(&doc, "{\"a\": 1}\n\t ", 11, "x.json", &err), 0);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(doc, "a")->valueint, 1);
	cJSON_Delete(doc);
	assert_int_equal(fg_json_parse(&untouched, "{} {}", 5, "two.json", &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "two.json: invalid JSON"));
	assert_ptr_equal(untouched, (cJSON *)&err);
	assert_int_equal(fg_json_parse(&untouched, "{\"a\"\0: 1}", 10, "nul.json", &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "nul.json: not JSON text (contains a NUL byte)"));
	assert_ptr_equal(untouched, (cJSON *)&err);
}

static void test_json_load(void **state)
{
	char dir[] = "/tmp/forged-test-core-XXXXXX", path[64];
	struct fg_err err = { 0 };
	cJSON *doc = NULL;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/c.json", dir);
	write_text(NULL, path, "{\"hidden_size\": 64}");
	assert_int_equal(fg_json_load(&doc, path, 64, &err), 0);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(doc, "hidden_size")->valueint, 64);
	cJSON_Delete(doc);
	doc = NULL;
	/* Over the cap: refused before it is read. */
	assert_int_equal(fg_json_load(&doc, path, 8, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "exceed the cap of 8"));
	assert_null(doc);
	/* A folder is not a readable regular file; a missing file cannot be opened. */
	assert_int_equal(fg_json_load(&doc, dir, 64, &err), FG_EINPUT);
	unlink(path);
	assert_int_equal(fg_json_load(&doc, path, 64, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "cannot open"));
	assert_null(doc);
	rmdir(dir);
}

/* ---- fs.h ---- */

/* The whole file at path, NUL-terminated; *len its size.  Caller frees. */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0, got;

	assert_non_null(f);
	do {
		assert_int_equal(FG_GROW(buf, n + 65536 + 1, cap), 0);
		got = fread(buf + n, 1, 65536, f);
		n += got;
	} while (got > 0);
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

static int count_entries(const char *dir)
{
	char cmd[PATH_MAX + 32];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_int_equal(fscanf(p, "%d", &n), 1);
	pclose(p);
	return n;
}

static void test_fs_write_all_and_atomic(void **state)
{
	char dir[] = "/tmp/forged-test-fs-XXXXXX", path[PATH_MAX], *back;
	struct fg_err err = { 0 };
	static char big[9u << 20];
	size_t len;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 2654435761u >> 24);
	assert_int_equal(fg_fs_join(path, sizeof(path), dir, "a.bin", &err), 0);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_true(fd >= 0);
	assert_int_equal(fg_fs_write_all(fd, big, sizeof(big)), 0);
	close(fd);
	back = slurp(path, &len);
	assert_int_equal(len, sizeof(big));
	assert_memory_equal(back, big, sizeof(big));
	free(back);
	/* A read-only descriptor: -EBADF, as write(2) said. */
	fd = open(path, O_RDONLY);
	assert_int_equal(fg_fs_write_all(fd, "x", 1), -EBADF);
	close(fd);

	/* Atomic replacement: the new bytes whole, no temporary file left. */
	assert_int_equal(fg_fs_write_atomic(path, "{}\n", 3, &err), 0);
	back = slurp(path, &len);
	assert_string_equal(back, "{}\n");
	free(back);
	assert_int_equal(count_entries(dir), 1);
	/* A folder that does not exist: refused, named, nothing created. */
	assert_int_equal(fg_fs_join(path, sizeof(path), dir, "no/such/x.json", &err), 0);
	assert_int_equal(fg_fs_write_atomic(path, "{}", 2, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "cannot create temporary file"));
	assert_int_equal(count_entries(dir), 1);
	assert_int_equal(fg_fs_rm_rf(dir), 0);
}

static void test_fs_join_mkdir_rm(void **state)
{
	char dir[] = "/tmp/forged-test-fs-XXXXXX", path[PATH_MAX], small[16];
	struct fg_err err = { 0 };
	struct stat st;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(fg_fs_join(small, sizeof(small), "/tmp", "0123456789a", &err), FG_EUSAGE);
	assert_non_null(strstr(err.msg, "path too long: /tmp/0123456789a"));
	assert_int_equal(fg_fs_join(small, sizeof(small), "/tmp", "0123456789", &err), 0);
	assert_string_equal(small, "/tmp/0123456789");

	assert_int_equal(fg_fs_join(path, sizeof(path), dir, "a/b//c/", &err), 0);
	assert_int_equal(fg_fs_mkdir_p(path, 0755), 0);
	assert_int_equal(fg_fs_mkdir_p(path, 0755), 0); /* existing: fine */
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(fg_fs_join(path, sizeof(path), dir, "a/file", &err), 0);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(fg_fs_mkdir_p(path, 0755), -ENOTDIR);
	assert_int_equal(fg_fs_join(path, sizeof(path), dir, "a/file/sub", &err), 0);
	assert_int_equal(fg_fs_mkdir_p(path, 0755), -ENOTDIR);
	assert_int_equal(fg_fs_fsync_dir(dir), 0);
	assert_int_equal(fg_fs_fsync_parent(path), -ENOTDIR); /* a/file is no folder */
	assert_int_equal(fg_fs_fsync_parent("bare-name"), 0);  /* "." */
	assert_int_equal(fg_fs_fsync_dir("/no/such/folder"), -ENOENT);

	/* A symbolic link inside is removed, not followed. */
	assert_int_equal(fg_fs_join(path, sizeof(path), dir, "a/b/link", &err), 0);
	assert_int_equal(symlink("/tmp", path), 0);
	assert_int_equal(fg_fs_rm_rf(dir), 0);
	assert_int_equal(lstat(dir, &st), -1);
	assert_int_equal(stat("/tmp", &st), 0);
	assert_int_equal(fg_fs_rm_rf(dir), 0); /* already gone */
}

static void test_fs_link_or_copy(void **state)
{
	char dir[] = "/tmp/forged-test-fs-XXXXXX", shm[] = "/dev/shm/forged-test-fs-XXXXXX";
	char src[PATH_MAX], dst[PATH_MAX], *a, *b;
	struct fg_err err = { 0 };
	struct stat s1, s2;
	size_t la, lb;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(fg_fs_join(src, sizeof(src), dir, "src.bin", &err), 0);
	fd = open(src, O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_true(fd >= 0);
	for (int i = 0; i < 300; i++) {
		char line[64];
		int n = snprintf(line, sizeof(line), "line %d of the source, longer than one block\n", i);

		assert_int_equal(fg_fs_write_all(fd, line, (size_t)n), 0);
	}
	close(fd);
	/* Same file system: a hard link. */
	assert_int_equal(fg_fs_join(dst, sizeof(dst), dir, "linked.bin", &err), 0);
	assert_int_equal(fg_fs_link_or_copy(src, dst, &err), 0);
	assert_int_equal(stat(src, &s1), 0);
	assert_int_equal(stat(dst, &s2), 0);
	assert_int_equal(s1.st_ino, s2.st_ino);
	/* dst exists: refused, named. */
	assert_int_equal(fg_fs_link_or_copy(src, dst, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "cannot link from"));

	/* Another file system (tmpfs): a copy, byte for byte. */
	if (mkdtemp(shm)) {
		assert_int_equal(fg_fs_join(dst, sizeof(dst), shm, "copied.bin", &err), 0);
		assert_int_equal(fg_fs_link_or_copy(src, dst, &err), 0);
		assert_int_equal(stat(dst, &s2), 0);
		assert_true(s1.st_dev != s2.st_dev);
		a = slurp(src, &la);
		b = slurp(dst, &lb);
		assert_int_equal(la, lb);
		assert_memory_equal(a, b, la);
		free(a);
		free(b);
		assert_int_equal(fg_fs_rm_rf(shm), 0);
	}
	/* A file whose size says 0 but which holds bytes (procfs): the read/write loop copies it all. */
	assert_int_equal(fg_fs_join(dst, sizeof(dst), dir, "version", &err), 0);
	assert_int_equal(fg_fs_link_or_copy("/proc/version", dst, &err), 0);
	a = slurp("/proc/version", &la);
	b = slurp(dst, &lb);
	assert_true(la > 0);
	assert_int_equal(la, lb);
	assert_memory_equal(a, b, la);
	free(a);
	free(b);
	/* A missing source: named, no dst left behind. */
	assert_int_equal(fg_fs_join(dst, sizeof(dst), dir, "none.bin", &err), 0);
	assert_int_equal(fg_fs_link_or_copy("/no/such/file", dst, &err), FG_EINPUT);
	assert_int_equal(lstat(dst, &s2), -1);
	assert_int_equal(fg_fs_rm_rf(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ends_with),
		cmocka_unit_test(test_fnv1a),
		cmocka_unit_test(test_hash_bytes),
		cmocka_unit_test(test_nameidx),
		cmocka_unit_test(test_hex_nibble),
		cmocka_unit_test(test_grow_one_at_a_time),
		cmocka_unit_test(test_grow_exact_need),
		cmocka_unit_test(test_grow_overflow),
		cmocka_unit_test(test_sha256_final_leaves_the_hash),
		cmocka_unit_test(test_sha256_pipe),
		cmocka_unit_test(test_filehash),
		cmocka_unit_test(test_json_parse),
		cmocka_unit_test(test_json_load),
		cmocka_unit_test(test_fs_write_all_and_atomic),
		cmocka_unit_test(test_fs_join_mkdir_rm),
		cmocka_unit_test(test_fs_link_or_copy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
