/*
 * support.c: the helpers every unit test binary links (support.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/support.h"

/* ---- the tensor-set bench ---- */

static struct bench bench_store;

struct bench *bench_new(const char *set_name, const char *file)
{
	struct bench *b = &bench_store;

	fg_tset_release(&b->set);
	fg_experts_release(b->blocks, b->n_blocks);
	memset(b, 0, sizeof(*b));
	assert_int_equal(fg_tset_init(&b->set, set_name, NULL), 0);
	b->file = file;
	return b;
}

int bench_release(void **state)
{
	(void)state;
	fg_tset_release(&bench_store.set);
	fg_experts_release(bench_store.blocks, bench_store.n_blocks);
	bench_store.n_blocks = 0;
	return 0;
}

/* Shapes by the chunk, never freed: each chunk is reachable from shape_chunks. */
struct shape_chunk {
	struct shape_chunk *next;
	size_t used;
	uint64_t dims[1024][FG_ST_MAX_RANK];
};

static struct shape_chunk *shape_chunks;

uint64_t *test_shape(void)
{
	struct shape_chunk *c = shape_chunks;

	if (!c || c->used == 1024) {
		if (!(c = calloc(1, sizeof(*c))))
			fail_msg("test_shape: out of memory");
		c->next = shape_chunks;
		shape_chunks = c;
	}
	return c->dims[c->used++];
}

/* The next tensor slot, named and added to the set; the caller fills in the rest first. */
static struct fg_tensor *bench_slot(struct bench *b, const char *name)
{
	struct fg_tensor *t;

	if (b->n >= BENCH_MAX_TENSORS)
		fail_msg("bench: more than %d tensors", BENCH_MAX_TENSORS);
	if (strlen(name) >= sizeof(b->names[0]))
		fail_msg("bench: tensor name '%s' is too long", name);
	t = &b->t[b->n];
	memset(t, 0, sizeof(*t));
	snprintf(b->names[b->n], sizeof(b->names[0]), "%s", name);
	t->name = b->names[b->n];
	t->shape = test_shape();
	return t;
}

static void bench_commit(struct bench *b, struct fg_tensor *t)
{
	struct fg_err err = { 0 };

	b->n++;
	if (fg_tset_add(&b->set, t, b->file, &err) != 0)
		fail_msg("bench: adding '%s': %s", t->name, err.msg);
}

struct fg_tensor *bench_tensor(struct bench *b, const char *name, enum fg_dtype dt, size_t n)
{
	struct fg_tensor *t = bench_slot(b, name);

	if (n > BENCH_MAX_ELEMS)
		fail_msg("bench: '%s' has %zu elements, at most %d fit", name, n, BENCH_MAX_ELEMS);
	t->dtype = dt;
	t->rank = 1;
	TSHAPE(*t)[0] = n;
	t->data = (const uint8_t *)&b->data[b->n];
	bench_commit(b, t);
	return t;
}

struct fg_tensor *bench_shape(struct bench *b, const char *name, enum fg_dtype dt, uint64_t d0, uint64_t d1,
			      uint64_t d2)
{
	struct fg_tensor *t = bench_slot(b, name);

	t->dtype = dt;
	t->rank = d2 ? 3 : d1 ? 2 : 1;
	TSHAPE(*t)[0] = d0;
	TSHAPE(*t)[1] = d1;
	TSHAPE(*t)[2] = d2;
	bench_commit(b, t);
	return t;
}

struct fg_tensor *bench_f32(struct bench *b, const char *name, const float *v, size_t n)
{
	struct fg_tensor *t = bench_tensor(b, name, FG_DT_F32, n);

	memcpy(b->data[b->n - 1].f32, v, n * sizeof(float));
	return t;
}

struct fg_tensor *bench_norm(struct bench *b, const char *name, float value)
{
	const float v[4] = { value, value, value, value };

	return bench_f32(b, name, v, 4);
}

struct fg_tensor *bench_norm64(struct bench *b, const char *name, double value)
{
	struct fg_tensor *t = bench_tensor(b, name, FG_DT_F64, 4);

	for (int i = 0; i < 4; i++)
		b->data[b->n - 1].f64[i] = value;
	return t;
}

struct fg_tensor *bench_norm16(struct bench *b, const char *name, enum fg_dtype dt, uint16_t bits)
{
	struct fg_tensor *t = bench_tensor(b, name, dt, 4);

	for (int i = 0; i < 4; i++)
		b->data[b->n - 1].h[i] = bits;
	return t;
}

void bench_measure(struct bench *b)
{
	struct fg_err err = { 0 };

	if (fg_tset_measure(&b->set, &err) != 0)
		fail_msg("bench: measuring set '%s': %s", b->set.name, err.msg);
}

/* ---- temporary folders and files ---- */

const char *tmpdir_new(char *buf, size_t len, const char *tag)
{
	const char *base = getenv("TMPDIR");
	int n;

	if (!base || !*base)
		base = "/tmp";
	n = snprintf(buf, len, "%s/fg-%s-XXXXXX", base, tag);
	if (n < 0 || (size_t)n >= len)
		fail_msg("tmpdir_new: %s/fg-%s-XXXXXX does not fit in %zu bytes", base, tag, len);
	if (!mkdtemp(buf))
		fail_msg("tmpdir_new: mkdtemp %s: %s", buf, strerror(errno));
	return buf;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int rm_tree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -1;
	return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

const char *path_join(char *buf, size_t len, const char *dir, const char *name)
{
	int n = dir ? snprintf(buf, len, "%s/%s", dir, name) : snprintf(buf, len, "%s", name);

	if (n < 0 || (size_t)n >= len)
		fail_msg("path_join: %s/%s does not fit in %zu bytes", dir ? dir : "", name, len);
	return buf;
}

const char *make_dir(char *buf, size_t len, const char *parent, const char *name)
{
	path_join(buf, len, parent, name);
	if (mkdir(buf, 0755) != 0)
		fail_msg("make_dir: mkdir %s: %s", buf, strerror(errno));
	return buf;
}

void write_text(const char *dir, const char *name, const char *text)
{
	char p[PATH_MAX];
	FILE *fp = fopen(path_join(p, sizeof(p), dir, name), "w");

	if (!fp)
		fail_msg("write_text: cannot create %s: %s", p, strerror(errno));
	fputs(text, fp);
	if (fclose(fp) != 0)
		fail_msg("write_text: writing %s failed", p);
}

char *read_whole(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	char *buf;
	long n = 0;

	if (!fp)
		fail_msg("read_whole: cannot open %s: %s", path, strerror(errno));
	if (fseek(fp, 0, SEEK_END) != 0 || (n = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0)
		fail_msg("read_whole: cannot size %s", path);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	if (fread(buf, 1, (size_t)n, fp) != (size_t)n)
		fail_msg("read_whole: short read of %s", path);
	fclose(fp);
	buf[n] = '\0';
	if (len)
		*len = (size_t)n;
	return buf;
}

/* ---- the shard writer ---- */

/*
 * The format, as the safetensors specification states it: an unsigned 64-bit
 * little-endian N, then N bytes of a JSON object mapping each tensor name to
 * {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
 * data section, which follows the header) plus an optional "__metadata__"
 * object of strings.  The header may be padded with spaces; 8 + N is padded
 * here to a multiple of 8, as the reference writer does.
 */

#define SHARD_MAX_TENSORS 512
#define SHARD_MAX_META    16
#define SHARD_MAX_RANK    8

struct shard_entry {
	char name[256];
	char dtype[16];
	int rank;
	uint64_t shape[SHARD_MAX_RANK];
	uint64_t begin, end;
};

struct shard {
	size_t n, n_meta;
	struct shard_entry t[SHARD_MAX_TENSORS];
	char meta[SHARD_MAX_META][2][128];
	uint8_t *data;
	size_t len, cap;
};

/* Element sizes of the specification's dtypes. */
static const struct {
	const char *name;
	size_t size;
} spec_dtypes[] = {
	{ "BOOL", 1 }, { "U8", 1 }, { "I8", 1 }, { "F8_E4M3", 1 }, { "F8_E5M2", 1 }, { "F8_E8M0", 1 },
	{ "I16", 2 }, { "U16", 2 }, { "F16", 2 }, { "BF16", 2 },
	{ "I32", 4 }, { "U32", 4 }, { "F32", 4 },
	{ "I64", 8 }, { "U64", 8 }, { "F64", 8 },
};

static size_t spec_dtype_size(const char *dtype)
{
	for (size_t i = 0; i < sizeof(spec_dtypes) / sizeof(spec_dtypes[0]); i++)
		if (strcmp(spec_dtypes[i].name, dtype) == 0)
			return spec_dtypes[i].size;
	fail_msg("shard: '%s' is not a safetensors dtype", dtype);
	return 0;
}

/* Names and metadata are written as JSON strings without escapes: refuse what would need one. */
static void plain_json_string(const char *s)
{
	for (const char *p = s; *p; p++)
		if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
			fail_msg("shard: '%s' needs JSON escapes, which this writer does not make", s);
}

struct shard *shard_new(void)
{
	struct shard *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	return s;
}

void shard_meta(struct shard *s, const char *key, const char *value)
{
	if (s->n_meta == SHARD_MAX_META || strlen(key) >= sizeof(s->meta[0][0]) ||
	    strlen(value) >= sizeof(s->meta[0][1]))
		fail_msg("shard: metadata '%s' does not fit", key);
	plain_json_string(key);
	plain_json_string(value);
	snprintf(s->meta[s->n_meta][0], sizeof(s->meta[0][0]), "%s", key);
	snprintf(s->meta[s->n_meta][1], sizeof(s->meta[0][1]), "%s", value);
	s->n_meta++;
}

void shard_add(struct shard *s, const char *name, const char *dtype, int rank, const uint64_t *shape,
	       const void *data)
{
	struct shard_entry *e;
	uint64_t bytes = spec_dtype_size(dtype);

	if (s->n == SHARD_MAX_TENSORS || strlen(name) >= sizeof(e->name) || rank < 0 || rank > SHARD_MAX_RANK)
		fail_msg("shard: tensor '%s' does not fit", name);
	plain_json_string(name);
	e = &s->t[s->n++];
	snprintf(e->name, sizeof(e->name), "%s", name);
	snprintf(e->dtype, sizeof(e->dtype), "%s", dtype);
	e->rank = rank;
	for (int i = 0; i < rank; i++) {
		e->shape[i] = shape[i];
		bytes *= shape[i];
	}
	if (s->len + bytes > s->cap) {
		size_t ncap = (s->len + (size_t)bytes) * 2 + 64;
		uint8_t *nd = realloc(s->data, ncap);

		assert_non_null(nd);
		s->data = nd;
		s->cap = ncap;
	}
	if (data)
		memcpy(s->data + s->len, data, (size_t)bytes);
	else
		memset(s->data + s->len, 0, (size_t)bytes);
	e->begin = s->len;
	s->len += (size_t)bytes;
	e->end = s->len;
}

void shard_f32(struct shard *s, const char *name, const float *v, size_t n)
{
	const uint64_t shape[1] = { n };
	uint8_t *le = malloc(n * 4 + 1);

	assert_non_null(le);
	/* Little-endian F32, whatever the host. */
	for (size_t i = 0; i < n; i++) {
		uint32_t w;

		memcpy(&w, &v[i], 4);
		for (int k = 0; k < 4; k++)
			le[4 * i + (size_t)k] = (uint8_t)(w >> (8 * k));
	}
	shard_add(s, name, "F32", 1, shape, le);
	free(le);
}

void shard_norm(struct shard *s, const char *name, float value)
{
	float v[SHARD_NORM_ELEMS];

	for (int i = 0; i < SHARD_NORM_ELEMS; i++)
		v[i] = value;
	shard_f32(s, name, v, SHARD_NORM_ELEMS);
}

struct text {
	char *p;
	size_t n, cap;
};

static void text_add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void text_add(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	assert_true(n >= 0);
	if (t->n + (size_t)n + 1 > t->cap) {
		size_t ncap = (t->n + (size_t)n + 1) * 2;
		char *np = realloc(t->p, ncap);

		assert_non_null(np);
		t->p = np;
		t->cap = ncap;
	}
	va_start(ap, fmt);
	vsnprintf(t->p + t->n, t->cap - t->n, fmt, ap);
	va_end(ap);
	t->n += (size_t)n;
}

void shard_save(struct shard *s, const char *dir, const char *name)
{
	struct text h = { NULL, 0, 0 };
	char p[PATH_MAX];
	uint8_t len8[8];
	FILE *fp;

	text_add(&h, "{");
	if (s->n_meta) {
		text_add(&h, "\"__metadata__\":{");
		for (size_t i = 0; i < s->n_meta; i++)
			text_add(&h, "%s\"%s\":\"%s\"", i ? "," : "", s->meta[i][0], s->meta[i][1]);
		text_add(&h, "}");
	}
	for (size_t i = 0; i < s->n; i++) {
		const struct shard_entry *e = &s->t[i];

		text_add(&h, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i || s->n_meta ? "," : "", e->name, e->dtype);
		for (int k = 0; k < e->rank; k++)
			text_add(&h, "%s%llu", k ? "," : "", (unsigned long long)e->shape[k]);
		text_add(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)e->begin,
			 (unsigned long long)e->end);
	}
	text_add(&h, "}");
	while ((8 + h.n) % 8)
		text_add(&h, " ");
	for (int k = 0; k < 8; k++)
		len8[k] = (uint8_t)((uint64_t)h.n >> (8 * k));
	fp = fopen(path_join(p, sizeof(p), dir, name), "wb");
	if (!fp)
		fail_msg("shard: cannot create %s: %s", p, strerror(errno));
	if (fwrite(len8, 1, 8, fp) != 8 || fwrite(h.p, 1, h.n, fp) != h.n ||
	    (s->len && fwrite(s->data, 1, s->len, fp) != s->len) || fclose(fp) != 0)
		fail_msg("shard: writing %s failed", p);
	free(h.p);
	free(s->data);
	free(s);
}

void shard_write_names(const char *dir, const char *name, const char *const *names)
{
	static const float one = 1.0f;
	struct shard *s = shard_new();

	for (size_t i = 0; names[i]; i++)
		shard_f32(s, names[i], &one, 1);
	shard_save(s, dir, name);
}

/* ---- fixtures ---- */

const char *fixtures_root(char *buf, size_t len)
{
	const char *env = getenv("FIXTURES");
	char exe[PATH_MAX];
	ssize_t n;
	char *slash;

	if (env && *env)
		return path_join(buf, len, NULL, env);
	/* BUILD/tests/test_x -> BUILD/fixtures */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return path_join(buf, len, NULL, "build/fixtures");
	exe[n] = '\0';
	for (int up = 0; up < 2; up++) {
		slash = strrchr(exe, '/');
		if (!slash)
			return path_join(buf, len, NULL, "build/fixtures");
		*slash = '\0';
	}
	return path_join(buf, len, exe, "fixtures");
}

const char *fixture_path(char *buf, size_t len, const char *name)
{
	char root[PATH_MAX];

	fixtures_root(root, sizeof(root));
	path_join(buf, len, root, name);
	return access(buf, F_OK) == 0 ? buf : NULL;
}

const char *fixture_dir_env(char *buf, size_t len, const char *env, const char *name)
{
	const char *v = getenv(env);
	char root[PATH_MAX];

	if (v && *v)
		return path_join(buf, len, NULL, v);
	return path_join(buf, len, fixtures_root(root, sizeof(root)), name);
}

/* ---- reproducible random numbers ---- */

uint64_t rng_state = 0x9e3779b97f4a7c15ull;

uint32_t rng_u32(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

/* ---- SIMD paths ---- */

void simd_rerun(char **argv, const char *child_env)
{
	static const char *const caps[] = { "scalar", "avx2" };

	if (getenv(child_env)) {
		skip();
		return;
	}
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		int status = 0;
		pid_t pid;

		fflush(stdout);
		fflush(stderr);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			setenv("FORGED_SIMD", caps[i], 1);
			setenv(child_env, "1", 1);
			execv("/proc/self/exe", argv);
			_exit(127);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fail_msg("FORGED_SIMD=%s run failed (status 0x%x)", caps[i], (unsigned)status);
		print_message("FORGED_SIMD=%s run passed\n", caps[i]);
	}
}

/* ---- SHA-256 ---- */

void sha256_finish(struct fg_sha256 *h, char hex[FG_SHA256_HEX])
{
	fg_sha256_final_hex(h, hex);
	fg_sha256_free(h);
}
