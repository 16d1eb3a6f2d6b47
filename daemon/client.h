/*
 * client.h: what `forged jobs`, `forged artifacts` and `forged fleet` share:
 * the server and token they talk to, option parsing with getopt_long, HTTP
 * over libcurl with bounded retries, and output as the API's JSON documents
 * or as tables.
 *
 * Exit codes of client commands: 0 ok; 1 a refused or failed job, an error
 * verdict; 2 bad usage, or a request the server refused (4xx other than 408
 * and 429); 3 a server or transport failure (5xx, connection refused or
 * reset, timeout, an answer that is not what the API documents), after the
 * retries.
 *
 * Retries: connection refused or reset, an empty answer, a timeout, 408,
 * 429, 502, 503 and 504 are retried up to FG_CLIENT_TRIES times in all,
 * waiting 0.2 s doubling to 5 s, or what Retry-After says (at most 30 s).
 * Every POST of one invocation carries the same Idempotency-Key (random,
 * from getrandom), so a retried job submission cannot make a second job.
 * Requests the server cannot deduplicate (FG_RETRY_UNSENT) are retried only
 * when they surely were not processed: connection refused, or 503.
 */
#ifndef FG_CLIENT_H
#define FG_CLIENT_H

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

#include "daemon/cli.h"

#define FG_CLIENT_DEFAULT_URL "http://127.0.0.1:8470"
#define FG_CLIENT_TRIES 5

/* Option values of the common options (getopt_long's val); group options use other values. */
enum {
	FG_OPT_SERVER = 's',
	FG_OPT_OUTPUT = 'o',
	FG_OPT_TOKEN = 1000,
	FG_OPT_TOKEN_FILE,
};

/* The common long options (with the global ones), to put first in a group's option table. */
#define FG_CLIENT_LONGOPTS \
	{ "server", required_argument, NULL, FG_OPT_SERVER }, \
	{ "token", required_argument, NULL, FG_OPT_TOKEN }, \
	{ "token-file", required_argument, NULL, FG_OPT_TOKEN_FILE }, \
	{ "output", required_argument, NULL, FG_OPT_OUTPUT }, \
	FG_ARGS_GLOBAL_LONGOPTS

/* The common short options, to start a group's optstring with. */
#define FG_CLIENT_SHORTOPTS "s:o:" FG_ARGS_GLOBAL_SHORTOPTS

/* The synopsis of the common options (the groups' fg_cmd.common). */
#define FG_CLIENT_COMMON "[-s|--server URL] [--token TOKEN | --token-file FILE] [-o|--output table|json]"

enum fg_client_format { FG_FORMAT_TABLE, FG_FORMAT_JSON };

/*
 * One parse of a group's command line: the subcommand, its positional
 * arguments, the common options and which options were given (their long
 * names, for the check against the subcommand's synopsis).
 */
#define FG_CLIENT_MAX_ARGS 8
#define FG_CLIENT_MAX_SEEN 32

struct fg_client_args {
	const struct fg_cmd *cmd;
	const struct fg_subcmd *sub;
	char label[64];               /* "jobs submit": the prefix of messages */
	const char *pos[FG_CLIENT_MAX_ARGS];
	size_t n_pos;
	const char *server, *token, *token_file, *output;
	const char *seen[FG_CLIENT_MAX_SEEN];
	size_t n_seen;
	int help;
};

/*
 * Parse argv (argv[0] is the group's name) with fg_args_parse (args.h): the
 * grammar of every command.  The first positional argument is the
 * subcommand.  handle(ctx, val, optarg) receives each option that is not a
 * common or global one; for a bad value it returns fg_args_bad(...).
 * Errors are printed once the subcommand is known, prefixed "forged CMD
 * SUB:", with its synopsis.  An option the subcommand's synopsis (or the
 * group's common one) does not name is an error.  Returns 0 with *a filled
 * (a->help set when --help was asked, after printing the help), or an exit
 * code after printing the error.
 */
int fg_client_parse(struct fg_client_args *a, const struct fg_cmd *cmd, int argc, char **argv,
		    const char *shortopts, const struct option *longopts,
		    int (*handle)(void *ctx, int val, const char *arg), void *ctx);

/* Print "forged LABEL: MSG", the synopsis line, return FG_EXIT_USAGE. */
int fg_client_usage(const struct fg_client_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Exactly n positional arguments, else a usage error naming what is missing or extra. */
int fg_client_want_args(const struct fg_client_args *a, size_t n, const char *names);

/* A positive decimal id ("7"), or a usage error naming what. */
int fg_client_id(const struct fg_client_args *a, const char *text, const char *what, long long *out);

/* A connection to the server with the resolved token and format. */
struct fg_client {
	const struct fg_client_args *args;
	char base[1024];              /* without a trailing slash */
	char *auth;                   /* "Authorization: Bearer TOKEN" or NULL */
	char idem_key[64];
	enum fg_client_format format;
	double deadline;              /* CLOCK_MONOTONIC seconds; 0: none */
	void *curl;
};

/*
 * Resolve the server (--server, $FORGED_URL, the default), the token
 * (--token, --token-file, $FORGED_TOKEN, then the default token file
 * $XDG_CONFIG_HOME/forged/token or ~/.config/forged/token when it exists)
 * and the output format (-o, else table on a terminal, JSON otherwise).
 * Returns 0, or an exit code after printing the error.
 */
int fg_client_open(struct fg_client *c, const struct fg_client_args *a);
void fg_client_close(struct fg_client *c);

/* Monotonic seconds. */
double fg_client_now(void);

/*
 * A stage's progress as people read it, into buf: "sidecar     45%" (the
 * percent cut down, so 100% means done), then, when its bytes are known
 * (total > 0, done >= 0), "  740.0 MB/1.6 GB", and when the ETA is known
 * (eta_s >= 0) the rate (unless rate < 0: "  410.0 MB/s") and the ETA
 * ("  eta 2 s").  Sizes in decimal units.  forge's own progress and
 * `jobs wait` on a TTY print the same line.
 */
void fg_client_progress_text(char *buf, size_t len, const char *stage, double fraction, double done, double total,
			     double rate, double eta_s);
void fg_client_sleep(double seconds);

enum fg_retry {
	FG_RETRY_SAFE,    /* GET, DELETE, keyed POST: every transient failure */
	FG_RETRY_UNSENT,  /* only when the request surely was not processed */
};

/* One exchange with the server, after its retries. */
struct fg_http {
	long status;          /* 0 when no HTTP answer came */
	char *body;           /* NUL-terminated, may be NULL */
	size_t len;
	char error[320];      /* the transport error, when status is 0 */
	char method[8];
	char url[1200];
};

/*
 * Send METHOD path (with body when not NULL, as JSON) and retry as the
 * policy allows.  r is overwritten: release an earlier answer in it first.  Returns FG_EXIT_OK for a 2xx answer, FG_EXIT_USAGE for
 * another 4xx, FG_EXIT_INTERNAL otherwise; prints only retry notes.
 */
int fg_client_call(struct fg_client *c, const char *method, const char *path, const char *body,
		   enum fg_retry retry, struct fg_http *r);
void fg_http_release(struct fg_http *r);

/*
 * Report a failed exchange: "forged LABEL: GET URL: HTTP 404 not-found: DETAIL"
 * or the transport error on stderr, and in JSON format the server's problem
 * document on stdout.  Returns rc.
 */
int fg_client_fail(struct fg_client *c, const struct fg_http *r, int rc);

/* r's body as JSON (caller deletes), or NULL after reporting it as a bad answer (exit 3). */
cJSON *fg_client_doc(struct fg_client *c, const struct fg_http *r);

/*
 * Print r's body on stdout with a final newline: as the server sent it
 * (compact), or pretty when fg_cli_json_pretty says so (a terminal,
 * --json-style=pretty); 0 or FG_EXIT_INTERNAL.
 */
int fg_client_print_body(const struct fg_http *r);

/* value escaped for a URL query (caller frees), or NULL when out of memory. */
char *fg_client_escape(struct fg_client *c, const char *value);

/* JSON field helpers: the string (or NULL), the number (or def). */
const char *fg_json_get_str(const cJSON *o, const char *key);
double fg_json_get_num(const cJSON *o, const char *key, double def);

/* ANSI colour strings for stdout, empty when colour is off. */
struct fg_client_palette {
	const char *red, *green, *yellow, *bold, *reset;
};
struct fg_client_palette fg_client_palette(void);

/* Read a whole file ("-" for stdin) of at most max bytes; NULL after printing an error. */
char *fg_client_read_file(const struct fg_client_args *a, const char *path, size_t max, size_t *len);

#endif
