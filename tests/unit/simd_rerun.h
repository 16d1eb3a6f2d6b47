/*
 * simd_rerun.h: run the calling test binary again under each forced SIMD
 * path (FORGED_SIMD=scalar, =avx2), so every kernel set of a module is
 * tested on a machine that would pick AVX-512.  Used by test_dtype.c and
 * test_quant.c; include after <cmocka.h>.
 */
#ifndef FG_SIMD_RERUN_H
#define FG_SIMD_RERUN_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * Re-exec argv under each forced path with child_env set; a child skips this
 * test (its own call sees child_env) and must pass every other.
 */
static void simd_rerun(char **argv, const char *child_env)
{
	static const char *const caps[] = { "scalar", "avx2" };

	if (getenv(child_env)) {
		skip();
		return;
	}
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		int status = 0;
		pid_t pid;

		fflush(stdout);
		fflush(stderr);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			setenv("FORGED_SIMD", caps[i], 1);
			setenv(child_env, "1", 1);
			execv("/proc/self/exe", argv);
			_exit(127);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fail_msg("FORGED_SIMD=%s run failed (status 0x%x)", caps[i], (unsigned)status);
		print_message("FORGED_SIMD=%s run passed\n", caps[i]);
	}
}

#endif
