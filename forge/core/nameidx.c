/*
 * nameidx.c: the name index declared in nameidx.h.
 */
#include "forge/core/nameidx.h"

#include "forge/core/error.h"
#include "forge/core/str.h"

#include <stdlib.h>
#include <string.h>

static size_t slot_of(const struct fg_nameidx *x, const char *key)
{
	size_t s = fg_hash_bytes(key, strlen(key)) & x->mask;

	while (x->slot[s].key && strcmp(x->slot[s].key, key) != 0)
		s = (s + 1) & x->mask;
	return s;
}

int fg_nameidx_get(const struct fg_nameidx *x, const char *key, uintptr_t *val)
{
	size_t s;

	if (!x->slot)
		return 0;
	s = slot_of(x, key);
	if (!x->slot[s].key)
		return 0;
	*val = x->slot[s].val;
	return 1;
}

int fg_nameidx_put(struct fg_nameidx *x, const char *key, uintptr_t val, uintptr_t *had)
{
	size_t s;

	if (!x->slot || (x->n + 1) * 3 >= (x->mask + 1) * 2) {
		struct fg_nameidx grown = { .mask = x->slot ? 2 * x->mask + 1 : 63, .n = x->n };

		if (!(grown.slot = calloc(grown.mask + 1, sizeof(*grown.slot))))
			return FG_ENOMEM;
		for (size_t i = 0; x->slot && i <= x->mask; i++)
			if (x->slot[i].key)
				grown.slot[slot_of(&grown, x->slot[i].key)] = x->slot[i];
		free(x->slot);
		*x = grown;
	}
	s = slot_of(x, key);
	if (x->slot[s].key) {
		if (had)
			*had = x->slot[s].val;
		return 1;
	}
	x->slot[s] = (struct fg_nameidx_slot){ key, val };
	x->n++;
	return 0;
}

void fg_nameidx_free(struct fg_nameidx *x)
{
	if (!x)
		return;
	free(x->slot);
	*x = (struct fg_nameidx){ 0 };
}
