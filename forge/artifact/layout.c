/*
 * layout.c: the artifact layout for a list of targets (layout.h).
 *
 * Each candidate is judged on a model of the artifact it would make, not
 * on the artifact: the backbone's shards as the writer carries them (head
 * tensors removed, facts of the trunk kept), plus the head's file with the
 * names, shapes and norm values the plan gives (norms materialized, they
 * are small; nothing else is read), the index when there is one, and
 * config.json patched as the writer patches it.  That model is a
 * struct fg_runtime_input like inspect's, so every row is simulated by the
 * same code (runtimes.c) that inspects the written artifact afterwards.
 */
#include "forge/artifact/layout.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forge/artifact/forge.h"
#include "forge/core/grow.h"
#include "forge/core/str.h"

#define MAX_PLACES 8
#define MAX_TRIALS 4
#define REASON_MAX FG_LAYOUT_REASON_MAX

static const char *const sidecar_universe[] = {
	"mtp.safetensors", "mtp/weights.safetensors", "model-mtp.safetensors",
};

/* ---- the target list ---- */

int fg_layout_targets(const char *text, const struct fg_runtime *rows[FG_LAYOUT_MAX_TARGETS], size_t *n,
		      struct fg_err *err)
{
	const char *p = text && *text ? text : FG_FORGE_DEFAULT_TARGET;

	*n = 0;
	while (p) {
		const char *e;
		size_t len = fg_list_next(&p, &e);
		char id[96];
		const struct fg_runtime *rt;
		int seen = 0;

		if (!len)
			return fg_err_set(err, FG_EUSAGE, "target list '%s' has an empty entry", text);
		if (len >= sizeof(id))
			return fg_err_set(err, FG_EUSAGE, "target '%.40s...' is too long", e);
		memcpy(id, e, len);
		id[len] = '\0';
		rt = fg_runtime_find(id);
		if (!rt)
			return fg_err_set(err, FG_EUSAGE, "'%s' is not a runtime id", id);
		for (size_t i = 0; i < *n; i++)
			seen |= rows[i] == rt;
		if (!seen) {
			if (*n == FG_LAYOUT_MAX_TARGETS)
				return fg_err_set(err, FG_EUSAGE, "more than %d targets", FG_LAYOUT_MAX_TARGETS);
			rows[(*n)++] = rt;
		}
	}
	return 0;
}

/* ---- names ---- */

static const char *conv_word(enum fg_convention c)
{
	return c == FG_CONV_ABSOLUTE ? "absolute" : c == FG_CONV_DELTA ? "delta" : "plain";
}

const char *fg_layout_fit_name(enum fg_layout_fit fit)
{
	switch (fit) {
	case FG_FIT_OK:
		return "ok";
	case FG_FIT_UNMODELLED:
		return "unmodelled";
	case FG_FIT_TRUNK:
		return "trunk";
	case FG_FIT_FAILS:
		return "fails";
	}
	return "unknown";
}

static int is_root(const char *name)
{
	return !strchr(name, '/');
}

static int globbed_name(const char *name)
{
	return is_root(name) && fnmatch("model*.safetensors", name, 0) == 0;
}

/* ---- trials: the head planned one way, and the set a runtime would see ---- */

struct trial {
	struct fg_plan_spec spec;
	int rc;                       /* fg_plan_build_spec's */
	struct fg_err err;
	struct fg_plan plan;
	int moved;                    /* the plan went to the caller */
	struct fg_tensor *tensors;    /* one per plan entry */
	uint8_t **bufs;               /* materialized norms, per entry (NULL: none) */
	struct fg_tset set;
	struct fg_decision dec;
	unsigned experts;             /* FG_XL_* of the head as planned */
	struct fg_st_file *st;        /* its header, for name lookups */
	uint8_t *header;
	size_t mtp_keys;
};

static void trial_release(struct trial *t)
{
	fg_tset_release(&t->set);
	for (size_t i = 0; t->bufs && i < t->plan.n; i++)
		free(t->bufs[i]);
	free(t->bufs);
	free(t->tensors);
	fg_st_close(t->st);
	free(t->header);
	if (!t->moved)
		fg_plan_release(&t->plan);
	memset(t, 0, sizeof(*t));
}

static int is_norm_entry(const struct fg_plan_entry *e)
{
	return e->rank == 1 && fg_dtype_is_float(e->dtype) && fg_name_norm_class(e->name) != FG_NAME_NOT_NORM;
}

/* A safetensors header of the planned tensors (names, dtypes, shapes, contiguous offsets), parsed. */
static int trial_header(struct trial *t, struct fg_err *err)
{
	cJSON *h = cJSON_CreateObject(), *md;
	uint64_t off = 0;
	char *text = NULL;
	size_t n, padded;
	int rc = 0;

	md = cJSON_AddObjectToObject(h, "__metadata__");
	if (!h || !md || !cJSON_AddStringToObject(md, "format", "mlx")) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < t->plan.n; i++) {
		const struct fg_plan_entry *e = &t->plan.t[i];
		uint64_t bytes = fg_plan_entry_bytes(e);
		cJSON *o = cJSON_CreateObject(), *shape, *offs;

		if (!o || !cJSON_AddItemToObject(h, e->name, o) || !cJSON_AddStringToObject(o, "dtype", fg_dtype_name(e->dtype)) ||
		    !(shape = cJSON_AddArrayToObject(o, "shape")) || !(offs = cJSON_AddArrayToObject(o, "data_offsets"))) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		for (int d = 0; d < e->rank; d++)
			cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)e->shape[d]));
		cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
		cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + bytes)));
		off += bytes;
	}
	text = cJSON_PrintUnformatted(h);
	if (!text) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	n = strlen(text);
	padded = (n + 7) & ~(size_t)7;
	t->header = malloc(8 + padded);
	if (!t->header) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	for (int b = 0; b < 8; b++)
		t->header[b] = (uint8_t)((uint64_t)padded >> (8 * b));
	memcpy(t->header + 8, text, n);
	memset(t->header + 8 + n, ' ', padded - n);
	rc = fg_st_parse_header(&t->st, t->header, 8 + padded, 8 + padded + off, "planned head", err);
out:
	free(text);
	cJSON_Delete(h);
	return rc;
}

/* The head as this spec plans it, seen as inspect would see its file: the set, its decision, its layouts. */
static int trial_build(struct trial *t, const struct fg_inspect *src, const struct fg_plan_spec *spec,
		       const struct fg_plan_opts *opts, struct fg_err *err)
{
	struct fg_expert_dims dims;
	int rc;

	t->spec = *spec;
	t->rc = fg_plan_build_spec(src, spec, opts, &t->plan, &t->err);
	if (t->rc)
		return 0;
	t->tensors = calloc(t->plan.n ? t->plan.n : 1, sizeof(*t->tensors));
	t->bufs = calloc(t->plan.n ? t->plan.n : 1, sizeof(*t->bufs));
	if (!t->tensors || !t->bufs)
		return fg_err_set(err, FG_ENOMEM, "out of memory judging layouts");
	if ((rc = fg_tset_init(&t->set, "mtp", err)))
		return rc;
	for (size_t i = 0; i < t->plan.n; i++) {
		const struct fg_plan_entry *e = &t->plan.t[i];
		struct fg_tensor *x = &t->tensors[i];

		x->name = e->name;
		x->dtype = e->dtype;
		x->rank = (unsigned)e->rank & 7u; /* a plan entry has at most FG_ST_MAX_RANK */
		x->shape = e->shape; /* the plan's entries outlive the trial's tensors */
		if (is_norm_entry(e)) {
			if (e->op == FG_OP_VIEW) {
				x->data = e->src->data;
			} else {
				uint64_t bytes = fg_plan_entry_bytes(e);

				t->bufs[i] = malloc(bytes ? (size_t)bytes : 1);
				if (!t->bufs[i])
					return fg_err_set(err, FG_ENOMEM, "out of memory judging layouts");
				if ((rc = fg_plan_materialize(&t->plan, e, t->bufs[i], err)))
					return rc;
				x->data = t->bufs[i];
			}
		}
		if (strstr(e->name, "mtp."))
			t->mtp_keys++;
		if ((rc = fg_tset_add(&t->set, x, "planned head", err)))
			return rc;
	}
	if ((rc = fg_tset_measure(&t->set, err)))
		return rc;
	fg_conv_decide(&t->set, src->family->norm_style, &t->dec);
	/* The layouts inspect will see in the written head, tensor by tensor. */
	fg_experts_dims(src->ckpt->config, &dims);
	for (size_t i = 0; i < t->plan.n; i++)
		t->experts |= fg_inspect_expert_layout(&t->tensors[i], &dims);
	return trial_header(t, err);
}

/* ---- the artifact a candidate makes ---- */

struct cand {
	enum fg_layout_place place;
	const char *file;
	int trial;            /* index into trials; -1: no head (the baseline) */
};

/* What every candidate shares: the backbone's shards as the writer carries them. */
struct base {
	const struct fg_inspect *bb;
	struct fg_runtime_input in;     /* trunk, family, ...: the backbone's */
	struct fg_head_input bb_sidecars[FG_INSPECT_MAX_SETS];
	size_t n_carried;
	struct fg_ckpt_file *files;     /* carried shards, then one slot for the head's file */
	struct fg_file_facts *facts;
	int index;                      /* an index is written even without an embedded head */
	int absolute_trunk;
	int norm_convention;            /* a target reads norm_convention */
	cJSON *index_doc;               /* a stand-in: the simulation asks only whether there is one */
};

int fg_layout_carried(const struct fg_inspect *bb, size_t i)
{
	const struct fg_ckpt_file *cf = &bb->ckpt->files[i];

	if (!(cf->globbed || cf->in_index || !cf->sidecar))
		return 0;
	return bb->facts[i].head_tensors < cf->st->n_tensors; /* one of head tensors only is not carried */
}

static int base_build(struct base *b, const struct fg_inspect *bb, const struct fg_runtime *const *targets,
		      size_t n, struct fg_err *err)
{
	const struct fg_ckpt *c = bb->ckpt;

	b->bb = bb;
	fg_inspect_runtime_input(bb, &b->in, b->bb_sidecars);
	b->files = calloc(c->n_files + 1, sizeof(*b->files));
	b->facts = calloc(c->n_files + 1, sizeof(*b->facts));
	b->index_doc = cJSON_CreateObject();
	if (!b->files || !b->facts || !b->index_doc)
		return fg_err_set(err, FG_ENOMEM, "out of memory judging layouts");
	for (size_t i = 0; i < c->n_files; i++) {
		struct fg_ckpt_file *f;
		struct fg_file_facts *ff;

		if (!fg_layout_carried(bb, i))
			continue;
		f = &b->files[b->n_carried];
		ff = &b->facts[b->n_carried];
		b->n_carried++;
		*f = c->files[i];
		if (c->single_file)
			f->name = (char *)"model.safetensors";
		f->globbed = globbed_name(f->name);
		f->sidecar = 0;
		f->stray = 0;
		*ff = bb->facts[i];
		/* The writer removes the head's tensors and writes a new index. */
		ff->mtp_keys = ff->head_tensors = ff->unlisted_mtp_keys = 0;
		ff->wrong_file = ff->index_missing = ff->unlisted = 0;
		for (size_t k = 0; k < c->files[i].st->n_tensors; k++) {
			const char *name = c->files[i].st->tensors[k].name;

			ff->mtp_keys += strstr(name, "mtp.") && !fg_inspect_is_head(bb, &c->files[i], name);
		}
	}
	b->index = c->index != NULL || b->n_carried > 1;
	b->absolute_trunk = fg_inspect_trunk(bb)->decision.conv == FG_CONV_ABSOLUTE;
	for (size_t t = 0; t < n; t++)
		for (size_t k = 0; targets[t]->forge.declarations && targets[t]->forge.declarations[k]; k++)
			b->norm_convention |= strcmp(targets[t]->forge.declarations[k], "norm_convention") == 0;
	return 0;
}

static void base_release(struct base *b)
{
	free(b->files);
	free(b->facts);
	cJSON_Delete(b->index_doc);
}

/* The layout a candidate writes (declarations included), before the targets are judged. */
static void cand_layout(const struct base *b, const struct cand *cd, const struct trial *tr,
			const struct fg_runtime *const *targets, size_t n, struct fg_layout *l)
{
	memset(l, 0, sizeof(*l));
	l->place = cd->place;
	snprintf(l->file, sizeof(l->file), "%s", cd->file ? cd->file : "");
	l->pointer = cd->trial >= 0 && cd->place == FG_PLACE_SIDECAR;
	l->index = b->index || (cd->trial >= 0 && cd->place == FG_PLACE_EMBEDDED);
	l->norm_convention = b->norm_convention && b->absolute_trunk;
	if (!tr)
		return;
	l->experts = tr->experts != 0;
	l->spec = tr->spec;
	if (tr->plan.target_conv == FG_CONV_ABSOLUTE || tr->plan.target_conv == FG_CONV_DELTA)
		l->encoding = conv_word(tr->plan.target_conv);
	/* vllm-mlx's manifest.json, only in a folder of the head's own (a root manifest.json is the model's). */
	if (tr->plan.target_conv == FG_CONV_ABSOLUTE && cd->place == FG_PLACE_SIDECAR && !is_root(cd->file))
		for (size_t t = 0; t < n; t++)
			for (const struct fg_rt_head *h = targets[t]->heads; h && h->mode != FG_HEAD_NONE; h++)
				l->manifest |= h->heal == FG_HEAL_PER_TENSOR && h->manifest.file != NULL;
}

/* The patched configs and the head's inputs of one candidate (owned by the caller's struct). */
struct model {
	struct fg_ckpt ckpt;
	cJSON *config_raw, *config;
	cJSON *manifest;
	struct fg_head_input embedded, sidecar;
	int *tensor_file;
	struct fg_runtime_input in;
};

static void model_release(struct model *m)
{
	cJSON_Delete(m->config_raw);
	cJSON_Delete(m->config);
	cJSON_Delete(m->manifest);
	free(m->tensor_file);
	memset(m, 0, sizeof(*m));
}

static int model_build(struct model *m, struct base *b, const struct cand *cd, const struct trial *tr,
		       const struct fg_layout *l, struct fg_err *err)
{
	const struct fg_ckpt *c = b->bb->ckpt;
	size_t nf = b->n_carried;
	int rc;

	memset(m, 0, sizeof(*m));
	m->config_raw = cJSON_Duplicate(c->config_raw, 1);
	m->config = cJSON_Duplicate(c->config, 1);
	if (!m->config_raw || !m->config)
		return fg_err_set(err, FG_ENOMEM, "out of memory judging layouts");
	if ((rc = fg_layout_patch_config(l, m->config_raw, err)) || (rc = fg_layout_patch_config(l, m->config, err)))
		return rc;
	for (size_t i = 0; i < b->n_carried; i++)
		b->files[i].in_index = l->index;
	m->in = b->in;
	m->in.ckpt = &m->ckpt;
	m->in.facts = b->facts;
	m->in.pointer_file = -1;
	m->in.embedded = NULL;
	m->in.sidecars = NULL;
	m->in.n_sidecars = 0;
	/* A complete index is written: inspect looks for names held twice only without one. */
	if (l->index) {
		m->in.dups = NULL;
		m->in.n_dups = 0;
	}
	if (tr) {
		struct fg_ckpt_file *hf = &b->files[nf];
		struct fg_file_facts *ff = &b->facts[nf];

		memset(hf, 0, sizeof(*hf));
		memset(ff, 0, sizeof(*ff));
		hf->name = (char *)cd->file;
		hf->path = (char *)cd->file;
		hf->st = tr->st;
		hf->globbed = globbed_name(cd->file);
		hf->in_index = cd->place == FG_PLACE_EMBEDDED;
		hf->sidecar = cd->place == FG_PLACE_SIDECAR;
		ff->mtp_keys = tr->mtp_keys;
		ff->head_tensors = tr->plan.n;
		m->tensor_file = calloc(tr->set.n_tensors ? tr->set.n_tensors : 1, sizeof(*m->tensor_file));
		if (!m->tensor_file)
			return fg_err_set(err, FG_ENOMEM, "out of memory judging layouts");
		for (size_t k = 0; k < tr->set.n_tensors; k++)
			m->tensor_file[k] = (int)nf;
		m->embedded = (struct fg_head_input){ .file = -1, .set = &tr->set, .decision = &tr->dec,
						      .tensor_file = m->tensor_file, .experts = tr->experts };
		if (cd->place == FG_PLACE_SIDECAR) {
			if (l->manifest && !(m->manifest = fg_layout_manifest(l, &tr->plan)))
				return fg_err_set(err, FG_ENOMEM, "out of memory judging layouts");
			m->sidecar = m->embedded;
			m->sidecar.file = (int)nf;
			m->sidecar.manifest = m->manifest;
			m->in.sidecars = &m->sidecar;
			m->in.n_sidecars = 1;
			m->in.pointer_file = l->pointer ? (int)nf : -1;
		}
		/* Inspect puts the head keys of every file the glob matches in the embedded set. */
		if (cd->place == FG_PLACE_EMBEDDED || hf->globbed)
			m->in.embedded = &m->embedded;
		nf++;
	}
	m->ckpt = *c;
	m->ckpt.single_file = 0;
	m->ckpt.config_raw = m->config_raw;
	m->ckpt.config = m->config;
	m->ckpt.index = l->index ? b->index_doc : NULL;
	m->ckpt.n_files = nf;
	m->ckpt.files = b->files;
	m->ckpt.sidecar = tr && cd->place == FG_PLACE_SIDECAR ? (int)b->n_carried : -1;
	m->ckpt.n_mismatch = 0;
	m->ckpt.mismatch = NULL;
	return 0;
}

/* ---- judging ---- */

struct verdict_cell {
	enum fg_layout_fit fit;
	int reached;          /* the row found the head there (loaded it, or refused it for what it is) */
	char reason[REASON_MAX];
};

void fg_layout_describe(const struct fg_runtime_result *r, char *buf, size_t len)
{
	size_t at = 0;

	if (r->load_cause != FG_LOAD_OK) {
		at = (size_t)snprintf(buf, len, "refuses it (%s: %.120s%s)", fg_runtime_load_cause_name(r->load_cause),
				      r->load_error, strlen(r->load_error) > 120 ? "..." : "");
	} else if (r->breakage) {
		at = (size_t)snprintf(buf, len, "loads it wrong (");
		for (unsigned bit = 1, first = 1; bit < (1u << FG_BREAK_COUNT); bit <<= 1) {
			if (!(r->breakage & bit) || at >= len)
				continue;
			at += (size_t)snprintf(buf + at, len - at, "%s%s", first ? "" : ", ", fg_runtime_breakage_name(bit));
			first = 0;
		}
		if (at < len)
			at += (size_t)snprintf(buf + at, len - at, ")");
	} else if (r->outcome == FG_OUTCOME_DEGRADED) {
		at = (size_t)snprintf(buf, len, "decodes plain (head %s)", fg_runtime_head_name(r->head));
	} else if (r->outcome != FG_OUTCOME_OK) {
		at = (size_t)snprintf(buf, len, "%s it (trunk %s)", fg_runtime_outcome_name(r->outcome),
				      fg_runtime_trunk_name(r->trunk));
	} else {
		at = (size_t)snprintf(buf, len, "loads it");
	}
	if (!r->modelled && at < len)
		snprintf(buf + at, len - at, ", as far as modelled (%s)", r->unmodelled);
}

/*
 * A result the row's sources do not fully cover still says what its
 * modelled part does: a refusal or a breakage there fails the candidate,
 * and only an otherwise clean one is accepted as not modelled.
 */
static enum fg_layout_fit fit_of(const struct fg_runtime_result *r)
{
	if (r->outcome != FG_OUTCOME_OK)
		return FG_FIT_FAILS;
	return r->modelled ? FG_FIT_OK : FG_FIT_UNMODELLED;
}

/* With no head at all: does the row refuse or break the trunk itself? */
static int trunk_blocked(const struct fg_runtime_result *r)
{
	if (r->load_cause != FG_LOAD_OK)
		return r->load_cause != FG_LOAD_HEAD_MISSING;
	return r->outcome == FG_OUTCOME_BROKEN;
}

static int judge(struct base *b, const struct cand *cd, const struct trial *tr, const struct fg_runtime *const *targets,
		 size_t n, struct verdict_cell *cells, struct fg_err *err)
{
	struct fg_layout l;
	struct model m;
	struct fg_runtime_result *r = malloc(sizeof(*r));
	int rc;

	if (!r)
		return fg_err_set(err, FG_ENOMEM, "out of memory judging layouts");
	cand_layout(b, cd, tr, targets, n, &l);
	rc = model_build(&m, b, cd, tr, &l, err);
	for (size_t t = 0; !rc && t < n; t++) {
		fg_runtime_simulate(targets[t], &m.in, r);
		cells[t].fit = cd->trial < 0 ? (trunk_blocked(r) ? FG_FIT_TRUNK : FG_FIT_OK) : fit_of(r);
		cells[t].reached = r->head_set != NULL || r->load_cause == FG_LOAD_HEAD_KEYS ||
				   r->load_cause == FG_LOAD_HEAD_EXPERTS || r->load_cause == FG_LOAD_EXTRA_KEYS;
		fg_layout_describe(r, cells[t].reason, sizeof(cells[t].reason));
	}
	model_release(&m);
	free(r);
	return rc;
}

/* "mtp.safetensors (absolute, switch_mlp)", "the shards (delta)". */
static void cand_name(const struct cand *cd, const struct trial *tr, int experts, char *buf, size_t len)
{
	const char *conv = conv_word(tr->plan.target_conv);

	if (cd->place == FG_PLACE_EMBEDDED)
		snprintf(buf, len, "the shards (%s%s%s)", conv, experts ? ", " : "",
			 experts ? (tr->spec.restack ? "switch_mlp" : "experts as in the source") : "");
	else
		snprintf(buf, len, "%s (%s%s%s)", cd->file, conv, experts ? ", " : "",
			 experts ? (tr->spec.restack ? "switch_mlp" : "experts as in the source") : "");
}

/* The row that runs MTP for this input first, else the first: its preferences order the candidates. */
static const struct fg_runtime *primary(const struct base *b, const struct fg_runtime *const *targets, size_t n)
{
	for (size_t t = 0; t < n; t++)
		if (fg_runtime_head_loader(targets[t], &b->in))
			return targets[t];
	return targets[0];
}

static void add_place(struct cand *places, size_t *n, enum fg_layout_place place, const char *file)
{
	for (size_t i = 0; i < *n; i++)
		if (places[i].place == place && (place == FG_PLACE_EMBEDDED || strcmp(places[i].file, file) == 0))
			return;
	if (*n < MAX_PLACES)
		places[(*n)++] = (struct cand){ .place = place, .file = place == FG_PLACE_EMBEDDED ? FG_LAYOUT_HEAD_SHARD : file };
}

/* The places in the order the rows prefer them: each target's own, then every sidecar any row reads. */
static size_t order_places(const struct base *b, const struct fg_runtime *const *targets, size_t n, struct cand *places)
{
	const struct fg_runtime *first = primary(b, targets, n);
	size_t np = 0;

	for (size_t pass = 0; pass < 2; pass++)
		for (size_t t = 0; t < n; t++) {
			const struct fg_runtime *rt = targets[t];

			if ((pass == 0) != (rt == first))
				continue;
			if (rt->forge.head_file)
				add_place(places, &np, FG_PLACE_SIDECAR, rt->forge.head_file);
			else if (rt->forge.key_prefix)
				add_place(places, &np, FG_PLACE_EMBEDDED, NULL);
		}
	for (size_t i = 0; i < sizeof(sidecar_universe) / sizeof(sidecar_universe[0]); i++)
		add_place(places, &np, FG_PLACE_SIDECAR, sidecar_universe[i]);
	add_place(places, &np, FG_PLACE_EMBEDDED, NULL);
	for (size_t t = 0; t < n; t++) {
		const struct fg_rt_head *h = fg_runtime_head_loader(targets[t], &b->in);

		for (const struct fg_rt_head_src *s = h ? h->sources : NULL; s && s->kind != FG_HSRC_END; s++)
			if (s->kind == FG_HSRC_FILE)
				add_place(places, &np, FG_PLACE_SIDECAR, s->file);
	}
	return np;
}

struct search {
	size_t n_cands;
	struct cand cands[MAX_PLACES * MAX_TRIALS];
	struct verdict_cell *cells;          /* n_cands x n targets */
	struct verdict_cell base_cells[FG_LAYOUT_MAX_TARGETS];
};

static int serves(const struct search *s, size_t c, size_t t)
{
	enum fg_layout_fit f = s->cells[c * FG_LAYOUT_MAX_TARGETS + t].fit;

	return f == FG_FIT_OK || f == FG_FIT_UNMODELLED;
}

/* No candidate serves every target: name the target none serves, or two no one candidate serves together. */
static int conflict(const struct search *s, const struct trial *trials, int experts,
		    const struct fg_runtime *const *targets, size_t n, struct fg_layout *out, struct fg_err *err)
{
	char a[96], b[96];
	int common[MAX_PLACES * MAX_TRIALS];

	for (size_t c = 0; c < s->n_cands; c++)
		common[c] = 1;
	for (size_t t = 0; t < n; t++) {
		size_t first_own = s->n_cands, first_common = s->n_cands, other = n;

		if (s->base_cells[t].fit == FG_FIT_TRUNK)
			continue;
		for (size_t c = 0; c < s->n_cands; c++) {
			if (serves(s, c, t) && first_own == s->n_cands)
				first_own = c;
			if (common[c] && first_common == s->n_cands)
				first_common = c;
		}
		if (first_own == s->n_cands) {
			/*
			 * No candidate serves this target: its reasons under the first candidate and under
			 * the first other place where it reaches the head (else the first other place).
			 */
			size_t emb = s->n_cands, other_place = s->n_cands;
			const struct cand *c0 = &s->cands[0];

			for (size_t c = 1; c < s->n_cands; c++) {
				int moved = s->cands[c].place != c0->place || strcmp(s->cands[c].file, c0->file) != 0;

				if (moved && other_place == s->n_cands)
					other_place = c;
				if (moved && s->cells[c * FG_LAYOUT_MAX_TARGETS + t].reached) {
					emb = c;
					break;
				}
			}
			if (emb == s->n_cands)
				emb = other_place;
			cand_name(c0, &trials[c0->trial], experts, a, sizeof(a));
			out->n_conflict = 1;
			out->conflict[0] = targets[t]->id;
			if (emb < s->n_cands) {
				cand_name(&s->cands[emb], &trials[s->cands[emb].trial], experts, b, sizeof(b));
				return fg_err_verdict(err, FG_V_LAYOUT_CONFLICT,
						      "no layout serves %s: with the head in %s it %s; in %s it %s", targets[t]->id,
						      a, s->cells[t].reason, b, s->cells[emb * FG_LAYOUT_MAX_TARGETS + t].reason);
			}
			return fg_err_verdict(err, FG_V_LAYOUT_CONFLICT, "no layout serves %s: with the head in %s it %s",
					      targets[t]->id, a, s->cells[t].reason);
		}
		for (size_t c = 0; c < s->n_cands; c++)
			common[c] &= serves(s, c, t);
		for (size_t c = 0; c < s->n_cands; c++)
			if (common[c])
				goto next;
		/* The earlier targets' first common candidate fails this one; this one's first fails an earlier one. */
		for (size_t u = 0; u < t && other == n; u++)
			if (s->base_cells[u].fit != FG_FIT_TRUNK && !serves(s, first_own, u))
				other = u;
		if (other == n)
			other = 0;
		cand_name(&s->cands[first_common], &trials[s->cands[first_common].trial], experts, a, sizeof(a));
		cand_name(&s->cands[first_own], &trials[s->cands[first_own].trial], experts, b, sizeof(b));
		out->n_conflict = 2;
		out->conflict[0] = targets[other]->id;
		out->conflict[1] = targets[t]->id;
		return fg_err_verdict(err, FG_V_LAYOUT_CONFLICT,
				      "no one layout serves both %s and %s: with the head in %s, %s %s; in %s, %s %s",
				      targets[other]->id, targets[t]->id, a, targets[t]->id,
				      s->cells[first_common * FG_LAYOUT_MAX_TARGETS + t].reason, b, targets[other]->id,
				      s->cells[first_own * FG_LAYOUT_MAX_TARGETS + other].reason);
next:;
	}
	return fg_err_set(err, FG_EINTERNAL, "no layout serves every target, yet every target is served");
}

int fg_layout_decide(const struct fg_inspect *src, const struct fg_inspect *bb,
		     const struct fg_runtime *const *targets, size_t n, const struct fg_plan_opts *opts,
		     struct fg_layout *out, struct fg_plan *plan, struct fg_err *err)
{
	const struct fg_runtime *first;
	const struct fg_set_report *head = fg_inspect_head(src);
	struct trial trials[MAX_TRIALS];
	struct cand places[MAX_PLACES];
	struct search *s = calloc(1, sizeof(*s));
	struct base b;
	enum fg_convention convs[2];
	int restacks[2], experts = head && head->n_experts > 0;
	size_t n_trials = 0, np, nc = 0, nr = 0, best = 0;
	long best_ok = -1;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	memset(plan, 0, sizeof(*plan));
	memset(trials, 0, sizeof(trials));
	memset(&b, 0, sizeof(b));
	if (!s)
		return fg_err_set(err, FG_ENOMEM, "out of memory judging layouts");
	if (!n || n > FG_LAYOUT_MAX_TARGETS) {
		rc = fg_err_set(err, FG_EUSAGE, "between 1 and %d targets", FG_LAYOUT_MAX_TARGETS);
		goto out;
	}
	if ((rc = base_build(&b, bb, targets, n, err)))
		goto out;
	first = primary(&b, targets, n);
	convs[nc++] = first->forge.convention == FG_CONV_DELTA ? FG_CONV_DELTA : FG_CONV_ABSOLUTE;
	if (src->family->norm_style == FG_STYLE_ZERO_CENTRED)
		convs[nc++] = convs[0] == FG_CONV_DELTA ? FG_CONV_ABSOLUTE : FG_CONV_DELTA;
	restacks[nr++] = !experts || first->forge.experts == FG_XL_SWITCH_MLP;
	if (experts)
		restacks[nr++] = !restacks[0];
	for (size_t ci = 0; ci < nc; ci++)
		for (size_t ri = 0; ri < nr; ri++) {
			struct fg_plan_spec spec = { .conv = convs[ci], .restack = restacks[ri], .target = NULL,
						     .rows = targets, .n_rows = n };

			if ((rc = trial_build(&trials[n_trials++], src, &spec, opts, err)))
				goto out;
		}
	/* The most preferred plan refuses the head (a verdict of inspect's, bad input): so does the forge. */
	if (trials[0].rc) {
		rc = trials[0].rc;
		if (err)
			*err = trials[0].err;
		goto out;
	}
	np = order_places(&b, targets, n, places);
	for (size_t p = 0; p < np; p++)
		for (size_t t = 0; t < n_trials; t++)
			if (!trials[t].rc)
				s->cands[s->n_cands++] = (struct cand){ .place = places[p].place, .file = places[p].file,
									.trial = (int)t };
	s->cells = calloc(s->n_cands * FG_LAYOUT_MAX_TARGETS, sizeof(*s->cells));
	if (!s->cells) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory judging layouts");
		goto out;
	}
	{
		struct cand none = { .place = FG_PLACE_SIDECAR, .file = NULL, .trial = -1 };

		if ((rc = judge(&b, &none, NULL, targets, n, s->base_cells, err)))
			goto out;
	}
	for (size_t c = 0; c < s->n_cands; c++) {
		struct verdict_cell *row = &s->cells[c * FG_LAYOUT_MAX_TARGETS];
		long ok = 0;
		int fails = 0;

		if ((rc = judge(&b, &s->cands[c], &trials[s->cands[c].trial], targets, n, row, err)))
			goto out;
		for (size_t t = 0; t < n; t++) {
			if (s->base_cells[t].fit == FG_FIT_TRUNK)
				continue;
			ok += row[t].fit == FG_FIT_OK;
			fails |= row[t].fit == FG_FIT_FAILS;
		}
		if (!fails && ok > best_ok) {
			best_ok = ok;
			best = c;
		}
	}
	if (best_ok < 0) {
		rc = conflict(s, trials, experts, targets, n, out, err);
		goto out;
	}
	{
		const struct cand *cd = &s->cands[best];
		struct trial *tr = &trials[cd->trial];
		size_t n_conflict = out->n_conflict;

		cand_layout(&b, cd, tr, targets, n, out);
		out->n_conflict = n_conflict;
		out->n_targets = n;
		for (size_t t = 0; t < n; t++) {
			out->targets[t] = targets[t];
			out->fit[t] = s->base_cells[t].fit == FG_FIT_TRUNK ? FG_FIT_TRUNK
										 : s->cells[best * FG_LAYOUT_MAX_TARGETS + t].fit;
		}
		*plan = tr->plan;
		tr->moved = 1;
	}
out:
	for (size_t t = 0; t < n_trials; t++)
		trial_release(&trials[t]);
	base_release(&b);
	if (s)
		free(s->cells);
	free(s);
	return rc;
}

int fg_layout_judge(const struct fg_inspect *src, const struct fg_inspect *bb,
		    const struct fg_runtime *const *targets, size_t n, const struct fg_plan_opts *opts,
		    const struct fg_layout *l,
		    enum fg_layout_fit *fits, char (*reasons)[FG_LAYOUT_REASON_MAX], struct fg_err *err)
{
	struct verdict_cell *cells = calloc(n ? n : 1, sizeof(*cells));
	struct trial tr;
	struct base b;
	struct cand cd = { .place = l->place, .file = l->file, .trial = 0 };
	struct fg_plan_spec spec = l->spec;
	int rc;

	memset(&tr, 0, sizeof(tr));
	memset(&b, 0, sizeof(b));
	if (!cells)
		return fg_err_set(err, FG_ENOMEM, "out of memory judging layouts");
	spec.rows = targets;
	spec.n_rows = n;
	rc = base_build(&b, bb, targets, n, err);
	if (!rc)
		rc = trial_build(&tr, src, &spec, opts, err);
	if (!rc && tr.rc) {
		rc = tr.rc;
		if (err)
			*err = tr.err;
	}
	if (!rc)
		rc = judge(&b, &cd, &tr, targets, n, cells, err);
	for (size_t t = 0; !rc && t < n; t++) {
		fits[t] = cells[t].fit;
		snprintf(reasons[t], FG_LAYOUT_REASON_MAX, "%s", cells[t].reason);
	}
	trial_release(&tr);
	base_release(&b);
	free(cells);
	return rc;
}

/* ---- what the writer writes ---- */

int fg_layout_patch_config(const struct fg_layout *l, cJSON *cfg, struct fg_err *err)
{
	cJSON *extra;

	cJSON_DeleteItemFromObjectCaseSensitive(cfg, "mlx_lm_extra_tensors");
	cJSON_DeleteItemFromObjectCaseSensitive(cfg, "mtp_norm_encoding");
	cJSON_DeleteItemFromObjectCaseSensitive(cfg, "mtplx_mtp_norm_encoding");
	if (l->pointer) {
		extra = cJSON_AddObjectToObject(cfg, "mlx_lm_extra_tensors");
		if (!extra || !cJSON_AddStringToObject(extra, "mtp_file", l->file))
			return fg_err_set(err, FG_ENOMEM, "out of memory patching config.json");
	}
	if (l->encoding && !cJSON_AddStringToObject(cfg, "mtp_norm_encoding", l->encoding))
		return fg_err_set(err, FG_ENOMEM, "out of memory patching config.json");
	if (l->norm_convention) {
		cJSON_DeleteItemFromObjectCaseSensitive(cfg, "norm_convention");
		if (!cJSON_AddStringToObject(cfg, "norm_convention", "mlx"))
			return fg_err_set(err, FG_ENOMEM, "out of memory patching config.json");
	}
	return 0;
}

cJSON *fg_layout_manifest(const struct fg_layout *l, const struct fg_plan *plan)
{
	cJSON *doc, *keys;

	if (!l->manifest)
		return NULL;
	doc = cJSON_CreateObject();
	if (!doc || !cJSON_AddNumberToObject(doc, "artifact_schema_version", 1) ||
	    !cJSON_AddStringToObject(doc, "rmsnorm_weight_format", "mlx_gamma") ||
	    !(keys = cJSON_AddArrayToObject(doc, "weight_keys"))) {
		cJSON_Delete(doc);
		return NULL;
	}
	for (size_t i = 0; i < plan->n; i++) {
		cJSON *k;

		if (plan->t[i].hidden)
			continue;
		if (!(k = cJSON_CreateString(plan->t[i].name)) || !cJSON_AddItemToArray(keys, k)) {
			cJSON_Delete(k);
			cJSON_Delete(doc);
			return NULL;
		}
	}
	return doc;
}

const char *fg_layout_manifest_path(const struct fg_layout *l, char *buf, size_t len)
{
	const char *slash = strrchr(l->file, '/');

	if (!l->manifest || !slash)
		return NULL;
	snprintf(buf, len, "%.*s/manifest.json", (int)(slash - l->file), l->file);
	return buf;
}

cJSON *fg_layout_json(const struct fg_layout *l)
{
	cJSON *o = cJSON_CreateObject(), *targets;
	char mpath[96];
	const char *mp = fg_layout_manifest_path(l, mpath, sizeof(mpath));
	int bad = !o;

	bad = bad || !cJSON_AddStringToObject(o, "place", l->place == FG_PLACE_EMBEDDED ? "embedded" : "sidecar");
	bad = bad || !cJSON_AddStringToObject(o, "file", l->file);
	bad = bad || !cJSON_AddBoolToObject(o, "pointer", l->pointer);
	bad = bad || !cJSON_AddStringToObject(o, "convention", l->encoding ? l->encoding : "plain");
	bad = bad || !(l->experts ? cJSON_AddStringToObject(o, "experts", l->spec.restack ? "switch_mlp" : "as_source")
				  : cJSON_AddNullToObject(o, "experts"));
	bad = bad || !(l->encoding ? cJSON_AddStringToObject(o, "encoding", l->encoding) : cJSON_AddNullToObject(o, "encoding"));
	bad = bad || !(mp ? cJSON_AddStringToObject(o, "manifest", mp) : cJSON_AddNullToObject(o, "manifest"));
	bad = bad || !(l->norm_convention ? cJSON_AddStringToObject(o, "norm_convention", "mlx")
					  : cJSON_AddNullToObject(o, "norm_convention"));
	bad = bad || !cJSON_AddBoolToObject(o, "index", l->index);
	bad = bad || !(targets = cJSON_AddArrayToObject(o, "targets"));
	for (size_t t = 0; !bad && t < l->n_targets; t++) {
		cJSON *e = cJSON_CreateObject();

		bad = !e || !cJSON_AddItemToArray(targets, e) || !cJSON_AddStringToObject(e, "runtime", l->targets[t]->id) ||
		      !cJSON_AddStringToObject(e, "fit", fg_layout_fit_name(l->fit[t]));
	}
	if (bad) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}
