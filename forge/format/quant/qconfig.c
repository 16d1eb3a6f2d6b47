/*
 * qconfig.c: reading a checkpoint's quantization config (qconfig.h) and
 * resolving it for one module.  The keys and their meanings are the ones
 * notes/quant-formats.md cites (AutoGPTQ config.py, GPTQModel config.py,
 * AutoAWQ _config.py and utils/module.py, compressed-tensors quant_config.py
 * / quant_scheme.py / quant_args.py / utils/match.py, ModelOpt
 * convert_hf_config.py / quant_utils.py, HF FineGrainedFP8Config, mlx-lm
 * utils.py).
 */
#include "forge/format/quant/qconfig.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHERE_MAX 160

/* ---- typed getters: absent or null leaves *out untouched ---------------------------- */

static const cJSON *item(const cJSON *o, const char *key)
{
	const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;

	return v && !cJSON_IsNull(v) ? v : NULL;
}

static int bad(struct fg_err *err, const char *where, const char *key, const char *what)
{
	return fg_err_set(err, FG_EINPUT, "quantization config: %s.%s %s", where, key, what);
}

static int get_str(const cJSON *o, const char *key, char *out, const char *where, struct fg_err *err)
{
	const cJSON *v = item(o, key);
	size_t i, n;

	if (!v)
		return 0;
	if (!cJSON_IsString(v))
		return bad(err, where, key, "is not a string");
	n = strlen(v->valuestring);
	if (n >= FG_QSTR)
		return bad(err, where, key, "is too long to be a known value");
	for (i = 0; i < n; i++)
		out[i] = (char)tolower((unsigned char)v->valuestring[i]);
	out[n] = 0;
	return 0;
}

static int get_int(const cJSON *o, const char *key, int *out, int lo, int hi, const char *where,
		   struct fg_err *err)
{
	const cJSON *v = item(o, key);
	char what[64];

	if (!v)
		return 0;
	if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
	    v->valuedouble > hi) {
		snprintf(what, sizeof(what), "is not an integer in [%d, %d]", lo, hi);
		return bad(err, where, key, what);
	}
	*out = (int)v->valuedouble;
	return 0;
}

static int get_bool(const cJSON *o, const char *key, int *out, const char *where, struct fg_err *err)
{
	const cJSON *v = item(o, key);

	if (!v)
		return 0;
	if (!cJSON_IsBool(v))
		return bad(err, where, key, "is not true or false");
	*out = cJSON_IsTrue(v) ? 1 : 0;
	return 0;
}

static int get_obj(const cJSON *o, const char *key, const cJSON **out, const char *where,
		   struct fg_err *err)
{
	const cJSON *v = item(o, key);

	if (!v)
		return 0;
	if (!cJSON_IsObject(v))
		return bad(err, where, key, "is not an object");
	*out = v;
	return 0;
}

/* An array of strings; with rule FG_QMATCH_CT every "re:" entry is compiled. */
static int get_list(const cJSON *o, const char *key, const cJSON **out, enum fg_qmatch rule,
		    const char *where, struct fg_err *err)
{
	const cJSON *v = item(o, key), *e;

	if (!v)
		return 0;
	if (!cJSON_IsArray(v))
		return bad(err, where, key, "is not a list");
	cJSON_ArrayForEach(e, v) {
		bool m;

		if (!cJSON_IsString(e))
			return bad(err, where, key, "has an entry that is not a string");
		if (rule == FG_QMATCH_CT && fg_qmatch_entry(rule, e->valuestring, "", &m, err))
			return fg_err_prefix(err, FG_EINPUT, "%s.%s: ", where, key);
	}
	*out = v;
	return 0;
}

/* "0.18.0" -> 0, 18; anything else -> -1, -1. */
static void parse_version(const cJSON *o, int v[2])
{
	const cJSON *s = item(o, "version");
	const char *p;
	long a = 0, b = 0;

	v[0] = v[1] = -1;
	if (!s || !cJSON_IsString(s))
		return;
	p = s->valuestring;
	if (!isdigit((unsigned char)*p))
		return;
	while (isdigit((unsigned char)*p) && a < 100000)
		a = a * 10 + (*p++ - '0');
	if (*p++ != '.' || !isdigit((unsigned char)*p))
		return;
	while (isdigit((unsigned char)*p) && b < 100000)
		b = b * 10 + (*p++ - '0');
	v[0] = (int)a;
	v[1] = (int)b;
}

/* ---- matching ----------------------------------------------------------------------- */

/* '*' matches any run (including none); everything else itself; the whole name. */
static bool wildcard(const char *pat, const char *s)
{
	const char *star = NULL, *resume = NULL;

	while (*s) {
		if (*pat == '*') {
			star = pat++;
			resume = s;
		} else if (*pat == *s) {
			pat++;
			s++;
		} else if (star) {
			pat = star + 1;
			s = ++resume;
		} else {
			return false;
		}
	}
	while (*pat == '*')
		pat++;
	return !*pat;
}

int fg_qmatch_entry(enum fg_qmatch rule, const char *entry, const char *module, bool *matched,
		    struct fg_err *err)
{
	size_t n;

	if (!entry || !module || !matched)
		return fg_err_set(err, FG_EUSAGE, "fg_qmatch_entry: NULL argument");
	switch (rule) {
	case FG_QMATCH_CT:
		if (strncmp(entry, "re:", 3) == 0)
			return fg_qpattern_match(entry + 3, module, matched, err);
		*matched = strcmp(entry, module) == 0;
		return 0;
	case FG_QMATCH_SUBSTRING:
		*matched = *entry && strstr(module, entry) != NULL;
		return 0;
	case FG_QMATCH_PREFIX:
		n = strlen(entry);
		*matched = n && strncmp(module, entry, n) == 0 && (module[n] == 0 || module[n] == '.');
		return 0;
	case FG_QMATCH_WILDCARD:
		*matched = wildcard(entry, module);
		return 0;
	}
	return fg_err_set(err, FG_EUSAGE, "fg_qmatch_entry: unknown rule %d", (int)rule);
}

/* The first entry of list that matches module under rule, or NULL. */
static int list_match(const cJSON *list, enum fg_qmatch rule, const char *module, const char **hit,
		      struct fg_err *err)
{
	const cJSON *e;

	*hit = NULL;
	cJSON_ArrayForEach(e, list) {
		bool m = false;
		int rc;

		if (!cJSON_IsString(e))
			continue;
		rc = fg_qmatch_entry(rule, e->valuestring, module, &m, err);
		if (rc)
			return rc;
		if (m) {
			*hit = e->valuestring;
			return 0;
		}
	}
	return 0;
}

static void set_why(struct fg_qparams *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_why(struct fg_qparams *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
}

static void exclude(struct fg_qparams *p)
{
	p->quantized = false;
	p->have_weights = false;
}

/* ---- GPTQ ------------------------------------------------------------------------------ */

/* bits / group_size / desc_act / sym, as GPTQ configs and GPTQModel's dynamic overrides spell them. */
static int gptq_fields(const cJSON *o, struct fg_qparams *p, const char *where, struct fg_err *err)
{
	int rc = 0;

	if (item(o, "bits"))
		rc = get_int(o, "bits", &p->bits, 1, 32, where, err);
	else
		rc = get_int(o, "w_bit", &p->bits, 1, 32, where, err);
	if (!rc && item(o, "group_size"))
		rc = get_int(o, "group_size", &p->group_size, -1, 1 << 24, where, err);
	else if (!rc)
		rc = get_int(o, "q_group_size", &p->group_size, -1, 1 << 24, where, err);
	if (!rc && (item(o, "group_size") || item(o, "q_group_size")) && p->group_size == 0)
		rc = bad(err, where, "group_size", "is 0 (a group size is -1 or positive)");
	if (!rc)
		rc = get_bool(o, "desc_act", &p->desc_act, where, err);
	if (!rc)
		rc = get_bool(o, "sym", &p->sym, where, err);
	return rc;
}

static int parse_gptq(struct fg_qconfig *c, const cJSON *qc, const char *where, struct fg_err *err)
{
	struct fg_qparams *p = &c->base;
	const cJSON *e;
	int marlin = 0, rc;

	p->method = FG_QM_GPTQ;
	rc = gptq_fields(qc, p, where, err);
	if (!rc && item(qc, "checkpoint_format"))
		rc = get_str(qc, "checkpoint_format", p->fmt, where, err);
	else if (!rc)
		rc = get_str(qc, "format", p->fmt, where, err);
	if (!rc)
		rc = get_bool(qc, "is_marlin_format", &marlin, where, err);
	if (!rc)
		rc = get_str(qc, "pack_dtype", p->pack_dtype, where, err);
	if (!rc)
		rc = get_obj(qc, "dynamic", &c->dynamic, where, err);
	if (rc)
		return rc;
	p->marlin = marlin == 1;
	if (!p->fmt[0])
		snprintf(p->fmt, sizeof(p->fmt), "gptq");
	cJSON_ArrayForEach(e, c->dynamic) {
		char w[WHERE_MAX];
		const char *pat = e->string;
		struct fg_qparams scratch;
		bool m;

		snprintf(w, sizeof(w), "%s.dynamic['%.60s']", where, e->string);
		if (!cJSON_IsObject(e))
			return fg_err_set(err, FG_EINPUT, "quantization config: %s is not an object", w);
		if (strncmp(pat, "-:", 2) == 0 || strncmp(pat, "+:", 2) == 0)
			pat += 2;
		if (fg_qpattern_match(pat, "", &m, err))
			return fg_err_prefix(err, FG_EINPUT, "%s: ", w);
		scratch = *p;
		if (gptq_fields(e, &scratch, w, err))
			return FG_EINPUT;
	}
	return 0;
}

static int module_gptq(const struct fg_qconfig *c, const char *module, struct fg_qparams *p,
		       struct fg_err *err)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, c->dynamic) {
		const char *pat = e->string;
		bool neg = strncmp(pat, "-:", 2) == 0, m = false;
		int rc;

		if (neg || strncmp(pat, "+:", 2) == 0)
			pat += 2;
		rc = fg_qpattern_match(pat, module, &m, err);
		if (rc)
			return rc;
		if (!m)
			continue;
		set_why(p, "dynamic '%.80s'", e->string);
		if (neg) {
			exclude(p);
			return 0;
		}
		return gptq_fields(e, p, "dynamic", err);
	}
	return 0;
}

/* ---- AWQ --------------------------------------------------------------------------------- */

static int parse_awq(struct fg_qconfig *c, const cJSON *qc, const char *where, struct fg_err *err)
{
	struct fg_qparams *p = &c->base;
	int zp = -1, rc;

	p->method = FG_QM_AWQ;
	rc = gptq_fields(qc, p, where, err);
	if (!rc)
		rc = get_bool(qc, "zero_point", &zp, where, err);
	if (!rc)
		rc = get_str(qc, "version", p->fmt, where, err);
	if (!rc)
		rc = get_list(qc, "modules_to_not_convert", &c->ignore, FG_QMATCH_SUBSTRING, where, err);
	if (rc)
		return rc;
	p->sym = zp < 0 ? -1 : !zp;
	c->ignore_rule = FG_QMATCH_SUBSTRING;
	return 0;
}

/* ---- compressed-tensors ------------------------------------------------------------------- */

/* The presets whose weight schemes the notes give (quant_scheme.py PRESET_SCHEMES). */
static const struct preset {
	const char *name, *type, *strategy;
	int bits, group, sym, block;
} presets[] = {
	{ "W4A16", "int", "group", 4, 128, 1, 0 },
	{ "W4A16_ASYM", "int", "group", 4, 128, 0, 0 },
	{ "W8A16", "int", "channel", 8, -1, 1, 0 },
	{ "FP8", "float", "tensor", 8, 0, 1, 0 },
	{ "FP8_DYNAMIC", "float", "channel", 8, -1, 1, 0 },
	{ "FP8_BLOCK", "float", "block", 8, 0, 1, 128 },
	{ "NVFP4", "float", "tensor_group", 4, 16, 1, 0 },
	{ "NVFP4A16", "float", "tensor_group", 4, 16, 1, 0 },
};

static const struct preset *find_preset(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(presets) / sizeof(presets[0]); i++)
		if (strcmp(presets[i].name, name) == 0)
			return &presets[i];
	return NULL;
}

/* A scheme's weights object into p (have_weights set). */
static int ct_weights(const cJSON *w, struct fg_qparams *p, const char *where, struct fg_err *err)
{
	const cJSON *ao = item(w, "actorder"), *bs = item(w, "block_structure");
	int rc, gs_given = item(w, "group_size") != NULL;

	rc = get_int(w, "num_bits", &p->bits, 1, 32, where, err);
	if (!rc)
		rc = get_str(w, "type", p->type, where, err);
	if (!rc)
		rc = get_bool(w, "symmetric", &p->sym, where, err);
	if (!rc)
		rc = get_int(w, "group_size", &p->group_size, -1, 1 << 24, where, err);
	if (!rc)
		rc = get_str(w, "strategy", p->strategy, where, err);
	if (rc)
		return rc;
	if (gs_given && p->group_size == 0)
		return bad(err, where, "group_size", "is 0");
	if (ao && cJSON_IsBool(ao)) {
		snprintf(p->actorder, sizeof(p->actorder), "%s", cJSON_IsTrue(ao) ? "group" : "");
	} else if (ao) {
		rc = get_str(w, "actorder", p->actorder, where, err);
		if (rc)
			return rc;
		if (strcmp(p->actorder, "dynamic") == 0)
			snprintf(p->actorder, sizeof(p->actorder), "group");
		else if (strcmp(p->actorder, "static") == 0)
			snprintf(p->actorder, sizeof(p->actorder), "weight");
	}
	if (bs) {
		int a = 0, b = 0;

		if (cJSON_IsArray(bs) && cJSON_GetArraySize(bs) == 2 && cJSON_IsNumber(cJSON_GetArrayItem(bs, 0)) &&
		    cJSON_IsNumber(cJSON_GetArrayItem(bs, 1))) {
			double x = cJSON_GetArrayItem(bs, 0)->valuedouble, y = cJSON_GetArrayItem(bs, 1)->valuedouble;

			if (x >= 1 && x <= 1 << 20 && y >= 1 && y <= 1 << 20 && x == floor(x) && y == floor(y)) {
				a = (int)x;
				b = (int)y;
			}
		} else if (cJSON_IsString(bs)) {
			if (sscanf(bs->valuestring, "%dx%d", &a, &b) != 2 || a < 1 || b < 1)
				a = b = 0;
		}
		if (!a)
			return bad(err, where, "block_structure", "is not two positive integers");
		p->block[0] = a;
		p->block[1] = b;
	}
	if (!p->strategy[0]) /* quant_args.py: None -> tensor, > 0 -> group, -1 -> channel */
		snprintf(p->strategy, sizeof(p->strategy), "%s",
			 !gs_given ? (p->block[0] ? "block" : "tensor") : p->group_size > 0 ? "group" : "channel");
	p->have_weights = true;
	return 0;
}

static int parse_ct(struct fg_qconfig *c, const cJSON *qc, const char *where, struct fg_err *err)
{
	struct fg_qparams *p = &c->base;
	const cJSON *g;
	int rc;

	p->method = FG_QM_CT;
	parse_version(qc, p->ct_version);
	rc = get_str(qc, "format", p->fmt, where, err);
	if (!rc)
		rc = get_obj(qc, "config_groups", &c->groups, where, err);
	if (!rc)
		rc = get_list(qc, "ignore", &c->ignore, FG_QMATCH_CT, where, err);
	if (rc)
		return rc;
	c->ignore_rule = FG_QMATCH_CT;
	cJSON_ArrayForEach(g, c->groups) {
		char w[WHERE_MAX], fmt[FG_QSTR] = "";
		const cJSON *targets = NULL, *weights = NULL;
		struct fg_qparams scratch;

		snprintf(w, sizeof(w), "%s.config_groups.%.60s", where, g->string);
		if (cJSON_IsArray(g)) {
			const cJSON *t;

			if (!find_preset(g->string))
				return fg_err_set(err, FG_EINPUT,
						  "quantization config: %s: preset scheme '%.60s' is not one forged knows", w,
						  g->string);
			cJSON_ArrayForEach(t, g) {
				bool m;

				if (!cJSON_IsString(t))
					return fg_err_set(err, FG_EINPUT, "quantization config: %s has a target that is not a string", w);
				if (fg_qmatch_entry(FG_QMATCH_CT, t->valuestring, "", &m, err))
					return fg_err_prefix(err, FG_EINPUT, "%s: ", w);
			}
			continue;
		}
		if (!cJSON_IsObject(g))
			return fg_err_set(err, FG_EINPUT, "quantization config: %s is neither a scheme nor a preset's targets", w);
		rc = get_list(g, "targets", &targets, FG_QMATCH_CT, w, err);
		if (!rc)
			rc = get_obj(g, "weights", &weights, w, err);
		if (!rc)
			rc = get_str(g, "format", fmt, w, err);
		if (rc)
			return rc;
		if (!targets)
			return fg_err_set(err, FG_EINPUT, "quantization config: %s has no targets", w);
		fg_qparams_init(&scratch);
		if (weights) {
			char ww[WHERE_MAX + 16];

			snprintf(ww, sizeof(ww), "%s.weights", w);
			rc = ct_weights(weights, &scratch, ww, err);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* How well target t matches module: 3 exact name, 2 regex, 1 class "Linear", 0 not. */
static int ct_rank(const char *t, const char *module, struct fg_err *err, int *rank)
{
	bool m = false;
	int rc;

	*rank = 0;
	if (strcmp(t, module) == 0) {
		*rank = 3;
		return 0;
	}
	if (strncmp(t, "re:", 3) == 0) {
		rc = fg_qpattern_match(t + 3, module, &m, err);
		if (!rc && m)
			*rank = 2;
		return rc;
	}
	if (!strchr(t, '.') && isupper((unsigned char)t[0]) && strcmp(t, "Linear") == 0)
		*rank = 1;
	return 0;
}

static int module_ct(const struct fg_qconfig *c, const char *module, struct fg_qparams *p,
		     struct fg_err *err)
{
	const cJSON *g, *best = NULL;
	const char *hit, *best_t = NULL;
	int best_rank = 0, rc;

	rc = list_match(c->ignore, FG_QMATCH_CT, module, &hit, err);
	if (rc)
		return rc;
	if (hit) {
		exclude(p);
		set_why(p, "ignored by '%.80s'", hit);
		return 0;
	}
	cJSON_ArrayForEach(g, c->groups) {
		const cJSON *targets = cJSON_IsArray(g) ? g : item(g, "targets"), *t;

		cJSON_ArrayForEach(t, targets) {
			int rank;

			rc = ct_rank(t->valuestring, module, err, &rank);
			if (rc)
				return rc;
			if (rank > best_rank) {
				best_rank = rank;
				best = g;
				best_t = t->valuestring;
			}
		}
	}
	if (!best) {
		exclude(p);
		set_why(p, "no config group targets it");
		return 0;
	}
	p->quantized = true;
	set_why(p, "config group '%.40s' (target '%.40s')", best->string, best_t);
	if (cJSON_IsArray(best)) {
		const struct preset *ps = find_preset(best->string);

		snprintf(p->type, sizeof(p->type), "%s", ps->type);
		snprintf(p->strategy, sizeof(p->strategy), "%s", ps->strategy);
		p->bits = ps->bits;
		p->group_size = ps->group;
		p->sym = ps->sym;
		p->block[0] = p->block[1] = ps->block;
		p->have_weights = true;
	} else {
		const cJSON *w = item(best, "weights");
		char fmt[FG_QSTR] = "";

		if (get_str(best, "format", fmt, "config group", err))
			return FG_EINPUT;
		if (fmt[0])
			snprintf(p->fmt, sizeof(p->fmt), "%s", fmt);
		if (!w) {
			exclude(p);
			set_why(p, "config group '%.40s' quantizes no weights", best->string);
			return 0;
		}
		rc = ct_weights(w, p, "config group weights", err);
		if (rc)
			return rc;
	}
	if (strcmp(p->fmt, "mixed-precision") == 0)
		p->fmt[0] = 0; /* the group gave none: unknown */
	return 0;
}

/* ---- ModelOpt ---------------------------------------------------------------------------- */

/* bits / group_size of the first config group with weights (the converted config.json form). */
static int modelopt_groups(struct fg_qconfig *c, const char *where, struct fg_err *err)
{
	const cJSON *g;

	cJSON_ArrayForEach(g, c->groups) {
		const cJSON *w = NULL;
		char wg[WHERE_MAX];
		int rc;

		snprintf(wg, sizeof(wg), "%s.config_groups.%.60s", where, g->string);
		rc = get_obj(g, "weights", &w, wg, err);
		if (rc)
			return rc;
		if (!w)
			continue;
		rc = get_int(w, "num_bits", &c->base.bits, 1, 32, wg, err);
		if (!rc)
			rc = get_int(w, "group_size", &c->base.group_size, -1, 1 << 24, wg, err);
		if (!rc)
			rc = get_str(w, "type", c->base.type, wg, err);
		return rc;
	}
	return 0;
}

static int modelopt_layers(const cJSON *layers, const char *where, struct fg_err *err)
{
	const cJSON *l;

	cJSON_ArrayForEach(l, layers) {
		char w[WHERE_MAX], algo[FG_QSTR];
		int gs = 0, rc;

		snprintf(w, sizeof(w), "%s.quantized_layers['%.60s']", where, l->string);
		if (!cJSON_IsObject(l))
			return fg_err_set(err, FG_EINPUT, "quantization config: %s is not an object", w);
		rc = get_str(l, "quant_algo", algo, w, err);
		if (!rc)
			rc = get_int(l, "group_size", &gs, -1, 1 << 24, w, err);
		if (rc)
			return rc;
	}
	return 0;
}

static int parse_modelopt(struct fg_qconfig *c, const cJSON *qc, const char *where, struct fg_err *err)
{
	int rc;

	c->base.method = FG_QM_MODELOPT;
	rc = get_str(qc, "quant_algo", c->base.fmt, where, err);
	if (!rc)
		rc = get_obj(qc, "config_groups", &c->groups, where, err);
	if (!rc)
		rc = get_list(qc, "ignore", &c->ignore, FG_QMATCH_WILDCARD, where, err);
	if (!rc && !c->ignore)
		rc = get_list(qc, "exclude_modules", &c->ignore, FG_QMATCH_WILDCARD, where, err);
	if (!rc)
		rc = get_int(qc, "group_size", &c->base.group_size, -1, 1 << 24, where, err);
	if (!rc)
		rc = get_obj(qc, "quantized_layers", &c->layers, where, err);
	if (!rc)
		rc = modelopt_groups(c, where, err);
	if (!rc)
		rc = modelopt_layers(c->layers, where, err);
	c->ignore_rule = FG_QMATCH_WILDCARD;
	c->groups = NULL; /* read once into base; targets are not used for ModelOpt */
	return rc;
}

static int module_modelopt(const struct fg_qconfig *c, const char *module, struct fg_qparams *p,
			   struct fg_err *err)
{
	const char *hit;
	int rc = list_match(c->ignore, FG_QMATCH_WILDCARD, module, &hit, err);

	if (rc)
		return rc;
	if (hit) {
		exclude(p);
		set_why(p, "excluded by '%.80s'", hit);
		return 0;
	}
	if (c->layers) {
		const cJSON *l = cJSON_GetObjectItemCaseSensitive(c->layers, module);

		if (!l) {
			exclude(p);
			set_why(p, "not in quantized_layers");
			return 0;
		}
		p->fmt[0] = 0;
		p->group_size = 0;
		if (get_str(l, "quant_algo", p->fmt, "quantized_layers", err) ||
		    get_int(l, "group_size", &p->group_size, -1, 1 << 24, "quantized_layers", err))
			return FG_EINPUT;
		set_why(p, "quantized_layers['%.60s']", module);
	}
	return 0;
}

/* ---- fp8 --------------------------------------------------------------------------------- */

static int parse_fp8(struct fg_qconfig *c, const cJSON *qc, const char *where, struct fg_err *err)
{
	const cJSON *bs = item(qc, "weight_block_size");
	int rc;

	c->base.method = FG_QM_FP8;
	c->base.bits = 8;
	rc = get_str(qc, "fmt", c->base.fmt, where, err);
	if (!rc)
		rc = get_list(qc, "modules_to_not_convert", &c->ignore, FG_QMATCH_SUBSTRING, where, err);
	if (!rc)
		rc = get_list(qc, "ignored_layers", &c->ignore2, FG_QMATCH_PREFIX, where, err);
	if (rc)
		return rc;
	c->ignore_rule = FG_QMATCH_SUBSTRING;
	if (bs) {
		const cJSON *a = cJSON_GetArrayItem(bs, 0), *b = cJSON_GetArrayItem(bs, 1);

		if (!cJSON_IsArray(bs) || cJSON_GetArraySize(bs) != 2 || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) ||
		    a->valuedouble < 1 || b->valuedouble < 1 || a->valuedouble > 1 << 20 || b->valuedouble > 1 << 20 ||
		    a->valuedouble != floor(a->valuedouble) || b->valuedouble != floor(b->valuedouble))
			return bad(err, where, "weight_block_size", "is not two positive integers");
		c->base.block[0] = (int)a->valuedouble;
		c->base.block[1] = (int)b->valuedouble;
	}
	return 0;
}

/* ---- MLX ---------------------------------------------------------------------------------- */

static bool mlx_key(const char *k)
{
	return strcmp(k, "group_size") == 0 || strcmp(k, "bits") == 0 || strcmp(k, "mode") == 0 ||
	       strcmp(k, "quant_method") == 0;
}

static int mlx_fields(const cJSON *o, struct fg_qparams *p, const char *where, struct fg_err *err)
{
	int rc = get_int(o, "group_size", &p->group_size, 1, 1 << 24, where, err);

	if (!rc)
		rc = get_int(o, "bits", &p->bits, 1, 32, where, err);
	if (!rc)
		rc = get_str(o, "mode", p->fmt, where, err);
	return rc;
}

#define MLX_INDEX_MIN 32 /* per-module keys from which they are indexed */

/*
 * Index the members of o (an MLX block, forged's record) by key (the
 * first of a repeated key, as cJSON_GetObjectItemCaseSensitive finds it).
 * Only a speed-up: without memory for it, lookups scan the object.
 */
static void index_members(const cJSON *o, struct fg_nameidx *idx)
{
	size_t n = 0;
	const cJSON *e;

	cJSON_ArrayForEach(e, o)
		n++;
	if (n < MLX_INDEX_MIN)
		return;
	cJSON_ArrayForEach(e, o)
		if (fg_nameidx_put(idx, e->string, (uintptr_t)e, NULL) == FG_ENOMEM) {
			fg_nameidx_free(idx);
			return;
		}
}

/* o's member key, through idx when o was indexed; NULL when absent. */
static const cJSON *member(const cJSON *o, const struct fg_nameidx *idx, const char *key)
{
	uintptr_t hit;

	if (idx->slot)
		return fg_nameidx_get(idx, key, &hit) ? (const cJSON *)hit : NULL;
	return cJSON_GetObjectItemCaseSensitive(o, key);
}

void fg_qconfig_release(struct fg_qconfig *c)
{
	if (c) {
		fg_nameidx_free(&c->mlx_keys);
		fg_nameidx_free(&c->record_keys);
	}
}

static int parse_mlx(struct fg_qconfig *c, const cJSON *q, const char *where, struct fg_err *err)
{
	const cJSON *e;
	int rc;

	c->base.method = FG_QM_MLX;
	snprintf(c->base.method_name, sizeof(c->base.method_name), "mlx");
	rc = mlx_fields(q, &c->base, where, err);
	if (rc)
		return rc;
	if (!c->base.fmt[0])
		snprintf(c->base.fmt, sizeof(c->base.fmt), "affine");
	c->mlx = q;
	cJSON_ArrayForEach(e, q) {
		char w[WHERE_MAX];
		struct fg_qparams scratch;

		if (mlx_key(e->string))
			continue;
		snprintf(w, sizeof(w), "%s['%.60s']", where, e->string);
		if (cJSON_IsBool(e))
			continue;
		if (!cJSON_IsObject(e))
			return fg_err_set(err, FG_EINPUT, "quantization config: %s is neither false nor a module's parameters", w);
		scratch = c->base;
		rc = mlx_fields(e, &scratch, w, err);
		if (rc)
			return rc;
	}
	index_members(c->mlx, &c->mlx_keys);
	return 0;
}

static int module_mlx(const struct fg_qconfig *c, const char *module, struct fg_qparams *p,
		      struct fg_err *err)
{
	const cJSON *o = mlx_key(module) ? NULL : member(c->mlx, &c->mlx_keys, module);

	if (!o)
		return 0;
	if (cJSON_IsFalse(o)) {
		exclude(p);
		set_why(p, "quantization['%.60s'] is false", module);
		return 0;
	}
	if (cJSON_IsObject(o)) {
		set_why(p, "quantization['%.60s']", module);
		return mlx_fields(o, p, "quantization", err);
	}
	return 0;
}

/* ---- forged's own record ------------------------------------------------------------------ */

/*
 * forged's record of the head it wrote, config.json mtp_quantization.modules:
 * each head linear under its module path, {bits, group_size, mode} (an MLX
 * format: the one forged quantized it into, or kept it in) when the sidecar
 * stores it quantized, else null or {bits: null, ...} (stored as floats).
 * An artifact whose head forged quantized over a float trunk has no
 * quantization block, and one over a Hugging Face format (GPTQ, AWQ,
 * compressed-tensors, ModelOpt, FP8) has the trunk's, which does not
 * describe the MLX head modules: the record is what does.  Read for head
 * modules only (fg_qconfig_for_head_module): forged never records a trunk
 * module.
 */
static int parse_record(struct fg_qconfig *c, const cJSON *cfg, struct fg_err *err)
{
	const cJSON *mq = NULL, *mods = NULL, *e;
	int rc = get_obj(cfg, "mtp_quantization", &mq, "config", err);

	if (!rc)
		rc = get_obj(mq, "modules", &mods, "config.mtp_quantization", err);
	if (rc || !mods)
		return rc;
	cJSON_ArrayForEach(e, mods) {
		char w[WHERE_MAX];
		struct fg_qparams scratch;

		snprintf(w, sizeof(w), "config.mtp_quantization.modules['%.60s']", e->string);
		if (cJSON_IsNull(e))
			continue;
		if (!cJSON_IsObject(e))
			return fg_err_set(err, FG_EINPUT, "quantization config: %s is neither null nor a module's record", w);
		if (!item(e, "bits"))
			continue;
		fg_qparams_init(&scratch);
		rc = mlx_fields(e, &scratch, w, err);
		if (rc)
			return rc;
		if (!scratch.group_size)
			return bad(err, w, "group_size", "is missing (bits is given)");
	}
	c->record = mods;
	index_members(mods, &c->record_keys);
	return 0;
}

/* The parameters forged's record gives module: 1 when it names it quantized, else 0 (out untouched). */
static int module_record(const struct fg_qconfig *c, const char *module, struct fg_qparams *p,
			 struct fg_err *err)
{
	const cJSON *o = c->record ? member(c->record, &c->record_keys, module) : NULL;
	int rc;

	if (!o || !item(o, "bits"))
		return 0;
	fg_qparams_init(p);
	p->method = FG_QM_MLX;
	snprintf(p->method_name, sizeof(p->method_name), "mlx");
	p->quantized = true;
	p->have_weights = true;
	set_why(p, "mtp_quantization.modules['%.60s']", module);
	rc = mlx_fields(o, p, "mtp_quantization.modules", err);
	if (!rc && !p->fmt[0])
		snprintf(p->fmt, sizeof(p->fmt), "affine");
	return rc ? rc : 1;
}

/* ---- parse / resolve ----------------------------------------------------------------------- */

static int parse_method(struct fg_qconfig *c, const cJSON *qc, const char *where, struct fg_err *err)
{
	char m[FG_QSTR] = "";
	int rc;

	rc = get_str(qc, "quant_method", m, where, err);
	if (rc)
		return rc;
	c->qc = qc;
	snprintf(c->base.method_name, sizeof(c->base.method_name), "%s", m);
	if (strcmp(m, "gptq") == 0)
		return parse_gptq(c, qc, where, err);
	if (strcmp(m, "awq") == 0)
		return parse_awq(c, qc, where, err);
	if (strcmp(m, "compressed-tensors") == 0)
		return parse_ct(c, qc, where, err);
	if (strcmp(m, "modelopt") == 0)
		return parse_modelopt(c, qc, where, err);
	if (strcmp(m, "fp8") == 0)
		return parse_fp8(c, qc, where, err);
	if (!m[0]) {
		const cJSON *v = item(qc, "quant_method");

		if (v)
			return bad(err, where, "quant_method", "is empty");
		return parse_mlx(c, qc, where, err); /* mlx-lm's copy: group_size / bits, no quant_method */
	}
	c->base.method = FG_QM_UNSUPPORTED;
	return 0;
}

int fg_qconfig_parse(struct fg_qconfig *c, const struct fg_qconfig_src *src, struct fg_err *err)
{
	const cJSON *cfg, *q = NULL, *qc = NULL, *tc = NULL, *hf;
	int rc;

	if (!c || !src)
		return fg_err_set(err, FG_EUSAGE, "fg_qconfig_parse: NULL argument");
	memset(c, 0, sizeof(*c));
	fg_qparams_init(&c->base);
	cfg = src->config;
	if (cfg && !cJSON_IsObject(cfg))
		return fg_err_set(err, FG_EINPUT, "quantization config: config.json is not an object");
	rc = get_obj(cfg, "quantization", &q, "config", err);
	if (!rc)
		rc = get_obj(cfg, "quantization_config", &qc, "config", err);
	if (!rc && !qc)
		rc = get_obj(cfg, "text_config", &tc, "config", err);
	if (!rc && !qc && tc)
		rc = get_obj(tc, "quantization_config", &qc, "config.text_config", err);
	if (rc)
		return rc;
	if (q && (!qc || !item(qc, "quant_method")))
		rc = parse_mlx(c, q, "config.quantization", err);
	else if (qc)
		rc = parse_method(c, qc, "quantization_config", err);
	else if ((hf = src->hf_quant_config) != NULL) {
		const cJSON *prod = NULL, *hq = NULL;
		char name[FG_QSTR] = "";

		if (!cJSON_IsObject(hf))
			return fg_err_set(err, FG_EINPUT, "quantization config: hf_quant_config.json is not an object");
		rc = get_obj(hf, "producer", &prod, "hf_quant_config", err);
		if (!rc)
			rc = get_str(prod, "name", name, "hf_quant_config.producer", err);
		if (!rc)
			rc = get_obj(hf, "quantization", &hq, "hf_quant_config", err);
		if (rc)
			return rc;
		if (strcmp(name, "modelopt") != 0 || !hq)
			return fg_err_set(err, FG_EINPUT,
					  "quantization config: hf_quant_config.json is not ModelOpt's (producer '%s')", name);
		c->qc = hq;
		snprintf(c->base.method_name, sizeof(c->base.method_name), "modelopt");
		rc = parse_modelopt(c, hq, "hf_quant_config.quantization", err);
	} else if (src->quantize_config) {
		const cJSON *lq = src->quantize_config;

		if (!cJSON_IsObject(lq))
			return fg_err_set(err, FG_EINPUT, "quantization config: quantize_config.json is not an object");
		if (item(lq, "quant_method"))
			rc = parse_method(c, lq, "quantize_config", err);
		else if (item(lq, "version") || item(lq, "zero_point")) {
			c->qc = lq;
			snprintf(c->base.method_name, sizeof(c->base.method_name), "awq");
			rc = parse_awq(c, lq, "quant_config", err);
		} else {
			c->qc = lq;
			snprintf(c->base.method_name, sizeof(c->base.method_name), "gptq");
			rc = parse_gptq(c, lq, "quantize_config", err);
		}
	}
	if (!rc)
		rc = parse_record(c, cfg, err);
	if (rc) {
		fg_qconfig_release(c); /* an MLX block's index, made before the record failed */
		return rc;
	}
	c->base.quantized = c->base.method != FG_QM_NONE;
	c->base.have_weights = c->base.method != FG_QM_NONE && c->base.method != FG_QM_UNSUPPORTED &&
			       c->base.method != FG_QM_CT;
	return 0;
}

int fg_qconfig_for_module(const struct fg_qconfig *c, const char *module, struct fg_qparams *out,
			  struct fg_err *err)
{
	const char *hit = NULL;
	int rc = 0;

	if (!c || !module || !out)
		return fg_err_set(err, FG_EUSAGE, "fg_qconfig_for_module: NULL argument");
	*out = c->base;
	out->why[0] = 0;
	switch (c->base.method) {
	case FG_QM_NONE:
		set_why(out, "the checkpoint has no quantization config");
		return 0;
	case FG_QM_UNSUPPORTED:
		set_why(out, "quant_method %s", c->base.method_name);
		return 0;
	case FG_QM_GPTQ:
		return module_gptq(c, module, out, err);
	case FG_QM_CT:
		return module_ct(c, module, out, err);
	case FG_QM_MODELOPT:
		return module_modelopt(c, module, out, err);
	case FG_QM_MLX:
		return module_mlx(c, module, out, err);
	case FG_QM_AWQ:
	case FG_QM_FP8:
		rc = list_match(c->ignore, FG_QMATCH_SUBSTRING, module, &hit, err);
		if (!rc && !hit)
			rc = list_match(c->ignore2, FG_QMATCH_PREFIX, module, &hit, err);
		if (!rc && hit) {
			exclude(out);
			set_why(out, "not converted: '%.80s'", hit);
		}
		return rc;
	}
	return 0;
}

int fg_qconfig_for_head_module(const struct fg_qconfig *c, const char *module, struct fg_qparams *out,
			       struct fg_err *err)
{
	int rc;

	if (!c || !module || !out)
		return fg_err_set(err, FG_EUSAGE, "fg_qconfig_for_head_module: NULL argument");
	rc = module_record(c, module, out, err);
	if (rc)
		return rc < 0 ? rc : 0;
	return fg_qconfig_for_module(c, module, out, err);
}
