/*
 * test_safetensors.c: the strict reader against hand-written bytes, and the
 * writer's output against hand-written expected bytes.
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
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

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
	assert_int_equal(a->nelem, 2);
	assert_int_equal(b->dtype, FG_DT_BF16);
	assert_int_equal(b->begin, 8);
	assert_int_equal(b->end, 12);
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
	assert_int_equal(fg_st_find(f, "z")->nelem, 0);
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
	assert_int_equal(big->nelem, 9u << 20);
	for (uint64_t i = 0; i < big->nelem; i++)
		bad += big->data[i] != (uint8_t)(i % 251);
	assert_int_equal(bad, 0);
	assert_int_equal(fg_st_find(f, "small")->rank, 0);
	assert_int_equal(fg_st_find(f, "small")->nelem, 1);
	fg_st_close(f);
}

static void test_writer_failure_leaves_nothing(void **state)
{
	struct fg_st_out t = { .name = "x", .dtype = FG_DT_U8, .rank = 1, .shape = { 5u << 20 },
			       .produce = produce_fail };
	struct fg_st_out dup[2] = {
		{ .name = "d", .dtype = FG_DT_U8, .rank = 1, .shape = { 1 }, .data = "a" },
		{ .name = "d", .dtype = FG_DT_U8, .rank = 1, .shape = { 1 }, .data = "b" },
	};
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
	assert_int_equal(fg_st_write("/nonexistent-dir/x.safetensors", dup, 1, NULL, 0, &err), FG_EIO);
}

static void test_open_errors(void **state)
{
	struct fg_st_file *f = NULL;
	struct fg_err err = { 0 };

	(void)state;
	assert_int_equal(fg_st_open(&f, "/nonexistent/file.safetensors", &err), FG_EIO);
	assert_non_null(strstr(err.msg, "/nonexistent/file.safetensors: cannot open"));
	assert_int_equal(fg_st_open(&f, tmpdir, &err), FG_EIO);
	assert_non_null(strstr(err.msg, "not a regular file"));
	assert_null(f);
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
		cmocka_unit_test(test_writer_failure_leaves_nothing),
		cmocka_unit_test(test_open_errors),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
