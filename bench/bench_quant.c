/*
 * bench_quant.c: throughput of forge/format/quant/ on a large BF16 tensor,
 * against memcpy of the same bytes in the same run.
 *
 *   affine   MLX affine 4-bit, group 64, BF16 weights in, packed U32 and BF16
 *            scales/biases out, the whole tensor in one call of the
 *            threaded driver (fg_quant_affine_tensor_dt, as
 *            forge/artifact/plan.c calls it) on 1 and on 2 threads;
 *   mxfp4    MLX mxfp4 (E2M1, E8M0 scale per 32), same weights, same calls
 *            (fg_quant_mxfp4_tensor_dt); the ratio mxfp4 / affine at each
 *            thread count is printed, the runs of the four interleaved so
 *            that a noisy machine shifts them alike;
 *   fp8      DeepSeek-V3 FP8 E4M3 block dequantization (128 x 128 F32
 *            scale_inv) to BF16, same element count, in bands of 128 rows;
 *   memcpy   of the affine input bytes and of the FP8 input bytes.
 *
 * Throughput is GB/s of input bytes (1 GB = 1e9 bytes), best of REPS runs
 * by wall time, with the process CPU time of that run beside it (all
 * threads); the reference (scalar _ref) paths are timed once on the first
 * REF_MIB, in bands of BAND_ROWS rows.
 * With --dump DIR the inputs and the first outputs are written to DIR for
 * bench/quant_numpy_ref.py, which runs the same algorithms in numpy on the
 * same bytes and checks its results against these.
 *
 *   cc -std=c11 -D_GNU_SOURCE -O2 -I. bench/bench_quant.c build/libforge.a \
 *      -lcjson -lm -lpthread -o build/bench_quant
 *   ./build/bench_quant [MiB of BF16, default 1024] [--dump DIR]
 *
 * Output: human-readable lines, then "result KEY VALUE" lines for scripts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "forge/format/dtype.h"
#include "forge/core/error.h"
#include "forge/format/quant/quant.h"

#define REPS 5
#define COLS 4096
#define BAND_ROWS 64
#define REF_MIB 64
#define DUMP_MIB 16 /* outputs written for the numpy cross-check */

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_s(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* Wall and process CPU seconds of one timed run. */
struct timing {
	double wall, cpu;
};

static struct timing timing_start(void)
{
	struct timing t = { now_s(), clock_s(CLOCK_PROCESS_CPUTIME_ID) };

	return t;
}

static struct timing timing_stop(struct timing t0)
{
	struct timing t = { now_s() - t0.wall, clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0.cpu };

	return t;
}

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng_next(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Roughly normal weights (sum of four 16-bit uniforms) with spread scale. */
static float rng_weight(float scale)
{
	uint64_t r = rng_next();
	float s = (float)(r & 0xffff) + (float)((r >> 16) & 0xffff) + (float)((r >> 32) & 0xffff) +
		  (float)(r >> 48);

	return (s / 65536.0f - 2.0f) * scale;
}

static void *alloc_faulted(size_t n)
{
	void *p = malloc(n);

	if (!p) {
		fprintf(stderr, "bench_quant: out of memory for %zu bytes\n", n);
		exit(3);
	}
	memset(p, 0, n); /* fault the pages in before timing */
	return p;
}

static double best_memcpy(void *dst, const void *src, size_t n)
{
	double best = 1e30;
	int r;

	for (r = 0; r < REPS; r++) {
		double t = now_s();

		memcpy(dst, src, n);
		t = now_s() - t;
		if (t < best)
			best = t;
	}
	/* Keep the copy observable. */
	if (((volatile unsigned char *)dst)[n / 2] == 0xfe && ((const unsigned char *)src)[n / 2] != 0xfe)
		fprintf(stderr, "bench_quant: memcpy check failed\n");
	return best;
}

static void die_err(const char *what, const struct fg_err *err)
{
	fprintf(stderr, "bench_quant: %s: %s\n", what, err->msg);
	exit(1);
}

/* Affine 4-bit g64 over rows [0, rows): one call on `threads` threads, or
 * (threads 0) the _ref path in bands. */
static struct timing run_affine(const uint16_t *w, size_t rows, uint32_t *packed, uint16_t *scales,
				uint16_t *biases, int threads)
{
	const size_t words = fg_quant_affine_row_words(COLS, 4), gpr = COLS / 64;
	struct fg_err err = { 0 };
	struct timing t = timing_start();
	size_t r, n;

	if (threads > 0) {
		if (fg_quant_affine_tensor_dt(FG_DT_BF16, w, rows, COLS, 4, 64, packed, scales, biases, threads,
					      &err))
			die_err("affine", &err);
		return timing_stop(t);
	}
	for (r = 0; r < rows; r += n) {
		n = rows - r < BAND_ROWS ? rows - r : BAND_ROWS;
		if (fg_quant_affine_rows_dt_ref(FG_DT_BF16, w + r * COLS, n, COLS, 4, 64, packed + r * words,
						scales + r * gpr, biases + r * gpr, &err))
			die_err("affine", &err);
	}
	return timing_stop(t);
}

/* mxfp4 likewise. */
static struct timing run_mxfp4(const uint16_t *w, size_t rows, uint32_t *packed, uint8_t *scales,
			       int threads)
{
	struct fg_err err = { 0 };
	struct timing t = timing_start();
	size_t r, n;

	if (threads > 0) {
		if (fg_quant_mxfp4_tensor_dt(FG_DT_BF16, w, rows, COLS, packed, scales, threads, &err))
			die_err("mxfp4", &err);
		return timing_stop(t);
	}
	for (r = 0; r < rows; r += n) {
		n = rows - r < BAND_ROWS ? rows - r : BAND_ROWS;
		if (fg_quant_mxfp4_rows_dt_ref(FG_DT_BF16, w + r * COLS, n, COLS, packed + r * (COLS / 8),
					       scales + r * (COLS / 32), &err))
			die_err("mxfp4", &err);
	}
	return timing_stop(t);
}

static void keep_best(struct timing *best, struct timing t)
{
	if (t.wall < best->wall)
		*best = t;
}

/* One line of the table: GB/s, vs memcpy, CPU and wall seconds. */
static void print_timed(const char *what, double gb, double t_cp, struct timing t)
{
	printf("%-34s %9.2f %11.2fx   CPU %5.2f s / wall %5.2f s\n", what, gb / t.wall, t_cp / t.wall, t.cpu,
	       t.wall);
}

static double run_fp8(const uint8_t *w, size_t rows, const float *si, size_t sr, size_t sc,
		      uint16_t *out, size_t row_limit, int ref)
{
	struct fg_err err = { 0 };
	double t = now_s();
	size_t r, n;

	for (r = 0; r < row_limit; r += n) {
		int rc;

		n = row_limit - r < 128 ? row_limit - r : 128;
		rc = (ref ? fg_fp8_block_dequant_rows_bf16_ref : fg_fp8_block_dequant_rows_bf16)(
			w, rows, COLS, si, sr, sc, r, n, out + r * COLS, &err);
		if (rc)
			die_err("fp8", &err);
	}
	return now_s() - t;
}

static void dump(const char *dir, const char *name, const void *p, size_t n)
{
	char path[1024];
	FILE *f;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
		fprintf(stderr, "bench_quant: dump path too long\n");
		exit(2);
	}
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
		fprintf(stderr, "bench_quant: cannot write %s\n", path);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	size_t mib = 1024, n, rows, words, gpr, i, sr, sc, ref_rows;
	const char *dump_dir = NULL;
	uint16_t *w, *scales, *biases, *out16;
	uint32_t *packed, *mx_packed;
	uint8_t *f8, *mx_scales;
	float *si, chunk[4096];
	unsigned char *copy;
	double t_cp, t_cp8, t_fp8 = 1e30, t_aff_ref, t_mx_ref, t_fp8_ref, gb, gb8;
	struct timing t_aff[2] = { { 1e30, 0 }, { 1e30, 0 } }, t_mx[2] = { { 1e30, 0 }, { 1e30, 0 } };
	int a, r;

	for (a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--dump") == 0 && a + 1 < argc) {
			dump_dir = argv[++a];
		} else {
			char *end;
			unsigned long v = strtoul(argv[a], &end, 10);

			if (*end || v < 64 || v > 8192) {
				fprintf(stderr, "usage: bench_quant [MiB of BF16, 64..8192] [--dump DIR]\n");
				return 2;
			}
			mib = v;
		}
	}
	n = mib << 20 >> 1; /* BF16 elements */
	rows = n / COLS;
	n = rows * COLS;
	words = fg_quant_affine_row_words(COLS, 4);
	gpr = COLS / 64;
	sr = (rows + 127) / 128;
	sc = COLS / 128;

	w = alloc_faulted(n * 2);
	copy = alloc_faulted(n * 2);
	packed = alloc_faulted(rows * words * 4);
	scales = alloc_faulted(rows * gpr * 2);
	biases = alloc_faulted(rows * gpr * 2);
	f8 = alloc_faulted(n);
	out16 = alloc_faulted(n * 2);
	si = alloc_faulted(sr * sc * 4);
	mx_packed = alloc_faulted(n / 2);
	mx_scales = alloc_faulted(n / 32);

	/* Weights: row scales vary over two decades, like real layers. */
	for (i = 0; i < n; i += 4096) {
		float spread = 0.002f * (float)(1 + (i / COLS) % 100);
		size_t k;

		for (k = 0; k < 4096; k++)
			chunk[k] = rng_weight(spread);
		fg_dtype_from_f32(FG_DT_BF16, chunk, w + i, 4096);
	}
	/* FP8 codes: random, without the NaN codes; scale_inv like DeepSeek's. */
	for (i = 0; i < n; i += 8) {
		uint64_t x = rng_next();
		size_t k;

		for (k = 0; k < 8; k++) {
			uint8_t b = (uint8_t)(x >> (8 * k));

			f8[i + k] = (b & 0x7f) == 0x7f ? 0x7e : b;
		}
	}
	for (i = 0; i < sr * sc; i++)
		si[i] = 1e-4f * (1.0f + (float)(rng_next() % 1000) / 100.0f);

	printf("quant bench: %zu MiB of BF16 ([%zu, %d], %zu M elements), best of %d\n", mib, rows, COLS,
	       n >> 20, REPS);
	printf("kernels: quant %s, dtype %s; FORGED_QUANT_THREADS default %d\n", fg_quant_simd_path(),
	       fg_dtype_simd_path(), fg_quant_threads());

	t_cp = best_memcpy(copy, w, n * 2);
	t_cp8 = best_memcpy(copy, f8, n);
	for (r = 0; r < REPS; r++) {
		int th;

		for (th = 0; th < 2; th++) {
			keep_best(&t_aff[th], run_affine(w, rows, packed, scales, biases, th + 1));
			keep_best(&t_mx[th], run_mxfp4(w, rows, mx_packed, mx_scales, th + 1));
		}
	}
	for (r = 0; r < REPS; r++) {
		double t = run_fp8(f8, rows, si, sr, sc, out16, rows, 0);

		if (t < t_fp8)
			t_fp8 = t;
	}
	ref_rows = ((size_t)REF_MIB << 20 >> 1) / COLS;
	t_aff_ref = run_affine(w, ref_rows, packed, scales, biases, 0).wall * (double)rows / (double)ref_rows;
	t_mx_ref = run_mxfp4(w, ref_rows, mx_packed, mx_scales, 0).wall * (double)rows / (double)ref_rows;
	t_fp8_ref = run_fp8(f8, rows, si, sr, sc, out16, ref_rows, 1) * (double)rows / (double)ref_rows;
	/* The timed fast runs' outputs are what is dumped: rerun the prefix fast. */
	run_affine(w, ref_rows, packed, scales, biases, 1);
	run_fp8(f8, rows, si, sr, sc, out16, ref_rows, 0);

	gb = (double)(n * 2) / 1e9;
	gb8 = (double)n / 1e9;
	printf("\n%-34s %9s %12s\n", "", "GB/s in", "vs memcpy");
	printf("%-34s %9.2f %12s\n", "memcpy (BF16 bytes)", gb / t_cp, "1.00");
	print_timed("affine 4-bit g64, BF16 in, 1 thread", gb, t_cp, t_aff[0]);
	print_timed("  2 threads", gb, t_cp, t_aff[1]);
	printf("%-34s %9.2f %11.2fx\n", "  (scalar reference path)", gb / t_aff_ref, t_cp / t_aff_ref);
	print_timed("mxfp4, BF16 in, 1 thread", gb, t_cp, t_mx[0]);
	print_timed("  2 threads", gb, t_cp, t_mx[1]);
	printf("%-34s %9.2f %11.2fx\n", "  (scalar reference path)", gb / t_mx_ref, t_cp / t_mx_ref);
	printf("%-34s %9.2f (1 thread) %.2f (2 threads)\n", "mxfp4 / affine GB/s", t_aff[0].wall / t_mx[0].wall,
	       t_aff[1].wall / t_mx[1].wall);
	printf("%-34s %9.2f (affine) %.2f (mxfp4)\n", "2 threads / 1 thread", t_aff[0].wall / t_aff[1].wall,
	       t_mx[0].wall / t_mx[1].wall);
	printf("%-34s %9.2f %12s\n", "memcpy (FP8 bytes)", gb8 / t_cp8, "1.00");
	printf("%-34s %9.2f %11.2fx   (%.2f GB/s written; vs memcpy of the BF16 bytes %.2fx)\n",
	       "fp8 block dequant -> BF16", gb8 / t_fp8, t_cp8 / t_fp8, 2 * gb8 / t_fp8, t_cp / t_fp8);
	printf("%-34s %9.2f %11.2fx\n", "  (scalar reference path)", gb8 / t_fp8_ref, t_cp8 / t_fp8_ref);

	printf("result memcpy_bf16_gbs %.4f\n", gb / t_cp);
	printf("result memcpy_fp8_gbs %.4f\n", gb8 / t_cp8);
	printf("result affine_gbs %.4f\n", gb / t_aff[0].wall);
	printf("result affine_2t_gbs %.4f\n", gb / t_aff[1].wall);
	printf("result affine_cpu_s %.4f\n", t_aff[0].cpu);
	printf("result affine_2t_cpu_s %.4f\n", t_aff[1].cpu);
	printf("result mxfp4_gbs %.4f\n", gb / t_mx[0].wall);
	printf("result mxfp4_2t_gbs %.4f\n", gb / t_mx[1].wall);
	printf("result mxfp4_cpu_s %.4f\n", t_mx[0].cpu);
	printf("result mxfp4_2t_cpu_s %.4f\n", t_mx[1].cpu);
	printf("result mxfp4_ref_gbs %.4f\n", gb / t_mx_ref);
	printf("result mxfp4_over_affine %.4f\n", t_aff[0].wall / t_mx[0].wall);
	printf("result mxfp4_over_affine_2t %.4f\n", t_aff[1].wall / t_mx[1].wall);
	printf("result affine_ref_gbs %.4f\n", gb / t_aff_ref);
	printf("result fp8_gbs %.4f\n", gb8 / t_fp8);
	printf("result fp8_ref_gbs %.4f\n", gb8 / t_fp8_ref);

	if (dump_dir) {
		size_t dump_rows = ((size_t)DUMP_MIB << 20 >> 1) / COLS;
		char meta[256];
		int len;

		dump(dump_dir, "w.bf16", w, n * 2);
		dump(dump_dir, "w.fp8", f8, n);
		dump(dump_dir, "scale_inv.f32", si, sr * sc * 4);
		dump(dump_dir, "affine_packed.u32", packed, dump_rows * words * 4);
		dump(dump_dir, "affine_scales.bf16", scales, dump_rows * gpr * 2);
		dump(dump_dir, "affine_biases.bf16", biases, dump_rows * gpr * 2);
		dump(dump_dir, "fp8_out.bf16", out16, dump_rows * COLS * 2);
		len = snprintf(meta, sizeof(meta), "{\"rows\": %zu, \"cols\": %d, \"dump_rows\": %zu}\n", rows,
			       COLS, dump_rows);
		dump(dump_dir, "meta.json", meta, (size_t)len);
	}
	free(w);
	free(copy);
	free(packed);
	free(scales);
	free(biases);
	free(f8);
	free(out16);
	free(si);
	free(mx_packed);
	free(mx_scales);
	return 0;
}
