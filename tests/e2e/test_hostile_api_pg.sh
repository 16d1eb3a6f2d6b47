#!/usr/bin/env bash
# test_hostile_api_pg.sh: test_hostile_api.sh again with every server on a PostgreSQL
# store (lib.sh's start_server adds --store: a database per state folder on
# FORGED_TEST_PG's cluster).  Skipped, saying why, when FORGED_TEST_PG is not set.
FORGED_E2E_STORE=postgres
. "$(dirname "$0")/test_hostile_api.sh"
