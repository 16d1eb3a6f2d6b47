/*
 * cpu.h: which SIMD kernels this process may use, decided once.
 *
 * dtype.c and the quantization kernels (forge/format/quant/) each keep a
 * table of kernel sets (scalar, AVX2, AVX-512) and pick one per process;
 * the choice of instruction level is made here, once, so both follow the
 * same rule and the same FORGED_SIMD cap:
 *   - FG_CPU_AVX512: the CPU has AVX-512F, AVX-512BW, AVX-512VL and F16C;
 *   - FG_CPU_AVX2: it has AVX2 and F16C (and AVX-512 is missing or capped);
 *   - FG_CPU_SCALAR: anything else, every non-x86 CPU, or the cap.
 * F16C is read from CPUID.1:ECX bit 29 directly because clang's
 * __builtin_cpu_supports does not know "f16c"; the AVX2 check already covers
 * OS support for the YMM state F16C needs.
 *
 * The environment variable FORGED_SIMD, read at the first call, caps the
 * level: "scalar" forces FG_CPU_SCALAR, "avx2" forbids AVX-512; unset or any
 * other value means the best the CPU supports.  Tests and benchmarks use it
 * to exercise every path on one machine.  Changing the variable later has no
 * effect.
 */
#ifndef FG_CPU_H
#define FG_CPU_H

enum fg_cpu_simd {
	FG_CPU_SCALAR,
	FG_CPU_AVX2,
	FG_CPU_AVX512,
};

/* The level for this process; computed once (pthread_once), safe from any thread. */
enum fg_cpu_simd fg_cpu_simd(void);

#endif
