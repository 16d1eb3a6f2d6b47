/*
 * lazylib.c: the loader of lazylib.h.
 */
#include "forge/core/lazylib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/* dlopen and dlsym every name; the state it ends in. */
static int load_now(struct fg_lazylib *lib)
{
	void *h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		const char *why = dlerror();

		fprintf(stderr, "forged: error: cannot load %s (needed for %s): %s\n", lib->soname, lib->what,
			why ? why : "unknown reason");
		return FG_LAZYLIB_FAILED;
	}
	for (size_t i = 0; i < lib->n; i++) {
		void *p = dlsym(h, lib->names[i]);

		if (!p) {
			fprintf(stderr, "forged: error: %s has no %s (needed for %s)\n", lib->soname, lib->names[i],
				lib->what);
			memset(lib->slots, 0, lib->n * sizeof(*lib->slots));
			return FG_LAZYLIB_FAILED;
		}
		lib->slots[i] = p;
	}
	return FG_LAZYLIB_OK;
}

bool fg_lazylib_load(struct fg_lazylib *lib)
{
	int s = __atomic_load_n(&lib->state, __ATOMIC_ACQUIRE);

	if (s != FG_LAZYLIB_UNTRIED)
		return s == FG_LAZYLIB_OK;
	pthread_mutex_lock(&load_lock);
	s = __atomic_load_n(&lib->state, __ATOMIC_ACQUIRE);
	if (s == FG_LAZYLIB_UNTRIED) {
		s = load_now(lib);
		/* Release: the slots written above are visible to whoever sees the state. */
		__atomic_store_n(&lib->state, s, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&load_lock);
	return s == FG_LAZYLIB_OK;
}
