/*
 * affine.c: MLX affine quantization and dequantization on bands of rows:
 * the parameter rules, the scalar reference kernel, and the row drivers that
 * run a kernel set's row kernel (kernels.c) over a tensor.
 *
 * forged re-quantizes an MTP head so that it matches the MLX backbone it is
 * shipped with: same bits, group size and mode, and the same packed words MLX
 * itself would write, so a head converted here and one converted by mlx-lm are
 * interchangeable byte for byte.  FP8 sources (DeepSeek-V3) are dequantized
 * first (fp8.c).  Tensors can be gigabytes, so everything works on a range of
 * rows with stack buffers only.
 *
 * Where the definition comes from (read in ml-explore/mlx, commit 846d176,
 * August 2026; mxfp4.c and fp8.c cite theirs): mlx/backend/cpu/quantized.cpp,
 * function quantize().  It keeps min and max from +-infinity, computes
 * scale, edge and q0 in float as docs/domain.md section 5 states, divides (no
 * reciprocal), rounds with std::rint, clamps to [0, N], and casts scale and
 * bias to the source type only when storing them: the q values use the F32
 * scale.  That is exactly docs/domain.md; the differences are at the edges: MLX
 * lets NaN slip through its min/max (std::max keeps its first argument) and
 * then casts a NaN q to an integer (undefined), and an infinite weight gives
 * an infinite scale; forged refuses both.  MLX groups over the flattened
 * tensor, the same thing when cols is a multiple of group.  For 3, 5 and 6
 * bits it writes bytes of 24- or 40-bit packs, which is the same
 * little-endian bit stream.  The Metal kernel differs as docs/domain.md says (max
 * starts at 0, round() is half away from zero, no clamp at 0); the generic
 * fallback in mlx/ops.cpp agrees with the CPU kernel.
 *
 * Layers, as in dtype.c.  The _ref functions are plain C written from the
 * spec: a group is widened with dtype.c's reference, its min and max found,
 * affine_group_params run, and each value divided and rounded one at a time
 * and packed through a 64-bit bit-stream accumulator.  The dispatched
 * functions use the kernel set chosen once per process (kernels.c: "avx512",
 * "avx2" or "scalar", whose row kernel is the reference); the vector row
 * kernels (affine_x86.c) reach the same bits by other routes, which is what
 * makes the agreement tests worth running.
 *
 * Floating-point contraction: the dequantization product and sum are kept in
 * separate statements (and separate intrinsics) so no compiler fuses them.
 */
#include "forge/format/quant/quant.h"
#include "forge/format/quant/kernels.h"
#include "forge/core/bytes.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Groups quantized per call of a row kernel: bounds the stack buffers of
 * scales and biases that are narrowed to the storage dtype afterwards. */
#define GROUPS_PER_CHUNK 64

/* ---- parameters ------------------------------------------------------------- */

static const int affine_bits[] = { 2, 3, 4, 5, 6, 8 };
static const int affine_groups[] = { 32, 64, 128 };

static bool int_in(int v, const int *set, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (set[i] == v)
			return true;
	return false;
}

static bool affine_bits_ok(int bits)
{
	return int_in(bits, affine_bits, sizeof(affine_bits) / sizeof(affine_bits[0]));
}

size_t fg_quant_affine_row_words(size_t cols, int bits)
{
	if (!affine_bits_ok(bits))
		return 0;
	return cols / 32 * (size_t)bits + cols % 32 * (size_t)bits / 32;
}

int fg_quant_affine_check(size_t rows, size_t cols, int bits, int group, struct fg_err *err)
{
	if (!affine_bits_ok(bits))
		return fg_err_set(err, FG_EINPUT,
				  "affine quantization: %d bits not supported (2, 3, 4, 5, 6 or 8)", bits);
	if (!int_in(group, affine_groups, sizeof(affine_groups) / sizeof(affine_groups[0])))
		return fg_err_set(err, FG_EINPUT,
				  "affine quantization: group size %d not supported (32, 64 or 128)", group);
	if (cols % (size_t)group)
		return fg_err_set(err, FG_EINPUT,
				  "affine quantization: weight [%zu, %zu] has %zu columns, not a multiple of the group size %d",
				  rows, cols, cols, group);
	/* Implied by the above (group is a multiple of 32); kept as the rule. */
	if (cols % 32 * (size_t)bits % 32)
		return fg_err_set(err, FG_EINPUT,
				  "affine quantization: weight [%zu, %zu] at %d bits does not fill whole uint32 words",
				  rows, cols, bits);
	return 0;
}

/* rows * cols elements of elem bytes fit in size_t (so every offset does);
 * shared with mxfp4.c and fp8.c. */
int fg_qk_check_size(const char *what, size_t rows, size_t cols, size_t elem, struct fg_err *err)
{
	if (cols && rows > SIZE_MAX / cols / elem)
		return fg_err_set(err, FG_EINPUT, "%s: weight [%zu, %zu] is too large to address", what,
				  rows, cols);
	return 0;
}

/* Shared with mxfp4.c. */
bool fg_qk_dtype_is_param(enum fg_dtype dt)
{
	return dt == FG_DT_F32 || dt == FG_DT_F16 || dt == FG_DT_BF16;
}

/* ---- affine: the reference ------------------------------------------------- */

/*
 * Scale and bias of a group from its min and max (both finite), as MLX's CPU
 * kernel computes them; returns FG_EINPUT when max - min overflows F32, which would
 * make the scale infinite.  std::max(x, eps) returns eps only when x < eps,
 * hence the comparison (x is never NaN here).  The vector kernels compute the
 * same steps in the lanes of a vector, one group per lane (affine_x86.c).
 */
static int affine_group_params(float wmin, float wmax, float n_bins, float *scale, float *bias)
{
	float range = wmax - wmin;
	float s, edge, q0;
	bool low_edge;

	if (!isfinite(range))
		return FG_EINPUT;
	s = range / n_bins;
	if (s < FG_QK_AFFINE_EPS)
		s = FG_QK_AFFINE_EPS;
	low_edge = fabsf(wmin) > fabsf(wmax);
	if (!low_edge)
		s = -s;
	edge = low_edge ? wmin : wmax;
	q0 = rintf(edge / s);
	if (q0 != 0.0f) {
		s = edge / q0;
		*bias = edge;
	} else {
		*bias = 0.0f;
	}
	*scale = s;
	return 0;
}

/*
 * The reference row kernel (the contract is in kernels.h): the spec one
 * element at a time.  The packed words come from one bit stream per call (a
 * group's bits always end on a word boundary, so calls can start anywhere a
 * group starts).
 */
int fg_qk_affine_row_ref(enum fg_dtype dt, const unsigned char *src, size_t n_groups, int bits,
			 int group, unsigned char *packed, float *scales, float *biases, size_t *bad)
{
	const float n_bins = (float)((1 << bits) - 1);
	const size_t esz = fg_dtype_size(dt), gsz = (size_t)group;
	float x[FG_QK_AFFINE_MAX_GROUP];
	uint64_t stream = 0;
	size_t g, j, word = 0;
	int stream_bits = 0;

	for (g = 0; g < n_groups; g++) {
		float wmin = INFINITY, wmax = -INFINITY, s, b;

		fg_dtype_to_f32_ref(dt, src + g * gsz * esz, x, gsz);
		for (j = 0; j < gsz; j++) {
			if (!isfinite(x[j])) {
				*bad = g * gsz + j;
				return FG_QK_ROW_NONFINITE;
			}
			if (x[j] > wmax)
				wmax = x[j];
			if (x[j] < wmin)
				wmin = x[j];
		}
		if (affine_group_params(wmin, wmax, n_bins, &s, &b) < 0) {
			*bad = g * gsz;
			return FG_QK_ROW_RANGE;
		}
		scales[g] = s;
		biases[g] = b;
		for (j = 0; j < gsz; j++) {
			float q = rintf((x[j] - b) / s);

			if (q < 0.0f)
				q = 0.0f;
			if (q > n_bins)
				q = n_bins;
			stream |= (uint64_t)q << stream_bits;
			stream_bits += bits;
			if (stream_bits >= 32) {
				fg_store_u32(packed + 4 * word++, (uint32_t)stream);
				stream >>= 32;
				stream_bits -= 32;
			}
		}
	}
	return 0;
}

/* ---- affine: row drivers ---------------------------------------------------- */

/* What affine_run checks before it writes: the quant.h rules on the tensor. */
static int affine_args(enum fg_dtype dt, const void *w, size_t rows, size_t cols, int bits, int group,
		       const void *packed, const void *scales, const void *biases, enum fg_dtype param_dt,
		       struct fg_err *err)
{
	int rc;

	if (!fg_qk_dtype_is_param(dt) || !fg_qk_dtype_is_param(param_dt))
		return fg_err_set(err, FG_EUSAGE, "affine quantization: weights of dtype %s not supported (F32, F16 or BF16)",
				  fg_dtype_name(dt));
	rc = fg_quant_affine_check(rows, cols, bits, group, err);
	if (rc)
		return rc;
	rc = fg_qk_check_size("affine quantization", rows, cols, 4, err);
	if (rc)
		return rc;
	if (rows && cols && (!w || !packed || !scales || !biases))
		return fg_err_set(err, FG_EUSAGE, "affine quantization: NULL buffer");
	return 0;
}

/*
 * Quantize rows of dt weights; scales and biases are written as param_dt.
 * Parameter checks come before the first write; a non-finite weight or an
 * overflowing group stops the band where it is met.  The band's first row
 * is row row_base of the tensor, for the messages.
 */
static int affine_run(const struct fg_qk_kernels *ks, enum fg_dtype dt, const void *w, size_t rows,
		      size_t cols, int bits, int group, uint32_t *packed, void *scales, void *biases,
		      enum fg_dtype param_dt, size_t row_base, struct fg_err *err)
{
	const unsigned char *src = w;
	unsigned char *pk = (unsigned char *)packed, *sc = scales, *bi = biases;
	size_t esz, psz, words, gpr, r, g0, ng, bad = 0;
	float sbuf[GROUPS_PER_CHUNK], bbuf[GROUPS_PER_CHUNK];
	int rc;

	rc = affine_args(dt, w, rows, cols, bits, group, packed, scales, biases, param_dt, err);
	if (rc || !rows || !cols)
		return rc;
	esz = fg_dtype_size(dt);
	psz = fg_dtype_size(param_dt);
	words = fg_quant_affine_row_words(cols, bits);
	gpr = cols / (size_t)group;
	for (r = 0; r < rows; r++) {
		for (g0 = 0; g0 < gpr; g0 += ng) {
			size_t col0 = g0 * (size_t)group;

			ng = gpr - g0 < GROUPS_PER_CHUNK ? gpr - g0 : GROUPS_PER_CHUNK;
			rc = ks->affine_row(dt, src + (r * cols + col0) * esz, ng, bits, group,
					    pk + 4 * (r * words + col0 / 32 * (size_t)bits), sbuf, bbuf, &bad);
			if (rc == FG_QK_ROW_NONFINITE)
				return fg_err_set(err, FG_EINPUT,
						  "affine quantization: non-finite weight at row %zu, column %zu",
						  row_base + r, col0 + bad);
			if (rc)
				return fg_err_set(err, FG_EINPUT,
						  "affine quantization: group at row %zu, columns %zu-%zu spans more than the F32 range",
						  row_base + r, col0 + bad, col0 + bad + (size_t)group - 1);
			ks->from_f32(param_dt, sbuf, sc + (r * gpr + g0) * psz, ng);
			ks->from_f32(param_dt, bbuf, bi + (r * gpr + g0) * psz, ng);
		}
	}
	return 0;
}

/* The band entry points of the threaded driver (kernels.h); scales and
 * biases are stored as dt, as fg_quant_affine_rows_dt stores them. */
int fg_qk_affine_check_all(enum fg_dtype dt, const void *w, size_t rows, size_t cols, int bits,
			   int group, const void *packed, const void *scales, const void *biases,
			   struct fg_err *err)
{
	return affine_args(dt, w, rows, cols, bits, group, packed, scales, biases, dt, err);
}

int fg_qk_affine_band(const struct fg_qk_kernels *ks, enum fg_dtype dt, const void *w, size_t rows,
		      size_t cols, int bits, int group, uint32_t *packed, void *scales, void *biases,
		      size_t row_base, struct fg_err *err)
{
	return affine_run(ks, dt, w, rows, cols, bits, group, packed, scales, biases, dt, row_base, err);
}

int fg_quant_affine_rows(const float *w, size_t rows, size_t cols, int bits, int group,
			 uint32_t *packed, float *scales, float *biases, struct fg_err *err)
{
	return affine_run(fg_qk_dispatch(), FG_DT_F32, w, rows, cols, bits, group, packed, scales, biases,
			  FG_DT_F32, 0, err);
}

int fg_quant_affine_rows_ref(const float *w, size_t rows, size_t cols, int bits, int group,
			     uint32_t *packed, float *scales, float *biases, struct fg_err *err)
{
	return affine_run(&fg_qk_kernels_ref, FG_DT_F32, w, rows, cols, bits, group, packed, scales, biases,
			  FG_DT_F32, 0, err);
}

int fg_quant_affine_rows_dt(enum fg_dtype dt, const void *w, size_t rows, size_t cols, int bits,
			    int group, uint32_t *packed, void *scales, void *biases, struct fg_err *err)
{
	return affine_run(fg_qk_dispatch(), dt, w, rows, cols, bits, group, packed, scales, biases, dt, 0, err);
}

int fg_quant_affine_rows_dt_ref(enum fg_dtype dt, const void *w, size_t rows, size_t cols, int bits,
				int group, uint32_t *packed, void *scales, void *biases,
				struct fg_err *err)
{
	return affine_run(&fg_qk_kernels_ref, dt, w, rows, cols, bits, group, packed, scales, biases, dt, 0, err);
}

/* ---- affine: dequantization ---------------------------------------------------- */

static int affine_dequant_run(enum fg_dtype dt, const uint32_t *packed, const void *scales,
			      const void *biases, size_t rows, size_t cols, int bits, int group,
			      float *out, struct fg_err *err)
{
	const unsigned char *pk = (const unsigned char *)packed, *sc = scales, *bi = biases;
	unsigned char *dst = (unsigned char *)out;
	const uint32_t mask = (1u << bits) - 1u;
	float sbuf[GROUPS_PER_CHUNK], bbuf[GROUPS_PER_CHUNK];
	size_t psz, words, gpr, r, g0, ng, c;
	int rc;

	if (!fg_qk_dtype_is_param(dt))
		return fg_err_set(err, FG_EUSAGE, "affine dequantization: scales of dtype %s not supported (F32, F16 or BF16)",
				  fg_dtype_name(dt));
	rc = fg_quant_affine_check(rows, cols, bits, group, err);
	if (rc)
		return rc;
	rc = fg_qk_check_size("affine dequantization", rows, cols, 4, err);
	if (rc)
		return rc;
	if (!rows || !cols)
		return 0;
	if (!packed || !scales || !biases || !out)
		return fg_err_set(err, FG_EUSAGE, "affine dequantization: NULL buffer");
	psz = fg_dtype_size(dt);
	words = fg_quant_affine_row_words(cols, bits);
	gpr = cols / (size_t)group;
	for (r = 0; r < rows; r++) {
		const unsigned char *row = pk + 4 * r * words;

		for (g0 = 0; g0 < gpr; g0 += ng) {
			ng = gpr - g0 < GROUPS_PER_CHUNK ? gpr - g0 : GROUPS_PER_CHUNK;
			fg_dtype_to_f32(dt, sc + (r * gpr + g0) * psz, sbuf, ng);
			fg_dtype_to_f32(dt, bi + (r * gpr + g0) * psz, bbuf, ng);
			for (c = g0 * (size_t)group; c < (g0 + ng) * (size_t)group; c++) {
				size_t pos = c * (size_t)bits, gi = c / (size_t)group - g0;
				unsigned sh = (unsigned)(pos & 31);
				uint32_t v = fg_load_u32(row + 4 * (pos >> 5)) >> sh;
				float t;

				if (sh + (unsigned)bits > 32)
					v |= fg_load_u32(row + 4 * (pos >> 5) + 4) << (32 - sh);
				t = sbuf[gi] * (float)(v & mask);
				fg_store_f32(dst + 4 * (r * cols + c), t + bbuf[gi]);
			}
		}
	}
	return 0;
}

int fg_dequant_affine_rows(const uint32_t *packed, const float *scales, const float *biases,
			   size_t rows, size_t cols, int bits, int group, float *out,
			   struct fg_err *err)
{
	return affine_dequant_run(FG_DT_F32, packed, scales, biases, rows, cols, bits, group, out, err);
}

int fg_dequant_affine_rows_dt(enum fg_dtype dt, const uint32_t *packed, const void *scales,
			      const void *biases, size_t rows, size_t cols, int bits, int group,
			      float *out, struct fg_err *err)
{
	return affine_dequant_run(dt, packed, scales, biases, rows, cols, bits, group, out, err);
}
