/*
 * sha256.c: SHA-256 helpers over libcrypto's EVP interface.
 */
#include "forge/core/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
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
