#!/usr/bin/env bash
# The dashboard in a real browser: tests/browser/ui.test.mjs drives Debian's
# Chromium headless (playwright-core, no browser download) against a real
# `forged serve` seeded with the fixtures, and saves a screenshot of each
# page in ui-shots/ beside the binary (build/ui-shots for `make test`).
# Skipped, saying why, when Chromium, node or tests/browser/node_modules is
# missing (`make deps` installs them); under CI (CI set) a missing piece
# fails instead, so a green CI always ran the browser.
set -u
. "$(dirname "$0")/lib.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
FIXTURES=$(cd "$FIXTURES" && pwd)
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

missing=""
[ -x "$CHROMIUM" ] || missing="no Chromium at $CHROMIUM (Debian's chromium)"
command -v node >/dev/null 2>&1 || missing="${missing:+$missing; }no node"
[ -d "$REPO/tests/browser/node_modules/playwright-core" ] || missing="${missing:+$missing; }no tests/browser/node_modules (npm ci)"
if [ -n "$missing" ]; then
	if [ -n "${CI:-}" ]; then
		bad "the browser tests cannot run in CI: $missing; make deps installs them"
	else
		echo "test_browser: skipped: $missing; make deps installs them"
	fi
	finish
	exit
fi
SHOTS=$(cd "$(dirname "$FORGED")" && pwd)/ui-shots
FORGED=$FORGED FIXTURES=$FIXTURES SHOTS=$SHOTS CHROMIUM=$CHROMIUM timeout 300 node "$REPO/tests/browser/ui.test.mjs"
