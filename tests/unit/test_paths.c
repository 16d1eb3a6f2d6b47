/*
 * test_paths.c: fg_path_confine (api/paths.c) on a real folder tree:
 *
 *   TMP/root/a/file      TMP/root/a..b        TMP/root/in -> a
 *   TMP/root/out -> TMP/outside               TMP/outside/secret
 *   TMP/root2/x          TMP/rootlink -> root TMP/rootx/file (a sibling whose
 *                                             name starts with "root")
 *
 * Sources must exist; outputs need only their parent.  `..` is refused
 * before anything is resolved, symlinks are followed (so one leading out of
 * a root is refused), roots are resolved too, and a root is a path prefix
 * only at a '/' boundary.
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
#include <sys/stat.h>
#include <unistd.h>

#include "api/paths.h"
#include "tests/unit/support.h"

static char tmp[PATH_MAX];   /* resolved, so expected paths can be spelled from it */
static char root[PATH_MAX + 8];

static void mk(const char *rel)
{
	char p[PATH_MAX * 2];

	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static void ln(const char *target, const char *rel)
{
	char p[PATH_MAX * 2];

	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	assert_int_equal(symlink(target, p), 0);
}

static int setup(void **state)
{
	char made[PATH_MAX], out[PATH_MAX + 16];

	(void)state;
	tmpdir_new(made, sizeof(made), "paths");
	assert_non_null(realpath(made, tmp));
	snprintf(root, sizeof(root), "%s/root", tmp);
	mk("root");
	mk("root/a");
	write_text(root, "a/file", "x");
	write_text(root, "a..b", "x");
	mk("outside");
	write_text(tmp, "outside/secret", "x");
	mk("root2");
	write_text(tmp, "root2/x", "x");
	mk("rootx");
	write_text(tmp, "rootx/file", "x");
	ln("a", "root/in");
	snprintf(out, sizeof(out), "%s/outside", tmp);
	ln(out, "root/out");
	ln("root", "rootlink");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return rm_tree(tmp);
}

/* Confine path against roots; assert the outcome, and for OK the resolved path TMP/want. */
static void expect(const char *path, const char *const *roots, size_t n_roots, int must_exist,
		   enum fg_confine want, const char *want_rel)
{
	char resolved[PATH_MAX], want_path[PATH_MAX * 2];
	const char *why = NULL;
	enum fg_confine got = fg_path_confine(path, roots, n_roots, must_exist, resolved, &why);

	if (got != want)
		fail_msg("'%s' (must_exist %d): %d, want %d (%s)", path ? path : "(null)", must_exist, got, want,
			 why ? why : "");
	if (want == FG_CONFINE_OK) {
		snprintf(want_path, sizeof(want_path), "%s/%s", tmp, want_rel);
		assert_string_equal(resolved, want_path);
	} else {
		assert_non_null(why);
		if (want_rel && !strstr(why, want_rel))
			fail_msg("'%s': reason '%s' lacks '%s'", path, why, want_rel);
	}
}

static void test_inside(void **state)
{
	const char *roots[] = { root };
	char abs[PATH_MAX * 2];

	(void)state;
	/* Relative paths are taken from the first root. */
	expect("a/file", roots, 1, 1, FG_CONFINE_OK, "root/a/file");
	expect("a", roots, 1, 1, FG_CONFINE_OK, "root/a");
	snprintf(abs, sizeof(abs), "%s/a/file", root);
	expect(abs, roots, 1, 1, FG_CONFINE_OK, "root/a/file");
	expect(root, roots, 1, 1, FG_CONFINE_OK, "root");
	/* Two dots inside a name are not `..`. */
	expect("a..b", roots, 1, 1, FG_CONFINE_OK, "root/a..b");
	/* A symlink that stays inside resolves to its target. */
	expect("in/file", roots, 1, 1, FG_CONFINE_OK, "root/a/file");
}

static void test_outside(void **state)
{
	const char *roots[] = { root };
	char abs[PATH_MAX * 2];

	(void)state;
	snprintf(abs, sizeof(abs), "%s/outside/secret", tmp);
	expect(abs, roots, 1, 1, FG_CONFINE_FORBIDDEN, "outside the allowed roots");
	expect("/etc/passwd", roots, 1, 1, FG_CONFINE_FORBIDDEN, "outside the allowed roots");
	/* A sibling whose name extends the root's is not inside it. */
	snprintf(abs, sizeof(abs), "%s/rootx/file", tmp);
	expect(abs, roots, 1, 1, FG_CONFINE_FORBIDDEN, "outside the allowed roots");
	/* A symlink in the root pointing out of it. */
	expect("out/secret", roots, 1, 1, FG_CONFINE_FORBIDDEN, "outside the allowed roots");
	expect("out", roots, 1, 1, FG_CONFINE_FORBIDDEN, "outside the allowed roots");
	/* `..` is refused outright, even where it would land inside. */
	expect("a/../a/file", roots, 1, 1, FG_CONFINE_FORBIDDEN, "'..'");
	expect("..", roots, 1, 1, FG_CONFINE_FORBIDDEN, "'..'");
	expect("../outside/secret", roots, 1, 1, FG_CONFINE_FORBIDDEN, "'..'");
	expect("a/..", roots, 1, 1, FG_CONFINE_FORBIDDEN, "'..'");
	snprintf(abs, sizeof(abs), "%s/../outside/secret", root);
	expect(abs, roots, 1, 1, FG_CONFINE_FORBIDDEN, "'..'");
	/* No roots at all. */
	expect("a/file", roots, 0, 1, FG_CONFINE_FORBIDDEN, "no allowed roots");
}

static void test_roots(void **state)
{
	char link[PATH_MAX + 16], second[PATH_MAX + 16], abs[PATH_MAX * 2];
	const char *two[] = { root, second };
	const char *linked[] = { link };
	const char *slash[] = { "/" };

	(void)state;
	snprintf(second, sizeof(second), "%s/root2", tmp);
	snprintf(link, sizeof(link), "%s/rootlink", tmp);
	/* Any root may hold an absolute path; relative ones use the first. */
	snprintf(abs, sizeof(abs), "%s/root2/x", tmp);
	expect(abs, two, 2, 1, FG_CONFINE_OK, "root2/x");
	expect("x", two, 2, 1, FG_CONFINE_MISSING, "does not exist");
	/* A root named through a symlink is resolved before comparing. */
	snprintf(abs, sizeof(abs), "%s/a/file", root);
	expect(abs, linked, 1, 1, FG_CONFINE_OK, "root/a/file");
	expect("a/file", linked, 1, 1, FG_CONFINE_OK, "root/a/file");
	/* "/" holds everything. */
	snprintf(abs, sizeof(abs), "%s/outside/secret", tmp);
	expect(abs, slash, 1, 1, FG_CONFINE_OK, "outside/secret");
	/* An output right under "/": its parent is "/" itself. */
	{
		char resolved[PATH_MAX];
		const char *why = NULL;

		assert_int_equal(fg_path_confine("/fg-no-such-output", slash, 1, 0, resolved, &why), FG_CONFINE_OK);
		assert_string_equal(resolved, "/fg-no-such-output");
	}
}

static void test_missing_and_outputs(void **state)
{
	const char *roots[] = { root };

	(void)state;
	expect("nope", roots, 1, 1, FG_CONFINE_MISSING, "does not exist");
	expect("a/nope", roots, 1, 1, FG_CONFINE_MISSING, "does not exist");
	/* Outputs: only the parent must exist; trailing slashes are dropped. */
	expect("new", roots, 1, 0, FG_CONFINE_OK, "root/new");
	expect("a/new/", roots, 1, 0, FG_CONFINE_OK, "root/a/new");
	expect("in/new", roots, 1, 0, FG_CONFINE_OK, "root/a/new");
	expect("nope/new", roots, 1, 0, FG_CONFINE_MISSING, "parent folder does not exist");
	/* An output through a symlink out of the root. */
	expect("out/new", roots, 1, 0, FG_CONFINE_FORBIDDEN, "outside the allowed roots");
	expect("../new", roots, 1, 0, FG_CONFINE_FORBIDDEN, "'..'");
}

static void test_bad_and_urls(void **state)
{
	const char *roots[] = { root };
	char *longp = malloc(PATH_MAX + 8);

	(void)state;
	expect("", roots, 1, 1, FG_CONFINE_BAD, "empty or too long");
	expect(NULL, roots, 1, 1, FG_CONFINE_BAD, "empty or too long");
	assert_non_null(longp);
	memset(longp, 'a', PATH_MAX + 7);
	longp[PATH_MAX + 7] = '\0';
	expect(longp, roots, 1, 1, FG_CONFINE_BAD, "empty or too long");
	free(longp);
	expect("http://hub.example/m", roots, 1, 1, FG_CONFINE_URL, "URL");
	expect("hf://org/name", roots, 1, 0, FG_CONFINE_URL, "URL");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inside),
		cmocka_unit_test(test_outside),
		cmocka_unit_test(test_roots),
		cmocka_unit_test(test_missing_and_outputs),
		cmocka_unit_test(test_bad_and_urls),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
