/*
 * nameidx.h: a name -> value index for lookups by name inside loops over
 * tensors, modules or records (docs/architecture.md, "Work per item, never
 * per pair").  Open addressing over borrowed NUL-terminated keys, kept under
 * two-thirds full; the first value put under a name stays.  Zeroed is empty.
 */
#ifndef FG_NAMEIDX_H
#define FG_NAMEIDX_H

#include <stddef.h>
#include <stdint.h>

struct fg_nameidx_slot {
	const char *key;   /* borrowed: must outlive the index; NULL: empty */
	uintptr_t val;
};

struct fg_nameidx {
	struct fg_nameidx_slot *slot;
	size_t mask;       /* slots - 1, 0 before the first put */
	size_t n;
};

/*
 * Put key -> val unless key is there: 0 when it was added, 1 when it was
 * there (*had, when not NULL, gets its value), FG_ENOMEM (the index is as
 * it was).
 */
int fg_nameidx_put(struct fg_nameidx *x, const char *key, uintptr_t val, uintptr_t *had);

/* The value under key in *val: 1, else 0. */
int fg_nameidx_get(const struct fg_nameidx *x, const char *key, uintptr_t *val);

void fg_nameidx_free(struct fg_nameidx *x); /* NULL allowed; leaves it empty */

#endif
