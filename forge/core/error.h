/*
 * error.h: how forge/ reports failure.
 *
 * Every function that can fail returns 0 or a negative FG_E* code and, when
 * given a non-NULL struct fg_err, fills it with a message that names what
 * failed and the subject (file, tensor, key), ready to be shown verbatim by
 * the CLI or the API.  Lower layers never log: they return these.
 *
 * The code, never the message, decides what happens next: the exit code,
 * the HTTP status, whether a job's failure is a refusal.  Two kinds of I/O
 * failure are told apart by the code: the user's input (a source that cannot
 * be read, an output folder that cannot be written) is FG_EINPUT, exit 2,
 * HTTP 422; forged's own state (its database, state folder or cache) is
 * FG_ESTATE or, for a full disk, FG_ENOSPC: exit 3, HTTP 503 or 507.
 */
#ifndef FG_ERROR_H
#define FG_ERROR_H

#include <stddef.h>

enum fg_errcode {
	FG_OK = 0,
	FG_EUSAGE = -1,    /* bad arguments from the caller (exit 2) */
	FG_EINPUT = -2,    /* malformed, hostile or unreadable input; an unwritable output (exit 2) */
	/* -3 is retired: it meant both the user's file and our own database. */
	FG_ENOMEM = -4,    /* out of memory (exit 3) */
	FG_EINTERNAL = -5, /* a bug or an impossible state (exit 3) */
	FG_EVERDICT = -6,  /* input is well-formed but an error verdict refuses it (exit 1) */
	FG_ENOTFOUND = -7, /* no such record (HTTP 404) */
	FG_ECONFLICT = -8, /* an idempotency key reused with another body (HTTP 422) */
	FG_EBUSY = -9,     /* a queue or limit is full (HTTP 503) */
	FG_ECANCELLED = -10, /* stopped on request (job cancel or shutdown) */
	FG_EFORBIDDEN = -11, /* a path or host the configuration does not allow (exit 2, HTTP 403) */
	FG_ESTATE = -12,   /* forged's own state failed: database busy, locked, read-only or
			      unreadable, state folder, cache (exit 3, HTTP 503 + Retry-After) */
	FG_ENOSPC = -13,   /* forged's own disk is full (exit 3, HTTP 507) */
};

#define FG_ERR_MSG_MAX 512

/* fg_err.verdict when the error is not a refusal. */
#define FG_ERR_NO_VERDICT (-1)

/*
 * verdict is the enum fg_verdict_code (forge/model/verdicts.h) of a refusal,
 * kept as a plain int because core sits below model: meaningful only when
 * code is FG_EVERDICT, and FG_ERR_NO_VERDICT for a refusal that names no
 * code.  Read it with fg_err_refusal().  It comes after msg so that the
 * `{ 0 }` initializers stay valid.
 */
struct fg_err {
	int code;
	char msg[FG_ERR_MSG_MAX];
	int verdict;
};

/*
 * Record an error in err (which may be NULL) and return code, so a caller can
 * write `return fg_err_set(err, FG_EINPUT, "...", ...)`.  A message already
 * set is replaced, and err names no verdict afterwards.
 */
int fg_err_set(struct fg_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Record a refusal: code FG_EVERDICT, verdict (an enum fg_verdict_code
 * value) and a message that is the refusal's detail (without the code: the
 * code travels as data).  Returns FG_EVERDICT.
 */
int fg_err_verdict(struct fg_err *err, int verdict, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The verdict code of a refusal in err, or FG_ERR_NO_VERDICT (also for NULL and non-refusals). */
int fg_err_refusal(const struct fg_err *err);

/*
 * Prefix the message already in err with a context string ("reading shard
 * 'x': ") and return err->code.  Does nothing but return code when err is NULL.
 * The verdict, if any, is kept.
 */
int fg_err_prefix(struct fg_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Spell every "from" in err's message as "to" (a path the message names by
 * a way a person cannot follow, such as /proc/self/fd/N, by its name),
 * cutting the message at FG_ERR_MSG_MAX.  The code and verdict are kept.
 */
void fg_err_respell(struct fg_err *err, const char *from, const char *to);

/* The process exit code docs/interfaces.md section 2 gives for an error code. */
int fg_err_exit_code(int code);

/* A short word for an error code ("input", "state", ...). */
const char *fg_err_kind(int code);

#endif
