/*
 * bench_pull.c: the remote reads of `forged inspect` through forge/source/pull, timed.
 *
 * Until inspect itself takes URL sources, this driver reads what it will
 * read, the way it will read it: config.json, the index (shard names from its
 * weight_map), the MTP sidecar config.json names, then every file's 8-byte
 * header length in one call, every header in a second call, and every norm
 * tensor (names ending in "norm.weight", plus the head's pre_fc_norm_*) in a
 * third; the calls run their ranges in parallel.  It prints one JSON line:
 * wall time, requests, bytes fetched and served from the cache, the remote
 * files' total size, the headers' and norms' bytes.
 *
 *   bench_pull SOURCE [CACHE_DIR]
 */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "forge/source/pull/pull.h"
#include "forge/format/safetensors.h"

#define MAX_FILES 4096

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int die(const struct fg_err *err)
{
	fprintf(stderr, "bench_pull: %s\n", err->msg);
	return 2;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int is_norm(const char *name)
{
	return ends_with(name, "norm.weight") || ends_with(name, "pre_fc_norm_embedding.weight") ||
	       ends_with(name, "pre_fc_norm_hidden.weight");
}

static int add_name(char **names, size_t *n, const char *name)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp(names[i], name) == 0)
			return 0;
	if (*n == MAX_FILES)
		return -1;
	names[*n] = strdup(name);
	return names[(*n)++] ? 0 : -1;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	static char *names[MAX_FILES];
	static struct fg_pull_range len_r[MAX_FILES], hdr_r[MAX_FILES];
	static struct fg_st_file *st[MAX_FILES];
	struct fg_pull_opts o;
	struct fg_pull *p = NULL;
	struct fg_err err = { 0 };
	struct fg_pull_stats s;
	struct fg_pull_range *norms = NULL;
	size_t n_files = 0, n_norms = 0, cap_norms = 0;
	uint64_t total = 0, header_bytes = 0, norm_bytes = 0;
	uint8_t *text = NULL;
	size_t len = 0;
	cJSON *config, *index = NULL;
	double t0;
	int rc;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: bench_pull SOURCE [CACHE_DIR]\n");
		return 2;
	}
	fg_pull_opts_init(&o);
	o.cache_dir = argc == 3 ? argv[2] : NULL;
	t0 = now_s();
	if (fg_pull_open(&p, argv[1], &o, &err))
		return die(&err);
	if (fg_pull_get(p, "config.json", &text, &len, 16u << 20, &err))
		return die(&err);
	config = cJSON_Parse((const char *)text);
	free(text);
	rc = fg_pull_get(p, "model.safetensors.index.json", &text, &len, 256u << 20, &err);
	if (rc == 0) {
		const cJSON *map, *e;

		index = cJSON_Parse((const char *)text);
		free(text);
		map = cJSON_GetObjectItemCaseSensitive(index, "weight_map");
		cJSON_ArrayForEach(e, map)
			if (cJSON_IsString(e) && add_name(names, &n_files, e->valuestring))
				return 2;
		qsort(names, n_files, sizeof(*names), cmp_str);
	} else if (rc == FG_ENOTFOUND) {
		add_name(names, &n_files, "model.safetensors");
	} else {
		return die(&err);
	}
	const cJSON *extra = cJSON_GetObjectItemCaseSensitive(config, "mlx_lm_extra_tensors");
	const cJSON *mtp = cJSON_GetObjectItemCaseSensitive(extra, "mtp_file");
	if (cJSON_IsString(mtp) && add_name(names, &n_files, mtp->valuestring))
		return 2;

	for (size_t i = 0; i < n_files; i++)
		len_r[i] = (struct fg_pull_range){ names[i], 0, 8, NULL };
	if (fg_pull_ranges(p, len_r, n_files, &err))
		return die(&err);
	for (size_t i = 0; i < n_files; i++) {
		uint64_t n = 0;

		for (int b = 7; b >= 0; b--)
			n = (n << 8) | len_r[i].data[b];
		if (n > FG_ST_HEADER_MAX) {
			fprintf(stderr, "bench_pull: %s: header length %" PRIu64 "\n", names[i], n);
			return 2;
		}
		hdr_r[i] = (struct fg_pull_range){ names[i], 0, 8 + n, NULL };
	}
	if (fg_pull_ranges(p, hdr_r, n_files, &err))
		return die(&err);
	for (size_t i = 0; i < n_files; i++) {
		uint64_t size;

		if (fg_pull_size(p, names[i], &size, &err))
			return die(&err);
		total += size;
		header_bytes += hdr_r[i].len;
		if (fg_st_parse_header(&st[i], hdr_r[i].data, (size_t)hdr_r[i].len, size, names[i],
				       &err))
			return die(&err);
		for (size_t t = 0; t < st[i]->n_tensors; t++) {
			const struct fg_tensor *ts = &st[i]->tensors[t];

			if (!is_norm(ts->name))
				continue;
			if (n_norms == cap_norms) {
				cap_norms = cap_norms ? 2 * cap_norms : 1024;
				norms = realloc(norms, cap_norms * sizeof(*norms));
				if (!norms)
					return 3;
			}
			norms[n_norms++] = (struct fg_pull_range){
				names[i], st[i]->data_start + ts->begin, fg_tensor_bytes(ts), NULL
			};
			norm_bytes += fg_tensor_bytes(ts);
		}
	}
	if (fg_pull_ranges(p, norms, n_norms, &err))
		return die(&err);
	fg_pull_stats(p, &s);
	printf("{\"wall_s\": %.3f, \"files\": %zu, \"remote_bytes\": %" PRIu64
	       ", \"header_bytes\": %" PRIu64 ", \"norm_tensors\": %zu, \"norm_bytes\": %" PRIu64
	       ", \"requests\": %" PRIu64 ", \"bytes_fetched\": %" PRIu64
	       ", \"bytes_from_cache\": %" PRIu64 ", \"bytes_to_fetch\": %" PRIu64 "}\n",
	       now_s() - t0, n_files, total, header_bytes, n_norms, norm_bytes, s.requests,
	       s.bytes_fetched, s.bytes_from_cache, s.bytes_to_fetch);
	for (size_t i = 0; i < n_files; i++) {
		fg_st_close(st[i]);
		free(names[i]);
	}
	free(norms);
	cJSON_Delete(config);
	cJSON_Delete(index);
	fg_pull_close(p);
	return 0;
}
