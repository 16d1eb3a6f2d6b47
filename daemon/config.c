/*
 * config.c: defaults, config file and flags for `forged serve` (config.h).
 * Each setting is a row of one table, read from the file and from flags by
 * the same code, so a key and its flag cannot drift apart.
 */
#include "daemon/config.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "api/validate.h"
#include "daemon/args.h"
#include "forge/core/json.h"
#include "store/store.h"
#include "forge/artifact/forge.h"
#include "forge/artifact/layout.h"
#include "forge/source/pull/pull.h"
#include "forge/verify/verify.h"
#include "store/store.h"

enum kind { K_LISTEN, K_PATH, K_UINT, K_SIZE, K_INT, K_ROOTS, K_HOSTS, K_FRACTION, K_STORE, K_TARGETS };

struct setting {
	const char *key;
	enum kind kind;
	size_t offset;
	long long min, max;
};

static const struct setting settings[] = {
	{ "listen", K_LISTEN, 0, 0, 0 },
	{ "state_dir", K_PATH, offsetof(struct fg_config, state_dir), 0, 0 },
	{ "workers", K_UINT, offsetof(struct fg_config, workers), 0, 256 },
	{ "tokens_file", K_PATH, offsetof(struct fg_config, tokens_file), 0, 0 },
	{ "allow_roots", K_ROOTS, 0, 0, 0 },
	{ "allow_hosts", K_HOSTS, 0, 0, 0 },
	{ "max_body_bytes", K_SIZE, offsetof(struct fg_config, max_body_bytes), 1024, 1 << 30 },
	{ "queue_cap", K_INT, offsetof(struct fg_config, queue_cap), 1, 1000000 },
	{ "drain_seconds", K_UINT, offsetof(struct fg_config, drain_seconds), 0, 3600 },
	{ "max_attempts", K_INT, offsetof(struct fg_config, max_attempts), 1, 100 },
	{ "store_url", K_STORE, offsetof(struct fg_config, store_url), 0, 0 },
	{ "lease_seconds", K_INT, offsetof(struct fg_config, lease_seconds), 3, 3600 },
	{ "http_threads", K_UINT, offsetof(struct fg_config, http_threads), 1, 256 },
	{ "per_ip_connections", K_UINT, offsetof(struct fg_config, per_ip_connections), 1, 256 },
	/* A number strictly inside (0, 1); min and max are unused. */
	{ "collapse_threshold", K_FRACTION, offsetof(struct fg_config, collapse_threshold), 0, 0 },
	{ "artifacts_dir", K_PATH, offsetof(struct fg_config, artifacts_dir), 0, 0 },
	{ "etag_ttl_seconds", K_UINT, offsetof(struct fg_config, etag_ttl_seconds), 0, 31536000 },
	{ "inspect_seconds", K_UINT, offsetof(struct fg_config, inspect_seconds), 1, 3600 },
	/* A target list ("mtplx-2.12,vllm-mlx"), checked against the runtime table. */
	{ "forge_target", K_TARGETS, offsetof(struct fg_config, forge_target), 0, 0 },
};

#define N_SETTINGS (sizeof(settings) / sizeof(settings[0]))

static void defaults(struct fg_config *cfg)
{
	const char *sd = getenv("STATE_DIRECTORY");
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	struct fg_pull_opts pull;

	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->listen_addr, sizeof(cfg->listen_addr), "127.0.0.1");
	cfg->port = 8470;
	/* systemd may pass several folders separated by ':'; the first is ours. */
	if (sd && *sd)
		snprintf(cfg->state_dir, sizeof(cfg->state_dir), "%.*s", (int)strcspn(sd, ":"), sd);
	else
		snprintf(cfg->state_dir, sizeof(cfg->state_dir), "./forged-state");
	cfg->workers = cpus > 0 ? (unsigned)cpus : 1;
	cfg->max_body_bytes = FG_API_MAX_BODY_DEFAULT;
	cfg->queue_cap = 1000;
	cfg->drain_seconds = 30;
	cfg->max_attempts = 3;
	cfg->lease_seconds = FG_STORE_LEASE_DEFAULT;
	cfg->http_threads = 16;
	cfg->per_ip_connections = FG_API_PER_IP_LIMIT_DEFAULT;
	cfg->collapse_threshold = FG_VERIFY_COLLAPSE_DEFAULT;
	/* artifacts_dir stays "": STATE/artifacts, once state_dir is final (fg_config_load). */
	fg_pull_opts_init(&pull);
	cfg->etag_ttl_seconds = pull.cache_ttl_seconds;
	cfg->inspect_seconds = FG_API_INSPECT_SECONDS_DEFAULT;
}

/* "ADDR:PORT", "[V6]:PORT" or ":PORT". */
static int parse_listen(struct fg_config *cfg, const char *v, struct fg_err *err)
{
	const char *colon = strrchr(v, ':');
	char *end;
	long port;
	size_t alen;

	if (!colon)
		return fg_err_set(err, FG_EUSAGE, "listen '%s' is not ADDR:PORT", v);
	port = strtol(colon + 1, &end, 10);
	if (*end || port < 0 || port > 65535 || colon[1] == '\0')
		return fg_err_set(err, FG_EUSAGE, "listen '%s': bad port", v);
	alen = (size_t)(colon - v);
	if (alen >= 2 && v[0] == '[' && v[alen - 1] == ']') {
		v++;
		alen -= 2;
	}
	if (alen >= sizeof(cfg->listen_addr))
		return fg_err_set(err, FG_EUSAGE, "listen '%s': address too long", v);
	if (alen)
		snprintf(cfg->listen_addr, sizeof(cfg->listen_addr), "%.*s", (int)alen, v);
	cfg->port = (uint16_t)port;
	return 0;
}

static int add_list(char (*list)[PATH_MAX], size_t *n, size_t width, const char *v, const char *key,
		    struct fg_err *err)
{
	char *base = (char *)list;

	if (*n == FG_CONFIG_MAX_LIST)
		return fg_err_set(err, FG_EUSAGE, "%s: more than %d entries", key, FG_CONFIG_MAX_LIST);
	if (!*v || strlen(v) >= width)
		return fg_err_set(err, FG_EUSAGE, "%s: entry '%s' is empty or too long", key, v);
	snprintf(base + *n * width, width, "%s", v);
	(*n)++;
	return 0;
}

/* Apply one setting from text (flags, file strings) or a number (file). */
static int apply(struct fg_config *cfg, const struct setting *st, const char *text, double num, int is_num,
		 struct fg_err *err)
{
	char *field = (char *)cfg + st->offset, *end;
	long long v;

	switch (st->kind) {
	case K_LISTEN:
		return is_num ? fg_err_set(err, FG_EUSAGE, "listen must be a string") : parse_listen(cfg, text, err);
	case K_PATH:
		if (is_num || !*text || strlen(text) >= PATH_MAX)
			return fg_err_set(err, FG_EUSAGE, "%s must be a non-empty path", st->key);
		snprintf(field, PATH_MAX, "%s", text);
		return 0;
	case K_ROOTS:
		return add_list(cfg->allow_roots, &cfg->n_allow_roots, PATH_MAX, text, st->key, err);
	case K_TARGETS: {
		const struct fg_runtime *rows[FG_LAYOUT_MAX_TARGETS];
		size_t n;
		int rc;

		if (is_num || !*text)
			return fg_err_set(err, FG_EUSAGE, "%s must be a list of runtime ids", st->key);
		if (strlen(text) >= sizeof(cfg->forge_target))
			return fg_err_set(err, FG_EUSAGE, "%s is longer than %zu characters", st->key,
					  sizeof(cfg->forge_target) - 1);
		if ((rc = fg_layout_targets(text, rows, &n, err)) != 0)
			return fg_err_prefix(err, FG_EUSAGE, "%s: ", st->key);
		snprintf(field, sizeof(cfg->forge_target), "%s", text);
		return 0;
	}
	case K_HOSTS:
		return add_list((char (*)[PATH_MAX])cfg->allow_hosts, &cfg->n_allow_hosts, 256, text, st->key, err);
	case K_STORE:
		/* "": the default, sqlite://STATE/forged.db. */
		if (is_num || strlen(text) >= sizeof(cfg->store_url))
			return fg_err_set(err, FG_EUSAGE, "%s must be sqlite:///PATH or postgres://USER@HOST/DB", st->key);
		if (*text && !fg_store_is_postgres(text) && strncmp(text, "sqlite://", 9) != 0)
			return fg_err_set(err, FG_EUSAGE, "%s '%s': not sqlite:///PATH or postgres://USER@HOST/DB",
					  st->key, text);
		snprintf(cfg->store_url, sizeof(cfg->store_url), "%s", text);
		return 0;
	case K_FRACTION: {
		double x = num;

		if (!is_num) {
			x = strtod(text, &end);
			if (!*text || *end)
				return fg_err_set(err, FG_EUSAGE, "%s '%s' is not a number", st->key, text);
		}
		if (!(x > 0.0 && x < 1.0))
			return fg_err_set(err, FG_EUSAGE, "%s %g is not inside (0, 1)", st->key, x);
		*(double *)(void *)field = x;
		return 0;
	}
	default:
		break;
	}
	if (is_num) {
		int64_t n;

		/* Range-checked as a double: converting 1e300 to an integer is undefined. */
		if (fg_json_to_int(num, st->min, st->max, &n) != 0) {
			char shown[32];
			int prec;

			/* The shortest text that reads back as the same double: 1e+300, 2.5. */
			for (prec = 15; prec < 17; prec++) {
				snprintf(shown, sizeof(shown), "%.*g", prec, num);
				if (strtod(shown, NULL) == num)
					break;
			}
			if (prec == 17)
				snprintf(shown, sizeof(shown), "%.17g", num);
			return fg_err_set(err, FG_EUSAGE, "%s %s is not an integer within %lld..%lld", st->key, shown,
					  st->min, st->max);
		}
		v = n;
	} else {
		v = strtoll(text, &end, 10);
		if (!*text || *end)
			return fg_err_set(err, FG_EUSAGE, "%s '%s' is not an integer", st->key, text);
	}
	if (v < st->min || v > st->max)
		return fg_err_set(err, FG_EUSAGE, "%s %lld is outside %lld..%lld", st->key, v, st->min, st->max);
	if (st->kind == K_UINT)
		*(unsigned *)field = (unsigned)v;
	else if (st->kind == K_SIZE)
		*(size_t *)field = (size_t)v;
	else
		*(int *)field = (int)v;
	return 0;
}

static int load_file(struct fg_config *cfg, const char *path, struct fg_err *err)
{
	cJSON *doc = NULL;
	const cJSON *kv, *item;
	int rc = fg_json_load(&doc, path, 1u << 20, err);

	if (rc)
		return rc;
	if (!cJSON_IsObject(doc)) {
		cJSON_Delete(doc);
		return fg_err_set(err, FG_EINPUT, "%s: not a JSON object", path);
	}
	cJSON_ArrayForEach(kv, doc) {
		const struct setting *st = NULL;

		for (size_t i = 0; i < N_SETTINGS; i++)
			if (strcmp(settings[i].key, kv->string) == 0)
				st = &settings[i];
		if (!st) {
			rc = fg_err_set(err, FG_EINPUT, "%s: unknown key '%s'", path, kv->string);
			break;
		}
		if (st->kind == K_ROOTS || st->kind == K_HOSTS) {
			if (!cJSON_IsArray(kv)) {
				rc = fg_err_set(err, FG_EINPUT, "%s: '%s' must be an array of strings", path, kv->string);
				break;
			}
			cJSON_ArrayForEach(item, kv) {
				rc = cJSON_IsString(item) ? apply(cfg, st, item->valuestring, 0, 0, err)
							  : fg_err_set(err, FG_EINPUT, "%s: '%s' holds a non-string", path, kv->string);
				if (rc)
					break;
			}
		} else if (cJSON_IsString(kv)) {
			rc = apply(cfg, st, kv->valuestring, 0, 0, err);
		} else if (cJSON_IsNumber(kv)) {
			rc = apply(cfg, st, NULL, kv->valuedouble, 1, err);
		} else {
			rc = fg_err_set(err, FG_EINPUT, "%s: '%s' has the wrong type", path, kv->string);
		}
		if (rc) {
			fg_err_prefix(err, FG_EINPUT, "%s: ", path);
			break;
		}
	}
	cJSON_Delete(doc);
	return rc;
}

/*
 * The flags: --config FILE, then one per setting, its key with '-' for '_'
 * (a setting's option value is FLAG_BASE + its row), then the global
 * options.  Made once from settings[], so a new key is a new flag.
 */
enum { FLAG_CONFIG = 2999, FLAG_BASE = 3000 };

const struct option *fg_config_longopts(void)
{
	static char names[N_SETTINGS][64];
	static struct option opts[N_SETTINGS + 6];
	static const struct option tail[] = { FG_ARGS_GLOBAL_LONGOPTS, { NULL, 0, NULL, 0 } };
	size_t n = 0;

	if (opts[0].name)
		return opts;
	opts[n++] = (struct option){ "config", required_argument, NULL, FLAG_CONFIG };
	for (size_t i = 0; i < N_SETTINGS; i++) {
		snprintf(names[i], sizeof(names[i]), "%s", settings[i].key);
		for (char *p = names[i]; *p; p++)
			if (*p == '_')
				*p = '-';
		opts[n++] = (struct option){ names[i], required_argument, NULL, FLAG_BASE + (int)i };
		/* --store is the store_url key too (the name a farm's docs use). */
		if (strcmp(settings[i].key, "store_url") == 0)
			opts[n++] = (struct option){ "store", required_argument, NULL, FLAG_BASE + (int)i };
	}
	for (size_t i = 0; i < sizeof(tail) / sizeof(tail[0]); i++)
		opts[n++] = tail[i];
	return opts;
}

#define MAX_FLAGS 256

/* The flags of one command line, in order, to apply once the file is read. */
struct flags {
	const char *file;
	struct {
		const struct setting *st;
		const char *value;
	} v[MAX_FLAGS];
	size_t n;
};

static int take_flag(void *ctx, int val, const char *arg)
{
	struct flags *f = ctx;

	if (val == FLAG_CONFIG) {
		f->file = arg;
		return 0;
	}
	if (val < FLAG_BASE || val >= FLAG_BASE + (int)N_SETTINGS)
		return fg_args_bad("unknown option");
	if (f->n == MAX_FLAGS)
		return fg_args_bad("more than %d options", MAX_FLAGS);
	f->v[f->n].st = &settings[val - FLAG_BASE];
	f->v[f->n++].value = arg;
	return 0;
}

int fg_config_load(struct fg_config *cfg, int argc, char **argv, struct fg_err *err)
{
	struct flags *f = calloc(1, sizeof(*f));
	struct fg_args *a = calloc(1, sizeof(*a));
	int roots_from_flags = 0, hosts_from_flags = 0, rc = 0;

	defaults(cfg);
	if (!f || !a) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory reading the options");
		goto out;
	}
	fg_args_parse(a, argc, argv, FG_ARGS_GLOBAL_SHORTOPTS, fg_config_longopts(), take_flag, f);
	if (a->error[0]) {
		rc = fg_err_set(err, FG_EUSAGE, "%s", a->error);
		goto out;
	}
	if (a->n_pos) {
		rc = fg_err_set(err, FG_EUSAGE, "unexpected argument '%s'", a->pos[0]);
		goto out;
	}
	if (f->file && (rc = load_file(cfg, f->file, err)) != 0)
		goto out;
	for (size_t i = 0; i < f->n; i++) {
		const struct setting *st = f->v[i].st;

		/* A list flag replaces the file's list; repeat the flag to add more. */
		if (st->kind == K_ROOTS && !roots_from_flags++)
			cfg->n_allow_roots = 0;
		if (st->kind == K_HOSTS && !hosts_from_flags++)
			cfg->n_allow_hosts = 0;
		if ((rc = apply(cfg, st, f->v[i].value, 0, 0, err)) != 0)
			goto out;
	}
	if (!cfg->n_allow_roots && getcwd(cfg->allow_roots[0], PATH_MAX))
		cfg->n_allow_roots = 1;
	if (!cfg->artifacts_dir[0]) {
		if (strlen(cfg->state_dir) + sizeof("/artifacts") > sizeof(cfg->artifacts_dir)) {
			rc = fg_err_set(err, FG_EUSAGE, "state_dir '%s' is too long", cfg->state_dir);
			goto out;
		}
		snprintf(cfg->artifacts_dir, sizeof(cfg->artifacts_dir), "%.*s/artifacts",
			 (int)(sizeof(cfg->artifacts_dir) - sizeof("/artifacts")), cfg->state_dir);
	}
out:
	free(f);
	free(a);
	return rc;
}
