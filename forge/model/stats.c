/*
 * stats.c: min, max, mean, std and non-finite counts of a float tensor.
 *
 * Elements are widened in chunks with the dtype module's bulk conversion (the
 * vectorized path) into a small stack buffer, so any tensor size costs a few
 * KB of memory; F64 tensors are read as doubles directly so no precision is
 * lost.  Sums use Welford's update, stable for the million-element tensors
 * of a real checkpoint.
 */
#include "forge/model/stats.h"

#include <math.h>
#include <string.h>

#define CHUNK 1024

static void add_value(struct fg_tstats *s, double v, double *m2, uint64_t *n)
{
	double delta;

	if (!isfinite(v)) {
		s->nonfinite++;
		return;
	}
	if (v == 1.0)
		s->n_one++;
	if (!*n || v < s->min)
		s->min = v;
	if (!*n || v > s->max)
		s->max = v;
	(*n)++;
	delta = v - s->mean;
	s->mean += delta / (double)*n;
	*m2 += delta * (v - s->mean);
}

int fg_tstats_compute(const struct fg_tensor *t, struct fg_tstats *out)
{
	struct fg_tstats s;
	float buf[CHUNK];
	uint64_t n = 0;
	double m2 = 0.0;
	size_t esize;

	if (!fg_dtype_is_float(t->dtype) || (!t->data && t->nelem))
		return FG_EUSAGE;
	memset(&s, 0, sizeof(s));
	s.count = t->nelem;
	esize = fg_dtype_size(t->dtype);
	for (uint64_t i = 0; i < t->nelem; i += CHUNK) {
		size_t len = t->nelem - i < CHUNK ? (size_t)(t->nelem - i) : CHUNK;
		const uint8_t *src = t->data + i * esize;

		if (t->dtype == FG_DT_F64) {
			for (size_t k = 0; k < len; k++)
				add_value(&s, fg_dtype_load_f64(t->dtype, src, k), &m2, &n);
			continue;
		}
		fg_dtype_to_f32(t->dtype, src, buf, len);
		for (size_t k = 0; k < len; k++)
			add_value(&s, (double)buf[k], &m2, &n);
	}
	s.has_finite = n > 0;
	s.std = n ? sqrt(m2 / (double)n) : 0.0;
	*out = s;
	return 0;
}
