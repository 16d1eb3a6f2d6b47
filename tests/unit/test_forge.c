/*
 * test_forge.c: fg_forge_run (forge/artifact/forge.h) on a generated
 * fixture ($FIXTURES, skipped without it): the result carries the
 * provenance it wrote, equal to forged.json on disk, so a caller storing
 * the artifact never has to read the file back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "forge/artifact/forge.h"

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	return remove(path);
}

static void test_result_carries_provenance(void **state)
{
	const char *fixtures = getenv("FIXTURES");
	char tmp[] = "/tmp/forged-test-forge-XXXXXX", src[1024], out[1100], prov_path[PATH_MAX + 16];
	struct fg_forge_opts o = { .version = "test" };
	struct fg_forge_result res;
	struct fg_err err = { 0, "" };
	cJSON *on_disk = NULL;

	(void)state;
	if (!fixtures || !*fixtures)
		skip();
	assert_non_null(mkdtemp(tmp));
	snprintf(src, sizeof(src), "%s/qwen35_hf", fixtures);
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
	cJSON_Delete(on_disk);
	fg_forge_result_release(&res);
	assert_null(res.provenance);
	nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_result_carries_provenance),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
