/*
 * fuzz_jsonlex_diff.c: differential libFuzzer target for forged's own JSON
 * reader (forge/format/jsonlex.h) against cJSON, which it replaced on the
 * hot paths.  For every input it checks three things:
 *
 *   1. the text alone: fg_jl_skip + fg_jl_end_plain accepts exactly what
 *      fg_json_parse (cJSON_ParseWithLengthOpts, the index's rule) accepts;
 *   2. the text as an index: the weight_map entries the jsonlex walk finds
 *      (key, value, in order, as C strings) are the ones cJSON's tree holds,
 *      and both refuse the same documents;
 *   3. the bytes as a safetensors file: fg_st_parse accepts exactly what the
 *      tree-based reader (tests/fuzz/ref_st_header.c) accepts, with the same
 *      tensors (name, dtype, shape, offsets) and metadata.
 *
 * Any difference traps.  Built by `make fuzz` and run briefly by `make test`.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "forge/core/json.h"
#include "forge/format/jsonlex.h"
#include "forge/format/safetensors.h"
#include "tests/fuzz/ref_st_header.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Entries of the first "weight_map" object, "key\x01value\x02" each; false when the walk refuses the text. */
static bool walk_index(const char *text, size_t len, char **out, size_t *out_len)
{
	struct fg_jl l, m;
	struct fg_jl_str key, val;
	bool first = true, found = false;
	char *buf = malloc(2 * len + 16), *k = malloc(len + 1), *v = malloc(len + 1);
	size_t n = 0;

	*out = buf;
	*out_len = 0;
	fg_jl_init(&l, text, len);
	if (!fg_jl_skip(&l) || !fg_jl_end_plain(&l))
		goto bad;
	fg_jl_init(&l, text, len);
	if (fg_jl_peek(&l) != FG_JL_OBJECT)
		goto none;
	fg_jl_begin(&l, '{');
	while (fg_jl_more(&l, '}', &first)) {
		fg_jl_key(&l, &key);
		fg_jl_decode(&key, k);
		if (!found && strcmp(k, "weight_map") == 0 && fg_jl_peek(&l) == FG_JL_OBJECT) {
			bool f2 = true;

			found = true;
			m = l;
			fg_jl_begin(&m, '{');
			while (fg_jl_more(&m, '}', &f2)) {
				fg_jl_key(&m, &key);
				fg_jl_decode(&key, k);
				n += (size_t)snprintf(buf + n, 2 * len + 16 - n, "%s\x01", k);
				if (fg_jl_peek(&m) == FG_JL_STRING) {
					fg_jl_string(&m, &val);
					fg_jl_decode(&val, v);
					n += (size_t)snprintf(buf + n, 2 * len + 16 - n, "%s\x02", v);
				} else {
					fg_jl_skip(&m);
					n += (size_t)snprintf(buf + n, 2 * len + 16 - n, "\x03\x02");
				}
			}
		} else if (!found && strcmp(k, "weight_map") == 0) {
			found = true; /* the first one is not an object: no map */
			fg_jl_skip(&l);
			continue;
		}
		fg_jl_skip(&l);
	}
none:
	free(k);
	free(v);
	*out_len = n;
	return true;
bad:
	free(k);
	free(v);
	return false;
}

static char *cjson_index(const cJSON *doc, size_t len, size_t *out_len)
{
	const cJSON *wm = cJSON_GetObjectItemCaseSensitive(doc, "weight_map"), *kv;
	char *buf = malloc(2 * len + 16);
	size_t n = 0;

	if (cJSON_IsObject(wm)) {
		cJSON_ArrayForEach(kv, wm) {
			n += (size_t)snprintf(buf + n, 2 * len + 16 - n, "%s\x01", kv->string);
			if (cJSON_IsString(kv))
				n += (size_t)snprintf(buf + n, 2 * len + 16 - n, "%s\x02", kv->valuestring);
			else
				n += (size_t)snprintf(buf + n, 2 * len + 16 - n, "\x03\x02");
		}
	}
	*out_len = n;
	return buf;
}

static void same_file(const struct fg_st_file *a, const struct fg_st_file *b)
{
	if (a->n_tensors != b->n_tensors || a->n_meta != b->n_meta)
		__builtin_trap();
	for (size_t i = 0; i < a->n_tensors; i++) {
		const struct fg_tensor *x = &a->tensors[i], *y = &b->tensors[i];

		if (strcmp(x->name, y->name) || x->dtype != y->dtype || x->rank != y->rank || x->begin != y->begin ||
		    fg_tensor_end(x) != fg_tensor_end(y) || fg_tensor_nelem(x) != fg_tensor_nelem(y) ||
		    memcmp(x->shape, y->shape, (size_t)x->rank * sizeof(x->shape[0])))
			__builtin_trap();
		if (fg_st_find(a, x->name) != x)
			__builtin_trap();
	}
	for (size_t i = 0; i < a->n_meta; i++)
		if (strcmp(a->meta[i].key, b->meta[i].key) || strcmp(a->meta[i].value, b->meta[i].value))
			__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct fg_err err = { 0 };
	struct fg_st_file *a = NULL, *b = NULL;
	cJSON *doc = NULL;
	int rc_new, rc_ref;

	/* 1 and 2: the text (the NUL rule is fg_json_parse's, checked before either reader runs). */
	if (!memchr(text, '\0', size)) {
		char *walked = NULL, *tree = NULL;
		size_t wl = 0, tl = 0;
		bool ok_new = walk_index(text, size, &walked, &wl);
		bool ok_ref = fg_json_parse(&doc, text, size, "fuzz", &err) == 0;

		if (ok_new != ok_ref)
			__builtin_trap();
		if (ok_ref) {
			tree = cjson_index(doc, size, &tl);
			if (wl != tl || memcmp(walked, tree, wl) != 0)
				__builtin_trap();
		}
		free(walked);
		free(tree);
		cJSON_Delete(doc);
	}
	/* 3: the bytes as a whole safetensors file. */
	rc_new = fg_st_parse(&a, data, size, "fuzz", &err);
	rc_ref = ref_st_parse(&b, data, size, "fuzz", &err);
	if ((rc_new == 0) != (rc_ref == 0))
		__builtin_trap();
	if (!rc_new)
		same_file(a, b);
	fg_st_close(a);
	fg_st_close(b);
	return 0;
}
