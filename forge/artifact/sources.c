/*
 * sources.c: how the forge reads its source (internal.h): read-ahead advice
 * on the tensor ranges it streams, and the source files it opens itself so
 * the writer copies unchanged bytes in the kernel.
 *
 * Advice.  A forge reads the files it streams through their mappings
 * (fg_ckpt_map, advised MADV_SEQUENTIAL), so a cold source is read ahead as
 * it faults in; on top of that, reads are announced in steps of READ_STEP,
 * so the disk stays a step ahead of the converter without the whole head
 * being asked for at once (a head can be larger than the page cache).  The
 * call whose range
 * reaches a multiple m of it asks for [m + READ_STEP, m + 2 READ_STEP) (and
 * the first step too at m = 0), so the kernel stays a step ahead and each
 * page is advised about once whatever the callers' chunk sizes; the call
 * keeps no state.  Tensors read one after another (stacked experts) are
 * advised as a run: starting one asks for the next READ_STEP bytes of those
 * that follow.
 *
 * Copies.  copy_file_range moves page-cache pages in the kernel (a reflink
 * on XFS and btrfs), where a copy through user memory costs several times
 * the CPU; the hash threads then read the same file's mapping (the
 * checkpoint's, fg_ckpt_map), pages the copy has just brought in.  A file
 * is opened once per run, beneath its checkpoint's folder and only while it
 * is the file whose header was read (fg_ckpt_reopen); otherwise, and for
 * remote sources, spans are written from the mapping.  Once written, every
 * file the forge read is checked to be that same version still
 * (fg_art_check_sources), so what was copied and what was hashed cannot
 * come from two versions of a file rewritten in place.
 */
#include "forge/artifact/internal.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "forge/core/grow.h"

#define READ_STEP ((uint64_t)16 << 20)

struct fg_art_source {
	const struct fg_st_file *st;   /* the file as inspected */
	int fd;                        /* -1: not usable, write from the view */
};

static void advise(const struct fg_tensor *t, uint64_t from, uint64_t to)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a, b;

	if (to <= from)
		return;
	a = (uintptr_t)(t->data + from) & ~(page - 1);
	b = (uintptr_t)(t->data + to);
	(void)madvise((void *)a, b - a, MADV_WILLNEED); /* a hint: a range outside a mapping is no harm */
}

void fg_art_will_read(const struct fg_tensor *t, uint64_t off, uint64_t len)
{
	uint64_t bytes = fg_tensor_bytes(t), m;

	if (!t->data || off >= bytes || !len)
		return;
	m = (off + READ_STEP - 1) / READ_STEP * READ_STEP;
	if (m >= off + len)
		return;
	if (m == 0)
		advise(t, 0, bytes < READ_STEP ? bytes : READ_STEP);
	if (m + READ_STEP < bytes)
		advise(t, m + READ_STEP, bytes < m + 2 * READ_STEP ? bytes : m + 2 * READ_STEP);
}

void fg_art_will_read_run(const struct fg_tensor *const *ts, size_t n, size_t i)
{
	uint64_t ahead = 0;

	if (fg_tensor_bytes(ts[i]) >= READ_STEP)
		return; /* a large tensor advises its own steps */
	/*
	 * The first of the run advises the next READ_STEP bytes; each later one
	 * only the tensor that brings the horizon to READ_STEP past it, so a page
	 * is advised once (advice costs a page-cache lookup per page).
	 */
	for (size_t k = i + 1; k < n && ahead < READ_STEP; k++) {
		uint64_t b = fg_tensor_bytes(ts[k]);

		ahead += b;
		if (ts[k]->data && b && (i == 0 || ahead >= READ_STEP))
			advise(ts[k], 0, b < READ_STEP ? b : READ_STEP);
	}
}

const struct fg_ckpt_file *fg_art_file_of(const struct fg_inspect *r, const struct fg_tensor *t)
{
	const struct fg_ckpt *c = r->ckpt;

	for (size_t i = 0; i < c->n_files; i++) {
		const struct fg_st_file *st = c->files[i].st;

		if (st && st->n_tensors && t >= st->tensors && t < st->tensors + st->n_tensors)
			return &c->files[i];
	}
	return NULL;
}

/* The checkpoint holding cf, and cf's index in it; NULL when it is neither the source's nor the backbone's. */
static struct fg_ckpt *ckpt_of(struct forge *f, const struct fg_ckpt_file *cf, size_t *idx)
{
	struct fg_ckpt *c[2] = { f->src->ckpt, f->bb->ckpt };

	for (int i = 0; i < 2; i++)
		if (cf >= c[i]->files && cf < c[i]->files + c[i]->n_files) {
			*idx = (size_t)(cf - c[i]->files);
			return c[i];
		}
	return NULL;
}

/* The opened source of the file holding t, opening it on first use; NULL when not local or not the same. */
static struct fg_art_source *source_of(struct forge *f, const struct fg_tensor *t)
{
	const struct fg_ckpt_file *cf = fg_art_file_of(f->src, t);
	struct fg_art_source *s;
	struct fg_ckpt *c;
	size_t idx = 0;

	if (!cf && f->bb != f->src)
		cf = fg_art_file_of(f->bb, t);
	if (!cf || !cf->st || !t->data || !(c = ckpt_of(f, cf, &idx)))
		return NULL;
	for (size_t i = 0; i < f->n_sources; i++)
		if (f->sources[i].st == cf->st)
			return f->sources[i].fd >= 0 ? &f->sources[i] : NULL;
	if (FG_GROW(f->sources, f->n_sources + 1, f->cap_sources))
		return NULL;
	s = &f->sources[f->n_sources++];
	memset(s, 0, sizeof(*s));
	s->st = cf->st;
	s->fd = -1;
	if (c->pull || cf->st->file_size == 0)
		return NULL; /* a remote file: its bytes are the fetched ranges */
	if (fg_ckpt_reopen(c, idx, &s->fd, NULL) != 0) {
		s->fd = -1; /* not the file inspected (or not openable): written from the mapping */
		return NULL;
	}
	(void)posix_fadvise(s->fd, 0, 0, POSIX_FADV_SEQUENTIAL); /* kernel copies read ahead twice as far, as cp's */
	return s;
}

void fg_art_span(struct forge *f, const struct fg_tensor *t, uint64_t at, size_t len, struct fg_st_span *out)
{
	struct fg_art_source *s = source_of(f, t);

	out->len = len;
	if (s) {
		out->fd = s->fd;
		out->fd_offset = s->st->data_start + t->begin + at;
		out->data = t->data + at; /* the checkpoint's mapping of that same file */
	} else {
		out->fd = -1;
		out->fd_offset = 0;
		out->data = t->data + at;
	}
}

/* Every mapped file of c still the version whose header was read; 0 or FG_EINPUT naming it. */
static int check_ckpt(const struct fg_ckpt *c, struct fg_err *err)
{
	for (size_t i = 0; !c->pull && i < c->n_files; i++) {
		int fd, rc;

		if (!c->files[i].st || !c->files[i].st->map)
			continue; /* never read whole: only what inspection pread (and checked) */
		rc = fg_ckpt_reopen(c, i, &fd, err);
		if (rc)
			return fg_err_prefix(err, rc, "after writing: ");
		close(fd);
	}
	return 0;
}

int fg_art_check_sources(struct forge *f, struct fg_err *err)
{
	int rc = check_ckpt(f->src->ckpt, err);

	if (!rc && f->bb != f->src)
		rc = check_ckpt(f->bb->ckpt, err);
	return rc;
}

void fg_art_sources_close(struct forge *f)
{
	for (size_t i = 0; i < f->n_sources; i++)
		if (f->sources[i].fd >= 0)
			close(f->sources[i].fd);
	free(f->sources);
	f->sources = NULL;
	f->n_sources = f->cap_sources = 0;
}
