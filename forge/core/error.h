/*
 * error.h: how forge/ reports failure.
 *
 * Every function that can fail returns 0 or a negative FG_E* code and, when
 * given a non-NULL struct fg_err, fills it with a message that names what
 * failed and the subject (file, tensor, key), ready to be shown verbatim by
 * the CLI or the API.  Lower layers never log: they return these.
 */
#ifndef FG_ERROR_H
#define FG_ERROR_H

#include <stddef.h>

enum fg_errcode {
	FG_OK = 0,
	FG_EUSAGE = -1,    /* bad arguments from the caller (exit 2) */
	FG_EINPUT = -2,    /* malformed or hostile input (exit 2) */
	FG_EIO = -3,       /* a file could not be opened, read or written (exit 2) */
	FG_ENOMEM = -4,    /* out of memory (exit 3) */
	FG_EINTERNAL = -5, /* a bug or an impossible state (exit 3) */
	FG_EVERDICT = -6,  /* input is well-formed but an error verdict refuses it (exit 1) */
	FG_ENOTFOUND = -7, /* no such record (HTTP 404) */
	FG_ECONFLICT = -8, /* an idempotency key reused with another body (HTTP 422) */
	FG_EBUSY = -9,     /* a queue or limit is full (HTTP 503) */
	FG_ECANCELLED = -10, /* stopped on request (job cancel or shutdown) */
};

#define FG_ERR_MSG_MAX 512

struct fg_err {
	int code;
	char msg[FG_ERR_MSG_MAX];
};

/*
 * Record an error in err (which may be NULL) and return code, so a caller can
 * write `return fg_err_set(err, FG_EINPUT, "...", ...)`.  A message already
 * set is replaced.
 */
int fg_err_set(struct fg_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Prefix the message already in err with a context string ("reading shard
 * 'x': ") and return err->code.  Does nothing but return code when err is NULL.
 */
int fg_err_prefix(struct fg_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The process exit code design.md section 4 gives for an error code. */
int fg_err_exit_code(int code);

/* A short word for an error code ("input", "io", ...). */
const char *fg_err_kind(int code);

#endif
