/*
 * inspect.c: assembles the inspect report (inspect.h).
 *
 * Order of work: recognise the family; find the head by the extraction order
 * of docs/domain.md section 1 (prefix keys, then appended layers, then
 * mtp_layers) over every file's header; build the tensor sets; measure and
 * decide each set once; record the structure; simulate the runtimes; derive
 * verdicts.  Only headers and norm tensors are read, so a 400 GB checkpoint
 * costs a few MB of I/O.
 */
#include "forge/model/inspect.h"
#include "forge/model/mtplx.h"

#include "forge/core/fs.h"
#include "forge/core/json.h"
#include "forge/core/str.h"
#include "forge/model/experts.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEGENERATE_SAMPLE 4096 /* bytes of each head tensor checked for a non-zero */

/* "language_model.model.layers.3.self_attn.q_norm.weight" -> "layers.3.self_attn.q_norm" */
static const char *short_name(const char *name, char *buf, size_t len)
{
	const char *s = fg_name_strip(name);
	size_t n = strlen(s);

	if (fg_str_ends_with(s, ".weight"))
		n -= 7;
	snprintf(buf, len, "%.*s", (int)n, s);
	return buf;
}

static int is_sidecar_only(const struct fg_ckpt_file *f)
{
	return f->sidecar && !f->globbed && !f->in_index;
}

static long config_long(const cJSON *cfg, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);

	return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e6 ? (long)v->valuedouble : -1;
}

/*
 * Without num_hidden_layers, an appended head still shows itself: the lowest
 * layer holding eh_proj, enorm or hnorm is the first head layer.  -1 if none.
 */
static long appended_head_layer(const struct fg_ckpt *c)
{
	static const char *const marks[] = { ".eh_proj.weight", ".enorm.weight", ".hnorm.weight" };
	long first = -1;

	for (size_t i = 0; i < c->n_files; i++) {
		for (size_t k = 0; k < c->files[i].st->n_tensors; k++) {
			const char *name = c->files[i].st->tensors[k].name;
			long layer;

			for (size_t m = 0; m < sizeof(marks) / sizeof(marks[0]); m++) {
				if (!fg_str_ends_with(name, marks[m]) || strncmp(fg_name_strip(name), "layers.", 7) != 0)
					continue;
				layer = fg_name_layer(name);
				if (layer >= 0 && (first < 0 || layer < first))
					first = layer;
			}
		}
	}
	return first;
}

/* The head's scheme by the extraction order: prefix, appended, mtp_layers. */
static enum fg_name_scheme choose_scheme(const struct fg_inspect *r)
{
	size_t count[4] = { 0 };
	const struct fg_ckpt *c = r->ckpt;

	for (size_t i = 0; i < c->n_files; i++)
		for (size_t k = 0; k < c->files[i].st->n_tensors; k++)
			count[(c->files[i].st->tensors[k].facts & FG_FACT_SCHEME) >> FG_FACT_SCHEME_SH]++;
	if (count[FG_SCHEME_PREFIX])
		return FG_SCHEME_PREFIX;
	if (count[FG_SCHEME_APPENDED])
		return FG_SCHEME_APPENDED;
	if (count[FG_SCHEME_MTP_LAYERS])
		return FG_SCHEME_MTP_LAYERS;
	return FG_SCHEME_NONE;
}

int fg_inspect_is_head(const struct fg_inspect *r, const struct fg_ckpt_file *f, const char *name)
{
	if (is_sidecar_only(f))
		return 1;
	return r->scheme != FG_SCHEME_NONE && fg_name_head_scheme(name, r->n_layers, NULL) == r->scheme;
}

/*
 * The FG_XL_* layout one expert tensor shows (runtimes.h), 0 for any other
 * tensor: numbered experts.{e}.*, fused experts.gate_up_proj oriented by the
 * hidden size ([E,2I,H] linear, [E,H,2I] bmm; a square or unknown one says
 * nothing), MLX-stacked switch_mlp.*.
 */
unsigned fg_inspect_expert_layout(const struct fg_tensor *t, const struct fg_expert_dims *d)
{
	uint64_t a, b, h;

	/* What the name says is a parse-time fact (names.h): no name is searched again. */
	switch (fg_name_expert_kind(t)) {
	case FG_EXPERT_NUMBERED:
		return FG_XL_NUMBERED;
	case FG_EXPERT_SWITCH_MLP:
		return FG_XL_SWITCH_MLP;
	case FG_EXPERT_GATE_UP:
		break;
	default:
		return 0;
	}
	if (t->rank != 3 || d->hidden <= 0)
		return 0;
	a = t->shape[1];
	b = t->shape[2];
	h = (uint64_t)d->hidden;
	if (b == h && a != h)
		return FG_XL_FUSED_LINEAR;
	if (a == h && b != h)
		return FG_XL_FUSED_BMM;
	return 0;
}

#define NO_FILE (-1) /* a file index that names no file */

/* The file index of name in c->files (name is one of those pointers, or the same text); NO_FILE if none. */
static int file_index(const struct fg_ckpt *c, const char *name, int *last)
{
	if (*last >= 0 && (size_t)*last < c->n_files &&
	    (c->files[*last].name == name || strcmp(c->files[*last].name, name) == 0))
		return *last;
	for (size_t i = 0; i < c->n_files; i++) {
		if (c->files[i].name == name || strcmp(c->files[i].name, name) == 0) {
			*last = (int)i;
			return (int)i;
		}
	}
	return NO_FILE;
}

/* Per-file counts of the index's disagreements (what ollama --experimental and llama.cpp refuse). */
static void scan_mismatch(struct fg_inspect *r)
{
	const struct fg_ckpt *c = r->ckpt;
	int last = -1;

	for (size_t m = 0; m < c->n_mismatch; m++) {
		const struct fg_index_mismatch *mm = &c->mismatch[m];
		int i = mm->file ? file_index(c, mm->file, &last) : -1;

		if (i < 0)
			continue;
		switch (mm->problem) {
		case FG_INDEX_MISSING:
			r->facts[i].index_missing++;
			break;
		case FG_INDEX_UNLISTED:
			r->facts[i].unlisted++;
			r->facts[i].unlisted_mtp_keys += strstr(mm->tensor, "mtp.") != NULL;
			break;
		case FG_INDEX_WRONG_FILE:
			r->facts[i].wrong_file++;
			break;
		}
	}
}

/* fg_inspect_is_head for a tensor of the checkpoint, by its parse-time facts. */
static int is_head_t(const struct fg_inspect *r, const struct fg_ckpt_file *f, const struct fg_tensor *t)
{
	if (is_sidecar_only(f))
		return 1;
	return r->scheme != FG_SCHEME_NONE &&
	       (enum fg_name_scheme)((t->facts & FG_FACT_SCHEME) >> FG_FACT_SCHEME_SH) == r->scheme;
}

static void scan_structure(struct fg_inspect *r)
{
	const struct fg_ckpt *c = r->ckpt;
	static const char *const enc_keys[] = { "mtp_norm_encoding", "mtplx_mtp_norm_encoding" };
	struct fg_expert_dims dims;

	fg_experts_dims(c->config, &dims);
	for (size_t i = 0; i < c->n_files; i++) {
		const struct fg_ckpt_file *f = &c->files[i];
		const char *fmt = fg_st_meta(f->st, "format");
		struct fg_file_facts *ff = &r->facts[i];

		if (!is_sidecar_only(f) && fmt && strcmp(fmt, "mlx") == 0)
			r->structure.format_mlx = 1;
		for (size_t k = 0; k < f->st->n_tensors; k++) {
			const struct fg_tensor *t = &f->st->tensors[k];
			int head = is_head_t(r, f, t);

			if (t->facts & FG_FACT_MTP_KEY)
				ff->mtp_keys++;
			if (head)
				ff->head_tensors++;
			if (is_sidecar_only(f))
				continue;
			if (!head)
				r->trunk_experts |= fg_inspect_expert_layout(t, &dims);
			/* MLX quantization stores a U32 .weight: GPTQ's .scales beside an I32 qweight is no MLX layout */
			if (t->dtype == FG_DT_U32 && fg_str_ends_with(t->name, ".weight"))
				r->structure.quantized = 1;
			if (!(t->facts & FG_FACT_CONV1D))
				continue;
			/* mlx-lm's test: the last dimension is not 1, at any rank */
			if (t->rank >= 1 && t->shape[t->rank - 1] != 1) {
				ff->conv1d_last_not_1 = 1;
				ff->conv1d_not_3d |= t->rank != 3;
			}
			if (t->rank == 3) {
				if (t->shape[1] == 1 && t->shape[2] > 1) {
					ff->raw_conv1d = 1;
					r->structure.conv1d = "hf";
				} else if (t->shape[2] == 1 && t->shape[1] > 1 && !r->structure.conv1d) {
					r->structure.conv1d = "mlx";
				}
			}
		}
	}
	scan_mismatch(r);
	for (size_t i = 0; i < sizeof(enc_keys) / sizeof(enc_keys[0]) && !r->structure.declared; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->config, enc_keys[i]);

		if (cJSON_IsString(v)) {
			r->structure.declared = v->valuestring;
			r->structure.declared_key = enc_keys[i];
		}
	}
	if (r->structure.conv1d)
		r->layout = r->structure.conv1d;
	else if (r->structure.format_mlx || r->structure.quantized)
		r->layout = "mlx";
	else if (c->n_files)
		r->layout = "hf";
	else
		r->layout = "unknown";
}

/* The next set, called name; its index, or FG_ENOMEM. */
static int new_set(struct fg_inspect *r, const char *name, enum fg_set_role role, const char *file,
		   struct fg_err *err)
{
	size_t i = r->n_sets;
	int rc = fg_tset_init(&r->sets[i].set, name, err);

	if (rc)
		return rc;
	r->n_sets++;
	r->sets[i].set.file = file;
	r->sets[i].role = role;
	return (int)i;
}

/*
 * The norm tensors' bytes are all an inspection reads (plus a peek at the
 * head, and a head's compressed-tensors weight_shape pairs): read with pread
 * (local) or fetched (remote), at most FG_NORM_MAX_ELEMS elements per norm
 * (a larger one is never read and is reported as malformed) and
 * FG_INSPECT_READ_MAX bytes in all.
 */
static int fetch_norms(struct fg_inspect *r, struct fg_err *err)
{
	const struct fg_tensor **want;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	int rc;

	for (size_t s = 0; s < r->n_sets; s++)
		cap += r->sets[s].set.n_tensors;
	want = calloc(cap ? cap : 1, sizeof(*want));
	if (!want)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (size_t s = 0; s < r->n_sets; s++)
		for (size_t i = 0; i < r->sets[s].set.n_tensors; i++) {
			const struct fg_tensor *t = r->sets[s].set.tensors[i];
			/* a head's compressed-tensors weight_shape (two integers) gives its dequantized shape */
			int shape = r->sets[s].role != FG_ROLE_TRUNK && t->rank == 1 && fg_tensor_nelem(t) <= 8 &&
				    fg_str_ends_with(t->name, ".weight_shape");

			if (!shape && (t->rank != 1 || fg_tensor_nelem(t) > FG_NORM_MAX_ELEMS || !fg_dtype_is_float(t->dtype) ||
				       fg_tensor_norm_class(t) == FG_NAME_NOT_NORM))
				continue;
			want[n++] = t;
			total += fg_tensor_bytes(t);
		}
	if (total > r->read_cap) {
		free(want);
		return fg_err_set(err, FG_EINPUT,
				  "%s: its %zu norm tensors hold %llu bytes, over the %llu bytes an inspection reads",
				  r->ckpt->source, n, (unsigned long long)total, (unsigned long long)r->read_cap);
	}
	rc = fg_ckpt_fetch(r->ckpt, want, n, err);
	free(want);
	return rc;
}

/*
 * The checkpoint's quantization config: config.json (quantization,
 * quantization_config, text_config's), ModelOpt's hf_quant_config.json and
 * the legacy quantize_config.json / quant_config.json beside it (local
 * folders only).  A config that does not parse is kept as a message: the
 * modules it would describe are then not read, and a forge refuses them.
 */
static void load_qconfig(struct fg_inspect *r)
{
	static const char *const files[][2] = { { "hf_quant_config.json", NULL },
						{ "quantize_config.json", "quant_config.json" } };
	const struct fg_ckpt *c = r->ckpt;
	struct fg_qconfig_src src = { .config = c->config_raw };
	struct fg_err err = { 0 };

	for (size_t i = 0; i < 2 && !c->pull && !c->single_file; i++) {
		for (size_t k = 0; k < 2 && files[i][k] && !r->qconfig_docs[i]; k++) {
			char label[PATH_MAX];
			int fd = -1, rc = fg_ckpt_open_file(c, files[i][k], &fd);

			if (rc == -ENOENT)
				continue;
			/* opened beneath the folder as config.json is: no links, a regular file, capped */
			snprintf(label, sizeof(label), "%s/%s", c->dir, files[i][k]);
			if (rc) {
				rc = fg_err_set(&err, FG_EINPUT, "%s: cannot open: %s", label, fg_fs_open_why(rc));
			} else {
				rc = fg_json_load_fd(&r->qconfig_docs[i], fd, label, FG_CKPT_CONFIG_MAX,
						     FG_CKPT_CONFIG_NODES, &err);
				close(fd);
			}
			if (rc) {
				snprintf(r->qconfig_error, sizeof(r->qconfig_error), "%s", err.msg);
				return;
			}
		}
	}
	src.hf_quant_config = r->qconfig_docs[0];
	src.quantize_config = r->qconfig_docs[1];
	if (fg_qconfig_parse(&r->qconfig, &src, &err) == 0)
		r->qconfig_ok = 1;
	else
		snprintf(r->qconfig_error, sizeof(r->qconfig_error), "%s", err.msg);
}

/* What reading the trunk takes: its quantized modules grouped by format (runtimes.h's needs). */
static int trunk_formats(struct fg_inspect *r)
{
	const struct fg_qmods *q = &fg_inspect_trunk(r)->qmods;

	r->n_trunk_formats = 0;
	for (size_t i = 0; i < q->n; i++) {
		const struct fg_qmod *m = &q->v[i];
		struct fg_format_need need = { 0 };
		size_t k;

		/* A module forged cannot read says nothing of what a runtime reads: not modelled here. */
		if (m->rc || m->f.kind == FG_QF_DENSE)
			continue;
		need.any_of = fg_runtime_format_bits(&m->f, m->m.t[FG_QR_G_IDX] != NULL,
						     m->m.t[FG_QR_WEIGHT_SCALE_INV] != NULL, &need.fp8_block);
		fg_qmod_name(m, need.name, sizeof(need.name));
		for (k = 0; k < r->n_trunk_formats; k++)
			if (r->trunk_formats[k].any_of == need.any_of && strcmp(r->trunk_formats[k].name, need.name) == 0)
				break;
		if (k < r->n_trunk_formats) {
			r->trunk_formats[k].modules++;
			continue;
		}
		if (r->n_trunk_formats == FG_INSPECT_MAX_FORMATS)
			continue;
		need.example = m->name;
		need.modules = 1;
		r->trunk_formats[r->n_trunk_formats++] = need;
	}
	return 0;
}

static int build_sets(struct fg_inspect *r, struct fg_err *err)
{
	const struct fg_ckpt *c = r->ckpt;
	int trunk = new_set(r, "trunk", FG_ROLE_TRUNK, NULL, err);
	int embedded = trunk < 0 ? trunk : new_set(r, c->sidecar >= 0 ? "mtp_embedded" : "mtp",
						   FG_ROLE_EMBEDDED_HEAD, NULL, err);
	struct fg_expert_dims dims;
	int rc;

	if (embedded < 0)
		return embedded;

	for (size_t i = 0; i < c->n_files; i++) {
		const struct fg_ckpt_file *f = &c->files[i];

		if (is_sidecar_only(f))
			continue;
		for (size_t k = 0; k < f->st->n_tensors; k++) {
			const struct fg_tensor *t = &f->st->tensors[k];
			int head = is_head_t(r, f, t);

			rc = fg_tset_add(&r->sets[head ? embedded : trunk].set, t, f->name, err);
			if (rc)
				return rc;
		}
	}
	for (size_t i = 0; i < c->n_files; i++) {
		const struct fg_ckpt_file *f = &c->files[i];
		char *name = NULL;
		int s;

		if (!f->sidecar || r->n_sets == FG_INSPECT_MAX_SETS)
			continue;
		/* The whole file name: two sidecars are two sets, however long a prefix they share. */
		if ((int)i != c->sidecar && asprintf(&name, "sidecar:%s", f->name) < 0)
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		s = new_set(r, name ? name : "mtp", FG_ROLE_SIDECAR_HEAD, f->name, err);
		free(name);
		if (s < 0)
			return s;
		for (size_t k = 0; k < f->st->n_tensors; k++) {
			if (!is_head_t(r, f, &f->st->tensors[k]))
				continue;
			rc = fg_tset_add(&r->sets[s].set, &f->st->tensors[k], f->name, err);
			if (rc)
				return rc;
		}
	}
	/* An empty embedded head is no set when a sidecar holds the head; else it
	 * stays as an empty "mtp" set so every report has one. */
	if (r->sets[embedded].set.n_tensors == 0 && c->sidecar >= 0) {
		fg_tset_release(&r->sets[embedded].set);
		memmove(&r->sets[embedded], &r->sets[embedded + 1],
			(r->n_sets - (size_t)embedded - 1) * sizeof(r->sets[0]));
		r->n_sets--;
	}
	assert(trunk == 0 && r->sets[0].role == FG_ROLE_TRUNK); /* fg_inspect_trunk relies on it */
	rc = fetch_norms(r, err);
	if (rc)
		return rc;
	fg_experts_dims(r->ckpt->config, &dims);
	for (size_t i = 0; i < r->n_sets; i++) {
		struct fg_set_report *s = &r->sets[i];

		rc = fg_tset_measure(&s->set, err);
		if (rc)
			return rc;
		fg_conv_decide(&s->set, r->family->norm_style, &s->decision);
		if (s->role != FG_ROLE_TRUNK &&
		    (rc = fg_experts_scan(&s->set, &dims, s->experts, FG_EXPERTS_MAX_BLOCKS, &s->n_experts, err)))
			return rc;
		rc = fg_qmods_scan(&s->set, r->qconfig_ok ? &r->qconfig : NULL, r->qconfig_error,
				   s->role != FG_ROLE_TRUNK, &s->qmods, err);
		if (rc)
			return rc;
		s->set.n_quantized = fg_qmods_quantized(&s->qmods);
	}
	return trunk_formats(r);
}

/* Which trunk norms the mlx-lm suffixes shift start "language_model." (mlx-vlm shifts the others). */
static int trunk_prefixed(const struct fg_tset *trunk)
{
	size_t yes = 0, no = 0;

	for (size_t i = 0; i < trunk->n_norms; i++) {
		if (!fg_name_mlx_shifted(trunk->norms[i].t->name))
			continue;
		if (strncmp(trunk->norms[i].t->name, "language_model.", 15) == 0)
			yes++;
		else
			no++;
	}
	return no == 0 ? 1 : yes == 0 ? 0 : -1;
}

/* vllm-mlx's manifest.json beside a sidecar (local checkpoints only; a bad one counts as none). */
static cJSON *sibling_manifest(const struct fg_ckpt *c, const struct fg_ckpt_file *f)
{
	char path[4096];
	const char *slash = strrchr(f->path, '/');
	struct fg_err err = { 0 };
	cJSON *doc = NULL;
	int n;

	if (c->pull || c->single_file)
		return NULL;
	n = slash ? snprintf(path, sizeof(path), "%.*s/manifest.json", (int)(slash - f->path), f->path)
		  : snprintf(path, sizeof(path), "manifest.json");
	if (n < 0 || (size_t)n >= sizeof(path) || access(path, R_OK) != 0)
		return NULL;
	if (fg_json_load(&doc, path, 1u << 20, &err) != 0)
		return NULL;
	return doc;
}

/*
 * MTPLX's runtime contract beside a local checkpoint's config.json
 * (mtplx.h): read whole, summarised in the report; a file that is there but
 * unreadable is reported, never fatal (MTPLX itself then runs without it).
 */
static void read_mtplx_runtime(struct fg_inspect *r)
{
	const struct fg_ckpt *c = r->ckpt;
	struct fg_err err = { 0 };
	char label[4096];
	int fd = -1, rc;

	if (c->pull || c->single_file)
		return;
	/* Opened beneath the folder like every checkpoint file (no link out of it, a regular file only). */
	rc = fg_ckpt_open_file(c, FG_MTPLX_RUNTIME_FILE, &fd);
	if (rc == -ENOENT)
		return;
	snprintf(label, sizeof(label), "%s/%s", c->dir, FG_MTPLX_RUNTIME_FILE);
	if (rc) {
		snprintf(r->mtplx_runtime_error, sizeof(r->mtplx_runtime_error), "%.400s: %s", label, fg_fs_open_why(rc));
		return;
	}
	if (fg_json_load_fd(&r->mtplx_runtime, fd, label, FG_MTPLX_RUNTIME_MAX, FG_MTPLX_RUNTIME_NODES, &err) != 0)
		snprintf(r->mtplx_runtime_error, sizeof(r->mtplx_runtime_error), "%s", err.msg);
	close(fd);
}

/*
 * unl[k] = 1 for each tensor of set the index does not list: the unlisted
 * names sorted once and each tensor looked up (a scan of the set per
 * mismatch took 3.7 s for a 30,000-tensor head its index left out).
 * 0, or FG_ENOMEM.
 */
static int mark_unlisted(const struct fg_ckpt *c, const struct fg_tset *set, unsigned char *unl)
{
	const char **names = malloc(c->n_mismatch * sizeof(*names));
	size_t n = 0;

	if (!names)
		return FG_ENOMEM;
	for (size_t m = 0; m < c->n_mismatch; m++)
		if (c->mismatch[m].problem == FG_INDEX_UNLISTED)
			names[n++] = c->mismatch[m].tensor;
	qsort(names, n, sizeof(*names), fg_strcmp_ptr);
	for (size_t k = 0; k < set->n_tensors && n; k++)
		unl[k] = bsearch(&set->tensors[k]->name, names, n, sizeof(*names), fg_strcmp_ptr) != NULL;
	free(names);
	return 0;
}

/* What the simulation reads of each head set: files, unlisted tensors, expert layouts, manifests. */
static int build_head_inputs(struct fg_inspect *r, struct fg_err *err)
{
	const struct fg_ckpt *c = r->ckpt;
	const cJSON *extra = cJSON_GetObjectItemCaseSensitive(c->config_raw, "mlx_lm_extra_tensors");
	const cJSON *ptr = cJSON_GetObjectItemCaseSensitive(extra, "mtp_file");
	struct fg_expert_dims dims;
	int last = -1;

	fg_experts_dims(c->config, &dims);
	r->trunk_keys_prefixed = trunk_prefixed(&fg_inspect_trunk(r)->set);
	r->pointer_file = cJSON_IsString(ptr) ? file_index(c, ptr->valuestring, &last) : -1;
	for (size_t s = 0; s < r->n_sets; s++) {
		struct fg_set_report *sr = &r->sets[s];
		struct fg_head_input *h = &r->heads_in[s];
		int *tf;
		unsigned char *unl = NULL;

		if (sr->role == FG_ROLE_TRUNK)
			continue;
		h->set = &sr->set;
		h->decision = &sr->decision;
		h->qmods = &sr->qmods;
		h->file = sr->role == FG_ROLE_SIDECAR_HEAD && sr->set.file ? file_index(c, sr->set.file, &last) : -1;
		tf = calloc(sr->set.n_tensors ? sr->set.n_tensors : 1, sizeof(*tf));
		if (!tf)
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		h->tensor_file = tf;
		for (size_t k = 0; k < sr->set.n_tensors; k++) {
			tf[k] = file_index(c, fg_tset_file(&sr->set, k), &last);
			h->experts |= fg_inspect_expert_layout(sr->set.tensors[k], &dims);
		}
		if (sr->role == FG_ROLE_EMBEDDED_HEAD && c->n_mismatch && sr->set.n_tensors) {
			unl = calloc(sr->set.n_tensors, 1);
			if (!unl)
				return fg_err_set(err, FG_ENOMEM, "out of memory");
			h->unlisted = unl;
			if (mark_unlisted(c, &sr->set, unl))
				return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
		if (h->file >= 0 && c->files[h->file].sidecar)
			h->manifest = r->manifests[s] = sibling_manifest(c, &c->files[h->file]);
	}
	return 0;
}

/* ---- names held by two files ---- */

#define DUPS_KEPT 256           /* duplicate names recorded (the verdict names a few) */
#define DUP_COMPARE_MAX (16u << 20) /* copies compared byte for byte up to this size */

struct dup_slot {
	const char *name;
	const struct fg_tensor *t;
	int file;
};

static uint64_t hash_name(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s) {
		h ^= (uint8_t)*s++;
		h *= 1099511628211ull;
	}
	return h;
}

/* 1 when two copies of a name may load differently (or cannot be compared). */
static int copies_differ(const struct fg_tensor *a, const struct fg_tensor *b)
{
	uint64_t n = fg_tensor_bytes(a);

	if (a->dtype != b->dtype || a->rank != b->rank || n != fg_tensor_bytes(b))
		return 1;
	for (int i = 0; i < a->rank; i++)
		if (a->shape[i] != b->shape[i])
			return 1;
	if (!n)
		return 0;
	if (!a->data || !b->data || n > DUP_COMPARE_MAX)
		return 1;
	return memcmp(a->data, b->data, (size_t)n) != 0;
}

/*
 * Names held by two files.  A complete index already proves its shards
 * hold each name once, so the table is built only without an index or
 * when the index and the headers disagree.
 */
static int find_dups(struct fg_inspect *r, struct fg_err *err)
{
	const struct fg_ckpt *c = r->ckpt;
	size_t total = 0, n_slots = 16, mask;
	struct dup_slot *slots;

	if (c->n_files < 2 || (c->index && !c->n_mismatch))
		return 0;
	for (size_t i = 0; i < c->n_files; i++)
		total += c->files[i].st->n_tensors;
	while (n_slots < 2 * total + 2)
		n_slots <<= 1;
	mask = n_slots - 1;
	slots = calloc(n_slots, sizeof(*slots));
	r->dups = calloc(DUPS_KEPT, sizeof(*r->dups));
	if (!slots || !r->dups) {
		free(slots);
		return fg_err_set(err, FG_ENOMEM, "out of memory looking for duplicate names");
	}
	for (size_t i = 0; i < c->n_files; i++) {
		const struct fg_st_file *st = c->files[i].st;

		for (size_t k = 0; k < st->n_tensors; k++) {
			const struct fg_tensor *t = &st->tensors[k];
			size_t h = (size_t)hash_name(t->name) & mask;

			while (slots[h].name && strcmp(slots[h].name, t->name) != 0)
				h = (h + 1) & mask;
			if (!slots[h].name) {
				slots[h] = (struct dup_slot){ t->name, t, (int)i };
				continue;
			}
			if (r->n_dups == DUPS_KEPT)
				continue;
			r->dups[r->n_dups++] = (struct fg_dup_input){ t->name, slots[h].file, (int)i,
								      copies_differ(slots[h].t, t) };
		}
	}
	free(slots);
	return 0;
}

static int set_index(const struct fg_inspect *r, enum fg_set_role role, int selected_sidecar)
{
	for (size_t i = 0; i < r->n_sets; i++) {
		if (r->sets[i].role != role)
			continue;
		if (role != FG_ROLE_SIDECAR_HEAD || !selected_sidecar || strcmp(r->sets[i].set.name, "mtp") == 0)
			return (int)i;
	}
	return FG_INSPECT_NO_SET;
}

/* As set_index, but only a set that holds tensors is a head. */
static int head_set(const struct fg_inspect *r, enum fg_set_role role, int selected_sidecar)
{
	int i = set_index(r, role, selected_sidecar);

	return i >= 0 && r->sets[i].set.n_tensors ? i : FG_INSPECT_NO_SET;
}

static void locate_head(struct fg_inspect *r)
{
	int emb = head_set(r, FG_ROLE_EMBEDDED_HEAD, 0);
	int side = head_set(r, FG_ROLE_SIDECAR_HEAD, 1);

	r->declared_mtp = fg_family_declared_mtp(r->family, r->ckpt->config);
	r->embedded_head = emb;
	r->location = emb >= 0 ? "embedded" : side >= 0 ? "sidecar" : "none";
	r->primary_head = side >= 0 ? side : emb;
}

void fg_inspect_runtime_input(const struct fg_inspect *r, struct fg_runtime_input *in,
			      struct fg_head_input sidecars[FG_INSPECT_MAX_SETS])
{
	int emb = head_set(r, FG_ROLE_EMBEDDED_HEAD, 0);

	*in = (struct fg_runtime_input){
		.ckpt = r->ckpt, .facts = r->facts, .family = r->family, .style = r->family->norm_style,
		.moe = r->moe, .n_layers = r->n_layers, .pointer_file = r->pointer_file,
		.trunk = &fg_inspect_trunk(r)->decision, .trunk_experts = r->trunk_experts,
		.trunk_keys_prefixed = r->trunk_keys_prefixed, .declared_mtp = r->declared_mtp,
		.embedded = emb >= 0 ? &r->heads_in[emb] : NULL, .sidecars = sidecars,
		.dups = r->dups, .n_dups = r->n_dups,
		.trunk_formats = r->trunk_formats, .n_trunk_formats = r->n_trunk_formats,
	};
	for (size_t i = 0; i < r->n_sets; i++)
		if (r->sets[i].role == FG_ROLE_SIDECAR_HEAD)
			sidecars[in->n_sidecars++] = r->heads_in[i];
}

static int run_runtimes(struct fg_inspect *r, const char *const *ids, size_t n_ids, struct fg_err *err)
{
	struct fg_head_input sidecars[FG_INSPECT_MAX_SETS];
	struct fg_runtime_input in;
	const struct fg_runtime *all;
	size_t n_all;
	/* With no ids, the rows that name this layout in default_for; none (an unknown layout): all. */
	unsigned layout = n_ids ? 0 : fg_runtime_layout_bit(r->layout);

	fg_inspect_runtime_input(r, &in, sidecars);
	all = fg_runtime_all(&n_all);
	for (size_t i = 0; i < n_all && i < FG_INSPECT_MAX_RUNTIMES; i++) {
		struct fg_runtime_result *res = &r->runtimes[r->n_runtimes++];

		fg_runtime_simulate(&all[i], &in, res);
		if (!n_ids)
			res->targeted = (!layout || (all[i].default_for & layout) != 0) && !(all[i].flags & FG_RT_OPT_IN);
	}
	for (size_t k = 0; k < n_ids; k++) {
		const struct fg_runtime *rows[FG_RUNTIME_MAX_ALIAS];
		int by_range = 0;
		size_t n = fg_runtime_resolve(ids[k], rows, &by_range);

		if (!n)
			return fg_err_set(err, FG_EUSAGE, "unknown runtime '%s'", ids[k]);
		for (size_t j = 0; j < n; j++) {
			struct fg_runtime_result *res = &r->runtimes[rows[j] - all];

			res->targeted = 1;
			if (by_range)
				snprintf(res->version_of, sizeof(res->version_of), "%s", ids[k]);
		}
	}
	return 0;
}

/* ---- verdicts ---- */

/* Add a verdict (v points at it) or return the failure: FG_ENOMEM, or FG_EINTERNAL for a code no report may carry. */
#define ADD(code, set, ...) \
	do { if ((rc = fg_verdicts_add(&r->verdicts, code, set, &v, __VA_ARGS__)) != 0) return rc; } while (0)

static int verdict_norm_values(struct fg_inspect *r)
{
	struct fg_verdict *v;
	int rc;
	char sn[160];

	for (size_t s = 0; s < r->n_sets; s++) {
		const struct fg_tset *set = &r->sets[s].set;
		const struct fg_norm *first = NULL;
		size_t bad = 0;

		for (size_t i = 0; i < set->n_norms; i++)
			if (set->norms[i].st.nonfinite && !bad++)
				first = &set->norms[i];
		if (bad) {
			ADD(FG_V_NONFINITE_NORM, set->name, "%zu norm tensor(s) hold NaN or infinity: %s has %llu",
			    bad, short_name(first->t->name, sn, sizeof(sn)),
			    (unsigned long long)first->st.nonfinite);
			for (size_t i = 0; i < set->n_norms; i++)
				if (set->norms[i].st.nonfinite)
					fg_verdict_tensor(v, set->norms[i].t->name);
		}
		if (set->n_bad_norms) {
			ADD(FG_V_MALFORMED_CHECKPOINT, set->name,
			    "%zu norm tensor(s) are not 1-D float vectors of at most %u elements, e.g. %s",
			    set->n_bad_norms, FG_NORM_MAX_ELEMS, short_name(set->bad_norm, sn, sizeof(sn)));
			fg_verdict_tensor(v, set->bad_norm);
		}
	}
	return 0;
}

static int verdict_conventions(struct fg_inspect *r)
{
	struct fg_verdict *v;
	int rc;
	char a[160], b[160];

	for (size_t s = 0; s < r->n_sets; s++) {
		const struct fg_tset *set = &r->sets[s].set;
		const struct fg_decision *d = &r->sets[s].decision;
		int head = r->sets[s].role != FG_ROLE_TRUNK;

		switch (d->conv) {
		case FG_CONV_DOUBLE_SHIFTED:
			ADD(head ? FG_V_HEAD_DOUBLE_SHIFTED : FG_V_TRUNK_DOUBLE_SHIFTED, set->name,
			    "%s mean %.4f is above %.1f on disk: %s already shifted twice",
			    short_name(d->qk_max_norm->t->name, a, sizeof(a)), d->qk_max, FG_QK_DOUBLE_ABOVE,
			    head ? "head" : "trunk");
			fg_verdict_tensor(v, d->qk_max_norm->t->name);
			break;
		case FG_CONV_MIXED:
			ADD(FG_V_MIXED_CONVENTION, set->name,
			    "q/k norms on both sides of %.2f: %s mean %.4f, %s mean %.4f (a partial shift)",
			    FG_QK_ABSOLUTE_MIN, short_name(d->qk_min_norm->t->name, a, sizeof(a)), d->qk_min,
			    short_name(d->qk_max_norm->t->name, b, sizeof(b)), d->qk_max);
			fg_verdict_tensor(v, d->qk_min_norm->t->name);
			fg_verdict_tensor(v, d->qk_max_norm->t->name);
			break;
		case FG_CONV_NO_EVIDENCE:
			if (r->family->norm_style != FG_STYLE_ZERO_CENTRED)
				break;
			ADD(FG_V_NO_CONVENTION_EVIDENCE, set->name,
			    "%zu norm tensor(s) but no q/k or low-set norm: nothing decides delta or absolute",
			    set->n_norms);
			break;
		default:
			break;
		}
	}
	return 0;
}

/* Structure (conv1d layout, declared encoding) against the decided values. */
static int verdict_structure(struct fg_inspect *r)
{
	const struct fg_decision *trunk = &fg_inspect_trunk(r)->decision;
	const char *conv1d = r->structure.conv1d;
	struct fg_verdict *v;
	int rc;

	if (r->family->norm_style != FG_STYLE_ZERO_CENTRED)
		return 0;
	if (conv1d && ((strcmp(conv1d, "hf") == 0 && trunk->conv == FG_CONV_ABSOLUTE) ||
		       (strcmp(conv1d, "mlx") == 0 && trunk->conv == FG_CONV_DELTA))) {
		ADD(FG_V_CONVENTION_STRUCTURE_MISMATCH, "trunk",
		    "conv1d is in %s layout (%s) but the trunk's norms are %s (q/k max %.4f)",
		    conv1d, strcmp(conv1d, "hf") == 0 ? "raw, unconverted" : "converted",
		    fg_conv_name(trunk->conv), trunk->qk_max);
	}
	if (r->structure.declared && r->primary_head >= 0) {
		const struct fg_decision *h = &r->sets[r->primary_head].decision;
		const char *decided = fg_conv_name(h->conv);

		if ((h->conv == FG_CONV_DELTA || h->conv == FG_CONV_ABSOLUTE) &&
		    strcmp(decided, r->structure.declared) != 0) {
			ADD(FG_V_CONVENTION_STRUCTURE_MISMATCH, r->sets[r->primary_head].set.name,
			    "config.json %s says %s but the head's norms are %s (q/k max %.4f)",
			    r->structure.declared_key, r->structure.declared, decided, h->qk_max);
		}
	}
	return 0;
}

/* The head keys of the shards, named in the hazard verdict. */
static void name_head_keys(const struct fg_inspect *r, struct fg_verdict *v)
{
	const struct fg_ckpt *c = r->ckpt;

	for (size_t i = 0; i < c->n_files; i++) {
		if (!c->files[i].globbed)
			continue;
		for (size_t k = 0; k < c->files[i].st->n_tensors; k++)
			if (c->files[i].st->tensors[k].facts & FG_FACT_MTP_KEY)
				fg_verdict_tensor(v, c->files[i].st->tensors[k].name);
	}
}

/* The verdict at index *at (grown list: indexes survive, pointers may not). */
#define AT(i) (&r->verdicts.v[i])
#define NONE_YET ((size_t)-1)

/* A targeted result whose row models the case: the ones verdicts speak for. */
static bool speaks(const struct fg_runtime_result *rt)
{
	return rt->targeted && rt->modelled;
}

/* The set a result's loaded head belongs to ("mtp" when unknown). */
static const char *head_set_name(const struct fg_runtime_result *rt)
{
	return rt->head_set ? rt->head_set->name : "mtp";
}

/* Trunk verdicts: the +1 the targeted runtimes get wrong. */
static int verdict_trunk_shift(struct fg_inspect *r)
{
	const struct fg_decision *trunk = &fg_inspect_trunk(r)->decision;
	size_t hazard = NONE_YET, missing = NONE_YET, at_load = NONE_YET;
	struct fg_verdict *v;
	int rc;
	char pn[160];

	for (size_t i = 0; i < r->n_runtimes; i++) {
		const struct fg_runtime_result *rt = &r->runtimes[i];
		bool loads = rt->load_cause == FG_LOAD_OK || rt->load_cause == FG_LOAD_GUARD;
		bool double_shift = rt->trunk == FG_TRUNK_DOUBLE_SHIFTED && trunk->conv != FG_CONV_DOUBLE_SHIFTED;

		if (!speaks(rt) || !loads)
			continue;
		if (double_shift && rt->shift_reason == FG_SHIFT_MTP_KEYS) {
			if (hazard == NONE_YET) {
				size_t keys = 0;

				for (size_t f = 0; f < r->ckpt->n_files; f++)
					keys += fg_runtime_reads_file(rt->rt, r->ckpt, f) ? r->facts[f].mtp_keys : 0;
				ADD(FG_V_EMBEDDED_MTP_SHIFT_HAZARD, "trunk",
				    "%zu embedded mtp.* key(s)%s make %s add +1 to an absolute trunk: "
				    "%s mean %.4f becomes %.4f",
				    keys, fg_ckpt_stray_count(r->ckpt) ? " (some in a stray shard)" : "",
				    rt->rt->id, trunk->probe ? short_name(trunk->probe->t->name, pn, sizeof(pn)) : "q_norm",
				    trunk->probe ? trunk->probe->st.mean : 0.0, rt->trunk_probe_after);
				hazard = r->verdicts.n - 1;
				name_head_keys(r, v);
			}
			fg_verdict_runtime(AT(hazard), rt->rt->id);
		} else if (double_shift) {
			if (at_load == NONE_YET) {
				ADD(FG_V_TRUNK_DOUBLE_SHIFT_AT_LOAD, "trunk",
				    "%s adds +1 to the absolute trunk (%s): probe mean %.4f becomes %.4f",
				    rt->rt->id, rt->shift_reason != FG_SHIFT_NONE ? fg_runtime_shift_reason_name(rt->shift_reason)
										 : "1 + w at run time",
				    trunk->probe ? trunk->probe->st.mean : 0.0, rt->trunk_probe_after);
				at_load = r->verdicts.n - 1;
			}
			fg_verdict_runtime(AT(at_load), rt->rt->id);
		}
		if (rt->trunk == FG_TRUNK_MISSING_SHIFT && trunk->conv != FG_CONV_MIXED) {
			if (missing == NONE_YET) {
				ADD(FG_V_TRUNK_MISSING_SHIFT, "trunk",
				    "%s loads the delta trunk without +1: probe mean %.4f stays below %.2f",
				    rt->rt->id, rt->trunk_probe_after, FG_QK_ABSOLUTE_MIN);
				missing = r->verdicts.n - 1;
			}
			fg_verdict_runtime(AT(missing), rt->rt->id);
		}
	}
	if (hazard != NONE_YET) /* name every runtime the keys endanger, targeted or not */
		for (size_t i = 0; i < r->n_runtimes; i++)
			if (r->runtimes[i].modelled && r->runtimes[i].shift_reason == FG_SHIFT_MTP_KEYS &&
			    r->runtimes[i].trunk == FG_TRUNK_DOUBLE_SHIFTED)
				fg_verdict_runtime(AT(hazard), r->runtimes[i].rt->id);
	return 0;
}

/* The verdict of code already raised with this detail key, else NONE_YET. */
static size_t find_group(const struct fg_inspect *r, size_t from, enum fg_verdict_code code, const char *detail)
{
	for (size_t i = from; i < r->verdicts.n; i++)
		if (r->verdicts.v[i].row->code == code && (!detail || strcmp(r->verdicts.v[i].detail, detail) == 0))
			return i;
	return NONE_YET;
}

/* Load errors and silent breakage of the head and experts, one verdict per cause. */
static int verdict_loads(struct fg_inspect *r)
{
	const struct fg_decision *primary = r->primary_head >= 0 ? &r->sets[r->primary_head].decision : NULL;
	size_t from = r->verdicts.n, at;
	struct fg_verdict *v;
	int rc, mismatch = 0;
	char detail[320];

	for (size_t i = 0; i < r->n_runtimes; i++) {
		const struct fg_runtime_result *rt = &r->runtimes[i];
		enum fg_verdict_code code;

		if (!speaks(rt))
			continue;
		if (rt->order_dependent) {
			snprintf(detail, sizeof(detail),
				 "%zu name(s) held by two files with different copies: which copy loads depends on the "
				 "order the folder lists them (e.g. %s)", rt->order_dependent, rt->culprit ? rt->culprit : "?");
			if ((at = find_group(r, from, FG_V_DUPLICATE_TENSOR_ORDER_DEPENDENT, NULL)) == NONE_YET) {
				ADD(FG_V_DUPLICATE_TENSOR_ORDER_DEPENDENT, NULL, "%s", detail);
				at = r->verdicts.n - 1;
				for (size_t d = 0; d < r->n_dups; d++)
					if (r->dups[d].differ)
						fg_verdict_tensor(v, r->dups[d].name);
			}
			fg_verdict_runtime(AT(at), rt->rt->id);
		}
		if (rt->load_cause == FG_LOAD_FORMAT && rt->unread_format) {
			const struct fg_format_need *n = rt->unread_format;

			/* One verdict per format: the runtimes that cannot read it, and how to get a trunk they can. */
			snprintf(detail, sizeof(detail), "the trunk's weights are %s (%zu module(s), e.g. %s), which the "
				 "listed runtimes do not read; forge with --backbone naming a checkpoint they load "
				 "(for MLX runtimes, an MLX conversion)", n->name, n->modules, n->example ? n->example : "?");
			if ((at = find_group(r, from, FG_V_TRUNK_FORMAT_UNSUPPORTED, detail)) == NONE_YET) {
				ADD(FG_V_TRUNK_FORMAT_UNSUPPORTED, "trunk", "%s", detail);
				at = r->verdicts.n - 1;
				if (rt->culprit)
					fg_verdict_tensor(v, rt->culprit);
			}
			fg_verdict_runtime(AT(at), rt->rt->id);
			continue;
		}
		if (rt->load_cause != FG_LOAD_OK && rt->load_cause != FG_LOAD_GUARD) {
			code = rt->load_cause == FG_LOAD_MODEL_TYPE ? FG_V_MODEL_TYPE_UNSUPPORTED : FG_V_RUNTIME_LOAD_ERROR;
			snprintf(detail, sizeof(detail), "the runtime refuses to load it (%s): %s",
				 fg_runtime_load_cause_name(rt->load_cause), rt->load_error);
			if ((at = find_group(r, from, code, detail)) == NONE_YET) {
				ADD(code, NULL, "%s", detail);
				at = r->verdicts.n - 1;
				if (rt->culprit)
					fg_verdict_tensor(v, rt->culprit);
			}
			fg_verdict_runtime(AT(at), rt->rt->id);
			continue;
		}
		if ((rt->breakage & (FG_BREAK_HEAD_INVERTED | FG_BREAK_HEAD_DEGRADED)) && rt->head_set) {
			const struct fg_decision *d = NULL;

			fg_inspect_set(r, head_set_name(rt), &d);
			if (d && (d->conv == FG_CONV_DELTA || d->conv == FG_CONV_ABSOLUTE)) {
				mismatch = 1;
				char qk[32], low[32];

				snprintf(qk, sizeof(qk), d->has_qk ? "%.4f" : "none", d->qk_max);
				snprintf(low, sizeof(low), d->has_low ? "%.4f" : "none", d->low_min);
				snprintf(detail, sizeof(detail), "the %s head loads %s (q/k max %s, low min %s)",
					 fg_conv_name(d->conv), fg_runtime_head_name(rt->head), qk, low);
				if ((at = find_group(r, from, FG_V_HEAD_CONVENTION_MISMATCH, detail)) == NONE_YET) {
					ADD(FG_V_HEAD_CONVENTION_MISMATCH, head_set_name(rt), "%s", detail);
					at = r->verdicts.n - 1;
				}
				fg_verdict_runtime(AT(at), rt->rt->id);
			}
		}
		if (rt->breakage & FG_BREAK_HEAD_UNINITIALIZED) {
			snprintf(detail, sizeof(detail),
				 "the head is bound but %zu of its key(s) are filtered out or skipped (%zu loaded): those "
				 "weights keep their random initial values and nothing errors", rt->head_keys_dropped,
				 rt->head_keys_loaded);
			if ((at = find_group(r, from, FG_V_HEAD_KEYS_NOT_LOADED, detail)) == NONE_YET) {
				ADD(FG_V_HEAD_KEYS_NOT_LOADED, head_set_name(rt), "%s", detail);
				at = r->verdicts.n - 1;
				if (rt->culprit)
					fg_verdict_tensor(v, rt->culprit);
			}
			fg_verdict_runtime(AT(at), rt->rt->id);
		}
		if (rt->breakage & (FG_BREAK_HEAD_EXPERTS | FG_BREAK_TRUNK_EXPERTS)) {
			code = rt->breakage & FG_BREAK_HEAD_EXPERTS ? FG_V_HEAD_EXPERTS_NOT_LOADED : FG_V_TRUNK_EXPERTS_NOT_LOADED;
			snprintf(detail, sizeof(detail),
				 "the %s experts are in a layout the runtime does not stack, and its lenient load skips "
				 "them: the routed experts keep their random initial values",
				 code == FG_V_HEAD_EXPERTS_NOT_LOADED ? "head's" : "trunk's");
			if ((at = find_group(r, from, code, detail)) == NONE_YET) {
				ADD(code, code == FG_V_HEAD_EXPERTS_NOT_LOADED ? head_set_name(rt) : "trunk", "%s", detail);
				at = r->verdicts.n - 1;
			}
			fg_verdict_runtime(AT(at), rt->rt->id);
		}
		if (rt->breakage & FG_BREAK_HEAD_CONTRACT) {
			const struct fg_rt_head *hl = fg_runtime_head_loader(rt->rt, &(struct fg_runtime_input){
				.ckpt = r->ckpt, .family = r->family });

			snprintf(detail, sizeof(detail), "the runtime concatenates [%s] for the head, but %s heads take "
				 "[%s] (%s)", hl && hl->concat == FG_CONCAT_HIDDEN_FIRST ? "hidden, embedding" : "embedding, hidden",
				 r->family->id, r->family->hidden_first ? "hidden, embedding" : "embedding, hidden",
				 hl && hl->source ? hl->source : rt->rt->id);
			if ((at = find_group(r, from, FG_V_HEAD_CONTRACT_MISMATCH, detail)) == NONE_YET) {
				ADD(FG_V_HEAD_CONTRACT_MISMATCH, head_set_name(rt), "%s", detail);
				at = r->verdicts.n - 1;
			}
			fg_verdict_runtime(AT(at), rt->rt->id);
		}
	}
	if (primary && primary->conv == FG_CONV_DELTA && !mismatch && r->family->norm_style == FG_STYLE_ZERO_CENTRED)
		ADD(FG_V_RAW_ZERO_CENTRED_HEAD, r->sets[r->primary_head].set.name,
		    "the head stores delta norms (low min %.4f, q/k max %.4f); the targeted runtimes heal it",
		    primary->low_min, primary->qk_max);
	return 0;
}

static int verdict_runtimes(struct fg_inspect *r)
{
	int rc = verdict_trunk_shift(r);

	return rc ? rc : verdict_loads(r);
}

static int verdict_experts(struct fg_inspect *r, const struct fg_set_report *s)
{
	const struct fg_expert_block *blocks = s->experts;
	struct fg_verdict *v;
	int rc;

	for (size_t i = 0; i < s->n_experts; i++) {
		if (blocks[i].layout != FG_EXPERTS_AMBIGUOUS && blocks[i].layout != FG_EXPERTS_INVALID)
			continue;
		ADD(FG_V_EXPERT_LAYOUT_AMBIGUOUS, s->set.name, "%s*: %s", blocks[i].prefix, blocks[i].why);
		if (blocks[i].gate_up)
			fg_verdict_tensor(v, blocks[i].gate_up->name);
		if (blocks[i].down)
			fg_verdict_tensor(v, blocks[i].down->name);
	}
	return 0;
}

/* A head is degenerate when every norm is all zero or no tensor has a non-zero byte. */
static int head_payload_empty(struct fg_inspect *r, const struct fg_tset *set)
{
	uint8_t buf[DEGENERATE_SAMPLE];

	for (size_t i = 0; i < set->n_tensors; i++) {
		size_t n = 0;

		if (fg_ckpt_peek(r->ckpt, set->tensors[i], buf, sizeof(buf), &n, NULL) != 0)
			return 0; /* not read (remote, or unreadable now): no evidence of emptiness */
		for (size_t k = 0; k < n; k++)
			if (buf[k])
				return 0;
	}
	return 1;
}

/* A quantized module's kind (its format's name), its position, and (for a kind's first) its kind's count. */
struct qkind {
	char name[160];
	size_t at, count;
};

static int cmp_qkind(const void *a, const void *b)
{
	const struct qkind *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : (x->at > y->at) - (x->at < y->at);
}

static int cmp_qkind_at(const void *a, const void *b)
{
	const struct qkind *x = a, *y = b;

	return (x->at > y->at) - (x->at < y->at);
}

/*
 * The quantized head's formats, by module count: "28 x mlx affine bits=4
 * group=64, 1 x ...", kinds in the order their first module comes, at most
 * three.  Each module's name is formatted once and the kinds are counted
 * from a sort (comparing every module with every other took 7 s for 9,000
 * FP8 modules).
 */
static int verdict_quantized_head(struct fg_inspect *r, const struct fg_set_report *sr)
{
	const struct fg_qmods *q = &sr->qmods;
	char list[256] = "";
	size_t used = 0, refused = 0, m = 0, n_kinds = 0;
	struct qkind *k = malloc((q->n ? q->n : 1) * sizeof(*k));
	struct fg_verdict *v;
	int rc;

	if (!k)
		return FG_ENOMEM;
	for (size_t i = 0; i < q->n; i++) {
		if (!fg_qmod_quantized(&q->v[i]))
			continue;
		refused += q->v[i].rc != 0;
		fg_qmod_name(&q->v[i], k[m].name, sizeof(k[m].name));
		k[m++].at = i;
	}
	/* Each kind's first module (the sort puts it first), with its kind's count, packed to the front. */
	qsort(k, m, sizeof(*k), cmp_qkind);
	for (size_t i = 0, j; i < m; i = j) {
		for (j = i + 1; j < m && strcmp(k[j].name, k[i].name) == 0; j++)
			;
		k[i].count = j - i;
		if (n_kinds != i)
			k[n_kinds] = k[i];
		n_kinds++;
	}
	qsort(k, n_kinds, sizeof(*k), cmp_qkind_at);
	for (size_t i = 0; i < n_kinds && used < sizeof(list); i++) {
		if (i == 3) {
			snprintf(list + used, sizeof(list) - used, "; ...");
			break;
		}
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%zu x %s%s", i ? "; " : "", k[i].count,
					 q->v[k[i].at].rc ? "(not read) " : "", k[i].name);
	}
	free(k);
	ADD(FG_V_QUANTIZED_MTP_HEAD, sr->set.name, "%zu head module(s) are quantized: %s%s", sr->set.n_quantized,
	    list, refused ? " (a forge refuses what it does not read: unsupported_quantization_format)" : "");
	for (size_t i = 0; i < q->n; i++)
		if (fg_qmod_quantized(&q->v[i]))
			fg_verdict_tensor(v, q->v[i].name);
	return 0;
}

/*
 * A forged artifact whose config says its head was re-quantized
 * (mtp_quantization.requantized, written only with --allow-requantize).
 */
static int verdict_requantized(struct fg_inspect *r)
{
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(r->ckpt->config_raw, "mtp_quantization");
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(q, "requantized");
	struct fg_verdict *v;
	int rc, n;

	if (!cJSON_IsArray(req) || !(n = cJSON_GetArraySize(req)))
		return 0;
	ADD(FG_V_QUANTIZED_HEAD_REQUANTIZED, r->primary_head >= 0 ? r->sets[r->primary_head].set.name : NULL,
	    "%d head module(s) were dequantized and quantized again (--allow-requantize); the reports disagree "
	    "(4-bit Qwen3.5 MoE: BF16 head 79-85 %% acceptance, quantized 5-11 %%; re-quantized to match the "
	    "backbone: 44.9 vs 43.8 %%, 47.3 vs 47.3 %%): verify its acceptance", n);
	for (const cJSON *e = req->child; e; e = e->next)
		if (cJSON_IsString(e))
			fg_verdict_tensor(v, e->valuestring);
	return 0;
}

static int verdict_heads(struct fg_inspect *r)
{
	struct fg_verdict *v;
	int rc;
	int any_head = 0;

	for (size_t s = 0; s < r->n_sets; s++) {
		const struct fg_tset *set = &r->sets[s].set;
		size_t zero = 0;

		if (r->sets[s].role == FG_ROLE_TRUNK)
			continue;
		any_head |= set->n_tensors > 0;
		for (size_t i = 0; i < set->n_norms; i++)
			zero += (size_t)set->norms[i].all_zero;
		if (set->n_norms && zero == set->n_norms)
			ADD(FG_V_DEGENERATE_HEAD, set->name, "all %zu head norm tensor(s) are exactly zero", zero);
		else if (set->n_tensors && head_payload_empty(r, set))
			ADD(FG_V_DEGENERATE_HEAD, set->name, "none of the %zu head tensors has a non-zero byte",
			    set->n_tensors);
		if (set->n_quantized && (rc = verdict_quantized_head(r, &r->sets[s])) != 0)
			return rc;
		rc = verdict_experts(r, &r->sets[s]);
		if (rc)
			return rc;
	}
	if (!any_head && r->declared_mtp > 0) {
		/* A note, never "do not ship" by itself: runtimes that refuse it get runtime_load_error. */
		ADD(FG_V_MTP_DECLARED_MISSING, NULL,
		    "config.json declares %d MTP layer(s) but no tensor holds a head (mlx-lm conversions keep the "
		    "count): the listed runtimes fall back to plain decoding", r->declared_mtp);
		for (size_t i = 0; i < r->n_runtimes; i++) {
			const struct fg_runtime_result *rt = &r->runtimes[i];

			if (rt->targeted && rt->decode == FG_DECODE_AR && rt->rt->heads)
				fg_verdict_runtime(v, rt->rt->id);
		}
	}
	return 0;
}

/* Whether one of rt's heads reads the file called name as a head source. */
static int rt_reads_head_file(const struct fg_runtime *rt, const char *name)
{
	for (const struct fg_rt_head *h = rt->heads; h && h->mode != FG_HEAD_NONE; h++)
		for (const struct fg_rt_head_src *s = h->sources; s && s->kind != FG_HSRC_END; s++)
			if (s->kind == FG_HSRC_FILE && s->file && strcmp(s->file, name) == 0)
				return 1;
	return 0;
}

static int verdict_files(struct fg_inspect *r)
{
	const struct fg_ckpt *c = r->ckpt;
	struct fg_verdict *v;
	int rc;
	size_t by_problem[3] = { 0 }, n_all;
	const struct fg_runtime *all = fg_runtime_all(&n_all);

	for (size_t i = 0; i < c->n_unreadable; i++) {
		const struct fg_ckpt_unreadable *u = &c->unreadable[i];

		ADD(FG_V_UNREADABLE_SHARD, NULL, "%s %s: %s", u->name, u->why,
		    u->globbed ? "a runtime that globs model*.safetensors fails to load it"
			       : "a runtime that loads this sidecar fails to load it");
		for (size_t k = 0; k < n_all; k++)
			if (u->globbed ? all[k].files == FG_FILES_GLOB : rt_reads_head_file(&all[k], u->name))
				fg_verdict_runtime(v, all[k].id);
	}
	for (size_t i = 0; i < c->n_files; i++) {
		if (!c->files[i].stray)
			continue;
		ADD(FG_V_STRAY_SHARD, NULL, "%s is not in the index but the listed runtimes load it (%zu tensors, %zu mtp.* keys)",
		    c->files[i].name, c->files[i].st->n_tensors, r->facts[i].mtp_keys);
		for (size_t k = 0; k < n_all; k++) /* every runtime whose file rule reads it */
			if (fg_runtime_reads_file(&all[k], c, i))
				fg_verdict_runtime(v, all[k].id);
	}
	if (c->n_mismatch) {
		for (size_t i = 0; i < c->n_mismatch; i++)
			by_problem[c->mismatch[i].problem]++;
		ADD(FG_V_INDEX_MISMATCH, NULL,
		    "the index and the headers disagree: %zu mapped but missing, %zu unlisted, %zu in another file",
		    by_problem[FG_INDEX_MISSING], by_problem[FG_INDEX_UNLISTED], by_problem[FG_INDEX_WRONG_FILE]);
		for (size_t i = 0; i < c->n_mismatch; i++)
			fg_verdict_tensor(v, c->mismatch[i].tensor);
	}
	return 0;
}

/* 1 + w rounded to a 16-bit dtype, as a runtime that adds 1 in the tensor's own dtype stores it. */
static double sum16(enum fg_dtype dt, double w)
{
	float f = (float)(1.0 + w);

	return dt == FG_DT_BF16 ? (double)fg_bf16_to_f32_ref(fg_f32_to_bf16_ref(f))
				: (double)fg_f16_to_f32_ref(fg_f32_to_f16_ref(f));
}

/* Half a BF16 step at 1.0: what one BF16 rounding of a gain in [1, 2) may cost, at most. */
#define HALF_BF16_STEP_AT_ONE (1.0 / 256.0)

/* The FG_SHIFT_F32_* bit of a 16-bit dtype, 0 for any other. */
static unsigned shift_bit(enum fg_dtype dt)
{
	return dt == FG_DT_BF16 ? FG_SHIFT_F32_BF16 : dt == FG_DT_F16 ? FG_SHIFT_F32_F16 : 0;
}

/*
 * A delta set in BF16/F16 that a targeted runtime shifts at load as a
 * 16-bit sum (not ollama's F32 addOne, not llama.cpp's F32 sum of a BF16
 * norm, not x * (1 + w) at run time): once per set, with the worst
 * effective-gain error over the norms some such runtime sums in 16 bits.
 * Within half a BF16 step at 1.0 it is what storing any gain in BF16 costs
 * (bf16_shift_rounding, info); beyond it (gains of 2 and more round by a
 * whole step) a warning.
 */
static int verdict_precision(struct fg_inspect *r)
{
	struct fg_verdict *v;
	int rc;

	for (size_t s = 0; s < r->n_sets; s++) {
		const struct fg_tset *set = &r->sets[s].set;
		const struct fg_norm *worst_norm = NULL;
		size_t narrow = 0, worst_i = 0, n_shifters = 0;
		const struct fg_runtime *shifters[FG_INSPECT_MAX_RUNTIMES];
		int named[FG_INSPECT_MAX_RUNTIMES] = { 0 };
		double worst = -1.0;

		if (r->sets[s].decision.conv != FG_CONV_DELTA)
			continue;
		for (size_t i = 0; i < r->n_runtimes; i++) {
			const struct fg_runtime_result *rt = &r->runtimes[i];
			int shifted = r->sets[s].role == FG_ROLE_TRUNK ? rt->trunk_shift : rt->head_shift;

			if (rt->targeted && shifted && rt->load_cause == FG_LOAD_OK)
				shifters[n_shifters++] = rt->rt;
		}
		for (size_t i = 0; n_shifters && i < set->n_norms; i++) {
			const struct fg_norm *nm = &set->norms[i];
			enum fg_dtype dt = nm->t->dtype;
			int summed16 = 0;

			if (!fg_name_zero_centred(nm->t->name) || !shift_bit(dt) || !nm->t->data)
				continue;
			for (size_t k = 0; k < n_shifters; k++)
				if (!(shifters[k]->shift_f32 & shift_bit(dt)))
					summed16 = named[k] = 1;
			if (!summed16)
				continue;
			narrow++;
			for (uint64_t k = 0; k < fg_tensor_nelem(nm->t); k++) {
				double w = fg_dtype_load_f64(dt, nm->t->data, (size_t)k), e;

				if (!isfinite(w))
					continue;
				e = fabs(sum16(dt, w) - (1.0 + w));
				if (e > worst) {
					worst = e;
					worst_norm = nm;
					worst_i = (size_t)k;
				}
			}
		}
		if (!narrow || !worst_norm)
			continue;
		{
			double w = fg_dtype_load_f64(worst_norm->t->dtype, worst_norm->t->data, worst_i);
			char sn[160];

			ADD(worst > HALF_BF16_STEP_AT_ONE ? FG_V_BF16_SHIFT_PRECISION_LOSS : FG_V_BF16_SHIFT_ROUNDING,
			    set->name,
			    "%zu delta norm(s) stored in 16-bit get +1 at load as a 16-bit sum: the worst effective gain is "
			    "off by %.3g (%s[%zu]: 1 + %.7g stored as %.7g; half a BF16 step at 1.0 is %.3g)", narrow,
			    worst, short_name(worst_norm->t->name, sn, sizeof(sn)), worst_i, w,
			    sum16(worst_norm->t->dtype, w), HALF_BF16_STEP_AT_ONE);
			fg_verdict_tensor(v, worst_norm->t->name);
			for (size_t k = 0; k < n_shifters; k++)
				if (named[k])
					fg_verdict_runtime(v, shifters[k]->id);
		}
	}
	return 0;
}

static int derive_verdicts(struct fg_inspect *r, struct fg_err *err)
{
	int (*const steps[])(struct fg_inspect *r) = {
		verdict_norm_values, verdict_conventions, verdict_structure, verdict_runtimes,
		verdict_heads, verdict_requantized, verdict_files, verdict_precision,
	};

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		int rc = steps[i](r);

		if (rc == FG_ENOMEM)
			return fg_err_set(err, rc, "out of memory building verdicts");
		if (rc)
			return fg_err_set(err, rc, "building verdicts: the verdict table refused a code");
	}
	r->ok = !fg_verdicts_has_error(&r->verdicts);
	return 0;
}

int fg_inspect_run(struct fg_inspect **out, const char *source, const char *const *runtimes,
		   size_t n_runtimes, struct fg_err *err)
{
	return fg_inspect_run_opts(out, source, runtimes, n_runtimes, NULL, err);
}

int fg_inspect_run_opts(struct fg_inspect **out, const char *source, const char *const *runtimes,
			size_t n_runtimes, const struct fg_pull_opts *pull, struct fg_err *err)
{
	struct fg_inspect_opts o;

	memset(&o, 0, sizeof(o));
	o.pull = pull;
	return fg_inspect_run_with(out, source, runtimes, n_runtimes, &o, err);
}

/* num_hidden_layers as soon as config.json is read: the parse-time head scheme needs it. */
static void on_config(const cJSON *config, void *ctx)
{
	struct fg_inspect *r = ctx;

	r->n_layers = config_long(config, "num_hidden_layers");
}

/* The head scheme facts again, for a layer count found only from the names. */
static void reclassify_schemes(struct fg_inspect *r)
{
	for (size_t i = 0; i < r->ckpt->n_files; i++) {
		struct fg_st_file *st = r->ckpt->files[i].st;

		for (size_t k = 0; k < st->n_tensors; k++) {
			struct fg_tensor *t = &st->tensors[k];
			unsigned sch = (unsigned)fg_name_head_scheme(t->name, r->n_layers, NULL);

			t->facts = (uint16_t)((t->facts & ~FG_FACT_SCHEME) | (sch << FG_FACT_SCHEME_SH));
		}
	}
}

int fg_inspect_run_with(struct fg_inspect **out, const char *source, const char *const *runtimes,
			size_t n_runtimes, const struct fg_inspect_opts *o, struct fg_err *err)
{
	struct fg_inspect *r = calloc(1, sizeof(*r));
	struct fg_st_parse_opts parse;
	struct fg_ckpt_opts co;
	int rc;

	if (!r)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	r->n_layers = -1;
	r->read_cap = o && o->read_cap ? o->read_cap : FG_INSPECT_READ_MAX;
	parse.classify = fg_name_classify;
	parse.ctx = &r->n_layers;
	memset(&co, 0, sizeof(co));
	co.pull = o ? o->pull : NULL;
	if (o)
		co.links = o->links;
	co.parse = &parse;
	co.on_config = on_config;
	co.config_ctx = r;
	for (size_t i = 0; i < n_runtimes; i++) {
		if (!fg_runtime_find(runtimes[i])) {
			rc = fg_err_set(err, FG_EUSAGE, "unknown runtime '%s'", runtimes[i]);
			goto out;
		}
	}
	rc = fg_ckpt_open_with(&r->ckpt, source, &co, err);
	if (rc)
		goto out;
	r->family = fg_family_detect(r->ckpt->config_raw, &r->moe);
	r->n_layers = config_long(r->ckpt->config, "num_hidden_layers");
	if (r->n_layers < 0) {
		r->n_layers = appended_head_layer(r->ckpt);
		if (r->n_layers >= 0)
			reclassify_schemes(r);
	}
	r->facts = calloc(r->ckpt->n_files ? r->ckpt->n_files : 1, sizeof(*r->facts));
	if (!r->facts) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	r->scheme = choose_scheme(r);
	scan_structure(r);
	load_qconfig(r);
	read_mtplx_runtime(r);
	rc = build_sets(r, err);
	if (rc)
		goto out;
	locate_head(r);
	rc = build_head_inputs(r, err);
	if (!rc)
		rc = find_dups(r, err);
	if (!rc)
		rc = run_runtimes(r, runtimes, n_runtimes, err);
	if (!rc)
		rc = derive_verdicts(r, err);
out:
	if (rc) {
		fg_inspect_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void fg_inspect_free(struct fg_inspect *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_sets; i++) {
		fg_tset_release(&r->sets[i].set);
		fg_experts_release(r->sets[i].experts, r->sets[i].n_experts);
		fg_qmods_release(&r->sets[i].qmods);
		free((void *)(uintptr_t)r->heads_in[i].tensor_file);
		free((void *)(uintptr_t)r->heads_in[i].unlisted);
		cJSON_Delete(r->manifests[i]);
	}
	free(r->dups);
	fg_qconfig_release(&r->qconfig);
	cJSON_Delete(r->qconfig_docs[0]);
	cJSON_Delete(r->qconfig_docs[1]);
	cJSON_Delete(r->mtplx_runtime);
	fg_verdicts_release(&r->verdicts);
	free(r->facts);
	fg_ckpt_free(r->ckpt);
	free(r);
}

const struct fg_set_report *fg_inspect_trunk(const struct fg_inspect *r)
{
	assert(r->n_sets > 0 && r->sets[0].role == FG_ROLE_TRUNK);
	return &r->sets[0];
}

const struct fg_set_report *fg_inspect_head(const struct fg_inspect *r)
{
	if (r->primary_head < 0)
		return NULL;
	assert((size_t)r->primary_head < r->n_sets && r->sets[r->primary_head].role != FG_ROLE_TRUNK);
	return &r->sets[r->primary_head];
}

void fg_inspect_summarize(const struct fg_inspect *r, struct fg_inspect_summary *out)
{
	const struct fg_set_report *trunk = fg_inspect_trunk(r), *head = fg_inspect_head(r);

	memset(out, 0, sizeof(*out));
	out->family = r->family->id;
	out->ok = r->ok;
	out->probe_mean = trunk->decision.probe ? trunk->decision.probe->st.mean : NAN;
	/* locate_head never makes an empty set primary; the check keeps the rule local. */
	out->head_convention = head && head->set.n_tensors ? fg_conv_name(head->decision.conv) : NULL;
	out->n_verdicts = r->verdicts.n;
	out->verdicts = r->verdicts.v;
}

const struct fg_tset *fg_inspect_set(const struct fg_inspect *r, const char *name,
				     const struct fg_decision **decision)
{
	for (size_t i = 0; i < r->n_sets; i++) {
		if (strcmp(r->sets[i].set.name, name) == 0) {
			if (decision)
				*decision = &r->sets[i].decision;
			return &r->sets[i].set;
		}
	}
	return NULL;
}
