#!/usr/bin/python3
"""seed_pg.py FORGED SQLITE_DB URL: the catalog seed.py made (a SQLite
database) copied into the empty PostgreSQL database URL, for
bench/api/run.sh STORE=postgres.

`forged serve --store URL --workers 0` is started once and stopped, so the
schema is the one forged's own migrations make (store/pg/db.c).  Then the
tables keyed by artifact (artifacts, artifact_docs, verdicts, fingerprints,
verifications, artifact_probes) and fleet_reports are copied with psql's
\\copy, over the columns both schemas have (PostgreSQL's generated columns
left out; SQLite's artifact_runtime goes into artifact_docs.mtplx_runtime),
in one session with the triggers off (session_replication_role replica: the
copy needs a superuser, as the throwaway cluster's is): the counters'
triggers update one hot row per insert, which in one transaction of 100,000
inserts took over 20 minutes.  Jobs are not copied (the artifacts'
job_id is left NULL).  Then artifact_stats and verdict_stats are computed
from the rows with the GROUP BYs they stand for (tests/unit/test_store.c
checks the triggers against the same), the identity sequences are moved past
the copied ids, and ANALYZE.  Prints a JSON summary, and exits 1 when
the row counts or the counters disagree with the SQLite database.
"""
import csv
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

TABLES = ["artifacts", "artifact_docs", "verdicts", "fingerprints", "verifications", "artifact_probes",
          "fleet_reports"]
IDENTITY = ["artifacts", "verdicts", "verifications"]
NULL = "\\N"


def psql(url, sql):
    out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", url, "-c", sql],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def migrate(forged, url, tmp):
    """forged serve on the empty database until it listens: its migrations make the schema."""
    state = os.path.join(tmp, "migrate-state")
    os.makedirs(state)
    log = open(os.path.join(tmp, "migrate.log"), "w+")
    proc = subprocess.Popen([forged, "serve", "--listen", "127.0.0.1:0", "--state-dir", state, "--store", url,
                             "--workers", "0", "--allow-roots", tmp], stdout=log, stderr=log)
    try:
        for _ in range(600):
            log.seek(0)
            if re.search(r"listening on \S+ port \d+,", log.read()):
                return
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        log.seek(0)
        sys.exit("seed_pg: forged serve did not start: " + log.read()[-500:])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def pg_columns(url, table):
    text = psql(url, "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
                     " AND table_name = '%s' AND is_generated = 'NEVER' ORDER BY ordinal_position" % table)
    return [c for c in text.split("\n") if c]


STATS = [
    "DELETE FROM artifact_stats",
    "INSERT INTO artifact_stats (dim, key, n)"
    " SELECT 'total', '', count(*) FROM artifacts"
    " UNION ALL SELECT 'unhealthy', '', count(*) FROM artifacts WHERE unhealthy"
    " UNION ALL SELECT 'family', family, count(*) FROM artifacts GROUP BY family"
    " UNION ALL SELECT 'verdict', code, count(*) FROM verdicts GROUP BY code"
    " UNION ALL SELECT 'probe', probe_bucket, count(*) FROM artifacts WHERE probe_bucket IS NOT NULL"
    " GROUP BY probe_bucket",
    "DELETE FROM verdict_stats",
    "INSERT INTO verdict_stats (family, code, severity, n)"
    " SELECT a.family, v.code, v.severity, count(*) FROM verdicts v JOIN artifacts a ON a.id = v.artifact_id"
    " GROUP BY 1, 2, 3",
]


def write_table(db, url, table, tmp):
    """The CSV of table's rows over the columns both schemas have; (\\copy command, row count)."""
    have = set(pg_columns(url, table))
    cols = [r[1] for r in db.execute("PRAGMA table_xinfo(%s)" % table) if r[6] == 0 and r[1] in have]
    select = "SELECT %s FROM %s" % (", ".join(cols), table)
    # SQLite keeps the runtime document in its own table since its schema version 8; PostgreSQL in artifact_docs.
    if table == "artifact_docs" and "mtplx_runtime" in have and "mtplx_runtime" not in cols:
        select = ("SELECT %s, r.doc FROM artifact_docs d LEFT JOIN artifact_runtime r ON r.artifact_id = d.artifact_id"
                  % ", ".join("d." + c for c in cols))
        cols = cols + ["mtplx_runtime"]
    path = os.path.join(tmp, table + ".csv")
    n = 0
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        for row in db.execute(select):
            out = []
            for c, v in zip(cols, row):
                if table == "artifacts" and c == "job_id":
                    v = None
                out.append(NULL if v is None else v)
            w.writerow(out)
            n += 1
    return "\\copy %s (%s) FROM '%s' WITH (FORMAT csv, NULL '%s')" % (table, ", ".join(cols), path, NULL), n


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n")[0])
    forged, sqlite_db, url = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3]
    db = sqlite3.connect("file:%s?mode=ro" % sqlite_db, uri=True)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)  # psql's \copy reads the files as this user; the server never does
        migrate(forged, url, tmp)
        script, counts = ["SET session_replication_role = replica;"], {}
        for t in TABLES:
            cmd, counts[t] = write_table(db, url, t, tmp)
            script.append(cmd)
        script.append("SET session_replication_role = origin;")
        script += [q + ";" for q in STATS]
        with open(os.path.join(tmp, "load.sql"), "w") as f:
            f.write("\n".join(script) + "\n")
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-1", url, "-f", os.path.join(tmp, "load.sql")],
                       check=True)
    for t in IDENTITY:
        psql(url, "SELECT setval(pg_get_serial_sequence('%s', 'id'), (SELECT max(id) FROM %s))" % (t, t))
    psql(url, "ANALYZE")
    summary = {"tables": counts, "copy_s": round(time.time() - t0, 1)}
    summary["artifacts"] = int(psql(url, "SELECT count(*) FROM artifacts"))
    summary["unhealthy"] = int(psql(url, "SELECT count(*) FROM artifacts WHERE unhealthy"))
    summary["stats_agree"] = psql(url, "SELECT (SELECT count(*) FROM artifacts) = (SELECT n FROM artifact_stats"
                                       " WHERE dim = 'total') AND (SELECT count(*) FROM artifacts WHERE unhealthy)"
                                       " = coalesce((SELECT n FROM artifact_stats WHERE dim = 'unhealthy'), 0)") == "t"
    want = db.execute("SELECT count(*) FROM artifacts").fetchone()[0]
    print(json.dumps(summary))
    if summary["artifacts"] != want or not summary["stats_agree"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
