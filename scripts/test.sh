#!/usr/bin/env bash
# The test command (README.md, .ci/run): installs what the tests need, builds, starts the
# test network (a private network namespace with its own dbus and avahi-daemon), runs every
# test inside it, and stops the network again, whatever happens; then runs the in-process
# tests again under ThreadSanitizer (scripts/tsan.sh) and each fuzz target briefly (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

# Package.swift, the imports and docs/architecture.md agree (issue 15); seconds, so first.
python3 scripts/check-imports.py

swift build --build-tests

# At most 6 tests at once (scripts/setup.sh; HEARTH_TEST_PARALLELISM sets it).

# The output also goes to a log; on failure its failed tests are printed again at the end.
log=$(mktemp /tmp/hearth-test.XXXXXX.log)
if [ "$(id -u)" -eq 0 ] && scripts/testnet/up.sh; then
  trap 'scripts/testnet/down.sh' EXIT
  status=0
  scripts/testnet/run.sh swift test --skip-build "$@" 2>&1 | tee "$log" || status=$?
  scripts/testnet/down.sh
  trap - EXIT
else
  echo "test: no test network (needs root and iproute2); the Avahi tests are skipped" >&2
  status=0
  swift test --skip-build "$@" 2>&1 | tee "$log" || status=$?
fi
if [ "$status" != 0 ]; then
  scripts/failures.sh "$log"
  exit "$status"
fi

# The products' DocC catalogs: built with warnings as errors, every public symbol documented
# (scripts/docs.sh); HEARTH_SKIP_DOCS=1 leaves it out of a quick local run.
if [ "${HEARTH_SKIP_DOCS:-0}" != 1 ] && [ $# -eq 0 ]; then
  scripts/docs.sh
fi

# Then the same code under ThreadSanitizer (docs/architecture.md, "Checking with
# ThreadSanitizer"); HEARTH_SKIP_TSAN=1 leaves it out of a quick local run.
if [ "${HEARTH_SKIP_TSAN:-0}" != 1 ] && [ $# -eq 0 ]; then
  scripts/tsan.sh
fi

# Then each fuzz target for a short while (scripts/fuzz.sh, docs/security.md "Fuzzing"):
# HEARTH_FUZZ_SECONDS per target, 30 by default (6 targets: 3 minutes plus the ASan build);
# 0 leaves it out.
fuzz_seconds=${HEARTH_FUZZ_SECONDS:-30}
if [ "$fuzz_seconds" != 0 ] && [ $# -eq 0 ]; then
  scripts/fuzz.sh --seconds "$fuzz_seconds"
fi
