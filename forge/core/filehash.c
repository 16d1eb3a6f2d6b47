/*
 * filehash.c: file SHA-256 remembered per file version (filehash.h).
 */
#include "forge/core/filehash.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "forge/core/fs.h"
#include "forge/core/str.h"

#define CHUNK ((size_t)4 << 20)
#define N_BUFS 4
#define ENTRY_MAX 512

/* The key text of a file version. */
static void key_text(const struct stat *st, char *buf, size_t len)
{
	snprintf(buf, len, "forged-filehash-v1 dev=%llu ino=%llu size=%llu mtime_ns=%lld",
		 (unsigned long long)st->st_dev, (unsigned long long)st->st_ino, (unsigned long long)st->st_size,
		 (long long)st->st_mtim.tv_sec * 1000000000ll + st->st_mtim.tv_nsec);
}

/* CACHE/v1/hashes/<sha256(key)> into path; 1 when it fits. */
static int entry_path(const char *cache_dir, const char *key, char *path, size_t len)
{
	char name[FG_SHA256_HEX];
	int n;

	fg_sha256_buf(key, strlen(key), name);
	n = snprintf(path, len, "%s/v1/hashes/%s", cache_dir, name);
	return n > 0 && (size_t)n < len;
}

/* 1 with hex filled when the entry of st is there and whole. */
static int lookup(const char *cache_dir, const struct stat *st, char hex[FG_SHA256_HEX])
{
	char key[256], path[PATH_MAX], text[ENTRY_MAX + 1];
	const char *v;
	ssize_t got;
	int fd;

	if (!cache_dir || !*cache_dir)
		return 0;
	key_text(st, key, sizeof(key));
	if (!entry_path(cache_dir, key, path, sizeof(path)))
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	got = read(fd, text, ENTRY_MAX);
	close(fd);
	if (got <= 0)
		return 0;
	text[got] = '\0';
	/* "KEY\nsha256=HEX\n": the key must be this file's (a name collision is not) */
	if (strncmp(text, key, strlen(key)) != 0 || text[strlen(key)] != '\n')
		return 0;
	v = text + strlen(key) + 1;
	if (strncmp(v, "sha256=", 7) != 0 || strlen(v) < 7 + 64 || fg_lower_hex_span(v + 7) < 64)
		return 0;
	memcpy(hex, v + 7, 64);
	hex[64] = '\0';
	return 1;
}

static void remember(const char *cache_dir, const struct stat *st, const char hex[FG_SHA256_HEX])
{
	char key[256], path[PATH_MAX], dir[PATH_MAX], text[ENTRY_MAX];
	int n;

	if (!cache_dir || !*cache_dir)
		return;
	key_text(st, key, sizeof(key));
	if (!entry_path(cache_dir, key, path, sizeof(path)))
		return;
	n = snprintf(dir, sizeof(dir), "%s/v1/hashes", cache_dir);
	if (n <= 0 || (size_t)n >= sizeof(dir) || fg_fs_mkdir_p(dir, 0755) != 0)
		return;
	n = snprintf(text, sizeof(text), "%s\nsha256=%s\n", key, hex);
	if (n > 0 && (size_t)n < sizeof(text))
		(void)fg_fs_write_atomic(path, text, (size_t)n, NULL); /* best effort: a miss hashes again */
}

int fg_filehash_cached(const char *cache_dir, const char *path, char hex[FG_SHA256_HEX], uint64_t *size)
{
	struct stat st;

	if (size)
		*size = 0;
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	if (size)
		*size = (uint64_t)st.st_size;
	return lookup(cache_dir, &st, hex);
}

static int same_version(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (long long)t.tv_sec * 1000000000ll + t.tv_nsec;
}

/* Read fd to its end into sha (on a pipe thread, reading the next chunk meanwhile). */
static int hash_fd(int fd, const char *path, uint64_t size, struct fg_sha256 *sha, uint64_t *read_bytes,
		   int (*progress)(void *ctx, uint64_t done, uint64_t total), void *progress_ctx,
		   struct fg_err *err)
{
	struct fg_sha256_pipe *pipe = fg_sha256_pipe_start(&sha, 1);
	uint8_t *buf[N_BUFS] = { 0 };
	unsigned long long ticket[N_BUFS] = { 0 };
	uint64_t done = 0;
	int rc = 0;

	if (!pipe)
		return fg_err_set(err, FG_ENOMEM, "out of memory hashing %s", path);
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	for (unsigned k = 0;; k = (k + 1) % N_BUFS) {
		ssize_t got;

		if (!buf[k] && !(buf[k] = malloc(CHUNK))) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory hashing %s", path);
			break;
		}
		fg_sha256_pipe_wait(pipe, ticket[k]);
		do
			got = read(fd, buf[k], CHUNK);
		while (got < 0 && errno == EINTR);
		if (got < 0) {
			rc = fg_err_set(err, FG_EINPUT, "%s: read failed while hashing: %s", path, strerror(errno));
			break;
		}
		if (got == 0)
			break;
		ticket[k] = fg_sha256_pipe_push(pipe, buf[k], (size_t)got);
		done += (uint64_t)got;
		if (progress && progress(progress_ctx, done, size)) {
			rc = fg_err_set(err, FG_ECANCELLED, "hashing %s: stopped on request", path);
			break;
		}
	}
	fg_sha256_pipe_finish(pipe);
	for (unsigned k = 0; k < N_BUFS; k++)
		free(buf[k]);
	if (read_bytes)
		*read_bytes = done;
	return rc;
}

int fg_filehash_fd(const char *cache_dir, int fd, const char *label, char hex[FG_SHA256_HEX], uint64_t *read_bytes,
		   int (*progress)(void *ctx, uint64_t done, uint64_t total), void *progress_ctx,
		   struct fg_err *err)
{
	struct fg_sha256 *sha = NULL;
	struct stat before, after;
	long long started;
	int rc;

	if (read_bytes)
		*read_bytes = 0;
	if (fstat(fd, &before) != 0 || !S_ISREG(before.st_mode))
		return fg_err_set(err, FG_EINPUT, "%s: not a regular file", label);
	if (lookup(cache_dir, &before, hex))
		return 0;
	if (lseek(fd, 0, SEEK_SET) < 0)
		return fg_err_set(err, FG_EINPUT, "%s: cannot read from its start: %s", label, strerror(errno));
	started = now_ns();
	if (!(sha = fg_sha256_new()))
		return fg_err_set(err, FG_ENOMEM, "out of memory hashing %s", label);
	rc = hash_fd(fd, label, (uint64_t)before.st_size, sha, read_bytes, progress, progress_ctx, err);
	if (!rc) {
		fg_sha256_final_hex(sha, hex);
		if (fstat(fd, &after) == 0 && same_version(&before, &after) &&
		    (long long)before.st_mtim.tv_sec * 1000000000ll + before.st_mtim.tv_nsec <
			    started - FG_FILEHASH_RACY_NS)
			remember(cache_dir, &before, hex);
	}
	fg_sha256_free(sha);
	return rc;
}

int fg_filehash(const char *cache_dir, const char *path, char hex[FG_SHA256_HEX], uint64_t *read_bytes,
		int (*progress)(void *ctx, uint64_t done, uint64_t total), void *progress_ctx,
		struct fg_err *err)
{
	int fd, rc;

	if (read_bytes)
		*read_bytes = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return fg_err_set(err, FG_EINPUT, "%s: cannot open to hash: %s", path, strerror(errno));
	rc = fg_filehash_fd(cache_dir, fd, path, hex, read_bytes, progress, progress_ctx, err);
	close(fd);
	return rc;
}
