#!/usr/bin/env bash
# ThreadSanitizer over the tests that run inside the test process: the store, the sync engine
# on loopback, identity, transport, discovery's logic. (The command-line, peer-process and leak
# tests start other programs, and the Avahi tests need the test network: scripts/test.sh runs
# them all without the sanitizer. The attacks against a live victim process measure its CPU and
# memory, which the sanitizer multiplies: a victim built with it idles at 0.5 s of CPU per 10 s
# and peaks above 100 MB under a ping flood, so those bounds mean nothing here.) A reported race fails the run.
# Run as root, it builds as root and runs the tests as the test user (scripts/user.sh, as
# scripts/test.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
. scripts/user.sh
hearth_user_init

swift build --build-tests --sanitize=thread --scratch-path .build-tsan
hearth_user_owns_build .build-tsan
echo "tsan: running the tests as $HEARTH_RUNNER" >&2
# Instrumented code runs several times slower: with as many tests at once as the plain run,
# a test's liveness timeouts (10 s to connect, to converge) measured the whole suite's CPU
# demand on a slower CI machine, not the test's own. Fewer at once; the same coverage.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${HEARTH_TSAN_PARALLELISM:-3}"
log=$(mktemp /tmp/hearth-tsan.XXXXXX.log)
status=0
"${HEARTH_AS_USER[@]}" swift test --skip-build --sanitize=thread --scratch-path .build-tsan \
  --skip "HearthCommandTests|ProcessTests|LeakTests|CompromisedDeviceTests|PeerFloodLiveTests|ClockLeadCommandTests" "$@" 2>&1 | tee "$log" || status=$?
if [ "$status" != 0 ]; then
  scripts/failures.sh "$log"
  exit "$status"
fi
