#!/usr/bin/env bash
# Kills the test network's avahi-daemon and starts a new one (for the daemon-restart test).
# Usage: avahi-restart.sh [SECONDS_DOWN]   (default 0.5: how long no daemon runs)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need_root
dir="$HEARTH_TESTNET_DIR"
[ -e "$dir/avahi-daemon.conf" ] || die "test network is not up; run scripts/testnet/up.sh"
stop_pidfile "$dir/avahi.pid" avahi-daemon
sleep "${1:-0.5}"
start_namespace_avahi
say "avahi-daemon restarted, pid $(cat "$dir/avahi.pid")"
