/*
 * safetensors_write.c: the atomic writer declared in safetensors.h.
 *
 * A file is written under a temporary name in its target folder (O_EXCL),
 * streamed tensor by tensor in chunks from views, spans (copied in the
 * kernel when they name a file) or a produce() callback filling one of a few
 * reused buffers, so a writer holds a few chunks at a time; every chunk is
 * handed to the hash threads of the options as it is written, writeback is
 * started behind the writer, then the file is fsynced, renamed into place,
 * and the folder fsynced, so a reader sees the old file or the whole new one.
 */
#include "forge/format/safetensors.h"

#include "forge/core/fs.h"
#include "forge/core/str.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITE_CHUNK FG_ST_WRITE_CHUNK /* bytes a produce() callback fills, or a view hands over, at a time */
#define N_BUFS 4                        /* produce() buffers in turn: the hash threads read the others */
#define WRITEBACK_STEP ((uint64_t)64 << 20) /* start writeback every this many bytes */

/*
 * A name two tensors share, or "__metadata__" when a tensor takes it; NULL
 * when there is none.  Sorted once (a lookup in the header being built was
 * a scan of it per tensor: 82 s for a 98,000-tensor shard).  *nomem when
 * the sort's array could not be had.  Checked before any tensor's dtype and
 * shape, and of several repeated names the first in byte order is named.
 */
static const char *repeated_name(const struct fg_st_out *tensors, size_t n, bool *nomem)
{
	const char **names = malloc((n ? n : 1) * sizeof(*names)), *dup = NULL;

	*nomem = !names;
	if (!names)
		return NULL;
	for (size_t i = 0; i < n && !dup; i++) {
		names[i] = tensors[i].name;
		if (strcmp(names[i], "__metadata__") == 0)
			dup = tensors[i].name;
	}
	if (!dup) {
		qsort(names, n, sizeof(*names), fg_strcmp_ptr);
		for (size_t i = 1; i < n && !dup; i++)
			if (strcmp(names[i - 1], names[i]) == 0)
				dup = names[i];
	}
	free(names);
	return dup;
}

/* Build the header text for tensors and metadata; caller frees. */
static char *build_header(const struct fg_st_out *tensors, size_t n,
			  const struct fg_st_meta *meta, size_t n_meta,
			  const char *path, struct fg_err *err)
{
	cJSON *root = cJSON_CreateObject();
	uint64_t off = 0;
	char *text = NULL;
	const char *dup;
	bool nomem;

	if (!root)
		goto nomem;
	dup = repeated_name(tensors, n, &nomem);
	if (nomem)
		goto nomem;
	if (dup) {
		fg_err_set(err, FG_EUSAGE, "%s: tensor '%s': duplicate or reserved name", path, dup);
		goto fail;
	}
	if (n_meta) {
		cJSON *md = cJSON_AddObjectToObject(root, "__metadata__");

		if (!md)
			goto nomem;
		for (size_t i = 0; i < n_meta; i++)
			if (!cJSON_AddStringToObject(md, meta[i].key, meta[i].value))
				goto nomem;
	}
	for (size_t i = 0; i < n; i++) {
		const struct fg_st_out *t = &tensors[i];
		cJSON *obj, *shape, *offs;
		uint64_t nelem, nbytes;

		if (t->rank < 0 || t->rank > FG_ST_MAX_RANK || (unsigned)t->dtype >= FG_DT_COUNT ||
		    fg_shape_nelem(t->shape, t->rank, &nelem) != 0 ||
		    nelem > UINT64_MAX / fg_dtype_size(t->dtype)) {
			fg_err_set(err, FG_EUSAGE, "%s: tensor '%s': bad dtype or shape", path, t->name);
			goto fail;
		}
		if (!t->data && !t->produce) { /* a span() may decline any chunk */
			fg_err_set(err, FG_EUSAGE, "%s: tensor '%s': no data source", path, t->name);
			goto fail;
		}
		nbytes = nelem * fg_dtype_size(t->dtype);
		obj = cJSON_AddObjectToObject(root, t->name);
		if (!obj || !cJSON_AddStringToObject(obj, "dtype", fg_dtype_name(t->dtype)))
			goto nomem;
		shape = cJSON_AddArrayToObject(obj, "shape");
		offs = cJSON_AddArrayToObject(obj, "data_offsets");
		if (!shape || !offs)
			goto nomem;
		for (int d = 0; d < t->rank; d++)
			cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
		cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
		cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + nbytes)));
		off += nbytes;
	}
	text = cJSON_PrintUnformatted(root);
	if (!text)
		goto nomem;
	cJSON_Delete(root);
	return text;
nomem:
	fg_err_set(err, FG_ENOMEM, "%s: out of memory building the header", path);
fail:
	cJSON_Delete(root);
	return NULL;
}

/* One file being written. */
struct writer {
	int fd;
	const char *path;              /* the temporary name, for messages */
	struct fg_sha256_pipe *pipe;   /* NULL: nothing hashed */
	uint8_t *buf[N_BUFS];
	unsigned long long ticket[N_BUFS]; /* the last push of each buffer */
	unsigned next;
	uint64_t pos;                  /* bytes written to fd */
	uint64_t synced;               /* writeback started up to here */
	uint64_t data_done, data_total;
	const struct fg_st_write_opts *o;
	int copy_ok;                   /* copy_file_range still worth trying */
};

/*
 * A write of tensor name failed with -errno rc.  EFAULT: the bytes came from
 * a mapped file that is no longer that long (it shrank while it was read).
 */
static int write_failed(const struct writer *w, const char *name, int rc, struct fg_err *err)
{
	if (rc == -EFAULT)
		return fg_err_set(err, FG_EINPUT, "%s: writing tensor '%s': its source changed while it was read "
				  "(the mapped file shrank)", w->path, name);
	return fg_err_set(err, fg_fs_write_errcode(-rc), "%s: writing tensor '%s': %s", w->path, name, strerror(-rc));
}

/* Give the hash threads len bytes at data; the push's ticket, 0 when nothing hashes. */
static unsigned long long hand_over(struct writer *w, const void *data, size_t len)
{
	return w->pipe && len ? fg_sha256_pipe_push(w->pipe, data, len) : 0;
}

/* Written len more bytes: start their writeback in steps, report progress. */
static int advance(struct writer *w, uint64_t len, int is_data, const char *name, struct fg_err *err)
{
	w->pos += len;
	if (w->pos - w->synced >= WRITEBACK_STEP) {
		/* Asynchronous: the pages go to the disk while the writer goes on. */
		(void)sync_file_range(w->fd, (off_t)w->synced, (off_t)(w->pos - w->synced), SYNC_FILE_RANGE_WRITE);
		w->synced = w->pos;
	}
	if (!is_data)
		return 0;
	w->data_done += len;
	if (w->o && w->o->progress && w->o->progress(w->o->progress_ctx, w->data_done, w->data_total))
		return fg_err_set(err, FG_ECANCELLED, "%s: writing tensor '%s': stopped on request", w->path, name);
	return 0;
}

/* Write and hash len bytes at data; *ticket (may be NULL) gets the hash threads' ticket. */
static int put_bytes(struct writer *w, const void *data, size_t len, int is_data, const char *name,
		     unsigned long long *ticket, struct fg_err *err)
{
	int rc = fg_fs_write_all(w->fd, data, len);
	unsigned long long t;

	if (rc)
		return write_failed(w, name, rc, err);
	t = hand_over(w, data, len);
	if (ticket)
		*ticket = t;
	return advance(w, len, is_data, name, err);
}

/*
 * A span: copied in the kernel from its file when it names one (the hash
 * threads read the same bytes through data), else written from data.
 */
static int put_span(struct writer *w, const struct fg_st_span *sp, const char *name, struct fg_err *err)
{
	uint64_t off = sp->fd_offset;
	size_t done = 0;

	while (sp->fd >= 0 && w->copy_ok && done < sp->len) {
		loff_t in = (loff_t)off;
		ssize_t n = copy_file_range(sp->fd, &in, w->fd, NULL, sp->len - done, 0);

		if (n > 0) {
			done += (size_t)n;
			off += (uint64_t)n;
			continue;
		}
		if (n == 0) /* the end of the source file, before the bytes its header promised */
			return fg_err_set(err, FG_EINPUT, "%s: copying tensor '%s': the source file ended early "
					  "(changed while it was read)", w->path, name);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != ENOSYS && errno != EXDEV && errno != EINVAL && errno != EOPNOTSUPP &&
		    errno != EPERM)
			return fg_err_set(err, fg_fs_write_errcode(errno), "%s: copying tensor '%s': %s",
					  w->path, name, strerror(errno));
		w->copy_ok = 0; /* this pair of files (or the kernel) will not: write from memory */
	}
	if (done < sp->len) {
		int rc = fg_fs_write_all(w->fd, sp->data + done, sp->len - done);

		if (rc)
			return write_failed(w, name, rc, err);
	}
	hand_over(w, sp->data, sp->len);
	return advance(w, sp->len, 1, name, err);
}

static int write_tensor(struct writer *w, const struct fg_st_out *t, struct fg_err *err)
{
	uint64_t nelem = 0, nbytes, off;
	int rc;

	fg_shape_nelem(t->shape, t->rank, &nelem); /* checked by build_header */
	nbytes = nelem * fg_dtype_size(t->dtype);
	for (off = 0; off < nbytes;) {
		size_t len = nbytes - off > WRITE_CHUNK ? WRITE_CHUNK : (size_t)(nbytes - off);
		struct fg_st_span sp = { .fd = -1 };
		unsigned k;

		if (t->data) {
			rc = put_bytes(w, (const uint8_t *)t->data + off, len, 1, t->name, NULL, err);
		} else if (t->span && (rc = t->span(t->ctx, off, len, &sp, err)) != 0) {
			if (rc < 0)
				return fg_err_prefix(err, rc, "%s: producing tensor '%s': ", w->path, t->name);
			if (!sp.len || sp.len > len)
				return fg_err_set(err, FG_EINTERNAL, "%s: tensor '%s': a span of %zu bytes at %llu",
						  w->path, t->name, sp.len, (unsigned long long)off);
			len = sp.len;
			rc = put_span(w, &sp, t->name, err);
		} else {
			k = w->next;
			w->next = (w->next + 1) % N_BUFS;
			if (!w->buf[k] && !(w->buf[k] = malloc(WRITE_CHUNK)))
				return fg_err_set(err, FG_ENOMEM, "%s: out of memory for a write buffer", w->path);
			if (w->pipe)
				fg_sha256_pipe_wait(w->pipe, w->ticket[k]); /* the hash threads are done with it */
			rc = t->produce(t->ctx, w->buf[k], off, len, err);
			if (rc)
				return fg_err_prefix(err, rc, "%s: producing tensor '%s': ", w->path, t->name);
			rc = put_bytes(w, w->buf[k], len, 1, t->name, &w->ticket[k], err);
		}
		if (rc)
			return rc;
		off += len;
	}
	return 0;
}

struct tensors_call {
	struct writer *w;
	const struct fg_st_out *tensors;
	size_t n;
};

static int write_tensors(void *ctx, struct fg_err *err)
{
	struct tensors_call *c = ctx;

	for (size_t i = 0; i < c->n; i++) {
		int rc = write_tensor(c->w, &c->tensors[i], err);

		if (rc)
			return rc;
	}
	return 0;
}

int fg_st_write(const char *path, const struct fg_st_out *tensors, size_t n,
		const struct fg_st_meta *meta, size_t n_meta, struct fg_err *err)
{
	return fg_st_write_with(path, tensors, n, meta, n_meta, NULL, err);
}

int fg_st_write_with(const char *path, const struct fg_st_out *tensors, size_t n,
		     const struct fg_st_meta *meta, size_t n_meta, const struct fg_st_write_opts *o,
		     struct fg_err *err)
{
	static const char spaces[8] = "        ";
	struct fg_fs_atomic file = { .fd = -1 };
	uint8_t lenbuf[8];
	uint64_t hlen, padded;
	struct writer w = { .fd = -1, .o = o, .copy_ok = 1 };
	char *header;
	int rc;

	header = build_header(tensors, n, meta, n_meta, path, err);
	if (!header)
		return err ? err->code : FG_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint64_t nelem = 0;

		fg_shape_nelem(tensors[i].shape, tensors[i].rank, &nelem);
		w.data_total += nelem * fg_dtype_size(tensors[i].dtype);
	}
	if ((rc = fg_fs_atomic_open(&file, path, err)) != 0)
		goto out;
	w.path = file.tmp;
	w.fd = file.fd;
	/* Views and spans may be mapped source bytes: the hash threads read them under the SIGBUS guard. */
	if (o && o->n_hashes && !(w.pipe = fg_sha256_pipe_start_guarded(o->hashes, o->n_hashes, fg_st_guard))) {
		rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory for the hash threads", path);
		goto out;
	}
	hlen = strlen(header);
	padded = (hlen + 7) & ~7ull;
	for (int i = 0; i < 8; i++)
		lenbuf[i] = (uint8_t)(padded >> (8 * i));
	rc = put_bytes(&w, lenbuf, 8, 0, "(header)", NULL, err);
	if (!rc)
		rc = put_bytes(&w, header, hlen, 0, "(header)", NULL, err);
	if (!rc)
		rc = put_bytes(&w, spaces, padded - hlen, 0, "(header)", NULL, err);
	if (rc)
		goto out;
	{
		struct tensors_call tc = { &w, tensors, n };

		/*
		 * Views, spans and produce() may read mapped files: under a guard of
		 * the writer's own, a SIGBUS ends the loop here, so the hash threads
		 * are finished and the temporary file removed as for any failure.
		 */
		rc = fg_st_guard(write_tensors, &tc, path, err);
		if (rc)
			goto out;
	}
	rc = fg_sha256_pipe_finish(w.pipe);
	w.pipe = NULL;
	if (rc) {
		rc = fg_err_set(err, FG_EINPUT, "%s: a source changed while it was read (hashing it raised SIGBUS)", path);
		goto out;
	}
	rc = fg_fs_atomic_commit(&file, err);
out:
	fg_sha256_pipe_finish(w.pipe); /* before the buffers go: the threads may still read them */
	fg_fs_atomic_abort(&file);
	for (int i = 0; i < N_BUFS; i++)
		free(w.buf[i]);
	free(header);
	return rc;
}
