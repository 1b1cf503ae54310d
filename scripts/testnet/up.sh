#!/usr/bin/env bash
# Starts the Hearth test network: the `hearth` network namespace (loopback only, multicast
# on), a private D-Bus, and avahi-daemon inside the namespace. Idempotent.
# Use scripts/testnet/run.sh to run commands in it and scripts/testnet/down.sh to stop it.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

need_root
ensure_packages
command -v ip >/dev/null || die "ip (iproute2) not found"

mkdir -p "$HEARTH_TESTNET_DIR"
dir="$HEARTH_TESTNET_DIR"

if ! netns_exists "$HEARTH_NETNS"; then
    ip netns add "$HEARTH_NETNS" || die "cannot create network namespace $HEARTH_NETNS (is this a container without CAP_SYS_ADMIN?)"
    touch "$dir/netns.created"
fi
ip -n "$HEARTH_NETNS" link set lo up
# mDNS needs a multicast-capable interface; the namespace's loopback is the only one.
ip -n "$HEARTH_NETNS" link set lo multicast on

if ! alive "$dir/dbus.pid" dbus-daemon; then
    write_dbus_conf "$dir/dbus.conf" "$HEARTH_BUS_SOCKET" "$dir/dbus.pid"
    rm -f "$HEARTH_BUS_SOCKET" "$dir/dbus.pid"
    ip netns exec "$HEARTH_NETNS" dbus-daemon --config-file="$dir/dbus.conf" --fork \
        || die "cannot start the private dbus-daemon"
fi

if ! alive "$dir/avahi.pid" avahi-daemon; then
    write_avahi_conf "$dir/avahi-daemon.conf" hearth-testnet lo
    start_namespace_avahi
fi

say "up: namespace $HEARTH_NETNS, avahi-daemon pid $(cat "$dir/avahi.pid"), bus $HEARTH_BUS_ADDRESS"
