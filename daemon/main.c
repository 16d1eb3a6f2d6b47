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
	&fg_cmd_verify_originals,
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
	} else {
		for (const struct fg_subcmd *s = cmd->subs; s->name; s++)
			fprintf(out, "%s forged %s %s%s%s\n", s == cmd->subs ? "usage:" : "      ", cmd->name,
				s->name, *s->synopsis ? " " : "", s->synopsis);
		if (cmd->common)
			fprintf(out, "options of every %s subcommand: %s\n", cmd->name, cmd->common);
		fputc('\n', out);
		for (const struct fg_subcmd *s = cmd->subs; s->name; s++)
			fprintf(out, "  %-8s %s\n", s->name, s->summary);
		fputc('\n', out);
		fputs(cmd->usage, out);
	}
	fprintf(out, "\nglobal options: " FG_ARGS_GLOBAL_SYNOPSIS "\n");
	if (cmd->help_extra)
		cmd->help_extra(out);
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
	if (cmd->subs) {
		fprintf(stderr, "\n'forged help %s' lists its subcommands\n", cmd->name);
	} else {
		const char *end = strstr(cmd->usage, "\n\n");

		fprintf(stderr, "\nusage: %.*s\n", (int)(end ? end - cmd->usage : (long)strcspn(cmd->usage, "\n")),
			cmd->usage);
	}
	return FG_EXIT_USAGE;
}

int fg_cli_parse(const struct fg_cmd *cmd, struct fg_args *a, int argc, char **argv, const char *shortopts,
		 const struct option *longopts, fg_args_fn handle, void *ctx, size_t min_pos, size_t max_pos,
		 const char *names)
{
	fg_args_parse(a, argc, argv, shortopts, longopts, handle, ctx);
	if (a->help) {
		fg_cli_print_help(cmd, stdout);
		return FG_EXIT_OK;
	}
	if (a->error[0])
		return fg_cli_usage_error(cmd, "%s", a->error);
	if (a->n_pos < min_pos)
		return fg_cli_usage_error(cmd, "missing %s", names);
	if (a->n_pos > max_pos && max_pos == 1)
		return fg_cli_usage_error(cmd, "one %s only (got '%s' and '%s')", names, a->pos[0], a->pos[1]);
	if (a->n_pos > max_pos)
		return fg_cli_usage_error(cmd, "unexpected argument '%s'", a->pos[max_pos]);
	return FG_CLI_RUN;
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

void fg_cli_print_overview(FILE *out)
{
	fprintf(out, "usage: forged [GLOBAL OPTIONS] COMMAND [ARGS]\n\n"
		"forged decides MTP-head norm conventions and forges sidecars for model-build farms.\n\n"
		"commands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(out, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
	fprintf(out, "\n'forged help COMMAND' (or 'forged COMMAND --help') describes one command.\n"
		"Every command reads its options with getopt_long: in any order among the arguments,\n"
		"--opt=value or --opt value, -h for --help, and '--' ends the options.\n"
		"global options, before or after the command:\n"
		"  --color=auto|always|never         colour (auto: on a terminal, not with NO_COLOR or TERM=dumb)\n"
		"  --json-style=auto|pretty|compact  JSON documents (auto: pretty on a terminal, else compact)\n"
		"  --version                         the same as 'forged version' (before the command only)\n"
		"exit codes: 0 ok, 1 error verdicts (do not ship), 2 bad usage or input, 3 internal failure\n"
		"  (client commands: 1 refused or failed job, error verdict; 2 request refused by the server (4xx);\n"
		"   3 server or transport failure: 5xx, connection refused, timeout)\n");
}

enum { OPT_VERSION = 'V' + 1000 };

static const struct option main_options[] = {
	FG_ARGS_GLOBAL_LONGOPTS,
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

static int main_option(void *ctx, int val, const char *arg)
{
	(void)arg;
	if (val == OPT_VERSION)
		*(int *)ctx = 1;
	return 0;
}

int main(int argc, char **argv)
{
	struct fg_args a;
	int version = 0;

	/* libcurl writes to sockets: a closed peer must be an error, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	/* `forged --version --json` is `forged version --json`. */
	if (argc >= 2 && strcmp(argv[1], "--version") == 0)
		return fg_cmd_version.run(argc - 1, argv + 1);
	fg_args_parse(&a, argc, argv, "+" FG_ARGS_GLOBAL_SHORTOPTS, main_options, main_option, &version);
	if (a.help) {
		fg_cli_print_overview(stdout);
		return FG_EXIT_OK;
	}
	if (a.error[0]) {
		fprintf(stderr, "forged: %s\n'forged --help' lists the commands and the global options\n", a.error);
		return FG_EXIT_USAGE;
	}
	if (version)
		return fg_cmd_version.run(argc - a.end + 1, argv + a.end - 1);
	if (a.end >= argc) {
		fg_cli_print_overview(stderr);
		return FG_EXIT_USAGE;
	}
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(argv[a.end], commands[i]->name) == 0)
			return commands[i]->run(argc - a.end, argv + a.end);
	fprintf(stderr, "forged: unknown command '%s'\n", argv[a.end]);
	fg_cli_print_overview(stderr);
	return FG_EXIT_USAGE;
}
