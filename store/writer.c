/*
 * writer.c: group commit.  One writer thread per process and database owns
 * the write connection; every write of the process (an enqueue, a claim, a
 * verification, ...) is queued to it as a function and its caller waits.
 * The thread takes everything queued (up to BATCH_MAX writes), runs each
 * inside a savepoint of one transaction, commits once, and only then wakes
 * the callers: a client hears 201 only after the fsync (SQLite, WAL with
 * synchronous=FULL) or the WAL flush (PostgreSQL) that covers its write.
 * While a batch commits, the next one queues, so under load one flush
 * serves many writes; idle, a write waits for nothing but its own commit.
 * A caller that must not block a thread (the API's verification posts)
 * queues with fg_store_write_async and hears the outcome from a callback
 * the writer runs after the commit.
 *
 * Failures stay per write: a write that fails rolls back its savepoint and
 * the others commit.  When the transaction itself is lost (SQLite rolls it
 * back under a full disk or an I/O error; the PostgreSQL connection drops)
 * or the commit fails, each write of the batch is run again in a
 * transaction of its own, so each caller gets its own answer.
 *
 * Writes of this process never wait for each other's locks (no busy-wait
 * between them); a lock held by another process is waited for up to the
 * smallest budget of the batch (fg_store's busy_ms: 5 s, 0.5 s for the
 * readiness probe), then the writes whose budget is spent fail and the
 * others wait on.
 *
 * Checkpoints (SQLite) run on a second thread with its own connection, off
 * the commit path: a PASSIVE checkpoint when the WAL reaches
 * CHECKPOINT_FRAMES frames (the writer connection's WAL hook) or a second
 * after the last one if anything was committed since.
 */
#include "store/internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BATCH_MAX 256
#define CHECKPOINT_EVERY_MS 1000

struct request {
	fg_write_fn fn;
	void *arg;
	struct fg_err *err;
	int rc;
	int done;
	fg_write_done_fn on_done;      /* fg_store_write_async: called instead of cond; the request is the writer's */
	void *ctx;
	struct timespec deadline;      /* CLOCK_MONOTONIC: the lock-wait budget ends */
	pthread_cond_t cond;           /* signalled when done */
	struct request *next;
};

struct fg_writer {
	const struct fg_store_ops *ops;
	char *target;
	int refs;
	pid_t pid;                     /* a forked child starts writers of its own */
	struct fg_writer *next;        /* the registry */

	pthread_mutex_t lock;
	pthread_cond_t work;
	struct request *head, *tail;
	int stopping;
	pthread_t thread;
	struct fg_store *ws;           /* the writer's connection */

	/* checkpoints */
	pthread_mutex_t ck_lock;
	pthread_cond_t ck_cond;
	int ck_frames;                 /* the WAL is this long: checkpoint now */
	int ck_commits;                /* commits since the last checkpoint */
	int ck_stopping;
	int ck_started;
	pthread_t ck_thread;
	struct fg_store *cs;           /* the checkpoint thread's connection */
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fg_writer *registry;

static void deadline_in(struct timespec *t, long long ms)
{
	clock_gettime(CLOCK_MONOTONIC, t);
	t->tv_sec += (time_t)(ms / 1000);
	t->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t->tv_nsec >= 1000000000L) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000L;
	}
}

static long long ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long long)(now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000L;
}

static long long ms_left(const struct timespec *t)
{
	struct timespec now;
	long long ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (long long)(t->tv_sec - now.tv_sec) * 1000 + (t->tv_nsec - now.tv_nsec) / 1000000L;
	return ms > 0 ? ms : 0;
}

/* ---- running writes ---- */

/* One write in a transaction of its own (after a batch could not commit). */
static void run_alone(struct fg_writer *w, struct request *r)
{
	const struct fg_store_ops *ops = w->ops;
	struct fg_store *ws = w->ws;
	int rc;

	ws->busy_ms = ms_left(&r->deadline);
	rc = ops->tx_begin(ws, r->err);
	if (rc) {
		r->rc = rc;
		return;
	}
	ws->in_batch = 1;
	rc = r->fn(ws, r->arg, r->err);
	ws->in_batch = 0;
	if (rc)
		ops->tx_rollback(ws);
	else
		rc = ops->tx_commit(ws, r->err);
	r->rc = rc;
}

/* Fail with err's message every request of batch whose budget is spent; returns how many remain. */
static size_t drop_expired(struct request **batch, size_t n, int rc, const struct fg_err *err)
{
	size_t kept = 0;

	for (size_t i = 0; i < n; i++) {
		if (ms_left(&batch[i]->deadline) > 0) {
			batch[kept++] = batch[i];
			continue;
		}
		batch[i]->rc = rc;
		if (batch[i]->err && err)
			*batch[i]->err = *err;
	}
	return kept;
}

static void run_batch(struct fg_writer *w, struct request **all, size_t n_all)
{
	const struct fg_store_ops *ops = w->ops;
	struct fg_store *ws = w->ws;
	struct request *batch[BATCH_MAX];
	size_t n = n_all;
	int broken = 0, rc;

	/* One write alone needs no savepoint: its transaction is its own. */
	if (n_all == 1) {
		run_alone(w, all[0]);
		return;
	}
	memcpy(batch, all, n * sizeof(*batch));
	for (;;) {
		struct fg_err berr = { 0 };
		struct timespec t0;
		long long budget = -1;

		for (size_t i = 0; i < n; i++) {
			long long left = ms_left(&batch[i]->deadline);

			if (budget < 0 || left < budget)
				budget = left;
		}
		ws->busy_ms = budget;
		deadline_in(&t0, 0);
		rc = ops->tx_begin(ws, &berr);
		if (!rc)
			break;
		if (ms_since(&t0) + 5 >= budget) {
			/* Another process held the lock past someone's budget: those fail, the others wait on. */
			n = drop_expired(batch, n, rc, &berr);
			if (n)
				continue;
			return;
		}
		/* Not a lock wait: the database itself failed, for everyone. */
		for (size_t i = 0; i < n; i++) {
			batch[i]->rc = rc;
			if (batch[i]->err)
				*batch[i]->err = berr;
		}
		return;
	}
	ws->in_batch = 1;
	for (size_t i = 0; i < n && !broken; i++) {
		struct request *r = batch[i];

		rc = ops->sp_begin(ws, r->err);
		if (!rc) {
			rc = r->fn(ws, r->arg, r->err);
			if (rc) {
				if (ops->tx_lost(ws))
					broken = 1;
				else
					ops->sp_rollback(ws);
			} else {
				rc = ops->sp_release(ws, r->err);
			}
		}
		r->rc = rc;
		if (rc && ops->tx_lost(ws))
			broken = 1;
	}
	ws->in_batch = 0;
	if (!broken) {
		struct fg_err cerr = { 0 };

		rc = ops->tx_commit(ws, &cerr);
		if (!rc)
			return;
		if (n == 1) {
			batch[0]->rc = rc;
			if (batch[0]->err)
				*batch[0]->err = cerr;
			return;
		}
	} else {
		ops->tx_rollback(ws);
	}
	/* The transaction is gone: every write again, alone, so each gets its own answer. */
	for (size_t i = 0; i < n; i++)
		run_alone(w, batch[i]);
}

static void *writer_main(void *arg)
{
	struct fg_writer *w = arg;
	struct request *batch[BATCH_MAX];

	pthread_mutex_lock(&w->lock);
	for (;;) {
		size_t n = 0;

		while (!w->head && !w->stopping)
			pthread_cond_wait(&w->work, &w->lock);
		if (!w->head)
			break;
		while (w->head && n < BATCH_MAX) {
			batch[n++] = w->head;
			w->head = w->head->next;
		}
		if (!w->head)
			w->tail = NULL;
		pthread_mutex_unlock(&w->lock);
		run_batch(w, batch, n);
		/* Writes queued without waiting hear it here, outside the lock (their callbacks take locks of their own). */
		for (size_t i = 0; i < n; i++) {
			struct request *r = batch[i];

			if (r->on_done) {
				fg_write_done_fn on_done = r->on_done;
				void *ctx = r->ctx;
				int rc = r->rc;

				batch[i] = NULL;
				free(r);
				on_done(ctx, rc);
			}
		}
		pthread_mutex_lock(&w->lock);
		for (size_t i = 0; i < n; i++) {
			if (!batch[i])
				continue;
			batch[i]->done = 1;
			pthread_cond_signal(&batch[i]->cond);
		}
		if (w->ops->checkpoint) {
			pthread_mutex_lock(&w->ck_lock);
			w->ck_commits++;
			if (w->ck_frames)
				pthread_cond_signal(&w->ck_cond);
			pthread_mutex_unlock(&w->ck_lock);
		}
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* ---- checkpoints ---- */

void fg_writer_want_checkpoint(struct fg_writer *w, int frames)
{
	if (!w || frames <= 0)
		return;
	/* Called from the writer thread inside its commit; the signal follows the batch (writer_main). */
	pthread_mutex_lock(&w->ck_lock);
	w->ck_frames = frames;
	pthread_mutex_unlock(&w->ck_lock);
}

static void *checkpoint_main(void *arg)
{
	struct fg_writer *w = arg;
	struct timespec last;

	clock_gettime(CLOCK_MONOTONIC, &last);
	pthread_mutex_lock(&w->ck_lock);
	while (!w->ck_stopping) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1;
		if (!w->ck_frames)
			pthread_cond_timedwait(&w->ck_cond, &w->ck_lock, &until);
		if (w->ck_stopping)
			break;
		/* Due: the WAL is long, or something was committed and the last checkpoint is a second old. */
		if (!w->ck_frames && (!w->ck_commits || ms_since(&last) < CHECKPOINT_EVERY_MS))
			continue;
		w->ck_frames = 0;
		w->ck_commits = 0;
		pthread_mutex_unlock(&w->ck_lock);
		if (!w->cs) {
			struct fg_err err = { 0 };

			w->cs = fg_store_new_conn(w->ops, w->target, &err);
		}
		if (w->cs) {
			struct fg_err err = { 0 };

			(void)w->ops->checkpoint(w->cs, &err);
		}
		clock_gettime(CLOCK_MONOTONIC, &last);
		pthread_mutex_lock(&w->ck_lock);
	}
	pthread_mutex_unlock(&w->ck_lock);
	return NULL;
}

/* ---- the registry ---- */

static void writer_free(struct fg_writer *w)
{
	if (w->ck_started) {
		pthread_mutex_lock(&w->ck_lock);
		w->ck_stopping = 1;
		pthread_cond_signal(&w->ck_cond);
		pthread_mutex_unlock(&w->ck_lock);
		pthread_join(w->ck_thread, NULL);
	}
	fg_store_free_conn(w->cs);
	fg_store_free_conn(w->ws);
	pthread_cond_destroy(&w->ck_cond);
	pthread_mutex_destroy(&w->ck_lock);
	pthread_cond_destroy(&w->work);
	pthread_mutex_destroy(&w->lock);
	free(w->target);
	free(w);
}

struct fg_writer *fg_writer_get(const struct fg_store_ops *ops, const char *target, struct fg_err *err)
{
	struct fg_writer *w;
	pid_t pid = getpid();

	pthread_mutex_lock(&registry_lock);
	for (w = registry; w; w = w->next) {
		if (w->ops == ops && w->pid == pid && strcmp(w->target, target) == 0) {
			w->refs++;
			pthread_mutex_unlock(&registry_lock);
			return w;
		}
	}
	w = calloc(1, sizeof(*w));
	if (!w || !(w->target = strdup(target))) {
		free(w);
		pthread_mutex_unlock(&registry_lock);
		fg_err_set(err, FG_ENOMEM, "starting the store's writer: out of memory");
		return NULL;
	}
	w->ops = ops;
	w->refs = 1;
	w->pid = pid;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->work, NULL);
	pthread_mutex_init(&w->ck_lock, NULL);
	pthread_cond_init(&w->ck_cond, NULL);
	w->ws = fg_store_new_conn(ops, target, err);
	if (!w->ws) {
		writer_free(w);
		pthread_mutex_unlock(&registry_lock);
		return NULL;
	}
	if (ops->writer_attach)
		ops->writer_attach(w->ws, w);
	if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
		writer_free(w);
		pthread_mutex_unlock(&registry_lock);
		fg_err_set(err, FG_ENOMEM, "starting the store's writer: %s", strerror(errno));
		return NULL;
	}
	if (ops->checkpoint && pthread_create(&w->ck_thread, NULL, checkpoint_main, w) == 0)
		w->ck_started = 1;
	w->next = registry;
	registry = w;
	pthread_mutex_unlock(&registry_lock);
	return w;
}

void fg_writer_put(struct fg_writer *w)
{
	struct fg_writer **p;

	if (!w)
		return;
	pthread_mutex_lock(&registry_lock);
	if (--w->refs > 0) {
		pthread_mutex_unlock(&registry_lock);
		return;
	}
	for (p = &registry; *p; p = &(*p)->next) {
		if (*p == w) {
			*p = w->next;
			break;
		}
	}
	pthread_mutex_unlock(&registry_lock);
	pthread_mutex_lock(&w->lock);
	w->stopping = 1;
	pthread_cond_signal(&w->work);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	writer_free(w);
}

/* Queue r at the tail and wake the writer; under w->lock. */
static void enqueue(struct fg_writer *w, struct request *r)
{
	if (w->tail)
		w->tail->next = r;
	else
		w->head = r;
	w->tail = r;
	pthread_cond_signal(&w->work);
}

int fg_store_write(struct fg_store *s, fg_write_fn fn, void *arg, struct fg_err *err)
{
	struct fg_writer *w = s->writer;
	struct request r;
	int rc;

	if (!w) {
		/* The writer's own connection (or one made without a writer): a transaction of its own. */
		rc = s->ops->tx_begin(s, err);
		if (rc)
			return rc;
		s->in_batch = 1;
		rc = fn(s, arg, err);
		s->in_batch = 0;
		if (rc)
			s->ops->tx_rollback(s);
		else
			rc = s->ops->tx_commit(s, err);
		return rc;
	}
	memset(&r, 0, sizeof(r));
	r.fn = fn;
	r.arg = arg;
	r.err = err;
	deadline_in(&r.deadline, s->busy_ms);
	pthread_cond_init(&r.cond, NULL);
	pthread_mutex_lock(&w->lock);
	enqueue(w, &r);
	while (!r.done)
		pthread_cond_wait(&r.cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
	pthread_cond_destroy(&r.cond);
	return r.rc;
}

int fg_store_write_async(struct fg_store *s, fg_write_fn fn, void *arg, struct fg_err *err, fg_write_done_fn done,
			 void *ctx)
{
	struct fg_writer *w = s->writer;
	struct request *r;

	if (!w) {
		done(ctx, fg_store_write(s, fn, arg, err));
		return 0;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return fg_err_set(err, FG_ENOMEM, "queueing a write: out of memory");
	r->fn = fn;
	r->arg = arg;
	r->err = err;
	r->on_done = done;
	r->ctx = ctx;
	deadline_in(&r->deadline, s->busy_ms);
	pthread_mutex_lock(&w->lock);
	enqueue(w, r);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

struct fg_store *fg_store_writer_conn(struct fg_store *s)
{
	return s && s->writer ? s->writer->ws : NULL;
}
