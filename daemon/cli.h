/*
 * cli.h: the subcommands of `forged` and what they share.
 *
 * Each subcommand is a row of the table in main.c: a name, a one-line summary,
 * its usage text and its entry point.  Entry points return the process exit
 * code of docs/interfaces.md section 2 (0 clean, 1 error verdicts, 2 bad usage or
 * input, 3 internal failure or a failure of forged's own state: FG_ESTATE,
 * FG_ENOSPC) and print errors on stderr themselves.
 */
#ifndef FG_CLI_H
#define FG_CLI_H

#include <stdio.h>

#include "daemon/args.h"
#include "forge/core/error.h"
#include "forge/core/version.h"

enum fg_exit {
	FG_EXIT_OK = 0,
	FG_EXIT_VERDICT = 1,
	FG_EXIT_USAGE = 2,
	FG_EXIT_INTERNAL = 3,
	FG_EXIT_STATE = 3,     /* forged's own state (database, state folder, cache) failed */
};

/*
 * A subcommand of a command group (`forged jobs submit`): its name, its
 * synopsis (what follows "forged CMD NAME") and a one-line summary.  Help,
 * completions and the client's option checks all read the synopsis: an
 * option is allowed for a subcommand exactly when its synopsis (or the
 * group's common synopsis) names it.
 */
struct fg_subcmd {
	const char *name;
	const char *synopsis;
	const char *summary;
};

struct fg_cmd {
	const char *name;
	const char *summary;
	const char *usage;   /* full --help text; for a group, the text after the synopses */
	int (*run)(int argc, char **argv);
	const struct fg_subcmd *subs;  /* a group's subcommands (ended by a NULL name), else NULL */
	const char *common;            /* a group's options that every subcommand takes, or NULL */
	/*
	 * The getopt_long table the command parses with (completions are made
	 * from it), and what its help prints after the usage text (the valid
	 * values of its options, such as the runtime ids), or NULL.
	 */
	const struct option *(*options)(void);
	void (*help_extra)(FILE *out);
};

/*
 * Whether a command frees what it built before it returns.  A one-shot
 * command's memory goes back with the process, and walking a 400,000-tensor
 * inspection to free it cost 7 ms of CPU; a sanitizer build frees it all,
 * so that LeakSanitizer still sees every allocation accounted for.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FG_CLI_FREE_AT_EXIT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FG_CLI_FREE_AT_EXIT 1
#endif
#endif
#ifndef FG_CLI_FREE_AT_EXIT
#define FG_CLI_FREE_AT_EXIT 0
#endif

/* The command table of main.c, in overview order. */
const struct fg_cmd *const *fg_cli_commands(size_t *n);

/* The command called name, or NULL. */
const struct fg_cmd *fg_cli_find(const char *name);

/* The subcommand of cmd called name, or NULL. */
const struct fg_subcmd *fg_cli_find_sub(const struct fg_cmd *cmd, const char *name);

/* Print the overview of `forged --help`: every command, the global option, exit codes. */
void fg_cli_print_overview(FILE *out);

/*
 * Print a command's help (for a group: every synopsis, then the usage text),
 * the global options, then its help_extra.
 */
void fg_cli_print_help(const struct fg_cmd *cmd, FILE *out);

/* Print "forged: error: MSG" for err and return the exit code for its kind. */
int fg_cli_fail(const struct fg_err *err);

/* Print "forged CMD: MSG" and the command's synopsis (its usage up to the first blank line); returns FG_EXIT_USAGE. */
int fg_cli_usage_error(const struct fg_cmd *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Parse the argv of a command without subcommands (args.h): with --help its
 * help is printed (exit 0); else the first error, or a count of positional
 * arguments outside min_pos..max_pos ("missing NAMES", names saying what
 * they are), is a usage error (exit 2).  Returns FG_CLI_RUN when the command
 * is to run, else the exit code.
 */
enum { FG_CLI_RUN = -1 };
int fg_cli_parse(const struct fg_cmd *cmd, struct fg_args *a, int argc, char **argv, const char *shortopts,
		 const struct option *longopts, fg_args_fn handle, void *ctx, size_t min_pos, size_t max_pos,
		 const char *names);

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


extern const struct fg_cmd fg_cmd_version;
extern const struct fg_cmd fg_cmd_forge;
extern const struct fg_cmd fg_cmd_verify_originals;
extern const struct fg_cmd fg_cmd_inspect;
extern const struct fg_cmd fg_cmd_serve;
extern const struct fg_cmd fg_cmd_tensors;
extern const struct fg_cmd fg_cmd_verdict;
extern const struct fg_cmd fg_cmd_jobs;
extern const struct fg_cmd fg_cmd_artifacts;
extern const struct fg_cmd fg_cmd_fleet;
extern const struct fg_cmd fg_cmd_help;
extern const struct fg_cmd fg_cmd_completion;

#endif
