/*
 * safetensors.c: the strict reader declared in safetensors.h (the writer is
 * safetensors_write.c).
 *
 * Validation follows the format's reference implementation (huggingface/
 * safetensors, tensor.rs) and adds what a C reader must check by hand: the
 * header length is capped and must fit in the file, the header is UTF-8 JSON
 * with no NUL bytes, every number that becomes a size is an exact non-negative
 * integer, products are checked for overflow before use, and the data offsets
 * must tile the data section with no gap, overlap or trailing byte.  Each
 * rejection has its own message so an operator can tell a truncated upload
 * from a converter bug.
 *
 * The header is read in one pass by the cJSON-dialect reader of jsonlex.h
 * into a compact tensor table (no tree), entries in the writers' own
 * spelling by a fast path that gives the same entry (fast_entry);
 * duplicate keys are kept as cJSON kept them, and duplicate names are
 * caught with the same hash table that later serves name lookups.
 */
#include "forge/format/safetensors.h"

#include "forge/core/grow.h"
#include "forge/core/str.h"
#include "forge/format/jsonlex.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define MAX_EXACT_INT 9007199254740992.0 /* 2^53: larger doubles are not exact */
#define FG_EAGAIN_SYNTAX 1 /* private: a meaning check found the text to be no JSON: report that */

int fg_shape_nelem(const uint64_t *shape, int rank, uint64_t *out)
{
	uint64_t n = 1;

	for (int i = 0; i < rank; i++) {
		if (shape[i] && n > UINT64_MAX / shape[i])
			return FG_EINPUT;
		n *= shape[i];
	}
	*out = n;
	return 0;
}

static uint64_t load_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* How many leading bytes of s (len bytes) are ASCII and not NUL, give or take the last few. */
static size_t ascii_run(const uint8_t *s, size_t len)
{
	size_t i = 0;

#ifdef __SSE2__
	/* 64 bytes a step: a byte with its high bit set, or a zero byte (cmpeq sets it to 0xff), stops it. */
	const __m128i zero = _mm_setzero_si128();

	while (len - i >= 64) {
		const __m128i *v = (const __m128i *)(const void *)(s + i);
		__m128i a = _mm_loadu_si128(v), b = _mm_loadu_si128(v + 1), c = _mm_loadu_si128(v + 2),
			d = _mm_loadu_si128(v + 3);
		__m128i high = _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d));
		__m128i nul = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(a, zero), _mm_cmpeq_epi8(b, zero)),
					   _mm_or_si128(_mm_cmpeq_epi8(c, zero), _mm_cmpeq_epi8(d, zero)));

		if (_mm_movemask_epi8(_mm_or_si128(high, nul)))
			break;
		i += 64;
	}
#endif
	/* Eight bytes at a time: no high bit set and no zero byte. */
	while (len - i >= 8) {
		uint64_t w;

		memcpy(&w, s + i, 8);
		if ((w & 0x8080808080808080ull) || ((w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull))
			break;
		i += 8;
	}
	return i;
}

/* Returns the offset of the first byte that breaks UTF-8 (or is NUL), or len. */
static size_t utf8_bad_at(const uint8_t *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint8_t c;
		size_t need;
		uint32_t cp, min;

		i += ascii_run(s + i, len - i);
		if (i >= len)
			break;
		c = s[i];
		if (c == 0)
			return i;
		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			need = 1; cp = c & 0x1f; min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			need = 2; cp = c & 0x0f; min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			need = 3; cp = c & 0x07; min = 0x10000;
		} else {
			return i;
		}
		if (len - i <= need)
			return i;
		for (size_t k = 1; k <= need; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += need + 1;
	}
	return len;
}

/*
 * The name table: n_slots slots (at least 1.5 per tensor, not a power of
 * two: a file of 22,000 tensors would round 33,000 up to 65,536) of index + 1,
 * 0 = empty, 16 bits wide when every index + 1 fits, probed linearly from
 * the slot the hash's high bits pick (h * n_slots / 2^32).
 */
static inline size_t slot_get(const struct fg_st_file *f, size_t i)
{
	return f->slots16 ? f->slots16[i] : f->slots[i];
}

static inline void slot_set(struct fg_st_file *f, size_t i, size_t v)
{
	if (f->slots16)
		f->slots16[i] = (uint16_t)v;
	else
		f->slots[i] = (uint32_t)v;
}

static inline size_t slot_first(const struct fg_st_file *f, uint32_t h)
{
	return (size_t)(((uint64_t)h * f->n_slots) >> 32);
}

static inline size_t slot_next(const struct fg_st_file *f, size_t i)
{
	return i + 1 == f->n_slots ? 0 : i + 1;
}

/* The slot holding name (hash h), or the empty slot where it would go. */
static size_t slot_of_h(const struct fg_st_file *f, const char *name, uint32_t h)
{
	size_t i = slot_first(f, h), k;

	while ((k = slot_get(f, i))) {
		const struct fg_tensor *t = &f->tensors[k - 1];

		if (t->hash == h && strcmp(t->name, name) == 0)
			break;
		i = slot_next(f, i);
	}
	return i;
}

const struct fg_tensor *fg_st_find(const struct fg_st_file *f, const char *name)
{
	size_t k;

	if (!f || !f->n_slots)
		return NULL;
	k = slot_get(f, slot_of_h(f, name, fg_st_name_hash(name, strlen(name))));
	return k ? &f->tensors[k - 1] : NULL;
}

const struct fg_tensor *fg_st_find_n(const struct fg_st_file *f, const char *name, size_t len, uint32_t h)
{
	size_t i, k;

	if (!f || !f->n_slots)
		return NULL;
	for (i = slot_first(f, h); (k = slot_get(f, i)); i = slot_next(f, i)) {
		const struct fg_tensor *t = &f->tensors[k - 1];

		if (t->hash == h && memcmp(t->name, name, len) == 0 && t->name[len] == '\0')
			return t;
	}
	return NULL;
}

const char *fg_st_meta(const struct fg_st_file *f, const char *key)
{
	for (size_t i = 0; f && i < f->n_meta; i++)
		if (strcmp(f->meta[i].key, key) == 0)
			return f->meta[i].value;
	return NULL;
}

/* A checkpoint holds hundreds of thousands of tensors: the table's bytes per tensor are counted. */
_Static_assert(sizeof(struct fg_tensor) == 40, "struct fg_tensor is 40 bytes");

/* A chunk of a file's shape pool (see intern_shape). */
#define SHAPES_PER_CHUNK 64

struct fg_st_shapes {
	struct fg_st_shapes *next;
	size_t used;
	uint64_t dims[SHAPES_PER_CHUNK][FG_ST_MAX_RANK];
};

void fg_st_close(struct fg_st_file *f)
{
	if (!f)
		return;
	if (f->owns_map && f->map)
		munmap((void *)f->map, f->map_len);
	free(f->path);
	if (!f->in_slab) {
		free(f->tensors);
		free(f->strings);
	}
	while (f->shapes) { /* even in a slab: a slab's tensors are not read after their file is closed */
		struct fg_st_shapes *c = f->shapes;

		f->shapes = c->next;
		free(c);
	}
	free(f->meta);
	free(f->meta_text);
	free(f->slots);
	free(f->slots16);
	free(f);
}

/*
 * One JSON value as the old tree held it: its kind and, for numbers, the
 * value; exact numbers (plain digits, read by the fast path) also as u.
 */
struct jval {
	enum fg_jl_kind kind;
	bool exact;
	double num;
	uint64_t u;
};

/* Read a JSON number that must be an exact integer in [0, 2^53]; FG_EINPUT and *why otherwise. */
static int json_u64(const struct jval *v, uint64_t *out, const char **why)
{
	double d;

	if (v->kind != FG_JL_NUMBER) {
		*why = "is not a number";
		return FG_EINPUT;
	}
	if (v->exact) { /* at most 15 digits: an integer below 2^53 */
		*out = v->u;
		return 0;
	}
	d = v->num;
	if (d < 0) {
		*why = "is negative";
		return FG_EINPUT;
	}
	/* NaN and infinities fail the range test; every double above 2^53 is an integer, so "too large". */
	if (!(d <= MAX_EXACT_INT)) {
		*why = isfinite(d) ? "is too large" : "is not an integer";
		return FG_EINPUT;
	}
	if ((double)(uint64_t)d != d) {
		*why = "is not an integer";
		return FG_EINPUT;
	}
	*out = (uint64_t)d;
	return 0;
}

/* A value at the cursor, kept as a jval (numbers read, anything else validated and skipped). */
static bool read_jval(struct fg_jl *l, struct jval *v)
{
	v->exact = false;
	v->kind = fg_jl_peek(l);
	if (v->kind == FG_JL_NUMBER)
		return fg_jl_number(l, &v->num);
	return fg_jl_skip(l);
}

/*
 * An array of numbers, kept as its first max elements; *count gets the
 * element count (all of them).
 */
static bool read_array(struct fg_jl *l, struct jval *vals, size_t max, size_t *count)
{
	bool first = true;
	struct jval ignored;

	*count = 0;
	if (!fg_jl_begin(l, '['))
		return false;
	while (fg_jl_more(l, ']', &first)) {
		if (!read_jval(l, *count < max ? &vals[*count] : &ignored))
			return false;
		(*count)++;
	}
	return !l->bad;
}

/* What one tensor entry held, member by member (the first of each key counts, as in cJSON). */
struct entry {
	enum fg_jl_kind dtype_kind, shape_kind, offsets_kind;
	char dtype[16];            /* the dtype string, cut at 15 bytes (no dtype name is longer) */
	size_t dtype_len;
	struct jval shape[FG_ST_MAX_RANK + 1];
	size_t rank;
	struct jval offs[2];
	size_t n_offs;
};

/*
 * The entry object at the cursor.  scratch (room for the longest string of
 * the header) receives decoded keys and the dtype.  Returns false on
 * malformed JSON; a non-object is entry->shape_kind = FG_JL_NONE with
 * *is_object false.
 */
static bool read_entry(struct fg_jl *l, struct entry *e, char *scratch, bool *is_object)
{
	struct fg_jl_str key, str;
	bool first = true;

	memset(e, 0, sizeof(*e));
	*is_object = fg_jl_peek(l) == FG_JL_OBJECT;
	if (!*is_object)
		return fg_jl_skip(l);
	if (!fg_jl_begin(l, '{'))
		return false;
	while (fg_jl_more(l, '}', &first)) {
		size_t klen;
		enum fg_jl_kind k;

		const char *kb;

		if (!fg_jl_key(l, &key))
			return false;
		if (key.escaped) {
			klen = fg_jl_decode(&key, scratch);
			kb = scratch;
		} else {
			klen = key.len;
			kb = key.raw;
		}
		k = fg_jl_peek(l);
		if (klen == 5 && memcmp(kb, "dtype", 5) == 0 && e->dtype_kind == FG_JL_NONE) {
			e->dtype_kind = k;
			if (k != FG_JL_STRING)
				goto skip;
			if (!fg_jl_string(l, &str))
				return false;
			if (str.escaped) {
				e->dtype_len = fg_jl_decode(&str, scratch);
				memcpy(e->dtype, scratch, e->dtype_len < sizeof(e->dtype) ? e->dtype_len : sizeof(e->dtype) - 1);
			} else {
				e->dtype_len = str.len;
				memcpy(e->dtype, str.raw, str.len < sizeof(e->dtype) ? str.len : sizeof(e->dtype) - 1);
			}
			if (e->dtype_len >= sizeof(e->dtype))
				e->dtype_len = sizeof(e->dtype); /* too long for any dtype */
			else
				e->dtype[e->dtype_len] = '\0';
		} else if (klen == 5 && memcmp(kb, "shape", 5) == 0 && e->shape_kind == FG_JL_NONE) {
			e->shape_kind = k;
			if (k != FG_JL_ARRAY)
				goto skip;
			if (!read_array(l, e->shape, FG_ST_MAX_RANK + 1, &e->rank))
				return false;
		} else if (klen == 12 && memcmp(kb, "data_offsets", 12) == 0 && e->offsets_kind == FG_JL_NONE) {
			e->offsets_kind = k;
			if (k != FG_JL_ARRAY)
				goto skip;
			if (!read_array(l, e->offs, 2, &e->n_offs))
				return false;
		} else {
			goto skip;
		}
		continue;
skip:
		if (!fg_jl_skip(l))
			return false;
	}
	return !l->bad;
}

/*
 * ---- The fast path: an entry as the writers spell it ----
 *
 * Every writer forged has met (the safetensors crate, MLX, the Python
 * json module) writes an entry as {"dtype":"X","shape":[...],
 * "data_offsets":[b,e]}, members in that order, white space or not, plain
 * digits, no escapes.  fast_entry reads exactly that spelling straight
 * into the entry, with the values read_entry would give it, and returns
 * the end of the object; anything else (another order, a sign, a fraction,
 * an exponent, more than 15 digits, an escape, a 7th dimension, a long
 * dtype) returns NULL before anything is kept, and read_entry reads the
 * entry from the same place.  tests/fuzz/fuzz_jsonlex_diff.c holds the
 * pair to the tree-based reader.
 */

/* White space as the lexer skips it (any byte <= 0x20; the header holds no NUL). */
static inline const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (unsigned char)*p <= 32)
		p++;
	return p;
}

/* The n bytes of lit at p, then white space; NULL when they are not there. */
static inline const char *expect(const char *p, const char *end, const char *lit, size_t n)
{
	if ((size_t)(end - p) < n || memcmp(p, lit, n) != 0)
		return NULL;
	return skip_ws(p + n, end);
}

/* A byte of 0x80 in every lane of w (8 bytes, first byte lowest) that is no ASCII digit. */
static inline uint64_t nondigits(uint64_t w)
{
	uint64_t x = w ^ 0x3030303030303030ull; /* digits become 0..9 */

	return ((((x & 0x7f7f7f7f7f7f7f7full) + 0x7676767676767676ull) | x) & 0x8080808080808080ull);
}

/*
 * The value of the first n (1 to 8) ASCII digits of w, eight at a time:
 * moved to the top bytes (the rest become leading zeros), then pairs,
 * quads and the halves combined with one multiply each.
 */
static inline uint64_t digits8(uint64_t w, unsigned n)
{
	uint64_t d = (w - 0x3030303030303030ull) << (8 * (8 - n));

	d = (d * 10 + (d >> 8)) & 0x00ff00ff00ff00ffull;
	d = (d * 100 + (d >> 16)) & 0x0000ffff0000ffffull;
	return (d * 10000 + (d >> 32)) & 0xffffffffull;
}

/* The bytes cJSON's number takes: [0-9+-eE.]. */
static const bool number_byte[256] = {
	['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1,
	['9'] = 1, ['+'] = 1, ['-'] = 1, ['e'] = 1, ['E'] = 1, ['.'] = 1,
};

/*
 * 1 to 15 plain digits (exact in a double, as fg_jl_number reads them) not
 * followed by another byte cJSON's number would take; returns the end of
 * the digits.  The value is kept exact (v->u, v->exact); v->num is not set.
 */
static inline __attribute__((always_inline)) const char *plain_number(const char *p, const char *end, struct jval *v)
{
	static const uint64_t pow10[8] = { 1, 10, 100, 1000, 10000, 100000, 1000000, 10000000 };
	const char *s = p;
	uint64_t x = 0;
	unsigned n;

	if (end - p >= 16) {
		uint64_t lo, hi, m;

		memcpy(&lo, p, 8);
		memcpy(&hi, p + 8, 8);
		if ((m = nondigits(lo)))
			n = (unsigned)__builtin_ctzll(m) / 8;
		else if ((m = nondigits(hi)))
			n = 8 + (unsigned)__builtin_ctzll(m) / 8;
		else
			return NULL; /* 16 digits or more */
		if (!n)
			return NULL;
		x = n <= 8 ? digits8(lo, n) : digits8(lo, 8) * pow10[n - 8] + digits8(hi, n - 8);
		p += n;
	} else {
		while (p < end && (unsigned char)(*p - '0') < 10 && p - s < 16)
			x = x * 10 + (uint64_t)(*p++ - '0');
		if (p == s || p - s > 15)
			return NULL;
	}
	if (p < end && number_byte[(unsigned char)*p])
		return NULL;
	v->kind = FG_JL_NUMBER;
	v->exact = true;
	v->u = x;
	return p;
}

/*
 * An array of plain numbers, at most max of them: '[' at p.  With compact
 * set no white space is allowed (the writers' spelling) and the cursor is
 * left on the closing ']'; else white space may stand anywhere and the
 * cursor is left after the ']' and the white space that follows.  NULL
 * when it is anything else.
 */
static inline __attribute__((always_inline)) const char *plain_array(const char *p, const char *end, struct jval *vals,
								     size_t max, size_t *count, bool compact)
{
	size_t n = 0;

	p = compact ? p + 1 : skip_ws(p + 1, end);
	if (p < end && *p == ']') {
		*count = 0;
		return compact ? p : skip_ws(p + 1, end);
	}
	for (;;) {
		if (n == max || !(p = plain_number(p, end, &vals[n++])))
			return NULL;
		if (!compact)
			p = skip_ws(p, end);
		if (p >= end)
			return NULL;
		if (*p == ']')
			break;
		if (*p != ',')
			return NULL;
		p = compact ? p + 1 : skip_ws(p + 1, end);
	}
	*count = n;
	return compact ? p : skip_ws(p + 1, end);
}

/* The dtype string at p (after its opening quote): 1 to 15 bytes, no escape.  Its closing quote, or NULL. */
static inline const char *plain_dtype(const char *p, const char *end, struct entry *e)
{
	const char *q;

	for (q = p; q < end && q - p < 16 && *q != '"' && *q != '\\'; q++)
		;
	if (q >= end || *q != '"' || q == p || q - p > 15)
		return NULL;
	e->dtype_len = (size_t)(q - p);
	memcpy(e->dtype, p, e->dtype_len);
	e->dtype[e->dtype_len] = '\0';
	return q;
}

/* The entry with no white space at all, as the safetensors crate and MLX write it; NULL otherwise. */
static const char *compact_entry(const char *p, const char *end, struct entry *e)
{
	static const char dtype[] = "{\"dtype\":\"", shape[] = "\",\"shape\":[", offsets[] = "],\"data_offsets\":[";

	if ((size_t)(end - p) < sizeof(dtype) - 1 || memcmp(p, dtype, sizeof(dtype) - 1) != 0 ||
	    !(p = plain_dtype(p + sizeof(dtype) - 1, end, e)) || (size_t)(end - p) < sizeof(shape) - 1 ||
	    memcmp(p, shape, sizeof(shape) - 1) != 0 ||
	    !(p = plain_array(p + sizeof(shape) - 2, end, e->shape, FG_ST_MAX_RANK, &e->rank, true)) ||
	    (size_t)(end - p) < sizeof(offsets) - 1 || memcmp(p, offsets, sizeof(offsets) - 1) != 0 ||
	    !(p = plain_array(p + sizeof(offsets) - 2, end, e->offs, 2, &e->n_offs, true)) || e->n_offs != 2 ||
	    end - p < 2 || p[1] != '}')
		return NULL;
	return p + 2;
}

/* The same spelling with white space anywhere between tokens; NULL otherwise. */
static const char *spaced_entry(const char *p, const char *end, struct entry *e)
{
	if (p >= end || *p != '{' || !(p = skip_ws(p + 1, end)) || !(p = expect(p, end, "\"dtype\"", 7)) ||
	    !(p = expect(p, end, ":", 1)) || p >= end || *p != '"' || !(p = plain_dtype(p + 1, end, e)))
		return NULL;
	if (!(p = expect(skip_ws(p + 1, end), end, ",", 1)) || !(p = expect(p, end, "\"shape\"", 7)) ||
	    !(p = expect(p, end, ":", 1)) || p >= end || *p != '[' ||
	    !(p = plain_array(p, end, e->shape, FG_ST_MAX_RANK, &e->rank, false)) || !(p = expect(p, end, ",", 1)) ||
	    !(p = expect(p, end, "\"data_offsets\"", 14)) || !(p = expect(p, end, ":", 1)) || p >= end || *p != '[' ||
	    !(p = plain_array(p, end, e->offs, 2, &e->n_offs, false)) || e->n_offs != 2 || p >= end || *p != '}')
		return NULL;
	return p + 1;
}

static const char *fast_entry(const char *p, const char *end, struct entry *e)
{
	const char *after = compact_entry(p, end, e);

	if (!after && !(after = spaced_entry(p, end, e)))
		return NULL;
	e->dtype_kind = FG_JL_STRING;
	e->shape_kind = FG_JL_ARRAY;
	e->offsets_kind = FG_JL_ARRAY;
	return after;
}

/* The last dtype string parsed and what it names: a checkpoint's tensors share a few. */
struct dtype_cache {
	char name[16];
	size_t len;
	enum fg_dtype dt;
};

/*
 * ---- The shape pool ----
 *
 * Each distinct shape of a file is kept once, FG_ST_MAX_RANK dimensions
 * padded with zeros, in malloc'd chunks that never move (the classifier and every
 * later reader hold pointers into them).  A parse remembers the last few
 * shapes it kept and reuses one that matches: the tensors of a real file
 * take a handful of shapes, in runs (an expert's three projections).  A
 * file whose shapes all differ keeps one per tensor, 48 bytes each, which
 * its header text paid for in full.
 */
#define SHAPE_RECENT 8

struct shape_intern {
	struct fg_st_file *f;
	const uint64_t *recent[SHAPE_RECENT];
	unsigned next;         /* the slot of recent the next new shape takes */
};

/* A pointer to dims (FG_ST_MAX_RANK of them) kept in f's pool; NULL when out of memory. */
static const uint64_t *intern_shape(struct shape_intern *si, const uint64_t *dims)
{
	struct fg_st_shapes *c = si->f->shapes;
	uint64_t *kept;

	for (unsigned i = 0; i < SHAPE_RECENT && si->recent[i]; i++)
		if (memcmp(si->recent[i], dims, sizeof(uint64_t) * FG_ST_MAX_RANK) == 0)
			return si->recent[i];
	if (!c || c->used == SHAPES_PER_CHUNK) {
		if (!(c = malloc(sizeof(*c))))
			return NULL;
		c->used = 0;
		c->next = si->f->shapes;
		si->f->shapes = c;
	}
	kept = c->dims[c->used++];
	memcpy(kept, dims, sizeof(uint64_t) * FG_ST_MAX_RANK);
	si->recent[si->next] = kept;
	si->next = (si->next + 1) % SHAPE_RECENT;
	return kept;
}

/* The checks of one entry, in the order (and with the words) of the tree-based reader. */
static int check_entry(struct fg_tensor *t, const struct entry *e, bool is_object, struct dtype_cache *dc,
		       struct shape_intern *si, const char *label, struct fg_err *err)
{
	const char *why;
	uint64_t nbytes, nelem, b, x, dims[FG_ST_MAX_RANK] = { 0 };

	if (!is_object)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': entry is not a JSON object",
				  label, t->name);
	if (e->dtype_kind != FG_JL_STRING)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': missing or non-string \"dtype\"",
				  label, t->name);
	if (dc->len && e->dtype_len == dc->len && memcmp(e->dtype, dc->name, dc->len) == 0) {
		t->dtype = dc->dt;
	} else {
		enum fg_dtype dt;

		if (e->dtype_len >= sizeof(e->dtype) || fg_dtype_parse(e->dtype, &dt) != 0)
			return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': unknown dtype '%.15s'",
					  label, t->name, e->dtype);
		t->dtype = dt;
		memcpy(dc->name, e->dtype, e->dtype_len);
		dc->len = e->dtype_len;
		dc->dt = t->dtype;
	}
	if (e->shape_kind != FG_JL_ARRAY)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': missing or non-array \"shape\"",
				  label, t->name);
	for (size_t i = 0; i < e->rank; i++) {
		if (i == FG_ST_MAX_RANK)
			return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': shape rank exceeds the cap of %d",
					  label, t->name, FG_ST_MAX_RANK);
		if (json_u64(&e->shape[i], &dims[i], &why) != 0)
			return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': shape[%zu] %s",
					  label, t->name, i, why);
	}
	t->rank = (unsigned)e->rank & 7u; /* at most FG_ST_MAX_RANK, checked above */
	if (fg_shape_nelem(dims, t->rank, &nelem) != 0 || nelem > UINT64_MAX / fg_dtype_size(t->dtype))
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': element count of its shape overflows",
				  label, t->name);
	nbytes = nelem * fg_dtype_size(t->dtype);
	if (e->offsets_kind != FG_JL_ARRAY || e->n_offs != 2)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': \"data_offsets\" is not a [begin, end] pair",
				  label, t->name);
	if (json_u64(&e->offs[0], &b, &why) != 0)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': data_offsets begin %s",
				  label, t->name, why);
	if (json_u64(&e->offs[1], &x, &why) != 0)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': data_offsets end %s",
				  label, t->name, why);
	if (x < b)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin",
				  label, t->name, (unsigned long long)b, (unsigned long long)x);
	if (x - b != nbytes)
		return fg_err_set(err, FG_EINPUT,
				  "%s: tensor '%s': data_offsets span %llu bytes but %s x %llu elements need %llu",
				  label, t->name, (unsigned long long)(x - b), fg_dtype_name(t->dtype),
				  (unsigned long long)nelem, (unsigned long long)nbytes);
	if (!(t->shape = intern_shape(si, dims)))
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory for the shape of tensor '%s'", label, t->name);
	t->begin = b;
	return 0;
}

static int cmp_offsets(const void *pa, const void *pb)
{
	const struct fg_tensor *a = pa, *b = pb;

	if (a->begin != b->begin)
		return a->begin < b->begin ? -1 : 1;
	if (fg_tensor_end(a) != fg_tensor_end(b))
		return fg_tensor_end(a) < fg_tensor_end(b) ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* ---- Sorting the table by data offset ---- */

/* A tensor's place in the sort: its begin offset and where it stands in the table. */
struct okey {
	uint64_t begin;
	uint32_t idx;
};

static int cmp_okey(const void *pa, const void *pb, void *ctx)
{
	const struct fg_tensor *t = ctx;

	return cmp_offsets(&t[((const struct okey *)pa)->idx], &t[((const struct okey *)pb)->idx]);
}

/*
 * Put f->tensors in cmp_offsets order.  Headers list tensors by name, so
 * the offsets come in any order: a stable radix sort on begin (8 bits a
 * pass, passes whose byte every key shares skipped), runs of equal begin
 * (empty tensors, overlaps) ordered by the whole comparison, then the
 * table permuted in place.  0 or FG_ENOMEM.
 */
/*
 * The sort's two key arrays, one pair per thread, kept from file to file
 * (fresh pages for every shard cost more than sorting it) and freed when
 * the thread ends.
 */
static pthread_key_t keys_key;
static pthread_once_t keys_once = PTHREAD_ONCE_INIT;

struct sort_keys {
	struct okey *p;
	size_t cap;           /* elements of each of the two halves */
};

static void keys_free(void *v)
{
	struct sort_keys *k = v;

	if (k)
		free(k->p);
	free(k);
}

static void keys_key_init(void)
{
	pthread_key_create(&keys_key, keys_free);
}

/* Room for two arrays of n keys, or NULL. */
static struct okey *sort_keys(size_t n)
{
	struct sort_keys *k;

	pthread_once(&keys_once, keys_key_init);
	k = pthread_getspecific(keys_key);
	if (!k) {
		if (!(k = calloc(1, sizeof(*k))))
			return NULL;
		pthread_setspecific(keys_key, k);
	}
	if (n > k->cap) {
		struct okey *p = realloc(k->p, 2 * n * sizeof(*p));

		if (!p)
			return NULL;
		k->p = p;
		k->cap = n;
	}
	return k->p;
}

static int sort_by_offset(struct fg_st_file *f)
{
	struct fg_tensor *t = f->tensors;
	size_t n = f->n_tensors;
	struct okey *a, *b;
	bool sorted = true;

	for (size_t i = 1; i < n && sorted; i++)
		sorted = cmp_offsets(&t[i - 1], &t[i]) < 0;
	if (sorted)
		return 0;
	if (n > UINT32_MAX || !(a = sort_keys(n)))
		return FG_ENOMEM;
	b = a + n;
	for (size_t i = 0; i < n; i++)
		a[i] = (struct okey){ t[i].begin, (uint32_t)i };
	for (unsigned shift = 0; shift < 64; shift += 8) {
		size_t count[256] = { 0 }, at = 0;
		struct okey *swap;

		for (size_t i = 0; i < n; i++)
			count[(a[i].begin >> shift) & 0xff]++;
		if (count[(a[0].begin >> shift) & 0xff] == n)
			continue;
		for (size_t d = 0; d < 256; d++) {
			size_t c = count[d];

			count[d] = at;
			at += c;
		}
		for (size_t i = 0; i < n; i++)
			b[count[(a[i].begin >> shift) & 0xff]++] = a[i];
		swap = a;
		a = b;
		b = swap;
	}
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && a[j].begin == a[i].begin; j++)
			;
		if (j - i > 1)
			qsort_r(a + i, j - i, sizeof(*a), cmp_okey, t);
	}
	/* a[j].idx is the tensor position j takes: follow each cycle once. */
	for (size_t i = 0; i < n; i++) {
		struct fg_tensor keep;
		size_t j = i;

		if (a[i].idx == i)
			continue;
		keep = t[i];
		for (;;) {
			size_t k = a[j].idx;

			a[j].idx = (uint32_t)j;
			if (k == i) {
				t[j] = keep;
				break;
			}
			t[j] = t[k];
			j = k;
		}
	}
	return 0;
}

/* The data offsets must cover [0, data_len) exactly once, in order. */
static int check_tiling(const struct fg_st_file *f, uint64_t data_len, const char *label,
			struct fg_err *err)
{
	uint64_t expect = 0;

	for (size_t i = 0; i < f->n_tensors; i++) {
		const struct fg_tensor *t = &f->tensors[i];
		uint64_t end = fg_tensor_end(t);

		if (end > data_len)
			return fg_err_set(err, FG_EINPUT,
					  "%s: tensor '%s': data_offsets end %llu runs past the %llu-byte data section",
					  label, t->name, (unsigned long long)end,
					  (unsigned long long)data_len);
		if (t->begin < expect)
			return fg_err_set(err, FG_EINPUT,
					  "%s: tensor '%s' overlaps tensor '%s' (begins at %llu, before %llu)",
					  label, t->name, f->tensors[i - 1].name,
					  (unsigned long long)t->begin, (unsigned long long)expect);
		if (t->begin > expect)
			return fg_err_set(err, FG_EINPUT,
					  "%s: gap of %llu unused bytes at data offset %llu before tensor '%s'",
					  label, (unsigned long long)(t->begin - expect),
					  (unsigned long long)expect, t->name);
		expect = end;
	}
	if (expect != data_len)
		return fg_err_set(err, FG_EINPUT,
				  "%s: %llu trailing bytes after the last tensor (data section is %llu bytes)",
				  label, (unsigned long long)(data_len - expect), (unsigned long long)data_len);
	return 0;
}

/* Is the whole text well-formed JSON?  Decides between a syntax and a meaning error. */
static bool json_ok(const char *hdr, uint64_t hlen)
{
	struct fg_jl l;

	fg_jl_init(&l, hdr, (size_t)hlen);
	return fg_jl_skip(&l) && fg_jl_end(&l);
}

struct meta_pos {
	const char *key;
	size_t pos;
};

static int cmp_meta_pos(const void *pa, const void *pb)
{
	const struct meta_pos *a = pa, *b = pb;
	int c = strcmp(a->key, b->key);

	return c ? c : (a->pos < b->pos ? -1 : a->pos > b->pos);
}

/* The first key (in header order) that repeats an earlier one, or NULL; -1 on no memory. */
static int first_duplicate(const struct fg_st_meta *m, size_t n, const char **dup)
{
	struct meta_pos *v;
	size_t best = SIZE_MAX;

	*dup = NULL;
	if (n < 2)
		return 0;
	if (!(v = malloc(n * sizeof(*v))))
		return FG_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		v[i].key = m[i].key;
		v[i].pos = i;
	}
	qsort(v, n, sizeof(*v), cmp_meta_pos);
	for (size_t i = 1; i < n; i++)
		if (strcmp(v[i].key, v[i - 1].key) == 0 && (i < 2 || strcmp(v[i - 1].key, v[i - 2].key) != 0) &&
		    v[i].pos < best) {
			best = v[i].pos;
			*dup = m[best].key;
		}
	free(v);
	return 0;
}

/*
 * The names of one header (f->strings): room for hlen + 1 bytes, the tensor
 * names packed from the front in header order (what the index cross-check
 * walks: checkpoint.c).  Decoded strings are never longer than their text,
 * so the names never outgrow it, and the free part after them serves as
 * scratch for decoding.
 */
struct arena {
	char *p;
	size_t pos;   /* end of the names */
};

/* Decode s onto the end of f->meta_text (*len bytes used, *cap allocated); its offset, or SIZE_MAX. */
static size_t meta_add(struct fg_st_file *f, size_t *len, size_t *cap, const struct fg_jl_str *s)
{
	size_t at = *len;

	if (FG_GROW(f->meta_text, *len + s->len + 1, *cap))
		return SIZE_MAX;
	*len += fg_jl_decode(s, f->meta_text + at) + 1;
	return at;
}

/* The "__metadata__" object at the cursor, into f->meta (its strings in f->meta_text). */
static int read_metadata(struct fg_st_file *f, struct fg_jl *l, size_t *cap, const char *hdr, uint64_t hlen,
			 const char *label, struct fg_err *err)
{
	struct fg_jl_str key, val;
	const char *dup = NULL;
	size_t bad_key = SIZE_MAX, len = 0, tcap = 0;
	bool first = true;
	int rc;

	if (fg_jl_peek(l) != FG_JL_OBJECT) {
		if (!json_ok(hdr, hlen))
			return FG_EAGAIN_SYNTAX;
		return fg_err_set(err, FG_EINPUT, "%s: \"__metadata__\" is not a JSON object", label);
	}
	if (!fg_jl_begin(l, '{'))
		return FG_EAGAIN_SYNTAX;
	/* Strings are kept as offsets while the text grows, then made pointers. */
	while (fg_jl_more(l, '}', &first)) {
		size_t k, v;

		if (!fg_jl_key(l, &key))
			return FG_EAGAIN_SYNTAX;
		if ((k = meta_add(f, &len, &tcap, &key)) == SIZE_MAX)
			return fg_err_set(err, FG_ENOMEM, "%s: out of memory for metadata", label);
		if (fg_jl_peek(l) != FG_JL_STRING) {
			if (!fg_jl_skip(l))
				return FG_EAGAIN_SYNTAX;
			if (bad_key == SIZE_MAX)
				bad_key = k;
			continue;
		}
		if (!fg_jl_string(l, &val))
			return FG_EAGAIN_SYNTAX;
		if ((v = meta_add(f, &len, &tcap, &val)) == SIZE_MAX || FG_GROW(f->meta, f->n_meta + 1, *cap))
			return fg_err_set(err, FG_ENOMEM, "%s: out of memory for metadata", label);
		f->meta[f->n_meta].key = (const char *)(uintptr_t)k;
		f->meta[f->n_meta].value = (const char *)(uintptr_t)v;
		f->n_meta++;
	}
	for (size_t i = 0; i < f->n_meta; i++) {
		f->meta[i].key = f->meta_text + (uintptr_t)f->meta[i].key;
		f->meta[i].value = f->meta_text + (uintptr_t)f->meta[i].value;
	}
	if (l->bad)
		return FG_EAGAIN_SYNTAX;
	if (bad_key != SIZE_MAX) {
		if (!json_ok(hdr, hlen))
			return FG_EAGAIN_SYNTAX;
		return fg_err_set(err, FG_EINPUT, "%s: metadata value for key '%.128s' is not a string",
				  label, f->meta_text + bad_key);
	}
	if ((rc = first_duplicate(f->meta, f->n_meta, &dup)))
		return fg_err_set(err, rc, "%s: out of memory for metadata", label);
	if (dup) {
		if (!json_ok(hdr, hlen))
			return FG_EAGAIN_SYNTAX;
		return fg_err_set(err, FG_EINPUT, "%s: duplicate metadata key '%.128s'", label, dup);
	}
	return 0;
}

/*
 * ---- The slab: tables and names of many files in a few mappings ----
 *
 * A 100,000-tensor checkpoint keeps ~17 MB of tables and names; taken from
 * malloc a page at a time that was ~4,300 page faults, a fifth of the
 * inspection's CPU.  A slab hands out the same bytes from a few mappings
 * (32 MiB, then 64 MiB: a region of a 400,000-tensor checkpoint fits in its
 * first, whose used part ends in one partly used huge page) advised MADV_HUGEPAGE (one fault per 2 MiB where the kernel has
 * huge pages to give), packed: a file reserves the most its header can
 * need, and the next file starts where its table and names really end.
 * One slab per parsing thread; freed in one call with everything in it.
 */
#define SLAB_FIRST ((size_t)32 << 20) /* a region's first mapping; each next one twice the last, up to */
#define SLAB_MAX ((size_t)64 << 20)
#define SLAB_HUGE ((size_t)2 << 20)

struct slab_region {
	char *base;
	size_t cap, used;
	size_t next;          /* the size of its next mapping */
};

struct slab_map {
	void *p;
	size_t len;
};

struct fg_st_slab {
	struct slab_region tables, names;
	struct slab_map *maps;
	size_t n_maps, cap_maps;
};

struct fg_st_slab *fg_st_slab_new(void)
{
	return calloc(1, sizeof(struct fg_st_slab));
}

void fg_st_slab_free(struct fg_st_slab *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_maps; i++)
		munmap(s->maps[i].p, s->maps[i].len);
	free(s->maps);
	free(s);
}

/* size bytes at the region's end (a new mapping when they do not fit), not yet taken; NULL when out of memory. */
static void *slab_reserve(struct fg_st_slab *s, struct slab_region *r, size_t size)
{
	size_t len;
	char *m;

	if (r->base && r->cap - r->used >= size)
		return r->base + r->used;
	if (!r->next)
		r->next = SLAB_FIRST;
	len = size > r->next ? (size + SLAB_HUGE - 1) & ~(SLAB_HUGE - 1) : r->next;
	if (r->next < SLAB_MAX)
		r->next *= 2;
	if (FG_GROW(s->maps, s->n_maps + 1, s->cap_maps))
		return NULL;
	m = mmap(NULL, len + SLAB_HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	s->maps[s->n_maps++] = (struct slab_map){ m, len + SLAB_HUGE };
	r->base = (char *)(((uintptr_t)m + SLAB_HUGE - 1) & ~(uintptr_t)(SLAB_HUGE - 1));
	r->cap = len;
	r->used = 0;
	madvise(r->base, len, MADV_HUGEPAGE);
	return r->base;
}

/* Take the first used bytes of the last reservation. */
static void slab_take(struct slab_region *r, size_t used)
{
	r->used += (used + 63) & ~(size_t)63;
}

/*
 * Fault a large block in writable at once.  A large calloc is fresh zero
 * pages, and the name table's probes read each page before writing it: a
 * read maps the shared zero page, and the write after it takes a second,
 * copy-on-write fault whose TLB flush interrupts the other parsing thread
 * (10% of inspect's CPU at 400,000 tensors).  Only faults pages in, never
 * changes a byte; a kernel without MADV_POPULATE_WRITE (before 5.14) says
 * EINVAL and the block takes those faults as before.  (malloc + memset
 * would not do: the compiler folds the pair back into calloc.)
 */
static void prefault_write(void *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
	const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t from = (uintptr_t)p & ~(page - 1);

	if (len >= page)
		(void)madvise((void *)from, (uintptr_t)p + len - from, MADV_POPULATE_WRITE);
#else
	(void)p;
	(void)len;
#endif
}

/* The name table (see slot_get): at most 2/3 full. */
static int build_slots(struct fg_st_file *f, const char *label, struct fg_err *err)
{
	size_t slots = f->n_tensors + f->n_tensors / 2 + 2;
	int narrow = f->n_tensors < UINT16_MAX;
	size_t width = narrow ? sizeof(*f->slots16) : sizeof(*f->slots);
	void *table = calloc(slots, width);

	if (!table)
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory for %zu tensors", label, f->n_tensors);
	if (narrow)
		f->slots16 = table;
	else
		f->slots = table;
	prefault_write(table, slots * width);
	f->n_slots = slots;
	for (size_t i = 0; i < f->n_tensors; i++) {
		size_t s = slot_of_h(f, f->tensors[i].name, f->tensors[i].hash);

		if (slot_get(f, s))
			return fg_err_set(err, FG_EINPUT, "%s: duplicate tensor name '%s'", label, f->tensors[i].name);
		slot_set(f, s, i + 1);
	}
	return 0;
}

/* One header to parse: what read_table reads and where it puts the table. */
struct header_job {
	struct fg_st_file *f;
	const char *hdr;
	uint64_t hlen;
	const struct fg_st_parse_opts *opts;
	const char *label;
};

/*
 * The part of the parse that reads the text: validate it and fill f's
 * table, names and metadata in one pass.  Everything it allocates hangs
 * off f as soon as it exists, so that when the text is a mapping and the
 * file shrinks under it (SIGBUS, fg_st_guard), fg_st_close still frees it
 * all.  A meaning error is reported only once the whole text is known to
 * be JSON, so a syntax error anywhere wins, as it did when a tree was
 * parsed first.
 */
static int read_table(void *ctx, struct fg_err *err)
{
	const struct header_job *job = ctx;
	struct fg_st_file *f = job->f;
	const char *hdr = job->hdr, *label = job->label;
	uint64_t hlen = job->hlen;
	struct fg_jl l;
	struct fg_jl_str key;
	struct entry e;
	struct arena a = { NULL, 0 };
	struct fg_st_slab *slab = job->opts ? job->opts->slab : NULL;
	struct dtype_cache dc = { "", 0, FG_DT_F32 };
	struct shape_intern si = { .f = f };
	size_t bad, tcap, mcap = 0;
	bool first = true, seen_meta = false, is_object, escaped = false;
	int rc;

	bad = utf8_bad_at((const uint8_t *)hdr, (size_t)hlen);
	if (bad != hlen)
		return fg_err_set(err, FG_EINPUT, "%s: header is not valid UTF-8 text (%s at header byte %zu)",
				  label, hdr[bad] ? "bad sequence" : "NUL byte", bad);
	fg_jl_init(&l, hdr, (size_t)hlen);
	if (fg_jl_peek(&l) != FG_JL_OBJECT) {
		if (!json_ok(hdr, hlen))
			goto syntax;
		return fg_err_set(err, FG_EINPUT, "%s: header is not a JSON object", label);
	}
	/*
	 * The table is sized once for the most entries the text can hold (an
	 * accepted entry takes at least 48 bytes of it, comma included), so it
	 * never moves while it fills; the pages past its last entry are never
	 * written, so they hold no memory (a slab takes back what is not used,
	 * a malloc'd block is left as it is).  The names get hlen + 1 bytes.
	 */
	tcap = (size_t)hlen / 48 + 1;
	if (tcap > FG_ST_MAX_TENSORS)
		tcap = FG_ST_MAX_TENSORS;
	if (slab) {
		f->in_slab = 1;
		a.p = f->strings = slab_reserve(slab, &slab->names, (size_t)hlen + 1);
		f->tensors = slab_reserve(slab, &slab->tables, tcap * sizeof(*f->tensors));
	} else {
		a.p = f->strings = malloc((size_t)hlen + 1);
		f->tensors = malloc(tcap * sizeof(*f->tensors));
	}
	if (!a.p || !f->tensors)
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory for a %llu-byte header", label,
				  (unsigned long long)hlen);
	if (!fg_jl_begin(&l, '{'))
		goto syntax;
	while (fg_jl_more(&l, '}', &first)) {
		struct fg_tensor *t;
		char *name = a.p + a.pos;
		const char *after;
		size_t nlen;

		if (!fg_jl_key(&l, &key))
			goto syntax;
		escaped |= key.escaped;
		nlen = fg_jl_decode(&key, name);
		if (nlen == 12 && memcmp(name, "__metadata__", 12) == 0) {
			if (seen_meta) {
				if (!json_ok(hdr, hlen))
					goto syntax;
				return fg_err_set(err, FG_EINPUT, "%s: duplicate \"__metadata__\"", label);
			}
			seen_meta = true;
			rc = read_metadata(f, &l, &mcap, hdr, hlen, label, err);
			if (rc == FG_EAGAIN_SYNTAX)
				goto syntax;
			if (rc)
				return rc;
			continue;
		}
		a.pos += nlen + 1;
		if (f->n_tensors == FG_ST_MAX_TENSORS) {
			if (!json_ok(hdr, hlen))
				goto syntax;
			return fg_err_set(err, FG_EINPUT, "%s: more than %u tensors exceed the cap of %u",
					  label, FG_ST_MAX_TENSORS, FG_ST_MAX_TENSORS);
		}
		if (f->n_tensors == tcap) /* never: tcap bounds what the text holds */
			return fg_err_set(err, FG_EINTERNAL, "%s: more tensors than its %llu bytes can hold", label,
					  (unsigned long long)hlen);
		t = &f->tensors[f->n_tensors];
		memset(t, 0, sizeof(*t));
		t->name = name;
		t->hash = fg_st_name_hash(name, nlen);
		if ((after = fast_entry(l.p, l.end, &e))) {
			l.p = l.tok_end = after;
			fg_jl_ws(&l);
			is_object = true;
		} else if (!read_entry(&l, &e, a.p + a.pos, &is_object)) {
			/* Escaped keys of the entry decode into the arena's free middle (never kept). */
			goto syntax;
		}
		rc = check_entry(t, &e, is_object, &dc, &si, label, err);
		if (rc) {
			if (!json_ok(hdr, hlen))
				goto syntax;
			return rc;
		}
		/* The model layer's facts, while the name is in cache. */
		if (job->opts && job->opts->classify)
			job->opts->classify(t, nlen, job->opts->ctx);
		f->n_tensors++;
	}
	if (l.bad || !fg_jl_end(&l))
		goto syntax;
	/* The names keep their room too (shrinking it would cost a pass over the table to rebase every name). */
	f->names_len = a.pos;
	f->plain_names = !escaped;
	if (slab) {
		slab_take(&slab->names, a.pos);
		slab_take(&slab->tables, f->n_tensors * sizeof(*f->tensors));
	}
	return 0;
syntax:
	return fg_err_set(err, FG_EINPUT, "%s: header is not valid JSON (error near header byte %td)",
			  label, (l.bad ? l.bad : l.p) - hdr);
}

/*
 * Parse and validate the header text hdr (hlen bytes, no NUL inside) of a
 * file of file_size bytes into f: the text read into the table (under
 * fg_st_guard when it is a mapping of the file, mapped true), then the
 * table sorted by offset, indexed by name and its tiling checked.  data,
 * when not NULL, is the data section.
 */
static int parse_header_text(struct fg_st_file *f, const char *hdr, uint64_t hlen, const uint8_t *data,
			     const struct fg_st_parse_opts *opts, int mapped, const char *label, struct fg_err *err)
{
	struct header_job job = { f, hdr, hlen, opts, label };
	int rc = mapped ? fg_st_guard(read_table, &job, label, err) : read_table(&job, err);

	if (rc)
		return rc;
	if (sort_by_offset(f))
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory for %zu tensors", label, f->n_tensors);
	rc = build_slots(f, label, err);
	if (!rc)
		rc = check_tiling(f, f->file_size - f->data_start, label, err);
	for (size_t i = 0; !rc && data && i < f->n_tensors; i++)
		f->tensors[i].data = data + f->tensors[i].begin;
	return rc;
}

/* Checks on the 8-byte length that come before reading the header text.  The length is never echoed: it is the file's first bytes. */
static int check_length(uint64_t hlen, uint64_t file_size, const char *label, struct fg_err *err)
{
	if (hlen > FG_ST_HEADER_MAX)
		return fg_err_set(err, FG_EINPUT, "%s: header length exceeds the cap of %llu bytes",
				  label, FG_ST_HEADER_MAX);
	if (hlen > file_size - 8)
		return fg_err_set(err, FG_EINPUT,
				  "%s: header length runs past the end of the file (%llu bytes after the length)",
				  label, (unsigned long long)(file_size - 8));
	if (hlen < 2)
		return fg_err_set(err, FG_EINPUT, "%s: header length is too short for a JSON object (under 2 bytes)",
				  label);
	return 0;
}

static int check_size(uint64_t file_size, const char *label, struct fg_err *err)
{
	if (file_size == 0)
		return fg_err_set(err, FG_EINPUT, "%s: file is empty", label);
	if (file_size < 8)
		return fg_err_set(err, FG_EINPUT,
				  "%s: file is %llu bytes, too short for the 8-byte header length",
				  label, (unsigned long long)file_size);
	return 0;
}

static struct fg_st_file *file_new(const char *label, uint64_t file_size)
{
	struct fg_st_file *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->path = strdup(label);
	if (!f->path) {
		free(f);
		return NULL;
	}
	f->file_size = file_size;
	return f;
}

/* Shared by the in-memory entry points: buf holds at least 8 + N bytes. */
static int parse_buffer(struct fg_st_file **out, const uint8_t *buf, size_t len,
			uint64_t file_size, int whole, const char *label, struct fg_err *err)
{
	struct fg_st_file *f = NULL;
	uint64_t hlen;
	int rc;

	rc = check_size(file_size, label, err);
	if (rc)
		return rc;
	if (len < 8)
		return fg_err_set(err, FG_EINPUT, "%s: only %zu bytes given, fewer than the header length",
				  label, len);
	hlen = load_le64(buf);
	rc = check_length(hlen, file_size, label, err);
	if (rc)
		return rc;
	if (hlen > len - 8)
		return fg_err_set(err, FG_EINPUT, "%s: only %zu bytes given, the header needs %llu",
				  label, len, (unsigned long long)(hlen + 8));
	f = file_new(label, file_size);
	if (!f)
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", label);
	f->header_len = hlen;
	f->data_start = 8 + hlen;
	f->map = whole ? buf : NULL;
	f->map_len = whole ? len : 0;
	rc = parse_header_text(f, (const char *)buf + 8, hlen, whole ? buf + f->data_start : NULL, NULL, 0, label, err);
	if (rc) {
		fg_st_close(f);
		return rc;
	}
	*out = f;
	return 0;
}

int fg_st_parse(struct fg_st_file **out, const uint8_t *buf, size_t len,
		const char *label, struct fg_err *err)
{
	return parse_buffer(out, buf, len, len, 1, label, err);
}

int fg_st_parse_header(struct fg_st_file **out, const uint8_t *buf, size_t len,
		       uint64_t file_size, const char *label, struct fg_err *err)
{
	return parse_buffer(out, buf, len, file_size, 0, label, err);
}

static int read_full(int fd, void *buf, size_t len, off_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t got = pread(fd, p, len, off);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : -EIO;
		p += got;
		len -= (size_t)got;
		off += got;
	}
	return 0;
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/*
 * The first len bytes of fd (the length and the header text), mapped and
 * populated at once: the parse reads every byte, front to back.  Read ahead
 * exactly that range and no further: a populated mapping's faults read
 * around each page, so the last ones pulled the data section's first
 * hundreds of KiB into the page cache too, for every shard (from storage on
 * a cold source; 2% of a warm 100,000-tensor inspection's CPU zero-filled
 * the holes of a sparse one).  A kernel without MADV_POPULATE_READ (before
 * 5.14) leaves the pages to the parse's own faults.
 */
static void *map_header(int fd, size_t len)
{
	void *map;

	(void)posix_fadvise(fd, 0, (off_t)len, POSIX_FADV_WILLNEED);
	map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED)
		return map;
	(void)madvise(map, len, MADV_RANDOM);
#ifdef MADV_POPULATE_READ
	(void)madvise(map, len, MADV_POPULATE_READ);
#endif
	return map;
}

/*
 * The header text of an open file: mapped (the page cache's own pages, no
 * copy: copying 57 MB of headers cost a 400,000-tensor inspection 20 ms of
 * CPU) and parsed under fg_st_guard, or read with pread into a buffer of
 * its own when the file cannot be mapped.
 */
int fg_st_open_fd(struct fg_st_file **out, int fd, const char *label, const struct fg_st_parse_opts *opts,
		  struct fg_err *err)
{
	struct fg_st_file *f = NULL;
	struct stat st;
	uint8_t lenbuf[8];
	char *hdr = NULL;
	void *map = MAP_FAILED;
	uint64_t hlen;
	int rc;

	if (fstat(fd, &st) != 0)
		return fg_err_set(err, FG_EINPUT, "%s: cannot stat: %s", label, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return fg_err_set(err, FG_EINPUT, "%s: not a regular file", label);
	rc = check_size((uint64_t)st.st_size, label, err);
	if (rc)
		return rc;
	rc = read_full(fd, lenbuf, 8, 0);
	if (rc)
		return fg_err_set(err, FG_EINPUT, "%s: cannot read the header length: %s", label, strerror(-rc));
	hlen = load_le64(lenbuf);
	rc = check_length(hlen, (uint64_t)st.st_size, label, err);
	if (rc)
		return rc;
	f = file_new(label, (uint64_t)st.st_size);
	if (!f)
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", label);
	map = map_header(fd, (size_t)(8 + hlen));
	if (map == MAP_FAILED) {
		hdr = malloc((size_t)hlen + 1);
		if (!hdr) {
			rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory for a %llu-byte header",
					label, (unsigned long long)hlen);
			goto out;
		}
		rc = read_full(fd, hdr, (size_t)hlen, 8);
		if (rc) {
			rc = fg_err_set(err, FG_EINPUT, "%s: cannot read the header: %s", label,
					rc == -EIO ? "the file is shorter than its header" : strerror(-rc));
			goto out;
		}
	}
	f->header_len = hlen;
	f->data_start = 8 + hlen;
	f->dev = (uint64_t)st.st_dev;
	f->ino = (uint64_t)st.st_ino;
	f->mtime_ns = mtime_ns(&st);
	if (map != MAP_FAILED)
		rc = parse_header_text(f, (const char *)map + 8, hlen, NULL, opts, 1, label, err);
	else
		rc = parse_header_text(f, hdr, hlen, NULL, opts, 0, label, err);
out:
	if (map != MAP_FAILED)
		munmap(map, (size_t)(8 + hlen));
	free(hdr);
	if (rc) {
		fg_st_close(f);
		return rc;
	}
	*out = f;
	return 0;
}

int fg_st_check_same(const struct fg_st_file *f, int fd, struct fg_err *err)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		return fg_err_set(err, FG_EINPUT, "%s: cannot stat: %s", f->path, strerror(errno));
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_dev != f->dev || (uint64_t)st.st_ino != f->ino)
		return fg_err_set(err, FG_EINPUT, "%s: changed since its header was read (another file now)", f->path);
	if ((uint64_t)st.st_size != f->file_size)
		return fg_err_set(err, FG_EINPUT, "%s: changed since its header was read (%llu bytes, was %llu)",
				  f->path, (unsigned long long)st.st_size, (unsigned long long)f->file_size);
	if (mtime_ns(&st) != f->mtime_ns)
		return fg_err_set(err, FG_EINPUT, "%s: changed since its header was read (modified)", f->path);
	return 0;
}

int fg_st_map(struct fg_st_file *f, int fd, struct fg_err *err)
{
	void *map;
	int rc;

	if (f->map)
		return 0;
	rc = fg_st_check_same(f, fd, err);
	if (rc)
		return rc;
	if (f->file_size > SIZE_MAX)
		return fg_err_set(err, FG_EINPUT, "%s: file too large to map", f->path);
	map = mmap(NULL, (size_t)f->file_size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return fg_err_set(err, FG_EINPUT, "%s: cannot map: %s", f->path, strerror(errno));
	/* A forge reads whole tensors front to back: read ahead. */
	madvise(map, (size_t)f->file_size, MADV_SEQUENTIAL);
	f->map = map;
	f->map_len = (size_t)f->file_size;
	f->owns_map = 1;
	for (size_t i = 0; i < f->n_tensors; i++)
		f->tensors[i].data = f->map + f->data_start + f->tensors[i].begin;
	return 0;
}

int fg_st_open(struct fg_st_file **out, const char *path, struct fg_err *err)
{
	struct fg_st_file *f = NULL;
	int fd, rc;

	/* O_NONBLOCK: a FIFO must not block the open; regular files ignore it. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return fg_err_set(err, FG_EINPUT, "%s: cannot open: %s", path, strerror(errno));
	rc = fg_st_open_fd(&f, fd, path, NULL, err);
	if (!rc)
		rc = fg_st_map(f, fd, err);
	close(fd);
	if (rc) {
		fg_st_close(f);
		return rc;
	}
	*out = f;
	return 0;
}

/* ---- SIGBUS guard ---- */

struct guard {
	sigjmp_buf jb;
	struct guard *prev;
};

static _Thread_local struct guard *guard_top;
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction guard_old;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	struct guard *g = guard_top;

	if (g)
		siglongjmp(g->jb, 1);
	/* Not ours: the action that was there before, or the default (dies). */
	if (guard_old.sa_flags & SA_SIGINFO && guard_old.sa_sigaction) {
		guard_old.sa_sigaction(sig, si, uc);
		return;
	}
	if (guard_old.sa_handler != SIG_DFL && guard_old.sa_handler != SIG_IGN && guard_old.sa_handler) {
		guard_old.sa_handler(sig);
		return;
	}
	signal(SIGBUS, SIG_DFL);
	raise(SIGBUS);
}

/*
 * Make on_sigbus the SIGBUS action, unless it is: checked at every guard,
 * since the parser guards every header it reads and something may have
 * set its own action since (a test harness does, before each test); the
 * action it replaces is the one chained to for a SIGBUS outside a guard.
 */
static void guard_install(void)
{
	struct sigaction sa, cur;

	pthread_mutex_lock(&guard_lock);
	if (sigaction(SIGBUS, NULL, &cur) != 0 || !(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != on_sigbus) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_sigbus;
		sa.sa_flags = SA_SIGINFO | SA_NODEFER;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGBUS, &sa, &guard_old);
	}
	pthread_mutex_unlock(&guard_lock);
}

int fg_st_guard(int (*fn)(void *ctx, struct fg_err *err), void *ctx, const char *what, struct fg_err *err)
{
	struct guard g;
	int rc;

	guard_install();
	g.prev = guard_top;
	if (sigsetjmp(g.jb, 1)) {
		guard_top = g.prev;
		return fg_err_set(err, FG_EINPUT, "%s: changed while it was read (the file shrank: SIGBUS)", what);
	}
	guard_top = &g;
	rc = fn(ctx, err);
	guard_top = g.prev;
	return rc;
}
