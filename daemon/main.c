/*
 * main.c: the `forged` entry point: dispatch to a subcommand of the table,
 * top-level --help and --version.
 */
#include "daemon/cli.h"

#include <signal.h>
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
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

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

	fprintf(out, "\nruntimes:\n");
	for (size_t i = 0; i < n; i++)
		fprintf(out, "  %-13s %s\n", all[i].id, all[i].contract);
}

int fg_cli_is_help(const char *arg)
{
	return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

static void print_overview(FILE *out)
{
	fprintf(out, "usage: forged COMMAND [ARGS]\n\n"
		"forged decides MTP-head norm conventions and forges sidecars for model-build farms.\n\n"
		"commands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(out, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
	fprintf(out, "\n'forged COMMAND --help' describes one command.\n"
		"exit codes: 0 ok, 1 error verdicts (do not ship), 2 bad usage or input, 3 internal failure\n");
}

int main(int argc, char **argv)
{
	/* libcurl writes to sockets: a closed peer must be an error, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		print_overview(stderr);
		return FG_EXIT_USAGE;
	}
	if (fg_cli_is_help(argv[1])) {
		print_overview(stdout);
		return FG_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0)
		return fg_cmd_version.run(argc - 1, argv + 1);
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(argv[1], commands[i]->name) == 0)
			return commands[i]->run(argc - 1, argv + 1);
	fprintf(stderr, "forged: unknown command '%s'\n", argv[1]);
	print_overview(stderr);
	return FG_EXIT_USAGE;
}
