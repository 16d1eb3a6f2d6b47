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

int fg_json_load(cJSON **out, const char *path, size_t cap, struct fg_err *err)
{
	struct stat st;
	char *text = NULL;
	cJSON *doc;
	size_t got = 0;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fg_err_set(err, FG_EIO, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		rc = fg_err_set(err, FG_EIO, "%s: not a readable regular file", path);
		goto out;
	}
	if ((uint64_t)st.st_size > cap) {
		rc = fg_err_set(err, FG_EINPUT, "%s: %lld bytes exceed the cap of %zu",
				path, (long long)st.st_size, cap);
		goto out;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		rc = fg_err_set(err, FG_ENOMEM, "%s: out of memory", path);
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, text + got, (size_t)st.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = fg_err_set(err, FG_EIO, "%s: read failed: %s", path,
					r < 0 ? strerror(errno) : "file shrank");
			goto out;
		}
		got += (size_t)r;
	}
	text[got] = '\0';
	rc = fg_json_parse(&doc, text, got, path, err);
	if (rc)
		goto out;
	*out = doc;
out:
	free(text);
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
