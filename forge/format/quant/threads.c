/*
 * threads.c: the whole-tensor drivers of quant.h, which quantize a large
 * tensor as row bands on several threads.
 *
 * A job is one call: the tensor is checked whole (affine.c's and mxfp4.c's
 * checks, before anything is written), cut into contiguous bands of rows,
 * and each band handed to the row driver of its format (fg_qk_*_band,
 * kernels.h) with pointers to the band's first row and that row's index for
 * the messages.  Bands 1.. run on threads of their own, band 0 on the
 * caller's; all are joined before the call returns, and the first band in
 * row order that failed gives the error, so the error is the one a single
 * call on the whole tensor reports.  The kernel set is the process's
 * (kernels.c), the same for every band.  The input may be a mapped file
 * (a forge quantizes straight from the source): the bands on threads of
 * their own run under the SIGBUS guard (safetensors.h), so a file that
 * shrinks meanwhile fails the call instead of killing the process; band 0
 * runs under whatever guard its caller holds.
 */
#include "forge/format/quant/quant.h"
#include "forge/format/quant/kernels.h"
#include "forge/format/safetensors.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the default thread count ------------------------------------------------ */

static pthread_once_t threads_once = PTHREAD_ONCE_INIT;
static int threads_default = 1;

/* CPUs this process may run on (its affinity mask, else the online count). */
static long usable_cpus(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	return sysconf(_SC_NPROCESSORS_ONLN);
}

/* Runs once (pthread_once). */
static void threads_init(void)
{
	const char *v = getenv("FORGED_QUANT_THREADS");
	long cpus;

	if (v && *v) {
		char *end;
		long n = strtol(v, &end, 10);

		if (!*end && n >= 1 && n <= FG_QUANT_THREADS_MAX) {
			threads_default = (int)n;
			return;
		}
	}
	cpus = usable_cpus();
	threads_default = cpus >= 2 ? 2 : 1;
}

int fg_quant_threads(void)
{
	pthread_once(&threads_once, threads_init);
	return threads_default;
}

/* ---- jobs and bands ----------------------------------------------------------- */

struct job {
	bool mxfp4;
	enum fg_dtype dt;
	const unsigned char *w;
	size_t cols;
	int bits, group; /* affine only */
	unsigned char *packed, *scales, *biases;
};

struct band {
	const struct job *job;
	size_t row0, rows;
	int rc;
	struct fg_err err;
};

static void run_band(struct band *b)
{
	const struct job *j = b->job;
	const struct fg_qk_kernels *ks = fg_qk_dispatch();
	const size_t esz = fg_dtype_size(j->dt);
	const unsigned char *w = j->w + b->row0 * j->cols * esz;

	if (j->mxfp4) {
		b->rc = fg_qk_mxfp4_band(ks, j->dt, w, b->rows, j->cols,
					 (uint32_t *)(void *)(j->packed + b->row0 * (j->cols / 2)),
					 j->scales + b->row0 * (j->cols / FG_MXFP4_GROUP), b->row0, &b->err);
	} else {
		const size_t words = fg_quant_affine_row_words(j->cols, j->bits);
		const size_t gpr = j->cols / (size_t)j->group;

		b->rc = fg_qk_affine_band(ks, j->dt, w, b->rows, j->cols, j->bits, j->group,
					  (uint32_t *)(void *)(j->packed + b->row0 * words * 4),
					  j->scales + b->row0 * gpr * esz, j->biases + b->row0 * gpr * esz,
					  b->row0, &b->err);
	}
}

static int run_band_guarded(void *arg, struct fg_err *err)
{
	(void)err;
	run_band(arg);
	return 0;
}

static void *band_thread(void *arg)
{
	struct band *b = arg;
	struct fg_err gerr = { 0 };
	int rc = fg_st_guard(run_band_guarded, b, "the tensor being quantized", &gerr);

	if (rc) {
		b->rc = rc;
		b->err = gerr;
	}
	return NULL;
}

/* Run a checked job over rows rows (in_bytes of input) on up to threads threads. */
static int run_job(const struct job *j, size_t rows, size_t in_bytes, int threads, struct fg_err *err)
{
	struct band bands[FG_QUANT_THREADS_MAX];
	pthread_t tids[FG_QUANT_THREADS_MAX];
	bool started[FG_QUANT_THREADS_MAX];
	size_t n, i;

	if (threads <= 0)
		threads = fg_quant_threads();
	n = threads > FG_QUANT_THREADS_MAX ? FG_QUANT_THREADS_MAX : (size_t)threads;
	if (n > rows)
		n = rows;
	if (in_bytes < FG_QUANT_THREADS_MIN_BYTES || n < 2)
		n = 1;
	memset(bands, 0, n * sizeof(bands[0]));
	for (i = 0; i < n; i++) {
		bands[i].job = j;
		bands[i].row0 = rows / n * i + (i < rows % n ? i : rows % n);
		bands[i].rows = rows / n + (i < rows % n ? 1 : 0);
	}
	for (i = 1; i < n; i++)
		started[i] = pthread_create(&tids[i], NULL, band_thread, &bands[i]) == 0;
	/* Guarded here too: a SIGBUS must not leave this frame while the other bands still use it. */
	band_thread(&bands[0]);
	for (i = 1; i < n; i++) {
		if (started[i])
			pthread_join(tids[i], NULL);
		else
			band_thread(&bands[i]);
	}
	for (i = 0; i < n; i++) {
		if (bands[i].rc) {
			if (err)
				*err = bands[i].err;
			return bands[i].rc;
		}
	}
	return 0;
}

int fg_quant_affine_tensor_dt(enum fg_dtype dt, const void *w, size_t rows, size_t cols, int bits,
			      int group, uint32_t *packed, void *scales, void *biases, int threads,
			      struct fg_err *err)
{
	struct job j = { false, dt, w, cols, bits, group, (unsigned char *)packed, scales, biases };
	int rc = fg_qk_affine_check_all(dt, w, rows, cols, bits, group, packed, scales, biases, err);

	if (rc || !rows || !cols)
		return rc;
	return run_job(&j, rows, rows * cols * fg_dtype_size(dt), threads, err);
}

int fg_quant_mxfp4_tensor_dt(enum fg_dtype dt, const void *w, size_t rows, size_t cols,
			     uint32_t *packed, uint8_t *scales, int threads, struct fg_err *err)
{
	struct job j = { true, dt, w, cols, 0, 0, (unsigned char *)packed, scales, NULL };
	int rc = fg_qk_mxfp4_check_all(dt, w, rows, cols, packed, scales, err);

	if (rc || !rows || !cols)
		return rc;
	return run_job(&j, rows, rows * cols * fg_dtype_size(dt), threads, err);
}
