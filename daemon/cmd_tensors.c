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

#include "forge/format/safetensors.h"
#include "forge/model/stats.h"

static int run_tensors(int argc, char **argv);
static const struct option *tensors_longopts(void);

const struct fg_cmd fg_cmd_tensors = {
	.name = "tensors",
	.summary = "list a safetensors file's tensors with statistics",
	.usage = "forged tensors FILE.safetensors [--json]\n\n"
		 "Validates FILE strictly and lists every tensor in file order: name, dtype,\n"
		 "shape, data offsets and, for float tensors, min/max/mean over finite values\n"
		 "and the count of non-finite values.  --json prints one forged.tensors.v1\n"
		 "document.  Exit 2 when FILE is unreadable or malformed.\n",
	.run = run_tensors,
	.options = tensors_longopts,
};

enum { OPT_JSON = 2000 };

static const struct option tensors_options[] = {
	FG_ARGS_GLOBAL_LONGOPTS,
	{ "json", no_argument, NULL, OPT_JSON },
	{ NULL, 0, NULL, 0 },
};

static const struct option *tensors_longopts(void)
{
	return tensors_options;
}

static int tensors_option(void *ctx, int val, const char *arg)
{
	(void)arg;
	if (val != OPT_JSON)
		return fg_args_bad("unknown option");
	*(int *)ctx = 1;
	return 0;
}

/*
 * Numbers are formatted here and added raw: cJSON's own printer formats each
 * double twice and reads it back to check, which dominated the run time on a
 * 100,000-tensor file.  %.17g round-trips every double.
 */
static cJSON *raw_number(double v)
{
	char buf[40];

	snprintf(buf, sizeof(buf), "%.17g", v);
	return cJSON_CreateRaw(buf);
}

static cJSON *raw_count(uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return cJSON_CreateRaw(buf);
}

static cJSON *stats_json(const struct fg_tstats *s)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddItemToObject(o, "min", s->has_finite ? raw_number(s->min) : cJSON_CreateNull());
	cJSON_AddItemToObject(o, "max", s->has_finite ? raw_number(s->max) : cJSON_CreateNull());
	cJSON_AddItemToObject(o, "mean", s->has_finite ? raw_number(s->mean) : cJSON_CreateNull());
	cJSON_AddItemToObject(o, "nonfinite", raw_count(s->nonfinite));
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
		cJSON_AddItemToArray(shape, raw_count(t->shape[d]));
	cJSON_AddItemToArray(offs, raw_count(t->begin));
	cJSON_AddItemToArray(offs, raw_count(fg_tensor_end(t)));
	if (fg_tstats_compute(t, &s) == 0)
		cJSON_AddItemToObject(o, "stats", stats_json(&s));
	return o;
}

/* Print one cJSON item at nesting depth and free it; 0 or -1 when out of memory. */
static int put_item(cJSON *item, int pretty, int depth)
{
	int rc = item ? fg_cli_put_json(stdout, item, pretty, depth) : -1;

	cJSON_Delete(item);
	return rc;
}

/*
 * The document is streamed tensor by tensor, so memory stays flat; pretty,
 * it is laid out as cJSON_Print lays out the whole document.
 */
static int print_json(const struct fg_st_file *f)
{
	int pretty = fg_cli_json_pretty(stdout);
	const char *sep = pretty ? ":\t" : ":", *next = pretty ? ",\n\t" : ",";
	cJSON *md = cJSON_CreateObject();

	for (size_t i = 0; md && i < f->n_meta; i++)
		cJSON_AddStringToObject(md, f->meta[i].key, f->meta[i].value);
	printf("{%s\"schema\"%s\"forged.tensors.v1\"%s\"file\"%s", pretty ? "\n\t" : "", sep, next, sep);
	if (put_item(cJSON_CreateString(f->path), pretty, 1))
		goto nomem;
	printf("%s\"metadata\"%s", next, sep);
	if (put_item(md, pretty, 1))
		goto nomem;
	printf("%s\"tensors\"%s[", next, sep);
	for (size_t i = 0; i < f->n_tensors; i++) {
		if (i)
			fputs(pretty ? ", " : ",", stdout);
		if (put_item(tensor_json(&f->tensors[i]), pretty, 2))
			goto nomem;
	}
	fputs(pretty ? "]\n}\n" : "]}\n", stdout);
	return FG_EXIT_OK;
nomem:
	fprintf(stderr, "forged: error: out of memory printing %zu tensors\n", f->n_tensors);
	return FG_EXIT_INTERNAL;
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
			 (unsigned long long)fg_tensor_end(t));
		printf("%-*s  %-7s  %-18s  %-24s", width, t->name, fg_dtype_name(t->dtype), shape, offs);
		if (fg_tstats_compute(t, &s) == 0 && s.has_finite)
			printf("  %12.6g  %12.6g  %12.6g  %llu\n", s.min, s.max, s.mean,
			       (unsigned long long)s.nonfinite);
		else if (fg_dtype_is_float(t->dtype))
			printf("  %12s  %12s  %12s  %llu\n", "-", "-", "-", (unsigned long long)fg_tensor_nelem(t));
		else
			printf("\n");
	}
	return FG_EXIT_OK;
}

static int run_tensors(int argc, char **argv)
{
	struct fg_st_file *f = NULL;
	struct fg_err err = { 0 };
	const char *path;
	struct fg_args a;
	int json = 0, rc;

	rc = fg_cli_parse(&fg_cmd_tensors, &a, argc, argv, FG_ARGS_GLOBAL_SHORTOPTS, tensors_options, tensors_option,
			  &json, 1, 1, "FILE");
	if (rc != FG_CLI_RUN)
		return rc;
	path = a.pos[0];
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
