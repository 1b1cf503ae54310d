#!/usr/bin/env bash
# Runs a command inside the test network, e.g. `scripts/testnet/run.sh swift test --skip-build`,
# as the unprivileged test user (scripts/user.sh; HEARTH_TEST_AS_ROOT=1 keeps root): entering
# the namespace needs root, the command does not.
# HEARTH_TESTNET=1 enables the tests that need Avahi; DBUS_SYSTEM_BUS_ADDRESS points Avahi
# clients (ours and avahi-browse/avahi-publish) at the test network's private bus.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../user.sh"

need_root
[ $# -gt 0 ] || die "usage: $0 COMMAND [ARG…]"
netns_exists "$HEARTH_NETNS" || die "namespace $HEARTH_NETNS not found; run scripts/testnet/up.sh first"
alive "$HEARTH_TESTNET_DIR/avahi.pid" avahi-daemon || die "avahi-daemon is not running; run scripts/testnet/up.sh"
export HEARTH_TESTNET=1 DBUS_SYSTEM_BUS_ADDRESS="$HEARTH_BUS_ADDRESS" HEARTH_TESTNET_SCRIPTS="$(cd "$(dirname "$0")" && pwd)"
hearth_user_init || die "cannot run as the test user"
exec ip netns exec "$HEARTH_NETNS" "${HEARTH_AS_USER[@]}" "$@"
