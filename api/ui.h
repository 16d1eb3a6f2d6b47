/*
 * ui.h: the dashboard's static assets (web/), compiled into the binary by
 * tests/embed.py --assets (see the Makefile), so `forged serve` needs no
 * file at run time.
 */
#ifndef FG_UI_H
#define FG_UI_H

#include <stddef.h>

struct fg_ui_asset {
	const char *name;              /* the file name under web/, served as /ui/NAME */
	const unsigned char *data;
	size_t len;
	const char *etag;              /* quoted, from the bytes' SHA-256 at build time */
};

extern const struct fg_ui_asset fg_ui_assets[];
extern const size_t fg_ui_assets_n;

/* The asset called name, or NULL. */
const struct fg_ui_asset *fg_ui_find(const char *name);

/* The Content-Type of an asset by its extension (application/octet-stream when unknown). */
const char *fg_ui_content_type(const char *name);

#endif
