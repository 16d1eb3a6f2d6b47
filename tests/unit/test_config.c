/*
 * test_config.c: `forged serve` settings (daemon/config.c, linked into this
 * binary by the Makefile): defaults, a config file naming every key, flags
 * over the file, the store's keys (store_url, --store, lease_seconds,
 * http_threads), and the refusals: unknown keys and flags, wrong JSON types,
 * integers outside their ranges (each bound tried on both sides), bad listen
 * addresses, over-long lists.
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
#include <unistd.h>

#include "api/api.h"
#include "daemon/config.h"
#include "tests/unit/support.h"

static char tmp[PATH_MAX], file[PATH_MAX + 16], file_arg[PATH_MAX + 32];

static int setup(void **state)
{
	(void)state;
	tmpdir_new(tmp, sizeof(tmp), "config");
	path_join(file, sizeof(file), tmp, "config.json");
	snprintf(file_arg, sizeof(file_arg), "--config=%s", file);
	unsetenv("STATE_DIRECTORY");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return rm_tree(tmp);
}

/* fg_config_load on "serve" followed by the NULL-terminated flags; the return code. */
static int load_args(struct fg_config *cfg, struct fg_err *err, const char *const *flags)
{
	char *argv[32];
	int argc = 0;

	argv[argc++] = (char *)"serve";
	for (size_t i = 0; flags[i]; i++) {
		assert_true(argc < 31);
		argv[argc++] = (char *)flags[i];
	}
	argv[argc] = NULL;
	memset(err, 0, sizeof(*err));
	return fg_config_load(cfg, argc, argv, err);
}

/* The config file holding json, loaded with --config=FILE. */
static int load_file(struct fg_config *cfg, struct fg_err *err, const char *json)
{
	const char *flags[] = { file_arg, NULL };

	write_text(NULL, file, json);
	return load_args(cfg, err, flags);
}

/* The file json is refused with code, the message starting with the file's path and holding phrase. */
static void expect_file_error(const char *json, int code, const char *phrase)
{
	struct fg_config cfg;
	struct fg_err err;
	int rc = load_file(&cfg, &err, json);

	if (rc != code || err.code != code)
		fail_msg("%s: returned %d (err.code %d), want %d: %s", json, rc, err.code, code, err.msg);
	if (strncmp(err.msg, file, strlen(file)) != 0 || !strstr(err.msg, phrase))
		fail_msg("%s: message '%s' lacks '%s: ...%s'", json, err.msg, file, phrase);
}

static void expect_file_ok(const char *json, struct fg_config *cfg)
{
	struct fg_err err;

	if (load_file(cfg, &err, json) != 0)
		fail_msg("%s refused: %s", json, err.msg);
}

static void test_defaults(void **state)
{
	const char *none[] = { NULL };
	struct fg_config cfg;
	struct fg_err err;
	char cwd[PATH_MAX];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	(void)state;
	assert_int_equal(load_args(&cfg, &err, none), 0);
	assert_string_equal(cfg.listen_addr, "127.0.0.1");
	assert_int_equal(cfg.port, 8470);
	assert_string_equal(cfg.state_dir, "./forged-state");
	assert_int_equal(cfg.workers, cpus > 0 ? (unsigned)cpus : 1u);
	assert_string_equal(cfg.tokens_file, "");
	assert_int_equal(cfg.max_body_bytes, FG_API_MAX_BODY_DEFAULT);
	assert_int_equal(cfg.queue_cap, 1000);
	assert_int_equal(cfg.drain_seconds, 30);
	assert_int_equal(cfg.max_attempts, 3);
	assert_int_equal(cfg.n_allow_hosts, 0);
	/* Run by hand, the current folder is the one allowed root. */
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(cfg.n_allow_roots, 1);
	assert_string_equal(cfg.allow_roots[0], cwd);
	/* Under systemd the first of STATE_DIRECTORY's folders. */
	setenv("STATE_DIRECTORY", "/var/lib/forged:/var/lib/other", 1);
	assert_int_equal(load_args(&cfg, &err, none), 0);
	assert_string_equal(cfg.state_dir, "/var/lib/forged");
	unsetenv("STATE_DIRECTORY");
}

static void test_every_key(void **state)
{
	struct fg_config cfg;

	(void)state;
	expect_file_ok("{\"listen\": \"0.0.0.0:9000\", \"state_dir\": \"/srv/forged\", \"workers\": 3,"
		       " \"tokens_file\": \"/etc/forged/tokens\", \"allow_roots\": [\"/models\", \"/scratch\"],"
		       " \"allow_hosts\": [\"hub.internal\", \"127.0.0.1:8080\"], \"max_body_bytes\": 2048,"
		       " \"queue_cap\": 5, \"drain_seconds\": 7, \"max_attempts\": 4}",
		       &cfg);
	assert_string_equal(cfg.listen_addr, "0.0.0.0");
	assert_int_equal(cfg.port, 9000);
	assert_string_equal(cfg.state_dir, "/srv/forged");
	assert_int_equal(cfg.workers, 3);
	assert_string_equal(cfg.tokens_file, "/etc/forged/tokens");
	assert_int_equal(cfg.n_allow_roots, 2);
	assert_string_equal(cfg.allow_roots[0], "/models");
	assert_string_equal(cfg.allow_roots[1], "/scratch");
	assert_int_equal(cfg.n_allow_hosts, 2);
	assert_string_equal(cfg.allow_hosts[0], "hub.internal");
	assert_string_equal(cfg.allow_hosts[1], "127.0.0.1:8080");
	assert_int_equal(cfg.max_body_bytes, 2048);
	assert_int_equal(cfg.queue_cap, 5);
	assert_int_equal(cfg.drain_seconds, 7);
	assert_int_equal(cfg.max_attempts, 4);
	/* Integers may be written as strings too (the flags' code reads them). */
	expect_file_ok("{\"workers\": \"0\", \"queue_cap\": \"12\"}", &cfg);
	assert_int_equal(cfg.workers, 0);
	assert_int_equal(cfg.queue_cap, 12);
	/* An empty object is the defaults. */
	expect_file_ok("{}", &cfg);
	assert_int_equal(cfg.port, 8470);
}

static void test_listen_forms(void **state)
{
	struct fg_config cfg;

	(void)state;
	expect_file_ok("{\"listen\": \"[::1]:8080\"}", &cfg);
	assert_string_equal(cfg.listen_addr, "::1");
	assert_int_equal(cfg.port, 8080);
	/* ":PORT" keeps the default address; port 0 asks for an ephemeral one. */
	expect_file_ok("{\"listen\": \":0\"}", &cfg);
	assert_string_equal(cfg.listen_addr, "127.0.0.1");
	assert_int_equal(cfg.port, 0);
	expect_file_ok("{\"listen\": \"10.0.0.1:65535\"}", &cfg);
	assert_int_equal(cfg.port, 65535);
	expect_file_error("{\"listen\": \"localhost\"}", FG_EUSAGE, "listen 'localhost' is not ADDR:PORT");
	expect_file_error("{\"listen\": \"127.0.0.1:65536\"}", FG_EUSAGE, "bad port");
	expect_file_error("{\"listen\": \"127.0.0.1:\"}", FG_EUSAGE, "bad port");
	expect_file_error("{\"listen\": \"127.0.0.1:80x\"}", FG_EUSAGE, "bad port");
	expect_file_error("{\"listen\": 8470}", FG_EUSAGE, "listen must be a string");
}

static void test_refused_keys_and_types(void **state)
{
	(void)state;
	expect_file_error("{\"workers\": 2, \"wokers\": 2}", FG_EINPUT, "unknown key 'wokers'");
	expect_file_error("{\"workers\": true}", FG_EINPUT, "'workers' has the wrong type");
	expect_file_error("{\"state_dir\": null}", FG_EINPUT, "'state_dir' has the wrong type");
	expect_file_error("{\"workers\": 2.5}", FG_EUSAGE, "workers 2.5 is not an integer within 0..256");
	expect_file_error("{\"workers\": \"two\"}", FG_EUSAGE, "workers 'two' is not an integer");
	expect_file_error("{\"state_dir\": \"\"}", FG_EUSAGE, "state_dir must be a non-empty path");
	expect_file_error("{\"tokens_file\": 1}", FG_EUSAGE, "tokens_file must be a non-empty path");
	expect_file_error("{\"allow_roots\": \"/models\"}", FG_EINPUT, "'allow_roots' must be an array of strings");
	expect_file_error("{\"allow_hosts\": [\"a\", 1]}", FG_EINPUT, "'allow_hosts' holds a non-string");
	expect_file_error("{\"allow_roots\": [\"\"]}", FG_EUSAGE, "allow_roots: entry '' is empty or too long");
	expect_file_error("{\"allow_roots\": [\"/1\", \"/2\", \"/3\", \"/4\", \"/5\", \"/6\", \"/7\", \"/8\","
			  " \"/9\", \"/10\", \"/11\", \"/12\", \"/13\", \"/14\", \"/15\", \"/16\", \"/17\"]}",
			  FG_EUSAGE, "allow_roots: more than 16 entries");
	expect_file_error("[1, 2]", FG_EINPUT, "not a JSON object");
	expect_file_error("{\"workers\": ", FG_EINPUT, "invalid JSON");
}

static void test_ranges(void **state)
{
	static const struct {
		const char *key;
		long long min, max;
	} ranges[] = {
		{ "workers", 0, 256 },        { "max_body_bytes", 1024, 1 << 30 },
		{ "queue_cap", 1, 1000000 }, { "drain_seconds", 0, 3600 },
		{ "max_attempts", 1, 100 },
	};
	struct fg_config cfg;
	char json[128], phrase[128];

	(void)state;
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		const long long edge[2] = { ranges[i].min, ranges[i].max };

		for (int k = 0; k < 2; k++) {
			long long outside = k ? edge[k] + 1 : edge[k] - 1;

			snprintf(json, sizeof(json), "{\"%s\": %lld}", ranges[i].key, edge[k]);
			expect_file_ok(json, &cfg);
			snprintf(json, sizeof(json), "{\"%s\": %lld}", ranges[i].key, outside);
			snprintf(phrase, sizeof(phrase), "%s %lld is not an integer within %lld..%lld", ranges[i].key, outside,
				 ranges[i].min, ranges[i].max);
			expect_file_error(json, FG_EUSAGE, phrase);
		}
	}
	expect_file_ok("{\"workers\": 256, \"max_body_bytes\": 1073741824}", &cfg);
	assert_int_equal(cfg.workers, 256);
	assert_int_equal(cfg.max_body_bytes, 1073741824);
}

/*
 * The farm's keys (issue 17): store_url and its two flags, lease_seconds,
 * http_threads, per_ip_connections (a farm's clients often come through one
 * proxy, and the API benchmark's 64 connections from one address).
 */
static void test_store_keys(void **state)
{
	static const struct {
		const char *key;
		long long min, max;
	} ranges[] = { { "lease_seconds", 3, 3600 }, { "http_threads", 1, 256 }, { "per_ip_connections", 1, 256 } };
	const char *none[] = { NULL };
	struct fg_config cfg;
	struct fg_err err;
	char json[128], phrase[128];

	(void)state;
	assert_int_equal(load_args(&cfg, &err, none), 0);
	assert_string_equal(cfg.store_url, "");
	assert_int_equal(cfg.lease_seconds, 60);
	assert_int_equal(cfg.http_threads, 16);
	assert_int_equal(cfg.per_ip_connections, FG_API_PER_IP_LIMIT_DEFAULT);
	expect_file_ok("{\"store_url\": \"postgres://forged@db.example/forged?sslmode=verify-full\","
		       " \"lease_seconds\": 30, \"http_threads\": 64}",
		       &cfg);
	assert_string_equal(cfg.store_url, "postgres://forged@db.example/forged?sslmode=verify-full");
	assert_int_equal(cfg.lease_seconds, 30);
	assert_int_equal(cfg.http_threads, 64);
	expect_file_ok("{\"store_url\": \"postgresql:///forged?host=/run/postgresql&service=farm\"}", &cfg);
	assert_string_equal(cfg.store_url, "postgresql:///forged?host=/run/postgresql&service=farm");
	expect_file_ok("{\"store_url\": \"sqlite:///var/lib/forged/forged.db\"}", &cfg);
	assert_string_equal(cfg.store_url, "sqlite:///var/lib/forged/forged.db");
	expect_file_ok("{\"store_url\": \"\"}", &cfg);
	assert_string_equal(cfg.store_url, "");
	expect_file_error("{\"store_url\": \"mysql://db/forged\"}", FG_EUSAGE,
			  "store_url 'mysql://db/forged': not sqlite:///PATH or postgres://USER@HOST/DB");
	expect_file_error("{\"store_url\": \"/var/lib/forged/forged.db\"}", FG_EUSAGE, "not sqlite:///PATH");
	expect_file_error("{\"store_url\": 5}", FG_EUSAGE, "store_url must be sqlite:///PATH or postgres://");
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		const long long edge[2] = { ranges[i].min, ranges[i].max };

		for (int k = 0; k < 2; k++) {
			long long outside = k ? edge[k] + 1 : edge[k] - 1;

			snprintf(json, sizeof(json), "{\"%s\": %lld}", ranges[i].key, edge[k]);
			expect_file_ok(json, &cfg);
			snprintf(json, sizeof(json), "{\"%s\": %lld}", ranges[i].key, outside);
			snprintf(phrase, sizeof(phrase), "%s %lld is not an integer within %lld..%lld", ranges[i].key, outside,
				 ranges[i].min, ranges[i].max);
			expect_file_error(json, FG_EUSAGE, phrase);
		}
	}
	/* --store and --store-url are one flag, over the file's key. */
	write_text(NULL, file, "{\"store_url\": \"sqlite:///from/file.db\"}");
	{
		const char *flags[] = { file_arg, "--store", "postgres://a@b/c", NULL };

		assert_int_equal(load_args(&cfg, &err, flags), 0);
		assert_string_equal(cfg.store_url, "postgres://a@b/c");
	}
	{
		const char *flags[] = { file_arg, "--store-url=postgresql:///d", "--lease-seconds", "9",
					"--http-threads=2", "--per-ip-connections", "64", NULL };

		assert_int_equal(load_args(&cfg, &err, flags), 0);
		assert_string_equal(cfg.store_url, "postgresql:///d");
		assert_int_equal(cfg.lease_seconds, 9);
		assert_int_equal(cfg.http_threads, 2);
		assert_int_equal(cfg.per_ip_connections, 64);
	}
	{
		const char *flags[] = { "--store", "ftp://x", NULL };

		assert_int_equal(load_args(&cfg, &err, flags), FG_EUSAGE);
		assert_non_null(strstr(err.msg, "not sqlite:///PATH or postgres://USER@HOST/DB"));
	}
}

static void test_flags_over_file(void **state)
{
	struct fg_config cfg;
	struct fg_err err;

	(void)state;
	write_text(NULL, file, "{\"workers\": 3, \"queue_cap\": 9, \"allow_roots\": [\"/from-file\"],"
			       " \"allow_hosts\": [\"file.host\"]}");
	{
		/* --config anywhere; flags win; a list flag replaces the file's list, repeated it adds. */
		const char *flags[] = { "--workers", "5", "--config", file, "--allow-roots=/a", "--allow-roots", "/b",
					"--max-body-bytes=4096", "--listen", ":9001", NULL };

		assert_int_equal(load_args(&cfg, &err, flags), 0);
	}
	assert_int_equal(cfg.workers, 5);
	assert_int_equal(cfg.queue_cap, 9);
	assert_int_equal(cfg.n_allow_roots, 2);
	assert_string_equal(cfg.allow_roots[0], "/a");
	assert_string_equal(cfg.allow_roots[1], "/b");
	assert_int_equal(cfg.n_allow_hosts, 1);
	assert_string_equal(cfg.allow_hosts[0], "file.host");
	assert_int_equal(cfg.max_body_bytes, 4096);
	assert_int_equal(cfg.port, 9001);
	{
		const char *flags[] = { "--bogus", "1", NULL };

		assert_int_equal(load_args(&cfg, &err, flags), FG_EUSAGE);
		assert_string_equal(err.msg, "unknown option '--bogus'");
	}
	{
		const char *flags[] = { "--workers", NULL };

		assert_int_equal(load_args(&cfg, &err, flags), FG_EUSAGE);
		assert_string_equal(err.msg, "--workers needs a value");
	}
	{
		const char *flags[] = { "stray", NULL };

		assert_int_equal(load_args(&cfg, &err, flags), FG_EUSAGE);
		assert_string_equal(err.msg, "unexpected argument 'stray'");
	}
	{
		/* Integers are decimal: no octal, no hex. */
		const char *flags[] = { "--queue-cap=010", NULL };

		assert_int_equal(load_args(&cfg, &err, flags), 0);
		assert_int_equal(cfg.queue_cap, 10);
	}
	{
		const char *flags[] = { "--workers=0x10", NULL };

		assert_int_equal(load_args(&cfg, &err, flags), FG_EUSAGE);
		assert_string_equal(err.msg, "workers '0x10' is not an integer");
	}
	{
		const char *flags[] = { "--drain-seconds=3601", NULL };

		assert_int_equal(load_args(&cfg, &err, flags), FG_EUSAGE);
		assert_string_equal(err.msg, "drain_seconds 3601 is outside 0..3600");
	}
	{
		const char *flags[] = { "--config", "/nonexistent/forged.json", NULL };

		assert_int_equal(load_args(&cfg, &err, flags), FG_EINPUT);
		assert_non_null(strstr(err.msg, "/nonexistent/forged.json: cannot open"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_every_key),
		cmocka_unit_test(test_listen_forms),
		cmocka_unit_test(test_refused_keys_and_types),
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_store_keys),
		cmocka_unit_test(test_flags_over_file),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
