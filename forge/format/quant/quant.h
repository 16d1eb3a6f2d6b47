/*
 * quant.h: the quantized weight formats forged writes and reads: MLX affine
 * quantization (2-8 bits with per-group scale and bias), MLX mxfp4 (E2M1 with
 * an E8M0 scale per 32 values), and the FP8 E4M3 block-scaled checkpoints of
 * DeepSeek-V3 that are dequantized before re-quantizing.
 *
 * Every function works on a band of rows, so a caller streams a tensor of any
 * size through buffers of a few rows; nothing here allocates, and no function
 * keeps state between calls (they are safe to call from several threads on
 * disjoint outputs).  Rows are the last axis of the tensor: a [.., K] weight
 * is handled as rows of K columns.
 *
 * Affine and mxfp4 quantization and FP8 dequantization dispatch once per
 * process to an AVX-512 or AVX2 kernel where the CPU has one
 * (FORGED_SIMD=scalar forces the scalar kernels, =avx2 forbids AVX-512, as
 * in dtype.h; both follow forge/core/cpu.h); each has a _ref twin, plain C
 * written from the spec, and the two agree bit for bit
 * (tests/unit/test_quant.c).  The dequantizers of the MLX formats are plain
 * C only (checking an artifact, not the hot path).
 *
 * Pointers need no alignment: tensor data sits at arbitrary offsets inside a
 * mapping, so a float or uint32_t pointer here is read and written as bytes.
 * Inputs and outputs must not overlap.  Errors are FG_EUSAGE (NULL pointer,
 * band outside the tensor) or FG_EINPUT (unsupported parameters, shapes that
 * do not fit, non-finite weights), with a message in err.  Parameter and shape
 * errors are found before anything is written; a non-finite weight is found
 * while streaming, and then the outputs of the band are partly written and
 * must be discarded.
 *
 * The implementation is the rest of forge/format/quant/: affine.c (affine
 * parameters, reference and row drivers), affine_x86.c (its AVX-512 and AVX2
 * kernels), mxfp4.c and mxfp4_x86.c (likewise), fp8.c (with its vector
 * kernels), kernels.c (the kernel sets and their dispatch) and threads.c
 * (the whole-tensor drivers); kernels.h is internal to the folder.
 */
#ifndef FG_QUANT_H
#define FG_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "forge/format/dtype.h"
#include "forge/core/error.h"

/* ---- MLX affine quantization ---------------------------------------------
 *
 * docs/domain.md section 5, which is what MLX's CPU kernel computes
 * (mlx/backend/cpu/quantized.cpp): per group of `group` consecutive values of
 * a row, in F32, N = 2^bits - 1, s0 = max((max - min) / N, 1e-7); the edge is
 * the extreme of larger magnitude (min if |min| > |max|, else max, with
 * s = -s0); q0 = rint(edge / s); if q0 != 0 then s = edge / q0 and
 * bias = edge, else bias = 0; each q = clamp(rint((w - bias) / s), 0, N),
 * rint rounding half to even.  q is computed with the F32 scale: rounding the
 * scale and bias to the storage dtype happens only when they are stored.
 *
 * Output per row: the q values as a little-endian bit stream (value j at bits
 * [j*bits, (j+1)*bits)) in cols*bits/32 uint32 words, so 3-, 5- and 6-bit
 * values straddle words; and cols/group scales and biases.  For a tensor
 * [rows, cols]: weight [rows, cols*bits/32] U32, scales and biases
 * [rows, cols/group] in the source dtype, as mlx-lm writes them.
 *
 * bits is 2, 3, 4, 5, 6 or 8; group is 32, 64 or 128; cols a multiple of
 * group.  Non-finite weights, and groups whose max - min overflows F32, are
 * refused with FG_EINPUT (MLX would write garbage for them).
 */

/* uint32 words of one packed row: cols * bits / 32 (0 when bits is out of range). */
size_t fg_quant_affine_row_words(size_t cols, int bits);

/*
 * Check bits, group and the row length cols against the rules above.
 * Returns 0, or FG_EINPUT with a message naming the value and the shape
 * ("[rows, cols]" is printed with rows as given, for the message only).
 */
int fg_quant_affine_check(size_t rows, size_t cols, int bits, int group, struct fg_err *err);

/*
 * Quantize rows x cols F32 weights w (row-major).  Writes rows*words packed
 * words, rows*cols/group F32 scales and biases; the caller narrows scales and
 * biases to the storage dtype (or uses fg_quant_affine_rows_dt).  Borrows
 * every pointer.  Returns 0 or FG_E*.
 */
int fg_quant_affine_rows(const float *w, size_t rows, size_t cols, int bits, int group,
			 uint32_t *packed, float *scales, float *biases, struct fg_err *err);

/* The same on the scalar reference path. */
int fg_quant_affine_rows_ref(const float *w, size_t rows, size_t cols, int bits, int group,
			     uint32_t *packed, float *scales, float *biases, struct fg_err *err);

/*
 * The same for weights stored as dt (F32, F16 or BF16; anything else is
 * FG_EUSAGE): w holds rows*cols elements of dt, and scales and biases are
 * written as dt (rounded to nearest even), the layout mlx-lm saves.  Values
 * are widened exactly, so the packed words equal those of
 * fg_quant_affine_rows on the widened weights.
 */
int fg_quant_affine_rows_dt(enum fg_dtype dt, const void *w, size_t rows, size_t cols, int bits,
			    int group, uint32_t *packed, void *scales, void *biases, struct fg_err *err);

/* The same on the scalar reference path. */
int fg_quant_affine_rows_dt_ref(enum fg_dtype dt, const void *w, size_t rows, size_t cols, int bits,
				int group, uint32_t *packed, void *scales, void *biases,
				struct fg_err *err);

/*
 * Dequantize rows packed rows: out[r, c] = scale * q + bias in F32 (a product
 * then a sum, never fused), scales and biases F32 [rows, cols/group].  Checks
 * parameters as fg_quant_affine_check.  Returns 0 or FG_E*.
 */
int fg_dequant_affine_rows(const uint32_t *packed, const float *scales, const float *biases,
			   size_t rows, size_t cols, int bits, int group, float *out,
			   struct fg_err *err);

/* The same with scales and biases stored as dt (F32, F16 or BF16), widened exactly. */
int fg_dequant_affine_rows_dt(enum fg_dtype dt, const uint32_t *packed, const void *scales,
			      const void *biases, size_t rows, size_t cols, int bits, int group,
			      float *out, struct fg_err *err);

/* ---- MLX mxfp4 -------------------------------------------------------------
 *
 * Groups of 32 values along a row share one E8M0 scale byte (2^(byte - 127);
 * byte 0 reads as 2^-127); each value is an E2M1 code (sign, 2 exponent bits,
 * 1 mantissa bit: +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}), eight codes per uint32
 * word, value j of a row in bits [4j, 4j+4) of the stream (low nibble first).
 * Shapes: weight [rows, cols/8] U32, scales [rows, cols/32] U8; no biases.
 *
 * As MLX's Metal kernel (and the CPU helpers to_fp8_e8m0 / to_fp4_e2m1):
 * amax = max |w| of the group, d = amax / 6 in F32; the scale exponent is
 * round-half-away-from-zero of the F32-rounded log2(d), clamped to
 * [-127, 127] (d = 0 gives byte 0); each value is w * (1 / 2^e) converted to
 * E2M1 by nearest, ties to the even code, saturating at 6, keeping the sign
 * (so -0.1 gives -0).  See mxfp4.c for where MLX's implementations differ.
 * The dispatched kernels compute the scale byte and the codes from the float
 * bits (no log2, no comparison chain) and agree with the _ref functions,
 * which follow these steps literally, bit for bit.
 */
#define FG_MXFP4_GROUP 32

/*
 * Quantize rows x cols F32 weights (cols a multiple of 32) into rows*cols/8
 * words and rows*cols/32 scale bytes.  Non-finite weights are FG_EINPUT.
 */
int fg_quant_mxfp4_rows(const float *w, size_t rows, size_t cols, uint32_t *packed,
			uint8_t *scales, struct fg_err *err);

/* The same on the scalar reference path. */
int fg_quant_mxfp4_rows_ref(const float *w, size_t rows, size_t cols, uint32_t *packed,
			    uint8_t *scales, struct fg_err *err);

/* The same for weights stored as dt (F32, F16 or BF16). */
int fg_quant_mxfp4_rows_dt(enum fg_dtype dt, const void *w, size_t rows, size_t cols,
			   uint32_t *packed, uint8_t *scales, struct fg_err *err);

/* The same on the scalar reference path. */
int fg_quant_mxfp4_rows_dt_ref(enum fg_dtype dt, const void *w, size_t rows, size_t cols,
			       uint32_t *packed, uint8_t *scales, struct fg_err *err);

/* out[r, c] = 2^(scale - 127) * e2m1(code) in F32 (byte 0: 2^-127; byte 255: infinity). */
int fg_dequant_mxfp4_rows(const uint32_t *packed, const uint8_t *scales, size_t rows, size_t cols,
			  float *out, struct fg_err *err);

/* ---- whole tensors on several threads ---------------------------------------
 *
 * What a converter calls on a whole tensor (forge/artifact/plan.c does): the
 * rows are split into `threads` contiguous bands of nearly equal size, one
 * per thread (the calling thread runs the first), when the tensor's input is
 * at least FG_QUANT_THREADS_MIN_BYTES; a smaller tensor runs on the calling
 * thread alone (at several GB/s per core, 8 MiB is about 1.5 ms of work, so
 * starting a thread costs a few per cent of it and below that the second
 * core stops paying).  threads <= 0 means fg_quant_threads().  The kernels
 * keep no state and the bands' outputs are disjoint, so the bytes written
 * are those of fg_quant_*_rows_dt on the whole tensor for any thread count.
 * Parameters are checked on the whole tensor before any thread starts; on a
 * non-finite weight (or an affine range overflow) the error is the one the
 * single-threaded call reports (the first in row order, rows counted from
 * the tensor's first), and the outputs must be discarded.  A thread that
 * cannot be started has its band run on the calling thread.
 *
 * FORGED_QUANT_THREADS, read at the first call of fg_quant_threads(), sets
 * the default: a number from 1 to FG_QUANT_THREADS_MAX; unset or anything
 * else means min(2, the CPUs this process may run on).
 */
#define FG_QUANT_THREADS_MIN_BYTES ((size_t)8 << 20)
#define FG_QUANT_THREADS_MAX 64

/* The default thread count (above); computed once, safe from any thread. */
int fg_quant_threads(void);

/* fg_quant_affine_rows_dt on a whole [rows, cols] tensor, on up to `threads` threads. */
int fg_quant_affine_tensor_dt(enum fg_dtype dt, const void *w, size_t rows, size_t cols, int bits,
			      int group, uint32_t *packed, void *scales, void *biases, int threads,
			      struct fg_err *err);

/* fg_quant_mxfp4_rows_dt on a whole [rows, cols] tensor, on up to `threads` threads. */
int fg_quant_mxfp4_tensor_dt(enum fg_dtype dt, const void *w, size_t rows, size_t cols,
			     uint32_t *packed, uint8_t *scales, int threads, struct fg_err *err);

/* ---- FP8 E4M3 block-scaled dequantization ---------------------------------
 *
 * DeepSeek-V3 style: W[r, c] = e4m3(w[r, c]) * scale_inv[r / 128, c / 128],
 * a multiplication despite the name, in F32; scale_inv is F32 of shape
 * [ceil(rows / 128), ceil(cols / 128)], the last block row and column ragged.
 * E4M3 is the FN variant of dtype.h (0x7f / 0xff are NaN and stay NaN).
 */
#define FG_FP8_BLOCK 128

/* Check that scale_inv's shape is the block grid of a [rows, cols] weight (FG_EINPUT otherwise). */
int fg_fp8_block_check(size_t rows, size_t cols, size_t scale_rows, size_t scale_cols,
		       struct fg_err *err);

/*
 * Dequantize rows [row0, row0 + n_rows) of the whole [rows, cols] E4M3
 * tensor w (w points at row 0; only the band's bytes are read) into out,
 * n_rows * cols F32.  scale_inv is the whole [scale_rows, scale_cols] grid.
 * Returns 0, FG_EINPUT for a grid of the wrong shape or a NaN or infinite
 * scale among those the band uses, FG_EUSAGE for a band outside the tensor;
 * nothing is written on error.
 */
int fg_fp8_block_dequant_rows(const uint8_t *w, size_t rows, size_t cols, const float *scale_inv,
			      size_t scale_rows, size_t scale_cols, size_t row0, size_t n_rows,
			      float *out, struct fg_err *err);

/* The same, writing BF16 (the F32 product rounded to nearest even) to out. */
int fg_fp8_block_dequant_rows_bf16(const uint8_t *w, size_t rows, size_t cols,
				   const float *scale_inv, size_t scale_rows, size_t scale_cols,
				   size_t row0, size_t n_rows, uint16_t *out, struct fg_err *err);

/* Both on the scalar reference path. */
int fg_fp8_block_dequant_rows_ref(const uint8_t *w, size_t rows, size_t cols,
				  const float *scale_inv, size_t scale_rows, size_t scale_cols,
				  size_t row0, size_t n_rows, float *out, struct fg_err *err);
int fg_fp8_block_dequant_rows_bf16_ref(const uint8_t *w, size_t rows, size_t cols,
				       const float *scale_inv, size_t scale_rows, size_t scale_cols,
				       size_t row0, size_t n_rows, uint16_t *out, struct fg_err *err);

/* Which kernel set the bulk functions use ("avx512", "avx2", "scalar"); read once. */
const char *fg_quant_simd_path(void);

#endif
