/*
 * cmd_version.c: `forged version`: the version and what this build uses.
 */
#include "daemon/cli.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "forge/format/dtype.h"

#define FG_VERSION_SCHEMA "forged.version.v1"

static int run_version(int argc, char **argv);
static const struct option *version_longopts(void);

const struct fg_cmd fg_cmd_version = {
	.name = "version",
	.summary = "print the version and the build's libraries",
	.usage = "forged version [--json]\n\n"
		 "Prints forged's version, the version of every library it runs with (SQLite,\n"
		 "libcurl, libmicrohttpd, zstd, OpenSSL, cJSON: as the loaded libraries report\n"
		 "themselves) and the SIMD path chosen for dtype conversion on this CPU.\n"
		 "--json prints one forged.version.v1 document: schema, forged, cjson, simd and\n"
		 "libraries (an object of library name to version).\n",
	.run = run_version,
	.options = version_longopts,
};

enum { OPT_JSON = 2000 };

static const struct option version_options[] = {
	FG_ARGS_GLOBAL_LONGOPTS,
	{ "json", no_argument, NULL, OPT_JSON },
	{ NULL, 0, NULL, 0 },
};

static const struct option *version_longopts(void)
{
	return version_options;
}

static int version_option(void *ctx, int val, const char *arg)
{
	(void)arg;
	if (val != OPT_JSON)
		return fg_args_bad("unknown option");
	*(int *)ctx = 1;
	return 0;
}

struct lib {
	const char *name;
	const char *version;
};

/* The libraries' own version strings, as the linked (loaded) copies report them. */
static size_t libraries(struct lib *out)
{
	static char mhd[64];
	const curl_version_info_data *curl = curl_version_info(CURLVERSION_NOW);
	const char *ssl = OpenSSL_version(OPENSSL_VERSION);
	size_t n = 0;

	snprintf(mhd, sizeof(mhd), "%s", MHD_get_version());
	out[n++] = (struct lib){ "sqlite3", sqlite3_libversion() };
	out[n++] = (struct lib){ "curl", curl && curl->version ? curl->version : "unknown" };
	out[n++] = (struct lib){ "microhttpd", mhd };
	out[n++] = (struct lib){ "zstd", ZSTD_versionString() };
	out[n++] = (struct lib){ "openssl", ssl ? ssl : "unknown" };
	out[n++] = (struct lib){ "cjson", cJSON_Version() };
	return n;
}

static int print_json(void)
{
	struct lib libs[8];
	size_t n = libraries(libs);
	cJSON *doc = cJSON_CreateObject(), *l = cJSON_CreateObject();
	int rc;

	cJSON_AddStringToObject(doc, "schema", FG_VERSION_SCHEMA);
	cJSON_AddStringToObject(doc, "forged", FG_VERSION);
	cJSON_AddStringToObject(doc, "cjson", cJSON_Version());
	cJSON_AddStringToObject(doc, "simd", fg_dtype_simd_path());
	for (size_t i = 0; i < n; i++)
		cJSON_AddStringToObject(l, libs[i].name, libs[i].version);
	cJSON_AddItemToObject(doc, "libraries", l);
	rc = fg_cli_print_json(doc);
	cJSON_Delete(doc);
	return rc;
}

static int run_version(int argc, char **argv)
{
	struct lib libs[8];
	size_t n;
	struct fg_args a;
	int json = 0, rc;

	rc = fg_cli_parse(&fg_cmd_version, &a, argc, argv, FG_ARGS_GLOBAL_SHORTOPTS, version_options, version_option,
			  &json, 0, 0, "");
	if (rc != FG_CLI_RUN)
		return rc;
	if (json)
		return print_json();
	printf("forged %s (cJSON %s, simd %s)\n", FG_VERSION, cJSON_Version(), fg_dtype_simd_path());
	n = libraries(libs);
	for (size_t i = 0; i < n; i++)
		printf("  %-11s %s\n", libs[i].name, libs[i].version);
	return FG_EXIT_OK;
}
