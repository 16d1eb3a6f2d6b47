/*
 * ui.c: the dashboard `forged serve` answers itself: `/` redirects to
 * `/ui/`, `/ui/` is web/index.html and `/ui/NAME` the other files of web/,
 * all compiled in (ui.h).  The page reads only the public JSON API, with the
 * bearer token the user gives it; GET /v1/whoami tells it what that token
 * may do, so it offers writes (cancel) only to write tokens.
 *
 * Every dashboard answer carries a strict Content-Security-Policy (scripts,
 * styles and connections from this origin only, no inline code, no
 * framing), X-Frame-Options DENY, nosniff (server.c adds that to every
 * answer) and no referrer; assets are revalidated by ETag (no-cache), so a
 * new binary's assets are picked up at once and an unchanged one costs a 304.
 */
#include "api/internal.h"

#include <stdio.h>
#include <string.h>

#include "api/ui.h"

const char *const fg_ui_headers[] = {
	"Content-Security-Policy",
	"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
	"font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
	"X-Frame-Options", "DENY",
	"Referrer-Policy", "no-referrer",
	"Cross-Origin-Opener-Policy", "same-origin",
	NULL, NULL,
};

static const struct {
	const char *ext;
	const char *type;
} types[] = {
	{ ".html", "text/html; charset=utf-8" },
	{ ".css", "text/css; charset=utf-8" },
	{ ".js", "text/javascript; charset=utf-8" },
	{ ".svg", "image/svg+xml" },
	{ ".png", "image/png" },
	{ ".ico", "image/x-icon" },
	{ ".json", "application/json" },
	{ ".txt", "text/plain; charset=utf-8" },
};

const char *fg_ui_content_type(const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		size_t e = strlen(types[i].ext);

		if (n > e && strcmp(name + n - e, types[i].ext) == 0)
			return types[i].type;
	}
	return "application/octet-stream";
}

const struct fg_ui_asset *fg_ui_find(const char *name)
{
	for (size_t i = 0; i < fg_ui_assets_n; i++)
		if (strcmp(fg_ui_assets[i].name, name) == 0)
			return &fg_ui_assets[i];
	return NULL;
}

static void serve_asset(struct fg_req *req, struct fg_resp *resp, const char *name)
{
	const struct fg_ui_asset *a = fg_ui_find(name);

	resp->ui = 1;
	if (!a) {
		fg_problem(resp, req, 404, "not-found", "Not found", "the dashboard has no file '%s'", name);
		return;
	}
	resp->status = 200;
	resp->fixed = a->data;
	resp->fixed_len = a->len;
	resp->content_type = fg_ui_content_type(a->name);
	resp->cache_control = "no-cache";
	snprintf(resp->etag, sizeof(resp->etag), "%s", a->etag);
}

void fg_ui_root(struct fg_req *req, struct fg_resp *resp)
{
	(void)req;
	resp->ui = 1;
	resp->status = 302;
	resp->content_type = "text/plain; charset=utf-8";
	resp->body = strdup("the dashboard is at /ui/\n");
	snprintf(resp->location, sizeof(resp->location), "/ui/");
}

void fg_ui_index(struct fg_req *req, struct fg_resp *resp)
{
	serve_asset(req, resp, "index.html");
}

void fg_ui_asset(struct fg_req *req, struct fg_resp *resp)
{
	serve_asset(req, resp, req->asset);
}

void fg_ui_whoami(struct fg_req *req, struct fg_resp *resp)
{
	static const char *const roles[] = { [FG_ROLE_NONE] = NULL, [FG_ROLE_READ] = "read", [FG_ROLE_WRITE] = "write" };
	char name[64];
	enum fg_role role = fg_req_role(req, name, sizeof(name));
	cJSON *doc = cJSON_CreateObject();

	if (doc) {
		cJSON_AddBoolToObject(doc, "auth", req->api->auth_enabled);
		if (roles[role])
			cJSON_AddStringToObject(doc, "role", roles[role]);
		else
			cJSON_AddNullToObject(doc, "role");
		if (name[0])
			cJSON_AddStringToObject(doc, "token", name);
		else
			cJSON_AddNullToObject(doc, "token");
	}
	fg_json_reply(resp, 200, doc);
}
