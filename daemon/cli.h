/*
 * cli.h: the subcommands of `forged` and what they share.
 *
 * Each subcommand is a row of the table in main.c: a name, a one-line summary,
 * its usage text and its entry point.  Entry points return the process exit
 * code of design.md section 4 (0 clean, 1 error verdicts, 2 bad usage or
 * input, 3 internal failure or a failure of forged's own state: FG_ESTATE,
 * FG_ENOSPC) and print errors on stderr themselves.
 */
#ifndef FG_CLI_H
#define FG_CLI_H

#include "forge/core/error.h"

#define FG_VERSION "0.1.0"

enum fg_exit {
	FG_EXIT_OK = 0,
	FG_EXIT_VERDICT = 1,
	FG_EXIT_USAGE = 2,
	FG_EXIT_INTERNAL = 3,
	FG_EXIT_STATE = 3,     /* forged's own state (database, state folder, cache) failed */
};

struct fg_cmd {
	const char *name;
	const char *summary;
	const char *usage;   /* full --help text */
	int (*run)(int argc, char **argv);
};

/* Print "forged: error: MSG" for err and return the exit code for its kind. */
int fg_cli_fail(const struct fg_err *err);

/* Print "forged CMD: MSG" and the usage line; returns FG_EXIT_USAGE. */
int fg_cli_usage_error(const struct fg_cmd *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Pull options for remote sources: defaults, and on a TTY a byte counter on stderr. */
struct fg_pull_opts;
void fg_cli_pull_opts(struct fg_pull_opts *o);

/* True when arg is -h or --help. */
int fg_cli_is_help(const char *arg);

extern const struct fg_cmd fg_cmd_version;
extern const struct fg_cmd fg_cmd_forge;
extern const struct fg_cmd fg_cmd_inspect;
extern const struct fg_cmd fg_cmd_serve;
extern const struct fg_cmd fg_cmd_tensors;
extern const struct fg_cmd fg_cmd_verdict;

#endif
