/*
 * test_store.c: the store (store/store.h) on both backends: each test runs
 * on a fresh SQLite database in its own temporary folder and, when
 * FORGED_TEST_PG names a PostgreSQL database (tests/run_all.sh starts a
 * throwaway cluster, tests/pg_cluster.sh), again on a fresh schema of it
 * ("pg/" before the test's name); without one the PostgreSQL runs are
 * skipped with the reason printed.  Tests of what only one backend has
 * (SQLite's pragmas, files and result codes; PostgreSQL's schema_migrations,
 * SQLSTATEs and shared-store recovery) run on that one.  Covered: opening and migrating (pragmas,
 * refusal of a newer schema, concurrent first opens), the job queue
 * (idempotency, queue cap, claim/progress/finish/cancel/requeue, keyset
 * pages, start-up recovery, and claims racing from several threads with a
 * connection each), artifacts with verdicts, fingerprints and
 * verifications, fleet reports and the health document, counts, and that a
 * SQLite failure comes back with SQLite's own message.
 *
 * Threads never call cmocka: they record what they saw and the main thread
 * asserts.  The store's private header is included only to reach the raw
 * connection for setting up states the API cannot make (old heartbeats,
 * a newer user_version, a held write lock).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/internal.h"
#include "store/pg/pg.h"
#include "store/store.h"

struct fixture {
	char dir[256];
	char path[600];                /* the store target: a file, or a PostgreSQL URL */
	int pg;
	char schema[32];
	struct fg_store *s;
};

/* The PostgreSQL database the pg/ runs use (FORGED_TEST_PG), or NULL. */
static const char *pg_url;
static unsigned pg_schemas;

static void quiet_notices(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/* An admin statement on pg_url's database (schemas for the tests). */
static int pg_admin(const char *sql)
{
	PGconn *c = PQconnectdb(pg_url);
	PGresult *r;
	int ok;

	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "pg_admin: %s", PQerrorMessage(c));
		PQfinish(c);
		return -1;
	}
	PQsetNoticeProcessor(c, quiet_notices, NULL);
	r = PQexec(c, sql);
	ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
	if (!ok)
		fprintf(stderr, "pg_admin: %s: %s", sql, PQresultErrorMessage(r));
	PQclear(r);
	PQfinish(c);
	return ok ? 0 : -1;
}

/* A fresh schema for f; f->path the URL that puts it first on the search path. */
static int pg_fresh_schema(struct fixture *f)
{
	char sql[128];

	snprintf(f->schema, sizeof(f->schema), "t%u_%ld", ++pg_schemas, (long)getpid());
	snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s", f->schema, f->schema);
	if (pg_admin(sql))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s%soptions=-c%%20search_path%%3D%s", pg_url, strchr(pg_url, '?') ? "&" : "?",
		 f->schema);
	return 0;
}

/* The folder (and for pg/ runs the schema) of a test: *state says which backend before setup. */
static int make_dir(struct fixture *f)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(f->dir, sizeof(f->dir), "%s/forged-store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/forged.db", f->dir);
	if (f->pg)
		return pg_fresh_schema(f);
	return 0;
}

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		char p[600];

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

/* The backend of a run: cmocka's initial state is &backend_pg for the pg/ runs. */
static const int backend_pg = 1;

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct fg_err err = { 0 };

	if (f)
		f->pg = *state == &backend_pg;
	if (!f || make_dir(f)) {
		free(f);
		return -1;
	}
	if (fg_store_open(&f->s, f->path, &err)) {
		fprintf(stderr, "setup: %s\n", err.msg);
		remove_dir(f->dir);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

/* A folder but no open store: for tests of opening itself. */
static int setup_dir(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (f)
		f->pg = *state == &backend_pg;
	if (!f || make_dir(f)) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	fg_store_close(f->s);
	remove_dir(f->dir);
	if (f->pg && f->schema[0]) {
		char sql[96];

		snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE", f->schema);
		pg_admin(sql);
	}
	free(f);
	return 0;
}

static int is_pg(struct fg_store *s)
{
	return strcmp(fg_store_backend(s), "postgres") == 0;
}

/* Raw SQL on s's own connection (not through the writer): setting up states the API cannot make. */
static void exec_sql(struct fg_store *s, const char *sql)
{
	char *msg = NULL;

	if (is_pg(s)) {
		PGresult *r = PQexec(fg_pg_conn(s), sql);

		if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
			fprintf(stderr, "%s: %s\n", sql, PQresultErrorMessage(r));
			PQclear(r);
			fail();
		}
		PQclear(r);
		return;
	}
	if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		fprintf(stderr, "%s: %s\n", sql, msg ? msg : "?");
		sqlite3_free(msg);
		fail();
	}
}

/* The first column of the only row of sql, as text (dst of cap bytes; NULL gives "(null)"). */
static void query_text(struct fg_store *s, const char *sql, char *dst, size_t cap)
{
	sqlite3_stmt *st = NULL;

	if (is_pg(s)) {
		PGresult *r = PQexec(fg_pg_conn(s), sql);

		if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1) {
			fprintf(stderr, "%s: %s\n", sql, PQresultErrorMessage(r));
			PQclear(r);
			fail();
		}
		snprintf(dst, cap, "%s", PQgetisnull(r, 0, 0) ? "(null)" : PQgetvalue(r, 0, 0));
		PQclear(r);
		return;
	}
	assert_int_equal(sqlite3_prepare_v2(s->db, sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	snprintf(dst, cap, "%s", sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0) : "(null)");
	sqlite3_finalize(st);
}

static int64_t query_int(struct fg_store *s, const char *sql)
{
	char text[64];

	query_text(s, sql, text, sizeof(text));
	return strtoll(text, NULL, 10);
}

/*
 * The counts the triggers keep in artifact_stats equal what GROUP BYs over
 * the rows give, dimension by dimension, for every key on either side.
 */
static void assert_stats_consistent(struct fg_store *s)
{
	static const char sql[] =
		"WITH truth(dim, key, n) AS ("
		" SELECT 'total', '', count(*) FROM artifacts"
		" UNION ALL SELECT 'unhealthy', '', count(*) FROM artifacts WHERE unhealthy"
		" UNION ALL SELECT 'family', family, count(*) FROM artifacts GROUP BY family"
		" UNION ALL SELECT 'verdict', code, count(*) FROM verdicts GROUP BY code"
		" UNION ALL SELECT 'probe', probe_bucket, count(*) FROM artifacts"
		"  WHERE probe_bucket IS NOT NULL GROUP BY probe_bucket),"
		" kept AS (SELECT dim, key, n FROM artifact_stats WHERE n <> 0)"
		" SELECT (SELECT count(*) FROM (SELECT * FROM truth WHERE n <> 0 EXCEPT SELECT * FROM kept) d1)"
		" + (SELECT count(*) FROM (SELECT * FROM kept EXCEPT SELECT * FROM truth WHERE n <> 0) d2)";
	if (query_int(s, sql) != 0)
		fail_msg("artifact_stats disagrees with the rows it counts");
	/* verdict_stats (schema version 3) against the GROUP BY it stands for. */
	if (query_int(s, "WITH truth AS (SELECT a.family, v.code, v.severity, count(*) AS n FROM verdicts v"
			 " JOIN artifacts a ON a.id = v.artifact_id GROUP BY 1, 2, 3),"
			 " kept AS (SELECT family, code, severity, n FROM verdict_stats WHERE n <> 0)"
			 " SELECT (SELECT count(*) FROM (SELECT * FROM truth EXCEPT SELECT * FROM kept) d1)"
			 " + (SELECT count(*) FROM (SELECT * FROM kept EXCEPT SELECT * FROM truth) d2)") != 0)
		fail_msg("verdict_stats disagrees with the verdict rows it counts");
}

static int64_t enqueue(struct fg_store *s, const char *key, const char *hash)
{
	struct fg_job j;
	struct fg_err err = { 0 };
	int replayed = -1;
	int rc = fg_store_job_enqueue(s, "forge", "{\"source\":\"m\"}", NULL, key, hash, 0, &j, &replayed, &err);

	if (rc)
		fail_msg("enqueue: %s", err.msg);
	fg_job_release(&j);
	return j.id;
}

static int64_t claim(struct fg_store *s, const char *worker)
{
	struct fg_job j;
	struct fg_err err = { 0 };
	int rc = fg_store_job_claim(s, worker, &j, &err);

	if (rc < 0)
		fail_msg("claim: %s", err.msg);
	if (rc == 0)
		return 0;
	fg_job_release(&j);
	return j.id;
}

static struct fg_job get_job(struct fg_store *s, int64_t id)
{
	struct fg_job j;
	struct fg_err err = { 0 };

	if (fg_store_job_get(s, id, &j, &err))
		fail_msg("get job %lld: %s", (long long)id, err.msg);
	fg_job_release(&j);
	return j;
}

/*
 * An artifact whose report carries verdicts (JSON array text, may be NULL)
 * with the given probe mean and head convention.
 */
static int64_t put_artifact(struct fg_store *s, const char *source, const char *family, const char *fp,
			    const char *verdicts, double probe, const char *head)
{
	char text[1024];
	struct fg_artifact_in a = { 0 };
	struct fg_err err = { 0 };
	cJSON *report;
	int64_t id = 0;
	int rc;

	snprintf(text, sizeof(text), "{\"schema\":\"forged.inspect.v1\",\"source\":\"%s\",\"verdicts\":%s}", source,
		 verdicts ? verdicts : "[]");
	report = cJSON_Parse(text);
	assert_non_null(report);
	a.source = source;
	a.family = family;
	a.fingerprint = fp;
	a.report = report;
	a.ok = !(verdicts && strstr(verdicts, "\"error\""));
	a.probe_mean = probe;
	a.head_convention = head;
	rc = fg_store_artifact_put(s, &a, &id, NULL, &err);
	cJSON_Delete(report);
	if (rc)
		fail_msg("artifact_put: %s", err.msg);
	return id;
}

#define ERR_VERDICT "[{\"code\":\"embedded_mtp_shift_hazard\",\"severity\":\"error\",\"set\":\"trunk\"}]"
#define WARN_VERDICT "[{\"code\":\"stray_shard\",\"severity\":\"warning\"}]"

static void put_verification(struct fg_store *s, int64_t artifact, const char *verdict)
{
	struct fg_err err = { 0 };
	cJSON *result = cJSON_CreateObject();
	int64_t id = 0;

	assert_non_null(result);
	cJSON_AddStringToObject(result, "verdict", verdict);
	if (fg_store_verification_put(s, artifact, "[{\"depth\":0,\"tok_s\":15.0}]", result, &id, NULL, NULL, &err))
		fail_msg("verification_put: %s", err.msg);
	cJSON_Delete(result);
	assert_true(id > 0);
}

/* ---- opening ---- */

static void *commit_later(void *db)
{
	usleep(50 * 1000);
	sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	return NULL;
}

static void test_open_pragmas(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	sqlite3_stmt *st;

	assert_int_equal(fg_store_user_version(f->s), FG_STORE_SCHEMA_VERSION);
	assert_int_equal(query_int(f->s, "PRAGMA user_version"), FG_STORE_SCHEMA_VERSION);
	assert_int_equal(query_int(f->s, "PRAGMA synchronous"), 2); /* FULL */
	assert_int_equal(query_int(f->s, "PRAGMA foreign_keys"), 1);
	/* A writer waits for a lock held elsewhere instead of failing (busy handler). */
	{
		sqlite3 *other = NULL;
		pthread_t t;

		assert_int_equal(sqlite3_open(f->path, &other), SQLITE_OK);
		assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
		assert_int_equal(pthread_create(&t, NULL, commit_later, other), 0);
		enqueue(f->s, NULL, NULL); /* blocks about 50 ms, then succeeds */
		pthread_join(t, NULL);
		sqlite3_close(other);
	}
	assert_int_equal(sqlite3_prepare_v2(f->s->db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
	sqlite3_finalize(st);
	assert_int_equal(fg_store_check(f->s, &err), 0);

	/* Reopening migrates nothing and keeps the data. */
	enqueue(f->s, NULL, NULL);
	fg_store_close(f->s);
	f->s = NULL;
	assert_int_equal(fg_store_open(&f->s, f->path, &err), 0);
	assert_int_equal(fg_store_user_version(f->s), FG_STORE_SCHEMA_VERSION);
	assert_int_equal(get_job(f->s, 1).id, 1);
}

static void test_open_refuses_newer(void **state)
{
	struct fixture *f = *state;
	struct fg_store *other = (struct fg_store *)0x1;
	struct fg_err err = { 0 };
	char want[32];

	exec_sql(f->s, "PRAGMA user_version = 9");
	fg_store_close(f->s);
	f->s = NULL;
	assert_int_equal(fg_store_open(&other, f->path, &err), FG_ESTATE);
	assert_ptr_equal(other, (struct fg_store *)0x1); /* untouched on failure */
	assert_non_null(strstr(err.msg, "schema version 9"));
	snprintf(want, sizeof(want), "forged's %d", FG_STORE_SCHEMA_VERSION);
	assert_non_null(strstr(err.msg, want));
	assert_non_null(strstr(err.msg, f->path));
}

static void test_open_bad_args(void **state)
{
	struct fixture *f = *state;
	struct fg_store *s = NULL;
	struct fg_err err = { 0 };
	char path[sizeof(((struct fixture *)0)->path) + 32];

	assert_int_equal(fg_store_open(&s, NULL, &err), FG_EINPUT);
	assert_int_equal(fg_store_open(&s, "", &err), FG_EINPUT);
	assert_int_equal(fg_store_open(NULL, f->path, &err), FG_EINPUT);
	snprintf(path, sizeof(path), "%s/no/such/dir/x.db", f->dir);
	assert_int_equal(fg_store_open(&s, path, &err), FG_ESTATE);
	assert_null(s);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "unable to open"));
	/* A file that is not a database. */
	snprintf(path, sizeof(path), "%s/junk.db", f->dir);
	{
		FILE *fp = fopen(path, "w");

		assert_non_null(fp);
		for (int i = 0; i < 64; i++)
			fputs("this is not an SQLite database, just text. ", fp);
		fclose(fp);
	}
	assert_int_equal(fg_store_open(&s, path, &err), FG_ESTATE);
	assert_null(s);
	assert_non_null(strstr(err.msg, "not a database"));
	/* Destructors and readers accept NULL. */
	fg_store_close(NULL);
	fg_job_release(NULL);
	assert_int_equal(fg_store_user_version(NULL), -1);
	assert_null(fg_job_json(NULL));
}

struct opener {
	const char *path;
	int rc;
	int version;
	char msg[FG_ERR_MSG_MAX];
};

static void *open_thread(void *arg)
{
	struct opener *o = arg;
	struct fg_store *s = NULL;
	struct fg_err err = { 0 };

	o->rc = fg_store_open(&s, o->path, &err);
	memcpy(o->msg, err.msg, sizeof(o->msg));
	o->version = fg_store_user_version(s);
	fg_store_close(s);
	return NULL;
}

/*
 * Several first opens of one new file at once: one switches it to WAL and
 * migrates, the others wait and see version 1.  Repeated, since the race
 * that once made an opener fail ("setting WAL mode: database is locked")
 * does not show every time.
 */
static void test_open_concurrent_migration(void **state)
{
	struct fixture *f = *state;
	struct opener o[4];
	pthread_t t[4];

	for (int round = 0; round < 10; round++) {
		static const char *const suffixes[] = { "", "-wal", "-shm" };

		for (size_t k = 0; k < 3; k++) {
			char p[sizeof(f->path) + 8];

			snprintf(p, sizeof(p), "%s%s", f->path, suffixes[k]);
			unlink(p);
		}
		for (int i = 0; i < 4; i++) {
			memset(&o[i], 0, sizeof(o[i]));
			o[i].path = f->path;
			assert_int_equal(pthread_create(&t[i], NULL, open_thread, &o[i]), 0);
		}
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		for (int i = 0; i < 4; i++) {
			if (o[i].rc)
				fail_msg("round %d, opener %d: %s", round, i, o[i].msg);
			assert_int_equal(o[i].version, FG_STORE_SCHEMA_VERSION);
		}
	}
}

/* ---- jobs ---- */

static void test_job_states(void **state)
{
	enum fg_job_state js;

	(void)state;
	for (int i = FG_JOB_QUEUED; i <= FG_JOB_CANCELLED; i++) {
		assert_int_equal(fg_job_state_parse(fg_job_state_name((enum fg_job_state)i), &js), 0);
		assert_int_equal(js, i);
	}
	assert_string_equal(fg_job_state_name(FG_JOB_CANCELLED), "cancelled");
	assert_string_equal(fg_job_state_name((enum fg_job_state)99), "unknown");
	assert_int_equal(fg_job_state_parse("done", &js), FG_EINPUT);
	assert_int_equal(fg_job_state_parse(NULL, &js), FG_EINPUT);
}

static void test_job_enqueue_get_json(void **state)
{
	struct fixture *f = *state;
	struct fg_job j, g;
	struct fg_err err = { 0 };
	int replayed = -1;
	cJSON *o;
	const char *keys[] = { "id", "kind", "state", "stage", "progress", "bytes_done", "bytes_total", "eta_s",
			       "error", "refusal", "artifact_id", "created_at", "updated_at", "verdicts", "artifact_url",
			       "request" };

	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{\"source\":\"a\"}", NULL, NULL, NULL, 0, &j, &replayed, &err),
			 0);
	assert_int_equal(replayed, 0);
	assert_int_equal(j.id, 1);
	assert_string_equal(j.kind, "forge");
	assert_int_equal(j.state, FG_JOB_QUEUED);
	assert_string_equal(j.params, "{\"source\":\"a\"}");
	assert_int_equal(strlen(j.created_at), 24); /* 2026-01-02T03:04:05.678Z */
	assert_int_equal(j.created_at[23], 'Z');
	assert_int_equal(j.created_at[19], '.');
	assert_string_equal(j.created_at, j.updated_at);

	assert_int_equal(fg_store_job_get(f->s, 1, &g, &err), 0);
	assert_string_equal(g.params, j.params);
	assert_string_equal(g.created_at, j.created_at);
	o = fg_job_json(&g);
	assert_non_null(o);
	assert_int_equal(cJSON_GetArraySize(o), (int)(sizeof(keys) / sizeof(keys[0])));
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_non_null(cJSON_GetObjectItemCaseSensitive(o, keys[i]));
	assert_string_equal(cJSON_GetObjectItem(o, "state")->valuestring, "queued");
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "error")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "artifact_id")));
	assert_int_equal(cJSON_GetObjectItem(o, "id")->valueint, 1);
	cJSON_Delete(o);
	fg_job_release(&j);
	fg_job_release(&g);

	/* Bad arguments. */
	assert_int_equal(fg_store_job_enqueue(f->s, NULL, "{}", NULL, NULL, NULL, 0, &j, NULL, &err), FG_EINPUT);
	assert_int_equal(fg_store_job_enqueue(f->s, "", "{}", NULL, NULL, NULL, 0, &j, NULL, &err), FG_EINPUT);
	assert_int_equal(fg_store_job_enqueue(f->s, "a_kind_far_too_long", "{}", NULL, NULL, NULL, 0, &j, NULL, &err),
			 FG_EINPUT);
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{nope", NULL, NULL, NULL, 0, &j, NULL, &err), FG_EINPUT);
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{}", NULL, "key", NULL, 0, &j, NULL, &err), FG_EINPUT);
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{}", NULL, NULL, NULL, 0, NULL, NULL, &err), FG_EINPUT);
	assert_int_equal(fg_store_job_get(f->s, 42, &g, &err), FG_ENOTFOUND);
	assert_non_null(strstr(err.msg, "42"));
	/* NULL params mean an empty object. */
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", NULL, NULL, NULL, NULL, 0, &j, NULL, &err), 0);
	assert_string_equal(j.params, "{}");
	fg_job_release(&j);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM jobs"), 2);
}

static void test_job_idempotency(void **state)
{
	struct fixture *f = *state;
	struct fg_job j;
	struct fg_err err = { 0 };
	int replayed = -1;

	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{\"a\":1}", NULL, "k1", "h1", 0, &j, &replayed, &err), 0);
	assert_int_equal(replayed, 0);
	assert_int_equal(j.id, 1);
	fg_job_release(&j);
	/* Same key, same body: the first job again, even after it has moved on. */
	assert_int_equal(claim(f->s, "i/0"), 1);
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{\"a\":1}", NULL, "k1", "h1", 0, &j, &replayed, &err), 0);
	assert_int_equal(replayed, 1);
	assert_int_equal(j.id, 1);
	assert_int_equal(j.state, FG_JOB_RUNNING);
	assert_string_equal(j.params, "{\"a\":1}");
	fg_job_release(&j);
	/* Same key, another body: a conflict naming the key. */
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{\"a\":2}", NULL, "k1", "h2", 0, &j, &replayed, &err),
			 FG_ECONFLICT);
	assert_non_null(strstr(err.msg, "'k1'"));
	/* Another key: a new job. */
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{\"a\":1}", NULL, "k2", "h1", 0, &j, &replayed, &err), 0);
	assert_int_equal(replayed, 0);
	assert_int_equal(j.id, 2);
	fg_job_release(&j);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM jobs"), 2);
}

struct racer {
	const char *path;
	int rc;
	int replays;
	int64_t ids[25];
	char msg[FG_ERR_MSG_MAX];
};

static void *idem_thread(void *arg)
{
	struct racer *r = arg;
	struct fg_store *s = NULL;
	struct fg_err err = { 0 };

	r->rc = fg_store_open(&s, r->path, &err);
	for (int i = 0; !r->rc && i < 25; i++) {
		struct fg_job j;
		int replayed = 0;

		r->rc = fg_store_job_enqueue(s, "forge", "{}", NULL, "same-key", "same-hash", 0, &j, &replayed, &err);
		if (!r->rc) {
			r->ids[i] = j.id;
			r->replays += replayed;
			fg_job_release(&j);
		}
	}
	memcpy(r->msg, err.msg, sizeof(r->msg));
	fg_store_close(s);
	return NULL;
}

/* Four connections race with one key: exactly one job, every other answer a replay of it. */
static void test_job_idempotency_concurrent(void **state)
{
	struct fixture *f = *state;
	struct racer r[4];
	pthread_t t[4];
	int replays = 0;

	for (int i = 0; i < 4; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].path = f->path;
		assert_int_equal(pthread_create(&t[i], NULL, idem_thread, &r[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 4; i++) {
		if (r[i].rc)
			fail_msg("racer %d: %s", i, r[i].msg);
		for (int k = 0; k < 25; k++)
			assert_int_equal(r[i].ids[k], 1);
		replays += r[i].replays;
	}
	assert_int_equal(replays, 99);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM jobs"), 1);
}

static void test_job_queue_cap(void **state)
{
	struct fixture *f = *state;
	struct fg_job j;
	struct fg_err err = { 0 };
	int replayed = 0;

	for (int i = 0; i < 2; i++) {
		char key[16];

		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{}", NULL, key, "h", 2, &j, &replayed, &err), 0);
		fg_job_release(&j);
	}
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{}", NULL, NULL, NULL, 2, &j, &replayed, &err), FG_EBUSY);
	assert_non_null(strstr(err.msg, "full"));
	/* A replay answers even when full: the job exists already. */
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{}", NULL, "k0", "h", 2, &j, &replayed, &err), 0);
	assert_int_equal(replayed, 1);
	fg_job_release(&j);
	/* Running jobs do not count against the cap. */
	assert_int_equal(claim(f->s, "i/0"), 1);
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{}", NULL, NULL, NULL, 2, &j, &replayed, &err), 0);
	fg_job_release(&j);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM jobs"), 3);
}

static void test_job_lifecycle(void **state)
{
	struct fixture *f = *state;
	struct fg_job j;
	struct fg_err err = { 0 };
	int64_t art;

	for (int i = 0; i < 3; i++)
		enqueue(f->s, NULL, NULL);
	art = put_artifact(f->s, "m", "qwen3_5", "fp", NULL, NAN, NULL);
	assert_int_equal(fg_store_job_claim(f->s, "inst/0", &j, &err), 1);
	assert_int_equal(j.id, 1);
	assert_int_equal(j.state, FG_JOB_RUNNING);
	assert_string_equal(j.params, "{\"source\":\"m\"}");
	fg_job_release(&j);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM jobs WHERE id = 1 AND worker = 'inst/0'"
					 " AND heartbeat_at IS NOT NULL"), 1);

	assert_int_equal(fg_store_job_progress(f->s, 1, NULL, "extract", 0.5, &err), 0);
	j = get_job(f->s, 1);
	assert_string_equal(j.stage, "extract");
	assert_true(j.progress == 0.5);
	/* NULL stage keeps the stage. */
	assert_int_equal(fg_store_job_progress(f->s, 1, NULL, NULL, 0.75, &err), 0);
	j = get_job(f->s, 1);
	assert_string_equal(j.stage, "extract");
	assert_true(j.progress == 0.75);
	assert_int_equal(fg_store_job_progress(f->s, 1, NULL, "x", 1.5, &err), FG_EINPUT);
	assert_int_equal(fg_store_job_progress(f->s, 1, NULL, "x", NAN, &err), FG_EINPUT);
	/* The longest stage a worker writes is kept whole; one past the cap is refused, not cut. */
	assert_int_equal(fg_store_job_progress(f->s, 1, NULL, "fetch 18446744073709551615/18446744073709551615", 0.05,
					       &err), 0);
	j = get_job(f->s, 1);
	assert_string_equal(j.stage, "fetch 18446744073709551615/18446744073709551615");
	assert_int_equal(fg_store_job_progress(f->s, 1, NULL, "a stage name that is far too long for it, longer than "
					       "the cap of sixty-three", 0.1, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "job stage is longer than 63 bytes"));
	j = get_job(f->s, 1);
	assert_string_equal(j.stage, "fetch 18446744073709551615/18446744073709551615");
	assert_int_equal(fg_store_job_progress(f->s, 2, NULL, "x", 0.1, &err), FG_ECONFLICT);
	assert_non_null(strstr(err.msg, "queued"));
	assert_int_equal(fg_store_job_progress(f->s, 99, NULL, "x", 0.1, &err), FG_ENOTFOUND);
	/* Bytes within the stage: shown while running, cleared by a report without them, checked. */
	assert_int_equal(fg_store_job_progress_bytes(f->s, 1, NULL, "sidecar", 0.5, 300, 1000, 2.5, &err), 0);
	j = get_job(f->s, 1);
	assert_true(j.has_bytes && j.bytes_done == 300 && j.bytes_total == 1000 && j.eta_s == 2.5);
	{
		cJSON *o = fg_job_json(&j);

		assert_true(cJSON_GetObjectItem(o, "bytes_done")->valuedouble == 300);
		assert_true(cJSON_GetObjectItem(o, "bytes_total")->valuedouble == 1000);
		assert_true(cJSON_GetObjectItem(o, "eta_s")->valuedouble == 2.5);
		cJSON_Delete(o);
	}
	assert_int_equal(fg_store_job_progress_bytes(f->s, 1, NULL, "sidecar", 0.6, 400, 1000, -1, &err), 0);
	j = get_job(f->s, 1);
	assert_true(j.has_bytes && j.bytes_done == 400 && j.eta_s < 0);
	assert_int_equal(fg_store_job_progress_bytes(f->s, 1, NULL, "sidecar", 0.6, 1001, 1000, 1, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "1001 bytes done of 1000"));
	assert_int_equal(fg_store_job_progress_bytes(f->s, 1, NULL, "sidecar", 0.6, -1, 1000, 1, &err), FG_EINPUT);
	j = get_job(f->s, 1);
	assert_true(j.bytes_done == 400); /* a refused report changes nothing */
	/* Another worker's report is refused: the job is not theirs. */
	assert_int_equal(fg_store_job_progress_bytes(f->s, 1, "other/9", "sidecar", 0.7, 500, 1000, 1, &err),
			 FG_ECONFLICT);
	assert_int_equal(fg_store_job_progress(f->s, 1, NULL, "check", 0.9, &err), 0);
	j = get_job(f->s, 1);
	assert_false(j.has_bytes);
	{
		cJSON *o = fg_job_json(&j);

		assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "bytes_done")));
		assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "bytes_total")));
		assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "eta_s")));
		cJSON_Delete(o);
	}

	/* Finishing. */
	assert_int_equal(fg_store_job_finish(f->s, 1, NULL, FG_JOB_QUEUED, NULL, 0, &err), FG_EINPUT);
	assert_int_equal(fg_store_job_finish(f->s, 1, NULL, FG_JOB_SUCCEEDED, NULL, 999, &err), FG_ENOTFOUND);
	assert_non_null(strstr(err.msg, "999"));
	assert_int_equal(fg_store_job_finish(f->s, 1, NULL, FG_JOB_SUCCEEDED, NULL, art, &err), 0);
	j = get_job(f->s, 1);
	assert_int_equal(j.state, FG_JOB_SUCCEEDED);
	assert_int_equal(j.artifact_id, art);
	assert_true(j.progress == 1.0);
	assert_string_equal(j.error, "");
	assert_int_equal(fg_store_job_finish(f->s, 1, NULL, FG_JOB_FAILED, "again", 0, &err), FG_ECONFLICT);
	assert_int_equal(fg_store_job_finish(f->s, 99, NULL, FG_JOB_FAILED, "x", 0, &err), FG_ENOTFOUND);
	assert_int_equal(fg_store_job_progress(f->s, 1, NULL, "x", 0.1, &err), FG_ECONFLICT);

	assert_int_equal(claim(f->s, "inst/1"), 2);
	assert_int_equal(fg_store_job_finish(f->s, 2, NULL, FG_JOB_FAILED, "shard 3 is truncated", 0, &err), 0);
	j = get_job(f->s, 2);
	assert_int_equal(j.state, FG_JOB_FAILED);
	assert_string_equal(j.error, "shard 3 is truncated");
	assert_int_equal(j.artifact_id, 0);
	assert_int_equal(claim(f->s, "inst/0"), 3);
	assert_int_equal(claim(f->s, "inst/0"), 0);
	assert_int_equal(fg_store_job_claim(f->s, "", &j, &err), FG_EINPUT);
	assert_int_equal(fg_store_job_claim(f->s, NULL, &j, &err), FG_EINPUT);
}

static void test_job_cancel_requeue(void **state)
{
	struct fixture *f = *state;
	struct fg_job j;
	struct fg_err err = { 0 };

	for (int i = 0; i < 4; i++)
		enqueue(f->s, NULL, NULL);
	/* Queued: cancelled at once, and never claimed. */
	assert_int_equal(fg_store_job_cancel(f->s, 1, &j, &err), 0);
	assert_int_equal(j.state, FG_JOB_CANCELLED);
	fg_job_release(&j);
	assert_int_equal(claim(f->s, "i/0"), 2);
	/* Running: only flagged; the worker stops at its next stage. */
	assert_int_equal(fg_store_job_cancel(f->s, 2, &j, &err), 0);
	assert_int_equal(j.state, FG_JOB_RUNNING);
	assert_int_equal(j.cancel_requested, 1);
	fg_job_release(&j);
	/* A drained job whose cancel was requested ends cancelled, not queued. */
	assert_int_equal(fg_store_job_requeue(f->s, 2, NULL, &err), 0);
	assert_int_equal(get_job(f->s, 2).state, FG_JOB_CANCELLED);
	/* Finished: left alone. */
	assert_int_equal(fg_store_job_cancel(f->s, 2, NULL, &err), 0);
	assert_int_equal(get_job(f->s, 2).state, FG_JOB_CANCELLED);
	assert_int_equal(fg_store_job_cancel(f->s, 77, NULL, &err), FG_ENOTFOUND);

	/* Requeue: back in the queue with attempts unchanged, claimed again first. */
	assert_int_equal(claim(f->s, "i/0"), 3);
	assert_int_equal(fg_store_job_progress(f->s, 3, NULL, "norms", 0.3, &err), 0);
	assert_int_equal(fg_store_job_requeue(f->s, 3, NULL, &err), 0);
	j = get_job(f->s, 3);
	assert_int_equal(j.state, FG_JOB_QUEUED);
	assert_int_equal(j.attempts, 0);
	assert_string_equal(j.stage, "");
	assert_int_equal(fg_store_job_requeue(f->s, 3, NULL, &err), FG_ECONFLICT);
	assert_int_equal(fg_store_job_requeue(f->s, 78, NULL, &err), FG_ENOTFOUND);
	assert_int_equal(claim(f->s, "i/1"), 3);
	j = get_job(f->s, 3);
	assert_true(j.progress == 0.0);
	assert_int_equal(claim(f->s, "i/1"), 4);
}

static void test_job_recover(void **state)
{
	struct fixture *f = *state;
	struct fg_job j;
	struct fg_err err = { 0 };
	int requeued = -1, failed = -1;

	enqueue(f->s, NULL, NULL);
	/* Claimed by instance "old": each recovery by "new" is an attempt; the third fails it. */
	for (int attempt = 1; attempt <= 3; attempt++) {
		char worker[16];

		snprintf(worker, sizeof(worker), "old/%d", attempt);
		assert_int_equal(claim(f->s, worker), 1);
		assert_int_equal(fg_store_jobs_recover(f->s, "new", 3600, 3, &requeued, &failed, &err), 0);
		j = get_job(f->s, 1);
		assert_int_equal(j.attempts, attempt);
		if (attempt < 3) {
			assert_int_equal(requeued, 1);
			assert_int_equal(failed, 0);
			assert_int_equal(j.state, FG_JOB_QUEUED);
			assert_string_equal(j.error, "");
		} else {
			assert_int_equal(requeued, 0);
			assert_int_equal(failed, 1);
			assert_int_equal(j.state, FG_JOB_FAILED);
			assert_string_equal(j.error, "abandoned after 3 attempts");
		}
	}

	/* Our own instance's job with a fresh heartbeat stays; "newer" is not "new". */
	enqueue(f->s, NULL, NULL);
	enqueue(f->s, NULL, NULL);
	assert_int_equal(claim(f->s, "new/1"), 2);
	assert_int_equal(claim(f->s, "newer/1"), 3);
	assert_int_equal(fg_store_jobs_recover(f->s, "new", 3600, 3, &requeued, &failed, &err), 0);
	assert_int_equal(requeued, 1);
	assert_int_equal(get_job(f->s, 2).state, FG_JOB_RUNNING);
	assert_int_equal(get_job(f->s, 3).state, FG_JOB_QUEUED);
	/* A stale heartbeat counts even for our own instance id. */
	exec_sql(f->s, "UPDATE jobs SET heartbeat_at = '2000-01-01T00:00:00.000Z' WHERE id = 2");
	assert_int_equal(fg_store_jobs_recover(f->s, "new", 60, 3, &requeued, &failed, &err), 0);
	assert_int_equal(requeued, 1);
	j = get_job(f->s, 2);
	assert_int_equal(j.state, FG_JOB_QUEUED);
	assert_int_equal(j.attempts, 1);
	/* stale_seconds 0 turns the heartbeat test off. */
	assert_int_equal(claim(f->s, "new/1"), 2);
	exec_sql(f->s, "UPDATE jobs SET heartbeat_at = '2000-01-01T00:00:00.000Z' WHERE id = 2");
	assert_int_equal(fg_store_jobs_recover(f->s, "new", 0, 3, &requeued, &failed, &err), 0);
	assert_int_equal(requeued, 0);
	/* A cancel requested before the crash cancels instead of requeueing. */
	assert_int_equal(fg_store_job_cancel(f->s, 2, NULL, &err), 0);
	assert_int_equal(fg_store_jobs_recover(f->s, "newest", 0, 3, &requeued, &failed, &err), 0);
	assert_int_equal(get_job(f->s, 2).state, FG_JOB_CANCELLED);

	assert_int_equal(fg_store_jobs_recover(f->s, "", 0, 3, &requeued, &failed, &err), FG_EINPUT);
	assert_int_equal(fg_store_jobs_recover(f->s, "new", 0, 0, &requeued, &failed, &err), FG_EINPUT);
}

static int64_t list_ids(struct fg_store *s, int state, int64_t cursor, int limit, int64_t *ids, int *n)
{
	struct fg_err err = { 0 };
	cJSON *arr = NULL, *it;
	int64_t next = -1;

	if (fg_store_job_list(s, state, cursor, limit, &arr, &next, &err))
		fail_msg("job_list: %s", err.msg);
	*n = 0;
	cJSON_ArrayForEach(it, arr)
		ids[(*n)++] = (int64_t)cJSON_GetObjectItem(it, "id")->valuedouble;
	cJSON_Delete(arr);
	return next;
}

static void test_job_list(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	int64_t ids[600], next;
	cJSON *arr = NULL;
	int n;

	for (int i = 0; i < 7; i++)
		enqueue(f->s, NULL, NULL);
	next = list_ids(f->s, -1, 0, 3, ids, &n);
	assert_int_equal(n, 3);
	assert_int_equal(ids[0], 1);
	assert_int_equal(ids[2], 3);
	assert_int_equal(next, 3);
	next = list_ids(f->s, -1, next, 3, ids, &n);
	assert_int_equal(n, 3);
	assert_int_equal(ids[0], 4);
	assert_int_equal(next, 6);
	next = list_ids(f->s, -1, next, 3, ids, &n);
	assert_int_equal(n, 1);
	assert_int_equal(ids[0], 7);
	assert_int_equal(next, 0);

	/* By state. */
	assert_int_equal(claim(f->s, "i/0"), 1);
	assert_int_equal(claim(f->s, "i/0"), 2);
	next = list_ids(f->s, FG_JOB_RUNNING, 0, 10, ids, &n);
	assert_int_equal(n, 2);
	assert_int_equal(next, 0);
	next = list_ids(f->s, FG_JOB_QUEUED, 0, 10, ids, &n);
	assert_int_equal(n, 5);
	assert_int_equal(ids[0], 3);
	next = list_ids(f->s, FG_JOB_QUEUED, 5, 10, ids, &n);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], 6);

	/* Limits are clamped to 1..500. */
	next = list_ids(f->s, -1, 0, 0, ids, &n);
	assert_int_equal(n, 1);
	assert_int_equal(next, 1);
	next = list_ids(f->s, -1, 0, -5, ids, &n);
	assert_int_equal(n, 1);
	if (f->pg)
		exec_sql(f->s, "INSERT INTO jobs (kind) SELECT 'forge' FROM generate_series(1, 600)");
	else
		exec_sql(f->s, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 600)"
			       " INSERT INTO jobs (kind, created_at, updated_at) SELECT 'forge', 'x', 'x' FROM c");
	next = list_ids(f->s, -1, 0, 100000, ids, &n);
	assert_int_equal(n, 500);
	assert_int_equal(next, 500);

	assert_int_equal(fg_store_job_list(f->s, 5, 0, 10, &arr, &next, &err), FG_EINPUT);
	assert_int_equal(fg_store_job_list(f->s, -1, -1, 10, &arr, &next, &err), FG_EINPUT);
	assert_null(arr);
}

#define CLAIM_JOBS 200
#define CLAIMERS 4

struct claimer {
	const char *path;
	pthread_barrier_t *start;
	int index;
	int rc;
	int n;
	int64_t ids[CLAIM_JOBS];
	char msg[FG_ERR_MSG_MAX];
};

static void *claim_thread(void *arg)
{
	struct claimer *c = arg;
	struct fg_store *s = NULL;
	struct fg_err err = { 0 };
	char worker[32];

	snprintf(worker, sizeof(worker), "inst/%d", c->index);
	c->rc = fg_store_open(&s, c->path, &err);
	/* Everyone starts claiming at once, and finishing each job interleaves more writes. */
	pthread_barrier_wait(c->start);
	while (!c->rc) {
		struct fg_job j;
		int got = fg_store_job_claim(s, worker, &j, &err);

		if (got < 0)
			c->rc = got;
		if (got <= 0)
			break;
		if (c->n < CLAIM_JOBS)
			c->ids[c->n] = j.id;
		c->n++;
		fg_job_release(&j);
		c->rc = fg_store_job_finish(s, j.id, NULL, FG_JOB_SUCCEEDED, NULL, 0, &err);
		/*
		 * A moment of "work" outside the lock: SQLite's busy handler is not
		 * fair (a waiter sleeps while the holder takes the lock again at
		 * once), so without it one thread tends to drain the whole queue.
		 */
		usleep(200);
	}
	memcpy(c->msg, err.msg, sizeof(c->msg));
	fg_store_close(s);
	return NULL;
}

/* Several threads, a connection each, drain one queue: every job claimed exactly once. */
static void test_job_claim_concurrent(void **state)
{
	struct fixture *f = *state;
	struct claimer c[CLAIMERS];
	pthread_t t[CLAIMERS];
	pthread_barrier_t start;
	int seen[CLAIM_JOBS + 1] = { 0 };
	int total = 0;

	for (int i = 0; i < CLAIM_JOBS; i++)
		enqueue(f->s, NULL, NULL);
	assert_int_equal(pthread_barrier_init(&start, NULL, CLAIMERS), 0);
	for (int i = 0; i < CLAIMERS; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		c[i].path = f->path;
		c[i].start = &start;
		c[i].index = i;
		assert_int_equal(pthread_create(&t[i], NULL, claim_thread, &c[i]), 0);
	}
	for (int i = 0; i < CLAIMERS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < CLAIMERS; i++) {
		if (c[i].rc)
			fail_msg("claimer %d: %s", i, c[i].msg);
		assert_true(c[i].n <= CLAIM_JOBS);
		for (int k = 0; k < c[i].n; k++) {
			assert_true(c[i].ids[k] >= 1 && c[i].ids[k] <= CLAIM_JOBS);
			seen[c[i].ids[k]]++;
		}
		total += c[i].n;
	}
	assert_int_equal(total, CLAIM_JOBS);
	/* The race was real: more than one connection won claims. */
	assert_true((c[0].n > 0) + (c[1].n > 0) + (c[2].n > 0) + (c[3].n > 0) >= 2);
	for (int id = 1; id <= CLAIM_JOBS; id++)
		if (seen[id] != 1)
			fail_msg("job %d claimed %d times", id, seen[id]);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM jobs WHERE state = 'succeeded'"), CLAIM_JOBS);
	/* Each row names the claimer that got it. */
	assert_int_equal(query_int(f->s, "SELECT count(DISTINCT worker) FROM jobs"),
			 (c[0].n > 0) + (c[1].n > 0) + (c[2].n > 0) + (c[3].n > 0));
}

/* ---- artifacts ---- */

static void test_artifact_put_get(void **state)
{
	struct fixture *f = *state;
	struct fg_artifact_in a = { 0 };
	struct fg_err err = { 0 };
	cJSON *report, *prov, *doc = NULL, *v, *want;
	int64_t id = 0;

	report = cJSON_Parse("{\"schema\":\"forged.inspect.v1\",\"family\":\"qwen3_5\",\"ok\":false,\"verdicts\":["
			     "{\"code\":\"mixed_convention\",\"severity\":\"error\",\"set\":\"trunk\"},"
			     "{\"code\":\"quantized_mtp_head\",\"severity\":\"warning\"},"
			     "{\"code\":\"mixed_convention\",\"severity\":\"error\",\"set\":\"mtp\"}]}");
	prov = cJSON_Parse("{\"source\":\"models/q\",\"files\":{\"mtp.safetensors\":\"aa11\",\"config.json\":\"bb22\"}}");
	assert_non_null(report);
	assert_non_null(prov);
	a.source = "models/q";
	a.path = "/srv/artifacts/1";
	a.family = "qwen3_5";
	a.fingerprint = "f00d";
	a.report = report;
	a.provenance = prov;
	a.ok = 0;
	a.probe_mean = 1.79;
	a.head_convention = "absolute";
	assert_int_equal(fg_store_artifact_put(f->s, &a, &id, NULL, &err), 0);
	assert_int_equal(id, 1);

	assert_int_equal(fg_store_artifact_get(f->s, id, &doc, &err), 0);
	assert_int_equal(cJSON_GetObjectItem(doc, "id")->valueint, 1);
	assert_string_equal(cJSON_GetObjectItem(doc, "source")->valuestring, "models/q");
	assert_string_equal(cJSON_GetObjectItem(doc, "path")->valuestring, "/srv/artifacts/1");
	assert_string_equal(cJSON_GetObjectItem(doc, "family")->valuestring, "qwen3_5");
	assert_string_equal(cJSON_GetObjectItem(doc, "fingerprint")->valuestring, "f00d");
	assert_true(cJSON_IsFalse(cJSON_GetObjectItem(doc, "ok")));
	assert_int_equal(strlen(cJSON_GetObjectItem(doc, "created_at")->valuestring), 24);
	assert_true(cJSON_Compare(cJSON_GetObjectItem(doc, "report"), report, 1));
	assert_true(cJSON_Compare(cJSON_GetObjectItem(doc, "provenance"), prov, 1));
	/* One row per code, in report order, with origin. */
	want = cJSON_Parse("[{\"code\":\"mixed_convention\",\"severity\":\"error\",\"origin\":\"static\"},"
			   "{\"code\":\"quantized_mtp_head\",\"severity\":\"warning\",\"origin\":\"static\"}]");
	assert_true(cJSON_Compare(cJSON_GetObjectItem(doc, "verdicts"), want, 1));
	cJSON_Delete(want);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "verifications")), 0);
	want = cJSON_Parse("{\"config.json\":\"bb22\",\"mtp.safetensors\":\"aa11\"}");
	assert_true(cJSON_Compare(cJSON_GetObjectItem(doc, "fingerprints"), want, 1));
	cJSON_Delete(want);

	/*
	 * For a GET: the report and provenance as the stored text, not parsed and
	 * printed again; the printed document is the parsed one.
	 */
	{
		cJSON *raw = NULL, *back;
		char stored[4096], *text;

		assert_int_equal(fg_store_artifact_get_raw(f->s, id, &raw, &err), 0);
		assert_true(cJSON_IsRaw(cJSON_GetObjectItem(raw, "report")));
		assert_true(cJSON_IsRaw(cJSON_GetObjectItem(raw, "provenance")));
		query_text(f->s, "SELECT report FROM artifact_docs WHERE artifact_id = 1", stored, sizeof(stored));
		assert_string_equal(cJSON_GetObjectItem(raw, "report")->valuestring, stored);
		text = cJSON_PrintUnformatted(raw);
		back = cJSON_Parse(text);
		assert_true(cJSON_Compare(back, doc, 1));
		cJSON_free(text);
		cJSON_Delete(back);
		cJSON_Delete(raw);
		raw = NULL;
		/* Stored spacing survives: nothing reprinted it. */
		exec_sql(f->s, "UPDATE artifact_docs SET report = '{\"ok\" :  false, \"verdicts\": [ ]}' WHERE artifact_id = 1");
		assert_int_equal(fg_store_artifact_get_raw(f->s, id, &raw, &err), 0);
		text = cJSON_PrintUnformatted(raw);
		assert_non_null(strstr(text, "\"report\":{\"ok\" :  false, \"verdicts\": [ ]},\"provenance\":{"));
		cJSON_free(text);
		cJSON_Delete(raw);
		raw = NULL;
		assert_int_equal(fg_store_artifact_get_raw(f->s, 99, &raw, &err), FG_ENOTFOUND);
		assert_null(raw);
		/* Put the report back for what follows. */
		text = cJSON_PrintUnformatted(report);
		snprintf(stored, sizeof(stored), "UPDATE artifact_docs SET report = '%s' WHERE artifact_id = 1", text);
		cJSON_free(text);
		exec_sql(f->s, stored);
	}
	cJSON_Delete(doc);
	doc = NULL;

	/* With a verification, and a plain inspection without path, fingerprint or provenance. */
	put_verification(f->s, id, "mtp_acceptance_collapsed");
	assert_int_equal(fg_store_artifact_get(f->s, id, &doc, &err), 0);
	v = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "verifications"), 0);
	assert_non_null(v);
	assert_string_equal(cJSON_GetObjectItem(v, "verdict")->valuestring, "mtp_acceptance_collapsed");
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(v, "result"), "verdict")->valuestring,
			    "mtp_acceptance_collapsed");
	assert_non_null(cJSON_GetObjectItem(v, "id"));
	assert_non_null(cJSON_GetObjectItem(v, "created_at"));
	v = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "verdicts"), 2);
	assert_string_equal(cJSON_GetObjectItem(v, "origin")->valuestring, "verification");
	assert_string_equal(cJSON_GetObjectItem(v, "severity")->valuestring, "error");
	cJSON_Delete(doc);
	doc = NULL;
	id = put_artifact(f->s, "plain", NULL, NULL, NULL, NAN, NULL);
	assert_int_equal(fg_store_artifact_get(f->s, id, &doc, &err), 0);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(doc, "path")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(doc, "fingerprint")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(doc, "provenance")));
	{
		cJSON *raw = NULL;

		assert_int_equal(fg_store_artifact_get_raw(f->s, id, &raw, &err), 0);
		assert_true(cJSON_IsNull(cJSON_GetObjectItem(raw, "provenance")));
		assert_true(cJSON_IsRaw(cJSON_GetObjectItem(raw, "report")));
		cJSON_Delete(raw);
	}
	assert_string_equal(cJSON_GetObjectItem(doc, "family")->valuestring, "unknown");
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(doc, "ok")));
	cJSON_Delete(doc);
	doc = NULL;

	assert_int_equal(fg_store_artifact_get(f->s, 99, &doc, &err), FG_ENOTFOUND);
	assert_null(doc);

	/* Refused before anything is written. */
	cJSON_ReplaceItemInObject(report, "verdicts",
				  cJSON_Parse("[{\"code\":\"stray_shard\",\"severity\":\"fatal\"}]"));
	assert_int_equal(fg_store_artifact_put(f->s, &a, &id, NULL, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "severity"));
	cJSON_ReplaceItemInObject(report, "verdicts", cJSON_Parse("[{\"code\":\"Bad Code\",\"severity\":\"info\"}]"));
	assert_int_equal(fg_store_artifact_put(f->s, &a, &id, NULL, &err), FG_EINPUT);
	/* Codes and severities are the verdict table's: an unknown code, a verification code, another severity. */
	cJSON_ReplaceItemInObject(report, "verdicts", cJSON_Parse("[{\"code\":\"stray_shards\",\"severity\":\"warning\"}]"));
	assert_int_equal(fg_store_artifact_put(f->s, &a, &id, NULL, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "not a verdict code"));
	cJSON_ReplaceItemInObject(report, "verdicts",
				  cJSON_Parse("[{\"code\":\"mtp_acceptance_collapsed\",\"severity\":\"error\"}]"));
	assert_int_equal(fg_store_artifact_put(f->s, &a, &id, NULL, &err), FG_EINPUT);
	cJSON_ReplaceItemInObject(report, "verdicts", cJSON_Parse("[{\"code\":\"stray_shard\",\"severity\":\"error\"}]"));
	assert_int_equal(fg_store_artifact_put(f->s, &a, &id, NULL, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "stray_shard is raised at warning"));
	cJSON_ReplaceItemInObject(report, "verdicts", cJSON_CreateArray());
	cJSON_ReplaceItemInObject(prov, "files", cJSON_Parse("{\"a\": 5}"));
	assert_int_equal(fg_store_artifact_put(f->s, &a, &id, NULL, &err), FG_EINPUT);
	/* Only the object form forge writes: an array of records is refused. */
	cJSON_ReplaceItemInObject(prov, "files", cJSON_Parse("[{\"name\": \"a\", \"sha256\": \"01\"}]"));
	assert_int_equal(fg_store_artifact_put(f->s, &a, &id, NULL, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "provenance.files is not an object"));
	a.provenance = NULL;
	a.report = NULL;
	assert_int_equal(fg_store_artifact_put(f->s, &a, &id, NULL, &err), FG_EINPUT);
	a.report = report;
	a.source = NULL;
	assert_int_equal(fg_store_artifact_put(f->s, &a, &id, NULL, &err), FG_EINPUT);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM artifacts"), 2);
	cJSON_Delete(report);
	cJSON_Delete(prov);
	assert_stats_consistent(f->s);
}

static void test_artifact_by_fingerprint(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	int64_t id = 0;

	put_artifact(f->s, "a", "qwen3_5", "fp1", NULL, NAN, NULL);
	put_artifact(f->s, "b", "qwen3_5", "fp2", NULL, NAN, NULL);
	put_artifact(f->s, "a again", "qwen3_5", "fp1", NULL, NAN, NULL);
	assert_int_equal(fg_store_artifact_by_fingerprint(f->s, "fp1", &id, &err), 0);
	assert_int_equal(id, 3);
	assert_int_equal(fg_store_artifact_by_fingerprint(f->s, "fp2", &id, &err), 0);
	assert_int_equal(id, 2);
	assert_int_equal(fg_store_artifact_by_fingerprint(f->s, "nope", &id, &err), FG_ENOTFOUND);
	assert_non_null(strstr(err.msg, "'nope'"));
	assert_int_equal(fg_store_artifact_by_fingerprint(f->s, NULL, &id, &err), FG_EINPUT);
}

/* Ids of a list page into ids; returns next. */
static int64_t list_artifacts(struct fg_store *s, const char *verdict, const char *family, int64_t cursor, int limit,
			      int64_t *ids, int *n, cJSON **keep)
{
	struct fg_err err = { 0 };
	cJSON *arr = NULL, *it;
	int64_t next = -1;

	if (fg_store_artifact_list(s, verdict, family, cursor, limit, &arr, &next, &err))
		fail_msg("artifact_list: %s", err.msg);
	*n = 0;
	cJSON_ArrayForEach(it, arr)
		ids[(*n)++] = (int64_t)cJSON_GetObjectItem(it, "id")->valuedouble;
	if (keep)
		*keep = arr;
	else
		cJSON_Delete(arr);
	return next;
}

static void test_artifact_list(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	int64_t ids[16], next;
	cJSON *page = NULL, *item, *want;
	int n;

	put_artifact(f->s, "a1", "qwen3_5", "f1", ERR_VERDICT, NAN, NULL);   /* 1 */
	put_artifact(f->s, "a2", "glm4_moe", "f2", WARN_VERDICT, NAN, NULL); /* 2 */
	put_artifact(f->s, "a3", "qwen3_5", "f3", NULL, NAN, NULL);          /* 3 */
	put_artifact(f->s, "a4", "glm4_moe", "f4", ERR_VERDICT, NAN, NULL);  /* 4 */
	put_artifact(f->s, "a5", "qwen3_5", "f5", ERR_VERDICT, NAN, NULL);   /* 5 */

	/* Newest first, keyset pages. */
	next = list_artifacts(f->s, NULL, NULL, 0, 2, ids, &n, NULL);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], 5);
	assert_int_equal(ids[1], 4);
	assert_int_equal(next, 4);
	next = list_artifacts(f->s, NULL, NULL, next, 2, ids, &n, NULL);
	assert_int_equal(ids[0], 3);
	assert_int_equal(ids[1], 2);
	assert_int_equal(next, 2);
	next = list_artifacts(f->s, NULL, NULL, next, 2, ids, &n, NULL);
	assert_int_equal(n, 1);
	assert_int_equal(ids[0], 1);
	assert_int_equal(next, 0);

	/* The item shape. */
	list_artifacts(f->s, NULL, NULL, 0, 1, ids, &n, &page);
	item = cJSON_GetArrayItem(page, 0);
	assert_int_equal(cJSON_GetArraySize(item), 9);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(item, "digest")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(item, "head_fingerprint")));
	assert_string_equal(cJSON_GetObjectItem(item, "source")->valuestring, "a5");
	assert_string_equal(cJSON_GetObjectItem(item, "family")->valuestring, "qwen3_5");
	assert_string_equal(cJSON_GetObjectItem(item, "fingerprint")->valuestring, "f5");
	assert_true(cJSON_IsFalse(cJSON_GetObjectItem(item, "ok")));
	assert_non_null(cJSON_GetObjectItem(item, "created_at"));
	want = cJSON_Parse("[\"embedded_mtp_shift_hazard\"]");
	assert_true(cJSON_Compare(cJSON_GetObjectItem(item, "verdicts"), want, 1));
	cJSON_Delete(want);
	cJSON_Delete(page);

	/* Filters. */
	next = list_artifacts(f->s, "embedded_mtp_shift_hazard", NULL, 0, 10, ids, &n, NULL);
	assert_int_equal(n, 3);
	assert_int_equal(ids[0], 5);
	assert_int_equal(ids[2], 1);
	assert_int_equal(next, 0);
	next = list_artifacts(f->s, "embedded_mtp_shift_hazard", NULL, 0, 2, ids, &n, NULL);
	assert_int_equal(next, 4);
	next = list_artifacts(f->s, "embedded_mtp_shift_hazard", NULL, next, 2, ids, &n, NULL);
	assert_int_equal(n, 1);
	assert_int_equal(ids[0], 1);
	next = list_artifacts(f->s, NULL, "glm4_moe", 0, 10, ids, &n, NULL);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], 4);
	assert_int_equal(ids[1], 2);
	next = list_artifacts(f->s, "embedded_mtp_shift_hazard", "glm4_moe", 0, 10, ids, &n, NULL);
	assert_int_equal(n, 1);
	assert_int_equal(ids[0], 4);
	next = list_artifacts(f->s, "embedded_mtp_shift_hazard", "qwen3_5", 5, 10, ids, &n, NULL);
	assert_int_equal(n, 1);
	assert_int_equal(ids[0], 1);
	list_artifacts(f->s, "no_such_code", NULL, 0, 10, ids, &n, NULL);
	assert_int_equal(n, 0);
	/* A verification verdict is listed like a static one; "" means no filter. */
	put_verification(f->s, 3, "mtp_acceptance_collapsed");
	list_artifacts(f->s, "mtp_acceptance_collapsed", "", 0, 10, ids, &n, NULL);
	assert_int_equal(n, 1);
	assert_int_equal(ids[0], 3);

	assert_int_equal(fg_store_artifact_list(f->s, NULL, NULL, -3, 10, &page, &next, &err), FG_EINPUT);
	next = list_artifacts(f->s, NULL, NULL, 0, 0, ids, &n, NULL);
	assert_int_equal(n, 1);
	assert_int_equal(next, 5);
	assert_stats_consistent(f->s);
}

static void test_verification(void **state)
{
	struct fixture *f = *state;
	struct fg_store_counts c;
	struct fg_err err = { 0 };
	cJSON *result, *doc = NULL;
	int64_t ids[8], id = 0;
	int n;

	put_artifact(f->s, "m", "qwen3_5", "fp", WARN_VERDICT, NAN, NULL);
	put_verification(f->s, 1, "mtp_acceptance_collapsed");
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM verdicts WHERE artifact_id = 1"
					 " AND origin = 'verification' AND code = 'mtp_acceptance_collapsed'"), 1);
	assert_int_equal(fg_store_counts(f->s, &c, NULL, &err), 0);
	assert_int_equal(c.artifacts_unhealthy, 1);
	/* A later verification decides: the verdict row follows it, the history stays. */
	put_verification(f->s, 1, "mtp_depth_wins");
	list_artifacts(f->s, "mtp_acceptance_collapsed", NULL, 0, 10, ids, &n, NULL);
	assert_int_equal(n, 0);
	list_artifacts(f->s, "mtp_depth_wins", NULL, 0, 10, ids, &n, NULL);
	assert_int_equal(n, 1);
	assert_int_equal(fg_store_counts(f->s, &c, NULL, &err), 0);
	assert_int_equal(c.artifacts_unhealthy, 0);
	assert_int_equal(fg_store_artifact_get(f->s, 1, &doc, &err), 0);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "verifications")), 2);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "verdicts")), 2);
	cJSON_Delete(doc);

	/* The result's own severity is kept. */
	result = cJSON_Parse("{\"verdict\":\"no_mtp_depth_beat_ar\",\"severity\":\"warning\",\"best_depth\":null}");
	assert_int_equal(fg_store_verification_put(f->s, 1, "[]", result, &id, NULL, NULL, &err), 0);
	assert_int_equal(id, 3);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM verdicts WHERE artifact_id = 1 AND origin ="
					 " 'verification' AND severity = 'warning'"), 1);
	/* Refusals. */
	assert_int_equal(fg_store_verification_put(f->s, 42, "[]", result, &id, NULL, NULL, &err), FG_ENOTFOUND);
	assert_non_null(strstr(err.msg, "42"));
	assert_int_equal(fg_store_verification_put(f->s, 1, "[oops", result, &id, NULL, NULL, &err), FG_EINPUT);
	assert_int_equal(fg_store_verification_put(f->s, 1, NULL, result, &id, NULL, NULL, &err), FG_EINPUT);
	/* A severity other than the table's, or a static code, is refused. */
	cJSON_ReplaceItemInObject(result, "severity", cJSON_CreateString("info"));
	assert_int_equal(fg_store_verification_put(f->s, 1, "[]", result, &id, NULL, NULL, &err), FG_EINPUT);
	cJSON_ReplaceItemInObject(result, "severity", cJSON_CreateString("warning"));
	cJSON_ReplaceItemInObject(result, "verdict", cJSON_CreateString("stray_shard"));
	assert_int_equal(fg_store_verification_put(f->s, 1, "[]", result, &id, NULL, NULL, &err), FG_EINPUT);
	cJSON_DeleteItemFromObject(result, "verdict");
	assert_int_equal(fg_store_verification_put(f->s, 1, "[]", result, &id, NULL, NULL, &err), FG_EINPUT);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM verifications"), 3);
	cJSON_Delete(result);
	assert_stats_consistent(f->s);
}

/* ---- fleet ---- */

static void report(struct fg_store *s, const char *host, const char *runtime, int64_t artifact)
{
	struct fg_err err = { 0 };
	cJSON *observed = cJSON_Parse("{\"tok_s\":12.5}");

	if (fg_store_fleet_report(s, host, artifact, runtime, NULL, observed, &err))
		fail_msg("fleet_report: %s", err.msg);
	cJSON_Delete(observed);
}

static cJSON *health(struct fg_store *s)
{
	struct fg_err err = { 0 };
	cJSON *h = NULL;

	if (fg_store_fleet_health(s, &h, &err))
		fail_msg("fleet_health: %s", err.msg);
	return h;
}

static void test_fleet_health(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	cJSON *h, *u, *want, *w;
	int64_t bad, good, collapsed, plain;

	bad = put_artifact(f->s, "bad", "qwen3_5", "fb", ERR_VERDICT, 1.0, "delta");
	good = put_artifact(f->s, "good", "qwen3_5", "fg", WARN_VERDICT, 1.78, "absolute");
	collapsed = put_artifact(f->s, "slow", "glm4_moe", NULL, NULL, 2.5, "absolute");
	plain = put_artifact(f->s, "plain", "mimo", "fm", NULL, NAN, NULL);
	put_verification(f->s, collapsed, "mtp_acceptance_collapsed");
	report(f->s, "host1", "mlx-lm-0.31", bad);
	report(f->s, "host1", "mlx-lm-0.31", good); /* replaces host1's first report */
	report(f->s, "host2", "ollama", bad);
	report(f->s, "host3", "ollama", plain);

	h = health(f->s);
	want = cJSON_Parse("{\"total\":4,\"by_verdict\":{\"embedded_mtp_shift_hazard\":1,\"stray_shard\":1,"
			   "\"mtp_acceptance_collapsed\":1},\"by_family\":{\"qwen3_5\":2,\"glm4_moe\":1,\"mimo\":1}}");
	assert_true(cJSON_Compare(cJSON_GetObjectItem(h, "artifacts"), want, 0));
	cJSON_Delete(want);

	/* Unhealthy: the served one first with its hosts (host1's old report no longer counts), then the rest. */
	u = cJSON_GetObjectItem(h, "unhealthy");
	assert_int_equal(cJSON_GetArraySize(u), 2);
	assert_int_equal(cJSON_GetObjectItem(h, "unhealthy_total")->valueint, 2);
	w = cJSON_GetArrayItem(u, 0);
	assert_int_equal(cJSON_GetObjectItem(w, "artifact_id")->valueint, bad);
	assert_string_equal(cJSON_GetObjectItem(w, "source")->valuestring, "bad");
	assert_string_equal(cJSON_GetObjectItem(w, "family")->valuestring, "qwen3_5");
	assert_string_equal(cJSON_GetObjectItem(w, "fingerprint")->valuestring, "fb");
	want = cJSON_Parse("[\"embedded_mtp_shift_hazard\"]");
	assert_true(cJSON_Compare(cJSON_GetObjectItem(w, "verdicts"), want, 1));
	cJSON_Delete(want);
	w = cJSON_GetObjectItem(w, "hosts");
	assert_int_equal(cJSON_GetArraySize(w), 1);
	w = cJSON_GetArrayItem(w, 0);
	assert_string_equal(cJSON_GetObjectItem(w, "host")->valuestring, "host2");
	assert_string_equal(cJSON_GetObjectItem(w, "runtime")->valuestring, "ollama");
	assert_int_equal(strlen(cJSON_GetObjectItem(w, "reported_at")->valuestring), 24);
	assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(w, "observed"), "tok_s")->valuedouble == 12.5);
	w = cJSON_GetArrayItem(u, 1);
	assert_int_equal(cJSON_GetObjectItem(w, "artifact_id")->valueint, collapsed);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(w, "fingerprint")));
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(w, "hosts")), 0);

	/*
	 * The probe counts read the after-load probe of each served runtime; these
	 * reports carry none (their stored probes 1.0, 1.78, 2.5 are before load),
	 * so nothing is bucketed and every report is not_counted.
	 */
	want = cJSON_Parse("{\"basis\":\"after_load\",\"healthy_band\":[1.74,1.83],\"plausible_band\":[1.25,2.4],"
			   "\"buckets\":[{\"range\":[0,1.25],\"count\":0},{\"range\":[1.25,1.74],\"count\":0},"
			   "{\"range\":[1.74,1.83],\"count\":0},{\"range\":[1.83,2.4],\"count\":0},"
			   "{\"range\":[2.4,null],\"count\":0}],\"outside_band\":0,\"outside_plausible\":0,"
			   "\"reports\":0,\"not_counted\":3,\"by_family\":{}}");
	assert_true(cJSON_Compare(cJSON_GetObjectItem(h, "probe_qnorm"), want, 1));
	cJSON_Delete(want);
	/* Every report, with what the host observed, in health's host list. */
	w = cJSON_GetObjectItem(h, "hosts");
	assert_int_equal(cJSON_GetArraySize(w), 3);
	assert_int_equal(cJSON_GetObjectItem(h, "hosts_total")->valueint, 3);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(w, 0), "host")->valuestring, "host1");
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(w, 0), "artifact_id")->valueint, good);
	assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(w, 0), "observed"), "tok_s")->valuedouble
		    == 12.5);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(w, 0), "probe_after")));
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(w, 0), "runtime_reported")->valuestring,
			    "mlx-lm-0.31");

	/* host2 serves a delta head, host1 an absolute one. */
	w = cJSON_GetArrayItem(cJSON_GetObjectItem(h, "warnings"), 0);
	assert_non_null(w);
	assert_string_equal(cJSON_GetObjectItem(w, "code")->valuestring, "mixed_head_conventions_in_fleet");
	assert_non_null(strstr(cJSON_GetObjectItem(w, "detail")->valuestring, "delta"));
	cJSON_Delete(h);

	/* host2 moves to the good artifact: nothing unhealthy is served, one convention remains. */
	report(f->s, "host2", "ollama", good);
	h = health(f->s);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(h, "warnings")), 0);
	u = cJSON_GetObjectItem(h, "unhealthy");
	assert_int_equal(cJSON_GetArraySize(u), 2);
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(u, 0), "artifact_id")->valueint, collapsed);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(u, 1), "hosts")), 0);
	cJSON_Delete(h);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM fleet_reports"), 3);

	/* Reports for unknown artifacts or without host/runtime are refused. */
	assert_int_equal(fg_store_fleet_report(f->s, "h", 999, "ollama", NULL, NULL, &err), FG_ENOTFOUND);
	assert_non_null(strstr(err.msg, "999"));
	assert_int_equal(fg_store_fleet_report(f->s, "", good, "ollama", NULL, NULL, &err), FG_EINPUT);
	assert_int_equal(fg_store_fleet_report(f->s, "h", good, NULL, NULL, NULL, &err), FG_EINPUT);
	/* observed NULL is stored as an empty object. */
	assert_int_equal(fg_store_fleet_report(f->s, "h4", good, "hf", NULL, NULL, &err), 0);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM fleet_reports WHERE host = 'h4' AND observed = '{}'"),
			 1);
	assert_stats_consistent(f->s);
}

static int64_t put_report(struct fg_store *s, const char *family, const char *verdicts, const char *runtimes);

static int64_t served(struct fg_store *s, const char *family, const char *runtime, double after, const char *host)
{
	char runtimes[160];
	int64_t id;

	snprintf(runtimes, sizeof(runtimes), "[{\"runtime\":\"%s\",\"trunk_probe_after\":%.17g}]", runtime, after);
	id = put_report(s, family, "[]", runtimes);
	report(s, host, runtime, id);
	return id;
}

static const cJSON *probe_family(const cJSON *h, const char *family)
{
	return cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(h, "probe_qnorm"), "by_family"), family);
}

/*
 * Qwen3.5's band, after load, as served: [0,1.25) [1.25,1.74) [1.74,1.83]
 * (1.83,2.4] (2.4,inf); outside_band is every served artifact outside the
 * healthy band, outside_plausible those outside [1.25, 2.4].  A family with
 * no published band is shown, never counted outside.
 */
static void test_fleet_probe_buckets(void **state)
{
	struct fixture *f = *state;
	static const double probes[] = { -0.5, 1.2499, 1.25, 1.7399, 1.74, 1.83, 1.8301, 2.4, 2.4001, 9.0 };
	static const int want[] = { 2, 2, 2, 2, 2 };
	const cJSON *q, *b, *fam;
	char host[16];
	cJSON *h;
	int i = 0;

	for (size_t k = 0; k < sizeof(probes) / sizeof(probes[0]); k++) {
		snprintf(host, sizeof(host), "h%zu", k);
		served(f->s, "qwen3_5", "mlx-lm-0.31", probes[k], host);
	}
	/* Not served: no count, whatever its probe. */
	put_report(f->s, "qwen3_5", "[]", "[{\"runtime\":\"mlx-lm-0.31\",\"trunk_probe_after\":0.79}]");
	/* Qwen3-Next has no published band: shown, not counted outside. */
	served(f->s, "qwen3_next", "mlx-lm-0.31", 2.9, "next1");
	served(f->s, "qwen3_next", "mlx-lm-0.31", 1.1, "next2");
	h = health(f->s);
	q = cJSON_GetObjectItem(h, "probe_qnorm");
	cJSON_ArrayForEach(b, cJSON_GetObjectItem(q, "buckets"))
		assert_int_equal(cJSON_GetObjectItem(b, "count")->valueint, want[i++]);
	assert_int_equal(i, 5);
	assert_int_equal(cJSON_GetObjectItem(q, "outside_band")->valueint, 8);
	assert_int_equal(cJSON_GetObjectItem(q, "outside_plausible")->valueint, 4);
	assert_int_equal(cJSON_GetObjectItem(q, "reports")->valueint, 12);
	assert_int_equal(cJSON_GetObjectItem(q, "not_counted")->valueint, 0);
	fam = probe_family(h, "qwen3_5");
	assert_int_equal(cJSON_GetObjectItem(fam, "artifacts")->valueint, 10);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(fam, "buckets"), 2), "name")->valuestring,
			    "healthy");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(fam, "band"), "healthy")), 2);
	fam = probe_family(h, "qwen3_next");
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(fam, "band")));
	assert_null(cJSON_GetObjectItem(fam, "outside_band"));
	assert_int_equal(cJSON_GetObjectItem(fam, "reports")->valueint, 2);
	assert_true(cJSON_GetObjectItem(fam, "min")->valuedouble == 1.1);
	assert_true(cJSON_GetObjectItem(fam, "max")->valuedouble == 2.9);
	/* probe_after_load names each family's band, null without one. */
	b = cJSON_GetObjectItem(cJSON_GetObjectItem(h, "probe_after_load"), "bands");
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(b, "qwen3_next")));
	assert_true(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "qwen3_5"), "plausible"), 1)->valuedouble ==
		    2.4);
	cJSON_Delete(h);
	assert_stats_consistent(f->s);
}

/*
 * Issue 13: a raw Hugging Face artifact stores its q-norm as an offset (0.79
 * on disk); every runtime that serves it adds the 1 (1.79 after load).
 * Served healthy, it is never outside the band.  One artifact served in two
 * runtimes, healthy in one and shifted twice in the other, counts once in
 * each bucket and once outside.
 */
static void test_fleet_probe_hf_served(void **state)
{
	struct fixture *f = *state;
	struct fg_artifact_in a = { 0 };
	struct fg_err err = { 0 };
	cJSON *rep = cJSON_Parse("{\"schema\":\"forged.inspect.v1\",\"verdicts\":[],\"runtimes\":["
				    "{\"runtime\":\"vllm\",\"trunk_probe_after\":1.7908},"
				    "{\"runtime\":\"mlx-lm-0.32\",\"trunk_probe_after\":1.7908}]}"), *h;
	const cJSON *q;
	int64_t hf = 0, mlx;

	a.source = "qwen35_hf";
	a.family = "qwen3_5";
	a.report = rep;
	a.ok = 1;
	a.probe_mean = 0.7908; /* the probe on disk */
	a.head_convention = "delta";
	assert_int_equal(fg_store_artifact_put(f->s, &a, &hf, NULL, &err), 0);
	cJSON_Delete(rep);
	report(f->s, "gpu-hf", "vllm", hf);
	report(f->s, "gpu-mlx", "mlx-lm-0.32", hf);
	h = health(f->s);
	q = cJSON_GetObjectItem(h, "probe_qnorm");
	assert_int_equal(cJSON_GetObjectItem(q, "outside_band")->valueint, 0);
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(q, "buckets"), 2), "count")->valueint, 1);
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(q, "buckets"), 0), "count")->valueint, 0);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(h, "hosts"), 0), "probe_bucket")->valuestring,
			    "healthy");
	cJSON_Delete(h);
	mlx = put_report(f->s, "qwen3_5", "[]", "[{\"runtime\":\"mlx-lm-0.31\",\"trunk_probe_after\":1.7913},"
						 "{\"runtime\":\"vllm\",\"trunk_probe_after\":2.7913}]");
	report(f->s, "gpu-a", "mlx-lm-0.31", mlx);
	report(f->s, "gpu-b", "vllm", mlx);
	h = health(f->s);
	q = cJSON_GetObjectItem(h, "probe_qnorm");
	assert_int_equal(cJSON_GetObjectItem(q, "outside_band")->valueint, 1);
	assert_int_equal(cJSON_GetObjectItem(q, "outside_plausible")->valueint, 1);
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(q, "buckets"), 2), "count")->valueint, 2);
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(q, "buckets"), 4), "count")->valueint, 1);
	assert_int_equal(cJSON_GetObjectItem(probe_family(h, "qwen3_5"), "artifacts")->valueint, 2);
	assert_int_equal(cJSON_GetObjectItem(probe_family(h, "qwen3_5"), "reports")->valueint, 4);
	cJSON_Delete(h);
}

/* The SQL bucket of a probe mean, through the schema's probe_bucket column. */
static void expect_bucket(struct fixture *f, double probe, const char *want)
{
	int64_t id = put_artifact(f->s, "b", "qwen3_5", NULL, NULL, probe, NULL);
	char sql[96], got[32];

	snprintf(sql, sizeof(sql), "SELECT probe_bucket FROM artifacts WHERE id = %lld", (long long)id);
	query_text(f->s, sql, got, sizeof(got));
	if (strcmp(got, want) != 0)
		fail_msg("probe %.6f: the schema says bucket %s, fleet.c's ranges say %s", probe, got, want);
}

/*
 * db.c's CASE and fleet.c's ranges are one table: every value inside a
 * range lands in that range's bucket.  And the CASE, built from
 * convention.h's constants, is still the text version 1 was released with.
 */
static void test_probe_buckets_match_fleet_ranges(void **state)
{
	static const double inside[] = { 0.001, 0.25, 0.5, 0.75, 0.999 };
	struct fixture *f = *state;
	sqlite3_stmt *st = NULL;

	for (size_t i = 0; i < FG_SQL_PROBE_BUCKETS; i++) {
		double lo = fg_sql_probe_ranges[i].lo, hi = fg_sql_probe_ranges[i].hi;

		if (i)
			assert_true(lo == fg_sql_probe_ranges[i - 1].hi); /* the ranges tile */
		for (size_t k = 0; k < sizeof(inside) / sizeof(inside[0]); k++)
			expect_bucket(f, hi < 0 ? lo + 100.0 * inside[k] : lo + (hi - lo) * inside[k],
				      fg_sql_probe_buckets[i]);
	}
	expect_bucket(f, -0.5, fg_sql_probe_buckets[0]);
	assert_true(fg_sql_probe_ranges[FG_SQL_PROBE_BAND].lo == FG_QK_BAND_MIN);
	assert_true(fg_sql_probe_ranges[FG_SQL_PROBE_BAND].hi == FG_QK_BAND_MAX);
	if (f->pg)
		return; /* PostgreSQL's CASE is built from the same constants (pg/db.c); its stored text is the server's */
	assert_int_equal(sqlite3_prepare_v2(f->s->db, "SELECT sql FROM sqlite_master WHERE name = 'artifacts'", -1,
					    &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_non_null(strstr((const char *)sqlite3_column_text(st, 0),
			       "(CASE WHEN probe_mean IS NULL THEN NULL"
			       "  WHEN probe_mean < 1.25 THEN 'below' WHEN probe_mean < 1.74 THEN 'low'"
			       "  WHEN probe_mean <= 1.83 THEN 'band' WHEN probe_mean <= 2.4 THEN 'high' ELSE 'above'"
			       " END) VIRTUAL,"));
	sqlite3_finalize(st);
}

/* An artifact whose report names runtimes with their after-load trunk probe. */
static int64_t put_report(struct fg_store *s, const char *family, const char *verdicts, const char *runtimes)
{
	char text[2048];
	struct fg_artifact_in a = { 0 };
	struct fg_err err = { 0 };
	cJSON *report;
	int64_t id = 0;

	snprintf(text, sizeof(text), "{\"schema\":\"forged.inspect.v1\",\"verdicts\":%s,\"runtimes\":%s}", verdicts,
		 runtimes);
	report = cJSON_Parse(text);
	assert_non_null(report);
	a.source = family;
	a.family = family;
	a.report = report;
	a.probe_mean = NAN;
	if (fg_store_artifact_put(s, &a, &id, NULL, &err))
		fail_msg("artifact_put: %s", err.msg);
	cJSON_Delete(report);
	return id;
}

static int bin_count(const cJSON *dist, const char *family, int bin)
{
	const cJSON *arr = cJSON_GetObjectItem(cJSON_GetObjectItem(dist, "by_family"), family);

	assert_int_equal(cJSON_GetArraySize(arr), 80);
	return cJSON_GetArrayItem(arr, bin)->valueint;
}

/*
 * verdict_matrix counts verdict rows by family, code and severity;
 * probe_after_load bins each host report by its runtime's trunk_probe_after.
 */
static void test_fleet_distributions(void **state)
{
	struct fixture *f = *state;
	cJSON *h, *dist, *m, *want;
	int64_t pack, glm, edges;
	int total = 0;

	pack = put_report(f->s, "qwen3_5", ERR_VERDICT,
			  "[{\"runtime\":\"mlx-lm-0.31\",\"trunk_probe_after\":2.7913},"
			  "{\"runtime\":\"mtplx-2.12\",\"trunk_probe_after\":1.7913}]");
	glm = put_report(f->s, "glm4_moe", WARN_VERDICT, "[{\"runtime\":\"ollama\",\"trunk_probe_after\":1.78}]");
	edges = put_report(f->s, "mimo", "[]",
			   "[{\"runtime\":\"ollama\",\"trunk_probe_after\":-1},{\"runtime\":\"hf\",\"trunk_probe_after\":9},"
			   "{\"runtime\":\"mlx-lm-0.32\",\"trunk_probe_after\":2.4},"
			   "{\"runtime\":\"mtplx-2.11\",\"trunk_probe_after\":null}]");
	put_verification(f->s, glm, "mtp_acceptance_collapsed");
	report(f->s, "gpu-a", "mlx-lm-0.31", pack);
	report(f->s, "gpu-b", "mlx-lm-0.31", pack);
	report(f->s, "gpu-c", "mtplx-2.12", pack);
	report(f->s, "gpu-d", "hf", pack); /* the pack's report has no hf row: not counted */
	report(f->s, "gpu-e", "ollama", glm);
	report(f->s, "gpu-f", "ollama", edges);
	report(f->s, "gpu-f", "hf", edges);
	report(f->s, "gpu-g", "mlx-lm-0.32", edges);
	report(f->s, "gpu-h", "mtplx-2.11", edges); /* probe null: not counted */
	h = health(f->s);

	m = cJSON_GetObjectItem(h, "verdict_matrix");
	want = cJSON_Parse("[{\"family\":\"glm4_moe\",\"code\":\"mtp_acceptance_collapsed\",\"severity\":\"error\",\"count\":1},"
			   "{\"family\":\"glm4_moe\",\"code\":\"stray_shard\",\"severity\":\"warning\",\"count\":1},"
			   "{\"family\":\"qwen3_5\",\"code\":\"embedded_mtp_shift_hazard\",\"severity\":\"error\",\"count\":1}]");
	assert_true(cJSON_Compare(m, want, 1));
	cJSON_Delete(want);

	dist = cJSON_GetObjectItem(h, "probe_after_load");
	assert_int_equal(cJSON_GetObjectItem(dist, "reports")->valueint, 7);
	assert_int_equal(cJSON_GetObjectItem(dist, "not_counted")->valueint, 2);
	assert_int_equal(bin_count(dist, "qwen3_5", 55), 2); /* 2.7913: both mlx-lm-0.31 hosts, double-shifted */
	assert_int_equal(bin_count(dist, "qwen3_5", 35), 1); /* 1.7913 on gpu-c */
	assert_int_equal(bin_count(dist, "glm4_moe", 35), 1); /* 1.78 */
	assert_int_equal(bin_count(dist, "mimo", 0), 1);      /* below the range: first bin */
	assert_int_equal(bin_count(dist, "mimo", 79), 1);     /* above it: last bin */
	assert_int_equal(bin_count(dist, "mimo", 48), 1);     /* 2.4 starts bin 48 exactly */
	for (const cJSON *fam = cJSON_GetObjectItem(dist, "by_family")->child; fam; fam = fam->next)
		for (const cJSON *c = fam->child; c; c = c->next)
			total += c->valueint;
	assert_int_equal(total, 7);
	cJSON_Delete(h);
	assert_stats_consistent(f->s);
}

/* The artifact document gives each verification's rows back as posted (null when the body had none). */
static void test_verification_rows(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	cJSON *result = cJSON_Parse("{\"verdict\":\"mtp_acceptance_collapsed\"}"), *doc = NULL, *v;
	int64_t a = put_artifact(f->s, "v", "qwen3_5", NULL, NULL, NAN, NULL), id = 0;

	assert_non_null(result);
	put_verification(f->s, a, "mtp_depth_wins"); /* a bare array: no "rows" key */
	assert_int_equal(fg_store_verification_put(f->s, a,
						   "{\"runtime\":\"mtplx-2.12\",\"rows\":[{\"depth\":0,\"tok_s\":15.04},"
						   "{\"depth\":1,\"tok_s\":13.46,\"acceptance\":[0.067]}]}",
						   result, &id, NULL, NULL, &err), 0);
	cJSON_Delete(result);
	assert_int_equal(fg_store_artifact_get(f->s, a, &doc, &err), 0);
	v = cJSON_GetObjectItem(doc, "verifications");
	assert_int_equal(cJSON_GetArraySize(v), 2);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(v, 0), "rows")));
	v = cJSON_GetObjectItem(cJSON_GetArrayItem(v, 1), "rows");
	assert_int_equal(cJSON_GetArraySize(v), 2);
	assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(v, 1), "tok_s")->valuedouble == 13.46);
	assert_true(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(v, 1), "acceptance"), 0)->valuedouble ==
		    0.067);
	cJSON_Delete(doc);
}

/* What migration 8 moved, put back: a database as version 7 left it. */
#define V8_DOWN \
	"ALTER TABLE artifact_docs ADD COLUMN mtplx_runtime TEXT;" \
	" UPDATE artifact_docs SET mtplx_runtime = (SELECT doc FROM artifact_runtime r" \
	" WHERE r.artifact_id = artifact_docs.artifact_id);" \
	" DROP TABLE artifact_runtime;"

/* What migration 7 added, dropped again: a database as version 6 left it. */
#define V7_DOWN V8_DOWN \
	" ALTER TABLE jobs DROP COLUMN bytes_done; ALTER TABLE jobs DROP COLUMN bytes_total;" \
	" ALTER TABLE jobs DROP COLUMN eta_s;"

/* What migrations 6 and 5 added, dropped again: a database as version 4 left it. */
#define V5_DOWN V7_DOWN \
	" DROP TABLE api_idempotency;" \
	" DROP INDEX artifacts_job; ALTER TABLE artifacts DROP COLUMN job_id; DROP INDEX jobs_lease;" \
	" ALTER TABLE jobs DROP COLUMN lease_until; ALTER TABLE jobs DROP COLUMN owner;"

/* What migration 4 added, dropped again: a database as version 3 left it. */
#define V4_DOWN V5_DOWN \
	" DROP INDEX artifacts_digest; DROP INDEX artifacts_head_fingerprint;" \
	" ALTER TABLE artifacts DROP COLUMN digest; ALTER TABLE artifacts DROP COLUMN head_fingerprint;" \
	" ALTER TABLE artifact_docs DROP COLUMN mtplx_runtime; ALTER TABLE fleet_reports DROP COLUMN runtime_reported;" \
	" ALTER TABLE jobs DROP COLUMN verdicts; ALTER TABLE jobs DROP COLUMN asked;"

/* What migration 3 added, dropped again: a database as version 2 left it. */
#define V3_DOWN V4_DOWN \
	" DROP TRIGGER verdicts_family_insert; DROP TRIGGER verdicts_family_delete;" \
	" DROP TRIGGER verdicts_family_update; DROP TRIGGER artifacts_family_verdicts_delete;" \
	" DROP TRIGGER artifacts_family_verdicts_move; DROP TABLE verdict_stats; DROP TABLE artifact_probes;"

/* A version 2 database with artifacts migrates to 3 with verdict_stats and artifact_probes filled. */
static void test_migrate_v2_to_v3(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	cJSON *h;

	put_report(f->s, "qwen3_5", ERR_VERDICT,
		   "[{\"runtime\":\"mlx-lm-0.31\",\"trunk_probe_after\":2.7913},{\"runtime\":\"hf\",\"trunk_probe_after\":null}]");
	put_report(f->s, "glm4_moe", WARN_VERDICT, "[{\"runtime\":\"ollama\",\"trunk_probe_after\":1.78}]");
	report(f->s, "gpu-a", "mlx-lm-0.31", 1);
	/* Back to what version 2 had. */
	exec_sql(f->s, V3_DOWN " PRAGMA user_version = 2");
	fg_store_close(f->s);
	f->s = NULL;
	if (fg_store_open(&f->s, f->path, &err))
		fail_msg("reopening: %s", err.msg);
	assert_int_equal(fg_store_user_version(f->s), FG_STORE_SCHEMA_VERSION);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM artifact_probes"), 2);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM verdict_stats"), 2);
	assert_stats_consistent(f->s);
	h = health(f->s);
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(h, "probe_after_load"), "reports")->valueint, 1);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(h, "verdict_matrix")), 2);
	cJSON_Delete(h);
}

static void test_fleet_health_empty(void **state)
{
	struct fixture *f = *state;
	cJSON *h = health(f->s);
	cJSON *want = cJSON_Parse("{\"schema\":\"forged.fleet_health.v2\","
				  "\"artifacts\":{\"total\":0,\"by_verdict\":{},\"by_family\":{}},\"unhealthy\":[],"
				  "\"unhealthy_total\":0,\"probe_qnorm\":{\"basis\":\"after_load\","
				  "\"healthy_band\":[1.74,1.83],\"plausible_band\":[1.25,2.4],\"buckets\":["
				  "{\"range\":[0,1.25],\"count\":0},{\"range\":[1.25,1.74],\"count\":0},"
				  "{\"range\":[1.74,1.83],\"count\":0},{\"range\":[1.83,2.4],\"count\":0},"
				  "{\"range\":[2.4,null],\"count\":0}],\"outside_band\":0,\"outside_plausible\":0,"
				  "\"reports\":0,\"not_counted\":0,\"by_family\":{}},\"warnings\":[],"
				  "\"verdict_matrix\":[],\"probe_after_load\":{\"lo\":0,\"bin_width\":0.05,\"bins\":80,"
				  "\"healthy_band\":[1.74,1.83],\"double_shift_above\":2.4,\"reports\":0,"
				  "\"not_counted\":0,\"by_family\":{},\"bands\":{}},\"hosts\":[],\"hosts_total\":0}");

	assert_true(cJSON_Compare(h, want, 1));
	cJSON_Delete(want);
	cJSON_Delete(h);
}

/* ---- issue 13: one identity per artifact ---- */

/* A forged artifact's identities, as forge/artifact would store them. */
static int64_t put_forged(struct fg_store *s, const char *source, const char *digest, const char *head,
			  const char *legacy, const char *runtime_doc, int *existed)
{
	struct fg_artifact_in a = { 0 };
	struct fg_err err = { 0 };
	cJSON *report = cJSON_Parse("{\"schema\":\"forged.inspect.v1\",\"verdicts\":[],\"runtimes\":"
				    "[{\"runtime\":\"mtplx-2.12\",\"trunk_probe_after\":1.7913}]}");
	cJSON *rt = runtime_doc ? cJSON_Parse(runtime_doc) : NULL;
	int64_t id = 0;

	a.source = source;
	a.path = "/artifacts/x";
	a.family = "qwen3_5";
	a.fingerprint = legacy;
	a.head_fingerprint = head;
	a.digest = digest;
	a.report = report;
	a.mtplx_runtime = rt;
	a.ok = 1;
	a.probe_mean = 1.7913;
	if (fg_store_artifact_put(s, &a, &id, existed, &err))
		fail_msg("artifact_put: %s", err.msg);
	cJSON_Delete(report);
	cJSON_Delete(rt);
	return id;
}

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "sha256:3333333333333333333333333333333333333333333333333333333333333333"
#define HEAD "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define LEGACY "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/*
 * The same bytes stored twice are one artifact, counted once (a re-forge,
 * a re-inspection of the same source revision); the second store fills in
 * what the first lacked.  Another digest is another artifact.
 */
static void test_artifact_same_digest(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	struct fg_store_counts c;
	int existed = -1;
	int64_t a, b, other;
	cJSON *doc = NULL, *h;

	a = put_forged(f->s, "src", D1, NULL, LEGACY, NULL, &existed);
	assert_int_equal(existed, 0);
	b = put_forged(f->s, "src again", D1, HEAD, LEGACY, "{\"mtplx_version\":\"2.12.0\"}", &existed);
	assert_int_equal(existed, 1);
	assert_int_equal(b, a);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM artifacts"), 1);
	assert_int_equal(fg_store_counts(f->s, &c, NULL, &err), 0);
	assert_int_equal(c.artifacts, 1);
	h = health(f->s);
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(h, "artifacts"), "total")->valueint, 1);
	cJSON_Delete(h);
	assert_int_equal(fg_store_artifact_get(f->s, a, &doc, &err), 0);
	assert_string_equal(cJSON_GetObjectItem(doc, "source")->valuestring, "src"); /* the first stays */
	assert_string_equal(cJSON_GetObjectItem(doc, "digest")->valuestring, D1);
	assert_string_equal(cJSON_GetObjectItem(doc, "head_fingerprint")->valuestring, HEAD);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "mtplx_runtime"), "mtplx_version")->valuestring,
			    "2.12.0");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "fleet")), 0);
	cJSON_Delete(doc);
	other = put_forged(f->s, "src", D2, HEAD, LEGACY, NULL, &existed);
	assert_int_equal(existed, 0);
	assert_true(other != a);
	/* No digest (a caller of before issue 13): stored each time. */
	assert_true(put_forged(f->s, "src", NULL, NULL, NULL, NULL, &existed) != put_forged(f->s, "src", NULL, NULL,
												  NULL, NULL, &existed));
	assert_stats_consistent(f->s);
}

/*
 * What a fleet report names: a digest is one artifact; a head fingerprint
 * (either framing) one or several; several need the digest or the id, and
 * the candidates come back; a digest or id that is not among them is a
 * mismatch.
 */
static void test_artifact_resolve(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	enum fg_artifact_match how;
	cJSON *cand = NULL;
	int amb = -1;
	int64_t a, b, id = 0;

	a = put_forged(f->s, "hf trunk", D1, HEAD, LEGACY, NULL, NULL);
	/* One artifact: both framings find it. */
	assert_int_equal(fg_store_artifact_resolve(f->s, HEAD, NULL, 0, &id, &how, &amb, &cand, &err), 0);
	assert_int_equal(id, a);
	assert_int_equal(how, FG_MATCH_HEAD_FINGERPRINT);
	assert_int_equal(fg_store_artifact_resolve(f->s, LEGACY, NULL, 0, &id, &how, &amb, &cand, &err), 0);
	assert_int_equal(id, a);
	assert_int_equal(how, FG_MATCH_LEGACY_FINGERPRINT);
	assert_string_equal(fg_artifact_match_name(how), "fingerprint");
	/* The same head on another trunk: the fingerprints are shared now. */
	b = put_forged(f->s, "mlx trunk", D2, HEAD, LEGACY, NULL, NULL);
	assert_int_equal(fg_store_artifact_resolve(f->s, HEAD, NULL, 0, &id, &how, &amb, &cand, &err), FG_ECONFLICT);
	assert_int_equal(amb, 1);
	assert_non_null(strstr(err.msg, "shared by 2 artifacts"));
	assert_int_equal(cJSON_GetArraySize(cand), 2);
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cand, 0), "artifact_id")->valueint, a);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cand, 1), "digest")->valuestring, D2);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cand, 1), "source")->valuestring, "mlx trunk");
	cJSON_Delete(cand);
	cand = NULL;
	assert_int_equal(fg_store_artifact_resolve(f->s, LEGACY, NULL, 0, &id, &how, &amb, NULL, &err), FG_ECONFLICT);
	assert_int_equal(amb, 1);
	/* Narrowed by the digest, or by the id. */
	assert_int_equal(fg_store_artifact_resolve(f->s, HEAD, D2, 0, &id, &how, &amb, NULL, &err), 0);
	assert_int_equal(id, b);
	assert_int_equal(fg_store_artifact_resolve(f->s, LEGACY, NULL, a, &id, &how, &amb, NULL, &err), 0);
	assert_int_equal(id, a);
	/* The digest alone. */
	assert_int_equal(fg_store_artifact_resolve(f->s, D1, NULL, 0, &id, &how, &amb, NULL, &err), 0);
	assert_int_equal(id, a);
	assert_int_equal(how, FG_MATCH_DIGEST);
	/* Contradictions. */
	assert_int_equal(fg_store_artifact_resolve(f->s, HEAD, "sha256:33", 0, &id, &how, &amb, &cand, &err), FG_ECONFLICT);
	assert_int_equal(amb, 0);
	assert_int_equal(cJSON_GetArraySize(cand), 2);
	cJSON_Delete(cand);
	assert_int_equal(fg_store_artifact_resolve(f->s, D1, NULL, b, &id, &how, &amb, NULL, &err), FG_ECONFLICT);
	assert_int_equal(amb, 0);
	assert_int_equal(fg_store_artifact_resolve(f->s, NULL, D1, b, &id, &how, &amb, NULL, &err), FG_ECONFLICT);
	assert_int_equal(fg_store_artifact_resolve(f->s, NULL, D2, b, &id, &how, &amb, NULL, &err), 0);
	assert_int_equal(id, b);
	assert_int_equal(how, FG_MATCH_ID);
	/* Nothing. */
	assert_int_equal(fg_store_artifact_resolve(f->s, "sha256:00", NULL, 0, &id, &how, &amb, NULL, &err), FG_ENOTFOUND);
	assert_int_equal(fg_store_artifact_resolve(f->s, NULL, NULL, 999, &id, &how, &amb, NULL, &err), FG_ENOTFOUND);
	assert_int_equal(fg_store_artifact_resolve(f->s, NULL, NULL, 0, &id, &how, &amb, NULL, &err), FG_EINPUT);
}

/* A job echoes what was asked, as spelled and as resolved, and a failed one keeps its verdicts. */
static void test_job_request_echo(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 }, cause = { 0 };
	struct fg_job j;
	cJSON *o, *rq, *verdicts = cJSON_Parse("[{\"code\":\"head_double_shifted\",\"severity\":\"error\","
					       "\"detail\":\"above 2.4\"}]");

	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{\"kind\":\"forge\",\"source\":\"/m/qwen35_hf\"}",
					      "{\"kind\":\"forge\",\"source\":\"qwen35_hf\"}", NULL, NULL, 0, &j, NULL,
					      &err), 0);
	o = fg_job_json(&j);
	fg_job_release(&j);
	rq = cJSON_GetObjectItem(o, "request");
	assert_string_equal(cJSON_GetObjectItem(rq, "source")->valuestring, "qwen35_hf");
	assert_string_equal(cJSON_GetObjectItem(rq, "source_resolved")->valuestring, "/m/qwen35_hf");
	assert_string_equal(cJSON_GetObjectItem(rq, "target")->valuestring, "mtplx-2.12");
	assert_string_equal(cJSON_GetObjectItem(rq, "quant")->valuestring, "keep");
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(rq, "out")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "artifact_url")));
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "verdicts")), 0);
	cJSON_Delete(o);
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{}", "[1]", NULL, NULL, 0, &j, NULL, &err), FG_EINPUT);
	assert_int_equal(claim(f->s, "i/0"), 1);
	fg_err_verdict(&cause, FG_V_HEAD_DOUBLE_SHIFTED, "above 2.4");
	/* Not an array: refused, the job left running; then the verdicts as data. */
	assert_int_equal(fg_store_job_fail(f->s, 1, NULL, &cause, cJSON_GetArrayItem(verdicts, 0), &err), FG_EINPUT);
	assert_int_equal(get_job(f->s, 1).state, FG_JOB_RUNNING);
	assert_int_equal(fg_store_job_fail(f->s, 1, NULL, &cause, verdicts, &err), 0);
	assert_int_equal(fg_store_job_get(f->s, 1, &j, &err), 0);
	assert_string_equal(j.asked, "{\"kind\":\"forge\",\"source\":\"qwen35_hf\"}");
	fg_job_release(&j);
	/* A failure without verdicts (NULL) has none. */
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{}", NULL, NULL, NULL, 0, &j, NULL, &err), 0);
	fg_job_release(&j);
	assert_int_equal(claim(f->s, "i/0"), 2);
	fg_err_set(&cause, FG_EINPUT, "shard 3 is truncated");
	assert_int_equal(fg_store_job_fail(f->s, 2, NULL, &cause, NULL, &err), 0);
	assert_int_equal(fg_store_job_get(f->s, 2, &j, &err), 0);
	o = fg_job_json(&j);
	fg_job_release(&j);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "verdicts")), 0);
	cJSON_Delete(o);
	assert_int_equal(fg_store_job_get(f->s, 1, &j, &err), 0);
	o = fg_job_json(&j);
	fg_job_release(&j);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "verdicts"), 0), "code")->valuestring,
			    "head_double_shifted");
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "refusal"), "code")->valuestring,
			    "head_double_shifted");
	cJSON_Delete(o);
	cJSON_Delete(verdicts);
}

/*
 * A verification restamps the runtime document forged wrote (MTPLX's stamp:
 * verified_on, speed_evidence, mtp_depth_max, recommended_profile) and
 * leaves one read from an inspected MTPLX pack as it was.
 */
static void test_verification_restamps_runtime(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	cJSON *result = cJSON_Parse("{\"verdict\":\"mtp_depth_wins\",\"hardware\":\"M4 Max\",\"speed_evidence\":"
				    "{\"depth\":3,\"verdict\":\"mtp_depth_wins\",\"forge_verify_rows\":[{\"depth\":0},"
				    "{\"depth\":1},{\"depth\":3}],\"failure_reasons\":[]}}");
	cJSON *doc = NULL, *rt;
	char *text = NULL, stored[1024];
	int64_t forged, read_pack, bare, id;
	int restamped = -1;

	forged = put_forged(f->s, "forged", D1, HEAD, LEGACY,
			    "{\"mtplx_version\":\"2.12.0\",\"mtp_depth_max\":1,\"recommended_profile\":\"stable\","
			    "\"verified_on\":{\"status\":\"unverified\"},\"speed_evidence\":{\"status\":\"unverified\","
			    "\"artifact_fingerprint\":\"" HEAD "\"},\"forge_provenance\":{\"forged_version\":\"0.1.0\"}}",
			    NULL);
	read_pack = put_forged(f->s, "pack", D2, NULL, NULL, "{\"mtplx_version\":\"2.12.0\",\"mtp_depth_max\":2}", NULL);
	bare = put_forged(f->s, "bare", D3, NULL, NULL, NULL, NULL);
	/* The caller hears which document took the result, and the result as stored. */
	assert_int_equal(fg_store_verification_put(f->s, forged, "{}", result, &id, &restamped, &text, &err), 0);
	assert_int_equal(restamped, 1);
	assert_non_null(text);
	query_text(f->s, "SELECT result FROM verifications ORDER BY id DESC LIMIT 1", stored, sizeof(stored));
	assert_string_equal(text, stored);
	assert_non_null(strstr(text, "\"hardware\":\"M4 Max\""));
	cJSON_free(text);
	assert_int_equal(fg_store_verification_put(f->s, read_pack, "{}", result, &id, &restamped, NULL, &err), 0);
	assert_int_equal(restamped, 0);
	assert_int_equal(fg_store_verification_put(f->s, bare, "{}", result, &id, &restamped, NULL, &err), 0);
	assert_int_equal(restamped, 0);
	assert_int_equal(fg_store_artifact_get(f->s, forged, &doc, &err), 0);
	rt = cJSON_GetObjectItem(doc, "mtplx_runtime");
	assert_int_equal(cJSON_GetObjectItem(rt, "mtp_depth_max")->valueint, 3);
	assert_string_equal(cJSON_GetObjectItem(rt, "recommended_profile")->valuestring, "sustained");
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(rt, "verified_on"), "hardware")->valuestring, "M4 Max");
	assert_int_equal(strlen(cJSON_GetObjectItem(cJSON_GetObjectItem(rt, "verified_on"), "timestamp")->valuestring), 24);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(rt, "speed_evidence"), "artifact_fingerprint")->valuestring,
			    HEAD);
	assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(rt, "speed_evidence"), "status"));
	cJSON_Delete(doc);
	assert_int_equal(fg_store_artifact_get(f->s, read_pack, &doc, &err), 0);
	rt = cJSON_GetObjectItem(doc, "mtplx_runtime");
	assert_int_equal(cJSON_GetObjectItem(rt, "mtp_depth_max")->valueint, 2);
	assert_null(cJSON_GetObjectItem(rt, "verified_on"));
	cJSON_Delete(doc);
	cJSON_Delete(result);
}

/*
 * A verification whose verdict is the one standing keeps that verdict row as
 * it is (the same row id: no row, index entry or counter rewritten); one
 * with another verdict replaces it, and the counters follow both.
 */
static void test_verification_verdict_kept(void **state)
{
	struct fixture *f = *state;
	struct fg_store_counts c;
	struct fg_err err = { 0 };
	int64_t first, again, other;

	put_artifact(f->s, "m", "qwen3_5", "fp", WARN_VERDICT, NAN, NULL);
	put_verification(f->s, 1, "mtp_depth_wins");
	first = query_int(f->s, "SELECT id FROM verdicts WHERE artifact_id = 1 AND origin = 'verification'");
	/* A later verdict row, so that a row deleted and inserted again would take another id. */
	put_artifact(f->s, "m2", "qwen3_5", "fp2", WARN_VERDICT, NAN, NULL);
	put_verification(f->s, 1, "mtp_depth_wins");
	again = query_int(f->s, "SELECT id FROM verdicts WHERE artifact_id = 1 AND origin = 'verification'");
	assert_true(first > 0);
	assert_int_equal(again, first);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM verdicts WHERE artifact_id = 1"), 2);
	assert_stats_consistent(f->s);
	put_verification(f->s, 1, "mtp_acceptance_collapsed");
	other = query_int(f->s, "SELECT id FROM verdicts WHERE artifact_id = 1 AND origin = 'verification'");
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM verdicts WHERE artifact_id = 1 AND origin = 'verification'"
					 " AND code = 'mtp_acceptance_collapsed'"), 1);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM verdicts WHERE artifact_id = 1"), 2);
	assert_int_equal(fg_store_counts(f->s, &c, NULL, &err), 0);
	assert_int_equal(c.artifacts_unhealthy, 1);
	assert_stats_consistent(f->s);
	put_verification(f->s, 1, "mtp_acceptance_collapsed");
	assert_int_equal(query_int(f->s, "SELECT id FROM verdicts WHERE artifact_id = 1 AND origin = 'verification'"),
			 other);
	put_verification(f->s, 1, "mtp_depth_wins");
	assert_int_equal(fg_store_counts(f->s, &c, NULL, &err), 0);
	assert_int_equal(c.artifacts_unhealthy, 0);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM verdicts WHERE artifact_id = 1 AND origin = 'verification'"
					 " AND code = 'mtp_depth_wins'"), 1);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM verifications WHERE artifact_id = 1"), 5);
	assert_stats_consistent(f->s);
	/* A standing row of another severity (an older table's) is replaced, and the counters by severity follow. */
	assert_true(query_int(f->s, "UPDATE verdicts SET severity = 'warning' WHERE artifact_id = 1"
				    " AND origin = 'verification' RETURNING id") > 0);
	put_verification(f->s, 1, "mtp_depth_wins");
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM verdicts WHERE artifact_id = 1 AND origin = 'verification'"
					 " AND code = 'mtp_depth_wins' AND severity = 'info'"), 1);
	assert_stats_consistent(f->s);
}

/* Fleet reports keep the runtime as the host named it; the artifact document lists them with what was observed. */
static void test_fleet_runtime_reported(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	cJSON *observed = cJSON_Parse("{\"tok_s\":41.5,\"hardware\":\"M4 Max\"}"), *doc = NULL, *fleet;
	int64_t a = put_forged(f->s, "forged", D1, HEAD, LEGACY, NULL, NULL);
	char over[200];

	assert_int_equal(fg_store_fleet_report(f->s, "gpu-a", a, "mlx-lm-0.32", "mlx-lm 0.33.1", observed, &err), 0);
	assert_int_equal(fg_store_fleet_report(f->s, "gpu-b", a, "mtplx-2.12", NULL, NULL, &err), 0);
	memset(over, 'v', sizeof(over) - 1);
	over[sizeof(over) - 1] = '\0';
	assert_int_equal(fg_store_fleet_report(f->s, "gpu-c", a, "mtplx-2.12", over, NULL, &err), FG_EINPUT);
	assert_int_equal(fg_store_fleet_report(f->s, "gpu-c", a, "mtplx-2.12", "", NULL, &err), FG_EINPUT);
	assert_int_equal(fg_store_artifact_get(f->s, a, &doc, &err), 0);
	fleet = cJSON_GetObjectItem(doc, "fleet");
	assert_int_equal(cJSON_GetArraySize(fleet), 2);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(fleet, 0), "runtime")->valuestring, "mlx-lm-0.32");
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(fleet, 0), "runtime_reported")->valuestring,
			    "mlx-lm 0.33.1");
	assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(fleet, 0), "observed"), "tok_s")->valuedouble ==
		    41.5);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(fleet, 1), "runtime_reported")->valuestring, "mtplx-2.12");
	cJSON_Delete(doc);
	cJSON_Delete(observed);
}

/*
 * A version 6 database migrates to 7: its jobs gain bytes_done, bytes_total
 * and eta_s, null for the rows already there, and a running job's progress
 * can carry them from then on.
 */
static void test_migrate_v6_to_v7(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	struct fg_job j;
	cJSON *o;

	enqueue(f->s, NULL, NULL);
	exec_sql(f->s, V7_DOWN " PRAGMA user_version = 6");
	fg_store_close(f->s);
	f->s = NULL;
	if (fg_store_open(&f->s, f->path, &err))
		fail_msg("reopening: %s", err.msg);
	assert_int_equal(fg_store_user_version(f->s), FG_STORE_SCHEMA_VERSION);
	assert_int_equal(fg_store_job_get(f->s, 1, &j, &err), 0);
	assert_false(j.has_bytes);
	o = fg_job_json(&j);
	fg_job_release(&j);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "bytes_done")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "eta_s")));
	cJSON_Delete(o);
	assert_int_equal(fg_store_job_claim(f->s, "inst/0", &j, &err), 1);
	fg_job_release(&j);
	assert_int_equal(fg_store_job_progress_bytes(f->s, 1, "inst/0", "sidecar", 0.5, 300, 1000, 2.5, &err), 0);
	assert_int_equal(fg_store_job_get(f->s, 1, &j, &err), 0);
	assert_true(j.has_bytes && j.bytes_done == 300 && j.bytes_total == 1000 && j.eta_s == 2.5);
	fg_job_release(&j);
}

/* A verification's result as fg_verify_decide gives it: depth d wins on an M4 Max (rows at depth 0 and d). */
static cJSON *depth_wins(int d)
{
	char text[320];

	snprintf(text, sizeof(text),
		 "{\"verdict\":\"mtp_depth_wins\",\"hardware\":\"M4 Max\",\"speed_evidence\":{\"depth\":%d,"
		 "\"verdict\":\"mtp_depth_wins\",\"forge_verify_rows\":[{\"depth\":0},{\"depth\":%d}],"
		 "\"failure_reasons\":[]}}", d, d);
	return cJSON_Parse(text);
}

/*
 * A version 7 database migrates to 8: each stored mtplx_runtime.json moves
 * to artifact_runtime (an artifact without one gets no row), the artifact
 * document still shows it, and a verification restamps it there.
 */
static void test_migrate_v7_to_v8(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	cJSON *result = depth_wins(2);
	cJSON *doc = NULL;
	int64_t with, without, id;

	with = put_forged(f->s, "with", D1, HEAD, LEGACY,
			  "{\"mtplx_version\":\"2.12.0\",\"mtp_depth_max\":1,\"forge_provenance\":{\"forged_version\":\"0.1.0\"}}",
			  NULL);
	without = put_forged(f->s, "without", D2, NULL, NULL, NULL, NULL);
	exec_sql(f->s, V8_DOWN " PRAGMA user_version = 7");
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM artifact_docs WHERE mtplx_runtime IS NOT NULL"), 1);
	fg_store_close(f->s);
	f->s = NULL;
	if (fg_store_open(&f->s, f->path, &err))
		fail_msg("reopening: %s", err.msg);
	assert_int_equal(fg_store_user_version(f->s), 8);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM artifact_runtime"), 1);
	assert_int_equal(query_int(f->s, "SELECT artifact_id FROM artifact_runtime"), (int)with);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM pragma_table_info('artifact_docs')"
				   " WHERE name = 'mtplx_runtime'"), 0);
	assert_int_equal(fg_store_artifact_get(f->s, with, &doc, &err), 0);
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "mtplx_runtime"), "mtp_depth_max")->valueint, 1);
	cJSON_Delete(doc);
	assert_int_equal(fg_store_artifact_get(f->s, without, &doc, &err), 0);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(doc, "mtplx_runtime")));
	cJSON_Delete(doc);
	assert_int_equal(fg_store_verification_put(f->s, with, "{}", result, &id, NULL, NULL, &err), 0);
	assert_int_equal(query_int(f->s, "SELECT json_extract(doc, '$.mtp_depth_max') FROM artifact_runtime"), 2);
	cJSON_Delete(result);
}

/*
 * Verification rows with numbers cJSON reads and strict JSON does not
 * ("15.", "01") are stored as cJSON prints them; a row stored as sent (by
 * a forged before that) still reads back, its rows parsed (SQLite's
 * json_extract refused them and failed the whole read: fuzz_api's finding).
 */
static void test_lax_verification_rows(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	cJSON *result = depth_wins(1), *doc = NULL, *rows;
	int64_t art = put_forged(f->s, "lax", D1, NULL, NULL, NULL, NULL), id;

	char stored[256];

	assert_int_equal(fg_store_verification_put(f->s, art, "{\"rows\":[{\"depth\":01,\"tok_s\":15.}]}", result, &id, NULL, NULL,
						   &err), 0);
	/* Stored as cJSON prints it (hand-written expectation)... */
	query_text(f->s, "SELECT rows FROM verifications", stored, sizeof(stored));
	assert_string_equal(stored, "{\"rows\":[{\"depth\":1,\"tok_s\":15}]}");
	/* ...and a row an older forged stored as sent still reads back. */
	exec_sql(f->s, "UPDATE verifications SET rows = '{\"rows\":[{\"depth\":01,\"tok_s\":15.}]}'");
	assert_int_equal(fg_store_artifact_get(f->s, art, &doc, &err), 0);
	rows = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "verifications"), 0), "rows");
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "depth")->valueint, 1);
	assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "tok_s")->valuedouble == 15.0);
	cJSON_Delete(doc);
	cJSON_Delete(result);
}

/*
 * fg_store_artifact_runtime: the folder and the stored runtime document
 * only, the restamped one after a verification; none for an artifact
 * without one, FG_ENOTFOUND for an unknown id.
 */
static void test_artifact_runtime(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	cJSON *result = depth_wins(3);
	cJSON *rt = (cJSON *)0x1;
	char path[64], tiny[4];
	int64_t with, without, id;

	with = put_forged(f->s, "with", D1, HEAD, LEGACY,
			  "{\"mtplx_version\":\"2.12.0\",\"mtp_depth_max\":1,\"forge_provenance\":{\"forged_version\":\"0.1.0\"}}",
			  NULL);
	without = put_forged(f->s, "without", D2, NULL, NULL, NULL, NULL);
	assert_int_equal(fg_store_artifact_runtime(f->s, with, path, sizeof(path), &rt, &err), 0);
	assert_string_equal(path, "/artifacts/x");
	assert_int_equal(cJSON_GetObjectItem(rt, "mtp_depth_max")->valueint, 1);
	cJSON_Delete(rt);
	assert_int_equal(fg_store_verification_put(f->s, with, "{}", result, &id, NULL, NULL, &err), 0);
	assert_int_equal(fg_store_artifact_runtime(f->s, with, path, sizeof(path), &rt, &err), 0);
	assert_int_equal(cJSON_GetObjectItem(rt, "mtp_depth_max")->valueint, 3);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(rt, "verified_on"), "hardware")->valuestring, "M4 Max");
	cJSON_Delete(rt);
	rt = (cJSON *)0x1;
	assert_int_equal(fg_store_artifact_runtime(f->s, without, path, sizeof(path), &rt, &err), 0);
	assert_null(rt);
	assert_string_equal(path, "/artifacts/x");
	assert_int_equal(fg_store_artifact_runtime(f->s, 999, path, sizeof(path), &rt, &err), FG_ENOTFOUND);
	assert_null(rt);
	/* A folder that does not fit is refused, never cut short into another path. */
	assert_int_equal(fg_store_artifact_runtime(f->s, with, tiny, sizeof(tiny), &rt, &err), FG_ESTATE);
	assert_null(rt);
	assert_non_null(strstr(err.msg, "longer than 3 bytes"));
	cJSON_Delete(result);
}

/* A version 3 database migrates to 4: its rows kept, the new columns empty. */
static void test_migrate_v3_to_v4(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	struct fg_job j;
	cJSON *doc = NULL, *o;

	put_artifact(f->s, "old", "qwen3_5", LEGACY, NULL, 1.79, "absolute");
	report(f->s, "gpu-a", "mlx-lm-0.31", 1);
	enqueue(f->s, NULL, NULL);
	exec_sql(f->s, V4_DOWN " PRAGMA user_version = 3");
	fg_store_close(f->s);
	f->s = NULL;
	if (fg_store_open(&f->s, f->path, &err))
		fail_msg("reopening: %s", err.msg);
	assert_int_equal(fg_store_user_version(f->s), FG_STORE_SCHEMA_VERSION);
	assert_int_equal(fg_store_artifact_get(f->s, 1, &doc, &err), 0);
	assert_string_equal(cJSON_GetObjectItem(doc, "fingerprint")->valuestring, LEGACY);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(doc, "digest")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(doc, "head_fingerprint")));
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "fleet"), 0),
						     "runtime_reported")));
	cJSON_Delete(doc);
	assert_int_equal(fg_store_job_get(f->s, 1, &j, &err), 0);
	o = fg_job_json(&j);
	fg_job_release(&j);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "verdicts")), 0);
	assert_non_null(cJSON_GetObjectItem(o, "request"));
	cJSON_Delete(o);
	/* An old row's legacy fingerprint still names it. */
	{
		enum fg_artifact_match how;
		int64_t id = 0;

		assert_int_equal(fg_store_artifact_resolve(f->s, LEGACY, NULL, 0, &id, &how, NULL, NULL, &err), 0);
		assert_int_equal(id, 1);
	}
}

/* ---- counts, checks, errors ---- */
/*
 * The stats triggers follow every kind of change, including those the API
 * does not make today (deletes cascading to verdicts, edits of family and
 * probe), so a later migration or a manual repair cannot skew the counts.
 */
static void test_stats_triggers(void **state)
{
	struct fixture *f = *state;
	struct fg_store_counts c;
	struct fg_err err = { 0 };

	put_artifact(f->s, "a", "qwen3_5", NULL, ERR_VERDICT, 1.0, "delta");
	put_artifact(f->s, "b", "glm4_moe", NULL, WARN_VERDICT, 1.8, NULL);
	put_artifact(f->s, "c", "qwen3_5", NULL, NULL, NAN, NULL);
	put_verification(f->s, 3, "mtp_acceptance_collapsed");
	put_verification(f->s, 3, "mtp_acceptance_collapsed");
	assert_stats_consistent(f->s);
	exec_sql(f->s, "UPDATE artifacts SET family = 'mimo', probe_mean = 2.0 WHERE id = 2");
	exec_sql(f->s, "UPDATE artifacts SET probe_mean = NULL WHERE id = 1");
	exec_sql(f->s, "UPDATE artifacts SET probe_mean = 3.0 WHERE id = 3");
	assert_stats_consistent(f->s);
	exec_sql(f->s, "UPDATE verdicts SET code = 'index_mismatch' WHERE code = 'stray_shard'");
	assert_stats_consistent(f->s);
	exec_sql(f->s, "UPDATE verdicts SET severity = 'info' WHERE code = 'index_mismatch'");
	assert_stats_consistent(f->s);
	exec_sql(f->s, "DELETE FROM artifacts WHERE id = 1");
	exec_sql(f->s, "DELETE FROM artifacts WHERE id = 3");
	assert_stats_consistent(f->s);
	assert_int_equal(fg_store_counts(f->s, &c, NULL, &err), 0);
	assert_int_equal(c.artifacts, 1);
	assert_int_equal(c.artifacts_unhealthy, 0);
	assert_int_equal(fg_store_check(f->s, &err), 0);
}


static void test_counts(void **state)
{
	struct fixture *f = *state;
	struct fg_store_counts c;
	struct fg_err err = { 0 };
	cJSON *by = NULL, *want;

	for (int i = 0; i < 5; i++)
		enqueue(f->s, NULL, NULL);
	claim(f->s, "i/0");
	claim(f->s, "i/0");
	assert_int_equal(fg_store_job_finish(f->s, 1, NULL, FG_JOB_FAILED, "x", 0, &err), 0);
	assert_int_equal(fg_store_job_cancel(f->s, 5, NULL, &err), 0);
	put_artifact(f->s, "a", "qwen3_5", NULL, ERR_VERDICT, NAN, NULL);
	put_artifact(f->s, "b", "qwen3_5", NULL, WARN_VERDICT, NAN, NULL);
	put_artifact(f->s, "c", "qwen3_5", NULL, ERR_VERDICT, NAN, NULL);

	assert_int_equal(fg_store_counts(f->s, &c, &by, &err), 0);
	assert_int_equal(c.jobs[FG_JOB_QUEUED], 2);
	assert_int_equal(c.jobs[FG_JOB_RUNNING], 1);
	assert_int_equal(c.jobs[FG_JOB_SUCCEEDED], 0);
	assert_int_equal(c.jobs[FG_JOB_FAILED], 1);
	assert_int_equal(c.jobs[FG_JOB_CANCELLED], 1);
	assert_int_equal(c.artifacts, 3);
	assert_int_equal(c.artifacts_unhealthy, 2);
	want = cJSON_Parse("{\"embedded_mtp_shift_hazard\":2,\"stray_shard\":1}");
	assert_true(cJSON_Compare(by, want, 0));
	cJSON_Delete(want);
	cJSON_Delete(by);
	assert_int_equal(fg_store_counts(f->s, &c, NULL, &err), 0);
	assert_int_equal(fg_store_counts(f->s, NULL, NULL, &err), FG_EINPUT);
	assert_int_equal(fg_store_check(f->s, &err), 0);
	assert_stats_consistent(f->s);
}

/* A SQLite failure (here: another connection holds the write lock) carries SQLite's message. */
static void test_sqlite_error_message(void **state)
{
	struct fixture *f = *state;
	struct fg_store *other = NULL;
	struct fg_job j;
	struct fg_err err = { 0 };
	int64_t id = 0;

	assert_int_equal(fg_store_open(&other, f->path, &err), 0);
	exec_sql(other, "BEGIN IMMEDIATE");
	/* Writes wait for another connection's lock this long (on the writer's connection, writer.c). */
	f->s->busy_ms = 50;
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{}", NULL, NULL, NULL, 0, &j, NULL, &err), FG_ESTATE);
	assert_non_null(strstr(err.msg, "database is locked"));
	assert_int_equal(fg_store_job_claim(f->s, "i/0", &j, &err), FG_ESTATE);
	assert_non_null(strstr(err.msg, "database is locked"));
	exec_sql(other, "COMMIT");
	/* Once the lock is gone, the same connection works again (no transaction was left open). */
	assert_true(sqlite3_get_autocommit(f->s->db));
	assert_int_equal(fg_store_artifact_by_fingerprint(f->s, "zz", &id, &err), FG_ENOTFOUND);
	enqueue(f->s, NULL, NULL);
	fg_store_close(other);
}


/* A refusal fails a job with its verdict code as data; any other failure names none. */
static void test_job_refusal(void **state)
{
	struct fixture *f = *state;
	struct fg_err cause = { 0 }, err = { 0 };
	struct fg_job j;
	cJSON *o, *r;

	enqueue(f->s, NULL, NULL);
	enqueue(f->s, NULL, NULL);
	enqueue(f->s, NULL, NULL);
	assert_int_equal(claim(f->s, "i/0"), 1);
	assert_int_equal(claim(f->s, "i/0"), 2);
	assert_int_equal(claim(f->s, "i/0"), 3);
	fg_err_verdict(&cause, FG_V_HEAD_DOUBLE_SHIFTED, "head set 'mtp' q/k max %.4f is above 2.4", 2.7908);
	assert_int_equal(fg_store_job_fail(f->s, 1, NULL, &cause, NULL, &err), 0);
	j = get_job(f->s, 1);
	assert_int_equal(j.state, FG_JOB_FAILED);
	assert_ptr_equal(j.refusal, &fg_verdict_table[FG_V_HEAD_DOUBLE_SHIFTED]);
	assert_string_equal(j.error, "head set 'mtp' q/k max 2.7908 is above 2.4");
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM jobs WHERE id = 1 AND refusal = 'head_double_shifted'"), 1);
	o = fg_job_json(&j);
	assert_non_null(o);
	r = cJSON_GetObjectItem(o, "refusal");
	assert_string_equal(cJSON_GetObjectItem(r, "code")->valuestring, "head_double_shifted");
	assert_string_equal(cJSON_GetObjectItem(r, "severity")->valuestring, "error");
	assert_string_equal(cJSON_GetObjectItem(r, "detail")->valuestring, "head set 'mtp' q/k max 2.7908 is above 2.4");
	assert_string_equal(cJSON_GetObjectItem(o, "error")->valuestring,
			    "head_double_shifted: head set 'mtp' q/k max 2.7908 is above 2.4");
	cJSON_Delete(o);
	/* Not a refusal: no refusal object, the error as it was. */
	fg_err_set(&cause, FG_EINPUT, "shard 3 is truncated");
	assert_int_equal(fg_store_job_fail(f->s, 2, NULL, &cause, NULL, &err), 0);
	j = get_job(f->s, 2);
	assert_null(j.refusal);
	o = fg_job_json(&j);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "refusal")));
	assert_string_equal(cJSON_GetObjectItem(o, "error")->valuestring, "shard 3 is truncated");
	cJSON_Delete(o);
	/* A verdict outside the table is refused, the job left running. */
	fg_err_verdict(&cause, FG_VERDICT_COUNT + 3, "nonsense");
	assert_int_equal(fg_store_job_fail(f->s, 3, NULL, &cause, NULL, &err), FG_EINPUT);
	assert_int_equal(get_job(f->s, 3).state, FG_JOB_RUNNING);
	assert_int_equal(fg_store_job_fail(f->s, 3, NULL, NULL, NULL, &err), FG_EINPUT);
	/* Finished jobs stay as they are. */
	assert_int_equal(fg_store_job_fail(f->s, 1, NULL, &cause, NULL, &err), FG_EINPUT);
	fg_err_set(&cause, FG_EINPUT, "again");
	assert_int_equal(fg_store_job_fail(f->s, 1, NULL, &cause, NULL, &err), FG_ECONFLICT);
	/* A stored code this forged does not know reads as no refusal. */
	exec_sql(f->s, "UPDATE jobs SET refusal = 'from_a_newer_forged' WHERE id = 1");
	assert_null(get_job(f->s, 1).refusal);
}

/* A version 1 database (before jobs.refusal and write_probe) is migrated, its jobs kept. */
static void test_open_migrates_v1(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 }, cause = { 0 };

	enqueue(f->s, NULL, NULL);
	exec_sql(f->s, "ALTER TABLE jobs DROP COLUMN refusal");
	exec_sql(f->s, "DROP TABLE write_probe");
	exec_sql(f->s, V3_DOWN " PRAGMA user_version = 1");
	fg_store_close(f->s);
	f->s = NULL;
	assert_int_equal(fg_store_open(&f->s, f->path, &err), 0);
	assert_int_equal(fg_store_user_version(f->s), FG_STORE_SCHEMA_VERSION);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM jobs"), 1);
	assert_int_equal(fg_store_probe_write(f->s, &err), 0);
	assert_int_equal(claim(f->s, "i/0"), 1);
	fg_err_verdict(&cause, FG_V_MIXED_CONVENTION, "both sides");
	assert_int_equal(fg_store_job_fail(f->s, 1, NULL, &cause, NULL, &err), 0);
	assert_ptr_equal(get_job(f->s, 1).refusal, &fg_verdict_table[FG_V_MIXED_CONVENTION]);
}

/* Every SQLite result has one FG_E* meaning: our disk, our state, or our bug, never the client's input. */
static void test_sqlite_codes(void **state)
{
	static const struct {
		int rc, code;
	} rows[] = {
		{ SQLITE_FULL, FG_ENOSPC },
		{ SQLITE_BUSY, FG_ESTATE },
		{ SQLITE_BUSY_SNAPSHOT, FG_ESTATE },
		{ SQLITE_LOCKED, FG_ESTATE },
		{ SQLITE_IOERR, FG_ESTATE },
		{ SQLITE_IOERR_WRITE, FG_ESTATE },
		{ SQLITE_IOERR_FSYNC, FG_ESTATE },
		{ SQLITE_CANTOPEN, FG_ESTATE },
		{ SQLITE_READONLY, FG_ESTATE },
		{ SQLITE_READONLY_DBMOVED, FG_ESTATE },
		{ SQLITE_CORRUPT, FG_ESTATE },
		{ SQLITE_NOTADB, FG_ESTATE },
		{ SQLITE_NOMEM, FG_ENOMEM },
		{ SQLITE_ERROR, FG_EINTERNAL },
		{ SQLITE_CONSTRAINT_CHECK, FG_EINTERNAL },
		{ SQLITE_MISUSE, FG_EINTERNAL },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		if (fg_sql_code(rows[i].rc) != rows[i].code)
			fail_msg("SQLite %d (%s): %d, want %d", rows[i].rc, sqlite3_errstr(rows[i].rc),
				 fg_sql_code(rows[i].rc), rows[i].code);
		assert_int_not_equal(fg_sql_code(rows[i].rc), FG_EINPUT);
	}
}

/*
 * A full disk: max_page_count caps the database at its current size, so the
 * next write that needs a page gets SQLITE_FULL, as on a full file system.
 */
static void test_disk_full(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	struct fg_job j;
	char *params;
	const size_t n = 256 * 1024;
	int64_t pages = query_int(f->s, "PRAGMA page_count");
	char sql[64];

	params = malloc(n + 32);
	assert_non_null(params);
	snprintf(params, n + 32, "{\"source\":\"");
	memset(params + strlen(params), 'x', n);
	snprintf(params + 11 + n, 21, "\"}");
	assert_int_equal(fg_store_probe_write(f->s, &err), 0);
	snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %lld", (long long)pages + 1);
	/* A connection's setting: the one writes run on (writer.c). */
	exec_sql(fg_store_writer_conn(f->s), sql);
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", params, NULL, NULL, NULL, 0, &j, NULL, &err), FG_ENOSPC);
	assert_non_null(strstr(err.msg, "full"));
	/* Nothing half-written, the connection still usable for reads. */
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM jobs"), 0);
	assert_true(sqlite3_get_autocommit(f->s->db));
	snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %lld", (long long)pages);
	exec_sql(fg_store_writer_conn(f->s), sql);
	put_artifact(f->s, "fits", "qwen3_5", NULL, NULL, NAN, NULL);
	free(params);
}

/* Read-only and locked databases are forged's own state (FG_ESTATE), and the write probe sees both. */
static void test_probe_write(void **state)
{
	struct fixture *f = *state;
	struct fg_store *other = NULL;
	struct fg_err err = { 0 };
	struct timespec t0, t1;
	struct fg_job j;
	double waited;

	assert_int_equal(fg_store_probe_write(f->s, &err), 0);
	assert_int_equal(fg_store_probe_write(f->s, &err), 0);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM write_probe"), 1);
	/* Another connection holds the write lock: not ready, in well under the 5 s a write waits. */
	assert_int_equal(fg_store_open(&other, f->path, &err), 0);
	exec_sql(other, "BEGIN IMMEDIATE");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(fg_store_probe_write(f->s, &err), FG_ESTATE);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(waited < 2.0);
	assert_non_null(strstr(err.msg, "locked"));
	assert_true(sqlite3_get_autocommit(f->s->db));
	exec_sql(other, "COMMIT");
	assert_int_equal(fg_store_probe_write(f->s, &err), 0);
	/* The probe's short wait was for the probe only. */
	assert_int_equal(f->s->busy_ms, 5000);
	fg_store_close(other);
	/* A database that takes no writes (the connection writes run on, writer.c). */
	exec_sql(fg_store_writer_conn(f->s), "PRAGMA query_only = 1");
	assert_int_equal(fg_store_probe_write(f->s, &err), FG_ESTATE);
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{}", NULL, NULL, NULL, 0, &j, NULL, &err), FG_ESTATE);
	exec_sql(fg_store_writer_conn(f->s), "PRAGMA query_only = 0");
	assert_int_equal(fg_store_probe_write(f->s, &err), 0);
	assert_int_equal(fg_store_probe_write(NULL, &err), FG_EINPUT);
}


/* ---- leases, one transaction per success, group commit: both backends ---- */

/*
 * A claim carries an owner and a lease; renewals extend it; any instance's
 * reaper takes back a job past its lease (attempts + 1, failed at the
 * maximum, cancelled when asked); the worker that lost it changes nothing.
 */
static void test_job_lease(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	struct fg_job j;
	int requeued = -1, failed = -1, renewed = -1;
	const char *expire = "UPDATE jobs SET lease_until = '2000-01-01T00:00:00.000Z' WHERE state = 'running'";

	enqueue(f->s, NULL, NULL);
	enqueue(f->s, NULL, NULL);
	fg_store_set_lease(f->s, 30);
	assert_int_equal(claim(f->s, "a/0"), 1);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM jobs WHERE id = 1 AND owner = 'a'"
					 " AND lease_until IS NOT NULL AND worker = 'a/0'"), 1);
	/* Nothing expired: the reaper takes nothing. */
	assert_int_equal(fg_store_jobs_reap(f->s, 3, &requeued, &failed, &err), 0);
	assert_int_equal(requeued, 0);
	assert_int_equal(failed, 0);
	assert_int_equal(get_job(f->s, 1).state, FG_JOB_RUNNING);
	/* The owner's heartbeat renews its running jobs, nobody else's. */
	assert_int_equal(fg_store_jobs_renew(f->s, "a", &renewed, &err), 0);
	assert_int_equal(renewed, 1);
	assert_int_equal(fg_store_jobs_renew(f->s, "b", &renewed, &err), 0);
	assert_int_equal(renewed, 0);
	/* The lease runs out (its instance died): any instance takes the job back. */
	exec_sql(f->s, expire);
	assert_int_equal(fg_store_jobs_reap(f->s, 3, &requeued, &failed, &err), 0);
	assert_int_equal(requeued, 1);
	j = get_job(f->s, 1);
	assert_int_equal(j.state, FG_JOB_QUEUED);
	assert_int_equal(j.attempts, 1);
	/* The worker that lost it changes nothing: the job is queued, then another worker's. */
	assert_int_equal(fg_store_job_progress(f->s, 1, "a/0", "x", 0.5, &err), FG_ECONFLICT);
	assert_int_equal(claim(f->s, "b/0"), 1);
	assert_int_equal(fg_store_job_progress(f->s, 1, "a/0", "x", 0.5, &err), FG_ECONFLICT);
	assert_non_null(strstr(err.msg, "b/0"));
	assert_int_equal(fg_store_job_finish(f->s, 1, "a/0", FG_JOB_SUCCEEDED, NULL, 0, &err), FG_ECONFLICT);
	assert_int_equal(fg_store_job_requeue(f->s, 1, "a/0", &err), FG_ECONFLICT);
	fg_err_set(&err, FG_EINPUT, "late");
	{
		struct fg_err cause = err;

		assert_int_equal(fg_store_job_fail(f->s, 1, "a/0", &cause, NULL, &err), FG_ECONFLICT);
	}
	j = get_job(f->s, 1);
	assert_int_equal(j.state, FG_JOB_RUNNING);
	assert_int_equal(fg_store_job_progress(f->s, 1, "b/0", "x", 0.5, &err), 0);
	/* Two more expiries: the third attempt fails it for good. */
	exec_sql(f->s, expire);
	assert_int_equal(fg_store_jobs_reap(f->s, 3, &requeued, &failed, &err), 0);
	assert_int_equal(requeued, 1);
	assert_int_equal(claim(f->s, "c/0"), 1);
	exec_sql(f->s, expire);
	assert_int_equal(fg_store_jobs_reap(f->s, 3, &requeued, &failed, &err), 0);
	assert_int_equal(requeued, 0);
	assert_int_equal(failed, 1);
	j = get_job(f->s, 1);
	assert_int_equal(j.state, FG_JOB_FAILED);
	assert_int_equal(j.attempts, 3);
	assert_string_equal(j.error, "abandoned after 3 attempts");
	/* A cancel asked for before the lease ran out wins. */
	assert_int_equal(claim(f->s, "d/0"), 2);
	assert_int_equal(fg_store_job_cancel(f->s, 2, NULL, &err), 0);
	exec_sql(f->s, expire);
	assert_int_equal(fg_store_jobs_reap(f->s, 3, &requeued, &failed, &err), 0);
	assert_int_equal(get_job(f->s, 2).state, FG_JOB_CANCELLED);
	assert_int_equal(fg_store_jobs_reap(f->s, 0, &requeued, &failed, &err), FG_EINPUT);
	assert_int_equal(fg_store_jobs_renew(f->s, NULL, &renewed, &err), FG_EINPUT);
}

static struct fg_artifact_in forged_artifact(cJSON **report, cJSON **prov)
{
	struct fg_artifact_in a = { 0 };

	*report = cJSON_Parse("{\"schema\":\"forged.inspect.v1\",\"verdicts\":[{\"code\":\"stray_shard\","
			      "\"severity\":\"warning\"}],\"runtimes\":[{\"runtime\":\"ollama\",\"trunk_probe_after\":1.78}]}");
	*prov = cJSON_Parse("{\"job\":{\"id\":1},\"files\":{\"mtp.safetensors\":\"aa\",\"config.json\":\"bb\"}}");
	assert_non_null(*report);
	assert_non_null(*prov);
	a.source = "models/q";
	a.path = "/srv/out/1";
	a.family = "qwen3_5";
	a.fingerprint = "f1";
	a.report = *report;
	a.provenance = *prov;
	a.ok = 1;
	a.probe_mean = 1.79;
	a.head_convention = "absolute";
	return a;
}

/* The artifact and the job's success in one transaction; a retry finds the stored one. */
static void test_job_succeed(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	cJSON *report, *prov;
	struct fg_artifact_in a = forged_artifact(&report, &prov);
	int64_t aid = 0, again = 0;
	struct fg_job j;

	for (int i = 0; i < 3; i++)
		enqueue(f->s, NULL, NULL);
	assert_int_equal(claim(f->s, "i/0"), 1);
	assert_int_equal(claim(f->s, "i/1"), 2);
	assert_int_equal(fg_store_job_succeed(f->s, 1, "i/0", &a, &aid, NULL, &err), 0);
	assert_true(aid > 0);
	j = get_job(f->s, 1);
	assert_int_equal(j.state, FG_JOB_SUCCEEDED);
	assert_int_equal(j.artifact_id, aid);
	assert_true(j.progress == 1.0);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM artifacts WHERE job_id = 1"), 1);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM fingerprints"), 2);
	/* A retry (the answer was lost) gets the same artifact, and nothing new is stored. */
	assert_int_equal(fg_store_job_succeed(f->s, 1, "i/0", &a, &again, NULL, &err), 0);
	assert_int_equal(again, aid);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM artifacts"), 1);
	/* Another worker's job, a queued job, an unknown job: refused, nothing stored. */
	assert_int_equal(fg_store_job_succeed(f->s, 2, "i/0", &a, &again, NULL, &err), FG_ECONFLICT);
	assert_int_equal(fg_store_job_succeed(f->s, 3, "i/0", &a, &again, NULL, &err), FG_ECONFLICT);
	assert_int_equal(fg_store_job_succeed(f->s, 99, "i/0", &a, &again, NULL, &err), FG_ENOTFOUND);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM artifacts"), 1);
	/* A bad artifact is refused before anything is written, the job left running. */
	a.report = NULL;
	assert_int_equal(fg_store_job_succeed(f->s, 2, "i/1", &a, &again, NULL, &err), FG_EINPUT);
	assert_int_equal(get_job(f->s, 2).state, FG_JOB_RUNNING);
	a.report = report;
	assert_int_equal(fg_store_job_succeed(f->s, 2, "i/1", &a, &again, NULL, &err), 0);
	assert_true(again != aid);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM artifacts"), 2);
	cJSON_Delete(report);
	cJSON_Delete(prov);
	assert_stats_consistent(f->s);
}

#define GC_THREADS 8
#define GC_WRITES 40

struct gc_writer {
	const char *path;
	int index;
	int rc, ok, missing;
	char msg[FG_ERR_MSG_MAX];
};

static void *gc_thread(void *arg)
{
	struct gc_writer *g = arg;
	struct fg_store *s = NULL;
	struct fg_err err = { 0 };

	g->rc = fg_store_open(&s, g->path, &err);
	for (int i = 0; !g->rc && i < GC_WRITES; i++) {
		cJSON *result = cJSON_CreateObject();
		int64_t id = 0;
		int rc;

		cJSON_AddStringToObject(result, "verdict", i % 2 ? "mtp_depth_wins" : "mtp_acceptance_collapsed");
		/* One write in ten names an artifact that does not exist: only that one fails. */
		rc = fg_store_verification_put(s, i % 10 == 9 ? 999 : 1 + (g->index + i) % 3, "[]", result, &id, NULL, NULL, &err);
		cJSON_Delete(result);
		if (rc == FG_ENOTFOUND)
			g->missing++;
		else if (rc)
			g->rc = rc;
		else
			g->ok++;
	}
	memcpy(g->msg, err.msg, sizeof(g->msg));
	fg_store_close(s);
	return NULL;
}

/* Many connections write at once through the one writer: each write gets its own answer. */
static void test_group_commit(void **state)
{
	struct fixture *f = *state;
	struct gc_writer g[GC_THREADS];
	pthread_t t[GC_THREADS];
	int ok = 0, missing = 0;

	for (int i = 0; i < 3; i++)
		put_artifact(f->s, "a", "qwen3_5", NULL, WARN_VERDICT, NAN, NULL);
	for (int i = 0; i < GC_THREADS; i++) {
		memset(&g[i], 0, sizeof(g[i]));
		g[i].path = f->path;
		g[i].index = i;
		assert_int_equal(pthread_create(&t[i], NULL, gc_thread, &g[i]), 0);
	}
	for (int i = 0; i < GC_THREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < GC_THREADS; i++) {
		if (g[i].rc)
			fail_msg("writer %d: %s", i, g[i].msg);
		ok += g[i].ok;
		missing += g[i].missing;
	}
	assert_int_equal(missing, GC_THREADS * GC_WRITES / 10);
	assert_int_equal(ok, GC_THREADS * GC_WRITES - missing);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM verifications"), ok);
	assert_stats_consistent(f->s);
}

/* ---- PostgreSQL only ---- */

static void test_pg_open(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };

	assert_string_equal(fg_store_backend(f->s), "postgres");
	assert_int_equal(fg_store_user_version(f->s), FG_STORE_PG_SCHEMA_VERSION);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM schema_migrations"), FG_STORE_PG_SCHEMA_VERSION);
	assert_int_equal(fg_store_check(f->s, &err), 0);
	enqueue(f->s, NULL, NULL);
	fg_store_close(f->s);
	f->s = NULL;
	assert_int_equal(fg_store_open(&f->s, f->path, &err), 0);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM schema_migrations"), FG_STORE_PG_SCHEMA_VERSION);
	assert_int_equal(get_job(f->s, 1).id, 1);
}

static void test_pg_refuses_newer(void **state)
{
	struct fixture *f = *state;
	struct fg_store *other = (struct fg_store *)0x1;
	struct fg_err err = { 0 };
	char want[32];

	exec_sql(f->s, "INSERT INTO schema_migrations (version) VALUES (7)");
	fg_store_close(f->s);
	f->s = NULL;
	assert_int_equal(fg_store_open(&other, f->path, &err), FG_ESTATE);
	assert_ptr_equal(other, (struct fg_store *)0x1);
	assert_non_null(strstr(err.msg, "schema version 7"));
	snprintf(want, sizeof(want), "forged's %d", FG_STORE_PG_SCHEMA_VERSION);
	assert_non_null(strstr(err.msg, want));
}

static void test_pg_bad_target(void **state)
{
	struct fixture *f = *state;
	struct fg_store *s = NULL;
	struct fg_err err = { 0 };
	char url[700];
	const char *q = strchr(pg_url, '?');

	(void)f;
	snprintf(url, sizeof(url), "postgresql:///forged_no_such_db%s", q ? q : "");
	assert_int_equal(fg_store_open(&s, url, &err), FG_ESTATE);
	assert_null(s);
	assert_non_null(strstr(err.msg, "forged_no_such_db"));
	assert_int_equal(fg_store_open(&s, "mysql://x/y", &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "unknown scheme"));
	assert_int_equal(fg_store_open(&s, "sqlite://", &err), FG_EINPUT);
	/* A password never reaches a log line. */
	fg_store_describe("postgres://ci:s3cret@db.example/forged?sslmode=require", url, sizeof(url));
	assert_string_equal(url, "postgres://ci@db.example/forged?sslmode=require");
	fg_store_describe("postgresql:///forged?host=/run&password=s3cret", url, sizeof(url));
	assert_null(strstr(url, "s3cret"));
}

/* Instances starting together on a new database: one migrates, the others wait and see it done. */
static void test_pg_concurrent_migration(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	struct opener o[4];
	pthread_t t[4];

	for (int round = 0; round < 5; round++) {
		char sql[96];

		snprintf(sql, sizeof(sql), "DROP SCHEMA IF EXISTS %s CASCADE", f->schema);
		assert_int_equal(pg_admin(sql), 0);
		assert_int_equal(pg_fresh_schema(f), 0);
		for (int i = 0; i < 4; i++) {
			memset(&o[i], 0, sizeof(o[i]));
			o[i].path = f->path;
			assert_int_equal(pthread_create(&t[i], NULL, open_thread, &o[i]), 0);
		}
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		for (int i = 0; i < 4; i++) {
			if (o[i].rc)
				fail_msg("round %d, opener %d: %s", round, i, o[i].msg);
			assert_int_equal(o[i].version, FG_STORE_PG_SCHEMA_VERSION);
		}
	}
	assert_int_equal(fg_store_open(&f->s, f->path, &err), 0);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM schema_migrations"), FG_STORE_PG_SCHEMA_VERSION);
}

/* Every SQLSTATE class has one FG_E* meaning, never the client's input. */
static void test_pg_codes(void **state)
{
	static const struct {
		const char *state;
		int code;
	} rows[] = {
		{ "53100", FG_ENOSPC }, { "53200", FG_ENOMEM }, { "53300", FG_ESTATE }, { "08006", FG_ESTATE },
		{ "08001", FG_ESTATE }, { "57P01", FG_ESTATE }, { "57014", FG_ESTATE }, { "55P03", FG_ESTATE },
		{ "40P01", FG_ESTATE }, { "40001", FG_ESTATE }, { "25006", FG_ESTATE }, { "XX001", FG_ESTATE },
		{ "42501", FG_ESTATE }, { "3D000", FG_ESTATE }, { "28P01", FG_ESTATE }, { "58030", FG_ESTATE },
		{ NULL, FG_ESTATE }, { "42601", FG_EINTERNAL }, { "23505", FG_EINTERNAL }, { "22P02", FG_EINTERNAL },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		if (fg_pg_code(rows[i].state) != rows[i].code)
			fail_msg("SQLSTATE %s: %d, want %d", rows[i].state ? rows[i].state : "(none)",
				 fg_pg_code(rows[i].state), rows[i].code);
		assert_int_not_equal(fg_pg_code(rows[i].state), FG_EINPUT);
	}
}

/* Another session holds a lock past the write's budget: FG_ESTATE naming the lock; then all is well. */
static void test_pg_error_message(void **state)
{
	struct fixture *f = *state;
	PGconn *other = PQconnectdb(f->path);
	struct fg_job j;
	struct fg_err err = { 0 };
	PGresult *r;

	assert_int_equal(PQstatus(other), CONNECTION_OK);
	r = PQexec(other, "BEGIN; LOCK TABLE jobs IN EXCLUSIVE MODE");
	assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	f->s->busy_ms = 200;
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{}", NULL, NULL, NULL, 0, &j, NULL, &err), FG_ESTATE);
	assert_non_null(strstr(err.msg, "locked"));
	assert_int_equal(fg_store_job_claim(f->s, "i/0", &j, &err), FG_ESTATE);
	PQclear(PQexec(other, "ROLLBACK"));
	PQfinish(other);
	f->s->busy_ms = 5000;
	enqueue(f->s, NULL, NULL);
	assert_int_equal(claim(f->s, "i/0"), 1);
}

static void test_pg_probe_write(void **state)
{
	struct fixture *f = *state;
	PGconn *other = PQconnectdb(f->path);
	struct fg_err err = { 0 };
	struct timespec t0, t1;
	struct fg_job j;
	PGresult *r;

	assert_int_equal(fg_store_probe_write(f->s, &err), 0);
	assert_int_equal(fg_store_probe_write(f->s, &err), 0);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM write_probe"), 1);
	r = PQexec(other, "BEGIN; LOCK TABLE write_probe IN EXCLUSIVE MODE");
	assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
	PQclear(r);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(fg_store_probe_write(f->s, &err), FG_ESTATE);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9 < 2.0);
	assert_non_null(strstr(err.msg, "locked"));
	PQclear(PQexec(other, "ROLLBACK"));
	PQfinish(other);
	assert_int_equal(fg_store_probe_write(f->s, &err), 0);
	assert_int_equal(f->s->busy_ms, 5000);
	/* A database that takes no writes (the session writes run on, writer.c). */
	exec_sql(fg_store_writer_conn(f->s), "SET default_transaction_read_only = on");
	assert_int_equal(fg_store_probe_write(f->s, &err), FG_ESTATE);
	assert_int_equal(fg_store_job_enqueue(f->s, "forge", "{}", NULL, NULL, NULL, 0, &j, NULL, &err), FG_ESTATE);
	exec_sql(fg_store_writer_conn(f->s), "SET default_transaction_read_only = off");
	assert_int_equal(fg_store_probe_write(f->s, &err), 0);
}

/*
 * Start-up recovery on a shared store: another instance's running job with
 * a live lease is left alone (it is not dead, only elsewhere); past its
 * lease, or with a stale heartbeat, it comes back.
 */
static void test_job_recover_shared(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	int requeued = -1, failed = -1;

	enqueue(f->s, NULL, NULL);
	assert_int_equal(claim(f->s, "old/1"), 1);
	assert_int_equal(fg_store_jobs_recover(f->s, "new", 3600, 3, &requeued, &failed, &err), 0);
	assert_int_equal(requeued, 0);
	assert_int_equal(get_job(f->s, 1).state, FG_JOB_RUNNING);
	exec_sql(f->s, "UPDATE jobs SET lease_until = '2000-01-01T00:00:00.000Z' WHERE id = 1");
	assert_int_equal(fg_store_jobs_recover(f->s, "new", 3600, 3, &requeued, &failed, &err), 0);
	assert_int_equal(requeued, 1);
	assert_int_equal(get_job(f->s, 1).attempts, 1);
	assert_int_equal(claim(f->s, "other/1"), 1);
	exec_sql(f->s, "UPDATE jobs SET heartbeat_at = '2000-01-01T00:00:00.000Z' WHERE id = 1");
	assert_int_equal(fg_store_jobs_recover(f->s, "new", 60, 3, &requeued, &failed, &err), 0);
	assert_int_equal(requeued, 1);
	assert_int_equal(fg_store_jobs_recover(f->s, "", 0, 3, &requeued, &failed, &err), FG_EINPUT);
	assert_int_equal(fg_store_jobs_recover(f->s, "new", 0, 0, &requeued, &failed, &err), FG_EINPUT);
}

/* ---- Idempotency-Keys of the POSTs other than /v1/jobs (store/idem.h): both backends ---- */

/* Reserve, in flight, another body, answer, replay, release, a stale reservation taken over. */
static void test_idem(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	struct fg_idem_answer ans;
	enum fg_idem_state st = FG_IDEM_REPLAY;
	const char *route = "POST /v1/artifacts/1/verifications";
	int known = -1, same = -1;
	int64_t aid;

	assert_int_equal(fg_store_idem_claim(f->s, route, "k1", "aa", 120, &st, &ans, &err), 0);
	assert_int_equal(st, FG_IDEM_NEW);
	assert_null(ans.body);
	/* The same key and body while the first is being answered; another body; another route. */
	assert_int_equal(fg_store_idem_claim(f->s, route, "k1", "aa", 120, &st, &ans, &err), 0);
	assert_int_equal(st, FG_IDEM_IN_FLIGHT);
	assert_int_equal(fg_store_idem_claim(f->s, route, "k1", "bb", 120, &st, &ans, &err), FG_ECONFLICT);
	assert_non_null(strstr(err.msg, "another body"));
	assert_int_equal(fg_store_idem_claim(f->s, "POST /v1/inspections", "k1", "bb", 120, &st, &ans, &err), 0);
	assert_int_equal(st, FG_IDEM_NEW);
	/* Answered: every repeat gets the answer back, whoever asks. */
	assert_int_equal(fg_store_idem_finish(f->s, route, "k1", 201, "/v1/verifications/9", "{\"id\":9}", &err), 0);
	assert_int_equal(fg_store_idem_claim(f->s, route, "k1", "aa", 120, &st, &ans, &err), 0);
	assert_int_equal(st, FG_IDEM_REPLAY);
	assert_int_equal(ans.status, 201);
	assert_string_equal(ans.location, "/v1/verifications/9");
	assert_string_equal(ans.body, "{\"id\":9}");
	fg_idem_answer_release(&ans);
	assert_null(ans.body);
	/* A release drops a reservation only, never an answer. */
	assert_int_equal(fg_store_idem_release(f->s, route, "k1", &err), 0);
	assert_int_equal(fg_store_idem_claim(f->s, route, "k1", "aa", 120, &st, &ans, &err), 0);
	assert_int_equal(st, FG_IDEM_REPLAY);
	fg_idem_answer_release(&ans);
	assert_int_equal(fg_store_idem_release(f->s, "POST /v1/inspections", "k1", &err), 0);
	assert_int_equal(fg_store_idem_claim(f->s, "POST /v1/inspections", "k1", "cc", 120, &st, &ans, &err), 0);
	assert_int_equal(st, FG_IDEM_NEW);
	/* A reservation whose request died long ago is taken over; a fresh one is not. */
	exec_sql(f->s, "UPDATE api_idempotency SET created_at = '2000-01-01T00:00:00.000Z' WHERE idem_key = 'k1'"
		       " AND status = 0");
	assert_int_equal(fg_store_idem_claim(f->s, "POST /v1/inspections", "k1", "cc", 120, &st, &ans, &err), 0);
	assert_int_equal(st, FG_IDEM_NEW);
	assert_int_equal(fg_store_idem_claim(f->s, "POST /v1/inspections", "k1", "cc", 120, &st, &ans, &err), 0);
	assert_int_equal(st, FG_IDEM_IN_FLIGHT);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM api_idempotency"), 2);
	/* Bad arguments are the caller's: nothing stored. */
	assert_int_equal(fg_store_idem_claim(f->s, "", "k", "aa", 120, &st, &ans, &err), FG_EINPUT);
	assert_int_equal(fg_store_idem_claim(f->s, route, "", "aa", 120, &st, &ans, &err), FG_EINPUT);
	assert_int_equal(fg_store_idem_finish(f->s, route, NULL, 200, NULL, NULL, &err), FG_EINPUT);
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM api_idempotency"), 2);
	/* A job's own key, and a fleet report that repeats the standing one. */
	enqueue(f->s, "job-key", "h1");
	assert_int_equal(fg_store_job_key_known(f->s, "job-key", "h1", &known, &err), 0);
	assert_int_equal(known, 1);
	assert_int_equal(fg_store_job_key_known(f->s, "job-key", "h2", &known, &err), 0);
	assert_int_equal(known, 0);
	aid = put_artifact(f->s, "a", "qwen3_5", NULL, WARN_VERDICT, NAN, NULL);
	assert_int_equal(fg_store_fleet_report(f->s, "gpu-1", aid, "ollama", NULL, NULL, &err), 0);
	assert_int_equal(fg_store_fleet_report_same(f->s, "gpu-1", "ollama", NULL, aid, "{}", &same, &err), 0);
	assert_int_equal(same, 1);
	assert_int_equal(fg_store_fleet_report_same(f->s, "gpu-1", "ollama", NULL, aid, "{\"x\":1}", &same, &err), 0);
	assert_int_equal(same, 0);
	assert_int_equal(fg_store_fleet_report_same(f->s, "gpu-2", "ollama", NULL, aid, "{}", &same, &err), 0);
	assert_int_equal(same, 0);
}

/* A child process's claim of one key: its exit status says what it was told (10 + state, 1 on error). */
static int idem_child(const char *path, int go)
{
	struct fg_store *s = NULL;
	struct fg_err err = { 0 };
	struct fg_idem_answer ans;
	enum fg_idem_state st;
	char c;

	if (fg_store_open(&s, path, &err) != 0)
		return 1;
	if (read(go, &c, 1) != 1)
		return 1;
	if (fg_store_idem_claim(s, "POST /v1/fleet/reports", "race", "aa", 120, &st, &ans, &err) != 0) {
		fprintf(stderr, "idem child: %s\n", err.msg);
		return 1;
	}
	if (st == FG_IDEM_REPLAY && (ans.status != 201 || !ans.body || strcmp(ans.body, "{}") != 0))
		return 1;
	fg_idem_answer_release(&ans);
	fg_store_close(s);
	return 10 + (int)st;
}

/*
 * The environment of a child run of this binary (main runs idem_child when
 * FORGED_TEST_IDEM_CHILD is set): the parent's, plus the store and the
 * descriptor to wait on.  A fresh exec, not a bare fork: this process has
 * its writer's threads, and a forked child starting threads of its own is
 * what ThreadSanitizer (make tsan-test) does not support.
 */
static char **child_env(const char *path, int go, char *store_var, size_t store_cap, char *go_var, size_t go_cap)
{
	extern char **environ;
	size_t n = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 3, sizeof(*env));
	assert_non_null(env);
	for (size_t i = 0; i < n; i++)
		env[i] = environ[i];
	snprintf(store_var, store_cap, "FORGED_TEST_IDEM_CHILD=%s", path);
	snprintf(go_var, go_cap, "FORGED_TEST_IDEM_GO=%d", go);
	env[n] = store_var;
	env[n + 1] = go_var;
	return env;
}

/* Four processes claim one key at once, twice: one reserves it and three find it in flight; once answered, four replays. */
static void test_idem_processes(void **state)
{
	struct fixture *f = *state;
	struct fg_err err = { 0 };
	char exe[4096];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	assert_true(len > 0);
	exe[len] = '\0';
	for (int round = 0; round < 2; round++) {
		int go[2], seen[3] = { 0, 0, 0 };
		char store_var[sizeof(f->path) + 32], go_var[48];
		char **env;
		pid_t kid[4];

		assert_int_equal(pipe(go), 0);
		env = child_env(f->path, go[0], store_var, sizeof(store_var), go_var, sizeof(go_var));
		for (int i = 0; i < 4; i++) {
			kid[i] = fork();
			assert_true(kid[i] >= 0);
			if (kid[i] == 0) {
				char *const args[] = { exe, NULL };

				close(go[1]);
				execve(exe, args, env);
				_exit(2);
			}
		}
		free(env);
		close(go[0]);
		/* Each child has opened its store (its own writer) or soon will; then all go at once. */
		usleep(300 * 1000);
		assert_int_equal(write(go[1], "xxxx", 4), 4);
		close(go[1]);
		for (int i = 0; i < 4; i++) {
			int status = 0;

			assert_int_equal(waitpid(kid[i], &status, 0), kid[i]);
			assert_true(WIFEXITED(status));
			if (WEXITSTATUS(status) < 10 || WEXITSTATUS(status) > 12)
				fail_msg("round %d, child %d: exit %d", round, i, WEXITSTATUS(status));
			seen[WEXITSTATUS(status) - 10]++;
		}
		if (round == 0) {
			assert_int_equal(seen[FG_IDEM_NEW], 1);
			assert_int_equal(seen[FG_IDEM_IN_FLIGHT], 3);
			assert_int_equal(fg_store_idem_finish(f->s, "POST /v1/fleet/reports", "race", 201, "", "{}", &err), 0);
		} else {
			assert_int_equal(seen[FG_IDEM_REPLAY], 4);
		}
	}
	assert_int_equal(query_int(f->s, "SELECT count(*) FROM api_idempotency"), 1);
}

/* ---- LISTEN/NOTIFY (PostgreSQL): what another instance wrote reaches this one ---- */

struct events {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int n[2];                      /* by enum fg_store_event */
};

static void on_event(void *ctx, enum fg_store_event ev)
{
	struct events *e = ctx;

	pthread_mutex_lock(&e->lock);
	e->n[ev == FG_STORE_EV_JOB ? 0 : 1]++;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
}

/* Wait at most ms for event ev to have been seen at least n times; its count. */
static int wait_event(struct events *e, enum fg_store_event ev, int n, int ms)
{
	struct timespec until;
	int got;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&e->lock);
	while (e->n[ev == FG_STORE_EV_JOB ? 0 : 1] < n && pthread_cond_timedwait(&e->cond, &e->lock, &until) == 0)
		;
	got = e->n[ev == FG_STORE_EV_JOB ? 0 : 1];
	pthread_mutex_unlock(&e->lock);
	return got;
}

static void reset_events(struct events *e)
{
	pthread_mutex_lock(&e->lock);
	e->n[0] = e->n[1] = 0;
	pthread_mutex_unlock(&e->lock);
}

/*
 * An enqueue and a requeue NOTIFY the jobs channel; an artifact, a
 * verification and a fleet report the data channel; a claim, progress and
 * a read notify nothing.  A listener whose connection is cut reconnects
 * and reports both events, since what was sent meanwhile is lost.
 */
static void test_pg_listen(void **state)
{
	struct fixture *f = *state;
	struct events e = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, { 0, 0 } };
	struct fg_store_listener *l = NULL;
	struct fg_store *other = NULL;
	struct fg_err err = { 0 };
	cJSON *result = cJSON_CreateObject();
	int64_t aid, vid = 0;
	int listening = 0;

	assert_int_equal(fg_store_listen(&l, f->path, on_event, &e, &err), 0);
	assert_non_null(l);
	/* Another instance's handle (its own connection; the writer is this process's). */
	assert_int_equal(fg_store_open(&other, f->path, &err), 0);
	/* The listener's LISTEN runs on its own thread: enqueue until it hears one. */
	for (int i = 0; i < 100 && !listening; i++) {
		enqueue(other, NULL, NULL);
		listening = wait_event(&e, FG_STORE_EV_JOB, 1, 100) >= 1;
	}
	assert_true(listening);
	usleep(200 * 1000);
	reset_events(&e);
	/* Claims, progress and reads: no notification (waking every instance for them would be noise). */
	assert_int_equal(claim(other, "o/0"), 1);
	assert_int_equal(fg_store_job_progress(other, 1, "o/0", "inspect", 0.1, &err), 0);
	(void)get_job(other, 1);
	usleep(300 * 1000);
	assert_int_equal(wait_event(&e, FG_STORE_EV_JOB, 1, 10), 0);
	assert_int_equal(wait_event(&e, FG_STORE_EV_DATA, 1, 10), 0);
	/* A requeue (a drain) wakes the other instances' workers. */
	assert_int_equal(fg_store_job_requeue(other, 1, "o/0", &err), 0);
	assert_int_equal(wait_event(&e, FG_STORE_EV_JOB, 1, 5000), 1);
	/* Data: an artifact, a verification, a fleet report, each one notification. */
	aid = put_artifact(other, "a", "qwen3_5", NULL, WARN_VERDICT, NAN, NULL);
	assert_int_equal(wait_event(&e, FG_STORE_EV_DATA, 1, 5000), 1);
	cJSON_AddStringToObject(result, "verdict", "mtp_depth_wins");
	assert_int_equal(fg_store_verification_put(other, aid, "[]", result, &vid, NULL, NULL, &err), 0);
	assert_int_equal(wait_event(&e, FG_STORE_EV_DATA, 2, 5000), 2);
	assert_int_equal(fg_store_fleet_report(other, "gpu-1", aid, "ollama", NULL, NULL, &err), 0);
	assert_int_equal(wait_event(&e, FG_STORE_EV_DATA, 3, 5000), 3);
	/* A failed write (no such artifact) notifies nothing: its transaction never committed. */
	assert_int_equal(fg_store_fleet_report(other, "gpu-1", 999, "ollama", NULL, NULL, &err), FG_ENOTFOUND);
	usleep(300 * 1000);
	assert_int_equal(wait_event(&e, FG_STORE_EV_DATA, 4, 10), 3);
	/* The listener's connection is cut (a server restart, a network blip): back, it reports both. */
	reset_events(&e);
	exec_sql(other, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'forged-listen'"
			" AND pid <> pg_backend_pid()");
	assert_true(wait_event(&e, FG_STORE_EV_JOB, 1, 10000) >= 1);
	assert_true(wait_event(&e, FG_STORE_EV_DATA, 1, 10000) >= 1);
	/* And it listens again. */
	usleep(200 * 1000);
	reset_events(&e);
	enqueue(other, NULL, NULL);
	assert_int_equal(wait_event(&e, FG_STORE_EV_JOB, 1, 5000), 1);
	fg_store_listener_stop(l);
	/* SQLite has no channel: no listener, no error. */
	l = (struct fg_store_listener *)0x1;
	assert_int_equal(fg_store_listen(&l, "sqlite:///tmp/none.db", on_event, &e, &err), 0);
	assert_null(l);
	cJSON_Delete(result);
	fg_store_close(other);
}

/* ---- the runs ---- */

enum { BOTH, SQLITE_ONLY, PG_ONLY };

#define T(fn, setup_fn, which) { #fn, fn, setup_fn, which }

int main(void)
{
	const char *idem_store = getenv("FORGED_TEST_IDEM_CHILD");

	/* A child of test_idem_processes: one claim, told by the exit status. */
	if (idem_store)
		return idem_child(idem_store, (int)strtol(getenv("FORGED_TEST_IDEM_GO") ? getenv("FORGED_TEST_IDEM_GO") : "-1",
							   NULL, 10));
	static const struct {
		const char *name;
		CMUnitTestFunction fn;
		CMFixtureFunction setup;
		int which;
	} list[] = {
		T(test_open_pragmas, setup, SQLITE_ONLY),
		T(test_open_refuses_newer, setup, SQLITE_ONLY),
		T(test_open_bad_args, setup_dir, SQLITE_ONLY),
		T(test_open_concurrent_migration, setup_dir, SQLITE_ONLY),
		T(test_pg_open, setup, PG_ONLY),
		T(test_pg_refuses_newer, setup, PG_ONLY),
		T(test_pg_bad_target, setup_dir, PG_ONLY),
		T(test_pg_concurrent_migration, setup_dir, PG_ONLY),
		T(test_job_states, NULL, SQLITE_ONLY),
		T(test_job_enqueue_get_json, setup, BOTH),
		T(test_job_idempotency, setup, BOTH),
		T(test_job_idempotency_concurrent, setup, BOTH),
		T(test_job_queue_cap, setup, BOTH),
		T(test_job_lifecycle, setup, BOTH),
		T(test_job_cancel_requeue, setup, BOTH),
		T(test_job_recover, setup, SQLITE_ONLY),
		T(test_job_recover_shared, setup, PG_ONLY),
		T(test_job_list, setup, BOTH),
		T(test_job_claim_concurrent, setup, BOTH),
		T(test_job_lease, setup, BOTH),
		T(test_job_succeed, setup, BOTH),
		T(test_group_commit, setup, BOTH),
		T(test_artifact_put_get, setup, BOTH),
		T(test_artifact_by_fingerprint, setup, BOTH),
		T(test_artifact_list, setup, BOTH),
		T(test_verification, setup, BOTH),
		T(test_fleet_health, setup, BOTH),
		T(test_fleet_probe_buckets, setup, BOTH),
		T(test_fleet_probe_hf_served, setup, BOTH),
		T(test_artifact_same_digest, setup, BOTH),
		T(test_artifact_resolve, setup, BOTH),
		T(test_job_request_echo, setup, BOTH),
		T(test_verification_restamps_runtime, setup, BOTH),
		T(test_verification_verdict_kept, setup, BOTH),
		T(test_artifact_runtime, setup, BOTH),
		T(test_lax_verification_rows, setup, BOTH),
		T(test_fleet_runtime_reported, setup, BOTH),
		T(test_migrate_v3_to_v4, setup, SQLITE_ONLY),
		T(test_migrate_v6_to_v7, setup, SQLITE_ONLY),
		T(test_migrate_v7_to_v8, setup, SQLITE_ONLY),
		T(test_probe_buckets_match_fleet_ranges, setup, BOTH),
		T(test_fleet_health_empty, setup, BOTH),
		T(test_fleet_distributions, setup, BOTH),
		T(test_verification_rows, setup, BOTH),
		T(test_migrate_v2_to_v3, setup, SQLITE_ONLY),
		T(test_stats_triggers, setup, BOTH),
		T(test_counts, setup, BOTH),
		T(test_sqlite_error_message, setup, SQLITE_ONLY),
		T(test_pg_error_message, setup, PG_ONLY),
		T(test_job_refusal, setup, BOTH),
		T(test_open_migrates_v1, setup, SQLITE_ONLY),
		T(test_sqlite_codes, NULL, SQLITE_ONLY),
		T(test_pg_codes, NULL, PG_ONLY),
		T(test_disk_full, setup, SQLITE_ONLY),
		T(test_probe_write, setup, SQLITE_ONLY),
		T(test_pg_probe_write, setup, PG_ONLY),
		T(test_idem, setup, BOTH),
		T(test_idem_processes, setup, BOTH),
		T(test_pg_listen, setup, PG_ONLY),
	};
	static struct CMUnitTest tests[2 * sizeof(list) / sizeof(list[0])];
	static char names[2 * sizeof(list) / sizeof(list[0])][64];
	size_t n = 0;

	pg_url = getenv("FORGED_TEST_PG");
	if (pg_url && !*pg_url)
		pg_url = NULL;
	if (!pg_url)
		printf("test_store: PostgreSQL runs skipped: FORGED_TEST_PG is not set (tests/run_all.sh sets it when "
		       "PostgreSQL is installed; tests/pg_cluster.sh)\n");
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) {
			int pg = pass == 1;

			if ((pg && (!pg_url || list[i].which == SQLITE_ONLY)) || (!pg && list[i].which == PG_ONLY))
				continue;
			snprintf(names[n], sizeof(names[n]), "%s%s", pg ? "pg/" : "", list[i].name);
			tests[n].name = names[n];
			tests[n].test_func = list[i].fn;
			tests[n].setup_func = list[i].setup;
			tests[n].teardown_func = list[i].setup ? teardown : NULL;
			tests[n].initial_state = pg ? (void *)&backend_pg : NULL;
			n++;
		}
	}
	return _cmocka_run_group_tests("test_store", tests, n, NULL, NULL);
}
