/*
 * auth.h: bearer tokens from a tokens file.
 *
 * One `ROLE NAME SHA256HEX` line per token (role `read` or `write`; the hash
 * of the token text; `#` starts a comment).  Lines are read whole; one
 * longer than FG_TOKENS_LINE_MAX bytes (comments too) refuses the file,
 * naming the line.  A presented token is hashed and
 * compared with every entry in constant time, so timing tells nothing about
 * which entry came close.
 */
#ifndef FG_AUTH_H
#define FG_AUTH_H

#include <stddef.h>

#include "forge/core/error.h"

enum fg_role {
	FG_ROLE_NONE = 0,
	FG_ROLE_READ = 1,
	FG_ROLE_WRITE = 2,
};

#define FG_TOKENS_MAX 1024
#define FG_TOKENS_LINE_MAX 511   /* bytes of one line, without its newline */

struct fg_token {
	enum fg_role role;
	char name[64];
	unsigned char sha256[32];
};

struct fg_tokens {
	size_t n;
	struct fg_token *t;
};

/* Load path into *out (replacing nothing on failure).  Errors name the line. */
int fg_tokens_load(struct fg_tokens *out, const char *path, struct fg_err *err);
void fg_tokens_release(struct fg_tokens *t);

/* The role of token (NUL-terminated text), FG_ROLE_NONE when it matches nothing; *name (may be NULL) borrows the entry's name. */
enum fg_role fg_tokens_check(const struct fg_tokens *t, const char *token, const char **name);

#endif
