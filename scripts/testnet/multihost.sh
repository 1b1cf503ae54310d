#!/usr/bin/env bash
# Three (or -n N) virtual hosts on one virtual Ethernet, each with its own /run, D-Bus and
# avahi-daemon, so mDNS crosses real (virtual) links. Runs a command on every host at once,
# or a built-in check with avahi-publish/avahi-browse; then tears everything down.
#
#   scripts/testnet/multihost.sh                 # built-in check
#   scripts/testnet/multihost.sh -- CMD [ARG…]   # CMD on each host, in parallel
#   options: -n HOSTS (default 3), -4 (IPv4 only; default also IPv6 link-local),
#            -l LINKS (default 1: each host has eth0..eth<LINKS-1>, one bridge per link)
#
# In CMD's environment: HEARTH_HOST (h1…), HEARTH_HOST_INDEX (1…), HEARTH_HOSTS (count),
# HEARTH_HOST_ADDRESS (its eth0 address, 169.254.77.N; ethK has 169.254.(77+K).N),
# HEARTH_SHARED (a folder every host's CMD can write, e.g. to wait for the others).
# Exit status: 0 if CMD succeeded on every host.
#
# CMD runs as the unprivileged test user (scripts/user.sh), even with HEARTH_TEST_AS_ROOT=1:
# only building the hosts needs root. Its runtime folder, /run/hearth-user on each host's own
# /run, is made the user's (0700) by the host's keeper.
#
# Layout: namespace <tag>br holds bridges br0…; namespace <tag>hN holds eth0… (veths whose
# other ends are on br0…) and the host's daemons. Nothing lives in the root namespace, and the
# root namespace's interfaces are never touched.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../user.sh"

hosts=3
links=1
ipv6=yes
while [ $# -gt 0 ]; do
    case "$1" in
        -n) hosts="$2"; shift 2 ;;
        -4) ipv6=no; shift ;;
        -l) links="$2"; shift 2 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) die "unknown option $1 (commands go after --)" ;;
    esac
done
[ "$hosts" -ge 2 ] && [ "$hosts" -le 50 ] || die "-n must be 2…50"
[ "$links" -ge 1 ] && [ "$links" -le 4 ] || die "-l must be 1…4"

need_root
ensure_packages
hearth_user_init always || die "cannot run the hosts' commands as the test user"
owner="$(id -u "$HEARTH_TEST_USER"):$(id -g "$HEARTH_TEST_USER")"
command -v unshare >/dev/null && command -v nsenter >/dev/null || die "unshare/nsenter (util-linux) missing"
# Each host has its own bus at the default path inside its own /run; an inherited address
# (from run.sh) would point the hosts at the single-namespace test network instead.
unset DBUS_SYSTEM_BUS_ADDRESS

tag="hmh$$"
bridge="${tag}br"
work="$(mktemp -d /tmp/hearth-multihost.XXXXXX)"
shared="$(mktemp -d /tmp/hearth-multihost-shared.XXXXXX)"
chown "$owner" "$shared"
made_netns=()

cleanup() {
    local rc=$? i
    touch "$work/stop"
    for i in $(seq "$hosts"); do
        # The keeper stops its own daemons when it sees the stop file.
        for _ in $(seq 50); do alive "$work/h$i/keeper.pid" sh || break; sleep 0.1; done
        if alive "$work/h$i/keeper.pid" sh; then kill -KILL "$(cat "$work/h$i/keeper.pid")" 2>/dev/null || true; fi
    done
    for ns in "${made_netns[@]}"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "$work" "$shared"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$bridge" || die "cannot create network namespaces (need root with CAP_SYS_ADMIN)"
made_netns+=("$bridge")
ip -n "$bridge" link set lo up
for k in $(seq 0 $((links - 1))); do
    ip -n "$bridge" link add "br$k" type bridge
    # No IGMP snooping: every mDNS packet reaches every host, as on a small home switch.
    ip -n "$bridge" link set "br$k" type bridge mcast_snooping 0
    ip -n "$bridge" link set "br$k" up
done

for i in $(seq "$hosts"); do
    ns="${tag}h$i"
    ip netns add "$ns"
    made_netns+=("$ns")
    ip -n "$ns" link set lo up
    if [ "$ipv6" = yes ]; then
        # Skip duplicate address detection so link-local IPv6 is usable at once.
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
    else
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    fi
    interfaces=""
    for k in $(seq 0 $((links - 1))); do
        ip -n "$bridge" link add "veth$i-$k" type veth peer name "eth$k" netns "$ns"
        ip -n "$bridge" link set "veth$i-$k" master "br$k" up
        # /24 per link, so each link is its own subnet and routes stay unambiguous.
        ip -n "$ns" addr add "169.254.$((77 + k)).$i/24" dev "eth$k"
        ip -n "$ns" link set "eth$k" multicast on up
        interfaces="${interfaces:+$interfaces,}eth$k"
    done

    mkdir -p "$work/h$i"
    write_avahi_conf "$work/h$i/avahi-daemon.conf" "hearth-h$i" "$interfaces"
    sed -i "s/^use-ipv6=no/use-ipv6=$ipv6/" "$work/h$i/avahi-daemon.conf"
    # The keeper: a shell in the host's network namespace and a mount namespace of its own,
    # where a tmpfs on /run gives it a private D-Bus and avahi-daemon. Commands join it
    # with nsenter. It stops both daemons when $work/stop appears.
    setsid ip netns exec "$ns" unshare -m --propagation private sh -c '
        set -e
        mount -t tmpfs -o mode=0755,size=4m hearth-run /run
        mkdir -p /run/dbus /run/avahi-daemon
        mkdir -m 0700 /run/hearth-user && chown "$3" /run/hearth-user
        dbus-daemon --system --fork
        avahi-daemon -f "$1/avahi-daemon.conf" --no-chroot --no-drop-root --no-rlimits --daemonize
        touch "$1/ready"
        while [ ! -e "$2/stop" ]; do sleep 0.2; done
        avahi-daemon -k || true
        kill "$(cat /run/dbus/pid)" 2>/dev/null || true
    ' sh "$work/h$i" "$work" "$owner" </dev/null >"$work/h$i/keeper.log" 2>&1 &
    echo $! >"$work/h$i/keeper.pid"
done

# Wait until every host's Avahi runs.
for i in $(seq "$hosts"); do
    for _ in $(seq 100); do [ -e "$work/h$i/ready" ] && break; sleep 0.1; done
    [ -e "$work/h$i/ready" ] || { cat "$work/h$i/keeper.log" >&2; die "host h$i did not start"; }
    kpid="$(cat "$work/h$i/keeper.pid")"
    ok=no
    for _ in $(seq 100); do
        if nsenter -t "$kpid" -m -n dbus-send --system --print-reply --reply-timeout=500 \
            --dest=org.freedesktop.Avahi / org.freedesktop.Avahi.Server.GetState 2>/dev/null | grep -q "int32 2"; then
            ok=yes; break
        fi
        sleep 0.1
    done
    [ "$ok" = yes ] || { cat "$work/h$i/keeper.log" >&2; die "avahi-daemon on h$i did not come up"; }
done
say "$hosts hosts up, $links link(s) each (IPv6: $ipv6)"

if [ $# -eq 0 ]; then
    # Built-in check: each host publishes one service and must browse all of them.
    set -- sh -c '
        avahi-publish -s "hearth-check-$HEARTH_HOST" _hearth._tcp 7420 v=1 a=00000000000000aa s=00000000000000bb "d=000000000000000$HEARTH_HOST_INDEX" >/dev/null 2>&1 &
        publisher=$!
        n=0
        for _ in $(seq 20); do
            n=$(avahi-browse -prt _hearth._tcp 2>/dev/null | grep "^=" | cut -d";" -f4 | sort -u | grep -c "^hearth-check-" || true)
            [ "$n" -ge "$HEARTH_HOSTS" ] && break
        done
        avahi-browse -prt _hearth._tcp 2>/dev/null | grep "^=" | sort -u
        sleep 2   # let slower hosts finish browsing us
        kill $publisher
        [ "$n" -ge "$HEARTH_HOSTS" ] && echo "ok: sees $n hosts'"'"' services" || { echo "FAIL: sees $n of $HEARTH_HOSTS services"; exit 1; }'
fi

pids=()
for i in $(seq "$hosts"); do
    kpid="$(cat "$work/h$i/keeper.pid")"
    HEARTH_HOST="h$i" HEARTH_HOST_INDEX="$i" HEARTH_HOSTS="$hosts" HEARTH_HOST_ADDRESS="169.254.77.$i" HEARTH_SHARED="$shared" \
        nsenter -t "$kpid" -m -n --wd="$PWD" -- "${HEARTH_AS_USER[@]}" "$@" </dev/null >"$work/h$i/out" 2>"$work/h$i/err" &
    pids+=($!)
done
status=0
for i in $(seq "$hosts"); do
    rc=0
    wait "${pids[$((i - 1))]}" || rc=$?
    sed "s/^/[h$i] /" "$work/h$i/out"
    sed "s/^/[h$i] stderr: /" "$work/h$i/err" >&2
    echo "[h$i] exit $rc"
    [ "$rc" -eq 0 ] || status=1
done
exit "$status"
