/*
 * cmd_serve.c: `forged serve`: bind, migrate, recover jobs, start workers,
 * listen for other instances' notifications (a PostgreSQL store: jobs
 * enqueued elsewhere wake the workers, data written elsewhere drops the
 * cached fleet health), announce READY=1, then wait for signals: SIGHUP
 * reloads tokens, SIGTERM/SIGINT drain (STOPPING=1, finish or requeue
 * running jobs within drain_seconds) and exit.  STATUS= carries queue
 * figures; WATCHDOG=1 is sent from this loop when the workers and the HTTP
 * side are both healthy.
 */
#include "daemon/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "daemon/config.h"
#include "daemon/log.h"
#include "daemon/notify.h"
#include "daemon/workers.h"
#include "store/store.h"

static int run_serve(int argc, char **argv);

/* How long the drain waits for requests already being handled (an inspection is bounded too). */
#define FG_SERVE_HANDLER_WAIT_SECONDS 10

const struct fg_cmd fg_cmd_serve = {
	.name = "serve",
	.summary = "run the REST API and the forge workers",
	.usage = "forged serve [--config FILE] [--listen ADDR:PORT] [--state-dir DIR] [--workers N]\n"
		 "             [--tokens-file FILE] [--allow-roots DIR]... [--allow-hosts HOST]...\n"
		 "             [--max-body-bytes N] [--queue-cap N] [--drain-seconds N] [--max-attempts N]\n"
		 "             [--collapse-threshold X] [--artifacts-dir DIR] [--etag-ttl-seconds N]\n"
		 "             [--inspect-seconds N] [--forge-target RUNTIME[,RUNTIME...]]\n"
		 "             [--store|--store-url URL] [--lease-seconds N] [--http-threads N]\n"
		 "             [--per-ip-connections N]\n\n"
		 "Serves the /v1 API on 127.0.0.1:8470 by default, with state (SQLite\n"
		 "database, artifacts) in ./forged-state, or $STATE_DIRECTORY under systemd;\n"
		 "artifacts of jobs without an out go to --artifacts-dir (STATE/artifacts).\n"
		 "--store postgres://USER@HOST/DB puts the jobs, artifacts and fleet in\n"
		 "PostgreSQL, shared by every instance of a farm (default sqlite://STATE/forged.db).\n"
		 "Flags override the keys of the JSON config file.  Without --tokens-file the\n"
		 "API needs no token (a warning is logged).  Sources and outputs must lie in\n"
		 "--allow-roots (default: the current folder).  --workers 0 accepts and\n"
		 "queues jobs without running any.\n"
		 "Routes and keys: GET /openapi.json, forged.conf(5), docs/interfaces.md.\n",
	.run = run_serve,
	.options = fg_config_longopts,
};

/* HOST-PID-TIME: unique in a farm, and it says where the instance runs. */
static void make_instance_id(char *buf, size_t len)
{
	struct timespec ts;
	char host[64] = "";

	clock_gettime(CLOCK_REALTIME, &ts);
	if (gethostname(host, sizeof(host) - 1) != 0)
		host[0] = '\0';
	host[strcspn(host, ".")] = '\0';
	/* Label- and name-safe: letters, digits and '-' only. */
	for (char *p = host; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'))
			*p = '-';
	snprintf(buf, len, "%s%s%lx-%lx", host, *host ? "-" : "", (long)getpid(), (long)(ts.tv_sec ^ ts.tv_nsec));
}

struct listen_ctx {
	struct fg_workers *workers;
	struct fg_api *api;
};

/* Another instance enqueued (wake a worker) or wrote what fleet health shows (drop the cached copy). */
static void on_store_event(void *arg, enum fg_store_event ev)
{
	struct listen_ctx *c = arg;

	if (ev == FG_STORE_EV_JOB)
		fg_workers_wake(c->workers);
	else
		fg_api_data_changed(c->api);
}

/* True when path is a folder now (made, or there already). */
static bool make_dir(const char *path)
{
	return mkdir(path, 0750) == 0 || errno == EEXIST;
}

static void status_line(struct fg_store *s, struct fg_workers *w)
{
	struct fg_store_counts c;
	struct fg_err err = { 0 };
	char msg[160];

	if (fg_store_counts(s, &c, NULL, &err) != 0)
		return;
	snprintf(msg, sizeof(msg), "STATUS=queued %lld, running %u, succeeded %lld, failed %lld",
		 (long long)c.jobs[FG_JOB_QUEUED], fg_workers_busy(w), (long long)c.jobs[FG_JOB_SUCCEEDED],
		 (long long)c.jobs[FG_JOB_FAILED]);
	fg_notify(msg);
}

static double seconds_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

/*
 * WATCHDOG=1 only when both sides are healthy: every idle worker turns its
 * loop, and the HTTP side answers GET /livez on a fresh connection (it was
 * tied to the worker loop alone, so an API whose HTTP threads all hung kept
 * being pinged and was never restarted).  A failure is logged when it begins
 * and when it ends.
 */
static void watchdog(struct fg_workers *workers, struct fg_api *api, unsigned long long usec,
		     struct timespec *last_ping, int *pinged, int *healthy)
{
	unsigned check_ms = (unsigned)(usec / 4000);
	const char *why = "a worker is stuck";
	int workers_ok, http_ok = 0;

	if (check_ms > 2000)
		check_ms = 2000;
	if (check_ms < 100)
		check_ms = 100;
	workers_ok = fg_workers_healthy(workers);
	if (workers_ok)
		http_ok = fg_api_self_check(api, check_ms, &why) == 0;
	if (workers_ok && http_ok) {
		fg_notify("WATCHDOG=1");
		clock_gettime(CLOCK_MONOTONIC, last_ping);
		*pinged = 1;
		if (!*healthy)
			fg_log(FG_LOG_NOTICE, "watchdog: healthy again, WATCHDOG=1 resumed");
		*healthy = 1;
		return;
	}
	if (*healthy)
		fg_log(FG_LOG_WARNING, "watchdog: %s; WATCHDOG=1 withheld", why);
	*healthy = 0;
}

static int run_serve(int argc, char **argv)
{
	struct fg_config cfg;
	struct fg_err err = { 0 };
	struct fg_store *store = NULL;
	struct fg_workers *workers = NULL;
	struct fg_api *api = NULL;
	struct fg_api_config acfg;
	struct fg_workers_config wcfg;
	char db[PATH_MAX + 80], cache[PATH_MAX + 16], instance[96], shown[PATH_MAX + 80];
	const char *hosts[FG_CONFIG_MAX_LIST], *roots[FG_CONFIG_MAX_LIST];
	struct fg_store_listener *listener = NULL;
	struct listen_ctx lctx = { NULL, NULL };
	sigset_t sigs;
	struct timespec last_ping = { 0, 0 }, last_status;
	long tick_ms = 5000;
	int requeued = 0, failed = 0, rc = FG_EXIT_OK, pinged = 0, healthy = 1;

	{
		/* --help before anything is read: the options themselves are fg_config_load's. */
		struct fg_args a;

		fg_args_parse(&a, argc, argv, FG_ARGS_GLOBAL_SHORTOPTS, fg_config_longopts(), NULL, NULL);
		if (a.help) {
			fg_cli_print_help(&fg_cmd_serve, stdout);
			return FG_EXIT_OK;
		}
	}
	fg_log_init();
	/*
	 * Request buffers come and go on many threads: without a fixed trim
	 * threshold glibc hands their memory back to the kernel (madvise) and
	 * takes it again (page faults) on almost every request.
	 */
	mallopt(M_TRIM_THRESHOLD, 32 << 20);
	if (fg_config_load(&cfg, argc, argv, &err) != 0)
		return err.code == FG_EUSAGE ? fg_cli_usage_error(&fg_cmd_serve, "%s", err.msg) : fg_cli_fail(&err);
	if (!make_dir(cfg.state_dir)) {
		fg_log(FG_LOG_ERR, "%s: cannot create the state folder: %s", cfg.state_dir, strerror(errno));
		return FG_EXIT_STATE;
	}
	if (!make_dir(cfg.artifacts_dir)) {
		fg_log(FG_LOG_ERR, "%s: cannot create the artifacts folder: %s", cfg.artifacts_dir, strerror(errno));
		return FG_EXIT_STATE;
	}
	{
		/* Absolute from here on: artifact paths are stored and handed to clients. */
		char abs[PATH_MAX];

		if (realpath(cfg.state_dir, abs))
			snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", abs);
		if (realpath(cfg.artifacts_dir, abs))
			snprintf(cfg.artifacts_dir, sizeof(cfg.artifacts_dir), "%s", abs);
	}
	if (cfg.store_url[0])
		snprintf(db, sizeof(db), "%s", cfg.store_url);
	else
		snprintf(db, sizeof(db), "%s/forged.db", cfg.state_dir);
	fg_store_describe(db, shown, sizeof(shown));
	snprintf(cache, sizeof(cache), "%s/cache", cfg.state_dir);
	for (size_t i = 0; i < cfg.n_allow_hosts; i++)
		hosts[i] = cfg.allow_hosts[i];
	for (size_t i = 0; i < cfg.n_allow_roots; i++)
		roots[i] = cfg.allow_roots[i];
	make_instance_id(instance, sizeof(instance));
	{
		/*
		 * The database stays the service's own (SQLite gives its -wal and
		 * -shm files the database's mode), whatever the umask: under the
		 * unit, UMask=0027 makes artifacts readable by the group forged,
		 * which has no business in the job database.
		 */
		const char *file = fg_store_sqlite_path(db);
		int fd = file ? open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0600) : -1;

		if (fd >= 0)
			close(fd);
	}
	if (fg_store_open(&store, db, &err) != 0) {
		fg_log(FG_LOG_ERR, "%s", err.msg);
		return fg_err_exit_code(err.code); /* 3 for our own database (FG_ESTATE, FG_ENOSPC) */
	}
	if (fg_store_jobs_recover(store, instance, FG_WORKERS_STALE_SECONDS, cfg.max_attempts, &requeued, &failed,
				  &err) != 0) {
		fg_log(FG_LOG_ERR, "recovering jobs: %s", err.msg);
		fg_store_close(store);
		return FG_EXIT_INTERNAL;
	}
	if (requeued || failed)
		fg_log(FG_LOG_NOTICE, "recovered jobs of a previous instance: %d requeued, %d failed for good",
		       requeued, failed);
	/* Signals go to this thread only: block them before any thread starts. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	memset(&wcfg, 0, sizeof(wcfg));
	wcfg.n = cfg.workers;
	wcfg.store = db;
	wcfg.lease_seconds = cfg.lease_seconds;
	wcfg.max_attempts = cfg.max_attempts;
	wcfg.allow_roots = roots;
	wcfg.n_allow_roots = cfg.n_allow_roots;
	wcfg.artifacts_dir = cfg.artifacts_dir;
	wcfg.etag_ttl_seconds = cfg.etag_ttl_seconds;
	wcfg.instance_id = instance;
	wcfg.watchdog_usec = fg_notify_watchdog_usec();
	/* The main loop turns at least three times per watchdog interval. */
	if (wcfg.watchdog_usec && (long)(wcfg.watchdog_usec / 3000) < tick_ms)
		tick_ms = wcfg.watchdog_usec / 3000 > 100 ? (long)(wcfg.watchdog_usec / 3000) : 100;
	wcfg.cache_dir = cache;
	wcfg.allow_hosts = hosts;
	wcfg.n_allow_hosts = cfg.n_allow_hosts;

	memset(&acfg, 0, sizeof(acfg));
	acfg.listen_addr = cfg.listen_addr;
	acfg.port = cfg.port;
	acfg.db_path = db;
	acfg.instance_id = instance;
	acfg.state_dir = cfg.state_dir;
	acfg.tokens_file = cfg.tokens_file[0] ? cfg.tokens_file : NULL;
	for (size_t i = 0; i < cfg.n_allow_roots; i++)
		acfg.allow_roots[acfg.n_allow_roots++] = cfg.allow_roots[i];
	for (size_t i = 0; i < cfg.n_allow_hosts; i++)
		acfg.allow_hosts[acfg.n_allow_hosts++] = cfg.allow_hosts[i];
	acfg.cache_dir = cache;
	acfg.etag_ttl_seconds = cfg.etag_ttl_seconds;
	acfg.max_body_bytes = cfg.max_body_bytes;
	/* connection limits, timeout and memory limit: 0, the server's FG_API_*_DEFAULT. */
	acfg.queue_cap = cfg.queue_cap;
	/* A write holds its handler thread until its group commit: more of them, bigger commits. */
	acfg.threads = cfg.http_threads;
	/* Behind a proxy every client has its address: the operator raises this. */
	acfg.per_ip_limit = cfg.per_ip_connections;
	acfg.collapse_threshold = cfg.collapse_threshold;
	acfg.artifacts_dir = cfg.artifacts_dir;
	acfg.inspect_seconds = cfg.inspect_seconds;
	acfg.forge_target = cfg.forge_target[0] ? cfg.forge_target : NULL;
	acfg.log = fg_log;
	acfg.job_enqueued = fg_workers_wake;
	acfg.workers_alive = fg_workers_alive;

	if (fg_workers_start(&workers, &wcfg, &err) != 0) {
		fg_log(FG_LOG_ERR, "%s", err.msg);
		fg_store_close(store);
		return FG_EXIT_INTERNAL;
	}
	acfg.ctx = workers;
	if (fg_api_start(&api, &acfg, &err) != 0) {
		fg_log(FG_LOG_ERR, "%s", err.msg);
		fg_workers_stop(workers, 0);
		fg_store_close(store);
		/* 2 for an address it cannot resolve or listen on, or a bad tokens file; 3 when memory or a thread fails. */
		return fg_err_exit_code(err.code);
	}
	fg_workers_set_api(workers, api);
	lctx.workers = workers;
	lctx.api = api;
	if (fg_store_listen(&listener, db, on_store_event, &lctx, &err) != 0)
		fg_log(FG_LOG_WARNING, "no notifications from other instances (%s): workers poll every second", err.msg);
	if (!acfg.tokens_file)
		fg_log(FG_LOG_WARNING, "no tokens_file: the API accepts requests without a token");
	/* Tests start the server on port 0 and read the port from this line. */
	fg_log(FG_LOG_NOTICE, "listening on %s port %u, state %s, %u workers, instance %s, store %s", cfg.listen_addr,
	       fg_api_port(api), cfg.state_dir, cfg.workers, instance, shown);
	fg_notify("READY=1");
	status_line(store, workers);
	clock_gettime(CLOCK_MONOTONIC, &last_status);
	for (;;) {
		struct timespec tick = { tick_ms / 1000, (tick_ms % 1000) * 1000000L };
		int sig = sigtimedwait(&sigs, NULL, &tick);

		if (sig == SIGHUP) {
			/* sd_notify(3): RELOADING=1, then READY=1 once done. */
			fg_notify("RELOADING=1");
			if (fg_api_reload_tokens(api, &err) != 0)
				fg_log(FG_LOG_ERR, "reloading tokens: %s (the old tokens stay)", err.msg);
			else
				fg_log(FG_LOG_NOTICE, "tokens reloaded");
			fg_notify("READY=1");
		} else if (sig == SIGTERM || sig == SIGINT) {
			fg_log(FG_LOG_NOTICE, "%s: draining (up to %u s)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
			       cfg.drain_seconds);
			fg_notify("STOPPING=1");
			break;
		}
		if (wcfg.watchdog_usec && (!pinged || seconds_since(&last_ping) >= (double)wcfg.watchdog_usec / 3e6))
			watchdog(workers, api, wcfg.watchdog_usec, &last_ping, &pinged, &healthy);
		if (seconds_since(&last_status) >= 5.0) {
			status_line(store, workers);
			clock_gettime(CLOCK_MONOTONIC, &last_status);
		}
	}
	fg_store_listener_stop(listener);
	/*
	 * The API answers 503 draining while the workers finish or requeue their
	 * jobs, and is freed only after they have stopped: a job ending in the
	 * drain still calls fg_api_data_changed and fg_api_job_finished.
	 */
	fg_api_drain(api, FG_SERVE_HANDLER_WAIT_SECONDS);
	fg_workers_stop(workers, cfg.drain_seconds);
	fg_api_stop(api);
	fg_store_close(store);
	fg_log(FG_LOG_NOTICE, "stopped");
	return rc;
}
