/*
 * str.h: the small string helpers every layer used to write for itself: a
 * suffix test, the 64-bit FNV-1a hash of the in-memory lookup tables, a
 * word-at-a-time hash for tensor names, and one hex digit's value.  Internal to forged: static inline, no symbols, no
 * allocation, no errors.
 */
#ifndef FG_STR_H
#define FG_STR_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* True when s ends with suffix (an empty suffix ends every string).  Both non-NULL. */
static inline bool fg_str_ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/*
 * 64-bit FNV-1a of the NUL-terminated s, with the published offset basis and
 * prime.  Only for in-process hash tables (tensor names, SQL text): a value
 * is never stored or sent, so the function may change without a migration.
 */
static inline uint64_t fg_fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return h;
}

/* fg_fnv1a of the n bytes at s (the same value as fg_fnv1a of the same C string). */
static inline uint64_t fg_fnv1a_n(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

/* qsort/bsearch order of an array of strings (const char *). */
static inline int fg_strcmp_ptr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * A 32-bit hash of the n bytes at s for in-process tables of tensor names:
 * sixteen bytes per step in two lanes, where FNV-1a takes one byte, so a
 * 60-byte name costs 4 dependent steps instead of 60.  Never stored or
 * sent (and it differs between byte orders).
 */
static inline uint32_t fg_hash_bytes(const char *s, size_t n)
{
	uint64_t a = 0x9e3779b97f4a7c15ull ^ ((uint64_t)n * 0xff51afd7ed558ccdull), b = 0x6a09e667f3bcc909ull, w, v;
	const char *start = s;

	/* Two lanes of 8 bytes, each a multiply and a rotate per step: half the dependent chain. */
	for (; n >= 16; s += 16, n -= 16) {
		memcpy(&w, s, 8);
		memcpy(&v, s + 8, 8);
		a = (a ^ w) * 0xbf58476d1ce4e5b9ull;
		b = (b ^ v) * 0x94d049bb133111ebull;
		a = (a << 31) | (a >> 33);
		b = (b << 27) | (b >> 37);
	}
	if (n >= 8) {
		memcpy(&w, s, 8);
		a = (a ^ w) * 0xbf58476d1ce4e5b9ull;
		a = (a << 31) | (a >> 33);
		s += 8;
		n -= 8;
	}
	w = 0;
	if (n && s != start) {
		/* The last n bytes, loaded as the tail of the word that ends where the bytes do. */
		memcpy(&w, s + n - 8, 8);
		w >>= 8 * (8 - n);
	} else {
		for (size_t i = 0; i < n; i++)
			w |= (uint64_t)(unsigned char)s[i] << (8 * i);
	}
	a = (a ^ w ^ b) * 0xbf58476d1ce4e5b9ull;
	a ^= a >> 31;
	a *= 0x94d049bb133111ebull;
	return (uint32_t)(a ^ (a >> 32));
}

/*
 * The next entry of the comma-separated list at *p, its blanks (spaces,
 * tabs) trimmed: *entry is its first byte and its length is returned (0
 * for an empty entry); *p moves past its comma, or to NULL after the last.
 */
static inline size_t fg_list_next(const char **p, const char **entry)
{
	const char *s = *p, *end = strchr(s, ',');
	size_t len = end ? (size_t)(end - s) : strlen(s);

	while (len && (*s == ' ' || *s == '\t')) {
		s++;
		len--;
	}
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	*entry = s;
	*p = end ? end + 1 : NULL;
	return len;
}

/* How many lowercase hex digits (0-9, a-f: a SHA-256 or git id as forged spells them) s starts with. */
static inline size_t fg_lower_hex_span(const char *s)
{
	return strspn(s, "0123456789abcdef");
}

/* What fg_hex_nibble returns for a character that is no hex digit. */
#define FG_HEX_NONE 16

/* The value of one hex digit (0-9, a-f, A-F), or FG_HEX_NONE for any other character. */
static inline int fg_hex_nibble(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return FG_HEX_NONE;
}

#endif
