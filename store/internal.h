/*
 * internal.h: what the store's .c files share and nothing outside store/
 * may use (tests and the store benchmark excepted): the connection struct,
 * the prepared-statement cache, transaction and error helpers, and the SQL
 * fragments every file writes the same way (the timestamp format).
 *
 * A struct fg_store is one SQLite connection plus the statements prepared
 * on it.  It is not thread-safe and must not be shared: the connection is
 * opened with SQLITE_OPEN_NOMUTEX and the cached statements hold per-call
 * state, so each thread opens its own store (SQLite's file locks, WAL and
 * busy_timeout serialise the writers of different connections).
 */
#ifndef FG_STORE_INTERNAL_H
#define FG_STORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "forge/core/error.h"
#include "forge/model/convention.h"
#include "store/store.h"

/*
 * RFC 3339 UTC with milliseconds.  Every timestamp the store writes uses
 * this exact form, so text comparison orders them (the stale-heartbeat test
 * of recovery relies on it).
 */
#define FG_SQL_NOW "strftime('%Y-%m-%dT%H:%M:%fZ','now')"

/* Distinct SQL texts one connection may cache; the store uses fewer than 50. */
#define FG_SQL_CACHE_MAX 96

/* The largest page a list returns (the smallest is 1). */
#define FG_SQL_LIMIT_MAX FG_STORE_LIST_LIMIT_MAX

struct fg_sql_slot {
	uint64_t hash;          /* FNV-1a of the SQL text, checked before strcmp */
	sqlite3_stmt *stmt;     /* sqlite3_sql(stmt) is the key itself */
};

struct fg_store {
	sqlite3 *db;
	int user_version;       /* after migration */
	long long busy_ms;      /* how long a statement waits for a lock (db.c's busy handler) */
	size_t n_slots;
	struct fg_sql_slot slots[FG_SQL_CACHE_MAX];
};

/*
 * The statement for sql on this connection, prepared on first use and kept
 * until fg_store_close.  The statement comes back reset with its bindings
 * cleared; the caller binds, steps, and hands it back with fg_sql_put (which
 * resets it, ending any read it holds open).  A statement may be in use once
 * at a time: a caller must not fetch the same SQL again before putting it.
 * fg_sql_fail's code with SQLite's message when the SQL does not prepare,
 * FG_EINTERNAL when the cache is full.
 */
int fg_sql_get(struct fg_store *s, const char *sql, sqlite3_stmt **out, struct fg_err *err);

/* Reset st and clear its bindings (so large bound texts are freed).  NULL allowed. */
void fg_sql_put(sqlite3_stmt *st);

/*
 * The FG_E* code of a SQLite result code (primary or extended), which is
 * what the API and the CLI act on: FG_ENOMEM for SQLITE_NOMEM; FG_ENOSPC for
 * SQLITE_FULL (our disk is full: 507); FG_ESTATE for BUSY, LOCKED, IOERR,
 * CANTOPEN, READONLY, CORRUPT, NOTADB, PERM, PROTOCOL, NOLFS (our database
 * cannot be used now: 503, exit 3); FG_EINTERNAL for the rest (a bug of ours:
 * a client's input never reaches SQLite unchecked).
 */
int fg_sql_code(int rc);

/*
 * Record a SQLite failure of rc in err as "<what>: <sqlite3_errmsg>" and
 * return fg_sql_code(rc).
 */
int fg_sql_fail(struct fg_store *s, int rc, struct fg_err *err, const char *what);

/*
 * Transactions.  fg_sql_begin takes the write lock at once (BEGIN IMMEDIATE:
 * a read-then-write never meets SQLITE_BUSY halfway, and busy_timeout waits
 * for the lock); fg_sql_begin_read opens a deferred transaction so several
 * SELECTs see one snapshot.  fg_sql_commit commits (rolling back if the commit
 * fails); fg_sql_rollback rolls back when a transaction is open and never fails.
 */
int fg_sql_begin(struct fg_store *s, struct fg_err *err);
int fg_sql_begin_read(struct fg_store *s, struct fg_err *err);
int fg_sql_commit(struct fg_store *s, struct fg_err *err);
void fg_sql_rollback(struct fg_store *s);

/* Run a statement that returns no rows (or whose rows are ignored) to completion. */
int fg_sql_exec(struct fg_store *s, sqlite3_stmt *st, struct fg_err *err, const char *what);

/*
 * Bind text (NULL binds SQL NULL).  The text is copied by SQLite
 * (SQLITE_TRANSIENT) so the caller's buffer may go away before the step.
 */
int fg_sql_bind_text(sqlite3_stmt *st, int i, const char *text);

/*
 * Copy column col of the current row into dst of cap bytes, truncated at a
 * UTF-8 character boundary; a NULL column gives "".
 */
void fg_sql_column_copy(sqlite3_stmt *st, int col, char *dst, size_t cap);

/*
 * Parse stored JSON text of column col (NULL column: JSON null).  FG_ESTATE
 * naming what when the stored text is not JSON (a corrupted row), FG_ENOMEM.
 */
int fg_sql_column_json(sqlite3_stmt *st, int col, cJSON **out, struct fg_err *err, const char *what);

/* Clamp a page size to 1..FG_SQL_LIMIT_MAX. */
int fg_sql_clamp_limit(int limit);

/* Append the JSON of the current row of st to arr; 0 or FG_E*. */
typedef int (*fg_sql_item_fn)(cJSON *arr, sqlite3_stmt *st, struct fg_err *err);

/*
 * Step st, a bound keyset query whose column 0 is the row id, appending each
 * row with item; then *out is the array and *next the last id when the page
 * holds limit rows (0 otherwise).  Puts st back in every case.
 */
int fg_sql_page(struct fg_store *s, sqlite3_stmt *st, int limit, fg_sql_item_fn item, cJSON **out,
	       int64_t *next, const char *what, struct fg_err *err);

/*
 * The probe q-norm buckets, in order, as the schema's probe_bucket column
 * names them: [0, 1.25), [1.25, 1.74), [1.74, 1.83] (the healthy band),
 * (1.83, 2.4], (2.4, inf).  The edges are convention.h's FG_QK_ABSOLUTE_MIN,
 * FG_QK_BAND_MIN, FG_QK_BAND_MAX and FG_QK_DOUBLE_ABOVE: db.c's CASE is
 * built from them (FG_SQL_STR) and fleet.c's ranges use them;
 * tests/unit/test_store.c checks the two against each other.
 */
#define FG_SQL_PROBE_BUCKETS 5
#define FG_SQL_PROBE_BAND 2
extern const char *const fg_sql_probe_buckets[FG_SQL_PROBE_BUCKETS];

/* The numeric range of each bucket, for the health document (fleet.c). */
struct fg_sql_probe_range {
	double lo, hi;      /* hi < 0: unbounded */
};
extern const struct fg_sql_probe_range fg_sql_probe_ranges[FG_SQL_PROBE_BUCKETS];

/* A numeric macro as SQL text: FG_SQL_STR(FG_QK_BAND_MIN) is "1.74". */
#define FG_SQL_STR_(x) #x
#define FG_SQL_STR(x) FG_SQL_STR_(x)

/* The artifact figures the artifact_stats triggers keep. */
struct fg_sql_stats {
	int64_t artifacts;
	int64_t unhealthy;
	int64_t probe[FG_SQL_PROBE_BUCKETS];
};

/*
 * Read artifact_stats: the totals into *out, and {code: n} / {family: n}
 * into by_verdict / by_family when they are non-NULL (counts of zero are
 * left out, as a GROUP BY would).  Call inside a read transaction when
 * other queries must agree with these figures.
 */
int fg_sql_read_stats(struct fg_store *s, struct fg_sql_stats *out, cJSON *by_verdict, cJSON *by_family,
		     struct fg_err *err);

/*
 * Add the fleet health sections "verdict_matrix" and "probe_after_load"
 * (fleet_dist.c) to doc; call inside fleet health's read transaction.
 */
int fg_sql_fleet_distributions(struct fg_store *s, cJSON *doc, struct fg_err *err);

#endif
