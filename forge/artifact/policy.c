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

int fg_policy_apply(struct fg_plan *plan, const struct fg_policy *policy, const struct fg_inspect *backbone,
		   cJSON *record, struct fg_err *err)
{
	struct fg_plan out;
	char *module = NULL;
	int rc = 0;

	if (policy->kind == FG_POLICY_KEEP)
		return 0;
	memset(&out, 0, sizeof(out));
	for (size_t i = 0; i < plan->n; i++) {
		const struct fg_plan_entry *o = &plan->t[i];
		struct fg_plan_quant spec = policy->spec;
		struct fg_plan_entry *copy;
		size_t mlen = module_len(o->name);
		char *own;
		int base, linear;

		if (o->src && (fg_str_ends_with(o->src->name, ".scales") || o->src->dtype == FG_DT_U32)) {
			rc = fg_err_set(err, FG_EUSAGE, "the head is already quantized ('%s'); use --quant keep",
					o->src->name);
			goto fail;
		}
		free(module);
		module = mlen ? strndup(o->name, mlen) : NULL;
		if (mlen && !module)
			goto nomem;
		linear = module && fg_name_norm_class(o->name) == FG_NAME_NOT_NORM;
		if (!linear) {
			spec.bits = 0;
		} else if (policy->kind == FG_POLICY_MATCH) {
			rc = match_spec(backbone, module, &spec, err);
			if (rc)
				goto fail;
		} else if (!fg_family_is_head_linear(backbone->family, module)) {
			spec.bits = 0;
		}
		if (spec.bits && !quantizable(o, &spec))
			spec.bits = 0;
		if (record && linear)
			cJSON_AddItemToObject(record, module, spec.bits ? spec_json(&spec) : cJSON_CreateNull());
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
