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

#endif
