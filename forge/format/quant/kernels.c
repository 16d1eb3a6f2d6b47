/*
 * kernels.c: the kernel sets of forge/format/quant/ and the choice of one
 * per process.
 *
 * The _ref functions of quant.h use the reference set: the reference
 * kernels of affine.c and mxfp4.c and dtype.c's reference conversions.  The
 * dispatched functions use "avx512", "avx2" or "scalar", following
 * fg_cpu_simd() (forge/core/cpu.h), which applies the same FORGED_SIMD cap
 * as dtype.c ("scalar" forces the scalar set, "avx2" forbids AVX-512); the
 * scalar set is the affine reference, mxfp4.c's fast scalar kernel and
 * dtype.c's bulk conversions.  The vector sets point at affine_x86.c's row
 * kernels, mxfp4_x86.c's kernels and fp8.c's fused block kernels.
 */
#include "forge/format/quant/kernels.h"
#include "forge/format/quant/quant.h"
#include "forge/core/cpu.h"

#include <stddef.h>

/* ---- kernel sets and dispatch ----------------------------------------------- */

const struct fg_qk_kernels fg_qk_kernels_ref = {
	"ref", fg_qk_affine_row_ref, NULL, fg_dtype_to_f32_ref, fg_dtype_from_f32_ref, fg_qk_mxfp4_ref,
};

static const struct fg_qk_kernels kernels_scalar = {
	"scalar", fg_qk_affine_row_ref, NULL, fg_dtype_to_f32, fg_dtype_from_f32, fg_qk_mxfp4_scalar,
};

#if defined(__x86_64__)
static const struct fg_qk_kernels kernels_avx2 = {
	"avx2", fg_qk_affine_row_avx2, fg_qk_fp8_block_avx2, fg_dtype_to_f32, fg_dtype_from_f32,
	fg_qk_mxfp4_avx2,
};

static const struct fg_qk_kernels kernels_avx512 = {
	"avx512", fg_qk_affine_row_avx512, fg_qk_fp8_block_avx512, fg_dtype_to_f32, fg_dtype_from_f32,
	fg_qk_mxfp4_avx512,
};
#endif

/* The SIMD level is decided once per process (forge/core/cpu.c), so this is too. */
const struct fg_qk_kernels *fg_qk_dispatch(void)
{
	switch (fg_cpu_simd()) {
#if defined(__x86_64__)
	case FG_CPU_AVX512:
		return &kernels_avx512;
	case FG_CPU_AVX2:
		return &kernels_avx2;
#endif
	default:
		return &kernels_scalar;
	}
}

const char *fg_quant_simd_path(void)
{
	return fg_qk_dispatch()->name;
}
