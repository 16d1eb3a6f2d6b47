/*
 * dq_internal.h: internal to forge/format/quant/, shared by the dequantizers
 * of dequant.h (gptq.c, awq.c, ctensors.c, nvfp4.c, mlx_fp.c, qformat.c);
 * nothing outside this folder includes it.  Names are dq_* / DQ_*.
 *
 * What they share: tensor lookups with dtype and shape checks whose messages
 * name the role and both shapes, overflow-checked counts, exact widening of
 * scale elements, the LSB-first bit stream reader, small-float tables, the
 * band check, the output sink (F32 or BF16), and the refusal message.
 */
#ifndef FG_DQ_INTERNAL_H
#define FG_DQ_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "forge/core/bytes.h"
#include "forge/core/error.h"
#include "forge/format/dtype.h"
#include "forge/format/quant/dequant.h"

/* Room for a rendered shape such as "[7168, 2048]" (longer ranks are cut with "..."). */
#define DQ_SHAPE_MAX 96

/* Where a dequantizer writes: F32 or BF16 values at any alignment. */
struct dq_out {
	unsigned char *p;
	bool bf16;
};

static inline void dq_put(struct dq_out o, size_t i, float v)
{
	if (o.bf16)
		fg_store_u16(o.p + 2 * i, fg_f32_to_bf16_ref(v));
	else
		fg_store_f32(o.p + 4 * i, v);
}

/* A little-endian uint32 word i of base. */
static inline uint32_t dq_word(const unsigned char *base, size_t i)
{
	return fg_load_u32(base + 4 * i);
}

/*
 * Value k (bits wide, 1 <= bits <= 8) of an LSB-first bit stream whose
 * 32-bit word j sits at base + j * stride: stream bit n is bit n % 32 of
 * word n / 32.  A value may straddle two words.
 */
static inline uint32_t dq_stream(const unsigned char *base, size_t stride, size_t k, int bits)
{
	size_t bit = k * (size_t)bits, j = bit / 32;
	unsigned sh = (unsigned)(bit % 32);
	uint64_t v = fg_load_u32(base + j * stride);

	if (sh + (unsigned)bits > 32)
		v |= (uint64_t)fg_load_u32(base + (j + 1) * stride) << 32;
	return (uint32_t)(v >> sh) & ((1u << bits) - 1u);
}

/* E2M1 code (0..15) as F32: the sign bit is kept, so code 8 is -0. */
float dq_e2m1(unsigned code);

/* E8M0 byte as F32: 2^(b - 127), byte 0 is 2^-127; 255 must be refused by the caller. */
float dq_e8m0(uint8_t b);

/* Element i of a float tensor of dtype dt (F32, F16, BF16, F8_E4M3) widened exactly. */
float dq_load_float(enum fg_dtype dt, const unsigned char *base, size_t i);

/* ceil(a / b), b > 0. */
static inline size_t dq_ceil_div(size_t a, size_t b)
{
	return a / b + (a % b != 0);
}

/* "[a, b]" of a tensor into buf; returns buf. */
const char *dq_shape(const struct fg_tensor *t, char *buf, size_t len);

/* The element count of t, overflow-checked against its dtype's size; FG_EINPUT naming role. */
int dq_count(const char *fmt, const char *role, const struct fg_tensor *t, size_t *n,
	     struct fg_err *err);

/* The tensor of role r, or NULL. */
static inline const struct fg_tensor *dq_get(const struct fg_qmodule *m, enum fg_qrole r)
{
	return m->t[r];
}

/*
 * Role r must be present (else FG_EINPUT "<fmt>: <role> is missing"), have
 * one of the n dtypes in dts (else a message naming the dtype and those
 * allowed) and rank `rank` (-1: any), and its element count must fit; dims
 * receives the shape as size_t (rank entries).
 */
int dq_need(const char *fmt, const struct fg_qmodule *m, enum fg_qrole r, const enum fg_dtype *dts,
	    size_t n, int rank, size_t *dims, struct fg_err *err);

/* Every role not in the allowed list (and not bias / input_scale) must be absent. */
int dq_only(const char *fmt, const struct fg_qmodule *m, const enum fg_qrole *allowed, size_t n,
	    struct fg_err *err);

/* A present bias must be a float [out] (never read). */
int dq_bias(const char *fmt, const struct fg_qmodule *m, size_t out, struct fg_err *err);

/*
 * FG_EINPUT "<fmt>: <role> <shape> does not fit <other> <shape>: expected
 * <want>" -- the mismatch message of every check.  want is printed as given.
 */
int dq_mismatch(struct fg_err *err, const char *fmt, enum fg_qrole role, const struct fg_qmodule *m,
		enum fg_qrole other, const char *want, ...) __attribute__((format(printf, 6, 7)));

/* FG_EINPUT "unsupported_quantization_format: <fg_qformat_name(f)>: <reason>". */
int dq_refuse(struct fg_err *err, const struct fg_qformat *f, const char *reason, ...)
	__attribute__((format(printf, 3, 4)));

/* Band [row0, row0 + n_rows) inside rows; out and every data pointer non-NULL when n_rows > 0. */
int dq_band(const char *fmt, size_t rows, size_t row0, size_t n_rows, const void *out,
	    struct fg_err *err);

/* The data of role r (FG_EUSAGE when a header-only view has none). */
int dq_data(const char *fmt, const struct fg_qmodule *m, enum fg_qrole r, const unsigned char **p,
	    struct fg_err *err);

/* FG_EINPUT unless every scale [i0, i0 + n) of role r (float dtype dt) is finite. */
int dq_scales_finite(const char *fmt, const struct fg_qmodule *m, enum fg_qrole r, enum fg_dtype dt,
		     const unsigned char *p, size_t i0, size_t n, size_t cols, struct fg_err *err);

/* out * in values of 4 bytes fit in size_t (every output offset does); FG_EINPUT otherwise. */
int dq_dims_fit(const char *fmt, size_t out, size_t in, struct fg_err *err);

/* a * b fits in size_t. */
static inline bool dq_mul_fits(size_t a, size_t b)
{
	return !a || b <= SIZE_MAX / a;
}

/* Words of n values of `bits` bits as one bitstream, rounded up: ceil(n * bits / 32), no overflow. */
static inline size_t dq_stream_words(size_t n, int bits)
{
	return n / 32 * (size_t)bits + (n % 32 * (size_t)bits + 31) / 32;
}

/* The float dtypes a scale may have. */
extern const enum fg_dtype dq_param_dtypes[3];

#endif
