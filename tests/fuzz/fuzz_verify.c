/*
 * fuzz_verify.c: libFuzzer target for verification documents (forge/verify:
 * forged.verification.v1 and MTPLX's shapes, formats.c) and the verdict.
 *
 * Each input is JSON text.  It goes through fg_verify_parse_text (the API's
 * and the CLI's reader) and, when the text is one JSON document, also through
 * fg_json_parse + fg_verify_parse: both must agree.  A document the parser
 * accepts must keep the parser's promises (verify.h): at most 17 rows of
 * distinct depths 0..16, finite non-negative tok/s, a depth 0 with positive
 * tok/s, acceptance in [0, 1], strings NUL-terminated; fg_verify_decide must
 * then succeed at every threshold, the decision must be monotone in the
 * threshold (collapse can only grow with it), and fg_verify_result_json must
 * print a document that parses back with the same verdict.
 *
 * Mutation (LLVMFuzzerCustomMutator), chosen by FORGED_FUZZ_VERIFY_MODE:
 *   bytes    libFuzzer's own byte mutations only;
 *   numbers  structure-aware: the input is parsed, one number (or, now and
 *            then, one array element) of the document is changed, and the
 *            document printed back, so valid documents stay valid JSON while
 *            their values walk the edges (0, -0, 1e300, 5e-324, 1e999 as
 *            text, just above and below 1.0 and the thresholds, depths 16
 *            and 17, 2^53 + 1, ...);
 *   mixed    (default) either, half of the time each; input that is not
 *            JSON always gets byte mutations.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "forge/core/json.h"
#include "forge/verify/verify.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

enum mode { MODE_MIXED, MODE_BYTES, MODE_NUMBERS };
static enum mode mode = MODE_MIXED;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *m = getenv("FORGED_FUZZ_VERIFY_MODE");

	(void)argc;
	(void)argv;
	if (m && strcmp(m, "bytes") == 0)
		mode = MODE_BYTES;
	else if (m && strcmp(m, "numbers") == 0)
		mode = MODE_NUMBERS;
	fz_setup_work("verify");
	return 0;
}

/* ---- the target ---- */

static void check_input(const struct fg_verify_input *in)
{
	int seen[FG_VERIFY_MAX_DEPTH + 1] = { 0 }, has_ar = 0;

	FZ_CHECK(in->n_rows >= 1 && in->n_rows <= FG_VERIFY_MAX_DEPTH + 1 && in->rows);
	FZ_CHECK(memchr(in->hardware, '\0', sizeof(in->hardware)));
	FZ_CHECK(memchr(in->runtime, '\0', sizeof(in->runtime)));
	FZ_CHECK(in->n_unused <= FG_VERIFY_MAX_UNUSED);
	FZ_CHECK(in->n_mtplx_reasons <= FG_VERIFY_MAX_REASONS);
	FZ_CHECK(memchr(in->mtplx_verdict, '\0', sizeof(in->mtplx_verdict)));
	for (size_t i = 0; i < in->n_mtplx_reasons; i++)
		FZ_CHECK(memchr(in->mtplx_reasons[i], '\0', sizeof(in->mtplx_reasons[i])));
	for (size_t i = 0; i < in->n_unused; i++)
		FZ_CHECK(in->unused[i].where && in->unused[i].name);
	for (size_t i = 0; i < in->n_rows; i++) {
		const struct fg_verify_row *r = &in->rows[i];

		FZ_CHECK(r->depth >= 0 && r->depth <= FG_VERIFY_MAX_DEPTH && !seen[r->depth]);
		seen[r->depth] = 1;
		FZ_CHECK(isfinite(r->tok_s) && r->tok_s >= 0);
		if (r->depth == 0)
			has_ar = r->tok_s > 0;
		FZ_CHECK(r->n_accept <= FG_VERIFY_MAX_ACCEPT);
		for (size_t k = 0; k < r->n_accept; k++)
			FZ_CHECK(r->accept[k] >= 0.0 && r->accept[k] <= 1.0);
		FZ_CHECK(r->quality >= -1 && r->quality <= 1);
		FZ_CHECK(!r->has_multiplier || (isfinite(r->multiplier) && r->multiplier >= 0));
		FZ_CHECK(isfinite(r->verify_time_s) && r->verify_time_s >= 0);
		FZ_CHECK(memchr(r->finish_reasons, '\0', sizeof(r->finish_reasons)));
	}
	FZ_CHECK(has_ar);
}

static const struct fg_verify_verdict *verdict_named(const char *name)
{
	const struct fg_verify_verdict *v = fg_verify_verdict_find(name);

	FZ_CHECK(v);
	return v;
}

/* Decide at threshold t, check the result and its JSON; returns the verdict. */
static const struct fg_verify_verdict *decide(const struct fg_verify_input *in, double t)
{
	struct fg_verify_result *res = calloc(1, sizeof(*res));
	struct fg_err err = { 0 };
	const struct fg_verify_verdict *v;
	const cJSON *name;
	cJSON *doc, *back;
	char *text;

	FZ_CHECK(res);
	FZ_CHECK(fg_verify_decide(in, t, res, &err) == 0);
	v = res->verdict;
	FZ_CHECK(v && v->row && v->rule >= 1 && fg_verify_verdict_at((size_t)v->rule - 1) == v);
	if (v == verdict_named("mtp_depth_wins")) {
		FZ_CHECK(res->best_depth >= 1 && res->best_depth <= FG_VERIFY_MAX_DEPTH && res->n_reasons == 0);
	} else {
		/* Without a depth > 0 there is no "no_mtp_depth_beat_ar" reason either. */
		FZ_CHECK(res->best_depth == -1 && res->n_reasons <= 3 && (res->n_reasons >= 1 || in->n_rows == 1));
	}
	FZ_CHECK(res->n_rows == in->n_rows);
	FZ_CHECK(res->n_collapsed <= FG_VERIFY_MAX_DEPTH && res->n_rejected <= FG_VERIFY_MAX_DEPTH);
	FZ_CHECK(res->n_speedups == res->n_rows - 1);
	FZ_CHECK(res->collapse_threshold == t);
	doc = fg_verify_result_json(res);
	FZ_CHECK(doc); /* NULL means out of memory, which a fuzzer's few KiB cannot be */
	text = cJSON_PrintUnformatted(doc);
	FZ_CHECK(text);
	back = cJSON_Parse(text);
	FZ_CHECK(back);
	name = cJSON_GetObjectItemCaseSensitive(back, "verdict");
	FZ_CHECK(cJSON_IsString(name) && strcmp(name->valuestring, v->row->name) == 0);
	cJSON_Delete(back);
	free(text);
	cJSON_Delete(doc);
	free(res);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fg_verify_input in, in2;
	struct fg_err err = { 0 }, err2 = { 0 };
	cJSON *doc = NULL;
	int rc, rc2;

	memset(&in, 0, sizeof(in));
	memset(&in2, 0, sizeof(in2));
	rc = fg_verify_parse_text(&in, (const char *)data, size, &err);
	FZ_CHECK(rc == 0 || (rc < 0 && err.code == rc && memchr(err.msg, '\0', sizeof(err.msg))));
	/* The file reader's parse (fg_json_load's) and the text reader must agree on a document both read. */
	if (fg_json_parse(&doc, (const char *)data, size, "fuzz", &err2) == 0) {
		rc2 = fg_verify_parse(&in2, doc, &err2);
		FZ_CHECK(rc2 == rc);
		if (rc == 0)
			FZ_CHECK(in2.n_rows == in.n_rows && in2.format == in.format);
		fg_verify_release(&in2);
		cJSON_Delete(doc);
	}
	if (rc != 0)
		return 0;
	check_input(&in);
	{
		const struct fg_verify_verdict *lo = decide(&in, 0.05), *mid = decide(&in, FG_VERIFY_COLLAPSE_DEFAULT),
					       *hi = decide(&in, 0.5);
		const struct fg_verify_verdict *collapsed = verdict_named("mtp_acceptance_collapsed");
		const struct fg_verify_verdict *none = verdict_named("no_mtp_depth_beat_ar");

		/* Rules 1 and 2 ignore the threshold; the collapsed set only grows with it. */
		FZ_CHECK(lo != collapsed || (mid == collapsed && hi == collapsed));
		FZ_CHECK(mid != collapsed || hi == collapsed);
		FZ_CHECK(hi != none || (mid == none && lo == none));
		FZ_CHECK(mid != none || lo == none);
	}
	fg_verify_release(&in);
	FZ_CHECK(in.rows == NULL && in.n_rows == 0);
	return 0;
}

/* ---- the structure-aware mutator ---- */

static unsigned next_rand(unsigned *s)
{
	/* xorshift32: deterministic from libFuzzer's seed */
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* Every number (and, with arrays, every array) of the tree, in document order. */
struct nodes {
	cJSON *num[256];
	size_t n_num;
	cJSON *arr[64];
	size_t n_arr;
};

static void collect(cJSON *node, struct nodes *ns, int depth)
{
	for (cJSON *c = node; c && depth < 64; c = c->next) {
		if (cJSON_IsNumber(c) && ns->n_num < sizeof(ns->num) / sizeof(ns->num[0]))
			ns->num[ns->n_num++] = c;
		if (cJSON_IsArray(c) && c->child && ns->n_arr < sizeof(ns->arr) / sizeof(ns->arr[0]))
			ns->arr[ns->n_arr++] = c;
		if (c->child)
			collect(c->child, ns, depth + 1);
	}
}

static const double edges[] = {
	0.0, -0.0, 1.0, -1.0, 0.5, 0.05, 0.1, 0.0999999999, 0.1000000001, 0.0499999999, 0.0500000001,
	1.0000000001, 0.9999999999, 1e300, -1e300, 1e-300, 5e-324, 1.7976931348623157e308, 2.2250738585072014e-308,
	16, 17, 15, 64, 65, 63, 1e15, 1e15 + 1, 1e16, 2147483647.0, 2147483648.0, -2147483649.0, 4294967296.0,
	9007199254740992.0, 9007199254740993.0, 9.2233720368547758e18, 1.8446744073709552e19, 0.3, 2.0,
};

/* Number texts cJSON reads oddly or not as a double can hold: inserted raw. */
static const char *const raw_edges[] = {
	"1e999", "-1e999", "1e-999", "-0", "0e0", "1E+400", "123456789012345678901234567890", "0.0000000000000000000001e22",
	"1.5", "16.000000000000001", "17e0", "1.7976931348623159e308", "4.9e-324", "2.4703282292062327e-324",
};

static double mutate_value(double x, unsigned *s)
{
	switch (next_rand(s) % 8) {
	case 0: return x * 2;
	case 1: return x / 2;
	case 2: return x + (next_rand(s) % 2 ? 1 : -1);
	case 3: return -x;
	case 4: return nextafter(x, next_rand(s) % 2 ? INFINITY : -INFINITY);
	case 5: return (double)(next_rand(s) % 1000001) / 1e6;
	default: return edges[next_rand(s) % (sizeof(edges) / sizeof(edges[0]))];
	}
}

/* The array or object holding v, searched from the root. */
static cJSON *parent_of(cJSON *root, const cJSON *v, int depth)
{
	for (cJSON *c = root->child; c && depth < 64; c = c->next) {
		cJSON *p;

		if (c == v)
			return root;
		if (c->child && (p = parent_of(c, v, depth + 1)))
			return p;
	}
	return NULL;
}

/* One structural or numeric change of doc; 0 when it has nothing to change. */
static int mutate_doc(cJSON *doc, unsigned *s)
{
	struct nodes ns;
	unsigned op = next_rand(s) % 16;
	cJSON *v, *parent, *repl;

	memset(&ns, 0, sizeof(ns));
	collect(doc, &ns, 0);
	if (op >= 14 && ns.n_arr) {
		/* Duplicate or drop an element of an array (a row, an acceptance entry). */
		cJSON *a = ns.arr[next_rand(s) % ns.n_arr];
		int n = cJSON_GetArraySize(a), k = (int)(next_rand(s) % (unsigned)n);

		if (op == 14 || n > 200)
			cJSON_DeleteItemFromArray(a, k);
		else
			cJSON_AddItemToArray(a, cJSON_Duplicate(cJSON_GetArrayItem(a, k), 1));
		return 1;
	}
	if (!ns.n_num)
		return 0;
	v = ns.num[next_rand(s) % ns.n_num];
	if (op < 11) {
		cJSON_SetNumberValue(v, mutate_value(v->valuedouble, s));
		return 1;
	}
	/* A raw number text (the printer writes it verbatim), or another type in its place. */
	if (op <= 12)
		repl = cJSON_CreateRaw(raw_edges[next_rand(s) % (sizeof(raw_edges) / sizeof(raw_edges[0]))]);
	else
		repl = next_rand(s) % 2 ? cJSON_CreateNull() : cJSON_CreateString("1");
	parent = parent_of(doc, v, 0);
	if (!repl || !parent || !cJSON_ReplaceItemViaPointer(parent, v, repl)) {
		cJSON_Delete(repl);
		return 0;
	}
	return 1;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
	unsigned s = seed ? seed : 1;
	cJSON *doc;
	char *text;
	size_t n;

	if (mode == MODE_BYTES || (mode == MODE_MIXED && next_rand(&s) % 2))
		return LLVMFuzzerMutate(data, size, max_size);
	doc = cJSON_ParseWithLength((const char *)data, size);
	if (!doc)
		return LLVMFuzzerMutate(data, size, max_size);
	for (unsigned k = 1 + next_rand(&s) % 3; k; k--)
		mutate_doc(doc, &s);
	text = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	if (!text)
		return LLVMFuzzerMutate(data, size, max_size);
	n = strlen(text);
	if (n > max_size) {
		free(text);
		return LLVMFuzzerMutate(data, size, max_size);
	}
	memcpy(data, text, n);
	free(text);
	return n;
}
