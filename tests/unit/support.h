/*
 * support.h: what the unit tests share.  tests/unit/support.c is linked into
 * every unit test binary (the Makefile's test rule), so a new test includes
 * this header after <cmocka.h> and uses:
 *
 *   bench_*        an in-memory tensor set of small hand-made tensors (norms
 *                  of a given mean, header-only shapes), for the model layer,
 *                  and the expert blocks a scan of it found
 *   tmpdir_new, make_dir, rm_tree, path_join, write_text, read_whole
 *                  temporary folders (removed recursively) and small files
 *   shard_*        a safetensors writer written for the tests from the format
 *                  spec (8-byte LE header length, JSON header, data), so a
 *                  checkpoint folder can be made without forge/format's writer
 *   fixtures_root, fixture_path, fixture_dir_env
 *                  the generated fixtures (BUILD/fixtures/NAME)
 *   rng_u32        a reproducible pseudo-random source
 *   simd_rerun     the test binary again under each forced SIMD path
 *   sha256_finish  fg_sha256_final_hex, then fg_sha256_free
 *
 * Helpers assert with cmocka: a helper that cannot build what it was asked
 * for fails the calling test with a message naming what went wrong.
 */
#ifndef FG_TEST_SUPPORT_H
#define FG_TEST_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "forge/core/sha256.h"
#include "forge/format/dtype.h"
#include "forge/format/safetensors.h"
#include "forge/model/experts.h"
#include "forge/model/tset.h"

/* ---- the tensor-set bench ---- */

#define BENCH_MAX_TENSORS 64
#define BENCH_MAX_ELEMS   8

/*
 * A zeroed shape of FG_ST_MAX_RANK dimensions that lives as long as the test
 * binary, for a tensor a test builds by hand (a struct fg_tensor points at
 * its shape).  TSHAPE(t) is that shape for writing.
 */
uint64_t *test_shape(void);
#define TSHAPE(t) ((uint64_t *)(uintptr_t)(t).shape)

/*
 * A tensor set under construction and the bytes its tensors point to.  There
 * is one bench per binary (bench_new resets it); it lives outside the test's
 * frame so that bench_release, as a cmocka teardown, frees the set (and the
 * expert blocks a test scanned into blocks[0..n_blocks)) when an assertion
 * ends the test early.
 */
struct bench {
	struct fg_tset set;
	const char *file;                    /* the file every tensor is said to come from */
	size_t n;
	struct fg_tensor t[BENCH_MAX_TENSORS];
	char names[BENCH_MAX_TENSORS][320];
	union {
		float f32[BENCH_MAX_ELEMS];
		double f64[BENCH_MAX_ELEMS];
		uint16_t h[BENCH_MAX_ELEMS];
	} data[BENCH_MAX_TENSORS];
	struct fg_expert_block blocks[4];    /* the last fg_experts_scan's, released with the bench */
	size_t n_blocks;
};

/* The bench, emptied: a set called set_name whose tensors come from file (a static string). */
struct bench *bench_new(const char *set_name, const char *file);

/* A cmocka teardown: releases the bench's set and expert blocks. */
int bench_release(void **state);

/* A 1-D tensor called name of n (<= BENCH_MAX_ELEMS) elements of dt; the caller fills b->data[b->n - 1]. */
struct fg_tensor *bench_tensor(struct bench *b, const char *name, enum fg_dtype dt, size_t n);

/* A header-only tensor (no data) of dt and shape [d0, d1, d2]: d2 == 0 is rank 2, d1 == d2 == 0 rank 1. */
struct fg_tensor *bench_shape(struct bench *b, const char *name, enum fg_dtype dt, uint64_t d0, uint64_t d1,
			      uint64_t d2);

/* An F32 tensor holding v[0..n). */
struct fg_tensor *bench_f32(struct bench *b, const char *name, const float *v, size_t n);

/* A norm of four elements equal to value: F32 (its mean is value as a float), F64, or a 16-bit pattern. */
struct fg_tensor *bench_norm(struct bench *b, const char *name, float value);
struct fg_tensor *bench_norm64(struct bench *b, const char *name, double value);
struct fg_tensor *bench_norm16(struct bench *b, const char *name, enum fg_dtype dt, uint16_t bits);

/* fg_tset_measure on the bench's set, asserting success. */
void bench_measure(struct bench *b);

/* ---- temporary folders and files ---- */

/* A fresh folder $TMPDIR/fg-TAG-XXXXXX (TMPDIR defaults to /tmp) in buf; asserts. */
const char *tmpdir_new(char *buf, size_t len, const char *tag);

/* Remove path and everything under it, never following symlinks; 0 when it is gone (or was never there). */
int rm_tree(const char *path);

/* The folder parent/name, created now (it must not exist yet), in buf. */
const char *make_dir(char *buf, size_t len, const char *parent, const char *name);

/* "dir/name" in buf (dir NULL: name); asserts that it fits. */
const char *path_join(char *buf, size_t len, const char *dir, const char *name);

/* Write text to dir/name (dir NULL: name is the path), replacing it. */
void write_text(const char *dir, const char *name, const char *text);

/* The whole file at path, NUL-terminated (freed by the caller); *len (may be NULL) gets its size. */
char *read_whole(const char *path, size_t *len);

/* ---- the shard writer ---- */

struct shard;

/* An empty shard. */
struct shard *shard_new(void);

/* A __metadata__ entry (both strings are copied). */
void shard_meta(struct shard *s, const char *key, const char *value);

/*
 * A tensor of dtype (a safetensors dtype name: "F32", "BF16", "F8_E4M3",
 * "U32", ...) and shape[0..rank); data holds its bytes (NULL: zeros).  Data
 * is laid out in the order tensors are added.
 */
void shard_add(struct shard *s, const char *name, const char *dtype, int rank, const uint64_t *shape,
	       const void *data);

/* A 1-D F32 tensor holding v[0..n). */
void shard_f32(struct shard *s, const char *name, const float *v, size_t n);

/* A 1-D F32 norm of SHARD_NORM_ELEMS elements equal to value (its mean is value as a float). */
#define SHARD_NORM_ELEMS 4
void shard_norm(struct shard *s, const char *name, float value);

/* Write the shard to dir/name (dir NULL: name is the path) and free it. */
void shard_save(struct shard *s, const char *dir, const char *name);

/* A shard at dir/name of the NULL-terminated names, each a 1-element F32 holding 1.0. */
void shard_write_names(const char *dir, const char *name, const char *const *names);

/* ---- fixtures ---- */

/*
 * The folder of generated fixtures (tests/fixtures/gen_fixtures.py): $FIXTURES
 * when set, else BUILD/fixtures beside this binary (BUILD/tests/test_x), so a
 * test finds them run by hand from any folder.  The folder may not exist.
 */
const char *fixtures_root(char *buf, size_t len);

/* fixtures_root/name, or NULL when it does not exist (the caller skips). */
const char *fixture_path(char *buf, size_t len, const char *name);

/* $env when set and non-empty, else fixtures_root/name (existing or not): the golden folders. */
const char *fixture_dir_env(char *buf, size_t len, const char *env, const char *name);

/* ---- reproducible random numbers (xorshift64*, fixed seed) ---- */

extern uint64_t rng_state;
uint32_t rng_u32(void);

/* ---- SIMD paths ---- */

/*
 * Run argv again (the calling binary) under each forced SIMD path
 * (FORGED_SIMD=scalar, =avx2) with child_env set, so every kernel set of a
 * module is tested on a machine that would pick AVX-512; each run must pass.
 * In a child (child_env set) the calling test is skipped.
 */
void simd_rerun(char **argv, const char *child_env);

/* ---- SHA-256 ---- */

/* Finish h into hex and free h (fg_sha256_final_hex leaves h to its caller). */
void sha256_finish(struct fg_sha256 *h, char hex[FG_SHA256_HEX]);

#endif
