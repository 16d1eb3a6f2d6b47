/*
 * mtplx.c: MTPLX's head fingerprint, forged's artifact digest, and
 * mtplx_runtime.json read, written and restamped (mtplx.h, which cites the
 * MTPLX sources every rule here follows).
 *
 * The runtime document forged writes is MTPLX's own shape: a host running
 * MTPLX loads a forged pack through RuntimeContract.from_dict as it loads
 * one of its own.  Until a verification is posted forged cannot say the
 * pack is fast, so it says so in MTPLX's words: a blocking "unverified"
 * status, which MTPLX answers by running the pack as
 * architecture-compatible-but-unverified rather than refusing it.
 */
#include "forge/model/mtplx.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forge/core/fs.h"
#include "forge/core/json.h"
#include "forge/core/str.h"
#include "forge/source/checkpoint.h"

#define READ_CHUNK (4u << 20)

/* ---- the mtp file and the head fingerprint ---- */

static int is_file(const char *dir, const char *name)
{
	char path[4096];
	struct stat st;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return 0;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int fg_mtplx_mtp_file(const char *dir, const cJSON *config_raw, char *path, size_t cap)
{
	/* artifacts.expected_mtp_file: the pointer wins (even when missing), then the candidates in order. */
	static const char *const candidates[] = { "mtp.safetensors", "mtp/weights.safetensors",
						  "model-mtp.safetensors" };
	const cJSON *extra = cJSON_GetObjectItemCaseSensitive(config_raw, "mlx_lm_extra_tensors");
	const char *ptr = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(extra, "mtp_file"));

	if (!cap)
		return 0;
	path[0] = '\0';
	if (cJSON_IsObject(extra) && ptr && *ptr) {
		if (snprintf(path, cap, "%s", ptr) >= (int)cap)
			return 0;
		return is_file(dir, ptr);
	}
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		if (is_file(dir, candidates[i])) {
			snprintf(path, cap, "%s", candidates[i]);
			return 1;
		}
	}
	snprintf(path, cap, "%s", candidates[0]);
	return 0;
}

/* Feed the file dir/name to each non-NULL hash; 0 or FG_EINPUT/FG_ENOMEM. */
static int hash_file(const char *dir, const char *name, struct fg_sha256 *const *hs, size_t n, uint8_t *buf,
		     struct fg_err *err)
{
	char path[4096];
	int fd, rc = 0;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return fg_err_set(err, FG_EINPUT, "%s/%s: path too long", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fg_err_set(err, FG_EINPUT, "%s: %s", path, strerror(errno));
	for (;;) {
		ssize_t got = read(fd, buf, READ_CHUNK);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			rc = fg_err_set(err, FG_EINPUT, "%s: %s", path, strerror(errno));
		if (got <= 0)
			break;
		for (size_t i = 0; i < n; i++)
			if (hs[i])
				fg_sha256_update(hs[i], buf, (size_t)got);
	}
	close(fd);
	return rc;
}

static const uint8_t frame_nul = 0;

void fg_mtplx_frame_open(struct fg_sha256 *h)
{
	fg_sha256_update(h, "config.json", strlen("config.json"));
	fg_sha256_update(h, &frame_nul, 1);
}

void fg_mtplx_frame_between(struct fg_sha256 *h)
{
	fg_sha256_update(h, &frame_nul, 1);
	fg_sha256_update(h, "mtp", strlen("mtp"));
	fg_sha256_update(h, &frame_nul, 1);
}

void fg_mtplx_frame_close(struct fg_sha256 *h)
{
	fg_sha256_update(h, &frame_nul, 1);
}

int fg_mtplx_head_fingerprint(const char *dir, struct fg_head_fingerprints *out, struct fg_err *err)
{
	struct fg_sha256 *framed = fg_sha256_new(), *legacy = fg_sha256_new(), *side = fg_sha256_new();
	uint8_t *buf = malloc(READ_CHUNK);
	struct fg_head_fingerprints fp;
	char cfg_path[4096], hex[FG_SHA256_HEX];
	cJSON *config = NULL;
	int rc, same;

	memset(&fp, 0, sizeof(fp));
	if (!framed || !legacy || !side || !buf) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = fg_fs_join(cfg_path, sizeof(cfg_path), dir, "config.json", err)) ||
	    (rc = fg_json_load(&config, cfg_path, FG_CKPT_CONFIG_MAX, err)))
		goto out;
	if (!fg_mtplx_mtp_file(dir, config, fp.mtp_file, sizeof(fp.mtp_file))) {
		rc = fg_err_set(err, FG_EINPUT, "%s: no mtp file to fingerprint ('%s' is not a file)", dir,
				fp.mtp_file);
		goto out;
	}
	/* The legacy framing names mtp.safetensors itself: in a forged artifact the same file, read once. */
	same = strcmp(fp.mtp_file, "mtp.safetensors") == 0;
	{
		struct fg_sha256 *cfg[2] = { framed, legacy };
		struct fg_sha256 *head[3] = { framed, side, same ? legacy : NULL };

		fg_mtplx_frame_open(framed);
		if ((rc = hash_file(dir, "config.json", cfg, 2, buf, err)))
			goto out;
		fg_mtplx_frame_between(framed);
		if ((rc = hash_file(dir, fp.mtp_file, head, 3, buf, err)))
			goto out;
		fg_mtplx_frame_close(framed);
	}
	if (!same && is_file(dir, "mtp.safetensors")) {
		struct fg_sha256 *only[1] = { legacy };

		if ((rc = hash_file(dir, "mtp.safetensors", only, 1, buf, err)))
			goto out;
	}
	fg_sha256_final_hex(framed, hex);
	snprintf(fp.mtplx, sizeof(fp.mtplx), "sha256:%s", hex);
	/* No mtp.safetensors: there is no legacy value (empty). */
	if (same || is_file(dir, "mtp.safetensors"))
		fg_sha256_final_hex(legacy, fp.legacy);
	fg_sha256_final_hex(side, fp.sidecar);
	*out = fp;
out:
	cJSON_Delete(config);
	fg_sha256_free(framed);
	fg_sha256_free(legacy);
	fg_sha256_free(side);
	free(buf);
	return rc;
}

/* ---- the artifact digest ---- */

static int cmp_names(const void *a, const void *b)
{
	return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

static int is_hex64(const char *s)
{
	return s && fg_lower_hex_span(s) == 64 && s[64] == '\0';
}

int fg_artifact_digest(const cJSON *files, char out[FG_DIGEST_MAX], struct fg_err *err)
{
	static const uint8_t nul = 0, lf = '\n';
	const cJSON **items = NULL, *f;
	struct fg_sha256 *h = NULL;
	char hex[FG_SHA256_HEX];
	size_t n = 0, cap;
	int rc = 0;

	if (!cJSON_IsObject(files))
		return fg_err_set(err, FG_EINPUT, "the artifact digest needs forged.json's files object");
	cap = (size_t)cJSON_GetArraySize(files);
	items = calloc(cap ? cap : 1, sizeof(*items));
	h = fg_sha256_new();
	if (!items || !h) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	cJSON_ArrayForEach(f, files) {
		if (!f->string || !*f->string || !is_hex64(cJSON_GetStringValue(f))) {
			rc = fg_err_set(err, FG_EINPUT, "files['%s'] is not a 64-digit lower-case SHA-256",
					f->string ? f->string : "");
			goto out;
		}
		items[n++] = f;
	}
	/* strcmp is byte order for UTF-8: the order the digest is defined in. */
	qsort(items, n, sizeof(*items), cmp_names);
	for (size_t i = 0; i < n; i++) {
		if (i && strcmp(items[i - 1]->string, items[i]->string) == 0) {
			rc = fg_err_set(err, FG_EINPUT, "files names '%s' twice", items[i]->string);
			goto out;
		}
		fg_sha256_update(h, items[i]->string, strlen(items[i]->string));
		fg_sha256_update(h, &nul, 1);
		fg_sha256_update(h, items[i]->valuestring, 64);
		fg_sha256_update(h, &lf, 1);
	}
	fg_sha256_final_hex(h, hex);
	snprintf(out, FG_DIGEST_MAX, "sha256:%s", hex);
out:
	fg_sha256_free(h);
	free(items);
	return rc;
}

/* ---- arch ids ---- */

/*
 * registry.py@a845fd10 ARCHITECTURE_CATALOG: the entry whose aliases name
 * each forged family (qwen3-next-mtp lists qwen3_5 and qwen3-next; mimo-mtp
 * matches mimo_v2 by its "mimo" alias, as `_detect_arch_id` matches by
 * substring).
 */
static const struct {
	const char *family, *arch_id;
} arch_ids[] = {
	{ "qwen3_next", "qwen3-next-mtp" }, { "qwen3_5", "qwen3-next-mtp" },
	{ "deepseek_v3", "deepseek-v3-mtp" }, { "deepseek_v32", "deepseek-v3-mtp" },
	{ "glm4_moe", "glm4-moe-mtp" }, { "glm4_moe_lite", "glm4-moe-lite-mtp" },
	{ "glm_moe_dsa", "glm-moe-dsa-mtp" }, { "mimo", "mimo-mtp" }, { "mimo_v2", "mimo-mtp" },
};

const char *fg_mtplx_arch_id(const char *family)
{
	for (size_t i = 0; family && i < sizeof(arch_ids) / sizeof(arch_ids[0]); i++)
		if (strcmp(arch_ids[i].family, family) == 0)
			return arch_ids[i].arch_id;
	return "generic-mtp";
}

/* ---- reading: what MTPLX's registry makes of a document ---- */

static const char *const profile_choices[] = {
	/* profiles.py@1b4643b2 PROFILE_CHOICES (FULL_STACK_PROFILE_NAME is "turbo-full-stack") */
	"stable", "performance-cold", "sustained", "turbo", "exact", "max-diagnostic", "turbo-full-stack",
};

static const char *const blocking_statuses[] = {
	"candidate", "candidate_build_only_benchmark_pending", "candidate_build_only", "failed", "fail",
	"failing", "pending", "blocked", "blocker", "needs_repair", "needs_reverify", "unverified",
};
static const char *const blocking_prefixes[] = {
	"candidate", "fail", "pending", "blocked", "blocker", "needs", "unverified",
};
static const char *const blocking_verdicts[] = {
	"mtp_acceptance_collapsed", "no_mtp_depth_beat_ar", "no_quality_passed_mtp_depth_beat_ar",
};

static int in_list(const char *const *list, size_t n, const char *s)
{
	for (size_t i = 0; s && i < n; i++)
		if (strcmp(list[i], s) == 0)
			return 1;
	return 0;
}

#define IN(list, s) in_list(list, sizeof(list) / sizeof(list[0]), s)

/* registry.py `_text`: str(value or "").lower().replace("-", "_") (strings only here). */
static void text_of(const cJSON *v, char *buf, size_t cap)
{
	const char *s = cJSON_GetStringValue(v);
	size_t i = 0;

	for (; s && s[i] && i + 1 < cap; i++) {
		char c = s[i];

		buf[i] = c == '-' ? '_' : (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
	}
	buf[i] = '\0';
}

/* `_runtime_evidence_blocker` for section (an object or not); the reason into why. */
static int evidence_blocker(const cJSON *section, const char *name, char *why, size_t cap)
{
	char status[96];

	if (!cJSON_IsObject(section))
		return 0;
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(section, "public_release_blocker"))) {
		snprintf(why, cap, "%s is marked public_release_blocker", name);
		return 1;
	}
	text_of(cJSON_GetObjectItemCaseSensitive(section, "status"), status, sizeof(status));
	if (!status[0])
		return 0;
	if (!IN(blocking_statuses, status)) {
		int hit = 0;

		for (size_t i = 0; i < sizeof(blocking_prefixes) / sizeof(blocking_prefixes[0]) && !hit; i++) {
			size_t n = strlen(blocking_prefixes[i]);

			hit = strncmp(status, blocking_prefixes[i], n) == 0 && status[n] == '_';
		}
		if (!hit)
			return 0;
	}
	snprintf(why, cap, "%s status is %s", name,
		 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(section, "status")));
	return 1;
}

static int add_copy(cJSON *o, const char *key, const cJSON *v)
{
	cJSON *c = v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull();

	if (!c || !cJSON_AddItemToObject(o, key, c)) {
		cJSON_Delete(c);
		return 0;
	}
	return 1;
}

static int add_str_or_null(cJSON *o, const char *key, const char *s)
{
	return (s ? cJSON_AddStringToObject(o, key, s) : cJSON_AddNullToObject(o, key)) != NULL;
}

cJSON *fg_mtplx_runtime_summary(const cJSON *doc)
{
	static const char *const required[] = { "mtplx_version", "arch_id", "mtp_depth_max", "recommended_profile",
						"exactness_baseline", "verified_on" };
	const cJSON *depth = cJSON_GetObjectItemCaseSensitive(doc, "mtp_depth_max");
	const cJSON *profile = cJSON_GetObjectItemCaseSensitive(doc, "recommended_profile");
	const cJSON *evidence = cJSON_GetObjectItemCaseSensitive(doc, "speed_evidence");
	const cJSON *prov = cJSON_GetObjectItemCaseSensitive(doc, "forge_provenance");
	cJSON *o = cJSON_CreateObject();
	char error[512] = "", why[160] = "", verdict[96];
	size_t at = 0;
	int ok = o != NULL;

	if (!o)
		return NULL;
	if (!cJSON_IsObject(doc)) {
		snprintf(error, sizeof(error), "the document is not a JSON object");
	} else {
		for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
			if (cJSON_GetObjectItemCaseSensitive(doc, required[i]))
				continue;
			at += (size_t)snprintf(error + at, sizeof(error) - at, "%s%s",
					       at ? ", " : "runtime contract missing required keys: ", required[i]);
			if (at >= sizeof(error))
				at = sizeof(error) - 1;
		}
	}
	/* from_dict's conversions, in its order, after the missing-keys check. */
	if (!error[0] && (!cJSON_IsNumber(depth) || !isfinite(depth->valuedouble)))
		snprintf(error, sizeof(error), "runtime contract mtp_depth_max is not an integer");
	else if (!error[0] && depth->valuedouble < 1.0)
		snprintf(error, sizeof(error), "runtime contract mtp_depth_max must be positive");
	else if (!error[0] && !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(doc, "exactness_baseline")))
		snprintf(error, sizeof(error), "runtime contract exactness_baseline is not an object");
	else if (!error[0] && !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(doc, "verified_on")))
		snprintf(error, sizeof(error), "runtime contract verified_on is not an object");
	/* _runtime_contract_blocker: exactness first, then speed evidence, then its verdict. */
	if (!evidence_blocker(cJSON_GetObjectItemCaseSensitive(doc, "exactness_baseline"), "exactness_baseline", why,
			      sizeof(why)) &&
	    !evidence_blocker(evidence, "speed_evidence", why, sizeof(why)) && cJSON_IsObject(evidence)) {
		text_of(cJSON_GetObjectItemCaseSensitive(evidence, "verdict"), verdict, sizeof(verdict));
		if (IN(blocking_verdicts, verdict))
			snprintf(why, sizeof(why), "speed_evidence verdict is %s",
				 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(evidence, "verdict")));
	}
	ok = ok && cJSON_AddStringToObject(o, "file", FG_MTPLX_RUNTIME_FILE) &&
	     cJSON_AddBoolToObject(o, "loads", !error[0]) && add_str_or_null(o, "error", error[0] ? error : NULL) &&
	     add_copy(o, "mtplx_version", cJSON_GetObjectItemCaseSensitive(doc, "mtplx_version")) &&
	     add_copy(o, "arch_id", cJSON_GetObjectItemCaseSensitive(doc, "arch_id")) &&
	     add_copy(o, "mtp_depth_max", depth) && add_copy(o, "recommended_profile", profile) &&
	     /* resolve_profile_name's aliases are not modelled: an unknown name is shown, not refused. */
	     cJSON_AddBoolToObject(o, "profile_known", cJSON_IsString(profile) && IN(profile_choices, profile->valuestring)) &&
	     add_copy(o, "min_engine_version", cJSON_GetObjectItemCaseSensitive(doc, "min_engine_version")) &&
	     cJSON_AddBoolToObject(o, "verified", !error[0] && !why[0]) &&
	     add_str_or_null(o, "blocker", why[0] ? why : NULL) &&
	     add_copy(o, "verified_on", cJSON_GetObjectItemCaseSensitive(doc, "verified_on")) &&
	     add_copy(o, "speed_verdict", cJSON_GetObjectItemCaseSensitive(evidence, "verdict")) &&
	     add_copy(o, "artifact_fingerprint", cJSON_GetObjectItemCaseSensitive(evidence, "artifact_fingerprint")) &&
	     add_str_or_null(o, "written_by",
			     cJSON_GetObjectItemCaseSensitive(prov, "forged_version") ? "forged"
			     : cJSON_IsObject(doc) ? "mtplx" : NULL);
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* ---- writing ---- */

/* verified_on and speed_evidence before any verification: MTPLX's blocking status. */
static cJSON *unverified_on(void)
{
	cJSON *o = cJSON_CreateObject();

	if (!o || !cJSON_AddStringToObject(o, "status", "unverified") || !cJSON_AddNullToObject(o, "timestamp") ||
	    !cJSON_AddNullToObject(o, "hardware") || !cJSON_AddNullToObject(o, "machine_arch") ||
	    !cJSON_AddNullToObject(o, "macos") || !cJSON_AddNullToObject(o, "model")) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static cJSON *unverified_evidence(const char *fingerprint)
{
	cJSON *o = cJSON_CreateObject(), *g;

	if (!o || !cJSON_AddStringToObject(o, "status", "unverified") || !cJSON_AddNullToObject(o, "verdict") ||
	    !cJSON_AddNumberToObject(o, "depth", 0) || !cJSON_AddArrayToObject(o, "tok_s") ||
	    !cJSON_AddArrayToObject(o, "acceptance_by_depth") || !(g = cJSON_AddObjectToObject(o, "greedy_diagnostic")) ||
	    !cJSON_AddNullToObject(g, "tok_s") || !cJSON_AddArrayToObject(o, "forge_verify_rows") ||
	    !cJSON_AddArrayToObject(o, "quality_rejected") || !cJSON_AddArrayToObject(o, "acceptance_collapsed") ||
	    !cJSON_AddArrayToObject(o, "failure_reasons") || !add_str_or_null(o, "artifact_fingerprint", fingerprint)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/*
 * mtp_patch.py@0943c6cb MTPContract: the generic injector's defaults
 * (post_norm, embedding_hidden); the qwen3_5_mtp injector feeds pre_norm
 * whatever the contract says (qwen3_5_mtp_patch.py `_mtplx_hidden_variant`).
 * The quantization fields are left to config.json: a wrong group size here
 * would override it.
 */
static cJSON *contract_of(const char *model_type)
{
	const char *variant = model_type && strcmp(model_type, "qwen3_5_mtp") == 0 ? "pre_norm" : "post_norm";
	cJSON *o = cJSON_CreateObject();

	if (!o || !cJSON_AddStringToObject(o, "base_hidden_variant", variant) ||
	    !cJSON_AddStringToObject(o, "hidden_variant", variant) ||
	    !cJSON_AddStringToObject(o, "concat_order", "embedding_hidden")) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static int put(cJSON *o, const char *key, cJSON *item)
{
	if (item && cJSON_AddItemToObject(o, key, item))
		return 1;
	cJSON_Delete(item);
	return 0;
}

cJSON *fg_mtplx_runtime_new(const struct fg_mtplx_pack *p)
{
	cJSON *o = cJSON_CreateObject(), *prov = cJSON_CreateObject(), *recipe = cJSON_CreateObject();
	cJSON *inputs = cJSON_CreateObject();
	int ok = o && prov && recipe && inputs;

	ok = ok && cJSON_AddStringToObject(o, "mtplx_version", p->target_version ? p->target_version : "") &&
	     cJSON_AddStringToObject(o, "arch_id", fg_mtplx_arch_id(p->family)) &&
	     cJSON_AddNumberToObject(o, "mtp_depth_max", (double)(p->head_layers > 0 ? p->head_layers : 1)) &&
	     cJSON_AddStringToObject(o, "recommended_profile", "stable") &&
	     cJSON_AddObjectToObject(o, "exactness_baseline") && put(o, "verified_on", unverified_on()) &&
	     put(o, "speed_evidence", unverified_evidence(p->head_fingerprint)) &&
	     put(o, "mtp_contract", contract_of(p->model_type)) &&
	     add_str_or_null(o, "min_engine_version", p->target_version) &&
	     cJSON_AddStringToObject(o, "mtp_sidecar", p->mtp_file ? p->mtp_file : "mtp.safetensors") &&
	     add_str_or_null(o, "base_trunk", p->source) && cJSON_AddStringToObject(o, "artifact_role", "forged");
	ok = ok && add_str_or_null(recipe, "target", p->target) && add_str_or_null(recipe, "policy", p->policy) &&
	     add_str_or_null(inputs, "backbone", p->backbone);
	ok = ok && add_str_or_null(prov, "source_repo", p->source) &&
	     add_str_or_null(prov, "source_sha", p->source_commit) &&
	     add_str_or_null(prov, "source_format", p->source_layout) && cJSON_AddItemToObject(prov, "forge_recipe", recipe);
	if (ok)
		recipe = NULL;
	ok = ok && put(prov, "mtp_contract", contract_of(p->model_type)) &&
	     cJSON_AddItemToObject(prov, "forge_inputs", inputs);
	if (ok)
		inputs = NULL;
	ok = ok && add_str_or_null(prov, "forged_at", p->forged_at) && cJSON_AddNullToObject(prov, "mtplx_version") &&
	     cJSON_AddTrueToObject(prov, "forged_locally") && cJSON_AddNullToObject(prov, "published_to_hf") &&
	     add_str_or_null(prov, "forged_version", p->forged_version) &&
	     add_str_or_null(prov, "head_fingerprint", p->head_fingerprint) && add_str_or_null(prov, "digest", p->digest) &&
	     cJSON_AddItemToObject(o, "forge_provenance", prov);
	if (!ok) {
		cJSON_Delete(recipe);
		cJSON_Delete(inputs);
		if (!o || !cJSON_GetObjectItemCaseSensitive(o, "forge_provenance"))
			cJSON_Delete(prov);
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* Replace key of o by item (taken); 0 on ENOMEM (item freed). */
static int replace(cJSON *o, const char *key, cJSON *item)
{
	if (!item)
		return 0;
	if (cJSON_GetObjectItemCaseSensitive(o, key))
		return cJSON_ReplaceItemInObjectCaseSensitive(o, key, item) ? 1 : (cJSON_Delete(item), 0);
	return cJSON_AddItemToObject(o, key, item) ? 1 : (cJSON_Delete(item), 0);
}

int fg_mtplx_runtime_stamp(cJSON *doc, const cJSON *result, const char *verified_at, struct fg_err *err)
{
	const cJSON *evidence = cJSON_GetObjectItemCaseSensitive(result, "speed_evidence");
	const cJSON *old = cJSON_GetObjectItemCaseSensitive(doc, "speed_evidence");
	const cJSON *fp = cJSON_GetObjectItemCaseSensitive(old, "artifact_fingerprint");
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(evidence, "forge_verify_rows");
	const cJSON *was = cJSON_GetObjectItemCaseSensitive(doc, "mtp_depth_max"), *row;
	const char *verdict = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(result, "verdict"));
	double depth_max = cJSON_IsNumber(was) && was->valuedouble > 0 ? floor(was->valuedouble) : 0;
	char why[160];
	cJSON *on, *ev;

	if (!cJSON_IsObject(doc) || !cJSON_IsObject(result) || !cJSON_IsObject(evidence) || !verdict)
		return fg_err_set(err, FG_EINPUT, "restamping %s: the document or the verification result is not "
				  "an object with speed_evidence and verdict", FG_MTPLX_RUNTIME_FILE);
	cJSON_ArrayForEach(row, rows) {
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(row, "depth");

		if (cJSON_IsNumber(d) && d->valuedouble > depth_max)
			depth_max = floor(d->valuedouble);
	}
	on = cJSON_CreateObject();
	if (!on || !add_str_or_null(on, "timestamp", verified_at) ||
	    !add_copy(on, "hardware", cJSON_GetObjectItemCaseSensitive(result, "hardware")) ||
	    !cJSON_AddNullToObject(on, "machine_arch") || !cJSON_AddNullToObject(on, "macos") ||
	    !add_copy(on, "runtime", cJSON_GetObjectItemCaseSensitive(result, "runtime")) ||
	    !cJSON_AddNullToObject(on, "model")) {
		cJSON_Delete(on);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	ev = cJSON_Duplicate(evidence, 1);
	/* The fingerprint binds the evidence to the bytes it measured, as MTPLX's stamp does. */
	if (!ev || (cJSON_IsString(fp) && !add_copy(ev, "artifact_fingerprint", fp))) {
		cJSON_Delete(on);
		cJSON_Delete(ev);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	/* forge.py resets an exactness baseline that is a launch blocker. */
	if (evidence_blocker(cJSON_GetObjectItemCaseSensitive(doc, "exactness_baseline"), "exactness_baseline", why,
			     sizeof(why)) && !replace(doc, "exactness_baseline", cJSON_CreateObject())) {
		cJSON_Delete(on);
		cJSON_Delete(ev);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!replace(doc, "verified_on", on)) {
		cJSON_Delete(ev);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!replace(doc, "speed_evidence", ev) ||
	    !replace(doc, "mtp_depth_max", cJSON_CreateNumber(depth_max > 0 ? depth_max : 1)) ||
	    !replace(doc, "recommended_profile",
		     cJSON_CreateString(strcmp(verdict, "mtp_depth_wins") == 0 ? "sustained" : "stable")))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	return 0;
}
