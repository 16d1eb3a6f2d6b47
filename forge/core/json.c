/*
 * json.c: JSON documents from files and buffers (json.h).
 */
#include "forge/core/json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

size_t fg_json_count_nodes(const char *text, size_t len)
{
	size_t n = 1;
	int in_str = 0;

	for (size_t i = 0; i < len; i++) {
		char c = text[i];

		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
		} else if (c == '"') {
			in_str = 1;
		} else if (c == ',' || c == ':' || c == '[' || c == '{') {
			n++;
		}
	}
	return n;
}

int fg_json_load_fd(cJSON **out, int fd, const char *label, size_t cap, size_t max_nodes, struct fg_err *err)
{
	struct stat st;
	char *text = NULL;
	cJSON *doc;
	size_t got = 0, nodes;
	int rc = 0;

	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return fg_err_set(err, FG_EINPUT, "%s: not a readable regular file", label);
	if ((uint64_t)st.st_size > cap)
		return fg_err_set(err, FG_EINPUT, "%s: %lld bytes exceed the cap of %zu", label, (long long)st.st_size, cap);
	text = malloc((size_t)st.st_size + 1);
	if (!text)
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", label);
	while (got < (size_t)st.st_size) {
		ssize_t r = pread(fd, text + got, (size_t)st.st_size - got, (off_t)got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = fg_err_set(err, FG_EINPUT, "%s: read failed: %s", label, r < 0 ? strerror(errno) : "file shrank");
			goto out;
		}
		got += (size_t)r;
	}
	text[got] = '\0';
	if (max_nodes && (nodes = fg_json_count_nodes(text, got)) > max_nodes) {
		rc = fg_err_set(err, FG_EINPUT, "%s: up to %zu JSON values exceed the cap of %zu", label, nodes, max_nodes);
		goto out;
	}
	rc = fg_json_parse(&doc, text, got, label, err);
	if (!rc)
		*out = doc;
out:
	free(text);
	return rc;
}

int fg_json_load(cJSON **out, const char *path, size_t cap, struct fg_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), rc;

	if (fd < 0)
		return fg_err_set(err, FG_EINPUT, "%s: cannot open: %s", path, strerror(errno));
	rc = fg_json_load_fd(out, fd, path, cap, 0, err);
	close(fd);
	return rc;
}

int fg_json_parse(cJSON **out, const char *text, size_t len, const char *label, struct fg_err *err)
{
	const char *end = NULL;
	cJSON *doc;

	if (memchr(text, '\0', len))
		return fg_err_set(err, FG_EINPUT, "%s: not JSON text (contains a NUL byte)", label);
	doc = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (doc && end) {
		while ((size_t)(end - text) < len && (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t'))
			end++;
		if ((size_t)(end - text) < len) {
			cJSON_Delete(doc);
			doc = NULL;
		}
	}
	if (!doc)
		return fg_err_set(err, FG_EINPUT, "%s: invalid JSON near byte %td", label,
				  end ? end - text : (ptrdiff_t)0);
	*out = doc;
	return 0;
}
