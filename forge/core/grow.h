/*
 * grow.h: the one way forged grows an array, in the spirit of git's
 * ALLOC_GROW.  Every growing array is a pointer plus a size_t capacity;
 * FG_GROW makes room for n elements, doubling from FG_GROW_FIRST so that
 * appending one element at a time stays amortized O(1), and checks the byte
 * count for overflow before realloc.  Internal to forged: static inline, no
 * symbols.
 *
 *	if ((rc = FG_GROW(list->v, list->n + 1, list->cap)))
 *		return fg_err_set(err, rc, "out of memory for ...");
 *	list->v[list->n++] = x;
 */
#ifndef FG_GROW_H
#define FG_GROW_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "forge/core/error.h"

#define FG_GROW_FIRST 16 /* elements of a first allocation */

/*
 * Make *(T **)pptr hold at least need elements of elem (> 0) bytes, *cap
 * being its capacity now.  Returns 0 (the array and *cap grown, or already large
 * enough) or FG_ENOMEM (out of memory or need * elem overflows; the array,
 * its contents and *cap are untouched).  Use FG_GROW rather than this.
 */
static inline int fg_grow_to(void *pptr, size_t elem, size_t need, size_t *cap)
{
	size_t ncap = *cap ? *cap : FG_GROW_FIRST;
	void *old, *p;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap = ncap <= SIZE_MAX / 2 ? 2 * ncap : need;
	if (ncap > SIZE_MAX / elem)
		ncap = need; /* the doubled byte count overflows: try the exact need */
	if (ncap > SIZE_MAX / elem)
		return FG_ENOMEM;
	/* The pointer is copied as bytes: a T * and a void * share one representation. */
	memcpy(&old, pptr, sizeof(old));
	p = realloc(old, ncap * elem);
	if (!p)
		return FG_ENOMEM;
	memcpy(pptr, &p, sizeof(p));
	*cap = ncap;
	return 0;
}

/*
 * Grow the array ptr (any T *, NULL when empty) to hold n elements; cap is
 * its size_t capacity.  Evaluates to 0 or FG_ENOMEM (ptr and cap untouched).
 * ptr and cap are evaluated more than once: pass plain lvalues.
 */
#define FG_GROW(ptr, n, cap) \
	((size_t)(n) <= (cap) ? 0 : fg_grow_to(&(ptr), sizeof(*(ptr)), (size_t)(n), &(cap)))

#endif
