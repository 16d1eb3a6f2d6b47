/*
 * sources.c: how the forge reads its source (internal.h): read-ahead advice
 * on the tensor ranges it streams, and the source files it opens itself so
 * the writer copies unchanged bytes in the kernel.
 *
 * Advice.  The reader maps a checkpoint MADV_RANDOM, right for an
 * inspection that touches a few norms, wrong for a forge that reads a head
 * from end to end: unadvised, a cold source is read one page fault at a
 * time.  Reads are announced in steps of READ_STEP: the call whose range
 * reaches a multiple m of it asks for [m + READ_STEP, m + 2 READ_STEP) (and
 * the first step too at m = 0), so the kernel stays a step ahead and each
 * page is advised about once whatever the callers' chunk sizes; the call
 * keeps no state.  Tensors read one after another (stacked experts) are
 * advised as a run: starting one asks for the next READ_STEP bytes of those
 * that follow.
 *
 * Copies.  copy_file_range moves page-cache pages in the kernel (a reflink
 * on XFS and btrfs), where a copy through user memory costs several times
 * the CPU; the hash threads then read the same descriptor's own mapping,
 * pages the copy has just brought in.  A file is opened once per run, by the
 * path it was inspected at, and used only when its size and header are the
 * inspected ones (fg_st_parse_header on its first bytes).
 */
#include "forge/artifact/internal.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forge/core/grow.h"

#define READ_STEP ((uint64_t)16 << 20)

struct fg_art_source {
	const struct fg_st_file *st;   /* the file as inspected */
	int fd;                        /* -1: not usable, write from the view */
	const uint8_t *map;            /* fd's own mapping, map_len bytes */
	size_t map_len;
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

/* 1 when the file at fd (of size) has st's layout: the same size, header length and tensor offsets. */
static int same_layout(const uint8_t *map, size_t size, const struct fg_st_file *st)
{
	struct fg_st_file *now = NULL;
	int same;

	if (size != st->file_size || size < st->data_start ||
	    fg_st_parse_header(&now, map, (size_t)st->data_start, size, "source", NULL) != 0)
		return 0;
	same = now->header_len == st->header_len && now->n_tensors == st->n_tensors;
	for (size_t i = 0; same && i < st->n_tensors; i++) {
		const struct fg_tensor *t = fg_st_find(now, st->tensors[i].name);

		same = t && t->begin == st->tensors[i].begin && t->end == st->tensors[i].end &&
		       t->dtype == st->tensors[i].dtype;
	}
	fg_st_close(now);
	return same;
}

/* The opened source of the file holding t, opening it on first use; NULL when not local or not the same. */
static struct fg_art_source *source_of(struct forge *f, const struct fg_tensor *t)
{
	const struct fg_ckpt_file *cf = fg_art_file_of(f->src, t);
	struct fg_art_source *s;
	struct stat sb;
	void *map;

	if (!cf && f->bb != f->src)
		cf = fg_art_file_of(f->bb, t);
	if (!cf || !cf->st || !cf->path)
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
	if ((f->src->ckpt->pull && fg_art_file_of(f->src, t) == cf) || cf->st->file_size == 0)
		return NULL; /* a remote file: its bytes are the fetched ranges */
	s->fd = open(cf->path, O_RDONLY | O_CLOEXEC);
	if (s->fd < 0)
		return NULL;
	map = fstat(s->fd, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == cf->st->file_size
		      ? mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, s->fd, 0)
		      : MAP_FAILED;
	if (map == MAP_FAILED || !same_layout(map, (size_t)sb.st_size, cf->st)) {
		if (map != MAP_FAILED)
			munmap(map, (size_t)sb.st_size);
		close(s->fd);
		s->fd = -1;
		return NULL;
	}
	s->map = map;
	s->map_len = (size_t)sb.st_size;
	return s;
}

void fg_art_span(struct forge *f, const struct fg_tensor *t, uint64_t at, size_t len, struct fg_st_span *out)
{
	struct fg_art_source *s = source_of(f, t);

	out->len = len;
	if (s) {
		out->fd = s->fd;
		out->fd_offset = s->st->data_start + t->begin + at;
		out->data = s->map + out->fd_offset;
	} else {
		out->fd = -1;
		out->fd_offset = 0;
		out->data = t->data + at;
	}
}

void fg_art_sources_close(struct forge *f)
{
	for (size_t i = 0; i < f->n_sources; i++) {
		if (f->sources[i].map)
			munmap((void *)(uintptr_t)f->sources[i].map, f->sources[i].map_len);
		if (f->sources[i].fd >= 0)
			close(f->sources[i].fd);
	}
	free(f->sources);
	f->sources = NULL;
	f->n_sources = f->cap_sources = 0;
}
