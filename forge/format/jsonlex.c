/*
 * jsonlex.c: the cJSON-dialect pull reader of jsonlex.h.  Each function
 * mirrors the cJSON 1.7.15 routine named beside it, so that the two accept
 * and refuse the same texts (tests/fuzz/fuzz_jsonlex_diff.c checks it).
 */
#include "forge/format/jsonlex.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

void fg_jl_init(struct fg_jl *l, const char *text, size_t len)
{
	l->start = l->p = l->tok_end = text;
	l->bad = NULL;
	l->end = text + len;
	l->bad = NULL;
	l->depth = 0;
	/* skip_utf8_bom: only when at least 5 bytes remain (can_access_at_index(buffer, 4)) */
	if (len > 4 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
		l->p += 3;
	fg_jl_ws(l);
}

enum fg_jl_kind fg_jl_peek(const struct fg_jl *l)
{
	size_t left = (size_t)(l->end - l->p);

	if (!left)
		return FG_JL_NONE;
	/* parse_value tries null, false, true, string, number, array, object: their first bytes differ. */
	switch (*l->p) {
	case 'n':
		return left >= 4 && memcmp(l->p, "null", 4) == 0 ? FG_JL_NULL : FG_JL_NONE;
	case 'f':
		return left >= 5 && memcmp(l->p, "false", 5) == 0 ? FG_JL_FALSE : FG_JL_NONE;
	case 't':
		return left >= 4 && memcmp(l->p, "true", 4) == 0 ? FG_JL_TRUE : FG_JL_NONE;
	case '"':
		return FG_JL_STRING;
	case '-': case '0': case '1': case '2': case '3': case '4':
	case '5': case '6': case '7': case '8': case '9':
		return FG_JL_NUMBER;
	case '[':
		return FG_JL_ARRAY;
	case '{':
		return FG_JL_OBJECT;
	default:
		return FG_JL_NONE;
	}
}

bool fg_jl_begin(struct fg_jl *l, char open)
{
	if (l->bad || l->p >= l->end || *l->p != open)
		return fg_jl_fail(l);
	if (l->depth >= FG_JL_NESTING)
		return fg_jl_fail(l);
	l->depth++;
	l->p++;
	fg_jl_ws(l);
	return true;
}

bool fg_jl_more(struct fg_jl *l, char close, bool *first)
{
	if (l->bad)
		return false;
	if (*first) {
		*first = false;
		if (l->p < l->end && *l->p == close)
			goto closed;
		return l->p < l->end ? true : fg_jl_fail(l);
	}
	if (l->p < l->end && *l->p == ',') {
		l->p++;
		fg_jl_ws(l);
		return true;
	}
	if (l->p < l->end && *l->p == close)
		goto closed;
	return fg_jl_fail(l);
closed:
	l->p++;
	l->tok_end = l->p;
	l->depth--;
	fg_jl_ws(l);
	return false;
}

static unsigned hex4(const char *s)
{
	unsigned h = 0;

	/* parse_hex4: any non-hex digit makes the whole value 0 */
	for (int i = 0; i < 4; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= '0' && c <= '9')
			h = (h << 4) | (unsigned)(c - '0');
		else if (c >= 'A' && c <= 'F')
			h = (h << 4) | (unsigned)(c - 'A' + 10);
		else if (c >= 'a' && c <= 'f')
			h = (h << 4) | (unsigned)(c - 'a' + 10);
		else
			return 0;
	}
	return h;
}

/*
 * utf16_literal_to_utf8: the escape at s (s[0] == '\\', s[1] == 'u') with
 * end the closing quote.  Returns the escape's length (6 or 12) and the code
 * point in *cp, or 0 when cJSON refuses it.
 */
static size_t utf16_escape(const char *s, const char *end, unsigned *cp)
{
	unsigned first, second;

	if (end - s < 6)
		return 0;
	first = hex4(s + 2);
	if (first >= 0xDC00 && first <= 0xDFFF)
		return 0;
	if (first < 0xD800 || first > 0xDBFF) {
		*cp = first;
		return 6;
	}
	if (end - (s + 6) < 6 || s[6] != '\\' || s[7] != 'u')
		return 0;
	second = hex4(s + 8);
	if (second < 0xDC00 || second > 0xDFFF)
		return 0;
	*cp = 0x10000 + (((first & 0x3FF) << 10) | (second & 0x3FF));
	return 12;
}

/* The first '"' or '\\' in [q, end), or end. */
static inline const char *quote_or_backslash(const char *q, const char *end)
{
#ifdef __SSE2__
	/* Sixteen bytes at a time (SSE2 is in every x86-64 CPU). */
	const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');

	while (end - q >= 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)q);
		unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)));

		if (m)
			return q + __builtin_ctz(m);
		q += 16;
	}
#endif
	/* Eight bytes at a time while none is a quote or a backslash. */
	while (end - q >= 8) {
		uint64_t w, a, b;

		memcpy(&w, q, 8);
		a = w ^ 0x2222222222222222ull;    /* '"' bytes become 0 */
		b = w ^ 0x5c5c5c5c5c5c5c5cull;    /* '\\' bytes become 0 */
		if (((a - 0x0101010101010101ull) & ~a & 0x8080808080808080ull) ||
		    ((b - 0x0101010101010101ull) & ~b & 0x8080808080808080ull))
			break;
		q += 8;
	}
	while (q < end && *q != '"' && *q != '\\')
		q++;
	return q;
}

bool fg_jl_string(struct fg_jl *l, struct fg_jl_str *s)
{
	const char *p = l->p + 1, *q;

	if (l->bad || l->p >= l->end || *l->p != '"')
		return fg_jl_fail(l);
	s->raw = p;
	s->escaped = false;
	/* The end: the first quote not escaped (a backslash skips one byte). */
	for (;;) {
		q = quote_or_backslash(p, l->end);
		if (q >= l->end)
			return fg_jl_fail(l);
		if (*q == '"')
			break;
		s->escaped = true;
		if (q + 1 >= l->end)
			return fg_jl_fail(l);
		p = q + 2;
	}
	s->len = (size_t)(q - s->raw);
	if (s->escaped) {
		/* Validate every escape as the copy loop of parse_string does. */
		for (const char *c = s->raw; c < q; ) {
			unsigned cp;
			size_t n;

			if (*c != '\\') {
				c++;
				continue;
			}
			switch (c[1]) {
			case 'b': case 'f': case 'n': case 'r': case 't': case '"': case '\\': case '/':
				c += 2;
				break;
			case 'u':
				n = utf16_escape(c, q, &cp);
				if (!n) {
					l->p = c;
					return fg_jl_fail(l);
				}
				c += n;
				break;
			default:
				l->p = c;
				return fg_jl_fail(l);
			}
		}
	}
	l->p = l->tok_end = q + 1;
	fg_jl_ws(l);
	return true;
}

bool fg_jl_key(struct fg_jl *l, struct fg_jl_str *s)
{
	if (!fg_jl_string(l, s))
		return false;
	if (l->p >= l->end || *l->p != ':')
		return fg_jl_fail(l);
	l->p++;
	fg_jl_ws(l);
	return true;
}

size_t fg_jl_decode(const struct fg_jl_str *s, char *out)
{
	const char *c = s->raw, *end = s->raw + s->len;
	char *o = out;

	if (!s->escaped) {
		/* The text holds no NUL byte (callers check): nothing to cut. */
		memcpy(out, s->raw, s->len);
		out[s->len] = '\0';
		return s->len;
	}
	while (c < end) {
		unsigned cp = 0;
		size_t n;

		if (*c != '\\') {
			*o++ = *c++;
			continue;
		}
		switch (c[1]) {
		case 'b': *o++ = '\b'; c += 2; continue;
		case 'f': *o++ = '\f'; c += 2; continue;
		case 'n': *o++ = '\n'; c += 2; continue;
		case 'r': *o++ = '\r'; c += 2; continue;
		case 't': *o++ = '\t'; c += 2; continue;
		case 'u': break;
		default: *o++ = c[1]; c += 2; continue; /* '"', '\\', '/' */
		}
		n = utf16_escape(c, end, &cp); /* validated by fg_jl_string */
		c += n ? n : 6;
		if (cp < 0x80) {
			*o++ = (char)cp;
		} else if (cp < 0x800) {
			*o++ = (char)(0xC0 | (cp >> 6));
			*o++ = (char)(0x80 | (cp & 0x3F));
		} else if (cp < 0x10000) {
			*o++ = (char)(0xE0 | (cp >> 12));
			*o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
			*o++ = (char)(0x80 | (cp & 0x3F));
		} else {
			*o++ = (char)(0xF0 | (cp >> 18));
			*o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
			*o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
			*o++ = (char)(0x80 | (cp & 0x3F));
		}
	}
	*o = '\0';
	return strnlen(out, (size_t)(o - out));
}

bool fg_jl_number(struct fg_jl *l, double *v)
{
	char small[64], *buf = small, *after;
	size_t n = 0, left = (size_t)(l->end - l->p);
	bool digits = true;
	double d;

	if (l->bad || !left || (*l->p != '-' && (*l->p < '0' || *l->p > '9')))
		return fg_jl_fail(l);
	/* parse_number (as patched in Debian's 1.7.15, like 1.7.18): every byte of [0-9+-eE.], then strtod */
	while (n < left) {
		char c = l->p[n];

		if (c >= '0' && c <= '9') {
			n++;
		} else if (c == '+' || c == '-' || c == 'e' || c == 'E' || c == '.') {
			n++;
			digits = false;
		} else {
			break;
		}
	}
	if (digits && n <= 15) {
		/* Plain digits: strtod takes them all and the value is exact. */
		uint64_t x = 0;

		for (size_t i = 0; i < n; i++)
			x = x * 10 + (uint64_t)(l->p[i] - '0');
		*v = (double)x;
		l->p += n;
		l->tok_end = l->p;
		fg_jl_ws(l);
		return true;
	}
	if (n >= sizeof(small) && !(buf = malloc(n + 1)))
		return fg_jl_fail(l);
	memcpy(buf, l->p, n);
	buf[n] = '\0';
	d = strtod(buf, &after);
	n = (size_t)(after - buf);
	if (buf != small)
		free(buf);
	if (!n)
		return fg_jl_fail(l);
	*v = d;
	l->p += n;
	l->tok_end = l->p;
	fg_jl_ws(l);
	return true;
}

bool fg_jl_skip(struct fg_jl *l)
{
	struct fg_jl_str s;
	double d;
	bool first = true;

	switch (fg_jl_peek(l)) {
	case FG_JL_NULL:
	case FG_JL_TRUE:
		l->p += 4;
		l->tok_end = l->p;
		fg_jl_ws(l);
		return true;
	case FG_JL_FALSE:
		l->p += 5;
		l->tok_end = l->p;
		fg_jl_ws(l);
		return true;
	case FG_JL_STRING:
		return fg_jl_string(l, &s);
	case FG_JL_NUMBER:
		return fg_jl_number(l, &d);
	case FG_JL_ARRAY:
		if (!fg_jl_begin(l, '['))
			return false;
		while (fg_jl_more(l, ']', &first))
			if (!fg_jl_skip(l))
				return false;
		return !l->bad;
	case FG_JL_OBJECT:
		if (!fg_jl_begin(l, '{'))
			return false;
		while (fg_jl_more(l, '}', &first))
			if (!fg_jl_key(l, &s) || !fg_jl_skip(l))
				return false;
		return !l->bad;
	default:
		return fg_jl_fail(l);
	}
}

bool fg_jl_end(struct fg_jl *l)
{
	if (l->bad)
		return false;
	fg_jl_ws(l);
	return l->p == l->end ? true : fg_jl_fail(l);
}

bool fg_jl_end_plain(struct fg_jl *l)
{
	const char *c = l->tok_end;

	if (l->bad)
		return false;
	while (c < l->end && (*c == ' ' || *c == '\n' || *c == '\r' || *c == '\t'))
		c++;
	if (c == l->end)
		return true;
	l->p = c;
	return fg_jl_fail(l);
}
