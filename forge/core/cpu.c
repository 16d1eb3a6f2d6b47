/*
 * cpu.c: the once-per-process SIMD level of cpu.h: the FORGED_SIMD cap,
 * then a CPUID probe for AVX-512F/BW/VL, AVX2 and F16C.
 */
#include "forge/core/cpu.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#if defined(__x86_64__)
/* CPUID.1:ECX bit 29 (clang's __builtin_cpu_supports does not know f16c). */
static bool cpu_has_f16c(void)
{
	unsigned int eax, ebx, ecx, edx;

	return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
}
#endif

static pthread_once_t simd_once = PTHREAD_ONCE_INIT;
static enum fg_cpu_simd simd_level = FG_CPU_SCALAR;

/* Runs once (pthread_once). */
static void simd_init(void)
{
	const char *cap = getenv("FORGED_SIMD");

	simd_level = FG_CPU_SCALAR;
	if (cap && strcmp(cap, "scalar") == 0)
		return;
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (!(cap && strcmp(cap, "avx2") == 0) && __builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
	    cpu_has_f16c()) {
		simd_level = FG_CPU_AVX512;
		return;
	}
	if (__builtin_cpu_supports("avx2") && cpu_has_f16c())
		simd_level = FG_CPU_AVX2;
#endif
}

enum fg_cpu_simd fg_cpu_simd(void)
{
	pthread_once(&simd_once, simd_init);
	return simd_level;
}
