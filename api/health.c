/*
 * health.c: GET /v1/fleet/health, its cache and its pages.
 *
 * The store builds the whole document (unhealthy artifacts capped at 500,
 * served ones first: store/fleet.c).  A snapshot keeps it three ways: the
 * whole text (?full=1, the document as it always was), the default page
 * (the summary, the first FG_API_HEALTH_PAGE_DEFAULT unhealthy artifacts,
 * unhealthy_total and next_cursor, without the hosts[] list) and the parsed
 * tree other pages are cut from.  The full document of a large fleet was 112 KB per GET; the default
 * page is what a poller needs.
 *
 * A snapshot is answered while nothing was written since it was built
 * (generation unchanged) and for at most FG_API_HEALTH_MAX_AGE_MS, which
 * bounds staleness from writers outside this process.  The generation is
 * read before the store is, so a write that races the build leaves the
 * cache marked stale rather than hiding the write.  One request builds at a
 * time: when a snapshot is only too old, the others keep answering it; when
 * something was written since, they wait for the build (a build reads the
 * whole fleet, and every handler thread doing it at once stalled them all).
 * Snapshots are reference-counted, so a request cutting a page from one
 * keeps it while another request replaces it.
 */
#include "api/internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/validate.h"

struct fg_health_snap {
	int refs;                          /* atomic */
	cJSON *doc;                        /* read-only once built */
	struct fg_shared_body *full, *page;
	int n_listed;                      /* entries of doc's unhealthy[] */
};

static struct fg_health_snap *snap_ref(struct fg_health_snap *h)
{
	if (h)
		__atomic_add_fetch(&h->refs, 1, __ATOMIC_RELAXED);
	return h;
}

void fg_health_snap_unref(struct fg_health_snap *h)
{
	if (!h || __atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	cJSON_Delete(h->doc);
	fg_shared_body_unref(h->full);
	fg_shared_body_unref(h->page);
	free(h);
}

static double ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t->tv_sec) * 1e3 + (double)(now.tv_nsec - t->tv_nsec) / 1e6;
}

/*
 * The page of doc holding unhealthy[cursor .. cursor + limit), as text
 * (malloc'd), NULL: ENOMEM.  The default page leaves out hosts[] (up to 500
 * reports: what a poller does not need; hosts_total stays), a page asked
 * for by unhealthy_limit or cursor keeps it.
 */
static char *page_text(const cJSON *doc, long long cursor, long long limit, int n_listed, int with_hosts)
{
	cJSON *page = cJSON_CreateObject();
	const cJSON *it;
	char *text;

	if (!page)
		return NULL;
	cJSON_ArrayForEach(it, doc) {
		if (strcmp(it->string, "unhealthy") == 0) {
			cJSON *arr = cJSON_AddArrayToObject(page, "unhealthy");
			const cJSON *u;
			long long i = 0;

			cJSON_ArrayForEach(u, it) {
				if (i >= cursor && i < cursor + limit)
					cJSON_AddItemToArray(arr, cJSON_Duplicate(u, 1));
				i++;
			}
		} else if (with_hosts || strcmp(it->string, "hosts") != 0) {
			cJSON_AddItemToObject(page, it->string, cJSON_Duplicate(it, 1));
		}
	}
	if (cursor + limit < n_listed)
		cJSON_AddNumberToObject(page, "next_cursor", (double)(cursor + limit));
	else
		cJSON_AddNullToObject(page, "next_cursor");
	text = cJSON_PrintUnformatted(page);
	cJSON_Delete(page);
	return text;
}

static struct fg_shared_body *shared_of(char *text)
{
	struct fg_shared_body *b = text ? fg_shared_body_new(text, strlen(text)) : NULL;

	cJSON_free(text);
	return b;
}

/* A fresh snapshot from the store; NULL with resp set. */
static struct fg_health_snap *build(struct fg_req *req, struct fg_resp *resp)
{
	struct fg_err err = { 0 };
	struct fg_health_snap *h;
	struct fg_store *s = fg_api_store(req->api, &err);
	cJSON *doc = NULL;

	if (!s || fg_store_fleet_health(s, &doc, &err) != 0) {
		fg_problem_from_err(resp, req, &err);
		if (err.code != FG_ENOSPC && err.code != FG_ENOMEM && err.code != FG_EINTERNAL)
			resp->retry_after = FG_API_RETRY_AFTER_S;
		return NULL;
	}
	fg_json_utf8_fix(doc);
	h = calloc(1, sizeof(*h));
	if (!h) {
		cJSON_Delete(doc);
		fg_problem(resp, req, 500, "internal", "Internal error", "out of memory");
		return NULL;
	}
	h->refs = 1;
	h->doc = doc;
	h->n_listed = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(doc, "unhealthy"));
	h->full = shared_of(cJSON_PrintUnformatted(doc));
	h->page = shared_of(page_text(doc, 0, FG_API_HEALTH_PAGE_DEFAULT, h->n_listed, 0));
	if (!h->full || !h->page) {
		fg_health_snap_unref(h);
		fg_problem(resp, req, 500, "internal", "Internal error", "out of memory");
		return NULL;
	}
	return h;
}

/*
 * The current snapshot (one reference), rebuilt when stale; NULL with resp
 * set.  One request builds at a time.  A snapshot answers a request when
 * it was built at or after the generation the request saw on arrival (it
 * holds every write acknowledged before), and while it is not too old or
 * another request is already building its successor.  A request it cannot
 * answer waits for the build under way, then looks again, and builds
 * itself only when no build is under way: after a write, the handler
 * threads asking at once used to build the whole fleet each, and the
 * last of them answered after all their builds had shared the CPUs.
 */
static struct fg_health_snap *current(struct fg_req *req, struct fg_resp *resp)
{
	struct fg_api *api = req->api;
	struct fg_health_snap *h = NULL, *old = NULL;
	unsigned long long gen, built_at;

	pthread_mutex_lock(&api->health_lock);
	gen = api->generation;
	for (;;) {
		if (api->health && api->health_gen >= gen &&
		    (ms_since(&api->health_at) < FG_API_HEALTH_MAX_AGE_MS || api->health_building)) {
			h = snap_ref(api->health);
			pthread_mutex_unlock(&api->health_lock);
			return h;
		}
		if (!api->health_building)
			break;
		pthread_cond_wait(&api->health_built, &api->health_lock);
	}
	/* Read before the store is: a write racing the build leaves a newer generation, so the copy counts as stale. */
	built_at = api->generation;
	api->health_building = 1;
	api->health_builds++;
	pthread_mutex_unlock(&api->health_lock);
	h = build(req, resp);
	pthread_mutex_lock(&api->health_lock);
	api->health_building = 0;
	if (h && (!api->health || built_at >= api->health_gen)) {
		old = api->health;
		api->health = snap_ref(h);
		api->health_gen = built_at;
		clock_gettime(CLOCK_MONOTONIC, &api->health_at);
	}
	pthread_cond_broadcast(&api->health_built);
	pthread_mutex_unlock(&api->health_lock);
	fg_health_snap_unref(old);
	return h;
}

/* A query integer in min..max (def when absent), else a fault in v. */
static long long param(struct fg_req *req, struct fg_vlist *v, const char *key, long long def, long long min,
		       long long max)
{
	const char *text = fg_req_query(req, key);
	char *end;
	long long n;

	if (!text || !*text)
		return def;
	n = strtoll(text, &end, 10);
	if (*end || *text < '0' || *text > '9' || n < min || n > max) {
		fg_v_add_param(v, "invalid-query", key, "must be an integer from %lld to %lld", min, max);
		return def;
	}
	return n;
}

void fg_api_get_fleet_health(struct fg_req *req, struct fg_resp *resp)
{
	struct fg_vlist v = { .n = 0 };
	const char *full = fg_req_query(req, "full");
	long long limit = param(req, &v, "unhealthy_limit", FG_API_HEALTH_PAGE_DEFAULT, 1, FG_API_HEALTH_PAGE_MAX);
	long long cursor = param(req, &v, "cursor", 0, 0, INT_MAX);
	int whole = full && (strcmp(full, "1") == 0 || strcmp(full, "true") == 0);
	struct fg_health_snap *h;

	if (full && !whole && strcmp(full, "0") != 0 && strcmp(full, "false") != 0)
		fg_v_add_param(&v, "invalid-query", "full", "must be 1, true, 0 or false");
	if (v.n) {
		fg_problem_v(resp, req, &v);
		return;
	}
	if (!(h = current(req, resp)))
		return;
	resp->status = 200;
	resp->content_type = "application/json";
	if (whole) {
		resp->shared = fg_shared_body_ref(h->full);
	} else if (!fg_req_query(req, "unhealthy_limit") && !fg_req_query(req, "cursor")) {
		resp->shared = fg_shared_body_ref(h->page);
	} else {
		resp->body = page_text(h->doc, cursor, limit, h->n_listed, 1);
		if (!resp->body)
			fg_problem(resp, req, 500, "internal", "Internal error", "out of memory");
	}
	fg_health_snap_unref(h);
}
