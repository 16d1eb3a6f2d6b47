/*
 * test_auth.c: the tokens file of api/auth.c.  One `ROLE NAME SHA256HEX`
 * line per token, `#` comments and blank lines skipped; each bad line is
 * refused with its line number and the file loaded before stays in place.
 * A presented token matches by the SHA-256 of its text (the hashes here are
 * written out, computed with Python's hashlib), the first matching entry
 * giving role and name.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "tests/unit/support.h"

/* SHA-256 of "forged-read-token", "forged-write-token" and "abc". */
#define READ_HASH  "f74b1827bb776ce6e27a46c788c8bfe139f7c07be42ded7978d920762fd35a9e"
#define WRITE_HASH "de199757fbba8f14a795031a2dd9d8d077573d59bdc2372f75b6bacf69feb5e1"
#define ABC_HASH   "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

static char tmp[PATH_MAX], path[PATH_MAX + 16];

static int setup(void **state)
{
	(void)state;
	tmpdir_new(tmp, sizeof(tmp), "auth");
	path_join(path, sizeof(path), tmp, "tokens");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return rm_tree(tmp);
}

/* Load text as the tokens file into t; the return code. */
static int load(struct fg_tokens *t, const char *text, struct fg_err *err)
{
	write_text(NULL, path, text);
	return fg_tokens_load(t, path, err);
}

static void test_roles_names_comments(void **state)
{
	struct fg_tokens t = { 0, NULL };
	struct fg_err err = { 0 };
	const char *name = NULL;

	(void)state;
	assert_int_equal(load(&t,
			      "# forged tokens\n"
			      "\n"
			      "read ci-reader " READ_HASH "\n"
			      "   # an indented comment\n"
			      "\t \n"
			      "  write\tci-writer   " WRITE_HASH "\n"
			      "read upper BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
			      &err),
			 0);
	assert_int_equal(t.n, 3);
	assert_int_equal(t.t[0].role, FG_ROLE_READ);
	assert_string_equal(t.t[0].name, "ci-reader");
	assert_int_equal(t.t[1].role, FG_ROLE_WRITE);
	assert_string_equal(t.t[1].name, "ci-writer");
	/* The hash is stored as bytes: its first and last bytes, written by hand. */
	assert_int_equal(t.t[1].sha256[0], 0xde);
	assert_int_equal(t.t[1].sha256[31], 0xe1);
	/* Upper-case hex is the same hash; the last line needs no newline. */
	assert_string_equal(t.t[2].name, "upper");
	assert_int_equal(t.t[2].sha256[0], 0xba);

	assert_int_equal(fg_tokens_check(&t, "forged-read-token", &name), FG_ROLE_READ);
	assert_string_equal(name, "ci-reader");
	assert_int_equal(fg_tokens_check(&t, "forged-write-token", &name), FG_ROLE_WRITE);
	assert_string_equal(name, "ci-writer");
	assert_int_equal(fg_tokens_check(&t, "abc", NULL), FG_ROLE_READ);
	name = NULL;
	assert_int_equal(fg_tokens_check(&t, "forged-write-token ", &name), FG_ROLE_NONE);
	assert_int_equal(fg_tokens_check(&t, "forged-write-toke", &name), FG_ROLE_NONE);
	assert_int_equal(fg_tokens_check(&t, "", &name), FG_ROLE_NONE);
	assert_int_equal(fg_tokens_check(&t, NULL, &name), FG_ROLE_NONE);
	assert_null(name);
	fg_tokens_release(&t);
	assert_int_equal(t.n, 0);
	assert_null(t.t);
	fg_tokens_release(&t);
}

static void test_first_match_wins(void **state)
{
	struct fg_tokens t = { 0, NULL };
	struct fg_err err = { 0 };
	const char *name = NULL;

	(void)state;
	/* One hash listed twice: the first entry's role and name. */
	assert_int_equal(load(&t, "read first " ABC_HASH "\nwrite second " ABC_HASH "\n", &err), 0);
	assert_int_equal(fg_tokens_check(&t, "abc", &name), FG_ROLE_READ);
	assert_string_equal(name, "first");
	fg_tokens_release(&t);
	/* A file of comments only: no token matches anything. */
	assert_int_equal(load(&t, "# nobody\n\n", &err), 0);
	assert_int_equal(t.n, 0);
	assert_int_equal(fg_tokens_check(&t, "abc", NULL), FG_ROLE_NONE);
	fg_tokens_release(&t);
}

/* text is refused with FG_EINPUT and a message holding phrase; a loaded t is left alone. */
static void expect_bad(const char *text, const char *phrase)
{
	struct fg_tokens t = { 0, NULL };
	struct fg_err err = { 0 };

	assert_int_equal(load(&t, "write kept " WRITE_HASH "\n", &err), 0);
	memset(&err, 0, sizeof(err));
	if (load(&t, text, &err) != FG_EINPUT)
		fail_msg("'%s' was not refused with FG_EINPUT (code %d)", text, err.code);
	if (!strstr(err.msg, phrase))
		fail_msg("'%s': message '%s' lacks '%s'", text, err.msg, phrase);
	if (strncmp(err.msg, path, strlen(path)) != 0)
		fail_msg("'%s': message '%s' does not name the file", text, err.msg);
	/* Nothing replaced: the first file's token still works. */
	assert_int_equal(t.n, 1);
	assert_int_equal(fg_tokens_check(&t, "forged-write-token", NULL), FG_ROLE_WRITE);
	fg_tokens_release(&t);
}

static void test_bad_lines(void **state)
{
	(void)state;
	expect_bad("# header\nadmin root " ABC_HASH "\n", ":2: role 'admin' is neither read nor write");
	expect_bad("READ x " ABC_HASH "\n", ":1: role 'READ' is neither read nor write");
	expect_bad("read x\n", ":1: expected `ROLE NAME SHA256HEX`");
	expect_bad("read\n", ":1: expected `ROLE NAME SHA256HEX`");
	expect_bad("read x " ABC_HASH " extra\n", ":1: expected `ROLE NAME SHA256HEX`");
	/* 63 and 65 hex digits, and a digit that is not hex. */
	expect_bad("\n\nread x ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a\n",
		   ":3: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a' is not a SHA-256 in hex");
	expect_bad("read x " ABC_HASH "0\n", "is not a SHA-256 in hex");
	expect_bad("read x ga7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n",
		   ":1: 'ga7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad' is not a SHA-256 in hex");
	/* A good line before a bad one does not make the file half-loaded. */
	expect_bad("read a " READ_HASH "\nread b zz\n", ":2: 'zz' is not a SHA-256 in hex");
}

static void test_limits_and_missing(void **state)
{
	struct fg_tokens t = { 0, NULL };
	struct fg_err err = { 0 };
	size_t cap = (FG_TOKENS_MAX + 1) * 96, len = 0;
	char *text = malloc(cap);

	(void)state;
	assert_non_null(text);
	for (int i = 0; i < FG_TOKENS_MAX; i++)
		len += (size_t)snprintf(text + len, cap - len, "read t%d " ABC_HASH "\n", i);
	assert_int_equal(load(&t, text, &err), 0);
	assert_int_equal(t.n, FG_TOKENS_MAX);
	fg_tokens_release(&t);
	snprintf(text + len, cap - len, "read one-too-many " ABC_HASH "\n");
	assert_int_equal(load(&t, text, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "more than 1024 tokens"));
	assert_int_equal(t.n, 0);
	free(text);

	assert_int_equal(fg_tokens_load(&t, "/nonexistent/forged/tokens", &err), FG_EINPUT);
	assert_string_equal(err.msg, "/nonexistent/forged/tokens: cannot open the tokens file");
	assert_null(t.t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roles_names_comments),
		cmocka_unit_test(test_first_match_wins),
		cmocka_unit_test(test_bad_lines),
		cmocka_unit_test(test_limits_and_missing),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
