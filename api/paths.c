/*
 * paths.c: path confinement (paths.h).
 */
#include "api/paths.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int has_dotdot(const char *p)
{
	const char *s = p;

	while ((s = strstr(s, ".."))) {
		if ((s == p || s[-1] == '/') && (s[2] == '\0' || s[2] == '/'))
			return 1;
		s += 2;
	}
	return 0;
}

static int inside(const char *resolved, const char *root)
{
	size_t n = strlen(root);

	if (n == 1 && root[0] == '/')
		return 1;
	return strncmp(resolved, root, n) == 0 && (resolved[n] == '\0' || resolved[n] == '/');
}

enum fg_confine fg_path_confine(const char *path, const char *const *roots, size_t n_roots, int must_exist,
				char *resolved, const char **why)
{
	char joined[PATH_MAX], parent[PATH_MAX];
	const char *base;
	int n;

	if (!path || !*path || strlen(path) >= PATH_MAX - 1) {
		*why = "the path is empty or too long";
		return FG_CONFINE_BAD;
	}
	if (strstr(path, "://")) {
		*why = "URL sources are not supported by this server";
		return FG_CONFINE_URL;
	}
	if (has_dotdot(path)) {
		*why = "the path contains '..'";
		return FG_CONFINE_FORBIDDEN;
	}
	if (!n_roots) {
		*why = "no allowed roots are configured";
		return FG_CONFINE_FORBIDDEN;
	}
	n = path[0] == '/' ? snprintf(joined, sizeof(joined), "%s", path)
			   : snprintf(joined, sizeof(joined), "%s/%s", roots[0], path);
	if (n < 0 || (size_t)n >= sizeof(joined)) {
		*why = "the path is too long";
		return FG_CONFINE_BAD;
	}
	if (must_exist) {
		if (!realpath(joined, resolved)) {
			*why = "the path does not exist";
			return FG_CONFINE_MISSING;
		}
	} else {
		char *slash;

		while ((n = (int)strlen(joined)) > 1 && joined[n - 1] == '/')
			joined[n - 1] = '\0';
		slash = strrchr(joined, '/');
		base = slash + 1;
		snprintf(parent, sizeof(parent), "%.*s", slash == joined ? 1 : (int)(slash - joined), joined);
		if (!*base || !realpath(parent, resolved)) {
			*why = "the output's parent folder does not exist";
			return FG_CONFINE_MISSING;
		}
		if (strlen(resolved) + strlen(base) + 2 > PATH_MAX) {
			*why = "the path is too long";
			return FG_CONFINE_BAD;
		}
		if (strcmp(resolved, "/") != 0)
			strncat(resolved, "/", PATH_MAX - strlen(resolved) - 1);
		strncat(resolved, base, PATH_MAX - strlen(resolved) - 1);
	}
	for (size_t i = 0; i < n_roots; i++) {
		char root[PATH_MAX];

		if (realpath(roots[i], root) && inside(resolved, root))
			return FG_CONFINE_OK;
	}
	*why = "the path is outside the allowed roots";
	return FG_CONFINE_FORBIDDEN;
}
