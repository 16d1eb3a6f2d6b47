/*
 * rng.h: a reproducible pseudo-random source for the numeric tests
 * (xorshift64*, fixed seed), so a failing input can be found again.
 */
#ifndef FG_TEST_RNG_H
#define FG_TEST_RNG_H

#include <stdint.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng_u32(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

#endif
