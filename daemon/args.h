/*
 * args.h: the one command-line grammar of every `forged` command, and the
 * options every command takes (docs/interfaces.md section 1).
 *
 * Every command parses its argv with getopt_long through fg_args_parse:
 * options and arguments in any order, long options as --opt=value or
 * --opt value, unambiguous abbreviations of long options, short options
 * (bundled: -wh), and "--" ending the options.  Errors read alike in every
 * command: "unknown option '--frob'" (with the nearest option when one is
 * close: "did you mean --target?"), "ambiguous option '--s': --server,
 * --state", "--out needs a value", "--json takes no value"; a handler's
 * message for a bad value names the option, the value and the valid ones.
 *
 * The global options (FG_ARGS_GLOBAL_LONGOPTS) are in every command's table
 * and also accepted before the command (main.c): -h/--help,
 * --color=auto|always|never and --json-style=auto|pretty|compact.
 */
#ifndef FG_ARGS_H
#define FG_ARGS_H

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

/* getopt_long values of the global options; a command's own options use other values. */
enum {
	FG_OPT_HELP = 'h',
	FG_OPT_COLOR = 900,
	FG_OPT_JSON_STYLE,
};

/* The global long options, to put in every command's table. */
#define FG_ARGS_GLOBAL_LONGOPTS \
	{ "help", no_argument, NULL, FG_OPT_HELP }, \
	{ "color", required_argument, NULL, FG_OPT_COLOR }, \
	{ "json-style", required_argument, NULL, FG_OPT_JSON_STYLE }

/* The global short options, to end a command's short options with. */
#define FG_ARGS_GLOBAL_SHORTOPTS "h"

/* The synopsis of the global options (help, completions and forged(1) read it). */
#define FG_ARGS_GLOBAL_SYNOPSIS "[-h|--help] [--color=auto|always|never] [--json-style=auto|pretty|compact]"

/*
 * Colour: with auto, colour only on a terminal, and never when NO_COLOR is
 * set or TERM is "dumb" or unset.
 */
enum fg_color_mode { FG_COLOR_AUTO, FG_COLOR_ALWAYS, FG_COLOR_NEVER };
extern enum fg_color_mode fg_cli_color_mode;
int fg_cli_color(FILE *out);

/*
 * JSON documents: every document a command prints is pretty (cJSON's
 * layout, tab-indented) on a terminal and compact (one line) otherwise,
 * whatever its kind; --json-style=pretty or compact overrides.
 */
enum fg_json_style { FG_JSON_AUTO, FG_JSON_PRETTY, FG_JSON_COMPACT };
extern enum fg_json_style fg_cli_json_style;

/* True when a document printed on out is to be pretty. */
int fg_cli_json_pretty(FILE *out);

/*
 * Print doc on stdout in the style of fg_cli_json_pretty, with a final
 * newline.  Returns 0, or 3 (FG_EXIT_INTERNAL) after printing the error
 * when memory or stdout fails.  doc stays the caller's.
 */
int fg_cli_print_json(const cJSON *doc);

/*
 * Print item on out as part of a document being streamed: pretty at
 * nesting depth (each line after the first indented by depth tabs, as
 * cJSON_Print would place it) or compact.  Returns 0, or -1 when out of
 * memory.  item stays the caller's.
 */
int fg_cli_put_json(FILE *out, const cJSON *item, int pretty, int depth);

/* One parse of a command line. */
#define FG_ARGS_MAX_POS 16
#define FG_ARGS_MAX_SEEN 64

struct fg_args {
	const char *pos[FG_ARGS_MAX_POS];    /* positional arguments in order (borrowed from argv) */
	size_t n_pos;
	const char *seen[FG_ARGS_MAX_SEEN];  /* the long names of the options given, in order */
	size_t n_seen;
	int help;                            /* -h or --help was given */
	int end;                             /* argv index after the options (with "+": the first argument) */
	char error[2048];                    /* the first error, "" when none */
};

/*
 * handle(ctx, val, arg) receives each option that is not a global one: val
 * as in longopts (or the short option's character), arg its value or NULL.
 * It returns 0, or fg_args_bad(...) for a bad value.
 */
typedef int (*fg_args_fn)(void *ctx, int val, const char *arg);

/*
 * Parse argv[1..argc) (argv[0] is the command's name) with getopt_long.
 * shortopts lists the short options as getopt does (without a leading ':'
 * or '-'; a leading '+' stops the parse at the first argument, which with
 * all after it lands in a->pos: main.c's options before the command);
 * longopts ends with a zeroed row.  Global options are applied
 * here.  Returns 0 with *a filled; a->error holds the first error (the
 * parse goes on, so a->help is known either way): the caller prints it
 * with its usage.
 */
int fg_args_parse(struct fg_args *a, int argc, char **argv, const char *shortopts,
		  const struct option *longopts, fg_args_fn handle, void *ctx);

/* Record the first error of the parse under way (printf-style); returns -1 for a handler to return. */
int fg_args_bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The valid values, for messages and help. */

/* 0 when id is a runtime id (a row, an alias, a versioned id), else fg_args_bad() listing them all. */
int fg_args_check_runtime(const char *option, const char *id);

/* The same for a comma-separated list of runtime ids (--target a,b): every entry checked. */
int fg_args_check_targets(const char *option, const char *list);

/*
 * Append a --target value to buf (len bytes) as list entries: repeated
 * options add up ("--target a --target b" is "a,b").  fg_args_bad() when
 * it does not fit.
 */
int fg_args_add_target(char *buf, size_t len, const char *value);

/*
 * The same for a runtime as a serving host names it (a fleet report): also
 * a version string (fg_runtime_find_reported: "mlx-lm 0.33.1").
 */
int fg_args_check_reported_runtime(const char *option, const char *id);

/* 0 when text is a quantization policy, else fg_args_bad() listing the policies. */
int fg_args_check_policy(const char *option, const char *text);

/* Index of value in the NULL-terminated names, else fg_args_bad() listing them ("--color 'x' is not one of ..."). */
int fg_args_pick(const char *option, const char *value, const char *const *names);

#endif
