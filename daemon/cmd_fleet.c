/*
 * cmd_fleet.c: `forged fleet health|report`: what the fleet serves, through
 * GET /v1/fleet/health and POST /v1/fleet/reports.
 *
 * `health` exits 1 when a host serves an unhealthy artifact (an error
 * verdict, or a collapsed latest verification): a check for monitoring.
 * `report` tells the server that --host serves --artifact (an id or a
 * fingerprint) under --runtime; the latest report per host and runtime
 * counts, so a retried report changes nothing.
 */
#include "daemon/client.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int run_fleet(int argc, char **argv);
static const struct option *fleet_longopts(void);

static const struct fg_subcmd fleet_subs[] = {
	{ "health", "", "the fleet-wide health: unhealthy artifacts, the hosts serving them" },
	{ "report", "--artifact ID|DIGEST|FINGERPRINT --runtime RUNTIME [--digest DIGEST] [--artifact-id ID] "
		    "[--host HOST] [--observed JSON]",
	  "report that a host serves an artifact under a runtime" },
	{ NULL, NULL, NULL },
};

const struct fg_cmd fg_cmd_fleet = {
	.name = "fleet",
	.summary = "the fleet's health, and reports of what each host serves",
	.usage = "Talks to `forged serve` as `forged jobs` does (--server, --token, -o: see\n"
		 "'forged help jobs').  report: --host defaults to this machine's host name;\n"
		 "--observed is a JSON object of figures the host measured (e.g. {\"tok_s\": 47.2}).\n"
		 "--artifact names the artifact by id, artifact digest or head fingerprint (MTPLX's\n"
		 "sha256:HEX, or forged's older bare hex); a fingerprint several artifacts share\n"
		 "needs --digest or --artifact-id too (else HTTP 409, the candidates listed).\n"
		 "RUNTIME may be a row id, an alias or the runtime's version string ('mlx-lm 0.31.3'),\n"
		 "mapped to the newest row that covers it.\n"
		 "-o json prints the API's documents.\n"
		 "Exit 0 ok; 1 health: a host serves an unhealthy artifact; 2 bad usage or a\n"
		 "request the server refused (4xx: unknown artifact or runtime); 3 server or\n"
		 "transport failure.\n",
	.run = run_fleet,
	.subs = fleet_subs,
	.common = FG_CLIENT_COMMON,
	.options = fleet_longopts,
	.help_extra = fg_cli_print_runtimes,
};

enum { OPT_HOST = 4000, OPT_ARTIFACT, OPT_RUNTIME, OPT_OBSERVED, OPT_DIGEST, OPT_ARTIFACT_ID };

static const struct option fleet_options[] = {
	FG_CLIENT_LONGOPTS,
	{ "host", required_argument, NULL, OPT_HOST },
	{ "artifact", required_argument, NULL, OPT_ARTIFACT },
	{ "runtime", required_argument, NULL, OPT_RUNTIME },
	{ "observed", required_argument, NULL, OPT_OBSERVED },
	{ "digest", required_argument, NULL, OPT_DIGEST },
	{ "artifact-id", required_argument, NULL, OPT_ARTIFACT_ID },
	{ NULL, 0, NULL, 0 },
};

static const struct option *fleet_longopts(void)
{
	return fleet_options;
}

struct fleet_opts {
	const char *host, *artifact, *runtime, *observed, *digest;
	long long artifact_id;
};

static int fleet_option(void *ctx, int val, const char *arg)
{
	struct fleet_opts *o = ctx;
	cJSON *doc;

	switch (val) {
	case OPT_HOST:
		o->host = arg;
		if (!*arg || strlen(arg) > 255)
			return fg_args_bad("--host must be 1-255 bytes");
		return 0;
	case OPT_ARTIFACT:
		o->artifact = arg;
		if (!*arg)
			return fg_args_bad("--artifact needs an artifact id or a fingerprint");
		return 0;
	case OPT_RUNTIME:
		o->runtime = arg;
		return fg_args_check_reported_runtime("--runtime", arg);
	case OPT_DIGEST:
		o->digest = arg;
		if (!*arg || strlen(arg) > 128)
			return fg_args_bad("--digest must be 1-128 bytes");
		return 0;
	case OPT_ARTIFACT_ID: {
		char *end;

		o->artifact_id = strtoll(arg, &end, 10);
		if (*end || o->artifact_id < 1 || arg[0] == '+' || arg[0] == '-')
			return fg_args_bad("--artifact-id '%s' is not a positive integer", arg);
		return 0;
	}
	case OPT_OBSERVED:
		o->observed = arg;
		doc = cJSON_Parse(arg);
		if (!cJSON_IsObject(doc)) {
			cJSON_Delete(doc);
			return fg_args_bad("--observed '%s' is not a JSON object", arg);
		}
		cJSON_Delete(doc);
		return 0;
	default:
		return fg_args_bad("unknown option");
	}
}

static const char *str_or_dash(const cJSON *o, const char *key)
{
	const char *s = fg_json_get_str(o, key);

	return s && *s ? s : "-";
}

/* Number of hosts serving an unhealthy artifact. */
static int unhealthy_hosts(const cJSON *health)
{
	const cJSON *u, *un = cJSON_GetObjectItemCaseSensitive(health, "unhealthy");
	int n = 0;

	cJSON_ArrayForEach(u, un)
		n += cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(u, "hosts"));
	return n;
}

static void print_health(const cJSON *h, int served)
{
	struct fg_client_palette p = fg_client_palette();
	const cJSON *arts = cJSON_GetObjectItemCaseSensitive(h, "artifacts"), *u, *it;
	const cJSON *probe = cJSON_GetObjectItemCaseSensitive(h, "probe_qnorm");
	const cJSON *band = cJSON_GetObjectItemCaseSensitive(probe, "healthy_band");

	printf("%sartifacts %lld, unhealthy %lld%s: %s%s%s\n", p.bold, (long long)fg_json_get_num(arts, "total", 0),
	       (long long)fg_json_get_num(h, "unhealthy_total", 0), p.reset, served ? p.red : p.green,
	       served ? "hosts serve unhealthy artifacts" : "no host serves an unhealthy artifact", p.reset);
	if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(h, "unhealthy"))) {
		printf("\n%s%-7s %-14s %-50s %s%s\n", p.bold, "ID", "FAMILY", "VERDICTS", "SOURCE / HOSTS", p.reset);
		cJSON_ArrayForEach(u, cJSON_GetObjectItemCaseSensitive(h, "unhealthy")) {
			char verdicts[256];
			size_t used = 0;

			verdicts[0] = '\0';
			cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(u, "verdicts"))
				if (cJSON_IsString(it) && used < sizeof(verdicts))
					used += (size_t)snprintf(verdicts + used, sizeof(verdicts) - used, "%s%s",
								 used ? "," : "", it->valuestring);
			printf("%-7lld %-14s %-50.50s %s\n", (long long)fg_json_get_num(u, "artifact_id", 0),
			       str_or_dash(u, "family"), used ? verdicts : "-", str_or_dash(u, "source"));
			cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(u, "hosts"))
				printf("%74s%s%s%s (%s)\n", "", p.red, str_or_dash(it, "host"), p.reset,
				       str_or_dash(it, "runtime"));
		}
	}
	if (cJSON_GetArraySize(band) == 2)
		printf("\nprobe q_norm after load, as served: healthy band [%g, %g] (Qwen3.5/3.8), %lld served "
		       "artifact(s) outside it, %lld outside the plausible band\n",
		       cJSON_GetArrayItem(band, 0)->valuedouble, cJSON_GetArrayItem(band, 1)->valuedouble,
		       (long long)fg_json_get_num(probe, "outside_band", 0),
		       (long long)fg_json_get_num(probe, "outside_plausible", 0));
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(probe, "by_family")) {
		if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(it, "band")))
			printf("  %s: no published band; %lld report(s), after-load probe %g to %g\n", it->string,
			       (long long)fg_json_get_num(it, "reports", 0), fg_json_get_num(it, "min", 0),
			       fg_json_get_num(it, "max", 0));
		else
			printf("  %s: %lld served artifact(s), %lld outside the healthy band\n", it->string,
			       (long long)fg_json_get_num(it, "artifacts", 0),
			       (long long)fg_json_get_num(it, "outside_band", 0));
	}
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(h, "warnings"))
		printf("%swarning%s: %s: %s\n", p.yellow, p.reset, str_or_dash(it, "code"), str_or_dash(it, "detail"));
}

static int do_health(struct fg_client *c)
{
	struct fg_http r;
	cJSON *doc;
	int rc = fg_client_call(c, "GET", "/v1/fleet/health", NULL, FG_RETRY_SAFE, &r);

	if (rc) {
		rc = fg_client_fail(c, &r, rc);
	} else if ((doc = fg_client_doc(c, &r)) != NULL) {
		int served = unhealthy_hosts(doc);

		if (c->format == FG_FORMAT_JSON)
			rc = fg_client_print_body(&r);
		else
			print_health(doc, served);
		if (!rc && served)
			rc = FG_EXIT_VERDICT;
		cJSON_Delete(doc);
	} else {
		rc = FG_EXIT_INTERNAL;
	}
	fg_http_release(&r);
	return rc;
}

static int do_report(struct fg_client *c, const struct fg_client_args *a, const struct fleet_opts *o)
{
	char host[HOST_NAME_MAX + 1];
	cJSON *body, *doc;
	struct fg_http r;
	char *text, *end;
	long long id;
	int rc;

	if (!o->artifact && !o->artifact_id)
		return fg_client_usage(a, "missing --artifact ID|DIGEST|FINGERPRINT");
	if (!o->runtime)
		return fg_client_usage(a, "missing --runtime RUNTIME");
	if (o->host) {
		snprintf(host, sizeof(host), "%s", o->host);
	} else if (gethostname(host, sizeof(host)) != 0 || !host[0]) {
		return fg_client_usage(a, "this machine has no host name: give --host HOST");
	}
	host[sizeof(host) - 1] = '\0';
	body = cJSON_CreateObject();
	cJSON_AddStringToObject(body, "host", host);
	if (o->artifact) {
		id = strtoll(o->artifact, &end, 10);
		if (*end == '\0' && id > 0 && o->artifact[0] != '+' && o->artifact[0] != '-')
			cJSON_AddNumberToObject(body, "artifact", (double)id);
		else
			cJSON_AddStringToObject(body, "artifact", o->artifact);
	}
	if (o->artifact_id)
		cJSON_AddNumberToObject(body, "artifact_id", (double)o->artifact_id);
	if (o->digest)
		cJSON_AddStringToObject(body, "digest", o->digest);
	cJSON_AddStringToObject(body, "runtime", o->runtime);
	if (o->observed)
		cJSON_AddItemToObject(body, "observed", cJSON_Parse(o->observed));
	text = cJSON_PrintUnformatted(body);
	cJSON_Delete(body);
	if (!text) {
		fprintf(stderr, "forged %s: out of memory\n", a->label);
		return FG_EXIT_INTERNAL;
	}
	rc = fg_client_call(c, "POST", "/v1/fleet/reports", text, FG_RETRY_SAFE, &r);
	free(text);
	if (rc) {
		rc = fg_client_fail(c, &r, rc);
	} else if (c->format == FG_FORMAT_JSON) {
		rc = fg_client_print_body(&r);
	} else if ((doc = fg_client_doc(c, &r)) != NULL) {
		printf("reported: %s serves artifact %lld (by %s) under %s", str_or_dash(doc, "host"),
		       (long long)fg_json_get_num(doc, "artifact_id", 0), str_or_dash(doc, "artifact_match"),
		       str_or_dash(doc, "runtime"));
		/* The mapping of a version string, shown. */
		if (fg_json_get_str(doc, "runtime_reported") &&
		    strcmp(fg_json_get_str(doc, "runtime_reported"), str_or_dash(doc, "runtime")) != 0)
			printf(" ('%s', by %s)", fg_json_get_str(doc, "runtime_reported"), str_or_dash(doc, "runtime_match"));
		printf("\n");
		cJSON_Delete(doc);
	} else {
		rc = FG_EXIT_INTERNAL;
	}
	fg_http_release(&r);
	return rc;
}

static int run_fleet(int argc, char **argv)
{
	struct fg_client_args a;
	struct fleet_opts o;
	struct fg_client c;
	int rc;

	memset(&o, 0, sizeof(o));
	rc = fg_client_parse(&a, &fg_cmd_fleet, argc, argv, FG_CLIENT_SHORTOPTS, fleet_options, fleet_option, &o);
	if (rc || a.help)
		return rc;
	if ((rc = fg_client_want_args(&a, 0, "")) != 0)
		return rc;
	if (strcmp(a.sub->name, "report") == 0 && ((!o.artifact && !o.artifact_id) || !o.runtime))
		return fg_client_usage(&a, "missing %s",
				       !o.artifact && !o.artifact_id ? "--artifact ID|DIGEST|FINGERPRINT" : "--runtime RUNTIME");
	if ((rc = fg_client_open(&c, &a)) != 0)
		return rc;
	if (strcmp(a.sub->name, "health") == 0)
		rc = do_health(&c);
	else
		rc = do_report(&c, &a, &o);
	fg_client_close(&c);
	return rc;
}
