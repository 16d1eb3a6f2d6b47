/*
 * sha256.c: SHA-256 helpers over libcrypto's EVP interface.
 */
#include "forge/core/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK (1u << 20)

struct fg_sha256 {
	EVP_MD_CTX *ctx;
};

struct fg_sha256 *fg_sha256_new(void)
{
	struct fg_sha256 *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
		fg_sha256_free(h);
		return NULL;
	}
	return h;
}

void fg_sha256_update(struct fg_sha256 *h, const void *data, size_t len)
{
	EVP_DigestUpdate(h->ctx, data, len);
}

static void to_hex(const unsigned char *md, unsigned n, char *hex)
{
	static const char digits[] = "0123456789abcdef";

	for (unsigned i = 0; i < n; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[2 * n] = '\0';
}

void fg_sha256_final_hex(struct fg_sha256 *h, char hex[FG_SHA256_HEX])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;

	EVP_DigestFinal_ex(h->ctx, md, &n);
	to_hex(md, n, hex);
}

void fg_sha256_free(struct fg_sha256 *h)
{
	if (!h)
		return;
	EVP_MD_CTX_free(h->ctx);
	free(h);
}

void fg_sha256_buf(const void *data, size_t len, char hex[FG_SHA256_HEX])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;

	EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
	to_hex(md, n, hex);
}

int fg_sha256_file(const char *path, char hex[FG_SHA256_HEX], struct fg_err *err)
{
	struct fg_sha256 *h = NULL;
	unsigned char *buf = NULL;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fg_err_set(err, FG_EINPUT, "%s: cannot open to hash: %s", path, strerror(errno));
	h = fg_sha256_new();
	buf = malloc(READ_CHUNK);
	if (!h || !buf) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory hashing %s", path);
		goto out;
	}
	for (;;) {
		ssize_t got = read(fd, buf, READ_CHUNK);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			rc = fg_err_set(err, FG_EINPUT, "%s: read failed while hashing: %s", path, strerror(errno));
			goto out;
		}
		if (got == 0)
			break;
		fg_sha256_update(h, buf, (size_t)got);
	}
	fg_sha256_final_hex(h, hex);
out:
	fg_sha256_free(h);
	free(buf);
	close(fd);
	return rc;
}

/* ---- the hash pipe (sha256.h) ---- */

struct pipe_chunk {
	const void *data;
	size_t len;
};

struct pipe_worker {
	struct fg_sha256_pipe *p;
	struct fg_sha256 *h;
	unsigned long long done;      /* chunks this hash has taken */
	pthread_t tid;
	int started;
	int failed;                   /* the guard stopped a chunk: hashing no more */
};

struct fg_sha256_pipe {
	pthread_mutex_t lock;
	pthread_cond_t pushed_cond;   /* a chunk was pushed, or the pipe stops */
	pthread_cond_t done_cond;     /* a worker took a chunk */
	struct pipe_chunk ring[FG_SHA256_PIPE_DEPTH];
	unsigned long long pushed;
	int stopping;
	int inline_hash;              /* no threads: the pusher hashes */
	fg_sha256_guard guard;        /* NULL: updates run bare */
	size_t n;
	struct pipe_worker *w;
};

struct guarded_update {
	struct fg_sha256 *h;
	const void *data;
	size_t len;
};

static int run_update(void *ctx, struct fg_err *err)
{
	const struct guarded_update *u = ctx;

	(void)err;
	fg_sha256_update(u->h, u->data, u->len);
	return 0;
}

/* Hash one chunk into w's hash, under the pipe's guard; a stopped chunk fails w for good. */
static void worker_update(struct pipe_worker *w, const void *data, size_t len)
{
	struct guarded_update u = { w->h, data, len };
	struct fg_err err = { 0 };

	if (w->failed)
		return;
	if (!w->p->guard)
		fg_sha256_update(w->h, data, len);
	else if (w->p->guard(run_update, &u, "a chunk being hashed", &err) != 0)
		w->failed = 1;
}

/* The chunks every worker has taken (the lock held). */
static unsigned long long pipe_taken(const struct fg_sha256_pipe *p)
{
	unsigned long long m = p->pushed;

	for (size_t i = 0; i < p->n; i++)
		if (p->w[i].done < m)
			m = p->w[i].done;
	return m;
}

static void *pipe_main(void *arg)
{
	struct pipe_worker *w = arg;
	struct fg_sha256_pipe *p = w->p;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct pipe_chunk c;

		while (w->done == p->pushed && !p->stopping)
			pthread_cond_wait(&p->pushed_cond, &p->lock);
		if (w->done == p->pushed)
			break;
		c = p->ring[w->done % FG_SHA256_PIPE_DEPTH];
		pthread_mutex_unlock(&p->lock);
		worker_update(w, c.data, c.len);
		pthread_mutex_lock(&p->lock);
		w->done++;
		pthread_cond_broadcast(&p->done_cond);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

struct fg_sha256_pipe *fg_sha256_pipe_start(struct fg_sha256 *const *hashes, size_t n)
{
	return fg_sha256_pipe_start_guarded(hashes, n, NULL);
}

struct fg_sha256_pipe *fg_sha256_pipe_start_guarded(struct fg_sha256 *const *hashes, size_t n,
						     fg_sha256_guard guard)
{
	struct fg_sha256_pipe *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->guard = guard;
	p->w = calloc(n ? n : 1, sizeof(*p->w));
	if (!p->w) {
		free(p);
		return NULL;
	}
	p->n = n;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->pushed_cond, NULL);
	pthread_cond_init(&p->done_cond, NULL);
	for (size_t i = 0; i < n; i++) {
		p->w[i].p = p;
		p->w[i].h = hashes[i];
	}
	for (size_t i = 0; i < n && !p->inline_hash; i++) {
		if (pthread_create(&p->w[i].tid, NULL, pipe_main, &p->w[i]) == 0)
			p->w[i].started = 1;
		else
			p->inline_hash = 1;
	}
	if (p->inline_hash) {
		/* Stop the threads that did start; the pusher hashes everything itself. */
		pthread_mutex_lock(&p->lock);
		p->stopping = 1;
		pthread_cond_broadcast(&p->pushed_cond);
		pthread_mutex_unlock(&p->lock);
		for (size_t i = 0; i < n; i++)
			if (p->w[i].started)
				pthread_join(p->w[i].tid, NULL);
		for (size_t i = 0; i < n; i++)
			p->w[i].started = 0;
	}
	return p;
}

unsigned long long fg_sha256_pipe_push(struct fg_sha256_pipe *p, const void *data, size_t len)
{
	unsigned long long ticket;

	if (p->inline_hash || !p->n) {
		for (size_t i = 0; i < p->n; i++)
			worker_update(&p->w[i], data, len);
		return ++p->pushed;
	}
	pthread_mutex_lock(&p->lock);
	while (p->pushed - pipe_taken(p) >= FG_SHA256_PIPE_DEPTH)
		pthread_cond_wait(&p->done_cond, &p->lock);
	p->ring[p->pushed % FG_SHA256_PIPE_DEPTH] = (struct pipe_chunk){ data, len };
	ticket = ++p->pushed;
	pthread_cond_broadcast(&p->pushed_cond);
	pthread_mutex_unlock(&p->lock);
	return ticket;
}

void fg_sha256_pipe_wait(struct fg_sha256_pipe *p, unsigned long long ticket)
{
	if (p->inline_hash || !p->n)
		return;
	pthread_mutex_lock(&p->lock);
	while (pipe_taken(p) < ticket)
		pthread_cond_wait(&p->done_cond, &p->lock);
	pthread_mutex_unlock(&p->lock);
}

int fg_sha256_pipe_finish(struct fg_sha256_pipe *p)
{
	int failed = 0;

	if (!p)
		return 0;
	pthread_mutex_lock(&p->lock);
	p->stopping = 1;
	pthread_cond_broadcast(&p->pushed_cond);
	pthread_mutex_unlock(&p->lock);
	for (size_t i = 0; i < p->n; i++)
		if (p->w[i].started)
			pthread_join(p->w[i].tid, NULL);
	for (size_t i = 0; i < p->n; i++)
		failed |= p->w[i].failed;
	pthread_cond_destroy(&p->pushed_cond);
	pthread_cond_destroy(&p->done_cond);
	pthread_mutex_destroy(&p->lock);
	free(p->w);
	free(p);
	return failed ? FG_EINPUT : 0;
}
