/*
 * dtype.h: the element types safetensors files carry, their sizes and names,
 * and conversion of the float types to and from F32.
 *
 * Every conversion has a scalar reference path (fg_*_ref, plain C on bit
 * patterns) and a dispatching bulk path that uses F16C / AVX2 / AVX-512 where
 * the CPU has them (checked once at run time).  The two agree bit for bit; the
 * tests check every 16-bit and 8-bit code.  Narrowing rounds to nearest, ties
 * to even.  F8_E4M3 is the E4M3FN variant: no infinity, finite values above
 * 448 and infinities saturate to +-448, NaN maps to 0x7f (sign kept).
 * F8_E5M2 has infinities and overflows to them.  NaN inputs stay NaN (quiet).
 * Source and destination pointers need no alignment (tensor data sits at
 * arbitrary offsets inside a mapping).
 */
#ifndef FG_DTYPE_H
#define FG_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "forge/core/error.h"

enum fg_dtype {
	FG_DT_F64,
	FG_DT_F32,
	FG_DT_F16,
	FG_DT_BF16,
	FG_DT_I64,
	FG_DT_I32,
	FG_DT_I16,
	FG_DT_I8,
	FG_DT_U64,
	FG_DT_U32,
	FG_DT_U16,
	FG_DT_U8,
	FG_DT_BOOL,
	FG_DT_F8_E4M3,
	FG_DT_F8_E5M2,
	FG_DT_COUNT
};

/* Size in bytes of one element. */
size_t fg_dtype_size(enum fg_dtype dt);

/* The safetensors name ("BF16"); never NULL for a valid dtype. */
const char *fg_dtype_name(enum fg_dtype dt);

/* Parse a safetensors dtype name.  Returns 0 and sets *out, or FG_EINPUT if unknown (or NULL). */
int fg_dtype_parse(const char *name, enum fg_dtype *out);

/* True for F64 F32 F16 BF16 F8_E4M3 F8_E5M2. */
bool fg_dtype_is_float(enum fg_dtype dt);

/* Scalar reference conversions on bit patterns. */
float fg_bf16_to_f32_ref(uint16_t h);
uint16_t fg_f32_to_bf16_ref(float f);
float fg_f16_to_f32_ref(uint16_t h);
uint16_t fg_f32_to_f16_ref(float f);
float fg_e4m3_to_f32_ref(uint8_t b);
uint8_t fg_f32_to_e4m3_ref(float f);
float fg_e5m2_to_f32_ref(uint8_t b);
uint8_t fg_f32_to_e5m2_ref(float f);

/*
 * Bulk conversion of n elements of dt at src (any alignment) to F32 at dst.
 * dt must be a float dtype (F64 is narrowed with C's double->float rounding).
 * Returns 0, or FG_EINPUT for a non-float dtype.  Uses the fastest path the CPU has.
 */
int fg_dtype_to_f32(enum fg_dtype dt, const void *src, float *dst, size_t n);

/* Bulk conversion of n F32 values to dt at dst (any alignment).  Same rules. */
int fg_dtype_from_f32(enum fg_dtype dt, const float *src, void *dst, size_t n);

/* The same two, forced onto the scalar reference path (tests, benchmarks). */
int fg_dtype_to_f32_ref(enum fg_dtype dt, const void *src, float *dst, size_t n);
int fg_dtype_from_f32_ref(enum fg_dtype dt, const float *src, void *dst, size_t n);

/* Read element i of a float tensor as a double (any dtype of fg_dtype_is_float). */
double fg_dtype_load_f64(enum fg_dtype dt, const void *base, size_t i);

/* Which vectorized path the bulk functions use on this CPU ("avx512", "avx2+f16c", "scalar"). */
const char *fg_dtype_simd_path(void);

#endif
