/*
 * bytes.h: loads and stores of scalars at any alignment, and float <-> bit
 * pattern casts, for the numeric modules (dtype, quant).  Tensor data sits at
 * arbitrary offsets inside a mapping, so no pointer there may be cast to a
 * wider type and dereferenced; memcpy of a fixed size compiles to one move.
 * Internal to forge/: static inline, no symbols.
 */
#ifndef FG_BYTES_H
#define FG_BYTES_H

#include <stdint.h>
#include <string.h>

static inline uint32_t fg_f32_bits(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	return x;
}

static inline float fg_bits_f32(uint32_t x)
{
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

static inline uint16_t fg_load_u16(const unsigned char *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void fg_store_u16(unsigned char *p, uint16_t v)
{
	memcpy(p, &v, sizeof(v));
}

static inline uint32_t fg_load_u32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void fg_store_u32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, sizeof(v));
}

static inline float fg_load_f32(const unsigned char *p)
{
	float v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void fg_store_f32(unsigned char *p, float v)
{
	memcpy(p, &v, sizeof(v));
}

#endif
