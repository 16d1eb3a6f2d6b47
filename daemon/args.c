/*
 * args.c: getopt_long for every command, its uniform messages, the global
 * options and the JSON output style (args.h).
 *
 * The parse runs getopt_long in RETURN_IN_ORDER mode ("-" first in the
 * optstring), so arguments and options mix in any order whatever
 * POSIXLY_CORRECT says, and with ':' so that a missing value is told apart
 * from an unknown option.  Messages are composed here, not by getopt, so
 * they can name the option as the user typed it and the nearest valid one.
 */
#include "daemon/args.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "forge/artifact/policy.h"
#include "forge/core/str.h"
#include "forge/model/runtimes.h"

enum fg_color_mode fg_cli_color_mode = FG_COLOR_AUTO;
enum fg_json_style fg_cli_json_style = FG_JSON_AUTO;

static const char *const color_names[] = { "auto", "always", "never", NULL };
static const char *const json_style_names[] = { "auto", "pretty", "compact", NULL };

int fg_cli_color(FILE *out)
{
	const char *no_color = getenv("NO_COLOR"), *term = getenv("TERM");

	if (fg_cli_color_mode != FG_COLOR_AUTO)
		return fg_cli_color_mode == FG_COLOR_ALWAYS;
	return isatty(fileno(out)) && !(no_color && *no_color) && term && *term && strcmp(term, "dumb") != 0;
}

int fg_cli_json_pretty(FILE *out)
{
	if (fg_cli_json_style != FG_JSON_AUTO)
		return fg_cli_json_style == FG_JSON_PRETTY;
	return isatty(fileno(out));
}

int fg_cli_put_json(FILE *out, const cJSON *item, int pretty, int depth)
{
	char *text = pretty ? cJSON_Print(item) : cJSON_PrintUnformatted(item);

	if (!text)
		return -1;
	/* A line at a time (the report of a large checkpoint is tens of KB: fputc per byte was 2% of an inspect). */
	for (const char *p = text, *nl; *p; p = nl + 1) {
		if (!(nl = strchr(p, '\n'))) {
			fputs(p, out);
			break;
		}
		fwrite(p, 1, (size_t)(nl - p) + 1, out);
		for (int d = 0; d < depth; d++)
			fputc('\t', out);
	}
	free(text);
	return 0;
}

int fg_cli_print_json(const cJSON *doc)
{
	if (fg_cli_put_json(stdout, doc, fg_cli_json_pretty(stdout), 0) != 0) {
		fprintf(stderr, "forged: error: out of memory printing the document\n");
		return 3;
	}
	fputc('\n', stdout);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "forged: error: writing output failed\n");
		return 3;
	}
	return 0;
}

/* ---- messages ---- */

/* The parse under way: where fg_args_bad writes. */
static struct fg_args *current;

static void vbad(const char *fmt, va_list ap)
{
	if (current && !current->error[0])
		vsnprintf(current->error, sizeof(current->error), fmt, ap);
}

int fg_args_bad(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vbad(fmt, ap);
	va_end(ap);
	return -1;
}

static void bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bad(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vbad(fmt, ap);
	va_end(ap);
}

int fg_args_check_runtime(const char *option, const char *id)
{
	char list[1024];

	if (fg_runtime_find(id))
		return 0;
	fg_runtime_ids_text(list, sizeof(list));
	return fg_args_bad("%s '%s' is not a runtime: one of %s", option, id, list);
}

int fg_args_check_targets(const char *option, const char *list)
{
	const char *p = list;

	while (p) {
		const char *e;
		size_t len = fg_list_next(&p, &e);
		char id[96];
		int rc;

		if (!len || len >= sizeof(id))
			return fg_args_bad("%s '%s': every entry of the list must be a runtime id", option, list);
		snprintf(id, sizeof(id), "%.*s", (int)len, e);
		if ((rc = fg_args_check_runtime(option, id)) != 0)
			return rc;
	}
	return 0;
}

int fg_args_add_target(char *buf, size_t len, const char *value)
{
	size_t used = strlen(buf);

	if (used + (used ? 1 : 0) + strlen(value) >= len)
		return fg_args_bad("--target: the list is longer than %zu characters", len - 1);
	snprintf(buf + used, len - used, "%s%s", used ? "," : "", value);
	return 0;
}

int fg_args_check_reported_runtime(const char *option, const char *id)
{
	char list[1024];

	if (fg_runtime_find_reported(id, NULL))
		return 0;
	fg_runtime_ids_text(list, sizeof(list));
	return fg_args_bad("%s '%s' is not a runtime: one of %s, or a version string a row covers "
			   "('mlx-lm 0.31.3', 'mtplx==2.12.0')", option, id, list);
}

int fg_args_check_policy(const char *option, const char *text)
{
	struct fg_policy policy;
	struct fg_err err = { 0 };

	if (fg_policy_parse(text, &policy, &err) == 0)
		return 0;
	return fg_args_bad("%s '%s' is not a policy: keep, match, affine:BITS:GROUP (BITS 2 3 4 5 6 8, "
			   "GROUP 32 64 128) or mxfp4", option, text);
}

int fg_args_pick(const char *option, const char *value, const char *const *names)
{
	char list[512];
	size_t used = 0, n = 0;

	for (int i = 0; names[i]; i++)
		if (strcmp(value, names[i]) == 0)
			return i;
	while (names[n])
		n++;
	list[0] = '\0';
	for (size_t i = 0; i < n && used < sizeof(list); i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ",
					 names[i]);
	return fg_args_bad("%s '%s' is not one of %s", option, value, list);
}

/* Edit distance of a and b (at most 63 bytes each; longer ones are far from everything). */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[64];

	if (la > 63 || lb > 63)
		return 64;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

static const struct option *option_by_val(const struct option *longopts, int val)
{
	for (const struct option *o = longopts; o->name; o++)
		if (o->val == val && !o->flag)
			return o;
	return NULL;
}

/* "unknown option '--NAME'", "ambiguous option ...: --a, --b", with the nearest option when close. */
static void unknown_long(const char *word, const struct option *longopts)
{
	size_t n = strcspn(word + 2, "="), k = 0, used = 0, best_d = 3;
	char name[64], list[512];
	const char *best = NULL;

	snprintf(name, sizeof(name), "%.*s", (int)(n < 63 ? n : 63), word + 2);
	list[0] = '\0';
	for (const struct option *o = longopts; o->name; o++) {
		size_t d;

		if (strncmp(o->name, name, n) == 0 && used < sizeof(list)) {
			used += (size_t)snprintf(list + used, sizeof(list) - used, "%s--%s", k ? ", " : "", o->name);
			k++;
		}
		d = distance(name, o->name);
		if (d < best_d) {
			best_d = d;
			best = o->name;
		}
	}
	if (k >= 2)
		bad("ambiguous option '--%s': %s", name, list);
	else if (best)
		bad("unknown option '--%s' (did you mean --%s?)", name, best);
	else
		bad("unknown option '--%s'", name);
}

/* ---- the parse ---- */

static int is_short(const char *shortopts, int c)
{
	return c > 0 && c < 256 && c != ':' && c != '+' && strchr(shortopts, c) != NULL;
}

/* Apply a global option; 0 when val is not one. */
static int global_option(struct fg_args *a, int val, const char *arg)
{
	int k;

	switch (val) {
	case FG_OPT_HELP:
		a->help = 1;
		return 1;
	case FG_OPT_COLOR:
		if ((k = fg_args_pick("--color", arg, color_names)) >= 0)
			fg_cli_color_mode = (enum fg_color_mode)k;
		return 1;
	case FG_OPT_JSON_STYLE:
		if ((k = fg_args_pick("--json-style", arg, json_style_names)) >= 0)
			fg_cli_json_style = (enum fg_json_style)k;
		return 1;
	default:
		return 0;
	}
}

int fg_args_parse(struct fg_args *a, int argc, char **argv, const char *shortopts,
		  const struct option *longopts, fg_args_fn handle, void *ctx)
{
	char opts[128];

	memset(a, 0, sizeof(*a));
	current = a;
	if (shortopts[0] == '+')
		snprintf(opts, sizeof(opts), "+:%s", shortopts + 1);
	else
		snprintf(opts, sizeof(opts), "-:%s", shortopts);
	opterr = 0;
	optind = 0; /* glibc: a full reinitialisation */
	for (;;) {
		int li = -1, c = getopt_long(argc, argv, opts, longopts, &li);
		const struct option *o;

		if (c == -1)
			break;
		if (c == 1) {
			if (a->n_pos < FG_ARGS_MAX_POS)
				a->pos[a->n_pos++] = optarg;
			else
				bad("too many arguments ('%s')", optarg);
			continue;
		}
		if (c == ':') {
			/* A value is missing only at the end of argv: argv[optind - 1] is the option. */
			o = option_by_val(longopts, optopt);
			if (optind > 0 && strncmp(argv[optind - 1], "--", 2) == 0 && o)
				bad("--%s needs a value", o->name);
			else
				bad("-%c needs a value", optopt);
			continue;
		}
		if (c == '?') {
			/*
			 * glibc: optopt 0 for an unknown or ambiguous long option, the
			 * option's val for a long option given a value it does not take,
			 * the character for an unknown short option.
			 */
			if (optopt == 0)
				unknown_long(optind > 0 ? argv[optind - 1] : "--", longopts);
			else if ((is_short(shortopts, optopt) || optopt >= 256) && (o = option_by_val(longopts, optopt)))
				bad("--%s takes no value", o->name);
			else
				bad("unknown option '-%c'", optopt > 32 && optopt < 127 ? optopt : '?');
			continue;
		}
		o = li >= 0 ? &longopts[li] : option_by_val(longopts, c);
		if (o && a->n_seen < FG_ARGS_MAX_SEEN)
			a->seen[a->n_seen++] = o->name;
		if (global_option(a, c, optarg))
			continue;
		if (handle)
			handle(ctx, c, optarg);
	}
	/*
	 * After "--" (or the first argument, with '+'): arguments all.  With '+'
	 * they are a command line of their own (main.c: the command and its
	 * options), however long: only the first FG_ARGS_MAX_POS are kept.
	 */
	a->end = optind;
	for (int i = optind; i < argc; i++) {
		if (a->n_pos < FG_ARGS_MAX_POS)
			a->pos[a->n_pos++] = argv[i];
		else if (shortopts[0] != '+')
			bad("too many arguments ('%s')", argv[i]);
	}
	current = NULL;
	return 0;
}
