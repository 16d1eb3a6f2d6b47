/*
 * test_error.c: the error record (forge/core/error.h): a refusal carries its
 * verdict code as data (fg_err_verdict, fg_err_refusal), every other error
 * names none, the prefix keeps it; the exit codes and kind words of the
 * codes, the ones for forged's own state (FG_ESTATE, FG_ENOSPC: exit 3)
 * apart from the client's input (FG_EINPUT: exit 2); fg_err_respell; the
 * code of a failed write (fg_fs_write_errcode: a full disk is forged's own).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include <errno.h>

#include "forge/core/error.h"
#include "forge/core/fs.h"
#include "forge/model/verdicts.h"

static void test_verdict_helper(void **state)
{
	struct fg_err err = { 0 };

	(void)state;
	/* A zeroed record is no error and no refusal. */
	assert_int_equal(fg_err_refusal(&err), FG_ERR_NO_VERDICT);
	assert_int_equal(fg_err_verdict(&err, FG_V_EXPERT_LAYOUT_AMBIGUOUS, "%s*: %s", "mtp.experts.", "fits both"),
			 FG_EVERDICT);
	assert_int_equal(err.code, FG_EVERDICT);
	assert_int_equal(err.verdict, FG_V_EXPERT_LAYOUT_AMBIGUOUS);
	assert_int_equal(fg_err_refusal(&err), FG_V_EXPERT_LAYOUT_AMBIGUOUS);
	/* The message is the detail: the code travels as data, not as a prefix. */
	assert_string_equal(err.msg, "mtp.experts.*: fits both");
	assert_string_equal(fg_verdict_row(fg_err_refusal(&err))->name, "expert_layout_ambiguous");
	/* A context prefix keeps the verdict. */
	assert_int_equal(fg_err_prefix(&err, FG_EINPUT, "planning '%s': ", "src"), FG_EVERDICT);
	assert_int_equal(fg_err_refusal(&err), FG_V_EXPERT_LAYOUT_AMBIGUOUS);
	assert_string_equal(err.msg, "planning 'src': mtp.experts.*: fits both");
	/* The first verdict code (0) is a code like any other. */
	fg_err_verdict(&err, FG_V_TRUNK_DOUBLE_SHIFTED, "x");
	assert_int_equal(FG_V_TRUNK_DOUBLE_SHIFTED, 0);
	assert_int_equal(fg_err_refusal(&err), FG_V_TRUNK_DOUBLE_SHIFTED);
	/* Setting any other error forgets the verdict. */
	fg_err_set(&err, FG_EINPUT, "bad shard");
	assert_int_equal(err.verdict, FG_ERR_NO_VERDICT);
	assert_int_equal(fg_err_refusal(&err), FG_ERR_NO_VERDICT);
	/* FG_EVERDICT set without a code names none; a negative code is none too. */
	fg_err_set(&err, FG_EVERDICT, "the artifact would not inspect clean");
	assert_int_equal(fg_err_refusal(&err), FG_ERR_NO_VERDICT);
	assert_int_equal(fg_err_verdict(&err, -7, "y"), FG_EVERDICT);
	assert_int_equal(fg_err_refusal(&err), FG_ERR_NO_VERDICT);
	/* A verdict on a record whose code says otherwise is not a refusal. */
	fg_err_verdict(&err, FG_V_MIXED_CONVENTION, "z");
	err.code = FG_EINTERNAL;
	assert_int_equal(fg_err_refusal(&err), FG_ERR_NO_VERDICT);
	/* NULL records are allowed everywhere. */
	assert_int_equal(fg_err_verdict(NULL, FG_V_MIXED_CONVENTION, "z"), FG_EVERDICT);
	assert_int_equal(fg_err_refusal(NULL), FG_ERR_NO_VERDICT);
}

static void test_exit_codes(void **state)
{
	(void)state;
	assert_int_equal(fg_err_exit_code(FG_OK), 0);
	assert_int_equal(fg_err_exit_code(FG_EVERDICT), 1);
	assert_int_equal(fg_err_exit_code(FG_EUSAGE), 2);
	assert_int_equal(fg_err_exit_code(FG_EINPUT), 2);
	assert_int_equal(fg_err_exit_code(FG_EFORBIDDEN), 2);
	assert_int_equal(fg_err_exit_code(FG_ENOTFOUND), 2);
	/* forged's own state is not the client's input. */
	assert_int_equal(fg_err_exit_code(FG_ESTATE), 3);
	assert_int_equal(fg_err_exit_code(FG_ENOSPC), 3);
	assert_int_equal(fg_err_exit_code(FG_ENOMEM), 3);
	assert_int_equal(fg_err_exit_code(FG_EINTERNAL), 3);
	/* An unreadable source is an input error; -3 is no longer a code. */
	assert_string_equal(fg_err_kind(FG_EINPUT), "input");
	assert_string_equal(fg_err_kind(FG_ESTATE), "state");
	assert_string_equal(fg_err_kind(FG_ENOSPC), "disk full");
	assert_string_equal(fg_err_kind(FG_EFORBIDDEN), "forbidden");
	/* The new codes are distinct from each other and from the old ones. */
	{
		static const int codes[] = { FG_EUSAGE, FG_EINPUT, FG_ENOMEM, FG_EINTERNAL, FG_EVERDICT,
					     FG_ENOTFOUND, FG_ECONFLICT, FG_EBUSY, FG_ECANCELLED,
					     FG_EFORBIDDEN, FG_ESTATE, FG_ENOSPC };
		const size_t n = sizeof(codes) / sizeof(codes[0]);

		for (size_t i = 0; i < n; i++)
			for (size_t k = i + 1; k < n; k++)
				assert_int_not_equal(codes[i], codes[k]);
	}
}

/* A message naming a folder by /proc/self/fd/N names it by its path instead, every time, capped. */
static void test_respell(void **state)
{
	struct fg_err err = { 0 };
	char long_to[600];

	(void)state;
	fg_err_set(&err, FG_ENOSPC, "/proc/self/fd/3/.a.tmp/x: write: No space left (in /proc/self/fd/3/.a.tmp)");
	fg_err_respell(&err, "/proc/self/fd/3", "/srv/out");
	assert_string_equal(err.msg, "/srv/out/.a.tmp/x: write: No space left (in /srv/out/.a.tmp)");
	assert_int_equal(err.code, FG_ENOSPC);
	/* Nothing to respell: the message is left as it is. */
	fg_err_respell(&err, "/proc/self/fd/9", "/elsewhere");
	assert_string_equal(err.msg, "/srv/out/.a.tmp/x: write: No space left (in /srv/out/.a.tmp)");
	/* The root folder: its path is "" before the "/". */
	fg_err_set(&err, FG_EINPUT, "/proc/self/fd/4/.b: cannot create");
	fg_err_respell(&err, "/proc/self/fd/4", "");
	assert_string_equal(err.msg, "/.b: cannot create");
	/* Longer than a message holds: cut at FG_ERR_MSG_MAX - 1 bytes, still a string. */
	memset(long_to, 'p', sizeof(long_to) - 1);
	long_to[sizeof(long_to) - 1] = '\0';
	fg_err_set(&err, FG_EINPUT, "/proc/self/fd/5/f: x");
	fg_err_respell(&err, "/proc/self/fd/5", long_to);
	assert_int_equal(strlen(err.msg), FG_ERR_MSG_MAX - 1);
	assert_int_equal(err.msg[FG_ERR_MSG_MAX - 2], 'p');
	fg_err_respell(NULL, "a", "b");
}

/* A full disk or quota is FG_ENOSPC (exit 3), the rest of a failed write the output's (exit 2). */
static void test_write_errcode(void **state)
{
	(void)state;
	assert_int_equal(fg_fs_write_errcode(ENOSPC), FG_ENOSPC);
	assert_int_equal(fg_fs_write_errcode(EDQUOT), FG_ENOSPC);
	assert_int_equal(fg_err_exit_code(fg_fs_write_errcode(ENOSPC)), 3);
	assert_int_equal(fg_fs_write_errcode(ENOMEM), FG_ENOMEM);
	assert_int_equal(fg_fs_write_errcode(EACCES), FG_EINPUT);
	assert_int_equal(fg_fs_write_errcode(EROFS), FG_EINPUT);
	assert_int_equal(fg_err_exit_code(fg_fs_write_errcode(EROFS)), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verdict_helper),
		cmocka_unit_test(test_exit_codes),
		cmocka_unit_test(test_respell),
		cmocka_unit_test(test_write_errcode),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
