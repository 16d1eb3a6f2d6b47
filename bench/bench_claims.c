/*
 * bench_claims.c: claims per second against one store from P processes
 * ("instances", each with its own writer thread and T claiming threads, a
 * store connection each), as a farm's workers claim: claim, finish,
 * claim...  The queue is filled first (JOBS jobs); then the instances start
 * together and drain it.  Prints the wall time from the start to the last
 * claim, claims/s, and checks that every job was claimed exactly once (each
 * finished once, no claim ever answered twice).  Figures only.
 *
 *   bench_claims TARGET JOBS PROCESSES THREADS
 *   (TARGET: a SQLite path or a postgres:// URL on a fresh database)
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct claimer {
	const char *target;
	char worker[64];
	long claims;
	int rc;
};

static void *claim_loop(void *arg)
{
	struct claimer *c = arg;
	struct fg_store *s = NULL;
	struct fg_err err = { 0 };

	if (fg_store_open(&s, c->target, &err) != 0) {
		fprintf(stderr, "bench_claims: %s\n", err.msg);
		c->rc = 1;
		return NULL;
	}
	for (;;) {
		struct fg_job j;
		int got = fg_store_job_claim(s, c->worker, &j, &err);

		if (got < 0) {
			fprintf(stderr, "bench_claims: claim: %s\n", err.msg);
			c->rc = 1;
			break;
		}
		if (got == 0)
			break;
		fg_job_release(&j);
		if (fg_store_job_finish(s, j.id, c->worker, FG_JOB_SUCCEEDED, NULL, 0, &err) != 0) {
			fprintf(stderr, "bench_claims: finish %lld: %s\n", (long long)j.id, err.msg);
			c->rc = 1;
			break;
		}
		c->claims++;
	}
	fg_store_close(s);
	return NULL;
}

/* One instance: THREADS claimers; writes its claim count to fd. */
static int instance(const char *target, int index, int threads, int go, int out)
{
	struct claimer c[64];
	pthread_t t[64];
	long total = 0;
	char x;
	int rc = 0;

	if (read(go, &x, 1) != 1)
		return 1;
	for (int i = 0; i < threads; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		c[i].target = target;
		snprintf(c[i].worker, sizeof(c[i].worker), "bench%d/%d", index, i);
		pthread_create(&t[i], NULL, claim_loop, &c[i]);
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		total += c[i].claims;
		rc |= c[i].rc;
	}
	if (write(out, &total, sizeof(total)) != (ssize_t)sizeof(total))
		rc = 1;
	return rc;
}

int main(int argc, char **argv)
{
	struct fg_store *s = NULL;
	struct fg_err err = { 0 };
	struct fg_store_counts counts;
	int procs, threads, jobs, go[2], res[2], failed = 0;
	long claimed = 0;
	double t0, t1;

	if (argc != 5) {
		fprintf(stderr, "usage: bench_claims TARGET JOBS PROCESSES THREADS\n");
		return 2;
	}
	jobs = (int)strtol(argv[2], NULL, 10);
	procs = (int)strtol(argv[3], NULL, 10);
	threads = (int)strtol(argv[4], NULL, 10);
	if (jobs < 1 || procs < 1 || procs > 32 || threads < 1 || threads > 64)
		return 2;
	if (pipe(go) != 0 || pipe(res) != 0)
		return 1;
	/* The instances fork before the parent opens the store: no writer thread crosses a fork. */
	for (int p = 0; p < procs; p++) {
		pid_t pid = fork();

		if (pid == 0) {
			close(go[1]);
			_exit(instance(argv[1], p, threads, go[0], res[1]));
		}
	}
	close(go[0]);
	if (fg_store_open(&s, argv[1], &err) != 0) {
		fprintf(stderr, "bench_claims: %s\n", err.msg);
		return 1;
	}
	for (int i = 0; i < jobs; i++) {
		struct fg_job j;

		if (fg_store_job_enqueue(s, "forge", "{}", NULL, NULL, 0, &j, NULL, &err) != 0) {
			fprintf(stderr, "bench_claims: enqueue: %s\n", err.msg);
			return 1;
		}
		fg_job_release(&j);
	}
	t0 = now_s();
	for (int p = 0; p < procs; p++)
		if (write(go[1], "g", 1) != 1)
			return 1;
	for (int p = 0; p < procs; p++) {
		long n = 0;
		int st = 0;

		if (read(res[0], &n, sizeof(n)) == (ssize_t)sizeof(n))
			claimed += n;
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed = 1;
	}
	t1 = now_s();
	if (fg_store_counts(s, &counts, NULL, &err) != 0) {
		fprintf(stderr, "bench_claims: counts: %s\n", err.msg);
		return 1;
	}
	printf("%s: %d jobs, %d instance(s) x %d claimers: %ld claims in %.2f s, %.0f claims/s (claim + finish,"
	       " one commit each); succeeded %lld, queued %lld, running %lld%s\n",
	       fg_store_backend(s), jobs, procs, threads, claimed, t1 - t0, (double)claimed / (t1 - t0),
	       (long long)counts.jobs[FG_JOB_SUCCEEDED], (long long)counts.jobs[FG_JOB_QUEUED],
	       (long long)counts.jobs[FG_JOB_RUNNING],
	       claimed == jobs && counts.jobs[FG_JOB_SUCCEEDED] == jobs && !failed ? ", each exactly once"
										   : ", MISMATCH");
	fg_store_close(s);
	return claimed == jobs && counts.jobs[FG_JOB_SUCCEEDED] == jobs && !failed ? 0 : 1;
}
