/*
 * cmd_help.c: `forged help [COMMAND]` and `forged completion bash|zsh`.
 *
 * Completions are generated from the command table (main.c): the command
 * names and summaries, each group's subcommands, and the options each
 * synopsis names (for a command without subcommands, the first paragraph of
 * its usage text).  An option followed by a metavariable takes a value:
 * runtime ids for --target and --runtime (forge/model/runtimes.h), the
 * listed words for a list such as keep|match|mxfp4, files for FILE, SOURCE
 * and *.json, folders for DIR, nothing for other placeholders.
 */
#include "daemon/cli.h"

#include <stdio.h>
#include <string.h>

#include "forge/model/family.h"
#include "forge/model/runtimes.h"
#include "forge/model/verdicts.h"

static int run_help(int argc, char **argv);
static int run_completion(int argc, char **argv);

/* help and completion take the global options only. */
static const struct option global_options[] = {
	FG_ARGS_GLOBAL_LONGOPTS,
	{ NULL, 0, NULL, 0 },
};

static const struct option *global_longopts(void)
{
	return global_options;
}

const struct fg_cmd fg_cmd_help = {
	.name = "help",
	.summary = "describe forged or one of its commands",
	.usage = "forged help [COMMAND]\n\n"
		 "Prints the help of COMMAND (the same as 'forged COMMAND --help'), or without\n"
		 "COMMAND the list of commands.  Exit 2 for an unknown command.  Every command,\n"
		 "exit code and document: forged(1), and docs/interfaces.md in the source tree.\n",
	.run = run_help,
	.options = global_longopts,
};

static const struct fg_subcmd completion_subs[] = {
	{ "bash", "", "print the bash completion script" },
	{ "zsh", "", "print the zsh completion script" },
	{ NULL, NULL, NULL },
};

const struct fg_cmd fg_cmd_completion = {
	.name = "completion",
	.summary = "print the bash or zsh completion script",
	.usage = "Prints a completion script generated from forged's own command table.\n"
		 "bash:  source <(forged completion bash), or install it as\n"
		 "       /usr/share/bash-completion/completions/forged (make install does).\n"
		 "zsh:   forged completion zsh > ~/.zfunc/_forged, with ~/.zfunc in $fpath before\n"
		 "       compinit (make install puts _forged in $(PREFIX)/share/zsh/site-functions).\n",
	.run = run_completion,
	.subs = completion_subs,
	.options = global_longopts,
};

static int run_help(int argc, char **argv)
{
	const struct fg_cmd *cmd;
	struct fg_args a;
	int rc;

	rc = fg_cli_parse(&fg_cmd_help, &a, argc, argv, FG_ARGS_GLOBAL_SHORTOPTS, global_options, NULL, NULL, 0, 2,
			  "COMMAND");
	if (rc != FG_CLI_RUN)
		return rc;
	if (!a.n_pos) {
		fg_cli_print_overview(stdout);
		return FG_EXIT_OK;
	}
	cmd = fg_cli_find(a.pos[0]);
	if (!cmd) {
		fprintf(stderr, "forged help: unknown command '%s'\n", a.pos[0]);
		fg_cli_print_overview(stderr);
		return FG_EXIT_USAGE;
	}
	if (a.n_pos > 1 && (!cmd->subs || !fg_cli_find_sub(cmd, a.pos[1])))
		return fg_cli_usage_error(&fg_cmd_help, "unexpected argument '%s'", a.pos[1]);
	fg_cli_print_help(cmd, stdout);
	return FG_EXIT_OK;
}

/* ---- the options of a synopsis ---- */

#define MAX_OPTS 64

struct opt {
	char name[48];     /* "--target" */
	char alias[4];     /* "-o", or "" */
	char arg[2048];    /* value completion: words, "@files", "@dirs", "@none"; "" for a flag */
};

struct optset {
	struct opt o[MAX_OPTS];
	size_t n;
};

static int is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* How to complete an option's value given its metavariable (tok of len n). */
static void value_kind(const char *name, const char *tok, size_t n, char *out, size_t len)
{
	size_t k, used = 0;
	const struct fg_runtime *rt;

	if (strcmp(name, "--target") == 0 || strcmp(name, "--runtime") == 0) {
		const struct fg_runtime_alias *al;
		size_t n_al;

		rt = fg_runtime_all(&k);
		out[0] = '\0';
		for (size_t i = 0; i < k && used < len; i++)
			used += (size_t)snprintf(out + used, len - used, "%s%s", i ? " " : "", rt[i].id);
		al = fg_runtime_aliases(&n_al);
		for (size_t i = 0; i < n_al && used < len; i++)
			used += (size_t)snprintf(out + used, len - used, " %s", al[i].alias);
		return;
	}
	if (strcmp(name, "--verdict") == 0) {
		out[0] = '\0';
		for (size_t i = 0; i < FG_VERDICT_COUNT && used < len; i++)
			used += (size_t)snprintf(out + used, len - used, "%s%s", i ? " " : "", fg_verdict_table[i].name);
		return;
	}
	if (strcmp(name, "--family") == 0) {
		const struct fg_family *const *fams = fg_family_all(&k);

		out[0] = '\0';
		for (size_t i = 0; i < k && used < len; i++)
			used += (size_t)snprintf(out + used, len - used, "%s ", fams[i]->id);
		if (used < len)
			snprintf(out + used, len - used, "%s", fg_family_unknown.id);
		return;
	}
	if (memchr(tok, '|', n)) {
		/* A list of words: keep|match|affine:BITS:GROUP|mxfp4 offers keep, match, mxfp4. */
		const char *p = tok, *end = tok + n;

		out[0] = '\0';
		while (p < end) {
			size_t w = strcspn(p, "|");
			int lower = 1;

			if (p + w > end)
				w = (size_t)(end - p);
			for (size_t i = 0; i < w; i++)
				if (p[i] >= 'A' && p[i] <= 'Z')
					lower = 0;
			if (lower && w && used < len)
				used += (size_t)snprintf(out + used, len - used, "%s%.*s", used ? " " : "", (int)w, p);
			p += w + 1;
		}
		if (used)
			return;
	}
	if ((n == 4 && memcmp(tok, "FILE", 4) == 0) || (n == 6 && memcmp(tok, "SOURCE", 6) == 0) ||
	    (n > 5 && memcmp(tok + n - 5, ".json", 5) == 0))
		snprintf(out, len, "@files");
	else if (n == 3 && memcmp(tok, "DIR", 3) == 0)
		snprintf(out, len, "@dirs");
	else
		snprintf(out, len, "@none");
}

/* Add every option text names (up to the first blank line when paragraph is set). */
static void scan_options(struct optset *set, const char *text, int paragraph)
{
	const char *end = paragraph && strstr(text, "\n\n") ? strstr(text, "\n\n") : text + strlen(text);

	for (const char *p = text; p < end && (p = strstr(p, "--")) != NULL && p < end; p += 2) {
		struct opt o;
		size_t n = 0;
		int dup = 0;

		if (p > text && is_name_char(p[-1]))
			continue;
		memset(&o, 0, sizeof(o));
		while (is_name_char(p[2 + n]) && n < sizeof(o.name) - 3)
			n++;
		if (!n)
			continue;
		snprintf(o.name, sizeof(o.name), "--%.*s", (int)n, p + 2);
		if (p - text >= 3 && p[-1] == '|' && p[-3] == '-' && p[-2] >= 'a' && p[-2] <= 'z')
			snprintf(o.alias, sizeof(o.alias), "-%c", p[-2]);
		if (p[2 + n] == ' ' || p[2 + n] == '=') {
			const char *tok = p + 3 + n;
			size_t tn = strcspn(tok, " ]\n");

			if (tn && tok[0] != '[' && tok[0] != '-' && tok[0] != '|' &&
			    ((tok[0] >= 'A' && tok[0] <= 'Z') || memchr(tok, '|', tn)))
				value_kind(o.name, tok, tn, o.arg, sizeof(o.arg));
		}
		for (size_t i = 0; i < set->n; i++)
			if (strcmp(set->o[i].name, o.name) == 0)
				dup = 1;
		if (!dup && set->n < MAX_OPTS)
			set->o[set->n++] = o;
	}
}

static int in_set(const struct optset *set, const char *name)
{
	for (size_t i = 0; i < set->n; i++)
		if (strcmp(set->o[i].name, name) == 0)
			return 1;
	return 0;
}

/*
 * The options of a command, or of one of its subcommands, as its getopt_long
 * table has them: for a command, every option of its table; for a
 * subcommand, those of the group's table its synopsis (or the group's
 * common synopsis) names; then the global options.  How a value completes
 * comes from the metavariable the synopsis writes after the option.
 */
static void options_of(const struct fg_cmd *cmd, const struct fg_subcmd *sub, struct optset *set)
{
	const struct option *table = cmd->options ? cmd->options() : NULL;
	struct optset named, global;

	memset(set, 0, sizeof(*set));
	memset(&named, 0, sizeof(named));
	memset(&global, 0, sizeof(global));
	if (sub) {
		scan_options(&named, sub->synopsis, 0);
		if (cmd->common)
			scan_options(&named, cmd->common, 0);
	} else {
		scan_options(&named, cmd->usage, 1);
	}
	scan_options(&global, FG_ARGS_GLOBAL_SYNOPSIS, 0);
	for (const struct option *o = table; o && o->name && set->n < MAX_OPTS; o++) {
		struct opt one;
		char name[48];

		snprintf(name, sizeof(name), "--%s", o->name);
		if (in_set(&global, name) || (sub && !in_set(&named, name)))
			continue;
		memset(&one, 0, sizeof(one));
		snprintf(one.name, sizeof(one.name), "%s", name);
		for (size_t i = 0; i < named.n; i++)
			if (strcmp(named.o[i].name, name) == 0)
				one = named.o[i];
		/* The table says whether a value follows; the synopsis only how it completes. */
		if (o->has_arg == no_argument)
			one.arg[0] = '\0';
		else if (!one.arg[0])
			snprintf(one.arg, sizeof(one.arg), "@none");
		set->o[set->n++] = one;
	}
	for (size_t i = 0; i < global.n && set->n < MAX_OPTS; i++)
		set->o[set->n++] = global.o[i];
}

/* Every option of every command, once, for the value table. */
static void all_options(struct optset *all)
{
	const struct fg_cmd *const *cmds;
	struct optset one;
	size_t n;

	memset(all, 0, sizeof(*all));
	cmds = fg_cli_commands(&n);
	for (size_t i = 0; i < n; i++) {
		const struct fg_subcmd *s = cmds[i]->subs;

		do {
			options_of(cmds[i], s && s->name ? s : NULL, &one);
			for (size_t k = 0; k < one.n; k++) {
				int dup = 0;

				for (size_t j = 0; j < all->n; j++)
					dup |= strcmp(all->o[j].name, one.o[k].name) == 0;
				if (!dup && all->n < MAX_OPTS)
					all->o[all->n++] = one.o[k];
			}
		} while (s && (++s)->name);
	}
}

static void print_option_names(const struct optset *set)
{
	for (size_t i = 0; i < set->n; i++)
		printf("%s%s", i ? " " : "", set->o[i].name);
}

/* ---- shared shell functions (bash and zsh read them alike) ---- */

static void print_data_functions(void)
{
	const struct fg_cmd *const *cmds = NULL;
	struct optset set;
	size_t n;

	cmds = fg_cli_commands(&n);
	printf("_forged_commands() {\n\techo \"");
	for (size_t i = 0; i < n; i++)
		printf("%s%s", i ? " " : "", cmds[i]->name);
	printf("\"\n}\n\n# _forged_subs CMD: the subcommands of CMD, if it has any.\n_forged_subs() {\n\tcase $1 in\n");
	for (size_t i = 0; i < n; i++) {
		if (!cmds[i]->subs)
			continue;
		printf("\t%s) echo \"", cmds[i]->name);
		for (const struct fg_subcmd *s = cmds[i]->subs; s->name; s++)
			printf("%s%s", s == cmds[i]->subs ? "" : " ", s->name);
		printf("\" ;;\n");
	}
	printf("\tesac\n}\n\n# _forged_opts \"CMD [SUB]\": the options it takes.\n_forged_opts() {\n\tcase $1 in\n");
	for (size_t i = 0; i < n; i++) {
		if (cmds[i]->subs) {
			for (const struct fg_subcmd *s = cmds[i]->subs; s->name; s++) {
				options_of(cmds[i], s, &set);
				printf("\t\"%s %s\") echo \"", cmds[i]->name, s->name);
				print_option_names(&set);
				printf("\" ;;\n");
			}
		} else {
			options_of(cmds[i], NULL, &set);
			printf("\t%s) echo \"", cmds[i]->name);
			print_option_names(&set);
			printf("\" ;;\n");
		}
	}
	printf("\tesac\n}\n\n"
	       "# _forged_arg OPTION: how its value completes: words, @files, @dirs or @none;\n"
	       "# nothing when OPTION takes no value.\n_forged_arg() {\n\tcase $1 in\n");
	all_options(&set);
	for (size_t i = 0; i < set.n; i++)
		if (set.o[i].arg[0])
			printf("\t%s%s%s) echo \"%s\" ;;\n", set.o[i].alias, set.o[i].alias[0] ? "|" : "",
			       set.o[i].name, set.o[i].arg);
	printf("\tesac\n}\n\n");
}

static void print_bash(void)
{
	printf("# bash completion for forged, generated by `forged completion bash` (forged %s).\n"
	       "# Do not edit: regenerate it from the binary.\n\n", FG_VERSION);
	print_data_functions();
	fputs("_forged() {\n"
	      "\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
	      "\tlocal cmd='' sub='' opt='' kind w i\n"
	      "\tCOMPREPLY=()\n"
	      "\t# The command and the subcommand: the first words that are no option or option value.\n"
	      "\tfor ((i = 1; i < COMP_CWORD; i++)); do\n"
	      "\t\tw=${COMP_WORDS[i]}\n"
	      "\t\tcase $w in\n"
	      "\t\t=) i=$((i + 1)); continue ;;\n"
	      "\t\t-*) if [[ ${COMP_WORDS[i+1]} != = && -n $(_forged_arg \"$w\") ]]; then i=$((i + 1)); fi; continue ;;\n"
	      "\t\tesac\n"
	      "\t\tif [[ -z $cmd ]]; then cmd=$w\n"
	      "\t\telif [[ -z $sub && -n $(_forged_subs \"$cmd\") ]]; then sub=$w\n"
	      "\t\tfi\n"
	      "\tdone\n"
	      "\t# An option's value: --opt VALUE, or --opt=VALUE (bash splits at '=').\n"
	      "\tif [[ $cur == = ]]; then opt=$prev; cur=''\n"
	      "\telif [[ $prev == = ]]; then opt=${COMP_WORDS[COMP_CWORD-2]}\n"
	      "\telif [[ $prev == -* ]]; then opt=$prev\n"
	      "\tfi\n"
	      "\tif [[ -n $opt ]]; then\n"
	      "\t\tkind=$(_forged_arg \"$opt\")\n"
	      "\t\tcase $kind in\n"
	      "\t\t'') ;;\n"
	      "\t\t@files) COMPREPLY=($(compgen -f -- \"$cur\")); return 0 ;;\n"
	      "\t\t@dirs) COMPREPLY=($(compgen -d -- \"$cur\")); return 0 ;;\n"
	      "\t\t@none) return 0 ;;\n"
	      "\t\t*) COMPREPLY=($(compgen -W \"$kind\" -- \"$cur\")); return 0 ;;\n"
	      "\t\tesac\n"
	      "\tfi\n"
	      "\tif [[ -z $cmd ]]; then\n"
	      "\t\tCOMPREPLY=($(compgen -W \"$(_forged_commands) --help --version --color --json-style\" -- \"$cur\"))\n"
	      "\telif [[ -z $sub && -n $(_forged_subs \"$cmd\") ]]; then\n"
	      "\t\tCOMPREPLY=($(compgen -W \"$(_forged_subs \"$cmd\") --help\" -- \"$cur\"))\n"
	      "\telif [[ $cur == -* ]]; then\n"
	      "\t\tCOMPREPLY=($(compgen -W \"$(_forged_opts \"$cmd${sub:+ $sub}\")\" -- \"$cur\"))\n"
	      "\telif [[ $cmd == help ]]; then\n"
	      "\t\tCOMPREPLY=($(compgen -W \"$(_forged_commands)\" -- \"$cur\"))\n"
	      "\telse\n"
	      "\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n"
	      "\tfi\n"
	      "\treturn 0\n"
	      "}\n\n"
	      "complete -o filenames -F _forged forged\n", stdout);
}

/* A zsh _describe entry: NAME:SUMMARY with ':' and quotes escaped, in single quotes. */
static void print_described(const char *name, const char *summary)
{
	printf("'%s:", name);
	for (const char *p = summary; *p; p++) {
		if (*p == '\'')
			fputs("'\\''", stdout);
		else if (*p == ':')
			fputs("\\:", stdout);
		else
			putchar(*p);
	}
	printf("'");
}

static void print_zsh(void)
{
	const struct fg_cmd *const *cmds;
	size_t n;

	cmds = fg_cli_commands(&n);
	printf("#compdef forged\n"
	       "# zsh completion for forged, generated by `forged completion zsh` (forged %s).\n"
	       "# Do not edit: regenerate it from the binary.\n\n", FG_VERSION);
	print_data_functions();
	printf("_forged_described_commands() {\n\tlocal -a list\n\tlist=(\n");
	for (size_t i = 0; i < n; i++) {
		printf("\t\t");
		print_described(cmds[i]->name, cmds[i]->summary);
		printf("\n");
	}
	printf("\t)\n\t_describe -t commands 'forged command' list\n}\n\n"
	       "_forged_described_subs() {\n\tlocal -a list\n\tcase $1 in\n");
	for (size_t i = 0; i < n; i++) {
		if (!cmds[i]->subs)
			continue;
		printf("\t%s) list=(", cmds[i]->name);
		for (const struct fg_subcmd *s = cmds[i]->subs; s->name; s++) {
			printf(" ");
			print_described(s->name, s->summary);
		}
		printf(" ) ;;\n");
	}
	fputs("\tesac\n\t_describe -t subcommands \"forged $1 subcommand\" list\n}\n\n"
	      "_forged() {\n"
	      "\tlocal cur=${words[CURRENT]} prev=${words[CURRENT-1]}\n"
	      "\tlocal cmd='' sub='' opt='' kind w i\n"
	      "\tfor ((i = 2; i < CURRENT; i++)); do\n"
	      "\t\tw=${words[i]}\n"
	      "\t\tcase $w in\n"
	      "\t\t--*=*) continue ;;\n"
	      "\t\t-*) if [[ -n $(_forged_arg \"$w\") ]]; then i=$((i + 1)); fi; continue ;;\n"
	      "\t\tesac\n"
	      "\t\tif [[ -z $cmd ]]; then cmd=$w\n"
	      "\t\telif [[ -z $sub && -n $(_forged_subs \"$cmd\") ]]; then sub=$w\n"
	      "\t\tfi\n"
	      "\tdone\n"
	      "\tif [[ $cur == --*=* ]]; then opt=${cur%%=*}; compset -P '*='\n"
	      "\telif [[ $prev == -* ]]; then opt=$prev\n"
	      "\tfi\n"
	      "\tif [[ -n $opt ]]; then\n"
	      "\t\tkind=$(_forged_arg \"$opt\")\n"
	      "\t\tcase $kind in\n"
	      "\t\t'') ;;\n"
	      "\t\t@files) _files; return ;;\n"
	      "\t\t@dirs) _files -/; return ;;\n"
	      "\t\t@none) _message \"value of $opt\"; return ;;\n"
	      "\t\t*) compadd -- ${=kind}; return ;;\n"
	      "\t\tesac\n"
	      "\tfi\n"
	      "\tif [[ -z $cmd ]]; then\n"
	      "\t\tif [[ $cur == -* ]]; then compadd -- --help --version --color --json-style; else _forged_described_commands; fi\n"
	      "\telif [[ -z $sub && -n $(_forged_subs \"$cmd\") ]]; then\n"
	      "\t\tif [[ $cur == -* ]]; then compadd -- --help; else _forged_described_subs \"$cmd\"; fi\n"
	      "\telif [[ $cur == -* ]]; then\n"
	      "\t\tcompadd -- ${=$(_forged_opts \"$cmd${sub:+ $sub}\")}\n"
	      "\telif [[ $cmd == help ]]; then\n"
	      "\t\t_forged_described_commands\n"
	      "\telse\n"
	      "\t\t_files\n"
	      "\tfi\n"
	      "}\n\n"
	      "_forged \"$@\"\n", stdout);
}

static int run_completion(int argc, char **argv)
{
	struct fg_args a;

	fg_args_parse(&a, argc, argv, FG_ARGS_GLOBAL_SHORTOPTS, global_options, NULL, NULL);
	if (a.help) {
		fg_cli_print_help(&fg_cmd_completion, stdout);
		return FG_EXIT_OK;
	}
	if (a.error[0] || a.n_pos != 1 || !fg_cli_find_sub(&fg_cmd_completion, a.pos[0])) {
		if (a.error[0])
			fprintf(stderr, "forged completion: %s\n", a.error);
		else if (a.n_pos == 1)
			fprintf(stderr, "forged completion: unknown shell '%s': one of bash, zsh\n", a.pos[0]);
		else
			fprintf(stderr, "forged completion: %s: one of bash, zsh\n",
				a.n_pos < 1 ? "missing shell" : "one shell only");
		fprintf(stderr, "usage: forged completion bash|zsh\n");
		return FG_EXIT_USAGE;
	}
	if (strcmp(a.pos[0], "bash") == 0)
		print_bash();
	else
		print_zsh();
	if (fflush(stdout) != 0) {
		fprintf(stderr, "forged completion: writing the script failed\n");
		return FG_EXIT_INTERNAL;
	}
	return FG_EXIT_OK;
}
