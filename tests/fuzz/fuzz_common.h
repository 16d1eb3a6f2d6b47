/*
 * fuzz_common.h: what the libFuzzer targets of tests/fuzz share (one
 * translation unit each, hence static functions).
 *
 * Every target keeps its files under one private folder made below
 * $FORGED_FUZZ_WORK (default build/fuzz/work, relative to the folder make
 * runs in) and points HOME, XDG_CACHE_HOME, HF_HOME and FORGED_CACHE_DIR into
 * it, so nothing a fuzzed input reaches can write outside build/.  The folder
 * is removed at exit.  Inputs that name a file (config, tokens) are handed
 * over as a memfd under /proc/self/fd, which touches no disk at all.
 */
#ifndef FG_FUZZ_COMMON_H
#define FG_FUZZ_COMMON_H

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forge/core/fs.h"

static char fz_work[PATH_MAX] __attribute__((unused));

static inline void fz_die(const char *what)
{
	fprintf(stderr, "fuzz: %s: %s\n", what, strerror(errno));
	abort();
}

static inline void fz_remove_work(void)
{
	if (fz_work[0] && !getenv("FORGED_FUZZ_KEEP"))
		fg_fs_rm_rf(fz_work);
}

/* Make the private folder ($FORGED_FUZZ_WORK/NAME-XXXXXX, absolute) and the environment pointing into it. */
static inline const char *fz_setup_work(const char *name)
{
	const char *base = getenv("FORGED_FUZZ_WORK");
	char tmpl[PATH_MAX], sub[PATH_MAX + 32];
	static const char *const dirs[] = { "home", "cache", "hf", "forged-cache" };
	static const char *const vars[] = { "HOME", "XDG_CACHE_HOME", "HF_HOME", "FORGED_CACHE_DIR" };

	if (!base || !*base)
		base = "build/fuzz/work";
	if (fg_fs_mkdir_p(base, 0700) != 0)
		fz_die(base);
	snprintf(tmpl, sizeof(tmpl), "%s/%s-XXXXXX", base, name);
	if (!mkdtemp(tmpl) || !realpath(tmpl, fz_work))
		fz_die(tmpl);
	atexit(fz_remove_work);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(sub, sizeof(sub), "%s/%s", fz_work, dirs[i]);
		if (mkdir(sub, 0700) != 0)
			fz_die(sub);
		setenv(vars[i], sub, 1);
	}
	/* No remote read may leave the machine: a closed local port, offline, no token. */
	setenv("HF_ENDPOINT", "http://127.0.0.1:9", 1);
	setenv("HF_HUB_OFFLINE", "1", 1);
	unsetenv("HF_TOKEN");
	unsetenv("STATE_DIRECTORY");
	return fz_work;
}

/*
 * A memfd holding data, named by *path (/proc/self/fd/N): the path-taking
 * loaders read the fuzzed bytes as a regular file.  Returns the fd to close.
 */
static inline int fz_memfd(const void *data, size_t size, char path[64])
{
	int fd = memfd_create("fuzz-input", MFD_CLOEXEC);
	const char *p = data;

	if (fd < 0)
		fz_die("memfd_create");
	while (size) {
		ssize_t n = write(fd, p, size);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			fz_die("write to memfd");
		p += n;
		size -= (size_t)n;
	}
	snprintf(path, 64, "/proc/self/fd/%d", fd);
	return fd;
}

/* Trap with a message: an invariant a parser promised does not hold. */
#define FZ_CHECK(cond)                                                                      \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "fuzz: invariant failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                            \
		}                                                                           \
	} while (0)

#endif
