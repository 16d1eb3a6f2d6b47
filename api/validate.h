/*
 * validate.h: checking what a request says, and making what the server says
 * valid JSON.
 *
 * A request's body is checked whole before a handler acts on it, and every
 * fault is listed, each with the RFC 6901 JSON pointer of the value it is
 * about (the RFC 9457 extension member `errors` of the problem document):
 * unknown members, wrong types, strings that are not UTF-8 or hold U+0000,
 * numbers that are not integers in range.  Numbers are range-checked as
 * doubles before any conversion, so no float-to-int conversion is undefined.
 *
 * Output: every JSON answer passes through fg_json_utf8_fix, which replaces
 * each byte sequence that is not UTF-8 (names read from the file system, a
 * URL path) by U+FFFD, so a strict client can always decode the answer.
 */
#ifndef FG_API_VALIDATE_H
#define FG_API_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* Faults listed in one problem at most; further ones are counted in `more`. */
#define FG_V_MAX 16
#define FG_V_POINTER_MAX 160

struct fg_verror {
	const char *slug;                 /* problem type of this fault, e.g. "invalid-field" */
	unsigned status;                  /* 400 or 422 */
	char pointer[FG_V_POINTER_MAX];   /* "/runtimes/2", "" for the whole body */
	char parameter[64];               /* instead of a pointer: the query parameter it is about */
	char detail[240];
};

struct fg_vlist {
	struct fg_verror e[FG_V_MAX];
	size_t n;
	size_t more;                      /* faults past FG_V_MAX, not listed */
};

/* Record a fault (status 422 unless slug is "invalid-utf8" or "malformed-json": 400). */
void fg_v_add(struct fg_vlist *v, const char *slug, const char *pointer, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The same for a query parameter (the problem's errors[] names it as "parameter"). */
void fg_v_add_param(struct fg_vlist *v, const char *slug, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* out = prefix + "/" + key, key escaped as RFC 6901 says (~0, ~1), bytes that are not UTF-8 as U+FFFD. */
void fg_v_pointer(char *out, size_t size, const char *prefix, const char *key);

/* Record every member of obj that allowed (NULL-terminated) does not name: "unknown field". */
void fg_v_known(struct fg_vlist *v, const cJSON *obj, const char *prefix, const char *const *allowed);

/*
 * The string member key of obj: NULL when absent (a fault when required) or
 * not a string, or when its length is outside min..max bytes (a fault).
 */
const char *fg_v_str(struct fg_vlist *v, const cJSON *obj, const char *prefix, const char *key, bool required,
		     size_t min, size_t max);

/*
 * A JSON number that is an integer within min..max, converted: 0 and *out
 * set; -1 when it is not a finite integral number in range (nothing is
 * converted then).  min and max must lie within +-2^53.
 */
int fg_json_to_int(double d, int64_t min, int64_t max, int64_t *out);

/* ---- UTF-8 ---- */

/* True when the n bytes at s are UTF-8 (RFC 3629: no overlongs, no surrogates, at most U+10FFFF). */
bool fg_utf8_valid(const char *s, size_t n);

/*
 * Record a fault for every string (member name or value) of the JSON text
 * body that is not UTF-8 (400 invalid-utf8) or holds the escape \u0000
 * (422 invalid-field: cJSON would cut the string there, so a path
 * "a\u0000/../b" would be read as "a").  body must be JSON cJSON parsed.
 */
void fg_v_scan_json_text(struct fg_vlist *v, const char *body, size_t len);

/*
 * Replace, in every string and member name of doc, each sequence that is
 * not UTF-8 by U+FFFD (EF BF BD).  Returns how many strings changed, or -1
 * out of memory (those strings are left as they were).
 */
int fg_json_utf8_fix(cJSON *doc);

/* A malloc'd copy of the n bytes at s with each sequence that is not UTF-8 replaced by U+FFFD; NULL: ENOMEM. */
char *fg_utf8_fixed_copy(const char *s, size_t n);

#endif
