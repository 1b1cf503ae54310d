#!/usr/bin/env bash
# ThreadSanitizer over the tests that run inside the test process: the store, the sync engine
# on loopback, identity, transport, discovery's logic. (The command-line, peer-process and leak
# tests start other programs, and the Avahi tests need the test network: scripts/test.sh runs
# them all without the sanitizer.) A reported race fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

swift build --build-tests --sanitize=thread --scratch-path .build-tsan
swift test --skip-build --sanitize=thread --scratch-path .build-tsan \
  --skip "HearthCommandTests|ProcessTests|LeakTests|CompromisedDeviceTests" "$@"
