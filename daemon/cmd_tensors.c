/*
 * cmd_tensors.c: `forged tensors FILE [--json]`: the header of one
 * safetensors file, tensor by tensor in file order, with statistics of every
 * float tensor (the only subcommand that reads every byte of a file).
 */
#include "daemon/cli.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forge/safetensors.h"
#include "forge/stats.h"

static int run_tensors(int argc, char **argv);

const struct fg_cmd fg_cmd_tensors = {
	.name = "tensors",
	.summary = "list a safetensors file's tensors with statistics",
	.usage = "forged tensors FILE.safetensors [--json]\n\n"
		 "Validates FILE strictly and lists every tensor in file order: name, dtype,\n"
		 "shape, data offsets and, for float tensors, min/max/mean over finite values\n"
		 "and the count of non-finite values.  --json prints one forged.tensors.v1\n"
		 "document.  Exit 2 when FILE is unreadable or malformed.\n",
	.run = run_tensors,
};

static cJSON *stats_json(const struct fg_tstats *s)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	if (s->has_finite) {
		cJSON_AddNumberToObject(o, "min", s->min);
		cJSON_AddNumberToObject(o, "max", s->max);
		cJSON_AddNumberToObject(o, "mean", s->mean);
	} else {
		cJSON_AddNullToObject(o, "min");
		cJSON_AddNullToObject(o, "max");
		cJSON_AddNullToObject(o, "mean");
	}
	cJSON_AddNumberToObject(o, "nonfinite", (double)s->nonfinite);
	return o;
}

static cJSON *tensor_json(const struct fg_tensor *t)
{
	cJSON *o = cJSON_CreateObject(), *shape, *offs;
	struct fg_tstats s;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "name", t->name);
	cJSON_AddStringToObject(o, "dtype", fg_dtype_name(t->dtype));
	shape = cJSON_AddArrayToObject(o, "shape");
	offs = cJSON_AddArrayToObject(o, "offsets");
	if (!shape || !offs) {
		cJSON_Delete(o);
		return NULL;
	}
	for (int d = 0; d < t->rank; d++)
		cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
	cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)t->begin));
	cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)t->end));
	if (fg_tstats_compute(t, &s) == 0)
		cJSON_AddItemToObject(o, "stats", stats_json(&s));
	return o;
}

static int print_json(const struct fg_st_file *f)
{
	cJSON *root = cJSON_CreateObject(), *md, *list;
	char *text;

	if (!root)
		return FG_EXIT_INTERNAL;
	cJSON_AddStringToObject(root, "schema", "forged.tensors.v1");
	cJSON_AddStringToObject(root, "file", f->path);
	md = cJSON_AddObjectToObject(root, "metadata");
	list = cJSON_AddArrayToObject(root, "tensors");
	for (size_t i = 0; md && i < f->n_meta; i++)
		cJSON_AddStringToObject(md, f->meta[i].key, f->meta[i].value);
	for (size_t i = 0; list && i < f->n_tensors; i++)
		cJSON_AddItemToArray(list, tensor_json(&f->tensors[i]));
	text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!text) {
		fprintf(stderr, "forged: error: out of memory printing %zu tensors\n", f->n_tensors);
		return FG_EXIT_INTERNAL;
	}
	fputs(text, stdout);
	fputc('\n', stdout);
	free(text);
	return FG_EXIT_OK;
}

static void format_shape(char *buf, size_t len, const struct fg_tensor *t)
{
	size_t pos = 0;

	pos += (size_t)snprintf(buf, len, "[");
	for (int d = 0; d < t->rank && pos < len; d++)
		pos += (size_t)snprintf(buf + pos, len - pos, "%s%llu", d ? "," : "",
					(unsigned long long)t->shape[d]);
	if (pos < len)
		snprintf(buf + pos, len - pos, "]");
}

static int print_human(const struct fg_st_file *f)
{
	int width = 4;

	printf("%s: %zu tensors, header %llu bytes, data %llu bytes\n", f->path, f->n_tensors,
	       (unsigned long long)f->header_len,
	       (unsigned long long)(f->file_size - f->data_start));
	for (size_t i = 0; i < f->n_meta; i++)
		printf("metadata %s = %s\n", f->meta[i].key, f->meta[i].value);
	for (size_t i = 0; i < f->n_tensors; i++) {
		int n = (int)strlen(f->tensors[i].name);

		if (n > width)
			width = n > 72 ? 72 : n;
	}
	printf("%-*s  %-7s  %-18s  %-24s  %12s  %12s  %12s  %s\n", width, "name", "dtype", "shape",
	       "offsets", "min", "max", "mean", "nonfinite");
	for (size_t i = 0; i < f->n_tensors; i++) {
		const struct fg_tensor *t = &f->tensors[i];
		char shape[256], offs[64];
		struct fg_tstats s;

		format_shape(shape, sizeof(shape), t);
		snprintf(offs, sizeof(offs), "[%llu, %llu)", (unsigned long long)t->begin,
			 (unsigned long long)t->end);
		printf("%-*s  %-7s  %-18s  %-24s", width, t->name, fg_dtype_name(t->dtype), shape, offs);
		if (fg_tstats_compute(t, &s) == 0 && s.has_finite)
			printf("  %12.6g  %12.6g  %12.6g  %llu\n", s.min, s.max, s.mean,
			       (unsigned long long)s.nonfinite);
		else if (fg_dtype_is_float(t->dtype))
			printf("  %12s  %12s  %12s  %llu\n", "-", "-", "-", (unsigned long long)t->nelem);
		else
			printf("\n");
	}
	return FG_EXIT_OK;
}

static int run_tensors(int argc, char **argv)
{
	struct fg_st_file *f = NULL;
	struct fg_err err = { 0, "" };
	const char *path = NULL;
	int json = 0, rc;

	for (int i = 1; i < argc; i++) {
		if (fg_cli_is_help(argv[i])) {
			fputs(fg_cmd_tensors.usage, stdout);
			return FG_EXIT_OK;
		}
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (argv[i][0] == '-' && argv[i][1])
			return fg_cli_usage_error(&fg_cmd_tensors, "unknown option '%s'", argv[i]);
		else if (path)
			return fg_cli_usage_error(&fg_cmd_tensors, "one FILE only (got '%s' and '%s')",
						  path, argv[i]);
		else
			path = argv[i];
	}
	if (!path)
		return fg_cli_usage_error(&fg_cmd_tensors, "missing FILE");
	if (fg_st_open(&f, path, &err) != 0)
		return fg_cli_fail(&err);
	rc = json ? print_json(f) : print_human(f);
	fg_st_close(f);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "forged: error: writing output failed\n");
		return FG_EXIT_INTERNAL;
	}
	return rc;
}
