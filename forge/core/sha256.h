/*
 * sha256.h: SHA-256 of files and byte streams (libcrypto, which uses
 * SHA-NI where the CPU has it).  A file's SHA-256 equals its Hugging Face
 * LFS oid, so provenance can be checked against the hub.
 */
#ifndef FG_SHA256_H
#define FG_SHA256_H

#include <stddef.h>

#include "forge/core/error.h"

#define FG_SHA256_HEX 65 /* 64 hex digits and a NUL */

struct fg_sha256;

/* A running hash; the caller frees it with fg_sha256_free. NULL on ENOMEM. */
struct fg_sha256 *fg_sha256_new(void);
void fg_sha256_update(struct fg_sha256 *h, const void *data, size_t len);
/* Finish into hex (64 lower-case digits and a NUL).  h stays the caller's to free; it takes no more updates. */
void fg_sha256_final_hex(struct fg_sha256 *h, char hex[FG_SHA256_HEX]);
/* NULL allowed. */
void fg_sha256_free(struct fg_sha256 *h);

/* SHA-256 of a whole file, read in chunks. */
int fg_sha256_file(const char *path, char hex[FG_SHA256_HEX], struct fg_err *err);

/* SHA-256 of a buffer. */
void fg_sha256_buf(const void *data, size_t len, char hex[FG_SHA256_HEX]);

/*
 * A hash pipe: n running hashes fed one byte stream, each on a thread of its
 * own, so a writer hashes what it writes at the cost of handing over
 * pointers (on another core when there is one).  Chunks are pushed in
 * order; each thread hashes every chunk, in that order, into its hash.  A
 * chunk's bytes must stay as they are until fg_sha256_pipe_wait() has
 * returned for its ticket (or the pipe is finished): a writer reusing a
 * buffer waits for the ticket of its last push first.  At most
 * FG_SHA256_PIPE_DEPTH chunks are in flight; a push beyond waits.  A pipe
 * whose threads could not start hashes on the pushing thread instead, so
 * the result is the same either way.  One thread pushes; the hashes are the
 * caller's and are read (final_hex) after fg_sha256_pipe_finish.
 *
 * Chunks may be views of mapped files, which raise SIGBUS on the thread
 * that reads them when the file shrinks underneath: a pipe started with a
 * guard (fg_st_guard's shape, forge/format/safetensors.h, passed down so
 * this layer needs no signals of its own) runs every update under it, and
 * a chunk the guard stopped leaves its hash unfinished and makes
 * fg_sha256_pipe_finish fail, instead of killing the process.
 */
#define FG_SHA256_PIPE_DEPTH 16

struct fg_sha256_pipe;

typedef int (*fg_sha256_guard)(int (*fn)(void *ctx, struct fg_err *err), void *ctx, const char *what,
			       struct fg_err *err);

/* Start a pipe over hashes[0..n) (borrowed; n may be 0: pushes do nothing).  NULL on ENOMEM. */
struct fg_sha256_pipe *fg_sha256_pipe_start(struct fg_sha256 *const *hashes, size_t n);
/* The same, every update run under guard (NULL: none). */
struct fg_sha256_pipe *fg_sha256_pipe_start_guarded(struct fg_sha256 *const *hashes, size_t n,
						     fg_sha256_guard guard);
/* Hand over len bytes at data; returns the chunk's ticket (1, 2, ...). */
unsigned long long fg_sha256_pipe_push(struct fg_sha256_pipe *p, const void *data, size_t len);
/* Wait until every hash has taken chunk ticket (and every one before it). */
void fg_sha256_pipe_wait(struct fg_sha256_pipe *p, unsigned long long ticket);
/*
 * Wait for every chunk, stop the threads and free the pipe.  NULL allowed.
 * 0, or FG_EINPUT when the guard stopped a chunk's hashing (the bytes could
 * not be read: the hashes are not the stream's).
 */
int fg_sha256_pipe_finish(struct fg_sha256_pipe *p);

#endif
