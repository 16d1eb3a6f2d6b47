/*
 * fuzz_tokens.c: libFuzzer target for the API's tokens file (api/auth.c,
 * fg_tokens_load and fg_tokens_check).
 *
 * The input is the file's bytes, handed over as a memfd.  It is loaded twice
 * into the same table, as a SIGHUP reload does (a success replaces the old
 * table, a failure keeps it), and every entry must then be a read or write
 * token with a NUL-terminated name.  Each whitespace-separated word of the
 * input is presented as a bearer token: the check may match or not, but it
 * must return a role and a name of the table, and the same answer twice.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api/auth.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_setup_work("tokens");
	return 0;
}

static void check_table(const struct fg_tokens *t)
{
	FZ_CHECK(t->n <= FG_TOKENS_MAX);
	FZ_CHECK(t->n == 0 || t->t);
	for (size_t i = 0; i < t->n; i++) {
		FZ_CHECK(t->t[i].role == FG_ROLE_READ || t->t[i].role == FG_ROLE_WRITE);
		FZ_CHECK(memchr(t->t[i].name, '\0', sizeof(t->t[i].name)));
	}
}

static void check_word(const struct fg_tokens *t, const char *word)
{
	const char *name = NULL, *again = NULL;
	enum fg_role role = fg_tokens_check(t, word, &name);

	FZ_CHECK(role == FG_ROLE_NONE || role == FG_ROLE_READ || role == FG_ROLE_WRITE);
	if (role == FG_ROLE_NONE)
		return;
	FZ_CHECK(name && name >= t->t[0].name && name <= t->t[t->n - 1].name);
	FZ_CHECK(fg_tokens_check(t, word, &again) == role && again == name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_tokens t = { 0, NULL };
	struct fg_err err = { 0 };
	char path[64], *words;
	int fd = fz_memfd(data, size, path), rc;

	rc = fg_tokens_load(&t, path, &err);
	FZ_CHECK(rc == 0 || (rc < 0 && err.code == rc && memchr(err.msg, '\0', sizeof(err.msg))));
	check_table(&t);
	{
		/* A reload into the loaded table: replaced on success, kept as it was on failure. */
		size_t before = t.n;
		int rc2 = fg_tokens_load(&t, path, &err);

		FZ_CHECK(rc2 == rc);
		FZ_CHECK(t.n == before);
		check_table(&t);
	}
	words = malloc(size + 1);
	if (words) {
		char *p = words, *end = words + size;

		memcpy(words, data, size);
		words[size] = '\0';
		check_word(&t, "");
		while (p < end) {
			size_t n = strcspn(p, " \t\r\n");

			p[n] = '\0';
			if (n)
				check_word(&t, p);
			p += n + 1;
		}
		free(words);
	}
	fg_tokens_release(&t);
	FZ_CHECK(t.n == 0 && t.t == NULL);
	fg_tokens_release(&t);
	close(fd);
	return 0;
}
