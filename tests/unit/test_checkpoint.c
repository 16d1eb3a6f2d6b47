/*
 * test_checkpoint.c: a checkpoint folder as mlx-lm, Hugging Face tools and
 * MTPLX each see it: shard glob, index cross-check, sidecar discovery,
 * text_config merge, and the errors for broken folders.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forge/source/checkpoint.h"
#include "tests/unit/support.h"

static char root[PATH_MAX];
static int case_no;

/* A fresh folder for one test case. */
static const char *new_case(char *buf, size_t len)
{
	char name[32];

	snprintf(name, sizeof(name), "case%d", ++case_no);
	return make_dir(buf, len, root, name);
}

static int setup(void **state)
{
	(void)state;
	tmpdir_new(root, sizeof(root), "ckpt");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return rm_tree(root);
}

static const struct fg_ckpt_file *file_named(const struct fg_ckpt *c, const char *name)
{
	for (size_t i = 0; i < c->n_files; i++)
		if (strcmp(c->files[i].name, name) == 0)
			return &c->files[i];
	return NULL;
}

static void test_glob_index_and_merge(void **state)
{
	static const char *const s1[] = { "model.embed.weight", "model.layers.0.q_norm.weight", NULL };
	static const char *const s2[] = { "lm_head.weight", NULL };
	char dir[PATH_MAX];
	struct fg_ckpt *c = NULL;
	struct fg_err err = { 0 };
	const struct fg_ckpt_file *where = NULL;
	const struct fg_tensor *t;
	const cJSON *v;

	(void)state;
	new_case(dir, sizeof(dir));
	write_text(dir, "config.json",
		   "{\"model_type\": \"qwen3_5\", \"hidden_size\": 1, \"tie\": true,"
		   " \"text_config\": {\"model_type\": \"qwen3_5_text\", \"hidden_size\": 64,"
		   " \"mtp_num_hidden_layers\": 1}}");
	shard_write_names(dir, "model-00002-of-00002.safetensors", s2);
	shard_write_names(dir, "model-00001-of-00002.safetensors", s1);
	write_text(dir, "model.safetensors.index.json",
		   "{\"metadata\": {\"total_size\": 12}, \"weight_map\": {"
		   "\"model.embed.weight\": \"model-00001-of-00002.safetensors\","
		   "\"model.layers.0.q_norm.weight\": \"model-00001-of-00002.safetensors\","
		   "\"lm_head.weight\": \"model-00002-of-00002.safetensors\"}}");
	write_text(dir, "notes.safetensors.txt", "not a shard");
	assert_int_equal(fg_ckpt_open(&c, dir, &err), 0);
	assert_int_equal(c->n_files, 2);
	/* Sorted by name, both globbed and indexed, no stray, no mismatch. */
	assert_string_equal(c->files[0].name, "model-00001-of-00002.safetensors");
	assert_true(c->files[0].globbed && c->files[0].in_index && !c->files[0].stray);
	assert_int_equal(c->n_mismatch, 0);
	assert_int_equal(fg_ckpt_stray_count(c), 0);
	assert_int_equal(c->sidecar, -1);
	t = fg_ckpt_find(c, "lm_head.weight", &where);
	assert_non_null(t);
	assert_string_equal(where->name, "model-00002-of-00002.safetensors");
	assert_null(fg_ckpt_find(c, "mtp.fc.weight", NULL));
	/* text_config wins over the top level, but model_type stays the top level's. */
	v = cJSON_GetObjectItemCaseSensitive(c->config, "hidden_size");
	assert_int_equal(v->valueint, 64);
	assert_non_null(cJSON_GetObjectItemCaseSensitive(c->config, "mtp_num_hidden_layers"));
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c->config, "tie")));
	assert_string_equal(fg_ckpt_model_type(c), "qwen3_5");
	assert_string_equal(fg_ckpt_text_model_type(c), "qwen3_5_text");
	assert_string_equal(cJSON_GetObjectItemCaseSensitive(c->config, "model_type")->valuestring,
			    "qwen3_5");
	fg_ckpt_free(c);
}

static void test_stray_and_pruned_index(void **state)
{
	static const char *const trunk[] = { "model.norm.weight", "mtp.fc.weight", NULL };
	static const char *const extra[] = { "mtp.norm.weight", NULL };
	char dir[PATH_MAX];
	struct fg_ckpt *c = NULL;
	struct fg_err err = { 0 };
	const struct fg_ckpt_file *where = NULL;
	int unlisted = 0, missing = 0;

	(void)state;
	new_case(dir, sizeof(dir));
	write_text(dir, "config.json", "{\"model_type\": \"qwen3_5\"}");
	shard_write_names(dir, "model.safetensors", trunk);
	shard_write_names(dir, "model-extra.safetensors", extra);
	/* The index was pruned of mtp.fc.weight and names a tensor the shard lacks. */
	write_text(dir, "model.safetensors.index.json",
		   "{\"weight_map\": {\"model.norm.weight\": \"model.safetensors\","
		   " \"model.ghost.weight\": \"model.safetensors\"}}");
	assert_int_equal(fg_ckpt_open(&c, dir, &err), 0);
	assert_int_equal(c->n_files, 2);
	assert_true(file_named(c, "model-extra.safetensors")->stray);
	assert_false(file_named(c, "model.safetensors")->stray);
	assert_int_equal(fg_ckpt_stray_count(c), 1);
	/* mlx-lm's view still finds the pruned and the stray tensors. */
	assert_non_null(fg_ckpt_find(c, "mtp.fc.weight", NULL));
	assert_non_null(fg_ckpt_find(c, "mtp.norm.weight", &where));
	assert_string_equal(where->name, "model-extra.safetensors");
	for (size_t i = 0; i < c->n_mismatch; i++) {
		if (c->mismatch[i].problem == FG_INDEX_UNLISTED)
			unlisted++;
		if (c->mismatch[i].problem == FG_INDEX_MISSING) {
			missing++;
			assert_string_equal(c->mismatch[i].tensor, "model.ghost.weight");
		}
	}
	assert_int_equal(unlisted, 2); /* mtp.fc.weight and mtp.norm.weight */
	assert_int_equal(missing, 1);
	fg_ckpt_free(c);
}

static void test_sidecars(void **state)
{
	static const char *const trunk[] = { "model.norm.weight", NULL };
	static const char *const head[] = { "mtp.fc.weight", NULL };
	char dir[PATH_MAX], sub[PATH_MAX + 16];
	struct fg_ckpt *c = NULL;
	struct fg_err err = { 0 };

	(void)state;
	new_case(dir, sizeof(dir));
	write_text(dir, "config.json",
		   "{\"model_type\": \"qwen3_5\", \"mlx_lm_extra_tensors\": {\"mtp_file\": \"heads/h.safetensors\"}}");
	shard_write_names(dir, "model.safetensors", trunk);
	make_dir(sub, sizeof(sub), dir, "heads");
	shard_write_names(sub, "h.safetensors", head);
	shard_write_names(dir, "mtp.safetensors", head);
	assert_int_equal(fg_ckpt_open(&c, dir, &err), 0);
	/* The pointer wins; the conventional name is still recorded as a sidecar. */
	assert_true(c->sidecar >= 0);
	assert_string_equal(c->files[c->sidecar].name, "heads/h.safetensors");
	assert_true(file_named(c, "mtp.safetensors")->sidecar);
	/* Sidecars are not shards: lookups do not see their tensors. */
	assert_null(fg_ckpt_find(c, "mtp.fc.weight", NULL));
	fg_ckpt_free(c);

	/* Without a pointer: mtp.safetensors, before mtp/weights.safetensors. */
	new_case(dir, sizeof(dir));
	write_text(dir, "config.json", "{\"model_type\": \"qwen3_5\"}");
	shard_write_names(dir, "model.safetensors", trunk);
	make_dir(sub, sizeof(sub), dir, "mtp");
	shard_write_names(sub, "weights.safetensors", head);
	assert_int_equal(fg_ckpt_open(&c, dir, &err), 0);
	assert_string_equal(c->files[c->sidecar].name, "mtp/weights.safetensors");
	fg_ckpt_free(c);

	/* model-mtp.safetensors is a sidecar that mlx-lm's glob also loads. */
	new_case(dir, sizeof(dir));
	write_text(dir, "config.json", "{\"model_type\": \"qwen3_5\"}");
	shard_write_names(dir, "model.safetensors", trunk);
	shard_write_names(dir, "model-mtp.safetensors", head);
	assert_int_equal(fg_ckpt_open(&c, dir, &err), 0);
	assert_string_equal(c->files[c->sidecar].name, "model-mtp.safetensors");
	assert_true(c->files[c->sidecar].globbed);
	assert_non_null(fg_ckpt_find(c, "mtp.fc.weight", NULL));
	fg_ckpt_free(c);
}

static void expect_open_error(const char *dir, int code, const char *phrase)
{
	struct fg_ckpt *c = NULL;
	struct fg_err err = { 0 };

	assert_int_equal(fg_ckpt_open(&c, dir, &err), code);
	assert_null(c);
	if (!strstr(err.msg, phrase))
		fail_msg("message '%s' lacks '%s'", err.msg, phrase);
}

static void test_broken_folders(void **state)
{
	static const char *const trunk[] = { "model.norm.weight", NULL };
	char dir[PATH_MAX], p[PATH_MAX + 32];
	FILE *fp;

	(void)state;
	new_case(dir, sizeof(dir));
	shard_write_names(dir, "model.safetensors", trunk);
	expect_open_error(dir, FG_EINPUT, "no config.json");

	write_text(dir, "config.json", "{\"model_type\": ");
	expect_open_error(dir, FG_EINPUT, "config.json: invalid JSON");

	write_text(dir, "config.json", "[1]");
	expect_open_error(dir, FG_EINPUT, "config.json: not a JSON object");

	write_text(dir, "config.json", "{\"model_type\": \"qwen3_5\"}");
	write_text(dir, "model.safetensors.index.json",
		   "{\"weight_map\": {\"model.norm.weight\": \"model-00009-of-00009.safetensors\"}}");
	expect_open_error(dir, FG_EINPUT, "names 'model-00009-of-00009.safetensors'");

	write_text(dir, "model.safetensors.index.json",
		   "{\"weight_map\": {\"model.norm.weight\": \"../../etc/passwd\"}}");
	expect_open_error(dir, FG_EINPUT, "outside the folder");

	write_text(dir, "model.safetensors.index.json", "{\"metadata\": {}}");
	expect_open_error(dir, FG_EINPUT, "no \"weight_map\"");
	snprintf(p, sizeof(p), "%s/model.safetensors.index.json", dir);
	unlink(p);

	write_text(dir, "config.json",
		   "{\"model_type\": \"qwen3_5\", \"mlx_lm_extra_tensors\": {\"mtp_file\": \"/etc/passwd\"}}");
	expect_open_error(dir, FG_EINPUT, "mtp_file is not a relative path");
	write_text(dir, "config.json",
		   "{\"model_type\": \"qwen3_5\", \"mlx_lm_extra_tensors\": {\"mtp_file\": \"gone.safetensors\"}}");
	expect_open_error(dir, FG_EINPUT, "names 'gone.safetensors', which is missing");

	/* An unreadable (truncated) shard names the checkpoint and the shard. */
	write_text(dir, "config.json", "{\"model_type\": \"qwen3_5\"}");
	snprintf(p, sizeof(p), "%s/model-2.safetensors", dir);
	fp = fopen(p, "w");
	assert_non_null(fp);
	fwrite("\x40\0\0\0\0\0\0\0{\"a\"", 1, 12, fp);
	fclose(fp);
	expect_open_error(dir, FG_EINPUT, "model-2.safetensors: header length runs past the end");

	expect_open_error("/nonexistent/ckpt", FG_EINPUT, "/nonexistent/ckpt: cannot open checkpoint");
}

static void test_single_file(void **state)
{
	static const char *const head[] = { "mtp.fc.weight", "mtp.norm.weight", NULL };
	char dir[PATH_MAX], p[PATH_MAX + 32];
	struct fg_ckpt *c = NULL;
	struct fg_err err = { 0 };

	(void)state;
	new_case(dir, sizeof(dir));
	shard_write_names(dir, "head.safetensors", head);
	snprintf(p, sizeof(p), "%s/head.safetensors", dir);
	/* A lone file needs no config.json. */
	assert_int_equal(fg_ckpt_open(&c, p, &err), 0);
	assert_true(c->single_file);
	assert_null(c->config);
	assert_int_equal(c->n_files, 1);
	assert_non_null(fg_ckpt_find(c, "mtp.norm.weight", NULL));
	fg_ckpt_free(c);
}

/* A folder whose one shard holds a 64 KiB norm, as finding 4 needs it. */
static void big_norm_case(char *dir, size_t len, char *shard, size_t shard_len)
{
	static float v[16384];
	struct fg_st_out out;
	struct fg_err err = { 0 };

	new_case(dir, len);
	write_text(dir, "config.json", "{\"model_type\": \"qwen3_5\"}");
	for (size_t i = 0; i < 16384; i++)
		v[i] = 1.0f;
	memset(&out, 0, sizeof(out));
	out.name = "model.layers.0.self_attn.q_norm.weight";
	out.dtype = FG_DT_F32;
	out.rank = 1;
	out.shape[0] = 16384;
	out.data = v;
	snprintf(shard, shard_len, "%s/model.safetensors", dir);
	assert_int_equal(fg_st_write(shard, &out, 1, NULL, 0, &err), 0);
}

/* Issue 11, finding 4: a shard that shrinks after its header was read is an input error, never SIGBUS. */
static void test_shrunk_shard_read(void **state)
{
	char dir[128], shard[256];
	struct fg_ckpt *c = NULL;
	struct fg_err err = { 0 };
	const struct fg_tensor *t;
	int rc;

	(void)state;
	big_norm_case(dir, sizeof(dir), shard, sizeof(shard));
	assert_int_equal(fg_ckpt_open(&c, dir, &err), 0);
	t = fg_ckpt_find(c, "model.layers.0.self_attn.q_norm.weight", NULL);
	assert_non_null(t);
	/* An rsync --inplace re-upload: the file is cut to its header. */
	assert_int_equal(truncate(shard, (off_t)c->files[0].st->data_start), 0);
	rc = fg_ckpt_fetch(c, &t, 1, &err);
	if (rc == 0) /* before the fix, the mapped bytes were read here: SIGBUS */
		assert_true(((volatile const uint8_t *)t->data)[fg_tensor_bytes(t) - 1] == 0x3f);
	assert_int_equal(rc, FG_EINPUT);
	assert_non_null(strstr(err.msg, "changed since its header was read"));
	fg_ckpt_free(c);
}

struct touch {
	const struct fg_tensor *t;
	unsigned sum;
};

static int touch_all(void *ctx, struct fg_err *err)
{
	struct touch *x = ctx;

	(void)err;
	for (uint64_t i = 0; i < fg_tensor_bytes(x->t); i += 4096)
		x->sum += ((volatile const uint8_t *)x->t->data)[i];
	return 0;
}

/* The same for a forge's mapped reads: the guard turns SIGBUS into an error. */
static void test_shrunk_shard_mapped(void **state)
{
	char dir[128], shard[256];
	struct fg_ckpt *c = NULL;
	struct fg_err err = { 0 };
	struct touch x = { NULL, 0 };

	(void)state;
	big_norm_case(dir, sizeof(dir), shard, sizeof(shard));
	assert_int_equal(fg_ckpt_open(&c, dir, &err), 0);
	x.t = fg_ckpt_find(c, "model.layers.0.self_attn.q_norm.weight", NULL);
	assert_int_equal(fg_ckpt_map(c, &x.t, 1, &err), 0);
	assert_int_equal(fg_st_guard(touch_all, &x, shard, &err), 0); /* whole: reads fine */
	assert_int_equal(truncate(shard, (off_t)c->files[0].st->data_start), 0);
	assert_int_equal(fg_st_guard(touch_all, &x, shard, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "changed while it was read"));
	fg_ckpt_free(c);
}

/*
 * The cross-check walks each shard's names in header order and looks a
 * name up only when the walk misses: an index in another order (files
 * interleaved, names reversed), an escaped key and a name mapped to the
 * wrong file are all judged as a lookup would judge them.
 */
static void test_index_order(void **state)
{
	static const char *const a[] = { "a.0.weight", "a.1.weight", "a.2.weight", "a.3.weight", "a.4.weight", NULL };
	static const char *const b[] = { "b.0.weight", "b.1.weight", "b.2.weight", NULL };
	char dir[PATH_MAX];
	struct fg_ckpt *c = NULL;
	struct fg_err err = { 0 };
	int missing = 0, wrong = 0;

	(void)state;
	new_case(dir, sizeof(dir));
	write_text(dir, "config.json", "{\"model_type\": \"qwen3_5\"}");
	shard_write_names(dir, "model-a.safetensors", a);
	shard_write_names(dir, "model-b.safetensors", b);
	write_text(dir, "model.safetensors.index.json",
		   "{\"weight_map\": {\"a.0.weight\": \"model-a.safetensors\", \"a.1.weight\": \"model-a.safetensors\","
		   " \"b.0.weight\": \"model-b.safetensors\", \"a.2.weight\": \"model-a.safetensors\","
		   " \"b.2.weight\": \"model-b.safetensors\", \"b.1.weight\": \"model-b.safetensors\","
		   " \"a.4.weight\": \"model-b.safetensors\", \"\\u0061.3.weight\": \"model-a.safetensors\"}}");
	assert_int_equal(fg_ckpt_open(&c, dir, &err), 0);
	for (size_t i = 0; i < c->n_mismatch; i++) {
		assert_string_equal(c->mismatch[i].tensor, "a.4.weight");
		if (c->mismatch[i].problem == FG_INDEX_MISSING) {
			missing++;
			assert_string_equal(c->mismatch[i].file, "model-b.safetensors");
		} else {
			assert_int_equal(c->mismatch[i].problem, FG_INDEX_WRONG_FILE);
			assert_string_equal(c->mismatch[i].file, "model-a.safetensors");
			wrong++;
		}
	}
	assert_int_equal(missing, 1);
	assert_int_equal(wrong, 1);
	fg_ckpt_free(c);

	/* The index in the headers' own order: nothing to report. */
	write_text(dir, "model.safetensors.index.json",
		   "{\"weight_map\": {\"a.0.weight\": \"model-a.safetensors\", \"a.1.weight\": \"model-a.safetensors\","
		   " \"a.2.weight\": \"model-a.safetensors\", \"a.3.weight\": \"model-a.safetensors\","
		   " \"a.4.weight\": \"model-a.safetensors\", \"b.0.weight\": \"model-b.safetensors\","
		   " \"b.1.weight\": \"model-b.safetensors\", \"b.2.weight\": \"model-b.safetensors\"}}");
	assert_int_equal(fg_ckpt_open(&c, dir, &err), 0);
	assert_int_equal(c->n_mismatch, 0);
	fg_ckpt_free(c);
}

/* A NUL byte anywhere in the index is the error reported, whatever else is wrong with it. */
static void test_index_nul(void **state)
{
	static const char *const a[] = { "a.0.weight", NULL };
	char dir[PATH_MAX], path[PATH_MAX + 40], *text;
	struct fg_ckpt *c = NULL;
	struct fg_err err = { 0 };
	size_t n = 3u << 20; /* past the first 1 MiB window of the check */
	FILE *fp;

	(void)state;
	new_case(dir, sizeof(dir));
	write_text(dir, "config.json", "{\"model_type\": \"qwen3_5\"}");
	shard_write_names(dir, "model-a.safetensors", a);
	/* A syntax error early (a bare word), white space, then a NUL near the end. */
	text = malloc(n);
	assert_non_null(text);
	memset(text, ' ', n);
	memcpy(text, "{\"weight_map\": oops", strlen("{\"weight_map\": oops"));
	text[n - 10] = '\0';
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	fp = fopen(path, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(text, 1, n, fp), n);
	fclose(fp);
	assert_int_equal(fg_ckpt_open(&c, dir, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "not JSON text (contains a NUL byte)"));
	/* The same NUL after a good weight_map, beyond the first window. */
	memset(text, ' ', n);
	memcpy(text, "{\"weight_map\": {\"a.0.weight\": \"model-a.safetensors\"}",
	       strlen("{\"weight_map\": {\"a.0.weight\": \"model-a.safetensors\"}"));
	text[n - 2] = '}';
	text[n - 10] = '\0';
	fp = fopen(path, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(text, 1, n, fp), n);
	fclose(fp);
	assert_int_equal(fg_ckpt_open(&c, dir, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "not JSON text (contains a NUL byte)"));
	free(text);
}

/* One builder for every caller's pull options; the defaults write into the caller's buffer. */
static void test_pull_opts(void **state)
{
	static const char *const hosts[] = { "hub.example", "127.0.0.1:8080" };
	struct fg_pull_opts o, a, b;
	char buf_a[PATH_MAX], buf_b[PATH_MAX], tiny[4];

	(void)state;
	fg_ckpt_pull_opts(&o, "/state/cache", hosts, 2);
	assert_int_equal(o.merge_gap, 0);
	assert_string_equal(o.user_agent, FG_CKPT_USER_AGENT);
	assert_string_equal(o.user_agent, "forged/" FG_VERSION);
	assert_string_equal(o.cache_dir, "/state/cache");
	assert_ptr_equal(o.allow_hosts, hosts);
	assert_int_equal(o.n_allow_hosts, 2);
	assert_int_equal(o.max_connections, 8); /* the rest is fg_pull_opts_init's */
	fg_ckpt_pull_opts(&o, NULL, NULL, 0);
	assert_null(o.cache_dir);

	assert_int_equal(setenv("FORGED_CACHE_DIR", "/tmp/one", 1), 0);
	fg_ckpt_pull_defaults(&a, buf_a, sizeof(buf_a));
	assert_int_equal(setenv("FORGED_CACHE_DIR", "/tmp/two", 1), 0);
	fg_ckpt_pull_defaults(&b, buf_b, sizeof(buf_b));
	assert_ptr_equal(a.cache_dir, buf_a);
	assert_string_equal(a.cache_dir, "/tmp/one"); /* not overwritten by the second call */
	assert_string_equal(b.cache_dir, "/tmp/two");
	assert_int_equal(a.merge_gap, 0);
	assert_int_equal(a.n_allow_hosts, 0);
	assert_null(fg_ckpt_default_cache_dir(tiny, sizeof(tiny)));
	assert_int_equal(unsetenv("FORGED_CACHE_DIR"), 0);
	assert_int_equal(unsetenv("XDG_CACHE_HOME"), 0);
	assert_int_equal(setenv("HOME", "/home/q", 1), 0);
	assert_string_equal(fg_ckpt_default_cache_dir(buf_a, sizeof(buf_a)), "/home/q/.cache/forged");
	/* $XDG_CACHE_HOME when absolute (a relative one is ignored), under $FORGED_CACHE_DIR */
	assert_int_equal(setenv("XDG_CACHE_HOME", "/xdg", 1), 0);
	assert_string_equal(fg_ckpt_default_cache_dir(buf_a, sizeof(buf_a)), "/xdg/forged");
	assert_int_equal(setenv("XDG_CACHE_HOME", "rel", 1), 0);
	assert_string_equal(fg_ckpt_default_cache_dir(buf_a, sizeof(buf_a)), "/home/q/.cache/forged");
	assert_int_equal(setenv("XDG_CACHE_HOME", "/xdg", 1), 0);
	assert_int_equal(setenv("FORGED_CACHE_DIR", "/explicit", 1), 0);
	assert_string_equal(fg_ckpt_default_cache_dir(buf_a, sizeof(buf_a)), "/explicit");
	assert_int_equal(unsetenv("FORGED_CACHE_DIR"), 0);
	assert_int_equal(unsetenv("XDG_CACHE_HOME"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_glob_index_and_merge),
		cmocka_unit_test(test_stray_and_pruned_index),
		cmocka_unit_test(test_sidecars),
		cmocka_unit_test(test_broken_folders),
		cmocka_unit_test(test_single_file),
		cmocka_unit_test(test_pull_opts),
		cmocka_unit_test(test_index_order),
		cmocka_unit_test(test_index_nul),
		cmocka_unit_test(test_shrunk_shard_read),
		cmocka_unit_test(test_shrunk_shard_mapped),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
