/*
 * cmd_version.c: `forged version`: the version and what this build uses.
 */
#include "daemon/cli.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "forge/format/dtype.h"

static int run_version(int argc, char **argv);

const struct fg_cmd fg_cmd_version = {
	.name = "version",
	.summary = "print the version and the build's libraries",
	.usage = "forged version [--json]\n\n"
		 "Prints forged's version, the cJSON version and the SIMD path chosen for\n"
		 "dtype conversion on this CPU.\n",
	.run = run_version,
};

static int run_version(int argc, char **argv)
{
	int json = 0;

	for (int i = 1; i < argc; i++) {
		if (fg_cli_is_help(argv[i])) {
			fputs(fg_cmd_version.usage, stdout);
			return FG_EXIT_OK;
		}
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else
			return fg_cli_usage_error(&fg_cmd_version, "unexpected argument '%s'", argv[i]);
	}
	if (json)
		printf("{\"forged\": \"%s\", \"cjson\": \"%s\", \"simd\": \"%s\"}\n",
		       FG_VERSION, cJSON_Version(), fg_dtype_simd_path());
	else
		printf("forged %s (cJSON %s, simd %s)\n", FG_VERSION, cJSON_Version(),
		       fg_dtype_simd_path());
	return FG_EXIT_OK;
}
