/*
 * provenance.c: forged.json from struct fg_provenance (provenance.h).
 *
 * The document is built whole or not at all: any allocation that fails
 * makes the build return NULL, so a half-written provenance never reaches
 * disk or the store.
 */
#include "forge/artifact/provenance.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "forge/artifact/internal.h"
#include "forge/core/filehash.h"
#include "forge/core/fs.h"
#include "forge/core/json.h"


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
/* ---- checking the originals ---- */

#define PROVENANCE_MAX (256u << 20)
#define DECOMPRESS_OUT ((size_t)4 << 20)

/* A detail line, cut to len (a path can be long; the line is for people). */
static void say(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* The SHA-256 of path, read whole once per check (memo: path -> hex). */
static int hash_once(cJSON *memo, const char *path, const char **hex, struct fg_err *err)
{
	const cJSON *have = cJSON_GetObjectItemCaseSensitive(memo, path);
	char h[FG_SHA256_HEX];
	int rc;

	if (!cJSON_IsString(have)) {
		rc = fg_filehash(NULL, path, h, NULL, NULL, NULL, err);
		if (rc)
			return rc;
		if (!(have = cJSON_AddStringToObject(memo, path, h)))
			return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	*hex = have->valuestring;
	return 0;
}

/*
 * What the reference checks share: the SHA-256 of each source file (path ->
 * hex), and the last source file's header, kept open because the records of
 * one file come together and a shard's header can hold thousands of tensors
 * (parsing it again per record made the check quadratic in the records).
 */
struct ref_memo {
	cJSON *hashes;
	char path[PATH_MAX];
	struct fg_st_file *st;
};

/* The header of path, parsed once for the records that follow it. */
static int memo_open(struct ref_memo *m, const char *path, struct fg_st_file **st, struct fg_err *err)
{
	int rc;

	if (m->st && strcmp(m->path, path) == 0) {
		*st = m->st;
		return 0;
	}
	fg_st_close(m->st);
	m->st = NULL;
	if ((rc = fg_st_open(&m->st, path, err)))
		return rc;
	snprintf(m->path, sizeof(m->path), "%s", path);
	*st = m->st;
	return 0;
}

/* A reference record against its source file; 1 when it checks out, else 0 with why in detail. */
static int check_reference(const cJSON *rec, const char *source, struct ref_memo *memo, char *detail, size_t len)
{
	const char *file = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "source_file"));
	const char *want = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "file_sha256"));
	const char *tensor = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "tensor"));
	const char *dtype = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "dtype"));
	const cJSON *off = cJSON_GetObjectItemCaseSensitive(rec, "offset");
	const cJSON *length = cJSON_GetObjectItemCaseSensitive(rec, "length");
	char path[PATH_MAX];
	struct fg_st_file *st = NULL;
	const struct fg_tensor *t;
	struct fg_err e = { 0 };
	struct stat sb;
	const char *got = NULL;
	int ok = 0;

	if (!file || !want || !tensor || !dtype || !cJSON_IsNumber(off) || !cJSON_IsNumber(length) || !fg_fs_confined_relpath(file)) {
		say(detail, len, "the record lacks source_file, file_sha256, offset, length or dtype");
		return 0;
	}
	if (stat(source, &sb) == 0 && S_ISREG(sb.st_mode))
		snprintf(path, sizeof(path), "%s", source); /* forged from one file */
	else if (fg_fs_join(path, sizeof(path), source, file, &e))
		goto fail;
	if (hash_once(memo->hashes, path, &got, &e))
		goto fail;
	if (strcmp(got, want) != 0) {
		say(detail, len, "%s: SHA-256 %s, the record says %s", path, got, want);
		return 0;
	}
	if (memo_open(memo, path, &st, &e))
		goto fail;
	t = fg_st_find(st, tensor);
	if (!t)
		say(detail, len, "%s holds no tensor '%s'", path, tensor);
	else if ((double)(st->data_start + t->begin) != off->valuedouble ||
		 (double)fg_tensor_bytes(t) != length->valuedouble || strcmp(fg_dtype_name(t->dtype), dtype) != 0)
		say(detail, len, "%s: '%s' is %s at [%llu, +%llu), the record says %s at [%.0f, +%.0f)", path,
			 tensor, fg_dtype_name(t->dtype), (unsigned long long)(st->data_start + t->begin),
			 (unsigned long long)fg_tensor_bytes(t), dtype, off->valuedouble, length->valuedouble);
	else
		ok = 1;
	if (ok)
		say(detail, len, "%s: SHA-256 and offsets match", path);
	return ok;
fail:
	say(detail, len, "%s", e.msg);
	return 0;
}

/* A copy record against its blob: decompressed, the bytes and their SHA-256. */
static int check_copy(const cJSON *rec, const char *artifact, char *detail, size_t len)
{
	const char *blob = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "blob"));
	const char *want = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "sha256"));
	const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(rec, "bytes");
	char path[PATH_MAX], hex[FG_SHA256_HEX];
	ZSTD_DCtx *d = NULL;
	struct fg_sha256 *sha = NULL;
	uint8_t *in = NULL, *out = NULL;
	uint64_t total = 0;
	size_t zr = 1;
	int fd = -1, ok = 0;

	if (!blob || !want || !cJSON_IsNumber(bytes) || !fg_fs_confined_relpath(blob) ||
	    fg_fs_join(path, sizeof(path), artifact, blob, NULL)) {
		say(detail, len, "the record lacks blob, sha256 or bytes");
		return 0;
	}
	d = ZSTD_createDCtx();
	sha = fg_sha256_new();
	in = malloc(ZSTD_DStreamInSize());
	out = malloc(DECOMPRESS_OUT);
	if (!d || !sha || !in || !out) {
		say(detail, len, "out of memory");
		goto out;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		say(detail, len, "%s: %s", path, strerror(errno));
		goto out;
	}
	for (;;) {
		ssize_t got = read(fd, in, ZSTD_DStreamInSize());
		ZSTD_inBuffer zin = { in, got > 0 ? (size_t)got : 0, 0 };

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			say(detail, len, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (got == 0)
			break;
		while (zin.pos < zin.size) {
			ZSTD_outBuffer zout = { out, DECOMPRESS_OUT, 0 };

			zr = ZSTD_decompressStream(d, &zout, &zin);
			if (ZSTD_isError(zr)) {
				say(detail, len, "%s: zstd: %s", path, ZSTD_getErrorName(zr));
				goto out;
			}
			fg_sha256_update(sha, out, zout.pos);
			total += zout.pos;
		}
	}
	fg_sha256_final_hex(sha, hex);
	if (zr != 0)
		say(detail, len, "%s: the zstd frame is cut short", path);
	else if ((double)total != bytes->valuedouble || strcmp(hex, want) != 0)
		say(detail, len, "%s: %llu bytes with SHA-256 %s, the record says %.0f with %s", path,
			 (unsigned long long)total, hex, bytes->valuedouble, want);
	else {
		say(detail, len, "%s: decompresses to the recorded bytes", path);
		ok = 1;
	}
out:
	if (fd >= 0)
		close(fd);
	ZSTD_freeDCtx(d);
	fg_sha256_free(sha);
	free(in);
	free(out);
	return ok;
}

int fg_provenance_verify_originals(const char *artifact, const char *source, cJSON **report, size_t *n_failed,
				   struct fg_err *err)
{
	char path[PATH_MAX];
	cJSON *prov = NULL, *doc = NULL, *list;
	struct ref_memo memo = { .hashes = NULL };
	const cJSON *originals, *rec;
	size_t checked = 0, failed = 0;
	int rc;

	*report = NULL;
	*n_failed = 0;
	if ((rc = fg_fs_join(path, sizeof(path), artifact, "forged.json", err)) ||
	    (rc = fg_json_load(&prov, path, PROVENANCE_MAX, err)))
		return rc;
	originals = cJSON_GetObjectItemCaseSensitive(prov, "originals");
	if (!source)
		source = cJSON_GetStringValue(
			cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(prov, "source"), "path"));
	if (!cJSON_IsArray(originals) || !source) {
		rc = fg_err_set(err, FG_EINPUT, "%s: no originals array or source path", path);
		goto out;
	}
	doc = cJSON_CreateObject();
	memo.hashes = cJSON_CreateObject();
	if (!doc || !memo.hashes || !cJSON_AddStringToObject(doc, "schema", FG_ORIGINALS_CHECK_SCHEMA) ||
	    !cJSON_AddStringToObject(doc, "artifact", artifact) || !cJSON_AddStringToObject(doc, "source", source) ||
	    !(list = cJSON_CreateArray())) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(rec, originals)
	{
		const char *form = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "form"));
		const char *tensor = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "tensor"));
		char detail[FG_ERR_MSG_MAX];
		cJSON *row = cJSON_CreateObject();
		int ok;

		/* Records before the form key were copies. */
		if (!form)
			form = cJSON_GetObjectItemCaseSensitive(rec, "blob") ? "copy" : "";
		if (strcmp(form, "reference") == 0)
			ok = check_reference(rec, source, &memo, detail, sizeof(detail));
		else if (strcmp(form, "copy") == 0)
			ok = check_copy(rec, artifact, detail, sizeof(detail));
		else {
			ok = 0;
			say(detail, sizeof(detail), "unknown form '%s'", form);
		}
		checked++;
		failed += !ok;
		if (!row || !cJSON_AddStringToObject(row, "tensor", tensor ? tensor : "") ||
		    !cJSON_AddStringToObject(row, "form", form) || !cJSON_AddBoolToObject(row, "ok", ok) ||
		    !cJSON_AddStringToObject(row, "detail", detail) || !cJSON_AddItemToArray(list, row)) {
			cJSON_Delete(row);
			cJSON_Delete(list);
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
	}
	cJSON_AddBoolToObject(doc, "ok", failed == 0);
	cJSON_AddNumberToObject(doc, "checked", (double)checked);
	cJSON_AddNumberToObject(doc, "failed", (double)failed);
	cJSON_AddItemToObject(doc, "originals", list);
	*report = doc;
	*n_failed = failed;
	doc = NULL;
out:
	cJSON_Delete(doc);
	cJSON_Delete(memo.hashes);
	fg_st_close(memo.st);
	cJSON_Delete(prov);
	return rc;
}
