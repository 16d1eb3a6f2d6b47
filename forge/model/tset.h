/*
 * tset.h: tensor sets and the statistics of their norm tensors.
 *
 * A tensor set is the group of tensors a runtime loads together and whose
 * norms must share one convention: the trunk, the head embedded in the
 * shards, or a sidecar head.  For each set this module keeps its tensors
 * (borrowed views) and the statistics of every norm tensor, computed in F64
 * from the norm tensors' own bytes only.
 */
#ifndef FG_TSET_H
#define FG_TSET_H

#include <stddef.h>

#include "forge/core/error.h"
#include "forge/model/family.h"
#include "forge/format/safetensors.h"
#include "forge/model/stats.h"

/*
 * The largest norm forged reads: a norm is a vector of hidden-size floats
 * (8,192 in the largest models shipped; 2^20 leaves room for any), so a
 * "norm" beyond it is malformed (never read: a 1 TiB sparse one would be
 * read whole) and counted in n_bad_norms.
 */
#define FG_NORM_MAX_ELEMS (1u << 20)

struct fg_norm {
	const struct fg_tensor *t;   /* borrowed */
	const char *file;            /* borrowed: the file holding it */
	enum fg_name_norm cls;
	struct fg_tstats st;
	int all_zero;                /* every element is exactly 0 */
};

struct fg_tset {
	char *name;                  /* "trunk", "mtp", "mtp_embedded", "sidecar:FILE" (owned, whole) */
	const char *file;            /* the sidecar's file for sidecar sets, else NULL */
	size_t n_tensors;
	const struct fg_tensor **tensors;  /* borrowed views, in discovery order */
	size_t n_norms;
	struct fg_norm *norms;
	size_t n_quantized;          /* quantized modules of any format (qmods.h; inspect counts them,
				      * fg_tset_measure leaves 0) */
	size_t n_bad_norms;          /* norm-named tensors that are not 1-D float, are larger than
				      * FG_NORM_MAX_ELEMS, or whose bytes were not read */
	const char *bad_norm;        /* the first of them */
	/* private */
	size_t cap;
	struct fg_tset_run *runs;    /* the files of the tensors, by runs (fg_tset_file) */
	size_t n_runs, cap_runs;
};

/* Tensors [from, the next run's from) of a set come from file (tensors are added file by file). */
struct fg_tset_run {
	size_t from;
	const char *file;
};

/*
 * Set up s as an empty set called name (copied whole, however long).  0, or
 * FG_ENOMEM with s zeroed (releasing it then is a no-op).  Release with
 * fg_tset_release, which accepts NULL and a zeroed set.
 */
int fg_tset_init(struct fg_tset *s, const char *name, struct fg_err *err);
void fg_tset_release(struct fg_tset *s);

/* The file of s->tensors[i] (i < s->n_tensors), as it was given to fg_tset_add.  O(log files). */
const char *fg_tset_file(const struct fg_tset *s, size_t i);

/* Add a tensor (borrowed, with its file's name, also borrowed) to the set. */
int fg_tset_add(struct fg_tset *s, const struct fg_tensor *t, const char *file,
		struct fg_err *err);

/*
 * Find the norms among the set's tensors and compute their statistics.
 * Only norm tensors' bytes are read.  Norm-named tensors that are not 1-D
 * float are counted in n_bad_norms and skipped.
 */
int fg_tset_measure(struct fg_tset *s, struct fg_err *err);

/* The set's norm called name, or NULL. */
const struct fg_norm *fg_tset_norm(const struct fg_tset *s, const char *name);

#endif
