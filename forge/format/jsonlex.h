/*
 * jsonlex.h: a pull reader of JSON text that accepts exactly the dialect
 * cJSON 1.7 (Debian's libcjson) accepts, without building a tree.
 *
 * Why not cJSON itself: a 100,000-tensor checkpoint's headers and index are
 * ~25 MB of JSON, and a cJSON tree costs ~64 bytes per node plus a malloc
 * per node and per string; the reader below walks the text once and hands
 * each key and value to the caller, who keeps only what it needs (a compact
 * tensor table).  docs/architecture.md ("JSON readers") argues the choice
 * against simdjson and jsmn.
 *
 * The dialect, as cJSON 1.7.15 parses it (tests/fuzz/fuzz_jsonlex_diff.c
 * compares the two on arbitrary bytes): an optional UTF-8 byte-order mark;
 * white space is any byte <= 0x20; literals null, false, true; strings may
 * hold raw control bytes, escapes are \b \f \n \r \t \" \\ \/ and \uXXXX
 * (a high surrogate must be followed by \u and a low one; a lone low one is
 * refused; a non-hex digit makes the whole escape U+0000); a number starts
 * with '-' or a digit, takes every byte of [0-9+-eE.] (Debian's 1.7.15 carries
 * 1.7.18's fix: no 63-byte buffer) and means what
 * strtod makes of them (the bytes strtod leaves are the next token); arrays
 * and objects nest at most 1000 deep; duplicate keys are kept (callers take
 * the first, as cJSON_GetObjectItemCaseSensitive does).  Decoded strings are
 * read as C strings (cut at a decoded NUL), as cJSON's users read them.
 *
 * The text must hold no NUL byte (both callers refuse such text first).
 *
 * Usage: fg_jl_init, then fg_jl_begin / fg_jl_more to walk containers,
 * fg_jl_key / fg_jl_string / fg_jl_number / fg_jl_skip for values.  Every
 * call returns false once the text is malformed, and l->bad says where.
 */
#ifndef FG_JSONLEX_H
#define FG_JSONLEX_H

#include <stdbool.h>
#include <stddef.h>

#define FG_JL_NESTING 1000 /* cJSON's CJSON_NESTING_LIMIT */

enum fg_jl_kind {
	FG_JL_NONE,   /* no value starts here */
	FG_JL_NULL,
	FG_JL_FALSE,
	FG_JL_TRUE,
	FG_JL_STRING,
	FG_JL_NUMBER,
	FG_JL_ARRAY,
	FG_JL_OBJECT,
};

struct fg_jl {
	const char *p, *end;   /* cursor and end of the text */
	const char *start;
	const char *bad;       /* where the text broke; NULL while it is fine */
	const char *tok_end;   /* just past the last token read (before white space) */
	int depth;
};

/* A string as it stands in the text: the bytes between the quotes. */
struct fg_jl_str {
	const char *raw;
	size_t len;
	bool escaped;          /* holds a backslash: decode before use */
};

/* Start reading len bytes of text (a byte-order mark and white space skipped). */
void fg_jl_init(struct fg_jl *l, const char *text, size_t len);

/* Skip white space (any byte <= 0x20). */
static inline void fg_jl_ws(struct fg_jl *l)
{
	while (l->p < l->end && (unsigned char)*l->p <= 32)
		l->p++;
}

/* Record a failure at the cursor; returns false. */
static inline bool fg_jl_fail(struct fg_jl *l)
{
	if (!l->bad)
		l->bad = l->p;
	return false;
}

/* The kind of the value at the cursor, judged by its first bytes; nothing consumed. */
enum fg_jl_kind fg_jl_peek(const struct fg_jl *l);

/* Enter the array ('[') or object ('{') at the cursor. */
bool fg_jl_begin(struct fg_jl *l, char open);

/*
 * Step inside the container entered with open: true when another element
 * (or member) follows, the cursor at it; false at the closing bracket (then
 * consumed) or on malformed text (check l->bad).  *first is true before the
 * first call of a container and is cleared here.
 */
bool fg_jl_more(struct fg_jl *l, char close, bool *first);

/* A string at the cursor (validated, escapes checked), then the white space after it. */
bool fg_jl_string(struct fg_jl *l, struct fg_jl_str *s);

/* An object member's key and its ':' (the cursor is left at the value). */
bool fg_jl_key(struct fg_jl *l, struct fg_jl_str *s);

/*
 * Decode s into out (room for s->len + 1 bytes: decoding never grows) and
 * NUL-terminate it; returns the decoded length up to the first NUL, which
 * is how cJSON's users see the string.
 */
size_t fg_jl_decode(const struct fg_jl_str *s, char *out);

/* A number at the cursor, as cJSON reads it (strtod of its leading bytes). */
bool fg_jl_number(struct fg_jl *l, double *v);

/* Any value at the cursor, validated and skipped. */
bool fg_jl_skip(struct fg_jl *l);

/* After the last value: only white space may follow (cJSON's require_null_terminated). */
bool fg_jl_end(struct fg_jl *l);

/*
 * The same for fg_json_parse's rule (forge/core/json.c): after the value
 * only spaces, tabs, CR and LF, as cJSON_ParseWithLengthOpts leaves it.
 */
bool fg_jl_end_plain(struct fg_jl *l);

#endif
