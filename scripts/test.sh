#!/usr/bin/env bash
# The test command (README.md, .ci/run): installs what the tests need, builds, starts the
# test network (a private network namespace with its own dbus and avahi-daemon), runs every
# test inside it, and stops the network again, whatever happens; then runs the in-process
# tests again under ThreadSanitizer (scripts/tsan.sh) and each fuzz target briefly (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

swift build --build-tests

# At most this many tests at once. Swift Testing otherwise starts all 271 together, and on a
# 2-core machine the cooperative pool has two threads: a few CPU-bound or blocking tests then
# starve the sync sessions of the others (which run on that pool), whose 5-10 s liveness
# bounds fail — 28 to 68 failures in a run, and faster overall with a bound (96 s against
# 134-175 s here). Raise it on a bigger machine.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${HEARTH_TEST_PARALLELISM:-6}"

if [ "$(id -u)" -eq 0 ] && scripts/testnet/up.sh; then
  trap 'scripts/testnet/down.sh' EXIT
  scripts/testnet/run.sh swift test --skip-build "$@"
  scripts/testnet/down.sh
  trap - EXIT
else
  echo "test: no test network (needs root and iproute2); the Avahi tests are skipped" >&2
  swift test --skip-build "$@"
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
