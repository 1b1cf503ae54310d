#!/usr/bin/env bash
# The test command (README.md, .ci/run): installs what the tests need, builds, starts the
# test network (a private network namespace with its own dbus and avahi-daemon), runs every
# test inside it, and stops the network again, whatever happens; then runs the in-process
# tests again under ThreadSanitizer (scripts/tsan.sh) and each fuzz target briefly (scripts/fuzz.sh).
#
# Run as root (CI), the tests run as the unprivileged user hearth-test (scripts/user.sh): root
# only installs, builds, and makes the test network. HEARTH_TEST_AS_ROOT=1 runs them as root.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
. scripts/user.sh
hearth_user_init

# Package.swift, the imports and docs/architecture.md agree (issue 15); seconds, so first.
python3 scripts/check-imports.py

# Built by whoever runs this (root on CI), then .build is handed to the test user: `swift test`
# takes a lock and writes there, and tests read the built products. Building as root keeps the
# checkout (sources, Package.resolved) root's and read-only to the user, who gets only .build;
# it is handed over again on every run, as a root build or root test leaves root's files in it.
swift build --build-tests
hearth_user_owns_build .build
if ! "${HEARTH_AS_USER[@]}" test -r Package.swift; then
  echo "test: $HEARTH_RUNNER cannot read this checkout ($PWD): every folder above it must be searchable by others (chmod o+x; .ci/run does it)" >&2
  exit 1
fi
echo "test: running the suite as $HEARTH_RUNNER" >&2

# The tests whose harness needs root: network namespaces per virtual host (their Hearth
# processes still run as the user, see scripts/testnet/multihost.sh), restarting the test
# network's avahi-daemon, and running a process as another user. As the user they are skipped;
# a full run then runs them as root (HEARTH_TEST_AS_ROOT=1, root intended).
root_tests='MultiHostTests|DaemonRestartTests|MultiHostDaemonTests|PairingCommandTests|DeviceRemovalCommandTests|LocalAttachTests/otherUser|DaemonTests/anotherUserIsRefused'
# ColorSyncTests drive the example app in tmux, which needs a pseudo-terminal. Some
# containers let only root open one (devpts mounted with ptmxmode=000 and /dev/ptmx a link to
# it): there the user's run skips the test (it checks for itself) and the root run takes it.
if [ ${#HEARTH_AS_USER[@]} -gt 0 ] && ! "${HEARTH_AS_USER[@]}" script -qec true /dev/null >/dev/null 2>&1; then
  echo "test: $HEARTH_RUNNER cannot open a pseudo-terminal (ls -l /dev/ptmx: $(ls -lL /dev/ptmx 2>&1 | cut -d' ' -f1)); ColorSyncTests run as root with the tests below" >&2
  root_tests="$root_tests|ColorSyncTests"
fi

# At most 6 tests at once (scripts/setup.sh; HEARTH_TEST_PARALLELISM sets it).

# The output also goes to a log; on failure its failed tests are printed again at the end.
log=$(mktemp /tmp/hearth-test.XXXXXX.log)
if [ "$(id -u)" -eq 0 ] && scripts/testnet/up.sh; then
  trap 'scripts/testnet/down.sh' EXIT
  status=0
  # run.sh drops to the test user inside the namespace.
  scripts/testnet/run.sh swift test --skip-build "$@" 2>&1 | tee "$log" || status=$?
  if [ ${#HEARTH_AS_USER[@]} -gt 0 ]; then
    if [ $# -eq 0 ]; then
      echo "test: running the tests whose harness needs root as root (HEARTH_TEST_AS_ROOT=1): $root_tests" >&2
      HEARTH_TEST_AS_ROOT=1 scripts/testnet/run.sh swift test --skip-build --filter "$root_tests" 2>&1 | tee -a "$log" || status=$?
    else
      echo "test: with a filter, the tests whose harness needs root ($root_tests) are skipped; HEARTH_TEST_AS_ROOT=1 $0 $* runs them as root" >&2
    fi
  fi
  scripts/testnet/down.sh
  trap - EXIT
else
  echo "test: no test network (needs root and iproute2); the Avahi tests are skipped" >&2
  status=0
  "${HEARTH_AS_USER[@]}" swift test --skip-build "$@" 2>&1 | tee "$log" || status=$?
fi
if [ "$status" != 0 ]; then
  scripts/failures.sh "$log"
  exit "$status"
fi

# The household simulator's CI budget (issue 28, docs/simulator.md "The CI budget"): a fixed
# set of seeds, on the debug build made above, as the test user, within 4 minutes on 2 cores; it
# ends with the summary line, and a violation fails the run (HEARTH_SKIP_SIM=1 leaves it out).
if [ "${HEARTH_SKIP_SIM:-0}" != 1 ] && [ $# -eq 0 ]; then
  echo "test: scripts/sim.sh --ci (the simulator's CI budget: $(scripts/sim.sh --print-ci-budget | sed 's/ / seeds, /'))" >&2
  if ! "${HEARTH_AS_USER[@]}" env HEARTH_SIM_DEBUG=1 HEARTH_SIM_BUILT=1 scripts/sim.sh --ci; then
    echo "test: the simulator found a violation (above: the seed, the invariant, the command that replays it)" >&2
    exit 1
  fi
fi

# Another local user gets nothing from a user's commands (issue 26, docs/security.md "Other
# users of the same machine"): only root can make the two users this needs, so it is a script
# run here, not a test of the suite.
if [ "$(id -u)" -eq 0 ] && [ $# -eq 0 ]; then
  echo "test: scripts/local-users.sh (two throwaway users: a squatter and its victim)" >&2
  scripts/local-users.sh .build/debug/hearth
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
