/*
 * cmd_artifacts.c: `forged artifacts list|get|verify`: the artifacts a
 * server stored (inspections and forged artifacts) and their verifications,
 * through GET /v1/artifacts[/ID] and POST /v1/artifacts/ID/verifications.
 *
 * `get` exits 1 when the artifact must not ship: `ok` is false (an error
 * verdict) or its latest verification has error severity.  `verify` exits 1
 * when the verdict of the rows has error severity (mtp_acceptance_collapsed).
 */
#include "daemon/client.h"

#include <stdlib.h>
#include <string.h>

#include "forge/model/family.h"
#include "forge/model/verdicts.h"

#define ROWS_MAX ((size_t)1 << 20)

static int run_artifacts(int argc, char **argv);
static const struct option *artifacts_longopts(void);
static void print_values(FILE *out);

static const struct fg_subcmd artifacts_subs[] = {
	{ "list", "[--verdict CODE] [--family FAMILY] [--limit N] [--cursor ID]",
	  "list stored artifacts by id (one page; the next --cursor is printed)" },
	{ "get", "ID", "show one artifact: verdicts, verifications, fingerprints" },
	{ "verify", "ID ROWS.json", "post verification rows (forged.verification.v1 or MTPLX's) and print the verdict" },
	{ NULL, NULL, NULL },
};

const struct fg_cmd fg_cmd_artifacts = {
	.name = "artifacts",
	.summary = "list and show a server's artifacts, post their verification rows",
	.usage = "Talks to `forged serve` as `forged jobs` does (--server, --token, -o: see\n"
		 "'forged help jobs').  list filters by a verdict code (static or of the latest\n"
		 "verification) and by family.  verify sends ROWS.json (\"-\": standard input),\n"
		 "a forged.verification.v1 document or MTPLX's verify/tune output (see\n"
		 "'forged help verdict'), for the artifact ID; the server decides\n"
		 "the verdict as `forged verdict` does and keeps it with the artifact.\n"
		 "-o json prints the API's documents.\n"
		 "Exit 0 ok; 1 get: the artifact must not ship (an error verdict or a collapsed\n"
		 "latest verification), verify: an error verdict; 2 bad usage or a request the\n"
		 "server refused (4xx: unknown artifact, invalid rows); 3 server or transport\n"
		 "failure.\n",
	.run = run_artifacts,
	.subs = artifacts_subs,
	.common = FG_CLIENT_COMMON,
	.options = artifacts_longopts,
	.help_extra = print_values,
};

enum { OPT_VERDICT = 3000, OPT_FAMILY, OPT_LIMIT, OPT_CURSOR };

static const struct option artifacts_options[] = {
	FG_CLIENT_LONGOPTS,
	{ "verdict", required_argument, NULL, OPT_VERDICT },
	{ "family", required_argument, NULL, OPT_FAMILY },
	{ "limit", required_argument, NULL, OPT_LIMIT },
	{ "cursor", required_argument, NULL, OPT_CURSOR },
	{ NULL, 0, NULL, 0 },
};

static const struct option *artifacts_longopts(void)
{
	return artifacts_options;
}

/* "a, b, c" of the verdict codes, or of the family ids, into buf. */
static void verdict_codes(char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < FG_VERDICT_COUNT && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", fg_verdict_table[i].name);
}

static void family_ids(char *buf, size_t len)
{
	size_t n, used = 0;
	const struct fg_family *const *all = fg_family_all(&n);

	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s, ", all[i]->id);
	/* What an artifact of no known family is stored as. */
	if (used < len)
		snprintf(buf + used, len - used, "%s", fg_family_unknown.id);
}

static int is_family(const char *id)
{
	size_t n;
	const struct fg_family *const *all = fg_family_all(&n);

	if (strcmp(id, fg_family_unknown.id) == 0)
		return 1;
	for (size_t i = 0; i < n; i++)
		if (strcmp(all[i]->id, id) == 0)
			return 1;
	return 0;
}

/* What --verdict and --family accept, after the help text. */
static void print_values(FILE *out)
{
	char list[2048];

	verdict_codes(list, sizeof(list));
	fprintf(out, "\nverdict codes (docs/interfaces.md section 4): %s\n", list);
	family_ids(list, sizeof(list));
	fprintf(out, "families: %s\n", list);
}

struct artifacts_opts {
	const char *verdict, *family;
	long long limit, cursor;
};

static int artifacts_option(void *ctx, int val, const char *arg)
{
	struct artifacts_opts *o = ctx;
	char list[1536];
	char *end;

	switch (val) {
	case OPT_VERDICT:
		o->verdict = arg;
		if (fg_verdict_code_find(arg))
			return 0;
		verdict_codes(list, sizeof(list));
		return fg_args_bad("--verdict '%s' is not a verdict code: one of %s", arg, list);
	case OPT_FAMILY:
		o->family = arg;
		if (is_family(arg))
			return 0;
		family_ids(list, sizeof(list));
		return fg_args_bad("--family '%s' is not a family: one of %s", arg, list);
	case OPT_LIMIT:
		o->limit = strtoll(arg, &end, 10);
		if (!*arg || *end || o->limit < 1 || o->limit > 500)
			return fg_args_bad("--limit '%s' is not a number in 1..500", arg);
		return 0;
	case OPT_CURSOR:
		o->cursor = strtoll(arg, &end, 10);
		if (!*arg || *end || o->cursor < 0)
			return fg_args_bad("--cursor '%s' is not an artifact id (0 or more)", arg);
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

/* "a,b,c" of an array of strings into buf (cut with ",..." past len), or "-". */
static void join_strings(const cJSON *arr, char *buf, size_t len)
{
	const cJSON *it;
	size_t used = 0;

	buf[0] = '\0';
	cJSON_ArrayForEach(it, arr) {
		size_t n;

		if (!cJSON_IsString(it))
			continue;
		n = strlen(it->valuestring) + (used ? 1 : 0);
		if (used + n + 4 >= len) {
			snprintf(buf + used, len - used, ",...");
			return;
		}
		used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "," : "", it->valuestring);
	}
	if (!used)
		snprintf(buf, len, "-");
}

/* ---- list ---- */

static void print_list(const cJSON *page)
{
	struct fg_client_palette p = fg_client_palette();
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(page, "items"), *a;
	const cJSON *next = cJSON_GetObjectItemCaseSensitive(page, "next_cursor");

	printf("%s%-7s %-6s %-14s %-17s %-50s %s%s\n", p.bold, "ID", "OK", "FAMILY", "FINGERPRINT", "VERDICTS",
	       "SOURCE", p.reset);
	cJSON_ArrayForEach(a, items) {
		const cJSON *ok = cJSON_GetObjectItemCaseSensitive(a, "ok");
		const char *fp = fg_json_get_str(a, "fingerprint");

		char verdicts[51];

		join_strings(cJSON_GetObjectItemCaseSensitive(a, "verdicts"), verdicts, sizeof(verdicts));
		printf("%-7lld %s%-6s%s %-14s %-17.*s %-50s %s\n", (long long)fg_json_get_num(a, "id", 0),
		       cJSON_IsTrue(ok) ? p.green : p.red, cJSON_IsTrue(ok) ? "yes" : "no", p.reset,
		       str_or_dash(a, "family"), 16, fp ? fp : "-", verdicts, str_or_dash(a, "source"));
	}
	if (!cJSON_GetArraySize(items))
		printf("(no artifacts)\n");
	if (cJSON_IsNumber(next))
		printf("more: --cursor %.0f\n", next->valuedouble);
}

static int do_list(struct fg_client *c, const struct artifacts_opts *o)
{
	char path[1024];
	char *v = o->verdict ? fg_client_escape(c, o->verdict) : NULL, *f = o->family ? fg_client_escape(c, o->family) : NULL;
	size_t n = (size_t)snprintf(path, sizeof(path), "/v1/artifacts?limit=%lld", o->limit ? o->limit : 50);
	struct fg_http r;
	cJSON *page;
	int rc;

	if (v)
		n += (size_t)snprintf(path + n, sizeof(path) - n, "&verdict=%.200s", v);
	if (f)
		n += (size_t)snprintf(path + n, sizeof(path) - n, "&family=%.200s", f);
	if (o->cursor)
		snprintf(path + n, sizeof(path) - n, "&cursor=%lld", o->cursor);
	free(v);
	free(f);
	rc = fg_client_call(c, "GET", path, NULL, FG_RETRY_SAFE, &r);
	if (rc) {
		rc = fg_client_fail(c, &r, rc);
	} else if (c->format == FG_FORMAT_JSON) {
		rc = fg_client_print_body(&r);
	} else if ((page = fg_client_doc(c, &r)) != NULL) {
		print_list(page);
		cJSON_Delete(page);
	} else {
		rc = FG_EXIT_INTERNAL;
	}
	fg_http_release(&r);
	return rc;
}

/* ---- get ---- */

/* The severity of the last verification's result, or NULL. */
static const char *latest_severity(const cJSON *art)
{
	const cJSON *vs = cJSON_GetObjectItemCaseSensitive(art, "verifications");
	int n = cJSON_GetArraySize(vs);

	if (n < 1)
		return NULL;
	return fg_json_get_str(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(vs, n - 1), "result"), "severity");
}

static void print_artifact(const cJSON *art, int ships)
{
	struct fg_client_palette p = fg_client_palette();
	const cJSON *vs, *v, *prints, *rt;

	printf("%sartifact %lld%s  %s%s%s\n", p.bold, (long long)fg_json_get_num(art, "id", 0), p.reset,
	       ships ? p.green : p.red, ships ? "ok" : "NOT OK: do not ship", p.reset);
	printf("  source       %s\n", str_or_dash(art, "source"));
	printf("  family       %s\n", str_or_dash(art, "family"));
	printf("  path         %s\n", str_or_dash(art, "path"));
	printf("  digest       %s\n", str_or_dash(art, "digest"));
	printf("  head fp      %s (MTPLX's framing)\n", str_or_dash(art, "head_fingerprint"));
	printf("  fingerprint  %s (legacy framing)\n", str_or_dash(art, "fingerprint"));
	printf("  created      %s\n", str_or_dash(art, "created_at"));
	rt = cJSON_GetObjectItemCaseSensitive(art, "mtplx_runtime");
	if (cJSON_IsObject(rt)) {
		const cJSON *ev = cJSON_GetObjectItemCaseSensitive(rt, "speed_evidence");

		printf("  mtplx        %s, mtp_depth_max %lld, profile %s\n",
		       fg_json_get_str(ev, "status") ? fg_json_get_str(ev, "status")
						     : fg_json_get_str(ev, "verdict") ? fg_json_get_str(ev, "verdict") : "-",
		       (long long)fg_json_get_num(rt, "mtp_depth_max", 0), str_or_dash(rt, "recommended_profile"));
	}
	vs = cJSON_GetObjectItemCaseSensitive(art, "fleet");
	cJSON_ArrayForEach(v, vs) {
		const char *named = fg_json_get_str(v, "runtime_reported");

		printf("  served by    %s under %s", str_or_dash(v, "host"), str_or_dash(v, "runtime"));
		if (named && strcmp(named, str_or_dash(v, "runtime")) != 0)
			printf(" ('%s')", named);
		printf("\n");
	}
	vs = cJSON_GetObjectItemCaseSensitive(art, "verdicts");
	printf("  verdicts%s\n", cJSON_GetArraySize(vs) ? "" : "     none");
	cJSON_ArrayForEach(v, vs) {
		const char *sev = str_or_dash(v, "severity");

		printf("    %s%-8s%s %s (%s)\n", strcmp(sev, "error") == 0 ? p.red : strcmp(sev, "warning") == 0 ? p.yellow : "",
		       sev, p.reset, str_or_dash(v, "code"), str_or_dash(v, "origin"));
	}
	vs = cJSON_GetObjectItemCaseSensitive(art, "verifications");
	printf("  verifications%s\n", cJSON_GetArraySize(vs) ? "" : " none");
	cJSON_ArrayForEach(v, vs) {
		const cJSON *res = cJSON_GetObjectItemCaseSensitive(v, "result");
		const cJSON *best = cJSON_GetObjectItemCaseSensitive(res, "best_depth");

		printf("    %-4lld %s  %s", (long long)fg_json_get_num(v, "id", 0), str_or_dash(v, "created_at"),
		       str_or_dash(v, "verdict"));
		if (cJSON_IsNumber(best))
			printf(" (best depth %d)", best->valueint);
		printf("\n");
	}
	prints = cJSON_GetObjectItemCaseSensitive(art, "fingerprints");
	if (cJSON_GetArraySize(prints)) {
		printf("  files\n");
		cJSON_ArrayForEach(v, prints)
			if (cJSON_IsString(v))
				printf("    %-64s %s\n", v->valuestring, v->string);
	}
}

static int do_get(struct fg_client *c, long long id)
{
	char path[64];
	struct fg_http r;
	cJSON *art;
	int rc;

	snprintf(path, sizeof(path), "/v1/artifacts/%lld", id);
	rc = fg_client_call(c, "GET", path, NULL, FG_RETRY_SAFE, &r);
	if (rc) {
		rc = fg_client_fail(c, &r, rc);
	} else if ((art = fg_client_doc(c, &r)) != NULL) {
		const char *sev = latest_severity(art);
		int ships = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(art, "ok")) && !(sev && strcmp(sev, "error") == 0);

		if (c->format == FG_FORMAT_JSON)
			rc = fg_client_print_body(&r);
		else
			print_artifact(art, ships);
		if (!rc && !ships)
			rc = FG_EXIT_VERDICT;
		cJSON_Delete(art);
	} else {
		rc = FG_EXIT_INTERNAL;
	}
	fg_http_release(&r);
	return rc;
}

/* ---- verify ---- */

static void print_verification(const cJSON *doc)
{
	struct fg_client_palette p = fg_client_palette();
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(doc, "result"), *best, *sp, *it;
	const char *sev = str_or_dash(res, "severity");

	best = cJSON_GetObjectItemCaseSensitive(res, "best_depth");
	printf("%sverification %lld%s of artifact %lld: %s%s%s (%s)\n", p.bold, (long long)fg_json_get_num(doc, "id", 0),
	       p.reset, (long long)fg_json_get_num(doc, "artifact_id", 0),
	       strcmp(sev, "error") == 0 ? p.red : strcmp(sev, "warning") == 0 ? p.yellow : p.green,
	       str_or_dash(res, "verdict"), p.reset, sev);
	if (cJSON_IsNumber(best))
		printf("  best depth   %d\n", best->valueint);
	else
		printf("  best depth   none\n");
	sp = cJSON_GetObjectItemCaseSensitive(res, "speedups");
	printf("  speed-ups   ");
	cJSON_ArrayForEach(it, sp)
		if (cJSON_IsNumber(it))
			printf(" depth %s %.3fx", it->string, it->valuedouble);
	printf("\n");
	it = cJSON_GetObjectItemCaseSensitive(res, "best_first_acceptance");
	if (cJSON_IsNumber(it))
		printf("  best first-position acceptance %.3f\n", it->valuedouble);
	if (fg_json_get_str(res, "runtime") || fg_json_get_str(res, "hardware"))
		printf("  runtime %s on %s\n", str_or_dash(res, "runtime"), str_or_dash(res, "hardware"));
	it = cJSON_GetObjectItemCaseSensitive(res, "failure_reasons");
	if (cJSON_GetArraySize(it) > 0) {
		const cJSON *r;

		printf("  failure reasons");
		cJSON_ArrayForEach(r, it)
			printf(" %s", cJSON_IsString(r) ? r->valuestring : "?");
		printf("\n");
	}
	/* MTPLX's own verdict in the posted document, and whether forged agrees. */
	it = cJSON_GetObjectItemCaseSensitive(res, "agrees");
	if (cJSON_IsBool(it))
		printf("  MTPLX's verdict %s: %s\n", str_or_dash(res, "mtplx_verdict"),
		       cJSON_IsTrue(it) ? "agrees" : "DISAGREES");
}

static int do_verify(struct fg_client *c, const struct fg_client_args *a, long long id)
{
	char path[96];
	size_t len;
	char *rows = fg_client_read_file(a, a->pos[1], ROWS_MAX, &len);
	struct fg_http r;
	cJSON *doc;
	int rc;

	if (!rows)
		return FG_EXIT_USAGE;
	if (strlen(rows) != len) {
		free(rows);
		return fg_client_usage(a, "%s holds a NUL byte", a->pos[1]);
	}
	snprintf(path, sizeof(path), "/v1/artifacts/%lld/verifications", id);
	/* The server replays a retried POST by its Idempotency-Key: one verification however often it is sent. */
	rc = fg_client_call(c, "POST", path, rows, FG_RETRY_SAFE, &r);
	free(rows);
	if (rc) {
		rc = fg_client_fail(c, &r, rc);
	} else if ((doc = fg_client_doc(c, &r)) != NULL) {
		const char *sev = fg_json_get_str(cJSON_GetObjectItemCaseSensitive(doc, "result"), "severity");

		if (c->format == FG_FORMAT_JSON)
			rc = fg_client_print_body(&r);
		else
			print_verification(doc);
		if (!rc && sev && strcmp(sev, "error") == 0)
			rc = FG_EXIT_VERDICT;
		cJSON_Delete(doc);
	} else {
		rc = FG_EXIT_INTERNAL;
	}
	fg_http_release(&r);
	return rc;
}

static int run_artifacts(int argc, char **argv)
{
	struct fg_client_args a;
	struct artifacts_opts o;
	struct fg_client c;
	const char *sub;
	long long id = 0;
	int rc;

	memset(&o, 0, sizeof(o));
	rc = fg_client_parse(&a, &fg_cmd_artifacts, argc, argv, FG_CLIENT_SHORTOPTS, artifacts_options,
			     artifacts_option, &o);
	if (rc || a.help)
		return rc;
	sub = a.sub->name;
	if (strcmp(sub, "list") == 0)
		rc = fg_client_want_args(&a, 0, "");
	else if (strcmp(sub, "get") == 0)
		rc = fg_client_want_args(&a, 1, "ID");
	else
		rc = fg_client_want_args(&a, 2, a.n_pos ? "ROWS.json" : "ID and ROWS.json");
	if (!rc && a.n_pos)
		rc = fg_client_id(&a, a.pos[0], "artifact ID", &id);
	if (rc)
		return rc;
	if ((rc = fg_client_open(&c, &a)) != 0)
		return rc;
	if (strcmp(sub, "list") == 0)
		rc = do_list(&c, &o);
	else if (strcmp(sub, "get") == 0)
		rc = do_get(&c, id);
	else
		rc = do_verify(&c, &a, id);
	fg_client_close(&c);
	return rc;
}
