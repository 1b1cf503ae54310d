#!/usr/bin/env bash
# Installs what Hearth needs on a fresh Debian machine (sourced by demo.sh and test.sh).
# Debian packages via apt-get when missing; Swift is expected at /opt/swift (or on PATH).
set -euo pipefail

HEARTH_DEBIAN_PACKAGES=(libssl-dev openssl libavahi-client-dev avahi-daemon avahi-utils dbus iproute2 python3 tmux inotify-tools)

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH=/opt/swift/usr/bin:$PATH
fi
command -v swift >/dev/null 2>&1 || { echo "setup: Swift 6 is required (expected at /opt/swift/usr/bin)" >&2; exit 1; }

missing=()
for package in "${HEARTH_DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  # policy-rc.d keeps the packages from starting a system-wide avahi-daemon on the real network.
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Swift Testing starts every test at once by default: some 200 tests, many of them clusters of
# devices doing TLS handshakes, compete for two cores, and on a busy machine (a compile beside
# the suite) a test's own timeouts then measure the whole suite's CPU demand, not its own. At
# most this many tests run at once (the same wall time on a quiet machine; see docs/architecture.md,
# "Testing on a busy machine").
# 6, not 8, since the suite grew to 271 tests (CI failed 3 of them at 8; HEARTH_TEST_PARALLELISM
# sets it).
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${HEARTH_TEST_PARALLELISM:-${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-6}}"
