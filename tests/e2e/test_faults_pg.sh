#!/usr/bin/env bash
# test_faults_pg.sh: test_faults.sh on a PostgreSQL store.  Skipped, saying
# why, when FORGED_TEST_PG is not set.
FORGED_E2E_STORE=postgres
. "$(dirname "$0")/test_faults.sh"
