/*
 * stats.c: min, max, mean, std and non-finite counts of a float tensor.
 *
 * Elements are widened in chunks with the dtype module's bulk conversion (the
 * vectorized path) into a small stack buffer, so any tensor size costs a few
 * KB of memory; F64 tensors are read as doubles directly so no precision is
 * lost.  Each chunk is summarised in two passes over the buffer (its sum,
 * then its squared deviations from its own mean: no division per element)
 * and the chunks are merged with Chan, Golub and LeVeque's pairwise update,
 * stable for the million-element tensors of a real checkpoint.  (Welford's
 * update per element, used before, put a division on every element's
 * dependency chain: a third of a 10,000-tensor inspection's CPU.)
 */
#include "forge/model/stats.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#define CHUNK 1024

/* The running figures over the chunks merged so far. */
struct acc {
	uint64_t n;          /* finite elements */
	double mean, m2;     /* their mean and sum of squared deviations */
};

/*
 * The sum, extremes and count of ones of len floats, assuming every one is
 * finite: *ok is false when the sum says otherwise (a NaN or an infinity
 * makes it non-finite; floats cannot overflow a double's sum), and the
 * caller takes the careful path.
 */
static double sum_floats(const float *f, size_t len, double *lo, double *hi, uint64_t *ones, bool *ok)
{
	double sum = 0.0, l = (double)f[0], h = (double)f[0];
	uint64_t o = 0;

	for (size_t k = 0; k < len; k++) {
		double v = (double)f[k];

		sum += v;
		l = v < l ? v : l;
		h = v > h ? v : h;
		o += v == 1.0;
	}
	*lo = l;
	*hi = h;
	*ones = o;
	*ok = isfinite(sum);
	return sum;
}

/* Fold len elements (floats f, or doubles d) into s and a. */
static void add_chunk(struct fg_tstats *s, struct acc *a, const float *f, const double *d, size_t len)
{
	uint64_t n = 0, ones;
	double sum = 0.0, mean, m2 = 0.0, delta, lo = 0.0, hi = 0.0;
	bool plain = false;

	if (f && len) {
		/* The common case (a norm: finite floats) without a test per element. */
		sum = sum_floats(f, len, &lo, &hi, &ones, &plain);
		if (plain) {
			n = len;
			s->n_one += ones;
			mean = sum / (double)n;
			for (size_t k = 0; k < len; k++)
				m2 += ((double)f[k] - mean) * ((double)f[k] - mean);
			goto merge;
		}
		sum = 0.0;
	}
	for (size_t k = 0; k < len; k++) {
		double v = f ? (double)f[k] : d[k];

		if (!isfinite(v)) {
			s->nonfinite++;
			continue;
		}
		s->n_one += v == 1.0;
		if (!n || v < lo)
			lo = v;
		if (!n || v > hi)
			hi = v;
		sum += v;
		n++;
	}
	if (!n)
		return;
	mean = sum / (double)n;
	for (size_t k = 0; k < len; k++) {
		double v = f ? (double)f[k] : d[k];

		if (isfinite(v))
			m2 += (v - mean) * (v - mean);
	}
merge:
	if (!a->n || lo < s->min)
		s->min = lo;
	if (!a->n || hi > s->max)
		s->max = hi;
	delta = mean - a->mean;
	a->mean += delta * (double)n / (double)(a->n + n);
	a->m2 += m2 + delta * delta * (double)a->n * (double)n / (double)(a->n + n);
	a->n += n;
}

int fg_tstats_compute(const struct fg_tensor *t, struct fg_tstats *out)
{
	struct fg_tstats s;
	struct acc a = { 0, 0.0, 0.0 };
	float buf[CHUNK];
	double dbuf[CHUNK];
	size_t esize;

	uint64_t nelem = fg_tensor_nelem(t);

	if (!fg_dtype_is_float(t->dtype) || (!t->data && nelem))
		return FG_EUSAGE;
	memset(&s, 0, sizeof(s));
	s.count = nelem;
	esize = fg_dtype_size(t->dtype);
	for (uint64_t i = 0; i < nelem; i += CHUNK) {
		size_t len = nelem - i < CHUNK ? (size_t)(nelem - i) : CHUNK;
		const uint8_t *src = t->data + i * esize;

		if (t->dtype == FG_DT_F64) {
			for (size_t k = 0; k < len; k++)
				dbuf[k] = fg_dtype_load_f64(t->dtype, src, k);
			add_chunk(&s, &a, NULL, dbuf, len);
			continue;
		}
		fg_dtype_to_f32(t->dtype, src, buf, len);
		add_chunk(&s, &a, buf, NULL, len);
	}
	s.has_finite = a.n > 0;
	s.mean = a.mean;
	s.std = a.n ? sqrt(a.m2 / (double)a.n) : 0.0;
	*out = s;
	return 0;
}
