/*
 * safetensors.h: strict reader and atomic writer of .safetensors files.
 *
 * A file is an 8-byte little-endian header length N, N bytes of UTF-8 JSON (an
 * object mapping tensor names to {"dtype", "shape", "data_offsets"} plus an
 * optional "__metadata__" string-to-string map), then the data section, which
 * the tensors' offsets must tile exactly.  Model files are hostile input: the
 * reader checks every length, count and offset before trusting it and names
 * the file, the tensor and the reason in every rejection.
 *
 * The reader reads the header with pread() and maps the file read-only; tensor
 * views point into that mapping and nothing is copied to read a tensor.  The
 * mapping is advised MADV_RANDOM so that deciding a 400 GB checkpoint's
 * convention faults in only the norm tensors it touches.
 */
#ifndef FG_SAFETENSORS_H
#define FG_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "forge/format/dtype.h"
#include "forge/core/error.h"
#include "forge/core/sha256.h"

#define FG_ST_HEADER_MAX   100000000ull /* bytes of JSON header (the format's cap) */
#define FG_ST_MAX_RANK     16
#define FG_ST_MAX_TENSORS  4000000u

/* One tensor of a file: a borrowed view, valid while its fg_st_file lives. */
struct fg_tensor {
	const char *name;
	enum fg_dtype dtype;
	int rank;
	uint64_t shape[FG_ST_MAX_RANK];
	uint64_t nelem;
	uint64_t begin, end;  /* offsets into the data section */
	const uint8_t *data;  /* points into the mapping; NULL for header-only parses */
};

struct fg_st_meta {
	const char *key;
	const char *value;
};

struct fg_st_file {
	char *path;                 /* the label given at open, owned */
	uint64_t file_size;
	uint64_t header_len;        /* N, the JSON header's length */
	uint64_t data_start;        /* 8 + N */
	size_t n_tensors;
	struct fg_tensor *tensors;  /* ascending data offsets (the file's order) */
	size_t n_meta;
	struct fg_st_meta *meta;    /* in header order */
	/* private */
	const uint8_t *map;
	size_t map_len;
	int owns_map;
	char *strings;              /* arena holding names and metadata */
	uint32_t *slots;            /* name hash table, index + 1, 0 = empty */
	size_t n_slots;
};

/*
 * Open and validate the safetensors file at path.  On success *out owns the
 * mapping; free it with fg_st_close().  On failure *out is untouched and err
 * names the file and the reason (FG_EINPUT for a file that cannot be opened,
 * read or mapped and for anything malformed, FG_ENOMEM).
 */
int fg_st_open(struct fg_st_file **out, const char *path, struct fg_err *err);

/*
 * Validate a whole file already in memory (fuzzing, golden bytes).  The
 * returned file borrows buf, which must outlive it; label names it in errors.
 */
int fg_st_parse(struct fg_st_file **out, const uint8_t *buf, size_t len,
		const char *label, struct fg_err *err);

/*
 * Validate a header alone: buf holds the file's first len bytes (at least the
 * 8-byte length and the header) of a file of file_size bytes.  Tensor views
 * get data == NULL.  Used for files whose data lives elsewhere (remote).
 */
int fg_st_parse_header(struct fg_st_file **out, const uint8_t *buf, size_t len,
		       uint64_t file_size, const char *label, struct fg_err *err);

/* Release a file and its mapping.  NULL allowed. */
void fg_st_close(struct fg_st_file *f);

/* The tensor called name, or NULL.  O(1). */
const struct fg_tensor *fg_st_find(const struct fg_st_file *f, const char *name);

/* The metadata value for key, or NULL. */
const char *fg_st_meta(const struct fg_st_file *f, const char *key);

/* Bytes of a tensor's data (end - begin). */
static inline uint64_t fg_tensor_bytes(const struct fg_tensor *t)
{
	return t->end - t->begin;
}

/*
 * Where a run of a tensor's bytes already is (fg_st_out.span): data points
 * at len bytes the writer may read until fg_st_write_with returns, and when
 * fd >= 0 the same bytes are at fd_offset in that file, which the writer
 * then copies in the kernel (copy_file_range) rather than through memory.
 */
struct fg_st_span {
	const uint8_t *data;
	size_t len;
	int fd;
	uint64_t fd_offset;
};

/*
 * A tensor to write.  The bytes come from data (borrowed: a view of another
 * file or a caller's buffer, fg_dtype_size(dtype) * elements long), or, when
 * data is NULL, chunk by chunk: span() may say where the chunk at offset
 * already is (returning 1 with *out filled, its len at most len, or 0), else
 * produce() fills buf with the chunk (offset, len).  Both return 0 (or 1)
 * or a negative FG_E* code with err set.  Either way the writer never holds
 * a whole tensor in memory of its own.
 */
struct fg_st_out {
	const char *name;
	enum fg_dtype dtype;
	int rank;
	uint64_t shape[FG_ST_MAX_RANK];
	const void *data;
	int (*span)(void *ctx, uint64_t offset, size_t len, struct fg_st_span *out, struct fg_err *err);
	int (*produce)(void *ctx, uint8_t *buf, uint64_t offset, size_t len,
		       struct fg_err *err);
	void *ctx;
};

/*
 * Write tensors[0..n) in that order, with the n_meta metadata pairs, to path:
 * into a temporary file in the same folder, fsynced, then renamed over path
 * and the folder fsynced.  On failure nothing is left at path that was not
 * there before and the temporary file is removed.
 */
int fg_st_write(const char *path, const struct fg_st_out *tensors, size_t n,
		const struct fg_st_meta *meta, size_t n_meta, struct fg_err *err);

struct fg_st_write_opts {
	/*
	 * Fed every byte of the file in order, on threads of their own
	 * (fg_sha256_pipe), so the file is hashed as it is written and never
	 * read back; the caller finishes them after the call.  Undefined after
	 * a failure.
	 */
	struct fg_sha256 *const *hashes;
	size_t n_hashes;
	/* Tensor bytes written so far of total, after every chunk; non-zero stops (FG_ECANCELLED). */
	int (*progress)(void *ctx, uint64_t done, uint64_t total);
	void *progress_ctx;
};

/*
 * fg_st_write with options (o may be NULL).  The data goes out in chunks of
 * FG_ST_WRITE_CHUNK, writeback starting behind them (sync_file_range) so the
 * closing fsync has little left to wait for.
 */
#define FG_ST_WRITE_CHUNK ((size_t)4 << 20)

int fg_st_write_with(const char *path, const struct fg_st_out *tensors, size_t n,
		     const struct fg_st_meta *meta, size_t n_meta, const struct fg_st_write_opts *o,
		     struct fg_err *err);

/* Element count of a shape into *out; returns 0, or FG_EINPUT on overflow (*out untouched). */
int fg_shape_nelem(const uint64_t *shape, int rank, uint64_t *out);

#endif
