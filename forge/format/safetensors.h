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
 * The reader maps the header (no copy; pread when the file cannot be
 * mapped), parses it into a compact tensor table (no JSON tree:
 * forge/format/jsonlex.h) under fg_st_guard, and unmaps it: fg_st_open_fd
 * parses the header of an open file, and the data is read later, either by
 * pread of the few ranges an inspection needs (forge/source/checkpoint.c)
 * or through fg_st_map, which a forge uses to stream whole tensors (advised
 * sequential, since it reads them front to back).  fg_st_open (the
 * `forged tensors` command and tests) opens, parses and maps in one call.
 *
 * A mapped file that shrinks while it is read raises SIGBUS; readers of
 * mapped bytes run under fg_st_guard, which turns that into an error
 * ("changed while it was read") instead of killing the process.
 */
#ifndef FG_SAFETENSORS_H
#define FG_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "forge/format/dtype.h"
#include "forge/core/error.h"
#include "forge/core/sha256.h"
#include "forge/core/str.h"

#define FG_ST_HEADER_MAX   100000000ull /* bytes of JSON header (the format's cap) */
#define FG_ST_MAX_RANK     6  /* conv3d weights are rank 5; nothing in a model goes higher */
#define FG_ST_MAX_TENSORS  4000000u

/*
 * One tensor of a file: a borrowed view, valid while its fg_st_file lives.
 * shape points at FG_ST_MAX_RANK dimensions (zero past rank) in storage
 * that outlives the view: the file's pool of distinct shapes (a file of
 * 20,000 experts has a handful), or, for a view built elsewhere, its
 * builder's.  Its element count and end offset follow from shape, dtype
 * and begin (fg_tensor_nelem, fg_tensor_end), which the reader checks
 * against the header's data_offsets.  facts and skip belong to the layer
 * that opened the file (the classifier of struct fg_st_parse_opts fills
 * them once, at parse time); hash is fg_st_name_hash of the name.  40
 * bytes: a checkpoint holds hundreds of thousands of them.
 */
struct fg_tensor {
	const char *name;
	const uint8_t *data;  /* the tensor's bytes once read or mapped, else NULL */
	const uint64_t *shape;
	uint64_t begin;       /* offset into the data section */
	uint32_t hash;
	uint16_t facts;       /* classifier's: 0 when not classified */
	uint8_t skip;         /* classifier's: bytes of container prefixes before the name's body */
	enum fg_dtype dtype : 5;
	unsigned rank : 3;    /* at most FG_ST_MAX_RANK */
};

/* Element count of t (the product of its dimensions; 1 for a scalar). */
static inline uint64_t fg_tensor_nelem(const struct fg_tensor *t)
{
	uint64_t n = 1;

	for (int i = 0; i < t->rank; i++)
		n *= t->shape[i];
	return n;
}

/* Bytes of a tensor's data. */
static inline uint64_t fg_tensor_bytes(const struct fg_tensor *t)
{
	return fg_tensor_nelem(t) * fg_dtype_size(t->dtype);
}

/* The tensor's end offset in the data section. */
static inline uint64_t fg_tensor_end(const struct fg_tensor *t)
{
	return t->begin + fg_tensor_bytes(t);
}

/*
 * Options of a parse: classify(t, name_len, ctx), when not NULL, is called
 * once per tensor as its entry is read (before the table is sorted and
 * checked as a whole), to fill t->facts and t->skip (the model layer's name
 * rules, computed on the parsing thread).
 */
struct fg_st_parse_opts {
	void (*classify)(struct fg_tensor *t, size_t name_len, void *ctx);
	void *ctx;
	struct fg_st_slab *slab;    /* when not NULL, the table and names are taken from it (see below) */
};

/*
 * A slab: the tables and names of many files packed into a few large
 * mappings (huge pages where the kernel gives them), so that a checkpoint
 * of 100,000 tensors does not pay a page fault per 4 KiB of them.  A file
 * parsed with opts->slab keeps its table and names there: they live until
 * fg_st_slab_free, which must come after fg_st_close of every such file
 * (a tensor is read only while its file is open: its shape is the file's).
 * One thread at a time may parse into a slab.
 */
struct fg_st_slab;

struct fg_st_slab *fg_st_slab_new(void);   /* NULL when out of memory */
void fg_st_slab_free(struct fg_st_slab *s); /* NULL allowed */

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
	/* The file as it was when its header was read: a later read must find it the same. */
	uint64_t dev, ino;
	int64_t mtime_ns;
	/* private */
	const uint8_t *map;
	size_t map_len;
	int owns_map;
	char *strings;              /* the tensor names in header order, each NUL-terminated */
	size_t names_len;           /* bytes of strings they take */
	char *meta_text;            /* the metadata strings */
	int in_slab;                /* tensors and strings belong to a fg_st_slab */
	int plain_names;            /* no tensor key of the header had an escape */
	uint32_t *slots;            /* name hash table, index + 1, 0 = empty */
	uint16_t *slots16;          /* the same, narrow, for a file of under 65,535 tensors (slots is NULL then) */
	size_t n_slots;
	struct fg_st_shapes *shapes; /* the pool the tensors' shapes point into, freed at fg_st_close */
};

/*
 * Open and validate the safetensors file at path.  On success *out owns the
 * mapping; free it with fg_st_close().  On failure *out is untouched and err
 * names the file and the reason (FG_EINPUT for a file that cannot be opened,
 * read or mapped and for anything malformed, FG_ENOMEM).
 */
int fg_st_open(struct fg_st_file **out, const char *path, struct fg_err *err);

/*
 * Parse and validate the header of the open file fd (read with pread; fd is
 * the caller's, left open and unmapped).  label names the file in errors.
 * fd must be a regular file (FG_EINPUT otherwise).  opts may be NULL.
 * Tensors get data == NULL.
 */
int fg_st_open_fd(struct fg_st_file **out, int fd, const char *label, const struct fg_st_parse_opts *opts,
		  struct fg_err *err);

/*
 * Map the data of f from fd (the same file, re-opened by the caller) and
 * point every tensor's data into it.  The file must still be the one whose
 * header f holds (device, inode, size, mtime): FG_EINPUT "changed since its
 * header was read" otherwise.  Advised MADV_SEQUENTIAL: a forge streams
 * whole tensors.  Read the bytes under fg_st_guard.  A no-op when mapped.
 */
int fg_st_map(struct fg_st_file *f, int fd, struct fg_err *err);

/*
 * 0 when fd is still the file whose header f holds (fstat now against the
 * identity recorded then), else FG_EINPUT naming f and what changed.
 */
int fg_st_check_same(const struct fg_st_file *f, int fd, struct fg_err *err);

/*
 * Run fn(ctx, err) so that a SIGBUS raised on this thread while it runs
 * (a mapped file shrank under it: an `rsync --inplace` re-upload) ends fn
 * and returns FG_EINPUT with err saying what was read ("what": a file or
 * tensor) changed while it was read.  fn's own allocations are lost then,
 * so fn should only read mapped bytes into buffers its caller owns.  A
 * SIGBUS outside any guard keeps its default action.  Guards nest.
 */
int fg_st_guard(int (*fn)(void *ctx, struct fg_err *err), void *ctx, const char *what, struct fg_err *err);

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

/* The hash of the len bytes at name that tensor lookups use (fg_st_find_n, fg_tensor.hash). */
static inline uint32_t fg_st_name_hash(const char *name, size_t len)
{
	return fg_hash_bytes(name, len);
}

/*
 * The tensor whose name is the len bytes at name (not NUL-terminated) with
 * h == fg_st_name_hash(name, len), or NULL.  O(1).
 */
const struct fg_tensor *fg_st_find_n(const struct fg_st_file *f, const char *name, size_t len, uint32_t h);

/* The metadata value for key, or NULL. */
const char *fg_st_meta(const struct fg_st_file *f, const char *key);

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
	 * (fg_sha256_pipe, under fg_st_guard: views and spans may be mapped
	 * files), so the file is hashed as it is written and never read back;
	 * the caller finishes them after the call.  Undefined after a failure.
	 * The writer's own reads run under fg_st_guard too: a mapped source
	 * that shrinks fails the call with FG_EINPUT ("changed while it was
	 * read") and nothing is left at path.
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
