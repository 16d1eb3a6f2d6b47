/*
 * config.h: `forged serve` settings: defaults, then a JSON config file, then
 * flags of the same names (design.md section 10).
 *
 * Keys: listen ("127.0.0.1:8470"), state_dir ($STATE_DIRECTORY under systemd,
 * else ./forged-state), workers (the number of cores; 0 queues jobs without
 * running them: an API-only instance for maintenance and tests), tokens_file (none:
 * no authentication), allow_roots (the current folder when run by hand),
 * allow_hosts (for URL sources, unused until they are supported),
 * max_body_bytes (1 MiB), queue_cap (1000), drain_seconds (30),
 * max_attempts (3), store_url (flag --store; "": sqlite://STATE/forged.db;
 * or postgres://USER@HOST/DB for a farm, store.h), lease_seconds (60: how
 * long a claimed job stays this instance's without a heartbeat; the
 * heartbeat renews it every third of that), http_threads (16: a POST waits
 * in its handler thread for the group commit that holds its write, so the
 * number of threads bounds how many writes share one commit).
 */
#ifndef FG_CONFIG_H
#define FG_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "forge/core/error.h"

#define FG_CONFIG_MAX_LIST 16

struct fg_config {
	char listen_addr[64];
	uint16_t port;
	char state_dir[PATH_MAX];
	unsigned workers;
	char tokens_file[PATH_MAX];        /* "" when none */
	char allow_roots[FG_CONFIG_MAX_LIST][PATH_MAX];
	size_t n_allow_roots;
	char allow_hosts[FG_CONFIG_MAX_LIST][256];
	size_t n_allow_hosts;
	size_t max_body_bytes;
	int queue_cap;
	unsigned drain_seconds;
	int max_attempts;
	char store_url[PATH_MAX + 64];     /* "" when the default */
	int lease_seconds;
	unsigned http_threads;
};

/*
 * Fill cfg from defaults, the file named by --config (if any) and the flags in
 * argv[1..argc).  FG_EUSAGE names a bad flag or key; FG_EINPUT/FG_EIO a bad file.
 */
int fg_config_load(struct fg_config *cfg, int argc, char **argv, struct fg_err *err);

#endif
