/*
 * lazy_curl.c: the libcurl functions forged calls, loaded on first use
 * (forge/core/lazylib.h): a local inspection never loads libcurl and the
 * 20-odd libraries it pulls in.  Each stub has curl.h's prototype and
 * forwards to libcurl's own function; a newly used curl function needs its
 * line here (the link fails until it has one).
 */
#define CURL_DISABLE_TYPECHECK 1 /* the stubs below define the functions the type-check macros wrap */
#include <curl/curl.h>

#include "forge/core/lazylib.h"

#include <stdarg.h>

#ifndef FG_SONAME_CURL
#define FG_SONAME_CURL "libcurl.so.4"
#endif

/* F and V as lazylib.h describes them; the three variadic functions are written out below. */
#define CURL_FNS(F, V) \
	F(CURLcode, curl_global_init, (long flags), (flags), CURLE_FAILED_INIT) \
	F(CURL *, curl_easy_init, (void), (), NULL) \
	V(curl_easy_cleanup, (CURL *curl), (curl)) \
	V(curl_easy_reset, (CURL *curl), (curl)) \
	F(CURLcode, curl_easy_perform, (CURL *curl), (curl), CURLE_FAILED_INIT) \
	F(const char *, curl_easy_strerror, (CURLcode code), (code), "libcurl could not be loaded") \
	F(char *, curl_easy_escape, (CURL *curl, const char *string, int length), (curl, string, length), NULL) \
	V(curl_free, (void *p), (p)) \
	F(struct curl_slist *, curl_slist_append, (struct curl_slist *list, const char *data), (list, data), NULL) \
	V(curl_slist_free_all, (struct curl_slist *list), (list)) \
	F(curl_version_info_data *, curl_version_info, (CURLversion v), (v), NULL) \
	F(CURLM *, curl_multi_init, (void), (), NULL) \
	F(CURLMcode, curl_multi_cleanup, (CURLM *m), (m), CURLM_BAD_HANDLE) \
	F(CURLMcode, curl_multi_add_handle, (CURLM *m, CURL *e), (m, e), CURLM_BAD_HANDLE) \
	F(CURLMcode, curl_multi_remove_handle, (CURLM *m, CURL *e), (m, e), CURLM_BAD_HANDLE) \
	F(CURLMcode, curl_multi_perform, (CURLM *m, int *running), (m, running), CURLM_BAD_HANDLE) \
	F(CURLMcode, curl_multi_poll, (CURLM *m, struct curl_waitfd extra_fds[], unsigned int extra_nfds, \
				       int timeout_ms, int *ret), (m, extra_fds, extra_nfds, timeout_ms, ret), \
	  CURLM_BAD_HANDLE) \
	F(CURLMsg *, curl_multi_info_read, (CURLM *m, int *msgs_in_queue), (m, msgs_in_queue), NULL) \
	F(CURLU *, curl_url, (void), (), NULL) \
	V(curl_url_cleanup, (CURLU *u), (u)) \
	F(CURLUcode, curl_url_get, (CURLU *u, CURLUPart what, char **part, unsigned int flags), \
	  (u, what, part, flags), CURLUE_OUT_OF_MEMORY) \
	F(CURLUcode, curl_url_set, (CURLU *u, CURLUPart what, const char *part, unsigned int flags), \
	  (u, what, part, flags), CURLUE_OUT_OF_MEMORY)

/* The variadic three come last; their stubs are written out below. */
static const char *const names[] = { CURL_FNS(FG_LAZY_NAME, FG_LAZY_NAME_V) "curl_easy_setopt", "curl_easy_getinfo",
				     "curl_multi_setopt" };
static struct {
	CURL_FNS(FG_LAZY_SLOT, FG_LAZY_SLOT_V)
	void *curl_easy_setopt, *curl_easy_getinfo, *curl_multi_setopt;
} lazy_slots;
_Static_assert(sizeof(lazy_slots) == sizeof(names) / sizeof(names[0]) * sizeof(void *), "one slot per name");
static struct fg_lazylib lazy_lib = FG_LAZYLIB_INIT(FG_SONAME_CURL, "URL sources (http, https, hf)", names, &lazy_slots);

CURL_FNS(FG_LAZY_STUB, FG_LAZY_STUB_V)

/*
 * The option's argument, read by the type its number encodes (curl.h:
 * CURLOPTTYPE_LONG, OBJECTPOINT, FUNCTIONPOINT, OFF_T, BLOB ranges; the
 * multi options use the same ranges), and passed on as that type.
 */
#define FORWARD_OPTION(fn, handle, option, ap, rc) \
	do { \
		if ((long)(option) < CURLOPTTYPE_OBJECTPOINT) \
			rc = fn(handle, option, va_arg(ap, long)); \
		else if ((long)(option) < CURLOPTTYPE_FUNCTIONPOINT) \
			rc = fn(handle, option, va_arg(ap, void *)); \
		else if ((long)(option) < CURLOPTTYPE_OFF_T) \
			rc = fn(handle, option, va_arg(ap, void (*)(void))); \
		else if ((long)(option) < CURLOPTTYPE_BLOB) \
			rc = fn(handle, option, va_arg(ap, curl_off_t)); \
		else \
			rc = fn(handle, option, va_arg(ap, void *)); \
	} while (0)

CURLcode(curl_easy_setopt)(CURL *curl, CURLoption option, ...)
{
	CURLcode (*fn)(CURL *, CURLoption, ...);
	CURLcode rc;
	va_list ap;

	if (!fg_lazylib_load(&lazy_lib))
		return CURLE_FAILED_INIT;
	fn = (CURLcode(*)(CURL *, CURLoption, ...))lazy_slots.curl_easy_setopt;
	va_start(ap, option);
	FORWARD_OPTION(fn, curl, option, ap, rc);
	va_end(ap);
	return rc;
}

CURLMcode(curl_multi_setopt)(CURLM *m, CURLMoption option, ...)
{
	CURLMcode (*fn)(CURLM *, CURLMoption, ...);
	CURLMcode rc;
	va_list ap;

	if (!fg_lazylib_load(&lazy_lib))
		return CURLM_BAD_HANDLE;
	fn = (CURLMcode(*)(CURLM *, CURLMoption, ...))lazy_slots.curl_multi_setopt;
	va_start(ap, option);
	FORWARD_OPTION(fn, m, option, ap, rc);
	va_end(ap);
	return rc;
}

/* Every CURLINFO_* takes one pointer, where the answer goes. */
CURLcode(curl_easy_getinfo)(CURL *curl, CURLINFO info, ...)
{
	CURLcode (*fn)(CURL *, CURLINFO, ...);
	CURLcode rc;
	va_list ap;

	if (!fg_lazylib_load(&lazy_lib))
		return CURLE_FAILED_INIT;
	fn = (CURLcode(*)(CURL *, CURLINFO, ...))lazy_slots.curl_easy_getinfo;
	va_start(ap, info);
	rc = fn(curl, info, va_arg(ap, void *));
	va_end(ap);
	return rc;
}
