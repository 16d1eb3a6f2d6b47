/*
 * main.c: the `forged` entry point: dispatch to a subcommand of the table,
 * top-level --help and --version, and the global --color option.
 */
#include "daemon/cli.h"

#include <signal.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "forge/model/runtimes.h"
#include "forge/source/checkpoint.h"

static const struct fg_cmd *const commands[] = {
	&fg_cmd_forge,
	&fg_cmd_inspect,
	&fg_cmd_serve,
	&fg_cmd_tensors,
	&fg_cmd_verdict,
	&fg_cmd_version,
	&fg_cmd_jobs,
	&fg_cmd_artifacts,
	&fg_cmd_fleet,
	&fg_cmd_help,
	&fg_cmd_completion,
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

enum fg_color_mode fg_cli_color_mode = FG_COLOR_AUTO;

const struct fg_cmd *const *fg_cli_commands(size_t *n)
{
	*n = N_COMMANDS;
	return commands;
}

const struct fg_cmd *fg_cli_find(const char *name)
{
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(name, commands[i]->name) == 0)
			return commands[i];
	return NULL;
}

const struct fg_subcmd *fg_cli_find_sub(const struct fg_cmd *cmd, const char *name)
{
	for (const struct fg_subcmd *s = cmd->subs; s && s->name; s++)
		if (strcmp(name, s->name) == 0)
			return s;
	return NULL;
}

void fg_cli_print_help(const struct fg_cmd *cmd, FILE *out)
{
	if (!cmd->subs) {
		fputs(cmd->usage, out);
		return;
	}
	for (const struct fg_subcmd *s = cmd->subs; s->name; s++)
		fprintf(out, "%s forged %s %s%s%s\n", s == cmd->subs ? "usage:" : "      ", cmd->name, s->name,
			*s->synopsis ? " " : "", s->synopsis);
	if (cmd->common)
		fprintf(out, "options of every %s subcommand: %s\n", cmd->name, cmd->common);
	fputc('\n', out);
	for (const struct fg_subcmd *s = cmd->subs; s->name; s++)
		fprintf(out, "  %-8s %s\n", s->name, s->summary);
	fputc('\n', out);
	fputs(cmd->usage, out);
}

int fg_cli_color(FILE *out)
{
	const char *no_color = getenv("NO_COLOR"), *term = getenv("TERM");

	if (fg_cli_color_mode != FG_COLOR_AUTO)
		return fg_cli_color_mode == FG_COLOR_ALWAYS;
	return isatty(fileno(out)) && !(no_color && *no_color) && term && *term && strcmp(term, "dumb") != 0;
}

/*
 * Take --color=WHEN and --color WHEN out of argv (before a "--"), wherever
 * they stand, so that every command accepts them.  Returns the new argc, or
 * -1 after printing an error.
 */
static int take_color(int argc, char **argv)
{
	static const char *const names[] = { "auto", "always", "never" };
	int out = 1;

	for (int i = 1; i < argc; i++) {
		const char *v = NULL;
		size_t k;

		if (strcmp(argv[i], "--") == 0) {
			while (i < argc)
				argv[out++] = argv[i++];
			break;
		}
		if (strncmp(argv[i], "--color=", 8) == 0) {
			v = argv[i] + 8;
		} else if (strcmp(argv[i], "--color") == 0) {
			if (i + 1 >= argc) {
				fprintf(stderr, "forged: --color needs a value: auto, always or never\n");
				return -1;
			}
			v = argv[++i];
		} else {
			argv[out++] = argv[i];
			continue;
		}
		for (k = 0; k < 3 && strcmp(v, names[k]) != 0; k++)
			;
		if (k == 3) {
			fprintf(stderr, "forged: --color '%s' is not one of auto, always, never\n", v);
			return -1;
		}
		fg_cli_color_mode = (enum fg_color_mode)k;
	}
	argv[out] = NULL;
	return out;
}

int fg_cli_fail(const struct fg_err *err)
{
	fprintf(stderr, "forged: error: %s\n", err->msg[0] ? err->msg : fg_err_kind(err->code));
	return fg_err_exit_code(err->code);
}

int fg_cli_usage_error(const struct fg_cmd *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "forged %s: ", cmd->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: %.*s\n", (int)strcspn(cmd->usage, "\n"), cmd->usage);
	return FG_EXIT_USAGE;
}

static int show_fetch(void *ctx, uint64_t done, uint64_t total)
{
	(void)ctx;
	fprintf(stderr, "\rfetch: %.1f of %.1f MB", (double)done / 1e6, (double)total / 1e6);
	return 0;
}

void fg_cli_pull_opts(struct fg_pull_opts *o, char *cache, size_t len)
{
	fg_ckpt_pull_defaults(o, cache, len);
	if (isatty(STDERR_FILENO))
		o->progress = show_fetch;
}

void fg_cli_print_runtimes(FILE *out)
{
	size_t n = 0;
	const struct fg_runtime *all = fg_runtime_all(&n);

	const struct fg_runtime_alias *al;
	size_t n_al;

	fprintf(out, "\nruntimes (docs/runtimes.md: sources and unconfirmed facts):\n");
	for (size_t i = 0; i < n; i++)
		fprintf(out, "  %-13s %s%s\n", all[i].id, all[i].flags & FG_RT_OPT_IN ? "(opt-in) " : "", all[i].contract);
	al = fg_runtime_aliases(&n_al);
	for (size_t i = 0; i < n_al; i++) {
		fprintf(out, "  %-13s alias:", al[i].alias);
		for (size_t k = 0; al[i].ids[k]; k++)
			fprintf(out, "%s%s", k ? ", " : " ", al[i].ids[k]);
		fprintf(out, " (%s)\n", al[i].doc);
	}
	fprintf(out, "  versioned ids resolve by range: mlx-lm-0.33 -> mlx-lm-0.32, mtplx-2.11.3 -> mtplx-2.11\n");
}

int fg_cli_is_help(const char *arg)
{
	return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

void fg_cli_print_overview(FILE *out)
{
	fprintf(out, "usage: forged COMMAND [ARGS]\n\n"
		"forged decides MTP-head norm conventions and forges sidecars for model-build farms.\n\n"
		"commands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(out, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
	fprintf(out, "\n'forged help COMMAND' (or 'forged COMMAND --help') describes one command.\n"
		"global option: --color=auto|always|never (auto: on a terminal, not with NO_COLOR or TERM=dumb)\n"
		"exit codes: 0 ok, 1 error verdicts (do not ship), 2 bad usage or input, 3 internal failure\n"
		"  (client commands: 1 refused or failed job, error verdict; 2 request refused by the server (4xx);\n"
		"   3 server or transport failure: 5xx, connection refused, timeout)\n");
}

int main(int argc, char **argv)
{
	/* libcurl writes to sockets: a closed peer must be an error, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	argc = take_color(argc, argv);
	if (argc < 0)
		return FG_EXIT_USAGE;
	if (argc < 2) {
		fg_cli_print_overview(stderr);
		return FG_EXIT_USAGE;
	}
	if (fg_cli_is_help(argv[1])) {
		fg_cli_print_overview(stdout);
		return FG_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0)
		return fg_cmd_version.run(argc - 1, argv + 1);
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(argv[1], commands[i]->name) == 0)
			return commands[i]->run(argc - 1, argv + 1);
	fprintf(stderr, "forged: unknown command '%s'\n", argv[1]);
	fg_cli_print_overview(stderr);
	return FG_EXIT_USAGE;
}
