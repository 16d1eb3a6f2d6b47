/*
 * qmods.c: the quantized modules of a tensor set (qmods.h).
 *
 * Two passes over the set: the first finds the candidate prefixes (a
 * tensor whose role is neither weight nor bias, or a weight that is no
 * float), the second files every tensor of a candidate under its role.  A
 * hash table of the prefixes keeps both passes linear in the set's size, so
 * the trunk of a 100,000-tensor checkpoint costs two walks over its names.
 */
#include "forge/model/qmods.h"

#include "forge/core/grow.h"
#include "forge/core/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The role of name and the length of its module prefix; false when the last component is no role. */
static bool split_role(const char *name, enum fg_qrole *role, size_t *plen)
{
	const char *dot = strrchr(name, '.');

	if (!dot || dot == name || fg_qrole_parse(dot + 1, role) != 0)
		return false;
	*plen = (size_t)(dot - name);
	return true;
}

static int is_float(enum fg_dtype dt)
{
	return dt == FG_DT_F32 || dt == FG_DT_F16 || dt == FG_DT_BF16 || dt == FG_DT_F64;
}

static int candidate(const struct fg_tensor *t, enum fg_qrole role)
{
	if (role == FG_QR_BIAS)
		return 0;
	return role != FG_QR_WEIGHT || !is_float(t->dtype);
}

static uint64_t hash_n(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

struct table {
	size_t mask;
	size_t *slot;  /* module index + 1; 0: empty */
};

static size_t *lookup(const struct table *tb, const struct fg_qmods *q, const char *name, size_t n)
{
	size_t h = (size_t)hash_n(name, n) & tb->mask;

	while (tb->slot[h]) {
		const char *m = q->v[tb->slot[h] - 1].name;

		if (strncmp(m, name, n) == 0 && m[n] == '\0')
			break;
		h = (h + 1) & tb->mask;
	}
	return &tb->slot[h];
}

void fg_qmods_release(struct fg_qmods *q)
{
	if (!q)
		return;
	for (size_t i = 0; i < q->n; i++)
		free(q->v[i].name);
	free(q->v);
	free(q->slot);
	memset(q, 0, sizeof(*q));
}

int fg_qmod_quantized(const struct fg_qmod *m)
{
	return m && (m->rc != 0 || m->f.kind != FG_QF_DENSE);
}

size_t fg_qmods_quantized(const struct fg_qmods *q)
{
	size_t n = 0;

	for (size_t i = 0; q && i < q->n; i++)
		n += (size_t)fg_qmod_quantized(&q->v[i]);
	return n;
}

const char *fg_qmod_name(const struct fg_qmod *m, char *buf, size_t len)
{
	if (!len)
		return buf;
	if (!m->rc)
		return fg_qformat_name(&m->f, buf, len);
	/* The flag says the message is FG_QUNSUPPORTED followed by the name: skip the code by its length. */
	snprintf(buf, len, "%s", m->unsupported ? m->why + strlen(FG_QUNSUPPORTED) : m->why);
	return buf;
}

/* The module called name's first n bytes, by the scan's index (a scan of the modules without one). */
static const struct fg_qmod *module_n(const struct fg_qmods *q, const char *name, size_t n)
{
	if (!q || !q->n)
		return NULL;
	if (q->slot) {
		const struct table tb = { q->mask, q->slot };
		size_t *s = lookup(&tb, q, name, n);

		return *s ? &q->v[*s - 1] : NULL;
	}
	for (size_t i = 0; i < q->n; i++)
		if (strncmp(q->v[i].name, name, n) == 0 && q->v[i].name[n] == '\0')
			return &q->v[i];
	return NULL;
}

const struct fg_qmod *fg_qmods_module(const struct fg_qmods *q, const char *name)
{
	return module_n(q, name, strlen(name));
}

const struct fg_qmod *fg_qmods_find(const struct fg_qmods *q, const char *name, enum fg_qrole *role)
{
	const struct fg_qmod *m;
	enum fg_qrole r;
	size_t n;

	if (!q || !q->n || !split_role(name, &r, &n))
		return NULL;
	m = module_n(q, name, n);
	if (!m || !m->m.t[r] || strcmp(m->m.t[r]->name, name) != 0)
		return NULL;
	if (role)
		*role = r;
	return m;
}

uint64_t fg_qmod_stacked(const struct fg_qmod *q)
{
	const struct fg_tensor *w = q->m.t[FG_QR_WEIGHT];

	return w && w->rank == 3 && q->f.kind >= FG_QF_MLX_AFFINE && q->f.kind <= FG_QF_MLX_NVFP4 ? w->shape[0] : 0;
}

int fg_qmod_fits(const struct fg_qmod *q, const struct fg_qformat *f, struct fg_qdims *dims, struct fg_err *err)
{
	struct fg_qslice views;
	struct fg_qmodule slice;
	struct fg_qmod as = *q;

	as.f = *f;
	if (!fg_qmod_stacked(&as))
		return fg_qformat_check(f, &q->m, dims, err);
	fg_qmod_slice(&as, 0, &views, &slice);
	return fg_qformat_check(f, &slice, dims, err);
}

void fg_qmod_slice(const struct fg_qmod *q, uint64_t e, struct fg_qslice *v,
		   struct fg_qmodule *out)
{
	uint64_t experts = fg_qmod_stacked(q);

	memset(out, 0, sizeof(*out));
	for (int r = 0; r < FG_QR_COUNT; r++) {
		const struct fg_tensor *t = q->m.t[r];
		uint64_t per = 0;

		if (!t)
			continue;
		v->views[r] = *t;
		memset(v->shapes[r], 0, sizeof(v->shapes[r]));
		if (experts && t->rank == 3 && t->shape[0] == experts) {
			v->views[r].rank = 2;
			v->shapes[r][0] = t->shape[1];
			v->shapes[r][1] = t->shape[2];
			v->views[r].shape = v->shapes[r];
			per = t->shape[1] * t->shape[2];
		} else if (experts && t->rank == 2 && t->shape[0] == experts) {
			v->views[r].rank = 1; /* a stacked linear bias [E, out] */
			v->shapes[r][0] = t->shape[1];
			v->views[r].shape = v->shapes[r];
			per = t->shape[1];
		}
		if (per) {
			v->views[r].begin = t->begin + e * per * fg_dtype_size(t->dtype);
			v->views[r].data = t->data ? t->data + e * per * fg_dtype_size(t->dtype) : NULL;
		}
		out->t[r] = &v->views[r];
	}
}

/* The tensors of DeepSeek's block FP8: an E4M3 weight, a weight_scale_inv, nothing else of a format. */
static int deepseek_fp8(const struct fg_qmodule *m)
{
	const struct fg_tensor *w = m->t[FG_QR_WEIGHT];

	if (!w || w->dtype != FG_DT_F8_E4M3 || !m->t[FG_QR_WEIGHT_SCALE_INV])
		return 0;
	for (int r = 0; r < FG_QR_COUNT; r++)
		if (m->t[r] && r != FG_QR_WEIGHT && r != FG_QR_WEIGHT_SCALE_INV && r != FG_QR_BIAS)
			return 0;
	return 1;
}

/* An E4M3 weight with no companion at all (a bias aside). */
static int lone_fp8(const struct fg_qmodule *m)
{
	const struct fg_tensor *w = m->t[FG_QR_WEIGHT];

	if (!w || w->dtype != FG_DT_F8_E4M3)
		return 0;
	for (int r = 0; r < FG_QR_COUNT; r++)
		if (m->t[r] && r != FG_QR_WEIGHT && r != FG_QR_BIAS)
			return 0;
	return 1;
}

static void decide(struct fg_qmod *q, const struct fg_qconfig *cfg, const char *cfg_error, int check)
{
	struct fg_qparams p;
	struct fg_err err = { 0 };
	bool uns = false;

	if (!cfg) {
		q->rc = FG_EINPUT;
		snprintf(q->why, sizeof(q->why), "%s", cfg_error ? cfg_error : "the quantization config cannot be read");
		return;
	}
	q->rc = check ? fg_qconfig_for_head_module(cfg, q->name, &p, &err) : fg_qconfig_for_module(cfg, q->name, &p, &err);
	if (!q->rc)
		q->rc = fg_qformat_detect_why(&p, &q->m, &q->f, &uns, &err);
	if (q->rc && !uns && p.method == FG_QM_NONE && deepseek_fp8(&q->m)) {
		/*
		 * DeepSeek's block FP8 names itself: an E4M3 weight and an F32 weight_scale_inv grid of
		 * 128 x 128 blocks (fg_qformat_check checks the grid), read as forged always read it,
		 * even where config.json declares no quantization_config.
		 */
		memset(&q->f, 0, sizeof(q->f));
		q->f.kind = FG_QF_FP8;
		q->f.method = FG_QM_FP8;
		q->f.bits = 8;
		q->f.scale = FG_QS_BLOCK;
		q->f.block[0] = q->f.block[1] = 128;
		q->rc = 0;
	} else if (q->rc && p.method == FG_QM_NONE && lone_fp8(&q->m)) {
		/* No config and no scale beside it: malformed (a missing grid), not a format forged refuses. */
		q->rc = fg_err_set(&err, FG_EINPUT, "FP8 tensor '%s' has no '%s.weight_scale_inv' block scales",
				   q->m.t[FG_QR_WEIGHT]->name, q->name);
		uns = false;
	}
	if (!q->rc && check && q->f.kind != FG_QF_DENSE) {
		q->rc = fg_qmod_fits(q, &q->f, &q->dims, &err);
		q->checked = q->rc == 0;
	}
	if (q->rc) {
		q->rc = FG_EINPUT;
		q->unsupported = uns;
		snprintf(q->why, sizeof(q->why), "%s", err.msg);
	}
}

int fg_qmods_scan(const struct fg_tset *set, const struct fg_qconfig *cfg, const char *cfg_error, int check,
		  struct fg_qmods *out, struct fg_err *err)
{
	struct table tb = { 0 };
	size_t cap = 0, n_slots = 16;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	/* Pass 1: the candidate prefixes, in the order their first candidate tensor appears. */
	for (size_t i = 0; i < set->n_tensors; i++) {
		const struct fg_tensor *t = set->tensors[i];
		enum fg_qrole role;
		size_t plen, *s;

		if (!split_role(t->name, &role, &plen) || !candidate(t, role))
			continue;
		/* The table is made at the first candidate: a set of float weights (most) needs none. */
		if (!tb.slot) {
			while (n_slots < 2 * set->n_tensors + 2)
				n_slots <<= 1;
			tb.mask = n_slots - 1;
			if (!(tb.slot = calloc(n_slots, sizeof(*tb.slot))))
				return fg_err_set(err, FG_ENOMEM, "out of memory grouping the modules of set '%s'",
						  set->name);
		}
		s = lookup(&tb, out, t->name, plen);
		if (*s)
			continue;
		if (FG_GROW(out->v, out->n + 1, cap)) {
			rc = FG_ENOMEM;
			break;
		}
		memset(&out->v[out->n], 0, sizeof(out->v[out->n]));
		if (!(out->v[out->n].name = strndup(t->name, plen))) {
			rc = FG_ENOMEM;
			break;
		}
		*s = ++out->n;
	}
	/* Pass 2: every tensor of a candidate under its role (a name held twice keeps its first copy); none, none. */
	for (size_t i = 0; !rc && out->n && i < set->n_tensors; i++) {
		const struct fg_tensor *t = set->tensors[i];
		enum fg_qrole role;
		size_t plen, *s;

		if (!split_role(t->name, &role, &plen))
			continue;
		s = lookup(&tb, out, t->name, plen);
		if (*s && !out->v[*s - 1].m.t[role])
			out->v[*s - 1].m.t[role] = t;
	}
	free(tb.slot);
	/* Kept for lookups by name: a table sized to the modules, not to the set's tensors. */
	if (!rc && out->n) {
		n_slots = 16;
		while (n_slots < 2 * out->n + 2)
			n_slots <<= 1;
		tb.mask = n_slots - 1;
		if (!(tb.slot = calloc(n_slots, sizeof(*tb.slot))))
			rc = FG_ENOMEM;
		for (size_t i = 0; !rc && i < out->n; i++)
			*lookup(&tb, out, out->v[i].name, strlen(out->v[i].name)) = i + 1;
		out->slot = tb.slot;
		out->mask = tb.mask;
	}
	if (rc) {
		fg_qmods_release(out);
		return fg_err_set(err, rc, "out of memory grouping the modules of set '%s'", set->name);
	}
	for (size_t i = 0; i < out->n; i++)
		decide(&out->v[i], cfg, cfg_error, check);
	return 0;
}
