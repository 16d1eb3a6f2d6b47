/*
 * kernels.h: internal to forge/format/quant/, included by its .c files only
 * (affine.c, affine_x86.c, mxfp4.c, fp8.c, kernels.c); the public interface
 * is quant.h, and nothing outside this folder may include this header.
 *
 * What the quant files share: the contract of an affine row kernel (the
 * reference in affine.c, the vector kernels in affine_x86.c), the kernel
 * sets that bundle a row kernel with an FP8 block kernel (fp8.c) and the
 * dtype conversions, their once-per-process dispatch (kernels.c, on the
 * SIMD level of forge/core/cpu.h), and the parameter checks every format
 * uses.  Names are fg_qk_* / FG_QK_*, except the x86 target macros.
 */
#ifndef FG_QUANT_KERNELS_H
#define FG_QUANT_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "forge/format/dtype.h"
#include "forge/core/error.h"

/* Largest group of any mode; sizes the per-group stack buffers. */
#define FG_QK_AFFINE_MAX_GROUP 128

/* The lower bound MLX puts on an affine scale (s0 = max(range / N, eps)). */
#define FG_QK_AFFINE_EPS 1e-7f

/* What a row kernel reports instead of 0. */
#define FG_QK_ROW_NONFINITE 1 /* a weight is NaN or infinite */
#define FG_QK_ROW_RANGE 2     /* a group's max - min overflows F32 */

/*
 * A row kernel quantizes n_groups groups of one row: src holds
 * n_groups * group values of dt (F32, F16 or BF16, any alignment); it writes
 * n_groups * group * bits / 32 words at packed and one F32 scale and bias per
 * group into scales[] and biases[] (the caller's stack arrays).  Returns 0,
 * or FG_QK_ROW_NONFINITE / FG_QK_ROW_RANGE with *bad set to the column
 * (counted from src) of the first non-finite value or the first column of
 * the overflowing group.
 */
typedef int (*fg_qk_affine_row_fn)(enum fg_dtype dt, const unsigned char *src, size_t n_groups,
				   int bits, int group, unsigned char *packed, float *scales,
				   float *biases, size_t *bad);

/* ---- kernel sets (kernels.c) ------------------------------------------------ */

struct fg_qk_kernels {
	const char *name;
	fg_qk_affine_row_fn affine_row;
	/* n <= 128 E4M3 codes times scale (with scale * 256 finite) to F32 or
	 * BF16 at dst; NULL: compose dtype.c's conversions instead. */
	void (*fp8_block)(const uint8_t *src, size_t n, float scale, unsigned char *dst, bool bf16);
	int (*to_f32)(enum fg_dtype dt, const void *src, float *dst, size_t n);
	int (*from_f32)(enum fg_dtype dt, const float *src, void *dst, size_t n);
};

/* The _ref functions: reference kernels and dtype.c's reference conversions. */
extern const struct fg_qk_kernels fg_qk_kernels_ref;

/* The set the bulk functions use, chosen once per process ("avx512", "avx2", "scalar"). */
const struct fg_qk_kernels *fg_qk_dispatch(void);

/* ---- affine.c ------------------------------------------------------------------ */

/* The reference row kernel: the spec one element at a time. */
int fg_qk_affine_row_ref(enum fg_dtype dt, const unsigned char *src, size_t n_groups, int bits,
			 int group, unsigned char *packed, float *scales, float *biases, size_t *bad);

/* rows * cols elements of elem bytes fit in size_t (so every offset does);
 * FG_EINPUT naming `what` otherwise. */
int fg_qk_check_size(const char *what, size_t rows, size_t cols, size_t elem, struct fg_err *err);

/* F32, F16 or BF16: the dtypes weights and affine parameters may have. */
bool fg_qk_dtype_is_param(enum fg_dtype dt);

/* ---- x86 vector kernels (affine_x86.c, fp8.c) ------------------------------------ */

#if defined(__x86_64__)

/* Each kernel carries its own target, so the files build without -mavx2 and
 * a kernel runs only where fg_cpu_simd() found its instructions. */
#define TARGET_AVX2 __attribute__((target("avx2,f16c")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Row kernels (fg_qk_affine_row_fn) for AVX-512F/BW/VL and for AVX2. */
TARGET_AVX512 int fg_qk_affine_row_avx512(enum fg_dtype dt, const unsigned char *src, size_t n_groups,
					  int bits, int group, unsigned char *packed, float *scales,
					  float *biases, size_t *bad);
TARGET_AVX2 int fg_qk_affine_row_avx2(enum fg_dtype dt, const unsigned char *src, size_t n_groups,
				      int bits, int group, unsigned char *packed, float *scales,
				      float *biases, size_t *bad);

/* FP8 block kernels (struct fg_qk_kernels.fp8_block). */
TARGET_AVX512 void fg_qk_fp8_block_avx512(const uint8_t *src, size_t n, float scale, unsigned char *dst,
					  bool bf16);
TARGET_AVX2 void fg_qk_fp8_block_avx2(const uint8_t *src, size_t n, float scale, unsigned char *dst,
				      bool bf16);

#endif /* __x86_64__ */

#endif
