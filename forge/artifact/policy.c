/*
 * policy.c: quantization policies for a sidecar plan (policy.h).
 *
 * A policy rewrites a plan: each head linear it selects becomes a hidden
 * input of MLX-quantized outputs.  `match` reads the backbone's own
 * quantization, module by module, so a head is quantized exactly as the
 * trunk it rides on.
 */
#include "forge/artifact/policy.h"

#include "forge/core/grow.h"
#include "forge/core/str.h"
#include "forge/format/quant/quant.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fg_policy_parse(const char *text, struct fg_policy *out, struct fg_err *err)
{
	const char *q = text ? text : "keep";
	int bits, group;
	char tail;

	memset(out, 0, sizeof(*out));
	snprintf(out->text, sizeof(out->text), "%s", q);
	if (strcmp(q, "keep") == 0) {
		out->kind = FG_POLICY_KEEP;
	} else if (strcmp(q, "match") == 0) {
		out->kind = FG_POLICY_MATCH;
	} else if (strcmp(q, "mxfp4") == 0) {
		out->kind = FG_POLICY_MXFP4;
		out->spec.bits = 4;
		out->spec.group = FG_MXFP4_GROUP;
		out->spec.mxfp4 = 1;
	} else if (sscanf(q, "affine:%d:%d%c", &bits, &group, &tail) == 2 &&
		   fg_quant_affine_check(1, (size_t)group, bits, group, NULL) == 0) {
		out->kind = FG_POLICY_AFFINE;
		out->spec.bits = bits;
		out->spec.group = group;
	} else {
		return fg_err_set(err, FG_EUSAGE,
				  "quantization policy '%s': use keep, match, mxfp4 or affine:BITS:GROUP "
				  "(bits 2 3 4 5 6 8, group 32 64 128)", q);
	}
	return 0;
}

/* Length of the module path of an output weight ("x.y.weight" -> 3, for "x.y"); 0 when not a .weight. */
static size_t module_len(const char *name)
{
	return fg_str_ends_with(name, ".weight") ? strlen(name) - 7 : 0;
}

/* The part after the decoder layer ("...layers.3.self_attn.q_proj" -> "self_attn.q_proj"). */
static const char *layer_suffix(const char *module)
{
	const char *p = strstr(module, "layers."), *q;

	while (p) {
		q = p + 7;
		while (*q >= '0' && *q <= '9')
			q++;
		if (q > p + 7 && *q == '.')
			return q + 1;
		p = strstr(p + 1, "layers.");
	}
	q = strrchr(module, '.');
	return q ? q + 1 : module;
}

/*
 * The backbone's quantized module whose layer suffix is suffix, in *buf
 * (grown to fit, *cap its capacity; the caller frees it), or NULL: none, or
 * out of memory (*oom set).
 */
static const char *backbone_counterpart(const struct fg_inspect *bb, const char *suffix, char **buf,
					size_t *cap, int *oom)
{
	const struct fg_ckpt *c = bb->ckpt;

	for (size_t f = 0; f < c->n_files; f++) {
		if (!c->files[f].globbed && !c->files[f].in_index)
			continue;
		for (size_t k = 0; k < c->files[f].st->n_tensors; k++) {
			const char *name = c->files[f].st->tensors[k].name;
			size_t n = strlen(name);

			if (n <= 7 || strcmp(name + n - 7, ".scales") != 0 || fg_inspect_is_head(bb, &c->files[f], name))
				continue;
			if (FG_GROW(*buf, n - 6, *cap)) {
				*oom = 1;
				return NULL;
			}
			memcpy(*buf, name, n - 7);
			(*buf)[n - 7] = '\0';
			if (strcmp(layer_suffix(*buf), suffix) == 0)
				return *buf;
		}
	}
	return NULL;
}

/*
 * An integer member of the backbone's quantization block within lo..hi:
 * 0 with *out set, 0 leaving *out when absent, FG_EINPUT naming it when it
 * is not an integer in range (compared as a double: converting 1e300 to an
 * int is undefined, and 1e9 bits would silently leave the head unquantized).
 */
static int quant_int(const cJSON *q, const char *where, const char *key, int lo, int hi, int *out,
		     struct fg_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(q, key);

	if (!v)
		return 0;
	if (!cJSON_IsNumber(v))
		return fg_err_set(err, FG_EINPUT, "the backbone's config.json: quantization%s.%s is not a number",
				  where, key);
	if (!(v->valuedouble >= lo && v->valuedouble <= hi) || v->valuedouble != floor(v->valuedouble))
		return fg_err_set(err, FG_EINPUT,
				  "the backbone's config.json: quantization%s.%s %g is not an integer in %d..%d", where,
				  key, v->valuedouble, lo, hi);
	*out = (int)v->valuedouble;
	return 0;
}

/* The spec of a quantization block (where names it in errors); bits 0 when it quantizes nothing. */
static int spec_from(const cJSON *q, const char *where, struct fg_plan_quant *spec, struct fg_err *err)
{
	const cJSON *mode = cJSON_GetObjectItemCaseSensitive(q, "mode");
	int rc;

	memset(spec, 0, sizeof(*spec));
	spec->mxfp4 = cJSON_IsString(mode) && strcmp(mode->valuestring, "mxfp4") == 0;
	spec->bits = spec->mxfp4 ? 4 : 0;
	spec->group = spec->mxfp4 ? FG_MXFP4_GROUP : 0;
	if ((rc = quant_int(q, where, "bits", 1, 32, &spec->bits, err)) != 0 ||
	    (rc = quant_int(q, where, "group_size", 1, 1 << 16, &spec->group, err)) != 0)
		return rc;
	if (spec->bits <= 0 || spec->group <= 0)
		memset(spec, 0, sizeof(*spec));
	return 0;
}

/* How the backbone quantizes the counterpart of module; bits 0 when it does not.  0, FG_ENOMEM or FG_EINPUT. */
static int match_spec(const struct fg_inspect *bb, const char *module, struct fg_plan_quant *spec,
		      struct fg_err *err)
{
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(bb->ckpt->config, "quantization");
	const cJSON *over;
	char *path = NULL, where[300];
	size_t cap = 0;
	const char *cp;
	int oom = 0, rc = 0;

	memset(spec, 0, sizeof(*spec));
	if (!cJSON_IsObject(q))
		return 0;
	cp = backbone_counterpart(bb, layer_suffix(module), &path, &cap, &oom);
	if (!cp) {
		free(path);
		return oom ? fg_err_set(err, FG_ENOMEM, "out of memory matching '%s'", module) : 0;
	}
	over = cJSON_GetObjectItemCaseSensitive(q, cp);
	if (cJSON_IsObject(over)) {
		snprintf(where, sizeof(where), "[\"%.280s\"]", cp);
		rc = spec_from(over, where, spec, err);
	} else if (!cJSON_IsFalse(over)) {
		rc = spec_from(q, "", spec, err);
	}
	free(path);
	return rc;
}

static int quantizable(const struct fg_plan_entry *o, const struct fg_plan_quant *spec)
{
	uint64_t cols = o->rank ? o->shape[o->rank - 1] : 0;

	if (o->hidden || o->op == FG_OP_QUANT || (o->rank != 2 && o->rank != 3) || !cols)
		return 0;
	if (o->dtype != FG_DT_F32 && o->dtype != FG_DT_F16 && o->dtype != FG_DT_BF16)
		return 0;
	if (spec->mxfp4)
		return cols % FG_MXFP4_GROUP == 0;
	return fg_quant_affine_check(1, (size_t)cols, spec->bits, spec->group, NULL) == 0;
}

static cJSON *spec_json(const struct fg_plan_quant *spec)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "bits", spec->bits);
	cJSON_AddNumberToObject(o, "group_size", spec->group);
	cJSON_AddStringToObject(o, "mode", spec->mxfp4 ? "mxfp4" : "affine");
	return o;
}

/*
 * The record of one head linear: spec when the policy quantizes it, else
 * what became of a quantized source module (kept as stored, or dequantized
 * to BF16), else null.
 */
static cJSON *module_record(const struct fg_plan_quant *spec, const struct fg_plan_module *pm)
{
	char name[FG_ERR_MSG_MAX];
	cJSON *o;

	if (!pm)
		return spec->bits ? spec_json(spec) : cJSON_CreateNull();
	fg_qmod_name(pm->q, name, sizeof(name));
	if (spec->bits) {
		o = spec_json(spec);
		if (o) {
			cJSON_AddStringToObject(o, "source", name);
			cJSON_AddBoolToObject(o, "requantized", 1);
		}
		return o;
	}
	o = cJSON_CreateObject();
	if (!o)
		return NULL;
	if (pm->how == FG_PQ_KEPT) {
		cJSON_AddNumberToObject(o, "bits", pm->q->f.bits);
		cJSON_AddNumberToObject(o, "group_size", pm->q->f.group);
		cJSON_AddStringToObject(o, "mode", fg_qformat_mlx_mode(pm->q->f.kind));
		cJSON_AddStringToObject(o, "source", name);
	} else {
		cJSON_AddNullToObject(o, "bits");
		cJSON_AddNullToObject(o, "group_size");
		cJSON_AddNullToObject(o, "mode");
		cJSON_AddStringToObject(o, "dequantized_from", name);
	}
	if (pm->experts)
		cJSON_AddNumberToObject(o, "experts", (double)pm->experts);
	return o;
}

int fg_policy_dequantizes_all(const struct fg_policy *policy)
{
	return policy->kind != FG_POLICY_KEEP && policy->allow_requantize;
}

/* Whether the entry called name is a tensor of a quantized module the plan recorded (plan->mods). */
static int owned_by_module(const struct fg_plan *plan, const char *name)
{
	const char *dot = strrchr(name, '.');
	char *mod = dot ? strndup(name, (size_t)(dot - name)) : NULL;
	int found = mod && fg_plan_module_find(plan, mod) != NULL;

	free(mod);
	return found;
}

int fg_policy_apply(struct fg_plan *plan, const struct fg_policy *policy, const struct fg_inspect *backbone,
		   cJSON *record, struct fg_err *err)
{
	struct fg_plan out;
	char *module = NULL;
	int rc = 0;

	memset(&out, 0, sizeof(out));
	for (size_t i = 0; i < plan->n; i++) {
		const struct fg_plan_entry *o = &plan->t[i];
		struct fg_plan_quant spec = policy->spec;
		struct fg_plan_module *pm;
		struct fg_plan_entry *copy;
		size_t mlen = module_len(o->name);
		char *own;
		int base, linear;

		free(module);
		module = mlen ? strndup(o->name, mlen) : NULL;
		if (mlen && !module)
			goto nomem;
		linear = module && fg_name_norm_class(o->name) == FG_NAME_NOT_NORM;
		pm = linear ? fg_plan_module_find(plan, module) : NULL;
		if (policy->kind != FG_POLICY_KEEP && o->src &&
		    (fg_str_ends_with(o->src->name, ".scales") || o->src->dtype == FG_DT_U32) &&
		    !owned_by_module(plan, o->name)) {
			/* Quantized bytes the plan did not record as a quantized module: never quantized over. */
			rc = fg_err_set(err, FG_EUSAGE, "the head is already quantized ('%s'); use --quant keep",
					o->src->name);
			goto fail;
		}
		if (!linear || policy->kind == FG_POLICY_KEEP) {
			spec.bits = 0;
		} else if (policy->kind == FG_POLICY_MATCH) {
			rc = match_spec(backbone, module, &spec, err);
			if (rc)
				goto fail;
		} else if (!fg_family_is_head_linear(backbone->family, module)) {
			spec.bits = 0;
		}
		if (spec.bits && pm && pm->how != FG_PQ_KEPT && !quantizable(o, &spec))
			spec.bits = 0;
		if (spec.bits && pm && (pm->how == FG_PQ_KEPT || !policy->allow_requantize)) {
			char name[FG_ERR_MSG_MAX];

			/* MTPLX refuses the same without --allow-degraded-mtp: the reports disagree on what it costs. */
			rc = fg_err_set(err, FG_EUSAGE,
					"head module '%s' is already quantized (%s): --quant keep keeps it%s; quantizing "
					"it again (%s) needs --allow-requantize", module, fg_qmod_name(pm->q, name, sizeof(name)),
					pm->how == FG_PQ_KEPT ? " as it is" : " dequantized to BF16", policy->text);
			goto fail;
		}
		if (spec.bits && !quantizable(o, &spec))
			spec.bits = 0;
		if (spec.bits && pm)
			pm->requantized = 1;
		if (record && linear)
			cJSON_AddItemToObject(record, module, module_record(&spec, pm));
		/* Copy the entry (srcs arrays move with it; the copy has its own name). */
		copy = fg_plan_add(&out, o->name, err);
		if (!copy) {
			rc = FG_ENOMEM;
			goto fail;
		}
		own = copy->name;
		*copy = *o;
		copy->name = own;
		plan->t[i].srcs = NULL;
		plan->t[i].scale_invs = NULL;
		plan->t[i].qsrcs = NULL;
		if (!spec.bits)
			continue;
		base = (int)out.n - 1;
		out.t[base].hidden = 1;
		out.t[base].changed = 1; /* its bytes are replaced: keep the originals */
		for (int part = 0; part < (spec.mxfp4 ? 2 : 3); part++) {
			static const char *const suffix[] = { "weight", "scales", "biases" };
			const struct fg_plan_entry *b;
			struct fg_plan_entry *q;
			uint64_t cols;
			char *name;

			if (asprintf(&name, "%s.%s", module, suffix[part]) < 0)
				goto nomem;
			q = fg_plan_add(&out, name, err);
			free(name);
			if (!q) {
				rc = FG_ENOMEM;
				goto fail;
			}
			b = &out.t[base];
			cols = b->shape[b->rank - 1];
			/* materialize_quant finds the siblings at q - part .. : keep them adjacent. */
			assert(q == &out.t[base + 1 + part]);
			q->op = FG_OP_QUANT;
			q->base = base;
			q->quant = spec;
			q->part = (enum fg_plan_part)part;
			q->changed = 1;
			q->rank = b->rank;
			memcpy(q->shape, b->shape, sizeof(q->shape));
			if (part == FG_PART_WEIGHT) {
				q->dtype = FG_DT_U32;
				q->shape[b->rank - 1] = spec.mxfp4 ? cols / 8 : cols * (uint64_t)spec.bits / 32;
			} else {
				q->dtype = spec.mxfp4 ? FG_DT_U8 : b->dtype;
				q->shape[b->rank - 1] = cols / (uint64_t)spec.group;
			}
		}
	}
	free(module);
	for (size_t i = 0; i < plan->n; i++) {
		free(plan->t[i].name);
		free(plan->t[i].srcs);
		free(plan->t[i].scale_invs);
		free(plan->t[i].qsrcs);
	}
	free(plan->t);
	plan->t = out.t;
	plan->n = out.n;
	plan->cap = out.cap;
	return 0;
nomem:
	rc = fg_err_set(err, FG_ENOMEM, "out of memory applying the quantization policy");
fail:
	free(module);
	fg_plan_release(&out);
	return rc;
}

/* ---- the artifact's config: record and per-module overrides ---- */

/* The MLX quantization blocks of cfg: `quantization`, and mlx-lm's copy `quantization_config` (no quant_method). */
static size_t mlx_blocks(cJSON *cfg, cJSON *out[2])
{
	cJSON *q = cJSON_GetObjectItemCaseSensitive(cfg, "quantization");
	cJSON *qc = cJSON_GetObjectItemCaseSensitive(cfg, "quantization_config");
	size_t n = 0;

	if (!cJSON_IsObject(q))
		return 0;
	out[n++] = q;
	if (cJSON_IsObject(qc) && !cJSON_GetObjectItemCaseSensitive(qc, "quant_method"))
		out[n++] = qc;
	return n;
}

/* Delete the override of the module a source tensor belongs to ("x.y.weight" -> "x.y"). */
static void drop_source_key(cJSON *block, const struct fg_tensor *t)
{
	const char *dot = t ? strrchr(t->name, '.') : NULL;
	char *module;

	if (!dot || !(module = strndup(t->name, (size_t)(dot - t->name))))
		return;
	if (strcmp(module, "group_size") && strcmp(module, "bits") && strcmp(module, "mode"))
		cJSON_DeleteItemFromObjectCaseSensitive(block, module);
	free(module);
}

/* The override an output module gets: its quantization as the sidecar stores it, or false. */
static cJSON *override_of(const cJSON *rec)
{
	const cJSON *bits = cJSON_GetObjectItemCaseSensitive(rec, "bits");
	const cJSON *group = cJSON_GetObjectItemCaseSensitive(rec, "group_size");
	const cJSON *mode = cJSON_GetObjectItemCaseSensitive(rec, "mode");
	cJSON *o;

	if (!cJSON_IsNumber(bits) || !cJSON_IsNumber(group) || !cJSON_IsString(mode))
		return cJSON_CreateFalse();
	o = cJSON_CreateObject();
	if (o) {
		cJSON_AddNumberToObject(o, "group_size", group->valuedouble);
		cJSON_AddNumberToObject(o, "bits", bits->valuedouble);
		cJSON_AddStringToObject(o, "mode", mode->valuestring);
	}
	return o;
}

cJSON *fg_policy_record_json(const struct fg_plan *plan, const struct fg_policy *policy, const cJSON *record)
{
	cJSON *q = cJSON_CreateObject(), *req;

	if (!q || !cJSON_AddStringToObject(q, "policy", policy->text) ||
	    !cJSON_AddBoolToObject(q, "allow_requantize", policy->allow_requantize) ||
	    !cJSON_AddItemToObject(q, "modules", record ? cJSON_Duplicate(record, 1) : cJSON_CreateObject()) ||
	    !(req = cJSON_AddArrayToObject(q, "requantized"))) {
		cJSON_Delete(q);
		return NULL;
	}
	for (size_t i = 0; i < plan->n_mods; i++)
		if (plan->mods[i].requantized)
			cJSON_AddItemToArray(req, cJSON_CreateString(plan->mods[i].out));
	return q;
}

/* A record whose module the sidecar stores unquantized (null, or dequantized to BF16). */
static int stored_dense(const cJSON *rec)
{
	return !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(rec, "bits"));
}

/* "mtp.fc" -> "-:mtp\\.fc$": GPTQModel's dynamic "not quantized" pattern for exactly that module (re.match). */
static char *gptq_exclusion(const char *module)
{
	size_t n = strlen(module);
	char *p = malloc(2 * n + 4), *q = p;

	if (!p)
		return NULL;
	*q++ = '-';
	*q++ = ':';
	for (size_t i = 0; i < n; i++) {
		if (!(module[i] >= 'a' && module[i] <= 'z') && !(module[i] >= 'A' && module[i] <= 'Z') &&
		    !(module[i] >= '0' && module[i] <= '9') && module[i] != '_')
			*q++ = '\\';
		*q++ = module[i];
	}
	*q++ = '$';
	*q = '\0';
	return p;
}

/* Append name to the string list key of o (created when absent), unless it is there already. */
static int list_add(cJSON *o, const char *key, const char *name)
{
	cJSON *list = cJSON_GetObjectItemCaseSensitive(o, key), *e;

	if (!list)
		list = cJSON_AddArrayToObject(o, key);
	if (!cJSON_IsArray(list))
		return list ? 0 : FG_ENOMEM; /* not a list: left to the config's own reader to refuse */
	cJSON_ArrayForEach(e, list)
		if (cJSON_IsString(e) && strcmp(e->valuestring, name) == 0)
			return 0;
	e = cJSON_CreateString(name);
	return e && cJSON_AddItemToArray(list, e) ? 0 : FG_ENOMEM;
}

/*
 * A Hugging Face quantization_config (GPTQ, AWQ, compressed-tensors,
 * ModelOpt, FP8) over the artifact: the head modules the sidecar stores in
 * BF16 are declared unquantized in its own exclusion rule, so a loader
 * building the head from the config does not expect packed tensors there.
 * GPTQModel's dynamic patterns go first (the first match wins).
 */
static int exclude_dense_head(cJSON *cfg, const cJSON *record)
{
	cJSON *qc = cJSON_GetObjectItemCaseSensitive(cfg, "quantization_config"), *m;
	const cJSON *it;
	const char *method;
	int rc = 0;

	if (!cJSON_IsObject(qc))
		qc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cfg, "text_config"),
						      "quantization_config");
	m = cJSON_GetObjectItemCaseSensitive(qc, "quant_method");
	if (!cJSON_IsObject(qc) || !cJSON_IsString(m))
		return 0;
	method = m->valuestring;
	if (strcmp(method, "gptq") == 0) {
		cJSON *old = cJSON_DetachItemFromObjectCaseSensitive(qc, "dynamic"), *dyn = cJSON_CreateObject(), *e;

		if (!dyn) {
			cJSON_Delete(old);
			return FG_ENOMEM;
		}
		cJSON_ArrayForEach(it, record) {
			char *pat = stored_dense(it) ? gptq_exclusion(it->string) : NULL;

			if (stored_dense(it) && (!pat || !cJSON_AddObjectToObject(dyn, pat)))
				rc = FG_ENOMEM;
			free(pat);
		}
		while (cJSON_IsObject(old) && old->child) {
			e = cJSON_DetachItemViaPointer(old, old->child);
			if (!cJSON_GetObjectItemCaseSensitive(dyn, e->string))
				cJSON_AddItemToObject(dyn, e->string, e);
			else
				cJSON_Delete(e);
		}
		cJSON_Delete(old);
		cJSON_AddItemToObject(qc, "dynamic", dyn);
		return rc;
	}
	cJSON_ArrayForEach(it, record) {
		if (!stored_dense(it))
			continue;
		if (strcmp(method, "compressed-tensors") == 0 || strcmp(method, "modelopt") == 0)
			rc = list_add(qc, "ignore", it->string);
		else if (strcmp(method, "awq") == 0 || strcmp(method, "fp8") == 0)
			rc = list_add(qc, "modules_to_not_convert", it->string);
		if (rc)
			return rc;
	}
	return 0;
}

int fg_policy_write_config(cJSON *cfg, const struct fg_plan *plan, const struct fg_policy *policy,
			   const cJSON *record, struct fg_err *err)
{
	cJSON *q = fg_policy_record_json(plan, policy, record), *blocks[2];
	const cJSON *it;
	size_t nb;

	cJSON_DeleteItemFromObjectCaseSensitive(cfg, "mtp_quantization");
	if (!q || !cJSON_AddItemToObject(cfg, "mtp_quantization", q)) {
		cJSON_Delete(q);
		return fg_err_set(err, FG_ENOMEM, "out of memory writing config.json");
	}
	if (exclude_dense_head(cfg, record))
		return fg_err_set(err, FG_ENOMEM, "out of memory writing config.json");
	nb = mlx_blocks(cfg, blocks);
	for (size_t b = 0; b < nb; b++) {
		/* The head's keys under their source names are stale: the tensors moved to the sidecar, renamed. */
		for (size_t i = 0; i < plan->n; i++) {
			const struct fg_plan_entry *e = &plan->t[i];

			drop_source_key(blocks[b], e->src);
			for (size_t k = 0; k < e->n_srcs; k++)
				drop_source_key(blocks[b], e->srcs[k]);
		}
		cJSON_ArrayForEach(it, record) {
			cJSON *o = override_of(it);

			if (!o)
				return fg_err_set(err, FG_ENOMEM, "out of memory writing config.json");
			cJSON_DeleteItemFromObjectCaseSensitive(blocks[b], it->string);
			cJSON_AddItemToObject(blocks[b], it->string, o);
		}
	}
	return 0;
}
