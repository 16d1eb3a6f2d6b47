/*
 * ref_st_header.c: the tree-based safetensors header reader forged used
 * before jsonlex (cJSON parses the whole header, then the tree is walked),
 * kept only as the reference of tests/fuzz/fuzz_jsonlex_diff.c: the new
 * one-pass reader must accept exactly what this one accepts and build the
 * same table.  Compiled against today's safetensors.h (so with its rank
 * cap); every entry point is prefixed ref_.
 */
#include "forge/format/safetensors.h"

#include "forge/core/str.h"
#include "tests/fuzz/ref_st_header.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_EXACT_INT 9007199254740992.0 /* 2^53: larger doubles are not exact */

static int ref_shape_nelem(const uint64_t *shape, int rank, uint64_t *out)
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
		uint8_t c = s[i];
		size_t need;
		uint32_t cp, min;

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
static size_t slot_of(const struct fg_st_file *f, const char *name)
{
	size_t mask = f->n_slots - 1;
	size_t i = (size_t)fg_fnv1a(name) & mask;

	while (f->slots[i] && strcmp(f->tensors[f->slots[i] - 1].name, name) != 0)
		i = (i + 1) & mask;
	return i;
}



static void ref_st_close(struct fg_st_file *f)
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

/* Read a JSON number that must be an exact integer in [0, 2^53]; FG_EINPUT and *why otherwise. */
static int json_u64(const cJSON *item, uint64_t *out, const char **why)
{
	double d;

	if (!cJSON_IsNumber(item)) {
		*why = "is not a number";
		return FG_EINPUT;
	}
	d = item->valuedouble;
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

/* Copy s into the arena at *pos; the arena was sized for every string. */
static const char *arena_put(char *arena, size_t *pos, const char *s)
{
	size_t n = strlen(s) + 1;
	char *dst = arena + *pos;

	memcpy(dst, s, n);
	*pos += n;
	return dst;
}

static int parse_tensor(struct fg_tensor *t, const cJSON *entry, const char *label,
			struct fg_err *err)
{
	const cJSON *dtype, *shape, *offsets, *dim;
	const char *why;
	uint64_t nbytes, nelem, b, e;
	enum fg_dtype dt;
	int rank = 0;

	if (!cJSON_IsObject(entry))
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': entry is not a JSON object",
				  label, t->name);
	dtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
	shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
	offsets = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
	if (!cJSON_IsString(dtype))
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': missing or non-string \"dtype\"",
				  label, t->name);
	if (fg_dtype_parse(dtype->valuestring, &dt) != 0)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': unknown dtype '%.64s'",
				  label, t->name, dtype->valuestring);
	t->dtype = dt;
	if (!cJSON_IsArray(shape))
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': missing or non-array \"shape\"",
				  label, t->name);
	cJSON_ArrayForEach(dim, shape) {
		if (rank == FG_ST_MAX_RANK)
			return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': shape rank exceeds the cap of %d",
					  label, t->name, FG_ST_MAX_RANK);
		if (json_u64(dim, &((uint64_t *)(uintptr_t)t->shape)[rank], &why) != 0)
			return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': shape[%d] %s",
					  label, t->name, rank, why);
		rank++;
	}
	t->rank = (unsigned)rank & 7u;
	if (ref_shape_nelem(t->shape, rank, &nelem) != 0 || nelem > UINT64_MAX / fg_dtype_size(t->dtype))
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': element count of its shape overflows",
				  label, t->name);
	nbytes = nelem * fg_dtype_size(t->dtype);
	if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': \"data_offsets\" is not a [begin, end] pair",
				  label, t->name);
	if (json_u64(offsets->child, &b, &why) != 0)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': data_offsets begin %s",
				  label, t->name, why);
	if (json_u64(offsets->child->next, &e, &why) != 0)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': data_offsets end %s",
				  label, t->name, why);
	if (e < b)
		return fg_err_set(err, FG_EINPUT, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin",
				  label, t->name, (unsigned long long)b, (unsigned long long)e);
	if (e - b != nbytes)
		return fg_err_set(err, FG_EINPUT,
				  "%s: tensor '%s': data_offsets span %llu bytes but %s x %llu elements need %llu",
				  label, t->name, (unsigned long long)(e - b), fg_dtype_name(t->dtype),
				  (unsigned long long)nelem, (unsigned long long)nbytes);
	t->begin = b;
	return 0;
}

static int parse_metadata(struct fg_st_file *f, const cJSON *md, char *arena, size_t *pos,
			  const char *label, struct fg_err *err)
{
	const cJSON *kv;
	size_t n = 0;

	if (!cJSON_IsObject(md))
		return fg_err_set(err, FG_EINPUT, "%s: \"__metadata__\" is not a JSON object", label);
	cJSON_ArrayForEach(kv, md) {
		if (!cJSON_IsString(kv))
			return fg_err_set(err, FG_EINPUT, "%s: metadata value for key '%.128s' is not a string",
					  label, kv->string);
		n++;
	}
	f->meta = calloc(n ? n : 1, sizeof(*f->meta));
	if (!f->meta)
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory for metadata", label);
	cJSON_ArrayForEach(kv, md) {
		for (size_t i = 0; i < f->n_meta; i++)
			if (strcmp(f->meta[i].key, kv->string) == 0)
				return fg_err_set(err, FG_EINPUT, "%s: duplicate metadata key '%.128s'",
						  label, kv->string);
		f->meta[f->n_meta].key = arena_put(arena, pos, kv->string);
		f->meta[f->n_meta].value = arena_put(arena, pos, kv->valuestring);
		f->n_meta++;
	}
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

/* The data offsets must cover [0, data_len) exactly once, in order. */
static int check_tiling(const struct fg_st_file *f, uint64_t data_len, const char *label,
			struct fg_err *err)
{
	uint64_t expect = 0;

	for (size_t i = 0; i < f->n_tensors; i++) {
		const struct fg_tensor *t = &f->tensors[i];

		if (fg_tensor_end(t) > data_len)
			return fg_err_set(err, FG_EINPUT,
					  "%s: tensor '%s': data_offsets end %llu runs past the %llu-byte data section",
					  label, t->name, (unsigned long long)fg_tensor_end(t),
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
		expect = fg_tensor_end(t);
	}
	if (expect != data_len)
		return fg_err_set(err, FG_EINPUT,
				  "%s: %llu trailing bytes after the last tensor (data section is %llu bytes)",
				  label, (unsigned long long)(data_len - expect), (unsigned long long)data_len);
	return 0;
}

/*
 * Parse and validate the NUL-terminated header text hdr (hlen bytes) of a
 * file of file_size bytes into f.  data, when not NULL, is the data section.
 */
static int parse_header_text(struct fg_st_file *f, const char *hdr, uint64_t hlen,
			     const uint8_t *data, const char *label, struct fg_err *err)
{
	const char *end = NULL;
	const cJSON *item;
	cJSON *root;
	size_t bad, n = 0, pos = 0, strbytes = 0, slots = 1;
	uint64_t data_len = f->file_size - f->data_start;
	int rc = 0;

	bad = utf8_bad_at((const uint8_t *)hdr, hlen);
	if (bad != hlen)
		return fg_err_set(err, FG_EINPUT, "%s: header is not valid UTF-8 text (%s at header byte %zu)",
				  label, hdr[bad] ? "bad sequence" : "NUL byte", bad);
	root = cJSON_ParseWithOpts(hdr, &end, 1);
	if (!root)
		return fg_err_set(err, FG_EINPUT, "%s: header is not valid JSON (error near header byte %td)",
				  label, end ? end - hdr : (ptrdiff_t)0);
	if (!cJSON_IsObject(root)) {
		rc = fg_err_set(err, FG_EINPUT, "%s: header is not a JSON object", label);
		goto out;
	}
	cJSON_ArrayForEach(item, root) {
		strbytes += strlen(item->string) + 1;
		if (strcmp(item->string, "__metadata__") == 0) {
			const cJSON *kv;

			cJSON_ArrayForEach(kv, item) {
				strbytes += strlen(kv->string ? kv->string : "") + 1;
				if (cJSON_IsString(kv))
					strbytes += strlen(kv->valuestring) + 1;
			}
			continue;
		}
		n++;
	}
	if (n > FG_ST_MAX_TENSORS) {
		rc = fg_err_set(err, FG_EINPUT, "%s: %zu tensors exceed the cap of %u",
				label, n, FG_ST_MAX_TENSORS);
		goto out;
	}
	while (slots < 2 * n + 2)
		slots <<= 1;
	f->strings = malloc(strbytes ? strbytes : 1);
	/* the table, then one shape per tensor (the tensors point at theirs) */
	f->tensors = calloc(n ? n : 1, sizeof(*f->tensors) + sizeof(uint64_t) * FG_ST_MAX_RANK);
	f->slots = calloc(slots, sizeof(*f->slots));
	if (!f->strings || !f->tensors || !f->slots) {
		rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory for %zu tensors", label, n);
		goto out;
	}
	f->n_slots = slots;
	cJSON_ArrayForEach(item, root) {
		struct fg_tensor *t;

		if (strcmp(item->string, "__metadata__") == 0) {
			if (f->meta) {
				rc = fg_err_set(err, FG_EINPUT, "%s: duplicate \"__metadata__\"", label);
				goto out;
			}
			rc = parse_metadata(f, item, f->strings, &pos, label, err);
			if (rc)
				goto out;
			continue;
		}
		t = &f->tensors[f->n_tensors];
		t->shape = (const uint64_t *)(void *)(f->tensors + n) + f->n_tensors * FG_ST_MAX_RANK;
		t->name = arena_put(f->strings, &pos, item->string);
		rc = parse_tensor(t, item, label, err);
		if (rc)
			goto out;
		f->n_tensors++;
	}
	qsort(f->tensors, f->n_tensors, sizeof(*f->tensors), cmp_offsets);
	for (size_t i = 0; i < f->n_tensors; i++) {
		size_t s = slot_of(f, f->tensors[i].name);

		if (f->slots[s]) {
			rc = fg_err_set(err, FG_EINPUT, "%s: duplicate tensor name '%s'",
					label, f->tensors[i].name);
			goto out;
		}
		f->slots[s] = (uint32_t)(i + 1);
	}
	rc = check_tiling(f, data_len, label, err);
	if (rc)
		goto out;
	for (size_t i = 0; data && i < f->n_tensors; i++)
		f->tensors[i].data = data + f->tensors[i].begin;
out:
	cJSON_Delete(root);
	return rc;
}

/* Checks on the 8-byte length that come before reading the header text. */
static int check_length(uint64_t hlen, uint64_t file_size, const char *label, struct fg_err *err)
{
	if (hlen > FG_ST_HEADER_MAX)
		return fg_err_set(err, FG_EINPUT, "%s: header length %llu exceeds the cap of %llu bytes",
				  label, (unsigned long long)hlen, FG_ST_HEADER_MAX);
	if (hlen > file_size - 8)
		return fg_err_set(err, FG_EINPUT,
				  "%s: header length %llu runs past the end of the file (%llu bytes after the length)",
				  label, (unsigned long long)hlen, (unsigned long long)(file_size - 8));
	if (hlen < 2)
		return fg_err_set(err, FG_EINPUT, "%s: header length %llu is too short for a JSON object",
				  label, (unsigned long long)hlen);
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
	char *hdr = NULL;
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
	hdr = malloc(hlen + 1);
	if (!f || !hdr) {
		rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory for a %llu-byte header",
				label, (unsigned long long)hlen);
		goto out;
	}
	memcpy(hdr, buf + 8, hlen);
	hdr[hlen] = '\0';
	f->header_len = hlen;
	f->data_start = 8 + hlen;
	f->map = whole ? buf : NULL;
	f->map_len = whole ? len : 0;
	rc = parse_header_text(f, hdr, hlen, whole ? buf + f->data_start : NULL, label, err);
out:
	free(hdr);
	if (rc) {
		ref_st_close(f);
		return rc;
	}
	*out = f;
	return 0;
}

int ref_st_parse(struct fg_st_file **out, const uint8_t *buf, size_t len,
		const char *label, struct fg_err *err)
{
	return parse_buffer(out, buf, len, len, 1, label, err);
}


