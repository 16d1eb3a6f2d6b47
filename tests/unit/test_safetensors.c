/*
 * test_safetensors.c: the strict reader against hand-written bytes, and the
 * writer's output against hand-written expected bytes; the writer's spans
 * (copied in the kernel from a file, or written from memory) and the hashes
 * it feeds as it writes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "forge/core/sha256.h"
#include "forge/format/safetensors.h"
#include "tests/unit/support.h"

/* A valid file typed out by hand: 8-byte length 144, the 143-byte header padded
 * with one space, then 1.0f 2.0f (F32 "a") and 0x3f80 0xc000 (BF16 "b":
 * 1.0, -2.0), "b" listed first in the header but second in the data. */
static const char golden_header[] =
	"{\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]},"
	"\"__metadata__\":{\"format\":\"mlx\"},"
	"\"a\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]}}";

static size_t golden_file(uint8_t *buf)
{
	static const uint8_t data[12] = {
		0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, /* a: 1.0f, 2.0f */
		0x80, 0x3f, 0x00, 0xc0,                         /* b: 1.0, -2.0 (BF16) */
	};
	size_t hlen = sizeof(golden_header) - 1;

	assert_int_equal(hlen, 143);
	memset(buf, 0, 8);
	buf[0] = 144;
	memcpy(buf + 8, golden_header, hlen);
	buf[8 + hlen] = ' ';
	memcpy(buf + 152, data, sizeof(data));
	return 152 + sizeof(data);
}

static void test_golden_read(void **state)
{
	uint8_t buf[256];
	size_t len = golden_file(buf);
	struct fg_st_file *f = NULL;
	struct fg_err err = { 0 };
	const struct fg_tensor *a, *b;
	float v;

	(void)state;
	assert_int_equal(fg_st_parse(&f, buf, len, "golden", &err), 0);
	assert_int_equal(f->n_tensors, 2);
	assert_int_equal(f->header_len, 144);
	assert_int_equal(f->data_start, 152);
	/* File order is data order: "a" first although the header lists "b" first. */
	assert_string_equal(f->tensors[0].name, "a");
	assert_string_equal(f->tensors[1].name, "b");
	a = fg_st_find(f, "a");
	b = fg_st_find(f, "b");
	assert_non_null(a);
	assert_non_null(b);
	assert_null(fg_st_find(f, "c"));
	assert_int_equal(a->dtype, FG_DT_F32);
	assert_int_equal(a->rank, 2);
	assert_int_equal(a->shape[0], 1);
	assert_int_equal(a->shape[1], 2);
	assert_int_equal(fg_tensor_nelem(a), 2);
	assert_int_equal(b->dtype, FG_DT_BF16);
	assert_int_equal(b->begin, 8);
	assert_int_equal(fg_tensor_end(b), 12);
	/* Views borrow the buffer: no copy. */
	assert_ptr_equal(a->data, buf + 152);
	assert_ptr_equal(b->data, buf + 160);
	memcpy(&v, a->data + 4, 4);
	assert_true(v == 2.0f);
	assert_string_equal(fg_st_meta(f, "format"), "mlx");
	assert_null(fg_st_meta(f, "missing"));
	fg_st_close(f);
}

static void test_empty_and_zero_sized(void **state)
{
	/* "{}" padded: no tensors, no data, valid. */
	static const uint8_t empty[16] = { 8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' ' };
	/* Two zero-sized tensors at the same offset are legal (reference behaviour). */
	static const char zh[] = "{\"z\":{\"dtype\":\"F16\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
				 "\"y\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}";
	uint8_t buf[256];
	struct fg_st_file *f = NULL;
	struct fg_err err = { 0 };

	(void)state;
	assert_int_equal(fg_st_parse(&f, empty, sizeof(empty), "empty", &err), 0);
	assert_int_equal(f->n_tensors, 0);
	fg_st_close(f);

	memset(buf, 0, 8);
	buf[0] = (uint8_t)(sizeof(zh) - 1);
	memcpy(buf + 8, zh, sizeof(zh) - 1);
	assert_int_equal(fg_st_parse(&f, buf, 8 + sizeof(zh) - 1, "zero", &err), 0);
	assert_int_equal(f->n_tensors, 2);
	assert_int_equal(fg_tensor_nelem(fg_st_find(f, "z")), 0);
	fg_st_close(f);
}

static void test_header_only(void **state)
{
	uint8_t buf[256];
	size_t len = golden_file(buf);
	struct fg_st_file *f = NULL;
	struct fg_err err = { 0 };

	(void)state;
	/* Only the first 152 bytes are given; the file is said to be 164 long. */
	assert_int_equal(fg_st_parse_header(&f, buf, 152, len, "remote", &err), 0);
	assert_int_equal(f->n_tensors, 2);
	assert_null(f->tensors[0].data);
	fg_st_close(f);
	/* The claimed size must still be tiled exactly. */
	assert_int_equal(fg_st_parse_header(&f, buf, 152, len + 4, "remote", &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "4 trailing bytes"));
	/* Too few bytes given for the header. */
	assert_int_equal(fg_st_parse_header(&f, buf, 100, len, "remote", &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "the header needs 152"));
}

static void test_rejections_name_tensor(void **state)
{
	static const char h[] = "{\"w.weight\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}";
	uint8_t buf[256];
	struct fg_st_file *f = NULL;
	struct fg_err err = { 0 };

	(void)state;
	memset(buf, 0, sizeof(buf));
	buf[0] = (uint8_t)(sizeof(h) - 1);
	memcpy(buf + 8, h, sizeof(h) - 1);
	assert_int_equal(fg_st_parse(&f, buf, 8 + sizeof(h) - 1 + 8, "x.safetensors", &err), FG_EINPUT);
	assert_null(f);
	assert_string_equal(err.msg, "x.safetensors: tensor 'w.weight': data_offsets span 8 bytes "
			    "but F32 x 3 elements need 12");
}

/* ---- writer ---- */

static char tmpdir[PATH_MAX];

static int setup_dir(void **state)
{
	(void)state;
	tmpdir_new(tmpdir, sizeof(tmpdir), "st");
	return 0;
}

static int teardown_dir(void **state)
{
	(void)state;
	return rm_tree(tmpdir);
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	if (d)
		closedir(d);
	return n;
}

static void test_writer_golden_bytes(void **state)
{
	/* Expected bytes typed out by hand: header 89 bytes, padded to 96. */
	static const char want_header[] =
		"{\"__metadata__\":{\"format\":\"mlx\"},"
		"\"n\":{\"dtype\":\"BF16\",\"shape\":[1,2],\"data_offsets\":[0,4]}}       ";
	static const uint8_t vals[4] = { 0x80, 0x3f, 0x00, 0x40 }; /* 1.0, 2.0 */
	struct fg_st_out t = { .name = "n", .dtype = FG_DT_BF16, .rank = 2, .shape = { 1, 2 }, .data = vals };
	struct fg_st_meta md = { "format", "mlx" };
	struct fg_err err = { 0 };
	uint8_t *got;
	char path[PATH_MAX + 32];
	size_t n;

	(void)state;
	snprintf(path, sizeof(path), "%s/golden.safetensors", tmpdir);
	assert_int_equal(fg_st_write(path, &t, 1, &md, 1, &err), 0);
	got = (uint8_t *)read_whole(path, &n);
	assert_int_equal(n, 8 + 96 + 4);
	assert_int_equal(got[0], 96);
	for (int i = 1; i < 8; i++)
		assert_int_equal(got[i], 0);
	assert_memory_equal(got + 8, want_header, 96);
	assert_memory_equal(got + 104, vals, 4);
	free(got);
	assert_int_equal(count_entries(tmpdir), 1); /* no temporary left */
	unlink(path);

	/* The tests' own writer (support.c, written from the spec) makes the same bytes. */
	{
		static const uint64_t shape[2] = { 1, 2 };
		struct shard *sh = shard_new();

		shard_meta(sh, "format", "mlx");
		shard_add(sh, "n", "BF16", 2, shape, vals);
		shard_save(sh, tmpdir, "golden.safetensors");
		got = (uint8_t *)read_whole(path, &n);
		assert_int_equal(n, 8 + 96 + 4);
		assert_int_equal(got[0], 96);
		assert_memory_equal(got + 8, want_header, 96);
		assert_memory_equal(got + 104, vals, 4);
		free(got);
		unlink(path);
	}
}

struct ramp {
	uint64_t calls;
};

/* Produces byte i = i mod 251 across a tensor larger than one chunk. */
static int produce_ramp(void *ctx, uint8_t *buf, uint64_t offset, size_t len, struct fg_err *err)
{
	struct ramp *r = ctx;

	(void)err;
	r->calls++;
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)((offset + i) % 251);
	return 0;
}

static int produce_fail(void *ctx, uint8_t *buf, uint64_t offset, size_t len, struct fg_err *err)
{
	(void)ctx; (void)buf; (void)len;
	if (offset == 0)
		return 0;
	return fg_err_set(err, FG_EINPUT, "source went away");
}

static void test_writer_streams(void **state)
{
	struct ramp r = { 0 };
	struct fg_st_out t[2] = {
		{ .name = "big", .dtype = FG_DT_U8, .rank = 1, .shape = { 9u << 20 },
		  .produce = produce_ramp, .ctx = &r },
		{ .name = "small", .dtype = FG_DT_F32, .rank = 0, .data = "\0\0\x80\x3f" },
	};
	struct fg_st_file *f = NULL;
	struct fg_err err = { 0 };
	char path[PATH_MAX + 32];
	const struct fg_tensor *big;
	uint64_t bad = 0;

	(void)state;
	snprintf(path, sizeof(path), "%s/stream.safetensors", tmpdir);
	assert_int_equal(fg_st_write(path, t, 2, NULL, 0, &err), 0);
	assert_true(r.calls >= 3); /* chunked, never one 9 MiB buffer */
	assert_int_equal(fg_st_open(&f, path, &err), 0);
	big = fg_st_find(f, "big");
	assert_non_null(big);
	assert_int_equal(fg_tensor_nelem(big), 9u << 20);
	for (uint64_t i = 0; i < fg_tensor_nelem(big); i++)
		bad += big->data[i] != (uint8_t)(i % 251);
	assert_int_equal(bad, 0);
	assert_int_equal(fg_st_find(f, "small")->rank, 0);
	assert_int_equal(fg_tensor_nelem(fg_st_find(f, "small")), 1);
	fg_st_close(f);
}

/* Source bytes for spans: byte i = (i * 7) mod 253, in a file and in memory. */
#define SRC_BYTES ((size_t)3 << 20)
#define SRC_AT 100 /* the spans' bytes start here in the file */

struct spans {
	int fd;              /* -1: spans point into memory only */
	const uint8_t *mem;  /* the file's bytes from SRC_AT */
	size_t piece;        /* a span covers at most this much */
	int calls;
};

static int span_src(void *ctx, uint64_t offset, size_t len, struct fg_st_span *out, struct fg_err *err)
{
	struct spans *sp = ctx;

	(void)err;
	sp->calls++;
	out->len = len < sp->piece ? len : sp->piece;
	out->data = sp->mem + offset;
	out->fd = sp->fd;
	out->fd_offset = SRC_AT + offset;
	return 1;
}

static int span_empty(void *ctx, uint64_t offset, size_t len, struct fg_st_span *out, struct fg_err *err)
{
	(void)ctx; (void)offset; (void)len; (void)err;
	out->len = 0;
	out->data = NULL;
	out->fd = -1;
	return 1;
}

struct progress {
	uint64_t done, total;
};

static int note_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct progress *p = ctx;

	assert_true(done >= p->done);
	p->done = done;
	p->total = total;
	return 0;
}

/*
 * fg_st_write_with: a tensor copied from a file by spans (copy_file_range, in
 * pieces shorter than a chunk), the same bytes from memory, and an 18 MiB
 * produced tensor (more chunks than the writer has buffers, so buffers are
 * reused while the hash threads read them) land byte for byte; the two
 * hashes fed while writing are the SHA-256 of the whole file read back; the
 * progress reaches the tensors' bytes.  A span of no bytes is refused.
 */
static void test_writer_spans_and_hashes(void **state)
{
	uint8_t *mem = malloc(SRC_AT + SRC_BYTES);
	struct spans from_file = { .piece = 1u << 20 }, from_mem = { .fd = -1, .piece = 3u << 20 };
	struct ramp r = { 0 };
	struct fg_sha256 *h[2] = { fg_sha256_new(), fg_sha256_new() };
	struct progress pr = { 0 };
	const struct fg_st_write_opts wo = { .hashes = h, .n_hashes = 2, .progress = note_progress,
					     .progress_ctx = &pr };
	struct fg_st_out t[3] = {
		{ .name = "copied", .dtype = FG_DT_U8, .rank = 1, .shape = { SRC_BYTES }, .span = span_src,
		  .produce = produce_ramp, .ctx = &from_file },
		{ .name = "made", .dtype = FG_DT_U8, .rank = 1, .shape = { 18u << 20 }, .produce = produce_ramp,
		  .ctx = &r },
		{ .name = "viewed", .dtype = FG_DT_U8, .rank = 2, .shape = { 1000, 3 }, .span = span_src,
		  .produce = produce_ramp, .ctx = &from_mem },
	};
	struct fg_st_out bad = { .name = "e", .dtype = FG_DT_U8, .rank = 1, .shape = { 8 }, .span = span_empty,
				 .produce = produce_ramp };
	struct fg_st_file *f = NULL;
	struct fg_err err = { 0 };
	char path[PATH_MAX + 32], src[PATH_MAX + 32], hex[2][FG_SHA256_HEX], file_hex[FG_SHA256_HEX];
	const struct fg_tensor *got;
	uint64_t wrong = 0;

	(void)state;
	assert_non_null(mem);
	assert_non_null(h[0]);
	assert_non_null(h[1]);
	for (size_t i = 0; i < SRC_AT + SRC_BYTES; i++)
		mem[i] = (uint8_t)((i * 7) % 253);
	snprintf(src, sizeof(src), "%s/src.bin", tmpdir);
	snprintf(path, sizeof(path), "%s/spans.safetensors", tmpdir);
	from_file.fd = open(src, O_RDWR | O_CREAT | O_TRUNC, 0644);
	assert_true(from_file.fd >= 0);
	assert_int_equal(write(from_file.fd, mem, SRC_AT + SRC_BYTES), (ssize_t)(SRC_AT + SRC_BYTES));
	from_file.mem = from_mem.mem = mem + SRC_AT;
	assert_int_equal(fg_st_write_with(path, t, 3, NULL, 0, &wo, &err), 0);
	assert_int_equal(from_file.calls, 3);   /* 3 MiB in 1 MiB spans */
	assert_true(r.calls >= 5);              /* 18 MiB in 4 MiB chunks */
	assert_int_equal(pr.done, SRC_BYTES + (18u << 20) + 3000);
	assert_int_equal(pr.total, pr.done);
	fg_sha256_final_hex(h[0], hex[0]);
	fg_sha256_final_hex(h[1], hex[1]);
	assert_int_equal(fg_sha256_file(path, file_hex, &err), 0);
	assert_string_equal(hex[0], file_hex);
	assert_string_equal(hex[1], file_hex);
	assert_int_equal(fg_st_open(&f, path, &err), 0);
	got = fg_st_find(f, "copied");
	assert_non_null(got);
	assert_int_equal(fg_tensor_bytes(got), SRC_BYTES);
	assert_memory_equal(got->data, mem + SRC_AT, SRC_BYTES);
	got = fg_st_find(f, "viewed");
	assert_non_null(got);
	assert_memory_equal(got->data, mem + SRC_AT, 3000);
	got = fg_st_find(f, "made");
	assert_non_null(got);
	for (uint64_t i = 0; i < fg_tensor_bytes(got); i++)
		wrong += got->data[i] != (uint8_t)(i % 251);
	assert_int_equal(wrong, 0);
	fg_st_close(f);
	assert_int_equal(fg_st_write(path, &bad, 1, NULL, 0, &err), FG_EINTERNAL);
	assert_non_null(strstr(err.msg, "tensor 'e'"));
	close(from_file.fd);
	unlink(src);
	unlink(path);
	fg_sha256_free(h[0]);
	fg_sha256_free(h[1]);
	free(mem);
}

/*
 * Which path a span took: its file holds other bytes than its memory (a
 * test's setup; in a forge both are the same bytes), so the output shows
 * whether the kernel copied from the file or the writer wrote from memory.
 * Where copy_file_range copies between these two files (probed first), the
 * file's bytes are in the output and the hash, fed from memory, is not the
 * output's; where it cannot, the test is skipped.
 */
static void test_writer_copies_in_kernel(void **state)
{
	enum { N = 1 << 20 };
	uint8_t *file_bytes = malloc(N), *mem_bytes = malloc(N);
	struct spans from_file = { .piece = N };
	struct fg_sha256 *h[1] = { fg_sha256_new() };
	const struct fg_st_write_opts wo = { .hashes = h, .n_hashes = 1 };
	struct fg_st_out t = { .name = "copied", .dtype = FG_DT_U8, .rank = 1, .shape = { N }, .span = span_src,
			       .produce = produce_ramp, .ctx = &from_file };
	struct fg_st_file *f = NULL;
	struct fg_err err = { 0 };
	char path[PATH_MAX + 32], src[PATH_MAX + 32], probe[PATH_MAX + 32], hex[FG_SHA256_HEX], file_hex[FG_SHA256_HEX];
	loff_t in = SRC_AT;
	ssize_t copied;
	int pfd;

	(void)state;
	assert_non_null(file_bytes);
	assert_non_null(mem_bytes);
	assert_non_null(h[0]);
	memset(file_bytes, 0xAB, N);
	memset(mem_bytes, 0x11, N);
	snprintf(src, sizeof(src), "%s/kernel_src.bin", tmpdir);
	snprintf(probe, sizeof(probe), "%s/kernel_probe.bin", tmpdir);
	snprintf(path, sizeof(path), "%s/kernel.safetensors", tmpdir);
	from_file.fd = open(src, O_RDWR | O_CREAT | O_TRUNC, 0644);
	assert_true(from_file.fd >= 0);
	assert_int_equal(pwrite(from_file.fd, file_bytes, N, SRC_AT), (ssize_t)N);
	from_file.mem = mem_bytes;
	pfd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(pfd >= 0);
	copied = copy_file_range(from_file.fd, &in, pfd, NULL, 4096, 0);
	close(pfd);
	unlink(probe);
	if (copied != 4096) {
		close(from_file.fd);
		unlink(src);
		fg_sha256_free(h[0]);
		free(file_bytes);
		free(mem_bytes);
		skip();
	}
	assert_int_equal(fg_st_write_with(path, &t, 1, NULL, 0, &wo, &err), 0);
	assert_int_equal(fg_st_open(&f, path, &err), 0);
	assert_memory_equal(fg_st_find(f, "copied")->data, file_bytes, N); /* the file's bytes: the kernel copied */
	fg_st_close(f);
	fg_sha256_final_hex(h[0], hex);
	assert_int_equal(fg_sha256_file(path, file_hex, &err), 0);
	assert_string_not_equal(hex, file_hex); /* fed from memory, which the copy did not read */
	close(from_file.fd);
	unlink(src);
	unlink(path);
	fg_sha256_free(h[0]);
	free(file_bytes);
	free(mem_bytes);
}

/*
 * A mapped source that shrinks while it is written from (an `rsync
 * --inplace` re-upload): the writer's own reads, and its hash threads',
 * raise SIGBUS, which the guards turn into FG_EINPUT "changed while it was
 * read"; the process lives, no temporary file is left, nothing is at path.
 * And a hash pipe started with the guard, fed a chunk past the new end,
 * fails at finish instead of killing the process.
 */
static void test_shrunk_source_is_an_error(void **state)
{
	const size_t len = (size_t)8 << 20;
	struct fg_sha256 *h = fg_sha256_new();
	const struct fg_st_write_opts wo = { .hashes = &h, .n_hashes = 1 };
	struct fg_st_out t = { .name = "v", .dtype = FG_DT_U8, .rank = 1, .shape = { len } };
	struct fg_sha256_pipe *pipe;
	struct fg_err err = { 0 };
	char src[PATH_MAX + 32], path[PATH_MAX + 32];
	uint8_t *buf = calloc(1, len), *map;
	int fd, before = count_entries(tmpdir);

	(void)state;
	assert_non_null(buf);
	assert_non_null(h);
	snprintf(src, sizeof(src), "%s/shrinks.bin", tmpdir);
	snprintf(path, sizeof(path), "%s/from-shrunk.safetensors", tmpdir);
	fd = open(src, O_RDWR | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	assert_int_equal(ftruncate(fd, 4096), 0); /* every page past the first is gone */
	t.data = map;
	assert_int_equal(fg_st_write_with(path, &t, 1, NULL, 0, &wo, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "changed while it was read"));
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(count_entries(tmpdir), before + 1); /* shrinks.bin only: no temporary left */

	pipe = fg_sha256_pipe_start_guarded(&h, 1, fg_st_guard);
	assert_non_null(pipe);
	fg_sha256_pipe_push(pipe, map, 4096);          /* still there */
	fg_sha256_pipe_push(pipe, map + 65536, 65536); /* gone */
	assert_int_equal(fg_sha256_pipe_finish(pipe), FG_EINPUT);
	pipe = fg_sha256_pipe_start_guarded(&h, 1, fg_st_guard);
	fg_sha256_pipe_push(pipe, buf, 4096);
	assert_int_equal(fg_sha256_pipe_finish(pipe), 0);
	munmap(map, len);
	close(fd);
	unlink(src);
	fg_sha256_free(h);
	free(buf);
}

static void test_writer_failure_leaves_nothing(void **state)
{
	struct fg_st_out t = { .name = "x", .dtype = FG_DT_U8, .rank = 1, .shape = { 5u << 20 },
			       .produce = produce_fail };
	struct fg_st_out dup[2] = {
		{ .name = "d", .dtype = FG_DT_U8, .rank = 1, .shape = { 1 }, .data = "a" },
		{ .name = "d", .dtype = FG_DT_U8, .rank = 1, .shape = { 1 }, .data = "b" },
	};
	/* Apart, and among others: the name is found however far apart its two tensors are. */
	struct fg_st_out apart[4] = {
		{ .name = "w", .dtype = FG_DT_U8, .rank = 1, .shape = { 1 }, .data = "a" },
		{ .name = "q", .dtype = FG_DT_U8, .rank = 1, .shape = { 1 }, .data = "b" },
		{ .name = "e", .dtype = FG_DT_U8, .rank = 1, .shape = { 1 }, .data = "c" },
		{ .name = "q", .dtype = FG_DT_U8, .rank = 1, .shape = { 1 }, .data = "d" },
	};
	struct fg_st_out reserved = { .name = "__metadata__", .dtype = FG_DT_U8, .rank = 1, .shape = { 1 },
				      .data = "a" };
	struct fg_err err = { 0 };
	char path[PATH_MAX + 32];
	int before = count_entries(tmpdir);

	(void)state;
	snprintf(path, sizeof(path), "%s/fail.safetensors", tmpdir);
	assert_int_equal(fg_st_write(path, &t, 1, NULL, 0, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "source went away"));
	assert_non_null(strstr(err.msg, "tensor 'x'"));
	assert_int_equal(count_entries(tmpdir), before);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(fg_st_write(path, dup, 2, NULL, 0, &err), FG_EUSAGE);
	assert_non_null(strstr(err.msg, "duplicate"));
	assert_int_equal(count_entries(tmpdir), before);
	assert_int_equal(fg_st_write(path, apart, 4, NULL, 0, &err), FG_EUSAGE);
	assert_non_null(strstr(err.msg, "tensor 'q': duplicate"));
	assert_int_equal(fg_st_write(path, &reserved, 1, NULL, 0, &err), FG_EUSAGE);
	assert_non_null(strstr(err.msg, "tensor '__metadata__': duplicate or reserved"));
	assert_int_equal(count_entries(tmpdir), before);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(fg_st_write("/nonexistent-dir/x.safetensors", dup, 1, NULL, 0, &err), FG_EINPUT);
}

static void test_open_errors(void **state)
{
	struct fg_st_file *f = NULL;
	struct fg_err err = { 0 };

	(void)state;
	assert_int_equal(fg_st_open(&f, "/nonexistent/file.safetensors", &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "/nonexistent/file.safetensors: cannot open"));
	assert_int_equal(fg_st_open(&f, tmpdir, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "not a regular file"));
	assert_null(f);
}

/* A whole file in buf: the header text, then data_len zero bytes; returns its length. */
static size_t st_bytes(uint8_t *buf, const char *header, size_t data_len)
{
	size_t n = strlen(header);

	memset(buf, 0, 8 + n + data_len);
	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
	memcpy(buf + 8, header, n);
	return 8 + n + data_len;
}

/*
 * Every spelling of an entry reads to the same table, whether the reader's
 * fast paths take it (no white space as the safetensors crate writes;
 * white space anywhere) or read_entry does (members in another order,
 * escapes, exponents, leading zeros, 16 digits); the names stay in header
 * order for the index cross-check, the table in offset order.
 */
static void test_entry_spellings(void **state)
{
	static const char *const headers[] = {
		"{\"z\":{\"dtype\":\"U8\",\"shape\":[2,3],\"data_offsets\":[4,10]},"
		"\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
		"{ \"z\" : { \"dtype\" : \"U8\" , \"shape\" : [ 2 , 3 ] , \"data_offsets\" : [ 4 , 10 ] } ,\n"
		"\t\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
		"{\"z\":{\"shape\":[2,3],\"data_offsets\":[4,10],\"dtype\":\"U8\"},"
		"\"a\":{\"data_offsets\":[0,4],\"dtype\":\"F32\",\"shape\":[1]}}",
		"{\"\\u007a\":{\"dtype\":\"\\u0055\\u0038\",\"shape\":[2e0,3],\"data_offsets\":[4,1.0e1]},"
		"\"a\":{\"dtype\":\"F32\",\"shape\":[0001],\"data_offsets\":[0,0000000000000004]}}",
		"{\"z\":{\"dtype\":\"U8\",\"shape\":[2,3],\"data_offsets\":[4,10],\"extra\":[]},"
		"\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
	};
	uint8_t buf[512];

	(void)state;
	for (size_t i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
		struct fg_st_file *f = NULL;
		struct fg_err err = { 0 };
		size_t len = st_bytes(buf, headers[i], 10);

		if (fg_st_parse(&f, buf, len, "spelling", &err) != 0)
			fail_msg("spelling %zu: %s", i, err.msg);
		assert_int_equal(f->n_tensors, 2);
		/* Offset order: "a" (data 0-4) first although the header lists "z" first. */
		assert_string_equal(f->tensors[0].name, "a");
		assert_int_equal(f->tensors[0].dtype, FG_DT_F32);
		assert_int_equal(f->tensors[0].rank, 1);
		assert_int_equal(f->tensors[0].shape[0], 1);
		assert_int_equal(f->tensors[0].begin, 0);
		assert_int_equal(fg_tensor_end(&f->tensors[0]), 4);
		assert_string_equal(f->tensors[1].name, "z");
		assert_int_equal(f->tensors[1].dtype, FG_DT_U8);
		assert_int_equal(f->tensors[1].rank, 2);
		assert_int_equal(f->tensors[1].shape[0], 2);
		assert_int_equal(f->tensors[1].shape[1], 3);
		assert_int_equal(fg_tensor_nelem(&f->tensors[1]), 6);
		assert_int_equal(f->tensors[1].begin, 4);
		assert_int_equal(fg_tensor_end(&f->tensors[1]), 10);
		/* Header order, NUL-separated: "z" then "a". */
		assert_int_equal(f->names_len, 4);
		assert_memory_equal(f->strings, "z\0a\0", 4);
		assert_ptr_equal(fg_st_find(f, "z"), &f->tensors[1]);
		assert_ptr_equal(fg_st_find_n(f, "a", 1, fg_st_name_hash("a", 1)), &f->tensors[0]);
		fg_st_close(f);
	}
}

/* Numbers past the fast path's 15 digits, and signs or fractions, get read_entry's words. */
static void test_entry_number_edges(void **state)
{
	static const struct {
		const char *header;
		const char *why;
	} cases[] = {
		{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[999999999999999],\"data_offsets\":[0,999999999999999]}}",
		  "data_offsets end 999999999999999 runs past the 4-byte data section" },
		{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[90071992547409930],\"data_offsets\":[0,4]}}",
		  "shape[0] is too large" },
		{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[-4],\"data_offsets\":[0,4]}}", "shape[0] is negative" },
		{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[4.5],\"data_offsets\":[0,4]}}", "shape[0] is not an integer" },
		{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,4],\"data_offsets\":[0,4]}}",
		  "shape rank exceeds the cap of 6" },
		{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4,4]}}", "is not a [begin, end] pair" },
		{ "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"U8\",\"shape\":[4]",
		  "header is not valid JSON" },
		{ "{\"a\":{\"dtype\":\"UINT8_BUT_LONGER\",\"shape\":[4],\"data_offsets\":[0,4]}}", "unknown dtype" },
	};
	uint8_t buf[512];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fg_st_file *f = NULL;
		struct fg_err err = { 0 };
		size_t len = st_bytes(buf, cases[i].header, 4);

		assert_int_equal(fg_st_parse(&f, buf, len, "edge", &err), FG_EINPUT);
		if (!strstr(err.msg, cases[i].why))
			fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, cases[i].why);
	}
}

/* A header that shrinks while it is read (mapped) is an input error, never SIGBUS. */
struct shrink {
	const char *path;
	int done;
};

static void shrink_on_first(struct fg_tensor *t, size_t name_len, void *ctx)
{
	struct shrink *s = ctx;

	(void)t;
	(void)name_len;
	if (!s->done++)
		assert_int_equal(truncate(s->path, 0), 0);
}

static void test_header_shrinks_while_read(void **state)
{
	char dir[128], path[256];
	struct shard *sh = shard_new();
	struct shrink s = { path, 0 };
	struct fg_st_parse_opts opts = { shrink_on_first, &s, NULL };
	struct fg_st_file *f = NULL;
	struct fg_err err = { 0 };
	char name[64];
	int fd, rc;

	(void)state;
	assert_non_null(tmpdir_new(dir, sizeof(dir), "shrink"));
	/* Enough tensors that the header spans many pages past the first entry. */
	for (int i = 0; i < 400; i++) {
		snprintf(name, sizeof(name), "model.layers.%d.mlp.down_proj.weight", i);
		shard_norm(sh, name, 1.0f);
	}
	shard_save(sh, dir, "model.safetensors");
	path_join(path, sizeof(path), dir, "model.safetensors");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	rc = fg_st_open_fd(&f, fd, path, &opts, &err);
	close(fd);
	assert_int_equal(rc, FG_EINPUT);
	assert_null(f);
	assert_non_null(strstr(err.msg, "changed while it was read"));
	assert_int_equal(rm_tree(dir), 0);
}

/* Files parsed into a slab keep their tables there; closing them and freeing the slab frees all. */
static void test_slab(void **state)
{
	uint8_t buf[4][512];
	struct fg_st_slab *slab = fg_st_slab_new();
	struct fg_st_parse_opts opts = { NULL, NULL, slab };
	struct fg_st_file *f[4] = { NULL };
	char header[256];

	(void)state;
	assert_non_null(slab);
	for (int i = 0; i < 4; i++) {
		struct fg_err err = { 0 };
		char path[256], dir[128];
		int fd;

		snprintf(header, sizeof(header),
			 "{\"__metadata__\":{\"n\":\"%d\"},\"t%d\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
			 i, i);
		assert_non_null(tmpdir_new(dir, sizeof(dir), "slab"));
		path_join(path, sizeof(path), dir, "x.safetensors");
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, buf[i], st_bytes(buf[i], header, 4)), (ssize_t)st_bytes(buf[i], header, 4));
		close(fd);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		assert_int_equal(fg_st_open_fd(&f[i], fd, path, &opts, &err), 0);
		close(fd);
		assert_int_equal(rm_tree(dir), 0);
	}
	/* Each file's table and names are its own, though they share the slab. */
	for (int i = 0; i < 4; i++) {
		char name[8], n[4];

		snprintf(name, sizeof(name), "t%d", i);
		snprintf(n, sizeof(n), "%d", i);
		assert_true(f[i]->in_slab);
		assert_string_equal(f[i]->tensors[0].name, name);
		assert_string_equal(fg_st_meta(f[i], "n"), n);
		assert_non_null(fg_st_find(f[i], name));
		fg_st_close(f[i]);
	}
	fg_st_slab_free(slab);
}

/*
 * The table's shapes: tensors of one shape share it (a file of 20,000
 * experts keeps a handful), dimensions past the rank read 0, and the
 * element count and end offset follow from shape, dtype and begin.  More
 * distinct shapes than the parse remembers, and than a chunk of the pool
 * holds, each keep their own values.
 */
static void test_shape_pool(void **state)
{
	size_t cap = 1 << 16, n, off = 0, len;
	char *header = malloc(cap);
	uint8_t *buf;
	struct fg_st_file *f = NULL;
	struct fg_err err = { 0 };
	const struct fg_tensor *a, *b, *c, *d, *again;

	(void)state;
	assert_non_null(header);
	/* a and b [2, 3] U8, c [6], d a scalar, then s0..s199 of shape [k + 1, 7] (U8), then "again" [2, 3]. */
	n = (size_t)snprintf(header, cap,
			     "{\"a\":{\"dtype\":\"U8\",\"shape\":[2,3],\"data_offsets\":[0,6]},"
			     "\"b\":{\"dtype\":\"U8\",\"shape\":[2,3],\"data_offsets\":[6,12]},"
			     "\"c\":{\"dtype\":\"U8\",\"shape\":[6],\"data_offsets\":[12,18]},"
			     "\"d\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[18,22]}");
	off = 22;
	for (int k = 0; k < 200; k++) {
		n += (size_t)snprintf(header + n, cap - n, ",\"s%d\":{\"dtype\":\"U8\",\"shape\":[%d,7],\"data_offsets\":[%zu,%zu]}",
				      k, k + 1, off, off + (size_t)(k + 1) * 7);
		off += (size_t)(k + 1) * 7;
	}
	n += (size_t)snprintf(header + n, cap - n, ",\"again\":{\"dtype\":\"U8\",\"shape\":[2,3],\"data_offsets\":[%zu,%zu]}}",
			      off, off + 6);
	off += 6;
	assert_true(n < cap);
	buf = malloc(8 + n + off);
	assert_non_null(buf);
	len = st_bytes(buf, header, off);
	assert_int_equal(fg_st_parse(&f, buf, len, "shapes", &err), 0);
	assert_int_equal(f->n_tensors, 205);
	a = fg_st_find(f, "a");
	b = fg_st_find(f, "b");
	c = fg_st_find(f, "c");
	d = fg_st_find(f, "d");
	again = fg_st_find(f, "again");
	assert_true(a && b && c && d && again);
	assert_ptr_equal(a->shape, b->shape);
	assert_true(a->shape != c->shape);
	assert_int_equal(a->rank, 2);
	assert_int_equal(a->shape[0], 2);
	assert_int_equal(a->shape[1], 3);
	assert_int_equal(c->rank, 1);
	assert_int_equal(c->shape[0], 6);
	for (int i = 1; i < FG_ST_MAX_RANK; i++)
		assert_int_equal(c->shape[i], 0);
	assert_int_equal(d->rank, 0);
	assert_int_equal(fg_tensor_nelem(d), 1);
	assert_int_equal(fg_tensor_bytes(d), 4);
	assert_int_equal(fg_tensor_end(d), 22);
	assert_int_equal(fg_tensor_nelem(b), 6);
	assert_int_equal(fg_tensor_end(b), 12);
	for (int k = 0; k < 200; k++) {
		char name[16];
		const struct fg_tensor *t;

		snprintf(name, sizeof(name), "s%d", k);
		t = fg_st_find(f, name);
		assert_non_null(t);
		assert_int_equal(t->rank, 2);
		assert_int_equal(t->shape[0], (uint64_t)k + 1);
		assert_int_equal(t->shape[1], 7);
		assert_int_equal(t->shape[2], 0);
		assert_int_equal(fg_tensor_bytes(t), (uint64_t)(k + 1) * 7);
	}
	/* Two hundred shapes later [2, 3] is read again, with the same values. */
	assert_int_equal(again->rank, 2);
	assert_int_equal(again->shape[0], 2);
	assert_int_equal(again->shape[1], 3);
	assert_int_equal(fg_tensor_end(again), off);
	fg_st_close(f);
	free(buf);
	free(header);
}

/* A header of n one-byte U8 tensors "t0".."t{n-1}" (plus "t{dup}" once more when dup >= 0) into buf. */
static uint8_t *many_tensors(size_t n, long dup, size_t *len)
{
	size_t cap = (n + 1) * 96 + 16, at = 0;
	char *header = malloc(cap);
	uint8_t *buf;

	assert_non_null(header);
	header[at++] = '{';
	for (size_t i = 0; i < n; i++)
		at += (size_t)snprintf(header + at, cap - at, "%s\"t%zu\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%zu,%zu]}",
				       i ? "," : "", i, i, i + 1);
	if (dup >= 0)
		at += (size_t)snprintf(header + at, cap - at, ",\"t%ld\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%zu,%zu]}",
				       dup, n, n + 1);
	assert_true(at + 2 < cap);
	header[at++] = '}';
	header[at] = '\0';
	buf = malloc(8 + at + n + 1);
	assert_non_null(buf);
	*len = st_bytes(buf, header, n + (dup >= 0));
	free(header);
	return buf;
}

/*
 * The name table: 16-bit slots for a file of fewer than 65,535 tensors,
 * 32-bit ones beyond, about 1.5 slots a tensor either way (not rounded up
 * to a power of two); every name is found, a name not there is not, and a
 * name given twice is refused in both widths.
 */
static void test_name_table_widths(void **state)
{
	static const size_t sizes[] = { 1, 65534, 70000 };
	struct fg_err err = { 0 };

	(void)state;
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s], len;
		uint8_t *buf = many_tensors(n, -1, &len);
		struct fg_st_file *f = NULL;
		char name[64];

		if (fg_st_parse(&f, buf, len, "many", &err) != 0)
			fail_msg("n = %zu: %s", n, err.msg);
		assert_int_equal(f->n_tensors, n);
		if (n < 65535) {
			assert_non_null(f->slots16);
			assert_null(f->slots);
		} else {
			assert_null(f->slots16);
			assert_non_null(f->slots);
		}
		assert_true(f->n_slots >= n + n / 2 && f->n_slots <= n + n / 2 + 2);
		for (size_t i = 0; i < n; i++) {
			const struct fg_tensor *t;

			snprintf(name, sizeof(name), "t%zu", i);
			t = fg_st_find(f, name);
			assert_non_null(t);
			assert_int_equal(t->begin, i);
			assert_ptr_equal(fg_st_find_n(f, name, strlen(name), fg_st_name_hash(name, strlen(name))), t);
		}
		snprintf(name, sizeof(name), "t%zu", n);
		assert_null(fg_st_find(f, name));
		assert_null(fg_st_find(f, "t"));
		fg_st_close(f);
		free(buf);
		buf = many_tensors(n, (long)(n / 2), &len);
		f = NULL;
		assert_int_equal(fg_st_parse(&f, buf, len, "dups", &err), FG_EINPUT);
		assert_null(f);
		snprintf(name, sizeof(name), "duplicate tensor name 't%zu'", n / 2);
		assert_non_null(strstr(err.msg, name));
		free(buf);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_read),
		cmocka_unit_test(test_empty_and_zero_sized),
		cmocka_unit_test(test_header_only),
		cmocka_unit_test(test_rejections_name_tensor),
		cmocka_unit_test(test_writer_golden_bytes),
		cmocka_unit_test(test_writer_streams),
		cmocka_unit_test(test_writer_spans_and_hashes),
		cmocka_unit_test(test_writer_copies_in_kernel),
		cmocka_unit_test(test_shrunk_source_is_an_error),
		cmocka_unit_test(test_writer_failure_leaves_nothing),
		cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_entry_spellings),
		cmocka_unit_test(test_entry_number_edges),
		cmocka_unit_test(test_header_shrinks_while_read),
		cmocka_unit_test(test_slab),
		cmocka_unit_test(test_shape_pool),
		cmocka_unit_test(test_name_table_widths),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
