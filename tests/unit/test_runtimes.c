/*
 * test_runtimes.c: the runtime table and the load simulation of runtimes.h
 * against docs/domain.md section 4 and the incidents of section 3.
 *
 * Each case is a checkpoint written by hand as the simulation sees it: files
 * with their glob/index/sidecar flags, per-file facts (mtp.* keys, head
 * tensors, raw conv1d) and the tensor-set decisions (convention, q/k and low
 * figures, the trunk probe's mean).  The cases are MTPLX issue 306 (an
 * absolute trunk with embedded mtp.* keys), a raw Hugging Face checkpoint,
 * an absolute trunk with a delta or double-shifted sidecar (issues 176, 301),
 * a delta trunk in an MLX layout, a plain family, and which files each
 * runtime reads.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "forge/model/runtimes.h"

#define MAX_FILES 8

/* A checkpoint as the simulation sees it. */
struct world {
	struct fg_ckpt ckpt;
	struct fg_ckpt_file files[MAX_FILES];
	struct fg_file_facts facts[MAX_FILES];
	cJSON *index;
	struct fg_tensor probe_t;
	struct fg_norm probe;
	struct fg_decision trunk, embedded, sidecar;
	struct fg_runtime_input in;
};

/* The index document of the current world, freed by the teardown if a test fails. */
static cJSON *live_index;

static int release_index(void **state)
{
	(void)state;
	cJSON_Delete(live_index);
	live_index = NULL;
	return 0;
}

static void world_init(struct world *w, int with_index)
{
	memset(w, 0, sizeof(*w));
	w->ckpt.source = (char *)"models/case";
	w->ckpt.dir = (char *)"models/case";
	w->ckpt.files = w->files;
	w->ckpt.sidecar = -1;
	if (with_index) {
		w->index = live_index = cJSON_Parse("{\"weight_map\": {}}");
		assert_non_null(w->index);
		w->ckpt.index = w->index;
	}
	w->probe_t.name = "language_model.model.layers.3.self_attn.q_norm.weight";
	w->probe_t.dtype = FG_DT_F32;
	w->probe_t.rank = 1;
	w->probe.t = &w->probe_t;
	w->probe.cls = FG_NAME_QK;
	w->probe.st.has_finite = 1;
	w->in.ckpt = &w->ckpt;
	w->in.facts = w->facts;
	w->in.style = FG_STYLE_ZERO_CENTRED;
	w->in.trunk = &w->trunk;
}

static void world_release(struct world *w)
{
	cJSON_Delete(w->index);
	w->index = live_index = NULL;
}

/* Add a file; returns its index. */
static size_t add_file(struct world *w, const char *name, int globbed, int in_index, int sidecar,
		       size_t mtp_keys, size_t head_tensors, int raw_conv1d)
{
	size_t i = w->ckpt.n_files++;
	struct fg_ckpt_file *f = &w->files[i];

	assert_true(i < MAX_FILES);
	f->name = (char *)name;
	f->path = (char *)name;
	f->globbed = globbed;
	f->in_index = in_index;
	f->stray = globbed && w->ckpt.index && !in_index;
	f->sidecar = sidecar;
	w->facts[i].mtp_keys = mtp_keys;
	w->facts[i].head_tensors = head_tensors;
	w->facts[i].raw_conv1d = raw_conv1d;
	if (sidecar)
		w->ckpt.sidecar = (int)i;
	return i;
}

/* A zero-centred decision; low is left out when NAN. */
static void set_decision(struct fg_decision *d, enum fg_convention conv, double qk_max, double low_min)
{
	memset(d, 0, sizeof(*d));
	d->conv = conv;
	if (!isnan(qk_max)) {
		d->has_qk = 1;
		d->qk_max = d->qk_min = qk_max;
	}
	if (!isnan(low_min)) {
		d->has_low = 1;
		d->low_min = low_min;
	}
}

/* The trunk's decision, with the probe q_norm of mean probe_mean. */
static void set_trunk(struct world *w, enum fg_convention conv, double probe_mean, double low_min)
{
	set_decision(&w->trunk, conv, probe_mean, low_min);
	w->probe.st.mean = probe_mean;
	w->trunk.probe = &w->probe;
	w->trunk.qk_max_norm = w->trunk.qk_min_norm = &w->probe;
}

static struct fg_runtime_result sim(const struct world *w, const char *id)
{
	const struct fg_runtime *rt = fg_runtime_find(id);
	struct fg_runtime_result r;

	assert_non_null(rt);
	memset(&r, 0x5a, sizeof(r));
	fg_runtime_simulate(rt, &w->in, &r);
	assert_ptr_equal(r.rt, rt);
	assert_string_not_equal(fg_runtime_trunk_name(r.trunk), "unknown");
	assert_string_not_equal(fg_runtime_head_name(r.head), "unknown");
	assert_string_not_equal(fg_runtime_outcome_name(r.outcome), "unknown");
	return r;
}

#define assert_near(a, b)                                                            \
	do {                                                                         \
		double got_ = (a), want_ = (b);                                      \
		if (!(fabs(got_ - want_) <= 1e-9))                                   \
			fail_msg("%s = %.17g, want %.17g", #a, got_, want_);          \
	} while (0)

/* trunk / head / outcome in one check, naming the runtime on failure. */
static void expect(const struct fg_runtime_result *r, const char *trunk, const char *head, const char *outcome)
{
	const char *t = fg_runtime_trunk_name(r->trunk), *h = fg_runtime_head_name(r->head);
	const char *o = fg_runtime_outcome_name(r->outcome);

	if (strcmp(t, trunk) != 0 || strcmp(h, head) != 0 || (outcome && strcmp(o, outcome) != 0))
		fail_msg("%s: trunk %s head %s outcome %s, want %s %s %s", r->rt->id, t, h, o, trunk, head,
			 outcome ? outcome : "(any)");
}

static int reads(const struct fg_runtime_result *r, const char *name)
{
	for (size_t i = 0; i < r->n_files && i < FG_RUNTIME_MAX_FILES; i++)
		if (strcmp(r->files[i], name) == 0)
			return 1;
	return 0;
}

static void test_table(void **state)
{
	static const char *const ids[] = {
		"mlx-lm-0.31", "mlx-lm-0.32", "mlx-lm-pr990", "mtplx-2.11", "mtplx-2.12", "ollama", "hf",
	};
	const struct fg_runtime *all, *rt;
	size_t n = 0;

	(void)state;
	all = fg_runtime_all(&n);
	assert_int_equal(n, 7);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(all[i].id, ids[i]);
		assert_ptr_equal(fg_runtime_find(ids[i]), &all[i]);
		assert_non_null(all[i].contract);
	}
	assert_null(fg_runtime_find("mlx-lm"));
	assert_null(fg_runtime_find("vllm"));
	assert_null(fg_runtime_find(""));

	/* The rows say what docs/domain.md section 4 says. */
	rt = fg_runtime_find("mlx-lm-0.31");
	assert_true(rt->shift_on_mtp_key && rt->shift_on_raw_conv1d);
	assert_int_equal(rt->files, FG_FILES_GLOB);
	assert_int_equal(rt->head_source, FG_HSRC_UNUSED);
	rt = fg_runtime_find("mlx-lm-0.32");
	assert_true(!rt->shift_on_mtp_key && rt->shift_on_raw_conv1d);
	assert_int_equal(rt->head_source, FG_HSRC_UNUSED);
	rt = fg_runtime_find("mlx-lm-pr990");
	assert_true(!rt->shift_on_mtp_key && rt->shift_on_raw_conv1d);
	assert_int_equal(rt->head_source, FG_HSRC_SHARDS);
	assert_int_equal(rt->head_shift, FG_HSHIFT_WITH_TRUNK);
	rt = fg_runtime_find("mtplx-2.12");
	assert_true(rt->shift_on_mtp_key && rt->shift_on_raw_conv1d);
	assert_int_equal(rt->files, FG_FILES_GLOB);
	assert_int_equal(rt->head_source, FG_HSRC_SIDECAR);
	assert_int_equal(rt->head_shift, FG_HSHIFT_HEAL);
	assert_near(rt->refuse_probe_above, 2.4);
	rt = fg_runtime_find("mtplx-2.11");
	assert_int_equal(rt->head_source, FG_HSRC_SIDECAR);
	assert_int_equal(rt->head_shift, FG_HSHIFT_HEAL_DENSE_ONLY);
	assert_near(rt->refuse_probe_above, 2.4);
	rt = fg_runtime_find("ollama");
	assert_true(rt->shift_on_mtp_key && rt->shift_on_raw_conv1d);
	assert_int_equal(rt->files, FG_FILES_OLLAMA);
	assert_int_equal(rt->head_source, FG_HSRC_SHARDS);
	assert_int_equal(rt->head_shift, FG_HSHIFT_WITH_TRUNK);
	rt = fg_runtime_find("hf");
	assert_true(!rt->shift_on_mtp_key && !rt->shift_on_raw_conv1d);
	assert_true(rt->adds_one_at_run_time);
	assert_int_equal(rt->files, FG_FILES_INDEX);
	for (size_t i = 0; i < n; i++)
		if (strcmp(all[i].id, "hf") != 0)
			assert_false(all[i].adds_one_at_run_time);

	/* MLX-style targets are the mlx-lm and MTPLX rows; the layout defaults of inspect.h. */
	for (size_t i = 0; i < n; i++) {
		int mlx = strncmp(all[i].id, "mlx-lm-", 7) == 0 || strncmp(all[i].id, "mtplx-", 6) == 0;

		assert_int_equal(all[i].mlx, mlx);
	}
	assert_int_equal(fg_runtime_find("mlx-lm-0.31")->default_for, FG_LAYOUT_MLX);
	assert_int_equal(fg_runtime_find("mlx-lm-0.32")->default_for, FG_LAYOUT_MLX | FG_LAYOUT_HF);
	assert_int_equal(fg_runtime_find("mlx-lm-pr990")->default_for, 0);
	assert_int_equal(fg_runtime_find("mtplx-2.11")->default_for, 0);
	assert_int_equal(fg_runtime_find("mtplx-2.12")->default_for, FG_LAYOUT_MLX);
	assert_int_equal(fg_runtime_find("ollama")->default_for, FG_LAYOUT_HF);
	assert_int_equal(fg_runtime_find("hf")->default_for, FG_LAYOUT_HF);
	assert_int_equal(fg_runtime_layout_bit("mlx"), FG_LAYOUT_MLX);
	assert_int_equal(fg_runtime_layout_bit("hf"), FG_LAYOUT_HF);
	assert_int_equal(fg_runtime_layout_bit("unknown"), 0);
	assert_null(fg_runtime_find(NULL));
}

/* MTPLX issue 306: an absolute MLX trunk whose second shard embeds 29 mtp.* keys. */
static void world_306(struct world *w)
{
	world_init(w, 1);
	add_file(w, "model-00001-of-00002.safetensors", 1, 1, 0, 0, 0, 0);
	add_file(w, "model-00002-of-00002.safetensors", 1, 1, 0, 29, 29, 0);
	set_trunk(w, FG_CONV_ABSOLUTE, 1.7906, 0.9666);
	set_decision(&w->embedded, FG_CONV_ABSOLUTE, 1.7906, 0.93);
	w->in.embedded_head = &w->embedded;
	w->in.moe = 1;
}

/* One name per enum value, the strings the inspect report prints; nothing past the tables. */
static void test_names(void **state)
{
	(void)state;
	assert_string_equal(fg_runtime_trunk_name(FG_TRUNK_OK), "ok");
	assert_string_equal(fg_runtime_trunk_name(FG_TRUNK_DOUBLE_SHIFTED), "double_shifted");
	assert_string_equal(fg_runtime_trunk_name(FG_TRUNK_MISSING_SHIFT), "missing_shift");
	assert_string_equal(fg_runtime_trunk_name((enum fg_runtime_trunk)(FG_TRUNK_MISSING_SHIFT + 1)), "unknown");
	assert_string_equal(fg_runtime_head_name(FG_HEAD_OK), "ok");
	assert_string_equal(fg_runtime_head_name(FG_HEAD_INVERTED), "inverted");
	assert_string_equal(fg_runtime_head_name(FG_HEAD_DOUBLE_SHIFTED), "double_shifted");
	assert_string_equal(fg_runtime_head_name(FG_HEAD_DROPPED), "dropped");
	assert_string_equal(fg_runtime_head_name(FG_HEAD_ABSENT), "absent");
	assert_string_equal(fg_runtime_head_name((enum fg_runtime_head)(FG_HEAD_ABSENT + 1)), "unknown");
	assert_string_equal(fg_runtime_outcome_name(FG_OUTCOME_OK), "ok");
	assert_string_equal(fg_runtime_outcome_name(FG_OUTCOME_DEGRADED), "degraded");
	assert_string_equal(fg_runtime_outcome_name(FG_OUTCOME_BROKEN), "broken");
	assert_string_equal(fg_runtime_outcome_name(FG_OUTCOME_REFUSED), "refused");
	assert_string_equal(fg_runtime_outcome_name((enum fg_runtime_outcome)-1), "unknown");
	assert_null(fg_runtime_shift_reason_name(FG_SHIFT_NONE));
	assert_string_equal(fg_runtime_shift_reason_name(FG_SHIFT_MTP_KEYS), "mtp_keys");
	assert_string_equal(fg_runtime_shift_reason_name(FG_SHIFT_RAW_CONV1D), "raw_conv1d");
	assert_null(fg_runtime_shift_reason_name((enum fg_shift_reason)(FG_SHIFT_RAW_CONV1D + 1)));
}

static void test_issue_306(void **state)
{
	struct world w;
	struct fg_runtime_result r;

	(void)state;
	world_306(&w);

	r = sim(&w, "mlx-lm-0.31");
	assert_int_equal(r.n_files, 2);
	assert_true(r.trunk_shift);
	assert_non_null(fg_runtime_shift_reason_name(r.shift_reason));
	assert_string_equal(fg_runtime_shift_reason_name(r.shift_reason), "mtp_keys");
	assert_true(r.has_probe);
	assert_near(r.trunk_probe_after, 2.7906);
	expect(&r, "double_shifted", "dropped", "broken");
	assert_int_equal(r.head_keys_dropped, 29);
	assert_false(r.head_shift);

	r = sim(&w, "mlx-lm-0.32");
	assert_false(r.trunk_shift);
	assert_null(fg_runtime_shift_reason_name(r.shift_reason));
	assert_near(r.trunk_probe_after, 1.7906);
	expect(&r, "ok", "dropped", "ok");

	/* PR 990 keeps the head and shifts it only with the trunk: nothing shifts here. */
	r = sim(&w, "mlx-lm-pr990");
	assert_false(r.trunk_shift);
	assert_false(r.head_shift);
	expect(&r, "ok", "ok", "ok");

	/* MTPLX loads the trunk through mlx-lm 0.31 and its guard refuses above 2.4. */
	r = sim(&w, "mtplx-2.12");
	assert_true(r.trunk_shift);
	assert_string_equal(fg_runtime_shift_reason_name(r.shift_reason), "mtp_keys");
	assert_near(r.trunk_probe_after, 2.7906);
	assert_string_equal(fg_runtime_trunk_name(r.trunk), "double_shifted");
	assert_string_equal(fg_runtime_outcome_name(r.outcome), "refused");
	r = sim(&w, "mtplx-2.11");
	assert_string_equal(fg_runtime_trunk_name(r.trunk), "double_shifted");
	assert_string_equal(fg_runtime_outcome_name(r.outcome), "refused");

	/* Ollama: one detection shifts trunk and head together. */
	r = sim(&w, "ollama");
	assert_true(r.trunk_shift);
	assert_string_equal(fg_runtime_shift_reason_name(r.shift_reason), "mtp_keys");
	assert_true(r.head_shift);
	assert_near(r.trunk_probe_after, 2.7906);
	expect(&r, "double_shifted", "double_shifted", "broken");
	assert_int_equal(r.head_after, FG_CONV_DOUBLE_SHIFTED);

	/* Hugging Face never stores a shift but computes 1 + w: an absolute trunk is doubled. */
	r = sim(&w, "hf");
	assert_false(r.trunk_shift);
	assert_null(fg_runtime_shift_reason_name(r.shift_reason));
	assert_near(r.trunk_probe_after, 2.7906);
	expect(&r, "double_shifted", "double_shifted", "broken");
	world_release(&w);
}

/* The same artifact without the embedded keys (what forged ships) loads clean in mlx-lm 0.31. */
static void test_issue_306_without_keys(void **state)
{
	struct world w;
	struct fg_runtime_result r;

	(void)state;
	world_init(&w, 1);
	add_file(&w, "model-00001-of-00002.safetensors", 1, 1, 0, 0, 0, 0);
	add_file(&w, "model-00002-of-00002.safetensors", 1, 1, 0, 0, 0, 0);
	set_trunk(&w, FG_CONV_ABSOLUTE, 1.7906, 0.9666);
	r = sim(&w, "mlx-lm-0.31");
	assert_false(r.trunk_shift);
	assert_near(r.trunk_probe_after, 1.7906);
	expect(&r, "ok", "absent", "ok");
	r = sim(&w, "ollama");
	assert_false(r.trunk_shift);
	expect(&r, "ok", "absent", "ok");
	world_release(&w);
}

/* A raw Hugging Face checkpoint: delta trunk, raw conv1d, delta head in the shards. */
static void world_raw_hf(struct world *w)
{
	world_init(w, 1);
	add_file(w, "model-00001-of-00002.safetensors", 1, 1, 0, 0, 0, 1);
	add_file(w, "model-00002-of-00002.safetensors", 1, 1, 0, 15, 15, 0);
	set_trunk(w, FG_CONV_DELTA, 0.78, 0.03);
	set_decision(&w->embedded, FG_CONV_DELTA, 0.78, -0.41);
	w->in.embedded_head = &w->embedded;
}

static void test_raw_hf(void **state)
{
	struct world w;
	struct fg_runtime_result r;

	(void)state;
	world_raw_hf(&w);

	r = sim(&w, "mlx-lm-0.32");
	assert_true(r.trunk_shift);
	assert_string_equal(fg_runtime_shift_reason_name(r.shift_reason), "raw_conv1d");
	assert_near(r.trunk_probe_after, 1.78);
	expect(&r, "ok", "dropped", "ok");

	r = sim(&w, "mlx-lm-0.31");
	assert_true(r.trunk_shift);
	assert_near(r.trunk_probe_after, 1.78);
	expect(&r, "ok", "dropped", "ok");

	r = sim(&w, "hf");
	assert_false(r.trunk_shift);
	assert_false(r.head_shift);
	assert_near(r.trunk_probe_after, 1.78);
	expect(&r, "ok", "ok", "ok");

	r = sim(&w, "ollama");
	assert_true(r.trunk_shift);
	assert_true(r.head_shift);
	assert_near(r.trunk_probe_after, 1.78);
	expect(&r, "ok", "ok", "ok");
	assert_int_equal(r.head_after, FG_CONV_ABSOLUTE);

	r = sim(&w, "mlx-lm-pr990");
	assert_true(r.trunk_shift);
	assert_string_equal(fg_runtime_shift_reason_name(r.shift_reason), "raw_conv1d");
	assert_true(r.head_shift);
	expect(&r, "ok", "ok", "ok");

	/* MTPLX heals only a sidecar: the head in the shards is not its head. */
	r = sim(&w, "mtplx-2.12");
	assert_true(r.trunk_shift);
	assert_string_equal(fg_runtime_trunk_name(r.trunk), "ok");
	assert_string_equal(fg_runtime_head_name(r.head), "absent");
	world_release(&w);
}

/* MTPLX issue 176: an absolute trunk and a delta sidecar head (mtp.safetensors). */
static void world_sidecar(struct world *w, enum fg_convention head_conv, double head_qk, double head_low)
{
	world_init(w, 0);
	add_file(w, "model.safetensors", 1, 0, 0, 0, 0, 0);
	add_file(w, "mtp.safetensors", 0, 0, 1, 15, 15, 0);
	set_trunk(w, FG_CONV_ABSOLUTE, 1.7906, 0.9666);
	set_decision(&w->sidecar, head_conv, head_qk, head_low);
	w->in.sidecar_head = &w->sidecar;
}

static void test_delta_sidecar(void **state)
{
	struct world w;
	struct fg_runtime_result r;

	(void)state;
	world_sidecar(&w, FG_CONV_DELTA, 0.78, -0.41);

	/* 2.12 heals the delta head (+1) and passes the absolute trunk as is. */
	w.in.moe = 1;
	r = sim(&w, "mtplx-2.12");
	assert_false(r.trunk_shift);
	assert_near(r.trunk_probe_after, 1.7906);
	assert_true(r.head_shift);
	assert_int_equal(r.head_after, FG_CONV_ABSOLUTE);
	expect(&r, "ok", "ok", "ok");

	/* 2.11 loads a MoE sidecar byte for byte: the head is inverted, MTP useless. */
	r = sim(&w, "mtplx-2.11");
	assert_false(r.trunk_shift);
	assert_false(r.head_shift);
	expect(&r, "ok", "inverted", "degraded");

	/* ... but heals a dense one. */
	w.in.moe = 0;
	r = sim(&w, "mtplx-2.11");
	assert_true(r.head_shift);
	expect(&r, "ok", "ok", "ok");

	/* mlx-lm does not read the sidecar (not model*.safetensors) and runs no head. */
	r = sim(&w, "mlx-lm-0.31");
	assert_int_equal(r.n_files, 1);
	assert_string_equal(r.files[0], "model.safetensors");
	assert_false(r.trunk_shift);
	assert_int_equal(r.head_keys_dropped, 0);
	expect(&r, "ok", "dropped", "ok");
	world_release(&w);
}

static void test_absolute_and_double_sidecar(void **state)
{
	struct world w;
	struct fg_runtime_result r;

	(void)state;
	/* Issue 301's head: shifted twice on disk (q 2.79); no heal, so it stays doubled. */
	world_sidecar(&w, FG_CONV_DOUBLE_SHIFTED, 2.79, 1.93);
	r = sim(&w, "mtplx-2.12");
	assert_false(r.head_shift);
	expect(&r, "ok", "double_shifted", "degraded");
	world_release(&w);

	/* An absolute sidecar passes byte for byte. */
	world_sidecar(&w, FG_CONV_ABSOLUTE, 1.7906, 0.2734);
	r = sim(&w, "mtplx-2.12");
	assert_false(r.head_shift);
	expect(&r, "ok", "ok", "ok");
	r = sim(&w, "mtplx-2.11");
	assert_false(r.head_shift);
	expect(&r, "ok", "ok", "ok");
	world_release(&w);
}

/* A delta trunk converted to an MLX layout without its +1: nothing triggers a shift. */
static void test_delta_trunk_mlx_layout(void **state)
{
	struct world w;
	struct fg_runtime_result r;

	(void)state;
	world_init(&w, 0);
	add_file(&w, "model.safetensors", 1, 0, 0, 0, 0, 0);
	set_trunk(&w, FG_CONV_DELTA, 0.78, 0.3);
	r = sim(&w, "mlx-lm-0.32");
	assert_false(r.trunk_shift);
	assert_null(fg_runtime_shift_reason_name(r.shift_reason));
	assert_near(r.trunk_probe_after, 0.78);
	expect(&r, "missing_shift", "absent", "broken");
	r = sim(&w, "mlx-lm-0.31");
	expect(&r, "missing_shift", "absent", "broken");
	/* Too low is not what MTPLX's guard looks for: broken, not refused. */
	r = sim(&w, "mtplx-2.12");
	assert_string_equal(fg_runtime_trunk_name(r.trunk), "missing_shift");
	assert_string_equal(fg_runtime_outcome_name(r.outcome), "broken");
	/* Hugging Face computes 1 + w and is fine with it. */
	r = sim(&w, "hf");
	assert_near(r.trunk_probe_after, 1.78);
	assert_string_equal(fg_runtime_trunk_name(r.trunk), "ok");
	world_release(&w);
}

static void test_plain_family(void **state)
{
	struct world w;
	struct fg_runtime_result r;
	size_t n = 0;
	const struct fg_runtime *all = fg_runtime_all(&n);

	(void)state;
	/* A plain family: a probe mean of 0.9 would read "missing_shift" if it were zero-centred. */
	world_init(&w, 1);
	add_file(&w, "model-00001-of-00002.safetensors", 1, 1, 0, 0, 0, 1);
	add_file(&w, "model-00002-of-00002.safetensors", 1, 1, 0, 40, 40, 0);
	w.in.style = FG_STYLE_PLAIN;
	set_trunk(&w, FG_CONV_PLAIN, 0.9, 0.9);
	set_decision(&w.embedded, FG_CONV_PLAIN, 0.9, 0.9);
	w.in.embedded_head = &w.embedded;
	for (size_t i = 0; i < n; i++) {
		r = sim(&w, all[i].id);
		if (r.trunk_shift || r.head_shift || strcmp(fg_runtime_trunk_name(r.trunk), "ok") != 0)
			fail_msg("%s: plain family shifted (trunk %d head %d) or trunk %s", all[i].id,
				 r.trunk_shift, r.head_shift, fg_runtime_trunk_name(r.trunk));
		assert_null(fg_runtime_shift_reason_name(r.shift_reason));
		assert_near(r.trunk_probe_after, 0.9);
		assert_string_not_equal(fg_runtime_head_name(r.head), "inverted");
		assert_string_not_equal(fg_runtime_head_name(r.head), "double_shifted");
		assert_string_not_equal(fg_runtime_outcome_name(r.outcome), "broken");
		assert_string_not_equal(fg_runtime_outcome_name(r.outcome), "refused");
	}
	r = sim(&w, "mlx-lm-0.31");
	expect(&r, "ok", "dropped", "ok");
	r = sim(&w, "ollama");
	expect(&r, "ok", "ok", "ok");
	r = sim(&w, "hf");
	expect(&r, "ok", "ok", "ok");
	world_release(&w);
}

static void test_files_index_rule(void **state)
{
	struct world w;
	struct fg_runtime_result r;

	(void)state;
	/*
	 * An index naming two shards, and a stray model-extra.safetensors that
	 * holds mtp.* keys: pruning the index does not help against mlx-lm.
	 */
	world_init(&w, 1);
	add_file(&w, "model-00001-of-00002.safetensors", 1, 1, 0, 0, 0, 0);
	add_file(&w, "model-00002-of-00002.safetensors", 1, 1, 0, 0, 0, 0);
	add_file(&w, "model-extra.safetensors", 1, 0, 0, 5, 5, 0);
	set_trunk(&w, FG_CONV_ABSOLUTE, 1.7906, 0.9666);
	r = sim(&w, "hf");
	assert_int_equal(r.n_files, 2);
	assert_false(reads(&r, "model-extra.safetensors"));
	assert_true(reads(&r, "model-00001-of-00002.safetensors"));
	assert_true(reads(&r, "model-00002-of-00002.safetensors"));
	r = sim(&w, "mlx-lm-0.32");
	assert_int_equal(r.n_files, 3);
	assert_true(reads(&r, "model-extra.safetensors"));
	r = sim(&w, "mlx-lm-0.31");
	assert_true(reads(&r, "model-extra.safetensors"));
	assert_true(r.trunk_shift);
	assert_string_equal(fg_runtime_shift_reason_name(r.shift_reason), "mtp_keys");
	assert_string_equal(fg_runtime_trunk_name(r.trunk), "double_shifted");
	/* A head held only by the stray shard: runtimes that follow the index never see it. */
	set_decision(&w.embedded, FG_CONV_DELTA, 0.78, -0.41);
	w.in.embedded_head = &w.embedded;
	r = sim(&w, "hf");
	assert_string_equal(fg_runtime_head_name(r.head), "absent");
	r = sim(&w, "mlx-lm-pr990");
	assert_string_equal(fg_runtime_head_name(r.head), "inverted");
	world_release(&w);

	/* Without an index Hugging Face reads model.safetensors only. */
	world_init(&w, 0);
	add_file(&w, "model.safetensors", 1, 0, 0, 0, 0, 0);
	add_file(&w, "model-extra.safetensors", 1, 0, 0, 5, 5, 0);
	set_trunk(&w, FG_CONV_DELTA, 0.78, 0.3);
	r = sim(&w, "hf");
	assert_int_equal(r.n_files, 1);
	assert_string_equal(r.files[0], "model.safetensors");
	r = sim(&w, "mlx-lm-0.31");
	assert_int_equal(r.n_files, 2);
	world_release(&w);
}

static void test_files_ollama_rule(void **state)
{
	struct world w;
	struct fg_runtime_result r;

	(void)state;
	/* "model-*-of-*.safetensors" is Ollama's first pattern: model.safetensors is not read. */
	world_init(&w, 1);
	add_file(&w, "model-00001-of-00002.safetensors", 1, 1, 0, 0, 0, 0);
	add_file(&w, "model-00002-of-00002.safetensors", 1, 1, 0, 0, 0, 0);
	add_file(&w, "model.safetensors", 1, 0, 0, 29, 29, 0);
	set_trunk(&w, FG_CONV_ABSOLUTE, 1.7906, 0.9666);
	r = sim(&w, "ollama");
	assert_int_equal(r.n_files, 2);
	assert_false(reads(&r, "model.safetensors"));
	assert_false(r.trunk_shift);
	assert_string_equal(fg_runtime_trunk_name(r.trunk), "ok");
	world_release(&w);

	/* model.safetensors beats the catch-all: the sidecar's mtp.* keys are not read. */
	world_init(&w, 0);
	add_file(&w, "model.safetensors", 1, 0, 0, 0, 0, 0);
	add_file(&w, "mtp.safetensors", 0, 0, 1, 15, 15, 0);
	set_trunk(&w, FG_CONV_ABSOLUTE, 1.7906, 0.9666);
	r = sim(&w, "ollama");
	assert_int_equal(r.n_files, 1);
	assert_string_equal(r.files[0], "model.safetensors");
	assert_false(r.trunk_shift);
	world_release(&w);

	/* A lone mtp.safetensors is read when nothing else matches. */
	world_init(&w, 0);
	add_file(&w, "mtp.safetensors", 0, 0, 0, 15, 15, 0);
	set_trunk(&w, FG_CONV_ABSOLUTE, 1.7906, 0.9666);
	r = sim(&w, "ollama");
	assert_int_equal(r.n_files, 1);
	assert_string_equal(r.files[0], "mtp.safetensors");
	assert_true(r.trunk_shift);
	assert_string_equal(fg_runtime_shift_reason_name(r.shift_reason), "mtp_keys");
	r = sim(&w, "mlx-lm-0.31");
	assert_int_equal(r.n_files, 0);
	world_release(&w);

	/* Ollama's patterns match in the folder itself, not in sub-folders. */
	world_init(&w, 0);
	add_file(&w, "mtp/weights.safetensors", 0, 0, 1, 15, 15, 0);
	set_trunk(&w, FG_CONV_ABSOLUTE, 1.7906, 0.9666);
	r = sim(&w, "ollama");
	assert_int_equal(r.n_files, 0);
	assert_false(r.trunk_shift);
	world_release(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_table, release_index),
		cmocka_unit_test_teardown(test_names, release_index),
		cmocka_unit_test_teardown(test_issue_306, release_index),
		cmocka_unit_test_teardown(test_issue_306_without_keys, release_index),
		cmocka_unit_test_teardown(test_raw_hf, release_index),
		cmocka_unit_test_teardown(test_delta_sidecar, release_index),
		cmocka_unit_test_teardown(test_absolute_and_double_sidecar, release_index),
		cmocka_unit_test_teardown(test_delta_trunk_mlx_layout, release_index),
		cmocka_unit_test_teardown(test_plain_family, release_index),
		cmocka_unit_test_teardown(test_files_index_rule, release_index),
		cmocka_unit_test_teardown(test_files_ollama_rule, release_index),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
