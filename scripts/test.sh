#!/usr/bin/env bash
# The test command (README.md, .ci/run): installs what the tests need, builds, starts the
# test network (a private network namespace with its own dbus and avahi-daemon), runs every
# test inside it, and stops the network again, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

swift build --build-tests

# The transport tests count the process's open descriptors and TLS objects and time their
# backpressure: they run in a process of their own, after the rest, with nothing beside them.
run() {
  if [ $# -eq 0 ]; then
    "${runner[@]}" swift test --skip-build --skip HearthTransportTests
    "${runner[@]}" swift test --skip-build --filter HearthTransportTests
  else
    "${runner[@]}" swift test --skip-build "$@"
  fi
}

if [ "$(id -u)" -eq 0 ] && scripts/testnet/up.sh; then
  trap 'scripts/testnet/down.sh' EXIT
  runner=(scripts/testnet/run.sh)
else
  echo "test: no test network (needs root and iproute2); the Avahi tests are skipped" >&2
  runner=(env)
fi
run "$@"
