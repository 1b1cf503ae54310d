# Shared helpers for the Hearth test network scripts. Sourced, not run.
#
# Everything here stays off the machine's real network: avahi-daemon only ever runs inside
# network namespaces these scripts create, on interfaces that exist only there, and talks
# to a private D-Bus (never the host's system bus, which may already have an Avahi).

HEARTH_NETNS="${HEARTH_NETNS:-hearth}"
HEARTH_TESTNET_DIR="${HEARTH_TESTNET_DIR:-/run/hearth-testnet}"
HEARTH_BUS_SOCKET="$HEARTH_TESTNET_DIR/system_bus_socket"
HEARTH_BUS_ADDRESS="unix:path=$HEARTH_BUS_SOCKET"

die() { echo "testnet: $*" >&2; exit 1; }
say() { echo "testnet: $*" >&2; }

# netns_exists NAME (exact name; `ip netns list` may append " (id: N)").
netns_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }

need_root() {
    [ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces and avahi-daemon need it); try: sudo $0"
}

# Installs the Debian packages the test network needs, if any is missing. Services that a
# package would start on install are blocked: a system avahi-daemon on the real interfaces
# is exactly what must not happen.
ensure_packages() {
    local missing="" pkg
    for pkg in libavahi-client-dev avahi-daemon avahi-utils dbus iproute2; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
    done
    [ -z "$missing" ] && return 0
    command -v apt-get >/dev/null || die "missing packages:$missing (and no apt-get to install them)"
    say "installing:$missing"
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
    fi
    local rc=0
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing; } >&2 || rc=$?
    [ "$made_policy" -eq 1 ] && rm -f "$policy"
    [ "$rc" -eq 0 ] || die "apt-get install$missing failed"
}

# write_avahi_conf FILE HOSTNAME INTERFACES
write_avahi_conf() {
    cat >"$1" <<CONF
# Hearth test network: one namespace, no traffic anywhere else.
[server]
host-name=$2
use-ipv4=yes
use-ipv6=no
allow-interfaces=$3
enable-dbus=yes
disallow-other-stacks=no
ratelimit-interval-usec=1000000
ratelimit-burst=1000
[wide-area]
enable-wide-area=no
[publish]
publish-workstation=no
publish-hinfo=no
publish-domain=no
publish-addresses=yes
[reflector]
enable-reflector=no
CONF
}

# write_dbus_conf FILE SOCKET PIDFILE: a private bus that plays the system bus for Avahi.
# It only listens on a socket under our run directory, so the policy can be open.
write_dbus_conf() {
    cat >"$1" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$2</listen>
  <pidfile>$3</pidfile>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
CONF
}

# alive PIDFILE COMM: the pid in PIDFILE runs a program named COMM (guards against reused pids).
alive() {
    local pid
    [ -s "$1" ] || return 1
    pid="$(cat "$1")"
    [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$2" ]
}

# stop_pidfile PIDFILE COMM: TERM, wait up to 5 s, then KILL; only if it is still ours.
stop_pidfile() {
    local pid i
    alive "$1" "$2" || { rm -f "$1"; return 0; }
    pid="$(cat "$1")"
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 50); do alive "$1" "$2" || break; sleep 0.1; done
    alive "$1" "$2" && kill -KILL "$pid" 2>/dev/null || true
    rm -f "$1"
}

# wait_avahi BUSADDRESS [SECONDS]: until Avahi answers on the bus and its server runs.
wait_avahi() {
    local i
    for i in $(seq $((${2:-10} * 10))); do
        if DBUS_SYSTEM_BUS_ADDRESS="$1" dbus-send --system --print-reply --reply-timeout=500 \
            --dest=org.freedesktop.Avahi / org.freedesktop.Avahi.Server.GetState 2>/dev/null | grep -q "int32 2"; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

# start_namespace_avahi: avahi-daemon in $HEARTH_NETNS, in the foreground of a background
# job so we know its pid. `ip netns exec` gives it a mount namespace of its own, where a
# tmpfs over /run/avahi-daemon keeps its pid file and socket away from any host Avahi.
start_namespace_avahi() {
    local dir="$HEARTH_TESTNET_DIR"
    DBUS_SYSTEM_BUS_ADDRESS="$HEARTH_BUS_ADDRESS" setsid ip netns exec "$HEARTH_NETNS" sh -c '
        mkdir -p /run/avahi-daemon && mount -t tmpfs -o size=1m,mode=0755 hearth-avahi /run/avahi-daemon &&
        exec avahi-daemon -f "$1" --no-chroot --no-drop-root --no-rlimits' sh "$dir/avahi-daemon.conf" \
        </dev/null >>"$dir/avahi-daemon.log" 2>&1 &
    echo $! >"$dir/avahi.pid"
    wait_avahi "$HEARTH_BUS_ADDRESS" 10 || {
        tail -n 20 "$dir/avahi-daemon.log" >&2
        die "avahi-daemon did not come up in namespace $HEARTH_NETNS (log: $dir/avahi-daemon.log)"
    }
    alive "$dir/avahi.pid" avahi-daemon || die "avahi-daemon pid bookkeeping failed"
}
