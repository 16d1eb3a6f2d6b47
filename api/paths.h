/*
 * paths.h: confining the paths a request names to the allowed roots.
 *
 * A path is resolved (symlinks followed, `..` refused outright) and must then
 * lie inside one of the roots, themselves resolved.  A symlink inside a root
 * that points out of it is therefore refused, as is an absolute path
 * elsewhere.  Relative paths are taken relative to the first root.
 */
#ifndef FG_PATHS_H
#define FG_PATHS_H

#include <stddef.h>

enum fg_confine {
	FG_CONFINE_OK,
	FG_CONFINE_FORBIDDEN,   /* outside every root, or contains `..` */
	FG_CONFINE_MISSING,     /* must_exist and it does not (or its parent, for outputs) */
	FG_CONFINE_BAD,         /* empty or too long */
	FG_CONFINE_URL,         /* a URL (holds "://") where a local path is needed */
};

/*
 * Resolve path into resolved (PATH_MAX bytes).  must_exist: the path itself
 * must exist (sources); else only its parent must (outputs).  why gets a
 * short reason for anything but OK.
 */
enum fg_confine fg_path_confine(const char *path, const char *const *roots, size_t n_roots, int must_exist,
				char *resolved, const char **why);

#endif
