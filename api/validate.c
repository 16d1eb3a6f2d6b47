/*
 * validate.c: request checks with JSON pointers, number ranges, UTF-8
 * (validate.h).
 */
#include "api/validate.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- faults ---- */

void fg_v_add(struct fg_vlist *v, const char *slug, const char *pointer, const char *fmt, ...)
{
	struct fg_verror *e;
	va_list ap;

	if (v->n == FG_V_MAX) {
		v->more++;
		return;
	}
	e = &v->e[v->n++];
	e->slug = slug;
	e->status = strcmp(slug, "invalid-utf8") == 0 || strcmp(slug, "malformed-json") == 0 ? 400 : 422;
	snprintf(e->pointer, sizeof(e->pointer), "%s", pointer ? pointer : "");
	e->parameter[0] = '\0';
	va_start(ap, fmt);
	vsnprintf(e->detail, sizeof(e->detail), fmt, ap);
	va_end(ap);
}

void fg_v_add_param(struct fg_vlist *v, const char *slug, const char *name, const char *fmt, ...)
{
	struct fg_verror *e;
	va_list ap;

	if (v->n == FG_V_MAX) {
		v->more++;
		return;
	}
	e = &v->e[v->n++];
	e->slug = slug;
	e->status = strcmp(slug, "invalid-utf8") == 0 ? 400 : 422;
	e->pointer[0] = '\0';
	snprintf(e->parameter, sizeof(e->parameter), "%s", name);
	va_start(ap, fmt);
	vsnprintf(e->detail, sizeof(e->detail), fmt, ap);
	va_end(ap);
}

/* ---- UTF-8 ---- */

/* Length of the UTF-8 sequence at s (n bytes left), 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0];

	if (c < 0x80)
		return 1;
	if (c < 0xC2 || c > 0xF4)
		return 0; /* a continuation byte, an overlong lead, or past U+10FFFF */
	if (c < 0xE0)
		return n >= 2 && (s[1] & 0xC0) == 0x80 ? 2 : 0;
	if (c < 0xF0) {
		if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
			return 0;
		if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0))
			return 0; /* overlong, or a UTF-16 surrogate */
		return 3;
	}
	if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
		return 0;
	if ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))
		return 0;
	return 4;
}

bool fg_utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;

	while (n) {
		size_t k = utf8_seq(p, n);

		if (!k)
			return false;
		p += k;
		n -= k;
	}
	return true;
}

/* Copy n bytes of s into out (cap bytes, NUL-terminated), bad sequences as U+FFFD; the length written. */
static size_t utf8_fix_into(char *out, size_t cap, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0;

	if (!cap)
		return 0;
	while (n) {
		size_t k = utf8_seq(p, n);
		const char *src = k ? (const char *)p : "\xEF\xBF\xBD";
		size_t len = k ? k : 3;

		if (o + len >= cap)
			break;
		memcpy(out + o, src, len);
		o += len;
		p += k ? k : 1;
		n -= k ? k : 1;
	}
	out[o] = '\0';
	return o;
}

char *fg_utf8_fixed_copy(const char *s, size_t n)
{
	/* Each bad byte becomes 3: the worst case. */
	size_t cap = 3 * n + 1;
	char *out = malloc(cap);

	if (out)
		utf8_fix_into(out, cap, s, n);
	return out;
}

/* Replace *str (a cJSON-owned string, or a constant when is_const) by its fixed copy. */
static int fix_string(char **str, int is_const)
{
	size_t n = strlen(*str), cap = 3 * n + 1;
	char *fixed = cJSON_malloc(cap);

	if (!fixed)
		return -1;
	utf8_fix_into(fixed, cap, *str, n);
	if (!is_const)
		cJSON_free(*str);
	*str = fixed;
	return 0;
}

int fg_json_utf8_fix(cJSON *doc)
{
	int changed = 0, rc = 0;

	if (!doc)
		return 0;
	if (doc->string && !fg_utf8_valid(doc->string, strlen(doc->string))) {
		if (fix_string(&doc->string, (doc->type & cJSON_StringIsConst) != 0))
			rc = -1;
		else {
			doc->type &= ~cJSON_StringIsConst;
			changed++;
		}
	}
	if (cJSON_IsString(doc) && !(doc->type & cJSON_IsReference) && doc->valuestring &&
	    !fg_utf8_valid(doc->valuestring, strlen(doc->valuestring))) {
		if (fix_string(&doc->valuestring, 0))
			rc = -1;
		else
			changed++;
	}
	for (cJSON *c = doc->child; c; c = c->next) {
		int n = fg_json_utf8_fix(c);

		if (n < 0)
			rc = -1;
		else
			changed += n;
	}
	return rc ? rc : changed;
}

/* ---- pointers and members ---- */

void fg_v_pointer(char *out, size_t size, const char *prefix, const char *key)
{
	char fixed[FG_V_POINTER_MAX];
	size_t o;

	if (!size)
		return;
	snprintf(out, size, "%s/", prefix ? prefix : "");
	o = strlen(out);
	utf8_fix_into(fixed, sizeof(fixed), key, strlen(key));
	for (const char *k = fixed; *k && o + 3 < size; k++) {
		if (*k == '~' || *k == '/') {
			out[o++] = '~';
			out[o++] = *k == '~' ? '0' : '1';
		} else {
			out[o++] = *k;
		}
	}
	out[o] = '\0';
}

void fg_v_known(struct fg_vlist *v, const cJSON *obj, const char *prefix, const char *const *allowed)
{
	const cJSON *it;

	cJSON_ArrayForEach(it, obj) {
		char ptr[FG_V_POINTER_MAX];
		int known = 0;

		for (size_t i = 0; allowed[i] && !known; i++)
			known = strcmp(allowed[i], it->string) == 0;
		if (known)
			continue;
		fg_v_pointer(ptr, sizeof(ptr), prefix, it->string);
		fg_v_add(v, "invalid-field", ptr, "unknown field");
	}
}

const char *fg_v_str(struct fg_vlist *v, const cJSON *obj, const char *prefix, const char *key, bool required,
		     size_t min, size_t max)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
	char ptr[FG_V_POINTER_MAX];
	size_t n;

	fg_v_pointer(ptr, sizeof(ptr), prefix, key);
	if (!it) {
		if (required)
			fg_v_add(v, "invalid-field", ptr, "required, a string");
		return NULL;
	}
	if (!cJSON_IsString(it) || !it->valuestring) {
		fg_v_add(v, "invalid-field", ptr, "must be a string");
		return NULL;
	}
	n = strlen(it->valuestring);
	if (n < min || n > max) {
		if (min == max)
			fg_v_add(v, "invalid-field", ptr, "must be %zu bytes", min);
		else
			fg_v_add(v, "invalid-field", ptr, "must be %zu to %zu bytes (is %zu)", min, max, n);
		return NULL;
	}
	return it->valuestring;
}

int fg_json_to_int(double d, int64_t min, int64_t max, int64_t *out)
{
	/* Compared as doubles first: converting one out of int64_t's range is undefined. */
	if (!isfinite(d) || d < (double)min || d > (double)max || d != floor(d))
		return -1;
	*out = (int64_t)d;
	return 0;
}

/* ---- the raw text: UTF-8 and \u0000 with their pointers ---- */

struct scan {
	const char *p, *end;
	struct fg_vlist *v;
	char ptr[FG_V_POINTER_MAX];
	int ctrl;              /* the last string held a raw control character (below U+0020) */
};

static void skip_ws(struct scan *sc)
{
	while (sc->p < sc->end && (*sc->p == ' ' || *sc->p == '\t' || *sc->p == '\n' || *sc->p == '\r'))
		sc->p++;
}

static int hex4(const char *p, const char *end, unsigned *out)
{
	unsigned v = 0;

	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

		if (d < 0)
			return -1;
		v = v << 4 | (unsigned)d;
	}
	*out = v;
	return 0;
}

/*
 * A string token at sc->p ('"'): checked, and decoded into key (keycap
 * bytes, may be NULL) for a pointer.  *bad_utf8 / *nul say what it holds.
 */
static void scan_string(struct scan *sc, char *key, size_t keycap, int *bad_utf8, int *nul)
{
	size_t k = 0;

	*bad_utf8 = *nul = 0;
	sc->ctrl = 0;
	sc->p++; /* the quote */
	while (sc->p < sc->end && *sc->p != '"') {
		const unsigned char *u = (const unsigned char *)sc->p;

		/* RFC 8259 section 7: cJSON takes a raw tab or newline, SQLite's JSON and strict clients do not. */
		if (*u < 0x20)
			sc->ctrl = 1;

		if (*u == '\\' && sc->end - sc->p >= 2) {
			unsigned cp;

			if (sc->p[1] == 'u' && hex4(sc->p + 2, sc->end, &cp) == 0) {
				if (cp == 0)
					*nul = 1;
				/* For the pointer only: the BMP code point as UTF-8 (pairs as U+FFFD). */
				if (cp >= 0xD800 && cp <= 0xDFFF)
					cp = 0xFFFD;
				if (key && k + 4 < keycap) {
					if (cp < 0x80) {
						key[k++] = cp ? (char)cp : '?';
					} else if (cp < 0x800) {
						key[k++] = (char)(0xC0 | cp >> 6);
						key[k++] = (char)(0x80 | (cp & 0x3F));
					} else {
						key[k++] = (char)(0xE0 | cp >> 12);
						key[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
						key[k++] = (char)(0x80 | (cp & 0x3F));
					}
				}
				sc->p += 6;
				continue;
			}
			if (key && k + 1 < keycap) {
				static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
				const char *f = strchr(from, sc->p[1]);

				key[k++] = f ? to[f - from] : sc->p[1];
			}
			sc->p += 2;
			continue;
		}
		{
			size_t n = utf8_seq(u, (size_t)(sc->end - sc->p));

			if (!n) {
				*bad_utf8 = 1;
				n = 1;
			}
			if (key && k + n < keycap) {
				memcpy(key + k, sc->p, n);
				k += n;
			}
			sc->p += n;
		}
	}
	if (sc->p < sc->end)
		sc->p++; /* the closing quote */
	if (key && keycap)
		key[k < keycap ? k : keycap - 1] = '\0';
}

static void string_faults(struct scan *sc, int bad_utf8, int nul, int is_key)
{
	if (bad_utf8)
		fg_v_add(sc->v, "invalid-utf8", sc->ptr, is_key ? "the member name is not valid UTF-8"
								  : "not valid UTF-8");
	if (nul)
		fg_v_add(sc->v, "invalid-field", sc->ptr, "%s holds U+0000 (\\u0000), which no name or path may hold",
			 is_key ? "the member name" : "the string");
	if (sc->ctrl)
		fg_v_add(sc->v, "malformed-json", sc->ptr,
			 "%s holds a raw control character (below U+0020); JSON requires it escaped (RFC 8259 section 7)",
			 is_key ? "the member name" : "the string");
}

static void scan_value(struct scan *sc, int depth)
{
	int bad_utf8, nul;

	skip_ws(sc);
	if (sc->p >= sc->end || depth > 64)
		return;
	if (*sc->p == '"') {
		scan_string(sc, NULL, 0, &bad_utf8, &nul);
		string_faults(sc, bad_utf8, nul, 0);
	} else if (*sc->p == '{' || *sc->p == '[') {
		int object = *sc->p == '{';
		size_t saved = strlen(sc->ptr);
		long index = 0;

		sc->p++;
		for (;;) {
			skip_ws(sc);
			if (sc->p >= sc->end)
				return;
			if (*sc->p == '}' || *sc->p == ']') {
				sc->p++;
				break;
			}
			if (object) {
				char key[FG_V_POINTER_MAX];

				if (*sc->p != '"')
					return; /* cJSON parsed it: cannot happen */
				scan_string(sc, key, sizeof(key), &bad_utf8, &nul);
				fg_v_pointer(sc->ptr + saved, sizeof(sc->ptr) - saved, "", key);
				string_faults(sc, bad_utf8, nul, 1);
				skip_ws(sc);
				if (sc->p < sc->end && *sc->p == ':')
					sc->p++;
			} else {
				snprintf(sc->ptr + saved, sizeof(sc->ptr) - saved, "/%ld", index++);
			}
			scan_value(sc, depth + 1);
			sc->ptr[saved] = '\0';
			skip_ws(sc);
			if (sc->p < sc->end && *sc->p == ',')
				sc->p++;
		}
	} else {
		while (sc->p < sc->end && !strchr(",]} \t\r\n", *sc->p))
			sc->p++;
	}
}

void fg_v_scan_json_text(struct fg_vlist *v, const char *body, size_t len)
{
	struct scan sc = { body, body + len, v, "", 0 };

	scan_value(&sc, 0);
}
