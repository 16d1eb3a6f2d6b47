/*
 * config.h: `forged serve` settings: defaults, then a JSON config file, then
 * flags of the same names (docs/interfaces.md section 7).
 *
 * Keys: listen ("127.0.0.1:8470"), state_dir ($STATE_DIRECTORY under systemd,
 * else ./forged-state), workers (the number of cores; 0 queues jobs without
 * running them: an API-only instance for maintenance and tests), tokens_file (none:
 * no authentication), allow_roots (the current folder when run by hand),
 * allow_hosts (the hosts, "host" or "host:port", that URL sources and their
 * redirects may name; none: URL sources are refused),
 * max_body_bytes (1 MiB), queue_cap (1000), drain_seconds (30),
 * max_attempts (3), store_url (flag --store; "": sqlite://STATE/forged.db;
 * or postgres://USER@HOST/DB for a farm, store.h), lease_seconds (60: how
 * long a claimed job stays this instance's without a heartbeat; the
 * heartbeat renews it every third of that), http_threads (16: a POST waits
 * in its handler thread for the group commit that holds its write, so the
 * number of threads bounds how many writes share one commit),
 * per_ip_connections (32: connections one client address may hold; raise it
 * when the clients reach forged through one proxy or load balancer),
 * collapse_threshold (0.10: the verification verdict's
 * acceptance collapse threshold, strictly inside (0, 1); MTPLX's is 0.05),
 * artifacts_dir (STATE/artifacts: where jobs without an out write their
 * artifact, as artifacts_dir/ID), etag_ttl_seconds (3600: how long a remote
 * file's ETag is trusted without asking the server), inspect_seconds (60: an
 * API inspection's deadline), forge_target (the target list of jobs that name
 * none; unset: FG_FORGE_DEFAULT_TARGET, "mtplx-2.12").
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
	unsigned per_ip_connections;
	double collapse_threshold;
	char artifacts_dir[PATH_MAX];      /* STATE/artifacts unless set */
	unsigned etag_ttl_seconds;         /* fg_pull_opts.cache_ttl_seconds of remote reads */
	unsigned inspect_seconds;
	char forge_target[512];            /* "" when unset (FG_FORGE_TARGET_MAX) */
};

/*
 * Fill cfg from defaults, the file named by --config (if any) and the flags in
 * argv[1..argc).  FG_EUSAGE names a bad flag or key; FG_EINPUT a bad file.
 */
int fg_config_load(struct fg_config *cfg, int argc, char **argv, struct fg_err *err);

/* The getopt_long table of `forged serve` (daemon/args.h): --config, one flag per key, the global options. */
struct option;
const struct option *fg_config_longopts(void);

#endif
