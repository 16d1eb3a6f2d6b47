/*
 * safetensors_write.c: the atomic writer declared in safetensors.h.
 *
 * A file is written under a temporary name in its target folder (O_EXCL),
 * streamed tensor by tensor in chunks from views or a produce() callback, so
 * a writer holds one chunk at a time; then fsynced, renamed into place, and
 * the folder fsynced, so a reader sees the old file or the whole new one.
 */
#include "forge/format/safetensors.h"

#include "forge/core/fs.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITE_CHUNK (4u << 20) /* bytes a produce() callback fills at a time */

/* Makes temporary names unique between threads of one process. */
static unsigned long tmp_seq;

/* Build the header text for tensors and metadata; caller frees. */
static char *build_header(const struct fg_st_out *tensors, size_t n,
			  const struct fg_st_meta *meta, size_t n_meta,
			  const char *path, struct fg_err *err)
{
	cJSON *root = cJSON_CreateObject();
	uint64_t off = 0;
	char *text = NULL;

	if (!root)
		goto nomem;
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
		if (!t->data && !t->produce) {
			fg_err_set(err, FG_EUSAGE, "%s: tensor '%s': no data source", path, t->name);
			goto fail;
		}
		if (cJSON_GetObjectItemCaseSensitive(root, t->name) || strcmp(t->name, "__metadata__") == 0) {
			fg_err_set(err, FG_EUSAGE, "%s: tensor '%s': duplicate or reserved name", path, t->name);
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

static int write_tensor(int fd, const struct fg_st_out *t, uint8_t **chunk,
			const char *path, struct fg_err *err)
{
	uint64_t nelem = 0, nbytes, off;
	int rc;

	fg_shape_nelem(t->shape, t->rank, &nelem); /* checked by build_header */
	nbytes = nelem * fg_dtype_size(t->dtype);
	if (t->data) {
		rc = fg_fs_write_all(fd, t->data, (size_t)nbytes);
		if (rc)
			return fg_err_set(err, FG_EINPUT, "%s: writing tensor '%s': %s", path, t->name, strerror(-rc));
		return 0;
	}
	if (!*chunk && !(*chunk = malloc(WRITE_CHUNK)))
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory for a write buffer", path);
	for (off = 0; off < nbytes; ) {
		size_t len = nbytes - off > WRITE_CHUNK ? WRITE_CHUNK : (size_t)(nbytes - off);

		rc = t->produce(t->ctx, *chunk, off, len, err);
		if (rc)
			return fg_err_prefix(err, rc, "%s: producing tensor '%s': ", path, t->name);
		rc = fg_fs_write_all(fd, *chunk, len);
		if (rc)
			return fg_err_set(err, FG_EINPUT, "%s: writing tensor '%s': %s", path, t->name, strerror(-rc));
		off += len;
	}
	return 0;
}

int fg_st_write(const char *path, const struct fg_st_out *tensors, size_t n,
		const struct fg_st_meta *meta, size_t n_meta, struct fg_err *err)
{
	static const char spaces[8] = "        ";
	char tmp[PATH_MAX];
	const char *base = strrchr(path, '/');
	uint8_t lenbuf[8], *chunk = NULL;
	uint64_t hlen, padded;
	char *header;
	int fd = -1, rc;

	header = build_header(tensors, n, meta, n_meta, path, err);
	if (!header)
		return err ? err->code : FG_ENOMEM;
	base = base ? base + 1 : path;
	rc = snprintf(tmp, sizeof(tmp), "%.*s.%s.tmp-%ld-%lu", (int)(base - path), path, base,
		      (long)getpid(), __atomic_fetch_add(&tmp_seq, 1, __ATOMIC_RELAXED));
	if (rc < 0 || (size_t)rc >= sizeof(tmp)) {
		rc = fg_err_set(err, FG_EUSAGE, "%s: path too long", path);
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = fg_err_set(err, FG_EINPUT, "%s: cannot create temporary file: %s", tmp, strerror(errno));
		goto out;
	}
	hlen = strlen(header);
	padded = (hlen + 7) & ~7ull;
	for (int i = 0; i < 8; i++)
		lenbuf[i] = (uint8_t)(padded >> (8 * i));
	rc = fg_fs_write_all(fd, lenbuf, 8);
	if (!rc)
		rc = fg_fs_write_all(fd, header, hlen);
	if (!rc)
		rc = fg_fs_write_all(fd, spaces, padded - hlen);
	if (rc) {
		rc = fg_err_set(err, FG_EINPUT, "%s: writing the header: %s", tmp, strerror(-rc));
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		rc = write_tensor(fd, &tensors[i], &chunk, tmp, err);
		if (rc)
			goto out;
	}
	if (fsync(fd) != 0) {
		rc = fg_err_set(err, FG_EINPUT, "%s: fsync: %s", tmp, strerror(errno));
		goto out;
	}
	if (close(fd) != 0) {
		fd = -1;
		rc = fg_err_set(err, FG_EINPUT, "%s: close: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) != 0) {
		rc = fg_err_set(err, FG_EINPUT, "%s: cannot rename into place: %s", path, strerror(errno));
		goto out;
	}
	rc = fg_fs_fsync_parent(path);
	if (rc)
		rc = fg_err_set(err, FG_EINPUT, "%s: fsync of the folder: %s", path, strerror(-rc));
out:
	if (fd >= 0)
		close(fd);
	if (rc)
		unlink(tmp);
	free(chunk);
	free(header);
	return rc;
}
