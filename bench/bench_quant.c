/*
 * bench_quant.c: throughput of forge/format/quant/ on a large BF16 tensor,
 * against memcpy of the same bytes in the same run.
 *
 *   affine   MLX affine 4-bit, group 64, BF16 weights in, packed U32 and BF16
 *            scales/biases out: the whole tensor in one call of the threaded
 *            driver fg_quant_affine_tensor_dt (what forge/artifact/plan.c
 *            calls), on 1 thread and on 2;
 *   mxfp4    MLX mxfp4 (E2M1 codes, one E8M0 scale per 32), the same weights
 *            through fg_quant_mxfp4_tensor_dt, on 1 thread and on 2;
 *   fp8      DeepSeek-V3 FP8 E4M3 block dequantization (128 x 128 F32
 *            scale_inv) to BF16, same element count, in bands of 128 rows
 *            (one thread);
 *   memcpy   of the affine input bytes and of the FP8 input bytes.
 *
 * Throughput is GB/s of input bytes (1 GB = 1e9 bytes), best of REPS runs by
 * wall time.  Each of the REPS rounds runs every measurement once, in the
 * order memcpy, affine 1t, mxfp4 1t, affine 2t, mxfp4 2t, memcpy (FP8),
 * fp8, so a change of load on a shared machine hits them alike; each run's
 * process CPU time (CLOCK_PROCESS_CPUTIME_ID: every thread of the process)
 * is taken beside its wall time, so on 2 threads CPU above wall shows the
 * second core at work.  The ratios mxfp4 / affine (GB/s) are taken at each
 * thread count, and 2 threads / 1 thread for each format.
 *
 * Checks (not timings): the 2-thread outputs are byte for byte those of the
 * 1-thread run, and the dispatched kernels' outputs on the first REF_MIB are
 * those of the scalar reference (_ref) paths, which are timed there once
 * (affine and mxfp4 in bands of BAND_ROWS rows, one thread) and
 * extrapolated.  A mismatch exits 1.
 * With --dump DIR the inputs and the first outputs are written to DIR for
 * bench/quant_numpy_ref.py, which runs the same algorithms in numpy on the
 * same bytes and checks its results against these.
 *
 *   cc -std=c11 -D_GNU_SOURCE -O2 -I. bench/bench_quant.c build/libforge.a \
 *      -lcjson -lm -lpthread -o build/bench_quant
 *   ./build/bench_quant [MiB of BF16, default 1024] [--dump DIR]
 *
 * Output: human-readable lines, then "result KEY VALUE" lines (best GB/s,
 * ratios of GB/s) and "sample CASE ROLE wall|cpu VALUE" lines (every run, ms
 * per GiB of input, for bench/benchlib.py samples; the numpy side prints the
 * reference rows of affine_4bit_g64 and fp8_to_bf16).  In the cases
 * mxfp4_vs_affine_{1t,2t} the reference is affine at the same thread count,
 * in {affine,mxfp4}_2t_vs_1t the same format on 1 thread; as everywhere in
 * benchlib a ratio is a time ratio (forged / reference), so mxfp4's GB/s over
 * affine's is its inverse (bench_quant.sh adds it, over all its rounds, as
 * the extras gbs_ratio_best and gbs_ratio_median).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "forge/format/dtype.h"
#include "forge/core/error.h"
#include "forge/format/quant/quant.h"

#define REPS 3
#define COLS 4096
#define BAND_ROWS 64
#define REF_MIB 64
#define DUMP_MIB 16 /* outputs written for the numpy cross-check */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wall and CPU seconds of one run. */
struct span {
	double wall, cpu;
};

static struct span span_start(void)
{
	struct span s = { now_s(), cpu_s() };

	return s;
}

static struct span span_end(struct span s)
{
	s.wall = now_s() - s.wall;
	s.cpu = cpu_s() - s.cpu;
	return s;
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

/* FNV-1a style, eight bytes a step (then the tail byte by byte): enough to
 * tell two outputs apart; never timed. */
static uint64_t digest(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t x;

		memcpy(&x, b + i, 8);
		h = (h ^ x) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

#define DIGEST0 0xcbf29ce484222325ull

static struct span run_memcpy(void *dst, const void *src, size_t n)
{
	struct span t = span_start();

	memcpy(dst, src, n);
	t = span_end(t);
	/* Keep the copy observable. */
	if (((volatile unsigned char *)dst)[n / 2] == 0xfe && ((const unsigned char *)src)[n / 2] != 0xfe)
		fprintf(stderr, "bench_quant: memcpy check failed\n");
	return t;
}

static void die_err(const char *what, const struct fg_err *err)
{
	fprintf(stderr, "bench_quant: %s: %s\n", what, err->msg);
	exit(1);
}

/* The affine outputs of a [rows, COLS] tensor. */
struct affine_out {
	uint32_t *packed;
	uint16_t *scales, *biases;
};

/* The mxfp4 outputs. */
struct mxfp4_out {
	uint32_t *packed;
	uint8_t *scales;
};

/* Affine 4-bit g64 of rows [0, rows): the whole-tensor driver on `threads`
 * threads, or (threads 0) the scalar _ref path in bands of BAND_ROWS. */
static struct span run_affine(const uint16_t *w, size_t rows, struct affine_out o, int threads)
{
	const size_t words = fg_quant_affine_row_words(COLS, 4), gpr = COLS / 64;
	struct fg_err err = { 0 };
	struct span t = span_start();
	size_t r, n;

	if (threads > 0) {
		if (fg_quant_affine_tensor_dt(FG_DT_BF16, w, rows, COLS, 4, 64, o.packed, o.scales, o.biases,
					      threads, &err))
			die_err("affine", &err);
		return span_end(t);
	}
	for (r = 0; r < rows; r += n) {
		n = rows - r < BAND_ROWS ? rows - r : BAND_ROWS;
		if (fg_quant_affine_rows_dt_ref(FG_DT_BF16, w + r * COLS, n, COLS, 4, 64, o.packed + r * words,
						o.scales + r * gpr, o.biases + r * gpr, &err))
			die_err("affine (reference path)", &err);
	}
	return span_end(t);
}

/* mxfp4 of rows [0, rows), the same two ways. */
static struct span run_mxfp4(const uint16_t *w, size_t rows, struct mxfp4_out o, int threads)
{
	struct fg_err err = { 0 };
	struct span t = span_start();
	size_t r, n;

	if (threads > 0) {
		if (fg_quant_mxfp4_tensor_dt(FG_DT_BF16, w, rows, COLS, o.packed, o.scales, threads, &err))
			die_err("mxfp4", &err);
		return span_end(t);
	}
	for (r = 0; r < rows; r += n) {
		n = rows - r < BAND_ROWS ? rows - r : BAND_ROWS;
		if (fg_quant_mxfp4_rows_dt_ref(FG_DT_BF16, w + r * COLS, n, COLS, o.packed + r * (COLS / 8),
					       o.scales + r * (COLS / FG_MXFP4_GROUP), &err))
			die_err("mxfp4 (reference path)", &err);
	}
	return span_end(t);
}

static uint64_t affine_digest(struct affine_out o, size_t rows)
{
	const size_t words = fg_quant_affine_row_words(COLS, 4), gpr = COLS / 64;
	uint64_t h = digest(DIGEST0, o.packed, rows * words * 4);

	h = digest(h, o.scales, rows * gpr * 2);
	return digest(h, o.biases, rows * gpr * 2);
}

static uint64_t mxfp4_digest(struct mxfp4_out o, size_t rows)
{
	return digest(digest(DIGEST0, o.packed, rows * (COLS / 8) * 4), o.scales, rows * (COLS / FG_MXFP4_GROUP));
}

static void expect_same(const char *what, uint64_t want, uint64_t got)
{
	if (want != got) {
		fprintf(stderr, "bench_quant: %s: outputs differ (digest %016llx, expected %016llx)\n", what,
			(unsigned long long)got, (unsigned long long)want);
		exit(1);
	}
	printf("check %s: identical\n", what);
}

static struct span run_fp8(const uint8_t *w, size_t rows, const float *si, size_t sr, size_t sc,
			   uint16_t *out, size_t row_limit, int ref)
{
	struct fg_err err = { 0 };
	struct span t = span_start();
	size_t r, n;

	for (r = 0; r < row_limit; r += n) {
		int rc;

		n = row_limit - r < 128 ? row_limit - r : 128;
		rc = (ref ? fg_fp8_block_dequant_rows_bf16_ref : fg_fp8_block_dequant_rows_bf16)(
			w, rows, COLS, si, sr, sc, r, n, out + r * COLS, &err);
		if (rc)
			die_err("fp8", &err);
	}
	return span_end(t);
}

/* sample lines of one run of `bytes` input bytes, in ms per GiB of input. */
static void sample(const char *cas, const char *role, struct span t, double bytes)
{
	double k = 1e3 * (double)(1u << 30) / bytes;

	printf("sample %s %s wall %.4f\n", cas, role, t.wall * k);
	printf("sample %s %s cpu %.4f\n", cas, role, t.cpu * k);
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

/* The measurements of one round, in the order they run. */
enum { M_CP, M_AFF1, M_MX1, M_AFF2, M_MX2, M_CP8, M_FP8, M_N };

/* The run of measurement m with the least wall time. */
static struct span best_of(struct span runs[REPS][M_N], int m)
{
	struct span b = runs[0][m];
	int r;

	for (r = 1; r < REPS; r++)
		if (runs[r][m].wall < b.wall)
			b = runs[r][m];
	return b;
}

/* One table line: GB/s of input, against memcpy, CPU and wall of the best run. */
static void row(const char *what, double gb, double t_cp, struct span t)
{
	printf("%-36s %9.2f %11.2fx   CPU %6.3f s / wall %6.3f s\n", what, gb / t.wall, t_cp / t.wall, t.cpu,
	       t.wall);
}

int main(int argc, char **argv)
{
	size_t mib = 1024, n, rows, words, gpr, i, sr, sc, ref_rows;
	const char *dump_dir = NULL, *kq;
	uint16_t *w, *out16;
	uint8_t *f8;
	float *si, chunk[4096];
	unsigned char *copy;
	struct affine_out aff;
	struct mxfp4_out mx;
	uint64_t h_aff = 0, h_mx = 0, h;
	double t_aff_ref, t_mx_ref, t_fp8_ref, gb, gb8;
	struct span runs[REPS][M_N], cp, cp8, a1, a2, m1, m2, f;
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
	aff.packed = alloc_faulted(rows * words * 4);
	aff.scales = alloc_faulted(rows * gpr * 2);
	aff.biases = alloc_faulted(rows * gpr * 2);
	mx.packed = alloc_faulted(n / 2);
	mx.scales = alloc_faulted(n / FG_MXFP4_GROUP);
	f8 = alloc_faulted(n);
	out16 = alloc_faulted(n * 2);
	si = alloc_faulted(sr * sc * 4);

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

	kq = fg_quant_simd_path();
	printf("quant bench: %zu MiB of BF16 ([%zu, %d], %zu M elements), best of %d interleaved rounds\n", mib,
	       rows, COLS, n >> 20, REPS);
	printf("kernels: quant %s, dtype %s; affine and mxfp4 through the whole-tensor drivers on 1 and 2 "
	       "threads (forge's default here: %d), fp8 on 1\n",
	       kq, fg_dtype_simd_path(), fg_quant_threads());

	for (r = 0; r < REPS; r++) {
		runs[r][M_CP] = run_memcpy(copy, w, n * 2);
		runs[r][M_AFF1] = run_affine(w, rows, aff, 1);
		if (r == 0)
			h_aff = affine_digest(aff, rows);
		runs[r][M_MX1] = run_mxfp4(w, rows, mx, 1);
		if (r == 0)
			h_mx = mxfp4_digest(mx, rows);
		runs[r][M_AFF2] = run_affine(w, rows, aff, 2);
		if (r == 0)
			expect_same("affine on 2 threads against 1", h_aff, affine_digest(aff, rows));
		runs[r][M_MX2] = run_mxfp4(w, rows, mx, 2);
		if (r == 0)
			expect_same("mxfp4 on 2 threads against 1", h_mx, mxfp4_digest(mx, rows));
		runs[r][M_CP8] = run_memcpy(copy, f8, n);
		runs[r][M_FP8] = run_fp8(f8, rows, si, sr, sc, out16, rows, 0);
	}
	cp = best_of(runs, M_CP);
	a1 = best_of(runs, M_AFF1);
	m1 = best_of(runs, M_MX1);
	a2 = best_of(runs, M_AFF2);
	m2 = best_of(runs, M_MX2);
	cp8 = best_of(runs, M_CP8);
	f = best_of(runs, M_FP8);

	/* The reference paths on a prefix, checked against the fast outputs
	 * there (the timed runs left those in the buffers), then the prefix
	 * redone fast so that what is dumped is the fast path's. */
	ref_rows = ((size_t)REF_MIB << 20 >> 1) / COLS;
	h_aff = affine_digest(aff, ref_rows);
	h_mx = mxfp4_digest(mx, ref_rows);
	t_aff_ref = run_affine(w, ref_rows, aff, 0).wall * (double)rows / (double)ref_rows;
	expect_same("affine dispatched against the reference path", h_aff, affine_digest(aff, ref_rows));
	t_mx_ref = run_mxfp4(w, ref_rows, mx, 0).wall * (double)rows / (double)ref_rows;
	expect_same("mxfp4 dispatched against the reference path", h_mx, mxfp4_digest(mx, ref_rows));
	h = digest(DIGEST0, out16, ref_rows * COLS * 2);
	t_fp8_ref = run_fp8(f8, rows, si, sr, sc, out16, ref_rows, 1).wall * (double)rows / (double)ref_rows;
	expect_same("fp8 dispatched against the reference path", h, digest(DIGEST0, out16, ref_rows * COLS * 2));
	run_affine(w, ref_rows, aff, 1);
	run_fp8(f8, rows, si, sr, sc, out16, ref_rows, 0);

	gb = (double)(n * 2) / 1e9;
	gb8 = (double)n / 1e9;
	printf("\n%-36s %9s %12s   %s\n", "", "GB/s in", "vs memcpy", "best run (CPU: all threads)");
	row("memcpy (BF16 bytes)", gb, cp.wall, cp);
	row("affine 4-bit g64, BF16 in, 1 thread", gb, cp.wall, a1);
	row("  2 threads", gb, cp.wall, a2);
	printf("%-36s %9.2f %11.2fx   (first %d MiB, extrapolated)\n", "  scalar reference path", gb / t_aff_ref,
	       cp.wall / t_aff_ref, REF_MIB);
	row("mxfp4, BF16 in, 1 thread", gb, cp.wall, m1);
	row("  2 threads", gb, cp.wall, m2);
	printf("%-36s %9.2f %11.2fx   (first %d MiB, extrapolated)\n", "  scalar reference path", gb / t_mx_ref,
	       cp.wall / t_mx_ref, REF_MIB);
	row("memcpy (FP8 bytes)", gb8, cp8.wall, cp8);
	row("fp8 block dequant -> BF16, 1 thread", gb8, cp8.wall, f);
	printf("%-36s %9.2f GB/s written; %.2fx memcpy of the BF16 bytes\n", "", 2 * gb8 / f.wall, cp.wall / f.wall);
	printf("%-36s %9.2f %11.2fx   (first %d MiB, extrapolated)\n", "  scalar reference path", gb8 / t_fp8_ref,
	       cp8.wall / t_fp8_ref, REF_MIB);
	printf("\nmxfp4 / affine GB/s:   %.2f on 1 thread, %.2f on 2 threads (best runs)\n", a1.wall / m1.wall,
	       a2.wall / m2.wall);
	printf("2 threads / 1 thread:  affine %.2fx GB/s (CPU %.2fx), mxfp4 %.2fx GB/s (CPU %.2fx)\n",
	       a1.wall / a2.wall, a2.cpu / a1.cpu, m1.wall / m2.wall, m2.cpu / m1.cpu);
	printf("per round (wall), mxfp4 / affine GB/s at 1t, 2t:");
	for (r = 0; r < REPS; r++)
		printf(" %.2f, %.2f%s", runs[r][M_AFF1].wall / runs[r][M_MX1].wall,
		       runs[r][M_AFF2].wall / runs[r][M_MX2].wall, r + 1 < REPS ? ";" : "\n");

	printf("result memcpy_bf16_gbs %.4f\n", gb / cp.wall);
	printf("result memcpy_fp8_gbs %.4f\n", gb8 / cp8.wall);
	printf("result affine_gbs %.4f\n", gb / a1.wall);
	printf("result affine_2t_gbs %.4f\n", gb / a2.wall);
	printf("result affine_ref_gbs %.4f\n", gb / t_aff_ref);
	printf("result mxfp4_gbs %.4f\n", gb / m1.wall);
	printf("result mxfp4_2t_gbs %.4f\n", gb / m2.wall);
	printf("result mxfp4_ref_gbs %.4f\n", gb / t_mx_ref);
	printf("result mxfp4_over_affine %.4f\n", a1.wall / m1.wall);
	printf("result mxfp4_over_affine_2t %.4f\n", a2.wall / m2.wall);
	printf("result fp8_gbs %.4f\n", gb8 / f.wall);
	printf("result fp8_ref_gbs %.4f\n", gb8 / t_fp8_ref);
	for (r = 0; r < REPS; r++) {
		sample("affine_4bit_g64", "forged", runs[r][M_AFF1], gb * 1e9);
		sample("fp8_to_bf16", "forged", runs[r][M_FP8], gb8 * 1e9);
		sample("affine_vs_memcpy", "forged", runs[r][M_AFF1], gb * 1e9);
		sample("affine_vs_memcpy", "reference", runs[r][M_CP], gb * 1e9);
		sample("fp8_vs_memcpy", "forged", runs[r][M_FP8], gb8 * 1e9);
		sample("fp8_vs_memcpy", "reference", runs[r][M_CP8], gb8 * 1e9);
		sample("mxfp4_vs_affine_1t", "forged", runs[r][M_MX1], gb * 1e9);
		sample("mxfp4_vs_affine_1t", "reference", runs[r][M_AFF1], gb * 1e9);
		sample("mxfp4_vs_affine_2t", "forged", runs[r][M_MX2], gb * 1e9);
		sample("mxfp4_vs_affine_2t", "reference", runs[r][M_AFF2], gb * 1e9);
		sample("affine_2t_vs_1t", "forged", runs[r][M_AFF2], gb * 1e9);
		sample("affine_2t_vs_1t", "reference", runs[r][M_AFF1], gb * 1e9);
		sample("mxfp4_2t_vs_1t", "forged", runs[r][M_MX2], gb * 1e9);
		sample("mxfp4_2t_vs_1t", "reference", runs[r][M_MX1], gb * 1e9);
	}
	printf("unit affine_4bit_g64 ms per GiB of BF16 input\nunit affine_vs_memcpy ms per GiB of BF16 input\n");
	printf("unit fp8_to_bf16 ms per GiB of FP8 input\nunit fp8_vs_memcpy ms per GiB of FP8 input\n");
	printf("unit mxfp4_vs_affine_1t ms per GiB of BF16 input\nunit mxfp4_vs_affine_2t ms per GiB of BF16 input\n");
	printf("unit affine_2t_vs_1t ms per GiB of BF16 input\nunit mxfp4_2t_vs_1t ms per GiB of BF16 input\n");
	printf("name affine_4bit_g64 forged fg_quant_affine_tensor_dt, %s kernels, 1 thread\n", kq);
	printf("name affine_vs_memcpy forged fg_quant_affine_tensor_dt, %s kernels, 1 thread\n", kq);
	printf("name affine_vs_memcpy reference memcpy of the BF16 bytes\n");
	printf("name fp8_to_bf16 forged forge/format/quant fp8 dequant, %s kernels, 1 thread\n", kq);
	printf("name fp8_vs_memcpy forged forge/format/quant fp8 dequant, %s kernels, 1 thread\n", kq);
	printf("name fp8_vs_memcpy reference memcpy of the FP8 bytes\n");
	for (a = 1; a <= 2; a++) {
		printf("name mxfp4_vs_affine_%dt forged fg_quant_mxfp4_tensor_dt, %s kernels, %d thread%s\n", a, kq,
		       a, a > 1 ? "s" : "");
		printf("name mxfp4_vs_affine_%dt reference fg_quant_affine_tensor_dt 4-bit g64, %s kernels, "
		       "%d thread%s\n",
		       a, kq, a, a > 1 ? "s" : "");
	}
	printf("name affine_2t_vs_1t forged fg_quant_affine_tensor_dt, %s kernels, 2 threads\n", kq);
	printf("name affine_2t_vs_1t reference fg_quant_affine_tensor_dt, %s kernels, 1 thread\n", kq);
	printf("name mxfp4_2t_vs_1t forged fg_quant_mxfp4_tensor_dt, %s kernels, 2 threads\n", kq);
	printf("name mxfp4_2t_vs_1t reference fg_quant_mxfp4_tensor_dt, %s kernels, 1 thread\n", kq);
	printf("extra affine_4bit_g64 forged_mib %zu\nextra fp8_to_bf16 forged_mib %zu\n", mib, mib / 2);
	printf("extra affine_4bit_g64 scalar_ref_path_gbs %.4f\nextra fp8_to_bf16 scalar_ref_path_gbs %.4f\n",
	       gb / t_aff_ref, gb8 / t_fp8_ref);
	printf("extra mxfp4_vs_affine_1t scalar_ref_path_gbs %.4f\n", gb / t_mx_ref);

	if (dump_dir) {
		size_t dump_rows = ((size_t)DUMP_MIB << 20 >> 1) / COLS;
		char meta[256];
		int len;

		dump(dump_dir, "w.bf16", w, n * 2);
		dump(dump_dir, "w.fp8", f8, n);
		dump(dump_dir, "scale_inv.f32", si, sr * sc * 4);
		dump(dump_dir, "affine_packed.u32", aff.packed, dump_rows * words * 4);
		dump(dump_dir, "affine_scales.bf16", aff.scales, dump_rows * gpr * 2);
		dump(dump_dir, "affine_biases.bf16", aff.biases, dump_rows * gpr * 2);
		dump(dump_dir, "fp8_out.bf16", out16, dump_rows * COLS * 2);
		len = snprintf(meta, sizeof(meta), "{\"rows\": %zu, \"cols\": %d, \"dump_rows\": %zu}\n", rows,
			       COLS, dump_rows);
		dump(dump_dir, "meta.json", meta, (size_t)len);
	}
	free(w);
	free(copy);
	free(aff.packed);
	free(aff.scales);
	free(aff.biases);
	free(mx.packed);
	free(mx.scales);
	free(f8);
	free(out16);
	free(si);
	return 0;
}
