/*
 * inspect_json.c: the forged.inspect.v1 document of an inspection
 * (inspect.h), field for field as docs/interfaces.md describes it.
 */
#include "forge/model/inspect.h"
#include "forge/model/mtplx.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void add_str_or_null(cJSON *o, const char *key, const char *s)
{
	if (s)
		cJSON_AddStringToObject(o, key, s);
	else
		cJSON_AddNullToObject(o, key);
}

/* Figures are rounded to 4 decimals, as people read them. */
static double round4(double x)
{
	/* Beyond 2^53 / 10^4 there is nothing to round (and the cast would overflow); NaN stays NaN. */
	if (!(fabs(x) < 1e11))
		return x;
	return (double)(long long)(x * 10000.0 + (x < 0 ? -0.5 : 0.5)) / 10000.0;
}

static cJSON *files_json(const struct fg_inspect *r)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; arr && i < r->ckpt->n_files; i++) {
		const struct fg_ckpt_file *f = &r->ckpt->files[i];
		cJSON *o = cJSON_CreateObject();

		if (!o)
			break;
		cJSON_AddStringToObject(o, "name", f->name);
		cJSON_AddNumberToObject(o, "bytes", (double)f->st->file_size);
		cJSON_AddNumberToObject(o, "tensors", (double)f->st->n_tensors);
		cJSON_AddBoolToObject(o, "in_index", f->in_index);
		cJSON_AddBoolToObject(o, "globbed", f->globbed);
		cJSON_AddBoolToObject(o, "stray", f->stray);
		cJSON_AddBoolToObject(o, "sidecar", f->sidecar);
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

static cJSON *mtp_json(const struct fg_inspect *r)
{
	cJSON *o = cJSON_CreateObject();
	/* The figures describe the head at `location` (embedded keys win when both exist). */
	int at = strcmp(r->location, "embedded") == 0 ? r->embedded_head : r->primary_head;
	const struct fg_tset *head = at >= 0 ? &r->sets[at].set : NULL;

	if (!o)
		return NULL;
	if (r->declared_mtp >= 0)
		cJSON_AddNumberToObject(o, "declared_layers", r->declared_mtp);
	else
		cJSON_AddNullToObject(o, "declared_layers");
	cJSON_AddStringToObject(o, "location", r->location);
	add_str_or_null(o, "scheme", head ? fg_name_scheme_name(r->scheme == FG_SCHEME_NONE ?
								FG_SCHEME_PREFIX : r->scheme) : NULL);
	cJSON_AddNumberToObject(o, "tensors", head ? (double)head->n_tensors : 0);
	cJSON_AddBoolToObject(o, "quantized", head && head->n_quantized > 0);
	add_str_or_null(o, "sidecar", r->ckpt->sidecar >= 0 ? r->ckpt->files[r->ckpt->sidecar].name : NULL);
	return o;
}

static cJSON *sets_json(const struct fg_inspect *r)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; arr && i < r->n_sets; i++) {
		const struct fg_tset *s = &r->sets[i].set;
		const struct fg_decision *d = &r->sets[i].decision;
		cJSON *o = cJSON_CreateObject(), *probe;

		if (!o)
			break;
		cJSON_AddStringToObject(o, "name", s->name);
		add_str_or_null(o, "file", s->file);
		cJSON_AddNumberToObject(o, "tensors", (double)s->n_tensors);
		cJSON_AddNumberToObject(o, "norm_tensors", (double)s->n_norms);
		cJSON_AddStringToObject(o, "convention", fg_conv_name(d->conv));
		if (d->has_qk)
			cJSON_AddNumberToObject(o, "qk_max", round4(d->qk_max));
		else
			cJSON_AddNullToObject(o, "qk_max");
		if (d->has_low)
			cJSON_AddNumberToObject(o, "low_min", round4(d->low_min));
		else
			cJSON_AddNullToObject(o, "low_min");
		if (r->sets[i].role == FG_ROLE_TRUNK && d->probe) {
			probe = cJSON_AddObjectToObject(o, "probe");
			if (probe) {
				cJSON_AddStringToObject(probe, "tensor", d->probe->t->name);
				cJSON_AddNumberToObject(probe, "mean", round4(d->probe->st.mean));
			}
		} else {
			cJSON_AddNullToObject(o, "probe");
		}
		cJSON_AddNumberToObject(o, "quantized_tensors", (double)s->n_quantized);
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

static cJSON *runtimes_json(const struct fg_inspect *r)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; arr && i < r->n_runtimes; i++) {
		const struct fg_runtime_result *rt = &r->runtimes[i];
		cJSON *o = cJSON_CreateObject(), *files, *breakage, *le;

		if (!o)
			break;
		cJSON_AddStringToObject(o, "runtime", rt->rt->id);
		cJSON_AddBoolToObject(o, "targeted", rt->targeted);
		files = cJSON_AddArrayToObject(o, "files");
		for (size_t k = 0; files && k < rt->n_files && k < FG_RUNTIME_MAX_FILES; k++)
			cJSON_AddItemToArray(files, cJSON_CreateString(rt->files[k]));
		cJSON_AddBoolToObject(o, "trunk_shift", rt->trunk_shift);
		add_str_or_null(o, "shift_reason", fg_runtime_shift_reason_name(rt->shift_reason));
		if (rt->has_probe)
			cJSON_AddNumberToObject(o, "trunk_probe_after", round4(rt->trunk_probe_after));
		else
			cJSON_AddNullToObject(o, "trunk_probe_after");
		cJSON_AddBoolToObject(o, "head_shift", rt->head_shift);
		cJSON_AddNumberToObject(o, "head_keys_dropped", (double)rt->head_keys_dropped);
		cJSON_AddStringToObject(o, "trunk", fg_runtime_trunk_name(rt->trunk));
		cJSON_AddStringToObject(o, "head", fg_runtime_head_name(rt->head));
		cJSON_AddStringToObject(o, "outcome", fg_runtime_outcome_name(rt->outcome));
		/* Issue 10 additions: new fields only, the words above keep their meaning. */
		breakage = cJSON_AddArrayToObject(o, "breakage");
		for (unsigned b = 0; breakage && b < FG_BREAK_COUNT; b++)
			if (rt->breakage & (1u << b))
				cJSON_AddItemToArray(breakage, cJSON_CreateString(fg_runtime_breakage_name(1u << b)));
		if (rt->load_cause != FG_LOAD_OK && (le = cJSON_AddObjectToObject(o, "load_error"))) {
			cJSON_AddStringToObject(le, "cause", fg_runtime_load_cause_name(rt->load_cause));
			cJSON_AddStringToObject(le, "reason", rt->load_error);
		} else if (rt->load_cause == FG_LOAD_OK) {
			cJSON_AddNullToObject(o, "load_error");
		}
		add_str_or_null(o, "decode", fg_runtime_decode_name(rt->decode));
		add_str_or_null(o, "head_file", rt->head_file);
		cJSON_AddNumberToObject(o, "head_keys_loaded", (double)rt->head_keys_loaded);
		cJSON_AddNumberToObject(o, "order_dependent", (double)rt->order_dependent);
		cJSON_AddBoolToObject(o, "modelled", rt->modelled);
		add_str_or_null(o, "unmodelled", rt->modelled ? NULL : rt->unmodelled);
		add_str_or_null(o, "version_of", rt->version_of[0] ? rt->version_of : NULL);
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

static cJSON *verdicts_json(const struct fg_inspect *r)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; arr && i < r->verdicts.n; i++) {
		const struct fg_verdict *v = &r->verdicts.v[i];
		cJSON *o = cJSON_CreateObject(), *rts, *ts;

		if (!o)
			break;
		cJSON_AddStringToObject(o, "code", v->row->name);
		cJSON_AddStringToObject(o, "severity", fg_severity_name(v->row->severity));
		add_str_or_null(o, "set", v->set[0] ? v->set : NULL);
		rts = cJSON_AddArrayToObject(o, "runtimes");
		for (size_t k = 0; rts && k < v->n_runtimes; k++)
			cJSON_AddItemToArray(rts, cJSON_CreateString(v->runtimes[k]));
		ts = cJSON_AddArrayToObject(o, "tensors");
		for (size_t k = 0; ts && k < v->n_tensors && k < FG_VERDICT_MAX_LIST; k++)
			if (v->tensors[k])
				cJSON_AddItemToArray(ts, cJSON_CreateString(v->tensors[k]));
		cJSON_AddNumberToObject(o, "tensor_count", (double)v->n_tensors);
		cJSON_AddStringToObject(o, "detail", v->detail);
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

static cJSON *structure_json(const struct fg_inspect *r)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	add_str_or_null(o, "conv1d", r->structure.conv1d);
	cJSON_AddBoolToObject(o, "format_mlx", r->structure.format_mlx);
	cJSON_AddBoolToObject(o, "quantized", r->structure.quantized);
	add_str_or_null(o, "declared_encoding", r->structure.declared);
	return o;
}

static cJSON *mtplx_runtime_json(const struct fg_inspect *r)
{
	cJSON *o;

	if (r->mtplx_runtime)
		return fg_mtplx_runtime_summary(r->mtplx_runtime);
	if (!r->mtplx_runtime_error[0])
		return cJSON_CreateNull();
	o = cJSON_CreateObject();
	if (o) {
		cJSON_AddStringToObject(o, "file", FG_MTPLX_RUNTIME_FILE);
		cJSON_AddBoolToObject(o, "loads", 0);
		cJSON_AddStringToObject(o, "error", r->mtplx_runtime_error);
	}
	return o;
}

cJSON *fg_inspect_json(const struct fg_inspect *r)
{
	cJSON *o = cJSON_CreateObject();
	const char *mt = fg_ckpt_model_type(r->ckpt);

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "schema", "forged.inspect.v1");
	cJSON_AddStringToObject(o, "source", r->ckpt->source);
	cJSON_AddStringToObject(o, "family", r->family->id);
	add_str_or_null(o, "model_type", mt ? mt : fg_ckpt_text_model_type(r->ckpt));
	cJSON_AddStringToObject(o, "norm_style", fg_family_style_name(r->family->norm_style));
	cJSON_AddStringToObject(o, "layout", r->layout);
	cJSON_AddBoolToObject(o, "moe", r->moe);
	cJSON_AddItemToObject(o, "structure", structure_json(r));
	if (r->ckpt->pull) {
		struct fg_pull_stats st;
		cJSON *rem = cJSON_AddObjectToObject(o, "remote");

		fg_pull_stats(r->ckpt->pull, &st);
		if (rem) {
			cJSON_AddStringToObject(rem, "base_url", r->ckpt->dir);
			/* hf:// only: the revision as named and the commit it resolved to. */
			add_str_or_null(rem, "revision", fg_pull_revision(r->ckpt->pull));
			add_str_or_null(rem, "resolved_commit", fg_pull_resolved_commit(r->ckpt->pull));
			cJSON_AddNumberToObject(rem, "bytes_fetched", (double)st.bytes_fetched);
			cJSON_AddNumberToObject(rem, "bytes_from_cache", (double)st.bytes_from_cache);
			cJSON_AddNumberToObject(rem, "requests", (double)st.requests);
			if (st.max_bytes)
				cJSON_AddNumberToObject(rem, "max_bytes", (double)st.max_bytes);
			else
				cJSON_AddNullToObject(rem, "max_bytes");
			cJSON_AddStringToObject(rem, "note", "a remote listing cannot show stray shards: "
							     "mlx-lm's glob sees local files only");
		}
	}
	cJSON_AddItemToObject(o, "files", files_json(r));
	cJSON_AddItemToObject(o, "mtp", mtp_json(r));
	cJSON_AddItemToObject(o, "sets", sets_json(r));
	cJSON_AddItemToObject(o, "runtimes", runtimes_json(r));
	cJSON_AddItemToObject(o, "verdicts", verdicts_json(r));
	cJSON_AddBoolToObject(o, "ok", r->ok);
	/* Issue 13, a new field: MTPLX's runtime contract when the checkpoint has one. */
	cJSON_AddItemToObject(o, "mtplx_runtime", mtplx_runtime_json(r));
	return o;
}

int fg_inspect_report_digest(const cJSON *report, char out[FG_DIGEST_MAX], struct fg_err *err)
{
	static const char *const counters[] = { "bytes_fetched", "bytes_from_cache", "requests" };
	char hex[FG_SHA256_HEX];
	cJSON *copy, *remote;
	char *text;

	if (!cJSON_IsObject(report))
		return fg_err_set(err, FG_EINPUT, "an inspection's digest needs its report");
	copy = cJSON_Duplicate(report, 1);
	if (!copy)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	remote = cJSON_GetObjectItemCaseSensitive(copy, "remote");
	for (size_t i = 0; cJSON_IsObject(remote) && i < sizeof(counters) / sizeof(counters[0]); i++)
		cJSON_DeleteItemFromObjectCaseSensitive(remote, counters[i]);
	text = cJSON_PrintUnformatted(copy);
	cJSON_Delete(copy);
	if (!text)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	fg_sha256_buf(text, strlen(text), hex);
	cJSON_free(text);
	snprintf(out, FG_DIGEST_MAX, "sha256:%s", hex);
	return 0;
}
