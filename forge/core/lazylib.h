/*
 * lazylib.h: shared libraries loaded on first use (dlopen), so that a
 * command which needs none of them does not pay for loading them.
 *
 * Why: linking libcurl, libmicrohttpd and libcrypto the usual way makes the
 * dynamic loader map and relocate 36 libraries (GnuTLS, Kerberos, LDAP,
 * ...) before main, ~5 ms of CPU on every start; a local `forged inspect`
 * uses none of them.  Instead, forge/core/lazy_crypto.c,
 * forge/source/pull/lazy_curl.c and api/lazy_mhd.c define the functions
 * forged calls under their own names, with the prototypes of the libraries'
 * headers (so the compiler checks every one), and each forwards to the
 * library's function, loaded by its SONAME the first time any of them runs.
 * Call sites are unchanged.  The SONAMEs come from the build machine's
 * development links (Makefile: FG_SONAME_*), and the Debian package names
 * the libraries in Depends, since dpkg-shlibdeps cannot see a dlopen.
 *
 * A library that cannot be loaded (or lacks a symbol) is reported once on
 * stderr, naming it and dlerror(); every stub then returns its library's
 * failure value (NULL, an error code), so the caller's own error path runs.
 */
#ifndef FG_LAZYLIB_H
#define FG_LAZYLIB_H

#include <stdbool.h>
#include <stddef.h>

struct fg_lazylib {
	const char *soname;     /* e.g. "libcurl.so.4" */
	const char *what;       /* what needs it, for the one report: "URL sources" */
	const char *const *names; /* the symbols, resolved together */
	void **slots;           /* receives each symbol's address (NULL when the library is missing) */
	size_t n;
	int state;              /* private: FG_LAZYLIB_* (atomic) */
};

enum { FG_LAZYLIB_UNTRIED, FG_LAZYLIB_OK, FG_LAZYLIB_FAILED };

/*
 * A library's table: name_list, an array of symbol names, and slot_list,
 * the address of a struct of as many void * members in the same order.
 */
#define FG_LAZYLIB_INIT(so, what_for, name_list, slot_list) \
	{ (so), (what_for), (name_list), (void **)(slot_list), sizeof(name_list) / sizeof((name_list)[0]), \
	  FG_LAZYLIB_UNTRIED }

/*
 * Load lib the first time (thread-safe; later calls cost one atomic load);
 * true when the library and every symbol resolved.
 */
bool fg_lazylib_load(struct fg_lazylib *lib);

/*
 * The pieces of a stub file, from one X-macro list of the library's
 * functions: F(return type, name, (parameters), (arguments), value when the
 * library cannot be loaded) and V(name, (parameters), (arguments)) for the
 * void ones.  The file defines `lazy_lib` and `lazy_slots` before
 * expanding the list with FG_LAZY_STUB, FG_LAZY_STUB_V.  Names are
 * parenthesized so that a header's function-like macro of the same name
 * is not expanded.
 */
#define FG_LAZY_NAME(r, n, p, a, fb) #n,
#define FG_LAZY_NAME_V(n, p, a) #n,
#define FG_LAZY_SLOT(r, n, p, a, fb) void *n;
#define FG_LAZY_SLOT_V(n, p, a) void *n;
#define FG_LAZY_STUB(r, n, p, a, fb) \
	r(n) p \
	{ \
		if (!fg_lazylib_load(&lazy_lib)) \
			return fb; \
		return ((r(*) p)lazy_slots.n) a; \
	}
#define FG_LAZY_STUB_V(n, p, a) \
	void(n) p \
	{ \
		if (fg_lazylib_load(&lazy_lib)) \
			((void(*) p)lazy_slots.n) a; \
	}

#endif
