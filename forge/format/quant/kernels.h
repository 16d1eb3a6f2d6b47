/*
 * kernels.h: internal to forge/format/quant/, included by its .c files only
 * (affine.c, affine_x86.c, mxfp4.c, mxfp4_x86.c, fp8.c, kernels.c,
 * threads.c); the public interface is quant.h, and nothing outside this
 * folder may include this header.
 *
 * What the quant files share: the contracts of an affine row kernel (the
 * reference in affine.c, the vector kernels in affine_x86.c) and of an mxfp4
 * kernel (reference and fast scalar in mxfp4.c, vector kernels in
 * mxfp4_x86.c), the kernel sets that bundle them with an FP8 block kernel
 * (fp8.c) and the dtype conversions, their once-per-process dispatch
 * (kernels.c, on the SIMD level of forge/core/cpu.h), the band drivers the
 * threaded drivers (threads.c) split a tensor over, and the parameter checks
 * every format uses.  Names are fg_qk_* / FG_QK_*, except the x86 target
 * macros.
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

/*
 * An mxfp4 kernel quantizes n_groups consecutive groups of FG_MXFP4_GROUP
 * values of dt at src (any alignment; the groups of consecutive rows are
 * consecutive too, so one call may span rows): 16 bytes of codes per group
 * at packed and one E8M0 byte per group at scales.  Returns 0, or
 * FG_QK_ROW_NONFINITE with *bad set to the index (counted from src) of the
 * first non-finite value; the groups before the one holding it are written.
 */
typedef int (*fg_qk_mxfp4_fn)(enum fg_dtype dt, const unsigned char *src, size_t n_groups,
			      unsigned char *packed, uint8_t *scales, size_t *bad);

/* ---- kernel sets (kernels.c) ------------------------------------------------ */

struct fg_qk_kernels {
	const char *name;
	fg_qk_affine_row_fn affine_row;
	/* n <= 128 E4M3 codes times scale (with scale * 256 finite) to F32 or
	 * BF16 at dst; NULL: compose dtype.c's conversions instead. */
	void (*fp8_block)(const uint8_t *src, size_t n, float scale, unsigned char *dst, bool bf16);
	int (*to_f32)(enum fg_dtype dt, const void *src, float *dst, size_t n);
	int (*from_f32)(enum fg_dtype dt, const float *src, void *dst, size_t n);
	fg_qk_mxfp4_fn mxfp4;
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

/*
 * The row drivers of affine.c and mxfp4.c on a band: w, packed, scales
 * (and biases) point at the band's first row, which is row row_base of the
 * tensor (error messages count rows from the tensor's first).  The checks
 * run the quant.h rules on the band, so a caller that splits a tensor checks
 * it whole first (fg_qk_*_check_all) and runs bands that cannot fail them.
 */
int fg_qk_affine_check_all(enum fg_dtype dt, const void *w, size_t rows, size_t cols, int bits,
			   int group, const void *packed, const void *scales, const void *biases,
			   struct fg_err *err);
int fg_qk_affine_band(const struct fg_qk_kernels *ks, enum fg_dtype dt, const void *w, size_t rows,
		      size_t cols, int bits, int group, uint32_t *packed, void *scales, void *biases,
		      size_t row_base, struct fg_err *err);
int fg_qk_mxfp4_check_all(enum fg_dtype dt, const void *w, size_t rows, size_t cols,
			  const void *packed, const void *scales, struct fg_err *err);
int fg_qk_mxfp4_band(const struct fg_qk_kernels *ks, enum fg_dtype dt, const void *w, size_t rows,
		     size_t cols, uint32_t *packed, uint8_t *scales, size_t row_base, struct fg_err *err);

/* ---- mxfp4.c ------------------------------------------------------------------ */

/* The reference kernel (the spec one element at a time, log2 and a chain of
 * comparisons) and the fast scalar kernel (the bit tricks below). */
int fg_qk_mxfp4_ref(enum fg_dtype dt, const unsigned char *src, size_t n_groups, unsigned char *packed,
		    uint8_t *scales, size_t *bad);
int fg_qk_mxfp4_scalar(enum fg_dtype dt, const unsigned char *src, size_t n_groups,
		       unsigned char *packed, uint8_t *scales, size_t *bad);

/*
 * The E8M0 byte of a group from the F32 bits of its amax (finite, sign
 * clear), without the division by 6 or the log2 of the reference: amax / 6
 * lies in [2^(be-130) * 4/3, 2^(be-129) * 4/3) for amax's biased exponent
 * be, an interval one unit long in log2 holding one half-integer, so
 * round(log2(amax / 6)) takes one of two values there and the byte is
 * be - 3, plus one from the mantissa fg_qk_e8m0_up[be] on, and at least 0.
 * The table (mxfp4.c) holds, per be, the first mantissa at which the
 * reference's byte goes up (near 3 / (2 sqrt 2) = 1.0607, mantissa
 * 0x07c3ce, moved by a few units by the reference's roundings), and
 * 0x800000 (never) where the byte is 0 throughout (be < 3) or be is 255.
 * test_quant.c checks it against the reference on every BF16 and F16 amax
 * and around every threshold (exhaustively with FORGED_QUANT_EXHAUSTIVE).
 */
extern const uint32_t fg_qk_e8m0_up[256];

static inline unsigned fg_qk_e8m0_from_amax(uint32_t amax_bits)
{
	unsigned be = amax_bits >> 23;
	unsigned b = be + ((amax_bits & 0x7fffffu) >= fg_qk_e8m0_up[be]);

	return b > 3 ? b - 3 : 0;
}

/* The F32 bits of 1 / 2^(byte - 127) = 2^(127 - byte), what the values of a
 * group are multiplied by; byte <= 252 here, so the result is normal. */
#define FG_QK_MXFP4_ENC_BITS(byte) ((254u - (uint32_t)(byte)) << 23)

/* ---- x86 vector kernels (affine_x86.c, mxfp4_x86.c, fp8.c) ----------------------- */

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

/* mxfp4 kernels (mxfp4_x86.c). */
TARGET_AVX512 int fg_qk_mxfp4_avx512(enum fg_dtype dt, const unsigned char *src, size_t n_groups,
				     unsigned char *packed, uint8_t *scales, size_t *bad);
TARGET_AVX2 int fg_qk_mxfp4_avx2(enum fg_dtype dt, const unsigned char *src, size_t n_groups,
				 unsigned char *packed, uint8_t *scales, size_t *bad);

/* FP8 block kernels (struct fg_qk_kernels.fp8_block). */
TARGET_AVX512 void fg_qk_fp8_block_avx512(const uint8_t *src, size_t n, float scale, unsigned char *dst,
					  bool bf16);
TARGET_AVX2 void fg_qk_fp8_block_avx2(const uint8_t *src, size_t n, float scale, unsigned char *dst,
				      bool bf16);

#endif /* __x86_64__ */

#endif
