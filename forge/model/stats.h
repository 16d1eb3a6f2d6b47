/*
 * stats.h: summary statistics of one float tensor, computed in F64.
 *
 * Used by `forged tensors` for every float tensor and by the norm analysis
 * for every norm tensor; reads only the tensor's own bytes.
 */
#ifndef FG_STATS_H
#define FG_STATS_H

#include <stdint.h>

#include "forge/format/safetensors.h"

struct fg_tstats {
	uint64_t count;      /* elements */
	uint64_t nonfinite;  /* NaN and infinities, excluded from the figures below */
	uint64_t n_one;      /* elements exactly equal to 1.0 */
	int has_finite;      /* 0 when every element is non-finite (or none exist) */
	double min, max, mean, std; /* over finite elements; std is the population std */
};

/*
 * Compute statistics of t, whose dtype must be a float type and whose data
 * must be mapped.  Returns 0, or FG_EUSAGE for a non-float or unmapped tensor.
 */
int fg_tstats_compute(const struct fg_tensor *t, struct fg_tstats *out);

#endif
