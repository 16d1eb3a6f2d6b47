/*
 * tset.c: tensor sets and norm statistics (see tset.h).
 */
#include "forge/model/tset.h"

#include "forge/core/str.h"
#include "forge/core/grow.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fg_tset_init(struct fg_tset *s, const char *name, struct fg_err *err)
{
	memset(s, 0, sizeof(*s));
	if (!(s->name = strdup(name)))
		return fg_err_set(err, FG_ENOMEM, "out of memory for tensor set '%.100s'", name);
	return 0;
}

void fg_tset_release(struct fg_tset *s)
{
	if (!s)
		return;
	free(s->name);
	free(s->tensors);
	free(s->runs);
	free(s->norms);
	memset(s, 0, sizeof(*s));
}

int fg_tset_add(struct fg_tset *s, const struct fg_tensor *t, const char *file,
		struct fg_err *err)
{
	/* A file per run of tensors, not per tensor: a trunk of 400,000 tensors comes from a few dozen files. */
	int new_run = !s->n_runs || s->runs[s->n_runs - 1].file != file;

	if (FG_GROW(s->tensors, s->n_tensors + 1, s->cap) ||
	    (new_run && FG_GROW(s->runs, s->n_runs + 1, s->cap_runs)))
		return fg_err_set(err, FG_ENOMEM, "out of memory for tensor set '%s'", s->name);
	if (new_run)
		s->runs[s->n_runs++] = (struct fg_tset_run){ s->n_tensors, file };
	s->tensors[s->n_tensors++] = t;
	return 0;
}

const char *fg_tset_file(const struct fg_tset *s, size_t i)
{
	size_t lo = 0, hi = s->n_runs; /* the last run whose from <= i is in [lo, hi) */

	assert(i < s->n_tensors && s->n_runs);
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->runs[mid].from <= i)
			lo = mid;
		else
			hi = mid;
	}
	return s->runs[lo].file;
}

int fg_tset_measure(struct fg_tset *s, struct fg_err *err)
{
	size_t n = 0;

	for (size_t i = 0; i < s->n_tensors; i++)
		n += fg_tensor_norm_class(s->tensors[i]) != FG_NAME_NOT_NORM;
	free(s->norms);
	s->norms = calloc(n ? n : 1, sizeof(*s->norms));
	if (!s->norms)
		return fg_err_set(err, FG_ENOMEM, "out of memory for the norms of set '%s'", s->name);
	s->n_norms = s->n_quantized = s->n_bad_norms = 0;
	s->bad_norm = NULL;
	for (size_t i = 0; i < s->n_tensors; i++) {
		const struct fg_tensor *t = s->tensors[i];
		enum fg_name_norm cls = fg_tensor_norm_class(t);
		struct fg_norm *nm;

		if (cls == FG_NAME_NOT_NORM)
			continue;
		if (t->rank != 1 || !fg_dtype_is_float(t->dtype) || fg_tensor_nelem(t) > FG_NORM_MAX_ELEMS || (!t->data && fg_tensor_nelem(t))) {
			if (!s->n_bad_norms++)
				s->bad_norm = t->name;
			continue;
		}
		nm = &s->norms[s->n_norms++];
		nm->t = t;
		nm->file = fg_tset_file(s, i);
		nm->cls = cls;
		fg_tstats_compute(t, &nm->st);
		nm->all_zero = nm->st.nonfinite == 0 && nm->st.count > 0 &&
			       nm->st.min == 0.0 && nm->st.max == 0.0;
	}
	return 0;
}

const struct fg_norm *fg_tset_norm(const struct fg_tset *s, const char *name)
{
	for (size_t i = 0; i < s->n_norms; i++)
		if (strcmp(s->norms[i].t->name, name) == 0)
			return &s->norms[i];
	return NULL;
}
