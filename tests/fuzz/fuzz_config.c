/*
 * fuzz_config.c: libFuzzer target for `forged serve`'s configuration
 * (daemon/config.c, fg_config_load): the JSON config file and the flags
 * read by the same table.
 *
 * Input: the config file's bytes, optionally followed by a line "#argv" and
 * then one flag per line ("--workers=3", or "--listen" and "[::1]:0" on two
 * lines).  The file is handed over as a memfd (--config /proc/self/fd/N), so
 * nothing touches the disk.  When the load succeeds, every field must be one
 * the table allows: ports, counts and the fraction in range, every string
 * NUL-terminated inside its array, list counts at most FG_CONFIG_MAX_LIST.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "daemon/config.h"
#include "tests/fuzz/fuzz_common.h"

#define MAX_ARGS 64

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_setup_work("config");
	return 0;
}

static void check_config(const struct fg_config *c)
{
	FZ_CHECK(memchr(c->listen_addr, '\0', sizeof(c->listen_addr)));
	FZ_CHECK(memchr(c->state_dir, '\0', sizeof(c->state_dir)) && c->state_dir[0]);
	FZ_CHECK(memchr(c->tokens_file, '\0', sizeof(c->tokens_file)));
	FZ_CHECK(memchr(c->artifacts_dir, '\0', sizeof(c->artifacts_dir)) && c->artifacts_dir[0]);
	FZ_CHECK(c->workers <= 256);
	FZ_CHECK(c->n_allow_roots >= 1 && c->n_allow_roots <= FG_CONFIG_MAX_LIST);
	FZ_CHECK(c->n_allow_hosts <= FG_CONFIG_MAX_LIST);
	for (size_t i = 0; i < c->n_allow_roots; i++)
		FZ_CHECK(memchr(c->allow_roots[i], '\0', sizeof(c->allow_roots[i])) && c->allow_roots[i][0]);
	for (size_t i = 0; i < c->n_allow_hosts; i++)
		FZ_CHECK(memchr(c->allow_hosts[i], '\0', sizeof(c->allow_hosts[i])) && c->allow_hosts[i][0]);
	FZ_CHECK(c->max_body_bytes >= 1024 && c->max_body_bytes <= (1u << 30));
	FZ_CHECK(c->queue_cap >= 1 && c->queue_cap <= 1000000);
	FZ_CHECK(c->drain_seconds <= 3600);
	FZ_CHECK(c->max_attempts >= 1 && c->max_attempts <= 100);
	FZ_CHECK(c->collapse_threshold > 0.0 && c->collapse_threshold < 1.0);
	FZ_CHECK(c->etag_ttl_seconds <= 31536000);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char marker[] = "\n#argv\n";
	const uint8_t *sep = memmem(data, size, marker, sizeof(marker) - 1);
	size_t file_len = sep ? (size_t)(sep - data) : size;
	char path[64], *flags = NULL, *argv[MAX_ARGS + 4];
	struct fg_config *cfg = malloc(sizeof(*cfg)); /* ~70 KiB: not on the stack */
	struct fg_err err = { 0 };
	int argc = 0, fd, rc;

	if (!cfg)
		return 0;
	fd = fz_memfd(data, file_len, path);
	argv[argc++] = "serve";
	argv[argc++] = "--config";
	argv[argc++] = path;
	if (sep) {
		size_t n = size - file_len - (sizeof(marker) - 1);
		char *p;

		flags = malloc(n + 1);
		if (!flags)
			goto out;
		memcpy(flags, sep + sizeof(marker) - 1, n);
		flags[n] = '\0';
		/* One flag a line; a NUL inside a line ends that argument, as in a real argv. */
		for (p = flags; *p && argc < MAX_ARGS;) {
			char *nl = strchr(p, '\n');

			if (nl)
				*nl = '\0';
			argv[argc++] = p;
			if (!nl)
				break;
			p = nl + 1;
		}
	}
	argv[argc] = NULL;
	memset(&err, 0, sizeof(err));
	rc = fg_config_load(cfg, argc, argv, &err);
	if (rc == 0)
		check_config(cfg);
	else
		FZ_CHECK(rc < 0 && err.code == rc && memchr(err.msg, '\0', sizeof(err.msg)));
out:
	free(flags);
	free(cfg);
	close(fd);
	return 0;
}
