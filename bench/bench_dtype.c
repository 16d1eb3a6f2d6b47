/*
 * bench_dtype.c: throughput of forge/format/dtype.c bulk conversions, reference path
 * against the dispatched (vectorized) path, with memcpy of the F32 bytes as
 * the ceiling a memory-bound conversion can approach.
 *
 * For each of BF16, F16, F8_E4M3 and F8_E5M2 it widens N elements to F32 and
 * narrows them back, REPS runs of the reference and of the fast path
 * interleaved (ref, fast, ref, fast, ...), and prints GB/s of the best run
 * (bytes read plus bytes written), the speed-up over the reference, and the
 * fraction of memcpy speed; each run's CPU time (CLOCK_PROCESS_CPUTIME_ID,
 * one thread) is taken beside its wall time.  "sample CASE ROLE wall|cpu MS"
 * lines (every run, forged = the dispatched path, reference = the scalar
 * _ref path) feed bench/benchlib.py samples.  Numbers only, no assertions.
 * FORGED_SIMD=avx2 or =scalar selects another path, as in the library.
 *
 *   bench/bench_dtype.sh, or:
 *   cc -std=c11 -D_GNU_SOURCE -O2 -I. bench/bench_dtype.c build/libforge.a -lm -lpthread \
 *      -o build/bench/bench_dtype && ./build/bench/bench_dtype [MiB of F32, default 64]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "forge/format/dtype.h"

#define REPS 5

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

/* Sums of uniforms: roughly normal, like trained weights, so the reference's
 * branches see realistic data rather than one repeated case. */
static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static float rng_weight(float scale)
{
	float s = 0.0f;
	int k;

	for (k = 0; k < 4; k++) {
		rng_state ^= rng_state << 13;
		rng_state ^= rng_state >> 7;
		rng_state ^= rng_state << 17;
		s += (float)(rng_state >> 40) / (float)(1u << 24) - 0.5f;
	}
	return s * scale;
}

enum direction { WIDEN, NARROW };

/* One conversion; its wall and CPU seconds in *wall and *cpu. */
static void time_one(enum fg_dtype dt, enum direction dir, bool ref, void *narrow, float *wide, size_t n,
		     double *wall, double *cpu)
{
	double t = now_s(), c = cpu_s();
	int rc;

	if (dir == WIDEN)
		rc = ref ? fg_dtype_to_f32_ref(dt, narrow, wide, n) : fg_dtype_to_f32(dt, narrow, wide, n);
	else
		rc = ref ? fg_dtype_from_f32_ref(dt, wide, narrow, n) : fg_dtype_from_f32(dt, wide, narrow, n);
	*wall = now_s() - t;
	*cpu = cpu_s() - c;
	if (rc != 0) {
		fprintf(stderr, "bench_dtype: conversion of %s failed\n", fg_dtype_name(dt));
		exit(1);
	}
}

/* REPS runs of the reference and of the fast path, interleaved; best wall
 * times in *tr and *tf, every run printed as a sample line of CASE. */
static void time_pair(enum fg_dtype dt, enum direction dir, void *narrow, float *wide, size_t n, double *tr,
		      double *tf)
{
	char cas[64];
	double w, c;
	int r;

	snprintf(cas, sizeof(cas), "%s_%s", fg_dtype_name(dt), dir == WIDEN ? "to_f32" : "from_f32");
	*tr = *tf = 1e30;
	for (r = 0; r < REPS; r++) {
		time_one(dt, dir, true, narrow, wide, n, &w, &c);
		*tr = w < *tr ? w : *tr;
		printf("sample %s reference wall %.4f\nsample %s reference cpu %.4f\n", cas, w * 1e3, cas, c * 1e3);
		time_one(dt, dir, false, narrow, wide, n, &w, &c);
		*tf = w < *tf ? w : *tf;
		printf("sample %s forged wall %.4f\nsample %s forged cpu %.4f\n", cas, w * 1e3, cas, c * 1e3);
	}
	printf("unit %s ms per %zu elements\nname %s forged fg_dtype_%s, %s path\nname %s reference fg_dtype_%s_ref\n",
	       cas, n, cas, dir == WIDEN ? "to_f32" : "from_f32", fg_dtype_simd_path(), cas,
	       dir == WIDEN ? "to_f32" : "from_f32");
}

int main(int argc, char **argv)
{
	static const struct {
		enum fg_dtype dt;
		float scale; /* spread of the test values, inside the type's range */
	} types[] = {
		{ FG_DT_BF16, 0.1f }, { FG_DT_F16, 0.1f }, { FG_DT_F8_E4M3, 200.0f }, { FG_DT_F8_E5M2, 1000.0f },
	};
	size_t mib = 64, n, i, k;
	float *wide, *source;
	unsigned char *narrow;
	double t, memcpy_gbs;
	int r;

	if (argc > 1) {
		char *end;
		unsigned long v = strtoul(argv[1], &end, 10);

		if (*end || v == 0 || v > 4096) {
			fprintf(stderr, "usage: bench_dtype [MiB of F32, 1..4096]\n");
			return 2;
		}
		mib = v;
	}
	n = mib * 1024 * 1024 / 4;
	source = malloc(n * 4);
	wide = malloc(n * 4);
	narrow = malloc(n * 2);
	if (!source || !wide || !narrow) {
		fprintf(stderr, "bench_dtype: out of memory for %zu MiB\n", mib);
		return 3;
	}
	memset(wide, 0, n * 4); /* fault the pages in before timing */
	memset(narrow, 0, n * 2);

	t = 1e30;
	for (r = 0; r < REPS; r++) {
		double t0 = now_s();

		memcpy(wide, wide + n / 2, n * 2); /* n*4 bytes total: two halves */
		memcpy(wide + n / 2, wide, n * 2);
		t0 = now_s() - t0;
		if (t0 < t)
			t = t0;
	}
	memcpy_gbs = 2.0 * (double)(n * 4) / t / 1e9;

	printf("dtype bench: %zu M elements (%zu MiB of F32), best of %d, path %s\n", n >> 20, mib, REPS,
	       fg_dtype_simd_path());
	printf("memcpy of %zu MiB: %.2f GB/s (read + write)\n\n", mib, memcpy_gbs);
	printf("%-9s %-6s %10s %10s %8s %12s\n", "dtype", "dir", "ref GB/s", "fast GB/s", "speedup",
	       "fast/memcpy");
	for (k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
		enum fg_dtype dt = types[k].dt;
		double bytes = (double)n * (double)(4 + fg_dtype_size(dt));
		double tr, tf;

		for (i = 0; i < n; i++)
			source[i] = rng_weight(types[k].scale);
		memcpy(wide, source, n * 4);
		fg_dtype_from_f32_ref(dt, wide, narrow, n);

		time_pair(dt, WIDEN, narrow, wide, n, &tr, &tf);
		printf("%-9s %-6s %10.2f %10.2f %7.1fx %11.0f%%\n", fg_dtype_name(dt), "to32", bytes / tr / 1e9,
		       bytes / tf / 1e9, tr / tf, 100.0 * bytes / tf / 1e9 / memcpy_gbs);

		memcpy(wide, source, n * 4);
		time_pair(dt, NARROW, narrow, wide, n, &tr, &tf);
		printf("%-9s %-6s %10.2f %10.2f %7.1fx %11.0f%%\n", fg_dtype_name(dt), "from32", bytes / tr / 1e9,
		       bytes / tf / 1e9, tr / tf, 100.0 * bytes / tf / 1e9 / memcpy_gbs);
	}
	free(source);
	free(wide);
	free(narrow);
	return 0;
}
