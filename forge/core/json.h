/*
 * json.h: reading JSON documents from files and byte buffers (cJSON), the
 * way every layer reads them: the size capped before anything is read, NUL
 * bytes and trailing garbage refused, and errors that name the file.
 */
#ifndef FG_JSON_H
#define FG_JSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "forge/core/error.h"

/*
 * Read the whole regular file path (at most cap bytes) and parse it.
 * Returns 0 with *out set (the caller frees it with cJSON_Delete), FG_EINPUT
 * (cannot open or read, not a regular file, over cap, not JSON) or
 * FG_ENOMEM; *out is untouched on failure.
 */
int fg_json_load(cJSON **out, const char *path, size_t cap, struct fg_err *err);

/*
 * The same for a file already open on fd (checked regular; the caller
 * closes fd), labelled label, refusing a document of more than max_nodes
 * JSON values (counted before parsing: a cJSON node costs ~64 bytes).
 */
int fg_json_load_fd(cJSON **out, int fd, const char *label, size_t cap, size_t max_nodes, struct fg_err *err);

/*
 * An upper bound of the JSON values in len bytes of text: one more than
 * the commas, colons and opening brackets outside strings.
 */
size_t fg_json_count_nodes(const char *text, size_t len);

/*
 * Parse len bytes of JSON text: exactly one document, optionally followed by
 * white space, and no NUL byte.  label (a file name or URL) names the text in
 * errors.  Returns 0 with *out set (caller frees), FG_EINPUT; *out is
 * untouched on failure.
 */
int fg_json_parse(cJSON **out, const char *text, size_t len, const char *label, struct fg_err *err);

#endif
