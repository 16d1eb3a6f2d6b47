/*
 * experts.c: expert layout detection (experts.h).
 */
#include "forge/model/experts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FITS_LINEAR = 1, FITS_BMM = 2 };

/* The first of keys that config gives as a positive integer, or FG_EXPERTS_UNKNOWN. */
static int64_t config_int(const cJSON *cfg, const char *const *keys)
{
	for (size_t i = 0; keys[i]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, keys[i]);

		if (cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble < 1e9)
			return (int64_t)v->valuedouble;
	}
	return FG_EXPERTS_UNKNOWN;
}

void fg_experts_dims(const cJSON *config, struct fg_expert_dims *out)
{
	static const char *const h[] = { "hidden_size", NULL };
	static const char *const i[] = { "moe_intermediate_size", NULL };
	static const char *const e[] = { "num_experts", "n_routed_experts", "num_local_experts", NULL };

	out->hidden = config_int(config, h);
	out->intermediate = config_int(config, i);
	out->experts = config_int(config, e);
}

const char *fg_expert_layout_name(enum fg_expert_layout l)
{
	static const char *const names[] = { "numbered", "fused_linear", "fused_bmm", "ambiguous", "invalid" };

	return names[l];
}

static int eq_or_unknown(uint64_t v, int64_t want)
{
	return want < 0 || v == (uint64_t)want;
}

/* Which layouts a fused gate_up [E, a, b] or down [E, a, b] fits. */
static int fits(const struct fg_tensor *t, int is_gate_up, const struct fg_expert_dims *d)
{
	uint64_t a = t->shape[1], b = t->shape[2];
	int f = 0;

	if (t->rank != 3 || d->hidden < 0 || !eq_or_unknown(t->shape[0], d->experts))
		return 0;
	if (is_gate_up) {
		int64_t two_i = d->intermediate > 0 ? 2 * d->intermediate : -1;

		if (b == (uint64_t)d->hidden && a % 2 == 0 && eq_or_unknown(a, two_i))
			f |= FITS_LINEAR;
		if (a == (uint64_t)d->hidden && b % 2 == 0 && eq_or_unknown(b, two_i))
			f |= FITS_BMM;
	} else {
		if (a == (uint64_t)d->hidden && eq_or_unknown(b, d->intermediate))
			f |= FITS_LINEAR;
		if (b == (uint64_t)d->hidden && eq_or_unknown(a, d->intermediate))
			f |= FITS_BMM;
	}
	return f;
}

static const char *shape_text(const struct fg_tensor *t, char *buf, size_t len)
{
	size_t pos = (size_t)snprintf(buf, len, "[");

	for (int i = 0; i < t->rank && pos < len; i++)
		pos += (size_t)snprintf(buf + pos, len - pos, "%s%llu", i ? "," : "",
					(unsigned long long)t->shape[i]);
	if (pos < len)
		snprintf(buf + pos, len - pos, "]");
	return buf;
}

/* gate_up and down must describe the same E experts and the same I. */
static int fused_agree(const struct fg_expert_block *b, int bmm)
{
	const struct fg_tensor *g = b->gate_up, *dn = b->down;
	uint64_t two_i = bmm ? g->shape[2] : g->shape[1];
	uint64_t i = bmm ? dn->shape[1] : dn->shape[2];
	uint64_t hg = bmm ? g->shape[1] : g->shape[2];
	uint64_t hd = bmm ? dn->shape[2] : dn->shape[1];

	return g->shape[0] == dn->shape[0] && two_i == 2 * i && hg == hd;
}

static void decide_fused(struct fg_expert_block *b, const struct fg_expert_dims *d)
{
	char s1[64], s2[64];
	int fg, fd;

	if (!b->gate_up || !b->down) {
		b->layout = FG_EXPERTS_INVALID;
		snprintf(b->why, sizeof(b->why), "fused experts need both gate_up_proj and down_proj");
		return;
	}
	fg = fits(b->gate_up, 1, d);
	fd = fits(b->down, 0, d);
	b->n_experts = b->gate_up->shape[0];
	if (fg == (FITS_LINEAR | FITS_BMM) || fd == (FITS_LINEAR | FITS_BMM)) {
		b->layout = FG_EXPERTS_AMBIGUOUS;
		snprintf(b->why, sizeof(b->why), "gate_up %s / down %s fit both [E,2I,H] and [E,H,2I] with H=%lld",
			 shape_text(b->gate_up, s1, sizeof(s1)), shape_text(b->down, s2, sizeof(s2)),
			 (long long)d->hidden);
	} else if (fg && fg == fd && fused_agree(b, fg == FITS_BMM)) {
		b->layout = fg == FITS_LINEAR ? FG_EXPERTS_FUSED_LINEAR : FG_EXPERTS_FUSED_BMM;
	} else {
		b->layout = FG_EXPERTS_INVALID;
		snprintf(b->why, sizeof(b->why), "gate_up %s / down %s fit no single layout with H=%lld I=%lld",
			 shape_text(b->gate_up, s1, sizeof(s1)), shape_text(b->down, s2, sizeof(s2)),
			 (long long)d->hidden, (long long)d->intermediate);
	}
}

static void decide_numbered(struct fg_expert_block *b, const struct fg_expert_dims *d)
{
	uint64_t want;

	b->layout = FG_EXPERTS_NUMBERED;
	/* max_index < FG_EXPERTS_MAX_INDEX (fg_experts_scan), so 3 * (max + 1) cannot wrap. */
	if (__builtin_mul_overflow(b->max_index + 1, 3, &want) || b->n_numbered != want) {
		/* Numbers 0..max must each hold three projections: none may be missing. */
		b->layout = FG_EXPERTS_INVALID;
		snprintf(b->why, sizeof(b->why), "%zu numbered expert tensors for experts 0..%llu (%llu expected)",
			 b->n_numbered, (unsigned long long)b->max_index,
			 (unsigned long long)(3 * (b->max_index + 1)));
	} else if (d->experts > 0 && b->n_numbered != 3 * (size_t)d->experts) {
		b->layout = FG_EXPERTS_INVALID;
		snprintf(b->why, sizeof(b->why), "%zu numbered expert tensors, config declares %lld experts (%lld)",
			 b->n_numbered, (long long)d->experts, (long long)(3 * d->experts));
	}
}

/*
 * The block for the prefix_len first bytes of name, created (with a copy of
 * the whole prefix) when new; *b NULL when the table is full.  0 or FG_ENOMEM.
 */
static int block_for(struct fg_expert_block *blocks, size_t *n, size_t max, const char *name,
		     size_t prefix_len, struct fg_expert_block **b)
{
	*b = NULL;
	for (size_t i = 0; i < *n; i++) {
		if (strlen(blocks[i].prefix) == prefix_len && strncmp(blocks[i].prefix, name, prefix_len) == 0) {
			*b = &blocks[i];
			return 0;
		}
	}
	if (*n == max)
		return 0;
	memset(&blocks[*n], 0, sizeof(blocks[0]));
	if (!(blocks[*n].prefix = strndup(name, prefix_len)))
		return FG_ENOMEM;
	*b = &blocks[(*n)++];
	return 0;
}

/*
 * "{e}.{x}_proj.{role}" where role carries the projection's codes in some
 * format: a float or FP8 or MLX `weight`, GPTQ/AWQ `qweight`, or
 * compressed-tensors `weight_packed` (issue 12: a quantized MoE head is still
 * numbered).  Scales, zero points and shapes are the same projection's, so
 * one tensor per projection counts.
 */
static int numbered_carrier(const char *rest)
{
	const char *p = rest, *dot;

	while (*p >= '0' && *p <= '9')
		p++;
	if (p == rest || *p != '.')
		return 0;
	dot = strrchr(p, '.');
	if (dot - (p + 1) < 5 || strncmp(dot - 5, "_proj", 5) != 0 || memchr(p + 1, '.', (size_t)(dot - p - 1)))
		return 0;
	return strcmp(dot + 1, "weight") == 0 || strcmp(dot + 1, "qweight") == 0 ||
	       strcmp(dot + 1, "weight_packed") == 0;
}

void fg_experts_release(struct fg_expert_block *blocks, size_t n)
{
	for (size_t i = 0; blocks && i < n; i++) {
		free(blocks[i].prefix);
		memset(&blocks[i], 0, sizeof(blocks[i]));
	}
}

int fg_experts_scan(const struct fg_tset *set, const struct fg_expert_dims *dims,
		    struct fg_expert_block *blocks, size_t max, size_t *n_out, struct fg_err *err)
{
	size_t n = 0;

	for (size_t i = 0; i < set->n_tensors; i++) {
		const struct fg_tensor *t = set->tensors[i];
		const char *p = strstr(t->name, "experts.");
		struct fg_expert_block *b;
		const char *rest;

		if (!p || (p != t->name && p[-1] != '.'))
			continue;
		rest = p + 8;
		if (block_for(blocks, &n, max, t->name, (size_t)(rest - t->name), &b)) {
			fg_experts_release(blocks, n);
			return fg_err_set(err, FG_ENOMEM, "out of memory for the expert blocks of '%s'", t->name);
		}
		if (!b)
			continue;
		/* Exact names only: gate_up_proj_scale_inv and friends are not experts. */
		if (strcmp(rest, "gate_up_proj") == 0 || strcmp(rest, "gate_up_proj.weight") == 0)
			b->gate_up = t;
		else if (strcmp(rest, "down_proj") == 0 || strcmp(rest, "down_proj.weight") == 0)
			b->down = t;
		else if (numbered_carrier(rest)) {
			uint64_t e = strtoull(rest, NULL, 10);

			if (e >= FG_EXPERTS_MAX_INDEX) {
				fg_experts_release(blocks, n);
				int ndig = (int)strspn(rest, "0123456789");

				return fg_err_set(err, FG_EINPUT, "tensor '%.200s': expert number %.*s is beyond the %u experts "
						  "any model has", t->name, ndig < 24 ? ndig : 24, rest, FG_EXPERTS_MAX_INDEX);
			}
			b->n_numbered++;
			if (e > b->max_index)
				b->max_index = e;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (blocks[i].gate_up || blocks[i].down)
			decide_fused(&blocks[i], dims);
		else
			decide_numbered(&blocks[i], dims);
	}
	*n_out = n;
	return 0;
}
