#!/usr/bin/env bash
# test_farm_pg.sh: test_farm.sh with three instances on one PostgreSQL
# database.  Skipped, saying why, when FORGED_TEST_PG is not set.
FORGED_E2E_STORE=postgres
. "$(dirname "$0")/test_farm.sh"
