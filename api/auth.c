/*
 * auth.c: tokens file parsing and constant-time token checks (auth.h).
 */
#include "api/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forge/core/str.h"

static int parse_hex32(const char *hex, unsigned char out[32])
{
	if (strlen(hex) != 64)
		return -1;
	for (int i = 0; i < 32; i++) {
		int hi = fg_hex_nibble(hex[2 * i]), lo = fg_hex_nibble(hex[2 * i + 1]);

		if (hi == FG_HEX_NONE || lo == FG_HEX_NONE)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

static int parse_line(char *line, struct fg_token *tok, const char *path, int lineno, struct fg_err *err)
{
	char role[16], name[64], hex[80], extra[2];
	int n = sscanf(line, "%15s %63s %79s %1s", role, name, hex, extra);

	if (n != 3)
		return fg_err_set(err, FG_EINPUT, "%s:%d: expected `ROLE NAME SHA256HEX`", path, lineno);
	if (strcmp(role, "read") == 0)
		tok->role = FG_ROLE_READ;
	else if (strcmp(role, "write") == 0)
		tok->role = FG_ROLE_WRITE;
	else
		return fg_err_set(err, FG_EINPUT, "%s:%d: role '%s' is neither read nor write", path, lineno, role);
	if (parse_hex32(hex, tok->sha256) != 0)
		return fg_err_set(err, FG_EINPUT, "%s:%d: '%s' is not a SHA-256 in hex", path, lineno, hex);
	snprintf(tok->name, sizeof(tok->name), "%s", name);
	return 0;
}

int fg_tokens_load(struct fg_tokens *out, const char *path, struct fg_err *err)
{
	FILE *fp = fopen(path, "r");
	struct fg_tokens t = { 0, NULL };
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int lineno = 0, rc = 0;

	if (!fp)
		return fg_err_set(err, FG_EINPUT, "%s: cannot open the tokens file", path);
	t.t = calloc(FG_TOKENS_MAX, sizeof(*t.t));
	if (!t.t) {
		fclose(fp);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	/* Whole lines (getline): a line is never split, so no tail of one is read as a token. */
	while ((len = getline(&line, &cap, fp)) >= 0) {
		char *p = line;

		lineno++;
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		if (len > 0 && line[len - 1] == '\r')
			line[--len] = '\0';
		if ((size_t)len > FG_TOKENS_LINE_MAX) {
			rc = fg_err_set(err, FG_EINPUT, "%s:%d: the line is longer than %d bytes", path, lineno,
					FG_TOKENS_LINE_MAX);
			break;
		}
		if (memchr(line, '\0', (size_t)len)) {
			rc = fg_err_set(err, FG_EINPUT, "%s:%d: the line holds a NUL byte", path, lineno);
			break;
		}
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '#' || *p == '\0')
			continue;
		if (t.n == FG_TOKENS_MAX) {
			rc = fg_err_set(err, FG_EINPUT, "%s: more than %d tokens", path, FG_TOKENS_MAX);
			break;
		}
		rc = parse_line(p, &t.t[t.n], path, lineno, err);
		if (rc)
			break;
		t.n++;
	}
	if (!rc && ferror(fp))
		rc = fg_err_set(err, FG_EINPUT, "%s: cannot read the tokens file", path);
	fclose(fp);
	free(line);
	if (rc) {
		fg_tokens_release(&t);
		return rc;
	}
	fg_tokens_release(out);
	*out = t;
	return 0;
}

void fg_tokens_release(struct fg_tokens *t)
{
	if (!t)
		return;
	if (t->t)
		OPENSSL_cleanse(t->t, FG_TOKENS_MAX * sizeof(*t->t));
	free(t->t);
	t->t = NULL;
	t->n = 0;
}

enum fg_role fg_tokens_check(const struct fg_tokens *t, const char *token, const char **name)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned md_len = 0;
	enum fg_role role = FG_ROLE_NONE;

	if (!token || !*token || !t->n)
		return FG_ROLE_NONE;
	EVP_Digest(token, strlen(token), md, &md_len, EVP_sha256(), NULL);
	/* Every entry is compared, matched or not. */
	for (size_t i = 0; i < t->n; i++) {
		if (CRYPTO_memcmp(md, t->t[i].sha256, 32) == 0 && role == FG_ROLE_NONE) {
			role = t->t[i].role;
			if (name)
				*name = t->t[i].name;
		}
	}
	return role;
}
