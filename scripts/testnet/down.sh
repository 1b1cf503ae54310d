#!/usr/bin/env bash
# Stops what scripts/testnet/up.sh started (by its recorded pids) and deletes the namespace.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

need_root
dir="$HEARTH_TESTNET_DIR"
stop_pidfile "$dir/avahi.pid" avahi-daemon
stop_pidfile "$dir/dbus.pid" dbus-daemon
if netns_exists "$HEARTH_NETNS"; then
    # Only a namespace up.sh made; anything still running in it is a leftover of a test.
    if [ -e "$dir/netns.created" ]; then
        for pid in $(ip netns pids "$HEARTH_NETNS" 2>/dev/null); do
            say "stopping leftover process $pid ($(cat /proc/$pid/comm 2>/dev/null))"
            kill -TERM "$pid" 2>/dev/null || true
        done
        ip netns del "$HEARTH_NETNS" || say "could not delete namespace $HEARTH_NETNS"
    fi
fi
rm -rf "$dir"
say "down"
