/*
 * bench_store.c: the store under a realistic catalog.  Seeds N artifacts
 * (default 100,000) with inspect-sized reports, 0-3 verdicts each drawn
 * from the real verdict table, probe means spread around the healthy band,
 * provenance and file fingerprints for a third of them, verifications for
 * one in twenty and a fleet of 2,000 hosts x 2 runtimes; then times, on a
 * connection with the production pragmas (synchronous=FULL):
 *   - fg_store_fleet_health, idle and while another thread writes
 *     (verifications, fleet reports, new artifacts) on its own connection;
 *   - fg_store_counts (what /metrics reads);
 *   - fg_store_artifact_list first pages (no filter, by family, by a rare
 *     and a common verdict code);
 *   - fg_store_verification_put (one fsync'd transaction each);
 *   - enqueue + claim of jobs.
 * Seeding uses the public API with synchronous=OFF on the writer's
 * connection (reached through the private header) so it takes seconds, not
 * an fsync per artifact.  Numbers
 * only, no assertions.  A database path reuses an already seeded file.
 *
 * References in the same run, interleaved with what they are compared to:
 *   - verification_put against a bare one-row INSERT committed on its own
 *     SQLite connection with the same pragmas (WAL, synchronous=FULL) in the
 *     same folder: the fsync'd-commit floor of this disk;
 *   - fleet_health and verification_put under load against the same calls
 *     idle: ROUNDS rounds alternate an idle phase (the writer paused) and a
 *     loaded phase (the writer running), so a change of machine load hits
 *     both.
 * Each call's wall time and the timing thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID: the writer thread's work is not counted) are
 * printed as min/median/p95/max and as "sample CASE ROLE wall|cpu MS" lines
 * for bench/benchlib.py samples (bench/bench_store.sh).
 *
 *   cc -std=c11 -D_GNU_SOURCE -O2 -I. bench/bench_store.c build/libstore.a build/libforge.a \
 *      -lsqlite3 -lpq -lcjson -lzstd -lcrypto -lm -lpthread -o build/bench/bench_store
 *   ./build/bench/bench_store [artifacts, default 100000] [database path]
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "forge/model/verdicts.h"
#include "store/internal.h"
#include "store/store.h"

#define HOSTS 2000
#define REPS 50
#define ROUNDS 5 /* idle / loaded phases of the load comparison */

static const char *const families[] = {
	"qwen3_5", "qwen3_5", "qwen3_5", "qwen3_next", "glm4_moe", "glm4_moe_lite",
	"glm_moe_dsa", "deepseek_v3", "deepseek_v32", "mimo", "mimo_v2", "unknown",
};
static const char *const runtimes[] = { "mlx-lm-0.31", "mtplx-2.12", "ollama", "hf" };

/* Per thread, so the writer thread and the timing thread do not race on it. */
static _Thread_local uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x;
}

static double uniform(void)
{
	return (double)(rng() >> 11) / 9007199254740992.0;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static double cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Wall and CPU times of the calls of one kind. */
struct series {
	double wall[REPS * 4], cpu[REPS * 4];
	int n;
	double w0, c0;
};

static void series_start(struct series *t)
{
	t->w0 = now_ms();
	t->c0 = cpu_ms();
}

static void series_stop(struct series *t)
{
	if (t->n < REPS * 4) {
		t->wall[t->n] = now_ms() - t->w0;
		t->cpu[t->n] = cpu_ms() - t->c0;
		t->n++;
	}
}

static void die(const char *what, const struct fg_err *err)
{
	fprintf(stderr, "bench_store: %s: %s\n", what, err->msg);
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Prints NAME's min/median/p95/max wall and median CPU, and its samples as
 * ROLE of CASE (ROLE NULL: no sample lines). */
static void report(const char *name, struct series *t, const char *cas, const char *role)
{
	double w[REPS * 4], c[REPS * 4];
	int n = t->n;

	for (int i = 0; i < n; i++) {
		if (cas && role)
			printf("sample %s %s wall %.4f\nsample %s %s cpu %.4f\n", cas, role, t->wall[i], cas, role,
			       t->cpu[i]);
		w[i] = t->wall[i];
		c[i] = t->cpu[i];
	}
	if (cas && role)
		printf("name %s %s %s\n", cas, role, name);
	qsort(w, (size_t)n, sizeof(*w), cmp_double);
	qsort(c, (size_t)n, sizeof(*c), cmp_double);
	printf("  %-44s wall min %7.2f  median %7.2f  p95 %7.2f  max %7.2f ms  cpu median %6.2f ms  (n=%d)\n", name,
	       w[0], w[n / 2], w[(n * 95) / 100 < n ? (n * 95) / 100 : n - 1], w[n - 1], c[n / 2], n);
}

/* A probe mean: mostly in or near the band, some delta (~0.79), some double-shifted (~2.79). */
static double probe(void)
{
	double u = uniform();

	if (u < 0.10)
		return NAN;
	if (u < 0.20)
		return 0.79 + 0.2 * (uniform() - 0.5);
	if (u < 0.30)
		return 2.79 + 0.3 * (uniform() - 0.5);
	return 1.785 + 0.2 * (uniform() - 0.5);
}

static cJSON *make_report(const char *source, const char *family, int i, int *ok)
{
	cJSON *r = cJSON_CreateObject(), *arr, *o;
	int nv = (int)(rng() % 4);

	*ok = 1;
	cJSON_AddStringToObject(r, "schema", "forged.inspect.v1");
	cJSON_AddStringToObject(r, "source", source);
	cJSON_AddStringToObject(r, "family", family);
	cJSON_AddStringToObject(r, "model_type", family);
	cJSON_AddStringToObject(r, "norm_style", "zero_centred");
	cJSON_AddStringToObject(r, "layout", "mlx");
	arr = cJSON_AddArrayToObject(r, "files");
	for (int k = 0; k < 2; k++) {
		char name[64];

		snprintf(name, sizeof(name), "model-%05d-of-00002.safetensors", k + 1);
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", name);
		cJSON_AddNumberToObject(o, "bytes", 5e9 + i);
		cJSON_AddNumberToObject(o, "tensors", 400);
		cJSON_AddTrueToObject(o, "in_index");
		cJSON_AddItemToArray(arr, o);
	}
	arr = cJSON_AddArrayToObject(r, "runtimes");
	for (size_t k = 0; k < sizeof(runtimes) / sizeof(runtimes[0]); k++) {
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "runtime", runtimes[k]);
		cJSON_AddBoolToObject(o, "trunk_shift", k % 2);
		cJSON_AddStringToObject(o, "trunk", "ok");
		cJSON_AddStringToObject(o, "head", "ok");
		cJSON_AddStringToObject(o, "outcome", "ok");
		cJSON_AddItemToArray(arr, o);
	}
	arr = cJSON_AddArrayToObject(r, "verdicts");
	for (int k = 0; k < nv; k++) {
		const struct fg_verdict_row *c = &fg_verdict_table[rng() % FG_VERDICT_COUNT];

		while (c->kind != FG_VK_STATIC) /* a report carries static codes only */
			c = &fg_verdict_table[rng() % FG_VERDICT_COUNT];

		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "code", c->name);
		cJSON_AddStringToObject(o, "severity", fg_severity_name(c->severity));
		cJSON_AddStringToObject(o, "set", "trunk");
		cJSON_AddStringToObject(o, "detail", c->meaning);
		cJSON_AddItemToArray(arr, o);
		if (c->severity == FG_SEV_ERROR)
			*ok = 0;
	}
	cJSON_AddBoolToObject(r, "ok", *ok);
	return r;
}

static int64_t put_one(struct fg_store *s, int i)
{
	char source[64], fp[72], path[64];
	struct fg_artifact_in a = { 0 };
	struct fg_err err = { 0 };
	const char *family = families[rng() % (sizeof(families) / sizeof(families[0]))];
	cJSON *report, *prov = NULL;
	int64_t id = 0;
	int ok;

	snprintf(source, sizeof(source), "models/m%d", i);
	snprintf(fp, sizeof(fp), "%016llx%016llx", (unsigned long long)rng(), (unsigned long long)rng());
	report = make_report(source, family, i, &ok);
	a.source = source;
	a.family = family;
	a.report = report;
	a.ok = ok;
	a.probe_mean = probe();
	a.head_convention = (rng() % 3) == 0 ? "delta" : ((rng() % 2) ? "absolute" : NULL);
	if (i % 3 == 0) {
		cJSON *files;

		snprintf(path, sizeof(path), "/srv/forged/artifacts/%d", i);
		a.path = path;
		a.fingerprint = fp;
		prov = cJSON_CreateObject();
		cJSON_AddStringToObject(prov, "source", source);
		files = cJSON_AddObjectToObject(prov, "files");
		cJSON_AddStringToObject(files, "config.json", fp);
		cJSON_AddStringToObject(files, "mtp.safetensors", fp);
		a.provenance = prov;
	}
	if (fg_store_artifact_put(s, &a, &id, NULL, &err))
		die("artifact_put", &err);
	cJSON_Delete(report);
	cJSON_Delete(prov);
	return id;
}

static void verify_one(struct fg_store *s, int64_t artifact)
{
	static const char *const verdicts[] = { "mtp_depth_wins", "no_mtp_depth_beat_ar", "mtp_acceptance_collapsed",
						"no_quality_passed_mtp_depth_beat_ar" };
	const char *v = verdicts[rng() % 4];
	struct fg_err err = { 0 };
	cJSON *result = cJSON_CreateObject();
	int64_t id;

	cJSON_AddStringToObject(result, "verdict", v);
	cJSON_AddStringToObject(result, "severity", fg_severity_name(fg_verdict_code_find(v)->severity));
	if (fg_store_verification_put(s, artifact,
				      "[{\"depth\":0,\"tok_s\":15.04},{\"depth\":1,\"tok_s\":13.46,\"acceptance\":[0.067]}]",
				      result, &id, NULL, NULL, &err))
		die("verification_put", &err);
	cJSON_Delete(result);
}

static void fleet_one(struct fg_store *s, int host, int64_t artifact)
{
	char name[32];
	struct fg_err err = { 0 };
	cJSON *obs = cJSON_CreateObject();

	snprintf(name, sizeof(name), "gpu-%04d.farm", host / 2);
	cJSON_AddNumberToObject(obs, "tok_s", 14.2);
	if (fg_store_fleet_report(s, name, artifact, runtimes[host % 2], NULL, obs, &err))
		die("fleet_report", &err);
	cJSON_Delete(obs);
}

static void seed(const char *path, int n)
{
	struct fg_store *s = NULL;
	struct fg_err err = { 0 };
	struct fg_store_counts c;
	double t0, t1;

	if (fg_store_open(&s, path, &err))
		die("open", &err);
	if (fg_store_counts(s, &c, NULL, &err))
		die("counts", &err);
	if (c.artifacts >= n) {
		printf("reusing %s: %lld artifacts\n", path, (long long)c.artifacts);
		fg_store_close(s);
		return;
	}
	/* Seeding only: no fsync per artifact (on the connection writes run on, store/writer.c). */
	sqlite3_exec(fg_store_writer_conn(s)->db, "PRAGMA synchronous = OFF", NULL, NULL, NULL);
	t0 = now_ms();
	for (int i = 0; i < n; i++)
		put_one(s, i);
	t1 = now_ms();
	printf("seeded %d artifacts in %.1f s (%.0f artifact_put/s, synchronous=OFF)\n", n, (t1 - t0) / 1e3,
	       n / ((t1 - t0) / 1e3));
	for (int i = 0; i < n / 20; i++)
		verify_one(s, 1 + (int64_t)(rng() % (uint64_t)n));
	for (int h = 0; h < HOSTS * 2; h++)
		fleet_one(s, h, 1 + (int64_t)(rng() % (uint64_t)n));
	printf("seeded %d verifications and %d fleet reports in %.1f s\n", n / 20, HOSTS * 2, (now_ms() - t1) / 1e3);
	sqlite3_exec(fg_store_writer_conn(s)->db, "PRAGMA synchronous = FULL", NULL, NULL, NULL);
	sqlite3_exec(s->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
	fg_store_close(s);
}

struct writer {
	const char *path;
	int n;
	atomic_int stop, pause, paused;
	int writes;
};

/* Another connection writing what a busy farm writes, as fast as it can. */
static void *writer_thread(void *arg)
{
	struct writer *w = arg;
	struct fg_store *s = NULL;
	struct fg_err err = { 0 };

	if (fg_store_open(&s, w->path, &err))
		die("writer open", &err);
	while (!atomic_load(&w->stop)) {
		if (atomic_load(&w->pause)) {
			atomic_store(&w->paused, 1);
			usleep(1000);
			continue;
		}
		atomic_store(&w->paused, 0);
		switch (w->writes % 3) {
		case 0:
			verify_one(s, 1 + (int64_t)(rng() % (uint64_t)w->n));
			break;
		case 1:
			fleet_one(s, (int)(rng() % (HOSTS * 2)), 1 + (int64_t)(rng() % (uint64_t)w->n));
			break;
		default:
			put_one(s, w->n + w->writes);
			break;
		}
		w->writes++;
	}
	fg_store_close(s);
	return NULL;
}

static size_t health_one(struct fg_store *s, struct series *t)
{
	struct fg_err err = { 0 };
	cJSON *h = NULL;
	size_t bytes = 0;
	char *text;

	series_start(t);
	if (fg_store_fleet_health(s, &h, &err))
		die("fleet_health", &err);
	series_stop(t);
	text = cJSON_PrintUnformatted(h);
	bytes = text ? strlen(text) : 0;
	cJSON_free(text);
	cJSON_Delete(h);
	return bytes;
}

static void time_list(struct fg_store *s, const char *name, const char *cas, const char *verdict,
		      const char *family)
{
	struct series t = { 0 };
	struct fg_err err = { 0 };
	int64_t next = 0;

	for (int r = 0; r < REPS; r++) {
		cJSON *arr = NULL;

		series_start(&t);
		if (fg_store_artifact_list(s, verdict, family, 0, 100, &arr, &next, &err))
			die("artifact_list", &err);
		series_stop(&t);
		cJSON_Delete(arr);
	}
	report(name, &t, cas, "forged");
}

/* The reference for verification_put: one row, one fsync'd commit, the same pragmas. */
static sqlite3 *bare_open(const char *path)
{
	sqlite3 *db = NULL;

	if (sqlite3_open(path, &db) != SQLITE_OK ||
	    sqlite3_exec(db,
			 "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
			 "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, artifact_id INTEGER, rows TEXT, "
			 "result TEXT, created TEXT)",
			 NULL, NULL, NULL) != SQLITE_OK) {
		fprintf(stderr, "bench_store: bare sqlite: %s\n", db ? sqlite3_errmsg(db) : "open failed");
		exit(1);
	}
	return db;
}

static void bare_one(sqlite3 *db, int64_t artifact)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db,
			       "INSERT INTO t (artifact_id, rows, result, created) VALUES (?, "
			       "'[{\"depth\":0,\"tok_s\":15.04}]', '{\"verdict\":\"mtp_depth_wins\"}', "
			       "strftime('%Y-%m-%dT%H:%M:%fZ','now'))",
			       -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_bind_int64(st, 1, artifact) != SQLITE_OK || sqlite3_step(st) != SQLITE_DONE ||
	    sqlite3_finalize(st) != SQLITE_OK || sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		fprintf(stderr, "bench_store: bare insert: %s\n", sqlite3_errmsg(db));
		exit(1);
	}
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/bench-store-XXXXXX";
	char path[256];
	int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 100000;
	struct fg_store *s = NULL;
	struct fg_store_counts c;
	struct fg_err err = { 0 };
	struct writer w = { 0 };
	pthread_t th;
	static struct series t, health_idle, health_load, put_idle, put_load, bare_put;
	char bare_path[300];
	sqlite3 *bare;
	size_t health_bytes = 0;
	int own_dir = argc <= 2;

	if (n < 100)
		n = 100;
	if (own_dir) {
		if (!mkdtemp(dir)) {
			perror("mkdtemp");
			return 1;
		}
		snprintf(path, sizeof(path), "%s/forged.db", dir);
	} else {
		snprintf(path, sizeof(path), "%s", argv[2]);
	}
	seed(path, n);
	printf("extra verification_put artifacts %d\nextra fleet_health_load artifacts %d\n", n, n);

	if (fg_store_open(&s, path, &err))
		die("open", &err);
	if (fg_store_counts(s, &c, NULL, &err))
		die("counts", &err);
	printf("catalog: %lld artifacts, %lld unhealthy\n", (long long)c.artifacts, (long long)c.artifacts_unhealthy);
	printf("reads (synchronous=FULL connection):\n");
	for (int r = 0; r < REPS; r++) {
		cJSON *by = NULL;

		series_start(&t);
		if (fg_store_counts(s, &c, &by, &err))
			die("counts", &err);
		series_stop(&t);
		cJSON_Delete(by);
	}
	report("counts (with by_verdict)", &t, "counts", "forged");
	time_list(s, "artifact_list, newest 100", "artifact_list_newest", NULL, NULL);
	time_list(s, "artifact_list, family=glm4_moe", "artifact_list_family", NULL, "glm4_moe");
	time_list(s, "artifact_list, verdict=mtp_acceptance_collapsed", "artifact_list_verdict",
		  "mtp_acceptance_collapsed", NULL);
	time_list(s, "artifact_list, verdict=stray_shard + family", "artifact_list_verdict_family", "stray_shard",
		  "deepseek_v3");
	memset(&t, 0, sizeof(t));
	for (int r = 0; r < REPS; r++) {
		struct fg_job j;

		series_start(&t);
		if (fg_store_job_enqueue(s, "forge", "{\"source\":\"models/x\"}", NULL, NULL, NULL, 0, &j, NULL, &err))
			die("enqueue", &err);
		fg_job_release(&j);
		if (fg_store_job_claim(s, "bench/0", &j, &err) < 0)
			die("claim", &err);
		series_stop(&t);
		fg_job_release(&j);
	}
	report("job enqueue + claim", &t, "job_enqueue_claim", "forged");

	/* Idle and loaded phases alternate; within the idle phase verification_put
	 * and the bare commit alternate too. */
	snprintf(bare_path, sizeof(bare_path), "%s.bare", path);
	bare = bare_open(bare_path);
	w.path = path;
	w.n = n;
	atomic_store(&w.pause, 1);
	if (pthread_create(&th, NULL, writer_thread, &w) != 0)
		return 1;
	for (int round = 0; round < ROUNDS; round++) {
		atomic_store(&w.pause, 1);
		while (!atomic_load(&w.paused))
			usleep(1000);
		for (int r = 0; r < REPS / ROUNDS; r++) {
			health_bytes = health_one(s, &health_idle);
			series_start(&put_idle);
			verify_one(s, 1 + (int64_t)(rng() % (uint64_t)n));
			series_stop(&put_idle);
			series_start(&bare_put);
			bare_one(bare, 1 + (int64_t)(rng() % (uint64_t)n));
			series_stop(&bare_put);
		}
		atomic_store(&w.pause, 0);
		while (atomic_load(&w.paused))
			usleep(1000);
		usleep(20000);
		for (int r = 0; r < REPS / ROUNDS; r++) {
			health_one(s, &health_load);
			series_start(&put_load);
			verify_one(s, 1 + (int64_t)(rng() % (uint64_t)n));
			series_stop(&put_load);
		}
	}
	atomic_store(&w.stop, 1);
	pthread_join(th, NULL);
	sqlite3_close(bare);
	printf("idle (writer paused) and under load (a second connection writing continuously), %d rounds:\n",
	       ROUNDS);
	report("fleet_health, idle", &health_idle, "fleet_health_load", "reference");
	report("fleet_health, while writing", &health_load, "fleet_health_load", "forged");
	printf("  %-44s %zu bytes of JSON\n", "", health_bytes);
	report("verification_put (one fsync'd commit each)", &put_idle, "verification_put", "forged");
	report("bare one-row sqlite commit, same pragmas", &bare_put, "verification_put", "reference");
	report("verification_put, idle", &put_idle, "verification_put_load", "reference");
	report("verification_put, while writing", &put_load, "verification_put_load", "forged");
	printf("  the writer committed %d transactions meanwhile\n", w.writes);
	printf("extra fleet_health_load writer_transactions %d\nextra fleet_health_load health_json_bytes %zu\n",
	       w.writes, health_bytes);
	fg_store_close(s);
	if (own_dir) {
		char p[300];
		static const char *const suffixes[] = { "", "-wal", "-shm", ".bare", ".bare-wal", ".bare-shm" };

		for (size_t i = 0; i < 6; i++) {
			snprintf(p, sizeof(p), "%s%s", path, suffixes[i]);
			unlink(p);
		}
		rmdir(dir);
	}
	return 0;
}
