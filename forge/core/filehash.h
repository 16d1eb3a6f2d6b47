/*
 * filehash.h: the SHA-256 of a file, computed once per version of it.
 *
 * A version of a file is its (device, inode, size, mtime in ns); its
 * SHA-256 is remembered under that key in a cache folder (forged's cache:
 * $FORGED_CACHE_DIR or ~/.cache/forged for the CLI, STATE/cache under
 * serve), so a second forge of the same backbone reads none of its shards
 * to hash them: a hard link shares the inode, so an artifact's linked shards
 * hit the source's entries.  A file whose version changes while it is
 * hashed, or whose mtime is within FG_FILEHASH_RACY_NS of the moment it was
 * hashed (a write in the same clock tick could keep that mtime), is hashed
 * but not remembered.  A cache that cannot be read or written is no error:
 * the file is hashed instead.
 *
 * Entries: CACHE/v1/hashes/<sha256 of the key text>, holding the key text
 * and the SHA-256, written atomically.
 */
#ifndef FG_FILEHASH_H
#define FG_FILEHASH_H

#include <stdint.h>

#include "forge/core/error.h"
#include "forge/core/sha256.h"

#define FG_FILEHASH_RACY_NS 2000000000ll

/*
 * The SHA-256 of the regular file at path into hex: remembered (cache_dir
 * NULL: no cache), else read in chunks and hashed on a second thread.
 * *read_bytes (may be NULL) gets the bytes read to hash it (0 on a hit).
 * progress (may be NULL) is called with bytes hashed so far of the file's
 * size; a non-zero return stops (FG_ECANCELLED).  FG_EINPUT for a file that
 * cannot be opened or read or is not a regular file, FG_ENOMEM.
 */
int fg_filehash(const char *cache_dir, const char *path, char hex[FG_SHA256_HEX], uint64_t *read_bytes,
		int (*progress)(void *ctx, uint64_t done, uint64_t total), void *progress_ctx,
		struct fg_err *err);

/*
 * The same for the file open on fd (a descriptor the caller opened the
 * checked way; label names it in messages).  fd is read from its start and
 * left open.
 */
int fg_filehash_fd(const char *cache_dir, int fd, const char *label, char hex[FG_SHA256_HEX], uint64_t *read_bytes,
		   int (*progress)(void *ctx, uint64_t done, uint64_t total), void *progress_ctx,
		   struct fg_err *err);

/*
 * 1 when the cache remembers the file at path (hex filled), 0 when it does
 * not or path cannot be looked at; *size (may be NULL) gets the file's size
 * either way (0 when unknown).  Reads nothing but the entry.
 */
int fg_filehash_cached(const char *cache_dir, const char *path, char hex[FG_SHA256_HEX], uint64_t *size);

#endif
