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

#include "forge/model/runtimes.h"

static int run_help(int argc, char **argv);
static int run_completion(int argc, char **argv);

const struct fg_cmd fg_cmd_help = {
	.name = "help",
	.summary = "describe forged or one of its commands",
	.usage = "forged help [COMMAND]\n\n"
		 "Prints the help of COMMAND (the same as 'forged COMMAND --help'), or without\n"
		 "COMMAND the list of commands.  Exit 2 for an unknown command.  Every command,\n"
		 "exit code and document: forged(1), and docs/interfaces.md in the source tree.\n",
	.run = run_help,
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
};

static int run_help(int argc, char **argv)
{
	const struct fg_cmd *cmd;

	if (argc < 2) {
		fg_cli_print_overview(stdout);
		return FG_EXIT_OK;
	}
	if (fg_cli_is_help(argv[1])) {
		fputs(fg_cmd_help.usage, stdout);
		return FG_EXIT_OK;
	}
	cmd = fg_cli_find(argv[1]);
	if (!cmd) {
		fprintf(stderr, "forged help: unknown command '%s'\n", argv[1]);
		fg_cli_print_overview(stderr);
		return FG_EXIT_USAGE;
	}
	if (argc > 2 && (!cmd->subs || !fg_cli_find_sub(cmd, argv[2]) || argc > 3)) {
		fprintf(stderr, "forged help: unexpected argument '%s'\n", argv[2]);
		return FG_EXIT_USAGE;
	}
	fg_cli_print_help(cmd, stdout);
	return FG_EXIT_OK;
}

/* ---- the options of a synopsis ---- */

#define MAX_OPTS 64

struct opt {
	char name[48];     /* "--target" */
	char alias[4];     /* "-o", or "" */
	char arg[512];     /* value completion: words, "@files", "@dirs", "@none"; "" for a flag */
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

/* The options of a command, or of one of its subcommands. */
static void options_of(const struct fg_cmd *cmd, const struct fg_subcmd *sub, struct optset *set)
{
	memset(set, 0, sizeof(*set));
	if (sub) {
		scan_options(set, sub->synopsis, 0);
		if (cmd->common)
			scan_options(set, cmd->common, 0);
	} else {
		scan_options(set, cmd->usage, 1);
	}
	if (set->n < MAX_OPTS && strcmp(cmd->name, "help") != 0) {
		int has = 0;

		for (size_t i = 0; i < set->n; i++)
			has |= strcmp(set->o[i].name, "--help") == 0;
		if (!has)
			snprintf(set->o[set->n++].name, sizeof(set->o[0].name), "--help");
	}
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
	printf("\t--color) echo \"auto always never\" ;;\n\tesac\n}\n\n");
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
	      "\t\tCOMPREPLY=($(compgen -W \"$(_forged_commands) --help --version --color\" -- \"$cur\"))\n"
	      "\telif [[ -z $sub && -n $(_forged_subs \"$cmd\") ]]; then\n"
	      "\t\tCOMPREPLY=($(compgen -W \"$(_forged_subs \"$cmd\") --help\" -- \"$cur\"))\n"
	      "\telif [[ $cur == -* ]]; then\n"
	      "\t\tCOMPREPLY=($(compgen -W \"$(_forged_opts \"$cmd${sub:+ $sub}\") --color\" -- \"$cur\"))\n"
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
	      "\t\tif [[ $cur == -* ]]; then compadd -- --help --version --color; else _forged_described_commands; fi\n"
	      "\telif [[ -z $sub && -n $(_forged_subs \"$cmd\") ]]; then\n"
	      "\t\tif [[ $cur == -* ]]; then compadd -- --help; else _forged_described_subs \"$cmd\"; fi\n"
	      "\telif [[ $cur == -* ]]; then\n"
	      "\t\tcompadd -- ${=$(_forged_opts \"$cmd${sub:+ $sub}\")} --color\n"
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
	if (argc == 2 && fg_cli_is_help(argv[1])) {
		fg_cli_print_help(&fg_cmd_completion, stdout);
		return FG_EXIT_OK;
	}
	if (argc != 2 || !fg_cli_find_sub(&fg_cmd_completion, argv[1])) {
		if (argc == 2)
			fprintf(stderr, "forged completion: unknown shell '%s': one of bash, zsh\n", argv[1]);
		else
			fprintf(stderr, "forged completion: %s: one of bash, zsh\n",
				argc < 2 ? "missing shell" : "one shell only");
		fprintf(stderr, "usage: forged completion bash|zsh\n");
		return FG_EXIT_USAGE;
	}
	if (strcmp(argv[1], "bash") == 0)
		print_bash();
	else
		print_zsh();
	if (fflush(stdout) != 0) {
		fprintf(stderr, "forged completion: writing the script failed\n");
		return FG_EXIT_INTERNAL;
	}
	return FG_EXIT_OK;
}
