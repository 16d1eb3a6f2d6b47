/*
 * provenance.c: forged.json from struct fg_provenance (provenance.h).
 *
 * The document is built whole or not at all: any allocation that fails
 * makes the build return NULL, so a half-written provenance never reaches
 * disk or the store.
 */
#include "forge/artifact/provenance.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "forge/artifact/internal.h"
#include "forge/core/fs.h"

cJSON *fg_art_string_array(char *const *items, size_t n)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t i = 0; a && i < n; i++) {
		cJSON *s = cJSON_CreateString(items[i]);

		if (!s || !cJSON_AddItemToArray(a, s)) {
			cJSON_Delete(s);
			cJSON_Delete(a);
			a = NULL;
		}
	}
	return a;
}

/* Add item (which may be NULL: a failed allocation) to obj under key; 0 or FG_ENOMEM, item freed on failure. */
static int put(cJSON *obj, const char *key, cJSON *item)
{
	if (obj && item && cJSON_AddItemToObject(obj, key, item))
		return 0;
	cJSON_Delete(item);
	return FG_ENOMEM;
}

static int put_str(cJSON *obj, const char *key, const char *value)
{
	return put(obj, key, cJSON_CreateString(value));
}

/* value, or null when there is none. */
static int put_str_or_null(cJSON *obj, const char *key, const char *value)
{
	return put(obj, key, value ? cJSON_CreateString(value) : cJSON_CreateNull());
}

/* A copy of list, or an empty array of its kind when there is none. */
static cJSON *copy_or_empty(const cJSON *list, int object)
{
	if (list)
		return cJSON_Duplicate(list, 1);
	return object ? cJSON_CreateObject() : cJSON_CreateArray();
}

cJSON *fg_provenance_json(const struct fg_provenance *p)
{
	cJSON *doc = cJSON_CreateObject(), *src = cJSON_CreateObject(), *dec = cJSON_CreateObject();
	char when[32];
	struct tm tm;
	int bad = 0;

	if (!gmtime_r(&p->created_at, &tm) || !strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(when, sizeof(when), "1970-01-01T00:00:00Z");
	bad |= put_str(doc, "schema", FG_PROVENANCE_SCHEMA);
	bad |= put_str(doc, "forged_version", p->forged_version ? p->forged_version : "unknown");
	bad |= put_str(doc, "created_at", when);
	bad |= put_str(src, "path", p->source);
	bad |= put_str(src, "family", p->family);
	bad |= put_str(src, "head_set", p->head_set);
	bad |= put_str_or_null(src, "revision", p->revision);
	bad |= put_str_or_null(src, "resolved_commit", p->resolved_commit);
	bad |= put(doc, "source", src);
	bad |= put_str(doc, "backbone", p->backbone);
	bad |= put_str(doc, "target", p->target);
	bad |= put(doc, "layout", p->layout ? cJSON_Duplicate(p->layout, 1) : cJSON_CreateNull());
	bad |= put_str(doc, "policy", p->policy);
	bad |= put_str(dec, "source_convention", fg_conv_name(p->source_convention));
	bad |= put_str(dec, "target_convention", fg_conv_name(p->target_convention));
	bad |= put(dec, "shifted_tensors", fg_art_string_array(p->shifted, p->n_shifted));
	bad |= put_str(dec, "expert_layout", p->expert_layout);
	bad |= put_str(dec, "shift_precision", "f32"); /* FG_OP_SHIFT computes and stores in F32 */
	if (p->quantization)
		bad |= put(dec, "quantization", cJSON_Duplicate(p->quantization, 1));
	bad |= put(doc, "decisions", dec);
	bad |= put(doc, "removed_from_backbone", fg_art_string_array(p->removed, p->n_removed));
	bad |= put(doc, "originals", copy_or_empty(p->originals, 0));
	bad |= put(doc, "relayouts", copy_or_empty(p->relayouts, 0));
	bad |= put(doc, "files", copy_or_empty(p->files, 1));
	bad |= put_str(doc, "fingerprint", p->fingerprint);
	/* Issue 13: new fields only. */
	bad |= put_str_or_null(doc, "head_fingerprint", p->head_fingerprint);
	bad |= put_str_or_null(doc, "digest", p->digest);
	bad |= put_str_or_null(doc, "mtplx_runtime", p->mtplx_runtime);
	if (p->job)
		bad |= put(doc, "job", cJSON_Duplicate(p->job, 1));
	if (bad) {
		cJSON_Delete(doc); /* src and dec are in it, or were freed by put() */
		return NULL;
	}
	return doc;
}
