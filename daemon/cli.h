/*
 * cli.h: the subcommands of `forged` and what they share.
 *
 * Each subcommand is a row of the table in main.c: a name, a one-line summary,
 * its usage text and its entry point.  Entry points return the process exit
 * code of design.md section 4 (0 clean, 1 error verdicts, 2 bad usage or
 * input, 3 internal failure) and print errors on stderr themselves.
 */
#ifndef FG_CLI_H
#define FG_CLI_H

#include <stdio.h>

#include "forge/core/error.h"
#include "forge/core/version.h"

enum fg_exit {
	FG_EXIT_OK = 0,
	FG_EXIT_VERDICT = 1,
	FG_EXIT_USAGE = 2,
	FG_EXIT_INTERNAL = 3,
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

/*
 * Pull options for remote sources: fg_ckpt_pull_defaults (the cache folder is
 * written into cache, len bytes, which must outlive o), and on a TTY a byte
 * counter on stderr.
 */
struct fg_pull_opts;
void fg_cli_pull_opts(struct fg_pull_opts *o, char *cache, size_t len);

/*
 * The runtime ids of forge/model/runtimes.c's table, one per line with its
 * contract, under a "runtimes:" heading: --help of the commands that take a
 * runtime id prints it after the usage, so the list is never written by hand.
 */
void fg_cli_print_runtimes(FILE *out);

/* True when arg is -h or --help. */
int fg_cli_is_help(const char *arg);

extern const struct fg_cmd fg_cmd_version;
extern const struct fg_cmd fg_cmd_forge;
extern const struct fg_cmd fg_cmd_inspect;
extern const struct fg_cmd fg_cmd_serve;
extern const struct fg_cmd fg_cmd_tensors;
extern const struct fg_cmd fg_cmd_verdict;

#endif
