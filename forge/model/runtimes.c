/*
 * runtimes.c: id resolution and the load simulation of runtimes.h.
 *
 * The simulation reads a row's fields generically, in the order a loader
 * works: the files it reads, what it refuses before the sanitize (no file,
 * the model type, the architecture, an ambiguous folder, the index,
 * duplicate names), the sanitize (its gate, the trunk +1, the conv1d
 * transpose, the expert layouts, the head keys it drops), the strict or
 * lenient load, the head loader (its sources in order, its key filter, its
 * experts, its heal, its contract) and the runtime's guard.  The first
 * refusal is the load error; breakage is what loads wrong without one.
 * The trunk is judged on its probe (the first decoder layer's q_norm mean)
 * in [1.25, 2.4] after load; the head norm by norm, on what was added
 * against what its set's convention needed.  Shifts apply to zero-centred
 * families only.
 */
#include "forge/model/runtimes.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MLX_EXPERTS_FALLBACK "the load refuses the experts"
#define NO_FILE (-1)       /* a file index that names no file */
#define NO_COUNT (-1L)     /* no count key present */

/* ---- names ---- */

static const char *const trunk_names[] = {
	[FG_TRUNK_OK] = "ok",
	[FG_TRUNK_DOUBLE_SHIFTED] = "double_shifted",
	[FG_TRUNK_MISSING_SHIFT] = "missing_shift",
};

static const char *const head_names[] = {
	[FG_HEAD_OK] = "ok",
	[FG_HEAD_INVERTED] = "inverted",
	[FG_HEAD_DOUBLE_SHIFTED] = "double_shifted",
	[FG_HEAD_DROPPED] = "dropped",
	[FG_HEAD_ABSENT] = "absent",
};

static const char *const outcome_names[] = {
	[FG_OUTCOME_OK] = "ok",
	[FG_OUTCOME_DEGRADED] = "degraded",
	[FG_OUTCOME_BROKEN] = "broken",
	[FG_OUTCOME_REFUSED] = "refused",
};

static const char *const shift_reason_names[] = {
	[FG_SHIFT_NONE] = NULL,
	[FG_SHIFT_MTP_KEYS] = "mtp_keys",
	[FG_SHIFT_RAW_CONV1D] = "raw_conv1d",
	[FG_SHIFT_UNCONDITIONAL] = "unconditional",
	[FG_SHIFT_KEY_PREFIX] = "key_prefix",
};

static const char *const breakage_names[FG_BREAK_COUNT] = {
	"trunk_double_shifted", "trunk_missing_shift", "experts_uninitialized", "head_inverted",
	"head_degraded", "head_uninitialized", "head_experts_uninitialized", "head_contract_mismatch",
};

static const char *const decode_names[] = {
	[FG_DECODE_NONE] = NULL,
	[FG_DECODE_AR] = "ar",
	[FG_DECODE_MTP] = "mtp",
};

static const char *const load_cause_names[] = {
	[FG_LOAD_OK] = NULL,
	[FG_LOAD_NO_FILES] = "no_files",
	[FG_LOAD_MODEL_TYPE] = "model_type",
	[FG_LOAD_ARCHITECTURE] = "architecture",
	[FG_LOAD_DUPLICATES] = "duplicates",
	[FG_LOAD_AMBIGUOUS_FILES] = "ambiguous_files",
	[FG_LOAD_INDEX] = "index",
	[FG_LOAD_CONV1D] = "conv1d",
	[FG_LOAD_EXTRA_KEYS] = "extra_keys",
	[FG_LOAD_EXPERTS] = "experts",
	[FG_LOAD_HEAD_KEYS] = "head_keys",
	[FG_LOAD_HEAD_EXPERTS] = "head_experts",
	[FG_LOAD_HEAD_MISSING] = "head_missing",
	[FG_LOAD_GUARD] = "guard",
	[FG_LOAD_FORMAT] = "format",
};

#define NAME_OF(table, v) \
	((unsigned)(v) < sizeof(table) / sizeof((table)[0]) ? (table)[v] : NULL)

const char *fg_runtime_trunk_name(enum fg_runtime_trunk t)
{
	const char *name = NAME_OF(trunk_names, t);

	return name ? name : "unknown";
}

const char *fg_runtime_head_name(enum fg_runtime_head h)
{
	const char *name = NAME_OF(head_names, h);

	return name ? name : "unknown";
}

const char *fg_runtime_outcome_name(enum fg_runtime_outcome o)
{
	const char *name = NAME_OF(outcome_names, o);

	return name ? name : "unknown";
}

const char *fg_runtime_shift_reason_name(enum fg_shift_reason r)
{
	return NAME_OF(shift_reason_names, r);
}

const char *fg_runtime_breakage_name(unsigned bit)
{
	for (unsigned i = 0; i < FG_BREAK_COUNT; i++)
		if (bit == 1u << i)
			return breakage_names[i];
	return NULL;
}

const char *fg_runtime_decode_name(enum fg_decode d)
{
	return NAME_OF(decode_names, d);
}

const char *fg_runtime_load_cause_name(enum fg_load_cause c)
{
	return NAME_OF(load_cause_names, c);
}

/* ---- ids: rows, aliases, version ranges ---- */

#define VERSION_PARTS 4

/* "0.31.3" -> {0, 31, 3, 0}; 0 unless s is 1-4 dot-separated decimal numbers. */
static int parse_version(const char *s, long v[VERSION_PARTS])
{
	int n = 0;

	memset(v, 0, VERSION_PARTS * sizeof(*v));
	if (!s || !*s)
		return 0;
	for (;;) {
		long x = 0;
		int digits = 0;

		while (*s >= '0' && *s <= '9' && digits < 9) {
			x = x * 10 + (*s++ - '0');
			digits++;
		}
		if (!digits || n == VERSION_PARTS)
			return 0;
		v[n++] = x;
		if (!*s)
			return 1;
		if (*s++ != '.')
			return 0;
	}
}

static int cmp_version(const long a[VERSION_PARTS], const long b[VERSION_PARTS])
{
	for (int i = 0; i < VERSION_PARTS; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

static const struct fg_runtime *find_exact(const char *id)
{
	size_t n;
	const struct fg_runtime *all = fg_runtime_all(&n);

	for (size_t i = 0; id && i < n; i++)
		if (strcmp(all[i].id, id) == 0)
			return &all[i];
	return NULL;
}

/* The newest non-opt-in row of the product whose [min, max) holds the version in id. */
static const struct fg_runtime *find_by_range(const char *id)
{
	size_t n;
	const struct fg_runtime *all = fg_runtime_all(&n), *best = NULL;
	long want[VERSION_PARTS], best_min[VERSION_PARTS] = { 0 };

	for (size_t i = 0; id && i < n; i++) {
		const struct fg_runtime *rt = &all[i];
		size_t plen = rt->product ? strlen(rt->product) : 0;
		long lo[VERSION_PARTS], hi[VERSION_PARTS];

		if (!plen || (rt->flags & FG_RT_OPT_IN) || strncmp(id, rt->product, plen) != 0 || id[plen] != '-' ||
		    !parse_version(id + plen + 1, want) || !parse_version(rt->version_min, lo))
			continue;
		if (cmp_version(want, lo) < 0)
			continue;
		if (rt->version_max && parse_version(rt->version_max, hi) && cmp_version(want, hi) >= 0)
			continue;
		if (!best || cmp_version(lo, best_min) > 0) {
			best = rt;
			memcpy(best_min, lo, sizeof(best_min));
		}
	}
	return best;
}

size_t fg_runtime_resolve(const char *id, const struct fg_runtime *rows[FG_RUNTIME_MAX_ALIAS], int *by_range)
{
	size_t n_alias, n = 0;
	const struct fg_runtime_alias *al = fg_runtime_aliases(&n_alias);
	const struct fg_runtime *rt;

	if (by_range)
		*by_range = 0;
	if (!id)
		return 0;
	if ((rt = find_exact(id))) {
		rows[0] = rt;
		return 1;
	}
	for (size_t i = 0; i < n_alias; i++) {
		if (strcmp(al[i].alias, id) != 0)
			continue;
		for (size_t k = 0; al[i].ids[k] && n < FG_RUNTIME_MAX_ALIAS; k++)
			if ((rt = find_exact(al[i].ids[k])))
				rows[n++] = rt;
		return n;
	}
	if ((rt = find_by_range(id))) {
		rows[0] = rt;
		if (by_range)
			*by_range = 1;
		return 1;
	}
	return 0;
}

const struct fg_runtime *fg_runtime_find(const char *id)
{
	const struct fg_runtime *rows[FG_RUNTIME_MAX_ALIAS];

	return fg_runtime_resolve(id, rows, NULL) ? rows[0] : NULL;
}

const char *fg_runtime_match_name(enum fg_runtime_match m)
{
	static const char *const names[] = { [FG_RT_MATCH_ID] = "id", [FG_RT_MATCH_ALIAS] = "alias",
					     [FG_RT_MATCH_RANGE] = "range" };

	return (unsigned)m < sizeof(names) / sizeof(names[0]) ? names[m] : "unknown";
}

static const struct fg_runtime *find_how(const char *id, enum fg_runtime_match *how)
{
	const struct fg_runtime *rows[FG_RUNTIME_MAX_ALIAS];
	int by_range = 0;

	if (!fg_runtime_resolve(id, rows, &by_range))
		return NULL;
	if (how)
		*how = by_range ? FG_RT_MATCH_RANGE : strcmp(rows[0]->id, id) == 0 ? FG_RT_MATCH_ID : FG_RT_MATCH_ALIAS;
	return rows[0];
}

const struct fg_runtime *fg_runtime_find_reported(const char *reported, enum fg_runtime_match *how)
{
	size_t n, len;
	const struct fg_runtime *all = fg_runtime_all(&n), *rt;
	char buf[128], id[160];

	if (!reported || !*reported || (len = strlen(reported)) >= sizeof(buf))
		return NULL;
	if ((rt = find_how(reported, how)))
		return rt;
	for (size_t i = 0; i <= len; i++) {
		char c = reported[i];

		buf[i] = c == '_' ? '-' : (char)tolower((unsigned char)c);
	}
	for (size_t i = 0; i < n; i++) {
		const char *p = all[i].product, *v;
		size_t plen = p ? strlen(p) : 0;
		char *plus;

		if (!plen || strncmp(buf, p, plen) != 0 || !strchr("- =/@:", buf[plen]) || !buf[plen])
			continue;
		for (v = buf + plen; *v && strchr("- =/@:", *v); v++)
			;
		if (*v == 'v')
			v++;
		if (snprintf(id, sizeof(id), "%s-%s", p, v) >= (int)sizeof(id))
			return NULL;
		if ((plus = strchr(id, '+')))
			*plus = '\0';
		if ((rt = find_how(id, how)))
			return rt;
	}
	return NULL;
}

size_t fg_runtime_ids_text(char *buf, size_t len)
{
	size_t n, n_al, used = 0;
	const struct fg_runtime *all = fg_runtime_all(&n);
	const struct fg_runtime_alias *al = fg_runtime_aliases(&n_al);

	if (!len)
		return 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", all[i].id);
	for (size_t i = 0; i < n_al && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, ", %s (an alias)", al[i].alias);
	if (used < len)
		used += (size_t)snprintf(buf + used, len - used, ", or a versioned id (mlx-lm-0.33, mtplx-2.11.3)");
	return used < len ? used : len - 1;
}

unsigned fg_runtime_layout_bit(const char *layout)
{
	if (layout && strcmp(layout, "mlx") == 0)
		return FG_LAYOUT_MLX;
	if (layout && strcmp(layout, "hf") == 0)
		return FG_LAYOUT_HF;
	return 0;
}

/* ---- small helpers ---- */

static int starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

static int in_list(const char *const *list, const char *s)
{
	for (size_t i = 0; list && s && list[i]; i++)
		if (strcmp(list[i], s) == 0)
			return 1;
	return 0;
}

/* A dotted path ("mtplx_mtp_quantization.norm_encoding") in a config object. */
static const cJSON *config_path(const cJSON *cfg, const char *path)
{
	char key[96];
	const char *dot;

	while (cfg && (dot = strchr(path, '.'))) {
		size_t n = (size_t)(dot - path);

		if (n >= sizeof(key))
			return NULL;
		memcpy(key, path, n);
		key[n] = '\0';
		cfg = cJSON_GetObjectItemCaseSensitive(cfg, key);
		path = dot + 1;
	}
	return cfg ? cJSON_GetObjectItemCaseSensitive(cfg, path) : NULL;
}

/* The first of keys present as a number: its value; -1 when none is. */
static long config_count(const cJSON *cfg, const char *const *keys)
{
	for (size_t i = 0; keys && keys[i]; i++) {
		const cJSON *v = config_path(cfg, keys[i]);

		if (cJSON_IsNumber(v))
			return (long)v->valuedouble;
	}
	return NO_COUNT;
}

/* A declared encoding among values: trimmed, lower-cased, as MTPLX compares it. */
static int config_declares(const cJSON *cfg, const char *const *keys, const char *const *values)
{
	for (size_t i = 0; keys && keys[i]; i++) {
		const cJSON *v = config_path(cfg, keys[i]);
		char buf[64];
		const char *s;
		size_t n = 0;

		if (!cJSON_IsString(v))
			continue;
		for (s = v->valuestring; isspace((unsigned char)*s); s++)
			;
		while (*s && n < sizeof(buf) - 1)
			buf[n++] = (char)tolower((unsigned char)*s++);
		while (n && isspace((unsigned char)buf[n - 1]))
			n--;
		buf[n] = '\0';
		if (in_list(values, buf))
			return 1;
	}
	return 0;
}

unsigned fg_runtime_key_class(const char *name, long n_layers)
{
	enum fg_name_scheme scheme;

	if (starts_with(name, "mtp."))
		return FG_KEY_MTP;
	if (starts_with(name, "language_model.mtp."))
		return FG_KEY_LM_MTP;
	if (starts_with(name, "model.mtp."))
		return FG_KEY_MODEL_MTP;
	if (starts_with(name, "model.language_model.mtp."))
		return FG_KEY_MODEL_LM_MTP;
	if (starts_with(fg_name_strip(name), "mtp."))
		return FG_KEY_LM_MODEL_MTP;
	scheme = fg_name_head_scheme(name, n_layers, NULL);
	if (scheme == FG_SCHEME_APPENDED)
		return FG_KEY_APPENDED;
	if (scheme == FG_SCHEME_MTP_LAYERS)
		return FG_KEY_MTP_LAYERS;
	return FG_KEY_OTHER;
}

unsigned fg_runtime_norm_group(const char *name)
{
	if (ends_with(name, ".q_norm.weight") || ends_with(name, ".k_norm.weight"))
		return FG_NG_QK;
	if (ends_with(name, "input_layernorm.weight") || ends_with(name, "post_attention_layernorm.weight"))
		return FG_NG_LAYER;
	if (ends_with(name, "pre_fc_norm_embedding.weight") || ends_with(name, "pre_fc_norm_hidden.weight") ||
	    ends_with(name, ".enorm.weight") || ends_with(name, ".hnorm.weight"))
		return FG_NG_PRE_FC;
	if (ends_with(name, "mtp.norm.weight") || ends_with(name, "shared_head.norm.weight") ||
	    strcmp(name, "norm.weight") == 0)
		return FG_NG_FINAL;
	return 0;
}

static const char *xl_name(unsigned bits)
{
	if (bits & FG_XL_NUMBERED)
		return "numbered";
	if (bits & FG_XL_FUSED_LINEAR)
		return "fused_linear";
	if (bits & FG_XL_FUSED_BMM)
		return "fused_bmm";
	return "switch_mlp";
}

/* ---- files ---- */

static int is_root(const char *name)
{
	return !strchr(name, '/');
}

/* FG_FILES_FIRST_PATTERN: the first pattern that matches a file of the folder, or NULL. */
static const char *first_pattern(const struct fg_runtime *rt, const struct fg_ckpt *c)
{
	if (rt->files != FG_FILES_FIRST_PATTERN)
		return NULL;
	for (size_t p = 0; rt->patterns && rt->patterns[p]; p++)
		for (size_t i = 0; i < c->n_files; i++)
			if (is_root(c->files[i].name) && fnmatch(rt->patterns[p], c->files[i].name, 0) == 0)
				return rt->patterns[p];
	return NULL;
}

static int reads(const struct fg_runtime *rt, const struct fg_ckpt *c, size_t i, const char *pattern)
{
	const struct fg_ckpt_file *f = &c->files[i];

	if (in_list(rt->exclude, f->name))
		return 0;
	if (c->single_file)
		return 1;
	switch (rt->files) {
	case FG_FILES_GLOB:
		return f->globbed;
	case FG_FILES_FIRST_PATTERN:
		return pattern && is_root(f->name) && fnmatch(pattern, f->name, 0) == 0;
	case FG_FILES_INDEX_ELSE_GLOB:
		return c->index ? f->in_index : f->globbed;
	case FG_FILES_INDEX_ELSE_ALL:
		return c->index ? f->in_index : is_root(f->name) && ends_with(f->name, ".safetensors");
	case FG_FILES_INDEX_TENSORS:
		return c->index ? f->in_index : is_root(f->name) && f->globbed;
	case FG_FILES_INDEX_ELSE_SINGLE:
		return c->index ? f->in_index : strcmp(f->name, "model.safetensors") == 0;
	}
	return 0;
}

int fg_runtime_reads_file(const struct fg_runtime *rt, const struct fg_ckpt *c, size_t i)
{
	return i < c->n_files && reads(rt, c, i, first_pattern(rt, c));
}

/* ---- the simulation ---- */

struct sim {
	const struct fg_runtime *rt;
	const struct fg_runtime_input *in;
	struct fg_runtime_result *r;
	const struct fg_rt_family *fam;
	int covered;             /* the row lists the family (not its "*" entry) */
	const char *pattern;
	int zero_centred;
	int gate_closed;
	int run_time;            /* x * (1 + w) at run time */
};

static int sim_reads(const struct sim *s, int file)
{
	return file >= 0 && (size_t)file < s->in->ckpt->n_files && reads(s->rt, s->in->ckpt, (size_t)file, s->pattern);
}

__attribute__((format(printf, 3, 4)))
static void fail(struct sim *s, enum fg_load_cause cause, const char *fmt, ...)
{
	va_list ap;

	if (s->r->load_cause != FG_LOAD_OK)
		return;
	s->r->load_cause = cause;
	va_start(ap, fmt);
	vsnprintf(s->r->load_error, sizeof(s->r->load_error), fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 2, 3)))
static void unmodelled(struct sim *s, const char *fmt, ...)
{
	va_list ap;

	if (!s->r->modelled)
		return;
	s->r->modelled = 0;
	va_start(ap, fmt);
	vsnprintf(s->r->unmodelled, sizeof(s->r->unmodelled), fmt, ap);
	va_end(ap);
}

static void set_culprit(struct sim *s, const char *name)
{
	if (!s->r->culprit)
		s->r->culprit = name;
}

/* "ValueError: Model type {} not supported." with {} replaced by arg. */
static void fail_subst(struct sim *s, enum fg_load_cause cause, const char *tmpl, const char *arg)
{
	const char *at = tmpl ? strstr(tmpl, "{}") : NULL;

	if (!tmpl)
		fail(s, cause, "refused: %s", arg);
	else if (!at)
		fail(s, cause, "%s (%s)", tmpl, arg);
	else
		fail(s, cause, "%.*s%s%s", (int)(at - tmpl), tmpl, arg, at + 2);
}

static const struct fg_rt_family *family_rule(const struct fg_runtime *rt, const char *family, int *covered)
{
	const struct fg_rt_family *any = NULL;

	*covered = 0;
	for (const struct fg_rt_family *f = rt->families; f && f->family; f++) {
		if (strcmp(f->family, family) == 0) {
			*covered = 1;
			return f;
		}
		if (strcmp(f->family, "*") == 0)
			any = f;
	}
	return any;
}

const struct fg_rt_head *fg_runtime_head_loader(const struct fg_runtime *rt, const struct fg_runtime_input *in)
{
	const char *mt = in->ckpt ? fg_ckpt_model_type(in->ckpt) : NULL;
	const char *fam = in->family ? in->family->id : "unknown";

	for (const struct fg_rt_head *h = rt->heads; h && h->mode != FG_HEAD_NONE; h++) {
		if (h->model_type && (!mt || strcmp(h->model_type, mt) != 0))
			continue;
		if (h->families && !in_list(h->families, fam))
			continue;
		return h;
	}
	return NULL;
}

static int drop_matches(const struct fg_rt_drop *d, const char *name, long n_layers)
{
	char prefix[48];
	const char *p;
	long layer = 0;
	int digits = 0;

	switch (d->kind) {
	case FG_DROP_NONE:
		return 0;
	case FG_DROP_SUBSTRING:
		return strstr(name, d->text) != NULL;
	case FG_DROP_PREFIX:
		return starts_with(name, d->text);
	case FG_DROP_LAYER_L:
	case FG_DROP_LAYER_FIXED:
		if (d->kind == FG_DROP_LAYER_L && n_layers < 0)
			return 0;
		snprintf(prefix, sizeof(prefix), "model.layers.%ld", d->kind == FG_DROP_LAYER_L ? n_layers : d->layer);
		return starts_with(name, prefix);
	case FG_DROP_LAYERS_FROM_L:
		/* key.split(".")[1] == "layers" and int(split[2]) >= L */
		if (n_layers < 0 || !(p = strchr(name, '.')) || !starts_with(p + 1, "layers."))
			return 0;
		for (p += 8; *p >= '0' && *p <= '9' && digits < 9; p++, digits++)
			layer = layer * 10 + (*p - '0');
		return digits && (*p == '.' || !*p) && layer >= n_layers;
	}
	return 0;
}

static int tensor_in_read_files(const struct sim *s, const char *name)
{
	const struct fg_ckpt_file *f = NULL;

	if (!fg_ckpt_find(s->in->ckpt, name, &f) || !f)
		return 0;
	return sim_reads(s, (int)(f - s->in->ckpt->files));
}

/* The files the row reads and the facts they add up to. */
struct read_facts {
	size_t mtp_keys;
	int conv1d_last_not_1, conv1d_not_3d, raw_conv1d_3d;
	int mono;                /* model.safetensors is read */
	size_t wrong_file, index_missing, unlisted;
};

static void read_files(struct sim *s, struct read_facts *rf)
{
	const struct fg_ckpt *c = s->in->ckpt;
	struct fg_runtime_result *r = s->r;

	memset(rf, 0, sizeof(*rf));
	for (size_t i = 0; i < c->n_files; i++) {
		const struct fg_file_facts *ff = &s->in->facts[i];

		if (!reads(s->rt, c, i, s->pattern))
			continue;
		if (r->n_files < FG_RUNTIME_MAX_FILES)
			r->files[r->n_files] = c->files[i].name;
		r->n_files++;
		rf->mtp_keys += ff->mtp_keys;
		if (s->rt->files == FG_FILES_INDEX_TENSORS && c->index)
			rf->mtp_keys -= ff->unlisted_mtp_keys < ff->mtp_keys ? ff->unlisted_mtp_keys : ff->mtp_keys;
		rf->conv1d_last_not_1 |= ff->conv1d_last_not_1;
		rf->conv1d_not_3d |= ff->conv1d_not_3d;
		rf->raw_conv1d_3d |= ff->raw_conv1d;
		rf->mono |= strcmp(c->files[i].name, "model.safetensors") == 0;
		rf->wrong_file += ff->wrong_file;
		rf->index_missing += ff->index_missing;
		rf->unlisted += ff->unlisted;
	}
}

/* The first index mismatch of a problem type in a file the row reads, for the message. */
static const struct fg_index_mismatch *mismatch_in_read(const struct sim *s, int want_unlisted)
{
	const struct fg_ckpt *c = s->in->ckpt;

	for (size_t m = 0; m < c->n_mismatch; m++) {
		const struct fg_index_mismatch *mm = &c->mismatch[m];

		if (mm->problem == FG_INDEX_UNLISTED && !want_unlisted)
			continue;
		for (size_t i = 0; i < c->n_files; i++)
			if (strcmp(c->files[i].name, mm->file) == 0 && reads(s->rt, c, i, s->pattern))
				return mm;
	}
	return NULL;
}

unsigned fg_runtime_format_bits(const struct fg_qformat *f, int g_idx, int scale_inv, int *fp8_block)
{
	*fp8_block = 0;
	switch (f->kind) {
	case FG_QF_DENSE:
		return 0;
	case FG_QF_GPTQ:
		/*
		 * llama.cpp dequantizes 2, 4 and 8 bits and reads the module's g_idx, which must be there
		 * (conversion/base.py@00bd27a621f9:dequant_model, dequant_gptq).  mlx-lm reads none:
		 * any .g_idx is a ValueError, and without one its AWQ path takes GPTQ's qweight
		 * [in/8, out] for AutoAWQ's [in, out/8], so the strict load refuses the repacked shapes
		 * (utils.py@ed1fca4cef15:L72-172 = utils.py@d78bf58e217c:L74-174;
		 * ml-explore/mlx python/mlx/nn/layers/base.py@846d176227a0 load_weights).
		 */
		if (f->bits != 2 && f->bits != 4 && f->bits != 8)
			return 0;
		return g_idx ? FG_WF_GPTQ : FG_WF_GPTQ_NO_GIDX;
	case FG_QF_AWQ:
		return FG_WF_AWQ4;
	case FG_QF_CT_INT:
		/* mlx-lm's deepseek_v3 sanitize maps weight_packed/weight_scale to an MLX affine
		 * module with biases -8 * scale under the global {32, 4} (deepseek_v3.py@d78bf58e217c:L397-410,
		 * utils.py@d78bf58e217c:L407-414): symmetric int4 in groups of 32 only */
		if (f->bits == 4 && f->sym && f->scale == FG_QS_GROUP && f->group == 32 && !f->act_order)
			return FG_WF_COMPRESSED | FG_WF_CT_INT4_G32;
		return FG_WF_COMPRESSED;
	case FG_QF_FP8:
		if (scale_inv) {
			*fp8_block = 1;
			return FG_WF_FP8_BLOCK;
		}
		return FG_WF_FP8_SCALED;
	case FG_QF_NVFP4:
		return FG_WF_MODELOPT_NVFP4;
	case FG_QF_MLX_AFFINE:
		return FG_WF_MLX_AFFINE;
	case FG_QF_MLX_MXFP4:
		return FG_WF_MLX_MXFP4;
	case FG_QF_MLX_MXFP8:
		return FG_WF_MLX_MXFP8;
	case FG_QF_MLX_NVFP4:
		return FG_WF_MLX_NVFP4;
	case FG_QF_COUNT:
		break;
	}
	return 0;
}

/*
 * The first trunk format rt does not read, or NULL.  A row whose list is
 * only what its sources state (formats_partial) refuses none: whether it
 * reads another format is not known, and the rest of its load is still
 * simulated.  The family-bound bits count only for the families the row
 * names (FP8 blocks: fp8_families, NULL meaning all; FG_WF_CT_INT4_G32:
 * ct_families, NULL meaning none).
 */
static const struct fg_format_need *unread_format(const struct sim *s)
{
	const struct fg_runtime *rt = s->rt;
	const char *family = s->in->family ? s->in->family->id : "unknown";

	if (rt->formats_partial)
		return NULL;
	for (size_t i = 0; i < s->in->n_trunk_formats; i++) {
		const struct fg_format_need *n = &s->in->trunk_formats[i];
		unsigned have = rt->formats & n->any_of;

		if ((have & FG_WF_FP8_BLOCK) && n->fp8_block && rt->fp8_families && !in_list(rt->fp8_families, family))
			have &= ~(unsigned)FG_WF_FP8_BLOCK;
		if ((have & FG_WF_CT_INT4_G32) && !(rt->ct_families && in_list(rt->ct_families, family)))
			have &= ~(unsigned)FG_WF_CT_INT4_G32;
		if (!have)
			return n;
	}
	return NULL;
}

static void check_refusals(struct sim *s, const struct read_facts *rf)
{
	const struct fg_runtime *rt = s->rt;
	const struct fg_ckpt *c = s->in->ckpt;
	const char *mt = fg_ckpt_model_type(c);
	const cJSON *archs = cJSON_GetObjectItemCaseSensitive(c->config_raw, "architectures");
	const cJSON *arch0 = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;

	if (!s->r->n_files)
		fail(s, FG_LOAD_NO_FILES, "%s", rt->no_files_error ? rt->no_files_error : "no weight file found");
	for (size_t i = 0; rt->routes_away && rt->routes_away[i]; i++)
		if (cJSON_GetObjectItemCaseSensitive(c->config_raw, rt->routes_away[i]))
			unmodelled(s, "config.json holds %s: the runtime loads it by a path this row does not model",
				   rt->routes_away[i]);
	if (mt && in_list(rt->unsupported_model_types, mt))
		fail_subst(s, FG_LOAD_MODEL_TYPE, rt->model_type_error, mt);
	if (cJSON_IsString(arch0) && in_list(rt->unsupported_architectures, arch0->valuestring))
		fail(s, FG_LOAD_ARCHITECTURE, "%s: %s", rt->architecture_error ? rt->architecture_error : "refused",
		     arch0->valuestring);
	if (rt->mono_and_shards_refused && !c->index && rf->mono && s->r->n_files > 1)
		fail(s, FG_LOAD_AMBIGUOUS_FILES,
		     "found both model.safetensors and sharded model-*.safetensors weights: ambiguous source");
	if (c->index && rt->index_check != FG_INDEX_IGNORED &&
	    (rf->wrong_file || rf->index_missing || (rt->index_check == FG_INDEX_REFUSE_ANY && rf->unlisted))) {
		const struct fg_index_mismatch *mm = mismatch_in_read(s, rt->index_check == FG_INDEX_REFUSE_ANY);

		fail(s, FG_LOAD_INDEX, "%s: %s in %s",
		     rt->index_check == FG_INDEX_REFUSE_ANY ? "Mismatch between weight map and model parts"
							     : "source model is incomplete",
		     mm ? mm->tensor : "a tensor", mm ? mm->file : "a file");
		if (mm)
			set_culprit(s, mm->tensor);
	}
	for (size_t i = 0; i < s->in->n_dups; i++) {
		const struct fg_dup_input *d = &s->in->dups[i];

		if (!sim_reads(s, d->file_a) || !sim_reads(s, d->file_b))
			continue;
		if (rt->dups == FG_DUPS_REFUSE) {
			fail(s, FG_LOAD_DUPLICATES, "%s: %s in both %s and %s", rt->dups_error ? rt->dups_error : "duplicate",
			     d->name, c->files[d->file_a].name, c->files[d->file_b].name);
			set_culprit(s, d->name);
		} else if (d->differ && (rt->dups == FG_DUPS_ORDER || !c->index)) {
			s->r->order_dependent++;
			set_culprit(s, d->name);
		}
	}
	/* The weights' format is read after the files are chosen and listed (and their index checked). */
	if (s->r->n_files && s->r->load_cause == FG_LOAD_OK) {
		const struct fg_format_need *n = unread_format(s);

		if (n) {
			fail(s, FG_LOAD_FORMAT, "it does not read %s weights (%zu trunk module(s), e.g. %s)", n->name,
			     n->modules, n->example ? n->example : "?");
			s->r->unread_format = n;
			set_culprit(s, n->example);
		}
	}
}

static void trunk_shift(struct sim *s, const struct read_facts *rf)
{
	const struct fg_rt_family *f = s->fam;
	struct fg_runtime_result *r = s->r;
	enum fg_shift_reason why = FG_SHIFT_NONE;

	if (!s->zero_centred || !f || s->gate_closed)
		return;
	if (((f->shift & FG_SHIFT_ON_CONV1D) && rf->conv1d_last_not_1) ||
	    ((f->shift & FG_SHIFT_ON_CONV1D_3D) && rf->raw_conv1d_3d))
		why = FG_SHIFT_RAW_CONV1D;
	else if ((f->shift & FG_SHIFT_ON_MTP_KEY) && rf->mtp_keys)
		why = FG_SHIFT_MTP_KEYS;
	else if (f->shift & FG_SHIFT_ALWAYS)
		why = FG_SHIFT_UNCONDITIONAL;
	else if ((f->shift & FG_SHIFT_ON_BARE_KEY) && s->in->trunk_keys_prefixed != 1)
		why = FG_SHIFT_KEY_PREFIX;
	r->trunk_shift = why != FG_SHIFT_NONE;
	r->shift_reason = why;
	s->run_time = (f->shift & FG_SHIFT_RUN_TIME) != 0;
	if (f->conv1d_transpose && rf->conv1d_not_3d)
		fail(s, FG_LOAD_CONV1D, "the sanitize moves axis 2 of a conv1d.weight that is not 3-D "
		     "(its last dimension is not 1, so it counts as raw): moveaxis(2, 1) raises");
}

/* Trunk health from the effective probe mean, else from the convention. */
static enum fg_runtime_trunk classify_trunk(const struct sim *s)
{
	const struct fg_runtime_result *r = s->r;
	enum fg_convention after;

	if (!s->zero_centred)
		return FG_TRUNK_OK;
	if (r->has_probe) {
		if (r->trunk_probe_after > FG_QK_DOUBLE_ABOVE)
			return FG_TRUNK_DOUBLE_SHIFTED;
		if (r->trunk_probe_after < FG_QK_ABSOLUTE_MIN)
			return FG_TRUNK_MISSING_SHIFT;
		return FG_TRUNK_OK;
	}
	after = fg_conv_after_shift(s->in->trunk->conv, r->trunk_shift || s->run_time);
	if (after == FG_CONV_DOUBLE_SHIFTED)
		return FG_TRUNK_DOUBLE_SHIFTED;
	if (after == FG_CONV_DELTA)
		return FG_TRUNK_MISSING_SHIFT;
	return FG_TRUNK_OK;
}

/*
 * Keys a load could not place: a strict load refuses them, a lenient one
 * skips them (*skipped is then set); unstated: not modelled.
 */
static void unplaced(struct sim *s, enum fg_rt_strict strict, const char *error, enum fg_load_cause cause,
		     size_t n, const char *example, int *skipped)
{
	*skipped = 0;
	switch (strict) {
	case FG_LOAD_STRICT:
		fail(s, cause, "%s: %zu key(s), e.g. %s", error ? error : "strict load refuses", n, example);
		set_culprit(s, example);
		break;
	case FG_LOAD_LENIENT:
	case FG_LOAD_RETRY_LENIENT:
	case FG_LOAD_EXTRA_OK:
		*skipped = 1;
		break;
	case FG_LOAD_UNSTATED:
		unmodelled(s, "what the runtime does with %zu key(s) it has no parameter for (e.g. %s) is not stated",
			   n, example);
		break;
	}
}

/*
 * Experts of layouts the loader does not stack: refused, skipped, or not
 * modelled.  shape_error: the loader converts them by name into tensors of
 * the wrong shape, which no retry on extra keys forgives.
 */
static void check_experts(struct sim *s, unsigned found, unsigned accepted, unsigned known, enum fg_rt_strict strict,
			  const char *error, enum fg_load_cause cause, unsigned breakage, const char *where,
			  int shape_error)
{
	unsigned bad = found & known & ~accepted;

	if (found & ~known)
		unmodelled(s, "%s experts stored %s: the source does not say how the runtime loads them", where,
			   xl_name(found & ~known));
	if (!bad)
		return;
	if (shape_error && strict == FG_LOAD_RETRY_LENIENT)
		strict = FG_LOAD_STRICT;
	switch (strict) {
	case FG_LOAD_STRICT:
		fail(s, cause, "%s (%s experts stored %s)", error ? error : MLX_EXPERTS_FALLBACK, where, xl_name(bad));
		break;
	case FG_LOAD_LENIENT:
	case FG_LOAD_RETRY_LENIENT:
		s->r->breakage |= breakage;
		break;
	case FG_LOAD_EXTRA_OK:
		fail(s, cause, "%s (%s experts stored %s)", error ? error : "parameters left unfilled", where,
		     xl_name(bad));
		break;
	case FG_LOAD_UNSTATED:
		unmodelled(s, "what the runtime does with %s experts stored %s is not stated", where, xl_name(bad));
		break;
	}
}

/* A view of head tensors: one set, restricted to a file, to the files read, or to the index. */
enum view_scope { VIEW_ALL, VIEW_FILE, VIEW_READ, VIEW_INDEX };

struct view {
	const struct fg_head_input *h;
	enum view_scope scope;
	int file;
	size_t total, accepted;
	const char *foreign;    /* a key the filter does not keep */
	const char *first;
};

static int view_has(const struct sim *s, const struct view *v, size_t k)
{
	const struct fg_ckpt *c = s->in->ckpt;
	int file = v->h->tensor_file ? v->h->tensor_file[k] : v->h->file;
	int unlisted = v->h->unlisted && v->h->unlisted[k];

	switch (v->scope) {
	case VIEW_ALL:
		return 1;
	case VIEW_FILE:
		return file == v->file;
	case VIEW_READ:
		return sim_reads(s, file) && !(s->rt->files == FG_FILES_INDEX_TENSORS && c->index && unlisted);
	case VIEW_INDEX:
		if (file < 0 || (size_t)file >= c->n_files)
			return 0;
		return c->index ? c->files[file].in_index && !unlisted : c->files[file].globbed;
	}
	return 0;
}

static void view_count(const struct sim *s, struct view *v, unsigned keys)
{
	const struct fg_tset *set = v->h->set;

	v->total = v->accepted = 0;
	for (size_t k = 0; set && k < set->n_tensors; k++) {
		const char *name = set->tensors[k]->name;

		if (!view_has(s, v, k))
			continue;
		v->total++;
		if (!v->first)
			v->first = name;
		if (fg_runtime_key_class(name, s->in->n_layers) & keys)
			v->accepted++;
		else if (!v->foreign)
			v->foreign = name;
	}
}

static const struct fg_head_input *sidecar_of(const struct sim *s, int file)
{
	for (size_t i = 0; i < s->in->n_sidecars; i++)
		if (s->in->sidecars[i].file == file)
			return &s->in->sidecars[i];
	return NULL;
}

static int file_named(const struct fg_ckpt *c, const char *name)
{
	for (size_t i = 0; i < c->n_files; i++)
		if (strcmp(c->files[i].name, name) == 0)
			return (int)i;
	return NO_FILE;
}

/* Walk a separate loader's sources; 1 with *v filled when one yields a head, else 0 (*stopped: a source ended the walk). */
static int find_source(struct sim *s, const struct fg_rt_head *hl, struct view *v, int *saw_foreign)
{
	const struct fg_ckpt *c = s->in->ckpt;

	for (const struct fg_rt_head_src *src = hl->sources; src && src->kind != FG_HSRC_END; src++) {
		int file = -1;

		memset(v, 0, sizeof(*v));
		switch (src->kind) {
		case FG_HSRC_END:
			return 0;
		case FG_HSRC_POINTER:
		case FG_HSRC_FILE:
			file = src->kind == FG_HSRC_POINTER ? s->in->pointer_file : file_named(c, src->file);
			if (file < 0)
				continue;
			v->h = sidecar_of(s, file);
			v->scope = VIEW_ALL;
			if (!v->h) { /* a shard the glob also matches: its head keys are in the embedded set */
				v->h = s->in->embedded;
				v->scope = VIEW_FILE;
				v->file = file;
			}
			if (!v->h)
				continue;
			break;
		case FG_HSRC_EMBEDDED_INDEX:
		case FG_HSRC_EMBEDDED:
			v->h = s->in->embedded;
			v->scope = src->kind == FG_HSRC_EMBEDDED ? VIEW_READ : VIEW_INDEX;
			if (!v->h)
				continue;
			break;
		}
		view_count(s, v, hl->keys);
		if (src->kind == FG_HSRC_EMBEDDED || src->kind == FG_HSRC_EMBEDDED_INDEX) {
			if (!v->total)
				continue; /* no head key there: not a source */
		}
		if (v->accepted || src->empty == FG_EMPTY_BINDS)
			return 1;
		*saw_foreign |= v->total > 0;
		if (src->empty == FG_EMPTY_STOP)
			return 0;
	}
	return 0;
}

static int manifest_absolute(const struct fg_rt_manifest *m, const cJSON *doc)
{
	const cJSON *v, *ver;

	if (!m->file || !doc)
		return 0;
	v = cJSON_GetObjectItemCaseSensitive(doc, m->key);
	ver = m->version_key ? cJSON_GetObjectItemCaseSensitive(doc, m->version_key) : NULL;
	return cJSON_IsString(v) && strcmp(v->valuestring, m->value) == 0 &&
	       (!m->version_key || (cJSON_IsNumber(ver) && (int)ver->valuedouble == m->version));
}

/* The heal, norm by norm: what the loader adds against what the set's convention needs. */
static void heal(struct sim *s, const struct fg_rt_head *hl, const struct fg_head_input *h)
{
	const struct fg_decision *d = h->decision;
	const struct fg_tset *set = h->set;
	struct fg_runtime_result *r = s->r;
	int declared = hl->declared_keys && config_declares(s->in->ckpt->config, hl->declared_keys, hl->declared_delta);
	int set_delta = d->has_qk && d->has_low && d->qk_max < FG_QK_ABSOLUTE_MIN && d->low_min < FG_LOW_ABSOLUTE_MIN;
	int manifest = hl->heal == FG_HEAL_PER_TENSOR && manifest_absolute(&hl->manifest, h->manifest);
	int need, any = 0, all = 1, inverted = 0, degraded = 0, norms = 0;

	if (!s->zero_centred || d->conv == FG_CONV_PLAIN || d->conv == FG_CONV_EMPTY) {
		r->head = FG_HEAD_OK;
		r->head_after = d->conv;
		return;
	}
	need = d->conv == FG_CONV_ABSOLUTE ? 0 : d->conv == FG_CONV_DOUBLE_SHIFTED ? -1 : 1;
	for (size_t i = 0; set && i < set->n_norms; i++) {
		const struct fg_norm *n = &set->norms[i];
		unsigned g = fg_runtime_norm_group(n->t->name);
		int add = 0;

		if (!g || !fg_name_zero_centred(n->t->name) || !n->st.has_finite)
			continue;
		norms++;
		if (declared)
			add = (hl->norms & g) != 0;
		else
			switch (hl->heal) {
			case FG_HEAL_NONE:
				break;
			case FG_HEAL_WITH_TRUNK:
				add = r->trunk_shift && (hl->norms & g);
				break;
			case FG_HEAL_ALWAYS:
				add = (hl->norms & g) != 0;
				break;
			case FG_HEAL_SET_RULE:
				add = set_delta && (hl->norms & g);
				break;
			case FG_HEAL_PER_TENSOR:
				add = !manifest && (hl->norms & g) && n->st.mean < hl->below;
				break;
			case FG_HEAL_RUN_TIME:
				add = 1;
				break;
			}
		any |= add;
		all &= add;
		if (add - need < 0)
			inverted = 1;
		else if (add - need > 0)
			degraded = 1;
	}
	if (d->conv == FG_CONV_MIXED) {
		/* The absolute part doubles when everything gets +1; otherwise the delta part stays. */
		inverted = !(norms && all);
		degraded = !inverted;
	}
	r->head_shift = any && hl->heal != FG_HEAL_RUN_TIME;
	if (inverted) {
		r->head = FG_HEAD_INVERTED;
		r->head_after = FG_CONV_DELTA;
		r->breakage |= FG_BREAK_HEAD_INVERTED;
	} else if (degraded) {
		r->head = FG_HEAD_DOUBLE_SHIFTED;
		r->head_after = FG_CONV_DOUBLE_SHIFTED;
		r->breakage |= FG_BREAK_HEAD_DEGRADED;
	} else {
		r->head = FG_HEAD_OK;
		r->head_after = FG_CONV_ABSOLUTE;
	}
}

/*
 * The quantization block MTPLX's _finalize_mtp_weights reads a head's bits
 * and group from: text_config's `quantization` or `quantization_config`,
 * else the top level's (an empty one counts as none, as Python's `or`
 * chain has it); NULL when there is none.
 */
static const cJSON *mtplx_quant_block(const cJSON *cfg)
{
	const cJSON *owners[2] = { cJSON_GetObjectItemCaseSensitive(cfg, "text_config"), cfg };

	for (size_t o = 0; o < 2; o++)
		for (size_t k = 0; k < 2; k++) {
			const cJSON *b = cJSON_GetObjectItemCaseSensitive(owners[o], k ? "quantization_config" : "quantization");

			if (cJSON_IsObject(b) && b->child)
				return b;
		}
	return NULL;
}

/* Without a quantization block, a module not affine or not 4-bit reads wrong on both of MTPLX's paths (head_quant). */
static int reads_wrong(const char *mode, int bits)
{
	return strcmp(mode, "affine") != 0 || bits != 4;
}

/* The bits and group vllm-mlx's Qwen3.5 patch dequantizes a head with, and where they came from. */
struct vm_params {
	int bits, group;
	const char *from; /* for messages */
};

/* Python's truthiness of a JSON value: null, false, 0, "", [] and {} are falsy. */
static int py_truthy(const cJSON *v)
{
	if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v))
		return 0;
	if (cJSON_IsNumber(v))
		return v->valuedouble != 0;
	if (cJSON_IsString(v))
		return v->valuestring[0] != 0;
	if (cJSON_IsArray(v) || cJSON_IsObject(v))
		return v->child != NULL;
	return 1;
}

/*
 * waybarrios/vllm-mlx vllm_mlx/patches/qwen3_5_mtp.py@4b654c09e610
 * L276-277, L356-358: `text_config = config.get("text_config", config)`,
 * `quant_config = text_config.get("quantization", config.get("quantization",
 * {}))` (the top level's only when text_config has no such key), then its
 * bits and group_size (default 4 and 64) when it is truthy, else 4 and 64.
 * 0 when the config is not one the patch reads without raising (a
 * text_config or a truthy block that is no object, bits or group_size not
 * numbers): not judged.
 */
static int vllm_mlx_head_params(const cJSON *cfg, struct vm_params *p)
{
	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(cfg, "text_config");
	const cJSON *owner = tc ? tc : cfg, *q, *b, *g;
	int own;

	if (!cJSON_IsObject(owner))
		return 0;
	q = cJSON_GetObjectItemCaseSensitive(owner, "quantization");
	own = q != NULL;
	if (!q && owner != cfg)
		q = cJSON_GetObjectItemCaseSensitive(cfg, "quantization");
	p->bits = 4;
	p->group = 64;
	if (!py_truthy(q)) {
		p->from = !q ? "no quantization block: its defaults"
			: own && owner != cfg ? "text_config.quantization is empty: its defaults"
					      : "config.json quantization is empty: its defaults";
		return 1;
	}
	if (!cJSON_IsObject(q))
		return 0;
	b = cJSON_GetObjectItemCaseSensitive(q, "bits");
	g = cJSON_GetObjectItemCaseSensitive(q, "group_size");
	if ((b && !cJSON_IsNumber(b)) || (g && !cJSON_IsNumber(g)))
		return 0;
	if (b)
		p->bits = (int)b->valuedouble;
	if (g)
		p->group = (int)g->valuedouble;
	p->from = own && owner != cfg ? "text_config.quantization" : "config.json quantization";
	return 1;
}

int fg_runtime_head_quant_refuses(const struct fg_runtime *rt, const struct fg_runtime_input *in, const char *mode,
				  int bits, int group, char *why, size_t len)
{
	const struct fg_rt_head *hl = fg_runtime_head_loader(rt, in);
	struct vm_params vp;

	if (hl && hl->quant == FG_HQ_DEQUANT_BLOCK_ELSE_4_64 && in->ckpt &&
	    vllm_mlx_head_params(in->ckpt->config_raw, &vp) &&
	    (strcmp(mode, "affine") != 0 || bits != vp.bits || group != vp.group)) {
		snprintf(why, len,
			 "it reads every quantized head module as affine bits=%d group=%d (%s); the head would be "
			 "%s bits=%d group=%d: wrong values or a load error (--quant affine:%d:%d is what it reads)",
			 vp.bits, vp.group, vp.from, mode, bits, group, vp.bits, vp.group);
		return 1;
	}
	if (!hl || hl->quant != FG_HQ_CONFIG_ELSE_4_64 || !in->ckpt || mtplx_quant_block(in->ckpt->config_raw) ||
	    !reads_wrong(mode, bits))
		return 0;
	snprintf(why, len,
		 "with no quantization block in config.json it reads a quantized head as affine bits=4 group=64; "
		 "the head would be %s bits=%d group=%d: the first draft fails or decodes wrong values", mode, bits, group);
	return 1;
}

/* A module in an MLX layout: a U32 weight with scales (no GPTQ qweight). */
static int mlx_shaped(const struct fg_qmod *m)
{
	return m->m.t[FG_QR_WEIGHT] && m->m.t[FG_QR_WEIGHT]->dtype == FG_DT_U32 && m->m.t[FG_QR_SCALES] &&
	       !m->m.t[FG_QR_QWEIGHT];
}

/*
 * FG_HQ_DEQUANT_BLOCK_ELSE_4_64, vllm-mlx's Qwen3.5 patch
 * (qwen3_5_mtp.py@4b654c09e610 L356-358 the bits and group; L115-119,
 * L374-396: a key with both a `.scales` and a `.biases` companion goes
 * through mx.dequantize with them, mode affine, which checks the scales
 * against the weight; any other key is kept as stored, unpaired scales and
 * biases dropped; L450 load_weights(strict=False), which checks no shapes).
 * It reads tensors, not formats, so a head module with a U32 weight and
 * scales is judged by them: without biases, the packed weight goes into a
 * float module; with biases, scales that do not fit that bits and group make
 * the dequantize raise; and when forged reads the module's format (from the
 * block or its own record), anything but affine with that bits and group
 * decodes wrong values.  Not judged: a module whose tensors fit and whose
 * format forged does not read, and a quantized tensor forged's module scan
 * does not see (fused experts without `.weight`).
 */
static const char *vm_wrong(const struct fg_qmod *m, const struct vm_params *vp, char *buf, size_t len)
{
	const struct fg_qformat as_read = { .kind = FG_QF_MLX_AFFINE, .method = FG_QM_MLX, .bits = vp->bits,
					    .group = vp->group };
	struct fg_err err = { 0 };

	if (!m->m.t[FG_QR_BIASES])
		return "no biases: its packed weight goes into a float module";
	if (fg_qmod_fits(m, &as_read, NULL, &err))
		return "its scales do not fit: the dequantize raises";
	if (!m->rc && (m->f.kind != FG_QF_MLX_AFFINE || m->f.bits != vp->bits || m->f.group != vp->group))
		return fg_qformat_name(&m->f, buf, len);
	return NULL;
}

static void head_dequant(struct sim *s, const struct view *v)
{
	const struct fg_qmods *q = v->h->qmods;
	struct vm_params vp;
	size_t wrong = 0;
	const char *example = NULL;
	char kind[96] = "", buf[96];

	if (!q || !vllm_mlx_head_params(s->in->ckpt->config_raw, &vp))
		return;
	for (size_t i = 0; i < q->n; i++) {
		const struct fg_qmod *m = &q->v[i];
		const char *why;

		if (!mlx_shaped(m) || !(why = vm_wrong(m, &vp, buf, sizeof(buf))) || wrong++)
			continue;
		example = m->name;
		snprintf(kind, sizeof(kind), "%s", why);
	}
	if (wrong) {
		fail(s, FG_LOAD_FORMAT,
		     "it reads every quantized head module as affine bits=%d group=%d (%s); %zu are not, e.g. %s "
		     "(%s): wrong values or a load error",
		     vp.bits, vp.group, vp.from, wrong, example, kind);
		set_culprit(s, example);
	}
}

/*
 * FG_HQ_CONFIG_ELSE_4_64, MTPLX's generic injector
 * (youssofal/MTPLX mtplx/mtp_patch.py@0943c6cb _mtp_contract_for_weight_keys,
 * _finalize_mtp_weights, _infer_prequantized_group_size,
 * _contract_with_prequantized_module_specs).  A quantized head's bits and
 * group come from the quantization block (mtplx_quant_block), else are 4
 * and 64, mode affine.  A sidecar whose keys are exactly one of MTPLX's
 * expected prequantized sets (mtplx/constants.py) is quantized in place with
 * those bits, the group inferred from the tensors and per-module specs from
 * the block; any other has each .weight/.scales/.biases triple dequantized
 * with the block's bits and group, and a module without biases (mxfp4,
 * nvfp4, mxfp8) goes into a float Linear as it is.  Which path a head takes
 * is not modelled, so only what reads wrong on both is judged: without a
 * block, an MLX-shaped module (a U32 weight with scales) that is not affine
 * or not of 4 bits fails the load (format).  The rest is not judged (the row
 * keeps its other verdicts): 4 bits of another group without a block, which
 * the prequantized path reads; with a block, a module other than the
 * block's bits and group, which only the prequantized path resolves from
 * the block's per-module entry; a module with biases whose format forged
 * does not read (without a block, only its own record tells it).  One
 * without biases is no affine module, and fails.
 */
static void head_quant(struct sim *s, const struct fg_rt_head *hl, const struct view *v)
{
	const struct fg_qmods *q = v->h->qmods;
	const cJSON *cfg = s->in->ckpt->config_raw;
	size_t wrong = 0;
	const char *example = NULL;
	char kind[96] = "";

	if (hl->quant == FG_HQ_DEQUANT_BLOCK_ELSE_4_64) {
		head_dequant(s, v);
		return;
	}
	if (hl->quant != FG_HQ_CONFIG_ELSE_4_64 || !q || mtplx_quant_block(cfg))
		return;
	for (size_t i = 0; i < q->n; i++) {
		const struct fg_qmod *m = &q->v[i];
		/* Without a block, forged reads a head module's format only from its own record (qconfig.h). */
		const char *mode = m->rc ? NULL : fg_qformat_mlx_mode(m->f.kind);

		/* MLX-shaped modules only: other formats are not this loader's path. */
		if (!fg_qmod_quantized(m) || !mlx_shaped(m))
			continue;
		/* Without the format, the tensors still tell one thing: no biases is no affine module. */
		if ((mode ? !reads_wrong(mode, m->f.bits) : m->m.t[FG_QR_BIASES] != NULL) || wrong++)
			continue;
		example = m->name;
		if (mode)
			snprintf(kind, sizeof(kind), "%s bits=%d group=%d", mode, m->f.bits, m->f.group);
		else
			snprintf(kind, sizeof(kind), "no biases: not affine");
	}
	if (wrong) {
		fail(s, FG_LOAD_FORMAT,
		     "with no quantization block in config.json it reads a quantized head as affine bits=4 group=64; "
		     "%zu head module(s) are otherwise (e.g. %s: %s): the first draft fails or decodes wrong values",
		     wrong, example, kind);
		set_culprit(s, example);
	}
}

/* A head was found: load it (filter, experts, heal, contract). */
static void load_head(struct sim *s, const struct fg_rt_head *hl, const struct view *v)
{
	const struct fg_ckpt *c = s->in->ckpt;
	struct fg_runtime_result *r = s->r;
	enum fg_rt_concat want = s->in->family && s->in->family->hidden_first ? FG_CONCAT_HIDDEN_FIRST
									       : FG_CONCAT_EMBEDDING_FIRST;
	int skipped = 0;

	r->head_set = v->h->set;
	r->head_file = v->scope == VIEW_FILE ? c->files[v->file].name
		       : v->h->file >= 0 ? c->files[v->h->file].name : NULL;
	r->head_keys_loaded = v->accepted;
	r->decode = FG_DECODE_MTP;
	if (v->total > v->accepted) {
		if (hl->strict == FG_LOAD_EXTRA_OK && v->accepted)
			skipped = 1; /* extra keys are skipped; the parameters are filled */
		else
			unplaced(s, hl->strict == FG_LOAD_EXTRA_OK ? FG_LOAD_STRICT : hl->strict, hl->strict_error,
				 FG_LOAD_HEAD_KEYS, v->total - v->accepted, v->foreign, &skipped);
		if (skipped) {
			r->head_keys_dropped += v->total - v->accepted;
			if (hl->strict != FG_LOAD_EXTRA_OK) {
				r->breakage |= FG_BREAK_HEAD_UNINITIALIZED;
				set_culprit(s, v->foreign);
			}
		}
	}
	if (!v->accepted) {
		r->head = FG_HEAD_DROPPED;
		if (hl->strict != FG_LOAD_STRICT && hl->strict != FG_LOAD_EXTRA_OK) {
			r->breakage |= FG_BREAK_HEAD_UNINITIALIZED;
			set_culprit(s, v->first);
		}
		return;
	}
	check_experts(s, v->h->experts, hl->experts, hl->experts_known, hl->strict, hl->experts_error,
		      FG_LOAD_HEAD_EXPERTS, FG_BREAK_HEAD_EXPERTS, "head", 0);
	head_quant(s, hl, v);
	heal(s, hl, v->h);
	if (hl->concat != FG_CONCAT_UNSTATED && hl->concat != want)
		r->breakage |= FG_BREAK_HEAD_CONTRACT;
}

/* The config declares a head the loader cannot find. */
static void head_missing(struct sim *s, const struct fg_rt_head *hl)
{
	switch (hl->missing) {
	case FG_MISSING_AR:
		break;
	case FG_MISSING_REFUSE:
		fail(s, FG_LOAD_HEAD_MISSING, "%s",
		     s->in->moe && hl->missing_reason_moe ? hl->missing_reason_moe
							   : hl->missing_reason ? hl->missing_reason : "no head");
		break;
	case FG_MISSING_AR_IF_INDEX:
		if (!s->in->ckpt->index)
			fail(s, FG_LOAD_HEAD_MISSING, "%s", hl->missing_reason ? hl->missing_reason : "no head");
		break;
	case FG_MISSING_UNSTATED:
		unmodelled(s, "what the runtime does with a declared head it cannot find is not stated");
		break;
	}
}

static int head_exists(const struct fg_runtime_input *in)
{
	if (in->embedded && in->embedded->set && in->embedded->set->n_tensors)
		return 1;
	for (size_t i = 0; i < in->n_sidecars; i++)
		if (in->sidecars[i].set && in->sidecars[i].set->n_tensors)
			return 1;
	return 0;
}

/*
 * The head keys in the trunk's files: consumed by a head module, dropped by
 * the sanitize, or left over for the strict or lenient load.
 */
static void trunk_head_keys(struct sim *s, const struct fg_rt_head *module)
{
	const struct fg_head_input *e = s->in->embedded;
	struct view v = { .h = e, .scope = VIEW_READ };
	size_t extra = 0;
	const char *example = NULL;
	int skipped;

	if (!e || !e->set)
		return;
	for (size_t k = 0; k < e->set->n_tensors; k++) {
		const char *name = e->set->tensors[k]->name;

		if (!view_has(s, &v, k)) {
			int file = e->tensor_file ? e->tensor_file[k] : -1;

			if (sim_reads(s, file))
				s->r->head_keys_dropped++; /* in a file read, not in the index: never loaded */
			continue;
		}
		if (module && (fg_runtime_key_class(name, s->in->n_layers) & module->keys))
			continue;
		if (!s->gate_closed && s->fam && drop_matches(&s->fam->drop, name, s->in->n_layers)) {
			s->r->head_keys_dropped++;
			continue;
		}
		if (!example)
			example = name;
		extra++;
	}
	if (!extra)
		return;
	if (!s->covered) {
		unmodelled(s, "%zu head key(s) the row's sanitize rules do not cover, e.g. %s", extra, example);
		return;
	}
	unplaced(s, module ? module->strict : s->rt->strict, module ? module->strict_error : s->rt->strict_error,
		 module ? FG_LOAD_HEAD_KEYS : FG_LOAD_EXTRA_KEYS, extra, example, &skipped);
	if (skipped)
		s->r->head_keys_dropped += extra;
}

static void simulate_head(struct sim *s)
{
	const struct fg_runtime_input *in = s->in;
	struct fg_runtime_result *r = s->r;
	const struct fg_rt_head *hl = fg_runtime_head_loader(s->rt, in);
	long count = hl && hl->count_keys ? config_count(in->ckpt->config, hl->count_keys) : 1;
	int built = hl && count > 0, saw_foreign = 0;
	struct view v;

	r->head = head_exists(in) ? FG_HEAD_DROPPED : FG_HEAD_ABSENT;
	if (built && hl->mode == FG_HEAD_MODULE) {
		memset(&v, 0, sizeof(v));
		v.h = in->embedded;
		v.scope = VIEW_READ;
		if (v.h)
			view_count(s, &v, hl->keys);
		if (hl->needs_keys && !v.accepted)
			built = 0;
	}
	trunk_head_keys(s, built && hl->mode == FG_HEAD_MODULE ? hl : NULL);
	if (!built) {
		/* A runtime that runs MTP but builds no head: dropped when it dropped keys it read. */
		if (hl && !r->head_keys_dropped)
			r->head = FG_HEAD_ABSENT;
		return;
	}
	if (hl->mode == FG_HEAD_MODULE) {
		if (!v.accepted) {
			r->head = FG_HEAD_ABSENT;
			head_missing(s, hl);
			return;
		}
		v.total = v.accepted; /* the rest were the trunk load's business */
		load_head(s, hl, &v);
		return;
	}
	if (!find_source(s, hl, &v, &saw_foreign)) {
		r->head = saw_foreign ? FG_HEAD_DROPPED : FG_HEAD_ABSENT;
		head_missing(s, hl);
		return;
	}
	load_head(s, hl, &v);
}

void fg_runtime_simulate(const struct fg_runtime *rt, const struct fg_runtime_input *in, struct fg_runtime_result *r)
{
	struct sim s = { .rt = rt, .in = in, .r = r };
	struct read_facts rf;
	const char *mt;

	memset(r, 0, sizeof(*r));
	r->rt = rt;
	r->modelled = 1;
	r->decode = FG_DECODE_AR;
	s.pattern = first_pattern(rt, in->ckpt);
	s.zero_centred = in->style == FG_STYLE_ZERO_CENTRED;
	s.fam = family_rule(rt, in->family ? in->family->id : "unknown", &s.covered);
	if (!s.covered)
		unmodelled(&s, "the row's sources do not cover family %s", in->family ? in->family->id : "unknown");
	read_files(&s, &rf);
	check_refusals(&s, &rf);
	s.gate_closed = s.fam && s.fam->gate == FG_GATE_TENSOR && !tensor_in_read_files(&s, s.fam->gate_tensor);
	trunk_shift(&s, &rf);
	if (in->trunk->probe) {
		double m = in->trunk->probe->st.mean;

		r->has_probe = 1;
		r->trunk_probe_after = s.zero_centred && (r->trunk_shift || s.run_time) ? m + 1.0 : m;
	}
	r->trunk = classify_trunk(&s);
	if (s.fam && s.covered && !s.gate_closed) {
		int bmm = (in->trunk_experts & FG_XL_FUSED_BMM) && s.fam->bmm_error;

		check_experts(&s, in->trunk_experts, s.fam->experts, s.fam->experts_known, rt->strict,
			      bmm ? s.fam->bmm_error : rt->strict_error, FG_LOAD_EXPERTS, FG_BREAK_TRUNK_EXPERTS, "trunk", bmm);
	}
	simulate_head(&s);
	mt = fg_ckpt_model_type(in->ckpt);
	if (rt->guard_above > 0 && mt && in_list(rt->guard_model_types, mt) && r->has_probe &&
	    r->trunk_probe_after > rt->guard_above)
		fail(&s, FG_LOAD_GUARD, "%s: probe mean %.4f", rt->guard_error ? rt->guard_error : "refused",
		     r->trunk_probe_after);
	if (r->load_cause != FG_LOAD_OK) {
		r->outcome = FG_OUTCOME_REFUSED;
		r->decode = FG_DECODE_NONE;
		r->breakage = 0;
		return;
	}
	if (r->trunk == FG_TRUNK_DOUBLE_SHIFTED)
		r->breakage |= FG_BREAK_TRUNK_DOUBLE_SHIFTED;
	else if (r->trunk == FG_TRUNK_MISSING_SHIFT)
		r->breakage |= FG_BREAK_TRUNK_MISSING_SHIFT;
	if (r->breakage & (FG_BREAK_TRUNK_DOUBLE_SHIFTED | FG_BREAK_TRUNK_MISSING_SHIFT | FG_BREAK_TRUNK_EXPERTS))
		r->outcome = FG_OUTCOME_BROKEN;
	else if (r->breakage)
		r->outcome = FG_OUTCOME_DEGRADED;
	else if (fg_runtime_head_loader(rt, in) && r->decode == FG_DECODE_AR && (head_exists(in) || in->declared_mtp > 0))
		r->outcome = FG_OUTCOME_DEGRADED; /* it runs MTP, but plain decoding it is */
	else
		r->outcome = FG_OUTCOME_OK;
}
