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
 * into a compact tensor table (no tree); duplicate keys are kept as cJSON
 * kept them, and duplicate names are caught with the same hash table that
 * later serves name lookups.
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

/* Returns the offset of the first byte that breaks UTF-8 (or is NUL), or len. */
static size_t utf8_bad_at(const uint8_t *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint8_t c;
		size_t need;
		uint32_t cp, min;

		/* Eight ASCII bytes at a time: no high bit set and no zero byte. */
		while (i + 8 <= len) {
			uint64_t w;

			memcpy(&w, s + i, 8);
			if ((w & 0x8080808080808080ull) || ((w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull))
				break;
			i += 8;
		}
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
 * Find name in the table; returns the slot holding it, or the empty slot where
 * it would go.  n_slots is a power of two larger than the tensor count.
 */
static size_t slot_of_h(const struct fg_st_file *f, const char *name, uint32_t h)
{
	size_t mask = f->n_slots - 1;
	size_t i = (size_t)h & mask;

	while (f->slots[i]) {
		const struct fg_tensor *t = &f->tensors[f->slots[i] - 1];

		if (t->hash == h && strcmp(t->name, name) == 0)
			break;
		i = (i + 1) & mask;
	}
	return i;
}

const struct fg_tensor *fg_st_find(const struct fg_st_file *f, const char *name)
{
	size_t i;

	if (!f || !f->n_slots)
		return NULL;
	i = slot_of_h(f, name, (uint32_t)fg_fnv1a(name));
	return f->slots[i] ? &f->tensors[f->slots[i] - 1] : NULL;
}

const struct fg_tensor *fg_st_find_n(const struct fg_st_file *f, const char *name, size_t len, uint32_t h)
{
	size_t mask, i;

	if (!f || !f->n_slots)
		return NULL;
	mask = f->n_slots - 1;
	for (i = (size_t)h & mask; f->slots[i]; i = (i + 1) & mask) {
		const struct fg_tensor *t = &f->tensors[f->slots[i] - 1];

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

void fg_st_close(struct fg_st_file *f)
{
	if (!f)
		return;
	if (f->owns_map && f->map)
		munmap((void *)f->map, f->map_len);
	free(f->path);
	free(f->tensors);
	free(f->meta);
	free(f->strings);
	free(f->slots);
	free(f);
}

/* One JSON value as the old tree held it: its kind and, for numbers, the value. */
struct jval {
	enum fg_jl_kind kind;
	double num;
};

/* Read a JSON number that must be an exact integer in [0, 2^53]; FG_EINPUT and *why otherwise. */
static int json_u64(const struct jval *v, uint64_t *out, const char **why)
{
	double d;

	if (v->kind != FG_JL_NUMBER) {
		*why = "is not a number";
		return FG_EINPUT;
	}
	d = v->num;
	if (d < 0) {
		*why = "is negative";
		return FG_EINPUT;
	}
	if (d != floor(d) || !isfinite(d)) {
		*why = "is not an integer";
		return FG_EINPUT;
	}
	if (d > MAX_EXACT_INT) {
		*why = "is too large";
		return FG_EINPUT;
	}
	*out = (uint64_t)d;
	return 0;
}

/* A value at the cursor, kept as a jval (numbers read, anything else validated and skipped). */
static bool read_jval(struct fg_jl *l, struct jval *v)
{
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

/* The checks of one entry, in the order (and with the words) of the tree-based reader. */
static int check_entry(struct fg_tensor *t, const struct entry *e, bool is_object, const char *label,
		       struct fg_err *err)
{
	const char *why;
	uint64_t nbytes, b, x;

	if (!is_object)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': entry is not a JSON object",
				  label, t->name);
	if (e->dtype_kind != FG_JL_STRING)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': missing or non-string \"dtype\"",
				  label, t->name);
	if (e->dtype_len >= sizeof(e->dtype) || fg_dtype_parse(e->dtype, &t->dtype) != 0)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': unknown dtype '%.15s'",
				  label, t->name, e->dtype);
	if (e->shape_kind != FG_JL_ARRAY)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': missing or non-array \"shape\"",
				  label, t->name);
	for (size_t i = 0; i < e->rank; i++) {
		if (i == FG_ST_MAX_RANK)
			return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': shape rank exceeds the cap of %d",
					  label, t->name, FG_ST_MAX_RANK);
		if (json_u64(&e->shape[i], &t->shape[i], &why) != 0)
			return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': shape[%zu] %s",
					  label, t->name, i, why);
	}
	t->rank = (int)e->rank;
	if (fg_shape_nelem(t->shape, t->rank, &t->nelem) != 0 ||
	    t->nelem > UINT64_MAX / fg_dtype_size(t->dtype))
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': element count of its shape overflows",
				  label, t->name);
	nbytes = t->nelem * fg_dtype_size(t->dtype);
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
				  (unsigned long long)t->nelem, (unsigned long long)nbytes);
	t->begin = b;
	t->end = x;
	return 0;
}

static int cmp_offsets(const void *pa, const void *pb)
{
	const struct fg_tensor *a = pa, *b = pb;

	if (a->begin != b->begin)
		return a->begin < b->begin ? -1 : 1;
	if (a->end != b->end)
		return a->end < b->end ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* The data offsets must cover [0, data_len) exactly once, in order. */
static int check_tiling(const struct fg_st_file *f, uint64_t data_len, const char *label,
			struct fg_err *err)
{
	uint64_t expect = 0;

	for (size_t i = 0; i < f->n_tensors; i++) {
		const struct fg_tensor *t = &f->tensors[i];

		if (t->end > data_len)
			return fg_err_set(err, FG_EINPUT,
					  "%s: tensor '%s': data_offsets end %llu runs past the %llu-byte data section",
					  label, t->name, (unsigned long long)t->end,
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
		expect = t->end;
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

/* The "__metadata__" object at the cursor, into f->meta (strings in the arena at *pos). */
static int read_metadata(struct fg_st_file *f, struct fg_jl *l, char *arena, size_t *pos, size_t *cap,
			 const char *hdr, uint64_t hlen, const char *label, struct fg_err *err)
{
	struct fg_jl_str key, val;
	const char *bad_key = NULL, *dup = NULL;
	bool first = true;
	int rc;

	if (fg_jl_peek(l) != FG_JL_OBJECT) {
		if (!json_ok(hdr, hlen))
			return FG_EAGAIN_SYNTAX;
		return fg_err_set(err, FG_EINPUT, "%s: \"__metadata__\" is not a JSON object", label);
	}
	if (!fg_jl_begin(l, '{'))
		return FG_EAGAIN_SYNTAX;
	while (fg_jl_more(l, '}', &first)) {
		char *k = arena + *pos;

		if (!fg_jl_key(l, &key))
			return FG_EAGAIN_SYNTAX;
		*pos += fg_jl_decode(&key, k) + 1;
		if (fg_jl_peek(l) != FG_JL_STRING) {
			if (!fg_jl_skip(l))
				return FG_EAGAIN_SYNTAX;
			if (!bad_key)
				bad_key = k;
			continue;
		}
		if (!fg_jl_string(l, &val))
			return FG_EAGAIN_SYNTAX;
		if (FG_GROW(f->meta, f->n_meta + 1, *cap))
			return fg_err_set(err, FG_ENOMEM, "%s: out of memory for metadata", label);
		f->meta[f->n_meta].key = k;
		f->meta[f->n_meta].value = arena + *pos;
		*pos += fg_jl_decode(&val, arena + *pos) + 1;
		f->n_meta++;
	}
	if (l->bad)
		return FG_EAGAIN_SYNTAX;
	if (bad_key) {
		if (!json_ok(hdr, hlen))
			return FG_EAGAIN_SYNTAX;
		return fg_err_set(err, FG_EINPUT, "%s: metadata value for key '%.128s' is not a string",
				  label, bad_key);
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

/* The name hash table: slots of index + 1, at most 2/3 full. */
static int build_slots(struct fg_st_file *f, const char *label, struct fg_err *err)
{
	size_t slots = 8;

	while (slots < f->n_tensors + f->n_tensors / 2 + 2)
		slots <<= 1;
	f->slots = calloc(slots, sizeof(*f->slots));
	if (!f->slots)
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory for %zu tensors", label, f->n_tensors);
	f->n_slots = slots;
	for (size_t i = 0; i < f->n_tensors; i++) {
		size_t s = slot_of_h(f, f->tensors[i].name, f->tensors[i].hash);

		if (f->slots[s])
			return fg_err_set(err, FG_EINPUT, "%s: duplicate tensor name '%s'", label, f->tensors[i].name);
		f->slots[s] = (uint32_t)(i + 1);
	}
	return 0;
}

/*
 * Parse and validate the header text hdr (hlen bytes, no NUL inside) of a
 * file of file_size bytes into f, in one pass over the text.  data, when
 * not NULL, is the data section.  A meaning error is reported only once
 * the whole text is known to be JSON, so a syntax error anywhere wins, as
 * it did when a tree was parsed first.
 */
static int parse_header_text(struct fg_st_file *f, const char *hdr, uint64_t hlen, const uint8_t *data,
			     const struct fg_st_parse_opts *opts, const char *label, struct fg_err *err)
{
	struct fg_jl l;
	struct fg_jl_str key;
	struct entry e;
	char *arena = NULL, *old;
	size_t bad, pos = 0, tcap = 0, mcap = 0;
	uint64_t data_len = f->file_size - f->data_start;
	bool first = true, seen_meta = false, is_object;
	int rc = 0;

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
	/* Decoded strings are never longer than the text they come from. */
	arena = malloc((size_t)hlen + 1);
	if (!arena) {
		rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory for a %llu-byte header", label,
				(unsigned long long)hlen);
		goto out;
	}
	if (!fg_jl_begin(&l, '{'))
		goto syntax;
	while (fg_jl_more(&l, '}', &first)) {
		struct fg_tensor *t;
		char *name = arena + pos;
		size_t nlen;

		if (!fg_jl_key(&l, &key))
			goto syntax;
		nlen = fg_jl_decode(&key, name);
		if (nlen == 12 && memcmp(name, "__metadata__", 12) == 0) {
			if (seen_meta) {
				if (!json_ok(hdr, hlen))
					goto syntax;
				rc = fg_err_set(err, FG_EINPUT, "%s: duplicate \"__metadata__\"", label);
				goto out;
			}
			seen_meta = true;
			rc = read_metadata(f, &l, arena, &pos, &mcap, hdr, hlen, label, err);
			if (rc == FG_EAGAIN_SYNTAX)
				goto syntax;
			if (rc)
				goto out;
			continue;
		}
		pos += nlen + 1;
		if (f->n_tensors == FG_ST_MAX_TENSORS) {
			if (!json_ok(hdr, hlen))
				goto syntax;
			rc = fg_err_set(err, FG_EINPUT, "%s: more than %u tensors exceed the cap of %u",
					label, FG_ST_MAX_TENSORS, FG_ST_MAX_TENSORS);
			goto out;
		}
		if (FG_GROW(f->tensors, f->n_tensors + 1, tcap)) {
			rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory for %zu tensors", label, f->n_tensors + 1);
			goto out;
		}
		t = &f->tensors[f->n_tensors];
		memset(t, 0, sizeof(*t));
		t->name = name;
		t->hash = (uint32_t)fg_fnv1a_n(name, nlen);
		/* Escaped keys of the entry decode into the arena's free end (never committed). */
		if (!read_entry(&l, &e, arena + pos, &is_object))
			goto syntax;
		rc = check_entry(t, &e, is_object, label, err);
		if (rc) {
			if (!json_ok(hdr, hlen))
				goto syntax;
			goto out;
		}
		f->n_tensors++;
	}
	if (l.bad || !fg_jl_end(&l))
		goto syntax;
	/* Keep only the bytes used: names become offsets, then pointers into the shrunk arena. */
	for (size_t i = 0; i < f->n_tensors; i++)
		f->tensors[i].name = (const char *)(uintptr_t)(f->tensors[i].name - arena);
	for (size_t i = 0; i < f->n_meta; i++) {
		f->meta[i].key = (const char *)(uintptr_t)(f->meta[i].key - arena);
		f->meta[i].value = (const char *)(uintptr_t)(f->meta[i].value - arena);
	}
	old = realloc(arena, pos ? pos : 1);
	f->strings = old ? old : arena;
	for (size_t i = 0; i < f->n_tensors; i++)
		f->tensors[i].name = f->strings + (uintptr_t)f->tensors[i].name;
	for (size_t i = 0; i < f->n_meta; i++) {
		f->meta[i].key = f->strings + (uintptr_t)f->meta[i].key;
		f->meta[i].value = f->strings + (uintptr_t)f->meta[i].value;
	}
	arena = NULL;
	if (f->n_tensors < tcap) {
		struct fg_tensor *shrunk = realloc(f->tensors, (f->n_tensors ? f->n_tensors : 1) * sizeof(*f->tensors));

		if (shrunk)
			f->tensors = shrunk;
	}
	{
		bool sorted = true;

		for (size_t i = 1; i < f->n_tensors && sorted; i++)
			sorted = cmp_offsets(&f->tensors[i - 1], &f->tensors[i]) < 0;
		if (!sorted)
			qsort(f->tensors, f->n_tensors, sizeof(*f->tensors), cmp_offsets);
	}
	rc = build_slots(f, label, err);
	if (!rc)
		rc = check_tiling(f, data_len, label, err);
	if (rc)
		goto out;
	for (size_t i = 0; data && i < f->n_tensors; i++)
		f->tensors[i].data = data + f->tensors[i].begin;
	if (opts && opts->classify)
		for (size_t i = 0; i < f->n_tensors; i++)
			opts->classify(&f->tensors[i], strlen(f->tensors[i].name), opts->ctx);
	goto out;
syntax:
	rc = fg_err_set(err, FG_EINPUT, "%s: header is not valid JSON (error near header byte %td)",
			label, (l.bad ? l.bad : l.p) - hdr);
out:
	free(arena);
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
	rc = parse_header_text(f, (const char *)buf + 8, hlen, whole ? buf + f->data_start : NULL, NULL, label, err);
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
 * The header text buffer, one per thread and reused from file to file (a
 * checkpoint's shards have headers of similar size): fresh pages for every
 * header cost more than parsing them.  Freed when the thread ends.
 */
static pthread_key_t hdr_key;
static pthread_once_t hdr_once = PTHREAD_ONCE_INIT;

struct hdr_buf {
	char *p;
	size_t cap;
};

static void hdr_free(void *v)
{
	struct hdr_buf *b = v;

	if (b)
		free(b->p);
	free(b);
}

static void hdr_key_init(void)
{
	pthread_key_create(&hdr_key, hdr_free);
}

static char *hdr_buffer(size_t len)
{
	struct hdr_buf *b;

	pthread_once(&hdr_once, hdr_key_init);
	b = pthread_getspecific(hdr_key);
	if (!b) {
		if (!(b = calloc(1, sizeof(*b))))
			return NULL;
		pthread_setspecific(hdr_key, b);
	}
	if (len > b->cap) {
		char *p = realloc(b->p, len);

		if (!p)
			return NULL;
		b->p = p;
		b->cap = len;
	}
	return b->p;
}

int fg_st_open_fd(struct fg_st_file **out, int fd, const char *label, const struct fg_st_parse_opts *opts,
		  struct fg_err *err)
{
	struct fg_st_file *f = NULL;
	struct stat st;
	uint8_t lenbuf[8];
	char *hdr = NULL;
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
	hdr = hdr_buffer(hlen + 1);
	if (!f || !hdr) {
		rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory for a %llu-byte header",
				label, (unsigned long long)hlen);
		goto out;
	}
	rc = read_full(fd, hdr, hlen, 8);
	if (rc) {
		rc = fg_err_set(err, FG_EINPUT, "%s: cannot read the header: %s", label,
				rc == -EIO ? "the file is shorter than its header" : strerror(-rc));
		goto out;
	}
	hdr[hlen] = '\0';
	f->header_len = hlen;
	f->data_start = 8 + hlen;
	f->dev = (uint64_t)st.st_dev;
	f->ino = (uint64_t)st.st_ino;
	f->mtime_ns = mtime_ns(&st);
	rc = parse_header_text(f, hdr, hlen, NULL, opts, label, err);
out:
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
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;
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

static void guard_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &guard_old);
}

int fg_st_guard(int (*fn)(void *ctx, struct fg_err *err), void *ctx, const char *what, struct fg_err *err)
{
	struct guard g;
	int rc;

	pthread_once(&guard_once, guard_install);
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
