/*
 * test_forge.c: fg_forge_run (forge/artifact/forge.h) on a generated
 * fixture (fixture_path: $FIXTURES or BUILD/fixtures, skipped without it): the result carries the
 * provenance it wrote, equal to forged.json on disk, so a caller storing
 * the artifact never has to read the file back; progress walks the stage
 * table in order, from 0 to 1, never backwards, with byte counts within
 * stages; any byte range of any plan entry materializes to the bytes of the
 * whole entry (fg_plan_materialize_range against fg_plan_materialize, for
 * every operation, quantized ones in any order, dequantized modules and
 * experts of GPTQ, compressed-tensors and MLX heads too).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forge/artifact/forge.h"
#include "forge/artifact/plan.h"
#include "forge/artifact/policy.h"
#include "forge/core/json.h"
#include "forge/model/mtplx.h"
#include "tests/unit/support.h"

#define SEEN_MAX 512

struct seen {
	size_t n;
	char stage[SEEN_MAX][16];
	double fraction[SEEN_MAX];
	uint64_t done[SEEN_MAX], total[SEEN_MAX];
};

static int record(void *ctx, const struct fg_forge_progress *p)
{
	struct seen *s = ctx;

	if (s->n < SEEN_MAX) {
		snprintf(s->stage[s->n], sizeof(s->stage[0]), "%s", p->stage);
		s->done[s->n] = p->bytes_done;
		s->total[s->n] = p->bytes_total;
		s->fraction[s->n++] = p->fraction;
	}
	return 0;
}

static void test_result_carries_provenance(void **state)
{
	char tmp[PATH_MAX], src[PATH_MAX], out[PATH_MAX + 16], prov_path[PATH_MAX + 16];
	struct seen seen = { 0 };
	struct fg_forge_opts o = { .version = "test", .progress = record, .progress_ctx = &seen };
	static const char *const order[] = { "inspect", "backbone", "sidecar", "provenance", "check", "done" };
	size_t k = 0;
	struct fg_forge_result res;
	struct fg_err err = { 0 };
	cJSON *on_disk = NULL;

	(void)state;
	if (!fixture_path(src, sizeof(src), "qwen35_hf"))
		skip();
	tmpdir_new(tmp, sizeof(tmp), "forge");
	snprintf(out, sizeof(out), "%s/artifact", tmp);
	o.source = src;
	o.out = out;
	if (fg_forge_run(&o, &res, &err) != 0)
		fail_msg("forge: %s", err.msg);
	assert_true(res.ok);
	assert_non_null(res.provenance);
	snprintf(prov_path, sizeof(prov_path), "%s/forged.json", res.artifact);
	assert_int_equal(fg_json_load(&on_disk, prov_path, 64u << 20, &err), 0);
	assert_true(cJSON_Compare(on_disk, res.provenance, 1));
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(res.provenance, "fingerprint")),
			    res.fingerprint);
	assert_true(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(res.provenance, "originals")) > 0);
	assert_non_null(cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(res.provenance, "files"), "mtp.safetensors"));
	assert_string_equal(res.target, FG_FORGE_DEFAULT_TARGET);
	/* The default target's layout: MTPLX's sidecar, which the config points at (layout.h). */
	assert_int_equal(res.n_targets, 1);
	assert_string_equal(res.targets[0], FG_FORGE_DEFAULT_TARGET);
	assert_string_equal(res.head_file, "mtp.safetensors");
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(res.provenance, "layout"), "file")), "mtp.safetensors");
	/*
	 * The head fingerprints were taken while the sidecar was written: equal
	 * to the ones fg_mtplx_head_fingerprint reads back from the files, and
	 * the sidecar's own SHA-256 to the file's.
	 */
	{
		struct fg_head_fingerprints fp;
		const cJSON *files = cJSON_GetObjectItemCaseSensitive(res.provenance, "files");

		assert_int_equal(fg_mtplx_head_fingerprint(res.artifact, &fp, &err), 0);
		assert_string_equal(fp.mtplx, res.head_fingerprint);
		assert_string_equal(fp.legacy, res.fingerprint);
		assert_string_equal(fp.sidecar,
				    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(files, "mtp.safetensors")));
		assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(res.provenance,
											   "head_fingerprint")),
				    res.head_fingerprint);
	}
	cJSON_Delete(on_disk);
	/* A local source: every stage but fetch, in order; fractions from 0 to 1, never backwards. */
	assert_true(seen.n >= 6 && seen.n < SEEN_MAX);
	assert_true(seen.fraction[0] == 0.0 && seen.fraction[seen.n - 1] == 1.0);
	for (size_t i = 0; i < seen.n; i++) {
		if (i)
			assert_true(seen.fraction[i] >= seen.fraction[i - 1]);
		if (k < 6 && strcmp(seen.stage[i], order[k]) == 0)
			k++;
		else if (!k || strcmp(seen.stage[i], order[k - 1]) != 0)
			fail_msg("stage %s out of order", seen.stage[i]);
	}
	assert_int_equal(k, 6);
	/* The sidecar stage counts its bytes: the last report of it has them all. */
	for (size_t i = seen.n; i-- > 0;) {
		if (strcmp(seen.stage[i], "sidecar") == 0) {
			assert_true(seen.total[i] > 0);
			assert_true(seen.done[i] == seen.total[i]);
			break;
		}
	}
	fg_forge_result_release(&res);
	assert_null(res.provenance);
	assert_int_equal(rm_tree(tmp), 0);
}

/* The entries of folder dir, "." and ".." aside; -1 when it cannot be read. */
static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	const struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

/* out_nofollow: a link anywhere in out's parent path is refused before anything is read or written. */
static void test_out_nofollow(void **state)
{
	char tmp[PATH_MAX], real[PATH_MAX + 8], link_path[PATH_MAX + 8], out[PATH_MAX + 32], src[PATH_MAX];
	struct fg_forge_opts o = { .version = "test", .out_nofollow = 1 };
	struct fg_forge_result res;
	struct fg_err err = { 0 };

	(void)state;
	if (!fixture_path(src, sizeof(src), "qwen35_hf"))
		skip();
	tmpdir_new(tmp, sizeof(tmp), "nofollow");
	snprintf(real, sizeof(real), "%s/real", tmp);
	snprintf(link_path, sizeof(link_path), "%s/link", tmp);
	snprintf(out, sizeof(out), "%s/art", link_path);
	assert_int_equal(mkdir(real, 0755), 0);
	assert_int_equal(symlink(real, link_path), 0);
	o.source = src;
	o.out = out;
	assert_int_equal(fg_forge_run(&o, &res, &err), FG_EFORBIDDEN);
	assert_non_null(strstr(err.msg, "symbolic link"));
	fg_forge_result_release(&res);
	/* Nothing was made behind the link (no artifact, no temporary folder), nor beside it. */
	assert_int_equal(entries(real), 0);
	assert_int_equal(entries(tmp), 2);
	o.out_nofollow = 0; /* as spelled: the link is followed */
	assert_int_equal(fg_forge_run(&o, &res, &err), 0);
	assert_true(res.ok);
	fg_forge_result_release(&res);
	snprintf(out, sizeof(out), "%s/art/forged.json", real);
	assert_int_equal(access(out, F_OK), 0);
	assert_int_equal(rm_tree(tmp), 0);
}

/* Remote reads stand for the part of the run before the backbone stage. */
static void test_fetch_fraction(void **state)
{
	(void)state;
	assert_true(fg_forge_fetch_fraction(0, 0) == 0.0);
	assert_true(fg_forge_fetch_fraction(0, 100) == 0.0);
	assert_true(fg_forge_fetch_fraction(50, 100) > 0.0);
	assert_true(fg_forge_fetch_fraction(50, 100) < fg_forge_fetch_fraction(100, 100));
	assert_true(fg_forge_fetch_fraction(100, 100) <= 0.1);
}

/* Every entry of the plan of source for target under policy, in ranges of odd sizes, equals the whole. */
static void ranges_equal_whole(const char *name, const char *target, const char *policy)
{
	static const size_t steps[] = { 1, 3, 4096, 65537, 1u << 20 };
	char src[PATH_MAX];
	const char *rt = target;
	struct fg_inspect *r = NULL;
	struct fg_plan plan;
	struct fg_policy pol;
	struct fg_err err = { 0 };
	size_t checked = 0;

	if (!fixture_path(src, sizeof(src), name))
		fail_msg("%s: no such fixture", name);
	if (fg_inspect_run(&r, src, &rt, 1, &err) || fg_plan_build(r, target, &plan, &err) ||
	    fg_policy_parse(policy, &pol, &err))
		fail_msg("%s: %s", name, err.msg);
	pol.allow_requantize = 1; /* a quantized head quantized again */
	if (fg_policy_apply(&plan, &pol, r, NULL, &err))
		fail_msg("%s: %s", name, err.msg);
	/* The reader maps nothing; a forge maps the files it streams (fg_ckpt_map). */
	for (size_t i = 0; i < r->ckpt->n_files; i++)
		if (fg_ckpt_map_file(r->ckpt, i, &err) != 0)
			fail_msg("%s: %s", name, err.msg);
	for (size_t i = 0; i < plan.n; i++) {
		const struct fg_plan_entry *e = &plan.t[i];
		uint64_t bytes = fg_plan_entry_bytes(e);
		uint8_t *whole, *parts;

		if (e->hidden)
			continue;
		whole = malloc(bytes + 1);
		parts = malloc(bytes + 1);
		assert_non_null(whole);
		assert_non_null(parts);
		if (fg_plan_materialize(&plan, e, whole, &err))
			fail_msg("%s: %s", e->name, err.msg);
		for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
			memset(parts, 0xa5, bytes);
			/* Backwards for quantized parts: the scales and biases of a base must not need its weight first. */
			for (uint64_t left = bytes; left > 0;) {
				uint64_t n = left < steps[s] ? left : steps[s], off = e->op == FG_OP_QUANT ? left - n : bytes - left;

				if (fg_plan_materialize_range(&plan, e, off, (size_t)n, parts + off, &err))
					fail_msg("%s [%llu, +%llu): %s", e->name, (unsigned long long)off,
						 (unsigned long long)n, err.msg);
				left -= n;
			}
			if (memcmp(whole, parts, bytes) != 0)
				fail_msg("%s (%s): ranges of %zu bytes differ from the whole", e->name, name, steps[s]);
		}
		checked++;
		free(whole);
		free(parts);
	}
	assert_true(checked > 0);
	assert_int_equal(fg_plan_materialize_range(&plan, &plan.t[0], fg_plan_entry_bytes(&plan.t[0]), 1,
						   (uint8_t[1]){ 0 }, &err), FG_EINTERNAL);
	fg_plan_release(&plan);
	fg_inspect_free(r);
}

static void test_materialize_range(void **state)
{
	char probe[PATH_MAX];

	(void)state;
	if (!fixture_path(probe, sizeof(probe), "qwen35_hf"))
		skip();
	ranges_equal_whole("qwen35_hf", "mtplx-2.12", "keep");                   /* views, shifts */
	ranges_equal_whole("qwen35_hf", "mtplx-2.12", "affine:4:64");            /* quantized parts */
	ranges_equal_whole("qwen35_hf", "mtplx-2.12", "mxfp4");
	ranges_equal_whole("deepseek_v3_fp8", "hf", "keep");                     /* FP8 */
	ranges_equal_whole("qwen35_moe_hf_numbered", "mtplx-2.12", "keep");      /* stacks */
	ranges_equal_whole("qwen35_moe_hf_numbered", "mtplx-2.12", "affine:3:32"); /* quantized stacks */
	ranges_equal_whole("qwen35_moe_hf_fused_linear", "mtplx-2.12", "keep");  /* splits */
	ranges_equal_whole("qwen35_moe_hf_fused_bmm", "mtplx-2.12", "keep");     /* transposes */
	ranges_equal_whole("q_gptq_head", "hf", "keep");                         /* dequantized modules */
	ranges_equal_whole("q_ct_moe_head", "hf", "keep");                       /* dequantized numbered experts */
	ranges_equal_whole("q_mlx_lm_head", "hf", "keep");                       /* a stacked MLX module, dequantized */
	ranges_equal_whole("q_gptq_head", "hf", "affine:4:64");                  /* dequantized, then quantized */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fetch_fraction),
		cmocka_unit_test(test_materialize_range),
		cmocka_unit_test(test_out_nofollow),
		cmocka_unit_test(test_result_carries_provenance),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
