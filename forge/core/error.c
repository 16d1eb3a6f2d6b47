/*
 * error.c: the error record every forge/ function fills on failure, and the
 * mapping from error kinds to the exit codes of docs/interfaces.md section 2 (3 also
 * for a failure of forged's own state: FG_ESTATE, FG_ENOSPC).
 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int fg_err_set(struct fg_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	err->code = code;
	err->verdict = FG_ERR_NO_VERDICT;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

int fg_err_verdict(struct fg_err *err, int verdict, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return FG_EVERDICT;
	err->code = FG_EVERDICT;
	err->verdict = verdict < 0 ? FG_ERR_NO_VERDICT : verdict;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return FG_EVERDICT;
}

int fg_err_refusal(const struct fg_err *err)
{
	if (!err || err->code != FG_EVERDICT || err->verdict < 0)
		return FG_ERR_NO_VERDICT;
	return err->verdict;
}

int fg_err_prefix(struct fg_err *err, int code, const char *fmt, ...)
{
	char prefix[FG_ERR_MSG_MAX];
	char old[FG_ERR_MSG_MAX];
	va_list ap;

	if (!err)
		return code;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	/* Truncation is fine: the message is capped by design. */
	size_t plen = strnlen(prefix, sizeof(prefix) - 1);
	memcpy(err->msg, prefix, plen);
	size_t olen = strnlen(old, sizeof(old) - 1 - plen);
	memcpy(err->msg + plen, old, olen);
	err->msg[plen + olen] = '\0';
	if (!err->code)
		err->code = code;
	return err->code;
}

void fg_err_respell(struct fg_err *err, const char *from, const char *to)
{
	char out[FG_ERR_MSG_MAX];
	size_t flen = from ? strlen(from) : 0, tlen = to ? strlen(to) : 0, n = 0;
	const char *p, *hit;

	if (!err || !flen)
		return;
	for (p = err->msg; (hit = strstr(p, from)) != NULL && n < sizeof(out) - 1; p = hit + flen) {
		size_t k = (size_t)(hit - p);

		k = k < sizeof(out) - 1 - n ? k : sizeof(out) - 1 - n;
		memcpy(out + n, p, k);
		n += k;
		k = tlen < sizeof(out) - 1 - n ? tlen : sizeof(out) - 1 - n;
		memcpy(out + n, to, k);
		n += k;
	}
	if (p == err->msg)
		return; /* nothing to respell */
	if (n < sizeof(out) - 1) {
		size_t k = strnlen(p, sizeof(out) - 1 - n);

		memcpy(out + n, p, k);
		n += k;
	}
	out[n] = '\0';
	memcpy(err->msg, out, n + 1);
}

int fg_err_exit_code(int code)
{
	switch (code) {
	case FG_OK:
		return 0;
	case FG_EVERDICT:
		return 1;
	case FG_EUSAGE:
	case FG_EINPUT:
	case FG_ENOTFOUND:
	case FG_ECONFLICT:
	case FG_EFORBIDDEN:
		return 2;
	default:
		return 3; /* FG_ESTATE, FG_ENOSPC, FG_ENOMEM, FG_EINTERNAL, ... */
	}
}

const char *fg_err_kind(int code)
{
	switch (code) {
	case FG_OK:
		return "ok";
	case FG_EUSAGE:
		return "usage";
	case FG_EINPUT:
		return "input";
	case FG_ENOMEM:
		return "memory";
	case FG_EVERDICT:
		return "verdict";
	case FG_ENOTFOUND:
		return "not found";
	case FG_ECONFLICT:
		return "conflict";
	case FG_EBUSY:
		return "busy";
	case FG_ECANCELLED:
		return "cancelled";
	case FG_EFORBIDDEN:
		return "forbidden";
	case FG_ESTATE:
		return "state";
	case FG_ENOSPC:
		return "disk full";
	default:
		return "internal";
	}
}
