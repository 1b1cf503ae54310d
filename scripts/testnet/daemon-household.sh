#!/usr/bin/env bash
# Issue 13's points 1, 2 and 4 on four virtual hosts, each with its own avahi-daemon: run on
# every host at once by multihost.sh (Tests/HearthCommandTests/MultiHostDaemonTests.swift):
#
#   scripts/testnet/multihost.sh -n 4 -4 -- scripts/testnet/daemon-household.sh SHARED HEARTH WRITER
#
# h1 is the laptop (A), h2 the kitchen (B), h3 a NAS that only runs the daemon (C), h4 a
# phone (D). They find each other by mDNS only (no --peer). SHARED is a folder every host sees
# (/tmp is not private to a host; /run is): each host's config and data live there, and the
# hosts pace each other with flag files in it. HEARTH is the hearth binary, WRITER the test
# writer (hearth-test-writer), an app using the library with its defaults.
#
# Each check prints one line starting with "check " (the test reads them) and the script exits
# non-zero if a wait times out. The daemons are stopped on exit.
set -euo pipefail
shared=$1 hearth=$2 writer=$3
. "$(dirname "$0")/host-lib.sh"
passphrase="a household passphrase for the daemon test"

started=$(date +%s.%N)
since() { awk -v now="$(date +%s.%N)" -v then="$1" 'BEGIN { printf "%.1f s", now - then }'; }
elapsed() { since "$started"; }
holders=()
cleanup() {
    for pid in "${holders[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    stop_daemon
}
trap cleanup EXIT
start_daemon() {
    # Not through h(): a function run in the background is a subshell, and SIGTERM would stop
    # that shell, not the daemon.
    "$hearth" daemon --log-level info "${folders[@]}" 2>"$me/daemon.log" &
    daemon_pid=$!
    for _ in $(seq 100); do [ -S "$XDG_RUNTIME_DIR/hearth/daemon.sock" ] && return 0; sleep 0.1; done
    echo "FAIL: h$i's daemon did not start"; cat "$me/daemon.log"; exit 1
}
# Polls `hearth get` (which reads the file the daemon saves) until it prints $3.
get_until() {   # get_until STORE KEY EXPECTED SECONDS
    for _ in $(seq $(( $4 * 5 ))); do
        [ "$(h get --store "$1" "$2" 2>/dev/null || true)" = "$3" ] && return 0
        sleep 0.2
    done
    return 1
}
# Remote addresses of this host's established TCP connections, one per line.
connections() { ss -tnH state established | awk '{print $4}' | sed 's/:[0-9]*$//' | sort; }

# The household: h1 creates it, the others join it with a bundle.
if [ "$i" = 1 ]; then
    h account create --name "Test household" --passphrase "$passphrase" --device h1 >/dev/null
    h account export --output "$shared/bundle" >/dev/null 2>&1
    flag bundle
else
    await bundle
    h account join "$shared/bundle" --passphrase "$passphrase" --device "h$i" >/dev/null
fi
flag "joined-$i"

case $i in
1)  # A, the laptop.
    start_daemon; flag daemon-1
    await daemon-2; await daemon-3
    sleep 3   # let mDNS and the hellos settle, as on a home network
    # Point 1: a one-shot writer sets k = 1 and exits; no app runs anywhere.
    h set --store com.example.colors k 1 --wait 0 >/dev/null
    echo "check background-written at $(elapsed)"
    flag background-written
    # Point 4: B's daemon and 3 apps holding 5 stores show as one service.
    await held-4
    sleep 2
    services=$(avahi-browse -rpt _hearth._tcp 2>/dev/null | awk -F';' '$1 == "=" && $8 == "169.254.77.2" {print $4}' | sort -u)
    echo "check services-of-h2 $(printf '%s\n' "$services" | grep -c . || true) [$(echo $services)]"
    flag browsed
    # Point 2: A writes S, which C never opened, and leaves once C has it.
    h set --store com.example.notes shopping --string milk --wait 0 >/dev/null
    await hub-has-notes
    stop_daemon
    echo "check laptop-left at $(elapsed)"
    flag a-left
    await done 120
    ;;
2)  # B, the kitchen.
    start_daemon; flag daemon-2
    await background-written
    sleep 10
    # A new app process opens the store: it attaches to this device's daemon and has k = 1.
    echo "check background-read $("$writer" get "$data" com.example.colors k)"
    # Point 4: 3 apps holding 5 stores between them.
    for stores in com.example.colors,com.example.a com.example.b,com.example.c com.example.d,com.example.colors; do
        "$writer" hold "$data" "$stores" >"$me/holder-${#holders[@]}.out" 2>&1 &
        holders+=($!)
    done
    for n in 0 1 2; do
        for _ in $(seq 150); do [ "$(grep -c '^opened ' "$me/holder-$n.out" || true)" -ge 2 ] && break; sleep 0.1; done
    done
    echo "check holders $(cat "$me"/holder-*.out | grep -c '^opened .* attached' || true) attached, $(cat "$me"/holder-*.out | grep -c '^opened .* host' || true) hosting"
    sleep 2
    echo "check listening-tcp $(ss -tlnH | wc -l)"
    echo "check connections-of-h2 [$(connections | tr '\n' ' ')]"
    flag held-4
    await browsed
    for pid in "${holders[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    stop_daemon
    flag b-left
    await done 120
    ;;
3)  # C, the NAS: only the daemon, and it never opens com.example.notes itself.
    start_daemon; flag daemon-3
    if get_until com.example.notes shopping '"milk"' 60; then
        echo "check hub-has-notes at $(elapsed)"
    else
        echo "check hub-has-notes never"
    fi
    flag hub-has-notes
    await done 120
    echo "check hub-log $(grep -c 'holding store com.example.notes (served by a peer)' "$me/daemon.log" || true)"
    ;;
4)  # D, the phone: joins the network once A and B have left, and reaches only C.
    await a-left 120; await b-left 120
    start_daemon
    begin=$(date +%s.%N)
    if get_until com.example.notes shopping '"milk"' 60; then
        echo "check phone-got-notes after $(since "$begin")"
    else
        echo "check phone-got-notes never"
    fi
    echo "check connections-of-h4 [$(connections | tr '\n' ' ')]"
    flag done
    ;;
esac
